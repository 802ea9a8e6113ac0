/*
 * Unit tests: controller/status.c's ctl_finish against a scripted API
 * server: an end the controller decided is written even when its cache
 * lagged (a 409), on the execution read afresh, and never over an end
 * someone else wrote meanwhile.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "controller_priv.h"
#include "cx.h"
#include "fakeapi.h"

#define UID	"0b8f8f4e-63a4-4f54-9c1c-2a7c1d1e6f00"
#define PATCH	"PATCH /apis/airlock.dev/v1alpha1/namespaces/t/codeexecutions/x/status"
#define GET	"GET /apis/airlock.dev/v1alpha1/namespaces/t/codeexecutions/x"
#define CONFLICT "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\"," \
	"\"reason\":\"Conflict\",\"code\":409,\"message\":\"the object has been modified\"}"

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
	*state = fx;
	return 0;
}

static int
teardown(void **state)
{
	struct fx *fx = *state;

	k8s_client_free(fx->ctl.client);
	k8s_config_free(fx->cfg);
	fakeapi_stop(fx->api);
	json_decref(fx->ctl.ended);
	pthread_mutex_destroy(&fx->ctl.lock);
	free(fx);
	return 0;
}

/* The execution as the cache or the server has it, Pending at rv. */
static json_t *
execution(const char *uid, const char *rv, const char *phase)
{
	return json_pack("{s:s, s:s, s:{s:s, s:s, s:s, s:s, s:i}, s:{s:s}}",
	    "apiVersion", "airlock.dev/v1alpha1", "kind", "CodeExecution",
	    "metadata", "name", "x", "namespace", "t", "uid", uid,
	    "resourceVersion", rv, "generation", 1, "status", "phase", phase);
}

static void
push_json(struct fakeapi *api, int code, json_t *v)
{
	char *s = json_dumps(v, JSON_COMPACT);

	fakeapi_push(api, code, NULL, s, 0);
	free(s);
	json_decref(v);
}

static int
finish(struct fx *fx, json_t *cx)
{
	json_t *status = json_deep_copy(json_object_get(cx, "status"));
	int rc = ctl_finish(&fx->ctl, cx, status, "Failed", "StartFailed",
	    "the pod ended before the program started: x");

	json_decref(status);
	return rc;
}

static const char *
body_str(struct fx *fx, int i, const char *a, const char *b)
{
	static char out[256];
	json_t *v = json_loads(fakeapi_body(fx->api, i), 0, NULL);
	const char *s = json_string_value(json_object_get(json_object_get(v, a), b));

	snprintf(out, sizeof(out), "%s", s ? s : "(none)");
	json_decref(v);
	return out;
}

/* Without a conflict: one write, at the cached resourceVersion, one Event. */
static void
test_written(void **state)
{
	struct fx *fx = *state;
	json_t *cx = execution(UID, "5", "Pending");

	fakeapi_push(fx->api, 200, NULL, "{}", 0);
	fakeapi_push(fx->api, 201, NULL, "{}", 0);
	assert_int_equal(finish(fx, cx), 0);
	assert_int_equal(fakeapi_count(fx->api), 2);
	assert_string_equal(fakeapi_request(fx->api, 0), PATCH);
	assert_string_equal(body_str(fx, 0, "metadata", "resourceVersion"), "5");
	assert_string_equal(body_str(fx, 0, "status", "reason"), "StartFailed");
	assert_string_equal(fakeapi_request(fx->api, 1),
	    "POST /api/v1/namespaces/t/events");
	assert_non_null(json_object_get(fx->ctl.ended, UID));
	json_decref(cx);
}

/*
 * The cache lagged: the write is refused (409). The same end is written on
 * the execution as the server has it now. (Before, the refusal went back
 * to the queue, whose retry found the pod already deleted and ended the
 * execution PodDeleted instead.)
 */
static void
test_conflict_rewritten(void **state)
{
	struct fx *fx = *state;
	json_t *cx = execution(UID, "5", "Pending");

	fakeapi_push(fx->api, 409, NULL, CONFLICT, 0);
	push_json(fx->api, 200, execution(UID, "7", "Pending"));
	fakeapi_push(fx->api, 200, NULL, "{}", 0);
	fakeapi_push(fx->api, 201, NULL, "{}", 0);
	assert_int_equal(finish(fx, cx), 0);
	assert_int_equal(fakeapi_count(fx->api), 4);
	assert_string_equal(fakeapi_request(fx->api, 0), PATCH);
	assert_string_equal(fakeapi_request(fx->api, 1), GET);
	assert_string_equal(fakeapi_request(fx->api, 2), PATCH);
	assert_string_equal(body_str(fx, 2, "metadata", "resourceVersion"), "7");
	assert_string_equal(body_str(fx, 2, "status", "phase"), "Failed");
	assert_string_equal(body_str(fx, 2, "status", "reason"), "StartFailed");
	assert_string_equal(body_str(fx, 2, "status", "message"),
	    "the pod ended before the program started: x");
	assert_non_null(json_object_get(fx->ctl.ended, UID));
	json_decref(cx);
}

/* Ended meanwhile (the agent's result): nothing is written over it. */
static void
test_conflict_already_ended(void **state)
{
	struct fx *fx = *state;
	json_t *cx = execution(UID, "5", "Running");

	fakeapi_push(fx->api, 409, NULL, CONFLICT, 0);
	push_json(fx->api, 200, execution(UID, "8", "Succeeded"));
	assert_int_equal(finish(fx, cx), 0);
	assert_int_equal(fakeapi_count(fx->api), 2);
	/* Ended all the same: a lagging cache must not make it a new pod. */
	assert_non_null(json_object_get(fx->ctl.ended, UID));
	json_decref(cx);
}

/* Another execution of the same name now: not ours to end. */
static void
test_conflict_replaced(void **state)
{
	struct fx *fx = *state;
	json_t *cx = execution(UID, "5", "Pending");

	fakeapi_push(fx->api, 409, NULL, CONFLICT, 0);
	push_json(fx->api, 200, execution("11111111-2222-3333-4444-555555555555",
	    "9", "Pending"));
	assert_int_equal(finish(fx, cx), 0);
	assert_int_equal(fakeapi_count(fx->api), 2);
	json_decref(cx);
}

/* Conflicts every time: given up after three writes, for the queue. */
static void
test_conflict_gives_up(void **state)
{
	struct fx *fx = *state;
	json_t *cx = execution(UID, "5", "Pending");

	for (int i = 0; i < 2; i++) {
		fakeapi_push(fx->api, 409, NULL, CONFLICT, 0);
		push_json(fx->api, 200, execution(UID, i ? "7" : "6", "Pending"));
	}
	fakeapi_push(fx->api, 409, NULL, CONFLICT, 0);
	assert_int_equal(finish(fx, cx), K8S_ECONFLICT);
	assert_int_equal(fakeapi_count(fx->api), 5);
	assert_null(json_object_get(fx->ctl.ended, UID));
	json_decref(cx);
}

int
main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(test_written),
		T(test_conflict_rewritten),
		T(test_conflict_already_ended),
		T(test_conflict_replaced),
		T(test_conflict_gives_up),
	};
#undef T

	return cmocka_run_group_tests(tests, NULL, NULL);
}
