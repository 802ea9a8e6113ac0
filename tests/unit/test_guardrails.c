/*
 * Unit tests: controller/guardrails.c's ctl_ensure_guardrails against a
 * scripted API server, for what a real one cannot be made to do on demand:
 * a guardrail that changes while a pass applying them is under way.
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

#include "controller_priv.h"
#include "ctl_config.h"
#include "fakeapi.h"
#include "podspec.h"

static const char conf[] =
    "profiles:\n"
    "  python:\n"
    "    image: airlock/runner-python:0.1\n"
    "    command: [python3, /airlock/code/main.py]\n"
    "    sourceFile: main.py\n"
    "defaults: {cpu: 500m, memory: 256Mi, ephemeralStorage: 64Mi}\n"
    "caps: {cpu: \"2\", memory: 2Gi, ephemeralStorage: 1Gi}\n"
    "quota: {executions: 20, cpu: \"8\", memory: 8Gi}\n";

/* A quota as the API server answers an apply: counted, nothing to seed. */
#define PODS_QUOTA "{\"metadata\":{\"name\":\"airlock-executions\"," \
	"\"namespace\":\"t\",\"resourceVersion\":\"7\"},\"spec\":{\"hard\":" \
	"{\"pods\":\"20\"}},\"status\":{\"hard\":{\"pods\":\"20\"},\"used\":" \
	"{\"pods\":\"0\"}}}"
#define STORED_QUOTA "{\"metadata\":{\"name\":\"airlock-stored\"," \
	"\"namespace\":\"t\",\"resourceVersion\":\"8\"},\"spec\":{\"hard\":" \
	"{\"count/codeexecutions.airlock.dev\":\"1k\"}},\"status\":{\"hard\":" \
	"{\"count/codeexecutions.airlock.dev\":\"1k\"},\"used\":" \
	"{\"count/codeexecutions.airlock.dev\":\"0\"}}}"

struct fx {
	struct fakeapi		*api;
	struct k8s_config	*cfg;
	struct controller	 ctl;
};

static int
setup(void **state)
{
	struct fx *fx = calloc(1, sizeof(*fx));
	struct ctl_config *c;
	struct k8s_error err;

	fx->api = fakeapi_start();
	fx->cfg = fakeapi_config(fx->api, NULL);
	assert_int_equal(k8s_client_new(fx->cfg, NULL, &fx->ctl.client, &err), 0);
	if (ctl_config_parse(conf, strlen(conf), "test", &c, &err) != 0)
		fail_msg("config: %s", err.message);
	fx->ctl.cfg = c;
	fx->ctl.opts.resync_ms = 60000;
	pthread_mutex_init(&fx->ctl.lock, NULL);
	fx->ctl.guarded = json_object();
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
	ctl_config_free((struct ctl_config *)fx->ctl.cfg);
	json_decref(fx->ctl.guarded);
	pthread_mutex_destroy(&fx->ctl.lock);
	free(fx);
	return 0;
}

/* One pass's answers: the namespace, then the four applies. */
static void
push_pass(struct fakeapi *api, long first_delay_ms)
{
	fakeapi_push(api, 200, NULL, "{\"metadata\":{\"name\":\"t\"},\"status\":"
	    "{\"phase\":\"Active\"}}", first_delay_ms);
	fakeapi_push(api, 200, NULL, "{\"metadata\":{\"name\":\"airlock-sandbox\"}}", 0);
	{
		/* As built: nothing to put back. */
		json_t *np = podspec_network_policy("t");
		char *text = json_dumps(np, JSON_COMPACT);

		fakeapi_push(api, 200, NULL, text, 0);
		free(text);
		json_decref(np);
	}
	fakeapi_push(api, 200, NULL, PODS_QUOTA, 0);
	fakeapi_push(api, 200, NULL, STORED_QUOTA, 0);
}

/* Once applied, a second pass asks nothing of the API server. */
static void
test_applied_once(void **state)
{
	struct fx *fx = *state;

	push_pass(fx->api, 0);
	assert_int_equal(ctl_ensure_guardrails(&fx->ctl, "t"), 0);
	assert_int_equal(fakeapi_count(fx->api), 5);
	assert_string_equal(fakeapi_request(fx->api, 0), "GET /api/v1/namespaces/t");
	assert_int_equal(ctl_ensure_guardrails(&fx->ctl, "t"), 0);
	assert_int_equal(fakeapi_count(fx->api), 5);
	/* A change there: applied again. */
	ctl_guard_changed(&fx->ctl, "t");
	push_pass(fx->api, 0);
	assert_int_equal(ctl_ensure_guardrails(&fx->ctl, "t"), 0);
	assert_int_equal(fakeapi_count(fx->api), 10);
}

static void *
change_soon(void *arg)
{
	struct fx *fx = arg;

	/* While the pass waits for its first answer. */
	while (fakeapi_count(fx->api) < 1)
		usleep(1000);
	ctl_guard_changed(&fx->ctl, "t");
	return NULL;
}

/*
 * A guardrail changed while a pass was under way (an admin's edit of the
 * quota, read by the pass before the edit): that pass does not count as
 * done, and the next one applies them again. It used to mark the namespace
 * done after the change, so the pass the change queued did nothing, and
 * the edit stood until the resync, a minute later (test_controller_it's
 * test_stored_quota, under ASan, saw it).
 */
static void
test_change_during_pass(void **state)
{
	struct fx *fx = *state;
	pthread_t t;

	push_pass(fx->api, 300);
	assert_int_equal(pthread_create(&t, NULL, change_soon, fx), 0);
	assert_int_equal(ctl_ensure_guardrails(&fx->ctl, "t"), 0);
	pthread_join(t, NULL);
	assert_int_equal(fakeapi_count(fx->api), 5);
	assert_true(json_integer_value(json_object_get(fx->ctl.guarded, "t")) < 0);
	push_pass(fx->api, 0);
	assert_int_equal(ctl_ensure_guardrails(&fx->ctl, "t"), 0);
	assert_int_equal(fakeapi_count(fx->api), 10);
	/* Now done. */
	assert_int_equal(ctl_ensure_guardrails(&fx->ctl, "t"), 0);
	assert_int_equal(fakeapi_count(fx->api), 10);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_applied_once, setup, teardown),
		cmocka_unit_test_setup_teardown(test_change_during_pass, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
