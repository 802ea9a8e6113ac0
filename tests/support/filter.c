/*
 * Every test binary links this: AIRLOCK_TEST_FILTER, a cmocka filter
 * ("test_agent_away", "test_warm_*"), runs only the cases it names, for
 * the inner loop. Set before main, so no test's main has to ask.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

static void filter_from_env(void) __attribute__((constructor));

static void
filter_from_env(void)
{
	const char *f = getenv("AIRLOCK_TEST_FILTER");

	if (f != NULL && *f != '\0')
		cmocka_set_test_filter(f);
}
