/*
 * pool.c - see pool.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "clock.h"
#include "cx.h"
#include "egress.h"
#include "jsonsize.h"
#include "podspec.h"
#include "artifacts.h"
#include "pool.h"
#include "quantity.h"
#include "sha256.h"
#include "xmalloc.h"

const struct k8s_resource pool_resource = { "airlock.dev", "v1alpha1",
    "codeexecutionpools", 1 };

#define HOLD_DEADLINE_SLACK	30	/* as podspec's, past the run's timeout */
#define WORK_DIR		"/tmp"		/* a direct pod's (podspec.h) */

/*
 * The pod podspec_build makes for an execution with this runtime and these
 * resources and nothing else: the one place hardening is decided, so a
 * holder gets the same. A new reference, or NULL with err.
 */
static json_t *
bare_pod(const struct ctl_config *cfg, json_t *spec, const char *ns,
    struct k8s_error *err)
{
	struct podspec_result r;
	json_t *cx, *pod;

	cx = json_pack("{s:{s:s, s:s, s:s}, s:{s:O*, s:O*, s:O*, s:O*}}",
	    "metadata", "name", "holder", "namespace", ns ? ns : "default",
	    "uid", "holder",
	    "spec", "runtime", json_object_get(spec, "runtime"),
	    "resources", json_object_get(spec, "resources"),
	    "image", json_object_get(spec, "image"),
	    "timeoutSeconds", json_object_get(spec, "timeoutSeconds"));
	if (cx == NULL) {
		k8s_error_set(err, K8S_EINVAL, 0, NULL,
		    "spec.runtime: missing or not a string");
		return NULL;
	}
	if (podspec_build(cfg, cx, &r, err) != 0) {
		json_decref(cx);
		return NULL;
	}
	json_decref(cx);
	pod = json_incref(r.pod);
	podspec_result_free(&r);
	return pod;
}

static json_t *
container(json_t *pod)
{
	return json_array_get(json_object_get(json_object_get(pod, "spec"),
	    "containers"), 0);
}

/* The limits (= requests) podspec_build gives spec: cpu in milli, bytes. */
static int
spec_limits(const struct ctl_config *cfg, json_t *spec, int64_t *cpu,
    int64_t *mem, int64_t *eph, struct k8s_error *err)
{
	json_t *pod = bare_pod(cfg, spec, NULL, err), *lim;

	if (pod == NULL)
		return K8S_EINVAL;
	lim = json_object_get(json_object_get(container(pod), "resources"),
	    "limits");
	if (quantity_parse_milli(json_string_value(json_object_get(lim, "cpu")),
	    cpu, err) != 0 || quantity_parse(json_string_value(
	    json_object_get(lim, "memory")), mem, err) != 0 ||
	    quantity_parse(json_string_value(json_object_get(lim,
	    "ephemeral-storage")), eph, err) != 0) {
		json_decref(pod);
		return k8s_error_set(err, K8S_EINVAL, 0, NULL,
		    "spec.resources: not quantities");
	}
	json_decref(pod);
	return 0;
}

/* 0 when spec's spec.network leaves p's executions none; else why not. */
static int
no_network(const struct ctl_profile *p, json_t *spec, struct k8s_error *err)
{
	struct ctl_egress *eg;
	size_t n;
	int rc;

	if ((rc = egress_effective(p, json_object_get(spec, "network"), &eg,
	    &n, err)) != 0)
		return rc;
	egress_free(eg, n);
	if (n > 0)
		return k8s_error_set(err, K8S_EINVAL, 0, NULL,
		    "spec.network.egress: a kept sandbox has no network");
	return 0;
}

/* 0 when a holder of profile p (with egress) may run spec's execution. */
static int
egress_warmable(const struct ctl_profile *p, json_t *spec,
    struct k8s_error *err)
{
	json_t *net = json_object_get(spec, "network");

	for (size_t i = 0; i < p->negress; i++)
		if (p->egress[i].host != NULL)
			return k8s_error_set(err, K8S_EINVAL, 0, NULL,
			    "spec.runtime: profile '%s' has host entries in its "
			    "egress: its executions run cold, each with a pass "
			    "of its own for the proxy (docs/network.md)", p->name);
	if (net != NULL && !json_is_null(net) && !json_is_null(json_object_get(
	    net, "egress")) && json_object_get(net, "egress") != NULL)
		return k8s_error_set(err, K8S_EINVAL, 0, NULL,
		    "spec.network.egress: an execution that names its egress "
		    "runs cold, with a NetworkPolicy of its own; a warm sandbox "
		    "has its profile's whole list (docs/network.md)");
	return 0;
}

int
pool_key(const struct ctl_config *cfg, json_t *spec, char key[POOL_KEY_LEN],
    struct k8s_error *err)
{
	const struct ctl_profile *p;
	int64_t cpu, mem, eph;
	int rc;

	if ((rc = spec_limits(cfg, spec, &cpu, &mem, &eph, err)) != 0)
		return rc;
	p = ctl_config_profile(cfg, json_string_value(json_object_get(spec,
	    "runtime")));
	/*
	 * A profile with egress: its holders are under its whole list (the
	 * pool's NetworkPolicy, pool_holder_egress), so only an execution
	 * that asks for no other runs in one; one that narrows it, or names
	 * it at all, gets a pod and a policy of its own. Host entries: a
	 * pass per execution in the pod's env, so cold (docs/network.md,
	 * "Warm").
	 */
	if (p != NULL && p->negress > 0 && (rc = egress_warmable(p, spec,
	    err)) != 0)
		return rc;
	/*
	 * Nor one that asks for a network its profile lacks (Rejected when
	 * it runs cold); egress: [] is no network, which a holder has.
	 */
	if (p != NULL && p->negress == 0 && (rc = no_network(p, spec, err)) != 0)
		return rc;
	if (p == NULL || p->command[0] == NULL ||
	    strcmp(p->command[0], POOL_RUNNER) != 0)
		return k8s_error_set(err, K8S_EINVAL, 0, NULL,
		    "spec.runtime: profile '%s' does not start its program "
		    "with %s, which a warm start needs", p ? p->name : "?",
		    POOL_RUNNER);
	snprintf(key, POOL_KEY_LEN, "%s/%lld/%lld/%lld", p->name,
	    (long long)cpu, (long long)mem, (long long)eph);
	return 0;
}

int
pool_spec_resources(const struct ctl_config *cfg, json_t *spec,
    int64_t *cpu_milli, int64_t *mem, struct k8s_error *err)
{
	int64_t eph;

	return spec_limits(cfg, spec, cpu_milli, mem, &eph, err);
}

/* Remove the entry named name from the array of objects arr. */
static void
drop_named(json_t *arr, const char *name)
{
	json_t *v;
	size_t i;

	json_array_foreach(arr, i, v)
		if (strcmp(json_string_value(json_object_get(v, "name")) ?
		    json_string_value(json_object_get(v, "name")) : "", name) == 0) {
			json_array_remove(arr, i);
			return;
		}
}

json_t *
pool_holder(const struct ctl_config *cfg, json_t *pool, struct k8s_error *err)
{
	json_t *spec = json_object_get(pool, "spec"), *pod, *c, *md, *labels;
	json_t *probe;
	const char *ns = k8s_obj_namespace(pool), *uid = k8s_obj_uid(pool);
	const struct ctl_profile *p;
	char key[POOL_KEY_LEN];

	if (ns == NULL || uid == NULL || k8s_obj_name(pool) == NULL) {
		k8s_error_set(err, K8S_EINVAL, 0, NULL,
		    "the pool lacks metadata.name, namespace or uid");
		return NULL;
	}
	if (pool_key(cfg, spec, key, err) != 0 ||
	    (pod = bare_pod(cfg, spec, ns, err)) == NULL)
		return NULL;
	labels = json_copy(json_object_get(json_object_get(pod, "metadata"),
	    "labels"));
	json_object_del(labels, CX_LABEL_UID);
	json_object_set_new(labels, POOL_LABEL_UID, json_string(uid));
	md = json_pack("{s:s, s:s, s:o, s:{s:s, s:O*}, s:[{s:s, s:s, s:s, s:s, s:b,"
	    " s:b}]}", "generateName", POOL_HOLDER_PREFIX, "namespace", ns,
	    "labels", labels, "annotations", POOL_ANN_KEY, key,
	    CX_ANN_EGRESS_BYTES, json_object_get(json_object_get(json_object_get(
	    pod, "metadata"), "annotations"), CX_ANN_EGRESS_BYTES),
	    "ownerReferences", "apiVersion", "airlock.dev/v1alpha1",
	    "kind", "CodeExecutionPool", "name", k8s_obj_name(pool), "uid", uid,
	    "controller", 1, "blockOwnerDeletion", 1);
	json_object_set_new(pod, "metadata", md);
	/* Set by the claim, counted from the pod's start. */
	json_object_del(json_object_get(pod, "spec"), "activeDeadlineSeconds");
	c = container(pod);
	p = ctl_config_profile(cfg, json_string_value(json_object_get(spec,
	    "runtime")));
	{
		/*
		 * run --hold: the interpreter started once, then a wait; run
		 * --zygote (preload): one that imports the profile's modules and
		 * waits to fork the claim's program (docs/warm-path.md).
		 */
		json_t *cmd = json_pack("[s, s, s]", POOL_RUNNER, p->preload ?
		    "--zygote" : "--hold", p->source_file);

		for (char **a = p->command + 1; *a; a++)
			json_array_append_new(cmd, json_string(*a));
		json_object_set_new(c, "command", cmd);
	}
	json_object_set_new(c, "args", json_array());
	/*
	 * Ready once the warm-up is over and the holder waits (its PID 1 is
	 * the sleep run --hold execs; the zygote's socket, made after its
	 * imports and warm-up): a claim before would share both cores with
	 * it. A startup probe only, so nothing probes the sandbox after.
	 */
	if (p->preload)
		probe = json_pack("{s:[s, s, s]}", "command", "test", "-S",
		    POOL_ZYGOTE_SOCK);
	else
		probe = json_pack("{s:[s, s, s, s, s]}", "command", "grep", "-q",
		    "-a", "infinity", "/proc/1/cmdline");
	json_object_set_new(c, "startupProbe", json_pack("{s:o, s:i, s:i, s:i}",
	    "exec", probe, "periodSeconds", 1, "timeoutSeconds", 5,
	    "failureThreshold", 300));
	{
		/*
		 * A direct pod's code (podspec.h): a holder has none; nor files
		 * out's nonce, the claim's execution's (pool_claim_patch).
		 */
		json_t *env = json_object_get(c, "env"), *e;
		size_t i;

		for (i = 0; (e = json_array_get(env, i)) != NULL;)
			if (strncmp(json_string_value(json_object_get(e,
			    "name")), PODSPEC_TAR_ENV,
			    strlen(PODSPEC_TAR_ENV)) == 0 ||
			    strcmp(json_string_value(json_object_get(e, "name")),
			    ARTIFACTS_ENV) == 0)
				json_array_remove(env, i);
			else
				i++;
		if (p->preload)
			json_array_append_new(env, json_pack("{s:s, s:s}", "name",
			    POOL_ENV_PRELOAD, "value", p->preload));
		if (p->preload && p->warmup)
			json_array_append_new(env, json_pack("{s:s, s:s}", "name",
			    POOL_ENV_WARMUP, "value", p->warmup));
	}
	drop_named(json_object_get(c, "volumeMounts"), "code");
	drop_named(json_object_get(json_object_get(pod, "spec"), "volumes"),
	    "code");
	return pod;
}

int
pool_holder_egress(const struct ctl_config *cfg, json_t *pool, json_t *holder,
    const struct podspec_gate *g, json_t **np, struct k8s_error *err)
{
	const struct ctl_profile *p = ctl_config_profile(cfg, json_string_value(
	    json_object_get(json_object_get(pool, "spec"), "runtime")));
	const char *uid = k8s_obj_uid(pool);
	struct podspec_result r;
	struct podspec_gate pg = *g;
	json_t *md;
	char *name;

	*np = NULL;
	if (p == NULL || p->negress == 0)
		return 0;
	if (uid == NULL || k8s_obj_name(pool) == NULL)
		return k8s_error_set(err, K8S_EINVAL, 0, NULL,
		    "the pool lacks metadata.name or uid");
	name = xasprintf("%s%s", POOL_NETPOL_PREFIX, uid);
	md = json_pack("{s:s, s:s, s:{s:s}, s:[{s:s, s:s, s:s, s:s, s:b, s:b}]}",
	    "name", name, "namespace", k8s_obj_namespace(pool),
	    "labels", POOL_LABEL_UID, uid,
	    "ownerReferences", "apiVersion", "airlock.dev/v1alpha1",
	    "kind", "CodeExecutionPool", "name", k8s_obj_name(pool), "uid", uid,
	    "controller", 1, "blockOwnerDeletion", 1);
	free(name);
	memset(&r, 0, sizeof(r));
	r.pod = holder;
	r.netpol = md ? egress_policy(p->egress, p->negress, md,
	    POOL_LABEL_UID) : NULL;
	json_decref(md);
	pg.id = uid;
	/* The gate's env on the holder and its rule in the policy; no pass. */
	if (r.netpol == NULL || podspec_egress_gate(&r, &pg, err) != 0) {
		json_decref(r.netpol);
		return r.netpol == NULL ? k8s_error_set(err, K8S_EINVAL, 0, NULL,
		    "cannot build the pool's NetworkPolicy") : K8S_EINVAL;
	}
	{
		/* What the holder was gated under: the policy's spec, its cap. */
		char *spec = json_dumps(json_object_get(r.netpol, "spec"),
		    JSON_COMPACT | JSON_SORT_KEYS);
		char *in = xasprintf("%s %lld", spec ? spec : "",
		    (long long)p->egress_bytes), h[65];
		json_t *md2 = json_object_get(holder, "metadata");

		sha256_hex(in, strlen(in), h);
		h[POOL_STAMP_LEN] = '\0';
		free(spec);
		free(in);
		if (!json_is_object(json_object_get(md2, "annotations")))
			json_object_set_new(md2, "annotations", json_object());
		json_object_set_new(json_object_get(md2, "annotations"),
		    POOL_ANN_EGRESS, json_string(h));
	}
	*np = r.netpol;
	return 0;
}

int
pool_egress_stamp(const struct ctl_config *cfg, json_t *pool,
    const char *gate_ns, char stamp[POOL_STAMP_LEN + 1],
    struct k8s_error *err)
{
	struct podspec_gate g = { .ns = gate_ns, .n = 1 };
	json_t *holder, *np = NULL;
	const char *h;
	int rc;

	stamp[0] = '\0';
	/* Addresses go into the holder's env alone, never into the stamp. */
	snprintf(g.addrs[0], sizeof(g.addrs[0]), "127.0.0.1");
	if ((holder = pool_holder(cfg, pool, err)) == NULL)
		return K8S_EINVAL;
	rc = pool_holder_egress(cfg, pool, holder, &g, &np, err);
	h = json_string_value(json_object_get(json_object_get(json_object_get(
	    holder, "metadata"), "annotations"), POOL_ANN_EGRESS));
	if (rc == 0 && h != NULL)
		snprintf(stamp, POOL_STAMP_LEN + 1, "%s", h);
	json_decref(np);
	json_decref(holder);
	return rc;
}

static int
claimed(json_t *pod)
{
	json_t *md = json_object_get(pod, "metadata");

	return json_object_get(json_object_get(md, "labels"), CX_LABEL_UID) !=
	    NULL || json_object_get(json_object_get(md, "annotations"),
	    CX_ANN_NAME) != NULL;
}

/* Its phase says the holder ended (evicted, its sandbox died). */
int
pool_holder_dead(json_t *pod)
{
	const char *ph = json_string_value(json_object_get(json_object_get(pod,
	    "status"), "phase"));

	return ph && (strcmp(ph, "Failed") == 0 || strcmp(ph, "Succeeded") == 0);
}

int
pool_holder_idle(json_t *pod)
{
	json_t *md = json_object_get(pod, "metadata");

	return json_object_get(json_object_get(md, "labels"), POOL_LABEL_UID) &&
	    !claimed(pod) && json_object_get(md, "deletionTimestamp") == NULL &&
	    !pool_holder_dead(pod);
}

int
pool_sandbox_ready(json_t *pod)
{
	json_t *ps = json_object_get(pod, "status");
	json_t *cs = json_array_get(json_object_get(ps, "containerStatuses"), 0);
	const char *ph = json_string_value(json_object_get(ps, "phase"));

	return ph && strcmp(ph, "Running") == 0 &&
	    json_object_get(json_object_get(pod, "metadata"),
	    "deletionTimestamp") == NULL &&
	    json_object_get(json_object_get(cs, "state"), "running") != NULL &&
	    json_is_true(json_object_get(cs, "ready"));
}

int
pool_holder_ready(json_t *pod)
{
	return pool_holder_idle(pod) && pool_sandbox_ready(pod);
}

/* The message of a terminated state (borrowed), or NULL. */
static const char *
ended_message(json_t *cs, const char *state)
{
	return json_string_value(json_object_get(json_object_get(json_object_get(
	    cs, state), "terminated"), "message"));
}

int
pool_holder_preload_failed(json_t *pod, char *msg, size_t size)
{
	json_t *cs = json_array_get(json_object_get(json_object_get(pod,
	    "status"), "containerStatuses"), 0);
	const char *m = ended_message(cs, "state");
	size_t n, i;

	/* Its restart, if a policy ever allows one, keeps the last end's. */
	if (m == NULL || strncmp(m, POOL_PRELOAD_FAILED,
	    strlen(POOL_PRELOAD_FAILED)) != 0)
		m = ended_message(cs, "lastState");
	if (m == NULL || strncmp(m, POOL_PRELOAD_FAILED,
	    strlen(POOL_PRELOAD_FAILED)) != 0)
		return 0;
	if (size == 0)
		return 1;
	/*
	 * The image's words (an exception's text may quote anything): cut,
	 * and printable ASCII only, so an Event and a condition carry them
	 * as they are shown.
	 */
	n = strlen(m);
	while (n > 0 && (m[n - 1] == '\n' || m[n - 1] == '\r' ||
	    m[n - 1] == ' ' || m[n - 1] == '\t'))
		n--;
	if (n > POOL_PRELOAD_MSG_MAX)
		n = POOL_PRELOAD_MSG_MAX;
	if (n > size - 1)
		n = size - 1;
	for (i = 0; i < n; i++)
		msg[i] = m[i] == '\n' || m[i] == '\t' || m[i] == '\r' ? ' ' :
		    (unsigned char)m[i] < 0x20 || (unsigned char)m[i] > 0x7e ?
		    '?' : m[i];
	msg[n] = '\0';
	return 1;
}

long long
pool_fail_backoff(long long failures, long long since_ms, long long now_ms)
{
	long long wait = POOL_FAIL_BACKOFF_MS, left;

	if (failures < 2)
		return 0;
	for (long long i = 2; i < failures && wait < POOL_FAIL_BACKOFF_MAX_MS; i++)
		wait *= 2;
	if (wait > POOL_FAIL_BACKOFF_MAX_MS)
		wait = POOL_FAIL_BACKOFF_MAX_MS;
	left = since_ms + wait - now_ms;
	return left > 0 ? left : 0;
}

int
pool_cx_warmable(json_t *cx)
{
	/* A session's step is its session's alone (docs/sessions.md). */
	return json_object_get(json_object_get(cx, "spec"), "image") == NULL &&
	    json_object_get(json_object_get(cx, "spec"), "session") == NULL;
}

/* Add annotation "airlock.dev/<k>" = v to ann, and its path to files. */
static void
add_file(json_t *ann, json_t *files, const char *k, const char *path,
    json_t *v, size_t *bytes)
{
	char *ak = xasprintf("airlock.dev/%s", k);

	json_object_set(ann, ak, v);
	if (files)
		json_array_append_new(files, json_pack("{s:s, s:s}", "path",
		    path, "key", ak));
	*bytes += json_string_length(v);
	free(ak);
}

json_t *
pool_run_annotations(const struct ctl_config *cfg, json_t *cx, size_t stored,
    json_t *extra, struct k8s_error *err)
{
	json_t *spec = json_object_get(cx, "spec"), *ann, *files, *argv, *env;
	json_t *f, *e, *proc;
	const char *uid = k8s_obj_uid(cx), *name = k8s_obj_name(cx);
	const struct ctl_profile *p;
	size_t i, bytes = 0;
	char v[32], key[32];

	if (uid == NULL || name == NULL || json_object_get(spec, "image") ||
	    (p = ctl_config_profile(cfg, json_string_value(json_object_get(spec,
	    "runtime")))) == NULL) {
		k8s_error_set(err, K8S_EINVAL, 0, NULL,
		    "not an execution that can run in a kept sandbox");
		return NULL;
	}
	/* A cold start refuses these (Rejected); so does a warm one. */
	if (podspec_check_reserved(spec, p, err) != 0 ||
	    (p->negress > 0 ? egress_warmable(p, spec, err) :
	    no_network(p, spec, err)) != 0)
		return NULL;
	if (stored == 0)
		stored = jsonsize_value(cx);
	if (stored + CX_STATUS_RESERVE > CX_OBJECT_BUDGET) {
		k8s_error_set(err, K8S_EINVAL, 0, NULL, "spec: the execution "
		    "takes %zu bytes as stored; at most %d leave room for its "
		    "result", stored, CX_OBJECT_BUDGET - CX_STATUS_RESERVE);
		return NULL;
	}
	ann = json_object();
	files = json_array();
	{
		json_t *src = json_object_get(spec, "source");
		json_t *empty = src ? NULL : json_string("");

		add_file(ann, files, "source", p->source_file, src ? src : empty,
		    &bytes);
		json_decref(empty);
	}
	json_array_foreach(json_object_get(spec, "files"), i, f) {
		snprintf(key, sizeof(key), "file-%zu", i);
		add_file(ann, files, key, json_string_value(json_object_get(f,
		    "path")), json_object_get(f, "content"), &bytes);
	}
	if (json_object_get(spec, "stdin"))
		add_file(ann, NULL, "stdin", NULL, json_object_get(spec, "stdin"),
		    &bytes);
	argv = json_array();
	for (char **a = p->command; *a; a++)
		json_array_append_new(argv, json_string(*a));
	json_array_foreach(json_object_get(spec, "args"), i, e)
		json_array_append(argv, e);
	env = json_array();
	json_array_foreach(json_object_get(spec, "env"), i, e) {
		json_t *val = json_object_get(e, "value");

		json_array_append_new(env, json_pack("{s:O, s:o}", "name",
		    json_object_get(e, "name"), "value", val ? json_incref(val) :
		    json_string("")));
	}
	/* The program's files are in the working directory, not a volume. */
	json_array_append_new(env, json_pack("{s:s, s:s}", "name",
	    "AIRLOCK_CODE_DIR", "value", WORK_DIR));
	/* Files out (artifacts.h), as a cold run of the runner has them. */
	if (cfg->artifacts_files > 0) {
		char nonce[33], ov[128];

		artifacts_nonce(uid, nonce);
		snprintf(ov, sizeof(ov), "%s %lld %lld", nonce,
		    (long long)cfg->artifacts_bytes, (long long)cfg->artifacts_files);
		json_array_append_new(env, json_pack("{s:s, s:s}", "name",
		    ARTIFACTS_ENV, "value", ov));
		snprintf(ov, sizeof(ov), "%lld %lld", (long long)cfg->artifacts_bytes,
		    (long long)cfg->artifacts_files);
		json_object_set_new(ann, ARTIFACTS_ANN, json_string(ov));
	}
	proc = json_pack("{s:o, s:o, s:o, s:b}", "argv", argv, "env", env,
	    "files", files, "stdin", json_object_get(spec, "stdin") != NULL);
	if (extra)
		json_object_update(proc, extra);
	bytes += jsonsize_value(proc);
	if (bytes > PODSPEC_ANNOTATION_BUDGET) {
		json_decref(proc);
		json_decref(ann);
		k8s_error_set(err, K8S_ETOOBIG, 0, NULL, "the code, args and env "
		    "take %zu bytes, past the %d a warm start carries", bytes,
		    PODSPEC_ANNOTATION_BUDGET);
		return NULL;
	}
	{
		char *s = json_dumps(proc, JSON_COMPACT);

		json_object_set_new(ann, POOL_ANN_PROCESS, json_string(s ? s : ""));
		free(s);
	}
	json_decref(proc);
	json_object_set_new(ann, CX_ANN_NAME, json_string(name));
	snprintf(v, sizeof(v), "%lld", cx_timeout_ms(cx));
	json_object_set_new(ann, CX_ANN_TIMEOUT_MS, json_string(v));
	snprintf(v, sizeof(v), "%zu", cx_max_bytes(cx));
	json_object_set_new(ann, CX_ANN_MAX_OUTPUT, json_string(v));
	snprintf(v, sizeof(v), "%zu", stored + CX_STATUS_RESERVE <
	    CX_OBJECT_BUDGET ? CX_OBJECT_BUDGET - CX_STATUS_RESERVE - stored : 0);
	json_object_set_new(ann, CX_ANN_OUTPUT_BUDGET, json_string(v));
	if (cx_stream(cx))
		json_object_set_new(ann, CX_ANN_STREAM, json_string("true"));
	if (p->policy != CTL_POLICY_NONE)
		json_object_set_new(ann, CX_ANN_POLICY, json_string("true"));
	return ann;
}

json_t *
pool_claim_patch(const struct ctl_config *cfg, json_t *cx, json_t *holder,
    long long now_s, size_t stored, struct k8s_error *err)
{
	const char *uid = k8s_obj_uid(cx), *name = k8s_obj_name(cx);
	long long started, deadline;
	json_t *ann, *patch;

	if (!pool_cx_warmable(cx)) {
		k8s_error_set(err, K8S_EINVAL, 0, NULL,
		    "not an execution that can run warm");
		return NULL;
	}
	if ((ann = pool_run_annotations(cfg, cx, stored, NULL, err)) == NULL)
		return NULL;
	/* activeDeadlineSeconds counts from the pod's start. */
	started = clock_parse_rfc3339(json_string_value(json_object_get(
	    json_object_get(holder, "status"), "startTime")));
	deadline = (started > 0 && now_s > started ? now_s - started : 0) +
	    cx_timeout_ms(cx) / 1000 + HOLD_DEADLINE_SLACK;
	patch = json_pack("{s:{s:O*, s:{s:s}, s:o, s:[{s:s, s:s, s:s, s:s, s:b,"
	    " s:b}]}, s:{s:I}}",
	    "metadata", "resourceVersion", json_object_get(json_object_get(holder,
	    "metadata"), "resourceVersion"),
	    "labels", CX_LABEL_UID, uid, "annotations", ann,
	    "ownerReferences", "apiVersion", "airlock.dev/v1alpha1",
	    "kind", "CodeExecution", "name", name, "uid", uid, "controller", 1,
	    "blockOwnerDeletion", 1,
	    "spec", "activeDeadlineSeconds", (json_int_t)deadline);
	if (patch == NULL)
		k8s_error_set(err, K8S_EINVAL, 0, NULL,
		    "cannot build the claim (bad strings in the spec?)");
	return patch;
}

int
pool_process_read(json_t *pod, struct pool_process *out)
{
	json_t *ann = json_object_get(json_object_get(pod, "metadata"),
	    "annotations"), *proc, *f, *v;
	const char *s = json_string_value(json_object_get(ann, POOL_ANN_PROCESS));
	size_t i;

	memset(out, 0, sizeof(*out));
	if (s == NULL || (proc = json_loads(s, 0, NULL)) == NULL)
		return -1;
	out->proc = proc;
	out->argv = json_object_get(proc, "argv");
	out->env = json_object_get(proc, "env");
	if (!json_is_array(out->argv) || json_array_size(out->argv) == 0 ||
	    !json_is_array(out->env))
		return -1;
	json_array_foreach(out->argv, i, v)
		if (!json_is_string(v))
			return -1;
	json_array_foreach(out->env, i, v)
		if (!json_is_string(json_object_get(v, "name")) ||
		    !json_is_string(json_object_get(v, "value")))
			return -1;
	json_array_foreach(json_object_get(proc, "files"), i, f) {
		const char *path = json_string_value(json_object_get(f, "path"));
		const char *key = json_string_value(json_object_get(f, "key"));

		if (out->nfiles >= sizeof(out->files) / sizeof(out->files[0]) ||
		    path == NULL || key == NULL ||
		    (v = json_object_get(ann, key)) == NULL || !json_is_string(v))
			return -1;
		out->files[out->nfiles].path = path;
		out->files[out->nfiles].data = json_string_value(v);
		out->files[out->nfiles].len = json_string_length(v);
		out->nfiles++;
	}
	if (out->nfiles == 0)
		return -1;
	if (json_is_true(json_object_get(proc, "stdin"))) {
		if ((v = json_object_get(ann, "airlock.dev/stdin")) == NULL ||
		    !json_is_string(v))
			return -1;
		out->stdin_data = json_string_value(v);
		out->stdin_len = json_string_length(v);
	}
	return 0;
}

void
pool_process_free(struct pool_process *p)
{
	json_decref(p->proc);
	p->proc = NULL;
}

/* --- lending: idle holders taken back (docs/warm-path.md) ---------------- */

int
pool_key_resources(const char *key, int64_t *cpu_milli, int64_t *mem)
{
	const char *f[3], *p;
	char *end;
	long long cpu, m;
	int i;

	/* "<runtime>/<cpu>/<memory>/<ephemeral>": the last three fields. */
	if (key == NULL)
		return -1;
	p = key + strlen(key);
	for (i = 2; i >= 0; i--) {
		while (p > key && p[-1] != '/')
			p--;
		if (p == key)
			return -1;
		f[i] = p;
		p--;
	}
	cpu = strtoll(f[0], &end, 10);
	if (end == f[0] || *end != '/' || cpu < 0)
		return -1;
	m = strtoll(f[1], &end, 10);
	if (end == f[1] || *end != '/' || m < 0)
		return -1;
	*cpu_milli = cpu;
	*mem = m;
	return 0;
}

int
pool_lend_short(const char *msg, int *cpu, int *mem)
{
	*cpu = msg && strstr(msg, "Insufficient cpu") != NULL;
	*mem = msg && strstr(msg, "Insufficient memory") != NULL;
	return *cpu || *mem;
}

/* How much of what is still needed c covers, 0 to 2 (one per resource). */
static double
covers(const struct pool_lend_cand *c, int64_t need_cpu, int64_t need_mem,
    int64_t rem_cpu, int64_t rem_mem)
{
	double s = 0;

	if (rem_cpu > 0)
		s += (double)(c->cpu_milli < rem_cpu ? c->cpu_milli : rem_cpu) /
		    (double)need_cpu;
	if (rem_mem > 0)
		s += (double)(c->mem < rem_mem ? c->mem : rem_mem) /
		    (double)need_mem;
	return s;
}

/*
 * The holders of node (indices into c) that cover the need, greedily:
 * each time the one that covers most of what is left, a not-ready one
 * before a ready one (it is of no use yet, and its warm-up still takes
 * cpu). Their count, 0 when the node's idle holders cannot cover it; the
 * ready ones among them in *ready.
 */
static size_t
pick_on_node(const struct pool_lend_cand *c, size_t n, const char *node,
    int64_t need_cpu, int64_t need_mem, size_t *out, size_t *ready)
{
	int64_t rem_cpu = need_cpu, rem_mem = need_mem;
	char *used = xcalloc(n ? n : 1, 1);
	size_t k = 0;

	*ready = 0;
	while (rem_cpu > 0 || rem_mem > 0) {
		size_t best = n;
		double bs = 0;

		for (size_t i = 0; i < n; i++) {
			double s;

			if (used[i] || c[i].node == NULL ||
			    strcmp(c[i].node, node) != 0)
				continue;
			s = covers(&c[i], need_cpu, need_mem, rem_cpu, rem_mem);
			if (s > bs || (s == bs && s > 0 && best < n &&
			    !c[i].ready && c[best].ready)) {
				best = i;
				bs = s;
			}
		}
		if (best == n) {
			k = 0;
			break;
		}
		used[best] = 1;
		out[k++] = best;
		*ready += c[best].ready != 0;
		rem_cpu -= c[best].cpu_milli;
		rem_mem -= c[best].mem;
	}
	free(used);
	return k;
}

size_t
pool_lend_pick(const struct pool_lend_cand *c, size_t n, int64_t need_cpu,
    int64_t need_mem, size_t *out)
{
	size_t *tmp, best = 0, best_ready = 0, k, ready;
	const char *best_node = NULL;

	if ((need_cpu <= 0 && need_mem <= 0) || n == 0)
		return 0;
	if (need_cpu < 0)
		need_cpu = 0;
	if (need_mem < 0)
		need_mem = 0;
	tmp = xcalloc(n, sizeof(*tmp));
	for (size_t i = 0; i < n; i++) {
		size_t j;

		if (c[i].node == NULL || c[i].node[0] == '\0')
			continue;
		for (j = 0; j < i; j++)		/* each node once */
			if (c[j].node && strcmp(c[j].node, c[i].node) == 0)
				break;
		if (j < i)
			continue;
		k = pick_on_node(c, n, c[i].node, need_cpu, need_mem, tmp,
		    &ready);
		if (k == 0)
			continue;
		/* Fewest taken; then fewest ready ones; then by node name. */
		if (best_node == NULL || k < best || (k == best &&
		    (ready < best_ready || (ready == best_ready &&
		    strcmp(c[i].node, best_node) < 0)))) {
			best_node = c[i].node;
			best = k;
			best_ready = ready;
			memcpy(out, tmp, k * sizeof(*tmp));
		}
	}
	free(tmp);
	return best;
}

long long
pool_lend_hold(int waiting, long long since_ms, long long now_ms)
{
	long long left;

	if (!waiting)
		return 0;
	left = since_ms + POOL_LEND_HOLD_MAX_MS - now_ms;
	if (left <= 0)
		return 0;
	return left < POOL_LEND_RECHECK_MS ? left : POOL_LEND_RECHECK_MS;
}
