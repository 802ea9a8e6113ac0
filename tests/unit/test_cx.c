/* Unit tests: execution/cx.c - the phase and reason table, defaults. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "cx.h"

static void
test_exit_codes(void **state)
{
	static const struct {
		const char *status;
		int code;
	} t[] = {
		{ "{\"phase\":\"Succeeded\",\"reason\":\"Completed\",\"exitCode\":0}", 0 },
		{ "{\"phase\":\"Failed\",\"reason\":\"Error\",\"exitCode\":3}", 3 },
		{ "{\"phase\":\"Failed\",\"reason\":\"Error\",\"exitCode\":255}", 255 },
		{ "{\"phase\":\"Failed\",\"reason\":\"Error\",\"exitCode\":256}", 1 },
		{ "{\"phase\":\"Failed\",\"reason\":\"Error\",\"exitCode\":-1}", 1 },
		{ "{\"phase\":\"TimedOut\",\"reason\":\"DeadlineExceeded\",\"exitCode\":137}", 124 },
		{ "{\"phase\":\"Failed\",\"reason\":\"OOMKilled\",\"exitCode\":137}", 125 },
		{ "{\"phase\":\"Failed\",\"reason\":\"OutputLimitExceeded\",\"exitCode\":137}", 123 },
		{ "{\"phase\":\"Failed\",\"reason\":\"Rejected\"}", 121 },
		{ "{\"phase\":\"Failed\",\"reason\":\"Unschedulable\"}", 121 },
		{ "{\"phase\":\"Failed\",\"reason\":\"ImagePullFailed\"}", 121 },
		{ "{\"phase\":\"Failed\",\"reason\":\"StartFailed\"}", 121 },
		{ "{\"phase\":\"Cancelled\",\"reason\":\"Cancelled\"}", 130 },
		/* The program's code where it had one, else 1. */
		{ "{\"phase\":\"Failed\",\"reason\":\"ResultTooLarge\",\"exitCode\":7}", 7 },
		{ "{\"phase\":\"Failed\",\"reason\":\"IsolationFailed\",\"exitCode\":137}", 137 },
		{ "{\"phase\":\"Failed\",\"reason\":\"PodDeleted\"}", 1 },
		{ "{\"phase\":\"Failed\",\"reason\":\"ResultLost\"}", 1 },
		/* A reason counts only in its own phase. */
		{ "{\"phase\":\"TimedOut\",\"reason\":\"OOMKilled\"}", 124 },
		{ "{\"phase\":\"Succeeded\",\"reason\":\"Error\",\"exitCode\":3}", 0 },
		{ "{\"phase\":\"Failed\",\"reason\":\"Nonsense\",\"exitCode\":9}", 9 },
		{ "{\"phase\":\"Weird\",\"exitCode\":4}", 4 },
		{ "{}", 1 },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		json_t *st = json_loads(t[i].status, 0, NULL);

		assert_non_null(st);
		if (cx_exit_code(st) != t[i].code)
			fail_msg("%s: exit %d, not %d", t[i].status, cx_exit_code(st), t[i].code);
		json_decref(st);
	}
}

static void
test_phases(void **state)
{
	(void)state;
	assert_true(cx_phase_terminal("Succeeded"));
	assert_true(cx_phase_terminal("Failed"));
	assert_true(cx_phase_terminal("TimedOut"));
	assert_true(cx_phase_terminal("Cancelled"));
	assert_false(cx_phase_terminal("Pending"));
	assert_false(cx_phase_terminal("Running"));
	assert_false(cx_phase_terminal(""));
	assert_false(cx_phase_terminal("failed"));
	assert_false(cx_phase_terminal(NULL));
	/* The kubelet's words for an end its node lost track of, exactly. */
	assert_true(cx_end_untracked("Unknown"));
	assert_true(cx_end_untracked("ContainerStatusUnknown"));
	assert_false(cx_end_untracked("Error"));
	assert_false(cx_end_untracked("unknown"));
	assert_false(cx_end_untracked(NULL));
	assert_string_equal(cx_phase_name(CX_PHASE_TIMED_OUT), "TimedOut");
	assert_string_equal(cx_phase_name(CX_PHASE_COUNT), "");
	assert_string_equal(cx_reason_name(CX_REASON_OUTPUT_LIMIT), "OutputLimitExceeded");
	assert_string_equal(cx_reason_name(CX_REASON_COUNT), "");
	assert_int_equal(cx_reason_phase(CX_REASON_DEADLINE_EXCEEDED), CX_PHASE_TIMED_OUT);
	assert_int_equal(cx_reason_phase(CX_REASON_COMPLETED), CX_PHASE_SUCCEEDED);
	assert_int_equal(cx_reason_phase(CX_REASON_CANCELLED), CX_PHASE_CANCELLED);
	assert_int_equal(cx_reason_phase(CX_REASON_ISOLATION_FAILED), CX_PHASE_FAILED);
	/* Every reason ends an execution. */
	for (int r = 0; r < CX_REASON_COUNT; r++)
		if (!cx_phase_terminal(cx_phase_name(cx_reason_phase((enum cx_reason)r))))
			fail_msg("%s: not a terminal phase", cx_reason_name((enum cx_reason)r));
	/* The order the agent's result patch tests. */
	assert_string_equal(cx_condition_name(CX_COND_SCHEDULED), "Scheduled");
	assert_string_equal(cx_condition_name(CX_COND_STARTED), "Started");
	assert_string_equal(cx_condition_name(CX_COND_COMPLETE), "Complete");
	assert_int_equal(CX_COND_COMPLETE, 2);
}

/* The CRD's enum of reasons is the table's, in its order. */
static void
test_reasons_match_crd(void **state)
{
	const char *top = getenv("AIRLOCK_TOP");
	char path[4096], line[8192], want[4096] = "enum: [";
	FILE *f;
	int found = 0;

	(void)state;
	snprintf(path, sizeof(path), "%s/crds/airlock.dev_codeexecutions.yaml",
	    top ? top : ".");
	for (int r = 0; r < CX_REASON_COUNT; r++) {
		strcat(want, r ? ", " : "");
		strcat(want, cx_reason_name((enum cx_reason)r));
	}
	strcat(want, "]");
	f = fopen(path, "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		if (strstr(line, "enum: [Completed,")) {
			found = 1;
			if (strstr(line, want) == NULL)
				fail_msg("the CRD's reasons:\n%s the table's:\n%s", line, want);
		}
	fclose(f);
	assert_true(found);
}

static void
test_defaults(void **state)
{
	json_t *cx = json_pack("{s:{}}", "spec");

	(void)state;
	assert_int_equal(cx_timeout_ms(cx), 30000);
	assert_int_equal(cx_max_bytes(cx), 65536);
	assert_int_equal(cx_timeout_ms(NULL), 30000);
	json_object_set_new(json_object_get(cx, "spec"), "timeoutSeconds", json_integer(7));
	json_object_set_new(json_object_get(cx, "spec"), "output",
	    json_pack("{s:i}", "maxBytes", 100));
	assert_int_equal(cx_timeout_ms(cx), 7000);
	assert_int_equal(cx_max_bytes(cx), 100);
	json_object_set_new(json_object_get(cx, "spec"), "timeoutSeconds", json_integer(0));
	assert_int_equal(cx_timeout_ms(cx), 30000);
	json_decref(cx);
	assert_string_equal(cx_resource.group, "airlock.dev");
	assert_string_equal(cx_resource.plural, "codeexecutions");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_exit_codes),
		cmocka_unit_test(test_phases),
		cmocka_unit_test(test_reasons_match_crd),
		cmocka_unit_test(test_defaults),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
