/*
 * reconcile.c - one pass over one CodeExecution: make the world match it.
 * Idempotent: every step either finds its result already there (the pod
 * is named by the execution's uid; creates tolerate AlreadyExists) or
 * does it, so a restart at any point loses nothing and duplicates nothing.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "cx.h"
#include "controller_priv.h"
#include "jsonsize.h"
#include "log.h"
#include "podspec.h"
#include "xmalloc.h"

/*
 * Whether a create the API server answered with err will never succeed as
 * sent: any 4xx but a conflict (already there), throttling, and a quota
 * full for now (it frees as other executions end).
 */
int
ctl_create_refused(const struct k8s_error *err)
{
	long st = err->http_status;

	if (st < 400 || st > 499 || st == 409 || st == 429 || st == 408)
		return 0;
	return !ctl_quota_full(err);
}

int
ctl_quota_full(const struct k8s_error *err)
{
	return err->http_status == 403 && (strstr(err->message,
	    "exceeded quota") != NULL || strstr(err->message,
	    "status unknown for quota") != NULL);
}

long long
ctl_quota_retry_in(struct controller *ctl, const char *ns, const char *kind,
    long long min_ms)
{
	long long now = clock_mono_ms(), at;
	json_t *t;

	if (kind)
		metric_inc(ctl->m_quota_refused, kind);
	pthread_mutex_lock(&ctl->lock);
	t = json_object_get(ctl->quota_slot, ns);
	at = t ? json_integer_value(t) : 0;
	if (at < now + min_ms)
		at = now + min_ms;
	json_object_set_new(ctl->quota_slot, ns, json_integer(at +
	    CTL_QUOTA_SLOT_MS));
	pthread_mutex_unlock(&ctl->lock);
	return at - now;
}

long long
ctl_quota_gate(struct controller *ctl, const char *ns)
{
	long long now = clock_mono_ms(), at, wait = 0;
	json_t *t;

	pthread_mutex_lock(&ctl->lock);
	t = json_object_get(ctl->quota_gate, ns);
	at = t ? json_integer_value(t) : 0;
	if (at > now)
		wait = at - now;
	else
		json_object_set_new(ctl->quota_gate, ns, json_integer(now +
		    CTL_QUOTA_SLOT_MS));
	pthread_mutex_unlock(&ctl->lock);
	return wait;
}

/*
 * Did this process end the execution of uid (see ctl->ended)? Forgets it
 * once the cache has caught up (cached says terminal) or after ten
 * minutes.
 */
static int
ended_here(struct controller *ctl, const char *uid, int cached_terminal)
{
	json_t *t;
	int yes;

	pthread_mutex_lock(&ctl->lock);
	t = json_object_get(ctl->ended, uid);
	yes = t != NULL && !cached_terminal &&
	    clock_mono_ms() - json_integer_value(t) < 600000;
	if (t && !yes)
		json_object_del(ctl->ended, uid);
	pthread_mutex_unlock(&ctl->lock);
	return yes;
}


/*
 * The pod an execution names in its status (a warm one's is a holder's),
 * or NULL: then its own, podspec_pod_name. Borrowed.
 */
static const char *
named_pod(json_t *cx)
{
	return json_string_value(json_object_get(json_object_get(cx, "status"),
	    "podName"));
}

/*
 * Delete the execution's pod (pod, or its own when NULL) and ConfigMap,
 * whatever state they are in. A pod named other than its own (a holder
 * it claimed) is deleted only if the cache has it as this execution's,
 * at that pod's uid: the name alone may be a session's pod now (a
 * session's step names it; a session won the holder), which is never an
 * execution's to delete. One the cache lags on goes with its owner.
 */
static int
delete_children(struct controller *ctl, const char *ns, const char *uid,
    const char *pod)
{
	struct k8s_delete_opts now = { .grace_period_set = 1,
	    .grace_period_seconds = 0, .propagation_policy = "Background" };
	struct k8s_error err;
	char *name = podspec_pod_name(uid);
	json_t *p = NULL;
	int rc, rc2;

	if (pod && strcmp(pod, name) != 0) {
		const char *puid = NULL;

		if ((p = informer_get(ctl->pod_inf, ns, pod)) != NULL)
			podspec_pod_execution(p, &puid);
		if (puid && strcmp(puid, uid) == 0) {
			now.precondition_uid = k8s_obj_uid(p);
			rc = k8s_delete(ctl->client, &k8s_res_pods, ns, pod, &now,
			    NULL, &err);
			if (rc == K8S_ECONFLICT)
				rc = 0;		/* another pod of the name by now */
		} else {
			rc = 0;
		}
	} else {
		rc = k8s_delete(ctl->client, &k8s_res_pods, ns, name, &now, NULL,
		    &err);
	}
	rc2 = k8s_delete(ctl->client, &k8s_res_configmaps, ns, name, NULL, NULL,
	    &err);
	free(name);
	json_decref(p);
	if (rc == K8S_ENOTFOUND)
		rc = 0;
	if (rc == 0 && rc2 != K8S_ENOTFOUND)
		rc = rc2;
	return rc;
}

/* Does execution cx's profile have egress (the config's list, not narrowed)? */
static int
profile_egress(struct controller *ctl, json_t *cx)
{
	const struct ctl_profile *p = ctl_config_profile(ctl->cfg,
	    json_string_value(json_object_get(json_object_get(cx, "spec"),
	    "runtime")));

	return p != NULL && p->negress > 0;
}

/*
 * The NetworkPolicy of an execution that had egress (podspec: named as
 * its pod), deleted once it has ended: it would otherwise live as long as
 * the execution is kept (its owner), and each one adds to the policy
 * engine's work. The namespace's deny-all still holds its pod meanwhile.
 */
static int
delete_egress(struct controller *ctl, const char *ns, const char *uid)
{
	struct k8s_error err;
	char *name = podspec_pod_name(uid);
	int rc = k8s_delete(ctl->client, ctl_guard_res[1], ns, name, NULL, NULL,
	    &err);

	free(name);
	return rc == K8S_ENOTFOUND ? 0 : rc;
}

/*
 * Delete the pods that executions named name left behind, found by the
 * annotation naming them (the pod cache's index), except the one of uid
 * keep (NULL: none). Without
 * this, an execution deleted (or deleted and created again) while no
 * garbage collector runs, or while we were down, would leave its pod.
 */
static int
sweep(struct controller *ctl, const char *ns, const char *name,
    const char *keep)
{
	char *owner_key = xasprintf("%s/%s", ns, name);
	json_t *pods = informer_by_index(ctl->pod_inf, owner_key), *p;
	size_t i;
	int rc = 0;

	free(owner_key);
	json_array_foreach(pods, i, p) {
		const char *uid;
		const char *owner = podspec_pod_execution(p, &uid);

		if (owner && uid && strcmp(k8s_obj_namespace(p), ns) == 0 &&
		    strcmp(owner, name) == 0 && (keep == NULL ||
		    strcmp(uid, keep) != 0)) {
			log_info("deleting pod of deleted execution",
			    "pod=%s/%s", ns, k8s_obj_name(p));
			if (delete_children(ctl, ns, uid, k8s_obj_name(p)) != 0)
				rc = K8S_EIO;
		}
	}
	json_decref(pods);
	return rc;
}

/* Delete a finished execution once its TTL has passed; else come back. */
static int
ttl(struct controller *ctl, json_t *cx, const char *key)
{
	json_t *spec = json_object_get(cx, "spec");
	json_t *st = json_object_get(cx, "status");
	long long done = clock_parse_rfc3339(json_string_value(json_object_get(st,
	    "completionTime")));
	json_int_t ttl_s = json_integer_value(json_object_get(spec,
	    "ttlSecondsAfterFinished"));
	long long left;
	struct k8s_delete_opts bg = { .propagation_policy = "Background",
	    .precondition_uid = k8s_obj_uid(cx) };
	struct k8s_error err;
	int rc;

	if (!json_object_get(spec, "ttlSecondsAfterFinished"))
		ttl_s = 3600;
	if (done < 0)
		done = (long long)time(NULL);	/* no completion time: from now */
	left = done + ttl_s - (long long)time(NULL);
	if (left > 0) {
		/*
		 * Far off (the default is an hour): the resync brings the key
		 * back every resync_ms anyway, so only a TTL due before then
		 * holds a timer. Thousands of finished executions then cost
		 * no queue entries.
		 */
		if (left * 1000 <= ctl->opts.resync_ms)
			workqueue_add_after(ctl->queue, key, (uint64_t)left * 1000);
		return 0;
	}
	rc = k8s_delete(ctl->client, &cx_resource, k8s_obj_namespace(cx),
	    k8s_obj_name(cx), &bg, NULL, &err);
	if (rc == 0)
		log_info("execution expired", "execution=%s", key);
	if (rc == 0 || rc == K8S_ENOTFOUND)
		rc = delete_children(ctl, k8s_obj_namespace(cx), k8s_obj_uid(cx),
		    named_pod(cx));
	return rc;
}

/*
 * The first visit after the pod exists: Pending, with every condition
 * set, as the API conventions ask. Whichever path gets here first (the
 * create, or a retry after its status write was refused) does it.
 */
static void
init_pending(json_t *cx, json_t *status, struct notes *notes)
{
	json_int_t gen = json_integer_value(json_object_get(json_object_get(cx,
	    "metadata"), "generation"));

	/* Pending already, and not because it waited for the quota: done. */
	if (json_object_get(status, "phase") != NULL &&
	    strcmp(ctl_condition_field(status, "Scheduled", "reason"),
	    "QuotaExceeded") != 0)
		return;
	if (json_object_get(status, "phase") == NULL) {
		json_object_set_new(status, "phase", json_string("Pending"));
		json_object_set_new(status, "observedGeneration",
		    json_integer(gen));
		notes->phase = "Pending";
	}
	ctl_set_condition(status, "Scheduled", "False", "Pending",
	    "waiting for a node", gen);
	ctl_set_condition(status, "Started", "False", "Pending", "not started", gen);
	ctl_set_condition(status, "Complete", "False", "Pending", "not finished",
	    gen);
}

/*
 * The namespace's quota has no room for the pod now (the executions that
 * run use it all, or the quota controller has not counted it yet): the
 * execution waits, Pending with Scheduled False/QuotaExceeded and one
 * Warning Event, and the pod is tried again after QUOTA_RETRY_MS, or later
 * when the namespace has many waiting (ctl_quota_retry_in), until
 * capacity frees or the execution has waited its own timeoutSeconds since
 * it was created: it then ends TimedOut/DeadlineExceeded, never having run.
 */
#define QUOTA_RETRY_MS	2000

static int
quota_wait(struct controller *ctl, json_t *cx, json_t *status,
    const char *why)
{
	json_int_t gen = json_integer_value(json_object_get(json_object_get(cx,
	    "metadata"), "generation"));
	long long created = clock_parse_rfc3339(json_string_value(json_object_get(
	    json_object_get(cx, "metadata"), "creationTimestamp")));
	long long now = (long long)time(NULL), limit = cx_timeout_ms(cx) / 1000;
	long long retry;
	struct notes notes = { 0 };
	char msg[1200], key[600];
	int rc;

	if (created > 0 && now - created >= limit) {
		snprintf(msg, sizeof(msg), "waited %lld s for room in the "
		    "namespace's quota and never ran: %.900s", now - created, why);
		return ctl_finish(ctl, cx, status, "TimedOut", "DeadlineExceeded",
		    msg);
	}
	snprintf(msg, sizeof(msg), "waiting for room in the namespace's quota "
	    "(at most its %lld s timeout): %.900s", limit, why);
	if (strcmp(ctl_condition_field(status, "Scheduled", "reason"),
	    "QuotaExceeded") != 0)
		ctl_note(&notes, "Warning", "QuotaExceeded", msg);
	if (json_object_get(status, "phase") == NULL) {
		json_object_set_new(status, "phase", json_string("Pending"));
		json_object_set_new(status, "observedGeneration",
		    json_integer(gen));
		notes.phase = "Pending";
	}
	ctl_set_condition(status, "Scheduled", "False", "QuotaExceeded", msg, gen);
	ctl_set_condition(status, "Started", "False", "Pending", "not started", gen);
	ctl_set_condition(status, "Complete", "False", "Pending", "not finished",
	    gen);
	/*
	 * Its turn among the namespace's retries, or its deadline if sooner;
	 * the refusal counted before the status says so, so that whoever
	 * reads that status finds it counted.
	 */
	retry = ctl_quota_retry_in(ctl, k8s_obj_namespace(cx), "execution",
	    QUOTA_RETRY_MS);
	if (created > 0 && (created + limit - now) * 1000 < retry)
		retry = (created + limit - now) * 1000;
	rc = ctl_write_status(ctl, cx, status, &notes);
	snprintf(key, sizeof(key), "%s/%s", k8s_obj_namespace(cx),
	    k8s_obj_name(cx));
	workqueue_add_after(ctl->queue, key, (uint64_t)retry);
	return rc;
}

/*
 * An execution no node can run must not wait forever: once it has waited
 * longer than its own timeoutSeconds (counted from when Scheduled turned
 * False, which a reason change does not move) it ends Failed/Unschedulable;
 * until then the key comes back at that deadline. status holds the
 * Unschedulable condition. 1 when it ended it (*rc holds the write's
 * result), 0 to go on.
 */
static int
unschedulable_too_long(struct controller *ctl, json_t *cx, json_t *status,
    const char *key, const char *why, int *rc)
{
	long long since = clock_parse_rfc3339(ctl_condition_field(status, "Scheduled",
	    "lastTransitionTime"));
	json_int_t limit = json_integer_value(json_object_get(
	    json_object_get(cx, "spec"), "timeoutSeconds"));
	long long left;
	char msg[700];

	if (since < 0)
		return 0;
	if (limit <= 0)
		limit = 30;
	left = since + limit - (long long)time(NULL);
	if (left > 0) {
		workqueue_add_after(ctl->queue, key, (uint64_t)left * 1000);
		return 0;
	}
	snprintf(msg, sizeof(msg), "no node could run it within %lld s: %s",
	    (long long)limit, why);
	(void)delete_children(ctl, k8s_obj_namespace(cx), k8s_obj_uid(cx),
		    named_pod(cx));
	*rc = ctl_finish(ctl, cx, status, "Failed", "Unschedulable", msg);
	return 1;
}

/*
 * Its node lost track of the program (why: containerd's Unknown, the
 * kubelet's ContainerStatusUnknown): the exit code is theirs, not the
 * program's, and no node agent records it (agent_learn_exit). It ends at
 * once. 1, *rc the write's result.
 */
static int
lost_track(struct controller *ctl, json_t *cx, json_t *status,
    const char *why, int *rc)
{
	char msg[300];

	snprintf(msg, sizeof(msg), "its node lost track of the program (%.64s): "
	    "whether it finished, and what it wrote, cannot be known; it is "
	    "not run again", why);
	/* Said first: a pod found gone next time would say PodDeleted. */
	*rc = ctl_finish(ctl, cx, status, "Failed", "ResultLost", msg);
	if (*rc == 0)
		(void)delete_children(ctl, k8s_obj_namespace(cx), k8s_obj_uid(cx),
		    named_pod(cx));
	return 1;
}

/*
 * The pod ended and no result came. The node agent records a result within
 * milliseconds of the exit, and retries for as long as the API server
 * refuses it for a passing reason; it never writes one for a program that
 * never started. So: a pod that ended without its container ever running
 * ends the execution at once (StartFailed: a volume the kubelet could not
 * set up, the pod's own deadline); one whose program ran gets
 * opts.result_grace_ms from its exit for the agent's result, and then ends
 * ResultLost, so that no execution waits for a result nobody will write.
 * One whose end its node lost track of ends ResultLost at once.
 * 1 when it ended it (*rc holds the write's result), 0 to go on.
 */
static int
pod_ended_unrecorded(struct controller *ctl, json_t *cx, json_t *pod,
    json_t *status, const char *key, int *rc)
{
	json_t *ps = json_object_get(pod, "status");
	json_t *state = json_object_get(json_array_get(json_object_get(ps,
	    "containerStatuses"), 0), "state");
	json_t *term = json_object_get(state, "terminated");
	const char *why = json_string_value(json_object_get(ps, "reason"));
	const char *what = json_string_value(json_object_get(ps, "message"));
	const char *tw = json_string_value(json_object_get(term, "reason"));
	char msg[1200];

	/*
	 * The kubelet cannot find the container (as when its node went
	 * down): it says no start time whether or not the program ran.
	 */
	if (tw && strcmp(tw, CX_TERM_STATUS_UNKNOWN) == 0)
		return lost_track(ctl, cx, status, tw, rc);
	/* No start time, or the zero one (a start that failed): never ran. */
	if (term == NULL || clock_parse_rfc3339(json_string_value(
	    json_object_get(term, "startedAt"))) <= 0) {
		const char *w = json_string_value(json_object_get(json_object_get(
		    state, "waiting"), "reason"));

		/* The pod's own reason, else the container's. */
		if (why == NULL && w == NULL && tw) {
			w = tw;
			what = json_string_value(json_object_get(term, "message"));
		}
		snprintf(msg, sizeof(msg), "the pod ended before the program "
		    "started: %s%s%.900s", why ? why : (w ? w : "no reason given"),
		    what ? ": " : "", what ? what : "");
		(void)delete_children(ctl, k8s_obj_namespace(cx), k8s_obj_uid(cx),
		    named_pod(cx));
		*rc = ctl_finish(ctl, cx, status, "Failed", "StartFailed", msg);
		return 1;
	}
	/* Started, and containerd lost the task (its shim died with it). */
	if (cx_end_untracked(tw))
		return lost_track(ctl, cx, status, tw, rc);
	{
		long long done = clock_parse_rfc3339(json_string_value(
		    json_object_get(term, "finishedAt")));
		long long left;
		char away[400];

		if (done < 0)
			done = (long long)time(NULL);
		/* Whole seconds on both sides: the kubelet's finishedAt has no more. */
		left = done * 1000 + ctl->opts.result_grace_ms -
		    (long long)time(NULL) * 1000;
		/* Not while its node's agent was away (agents.c). */
		left = ctl_agent_wait(ctl, json_string_value(json_object_get(
		    json_object_get(pod, "spec"), "nodeName")), left,
		    clock_mono_ms(), away, sizeof(away));
		if (left > 0) {
			workqueue_add_after(ctl->queue, key, (uint64_t)left);
			return 0;
		}
		if (away[0])
			snprintf(msg, sizeof(msg), "the program exited (code %lld) "
			    "but %s: its result cannot be recorded",
			    (long long)json_integer_value(json_object_get(term,
			    "exitCode")), away);
		else
			snprintf(msg, sizeof(msg), "the program exited (code %lld) "
			    "but no node agent recorded its result within %ld ms",
			    (long long)json_integer_value(json_object_get(term,
			    "exitCode")), ctl->opts.result_grace_ms);
		(void)delete_children(ctl, k8s_obj_namespace(cx), k8s_obj_uid(cx),
		    named_pod(cx));
		*rc = ctl_finish(ctl, cx, status, "Failed", "ResultLost", msg);
		return 1;
	}
}

static int follow_pod(struct controller *ctl, json_t *cx, json_t *pod,
    json_t *status, const char *key);

/*
 * Its own pod (never another's: a cold pod is its own by the forgery
 * guard's label, a holder once its claim landed) was on a lost node
 * (nodes.c): it ends NodeLost, said first, so that the pod's deletion
 * finds it ended and nothing runs it again. Bound there before its status
 * said so, it says so now. 1 when so (*rc holds the write's result), 0 to
 * go on.
 */
static int
node_lost_end(struct controller *ctl, json_t *cx, json_t *pod,
    json_t *status, int *rc)
{
	const char *puid;
	char msg[600];

	podspec_pod_execution(pod, &puid);
	if (!puid || strcmp(puid, k8s_obj_uid(cx)) != 0 ||
	    !ctl_node_lost(ctl, pod, msg, sizeof(msg)))
		return 0;
	json_object_set(status, "nodeName", json_object_get(
	    json_object_get(pod, "spec"), "nodeName"));
	*rc = ctl_finish(ctl, cx, status, "Failed", "NodeLost", msg);
	if (*rc == 0)
		(void)delete_children(ctl, k8s_obj_namespace(cx), k8s_obj_uid(cx),
		    k8s_obj_name(pod));
	return 1;
}

/*
 * The execution has had a pod (status.podName) and the cache shows none.
 * The cache may lag either way (a pod just made, a result just written),
 * so this reads both afresh and never makes a second pod: at most once.
 * Gone for real, the execution ends Failed/PodDeleted; the code may or
 * may not have run, and is not run again (controller/docs/pod.md).
 */
static int
pod_vanished(struct controller *ctl, json_t *cx, json_t *status,
    const char *key)
{
	const char *ns = k8s_obj_namespace(cx);
	char *podname = named_pod(cx) ? xstrdup(named_pod(cx)) :
	    podspec_pod_name(k8s_obj_uid(cx));
	struct k8s_error err;
	json_t *fresh = NULL, *pod = NULL, *fst;
	const char *ph;
	int rc;

	rc = k8s_get(ctl->client, &cx_resource, ns, k8s_obj_name(cx), &fresh,
	    &err);
	if (rc == K8S_ENOTFOUND || (rc == 0 && strcmp(k8s_obj_uid(fresh) ?
	    k8s_obj_uid(fresh) : "", k8s_obj_uid(cx)) != 0)) {
		rc = 0;		/* gone, or another of the same name */
		goto out;
	}
	if (rc != 0)
		goto out;
	fst = json_object_get(fresh, "status");
	ph = json_string_value(json_object_get(fst, "phase"));
	if (cx_phase_terminal(ph))
		goto out;	/* ended; the cache has not seen it yet */
	if (strcmp(json_string_value(json_object_get(fst, "podName")) ?
	    json_string_value(json_object_get(fst, "podName")) : "",
	    podname) != 0)
		goto out;	/* given back to run cold, or named anew: its event comes */
	rc = k8s_get(ctl->client, &k8s_res_pods, ns, podname, &pod, &err);
	if (rc == 0) {
		/* There after all (the pod cache lags): follow it. */
		json_t *st = json_deep_copy(fst ? fst : status);

		if (st == NULL)
			st = json_object();
		if (!node_lost_end(ctl, fresh, pod, st, &rc))
			rc = follow_pod(ctl, fresh, pod, st, key);
		json_decref(st);
		goto out;
	}
	if (rc != K8S_ENOTFOUND)
		goto out;
	{
		json_t *st = json_deep_copy(fst ? fst : status);

		if (st == NULL)
			st = json_object();
		(void)delete_children(ctl, ns, k8s_obj_uid(cx), podname);
		rc = ctl_finish(ctl, fresh, st, "Failed", "PodDeleted",
		    ph && strcmp(ph, "Running") == 0 ?
		    "the execution's pod was deleted while it ran; it is not run again" :
		    "the execution's pod was deleted before its result was recorded; "
		    "it is not run again");
		json_decref(st);
	}
out:
	json_decref(fresh);
	json_decref(pod);
	free(podname);
	return rc;
}

/*
 * The node agent lets an execution's sandbox have gVisor's network stack
 * only when the execution says so (status.egress, which only the
 * controller may write: the chart's status guard), not on its pod's word
 * alone (node-agent/trust.c), and only for the pod this controller made:
 * by its uid, so that a pod made later under the same name gets nothing.
 * Written with podName, in the same patch; never for a pod found rather
 * than made (follow_pod): that one runs without. A warm claim of a holder
 * of a profile with egress writes it too (pools.c), for the holder the
 * pool made, under the pool's policy.
 */
void
ctl_grant_egress(json_t *status, const char *pod_uid, int hosts)
{
	json_object_set_new(status, "egress", json_pack("{s:b, s:s}",
	    "granted", 1, "podUID", pod_uid));
	/* Host entries: the proxy's records are counted (egressfollow.c). */
	if (hosts)
		json_object_set_new(json_object_get(status, "egress"),
		    "proxied", json_true());
}

/* Follow the pod into the status: Scheduled, Started, Running. */
static int
follow_pod(struct controller *ctl, json_t *cx, json_t *pod, json_t *status,
    const char *key)
{
	int rc;
	struct notes nn = { 0 }, *notes = &nn;
	json_int_t gen = json_integer_value(json_object_get(json_object_get(cx,
	    "metadata"), "generation"));
	json_t *ps = json_object_get(pod, "status"), *c;
	const char *node = json_string_value(json_object_get(json_object_get(pod,
	    "spec"), "nodeName"));
	const char *pphase = json_string_value(json_object_get(ps, "phase"));
	json_t *cs = json_array_get(json_object_get(ps, "containerStatuses"), 0);
	const char *waiting = json_string_value(json_object_get(json_object_get(
	    json_object_get(cs, "state"), "waiting"), "reason"));
	size_t i;

	if (!json_object_get(status, "podName")) {
		char *name = podspec_pod_name(k8s_obj_uid(cx));
		const char *cached = json_string_value(json_object_get(status,
		    "codeSha256"));
		char sha[65];

		if (cached == NULL)	/* the cache kept it (trim_cx) */
			cached = json_string_value(json_object_get(cx,
			    CTL_CACHED_SHA));
		if (cached)
			snprintf(sha, sizeof(sha), "%s", cached);
		else
			podspec_code_sha256(cx, sha);
		json_object_set_new(status, "podName", json_string(name));
		json_object_set_new(status, "codeSha256", json_string(sha));
		free(name);
	}
	init_pending(cx, status, notes);
	json_array_foreach(json_object_get(ps, "conditions"), i, c) {
		const char *t = json_string_value(json_object_get(c, "type"));
		const char *s = json_string_value(json_object_get(c, "status"));
		const char *r = json_string_value(json_object_get(c, "reason"));
		const char *m = json_string_value(json_object_get(c, "message"));

		if (t && s && strcmp(t, "PodScheduled") == 0 &&
		    strcmp(s, "False") == 0 && r && strcmp(r, "Unschedulable") == 0) {
			if (strcmp(ctl_condition_field(json_object_get(cx, "status"),
			    "Scheduled", "reason"), "Unschedulable") != 0)
				ctl_note(notes, "Warning", "Unschedulable",
				    m ? m : "no node can run it");
			ctl_set_condition(status, "Scheduled", "False",
			    "Unschedulable", m ? m : "", gen);
			ctl_pool_lend(ctl, cx, pod, m);	/* holders are lent */
			if (node == NULL && unschedulable_too_long(ctl, cx,
			    status, key, m ? m : "no node can run it", &rc))
				return rc;
		}
	}
	if (waiting && (strcmp(waiting, "ErrImagePull") == 0 ||
	    strcmp(waiting, "ImagePullBackOff") == 0 ||
	    strcmp(waiting, "InvalidImageName") == 0)) {
		char msg[512];
		const char *m = json_string_value(json_object_get(json_object_get(
		    json_object_get(cs, "state"), "waiting"), "message"));

		snprintf(msg, sizeof(msg), "the runner image cannot be pulled: %s",
		    m ? m : waiting);
		(void)delete_children(ctl, k8s_obj_namespace(cx), k8s_obj_uid(cx),
		    named_pod(cx));
		return ctl_finish(ctl, cx, status, "Failed", "ImagePullFailed", msg);
	}
	if (node) {
		char msg[300];

		snprintf(msg, sizeof(msg), "scheduled to node %s", node);
		json_object_set_new(status, "nodeName", json_string(node));
		ctl_set_condition(status, "Scheduled", "True", "Scheduled", msg, gen);
	}
	if (pphase && (strcmp(pphase, "Succeeded") == 0 ||
	    strcmp(pphase, "Failed") == 0) && pod_ended_unrecorded(ctl, cx, pod,
	    status, key, &rc))
		return rc;
	if (ctl_start_deadline(ctl, cx, pod, status, key, &rc))
		return rc;
	if (pphase && strcmp(pphase, "Running") == 0) {
		const char *started = json_string_value(json_object_get(
		    json_object_get(json_object_get(cs, "state"), "running"),
		    "startedAt"));

		if (!json_object_get(status, "startTime"))
			json_object_set_new(status, "startTime", json_string(
			    started ? started : json_string_value(
			    json_object_get(ps, "startTime"))));
		if (strcmp(json_string_value(json_object_get(status, "phase")),
		    "Running") != 0)
			notes->phase = "Running";
		json_object_set_new(status, "phase", json_string("Running"));
		ctl_set_condition(status, "Started", "True", "Started",
		    "the program is running", gen);
	}
	return ctl_write_status(ctl, cx, status, notes);
}

/*
 * Create obj; one of that name already there is fine only if it is this
 * execution's own (a retry after a lost answer), and, with ADOPT_SAME_SPEC,
 * has obj's spec exactly (a NetworkPolicy: one made ahead by whoever knew
 * the uid, owner reference and all, must not stand in for ours); with
 * ADOPT_NEVER, not even then (the pod of an execution with egress: one
 * made ahead could be anyone's, with any image, and would get a network
 * stack). Anyone else's, made before us under the name we use, is
 * refused: K8S_EEXIST. made, unless NULL: the object's uid as created
 * (caller frees).
 */
enum adopt { ADOPT_OWNED, ADOPT_SAME_SPEC, ADOPT_NEVER };
static int
create_owned(struct controller *ctl, const struct k8s_resource *res,
    const char *ns, json_t *obj, const char *uid, enum adopt adopt,
    char **made, struct k8s_error *err)
{
	json_t *there = NULL, *out = NULL;
	int rc = k8s_create(ctl->client, res, ns, obj, made ? &out : NULL, err);

	if (made)
		*made = rc == 0 && k8s_obj_uid(out) ? xstrdup(k8s_obj_uid(out)) :
		    NULL;
	json_decref(out);
	if (rc != K8S_EEXIST)
		return rc;
	if (adopt == ADOPT_NEVER)
		return k8s_error_set(err, K8S_EEXIST, 409, "AlreadyExists",
		    "%s %s exists: one made before this controller's create "
		    "is never taken for an execution with egress", res->plural,
		    k8s_obj_name(obj));
	if ((rc = k8s_get(ctl->client, res, ns, k8s_obj_name(obj), &there,
	    err)) != 0)
		return rc;
	rc = ctl_owned_by(there, "CodeExecution", uid) && (adopt != ADOPT_SAME_SPEC ||
	    json_equal(json_object_get(there, "spec"), json_object_get(obj,
	    "spec"))) ? 0 : k8s_error_set(err, K8S_EEXIST, 409,
	    "AlreadyExists", "%s %s exists and is not this execution's",
	    res->plural, k8s_obj_name(obj));
	json_decref(there);
	return rc;
}

/*
 * An execution with egress gets its start gate (egress.c): 1 when it has
 * it. None ready: it waits, looking again every GATE_RETRY_MS, within its
 * own timeout (left ms), then ends StartFailed saying why; one that
 * cannot be given (its pass through the proxy cannot be made) ends so at
 * once: 0, or the write's error.
 */
#define GATE_RETRY_MS	2000
static int
give_gate(struct controller *ctl, json_t *cx, json_t *status,
    struct podspec_result *r, long long left)
{
	struct podspec_gate g = { .ns = ctl->opts.agent_lease_ns,
	    .key = ctl->opts.egress_key, .keylen = ctl->opts.egress_key_len,
	    .now = (long long)time(NULL) };
	struct k8s_error err;
	char msg[512], *key;

	g.n = ctl_gate_addrs(ctl, g.addrs, PODSPEC_GATE_MAX);
	if (g.n > 0 && podspec_egress_gate(r, &g, &err) == 0)
		return 1;
	if (g.n > 0) {
		snprintf(msg, sizeof(msg), "its egress cannot be given: %.300s; its "
		    "program never ran (docs/network.md)", err.message);
		return ctl_finish(ctl, cx, status, "Failed", "StartFailed", msg);
	}
	if (left > 0) {
		log_debug("no egress start gate ready: waiting", "execution=%s/%s",
		    k8s_obj_namespace(cx), k8s_obj_name(cx));
		key = xasprintf("%s/%s", k8s_obj_namespace(cx), k8s_obj_name(cx));
		workqueue_add_after(ctl->queue, key, (uint64_t)(left <
		    GATE_RETRY_MS ? left : GATE_RETRY_MS));
		free(key);
		return 0;
	}
	snprintf(msg, sizeof(msg), "no egress start gate pod (label %s) was "
	    "ready in namespace %s within its timeout; its program never ran "
	    "(docs/network.md)", CTL_GATE_SELECTOR, g.ns ? g.ns : "(none)");
	return ctl_finish(ctl, cx, status, "Failed", "StartFailed", msg);
}

/*
 * Make the execution's pod. Never from a cache that lags: it must never
 * make a pod for an execution that already had one (at most once). So from
 * the execution read afresh; or, where the cache kept its code (a small
 * one not started: trim_cx), from the cache, whose lag the Cold write at
 * its resourceVersion, made before the pod, would be refused for. The
 * output budget the pod carries is worked out from the object as stored,
 * managedFields and all (the cache kept that size).
 */
static int
create_pod(struct controller *ctl, json_t *cached)
{
	struct notes notes = { 0 };
	struct podspec_result r;
	struct k8s_error err;
	const char *ns = k8s_obj_namespace(cached), *uid = k8s_obj_uid(cached);
	json_t *cx = NULL, *status, *fst;
	char msg[1200], *made = NULL;
	long long created = clock_parse_rfc3339(json_string_value(json_object_get(
	    json_object_get(cached, "metadata"), "creationTimestamp")));
	long long wait, left = created > 0 ? cx_timeout_ms(cached) -
	    ((long long)time(NULL) - created) * 1000 : QUOTA_RETRY_MS;
	int rc, waiting = strcmp(ctl_condition_field(json_object_get(cached,
	    "status"), "Scheduled", "reason"), "QuotaExceeded") == 0;
	size_t stored;

	/*
	 * Waiting on the quota: its turn in the namespace, before any
	 * request; a turn of its own when another had this one, and never
	 * later than its own deadline, when it ends (below) untried.
	 */
	if (waiting && left > 0 && (wait = ctl_quota_gate(ctl, ns)) > 0) {
		char *key = xasprintf("%s/%s", ns, k8s_obj_name(cached));

		wait = ctl_quota_retry_in(ctl, ns, NULL, wait);
		workqueue_add_after(ctl->queue, key, (uint64_t)(wait < left ?
		    wait : left));
		free(key);
		return 0;
	}
	if ((stored = (size_t)json_integer_value(json_object_get(cached,
	    CTL_CACHED_CODE))) > 0 && json_object_get(json_object_get(cached,
	    "status"), "startMode") == NULL) {
		cx = json_deep_copy(cached);
		json_object_del(cx, CTL_CACHED_CODE);
		json_object_del(cx, CTL_CACHED_SHA);
	} else {
		stored = 0;
		rc = k8s_get(ctl->client, &cx_resource, ns, k8s_obj_name(cached),
		    &cx, &err);
		if (rc == K8S_ENOTFOUND)
			return 0;
		if (rc != 0)
			return rc;
	}
	fst = json_object_get(cx, "status");
	if (strcmp(k8s_obj_uid(cx) ? k8s_obj_uid(cx) : "", uid) != 0 ||
	    json_object_get(fst, "podName") ||
	    cx_phase_terminal(json_string_value(json_object_get(fst, "phase")))) {
		/* Another of the name, or the cache lags: its event comes. */
		json_decref(cx);
		return 0;
	}
	status = fst ? json_deep_copy(fst) : json_object();
	if (waiting && left <= 0) {
		/* Its timeout came while it waited: it ends, never tried again. */
		const char *why = ctl_condition_field(status, "Scheduled",
		    "message"), *e = strstr(why, " timeout): ");

		rc = quota_wait(ctl, cx, status, e ? e + 11 : why);
		goto out;
	}
	if ((rc = podspec_build_sized(ctl->cfg, cx, stored, &r, &err)) != 0) {
		rc = ctl_finish(ctl, cx, status, "Failed", "Rejected", err.message);
		if (rc != 0 && rc != K8S_ECONFLICT &&
		    jsonsize_value(cx) > CX_OBJECT_BUDGET)
			rc = ctl_too_large_to_end(ctl, cx);
		goto out;
	}
	if (r.netpol && (rc = give_gate(ctl, cx, status, &r, left)) != 1) {
		podspec_result_free(&r);
		goto out;
	}
	if (json_object_get(status, "startMode") == NULL) {
		/*
		 * Cold, said before the pod is made, at the resourceVersion
		 * read: of a warm claim (pools.c) and a pod of its own, made
		 * by two controllers at once, only the first to say so goes
		 * on, so the program runs in one of them, never both.
		 */
		json_object_set_new(status, "startMode", json_string("Cold"));
		rc = ctl_write_status(ctl, cx, status, NULL);
		/*
		 * No error, and cx (which follows a write that lands) still
		 * without it: the execution is gone (a 404), which the cache
		 * may not show yet. No pod for it.
		 */
		if (rc == 0 && json_object_get(json_object_get(cx, "status"),
		    "startMode") == NULL)
			rc = K8S_ENOTFOUND;
		if (rc != 0) {
			podspec_result_free(&r);
			if (rc == K8S_ENOTFOUND)
				rc = 0;
			goto out;
		}
	}
	if (r.configmap && (rc = create_owned(ctl, &k8s_res_configmaps, ns,
	    r.configmap, uid, ADOPT_OWNED, NULL, &err)) != 0)
		goto fail;
	/* Its egress, before its pod: the pod never runs without it. */
	if (r.netpol && (rc = create_owned(ctl, ctl_guard_res[1], ns,
	    r.netpol, uid, ADOPT_SAME_SPEC, NULL, &err)) != 0)
		goto fail;
	ctl_avoid_lost_nodes(ctl, r.pod);
	if ((rc = create_owned(ctl, &k8s_res_pods, ns, r.pod, uid, r.netpol ?
	    ADOPT_NEVER : ADOPT_OWNED, r.netpol ? &made : NULL, &err)) != 0)
		goto fail;
	json_object_set_new(status, "podName", json_string(k8s_obj_name(r.pod)));
	json_object_set_new(status, "codeSha256", json_string(r.code_sha256));
	if (r.netpol && made)
		ctl_grant_egress(status, made, r.hosts);
	free(made);
	init_pending(cx, status, &notes);
	podspec_result_free(&r);
	rc = ctl_write_status(ctl, cx, status, &notes);
	goto out;
fail:
	if (ctl_quota_full(&err))
		log_debug("no room in the quota", "execution=%s/%s", ns,
		    k8s_obj_name(cx));
	else
		log_warn("cannot create pod", "execution=%s/%s status=%ld "
		    "error=\"%s\"", ns, k8s_obj_name(cx), err.http_status,
		    err.message);
	podspec_result_free(&r);
	if (rc == K8S_EEXIST || ctl_create_refused(&err)) {
		snprintf(msg, sizeof(msg), "the API server refused its pod: %.1000s",
		    err.message);
		rc = ctl_finish(ctl, cx, status, "Failed", "Rejected", msg);
	} else if (ctl_quota_full(&err)) {
		rc = quota_wait(ctl, cx, status, err.message);
	}
out:
	json_decref(status);
	json_decref(cx);
	return rc;
}

int
controller_reconcile(struct controller *ctl, const char *key)
{
	const char *slash = strchr(key, '/');
	char *ns, *podname;
	const char *name, *phase;
	json_t *cx, *status, *pod;
	long long t0 = clock_mono_ms();
	int rc, warm, claimed_here = 0, mine = 0;

	if (strcmp(key, CTL_NODES_KEY) == 0)
		return ctl_nodes_check(ctl);
	if (slash == NULL)
		return 0;
	if (strncmp(key, "pool:", 5) == 0) {
		ns = xstrndup(key + 5, (size_t)(slash - key - 5));
		rc = ctl_pool_reconcile(ctl, ns, slash + 1);
		free(ns);
		return rc;
	}
	if (strncmp(key, "session:", 8) == 0) {
		ns = xstrndup(key + 8, (size_t)(slash - key - 8));
		rc = ctl_session_reconcile(ctl, ns, slash + 1);
		free(ns);
		return rc;
	}
	ns = xstrndup(key, (size_t)(slash - key));
	name = slash + 1;
	if (name[0] == '\0') {
		/* "ns/": a guardrail there changed or went away. */
		rc = ctl_ensure_guardrails(ctl, ns);
		free(ns);
		return rc == K8S_ECANCELED ? 0 : rc;
	}
	cx = informer_get(ctl->cx_inf, ns, name);
	if (cx == NULL) {
		rc = sweep(ctl, ns, name, NULL);
		free(ns);
		return rc;
	}
	status = json_deep_copy(json_object_get(cx, "status"));
	if (status == NULL)
		status = json_object();
	phase = json_string_value(json_object_get(status, "phase"));
	podname = named_pod(cx) ? xstrdup(named_pod(cx)) :
	    podspec_pod_name(k8s_obj_uid(cx));
	pod = informer_get(ctl->pod_inf, ns, podname);
	warm = strcmp(json_string_value(json_object_get(status, "startMode")) ?
	    json_string_value(json_object_get(status, "startMode")) : "",
	    "Warm") == 0;
	if (pod) {
		const char *puid;

		/*
		 * Its own pod: a cold one always is (the forgery guard), a
		 * holder once this execution's claim on it landed. Another's
		 * (a holder whose claim another execution won) is never
		 * deleted from here.
		 */
		podspec_pod_execution(pod, &puid);
		mine = puid && strcmp(puid, k8s_obj_uid(cx)) == 0;
		claimed_here = warm && mine;
	}

	if (json_object_get(json_object_get(cx, "metadata"), "deletionTimestamp"))
		rc = 0;
	else if (ended_here(ctl, k8s_obj_uid(cx), cx_phase_terminal(phase)))
		rc = 0;		/* our cache has not seen our own write yet */
	else if (cx_phase_terminal(phase)) {
		int audited = json_is_true(json_object_get(status, "audited"));

		/*
		 * A finished execution keeps no pod: the node agent deletes
		 * its own once the result is in, and this catches one whose
		 * delete failed when the controller ended it (or the agent's).
		 */
		rc = pod && mine ? delete_children(ctl, ns, k8s_obj_uid(cx),
		    podname) : 0;
		/*
		 * Its egress policy, at its first visit since it ended: one
		 * granted, or any of a profile with egress (the policy is made
		 * before the pod, which may then have been refused).
		 */
		if (rc == 0 && !audited && (json_is_true(json_object_get(
		    json_object_get(status, "egress"), "granted")) ||
		    profile_egress(ctl, cx)))
			rc = delete_egress(ctl, ns, k8s_obj_uid(cx));
		/* Its audit record, once (audit.c). */
		if (rc == 0)
			rc = ctl_audit_finished(ctl, cx);
		/* Its proxy's decisions counted, once they are in. */
		if (rc == 0)
			rc = ctl_egress_count(ctl, cx, key);
		if (rc == 0)
			rc = ttl(ctl, cx, key);
		/*
		 * A session's step, at its first visit since it ended (its
		 * audit record not written before): the next one in its
		 * queue may start. Not at every resync: the session's visit
		 * reads all its steps.
		 */
		if (!audited && json_is_string(json_object_get(json_object_get(cx,
		    "spec"), "session"))) {
			char *skey = ctl_session_key(ns, json_string_value(
			    json_object_get(json_object_get(cx, "spec"), "session")));

			workqueue_add(ctl->queue, skey);
			free(skey);
		}
	}
	else if (json_is_true(json_object_get(json_object_get(cx, "spec"), "cancel"))) {
		rc = delete_children(ctl, ns, k8s_obj_uid(cx), mine ?
		    named_pod(cx) : NULL);
		if (rc == 0)
			rc = ctl_session_interrupt(ctl, cx, status);
		if (rc == 0)
			rc = ctl_finish(ctl, cx, status, "Cancelled", "Cancelled",
			    "cancelled by spec.cancel");
	} else if ((rc = sweep(ctl, ns, name, k8s_obj_uid(cx))) != 0) {
		;
	} else if (ctl_session_step(ctl, cx, status, &rc)) {
		;
	} else if (pod && node_lost_end(ctl, cx, pod, status, &rc)) {
		;
	} else if (pod && warm && !claimed_here) {
		rc = ctl_warm_resume(ctl, cx, pod);
	} else if (pod == NULL && (json_object_get(status, "podName") ||
	    (phase && strcmp(phase, "Running") == 0))) {
		/*
		 * It had a pod, and the cache has none: a new pod might run
		 * the tenant's code twice. At most once.
		 */
		rc = pod_vanished(ctl, cx, status, key);
	} else if (pod == NULL) {
		/*
		 * Guardrails before its pod (only then: a pod that runs is
		 * followed whatever they do). A fallback (startMode Cold) is
		 * not tried warm again.
		 */
		rc = ctl_ensure_guardrails(ctl, ns);
		if (rc == K8S_ECANCELED)
			rc = 0;	/* a terminating namespace: leave it be */
		else if (rc == CTL_EUNCOUNTED)
			rc = quota_wait(ctl, cx, status, "the namespace's pods quota "
			    "(airlock-executions) is not counted yet by the quota "
			    "controller");
		else if (rc == 0 && (json_object_get(status, "startMode") ||
		    !ctl_warm_start(ctl, cx, t0, &rc)))
			rc = create_pod(ctl, cx);
	}
	else
		rc = follow_pod(ctl, cx, pod, status, key);
	json_decref(pod);
	json_decref(status);
	json_decref(cx);
	free(podname);
	free(ns);
	return rc;
}
