/*
 * Unit tests: the egress proxy's ACL helper (proxy/acl.c, aclserve.c,
 * grants.c): Squid's request lines as 5.7 writes them, every decision,
 * the exact replies and their encoding, one write(2) per reply whatever
 * the reads' split, the line cap, the ready file, and the grants'
 * watch against a scripted API server: grants appear, move, go, clash,
 * fail to parse, and go stale.
 */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "aclserve.h"
#include "clock.h"
#include "fakeapi.h"
#include "grants.h"

static struct ctl_egress hosts[] = {
	{ .host = "allowed.test", .ports = { 8080, 8443 }, .nports = 2 },
	{ .host = "db.test", .ports = { 5432 }, .nports = 1 },
};
static struct egress_grant grant = { .uid = "0b8f-uid-a", .ns = "team-a",
	.name = "run-x7k2p", .pod_ip = "127.0.0.1", .addr = 0x7f000001,
	.hosts = hosts, .nhosts = 2 };

/* The reply to line as the helper answers it from grant (or none). */
static const char *
reply(const char *line, const struct egress_grant *g, int ambiguous,
    int stale)
{
	static char out[ACL_REPLY_MAX];
	char buf[ACL_LINE_MAX + 1];
	struct acl_request rq;

	snprintf(buf, sizeof(buf), "%s", line);
	if (acl_parse_line(buf, strlen(buf), &rq) != 0)
		acl_format_reply(out, rq.channel, ACL_BAD_REQUEST, g);
	else
		acl_format_reply(out, rq.channel, acl_decide(&rq, g, ambiguous,
		    stale), g);
	return out;
}

#define OK_A	" OK uid=0b8f-uid-a ns=team-a name=run-x7k2p\n"
#define ERR_A	" ERR uid=0b8f-uid-a ns=team-a name=run-x7k2p reason="

static void
test_decisions(void **state)
{
	static const struct { const char *line, *want; } cases[] = {
		/* As Squid 5.7 writes them: a space after the last field. */
		{ "1 127.0.0.1 allowed.test 8080 - GET connect ", "1" OK_A },
		{ "0 127.0.0.1 allowed.test 8443 - CONNECT connect ", "0" OK_A },
		{ "2 127.0.0.1 allowed.test 8443 allowed.test CONNECT tls ", "2" OK_A },
		/* Case, one trailing dot and %-escapes are the same name. */
		{ "3 127.0.0.1 Allowed.TEST. 8443 ALLOWED.test. CONNECT tls", "3" OK_A },
		{ "4 127.0.0.1 %61llowed.test 8080 - GET connect", "4" OK_A },
		{ "5 127.0.0.1 other.test 8443 - CONNECT connect", "5" ERR_A "not-in-list\n" },
		{ "6 127.0.0.1 allowed.test 22 - GET connect", "6" ERR_A "not-in-list\n" },
		{ "7 127.0.0.1 db.test 8080 - GET connect", "7" ERR_A "not-in-list\n" },
		{ "8 127.0.0.1 allowed.test.. 8080 - GET connect", "8" ERR_A "not-in-list\n" },
		{ "9 127.0.0.1 allowed.test 8443 - CONNECT tls", "9" ERR_A "no-sni\n" },
		{ "10 127.0.0.1 allowed.test 8443 other.test CONNECT tls", "10" ERR_A "sni-mismatch\n" },
		{ "11 127.0.0.1 allowed.test 8443 allowed.test. CONNECT tls", "11" OK_A },
		{ "12 127.0.0.1 127.0.0.2 8443 - CONNECT connect", "12" ERR_A "ip-literal\n" },
		{ "13 127.0.0.1 2130706434 8443 - CONNECT connect", "13" ERR_A "ip-literal\n" },
		{ "14 127.0.0.1 [::1] 8443 - CONNECT connect", "14" ERR_A "ip-literal\n" },
		{ "15 127.0.0.1 0x7f.0.0.1 8443 - CONNECT connect", "15" ERR_A "ip-literal\n" },
		/* The SNI is not looked at before the tls stage. */
		{ "16 127.0.0.1 allowed.test 8443 other.test CONNECT connect", "16" OK_A },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *got = reply(cases[i].line, &grant, 0, 0);

		if (strcmp(got, cases[i].want) != 0)
			fail_msg("%s: got '%s', want '%s'", cases[i].line, got,
			    cases[i].want);
	}
	assert_string_equal(reply("1 127.0.0.9 allowed.test 8080 - GET connect",
	    NULL, 0, 0), "1 ERR reason=no-execution\n");
	assert_string_equal(reply("1 127.0.0.1 allowed.test 8080 - GET connect",
	    NULL, 1, 0), "1 ERR reason=ambiguous\n");
	/* Stale comes before all: nothing the grants say is trusted. */
	assert_string_equal(reply("1 127.0.0.1 allowed.test 8080 - GET connect",
	    &grant, 0, 1), "1 ERR reason=stale\n");
	assert_string_equal(reply("1 127.0.0.1 allowed.test 8080 - GET connect",
	    NULL, 1, 1), "1 ERR reason=stale\n");
	/* A bad request names nobody, even from a known address. */
	assert_string_equal(reply("1 127.0.0.1 allowed.test 0 - GET connect",
	    &grant, 0, 0), "1 ERR reason=bad-request\n");
}

static void
test_bad_requests(void **state)
{
	static const struct { const char *line, *want; } cases[] = {
		{ "", "ERR reason=bad-request\n" },
		{ "x 127.0.0.1 a.test 80 - GET connect", "ERR reason=bad-request\n" },
		{ "1234567890 127.0.0.1 a.test 80 - GET connect", "ERR reason=bad-request\n" },
		{ " 1 127.0.0.1 a.test 80 - GET connect", "ERR reason=bad-request\n" },
		{ "7 127.0.0.1 a.test 80 - GET", "7 ERR reason=bad-request\n" },
		{ "7 127.0.0.1 a.test 80 - GET connect x", "7 ERR reason=bad-request\n" },
		{ "7 127.0.0.1  a.test 80 - GET connect", "7 ERR reason=bad-request\n" },
		{ "7 127.0.0.1 a.test 0 - GET connect", "7 ERR reason=bad-request\n" },
		{ "7 127.0.0.1 a.test 65536 - GET connect", "7 ERR reason=bad-request\n" },
		{ "7 127.0.0.1 a.test 8o - GET connect", "7 ERR reason=bad-request\n" },
		{ "7 127.0.0.1 a.test 80 - GET ready", "7 ERR reason=bad-request\n" },
		{ "7 127.0.0.1 - 80 - GET connect", "7 ERR reason=bad-request\n" },
		{ "7 127.0.0.1 a%2.test 80 - GET connect", "7 ERR reason=bad-request\n" },
		{ "7 127.0.0.1 a%zz.test 80 - GET connect", "7 ERR reason=bad-request\n" },
		{ "7 127.0.0.1 a%00.test 80 - GET connect", "7 ERR reason=bad-request\n" },
		{ "7 127.0.0.1 a.test 80 - GET connect%", "7 ERR reason=bad-request\n" },
	};
	char buf[16] = "7 1\0 a";
	struct acl_request rq;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *got = reply(cases[i].line, &grant, 0, 0);

		if (strcmp(got, cases[i].want) != 0)
			fail_msg("'%s': got '%s', want '%s'", cases[i].line, got,
			    cases[i].want);
	}
	/* A NUL inside the line; a line past the cap. */
	assert_int_equal(acl_parse_line(buf, 6, &rq), -1);
	assert_string_equal(rq.channel, "");
	assert_int_equal(acl_parse_line(buf, ACL_LINE_MAX + 1, &rq), -1);
}

static void
test_ip_literal(void **state)
{
	static const char *const yes[] = { "127.0.0.1", "2130706434", "0x7f000001",
		"0177.0.0.1", "127.1", "1.2.3.4", "0x7f.0x0.0.0x1", "::1",
		"[::ffff:1.2.3.4]", "fe80::1%25eth0" };
	static const char *const no[] = { "allowed.test", "1.2.3.4.5", "1..2",
		"1.2.3.", "0x", "0xg.1", "a1.2.3.4", "1.2.3.4a", "" };

	(void)state;
	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
		if (!acl_ip_literal(yes[i]))
			fail_msg("%s: not seen as a literal", yes[i]);
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
		if (acl_ip_literal(no[i]))
			fail_msg("%s: seen as a literal", no[i]);
}

static void
test_src_and_encoding(void **state)
{
	struct egress_grant odd = { .uid = "a b", .ns = "x=y\"z",
		.name = "%\n", .hosts = hosts, .nhosts = 1 };
	char out[ACL_REPLY_MAX];
	uint32_t a = 0;

	(void)state;
	assert_int_equal(acl_src_addr("10.1.2.3", &a), 0);
	assert_int_equal(a, 0x0a010203);
	assert_int_equal(acl_src_addr("::ffff:10.1.2.4", &a), 0);
	assert_int_equal(a, 0x0a010204);
	assert_int_equal(acl_src_addr("::1", &a), -1);
	assert_int_equal(acl_src_addr("10.1.2", &a), -1);
	/* Values are one token: anything but [A-Za-z0-9._-] is %XX. */
	assert_int_equal(acl_format_reply(out, "3", ACL_NOT_IN_LIST, &odd), 60);
	assert_string_equal(out, "3 ERR uid=a%20b ns=x%3Dy%22z name=%25%0A "
	    "reason=not-in-list\n");
	acl_format_reply(out, "", ACL_OK, NULL);
	assert_string_equal(out, "OK\n");
	/* The table: each reason's word, OK none. */
	assert_null(acl_reason_name(ACL_OK));
	assert_string_equal(acl_reason_name(ACL_SNI_MISMATCH), "sni-mismatch");
	assert_string_equal(acl_reason_name(ACL_BAD_REQUEST), "bad-request");
}

/* A stand-in source: the grant above for 127.0.0.1; stale on demand. */
static int stand_in_stale;

static size_t
stand_in_answer(void *arg, const struct acl_request *rq,
    char out[ACL_REPLY_MAX])
{
	uint32_t a;
	int mine = acl_src_addr(rq->src, &a) == 0 && a == grant.addr;

	(void)arg;
	return acl_format_reply(out, rq->channel, acl_decide(rq, mine ?
	    &grant : NULL, 0, stand_in_stale), mine ? &grant : NULL);
}

static int
stand_in_is_stale(void *arg)
{
	(void)arg;
	return stand_in_stale;
}

static const struct aclserve_source stand_in = { stand_in_answer,
	stand_in_is_stale, NULL };

/* Each packet read from a SOCK_SEQPACKET pair is one write(2). */
static void
expect_packets(int fd, const char *const *want, size_t n)
{
	char got[ACL_REPLY_MAX + 1];

	for (size_t i = 0; i < n; i++) {
		ssize_t r = recv(fd, got, sizeof(got) - 1, MSG_DONTWAIT);

		assert_true(r > 0);
		got[r] = '\0';
		assert_string_equal(got, want[i]);
	}
	assert_true(recv(fd, got, sizeof(got), MSG_DONTWAIT) < 0);
}

static void
test_one_write_each(void **state)
{
	static const char in[] = "1 127.0.0.1 allowed.test 8080 - GET connect \n"
	    "2 127.0.0.9 allowed.test 8080 - GET connect \n"
	    "3 bad\n"
	    "4 127.0.0.1 other.test 8443 - CONNECT connect \n";
	static const char *const want[] = { "1" OK_A,
		"2 ERR reason=no-execution\n", "3 ERR reason=bad-request\n",
		"4" ERR_A "not-in-list\n" };
	int sv[2];

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
	/* Every split of the stream into two reads answers the same. */
	for (size_t cut = 0; cut <= sizeof(in) - 1; cut++) {
		struct aclserve s;

		aclserve_init(&s, &stand_in, sv[0], NULL);
		assert_int_equal(aclserve_feed(&s, in, cut), 0);
		assert_int_equal(aclserve_feed(&s, in + cut,
		    sizeof(in) - 1 - cut), 0);
		expect_packets(sv[1], want, 4);
		aclserve_free(&s);
	}
	close(sv[0]);
	close(sv[1]);
}

static void
test_line_cap(void **state)
{
	static const char *const want[] = { "42 ERR reason=bad-request\n",
		"ERR reason=bad-request\n", "5" OK_A };
	char *big = malloc(3 * ACL_LINE_MAX);
	struct aclserve s;
	int sv[2];

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
	aclserve_init(&s, &stand_in, sv[0], NULL);
	/* A line of 2 caps, fed in three pieces: one answer, on its channel. */
	memset(big, 'a', 3 * ACL_LINE_MAX);
	memcpy(big, "42 127.0.0.1 ", 13);
	assert_int_equal(aclserve_feed(&s, big, ACL_LINE_MAX - 5), 0);
	assert_int_equal(aclserve_feed(&s, big, ACL_LINE_MAX), 0);
	assert_int_equal(aclserve_feed(&s, big, 10), 0);
	assert_int_equal(aclserve_feed(&s, "\n", 1), 0);
	/* One with no channel; then the stream goes on as before. */
	assert_int_equal(aclserve_feed(&s, big + 13, ACL_LINE_MAX + 1), 0);
	assert_int_equal(aclserve_feed(&s, "\n5 127.0.0.1 allowed.test 8080 - "
	    "GET connect\n", 45), 0);
	expect_packets(sv[1], want, 3);
	/* A line of exactly the cap is a line. */
	memset(big, 'a', ACL_LINE_MAX);
	memcpy(big, "6 ", 2);
	big[ACL_LINE_MAX] = '\n';
	assert_int_equal(aclserve_feed(&s, big, ACL_LINE_MAX + 1), 0);
	expect_packets(sv[1], (const char *const[]){ "6 ERR reason=bad-request\n" }, 1);
	/* Squid gone: the write fails, and the feed says so. */
	close(sv[1]);
	assert_int_equal(aclserve_feed(&s, "7 bad\n", 6), -1);
	aclserve_free(&s);
	close(sv[0]);
	free(big);
}

static void
test_ready_file(void **state)
{
	char path[] = "/tmp/airlock-acl-ready-XXXXXX";
	struct aclserve s;
	struct stat st;
	int fd = mkstemp(path);

	(void)state;
	close(fd);
	unlink(path);
	aclserve_init(&s, &stand_in, -1, path);
	stand_in_stale = 1;
	aclserve_readiness(&s);
	assert_int_equal(stat(path, &st), -1);
	stand_in_stale = 0;
	aclserve_readiness(&s);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_size, 0);
	stand_in_stale = 1;
	aclserve_readiness(&s);
	assert_int_equal(stat(path, &st), -1);
	stand_in_stale = 0;
	aclserve_free(&s);
}

/* ---- the grants' watch, against a scripted API server ---- */

#define CM(uid, ip, hostjson) "{\"metadata\":{\"name\":\"airlock-egress-" uid \
	"\",\"namespace\":\"airlock\",\"resourceVersion\":\"1\"},\"data\":{\"uid\":\"" \
	uid "\",\"namespace\":\"team-a\",\"name\":\"run-" uid "\",\"podIP\":\"" ip \
	"\",\"hosts\":\"[{\\\"host\\\":\\\"" hostjson "\\\",\\\"ports\\\":[443]}]\"}}"
#define EV(type, obj) "{\"type\":\"" type "\",\"object\":" obj "}\n"

static const char *
ask(struct grants *gs, const char *src)
{
	static char out[ACL_REPLY_MAX];
	char line[128];
	struct acl_request rq;

	snprintf(line, sizeof(line), "1 %s a.test 443 - CONNECT connect", src);
	assert_int_equal(acl_parse_line(line, strlen(line), &rq), 0);
	grants_answer(gs, &rq, out);
	return out;
}

/* Wait (at most 5 s) until src is answered want. */
static void
await(struct grants *gs, const char *src, const char *want)
{
	long long end = clock_mono_ms() + 5000;

	while (strcmp(ask(gs, src), want) != 0 && clock_mono_ms() < end)
		nanosleep(&(struct timespec){ 0, 5 * 1000000L }, NULL);
	assert_string_equal(ask(gs, src), want);
}

static void
test_grants_watch(void **state)
{
	struct fakeapi *api = fakeapi_start();
	struct k8s_config *cfg = fakeapi_config(api, NULL);
	struct k8s_client *c;
	struct k8s_error err;
	struct grants *gs;

	(void)state;
	assert_int_equal(k8s_client_new(cfg, NULL, &c, &err), 0);
	/* a at .5; b does not parse (an upper-case host): skipped. */
	fakeapi_push(api, 200, NULL, "{\"metadata\":{\"resourceVersion\":\"10\"},"
	    "\"items\":[" CM("a", "10.0.0.5", "a.test") "," CM("b", "10.0.0.7",
	    "A.test") "]}", 0);
	/* a moves to .6, where c appears too: ambiguous. */
	fakeapi_push(api, 200, NULL, EV("MODIFIED", CM("a", "10.0.0.6", "a.test"))
	    EV("ADDED", CM("c", "10.0.0.6", "a.test")), FAKEAPI_HOLD);
	/* c goes; then a quiet watch that does not answer: stale. */
	fakeapi_push(api, 200, NULL, EV("DELETED", CM("c", "10.0.0.6", "a.test")),
	    FAKEAPI_HOLD);
	fakeapi_push(api, 200, NULL, "", FAKEAPI_HOLD);
	gs = grants_new(c, "airlock", 2000);
	assert_string_equal(ask(gs, "10.0.0.5"), "1 ERR reason=stale\n");
	assert_int_equal(grants_start(gs), 0);
	await(gs, "10.0.0.5", "1 OK uid=a ns=team-a name=run-a\n");
	assert_int_equal(grants_len(gs), 1);
	assert_string_equal(ask(gs, "10.0.0.7"), "1 ERR reason=no-execution\n");
	assert_string_equal(fakeapi_request(api, 0), "GET /api/v1/namespaces/"
	    "airlock/configmaps?labelSelector=app.kubernetes.io%2Fcomponent%3D"
	    "egress-grant&limit=500");
	fakeapi_release(api);
	await(gs, "10.0.0.6", "1 ERR reason=ambiguous\n");
	assert_string_equal(ask(gs, "10.0.0.5"), "1 ERR reason=no-execution\n");
	fakeapi_release(api);
	await(gs, "10.0.0.6", "1 OK uid=a ns=team-a name=run-a\n");
	assert_int_equal(grants_len(gs), 1);
	/* The watch now answers nothing: stale within 2 s and a bit. */
	await(gs, "10.0.0.6", "1 ERR reason=stale\n");
	assert_true(grants_stale(gs));
	grants_free(gs);
	k8s_client_free(c);
	k8s_config_free(cfg);
	fakeapi_stop(api);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_decisions),
		cmocka_unit_test(test_bad_requests),
		cmocka_unit_test(test_ip_literal),
		cmocka_unit_test(test_src_and_encoding),
		cmocka_unit_test(test_one_write_each),
		cmocka_unit_test(test_line_cap),
		cmocka_unit_test(test_ready_file),
		cmocka_unit_test(test_grants_watch),
	};

	signal(SIGPIPE, SIG_IGN);	/* Squid gone is an error, not a death */
	return cmocka_run_group_tests(tests, NULL, NULL);
}
