/* Unit tests: execution/pool.c, the warm path's holder, match key and claim. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "client.h"
#include "ctl_config.h"
#include "cx.h"
#include "podspec.h"
#include "pool.h"

static const char conf[] =
    "runtimeClassName: gvisor\n"
    "runAsUser: 65532\n"
    "profiles:\n"
    "  python:\n"
    "    image: airlock/runner-python:0.1\n"
    "    command: [/airlock/bin/run, python3, main.py]\n"
    "    sourceFile: main.py\n"
    "  raw:\n"
    "    image: airlock/runner-python:0.1\n"
    "    command: [python3, main.py]\n"
    "    sourceFile: main.py\n"
    "defaults: {cpu: 500m, memory: 256Mi, ephemeralStorage: 64Mi}\n"
    "caps: {cpu: \"2\", memory: 2Gi, ephemeralStorage: 1Gi}\n";

static struct ctl_config *cfg;

static int
setup(void **state)
{
	struct k8s_error err;

	(void)state;
	if (ctl_config_parse(conf, sizeof(conf) - 1, "test", &cfg, &err) != 0)
		fail_msg("config: %s", err.message);
	return 0;
}

static int
teardown(void **state)
{
	(void)state;
	ctl_config_free(cfg);
	return 0;
}

static json_t *
parse(const char *s)
{
	json_t *j = json_loads(s, 0, NULL);

	if (j == NULL)
		fail_msg("bad test JSON: %s", s);
	return j;
}

/* The string at a path of object keys, or NULL. */
static const char *
str2(json_t *o, const char *a, const char *b, const char *c)
{
	json_t *v = json_object_get(o, a);

	if (b)
		v = json_object_get(v, b);
	if (c)
		v = json_object_get(v, c);
	return json_string_value(v);
}

static void
key_of(const char *spec, char key[POOL_KEY_LEN], int want, const char *msg)
{
	struct k8s_error err;
	json_t *s = parse(spec);
	int rc = pool_key(cfg, s, key, &err);

	json_decref(s);
	assert_int_equal(rc, want);
	if (msg && strstr(err.message, msg) == NULL)
		fail_msg("%s: wanted '%s', got '%s'", spec, msg, err.message);
}

/* Runtime and resources after the defaults, as numbers: equal texts match. */
static void
test_key(void **state)
{
	char a[POOL_KEY_LEN], b[POOL_KEY_LEN];

	(void)state;
	key_of("{\"runtime\":\"python\"}", a, 0, NULL);
	assert_string_equal(a, "python/500/268435456/67108864");
	key_of("{\"runtime\":\"python\",\"resources\":{\"cpu\":\"0.5\"}}", b, 0, NULL);
	assert_string_equal(a, b);
	key_of("{\"runtime\":\"python\",\"resources\":{\"cpu\":1,\"memory\":\"512Mi\"}}",
	    a, 0, NULL);
	assert_string_equal(a, "python/1000/536870912/67108864");
	key_of("{\"runtime\":\"ruby\"}", a, K8S_EINVAL, "spec.runtime");
	key_of("{\"runtime\":\"python\",\"resources\":{\"memory\":\"3Gi\"}}", a,
	    K8S_EINVAL, "spec.resources.memory");
	/* A profile that does not start with the runner cannot run warm. */
	key_of("{\"runtime\":\"raw\"}", a, K8S_EINVAL,
	    "spec.runtime: profile 'raw' does not start its program with /airlock/bin/run");
}

static json_t *
a_pool(void)
{
	return parse("{\"metadata\":{\"name\":\"py\",\"namespace\":\"team-a\","
	    "\"uid\":\"p-uid\"},\"spec\":{\"runtime\":\"python\",\"replicas\":2,"
	    "\"resources\":{\"memory\":\"512Mi\"}}}");
}

/* A holder: an execution pod's hardening, no code, the pool as owner. */
static void
test_holder(void **state)
{
	struct k8s_error err;
	json_t *pool = a_pool(), *pod, *c, *v;
	size_t i;

	(void)state;
	pod = pool_holder(cfg, pool, &err);
	assert_non_null(pod);
	assert_string_equal(str2(pod, "metadata", "generateName", NULL), "airlock-warm-");
	assert_string_equal(str2(pod, "metadata", "namespace", NULL), "team-a");
	assert_string_equal(str2(pod, "metadata", "labels", POOL_LABEL_UID), "p-uid");
	assert_string_equal(str2(pod, "metadata", "labels", CX_LABEL_MANAGED), CX_MANAGER);
	assert_string_equal(str2(pod, "metadata", "labels", CX_LABEL_COMPONENT),
	    CX_COMPONENT);
	assert_null(str2(pod, "metadata", "labels", CX_LABEL_UID));
	assert_string_equal(str2(pod, "metadata", "annotations", POOL_ANN_KEY),
	    "python/500/536870912/67108864");
	assert_null(str2(pod, "metadata", "annotations", CX_ANN_NAME));
	v = json_array_get(json_object_get(json_object_get(pod, "metadata"),
	    "ownerReferences"), 0);
	assert_string_equal(str2(v, "kind", NULL, NULL), "CodeExecutionPool");
	assert_string_equal(str2(v, "uid", NULL, NULL), "p-uid");
	assert_true(json_is_true(json_object_get(v, "controller")));
	assert_null(json_object_get(json_object_get(pod, "spec"),
	    "activeDeadlineSeconds"));
	assert_string_equal(str2(pod, "spec", "runtimeClassName", NULL), "gvisor");
	assert_true(json_is_false(json_object_get(json_object_get(pod, "spec"),
	    "automountServiceAccountToken")));
	c = json_array_get(json_object_get(json_object_get(pod, "spec"),
	    "containers"), 0);
	{
		const char *want[] = { "/airlock/bin/run", "--hold", "main.py",
		    "python3", "main.py" };

		assert_int_equal(json_array_size(json_object_get(c, "command")), 5);
		for (i = 0; i < 5; i++)
			assert_string_equal(json_string_value(json_array_get(
			    json_object_get(c, "command"), i)), want[i]);
	}
	assert_int_equal(json_array_size(json_object_get(c, "args")), 0);
	assert_string_equal(str2(c, "resources", "limits", "memory"), "512Mi");
	assert_string_equal(str2(c, "resources", "requests", "memory"), "512Mi");
	assert_true(json_is_false(json_object_get(json_object_get(c,
	    "securityContext"), "allowPrivilegeEscalation")));
	assert_true(json_is_true(json_object_get(json_object_get(c,
	    "securityContext"), "readOnlyRootFilesystem")));
	assert_string_equal(json_string_value(json_array_get(json_object_get(
	    json_object_get(json_object_get(c, "securityContext"), "capabilities"),
	    "drop"), 0)), "ALL");
	assert_string_equal(json_string_value(json_array_get(json_object_get(
	    json_object_get(json_object_get(c, "startupProbe"), "exec"), "command"),
	    3)), "infinity");
	json_array_foreach(json_object_get(c, "volumeMounts"), i, v)
		assert_string_not_equal(str2(v, "name", NULL, NULL), "code");
	assert_int_equal(json_array_size(json_object_get(json_object_get(pod,
	    "spec"), "volumes")), 2);
	json_decref(pod);
	/* No uid: refused. */
	json_object_del(json_object_get(pool, "metadata"), "uid");
	assert_null(pool_holder(cfg, pool, &err));
	json_decref(pool);
}

static void
test_idle_ready(void **state)
{
	json_t *p = parse("{\"metadata\":{\"labels\":{\"" POOL_LABEL_UID "\":\"u\"}},"
	    "\"status\":{\"phase\":\"Running\",\"containerStatuses\":[{\"ready\":true,"
	    "\"state\":{\"running\":{}}}]}}");

	(void)state;
	assert_true(pool_holder_idle(p));
	assert_true(pool_holder_ready(p));
	/* Its warm-up not over: running, not ready. */
	json_object_set_new(json_array_get(json_object_get(json_object_get(p,
	    "status"), "containerStatuses"), 0), "ready", json_false());
	assert_true(pool_holder_idle(p));
	assert_false(pool_holder_ready(p));
	json_object_set_new(json_array_get(json_object_get(json_object_get(p,
	    "status"), "containerStatuses"), 0), "ready", json_true());
	/* Claimed: neither. */
	json_object_set_new(json_object_get(json_object_get(p, "metadata"),
	    "labels"), CX_LABEL_UID, json_string("x"));
	assert_false(pool_holder_idle(p));
	assert_false(pool_holder_ready(p));
	json_object_del(json_object_get(json_object_get(p, "metadata"), "labels"),
	    CX_LABEL_UID);
	/* Being deleted: neither. */
	json_object_set_new(json_object_get(p, "metadata"), "deletionTimestamp",
	    json_string("2026-11-25T00:00:00Z"));
	assert_false(pool_holder_idle(p));
	json_decref(p);
}

static json_t *
an_execution(void)
{
	return parse("{\"metadata\":{\"name\":\"hello\",\"namespace\":\"team-a\","
	    "\"uid\":\"x-uid\"},\"spec\":{\"runtime\":\"python\","
	    "\"source\":\"print(1)\\n\",\"files\":[{\"path\":\"d/a.txt\",\"content\":\"A\"}],"
	    "\"stdin\":\"in\",\"args\":[\"one\"],\"env\":[{\"name\":\"K\",\"value\":\"V\"}],"
	    "\"timeoutSeconds\":7,\"output\":{\"maxBytes\":100}}}");
}

static json_t *
a_holder(void)
{
	return parse("{\"metadata\":{\"name\":\"airlock-warm-abcde\",\"resourceVersion\":\"42\","
	    "\"labels\":{\"" POOL_LABEL_UID "\":\"p-uid\"}},"
	    "\"status\":{\"startTime\":\"2026-11-25T00:00:00Z\"}}");
}

#define NOW_S	(1795564800LL + 10)	/* 2026-11-25T00:00:10Z */

/* The claim: the execution's identity, code, process, limits, owner. */
static void
test_claim(void **state)
{
	struct k8s_error err;
	json_t *cx = an_execution(), *holder = a_holder(), *p, *ann, *proc, *v;

	(void)state;
	p = pool_claim_patch(cfg, cx, holder, NOW_S, 0, &err);
	assert_non_null(p);
	ann = json_object_get(json_object_get(p, "metadata"), "annotations");
	assert_string_equal(str2(p, "metadata", "resourceVersion", NULL), "42");
	assert_string_equal(str2(p, "metadata", "labels", CX_LABEL_UID), "x-uid");
	assert_string_equal(str2(ann, CX_ANN_NAME, NULL, NULL), "hello");
	assert_string_equal(str2(ann, CX_ANN_TIMEOUT_MS, NULL, NULL), "7000");
	assert_string_equal(str2(ann, CX_ANN_MAX_OUTPUT, NULL, NULL), "100");
	assert_true(atol(str2(ann, CX_ANN_OUTPUT_BUDGET, NULL, NULL)) > 1000000);
	assert_string_equal(str2(ann, "airlock.dev/source", NULL, NULL), "print(1)\n");
	assert_string_equal(str2(ann, "airlock.dev/file-0", NULL, NULL), "A");
	assert_string_equal(str2(ann, "airlock.dev/stdin", NULL, NULL), "in");
	v = json_array_get(json_object_get(json_object_get(p, "metadata"),
	    "ownerReferences"), 0);
	assert_string_equal(str2(v, "kind", NULL, NULL), "CodeExecution");
	assert_string_equal(str2(v, "uid", NULL, NULL), "x-uid");
	/* Its age (10 s), its timeout (7 s) and the backstop's 30 s. */
	assert_int_equal(json_integer_value(json_object_get(json_object_get(p, "spec"),
	    "activeDeadlineSeconds")), 47);
	proc = parse(str2(ann, POOL_ANN_PROCESS, NULL, NULL));
	{
		char *argv = json_dumps(json_object_get(proc, "argv"), JSON_COMPACT);

		assert_string_equal(argv,
		    "[\"/airlock/bin/run\",\"python3\",\"main.py\",\"one\"]");
		free(argv);
	}
	json_decref(proc);
	json_decref(p);
	/* A custom image: never warm. */
	json_object_set_new(json_object_get(cx, "spec"), "image", json_string("x"));
	assert_null(pool_claim_patch(cfg, cx, holder, NOW_S, 0, &err));
	assert_int_equal(err.code, K8S_EINVAL);
	json_object_del(json_object_get(cx, "spec"), "image");
	/* Past the annotation budget: cold. */
	{
		char *big = malloc(PODSPEC_ANNOTATION_BUDGET + 1);

		memset(big, 'x', PODSPEC_ANNOTATION_BUDGET);
		big[PODSPEC_ANNOTATION_BUDGET] = '\0';
		json_object_set_new(json_object_get(cx, "spec"), "source",
		    json_string(big));
		free(big);
		assert_null(pool_claim_patch(cfg, cx, holder, NOW_S, 0, &err));
		assert_int_equal(err.code, K8S_ETOOBIG);
	}
	json_decref(cx);
	json_decref(holder);
}

/* What the agent reads back is what the controller wrote. */
static void
test_process_round_trip(void **state)
{
	struct k8s_error err;
	struct pool_process pp;
	json_t *cx = an_execution(), *holder = a_holder(), *p, *pod;
	const char *name;

	(void)state;
	p = pool_claim_patch(cfg, cx, holder, NOW_S, 0, &err);
	assert_non_null(p);
	pod = json_pack("{s:{s:O}}", "metadata", "annotations",
	    json_object_get(json_object_get(p, "metadata"), "annotations"));
	assert_int_equal(pool_process_read(pod, &pp), 0);
	assert_int_equal(json_array_size(pp.argv), 4);
	assert_int_equal(pp.nfiles, 2);
	assert_string_equal(pp.files[0].path, "main.py");
	assert_int_equal(pp.files[0].len, 9);
	assert_memory_equal(pp.files[0].data, "print(1)\n", 9);
	assert_string_equal(pp.files[1].path, "d/a.txt");
	assert_int_equal(pp.files[1].len, 1);
	assert_int_equal(pp.stdin_len, 2);
	assert_memory_equal(pp.stdin_data, "in", 2);
	name = json_string_value(json_object_get(json_array_get(pp.env, 0), "name"));
	assert_string_equal(name, "K");
	assert_string_equal(json_string_value(json_object_get(json_array_get(pp.env,
	    1), "value")), "/airlock/work");
	pool_process_free(&pp);
	/* Malformed: refused, and safe to free. */
	json_object_del(json_object_get(json_object_get(pod, "metadata"),
	    "annotations"), "airlock.dev/stdin");
	assert_int_equal(pool_process_read(pod, &pp), -1);
	pool_process_free(&pp);
	json_object_set_new(json_object_get(json_object_get(pod, "metadata"),
	    "annotations"), POOL_ANN_PROCESS, json_string("{not json"));
	assert_int_equal(pool_process_read(pod, &pp), -1);
	pool_process_free(&pp);
	json_object_set_new(json_object_get(json_object_get(pod, "metadata"),
	    "annotations"), POOL_ANN_PROCESS, json_string("{\"argv\":[],\"env\":[]}"));
	assert_int_equal(pool_process_read(pod, &pp), -1);
	pool_process_free(&pp);
	json_object_set_new(json_object_get(json_object_get(pod, "metadata"),
	    "annotations"), POOL_ANN_PROCESS, json_string("{\"argv\":[\"a\"],"
	    "\"env\":[{\"name\":\"K\",\"value\":1}],\"files\":[]}"));
	assert_int_equal(pool_process_read(pod, &pp), -1);
	pool_process_free(&pp);
	json_object_set_new(json_object_get(json_object_get(pod, "metadata"),
	    "annotations"), POOL_ANN_PROCESS, json_string("{\"argv\":[\"a\"],"
	    "\"env\":[],\"files\":[{\"path\":\"x\",\"key\":\"airlock.dev/none\"}]}"));
	assert_int_equal(pool_process_read(pod, &pp), -1);
	pool_process_free(&pp);
	json_object_del(json_object_get(json_object_get(pod, "metadata"),
	    "annotations"), POOL_ANN_PROCESS);
	assert_int_equal(pool_process_read(pod, &pp), -1);
	pool_process_free(&pp);
	json_decref(pod);
	json_decref(p);
	json_decref(cx);
	json_decref(holder);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_key),
		cmocka_unit_test(test_holder),
		cmocka_unit_test(test_idle_ready),
		cmocka_unit_test(test_claim),
		cmocka_unit_test(test_process_round_trip),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
