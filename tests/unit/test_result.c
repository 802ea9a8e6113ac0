/*
 * Unit tests: execution/result.c - every way a run ends, as the status the
 * node agent and the local mode write.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "result.h"

#define T0	INT64_C(1795000000123456789)	/* 2026-11-18T11:06:40.123456789Z */

struct fixture {
	struct crilog		*log;
	struct cx_run_end	 e;
};

static int
setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	f->log = crilog_new(65536, 65536);
	crilog_feed_stream(f->log, 0, "hello\n", 6);
	crilog_feed_stream(f->log, 1, "oops\n", 5);
	crilog_finish(f->log);
	f->e = (struct cx_run_end){ .exit_status = 0, .start_ns = T0,
	    .exited_ns = T0 + 1500 * INT64_C(1000000), .node = "n1",
	    .scheduled = "scheduled to node n1", .out = crilog_stdout(f->log),
	    .err = crilog_stderr(f->log), .out_keep = SIZE_MAX,
	    .err_keep = SIZE_MAX, .budget = 1000, .timeout_ms = 2000,
	    .hard_cap = 4096, .peak_memory = -1, .cpu_ns = -1 };
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	struct fixture *f = *state;

	crilog_free(f->log);
	free(f);
	return 0;
}

static const char *
str(json_t *st, const char *key)
{
	const char *v = json_string_value(json_object_get(st, key));

	if (v == NULL)
		fail_msg("status.%s: not a string", key);
	return v;
}

static long long
num(json_t *st, const char *key)
{
	json_t *v = json_object_get(st, key);

	if (!json_is_integer(v))
		fail_msg("status.%s: not an integer", key);
	return json_integer_value(v);
}

/* Phase, reason, message and exit code, checked as a whole. */
static json_t *
expect(struct fixture *f, const char *phase, const char *reason,
    const char *msg, int code)
{
	struct cx_outcome o;
	json_t *st = cx_result_status(&f->e, &o);
	json_t *done;

	assert_non_null(st);
	assert_string_equal(str(st, "phase"), phase);
	assert_string_equal(str(st, "reason"), reason);
	assert_string_equal(str(st, "message"), msg);
	assert_int_equal(num(st, "exitCode"), code);
	assert_string_equal(o.phase, phase);
	assert_string_equal(o.reason_name, reason);
	assert_string_equal(o.message, msg);
	assert_int_equal(o.exit_code, code);
	/* The Complete condition says the same. */
	done = json_array_get(json_object_get(st, "conditions"), CX_COND_COMPLETE);
	assert_string_equal(str(done, "type"), "Complete");
	assert_string_equal(str(done, "reason"), reason);
	assert_string_equal(str(done, "message"), msg);
	return st;
}

static void
test_completed(void **state)
{
	struct fixture *f = *state;
	json_t *st = expect(f, "Succeeded", "Completed", "exit code 0", 0);
	json_t *conds = json_object_get(st, "conditions");

	assert_int_equal(json_array_size(conds), 3);
	assert_string_equal(str(json_array_get(conds, 0), "type"), "Scheduled");
	assert_string_equal(str(json_array_get(conds, 0), "message"), "scheduled to node n1");
	assert_string_equal(str(json_array_get(conds, 0), "status"), "True");
	assert_string_equal(str(json_array_get(conds, 1), "type"), "Started");
	assert_string_equal(str(json_array_get(conds, 1), "lastTransitionTime"),
	    "2026-11-18T11:06:40.123Z");
	assert_string_equal(str(json_array_get(conds, 2), "lastTransitionTime"),
	    "2026-11-18T11:06:41.623Z");
	assert_null(json_object_get(json_array_get(conds, 2), "observedGeneration"));
	assert_string_equal(str(st, "stdout"), "hello\n");
	assert_string_equal(str(st, "stderr"), "oops\n");
	assert_int_equal(num(st, "stdoutBytes"), 6);
	assert_int_equal(num(st, "stderrBytes"), 5);
	assert_true(json_is_false(json_object_get(st, "stdoutTruncated")));
	assert_true(json_is_false(json_object_get(st, "stderrTruncated")));
	assert_string_equal(str(st, "startTime"), "2026-11-18T11:06:40.123Z");
	assert_string_equal(str(st, "completionTime"), "2026-11-18T11:06:41.623Z");
	assert_int_equal(num(st, "durationMillis"), 1500);
	assert_string_equal(str(st, "nodeName"), "n1");
	assert_null(json_object_get(st, "peakMemoryBytes"));
	assert_null(json_object_get(st, "cpuTimeMillis"));
	assert_int_equal(json_object_size(st), 15);
	json_decref(st);
}

static void
test_error_exit(void **state)
{
	struct fixture *f = *state;

	f->e.exit_status = 3;
	json_decref(expect(f, "Failed", "Error", "exit code 3", 3));
	f->e.exit_status = -1;		/* the runtime did not say */
	json_decref(expect(f, "Failed", "Error", "exit code -1", -1));
}

/* A kill reason outranks the exit status and OOM: the kill caused both. */
static void
test_kills(void **state)
{
	struct fixture *f = *state;

	f->e.exit_status = 143;
	f->e.oom = 1;
	f->e.why = CX_KILL_DEADLINE;
	json_decref(expect(f, "TimedOut", "DeadlineExceeded",
	    "killed at its 2000 ms deadline", 137));
	f->e.why = CX_KILL_OUTPUT;
	json_decref(expect(f, "Failed", "OutputLimitExceeded",
	    "killed after writing more than 4096 bytes", 137));
	f->e.why = CX_KILL_ISOLATION;
	json_decref(expect(f, "Failed", "IsolationFailed",
	    "stopped at its start: the sandbox is not isolated", 137));
	f->e.isolation = "runc, not gVisor";
	json_decref(expect(f, "Failed", "IsolationFailed",
	    "stopped at its start: runc, not gVisor", 137));
	f->e.why = CX_KILL_CANCEL;
	f->e.signal = 2;
	json_decref(expect(f, "Cancelled", "Cancelled", "stopped by Interrupt", 137));
	/* A warm start not confirmed: killed in case it ran, never again. */
	f->e.why = CX_KILL_START;
	json_decref(expect(f, "Failed", "StartFailed", "its start was not "
	    "confirmed: the program, which may have started, was killed and "
	    "is not run again", 137));
}

/*
 * A profile with a code policy: its guard's refusal (exit 120 from
 * Python's, 137 from bash's) ends it PolicyDenied, in the guard's last
 * words; the same exits without a policy, or OOM, are what they are.
 */
static void
test_policy_denied(void **state)
{
	struct fixture *f = *state;
	struct crilog *log = crilog_new(65536, 65536);
	static const char err[] = "airlock: policy: not this one\nTraceback\n"
	    "airlock: policy: import of 'subprocess' refused (main.py line 3)\n";

	f->e.exit_status = 120;
	json_decref(expect(f, "Failed", "Error", "exit code 120", 120));
	f->e.policy = 1;
	/* No guard line (it was past the output cap): said generally. */
	json_decref(expect(f, "Failed", "PolicyDenied",
	    "refused by the profile's code policy", 120));
	crilog_feed_stream(log, 1, err, sizeof(err) - 1);
	crilog_feed_stream(log, 1, "x airlock: policy: forged mid-line", 34);
	crilog_finish(log);
	f->e.err = crilog_stderr(log);
	json_decref(expect(f, "Failed", "PolicyDenied",
	    "policy: import of 'subprocess' refused (main.py line 3)", 120));
	f->e.exit_status = 137;
	json_decref(expect(f, "Failed", "PolicyDenied",
	    "policy: import of 'subprocess' refused (main.py line 3)", 137));
	f->e.exit_status = 3;
	json_decref(expect(f, "Failed", "Error", "exit code 3", 3));
	f->e.exit_status = 137;
	f->e.oom = 1;
	json_decref(expect(f, "Failed", "OOMKilled", "out of memory", 137));
	f->e.err = NULL;
	crilog_free(log);
}

static void
test_oom(void **state)
{
	struct fixture *f = *state;

	f->e.oom = 1;
	f->e.exit_status = 137;
	f->e.peak_memory = 268435456;
	f->e.cpu_ns = 2500000000LL;
	json_t *st = expect(f, "Failed", "OOMKilled", "out of memory", 137);
	assert_int_equal(num(st, "peakMemoryBytes"), 268435456);
	assert_int_equal(num(st, "cpuTimeMillis"), 2500);
	json_decref(st);
}

/* Cut to the storage budget: said in the message and the flags. */
static void
test_budget_cut(void **state)
{
	struct fixture *f = *state;
	json_t *st;

	f->e.out_keep = 2;
	f->e.err_keep = 5;
	f->e.exit_status = 1;
	st = expect(f, "Failed", "Error", "exit code 1; output cut to 2 bytes of "
	    "stdout and 5 of stderr to fit the execution's 1000-byte storage budget", 1);
	assert_string_equal(str(st, "stdout"), "he");
	assert_string_equal(str(st, "stderr"), "oops\n");
	assert_true(json_is_true(json_object_get(st, "stdoutTruncated")));
	assert_true(json_is_false(json_object_get(st, "stderrTruncated")));
	assert_int_equal(num(st, "stdoutBytes"), 6);
	json_decref(st);
}

/* Refused as too large: no output, the counts kept, still an end. */
static void
test_refused(void **state)
{
	struct fixture *f = *state;
	json_t *st;

	f->e.why = CX_KILL_DEADLINE;
	f->e.refused = "etcdserver: request is too large";
	st = expect(f, "Failed", "ResultTooLarge", "the API server refused the "
	    "result (etcdserver: request is too large); its 6 bytes of stdout "
	    "and 5 of stderr are left out", 137);
	assert_string_equal(str(st, "stdout"), "");
	assert_string_equal(str(st, "stderr"), "");
	assert_true(json_is_true(json_object_get(st, "stdoutTruncated")));
	assert_true(json_is_true(json_object_get(st, "stderrTruncated")));
	assert_int_equal(num(st, "stdoutBytes"), 6);
	assert_int_equal(num(st, "stderrBytes"), 5);
	json_decref(st);
}

/* A start never seen counts from the exit; a clock step never goes negative. */
static void
test_times(void **state)
{
	struct fixture *f = *state;
	json_t *st;

	f->e.start_ns = 0;
	st = cx_result_status(&f->e, NULL);
	assert_int_equal(num(st, "durationMillis"), 0);
	assert_string_equal(str(st, "startTime"), str(st, "completionTime"));
	json_decref(st);
	f->e.start_ns = f->e.exited_ns + 5000000000LL;
	st = cx_result_status(&f->e, NULL);
	assert_int_equal(num(st, "durationMillis"), 0);
	json_decref(st);
}

/* The stream's own truncation (maxBytes) shows even when all it kept fits. */
static void
test_stream_truncated(void **state)
{
	struct crilog *log = crilog_new(4, 65536);
	struct cx_run_end e = { .exited_ns = T0, .start_ns = T0 };
	json_t *st;

	(void)state;
	crilog_feed_stream(log, 0, "abcdefgh", 8);
	crilog_finish(log);
	e.out = crilog_stdout(log);
	e.err = crilog_stderr(log);
	e.out_keep = e.err_keep = SIZE_MAX;
	e.peak_memory = e.cpu_ns = -1;
	st = cx_result_status(&e, NULL);
	assert_string_equal(str(st, "stdout"), "abcd");
	assert_int_equal(num(st, "stdoutBytes"), 8);
	assert_true(json_is_true(json_object_get(st, "stdoutTruncated")));
	assert_string_equal(str(st, "message"), "exit code 0");
	assert_string_equal(str(st, "nodeName"), "");
	json_decref(st);
	crilog_free(log);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_completed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_error_exit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_kills, setup, teardown),
		cmocka_unit_test_setup_teardown(test_policy_denied, setup, teardown),
		cmocka_unit_test_setup_teardown(test_oom, setup, teardown),
		cmocka_unit_test_setup_teardown(test_budget_cut, setup, teardown),
		cmocka_unit_test_setup_teardown(test_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_times, setup, teardown),
		cmocka_unit_test(test_stream_truncated),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
