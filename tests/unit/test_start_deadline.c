/*
 * Unit tests: controller/start.c. ctl_start_overdue, the start deadline's
 * decision, on every branch: when it does not apply, how long is left,
 * and the end's reason and message when it has passed. ctl_start_deadline,
 * which acts on it, against a scripted API server: the pod read afresh
 * decides, the end is written first, the pod seen is deleted by its uid.
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
#include "fakeapi.h"

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

/* --- ctl_start_deadline against a scripted API server ------------------- */

#define CX_PATCH "PATCH /apis/airlock.dev/v1alpha1/namespaces/t/codeexecutions/x/status"
#define POD_URL	"/api/v1/namespaces/t/pods/airlock-u1"

struct fx {
	struct fakeapi		*api;
	struct k8s_config	*cfg;
	struct controller	 ctl;
};

static int
setup(void **state)
{
	struct fx *fx = calloc(1, sizeof(*fx));
	struct k8s_error err;

	fx->api = fakeapi_start();
	fx->cfg = fakeapi_config(fx->api, NULL);
	assert_int_equal(k8s_client_new(fx->cfg, NULL, &fx->ctl.client, &err), 0);
	pthread_mutex_init(&fx->ctl.lock, NULL);
	fx->ctl.ended = json_object();
	fx->ctl.queue = workqueue_new(NULL);
	fx->ctl.opts = opts;
	*state = fx;
	return 0;
}

static int
teardown(void **state)
{
	struct fx *fx = *state;

	workqueue_shutdown(fx->ctl.queue);
	workqueue_free(fx->ctl.queue);
	k8s_client_free(fx->ctl.client);
	k8s_config_free(fx->cfg);
	fakeapi_stop(fx->api);
	json_decref(fx->ctl.ended);
	pthread_mutex_destroy(&fx->ctl.lock);
	free(fx);
	return 0;
}

/* A pod made now - age_s, bound to n1, ContainerCreating. */
static json_t *
stalled_pod(long age_s)
{
	char made[CLOCK_RFC3339_LEN];
	json_t *p = pod("n1");

	clock_format_rfc3339(((long long)time(NULL) - age_s) * 1000000000LL, 0,
	    made);
	json_object_set_new(json_object_get(p, "metadata"), "creationTimestamp",
	    json_string(made));
	set_state(p, json_pack("{s:{s:s}}", "waiting", "reason",
	    "ContainerCreating"));
	return p;
}

static void
push_json(struct fakeapi *api, int code, json_t *v)
{
	char *s = json_dumps(v, JSON_COMPACT);

	fakeapi_push(api, code, NULL, s, 0);
	free(s);
	json_decref(v);
}

/* ctl_start_deadline on cx and p; its return, *rc in rcp. */
static int
act(struct fx *fx, json_t *cx, json_t *p, int *rcp)
{
	json_t *status = json_deep_copy(json_object_get(cx, "status"));
	int r;

	*rcp = -12345;
	r = ctl_start_deadline(&fx->ctl, cx, p, status, "t/x", rcp);
	json_decref(status);
	return r;
}

/* Past it, and the pod read afresh agrees: ended first, then deleted. */
static void
test_act_ends_and_deletes(void **state)
{
	struct fx *fx = *state;
	json_t *cx = execution("Pending"), *p = stalled_pod(200), *v;
	int rc;

	json_object_set_new(json_object_get(cx, "metadata"), "resourceVersion",
	    json_string("5"));
	push_json(fx->api, 200, json_incref(p));	/* GET the pod */
	fakeapi_push(fx->api, 200, NULL, "{}", 0);	/* the end */
	fakeapi_push(fx->api, 201, NULL, "{}", 0);	/* its Event */
	fakeapi_push(fx->api, 200, NULL, "{}", 0);	/* DELETE the pod */
	fakeapi_push(fx->api, 404, NULL, "{}", 0);	/* no ConfigMap */
	assert_int_equal(act(fx, cx, p, &rc), 1);
	assert_int_equal(rc, 0);
	assert_int_equal(fakeapi_count(fx->api), 5);
	assert_string_equal(fakeapi_request(fx->api, 0), "GET " POD_URL);
	assert_string_equal(fakeapi_request(fx->api, 1), CX_PATCH);
	v = json_loads(fakeapi_body(fx->api, 1), 0, NULL);
	assert_string_equal(json_string_value(json_object_get(json_object_get(v,
	    "status"), "phase")), "Failed");
	assert_string_equal(json_string_value(json_object_get(json_object_get(v,
	    "status"), "reason")), "StartFailed");
	assert_string_equal(json_string_value(json_object_get(json_object_get(v,
	    "status"), "message")), "its program did not start within 120 s of "
	    "its pod's creation: ContainerCreating on node n1; the pod is "
	    "deleted, it is not run again");
	json_decref(v);
	assert_string_equal(fakeapi_request(fx->api, 2),
	    "POST /api/v1/namespaces/t/events");
	assert_string_equal(fakeapi_request(fx->api, 3), "DELETE " POD_URL);
	v = json_loads(fakeapi_body(fx->api, 3), 0, NULL);
	assert_non_null(json_object_get(v, "preconditions"));
	assert_string_equal(json_string_value(json_object_get(json_object_get(v,
	    "preconditions"), "uid")), "p1");
	assert_int_equal(json_integer_value(json_object_get(v,
	    "gracePeriodSeconds")), 0);
	json_decref(v);
	assert_string_equal(fakeapi_request(fx->api, 4),
	    "DELETE /api/v1/namespaces/t/configmaps/airlock-u1");
	assert_non_null(json_object_get(fx->ctl.ended, "u1"));
	json_decref(p);
	json_decref(cx);
}

/* Past it by the cache, but the program started a moment ago: left be. */
static void
test_act_fresh_pod_started(void **state)
{
	struct fx *fx = *state;
	json_t *cx = execution("Pending"), *p = stalled_pod(200);
	json_t *now = json_deep_copy(p);
	int rc;

	set_state(now, json_pack("{s:{s:s}}", "running", "startedAt", CREATED));
	push_json(fx->api, 200, now);
	assert_int_equal(act(fx, cx, p, &rc), 0);
	assert_int_equal(rc, 0);
	assert_int_equal(fakeapi_count(fx->api), 1);
	/* Another pod of the name now: not this one's to judge. */
	now = json_deep_copy(p);
	json_object_set_new(json_object_get(now, "metadata"), "uid",
	    json_string("p2"));
	push_json(fx->api, 200, now);
	assert_int_equal(act(fx, cx, p, &rc), 0);
	assert_int_equal(fakeapi_count(fx->api), 2);
	/* Gone: pod_vanished's to say. */
	fakeapi_push(fx->api, 404, NULL, "{\"kind\":\"Status\",\"code\":404,"
	    "\"reason\":\"NotFound\"}", 0);
	assert_int_equal(act(fx, cx, p, &rc), 0);
	assert_int_equal(rc, 0);
	/* The read failed: retried, nothing ended on a guess. */
	fakeapi_push(fx->api, 503, NULL, "{}", 0);
	assert_int_equal(act(fx, cx, p, &rc), 1);
	assert_int_not_equal(rc, 0);
	assert_null(json_object_get(fx->ctl.ended, "u1"));
	json_decref(p);
	json_decref(cx);
}

/* Not yet: no request, the key comes back at the deadline. */
static void
test_act_not_yet(void **state)
{
	struct fx *fx = *state;
	json_t *cx = execution("Pending"), *p = stalled_pod(10);
	int rc;

	assert_int_equal(act(fx, cx, p, &rc), 0);
	assert_int_equal(fakeapi_count(fx->api), 0);
	assert_int_equal(workqueue_waiting(fx->ctl.queue), 1);
	assert_int_equal(workqueue_len(fx->ctl.queue), 0);
	json_decref(p);
	json_decref(cx);
}

int
main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_not_applicable),
		cmocka_unit_test(test_time_left),
		cmocka_unit_test(test_messages),
		cmocka_unit_test(test_warm_claim),
		T(test_act_ends_and_deletes),
		T(test_act_fresh_pod_started),
		T(test_act_not_yet),
	};
#undef T

	return cmocka_run_group_tests(tests, NULL, NULL);
}
