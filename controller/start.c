/*
 * start.c - the start deadline: the controller's own bound on a pod whose
 * program never starts. The kubelet's activeDeadlineSeconds is no bound
 * there: a node whose containerd restarted under a pod being made may
 * never move it past Pending, and a kubelet that is down enforces nothing.
 * The decision is a pure function of the cached execution and pod and the
 * time (ctl_start_overdue), so that every branch is unit-tested; the
 * reconcile (reconcile.c follow_pod) acts on it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "controller_priv.h"
#include "cx.h"
#include "log.h"
#include "podspec.h"

/* A field of the pod's condition of this type, or NULL. */
static const char *
pod_cond(json_t *pod, const char *type, const char *field)
{
	json_t *c = ctl_find_condition(json_object_get(pod, "status"), type);

	return json_string_value(json_object_get(c, field));
}

/* Whether the cold pod's program has started (or ended): no bound then. */
static int
started(json_t *pod)
{
	json_t *ps = json_object_get(pod, "status");
	json_t *state = json_object_get(json_array_get(json_object_get(ps,
	    "containerStatuses"), 0), "state");
	const char *ph = json_string_value(json_object_get(ps, "phase"));

	return json_object_get(state, "running") != NULL ||
	    json_object_get(state, "terminated") != NULL ||
	    (ph && strcmp(ph, "Pending") != 0);
}

/*
 * The best reason known why the cold pod's program has not started, into
 * why: the container's waiting reason and message (the kubelet's or
 * containerd's; the Events' text is not cached), else that its node did
 * not start it, else that no node did, with the pod's PodScheduled
 * condition when it has one.
 */
static void
why_not_started(json_t *pod, char *why, size_t len)
{
	json_t *ps = json_object_get(pod, "status");
	json_t *w = json_object_get(json_object_get(json_array_get(
	    json_object_get(ps, "containerStatuses"), 0), "state"), "waiting");
	const char *wr = json_string_value(json_object_get(w, "reason"));
	const char *wm = json_string_value(json_object_get(w, "message"));
	const char *node = json_string_value(json_object_get(json_object_get(pod,
	    "spec"), "nodeName"));
	const char *sr = pod_cond(pod, "PodScheduled", "reason");
	const char *sm = pod_cond(pod, "PodScheduled", "message");
	const char *ss = pod_cond(pod, "PodScheduled", "status");

	if (wr && *wr)
		snprintf(why, len, "%.64s%s%.400s on node %.253s", wr,
		    wm && *wm ? ": " : "", wm && *wm ? wm : "",
		    node ? node : "(none)");
	else if (node && *node)
		snprintf(why, len, "node %.253s did not start it", node);
	else if (ss)
		snprintf(why, len, "no node started it (PodScheduled %.16s%s%.64s%s"
		    "%.400s)", ss, sr ? ": " : "", sr ? sr : "",
		    sm && *sm ? ": " : "", sm && *sm ? sm : "");
	else
		snprintf(why, len, "no node started it");
}

/*
 * A warm claim's bound, in wall-clock ms (see below): when Started turned
 * True plus the start deadline, its timeout and the result's grace; -1
 * when it has not started.
 */
static long long
warm_bound_ms(json_t *cx, const struct controller_opts *o)
{
	json_t *st = json_object_get(cx, "status");
	long long from;

	if (strcmp(ctl_condition_field(st, "Started", "status"), "True") != 0)
		return -1;
	from = clock_parse_rfc3339(ctl_condition_field(st, "Started",
	    "lastTransitionTime"));
	if (from <= 0)
		return -1;
	return from * 1000 + o->start_deadline_ms + cx_timeout_ms(cx) +
	    o->result_grace_ms;
}

long long
ctl_start_overdue(json_t *cx, json_t *pod, long long now_ms,
    const struct controller_opts *o, const char **reason, char *msg,
    size_t len)
{
	json_t *st = json_object_get(cx, "status");
	const char *mode = json_string_value(json_object_get(st, "startMode"));
	const char *phase = json_string_value(json_object_get(st, "phase"));
	long long from, bound, left;
	char why[1000];

	if (cx_phase_terminal(phase))
		return -1;
	if (mode && strcmp(mode, "Warm") == 0) {
		/*
		 * A warm claim: the program is exec'd by the node agent, which
		 * reports its start only with its result. So the bound is the
		 * claim (Started turned True as the execution named its
		 * holder, just before the claim's patch) plus the start
		 * deadline, the agent's own timeout and the result's grace:
		 * past that no working agent can still be running it, and
		 * whether it ran cannot be known.
		 */
		if ((bound = warm_bound_ms(cx, o)) < 0)
			return -1;
		from = clock_parse_rfc3339(ctl_condition_field(st, "Started",
		    "lastTransitionTime"));
		left = bound - now_ms;
		if (left > 0)
			return left;
		*reason = "ResultLost";
		snprintf(msg, len, "no result came within %lld s of its warm "
		    "claim (the start deadline %ld s, its timeout and %ld s "
		    "for the result): its node agent never reported, whether "
		    "the program ran cannot be known; it is not run again",
		    (now_ms / 1000 - from), o->start_deadline_ms / 1000,
		    o->result_grace_ms / 1000);
		return 0;
	}
	if (pod == NULL || started(pod))
		return -1;
	if (phase && strcmp(phase, "Running") == 0)
		return -1;
	/* Unschedulable ends it at its own timeout (unschedulable_too_long). */
	{
		const char *sr = pod_cond(pod, "PodScheduled", "reason");
		const char *ss = pod_cond(pod, "PodScheduled", "status");

		if (json_object_get(json_object_get(pod, "spec"), "nodeName") ==
		    NULL && ss && strcmp(ss, "False") == 0 && sr &&
		    strcmp(sr, "Unschedulable") == 0)
			return -1;
	}
	from = clock_parse_rfc3339(json_string_value(json_object_get(
	    json_object_get(pod, "metadata"), "creationTimestamp")));
	if (from <= 0)
		return -1;
	left = from * 1000 + o->start_deadline_ms - now_ms;
	if (left > 0)
		return left;
	why_not_started(pod, why, sizeof(why));
	*reason = "StartFailed";
	snprintf(msg, len, "its program did not start within %ld s of its pod's "
	    "creation: %s; the pod is deleted, it is not run again",
	    o->start_deadline_ms / 1000, why);
	return 0;
}

/*
 * The end is said before the pod goes, so that the pod's deletion finds it
 * ended (else PodDeleted); the pod deleted is the one seen (its uid),
 * never another of the name.
 */
int
ctl_start_deadline(struct controller *ctl, json_t *cx, json_t *pod,
    json_t *status, const char *key, int *rc)
{
	struct k8s_delete_opts now = { .grace_period_set = 1,
	    .grace_period_seconds = 0, .propagation_policy = "Background",
	    .precondition_uid = k8s_obj_uid(pod) };
	struct k8s_error err;
	const char *reason = NULL;
	char msg[1400], *cm;
	long long left, now_ms;
	json_t *fresh = NULL;

	now_ms = clock_wall_ms();
	left = ctl_start_overdue(cx, pod, now_ms, &ctl->opts, &reason, msg,
	    sizeof(msg));
	if (left == 0) {
		/*
		 * Passed by the cache: the pod read afresh decides, so that
		 * a program that started a moment ago (its event not in yet)
		 * is never ended as not started. Gone: pod_vanished's.
		 */
		*rc = k8s_get(ctl->client, &k8s_res_pods, k8s_obj_namespace(cx),
		    k8s_obj_name(pod), &fresh, &err);
		if (*rc == K8S_ENOTFOUND) {
			*rc = 0;
			return 0;
		}
		if (*rc != 0)
			return 1;	/* retried with backoff */
		if (strcmp(k8s_obj_uid(fresh) ? k8s_obj_uid(fresh) : "",
		    k8s_obj_uid(pod) ? k8s_obj_uid(pod) : "") != 0)
			left = -1;	/* another incarnation: its event comes */
		else
			left = ctl_start_overdue(cx, fresh, now_ms, &ctl->opts,
			    &reason, msg, sizeof(msg));
		json_decref(fresh);
	}
	if (left == 0 && reason && strcmp(reason, "ResultLost") == 0) {
		/* A warm run's result: not while its node's agent was away. */
		char away[400];

		/* Spent: how long ago its bound passed (fixed: the cap is too). */
		left = ctl_agent_wait(ctl, json_string_value(json_object_get(
		    json_object_get(cx, "status"), "nodeName")),
		    warm_bound_ms(cx, &ctl->opts) - now_ms, clock_mono_ms(),
		    away, sizeof(away));
		if (left <= 0)
			left = 0;
		if (left == 0 && away[0])
			snprintf(msg, sizeof(msg), "no result came from its warm "
			    "claim: %s; whether the program ran cannot be known; "
			    "it is not run again", away);
	}
	if (left < 0)
		return 0;
	if (left > 0) {
		workqueue_add_after(ctl->queue, key, (uint64_t)left);
		return 0;
	}
	log_info("start deadline passed", "execution=%s pod=%s reason=%s", key,
	    k8s_obj_name(pod), reason);
	*rc = ctl_finish(ctl, cx, status, "Failed", reason, msg);
	if (*rc != 0)
		return 1;
	/* A 409 is the uid precondition: another pod of the name, not ours. */
	if (k8s_delete(ctl->client, &k8s_res_pods, k8s_obj_namespace(cx),
	    k8s_obj_name(pod), &now, NULL, &err) != 0 && err.http_status != 404 &&
	    err.http_status != 409)
		log_warn("cannot delete pod past its start deadline", "pod=%s/%s "
		    "error=\"%s\"", k8s_obj_namespace(cx), k8s_obj_name(pod),
		    err.message);
	cm = podspec_pod_name(k8s_obj_uid(cx));
	/* Owned by the execution: the garbage collector takes it otherwise. */
	if (k8s_delete(ctl->client, &k8s_res_configmaps, k8s_obj_namespace(cx),
	    cm, NULL, NULL, &err) != 0 && err.http_status != 404)
		log_debug("cannot delete configmap", "configmap=%s/%s error=\"%s\"",
		    k8s_obj_namespace(cx), cm, err.message);
	free(cm);
	return 1;
}
