/*
 * Unit tests: operator/daemon.c's flag parsing: a bad number exits 2
 * naming the flag and the range (run in a child), a good one is taken.
 */
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

#include "daemon.h"

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

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_flag_number),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
