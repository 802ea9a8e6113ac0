/* Unit tests: execution/crilog.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "crilog.h"

#define TS	"2026-11-22T07:11:31.301173195Z"
#define TS_NS	INT64_C(1795331491301173195)
#define FFFD	"\xEF\xBF\xBD"
#define BIG	(1024 * 1024)

/* Feed n bytes in chunks of chunk bytes (0: all at once), then finish. */
static struct crilog *
run(const char *log, size_t n, size_t cap, size_t max_record, size_t chunk)
{
	struct crilog *l = crilog_new(cap, max_record);
	size_t off, k;

	if (chunk == 0)
		chunk = n ? n : 1;
	for (off = 0; off < n; off += k) {
		k = n - off < chunk ? n - off : chunk;
		crilog_feed(l, log + off, k);
	}
	crilog_finish(l);
	return l;
}

#define RUN(log, cap)	run((log), sizeof(log) - 1, (cap), 4096, 0)

static void
check(const struct crilog_stream *s, const char *text, size_t len,
    uint64_t total, int truncated)
{
	const char *t;
	size_t n;

	t = crilog_text(s, &n);
	assert_int_equal(n, len);
	assert_memory_equal(t, text, len);
	assert_int_equal(t[n], '\0');
	assert_int_equal(s->total, total);
	assert_int_equal(s->truncated, truncated);
}

#define CHECK(s, lit, total, trunc) \
	check((s), (lit), sizeof(lit) - 1, (total), (trunc))

static void
test_full_lines(void **state)
{
	static const char log[] =
	    TS " stdout F hello\n"
	    "2026-11-22T07:11:32Z stdout F world\n";
	struct crilog *l;

	(void)state;
	l = RUN(log, BIG);
	CHECK(crilog_stdout(l), "hello\nworld\n", 12, 0);
	assert_int_equal(crilog_stdout(l)->first_ns, TS_NS);
	assert_int_equal(crilog_stdout(l)->last_ns, INT64_C(1795331492000000000));
	CHECK(crilog_stderr(l), "", 0, 0);
	assert_int_equal(crilog_stderr(l)->first_ns, 0);
	assert_int_equal(crilog_stderr(l)->last_ns, 0);
	assert_int_equal(crilog_bad_records(l), 0);
	crilog_free(l);
	crilog_free(NULL);
}

static void
test_partial_join(void **state)
{
	static const char log[] =
	    TS " stdout P hel\n"
	    TS " stdout P lo \n"
	    TS " stdout F world\n"
	    TS " stdout F again\n";
	static const char tail[] =
	    TS " stdout F a\n"
	    TS " stdout P no newline\n";
	struct crilog *l;

	(void)state;
	l = RUN(log, BIG);
	CHECK(crilog_stdout(l), "hello world\nagain\n", 18, 0);
	assert_int_equal(crilog_bad_records(l), 0);
	crilog_free(l);

	/* A stream that ends without a newline ends with a P record. */
	l = RUN(tail, BIG);
	CHECK(crilog_stdout(l), "a\nno newline", 12, 0);
	assert_int_equal(crilog_bad_records(l), 0);
	crilog_free(l);
}

static void
test_empty_content(void **state)
{
	static const char log[] =
	    TS " stdout F \n"
	    "2026-11-22T07:11:35Z stdout P \n"
	    "2026-11-22T07:11:36Z stderr P \n";
	struct crilog *l;

	(void)state;
	l = RUN(log, 0);	/* cap 0: an empty stream is still whole */
	CHECK(crilog_stdout(l), "", 1, 1);
	CHECK(crilog_stderr(l), "", 0, 0);
	assert_int_equal(crilog_stderr(l)->first_ns,
	    INT64_C(1795331496000000000));
	crilog_free(l);

	l = RUN(log, BIG);
	CHECK(crilog_stdout(l), "\n", 1, 0);
	assert_int_equal(crilog_stdout(l)->first_ns, TS_NS);
	assert_int_equal(crilog_stdout(l)->last_ns,
	    INT64_C(1795331495000000000));
	CHECK(crilog_stderr(l), "", 0, 0);
	assert_int_equal(crilog_bad_records(l), 0);
	crilog_free(l);
}

static void
test_interleaved(void **state)
{
	static const char log[] =
	    "2026-11-22T07:11:31Z stdout P out1 \n"
	    "2026-11-22T07:11:32Z stderr F err1\n"
	    "2026-11-22T07:11:33Z stdout F out2\n"
	    "2026-11-22T07:11:34Z stderr P err2 \n"
	    "2026-11-22T07:11:35Z stdout F out3\n"
	    "2026-11-22T07:11:36Z stderr F err3\n";
	struct crilog *l;

	(void)state;
	l = RUN(log, BIG);
	CHECK(crilog_stdout(l), "out1 out2\nout3\n", 15, 0);
	CHECK(crilog_stderr(l), "err1\nerr2 err3\n", 15, 0);
	assert_int_equal(crilog_stdout(l)->first_ns, INT64_C(1795331491000000000));
	assert_int_equal(crilog_stdout(l)->last_ns, INT64_C(1795331495000000000));
	assert_int_equal(crilog_stderr(l)->first_ns, INT64_C(1795331492000000000));
	assert_int_equal(crilog_stderr(l)->last_ns, INT64_C(1795331496000000000));
	crilog_free(l);
}

/*
 * A sample with most of what can happen: P+F joins with a character split
 * across records (on both streams), an offset timestamp, a garbage line,
 * invalid bytes, NUL and CR, extra tags, an oversized record (max_record
 * 96), an empty record, an unknown tag, an incomplete character at the end
 * of stdout and an unterminated last record.
 */
#define O10	"oooooooooo"
static const char sample[] =
    TS " stdout F hello\n"
    "2026-11-22T07:11:32Z stderr P warn\xE2\x82\n"
    "2026-11-22T07:11:32.5Z stdout P caf\xC3\n"
    "2026-11-22T08:11:33+01:00 stderr F \xAC" " done\n"
    "2026-11-22T07:11:33.123Z stdout F \xA9" " ok\n"
    "garbage\n"
    TS " stdout F \xFF\xC0\x80 x\0y\r z\n"
    TS " stdout F:x tagged\n"
    TS " stdout F " O10 O10 O10 O10 O10 O10 O10 O10 O10 O10 O10 O10 "\n"
    TS " stderr F \n"
    TS " stdout X nope\n"
    "2026-11-22T07:11:34Z stdout P \xF0\x9F\x98\n"
    TS " stderr P tail";
#define SAMPLE_MAXREC	96

static const char sample_out[] =
    "hello\ncaf\xC3\xA9 ok\n" FFFD FFFD FFFD " x\0y\r z\ntagged\n" FFFD;
static const char sample_err[] = "warn\xE2\x82\xAC done\n\n";

struct snap {
	char	 text[2][256];
	size_t	 len[2];
	struct crilog_stream st[2];
	uint64_t bad;
};

static void
snap_take(const struct crilog *l, struct snap *s)
{
	const struct crilog_stream *st[2] = { crilog_stdout(l), crilog_stderr(l) };
	const char *t;
	int i;

	memset(s, 0, sizeof(*s));
	for (i = 0; i < 2; i++) {
		t = crilog_text(st[i], &s->len[i]);
		assert_true(s->len[i] <= sizeof(s->text[i]));
		memcpy(s->text[i], t, s->len[i]);
		s->st[i] = *st[i];
	}
	s->bad = crilog_bad_records(l);
}

static void
snap_equal(const struct snap *a, const struct snap *b)
{
	int i;

	for (i = 0; i < 2; i++) {
		assert_int_equal(a->len[i], b->len[i]);
		assert_memory_equal(a->text[i], b->text[i], a->len[i]);
		assert_int_equal(a->st[i].total, b->st[i].total);
		assert_int_equal(a->st[i].truncated, b->st[i].truncated);
		assert_int_equal(a->st[i].first_ns, b->st[i].first_ns);
		assert_int_equal(a->st[i].last_ns, b->st[i].last_ns);
	}
	assert_int_equal(a->bad, b->bad);
}

static void
sample_splits(size_t cap, int three, struct snap *ref)
{
	static const size_t sizes[] = { 1, 2, 3, 5, 7, 11, 31, 64, 97, 128 };
	const size_t n = sizeof(sample) - 1;
	struct crilog *l;
	struct snap got;
	size_t i, j;

	l = run(sample, n, cap, SAMPLE_MAXREC, 0);
	snap_take(l, ref);
	crilog_free(l);

	/* Two chunks, at every offset. */
	for (i = 0; i <= n; i++) {
		l = crilog_new(cap, SAMPLE_MAXREC);
		crilog_feed(l, sample, i);
		crilog_feed(l, sample + i, n - i);
		crilog_finish(l);
		snap_take(l, &got);
		snap_equal(ref, &got);
		crilog_free(l);
	}
	/* Byte by byte, and in uneven chunks. */
	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		l = run(sample, n, cap, SAMPLE_MAXREC, sizes[i]);
		snap_take(l, &got);
		snap_equal(ref, &got);
		crilog_free(l);
	}
	/*
	 * Three chunks, the middle one up to 16 bytes long, at every offset:
	 * two cuts inside one record, or inside one character.
	 */
	for (i = 0; three && i <= n; i++) {
		for (j = i; j <= n && j - i <= 16; j++) {
			l = crilog_new(cap, SAMPLE_MAXREC);
			crilog_feed(l, sample, i);
			crilog_feed(l, sample + i, j - i);
			crilog_feed(l, sample + j, n - j);
			crilog_finish(l);
			snap_take(l, &got);
			snap_equal(ref, &got);
			crilog_free(l);
		}
	}
}

static void
test_every_split_point(void **state)
{
	struct snap ref;

	(void)state;
	sample_splits(BIG, 1, &ref);
	assert_int_equal(ref.len[0], sizeof(sample_out) - 1);
	assert_memory_equal(ref.text[0], sample_out, sizeof(sample_out) - 1);
	assert_int_equal(ref.st[0].total, 36);
	assert_int_equal(ref.st[0].truncated, 0);
	assert_int_equal(ref.st[0].first_ns, TS_NS);
	assert_int_equal(ref.st[0].last_ns, INT64_C(1795331494000000000));
	assert_int_equal(ref.len[1], sizeof(sample_err) - 1);
	assert_memory_equal(ref.text[1], sample_err, sizeof(sample_err) - 1);
	assert_int_equal(ref.st[1].total, 14);
	assert_int_equal(ref.st[1].truncated, 0);
	assert_int_equal(ref.st[1].first_ns, INT64_C(1795331492000000000));
	assert_int_equal(ref.st[1].last_ns, TS_NS);
	/* garbage, oversized, tag X, unterminated tail */
	assert_int_equal(ref.bad, 4);

	/* A cap of 7 cuts stdout in an ASCII run, stderr right after a '€'. */
	sample_splits(7, 0, &ref);
	assert_int_equal(ref.len[0], 7);
	assert_memory_equal(ref.text[0], "hello\nc", 7);
	assert_int_equal(ref.st[0].total, 36);
	assert_int_equal(ref.st[0].truncated, 1);
	assert_int_equal(ref.len[1], 7);
	assert_memory_equal(ref.text[1], "warn\xE2\x82\xAC", 7);
	assert_int_equal(ref.st[1].total, 14);
	assert_int_equal(ref.st[1].truncated, 1);
	assert_int_equal(ref.bad, 4);
}

static void
test_cap_around_chars(void **state)
{
	/* a, é (2 bytes), € (3), 😀 (4), b, and the F record's newline */
	static const char log[] =
	    TS " stdout F a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80" "b\n";
	static const char full[] =
	    "a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80" "b\n";
	static const size_t bound[] = { 0, 1, 3, 6, 10, 11, 12 };
	struct crilog *l;
	const char *t;
	size_t cap, want, len, i;

	(void)state;
	for (cap = 0; cap <= 14; cap++) {
		want = 0;
		for (i = 0; i < sizeof(bound) / sizeof(bound[0]); i++)
			if (bound[i] <= cap)
				want = bound[i];
		l = run(log, sizeof(log) - 1, cap, 4096, 0);
		t = crilog_text(crilog_stdout(l), &len);
		assert_int_equal(len, want);
		assert_memory_equal(t, full, want);
		assert_int_equal(crilog_stdout(l)->total, 12);
		assert_int_equal(crilog_stdout(l)->truncated, cap < 12);
		crilog_free(l);
	}
}

static void
test_cap_exact(void **state)
{
	static const char log[] = TS " stdout P 0123456789\n";
	static const char two[] =
	    TS " stdout P abc\n"
	    TS " stdout P \xE2\x82\xAC\n"	/* does not fit in 4 */
	    TS " stdout F d\n";			/* would, but comes after */
	static const char bad[] = TS " stderr P \xFF\n";
	struct crilog *l;

	(void)state;
	l = RUN(log, 10);
	CHECK(crilog_stdout(l), "0123456789", 10, 0);
	crilog_free(l);
	l = RUN(log, 9);
	CHECK(crilog_stdout(l), "012345678", 10, 1);
	crilog_free(l);
	l = RUN(log, 0);
	CHECK(crilog_stdout(l), "", 10, 1);
	crilog_free(l);

	/* The kept text is a prefix: nothing after the first drop. */
	l = RUN(two, 4);
	CHECK(crilog_stdout(l), "abc", 8, 1);
	crilog_free(l);

	/* U+FFFD takes 3 bytes of the cap. */
	l = RUN(bad, 2);
	CHECK(crilog_stderr(l), "", 1, 1);
	crilog_free(l);
	l = RUN(bad, 3);
	CHECK(crilog_stderr(l), FFFD, 1, 0);
	crilog_free(l);
}

/* content as one P record on stdout, then finish */
static void
utf8_case(const char *content, size_t n, const char *want, size_t wantlen)
{
	static const char head[] = TS " stdout P ";
	char log[128];
	struct crilog *l;
	const char *t;
	size_t len, k;

	assert_true(sizeof(head) - 1 + n + 1 <= sizeof(log));
	memcpy(log, head, sizeof(head) - 1);
	memcpy(log + sizeof(head) - 1, content, n);
	log[sizeof(head) - 1 + n] = '\n';
	for (k = 0; k <= 1; k++) {
		l = run(log, sizeof(head) + n, BIG, 4096, k);
		t = crilog_text(crilog_stdout(l), &len);
		assert_int_equal(len, wantlen);
		assert_memory_equal(t, want, wantlen);
		assert_int_equal(crilog_stdout(l)->total, n);
		assert_int_equal(crilog_stdout(l)->truncated, 0);
		assert_int_equal(crilog_bad_records(l), 0);
		crilog_free(l);
	}
}

#define UTF8(in, out)	utf8_case((in), sizeof(in) - 1, (out), sizeof(out) - 1)

static void
test_invalid_utf8(void **state)
{
	(void)state;
	UTF8("\x80", FFFD);				/* stray continuation */
	UTF8("a\x80\xBF" "b", "a" FFFD FFFD "b");
	UTF8("\xC0\x80", FFFD FFFD);			/* C0, C1 never valid */
	UTF8("\xC1\xBF", FFFD FFFD);
	UTF8("\xE0\x80\x80", FFFD FFFD FFFD);		/* overlongs */
	UTF8("\xE0\x9F\xBF", FFFD FFFD FFFD);
	UTF8("\xF0\x80\x80\x80", FFFD FFFD FFFD FFFD);
	UTF8("\xF0\x8F\xBF\xBF", FFFD FFFD FFFD FFFD);
	UTF8("\xED\xA0\x80", FFFD FFFD FFFD);		/* surrogates */
	UTF8("\xED\xBF\xBF", FFFD FFFD FFFD);
	UTF8("\xED\x9F\xBF", "\xED\x9F\xBF");		/* U+D7FF is fine */
	UTF8("\xF4\x90\x80\x80", FFFD FFFD FFFD FFFD);	/* > U+10FFFF */
	UTF8("\xF4\x8F\xBF\xBF", "\xF4\x8F\xBF\xBF");	/* U+10FFFF */
	UTF8("\xF5\x80", FFFD FFFD);
	UTF8("\xFE\xFF", FFFD FFFD);
	/* Truncated sequences: one U+FFFD per maximal subpart. */
	UTF8("\xE2\x82x", FFFD "x");
	UTF8("\xF0\x9F\x98x", FFFD "x");
	UTF8("\xE2\x82\xE2\x82\xAC", FFFD "\xE2\x82\xAC");
	UTF8("\xC3\x28", FFFD "(");
	UTF8("\xE2\x82", FFFD);				/* at the very end */
	UTF8("\xF0\x9F\x98", FFFD);
	/* Valid text and NUL pass untouched. */
	UTF8("\xC2\xA9\xE2\x82\xAC\xF0\x9F\x98\x80", "\xC2\xA9\xE2\x82\xAC\xF0\x9F\x98\x80");
	UTF8("a\0b\r", "a\0b\r");
}

static void
test_split_char(void **state)
{
	static const char two[] =
	    TS " stdout P \xF0\x9F\n"
	    TS " stderr F e\n"
	    TS " stdout P \x98\n"
	    TS " stdout F \x80!\n";
	static const char eol[] = TS " stdout F \xE2\x82\n";
	static const char end[] = TS " stdout P a\xE2\x82\n";
	struct crilog *l;
	size_t len;

	(void)state;
	/* Across three P/F records, with the other stream in between. */
	l = RUN(two, BIG);
	CHECK(crilog_stdout(l), "\xF0\x9F\x98\x80!\n", 6, 0);
	CHECK(crilog_stderr(l), "e\n", 2, 0);
	crilog_free(l);

	/* Across feed calls, in the middle of the character. */
	l = crilog_new(BIG, 4096);
	crilog_feed(l, two, sizeof(TS " stdout P \xF0") - 1);
	crilog_feed(l, two + sizeof(TS " stdout P \xF0") - 1,
	    sizeof(two) - sizeof(TS " stdout P \xF0"));
	crilog_finish(l);
	CHECK(crilog_stdout(l), "\xF0\x9F\x98\x80!\n", 6, 0);
	crilog_free(l);

	/* The newline of an F record ends a character in progress. */
	l = RUN(eol, BIG);
	CHECK(crilog_stdout(l), FFFD "\n", 3, 0);
	crilog_free(l);

	/* Held back until finish, then U+FFFD. */
	l = crilog_new(BIG, 4096);
	crilog_feed(l, end, sizeof(end) - 1);
	crilog_text(crilog_stdout(l), &len);
	assert_int_equal(len, 1);
	crilog_finish(l);
	CHECK(crilog_stdout(l), "a" FFFD, 3, 0);
	crilog_finish(l);			/* twice is harmless */
	crilog_feed(l, end, sizeof(end) - 1);	/* ignored after finish */
	CHECK(crilog_stdout(l), "a" FFFD, 3, 0);
	assert_int_equal(crilog_bad_records(l), 0);
	crilog_free(l);
}

static void
test_oversized(void **state)
{
	char log[512];
	struct crilog *l;
	size_t n = 0, hdr = sizeof(TS " stdout F ") - 1, k;

	(void)state;
	/* Exactly 64 bytes accepted, 65 skipped, the next still parsed. */
	n += (size_t)snprintf(log + n, sizeof(log) - n, TS " stdout F %.*s\n",
	    (int)(64 - hdr), "ABCDEFGHIJKLMNOPQRSTUVWXYZABCDEFGHIJKLMNOPQRSTUVWXYZ");
	n += (size_t)snprintf(log + n, sizeof(log) - n, TS " stdout F %.*s\n",
	    (int)(65 - hdr), "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyz");
	n += (size_t)snprintf(log + n, sizeof(log) - n, TS " stdout F next\n");
	for (k = 0; k <= 3; k++) {
		l = run(log, n, BIG, 64, k);
		CHECK(crilog_stdout(l), "ABCDEFGHIJKLMNOPQRSTUVWX\nnext\n", 30, 0);
		assert_int_equal(crilog_bad_records(l), 1);
		crilog_free(l);
	}
}

static void
test_unterminated_flood(void **state)
{
	static const char next[] = "\n" TS " stderr F ok\n";
	char chunk[65536];
	struct crilog *l;
	int i;

	(void)state;
	memset(chunk, 'x', sizeof(chunk));
	memcpy(chunk, TS " stdout F ", sizeof(TS " stdout F ") - 1);
	l = crilog_new(4096, 65536);
	for (i = 0; i < 128; i++) {		/* 8 MiB without a LF */
		crilog_feed(l, chunk, sizeof(chunk));
		assert_true(crilog_memory(l) <= 65536 + 1 + 1024);
	}
	assert_int_equal(crilog_bad_records(l), 1);
	crilog_feed(l, next, sizeof(next) - 1);
	crilog_finish(l);
	assert_int_equal(crilog_bad_records(l), 1);	/* counted once */
	CHECK(crilog_stdout(l), "", 0, 0);
	CHECK(crilog_stderr(l), "ok\n", 3, 0);
	crilog_free(l);
}

/*
 * 50 MiB in 64 KiB chunks: a period of records (a 16 KiB P record as
 * containerd cuts long lines, an F record, stderr, an empty F) repeated,
 * chunk boundaries falling anywhere in it.
 */
static void
test_flood(void **state)
{
	const size_t cap = BIG, max_record = 65536, total = 50u << 20;
	static char period[20000];
	char chunk[65536], *want;
	struct crilog *l;
	struct timespec t0, t1;
	double secs = 0;
	size_t plen = 0, off = 0, fed, k, i, len, reps;
	uint64_t out_total, err_total;
	const char *t;

	(void)state;
	plen += (size_t)snprintf(period, sizeof(period), TS " stdout P ");
	memset(period + plen, 'a', 16384);
	plen += 16384;
	plen += (size_t)snprintf(period + plen, sizeof(period) - plen,
	    "\n" TS " stdout F %0100d\n" TS " stderr F %050d\n"
	    TS " stdout F \n", 7, 9);
	reps = total / plen;

	l = crilog_new(cap, max_record);
	for (fed = 0; fed < reps * plen; fed += k) {
		k = reps * plen - fed < sizeof(chunk) ? reps * plen - fed :
		    sizeof(chunk);
		for (i = 0; i < k; i++) {
			chunk[i] = period[off];
			if (++off == plen)
				off = 0;
		}
		clock_gettime(CLOCK_MONOTONIC, &t0);
		crilog_feed(l, chunk, k);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		secs += (double)(t1.tv_sec - t0.tv_sec) +
		    (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
		assert_true(crilog_memory(l) <=
		    2 * (cap + 1) + max_record + 1 + 1024);
	}
	crilog_finish(l);
	printf("crilog flood: %zu bytes parsed in %.3f s, %.0f MB/s\n",
	    fed, secs, (double)fed / 1e6 / secs);

	out_total = (uint64_t)reps * (16384 + 101 + 1);
	err_total = (uint64_t)reps * 51;
	t = crilog_text(crilog_stdout(l), &len);
	assert_int_equal(len, cap);
	assert_int_equal(crilog_stdout(l)->total, out_total);
	assert_int_equal(crilog_stdout(l)->truncated, 1);
	assert_int_equal(crilog_stdout(l)->last_ns, TS_NS);
	assert_int_equal(t[0], 'a');
	assert_int_equal(t[16384], '0');
	assert_int_equal(t[16384 + 100], '\n');

	/* stderr fits: every "000...9\n" line is there. */
	want = malloc(err_total + 1);
	assert_non_null(want);
	for (i = 0; i < reps; i++)
		snprintf(want + i * 51, 52, "%050d\n", 9);
	t = crilog_text(crilog_stderr(l), &len);
	assert_int_equal(len, err_total);
	assert_memory_equal(t, want, err_total);
	assert_int_equal(crilog_stderr(l)->total, err_total);
	assert_int_equal(crilog_stderr(l)->truncated, 0);
	assert_int_equal(crilog_bad_records(l), 0);
	free(want);
	crilog_free(l);
	/* Quadratic behaviour would take minutes; this takes well under 1. */
	assert_true(secs < 60);
}

static void
test_malformed(void **state)
{
	static const char *const bad[] = {
		"2026-11-22T07:11:31.301173195 stdout F x",	/* no zone */
		"2026-11-22 07:11:31Z stdout F x",
		"2026-02-29T00:00:00Z stdout F x",		/* not a leap year */
		"2026-04-31T00:00:00Z stdout F x",
		"2026-00-10T00:00:00Z stdout F x",
		"2026-11-22T24:00:00Z stdout F x",
		"2026-11-22T07:60:00Z stdout F x",
		"2026-11-22T07:11:60Z stdout F x",
		"2026-11-22T07:11:31.Z stdout F x",
		"2026-11-22T07:11:31.1234567890Z stdout F x",	/* 10 digits */
		"2026-11-22T07:11:31z stdout F x",
		"2026-11-22t07:11:31Z stdout F x",
		"2026-11-22T07:11:31+0000 stdout F x",
		"2026-11-22T07:11:31+24:00 stdout F x",
		"2026-11-22T07:11:31+00:00Z stdout F x",
		"2026-11-22T07:11:31ZZ stdout F x",
		"2026-1-22T07:11:31Z stdout F x",
		"+026-11-22T07:11:31Z stdout F x",
		"2262-04-12T00:00:00Z stdout F x",		/* past int64 ns */
		"1677-09-20T00:00:00Z stdout F x",
		"garbage",
		"",
		" stdout F x",					/* empty timestamp */
		TS,
		TS " ",
		TS " stdout",
		TS " stdout F",					/* no SP after tag */
		TS "  stdout F x",				/* empty stream */
		TS " stdin F x",
		TS " Stdout F x",
		TS " stdouts F x",
		TS " stdout X x",
		TS " stdout  x",				/* empty tag */
		TS " stdout PF x",
		TS " stdout f x",
		TS " stdout :F x",
	};
	static const char tail[] = TS " stdout F unterminated";
	char log[8192];
	size_t n = 0, i, k, nbad = sizeof(bad) / sizeof(bad[0]);
	struct crilog *l;

	(void)state;
	for (i = 0; i < nbad; i++)
		n += (size_t)snprintf(log + n, sizeof(log) - n,
		    "%s\n" TS " stdout P %zu\n", bad[i], i % 10);
	n += (size_t)snprintf(log + n, sizeof(log) - n,
	    TS " stderr F:x:y tagged\n"
	    TS " stderr P: part\n"
	    TS " stderr P:z ial\n"
	    "%s", tail);
	assert_true(n < sizeof(log) - 1);
	for (k = 0; k <= 1; k++) {
		l = run(log, n, BIG, 4096, k);
		CHECK(crilog_stdout(l), "012345678901234567890123456789012345",
		    nbad, 0);
		CHECK(crilog_stderr(l), "tagged\npartial", 14, 0);
		assert_int_equal(crilog_bad_records(l), nbad + 1);
		crilog_free(l);
	}
}

static void
test_timestamps(void **state)
{
	static const struct {
		const char	*ts;
		int64_t		 ns;
	} tests[] = {
		{ "2026-11-22T07:11:31.301173195Z", INT64_C(1795331491301173195) },
		{ "2026-11-22T07:11:31Z", INT64_C(1795331491000000000) },
		{ "2026-11-22T07:11:31.5Z", INT64_C(1795331491500000000) },
		{ "2026-11-22T07:11:31.123Z", INT64_C(1795331491123000000) },
		{ "2026-11-22T07:11:31.000000001Z", INT64_C(1795331491000000001) },
		{ "2026-11-22T00:11:31.123456789-07:00", INT64_C(1795331491123456789) },
		{ "2026-11-22T12:41:31+05:30", INT64_C(1795331491000000000) },
		{ "2026-11-22T07:11:31+05:30", INT64_C(1795311691000000000) },
		{ "2026-11-22T07:11:31+00:00", INT64_C(1795331491000000000) },
		{ "2024-02-29T23:59:59.999999999Z", INT64_C(1709251199999999999) },
		{ "2000-01-01T00:00:00Z", INT64_C(946684800000000000) },
		{ "1970-01-01T00:00:00Z", 0 },
		{ "1969-12-31T23:59:59.5Z", INT64_C(-500000000) },
		{ "2262-04-11T23:47:16.854775807Z", INT64_MAX },
		{ "1677-09-21T00:12:43.145224192Z", INT64_MIN },
	};
	char log[128];
	struct crilog *l;
	size_t i, n;

	(void)state;
	for (i = 0; i < sizeof(tests) / sizeof(tests[0]); i++) {
		n = (size_t)snprintf(log, sizeof(log), "%s stderr F x\n",
		    tests[i].ts);
		l = run(log, n, BIG, 4096, 0);
		assert_int_equal(crilog_bad_records(l), 0);
		assert_int_equal(crilog_stderr(l)->first_ns, tests[i].ns);
		assert_int_equal(crilog_stderr(l)->last_ns, tests[i].ns);
		CHECK(crilog_stderr(l), "x\n", 2, 0);
		crilog_free(l);
	}
	/* One past either end of int64_t nanoseconds. */
	l = RUN("2262-04-11T23:47:16.854775808Z stderr F x\n"
	    "1677-09-21T00:12:43.145224191Z stderr F x\n", BIG);
	assert_int_equal(crilog_bad_records(l), 2);
	crilog_free(l);
}

/*
 * Raw stream bytes (the local mode's pipes): the same text, counts and
 * cap as the CRI path, split at every byte.
 */
/* What stdout kept, as a C string (test inputs hold no NUL). */
static const char *
out_text(struct crilog *l)
{
	return crilog_text(crilog_stdout(l), NULL);
}

/*
 * Files out: the runner's frame taken out of stdout wherever it starts,
 * at every split point of the input, through both feeds.
 */
static void
test_out_frame(void **state)
{
	static const char frame[] = "\x1e" "AIRLOCK-OUT n0nce 5\nABCDE\x1e" "AIRLOCK-END n0nce\n";
	static const char in[] = "out1\npartial\x1e" "AIRLOCK-OUT n0nce 5\nABCDE"
	    "\x1e" "AIRLOCK-END n0nce\nafter\n";
	size_t n = sizeof(in) - 1, len;
	int st;

	(void)state;
	for (size_t cut = 0; cut <= n; cut++) {
		struct crilog *l = crilog_new(4096, 65536);
		const char *body;

		crilog_out_frame(l, "n0nce", 64);
		crilog_feed_stream(l, 0, in, cut);
		crilog_feed_stream(l, 0, in + cut, n - cut);
		crilog_finish(l);
		assert_string_equal(out_text(l), "out1\npartialafter\n");
		assert_int_equal(crilog_stdout(l)->total, 18);
		body = crilog_frame(l, &len, &st);
		assert_int_equal(st, CRILOG_FRAME_COMPLETE);
		assert_int_equal(len, 5);
		assert_memory_equal(body, "ABCDE", 5);
		assert_int_equal(crilog_frame_bytes(l), sizeof(frame) - 1);
		crilog_free(l);
	}
	/* The same as CRI records: the frame's newlines are F records' ends. */
	{
		struct crilog *l = crilog_new(4096, 65536);
		static const char cri[] =
		    "2026-11-25T10:00:00Z stdout F out1\n"
		    "2026-11-25T10:00:00Z stdout P partial\n"
		    "2026-11-25T10:00:00Z stdout F \x1e" "AIRLOCK-OUT n0nce 5\n"
		    "2026-11-25T10:00:00Z stdout P ABC\n"
		    "2026-11-25T10:00:00Z stdout P DE\x1e" "AIRLOCK-END n0\n"
		    "2026-11-25T10:00:00Z stdout F nce\n"
		    "2026-11-25T10:00:00Z stderr F err\n"
		    "2026-11-25T10:00:00Z stdout F after\n";

		crilog_out_frame(l, "n0nce", 64);
		for (size_t i = 0; i < sizeof(cri) - 1; i += 7)
			crilog_feed(l, cri + i, sizeof(cri) - 1 - i < 7 ? sizeof(cri) - 1 - i : 7);
		crilog_finish(l);
		assert_string_equal(out_text(l), "out1\npartialafter\n");
		assert_string_equal(crilog_text(crilog_stderr(l), NULL), "err\n");
		crilog_frame(l, &len, &st);
		assert_int_equal(st, CRILOG_FRAME_COMPLETE);
		crilog_free(l);
	}
	/* Near misses are the program's output, byte for byte. */
	{
		static const char *const miss[] = {
			"a\x1e" "AIRLOCK-OUT other 5\nxyz",
			"\x1e\x1e" "AIRLOCK-OUT n0nc",
			"\x1e" "AIRLOCK-OUTn0nce 5\n",
			"tail\x1e" "AIRL",
		};

		for (size_t i = 0; i < sizeof(miss) / sizeof(miss[0]); i++) {
			struct crilog *l = crilog_new(4096, 65536);

			crilog_out_frame(l, "n0nce", 64);
			crilog_feed_stream(l, 0, miss[i], strlen(miss[i]));
			crilog_finish(l);
			assert_string_equal(out_text(l), miss[i]);
			assert_int_equal(crilog_stdout(l)->total, strlen(miss[i]));
			crilog_frame(l, &len, &st);
			assert_int_equal(st, CRILOG_FRAME_NONE);
			crilog_free(l);
		}
	}
	/* Too large, malformed, cut short: said so, and out of stdout. */
	{
		static const struct { const char *in, *out; int st; size_t max; } bad[] = {
			{ "x\x1e" "AIRLOCK-OUT n0nce 5\nABCDE\x1e" "AIRLOCK-END n0nce\ny", "xy",
			  CRILOG_FRAME_TOO_LARGE, 4 },
			{ "x\x1e" "AIRLOCK-OUT n0nce 5x", "x", CRILOG_FRAME_MALFORMED, 64 },
			{ "x\x1e" "AIRLOCK-OUT n0nce \n", "x", CRILOG_FRAME_MALFORMED, 64 },
			{ "x\x1e" "AIRLOCK-OUT n0nce 2\nABzz", "xzz", CRILOG_FRAME_MALFORMED, 64 },
			{ "x\x1e" "AIRLOCK-OUT n0nce 9\nABC", "x", CRILOG_FRAME_INCOMPLETE, 64 },
			{ "x\x1e" "AIRLOCK-OUT n0nce 1234567890123\n", "x\n", CRILOG_FRAME_MALFORMED, 64 },
		};

		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			struct crilog *l = crilog_new(4096, 65536);

			crilog_out_frame(l, "n0nce", bad[i].max);
			crilog_feed_stream(l, 0, bad[i].in, strlen(bad[i].in));
			crilog_finish(l);
			if (strcmp(out_text(l), bad[i].out) != 0)
				fail_msg("case %zu: stdout '%s'", i, out_text(l));
			crilog_frame(l, &len, &st);
			assert_int_equal(st, bad[i].st);
			assert_int_equal(len, 0);
			crilog_free(l);
		}
	}
	/* Off (no crilog_out_frame): a frame is stdout like anything else. */
	{
		struct crilog *l = crilog_new(4096, 65536);

		crilog_feed_stream(l, 0, in, n);
		crilog_finish(l);
		assert_int_equal(crilog_stdout(l)->total, n);
		crilog_frame(l, &len, &st);
		assert_int_equal(st, CRILOG_FRAME_NONE);
		crilog_free(l);
	}
}

static void
test_feed_stream(void **state)
{
	static const char out[] = "h\xc3\xa9llo\n\xe2\x82\xac!\xff" "end";	/* é, €, a bad byte */
	static const char err[] = "e\xf0\x9f\x98";			/* cut emoji */
	size_t olen, elen;

	(void)state;
	for (size_t cut = 0; cut <= sizeof(out) - 1; cut++) {
		struct crilog *l = crilog_new(1024, 4096);
		const char *t;

		crilog_feed_stream(l, 0, out, cut);
		crilog_feed_stream(l, 1, err, cut < sizeof(err) - 1 ? cut : sizeof(err) - 1);
		crilog_feed_stream(l, 0, out + cut, sizeof(out) - 1 - cut);
		if (cut < sizeof(err) - 1)
			crilog_feed_stream(l, 1, err + cut, sizeof(err) - 1 - cut);
		crilog_finish(l);
		t = crilog_text(crilog_stdout(l), &olen);
		assert_int_equal(olen, 17);
		assert_memory_equal(t, "h\xc3\xa9llo\n\xe2\x82\xac!" FFFD "end", 17);
		assert_int_equal(crilog_stdout(l)->total, sizeof(out) - 1);
		t = crilog_text(crilog_stderr(l), &elen);
		assert_int_equal(elen, 4);
		assert_memory_equal(t, "e" FFFD, 4);
		assert_int_equal(crilog_stderr(l)->total, 4);
		assert_int_equal(crilog_bad_records(l), 0);
		crilog_free(l);
	}
	/* The cap: a prefix, never half a character, true total. */
	{
		struct crilog *l = crilog_new(3, 4096);
		const char *t;

		crilog_feed_stream(l, 0, "ab\xc3\xa9z", 5);
		crilog_finish(l);
		t = crilog_text(crilog_stdout(l), &olen);
		assert_int_equal(olen, 2);
		assert_memory_equal(t, "ab", 2);
		assert_true(crilog_stdout(l)->truncated);
		assert_int_equal(crilog_stdout(l)->total, 5);
		crilog_feed_stream(l, 0, "more", 4);	/* after finish: ignored */
		assert_int_equal(crilog_stdout(l)->total, 5);
		crilog_free(l);
	}
}


/* n whole stdout records of 99 'a' and a newline each, fed to l. */
static void
feed_records(struct crilog *l, int n)
{
	char rec[256];
	int len = snprintf(rec, sizeof(rec), TS " stdout F %.*s\n", 99,
	    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");

	for (int i = 0; i < n; i++)
		crilog_feed(l, rec, (size_t)len);
}

/*
 * Parsers sharing a budget: each growth is paid from it (doubling, 256
 * bytes first), and one it cannot pay stops the kept text there, a
 * prefix, while the counts go on. What a parser frees goes back.
 */
static void
test_budget(void **state)
{
	struct crilog_budget *b = crilog_budget_new(1024);
	struct crilog *a, *c, *d;
	size_t len;

	(void)state;
	a = crilog_new_budget(4096, 4096, b);
	c = crilog_new_budget(4096, 4096, b);
	assert_int_equal(crilog_budget_used(b), 0);
	feed_records(a, 1);
	assert_int_equal(crilog_budget_used(b), 256);
	feed_records(a, 2);			/* 300 bytes: 512 */
	assert_int_equal(crilog_budget_used(b), 512);
	feed_records(a, 7);			/* 1000 bytes: 1024 */
	assert_int_equal(crilog_budget_used(b), 1024);
	assert_int_equal(crilog_starved(a), 0);
	/* The 11th needs 2048, or at least 1100: the budget is spent. */
	feed_records(a, 10);
	assert_int_equal(crilog_starved(a), 1);
	(void)crilog_text(crilog_stdout(a), &len);
	assert_int_equal(len, 1000);
	assert_int_equal(crilog_stdout(a)->total, 2000);
	assert_int_equal(crilog_stdout(a)->truncated, 1);
	assert_int_equal(crilog_budget_used(b), 1024);
	assert_int_equal(crilog_budget_peak(b), 1024);
	/* Another parser gets nothing now, and keeps nothing later either. */
	feed_records(c, 1);
	assert_int_equal(crilog_starved(c), 1);
	assert_string_equal(crilog_text(crilog_stdout(c), NULL), "");
	assert_int_equal(crilog_stdout(c)->total, 100);
	crilog_free(a);
	assert_int_equal(crilog_budget_used(b), 0);
	feed_records(c, 1);
	assert_string_equal(crilog_text(crilog_stdout(c), NULL), "");
	assert_int_equal(crilog_stdout(c)->total, 200);
	/* A new one gets what a came back with. */
	d = crilog_new_budget(4096, 4096, b);
	feed_records(d, 3);
	assert_int_equal(crilog_budget_used(b), 512);
	assert_int_equal(crilog_starved(d), 0);
	crilog_finish(d);
	crilog_free(c);
	crilog_free(d);
	assert_int_equal(crilog_budget_used(b), 0);
	assert_int_equal(crilog_budget_peak(b), 1024);
	assert_int_equal(crilog_budget_limit(b), 1024);
	crilog_budget_free(b);

	/* Short of the doubled size, just what is needed is tried. */
	b = crilog_budget_new(1100);
	a = crilog_new_budget(4096, 4096, b);
	feed_records(a, 12);
	(void)crilog_text(crilog_stdout(a), &len);
	assert_int_equal(len, 1099);		/* the 11th's text, not its newline */
	assert_int_equal(crilog_budget_used(b), 1100);
	assert_int_equal(crilog_starved(a), 1);
	assert_int_equal(crilog_stdout(a)->total, 1200);
	crilog_free(a);
	assert_int_equal(crilog_budget_used(b), 0);
	crilog_budget_free(b);
}

/*
 * With a floor, each buffer's first bytes are its own: a parser that
 * comes after another spent the budget still keeps that much (a hostile
 * review of issue 27: one tenant's runs left later ones with nothing),
 * and the budget counts only what is past the floor.
 */
static void
test_budget_floor(void **state)
{
	struct crilog_budget *b = crilog_budget_new_floor(1024, 512);
	struct crilog *a, *c;
	size_t len;

	(void)state;
	a = crilog_new_budget(4096, 4096, b);
	c = crilog_new_budget(4096, 4096, b);
	feed_records(a, 5);			/* 500 bytes in 512: free */
	assert_int_equal(crilog_budget_used(b), 0);
	/* 1500 bytes: 1024 (512 taken), then just what is needed, 1501 (989). */
	feed_records(a, 10);
	assert_int_equal(crilog_starved(a), 0);
	assert_int_equal(crilog_budget_used(b), 989);
	feed_records(a, 10);			/* 1601 would take 1089 */
	assert_int_equal(crilog_starved(a), 1);
	(void)crilog_text(crilog_stdout(a), &len);
	assert_int_equal(len, 1500);
	assert_int_equal(crilog_budget_used(b), 989);
	/* The budget is all but spent: c keeps its floor, then stops. */
	feed_records(c, 20);
	(void)crilog_text(crilog_stdout(c), &len);
	assert_int_equal(len, 500);
	assert_int_equal(crilog_starved(c), 1);
	assert_int_equal(crilog_stdout(c)->total, 2000);
	assert_int_equal(crilog_budget_used(b), 989);
	crilog_free(a);
	assert_int_equal(crilog_budget_used(b), 0);
	crilog_free(c);
	assert_int_equal(crilog_budget_used(b), 0);
	crilog_budget_free(b);

	/* A spent budget: a new parser still keeps its floor. */
	b = crilog_budget_new_floor(0, 512);
	c = crilog_new_budget(4096, 4096, b);
	feed_records(c, 8);
	(void)crilog_text(crilog_stdout(c), &len);
	assert_int_equal(len, 500);
	assert_int_equal(crilog_starved(c), 1);
	assert_int_equal(crilog_stdout(c)->total, 800);
	crilog_free(c);
	crilog_budget_free(b);
}

/*
 * A record split across reads that the budget cannot buffer is dropped:
 * neither stream keeps text after it (it would not be a prefix), and
 * what follows is still counted. A frame it cannot hold is NO_MEMORY.
 */
static void
test_budget_split_and_frame(void **state)
{
	static const char rec1[] = TS " stdout F first\n";
	char big[400];
	struct crilog_budget *b = crilog_budget_new(512);
	struct crilog *l = crilog_new_budget(4096, 4096, b);
	size_t n;
	int st;

	(void)state;
	crilog_feed(l, rec1, sizeof(rec1) - 1);
	assert_int_equal(crilog_budget_used(b), 256);
	n = (size_t)snprintf(big, sizeof(big), TS " stdout F %0300d", 7);
	crilog_feed(l, big, n);			/* no LF yet: to be buffered */
	assert_int_equal(crilog_starved(l), 1);
	crilog_feed(l, "\n" TS " stderr F x\n", 1 + sizeof(TS " stderr F x\n") - 1);
	crilog_finish(l);
	assert_string_equal(crilog_text(crilog_stdout(l), NULL), "first\n");
	assert_int_equal(crilog_stdout(l)->total, 6);
	assert_int_equal(crilog_stdout(l)->truncated, 1);
	assert_string_equal(crilog_text(crilog_stderr(l), NULL), "");
	assert_int_equal(crilog_stderr(l)->total, 2);
	assert_int_equal(crilog_stderr(l)->truncated, 1);
	assert_int_equal(crilog_bad_records(l), 0);
	crilog_free(l);
	assert_int_equal(crilog_budget_used(b), 0);

	l = crilog_new_budget(4096, 65536, b);
	crilog_out_frame(l, "n0nce", 10000);
	{
		char in[1024];
		int k = snprintf(in, sizeof(in), "\x1e" "AIRLOCK-OUT n0nce 600\n%0600d"
		    "\x1e" "AIRLOCK-END n0nce\nafter\n", 0);

		crilog_feed_stream(l, 0, in, (size_t)k);
	}
	crilog_finish(l);
	assert_string_equal(crilog_frame(l, &n, &st), "");
	assert_int_equal(st, CRILOG_FRAME_NO_MEMORY);
	assert_int_equal(n, 0);
	assert_int_equal(crilog_starved(l), 1);
	assert_string_equal(crilog_text(crilog_stdout(l), NULL), "after\n");
	crilog_free(l);
	assert_int_equal(crilog_budget_used(b), 0);
	crilog_budget_free(b);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_feed_stream),
		cmocka_unit_test(test_budget),
		cmocka_unit_test(test_budget_split_and_frame),
		cmocka_unit_test(test_budget_floor),
		cmocka_unit_test(test_out_frame),
		cmocka_unit_test(test_full_lines),
		cmocka_unit_test(test_partial_join),
		cmocka_unit_test(test_empty_content),
		cmocka_unit_test(test_interleaved),
		cmocka_unit_test(test_every_split_point),
		cmocka_unit_test(test_cap_around_chars),
		cmocka_unit_test(test_cap_exact),
		cmocka_unit_test(test_invalid_utf8),
		cmocka_unit_test(test_split_char),
		cmocka_unit_test(test_oversized),
		cmocka_unit_test(test_unterminated_flood),
		cmocka_unit_test(test_flood),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_timestamps),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
