/*
 * Unit tests: execution/pool.c, the warm path's match key, holder, claim
 * and the claim as the node agent reads it back (docs/warm-path.md).
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
#include "ctl_config.h"
#include "cx.h"
#include "jsonsize.h"
#include "podspec.h"
#include "pool.h"
#include "session.h"

/*
 * No defaults or caps: the config's own (500m/256Mi/64Mi, capped at
 * 2/2Gi/1Gi), which test_config_defaults pins. A runtime class that is not
 * the default, so the holder's is seen to come from here.
 */
static const char conf[] =
    "runtimeClassName: gvisor-test\n"
    "runAsUser: 65532\n"
    "profiles:\n"
    "  python:\n"
    "    image: airlock/runner-python:0.1\n"
    "    command: [/airlock/bin/run, python3, main.py]\n"
    "    sourceFile: main.py\n"
    "  node:\n"
    "    image: airlock/runner-node:0.1\n"
    "    command: [/airlock/bin/run, node, index.js]\n"
    "    sourceFile: index.js\n"
    "  raw:\n"
    "    image: airlock/runner-python:0.1\n"
    "    command: [python3, main.py]\n"
    "    sourceFile: main.py\n"
    /* Issue 31: holders that import these ahead (a zygote). */
    "  data:\n"
    "    image: airlock/runner-python-data:0.1\n"
    "    command: [/airlock/bin/run, python3, main.py]\n"
    "    sourceFile: main.py\n"
    "    preload: [numpy, pandas, matplotlib]\n"
    "    warmup: \"import matplotlib\\nmatplotlib.use('Agg')\\n\"\n"
    "  guarded:\n"
    "    image: airlock/runner-python-data:0.1\n"
    "    command: [/airlock/bin/run, python3, main.py]\n"
    "    sourceFile: main.py\n"
    "    policy: {denyImports: [subprocess]}\n"
    "    preload: [json]\n"
    /* Issue 32: CIDR egress (warm), and a host entry (cold only). */
    "  net:\n"
    "    image: airlock/runner-python:0.1\n"
    "    command: [/airlock/bin/run, python3, main.py]\n"
    "    sourceFile: main.py\n"
    "    network: {egress: [{cidr: 10.20.0.0/16, ports: [5432]}], egressBytes: 1Mi}\n"
    "  nethost:\n"
    "    image: airlock/runner-python:0.1\n"
    "    command: [/airlock/bin/run, python3, main.py]\n"
    "    sourceFile: main.py\n"
    "    network: {egress: [{host: pypi.org, ports: [443]}]}\n";

static struct ctl_config *cfg;

#define NOW_S	(1795564800LL + 10)	/* 2026-11-25T00:00:10Z */
#define BUDGET	(CX_OBJECT_BUDGET - CX_STATUS_RESERVE)

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
	json_error_t e;
	json_t *j = json_loads(s, 0, &e);

	if (j == NULL)
		fail_msg("bad test JSON (%s): %s", e.text, s);
	return j;
}


/* --- pool_key -------------------------------------------------------------- */

/* pool_key of spec: its return code, the key in out, the message in err. */
static int
key_of(const char *spec, char out[POOL_KEY_LEN], struct k8s_error *err)
{
	json_t *s = parse(spec);
	int rc;

	memset(err, 0, sizeof(*err));
	memset(out, 0, POOL_KEY_LEN);
	rc = pool_key(cfg, s, out, err);
	json_decref(s);
	return rc;
}

/* Refused with K8S_EINVAL and msg in the message. */
static void
key_refused(const char *spec, const char *msg)
{
	char k[POOL_KEY_LEN];
	struct k8s_error err;

	assert_int_equal(key_of(spec, k, &err), K8S_EINVAL);
	assert_int_equal(err.code, K8S_EINVAL);
	if (strstr(err.message, msg) == NULL)
		fail_msg("%s: wanted '%s' in '%s'", spec, msg, err.message);
}

/* The keys below rest on these: the config's documented defaults. */
static void
test_config_defaults(void **state)
{
	(void)state;
	assert_string_equal(cfg->defaults.cpu, "500m");
	assert_int_equal(cfg->defaults.cpu_milli, 500);
	assert_string_equal(cfg->defaults.memory, "256Mi");
	assert_int_equal(cfg->defaults.memory_bytes, 268435456);
	assert_string_equal(cfg->defaults.ephemeral_storage, "64Mi");
	assert_int_equal(cfg->defaults.ephemeral_bytes, 67108864);
	assert_int_equal(cfg->caps.cpu_milli, 2000);
	assert_int_equal(cfg->caps.memory_bytes, INT64_C(2) << 30);
}

static void
test_key_defaults(void **state)
{
	char k[POOL_KEY_LEN];
	struct k8s_error err;

	(void)state;
	assert_int_equal(key_of("{\"runtime\":\"python\"}", k, &err), 0);
	assert_string_equal(k, "python/500/268435456/67108864");
	/* An empty resources object is the defaults too. */
	assert_int_equal(key_of("{\"runtime\":\"python\",\"resources\":{}}", k,
	    &err), 0);
	assert_string_equal(k, "python/500/268435456/67108864");
	assert_int_equal(key_of("{\"runtime\":\"node\"}", k, &err), 0);
	assert_string_equal(k, "node/500/268435456/67108864");
}

static void
test_key_explicit(void **state)
{
	char k[POOL_KEY_LEN];
	struct k8s_error err;

	(void)state;
	assert_int_equal(key_of("{\"runtime\":\"python\",\"resources\":"
	    "{\"cpu\":\"1\",\"memory\":\"512Mi\"}}", k, &err), 0);
	assert_string_equal(k, "python/1000/536870912/67108864");
	assert_int_equal(key_of("{\"runtime\":\"python\",\"resources\":"
	    "{\"cpu\":\"250m\",\"memory\":\"128Mi\",\"ephemeralStorage\":\"1Gi\"}}",
	    k, &err), 0);
	assert_string_equal(k, "python/250/134217728/1073741824");
	/* At the caps exactly: allowed. */
	assert_int_equal(key_of("{\"runtime\":\"python\",\"resources\":"
	    "{\"cpu\":\"2\",\"memory\":\"2Gi\"}}", k, &err), 0);
	assert_string_equal(k, "python/2000/2147483648/67108864");
}

/* Equal quantities written differently are one key: pools match by value. */
static void
test_key_equal_quantities(void **state)
{
	char a[POOL_KEY_LEN], b[POOL_KEY_LEN];
	struct k8s_error err;

	(void)state;
	assert_int_equal(key_of("{\"runtime\":\"python\",\"resources\":"
	    "{\"cpu\":\"0.5\"}}", a, &err), 0);
	assert_int_equal(key_of("{\"runtime\":\"python\",\"resources\":"
	    "{\"cpu\":\"500m\"}}", b, &err), 0);
	assert_string_equal(a, "python/500/268435456/67108864");
	assert_string_equal(b, a);
	assert_int_equal(key_of("{\"runtime\":\"python\",\"resources\":"
	    "{\"memory\":\"0.5Gi\"}}", a, &err), 0);
	assert_int_equal(key_of("{\"runtime\":\"python\",\"resources\":"
	    "{\"memory\":\"512Mi\"}}", b, &err), 0);
	assert_string_equal(a, "python/500/536870912/67108864");
	assert_string_equal(b, a);
	/* A different value is a different key. */
	assert_int_equal(key_of("{\"runtime\":\"python\",\"resources\":"
	    "{\"cpu\":\"501m\"}}", b, &err), 0);
	assert_string_equal(b, "python/501/268435456/67108864");
}

static void
test_key_refused(void **state)
{
	(void)state;
	key_refused("{\"runtime\":\"ruby\"}",
	    "spec.runtime: unknown runtime profile 'ruby'");
	key_refused("{}", "spec.runtime");
	key_refused("{\"runtime\":5}", "spec.runtime");
	key_refused("{\"runtime\":\"python\",\"resources\":{\"cpu\":\"3\"}}",
	    "spec.resources.cpu: 3 is above this cluster's cap of 2");
	key_refused("{\"runtime\":\"python\",\"resources\":{\"cpu\":\"2001m\"}}",
	    "spec.resources.cpu");
	key_refused("{\"runtime\":\"python\",\"resources\":{\"memory\":\"3Gi\"}}",
	    "spec.resources.memory: 3Gi is above this cluster's cap of 2Gi");
	key_refused("{\"runtime\":\"python\",\"resources\":"
	    "{\"ephemeralStorage\":\"2Gi\"}}", "spec.resources.ephemeralStorage");
	key_refused("{\"runtime\":\"python\",\"resources\":{\"memory\":\"lots\"}}",
	    "spec.resources.memory");
}

/* A profile that does not start its program with the runner cannot hold. */
static void
test_key_no_runner(void **state)
{
	(void)state;
	key_refused("{\"runtime\":\"raw\"}",
	    "spec.runtime: profile 'raw' does not start its program with "
	    "/airlock/bin/run");
}

/* --- pool_holder ----------------------------------------------------------- */

static json_t *
a_pool(void)
{
	return parse("{\"apiVersion\":\"airlock.dev/v1alpha1\","
	    "\"kind\":\"CodeExecutionPool\",\"metadata\":{\"name\":\"py\","
	    "\"namespace\":\"team-a\",\"uid\":\"p-uid\"},\"spec\":{\"runtime\":"
	    "\"python\",\"replicas\":2,\"resources\":{\"cpu\":\"1\","
	    "\"memory\":\"512Mi\"}}}");
}

static json_t *
holder_of(json_t *pool)
{
	struct k8s_error err;
	json_t *pod;

	memset(&err, 0, sizeof(err));
	pod = pool_holder(cfg, pool, &err);
	if (pod == NULL)
		fail_msg("pool_holder: %s", err.message);
	return pod;
}

/* Identity: the pool's namespace, its label and key, the pool as owner. */
static void
test_holder_metadata(void **state)
{
	json_t *pool = a_pool(), *pod = holder_of(pool);
	char k[POOL_KEY_LEN];
	struct k8s_error err;

	(void)state;
	assert_string_equal(jp_str(pod, "apiVersion"), "v1");
	assert_string_equal(jp_str(pod, "kind"), "Pod");
	assert_string_equal(jp_str(pod, "metadata.generateName"), "airlock-warm-");
	assert_null(jp_at(pod, "metadata.name"));
	assert_string_equal(jp_str(pod, "metadata.namespace"), "team-a");
	assert_json(jp_at(pod, "metadata.labels"), "{"
	    "\"app.kubernetes.io/name\":\"airlock\","
	    "\"" CX_LABEL_MANAGED "\":\"" CX_MANAGER "\","
	    "\"" CX_LABEL_COMPONENT "\":\"" CX_COMPONENT "\","
	    "\"airlock.dev/pool-uid\":\"p-uid\"}");
	assert_null(json_object_get(jp_at(pod, "metadata.labels"),
	    "airlock.dev/execution-uid"));
	/* The key, and nothing of an execution's (code, limits, name). */
	assert_int_equal(pool_key(cfg, jp_at(pool, "spec"), k, &err), 0);
	assert_string_equal(k, "python/1000/536870912/67108864");
	assert_json(jp_at(pod, "metadata.annotations"),
	    "{\"airlock.dev/warm-key\":\"python/1000/536870912/67108864\"}");
	assert_json(jp_at(pod, "metadata.ownerReferences"), "[{"
	    "\"apiVersion\":\"airlock.dev/v1alpha1\","
	    "\"kind\":\"CodeExecutionPool\",\"name\":\"py\",\"uid\":\"p-uid\","
	    "\"controller\":true,\"blockOwnerDeletion\":true}]");
	json_decref(pod);
	json_decref(pool);
}

/*
 * A pool of a profile with CIDR egress (docs/network.md, "Warm"): its
 * holders under the network class with the byte cap, the gate in their
 * env with ports from the pool's uid, and a policy of the pool's that
 * selects them by the pool's label: the profile's whole list and the
 * gate's P, Q and M. An execution naming its egress, a profile with a
 * host entry and a session run no holder of it.
 */
static void
test_holder_egress(void **state)
{
	json_t *pool = parse("{\"metadata\":{\"name\":\"n\",\"namespace\":"
	    "\"team-a\",\"uid\":\"p-uid\"},\"spec\":{\"runtime\":\"net\"}}");
	json_t *pod = holder_of(pool), *np = NULL, *o;
	struct podspec_gate g = { .ns = "airlock-system", .n = 1 };
	char k[POOL_KEY_LEN], want[128], *got;
	struct k8s_error err;
	int ports[PODSPEC_GATE_NPORTS];

	(void)state;
	snprintf(g.addrs[0], sizeof(g.addrs[0]), "10.0.0.9");
	assert_string_equal(jp_str(pod, "spec.runtimeClassName"), "gvisor-net");
	assert_json(jp_at(pod, "metadata.annotations"),
	    "{\"airlock.dev/warm-key\":\"net/500/268435456/67108864\","
	    "\"airlock.dev/egress-bytes\":\"1048576\"}");
	assert_int_equal(pool_holder_egress(cfg, pool, pod, &g, &np, &err), 0);
	assert_non_null(np);
	/*
	 * Stamped with what it is gated under, the same as the pool's now
	 * (the addresses not in it); another cap, another stamp.
	 */
	{
		char stamp[POOL_STAMP_LEN + 1], other[POOL_STAMP_LEN + 1];
		struct ctl_profile *pr = (struct ctl_profile *)
		    ctl_config_profile(cfg, "net");

		assert_int_equal(pool_egress_stamp(cfg, pool, "airlock-system",
		    stamp, &err), 0);
		assert_int_equal(strlen(stamp), POOL_STAMP_LEN);
		assert_string_equal(jp_key(pod, "metadata.annotations",
		    POOL_ANN_EGRESS), stamp);
		pr->egress_bytes *= 2;
		assert_int_equal(pool_egress_stamp(cfg, pool, "airlock-system",
		    other, &err), 0);
		pr->egress_bytes /= 2;
		assert_string_not_equal(stamp, other);
		assert_int_equal(pool_egress_stamp(cfg, pool, "elsewhere",
		    other, &err), 0);
		assert_string_not_equal(stamp, other);
	}
	podspec_gate_ports("p-uid", ports);
	snprintf(want, sizeof(want), "%d,%d %d 8182 30 10.0.0.9", ports[0],
	    ports[1], ports[2]);
	o = json_array_get(jp_at(pod, "spec.containers[0].env"),
	    json_array_size(jp_at(pod, "spec.containers[0].env")) - 1);
	assert_string_equal(json_string_value(json_object_get(o, "name")),
	    "AIRLOCK_EGRESS_GATE");
	assert_string_equal(json_string_value(json_object_get(o, "value")), want);
	got = json_dumps(np, JSON_COMPACT | JSON_SORT_KEYS);
	snprintf(want, sizeof(want), "[{\"port\":%d,\"protocol\":\"TCP\"},"
	    "{\"port\":%d,\"protocol\":\"TCP\"},{\"port\":%d,\"protocol\":"
	    "\"TCP\"}]", ports[0], ports[1], ports[2]);
	assert_non_null(strstr(got, want));
	json_object_del(json_array_get(jp_at(np, "spec.egress"), 1), "ports");
	free(got);
	got = json_dumps(np, JSON_COMPACT | JSON_SORT_KEYS);
	assert_string_equal(got,
	    "{\"apiVersion\":\"networking.k8s.io/v1\",\"kind\":\"NetworkPolicy\","
	    "\"metadata\":{\"annotations\":{},"
	    "\"labels\":{\"airlock.dev/pool-uid\":\"p-uid\","
	    "\"app.kubernetes.io/component\":\"execution\","
	    "\"app.kubernetes.io/name\":\"airlock\"},"
	    "\"name\":\"airlock-pool-p-uid\",\"namespace\":\"team-a\","
	    "\"ownerReferences\":[{\"apiVersion\":\"airlock.dev/v1alpha1\","
	    "\"blockOwnerDeletion\":true,\"controller\":true,"
	    "\"kind\":\"CodeExecutionPool\",\"name\":\"n\",\"uid\":\"p-uid\"}]},"
	    "\"spec\":{\"egress\":["
	    "{\"ports\":[{\"port\":5432,\"protocol\":\"TCP\"}],"
	    "\"to\":[{\"ipBlock\":{\"cidr\":\"10.20.0.0/16\"}}]},"
	    "{\"to\":[{\"namespaceSelector\":{\"matchLabels\":"
	    "{\"kubernetes.io/metadata.name\":\"airlock-system\"}},"
	    "\"podSelector\":{\"matchLabels\":"
	    "{\"app.kubernetes.io/component\":\"egress-gate\"}}}]}],"
	    "\"podSelector\":{\"matchLabels\":{\"airlock.dev/pool-uid\":\"p-uid\"}},"
	    "\"policyTypes\":[\"Egress\"]}}");
	free(got);
	json_decref(np);
	json_decref(pod);
	/* The pool's key is its whole list's: an execution asking nothing gets it. */
	assert_int_equal(pool_key(cfg, jp_at(pool, "spec"), k, &err), 0);
	assert_string_equal(k, "net/500/268435456/67108864");
	o = parse("{\"runtime\":\"net\",\"network\":{}}");
	assert_int_equal(pool_key(cfg, o, k, &err), 0);
	assert_string_equal(k, "net/500/268435456/67108864");
	json_decref(o);
	key_refused("{\"runtime\":\"net\",\"network\":{\"egress\":"
	    "[{\"cidr\":\"10.20.0.0/16\",\"ports\":[5432]}]}}",
	    "spec.network.egress: an execution that names its egress runs "
	    "cold, with a NetworkPolicy of its own; a warm sandbox has its "
	    "profile's whole list (docs/network.md)");
	key_refused("{\"runtime\":\"net\",\"network\":{\"egress\":[]}}",
	    "spec.network.egress: an execution that names its egress runs "
	    "cold, with a NetworkPolicy of its own; a warm sandbox has its "
	    "profile's whole list (docs/network.md)");
	key_refused("{\"runtime\":\"nethost\"}",
	    "spec.runtime: profile 'nethost' has host entries in its egress: "
	    "its executions run cold, each with a pass of its own for the "
	    "proxy (docs/network.md)");
	o = parse("{\"spec\":{\"runtime\":\"net\"}}");
	assert_int_equal(session_check(cfg, o, &err), K8S_EINVAL);
	assert_string_equal(err.message, "spec.runtime: profile 'net' has "
	    "network egress: sessions have no network (docs/network.md)");
	json_decref(o);
	json_decref(pool);
	/* A pool without egress: no policy, the holder as it was. */
	pool = a_pool();
	pod = holder_of(pool);
	o = json_deep_copy(pod);
	assert_int_equal(pool_holder_egress(cfg, pool, pod, &g, &np, &err), 0);
	assert_null(np);
	assert_true(json_equal(o, pod));
	json_decref(o);
	json_decref(pod);
	json_decref(pool);
}

/* The pod: an execution pod's hardening, no code, no deadline, held. */
static void
test_holder_spec(void **state)
{
	json_t *pool = a_pool(), *pod = holder_of(pool), *spec, *c;

	(void)state;
	spec = jp_at(pod, "spec");
	c = jp_at(pod, "spec.containers[0]");
	assert_int_equal(json_array_size(jp_at(pod, "spec.containers")), 1);
	assert_null(json_object_get(spec, "activeDeadlineSeconds"));
	assert_string_equal(jp_str(pod, "spec.runtimeClassName"), "gvisor-test");
	assert_string_equal(jp_str(pod, "spec.priorityClassName"), "airlock-execution");
	assert_string_equal(jp_str(pod, "spec.serviceAccountName"), "airlock-execution");
	assert_string_equal(jp_str(pod, "spec.restartPolicy"), "Never");
	assert_false(jp_bool(pod, "spec.automountServiceAccountToken"));
	assert_false(jp_bool(pod, "spec.enableServiceLinks"));
	assert_false(jp_bool(pod, "spec.hostNetwork"));
	assert_false(jp_bool(pod, "spec.hostPID"));
	assert_false(jp_bool(pod, "spec.hostIPC"));
	assert_string_equal(jp_str(pod, "spec.dnsPolicy"), "None");
	assert_true(jp_bool(pod, "spec.securityContext.runAsNonRoot"));
	assert_int_equal(jp_num(pod, "spec.securityContext.runAsUser"), 65532);
	assert_string_equal(jp_str(pod, "spec.securityContext.seccompProfile.type"),
	    "RuntimeDefault");

	assert_string_equal(jp_str(c, "image"), "airlock/runner-python:0.1");
	assert_json(json_object_get(c, "command"), "[\"/airlock/bin/run\","
	    "\"--hold\",\"main.py\",\"python3\",\"main.py\"]");
	assert_json(json_object_get(c, "args"), "[]");
	assert_json(json_object_get(c, "securityContext"), "{"
	    "\"allowPrivilegeEscalation\":false,\"readOnlyRootFilesystem\":true,"
	    "\"runAsNonRoot\":true,\"runAsUser\":65532,"
	    "\"capabilities\":{\"drop\":[\"ALL\"]},"
	    "\"seccompProfile\":{\"type\":\"RuntimeDefault\"}}");
	/* Requests equal limits, at the pool's values and the default rest. */
	assert_json(json_object_get(c, "resources"), "{"
	    "\"requests\":{\"cpu\":\"1\",\"memory\":\"512Mi\","
	    "\"ephemeral-storage\":\"64Mi\"},"
	    "\"limits\":{\"cpu\":\"1\",\"memory\":\"512Mi\","
	    "\"ephemeral-storage\":\"64Mi\"}}");
	/*
	 * No volume at all (podspec.h's direct pod, its code env dropped):
	 * the claim brings the code; /tmp, gVisor's tmpfs, is the working
	 * directory and HOME.
	 */
	assert_null(json_object_get(c, "volumeMounts"));
	assert_null(json_object_get(spec, "volumes"));
	assert_string_equal(jp_str(c, "workingDir"), "/tmp");
	assert_json(json_object_get(c, "env"), "["
	    "{\"name\":\"HOME\",\"value\":\"/tmp\"},"
	    "{\"name\":\"AIRLOCK_CODE_DIR\",\"value\":\"/tmp\"}]");
	assert_json(json_object_get(c, "startupProbe"), "{\"exec\":{\"command\":"
	    "[\"grep\",\"-q\",\"-a\",\"infinity\",\"/proc/1/cmdline\"]},"
	    "\"periodSeconds\":1,\"timeoutSeconds\":5,\"failureThreshold\":300}");
	json_decref(pod);
	json_decref(pool);
}

/* run --hold is given the profile's source file and program. */
static void
test_holder_other_profile(void **state)
{
	json_t *pool = parse("{\"metadata\":{\"name\":\"js\",\"namespace\":\"n\","
	    "\"uid\":\"u2\"},\"spec\":{\"runtime\":\"node\"}}");
	json_t *pod = holder_of(pool);

	(void)state;
	assert_json(jp_at(pod, "spec.containers[0].command"), "[\"/airlock/bin/run\","
	    "\"--hold\",\"index.js\",\"node\",\"index.js\"]");
	assert_string_equal(jp_str(pod, "spec.containers[0].image"),
	    "airlock/runner-node:0.1");
	assert_string_equal(jp_key(pod, "metadata.annotations", POOL_ANN_KEY),
	    "node/500/268435456/67108864");
	assert_string_equal(jp_str(pod, "spec.containers[0].resources.limits.cpu"),
	    "500m");
	assert_string_equal(jp_str(pod, "spec.containers[0].resources.limits.memory"),
	    "256Mi");
	json_decref(pod);
	json_decref(pool);
}

/*
 * Issue 31: a preload profile's holder runs the zygote (run --zygote, the
 * shape of run --hold), with the modules and the warm-up in its env, and
 * is ready once the zygote's socket is there. The rest as any holder's.
 */
static void
test_holder_preload(void **state)
{
	json_t *pool = parse("{\"metadata\":{\"name\":\"d\",\"namespace\":\"n\","
	    "\"uid\":\"u3\"},\"spec\":{\"runtime\":\"data\"}}");
	json_t *pod = holder_of(pool), *c = jp_at(pod, "spec.containers[0]");

	(void)state;
	assert_json(json_object_get(c, "command"), "[\"/airlock/bin/run\","
	    "\"--zygote\",\"main.py\",\"python3\",\"main.py\"]");
	assert_json(json_object_get(c, "args"), "[]");
	assert_json(json_object_get(c, "env"), "["
	    "{\"name\":\"HOME\",\"value\":\"/tmp\"},"
	    "{\"name\":\"AIRLOCK_CODE_DIR\",\"value\":\"/tmp\"},"
	    "{\"name\":\"AIRLOCK_PRELOAD\",\"value\":\"numpy,pandas,matplotlib\"},"
	    "{\"name\":\"AIRLOCK_WARMUP\",\"value\":\"import matplotlib\\n"
	    "matplotlib.use('Agg')\\n\"}]");
	assert_json(json_object_get(c, "startupProbe"), "{\"exec\":{\"command\":"
	    "[\"test\",\"-S\",\"/dev/shm/airlock-zygote.sock\"]},"
	    "\"periodSeconds\":1,\"timeoutSeconds\":5,\"failureThreshold\":300}");
	assert_string_equal(jp_str(c, "image"), "airlock/runner-python-data:0.1");
	assert_string_equal(jp_key(pod, "metadata.annotations", POOL_ANN_KEY),
	    "data/500/268435456/67108864");
	assert_null(json_object_get(c, "volumeMounts"));
	assert_null(jp_at(pod, "spec.volumes"));
	json_decref(pod);
	json_decref(pool);

	/* With a policy: its guard in the argv, as run --hold has it; no warm-up. */
	pool = parse("{\"metadata\":{\"name\":\"g\",\"namespace\":\"n\","
	    "\"uid\":\"u4\"},\"spec\":{\"runtime\":\"guarded\"}}");
	pod = holder_of(pool);
	c = jp_at(pod, "spec.containers[0]");
	assert_json(json_object_get(c, "command"), "[\"/airlock/bin/run\","
	    "\"--zygote\",\"main.py\",\"python3\",\"-I\",\"/airlock/bin/policy.py\","
	    "\"subprocess\",\"main.py\"]");
	assert_json(json_object_get(c, "env"), "["
	    "{\"name\":\"HOME\",\"value\":\"/tmp\"},"
	    "{\"name\":\"AIRLOCK_CODE_DIR\",\"value\":\"/tmp\"},"
	    "{\"name\":\"AIRLOCK_PRELOAD\",\"value\":\"json\"}]");
	assert_json(json_object_get(c, "startupProbe"), "{\"exec\":{\"command\":"
	    "[\"test\",\"-S\",\"/dev/shm/airlock-zygote.sock\"]},"
	    "\"periodSeconds\":1,\"timeoutSeconds\":5,\"failureThreshold\":300}");
	json_decref(pod);
	json_decref(pool);
}

/* Refused: NULL with K8S_EINVAL and msg in the message. */
static void
holder_refused(json_t *pool, const char *msg)
{
	struct k8s_error err;

	memset(&err, 0, sizeof(err));
	assert_null(pool_holder(cfg, pool, &err));
	assert_int_equal(err.code, K8S_EINVAL);
	if (strstr(err.message, msg) == NULL)
		fail_msg("wanted '%s' in '%s'", msg, err.message);
}

static void
test_holder_refused(void **state)
{
	json_t *pool = a_pool();

	(void)state;
	json_object_del(jp_at(pool, "metadata"), "uid");
	holder_refused(pool, "the pool lacks metadata.name, namespace or uid");
	json_decref(pool);

	pool = a_pool();
	json_object_del(jp_at(pool, "metadata"), "namespace");
	holder_refused(pool, "the pool lacks metadata.name, namespace or uid");
	json_decref(pool);

	pool = a_pool();
	json_object_set_new(jp_at(pool, "spec"), "runtime", json_string("ruby"));
	holder_refused(pool, "spec.runtime");
	json_decref(pool);

	pool = a_pool();
	json_object_set_new(jp_at(pool, "spec"), "runtime", json_string("raw"));
	holder_refused(pool, "spec.runtime: profile 'raw'");
	json_decref(pool);

	pool = a_pool();
	json_object_set_new(jp_at(pool, "spec.resources"), "memory",
	    json_string("4Gi"));
	holder_refused(pool, "spec.resources.memory");
	json_decref(pool);

	pool = a_pool();
	json_object_set_new(jp_at(pool, "spec.resources"), "cpu", json_string("8"));
	holder_refused(pool, "spec.resources.cpu");
	json_decref(pool);
}

/* --- pool_holder_idle, pool_holder_ready ----------------------------------- */

static json_t *
a_running_holder(void)
{
	return parse("{\"metadata\":{\"name\":\"airlock-warm-x\",\"labels\":"
	    "{\"airlock.dev/pool-uid\":\"p-uid\"}},\"status\":{\"phase\":"
	    "\"Running\",\"containerStatuses\":[{\"name\":\"run\",\"ready\":true,"
	    "\"state\":{\"running\":{\"startedAt\":\"2026-11-25T00:00:00Z\"}}}]}}");
}

static void
test_idle_ready(void **state)
{
	json_t *p = a_running_holder();

	(void)state;
	assert_int_equal(pool_holder_idle(p), 1);
	assert_int_equal(pool_holder_ready(p), 1);
	json_decref(p);

	/* Just made: idle, not ready. */
	p = parse("{\"metadata\":{\"labels\":{\"airlock.dev/pool-uid\":\"u\"}},"
	    "\"status\":{\"phase\":\"Pending\"}}");
	assert_int_equal(pool_holder_idle(p), 1);
	assert_int_equal(pool_holder_ready(p), 0);
	json_decref(p);
	p = parse("{\"metadata\":{\"labels\":{\"airlock.dev/pool-uid\":\"u\"}}}");
	assert_int_equal(pool_holder_idle(p), 1);
	assert_int_equal(pool_holder_ready(p), 0);
	json_decref(p);

	/* Pending, its container somehow reported running: still not ready. */
	p = a_running_holder();
	json_object_set_new(jp_at(p, "status"), "phase", json_string("Pending"));
	assert_int_equal(pool_holder_idle(p), 1);
	assert_int_equal(pool_holder_ready(p), 0);
	json_decref(p);

	/* Running, its container waiting. */
	p = a_running_holder();
	json_object_set_new(jp_at(p, "status.containerStatuses[0]"), "state",
	    parse("{\"waiting\":{\"reason\":\"ContainerCreating\"}}"));
	assert_int_equal(pool_holder_idle(p), 1);
	assert_int_equal(pool_holder_ready(p), 0);
	json_decref(p);

	/* Its warm-up not over: running, the startup probe not passed. */
	p = a_running_holder();
	json_object_set_new(jp_at(p, "status.containerStatuses[0]"), "ready",
	    json_false());
	assert_int_equal(pool_holder_idle(p), 1);
	assert_int_equal(pool_holder_ready(p), 0);
	json_decref(p);

	/* Being deleted: neither. */
	p = a_running_holder();
	json_object_set_new(jp_at(p, "metadata"), "deletionTimestamp",
	    json_string("2026-11-25T00:00:00Z"));
	assert_int_equal(pool_holder_idle(p), 0);
	assert_int_equal(pool_holder_ready(p), 0);
	json_decref(p);

	/* Claimed, by its label or its name annotation: neither. */
	p = a_running_holder();
	json_object_set_new(jp_at(p, "metadata.labels"), CX_LABEL_UID,
	    json_string("x-uid"));
	assert_int_equal(pool_holder_idle(p), 0);
	assert_int_equal(pool_holder_ready(p), 0);
	json_decref(p);
	p = a_running_holder();
	json_object_set_new(jp_at(p, "metadata"), "annotations",
	    parse("{\"" CX_ANN_NAME "\":\"hello\"}"));
	assert_int_equal(pool_holder_idle(p), 0);
	assert_int_equal(pool_holder_ready(p), 0);
	json_decref(p);

	/* Not a pool's: neither. */
	p = a_running_holder();
	json_object_del(jp_at(p, "metadata.labels"), POOL_LABEL_UID);
	assert_int_equal(pool_holder_idle(p), 0);
	assert_int_equal(pool_holder_ready(p), 0);
	json_decref(p);
	assert_int_equal(pool_holder_idle(NULL), 0);
	assert_int_equal(pool_holder_ready(NULL), 0);
}

/* --- pool_holder_preload_failed, pool_fail_backoff ------------------------ */

/* A holder whose container ended with message m in state st. */
static json_t *
ended_holder(const char *st, const char *m)
{
	json_t *p = a_running_holder();

	json_object_set_new(jp_at(p, "status"), "phase", json_string("Failed"));
	json_object_set_new(jp_at(p, "status.containerStatuses[0]"), "ready",
	    json_false());
	json_object_set_new(jp_at(p, "status.containerStatuses[0]"), "state",
	    parse("{\"waiting\":{\"reason\":\"CrashLoopBackOff\"}}"));
	json_object_set_new(jp_at(p, "status.containerStatuses[0]"), st,
	    json_pack("{s:{s:i, s:s, s:s}}", "terminated", "exitCode", 3,
	    "reason", "Error", "message", m));
	return p;
}

static void
test_preload_failed(void **state)
{
	char msg[POOL_PRELOAD_MSG_MAX + 64], *big;
	json_t *p;

	(void)state;
	/* Terminated now: the message, its newline cut; never ready. */
	p = ended_holder("state", "airlock: preload: nosuchmod: "
	    "ModuleNotFoundError: No module named 'nosuchmod'\n");
	assert_int_equal(pool_holder_preload_failed(p, msg, sizeof(msg)), 1);
	assert_string_equal(msg, "airlock: preload: nosuchmod: "
	    "ModuleNotFoundError: No module named 'nosuchmod'");
	assert_int_equal(pool_holder_ready(p), 0);
	assert_int_equal(pool_holder_dead(p), 1);
	/* Phase still Running, its container ended: not ready either. */
	json_object_set_new(jp_at(p, "status"), "phase", json_string("Running"));
	assert_int_equal(pool_holder_ready(p), 0);
	assert_int_equal(pool_holder_preload_failed(p, NULL, 0), 1);
	json_decref(p);

	/* Restarting: the last end's message. */
	p = ended_holder("lastState", "airlock: preload: numpy: ImportError: "
	    "x\ty\r\nz\x01\xc3\xa9");
	assert_int_equal(pool_holder_preload_failed(p, msg, sizeof(msg)), 1);
	assert_string_equal(msg, "airlock: preload: numpy: ImportError: "
	    "x y  z???");
	json_decref(p);

	/* Cut at 1 KiB, and at the caller's size. */
	big = calloc(1, 4000);
	strcpy(big, "airlock: preload: m: E: ");
	memset(big + strlen(big), 'x', 3000);
	p = ended_holder("state", big);
	assert_int_equal(pool_holder_preload_failed(p, msg, sizeof(msg)), 1);
	assert_int_equal(strlen(msg), 1024);
	assert_memory_equal(msg, big, 1024);
	assert_int_equal(pool_holder_preload_failed(p, msg, 10), 1);
	assert_string_equal(msg, "airlock: ");
	json_decref(p);
	free(big);

	/* Another end, none, or a message that only mentions it: 0. */
	p = ended_holder("state", "OOMKilled");
	assert_int_equal(pool_holder_preload_failed(p, msg, sizeof(msg)), 0);
	json_decref(p);
	p = ended_holder("state", "x airlock: preload: m: E: y");
	assert_int_equal(pool_holder_preload_failed(p, msg, sizeof(msg)), 0);
	json_decref(p);
	p = a_running_holder();
	assert_int_equal(pool_holder_preload_failed(p, msg, sizeof(msg)), 0);
	json_decref(p);
	assert_int_equal(pool_holder_preload_failed(NULL, msg, sizeof(msg)), 0);
}

static void
test_fail_backoff(void **state)
{
	(void)state;
	/* None, or one (an eviction): made again at once. */
	assert_int_equal(pool_fail_backoff(0, 1000, 1000), 0);
	assert_int_equal(pool_fail_backoff(1, 1000, 1000), 0);
	/* Then 2 s, doubling, counted from the last end. */
	assert_int_equal(pool_fail_backoff(2, 1000, 1000), 2000);
	assert_int_equal(pool_fail_backoff(2, 1000, 2500), 500);
	assert_int_equal(pool_fail_backoff(2, 1000, 3000), 0);
	assert_int_equal(pool_fail_backoff(3, 1000, 1000), 4000);
	assert_int_equal(pool_fail_backoff(4, 1000, 1000), 8000);
	assert_int_equal(pool_fail_backoff(9, 0, 0), 256000);
	/* At most 5 min, however many. */
	assert_int_equal(pool_fail_backoff(10, 0, 0), 300000);
	assert_int_equal(pool_fail_backoff(1000000, 0, 0), 300000);
	assert_int_equal(pool_fail_backoff(1000000, 0, 300000), 0);
}

/* --- pool_cx_warmable ------------------------------------------------------ */

static void
test_cx_warmable(void **state)
{
	json_t *cx = parse("{\"metadata\":{\"name\":\"a\"},\"spec\":"
	    "{\"runtime\":\"python\",\"source\":\"print(1)\"}}");

	(void)state;
	assert_int_equal(pool_cx_warmable(cx), 1);
	json_object_set_new(jp_at(cx, "spec"), "image", json_string("my/image:1"));
	assert_int_equal(pool_cx_warmable(cx), 0);
	json_object_del(jp_at(cx, "spec"), "image");
	json_object_set_new(jp_at(cx, "spec"), "session", json_string("s"));
	assert_int_equal(pool_cx_warmable(cx), 0);
	json_decref(cx);
}

/* --- pool_claim_patch ------------------------------------------------------ */

static json_t *
an_execution(void)
{
	return parse("{\"apiVersion\":\"airlock.dev/v1alpha1\","
	    "\"kind\":\"CodeExecution\",\"metadata\":{\"name\":\"hello\","
	    "\"namespace\":\"team-a\",\"uid\":\"x-uid\"},\"spec\":{"
	    "\"runtime\":\"python\",\"source\":\"print(1)\\n\","
	    "\"files\":[{\"path\":\"d/a.txt\",\"content\":\"A\\u00e9\"}],"
	    "\"stdin\":\"in\\n\",\"args\":[\"one\",\"two words\"],"
	    "\"env\":[{\"name\":\"K\",\"value\":\"V\"},{\"name\":\"E\"}],"
	    "\"timeoutSeconds\":7,\"output\":{\"maxBytes\":100}}}");
}

/* A ready holder that started 10 s before NOW_S. */
static json_t *
a_holder(void)
{
	return parse("{\"metadata\":{\"name\":\"airlock-warm-abcde\","
	    "\"namespace\":\"team-a\",\"uid\":\"h-uid\",\"resourceVersion\":\"42\","
	    "\"labels\":{\"airlock.dev/pool-uid\":\"p-uid\"}},"
	    "\"status\":{\"phase\":\"Running\","
	    "\"startTime\":\"2026-11-25T00:00:00Z\"}}");
}

static json_t *
claim(json_t *cx, json_t *holder, long long now_s, size_t stored)
{
	struct k8s_error err;
	json_t *p;

	memset(&err, 0, sizeof(err));
	p = pool_claim_patch(cfg, cx, holder, now_s, stored, &err);
	if (p == NULL)
		fail_msg("pool_claim_patch: %s", err.message);
	return p;
}

/* Refused: NULL with code. */
static void
claim_refused(json_t *cx, json_t *holder, int code)
{
	struct k8s_error err;
	json_t *p;

	memset(&err, 0, sizeof(err));
	p = pool_claim_patch(cfg, cx, holder, NOW_S, 0, &err);
	if (p != NULL) {
		json_decref(p);
		fail_msg("a claim was made; wanted %s", k8s_strerror(code));
	}
	assert_int_equal(err.code, code);
	assert_true(err.message[0] != '\0');
}

/* The merge patch: the execution's identity and limits, at the holder's rv. */
static void
test_claim_identity(void **state)
{
	json_t *cx = an_execution(), *h = a_holder(), *p = claim(cx, h, NOW_S, 0);
	json_t *ann = jp_at(p, "metadata.annotations");
	char want[32];

	(void)state;
	/* Nothing else of the pod is touched. */
	assert_int_equal(json_object_size(p), 2);
	assert_int_equal(json_object_size(jp_at(p, "metadata")), 4);
	assert_string_equal(jp_str(p, "metadata.resourceVersion"), "42");
	assert_json(jp_at(p, "metadata.labels"),
	    "{\"airlock.dev/execution-uid\":\"x-uid\"}");
	assert_int_equal(json_object_size(ann), 9);
	/* Files out's budget, for the agent (artifacts.h). */
	assert_string_equal(jp_key(p, "metadata.annotations", "airlock.dev/out"),
	    "1048576 64");
	assert_string_equal(jp_key(p, "metadata.annotations", "airlock.dev/execution"),
	    "hello");
	assert_string_equal(jp_key(p, "metadata.annotations", "airlock.dev/timeout-ms"),
	    "7000");
	assert_string_equal(jp_key(p, "metadata.annotations",
	    "airlock.dev/output-max-bytes"), "100");
	/* The object's budget less the status reserve less the execution. */
	snprintf(want, sizeof(want), "%zu", (size_t)BUDGET - jsonsize_value(cx));
	assert_string_equal(jp_key(p, "metadata.annotations",
	    "airlock.dev/output-budget-bytes"), want);
	assert_true(strspn(want, "0123456789") == strlen(want));
	assert_true(BUDGET - jsonsize_value(cx) > 1000000);
	assert_json(jp_at(p, "metadata.ownerReferences"), "[{"
	    "\"apiVersion\":\"airlock.dev/v1alpha1\",\"kind\":\"CodeExecution\","
	    "\"name\":\"hello\",\"uid\":\"x-uid\",\"controller\":true,"
	    "\"blockOwnerDeletion\":true}]");
	/* Its age (10 s), its timeout (7 s) and the backstop's 30 s. */
	assert_json(jp_at(p, "spec"), "{\"activeDeadlineSeconds\":47}");
	json_decref(p);
	json_decref(h);
	json_decref(cx);
}

/* The output budget from the size stored, when the caller knows it. */
static void
test_claim_output_budget(void **state)
{
	json_t *cx = an_execution(), *h = a_holder(), *p;

	(void)state;
	p = claim(cx, h, NOW_S, 1000);
	assert_string_equal(jp_key(p, "metadata.annotations",
	    "airlock.dev/output-budget-bytes"), "1031192");
	json_decref(p);
	p = claim(cx, h, NOW_S, BUDGET - 1);
	assert_string_equal(jp_key(p, "metadata.annotations",
	    "airlock.dev/output-budget-bytes"), "1");
	json_decref(p);
	/* At the budget: none left, never a wrapped size_t. */
	p = claim(cx, h, NOW_S, BUDGET);
	assert_string_equal(jp_key(p, "metadata.annotations",
	    "airlock.dev/output-budget-bytes"), "0");
	json_decref(p);
	/* config.artifacts.maxFiles 0: files out off, as on the cold path. */
	cfg->artifacts_files = 0;
	p = claim(cx, h, NOW_S, 1000);
	assert_null(json_object_get(jp_at(p, "metadata.annotations"), "airlock.dev/out"));
	assert_null(strstr(jp_key(p, "metadata.annotations", "airlock.dev/warm-process"),
	    "AIRLOCK_OUT"));
	json_decref(p);
	cfg->artifacts_files = 64;
	/* Past it, refused as the cold path refuses it (Rejected). */
	{
		struct k8s_error err;

		assert_null(pool_claim_patch(cfg, cx, h, NOW_S,
		    CX_OBJECT_BUDGET * 2, &err));
		assert_int_equal(err.code, K8S_EINVAL);
		assert_non_null(strstr(err.message, "leave room for its result"));
	}
	json_decref(h);
	json_decref(cx);
}

/* A claimed holder streams as a cold pod would (airlock.dev/stream). */
static void
test_claim_stream(void **state)
{
	json_t *cx = an_execution(), *h = a_holder(), *p;

	(void)state;
	p = claim(cx, h, NOW_S, 0);
	assert_null(json_object_get(jp_at(p, "metadata.annotations"),
	    "airlock.dev/stream"));
	json_decref(p);
	json_object_set_new(json_object_get(cx, "spec"), "output",
	    json_pack("{s:b}", "stream", 1));
	p = claim(cx, h, NOW_S, 0);
	assert_string_equal(jp_key(p, "metadata.annotations", "airlock.dev/stream"),
	    "true");
	json_decref(p);
	json_decref(h);
	json_decref(cx);
}

/* The code in the cold path's annotations, the process to run as JSON. */
static void
test_claim_code(void **state)
{
	json_t *cx = an_execution(), *h = a_holder(), *p = claim(cx, h, NOW_S, 0);
	json_t *proc;

	(void)state;
	assert_string_equal(jp_key(p, "metadata.annotations", "airlock.dev/source"),
	    "print(1)\n");
	assert_string_equal(jp_key(p, "metadata.annotations", "airlock.dev/file-0"),
	    "A\xc3\xa9");
	assert_string_equal(jp_key(p, "metadata.annotations", "airlock.dev/stdin"),
	    "in\n");
	proc = parse(jp_key(p, "metadata.annotations", "airlock.dev/warm-process"));
	assert_json(proc, "{"
	    "\"argv\":[\"/airlock/bin/run\",\"python3\",\"main.py\",\"one\","
	    "\"two words\"],"
	    "\"env\":[{\"name\":\"K\",\"value\":\"V\"},{\"name\":\"E\",\"value\":\"\"},"
	    "{\"name\":\"AIRLOCK_CODE_DIR\",\"value\":\"/tmp\"},"
	    "{\"name\":\"AIRLOCK_OUT\",\"value\":\"6329566d1fd7efbc93a3ca5d4a2a0e0e 1048576 64\"}],"
	    "\"files\":[{\"path\":\"main.py\",\"key\":\"airlock.dev/source\"},"
	    "{\"path\":\"d/a.txt\",\"key\":\"airlock.dev/file-0\"}],"
	    "\"stdin\":true}");
	json_decref(proc);
	json_decref(p);
	json_decref(h);
	json_decref(cx);
}

/* Files only, no stdin, args or env: an empty program file, stdin false. */
static void
test_claim_no_source(void **state)
{
	json_t *cx = parse("{\"metadata\":{\"name\":\"f\",\"namespace\":\"team-a\","
	    "\"uid\":\"f-uid\"},\"spec\":{\"runtime\":\"python\",\"files\":"
	    "[{\"path\":\"a.py\",\"content\":\"x\"},{\"path\":\"b/c.py\","
	    "\"content\":\"\"}]}}");
	json_t *h = a_holder(), *p = claim(cx, h, NOW_S, 0), *proc;

	(void)state;
	assert_string_equal(jp_key(p, "metadata.annotations", "airlock.dev/source"), "");
	assert_string_equal(jp_key(p, "metadata.annotations", "airlock.dev/file-0"), "x");
	assert_string_equal(jp_key(p, "metadata.annotations", "airlock.dev/file-1"), "");
	assert_null(json_object_get(jp_at(p, "metadata.annotations"),
	    "airlock.dev/stdin"));
	/* The defaults: 30 s, 64 KiB. */
	assert_string_equal(jp_key(p, "metadata.annotations", "airlock.dev/timeout-ms"),
	    "30000");
	assert_string_equal(jp_key(p, "metadata.annotations",
	    "airlock.dev/output-max-bytes"), "65536");
	proc = parse(jp_key(p, "metadata.annotations", "airlock.dev/warm-process"));
	assert_json(proc, "{"
	    "\"argv\":[\"/airlock/bin/run\",\"python3\",\"main.py\"],"
	    "\"env\":[{\"name\":\"AIRLOCK_CODE_DIR\",\"value\":\"/tmp\"},"
	    "{\"name\":\"AIRLOCK_OUT\",\"value\":\"5250ab097318445716815d6b79a08260 1048576 64\"}],"
	    "\"files\":[{\"path\":\"main.py\",\"key\":\"airlock.dev/source\"},"
	    "{\"path\":\"a.py\",\"key\":\"airlock.dev/file-0\"},"
	    "{\"path\":\"b/c.py\",\"key\":\"airlock.dev/file-1\"}],"
	    "\"stdin\":false}");
	assert_json(jp_at(p, "spec"), "{\"activeDeadlineSeconds\":70}");
	json_decref(proc);
	json_decref(p);
	json_decref(h);
	json_decref(cx);
}

/* activeDeadlineSeconds counts from the pod's start: its age is added. */
static void
test_claim_deadline(void **state)
{
	json_t *cx = an_execution(), *h = a_holder(), *p;

	(void)state;
	p = claim(cx, h, NOW_S + 90, 0);
	assert_int_equal(jp_num(p, "spec.activeDeadlineSeconds"), 100 + 7 + 30);
	json_decref(p);
	/* A clock behind the start: no age, never less. */
	p = claim(cx, h, NOW_S - 20, 0);
	assert_int_equal(jp_num(p, "spec.activeDeadlineSeconds"), 7 + 30);
	json_decref(p);
	/* No start time (yet), or none that parses: no age. */
	json_object_set_new(jp_at(h, "status"), "startTime", json_string("soon"));
	p = claim(cx, h, NOW_S, 0);
	assert_int_equal(jp_num(p, "spec.activeDeadlineSeconds"), 7 + 30);
	json_decref(p);
	json_object_del(h, "status");
	p = claim(cx, h, NOW_S, 0);
	assert_int_equal(jp_num(p, "spec.activeDeadlineSeconds"), 7 + 30);
	/* No resourceVersion read: the patch carries none, not null. */
	json_decref(p);
	json_object_del(jp_at(h, "metadata"), "resourceVersion");
	p = claim(cx, h, NOW_S, 0);
	assert_null(jp_at(p, "metadata.resourceVersion"));
	assert_int_equal(json_object_size(jp_at(p, "metadata")), 3);
	json_decref(p);
	json_decref(h);
	json_decref(cx);
}

static void
test_claim_refused(void **state)
{
	json_t *cx = an_execution(), *h = a_holder();
	char *big;

	(void)state;
	/* A custom image: never warm. */
	json_object_set_new(jp_at(cx, "spec"), "image", json_string("my/image:1"));
	claim_refused(cx, h, K8S_EINVAL);
	json_object_del(jp_at(cx, "spec"), "image");
	json_object_set_new(jp_at(cx, "spec"), "runtime", json_string("ruby"));
	claim_refused(cx, h, K8S_EINVAL);
	json_object_set_new(jp_at(cx, "spec"), "runtime", json_string("python"));
	/* The code's env names are Airlock's, warm as cold (podspec.h). */
	json_object_set_new(jp_at(cx, "spec"), "env", json_pack("[{s:s, s:s}]",
	    "name", "AIRLOCK_TAR_0", "value", "x"));
	claim_refused(cx, h, K8S_EINVAL);
	json_object_del(jp_at(cx, "spec"), "env");
	json_object_del(jp_at(cx, "metadata"), "uid");
	claim_refused(cx, h, K8S_EINVAL);
	json_decref(cx);

	/* Code past the annotation budget runs cold. */
	cx = an_execution();
	big = malloc(PODSPEC_ANNOTATION_BUDGET + 2);
	assert_non_null(big);
	memset(big, 'x', PODSPEC_ANNOTATION_BUDGET + 1);
	big[PODSPEC_ANNOTATION_BUDGET + 1] = '\0';
	json_object_set_new(jp_at(cx, "spec"), "source", json_string(big));
	claim_refused(cx, h, K8S_ETOOBIG);
	json_decref(cx);
	/* Half in the source, half in stdin: the sum counts. */
	cx = an_execution();
	big[PODSPEC_ANNOTATION_BUDGET / 2 + 1] = '\0';
	json_object_set_new(jp_at(cx, "spec"), "source", json_string(big));
	json_object_set_new(jp_at(cx, "spec"), "stdin", json_string(big));
	claim_refused(cx, h, K8S_ETOOBIG);
	json_decref(cx);
	free(big);
	/* Args count too: 64 of 4 KiB. */
	cx = an_execution();
	{
		json_t *args = json_array();
		char arg[4097];

		memset(arg, 'a', 4096);
		arg[4096] = '\0';
		for (int i = 0; i < 64; i++)
			json_array_append_new(args, json_string(arg));
		json_object_set_new(jp_at(cx, "spec"), "args", args);
	}
	claim_refused(cx, h, K8S_ETOOBIG);
	json_decref(cx);
	json_decref(h);
}

/*
 * A file at the profile's source file: podspec_build refuses it
 * (Rejected), and the claim must too, or an execution the cold path
 * rejects would run warm with main.py twice in its archive (and
 * /airlock/bin/warm would die on the second, O_EXCL). Found by this test.
 */
static void
test_claim_file_clash(void **state)
{
	json_t *cx = an_execution(), *h = a_holder(), *p;
	struct podspec_result r;
	struct k8s_error err, cerr;
	int cold;

	(void)state;
	json_object_set_new(jp_at(cx, "spec"), "files",
	    parse("[{\"path\":\"main.py\",\"content\":\"x\"}]"));
	memset(&err, 0, sizeof(err));
	memset(&cerr, 0, sizeof(cerr));
	cold = podspec_build(cfg, cx, &r, &err);
	podspec_result_free(&r);
	p = pool_claim_patch(cfg, cx, h, NOW_S, 0, &cerr);
	/* Freed first: a failure here must not leak under valgrind. */
	json_decref(p);
	json_decref(h);
	json_decref(cx);
	/* The cold path refuses it. */
	assert_int_equal(cold, K8S_EINVAL);
	assert_non_null(strstr(err.message, "spec.files[0].path: 'main.py' "
	    "clashes with the program's file"));
	/* So must the claim. */
	if (p != NULL)
		fail_msg("a claim was made for files[0].path 'main.py'; "
		    "wanted NULL with K8S_EINVAL");
	assert_int_equal(cerr.code, K8S_EINVAL);
}

/* --- pool_process_read ----------------------------------------------------- */

/* A pod holding the annotations of patch (borrowed), as the agent sees it. */
static json_t *
claimed_pod(json_t *patch)
{
	return json_pack("{s:{s:s, s:O}}", "metadata", "name",
	    "airlock-warm-abcde", "annotations", jp_at(patch,
	    "metadata.annotations"));
}

/* What the agent reads back is what the controller wrote. */
static void
test_process_round_trip(void **state)
{
	json_t *cx = an_execution(), *h = a_holder(), *p = claim(cx, h, NOW_S, 0);
	json_t *pod = claimed_pod(p);
	struct pool_process pp;

	(void)state;
	assert_int_equal(pool_process_read(pod, &pp), 0);
	assert_non_null(pp.proc);
	assert_json(pp.argv, "[\"/airlock/bin/run\",\"python3\",\"main.py\","
	    "\"one\",\"two words\"]");
	assert_json(pp.env, "[{\"name\":\"K\",\"value\":\"V\"},"
	    "{\"name\":\"E\",\"value\":\"\"},"
	    "{\"name\":\"AIRLOCK_CODE_DIR\",\"value\":\"/tmp\"},"
	    "{\"name\":\"AIRLOCK_OUT\",\"value\":\"6329566d1fd7efbc93a3ca5d4a2a0e0e 1048576 64\"}]");
	assert_int_equal(pp.nfiles, 2);
	assert_string_equal(pp.files[0].path, "main.py");
	assert_int_equal(pp.files[0].len, 9);
	assert_memory_equal(pp.files[0].data, "print(1)\n", 9);
	assert_string_equal(pp.files[1].path, "d/a.txt");
	assert_int_equal(pp.files[1].len, 3);	/* bytes, not characters */
	assert_memory_equal(pp.files[1].data, "A\xc3\xa9", 3);
	assert_non_null(pp.stdin_data);
	assert_int_equal(pp.stdin_len, 3);
	assert_memory_equal(pp.stdin_data, "in\n", 3);
	pool_process_free(&pp);
	assert_null(pp.proc);
	/* Twice is safe. */
	pool_process_free(&pp);
	json_decref(pod);
	json_decref(p);
	json_decref(h);
	json_decref(cx);
}

/* No stdin: NULL, and an empty program file still read. */
static void
test_process_no_stdin(void **state)
{
	json_t *cx = an_execution(), *h = a_holder(), *p, *pod;
	struct pool_process pp;

	(void)state;
	json_object_del(jp_at(cx, "spec"), "stdin");
	json_object_del(jp_at(cx, "spec"), "source");
	p = claim(cx, h, NOW_S, 0);
	pod = claimed_pod(p);
	assert_int_equal(pool_process_read(pod, &pp), 0);
	assert_null(pp.stdin_data);
	assert_int_equal(pp.stdin_len, 0);
	assert_int_equal(pp.nfiles, 2);
	assert_string_equal(pp.files[0].path, "main.py");
	assert_int_equal(pp.files[0].len, 0);
	assert_string_equal(pp.files[0].data, "");
	pool_process_free(&pp);
	json_decref(pod);
	json_decref(p);
	json_decref(h);
	json_decref(cx);
}

/*
 * A pod whose annotations are ann (JSON text) and, unless proc is NULL,
 * POOL_ANN_PROCESS = proc.
 */
static json_t *
pod_with(const char *proc, const char *ann)
{
	json_t *a = parse(ann ? ann : "{}");

	if (proc)
		json_object_set_new(a, POOL_ANN_PROCESS, json_string(proc));
	return json_pack("{s:{s:o}}", "metadata", "annotations", a);
}

/* pool_process_read of pod refused: -1, and out safe to free. */
static void
read_refused(json_t *pod, const char *what)
{
	struct pool_process pp;
	int rc;

	memset(&pp, 0xa5, sizeof(pp));
	rc = pool_process_read(pod, &pp);
	pool_process_free(&pp);
	assert_null(pp.proc);
	json_decref(pod);
	if (rc != -1)
		fail_msg("%s: read returned %d, wanted -1", what, rc);
}

#define SRC	"{\"airlock.dev/source\":\"print(1)\"}"
#define FILES	"\"files\":[{\"path\":\"main.py\",\"key\":\"airlock.dev/source\"}]"

static void
test_process_malformed(void **state)
{
	(void)state;
	/* The well-formed base the cases below break one thing of. */
	{
		struct pool_process pp;
		json_t *pod = pod_with("{\"argv\":[\"a\"],\"env\":[]," FILES
		    ",\"stdin\":false}", SRC);

		assert_int_equal(pool_process_read(pod, &pp), 0);
		assert_int_equal(pp.nfiles, 1);
		assert_int_equal(pp.files[0].len, 8);
		pool_process_free(&pp);
		json_decref(pod);
	}
	read_refused(json_pack("{}"), "no metadata");
	read_refused(pod_with(NULL, SRC), "no annotation");
	read_refused(json_pack("{s:{s:{s:i}}}", "metadata", "annotations",
	    POOL_ANN_PROCESS, 1), "annotation not a string");
	read_refused(pod_with("{not json", SRC), "not JSON");
	read_refused(pod_with("", SRC), "empty");
	read_refused(pod_with("[1]", SRC), "an array");
	read_refused(pod_with("{\"env\":[]," FILES "}", SRC), "no argv");
	read_refused(pod_with("{\"argv\":[],\"env\":[]," FILES "}", SRC),
	    "argv empty");
	read_refused(pod_with("{\"argv\":\"a\",\"env\":[]," FILES "}", SRC),
	    "argv a string");
	read_refused(pod_with("{\"argv\":[\"a\",2],\"env\":[]," FILES "}", SRC),
	    "argv holds a number");
	read_refused(pod_with("{\"argv\":[\"a\"]," FILES "}", SRC), "no env");
	read_refused(pod_with("{\"argv\":[\"a\"],\"env\":{}," FILES "}", SRC),
	    "env an object");
	read_refused(pod_with("{\"argv\":[\"a\"],\"env\":[{\"name\":\"K\","
	    "\"value\":1}]," FILES "}", SRC), "env value not a string");
	read_refused(pod_with("{\"argv\":[\"a\"],\"env\":[{\"name\":\"K\"}],"
	    FILES "}", SRC), "env value missing");
	read_refused(pod_with("{\"argv\":[\"a\"],\"env\":[{\"value\":\"v\"}],"
	    FILES "}", SRC), "env name missing");
	read_refused(pod_with("{\"argv\":[\"a\"],\"env\":[\"K=V\"]," FILES "}",
	    SRC), "env entry a string");
	read_refused(pod_with("{\"argv\":[\"a\"],\"env\":[]}", SRC), "no files");
	read_refused(pod_with("{\"argv\":[\"a\"],\"env\":[],\"files\":[]}", SRC),
	    "files empty");
	read_refused(pod_with("{\"argv\":[\"a\"],\"env\":[],\"files\":[{\"path\":"
	    "\"x\",\"key\":\"airlock.dev/file-0\"}]}", SRC),
	    "a file's annotation missing");
	read_refused(pod_with("{\"argv\":[\"a\"],\"env\":[],\"files\":[{\"path\":"
	    "\"main.py\",\"key\":\"airlock.dev/source\"},{\"path\":\"x\","
	    "\"key\":\"airlock.dev/file-0\"}]}", SRC),
	    "the second file's annotation missing");
	read_refused(pod_with("{\"argv\":[\"a\"],\"env\":[],\"files\":[{\"key\":"
	    "\"airlock.dev/source\"}]}", SRC), "a file without a path");
	read_refused(pod_with("{\"argv\":[\"a\"],\"env\":[],\"files\":[{\"path\":"
	    "\"main.py\"}]}", SRC), "a file without a key");
	read_refused(pod_with("{\"argv\":[\"a\"],\"env\":[],\"files\":[{\"path\":"
	    "\"main.py\",\"key\":\"airlock.dev/n\"}]}", "{\"airlock.dev/n\":5}"),
	    "a file's annotation not a string");
	read_refused(pod_with("{\"argv\":[\"a\"],\"env\":[]," FILES
	    ",\"stdin\":true}", SRC), "stdin without its annotation");
	read_refused(pod_with("{\"argv\":[\"a\"],\"env\":[]," FILES
	    ",\"stdin\":true}", "{\"airlock.dev/source\":\"p\","
	    "\"airlock.dev/stdin\":[]}"), "stdin not a string");
	read_refused(NULL, "no pod");
}

/* A process whose files are n entries, each the program. */
static json_t *
pod_with_files(size_t n)
{
	json_t *files = json_array(), *proc, *pod;
	char *s;

	for (size_t i = 0; i < n; i++)
		json_array_append_new(files, json_pack("{s:s, s:s}", "path",
		    "main.py", "key", "airlock.dev/source"));
	proc = json_pack("{s:[s], s:[], s:o, s:b}", "argv", "a", "env", "files",
	    files, "stdin", 0);
	s = json_dumps(proc, JSON_COMPACT);
	pod = pod_with(s, SRC);
	free(s);
	json_decref(proc);
	return pod;
}

/* As many files as the struct holds, and one more: refused, not overrun. */
static void
test_process_too_many_files(void **state)
{
	struct pool_process pp;
	json_t *pod = pod_with_files(66);

	(void)state;
	assert_int_equal(sizeof(pp.files) / sizeof(pp.files[0]), 66);
	assert_int_equal(pool_process_read(pod, &pp), 0);
	assert_int_equal(pp.nfiles, 66);
	assert_string_equal(pp.files[65].path, "main.py");
	assert_int_equal(pp.files[65].len, 8);
	pool_process_free(&pp);
	json_decref(pod);
	read_refused(pod_with_files(67), "67 files");
	read_refused(pod_with_files(200), "200 files");
}

/* The claim of the most files the CRD allows (64) reads back whole. */
static void
test_process_max_files(void **state)
{
	json_t *cx = an_execution(), *h = a_holder(), *files = json_array(), *p;
	json_t *pod;
	struct pool_process pp;
	char path[32], content[32];

	(void)state;
	for (int i = 0; i < 64; i++) {
		snprintf(path, sizeof(path), "f/%d.txt", i);
		snprintf(content, sizeof(content), "content %d", i);
		json_array_append_new(files, json_pack("{s:s, s:s}", "path", path,
		    "content", content));
	}
	json_object_set_new(jp_at(cx, "spec"), "files", files);
	p = claim(cx, h, NOW_S, 0);
	pod = claimed_pod(p);
	assert_int_equal(pool_process_read(pod, &pp), 0);
	assert_int_equal(pp.nfiles, 65);
	assert_string_equal(pp.files[0].path, "main.py");
	assert_string_equal(pp.files[64].path, "f/63.txt");
	assert_int_equal(pp.files[64].len, 10);
	assert_memory_equal(pp.files[64].data, "content 63", 10);
	assert_string_equal(pp.files[1].data, "content 0");
	pool_process_free(&pp);
	json_decref(pod);
	json_decref(p);
	json_decref(h);
	json_decref(cx);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_config_defaults),
		cmocka_unit_test(test_key_defaults),
		cmocka_unit_test(test_key_explicit),
		cmocka_unit_test(test_key_equal_quantities),
		cmocka_unit_test(test_key_refused),
		cmocka_unit_test(test_key_no_runner),
		cmocka_unit_test(test_holder_metadata),
		cmocka_unit_test(test_holder_egress),
		cmocka_unit_test(test_holder_spec),
		cmocka_unit_test(test_holder_other_profile),
		cmocka_unit_test(test_holder_preload),
		cmocka_unit_test(test_preload_failed),
		cmocka_unit_test(test_fail_backoff),
		cmocka_unit_test(test_holder_refused),
		cmocka_unit_test(test_idle_ready),
		cmocka_unit_test(test_cx_warmable),
		cmocka_unit_test(test_claim_identity),
		cmocka_unit_test(test_claim_output_budget),
		cmocka_unit_test(test_claim_code),
		cmocka_unit_test(test_claim_no_source),
		cmocka_unit_test(test_claim_deadline),
		cmocka_unit_test(test_claim_refused),
		cmocka_unit_test(test_claim_file_clash),
		cmocka_unit_test(test_process_round_trip),
		cmocka_unit_test(test_process_no_stdin),
		cmocka_unit_test(test_process_malformed),
		cmocka_unit_test(test_process_too_many_files),
		cmocka_unit_test(test_process_max_files),
		cmocka_unit_test(test_claim_stream),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
