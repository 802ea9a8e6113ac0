/* Unit tests: operator/httpd.c, fetched over loopback with libcurl. */
#include <sys/socket.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>
#include <curl/curl.h>

#include "buf.h"
#include "httpd.h"
#include "k8s_error.h"
#include "log.h"
#include "metrics.h"

struct resp {
	CURLcode	 curl_rc;
	long		 status;
	char		 ctype[128];
	char		 allow[256];
	long		 clen;		/* Content-Length, -1 if absent */
	struct buf	 body;
};

static size_t
body_cb(char *p, size_t sz, size_t n, void *arg)
{
	struct resp *r = arg;

	return buf_append(&r->body, p, sz * n) == 0 ? sz * n : 0;
}

static size_t
header_cb(char *p, size_t sz, size_t n, void *arg)
{
	struct resp *r = arg;
	size_t len = sz * n;
	char line[256];

	if (len >= sizeof(line))
		return len;
	memcpy(line, p, len);
	line[len] = '\0';
	line[strcspn(line, "\r\n")] = '\0';
	if (strncasecmp(line, "Allow: ", 7) == 0)
		snprintf(r->allow, sizeof(r->allow), "%s", line + 7);
	else if (strncasecmp(line, "Content-Length: ", 16) == 0)
		r->clen = strtol(line + 16, NULL, 10);
	return len;
}

/* Seconds a fetch may take; the limit test lowers it. */
static long fetch_timeout = 10;
static const char *fetch_iface;		/* the source address, or NULL */

/*
 * method NULL is GET; "HEAD" uses NOBODY; others send a small body. extra
 * is one more request header or NULL. Free r with resp_free().
 */
static void
fetch_host(const char *host, uint16_t port, const char *method,
    const char *path, const char *extra, struct resp *r)
{
	CURL *c = curl_easy_init();
	struct curl_slist *hdrs = NULL;
	char url[256];
	char *ct = NULL;

	assert_non_null(c);
	memset(r, 0, sizeof(*r));
	r->clen = -1;
	buf_init(&r->body, 1 << 20);
	snprintf(url, sizeof(url), "http://%s:%u%s", host, (unsigned)port,
	    path);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
	curl_easy_setopt(c, CURLOPT_TIMEOUT, fetch_timeout);
	if (fetch_iface)
		curl_easy_setopt(c, CURLOPT_INTERFACE, fetch_iface);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, body_cb);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, header_cb);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, r);
	if (method != NULL && strcmp(method, "HEAD") == 0) {
		curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
	} else if (method != NULL) {
		curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, "a=1");
	}
	if (extra != NULL) {
		hdrs = curl_slist_append(hdrs, extra);
		curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
	}
	r->curl_rc = curl_easy_perform(c);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
	if (curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &ct) == CURLE_OK && ct)
		snprintf(r->ctype, sizeof(r->ctype), "%s", ct);
	if (r->body.data == NULL)
		assert_int_equal(buf_append(&r->body, "", 0), 0);
	curl_slist_free_all(hdrs);
	curl_easy_cleanup(c);
}

static void
fetch(uint16_t port, const char *method, const char *path, struct resp *r)
{
	fetch_host("127.0.0.1", port, method, path, NULL, r);
	assert_int_equal(r->curl_rc, CURLE_OK);
}

static void
resp_free(struct resp *r)
{
	buf_free(&r->body);
}

/* Fetch and check status, Content-Type and the exact body. */
static void
expect(uint16_t port, const char *method, const char *path, long status,
    const char *ctype, const char *body)
{
	struct resp r;

	fetch(port, method, path, &r);
	assert_int_equal(r.status, status);
	assert_string_equal(r.ctype, ctype);
	assert_string_equal(r.body.data, body);
	if (method == NULL || strcmp(method, "HEAD") != 0)
		assert_int_equal(r.clen, (long)strlen(body));
	resp_free(&r);
}

#define CT_TEXT		"text/plain; charset=utf-8"
#define CT_METRICS	"text/plain; version=0.0.4; charset=utf-8"

static struct httpd *
start_local(struct metrics *m)
{
	struct httpd *h = NULL;
	struct k8s_error err;

	assert_int_equal(httpd_start("127.0.0.1:0", m, &h, &err), 0);
	assert_non_null(h);
	assert_true(httpd_port(h) > 0);
	return h;
}

static void
test_httpd_bad_addr(void **state)
{
	static const char *const bad[] = {
		"nope", ":99999", ":65536", "", ":", "127.0.0.1:", ":80x",
		":-1", ":+80", "::1:80", "[::1:80", "[]:80", "[::1]]:80",
		"a[b:80", ":1234567890123", "[127.0.0.1]:80", "[zz]:80",
	};
	struct httpd *h = (struct httpd *)&h;
	struct k8s_error err;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		k8s_error_clear(&err);
		assert_int_equal(httpd_start(bad[i], NULL, &h, &err),
		    K8S_EINVAL);
		assert_null(h);
		assert_int_equal(err.code, K8S_EINVAL);
		assert_non_null(strstr(err.message, bad[i]));
	}
	/* The last one is well formed but not an IPv6 address. */
	assert_memory_equal(err.message,
	    "bad listen address '[zz]:80': cannot resolve 'zz': ", 50);
	assert_int_equal(httpd_start("nope", NULL, &h, &err), K8S_EINVAL);
	assert_string_equal(err.message, "bad listen address 'nope': "
	    "want HOST:PORT, [IPV6]:PORT or :PORT");
	assert_int_equal(httpd_start(NULL, NULL, &h, NULL), K8S_EINVAL);
	httpd_stop(NULL);
}

static void
test_httpd_listen_busy(void **state)
{
	struct httpd *h = start_local(NULL), *h2 = (struct httpd *)&h2;
	struct k8s_error err;
	char addr[32], want[64];

	(void)state;
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", (unsigned)httpd_port(h));
	assert_int_equal(httpd_start(addr, NULL, &h2, &err), K8S_EIO);
	assert_null(h2);
	assert_int_equal(err.code, K8S_EIO);
	snprintf(want, sizeof(want), "cannot listen on '%s': ", addr);
	assert_memory_equal(err.message, want, strlen(want));
	assert_true(strlen(err.message) > strlen(want));
	httpd_stop(h);
}

static void
test_httpd_metrics(void **state)
{
	struct metrics *m = metrics_new();
	struct metric *c = metrics_counter(m, "hits_total", "Hits.", "code");
	struct httpd *h = start_local(m);
	struct resp r;
	const char *one = "# HELP hits_total Hits.\n# TYPE hits_total counter\n"
	    "hits_total{code=\"200\"} 1\n";
	const char *two = "# HELP hits_total Hits.\n# TYPE hits_total counter\n"
	    "hits_total{code=\"200\"} 2\nhits_total{code=\"503\"} 1\n";

	(void)state;
	metric_inc(c, "200");
	expect(httpd_port(h), NULL, "/metrics", 200, CT_METRICS, one);
	expect(httpd_port(h), "HEAD", "/metrics", 200, CT_METRICS, "");
	metric_inc(c, "200");
	metric_inc(c, "503");
	expect(httpd_port(h), "GET", "/metrics", 200, CT_METRICS, two);

	/* HEAD: the headers a GET would get, Content-Length too, no body. */
	fetch(httpd_port(h), "HEAD", "/metrics", &r);
	assert_int_equal(r.status, 200);
	assert_int_equal(r.body.len, 0);
	assert_int_equal(r.clen, (long)strlen(two));
	resp_free(&r);
	httpd_stop(h);
	metrics_free(m);
}

static void
test_httpd_no_metrics(void **state)
{
	struct httpd *h = start_local(NULL);

	(void)state;
	expect(httpd_port(h), NULL, "/metrics", 404, CT_TEXT, "not found");
	expect(httpd_port(h), NULL, "/healthz", 200, CT_TEXT, "ok");
	httpd_stop(h);
}

static int
always_ready(void *arg)
{
	(void)arg;
	return 1;
}

static void
test_httpd_readyz(void **state)
{
	struct httpd *h = start_local(NULL);
	uint16_t port = httpd_port(h);

	(void)state;
	expect(port, NULL, "/readyz", 503, CT_TEXT, "not ready");
	httpd_set_not_ready_reason(h, "waiting for leader election");
	expect(port, NULL, "/readyz", 503, CT_TEXT,
	    "waiting for leader election");
	httpd_set_ready(h, 1);
	expect(port, NULL, "/readyz", 200, CT_TEXT, "ok");
	expect(port, "HEAD", "/readyz", 200, CT_TEXT, "");
	httpd_set_ready(h, 0);
	expect(port, NULL, "/readyz", 503, CT_TEXT,
	    "waiting for leader election");
	httpd_set_not_ready_reason(h, NULL);
	expect(port, NULL, "/readyz", 503, CT_TEXT, "not ready");
	httpd_set_ready(h, 7);
	expect(port, NULL, "/readyz", 200, CT_TEXT, "ok");
	/* Readiness and health are separate. */
	expect(port, NULL, "/healthz", 200, CT_TEXT, "ok");
	/* A check, while set, says it instead of the flag. */
	httpd_set_ready(h, 0);
	httpd_set_ready_check(h, always_ready, NULL);
	expect(port, NULL, "/readyz", 200, CT_TEXT, "ok");
	httpd_set_ready_check(h, NULL, NULL);
	expect(port, NULL, "/readyz", 503, CT_TEXT, "not ready");
	httpd_stop(h);
}

struct check_state {
	int		 calls;
	int		 fail;
	const char	*msg;
};

static int
check_fn(void *arg, char *why, size_t whylen)
{
	struct check_state *cs = arg;

	cs->calls++;
	if (cs->fail && cs->msg != NULL)
		snprintf(why, whylen, "%s", cs->msg);
	return cs->fail;
}

static void
test_httpd_healthz(void **state)
{
	struct httpd *h = start_local(NULL);
	uint16_t port = httpd_port(h);
	struct check_state cs = { 0, 0, NULL };
	char longmsg[600];

	(void)state;
	expect(port, NULL, "/healthz", 200, CT_TEXT, "ok");
	httpd_set_health_check(h, check_fn, &cs);
	expect(port, NULL, "/healthz", 200, CT_TEXT, "ok");
	assert_int_equal(cs.calls, 1);
	cs.fail = 1;
	cs.msg = "watch stalled for 300s";
	expect(port, NULL, "/healthz", 503, CT_TEXT, "watch stalled for 300s");
	assert_int_equal(cs.calls, 2);
	cs.msg = NULL;
	expect(port, NULL, "/healthz", 503, CT_TEXT, "unhealthy");
	/* The message is cut to HTTPD_REASON_MAX - 1 bytes. */
	memset(longmsg, 'x', sizeof(longmsg) - 1);
	longmsg[sizeof(longmsg) - 1] = '\0';
	cs.msg = longmsg;
	longmsg[HTTPD_REASON_MAX - 1] = '\0';
	httpd_set_not_ready_reason(h, longmsg);
	expect(port, NULL, "/readyz", 503, CT_TEXT, longmsg);
	longmsg[HTTPD_REASON_MAX - 1] = 'x';
	{
		struct resp r;

		fetch(port, NULL, "/healthz", &r);
		assert_int_equal(r.status, 503);
		assert_int_equal(r.body.len, HTTPD_REASON_MAX - 1);
		assert_memory_equal(r.body.data, longmsg, r.body.len);
		resp_free(&r);
	}
	assert_int_equal(cs.calls, 4);
	httpd_set_health_check(h, NULL, NULL);
	expect(port, NULL, "/healthz", 200, CT_TEXT, "ok");
	assert_int_equal(cs.calls, 4);
	httpd_stop(h);
}

static void
test_httpd_404_405(void **state)
{
	static const char *const methods[] = {
		"POST", "PUT", "DELETE", "PATCH", "OPTIONS",
	};
	struct metrics *m = metrics_new();
	struct httpd *h = start_local(m);
	uint16_t port = httpd_port(h);
	struct resp r;
	size_t i;

	(void)state;
	expect(port, NULL, "/", 404, CT_TEXT, "not found");
	expect(port, NULL, "/nope", 404, CT_TEXT, "not found");
	expect(port, NULL, "/metrics/", 404, CT_TEXT, "not found");
	expect(port, NULL, "/METRICS", 404, CT_TEXT, "not found");
	expect(port, "HEAD", "/nope", 404, CT_TEXT, "");
	expect(port, NULL, "/healthz?verbose=1", 200, CT_TEXT, "ok");
	for (i = 0; i < sizeof(methods) / sizeof(methods[0]); i++) {
		fetch(port, methods[i], "/metrics", &r);
		assert_int_equal(r.status, 405);
		assert_string_equal(r.allow, "GET, HEAD");
		assert_string_equal(r.ctype, CT_TEXT);
		assert_string_equal(r.body.data, "method not allowed");
		resp_free(&r);
	}
	/* Still serving after all that. */
	expect(port, NULL, "/metrics", 200, CT_METRICS, "");
	httpd_stop(h);
	metrics_free(m);
}

static void
test_httpd_oversize_request(void **state)
{
	struct httpd *h = start_local(NULL);
	char *big = malloc(HTTPD_CONN_MEMORY + 100);
	struct resp r;

	(void)state;
	assert_non_null(big);
	memcpy(big, "X-Big: ", 7);
	memset(big + 7, 'a', HTTPD_CONN_MEMORY + 92);
	big[HTTPD_CONN_MEMORY + 99] = '\0';
	fetch_host("127.0.0.1", httpd_port(h), NULL, "/healthz", big, &r);
	assert_int_equal(r.curl_rc, CURLE_OK);
	assert_int_equal(r.status, 431);
	resp_free(&r);
	free(big);
	expect(httpd_port(h), NULL, "/healthz", 200, CT_TEXT, "ok");
	httpd_stop(h);
}

static int
connect_local(uint16_t port)
{
	struct sockaddr_in sin;
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	assert_true(fd >= 0);
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_port = htons(port);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(connect(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	return fd;
}

static double
now_secs(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/*
 * A client holding idle connections cannot starve anyone else: past
 * HTTPD_PER_IP_CONNS from its address the server refuses it at once,
 * while another address (the kubelet's probe) is answered at once; the
 * idle ones are closed after the idle timeout (IDLE_SECS here, set
 * through httpd_test_timeout_secs: HTTPD_TIMEOUT_SECS is 5 s to wait).
 */
#define IDLE_SECS	2

static void
test_httpd_connection_limit(void **state)
{
	struct httpd *h = NULL;
	struct k8s_error err;
	uint16_t port;
	struct timespec ts = { 0, 200 * 1000 * 1000 };
	struct pollfd pfd;
	int fds[HTTPD_PER_IP_CONNS], i;
	double t0, waited;
	struct resp r;
	char c;

	(void)state;
	httpd_test_timeout_secs = IDLE_SECS;
	assert_int_equal(httpd_start("0.0.0.0:0", NULL, &h, &err), 0);
	httpd_test_timeout_secs = 0;
	port = httpd_port(h);
	t0 = now_secs();
	for (i = 0; i < HTTPD_PER_IP_CONNS; i++)
		fds[i] = connect_local(port);
	nanosleep(&ts, NULL);	/* let the server accept them all */
	/* The same address again: refused, not left waiting. */
	fetch_timeout = 3;
	fetch_host("127.0.0.1", port, NULL, "/healthz", NULL, &r);
	assert_int_equal(r.status, 0);
	assert_true(r.curl_rc != CURLE_OPERATION_TIMEDOUT);
	assert_true(now_secs() - t0 < 2);
	resp_free(&r);
	/* Another address: served at once. */
	fetch_iface = "127.0.0.2";
	fetch_host("127.0.0.1", port, NULL, "/healthz", NULL, &r);
	fetch_iface = NULL;
	fetch_timeout = 10;
	assert_int_equal(r.curl_rc, CURLE_OK);
	assert_int_equal(r.status, 200);
	assert_true(now_secs() - t0 < 2);
	resp_free(&r);

	/* The server hangs up on an idle connection after the timeout. */
	pfd.fd = fds[0];
	pfd.events = POLLIN;
	assert_int_equal(poll(&pfd, 1, (IDLE_SECS + 5) * 1000), 1);
	assert_true(read(fds[0], &c, 1) <= 0);
	waited = now_secs() - t0;
	assert_true(waited > IDLE_SECS - 1);
	assert_true(waited < IDLE_SECS + 3);
	nanosleep(&ts, NULL);
	expect(port, NULL, "/healthz", 200, CT_TEXT, "ok");
	for (i = 0; i < HTTPD_PER_IP_CONNS; i++)
		close(fds[i]);
	httpd_stop(h);
}

static void
test_httpd_any_addr(void **state)
{
	struct httpd *h = NULL;
	struct k8s_error err;

	(void)state;
	assert_int_equal(httpd_start(":0", NULL, &h, &err), 0);
	assert_true(httpd_port(h) > 0);
	expect(httpd_port(h), NULL, "/healthz", 200, CT_TEXT, "ok");
	httpd_stop(h);
	assert_int_equal(httpd_start("localhost:0", NULL, &h, &err), 0);
	httpd_stop(h);
}

static void
test_httpd_ipv6(void **state)
{
	struct httpd *h = NULL;
	struct k8s_error err;
	struct resp r;

	(void)state;
	if (httpd_start("[::1]:0", NULL, &h, &err) == K8S_EIO)
		skip();		/* no IPv6 loopback here */
	assert_non_null(h);
	fetch_host("[::1]", httpd_port(h), NULL, "/healthz", NULL, &r);
	assert_int_equal(r.curl_rc, CURLE_OK);
	assert_int_equal(r.status, 200);
	assert_string_equal(r.body.data, "ok");
	resp_free(&r);
	httpd_stop(h);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_httpd_bad_addr),
		cmocka_unit_test(test_httpd_listen_busy),
		cmocka_unit_test(test_httpd_metrics),
		cmocka_unit_test(test_httpd_no_metrics),
		cmocka_unit_test(test_httpd_readyz),
		cmocka_unit_test(test_httpd_healthz),
		cmocka_unit_test(test_httpd_404_405),
		cmocka_unit_test(test_httpd_oversize_request),
		cmocka_unit_test(test_httpd_connection_limit),
		cmocka_unit_test(test_httpd_any_addr),
		cmocka_unit_test(test_httpd_ipv6),
	};
	int rc;

	log_set_level(LOG_LEVEL_WARN);
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
		return 1;
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	curl_global_cleanup();
	return rc;
}
