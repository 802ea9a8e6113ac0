/*
 * Unit tests: node-agent/warm.c's agent_warm_start_failed, what becomes
 * of a warm run whose program failed to start. Before its start was asked
 * for, nothing of it ran and it goes back to run cold; once Tasks.Start
 * was sent (or a runsc exec client spawned), a failure or a 10 s timeout
 * says nothing of whether it runs, so it ends StartFailed and is never
 * given back: nothing runs twice. containerd's side (a Start that timed
 * out with its process running, then aborted) is in
 * tests/integration/test_ctrd_it.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "agent_priv.h"
#include "clock.h"

#define UID	"7056fc73-9923-4638-a1cc-3f428b37a5b5"

struct fixture {
	struct agent	a;
	struct run	r;
	struct crilog	*log;
};

static int
setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct workqueue_opts qo = { 0 };

	f->a.q = workqueue_new(&qo);
	f->a.o.cgroup_mount = "/nonexistent";
	f->a.o.cgroup_root = "kubepods";
	f->log = crilog_new(4096, 65536);
	f->r.uid = UID;
	f->r.log = f->log;
	f->r.cid = "c1";
	f->r.verified = 1;
	f->r.warm = 1;
	f->r.warm_spawned = 1;
	f->r.timeout_ms = 2000;
	f->r.cpu_before_ns = f->r.oom_before = -1;
	/* Its configuration checked (node-agent/check.c): records may go. */
	atomic_store(&f->a.act_ok, 1);
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	struct fixture *f = *state;

	workqueue_shutdown(f->a.q);
	workqueue_free(f->a.q);
	crilog_free(f->log);
	free(f);
	return 0;
}

/* Nothing asked to run it (Tasks.Exec failed, runsc never spawned). */
static void
test_not_sent_goes_back(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(agent_warm_start_failed(&f->a, &f->r, 0), 1);
	assert_int_equal(f->r.exited, 0);
	assert_int_equal(f->r.why, CX_KILL_NONE);
	assert_int_equal(f->r.busy, 0);
	assert_int_equal(workqueue_len(f->a.q), 0);
}

/*
 * While the configuration check fails, the same end is kept, not
 * recorded: the ticker records it once the check passes.
 */
static void
test_held_while_config_wrong(void **state)
{
	struct fixture *f = *state;

	atomic_store(&f->a.act_ok, 0);
	assert_int_equal(agent_warm_start_failed(&f->a, &f->r, 1), 0);
	assert_int_equal(f->r.exited, 1);
	assert_int_equal(f->r.why, CX_KILL_START);
	assert_int_equal(f->r.busy, 0);
	assert_int_equal(workqueue_len(f->a.q), 0);
}

/*
 * Start sent, and its reply an error or a timeout: ended here, at once,
 * as killed at its start; recorded (StartFailed), never given back.
 */
static void
test_sent_ends_start_failed(void **state)
{
	struct fixture *f = *state;
	int64_t before = agent_now_ns();
	struct cx_run_end e = { 0 };
	struct cx_outcome o;
	char *key = NULL;

	assert_int_equal(agent_warm_start_failed(&f->a, &f->r, 1), 0);
	assert_int_equal(f->r.exited, 1);
	assert_int_equal(f->r.why, CX_KILL_START);
	assert_int_equal(f->r.status, 137);
	assert_int_equal(f->r.io_done, 1);
	assert_true(f->r.start_ns >= before);
	assert_true(f->r.exited_ns == f->r.start_ns);
	/* The record is queued now: no deadline or quiet log to wait for. */
	assert_int_equal(f->r.busy, 1);
	assert_int_equal(workqueue_len(f->a.q), 1);
	assert_int_equal(workqueue_get_timeout(f->a.q, &key, 0), 0);
	assert_string_equal(key, "record/" UID);
	workqueue_done(f->a.q, key);
	free(key);
	/* What record.c makes of it. */
	e.why = f->r.why;
	e.exit_status = (int)f->r.status;
	e.exited_ns = f->r.exited_ns;
	cx_result_outcome(&e, &o);
	assert_string_equal(o.phase, "Failed");
	assert_string_equal(o.reason_name, "StartFailed");
	assert_int_equal(o.exit_code, 137);
	assert_string_equal(o.message, "its start was not confirmed: the "
	    "program, which may have started, was killed and is not run again");
}

int
main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(test_not_sent_goes_back),
		T(test_sent_ends_start_failed),
		T(test_held_while_config_wrong),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
