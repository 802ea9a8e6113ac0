/*
 * agent.c - see agent.h; the run table and the life cycle. Three threads
 * (and the workers) share the table of runs (one per
 * execution pod on this node, keyed by the pod's uid) under one lock:
 *
 *   informer  pods on this node: a run learns its timeout, output cap and
 *             execution from its pod, or is made from the pod's status
 *             when an event was missed (the agent restarted);
 *   events    containerd's task events: start time, exit status, OOM;
 *   ticker    every poll_ms: tail logs, enforce the deadline and the hard
 *             output cap, record finished runs, delete recorded pods.
 *
 * Network calls (containerd, the API server) are made outside the lock.
 * agent_priv.h says which file holds which part.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent_priv.h"
#include "artifacts.h"
#include "clock.h"
#include "cx.h"
#include "log.h"
#include "podspec.h"
#include "pool.h"
#include "quantity.h"
#include "session.h"
#include "xmalloc.h"

int64_t
agent_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* RFC 3339 seconds (as the kubelet writes them) to ns, or 0. */
static int64_t
parse_time(const char *s)
{
	long long t = clock_parse_rfc3339(s);

	return t < 0 ? 0 : (int64_t)t * 1000000000;
}

struct run *
agent_find_run(struct agent *a, const char *uid)
{
	struct run *r;

	for (r = a->runs; r; r = r->next)
		if (strcmp(r->uid, uid) == 0)
			return r;
	return NULL;
}

struct run *
agent_new_run(struct agent *a, const char *uid, const char *ns, const char *pod)
{
	struct run *r = xcalloc(1, sizeof(*r));

	r->uid = xstrdup(uid);
	r->ns = xstrdup(ns);
	r->pod = xstrdup(pod);
	r->lf.fd = -1;
	r->usage.peak_memory = r->usage.cpu_ns = -1;
	r->cpu_before_ns = -1;
	r->oom_before = -1;
	r->retry = (struct backoff){ .initial_ms = 100, .max_ms = 5000 };
	/*
	 * The controller writes the pod's name into the status just after
	 * the create, and its node once it sees it scheduled (the status
	 * guard admits the probe only then): asked again soon, and at least
	 * every second after (its program may be running, its record waits).
	 */
	r->vretry = (struct backoff){ .initial_ms = 50, .max_ms = 1000 };
	r->seen_ms = clock_mono_ms();
	r->next = a->runs;
	a->runs = r;
	return r;
}

void
agent_free_run(struct run *r)
{
	if (r->lf.fd >= 0)
		close(r->lf.fd);
	crilog_free(r->log);
	free(r->uid);
	free(r->ns);
	free(r->pod);
	free(r->cx);
	free(r->cx_uid);
	free(r->isolation);
	free(r->cid);
	free(r->lost);
	free(r->note);
	free(r->session_end);
	json_decref(r->process);
	free(r);
}

/* An annotation's number, clamped to [lo, hi]; dflt when absent or bad. */
static long long
ann_number(json_t *ann, const char *key, long long lo, long long hi,
    long long dflt)
{
	long long n;

	if (quantity_parse_int(json_string_value(json_object_get(ann, key)),
	    LLONG_MIN, LLONG_MAX, &n) != 0)
		return dflt;
	return n < lo ? lo : n > hi ? hi : n;
}

static void ann_limits(json_t *ann, struct agent_limits *out);

int
agent_pod_limits(json_t *pod, struct agent_limits *out)
{
	memset(out, 0, sizeof(*out));
	out->cx = podspec_pod_execution(pod, &out->cx_uid);
	/* Its controller is that very execution. */
	if (out->cx == NULL || out->cx_uid == NULL ||
	    !podspec_controlled_by(pod, "CodeExecution", out->cx_uid))
		return -1;
	ann_limits(json_object_get(json_object_get(pod, "metadata"),
	    "annotations"), out);
	return 0;
}

/* A session's pod with a step on it (session_pod_step): 0, else -1. */
static int
step_limits(json_t *pod, struct agent_limits *out)
{
	memset(out, 0, sizeof(*out));
	if (session_pod_step(pod, &out->cx, &out->cx_uid) != 0)
		return -1;
	ann_limits(json_object_get(json_object_get(pod, "metadata"),
	    "annotations"), out);
	return 0;
}

/* The limits the run's annotations give (its identity already read). */
static void
ann_limits(json_t *ann, struct agent_limits *out)
{
	/* The CRD's ranges: 1 to 3600 s, 1 byte to 1 MiB per stream. */
	out->timeout_ms = ann_number(ann, CX_ANN_TIMEOUT_MS, 1000,
	    CX_MAX_TIMEOUT_S * 1000LL, CX_DEFAULT_TIMEOUT_S * 1000LL);
	out->max_out = (size_t)ann_number(ann, CX_ANN_MAX_OUTPUT, 1,
	    CX_MAX_MAX_BYTES, CX_DEFAULT_MAX_BYTES);
	out->budget = (size_t)ann_number(ann, CX_ANN_OUTPUT_BUDGET, 0,
	    CX_OBJECT_BUDGET, 2 * CX_DEFAULT_MAX_BYTES);
	out->stream = json_is_string(json_object_get(ann, CX_ANN_STREAM)) &&
	    strcmp(json_string_value(json_object_get(ann, CX_ANN_STREAM)),
	    "true") == 0;
	out->policy = json_is_string(json_object_get(ann, CX_ANN_POLICY)) &&
	    strcmp(json_string_value(json_object_get(ann, CX_ANN_POLICY)),
	    "true") == 0;
	{
		const char *o = json_string_value(json_object_get(ann, ARTIFACTS_ANN));
		unsigned long long b, f;
		char extra;

		out->out_bytes = out->out_files = 0;
		if (o && sscanf(o, "%llu %llu%c", &b, &f, &extra) == 2 &&
		    b <= ARTIFACTS_MAX_BYTES && f <= ARTIFACTS_MAX_FILES) {
			out->out_bytes = (size_t)b;
			out->out_files = (size_t)f;
		}
	}
}

void
agent_arm_deadline(struct run *r)
{
	/*
	 * A step's own timeout is the step client's (SIGINT, then the
	 * kernel killed after the grace): the agent's is the backstop, which
	 * takes the sandbox, and the session with it.
	 */
	long long ms = r->timeout_ms + (r->step ? SESSION_STEP_GRACE_MS +
	    SESSION_STEP_BACKSTOP_MS : 0);

	r->deadline_ns = r->verified && r->start_ns ? r->start_ns +
	    ms * 1000000 : 0;
}

int
agent_pod_keeps_sandbox(json_t *pod)
{
	json_t *l = json_object_get(json_object_get(pod, "metadata"), "labels");

	return json_object_get(l, POOL_LABEL_UID) != NULL ||
	    json_object_get(l, SESSION_LABEL_UID) != NULL;
}

/*
 * The byte cap of r, an execution's own pod under the network class
 * (meter.c): its cap (CX_ANN_EGRESS_BYTES, which the controller wrote),
 * and its IPv4 address once it has one.
 */
static void
meter_learn(struct run *r, json_t *pod)
{
	json_t *ann = json_object_get(json_object_get(pod, "metadata"),
	    "annotations");
	const char *cap = json_string_value(json_object_get(ann,
	    CX_ANN_EGRESS_BYTES));
	const char *ip = json_string_value(json_object_get(json_object_get(pod,
	    "status"), "podIP"));
	struct in_addr in;
	char *end;
	long long v;

	if (cap != NULL && r->meter_cap == 0) {
		errno = 0;
		v = strtoll(cap, &end, 10);
		if (errno == 0 && end != cap && *end == '\0' && v > 0)
			r->meter_cap = v;
	}
	if (ip != NULL && r->ip[0] == '\0' && strlen(ip) < sizeof(r->ip) &&
	    inet_pton(AF_INET, ip, &in) == 1)
		snprintf(r->ip, sizeof(r->ip), "%s", ip);
	if (r->meter_port == 0) {
		const char *id = json_string_value(json_object_get(json_object_get(
		    json_object_get(pod, "metadata"), "labels"), POOL_LABEL_UID));
		int ports[PODSPEC_GATE_NPORTS];

		if (id == NULL)
			id = r->cx_uid;
		if (id != NULL) {
			podspec_gate_ports(id, ports);
			r->meter_port = ports[2];
		}
	}
}

/*
 * A pool's holder under the network class, not claimed yet (lock held):
 * its chain is made now (docs/network.md, "Warm"), since its start gate
 * (run --hold) waits for it before the holder gets ready. Any pod of the
 * node named, labelled and classed as one gets it: a chain only takes
 * away. 1 when r is new to metering (the ticker should look now).
 */
static int
holder_meter(struct agent *a, json_t *pod)
{
	json_t *md = json_object_get(pod, "metadata");
	const char *rc = json_string_value(json_object_get(json_object_get(pod,
	    "spec"), "runtimeClassName"));
	struct run *r;
	int was;

	json_t *cs = json_array_get(json_object_get(json_object_get(pod,
	    "status"), "containerStatuses"), 0);

	/*
	 * Not one that ended: its address may be another pod's by now (an
	 * agent that restarted sees it), whose traffic the chain would take.
	 */
	if (a->o.iptables == NULL || a->o.network_class == NULL || rc == NULL ||
	    strcmp(rc, a->o.network_class) != 0 ||
	    json_object_get(md, "deletionTimestamp") || pool_holder_dead(pod) ||
	    json_object_get(json_object_get(cs, "state"), "terminated") ||
	    json_object_get(json_object_get(md, "annotations"),
	    CX_ANN_EGRESS_BYTES) == NULL)
		return 0;
	if ((r = agent_find_run(a, k8s_obj_uid(pod))) == NULL)
		r = agent_new_run(a, k8s_obj_uid(pod), k8s_obj_namespace(pod),
		    k8s_obj_name(pod));
	was = r->meter_wanted && r->ip[0] != '\0';
	meter_learn(r, pod);
	r->meter_wanted = r->meter_cap > 0 && r->meter_port > 0;
	return !was && r->meter_wanted && r->ip[0] != '\0';
}

/*
 * What the run learns from its pod (lock held). netclass: the network
 * RuntimeClass (--network-runtime-class): an execution's pod under it (its
 * spec, which no one changes after the pod is made) may have a sandbox
 * with gVisor's network stack, once its execution says it may too
 * (agent_netstack_grant).
 */
void
agent_learn_pod(struct run *r, json_t *pod, const char *netclass)
{
	struct agent_limits lim;
	const char *rc = json_string_value(json_object_get(json_object_get(pod,
	    "spec"), "runtimeClassName"));

	/* Learned only: verified (and its log made) by trust.c. */
	if (!r->learned && (r->step ? step_limits(pod, &lim) :
	    agent_pod_limits(pod, &lim)) == 0) {
		r->learned = 1;
		r->cx = xstrdup(lim.cx);
		r->cx_uid = xstrdup(lim.cx_uid);
		r->timeout_ms = lim.timeout_ms;
		r->max_out = lim.max_out;
		r->budget = lim.budget;
		r->stream = lim.stream;
		r->policy = lim.policy;
		r->out_bytes = lim.out_bytes;
		r->out_files = lim.out_files;
	}
	if (r->learned && !r->step && json_object_get(json_object_get(
	    json_object_get(pod, "metadata"), "labels"), SESSION_LABEL_UID) ==
	    NULL && netclass != NULL && rc != NULL && strcmp(rc, netclass) == 0) {
		r->netclass = 1;
		agent_netstack_grant(r);
		meter_learn(r, pod);
	}
}

void
agent_netstack_grant(struct run *r)
{
	if (!r->netclass || !r->egress || r->netstack)
		return;
	r->netstack = 1;
	if (r->isolation != NULL && strcmp(r->isolation, AGENT_NETSTACK) == 0) {
		free(r->isolation);
		r->isolation = NULL;
		if (r->why == CX_KILL_ISOLATION)
			r->why = CX_KILL_NONE;
	}
}

/*
 * A holder pod (a pool's), or a session's (step set; docs/sessions.md):
 * nothing until an execution claims it, or the controller puts a step on
 * it; then a warm run, its program (or `warm --step`) exec'd by warm.c
 * once verified and the sandbox runs. A run the sandbox's own TaskStart
 * made is taken over: its pid and isolation check are the sandbox's,
 * kept; its start is not the program's. A holder that ended before its
 * program started is given back (warm.c does, from its thread). A
 * session's run is the pod's: a step recorded stays parked until the
 * next one is on the pod (tick.c frees it, and sees the pod again).
 */
static void
claimed_seen(struct agent *a, json_t *pod, const char *cid, json_t *state,
    int step)
{
	struct agent_limits lim;
	struct run *r;
	int ask;

	if ((step ? step_limits(pod, &lim) : agent_pod_limits(pod, &lim)) != 0) {
		/* Not claimed, no step on it: a holder's chain, maybe. */
		pthread_mutex_lock(&a->lock);
		ask = !step && holder_meter(a, pod);
		pthread_mutex_unlock(&a->lock);
		if (ask)
			agent_wake(a);
		return;
	}
	pthread_mutex_lock(&a->lock);
	r = agent_find_run(a, k8s_obj_uid(pod));
	if (step && r && r->step && r->cx_uid &&
	    strcmp(r->cx_uid, lim.cx_uid) != 0) {
		/*
		 * The last step's, not freed yet: the ticker sees this pod
		 * again, now rather than at its next poll (up to poll_ms).
		 */
		pthread_mutex_unlock(&a->lock);
		agent_wake(a);
		return;
	}
	if (r == NULL && json_object_get(json_object_get(pod, "metadata"),
	    "deletionTimestamp")) {
		pthread_mutex_unlock(&a->lock);
		return;
	}
	if (r == NULL)
		r = agent_new_run(a, k8s_obj_uid(pod), k8s_obj_namespace(pod),
		    k8s_obj_name(pod));
	if (step ? !r->step : !r->warm) {
		r->warm = 1;
		r->start_ns = 0;
		r->deadline_ns = 0;
		r->exited = 0;
		r->kill_sent = 0;
		r->why = CX_KILL_NONE;
		if (step)
			r->step = 1;
		agent_learn_pod(r, pod, a->o.network_class);
		/* A metered holder claimed: read each METER_MS from now on. */
		if (r->meter_wanted && a->next_meter_ms > clock_mono_ms() +
		    METER_MS)
			a->next_meter_ms = clock_mono_ms() + METER_MS;
	}
	if (r->cid == NULL && cid && strncmp(cid, "containerd://", 13) == 0)
		r->cid = xstrdup(cid + 13);
	if (step && r->cx_uid && !r->interrupt_sent) {
		const char *told = json_string_value(json_object_get(json_object_get(
		    json_object_get(pod, "metadata"), "annotations"),
		    SESSION_ANN_CANCEL));

		r->interrupt_wanted = told && strcmp(told, r->cx_uid) == 0;
		/*
		 * Cancelled before it started: never started (its Cancelled
		 * is the controller's); parked, as a recorded step is.
		 */
		if (r->interrupt_wanted && !r->warm_spawned && !r->recorded) {
			r->recorded = 1;
			log_info("cancelled step not started", "pod=%s/%s", r->ns,
			    r->pod);
		}
	}
	if (!r->warm_spawned && r->verified && r->cid &&
	    json_object_get(state, "running") && !r->recorded &&
	    !json_object_get(json_object_get(pod, "metadata"),
	    "deletionTimestamp"))
		agent_warm_spawn(a, r);
	else if (!step && !r->warm_spawned && r->verified &&
	    json_object_get(state, "terminated") && !r->recorded) {
		/* The sandbox ended before the program could start. */
		r->cid = r->cid ? r->cid : xstrdup("");
		agent_warm_spawn(a, r);
	}
	ask = r->learned && !r->verified && !r->refused &&
	    (!step || !r->recorded);
	pthread_mutex_unlock(&a->lock);
	/* The ticker asks about it now, not a poll later: a claim waits on it. */
	if (ask)
		agent_wake(a);
}

/*
 * The kubelet's terminated state of r's container (agent_priv.h), taken
 * as its exit when none came before. Called locked.
 */
void
agent_learn_exit(struct run *r, json_t *term)
{
	const char *why;

	if (r->exited || term == NULL || json_integer_value(json_object_get(term,
	    "exitCode")) < 0 || json_object_get(term, "exitCode") == NULL)
		return;
	why = json_string_value(json_object_get(term, "reason"));
	r->exited = 1;
	r->status = (uint32_t)json_integer_value(json_object_get(term,
	    "exitCode"));
	r->exited_ns = parse_time(json_string_value(json_object_get(term,
	    "finishedAt")));
	if (r->exited_ns == 0)
		r->exited_ns = agent_now_ns();
	r->exit_seen_ms = clock_mono_ms();
	if (why && strcmp(why, "OOMKilled") == 0)
		r->oom = 1;
	/*
	 * Containerd or the kubelet lost track of it; or it never
	 * started as far as anyone saw (no TaskStart, no start time:
	 * a start that failed, the kubelet's exit 128), which is no
	 * program's result either.
	 */
	if (cx_end_untracked(why) || r->start_ns == 0) {
		r->unknown = 1;
		log_info("its end is not known: left to the controller",
		    "pod=%s/%s reason=%s started=%d", r->ns, r->pod,
		    why ? why : "", r->start_ns != 0);
	}
}

/*
 * A pod the cache announced: make or complete its run. A run made here
 * rather than from a TaskStart event (the agent was down when it started)
 * takes its start, and maybe its exit, from the kubelet's report.
 */
void
agent_pod_seen(struct agent *a, json_t *pod)
{
	json_t *md = json_object_get(pod, "metadata");
	json_t *cs = json_array_get(json_object_get(json_object_get(pod,
	    "status"), "containerStatuses"), 0);
	json_t *state = json_object_get(cs, "state");
	const char *uid = k8s_obj_uid(pod);
	const char *cid = json_string_value(json_object_get(cs, "containerID"));
	json_t *term = json_object_get(state, "terminated");
	struct run *r;
	int ask;

	if (uid == NULL || k8s_obj_namespace(pod) == NULL)
		return;
	if (json_object_get(json_object_get(md, "labels"), POOL_LABEL_UID)) {
		claimed_seen(a, pod, cid, state, 0);
		return;
	}
	if (json_object_get(json_object_get(md, "labels"), SESSION_LABEL_UID)) {
		claimed_seen(a, pod, cid, state, 1);
		return;
	}
	pthread_mutex_lock(&a->lock);
	r = agent_find_run(a, uid);
	if (r == NULL && cid == NULL) {
		struct agent_limits lim;

		/*
		 * Not started: the event will come. An execution's pod is
		 * asked about now (trust.c), so that the answer is in before
		 * its program starts.
		 */
		if (json_object_get(md, "deletionTimestamp") ||
		    agent_pod_limits(pod, &lim) != 0) {
			pthread_mutex_unlock(&a->lock);
			return;
		}
	}
	if (r == NULL) {
		if (json_object_get(md, "deletionTimestamp")) {
			pthread_mutex_unlock(&a->lock);
			return;
		}
		r = agent_new_run(a, uid, k8s_obj_namespace(pod), k8s_obj_name(pod));
	}
	agent_learn_pod(r, pod, a->o.network_class);
	if (r->cid == NULL && cid && strncmp(cid, "containerd://", 13) == 0)
		r->cid = xstrdup(cid + 13);
	if (r->start_ns == 0) {
		int64_t t = parse_time(json_string_value(json_object_get(
		    json_object_get(state, "running"), "startedAt")));

		if (t == 0)
			t = parse_time(json_string_value(json_object_get(term,
			    "startedAt")));
		if (t) {
			r->start_ns = t;
			agent_arm_deadline(r);
		}
	}
	/*
	 * The kubelet saw the container end: containerd is done with it, as
	 * at its TaskExit (lost if the event stream was down).
	 */
	if (r->exit_early && term) {
		r->exit_early = 0;
		r->exit_seen_ms = clock_mono_ms();
	}
	agent_learn_exit(r, term);
	ask = r->learned && !r->verified && !r->refused;
	pthread_mutex_unlock(&a->lock);
	if (ask)
		agent_wake(a);
}

static void
pod_add(void *arg, json_t *pod)
{
	agent_pod_seen(arg, pod);
}

static void
pod_update(void *arg, json_t *old, json_t *cur)
{
	(void)old;
	agent_pod_seen(arg, cur);
}

static void
pod_delete(void *arg, json_t *pod, int unknown)
{
	struct agent *a = arg;
	struct run *r;
	int metered;

	(void)unknown;
	pthread_mutex_lock(&a->lock);
	/*
	 * Gone before its result was recorded: cancelled, or deleted by
	 * hand. The controller decides what that execution became.
	 */
	if ((r = agent_find_run(a, k8s_obj_uid(pod))) != NULL &&
	    (!r->exited || r->unknown))
		r->recorded = 1;
	/* Its TaskExit may be lost with it: the quiet wait counts now. */
	if (r != NULL && r->exit_early) {
		r->exit_early = 0;
		r->exit_seen_ms = clock_mono_ms();
	}
	/*
	 * Its chain, if it had one (a warm run's is kept while its pod lives:
	 * meter.c; its run may be freed already), goes at a pass now, before
	 * its address can be another pod's.
	 */
	metered = a->o.iptables != NULL && json_object_get(json_object_get(
	    json_object_get(pod, "metadata"), "annotations"),
	    CX_ANN_EGRESS_BYTES) != NULL;
	if (metered)
		a->next_meter_ms = 0;
	pthread_mutex_unlock(&a->lock);
	if (metered)
		agent_wake(a);
}

/*
 * Of a pod the cache keeps what the agent reads: identity, its execution's
 * uid, the three annotations meant for it (not the code, up to 192 KiB),
 * and the container's status.
 */
static json_t *
trim_pod(json_t *pod)
{
	static const char *const keep[] = { CX_ANN_NAME,
	    CX_ANN_TIMEOUT_MS, CX_ANN_MAX_OUTPUT,
	    CX_ANN_OUTPUT_BUDGET, CX_ANN_STREAM, CX_ANN_POLICY, ARTIFACTS_ANN,
	    CX_ANN_EGRESS_BYTES };
	json_t *md = json_object_get(pod, "metadata");
	json_t *ann = json_object_get(md, "annotations");
	json_t *euid = json_object_get(json_object_get(md, "labels"),
	    CX_LABEL_UID);
	json_t *out, *a = json_object(), *l = json_object(), *ref;
	size_t j;

	json_t *pool = json_object_get(json_object_get(md, "labels"),
	    POOL_LABEL_UID);
	json_t *sess = json_object_get(json_object_get(md, "labels"),
	    SESSION_LABEL_UID);
	const char *k;
	json_t *v;

	for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++)
		if (json_object_get(ann, keep[i]))
			json_object_set(a, keep[i], json_object_get(ann, keep[i]));
	if (euid)
		json_object_set(l, CX_LABEL_UID, euid);
	/*
	 * A claimed holder's code is read from here by its warm run (warm.c):
	 * a few on this node at a time, deleted once run.
	 */
	if (pool) {
		json_object_set(l, POOL_LABEL_UID, pool);
		if (euid)
			json_object_foreach(ann, k, v)
				if (strncmp(k, "airlock.dev/", 12) == 0)
					json_object_set(a, k, v);
	}
	/*
	 * A session's pod: its step's code too, until the next step
	 * replaces it (at most one step's, 192 KiB, per session pod).
	 */
	if (sess) {
		json_object_set(l, SESSION_LABEL_UID, sess);
		if (json_object_get(ann, SESSION_ANN_IDLE))
			json_object_set(a, SESSION_ANN_IDLE, json_object_get(ann,
			    SESSION_ANN_IDLE));
		if (json_object_get(ann, SESSION_ANN_STEP))
			json_object_foreach(ann, k, v)
				if (strncmp(k, "airlock.dev/", 12) == 0)
					json_object_set(a, k, v);
	}
	out = json_pack("{s:{s:O*, s:O*, s:O*, s:O*, s:O*, s:o, s:o},"
	    " s:{s:O*, s:O*, s:O*}}",
	    "metadata", "name", json_object_get(md, "name"),
	    "namespace", json_object_get(md, "namespace"),
	    "uid", json_object_get(md, "uid"),
	    "resourceVersion", json_object_get(md, "resourceVersion"),
	    "deletionTimestamp", json_object_get(md, "deletionTimestamp"),
	    "annotations", a, "labels", l,
	    "status", "containerStatuses", json_object_get(json_object_get(pod,
	    "status"), "containerStatuses"),
	    /* A session's clock (sessions.c): running since, and its deadline. */
	    "phase", json_object_get(json_object_get(pod, "status"), "phase"),
	    "startTime", json_object_get(json_object_get(pod, "status"),
	    "startTime"));
	if (out == NULL)
		return json_incref(pod);
	/*
	 * An execution's own pod, or a pool's holder: its RuntimeClass, which
	 * says whether its sandbox may have a network stack (agent_learn_pod,
	 * holder_meter): a name, at most 253 bytes, as the API server checks
	 * it.
	 */
	if ((euid || pool) && !sess && json_is_string(json_object_get(
	    json_object_get(pod, "spec"), "runtimeClassName"))) {
		json_object_set_new(out, "spec", json_pack("{s:O}",
		    "runtimeClassName", json_object_get(json_object_get(pod,
		    "spec"), "runtimeClassName")));
		/* Its address: the byte cap's rules name it (meter.c). */
		if (json_is_string(json_object_get(json_object_get(pod,
		    "status"), "podIP")))
			json_object_set(json_object_get(out, "status"), "podIP",
			    json_object_get(json_object_get(pod, "status"),
			    "podIP"));
	}
	if (sess && json_object_get(json_object_get(pod, "spec"),
	    "activeDeadlineSeconds"))
		json_object_set_new(out, "spec", json_pack("{s:O}",
		    "activeDeadlineSeconds", json_object_get(json_object_get(pod,
		    "spec"), "activeDeadlineSeconds")));
	json_array_foreach(json_object_get(md, "ownerReferences"), j, ref)
		if (json_is_true(json_object_get(ref, "controller")))
			json_object_set_new(json_object_get(out, "metadata"),
			    "ownerReferences", json_pack("[{s:b, s:O*, s:O*,"
			    " s:O*, s:O*}]", "controller", 1, "uid", json_object_get(ref,
			    "uid"), "kind", json_object_get(ref, "kind"),
			    "apiVersion", json_object_get(ref, "apiVersion"),
			    "name", json_object_get(ref, "name")));
	return out;
}

/*
 * The cache's index of session pods (AGENT_SESSIONS_INDEX): sessions.c's
 * pass each second parses those, not every pod on the node.
 */
static char *
session_pod_index(json_t *pod)
{
	return json_object_get(json_object_get(json_object_get(pod, "metadata"),
	    "labels"), SESSION_LABEL_UID) ? xstrdup(AGENT_SESSIONS_INDEX) : NULL;
}

/* --- life cycle ----------------------------------------------------------- */

static const double record_bounds[] = { 0.01, 0.025, 0.05, 0.1, 0.2, 0.5,
    1, 2.5, 5 };

struct agent *
agent_new(struct k8s_client *c, struct metrics *m,
    const struct agent_opts *opts)
{
	struct agent *a;
	struct informer_opts io = { .res = &k8s_res_pods, .packed = 1,
	    .transform = trim_pod, .index = session_pod_index,
	    .label_selector = CX_LABEL_MANAGED "=" CX_MANAGER ","
	    CX_LABEL_COMPONENT "=" CX_COMPONENT };
	struct informer_handlers h;

	if (opts == NULL || opts->node_name == NULL || !opts->node_name[0])
		return NULL;
	a = xcalloc(1, sizeof(*a));
	a->client = c;
	a->o = *opts;
	if (a->o.pod_logs_dir == NULL)
		a->o.pod_logs_dir = "/var/log/pods";
	if (a->o.containerd_socket == NULL)
		a->o.containerd_socket = "/run/containerd/containerd.sock";
	if (a->o.containerd_ns == NULL)
		a->o.containerd_ns = "k8s.io";
	if (a->o.poll_ms <= 0)
		a->o.poll_ms = 20;
	if (a->o.hard_cap <= 0)
		a->o.hard_cap = CX_HARD_OUTPUT_CAP;
	if (a->o.sweep_ms <= 0)
		a->o.sweep_ms = 60000;
	if (a->o.exec_dir == NULL)
		a->o.exec_dir = "/run/airlock/exec";
	/* The first sweep once the cache has had time to fill. */
	a->next_sweep_ms = clock_mono_ms() + a->o.sweep_ms;
	a->ctrd = ctrd_new(a->o.containerd_socket, a->o.containerd_ns);

	a->field_selector = xasprintf("spec.nodeName=%s", a->o.node_name);
	pthread_mutex_init(&a->lock, NULL);
	a->q = workqueue_new(NULL);
	a->ino_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	a->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	io.field_selector = a->field_selector;
	io.ns = a->o.namespace;
	h = (struct informer_handlers){ pod_add, pod_update, pod_delete, a };
	a->pods = informer_new(c, &io, &h);
	a->m_results = metrics_counter(m, "airlock_agent_results_total",
	    "Results recorded, by reason.", "reason");
	a->m_record = metrics_histogram(m, "airlock_agent_record_seconds",
	    "From the exit to the result recorded.", record_bounds,
	    sizeof(record_bounds) / sizeof(record_bounds[0]));
	a->m_active = metrics_gauge(m, "airlock_agent_runs",
	    "Executions this agent follows now.", NULL);
	a->m_deliver = metrics_histogram(m, "airlock_agent_warm_delivery_seconds",
	    "From a claim seen to its program started in the warm sandbox.",
	    record_bounds, sizeof(record_bounds) / sizeof(record_bounds[0]));
	a->m_waits = metrics_counter(m, "airlock_agent_exit_waits_total",
	    "Cold runs' exits asked of their sandbox (runsc wait), by result: "
	    "exit (taken), late (something came first), signal (left to TaskExit), "
	    "failed, skipped.",
	    "result");
	a->m_flush = metrics_counter(m, "airlock_agent_output_flushes_total",
	    "Live output copied into a running execution's status "
	    "(spec.output.stream), by result: written, refused (the phase "
	    "was not Running), failed.", "result");
	a->m_swept = metrics_counter(m, "airlock_agent_swept_total",
	    "Orphan pods and stale pod log directories removed.", "kind");
	a->m_trust = metrics_counter(m, "airlock_agent_pod_checks_total",
	    "Execution pods checked against their execution before their "
	    "program is followed, by answer: trusted, not_yet (asked again), "
	    "ended, other_pod, gone (the last three killed and deleted).",
	    "result");
	a->out_mem = crilog_budget_new_floor(AGENT_OUTPUT_MEMORY,
	    AGENT_OUTPUT_FLOOR);
	return a;
}

int
agent_start(struct agent *a)
{
	if (a->started)
		return K8S_EINVAL;
	if (informer_start(a->pods) != 0)
		return K8S_EINVAL;
	a->started = 1;
	pthread_create(&a->ev_th, NULL, agent_events_main, a);
	pthread_create(&a->tick_th, NULL, agent_tick_main, a);
	for (int i = 0; i < AGENT_WORKERS; i++)
		pthread_create(&a->workers[i], NULL, agent_worker_main, a);
	return 0;
}

int
agent_ready(struct agent *a)
{
	return informer_wait_synced(a->pods, 0) == 0 &&
	    atomic_load(&a->ctrd_ok) && atomic_load(&a->cfg_ok);
}

void
agent_not_ready_reason(struct agent *a, char *why, size_t size)
{
	/* The check's answer first: it names the flag to fix. */
	pthread_mutex_lock(&a->lock);
	snprintf(why, size, "%s", a->cfg_why);
	pthread_mutex_unlock(&a->lock);
	if (why[0])
		return;
	if (informer_wait_synced(a->pods, 0) != 0)
		snprintf(why, size, "the pod cache is not synced yet");
	else if (!atomic_load(&a->ctrd_ok))
		snprintf(why, size, "containerd does not answer at '%s' "
		    "(--containerd-socket)", a->o.containerd_socket);
	else if (!atomic_load(&a->cfg_ok))
		snprintf(why, size, "the configuration is not checked yet");
}

void
agent_stop(struct agent *a)
{
	if (!a->started)
		return;
	atomic_store(&a->stop, 1);
	pthread_join(a->ev_th, NULL);
	pthread_join(a->tick_th, NULL);
	/* Warm runs' and exit waits' threads see stop within a poll. */
	while (atomic_load(&a->warm_threads) > 0 ||
	    atomic_load(&a->exit_waiters) > 0)
		usleep(10000);
	/* The ticker adds no more: the workers finish what is queued. */
	workqueue_shutdown(a->q);
	for (int i = 0; i < AGENT_WORKERS; i++)
		pthread_join(a->workers[i], NULL);
	informer_stop(a->pods);
	/* Their stdin closed: each `warm --serve` exits, its kernel stays. */
	agent_serve_free_all(a);
	a->started = 0;
}

void
agent_free(struct agent *a)
{
	struct run *r;

	if (a == NULL)
		return;
	agent_stop(a);
	informer_free(a->pods);
	while ((r = a->runs) != NULL) {
		a->runs = r->next;
		agent_free_run(r);
	}
	agent_sessions_free(a);
	workqueue_shutdown(a->q);
	workqueue_free(a->q);
	agent_sbx_free_all(a);
	crilog_budget_free(a->out_mem);
	if (a->ino_fd >= 0)
		close(a->ino_fd);
	if (a->wake_fd >= 0)
		close(a->wake_fd);
	ctrd_free(a->ctrd);
	free(a->field_selector);
	pthread_mutex_destroy(&a->lock);
	free(a);
}
