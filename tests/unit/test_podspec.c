/* Unit tests: execution/podspec.c, every field of what the controller creates. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "jpath.h"

#include "base64.h"
#include "buf.h"
#include "codetar.h"
#include "ctl_config.h"
#include "artifacts.h"
#include "jsonsize.h"
#include "podspec.h"
#include "egress_token.h"
#include "pool.h"
#include "xmalloc.h"

static const char conf[] =
    "runtimeClassName: gvisor\n"
    "runAsUser: 65532\n"
    "tmpSizeLimit: 64Mi\n"
    "profiles:\n"
    "  python:\n"
    "    image: airlock/runner-python:0.1\n"
    "    command: [python3, /airlock/code/main.py]\n"
    "    sourceFile: main.py\n"
    "defaults: {cpu: 500m, memory: 256Mi, ephemeralStorage: 64Mi}\n"
    "caps: {cpu: \"2\", memory: 2Gi, ephemeralStorage: 1Gi}\n"
    "quota: {executions: 20, cpu: \"8\", memory: 8Gi}\n";

static struct ctl_config *
config_of(const char *text)
{
	struct ctl_config *c;
	struct k8s_error err;

	if (ctl_config_parse(text, strlen(text), "test", &c, &err) != 0)
		fail_msg("config: %s", err.message);
	return c;
}

static struct ctl_config *
config(void)
{
	return config_of(conf);
}

static json_t *
cx(const char *spec)
{
	json_t *s = json_loads(spec, 0, NULL), *o;

	assert_non_null(s);
	o = json_pack("{s:s, s:s, s:{s:s, s:s, s:s}, s:o}", "apiVersion",
	    "airlock.dev/v1alpha1", "kind", "CodeExecution", "metadata", "name", "hello",
	    "namespace", "team-a", "uid", "0b9c4b1e-1111-2222-3333-444455556666", "spec", s);
	return o;
}


#define UID "0b9c4b1e-1111-2222-3333-444455556666"
/* Its gate ports (podspec_gate_ports): 8200 + the first three 16-bit words of its SHA-256, mod 128. */
#define GATE_P	8263
#define GATE_Q	8295
#define GATE_M	8284
#define GATE_PS	"8263"
#define GATE_QS	"8295"
#define GATE_MS	"8284"
#define GATE_PQ	GATE_PS "," GATE_QS
/* The gate's words before its addresses: P,Q M CLOSED SECONDS. */
#define GATE_ARGS	GATE_PQ " " GATE_MS " 8182 30"

static void
test_pod_hardening(void **state)
{
	struct ctl_config *c = config();
	json_t *o = cx("{\"runtime\":\"python\",\"source\":\"print(1)\",\"timeoutSeconds\":30,"
	    "\"args\":[\"-x\"],\"env\":[{\"name\":\"A\",\"value\":\"1\"},{\"name\":\"B\","
	    "\"valueFrom\":{\"secretKeyRef\":{\"name\":\"s\",\"key\":\"k\"}}}],"
	    "\"files\":[{\"path\":\"lib/util.py\",\"content\":\"X=1\"}],\"stdin\":\"in\"}");
	struct podspec_result r;
	struct k8s_error err;
	json_t *p, *ctr;

	(void)state;
	assert_int_equal(podspec_build(c, o, &r, &err), 0);
	p = r.pod;
	assert_null(r.configmap);
	assert_string_equal(r.code_sha256, "d287bb7f9d15abdc5b6e98536263815744b6ef21c8f3c839fc434ca70d8efe99");

	/* identity, labels, ownership */
	assert_string_equal(jp_str(p, "kind"), "Pod");
	assert_string_equal(jp_str(p, "metadata.name"), "airlock-" UID);
	assert_string_equal(jp_str(p, "metadata.namespace"), "team-a");
	assert_string_equal(jp_key(p, "metadata.labels", "app.kubernetes.io/managed-by"), "airlock-controller");
	assert_string_equal(jp_key(p, "metadata.labels", "app.kubernetes.io/component"), "execution");
	assert_string_equal(jp_key(p, "metadata.labels", "airlock.dev/execution-uid"), UID);
	assert_string_equal(jp_key(p, "metadata.annotations", "airlock.dev/execution"), "hello");
	/* What the node agent enforces: 30 s, and output.maxBytes' default. */
	assert_string_equal(jp_key(p, "metadata.annotations", "airlock.dev/timeout-ms"), "30000");
	assert_string_equal(jp_key(p, "metadata.annotations", "airlock.dev/output-max-bytes"), "65536");
	assert_string_equal(jp_str(p, "metadata.ownerReferences[0].kind"), "CodeExecution");
	assert_string_equal(jp_str(p, "metadata.ownerReferences[0].apiVersion"), "airlock.dev/v1alpha1");
	assert_string_equal(jp_str(p, "metadata.ownerReferences[0].name"), "hello");
	assert_string_equal(jp_str(p, "metadata.ownerReferences[0].uid"), UID);
	assert_true(jp_bool(p, "metadata.ownerReferences[0].controller"));
	assert_true(jp_bool(p, "metadata.ownerReferences[0].blockOwnerDeletion"));

	/* isolation and lifecycle */
	assert_string_equal(jp_str(p, "spec.serviceAccountName"), "airlock-execution");
	assert_string_equal(jp_str(p, "spec.runtimeClassName"), "gvisor");
	assert_string_equal(jp_str(p, "spec.priorityClassName"), "airlock-execution");
	assert_string_equal(jp_str(p, "spec.restartPolicy"), "Never");
	assert_int_equal(jp_num(p, "spec.activeDeadlineSeconds"), 60);
	assert_false(jp_bool(p, "spec.automountServiceAccountToken"));
	assert_false(jp_bool(p, "spec.enableServiceLinks"));
	assert_false(jp_bool(p, "spec.hostNetwork"));
	assert_false(jp_bool(p, "spec.hostPID"));
	assert_false(jp_bool(p, "spec.hostIPC"));
	assert_string_equal(jp_str(p, "spec.dnsPolicy"), "None");
	assert_string_equal(jp_str(p, "spec.dnsConfig.nameservers[0]"), "127.0.0.1");
	assert_true(jp_bool(p, "spec.securityContext.runAsNonRoot"));
	assert_int_equal(jp_num(p, "spec.securityContext.runAsUser"), 65532);
	assert_int_equal(jp_num(p, "spec.securityContext.runAsGroup"), 65532);
	assert_string_equal(jp_str(p, "spec.securityContext.seccompProfile.type"), "RuntimeDefault");

	/* the one container */
	assert_int_equal(json_array_size(jp_at(p, "spec.containers")), 1);
	ctr = jp_at(p, "spec.containers[0]");
	assert_string_equal(jp_str(ctr, "image"), "airlock/runner-python:0.1");
	assert_string_equal(jp_str(ctr, "command[0]"), "python3");
	assert_string_equal(jp_str(ctr, "command[1]"), "/airlock/code/main.py");
	assert_string_equal(jp_str(ctr, "args[0]"), "-x");
	assert_string_equal(jp_str(ctr, "workingDir"), "/airlock/work");
	assert_false(jp_bool(ctr, "securityContext.allowPrivilegeEscalation"));
	assert_true(jp_bool(ctr, "securityContext.readOnlyRootFilesystem"));
	assert_true(jp_bool(ctr, "securityContext.runAsNonRoot"));
	assert_string_equal(jp_str(ctr, "securityContext.capabilities.drop[0]"), "ALL");
	assert_int_equal(json_array_size(jp_at(ctr, "securityContext.capabilities.drop")), 1);
	assert_null(jp_at(ctr, "securityContext.capabilities.add"));
	assert_string_equal(jp_str(ctr, "securityContext.seccompProfile.type"), "RuntimeDefault");
	/* requests = limits, from the config's defaults */
	assert_string_equal(jp_str(ctr, "resources.requests.cpu"), "500m");
	assert_string_equal(jp_str(ctr, "resources.limits.cpu"), "500m");
	assert_string_equal(jp_str(ctr, "resources.requests.memory"), "256Mi");
	assert_string_equal(jp_str(ctr, "resources.limits.memory"), "256Mi");
	assert_string_equal(jp_str(ctr, "resources.limits.ephemeral-storage"), "64Mi");
	/* env: name/value only (valueFrom dropped), plus the code dir */
	assert_int_equal(json_array_size(jp_at(ctr, "env")), 3);
	assert_string_equal(jp_str(ctr, "env[0].name"), "A");
	assert_string_equal(jp_str(ctr, "env[0].value"), "1");
	assert_string_equal(jp_str(ctr, "env[1].name"), "B");
	assert_string_equal(jp_str(ctr, "env[1].value"), "");
	assert_null(jp_at(ctr, "env[1].valueFrom"));
	assert_string_equal(jp_str(ctr, "env[2].name"), "AIRLOCK_CODE_DIR");
	assert_string_equal(jp_str(ctr, "env[2].value"), "/airlock/code");
	/* mounts: code read-only, work and tmp size-limited emptyDirs */
	assert_string_equal(jp_str(ctr, "volumeMounts[0].mountPath"), "/airlock/code");
	assert_true(jp_bool(ctr, "volumeMounts[0].readOnly"));
	assert_string_equal(jp_str(ctr, "volumeMounts[1].mountPath"), "/airlock/work");
	assert_string_equal(jp_str(ctr, "volumeMounts[2].mountPath"), "/tmp");
	assert_string_equal(jp_str(p, "spec.volumes[1].emptyDir.sizeLimit"), "64Mi");
	assert_string_equal(jp_str(p, "spec.volumes[2].emptyDir.sizeLimit"), "64Mi");
	/* tmpfs of that size: a full /tmp is ENOSPC at once, not a full disk */
	assert_string_equal(jp_str(p, "spec.volumes[1].emptyDir.medium"), "Memory");
	assert_string_equal(jp_str(p, "spec.volumes[2].emptyDir.medium"), "Memory");

	/* code by annotation, projected as files: no extra API call */
	assert_string_equal(jp_key(p, "metadata.annotations", "airlock.dev/source"), "print(1)");
	assert_string_equal(jp_key(p, "metadata.annotations", "airlock.dev/file-0"), "X=1");
	assert_string_equal(jp_key(p, "metadata.annotations", "airlock.dev/stdin"), "in");
	assert_string_equal(jp_str(p, "spec.volumes[0].name"), "code");
	assert_string_equal(jp_str(p, "spec.volumes[0].downwardAPI.items[0].path"), "main.py");
	assert_string_equal(jp_str(p, "spec.volumes[0].downwardAPI.items[0].fieldRef.fieldPath"),
	    "metadata.annotations['airlock.dev/source']");
	assert_string_equal(jp_str(p, "spec.volumes[0].downwardAPI.items[1].path"), "lib/util.py");
	assert_string_equal(jp_str(p, "spec.volumes[0].downwardAPI.items[2].path"), ".stdin");
	assert_int_equal(jp_num(p, "spec.volumes[0].downwardAPI.defaultMode"), 0444);

	json_decref(o);
	podspec_result_free(&r);
	ctl_config_free(c);
}

static void
test_big_code_goes_to_configmap(void **state)
{
	struct ctl_config *c = config();
	json_t *o = cx("{\"runtime\":\"python\"}");
	struct podspec_result r;
	struct k8s_error err;
	char *big = malloc(PODSPEC_ANNOTATION_BUDGET + 2);

	(void)state;
	memset(big, 'x', PODSPEC_ANNOTATION_BUDGET + 1);
	big[PODSPEC_ANNOTATION_BUDGET + 1] = '\0';
	json_object_set_new(json_object_get(o, "spec"), "source", json_string(big));
	assert_int_equal(podspec_build(c, o, &r, &err), 0);
	assert_non_null(r.configmap);
	assert_string_equal(jp_str(r.configmap, "metadata.name"), "airlock-" UID);
	assert_string_equal(jp_str(r.configmap, "metadata.ownerReferences[0].uid"), UID);
	assert_true(jp_bool(r.configmap, "immutable"));
	assert_int_equal(strlen(jp_str(r.configmap, "data.source")), PODSPEC_ANNOTATION_BUDGET + 1);
	assert_string_equal(jp_str(r.pod, "spec.volumes[0].configMap.name"), "airlock-" UID);
	assert_string_equal(jp_str(r.pod, "spec.volumes[0].configMap.items[0].key"), "source");
	assert_string_equal(jp_str(r.pod, "spec.volumes[0].configMap.items[0].path"), "main.py");
	assert_null(json_object_get(jp_at(r.pod, "metadata.annotations"), "airlock.dev/source"));
	assert_string_equal(jp_key(r.pod, "metadata.annotations", "airlock.dev/timeout-ms"), "30000");
	/* Exactly at the budget still goes by annotation. */
	podspec_result_free(&r);
	big[PODSPEC_ANNOTATION_BUDGET] = '\0';
	json_object_set_new(json_object_get(o, "spec"), "source", json_string(big));
	assert_int_equal(podspec_build(c, o, &r, &err), 0);
	assert_null(r.configmap);
	podspec_result_free(&r);
	free(big);
	json_decref(o);
	ctl_config_free(c);
}

/*
 * The storage budget, cold: an execution that takes 1 MiB less 16 KiB as
 * stored is built; one byte more is Rejected, with the size and the
 * limit. The size is the object's own, grown by its source.
 */
static void
test_budget_rejected(void **state)
{
	struct ctl_config *c = config();
	json_t *o = cx("{\"runtime\":\"python\",\"source\":\"\"}");
	struct podspec_result r;
	struct k8s_error err;
	size_t base = jsonsize_value(o), want = CX_OBJECT_BUDGET - CX_STATUS_RESERVE;
	char *src = malloc(want - base + 2), msg[300];

	(void)state;
	/* At the limit: "x" takes one byte each as stored. */
	memset(src, 'x', want - base);
	src[want - base] = '\0';
	json_object_set_new(json_object_get(o, "spec"), "source", json_string(src));
	assert_int_equal(jsonsize_value(o), want);
	assert_int_equal(podspec_build(c, o, &r, &err), 0);
	assert_non_null(r.pod);
	podspec_result_free(&r);
	/* One byte past it. */
	src[want - base] = 'x';
	src[want - base + 1] = '\0';
	json_object_set_new(json_object_get(o, "spec"), "source", json_string(src));
	assert_int_equal(jsonsize_value(o), want + 1);
	assert_int_equal(podspec_build(c, o, &r, &err), K8S_EINVAL);
	assert_null(r.pod);
	snprintf(msg, sizeof(msg), "spec: the execution takes %zu bytes as stored (kubectl "
	    "apply's copy of it included); at most %zu leave room for its result", want + 1,
	    want);
	assert_string_equal(err.message, msg);
	free(src);
	json_decref(o);
	ctl_config_free(c);
}

static void
test_rejections(void **state)
{
	static const struct { const char *spec, *msg; } bad[] = {
		{ "{\"runtime\":\"cobol\"}", "spec.runtime: unknown runtime profile 'cobol'" },
		{ "{\"runtime\":\"python\",\"image\":\"evil:latest\"}",
		  "spec.image: custom images are not allowed on this cluster" },
		{ "{\"runtime\":\"python\",\"session\":\"s\"}",
		  "spec.session: a session's step runs in its session's sandbox, never "
		  "in a pod of its own" },
		{ "{\"runtime\":\"python\",\"resources\":{\"cpu\":\"2001m\"}}",
		  "spec.resources.cpu: 2001m is above this cluster's cap of 2" },
		{ "{\"runtime\":\"python\",\"resources\":{\"cpu\":3}}",
		  "spec.resources.cpu: 3 is above this cluster's cap of 2" },
		/* Paths the kubelet cannot lay out beside the program. */
		{ "{\"runtime\":\"python\",\"files\":[{\"path\":\"main.py/x\",\"content\":\"\"}]}",
		  "spec.files[0].path: 'main.py/x' clashes with the program's file 'main.py'" },
		{ "{\"runtime\":\"python\",\"files\":[{\"path\":\"a\",\"content\":\"\"},"
		  "{\"path\":\"main.py\",\"content\":\"\"}]}",
		  "spec.files[1].path: 'main.py' clashes with the program's file 'main.py'" },
		{ "{\"runtime\":\"python\",\"stdin\":\"x\",\"files\":[{\"path\":\".stdin/a\",\"content\":\"\"}]}",
		  "spec.files[0].path: '.stdin/a' clashes with the stdin file '.stdin'" },
		/* .stdin is the runner's, spec.stdin set or not. */
		{ "{\"runtime\":\"python\",\"files\":[{\"path\":\".stdin/a\",\"content\":\"\"}]}",
		  "spec.files[0].path: '.stdin/a' clashes with the stdin file '.stdin'" },
		{ "{\"runtime\":\"python\",\"files\":[{\"path\":\".stdin\",\"content\":\"\"}]}",
		  "spec.files[0].path: '.stdin' clashes with the stdin file '.stdin'" },
		{ "{\"runtime\":\"python\",\"resources\":{\"memory\":\"3Gi\"}}",
		  "spec.resources.memory: 3Gi is above this cluster's cap of 2Gi" },
		{ "{\"runtime\":\"python\",\"resources\":{\"ephemeralStorage\":\"2Gi\"}}",
		  "spec.resources.ephemeralStorage: 2Gi is above this cluster's cap of 1Gi" },
		/* Longer than a short buffer: checked whole, not cut to "1.000..." (1 byte). */
		{ "{\"runtime\":\"python\",\"resources\":{\"memory\":\"1.00000000000000000000000000000Ti\"}}",
		  "spec.resources.memory: 1.00000000000000000000000000000Ti is above this cluster's cap of 2Gi" },
		{ "{\"runtime\":\"python\",\"resources\":{\"cpu\":"
		  "\"1000000000000000000000000000000000000000000000000000000000000000001m\"}}",
		  "spec.resources.cpu: '1000000000000000000000000000000000000000000000000000000000000000001m' is not a quantity" },
	};
	struct ctl_config *c = config();
	struct podspec_result r;
	struct k8s_error err;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		json_t *o = cx(bad[i].spec);

		assert_int_equal(podspec_build(c, o, &r, &err), K8S_EINVAL);
		assert_null(r.pod);
		assert_string_equal(err.message, bad[i].msg);
		json_decref(o);
	}
	/* At the cap exactly is fine, and the tenant's text is kept. */
	{
		json_t *o = cx("{\"runtime\":\"python\",\"resources\":{\"cpu\":\"2\",\"memory\":\"2Gi\",\"ephemeralStorage\":1}}");

		assert_int_equal(podspec_build(c, o, &r, &err), 0);
		assert_string_equal(jp_str(r.pod, "spec.containers[0].resources.limits.cpu"), "2");
		assert_string_equal(jp_str(r.pod, "spec.containers[0].resources.requests.memory"), "2Gi");
		assert_string_equal(jp_str(r.pod, "spec.containers[0].resources.limits.ephemeral-storage"), "1");
		podspec_result_free(&r);
		json_decref(o);
	}
	ctl_config_free(c);
}

/*
 * allowCustomImages: true lets a tenant name the image; everything else of
 * the pod stays the profile's and the cluster's (command, runtime class,
 * user, no token). The same spec is refused without it (test_rejections).
 */
static void
test_custom_image_allowed(void **state)
{
	static const char more[] = "allowCustomImages: true\n";
	char text[sizeof(conf) + sizeof(more)];
	struct ctl_config *c;
	struct podspec_result r;
	struct k8s_error err;
	json_t *o;

	(void)state;
	snprintf(text, sizeof(text), "%s%s", more, conf);
	if (ctl_config_parse(text, strlen(text), "test", &c, &err) != 0)
		fail_msg("config: %s", err.message);
	o = cx("{\"runtime\":\"python\",\"image\":\"registry.example/tools:1\",\"source\":\"print(1)\"}");
	assert_int_equal(podspec_build(c, o, &r, &err), 0);
	assert_string_equal(jp_str(r.pod, "spec.containers[0].image"), "registry.example/tools:1");
	assert_string_equal(jp_str(r.pod, "spec.containers[0].command[0]"), "python3");
	assert_string_equal(jp_str(r.pod, "spec.containers[0].command[1]"), "/airlock/code/main.py");
	assert_string_equal(jp_str(r.pod, "spec.runtimeClassName"), "gvisor");
	assert_true(json_is_false(jp_at(r.pod, "spec.automountServiceAccountToken")));
	assert_true(json_is_true(jp_at(r.pod, "spec.securityContext.runAsNonRoot")));
	assert_int_equal(json_integer_value(jp_at(r.pod, "spec.securityContext.runAsUser")), 65532);
	podspec_result_free(&r);
	json_decref(o);
	/* No image named: the profile's. */
	o = cx("{\"runtime\":\"python\",\"source\":\"print(1)\"}");
	assert_int_equal(podspec_build(c, o, &r, &err), 0);
	assert_string_equal(jp_str(r.pod, "spec.containers[0].image"), "airlock/runner-python:0.1");
	podspec_result_free(&r);
	json_decref(o);
	ctl_config_free(c);
}

static void
test_guardrails(void **state)
{
	struct ctl_config *c = config();
	json_t *np = podspec_network_policy("team-a"), *rq, *nsobj, *sa;
	char *warn;

	(void)state;
	assert_string_equal(jp_str(np, "metadata.name"), "airlock-deny-all");
	assert_string_equal(jp_str(np, "metadata.namespace"), "team-a");
	assert_string_equal(jp_key(np, "spec.podSelector.matchLabels", "app.kubernetes.io/managed-by"), "airlock-controller");
	assert_string_equal(jp_key(np, "spec.podSelector.matchLabels", "app.kubernetes.io/component"), "execution");
	assert_string_equal(jp_str(np, "spec.policyTypes[0]"), "Ingress");
	assert_string_equal(jp_str(np, "spec.policyTypes[1]"), "Egress");
	assert_null(jp_at(np, "spec.ingress"));
	assert_null(jp_at(np, "spec.egress"));
	json_decref(np);

	sa = podspec_service_account("team-a");
	assert_string_equal(jp_str(sa, "kind"), "ServiceAccount");
	assert_string_equal(jp_str(sa, "metadata.name"), "airlock-execution");
	assert_string_equal(jp_str(sa, "metadata.namespace"), "team-a");
	assert_false(jp_bool(sa, "automountServiceAccountToken"));
	json_decref(sa);

	rq = podspec_resource_quota(c, "team-a", NULL, &warn);
	assert_null(warn);
	assert_string_equal(jp_str(rq, "metadata.name"), "airlock-executions");
	assert_string_equal(jp_str(rq, "spec.hard.pods"), "20");
	assert_string_equal(jp_key(rq, "spec.hard", "requests.cpu"), "8");
	assert_string_equal(jp_key(rq, "spec.hard", "limits.memory"), "8Gi");
	assert_string_equal(jp_str(rq, "spec.scopeSelector.matchExpressions[0].scopeName"), "PriorityClass");
	assert_string_equal(jp_str(rq, "spec.scopeSelector.matchExpressions[0].operator"), "In");
	assert_string_equal(jp_str(rq, "spec.scopeSelector.matchExpressions[0].values[0]"), "airlock-execution");
	json_decref(rq);

	/* A cluster admin's overrides; a bad one falls back, with a warning. */
	nsobj = json_pack("{s:{s:{s:s, s:s, s:s}}}", "metadata", "annotations",
	    "airlock.dev/quota-executions", "5", "airlock.dev/quota-cpu", "lots",
	    "airlock.dev/quota-memory", "1Gi");
	rq = podspec_resource_quota(c, "team-a", nsobj, &warn);
	assert_string_equal(jp_str(rq, "spec.hard.pods"), "5");
	assert_string_equal(jp_key(rq, "spec.hard", "limits.cpu"), "8");
	assert_string_equal(jp_key(rq, "spec.hard", "requests.memory"), "1Gi");
	assert_string_equal(warn, "namespace annotation airlock.dev/quota-cpu: 'lots' is not a positive quantity; using the default");
	free(warn);
	json_decref(rq);
	json_decref(nsobj);
	/* Past the most a quota may say: clamped, with a warning. */
	nsobj = json_pack("{s:{s:{s:s, s:s, s:s}}}", "metadata", "annotations",
	    "airlock.dev/quota-executions", "99999999999", "airlock.dev/quota-cpu", "200000",
	    "airlock.dev/quota-memory", "2Pi");
	rq = podspec_resource_quota(c, "team-a", nsobj, &warn);
	assert_string_equal(jp_str(rq, "spec.hard.pods"), "1000000");
	assert_string_equal(jp_key(rq, "spec.hard", "limits.cpu"), "100k");
	assert_string_equal(jp_key(rq, "spec.hard", "requests.memory"), "1Pi");
	assert_string_equal(warn, "namespace annotation airlock.dev/quota-executions: "
	    "'99999999999' is above the most a quota may say, 1000000; using 1000000");
	free(warn);
	json_decref(rq);
	json_decref(nsobj);
	ctl_config_free(c);
}

/* Which execution a pod runs, from what podspec_build wrote on it. */
/* The runner images' profile: its command starts with /airlock/bin/run. */
static const char conf_run[] =
    "runtimeClassName: gvisor\n"
    "runAsUser: 65532\n"
    "allowCustomImages: true\n"
    "profiles:\n"
    "  python:\n"
    "    image: airlock/runner-python:0.1\n"
    "    command: [/airlock/bin/run, python3, main.py]\n"
    "    sourceFile: main.py\n"
    "defaults: {cpu: 500m, memory: 256Mi, ephemeralStorage: 64Mi}\n"
    "caps: {cpu: \"2\", memory: 2Gi, ephemeralStorage: 1Gi}\n"
    "quota: {executions: 20, cpu: \"8\", memory: 8Gi}\n";

static struct ctl_config *
config_run(void)
{
	return config_of(conf_run);
}

/* The AIRLOCK_TAR_ env vars of a direct pod, decoded: their count in *n. */
static struct buf
tar_of(json_t *pod, size_t *n)
{
	json_t *env = jp_at(pod, "spec.containers[0].env"), *e;
	struct buf b64, out;
	size_t i;

	buf_init(&b64, 1 << 22);
	*n = 0;
	json_array_foreach(env, i, e) {
		char want[32];
		const char *name = json_string_value(json_object_get(e, "name"));

		if (strncmp(name, "AIRLOCK_TAR_", 12) != 0)
			continue;
		snprintf(want, sizeof(want), "AIRLOCK_TAR_%zu", *n);
		assert_string_equal(name, want);	/* in order, none missing */
		assert_true(json_string_length(json_object_get(e, "value")) <=
		    PODSPEC_TAR_CHUNK);
		assert_int_equal(buf_append_str(&b64, json_string_value(
		    json_object_get(e, "value"))), 0);
		(*n)++;
	}
	/* Decoded here by the project's own base64, not the encoder's. */
	buf_init(&out, 1 << 22);
	if (base64_decode(b64.data, b64.len, &out.data, &out.len) != 0)
		fail_msg("the code's env vars are not base64");
	out.alloc = out.len + 1;
	buf_free(&b64);
	return out;
}

static void
assert_tar(struct buf *got, const struct codetar_entry *e, size_t n)
{
	struct buf want;
	size_t bad;

	buf_init(&want, 1 << 22);
	assert_int_equal(codetar_build(e, n, &want, &bad), 0);
	assert_int_equal(got->len, want.len);
	assert_memory_equal(got->data, want.data, want.len);
	buf_free(&want);
}

/*
 * The runner images' profile, small code: a direct pod. No volume (the
 * kubelet would wait on it), the code as a tar in env for
 * /airlock/bin/warm --env, /tmp as the working directory and HOME.
 */
static void
test_direct_pod(void **state)
{
	struct ctl_config *c = config_run();
	json_t *o = cx("{\"runtime\":\"python\",\"source\":\"print(input())\","
	    "\"timeoutSeconds\":30,\"args\":[\"-x\"],\"stdin\":\"hi\","
	    "\"files\":[{\"path\":\"lib/a.txt\",\"content\":\"A\"}],"
	    "\"env\":[{\"name\":\"A\",\"value\":\"1\"}]}");
	const struct codetar_entry e[] = { { "main.py", "print(input())", 14 },
	    { "lib/a.txt", "A", 1 }, { ".stdin", "hi", 2 } };
	struct podspec_result r;
	struct k8s_error err;
	struct buf tar;
	json_t *ctr, *env;
	size_t n;

	(void)state;
	assert_int_equal(podspec_build(c, o, &r, &err), 0);
	assert_null(r.configmap);
	ctr = jp_at(r.pod, "spec.containers[0]");
	assert_null(json_object_get(json_object_get(r.pod, "spec"), "volumes"));
	assert_null(json_object_get(ctr, "volumeMounts"));
	assert_string_equal(jp_str(ctr, "workingDir"), "/tmp");
	assert_json(json_object_get(ctr, "command"), "[\"/airlock/bin/warm\","
	    "\"--env\",\"1\",\"python3\",\"main.py\"]");
	assert_json(json_object_get(ctr, "args"), "[\"-x\"]");
	/* The hardening is the volume pod's: the root stays read-only. */
	assert_true(jp_bool(ctr, "securityContext.readOnlyRootFilesystem"));
	assert_false(jp_bool(ctr, "securityContext.allowPrivilegeEscalation"));
	env = json_object_get(ctr, "env");
	assert_int_equal(json_array_size(env), 5);
	assert_string_equal(jp_str(ctr, "env[0].name"), "HOME");
	assert_string_equal(jp_str(ctr, "env[0].value"), "/tmp");
	assert_string_equal(jp_str(ctr, "env[1].name"), "A");
	assert_string_equal(jp_str(ctr, "env[2].name"), "AIRLOCK_CODE_DIR");
	assert_string_equal(jp_str(ctr, "env[2].value"), "/tmp");
	/* Files out, for warm: the nonce of this execution, the budget. */
	{
		char nonce[33], want[80];

		artifacts_nonce(UID, nonce);
		snprintf(want, sizeof(want), "%s 1048576 64", nonce);
		assert_string_equal(jp_str(ctr, "env[3].name"), "AIRLOCK_OUT");
		assert_string_equal(jp_str(ctr, "env[3].value"), want);
		assert_string_equal(jp_key(r.pod, "metadata.annotations", "airlock.dev/out"),
		    "1048576 64");
	}
	tar = tar_of(r.pod, &n);
	assert_int_equal(n, 1);
	assert_tar(&tar, e, 3);
	buf_free(&tar);
	/* Nothing of the code in annotations: the name and the limits. */
	assert_null(json_object_get(jp_at(r.pod, "metadata.annotations"),
	    "airlock.dev/source"));
	assert_string_equal(jp_key(r.pod, "metadata.annotations",
	    "airlock.dev/execution"), "hello");
	assert_string_equal(jp_key(r.pod, "metadata.annotations",
	    "airlock.dev/timeout-ms"), "30000");
	assert_string_equal(jp_str(r.pod, "metadata.ownerReferences[0].uid"), UID);
	podspec_result_free(&r);
	json_decref(o);

	/*
	 * config.artifacts.maxFiles 0: files out off. Neither the runner's
	 * setting nor the agent's annotation, so nothing is collected.
	 */
	c->artifacts_files = 0;
	o = cx("{\"runtime\":\"python\",\"source\":\"print(1)\"}");
	assert_int_equal(podspec_build(c, o, &r, &err), 0);
	json_array_foreach(jp_at(r.pod, "spec.containers[0].env"), n, env)
		assert_string_not_equal(json_string_value(json_object_get(env, "name")),
		    "AIRLOCK_OUT");
	assert_null(json_object_get(jp_at(r.pod, "metadata.annotations"), "airlock.dev/out"));
	podspec_result_free(&r);
	json_decref(o);
	c->artifacts_files = 64;

	/* The tenant's own HOME is kept, not doubled. */
	o = cx("{\"runtime\":\"python\",\"env\":[{\"name\":\"HOME\",\"value\":\"/h\"}]}");
	assert_int_equal(podspec_build(c, o, &r, &err), 0);
	assert_json(jp_at(r.pod, "spec.containers[0].env[0]"),
	    "{\"name\":\"HOME\",\"value\":\"/h\"}");
	assert_string_equal(jp_str(r.pod, "spec.containers[0].env[1].name"),
	    "AIRLOCK_CODE_DIR");
	/* No source: the program's file, empty. */
	tar = tar_of(r.pod, &n);
	assert_tar(&tar, (const struct codetar_entry[]){ { "main.py", "", 0 } }, 1);
	buf_free(&tar);
	podspec_result_free(&r);
	json_decref(o);
	ctl_config_free(c);
}

/* Code at the budget: cut into PODSPEC_TAR_CHUNK pieces, in order. */
static void
test_direct_pod_chunks(void **state)
{
	struct ctl_config *c = config_run();
	json_t *o = cx("{\"runtime\":\"python\"}");
	char *big = malloc(PODSPEC_ANNOTATION_BUDGET + 2);
	struct podspec_result r;
	struct k8s_error err;
	struct buf tar;
	size_t n;

	(void)state;
	for (size_t i = 0; i <= PODSPEC_ANNOTATION_BUDGET; i++)
		big[i] = (char)('a' + i % 26);
	big[PODSPEC_ANNOTATION_BUDGET] = '\0';
	json_object_set_new(json_object_get(o, "spec"), "source", json_string(big));
	assert_int_equal(podspec_build(c, o, &r, &err), 0);
	assert_null(json_object_get(jp_at(r.pod, "spec"), "volumes"));
	tar = tar_of(r.pod, &n);
	/* 192 KiB + 1536 of tar: 264192 of base64, five chunks. */
	assert_int_equal(n, 5);
	assert_string_equal(jp_str(r.pod, "spec.containers[0].command[2]"), "5");
	assert_tar(&tar, (const struct codetar_entry[]){ { "main.py", big,
	    PODSPEC_ANNOTATION_BUDGET } }, 1);
	buf_free(&tar);
	podspec_result_free(&r);

	/* One byte past the budget: the ConfigMap and its volumes, as before. */
	big[PODSPEC_ANNOTATION_BUDGET] = 'x';
	big[PODSPEC_ANNOTATION_BUDGET + 1] = '\0';
	json_object_set_new(json_object_get(o, "spec"), "source", json_string(big));
	assert_int_equal(podspec_build(c, o, &r, &err), 0);
	assert_non_null(r.configmap);
	assert_string_equal(jp_str(r.pod, "spec.containers[0].command[0]"),
	    "/airlock/bin/run");
	assert_string_equal(jp_str(r.pod, "spec.containers[0].workingDir"),
	    "/airlock/work");
	assert_string_equal(jp_str(r.pod, "spec.volumes[0].configMap.name"),
	    "airlock-" UID);
	assert_string_equal(jp_str(r.pod, "spec.containers[0].env[0].value"),
	    "/airlock/code");
	podspec_result_free(&r);
	free(big);
	json_decref(o);

	/* A custom image may lack /airlock/bin/warm: the volumes. */
	o = cx("{\"runtime\":\"python\",\"image\":\"registry.example/t:1\","
	    "\"source\":\"print(1)\"}");
	assert_int_equal(podspec_build(c, o, &r, &err), 0);
	assert_string_equal(jp_str(r.pod, "spec.containers[0].command[0]"),
	    "/airlock/bin/run");
	assert_string_equal(jp_str(r.pod, "spec.volumes[0].name"), "code");
	podspec_result_free(&r);
	json_decref(o);

	/* The code's env names are Airlock's alone. */
	o = cx("{\"runtime\":\"python\",\"env\":[{\"name\":\"A\",\"value\":\"1\"},"
	    "{\"name\":\"AIRLOCK_TAR_0\",\"value\":\"x\"}]}");
	assert_int_equal(podspec_build(c, o, &r, &err), K8S_EINVAL);
	assert_string_equal(err.message, "spec.env[1].name: 'AIRLOCK_TAR_0': "
	    "names starting with AIRLOCK_TAR_ are Airlock's");
	json_decref(o);
	ctl_config_free(c);
}

static void
test_pod_execution(void **state)
{
	json_t *pod = json_loads("{\"metadata\":{\"labels\":{\"airlock.dev/execution-uid\":"
	    "\"u-1\"},\"annotations\":{\"airlock.dev/execution\":\"cx-1\"}}}", 0, NULL);
	const char *uid = "unset";

	(void)state;
	assert_string_equal(podspec_pod_execution(pod, &uid), "cx-1");
	assert_string_equal(uid, "u-1");
	assert_string_equal(podspec_pod_execution(pod, NULL), "cx-1");
	json_decref(pod);
	pod = json_loads("{\"metadata\":{\"labels\":{\"app\":\"x\"}}}", 0, NULL);
	assert_null(podspec_pod_execution(pod, &uid));
	assert_null(uid);
	json_decref(pod);
	assert_null(podspec_pod_execution(NULL, &uid));
	assert_null(uid);
}

/* spec.output.stream reaches the agent as airlock.dev/stream: "true". */
static void
test_stream_annotation(void **state)
{
	struct ctl_config *c = config();
	json_t *on = cx("{\"runtime\":\"python\",\"source\":\"print(1)\","
	    "\"output\":{\"stream\":true}}");
	json_t *off = cx("{\"runtime\":\"python\",\"source\":\"print(1)\","
	    "\"output\":{\"stream\":false}}");
	struct podspec_result r;
	struct k8s_error err;

	(void)state;
	assert_int_equal(podspec_build(c, on, &r, &err), 0);
	assert_string_equal(json_string_value(json_object_get(json_object_get(
	    json_object_get(r.pod, "metadata"), "annotations"),
	    "airlock.dev/stream")), "true");
	podspec_result_free(&r);
	assert_int_equal(podspec_build(c, off, &r, &err), 0);
	assert_null(json_object_get(json_object_get(json_object_get(r.pod,
	    "metadata"), "annotations"), "airlock.dev/stream"));
	podspec_result_free(&r);
	json_decref(on);
	json_decref(off);
	ctl_config_free(c);
}

/*
 * A profile with a code policy: the pod carries the policy's mark, and
 * what would change how its guard's interpreter starts is refused, as is
 * a custom image (the guard is the runner image's).
 */
static void
test_policy_profile(void **state)
{
	struct ctl_config *c = config_of(
	    "allowCustomImages: true\n"
	    "profiles:\n"
	    "  py:\n    image: i\n    command: [/airlock/bin/run, python3, main.py]\n"
	    "    sourceFile: main.py\n    policy: {denyImports: [subprocess]}\n"
	    "  plain:\n    image: i\n    command: [/airlock/bin/run, python3, main.py]\n"
	    "    sourceFile: main.py\n");
	static const char *const refused[] = { "BASH_ENV", "ENV", "POSIXLY_CORRECT",
	    "LD_PRELOAD", "LD_LIBRARY_PATH", "PYTHONPATH", "PYTHONSTARTUP", "SHELLOPTS",
	    "BASHOPTS", "PS4" };
	struct podspec_result r;
	struct k8s_error err;
	json_t *o;

	(void)state;
	o = cx("{\"runtime\":\"py\",\"source\":\"print(1)\",\"env\":[{\"name\":\"HOME\","
	    "\"value\":\"/h\"}]}");
	assert_int_equal(podspec_build(c, o, &r, &err), 0);
	assert_string_equal(jp_key(r.pod, "metadata.annotations", "airlock.dev/policy"),
	    "true");
	podspec_result_free(&r);
	json_decref(o);
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		char spec[256], want[256];

		snprintf(spec, sizeof(spec), "{\"runtime\":\"py\",\"source\":\"x\",\"env\":"
		    "[{\"name\":\"A\",\"value\":\"1\"},{\"name\":\"%s\",\"value\":\"x\"}]}",
		    refused[i]);
		o = cx(spec);
		assert_int_equal(podspec_build(c, o, &r, &err), K8S_EINVAL);
		snprintf(want, sizeof(want), "spec.env[1].name: '%s' is refused where "
		    "the runtime has a code policy", refused[i]);
		if (strncmp(err.message, want, strlen(want)) != 0)
			fail_msg("%s: %s", refused[i], err.message);
		json_decref(o);
		/* Without a policy, the tenant's own business. */
		snprintf(spec, sizeof(spec), "{\"runtime\":\"plain\",\"source\":\"x\",\"env\":"
		    "[{\"name\":\"%s\",\"value\":\"x\"}]}", refused[i]);
		o = cx(spec);
		assert_int_equal(podspec_build(c, o, &r, &err), 0);
		podspec_result_free(&r);
		json_decref(o);
	}
	o = cx("{\"runtime\":\"py\",\"source\":\"x\",\"image\":\"mine:1\"}");
	assert_int_equal(podspec_build(c, o, &r, &err), K8S_EINVAL);
	assert_string_equal(err.message, "spec.image: runtime 'py' has a code policy, "
	    "which runs in its own image only");
	json_decref(o);
	/* AIRLOCK_OUT is Airlock's, policy or not. */
	o = cx("{\"runtime\":\"plain\",\"source\":\"x\",\"env\":[{\"name\":\"AIRLOCK_OUT\","
	    "\"value\":\"x 1 1\"}]}");
	assert_int_equal(podspec_build(c, o, &r, &err), K8S_EINVAL);
	assert_string_equal(err.message, "spec.env[0].name: 'AIRLOCK_OUT' is Airlock's");
	json_decref(o);
	ctl_config_free(c);
}

/*
 * A profile with egress (docs/network.md): its pod under the network
 * RuntimeClass, and a NetworkPolicy of its own allowing exactly its
 * entries, owned as the pod is; a profile without stays as it was. The
 * entries set here by hand: the config refuses them until the controller
 * enforces them end to end (ctl_config.c).
 */
static void
test_egress_policy(void **state)
{
	struct ctl_config *c = config();
	struct ctl_profile *p = (struct ctl_profile *)ctl_config_profile(c, "python");
	json_t *o = cx("{\"runtime\":\"python\",\"source\":\"print(1)\"}");
	struct podspec_result r;
	struct k8s_error err;
	char *got;

	(void)state;
	assert_int_equal(podspec_build(c, o, &r, &err), 0);
	assert_string_equal(json_string_value(json_object_get(json_object_get(r.pod,
	    "spec"), "runtimeClassName")), "gvisor");
	assert_null(r.netpol);
	/* No egress, no byte cap for the agent. */
	assert_null(json_object_get(jp_at(r.pod, "metadata.annotations"),
	    CX_ANN_EGRESS_BYTES));
	podspec_result_free(&r);

	p->egress = xcalloc(2, sizeof(*p->egress));
	p->negress = 2;
	p->egress[0] = (struct ctl_egress){ .cidr = xstrdup("10.20.0.0/16"),
	    .addr = 0x0a140000, .prefix = 16, .ports = { 5432, 443 }, .nports = 2 };
	p->egress[1] = (struct ctl_egress){ .cidr = xstrdup("192.168.1.7/32"),
	    .addr = 0xc0a80107, .prefix = 32, .ports = { 8080 }, .nports = 1 };
	assert_int_equal(podspec_build(c, o, &r, &err), 0);
	assert_string_equal(json_string_value(json_object_get(json_object_get(r.pod,
	    "spec"), "runtimeClassName")), "gvisor-net");
	/* The byte cap, for the agent: 1Gi for a profile not read from a config. */
	assert_string_equal(jp_key(r.pod, "metadata.annotations",
	    "airlock.dev/egress-bytes"), "1073741824");
	podspec_result_free(&r);
	p->egress_bytes = 64 << 20;
	assert_int_equal(podspec_build(c, o, &r, &err), 0);
	assert_string_equal(jp_key(r.pod, "metadata.annotations",
	    "airlock.dev/egress-bytes"), "67108864");
	assert_non_null(r.netpol);
	got = json_dumps(r.netpol, JSON_COMPACT | JSON_SORT_KEYS);
	assert_string_equal(got,
	    "{\"apiVersion\":\"networking.k8s.io/v1\",\"kind\":\"NetworkPolicy\","
	    "\"metadata\":{\"annotations\":{\"airlock.dev/execution\":\"hello\"},"
	    "\"labels\":{\"airlock.dev/execution-uid\":\"" UID "\","
	    "\"app.kubernetes.io/component\":\"execution\","
	    "\"app.kubernetes.io/name\":\"airlock\"},"
	    "\"name\":\"airlock-" UID "\",\"namespace\":\"team-a\","
	    "\"ownerReferences\":[{\"apiVersion\":\"airlock.dev/v1alpha1\","
	    "\"blockOwnerDeletion\":true,\"controller\":true,\"kind\":\"CodeExecution\","
	    "\"name\":\"hello\",\"uid\":\"" UID "\"}]},"
	    "\"spec\":{\"egress\":["
	    "{\"ports\":[{\"port\":5432,\"protocol\":\"TCP\"},{\"port\":443,\"protocol\":\"TCP\"}],"
	    "\"to\":[{\"ipBlock\":{\"cidr\":\"10.20.0.0/16\"}}]},"
	    "{\"ports\":[{\"port\":8080,\"protocol\":\"TCP\"}],"
	    "\"to\":[{\"ipBlock\":{\"cidr\":\"192.168.1.7/32\"}}]}],"
	    "\"podSelector\":{\"matchLabels\":{\"airlock.dev/execution-uid\":\"" UID "\"}},"
	    "\"policyTypes\":[\"Egress\"]}}");
	free(got);
	podspec_result_free(&r);
	/*
	 * A pool's holder may run it (its whole list: test_pool's
	 * test_holder_egress); one naming its egress, never.
	 */
	{
		char key[POOL_KEY_LEN];
		json_t *n = cx("{\"runtime\":\"python\",\"source\":\"print(1)\","
		    "\"network\":{\"egress\":[{\"cidr\":\"10.20.0.0/16\","
		    "\"ports\":[443]}]}}");

		assert_int_equal(pool_key(c, json_object_get(n, "spec"), key, &err),
		    K8S_EINVAL);
		assert_string_equal(err.message, "spec.network.egress: an "
		    "execution that names its egress runs cold, with a "
		    "NetworkPolicy of its own; a warm sandbox has its profile's "
		    "whole list (docs/network.md)");
		json_decref(n);
	}
	json_decref(o);
	ctl_config_free(c);
}

/*
 * The gate ports of a uid: P, Q and M, three of the range, never two the
 * same. Q steps up off P; M steps up off P, then off Q, wrapping round
 * the range (uids found to fall so).
 */
static void
test_gate_ports(void **state)
{
	static const struct { const char *uid; int p, q, m; } t[] = {
		{ UID, GATE_P, GATE_Q, GATE_M },
		/* M's word falls on P (85): one up. */
		{ "00000000-0000-0000-0000-000000000002", 8285, 8234, 8286 },
		/* On Q (91): one up. */
		{ "00000000-0000-0000-0000-000000000051", 8317, 8291, 8292 },
		/* On P (89), then on Q, one above it: two up. */
		{ "00000000-0000-0000-0000-000000004940", 8289, 8290, 8291 },
		/* On Q at the range's top (127): round to its bottom. */
		{ "00000000-0000-0000-0000-000000004400", 8276, 8327, 8200 },
	};
	int got[PODSPEC_GATE_NPORTS];

	(void)state;
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		podspec_gate_ports(t[i].uid, got);
		if (got[0] != t[i].p || got[1] != t[i].q || got[2] != t[i].m)
			fail_msg("%s: %d,%d %d; want %d,%d %d", t[i].uid, got[0],
			    got[1], got[2], t[i].p, t[i].q, t[i].m);
	}
	/* Any uid: three of the range, all different. */
	for (int i = 0; i < 20000; i++) {
		char uid[40];

		snprintf(uid, sizeof(uid), "u-%d", i);
		podspec_gate_ports(uid, got);
		for (int j = 0; j < PODSPEC_GATE_NPORTS; j++)
			assert_in_range(got[j], PODSPEC_GATE_OPEN_BASE,
			    PODSPEC_GATE_OPEN_BASE + PODSPEC_GATE_OPEN_PORTS - 1);
		if (got[0] == got[1] || got[2] == got[0] || got[2] == got[1])
			fail_msg("%s: %d,%d %d", uid, got[0], got[1], got[2]);
	}
}

/*
 * The start gate (docs/network.md): the pod's env names the gate's ports,
 * its bound and the addresses, last (a spec.env of the name loses); the
 * policy gains the rule to the gate pods' open ports and metered one,
 * never the closed one.
 * No policy or no address: refused, the pod unchanged.
 */
static void
test_egress_gate(void **state)
{
	struct ctl_config *c = config();
	struct ctl_profile *p = (struct ctl_profile *)ctl_config_profile(c, "python");
	json_t *o = cx("{\"runtime\":\"python\",\"source\":\"print(1)\"}");
	struct podspec_gate g = { .ns = "airlock-system", .addrs = { "10.244.0.9",
	    "10.244.0.12" }, .n = 2 };
	struct podspec_gate none = { .ns = "airlock-system" };
	struct podspec_result r;
	struct k8s_error err;
	json_t *env, *last;
	char *got;

	(void)state;
	assert_int_equal(podspec_build(c, o, &r, &err), 0);
	assert_int_equal(podspec_egress_gate(&r, &g, &err), K8S_EINVAL);
	assert_string_equal(err.message, "no egress start gate to give the pod");
	podspec_result_free(&r);
	/* The gate's variable is Airlock's, whatever the profile. */
	{
		json_t *o2 = cx("{\"runtime\":\"python\",\"source\":\"1\","
		    "\"env\":[{\"name\":\"AIRLOCK_EGRESS_GATE\",\"value\":\"\"}]}");

		assert_int_equal(podspec_build(c, o2, &r, &err), K8S_EINVAL);
		assert_string_equal(err.message, "spec.env[0].name: "
		    "'AIRLOCK_EGRESS_GATE' is Airlock's");
		json_decref(o2);
	}

	p->egress = xcalloc(1, sizeof(*p->egress));
	p->negress = 1;
	p->egress[0] = (struct ctl_egress){ .cidr = xstrdup("10.20.0.0/16"),
	    .addr = 0x0a140000, .prefix = 16, .ports = { 5432 }, .nports = 1 };
	/*
	 * With egress: nothing that changes how the runner's shell starts
	 * (it runs before the gate), and no image but the profile's.
	 */
	{
		static const char *const spec[] = {
			"{\"runtime\":\"python\",\"source\":\"1\",\"env\":"
			"[{\"name\":\"A\",\"value\":\"\"},{\"name\":\"LD_PRELOAD\","
			"\"value\":\"/airlock/code/x.so\"}]}",
			"{\"runtime\":\"python\",\"source\":\"1\",\"env\":"
			"[{\"name\":\"IFS\",\"value\":\"8\"}]}",
			"{\"runtime\":\"python\",\"source\":\"1\",\"image\":\"mine:1\"}" };
		static const char *const want[] = {
			"spec.env[1].name: 'LD_PRELOAD' is refused where the runtime "
			"has network egress (it would change how the runner starts, "
			"before its start gate)",
			"spec.env[0].name: 'IFS' is refused where the runtime has "
			"network egress (it would change how the runner starts, "
			"before its start gate)",
			"spec.image: runtime 'python' has network egress, whose start "
			"gate runs in its own image only (docs/network.md)" };

		c->allow_custom_images = 1;
		for (size_t i = 0; i < 3; i++) {
			json_t *o2 = cx(spec[i]);

			assert_int_equal(podspec_build(c, o2, &r, &err), K8S_EINVAL);
			assert_string_equal(err.message, want[i]);
			json_decref(o2);
		}
		c->allow_custom_images = 0;
	}
	assert_int_equal(podspec_build(c, o, &r, &err), 0);
	assert_int_equal(podspec_egress_gate(&r, &none, &err), K8S_EINVAL);
	assert_int_equal(json_array_size(json_object_get(json_object_get(
	    r.netpol, "spec"), "egress")), 1);
	assert_int_equal(podspec_egress_gate(&r, &g, &err), 0);
	env = json_object_get(json_array_get(json_object_get(json_object_get(
	    r.pod, "spec"), "containers"), 0), "env");
	last = json_array_get(env, json_array_size(env) - 1);
	assert_string_equal(json_string_value(json_object_get(last, "name")),
	    "AIRLOCK_EGRESS_GATE");
	/* Three ports of the gate's range, this uid's own (its SHA-256's). */
	{
		int p3[PODSPEC_GATE_NPORTS];

		podspec_gate_ports(UID, p3);
		assert_int_equal(p3[0], GATE_P);
		assert_int_equal(p3[1], GATE_Q);
		assert_int_equal(p3[2], GATE_M);
	}
	assert_string_equal(json_string_value(json_object_get(last, "value")),
	    GATE_ARGS " 10.244.0.9 10.244.0.12");
	/* M allowed as P and Q are: only the agent's rule refuses it. */
	got = json_dumps(json_array_get(json_object_get(json_object_get(r.netpol,
	    "spec"), "egress"), 1), JSON_COMPACT | JSON_SORT_KEYS);
	assert_string_equal(got, "{\"ports\":[{\"port\":" GATE_PS ",\"protocol\":\"TCP\"},"
	    "{\"port\":" GATE_QS ",\"protocol\":\"TCP\"},"
	    "{\"port\":" GATE_MS ",\"protocol\":\"TCP\"}],"
	    "\"to\":[{\"namespaceSelector\":{\"matchLabels\":"
	    "{\"kubernetes.io/metadata.name\":\"airlock-system\"}},"
	    "\"podSelector\":{\"matchLabels\":"
	    "{\"app.kubernetes.io/component\":\"egress-gate\"}}}]}");
	free(got);
	podspec_result_free(&r);
	json_decref(o);
	ctl_config_free(c);
}

/*
 * spec.network.egress narrows the profile's list: the pod's class and its
 * NetworkPolicy follow what the execution asked; [] is no network at all,
 * the plain class and no policy; wider than the profile is Rejected.
 */
static void
test_egress_narrowed(void **state)
{
	struct ctl_config *c = config();
	struct ctl_profile *p = (struct ctl_profile *)ctl_config_profile(c, "python");
	json_t *o;
	struct podspec_result r;
	struct k8s_error err;
	char *got;

	(void)state;
	/* Without egress, asking for some is Rejected; none is fine. */
	o = cx("{\"runtime\":\"python\",\"source\":\"print(1)\","
	    "\"network\":{\"egress\":[{\"cidr\":\"10.20.0.0/16\",\"ports\":[443]}]}}");
	assert_int_equal(podspec_build(c, o, &r, &err), K8S_EINVAL);
	assert_string_equal(err.message, "spec.network.egress: profile python has "
	    "no egress");
	assert_null(r.pod);
	json_decref(o);
	o = cx("{\"runtime\":\"python\",\"source\":\"print(1)\","
	    "\"network\":{\"egress\":[]}}");
	assert_int_equal(podspec_build(c, o, &r, &err), 0);
	assert_string_equal(json_string_value(json_object_get(json_object_get(r.pod,
	    "spec"), "runtimeClassName")), "gvisor");
	assert_null(r.netpol);
	podspec_result_free(&r);
	json_decref(o);
	/* ... and may still run warm: a holder has no network either. */
	{
		struct ctl_config *wc = config_of("profiles:\n  py: {image: i, "
		    "command: [/airlock/bin/run, python3, main.py], sourceFile: main.py}\n");
		json_t *spec = json_pack("{s:s, s:{s:[]}}", "runtime", "py",
		    "network", "egress");
		char key[POOL_KEY_LEN];

		assert_int_equal(pool_key(wc, spec, key, &err), 0);
		assert_string_equal(key, "py/500/268435456/67108864");
		json_object_set_new(spec, "network", json_pack("{s:[{s:s, s:[i]}]}",
		    "egress", "cidr", "10.0.0.0/8", "ports", 1));
		assert_int_equal(pool_key(wc, spec, key, &err), K8S_EINVAL);
		assert_string_equal(err.message, "spec.network.egress: profile "
		    "py has no egress");
		json_decref(spec);
		ctl_config_free(wc);
	}

	p->egress = xcalloc(2, sizeof(*p->egress));
	p->negress = 2;
	p->egress[0] = (struct ctl_egress){ .cidr = xstrdup("10.20.0.0/16"),
	    .addr = 0x0a140000, .prefix = 16, .ports = { 5432, 443 }, .nports = 2 };
	p->egress[1] = (struct ctl_egress){ .cidr = xstrdup("192.168.1.7/32"),
	    .addr = 0xc0a80107, .prefix = 32, .ports = { 8080 }, .nports = 1 };
	/* Narrowed: its policy holds what it asked, not the profile's list. */
	o = cx("{\"runtime\":\"python\",\"source\":\"print(1)\",\"network\":"
	    "{\"egress\":[{\"cidr\":\"10.20.30.0/24\",\"ports\":[443]}]}}");
	assert_int_equal(podspec_build(c, o, &r, &err), 0);
	assert_string_equal(json_string_value(json_object_get(json_object_get(r.pod,
	    "spec"), "runtimeClassName")), "gvisor-net");
	got = json_dumps(json_object_get(r.netpol, "spec"), JSON_COMPACT |
	    JSON_SORT_KEYS);
	assert_string_equal(got, "{\"egress\":["
	    "{\"ports\":[{\"port\":443,\"protocol\":\"TCP\"}],"
	    "\"to\":[{\"ipBlock\":{\"cidr\":\"10.20.30.0/24\"}}]}],"
	    "\"podSelector\":{\"matchLabels\":{\"airlock.dev/execution-uid\":\"" UID "\"}},"
	    "\"policyTypes\":[\"Egress\"]}");
	free(got);
	podspec_result_free(&r);
	json_decref(o);
	/* None asked: the plain class and no policy, as a profile without. */
	o = cx("{\"runtime\":\"python\",\"source\":\"print(1)\","
	    "\"network\":{\"egress\":[]}}");
	assert_int_equal(podspec_build(c, o, &r, &err), 0);
	assert_string_equal(json_string_value(json_object_get(json_object_get(r.pod,
	    "spec"), "runtimeClassName")), "gvisor");
	assert_null(r.netpol);
	/* Nor a byte cap: no network to count. */
	assert_null(json_object_get(jp_at(r.pod, "metadata.annotations"),
	    CX_ANN_EGRESS_BYTES));
	podspec_result_free(&r);
	json_decref(o);
	/* Wider than the profile's: Rejected, naming the entry. */
	o = cx("{\"runtime\":\"python\",\"source\":\"print(1)\",\"network\":"
	    "{\"egress\":[{\"cidr\":\"192.168.1.7/32\",\"ports\":[8080]},"
	    "{\"cidr\":\"10.0.0.0/8\",\"ports\":[5432]}]}}");
	assert_int_equal(podspec_build(c, o, &r, &err), K8S_EINVAL);
	assert_string_equal(err.message, "spec.network.egress[1]: 10.0.0.0/8 port "
	    "5432 is not in profile python's egress");
	assert_null(r.pod);
	assert_null(r.netpol);
	json_decref(o);
	ctl_config_free(c);
}


/* The env's names and values from its entry from on, as "N=V;..." */
static char *
env_from(json_t *pod, size_t from)
{
	json_t *env = json_object_get(json_array_get(json_object_get(
	    json_object_get(pod, "spec"), "containers"), 0), "env"), *e;
	char *s = xcalloc(1, 2048);
	size_t i;

	json_array_foreach(env, i, e)
		if (i >= from)
			snprintf(s + strlen(s), 2048 - strlen(s), "%s=%s;",
			    json_string_value(json_object_get(e, "name")),
			    json_string_value(json_object_get(e, "value")));
	return s;
}

/*
 * Host entries go through the egress proxy in the gate pods: the pod has
 * it in HTTP(S)_PROXY (both cases; CIDR entries in NO_PROXY), with the
 * execution's pass as the URL's user and password, which the proxy's key
 * checks and which names the execution and its hosts alone; the policy
 * allows the gate's and the proxy's ports, and no ipBlock for a host. A
 * tenant's own proxy variables are refused.
 */
static void
test_egress_proxy(void **state)
{
	struct ctl_config *c = config();
	struct ctl_profile *p = (struct ctl_profile *)ctl_config_profile(c, "python");
	static const unsigned char key[] = "0123456789abcdef0123456789abcdef";
	struct podspec_gate g = { .ns = "airlock-system", .addrs = { "10.244.0.9",
	    "10.244.0.12" }, .n = 2, .key = key, .keylen = 32, .now = 1000000 };
	struct egress_claims cl;
	struct podspec_result r;
	struct k8s_error err;
	const char *why;
	char *user, *pass, *at, want[2048];
	json_t *o, *env;
	size_t before;
	char *got;

	(void)state;
	p->egress = xcalloc(2, sizeof(*p->egress));
	p->negress = 2;
	p->egress[0] = (struct ctl_egress){ .cidr = xstrdup("10.20.0.0/16"),
	    .addr = 0x0a140000, .prefix = 16, .ports = { 5432 }, .nports = 1 };
	p->egress[1] = (struct ctl_egress){ .host = xstrdup("pypi.org"),
	    .ports = { 443 }, .nports = 1 };
	o = cx("{\"runtime\":\"python\",\"source\":\"1\",\"env\":"
	    "[{\"name\":\"Https_Proxy\",\"value\":\"http://evil:1\"}]}");
	assert_int_equal(podspec_build(c, o, &r, &err), K8S_EINVAL);
	assert_string_equal(err.message, "spec.env[0].name: 'Https_Proxy' is set "
	    "by Airlock where the runtime has network egress (the egress proxy)");
	json_decref(o);

	o = cx("{\"runtime\":\"python\",\"source\":\"print(1)\"}");
	assert_int_equal(podspec_build(c, o, &r, &err), 0);
	assert_int_equal(r.hosts, 1);
	assert_int_equal(r.negress, 2);
	assert_string_equal(r.egress[1].host, "pypi.org");
	env = json_object_get(json_array_get(json_object_get(json_object_get(
	    r.pod, "spec"), "containers"), 0), "env");
	before = json_array_size(env);
	/* No key: no pass, so no pod. */
	g.keylen = 0;
	assert_int_equal(podspec_egress_gate(&r, &g, &err), K8S_EINVAL);
	assert_int_equal(json_array_size(env), before);
	g.keylen = 32;
	assert_int_equal(podspec_egress_gate(&r, &g, &err), 0);
	got = env_from(r.pod, before);
	/* HTTP_PROXY=http://USER:PASS@10.244.0.9:3128, the same in all four. */
	assert_int_equal(strncmp(got, "HTTP_PROXY=http://", 18), 0);
	user = xstrndup(got + 18, strcspn(got + 18, ":"));
	pass = got + 18 + strlen(user) + 1;
	at = strchr(pass, '@');
	assert_non_null(at);
	*at = '\0';
	snprintf(want, sizeof(want), "http://%s:%s@10.244.0.9:3128", user, pass);
	*at = '@';
	{
		char all[4 * 2048 + 256];

		snprintf(all, sizeof(all), "HTTP_PROXY=%s;http_proxy=%s;"
		    "HTTPS_PROXY=%s;https_proxy=%s;NO_PROXY=10.20.0.0/16;"
		    "no_proxy=10.20.0.0/16;AIRLOCK_EGRESS_GATE=" GATE_ARGS " "
		    "10.244.0.9 10.244.0.12;", want, want, want, want);
		assert_string_equal(got, all);
	}
	assert_int_equal(egress_token_check(user, strlen(user), pass, 64,
	    1000000, key, 32, &cl, &why), 0);
	assert_string_equal(cl.uid, UID);
	assert_string_equal(cl.ns, "team-a");
	assert_string_equal(cl.name, "hello");
	assert_int_equal(cl.nhosts, 1);
	assert_string_equal(cl.hosts[0].host, "pypi.org");
	assert_int_equal(cl.hosts[0].ports[0], 443);
	/* The pod's deadline (timeout 30 s + 30) and the slack: then no more. */
	assert_int_equal(cl.exp, 1000000 + 60 + PODSPEC_PASS_SLACK);
	egress_claims_free(&cl);
	free(user);
	free(got);
	got = json_dumps(json_object_get(r.netpol, "spec"), JSON_COMPACT |
	    JSON_SORT_KEYS);
	assert_string_equal(got, "{\"egress\":["
	    "{\"ports\":[{\"port\":5432,\"protocol\":\"TCP\"}],"
	    "\"to\":[{\"ipBlock\":{\"cidr\":\"10.20.0.0/16\"}}]},"
	    "{\"ports\":[{\"port\":" GATE_PS ",\"protocol\":\"TCP\"},"
	    "{\"port\":" GATE_QS ",\"protocol\":\"TCP\"},"
	    "{\"port\":" GATE_MS ",\"protocol\":\"TCP\"},"
	    "{\"port\":3128,\"protocol\":\"TCP\"}],"
	    "\"to\":[{\"namespaceSelector\":{\"matchLabels\":"
	    "{\"kubernetes.io/metadata.name\":\"airlock-system\"}},"
	    "\"podSelector\":{\"matchLabels\":"
	    "{\"app.kubernetes.io/component\":\"egress-gate\"}}}]}],"
	    "\"podSelector\":{\"matchLabels\":{\"airlock.dev/execution-uid\":\"" UID "\"}},"
	    "\"policyTypes\":[\"Egress\"]}");
	free(got);
	podspec_result_free(&r);
	json_decref(o);

	/* Narrowed to the host alone: no ipBlock, nothing bypasses the proxy. */
	o = cx("{\"runtime\":\"python\",\"source\":\"print(1)\",\"network\":"
	    "{\"egress\":[{\"host\":\"pypi.org\",\"ports\":[443]}]}}");
	assert_int_equal(podspec_build(c, o, &r, &err), 0);
	assert_int_equal(r.negress, 1);
	assert_int_equal(json_array_size(json_object_get(json_object_get(r.netpol,
	    "spec"), "egress")), 0);
	g.n = 1;
	assert_int_equal(podspec_egress_gate(&r, &g, &err), 0);
	got = env_from(r.pod, before);
	assert_non_null(strstr(got, ";NO_PROXY=;no_proxy=;"));
	free(got);
	assert_int_equal(json_array_size(json_object_get(json_object_get(r.netpol,
	    "spec"), "egress")), 1);
	podspec_result_free(&r);
	json_decref(o);

	/* CIDRs alone: no proxy, the gate's port alone (test_egress_gate). */
	o = cx("{\"runtime\":\"python\",\"source\":\"print(1)\",\"network\":"
	    "{\"egress\":[{\"cidr\":\"10.20.0.0/16\",\"ports\":[5432]}]}}");
	assert_int_equal(podspec_build(c, o, &r, &err), 0);
	assert_int_equal(r.hosts, 0);
	assert_int_equal(podspec_egress_gate(&r, &g, &err), 0);
	got = env_from(r.pod, before);
	assert_string_equal(got, "AIRLOCK_EGRESS_GATE=" GATE_ARGS " 10.244.0.9;");
	free(got);
	podspec_result_free(&r);
	json_decref(o);
	ctl_config_free(c);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pod_execution),
		cmocka_unit_test(test_pod_hardening),
		cmocka_unit_test(test_direct_pod),
		cmocka_unit_test(test_direct_pod_chunks),
		cmocka_unit_test(test_big_code_goes_to_configmap),
		cmocka_unit_test(test_budget_rejected),
		cmocka_unit_test(test_rejections),
		cmocka_unit_test(test_custom_image_allowed),
		cmocka_unit_test(test_guardrails),
		cmocka_unit_test(test_stream_annotation),
		cmocka_unit_test(test_policy_profile),
		cmocka_unit_test(test_egress_policy),
		cmocka_unit_test(test_gate_ports),
		cmocka_unit_test(test_egress_gate),
		cmocka_unit_test(test_egress_narrowed),
		cmocka_unit_test(test_egress_proxy),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
