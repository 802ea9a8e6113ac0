/*
 * Unit tests: the egress proxy's ACL helper (proxy/acl.c, aclserve.c):
 * Squid's request lines as 5.7 writes them, the execution's pass from
 * the Proxy-Authorization header or the connection's tag, every
 * decision, the exact replies and their encoding, one write(2) per reply
 * whatever the reads' split, and the line cap.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>

#include "aclserve.h"
#include "base64.h"
#include "egress_token.h"
#include "xmalloc.h"

#define NOW	1700000000LL
static const unsigned char key[] = "0123456789abcdef0123456789abcdef";
static const struct ctl_egress hosts[] = {
	{ .host = "allowed.test", .ports = { 8080, 8443 }, .nports = 2 },
	{ .host = "db.test", .ports = { 5432 }, .nports = 1 },
};

/*
 * The execution's pass as Squid hands it over: AUTH, the header's value
 * %-encoded ("Basic%20" and base64 of USER:PASS), and TAG, "USER.PASS";
 * one expired, one signed with another key.
 */
static char auth[8192], tag[8192], old_auth[8192], forged[8192];

static void
pass(long long exp, const unsigned char *k, char *a, char *t)
{
	struct k8s_error err;
	char *user, p[EGRESS_PASS_LEN + 1], *up, *b64;

	assert_int_equal(egress_token_make(hosts, 2, "0b8f-uid-a", "team-a",
	    "run-x7k2p", exp, k, 32, &user, p, &err), 0);
	up = xasprintf("%s:%s", user, p);
	b64 = base64_encode(up, strlen(up), NULL);
	snprintf(a, 8192, "Basic%%20%s", b64);
	if (t != NULL)
		snprintf(t, 8192, "%s.%s", user, p);
	free(b64);
	free(up);
	free(user);
}

static int
setup(void **state)
{
	(void)state;
	pass(NOW + 60, key, auth, tag);
	pass(NOW, key, old_auth, NULL);
	pass(NOW + 60, (const unsigned char *)"ffffffffffffffffffffffffffffffff",
	    forged, NULL);
	return 0;
}

static long long
now(void)
{
	return NOW;
}

/* line, its "{A}" the header and "{T}" the tag: the reply. */
static const char *
reply(const char *fmt)
{
	static char out[ACL_REPLY_MAX];
	char buf[ACL_LINE_MAX + 1];
	struct acl_request rq;
	size_t o = 0;

	for (const char *p = fmt; *p && o < sizeof(buf) - 1; p++) {
		const char *v = strncmp(p, "{A}", 3) == 0 ? auth :
		    strncmp(p, "{T}", 3) == 0 ? tag : strncmp(p, "{O}", 3) == 0 ?
		    old_auth : strncmp(p, "{F}", 3) == 0 ? forged : NULL;

		if (v != NULL) {
			o += (size_t)snprintf(buf + o, sizeof(buf) - o, "%s", v);
			p += 2;
		} else
			buf[o++] = *p;
	}
	buf[o] = '\0';
	if (acl_parse_line(buf, o, &rq) != 0)
		acl_format_reply(out, rq.channel, ACL_BAD_REQUEST, NULL, NULL);
	else
		acl_answer(&rq, key, 32, NOW, out);
	return out;
}

#define WHO	" uid=0b8f-uid-a ns=team-a name=run-x7k2p"
#define ERR_A	" ERR" WHO " reason="

/* An OK with the header tags the connection with the pass. */
static const char *
ok_tagged(const char *channel)
{
	static char want[2 * 8192];

	snprintf(want, sizeof(want), "%s OK" WHO " clt_conn_tag=%s\n", channel,
	    tag);
	return want;
}

static void
test_decisions(void **state)
{
	static const struct { const char *line, *want; } cases[] = {
		{ "5 {A} - other.test 8443 - CONNECT connect", "5" ERR_A "not-in-list\n" },
		{ "6 {A} - allowed.test 22 - GET connect", "6" ERR_A "not-in-list\n" },
		{ "7 {A} - db.test 8080 - GET connect", "7" ERR_A "not-in-list\n" },
		{ "8 {A} - allowed.test.. 8080 - GET connect", "8" ERR_A "not-in-list\n" },
		{ "9 {A} - allowed.test 8443 - CONNECT tls", "9" ERR_A "no-sni\n" },
		{ "10 {A} - allowed.test 8443 other.test CONNECT tls", "10" ERR_A "sni-mismatch\n" },
		{ "12 {A} - 127.0.0.2 8443 - CONNECT connect", "12" ERR_A "ip-literal\n" },
		{ "13 {A} - 2130706434 8443 - CONNECT connect", "13" ERR_A "ip-literal\n" },
		{ "14 {A} - [::1] 8443 - CONNECT connect", "14" ERR_A "ip-literal\n" },
		{ "15 {A} - 0x7f.0.0.1 8443 - CONNECT connect", "15" ERR_A "ip-literal\n" },
		/* The tag alone (Squid's own check of a spliced tunnel). */
		{ "17 - {T} allowed.test 8443 allowed.test CONNECT connect", "17 OK" WHO "\n" },
		{ "18 - {T} other.test 8443 other.test CONNECT connect", "18" ERR_A "not-in-list\n" },
		/* No pass, a broken one, another key's, an old one. */
		{ "20 - - allowed.test 8080 - GET connect", "20 ERR reason=no-pass\n" },
		{ "21 {F} - allowed.test 8080 - GET connect", "21 ERR reason=bad-pass\n" },
		{ "22 {O} - allowed.test 8080 - GET connect", "22 ERR reason=expired\n" },
		{ "23 Bearer%20x - allowed.test 8080 - GET connect", "23 ERR reason=bad-pass\n" },
		{ "24 Basic%20!! - allowed.test 8080 - GET connect", "24 ERR reason=bad-pass\n" },
		{ "25 Basic%20eDp5 - allowed.test 8080 - GET connect", "25 ERR reason=bad-pass\n" },
		{ "26 Basic%20eHk= - allowed.test 8080 - GET connect", "26 ERR reason=bad-pass\n" },
		{ "27 - nodot allowed.test 8080 - GET connect", "27 ERR reason=bad-pass\n" },
		/* The header wins over a tag: another's pass is not inherited. */
		{ "28 {F} {T} allowed.test 8080 - GET connect", "28 ERR reason=bad-pass\n" },
	};

	(void)state;
	/* As Squid 5.7 writes them: a space after the last field. */
	assert_string_equal(reply("1 {A} - allowed.test 8080 - GET connect "),
	    ok_tagged("1"));
	assert_string_equal(reply("2 {A} {T} allowed.test 8443 allowed.test "
	    "CONNECT tls "), ok_tagged("2"));
	/* Case, one trailing dot and %-escapes are the same name. */
	assert_string_equal(reply("3 {A} - Allowed.TEST. 8443 ALLOWED.test. "
	    "CONNECT tls"), ok_tagged("3"));
	assert_string_equal(reply("4 {A} - %61llowed.test 8080 - GET connect"),
	    ok_tagged("4"));
	/* The SNI is not looked at before the tls stage. */
	assert_string_equal(reply("16 {A} - allowed.test 8443 other.test CONNECT "
	    "connect"), ok_tagged("16"));
	assert_string_equal(reply("11 {A} - allowed.test 8443 allowed.test. "
	    "CONNECT tls"), ok_tagged("11"));
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *got = reply(cases[i].line);

		if (strcmp(got, cases[i].want) != 0)
			fail_msg("%s: got '%s', want '%s'", cases[i].line, got,
			    cases[i].want);
	}
	/* A bad request names nobody, whatever its pass. */
	assert_string_equal(reply("1 {A} - allowed.test 0 - GET connect"),
	    "1 ERR reason=bad-request\n");
}

static void
test_bad_requests(void **state)
{
	static const struct { const char *line, *want; } cases[] = {
		{ "", "ERR reason=bad-request\n" },
		{ "x - - a.test 80 - GET connect", "ERR reason=bad-request\n" },
		{ "123456789012345678901 - - a.test 80 - GET connect", "ERR reason=bad-request\n" },
		/* Squid's 64-bit request ids, past a billion and at the last. */
		{ "1000000000 - - a.test 80 - GET connect", "1000000000 ERR reason=no-pass\n" },
		{ "18446744073709551615 - - a.test 80 - GET connect",
		  "18446744073709551615 ERR reason=no-pass\n" },
		{ " 1 - - a.test 80 - GET connect", "ERR reason=bad-request\n" },
		{ "7 - - a.test 80 - GET", "7 ERR reason=bad-request\n" },
		{ "7 - - a.test 80 - GET connect x", "7 ERR reason=bad-request\n" },
		{ "7 -  - a.test 80 - GET connect", "7 ERR reason=bad-request\n" },
		{ "7 - - a.test 0 - GET connect", "7 ERR reason=bad-request\n" },
		{ "7 - - a.test 65536 - GET connect", "7 ERR reason=bad-request\n" },
		{ "7 - - a.test 8o - GET connect", "7 ERR reason=bad-request\n" },
		{ "7 - - a.test 80 - GET ready", "7 ERR reason=bad-request\n" },
		{ "7 - - - 80 - GET connect", "7 ERR reason=bad-request\n" },
		{ "7 - - a%2.test 80 - GET connect", "7 ERR reason=bad-request\n" },
		{ "7 - - a%zz.test 80 - GET connect", "7 ERR reason=bad-request\n" },
		{ "7 - - a%00.test 80 - GET connect", "7 ERR reason=bad-request\n" },
		{ "7 - - a.test 80 - GET connect%", "7 ERR reason=bad-request\n" },
		{ "7 Basic%00 - a.test 80 - GET connect", "7 ERR reason=bad-request\n" },
	};
	char buf[16] = "7 1\0 a";
	struct acl_request rq;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *got = reply(cases[i].line);

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
test_encoding(void **state)
{
	struct egress_claims odd = { .uid = "a b", .ns = "x=y\"z",
		.name = "%\n" };
	char out[ACL_REPLY_MAX];

	(void)state;
	/* Values are one token: anything but [A-Za-z0-9._-] is %XX. */
	assert_int_equal(acl_format_reply(out, "3", ACL_NOT_IN_LIST, &odd,
	    NULL), 60);
	assert_string_equal(out, "3 ERR uid=a%20b ns=x%3Dy%22z name=%25%0A "
	    "reason=not-in-list\n");
	acl_format_reply(out, "", ACL_OK, NULL, NULL);
	assert_string_equal(out, "OK\n");
	/* A tag on an OK only. */
	acl_format_reply(out, "1", ACL_NO_SNI, &odd, "u.p");
	assert_null(strstr(out, "clt_conn_tag"));
	acl_format_reply(out, "1", ACL_OK, NULL, "u.p");
	assert_string_equal(out, "1 OK clt_conn_tag=u.p\n");
	/* The table: each reason's word, OK none. */
	assert_null(acl_reason_name(ACL_OK));
	assert_string_equal(acl_reason_name(ACL_SNI_MISMATCH), "sni-mismatch");
	assert_string_equal(acl_reason_name(ACL_BAD_PASS), "bad-pass");
}

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
	char *in = xasprintf("1 - %s allowed.test 8080 - GET connect \n"
	    "2 - - allowed.test 8080 - GET connect \n"
	    "3 bad\n"
	    "4 - %s other.test 8443 - CONNECT connect \n", tag, tag);
	const char *const want[] = { "1 OK" WHO "\n", "2 ERR reason=no-pass\n",
		"3 ERR reason=bad-request\n", "4" ERR_A "not-in-list\n" };
	size_t len = strlen(in);
	int sv[2];

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
	/* Every split of the stream into two reads answers the same. */
	for (size_t cut = 0; cut <= len; cut++) {
		struct aclserve s;

		aclserve_init(&s, key, 32, now, sv[0]);
		assert_int_equal(aclserve_feed(&s, in, cut), 0);
		assert_int_equal(aclserve_feed(&s, in + cut, len - cut), 0);
		expect_packets(sv[1], want, 4);
		aclserve_free(&s);
	}
	free(in);
	close(sv[0]);
	close(sv[1]);
}

static void
test_line_cap(void **state)
{
	const char *const want[] = { "42 ERR reason=bad-request\n",
		"ERR reason=bad-request\n", ok_tagged("5") };
	char *big = malloc(3 * ACL_LINE_MAX), *five;
	struct aclserve s;
	int sv[2];

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
	aclserve_init(&s, key, 32, now, sv[0]);
	/* A line of 2 caps, fed in three pieces: one answer, on its channel. */
	memset(big, 'a', 3 * ACL_LINE_MAX);
	memcpy(big, "42 - - a.tes", 13);
	assert_int_equal(aclserve_feed(&s, big, ACL_LINE_MAX - 5), 0);
	assert_int_equal(aclserve_feed(&s, big, ACL_LINE_MAX), 0);
	assert_int_equal(aclserve_feed(&s, big, 10), 0);
	assert_int_equal(aclserve_feed(&s, "\n", 1), 0);
	/* One with no channel; then the stream goes on as before. */
	assert_int_equal(aclserve_feed(&s, big + 13, ACL_LINE_MAX + 1), 0);
	five = xasprintf("\n5 %s - allowed.test 8080 - GET connect\n", auth);
	assert_int_equal(aclserve_feed(&s, five, strlen(five)), 0);
	free(five);
	expect_packets(sv[1], want, 3);
	/* A line of exactly the cap is a line. */
	memset(big, 'a', ACL_LINE_MAX);
	memcpy(big, "6 ", 2);
	big[ACL_LINE_MAX] = '\n';
	assert_int_equal(aclserve_feed(&s, big, ACL_LINE_MAX + 1), 0);
	expect_packets(sv[1], (const char *const[]){ "6 ERR reason=bad-request\n" }, 1);
	/* Past the cap, on a channel of 20 digits: answered on it. */
	memset(big, 'a', ACL_LINE_MAX + 1);
	memcpy(big, "18446744073709551615 ", 21);
	big[ACL_LINE_MAX + 1] = '\n';
	assert_int_equal(aclserve_feed(&s, big, ACL_LINE_MAX + 2), 0);
	expect_packets(sv[1], (const char *const[]){
	    "18446744073709551615 ERR reason=bad-request\n" }, 1);
	/* Squid gone: the write fails, and the feed says so. */
	close(sv[1]);
	assert_int_equal(aclserve_feed(&s, "7 bad\n", 6), -1);
	aclserve_free(&s);
	close(sv[0]);
	free(big);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_decisions),
		cmocka_unit_test(test_bad_requests),
		cmocka_unit_test(test_ip_literal),
		cmocka_unit_test(test_encoding),
		cmocka_unit_test(test_one_write_each),
		cmocka_unit_test(test_line_cap),
	};

	signal(SIGPIPE, SIG_IGN);	/* Squid gone is an error, not a death */
	return cmocka_run_group_tests(tests, setup, NULL);
}
