/*
 * Unit tests: the egress proxy's log daemon (proxy/accesslog.c). The
 * access-log lines are as Squid 5.7 wrote them with accesslog.c's
 * logformat on the loopback rehearsal (docs/network-proxy-research/);
 * each decision gives exactly one record, with the exact JSON, and the
 * tenant's bytes never break it.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "accesslog.h"

#define HEAD(time, ns, name, uid) "{\"apiVersion\":\"airlock.dev/v1alpha1\"," \
	"\"kind\":\"CodeExecutionEgress\",\"time\":\"" time "\",\"namespace\":" \
	ns ",\"name\":" name ",\"uid\":" uid
#define A_HEAD(time) HEAD(time, "\"team-a\"", "\"run-x7k2p\"", "\"0b8f-uid-a\"")

/* What the daemon writes for the commands in (a string, read from a file). */
static char *
run(const char *in)
{
	static char out[65536];
	FILE *f = tmpfile();
	size_t len = strlen(in), got = 0;
	int pout[2];
	ssize_t r;

	assert_non_null(f);
	assert_int_equal(fwrite(in, 1, len, f), len);
	assert_int_equal(fflush(f), 0);
	rewind(f);
	assert_int_equal(pipe(pout), 0);
	assert_int_equal(accesslog_run(fileno(f), pout[1]), 0);
	fclose(f);
	close(pout[1]);
	while ((r = read(pout[0], out + got, sizeof(out) - 1 - got)) > 0)
		got += (size_t)r;
	out[got] = '\0';
	close(pout[0]);
	return out;
}

static void
one(const char *lines, const char *want)
{
	char *got = run(lines);

	if (strcmp(got, want) != 0)
		fail_msg("for\n%s\ngot  %s\nwant %s", lines, got, want);
}

static void
test_allowed_get(void **state)
{
	(void)state;
	one("L1795864168.291 127.0.0.1 49892 53 GET allowed.test 8080 - "
	    "127.0.0.2 TCP_MISS 200 - - allowed 0b8f-uid-a team-a run-x7k2p "
	    "135 241 5\n",
	    A_HEAD("2026-11-28T11:09:28.291Z") ",\"client\":\"127.0.0.1:49892\","
	    "\"method\":\"GET\",\"host\":\"allowed.test\",\"port\":8080,\"sni\":"
	    "null,\"server\":\"127.0.0.2\",\"decision\":\"allowed\",\"reason\":"
	    "null,\"bytesOut\":135,\"bytesIn\":241,\"durationMillis\":5}\n");
}

static void
test_allowed_splice(void **state)
{
	(void)state;
	/* The CONNECT's own line, then its tunnel's: one record, the tunnel's. */
	one("L1795864168.352 127.0.0.1 49950 59 CONNECT allowed.test 8443 "
	    "allowed.test - NONE_NONE 200 - splice allowed 0b8f-uid-a team-a "
	    "run-x7k2p 118 0 3\n"
	    "L1795864168.360 127.0.0.1 49950 60 CONNECT allowed.test 8443 "
	    "allowed.test 127.0.0.2 TCP_TUNNEL 500 - splice allowed 0b8f-uid-a "
	    "team-a run-x7k2p 700 2103 7\n",
	    A_HEAD("2026-11-28T11:09:28.360Z") ",\"client\":\"127.0.0.1:49950\","
	    "\"method\":\"CONNECT\",\"host\":\"allowed.test\",\"port\":8443,"
	    "\"sni\":\"allowed.test\",\"server\":\"127.0.0.2\",\"decision\":"
	    "\"allowed\",\"reason\":null,\"bytesOut\":700,\"bytesIn\":2103,"
	    "\"durationMillis\":7}\n");
}

static void
test_refused(void **state)
{
	(void)state;
	/* Bumped to serve the page: the CONNECT, then the page's GET. */
	one("L1795864168.515 127.0.0.1 50056 66 CONNECT other.test 8443 "
	    "other.test - TCP_DENIED 200 ERR_ACCESS_DENIED bump not-in-list "
	    "0b8f-uid-a team-a run-x7k2p 114 0 7\n"
	    "L1795864168.516 127.0.0.1 50056 67 GET other.test 8443 other.test "
	    "- NONE_NONE 403 ERR_ACCESS_DENIED - - - - - 79 1517 0\n",
	    A_HEAD("2026-11-28T11:09:28.515Z") ",\"client\":\"127.0.0.1:50056\","
	    "\"method\":\"CONNECT\",\"host\":\"other.test\",\"port\":8443,"
	    "\"sni\":\"other.test\",\"server\":null,\"decision\":\"refused\","
	    "\"reason\":\"not-in-list\",\"bytesOut\":114,\"bytesIn\":0,"
	    "\"durationMillis\":7}\n");
	one("L1795864168.429 127.0.0.1 50022 62 CONNECT allowed.test 8443 "
	    "other.test - NONE_NONE 200 - terminate sni-mismatch 0b8f-uid-a "
	    "team-a run-x7k2p 68 0 0\n",
	    A_HEAD("2026-11-28T11:09:28.429Z") ",\"client\":\"127.0.0.1:50022\","
	    "\"method\":\"CONNECT\",\"host\":\"allowed.test\",\"port\":8443,"
	    "\"sni\":\"other.test\",\"server\":null,\"decision\":\"refused\","
	    "\"reason\":\"sni-mismatch\",\"bytesOut\":68,\"bytesIn\":0,"
	    "\"durationMillis\":0}\n");
	one("L1795864168.544 127.0.0.1 50088 69 CONNECT 127.0.0.2 8443 - - "
	    "TCP_DENIED 200 ERR_ACCESS_DENIED bump ip-literal 0b8f-uid-a team-a "
	    "run-x7k2p 112 0 6\n"
	    "L1795864168.546 127.0.0.1 50088 70 GET 127.0.0.2 8443 - - "
	    "NONE_NONE 403 ERR_ACCESS_DENIED - - - - - 78 1515 0\n",
	    A_HEAD("2026-11-28T11:09:28.544Z") ",\"client\":\"127.0.0.1:50088\","
	    "\"method\":\"CONNECT\",\"host\":\"127.0.0.2\",\"port\":8443,"
	    "\"sni\":null,\"server\":null,\"decision\":\"refused\",\"reason\":"
	    "\"ip-literal\",\"bytesOut\":112,\"bytesIn\":0,\"durationMillis\":6}\n");
	/* No execution: no identity at all. */
	one("L1795864174.336 127.0.0.5 48968 84 CONNECT allowed.test 8443 "
	    "allowed.test - TCP_DENIED 200 ERR_ACCESS_DENIED bump no-execution "
	    "- - - 118 0 6\n",
	    HEAD("2026-11-28T11:09:34.336Z", "null", "null", "null")
	    ",\"client\":\"127.0.0.5:48968\",\"method\":\"CONNECT\",\"host\":"
	    "\"allowed.test\",\"port\":8443,\"sni\":\"allowed.test\",\"server\":"
	    "null,\"decision\":\"refused\",\"reason\":\"no-execution\","
	    "\"bytesOut\":118,\"bytesIn\":0,\"durationMillis\":6}\n");
	/* Allowed, but not TLS inside the CONNECT: Squid refused it. */
	one("L1795864174.387 127.0.0.1 53988 89 CONNECT allowed.test 8080 - - "
	    "NONE_NONE 200 ERR_PROTOCOL_UNKNOWN peek allowed 0b8f-uid-a team-a "
	    "run-x7k2p 118 0 0\n",
	    A_HEAD("2026-11-28T11:09:34.387Z") ",\"client\":\"127.0.0.1:53988\","
	    "\"method\":\"CONNECT\",\"host\":\"allowed.test\",\"port\":8080,"
	    "\"sni\":null,\"server\":null,\"decision\":\"refused\",\"reason\":"
	    "\"not-tls\",\"bytesOut\":118,\"bytesIn\":0,\"durationMillis\":0}\n");
}

static void
test_hostile_bytes(void **state)
{
	char line[1200], want[1200];
	int n;

	(void)state;
	/*
	 * Quotes, a backslash, a NUL, a newline, UTF-8 and 0xff, %-encoded:
	 * printable ones decoded and JSON-escaped, the others kept as sent.
	 */
	one("L1795864168.329 127.0.0.1 1 2 GET a%22b%5Cc%00d%0Ae%C3%A9%ff "
	    "80 x%20y - TCP_DENIED 403 ERR_ACCESS_DENIED - not-in-list "
	    "0b8f-uid-a team-a run-x7k2p 1 2 3\n",
	    A_HEAD("2026-11-28T11:09:28.329Z") ",\"client\":\"127.0.0.1:1\","
	    "\"method\":\"GET\",\"host\":\"a\\\"b\\\\c%00d%0Ae%C3%A9%ff\","
	    "\"port\":80,\"sni\":\"x%20y\",\"server\":null,\"decision\":"
	    "\"refused\",\"reason\":\"not-in-list\",\"bytesOut\":1,\"bytesIn\":2,"
	    "\"durationMillis\":3}\n");
	/* A host of 300 bytes: its first 253, then "...". */
	n = snprintf(line, sizeof(line), "L1795864168.329 127.0.0.1 1 2 GET ");
	memset(line + n, 'h', 300);
	n += 300;
	snprintf(line + n, sizeof(line) - (size_t)n, " 80 - - TCP_DENIED 403 "
	    "ERR_ACCESS_DENIED - not-in-list 0b8f-uid-a team-a run-x7k2p 1 2 3\n");
	n = snprintf(want, sizeof(want), "%s", A_HEAD("2026-11-28T11:09:28.329Z")
	    ",\"client\":\"127.0.0.1:1\",\"method\":\"GET\",\"host\":\"");
	memset(want + n, 'h', 253);
	n += 253;
	snprintf(want + n, sizeof(want) - (size_t)n, "...\",\"port\":80,\"sni\":"
	    "null,\"server\":null,\"decision\":\"refused\",\"reason\":"
	    "\"not-in-list\",\"bytesOut\":1,\"bytesIn\":2,\"durationMillis\":3}\n");
	one(line, want);
}

static void
test_dropped(void **state)
{
	static const char *const bad[] = {
		/* A field short; one too many; a double space. */
		"1795864168.291 127.0.0.1 49892 53 GET a.test 8080 - - TCP_MISS 200 - - allowed u n x 1 2",
		"1795864168.291 127.0.0.1 49892 53 GET a.test 8080 - - TCP_MISS 200 - - allowed u n x 1 2 3 4",
		"1795864168.291 127.0.0.1  49892 53 GET a.test 8080 - - TCP_MISS 200 - - allowed u n x 1 2 3",
		/* Not a port, a time, an address, a count. */
		"1795864168.291 127.0.0.1 49892 53 GET a.test 80x - - TCP_MISS 200 - - allowed u n x 1 2 3",
		"1795864168 127.0.0.1 49892 53 GET a.test 8080 - - TCP_MISS 200 - - allowed u n x 1 2 3",
		"1795864168.291 127.0.0.x 49892 53 GET a.test 8080 - - TCP_MISS 200 - - allowed u n x 1 2 3",
		"1795864168.291 127.0.0.1 49892 53 GET a.test 8080 - - TCP_MISS 200 - - allowed u n x -1 2 3",
	};
	char buf[256];
	int malformed;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(buf, sizeof(buf), "%s", bad[i]);
		assert_null(accesslog_record(buf, strlen(buf), &malformed));
		if (!malformed)
			fail_msg("%s: not malformed", bad[i]);
	}
	/* No reason: no record, and not malformed. */
	snprintf(buf, sizeof(buf), "1795864174.594 127.0.0.1 54126 - GET - - - "
	    "- NONE_NONE 400 - - - - - - 43 1679 5");
	assert_null(accesslog_record(buf, strlen(buf), &malformed));
	assert_int_equal(malformed, 0);
	/* The other commands, a line past the cap and bad lines: nothing. */
	{
		size_t big = ACCESSLOG_LINE_MAX + 10;
		char *in = malloc(big + 64);

		memset(in, 'L', big);
		in[big] = '\n';
		snprintf(in + big + 1, 63, "R\nT\nO\nF\nr10\nb0\n\nLx y\n");
		assert_string_equal(run(in), "");
		free(in);
	}
}

static void
test_gone(void **state)
{
	int pin[2], pout[2];
	static const char line[] = "L1795864168.291 127.0.0.1 49892 53 GET "
	    "allowed.test 8080 - 127.0.0.2 TCP_MISS 200 - - allowed 0b8f-uid-a "
	    "team-a run-x7k2p 135 241 5\n";

	(void)state;
	/* Whoever reads the records is gone: the daemon stops, non-zero. */
	assert_int_equal(pipe(pin), 0);
	assert_int_equal(pipe(pout), 0);
	close(pout[0]);
	assert_int_equal(write(pin[1], line, sizeof(line) - 1),
	    (ssize_t)sizeof(line) - 1);
	close(pin[1]);
	assert_int_equal(accesslog_run(pin[0], pout[1]), -1);
	assert_int_equal(errno, EPIPE);
	close(pin[0]);
	close(pout[1]);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_allowed_get),
		cmocka_unit_test(test_allowed_splice),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_hostile_bytes),
		cmocka_unit_test(test_dropped),
		cmocka_unit_test(test_gone),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
