#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "backoff.h"
#include "client_priv.h"
#include "clock.h"
#include "log.h"
#include "watch.h"
#include "xmalloc.h"

#define DEFAULT_MAX_LINE	(16u << 20)
#define ERRBODY_MAX		(64u << 10)	/* a non-2xx answer's body */

void
watch_decoder_init(struct watch_decoder *d, size_t max_line)
{
	buf_init(&d->line, max_line);
}

void
watch_decoder_reset(struct watch_decoder *d)
{
	buf_reset(&d->line);
}

void
watch_decoder_free(struct watch_decoder *d)
{
	buf_free(&d->line);
}

static int
event_type(const char *s, enum watch_event_type *t)
{
	static const struct { const char *name; enum watch_event_type t; }
	    types[] = {
		{ "ADDED", WATCH_ADDED }, { "MODIFIED", WATCH_MODIFIED },
		{ "DELETED", WATCH_DELETED }, { "BOOKMARK", WATCH_BOOKMARK },
		{ "ERROR", WATCH_ERROR },
	};

	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		if (strcmp(s, types[i].name) == 0) {
			*t = types[i].t;
			return 0;
		}
	return -1;
}

static int
decode_line(const char *p, size_t len, watch_event_fn fn, void *arg,
    struct k8s_error *err)
{
	struct watch_event ev;
	json_error_t jerr;
	json_t *root;
	const char *type;
	size_t i;
	int rc;

	for (i = 0; i < len; i++)
		if (p[i] != ' ' && p[i] != '\t' && p[i] != '\r')
			break;
	if (i == len)
		return 0;
	root = json_loadb(p, len, JSON_ALLOW_NUL, &jerr);
	if (root == NULL)
		return k8s_error_set(err, K8S_EINVAL, 0, NULL,
		    "watch event is not JSON: %s at column %d", jerr.text,
		    jerr.column);
	type = json_string_value(json_object_get(root, "type"));
	ev.object = json_object_get(root, "object");
	if (type == NULL || !json_is_object(ev.object)) {
		rc = k8s_error_set(err, K8S_EINVAL, 0, NULL,
		    "watch event lacks %s", type ? "an object" : "a type");
	} else if (event_type(type, &ev.type) != 0) {
		rc = k8s_error_set(err, K8S_EINVAL, 0, NULL,
		    "unknown watch event type '%.32s'", type);
	} else {
		rc = fn(arg, &ev);
	}
	json_decref(root);
	return rc;
}

int
watch_decoder_feed(struct watch_decoder *d, const char *data, size_t len,
    watch_event_fn fn, void *arg, struct k8s_error *err)
{
	const char *nl;
	int rc;

	while (len > 0 && (nl = memchr(data, '\n', len)) != NULL) {
		size_t n = (size_t)(nl - data);

		if (d->line.len == 0) {
			/* The common case: a whole line in this chunk. */
			if (n > d->line.max)
				goto toobig;
			rc = decode_line(data, n, fn, arg, err);
		} else {
			if (buf_append(&d->line, data, n) != 0)
				goto toobig;
			rc = decode_line(d->line.data, d->line.len, fn, arg,
			    err);
			buf_reset(&d->line);
		}
		if (rc != 0)
			return rc;
		data += n + 1;
		len -= n + 1;
	}
	if (len > 0 && buf_append(&d->line, data, len) != 0)
		goto toobig;
	return 0;
toobig:
	buf_reset(&d->line);
	return k8s_error_set(err, K8S_ETOOBIG, 0, NULL,
	    "watch event longer than %zu bytes", d->line.max);
}

struct watch {
	struct k8s_client	*client;
	struct watch_opts	 opts;
	struct watch_handlers	 h;
	CURLM			*multi;		/* lives as long as w: wakeup target */
	atomic_bool		 stop;
	pthread_mutex_t		 lock;		/* guards rv, stats; with cond */
	pthread_cond_t		 cond;		/* backoff sleeps wait on it */
	char			*rv;
	struct watch_stats	 stats;
	long long		 next_tick;	/* mono ms */

	/* Per connection, touched only by the run thread. */
	struct watch_decoder	 dec;
	struct buf		 errbody;
	long			 status;
	int			 result;	/* why the stream was cut */
	int			 handler_rc;	/* on_event's non-zero, kept apart */
	unsigned long		 conn_events;	/* events and bookmarks received */
	long long		 conn_start;	/* mono ms */
	struct k8s_error	 err;
};

/* watch_once: the handler asked to stop (its value is in handler_rc). */
#define HANDLER_STOPPED	1
/* A connection that lived this long, or carried an event, was healthy. */
#define HEALTHY_MS	30000
/* A normal end sooner than this, with nothing received, is a failure. */
#define TOO_SHORT_MS	1000

static unsigned
rand32(void)
{
	static _Thread_local unsigned s;

	if (s == 0) {
		struct timespec ts;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		s = (unsigned)ts.tv_nsec ^ ((unsigned)getpid() << 16) ^ 0x9e3779b9u;
	}
	s ^= s << 13;
	s ^= s >> 17;
	s ^= s << 5;
	return s;
}

struct watch *
watch_new(struct k8s_client *c, const struct watch_opts *opts,
    const struct watch_handlers *h)
{
	struct watch *w = xcalloc(1, sizeof(*w));

	w->client = c;
	w->opts = *opts;
	w->h = *h;
	if (w->opts.max_line == 0)
		w->opts.max_line = DEFAULT_MAX_LINE;
	if (w->opts.timeout_seconds <= 0)
		w->opts.timeout_seconds = 300 + rand32() % 300;
	if (w->opts.backoff_initial_ms <= 0)
		w->opts.backoff_initial_ms = 500;
	if (w->opts.backoff_max_ms <= 0)
		w->opts.backoff_max_ms = 30000;
	if ((w->multi = curl_multi_init()) == NULL) {
		fprintf(stderr, "fatal: curl_multi_init failed\n");
		abort();
	}
	atomic_init(&w->stop, false);
	pthread_mutex_init(&w->lock, NULL);
	clock_cond_init(&w->cond);
	watch_decoder_init(&w->dec, w->opts.max_line);
	buf_init(&w->errbody, ERRBODY_MAX);
	return w;
}

void
watch_free(struct watch *w)
{
	if (w == NULL)
		return;
	/* A watch_stop() still inside its locked section finishes first. */
	pthread_mutex_lock(&w->lock);
	pthread_mutex_unlock(&w->lock);
	curl_multi_cleanup(w->multi);
	pthread_mutex_destroy(&w->lock);
	pthread_cond_destroy(&w->cond);
	watch_decoder_free(&w->dec);
	buf_free(&w->errbody);
	free(w->rv);
	free(w);
}

void
watch_stop(struct watch *w)
{
	pthread_mutex_lock(&w->lock);
	atomic_store(&w->stop, true);
	pthread_cond_broadcast(&w->cond);
	curl_multi_wakeup(w->multi);	/* under the lock: see watch_free */
	pthread_mutex_unlock(&w->lock);
}

char *
watch_resource_version(struct watch *w)
{
	char *rv;

	pthread_mutex_lock(&w->lock);
	rv = w->rv ? xstrdup(w->rv) : NULL;
	pthread_mutex_unlock(&w->lock);
	return rv;
}

void
watch_get_stats(struct watch *w, struct watch_stats *out)
{
	pthread_mutex_lock(&w->lock);
	*out = w->stats;
	pthread_mutex_unlock(&w->lock);
}

static void
set_rv(struct watch *w, const char *rv)
{
	pthread_mutex_lock(&w->lock);
	free(w->rv);
	w->rv = rv ? xstrdup(rv) : NULL;
	pthread_mutex_unlock(&w->lock);
}

/* Sleep ms, or less if stopped. Returns K8S_ECANCELED when stopped. */
static int
wait_ms(struct watch *w, long ms)
{
	struct timespec until;
	int rc;

	clock_mono_ts(&until, clock_mono_ms() + ms);
	pthread_mutex_lock(&w->lock);
	while (!atomic_load(&w->stop))
		if (pthread_cond_timedwait(&w->cond, &w->lock, &until) != 0)
			break;
	rc = atomic_load(&w->stop) ? K8S_ECANCELED : 0;
	pthread_mutex_unlock(&w->lock);
	return rc;
}

static void
maybe_tick(struct watch *w)
{
	if (w->opts.tick_ms <= 0 || w->h.on_tick == NULL ||
	    clock_mono_ms() < w->next_tick)
		return;
	w->next_tick = clock_mono_ms() + w->opts.tick_ms;
	w->h.on_tick(w->h.arg);
}

static int
on_stream_event(void *arg, const struct watch_event *ev)
{
	struct watch *w = arg;
	const char *rv = json_string_value(json_object_get(
	    json_object_get(ev->object, "metadata"), "resourceVersion"));
	int rc = 0;

	switch (ev->type) {
	case WATCH_ERROR: {
		long code = (long)json_integer_value(json_object_get(ev->object,
		    "code"));
		const char *msg = json_string_value(json_object_get(ev->object,
		    "message"));
		const char *reason = json_string_value(json_object_get(
		    ev->object, "reason"));

		return k8s_error_set(&w->err, code == 410 ? K8S_EGONE :
		    k8s_errcode_from_http(code ? code : 500, reason), code,
		    reason, "watch error event: %s", msg ? msg : "(none)");
	}
	case WATCH_BOOKMARK:
		pthread_mutex_lock(&w->lock);
		w->stats.bookmarks++;
		pthread_mutex_unlock(&w->lock);
		break;
	default:
		rc = w->h.on_event ? w->h.on_event(w->h.arg, ev) : 0;
		if (rc != 0) {
			/* Not resumed past: the event was not handled. */
			w->handler_rc = rc;
			return rc;
		}
		break;
	}
	w->conn_events++;
	if (rv && rv[0])
		set_rv(w, rv);
	return rc;
}

static size_t
stream_write(char *p, size_t size, size_t n, void *arg)
{
	struct watch *w = arg;
	size_t len = size * n;

	if (w->status < 200 || w->status >= 300) {
		/* An error answer: keep (a capped amount of) it for the message. */
		if (buf_append(&w->errbody, p, len) != 0)
			return 0;
		return len;
	}
	w->result = watch_decoder_feed(&w->dec, p, len, on_stream_event, w,
	    &w->err);
	return w->result == 0 ? len : 0;
}

static size_t
stream_header(char *p, size_t size, size_t n, void *arg)
{
	struct watch *w = arg;
	size_t len = size * n;

	/* The status line of each response (redirects aside) comes first. */
	if (len > 9 && strncmp(p, "HTTP/", 5) == 0) {
		const char *sp = memchr(p, ' ', len);

		if (sp)
			w->status = strtol(sp + 1, NULL, 10);
	}
	return len;
}

static char *
watch_path(struct watch *w, const char *rv, struct k8s_error *err)
{
	struct buf q;
	char *path, num[32];
	int rc;

	if (k8s_path(w->opts.res, w->opts.ns, NULL, NULL, &path, err) != 0)
		return NULL;
	buf_init(&q, 8192);
	rc = buf_append_str(&q, path);
	free(path);
	snprintf(num, sizeof(num), "%ld", w->opts.timeout_seconds);
	rc = rc ? rc : k8s_query_append(&q, "watch", "1");
	rc = rc ? rc : k8s_query_append(&q, "allowWatchBookmarks", "true");
	rc = rc ? rc : k8s_query_append(&q, "resourceVersion", rv);
	rc = rc ? rc : k8s_query_append(&q, "timeoutSeconds", num);
	if (w->opts.label_selector)
		rc = rc ? rc : k8s_query_append(&q, "labelSelector",
		    w->opts.label_selector);
	if (w->opts.field_selector)
		rc = rc ? rc : k8s_query_append(&q, "fieldSelector",
		    w->opts.field_selector);
	if (rc != 0) {
		buf_free(&q);
		k8s_error_set(err, K8S_EINVAL, 0, NULL, "watch query too long");
		return NULL;
	}
	return buf_detach(&q, NULL);
}

/*
 * One watch request from rv until the server ends it (0), the stream fails,
 * or we are stopped (K8S_ECANCELED). Fills w->err on failure.
 */
static int
watch_once(struct watch *w, const char *rv)
{
	struct curl_slist *hdrs = NULL;
	char ebuf[CURL_ERROR_SIZE] = "";
	CURL *h = NULL;
	CURLMsg *msg;
	CURLcode cc = CURLE_OK;
	char *path;
	int running = 1, rc, left;

	k8s_error_clear(&w->err);
	if ((path = watch_path(w, rv, &w->err)) == NULL)
		return w->err.code;
	if ((h = curl_easy_init()) == NULL) {
		fprintf(stderr, "fatal: curl_easy_init failed\n");
		abort();
	}
	rc = k8s_client_setup(w->client, h, "GET", path, 0, &hdrs, &w->err);
	if (rc != 0)
		goto out;
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, stream_write);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, w);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, stream_header);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, w);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, ebuf);
	/* A silent dead peer: nothing at all for well past the server timeout. */
	curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME,
	    w->opts.timeout_seconds + 30);
	watch_decoder_reset(&w->dec);
	buf_reset(&w->errbody);
	w->status = 0;
	w->result = 0;
	w->handler_rc = 0;
	w->conn_events = 0;
	w->conn_start = clock_mono_ms();
	pthread_mutex_lock(&w->lock);
	w->stats.connects++;
	pthread_mutex_unlock(&w->lock);
	log_debug("watch connect", "path=%s", path);

	curl_multi_add_handle(w->multi, h);
	while (running && !atomic_load(&w->stop)) {
		long t = 1000;

		if (curl_multi_perform(w->multi, &running) != CURLM_OK) {
			cc = CURLE_RECV_ERROR;
			break;
		}
		if (!running)
			break;
		if (w->opts.tick_ms > 0) {
			long u = (long)(w->next_tick - clock_mono_ms());

			t = u < 0 ? 0 : (u < t ? u : t);
		}
		curl_multi_poll(w->multi, NULL, 0, (int)t, NULL);
		maybe_tick(w);
	}
	while ((msg = curl_multi_info_read(w->multi, &left)) != NULL)
		if (msg->msg == CURLMSG_DONE && msg->easy_handle == h)
			cc = msg->data.result;
	curl_multi_remove_handle(w->multi, h);

	if (atomic_load(&w->stop)) {
		rc = K8S_ECANCELED;
	} else if (w->handler_rc != 0) {
		rc = HANDLER_STOPPED;
	} else if (w->result != 0) {
		rc = w->result;		/* decoder or handler: err is filled */
	} else if (w->status != 0 && (w->status < 200 || w->status >= 300)) {
		rc = k8s_error_from_response(w->status, w->errbody.data,
		    w->errbody.len, &w->err);
	} else if (cc != CURLE_OK) {
		rc = k8s_error_set(&w->err, K8S_EIO, 0, NULL, "watch %s: %s",
		    w->opts.res->plural, ebuf[0] ? ebuf : curl_easy_strerror(cc));
	} else {
		rc = 0;		/* the server closed it: timeoutSeconds */
	}
out:
	k8s_headers_free(hdrs);
	curl_easy_cleanup(h);
	free(path);
	return rc;
}

int
watch_run(struct watch *w, const char *start_rv)
{
	struct backoff backoff = { .initial_ms = w->opts.backoff_initial_ms,
	    .max_ms = w->opts.backoff_max_ms };
	char *rv, *bad_rv = NULL;
	int rc, healthy;

	w->next_tick = clock_mono_ms() + w->opts.tick_ms;
	set_rv(w, start_rv && start_rv[0] ? start_rv : NULL);
	while (!atomic_load(&w->stop)) {
		maybe_tick(w);
		rv = watch_resource_version(w);
		if (rv == NULL) {
			struct k8s_error err;

			k8s_error_clear(&err);
			rc = w->h.relist(w->h.arg, &rv, &err);
			if (rc == 0 && rv == NULL)
				rc = k8s_error_set(&err, K8S_EINVAL, 0, NULL,
				    "relist gave no resourceVersion");
			if (rc != 0) {
				log_warn("relist failed", "resource=%s code=%ld "
				    "error=\"%s\"", w->opts.res->plural,
				    err.http_status, k8s_strerror(rc));
				goto backoff;
			}
			set_rv(w, rv);
			pthread_mutex_lock(&w->lock);
			w->stats.relists++;
			pthread_mutex_unlock(&w->lock);
		}
		rc = watch_once(w, rv);
		free(rv);
		rv = NULL;
		healthy = w->conn_events > 0 ||
		    clock_mono_ms() - w->conn_start >= HEALTHY_MS;
		if (healthy)
			backoff_reset(&backoff);
		switch (rc) {
		case HANDLER_STOPPED:
			free(bad_rv);
			return w->handler_rc;
		case K8S_ECANCELED:
			continue;
		case 0:
			/* The server closed it (timeoutSeconds): resume at once,
			 * unless it closes as fast as we connect. */
			if (healthy ||
			    clock_mono_ms() - w->conn_start >= TOO_SHORT_MS)
				continue;
			log_warn("watch ended at once", "resource=%s",
			    w->opts.res->plural);
			break;
		case K8S_EGONE:
			/* Our resourceVersion is compacted away: relist now. */
			log_info("watch expired, relisting", "resource=%s",
			    w->opts.res->plural);
			pthread_mutex_lock(&w->lock);
			w->stats.expired++;
			pthread_mutex_unlock(&w->lock);
			set_rv(w, NULL);
			backoff_reset(&backoff);
			continue;
		case K8S_ETOOBIG:
		case K8S_EINVAL:
			/*
			 * A broken stream. Reconnecting from the same version
			 * once is worth it (a proxy may have torn a line);
			 * failing there twice means the next event itself is
			 * unusable, and only a relist gets past it.
			 */
			rv = watch_resource_version(w);
			if (bad_rv && rv && strcmp(bad_rv, rv) == 0) {
				log_warn("watch event unusable twice, relisting",
				    "resource=%s error=\"%s\"",
				    w->opts.res->plural, k8s_strerror(rc));
				set_rv(w, NULL);
				free(rv);
				rv = NULL;
			} else {
				log_warn("watch stream unusable", "resource=%s "
				    "error=\"%s\"", w->opts.res->plural,
				    k8s_strerror(rc));
				free(bad_rv);
				bad_rv = rv;
				rv = NULL;
			}
			break;
		default:
			log_warn("watch failed", "resource=%s status=%ld "
			    "error=\"%s\"", w->opts.res->plural,
			    w->err.http_status, k8s_strerror(rc));
			break;
		}
backoff:
		free(rv);
		rv = NULL;
		if (wait_ms(w, backoff_next(&backoff)) != 0)
			break;
	}
	free(bad_rv);
	return K8S_ECANCELED;
}
