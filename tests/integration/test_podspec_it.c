/*
 * Integration: what execution/podspec.c builds is admitted by the real
 * kube-apiserver: the pod passes Pod Security "restricted" in a namespace
 * that enforces it (and a weakened copy does not, so the namespace really
 * enforces), the ConfigMap path too, and the guardrails are valid objects.
 *
 * No kubelet or kube-controller-manager runs yet (issue 4 adds them): pods
 * stay Pending, and the ResourceQuota gets no status, so quota admission
 * would refuse pods in its namespace ("status unknown for quota"); the
 * guardrails are therefore checked in a namespace of their own.
 */
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
#include "itutil.h"
#include "podspec.h"
#include "pool.h"

static const struct k8s_resource netpols = { "networking.k8s.io", "v1", "networkpolicies", 1 };
static const struct k8s_resource quotas = { "", "v1", "resourcequotas", 1 };
static const struct k8s_resource serviceaccounts = { "", "v1", "serviceaccounts", 1 };

static const char conf[] =
    "profiles:\n"
    "  python:\n"
    "    image: airlock/runner-python:0.1\n"
    "    command: [python3, /airlock/code/main.py]\n"
    "    sourceFile: main.py\n"
    "  direct:\n"
    "    image: airlock/runner-python:0.1\n"
    "    command: [/airlock/bin/run, python3, main.py]\n"
    "    sourceFile: main.py\n";

static struct k8s_client *c;
static struct k8s_config *kcfg;
static struct ctl_config *cfg;

static int
group_setup(void **state)
{
	struct k8s_error err;

	(void)state;
	c = it_client(0, &kcfg);
	it_install_crd(c);
	if (ctl_config_parse(conf, sizeof(conf) - 1, "test", &cfg, &err) != 0)
		fail_msg("config: %s", err.message);
	/* What the Helm chart will install: the RuntimeClass and PriorityClass. */
	it_install_classes(c);
	return 0;
}

static int
group_teardown(void **state)
{
	(void)state;
	ctl_config_free(cfg);
	it_client_free(c, kcfg);
	return 0;
}

/* A namespace enforcing Pod Security "restricted". */
static char *
restricted_ns(void)
{
	struct k8s_patch_opts merge = { .type = K8S_PATCH_MERGE };
	struct k8s_error err;
	char *ns = it_namespace_new(c, "it-psa");
	json_t *p = json_pack("{s:{s:{s:s, s:s}}}", "metadata", "labels",
	    "pod-security.kubernetes.io/enforce", "restricted",
	    "pod-security.kubernetes.io/enforce-version", "latest");

	if (k8s_patch(c, &k8s_res_namespaces, NULL, ns, &merge, p, NULL, &err) != 0)
		fail_msg("label namespace: %s", err.message);
	json_decref(p);
	/* As the controller will, before the first pod. */
	p = podspec_service_account(ns);
	if (k8s_create(c, &serviceaccounts, ns, p, NULL, &err) != 0)
		fail_msg("service account: %s", err.message);
	json_decref(p);
	return ns;
}

static json_t *
execution(const char *ns, const char *name, json_t *spec)
{
	struct k8s_error err;
	json_t *o = json_pack("{s:s, s:s, s:{s:s}, s:o}", "apiVersion", "airlock.dev/v1alpha1",
	    "kind", "CodeExecution", "metadata", "name", name, "spec", spec), *out;

	if (k8s_create(c, &cx_resource, ns, o, &out, &err) != 0)
		fail_msg("create execution: %s", err.message);
	json_decref(o);
	return out;
}

static void
test_pod_admitted_under_restricted(void **state)
{
	char *ns = restricted_ns();
	json_t *cx = execution(ns, "hello", json_pack("{s:s, s:s, s:[{s:s, s:s}], s:s}",
	    "runtime", "python", "source", "print(1)", "files", "path", "lib/x.py", "content", "X=1",
	    "stdin", "in"));
	struct podspec_result r;
	struct k8s_error err;
	json_t *out, *weak;

	(void)state;
	assert_int_equal(podspec_build(cfg, cx, &r, &err), 0);
	assert_null(r.configmap);
	if (k8s_create(c, &k8s_res_pods, ns, r.pod, &out, &err) != 0)
		fail_msg("pod refused: %s", err.message);
	/* The server kept every hardening field as sent. */
	assert_string_equal(json_string_value(json_object_get(json_object_get(out, "spec"),
	    "runtimeClassName")), "gvisor");
	assert_string_equal(json_string_value(json_object_get(json_object_get(out, "spec"),
	    "dnsPolicy")), "None");
	assert_true(json_is_false(json_object_get(json_object_get(out, "spec"),
	    "automountServiceAccountToken")));
	assert_string_equal(json_string_value(json_object_get(json_object_get(out, "spec"),
	    "serviceAccountName")), "airlock-execution");
	json_decref(out);

	/* A copy that allows privilege escalation is refused here. */
	weak = json_deep_copy(r.pod);
	json_object_set_new(json_object_get(weak, "metadata"), "name", json_string("weak"));
	json_object_set_new(json_object_get(json_array_get(json_object_get(json_object_get(weak,
	    "spec"), "containers"), 0), "securityContext"), "allowPrivilegeEscalation", json_true());
	assert_int_equal(k8s_create(c, &k8s_res_pods, ns, weak, NULL, &err), K8S_EFORBIDDEN);
	assert_int_equal(err.http_status, 403);
	if (strstr(err.message, "violates PodSecurity \"restricted:latest\": allowPrivilegeEscalation != false") == NULL)
		fail_msg("unexpected refusal: %s", err.message);
	json_decref(weak);
	podspec_result_free(&r);
	json_decref(cx);
	it_namespace_delete(c, ns);
	free(ns);
}

static void
test_configmap_path_admitted(void **state)
{
	char *ns = restricted_ns();
	char *big = malloc(200 * 1024 + 1);
	json_t *cx, *out;
	struct podspec_result r;
	struct k8s_error err;

	(void)state;
	memset(big, '#', 200 * 1024);
	big[200 * 1024] = '\0';
	cx = execution(ns, "big", json_pack("{s:s, s:s}", "runtime", "python", "source", big));
	free(big);
	assert_int_equal(podspec_build(cfg, cx, &r, &err), 0);
	assert_non_null(r.configmap);
	if (k8s_create(c, &k8s_res_configmaps, ns, r.configmap, NULL, &err) != 0)
		fail_msg("configmap refused: %s", err.message);
	if (k8s_create(c, &k8s_res_pods, ns, r.pod, &out, &err) != 0)
		fail_msg("pod refused: %s", err.message);
	assert_string_equal(json_string_value(json_object_get(json_object_get(json_array_get(
	    json_object_get(json_object_get(out, "spec"), "volumes"), 0), "configMap"), "name")),
	    k8s_obj_name(r.configmap));
	json_decref(out);
	podspec_result_free(&r);
	json_decref(cx);
	it_namespace_delete(c, ns);
	free(ns);
}

/*
 * A direct pod (podspec.h) with code at the budget, so five env vars of
 * base64: Pod Security "restricted" admits it, and the server keeps the
 * code whole and the pod without a volume.
 */
static void
test_direct_pod_admitted(void **state)
{
	char *ns = restricted_ns();
	char *big = malloc(PODSPEC_ANNOTATION_BUDGET + 1);
	json_t *cx, *out, *env, *sent;
	struct podspec_result r;
	struct k8s_error err;
	size_t n = 0, i;

	(void)state;
	memset(big, '#', PODSPEC_ANNOTATION_BUDGET);
	big[PODSPEC_ANNOTATION_BUDGET] = '\0';
	cx = execution(ns, "direct", json_pack("{s:s, s:s}", "runtime", "direct",
	    "source", big));
	free(big);
	assert_int_equal(podspec_build(cfg, cx, &r, &err), 0);
	assert_null(r.configmap);
	if (k8s_create(c, &k8s_res_pods, ns, r.pod, &out, &err) != 0)
		fail_msg("pod refused: %s", err.message);
	assert_null(json_object_get(json_object_get(out, "spec"), "volumes"));
	env = json_object_get(json_array_get(json_object_get(json_object_get(out,
	    "spec"), "containers"), 0), "env");
	sent = json_object_get(json_array_get(json_object_get(json_object_get(r.pod,
	    "spec"), "containers"), 0), "env");
	assert_true(json_equal(env, sent));
	for (i = 0; i < json_array_size(env); i++)
		n += strncmp(json_string_value(json_object_get(json_array_get(env, i),
		    "name")), PODSPEC_TAR_ENV, strlen(PODSPEC_TAR_ENV)) == 0;
	assert_int_equal(n, 5);
	json_decref(out);
	podspec_result_free(&r);
	json_decref(cx);
	it_namespace_delete(c, ns);
	free(ns);
}

/*
 * A pool's warm holder (execution/pool.c) is admitted under Pod Security
 * "restricted" too, as the cold pods are, and a weakened copy is not.
 */
static void
test_holder_admitted(void **state)
{
	char *ns = restricted_ns();
	struct k8s_error err;
	json_t *pool, *out, *holder, *weak;

	(void)state;
	pool = json_pack("{s:s, s:s, s:{s:s}, s:{s:s, s:i}}", "apiVersion",
	    "airlock.dev/v1alpha1", "kind", "CodeExecutionPool", "metadata", "name", "py",
	    "spec", "runtime", "direct", "replicas", 1);
	if (k8s_create(c, &pool_resource, ns, pool, &out, &err) != 0)
		fail_msg("create pool: %s", err.message);
	json_decref(pool);
	if ((holder = pool_holder(cfg, out, &err)) == NULL)
		fail_msg("pool_holder: %s", err.message);
	json_decref(out);
	if (k8s_create(c, &k8s_res_pods, ns, holder, &out, &err) != 0)
		fail_msg("holder refused: %s", err.message);
	assert_string_equal(json_string_value(json_object_get(json_object_get(out, "spec"),
	    "runtimeClassName")), "gvisor");
	json_decref(out);
	weak = json_deep_copy(holder);
	json_object_set_new(json_object_get(json_array_get(json_object_get(json_object_get(weak,
	    "spec"), "containers"), 0), "securityContext"), "allowPrivilegeEscalation", json_true());
	assert_int_equal(k8s_create(c, &k8s_res_pods, ns, weak, NULL, &err), K8S_EFORBIDDEN);
	if (strstr(err.message, "violates PodSecurity \"restricted:latest\": "
	    "allowPrivilegeEscalation != false") == NULL)
		fail_msg("unexpected refusal: %s", err.message);
	json_decref(weak);
	json_decref(holder);
	it_namespace_delete(c, ns);
	free(ns);
}

static void
test_guardrails_admitted(void **state)
{
	char *ns = it_namespace_new(c, "it-guard");
	struct k8s_error err;
	json_t *np = podspec_network_policy(ns), *rq, *out;
	char *warn = NULL;

	(void)state;
	if (k8s_create(c, &netpols, ns, np, &out, &err) != 0)
		fail_msg("networkpolicy refused: %s", err.message);
	assert_string_equal(json_string_value(json_array_get(json_object_get(json_object_get(out,
	    "spec"), "policyTypes"), 1)), "Egress");
	assert_null(json_object_get(json_object_get(out, "spec"), "egress"));
	json_decref(out);
	json_decref(np);
	rq = podspec_resource_quota(cfg, ns, NULL, &warn);
	assert_null(warn);
	if (k8s_create(c, &quotas, ns, rq, &out, &err) != 0)
		fail_msg("resourcequota refused: %s", err.message);
	assert_string_equal(json_string_value(json_object_get(json_object_get(json_object_get(out,
	    "spec"), "hard"), "pods")), "20");
	json_decref(out);
	json_decref(rq);
	it_namespace_delete(c, ns);
	free(ns);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pod_admitted_under_restricted),
		cmocka_unit_test(test_configmap_path_admitted),
		cmocka_unit_test(test_direct_pod_admitted),
		cmocka_unit_test(test_holder_admitted),
		cmocka_unit_test(test_guardrails_admitted),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
