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

#include "artifacts.h"
#include "jsonsize.h"
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
 * Egress counted on the node: the bytes in status.egressBytes whenever it
 * was metered (never otherwise), and past the cap, EgressLimitExceeded.
 */
static void
test_egress_metered(void **state)
{
	struct fixture *f = *state;
	json_t *st;

	st = expect(f, "Succeeded", "Completed", "exit code 0", 0);
	assert_null(json_object_get(st, "egressBytes"));
	json_decref(st);
	f->e.egress_metered = 1;
	f->e.egress_cap = 1048576;
	f->e.egress_bytes = 0;
	st = expect(f, "Succeeded", "Completed", "exit code 0", 0);
	assert_int_equal(json_integer_value(json_object_get(st, "egressBytes")), 0);
	json_decref(st);
	f->e.egress_bytes = 1047000;
	f->e.exit_status = 137;
	f->e.why = CX_KILL_EGRESS;
	st = expect(f, "Failed", "EgressLimitExceeded", "stopped: its network "
	    "traffic passed its cap of 1048576 bytes (network.egressBytes)", 137);
	assert_int_equal(json_integer_value(json_object_get(st, "egressBytes")),
	    1047000);
	assert_int_equal(cx_exit_code(st), 122);
	json_decref(st);
	/* Cut off, it ended by itself before the agent stopped it: said so. */
	f->e.why = CX_KILL_NONE;
	f->e.exit_status = 1;
	f->e.egress_over = 1;
	st = expect(f, "Failed", "EgressLimitExceeded", "its network traffic "
	    "passed its cap of 1048576 bytes (network.egressBytes); it ended "
	    "with exit code 1", 1);
	json_decref(st);
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

/*
 * An execution as the API server stores it while its program runs, the
 * controller's part of the status written: what the result is patched
 * into (node-agent/record.c).
 */
static json_t *
running_cx(void)
{
	return json_pack("{s:s, s:s, s:{s:s, s:s, s:s, s:s, s:I},"
	    " s:{s:s, s:{s:s}, s:s, s:s, s:I, s:{s:I}},"
	    " s:{s:s, s:s, s:s, s:s, s:s, s:I, s:s,"
	    " s:[{s:s, s:s, s:s, s:s, s:s, s:I}, {s:s, s:s, s:s, s:s, s:s, s:I},"
	    " {s:s, s:s, s:s, s:s, s:s, s:I}]}}",
	    "apiVersion", "airlock.dev/v1alpha1", "kind", "CodeExecution",
	    "metadata", "name", "big-out", "namespace", "t1", "uid",
	    "ccbbf721-b9ed-449b-a12c-3cf68aa3769a", "creationTimestamp",
	    "2026-11-18T11:06:39Z", "generation", (json_int_t)1,
	    "spec", "runtime", "python", "code", "main.py",
	    "print('<' * 2**20)", "entrypoint", "main.py", "stdin", "",
	    "timeoutSeconds", (json_int_t)30, "output", "maxBytes",
	    (json_int_t)1048576,
	    "status", "phase", "Running", "podName",
	    "airlock-ccbbf721-b9ed-449b-a12c-3cf68aa3769a", "nodeName", "n1",
	    "startMode", "Cold", "codeSha256",
	    "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
	    "observedGeneration", (json_int_t)1, "startTime",
	    "2026-11-18T11:06:40Z", "conditions",
	    "type", "Scheduled", "status", "True", "reason", "Scheduled",
	    "message", "scheduled to node n1", "lastTransitionTime",
	    "2026-11-18T11:06:40Z", "observedGeneration", (json_int_t)1,
	    "type", "Started", "status", "True", "reason", "Started",
	    "message", "the program started", "lastTransitionTime",
	    "2026-11-18T11:06:40Z", "observedGeneration", (json_int_t)1,
	    "type", "Complete", "status", "False", "reason", "Running",
	    "message", "", "lastTransitionTime", "2026-11-18T11:06:40Z",
	    "observedGeneration", (json_int_t)1);
}

/*
 * status.artifacts counts in the storage budget (issue 27 #6): 64 files
 * out whose 255-byte names are all '<' (6 bytes each as stored) and 1 MiB
 * of '<' on each stream. The output gives up what the list takes past
 * the status's reserve, and the execution as stored, with its result
 * patched in as record.c does, stays within CX_OBJECT_BUDGET. Before,
 * the output took the whole budget and the list came on top: 1139197
 * bytes stored, 90621 over.
 */
static void
test_budget_counts_artifacts(void **state)
{
	struct crilog *log = crilog_new(1 << 20, 65536);
	struct artifact files[64];
	struct artifacts arts = { .files = files, .nfiles = 64 };
	static char big[1 << 20], names[64][256];
	json_t *cx = running_cx(), *st, *cst, *list, *c, *v;
	struct cx_run_end e;
	size_t stored, budget, olen, elen, i;
	const char *ot, *et, *key;

	(void)state;
	memset(big, '<', sizeof(big));
	crilog_feed_stream(log, 0, big, sizeof(big));
	crilog_feed_stream(log, 1, big, sizeof(big));
	crilog_finish(log);
	for (i = 0; i < 64; i++) {
		memset(names[i], '<', 255);
		names[i][0] = (char)('a' + i / 26 % 26);
		names[i][1] = (char)('a' + i % 26);
		names[i][255] = '\0';
		files[i] = (struct artifact){ .path = names[i], .size = 1 << 20,
		    .content_type = "application/octet-stream" };
		memset(files[i].sha256, 'f', 64);
		files[i].sha256[64] = '\0';
	}
	list = artifacts_status(&arts);
	assert_int_equal(jsonsize_value(list), 106497);
	/* The pod's budget, as podspec.c works it out from the stored size. */
	stored = jsonsize_value(cx);
	assert_int_equal(stored, 1088);
	budget = CX_OBJECT_BUDGET - CX_STATUS_RESERVE - stored;
	/* The agent's cut, then the status (record.c's result_patch). */
	ot = crilog_text(crilog_stdout(log), &olen);
	et = crilog_text(crilog_stderr(log), &elen);
	assert_int_equal(olen, 1 << 20);
	e = (struct cx_run_end){ .exit_status = 0, .start_ns = T0,
	    .exited_ns = T0 + 1500 * INT64_C(1000000), .node = "n1",
	    .scheduled = "scheduled to node n1", .out = crilog_stdout(log),
	    .err = crilog_stderr(log), .budget = budget, .peak_memory = -1,
	    .cpu_ns = -1, .artifacts = list };
	cx_result_fit(ot, olen, et, elen, budget, &e.out_keep, &e.err_keep);
	assert_int_equal(e.out_keep, 85925);
	assert_int_equal(e.err_keep, 85925);
	st = cx_result_status(&e, NULL);
	assert_non_null(st);
	assert_int_equal(json_string_length(json_object_get(st, "stdout")), 78250);
	assert_int_equal(json_string_length(json_object_get(st, "stderr")), 78250);
	assert_string_equal(str(st, "message"), "exit code 0; output cut to "
	    "78250 bytes of stdout and 78250 of stderr to fit the execution's "
	    "1031104-byte storage budget");
	assert_int_equal(json_array_size(json_object_get(st, "artifacts")), 64);
	/* Patched in as record.c does: fields added, conditions replaced. */
	cst = json_object_get(cx, "status");
	json_object_foreach(st, key, v)
		if (strcmp(key, "conditions") != 0)
			json_object_set(cst, key, v);
	json_array_foreach(json_object_get(st, "conditions"), i, c) {
		json_t *nc = json_copy(c);

		json_object_set_new(nc, "observedGeneration", json_integer(1));
		json_array_set_new(json_object_get(cst, "conditions"), i, nc);
	}
	json_object_set_new(cst, "audited", json_true());
	assert_int_equal(jsonsize_value(cx), 1047097);
	assert_true(jsonsize_value(cx) <= CX_OBJECT_BUDGET);
	json_decref(st);
	json_decref(list);
	json_decref(cx);
	crilog_free(log);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_completed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_error_exit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_kills, setup, teardown),
		cmocka_unit_test_setup_teardown(test_egress_metered, setup, teardown),
		cmocka_unit_test_setup_teardown(test_policy_denied, setup, teardown),
		cmocka_unit_test_setup_teardown(test_oom, setup, teardown),
		cmocka_unit_test_setup_teardown(test_budget_cut, setup, teardown),
		cmocka_unit_test_setup_teardown(test_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_times, setup, teardown),
		cmocka_unit_test(test_stream_truncated),
		cmocka_unit_test(test_budget_counts_artifacts),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
