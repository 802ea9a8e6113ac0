/*
 * sessions.c - CodeSessions (issue 30, docs/sessions.md): a session's
 * sandbox, its phases and its end. Queue keys "session:<ns>/<name>"; the
 * pod cache indexes a session's pods under "session:<ns>/<name>" (the
 * owner's name: a session deleted and made again under the same name
 * finds the old one's pod, and deletes it).
 *
 *   (new)    checked (session_check): refused -> Ended, Rejected;
 *            else its pod made (session_pod, a fixed name), Pending
 *   Pending  the pod's startup probe passed -> Ready
 *   Ready    kept while the pod runs
 *   Ended    spec.close (Closed), past maxLifetimeSeconds since Ready
 *            (Expired), idle for idleTimeoutSeconds (IdleTimeout), the
 *            pod gone or failed (Failed, OOMKilled, NodeLost); the pod is
 *            deleted at once (grace 0); ttlSecondsAfterFinished later the
 *            session is deleted
 *
 * Executions naming a session (spec.session): ctl_session_step.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "controller_priv.h"
#include "cx.h"
#include "jsonsize.h"
#include "log.h"
#include "podspec.h"
#include "pool.h"
#include "session.h"
#include "xmalloc.h"

char *
ctl_session_key(const char *ns, const char *name)
{
	return xasprintf("session:%s/%s", ns, name);
}

/* The session that owns pod (its name), or NULL. */
const char *
ctl_session_of_pod(json_t *pod)
{
	json_t *md = json_object_get(pod, "metadata"), *ref;
	size_t i;

	if (json_object_get(json_object_get(md, "labels"), SESSION_LABEL_UID) == NULL)
		return NULL;
	json_array_foreach(json_object_get(md, "ownerReferences"), i, ref)
		if (json_is_true(json_object_get(ref, "controller")) &&
		    json_is_string(json_object_get(ref, "kind")) &&
		    strcmp(json_string_value(json_object_get(ref, "kind")),
		    "CodeSession") == 0)
			return json_string_value(json_object_get(ref, "name"));
	return NULL;
}

static long long
now_s(void)
{
	return (long long)time(NULL);
}

/* Delete pod (by name, uid as precondition when given) at once. */
static int
delete_pod(struct controller *ctl, const char *ns, const char *name,
    const char *uid)
{
	struct k8s_delete_opts now = { .grace_period_set = 1,
	    .grace_period_seconds = 0, .propagation_policy = "Background",
	    .precondition_uid = uid };
	struct k8s_error err;
	int rc = k8s_delete(ctl->client, &k8s_res_pods, ns, name, &now, NULL, &err);

	if (rc == K8S_ENOTFOUND || rc == K8S_ECONFLICT)
		return 0;	/* gone, or another pod by now */
	if (rc != 0)
		log_warn("cannot delete a session's pod", "pod=%s/%s error=\"%s\"",
		    ns, name, err.message);
	return rc;
}

/*
 * The session's pods but the one of its uid (keep_uid NULL: all): a pod a
 * session of the same name left, or all of a session gone.
 */
static int
sweep_pods(struct controller *ctl, const char *ns, const char *name,
    const char *keep_uid)
{
	char *key = ctl_session_key(ns, name);
	json_t *pods = informer_by_index(ctl->pod_inf, key), *p;
	size_t i;
	int rc = 0;

	free(key);
	json_array_foreach(pods, i, p) {
		const char *label = json_string_value(json_object_get(json_object_get(
		    json_object_get(p, "metadata"), "labels"), SESSION_LABEL_UID));

		if (keep_uid && label && strcmp(label, keep_uid) == 0)
			continue;
		if (json_object_get(json_object_get(p, "metadata"), "deletionTimestamp"))
			continue;
		if (delete_pod(ctl, ns, k8s_obj_name(p), k8s_obj_uid(p)) != 0)
			rc = K8S_EIO;
	}
	json_decref(pods);
	return rc;
}

/* End it: phase Ended, reason, message, endTime, Ready False. */
static int
end(struct controller *ctl, json_t *s, json_t *status, const char *reason,
    const char *msg)
{
	char now[CLOCK_RFC3339_LEN];
	struct notes notes = { 0 };

	ctl_now_rfc3339(now);
	json_object_set_new(status, "phase", json_string(SESSION_ENDED));
	json_object_set_new(status, "reason", json_string(reason));
	json_object_set_new(status, "message", json_string(msg));
	json_object_set_new(status, "endTime", json_string(now));
	ctl_set_condition(status, "Ready", "False", reason, msg,
	    json_integer_value(json_object_get(json_object_get(s, "metadata"),
	    "generation")));
	ctl_note(&notes, strcmp(reason, "Closed") == 0 ? "Normal" : "Warning",
	    reason, msg);
	log_info("session ended", "session=%s/%s reason=%s", k8s_obj_namespace(s),
	    k8s_obj_name(s), reason);
	return ctl_write_status_of(ctl, &session_resource, s, status, &notes);
}

/* The pod's first container's terminated reason, or "". */
static const char *
pod_end_reason(json_t *pod)
{
	const char *r = json_string_value(json_object_get(json_object_get(
	    json_object_get(json_array_get(json_object_get(json_object_get(pod,
	    "status"), "containerStatuses"), 0), "state"), "terminated"),
	    "reason"));

	return r ? r : "";
}

/*
 * Make the session's pod (a fixed name: 409 means made before, by this
 * process or one before it). 0, or the create's error; *refused: the
 * API server will never take it (the session ends Failed with why).
 */
static int pod_owned(json_t *pod, json_t *s);

/*
 * Whether pod (as read) is this session's own: its uid label, Airlock's
 * managed-by label, and the session its controller owner by uid. A pod
 * of that name that is not (a tenant who may create pods made it first)
 * is never adopted.
 */
static int
pod_is_sessions(json_t *pod, json_t *s)
{
	const char *m = json_string_value(json_object_get(json_object_get(
	    json_object_get(pod, "metadata"), "labels"), CX_LABEL_MANAGED));

	return m && strcmp(m, CX_MANAGER) == 0 && pod_owned(pod, s);
}

/*
 * The same of a pod from the cache, which selects Airlock's pods only
 * (the managed-by label, trimmed off there): the label and the owner.
 */
static int
pod_owned(json_t *pod, json_t *s)
{
	json_t *md = json_object_get(pod, "metadata"), *ref;
	const char *l = json_string_value(json_object_get(json_object_get(md,
	    "labels"), SESSION_LABEL_UID));
	size_t i;

	if (l == NULL || strcmp(l, k8s_obj_uid(s)) != 0)
		return 0;
	json_array_foreach(json_object_get(md, "ownerReferences"), i, ref)
		if (json_is_true(json_object_get(ref, "controller")))
			return json_is_string(json_object_get(ref, "uid")) &&
			    strcmp(json_string_value(json_object_get(ref, "uid")),
			    k8s_obj_uid(s)) == 0;
	return 0;
}

/*
 * Make the session's pod (a fixed name: a 409 is a pod made before, by
 * this process or one before it, if it is the session's own). 0, or the
 * create's error.
 */
static int
make_pod(struct controller *ctl, json_t *s, json_t *status, const char *pname)
{
	struct k8s_error err;
	json_t *pod = session_pod(ctl->cfg, s, &err), *out = NULL;
	int rc;

	if (pod == NULL)
		return end(ctl, s, status, "Rejected", err.message);
	ctl_avoid_lost_nodes(ctl, pod);
	rc = k8s_create(ctl->client, &k8s_res_pods, k8s_obj_namespace(s), pod,
	    &out, &err);
	json_decref(pod);
	json_decref(out);
	out = NULL;
	if (rc == K8S_EEXIST) {
		rc = k8s_get(ctl->client, &k8s_res_pods, k8s_obj_namespace(s), pname,
		    &out, &err);
		if (rc == 0 && !pod_is_sessions(out, s)) {
			json_decref(out);
			return end(ctl, s, status, "Failed", "a pod of its sandbox's "
			    "name exists and is not its own");
		}
		json_decref(out);
		if (rc != 0)
			return rc;	/* gone meanwhile: made again next time */
	}
	if (rc != 0 && ctl_quota_full(&err)) {
		char *key = ctl_session_key(k8s_obj_namespace(s), k8s_obj_name(s));

		/* Pending until the namespace has room; said, and tried again. */
		json_object_set_new(status, "message", json_pack("s+", "waiting for "
		    "room in the namespace's quota: ", err.message));
		(void)ctl_write_status_of(ctl, &session_resource, s, status, NULL);
		workqueue_add_after(ctl->queue, key, ctl_quota_retry_in(ctl,
		    k8s_obj_namespace(s), "session", 1000));
		free(key);
		return 0;
	}
	if (rc != 0 && ctl_create_refused(&err))
		return end(ctl, s, status, "Failed", err.message);
	if (rc != 0)
		return rc;
	json_object_set_new(status, "phase", json_string(SESSION_PENDING));
	json_object_set_new(status, "startMode", json_string("Cold"));
	json_object_set_new(status, "podName", json_string(pname));
	json_object_del(status, "message");
	ctl_set_condition(status, "Ready", "False", "Starting", "its sandbox is "
	    "starting", json_integer_value(json_object_get(json_object_get(s,
	    "metadata"), "generation")));
	return ctl_write_status_of(ctl, &session_resource, s, status, NULL);
}

/* Requeue key in secs seconds (at least one: a past time is now + 1 s). */
static void
requeue_in(struct controller *ctl, const char *key, long long secs)
{
	workqueue_add_after(ctl->queue, key, (secs > 0 ? secs : 1) * 1000 + 100);
}

/* Ended: deleted ttlSecondsAfterFinished after endTime. */
static int
ttl(struct controller *ctl, json_t *s, json_t *status, const char *key)
{
	long long ended = clock_parse_rfc3339(json_string_value(
	    json_object_get(status, "endTime"))), left = ended + session_ttl_s(s) - now_s();
	struct k8s_delete_opts del = { .precondition_uid = k8s_obj_uid(s) };
	struct k8s_error err;
	int rc;

	if (ended <= 0)
		return 0;
	if (left > 0) {
		requeue_in(ctl, key, left);
		return 0;
	}
	rc = k8s_delete(ctl->client, &session_resource, k8s_obj_namespace(s),
	    k8s_obj_name(s), &del, NULL, &err);
	return rc == K8S_ENOTFOUND || rc == K8S_ECONFLICT ? 0 : rc;
}

/* --- steps ----------------------------------------------------------------- */

/* Every execution of the session's queue (the cache's index): new array. */
static json_t *
steps_of(struct controller *ctl, const char *ns, const char *name)
{
	char *key = ctl_session_key(ns, name);
	json_t *a = informer_by_index(ctl->cx_inf, key);

	free(key);
	return a;
}

/*
 * Its step running in pod pname, ended Cancelled before the pod goes when
 * the session ended quietly (Closed, Expired, IdleTimeout): else the
 * node agent, seeing its sandbox killed, could record it Failed first
 * (CI, c083677: a closed session's step Failed). 0, or the write's error
 * (the reconcile comes back, and the pod waits for it).
 */
static int
cancel_running(struct controller *ctl, json_t *s, const char *pname,
    const char *reason)
{
	json_t *steps, *cx, *status;
	char msg[400];
	size_t i;
	int rc = 0;

	if (!session_end_quiet(reason))
		return 0;
	steps = steps_of(ctl, k8s_obj_namespace(s), k8s_obj_name(s));
	json_array_foreach(steps, i, cx) {
		json_t *st = json_object_get(cx, "status");
		const char *ph = json_string_value(json_object_get(st, "phase"));
		const char *pn = json_string_value(json_object_get(st, "podName"));

		if (ph == NULL || strcmp(ph, "Running") != 0 || pn == NULL ||
		    strcmp(pn, pname) != 0)
			continue;
		session_step_ended_msg(msg, sizeof(msg), k8s_obj_name(s), reason);
		status = json_deep_copy(st);
		rc = ctl_finish(ctl, cx, status, "Cancelled", "Cancelled", msg);
		json_decref(status);
		if (rc != 0)
			break;
	}
	json_decref(steps);
	return rc;
}

/* Enqueue every step of the session not ended (they end with it). */
static void
kick_steps(struct controller *ctl, const char *ns, const char *name)
{
	json_t *steps = steps_of(ctl, ns, name), *cx;
	size_t i;

	json_array_foreach(steps, i, cx) {
		char *key;

		if (cx_phase_terminal(json_string_value(json_object_get(
		    json_object_get(cx, "status"), "phase"))))
			continue;
		key = xasprintf("%s/%s", ns, k8s_obj_name(cx));
		workqueue_add(ctl->queue, key);
		free(key);
	}
	json_decref(steps);
}

/*
 * Made before session s (an earlier session of the same name): never its
 * step. (A second's resolution: one made in the same second is taken.)
 */
static int
older_than_session(json_t *cx, json_t *s)
{
	long long c = clock_parse_rfc3339(json_string_value(json_object_get(
	    json_object_get(cx, "metadata"), "creationTimestamp")));
	long long m = clock_parse_rfc3339(json_string_value(json_object_get(
	    json_object_get(s, "metadata"), "creationTimestamp")));

	return c > 0 && m > 0 && c < m;
}

/* How long a running step's start waits to be written to its session (dispatch). */
#define STEP_HOLD_S	1
/* The most sessions with a count held at once (ctl->held). */
#define CTL_HELD_MAX	4096

/* What is held for session uid: 1 with *n and t, or 0. */
static int
held_get(struct controller *ctl, const char *uid, json_int_t *n,
    char t[CLOCK_RFC3339_LEN])
{
	json_t *h;
	int found;

	pthread_mutex_lock(&ctl->lock);
	h = json_object_get(ctl->held, uid);
	if ((found = h != NULL)) {
		*n = json_integer_value(json_array_get(h, 0));
		snprintf(t, CLOCK_RFC3339_LEN, "%s",
		    json_string_value(json_array_get(h, 1)));
	}
	pthread_mutex_unlock(&ctl->lock);
	return found;
}

/* Hold n and t for session uid: 0, or -1 when CTL_HELD_MAX are held. */
static int
held_put(struct controller *ctl, const char *uid, json_int_t n, const char *t)
{
	int rc = -1;

	pthread_mutex_lock(&ctl->lock);
	if (json_object_get(ctl->held, uid) ||
	    json_object_size(ctl->held) < CTL_HELD_MAX)
		rc = json_object_set_new(ctl->held, uid, json_pack("[I, s]", n,
		    t)) == 0 ? 0 : -1;
	pthread_mutex_unlock(&ctl->lock);
	return rc;
}

static void
held_drop(struct controller *ctl, const char *uid)
{
	pthread_mutex_lock(&ctl->lock);
	json_object_del(ctl->held, uid);
	pthread_mutex_unlock(&ctl->lock);
}

void
ctl_session_forget(struct controller *ctl, json_t *s)
{
	if (k8s_obj_uid(s))
		held_drop(ctl, k8s_obj_uid(s));
}

/* Creation order: creationTimestamp, then name (a second's resolution). */
static int
before(json_t *a, json_t *b)
{
	const char *ta = json_string_value(json_object_get(json_object_get(a,
	    "metadata"), "creationTimestamp"));
	const char *tb = json_string_value(json_object_get(json_object_get(b,
	    "metadata"), "creationTimestamp"));
	int c = strcmp(ta ? ta : "", tb ? tb : "");

	return c < 0 || (c == 0 && strcmp(k8s_obj_name(a), k8s_obj_name(b)) < 0);
}

/*
 * Put step cx (read afresh, or the cache's copy with its code: stored its
 * size as stored, 0 for cx's own) on pod (cached: its name and uid):
 * first with made, the patch made from the cached pod (NULL: none), at
 * the cached pod's version; then, if that was refused for its version or
 * there was none, with the pod read afresh, if it is still that pod and
 * not going. 0, or why not (K8S_ECONFLICT: it is not that pod now).
 */
static int
put_step(struct controller *ctl, json_t *cx, json_t *pod, json_t *made,
    size_t stored, struct k8s_error *err)
{
	struct k8s_patch_opts po = { .type = K8S_PATCH_MERGE };
	const char *ns = k8s_obj_namespace(pod), *pname = k8s_obj_name(pod);
	json_t *fresh = NULL, *patch;
	const char *c, *u;
	int rc;

	if (made != NULL && (rc = k8s_patch(ctl->client, &k8s_res_pods, ns, pname,
	    &po, made, NULL, err)) != K8S_ECONFLICT)
		return rc;
	if ((rc = k8s_get(ctl->client, &k8s_res_pods, ns, pname, &fresh, err)) != 0)
		return rc;
	if (strcmp(k8s_obj_uid(fresh) ? k8s_obj_uid(fresh) : "",
	    k8s_obj_uid(pod) ? k8s_obj_uid(pod) : "") != 0 ||
	    json_object_get(json_object_get(fresh, "metadata"),
	    "deletionTimestamp")) {
		json_decref(fresh);
		return k8s_error_set(err, K8S_ECONFLICT, 0, NULL, "pod %s is "
		    "another now, or going", pname);
	}
	if (session_pod_step(fresh, &c, &u) == 0 && strcmp(u, k8s_obj_uid(cx)) == 0) {
		json_decref(fresh);
		return 0;	/* there already */
	}
	patch = session_step_patch(ctl->cfg, cx, fresh, stored, err);
	json_decref(fresh);
	if (patch == NULL)
		return err->code;
	rc = k8s_patch(ctl->client, &k8s_res_pods, ns, pname, &po, patch, NULL,
	    err);
	json_decref(patch);
	return rc;
}

int
ctl_session_interrupt(struct controller *ctl, json_t *cx, json_t *status)
{
	struct k8s_patch_opts po = { .type = K8S_PATCH_MERGE };
	const char *pname = json_string_value(json_object_get(status, "podName"));
	const char *ns = k8s_obj_namespace(cx), *c, *u, *told;
	struct k8s_error err;
	json_t *pod = NULL, *patch;
	int rc;

	if (!json_is_string(json_object_get(json_object_get(cx, "spec"),
	    "session")) || pname == NULL)
		return 0;
	rc = k8s_get(ctl->client, &k8s_res_pods, ns, pname, &pod, &err);
	if (rc == K8S_ENOTFOUND)
		return 0;
	if (rc != 0)
		return rc;
	told = json_string_value(json_object_get(json_object_get(json_object_get(
	    pod, "metadata"), "annotations"), SESSION_ANN_CANCEL));
	if (session_pod_step(pod, &c, &u) != 0 || strcmp(u, k8s_obj_uid(cx)) != 0 ||
	    (told && strcmp(told, u) == 0)) {
		json_decref(pod);
		return 0;
	}
	/* At its version: a next step put meanwhile is not interrupted. */
	patch = json_pack("{s:{s:O*, s:{s:s}}}", "metadata", "resourceVersion",
	    json_object_get(json_object_get(pod, "metadata"), "resourceVersion"),
	    "annotations", SESSION_ANN_CANCEL, k8s_obj_uid(cx));
	json_decref(pod);
	rc = k8s_patch(ctl->client, &k8s_res_pods, ns, pname, &po, patch, NULL,
	    &err);
	json_decref(patch);
	if (rc == K8S_ENOTFOUND)
		rc = 0;
	return rc;
}

/*
 * Whether step cx (read afresh) may start in session s: what its own
 * visit (ctl_session_step) checks, again, as the session's queue may get
 * to it first: the session's runtime, not cancelled, not being deleted,
 * made after the session (a step of an earlier session of the name).
 */
static int
step_startable(json_t *cx, json_t *s)
{
	json_t *spec = json_object_get(cx, "spec");
	const char *rt = json_string_value(json_object_get(spec, "runtime"));
	const char *srt = json_string_value(json_object_get(json_object_get(s,
	    "spec"), "runtime"));

	return rt && srt && strcmp(rt, srt) == 0 &&
	    !json_is_true(json_object_get(spec, "cancel")) &&
	    !json_object_get(json_object_get(cx, "metadata"),
	    "deletionTimestamp") && !older_than_session(cx, s);
}


/*
 * Put the session's spec.files (read afresh) into cx's (a copy, read
 * afresh), ahead of its own, which win on the same path. 0; K8S_EINVAL
 * with err when there are too many; or the read's error.
 */
static int
with_session_files(struct controller *ctl, json_t *s, json_t *cx,
    struct k8s_error *err)
{
	json_t *fresh = NULL, *files, *mine, *f, *g;
	size_t i, j;
	int rc = k8s_get(ctl->client, &session_resource, k8s_obj_namespace(s),
	    k8s_obj_name(s), &fresh, err);

	if (rc != 0)
		return rc == K8S_ENOTFOUND ? 0 : rc;
	files = json_array();
	mine = json_object_get(json_object_get(cx, "spec"), "files");
	json_array_foreach(json_object_get(json_object_get(fresh, "spec"), "files"),
	    i, f) {
		int over = 0;

		json_array_foreach(mine, j, g)
			over |= json_equal(json_object_get(f, "path"),
			    json_object_get(g, "path"));
		if (!over)
			json_array_append(files, f);
	}
	if (mine)
		json_array_extend(files, mine);
	json_decref(fresh);
	if (json_array_size(files) > SESSION_STEP_FILES) {
		rc = k8s_error_set(err, K8S_EINVAL, 0, NULL, "spec.files: the "
		    "session's files and the first step's are %zu, past the %d "
		    "a step carries", json_array_size(files), SESSION_STEP_FILES);
		json_decref(files);
		return rc;
	}
	json_object_set_new(json_object_get(cx, "spec"), "files", files);
	return 0;
}

/*
 * Start step cached (the first of the queue) in the session's pod: its
 * status first (Running, the pod named: what the node agent checks before
 * it runs anything), then the step on the pod, at the version read. A
 * step the pod cannot carry is Rejected, saying why. 1 started; 0 not
 * (the cache lagged, or it was refused); or an error.
 */
static int
start_step(struct controller *ctl, json_t *s, json_t *cached, json_t *pod,
    int first)
{
	const char *ns = k8s_obj_namespace(s), *pname = k8s_obj_name(pod);
	json_t *cx = NULL, *status, *st, *probe;
	struct k8s_error err;
	char msg[400], where[300], sha[65], *rv;
	size_t stored;
	int rc;

	/* The cache's copy when it kept the code: no read on the way. */
	if ((rc = ctl_cx_with_code(ctl, cached, &cx, &stored, &err)) != 0)
		return rc == K8S_ENOTFOUND ? 0 : rc;
	st = json_object_get(cx, "status");
	if (strcmp(k8s_obj_uid(cx) ? k8s_obj_uid(cx) : "", k8s_obj_uid(cached)) ||
	    json_object_get(st, "podName") ||
	    cx_phase_terminal(json_string_value(json_object_get(st, "phase"))) ||
	    !step_startable(cx, s)) {
		json_decref(cx);
		return 0;	/* the cache lags, or its own visit ends it */
	}
	status = st ? json_deep_copy(st) : json_object();
	podspec_code_sha256(cx, sha);		/* its own code's */
	/*
	 * The session's spec.files travel with its first step (the cache
	 * keeps no files: read afresh), unpacked before its own.
	 */
	if (first && (rc = with_session_files(ctl, s, cx, &err)) != 0) {
		if (rc == K8S_EINVAL)
			rc = ctl_finish(ctl, cx, status, "Failed", "Rejected",
			    err.message);
		json_decref(status);
		json_decref(cx);
		return rc;
	}
	if ((probe = session_step_patch(ctl->cfg, cx, pod, stored, &err)) == NULL) {
		rc = ctl_finish(ctl, cx, status, "Failed", "Rejected", err.message);
		json_decref(status);
		json_decref(cx);
		return rc;
	}
	snprintf(where, sizeof(where), "in session %.253s's sandbox",
	    k8s_obj_name(s));
	ctl_delivered_status(cx, status, pod, "Session", sha, where,
	    "delivered to its session's sandbox", msg);
	/*
	 * The write says why it failed, if it does. One that found the
	 * execution gone (0, and its version not moved) started nothing.
	 */
	rv = xstrdup(k8s_obj_rv(cx) ? k8s_obj_rv(cx) : "");
	rc = ctl_write_status(ctl, cx, status, NULL);
	json_decref(status);
	if (rc == 0 && strcmp(rv, k8s_obj_rv(cx) ? k8s_obj_rv(cx) : "") == 0) {
		free(rv);
		json_decref(probe);
		json_decref(cx);
		return 0;
	}
	free(rv);
	/* Named in its status: from here on the step is put on the pod. */
	if (rc == 0 && (rc = put_step(ctl, cx, pod, probe, stored, &err)) != 0 &&
	    rc != K8S_ECONFLICT)
		log_warn("cannot start a session's step yet", "execution=%s/%s "
		    "pod=%s error=\"%s\"", ns, k8s_obj_name(cx), pname,
		    err.message);
	json_decref(probe);
	if (rc == 0) {
		ctl_emit_event(ctl, cx, "Normal", "Started", msg);
		metric_inc(ctl->m_phase, "Running");
		rc = 1;
	}
	json_decref(cx);
	return rc;
}

/*
 * A Ready session's queue: the step running (one at a time), checked to
 * be on the pod (a controller that stopped between the two writes); else
 * the first in creation order started. The session's executions and
 * lastActivityTime follow the steps (*busy: one is running). 0, or an
 * error.
 */
static int
dispatch(struct controller *ctl, json_t *s, json_t *pod, json_t *status,
    int *busy)
{
	const char *ns = k8s_obj_namespace(s), *pname = k8s_obj_name(pod);
	json_t *steps = steps_of(ctl, ns, k8s_obj_name(s)), *cx, *running = NULL;
	json_t *next = NULL, *ann = json_object_get(json_object_get(pod,
	    "metadata"), "annotations");
	const char *last = json_string_value(json_object_get(status,
	    "lastActivityTime")), *on;
	char latest[CLOCK_RFC3339_LEN] = "";
	json_int_t had = json_integer_value(json_object_get(status, "executions"));
	json_int_t here = 0, total, owed;
	char owed_t[CLOCK_RFC3339_LEN];
	size_t i;
	int rc = 0, started = 0;

	json_array_foreach(steps, i, cx) {
		json_t *st = json_object_get(cx, "status");
		const char *ph = json_string_value(json_object_get(st, "phase"));
		const char *named = json_string_value(json_object_get(st, "podName"));
		const char *t = json_string_value(json_object_get(st,
		    cx_phase_terminal(ph) ? "completionTime" : "startTime"));

		if (named && strcmp(named, pname) == 0 && t && strlen(t) <
		    sizeof(latest) && strcmp(t, latest) > 0)
			snprintf(latest, sizeof(latest), "%s", t);
		here += named && strcmp(named, pname) == 0;
		if (cx_phase_terminal(ph))
			continue;
		if (named)
			running = cx;
		else if (next == NULL || before(cx, next))
			next = cx;
	}
	*busy = running != NULL;
	/* A count held (below): a step it counts may have left the cache. */
	if (!held_get(ctl, k8s_obj_uid(s), &owed, owed_t))
		owed = 0;
	on = json_string_value(json_object_get(ann, SESSION_ANN_STEP));
	if (running && strcmp(json_string_value(json_object_get(json_object_get(
	    running, "status"), "podName")), pname) == 0 &&
	    (on == NULL || strcmp(on, k8s_obj_uid(running)) != 0)) {
		/* Named, not on the pod yet as the cache has it: put it there. */
		json_t *fresh = NULL;
		struct k8s_error err;

		rc = k8s_get(ctl->client, &cx_resource, ns, k8s_obj_name(running),
		    &fresh, &err);
		if (rc == 0 && strcmp(k8s_obj_uid(fresh) ? k8s_obj_uid(fresh) : "",
		    k8s_obj_uid(running)) == 0 && !cx_phase_terminal(
		    json_string_value(json_object_get(json_object_get(fresh,
		    "status"), "phase")))) {
			/* The first (no other ran here): the session's files too. */
			if (here <= 1 && had <= 1 && owed <= 1)
				rc = with_session_files(ctl, s, fresh, &err);
			if (rc == K8S_EINVAL)
				rc = 0;	/* too many now: started without them */
			if (rc == 0)
				rc = put_step(ctl, fresh, pod, NULL, 0, &err);
		}
		else if (rc == K8S_ENOTFOUND)
			rc = 0;
		json_decref(fresh);
	} else if (running == NULL && next != NULL &&
	    (rc = start_step(ctl, s, next, pod, here == 0 && had == 0 &&
	    owed == 0)) == 1) {
		*busy = 1;
		rc = 0;
		started = 1;
		ctl_now_rfc3339(latest);
	}
	/*
	 * Steps run here: the count written, or those the cache names this
	 * pod in if more (a write of the count lost); one more for the step
	 * just started. A step its TTL deleted leaves the cache, not the
	 * count: it only ever goes forward.
	 */
	total = here > had ? here : had;
	/*
	 * The running step's start is written (the count, the time) once it
	 * has run STEP_HOLD_S (its start has a second's resolution: 1-2 s),
	 * or with its end if that comes first: a short step costs its
	 * session one write, after its result, not one beside the agent's
	 * reads on its way. Only the one step not counted is held, and what
	 * is held is kept here (ctl->held), so that a step deleted before
	 * its count was written (ttlSecondsAfterFinished 0, `run --rm`) is
	 * counted all the same, from its start, as it was before the hold.
	 */
	if (owed > 0) {
		if (owed > total)
			total = owed;
		if (strcmp(owed_t, latest) > 0)
			snprintf(latest, sizeof(latest), "%s", owed_t);
		if (had >= owed)
			held_drop(ctl, k8s_obj_uid(s));	/* written */
	}
	total += started;
	if (*busy && total <= had + 1) {
		long long t = started ? now_s() : clock_parse_rfc3339(
		    json_string_value(json_object_get(json_object_get(running,
		    "status"), "startTime")));

		if (t > 0 && now_s() < t + STEP_HOLD_S + 1 &&
		    held_put(ctl, k8s_obj_uid(s), total, latest) == 0) {
			char *key = ctl_session_key(ns, k8s_obj_name(s));

			requeue_in(ctl, key, t + STEP_HOLD_S + 1 - now_s());
			free(key);
			json_decref(steps);
			return rc;
		}
	}
	if (total > had)
		json_object_set_new(status, "executions", json_integer(total));
	/* The last step's start or end: only ever forward. */
	if (latest[0] && (last == NULL || strcmp(latest, last) > 0))
		json_object_set_new(status, "lastActivityTime", json_string(latest));
	json_decref(steps);
	return rc;
}

/* --- a pool's holder for a session (docs/sessions.md, "The sandbox") ------ */

/* Past its start deadline (--start-deadline-seconds) since it was made. */
static int
late(struct controller *ctl, json_t *s, long long now)
{
	long long made = clock_parse_rfc3339(json_string_value(json_object_get(
	    json_object_get(s, "metadata"), "creationTimestamp")));

	return made > 0 && now >= made + ctl->opts.start_deadline_ms / 1000;
}

static int
end_late(struct controller *ctl, json_t *s, json_t *status)
{
	char msg[128];

	snprintf(msg, sizeof(msg), "its sandbox was not ready within %lld s",
	    (long long)(ctl->opts.start_deadline_ms / 1000));
	return end(ctl, s, status, "Failed", msg);
}

/*
 * The claim did not land and cannot: the session's status names no pod
 * again (read afresh, if it still names this one, Warm and Pending), and
 * its next visit makes a pod or claims another.
 */
static int
unclaim(struct controller *ctl, json_t *cached, const char *pname)
{
	json_t *s = NULL, *st;
	struct k8s_error err;
	const char *named, *mode, *ph;
	int rc = k8s_get(ctl->client, &session_resource, k8s_obj_namespace(cached),
	    k8s_obj_name(cached), &s, &err);

	if (rc != 0)
		return rc == K8S_ENOTFOUND ? 0 : rc;
	st = json_deep_copy(json_object_get(s, "status"));
	named = json_string_value(json_object_get(st, "podName"));
	mode = json_string_value(json_object_get(st, "startMode"));
	ph = json_string_value(json_object_get(st, "phase"));
	if (strcmp(k8s_obj_uid(s) ? k8s_obj_uid(s) : "", k8s_obj_uid(cached)) ||
	    named == NULL || strcmp(named, pname) != 0 || mode == NULL ||
	    strcmp(mode, "Warm") != 0 || ph == NULL ||
	    strcmp(ph, SESSION_PENDING) != 0) {
		json_decref(st);
		json_decref(s);
		return 0;
	}
	json_object_del(st, "podName");
	json_object_del(st, "startMode");
	log_info("session's warm claim fell back", "session=%s/%s pod=%s",
	    k8s_obj_namespace(s), k8s_obj_name(s), pname);
	rc = ctl_write_status_of(ctl, &session_resource, s, st, NULL);
	json_decref(st);
	json_decref(s);
	return rc;
}

/*
 * Patch the claim onto holder (as read: its version) for session s. 0
 * when it landed (or had); else unclaimed (*undone set), or the error.
 */
static int
claim(struct controller *ctl, json_t *s, json_t *holder, int *undone)
{
	struct k8s_patch_opts po = { .type = K8S_PATCH_MERGE };
	const char *ns = k8s_obj_namespace(s), *hname = k8s_obj_name(holder);
	json_t *patch = session_claim_patch(s, holder, now_s()), *o = NULL;
	struct k8s_error err;
	int rc;

	*undone = 0;
	if (patch == NULL)
		return K8S_EINVAL;	/* bad strings: never, from the API server */
	rc = k8s_patch(ctl->client, &k8s_res_pods, ns, hname, &po, patch, NULL,
	    &err);
	json_decref(patch);
	if (rc == 0) {
		log_debug("session claimed a warm sandbox", "session=%s/%s pod=%s",
		    ns, k8s_obj_name(s), hname);
		return 0;
	}
	if (rc != K8S_ECONFLICT && rc != K8S_ENOTFOUND)
		return rc;	/* landed or not, unknown: the next visit reads it */
	/* Taken by another, or gone; or ours after all (another replica). */
	rc = k8s_get(ctl->client, &k8s_res_pods, ns, hname, &o, &err);
	if (rc == 0 && pod_is_sessions(o, s)) {
		json_decref(o);
		return 0;
	}
	json_decref(o);
	if (rc != 0 && rc != K8S_ENOTFOUND)
		return rc;
	*undone = 1;
	return unclaim(ctl, s, hname);
}

/*
 * A new session: a ready holder of a pool here that matches it, named in
 * its status first (Pending, Warm), then claimed. 1 when one was (or it
 * fell back: the next visit goes on), 0 when there is none, or an error.
 */
static int
claim_holder(struct controller *ctl, json_t *s, json_t *status)
{
	struct k8s_error err;
	json_t *h;
	int rc, undone = 0;

	/*
	 * What make_pod refuses (a profile with egress, among others) takes
	 * no holder either: a network holder would be refused at its first
	 * step, and the session never said Rejected.
	 */
	if (session_check(ctl->cfg, s, &err) != 0 ||
	    (h = ctl_pick_holder(ctl, s)) == NULL)
		return 0;
	json_object_set_new(status, "phase", json_string(SESSION_PENDING));
	json_object_set_new(status, "startMode", json_string("Warm"));
	json_object_set_new(status, "podName", json_string(k8s_obj_name(h)));
	json_object_del(status, "message");
	ctl_set_condition(status, "Ready", "False", "Starting", "its sandbox, a "
	    "pool's, is being claimed", json_integer_value(json_object_get(
	    json_object_get(s, "metadata"), "generation")));
	rc = ctl_write_status_of(ctl, &session_resource, s, status, NULL);
	/*
	 * Named in the status: from here on the claim lands, or falls back.
	 * The holder stays reserved (it ages out, CTL_RESERVE_MS): claimed
	 * (the cache may not show it yet), unknown, or lost to another (the
	 * next try takes another). Not named: free again.
	 */
	if (rc == 0)
		rc = claim(ctl, s, h, &undone);
	else
		ctl_holder_release(ctl, k8s_obj_uid(h));
	json_decref(h);
	return rc == 0 ? 1 : rc;
}

/*
 * Named (Warm, Pending), the pod there not the session's yet: a
 * controller stopped between the two writes, or the cache lags. Read
 * afresh: the session's already; still an idle holder of a pool here
 * (claimed now); or anything else (fall back).
 */
static int
resume_claim(struct controller *ctl, json_t *s, const char *pname)
{
	struct k8s_error err;
	json_t *pod = NULL;
	int undone, rc = k8s_get(ctl->client, &k8s_res_pods, k8s_obj_namespace(s), pname,
	    &pod, &err);

	if (rc == K8S_ENOTFOUND)
		return unclaim(ctl, s, pname);
	if (rc != 0)
		return rc;
	if (pod_is_sessions(pod, s))
		rc = 0;		/* the cache lags: its event comes */
	else if ((rc = ctl_pool_owns(ctl, pod)) == 1 && pool_holder_idle(pod))
		rc = claim(ctl, s, pod, &undone);
	else if (rc >= 0)
		rc = unclaim(ctl, s, pname);
	json_decref(pod);
	return rc;
}

int
ctl_session_reconcile(struct controller *ctl, const char *ns, const char *name)
{
	json_t *s = informer_get(ctl->session_inf, ns, name), *status, *pod = NULL;
	char *key = ctl_session_key(ns, name), pname[80], msg[600];
	const char *phase;
	long long now = now_s(), at;
	int rc = 0, busy = 0;

	if (s == NULL && informer_wait_synced(ctl->session_inf, 0) != 0) {
		/*
		 * Not listed yet (the controller's start: wait_leading waits for
		 * the executions' and pods' caches only): absent says nothing.
		 */
		workqueue_add_after(ctl->queue, key, 1000);
		free(key);
		return 0;
	}
	if (s == NULL) {
		/* Gone: its pod goes now, not when the garbage collector gets to it. */
		kick_steps(ctl, ns, name);	/* they end with it */
		rc = sweep_pods(ctl, ns, name, NULL);
		free(key);
		return rc;
	}
	status = json_deep_copy(json_object_get(s, "status"));
	if (status == NULL)
		status = json_object();
	phase = json_string_value(json_object_get(status, "phase"));
	/* Its pod: a pool's holder it claimed, or its own. */
	if (json_is_string(json_object_get(status, "podName")) &&
	    json_string_length(json_object_get(status, "podName")) < sizeof(pname))
		snprintf(pname, sizeof(pname), "%s", json_string_value(
		    json_object_get(status, "podName")));
	else
		session_pod_name(k8s_obj_uid(s), pname);
	if ((rc = sweep_pods(ctl, ns, name, k8s_obj_uid(s))) != 0)
		goto out;
	pod = informer_get(ctl->pod_inf, ns, pname);
	if (pod && !pod_owned(pod, s)) {
		/*
		 * Not the session's: never deleted nor used from here. A
		 * holder named, not claimed yet: the claim goes on.
		 */
		const char *mode = json_string_value(json_object_get(status,
		    "startMode"));

		json_decref(pod);
		pod = NULL;
		if (mode && strcmp(mode, "Warm") == 0 && phase &&
		    strcmp(phase, SESSION_PENDING) == 0 &&
		    !json_object_get(json_object_get(s, "metadata"),
		    "deletionTimestamp") && !json_is_true(json_object_get(
		    json_object_get(s, "spec"), "close"))) {
			rc = late(ctl, s, now) ? end_late(ctl, s, status) :
			    resume_claim(ctl, s, pname);
			goto out;
		}
	}
	if (json_object_get(json_object_get(s, "metadata"), "deletionTimestamp")) {
		rc = pod ? delete_pod(ctl, ns, pname, k8s_obj_uid(pod)) : 0;
		goto out;
	}
	if (phase && strcmp(phase, SESSION_ENDED) == 0) {
		/* Its steps end with it: queued ones Rejected, a running one too. */
		ctl_session_forget(ctl, s);
		kick_steps(ctl, ns, name);
		rc = cancel_running(ctl, s, pname, json_string_value(
		    json_object_get(status, "reason")));
		if (rc == 0)
			rc = pod && !json_object_get(json_object_get(pod, "metadata"),
			    "deletionTimestamp") ? delete_pod(ctl, ns, pname,
			    k8s_obj_uid(pod)) : 0;
		/* Its audit record, once (audit.c). */
		if (rc == 0)
			rc = ctl_audit_session_finished(ctl, s);
		if (rc == 0)
			rc = ttl(ctl, s, status, key);
		goto out;
	}
	if (json_is_true(json_object_get(json_object_get(s, "spec"), "close"))) {
		/* Said first: the pod's delete can wait for the next pass. */
		rc = end(ctl, s, status, "Closed", "closed by spec.close");
		if (rc == 0)
			rc = cancel_running(ctl, s, pname, "Closed");
		if (rc == 0 && pod)
			rc = delete_pod(ctl, ns, pname, k8s_obj_uid(pod));
		goto out;
	}
	if (phase == NULL || json_object_get(status, "podName") == NULL) {
		rc = ctl_ensure_guardrails(ctl, ns);
		if (rc == K8S_ECANCELED)
			rc = 0;
		else if (rc == CTL_EUNCOUNTED) {
			requeue_in(ctl, key, 1);
			rc = 0;
		} else if (rc == 0 && (rc = claim_holder(ctl, s, status)) == 0) {
			session_pod_name(k8s_obj_uid(s), pname);
			rc = make_pod(ctl, s, status, pname);
		} else if (rc == 1)
			rc = 0;
		goto out;
	}
	if (pod == NULL && strcmp(phase, SESSION_PENDING) == 0 &&
	    json_is_string(json_object_get(status, "startMode")) &&
	    strcmp(json_string_value(json_object_get(status, "startMode")),
	    "Warm") == 0) {
		/* A holder named, not in the cache: claimed, or fallen back. */
		rc = late(ctl, s, now) ? end_late(ctl, s, status) :
		    resume_claim(ctl, s, pname);
		goto out;
	}
	if (pod == NULL) {
		/* Named, and not in the cache: a fresh read decides. */
		struct k8s_error err;
		json_t *fresh = NULL;

		rc = k8s_get(ctl->client, &k8s_res_pods, ns, pname, &fresh, &err);
		if (rc == K8S_ENOTFOUND)
			rc = end(ctl, s, status, "Failed", "its sandbox's pod was "
			    "deleted");
		else if (rc == 0 && !pod_is_sessions(fresh, s))
			rc = end(ctl, s, status, "Failed", "a pod of its sandbox's "
			    "name exists and is not its own");
		else if (rc == 0)
			requeue_in(ctl, key, 1);	/* the cache lags */
		json_decref(fresh);
		goto out;
	}
	if (json_object_get(json_object_get(pod, "metadata"), "deletionTimestamp")) {
		/* Deleted by someone else: it is going; hurried, and said. */
		rc = end(ctl, s, status, "Failed", "its sandbox's pod was "
			    "deleted");
		if (rc == 0)
			rc = delete_pod(ctl, ns, pname, k8s_obj_uid(pod));
		goto out;
	}
	if (ctl_node_lost(ctl, pod, msg, sizeof(msg))) {
		rc = end(ctl, s, status, "NodeLost", msg);
		if (rc == 0)
			rc = delete_pod(ctl, ns, pname, k8s_obj_uid(pod));
		goto out;
	}
	{
		const char *pp = json_string_value(json_object_get(json_object_get(
		    pod, "status"), "phase"));

		if (pp && (strcmp(pp, "Failed") == 0 || strcmp(pp, "Succeeded") == 0)) {
			int oom = strcmp(pod_end_reason(pod), "OOMKilled") == 0;
			const char *pr = json_string_value(json_object_get(
			    json_object_get(pod, "status"), "reason"));

			/* The kubelet's backstop for the lifetime (session.h). */
			if (pr && strcmp(pr, "DeadlineExceeded") == 0) {
				rc = end(ctl, s, status, "Expired", "its "
				    "maxLifetimeSeconds passed");
				if (rc == 0)
					rc = delete_pod(ctl, ns, pname, k8s_obj_uid(pod));
				goto out;
			}

			rc = end(ctl, s, status, oom ? "OOMKilled" : "Failed",
				    oom ? "its sandbox ran out of memory" :
				    "its sandbox ended");
			if (rc == 0)
				rc = delete_pod(ctl, ns, pname, k8s_obj_uid(pod));
			goto out;
		}
	}
	if (strcmp(phase, SESSION_PENDING) == 0) {
		char t[CLOCK_RFC3339_LEN];
		long long made = clock_parse_rfc3339(json_string_value(json_object_get(
		    json_object_get(s, "metadata"), "creationTimestamp")));
		long long limit = ctl->opts.start_deadline_ms / 1000;

		if (!pool_sandbox_ready(pod)) {
			/* Its pod's events bring it back; the start deadline ends it. */
			if (made > 0 && now >= made + limit) {
				snprintf(msg, sizeof(msg), "its sandbox was not ready "
				    "within %lld s", limit);
				rc = end(ctl, s, status, "Failed", msg);
				if (rc == 0)
					rc = delete_pod(ctl, ns, pname, k8s_obj_uid(pod));
			} else if (made > 0)
				requeue_in(ctl, key, made + limit - now);
			goto out;
		}
		ctl_now_rfc3339(t);
		json_object_set_new(status, "phase", json_string(SESSION_READY));
		json_object_set_new(status, "startTime", json_string(t));
		json_object_set_new(status, "lastActivityTime", json_string(t));
		json_object_set(status, "nodeName", json_object_get(json_object_get(pod,
		    "spec"), "nodeName"));
		ctl_set_condition(status, "Ready", "True", "Ready", "its sandbox is "
		    "ready", json_integer_value(json_object_get(json_object_get(s,
		    "metadata"), "generation")));
		rc = ctl_write_status_of(ctl, &session_resource, s, status, NULL);
		if (rc == 0)
			requeue_in(ctl, key, session_idle_s(s) < session_lifetime_s(s) ?
			    session_idle_s(s) : session_lifetime_s(s));
		goto out;
	}
	/* Ready: its steps, its lifetime, then its idle time. */
	{
		json_t *before_st = json_deep_copy(status);

		rc = pool_sandbox_ready(pod) ? dispatch(ctl, s, pod, status, &busy) :
		    0;
		if (rc == 0 && !json_equal(before_st, status))
			rc = ctl_write_status_of(ctl, &session_resource, s, status,
			    NULL);
		json_decref(before_st);
		if (rc != 0)
			goto out;
	}
	/*
	 * Its lifetime's end as the node agent reads it from the pod (its
	 * start, activeDeadlineSeconds): the two clocks agree. From Ready
	 * when the pod does not say.
	 */
	{
		struct session_clock sc;

		at = clock_parse_rfc3339(json_string_value(json_object_get(status,
		    "startTime")));
		if (session_pod_clock(pod, &sc) == 0 && sc.expires_s > 0)
			at = sc.expires_s - session_lifetime_s(s);
	}
	if (at > 0 && now >= at + session_lifetime_s(s)) {
		rc = end(ctl, s, status, "Expired", "its maxLifetimeSeconds "
			    "passed");
		if (rc == 0)
			rc = cancel_running(ctl, s, pname, "Expired");
		if (rc == 0)
			rc = delete_pod(ctl, ns, pname, k8s_obj_uid(pod));
		goto out;
	}
	{
		long long idle = clock_parse_rfc3339(json_string_value(
		    json_object_get(status, "lastActivityTime"))), next;

		if (idle > 0 && now >= idle + session_idle_s(s) && !busy) {
			rc = end(ctl, s, status, "IdleTimeout", "no execution "
			    "for its idleTimeoutSeconds");
			if (rc == 0)
				rc = delete_pod(ctl, ns, pname, k8s_obj_uid(pod));
			goto out;
		}
		next = at + session_lifetime_s(s);
		if (idle > 0 && idle + session_idle_s(s) < next)
			next = idle + session_idle_s(s);
		requeue_in(ctl, key, next - now);
	}
out:
	json_decref(pod);
	json_decref(status);
	json_decref(s);
	free(key);
	return rc;
}

/*
 * An execution naming a session (spec.session; cx cached, status its
 * copy), not ended: 1 when it is a session's (*rcp the result), 0 when
 * not. One that names no session here, an ended one, or one of another
 * runtime is Rejected, the field named; one running when its session
 * ended ends with it. Else the session's queue (ctl_session_reconcile)
 * starts it in turn: never as a one-shot execution, which would lose
 * what the tenant meant to keep.
 */
int
ctl_session_step(struct controller *ctl, json_t *cx, json_t *status, int *rcp)
{
	const char *sname = json_string_value(json_object_get(json_object_get(cx,
	    "spec"), "session"));
	const char *ns = k8s_obj_namespace(cx);
	const char *phase, *reason, *rt, *srt, *named, *spod;
	json_t *s, *sst;
	char msg[700], *key;

	if (sname == NULL)
		return 0;
	*rcp = 0;
	if (informer_wait_synced(ctl->session_inf, 0) != 0) {
		/* Not listed yet: absent would say nothing. Never a pod meanwhile. */
		key = xasprintf("%s/%s", ns, k8s_obj_name(cx));
		workqueue_add_after(ctl->queue, key, 1000);
		free(key);
		return 1;
	}
	s = informer_get(ctl->session_inf, ns, sname);
	if (s == NULL) {
		/* Made a moment ago, maybe: the cache may lag the executions'. */
		struct k8s_error err;
		int rc = k8s_get(ctl->client, &session_resource, ns, sname, &s, &err);

		if (rc != 0 && rc != K8S_ENOTFOUND) {
			*rcp = rc;
			return 1;
		}
	}
	sst = json_object_get(s, "status");
	phase = json_string_value(json_object_get(sst, "phase"));
	reason = json_string_value(json_object_get(sst, "reason"));
	srt = json_string_value(json_object_get(json_object_get(s, "spec"),
	    "runtime"));
	rt = json_string_value(json_object_get(json_object_get(cx, "spec"),
	    "runtime"));
	named = json_string_value(json_object_get(status, "podName"));
	spod = json_string_value(json_object_get(sst, "podName"));
	if (named && s && spod && strcmp(named, spod) != 0) {
		/* Its session's sandbox is another now (the session made again). */
		snprintf(msg, sizeof(msg), "its session '%.253s' was deleted while "
		    "it ran", sname);
		*rcp = ctl_finish(ctl, cx, status, "Failed", "PodDeleted", msg);
		json_decref(s);
		return 1;
	}
	if (named && (s == NULL || (phase && strcmp(phase, SESSION_ENDED) == 0) ||
	    json_object_get(json_object_get(s, "metadata"), "deletionTimestamp"))) {
		/* It ran in the session's sandbox, which is gone or going. */
		int quiet = session_end_quiet(reason);
		int lost = reason && strcmp(reason, "NodeLost") == 0;

		session_step_ended_msg(msg, sizeof(msg), sname, s == NULL ?
		    "deleted" : reason ? reason : "deleted");
		/* Lost with its node: said as an execution's own loss is, the node named. */
		if (lost)
			snprintf(msg, sizeof(msg), "its session '%.253s' was lost with "
			    "its node: %.400s", sname, json_string_value(
			    json_object_get(sst, "message")) ? json_string_value(
			    json_object_get(sst, "message")) : "");
		*rcp = ctl_finish(ctl, cx, status, quiet ? "Cancelled" : "Failed",
		    quiet ? "Cancelled" : lost ? "NodeLost" : "PodDeleted", msg);
		json_decref(s);
		return 1;
	}
	if (named) {
		/*
		 * Running: its result is the node agent's to write, by the
		 * step's timeout, the kernel's grace and the agent's backstop;
		 * the controller's result grace past those, it is lost (an
		 * agent gone with it, a node lost unnoticed), and said so.
		 */
		long long started = clock_parse_rfc3339(json_string_value(
		    json_object_get(status, "startTime")));
		long long limit = (cx_timeout_ms(cx) + SESSION_STEP_GRACE_MS +
		    SESSION_STEP_BACKSTOP_MS + ctl->opts.result_grace_ms) / 1000 + 1;

		json_decref(s);
		if (started > 0 && now_s() >= started + limit) {
			snprintf(msg, sizeof(msg), "no result from the node agent "
			    "within %lld s of its start: its output cannot be had",
			    limit);
			*rcp = ctl_finish(ctl, cx, status, "Failed", "ResultLost", msg);
		} else if (started > 0) {
			key = xasprintf("%s/%s", ns, k8s_obj_name(cx));
			requeue_in(ctl, key, started + limit - now_s());
			free(key);
		}
		return 1;
	}
	if (s == NULL)
		snprintf(msg, sizeof(msg), "spec.session: no session '%.253s' in "
		    "this namespace", sname);
	else if (older_than_session(cx, s))
		snprintf(msg, sizeof(msg), "spec.session: session '%.253s' was "
		    "made after this execution (an earlier one of the name is "
		    "gone)", sname);
	else if (phase && strcmp(phase, SESSION_ENDED) == 0)
		snprintf(msg, sizeof(msg), "spec.session: session '%.253s' has "
		    "ended (%.64s)", sname, reason ? reason : "");
	else if (srt == NULL || rt == NULL || strcmp(srt, rt) != 0)
		snprintf(msg, sizeof(msg), "spec.runtime: not the runtime of "
		    "session '%.253s'", sname);
	else {
		/* In the session's queue: its reconcile starts it in turn. */
		key = ctl_session_key(ns, sname);
		workqueue_add(ctl->queue, key);
		free(key);
		json_decref(s);
		return 1;
	}
	json_decref(s);
	*rcp = ctl_finish(ctl, cx, status, "Failed", "Rejected", msg);
	return 1;
}
