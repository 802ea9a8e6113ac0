/*
 * sessions.c - a session's idle and lifetime ends, held by the node agent
 * (docs/sessions.md, "Idle timeout and lifetime"): with the controller
 * down, a session on this node still ends when its clock says so.
 *
 * The agent cannot read sessions; their pods say what it needs
 * (session_pod_clock): the idle timeout in an annotation, the lifetime's
 * end from the pod's start and activeDeadlineSeconds. Activity is what
 * this agent saw: a new step put on the pod, a step running. An agent
 * that starts counts from its start, so a restart can only make an idle
 * end later (by at most the idle timeout), never sooner.
 *
 * Due, the end is written as the controller writes it (phase Ended,
 * reason, message, endTime, Ready False), by a status patch that tests
 * the session's uid and that it is Ready: an end someone else wrote first
 * stays theirs. Then the pod is deleted (a step running at the lifetime's
 * end is killed first and recorded Cancelled, as the controller would).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent_priv.h"
#include "clock.h"
#include "log.h"
#include "pool.h"
#include "session.h"
#include "xmalloc.h"

struct agent_session {
	struct agent_session	*next;
	char			*uid, *ns, *pod;	/* the pod */
	char			*name, *suid;		/* its session */
	char			*step;		/* the last step seen on it */
	char			*due_step;	/* e->step when its idle end was due */
	long long		 restarts;	/* the count last written */
	long long		 active_ms;	/* the last activity seen */
	const char		*reason;	/* its end, once due */
	int			 busy;		/* a worker has it */
	int			 ended;		/* its end is written */
	long long		 ended_ms;
	long long		 retry_ms;
	int			 seen;
};

static struct agent_session *
find(struct agent *a, const char *uid)
{
	struct agent_session *e;

	for (e = a->sessions; e; e = e->next)
		if (strcmp(e->uid, uid) == 0)
			return e;
	return NULL;
}

static void
session_free(struct agent_session *e)
{
	free(e->uid);
	free(e->ns);
	free(e->pod);
	free(e->name);
	free(e->suid);
	free(e->step);
	free(e->due_step);
	free(e);
}

void
agent_sessions_free(struct agent *a)
{
	struct agent_session *e;

	while ((e = a->sessions) != NULL) {
		a->sessions = e->next;
		session_free(e);
	}
	a->nsessions = 0;
}

/* Its end to a worker (agent_session_end), once at a time (lock held). */
static void
queue_end(struct agent *a, struct agent_session *e)
{
	char key[300];

	e->busy = 1;
	snprintf(key, sizeof(key), "session/%s", e->uid);
	workqueue_add(a->q, key);
}

/* pod's clock is read, and acted on if due (lock held). */
static void
look(struct agent *a, json_t *pod, const struct session_clock *c,
    long long now, long long wall_s)
{
	struct agent_session *e = find(a, k8s_obj_uid(pod));
	struct run *r = agent_find_run(a, k8s_obj_uid(pod));
	int busy = r && r->step && !r->recorded;
	const char *cx, *cx_uid = NULL, *due;
	char msg[400];

	if (e == NULL) {
		if (a->nsessions >= AGENT_SESSIONS_MAX)
			return;		/* the controller's clock alone */
		e = xcalloc(1, sizeof(*e));
		e->uid = xstrdup(k8s_obj_uid(pod));
		e->ns = xstrdup(k8s_obj_namespace(pod));
		e->pod = xstrdup(k8s_obj_name(pod));
		e->name = xstrdup(c->name);
		e->suid = xstrdup(c->uid);
		e->active_ms = now;
		e->next = a->sessions;
		a->sessions = e;
		a->nsessions++;
	}
	e->seen = 1;
	/*
	 * Its sandbox not ready yet (the probe: the interpreter has run once):
	 * no idle time counts, as the controller's counts from Ready; nor is
	 * an end written before then.
	 */
	if (!pool_sandbox_ready(pod)) {
		e->active_ms = now;
		return;
	}
	(void)session_pod_step(pod, &cx, &cx_uid);
	if (cx_uid && (e->step == NULL || strcmp(e->step, cx_uid) != 0)) {
		free(e->step);
		e->step = xstrdup(cx_uid);
		e->active_ms = now;
	}
	if (busy)
		e->active_ms = now;
	due = session_clock_due(c, busy, now - e->active_ms, wall_s);
	if (due == NULL)
		return;
	if (strcmp(due, "Expired") == 0 && busy && r->why == CX_KILL_NONE &&
	    !r->exited) {
		/* The ticker kills it; recorded Cancelled (record.c). */
		r->why = CX_KILL_SESSION;
		free(r->session_end);
		session_step_ended_msg(msg, sizeof(msg), e->name, "Expired");
		r->session_end = xstrdup(msg);
	}
	if (e->busy || now < e->retry_ms)
		return;
	if (e->reason == NULL)
		log_info("session end due", "session=%s/%s pod=%s reason=%s",
		    e->ns, e->name, e->pod, due);
	e->reason = due;
	/* What the worker checks again: no step came since (an idle end). */
	free(e->due_step);
	e->due_step = e->step ? xstrdup(e->step) : NULL;
	queue_end(a, e);
}

void
agent_sessions_pass(struct agent *a)
{
	json_t *pods = informer_by_index(a->pods, AGENT_SESSIONS_INDEX), *pod;
	long long now = clock_mono_ms(), wall_s = agent_now_ns() / 1000000000LL;
	struct agent_session *e, **pp;
	struct session_clock c;
	size_t i;

	pthread_mutex_lock(&a->lock);
	for (e = a->sessions; e; e = e->next)
		e->seen = 0;
	json_array_foreach(pods, i, pod) {
		const char *phase = json_string_value(json_object_get(
		    json_object_get(pod, "status"), "phase"));

		if (session_pod_clock(pod, &c) != 0 || json_object_get(
		    json_object_get(pod, "metadata"), "deletionTimestamp"))
			continue;
		/*
		 * Its end written here: its pod goes, whatever it is doing now
		 * (a sandbox killed at its lifetime's end is Running no more).
		 */
		if ((e = find(a, k8s_obj_uid(pod))) != NULL && e->ended) {
			e->seen = 1;
			if (!e->busy && now >= e->retry_ms)
				queue_end(a, e);
			continue;
		}
		/* Running: a pod still starting has no clock yet. */
		if (phase == NULL || strcmp(phase, "Running") != 0)
			continue;
		look(a, pod, &c, now, wall_s);
	}
	for (pp = &a->sessions; (e = *pp) != NULL;) {
		if (!e->seen && !e->busy) {
			*pp = e->next;
			a->nsessions--;
			session_free(e);
		} else {
			pp = &e->next;
		}
	}
	pthread_mutex_unlock(&a->lock);
	json_decref(pods);
}

/*
 * The end written, as the controller's end() writes it: 0; K8S_EHTTP 422
 * when a test failed (not Ready, or another session of the name), or the
 * patch's error.
 */
static int
write_end(struct agent *a, const char *ns, const char *name, const char *suid,
    const char *reason, struct k8s_error *err)
{
	struct k8s_patch_opts po = { .type = K8S_PATCH_JSON,
	    .subresource = "status" };
	const char *msg = strcmp(reason, "Expired") == 0 ? "its "
	    "maxLifetimeSeconds passed" : "no execution for its "
	    "idleTimeoutSeconds";
	char now[CLOCK_RFC3339_LEN];
	json_t *p;
	int rc;

	clock_format_rfc3339(agent_now_ns(), 0, now);
	p = json_pack("[{s:s, s:s, s:s}, {s:s, s:s, s:s}, {s:s, s:s, s:s},"
	    " {s:s, s:s, s:s}, {s:s, s:s, s:s}, {s:s, s:s, s:s}, {s:s, s:s, s:s},"
	    " {s:s, s:s, s:{s:s, s:s, s:s, s:s, s:s}},"
	    " {s:s, s:s, s:s}]",
	    "op", "test", "path", "/metadata/uid", "value", suid,
	    "op", "test", "path", "/status/phase", "value", SESSION_READY,
	    "op", "test", "path", "/status/conditions/0/type", "value", "Ready",
	    "op", "replace", "path", "/status/phase", "value", SESSION_ENDED,
	    "op", "add", "path", "/status/reason", "value", reason,
	    "op", "add", "path", "/status/message", "value", msg,
	    "op", "add", "path", "/status/endTime", "value", now,
	    "op", "replace", "path", "/status/conditions/0", "value", "type",
	    "Ready", "status", "False", "reason", reason, "message", msg,
	    "lastTransitionTime", now,
	    "op", "copy", "from", "/metadata/generation", "path",
	    "/status/conditions/0/observedGeneration");
	rc = k8s_patch(a->client, &session_resource, ns, name, &po, p, NULL, err);
	json_decref(p);
	return rc;
}

void
agent_session_end(struct agent *a, const char *uid)
{
	struct agent_session *e;
	struct k8s_error err;
	char *ns, *pod, *name, *suid;
	const char *reason;
	long long now = clock_mono_ms(), again = 0;
	int ended, rc, step_busy;
	struct run *r;

	pthread_mutex_lock(&a->lock);
	if ((e = find(a, uid)) == NULL) {
		pthread_mutex_unlock(&a->lock);
		return;
	}
	r = agent_find_run(a, uid);
	if (!e->ended && strcmp(e->reason, "IdleTimeout") == 0 &&
	    ((r && r->step && !r->recorded) || (e->step != NULL) !=
	    (e->due_step != NULL) || (e->step && strcmp(e->step, e->due_step) != 0))) {
		/* A step came since it was found idle: not idle after all. */
		e->reason = NULL;
		e->busy = 0;
		pthread_mutex_unlock(&a->lock);
		return;
	}
	ns = xstrdup(e->ns);
	pod = xstrdup(e->pod);
	name = xstrdup(e->name);
	suid = xstrdup(e->suid);
	reason = e->reason;
	ended = e->ended;
	pthread_mutex_unlock(&a->lock);

	if (!ended) {
		rc = write_end(a, ns, name, suid, reason, &err);
		if (rc == 0) {
			ended = 1;
			log_info("session ended by the node agent", "session=%s/%s "
			    "reason=%s", ns, name, reason);
		} else if (rc == K8S_ENOTFOUND) {
			ended = 1;	/* gone: its pod goes too */
		} else if (rc == K8S_EHTTP && err.http_status == 422) {
			int gone;
			char *ph = agent_read_phase(a, &session_resource, ns, name,
			    suid, &gone);

			/* Ended by someone else: its pod goes all the same. */
			if (gone || (ph && strcmp(ph, SESSION_ENDED) == 0))
				ended = 1;
			else
				again = 5000;	/* not Ready yet: the controller's */
			free(ph);
		} else {
			log_debug("cannot end a session yet", "session=%s/%s "
			    "status=%ld error=\"%s\"", ns, name, err.http_status,
			    err.message);
			again = 1000;
		}
	}
	if (ended) {
		pthread_mutex_lock(&a->lock);
		if (!e->ended) {
			e->ended = 1;
			e->ended_ms = now;
		}
		r = agent_find_run(a, uid);
		step_busy = r && r->step && !r->recorded;
		/* A step killed at the lifetime's end: its record first, briefly. */
		if (step_busy && now - e->ended_ms < AGENT_SESSION_STEP_WAIT_MS)
			again = 200;
		pthread_mutex_unlock(&a->lock);
		if (again == 0 && !agent_delete_pod(a, ns, pod, uid))
			again = 1000;
	}
	pthread_mutex_lock(&a->lock);
	e->busy = 0;
	e->retry_ms = again ? now + again : now + 5000;
	pthread_mutex_unlock(&a->lock);
	free(ns);
	free(pod);
	free(name);
	free(suid);
}

void
agent_session_restarts(struct agent *a, const char *ns, const char *pod,
    long long n)
{
	struct k8s_patch_opts po = { .type = K8S_PATCH_JSON,
	    .subresource = "status" };
	json_t *p = a->pods ? informer_get(a->pods, ns, pod) : NULL, *patch;
	struct agent_session *e;
	struct session_clock c;
	struct k8s_error err;
	int said;

	if (p == NULL || session_pod_clock(p, &c) != 0) {
		json_decref(p);
		return;
	}
	/* Written when it rises only: not a write per step, nor a count going down. */
	pthread_mutex_lock(&a->lock);
	e = find(a, k8s_obj_uid(p));
	said = e && n <= e->restarts;
	pthread_mutex_unlock(&a->lock);
	if (said) {
		json_decref(p);
		return;
	}
	patch = json_pack("[{s:s, s:s, s:s}, {s:s, s:s, s:I}]",
	    "op", "test", "path", "/metadata/uid", "value", c.uid,
	    "op", "add", "path", "/status/restarts", "value", (json_int_t)n);
	if (k8s_patch(a->client, &session_resource, ns, c.name, &po, patch, NULL,
	    &err) != 0) {
		log_debug("cannot write a session's restarts", "session=%s/%s "
		    "status=%ld error=\"%s\"", ns, c.name, err.http_status,
		    err.message);
	} else {
		pthread_mutex_lock(&a->lock);
		if ((e = find(a, k8s_obj_uid(p))) != NULL && n > e->restarts)
			e->restarts = n;
		pthread_mutex_unlock(&a->lock);
	}
	json_decref(patch);
	json_decref(p);
}
