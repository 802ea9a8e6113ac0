/*
 * lend.c - holders are lent capacity, not owned (issue 27, item 11;
 * docs/warm-path.md, "Holders are lent").
 *
 * A pool's idle holders hold cpu and memory on their node. On a small
 * node (2 cores) three of 500m left no room for another tenant's cold
 * execution, which waited out its timeout and ended Unschedulable. So
 * when an execution's pod is unschedulable for want of cpu or memory,
 * the controller deletes idle holders, of any pool, on the node where
 * the fewest free what it asks (pool_lend_pick), and their pools do not
 * refill until that execution is scheduled or has ended (at most
 * POOL_LEND_HOLD_MAX_MS): a refill at once would take the room back
 * before the scheduler gave it. The pool's Ready condition says Lent and
 * a Normal Event HoldersTakenBack says when, neither naming the
 * execution (it may be another tenant's).
 *
 * Why not the scheduler's own preemption (holders at a lower
 * PriorityClass): a pod's priority cannot change once it is made, and a
 * claimed holder runs an execution, which must never be preempted; the
 * namespace's pods quota is also scoped by the executions' PriorityClass,
 * which holders must stay counted by. Deleting only idle holders, each at
 * the resourceVersion read, races safely with a claim (a patch at that
 * same resourceVersion): one of the two wins, so a holder never displaces
 * a running execution.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "controller_priv.h"
#include "cx.h"
#include "log.h"
#include "pool.h"
#include "xmalloc.h"

#define LEND_RETRY_MS	2000	/* nothing to take back: look again */
#define LEND_AGAIN_MS	10000	/* took some: the scheduler's turn first */
#define LEND_SWEEP_AT	256	/* executions remembered before a sweep */
/*
 * A look walks every pool's holders: at most one per gap, whatever waits
 * (a tenant may queue thousands of executions no node can run, and make
 * thousands of pools).
 */
#define LEND_GAP_MS	50
#define LEND_FORGET_MS	600000

/*
 * Whether the execution of uid may look for holders to take back now, and
 * remember that it did: 1; 0 not yet; -1 not now, another look was just
 * made (try again soon). Lock held.
 */
static int
lend_due_locked(struct controller *ctl, const char *uid, long long now)
{
	json_t *t = json_object_get(ctl->lend_tried, uid), *v;
	const char *k;
	void *tmp;

	if (t && now - json_integer_value(json_array_get(t, 0)) <
	    (json_integer_value(json_array_get(t, 1)) ? LEND_AGAIN_MS :
	    LEND_RETRY_MS))
		return 0;
	if (now - ctl->lend_walked < LEND_GAP_MS)
		return -1;
	ctl->lend_walked = now;
	if (json_object_size(ctl->lend_tried) >= LEND_SWEEP_AT)
		json_object_foreach_safe(ctl->lend_tried, tmp, k, v)
			if (now - json_integer_value(json_array_get(v, 0)) >=
			    LEND_FORGET_MS)
				json_object_del(ctl->lend_tried, k);
	json_object_set_new(ctl->lend_tried, uid, json_pack("[I, i]",
	    (json_int_t)now, t ? (int)json_integer_value(json_array_get(t, 1)) :
	    0));
	return 1;
}

/*
 * The idle holders bound to a node, of every pool, into c (their pods in
 * pods, their pools in owners: c[i] borrows from pods[i]). Not those a
 * claim picked a moment ago, nor those on a lost node.
 */
static size_t
candidates(struct controller *ctl, json_t *pools, json_t *pods,
    json_t *owners, struct pool_lend_cand *c)
{
	long long now = clock_mono_ms();
	char key[POOL_KEY_LEN];
	json_t *pool, *list, *p;
	int64_t cpu, mem;
	size_t i, j, n = 0;

	json_array_foreach(pools, i, pool) {
		char *idx;

		if (json_object_get(json_object_get(pool, "metadata"),
		    "deletionTimestamp") || ctl_pool_match_key(ctl, pool,
		    key) != 0 || pool_key_resources(key, &cpu, &mem) != 0)
			continue;
		idx = ctl_pool_index(k8s_obj_namespace(pool), k8s_obj_uid(pool));
		list = informer_by_index(ctl->pod_inf, idx);
		free(idx);
		pthread_mutex_lock(&ctl->lock);
		json_array_foreach(list, j, p) {
			const char *node = json_string_value(json_object_get(
			    json_object_get(p, "spec"), "nodeName"));
			json_t *r = json_object_get(ctl->reserved,
			    k8s_obj_uid(p));

			if (n >= POOL_LEND_MAX_CANDS)
				break;
			if (!pool_holder_idle(p) || node == NULL || !node[0] ||
			    (r && now - json_integer_value(r) < CTL_RESERVE_MS) ||
			    ctl_pod_lost_locked(ctl, p))
				continue;
			json_array_append(pods, p);
			json_array_append(owners, pool);
			c[n].node = node;
			c[n].cpu_milli = cpu;
			c[n].mem = mem;
			c[n].ready = pool_holder_ready(p);
			n++;
		}
		pthread_mutex_unlock(&ctl->lock);
		json_decref(list);
	}
	return n;
}

/*
 * Hold the pool's refill for the execution cx, before any of its holders
 * is deleted: else the pool's reconcile, which the delete's event brings,
 * could make a new one in the room before the hold is known. The hold
 * counts the n holders about to go as taken back already: that reconcile
 * says Lent, and must not say "0 taken back" (lent() corrects the count
 * for deletes that did not happen).
 */
static void
lend_hold(struct controller *ctl, json_t *pool, json_t *cx, long long n)
{
	char *cxkey = xasprintf("%s/%s", k8s_obj_namespace(cx),
	    k8s_obj_name(cx));
	json_t *e;

	pthread_mutex_lock(&ctl->lock);
	e = json_object_get(ctl->pool_lent, k8s_obj_uid(pool));
	if (e == NULL)
		json_object_set_new(ctl->pool_lent, k8s_obj_uid(pool),
		    e = json_pack("[I, I, {}]", (json_int_t)0, (json_int_t)0));
	json_array_set_new(e, 0, json_integer(json_integer_value(
	    json_array_get(e, 0)) + n));
	json_array_set_new(e, 1, json_integer(clock_mono_ms()));
	json_object_set_new(json_array_get(e, 2), cxkey, json_string(
	    k8s_obj_uid(cx)));
	pthread_mutex_unlock(&ctl->lock);
	free(cxkey);
}

/*
 * n of the planned holders of the pool on node were taken back for cx
 * (what: the resources short): the hold's count corrected by those not
 * taken, and said in an Event. Only a hold that still holds for cx is
 * corrected (one dropped meanwhile, as cx was scheduled, and made again
 * for another execution is that one's); one left with none taken and for
 * cx alone is dropped.
 */
static void
lent(struct controller *ctl, json_t *pool, json_t *cx, long long n,
    long long planned, const char *node, const char *what)
{
	const char *uid = k8s_obj_uid(pool);
	char *key, *cxkey, msg[600];
	json_int_t left;
	json_t *e, *who;

	cxkey = xasprintf("%s/%s", k8s_obj_namespace(cx), k8s_obj_name(cx));
	pthread_mutex_lock(&ctl->lock);
	e = json_object_get(ctl->pool_lent, uid);
	who = json_array_get(e, 2);
	if (e && strcmp(json_string_value(json_object_get(who, cxkey)) ?
	    json_string_value(json_object_get(who, cxkey)) : "",
	    k8s_obj_uid(cx)) == 0) {
		left = json_integer_value(json_array_get(e, 0)) - (planned - n);
		json_array_set_new(e, 0, json_integer(left > 0 ? left : 0));
		if (left <= 0 && json_object_size(who) == 1)
			json_object_del(ctl->pool_lent, uid);
	}
	pthread_mutex_unlock(&ctl->lock);
	free(cxkey);
	if (n == 0)
		return;
	metric_add(ctl->m_taken_back, NULL, (double)n);
	snprintf(msg, sizeof(msg), "%lld idle sandbox%s on node %.253s taken "
	    "back for an execution no node had %s for; the pool refills once "
	    "it is scheduled", n, n == 1 ? "" : "es", node, what);
	ctl_emit_event_kind(ctl, pool, "CodeExecutionPool", "Normal",
	    "HoldersTakenBack", msg);
	key = ctl_pool_key(k8s_obj_namespace(pool), k8s_obj_name(pool));
	workqueue_add(ctl->queue, key);
	free(key);
}

void
ctl_pool_lend(struct controller *ctl, json_t *cx, json_t *pod, const char *why)
{
	struct k8s_delete_opts del = { .grace_period_set = 1,
	    .grace_period_seconds = 0 };
	struct pool_lend_cand *c = NULL;
	struct k8s_error err;
	const char *uid = k8s_obj_uid(cx), *node, *what;
	json_t *pools = NULL, *pods = NULL, *owners = NULL, *p;
	int64_t cpu, mem;
	size_t n, k, *pick = NULL, i;
	long long taken = 0, per, planned;
	int short_cpu, short_mem, rc, due;
	char key[600];

	if (uid == NULL || json_string_value(json_object_get(json_object_get(pod,
	    "spec"), "nodeName")) || !pool_lend_short(why, &short_cpu,
	    &short_mem))
		return;
	snprintf(key, sizeof(key), "%s/%s", k8s_obj_namespace(cx),
	    k8s_obj_name(cx));
	pthread_mutex_lock(&ctl->lock);
	/* No pool keeps a holder: nothing to walk. */
	due = ctl->pool_desired > 0 ? lend_due_locked(ctl, uid,
	    clock_mono_ms()) : 0;
	pthread_mutex_unlock(&ctl->lock);
	if (due < 0)	/* not sooner: many may wait, each would spin */
		workqueue_add_after(ctl->queue, key, LEND_RETRY_MS);
	if (due <= 0 || pool_spec_resources(ctl->cfg, json_object_get(cx,
	    "spec"), &cpu, &mem, &err) != 0)
		return;
	pools = informer_list(ctl->pool_inf);
	pods = json_array();
	owners = json_array();
	c = xcalloc(POOL_LEND_MAX_CANDS, sizeof(*c));
	pick = xcalloc(POOL_LEND_MAX_CANDS, sizeof(*pick));
	n = candidates(ctl, pools, pods, owners, c);
	k = pool_lend_pick(c, n, short_cpu ? cpu : 0, short_mem ? mem : 0, pick);
	if (k == 0) {
		/* A holder may yet be bound, or go idle: look again soon. */
		workqueue_add_after(ctl->queue, key, LEND_RETRY_MS);
		goto out;
	}
	node = c[pick[0]].node;
	what = short_cpu && short_mem ? "cpu and memory" : short_cpu ? "cpu" :
	    "memory";
	/* Pool by pool, so each gets one Event with its own count. */
	for (i = 0; i < k; i++) {
		json_t *pool = json_array_get(owners, pick[i]);

		if (pool == NULL)
			continue;
		per = planned = 0;
		for (size_t j = i; j < k; j++) {
			json_t *o = json_array_get(owners, pick[j]);

			planned += o && strcmp(k8s_obj_uid(o), k8s_obj_uid(pool)) == 0;
		}
		lend_hold(ctl, pool, cx, planned);
		for (size_t j = i; j < k; j++) {
			json_t *o = json_array_get(owners, pick[j]);

			if (o == NULL || strcmp(k8s_obj_uid(o), k8s_obj_uid(pool)))
				continue;
			p = json_array_get(pods, pick[j]);
			/* At the version read: a claim since wins, and runs. */
			del.precondition_rv = k8s_obj_rv(p);
			del.precondition_uid = k8s_obj_uid(p);
			rc = k8s_delete(ctl->client, &k8s_res_pods,
			    k8s_obj_namespace(p), k8s_obj_name(p), &del, NULL,
			    &err);
			if (rc == 0)
				per++;
			else if (rc != K8S_ENOTFOUND && rc != K8S_ECONFLICT)
				log_warn("cannot take back an idle sandbox",
				    "pod=%s/%s error=\"%s\"", k8s_obj_namespace(p),
				    k8s_obj_name(p), err.message);
			if (j != i)
				pick[j] = POOL_LEND_MAX_CANDS;	/* done */
		}
		lent(ctl, pool, cx, per, planned, node, what);
		taken += per;
	}
	if (taken > 0) {
		pthread_mutex_lock(&ctl->lock);
		json_object_set_new(ctl->lend_tried, uid, json_pack("[I, i]",
		    (json_int_t)clock_mono_ms(), 1));
		pthread_mutex_unlock(&ctl->lock);
		log_info("idle sandboxes taken back for an unschedulable execution",
		    "execution=%s node=%s sandboxes=%lld short=%s", key, node,
		    taken, what);
	}
	/* The scheduler tries again as the holders go; so does this. */
	workqueue_add_after(ctl->queue, key, taken > 0 ? LEND_AGAIN_MS :
	    LEND_RETRY_MS);
out:
	free(pick);
	free(c);
	json_decref(owners);
	json_decref(pods);
	json_decref(pools);
}

long long
ctl_pool_lent(struct controller *ctl, const char *pool_uid, long long *taken)
{
	json_t *e, *who = NULL, *v, *cx;
	long long since = 0, wait;
	const char *k;
	int waiting = 0;

	*taken = 0;
	pthread_mutex_lock(&ctl->lock);
	e = json_object_get(ctl->pool_lent, pool_uid);
	if (e) {
		*taken = json_integer_value(json_array_get(e, 0));
		since = json_integer_value(json_array_get(e, 1));
		who = json_deep_copy(json_array_get(e, 2));
	}
	pthread_mutex_unlock(&ctl->lock);
	if (e == NULL)
		return 0;
	json_object_foreach(who, k, v) {
		const char *slash = strchr(k, '/'), *phase;
		char *ns;

		if (slash == NULL)
			continue;
		ns = xstrndup(k, (size_t)(slash - k));
		cx = informer_get(ctl->cx_inf, ns, slash + 1);
		free(ns);
		phase = json_string_value(json_object_get(json_object_get(cx,
		    "status"), "phase"));
		/* Waiting: the same execution, not ended, on no node yet. */
		if (cx && strcmp(k8s_obj_uid(cx) ? k8s_obj_uid(cx) : "",
		    json_string_value(v)) == 0 && !cx_phase_terminal(phase) &&
		    json_object_get(json_object_get(cx, "status"),
		    "nodeName") == NULL)
			waiting++;
		json_decref(cx);
	}
	json_decref(who);
	wait = pool_lend_hold(waiting, since, clock_mono_ms());
	if (wait == 0) {
		pthread_mutex_lock(&ctl->lock);
		e = json_object_get(ctl->pool_lent, pool_uid);
		/* Unless another take-back came meanwhile. */
		if (e && json_integer_value(json_array_get(e, 1)) == since)
			json_object_del(ctl->pool_lent, pool_uid);
		pthread_mutex_unlock(&ctl->lock);
	}
	return wait;
}
