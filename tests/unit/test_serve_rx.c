/*
 * Unit tests: the node agent's reader of a step server's records
 * (node-agent/serve.h; the protocol in images/runner/warm.c's header).
 * The stream is the sandbox's, so a tenant can write anything into it:
 * records split anywhere, record text inside an output's bytes, an end
 * followed by more, and every malformed line refused with its reason.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "serve.h"

struct got {
	char	out[4096], err[4096];
	size_t	nout, nerr, calls;
};

static void
collect(void *arg, int stream, const char *p, size_t n)
{
	struct got *g = arg;
	char *dst = stream == 1 ? g->out : g->err;
	size_t *len = stream == 1 ? &g->nout : &g->nerr;

	assert_true(stream == 1 || stream == 2);
	assert_true(*len + n < sizeof(g->out));
	memcpy(dst + *len, p, n);
	*len += n;
	g->calls++;
}

static const char STREAM[] = "O 5\nhelloE 3\nerrO 9\nX 1 0\nhi\nX 7 3\n";

static void
test_whole_and_split(void **state)
{
	(void)state;
	/* Fed at once, then a byte at a time: the same records. */
	for (int bytewise = 0; bytewise < 2; bytewise++) {
		struct serve_rx rx = { 0 };
		struct got g = { 0 };
		size_t n = sizeof(STREAM) - 1, i = 0;

		if (!bytewise)
			assert_int_equal(serve_rx_feed(&rx, STREAM, n, collect, &g),
			    (long)n);
		else
			for (; i < n; i++)
				assert_int_equal(serve_rx_feed(&rx, STREAM + i, 1,
				    collect, &g), 1);
		assert_int_equal(rx.ended, 1);
		assert_int_equal(rx.seq, 7);
		assert_int_equal(rx.status, 3);
		assert_string_equal(rx.err, "");
		/* "X 1 0" inside an O's bytes is output, not an end. */
		assert_int_equal(g.nout, 14);
		assert_memory_equal(g.out, "helloX 1 0\nhi\n", 14);
		assert_int_equal(g.nerr, 3);
		assert_memory_equal(g.err, "err", 3);
	}
}

static void
test_stops_at_the_end(void **state)
{
	static const char s[] = "O 2\nokX 12 137\nO 4\nmore";
	struct serve_rx rx = { 0 };
	struct got g = { 0 };

	(void)state;
	/* What follows the X is not this step's: left for the caller. */
	assert_int_equal(serve_rx_feed(&rx, s, sizeof(s) - 1, collect, &g), 15);
	assert_int_equal(rx.seq, 12);
	assert_int_equal(rx.status, 137);
	assert_int_equal(g.nout, 2);
	assert_int_equal(serve_rx_feed(&rx, "O 1\nx", 5, collect, &g), 0);
	assert_int_equal(g.nout, 2);
}

static void
test_largest_record(void **state)
{
	struct serve_rx rx = { 0 };
	struct got g = { 0 };
	char line[32];
	int n = snprintf(line, sizeof(line), "E %ld\n", SERVE_RX_MAX);

	(void)state;
	assert_int_equal(serve_rx_feed(&rx, line, (size_t)n, collect, &g), n);
	assert_int_equal(rx.stream, 2);
	assert_int_equal(rx.left, (size_t)SERVE_RX_MAX);
	assert_int_equal(g.calls, 0);
}

static void
test_refused(void **state)
{
	static const struct {
		const char *in, *why;
	} bad[] = {
		{ "Q 1\n", "a record's line is not 'O|E|X ...'" },
		{ "O\n", "a record's line is not 'O|E|X ...'" },
		{ "O1\n", "a record's line is not 'O|E|X ...'" },
		{ "\n", "a record's line is not 'O|E|X ...'" },
		{ "O 0\n", "an output record's length is not a number from 1 to 1 MiB" },
		{ "O 01\nx", "an output record's length is not a number from 1 to 1 MiB" },
		{ "O -1\n", "an output record's length is not a number from 1 to 1 MiB" },
		{ "O 1048577\n", "an output record's length is not a number from 1 to 1 MiB" },
		{ "E 99999999999999999999999\n", "an output record's length is not a number from 1 to 1 MiB" },
		{ "X 1\n", "a record's line is not 'O|E|X ...'" },
		{ "X 1 256\n", "an end record is not 'X SEQ STATUS'" },
		{ "X 1 0 0\n", "an end record is not 'X SEQ STATUS'" },
		{ "X 9223372036854775808 0\n", "an end record is not 'X SEQ STATUS'" },
		{ "X  0\n", "an end record is not 'X SEQ STATUS'" },
		{ "O 123456789012345678901234567890123456789012345678901234567890123",
		    "a record's line is too long" },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct serve_rx rx = { 0 };
		struct got g = { 0 };

		assert_int_equal(serve_rx_feed(&rx, bad[i].in, strlen(bad[i].in),
		    collect, &g), -1);
		assert_string_equal(rx.err, bad[i].why);
		assert_int_equal(rx.ended, 0);
		assert_int_equal(g.calls, 0);
		/* Once refused, nothing more is taken. */
		assert_int_equal(serve_rx_feed(&rx, "O 1\nx", 5, collect, &g), -1);
		assert_int_equal(g.calls, 0);
	}
}

static void
test_longest_line(void **state)
{
	struct serve_rx rx = { 0 };
	char line[SERVE_RX_LINE + 1];

	(void)state;
	/* 63 bytes and its newline fit: an end with a long seq's digits. */
	memset(line, '0', sizeof(line));
	memcpy(line, "X 1", 3);
	line[SERVE_RX_LINE - 3] = ' ';
	line[SERVE_RX_LINE - 2] = '5';
	line[SERVE_RX_LINE - 1] = '\n';
	/* "X 1000...0 5": a seq past 2^63 is refused, not wrapped. */
	assert_int_equal(serve_rx_feed(&rx, line, SERVE_RX_LINE, collect, NULL),
	    -1);
	assert_string_equal(rx.err, "an end record is not 'X SEQ STATUS'");
	memset(&rx, 0, sizeof(rx));
	memset(line, ' ', sizeof(line));
	memcpy(line, "X 42 5", 6);
	line[SERVE_RX_LINE - 1] = '\n';
	/* Spaces after the status: not a number, refused. */
	assert_int_equal(serve_rx_feed(&rx, line, SERVE_RX_LINE, collect, NULL),
	    -1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_whole_and_split),
		cmocka_unit_test(test_stops_at_the_end),
		cmocka_unit_test(test_largest_record),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_longest_line),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
