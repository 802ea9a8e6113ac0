/*
 * The chart on the real node (NODE=1 tests/cluster/up.sh), in order:
 *
 *   1. helm install, and both daemons become ready as pods;
 *   2. a tenant holding only airlock-editor in its namespace runs code,
 *      and may do nothing else;
 *   3. helm upgrade with changed values, which take effect;
 *   4. helm test;
 *   5. helm uninstall, which leaves nothing of Airlock's but the CRD.
 *
 * The test node has no service proxy and its pod network does not reach
 * the API server (tests/cluster/README.md), so the daemons run on the
 * host's network and are given the API server's address (apiServer.*),
 * with one controller replica (two would share the node's metrics port).
 * Everything else is the chart's defaults.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "artifacts.h"
#include "client.h"
#include "config.h"
#include "itutil.h"
#include "pool.h"
#include "xmalloc.h"

#define RELEASE	"airlock"
#define RELNS	"airlock-system"
/* A Node object with no kubelet, for the delete guard's node rule. */
#define OTHER_NODE	"airlock-guard-other"

static const struct k8s_resource res_nodes = { "", "v1", "nodes", 0 };

static struct k8s_client *c;
static struct k8s_config *kcfg;
static char values[] = "/tmp/airlock-chart-values-XXXXXX";
static char *tenant_ns;

/* Run a shell command; its output (stdout and stderr, caller frees). */
static char *
sh(int *status, const char *fmt, ...)
{
	char cmd[8192], *out;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	*status = it_sh(cmd, &out, NULL);
	return out;
}

static const char *
chart(void)
{
	static char path[4096];

	snprintf(path, sizeof(path), "%s/charts/airlock",
	    getenv("AIRLOCK_TOP") ? getenv("AIRLOCK_TOP") : ".");
	return path;
}

/* "repo:tag" of an image reference into the values' form. */
static void
image_values(FILE *f, const char *key, const char *ref)
{
	const char *colon = strrchr(ref, ':');

	fprintf(f, "  %s: {repository: %.*s, tag: \"%s\", pullPolicy: Never}\n",
	    key, (int)(colon - ref), ref, colon + 1);
}

static int
group_setup(void **state)
{
	const char *api = it_env_need("APISERVER_URL");
	FILE *f;
	int fd, st;
	char *out;

	(void)state;
	c = it_client(0, &kcfg);
	if ((fd = mkstemp(values)) < 0 || (f = fdopen(fd, "w")) == NULL)
		fail_msg("cannot write the values");
	fprintf(f, "image:\n");
	image_values(f, "controller", it_env_need("CONTROLLER_IMAGE"));
	image_values(f, "nodeAgent", it_env_need("NODE_AGENT_IMAGE"));
	fprintf(f, "apiServer: {host: 127.0.0.1, port: \"%s\"}\n", strrchr(api, ':') + 1);
	fprintf(f, "controller: {replicas: 1, hostNetwork: true, metricsPort: %d, "
	    "probePort: %d}\n", it_free_port(), it_free_port());
	fprintf(f, "nodeAgent:\n  hostNetwork: true\n  metricsPort: %d\n  probePort: %d\n"
	    "  hostPaths: {podLogs: %s, containerdSocket: %s, cgroup: /sys/fs/cgroup}\n"
	    "  cgroupRoot: %s\n", it_free_port(), it_free_port(), it_env_need("POD_LOGS_DIR"),
	    it_env_need("CONTAINERD_SOCK"), it_env_need("CGROUP_ROOT"));
	/* Names of our own: the e2e tier's classes may exist already. */
	fprintf(f, "runtimeClass: {name: airlock-chart-gvisor}\n"
	    "priorityClass: {name: airlock-chart-execution}\n");
	fprintf(f, "config:\n  profiles:\n"
	    "    python: {image: %s, command: [/airlock/bin/run, python3, main.py], sourceFile: main.py}\n"
	    "    node: {image: %s, command: [/airlock/bin/run, node, main.js], sourceFile: main.js}\n"
	    "    bash: {image: %s, command: [/airlock/bin/run, bash, main.sh], sourceFile: main.sh}\n",
	    it_env_need("RUNNER_PYTHON_IMAGE"), it_env_need("RUNNER_NODE_IMAGE"), it_env_need("RUNNER_BASH_IMAGE"));
	fprintf(f, "test: {image: %s}\n", it_env_need("RUNNER_PYTHON_IMAGE"));
	fclose(f);
	/* The chart runs executions on nodes labelled for gVisor only. */
	out = sh(&st, "%s --kubeconfig %s label node %s node-restriction.kubernetes.io/airlock-gvisor=true --overwrite",
	    it_env_need("KUBECTL"), it_env_need("KUBECONFIG_ADMIN"), it_env_need("NODE_NAME"));
	if (st != 0)
		fail_msg("label node: %s", out);
	free(out);
	setenv("KUBECONFIG", it_env_need("KUBECONFIG_ADMIN"), 1);
	return 0;
}

static int
group_teardown(void **state)
{
	int st;

	(void)state;
	free(sh(&st, "'%s' uninstall %s -n %s --wait", it_helm(), RELEASE, RELNS));
	free(sh(&st, "%s --kubeconfig %s label node %s node-restriction.kubernetes.io/airlock-gvisor-",
	    it_env_need("KUBECTL"), it_env_need("KUBECONFIG_ADMIN"), it_env_need("NODE_NAME")));
	if (tenant_ns)
		it_namespace_delete(c, tenant_ns);
	free(sh(&st, "%s --kubeconfig %s delete ns %s --wait=false", it_env_need("KUBECTL"),
	    it_env_need("KUBECONFIG_ADMIN"), RELNS));
	unlink(values);
	free(tenant_ns);
	it_client_free(c, kcfg);
	return 0;
}

static const struct k8s_resource res_deploy = { "apps", "v1", "deployments", 1 };
static const struct k8s_resource res_ds = { "apps", "v1", "daemonsets", 1 };

static long long
num(json_t *o, const char *a, const char *b)
{
	return json_integer_value(json_object_get(json_object_get(o, a), b));
}

/* Both daemons rolled out: every pod of the current spec ready. */
static int
rolled_out(void *arg)
{
	struct k8s_error err;
	json_t *d = NULL, *ds = NULL;
	int ok;

	(void)arg;
	ok = k8s_get(c, &res_deploy, RELNS, RELEASE "-controller", &d, &err) == 0 &&
	    k8s_get(c, &res_ds, RELNS, RELEASE "-node-agent", &ds, &err) == 0 &&
	    num(d, "status", "observedGeneration") == num(d, "metadata", "generation") &&
	    num(d, "status", "updatedReplicas") == 1 &&
	    num(d, "status", "readyReplicas") == 1 &&
	    num(d, "status", "replicas") == 1 &&
	    num(ds, "status", "observedGeneration") == num(ds, "metadata", "generation") &&
	    num(ds, "status", "updatedNumberScheduled") == 1 &&
	    num(ds, "status", "numberReady") == 1;
	json_decref(d);
	json_decref(ds);
	return ok;
}

static void
wait_rolled_out(void)
{
	int st;

	if (!it_wait_for(rolled_out, NULL, 120000)) {
		char *out = sh(&st, "%s --kubeconfig %s get pods -n %s -o wide; "
		    "%s --kubeconfig %s logs -n %s -l app.kubernetes.io/instance=%s --tail 20",
		    it_env_need("KUBECTL"), it_env_need("KUBECONFIG_ADMIN"), RELNS, it_env_need("KUBECTL"),
		    it_env_need("KUBECONFIG_ADMIN"), RELNS, RELEASE);

		fail_msg("the daemons did not roll out in 120 s:\n%s", out);
	}
}

/* The release namespace is absent: a previous run's uninstall is done. */
static int
relns_gone(void *arg)
{
	struct k8s_error err;
	json_t *o = NULL;
	int rc = k8s_get(c, &k8s_res_namespaces, NULL, RELNS, &o, &err);

	(void)arg;
	json_decref(o);
	return rc == K8S_ENOTFOUND;
}

static void
test_install(void **state)
{
	char *out;
	int st;

	(void)state;
	/* Run twice on one cluster, the last run's namespace may still be going. */
	if (!it_wait_for(relns_gone, NULL, 120000))
		fail_msg("namespace %s from an earlier run is still there after 120 s", RELNS);
	out = sh(&st, "'%s' install %s '%s' -n %s --create-namespace -f %s --wait --timeout 120s",
	    it_helm(), RELEASE, chart(), RELNS, values);
	if (st != 0)
		fail_msg("helm install: %s", out);
	assert_non_null(strstr(out, "STATUS: deployed"));
	free(out);
	wait_rolled_out();
}

/*
 * A client that authenticates as ServiceAccount ns/sa's token, bound to the
 * object kind/name when kind is not NULL: a Node, or a Pod (as the token
 * the kubelet mounts); either way the API server names the node in it.
 * NULL when such a token cannot be made (no such object).
 */
static struct k8s_client *
sa_client_bound_to(const char *ns, const char *sa, const char *kind,
    const char *node, struct k8s_config **cfgp)
{
	char path[] = "/tmp/airlock-tenant-kc-XXXXXX", *tok, *nl;
	struct k8s_client *tc;
	struct k8s_error err;
	FILE *f;
	int fd, st;

	if (kind)
		tok = sh(&st, "%s --kubeconfig %s create token %s -n %s --duration 10m "
		    "--bound-object-kind %s --bound-object-name %s",
		    it_env_need("KUBECTL"), it_env_need("KUBECONFIG_ADMIN"), sa, ns, kind, node);
	else
		tok = sh(&st, "%s --kubeconfig %s create token %s -n %s --duration 10m",
		    it_env_need("KUBECTL"), it_env_need("KUBECONFIG_ADMIN"), sa, ns);
	if (st != 0 && kind) {
		free(tok);
		return NULL;
	}
	if (st != 0)
		fail_msg("create token: %s", tok);
	if ((nl = strchr(tok, '\n')) != NULL)
		*nl = '\0';
	if ((fd = mkstemp(path)) < 0 || (f = fdopen(fd, "w")) == NULL)
		fail_msg("mkstemp");
	fprintf(f, "apiVersion: v1\nkind: Config\ncurrent-context: t\n"
	    "clusters:\n- name: c\n  cluster: {server: %s, certificate-authority: %s/.cluster/pki/ca.crt}\n"
	    "users:\n- name: u\n  user: {token: %s}\n"
	    "contexts:\n- name: t\n  context: {cluster: c, user: u, namespace: %s}\n",
	    it_env_need("APISERVER_URL"), getenv("AIRLOCK_TOP") ? getenv("AIRLOCK_TOP") : ".",
	    tok, ns);
	fclose(f);
	free(tok);
	if (k8s_config_load_kubeconfig(path, NULL, cfgp, &err) != 0 ||
	    k8s_client_new(*cfgp, NULL, &tc, &err) != 0)
		fail_msg("tenant client: %s", err.message);
	unlink(path);
	return tc;
}

static struct k8s_client *
sa_client_bound(const char *ns, const char *sa, const char *node,
    struct k8s_config **cfgp)
{
	return sa_client_bound_to(ns, sa, node ? "Node" : NULL, node, cfgp);
}

static struct k8s_client *
sa_client(const char *ns, const char *sa, struct k8s_config **cfgp)
{
	return sa_client_bound_to(ns, sa, NULL, NULL, cfgp);
}

struct gone {
	const char	*name;
};

static int
pod_gone(void *arg)
{
	struct gone *g = arg;
	struct k8s_error err;
	json_t *o = NULL;
	int rc = k8s_get(c, &k8s_res_pods, tenant_ns, g->name, &o, &err);

	json_decref(o);
	return rc == K8S_ENOTFOUND;
}

/* Create an execution as cl and wait for its end: its status. */
static json_t *
run_cx(struct k8s_client *cl, const char *name, const char *spec)
{
	struct k8s_error err;
	json_t *o = json_pack("{s:s, s:s, s:{s:s}, s:o}", "apiVersion",
	    "airlock.dev/v1alpha1", "kind", "CodeExecution", "metadata", "name",
	    name, "spec", json_loads(spec, 0, NULL));
	long end = it_mono_ms() + 120000;
	const char *ph;

	if (k8s_create(cl, &cx_resource, tenant_ns, o, NULL, &err) != 0)
		fail_msg("create %s: %s", name, err.message);
	json_decref(o);
	for (o = NULL;; it_sleep_ms(100)) {
		json_decref(o);
		o = NULL;
		if (k8s_get(cl, &cx_resource, tenant_ns, name, &o, &err) == 0 &&
		    (ph = json_string_value(json_object_get(json_object_get(o,
		    "status"), "phase"))) != NULL && (strcmp(ph, "Succeeded") == 0 ||
		    strcmp(ph, "Failed") == 0 || strcmp(ph, "TimedOut") == 0))
			break;
		if (it_mono_ms() > end)
			fail_msg("%s did not finish: %s", name,
			    o ? json_dumps(json_object_get(o, "status"), 0) : err.message);
	}
	{
		json_t *st = json_incref(json_object_get(o, "status"));

		json_decref(o);
		return st;
	}
}

static void
test_tenant_runs_code(void **state)
{
	struct k8s_config *tcfg;
	struct k8s_client *tc;
	struct k8s_error err;
	json_t *st, *o = NULL;
	char *out;
	int rc;

	(void)state;
	tenant_ns = it_namespace_new(c, "tenant");
	out = sh(&rc, "%s --kubeconfig %s -n %s create serviceaccount tenant && "
	    "%s --kubeconfig %s -n %s create rolebinding tenant --clusterrole=airlock-editor "
	    "--serviceaccount=%s:tenant", it_env_need("KUBECTL"), it_env_need("KUBECONFIG_ADMIN"),
	    tenant_ns, it_env_need("KUBECTL"), it_env_need("KUBECONFIG_ADMIN"), tenant_ns, tenant_ns);
	if (rc != 0)
		fail_msg("tenant setup: %s", out);
	free(out);
	tc = sa_client(tenant_ns, "tenant", &tcfg);

	st = run_cx(tc, "hello", "{\"runtime\":\"python\",\"source\":\"print('hello from the chart')\\n\"}");
	assert_string_equal(json_string_value(json_object_get(st, "phase")), "Succeeded");
	assert_string_equal(json_string_value(json_object_get(st, "stdout")), "hello from the chart\n");
	assert_string_equal(json_string_value(json_object_get(st, "stderr")), "");
	assert_int_equal(json_integer_value(json_object_get(st, "exitCode")), 0);
	assert_true(json_integer_value(json_object_get(st, "peakMemoryBytes")) > 0);
	/* The agent collected its pod, through the delete guard. */
	{
		struct gone g = { json_string_value(json_object_get(st, "podName")) };

		if (!it_wait_for(pod_gone, &g, 20000))
			fail_msg("pod %s was not collected", g.name);
	}
	json_decref(st);

	/* airlock-editor is all it holds: no pods, no other namespace. */
	rc = k8s_get(tc, &k8s_res_pods, tenant_ns, "x", &o, &err);
	assert_int_equal(rc, K8S_EFORBIDDEN);
	o = json_pack("{s:s, s:s, s:{s:s}, s:{s:s, s:s}}", "apiVersion",
	    "airlock.dev/v1alpha1", "kind", "CodeExecution", "metadata", "name",
	    "elsewhere", "spec", "runtime", "python", "source", "print(1)");
	rc = k8s_create(tc, &cx_resource, RELNS, o, NULL, &err);
	json_decref(o);
	assert_int_equal(rc, K8S_EFORBIDDEN);
	k8s_client_free(tc);
	k8s_config_free(tcfg);
}

/*
 * Who created an execution is the API server's to say: the chart's
 * MutatingAdmissionPolicy writes the creator's user name into
 * airlock.dev/created-by over whatever the tenant wrote, and its
 * ValidatingAdmissionPolicy refuses any change after, to anyone.
 */
static void
test_creator_stamp(void **state)
{
	struct k8s_patch_opts merge = { .type = K8S_PATCH_MERGE };
	struct k8s_config *tcfg;
	struct k8s_client *tc;
	struct k8s_error err;
	char who[256];
	json_t *o, *p;
	int rc;

	(void)state;
	snprintf(who, sizeof(who), "system:serviceaccount:%s:tenant", tenant_ns);
	tc = sa_client(tenant_ns, "tenant", &tcfg);
	o = json_pack("{s:s, s:s, s:{s:s, s:{s:s}}, s:{s:s, s:s, s:b}}", "apiVersion",
	    "airlock.dev/v1alpha1", "kind", "CodeExecution", "metadata", "name", "forger",
	    "annotations", "airlock.dev/created-by", "system:admin",
	    "spec", "runtime", "python", "source", "print(1)", "cancel", 1);
	assert_int_equal(k8s_create(tc, &cx_resource, tenant_ns, o, NULL, &err), 0);
	json_decref(o);
	o = NULL;
	assert_int_equal(k8s_get(tc, &cx_resource, tenant_ns, "forger", &o, &err), 0);
	assert_string_equal(json_string_value(json_object_get(json_object_get(json_object_get(o,
	    "metadata"), "annotations"), "airlock.dev/created-by")), who);
	json_decref(o);
	/* Changed, removed: by the tenant, then by a cluster admin. */
	for (int i = 0; i < 4; i++) {
		p = json_pack("{s:{s:{s:s?}}}", "metadata", "annotations",
		    "airlock.dev/created-by", i % 2 ? NULL : "someone-else");
		rc = k8s_patch(i < 2 ? tc : c, &cx_resource, tenant_ns, "forger", &merge, p,
		    NULL, &err);
		json_decref(p);
		assert_int_equal(rc, K8S_EFORBIDDEN);
		if (strstr(err.message, "airlock.dev/created-by] cannot be changed") == NULL)
			fail_msg("refused, but not by the stamp's guard: %s", err.message);
	}
	/* Other annotations stay the tenant's. */
	p = json_pack("{s:{s:{s:s}}}", "metadata", "annotations", "mine", "yes");
	assert_int_equal(k8s_patch(tc, &cx_resource, tenant_ns, "forger", &merge, p, NULL,
	    &err), 0);
	json_decref(p);
	assert_int_equal(k8s_delete(tc, &cx_resource, tenant_ns, "forger", NULL, NULL, &err), 0);
	k8s_client_free(tc);
	k8s_config_free(tcfg);
}

/* n labels "tenant.example/l-N" from first, as an object (a new reference). */
static json_t *
many_labels(int first, int n)
{
	json_t *l = json_object();
	char k[64];

	for (int i = first; i < first + n; i++) {
		snprintf(k, sizeof(k), "tenant.example/l-%d", i);
		json_object_set_new(l, k, json_string("v"));
	}
	return l;
}

/* airlock-stored counts the executions the namespace has now. */
static char stored_seen[96];

static int
stored_counted(void *arg)
{
	static const struct k8s_resource rq = { "", "v1", "resourcequotas", 1 };
	struct k8s_error err;
	json_t *list = NULL, *q = NULL;
	const char *used;
	char n[32];
	int ok;

	(void)arg;
	if (k8s_list(c, &cx_resource, tenant_ns, NULL, &list, &err) != 0 ||
	    k8s_get(c, &rq, tenant_ns, "airlock-stored", &q, &err) != 0) {
		json_decref(list);
		return 0;
	}
	snprintf(n, sizeof(n), "%zu", json_array_size(json_object_get(list, "items")));
	used = json_string_value(json_object_get(json_object_get(json_object_get(q, "status"),
	    "used"), "count/codeexecutions.airlock.dev"));
	ok = used && strcmp(used, n) == 0;
	snprintf(stored_seen, sizeof(stored_seen), "%s executions, counted %s", n,
	    used ? used : "(none)");
	json_decref(list);
	json_decref(q);
	return ok;
}

/*
 * What a tenant may write into metadata (issue 27): the chart's metadata
 * guard refuses a 65th label on an execution or a pool, at creation and
 * after; and a namespace holds the chart's 10 pools, no more (the
 * airlock-stored quota).
 */
static void
test_metadata_guard(void **state)
{
	struct k8s_patch_opts merge = { .type = K8S_PATCH_MERGE };
	struct k8s_config *tcfg;
	struct k8s_client *tc;
	struct k8s_error err;
	json_t *o, *p;
	char name[32];
	int rc, made = 0;

	(void)state;
	tc = sa_client(tenant_ns, "tenant", &tcfg);
	o = json_pack("{s:s, s:s, s:{s:s, s:o}, s:{s:s, s:s, s:b}}", "apiVersion",
	    "airlock.dev/v1alpha1", "kind", "CodeExecution", "metadata", "name", "tagged",
	    "labels", many_labels(0, 65), "spec", "runtime", "python", "source", "print(1)",
	    "cancel", 1);
	rc = k8s_create(tc, &cx_resource, tenant_ns, o, NULL, &err);
	if (rc == 0 || strstr(err.message, "metadata.labels: at most 64") == NULL)
		fail_msg("65 labels: %d %s", rc, err.message);
	json_object_set_new(json_object_get(o, "metadata"), "labels", many_labels(0, 64));
	assert_int_equal(k8s_create(tc, &cx_resource, tenant_ns, o, NULL, &err), 0);
	json_decref(o);
	/* After admission too. */
	p = json_pack("{s:{s:o}}", "metadata", "labels", many_labels(64, 1));
	rc = k8s_patch(tc, &cx_resource, tenant_ns, "tagged", &merge, p, NULL, &err);
	json_decref(p);
	if (rc == 0 || strstr(err.message, "metadata.labels: at most 64") == NULL)
		fail_msg("a 65th label: %d %s", rc, err.message);
	assert_int_equal(k8s_delete(tc, &cx_resource, tenant_ns, "tagged", NULL, NULL, &err), 0);
	/*
	 * The delete has the quota controller count the namespace again, from
	 * its cache: a count that lands while the pools below are made can
	 * miss the newest and let an 11th in (CI, stop 38). Its count first.
	 */
	if (!it_wait_for(stored_counted, NULL, 30000))
		fail_msg("airlock-stored never counted the executions left: %s", stored_seen);

	/* Pools: the guard, then the quota's 10. */
	o = json_pack("{s:s, s:s, s:{s:s, s:o}, s:{s:s, s:i}}", "apiVersion",
	    "airlock.dev/v1alpha1", "kind", "CodeExecutionPool", "metadata", "name", "p-x",
	    "labels", many_labels(0, 65), "spec", "runtime", "python", "replicas", 0);
	rc = k8s_create(tc, &pool_resource, tenant_ns, o, NULL, &err);
	if (rc == 0 || strstr(err.message, "metadata.labels: at most 64") == NULL)
		fail_msg("a pool with 65 labels: %d %s", rc, err.message);
	json_object_del(json_object_get(o, "metadata"), "labels");
	for (int i = 0; i < 12; i++) {
		snprintf(name, sizeof(name), "p-%d", i);
		json_object_set_new(json_object_get(o, "metadata"), "name", json_string(name));
		rc = k8s_create(tc, &pool_resource, tenant_ns, o, NULL, &err);
		if (rc == 0) {
			made++;
			continue;
		}
		if (strstr(err.message, "exceeded quota: airlock-stored") == NULL)
			fail_msg("pool %d refused, but: %s", i, err.message);
	}
	json_decref(o);
	assert_int_equal(made, 10);
	for (int i = 0; i < 12; i++) {
		snprintf(name, sizeof(name), "p-%d", i);
		rc = k8s_delete(tc, &pool_resource, tenant_ns, name, NULL, NULL, &err);
		assert_int_equal(rc, i < 10 ? 0 : K8S_ENOTFOUND);
	}
	k8s_client_free(tc);
	k8s_config_free(tcfg);
}

/* The audit record of test_tenant_runs_code's "hello" is in the controller's output. */
struct audit_find { const char *uid; json_t *rec; };

static int
audit_found(void *arg)
{
	struct audit_find *a = arg;
	char *out, *line, *save = NULL;
	int st;

	out = sh(&st, "%s --kubeconfig %s logs -n %s deploy/%s-controller", it_env_need("KUBECTL"),
	    it_env_need("KUBECONFIG_ADMIN"), RELNS, RELEASE);
	for (line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		json_t *r = line[0] == '{' ? json_loads(line, 0, NULL) : NULL;

		if (r && json_string_value(json_object_get(r, "uid")) &&
		    strcmp(json_string_value(json_object_get(r, "uid")), a->uid) == 0) {
			json_decref(a->rec);
			a->rec = r;
		} else
			json_decref(r);
	}
	free(out);
	return a->rec != NULL;
}

static void
test_audit_record(void **state)
{
	struct audit_find a = { NULL, NULL };
	struct k8s_error err;
	char who[256];
	json_t *cx = NULL, *st;

	(void)state;
	assert_int_equal(k8s_get(c, &cx_resource, tenant_ns, "hello", &cx, &err), 0);
	a.uid = k8s_obj_uid(cx);
	if (!it_wait_for(audit_found, &a, 20000))
		fail_msg("no audit record of %s/hello in the controller's output", tenant_ns);
	st = json_object_get(cx, "status");
	snprintf(who, sizeof(who), "system:serviceaccount:%s:tenant", tenant_ns);
	assert_string_equal(json_string_value(json_object_get(a.rec, "kind")), "CodeExecutionAudit");
	assert_string_equal(json_string_value(json_object_get(a.rec, "user")), who);
	assert_string_equal(json_string_value(json_object_get(a.rec, "namespace")), tenant_ns);
	assert_string_equal(json_string_value(json_object_get(a.rec, "name")), "hello");
	/* sha256 of "print('hello from the chart')\n" */
	assert_string_equal(json_string_value(json_object_get(a.rec, "codeSha256")),
	    "5aeb1b5de6fc4aa877b1b13bcb09bbdc3433dbee41ddfc91827194090ae79abb");
	assert_string_equal(json_string_value(json_object_get(a.rec, "runtime")), "python");
	assert_string_equal(json_string_value(json_object_get(a.rec, "image")),
	    it_env_need("RUNNER_PYTHON_IMAGE"));
	assert_string_equal(json_string_value(json_object_get(a.rec, "phase")), "Succeeded");
	assert_int_equal(json_integer_value(json_object_get(a.rec, "exitCode")), 0);
	assert_int_equal(json_integer_value(json_object_get(a.rec, "durationMillis")),
	    json_integer_value(json_object_get(st, "durationMillis")));
	assert_int_equal(json_integer_value(json_object_get(a.rec, "peakMemoryBytes")),
	    json_integer_value(json_object_get(st, "peakMemoryBytes")));
	assert_string_equal(json_string_value(json_object_get(a.rec, "startMode")), "Cold");
	assert_null(json_object_get(a.rec, "stdout"));
	json_decref(a.rec);
	json_decref(cx);
}

/*
 * Files out through the chart's roles and guard: the agent stores them
 * (its artifacts guard admits its own node's), the tenant who ran the
 * code reads them, a viewer of the namespace may not, and no tenant
 * makes one.
 */
static void
test_files_out(void **state)
{
	struct k8s_config *tcfg, *vcfg;
	struct k8s_client *tc, *vc;
	struct k8s_error err;
	json_t *st, *o = NULL;
	char *out;
	int rc;

	(void)state;
	tc = sa_client(tenant_ns, "tenant", &tcfg);
	st = run_cx(tc, "files", "{\"runtime\":\"python\",\"source\":\"open('/airlock/out/"
	    "r.txt', 'w').write('result')\\n\"}");
	assert_string_equal(json_string_value(json_object_get(st, "phase")), "Succeeded");
	assert_int_equal(json_array_size(json_object_get(st, "artifacts")), 1);
	json_decref(st);
	assert_int_equal(k8s_get(tc, &artifacts_resource, tenant_ns, "files", &o, &err), 0);
	assert_string_equal(json_string_value(json_object_get(json_array_get(
	    json_object_get(o, "files"), 0), "content")), "cmVzdWx0");
	assert_string_equal(json_string_value(json_object_get(json_object_get(
	    json_object_get(o, "metadata"), "annotations"), "airlock.dev/node")),
	    it_env_need("NODE_NAME"));
	/* No tenant makes one, not even over a name that is free. */
	json_object_set_new(json_object_get(o, "metadata"), "name", json_string("forged"));
	json_object_del(json_object_get(o, "metadata"), "resourceVersion");
	json_object_del(json_object_get(o, "metadata"), "uid");
	rc = k8s_create(tc, &artifacts_resource, tenant_ns, o, NULL, &err);
	assert_int_equal(rc, K8S_EFORBIDDEN);
	json_decref(o);
	o = NULL;
	out = sh(&rc, "%s --kubeconfig %s -n %s create serviceaccount viewer && "
	    "%s --kubeconfig %s -n %s create rolebinding viewer --clusterrole=airlock-viewer "
	    "--serviceaccount=%s:viewer", it_env_need("KUBECTL"), it_env_need("KUBECONFIG_ADMIN"),
	    tenant_ns, it_env_need("KUBECTL"), it_env_need("KUBECONFIG_ADMIN"), tenant_ns, tenant_ns);
	if (rc != 0)
		fail_msg("viewer setup: %s", out);
	free(out);
	vc = sa_client(tenant_ns, "viewer", &vcfg);
	assert_int_equal(k8s_get(vc, &cx_resource, tenant_ns, "files", &o, &err), 0);
	json_decref(o);
	o = NULL;
	assert_int_equal(k8s_get(vc, &artifacts_resource, tenant_ns, "files", &o, &err),
	    K8S_EFORBIDDEN);
	k8s_client_free(vc);
	k8s_config_free(vcfg);
	k8s_client_free(tc);
	k8s_config_free(tcfg);
}

/*
 * A tenant who may create pods and ConfigMaps (the built-in "edit" role
 * may) cannot make one that carries Airlock's labels, nor put them on one
 * it has: the node agent would take it for an execution pod and let it
 * write its own execution's result.
 */
static void
test_forgery_guard(void **state)
{
	struct k8s_patch_opts merge = { .type = K8S_PATCH_MERGE };
	struct k8s_config *tcfg;
	struct k8s_client *tc;
	struct k8s_error err;
	json_t *o, *p;
	char *out;
	int rc;

	(void)state;
	out = sh(&rc, "%s --kubeconfig %s -n %s create rolebinding tenant-edit --clusterrole=edit "
	    "--serviceaccount=%s:tenant", it_env_need("KUBECTL"), it_env_need("KUBECONFIG_ADMIN"),
	    tenant_ns, tenant_ns);
	if (rc != 0)
		fail_msg("bind edit: %s", out);
	free(out);
	tc = sa_client(tenant_ns, "tenant", &tcfg);
	o = json_pack("{s:s, s:s, s:{s:s, s:{s:s, s:s, s:s}}, s:{s:s}}", "apiVersion", "v1",
	    "kind", "ConfigMap", "metadata", "name", "airlock-forged", "labels",
	    "app.kubernetes.io/managed-by", "airlock-controller",
	    "app.kubernetes.io/component", "execution",
	    "airlock.dev/execution-uid", "00000000-0000-0000-0000-000000000000",
	    "data", "source", "print('forged')");
	rc = k8s_create(tc, &k8s_res_configmaps, tenant_ns, o, NULL, &err);
	json_decref(o);
	assert_int_equal(rc, K8S_EFORBIDDEN);
	if (strstr(err.message, "only the Airlock controller may make or change") == NULL)
		fail_msg("refused, but not by the guard: %s", err.message);
	/*
	 * A pod of the executions' PriorityClass, no label of Airlock's:
	 * refused too (it would count in the executions' quota).
	 */
	o = json_pack("{s:s, s:s, s:{s:s}, s:{s:s, s:[{s:s, s:s}]}}",
	    "apiVersion", "v1", "kind", "Pod", "metadata", "name", "airlock-class",
	    "spec", "priorityClassName", "airlock-chart-execution",
	    "containers", "name", "run", "image", it_env_need("PAUSE_IMAGE"));
	rc = k8s_create(tc, &k8s_res_pods, tenant_ns, o, NULL, &err);
	json_decref(o);
	assert_int_equal(rc, K8S_EFORBIDDEN);
	if (strstr(err.message, "or pods of its PriorityClass") == NULL)
		fail_msg("refused, but not by the guard: %s", err.message);
	/* The same pod spec as an execution's, labels and all: refused. */
	o = json_pack("{s:s, s:s, s:{s:s, s:{s:s, s:s}}, s:{s:[{s:s, s:s}]}}",
	    "apiVersion", "v1", "kind", "Pod", "metadata", "name", "airlock-forged",
	    "labels", "app.kubernetes.io/managed-by", "airlock-controller",
	    "airlock.dev/execution-uid", "00000000-0000-0000-0000-000000000000",
	    "spec", "containers", "name", "run", "image", it_env_need("PAUSE_IMAGE"));
	rc = k8s_create(tc, &k8s_res_pods, tenant_ns, o, NULL, &err);
	json_decref(o);
	assert_int_equal(rc, K8S_EFORBIDDEN);
	if (strstr(err.message, "only the Airlock controller may make or change") == NULL)
		fail_msg("refused, but not by the guard: %s", err.message);
	/* Nor may the cluster admin (system:masters): a create is the controller's. */
	o = json_pack("{s:s, s:s, s:{s:s, s:{s:s, s:s}}, s:{s:[{s:s, s:s}]}}",
	    "apiVersion", "v1", "kind", "Pod", "metadata", "name", "airlock-admin-forged",
	    "labels", "app.kubernetes.io/managed-by", "airlock-controller",
	    "airlock.dev/execution-uid", "00000000-0000-0000-0000-000000000000",
	    "spec", "containers", "name", "run", "image", it_env_need("PAUSE_IMAGE"));
	rc = k8s_create(c, &k8s_res_pods, tenant_ns, o, NULL, &err);
	json_decref(o);
	assert_int_equal(rc, K8S_EFORBIDDEN);
	if (strstr(err.message, "only the Airlock controller may make or change") == NULL)
		fail_msg("the admin was refused, but not by the guard: %s", err.message);
	/* Its own ConfigMap it may make, but not label as Airlock's afterwards. */
	o = json_pack("{s:s, s:s, s:{s:s}, s:{s:s}}", "apiVersion", "v1", "kind", "ConfigMap",
	    "metadata", "name", "mine", "data", "a", "b");
	assert_int_equal(k8s_create(tc, &k8s_res_configmaps, tenant_ns, o, NULL, &err), 0);
	json_decref(o);
	p = json_pack("{s:{s:{s:s}}}", "metadata", "labels", "airlock.dev/execution-uid", "x");
	rc = k8s_patch(tc, &k8s_res_configmaps, tenant_ns, "mine", &merge, p, NULL, &err);
	json_decref(p);
	assert_int_equal(rc, K8S_EFORBIDDEN);
	k8s_client_free(tc);
	k8s_config_free(tcfg);
}

/*
 * The events about the tenant's object name of kind whose message holds
 * needle: 1 when one is there (for it_wait_for, arg a struct rs_event).
 */
struct rs_event {
	const char	*kind, *name, *reason, *needle;
};

static int
event_seen(void *arg)
{
	static const struct k8s_resource res_events = { "", "v1", "events", 1 };
	struct rs_event *e = arg;
	struct k8s_error err;
	char fs[512];
	struct k8s_list_opts lo = { .field_selector = fs };
	json_t *list = NULL, *ev;
	size_t i;
	int found = 0;

	snprintf(fs, sizeof(fs), "involvedObject.kind=%s,involvedObject.name=%s,reason=%s",
	    e->kind, e->name, e->reason);
	if (k8s_list(c, &res_events, tenant_ns, &lo, &list, &err) != 0)
		return 0;
	json_array_foreach(json_object_get(list, "items"), i, ev)
		if (strstr(json_string_value(json_object_get(ev, "message")) ?
		    json_string_value(json_object_get(ev, "message")) : "", e->needle))
			found = 1;
	json_decref(list);
	return found;
}

/*
 * A workload controller is no way around the forgery guard (issue 27): a
 * tenant with "edit" makes a ReplicaSet whose template carries Airlock's
 * labels, an execution uid of its own choosing, the largest output and
 * files-out annotations and the executions' RuntimeClass. The ReplicaSet
 * controller (kube-controller-manager, with its own service account in
 * kube-system here) creates its pods: every create is refused, and the
 * ReplicaSet says so (FailedCreate). None of its pods exists.
 */
static void
test_forgery_by_workload(void **state)
{
	static const struct k8s_resource res_rs = { "apps", "v1", "replicasets", 1 };
	struct rs_event e = { "ReplicaSet", "forged", "FailedCreate",
	    "only the Airlock controller may make or change" };
	struct k8s_list_opts lo = { .label_selector = "forged=yes" };
	struct k8s_config *tcfg;
	struct k8s_client *tc;
	struct k8s_error err;
	json_t *rs, *list = NULL;

	(void)state;
	/* The "edit" binding is test_forgery_guard's. */
	tc = sa_client(tenant_ns, "tenant", &tcfg);
	/* Hardened as pause_pod's: Pod Security must not be what refuses it. */
	rs = json_pack("{s:s, s:s, s:{s:s}, s:{s:i, s:{s:{s:s}},"
	    " s:{s:{s:{s:s, s:s, s:s, s:s}, s:{s:s, s:s, s:s, s:s}},"
	    " s:{s:s, s:b, s:{s:b, s:i, s:{s:s}},"
	    " s:[{s:s, s:s, s:s, s:{s:b, s:{s:[s]}}}]}}}}",
	    "apiVersion", "apps/v1", "kind", "ReplicaSet", "metadata", "name", "forged",
	    "spec", "replicas", 3, "selector", "matchLabels", "forged", "yes",
	    "template", "metadata", "labels", "forged", "yes",
	    "app.kubernetes.io/managed-by", "airlock-controller",
	    "app.kubernetes.io/component", "execution",
	    "airlock.dev/execution-uid", "00000000-0000-0000-0000-000000000027",
	    "annotations", "airlock.dev/execution", "forged",
	    "airlock.dev/output-max-bytes", "1048576",
	    "airlock.dev/timeout-ms", "3600000",
	    "airlock.dev/out", "1048576 256",
	    "spec", "runtimeClassName", "airlock-chart-gvisor",
	    "automountServiceAccountToken", 0,
	    "securityContext", "runAsNonRoot", 1, "runAsUser", 65535,
	    "seccompProfile", "type", "RuntimeDefault",
	    "containers", "name", "run", "image", it_env_need("PAUSE_IMAGE"),
	    "imagePullPolicy", "Never", "securityContext",
	    "allowPrivilegeEscalation", 0, "capabilities", "drop", "ALL");
	if (k8s_create(tc, &res_rs, tenant_ns, rs, NULL, &err) != 0)
		fail_msg("the tenant's ReplicaSet: %s", err.message);
	json_decref(rs);
	if (!it_wait_for(event_seen, &e, 30000))
		fail_msg("no FailedCreate from the forgery guard on the ReplicaSet within 30 s");
	/* Not one of its pods was admitted. */
	if (k8s_list(c, &k8s_res_pods, tenant_ns, &lo, &list, &err) != 0)
		fail_msg("list pods: %s", err.message);
	assert_int_equal(json_array_size(json_object_get(list, "items")), 0);
	json_decref(list);
	assert_int_equal(k8s_delete(tc, &res_rs, tenant_ns, "forged", NULL, NULL, &err), 0);
	k8s_client_free(tc);
	k8s_config_free(tcfg);
}

/* A CONNECT to pods/NAME/SUB as tc: the API server's refusal, or "". */
static char *
connect_refusal(struct k8s_client *tc, const char *name, const char *sub)
{
	struct k8s_error err;
	char path[512];
	long status = 0;
	int rc;

	snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods/%s/%s%s", tenant_ns,
	    name, sub, strcmp(sub, "portforward") == 0 ? "?ports=80" :
	    "?command=true&stdout=true");
	rc = k8s_request(tc, "POST", path, NULL, NULL, 0, &status, NULL, &err);
	return xstrdup(rc == 0 ? "" : status == 403 ? err.message : "");
}

/*
 * With "edit" a tenant may exec, attach and port-forward into its pods,
 * and add ephemeral containers to them: never into an Airlock sandbox
 * (an idle warm holder would keep what it left for the next execution).
 * Its own pods, whatever their name, are not the guard's. A session's
 * sandbox is one (docs/sessions.md): its kernel is the session's state.
 */
static void
test_sandbox_guard(void **state)
{
	static const char *const subs[] = { "exec", "attach", "portforward" };
	const char *names[] = { "airlock-warm-x7k2p",
	    "airlock-0b9c4b1e-1111-2222-3333-444455556666",
	    "airlock-session-0b9c4b1e-1111-2222-3333-444455556666", NULL };
	struct k8s_patch_opts sp = { .type = K8S_PATCH_STRATEGIC,
	    .subresource = "ephemeralcontainers" };
	struct k8s_config *tcfg;
	struct k8s_client *tc;
	struct k8s_error err;
	const char *pod = NULL;
	json_t *p, *o = NULL;
	char *m, *out;
	long long end;
	int rc;

	(void)state;
	/* "edit" cannot add ephemeral containers: a role that can, on top. */
	out = sh(&rc, "%s --kubeconfig %s -n %s create role debug --verb=patch,update "
	    "--resource=pods/ephemeralcontainers && %s --kubeconfig %s -n %s create "
	    "rolebinding debug --role=debug --serviceaccount=%s:tenant",
	    it_env_need("KUBECTL"), it_env_need("KUBECONFIG_ADMIN"), tenant_ns,
	    it_env_need("KUBECTL"), it_env_need("KUBECONFIG_ADMIN"), tenant_ns, tenant_ns);
	if (rc != 0)
		fail_msg("debug role: %s", out);
	free(out);
	tc = sa_client(tenant_ns, "tenant", &tcfg);
	/* A running execution's pod, the third name. */
	o = json_pack("{s:s, s:s, s:{s:s}, s:{s:s, s:s}}", "apiVersion",
	    "airlock.dev/v1alpha1", "kind", "CodeExecution", "metadata", "name",
	    "sleeper", "spec", "runtime", "python", "source",
	    "import time\nprint('up', flush=True)\ntime.sleep(60)\n");
	if (k8s_create(tc, &cx_resource, tenant_ns, o, NULL, &err) != 0)
		fail_msg("create: %s", err.message);
	json_decref(o);
	for (end = it_mono_ms() + 60000; pod == NULL && it_mono_ms() < end; it_sleep_ms(200)) {
		json_decref(o);
		o = NULL;
		if (k8s_get(c, &cx_resource, tenant_ns, "sleeper", &o, &err) == 0 &&
		    json_string_value(json_object_get(json_object_get(o, "status"), "phase")) &&
		    strcmp(json_string_value(json_object_get(json_object_get(o, "status"),
		    "phase")), "Running") == 0)
			pod = json_string_value(json_object_get(json_object_get(o, "status"),
			    "podName"));
	}
	if (pod == NULL)
		fail_msg("the execution was not running within 60 s");
	names[3] = pod;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		for (size_t j = 0; j < sizeof(subs) / sizeof(subs[0]); j++) {
			m = connect_refusal(tc, names[i], subs[j]);
			if (strstr(m, "nobody may exec, attach or port-forward into an "
			    "Airlock sandbox") == NULL)
				fail_msg("%s into %s: not refused by the guard: '%s'", subs[j],
				    names[i], m);
			free(m);
		}
	/* Not Airlock's names: past the guard (to "not found", or the upgrade). */
	m = connect_refusal(tc, "airlock-warm", "exec");
	assert_string_equal(m, "");
	free(m);
	m = connect_refusal(tc, "airlock-mine", "exec");
	assert_string_equal(m, "");
	free(m);
	m = connect_refusal(tc, "airlock-session-mine", "exec");
	assert_string_equal(m, "");
	free(m);
	p = json_pack("{s:{s:[{s:s, s:s}]}}", "spec", "ephemeralContainers", "name", "dbg",
	    "image", it_env_need("PAUSE_IMAGE"));
	rc = k8s_patch(tc, &k8s_res_pods, tenant_ns, pod, &sp, p, NULL, &err);
	json_decref(p);
	assert_int_equal(rc, K8S_EFORBIDDEN);
	if (strstr(err.message, "nobody may add a container to an Airlock sandbox") == NULL)
		fail_msg("refused, but not by the guard: %s", err.message);
	json_decref(o);
	if (k8s_delete(c, &cx_resource, tenant_ns, "sleeper", NULL, NULL, &err) != 0)
		fail_msg("delete sleeper: %s", err.message);
	k8s_client_free(tc);
	k8s_config_free(tcfg);
}

/*
 * A Node object nothing runs on (tainted, unschedulable), made (make) or
 * deleted: another node, for the guards' node rules without a second kubelet.
 */
static void
other_node(int make)
{
	struct k8s_error err;
	json_t *node;

	if (!make) {
		if (k8s_delete(c, &res_nodes, NULL, OTHER_NODE, NULL, NULL, &err) != 0)
			fail_msg("delete node %s: %s", OTHER_NODE, err.message);
		return;
	}
	node = json_pack("{s:s, s:s, s:{s:s}, s:{s:b, s:[{s:s, s:s, s:s}]}}",
	    "apiVersion", "v1", "kind", "Node", "metadata", "name", OTHER_NODE,
	    "spec", "unschedulable", 1, "taints", "key", "airlock.dev/test-only",
	    "value", "guard", "effect", "NoSchedule");
	if (k8s_create(c, &res_nodes, NULL, node, NULL, &err) != 0 && err.http_status != 409)
		fail_msg("create node: %s", err.message);
	json_decref(node);
}

/*
 * The agent (client ac) makes the files out of test_tenant_runs_code's
 * "hello", for this node, as the agent would: refused with message
 * refusal, or (refusal NULL) made, then deleted.
 */
static void
agent_files_out(struct k8s_client *ac, const char *refusal)
{
	struct k8s_error err;
	json_t *cx = NULL, *a;
	const char *uid;
	int rc;

	if (k8s_get(c, &cx_resource, tenant_ns, "hello", &cx, &err) != 0)
		fail_msg("get hello: %s", err.message);
	uid = json_string_value(json_object_get(json_object_get(cx, "metadata"), "uid"));
	/* As the agent makes them (node-agent/record.c): no files, this node. */
	a = artifacts_object(&(struct artifacts){ 0 }, tenant_ns, "hello", uid,
	    it_env_need("NODE_NAME"));
	rc = k8s_create(ac, &artifacts_resource, tenant_ns, a, NULL, &err);
	json_decref(a);
	json_decref(cx);
	if (refusal == NULL) {
		if (rc != 0)
			fail_msg("the agent bound to its node may not make files out: %s",
			    err.message);
		if (k8s_delete(c, &artifacts_resource, tenant_ns, "hello", NULL, NULL, &err) != 0)
			fail_msg("delete the files out: %s", err.message);
		return;
	}
	if (rc == 0)
		fail_msg("files out were made, not refused by the node rule");
	if (rc != K8S_EFORBIDDEN || strstr(err.message, refusal) == NULL)
		fail_msg("files out: %s, not refused by the node rule", err.message);
}

/*
 * The agent may patch the status of executions on its own node only, by
 * the node name in its token: one bound to another node, or to none, is
 * refused; one bound to the execution's node passes (a no-op patch).
 */
static void
test_agent_status_guard(void **state)
{
	static const struct k8s_patch_opts po = { .type = K8S_PATCH_JSON,
	    .subresource = "status" };
	struct k8s_config *acfg;
	struct k8s_client *ac;
	struct k8s_error err;
	json_t *p = json_pack("[{s:s, s:s, s:s}]", "op", "test", "path", "/apiVersion",
	    "value", "airlock.dev/v1alpha1");
	int rc;

	(void)state;
	/* A token bound to no node: refused. */
	ac = sa_client(RELNS, RELEASE "-node-agent", &acfg);
	rc = k8s_patch(ac, &cx_resource, tenant_ns, "hello", &po, p, NULL, &err);
	assert_int_equal(rc, K8S_EFORBIDDEN);
	if (strstr(err.message, "the node agent's token names no node") == NULL)
		fail_msg("refused, but not by the guard: %s", err.message);
	k8s_client_free(ac);
	k8s_config_free(acfg);
	/*
	 * Bound to another node (a Node object, so that the token can be
	 * had): refused, and so are files out it would make for this node's
	 * execution; bound to the execution's node: both allowed.
	 */
	other_node(1);
	ac = sa_client_bound(RELNS, RELEASE "-node-agent", OTHER_NODE, &acfg);
	if (ac == NULL)
		fail_msg("no token bound to node %s", OTHER_NODE);
	rc = k8s_patch(ac, &cx_resource, tenant_ns, "hello", &po, p, NULL, &err);
	assert_int_equal(rc, K8S_EFORBIDDEN);
	if (strstr(err.message, "the node agent may write the status of executions on its "
	    "own node only") == NULL)
		fail_msg("refused, but not by the node rule: %s", err.message);
	agent_files_out(ac, "the node agent may make files out for its own node only");
	k8s_client_free(ac);
	k8s_config_free(acfg);
	other_node(0);
	ac = sa_client_bound(RELNS, RELEASE "-node-agent", it_env_need("NODE_NAME"), &acfg);
	assert_non_null(ac);
	rc = k8s_patch(ac, &cx_resource, tenant_ns, "hello", &po, p, NULL, &err);
	if (rc != 0)
		fail_msg("the agent bound to its node was refused: %s", err.message);
	agent_files_out(ac, NULL);
	k8s_client_free(ac);
	k8s_config_free(acfg);
	json_decref(p);
}

static int
cx_gone(void *arg)
{
	struct k8s_error err;
	json_t *o = NULL;
	int rc = k8s_get(c, &cx_resource, tenant_ns, arg, &o, &err);

	json_decref(o);
	return rc == K8S_ENOTFOUND;
}

/* Under the chart's identity the controller deletes what outlived its TTL. */
static void
test_ttl(void **state)
{
	json_t *st;

	(void)state;
	/*
	 * 5 s, not 1: run_cx reads the finished execution by polling, and a
	 * 1 s TTL could take it first ("not found": here, and CI in stop 37).
	 */
	st = run_cx(c, "short-lived", "{\"runtime\":\"bash\",\"source\":\"echo bye\\n\","
	    "\"ttlSecondsAfterFinished\":5}");
	assert_string_equal(json_string_value(json_object_get(st, "stdout")), "bye\n");
	json_decref(st);
	if (!it_wait_for(cx_gone, "short-lived", 30000))
		fail_msg("short-lived is still there 30 s after its 5 s TTL");
}

/* The name of the release's node agent pod, on the test node. */
static char *
agent_pod_name(void)
{
	struct k8s_list_opts lo = { .label_selector =
	    "app.kubernetes.io/instance=" RELEASE ",app.kubernetes.io/component=node-agent" };
	struct k8s_error err;
	json_t *list = NULL, *p;
	char *name = NULL;
	size_t i;

	if (k8s_list(c, &k8s_res_pods, RELNS, &lo, &list, &err) != 0)
		fail_msg("list agent pods: %s", err.message);
	json_array_foreach(json_object_get(list, "items"), i, p)
		if (json_object_get(json_object_get(p, "metadata"), "deletionTimestamp") == NULL &&
		    json_is_string(json_object_get(json_object_get(p, "spec"), "nodeName")) &&
		    strcmp(json_string_value(json_object_get(json_object_get(p, "spec"),
		    "nodeName")), it_env_need("NODE_NAME")) == 0)
			free(name), name = xstrdup(k8s_obj_name(p));
	json_decref(list);
	if (name == NULL)
		fail_msg("no node agent pod on %s", it_env_need("NODE_NAME"));
	return name;
}

/*
 * A pod of the pause image in the tenant's namespace, hardened for its
 * Pod Security: labelled as an execution's pod (execution) or not, bound
 * to node or left to the scheduler (NULL).
 */
static void
pause_pod(const char *name, int execution, const char *node)
{
	struct k8s_error err;
	json_t *pod, *md, *spec;

	pod = json_pack("{s:s, s:s, s:{s:s}, s:{s:b, s:{s:b, s:i, s:{s:s}},"
	    " s:[{s:s, s:s, s:s, s:{s:b, s:{s:[s]}}}]}}",
	    "apiVersion", "v1", "kind", "Pod", "metadata", "name", name,
	    "spec", "automountServiceAccountToken", 0,
	    "securityContext", "runAsNonRoot", 1, "runAsUser", 65535,
	    "seccompProfile", "type", "RuntimeDefault",
	    "containers", "name", "c", "image", it_env_need("PAUSE_IMAGE"),
	    "imagePullPolicy", "Never", "securityContext",
	    "allowPrivilegeEscalation", 0, "capabilities", "drop", "ALL");
	md = json_object_get(pod, "metadata");
	spec = json_object_get(pod, "spec");
	if (execution)
		json_object_set_new(md, "labels", json_pack("{s:s, s:s}",
		    "app.kubernetes.io/managed-by", "airlock-controller",
		    "app.kubernetes.io/component", "execution"));
	if (node)
		json_object_set_new(spec, "nodeName", json_string(node));
	/*
	 * One with Airlock's labels the controller alone may make, the
	 * cluster admin not (the forgery guard, issue 27): made as it.
	 */
	if (execution) {
		struct k8s_config *ccfg;
		struct k8s_client *cc = sa_client(RELNS, RELEASE "-controller", &ccfg);

		if (k8s_create(cc, &k8s_res_pods, tenant_ns, pod, NULL, &err) != 0)
			fail_msg("create pod %s as the controller: %s", name, err.message);
		k8s_client_free(cc);
		k8s_config_free(ccfg);
	} else if (k8s_create(c, &k8s_res_pods, tenant_ns, pod, NULL, &err) != 0) {
		fail_msg("create pod %s: %s", name, err.message);
	}
	json_decref(pod);
}

/*
 * The node agent deletes pod in the tenant's namespace with a token bound
 * to kind/name (kind NULL: a token that names no node): refused by the
 * guard with message refusal, or, refusal NULL, allowed.
 */
static void
agent_delete(const char *kind, const char *name, const char *pod, const char *refusal)
{
	struct k8s_config *acfg;
	struct k8s_client *ac;
	struct k8s_error err;
	int rc;

	ac = sa_client_bound_to(RELNS, RELEASE "-node-agent", kind, name, &acfg);
	if (ac == NULL)
		fail_msg("no token bound to %s %s", kind, name);
	rc = k8s_delete(ac, &k8s_res_pods, tenant_ns, pod, NULL, NULL, &err);
	if (refusal == NULL && rc != 0)
		fail_msg("the agent (token bound to %s %s) was refused: %s",
		    kind ? kind : "nothing", name ? name : "", err.message);
	if (refusal != NULL) {
		assert_int_equal(rc, K8S_EFORBIDDEN);
		if (strstr(err.message, refusal) == NULL)
			fail_msg("refused, but not by the node rule: %s", err.message);
	}
	k8s_client_free(ac);
	k8s_config_free(acfg);
}

/*
 * The node agent's identity may delete execution pods only, and only on
 * its own node: RBAC gives it every pod, the chart's
 * ValidatingAdmissionPolicy takes the rest back. The node is the one its
 * token names. For a pod on another node without a second kubelet: a Node
 * object nothing runs on (tainted, unschedulable) and an execution-labelled
 * pod bound to it.
 */
static void
test_agent_delete_guard(void **state)
{
	struct k8s_config *acfg;
	struct k8s_client *ac;
	struct k8s_error err;
	json_t *pod;
	char *agent_pod;
	int rc;

	(void)state;
	pause_pod("bystander", 0, NULL);
	ac = sa_client(RELNS, RELEASE "-node-agent", &acfg);
	rc = k8s_delete(ac, &k8s_res_pods, tenant_ns, "bystander", NULL, NULL, &err);
	assert_int_equal(rc, K8S_EFORBIDDEN);
	if (strstr(err.message, "the node agent may delete execution pods only") == NULL)
		fail_msg("refused, but not by the guard: %s", err.message);
	/* What RBAC gives it still works: reading pods. */
	pod = NULL;
	assert_int_equal(k8s_get(ac, &k8s_res_pods, tenant_ns, "bystander", &pod, &err), 0);
	json_decref(pod);
	k8s_client_free(ac);
	k8s_config_free(acfg);
	assert_int_equal(k8s_delete(c, &k8s_res_pods, tenant_ns, "bystander", NULL,
	    NULL, &err), 0);

	/* The node rule. */
	other_node(1);
	pause_pod("elsewhere", 1, OTHER_NODE);
	/* The token the kubelet mounts: bound to the agent's pod, on our node. */
	agent_pod = agent_pod_name();
	agent_delete("Pod", agent_pod, "elsewhere",
	    "the node agent may delete pods on its own node only");
	free(agent_pod);
	/* A token that names no node: refused, whatever the pod's node. */
	agent_delete(NULL, NULL, "elsewhere", "the node agent's token names no node");
	/* One that names the pod's node: allowed. */
	agent_delete("Node", OTHER_NODE, "elsewhere", NULL);
	other_node(0);
}

/* The pod name of the controller now: its args tell the log level. */
static int
controller_has_debug(void *arg)
{
	struct k8s_list_opts lo = { .label_selector =
	    "app.kubernetes.io/instance=" RELEASE ",app.kubernetes.io/component=controller" };
	struct k8s_error err;
	json_t *list = NULL, *p;
	size_t i;
	int n = 0, debug = 0;

	(void)arg;
	if (k8s_list(c, &k8s_res_pods, RELNS, &lo, &list, &err) != 0)
		return 0;
	json_array_foreach(json_object_get(list, "items"), i, p) {
		json_t *a;
		size_t j;

		if (json_object_get(json_object_get(p, "metadata"), "deletionTimestamp"))
			continue;
		n++;
		json_array_foreach(json_object_get(json_array_get(json_object_get(
		    json_object_get(p, "spec"), "containers"), 0), "args"), j, a)
			debug += strcmp(json_string_value(a), "--log-level=debug") == 0;
	}
	json_decref(list);
	return n == 1 && debug == 1;
}

static void
test_upgrade(void **state)
{
	json_t *st;
	char *out;
	int rc;

	(void)state;
	out = sh(&rc, "'%s' upgrade %s '%s' -n %s -f %s --set config.defaults.memory=192Mi "
	    "--set controller.logLevel=debug --wait --timeout 120s", it_helm(), RELEASE,
	    chart(), RELNS, values);
	if (rc != 0)
		fail_msg("helm upgrade: %s", out);
	assert_non_null(strstr(out, "REVISION: 2"));
	free(out);
	if (!it_wait_for(controller_has_debug, NULL, 120000))
		fail_msg("the controller was not replaced with --log-level=debug");
	wait_rolled_out();
	/* The new default memory limit is the sandbox's MemTotal. */
	st = run_cx(c, "mem", "{\"runtime\":\"bash\",\"source\":\"grep MemTotal /proc/meminfo\\n\"}");
	assert_string_equal(json_string_value(json_object_get(st, "phase")), "Succeeded");
	assert_string_equal(json_string_value(json_object_get(st, "stdout")),
	    "MemTotal:         196608 kB\n");
	json_decref(st);
}

static void
test_helm_test(void **state)
{
	char *out;
	int rc;

	(void)state;
	out = sh(&rc, "'%s' test %s -n %s --timeout 180s", it_helm(), RELEASE, RELNS);
	if (rc != 0) {
		char *logs = sh(&rc, "%s --kubeconfig %s logs -n %s-test run", it_env_need("KUBECTL"),
		    it_env_need("KUBECONFIG_ADMIN"), RELEASE);

		fail_msg("helm test: %s\nthe test pod said:\n%s", out, logs);
	}
	assert_non_null(strstr(out, "TEST SUITE:     run\n"));
	assert_null(strstr(out, "Phase:          Failed"));
	free(out);
}

static const struct k8s_resource res_role = { "rbac.authorization.k8s.io", "v1",
    "clusterroles", 0 };
static const struct k8s_resource res_netpol = { "networking.k8s.io", "v1",
    "networkpolicies", 1 };

/* The tenant's NetworkPolicy is owned by the controller's ClusterRole as it is now. */
static int
netpol_owned_by_role(void *arg)
{
	struct k8s_error err;
	json_t *np = NULL, *role = NULL;
	const char *a, *b;
	int ok = 0;

	(void)arg;
	if (k8s_get(c, &res_netpol, tenant_ns, "airlock-deny-all", &np, &err) == 0 &&
	    k8s_get(c, &res_role, NULL, RELEASE "-controller", &role, &err) == 0) {
		a = json_string_value(json_object_get(json_array_get(json_object_get(
		    json_object_get(np, "metadata"), "ownerReferences"), 0), "uid"));
		b = k8s_obj_uid(role);
		ok = a && b && strcmp(a, b) == 0;
	}
	json_decref(np);
	json_decref(role);
	return ok;
}

/*
 * The controller's ClusterRole deleted and made again (a forced upgrade,
 * a GitOps replace): the garbage collector takes the guardrails with the
 * old role, and the controller puts them back owned by the new one.
 */
static void
test_owner_made_anew(void **state)
{
	struct k8s_error err;
	char *out;
	int rc;

	(void)state;
	assert_true(netpol_owned_by_role(NULL));
	assert_int_equal(k8s_delete(c, &res_role, NULL, RELEASE "-controller", NULL,
	    NULL, &err), 0);
	out = sh(&rc, "'%s' upgrade %s '%s' -n %s -f %s --reuse-values --wait --timeout 120s",
	    it_helm(), RELEASE, chart(), RELNS, values);
	if (rc != 0)
		fail_msg("helm upgrade: %s", out);
	free(out);
	if (!it_wait_for(netpol_owned_by_role, NULL, 90000))
		fail_msg("the guardrails were not put back under the new role in 90 s");
}

/* What an uninstall must not leave: kind, namespace ("" cluster), name. */
static const struct {
	struct k8s_resource	 res;
	int			 tenant;	/* in the tenant namespace */
	const char		*name;
} leftovers[] = {
	{ { "", "v1", "serviceaccounts", 1 }, 1, "airlock-execution" },
	{ { "networking.k8s.io", "v1", "networkpolicies", 1 }, 1, "airlock-deny-all" },
	{ { "", "v1", "resourcequotas", 1 }, 1, "airlock-executions" },
	{ { "apps", "v1", "deployments", 1 }, 0, RELEASE "-controller" },
	{ { "apps", "v1", "daemonsets", 1 }, 0, RELEASE "-node-agent" },
	{ { "coordination.k8s.io", "v1", "leases", 1 }, 0, RELEASE "-controller" },
	{ { "", "v1", "configmaps", 1 }, 0, RELEASE "-controller" },
	{ { "", "v1", "serviceaccounts", 1 }, 0, RELEASE "-controller" },
	{ { "", "v1", "serviceaccounts", 1 }, 0, RELEASE "-node-agent" },
	{ { "", "v1", "services", 1 }, 0, RELEASE "-controller-metrics" },
	{ { "rbac.authorization.k8s.io", "v1", "clusterroles", 0 }, 0, RELEASE "-controller" },
	{ { "rbac.authorization.k8s.io", "v1", "clusterroles", 0 }, 0, RELEASE "-node-agent" },
	{ { "rbac.authorization.k8s.io", "v1", "clusterroles", 0 }, 0, "airlock-editor" },
	{ { "rbac.authorization.k8s.io", "v1", "clusterroles", 0 }, 0, "airlock-viewer" },
	{ { "rbac.authorization.k8s.io", "v1", "clusterrolebindings", 0 }, 0, RELEASE "-controller" },
	{ { "node.k8s.io", "v1", "runtimeclasses", 0 }, 0, "airlock-chart-gvisor" },
	{ { "scheduling.k8s.io", "v1", "priorityclasses", 0 }, 0, "airlock-chart-execution" },
	{ { "admissionregistration.k8s.io", "v1", "validatingadmissionpolicies", 0 }, 0,
	    RELEASE "-node-agent-delete-guard" },
	{ { "admissionregistration.k8s.io", "v1", "validatingadmissionpolicies", 0 }, 0,
	    RELEASE "-controller-forgery-guard" },
	{ { "", "v1", "resourcequotas", 1 }, 1, "airlock-stored" },
	{ { "", "v1", "namespaces", 0 }, 0, RELEASE "-test" },
};

static int
all_gone(void *arg)
{
	struct k8s_error err;
	json_t *o = NULL;

	for (size_t i = 0; i < sizeof(leftovers) / sizeof(leftovers[0]); i++) {
		const char *ns = leftovers[i].res.namespaced ?
		    (leftovers[i].tenant ? tenant_ns : RELNS) : NULL;
		int rc = k8s_get(c, &leftovers[i].res, ns, leftovers[i].name, &o, &err);

		json_decref(o);
		o = NULL;
		if (rc != K8S_ENOTFOUND) {
			if (arg)
				fail_msg("after uninstall: %s %s/%s is still there",
				    leftovers[i].res.plural, ns ? ns : "", leftovers[i].name);
			return 0;
		}
	}
	return 1;
}

static void
test_uninstall(void **state)
{
	struct k8s_error err;
	json_t *o = NULL;
	char *out;
	int rc;

	(void)state;
	/* All of it was there, guardrails included. */
	assert_int_equal(k8s_get(c, &leftovers[1].res, tenant_ns, "airlock-deny-all",
	    &o, &err), 0);
	json_decref(o);
	o = NULL;
	out = sh(&rc, "'%s' uninstall %s -n %s --wait --timeout 120s", it_helm(),
	    RELEASE, RELNS);
	if (rc != 0)
		fail_msg("helm uninstall: %s", out);
	free(out);
	/* The guardrails go with the garbage collector, soon after. */
	if (!it_wait_for(all_gone, NULL, 60000))
		all_gone((void *)1);
	/* The CRD stays, and the tenant's executions with it. */
	assert_int_equal(k8s_get(c, &cx_resource, tenant_ns, "hello", &o, &err), 0);
	json_decref(o);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_install),
		cmocka_unit_test(test_tenant_runs_code),
		cmocka_unit_test(test_creator_stamp),
		cmocka_unit_test(test_metadata_guard),
		cmocka_unit_test(test_audit_record),
		cmocka_unit_test(test_files_out),
		cmocka_unit_test(test_forgery_guard),
		cmocka_unit_test(test_forgery_by_workload),
		cmocka_unit_test(test_sandbox_guard),
		cmocka_unit_test(test_agent_status_guard),
		cmocka_unit_test(test_agent_delete_guard),
		cmocka_unit_test(test_ttl),
		cmocka_unit_test(test_upgrade),
		cmocka_unit_test(test_helm_test),
		cmocka_unit_test(test_owner_made_anew),
		cmocka_unit_test(test_uninstall),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
