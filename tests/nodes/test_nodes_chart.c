/*
 * The chart's node agent on two nodes whose files are in different places
 * (NODES=2 tests/cluster/up.sh; issue 28 item 2): one node group a test
 * node, from tests/cluster/chart-node-values.sh, each with its node's pod
 * logs, containerd socket, runsc root, cgroup root and ports (the nodes
 * share the machine's network, and the daemons run on it, as in
 * tests/chart/test_install.c). Then:
 *
 *   1. helm install: a DaemonSet a group, each with one pod, on its own
 *      node, ready (its /readyz checks it reads that node's pod logs and
 *      reaches that node's containerd: node-agent/docs/agent.md);
 *   2. an execution on each node (the other cordoned) ends Succeeded with
 *      its own output, which only that node's agent could read.
 *
 * Uninstalled at the end, before test_nodes_e2e runs its own agents.
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

#include "client.h"
#include "cx.h"
#include "itutil.h"
#include "xmalloc.h"

#define NODES	2
#define RELEASE	"airlock-nodes"
#define RELNS	"airlock-nodes-system"

static const struct k8s_resource res_ds = { "apps", "v1", "daemonsets", 1 };
static const struct k8s_resource res_deploy = { "apps", "v1", "deployments", 1 };

static struct k8s_client *c;
static struct k8s_config *kcfg;
static char *ns;
static char values[] = "/tmp/airlock-nodes-values-XXXXXX";
static char groups[] = "/tmp/airlock-nodes-groups-XXXXXX";
static const char *top;

/* cmd with /bin/sh, its stdout and stderr together; fails the test unless it exits 0. */
static char *
must(char *cmd)
{
	char *out;

	if (it_sh(cmd, &out, NULL) != 0)
		fail_msg("%s: %s", cmd, out);
	free(cmd);
	return out;
}

/* kubectl as the cluster's admin, with args (a shell fragment). */
static char *
kubectl(const char *args)
{
	return must(xasprintf("'%s' --kubeconfig '%s' %s", it_env_need("KUBECTL"),
	    it_env_need("KUBECONFIG_ADMIN"), args));
}

/* Node i's name (1..NODES), from .cluster/env. */
static const char *
node(int i)
{
	char key[32];

	snprintf(key, sizeof(key), "NODE_%d_NAME", i);
	return it_env_need(key);
}

/* cmd with /bin/sh, whatever it does (cleaning up). */
static void
try(char *cmd)
{
	char *out;

	it_sh(cmd, &out, NULL);
	free(out);
	free(cmd);
}

/* "repo:tag" as the chart's image values (caller frees). */
static char *
image(const char *ref)
{
	const char *colon = strrchr(ref, ':');

	return xasprintf("{repository: \"%.*s\", tag: \"%s\", pullPolicy: Never}",
	    (int)(colon - ref), ref, colon + 1);
}

static int
group_setup(void **state)
{
	const char *api = it_env_need("APISERVER_URL"), *env;
	char *ctl, *agent, *text;
	int fd;

	(void)state;
	if (strcmp(it_env_need("NODE_COUNT"), "2") != 0)
		fail_msg("this tier needs two nodes: NODES=2 tests/cluster/up.sh");
	top = getenv("AIRLOCK_TOP") ? getenv("AIRLOCK_TOP") : ".";
	c = it_client(0, &kcfg);
	/* As test_install's, but for the node groups and class names of its own. */
	ctl = image(it_env_need("CONTROLLER_IMAGE"));
	agent = image(it_env_need("NODE_AGENT_IMAGE"));
	text = xasprintf("image: {controller: %s, nodeAgent: %s}\n"
	    "apiServer: {host: 127.0.0.1, port: \"%s\"}\n"
	    "controller: {replicas: 1, hostNetwork: true, metricsPort: %d, probePort: %d}\n"
	    "nodeAgent: {hostNetwork: true}\n"
	    "runtimeClass: {name: airlock-nodes-gvisor}\n"
	    "priorityClass: {name: airlock-nodes-execution}\n"
	    "config:\n  profiles:\n    python: {image: \"%s\", command: [/airlock/bin/run, "
	    "python3, main.py], sourceFile: main.py}\n", ctl, agent, strrchr(api, ':') + 1,
	    it_free_port(), it_free_port(), it_env_need("RUNNER_PYTHON_IMAGE"));
	if ((fd = mkstemp(values)) < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text) ||
	    close(fd) != 0)
		fail_msg("cannot write the values");
	free(ctl);
	free(agent);
	free(text);
	/* The groups: each node's paths, and ports of its own on the shared network. */
	if ((fd = mkstemp(groups)) < 0)
		fail_msg("cannot write the node groups");
	close(fd);
	env = getenv("AIRLOCK_CLUSTER_ENV");
	free(must(xasprintf("'%s/tests/cluster/chart-node-values.sh' '%s' %d:%d %d:%d >'%s'",
	    top, env ? env : "", it_free_port(), it_free_port(), it_free_port(), it_free_port(),
	    groups)));
	for (int i = 1; i <= NODES; i++) {
		char *args = xasprintf("label node %s node-restriction.kubernetes.io/airlock-gvisor=true "
		    "--overwrite", node(i));

		free(kubectl(args));
		free(args);
	}
	ns = it_namespace_new(c, "nodes-chart");
	setenv("KUBECONFIG", it_env_need("KUBECONFIG_ADMIN"), 1);	/* helm's */
	return 0;
}

/* No admission policy of the release's, and no controller Deployment, is left. */
static int
release_gone(void *arg)
{
	static const struct k8s_resource vap = { "admissionregistration.k8s.io", "v1",
	    "validatingadmissionpolicies", 0 };
	struct k8s_list_opts lo = { .label_selector = "app.kubernetes.io/instance=" RELEASE };
	struct k8s_error err;
	json_t *list = NULL, *o = NULL;
	int gone;

	(void)arg;
	if (k8s_list(c, &vap, NULL, &lo, &list, &err) != 0)
		return 0;
	gone = json_array_size(json_object_get(list, "items")) == 0 &&
	    k8s_get(c, &res_deploy, RELNS, RELEASE "-controller", &o, &err) == K8S_ENOTFOUND;
	json_decref(list);
	json_decref(o);
	return gone;
}

static int
group_teardown(void **state)
{
	const char *k = it_env_need("KUBECTL"), *kc = it_env_need("KUBECONFIG_ADMIN");
	char *cmd, *out;
	int ok;

	(void)state;
	/*
	 * Whatever failed: the release and the node marks go, for the tests
	 * after. A release left behind (CI, stop 37) kept its controller and
	 * its forgery guard, which refused the next test's controller its pods.
	 */
	ok = it_sh(cmd = xasprintf("'%s' uninstall %s -n %s --wait --timeout 120s", it_helm(),
	    RELEASE, RELNS), &out, NULL) == 0;
	if (!ok)
		fprintf(stderr, "ERROR: helm uninstall: %s\n", out);
	free(out);
	free(cmd);
	if (!it_wait_for(release_gone, NULL, 60000)) {
		fprintf(stderr, "ERROR: the release's admission policies or controller are "
		    "still there 60 s after its uninstall; deleted by label\n");
		try(xasprintf("'%s' --kubeconfig '%s' delete validatingadmissionpolicies,"
		    "validatingadmissionpolicybindings,mutatingadmissionpolicies,"
		    "mutatingadmissionpolicybindings -l app.kubernetes.io/instance=%s", k, kc,
		    RELEASE));
		ok = 0;
	}
	for (int i = 1; i <= NODES; i++)
		try(xasprintf("'%s' --kubeconfig '%s' uncordon %s; '%s' --kubeconfig '%s' label node "
		    "%s node-restriction.kubernetes.io/airlock-gvisor-", k, kc, node(i), k, kc, node(i)));
	try(xasprintf("'%s' --kubeconfig '%s' delete ns %s --wait=false", k, kc, RELNS));
	if (ns)
		it_namespace_delete(c, ns);
	free(ns);
	unlink(values);
	unlink(groups);
	it_client_free(c, kcfg);
	return ok ? 0 : -1;
}

/* Both groups' DaemonSets have their one pod ready, of their current spec. */
static int
agents_ready(void *arg)
{
	struct k8s_error err;
	int ok = 1;

	(void)arg;
	for (int i = 1; i <= NODES && ok; i++) {
		char name[64];
		json_t *ds = NULL, *st;

		snprintf(name, sizeof(name), RELEASE "-node-agent-node-%d", i);
		ok = k8s_get(c, &res_ds, RELNS, name, &ds, &err) == 0 &&
		    (st = json_object_get(ds, "status")) != NULL &&
		    json_integer_value(json_object_get(st, "observedGeneration")) ==
		    json_integer_value(json_object_get(json_object_get(ds, "metadata"), "generation")) &&
		    json_integer_value(json_object_get(st, "desiredNumberScheduled")) == 1 &&
		    json_integer_value(json_object_get(st, "numberReady")) == 1;
		json_decref(ds);
	}
	return ok;
}

/*
 * helm install with a group a node: two DaemonSets, none ungrouped, each
 * pod on its group's node and ready there.
 */
static void
test_install_groups(void **state)
{
	struct k8s_error err;
	json_t *ds = NULL;
	char *out;

	(void)state;
	out = must(xasprintf("'%s' install %s '%s/charts/airlock' -n %s --create-namespace "
	    "-f '%s' -f '%s' --wait --timeout 180s", it_helm(), RELEASE, top, RELNS, values, groups));
	assert_non_null(strstr(out, "STATUS: deployed"));
	free(out);
	if (!it_wait_for(agents_ready, NULL, 120000)) {
		out = kubectl("get pods -n " RELNS " -o wide");
		fail_msg("the node groups' agents are not ready in 120 s:\n%s", out);
	}
	assert_int_equal(k8s_get(c, &res_ds, RELNS, RELEASE "-node-agent", &ds, &err), K8S_ENOTFOUND);
	for (int i = 1; i <= NODES; i++) {
		char *args = xasprintf("get pods -n %s -l app.kubernetes.io/component=node-agent,"
		    "airlock.dev/node-group=node-%d -o jsonpath='{range .items[*]}{.spec.nodeName} "
		    "{.status.conditions[?(@.type==\"Ready\")].status}{\"\\n\"}{end}'", RELNS, i);
		char *want = xasprintf("%s True\n", node(i));

		out = kubectl(args);
		assert_string_equal(out, want);
		free(out);
		free(args);
		free(want);
	}
}

/*
 * An execution on each node, the other cordoned: its output came through
 * that node's agent, from that node's pod log directory.
 */
static void
test_run_on_each_node(void **state)
{
	(void)state;
	for (int i = 1; i <= NODES; i++) {
		const char *other = node(i == 1 ? 2 : 1);
		char name[32], spec[256], want[64], *args;
		json_t *st;

		args = xasprintf("cordon %s", other);
		free(kubectl(args));
		free(args);
		snprintf(name, sizeof(name), "on-node-%d", i);
		snprintf(spec, sizeof(spec), "{\"runtime\":\"python\",\"timeoutSeconds\":60,"
		    "\"source\":\"print('%s')\\n\"}", name);
		it_cx_create(c, ns, name, spec);
		st = it_cx_wait(c, ns, name, 120000);
		if (strcmp(it_str(st, "phase"), "Succeeded") != 0)
			fail_msg("%s: %s/%s: %s", name, it_str(st, "phase"), it_str(st, "reason"),
			    it_str(st, "message"));
		snprintf(want, sizeof(want), "%s\n", name);
		assert_string_equal(it_str(st, "stdout"), want);
		assert_string_equal(it_str(st, "nodeName"), node(i));
		json_decref(st);
		args = xasprintf("uncordon %s", other);
		free(kubectl(args));
		free(args);
	}
}

#define ROLL_N	8

/* Whether each node runs at least one of the roll's executions now. */
static int
both_nodes_running(void *arg)
{
	int on[NODES + 1] = { 0 };
	struct k8s_error err;

	(void)arg;
	for (int i = 0; i < ROLL_N; i++) {
		char name[32];
		json_t *o = NULL, *st;
		const char *n, *ph;

		snprintf(name, sizeof(name), "roll-%d", i);
		if (k8s_get(c, &cx_resource, ns, name, &o, &err) != 0)
			continue;
		st = json_object_get(o, "status");
		n = json_string_value(json_object_get(st, "nodeName"));
		ph = json_string_value(json_object_get(st, "phase"));
		for (int j = 1; j <= NODES; j++)
			if (n && ph && strcmp(ph, "Running") == 0 && strcmp(n, node(j)) == 0)
				on[j]++;
		json_decref(o);
	}
	return on[1] > 0 && on[2] > 0;
}

/*
 * Issue 28, item 3: helm upgrade rolls both groups' agents while
 * executions run on both nodes, and the API server restarts during the
 * roll. Every execution ends Succeeded with its own output: the new
 * agents record what finished while none ran (controller/agents.c keeps
 * the result's grace from running while a node's agent is away).
 */
static void
test_roll_loses_nothing(void **state)
{
	char name[32], spec[256], want[64], *out;
	int wrong = 0;

	(void)state;
	for (int i = 0; i < ROLL_N; i++) {
		snprintf(name, sizeof(name), "roll-%d", i);
		snprintf(spec, sizeof(spec), "{\"runtime\":\"python\",\"timeoutSeconds\":120,"
		    "\"source\":\"import time\\ntime.sleep(%d)\\nprint('%s')\\n\"}", 4 + i, name);
		it_cx_create(c, ns, name, spec);
	}
	if (!it_wait_for(both_nodes_running, NULL, 120000))
		fail_msg("the roll's executions never ran on both nodes at once");
	/* A new pod template: every agent is replaced, one node at a time. */
	out = must(xasprintf("'%s' upgrade %s '%s/charts/airlock' -n %s --reuse-values "
	    "--set nodeAgent.logLevel=debug", it_helm(), RELEASE, top, RELNS));
	free(out);
	out = must(xasprintf("'%s/tests/cluster/restart.sh' apiserver", top));
	print_message("# %s", out);
	free(out);
	if (!it_wait_for(agents_ready, NULL, 180000)) {
		out = kubectl("get pods -n " RELNS " -o wide");
		fail_msg("the rolled agents are not ready in 180 s:\n%s", out);
	}
	for (int i = 0; i < ROLL_N; i++) {
		json_t *st;

		snprintf(name, sizeof(name), "roll-%d", i);
		st = it_cx_wait(c, ns, name, 240000);
		snprintf(want, sizeof(want), "%s\n", name);
		if (strcmp(it_str(st, "phase"), "Succeeded") != 0 ||
		    strcmp(it_str(st, "stdout"), want) != 0) {
			print_message("# %s on %s: %s/%s: %s (stdout '%s')\n", name,
			    it_str(st, "nodeName"), it_str(st, "phase"), it_str(st, "reason"),
			    it_str(st, "message"), it_str(st, "stdout"));
			wrong++;
		}
		json_decref(st);
	}
	assert_int_equal(wrong, 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_install_groups),
		cmocka_unit_test(test_run_on_each_node),
		cmocka_unit_test(test_roll_loses_nothing),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
