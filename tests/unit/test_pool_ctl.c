/*
 * Unit tests: controller/pools.c's reconcile of a pool whose holders fail
 * their preload (issue 31), against scripted API servers. The caches
 * (pools, pods) are real informers, each listing from a fake server of
 * its own; the controller's writes go to another, which records them.
 * What is checked: the failed holder deleted and never counted, one
 * Warning Event PreloadFailed per holder with the message (not one per
 * reconcile), the Ready condition, and no new holder while the back-off
 * runs. The whole path on a real API server: test_preload_failed
 * (tests/integration/test_controller_it.c).
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "clock.h"
#include "controller_priv.h"
#include "ctl_config.h"
#include "cx.h"
#include "fakeapi.h"
#include "metrics.h"
#include "pool.h"
#include "xmalloc.h"

#define POOL_UID	"6d1d3e5c-0000-4000-8000-00000000p002"
#define DELETE_H1	"DELETE /api/v1/namespaces/a/pods/h1"
#define EVENTS		"POST /api/v1/namespaces/a/events"
#define CREATE		"POST /api/v1/namespaces/a/pods"
#define STATUS		"PATCH /apis/airlock.dev/v1alpha1/namespaces/a/" \
	"codeexecutionpools/data/status"
#define NOT_FOUND	"{\"kind\":\"Status\",\"apiVersion\":\"v1\"," \
	"\"status\":\"Failure\",\"reason\":\"NotFound\",\"code\":404," \
	"\"message\":\"pods \\\"h1\\\" not found\"}"
#define WHY		"airlock: preload: nosuchmod: ModuleNotFoundError: " \
	"No module named 'nosuchmod'"
#define WATCH_QUIET_MS	4000

static const char conf[] =
    "profiles:\n"
    "  data:\n"
    "    image: airlock/runner-python-data:0.1\n"
    "    command: [/airlock/bin/run, python3, main.py]\n"
    "    sourceFile: main.py\n"
    "    preload: [numpy, nosuchmod]\n";

struct fx {
	struct fakeapi		*api, *src[2];	/* writes; pools, pods */
	struct k8s_config	*kc[3];
	struct k8s_client	*cl[2];
	struct ctl_config	*cfg;
	struct metrics		*m;
	struct controller	 ctl;
};

static struct informer *
cache(struct fx *fx, int i, const struct k8s_resource *res, json_t *items,
    json_t *(*transform)(json_t *), char *(*index)(json_t *))
{
	return fakeapi_informer(res, items, transform, index, WATCH_QUIET_MS,
	    &fx->src[i], &fx->kc[i + 1], &fx->cl[i]);
}

/* What setup makes: h1 the pool's own, or a pod a tenant labelled; h2. */
static int h1_owned = 1, with_h2;

/*
 * Pool data in a (1 replica, a preload profile; 2 with h2); its holder
 * h1, as the kubelet reports it once the zygote could not import
 * nosuchmod; with_h2: a second holder h2, ready.
 */
static int
setup(void **state)
{
	struct fx *fx = calloc(1, sizeof(*fx));
	struct workqueue_opts qo = { 0 };
	struct k8s_error err;
	json_t *h1, *pods;

	if (ctl_config_parse(conf, sizeof(conf) - 1, "test", &fx->cfg, &err) != 0)
		fail_msg("config: %s", err.message);
	fx->api = fakeapi_start();
	fx->kc[0] = fakeapi_config(fx->api, NULL);
	assert_int_equal(k8s_client_new(fx->kc[0], NULL, &fx->ctl.client, &err), 0);
	pthread_mutex_init(&fx->ctl.lock, NULL);
	fx->ctl.cfg = fx->cfg;
	fx->ctl.queue = workqueue_new(&qo);
	/* The namespace's guardrails were just made: not made again here. */
	fx->ctl.opts.resync_ms = 3600000;
	fx->ctl.guarded = json_pack("{s:I}", "a", (json_int_t)clock_mono_ms());
	fx->ctl.reserved = json_object();
	fx->ctl.claimed = json_object();
	fx->ctl.nodes = json_object();
	fx->ctl.pool_keys = json_object();
	fx->ctl.pool_lent = json_object();
	fx->ctl.pool_expect = json_object();
	fx->ctl.pool_counts = json_object();
	fx->ctl.pool_claimed = json_object();
	fx->ctl.pool_gone = json_object();
	fx->ctl.pool_failed = json_object();
	fx->m = metrics_new();
	fx->ctl.m_pool = metrics_gauge(fx->m, "airlock_pool_sandboxes", "test",
	    "state");
	fx->ctl.pool_inf = cache(fx, 0, &pool_resource, json_pack("[{s:s, s:s,"
	    " s:{s:s, s:s, s:s, s:i}, s:{s:s, s:i}}]", "apiVersion",
	    "airlock.dev/v1alpha1", "kind", "CodeExecutionPool",
	    "metadata", "name", "data", "namespace", "a", "uid", POOL_UID,
	    "generation", 1, "spec", "runtime", "data", "replicas", 1 + with_h2),
	    NULL, NULL);
	h1 = json_pack("{s:{s:s, s:s, s:s, s:s, s:{s:s, s:s},"
	    " s:[{s:b, s:s, s:s, s:s}]}, s:{s:s}, s:{s:s, s:[{s:b, s:{s:{s:i, s:s,"
	    " s:s}}}]}}",
	    "metadata", "name", "h1", "namespace", "a", "uid", "h1-uid",
	    "resourceVersion", "21", "labels", POOL_LABEL_UID, POOL_UID,
	    CX_LABEL_MANAGED, CX_MANAGER,
	    "ownerReferences", "controller", 1, "kind", "CodeExecutionPool",
	    "name", "data", "uid", POOL_UID,
	    "spec", "nodeName", "node-a",
	    "status", "phase", "Failed", "containerStatuses", "ready", 0,
	    "state", "terminated", "exitCode", 3, "reason", "Error",
	    "message", WHY "\n");
	if (!h1_owned)
		json_object_del(json_object_get(h1, "metadata"), "ownerReferences");
	pods = json_pack("[o]", h1);
	if (with_h2) {
		json_t *h2 = json_deep_copy(h1), *md = json_object_get(h2, "metadata");

		json_object_set_new(md, "name", json_string("h2"));
		json_object_set_new(md, "uid", json_string("h2-uid"));
		json_object_set_new(h2, "status", json_pack("{s:s, s:[{s:b, s:{s:{}}}]}",
		    "phase", "Running", "containerStatuses", "ready", 1, "state",
		    "running"));
		json_array_append_new(pods, h2);
	}
	fx->ctl.pod_inf = cache(fx, 1, &k8s_res_pods, pods, ctl_trim_pod,
	    ctl_pod_index);
	*state = fx;
	return 0;
}

static int
teardown(void **state)
{
	struct fx *fx = *state;
	struct informer *infs[2] = { fx->ctl.pool_inf, fx->ctl.pod_inf };

	for (int i = 0; i < 2; i++)
		fakeapi_informer_free(infs[i], fx->src[i], fx->kc[i + 1], fx->cl[i]);
	k8s_client_free(fx->ctl.client);
	fakeapi_stop(fx->api);
	k8s_config_free(fx->kc[0]);
	workqueue_shutdown(fx->ctl.queue);
	workqueue_free(fx->ctl.queue);
	json_decref(fx->ctl.guarded);
	json_decref(fx->ctl.reserved);
	json_decref(fx->ctl.claimed);
	json_decref(fx->ctl.nodes);
	json_decref(fx->ctl.pool_keys);
	json_decref(fx->ctl.pool_lent);
	json_decref(fx->ctl.pool_expect);
	json_decref(fx->ctl.pool_counts);
	json_decref(fx->ctl.pool_claimed);
	json_decref(fx->ctl.pool_gone);
	json_decref(fx->ctl.pool_failed);
	metrics_free(fx->m);
	ctl_config_free(fx->cfg);
	pthread_mutex_destroy(&fx->ctl.lock);
	free(fx);
	return 0;
}

/* Request i's body, parsed (a new reference). */
static json_t *
body(struct fx *fx, int i)
{
	json_t *v = json_loads(fakeapi_body(fx->api, i), 0, NULL);

	if (v == NULL)
		fail_msg("request %d's body is not JSON: %s", i,
		    fakeapi_body(fx->api, i));
	return v;
}

static void
assert_event(struct fx *fx, int i)
{
	json_t *e = body(fx, i);

	assert_string_equal(fakeapi_request(fx->api, i), EVENTS);
	assert_string_equal(json_string_value(json_object_get(e, "type")), "Warning");
	assert_string_equal(json_string_value(json_object_get(e, "reason")),
	    "PreloadFailed");
	assert_string_equal(json_string_value(json_object_get(e, "message")), WHY);
	assert_string_equal(json_string_value(json_object_get(json_object_get(e,
	    "involvedObject"), "kind")), "CodeExecutionPool");
	assert_string_equal(json_string_value(json_object_get(json_object_get(e,
	    "involvedObject"), "name")), "data");
	json_decref(e);
}

/* The status patch's Ready condition, and its counts. */
static void
assert_status(struct fx *fx, int i)
{
	json_t *b = body(fx, i), *st = json_object_get(b, "status"), *c;

	assert_string_equal(fakeapi_request(fx->api, i), STATUS);
	assert_int_equal(json_integer_value(json_object_get(st, "replicas")), 0);
	assert_int_equal(json_integer_value(json_object_get(st, "readyReplicas")), 0);
	c = json_array_get(json_object_get(st, "conditions"), 0);
	assert_string_equal(json_string_value(json_object_get(c, "type")), "Ready");
	assert_string_equal(json_string_value(json_object_get(c, "status")), "False");
	assert_string_equal(json_string_value(json_object_get(c, "reason")),
	    "PreloadFailed");
	assert_string_equal(json_string_value(json_object_get(c, "message")),
	    "no sandbox became ready: " WHY);
	json_decref(b);
}

/*
 * The first failure: h1 deleted (by its uid), one Event, a new holder at
 * once (the zygote's command), the condition. The cache still shows h1
 * (it lags): the next reconcile's delete finds it gone, and says nothing.
 */
static void
test_event_once(void **state)
{
	struct fx *fx = *state;
	json_t *b;

	fakeapi_push(fx->api, 200, NULL, "{}", 0);	/* the delete */
	fakeapi_push(fx->api, 201, NULL, "{}", 0);	/* the Event */
	fakeapi_push(fx->api, 201, NULL, "{}", 0);	/* the new holder */
	fakeapi_push(fx->api, 200, NULL, "{}", 0);	/* the status */
	assert_int_equal(ctl_pool_reconcile(&fx->ctl, "a", "data"), 0);
	assert_int_equal(fakeapi_count(fx->api), 4);
	assert_string_equal(fakeapi_request(fx->api, 0), DELETE_H1);
	b = body(fx, 0);
	assert_string_equal(json_string_value(json_object_get(json_object_get(b,
	    "preconditions"), "uid")), "h1-uid");
	json_decref(b);
	assert_event(fx, 1);
	assert_string_equal(fakeapi_request(fx->api, 2), CREATE);
	b = body(fx, 2);
	assert_string_equal(json_string_value(json_array_get(json_object_get(
	    json_array_get(json_object_get(json_object_get(b, "spec"),
	    "containers"), 0), "command"), 1)), "--zygote");
	json_decref(b);
	assert_status(fx, 3);

	/* Again, the cache unchanged: gone (404), no Event, no holder. */
	fakeapi_push(fx->api, 404, NULL, NOT_FOUND, 0);
	fakeapi_push(fx->api, 200, NULL, "{}", 0);	/* the status */
	assert_int_equal(ctl_pool_reconcile(&fx->ctl, "a", "data"), 0);
	assert_int_equal(fakeapi_count(fx->api), 6);
	assert_string_equal(fakeapi_request(fx->api, 4), DELETE_H1);
	assert_status(fx, 5);
}

/*
 * Two failures in a row: the first (h1 deleted, its Event, a holder made,
 * the status), then the holder made for it failed as well (the cache's h1
 * stands for it): deleted, its Event, the status, and no holder made.
 */
static void
fail_twice(struct fx *fx)
{
	fakeapi_push(fx->api, 200, NULL, "{}", 0);
	fakeapi_push(fx->api, 201, NULL, "{}", 0);
	fakeapi_push(fx->api, 201, NULL, "{}", 0);
	fakeapi_push(fx->api, 200, NULL, "{}", 0);
	assert_int_equal(ctl_pool_reconcile(&fx->ctl, "a", "data"), 0);
	assert_int_equal(fakeapi_count(fx->api), 4);
	assert_string_equal(fakeapi_request(fx->api, 2), CREATE);
	json_object_clear(fx->ctl.pool_expect);
	fakeapi_push(fx->api, 200, NULL, "{}", 0);	/* the delete */
	fakeapi_push(fx->api, 201, NULL, "{}", 0);	/* the Event */
	fakeapi_push(fx->api, 200, NULL, "{}", 0);	/* the status */
	assert_int_equal(ctl_pool_reconcile(&fx->ctl, "a", "data"), 0);
	assert_int_equal(fakeapi_count(fx->api), 7);
	assert_string_equal(fakeapi_request(fx->api, 4), DELETE_H1);
	assert_string_equal(fakeapi_request(fx->api, 5), EVENTS);
	assert_string_equal(fakeapi_request(fx->api, 6), STATUS);
}

/*
 * The second in a row (the holder made for the first failed too): its
 * Event, and no holder made while the back-off (2 s) runs; one made
 * once it is over.
 */
static void
test_back_off(void **state)
{
	struct fx *fx = *state;

	fail_twice(fx);
	assert_event(fx, 5);
	assert_status(fx, 6);

	/* Within the back-off: the delete finds it gone; nothing made. */
	fakeapi_push(fx->api, 404, NULL, NOT_FOUND, 0);
	fakeapi_push(fx->api, 200, NULL, "{}", 0);
	assert_int_equal(ctl_pool_reconcile(&fx->ctl, "a", "data"), 0);
	assert_int_equal(fakeapi_count(fx->api), 9);
	assert_string_equal(fakeapi_request(fx->api, 7), DELETE_H1);
	assert_status(fx, 8);

	/* After it (2 s from the second failure): one holder made. */
	usleep(2100 * 1000);
	fakeapi_push(fx->api, 404, NULL, NOT_FOUND, 0);
	fakeapi_push(fx->api, 201, NULL, "{}", 0);
	fakeapi_push(fx->api, 200, NULL, "{}", 0);
	assert_int_equal(ctl_pool_reconcile(&fx->ctl, "a", "data"), 0);
	assert_int_equal(fakeapi_count(fx->api), 12);
	assert_string_equal(fakeapi_request(fx->api, 10), CREATE);
	assert_status(fx, 11);
}

/*
 * The second failure while another holder is ready (2 replicas): the
 * back-off holds all the same; only the pool whole and ready ends it.
 */
static void
test_back_off_beside_ready(void **state)
{
	struct fx *fx = *state;

	fail_twice(fx);
}

/*
 * A pod a tenant labelled as the pool's, not made by it (no owner), that
 * ended with the preload's words: neither reported nor deleted; the pool
 * makes its own holder.
 */
static void
test_not_its_holder(void **state)
{
	struct fx *fx = *state;

	fakeapi_push(fx->api, 201, NULL, "{}", 0);	/* the pool's holder */
	fakeapi_push(fx->api, 200, NULL, "{}", 0);	/* the status */
	assert_int_equal(ctl_pool_reconcile(&fx->ctl, "a", "data"), 0);
	assert_int_equal(fakeapi_count(fx->api), 2);
	assert_string_equal(fakeapi_request(fx->api, 0), CREATE);
	assert_string_equal(fakeapi_request(fx->api, 1), STATUS);
}

static int
setup_h2(void **state)
{
	with_h2 = 1;
	return setup(state);
}

static int
setup_unowned(void **state)
{
	h1_owned = 0;
	return setup(state);
}

static int
teardown_reset(void **state)
{
	h1_owned = 1;
	with_h2 = 0;
	return teardown(state);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_event_once, setup, teardown),
		cmocka_unit_test_setup_teardown(test_back_off, setup, teardown),
		cmocka_unit_test_setup_teardown(test_back_off_beside_ready, setup_h2,
		    teardown_reset),
		cmocka_unit_test_setup_teardown(test_not_its_holder, setup_unowned,
		    teardown_reset),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
