/* Unit tests: operator/backoff.c - the delays, the jitter, the reset. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <limits.h>
#include <cmocka.h>

#include "backoff.h"

static void
test_steps(void **state)
{
	static const long want[] = { 100, 200, 400, 800, 1600, 3200, 5000, 5000 };
	long cur = 0;

	(void)state;
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		cur = backoff_step(cur, 100, 5000);
		assert_int_equal(cur, want[i]);
	}
	/* An initial above the cap is the cap; no overflow near LONG_MAX. */
	assert_int_equal(backoff_step(0, 9000, 5000), 5000);
	assert_int_equal(backoff_step(LONG_MAX / 2 + 1, 1, LONG_MAX), LONG_MAX);
	assert_int_equal(backoff_step(LONG_MAX, 1, LONG_MAX), LONG_MAX);
}

static void
test_jitter(void **state)
{
	(void)state;
	/* Uniform over [d/2, d]. */
	assert_int_equal(backoff_jitter(1000, 0), 500);
	assert_int_equal(backoff_jitter(1000, 500), 1000);
	assert_int_equal(backoff_jitter(1000, 501), 500);
	assert_int_equal(backoff_jitter(1000, 123), 623);
	assert_int_equal(backoff_jitter(1, 7), 0 + 7 % 1);
	assert_int_equal(backoff_jitter(0, 7), 0);
	assert_int_equal(backoff_jitter(-5, 7), 0);
	assert_int_equal(backoff_jitter(3, 1), 2);
}

static void
test_next_and_reset(void **state)
{
	struct backoff b = { .initial_ms = 100, .max_ms = 1000, .seed = 42 };
	long d;

	(void)state;
	for (int i = 0; i < 50; i++) {
		long cap = i < 4 ? 100L << i : 1000;

		d = backoff_next(&b);
		if (d < cap / 2 || d > cap)
			fail_msg("wait %d: %ld outside [%ld, %ld]", i, d, cap / 2, cap);
	}
	assert_int_equal(b.cur_ms, 1000);
	backoff_reset(&b);
	d = backoff_next(&b);
	assert_true(d >= 50 && d <= 100);
	/* Unseeded: seeded on first use, still in range. */
	b = (struct backoff){ .initial_ms = 10, .max_ms = 10 };
	d = backoff_next(&b);
	assert_true(d >= 5 && d <= 10);
	assert_int_not_equal(b.seed, 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_steps),
		cmocka_unit_test(test_jitter),
		cmocka_unit_test(test_next_and_reset),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
