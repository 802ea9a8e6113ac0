/*
 * session.c - see session.h.
 */
#include <stdio.h>
#include <string.h>

#include "client.h"
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
	return pod;
}
