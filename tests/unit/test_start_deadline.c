/*
 * Unit tests: controller/start.c's ctl_start_overdue, the start deadline's
 * decision, on every branch: when it does not apply, how long is left,
 * and the end's reason and message when it has passed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "clock.h"
#include "controller_priv.h"

#define CREATED	"2026-11-27T01:00:00Z"

static const struct controller_opts opts = { .start_deadline_ms = 120000,
	.result_grace_ms = 30000 };

/* The pod's creation, in ms. */
static long long
t0(void)
{
	return clock_parse_rfc3339(CREATED) * 1000;
}

/* A cold execution, phase (NULL: none). */
static json_t *
execution(const char *phase)
{
	json_t *cx = json_pack("{s:{s:s, s:s, s:s}, s:{s:i}, s:{}}",
	    "metadata", "name", "x", "namespace", "t", "uid", "u1",
	    "spec", "timeoutSeconds", 10, "status");

	if (phase)
		json_object_set_new(json_object_get(cx, "status"), "phase",
		    json_string(phase));
	return cx;
}

/* A pod as the cache keeps it (ctl_trim_pod), Pending, made at CREATED. */
static json_t *
pod(const char *node)
{
	json_t *p = json_pack("{s:{s:s, s:s, s:s, s:s}, s:{}, s:{s:s}}",
	    "metadata", "name", "airlock-u1", "namespace", "t", "uid", "p1",
	    "creationTimestamp", CREATED, "spec", "status", "phase", "Pending");

	if (node)
		json_object_set_new(json_object_get(p, "spec"), "nodeName",
		    json_string(node));
	return p;
}

static void
set_state(json_t *p, json_t *state)
{
	json_object_set_new(json_object_get(p, "status"), "containerStatuses",
	    json_pack("[{s:o}]", "state", state));
}

static void
set_scheduled(json_t *p, const char *st, const char *reason, const char *msg)
{
	json_object_set_new(json_object_get(p, "status"), "conditions",
	    json_pack("[{s:s, s:s, s:s*, s:s*}]", "type", "PodScheduled",
	    "status", st, "reason", reason, "message", msg));
}

/* The verdict at now_ms; the reason and message into r and msg. */
static long long
verdict(json_t *cx, json_t *p, long long now_ms, const char **r, char *msg)
{
	*r = NULL;
	msg[0] = '\0';
	return ctl_start_overdue(cx, p, now_ms, &opts, r, msg, 2048);
}

static void
test_not_applicable(void **state)
{
	json_t *cx = execution("Pending"), *done = execution("Failed");
	json_t *running = execution("Running"), *p = pod("n1");
	long long late = t0() + 3600000;
	const char *r;
	char msg[2048];

	(void)state;
	/* No pod (waiting on the quota, or not made yet). */
	assert_int_equal(verdict(cx, NULL, late, &r, msg), -1);
	/* Ended. */
	assert_int_equal(verdict(done, p, late, &r, msg), -1);
	/* Its status says Running (the pod's cache may lag). */
	assert_int_equal(verdict(running, p, late, &r, msg), -1);
	/* The pod's program runs, or ran. */
	set_state(p, json_pack("{s:{s:s}}", "running", "startedAt", CREATED));
	assert_int_equal(verdict(cx, p, late, &r, msg), -1);
	set_state(p, json_pack("{s:{s:i}}", "terminated", "exitCode", 0));
	assert_int_equal(verdict(cx, p, late, &r, msg), -1);
	json_object_del(json_object_get(p, "status"), "containerStatuses");
	json_object_set_new(json_object_get(p, "status"), "phase",
	    json_string("Running"));
	assert_int_equal(verdict(cx, p, late, &r, msg), -1);
	json_decref(p);
	/* Unschedulable: its own rule ends it, at its timeout. */
	p = pod(NULL);
	set_scheduled(p, "False", "Unschedulable", "0/2 nodes are available");
	assert_int_equal(verdict(cx, p, late, &r, msg), -1);
	/* No creation time: no clock. */
	json_object_del(json_object_get(p, "status"), "conditions");
	json_object_del(json_object_get(p, "metadata"), "creationTimestamp");
	assert_int_equal(verdict(cx, p, late, &r, msg), -1);
	assert_null(r);
	json_decref(p);
	json_decref(cx);
	json_decref(done);
	json_decref(running);
}

static void
test_time_left(void **state)
{
	json_t *cx = execution("Pending"), *p = pod("n1");
	const char *r;
	char msg[2048];

	(void)state;
	assert_int_equal(verdict(cx, p, t0() + 5000, &r, msg), 115000);
	assert_int_equal(verdict(cx, p, t0() + 119999, &r, msg), 1);
	assert_null(r);
	/* Exactly at the deadline: passed. */
	assert_int_equal(verdict(cx, p, t0() + 120000, &r, msg), 0);
	assert_string_equal(r, "StartFailed");
	/* No phase yet (the first visit): the same clock. */
	json_object_del(json_object_get(cx, "status"), "phase");
	assert_int_equal(verdict(cx, p, t0() + 60000, &r, msg), 60000);
	json_decref(p);
	json_decref(cx);
}

static void
test_messages(void **state)
{
	json_t *cx = execution("Pending"), *p = pod("n1");
	long long late = t0() + 121000;
	const char *r;
	char msg[2048];

	(void)state;
	/* The container's waiting reason and message, and the node. */
	set_state(p, json_pack("{s:{s:s, s:s}}", "waiting", "reason",
	    "CreateContainerError", "message", "failed to reserve container name"));
	assert_int_equal(verdict(cx, p, late, &r, msg), 0);
	assert_string_equal(r, "StartFailed");
	assert_string_equal(msg, "its program did not start within 120 s of its "
	    "pod's creation: CreateContainerError: failed to reserve container "
	    "name on node n1; the pod is deleted, it is not run again");
	/* A reason alone. */
	set_state(p, json_pack("{s:{s:s}}", "waiting", "reason",
	    "ContainerCreating"));
	assert_int_equal(verdict(cx, p, late, &r, msg), 0);
	assert_string_equal(msg, "its program did not start within 120 s of its "
	    "pod's creation: ContainerCreating on node n1; the pod is deleted, "
	    "it is not run again");
	/* Bound, and no container status at all. */
	json_object_del(json_object_get(p, "status"), "containerStatuses");
	assert_int_equal(verdict(cx, p, late, &r, msg), 0);
	assert_string_equal(msg, "its program did not start within 120 s of its "
	    "pod's creation: node n1 did not start it; the pod is deleted, it is "
	    "not run again");
	json_decref(p);
	/* Not bound, for another reason than Unschedulable. */
	p = pod(NULL);
	set_scheduled(p, "False", "SchedulingGated", "scheduling is blocked");
	assert_int_equal(verdict(cx, p, late, &r, msg), 0);
	assert_string_equal(msg, "its program did not start within 120 s of its "
	    "pod's creation: no node started it (PodScheduled False: "
	    "SchedulingGated: scheduling is blocked); the pod is deleted, it is "
	    "not run again");
	set_scheduled(p, "True", NULL, NULL);
	assert_int_equal(verdict(cx, p, late, &r, msg), 0);
	assert_string_equal(msg, "its program did not start within 120 s of its "
	    "pod's creation: no node started it (PodScheduled True); the pod is "
	    "deleted, it is not run again");
	/* No scheduler has looked at it. */
	json_object_del(json_object_get(p, "status"), "conditions");
	assert_int_equal(verdict(cx, p, late, &r, msg), 0);
	assert_string_equal(msg, "its program did not start within 120 s of its "
	    "pod's creation: no node started it; the pod is deleted, it is not "
	    "run again");
	json_decref(p);
	json_decref(cx);
}

/* A warm claim: Started True at the claim (pools.c warm_status). */
static void
test_warm_claim(void **state)
{
	json_t *cx = execution("Running"), *p = pod("n1"), *st;
	/* The claim + 120 s + its 10 s timeout + 30 s for the result. */
	long long bound = t0() + 160000;
	const char *r;
	char msg[2048];

	(void)state;
	st = json_object_get(cx, "status");
	json_object_set_new(st, "startMode", json_string("Warm"));
	/* The holder runs: the cold rule would not apply. */
	json_object_set_new(json_object_get(p, "status"), "phase",
	    json_string("Running"));
	/* No Started True to count from: no clock (never ended on a guess). */
	assert_int_equal(verdict(cx, p, bound + 1000, &r, msg), -1);
	json_object_set_new(st, "conditions", json_pack("[{s:s, s:s, s:s, s:s}]",
	    "type", "Started", "status", "True", "reason", "Started",
	    "lastTransitionTime", CREATED));
	assert_int_equal(verdict(cx, p, t0() + 1000, &r, msg), 159000);
	assert_null(r);
	assert_int_equal(verdict(cx, p, bound, &r, msg), 0);
	assert_string_equal(r, "ResultLost");
	assert_string_equal(msg, "no result came within 160 s of its warm claim "
	    "(the start deadline 120 s, its timeout and 30 s for the result): "
	    "its node agent never reported, whether the program ran cannot be "
	    "known; it is not run again");
	/* The bound needs no pod: the holder's state says nothing of the program. */
	assert_int_equal(verdict(cx, NULL, t0() + 1000, &r, msg), 159000);
	/* Ended: nothing. */
	json_object_set_new(st, "phase", json_string("Succeeded"));
	assert_int_equal(verdict(cx, p, bound, &r, msg), -1);
	json_decref(p);
	json_decref(cx);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_not_applicable),
		cmocka_unit_test(test_time_left),
		cmocka_unit_test(test_messages),
		cmocka_unit_test(test_warm_claim),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
