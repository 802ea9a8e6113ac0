/*
 * Unit tests: controller/lend.c against scripted API servers. The caches
 * (pools, pods, executions) are real informers, each listing from a fake
 * server of its own; the controller's writes go to another, which records
 * them. What is checked: the idle holder taken back and only it, at the
 * resourceVersion and uid read; a claimed holder never; the pool's Event;
 * the refill hold while the execution waits; a take-back a claim beat.
 * The whole path on a real API server: test_holders_lent
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
#include "podspec.h"
#include "pool.h"
#include "xmalloc.h"

#define POOL_UID	"6d1d3e5c-0000-4000-8000-00000000p001"
#define CX_UID		"6d1d3e5c-0000-4000-8000-0000000cx001"
#define DELETE(pod)	"DELETE /api/v1/namespaces/a/pods/" pod
#define EVENTS		"POST /api/v1/namespaces/a/events"
/* The API server's answer to a delete a claim beat (409 at the version). */
#define CONFLICT	"{\"kind\":\"Status\",\"apiVersion\":\"v1\"," \
	"\"status\":\"Failure\",\"reason\":\"Conflict\",\"code\":409," \
	"\"message\":\"the object has been modified\"}"
#define WATCH_QUIET_MS	1500

static const char conf[] =
    "profiles:\n"
    "  python:\n"
    "    image: airlock/runner-python:0.1\n"
    "    command: [/airlock/bin/run, python3, main.py]\n"
    "    sourceFile: main.py\n";

struct fx {
	struct fakeapi		*api, *src[3];	/* writes; pools, pods, cxs */
	struct k8s_config	*kc[4];
	struct k8s_client	*cl[3];
	struct ctl_config	*cfg;
	struct metrics		*m;
	struct controller	 ctl;
};

/* A holder of pool py in namespace a: bound to node (NULL: not yet). */
static json_t *
holder(const char *name, const char *rv, const char *node, int ready,
    const char *claimed_by)
{
	json_t *p = json_pack("{s:{s:s, s:s, s:s, s:s, s:{s:s},"
	    " s:[{s:b, s:s, s:s, s:s}]}, s:{}, s:{s:s, s:[{s:b, s:{s:{}}}]}}",
	    "metadata", "name", name, "namespace", "a", "uid", name,
	    "resourceVersion", rv, "labels", POOL_LABEL_UID, POOL_UID,
	    "ownerReferences", "controller", 1, "kind", "CodeExecutionPool",
	    "name", "py", "uid", POOL_UID,
	    "spec", "status", "phase", "Running", "containerStatuses",
	    "ready", ready, "state", "running");

	if (node)
		json_object_set_new(json_object_get(p, "spec"), "nodeName",
		    json_string(node));
	if (claimed_by)
		json_object_set_new(json_object_get(json_object_get(p, "metadata"),
		    "labels"), CX_LABEL_UID, json_string(claimed_by));
	return p;
}

static struct informer *
cache(struct fx *fx, int i, const struct k8s_resource *res, json_t *items,
    json_t *(*transform)(json_t *), char *(*index)(json_t *))
{
	return fakeapi_informer(res, items, transform, index, WATCH_QUIET_MS,
	    &fx->src[i], &fx->kc[i + 1], &fx->cl[i]);
}

static char *
pool_ns_index(json_t *pool)
{
	return xstrdup(k8s_obj_namespace(pool));
}

/*
 * Pool py in a (3 replicas); holders h0 h1 h2 bound to node-a and idle
 * (h1 not ready yet), h3 claimed on node-a, h4 not bound yet; the
 * execution b/x Pending, on no node.
 */
static int
setup(void **state)
{
	struct fx *fx = calloc(1, sizeof(*fx));
	struct workqueue_opts qo = { 0 };
	struct k8s_error err;

	if (ctl_config_parse(conf, sizeof(conf) - 1, "test", &fx->cfg, &err) != 0)
		fail_msg("config: %s", err.message);
	fx->api = fakeapi_start();
	fx->kc[0] = fakeapi_config(fx->api, NULL);
	assert_int_equal(k8s_client_new(fx->kc[0], NULL, &fx->ctl.client, &err), 0);
	pthread_mutex_init(&fx->ctl.lock, NULL);
	fx->ctl.cfg = fx->cfg;
	fx->ctl.queue = workqueue_new(&qo);
	fx->ctl.reserved = json_object();
	fx->ctl.pool_keys = json_object();
	fx->ctl.pool_lent = json_object();
	fx->ctl.lend_tried = json_object();
	fx->ctl.pool_desired = 3;	/* the gauges' sum: py's replicas */
	fx->m = metrics_new();
	fx->ctl.m_taken_back = metrics_counter(fx->m,
	    "airlock_pool_sandboxes_taken_back_total", "test", NULL);
	fx->ctl.pool_inf = cache(fx, 0, &pool_resource, json_pack("[{s:{s:s, s:s,"
	    " s:s, s:i}, s:{s:s, s:i}}]", "metadata", "name", "py", "namespace",
	    "a", "uid", POOL_UID, "generation", 1, "spec", "runtime", "python",
	    "replicas", 3), NULL, pool_ns_index);
	/*
	 * And hb: a copy of an idle holder of py, ready on node-a, made in
	 * namespace b by its tenant (labels are the tenant's to write). It is
	 * not py's: never taken back for py (with holders indexed by pool uid
	 * alone, test_fewest, test_claimed_never and test_reserved_left fail).
	 */
	json_t *copy = holder("hb", "26", "node-a", 1, NULL);

	json_object_set_new(json_object_get(copy, "metadata"), "namespace", json_string("b"));
	fx->ctl.pod_inf = cache(fx, 1, &k8s_res_pods, json_pack("[o, o, o, o, o, o]",
	    holder("h0", "21", "node-a", 1, NULL),
	    holder("h1", "22", "node-a", 0, NULL),
	    holder("h2", "23", "node-a", 1, NULL),
	    holder("h3", "24", "node-a", 1, "someone"),
	    holder("h4", "25", NULL, 0, NULL), copy), ctl_trim_pod, ctl_pod_index);
	fx->ctl.cx_inf = cache(fx, 2, &cx_resource, json_pack("[{s:{s:s, s:s,"
	    " s:s, s:s}, s:{s:s}, s:{s:s}}]", "metadata", "name", "x",
	    "namespace", "b", "uid", CX_UID, "resourceVersion", "7", "spec",
	    "runtime", "python", "status", "phase", "Pending"), NULL, NULL);
	*state = fx;
	return 0;
}

static int
teardown(void **state)
{
	struct fx *fx = *state;
	struct informer *infs[3] = { fx->ctl.pool_inf, fx->ctl.pod_inf,
	    fx->ctl.cx_inf };

	for (int i = 0; i < 3; i++)
		fakeapi_informer_free(infs[i], fx->src[i], fx->kc[i + 1], fx->cl[i]);
	k8s_client_free(fx->ctl.client);
	fakeapi_stop(fx->api);
	k8s_config_free(fx->kc[0]);
	workqueue_shutdown(fx->ctl.queue);
	workqueue_free(fx->ctl.queue);
	json_decref(fx->ctl.reserved);
	json_decref(fx->ctl.pool_keys);
	json_decref(fx->ctl.pool_lent);
	json_decref(fx->ctl.lend_tried);
	metrics_free(fx->m);
	ctl_config_free(fx->cfg);
	pthread_mutex_destroy(&fx->ctl.lock);
	free(fx);
	return 0;
}

/* The execution b/x as the cache has it, and its pod, unbound. */
static void
lend(struct fx *fx, const char *cpu, const char *why)
{
	json_t *cx = informer_get(fx->ctl.cx_inf, "b", "x");
	json_t *pod = json_pack("{s:{s:s}, s:{}}", "metadata", "name", "airlock-x",
	    "spec");

	assert_non_null(cx);
	if (cpu)
		json_object_set_new(json_object_get(cx, "spec"), "resources",
		    json_pack("{s:s}", "cpu", cpu));
	ctl_pool_lend(&fx->ctl, cx, pod, why);
	json_decref(pod);
	json_decref(cx);
}

static const char *
body_field(struct fx *fx, int i, const char *a, const char *b)
{
	static char out[600];
	json_t *v = json_loads(fakeapi_body(fx->api, i), 0, NULL);
	json_t *x = b ? json_object_get(json_object_get(v, a), b) :
	    json_object_get(v, a);

	if (json_is_integer(x))
		snprintf(out, sizeof(out), "%lld", (long long)json_integer_value(x));
	else
		snprintf(out, sizeof(out), "%s", json_is_string(x) ?
		    json_string_value(x) : "(none)");
	json_decref(v);
	return out;
}

#define CPU_SHORT	"0/1 nodes are available: 1 Insufficient cpu. preemption: " \
	"0/1 nodes are available: 1 No preemption victims found for incoming pod."

/*
 * 500m short on node-a: one idle holder, the one not ready yet (h1), at
 * the version read; the pool's Event; its refill held while x waits.
 */
static void
test_one_taken_back(void **state)
{
	struct fx *fx = *state;
	long long taken = -1;

	fakeapi_push(fx->api, 200, NULL, "{}", 0);
	fakeapi_push(fx->api, 201, NULL, "{}", 0);
	lend(fx, NULL, CPU_SHORT);
	assert_int_equal(fakeapi_count(fx->api), 2);
	assert_string_equal(fakeapi_request(fx->api, 0), DELETE("h1"));
	assert_string_equal(body_field(fx, 0, "preconditions", "resourceVersion"),
	    "22");
	assert_string_equal(body_field(fx, 0, "preconditions", "uid"), "h1");
	assert_string_equal(body_field(fx, 0, "gracePeriodSeconds", NULL), "0");
	assert_string_equal(fakeapi_request(fx->api, 1), EVENTS);
	assert_string_equal(body_field(fx, 1, "reason", NULL), "HoldersTakenBack");
	assert_string_equal(body_field(fx, 1, "type", NULL), "Normal");
	assert_string_equal(body_field(fx, 1, "involvedObject", "name"), "py");
	assert_string_equal(body_field(fx, 1, "involvedObject", "kind"),
	    "CodeExecutionPool");
	assert_string_equal(body_field(fx, 1, "message", NULL), "1 idle sandbox "
	    "on node node-a taken back for an execution no node had cpu for; "
	    "the pool refills once it is scheduled");
	/* x waits on no node: the pool does not refill, and says why. */
	assert_int_equal(ctl_pool_lent(&fx->ctl, POOL_UID, &taken),
	    POOL_LEND_RECHECK_MS);
	assert_int_equal(taken, 1);
	assert_int_equal(ctl_pool_lent(&fx->ctl, "another-pool", &taken), 0);
	assert_int_equal(taken, 0);
	/* Asked again at once: the scheduler's turn first, nothing sent. */
	lend(fx, NULL, CPU_SHORT);
	assert_int_equal(fakeapi_count(fx->api), 2);
}

/* 1000m: the two idle ready ones are not needed: h1 and one more. */
static void
test_fewest(void **state)
{
	struct fx *fx = *state;
	long long taken = -1;

	for (int i = 0; i < 2; i++)
		fakeapi_push(fx->api, 200, NULL, "{}", 0);
	fakeapi_push(fx->api, 201, NULL, "{}", 0);
	lend(fx, "1", CPU_SHORT);
	assert_int_equal(fakeapi_count(fx->api), 3);
	assert_string_equal(fakeapi_request(fx->api, 0), DELETE("h1"));
	assert_true(strcmp(fakeapi_request(fx->api, 1), DELETE("h0")) == 0 ||
	    strcmp(fakeapi_request(fx->api, 1), DELETE("h2")) == 0);
	assert_string_equal(fakeapi_request(fx->api, 2), EVENTS);
	assert_string_equal(body_field(fx, 2, "message", NULL), "2 idle sandboxes "
	    "on node node-a taken back for an execution no node had cpu for; "
	    "the pool refills once it is scheduled");
	assert_int_equal(ctl_pool_lent(&fx->ctl, POOL_UID, &taken),
	    POOL_LEND_RECHECK_MS);
	assert_int_equal(taken, 2);
}

/*
 * 2000m: the three idle ones free 1500m, the claimed one would make it:
 * it runs an execution and is never taken. Nothing is sent, no hold.
 */
static void
test_claimed_never(void **state)
{
	struct fx *fx = *state;
	long long taken = -1;

	lend(fx, "2", CPU_SHORT);
	assert_int_equal(fakeapi_count(fx->api), 0);
	assert_int_equal(ctl_pool_lent(&fx->ctl, POOL_UID, &taken), 0);
	assert_int_equal(taken, 0);
}

/* Not a shortage holders cause: nothing. */
static void
test_not_short(void **state)
{
	struct fx *fx = *state;

	lend(fx, NULL, "0/1 nodes are available: 1 node(s) didn't match Pod's "
	    "node affinity/selector.");
	lend(fx, NULL, NULL);
	assert_int_equal(fakeapi_count(fx->api), 0);
}

/* A claim landed first (409 at the version read): no Event, no hold. */
static void
test_claim_won(void **state)
{
	struct fx *fx = *state;
	long long taken = -1;

	fakeapi_push(fx->api, 409, NULL, CONFLICT, 0);
	lend(fx, NULL, CPU_SHORT);
	assert_int_equal(fakeapi_count(fx->api), 1);
	assert_string_equal(fakeapi_request(fx->api, 0), DELETE("h1"));
	assert_int_equal(ctl_pool_lent(&fx->ctl, POOL_UID, &taken), 0);
	assert_int_equal(taken, 0);
	assert_int_equal(json_object_size(fx->ctl.pool_lent), 0);
}

/* A holder a claim picked a moment ago is left to it. */
static void
test_reserved_left(void **state)
{
	struct fx *fx = *state;

	json_object_set_new(fx->ctl.reserved, "h1", json_integer(clock_mono_ms()));
	fakeapi_push(fx->api, 200, NULL, "{}", 0);
	fakeapi_push(fx->api, 201, NULL, "{}", 0);
	lend(fx, NULL, CPU_SHORT);
	assert_int_equal(fakeapi_count(fx->api), 2);
	assert_true(strcmp(fakeapi_request(fx->api, 0), DELETE("h0")) == 0 ||
	    strcmp(fakeapi_request(fx->api, 0), DELETE("h2")) == 0);
}

/* One look every 50 ms in all: the one that came too soon comes back. */
static void
test_gap(void **state)
{
	struct fx *fx = *state;

	fx->ctl.lend_walked = clock_mono_ms();
	lend(fx, NULL, CPU_SHORT);
	assert_int_equal(fakeapi_count(fx->api), 0);
	usleep(60 * 1000);
	fakeapi_push(fx->api, 200, NULL, "{}", 0);
	fakeapi_push(fx->api, 201, NULL, "{}", 0);
	lend(fx, NULL, CPU_SHORT);
	assert_int_equal(fakeapi_count(fx->api), 2);
	assert_string_equal(fakeapi_request(fx->api, 0), DELETE("h1"));
}

/* No pool keeps a holder (the gauges' sum): no walk, nothing sent. */
static void
test_no_pools(void **state)
{
	struct fx *fx = *state;

	fx->ctl.pool_desired = 0;
	lend(fx, NULL, CPU_SHORT);
	assert_int_equal(fakeapi_count(fx->api), 0);
	assert_int_equal(json_object_size(fx->ctl.lend_tried), 0);
}

static void *
lend_thread(void *arg)
{
	lend(arg, NULL, CPU_SHORT);
	return NULL;
}

/* A take-back in thread t, until its first delete has reached the server. */
static void
lend_in_flight(struct fx *fx, pthread_t *t)
{
	assert_int_equal(pthread_create(t, NULL, lend_thread, fx), 0);
	for (long long end = clock_mono_ms() + 5000; fakeapi_count(fx->api) < 1 &&
	    clock_mono_ms() < end; )
		usleep(5000);
}

/*
 * While the delete is on its way the pool's reconcile (which the delete's
 * watch event brings) already reads the holder as taken back: its Ready
 * condition says "1 taken back", never "0" (CI, stop 36: the e2e test
 * test_warm_lent saw "3 of 4 sandboxes: 0 taken back ...").
 */
static void
test_counted_in_flight(void **state)
{
	struct fx *fx = *state;
	long long taken = -1, wait;
	int arrived;
	pthread_t t;

	/* The delete is held until the count in flight has been read. */
	fakeapi_push(fx->api, 200, NULL, "{}", FAKEAPI_HOLD);
	fakeapi_push(fx->api, 201, NULL, "{}", 0);
	lend_in_flight(fx, &t);
	arrived = fakeapi_count(fx->api);
	wait = ctl_pool_lent(&fx->ctl, POOL_UID, &taken);
	fakeapi_release(fx->api);
	/* Joined before any assert: a failed one must not free what it uses. */
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(arrived, 1);
	assert_int_equal(wait, POOL_LEND_RECHECK_MS);
	assert_int_equal(taken, 1);
	assert_int_equal(fakeapi_count(fx->api), 2);
	assert_int_equal(ctl_pool_lent(&fx->ctl, POOL_UID, &taken),
	    POOL_LEND_RECHECK_MS);
	assert_int_equal(taken, 1);
}

/* The delete in flight failed (a claim won): the count goes back to 0. */
static void
test_uncounted_on_conflict(void **state)
{
	struct fx *fx = *state;
	long long taken = -1, wait;
	pthread_t t;

	fakeapi_push(fx->api, 409, NULL, CONFLICT,
	    FAKEAPI_HOLD);	/* until the test has looked */
	lend_in_flight(fx, &t);
	wait = ctl_pool_lent(&fx->ctl, POOL_UID, &taken);
	fakeapi_release(fx->api);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(wait, POOL_LEND_RECHECK_MS);
	assert_int_equal(taken, 1);
	assert_int_equal(fakeapi_count(fx->api), 1);
	assert_int_equal(ctl_pool_lent(&fx->ctl, POOL_UID, &taken), 0);
	assert_int_equal(taken, 0);
	assert_int_equal(json_object_size(fx->ctl.pool_lent), 0);
}

/*
 * While x's delete is on its way, x is scheduled (the pool's reconcile
 * drops its hold) and another execution's take-back holds the pool again.
 * x's delete then fails (a claim won): the correction is x's hold's, and
 * must not drop the other's (its pool would refill into its room).
 */
static void
test_other_hold_kept(void **state)
{
	struct fx *fx = *state;
	long long taken = -1;
	json_t *e;
	pthread_t t;

	fakeapi_push(fx->api, 409, NULL, CONFLICT,
	    FAKEAPI_HOLD);	/* until the test has looked */
	lend_in_flight(fx, &t);
	pthread_mutex_lock(&fx->ctl.lock);
	json_object_set_new(fx->ctl.pool_lent, POOL_UID, json_pack("[I, I, {s:s}]",
	    (json_int_t)1, (json_int_t)clock_mono_ms(), "b/y", "uid-of-y"));
	pthread_mutex_unlock(&fx->ctl.lock);
	fakeapi_release(fx->api);
	assert_int_equal(pthread_join(t, NULL), 0);
	e = json_object_get(fx->ctl.pool_lent, POOL_UID);
	assert_non_null(e);
	assert_int_equal(json_integer_value(json_array_get(e, 0)), 1);
	(void)ctl_pool_lent(&fx->ctl, POOL_UID, &taken);
	assert_int_equal(taken, 1);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int
main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_one_taken_back),
		T(test_fewest),
		T(test_claimed_never),
		T(test_not_short),
		T(test_claim_won),
		T(test_reserved_left),
		T(test_gap),
		T(test_no_pools),
		T(test_counted_in_flight),
		T(test_uncounted_on_conflict),
		T(test_other_hold_kept),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
