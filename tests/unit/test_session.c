/*
 * Unit tests: execution/session.c, what a CodeSession may be and its pod
 * (docs/sessions.md): the runtimes that offer sessions, the checks that
 * name the field, and the pod, field by field against a pool's holder.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "jpath.h"

#include "client.h"
#include "clock.h"
#include "ctl_config.h"
#include "cx.h"
#include "pool.h"
#include "session.h"

static const char conf[] =
    "profiles:\n"
    "  python:\n"
    "    image: airlock/runner-python:0.1\n"
    "    command: [/airlock/bin/run, python3, main.py]\n"
    "    sourceFile: main.py\n"
    "  python-data:\n"
    "    image: airlock/runner-python-data:0.1\n"
    "    command: [/airlock/bin/run, /usr/bin/python3, main.py]\n"
    "    sourceFile: main.py\n"
    "    preload: [numpy, pandas]\n"
    "    warmup: import numpy\n"
    "  node:\n"
    "    image: airlock/runner-node:0.1\n"
    "    command: [/airlock/bin/run, node, index.js]\n"
    "    sourceFile: index.js\n"
    "  bash:\n"
    "    image: airlock/runner-bash:0.1\n"
    "    command: [/airlock/bin/run, bash, main.sh]\n"
    "    sourceFile: main.sh\n"
    "  guarded:\n"
    "    image: airlock/runner-python:0.1\n"
    "    command: [/airlock/bin/run, python3, main.py]\n"
    "    sourceFile: main.py\n"
    "    policy: {denyImports: [subprocess]}\n"
    "  raw:\n"
    "    image: airlock/runner-python:0.1\n"
    "    command: [python3, main.py]\n"
    "    sourceFile: main.py\n";

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
session(const char *spec)
{
	char text[2048];
	json_error_t e;
	json_t *j;

	snprintf(text, sizeof(text), "{\"metadata\": {\"name\": \"an\", \"namespace\": "
	    "\"team-a\", \"uid\": \"5e55-1011\"}, \"spec\": %s}", spec);
	if ((j = json_loads(text, 0, &e)) == NULL)
		fail_msg("bad test JSON (%s): %s", e.text, text);
	return j;
}

/* Which runtimes offer sessions, and the kernel each runs. */
static void
test_kernel(void **state)
{
	const char *argv[4];

	(void)state;
	assert_int_equal(session_kernel(cfg, "python", argv), 0);
	assert_string_equal(argv[0], "python3");
	assert_string_equal(argv[1], SESSION_KERNEL_PY);
	assert_null(argv[2]);
	assert_int_equal(session_kernel(cfg, "python-data", argv), 0);
	assert_string_equal(argv[0], "/usr/bin/python3");
	assert_int_equal(session_kernel(cfg, "bash", argv), 0);
	assert_string_equal(argv[0], "bash");
	assert_string_equal(argv[1], SESSION_KERNEL_SH);
	assert_null(argv[2]);
	assert_int_equal(session_kernel(cfg, "node", argv), -1);
	assert_int_equal(session_kernel(cfg, "guarded", argv), -1);
	assert_int_equal(session_kernel(cfg, "raw", argv), -1);
	assert_int_equal(session_kernel(cfg, "nope", argv), -1);
	assert_int_equal(session_kernel(cfg, NULL, argv), -1);
}

/* Refusals name the field and say why. */
static void
test_check(void **state)
{
	static const struct {
		const char *spec, *msg;
	} bad[] = {
		{ "{}", "spec.runtime: required" },
		{ "{\"runtime\": \"ruby\"}", "spec.runtime: 'ruby' is not a runtime of "
		  "this cluster" },
		{ "{\"runtime\": \"node\"}", "spec.runtime: sessions are not offered "
		  "for runtime 'node' (only Python and bash runtimes without a code "
		  "policy)" },
		{ "{\"runtime\": \"guarded\"}", "spec.runtime: sessions are not offered "
		  "for runtime 'guarded' (only Python and bash runtimes without a code "
		  "policy)" },
	};
	struct k8s_error err;
	json_t *s;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		s = session(bad[i].spec);
		assert_int_equal(session_check(cfg, s, &err), K8S_EINVAL);
		assert_string_equal(err.message, bad[i].msg);
		json_decref(s);
	}
	s = session("{\"runtime\": \"python\", \"resources\": {\"memory\": \"64Gi\"}}");
	assert_int_equal(session_check(cfg, s, &err), K8S_EINVAL);
	assert_non_null(strstr(err.message, "spec.resources.memory"));
	json_decref(s);
	s = session("{\"runtime\": \"python\", \"resources\": {\"memory\": \"1Gi\"}}");
	assert_int_equal(session_check(cfg, s, &err), 0);
	json_decref(s);
}

/*
 * The pod: a holder of the session's runtime and resources, with the
 * session as owner, its uid label, a fixed name, and the lifetime's
 * backstop.
 */
static void
test_pod(void **state)
{
	struct k8s_error err;
	json_t *s = session("{\"runtime\": \"python\", \"maxLifetimeSeconds\": 120, "
	    "\"resources\": {\"memory\": \"1Gi\"}}"), *pod, *pool, *holder, *a, *b;

	(void)state;
	pod = session_pod(cfg, s, &err);
	assert_non_null(pod);
	assert_string_equal(jp_str(pod, "metadata.name"), "airlock-session-5e55-1011");
	assert_null(jp_at(pod, "metadata.generateName"));
	assert_string_equal(jp_str(pod, "metadata.namespace"), "team-a");
	assert_string_equal(jp_key(pod, "metadata.labels", SESSION_LABEL_UID), "5e55-1011");
	assert_null(json_object_get(jp_at(pod, "metadata.labels"), POOL_LABEL_UID));
	assert_null(json_object_get(jp_at(pod, "metadata.annotations"), POOL_ANN_KEY));
	assert_json(jp_at(pod, "metadata.ownerReferences"), "[{\"apiVersion\": "
	    "\"airlock.dev/v1alpha1\", \"kind\": \"CodeSession\", \"name\": \"an\", "
	    "\"uid\": \"5e55-1011\", \"controller\": true, \"blockOwnerDeletion\": true}]");
	assert_int_equal(jp_num(pod, "spec.activeDeadlineSeconds"), 150);
	/* Everything else is a holder's for the same spec. */
	pool = json_pack("{s:{s:s, s:s, s:s}, s:O}", "metadata", "name", "an",
	    "namespace", "team-a", "uid", "5e55-1011", "spec", json_object_get(s, "spec"));
	holder = pool_holder(cfg, pool, &err);
	assert_non_null(holder);
	a = json_deep_copy(json_object_get(pod, "spec"));
	b = json_deep_copy(json_object_get(holder, "spec"));
	json_object_del(a, "activeDeadlineSeconds");
	assert_true(json_equal(a, b));
	assert_string_equal(jp_str(pod, "spec.containers[0].resources.limits.memory"),
	    "1Gi");
	json_decref(a);
	json_decref(b);
	json_decref(holder);
	json_decref(pool);
	json_decref(pod);
	json_decref(s);
	/* Defaults and ranges: the lifetime 3600, a bad value clamped. */
	s = session("{\"runtime\": \"python\"}");
	assert_int_equal(session_lifetime_s(s), 3600);
	assert_int_equal(session_idle_s(s), 600);
	assert_int_equal(session_ttl_s(s), 3600);
	json_decref(s);
	s = session("{\"runtime\": \"python\", \"idleTimeoutSeconds\": 1, "
	    "\"maxLifetimeSeconds\": 999999, \"ttlSecondsAfterFinished\": 0}");
	assert_int_equal(session_idle_s(s), SESSION_MIN_S);
	assert_int_equal(session_lifetime_s(s), SESSION_MAX_S);
	assert_int_equal(session_ttl_s(s), 0);
	json_decref(s);
	/* A refused one makes no pod. */
	s = session("{\"runtime\": \"node\"}");
	assert_null(session_pod(cfg, s, &err));
	assert_int_equal(err.code, K8S_EINVAL);
	json_decref(s);
}

/*
 * Issue 31: a session of a preload profile starts as its holders do, in
 * the zygote with the modules imported, ready once its socket is there;
 * the kernel's env has them (AIRLOCK_PRELOAD) for images/runner.
 */
static void
test_pod_preload(void **state)
{
	struct k8s_error err;
	json_t *s = session("{\"runtime\": \"python-data\"}"), *pod, *c;

	(void)state;
	pod = session_pod(cfg, s, &err);
	assert_non_null(pod);
	c = jp_at(pod, "spec.containers[0]");
	assert_json(json_object_get(c, "command"), "[\"/airlock/bin/run\","
	    "\"--zygote\",\"main.py\",\"/usr/bin/python3\",\"main.py\"]");
	assert_json(json_object_get(c, "env"), "["
	    "{\"name\":\"HOME\",\"value\":\"/tmp\"},"
	    "{\"name\":\"AIRLOCK_CODE_DIR\",\"value\":\"/tmp\"},"
	    "{\"name\":\"AIRLOCK_PRELOAD\",\"value\":\"numpy,pandas\"},"
	    "{\"name\":\"AIRLOCK_WARMUP\",\"value\":\"import numpy\"}]");
	assert_json(json_object_get(c, "startupProbe"), "{\"exec\":{\"command\":"
	    "[\"test\",\"-S\",\"/dev/shm/airlock-zygote.sock\"]},"
	    "\"periodSeconds\":1,\"timeoutSeconds\":5,\"failureThreshold\":300}");
	json_decref(pod);
	json_decref(s);
	/* Without preload: run --hold, as before. */
	s = session("{\"runtime\": \"python\"}");
	pod = session_pod(cfg, s, &err);
	assert_non_null(pod);
	assert_json(jp_at(pod, "spec.containers[0].command"), "[\"/airlock/bin/run\","
	    "\"--hold\",\"main.py\",\"python3\",\"main.py\"]");
	assert_json(jp_at(pod, "spec.containers[0].env"), "["
	    "{\"name\":\"HOME\",\"value\":\"/tmp\"},"
	    "{\"name\":\"AIRLOCK_CODE_DIR\",\"value\":\"/tmp\"}]");
	json_decref(pod);
	json_decref(s);
}

/*
 * A session's clock as its pod says it, for the node agent (which cannot
 * read sessions): the idle timeout from the annotation the controller
 * puts there, the lifetime's end from the pod's start and
 * activeDeadlineSeconds; and when each ends it.
 */
static void
test_clock(void **state)
{
	struct k8s_error err;
	struct session_clock c;
	json_t *s = session("{\"runtime\": \"python\", \"idleTimeoutSeconds\": 45, "
	    "\"maxLifetimeSeconds\": 120}"), *pod, *holder, *patch, *ann;
	long long t0 = clock_parse_rfc3339("2026-11-27T10:00:00Z");

	(void)state;
	pod = session_pod(cfg, s, &err);
	assert_non_null(pod);
	assert_string_equal(jp_key(pod, "metadata.annotations", SESSION_ANN_IDLE), "45");
	/* Not started: no lifetime's end known yet. */
	assert_int_equal(session_pod_clock(pod, &c), 0);
	assert_string_equal(c.name, "an");
	assert_string_equal(c.uid, "5e55-1011");
	assert_int_equal(c.idle_s, 45);
	assert_int_equal(c.expires_s, 0);
	json_object_set_new(pod, "status", json_pack("{s:s}", "startTime",
	    "2026-11-27T10:00:00Z"));
	assert_int_equal(session_pod_clock(pod, &c), 0);
	assert_int_equal(c.expires_s, t0 + 120);
	/* Idle: only with no step running, from 45 s on. */
	assert_null(session_clock_due(&c, 0, 44999, t0 + 50));
	assert_string_equal(session_clock_due(&c, 0, 45000, t0 + 50), "IdleTimeout");
	assert_null(session_clock_due(&c, 1, 90000, t0 + 50));
	/* The lifetime: whatever it is doing. */
	assert_null(session_clock_due(&c, 1, 0, t0 + 119));
	assert_string_equal(session_clock_due(&c, 1, 0, t0 + 120), "Expired");
	assert_string_equal(session_clock_due(&c, 0, 90000, t0 + 121), "Expired");
	/* An idle count that is not one in the CRD's range: no idle end here. */
	ann = jp_at(pod, "metadata.annotations");
	static const char *const bad[] = { "abc", "9", "86401", "-45", "", "45s" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		json_object_set_new(ann, SESSION_ANN_IDLE, json_string(bad[i]));
		assert_int_equal(session_pod_clock(pod, &c), 0);
		assert_int_equal(c.idle_s, 0);
		assert_null(session_clock_due(&c, 0, 999999999, t0));
	}
	/* Not a session's pod: its label gone, or another kind its owner. */
	json_object_del(jp_at(pod, "metadata.labels"), SESSION_LABEL_UID);
	assert_int_equal(session_pod_clock(pod, &c), -1);
	json_object_set_new(jp_at(pod, "metadata.labels"), SESSION_LABEL_UID,
	    json_string("5e55-1011"));
	json_object_set_new(json_array_get(jp_at(pod, "metadata.ownerReferences"), 0),
	    "kind", json_string("CodeExecutionPool"));
	assert_int_equal(session_pod_clock(pod, &c), -1);
	json_decref(pod);

	/*
	 * A holder claimed 100 s after its start: its deadline counts its
	 * age, and the lifetime's end is the claim + maxLifetimeSeconds.
	 */
	holder = json_pack("{s:{s:s, s:s, s:{s:s}, s:[{s:s, s:s, s:s, s:s, s:b}]}, "
	    "s:{s:s}}", "metadata", "name", "h1", "resourceVersion", "7", "labels",
	    POOL_LABEL_UID, "p-1", "ownerReferences", "apiVersion",
	    "airlock.dev/v1alpha1", "kind", "CodeExecutionPool", "name", "p", "uid",
	    "p-1", "controller", 1, "status", "startTime", "2026-11-27T10:00:00Z");
	patch = session_claim_patch(s, holder, t0 + 100);
	assert_string_equal(jp_key(patch, "metadata.annotations", SESSION_ANN_IDLE), "45");
	assert_int_equal(jp_num(patch, "spec.activeDeadlineSeconds"), 100 + 120 + 30);
	json_object_set(json_object_get(holder, "metadata"), "labels",
	    jp_at(patch, "metadata.labels"));
	json_object_del(jp_at(holder, "metadata.labels"), POOL_LABEL_UID);
	json_object_set(json_object_get(holder, "metadata"), "annotations",
	    jp_at(patch, "metadata.annotations"));
	json_object_set(json_object_get(holder, "metadata"), "ownerReferences",
	    jp_at(patch, "metadata.ownerReferences"));
	json_object_set(holder, "spec", json_object_get(patch, "spec"));
	assert_int_equal(session_pod_clock(holder, &c), 0);
	assert_int_equal(c.expires_s, t0 + 100 + 120);
	assert_int_equal(c.idle_s, 45);
	json_decref(patch);
	json_decref(holder);
	json_decref(s);
}

/*
 * A step on the session's pod: its run in the annotations the warm path
 * reads (pool_process_read), what `warm --step` is given, the last step's
 * annotations removed; and read back, only from a session's own pod.
 */
static void
test_step(void **state)
{
	struct k8s_error err;
	json_t *s = session("{\"runtime\": \"python\"}"), *pod, *cx, *patch, *ann;
	struct pool_process pp;
	const char *name, *uid;

	(void)state;
	pod = session_pod(cfg, s, &err);
	assert_non_null(pod);
	json_object_set_new(json_object_get(pod, "metadata"), "resourceVersion",
	    json_string("77"));
	/* The last step's: two files, stdin, its uid, its cancel. */
	ann = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}",
	    "airlock.dev/file-0", "old", "airlock.dev/file-1", "old",
	    "airlock.dev/stdin", "old", SESSION_ANN_STEP, "0ld-uid",
	    SESSION_ANN_CANCEL, "0ld-uid", "other.io/kept", "yes");
	json_object_update(json_object_get(json_object_get(pod, "metadata"),
	    "annotations"), ann);
	json_decref(ann);
	cx = json_loads("{\"metadata\": {\"name\": \"step-2\", \"namespace\": "
	    "\"team-a\", \"uid\": \"cx-2\"}, \"spec\": {\"runtime\": \"python\", "
	    "\"session\": \"an\", \"source\": \"x + 1\", \"timeoutSeconds\": 7, "
	    "\"files\": [{\"path\": \"d.csv\", \"content\": \"a,b\"}], "
	    "\"env\": [{\"name\": \"K\", \"value\": \"v\"}]}}", 0, NULL);
	assert_non_null(cx);
	patch = session_step_patch(cfg, cx, pod, 0, &err);
	assert_non_null(patch);
	assert_string_equal(jp_str(patch, "metadata.resourceVersion"), "77");
	/* Nothing but annotations: the owner, labels, deadline stay. */
	assert_int_equal(json_object_size(patch), 1);
	assert_int_equal(json_object_size(json_object_get(patch, "metadata")), 2);
	ann = jp_at(patch, "metadata.annotations");
	assert_string_equal(jp_key(patch, "metadata.annotations", SESSION_ANN_STEP), "cx-2");
	assert_string_equal(jp_key(patch, "metadata.annotations", SESSION_ANN_STEP_NAME),
	    "step-2");
	/* Never an execution's own pod's marks: the session's pod is not one. */
	assert_true(json_is_null(json_object_get(ann, "airlock.dev/execution")));
	assert_null(jp_at(patch, "metadata.labels"));
	assert_string_equal(jp_key(patch, "metadata.annotations", "airlock.dev/timeout-ms"),
	    "7000");
	assert_string_equal(jp_key(patch, "metadata.annotations", "airlock.dev/source"),
	    "x + 1");
	assert_string_equal(jp_key(patch, "metadata.annotations", "airlock.dev/file-0"),
	    "a,b");
	assert_true(json_is_null(json_object_get(ann, "airlock.dev/file-1")));
	assert_true(json_is_null(json_object_get(ann, "airlock.dev/stdin")));
	assert_true(json_is_null(json_object_get(ann, SESSION_ANN_CANCEL)));
	assert_null(json_object_get(ann, "other.io/kept"));
	{
		/*
		 * Made from the controller's cached pod, which keeps few of
		 * its annotations (ctl_trim_pod): the last step's keys are
		 * cleared all the same, every file the most a step carries.
		 */
		json_t *trimmed = json_pack("{s:{s:s, s:s, s:{s:s}}}", "metadata",
		    "name", "p", "resourceVersion", "78", "annotations",
		    SESSION_ANN_STEP, "0ld-uid");
		json_t *p2 = session_step_patch(cfg, cx, trimmed, 0, &err), *a2;
		char k[40];

		assert_non_null(p2);
		a2 = jp_at(p2, "metadata.annotations");
		assert_string_equal(jp_str(p2, "metadata.resourceVersion"), "78");
		assert_string_equal(jp_key(p2, "metadata.annotations",
		    "airlock.dev/file-0"), "a,b");
		for (int i = 1; i < SESSION_STEP_FILES; i++) {
			snprintf(k, sizeof(k), "airlock.dev/file-%d", i);
			assert_true(json_is_null(json_object_get(a2, k)));
		}
		snprintf(k, sizeof(k), "airlock.dev/file-%d", SESSION_STEP_FILES);
		assert_null(json_object_get(a2, k));
		assert_true(json_is_null(json_object_get(a2, "airlock.dev/stdin")));
		assert_true(json_is_null(json_object_get(a2, CX_ANN_STREAM)));
		assert_true(json_is_null(json_object_get(a2, SESSION_ANN_CANCEL)));
		assert_string_equal(jp_key(p2, "metadata.annotations",
		    SESSION_ANN_STEP), "cx-2");
		json_decref(p2);
		json_decref(trimmed);
	}
	/* Applied, the agent reads the run back as the warm path does. */
	json_object_update(json_object_get(json_object_get(pod, "metadata"),
	    "annotations"), ann);
	{
		json_t *a = json_object_get(json_object_get(pod, "metadata"),
		    "annotations");
		const char *k;
		json_t *v;
		void *it;

		json_object_foreach_safe(a, it, k, v)
			if (json_is_null(v))
				json_object_del(a, k);	/* as a merge patch does */
	}
	assert_int_equal(pool_process_read(pod, &pp), 0);
	assert_int_equal(pp.nfiles, 2);
	assert_string_equal(pp.files[0].path, "main.py");
	assert_string_equal(pp.files[0].data, "x + 1");
	assert_string_equal(pp.files[1].path, "d.csv");
	assert_null(pp.stdin_data);
	assert_json(json_object_get(pp.proc, "step"), "{\"code\": \"main.py\", "
	    "\"kernel\": [\"python3\", \"" SESSION_KERNEL_PY "\"], \"timeoutMs\": 7000, "
	    "\"graceMs\": 5000}");
	pool_process_free(&pp);
	assert_int_equal(session_pod_step(pod, &name, &uid), 0);
	assert_string_equal(name, "step-2");
	assert_string_equal(uid, "cx-2");
	/* Not a session's: its owner another kind, or its label another uid. */
	json_object_set_new(json_array_get(jp_at(pod, "metadata.ownerReferences"), 0),
	    "uid", json_string("someone-else"));
	assert_int_equal(session_pod_step(pod, &name, &uid), -1);
	json_object_set_new(json_array_get(jp_at(pod, "metadata.ownerReferences"), 0),
	    "uid", json_string("5e55-1011"));
	json_object_set_new(json_array_get(jp_at(pod, "metadata.ownerReferences"), 0),
	    "kind", json_string("CodeExecutionPool"));
	assert_int_equal(session_pod_step(pod, &name, &uid), -1);
	json_decref(patch);
	/* A runtime with no sessions: refused, the field named. */
	json_object_set_new(json_object_get(cx, "spec"), "runtime", json_string("node"));
	assert_null(session_step_patch(cfg, cx, pod, 0, &err));
	assert_int_equal(err.code, K8S_EINVAL);
	assert_non_null(strstr(err.message, "spec.runtime"));
	json_decref(cx);
	json_decref(pod);
	json_decref(s);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kernel),
		cmocka_unit_test(test_check),
		cmocka_unit_test(test_pod),
		cmocka_unit_test(test_pod_preload),
		cmocka_unit_test(test_step),
		cmocka_unit_test(test_clock),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
