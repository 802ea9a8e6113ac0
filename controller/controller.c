#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "clock.h"
#include "cx.h"
#include "controller.h"
#include "controller_priv.h"
#include "informer.h"
#include "jsonsize.h"
#include "log.h"
#include "podspec.h"
#include "pool.h"
#include "session.h"
#include "sha256.h"
#include "workqueue.h"
#include "xmalloc.h"


static const double latency_bounds[] = { 0.001, 0.005, 0.01, 0.025, 0.05,
    0.1, 0.25, 0.5, 1, 2.5, 5 };

static void
enqueue_obj(struct controller *ctl, json_t *obj)
{
	const char *ns = k8s_obj_namespace(obj), *name = k8s_obj_name(obj);
	char *key;

	if (ns == NULL || name == NULL)
		return;
	key = xasprintf("%s/%s", ns, name);
	workqueue_add(ctl->queue, key);
	free(key);
}

static void
cx_add(void *arg, json_t *obj)
{
	enqueue_obj(arg, obj);
}

static void
cx_update(void *arg, json_t *old, json_t *cur)
{
	(void)old;
	enqueue_obj(arg, cur);
}

static void
cx_delete(void *arg, json_t *obj, int unknown)
{
	(void)unknown;
	ctl_audit_deleted(arg, obj);
	ctl_egress_forget(arg, k8s_obj_uid(obj));
	enqueue_obj(arg, obj);	/* the reconcile finds it gone and sweeps */
}

/* A holder of a pool: its pool's key, or NULL. */
static char *
holder_pool_key(json_t *pod)
{
	const char *pool = ctl_holder_pool(pod), *ns = k8s_obj_namespace(pod);

	return pool && ns ? ctl_pool_key(ns, pool) : NULL;
}

/*
 * A pod changed: reconcile the execution that owns it, and the pool whose
 * holder it is or was (a claim takes it from its pool, which makes a new
 * one).
 */
static void
pod_event(struct controller *ctl, json_t *old, json_t *pod)
{
	const char *owner = podspec_pod_execution(pod, NULL);
	const char *ns = k8s_obj_namespace(pod);
	char *key;

	if (ns == NULL)
		return;
	if (owner) {
		key = xasprintf("%s/%s", ns, owner);
		workqueue_add(ctl->queue, key);
		free(key);
	}
	if (ctl_session_of_pod(pod)) {
		key = ctl_session_key(ns, ctl_session_of_pod(pod));
		workqueue_add(ctl->queue, key);
		free(key);
	}
	if ((key = holder_pool_key(pod)) != NULL) {
		workqueue_add(ctl->queue, key);
		free(key);
	} else if (old && (key = holder_pool_key(old)) != NULL) {
		/* Claimed: the pool's status says so now; see ctl_pool_claimed. */
		ctl_pool_claimed(ctl, ns, json_string_value(json_object_get(
		    json_object_get(json_object_get(old, "metadata"), "labels"),
		    POOL_LABEL_UID)));
		workqueue_add(ctl->queue, key);
		free(key);
	}
}

static void
pod_add(void *arg, json_t *obj)
{
	const char *pool = json_string_value(json_object_get(json_object_get(
	    json_object_get(obj, "metadata"), "labels"), POOL_LABEL_UID));

	if (pool)
		ctl_pool_seen(arg, k8s_obj_namespace(obj), pool);
	pod_event(arg, NULL, obj);
}

static void
pod_update(void *arg, json_t *old, json_t *cur)
{
	pod_event(arg, old, cur);
}

static void
pod_delete(void *arg, json_t *obj, int unknown)
{
	(void)unknown;
	if (k8s_obj_uid(obj))
		ctl_holder_gone(arg, k8s_obj_uid(obj));
	pod_event(arg, NULL, obj);
}

static void
pool_event(struct controller *ctl, json_t *pool)
{
	const char *ns = k8s_obj_namespace(pool), *name = k8s_obj_name(pool);
	char *key;

	if (ns == NULL || name == NULL)
		return;
	key = ctl_pool_key(ns, name);
	workqueue_add(ctl->queue, key);
	free(key);
}

static void
pool_add(void *arg, json_t *obj)
{
	pool_event(arg, obj);
}

static void
pool_update(void *arg, json_t *old, json_t *cur)
{
	(void)old;
	pool_event(arg, cur);
}

static void
pool_delete(void *arg, json_t *obj, int unknown)
{
	(void)unknown;
	if (k8s_obj_uid(obj))
		ctl_pool_forget(arg, obj);
	pool_event(arg, obj);
}

static json_t *trim_metadata(json_t *md);

/*
 * Of a pool: trim_metadata's, and its spec and status whole (both held to
 * the CRD's schema, and its status written by this controller alone).
 */
json_t *
ctl_trim_pool(json_t *pool)
{
	json_t *out = json_copy(pool);

	if (out == NULL)
		return json_incref(pool);
	json_object_set_new(out, "metadata", trim_metadata(json_object_get(pool,
	    "metadata")));
	return out;
}

/*
 * Of a session: trim_metadata's, its spec but its files (up to 256 KiB:
 * read afresh when wanted), its status whole (the CRD holds it small).
 */
json_t *
ctl_trim_session(json_t *session)
{
	json_t *out = json_copy(session), *spec;

	if (out == NULL)
		return json_incref(session);
	json_object_set_new(out, "metadata", trim_metadata(json_object_get(session,
	    "metadata")));
	spec = json_copy(json_object_get(session, "spec"));
	if (spec) {
		json_object_del(spec, "files");
		json_object_set_new(out, "spec", spec);
	}
	return out;
}

static void
session_enqueue(void *arg, json_t *obj)
{
	struct controller *ctl = arg;
	char *key;

	if (k8s_obj_namespace(obj) == NULL || k8s_obj_name(obj) == NULL)
		return;
	key = ctl_session_key(k8s_obj_namespace(obj), k8s_obj_name(obj));
	workqueue_add(ctl->queue, key);
	free(key);
}

static void
session_update(void *arg, json_t *old, json_t *cur)
{
	(void)old;
	session_enqueue(arg, cur);
}

static void
session_delete(void *arg, json_t *obj, int unknown)
{
	(void)unknown;
	ctl_session_forget(arg, obj);
	ctl_audit_session_deleted(arg, obj);
	session_enqueue(arg, obj);	/* the reconcile finds it gone: its pod goes */
}

static char *
pool_ns(json_t *pool)
{
	return k8s_obj_namespace(pool) ? xstrdup(k8s_obj_namespace(pool)) : NULL;
}

/*
 * A guardrail changed or was deleted (a tenant who may edit its own
 * namespace may also try to loosen them): apply them again now, not at
 * the next resync. Our own apply of an unchanged object makes no event,
 * so this does not loop.
 */
static void
guard_event(struct controller *ctl, json_t *obj)
{
	const char *ns = k8s_obj_namespace(obj);
	char *key;

	if (ns == NULL)
		return;
	ctl_guard_changed(ctl, ns);
	pthread_mutex_lock(&ctl->lock);
	/*
	 * The garbage collector deletes guardrails whose owner is gone: read
	 * the owner afresh before applying, or a role made anew would see
	 * them applied with the old uid and deleted again, until the resync.
	 */
	ctl->guard_owner_at = 0;
	pthread_mutex_unlock(&ctl->lock);
	key = xasprintf("%s/", ns);
	workqueue_add(ctl->queue, key);
	free(key);
}

/*
 * Only a change that matters: what this controller applies or seeds. The
 * quota admission writes on every pod made (its count in status.used) are
 * not (each used to bring the namespace's five guardrail requests again,
 * for every execution).
 */
static void
guard_update(void *arg, json_t *old, json_t *cur)
{
	json_t *a = json_object_get(old, "digest"), *b = json_object_get(cur, "digest");

	if (a && b && json_equal(a, b))
		return;
	guard_event(arg, cur);
}

static void
guard_delete(void *arg, json_t *obj, int unknown)
{
	(void)unknown;
	guard_event(arg, obj);
}

/*
 * Of a guardrail, its name and a digest (SHA-256: a tenant may edit a
 * NetworkPolicy, and must not be able to hide an edit) of what this
 * controller applies or seeds: everything but metadata and status, the
 * labels, annotations, owners and deletion of metadata, and of a quota's
 * status its limits and which resources it counts, not the counts. What
 * changed is read from the server.
 */
static json_t *
trim_guard(json_t *obj)
{
	json_t *md = json_object_get(obj, "metadata");
	json_t *st = json_object_get(obj, "status");
	json_t *what = json_copy(obj), *counted = json_object(), *v;
	char hex[65], *s;
	const char *k;
	int ok;

	json_object_foreach(json_object_get(st, "used"), k, v)
		json_object_set_new(counted, k, json_true());
	json_object_del(what, "metadata");
	json_object_del(what, "status");
	json_object_set_new(what, "metadata", json_pack("{s:O*, s:O*, s:O*, s:O*}",
	    "labels", json_object_get(md, "labels"),
	    "annotations", json_object_get(md, "annotations"),
	    "ownerReferences", json_object_get(md, "ownerReferences"),
	    "deletionTimestamp", json_object_get(md, "deletionTimestamp")));
	json_object_set_new(what, "status", json_pack("{s:O*, s:o}", "hard",
	    json_object_get(st, "hard"), "counted", counted));
	s = json_dumps(what, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(what);
	ok = s != NULL && sha256_hex(s, strlen(s), hex) == 0;
	free(s);
	/* No digest, none kept: every update of it is then an event. */
	return json_pack("{s:{s:O*, s:O*, s:O*}, s:s*}", "metadata",
	    "name", json_object_get(md, "name"),
	    "namespace", json_object_get(md, "namespace"),
	    "resourceVersion", json_object_get(md, "resourceVersion"),
	    "digest", ok ? hex : NULL);
}

/*
 * Block while not leading, and until both caches hold a full list: a
 * worker that acted on a half-filled cache would take a live execution
 * for a deleted one and delete its pod. 0 to go on, -1 when stopping.
 */
static int
wait_leading(struct controller *ctl)
{
	/*
	 * Not the pools': a cluster without their CRD (an upgrade half
	 * done) runs every execution cold rather than none.
	 */
	while (!ctl->stopping && (informer_wait_synced(ctl->cx_inf, 1000) != 0 ||
	    informer_wait_synced(ctl->pod_inf, 1000) != 0))
		;
	pthread_mutex_lock(&ctl->lock);
	while (!ctl->leading && !ctl->stopping)
		pthread_cond_wait(&ctl->cond, &ctl->lock);
	pthread_mutex_unlock(&ctl->lock);
	return ctl->stopping ? -1 : 0;
}

/*
 * A burst of reconciles (a new leader looks at every execution) parses
 * each execution and pod it reads, tens of times the size of what the
 * caches keep, and glibc keeps the freed pages; the caches' values, each
 * made while its watch event's tree was alive, are scattered among them.
 * Once the queue drains, pack the caches (informer_compact) and give the
 * pages back; at most once a second, as it walks every arena.
 */
static void
trim_when_idle(struct controller *ctl)
{
	long long now = clock_mono_ms(), last = atomic_load(&ctl->trimmed_at);

	if (now - last < 1000 ||
	    !atomic_compare_exchange_strong(&ctl->trimmed_at, &last, now))
		return;
	(void)informer_compact(ctl->cx_inf);
	(void)informer_compact(ctl->pod_inf);
#if defined(__GLIBC__) && !defined(__SANITIZE_ADDRESS__)
	malloc_trim(0);
#endif
}

static void first_pass_check(struct controller *ctl);

static void *
worker(void *arg)
{
	struct controller *ctl = arg;
	char *key;

	while (wait_leading(ctl) == 0) {
		if (workqueue_get(ctl->queue, &key) != 0)
			break;
		if (!atomic_load(&ctl->leading)) {
			/* Lost the lease meanwhile: leave the key for later. */
			workqueue_done(ctl->queue, key);
			workqueue_add(ctl->queue, key);
			free(key);
			continue;
		}
		long long t0 = clock_mono_ms();
		int rc = controller_reconcile(ctl, key);

		metric_observe(ctl->m_latency, (double)(clock_mono_ms() - t0) / 1000.0);
		if (rc != 0) {
			log_debug("reconcile failed, requeued", "key=%s code=%d",
			    key, rc);
			workqueue_add_rate_limited(ctl->queue, key);
		} else {
			workqueue_forget(ctl->queue, key);
		}
		workqueue_done(ctl->queue, key);
		metric_set(ctl->m_depth, NULL, (double)workqueue_len(ctl->queue));
		free(key);
		first_pass_check(ctl);
		if (workqueue_len(ctl->queue) == 0)
			trim_when_idle(ctl);
	}
	return NULL;
}

/*
 * What the caches keep. Both informers hold objects packed as JSON text,
 * so what is kept costs about its serialized size, and the transforms
 * below keep only what reconcile reads. bench/controller.sh measures it.
 */

/* The condition of type in a pod's status, trimmed to what is read. */
static json_t *
pod_condition(json_t *ps, const char *type)
{
	json_t *c = ctl_find_condition(ps, type);

	if (c == NULL)
		return NULL;
	return json_pack("{s:O*, s:O*, s:O*, s:O*, s:O*}",
	    "type", json_object_get(c, "type"),
	    "status", json_object_get(c, "status"),
	    "reason", json_object_get(c, "reason"),
	    "message", json_object_get(c, "message"),
	    "lastTransitionTime", json_object_get(c, "lastTransitionTime"));
}

/* Annotation key (value v) kept on a trimmed object out. */
static void
keep_annotation(json_t *out, const char *key, json_t *v)
{
	json_t *md = json_object_get(out, "metadata");
	json_t *a = json_object_get(md, "annotations");

	if (a == NULL)
		json_object_set_new(md, "annotations", a = json_object());
	json_object_set(a, key, v);
}

/*
 * Of a pod: its identity and creation time, the label and annotation naming its execution
 * (not the code annotations, up to 192 KiB each), the node, the phase,
 * PodScheduled (and when: nodes.c), and the first container's state (and a failed preload's
 * message from before a restart); of a holder, its pool's
 * label and owner; of a session's pod, its label, owner and activeDeadlineSeconds.
 */
json_t *
ctl_trim_pod(json_t *pod)
{
	json_t *md = json_object_get(pod, "metadata");
	json_t *ps = json_object_get(pod, "status");
	json_t *uid = json_object_get(json_object_get(md, "labels"),
	    CX_LABEL_UID);
	json_t *ann = json_object_get(json_object_get(md, "annotations"),
	    CX_ANN_NAME);
	json_t *cs = json_object_get(json_array_get(json_object_get(ps,
	    "containerStatuses"), 0), "state");
	json_t *sched = pod_condition(ps, "PodScheduled");
	json_t *out;

	out = json_pack("{s:{s:O*, s:O*, s:O*, s:O*, s:O*}, s:{s:O*, s:O*},"
	    " s:{s:O*, s:O*}}",
	    "metadata", "name", json_object_get(md, "name"),
	    "namespace", json_object_get(md, "namespace"),
	    "uid", json_object_get(md, "uid"),
	    "resourceVersion", json_object_get(md, "resourceVersion"),
	    /* The start deadline counts from it (start.c). */
	    "creationTimestamp", json_object_get(md, "creationTimestamp"),
	    "spec", "nodeName", json_object_get(json_object_get(pod, "spec"),
	    "nodeName"),
	    /* A session's lifetime ends by it (session_pod_clock). */
	    "activeDeadlineSeconds", json_object_get(json_object_get(pod,
	    "spec"), "activeDeadlineSeconds"),
	    "status", "phase", json_object_get(ps, "phase"),
	    "startTime", json_object_get(ps, "startTime"));
	/* Why a pod ended (its own deadline, eviction), capped: said to the tenant. */
	if (out && json_is_string(json_object_get(ps, "reason")))
		json_object_set_new(json_object_get(out, "status"), "reason",
		    json_stringn(json_string_value(json_object_get(ps, "reason")),
		    strnlen(json_string_value(json_object_get(ps, "reason")), 128)));
	if (out && json_is_string(json_object_get(ps, "message")))
		json_object_set_new(json_object_get(out, "status"), "message",
		    json_stringn(json_string_value(json_object_get(ps, "message")),
		    strnlen(json_string_value(json_object_get(ps, "message")), 512)));
	if (out == NULL) {
		json_decref(sched);
		return json_incref(pod);
	}
	if (uid)
		json_object_set_new(json_object_get(out, "metadata"), "labels",
		    json_pack("{s:O}", CX_LABEL_UID, uid));
	{
		json_t *pl = json_object_get(json_object_get(md, "labels"),
		    POOL_LABEL_UID), *ref;
		json_t *sl = json_object_get(json_object_get(md, "labels"),
		    SESSION_LABEL_UID);
		size_t i;

		if (pl || sl) {
			json_t *l = json_object_get(json_object_get(out,
			    "metadata"), "labels");

			if (l == NULL)
				json_object_set_new(json_object_get(out,
				    "metadata"), "labels", l = json_object());
			if (pl)
				json_object_set(l, POOL_LABEL_UID, pl);
			/* Whether a holder has a network stack (pools.c). */
			if (pl && json_is_string(json_object_get(json_object_get(
			    pod, "spec"), "runtimeClassName")))
				json_object_set(json_object_get(out, "spec"),
				    "runtimeClassName", json_object_get(
				    json_object_get(pod, "spec"),
				    "runtimeClassName"));
			if (sl)
				json_object_set(l, SESSION_LABEL_UID, sl);
		}
		json_array_foreach(json_object_get(md, "ownerReferences"), i, ref)
			if (json_is_true(json_object_get(ref, "controller")))
				json_object_set_new(json_object_get(out,
				    "metadata"), "ownerReferences", json_pack(
				    "[{s:b, s:O*, s:O*, s:O*, s:O*}]", "controller",
				    1, "apiVersion", json_object_get(ref,
				    "apiVersion"), "kind", json_object_get(ref, "kind"),
				    "name", json_object_get(ref, "name"),
				    "uid", json_object_get(ref, "uid")));
		if (json_object_get(md, "deletionTimestamp"))
			json_object_set(json_object_get(out, "metadata"),
			    "deletionTimestamp", json_object_get(md,
			    "deletionTimestamp"));
	}
	/* A name, or nothing: a pod not of this controller's may carry more. */
	if (json_is_string(ann) && json_string_length(ann) <= 253)
		json_object_set_new(json_object_get(out, "metadata"),
		    "annotations", json_pack("{s:O}", CX_ANN_NAME, ann));
	/* A session's pod: the step on it (a uid), for sessions.c. */
	{
		json_t *step = json_object_get(json_object_get(md, "annotations"),
		    SESSION_ANN_STEP);

		if (json_is_string(step) && json_string_length(step) <= 64 &&
		    json_object_get(json_object_get(md, "labels"),
		    SESSION_LABEL_UID))
			keep_annotation(out, SESSION_ANN_STEP, step);
	}
	/* A holder's egress stamp (pools.c's holder_fits): 16 hex digits. */
	{
		json_t *st = json_object_get(json_object_get(md, "annotations"),
		    POOL_ANN_EGRESS);

		if (json_is_string(st) && json_string_length(st) <= POOL_STAMP_LEN &&
		    json_object_get(json_object_get(md, "labels"), POOL_LABEL_UID))
			keep_annotation(out, POOL_ANN_EGRESS, st);
	}
	if (sched)
		json_object_set_new(json_object_get(out, "status"),
		    "conditions", json_pack("[o]", sched));
	if (cs)
		json_object_set_new(json_object_get(out, "status"),
		    "containerStatuses", json_pack("[{s:O, s:O*}]", "state", cs,
		    "ready", json_object_get(json_array_get(json_object_get(ps,
		    "containerStatuses"), 0), "ready")));
	{
		/*
		 * A restarted holder's failed preload, capped: why the pool
		 * never gets ready (pool_holder_preload_failed). Nothing else
		 * of the last end.
		 */
		const char *m = json_string_value(json_object_get(json_object_get(
		    json_object_get(json_array_get(json_object_get(ps,
		    "containerStatuses"), 0), "lastState"), "terminated"), "message"));
		json_t *c0 = json_array_get(json_object_get(json_object_get(out,
		    "status"), "containerStatuses"), 0);

		if (c0 && m && strncmp(m, POOL_PRELOAD_FAILED,
		    strlen(POOL_PRELOAD_FAILED)) == 0)
			json_object_set_new(c0, "lastState", json_pack("{s:{s:o}}",
			    "terminated", "message", json_stringn(m, strnlen(m,
			    POOL_PRELOAD_MSG_MAX))));
	}
	return out;
}

/*
 * A pod's index value: the key ("ns/name") of the execution it ran; for a
 * holder no execution has claimed, its pool's (ctl_pool_index, in the
 * pod's own namespace).
 */
char *
ctl_pod_index(json_t *pod)
{
	const char *ns = k8s_obj_namespace(pod);
	const char *owner = podspec_pod_execution(pod, NULL);
	const char *pool = json_string_value(json_object_get(json_object_get(
	    json_object_get(pod, "metadata"), "labels"), POOL_LABEL_UID));

	if (ns && owner)
		return xasprintf("%s/%s", ns, owner);
	if (ns && ctl_session_of_pod(pod))
		return ctl_session_key(ns, ctl_session_of_pod(pod));
	return pool ? ctl_pool_index(ns, pool) : NULL;
}

/*
 * Of an object's metadata, what reconcile reads: its identity, generation,
 * creation and deletion, and of its annotations only the one admission
 * writes (who created it; capped all the same). Never the tenant's own
 * labels, annotations, finalizers or managedFields: metadata stays
 * writable after admission, up to etcd's limit, and 200 executions with
 * 250 KB annotations and 1800 labels each took 131 MiB here (issue 27).
 * A new reference.
 */
#define CREATED_BY_MAX	512

/*
 * The created-by annotation of md, capped at CREATED_BY_MAX bytes, cut
 * between characters (a cut inside one would leave no string at all), as
 * a new {annotation: value} object; NULL for none.
 */
static json_t *
created_by(json_t *md)
{
	json_t *by = json_object_get(json_object_get(md, "annotations"),
	    CX_ANN_CREATED_BY);
	const char *s = json_string_value(by);
	size_t n;

	if (s == NULL)
		return NULL;
	n = strnlen(s, CREATED_BY_MAX);
	if (s[n] != '\0')
		while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
			n--;
	return json_pack("{s:s%}", CX_ANN_CREATED_BY, s, n);
}

static json_t *
trim_metadata(json_t *md)
{
	json_t *out = json_object(), *by = created_by(md);
	static const char *const keep[] = { "name", "namespace", "uid",
	    "resourceVersion", "generation", "creationTimestamp",
	    "deletionTimestamp" };

	for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++) {
		json_t *v = json_object_get(md, keep[i]);

		if (v && (json_is_string(v) || json_is_integer(v)))
			json_object_set(out, keep[i], v);
	}
	if (by)
		json_object_set_new(out, "annotations", by);
	return out;
}

/*
 * Of an execution in flight: all but its code and its metadata beyond
 * trim_metadata's: the cache grows neither with the size of the code nor
 * with what a tenant writes into metadata.
 *
 * Of a finished one, which is most of the cache in a steady state (they
 * stay for ttlSecondsAfterFinished, an hour by default, while their pods
 * are gone): only what the TTL and deletion read. Not the code, not the
 * output (up to 2 MiB), not the conditions. Status writes are patches of
 * what changed (write_status), and finished executions get none, so
 * nothing is lost on the server by not holding it here.
 */
/* What the audit record of finished cx needs, into its trimmed out. */
static void
trim_keep_audit(json_t *out, json_t *cx)
{
	/*
	 * egress too: the terminal visit before the audit deletes a granted
	 * execution's NetworkPolicy (reconcile.c), whatever its profile says
	 * by then.
	 */
	static const char *const st_keys[] = { "reason", "exitCode",
	    "durationMillis", "peakMemoryBytes", "cpuTimeMillis", "startMode",
	    "codeSha256", "egress" };
	json_t *st = json_object_get(cx, "status");
	json_t *ost = json_object_get(out, "status");
	json_t *spec = json_object_get(cx, "spec");
	json_t *ospec = json_object_get(out, "spec");
	json_t *by = created_by(json_object_get(cx, "metadata"));
	char sha[65];

	for (size_t i = 0; i < sizeof(st_keys) / sizeof(st_keys[0]); i++)
		if (json_object_get(st, st_keys[i]))
			json_object_set(ost, st_keys[i], json_object_get(st,
			    st_keys[i]));
	if (json_object_get(spec, "runtime"))
		json_object_set(ospec, "runtime", json_object_get(spec, "runtime"));
	if (json_object_get(spec, "image"))
		json_object_set(ospec, "image", json_object_get(spec, "image"));
	if (by)
		json_object_set_new(json_object_get(out, "metadata"), "annotations",
		    by);
	if (!json_is_string(json_object_get(st, "codeSha256"))) {
		podspec_code_sha256(cx, sha);
		json_object_set_new(out, CTL_CACHED_SHA, json_string(sha));
	}
}

json_t *
ctl_trim_cx(json_t *cx)
{
	json_t *md = json_object_get(cx, "metadata");
	json_t *st = json_object_get(cx, "status");
	json_t *out;

	if (cx_phase_terminal(json_string_value(json_object_get(st, "phase")))) {
		out = json_pack("{s:{s:O*, s:O*, s:O*, s:O*, s:O*, s:O*},"
		    " s:{s:O*}, s:{s:O*, s:O*, s:O*, s:O*}}",
		    "metadata", "name", json_object_get(md, "name"),
		    "namespace", json_object_get(md, "namespace"),
		    "uid", json_object_get(md, "uid"),
		    "resourceVersion", json_object_get(md, "resourceVersion"),
		    "generation", json_object_get(md, "generation"),
		    "deletionTimestamp", json_object_get(md,
		    "deletionTimestamp"),
		    "spec", "ttlSecondsAfterFinished", json_object_get(
		    json_object_get(cx, "spec"), "ttlSecondsAfterFinished"),
		    "status", "phase", json_object_get(st, "phase"),
		    "completionTime", json_object_get(st, "completionTime"),
		    "podName", json_object_get(st, "podName"),
		    "audited", json_object_get(st, "audited"));
		/*
		 * Until its audit record is written (audit.c): what the
		 * record says, and then no more.
		 */
		if (out && !json_is_true(json_object_get(st, "audited")))
			trim_keep_audit(out, cx);
		if (out)
			ctl_egress_trim_keep(out, cx);
		/* Not a cold pod's name: it is the uid's (named_pod). */
		if (out && k8s_obj_uid(cx)) {
			char *cold = podspec_pod_name(k8s_obj_uid(cx));
			const char *pn = json_string_value(json_object_get(st,
			    "podName"));

			if (pn && strcmp(pn, cold) == 0)
				json_object_del(json_object_get(out, "status"),
				    "podName");
			free(cold);
		}
		/* A session's step: its session's queue (sessions.c) still counts it. */
		if (out && json_is_string(json_object_get(json_object_get(cx,
		    "spec"), "session")))
			json_object_set(json_object_get(out, "spec"), "session",
			    json_object_get(json_object_get(cx, "spec"), "session"));
		if (out)
			return out;
	}
	/* Shallow copies: the rest is shared, not duplicated. */
	out = json_copy(cx);
	/*
	 * Nor live output (spec.output.stream: up to ~1 MiB in a running
	 * execution's status); nothing here reads it.
	 */
	if (json_object_get(st, "stdout") || json_object_get(st, "stderr")) {
		json_t *s2 = json_copy(st);

		json_object_del(s2, "stdout");
		json_object_del(s2, "stderr");
		json_object_set_new(out, "status", s2);
	}
	/*
	 * Not the code (up to ~1 MiB an execution): the pod is made from the
	 * execution read afresh (create_pod), and nothing else here reads it
	 * but the program's hash, kept.
	 */
	{
		static const char *const code[] = { "source", "files", "stdin",
		    "args", "env" };
		json_t *spec = json_copy(json_object_get(cx, "spec"));
		char sha[65];

		/*
		 * Except a small one not started yet: a warm start claims from
		 * the cache (pools.c), with no read on its path. It keeps it
		 * for the moments until its start is written.
		 */
		if (json_object_get(st, "startMode") == NULL &&
		    json_object_get(st, "phase") == NULL &&
		    jsonsize_value(spec) <= CTL_CACHED_CODE_MAX)
			/* With its size as stored: the output budget's. */
			json_object_set_new(out, CTL_CACHED_CODE, json_integer(
			    (json_int_t)jsonsize_value(cx)));
		else
			for (size_t i = 0; i < sizeof(code) / sizeof(code[0]); i++)
				json_object_del(spec, code[i]);
		if (spec)
			json_object_set_new(out, "spec", spec);
		/* Once the status has it (the same: the spec is immutable), not twice. */
		if (!json_is_string(json_object_get(st, "codeSha256"))) {
			podspec_code_sha256(cx, sha);
			json_object_set_new(out, CTL_CACHED_SHA, json_string(sha));
		}
	}
	json_object_set_new(out, "metadata", trim_metadata(md));
	return out;
}

/* An execution's index value: its session's key (a step), else none. */
static char *
cx_index(json_t *cx)
{
	const char *s = json_string_value(json_object_get(json_object_get(cx,
	    "spec"), "session"));
	const char *ns = k8s_obj_namespace(cx);

	return s && ns ? ctl_session_key(ns, s) : NULL;
}

/* A list page's most: two of the largest objects etcd stores, and room. */
#define LIST_PAGE_BYTES	(4u << 20)

struct controller *
controller_new(struct k8s_client *c, const struct ctl_config *cfg,
    struct metrics *m, const struct controller_opts *opts)
{
	struct controller *ctl = xcalloc(1, sizeof(*ctl));
	/*
	 * Relists in pages of at most LIST_PAGE_BYTES: an execution may take
	 * 1.5 MiB as stored, and a tenant's 200 of 430 KB each, listed in
	 * the client's 32 MiB pages, took the controller to 124 MiB at its
	 * start (bench/hostile.sh); the cache keeps under a kilobyte of each.
	 */
	struct informer_opts cxo = { .res = &cx_resource, .transform = ctl_trim_cx,
	    .packed = 1, .page_bytes = LIST_PAGE_BYTES, .index = cx_index };
	struct informer_opts po = { .res = &k8s_res_pods, .transform = ctl_trim_pod,
	    .packed = 1, .index = ctl_pod_index, .page_bytes = LIST_PAGE_BYTES,
	    .label_selector = CX_LABEL_MANAGED "=" CX_MANAGER "," 
	    CX_LABEL_COMPONENT "=" CX_COMPONENT };
	struct informer_handlers cxh = { cx_add, cx_update, cx_delete, ctl };
	struct informer_handlers ph = { pod_add, pod_update, pod_delete, ctl };
	struct informer_opts go = { .transform = trim_guard, .packed = 1,
	    .label_selector = CX_LABEL_MANAGED "=" CX_MANAGER };
	struct informer_handlers gh = { NULL, guard_update, guard_delete, ctl };
	struct informer_opts plo = { .res = &pool_resource, .packed = 1,
	    .index = pool_ns, .transform = ctl_trim_pool,
	    .page_bytes = LIST_PAGE_BYTES };
	struct informer_handlers plh = { pool_add, pool_update, pool_delete, ctl };
	struct informer_opts so = { .res = &session_resource, .packed = 1,
	    .transform = ctl_trim_session, .page_bytes = LIST_PAGE_BYTES };
	struct informer_handlers sh = { session_enqueue, session_update,
	    session_delete, ctl };

	ctl->client = c;
	ctl->cfg = cfg;
	if (opts)
		ctl->opts = *opts;
	if (ctl->opts.workers <= 0)
		ctl->opts.workers = 2;
	if (ctl->opts.resync_ms <= 0)
		ctl->opts.resync_ms = 60000;
	if (ctl->opts.result_grace_ms <= 0)
		ctl->opts.result_grace_ms = 30000;
	if (ctl->opts.start_deadline_ms <= 0)
		ctl->opts.start_deadline_ms = 120000;
	if (ctl->opts.agent_absent_ms <= 0)
		ctl->opts.agent_absent_ms = 300000;
	if (ctl->opts.refill_delay_ms < 0)
		ctl->opts.refill_delay_ms = 0;
	cxo.ns = po.ns = ctl->opts.namespace;
	cxo.resync_ms = ctl->opts.resync_ms;
	ctl->cx_inf = informer_new(c, &cxo, &cxh);
	ctl->pod_inf = informer_new(c, &po, &ph);
	plo.ns = ctl->opts.namespace;
	plo.resync_ms = ctl->opts.resync_ms;
	ctl->pool_inf = informer_new(c, &plo, &plh);
	so.ns = ctl->opts.namespace;
	so.resync_ms = ctl->opts.resync_ms;
	ctl->session_inf = informer_new(c, &so, &sh);
	go.ns = ctl->opts.namespace;
	for (int i = 0; i < 3; i++) {
		go.res = ctl_guard_res[i];
		ctl->guard_inf[i] = informer_new(c, &go, &gh);
	}
	ctl->lease_inf = ctl_nodes_informer(ctl);
	ctl->agent_inf = ctl_agents_informer(ctl);
	ctl->gate_inf = ctl_gate_informer(ctl);
	ctl->follow = ctl_egress_follow_new(ctl, m);
	ctl->queue = workqueue_new(NULL);
	ctl->guarded = json_object();
	ctl->ended = json_object();
	ctl->audited = json_object();
	ctl->pool_expect = json_object();
	ctl->pool_counts = json_object();
	ctl->pool_claimed = json_object();
	ctl->pool_failed = json_object();
	ctl->pool_gone = json_object();
	ctl->pool_lent = json_object();
	ctl->lend_tried = json_object();
	ctl->pool_keys = json_object();
	ctl->pool_netpols = json_object();
	ctl->quota_slot = json_object();
	ctl->quota_gate = json_object();
	ctl->reserved = json_object();
	ctl->held = json_object();
	ctl->claimed = json_object();
	pthread_mutex_init(&ctl->lock, NULL);
	pthread_mutex_init(&ctl->audit_lock, NULL);
	pthread_cond_init(&ctl->cond, NULL);
	if (ctl->opts.audit_fd <= 0)
		ctl->opts.audit_fd = 1;
	ctl->m_phase = metrics_counter(m, "airlock_executions_total",
	    "Executions that reached a phase, by phase.", "phase");
	{
		static const char *const names[] = { "namespace", "runtime", "phase" };

		/* Capped: a series per namespace, runtime and phase. */
		ctl->m_finished = metrics_counter_labels(m,
		    "airlock_executions_finished_total", "Executions audited "
		    "(finished, or deleted before), by namespace, runtime and "
		    "phase.", names, 3, 5000);
	}
	ctl->m_nodes_lost = metrics_counter(m, "airlock_nodes_lost_total",
	    "Nodes found lost: their lease was not renewed in time.", NULL);
	ctl->m_guard_passes = metrics_counter(m, "airlock_guardrail_passes_total",
	    "Passes that applied a namespace's guardrails (ServiceAccount, "
	    "NetworkPolicy, quotas).", NULL);
	ctl->m_latency = metrics_histogram(m, "airlock_reconcile_seconds",
	    "Time one reconcile took.", latency_bounds,
	    sizeof(latency_bounds) / sizeof(latency_bounds[0]));
	ctl->m_depth = metrics_gauge(m, "airlock_workqueue_depth",
	    "Keys waiting in the work queue.", NULL);
	ctl->m_leader = metrics_gauge(m, "airlock_leader",
	    "1 while this replica holds the lease.", NULL);
	ctl->m_pool = metrics_gauge(m, "airlock_pool_sandboxes",
	    "Warm sandboxes of every pool: desired (spec.replicas), ready "
	    "(idle, running), claimed (running an execution).", "state");
	ctl->m_quota_refused = metrics_counter(m, "airlock_quota_refused_total",
	    "Creates the namespace's quota refused, by what waits: an "
	    "execution's pod, or a pool's sandbox.", "kind");
	ctl->m_claims = metrics_counter(m, "airlock_warm_claims_total",
	    "Warm claims: claimed, or fallback (the execution ran cold).",
	    "result");
	ctl->m_taken_back = metrics_counter(m,
	    "airlock_pool_sandboxes_taken_back_total", "Idle warm sandboxes "
	    "deleted to make room for an execution no node had room for.",
	    NULL);
	ctl->m_claim_latency = metrics_histogram(m, "airlock_warm_claim_seconds",
	    "From the reconcile that found a ready sandbox to its claim landed.",
	    latency_bounds, sizeof(latency_bounds) / sizeof(latency_bounds[0]));
	return ctl;
}

int
controller_start(struct controller *ctl)
{
	if (informer_start(ctl->cx_inf) != 0 ||
	    informer_start(ctl->pod_inf) != 0 ||
	    informer_start(ctl->pool_inf) != 0 ||
	    informer_start(ctl->session_inf) != 0 ||
	    informer_start(ctl->lease_inf) != 0 ||
	    (ctl->agent_inf && informer_start(ctl->agent_inf) != 0) ||
	    (ctl->gate_inf && informer_start(ctl->gate_inf) != 0))
		return K8S_EINVAL;
	for (int i = 0; i < 3; i++)
		if (informer_start(ctl->guard_inf[i]) != 0)
			return K8S_EINVAL;
	ctl->threads = xcalloc((size_t)ctl->opts.workers, sizeof(pthread_t));
	for (int i = 0; i < ctl->opts.workers; i++)
		pthread_create(&ctl->threads[i], NULL, worker, ctl);
	return 0;
}

void
controller_set_leading(struct controller *ctl, int leading)
{
	json_t *keys = leading ? informer_keys(ctl->cx_inf) : NULL, *k;
	size_t i;

	/*
	 * A new leader looks at everything once: queued before it leads, so
	 * that an empty queue while leading means the first pass is done.
	 */
	json_array_foreach(keys, i, k)
		workqueue_add(ctl->queue, json_string_value(k));
	json_decref(keys);
	keys = leading ? informer_keys(ctl->pool_inf) : NULL;
	json_array_foreach(keys, i, k) {
		char *pk = xasprintf("pool:%s", json_string_value(k));

		workqueue_add(ctl->queue, pk);
		free(pk);
	}
	json_decref(keys);
	keys = leading ? informer_keys(ctl->session_inf) : NULL;
	json_array_foreach(keys, i, k) {
		char *sk = xasprintf("session:%s", json_string_value(k));

		workqueue_add(ctl->queue, sk);
		free(sk);
	}
	json_decref(keys);
	if (leading)
		workqueue_add(ctl->queue, CTL_NODES_KEY);
	ctl_egress_follow_leading(ctl->follow, leading);
	pthread_mutex_lock(&ctl->lock);
	atomic_store(&ctl->first_pass_done, 0);
	atomic_store(&ctl->leading, leading);
	pthread_cond_broadcast(&ctl->cond);
	pthread_mutex_unlock(&ctl->lock);
	metric_set(ctl->m_leader, NULL, leading ? 1 : 0);
}

/*
 * Leading, synced (every execution listed is queued), and the queue ran
 * dry with no worker busy: each has been looked at once. Latched; tried by
 * /readyz and by each worker as it finishes a key, so that a busy queue
 * dry only for a moment between probes still counts.
 */
static void
first_pass_check(struct controller *ctl)
{
	if (!atomic_load(&ctl->leading) || atomic_load(&ctl->first_pass_done) ||
	    informer_wait_synced(ctl->cx_inf, 0) != 0 ||
	    informer_wait_synced(ctl->pod_inf, 0) != 0 ||
	    workqueue_busy(ctl->queue) != 0)
		return;
	if (!atomic_exchange(&ctl->first_pass_done, 1))
		log_info("ready: every execution looked at once since leading");
}

int
controller_ready(struct controller *ctl)
{
	if (informer_wait_synced(ctl->cx_inf, 0) != 0 ||
	    informer_wait_synced(ctl->pod_inf, 0) != 0)
		return 0;
	if (!atomic_load(&ctl->leading))
		return 1;
	first_pass_check(ctl);
	return atomic_load(&ctl->first_pass_done);
}

void
controller_stop(struct controller *ctl)
{
	pthread_mutex_lock(&ctl->lock);
	ctl->stopping = 1;
	pthread_cond_broadcast(&ctl->cond);
	pthread_mutex_unlock(&ctl->lock);
	workqueue_shutdown(ctl->queue);
	for (int i = 0; ctl->threads && i < ctl->opts.workers; i++)
		pthread_join(ctl->threads[i], NULL);
	ctl_egress_follow_leading(ctl->follow, 0);
	informer_stop(ctl->cx_inf);
	informer_stop(ctl->pod_inf);
	informer_stop(ctl->pool_inf);
	informer_stop(ctl->session_inf);
	informer_stop(ctl->lease_inf);
	if (ctl->agent_inf)
		informer_stop(ctl->agent_inf);
	if (ctl->gate_inf)
		informer_stop(ctl->gate_inf);
	for (int i = 0; i < 3; i++)
		informer_stop(ctl->guard_inf[i]);
}

void
controller_free(struct controller *ctl)
{
	if (ctl == NULL)
		return;
	ctl_egress_follow_free(ctl->follow);
	informer_free(ctl->cx_inf);
	informer_free(ctl->pod_inf);
	informer_free(ctl->pool_inf);
	informer_free(ctl->session_inf);
	informer_free(ctl->lease_inf);
	informer_free(ctl->agent_inf);
	informer_free(ctl->gate_inf);
	json_decref(ctl->nodes);
	json_decref(ctl->agents);
	for (int i = 0; i < 3; i++)
		informer_free(ctl->guard_inf[i]);
	workqueue_free(ctl->queue);
	json_decref(ctl->guarded);
	json_decref(ctl->ended);
	json_decref(ctl->audited);
	pthread_mutex_destroy(&ctl->audit_lock);
	json_decref(ctl->pool_expect);
	json_decref(ctl->pool_counts);
	json_decref(ctl->pool_claimed);
	json_decref(ctl->pool_failed);
	json_decref(ctl->pool_gone);
	json_decref(ctl->pool_lent);
	json_decref(ctl->lend_tried);
	json_decref(ctl->pool_keys);
	json_decref(ctl->pool_netpols);
	json_decref(ctl->quota_slot);
	json_decref(ctl->quota_gate);
	json_decref(ctl->reserved);
	json_decref(ctl->held);
	json_decref(ctl->claimed);
	json_decref(ctl->guard_owner);
	free(ctl->threads);
	pthread_mutex_destroy(&ctl->lock);
	pthread_cond_destroy(&ctl->cond);
	free(ctl);
}
