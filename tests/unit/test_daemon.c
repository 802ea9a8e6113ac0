/*
 * Unit tests: operator/daemon.c's flag parsing: a bad number exits 2
 * naming the flag and the range (run in a child), a good one is taken;
 * daemon_die ends the process without exit handlers; the probes'
 * listener answers while slow clients hold every slot of the other;
 * /readyz answers what the daemon's ready() says at the request.
 */
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
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>
#include <curl/curl.h>

#include "daemon.h"
#include "itutil.h"

/* daemon_flag_number(s) in a child: its exit status and what it printed. */
static int
child(const char *s, long long lo, long long hi, char *out, size_t n)
{
	int p[2], st;
	ssize_t got;
	pid_t pid;

	assert_int_equal(pipe(p), 0);
	if ((pid = fork()) == 0) {
		dup2(p[1], 2);
		close(p[0]);
		printf("%lld\n", daemon_flag_number("prog", "--flag", s, lo, hi));
		_exit(0);
	}
	close(p[1]);
	got = read(p[0], out, n - 1);
	out[got > 0 ? got : 0] = '\0';
	close(p[0]);
	waitpid(pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static void
test_flag_number(void **state)
{
	static const char *const bad[] = { "0", "65", "-1", "x", "", "2s", " 2",
	    "2 ", "99999999999999999999999", "0x10", "1e3" };
	char out[256], want[256];

	(void)state;
	assert_int_equal(daemon_flag_number("prog", "--flag", "1", 1, 64), 1);
	assert_int_equal(daemon_flag_number("prog", "--flag", "64", 1, 64), 64);
	assert_int_equal(daemon_flag_number("prog", "--flag", "3600000", 1000,
	    3600000), 3600000);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(want, sizeof(want), "prog: --flag: '%s' is not a number "
		    "from 1 to 64\n", bad[i]);
		if (child(bad[i], 1, 64, out, sizeof(out)) != 2 ||
		    strcmp(out, want) != 0)
			fail_msg("'%s': said '%s'", bad[i], out);
	}
}

static void
say_exit_handler(void)
{
	fputs("exit handler ran\n", stderr);
}

/*
 * daemon_die: the line and the status, and no exit handler: OpenSSL's
 * would free what running TLS threads use (the controller's SIGSEGV).
 */
static void
test_die(void **state)
{
	char out[256];
	ssize_t got;
	size_t n;
	int p[2], st;
	pid_t pid;

	(void)state;
	assert_int_equal(pipe(p), 0);
	if ((pid = fork()) == 0) {
		dup2(p[1], 2);
		close(p[0]);
		atexit(say_exit_handler);
		daemon_die("prog", 3, "cannot listen on '%s': %s", ":80",
		    "busy");
	}
	close(p[1]);
	for (n = 0; n < sizeof(out) - 1; n += (size_t)got)
		if ((got = read(p[0], out + n, sizeof(out) - 1 - n)) <= 0)
			break;
	out[n] = '\0';
	close(p[0]);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 3);
	assert_string_equal(out, "prog: cannot listen on ':80': busy\n");
}

static int now_ready;

static int
ready(void *arg)
{
	(*(int *)arg)++;
	return now_ready;
}

static size_t
discard(char *p, size_t size, size_t n, void *arg)
{
	(void)p;
	(void)arg;
	return size * n;
}

static long
readyz(uint16_t port)
{
	CURL *c = curl_easy_init();
	char url[64];
	long code = 0;

	snprintf(url, sizeof(url), "http://127.0.0.1:%u/readyz", (unsigned)port);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 5L);
	assert_int_equal(curl_easy_perform(c), CURLE_OK);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
	curl_easy_cleanup(c);
	return code;
}

/*
 * Asked at each request, never a copy from a poll: a controller that had
 * just become leader answered ready for up to 100 ms from the poll before
 * it led (seen: a test read "ready" and found an execution not looked at).
 */
static void
test_readyz_asked(void **state)
{
	struct daemon d = { .name = "test" };
	uint16_t port;
	int calls = 0;

	(void)state;
	now_ready = 0;
	daemon_serve(&d, "127.0.0.1:0", NULL, ready, &calls);
	port = httpd_port(d.httpd);
	for (int i = 0; i < 20; i++) {
		now_ready = i % 2;
		assert_int_equal(readyz(port), now_ready ? 200 : 503);
	}
	assert_int_equal(calls, 20);
	/* A signal came: not ready, whatever the daemon says, and not asked. */
	now_ready = 1;
	d.quitting = 1;
	assert_int_equal(readyz(port), 503);
	assert_int_equal(calls, 20);
	httpd_stop(d.httpd);
}

/* What a GET answered: the status (0: none) and the body. */
struct got {
	CURLcode	 rc;
	long		 status;
	char		 body[64];
	long		 ms;		/* how long it took */
};

static size_t
keep(char *p, size_t size, size_t n, void *arg)
{
	struct got *g = arg;
	size_t have = strlen(g->body), len = size * n;

	if (len > sizeof(g->body) - 1 - have)
		len = sizeof(g->body) - 1 - have;
	memcpy(g->body + have, p, len);
	g->body[have + len] = '\0';
	return size * n;
}

/* GET path on 127.0.0.1:port, giving up after timeout_ms, as a probe does. */
static void
get(uint16_t port, const char *path, long timeout_ms, struct got *g)
{
	CURL *c = curl_easy_init();
	char url[64];
	long t0 = it_mono_ms();

	memset(g, 0, sizeof(*g));
	snprintf(url, sizeof(url), "http://127.0.0.1:%u%s", (unsigned)port,
	    path);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, keep);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, g);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
	g->rc = curl_easy_perform(c);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &g->status);
	curl_easy_cleanup(c);
	g->ms = it_mono_ms() - t0;
}

/* Issue 27's client: 16 addresses, each at the per-address limit. */
#define LORIS_ADDRS	16
#define LORIS_CONNS	(LORIS_ADDRS * HTTPD_PER_IP_CONNS)

/* A connection to 127.0.0.1:port from 127.0.0.(10 + i), request begun. */
static int
loris_open(uint16_t port, int i)
{
	struct sockaddr_in src, dst;
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	assert_true(fd >= 0);
	memset(&src, 0, sizeof(src));
	src.sin_family = AF_INET;
	src.sin_addr.s_addr = htonl(0x7f000000u | (uint32_t)(10 + i));
	dst = src;
	dst.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	dst.sin_port = htons(port);
	assert_int_equal(bind(fd, (struct sockaddr *)&src, sizeof(src)), 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&dst, sizeof(dst)), 0);
	assert_int_equal(write(fd, "GET /", 5), 5);
	return fd;
}

/* The idle timeout here (httpd_test_timeout_secs): HTTPD_TIMEOUT_SECS
 * (5 s) would be waited out in full for nothing but time. */
#define IDLE_SECS	2

/*
 * Issue 27: 64 connections from 16 addresses (4 each, the per-address
 * limit) that trickle a byte every half second, under the idle timeout,
 * hold every slot of the metrics listener: past that timeout a probe
 * there still gets no answer. The probes' listener answers within 1 s all the
 * same, /healthz and /readyz, and serves nothing else.
 */
static void
test_probes_own_listener(void **state)
{
	struct daemon d = { .name = "test" };
	struct pollfd pfd[LORIS_CONNS];
	uint16_t mport, pport;
	long t0;
	struct got g;
	int calls = 0, i;

	(void)state;
	now_ready = 1;
	httpd_test_timeout_secs = IDLE_SECS;
	daemon_serve(&d, "127.0.0.1:0", "127.0.0.1:0", ready, &calls);
	httpd_test_timeout_secs = 0;
	mport = httpd_port(d.httpd);
	pport = httpd_port(d.probes);
	assert_true(mport != pport);
	for (i = 0; i < LORIS_CONNS; i++)
		pfd[i].fd = loris_open(mport, i / HTTPD_PER_IP_CONNS);
	t0 = it_mono_ms();
	/* A byte every half second each, past the idle timeout and a second
	 * more. */
	while (it_mono_ms() - t0 < (IDLE_SECS + 1) * 1000L) {
		usleep(500 * 1000);
		for (i = 0; i < LORIS_CONNS; i++)
			assert_int_equal(write(pfd[i].fd, "a", 1), 1);
	}
	/* Every one still open: the server closed none of them. */
	for (i = 0; i < LORIS_CONNS; i++)
		pfd[i].events = POLLIN;
	assert_int_equal(poll(pfd, LORIS_CONNS, 0), 0);

	/* The metrics listener is full: no answer in a probe's time. */
	get(mport, "/healthz", 1000, &g);
	assert_int_equal(g.status, 0);
	assert_true(g.rc != CURLE_OK);

	/* The probes' listener answers at once. */
	get(pport, "/healthz", 1000, &g);
	assert_int_equal(g.rc, CURLE_OK);
	assert_int_equal(g.status, 200);
	assert_string_equal(g.body, "ok");
	assert_true(g.ms < 1000);
	get(pport, "/readyz", 1000, &g);
	assert_int_equal(g.rc, CURLE_OK);
	assert_int_equal(g.status, 200);
	assert_string_equal(g.body, "ok");
	assert_true(g.ms < 1000);
	assert_int_equal(calls, 1);
	now_ready = 0;
	get(pport, "/readyz", 1000, &g);
	assert_int_equal(g.status, 503);
	assert_string_equal(g.body, "not ready");
	/* Not the scrapers' port: no registry there. */
	get(pport, "/metrics", 1000, &g);
	assert_int_equal(g.status, 404);

	for (i = 0; i < LORIS_CONNS; i++)
		close(pfd[i].fd);
	httpd_stop(d.httpd);
	httpd_stop(d.probes);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_flag_number),
		cmocka_unit_test(test_die),
		cmocka_unit_test(test_readyz_asked),
		cmocka_unit_test(test_probes_own_listener),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
