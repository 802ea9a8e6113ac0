/*
 * Unit tests: controller/egresslog.c, the egress proxy's records counted
 * per execution. The records are made by the proxy's own log daemon
 * (proxy/accesslog.c) from access-log lines as Squid 5.7 wrote them
 * (test_egress_log.c's), so the counter reads what the producer writes;
 * then exact counts, records naming no execution or an unknown one,
 * malformed ones, lines past the cap, lines a resumed stream gives
 * again, and the table's cap.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "accesslog.h"
#include "egresslog.h"
#include "lines.h"
#include "xmalloc.h"

#define UID_A	"0b8f-uid-a"
#define UID_B	"0b8f-uid-b"

/* Squid's lines (accesslog.c's logformat) of execution team-a/NAME, UID. */
#define ALLOWED_GET(uid, name) "L1795864168.291 127.0.0.1 49892 53 GET " \
	"allowed.test 8080 - 127.0.0.2 TCP_MISS 200 - - allowed " uid \
	" team-a " name " 135 241 5\n"
#define ALLOWED_TLS(uid, name) "L1795864168.352 127.0.0.1 49950 59 CONNECT " \
	"allowed.test 8443 allowed.test - NONE_NONE 200 - splice allowed " uid \
	" team-a " name " 118 0 3\n" \
	"L1795864168.360 127.0.0.1 49950 60 CONNECT allowed.test 8443 " \
	"allowed.test 127.0.0.2 TCP_TUNNEL 500 - splice allowed " uid \
	" team-a " name " 700 2103 7\n"
#define REFUSED(uid, name, reason) "L1795864168.515 127.0.0.1 50056 66 " \
	"CONNECT other.test 8443 other.test - TCP_DENIED 200 " \
	"ERR_ACCESS_DENIED bump " reason " " uid " team-a " name " 114 0 7\n" \
	"L1795864168.516 127.0.0.1 50056 67 GET other.test 8443 other.test " \
	"- NONE_NONE 403 ERR_ACCESS_DENIED - - - - - 79 1517 0\n"
#define NO_PASS "L1795864168.600 127.0.0.1 50100 71 CONNECT allowed.test " \
	"8443 allowed.test - TCP_DENIED 200 ERR_ACCESS_DENIED bump no-pass - - " \
	"- 110 0 1\n"

/* The records the daemon writes for Squid's lines in (a string). */
static char *
records(const char *in)
{
	FILE *f = tmpfile();
	char *out = xmalloc(1 << 20);
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
	while ((r = read(pout[0], out + got, (1 << 20) - 1 - got)) > 0)
		got += (size_t)r;
	out[got] = '\0';
	close(pout[0]);
	return out;
}

/* Executions known: team-a/run-a of UID_A and team-a/run-b of UID_B. */
static int
known(void *arg, const char *ns, const char *name, const char *uid)
{
	int *calls = arg;

	(*calls)++;
	return strcmp(ns, "team-a") == 0 &&
	    ((strcmp(name, "run-a") == 0 && strcmp(uid, UID_A) == 0) ||
	    (strcmp(name, "run-b") == 0 && strcmp(uid, UID_B) == 0));
}

/* Count each line of text; the results, by name, one a line. */
static char *
count_lines(struct egresslog *t, const char *text)
{
	char *copy = xstrdup(text), *save = NULL, *res = xstrdup("");
	int calls = 0;

	for (char *l = strtok_r(copy, "\n", &save); l; l = strtok_r(NULL, "\n",
	    &save)) {
		char *next = xasprintf("%s%s\n", res, egresslog_result_name(
		    egresslog_count(t, l, strlen(l), known, &calls)));

		free(res);
		res = next;
	}
	free(copy);
	return res;
}

static void
assert_counts(struct egresslog *t, const char *uid, long long refused,
    long long allowed, long long out, long long in)
{
	struct egress_count c;

	assert_int_equal(egresslog_get(t, uid, &c), 1);
	assert_int_equal(c.refused, refused);
	assert_int_equal(c.allowed, allowed);
	assert_int_equal(c.bytes_out, out);
	assert_int_equal(c.bytes_in, in);
}

/* Every decision of the daemon, counted exactly, per execution. */
static void
test_counts(void **state)
{
	struct egresslog *t = egresslog_new(0);
	struct egress_count c;
	char *recs, *got;

	(void)state;
	recs = records(ALLOWED_GET(UID_A, "run-a") ALLOWED_TLS(UID_A, "run-a")
	    REFUSED(UID_A, "run-a", "not-in-list")
	    REFUSED(UID_A, "run-a", "ip-literal")
	    REFUSED(UID_B, "run-b", "internal-address")
	    REFUSED(UID_A, "run-a", "sni-mismatch") NO_PASS
	    REFUSED("0b8f-uid-c", "run-c", "port")
	    /* A pass of run-a's name with another uid: not run-a's. */
	    REFUSED("0b8f-uid-c", "run-a", "port"));
	got = count_lines(t, recs);
	assert_string_equal(got, "counted\ncounted\ncounted\ncounted\ncounted\n"
	    "counted\nno-execution\nunknown\nunknown\n");
	assert_counts(t, UID_A, 3, 2, 135 + 700, 241 + 2103);
	assert_counts(t, UID_B, 1, 0, 0, 0);
	assert_int_equal(egresslog_len(t), 2);
	assert_int_equal(egresslog_get(t, "0b8f-uid-c", &c), 0);
	assert_int_equal(c.refused, 0);
	free(got);
	free(recs);
	egresslog_free(t);
}

/* Not records, records broken, and records that are not whole. */
static void
test_malformed(void **state)
{
	static const char *const lines[][2] = {
		{ "squid: WARNING: something", "other" },
		{ "", "other" },
		{ "{\"kind\":\"CodeExecutionAudit\",\"uid\":\"" UID_A "\"}", "other" },
		{ "[1, 2]", "other" },
		{ "{\"kind\":\"CodeExecutionEgress\",\"uid\":", "malformed" },
		{ "{\"kind\":\"CodeExecutionEgress\",\"uid\":\"" UID_A "\","
		    "\"namespace\":\"team-a\",\"name\":\"run-a\"}", "malformed" },
		{ "{\"kind\":\"CodeExecutionEgress\",\"uid\":\"" UID_A "\","
		    "\"namespace\":\"team-a\",\"name\":\"run-a\",\"decision\":"
		    "\"maybe\"}", "malformed" },
		{ "{\"kind\":\"CodeExecutionEgress\",\"uid\":\"" UID_A "\","
		    "\"namespace\":\"team-a\",\"name\":\"run-a\",\"decision\":"
		    "\"allowed\",\"bytesOut\":-1}", "malformed" },
		{ "{\"kind\":\"CodeExecutionEgress\",\"uid\":\"" UID_A "\","
		    "\"namespace\":\"team-a\",\"name\":\"run-a\",\"decision\":"
		    "\"allowed\",\"bytesIn\":\"5\"}", "malformed" },
		/* More than Squid's 18 digits: no record of its. */
		{ "{\"kind\":\"CodeExecutionEgress\",\"uid\":\"" UID_A "\","
		    "\"namespace\":\"team-a\",\"name\":\"run-a\",\"decision\":"
		    "\"allowed\",\"bytesOut\":1000000000000000000}", "malformed" },
		{ "{\"kind\":\"CodeExecutionEgress\",\"uid\":\"" UID_A "\","
		    "\"name\":\"run-a\",\"decision\":\"refused\"}", "malformed" },
		{ "{\"kind\":\"CodeExecutionEgress\",\"uid\":7,\"namespace\":"
		    "\"team-a\",\"name\":\"run-a\",\"decision\":\"refused\"}",
		    "malformed" },
		/* Keys twice: which one counts would be the parser's guess. */
		{ "{\"kind\":\"CodeExecutionEgress\",\"uid\":\"" UID_A "\","
		    "\"namespace\":\"team-a\",\"name\":\"run-a\",\"decision\":"
		    "\"refused\",\"decision\":\"allowed\"}", "malformed" },
		{ "{\"kind\":\"CodeExecutionEgress\",\"uid\":\"\",\"namespace\":"
		    "\"team-a\",\"name\":\"run-a\",\"decision\":\"refused\"}",
		    "unknown" },
		/* The smallest that counts: null bytes are none. */
		{ "{\"kind\":\"CodeExecutionEgress\",\"uid\":\"" UID_A "\","
		    "\"namespace\":\"team-a\",\"name\":\"run-a\",\"decision\":"
		    "\"allowed\",\"bytesOut\":null}", "counted" },
	};
	struct egresslog *t = egresslog_new(0);
	int calls = 0;

	(void)state;
	static const char nul[] = "{\"kind\":\"CodeExecutionEgress\"\0}";
	for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++)
		if (strcmp(egresslog_result_name(egresslog_count(t, lines[i][0],
		    strlen(lines[i][0]), known, &calls)), lines[i][1]) != 0)
			fail_msg("line %zu: want %s", i, lines[i][1]);
	/* A NUL inside: not a whole record. */
	assert_int_equal(egresslog_count(t, nul, sizeof(nul) - 1, known, &calls),
	    EGRESSLOG_MALFORMED);
	assert_counts(t, UID_A, 0, 1, 0, 0);
	assert_int_equal(egresslog_len(t), 1);
	/* Sums saturate at 18 nines: never a wrapped, negative count. */
	{
		static const char big[] = "{\"kind\":\"CodeExecutionEgress\",\"uid\":\""
		    UID_A "\",\"namespace\":\"team-a\",\"name\":\"run-a\",\"decision\":"
		    "\"allowed\",\"bytesOut\":999999999999999999,\"bytesIn\":1}";

		for (int i = 0; i < 3; i++)
			assert_int_equal(egresslog_count(t, big, strlen(big), known,
			    &calls), EGRESSLOG_COUNTED);
		assert_counts(t, UID_A, 0, 4, EGRESSLOG_BYTES_MAX, 3);
	}
	/* Only what may have been a record lost is a loss. */
	assert_false(egresslog_result_loss(EGRESSLOG_COUNTED));
	assert_false(egresslog_result_loss(EGRESSLOG_OTHER));
	assert_false(egresslog_result_loss(EGRESSLOG_NO_EXECUTION));
	assert_false(egresslog_result_loss(EGRESSLOG_UNKNOWN));
	assert_false(egresslog_result_loss(EGRESSLOG_SEEN));
	assert_true(egresslog_result_loss(EGRESSLOG_MALFORMED));
	assert_true(egresslog_result_loss(EGRESSLOG_TOO_LONG));
	assert_true(egresslog_result_loss(EGRESSLOG_FULL));
	egresslog_free(t);
}

static void
test_split_time(void **state)
{
	static const struct {
		const char	*line;
		long long	 ns;
		size_t		 rest;
	} good[] = {
		{ "2026-11-28T11:09:28.360123456Z x", 1795864168360123456LL, 31 },
		{ "2026-11-28T11:09:28.36Z {", 1795864168360000000LL, 24 },
		{ "2026-11-28T11:09:28Z ", 1795864168000000000LL, 21 },
		{ "2026-11-28T12:09:28.000000001+01:00 y", 1795864168000000001LL, 36 },
		{ "2026-11-28T10:39:28.5-00:30 ", 1795864168500000000LL, 28 },
		{ "1970-01-01T00:00:00.000000000Z ", 0, 31 },
	};
	static const char *const bad[] = {
		"2026-11-28T11:09:28.360123456Z",	/* no space: no line */
		"2026-11-28T11:09:28.360123456 x",
		"2026-11-28T11:09:28.1234567890Z x",	/* 10 digits */
		"2026-11-28T11:09:28.Z x",
		"2026-13-28T11:09:28Z x",
		"2026-11-28 11:09:28Z x",
		"2026-11-28T11:09:28+0100 x",
		"1969-12-31T23:59:59Z x",
		"{\"kind\":\"CodeExecutionEgress\"}",
		"",
	};
	long long ns;
	size_t rest;

	(void)state;
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		assert_int_equal(egresslog_split_time(good[i].line,
		    strlen(good[i].line), &ns, &rest), 0);
		assert_int_equal(ns, good[i].ns);
		assert_int_equal(rest, good[i].rest);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (egresslog_split_time(bad[i], strlen(bad[i]), &ns, &rest) == 0)
			fail_msg("accepted '%s'", bad[i]);
}

/* Lines of a followed log, through lines.h's splitter, as egressfollow.c. */
struct feed {
	struct egresslog	*t;
	struct egresslog_pos	 pos;
	char			 res[4096];
	int			 calls;
};

static int
on_line(void *arg, char *line, size_t len, int too_long)
{
	struct feed *fd = arg;
	size_t n = strlen(fd->res);

	snprintf(fd->res + n, sizeof(fd->res) - n, "%s\n", egresslog_result_name(
	    egresslog_line(fd->t, &fd->pos, line, len, too_long, known,
	    &fd->calls)));
	return 0;
}

/* text fed through a splitter capped at EGRESSLOG_LINE_MAX, a byte at a time or whole. */
static const char *
feed(struct feed *fd, const char *text, int bytewise)
{
	struct lines l;

	fd->res[0] = '\0';
	lines_init(&l, EGRESSLOG_LINE_MAX);
	egresslog_pos_resume(&fd->pos);
	for (size_t i = 0, n = strlen(text); i < n; i += bytewise ? 1 : n)
		assert_int_equal(lines_feed(&l, text + i, bytewise ? 1 : n,
		    on_line, fd), 0);
	lines_free(&l);
	return fd->res;
}

#define REC(uid, name, decision) "{\"kind\":\"CodeExecutionEgress\",\"uid\":\"" \
	uid "\",\"namespace\":\"team-a\",\"name\":\"" name "\",\"decision\":\"" \
	decision "\",\"bytesOut\":10,\"bytesIn\":20}"
#define T(frac) "2026-11-28T11:09:28." frac "Z "

/*
 * A stream broken and resumed from its last line's second gives again
 * what it gave in that second; those are skipped, in order, by count
 * (two lines of one time are two), and the first new line counts.
 */
static void
test_resume(void **state)
{
	struct feed fd = { .t = egresslog_new(0) };
	char *again;

	(void)state;
	assert_string_equal(feed(&fd, T("100000000") REC(UID_A, "run-a", "refused") "\n"
	    T("200000000") REC(UID_A, "run-a", "refused") "\n"
	    T("200000000") REC(UID_A, "run-a", "allowed") "\n"
	    "2026-11-28T11:09:29.000000000Z squid: something\n", 0),
	    "counted\ncounted\ncounted\nother\n");
	assert_counts(fd.t, UID_A, 2, 1, 10, 20);
	/* Resumed at 11:09:29: its line again, then new ones. */
	assert_string_equal(feed(&fd, "2026-11-28T11:09:29.000000000Z squid: something\n"
	    "2026-11-28T11:09:29.000000000Z " REC(UID_A, "run-a", "refused") "\n"
	    "2026-11-28T11:09:30.000000000Z " REC(UID_A, "run-a", "refused") "\n", 1),
	    "seen\ncounted\ncounted\n");
	assert_counts(fd.t, UID_A, 4, 1, 10, 20);
	/* Resumed at 11:09:28 (an API server that kept less): all seen. */
	again = xasprintf("%s", T("100000000") REC(UID_A, "run-a", "refused") "\n"
	    T("200000000") REC(UID_A, "run-a", "refused") "\n"
	    T("200000000") REC(UID_A, "run-a", "allowed") "\n"
	    "2026-11-28T11:09:29.000000000Z squid: something\n"
	    "2026-11-28T11:09:29.000000000Z " REC(UID_A, "run-a", "refused") "\n"
	    "2026-11-28T11:09:30.000000000Z " REC(UID_A, "run-a", "refused") "\n"
	    "2026-11-28T11:09:30.000000000Z " REC(UID_B, "run-b", "refused") "\n");
	assert_string_equal(feed(&fd, again, 0),
	    "seen\nseen\nseen\nseen\nseen\nseen\ncounted\n");
	assert_counts(fd.t, UID_A, 4, 1, 10, 20);
	assert_counts(fd.t, UID_B, 1, 0, 0, 0);
	/*
	 * Within one connection every line is new, whatever its time: a
	 * node clock that stepped back loses nothing.
	 */
	assert_string_equal(feed(&fd, "2026-11-28T11:09:31.0Z " REC(UID_B, "run-b",
	    "refused") "\n2026-11-28T11:09:20.0Z " REC(UID_B, "run-b", "refused")
	    "\nno time here\n", 0), "counted\ncounted\nmalformed\n");
	assert_counts(fd.t, UID_B, 3, 0, 0, 0);
	free(again);
	egresslog_free(fd.t);
}

/*
 * accesslog.c's longest record, with the kubelet's time, is under the
 * cap; a line past it is dropped whole (one result), its time still
 * taken, and the next line counts.
 */
static void
test_too_long(void **state)
{
	struct feed fd = { .t = egresslog_new(0) };
	char *sq, *rec, *text, *big, quoted[253 * 3 + 1];
	size_t n;

	(void)state;
	/* Every string at its cap, of '"' (%22: two bytes each in JSON). */
	for (n = 0; n < 253; n++)
		memcpy(quoted + 3 * n, "%22", 3);
	quoted[3 * n] = '\0';
	sq = xasprintf("L1795864168.291 127.0.0.1 49892 53 %s %s 8080 %s "
	    "ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255 TCP_MISS 200 - - "
	    "%s %s %s %s 999999999999999999 999999999999999999 "
	    "999999999999999999\n", quoted, quoted, quoted, quoted, quoted,
	    quoted, quoted);
	rec = records(sq);
	n = strlen(rec);
	assert_true(n > 2500);
	print_message("# the longest record: %zu bytes\n", n);
	assert_true(n + sizeof("2026-11-28T11:09:28.360123456Z ") < EGRESSLOG_LINE_MAX);
	big = xmalloc(EGRESSLOG_LINE_MAX + 2);
	memset(big, ' ', EGRESSLOG_LINE_MAX + 1);
	big[EGRESSLOG_LINE_MAX + 1] = '\0';
	text = xasprintf(T("1") "%s" T("2") "%s\n" T("3") REC(UID_A, "run-a", "refused")
	    "\n" T("4") "%s", rec, big, rec);
	assert_string_equal(feed(&fd, text, 0), "unknown\ntoo-long\ncounted\nunknown\n");
	assert_string_equal(feed(&fd, text, 1), "seen\nseen\nseen\nseen\n");
	assert_counts(fd.t, UID_A, 1, 0, 0, 0);
	assert_int_equal(fd.pos.ns, 1795864168400000000LL);
	free(text);
	free(big);
	free(rec);
	free(sq);
	egresslog_free(fd.t);
}

/*
 * The cap: an execution past it is not counted (table-full), nor can
 * its end be kept; one forgotten makes room. Many in and out keep every
 * entry findable (the table's removal shifts entries back).
 */
static void
test_cap(void **state)
{
	struct egresslog *t = egresslog_new(3);
	struct egress_count c;
	long long ended;
	char uid[32];
	int calls = 0;

	(void)state;
	for (int i = 0; i < 3; i++) {
		snprintf(uid, sizeof(uid), "u%d", i);
		assert_int_equal(egresslog_ended(t, uid, 100 + i, &ended), 0);
		assert_int_equal(ended, 100 + i);
	}
	assert_int_equal(egresslog_ended(t, "u0", 500, &ended), 0);
	assert_int_equal(ended, 100);	/* the first end seen stays */
	assert_int_equal(egresslog_ended(t, UID_A, 500, &ended), -1);
	assert_int_equal(egresslog_count(t, REC(UID_A, "run-a", "refused"),
	    strlen(REC(UID_A, "run-a", "refused")), known, &calls), EGRESSLOG_FULL);
	assert_int_equal(egresslog_len(t), 3);
	egresslog_forget(t, "u1");
	egresslog_forget(t, "u1");
	egresslog_forget(t, "never");
	assert_int_equal(egresslog_len(t), 2);
	assert_int_equal(egresslog_count(t, REC(UID_A, "run-a", "refused"),
	    strlen(REC(UID_A, "run-a", "refused")), known, &calls),
	    EGRESSLOG_COUNTED);
	assert_counts(t, UID_A, 1, 0, 0, 0);
	egresslog_clear(t);
	assert_int_equal(egresslog_len(t), 0);
	assert_int_equal(egresslog_get(t, UID_A, &c), 0);
	egresslog_free(t);

	/* 20000 in, half out in a scattered order, the rest found. */
	t = egresslog_new(0);
	for (int i = 0; i < 20000; i++) {
		snprintf(uid, sizeof(uid), "uid-%d", i);
		assert_int_equal(egresslog_ended(t, uid, i + 1, &ended), 0);
	}
	for (int i = 0; i < 20000; i += 2) {
		snprintf(uid, sizeof(uid), "uid-%d", (i * 7919) % 20000);
		egresslog_forget(t, uid);
	}
	assert_int_equal(egresslog_len(t), 10000);
	for (int i = 0; i < 20000; i++) {
		/* 7919 is odd: even k give the even uids, each once. */
		int gone = i % 2 == 0;

		snprintf(uid, sizeof(uid), "uid-%d", i);
		assert_int_equal(egresslog_ended(t, uid, 99999999, &ended),
		    0);
		assert_int_equal(ended, gone ? 99999999 : i + 1);
	}
	assert_int_equal(egresslog_len(t), 20000);
	egresslog_free(t);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_counts),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_split_time),
		cmocka_unit_test(test_resume),
		cmocka_unit_test(test_too_long),
		cmocka_unit_test(test_cap),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
