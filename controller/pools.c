/*
 * pools.c - the warm path's controller side (docs/warm-path.md): keep each
 * CodeExecutionPool's holder pods, and claim one for an execution.
 *
 * The claim, in this order, each step conditional:
 *   1. the execution's status names the holder (podName, startMode Warm),
 *      written at the execution's resourceVersion: of two controllers (a
 *      leader and a deposed one) only one names a pod, and an execution
 *      names one pod for its life (or falls back to cold, below);
 *   2. the holder is patched at its resourceVersion: the execution's
 *      label, name, code and owner. Of two claims on one holder only one
 *      lands; a pod carries one claim for its life.
 * A crash between the two is resumed from the status (ctl_warm_resume).
 * A claim that does not land (the holder went, or another took it) writes
 * startMode Cold and no podName, and the execution gets a pod of its own.
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
#include "xmalloc.h"

#define EXPECT_MS	30000	/* a create not seen in the cache by then: lost */
#define POOL_RETRY_MS	5000	/* a pool the quota cannot fill: try again */

/* The pool's key for the queue, and the pod index value of its holders. */
char *
ctl_pool_key(const char *ns, const char *name)
{
	return xasprintf("pool:%s/%s", ns, name);
}

char *
ctl_pool_index(const char *ns, const char *pool_uid)
{
	return xasprintf("pool:%s/%s", ns ? ns : "", pool_uid);
}

/* The name of the pool whose holder pod is (its controller owner), or NULL. */
const char *
ctl_holder_pool(json_t *pod)
{
	json_t *ref;
	size_t i;

	json_array_foreach(json_object_get(json_object_get(pod, "metadata"),
	    "ownerReferences"), i, ref)
		if (json_is_true(json_object_get(ref, "controller")) &&
		    strcmp(json_string_value(json_object_get(ref, "kind")) ?
		    json_string_value(json_object_get(ref, "kind")) : "",
		    "CodeExecutionPool") == 0)
			return json_string_value(json_object_get(ref, "name"));
	return NULL;
}

int
ctl_owned_by(json_t *obj, const char *kind, const char *uid)
{
	json_t *ref;
	size_t i;

	json_array_foreach(json_object_get(json_object_get(obj, "metadata"),
	    "ownerReferences"), i, ref)
		if (json_is_true(json_object_get(ref, "controller"))) {
			const char *u = json_string_value(json_object_get(ref, "uid"));
			const char *k = json_string_value(json_object_get(ref, "kind"));

			return u && k && strcmp(u, uid) == 0 && strcmp(k, kind) == 0;
		}
	return 0;
}

/* Whether namespace ns has a pool of uid pool_uid, by the pool cache. */
static int
pool_in(struct controller *ctl, const char *ns, const char *pool_uid)
{
	json_t *pools, *pool;
	size_t i;
	int found = 0;

	if (ns == NULL || pool_uid == NULL)
		return 0;
	pools = informer_by_index(ctl->pool_inf, ns);
	json_array_foreach(pools, i, pool)
		found |= k8s_obj_uid(pool) && strcmp(k8s_obj_uid(pool), pool_uid) == 0;
	json_decref(pools);
	return found;
}

/*
 * Whether holder pod is its pool's, read afresh (a controller resuming a
 * claim may not have its pool cache yet): the pool its controller owner
 * names, in the pod's namespace, has the uid its label says. 1, 0, or a
 * K8S_E* code when the pool cannot be read.
 */
int
ctl_pool_owns(struct controller *ctl, json_t *pod)
{
	const char *name = ctl_holder_pool(pod), *uid = json_string_value(
	    json_object_get(json_object_get(json_object_get(pod, "metadata"),
	    "labels"), POOL_LABEL_UID));
	struct k8s_error err;
	json_t *pool = NULL;
	int rc;

	const char *m = json_string_value(json_object_get(json_object_get(
	    json_object_get(pod, "metadata"), "labels"), CX_LABEL_MANAGED));

	/* Airlock's (a tenant's copy of a holder is not), of a pool not going. */
	if (name == NULL || uid == NULL || m == NULL || strcmp(m, CX_MANAGER) != 0)
		return 0;
	rc = k8s_get(ctl->client, &pool_resource, k8s_obj_namespace(pod), name,
	    &pool, &err);
	if (rc == 0)
		rc = k8s_obj_uid(pool) && strcmp(k8s_obj_uid(pool), uid) == 0 &&
		    !json_object_get(json_object_get(pool, "metadata"),
		    "deletionTimestamp");
	else if (rc == K8S_ENOTFOUND)
		rc = 0;
	json_decref(pool);
	return rc;
}

/* A create of a holder for pool uid was seen in the cache. */
void
ctl_pool_seen(struct controller *ctl, const char *ns, const char *pool_uid)
{
	json_t *e;

	if (!pool_in(ctl, ns, pool_uid))
		return;
	pthread_mutex_lock(&ctl->lock);
	e = json_object_get(ctl->pool_expect, pool_uid);
	if (e && json_integer_value(json_array_get(e, 0)) > 0)
		json_array_set_new(e, 0, json_integer(json_integer_value(
		    json_array_get(e, 0)) - 1));
	pthread_mutex_unlock(&ctl->lock);
}

void
ctl_pool_claimed(struct controller *ctl, const char *ns, const char *pool_uid)
{
	if (!pool_in(ctl, ns, pool_uid))
		return;
	/*
	 * The first claim of a burst starts the wait; later ones do not
	 * restart it, or claims more often than the delay would stop the
	 * refill until the pool ran dry.
	 */
	pthread_mutex_lock(&ctl->lock);
	if (json_object_get(ctl->pool_claimed, pool_uid) == NULL)
		json_object_set_new(ctl->pool_claimed, pool_uid,
		    json_integer(clock_mono_ms()));
	pthread_mutex_unlock(&ctl->lock);
}

/* How long the pool's refill waits yet after its last claim, in ms. */
static long long
refill_wait(struct controller *ctl, const char *pool_uid)
{
	long long left;
	json_t *t;

	pthread_mutex_lock(&ctl->lock);
	t = json_object_get(ctl->pool_claimed, pool_uid);
	left = t ? json_integer_value(t) + ctl->opts.refill_delay_ms -
	    clock_mono_ms() : 0;
	if (t && left <= 0)
		json_object_del(ctl->pool_claimed, pool_uid);
	pthread_mutex_unlock(&ctl->lock);
	return left > 0 ? left : 0;
}

/* Creates made for pool uid that the cache has not shown yet. */
static long long
expected(struct controller *ctl, const char *pool_uid, long long add)
{
	json_t *e;
	long long n, now = clock_mono_ms();

	pthread_mutex_lock(&ctl->lock);
	e = json_object_get(ctl->pool_expect, pool_uid);
	n = e && now - json_integer_value(json_array_get(e, 1)) < EXPECT_MS ?
	    json_integer_value(json_array_get(e, 0)) : 0;
	if (add) {
		n = n + add < 0 ? 0 : n + add;
		json_object_set_new(ctl->pool_expect, pool_uid,
		    json_pack("[I, I]", (json_int_t)n, (json_int_t)now));
	}
	pthread_mutex_unlock(&ctl->lock);
	return n;
}

/*
 * The pool gauges, kept as each pool's figures change: one pool's old
 * figures out of the sums, its new ones in, never a walk of every pool (a
 * tenant may make many: 2000 of them cost 367 ms a call when each call
 * read them all, issue 27). desired < 0: the pool went. A reconcile that
 * read the pool of key just before its delete (pool_gone names its uid,
 * or the cache holds another of its name, or none) does not bring its
 * figures back after. pool_uid "" only reads the claimed count again.
 */
static void
update_gauges(struct controller *ctl, const char *key, const char *pool_uid,
    long long desired, long long ready)
{
	json_t *old, *g, *cur = NULL;
	long long d, r, claimed;
	const char *slash = key ? strchr(key, '/') : NULL;

	if (desired >= 0 && slash && strncmp(key, "pool:", 5) == 0) {
		char *ns = xstrndup(key + 5, (size_t)(slash - key - 5));

		cur = informer_get(ctl->pool_inf, ns, slash + 1);
		free(ns);
		if (strcmp(k8s_obj_uid(cur) ? k8s_obj_uid(cur) : "",
		    pool_uid) != 0)
			desired = -1;
		json_decref(cur);
	}
	pthread_mutex_lock(&ctl->lock);
	if (pool_uid[0]) {
		old = json_object_get(ctl->pool_counts, pool_uid);
		if (old) {
			ctl->pool_desired -= json_integer_value(json_array_get(old, 0));
			ctl->pool_ready -= json_integer_value(json_array_get(old, 1));
			json_object_del(ctl->pool_counts, pool_uid);
		}
		g = key ? json_object_get(ctl->pool_gone, key) : NULL;
		if (desired >= 0 && !(g && strcmp(json_string_value(
		    json_array_get(g, 0)) ? json_string_value(json_array_get(g,
		    0)) : "", pool_uid) == 0)) {
			json_object_set_new(ctl->pool_counts, pool_uid, json_pack(
			    "[I, I]", (json_int_t)desired, (json_int_t)ready));
			ctl->pool_desired += desired;
			ctl->pool_ready += ready;
		}
	}
	d = ctl->pool_desired;
	r = ctl->pool_ready;
	claimed = (long long)json_object_size(ctl->claimed);
	pthread_mutex_unlock(&ctl->lock);
	metric_set(ctl->m_pool, "desired", (double)d);
	metric_set(ctl->m_pool, "ready", (double)r);
	metric_set(ctl->m_pool, "claimed", (double)claimed);
}

#define GONE_MS	600000	/* a deleted pool's holders are looked for that long */

void
ctl_pool_forget(struct controller *ctl, json_t *pool)
{
	const char *uid = k8s_obj_uid(pool), *k;
	long long now = clock_mono_ms();
	char *key = ctl_pool_key(k8s_obj_namespace(pool), k8s_obj_name(pool));
	json_t *v;
	void *tmp;

	pthread_mutex_lock(&ctl->lock);
	json_object_del(ctl->pool_expect, uid);
	json_object_del(ctl->pool_claimed, uid);
	json_object_del(ctl->pool_failed, uid);
	json_object_del(ctl->pool_keys, uid);
	json_object_del(ctl->pool_netpols, uid);
	json_object_del(ctl->pool_lent, uid);
	json_object_foreach_safe(ctl->pool_gone, tmp, k, v)
		if (now - json_integer_value(json_array_get(v, 1)) >= GONE_MS)
			json_object_del(ctl->pool_gone, k);
	json_object_set_new(ctl->pool_gone, key, json_pack("[s, I]", uid,
	    (json_int_t)now));
	pthread_mutex_unlock(&ctl->lock);
	update_gauges(ctl, key, uid, -1, 0);
	free(key);
}

/*
 * The pool of key is gone: delete its idle holders (the garbage collector
 * would too, in its time; a holder made as the pool went is caught here
 * when its add comes). A claimed one is its execution's, and finishes.
 */
static int
delete_orphans(struct controller *ctl, const char *ns, const char *name)
{
	struct k8s_delete_opts del = { .grace_period_set = 1,
	    .grace_period_seconds = 0 };
	struct k8s_error err;
	char *key = ctl_pool_key(ns, name), *idx = NULL;
	json_t *pods = NULL, *p, *g;
	size_t i;
	int rc = 0;

	pthread_mutex_lock(&ctl->lock);
	g = json_object_get(ctl->pool_gone, key);
	if (g)
		idx = ctl_pool_index(ns, json_string_value(json_array_get(g, 0)));
	pthread_mutex_unlock(&ctl->lock);
	free(key);
	if (idx == NULL)
		return 0;
	pods = informer_by_index(ctl->pod_inf, idx);
	json_array_foreach(pods, i, p) {
		if (!pool_holder_idle(p))
			continue;
		del.precondition_rv = k8s_obj_rv(p);
		del.precondition_uid = k8s_obj_uid(p);
		rc = k8s_delete(ctl->client, &k8s_res_pods, ns, k8s_obj_name(p),
		    &del, NULL, &err);
		if (rc == K8S_ENOTFOUND || rc == K8S_ECONFLICT)
			rc = 0;	/* gone, or claimed meanwhile */
		if (rc != 0)
			break;
	}
	json_decref(pods);
	free(idx);
	return rc;
}

/* A claimed holder went: it no longer counts as claimed. */
void
ctl_holder_gone(struct controller *ctl, const char *pod_uid)
{
	pthread_mutex_lock(&ctl->lock);
	json_object_del(ctl->claimed, pod_uid);
	json_object_del(ctl->reserved, pod_uid);
	pthread_mutex_unlock(&ctl->lock);
	update_gauges(ctl, NULL, "", -1, 0);
}

static int
write_pool_status(struct controller *ctl, json_t *pool, json_t *status)
{
	struct k8s_patch_opts po = { .type = K8S_PATCH_MERGE,
	    .subresource = "status" };
	struct k8s_error err;
	json_t *patch;
	int rc;

	if (json_equal(status, json_object_get(pool, "status")))
		return 0;
	patch = json_pack("{s:O}", "status", status);
	rc = k8s_patch(ctl->client, &pool_resource, k8s_obj_namespace(pool),
	    k8s_obj_name(pool), &po, patch, NULL, &err);
	json_decref(patch);
	if (rc != 0 && rc != K8S_ENOTFOUND)
		log_warn("cannot write pool status", "pool=%s/%s error=\"%s\"",
		    k8s_obj_namespace(pool), k8s_obj_name(pool), err.message);
	return rc == K8S_ENOTFOUND ? 0 : rc;
}

/*
 * Ready True when every replica is ready; else False with why. An Event
 * (Warning) when the reason turns to one a person must act on.
 */
static void
pool_condition(struct controller *ctl, json_t *pool, json_t *status,
    const char *st, const char *reason, const char *msg)
{
	json_int_t gen = json_integer_value(json_object_get(json_object_get(pool,
	    "metadata"), "generation"));
	const char *was = ctl_condition_field(json_object_get(pool, "status"),
	    "Ready", "reason");

	ctl_set_condition(status, "Ready", st, reason, msg, gen);
	if (strcmp(was, reason) != 0 && (strcmp(reason, "QuotaExceeded") == 0 ||
	    strcmp(reason, "Rejected") == 0))
		ctl_emit_event_kind(ctl, pool, "CodeExecutionPool", "Warning",
		    reason, msg);
}

/*
 * A holder of pool uid ended unused (deleted now); fmsg its preload
 * failure, or NULL. Counted for the refill's back-off.
 */
static void
holder_failed(struct controller *ctl, const char *pool_uid, const char *fmsg)
{
	json_t *e;
	long long n;

	pthread_mutex_lock(&ctl->lock);
	e = json_object_get(ctl->pool_failed, pool_uid);
	n = e ? json_integer_value(json_array_get(e, 0)) : 0;
	json_object_set_new(ctl->pool_failed, pool_uid, json_pack("[I, I, s?]",
	    (json_int_t)(n + 1), (json_int_t)clock_mono_ms(), fmsg));
	pthread_mutex_unlock(&ctl->lock);
}

/*
 * The ms pool uid's refill waits yet (0: none), and the last preload
 * failure into fmsg ("" when the last end was not one); the pool whole
 * and ready (ready of replicas) ends the back-off. Not one ready holder:
 * with others failing beside it, each would be made again at once.
 */
static long long
fail_wait(struct controller *ctl, const char *pool_uid, long long ready,
    long long replicas, char *fmsg, size_t size)
{
	json_t *e;
	long long left = 0;

	fmsg[0] = '\0';
	pthread_mutex_lock(&ctl->lock);
	if (ready >= replicas)
		json_object_del(ctl->pool_failed, pool_uid);
	else if ((e = json_object_get(ctl->pool_failed, pool_uid)) != NULL) {
		left = pool_fail_backoff(json_integer_value(json_array_get(e, 0)),
		    json_integer_value(json_array_get(e, 1)), clock_mono_ms());
		if (json_string_value(json_array_get(e, 2)))
			snprintf(fmsg, size, "%s",
			    json_string_value(json_array_get(e, 2)));
	}
	pthread_mutex_unlock(&ctl->lock);
	return left;
}

/* --- egress (docs/network.md, "Warm") -------------------------------------- */

#define GATE_RETRY_MS	2000	/* no gate pod ready: the pool looks again */

/*
 * The pool's NetworkPolicy np (pool_holder_egress) in place: made, or
 * one of its name that this pool owns set to np's spec. One not this
 * pool's is refused (a tenant's, made ahead under our name, must not
 * stand in for it): K8S_EEXIST.
 */
static int
ensure_policy(struct controller *ctl, json_t *pool, json_t *np,
    struct k8s_error *err)
{
	const char *ns = k8s_obj_namespace(pool);
	json_t *there = NULL;
	int rc = k8s_create(ctl->client, ctl_guard_res[1], ns, np, NULL, err);

	if (rc != K8S_EEXIST)
		return rc;
	if ((rc = k8s_get(ctl->client, ctl_guard_res[1], ns, k8s_obj_name(np),
	    &there, err)) != 0)
		return rc;
	if (!ctl_owned_by(there, "CodeExecutionPool", k8s_obj_uid(pool)))
		rc = k8s_error_set(err, K8S_EEXIST, 409, "AlreadyExists",
		    "networkpolicies %s exists and is not this pool's",
		    k8s_obj_name(np));
	else if (!json_equal(json_object_get(there, "spec"),
	    json_object_get(np, "spec"))) {
		/* The profile's list changed (a new config): at its version. */
		json_object_set(json_object_get(np, "metadata"), "resourceVersion",
		    json_object_get(json_object_get(there, "metadata"),
		    "resourceVersion"));
		rc = k8s_update(ctl->client, ctl_guard_res[1], ns,
		    k8s_obj_name(np), NULL, np, NULL, err);
		json_object_del(json_object_get(np, "metadata"), "resourceVersion");
	}
	json_decref(there);
	return rc;
}

/*
 * The egress of pool's holders (profile p): the pool's NetworkPolicy put
 * in place once in this controller's life and before holders are made
 * (making), and then the pool's stamp kept (ctl->pool_netpols: claims
 * wait for it, holder_fits); when making, the gate's env and the stamp on
 * *holder (made here if NULL). 0: done, or nothing
 * to do; 1: not now, *why and msg say why (no gate pod ready to give a
 * new holder: again after GATE_RETRY_MS); or the API's error.
 */
static int
holder_egress(struct controller *ctl, json_t *pool,
    const struct ctl_profile *p, json_t **holder, int making,
    const char **why, char *msg, size_t len)
{
	struct podspec_gate g = { .ns = ctl->opts.agent_lease_ns };
	const char *uid = k8s_obj_uid(pool), *stamp;
	struct k8s_error err;
	json_t *np = NULL, *h = NULL;
	char *key;
	int rc, done;

	/*
	 * None: no request at all. A policy left from a config that gave the
	 * profile egress selects holders with no network stack now (the old
	 * ones are replaced: holder_fits), and goes with the pool.
	 */
	if (p == NULL || p->negress == 0)
		return 0;
	pthread_mutex_lock(&ctl->lock);
	done = json_object_get(ctl->pool_netpols, uid) != NULL;
	pthread_mutex_unlock(&ctl->lock);
	if (done && !making)
		return 0;
	g.n = ctl_gate_addrs(ctl, g.addrs, PODSPEC_GATE_MAX);
	if (g.n == 0 && making) {
		*why = "GateWaiting";
		snprintf(msg, len, "no egress start gate pod (label %s) is ready "
		    "in namespace %s: this pool's sandboxes have egress, and are "
		    "made once one is (docs/network.md)", CTL_GATE_SELECTOR,
		    g.ns ? g.ns : "(none)");
		key = ctl_pool_key(k8s_obj_namespace(pool), k8s_obj_name(pool));
		workqueue_add_after(ctl->queue, key, GATE_RETRY_MS);
		free(key);
		return 1;
	}
	if (g.n == 0) {
		/* The policy alone: no holder gets these addresses. */
		g.n = 1;
		snprintf(g.addrs[0], sizeof(g.addrs[0]), "127.0.0.1");
	}
	if (*holder == NULL && (*holder = h = pool_holder(ctl->cfg, pool,
	    &err)) == NULL)
		goto refused;
	if (pool_holder_egress(ctl->cfg, pool, *holder, &g, &np, &err) != 0)
		goto refused;
	rc = ensure_policy(ctl, pool, np, &err);
	json_decref(np);
	stamp = json_string_value(json_object_get(json_object_get(
	    json_object_get(*holder, "metadata"), "annotations"), POOL_ANN_EGRESS));
	if (rc == 0) {
		pthread_mutex_lock(&ctl->lock);
		json_object_set_new(ctl->pool_netpols, uid, json_string(stamp ?
		    stamp : ""));
		pthread_mutex_unlock(&ctl->lock);
	}
	if (h != NULL) {
		/* Made for the policy alone. */
		json_decref(h);
		*holder = NULL;
	}
	if (rc == 0)
		return 0;
	if (rc != K8S_EEXIST && !ctl_create_refused(&err))
		return rc;
refused:
	*why = "Rejected";
	snprintf(msg, len, "the pool's NetworkPolicy: %.1000s", err.message);
	return 1;
}

/*
 * Whether holder pod (the cache's) has the network its pool's profile p
 * gives now: the network RuntimeClass exactly when p has egress, and
 * then the pool's stamp (pool.h) now, stamp. One made before a new config
 * gave p egress, took it away or changed its list or cap is not claimed,
 * and is replaced.
 */
static int
holder_fits(const struct controller *ctl, json_t *pod,
    const struct ctl_profile *p, const char *stamp)
{
	const char *rc = json_string_value(json_object_get(json_object_get(pod,
	    "spec"), "runtimeClassName"));
	const char *net = ctl->cfg->network_runtime_class;
	const char *has_stamp = json_string_value(json_object_get(json_object_get(
	    json_object_get(pod, "metadata"), "annotations"), POOL_ANN_EGRESS));
	int has = rc != NULL && net != NULL && strcmp(rc, net) == 0;

	if (p == NULL || has != (p->negress > 0))
		return 0;
	/* With egress: gated under the pool's policy as it is now. */
	return p->negress == 0 || (stamp != NULL && stamp[0] != '\0' &&
	    has_stamp != NULL && strcmp(has_stamp, stamp) == 0);
}

int
ctl_pool_reconcile(struct controller *ctl, const char *ns, const char *name)
{
	struct k8s_delete_opts del = { .grace_period_set = 1,
	    .grace_period_seconds = 0 };
	json_t *pool = informer_get(ctl->pool_inf, ns, name), *pods = NULL, *p;
	json_t *status = NULL, *holder = NULL;
	const struct ctl_profile *prof;
	char stamp[POOL_STAMP_LEN + 1] = "";
	struct k8s_error err;
	const char *uid, *why = NULL;
	char *idx = NULL, msg[1200], *key, fmsg[POOL_PRELOAD_MSG_MAX + 1];
	long long want, idle = 0, ready = 0, made = 0, wait, lent;
	json_int_t replicas;
	size_t i;
	int rc = 0, full = 0;

	if (pool == NULL)
		return delete_orphans(ctl, ns, name);
	uid = k8s_obj_uid(pool);
	if (json_object_get(json_object_get(pool, "metadata"),
	    "deletionTimestamp") || uid == NULL) {
		update_gauges(ctl, NULL, uid ? uid : "", -1, 0);
		json_decref(pool);
		return 0;
	}
	if ((rc = ctl_ensure_guardrails(ctl, ns)) != 0) {
		json_decref(pool);
		return rc == K8S_ECANCELED ? 0 : rc;
	}
	prof = ctl_config_profile(ctl->cfg, json_string_value(json_object_get(
	    json_object_get(pool, "spec"), "runtime")));
	if (prof != NULL && prof->negress > 0) {
		/*
		 * The stamp kept once the pool's policy was set (holder_egress):
		 * the config does not change under a running controller, so
		 * it is the one built here; built (a holder and its policy)
		 * only until then.
		 */
		pthread_mutex_lock(&ctl->lock);
		snprintf(stamp, sizeof(stamp), "%s", json_string_value(
		    json_object_get(ctl->pool_netpols, uid)) ?
		    json_string_value(json_object_get(ctl->pool_netpols, uid)) :
		    "");
		pthread_mutex_unlock(&ctl->lock);
		if (stamp[0] == '\0' && pool_egress_stamp(ctl->cfg, pool,
		    ctl->opts.agent_lease_ns, stamp, &err) != 0)
			stamp[0] = '\0';
	}
	replicas = json_integer_value(json_object_get(json_object_get(pool,
	    "spec"), "replicas"));
	if (replicas < 0 || replicas > POOL_MAX_REPLICAS)
		replicas = replicas < 0 ? 0 : POOL_MAX_REPLICAS;
	status = json_deep_copy(json_object_get(pool, "status"));
	if (status == NULL)
		status = json_object();
	idx = ctl_pool_index(ns, uid);
	pods = informer_by_index(ctl->pod_inf, idx);
	json_array_foreach(pods, i, p) {
		json_t *md = json_object_get(p, "metadata");
		int unclaimed = !json_object_get(json_object_get(md, "labels"),
		    CX_LABEL_UID);
		int going = json_object_get(md, "deletionTimestamp") != NULL;
		/*
		 * Its zygote could not import a module: it never gets ready.
		 * Only a holder this pool made: a pod a tenant labelled and
		 * ended with those words is not the pool's to report or delete.
		 */
		int mine = ctl_owned_by(p, "CodeExecutionPool", uid);
		int pf = unclaimed && !going && mine &&
		    pool_holder_preload_failed(p, fmsg, sizeof(fmsg));

		if (pool_holder_idle(p) && !pf && mine && !holder_fits(ctl, p,
		    prof, stamp)) {
			/* Its network is not its profile's now: replaced. */
			del.precondition_uid = k8s_obj_uid(p);
			del.precondition_rv = k8s_obj_rv(p);
			if (k8s_delete(ctl->client, &k8s_res_pods, ns,
			    k8s_obj_name(p), &del, NULL, &err) != 0)
				log_debug("cannot delete an unfit holder",
				    "pod=%s/%s error=\"%s\"", ns, k8s_obj_name(p),
				    err.message);
		} else if (pool_holder_idle(p) && !pf) {
			idle++;
			ready += pool_holder_ready(p);
		} else if ((pf || pool_holder_dead(p)) && unclaimed && mine) {
			/*
			 * Ended unclaimed (evicted, its sandbox died, its preload
			 * failed): replaced, after a back-off if it keeps
			 * happening. The delete succeeds once per pod (by its
			 * uid), so the Event is once per holder.
			 */
			del.precondition_uid = k8s_obj_uid(p);
			del.precondition_rv = NULL;
			if (k8s_delete(ctl->client, &k8s_res_pods, ns,
			    k8s_obj_name(p), &del, NULL, &err) != 0) {
				log_debug("cannot delete an ended holder",
				    "pod=%s/%s error=\"%s\"", ns, k8s_obj_name(p),
				    err.message);
				continue;
			}
			if (!going)
				holder_failed(ctl, uid, pf ? fmsg : NULL);
			if (pf)
				ctl_emit_event_kind(ctl, pool, "CodeExecutionPool",
				    "Warning", "PreloadFailed", fmsg);
		}
	}
	del.precondition_uid = del.precondition_rv = NULL;
	want = (long long)replicas - idle - expected(ctl, uid, 0);
	if (want > 0 && (wait = ctl_pool_lent(ctl, uid, &lent)) > 0) {
		/* Lent: the room is an unscheduled execution's first (lend.c). */
		key = ctl_pool_key(ns, name);
		workqueue_add_after(ctl->queue, key, (uint64_t)wait);
		free(key);
		why = "Lent";
		snprintf(msg, sizeof(msg), "%lld of %lld sandboxes: %lld taken "
		    "back for executions no node had room for; refilled once "
		    "they are scheduled", idle, (long long)replicas, lent);
		want = 0;
	}
	if (want > 0 && (wait = refill_wait(ctl, uid)) > 0) {
		key = ctl_pool_key(ns, name);
		workqueue_add_after(ctl->queue, key, (uint64_t)wait);
		free(key);
		want = 0;
	}
	if ((wait = fail_wait(ctl, uid, ready, replicas, fmsg, sizeof(fmsg))) > 0 &&
	    want > 0) {
		/* Holders keep ending unused: not made again in a loop. */
		key = ctl_pool_key(ns, name);
		workqueue_add_after(ctl->queue, key, (uint64_t)wait);
		free(key);
		if (why == NULL && fmsg[0] == '\0') {
			why = "BackOff";
			snprintf(msg, sizeof(msg), "%lld of %lld sandboxes ready: "
			    "sandboxes keep ending before use; the next is made "
			    "after a back-off", ready, (long long)replicas);
		}
		want = 0;
	}
	if (why == NULL && fmsg[0] != '\0') {
		why = "PreloadFailed";
		snprintf(msg, sizeof(msg), "no sandbox became ready: %s", fmsg);
	}
	if (want > 0 && strcmp(ctl_condition_field(status, "Ready", "reason"),
	    "QuotaExceeded") == 0 && (wait = ctl_quota_gate(ctl, ns)) > 0) {
		/* Waiting on the quota: a turn of its own in the namespace. */
		key = ctl_pool_key(ns, name);
		workqueue_add_after(ctl->queue, key, (uint64_t)ctl_quota_retry_in(
		    ctl, ns, NULL, wait));
		free(key);
		json_decref(status);
		json_decref(pods);
		json_decref(pool);
		free(idx);
		return 0;
	}
	if (want > 0 && (holder = pool_holder(ctl->cfg, pool, &err)) == NULL) {
		why = "Rejected";
		snprintf(msg, sizeof(msg), "%.1100s", err.message);
		want = 0;
	}
	/*
	 * Whatever else is said: no holder of a profile with egress is made
	 * without its gate, and before the pool's policy.
	 */
	{
		const char *ewhy = NULL;
		char emsg[1200];

		if ((rc = holder_egress(ctl, pool, prof, &holder, want > 0, &ewhy,
		    emsg, sizeof(emsg))) != 0) {
			if (why == NULL && ewhy != NULL) {
				why = ewhy;
				snprintf(msg, sizeof(msg), "%s", emsg);
			}
			rc = rc == 1 ? 0 : rc;
			want = 0;
		}
	}
	if (want > 0)
		ctl_avoid_lost_nodes(ctl, holder);
	for (; want > 0; want--) {
		/* Expected before the create: its event may come before it returns. */
		(void)expected(ctl, uid, 1);
		if ((rc = k8s_create(ctl->client, &k8s_res_pods, ns, holder, NULL,
		    &err)) == 0) {
			made++;
			continue;
		}
		(void)expected(ctl, uid, -1);
		if (ctl_quota_full(&err)) {
			full = 1;
			why = "QuotaExceeded";
			snprintf(msg, sizeof(msg), "%lld of %lld sandboxes: the "
			    "namespace's quota has no room for more: %.900s",
			    idle + made, (long long)replicas, err.message);
			rc = 0;
		} else if (ctl_create_refused(&err)) {
			why = "Rejected";
			snprintf(msg, sizeof(msg), "the API server refused a "
			    "sandbox: %.1000s", err.message);
			rc = 0;
		}
		break;
	}
	/* Too many (scaled down): the ones not ready first, never a claimed one. */
	for (int pass = 0; pass < 2 && want < 0; pass++)
		json_array_foreach(pods, i, p) {
			if (want >= 0)
				break;
			if (!pool_holder_idle(p) || pool_holder_ready(p) != pass)
				continue;
			del.precondition_rv = k8s_obj_rv(p);
			del.precondition_uid = k8s_obj_uid(p);
			if (k8s_delete(ctl->client, &k8s_res_pods, ns,
			    k8s_obj_name(p), &del, NULL, &err) == 0) {
				idle--;
				ready -= pass;
			}
			want++;
		}
	json_object_set_new(status, "observedGeneration", json_integer(
	    json_integer_value(json_object_get(json_object_get(pool, "metadata"),
	    "generation"))));
	json_object_set_new(status, "replicas", json_integer(idle));
	json_object_set_new(status, "readyReplicas", json_integer(ready));
	if (why)
		pool_condition(ctl, pool, status, "False", why, msg);
	else if (ready >= replicas)
		pool_condition(ctl, pool, status, "True", "Ready",
		    "every sandbox is ready");
	else {
		snprintf(msg, sizeof(msg), "%lld of %lld sandboxes ready", ready,
		    (long long)replicas);
		pool_condition(ctl, pool, status, "False", "Filling", msg);
	}
	if (rc == 0)
		rc = write_pool_status(ctl, pool, status);
	key = ctl_pool_key(ns, name);
	update_gauges(ctl, key, uid, replicas, ready);
	free(key);
	if (full) {
		key = ctl_pool_key(ns, name);
		workqueue_add_after(ctl->queue, key, (uint64_t)ctl_quota_retry_in(
		    ctl, ns, "pool", POOL_RETRY_MS));
		free(key);
	}
	json_decref(holder);
	json_decref(status);
	json_decref(pods);
	json_decref(pool);
	free(idx);
	return rc;
}

/* --- the claim ------------------------------------------------------------ */

/*
 * A pool's runtime and resources are immutable, so its key is made once
 * per pool (podspec_build), not once per pool per claim.
 */
int
ctl_pool_match_key(struct controller *ctl, json_t *pool,
    char key[POOL_KEY_LEN])
{
	struct k8s_error err;
	const char *uid = k8s_obj_uid(pool);
	json_t *k;

	if (uid == NULL)
		return -1;
	pthread_mutex_lock(&ctl->lock);
	k = json_object_get(ctl->pool_keys, uid);
	if (k)
		snprintf(key, POOL_KEY_LEN, "%s", json_string_value(k));
	pthread_mutex_unlock(&ctl->lock);
	if (k)
		return json_string_length(k) ? 0 : -1;
	if (pool_key(ctl->cfg, json_object_get(pool, "spec"), key, &err) != 0)
		key[0] = '\0';
	pthread_mutex_lock(&ctl->lock);
	json_object_set_new(ctl->pool_keys, uid, json_string(key));
	pthread_mutex_unlock(&ctl->lock);
	return key[0] ? 0 : -1;
}

/*
 * A ready holder of a pool in cx's namespace that matches it, reserved for
 * this worker (CTL_RESERVE_MS), or NULL. A new reference. cx may be a
 * CodeSession: the same spec.runtime and spec.resources.
 */
json_t *
ctl_pick_holder(struct controller *ctl, json_t *cx)
{
	json_t *pools, *pool, *pods, *p, *found = NULL;
	const struct ctl_profile *prof;
	char want[POOL_KEY_LEN], have[POOL_KEY_LEN];
	struct k8s_error err;
	long long now = clock_mono_ms();
	size_t i, j;

	if (!pool_cx_warmable(cx) || pool_key(ctl->cfg, json_object_get(cx,
	    "spec"), want, &err) != 0)
		return NULL;
	prof = ctl_config_profile(ctl->cfg, json_string_value(json_object_get(
	    json_object_get(cx, "spec"), "runtime")));
	pools = informer_by_index(ctl->pool_inf, k8s_obj_namespace(cx));
	json_array_foreach(pools, i, pool) {
		char *idx;

		if (found || json_object_get(json_object_get(pool, "metadata"),
		    "deletionTimestamp") || ctl_pool_match_key(ctl, pool, have) != 0 ||
		    strcmp(want, have) != 0)
			continue;
		idx = ctl_pool_index(k8s_obj_namespace(pool), k8s_obj_uid(pool));
		pods = informer_by_index(ctl->pod_inf, idx);
		free(idx);
		pthread_mutex_lock(&ctl->lock);
		json_array_foreach(pods, j, p) {
			json_t *r = json_object_get(ctl->reserved, k8s_obj_uid(p));

			if (!pool_holder_ready(p) || (r && now -
			    json_integer_value(r) < CTL_RESERVE_MS) ||
			    ctl_pod_lost_locked(ctl, p) || !holder_fits(ctl, p,
			    prof, json_string_value(json_object_get(
			    ctl->pool_netpols, k8s_obj_uid(pool)))))
				continue;
			json_object_set_new(ctl->reserved, k8s_obj_uid(p),
			    json_integer(now));
			found = json_incref(p);
			break;
		}
		pthread_mutex_unlock(&ctl->lock);
		json_decref(pods);
	}
	json_decref(pools);
	return found;
}

void
ctl_delivered_status(json_t *cx, json_t *status, json_t *pod, const char *mode,
    const char *sha, const char *where, const char *started, char msg[400])
{
	json_int_t gen = json_integer_value(json_object_get(json_object_get(cx,
	    "metadata"), "generation"));
	const char *node = json_string_value(json_object_get(json_object_get(pod,
	    "spec"), "nodeName"));
	char now[CLOCK_RFC3339_LEN], own[65];

	ctl_now_rfc3339(now);
	if (sha == NULL) {
		podspec_code_sha256(cx, own);
		sha = own;
	}
	json_object_set_new(status, "podName", json_string(k8s_obj_name(pod)));
	json_object_set_new(status, "nodeName", json_string(node ? node : ""));
	json_object_set_new(status, "startMode", json_string(mode));
	json_object_set_new(status, "codeSha256", json_string(sha));
	json_object_set_new(status, "phase", json_string("Running"));
	json_object_set_new(status, "startTime", json_string(now));
	json_object_set_new(status, "observedGeneration", json_integer(gen));
	snprintf(msg, 400, "%s %s on node %s", where, k8s_obj_name(pod),
	    node ? node : "");
	ctl_set_condition(status, "Scheduled", "True", "Scheduled", msg, gen);
	ctl_set_condition(status, "Started", "True", "Started", started, gen);
	ctl_set_condition(status, "Complete", "False", "Pending", "not finished",
	    gen);
}

/*
 * The claim did not land, or cannot: the execution runs cold. Written on
 * the execution read afresh, if it still names pod (NULL: any): startMode
 * Cold, no podName, Pending; its update brings the key back to
 * create_pod.
 */
int
ctl_warm_fallback(struct controller *ctl, json_t *cached, const char *pod,
    const char *why)
{
	json_t *cx = NULL, *status;
	struct k8s_error err;
	const char *named;
	json_int_t gen;
	int rc;

	rc = k8s_get(ctl->client, &cx_resource, k8s_obj_namespace(cached),
	    k8s_obj_name(cached), &cx, &err);
	if (rc == K8S_ENOTFOUND)
		return 0;
	if (rc != 0)
		return rc;
	status = json_deep_copy(json_object_get(cx, "status"));
	if (status == NULL)
		status = json_object();
	named = json_string_value(json_object_get(status, "podName"));
	if (strcmp(k8s_obj_uid(cx) ? k8s_obj_uid(cx) : "", k8s_obj_uid(cached)) ||
	    cx_phase_terminal(json_string_value(json_object_get(status, "phase"))) ||
	    (pod && named && strcmp(named, pod) != 0)) {
		json_decref(status);
		json_decref(cx);
		return 0;
	}
	gen = json_integer_value(json_object_get(json_object_get(cx,
	    "metadata"), "generation"));
	json_object_del(status, "podName");
	json_object_del(status, "nodeName");
	json_object_del(status, "startTime");
	json_object_set_new(status, "startMode", json_string("Cold"));
	json_object_set_new(status, "phase", json_string("Pending"));
	ctl_set_condition(status, "Scheduled", "False", "Pending", why, gen);
	ctl_set_condition(status, "Started", "False", "Pending", "not started",
	    gen);
	ctl_set_condition(status, "Complete", "False", "Pending", "not finished",
	    gen);
	log_info("warm claim fell back to cold", "execution=%s/%s why=\"%s\"",
	    k8s_obj_namespace(cx), k8s_obj_name(cx), why);
	metric_inc(ctl->m_claims, "fallback");
	rc = ctl_write_status(ctl, cx, status, NULL);
	json_decref(status);
	json_decref(cx);
	return rc;
}

/*
 * Patch the claim onto pod for cx (read afresh). 0 when it landed; else
 * the patch's error (K8S_ECONFLICT: another claim won, K8S_ENOTFOUND: the
 * holder went) or K8S_ETOOBIG / K8S_EINVAL from the claim's build.
 */
static int
patch_claim(struct controller *ctl, json_t *cx, json_t *pod, size_t stored,
    struct k8s_error *err)
{
	struct k8s_patch_opts po = { .type = K8S_PATCH_MERGE };
	json_t *patch = pool_claim_patch(ctl->cfg, cx, pod, (long long)time(NULL),
	    stored, err);
	int rc;

	if (patch == NULL)
		return err->code;
	rc = k8s_patch(ctl->client, &k8s_res_pods, k8s_obj_namespace(pod),
	    k8s_obj_name(pod), &po, patch, NULL, err);
	json_decref(patch);
	if (rc == 0) {
		pthread_mutex_lock(&ctl->lock);
		json_object_set_new(ctl->claimed, k8s_obj_uid(pod), json_true());
		pthread_mutex_unlock(&ctl->lock);
		metric_inc(ctl->m_claims, "claimed");
		update_gauges(ctl, NULL, "", -1, 0);
	}
	return rc;
}

/*
 * After a claim patch that did not land (409, 404): whether the pod, read
 * afresh, carries this execution's claim anyway, made by another
 * controller that resumed it (two replicas, or a leader and a deposed
 * one): 1 it does (nothing to fall back from); 0 it does not, and it was
 * deleted at the version read, so that no claim lands after the
 * fallback; K8S_ECONFLICT it changed meanwhile (look again); or the
 * error.
 */
static int
claimed_anyway(struct controller *ctl, const char *ns, const char *pod,
    const char *cx_uid)
{
	struct k8s_error err;
	const char *uid;
	json_t *o = NULL;
	int rc = k8s_get(ctl->client, &k8s_res_pods, ns, pod, &o, &err);

	if (rc == K8S_ENOTFOUND)
		return 0;
	if (rc != 0)
		return rc;
	podspec_pod_execution(o, &uid);
	rc = uid != NULL && strcmp(uid, cx_uid) == 0;
	if (uid == NULL && !pool_holder_idle(o)) {
		/*
		 * No longer a pool's idle holder (a session claimed it): at
		 * its new version no execution's claim lands, and it is not
		 * ours to delete.
		 */
		rc = 0;
	} else if (uid == NULL) {
		/*
		 * Unclaimed as read: deleted at that version before the
		 * fallback, or another controller that read it too could
		 * still land this execution's claim after it, and the
		 * program run both warm and cold. Changed since: look again
		 * later.
		 */
		struct k8s_delete_opts del = { .grace_period_set = 1,
		    .grace_period_seconds = 0, .precondition_uid = k8s_obj_uid(o),
		    .precondition_rv = k8s_obj_rv(o) };

		rc = k8s_delete(ctl->client, &k8s_res_pods, ns, pod, &del, NULL,
		    &err);
		rc = rc == 0 || rc == K8S_ENOTFOUND ? 0 : rc == K8S_ECONFLICT ?
		    K8S_ECONFLICT : rc;
	}
	json_decref(o);
	return rc;
}

void
ctl_holder_release(struct controller *ctl, const char *pod_uid)
{
	pthread_mutex_lock(&ctl->lock);
	json_object_del(ctl->reserved, pod_uid);
	pthread_mutex_unlock(&ctl->lock);
}

int
ctl_cx_with_code(struct controller *ctl, json_t *cached, json_t **cx,
    size_t *stored, struct k8s_error *err)
{
	int rc;

	if (json_integer_value(json_object_get(cached, CTL_CACHED_CODE)) > 0) {
		/*
		 * The cache kept the code (trim_cx): no read on the way. A
		 * status write is at the cached resourceVersion, refused if the
		 * cache lagged; the output budget is from its size as stored,
		 * which the cache kept too (the copy is trimmed).
		 */
		*cx = json_deep_copy(cached);
		*stored = (size_t)json_integer_value(json_object_get(*cx,
		    CTL_CACHED_CODE));
		json_object_del(*cx, CTL_CACHED_CODE);
		json_object_del(*cx, CTL_CACHED_SHA);
		return 0;
	}
	if ((rc = k8s_get(ctl->client, &cx_resource, k8s_obj_namespace(cached),
	    k8s_obj_name(cached), cx, err)) != 0)
		return rc;
	*stored = jsonsize_value(*cx);
	return 0;
}

int
ctl_warm_start(struct controller *ctl, json_t *cached, long long seen_ms,
    int *rcp)
{
	json_t *pod = ctl_pick_holder(ctl, cached), *cx = NULL, *status = NULL, *fst;
	json_t *probe;
	struct k8s_error err;
	size_t stored = 0;
	int rc, handled = 1;

	if (pod == NULL)
		return 0;
	*rcp = 0;
	if ((rc = ctl_cx_with_code(ctl, cached, &cx, &stored, &err)) != 0) {
		*rcp = rc == K8S_ENOTFOUND ? 0 : rc;
		goto release;
	}
	fst = json_object_get(cx, "status");
	if (strcmp(k8s_obj_uid(cx) ? k8s_obj_uid(cx) : "", k8s_obj_uid(cached)) ||
	    json_object_get(fst, "podName") || json_object_get(fst, "startMode") ||
	    cx_phase_terminal(json_string_value(json_object_get(fst, "phase"))))
		goto release;	/* the cache lags: its event comes */
	/* Too large to carry, or refused: cold, which says why. */
	if ((probe = pool_claim_patch(ctl->cfg, cx, pod, 0, stored, &err)) ==
	    NULL) {
		handled = 0;
		goto release;
	}
	json_decref(probe);
	status = fst ? json_deep_copy(fst) : json_object();
	{
		char where[400];

		const struct ctl_profile *prof = ctl_config_profile(ctl->cfg,
		    json_string_value(json_object_get(json_object_get(cx, "spec"),
		    "runtime")));

		ctl_delivered_status(cx, status, pod, "Warm", NULL,
		    "in warm sandbox", "delivered to a warm sandbox", where);
		/* A holder of a profile with egress (holder_fits): its network. */
		if (prof != NULL && prof->negress > 0)
			ctl_grant_egress(status, k8s_obj_uid(pod), 0);
	}
	if ((rc = ctl_write_status(ctl, cx, status, NULL)) != 0) {
		*rcp = rc;
		goto release;
	}
	/* Named in the status: from here on the claim lands, or falls back. */
	rc = patch_claim(ctl, cx, pod, stored, &err);
	if (rc == 0) {
		char msg[400];

		metric_observe(ctl->m_claim_latency, (double)(clock_mono_ms() -
		    seen_ms) / 1000.0);
		snprintf(msg, sizeof(msg), "running in warm sandbox %s",
		    k8s_obj_name(pod));
		ctl_emit_event(ctl, cx, "Normal", "Started", msg);
		metric_inc(ctl->m_phase, "Running");
	} else if (rc == K8S_ECONFLICT || rc == K8S_ENOTFOUND) {
		int mine = claimed_anyway(ctl, k8s_obj_namespace(pod),
		    k8s_obj_name(pod), k8s_obj_uid(cx));

		*rcp = mine == 0 ? ctl_warm_fallback(ctl, cx, k8s_obj_name(pod),
		    "its warm sandbox was taken or went before the claim") :
		    mine == 1 ? 0 : mine;
	} else {
		/* Landed or not, unknown: ctl_warm_resume finds out. */
		log_warn("cannot claim a warm sandbox yet", "execution=%s/%s "
		    "pod=%s error=\"%s\"", k8s_obj_namespace(cx),
		    k8s_obj_name(cx), k8s_obj_name(pod), err.message);
		*rcp = rc;
	}
	json_decref(status);
	json_decref(cx);
	json_decref(pod);
	return 1;
release:
	ctl_holder_release(ctl, k8s_obj_uid(pod));
	json_decref(status);
	json_decref(cx);
	json_decref(pod);
	return handled;
}

int
ctl_warm_resume(struct controller *ctl, json_t *cached, json_t *cached_pod)
{
	const char *uid;
	json_t *cx = NULL, *pod = NULL;
	struct k8s_error err;
	char why[600];
	int rc;

	/*
	 * The pod cache may lag the execution's (its status write comes
	 * back first): only the pod read afresh says whether the claim
	 * landed. A fallback while it had would run the program twice.
	 */
	rc = k8s_get(ctl->client, &k8s_res_pods, k8s_obj_namespace(cached_pod),
	    k8s_obj_name(cached_pod), &pod, &err);
	if (rc == K8S_ENOTFOUND)
		return 0;	/* gone: the pod cache brings it to pod_vanished */
	if (rc != 0)
		return rc;
	podspec_pod_execution(pod, &uid);
	if (uid != NULL) {
		rc = strcmp(uid, k8s_obj_uid(cached)) == 0 ? 0 :
		    ctl_warm_fallback(ctl, cached, k8s_obj_name(pod),
		    "its warm sandbox was claimed by another execution");
		json_decref(pod);
		return rc;
	}
	/*
	 * Named, never claimed (the controller stopped between). The name is
	 * all the status keeps: the pod there now must still be an idle
	 * holder of a pool of this namespace, not one made anew under the
	 * name (the holder deleted, a pod of the tenant's own put there).
	 */
	if ((rc = ctl_pool_owns(ctl, pod)) < 0 || !pool_holder_idle(pod) || rc == 0) {
		rc = rc < 0 ? rc : ctl_warm_fallback(ctl, cached, k8s_obj_name(pod),
		    "its warm sandbox is no longer an idle sandbox of a pool here");
		json_decref(pod);
		return rc;
	}
	/* Claim it. */
	rc = k8s_get(ctl->client, &cx_resource, k8s_obj_namespace(cached),
	    k8s_obj_name(cached), &cx, &err);
	if (rc != 0) {
		json_decref(pod);
		return rc == K8S_ENOTFOUND ? 0 : rc;
	}
	if (strcmp(k8s_obj_uid(cx) ? k8s_obj_uid(cx) : "", k8s_obj_uid(cached)) ||
	    strcmp(json_string_value(json_object_get(json_object_get(cx,
	    "status"), "podName")) ? json_string_value(json_object_get(
	    json_object_get(cx, "status"), "podName")) : "",
	    k8s_obj_name(pod)) != 0) {
		json_decref(cx);
		json_decref(pod);
		return 0;
	}
	rc = patch_claim(ctl, cx, pod, 0, &err);
	if (rc == K8S_ECONFLICT || rc == K8S_ENOTFOUND || rc == K8S_ETOOBIG ||
	    rc == K8S_EINVAL) {
		/*
		 * Not landed: a conflict or a 404 writes nothing. But another
		 * controller may have landed the same claim meanwhile.
		 */
		int mine = claimed_anyway(ctl, k8s_obj_namespace(pod),
		    k8s_obj_name(pod), k8s_obj_uid(cx));

		snprintf(why, sizeof(why), "its warm sandbox could not be "
		    "claimed: %.500s", err.message);
		rc = mine == 0 ? ctl_warm_fallback(ctl, cx, k8s_obj_name(pod),
		    why) : mine == 1 ? 0 : mine;
	}
	json_decref(cx);
	json_decref(pod);
	return rc;
}
