/*
 * session.c - see session.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "artifacts.h"
#include "client.h"
#include "clock.h"
#include "cx.h"
#include "podspec.h"
#include "pool.h"
#include "session.h"

const struct k8s_resource session_resource = { "airlock.dev", "v1alpha1",
    "codesessions", 1 };

/* The interpreter's name without its directory. */
static const char *
base(const char *p)
{
	const char *s = strrchr(p, '/');

	return s ? s + 1 : p;
}

int
session_kernel(const struct ctl_config *cfg, const char *runtime,
    const char *argv[4])
{
	const struct ctl_profile *p = runtime ? ctl_config_profile(cfg, runtime) :
	    NULL;
	const char *b;

	if (p == NULL || p->policy != CTL_POLICY_NONE || p->command[0] == NULL ||
	    strcmp(p->command[0], POOL_RUNNER) != 0 || p->command[1] == NULL)
		return -1;
	b = base(p->command[1]);
	argv[0] = p->command[1];
	argv[2] = NULL;
	if (strcmp(b, "python3") == 0 || strcmp(b, "python") == 0)
		argv[1] = SESSION_KERNEL_PY;
	else if (strcmp(b, "bash") == 0)
		argv[1] = SESSION_KERNEL_SH;
	else
		return -1;
	return 0;
}

int
session_check(const struct ctl_config *cfg, json_t *session,
    struct k8s_error *err)
{
	json_t *spec = json_object_get(session, "spec");
	const char *rt = json_string_value(json_object_get(spec, "runtime"));
	const char *argv[4];
	char key[POOL_KEY_LEN];

	if (rt == NULL)
		return k8s_error_set(err, K8S_EINVAL, 0, NULL,
		    "spec.runtime: required");
	if (ctl_config_profile(cfg, rt) == NULL)
		return k8s_error_set(err, K8S_EINVAL, 0, NULL,
		    "spec.runtime: '%s' is not a runtime of this cluster", rt);
	if (session_kernel(cfg, rt, argv) != 0)
		return k8s_error_set(err, K8S_EINVAL, 0, NULL,
		    "spec.runtime: sessions are not offered for runtime '%s' "
		    "(only Python and bash runtimes without a code policy)", rt);
	/* Its sandbox has no network: nor a profile that gives one. */
	if (ctl_config_profile(cfg, rt)->negress > 0)
		return k8s_error_set(err, K8S_EINVAL, 0, NULL,
		    "spec.runtime: profile '%s' has network egress: sessions "
		    "have no network (docs/network.md)", rt);
	/* The caps and defaults, as a pool's: the same key a holder has. */
	return pool_key(cfg, spec, key, err);
}

void
session_pod_name(const char *uid, char out[80])
{
	snprintf(out, 80, "%s%.60s", SESSION_POD_PREFIX, uid);
}

static long long
spec_int(json_t *session, const char *field, long long dflt, long long lo,
    long long hi)
{
	json_t *v = json_object_get(json_object_get(session, "spec"), field);
	long long n;

	if (!json_is_integer(v))
		return dflt;
	n = json_integer_value(v);
	return n < lo ? lo : n > hi ? hi : n;
}

long long
session_idle_s(json_t *session)
{
	return spec_int(session, "idleTimeoutSeconds", SESSION_DEFAULT_IDLE_S,
	    SESSION_MIN_S, SESSION_MAX_S);
}

long long
session_lifetime_s(json_t *session)
{
	return spec_int(session, "maxLifetimeSeconds", SESSION_DEFAULT_LIFE_S,
	    SESSION_MIN_S, SESSION_MAX_S);
}

long long
session_ttl_s(json_t *session)
{
	return spec_int(session, "ttlSecondsAfterFinished", SESSION_DEFAULT_TTL_S,
	    0, 2592000);
}

json_t *
session_pod(const struct ctl_config *cfg, json_t *session,
    struct k8s_error *err)
{
	const char *ns = k8s_obj_namespace(session), *uid = k8s_obj_uid(session);
	const char *name = k8s_obj_name(session);
	json_t *as_pool, *pod, *md, *labels;
	char pname[80];

	if (ns == NULL || uid == NULL || name == NULL) {
		k8s_error_set(err, K8S_EINVAL, 0, NULL,
		    "the session lacks metadata.name, namespace or uid");
		return NULL;
	}
	if (session_check(cfg, session, err) != 0)
		return NULL;
	/* A holder of a pool with the session's runtime and resources. */
	as_pool = json_pack("{s:{s:s, s:s, s:s}, s:O}", "metadata", "name", name,
	    "namespace", ns, "uid", uid, "spec", json_object_get(session, "spec"));
	pod = pool_holder(cfg, as_pool, err);
	json_decref(as_pool);
	if (pod == NULL)
		return NULL;
	md = json_object_get(pod, "metadata");
	labels = json_object_get(md, "labels");
	json_object_del(labels, POOL_LABEL_UID);
	json_object_set_new(labels, SESSION_LABEL_UID, json_string(uid));
	json_object_del(md, "generateName");
	session_pod_name(uid, pname);
	json_object_set_new(md, "name", json_string(pname));
	json_object_del(json_object_get(md, "annotations"), POOL_ANN_KEY);
	json_object_set_new(md, "ownerReferences", json_pack("[{s:s, s:s, s:s, "
	    "s:s, s:b, s:b}]", "apiVersion", "airlock.dev/v1alpha1", "kind",
	    "CodeSession", "name", name, "uid", uid, "controller", 1,
	    "blockOwnerDeletion", 1));
	json_object_set_new(json_object_get(pod, "spec"), "activeDeadlineSeconds",
	    json_integer(session_lifetime_s(session) + SESSION_DEADLINE_SLACK));
	{
		char idle[24];

		snprintf(idle, sizeof(idle), "%lld", session_idle_s(session));
		json_object_set_new(json_object_get(md, "annotations"),
		    SESSION_ANN_IDLE, json_string(idle));
	}
	return pod;
}

/*
 * The annotations a step writes (pool_run_annotations): a new step's
 * replace the last one's, and those it does not write are set to null.
 * Its files are airlock.dev/file-0 up: at most SESSION_STEP_FILES.
 */
static const char *const step_keys[] = { "airlock.dev/source",
    "airlock.dev/stdin", POOL_ANN_PROCESS, CX_ANN_NAME, CX_ANN_TIMEOUT_MS,
    CX_ANN_MAX_OUTPUT, CX_ANN_OUTPUT_BUDGET, CX_ANN_STREAM, CX_ANN_POLICY,
    ARTIFACTS_ANN, SESSION_ANN_STEP, SESSION_ANN_STEP_NAME,
    SESSION_ANN_CANCEL };

static void
null_unless_set(json_t *ann, const char *k)
{
	if (json_object_get(ann, k) == NULL)
		json_object_set_new(ann, k, json_null());
}

json_t *
session_step_patch(const struct ctl_config *cfg, json_t *cx, json_t *pod,
    size_t stored, struct k8s_error *err)
{
	json_t *spec = json_object_get(cx, "spec"), *ann, *extra, *kv;
	const char *rt = json_string_value(json_object_get(spec, "runtime"));
	const struct ctl_profile *p = rt ? ctl_config_profile(cfg, rt) : NULL;
	const char *argv[4];

	if (p == NULL || session_kernel(cfg, rt, argv) != 0) {
		k8s_error_set(err, K8S_EINVAL, 0, NULL, "spec.runtime: sessions "
		    "are not offered for runtime '%s'", rt ? rt : "");
		return NULL;
	}
	kv = json_array();
	for (int i = 0; argv[i]; i++)
		json_array_append_new(kv, json_string(argv[i]));
	extra = json_pack("{s:{s:s, s:o, s:I, s:I}}", "step", "code",
	    p->source_file, "kernel", kv, "timeoutMs", (json_int_t)cx_timeout_ms(cx),
	    "graceMs", (json_int_t)SESSION_STEP_GRACE_MS);
	ann = pool_run_annotations(cfg, cx, stored, extra, err);
	json_decref(extra);
	if (ann == NULL)
		return NULL;
	json_object_del(ann, CX_ANN_NAME);
	json_object_set_new(ann, SESSION_ANN_STEP, json_string(k8s_obj_uid(cx)));
	json_object_set_new(ann, SESSION_ANN_STEP_NAME, json_string(k8s_obj_name(cx)));
	for (size_t i = 0; i < sizeof(step_keys) / sizeof(step_keys[0]); i++)
		null_unless_set(ann, step_keys[i]);
	for (int i = 0; i < SESSION_STEP_FILES; i++) {
		char k[40];

		snprintf(k, sizeof(k), "airlock.dev/file-%d", i);
		null_unless_set(ann, k);
	}
	return json_pack("{s:{s:O*, s:o}}", "metadata", "resourceVersion",
	    json_object_get(json_object_get(pod, "metadata"), "resourceVersion"),
	    "annotations", ann);
}

int
session_pod_step(json_t *pod, const char **cx, const char **cx_uid)
{
	json_t *md = json_object_get(pod, "metadata");
	json_t *ann = json_object_get(md, "annotations");
	const char *suid = json_string_value(json_object_get(json_object_get(md,
	    "labels"), SESSION_LABEL_UID));

	*cx = json_string_value(json_object_get(ann, SESSION_ANN_STEP_NAME));
	*cx_uid = json_string_value(json_object_get(ann, SESSION_ANN_STEP));
	/*
	 * Its controller is the session its label names, as the controller
	 * made it. Not what vouches for a step (the execution's status naming
	 * this pod does, trust.c): what keeps other pods out before asking.
	 */
	if (suid == NULL || !podspec_controlled_by(pod, "CodeSession", suid) ||
	    *cx == NULL || *cx_uid == NULL || **cx_uid == '\0')
		return -1;
	return 0;
}

json_t *
session_claim_patch(json_t *session, json_t *holder, long long now_s)
{
	long long started = clock_parse_rfc3339(json_string_value(json_object_get(
	    json_object_get(holder, "status"), "startTime")));
	long long deadline = (started > 0 && now_s > started ? now_s - started :
	    0) + session_lifetime_s(session) + SESSION_DEADLINE_SLACK;

	char idle[24];

	snprintf(idle, sizeof(idle), "%lld", session_idle_s(session));
	return json_pack("{s:{s:O*, s:{s:n, s:s}, s:{s:s}, s:[{s:s, s:s, s:s, "
	    "s:s, s:b, s:b}]}, s:{s:I}}",
	    "metadata", "resourceVersion", json_object_get(json_object_get(holder,
	    "metadata"), "resourceVersion"),
	    "labels", POOL_LABEL_UID, SESSION_LABEL_UID, k8s_obj_uid(session),
	    "annotations", SESSION_ANN_IDLE, idle,
	    "ownerReferences", "apiVersion", "airlock.dev/v1alpha1",
	    "kind", "CodeSession", "name", k8s_obj_name(session),
	    "uid", k8s_obj_uid(session), "controller", 1, "blockOwnerDeletion", 1,
	    "spec", "activeDeadlineSeconds", (json_int_t)deadline);
}

int
session_pod_clock(json_t *pod, struct session_clock *c)
{
	json_t *md = json_object_get(pod, "metadata"), *ref;
	const char *suid = json_string_value(json_object_get(json_object_get(md,
	    "labels"), SESSION_LABEL_UID));
	const char *idle = json_string_value(json_object_get(json_object_get(md,
	    "annotations"), SESSION_ANN_IDLE));
	json_t *ads = json_object_get(json_object_get(pod, "spec"),
	    "activeDeadlineSeconds");
	long long started = clock_parse_rfc3339(json_string_value(
	    json_object_get(json_object_get(pod, "status"), "startTime")));
	size_t i;
	char *end;

	memset(c, 0, sizeof(*c));
	if (suid == NULL || !podspec_controlled_by(pod, "CodeSession", suid))
		return -1;
	json_array_foreach(json_object_get(md, "ownerReferences"), i, ref)
		if (json_is_true(json_object_get(ref, "controller")))
			c->name = json_string_value(json_object_get(ref, "name"));
	if (c->name == NULL)
		return -1;
	c->uid = suid;
	if (idle) {
		long long n = strtoll(idle, &end, 10);

		if (*idle >= '0' && *idle <= '9' && *end == '\0' &&
		    n >= SESSION_MIN_S && n <= SESSION_MAX_S)
			c->idle_s = n;
	}
	if (started > 0 && json_is_integer(ads) && json_integer_value(ads) > 0 &&
	    json_integer_value(ads) < 1000000000LL)
		c->expires_s = started + json_integer_value(ads) -
		    SESSION_DEADLINE_SLACK;
	return 0;
}

const char *
session_clock_due(const struct session_clock *c, int busy, long long idle_ms,
    long long now_s)
{
	if (c->expires_s > 0 && now_s >= c->expires_s)
		return "Expired";
	if (c->idle_s > 0 && !busy && idle_ms >= c->idle_s * 1000)
		return "IdleTimeout";
	return NULL;
}

int
session_end_quiet(const char *reason)
{
	return reason && (strcmp(reason, "Closed") == 0 ||
	    strcmp(reason, "Expired") == 0 || strcmp(reason, "IdleTimeout") == 0);
}

void
session_step_ended_msg(char *out, size_t size, const char *session,
    const char *how)
{
	snprintf(out, size, "its session '%.253s' ended (%.64s) while it ran",
	    session, how);
}
