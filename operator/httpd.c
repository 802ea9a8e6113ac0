#include <sys/types.h>
#include <sys/socket.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <microhttpd.h>

#include "httpd.h"
#include "log.h"
#include "xmalloc.h"

#define CT_TEXT		"text/plain; charset=utf-8"
#define CT_METRICS	"text/plain; version=0.0.4; charset=utf-8"

unsigned int httpd_test_timeout_secs;

struct httpd {
	struct MHD_Daemon	*daemon;
	struct metrics		*metrics;	/* borrowed; may be NULL */
	uint16_t		 port;

	pthread_mutex_t		 lock;		/* guards ready, reason */
	int			 ready;
	char			 reason[HTTPD_REASON_MAX];	/* "" = default */

	/* Held while a check runs, so a setter never frees arg under it. */
	pthread_mutex_t		 check_lock;
	int			(*check)(void *, char *, size_t);
	void			*check_arg;
	int			(*ready_check)(void *);
	void			*ready_arg;

	/*
	 * While MHD_start_daemon runs, libmicrohttpd's complaints on the
	 * starting thread are kept for the error message. Only that thread
	 * touches these.
	 */
	pthread_t		 starter;
	int			 starting;
	char			 start_err[256];
};

static void httpd_mhd_log(void *cls, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

static void
httpd_mhd_log(void *cls, const char *fmt, va_list ap)
{
	struct httpd *h = cls;
	char msg[256], q[LOG_QUOTE_MAX];
	size_t n;

	vsnprintf(msg, sizeof(msg), fmt, ap);
	n = strlen(msg);
	while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == '.'))
		msg[--n] = '\0';
	if (h->starting && pthread_equal(h->starter, pthread_self()))
		snprintf(h->start_err, sizeof(h->start_err), "%s", msg);
	log_debug("libmicrohttpd", "func=%s detail=%s", __func__,
	    log_quote(q, msg));
}

/*
 * Queue a response. body is freed with free() when mode is
 * MHD_RESPMEM_MUST_FREE, even on failure.
 */
static enum MHD_Result
reply(struct MHD_Connection *conn, unsigned int status, const char *ctype,
    const char *body, size_t len, enum MHD_ResponseMemoryMode mode)
{
	struct MHD_Response *r;
	enum MHD_Result ret;

	r = MHD_create_response_from_buffer(len, (void *)body, mode);
	if (r == NULL) {
		if (mode == MHD_RESPMEM_MUST_FREE)
			free((void *)body);
		return MHD_NO;
	}
	if (MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
	    ctype) != MHD_YES ||
	    (status == MHD_HTTP_METHOD_NOT_ALLOWED &&
	    MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW,
	    "GET, HEAD") != MHD_YES)) {
		MHD_destroy_response(r);
		return MHD_NO;
	}
	ret = MHD_queue_response(conn, status, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result
reply_text(struct MHD_Connection *conn, unsigned int status, const char *s)
{
	return reply(conn, status, CT_TEXT, s, strlen(s),
	    MHD_RESPMEM_PERSISTENT);
}

static enum MHD_Result
serve_metrics(struct httpd *h, struct MHD_Connection *conn)
{
	char *text;

	if (h->metrics == NULL)
		return reply_text(conn, MHD_HTTP_NOT_FOUND, "not found");
	if ((text = metrics_render(h->metrics)) == NULL)
		return reply_text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR,
		    "cannot render metrics");
	return reply(conn, MHD_HTTP_OK, CT_METRICS, text, strlen(text),
	    MHD_RESPMEM_MUST_FREE);
}

static enum MHD_Result
serve_healthz(struct httpd *h, struct MHD_Connection *conn)
{
	char why[HTTPD_REASON_MAX] = "";
	int bad = 0;

	pthread_mutex_lock(&h->check_lock);
	if (h->check != NULL)
		bad = h->check(h->check_arg, why, sizeof(why)) != 0;
	pthread_mutex_unlock(&h->check_lock);
	if (!bad)
		return reply_text(conn, MHD_HTTP_OK, "ok");
	why[sizeof(why) - 1] = '\0';
	if (why[0] == '\0')
		strcpy(why, "unhealthy");
	return reply(conn, MHD_HTTP_SERVICE_UNAVAILABLE, CT_TEXT, why,
	    strlen(why), MHD_RESPMEM_MUST_COPY);
}

static enum MHD_Result
serve_readyz(struct httpd *h, struct MHD_Connection *conn)
{
	char why[HTTPD_REASON_MAX];
	int ready;

	pthread_mutex_lock(&h->lock);
	ready = h->ready;
	strcpy(why, h->reason[0] ? h->reason : "not ready");
	pthread_mutex_unlock(&h->lock);
	pthread_mutex_lock(&h->check_lock);
	if (h->ready_check != NULL)
		ready = h->ready_check(h->ready_arg);
	pthread_mutex_unlock(&h->check_lock);
	if (ready)
		return reply_text(conn, MHD_HTTP_OK, "ok");
	return reply(conn, MHD_HTTP_SERVICE_UNAVAILABLE, CT_TEXT, why,
	    strlen(why), MHD_RESPMEM_MUST_COPY);
}

/*
 * Every request is answered on the first call, before any body is read:
 * none of the endpoints takes one, and libmicrohttpd closes the connection
 * rather than read a body nobody asked for.
 */
static enum MHD_Result
httpd_handle(void *cls, struct MHD_Connection *conn, const char *url,
    const char *method, const char *version, const char *upload_data,
    size_t *upload_data_size, void **req_cls)
{
	struct httpd *h = cls;

	(void)version;
	(void)upload_data;
	(void)upload_data_size;
	(void)req_cls;
	if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 &&
	    strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
		return reply_text(conn, MHD_HTTP_METHOD_NOT_ALLOWED,
		    "method not allowed");
	if (strcmp(url, "/metrics") == 0)
		return serve_metrics(h, conn);
	if (strcmp(url, "/healthz") == 0)
		return serve_healthz(h, conn);
	if (strcmp(url, "/readyz") == 0)
		return serve_readyz(h, conn);
	return reply_text(conn, MHD_HTTP_NOT_FOUND, "not found");
}

/*
 * Split addr into host ("" for every address; brackets removed) and port.
 * 0 or K8S_EINVAL.
 */
static int
parse_addr(const char *addr, char *host, size_t hostlen, uint16_t *port,
    int *bracketed, struct k8s_error *err)
{
	const char *colon, *p, *hs = addr, *he;
	unsigned long v = 0;

	if (addr == NULL || (colon = strrchr(addr, ':')) == NULL)
		goto bad;
	for (p = colon + 1; *p; p++) {
		if (*p < '0' || *p > '9' || v > 65535)
			goto bad;
		v = v * 10 + (unsigned long)(*p - '0');
	}
	if (p == colon + 1 || v > 65535)
		goto bad;
	he = colon;
	*bracketed = *hs == '[';
	if (*bracketed) {
		if (he - hs < 3 || he[-1] != ']')
			goto bad;
		hs++;
		he--;
	} else if (memchr(hs, ':', (size_t)(he - hs)) != NULL) {
		goto bad;	/* an IPv6 address needs [brackets] */
	}
	if ((size_t)(he - hs) >= hostlen || memchr(hs, '[', (size_t)(he - hs)) ||
	    memchr(hs, ']', (size_t)(he - hs)))
		goto bad;
	memcpy(host, hs, (size_t)(he - hs));
	host[he - hs] = '\0';
	*port = (uint16_t)v;
	return 0;
bad:
	return k8s_error_set(err, K8S_EINVAL, 0, NULL,
	    "bad listen address '%s': want HOST:PORT, [IPV6]:PORT or :PORT",
	    addr ? addr : "(null)");
}

/* Resolve host into ss with port set. 0 or K8S_EINVAL. */
static int
resolve_host(const char *addr, const char *host, int bracketed,
    uint16_t port, struct sockaddr_storage *ss, struct k8s_error *err)
{
	struct addrinfo hints, *res = NULL, *ai, *pick;
	int rc;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = bracketed ? AF_INET6 : AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = bracketed ? AI_NUMERICHOST : 0;
	if ((rc = getaddrinfo(host, NULL, &hints, &res)) != 0)
		return k8s_error_set(err, K8S_EINVAL, 0, NULL,
		    "bad listen address '%s': cannot resolve '%s': %s", addr,
		    host, gai_strerror(rc));
	/* IPv4 first: "localhost" then works where IPv6 is switched off. */
	for (pick = res, ai = res; ai != NULL; ai = ai->ai_next)
		if (ai->ai_family == AF_INET) {
			pick = ai;
			break;
		}
	memset(ss, 0, sizeof(*ss));
	memcpy(ss, pick->ai_addr, pick->ai_addrlen);
	if (ss->ss_family == AF_INET6)
		((struct sockaddr_in6 *)ss)->sin6_port = htons(port);
	else
		((struct sockaddr_in *)ss)->sin_port = htons(port);
	freeaddrinfo(res);
	return 0;
}

/* Can this host make IPv6 sockets at all? (Some containers cannot.) */
static int
have_ipv6(void)
{
	int fd = socket(AF_INET6, SOCK_STREAM, 0);

	if (fd < 0)
		return 0;
	close(fd);
	return 1;
}

int
httpd_start(const char *addr, struct metrics *metrics, struct httpd **out,
    struct k8s_error *err)
{
	struct httpd *h = NULL;
	struct sockaddr_storage ss;
	struct MHD_OptionItem bind_opts[2] = {
		{ MHD_OPTION_END, 0, NULL }, { MHD_OPTION_END, 0, NULL },
	};
	const union MHD_DaemonInfo *info;
	char host[NI_MAXHOST];
	unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO |
	    MHD_USE_ERROR_LOG;
	uint16_t port = 0;
	int bracketed = 0, rc;

	*out = NULL;
	if ((rc = parse_addr(addr, host, sizeof(host), &port, &bracketed,
	    err)) != 0)
		goto out;
	if (host[0] != '\0') {
		if ((rc = resolve_host(addr, host, bracketed, port, &ss,
		    err)) != 0)
			goto out;
		if (ss.ss_family == AF_INET6)
			flags |= MHD_USE_IPv6;
		bind_opts[0].option = MHD_OPTION_SOCK_ADDR;
		bind_opts[0].ptr_value = &ss;
	} else if (have_ipv6()) {
		flags |= MHD_USE_DUAL_STACK;
	}

	h = xcalloc(1, sizeof(*h));
	h->metrics = metrics;
	pthread_mutex_init(&h->lock, NULL);
	pthread_mutex_init(&h->check_lock, NULL);
	h->starter = pthread_self();
	h->starting = 1;
	h->daemon = MHD_start_daemon(flags, port, NULL, NULL, httpd_handle, h,
	    MHD_OPTION_EXTERNAL_LOGGER, httpd_mhd_log, h,
	    MHD_OPTION_CONNECTION_LIMIT, (unsigned int)HTTPD_MAX_CONNS,
	    MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned int)HTTPD_PER_IP_CONNS,
	    MHD_OPTION_CONNECTION_TIMEOUT, httpd_test_timeout_secs ?
	    httpd_test_timeout_secs : (unsigned int)HTTPD_TIMEOUT_SECS,
	    MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)HTTPD_CONN_MEMORY,
	    MHD_OPTION_ARRAY, bind_opts,
	    MHD_OPTION_END);
	h->starting = 0;
	if (h->daemon == NULL) {
		rc = k8s_error_set(err, K8S_EIO, 0, NULL,
		    "cannot listen on '%s': %s", addr,
		    h->start_err[0] ? h->start_err :
		    "libmicrohttpd failed to start");
		goto out;
	}
	info = MHD_get_daemon_info(h->daemon, MHD_DAEMON_INFO_BIND_PORT);
	h->port = info ? info->port : port;
	log_info("http server listening", "addr=%s port=%u", addr,
	    (unsigned)h->port);
	*out = h;
	h = NULL;
	rc = 0;
out:
	if (h != NULL)
		httpd_stop(h);
	return rc;
}

uint16_t
httpd_port(struct httpd *h)
{
	return h->port;
}

void
httpd_set_ready(struct httpd *h, int ready)
{
	pthread_mutex_lock(&h->lock);
	h->ready = ready != 0;
	pthread_mutex_unlock(&h->lock);
}

void
httpd_set_not_ready_reason(struct httpd *h, const char *why)
{
	pthread_mutex_lock(&h->lock);
	snprintf(h->reason, sizeof(h->reason), "%s", why ? why : "");
	pthread_mutex_unlock(&h->lock);
}

void
httpd_set_health_check(struct httpd *h,
    int (*check)(void *arg, char *why, size_t whylen), void *arg)
{
	pthread_mutex_lock(&h->check_lock);
	h->check = check;
	h->check_arg = arg;
	pthread_mutex_unlock(&h->check_lock);
}

void
httpd_set_ready_check(struct httpd *h, int (*ready)(void *arg), void *arg)
{
	pthread_mutex_lock(&h->check_lock);
	h->ready_check = ready;
	h->ready_arg = arg;
	pthread_mutex_unlock(&h->check_lock);
}

void
httpd_stop(struct httpd *h)
{
	if (h == NULL)
		return;
	if (h->daemon != NULL)
		MHD_stop_daemon(h->daemon);
	pthread_mutex_destroy(&h->check_lock);
	pthread_mutex_destroy(&h->lock);
	free(h);
}
