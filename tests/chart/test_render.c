/*
 * Chart tests without a cluster: `helm lint --strict`, and `helm template`
 * with several value sets, each rendered manifest parsed and checked field
 * by field; values the schema (or the chart's own checks) must refuse are
 * refused, naming the value. The controller config the chart renders is
 * fed to the controller's own config parser.
 *
 * HELM (tests/cluster/build.sh helm) and AIRLOCK_TOP come from tests/run.sh.
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

#include <jansson.h>

#include "ctl_config.h"
#include "itutil.h"
#include "jpath.h"
#include "podspec.h"
#include "xmalloc.h"
#include "yamljson.h"

static char top[4000], chart[4096];

/*
 * Run helm with args (a shell fragment); its stdout (caller frees) and,
 * in *errp, its stderr. Returns the exit status.
 */
static int
run(const char *args, char **outp, char **errp)
{
	char *cmd = xasprintf("'%s' %s", it_helm(), args);
	int st = it_sh(cmd, outp, errp);

	free(cmd);
	return st;
}

/* helm template with extra args: every manifest, as an array of objects. */
static json_t *
render(const char *extra)
{
	char args[8192], *out, *err, *doc, *next;
	json_t *all = json_array();
	int st;

	snprintf(args, sizeof(args), "template rel '%s' --kube-version 1.37.2 --namespace airlock-system %s",
	    chart, extra);
	st = run(args, &out, &err);
	if (st != 0)
		fail_msg("helm template %s: exit %d: %s", extra, st, err);
	free(err);
	/* Documents are separated by lines "---" (block scalars are indented). */
	for (doc = out; doc; doc = next) {
		json_t *o;
		struct k8s_error e;
		char *sep = strstr(doc, "\n---");

		next = NULL;
		if (sep) {
			*sep = '\0';
			next = strchr(sep + 1, '\n');
			next = next ? next + 1 : NULL;
		}
		if (strncmp(doc, "---", 3) == 0)
			doc = strchr(doc, '\n') ? strchr(doc, '\n') + 1 : doc + 3;
		{
			/* Skip documents of comments only. */
			const char *q = doc;
			int content = 0;

			while (*q && !content) {
				const char *eol = strchr(q, '\n');
				const char *s = q + strspn(q, " \t");

				if (*s && *s != '#' && *s != '\n')
					content = 1;
				q = eol ? eol + 1 : q + strlen(q);
			}
			if (!content)
				continue;
		}
		if (yamljson_load(doc, strlen(doc), "manifest", "helm template", 0,
		    &o, &e) != 0)
			fail_msg("unparseable manifest: %s\n%s", e.message, doc);
		json_array_append_new(all, o);
	}
	free(out);
	return all;
}

/* The template's refusal: helm fails, and its message holds want. */
static void
refused(const char *extra, const char *want)
{
	char args[8192], *out, *err;
	int st;

	snprintf(args, sizeof(args), "template rel '%s' --kube-version 1.37.2 %s", chart, extra);
	st = run(args, &out, &err);
	if (st == 0)
		fail_msg("helm template accepted %s", extra);
	if (strstr(err, want) == NULL)
		fail_msg("helm template %s: the error does not say '%s':\n%s",
		    extra, want, err);
	free(out);
	free(err);
}

static json_t *
find(json_t *all, const char *kind, const char *name)
{
	json_t *o;
	size_t i;

	json_array_foreach(all, i, o) {
		json_t *md = json_object_get(o, "metadata");

		if (strcmp(json_string_value(json_object_get(o, "kind")), kind) == 0 &&
		    (name == NULL || strcmp(json_string_value(json_object_get(md,
		    "name")), name) == 0))
			return o;
	}
	return NULL;
}

static int
count(json_t *all, const char *kind)
{
	json_t *o;
	size_t i;
	int n = 0;

	json_array_foreach(all, i, o)
		n += strcmp(json_string_value(json_object_get(o, "kind")), kind) == 0;
	return n;
}

/* How many manifests' JSON holds the string text (quoted, whole). */
static int
count_text(json_t *all, const char *text)
{
	char *quoted = xasprintf("\"%s\"", text);
	json_t *o;
	size_t i;
	int n = 0;

	json_array_foreach(all, i, o) {
		char *j = json_dumps(o, JSON_COMPACT);

		n += j && strstr(j, quoted) != NULL;
		free(j);
	}
	free(quoted);
	return n;
}

/*
 * A path of keys and [indexes] into v, "spec.containers[0].image"; a dot
 * inside a key is written "\\.".
 */
static json_t *
at(json_t *v, const char *path)
{
	char key[256];
	size_t k = 0;
	const char *p = path;

	for (;;) {
		if (*p == '\\' && p[1] == '.') {
			if (k < sizeof(key) - 1)
				key[k++] = '.';
			p += 2;
			continue;
		}
		if (*p && *p != '.' && *p != '[') {
			if (k < sizeof(key) - 1)
				key[k++] = *p;
			p++;
			continue;
		}
		key[k] = '\0';
		if (k)
			v = json_object_get(v, key);
		k = 0;
		while (*p == '[') {
			const char *close = strchr(p, ']');

			v = json_array_get(v, strtoul(p + 1, NULL, 10));
			p = close ? close + 1 : p + strlen(p);
		}
		if (*p == '\0' || v == NULL)
			return v;
		if (*p == '.')
			p++;
	}
}

static const char *
str(json_t *v, const char *path)
{
	json_t *x = at(v, path);

	if (!json_is_string(x))
		fail_msg("%s is not a string", path);
	return json_string_value(x);
}

/* Whether the string array at path holds s. */
static int
has(json_t *v, const char *path, const char *s)
{
	json_t *x;
	size_t i;

	json_array_foreach(at(v, path), i, x)
		if (json_is_string(x) && strcmp(json_string_value(x), s) == 0)
			return 1;
	return 0;
}

/*
 * The verbs role grants on resource of API group, across all its rules in
 * their order, joined by ","; "" when none. A rule naming resourceNames
 * counts too. Caller frees.
 */
static char *
verbs(json_t *role, const char *group, const char *resource)
{
	char *out = xstrdup("");
	json_t *rule, *v;
	size_t i, j;

	json_array_foreach(at(role, "rules"), i, rule) {
		if (!has(rule, "apiGroups", group) || !has(rule, "resources", resource))
			continue;
		json_array_foreach(at(rule, "verbs"), j, v) {
			char *next = xasprintf("%s%s%s", out, *out ? "," : "",
			    json_string_value(v));

			free(out);
			out = next;
		}
	}
	return out;
}

/* role grants exactly want (verbs() order) on group's resource. */
static void
verbs_are(json_t *role, const char *group, const char *resource, const char *want)
{
	char *got = verbs(role, group, resource);

	if (strcmp(got, want) != 0)
		fail_msg("%s on %s: verbs '%s', wanted '%s'", str(role, "metadata.name"),
		    resource, got, want);
	free(got);
}

static void
test_lint(void **state)
{
	char args[4352], *out, *err;
	int st;

	(void)state;
	snprintf(args, sizeof(args), "lint --strict '%s'", chart);
	st = run(args, &out, &err);
	if (st != 0)
		fail_msg("helm lint --strict: exit %d:\n%s%s", st, out, err);
	assert_non_null(strstr(out, "1 chart(s) linted, 0 chart(s) failed"));
	free(out);
	free(err);
}

/* The CRDs in the chart are crds/', byte for byte (make chart-crds). */
static void
test_crd_in_sync(void **state)
{
	static const char *const files[] = { "airlock.dev_codeexecutions.yaml",
	    "airlock.dev_codeexecutionpools.yaml",
	    "airlock.dev_codeexecutionartifacts.yaml",
	    "airlock.dev_codesessions.yaml" };
	char a[4352], b[4352], cmd[9000];

	(void)state;
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		snprintf(a, sizeof(a), "%s/crds/%s", chart, files[i]);
		snprintf(b, sizeof(b), "%s/../../crds/%s", chart, files[i]);
		snprintf(cmd, sizeof(cmd), "cmp -s '%s' '%s'", a, b);
		if (system(cmd) != 0)
			fail_msg("%s differs from %s: run make chart-crds", a, b);
	}
}

/*
 * Container c serves the kubelet's probes on port, listening on host
 * (NULL: every address, and the kubelet probes the pod's IP).
 */
static void
probes_on(json_t *c, int port, const char *host)
{
	char arg[64];

	snprintf(arg, sizeof(arg), "--probe-addr=%s:%d", host ? host : "", port);
	assert_true(has(c, "args", arg));
	assert_string_equal(str(c, "ports[1].name"), "probes");
	assert_int_equal(json_integer_value(at(c, "ports[1].containerPort")), port);
	assert_string_equal(str(c, "livenessProbe.httpGet.port"), "probes");
	assert_string_equal(str(c, "readinessProbe.httpGet.port"), "probes");
	if (host == NULL) {
		assert_null(at(c, "livenessProbe.httpGet.host"));
		assert_null(at(c, "readinessProbe.httpGet.host"));
	} else {
		assert_string_equal(str(c, "livenessProbe.httpGet.host"), host);
		assert_string_equal(str(c, "readinessProbe.httpGet.host"), host);
	}
}

static void
test_defaults(void **state)
{
	json_t *all = render(""), *d, *ds, *c, *role, *x;
	struct ctl_config *cfg;
	struct k8s_error err;
	const char *conf;
	size_t i;

	(void)state;
	/* The controller: 2 replicas, probes, hardened, its config. */
	assert_non_null(d = find(all, "Deployment", "rel-airlock-controller"));
	assert_int_equal(json_integer_value(at(d, "spec.replicas")), 2);
	c = at(d, "spec.template.spec.containers[0]");
	assert_string_equal(str(c, "image"), "airlock.dev/controller:0.1.0");
	assert_string_equal(str(c, "livenessProbe.httpGet.path"), "/healthz");
	assert_string_equal(str(c, "readinessProbe.httpGet.path"), "/readyz");
	/* The probes on a port of their own (issue 27), every address. */
	assert_true(has(c, "args", "--metrics-addr=:8080"));
	probes_on(c, 8082, NULL);
	assert_true(has(c, "args", "--lease-namespace=airlock-system"));
	assert_true(has(c, "args", "--guardrail-owner-clusterrole=rel-airlock-controller"));
	/* The start deadline (issue 28 item 4): 120 s, as the README says. */
	assert_true(has(c, "args", "--start-deadline-seconds=120"));
	assert_true(has(c, "args", "--agent-absent-seconds=300"));
	assert_true(json_is_false(at(c, "securityContext.allowPrivilegeEscalation")));
	assert_true(json_is_true(at(c, "securityContext.readOnlyRootFilesystem")));
	assert_true(has(c, "securityContext.capabilities.drop", "ALL"));
	assert_true(json_is_true(at(d, "spec.template.spec.securityContext.runAsNonRoot")));
	assert_string_equal(str(c, "resources.limits.memory"), "128Mi");
	assert_string_equal(str(c, "env[1].name"), "POD_NAME");
	assert_null(at(c, "env[2]"));	/* no API server override */
	assert_non_null(x = find(all, "PodDisruptionBudget", "rel-airlock-controller"));
	assert_int_equal(json_integer_value(at(x, "spec.minAvailable")), 1);
	assert_non_null(find(all, "Lease", "rel-airlock-controller"));

	/* Its config, as the controller itself reads it. */
	assert_non_null(x = find(all, "ConfigMap", "rel-airlock-controller"));
	conf = str(x, "data.config\\.yaml");
	if (ctl_config_parse(conf, strlen(conf), "chart config", &cfg, &err) != 0)
		fail_msg("the controller refuses the chart's config: %s\n%s", err.message, conf);
	assert_int_equal(cfg->nprofiles, 4);
	assert_string_equal(ctl_config_profile(cfg, "python")->image,
	    "airlock.dev/runner-python:0.1.0");
	assert_string_equal(ctl_config_profile(cfg, "python-data")->image,
	    "airlock.dev/runner-python-data:0.1.0");
	assert_int_equal(ctl_config_profile(cfg, "python")->policy, CTL_POLICY_NONE);
	/* Issue 31: python-data's holders import these, then draw a figure. */
	assert_string_equal(ctl_config_profile(cfg, "python-data")->preload,
	    "numpy,pandas,matplotlib");
	assert_string_equal(ctl_config_profile(cfg, "python-data")->warmup,
	    "import io\nimport matplotlib\nmatplotlib.use(\"Agg\")\n"
	    "import matplotlib.pyplot as plt\nimport pandas as pd\n"
	    "fig, ax = plt.subplots()\n"
	    "ax.plot([0, 1], [0, 1], marker=\"o\")\nax.set_title(\"warm-up\")\n"
	    "fig.tight_layout()\nfig.savefig(io.BytesIO(), format=\"png\")\n"
	    "plt.close(fig)\npd.DataFrame({\"x\": [1]}).to_csv(io.StringIO())\n");
	assert_null(ctl_config_profile(cfg, "python")->preload);
	assert_null(ctl_config_profile(cfg, "python")->warmup);
	assert_int_equal(cfg->artifacts_bytes, 1 << 20);
	assert_int_equal(cfg->artifacts_files, 64);
	assert_string_equal(ctl_config_profile(cfg, "node")->source_file, "main.js");
	assert_string_equal(cfg->runtime_class, "gvisor");
	assert_string_equal(cfg->priority_class, "airlock-execution");
	assert_int_equal(cfg->defaults.memory_bytes, 256 << 20);
	assert_int_equal(cfg->quota_executions, 20);
	ctl_config_free(cfg);

	/* Who created an execution, stamped and kept; files out guarded. */
	assert_non_null(x = find(all, "MutatingAdmissionPolicy", "rel-airlock-controller-created-by"));
	assert_string_equal(str(x, "spec.matchConstraints.resourceRules[0].operations[0]"),
	    "CREATE");
	assert_non_null(strstr(str(x, "spec.mutations[0].applyConfiguration.expression"),
	    "\"airlock.dev/created-by\": request.userInfo.username"));
	assert_non_null(find(all, "MutatingAdmissionPolicyBinding",
	    "rel-airlock-controller-created-by"));
	assert_non_null(find(all, "ValidatingAdmissionPolicy", "rel-airlock-controller-created-by"));
	assert_non_null(find(all, "ValidatingAdmissionPolicy", "rel-airlock-node-agent-artifacts-guard"));

	/* The daemons' NetworkPolicy: nothing in but from their node. */
	assert_non_null(x = find(all, "NetworkPolicy", "rel-airlock-daemons"));
	assert_string_equal(str(x, "spec.podSelector.matchLabels.app\\.kubernetes\\.io/instance"), "rel");
	assert_string_equal(str(x, "spec.policyTypes[0]"), "Ingress");
	assert_true(json_is_array(at(x, "spec.ingress")));
	assert_int_equal(json_array_size(at(x, "spec.ingress")), 0);
	/* Only the controller makes Airlock-labelled pods and ConfigMaps. */
	assert_non_null(x = find(all, "ValidatingAdmissionPolicy", "rel-airlock-controller-forgery-guard"));
	assert_string_equal(str(x, "spec.failurePolicy"), "Fail");
	assert_non_null(strstr(str(x, "spec.matchConditions[1].expression"),
	    "system:serviceaccount:airlock-system:rel-airlock-controller"));
	/*
	 * A create is the controller's alone, whoever asks: the exemptions of
	 * the cluster's identities (a ReplicaSet's pods are made by
	 * kube-controller-manager or kube-system's replicaset-controller)
	 * hold for an update only (issue 27).
	 */
	assert_int_equal(json_array_size(at(x, "spec.matchConditions")), 3);
	assert_string_equal(str(x, "spec.matchConditions[2].name"), "a-create-or-not-the-cluster");
	{
		static const char create[] = "request.operation == \"CREATE\" || (";

		assert_true(strncmp(str(x, "spec.matchConditions[2].expression"),
		    create, sizeof(create) - 1) == 0);
	}
	assert_non_null(strstr(str(x, "spec.matchConditions[2].expression"),
	    "!request.userInfo.username.startsWith(\"system:serviceaccount:kube-system:\")"));
	assert_true(has(x, "spec.matchConstraints.resourceRules[0].operations", "CREATE"));
	assert_true(has(x, "spec.matchConstraints.resourceRules[0].operations", "UPDATE"));
	assert_non_null(find(all, "ValidatingAdmissionPolicyBinding", "rel-airlock-controller-forgery-guard"));
	/* Nobody but the program gets into a sandbox (test_install: the real server). */
	assert_non_null(x = find(all, "ValidatingAdmissionPolicy", "rel-airlock-controller-sandbox-guard"));
	assert_string_equal(str(x, "spec.failurePolicy"), "Fail");
	assert_true(has(x, "spec.matchConstraints.resourceRules[0].resources", "pods/exec"));
	assert_true(has(x, "spec.matchConstraints.resourceRules[0].resources", "pods/attach"));
	assert_true(has(x, "spec.matchConstraints.resourceRules[0].resources", "pods/portforward"));
	assert_string_equal(str(x, "spec.matchConstraints.resourceRules[0].operations[0]"), "CONNECT");
	assert_string_equal(str(x, "spec.matchConstraints.resourceRules[1].resources[0]"),
	    "pods/ephemeralcontainers");
	assert_non_null(x = find(all, "ValidatingAdmissionPolicyBinding", "rel-airlock-controller-sandbox-guard"));
	assert_string_equal(str(x, "spec.validationActions[0]"), "Deny");
	assert_non_null(x = find(all, "ValidatingAdmissionPolicy", "rel-airlock-node-agent-status-guard"));
	assert_string_equal(str(x, "spec.matchConstraints.resourceRules[0].resources[0]"),
	    "codeexecutions/status");
	assert_string_equal(str(x, "spec.validations[1].message"),
	    "the node agent may write the status of executions on its own node only");
	assert_string_equal(str(x, "spec.validations[2].message"),
	    "the node agent may not mark an execution audited");
	/* Egress is the controller's to grant (docs/network.md). */
	assert_string_equal(str(x, "spec.validations[3].message"),
	    "the node agent may not grant an execution egress");
	/* The same guard for sessions' status, the agent's too (docs/sessions.md). */
	assert_non_null(x = find(all, "ValidatingAdmissionPolicy",
	    "rel-airlock-node-agent-session-status-guard"));
	assert_int_equal(json_array_size(at(x, "spec.matchConstraints.resourceRules")), 1);
	assert_int_equal(json_array_size(at(x, "spec.matchConstraints.resourceRules[0].resources")), 1);
	assert_string_equal(str(x, "spec.matchConstraints.resourceRules[0].resources[0]"),
	    "codesessions/status");
	assert_string_equal(str(x, "spec.matchConstraints.resourceRules[0].operations[0]"),
	    "UPDATE");
	assert_string_equal(str(x, "spec.matchConditions[0].expression"),
	    "request.userInfo.username == \"system:serviceaccount:airlock-system:rel-airlock-node-agent\"");
	assert_int_equal(json_array_size(at(x, "spec.validations")), 4);
	assert_string_equal(str(x, "spec.validations[0].message"),
	    "the node agent's token names no node");
	assert_string_equal(str(x, "spec.validations[1].expression"),
	    "has(oldObject.status) && has(oldObject.status.nodeName) && "
	    "request.userInfo.extra[\"authentication.kubernetes.io/node-name\"][0] == "
	    "oldObject.status.nodeName");
	assert_string_equal(str(x, "spec.validations[1].message"),
	    "the node agent may write the status of sessions on its own node only");
	assert_string_equal(str(x, "spec.validations[2].message"),
	    "the node agent may not mark a session audited");
	assert_string_equal(str(x, "spec.validations[3].expression"),
	    "object.status.?egress.?granted.orValue(false) == "
	    "oldObject.status.?egress.?granted.orValue(false)");
	assert_string_equal(str(x, "spec.validations[3].message"),
	    "the node agent may not grant a session egress");
	assert_non_null(x = find(all, "ValidatingAdmissionPolicyBinding",
	    "rel-airlock-node-agent-session-status-guard"));
	assert_string_equal(str(x, "spec.policyName"), "rel-airlock-node-agent-session-status-guard");
	assert_string_equal(str(x, "spec.validationActions[0]"), "Deny");
	/* Sessions' metadata is capped, and their creator stamped, as executions'. */
	assert_non_null(x = find(all, "ValidatingAdmissionPolicy", "rel-airlock-controller-metadata-guard"));
	assert_string_equal(str(x, "spec.matchConstraints.resourceRules[0].resources[2]"), "codesessions");
	assert_string_equal(str(x, "spec.validations[0].message"),
	    "metadata.labels: at most 64 on a CodeExecution, CodeExecutionPool or CodeSession");
	assert_non_null(x = find(all, "MutatingAdmissionPolicy", "rel-airlock-controller-created-by"));
	assert_string_equal(str(x, "spec.matchConstraints.resourceRules[0].resources[1]"), "codesessions");
	assert_non_null(x = find(all, "ValidatingAdmissionPolicy", "rel-airlock-controller-created-by"));
	assert_string_equal(str(x, "spec.matchConstraints.resourceRules[0].resources[1]"), "codesessions");

	/* The node agent: host PID, logs read-only, only KILL. */
	assert_non_null(ds = find(all, "DaemonSet", "rel-airlock-node-agent"));
	/* One DaemonSet, no node groups: the component's labels alone. */
	assert_int_equal(count(all, "DaemonSet"), 1);
	assert_json(at(ds, "spec.selector.matchLabels"), "{\"app.kubernetes.io/name\": \"airlock\", "
	    "\"app.kubernetes.io/instance\": \"rel\", \"app.kubernetes.io/component\": \"node-agent\"}");
	assert_json(at(ds, "spec.template.metadata.labels"), "{\"app.kubernetes.io/name\": \"airlock\", "
	    "\"app.kubernetes.io/instance\": \"rel\", \"app.kubernetes.io/component\": \"node-agent\"}");
	assert_null(json_object_get(at(ds, "metadata.labels"), "airlock.dev/node-group"));
	assert_true(json_is_true(at(ds, "spec.template.spec.hostPID")));
	assert_string_equal(str(ds, "spec.template.spec.nodeSelector.node-restriction\\.kubernetes\\.io/airlock-gvisor"), "true");
	c = at(ds, "spec.template.spec.containers[0]");
	assert_string_equal(str(c, "image"), "airlock.dev/node-agent:0.1.0");
	assert_true(has(c, "args", "--keep-stale-logs"));
	assert_true(has(c, "args", "--hard-output-cap=16777216"));
	assert_true(has(c, "args", "--node-name=$(NODE_NAME)"));
	/* Its heartbeat in the release's namespace (controller/agents.c). */
	assert_true(has(c, "args", "--lease-namespace=$(POD_NAMESPACE)"));
	assert_string_equal(str(c, "env[1].name"), "POD_NAMESPACE");
	assert_string_equal(str(c, "env[1].valueFrom.fieldRef.fieldPath"),
	    "metadata.namespace");
	assert_string_equal(str(c, "env[2].name"), "POD_NAME");
	assert_non_null(find(all, "Role", "rel-airlock-node-agent-heartbeat"));
	assert_non_null(find(all, "ValidatingAdmissionPolicy",
	    "rel-airlock-node-agent-heartbeat-guard"));
	probes_on(c, 8083, NULL);
	assert_true(has(c, "securityContext.capabilities.drop", "ALL"));
	assert_true(has(c, "securityContext.capabilities.add", "KILL"));
	assert_int_equal(json_array_size(at(c, "securityContext.capabilities.add")), 1);
	assert_true(json_is_true(at(c, "securityContext.readOnlyRootFilesystem")));
	json_array_foreach(at(c, "volumeMounts"), i, x)
		if (strcmp(str(x, "name"), "pod-logs") == 0)
			assert_true(json_is_true(at(x, "readOnly")));
	assert_string_equal(str(ds, "spec.template.spec.volumes[0].hostPath.path"), "/var/log/pods");

	/*
	 * RBAC: the agent reads pods, deletes them, patches status, makes
	 * files out (and reads them back, for a retry). No more.
	 */
	assert_non_null(role = find(all, "ClusterRole", "rel-airlock-node-agent"));
	assert_int_equal(json_array_size(at(role, "rules")), 4);
	verbs_are(role, "airlock.dev", "codeexecutionartifacts", "create,get");
	assert_string_equal(str(role, "rules[0].resources[0]"), "pods");
	assert_int_equal(json_array_size(at(role, "rules[0].verbs")), 4);
	assert_true(has(role, "rules[0].verbs", "delete"));
	assert_false(has(role, "rules[0].verbs", "create"));
	assert_false(has(role, "rules[0].verbs", "patch"));
	assert_string_equal(str(role, "rules[1].resources[0]"), "codeexecutions/status");
	assert_int_equal(json_array_size(at(role, "rules[1].verbs")), 1);
	assert_string_equal(str(role, "rules[1].verbs[0]"), "patch");
	verbs_are(role, "airlock.dev", "codeexecutionpools", "");
	/* A session's status (steps, its ends), never the session itself. */
	verbs_are(role, "airlock.dev", "codesessions/status", "patch");
	verbs_are(role, "airlock.dev", "codesessions", "");
	assert_non_null(find(all, "ValidatingAdmissionPolicy", "rel-airlock-node-agent-delete-guard"));
	/* The controller deletes executions past their TTL, nothing else of theirs. */
	assert_non_null(role = find(all, "ClusterRole", "rel-airlock-controller"));
	assert_string_equal(str(role, "rules[0].resources[0]"), "codeexecutions");
	assert_true(has(role, "rules[0].verbs", "delete"));
	assert_false(has(role, "rules[0].verbs", "update"));
	/*
	 * It claims warm sandboxes (a pod PATCH at the pod's resourceVersion);
	 * reads pools and writes their status, never the pools themselves
	 * nor their scale.
	 */
	verbs_are(role, "", "pods", "get,list,watch,create,delete,patch");
	verbs_are(role, "airlock.dev", "codeexecutionpools", "get,list,watch");
	verbs_are(role, "airlock.dev", "codeexecutionpools/status", "get,patch,update");
	verbs_are(role, "airlock.dev", "codeexecutionpools/scale", "");
	/* Sessions: read, deleted past their TTL, their status written; never changed. */
	verbs_are(role, "airlock.dev", "codesessions", "get,list,watch,delete");
	verbs_are(role, "airlock.dev", "codesessions/status", "get,patch,update");
	verbs_are(role, "", "events", "create");
	/*
	 * NetworkPolicies: the namespaces' deny-all made, and put back whole
	 * by a PUT when a tenant added to it (guardrails.c, netpol_exact);
	 * an execution's egress policy deleted once it has ended, egress on
	 * or off (reconcile.c, delete_egress).
	 */
	verbs_are(role, "networking.k8s.io", "networkpolicies",
	    "get,list,watch,create,update,patch,delete");
	/* The agent's warm runs: the exec directory; runsc only when asked. */
	assert_true(has(c, "args", "--exec-dir=/run/airlock/exec"));
	json_array_foreach(at(c, "args"), i, x)
		if (strncmp(json_string_value(x), "--runsc", 7) == 0)
			fail_msg("runsc is used by default: %s", json_string_value(x));
	/* The controller's lease: that one lease, no create. */
	assert_non_null(role = find(all, "Role", "rel-airlock-controller-leader-election"));
	assert_string_equal(str(role, "rules[0].resourceNames[0]"), "rel-airlock-controller");
	assert_false(has(role, "rules[0].verbs", "create"));
	/* The kubelets' Leases, for lost nodes: read, and only there. */
	assert_non_null(role = find(all, "Role", "rel-airlock-controller-node-leases"));
	assert_string_equal(str(role, "metadata.namespace"), "kube-node-lease");
	assert_int_equal(json_array_size(at(role, "rules")), 1);
	assert_string_equal(str(role, "rules[0].resources[0]"), "leases");
	assert_int_equal(json_array_size(at(role, "rules[0].verbs")), 3);
	assert_true(has(role, "rules[0].verbs", "watch"));
	assert_false(has(role, "rules[0].verbs", "update"));
	assert_non_null(x = find(all, "RoleBinding", "rel-airlock-controller-node-leases"));
	assert_string_equal(str(x, "metadata.namespace"), "kube-node-lease");
	assert_string_equal(str(x, "subjects[0].name"), "rel-airlock-controller");
	/* Nothing may read secrets. */
	json_array_foreach(all, i, x) {
		json_t *rule;
		size_t j;

		json_array_foreach(at(x, "rules"), j, rule)
			if (has(rule, "resources", "secrets") || has(rule, "resources", "*"))
				fail_msg("%s grants secrets", str(x, "metadata.name"));
	}
	/* Tenant roles, aggregated. */
	assert_non_null(role = find(all, "ClusterRole", "airlock-editor"));
	assert_string_equal(str(role, "metadata.labels.rbac\\.authorization\\.k8s\\.io/aggregate-to-edit"), "true");
	assert_true(has(role, "rules[0].verbs", "create"));
	/* Editors make, change and scale pools; never write a pool's status. */
	verbs_are(role, "airlock.dev", "codeexecutionpools",
	    "get,list,watch,create,update,patch,delete,deletecollection");
	verbs_are(role, "airlock.dev", "codeexecutionpools/status", "get");
	verbs_are(role, "airlock.dev", "codeexecutionpools/scale", "get,update,patch");
	/* Files out: read and deleted by those who run code, made by none. */
	verbs_are(role, "airlock.dev", "codeexecutionartifacts",
	    "get,list,watch,delete,deletecollection");
	/* Sessions: as executions (close is a patch); never their status. */
	verbs_are(role, "airlock.dev", "codesessions",
	    "get,list,watch,create,update,patch,delete,deletecollection");
	verbs_are(role, "airlock.dev", "codesessions/status", "get");
	assert_non_null(role = find(all, "ClusterRole", "airlock-viewer"));
	assert_string_equal(str(role, "metadata.labels.rbac\\.authorization\\.k8s\\.io/aggregate-to-view"), "true");
	assert_false(has(role, "rules[0].verbs", "create"));
	/* Viewers read pools, their status and scale; nothing more. */
	verbs_are(role, "airlock.dev", "codeexecutionpools", "get,list,watch");
	verbs_are(role, "airlock.dev", "codeexecutionpools/status", "get,list,watch");
	verbs_are(role, "airlock.dev", "codeexecutionpools/scale", "get,list,watch");
	verbs_are(role, "airlock.dev", "codesessions", "get,list,watch");
	verbs_are(role, "airlock.dev", "codesessions/status", "get,list,watch");
	/* Not what a program wrote: that is for those who run code. */
	verbs_are(role, "airlock.dev", "codeexecutionartifacts", "");
	json_array_foreach(at(role, "rules"), i, x)
		if (!has(x, "verbs", "get") || json_array_size(at(x, "verbs")) != 3 ||
		    !has(x, "verbs", "list") || !has(x, "verbs", "watch"))
			fail_msg("airlock-viewer rule %zu grants more than get, list, watch", i);

	/* Classes, metrics. */
	assert_non_null(x = find(all, "RuntimeClass", "gvisor"));
	assert_string_equal(str(x, "handler"), "runsc");
	assert_string_equal(str(x, "scheduling.nodeSelector.node-restriction\\.kubernetes\\.io/airlock-gvisor"), "true");
	assert_non_null(x = find(all, "PriorityClass", "airlock-execution"));
	assert_string_equal(str(x, "preemptionPolicy"), "Never");
	assert_int_equal(count(all, "Service"), 2);
	assert_int_equal(count(all, "ServiceMonitor"), 0);
	json_decref(all);
}

static void
test_values_change_output(void **state)
{
	json_t *all, *c, *x;
	size_t i;

	(void)state;
	all = render("--set controller.replicas=1 --set nodeAgent.removeStaleLogs=true "
	    "--set apiServer.host=10.0.0.1 --set apiServer.port=6443 "
	    "--set metrics.serviceMonitor.enabled=true --set runtimeClass.create=false "
	    "--set priorityClass.create=false --set tenantRoles.create=false "
	    "--set agentDeleteGuard.enabled=false --set forgeryGuard.enabled=false "
	    "--set agentStatusGuard.enabled=false --set creatorStamp.enabled=false "
	    "--set metadataGuard.enabled=false "
	    "--set networkPolicy.enabled=false --set image.controller.tag=9.9 "
	    "--set config.defaults.memory=192Mi --set controller.startDeadlineSeconds=600");
	assert_int_equal(json_integer_value(at(find(all, "Deployment", NULL), "spec.replicas")), 1);
	assert_null(find(all, "PodDisruptionBudget", NULL));
	assert_null(find(all, "RuntimeClass", NULL));
	assert_null(find(all, "PriorityClass", NULL));
	assert_null(find(all, "ClusterRole", "airlock-editor"));
	/*
	 * But the heartbeat guard, with the agent's lease Role: heartbeats
	 * only (never the controller's leader lease), its node unchecked.
	 */
	assert_int_equal(count(all, "ValidatingAdmissionPolicy"), 1);
	x = find(all, "ValidatingAdmissionPolicy", "rel-airlock-node-agent-heartbeat-guard");
	assert_non_null(x);
	assert_int_equal(json_array_size(at(x, "spec.validations")), 1);
	assert_string_equal(str(x, "spec.validations[0].message"),
	    "the node agent may write heartbeats only");
	assert_null(find(all, "MutatingAdmissionPolicy", NULL));
	assert_null(find(all, "NetworkPolicy", NULL));
	assert_int_equal(count(all, "ServiceMonitor"), 2);
	c = at(find(all, "Deployment", NULL), "spec.template.spec.containers[0]");
	assert_string_equal(str(c, "image"), "airlock.dev/controller:9.9");
	assert_true(has(c, "args", "--start-deadline-seconds=600"));
	assert_false(has(c, "args", "--start-deadline-seconds=120"));
	assert_string_equal(str(c, "env[2].name"), "KUBERNETES_SERVICE_HOST");
	assert_string_equal(str(c, "env[2].value"), "10.0.0.1");
	assert_string_equal(str(c, "env[3].value"), "6443");
	c = at(find(all, "DaemonSet", NULL), "spec.template.spec.containers[0]");
	assert_false(has(c, "args", "--keep-stale-logs"));
	assert_string_equal(str(c, "env[3].value"), "10.0.0.1");
	json_array_foreach(at(c, "volumeMounts"), i, x)
		if (strcmp(str(x, "name"), "pod-logs") == 0)
			assert_true(json_is_false(at(x, "readOnly")));
	/* helm test binds a Role of its own without the tenant roles. */
	assert_non_null(x = find(all, "RoleBinding", "tenant-airlock-editor"));
	assert_string_equal(str(x, "roleRef.kind"), "Role");
	assert_non_null(x = find(all, "Role", "airlock-editor"));
	assert_string_equal(str(x, "metadata.annotations.helm\\.sh/hook"), "test");
	assert_non_null(strstr(str(find(all, "ConfigMap", NULL), "data.config\\.yaml"),
	    "\"memory\":\"192Mi\""));
	json_decref(all);
	/* Scrapers named: they, on the metrics ports only. */
	all = render("--set-json 'networkPolicy.metricsFrom=[{\"namespaceSelector\":"
	    "{\"matchLabels\":{\"kubernetes.io/metadata.name\":\"monitoring\"}}}]'");
	assert_non_null(x = find(all, "NetworkPolicy", "rel-airlock-daemons"));
	assert_string_equal(str(x, "spec.ingress[0].from[0].namespaceSelector.matchLabels."
	    "kubernetes\\.io/metadata\\.name"), "monitoring");
	assert_int_equal(json_integer_value(at(x, "spec.ingress[0].ports[0].port")), 8080);
	assert_int_equal(json_integer_value(at(x, "spec.ingress[0].ports[1].port")), 8081);
	/* Not the probes' ports: only the node reaches those. */
	assert_null(at(x, "spec.ingress[0].ports[2]"));
	assert_null(at(x, "spec.ingress[1]"));
	json_decref(all);
	/*
	 * On the host's network the probes' listener is on the host's
	 * loopback, and the kubelet probes it there.
	 */
	all = render("--set controller.hostNetwork=true --set nodeAgent.hostNetwork=true "
	    "--set controller.probePort=9082 --set nodeAgent.probePort=9083");
	c = at(find(all, "Deployment", NULL), "spec.template.spec.containers[0]");
	assert_true(has(c, "args", "--metrics-addr=:8080"));
	probes_on(c, 9082, "127.0.0.1");
	c = at(find(all, "DaemonSet", NULL), "spec.template.spec.containers[0]");
	probes_on(c, 9083, "127.0.0.1");
	json_decref(all);
	/* preload: [] turns python-data's off, its warm-up with it. */
	all = render("--set-json 'config.profiles.python-data.preload=[]'");
	{
		const char *conf = str(find(all, "ConfigMap", "rel-airlock-controller"),
		    "data.config\\.yaml");
		struct ctl_config *cfg = NULL;
		struct k8s_error err;

		if (ctl_config_parse(conf, strlen(conf), "chart config", &cfg, &err) != 0)
			fail_msg("the controller refuses the chart's config: %s\n%s",
			    err.message, conf);
		assert_null(ctl_config_profile(cfg, "python-data")->preload);
		assert_null(ctl_config_profile(cfg, "python-data")->warmup);
		ctl_config_free(cfg);
	}
	json_decref(all);
}

static void
test_refused(void **state)
{
	(void)state;
	refused("--set controller.replicas=0", "/controller/replicas");
	refused("--set controller.logLevel=verbose", "/controller/logLevel");
	refused("--set controller.startDeadlineSeconds=0",
	    "/controller/startDeadlineSeconds");
	refused("--set controller.foo=1", "foo");
	refused("--set image.controller.pullPolicy=Sometimes", "/image/controller/pullPolicy");
	refused("--set nodeAgent.pollMs=0", "/nodeAgent/pollMs");
	refused("--set nodeAgent.hardOutputCap=1", "/nodeAgent/hardOutputCap");
	refused("--set nodeAgent.cgroupRoot=relative", "/nodeAgent/cgroupRoot");
	refused("--set config.defaults.cpu=lots", "/config/defaults/cpu");
	refused("--set config.profiles.python.sourceFile=../x.py",
	    "/config/profiles/python/sourceFile");
	refused("--set config.profiles.python.sourceFile=/abs.py",
	    "/config/profiles/python/sourceFile");
	refused("--set config.profiles=null", "missing property 'profiles'");
	refused("--set-json 'config.profiles.ruby={\"image\":\"x\"}'",
	    "/config/profiles/ruby");
	/* preload: module names, Python profiles only; a warm-up needs it. */
	refused("--set-json 'config.profiles.python.preload=[\"a..b\"]'",
	    "/config/profiles/python/preload/0");
	refused("--set-json 'config.profiles.python.preload=[\"a\",\"a\"]'",
	    "/config/profiles/python/preload");
	refused("--set-json 'config.profiles.node.preload=[\"x\"]'",
	    "config.profiles.node.preload: needs the command [/airlock/bin/run, "
	    "python3, ...] (a Python profile started by the runner)");
	refused("--set config.profiles.python.warmup=x",
	    "config.profiles.python.warmup: needs a preload list");
	refused("--set apiServer.host=10.0.0.1", "apiServer.port: required");
	refused("--set apiServer.port=6443", "apiServer.host: required");
	refused("--set test.runtime=ruby", "test.runtime");
	refused("--set runtimeClass.name=Bad_Name", "/runtimeClass/name");
	refused("--set metrics.serviceMonitor.interval=soon", "/metrics/serviceMonitor/interval");
	refused("--set nodeAgent.probePort=0", "/nodeAgent/probePort");
	refused("--set controller.probePort=8080",
	    "controller.probePort: 8080 is controller.metricsPort too");
	/*
	 * Node groups: each named once, a DNS label of 20 characters at most
	 * (it ends the DaemonSet's name); each picks its nodes; nothing
	 * unknown. The second group is the bad one: the index is named.
	 */
#define G0 "{\"name\":\"a\",\"nodeSelector\":{\"p\":\"a\"}}"
#define GROUPS(g1) "--set-json 'nodeAgent.nodeGroups=[" G0 "," g1 "]'"
	refused(GROUPS("{\"nodeSelector\":{\"p\":\"b\"}}"),
	    "at '/nodeAgent/nodeGroups/1': missing property 'name'");
	refused(GROUPS("{\"name\":\"Bad_Name\",\"nodeSelector\":{\"p\":\"b\"}}"),
	    "at '/nodeAgent/nodeGroups/1/name': 'Bad_Name' does not match pattern");
	refused(GROUPS("{\"name\":\"-b\",\"nodeSelector\":{\"p\":\"b\"}}"),
	    "at '/nodeAgent/nodeGroups/1/name': '-b' does not match pattern");
	refused(GROUPS("{\"name\":\"\",\"nodeSelector\":{\"p\":\"b\"}}"),
	    "at '/nodeAgent/nodeGroups/1/name': '' does not match pattern");
	refused(GROUPS("{\"name\":\"abcdefghijklmnopqrstu\",\"nodeSelector\":{\"p\":\"b\"}}"),
	    "at '/nodeAgent/nodeGroups/1/name': maxLength: got 21, want 20");
	refused(GROUPS("{\"name\":\"a\",\"nodeSelector\":{\"p\":\"b\"}}"),
	    "nodeAgent.nodeGroups[1].name: \"a\" is nodeAgent.nodeGroups[0].name too");
	refused(GROUPS("{\"name\":\"b\"}"),
	    "at '/nodeAgent/nodeGroups/1': missing property 'nodeSelector'");
	refused(GROUPS("{\"name\":\"b\",\"nodeSelector\":{}}"),
	    "at '/nodeAgent/nodeGroups/1/nodeSelector': minProperties: got 0, want 1");
	refused(GROUPS("{\"name\":\"b\",\"nodeSelector\":{\"p\":1}}"),
	    "at '/nodeAgent/nodeGroups/1/nodeSelector/p': got number, want string");
	refused(GROUPS("{\"name\":\"b\",\"nodeSelector\":{\"p\":\"b\"},\"hostPath\":{}}"),
	    "at '/nodeAgent/nodeGroups/1': additional properties 'hostPath' not allowed");
	refused(GROUPS("{\"name\":\"b\",\"nodeSelector\":{\"p\":\"b\"},\"hostPaths\":{\"logs\":\"/x\"}}"),
	    "at '/nodeAgent/nodeGroups/1/hostPaths': additional properties 'logs' not allowed");
	refused(GROUPS("{\"name\":\"b\",\"nodeSelector\":{\"p\":\"b\"},\"hostPaths\":{\"podLogs\":\"x\"}}"),
	    "at '/nodeAgent/nodeGroups/1/hostPaths/podLogs': 'x' does not match pattern");
	refused(GROUPS("{\"name\":\"b\",\"nodeSelector\":{\"p\":\"b\"},\"runsc\":{\"root\":\"x\"}}"),
	    "at '/nodeAgent/nodeGroups/1/runsc/root': 'x' does not match pattern");
	refused(GROUPS("{\"name\":\"b\",\"nodeSelector\":{\"p\":\"b\"},\"cgroupRoot\":\"x\"}"),
	    "at '/nodeAgent/nodeGroups/1/cgroupRoot': 'x' does not match pattern");
	refused(GROUPS("{\"name\":\"b\",\"nodeSelector\":{\"p\":\"b\"},\"tolerations\":{}}"),
	    "at '/nodeAgent/nodeGroups/1/tolerations': got object, want array");
	refused(GROUPS("{\"name\":\"b\",\"nodeSelector\":{\"p\":\"b\"},\"metricsPort\":0}"),
	    "at '/nodeAgent/nodeGroups/1/metricsPort': minimum: got 0, want 1");
	refused(GROUPS("{\"name\":\"b\",\"nodeSelector\":{\"p\":\"b\"},\"probePort\":8081}"),
	    "nodeAgent.nodeGroups[1]: its probePort and metricsPort (the group's, or nodeAgent's) are both 8081");
	refused(GROUPS("{\"name\":\"b\",\"nodeSelector\":{\"p\":\"b\"},\"metricsPort\":9000,\"probePort\":9000}"),
	    "nodeAgent.nodeGroups[1]: its probePort and metricsPort (the group's, or nodeAgent's) are both 9000");
	refused("--set nodeAgent.nodeGroups=x", "at '/nodeAgent/nodeGroups': got string, want array");
	/* Egress: each value checked, naming it; its class never the plain one. */
	refused("--set egress.gate.replicas=-1",
	    "at '/egress/gate/replicas': minimum: got -1, want 1");
	refused("--set egress.gate.replicas=0", "at '/egress/gate/replicas': minimum: got 0, want 1");
	refused("--set egress.enabled=yes", "at '/egress/enabled': got string, want boolean");
	refused("--set egress.runtimeClass.name=Bad_Name", "at '/egress/runtimeClass/name'");
	refused("--set egress.runtimeClass.handler=runsc.net",
	    "at '/egress/runtimeClass/handler': 'runsc.net' does not match pattern");
	refused("--set egress.gate.image.pullPolicy=Sometimes", "at '/egress/gate/image/pullPolicy'");
	refused("--set egress.gate.image.repository=", "at '/egress/gate/image/repository'");
	refused("--set egress.gate.resources.limits.memory=lots",
	    "at '/egress/gate/resources/limits/memory'");
	refused("--set egress.gate.podDisruptionBudget.minAvailable=-1",
	    "at '/egress/gate/podDisruptionBudget/minAvailable'");
	refused("--set egress.gate.port=9000",
	    "at '/egress/gate': additional properties 'port' not allowed");
	refused("--set egress.enabled=true --set egress.runtimeClass.name=gvisor",
	    "egress.runtimeClass.name: \"gvisor\" is runtimeClass.name too");
	/* A profile's egress: CIDRs and TCP ports, and only with egress on. */
#define NET(e) "--set egress.enabled=true --set-json 'config.profiles.python.network=" \
	"{\"egress\":[" e "]}'"
	refused("--set-json 'config.profiles.python.network={\"egress\":[{\"cidr\":"
	    "\"10.0.0.0/8\",\"ports\":[5432]}]}'",
	    "config.profiles.python.network.egress: needs egress.enabled");
	refused(NET("{\"cidr\":\"10.0.0.0/8\",\"ports\":[1]},{\"cidr\":\"10.0.0.256/32\","
	    "\"ports\":[1]}"), "at '/config/profiles/python/network/egress/1/cidr': "
	    "'10.0.0.256/32' does not match pattern");
	refused(NET("{\"cidr\":\"10.0.0.0/33\",\"ports\":[1]}"),
	    "at '/config/profiles/python/network/egress/0/cidr'");
	refused(NET("{\"cidr\":\"10.0.0.0/8\",\"ports\":[]}"),
	    "at '/config/profiles/python/network/egress/0/ports': minItems: got 0, want 1");
	refused(NET("{\"cidr\":\"10.0.0.0/8\",\"ports\":[0]}"),
	    "at '/config/profiles/python/network/egress/0/ports/0': minimum: got 0, want 1");
	refused(NET("{\"cidr\":\"10.0.0.0/8\"}"),
	    "at '/config/profiles/python/network/egress/0': missing property 'ports'");
	refused(NET("{\"host\":\"pypi.org\",\"cidr\":\"10.0.0.0/8\",\"ports\":[443]}"),
	    "at '/config/profiles/python/network/egress/0': 'oneOf' failed, subschemas 0, 1 matched");
	refused(NET("{\"ports\":[443]}"),
	    "at '/config/profiles/python/network/egress/0': missing property 'host'");
	refused(NET("{\"host\":\"*.pypi.org\",\"ports\":[443]}"),
	    "at '/config/profiles/python/network/egress/0/host'");
	refused("--set egress.enabled=true --set 'egress.proxy.exemptCIDRs[0]=10.0.0.0'",
	    "at '/egress/proxy/exemptCIDRs/0'");
	refused("--set egress.enabled=true --set-json 'egress.proxy.hosts=[{\"ip\":\"10.0.0.1\"}]'",
	    "at '/egress/proxy/hosts/0': missing property 'names'");
	refused("--set egress.enabled=true --set config.profiles.python.network.ingress=x",
	    "at '/config/profiles/python/network': additional properties 'ingress' not allowed");
	/* The byte cap: a quantity, beside egress entries only. */
	refused("--set egress.enabled=true --set-json 'config.profiles.python.network="
	    "{\"egress\":[{\"cidr\":\"10.0.0.0/8\",\"ports\":[1]}],\"egressBytes\":\"64MB\"}'",
	    "at '/config/profiles/python/network/egressBytes': '64MB' does not match pattern");
	refused("--set egress.enabled=true --set-json 'config.profiles.python.network="
	    "{\"egressBytes\":\"64Mi\"}'",
	    "at '/config/profiles/python/network': missing property 'egress'");
	refused("--set egress.enabled=true --set-json 'config.profiles.python.network="
	    "{\"egress\":[],\"egressBytes\":\"64Mi\"}'",
	    "at '/config/profiles/python/network/egress': minItems: got 0, want 1");
#undef NET
#undef GROUPS
#undef G0
}

/* text written to a new file made from tmpl (mkstemp's XXXXXX). */
static void
write_file(char *tmpl, const char *text)
{
	int fd = mkstemp(tmpl);
	FILE *f;

	if (fd < 0 || (f = fdopen(fd, "w")) == NULL)
		fail_msg("cannot make %s", tmpl);
	fputs(text, f);
	if (fclose(f) != 0)
		fail_msg("cannot write %s", tmpl);
}

/* The chart rendered with values (YAML text) as a -f file, then more. */
static json_t *
render_values(const char *values, const char *more)
{
	char path[] = "/tmp/airlock-values-XXXXXX", *extra;
	json_t *all;

	write_file(path, values);
	extra = xasprintf("-f '%s' %s", path, more);
	all = render(extra);
	unlink(path);
	free(extra);
	return all;
}

/* Every label of sel (a matchLabels map) is in labels, with its value. */
static int
selects(json_t *sel, json_t *labels)
{
	const char *k;
	json_t *v;

	json_object_foreach(sel, k, v)
		if (!json_equal(v, json_object_get(labels, k)))
			return 0;
	return json_object_size(sel) > 0;
}

/*
 * Container c has exactly one arg starting with prefix, and it is
 * prefix+want; none when want is NULL.
 */
static void
arg_is(json_t *c, const char *prefix, const char *want)
{
	const char *got = NULL;
	json_t *x;
	size_t i, n = 0;

	json_array_foreach(at(c, "args"), i, x)
		if (strncmp(json_string_value(x), prefix, strlen(prefix)) == 0) {
			got = json_string_value(x) + strlen(prefix);
			n++;
		}
	if (want == NULL && n != 0)
		fail_msg("%s%s: wanted none", prefix, got);
	if (want != NULL && (n != 1 || strcmp(got, want) != 0))
		fail_msg("%s: %zu such args, the last '%s'; wanted one, '%s'", prefix, n,
		    got ? got : "", want);
}

/* What one node group's DaemonSet must be. */
struct group_want {
	const char *ds, *group;
	const char *node_selector, *tolerations;	/* JSON; tolerations NULL: none */
	const char *pod_logs, *socket, *exec_dir, *cgroup_root;
	const char *runsc, *runsc_root;			/* NULL: containerd alone */
	int metrics, probes;				/* its ports */
};

/*
 * The agent DaemonSet of all that w describes, its selector and its pods'
 * labels those of the component and the group; returns it (borrowed).
 */
static json_t *
group_is(json_t *all, const struct group_want *w)
{
	json_t *ds, *c;
	char *sel, *vols, *mounts, *rvols, *rmounts, port[16];

	if ((ds = find(all, "DaemonSet", w->ds)) == NULL)
		fail_msg("no DaemonSet %s", w->ds);
	sel = xasprintf("{\"app.kubernetes.io/name\": \"airlock\", \"app.kubernetes.io/instance\": "
	    "\"rel\", \"app.kubernetes.io/component\": \"node-agent\", \"airlock.dev/node-group\": "
	    "\"%s\"}", w->group);
	assert_json(at(ds, "spec.selector.matchLabels"), sel);
	assert_json(at(ds, "spec.template.metadata.labels"), sel);
	assert_string_equal(jp_key(ds, "metadata.labels", "airlock.dev/node-group"), w->group);
	assert_string_equal(jp_key(ds, "metadata.labels", "app.kubernetes.io/component"),
	    "node-agent");
	assert_json(at(ds, "spec.template.spec.nodeSelector"), w->node_selector);
	if (w->tolerations)
		assert_json(at(ds, "spec.template.spec.tolerations"), w->tolerations);
	else
		assert_null(at(ds, "spec.template.spec.tolerations"));
	/* One ServiceAccount for all: the guards know the agent by it. */
	assert_string_equal(str(ds, "spec.template.spec.serviceAccountName"),
	    "rel-airlock-node-agent");
	/* runsc's volumes and mounts, when it is used, after the others. */
	if (w->runsc) {
		rvols = xasprintf(",{\"name\": \"runsc\", \"hostPath\": {\"path\": \"%s\", "
		    "\"type\": \"File\"}}, {\"name\": \"runsc-root\", \"hostPath\": {\"path\": "
		    "\"%s\", \"type\": \"DirectoryOrCreate\"}}", w->runsc, w->runsc_root);
		rmounts = xasprintf(",{\"name\": \"runsc\", \"mountPath\": \"%s\", \"readOnly\": "
		    "true}, {\"name\": \"runsc-root\", \"mountPath\": \"%s\"}", w->runsc,
		    w->runsc_root);
	} else {
		rvols = xstrdup("");
		rmounts = xstrdup("");
	}
	vols = xasprintf("[{\"name\": \"pod-logs\", \"hostPath\": {\"path\": \"%s\", "
	    "\"type\": \"Directory\"}}, {\"name\": \"containerd\", \"hostPath\": {\"path\": "
	    "\"%s\", \"type\": \"Socket\"}}, {\"name\": \"cgroup\", \"hostPath\": {\"path\": "
	    "\"/sys/fs/cgroup\", \"type\": \"Directory\"}}, {\"name\": \"exec\", \"hostPath\": "
	    "{\"path\": \"%s\", \"type\": \"DirectoryOrCreate\"}}%s]", w->pod_logs, w->socket,
	    w->exec_dir, rvols);
	assert_json(at(ds, "spec.template.spec.volumes"), vols);
	/* Inside, the same paths but for the logs, socket and cgroups, which are fixed. */
	mounts = xasprintf("[{\"name\": \"pod-logs\", \"mountPath\": \"/var/log/pods\", "
	    "\"readOnly\": true}, {\"name\": \"containerd\", \"mountPath\": "
	    "\"/run/containerd/containerd.sock\"}, {\"name\": \"cgroup\", \"mountPath\": "
	    "\"/host/sys/fs/cgroup\", \"readOnly\": true}, {\"name\": \"exec\", \"mountPath\": "
	    "\"%s\"}%s]", w->exec_dir, rmounts);
	c = at(ds, "spec.template.spec.containers[0]");
	assert_json(at(c, "volumeMounts"), mounts);
	arg_is(c, "--pod-logs-dir=", "/var/log/pods");
	arg_is(c, "--containerd-socket=", "/run/containerd/containerd.sock");
	arg_is(c, "--cgroup-root=", w->cgroup_root);
	arg_is(c, "--exec-dir=", w->exec_dir);
	arg_is(c, "--runsc=", w->runsc);
	arg_is(c, "--runsc-root=", w->runsc ? w->runsc_root : NULL);
	snprintf(port, sizeof(port), ":%d", w->metrics);
	arg_is(c, "--metrics-addr=", port);
	assert_int_equal(json_integer_value(at(c, "ports[0].containerPort")), w->metrics);
	probes_on(c, w->probes, NULL);
	assert_string_equal(str(c, "args[0]"), "--node-name=$(NODE_NAME)");
	free(sel);
	free(vols);
	free(mounts);
	free(rvols);
	free(rmounts);
	return ds;
}

/*
 * Node groups (issue 28 item 2): a DaemonSet per group, each with its
 * group's paths over the common ones and a selector of its own, so no
 * DaemonSet takes another's pods; no DaemonSet for nodes outside the
 * groups. Whatever picks the agents' pods by their component (the
 * metrics Service, the ServiceMonitor, the NetworkPolicy) picks all.
 */
static void
test_node_groups(void **state)
{
	static const char values[] =
	    "nodeAgent:\n"
	    "  nodeSelector: {airlock: \"yes\", zone: a}\n"
	    "  tolerations: [{key: base, operator: Exists}]\n"
	    "  nodeGroups:\n"
	    "    - name: k3s\n"
	    "      nodeSelector: {pool: k3s}\n"
	    "      hostPaths: {containerdSocket: /run/k3s/containerd/containerd.sock}\n"
	    "      cgroupRoot: /k3s\n"
	    "    - name: big-2\n"
	    "      nodeSelector: {zone: b, pool: big}\n"
	    "      hostPaths: {podLogs: /data/pods, execDir: /data/exec}\n"
	    "      runsc: {path: /opt/runsc, root: /run/big/runsc}\n"
	    "      tolerations: [{key: big, operator: Exists, effect: NoSchedule}]\n"
	    "      metricsPort: 9181\n"
	    "      probePort: 9183\n"
	    "networkPolicy:\n"
	    "  metricsFrom: [{namespaceSelector: {}}]\n";
	static const struct group_want want[] = {
		{ "rel-airlock-node-agent-k3s", "k3s", "{\"node-restriction.kubernetes.io/airlock-gvisor\": "
		    "\"true\", \"airlock\": \"yes\", \"zone\": \"a\", \"pool\": \"k3s\"}", "[{\"key\": \"base\", \"operator\": \"Exists\"}]",
		    "/var/log/pods", "/run/k3s/containerd/containerd.sock", "/run/airlock/exec",
		    "/k3s", NULL, NULL, 8081, 8083 },
		{ "rel-airlock-node-agent-big-2", "big-2", "{\"node-restriction.kubernetes.io/airlock-gvisor\": "
		    "\"true\", \"airlock\": \"yes\", \"zone\": \"b\", \"pool\": \"big\"}", "[{\"key\": \"big\", \"operator\": \"Exists\", \"effect\": "
		    "\"NoSchedule\"}]", "/data/pods", "/run/containerd/containerd.sock",
		    "/data/exec", "/", "/opt/runsc", "/run/big/runsc", 9181, 9183 },
	};
	json_t *all, *ds[2], *x;

	(void)state;
	all = render_values(values, "--set metrics.serviceMonitor.enabled=true");
	assert_int_equal(count(all, "DaemonSet"), 2);
	assert_null(find(all, "DaemonSet", "rel-airlock-node-agent"));
	for (int i = 0; i < 2; i++)
		ds[i] = group_is(all, &want[i]);
	assert_false(selects(at(ds[0], "spec.selector.matchLabels"),
	    at(ds[1], "spec.template.metadata.labels")));
	assert_false(selects(at(ds[1], "spec.selector.matchLabels"),
	    at(ds[0], "spec.template.metadata.labels")));
	/* One ServiceAccount, one role, one set of guards for every group. */
	assert_int_equal(count(all, "ServiceAccount"), 3);	/* controller, agent, helm test's tenant */
	assert_non_null(find(all, "ServiceAccount", "rel-airlock-node-agent"));
	assert_non_null(x = find(all, "ValidatingAdmissionPolicy", "rel-airlock-node-agent-delete-guard"));
	assert_non_null(strstr(str(x, "spec.matchConditions[0].expression"),
	    "\"system:serviceaccount:airlock-system:rel-airlock-node-agent\""));
	/* Every group's pods are scraped and let in by the same objects. */
	for (int i = 0; i < 2; i++) {
		json_t *labels = at(ds[i], "spec.template.metadata.labels");

		assert_non_null(x = find(all, "Service", "rel-airlock-node-agent-metrics"));
		assert_true(selects(at(x, "spec.selector"), labels));
		assert_non_null(x = find(all, "ServiceMonitor", "rel-airlock-node-agent"));
		assert_true(selects(at(x, "spec.selector.matchLabels"), labels));
		assert_non_null(x = find(all, "NetworkPolicy", "rel-airlock-daemons"));
		assert_true(selects(at(x, "spec.podSelector.matchLabels"), labels));
	}
	/* The scrapers reach each group's metrics port (the controller's first). */
	assert_json(at(x, "spec.ingress[0].ports"), "[{\"protocol\": \"TCP\", \"port\": 8080}, "
	    "{\"protocol\": \"TCP\", \"port\": 8081}, {\"protocol\": \"TCP\", \"port\": 9181}]");
	/* The RuntimeClass still schedules by the common selector. */
	assert_json(at(find(all, "RuntimeClass", "gvisor"), "scheduling.nodeSelector"),
	    "{\"node-restriction.kubernetes.io/airlock-gvisor\": \"true\", \"airlock\": \"yes\", "
	    "\"zone\": \"a\"}");
	json_decref(all);
}

/* The helm template output, as text (caller frees). */
static char *
render_text(const char *extra)
{
	char args[8192], *out, *err;
	int st;

	snprintf(args, sizeof(args), "template rel '%s' --kube-version 1.37.2 --namespace airlock-system %s",
	    chart, extra);
	st = run(args, &out, &err);
	if (st != 0)
		fail_msg("helm template %s: exit %d: %s", extra, st, err);
	free(err);
	return out;
}

/*
 * Egress off (the default): none of its objects, no agent flag, no
 * networkRuntimeClassName; and whatever egress.* else says, the output
 * is the same bytes as without it (docs/network.md: the agent then
 * refuses every sandbox with a network stack).
 */
static void
test_egress_off(void **state)
{
	json_t *all = render(""), *o, *c;
	char *plain, *other;
	size_t i;

	(void)state;
	assert_int_equal(count(all, "RuntimeClass"), 1);
	assert_non_null(find(all, "RuntimeClass", "gvisor"));
	assert_int_equal(count(all, "Deployment"), 1);
	assert_int_equal(count(all, "PodDisruptionBudget"), 1);
	assert_int_equal(count(all, "NetworkPolicy"), 1);
	json_array_foreach(all, i, o) {
		char *text = json_dumps(o, JSON_COMPACT);

		if (strstr(text, "egress-gate") || strstr(text, "gvisor-net"))
			fail_msg("%s %s names the egress gate or class with egress off",
			    str(o, "kind"), str(o, "metadata.name"));
		free(text);
	}
	/* Nor the proxies' log (controller/egressfollow.c). */
	assert_null(find(all, "Role", "rel-airlock-controller-egress-log"));
	assert_int_equal(count_text(all, "pods/log"), 0);
	c = at(find(all, "DaemonSet", NULL), "spec.template.spec.containers[0]");
	arg_is(c, "--network-runtime-class", NULL);
	/* No metering: no iptables, no NET_ADMIN, the pod's own network. */
	arg_is(c, "--iptables", NULL);
	assert_json(at(c, "securityContext.capabilities"),
	    "{\"drop\": [\"ALL\"], \"add\": [\"KILL\"]}");
	assert_false(json_is_true(at(find(all, "DaemonSet", NULL), "spec.template.spec.hostNetwork")));
	assert_null(strstr(str(find(all, "ConfigMap", "rel-airlock-controller"),
	    "data.config\\.yaml"), "networkRuntimeClassName"));
	json_decref(all);

	plain = render_text("");
	other = render_text("--set egress.enabled=false --set egress.runtimeClass.name=other "
	    "--set egress.runtimeClass.handler=other --set egress.gate.replicas=5 "
	    "--set egress.gate.image.tag=9.9 --set egress.gate.podDisruptionBudget.enabled=false");
	assert_string_equal(other, plain);
	free(plain);
	free(other);
}

/* The gate pods' selector labels, which the controller's watch needs one of. */
#define GATE_LABELS "{\"app.kubernetes.io/name\": \"airlock\", \"app.kubernetes.io/instance\": " \
	"\"rel\", \"app.kubernetes.io/component\": \"egress-gate\"}"

/*
 * Egress on: the network RuntimeClass on the agent's nodes, the agent's
 * flag and the config's key naming it, and the start gate (controller/
 * egress.c, podspec.h's PODSPEC_GATE_*) with its NetworkPolicy, each
 * field as the controller and the runner expect it.
 */
static void
test_egress_on(void **state)
{
	static const char values[] =
	    "egress: {enabled: true}\n"
	    "nodeAgent:\n"
	    "  tolerations: [{key: gvisor, operator: Exists, effect: NoSchedule}]\n";
	json_t *all, *o, *d, *pod, *c;
	struct ctl_config *cfg;
	struct k8s_error err;
	const char *conf;
	char *s;

	(void)state;
	all = render_values(values, "");
	/* The class: its own handler, scheduled as the gVisor one. */
	assert_int_equal(count(all, "RuntimeClass"), 2);
	assert_non_null(o = find(all, "RuntimeClass", "gvisor-net"));
	assert_string_equal(str(o, "handler"), "runsc-net");
	assert_json(at(o, "scheduling"), "{\"nodeSelector\": {\"node-restriction.kubernetes.io/"
	    "airlock-gvisor\": \"true\"}, \"tolerations\": [{\"key\": \"gvisor\", \"operator\": "
	    "\"Exists\", \"effect\": \"NoSchedule\"}]}");
	assert_true(json_equal(at(o, "scheduling"), at(find(all, "RuntimeClass", "gvisor"),
	    "scheduling")));
	/* The agent lets that class's sandboxes have a network stack. */
	c = at(find(all, "DaemonSet", "rel-airlock-node-agent"), "spec.template.spec.containers[0]");
	arg_is(c, "--network-runtime-class=", "gvisor-net");
	/*
	 * And meters them (the byte cap): its iptables, NET_ADMIN for the
	 * host's netfilter, on the host's network, with the host's lock.
	 */
	arg_is(c, "--iptables=", "/usr/sbin/iptables");
	assert_json(at(c, "securityContext.capabilities"),
	    "{\"drop\": [\"ALL\"], \"add\": [\"KILL\", \"NET_ADMIN\"]}");
	assert_true(json_is_true(at(find(all, "DaemonSet", "rel-airlock-node-agent"),
	    "spec.template.spec.hostNetwork")));
	arg_is(c, "--probe-addr=", "127.0.0.1:8083");
	{
		json_t *v, *vols = at(find(all, "DaemonSet", "rel-airlock-node-agent"),
		    "spec.template.spec.volumes");
		const char *lock = NULL;
		size_t j;

		json_array_foreach(vols, j, v)
			if (strcmp(str(v, "name"), "xtables-lock") == 0)
				lock = str(v, "hostPath.path");
		assert_non_null(lock);
		assert_string_equal(lock, "/run/xtables.lock");
	}
	/* The controller runs executions with egress under it. */
	conf = str(find(all, "ConfigMap", "rel-airlock-controller"), "data.config\\.yaml");
	assert_non_null(strstr(conf, "\nnetworkRuntimeClassName: gvisor-net\n"));
	if (ctl_config_parse(conf, strlen(conf), "chart config", &cfg, &err) != 0)
		fail_msg("the controller refuses the chart's config: %s\n%s", err.message, conf);
	assert_string_equal(cfg->network_runtime_class, "gvisor-net");
	assert_string_equal(cfg->runtime_class, "gvisor");
	ctl_config_free(cfg);

	/* The gate: found by the controller's selector, in its namespace. */
	assert_non_null(d = find(all, "Deployment", "rel-airlock-egress-gate"));
	assert_string_equal(str(d, "metadata.namespace"), "airlock-system");
	assert_int_equal(json_integer_value(at(d, "spec.replicas")), 2);
	assert_json(at(d, "spec.selector.matchLabels"), GATE_LABELS);
	assert_json(at(d, "spec.template.metadata.labels"), GATE_LABELS);
	assert_string_equal(jp_key(d, "spec.template.metadata.labels", PODSPEC_GATE_LABEL),
	    PODSPEC_GATE_COMPONENT);
	pod = at(d, "spec.template.spec");
	/* Airlock's own code: the default runtime, no API access, non-root. */
	assert_null(at(pod, "runtimeClassName"));
	assert_null(at(pod, "serviceAccountName"));
	assert_true(json_is_false(at(pod, "automountServiceAccountToken")));
	assert_json(at(pod, "securityContext"), "{\"runAsNonRoot\": true, \"runAsUser\": 65532, "
	    "\"runAsGroup\": 65532, \"fsGroup\": 65532, \"seccompProfile\": {\"type\": "
	    "\"RuntimeDefault\"}}");
	assert_int_equal(json_array_size(at(pod, "containers")), 2);
	c = at(pod, "containers[0]");
	assert_string_equal(str(c, "image"), "airlock.dev/egress-gate:0.1.0");
	assert_string_equal(str(c, "imagePullPolicy"), "IfNotPresent");
	/* Every port an execution's policy may name (podspec_gate_ports). */
	s = xasprintf("[\"/gate\", \"--serve\", \"%d-%d\", \"%d\"]", PODSPEC_GATE_OPEN_BASE,
	    PODSPEC_GATE_OPEN_BASE + PODSPEC_GATE_OPEN_PORTS - 1, PODSPEC_GATE_CLOSED);
	assert_json(at(c, "command"), s);
	free(s);
	assert_null(at(c, "args"));
	s = xasprintf("[{\"name\": \"open\", \"containerPort\": %d}, {\"name\": \"closed\", "
	    "\"containerPort\": %d}]", PODSPEC_GATE_OPEN_BASE, PODSPEC_GATE_CLOSED);
	assert_json(at(c, "ports"), s);
	free(s);
	assert_int_equal(json_integer_value(at(c, "readinessProbe.tcpSocket.port")),
	    PODSPEC_GATE_OPEN_BASE);
	assert_json(at(c, "securityContext"), "{\"allowPrivilegeEscalation\": false, "
	    "\"readOnlyRootFilesystem\": true, \"capabilities\": {\"drop\": [\"ALL\"]}}");
	assert_json(at(c, "resources"), "{\"requests\": {\"cpu\": \"10m\", \"memory\": \"8Mi\"}, "
	    "\"limits\": {\"memory\": \"32Mi\"}}");
	/*
	 * The proxy beside it: its key from the Secret the controller signs
	 * with, read-only, its ports none (no host entry: 443 alone, unused),
	 * the cluster's resolver; ready when 3128 answers.
	 */
	c = at(pod, "containers[1]");
	assert_string_equal(str(c, "name"), "proxy");
	assert_string_equal(str(c, "image"), "airlock.dev/egress:0.1.0");
	assert_json(at(c, "env"), "[{\"name\": \"EGRESS_KEY_FILE\", \"value\": "
	    "\"/etc/airlock-egress/key\"}, {\"name\": \"EGRESS_PORTS\", \"value\": \"443\"}, "
	    "{\"name\": \"EGRESS_DNS\", \"value\": \"\"}, {\"name\": "
	    "\"EGRESS_EXTRA_DENIED_CIDRS\", \"value\": \"\"}, {\"name\": "
	    "\"EGRESS_EXEMPT_CIDRS\", \"value\": \"\"}, {\"name\": \"EGRESS_MAX_SECONDS\", "
	    "\"value\": \"3600\"}]");
	assert_int_equal(json_integer_value(at(c, "readinessProbe.tcpSocket.port")), 3128);
	assert_json(at(c, "securityContext"), "{\"allowPrivilegeEscalation\": false, "
	    "\"readOnlyRootFilesystem\": true, \"capabilities\": {\"drop\": [\"ALL\"]}}");
	assert_json(at(c, "volumeMounts"), "[{\"name\": \"run\", \"mountPath\": "
	    "\"/run/airlock\"}, {\"name\": \"egress-key\", \"mountPath\": "
	    "\"/etc/airlock-egress\", \"readOnly\": true}]");
	assert_json(at(pod, "volumes"), "[{\"name\": \"run\", \"emptyDir\": {\"medium\": "
	    "\"Memory\", \"sizeLimit\": \"4Mi\"}}, {\"name\": \"egress-key\", \"secret\": "
	    "{\"secretName\": \"rel-airlock-egress-key\", \"defaultMode\": 288}}]");
	/* The key: made once, 48 characters; the controller reads the same. */
	assert_non_null(o = find(all, "Secret", "rel-airlock-egress-key"));
	assert_int_equal(strlen(str(o, "data.key")), 64);
	c = at(find(all, "Deployment", "rel-airlock-controller"), "spec.template.spec");
	arg_is(at(c, "containers[0]"), "--egress-key=", "/etc/airlock-egress/key");
	assert_string_equal(str(c, "volumes[1].secret.secretName"), "rel-airlock-egress-key");
	assert_int_equal(json_integer_value(at(c, "securityContext.fsGroup")), 65532);
	/*
	 * The proxies' records, counted into executions' status
	 * (controller/egressfollow.c): their container's log, read through
	 * the API in the release namespace only, and nowhere else.
	 */
	assert_non_null(o = find(all, "Role", "rel-airlock-controller-egress-log"));
	assert_string_equal(str(o, "metadata.namespace"), "airlock-system");
	assert_json(at(o, "rules"), "[{\"apiGroups\": [\"\"], \"resources\": [\"pods/log\"], "
	    "\"verbs\": [\"get\"]}]");
	assert_non_null(o = find(all, "RoleBinding", "rel-airlock-controller-egress-log"));
	assert_string_equal(str(o, "metadata.namespace"), "airlock-system");
	assert_json(at(o, "roleRef"), "{\"apiGroup\": \"rbac.authorization.k8s.io\", "
	    "\"kind\": \"Role\", \"name\": \"rel-airlock-controller-egress-log\"}");
	assert_json(at(o, "subjects"), "[{\"kind\": \"ServiceAccount\", \"name\": "
	    "\"rel-airlock-controller\", \"namespace\": \"airlock-system\"}]");
	assert_int_equal(count_text(all, "pods/log"), 1);
	/* Not an Airlock-managed pod: the forgery guard would refuse it. */
	assert_null(json_object_get(at(d, "spec.template.metadata.labels"),
	    "app.kubernetes.io/managed-by"));
	assert_json(at(pod, "affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0]"
	    ".podAffinityTerm.labelSelector.matchLabels"), GATE_LABELS);
	assert_non_null(o = find(all, "PodDisruptionBudget", "rel-airlock-egress-gate"));
	assert_int_equal(json_integer_value(at(o, "spec.minAvailable")), 1);
	assert_json(at(o, "spec.selector.matchLabels"), GATE_LABELS);

	/*
	 * Its NetworkPolicy: execution pods of every namespace reach both
	 * ports (the closed one too: a refusal there must be the execution's
	 * policy's, never the gate's side's); nothing else in, nothing out.
	 */
	assert_non_null(o = find(all, "NetworkPolicy", "rel-airlock-egress-gate"));
	assert_string_equal(str(o, "metadata.namespace"), "airlock-system");
	assert_json(at(o, "spec.podSelector"), "{\"matchLabels\": " GATE_LABELS "}");
	assert_json(at(o, "spec.policyTypes"), "[\"Ingress\", \"Egress\"]");
	s = xasprintf("[{\"from\": [{\"namespaceSelector\": {}, \"podSelector\": {\"matchLabels\": "
	    "{\"app.kubernetes.io/managed-by\": \"airlock-controller\", "
	    "\"app.kubernetes.io/component\": \"execution\"}}}], \"ports\": [{\"protocol\": "
	    "\"TCP\", \"port\": %d, \"endPort\": %d}, {\"protocol\": \"TCP\", \"port\": %d}, "
	    "{\"protocol\": \"TCP\", \"port\": %d}]}]", PODSPEC_GATE_OPEN_BASE,
	    PODSPEC_GATE_OPEN_BASE + PODSPEC_GATE_OPEN_PORTS - 1, PODSPEC_GATE_CLOSED,
	    PODSPEC_PROXY_PORT);
	assert_json(at(o, "spec.ingress"), s);
	free(s);
	/* Out: the proxy's, public addresses on TCP, and DNS. */
	assert_json(at(o, "spec.egress"), "[{\"to\": [{\"ipBlock\": {\"cidr\": \"0.0.0.0/0\", "
	    "\"except\": [\"0.0.0.0/8\", \"10.0.0.0/8\", \"100.64.0.0/10\", \"127.0.0.0/8\", "
	    "\"169.254.0.0/16\", \"172.16.0.0/12\", \"192.168.0.0/16\", \"224.0.0.0/3\"]}}], "
	    "\"ports\": [{\"protocol\": \"TCP\"}]}, {\"to\": [{\"namespaceSelector\": "
	    "{\"matchLabels\": {\"kubernetes.io/metadata.name\": \"kube-system\"}}, "
	    "\"podSelector\": {\"matchLabels\": {\"k8s-app\": \"kube-dns\"}}}], \"ports\": "
	    "[{\"protocol\": \"UDP\", \"port\": 53}, {\"protocol\": \"TCP\", \"port\": 53}]}]");
	/* The daemons' policy is still there, beside it. */
	assert_non_null(find(all, "NetworkPolicy", "rel-airlock-daemons"));
	assert_int_equal(count(all, "NetworkPolicy"), 2);
	json_decref(all);

	/*
	 * Other names, node groups, one gate replica, the daemons' policy
	 * off: every agent has the flag, the gate's policy stays (it is what
	 * lets both ports in), and one replica has no budget nor affinity.
	 */
	all = render("--set egress.enabled=true --set egress.runtimeClass.name=net2 "
	    "--set egress.runtimeClass.handler=h2 --set egress.gate.replicas=1 "
	    "--set egress.gate.image.repository=reg.example/gate --set egress.gate.image.tag=2.0 "
	    "--set egress.gate.image.pullPolicy=Always --set networkPolicy.enabled=false "
	    "--set-json 'nodeAgent.nodeGroups=[{\"name\":\"a\",\"nodeSelector\":{\"p\":\"a\"}},"
	    "{\"name\":\"b\",\"nodeSelector\":{\"p\":\"b\"}}]'");
	assert_non_null(o = find(all, "RuntimeClass", "net2"));
	assert_string_equal(str(o, "handler"), "h2");
	assert_null(find(all, "RuntimeClass", "gvisor-net"));
	assert_int_equal(count(all, "DaemonSet"), 2);
	arg_is(at(find(all, "DaemonSet", "rel-airlock-node-agent-a"),
	    "spec.template.spec.containers[0]"), "--network-runtime-class=", "net2");
	arg_is(at(find(all, "DaemonSet", "rel-airlock-node-agent-b"),
	    "spec.template.spec.containers[0]"), "--network-runtime-class=", "net2");
	assert_non_null(strstr(str(find(all, "ConfigMap", "rel-airlock-controller"),
	    "data.config\\.yaml"), "\nnetworkRuntimeClassName: net2\n"));
	assert_non_null(d = find(all, "Deployment", "rel-airlock-egress-gate"));
	assert_int_equal(json_integer_value(at(d, "spec.replicas")), 1);
	assert_null(at(d, "spec.template.spec.affinity"));
	c = at(d, "spec.template.spec.containers[0]");
	assert_string_equal(str(c, "image"), "reg.example/gate:2.0");
	assert_string_equal(str(c, "imagePullPolicy"), "Always");
	assert_null(find(all, "PodDisruptionBudget", "rel-airlock-egress-gate"));
	assert_int_equal(count(all, "NetworkPolicy"), 1);
	assert_non_null(find(all, "NetworkPolicy", "rel-airlock-egress-gate"));
	json_decref(all);

	/*
	 * A profile's egress, into the config as the controller reads it
	 * (ctl_config.c): any refusal, or another list, is the chart's fault.
	 */
	all = render("--set egress.enabled=true --set-json 'config.profiles.python.network="
	    "{\"egress\":[{\"cidr\":\"10.20.0.0/16\",\"ports\":[5432,5433]}],"
	    "\"egressBytes\":\"64Mi\"}'");
	conf = str(find(all, "ConfigMap", "rel-airlock-controller"), "data.config\\.yaml");
	assert_non_null(strstr(conf, "\n    network: {\"egress\":[{\"cidr\":\"10.20.0.0/16\","
	    "\"ports\":[5432,5433]}],\"egressBytes\":\"64Mi\"}\n"));
	/* The one profile's only. */
	assert_null(strstr(strstr(conf, "\n    network: ") + 1, "\n    network: "));
	if (ctl_config_parse(conf, strlen(conf), "chart config", &cfg, &err) == 0) {
		const struct ctl_profile *p = ctl_config_profile(cfg, "python");

		assert_int_equal(p->negress, 1);
		assert_string_equal(p->egress[0].cidr, "10.20.0.0/16");
		assert_int_equal(p->egress[0].nports, 2);
		assert_int_equal(p->egress[0].ports[0], 5432);
		assert_int_equal(p->egress[0].ports[1], 5433);
		assert_int_equal(p->egress_bytes, 64 << 20);
		assert_int_equal(ctl_config_profile(cfg, "node")->negress, 0);
		assert_int_equal(ctl_config_profile(cfg, "node")->egress_bytes, 0);
		ctl_config_free(cfg);
	} else
		fail_msg("the controller refuses the chart's egress: %s\n%s", err.message, conf);
	json_decref(all);

	/*
	 * Host entries: their ports are the proxy's (each once); the
	 * operator's names, resolvers, ranges and way out reach it.
	 */
	all = render("--set egress.enabled=true --set-json 'config.profiles.python.network="
	    "{\"egress\":[{\"host\":\"pypi.org\",\"ports\":[443]},{\"cidr\":\"10.20.0.0/16\","
	    "\"ports\":[5432]}]}' --set-json 'config.profiles.node.network={\"egress\":[{\"host\":"
	    "\"a.example.com\",\"ports\":[8443,443]}]}' --set-json 'egress.proxy.hosts=[{\"ip\":"
	    "\"10.9.0.5\",\"names\":[\"a.example.com\",\"b.example.com\"]}]' "
	    "--set 'egress.proxy.dnsServers={10.96.0.10}' --set 'egress.proxy.exemptCIDRs={10.9.0.5/32}' "
	    "--set 'egress.proxy.deniedCIDRs={203.0.113.0/24}' "
	    "--set-json 'egress.proxy.egressTo=[{\"to\":[{\"ipBlock\":{\"cidr\":\"10.9.0.5/32\"}}]}]'");
	conf = str(find(all, "ConfigMap", "rel-airlock-controller"), "data.config\\.yaml");
	if (ctl_config_parse(conf, strlen(conf), "chart config", &cfg, &err) != 0)
		fail_msg("the controller refuses the chart's host entries: %s\n%s", err.message, conf);
	assert_string_equal(ctl_config_profile(cfg, "python")->egress[0].host, "pypi.org");
	ctl_config_free(cfg);
	c = at(find(all, "Deployment", "rel-airlock-egress-gate"), "spec.template.spec");
	assert_string_equal(str(c, "containers[1].env[1].value"), "443 8443");
	assert_string_equal(str(c, "containers[1].env[2].value"), "10.96.0.10");
	assert_json(at(c, "containers[1].env[3]"), "{\"name\": \"EGRESS_HOSTS_FILE\", "
	    "\"value\": \"/etc/airlock-egress-hosts/hosts\"}");
	assert_string_equal(str(c, "containers[1].env[5].value"), "10.9.0.5/32");
	assert_string_equal(str(c, "volumes[2].configMap.name"), "rel-airlock-egress-gate-hosts");
	assert_string_equal(str(find(all, "ConfigMap", "rel-airlock-egress-gate-hosts"),
	    "data.hosts"), "10.9.0.5 a.example.com b.example.com\n");
	assert_json(at(find(all, "NetworkPolicy", "rel-airlock-egress-gate"), "spec.egress[2]"),
	    "{\"to\": [{\"ipBlock\": {\"cidr\": \"10.9.0.5/32\"}}]}");
	/* The operator's denied ranges are the policy's exceptions too. */
	assert_json(at(find(all, "NetworkPolicy", "rel-airlock-egress-gate"),
	    "spec.egress[0].to[0].ipBlock.except"), "[\"0.0.0.0/8\", \"10.0.0.0/8\", "
	    "\"100.64.0.0/10\", \"127.0.0.0/8\", \"169.254.0.0/16\", \"172.16.0.0/12\", "
	    "\"192.168.0.0/16\", \"224.0.0.0/3\", \"203.0.113.0/24\"]");
	assert_string_equal(str(c, "containers[1].env[4].value"), "203.0.113.0/24");
	json_decref(all);

	/* A class made by the operator: named everywhere, not made here. */
	all = render("--set egress.enabled=true --set egress.runtimeClass.create=false");
	assert_int_equal(count(all, "RuntimeClass"), 1);
	assert_null(find(all, "RuntimeClass", "gvisor-net"));
	arg_is(at(find(all, "DaemonSet", NULL), "spec.template.spec.containers[0]"),
	    "--network-runtime-class=", "gvisor-net");
	json_decref(all);
}

/* A fake .cluster/env of node.sh's node_env, two nodes, as up.sh writes it. */
static const char env_two[] =
    "KUBECONFIG_ADMIN=/c/kubeconfig\n"
    "NODE_NAME=airlock-node\n"
    "CONTAINERD_SOCK=/c/node/containerd/containerd.sock\n"
    "CTR=\"ctr --address /c/node/containerd/containerd.sock -n k8s.io\"\n"
    "POD_LOGS_DIR=/c/node/pod-logs\n"
    "RUNSC=/g/bin/runsc\n"
    "GVISOR_SHIM=gvisor\n"
    "RUNSC_ROOT=/c/node/runsc/k8s.io\n"
    "CGROUP_ROOT=/airlock-abc123\n"
    "NODE_COUNT=%d\n"
    "NODE_1_NAME=airlock-node\n"
    "NODE_1_CONTAINERD_SOCK=/c/node/containerd/containerd.sock\n"
    "NODE_1_CTR=\"ctr --address /c/node/containerd/containerd.sock -n k8s.io\"\n"
    "NODE_1_POD_LOGS_DIR=/c/node/pod-logs\n"
    "NODE_1_KUBELET_ROOT_DIR=/c/node/kubelet\n"
    "NODE_1_RUNSC_ROOT=/c/node/runsc/k8s.io\n"
    "NODE_1_CGROUP_ROOT=/airlock-abc123\n"
    "NODE_1_BRIDGE=alkabc123\n"
    "%s"
    "NODE_NAMES=\"airlock-node airlock-node-2\"\n";
/* Node 2: a quote in its directory, for the YAML's quoting. */
static const char env_node2[] =
    "NODE_2_NAME=airlock-node-2\n"
    "NODE_2_CONTAINERD_SOCK=/c/it's/node-2/containerd/containerd.sock\n"
    "NODE_2_CTR=\"ctr --address /c/it's/node-2/containerd/containerd.sock -n k8s.io\"\n"
    "NODE_2_POD_LOGS_DIR=/c/it's/node-2/pod-logs\n"
    "NODE_2_KUBELET_ROOT_DIR=/c/it's/node-2/kubelet\n"
    "NODE_2_RUNSC_ROOT=/c/it's/node-2/runsc/k8s.io\n"
    "NODE_2_CGROUP_ROOT=/airlock-abc123n2\n"
    "NODE_2_BRIDGE=alkabc123n2\n";
static const char values_head[] =
    "# The test cluster's nodes as node groups (tests/cluster/chart-node-values.sh).\n"
    "nodeAgent:\n"
    "  nodeGroups:\n";
static const char values_node1[] =
    "    - name: node-1\n"
    "      nodeSelector: {kubernetes.io/hostname: 'airlock-node'}\n"
    "      hostPaths:\n"
    "        podLogs: '/c/node/pod-logs'\n"
    "        containerdSocket: '/c/node/containerd/containerd.sock'\n"
    "        cgroup: /sys/fs/cgroup\n"
    "        execDir: '/c/node/airlock-exec'\n"
    "      runsc: {path: '/g/bin/runsc', root: '/c/node/runsc/k8s.io'}\n"
    "      cgroupRoot: '/airlock-abc123'\n";
static const char values_node2[] =
    "    - name: node-2\n"
    "      nodeSelector: {kubernetes.io/hostname: 'airlock-node-2'}\n"
    "      hostPaths:\n"
    "        podLogs: '/c/it''s/node-2/pod-logs'\n"
    "        containerdSocket: '/c/it''s/node-2/containerd/containerd.sock'\n"
    "        cgroup: /sys/fs/cgroup\n"
    "        execDir: '/c/it''s/node-2/airlock-exec'\n"
    "      runsc: {path: '/g/bin/runsc', root: '/c/it''s/node-2/runsc/k8s.io'}\n"
    "      cgroupRoot: '/airlock-abc123n2'\n";

/*
 * Run the script on an env file of text, then args (a shell fragment); its
 * exit status, stdout, stderr.
 */
static int
node_values(const char *text, const char *args, char **outp, char **errp)
{
	char path[] = "/tmp/airlock-env-XXXXXX", *cmd;
	int st;

	write_file(path, text);
	cmd = xasprintf("'%s/tests/cluster/chart-node-values.sh' '%s' %s", top, path, args);
	st = it_sh(cmd, outp, errp);
	unlink(path);
	free(cmd);
	return st;
}

/*
 * tests/cluster/chart-node-values.sh: the test cluster's env file made
 * into node groups, one a node, each picked by its host name, with the
 * node's own directories (as the chart tier's values have node 1's);
 * rendered, each node's DaemonSet mounts them.
 */
static void
test_node_values_script(void **state)
{
	static const struct group_want want[] = {
		{ "rel-airlock-node-agent-node-1", "node-1", "{\"node-restriction.kubernetes.io/"
		    "airlock-gvisor\": \"true\", \"kubernetes.io/hostname\": \"airlock-node\"}", NULL,
		    "/c/node/pod-logs", "/c/node/containerd/containerd.sock", "/c/node/airlock-exec",
		    "/airlock-abc123", "/g/bin/runsc", "/c/node/runsc/k8s.io", 8081, 8083 },
		{ "rel-airlock-node-agent-node-2", "node-2", "{\"node-restriction.kubernetes.io/"
		    "airlock-gvisor\": \"true\", \"kubernetes.io/hostname\": \"airlock-node-2\"}", NULL,
		    "/c/it's/node-2/pod-logs", "/c/it's/node-2/containerd/containerd.sock",
		    "/c/it's/node-2/airlock-exec", "/airlock-abc123n2", "/g/bin/runsc",
		    "/c/it's/node-2/runsc/k8s.io", 8081, 8083 },
	};
	char *env, *out, *err, *wanted;
	json_t *all;

	(void)state;
	/* Two nodes. */
	env = xasprintf(env_two, 2, env_node2);
	if (node_values(env, "", &out, &err) != 0)
		fail_msg("chart-node-values.sh: %s", err);
	wanted = xasprintf("%s%s%s", values_head, values_node1, values_node2);
	assert_string_equal(out, wanted);
	assert_string_equal(err, "");
	all = render_values(out, "");
	free(out);
	free(err);
	free(wanted);
	assert_int_equal(count(all, "DaemonSet"), 2);
	group_is(all, &want[0]);
	group_is(all, &want[1]);
	json_decref(all);

	/*
	 * The test nodes share the machine's network: agents on hostNetwork
	 * are given ports of their own, one pair a node.
	 */
	assert_int_equal(node_values(env, "9001:9002 9003:9004", &out, &err), 0);
	free(env);
	wanted = xasprintf("%s%s%s%s%s", values_head, values_node1,
	    "      metricsPort: 9001\n      probePort: 9002\n", values_node2,
	    "      metricsPort: 9003\n      probePort: 9004\n");
	assert_string_equal(out, wanted);
	all = render_values(out, "");
	free(out);
	free(err);
	free(wanted);
	for (int i = 0; i < 2; i++) {
		struct group_want w = want[i];

		w.metrics = 9001 + 2 * i;
		w.probes = 9002 + 2 * i;
		group_is(all, &w);
	}
	json_decref(all);

	/* One node (NODE_COUNT=1): its group alone. */
	env = xasprintf(env_two, 1, "");
	assert_int_equal(node_values(env, "", &out, &err), 0);
	free(env);
	wanted = xasprintf("%s%s", values_head, values_node1);
	assert_string_equal(out, wanted);
	free(out);
	free(err);
	free(wanted);

	/* A node's variable missing: refused, naming it and the file. */
	env = xasprintf(env_two, 2, "NODE_2_NAME=airlock-node-2\n");
	assert_int_equal(node_values(env, "", &out, &err), 1);
	free(env);
	assert_string_equal(out, "");
	assert_non_null(strstr(err, "chart-node-values.sh: no NODE_2_CONTAINERD_SOCK in '/tmp/airlock-env-"));
	free(out);
	free(err);
	/* No nodes. */
	assert_int_equal(node_values("NODE_COUNT=0\n", "", &out, &err), 1);
	assert_non_null(strstr(err, "chart-node-values.sh: NODE_COUNT in '/tmp/airlock-env-"));
	assert_non_null(strstr(err, "is '0': the cluster has no node"));
	free(out);
	free(err);
	/* Ports: one pair a node, numbers. */
	env = xasprintf(env_two, 2, env_node2);
	assert_int_equal(node_values(env, "9001:9002", &out, &err), 1);
	assert_string_equal(out, "");
	assert_string_equal(err, "chart-node-values.sh: 1 METRICS:PROBE port pairs for 2 nodes: "
	    "one a node, or none\n");
	free(out);
	free(err);
	assert_int_equal(node_values(env, "9001:9002 9003:70000", &out, &err), 1);
	assert_string_equal(err, "chart-node-values.sh: '9003:70000' is not METRICS:PROBE, two port numbers\n");
	free(out);
	free(err);
	assert_int_equal(node_values(env, "9001:9002 9003", &out, &err), 1);
	assert_string_equal(err, "chart-node-values.sh: '9003' is not METRICS:PROBE, two port numbers\n");
	free(out);
	free(err);
	free(env);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lint),
		cmocka_unit_test(test_crd_in_sync),
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_values_change_output),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_node_groups),
		cmocka_unit_test(test_node_values_script),
		cmocka_unit_test(test_egress_off),
		cmocka_unit_test(test_egress_on),
	};
	snprintf(top, sizeof(top), "%s", getenv("AIRLOCK_TOP") ? getenv("AIRLOCK_TOP") : ".");
	snprintf(chart, sizeof(chart), "%s/charts/airlock", top);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
