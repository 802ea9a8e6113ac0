#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "clock.h"
#include "fakeapi.h"
#include "xmalloc.h"

#define MAX_SCRIPT	64
#define MAX_REQS	256

struct reply {
	int	 status;	/* 0: close the connection, no answer */
	char	*retry_after;
	char	*body;
	long	 delay_ms;	/* FAKEAPI_HOLD: until fakeapi_release() */
	int	 echo;		/* >= 0: the body of that request instead */
	int	 hold;		/* with FAKEAPI_HOLD or stream: its place among them */
	int	 stream;	/* the body at once, the end held */
};

/* A stream's answer: its body, then its end held (fakeapi_push_stream). */
struct streamed {
	struct fakeapi	*f;
	char		*body;
	size_t		 len, off;
	int		 hold;
};

struct req {
	char		*line, *body, *auth, *ctype;
	long long	 at;	/* mono ms it arrived */
};

struct fakeapi {
	struct MHD_Daemon	*d;
	char			 url[64];
	pthread_mutex_t		 lock;
	struct reply		 script[MAX_SCRIPT];
	int			 nscript, next;
	struct req		 reqs[MAX_REQS];
	int			 nreqs;
	/* Held and delayed answers wait on cond, so that a release or the
	 * stop ends the wait at once instead of MHD_stop_daemon() joining
	 * a thread that sleeps out the rest of its delay. */
	pthread_cond_t		 cond;
	int			 nholds, released, stopping;
};

struct conn {
	char		*uri;	/* raw, with the query: MHD's url lacks it */
	int		 seen;
	struct buf	 body;
};

static void *
uri_log(void *cls, const char *uri, struct MHD_Connection *c)
{
	struct conn *cn = xcalloc(1, sizeof(*cn));

	(void)cls;
	(void)c;
	cn->uri = xstrdup(uri);
	buf_init(&cn->body, 1 << 20);
	return cn;
}

static const char *
hdr(struct MHD_Connection *c, const char *name)
{
	const char *v = MHD_lookup_connection_value(c, MHD_HEADER_KIND, name);

	return v ? v : "";
}

/* The body, then nothing until released or stopped, then the end. */
static ssize_t
stream_read(void *cls, uint64_t pos, char *out, size_t max)
{
	struct streamed *st = cls;
	size_t n = st->len - st->off < max ? st->len - st->off : max;

	(void)pos;
	if (n > 0) {
		memcpy(out, st->body + st->off, n);
		st->off += n;
		return (ssize_t)n;
	}
	pthread_mutex_lock(&st->f->lock);
	while (!st->f->stopping && st->f->released <= st->hold)
		pthread_cond_wait(&st->f->cond, &st->f->lock);
	pthread_mutex_unlock(&st->f->lock);
	return MHD_CONTENT_READER_END_OF_STREAM;
}

static void
stream_free(void *cls)
{
	struct streamed *st = cls;

	free(st->body);
	free(st);
}

static enum MHD_Result
handle(void *cls, struct MHD_Connection *c, const char *url,
    const char *method, const char *version, const char *data,
    size_t *data_size, void **ctx)
{
	struct fakeapi *f = cls;
	struct conn *cn = *ctx;
	struct MHD_Response *resp;
	struct reply r = { 599, NULL, "{}", 0, -1, 0, 0 };
	char *echoed = NULL;
	const char *q;
	struct buf line;
	enum MHD_Result ret;

	(void)version;
	(void)url;
	if (!cn->seen) {
		cn->seen = 1;
		return MHD_YES;
	}
	if (*data_size > 0) {
		if (buf_append(&cn->body, data, *data_size) != 0)
			return MHD_NO;
		*data_size = 0;
		return MHD_YES;
	}
	/* The whole request is in: record it, answer from the script. */
	buf_init(&line, 1 << 16);
	if (buf_append_str(&line, method) || buf_append_str(&line, " ") ||
	    buf_append_str(&line, cn->uri))
		abort();
	q = NULL;
	pthread_mutex_lock(&f->lock);
	if (f->nreqs < MAX_REQS) {
		struct req *rq = &f->reqs[f->nreqs++];

		rq->line = buf_detach(&line, NULL);
		rq->body = xstrdup(cn->body.data ? cn->body.data : "");
		rq->auth = xstrdup(hdr(c, "Authorization"));
		rq->ctype = xstrdup(hdr(c, "Content-Type"));
		rq->at = clock_mono_ms();
		q = rq->line;
	}
	if (f->next < f->nscript)
		r = f->script[f->next++];
	if (r.echo >= 0)
		echoed = xstrdup(r.echo < f->nreqs ? f->reqs[r.echo].body : "");
	if (r.delay_ms == FAKEAPI_HOLD) {
		while (!f->stopping && f->released <= r.hold)
			pthread_cond_wait(&f->cond, &f->lock);
	} else if (r.delay_ms > 0) {
		struct timespec until;

		clock_mono_ts(&until, clock_mono_ms() + r.delay_ms);
		while (!f->stopping && pthread_cond_timedwait(&f->cond,
		    &f->lock, &until) == 0)
			;
	}
	pthread_mutex_unlock(&f->lock);
	buf_free(&line);
	(void)q;
	if (r.status == 0) {
		free(echoed);
		return MHD_NO;	/* MHD closes the connection unanswered */
	}
	if (echoed)
		r.body = echoed;
	if (r.stream) {
		struct streamed *st = xcalloc(1, sizeof(*st));

		*st = (struct streamed){ f, xstrdup(r.body), strlen(r.body), 0,
		    r.hold };
		resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096,
		    stream_read, st, stream_free);
	} else
		resp = MHD_create_response_from_buffer(strlen(r.body), r.body,
		    MHD_RESPMEM_MUST_COPY);
	free(echoed);
	MHD_add_response_header(resp, "Content-Type", "application/json");
	if (r.retry_after)
		MHD_add_response_header(resp, "Retry-After", r.retry_after);
	ret = MHD_queue_response(c, (unsigned)r.status, resp);
	MHD_destroy_response(resp);
	return ret;
}

static void
completed(void *cls, struct MHD_Connection *c, void **ctx,
    enum MHD_RequestTerminationCode toe)
{
	struct conn *cn = *ctx;

	(void)cls;
	(void)c;
	(void)toe;
	if (cn) {
		buf_free(&cn->body);
		free(cn->uri);
		free(cn);
		*ctx = NULL;
	}
}

struct fakeapi *
fakeapi_start(void)
{
	struct fakeapi *f = xcalloc(1, sizeof(*f));
	const union MHD_DaemonInfo *di;
	struct sockaddr_in sa = { .sin_family = AF_INET };

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	pthread_mutex_init(&f->lock, NULL);
	clock_cond_init(&f->cond);
	f->d = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION |
	    MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, 0, NULL, NULL,
	    handle, f, MHD_OPTION_NOTIFY_COMPLETED, completed, f,
	    MHD_OPTION_URI_LOG_CALLBACK, uri_log, f,
	    MHD_OPTION_SOCK_ADDR, &sa, MHD_OPTION_END);
	if (f->d == NULL) {
		fprintf(stderr, "fakeapi: cannot start\n");
		abort();
	}
	di = MHD_get_daemon_info(f->d, MHD_DAEMON_INFO_BIND_PORT);
	snprintf(f->url, sizeof(f->url), "http://127.0.0.1:%u",
	    (unsigned)di->port);
	return f;
}

void
fakeapi_stop(struct fakeapi *f)
{
	pthread_mutex_lock(&f->lock);
	f->stopping = 1;
	pthread_cond_broadcast(&f->cond);
	pthread_mutex_unlock(&f->lock);
	MHD_stop_daemon(f->d);
	for (int i = 0; i < f->nscript; i++) {
		free(f->script[i].retry_after);
		free(f->script[i].body);
	}
	for (int i = 0; i < f->nreqs; i++) {
		free(f->reqs[i].line);
		free(f->reqs[i].body);
		free(f->reqs[i].auth);
		free(f->reqs[i].ctype);
	}
	pthread_mutex_destroy(&f->lock);
	pthread_cond_destroy(&f->cond);
	free(f);
}

const char *
fakeapi_url(struct fakeapi *f)
{
	return f->url;
}

void
fakeapi_push(struct fakeapi *f, int status, const char *retry_after,
    const char *body, long delay_ms)
{
	pthread_mutex_lock(&f->lock);
	if (f->nscript == MAX_SCRIPT)
		abort();
	f->script[f->nscript++] = (struct reply){ status,
	    retry_after ? xstrdup(retry_after) : NULL, xstrdup(body),
	    delay_ms, -1, delay_ms == FAKEAPI_HOLD ? f->nholds++ : 0, 0 };
	pthread_mutex_unlock(&f->lock);
}

void
fakeapi_push_stream(struct fakeapi *f, const char *body)
{
	pthread_mutex_lock(&f->lock);
	if (f->nscript == MAX_SCRIPT)
		abort();
	f->script[f->nscript++] = (struct reply){ 200, NULL, xstrdup(body), 0,
	    -1, f->nholds++, 1 };
	pthread_mutex_unlock(&f->lock);
}

void
fakeapi_push_echo(struct fakeapi *f, int status, int req)
{
	pthread_mutex_lock(&f->lock);
	if (f->nscript == MAX_SCRIPT)
		abort();
	f->script[f->nscript++] = (struct reply){ status, NULL, xstrdup(""), 0,
	    req, 0, 0 };
	pthread_mutex_unlock(&f->lock);
}

void
fakeapi_release(struct fakeapi *f)
{
	pthread_mutex_lock(&f->lock);
	f->released++;
	pthread_cond_broadcast(&f->cond);
	pthread_mutex_unlock(&f->lock);
}

int
fakeapi_wait_count(struct fakeapi *f, int n, long timeout_ms)
{
	long long end = clock_mono_ms() + timeout_ms;
	int got;

	while ((got = fakeapi_count(f)) < n && clock_mono_ms() < end)
		nanosleep(&(struct timespec){ 0, 1000000L }, NULL);
	return got;
}

int
fakeapi_count(struct fakeapi *f)
{
	int n;

	pthread_mutex_lock(&f->lock);
	n = f->nreqs;
	pthread_mutex_unlock(&f->lock);
	return n;
}

#define REQ_FIELD(fn, field)						\
const char *								\
fn(struct fakeapi *f, int i)						\
{									\
	const char *s;							\
									\
	pthread_mutex_lock(&f->lock);					\
	s = i < f->nreqs ? f->reqs[i].field : "";			\
	pthread_mutex_unlock(&f->lock);					\
	return s;							\
}
REQ_FIELD(fakeapi_request, line)
REQ_FIELD(fakeapi_body, body)
REQ_FIELD(fakeapi_auth, auth)
REQ_FIELD(fakeapi_ctype, ctype)

long long
fakeapi_time(struct fakeapi *f, int i)
{
	long long t;

	pthread_mutex_lock(&f->lock);
	t = i < f->nreqs ? f->reqs[i].at : 0;
	pthread_mutex_unlock(&f->lock);
	return t;
}

struct k8s_config *
fakeapi_config(struct fakeapi *f, const char *token)
{
	char path[] = "/tmp/airlock-fakeapi-XXXXXX";
	struct k8s_config *cfg;
	struct k8s_error err;
	FILE *fp;
	int fd = mkstemp(path);

	if (fd < 0 || (fp = fdopen(fd, "w")) == NULL)
		abort();
	fprintf(fp, "apiVersion: v1\nkind: Config\ncurrent-context: fake\n"
	    "clusters:\n- name: fake\n  cluster:\n    server: %s\n"
	    "users:\n- name: u\n  user:\n%s%s%s"
	    "contexts:\n- name: fake\n  context:\n    cluster: fake\n"
	    "    user: u\n    namespace: ns1\n", f->url,
	    token ? "    token: " : "    {}\n", token ? token : "",
	    token ? "\n" : "");
	fclose(fp);
	if (k8s_config_load_kubeconfig(path, NULL, &cfg, &err) != 0) {
		fprintf(stderr, "fakeapi: config: %s\n", err.message);
		abort();
	}
	unlink(path);
	return cfg;
}

struct informer *
fakeapi_informer(const struct k8s_resource *res, json_t *items,
    json_t *(*transform)(json_t *), char *(*index)(json_t *), long quiet_ms,
    struct fakeapi **src, struct k8s_config **kc, struct k8s_client **cl)
{
	struct informer_opts io = { .res = res, .transform = transform,
	    .index = index };
	struct informer_handlers h = { 0 };
	struct k8s_error err;
	struct informer *inf;
	json_t *l = json_pack("{s:{s:s}, s:o}", "metadata", "resourceVersion",
	    "10", "items", items);
	char *s = json_dumps(l, JSON_COMPACT);

	*src = fakeapi_start();
	*kc = fakeapi_config(*src, NULL);
	if (k8s_client_new(*kc, NULL, cl, &err) != 0) {
		fprintf(stderr, "fakeapi_informer: %s\n", err.message);
		abort();
	}
	fakeapi_push(*src, 200, NULL, s, 0);
	fakeapi_push(*src, 200, NULL, "", quiet_ms);
	free(s);
	json_decref(l);
	inf = informer_new(*cl, &io, &h);
	if (informer_start(inf) != 0 || informer_wait_synced(inf, 5000) != 0) {
		fprintf(stderr, "fakeapi_informer: the cache did not sync\n");
		abort();
	}
	return inf;
}

void
fakeapi_informer_free(struct informer *inf, struct fakeapi *src,
    struct k8s_config *kc, struct k8s_client *cl)
{
	informer_stop(inf);
	informer_free(inf);
	k8s_client_free(cl);
	fakeapi_stop(src);
	k8s_config_free(kc);
}
