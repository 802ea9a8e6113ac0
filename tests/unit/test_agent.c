/* Unit tests: node-agent/agent.c's pure parts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "agent.h"

#define CXUID	"ccbbf721-b9ed-449b-a12c-3cf68aa3769a"
#define PODUID	"7056fc73-9923-4638-a1cc-3f428b37a5b5"

static void
test_log_dir_name(void **state)
{
	char ns[64], pod[64], uid[64];

	(void)state;
	assert_int_equal(agent_log_dir_name("t1_airlock-" CXUID "_" PODUID,
	    ns, pod, uid, sizeof(ns)), 0);
	assert_string_equal(ns, "t1");
	assert_string_equal(pod, "airlock-" CXUID);
	assert_string_equal(uid, PODUID);
}

/* Anything but an execution pod's directory is left alone. */
static void
test_log_dir_name_refused(void **state)
{
	static const char *const bad[] = {
		"",
		"_",
		"__",
		"t1_web-0_" PODUID,				/* not ours */
		"t1_airlock-controller-5d8f_" PODUID,		/* ours, not an execution */
		"t1_airlock-" CXUID "x_" PODUID,		/* one too long */
		"t1_airlock-" "CCBBF721-B9ED-449B-A12C-3CF68AA3769A_" PODUID,
		"_airlock-" CXUID "_" PODUID,			/* no namespace */
		"t1_airlock-" CXUID "_",			/* no uid */
		"t1_airlock-" CXUID,				/* two parts */
		"t1_airlock-" CXUID "_" PODUID "_x",		/* four */
		"t1_airlock-" CXUID "_" PODUID "_",
		"..",
	};
	char ns[64], pod[64], uid[64];

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (agent_log_dir_name(bad[i], ns, pod, uid, sizeof(ns)) != -1)
			fail_msg("accepted '%s'", bad[i]);
	/* A part longer than the buffers. */
	assert_int_equal(agent_log_dir_name("t1_airlock-" CXUID "_" PODUID,
	    ns, pod, uid, 40), -1);
	{
		char longns[400];

		memset(longns, 'a', 260);
		strcpy(longns + 260, "_airlock-" CXUID "_x");
		assert_int_equal(agent_log_dir_name(longns, ns, pod, uid,
		    sizeof(ns)), -1);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_log_dir_name),
		cmocka_unit_test(test_log_dir_name_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
