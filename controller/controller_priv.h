/*
 * controller_priv.h - the controller's state, shared by controller.c (the
 * machinery) and reconcile.c (the logic). Not public.
 */
#ifndef AIRLOCK_CONTROLLER_PRIV_H
#define AIRLOCK_CONTROLLER_PRIV_H

#include <pthread.h>
#include <stdatomic.h>

#include "clock.h"
#include "controller.h"
#include "informer.h"
#include "podspec.h"
#include "pool.h"
#include "workqueue.h"

struct controller {
	struct k8s_client	*client;
	const struct ctl_config	*cfg;
	struct controller_opts	 opts;
	struct informer		*cx_inf;
	struct informer		*pod_inf;
	struct informer		*pool_inf;	/* indexed by namespace */
	struct informer		*session_inf;	/* CodeSessions (sessions.c) */
	struct informer		*guard_inf[3];	/* see ctl_guard_res */
	struct informer		*lease_inf;	/* kube-node-lease (nodes.c) */
	struct informer		*agent_inf;	/* agents' leases (agents.c); NULL: none */
	struct informer		*gate_inf;	/* egress gate pods (egress.c); NULL: none */
	struct egress_follow	*follow;	/* egressfollow.c; NULL: no host entries */
	struct workqueue	*queue;
	pthread_t		*threads;

	pthread_mutex_t		 lock;		/* leading, stopping, guarded */
	pthread_cond_t		 cond;
	atomic_int		 leading;
	atomic_llong		 trimmed_at;	/* clock_mono_ms() of the last trim */
	int			 stopping;
	/*
	 * ns -> when its guardrails were applied (mono ms, > 0), or, after a
	 * guardrail there changed, a mark (< 0, from guard_seq) that an
	 * apply begun before the change must not overwrite.
	 */
	json_t			*guarded;
	json_int_t		 guard_seq;
	/*
	 * uid -> clock_mono_ms(): executions this process ended itself, for
	 * as long as the cache may still show them in flight. Without it, the
	 * reconcile their pod's deletion triggers would read the stale cache
	 * (Pending, no pod) and make a new pod for a finished execution.
	 */
	json_t			*ended;
	json_t			*guard_owner;	/* its ownerReference, lock held */
	/*
	 * Whether a new leader has looked at every execution once: a leader
	 * is ready (controller_ready) only then.
	 */
	atomic_int		 first_pass_done;
	long long		 guard_owner_at;	/* when it was read */

	/*
	 * The warm path (pools.c), lock held: pool uid -> [holder creates
	 * not yet in the cache, when made]; pool uid -> [desired, ready] for
	 * the gauges; holder pod uid -> clock_mono_ms() when a worker picked
	 * it; claimed holder pod uid -> true until the pod goes.
	 */
	json_t			*pool_expect;
	json_t			*pool_counts;	/* pool uid -> [desired, ready] */
	long long		 pool_desired;	/* pool_counts' sums, kept as */
	long long		 pool_ready;	/* it changes (pools.c) */
	json_t			*pool_claimed;	/* pool uid -> ms of its last claim */
	json_t			*pool_gone;	/* "ns/name" -> [uid, ms]: deleted */
	json_t			*pool_keys;	/* pool uid -> its pool_key */
	json_t			*pool_netpols;	/* pool uid -> true: its egress policy set */
	/*
	 * pool uid -> [holders ended unused in a row, ms of the last, its
	 * preload failure message or null]: the refill's back-off
	 * (pool_fail_backoff); dropped once one of its holders is ready.
	 */
	json_t			*pool_failed;
	/*
	 * Namespace -> clock_mono_ms() of its next free quota retry slot
	 * (ctl_quota_retry_in), lock held.
	 */
	json_t			*quota_slot;
	json_t			*quota_gate;	/* ns -> ms of its next try */
	json_t			*reserved;
	/*
	 * A session's count held while its step runs (sessions.c, dispatch):
	 * session uid -> [count, "lastActivityTime"], under lock; at most
	 * CTL_HELD_MAX (none held past it: written at the step's start).
	 */
	json_t			*held;
	json_t			*claimed;
	/*
	 * Lending (lend.c), lock held: pool uid -> [holders taken back, mono
	 * ms of the last take-back, {"ns/name": uid} of the executions they
	 * were taken for]; execution uid -> [mono ms it last looked, whether
	 * it took any].
	 */
	json_t			*pool_lent;
	json_t			*lend_tried;
	long long		 lend_walked;	/* mono ms of the last look */

	struct metric		*m_pool, *m_claims, *m_claim_latency;
	struct metric		*m_taken_back;	/* lend.c */
	struct metric		*m_quota_refused;
	struct metric		*m_phase;
	struct metric		*m_finished;	/* namespace, runtime, phase */
	/*
	 * The audit (audit.c): uid -> clock_mono_ms() of the records this
	 * process wrote, until the mark is seen (lock held); audit_lock keeps
	 * records whole.
	 */
	json_t			*audited;
	long long		 audited_swept;	/* when it was last swept */
	pthread_mutex_t		 audit_lock;
	/*
	 * nodes.c, lock held: node -> [renewTime, ms seen, lease ms, lost];
	 * the lease watch's connects + relists at the last check.
	 */
	json_t			*nodes;
	unsigned long		 nodes_conns;
	json_t			*agents;	/* agents.c, lock held */
	struct metric		*m_nodes_lost;
	struct metric		*m_guard_passes;	/* guardrails applied */
	struct metric		*m_latency;
	struct metric		*m_depth;
	struct metric		*m_leader;
};

/* The guardrails' kinds: ServiceAccount, NetworkPolicy, ResourceQuota. */
extern const struct k8s_resource *const ctl_guard_res[3];

/* The condition of type in a status or a pod's status (borrowed), or NULL. */
json_t *ctl_find_condition(json_t *status, const char *type);


/*
 * Whether the API server's answer to a create means it will never succeed
 * as sent (the execution is then Rejected): any 4xx but 408, 409 and 429,
 * and a 403 for a quota that is full for now (ctl_quota_full).
 */
int ctl_create_refused(const struct k8s_error *err);
/*
 * status.egress: granted to the pod of uid pod_uid (hosts: proxied too),
 * which the node agent asks for before it lets a sandbox keep gVisor's
 * network stack (reconcile.c, docs/network.md).
 */
void ctl_grant_egress(json_t *status, const char *pod_uid, int hosts);

/*
 * Whether a create was refused because the namespace's quota has no room
 * now ("exceeded quota"), or its usage is not counted yet ("status unknown
 * for quota"): both pass, so the execution waits (reconcile.c quota_wait).
 */
int ctl_quota_full(const struct k8s_error *err);

#define CTL_FIELD_MANAGER	"airlock-controller"

/* nodes.c: lost nodes. The work queue's key of the periodic check. */
#define CTL_NODES_KEY		"nodes:"
struct informer *ctl_nodes_informer(struct controller *ctl);
int ctl_nodes_check(struct controller *ctl);

/*
 * agents.c: whether a node's agent is there to record a result. An agent
 * not heard from for AGENT_GAP_MS is away (its renewals come every
 * CX_AGENT_RENEW_S; a retry after a failed one within a quarter of it).
 */
#define AGENT_GAP_MS		15000
/* The agents' Lease informer, or NULL when opts.agent_lease_ns is unset. */
struct informer *ctl_agents_informer(struct controller *ctl);

/*
 * egress.c: the informer of the egress start gate's pods, or NULL when no
 * profile has egress (or the controller has no namespace of its own); the
 * ready ones' addresses, at most max, sorted.
 */
#define CTL_GATE_SELECTOR PODSPEC_GATE_LABEL "=" PODSPEC_GATE_COMPONENT
struct informer *ctl_gate_informer(struct controller *ctl);
size_t ctl_gate_addrs(struct controller *ctl, char addrs[][PODSPEC_GATE_ADDR],
    size_t max);
/*
 * egressfollow.c: the proxies' records counted into the status of each
 * execution with host entries (status.egress.proxied). The follower of
 * the gate pods' proxy logs, or NULL when no profile has a host entry or
 * there is no gate informer: then nothing is followed, nor written.
 */
struct egress_follow *ctl_egress_follow_new(struct controller *ctl,
    struct metrics *m);
/* Stops every stream first. NULL is fine. */
void ctl_egress_follow_free(struct egress_follow *f);
/*
 * Streams run only while leading: gaining the lead starts them (reading
 * back FOLLOW_LOOKBACK_S), losing it stops them and drops every count.
 */
void ctl_egress_follow_leading(struct egress_follow *f, int leading);
/* The gate pods changed (the gate informer's handlers): streams follow. */
void ctl_egress_follow_sync(struct egress_follow *f);
/* Execution uid is gone: its counts, if any, are dropped. */
void ctl_egress_forget(struct controller *ctl, const char *uid);
/*
 * Finished execution cx (cached): with host entries and no counts yet,
 * its counts written once they are in (one JSON patch testing its uid),
 * else its key comes back when they may be. 0, or the write's error.
 */
int ctl_egress_count(struct controller *ctl, json_t *cx, const char *key);
/* What the count needs of finished cx, kept in its trimmed copy out. */
void ctl_egress_trim_keep(json_t *out, json_t *cx);
/* An agent's Lease seen at now (clock_mono_ms()); for the tests too. */
void ctl_agent_lease_seen(struct controller *ctl, json_t *lease,
    long long now);
/*
 * A result of node's pod whose grace from the exit has exit_left ms to go
 * (<= 0: spent): how long to wait for it yet, in ms, counting no time the
 * node's agent was away (<= 0: end it now). When it ends because the
 * agent stayed away past opts.agent_absent_ms, msg says so, else it is "".
 */
long long ctl_agent_wait(struct controller *ctl, const char *node,
    long long exit_left, long long now, char *msg, size_t len);
/*
 * Whether pod (bound to a node) was on a lost node: its node is lost now
 * (its lease went unrenewed), or it was bound there before the node came
 * back from its last loss. If so, and msg is not NULL, what its execution
 * is told.
 */
int ctl_node_lost(struct controller *ctl, json_t *pod, char *msg,
    size_t msglen);
/* The same test, ctl->lock held, and no message. */
int ctl_pod_lost_locked(struct controller *ctl, json_t *pod);
/* Keep a pod about to be made off every lost node (a nodeAffinity). */
void ctl_avoid_lost_nodes(struct controller *ctl, json_t *pod);

/* status.c: what a reconcile writes. */
/*
 * Events and phase counts for transitions a reconcile decided, recorded
 * only once the status that holds the transition is written: a write
 * refused as stale (the cache lagged) retries the reconcile, which must
 * not announce the same transition twice.
 */
struct notes {
	int		 n;
	struct {
		const char	*type, *reason;
		char		 msg[600];
	}		 e[4];
	const char	*phase;		/* for airlock_executions_total */
};

/* Note an Event (at most 4 a reconcile) for ctl_write_status to emit. */
void ctl_note(struct notes *ns, const char *type, const char *reason,
    const char *msg);
/* An Event on the execution cx, now. Failures are logged, not returned. */
void ctl_emit_event(struct controller *ctl, json_t *cx, const char *type,
    const char *reason, const char *msg);
/* The same on any airlock.dev object of that kind. */
void ctl_emit_event_kind(struct controller *ctl, json_t *obj,
    const char *kind, const char *type, const char *reason, const char *msg);
/*
 * Write status to cx's status subresource: only the keys that changed, at
 * cx's resourceVersion (K8S_ECONFLICT if it moved on); on success emit
 * notes (may be NULL). A gone execution counts as written.
 */
int ctl_write_status(struct controller *ctl, json_t *cx, json_t *status,
    struct notes *notes);
/* The same for an object of res (a CodeSession: sessions.c). */
int ctl_write_status_of(struct controller *ctl, const struct k8s_resource *res,
    json_t *obj, json_t *status, struct notes *notes);
/*
 * End the execution cx here: phase, reason and message into status (the
 * caller's copy of cx's, changed in place), Complete True, an Event.
 * On a conflict (the cache lagged) the same end is written on the
 * execution read afresh, unless it ended meanwhile or is another of the
 * same name (then 0: nothing to write). 0, or the write's error.
 */
int ctl_finish(struct controller *ctl, json_t *cx, json_t *status,
    const char *phase, const char *reason, const char *msg);
/* Set or update condition type in status (lastTransitionTime on change). */
void ctl_set_condition(json_t *status, const char *type, const char *st,
    const char *reason, const char *msg, json_int_t gen);
/* A field of the condition of this type in status, or "". */
const char *ctl_condition_field(json_t *status, const char *type,
    const char *field);
void ctl_now_rfc3339(char out[CLOCK_RFC3339_LEN]);

/*
 * start.c: the start deadline. For the cached execution cx and its pod
 * (NULL: none cached) at now_ms (wall clock, ms): -1 when no start
 * deadline applies (it ended, its program started, its pod is
 * Unschedulable, which ends it at its own timeout, or there is no pod);
 * else the ms left until it passes (> 0); or 0 when it has passed, with
 * *reason (static: StartFailed; ResultLost for a warm claim, whose start
 * is not reported) and msg (the best reason known) set for the end.
 */
long long ctl_start_overdue(json_t *cx, json_t *pod, long long now_ms,
    const struct controller_opts *o, const char **reason, char *msg,
    size_t len);
/*
 * Act on it for cx and its pod (follow_pod; status: the reconcile's copy
 * of cx's): past the deadline by the cache, the pod is read afresh to
 * decide; then the execution ends (ctl_finish), said first, and the pod
 * (its uid as precondition) and ConfigMap are deleted. Not yet: the key
 * comes back at the deadline (workqueue_add_after). 1 when it ended it,
 * or the fresh read failed (*rc: the write's or the read's error); 0 to
 * go on.
 */
int ctl_start_deadline(struct controller *ctl, json_t *cx, json_t *pod,
    json_t *status, const char *key, int *rc);

/*
 * guardrails.c: the namespace's ServiceAccount, NetworkPolicy and quotas,
 * applied once per namespace (ctl->guarded). 0, or the API's error;
 * K8S_ECANCELED for a namespace terminating or gone; CTL_EUNCOUNTED while
 * the pods quota cannot be put in force yet (its status is the quota
 * controller's to count: no pod until it has).
 */
#define CTL_EUNCOUNTED	(-100)
/*
 * Whether err says the API server will never store the object so: its
 * own limit (413) or etcd's.
 */
int ctl_too_large(const struct k8s_error *err);
/* ctl_write_status: the API server will never store the execution so. */
#define CTL_ETOOLARGE	(-101)
/*
 * Delete cx (as stored, read afresh: its size is said), too large for any
 * status to be written, with a Warning Event TooLarge: its one end left.
 * 0, or the delete's error.
 */
int ctl_too_large_to_end(struct controller *ctl, json_t *cx);
int ctl_ensure_guardrails(struct controller *ctl, const char *ns);
/*
 * A guardrail in ns changed or went away: the next ctl_ensure_guardrails
 * there applies them again, and one already under way, which may have read
 * them before the change, does not count as done.
 */
void ctl_guard_changed(struct controller *ctl, const char *ns);

/*
 * pools.c: the warm path. Queue keys of pools are ctl_pool_key's,
 * "pool:<ns>/<name>"; the pod cache indexes a pool's idle holders under
 * ctl_pool_index, "pool:<ns>/<pool uid>" (and execution pods under
 * "<ns>/<execution>"), ctl_pod_index's value. The namespace is the pod's:
 * a pod in another namespace that carries a pool's uid label (its tenant
 * wrote it) is never that pool's holder. New strings.
 */
char *ctl_pool_key(const char *ns, const char *name);
char *ctl_pool_index(const char *ns, const char *pool_uid);
char *ctl_pod_index(json_t *pod);
/* The pool that owns a holder pod (its name), or NULL. */
const char *ctl_holder_pool(json_t *pod);
/* Is obj's controller ownerReference the object of kind and uid? */
int ctl_owned_by(json_t *obj, const char *kind, const char *uid);
/*
 * A holder in namespace ns of pool_uid was claimed (NULL: nothing). Its
 * replacement is made opts.refill_delay_ms later, so that starting a
 * sandbox (about half a second of both cores on the test node) does not
 * compete with the program the claim is for, which most often ends
 * within it. Only for a pool of that uid in ns (a pod's label is its
 * tenant's to write: no other namespace's pool is delayed, and no entry
 * is kept for a uid no pool has).
 */
void ctl_pool_claimed(struct controller *ctl, const char *ns, const char *pool_uid);
/*
 * A ready holder of a pool in obj's namespace matching obj's spec (an
 * execution's or a session's runtime and resources), reserved for this
 * worker for CTL_RESERVE_MS, or NULL; a new reference. Release the
 * reservation with ctl_holder_release once its claim landed or failed.
 */
json_t *ctl_pick_holder(struct controller *ctl, json_t *obj);
void ctl_holder_release(struct controller *ctl, const char *pod_uid);
/*
 * Conditions and fields of an execution delivered to a sandbox already
 * running (pod: a claimed holder, a session's pod): it is Running from
 * there on (the agent starts the program as soon as it sees it; its
 * result gives the program's own start). startMode mode, codeSha256 sha
 * (NULL: cx's code's), the Scheduled message "WHERE POD on node NODE"
 * (into msg too), the Started message started.
 */
void ctl_delivered_status(json_t *cx, json_t *status, json_t *pod,
    const char *mode, const char *sha, const char *where, const char *started,
    char msg[400]);
/*
 * Whether holder pod is its pool's, read afresh: the pool its controller
 * owner names, in the pod's namespace, has the uid its label says. 1, 0,
 * or a K8S_E* code when the pool cannot be read.
 */
int ctl_pool_owns(struct controller *ctl, json_t *pod);

/*
 * A create the namespace ns's quota refused (kind "execution" or "pool";
 * NULL: a try the gate held back, not counted): counted, and the ms to
 * wait before the next try, at least min_ms. Retries
 * in one namespace are spread CTL_QUOTA_SLOT_MS apart, however many wait:
 * a tenant that queues ten thousand executions over its quota costs the
 * API server a few refused creates a second, not thousands.
 */
#define CTL_QUOTA_SLOT_MS	500
long long ctl_quota_retry_in(struct controller *ctl, const char *ns,
    const char *kind, long long min_ms);

/*
 * Whether a create for something already waiting on ns's quota may be
 * tried now: 0, or the ms until it may (another in the namespace was
 * tried less than CTL_QUOTA_SLOT_MS ago). However a waiting key comes
 * back (its timer, an event, a resync), at most one such create per slot.
 */
long long ctl_quota_gate(struct controller *ctl, const char *ns);
/*
 * A pool went (pool borrowed): what pools.c kept of it and its gauges
 * are dropped, and its uid is kept a while so that its reconcile deletes
 * its idle holders, those made as it went among them.
 */
void ctl_pool_forget(struct controller *ctl, json_t *pool);
/*
 * What the informers keep of an execution, a pod and a pool (the
 * transforms of controller.c): only what reconcile reads, never a
 * tenant's own metadata. New references.
 */
json_t *ctl_trim_cx(json_t *cx);
json_t *ctl_trim_pod(json_t *pod);
json_t *ctl_trim_pool(json_t *pool);
/* A holder in ns of pool_uid appeared in the cache (a pool of ns's only). */
void ctl_pool_seen(struct controller *ctl, const char *ns, const char *pool_uid);
void ctl_holder_gone(struct controller *ctl, const char *pod_uid);
/* Make the pool's holders match spec.replicas; its status. */
int ctl_pool_reconcile(struct controller *ctl, const char *ns,
    const char *name);
/*
 * Execution cached (not started), with its code: a copy of the cache's
 * when it kept the code (trim_cx), else read afresh; *stored its size as
 * stored (the output budget's). 0 with *cx a new reference, or the read's
 * error.
 */
int ctl_cx_with_code(struct controller *ctl, json_t *cached, json_t **cx,
    size_t *stored, struct k8s_error *err);
/*
 * Run the execution cached (no pod yet, no startMode) in a ready holder:
 * 1 when it was taken care of here (*rcp: the reconcile's result), 0 to
 * run it cold. seen_ms: when the reconcile began, for the histogram.
 */
int ctl_warm_start(struct controller *ctl, json_t *cached, long long seen_ms,
    int *rcp);
/*
 * The execution names the holder pod in its status and pod carries no
 * claim of it: claim it (the controller stopped between the two writes),
 * or fall back to cold if another took it.
 */
int ctl_warm_resume(struct controller *ctl, json_t *cached, json_t *pod);
/* A holder a claim picked: other workers leave it (and lend.c) that long. */
#define CTL_RESERVE_MS	5000
/*
 * The pool's match key (pool_key), kept in ctl->pool_keys. 0, or -1 for
 * a pool no key fits.
 */
int ctl_pool_match_key(struct controller *ctl, json_t *pool,
    char key[POOL_KEY_LEN]);

/*
 * lend.c: holders are lent capacity (docs/warm-path.md). The execution
 * cx's pod (cached; not bound to a node) is unschedulable, the scheduler
 * said why: if a node was short of cpu or memory, take back idle holders
 * of any pool on the node where the fewest free what cx asks, each at the
 * resourceVersion read (a claim since wins), with a Normal Event
 * HoldersTakenBack on each pool, and hold the refill of their pools. At
 * most every 2 s per execution (10 s after a take-back), one look every
 * 50 ms in all, none while no pool keeps holders. Failures are logged;
 * nothing is returned, the execution's reconcile goes on.
 */
void ctl_pool_lend(struct controller *ctl, json_t *cx, json_t *pod,
    const char *why);
/*
 * Whether the refill of pool_uid is held: the ms to wait before looking
 * again (> 0), while an execution its holders were taken for waits
 * unscheduled; 0 when it may refill (the hold is dropped). *taken: the
 * holders taken back since the hold began.
 */
long long ctl_pool_lent(struct controller *ctl, const char *pool_uid,
    long long *taken);

/* Run it cold after all: startMode Cold, no podName (if it names pod). */
int ctl_warm_fallback(struct controller *ctl, json_t *cached,
    const char *pod, const char *why);

/*
 * The audit record of cx (audit.c; controller/docs/audit.md), made at now
 * (RFC 3339): deleted when it is recorded because it was deleted. cfg
 * gives a profile's image where the spec names none. Caller decrefs.
 */
json_t *ctl_audit_record(const struct ctl_config *cfg, json_t *cx,
    const char *now, int deleted);
/*
 * A finished execution (the cache's copy): its record, unless this
 * process wrote it already, then its mark (status.audited). 0, or the
 * mark's error: the reconcile is retried, and the record not repeated.
 */
int ctl_audit_finished(struct controller *ctl, json_t *cx);
/* Deleted (the cache's last copy): its record if it has no mark. */
void ctl_audit_deleted(struct controller *ctl, json_t *cx);
/*
 * The same for a session (kind CodeSessionAudit): its record once Ended,
 * then its mark; or when it is deleted unmarked.
 */
json_t *ctl_session_audit_record(const struct ctl_config *cfg, json_t *s,
    const char *now, int deleted);
int ctl_audit_session_finished(struct controller *ctl, json_t *s);
void ctl_audit_session_deleted(struct controller *ctl, json_t *s);

/*
 * sessions.c: CodeSessions (docs/sessions.md). Queue keys and the pod
 * cache's index of a session's pods: "session:<ns>/<name>". New string.
 */
char *ctl_session_key(const char *ns, const char *name);
/* The session that owns pod (its name; borrowed), or NULL. */
const char *ctl_session_of_pod(json_t *pod);
/* What the session cache keeps (controller.c): not spec.files. */
json_t *ctl_trim_session(json_t *session);
int ctl_session_reconcile(struct controller *ctl, const char *ns,
    const char *name);
/* Session s (borrowed) is gone: what was held for it goes (dispatch). */
void ctl_session_forget(struct controller *ctl, json_t *s);
/*
 * The execution cx (cached; status its copy) names a session: 1 when it
 * was dealt with here (*rcp: the reconcile's result), 0 when it names
 * none.
 */
int ctl_session_step(struct controller *ctl, json_t *cx, json_t *status,
    int *rcp);
/*
 * Step cx (cached; status its copy), cancelled while it runs: its
 * session's pod told to interrupt it (SESSION_ANN_CANCEL; the node agent
 * signals `warm --step`), before its Cancelled is written. 0 (done, or
 * nothing to tell: not a running step, no longer on the pod), or the
 * API's error.
 */
int ctl_session_interrupt(struct controller *ctl, json_t *cx, json_t *status);

/* Where the cache keeps the hash of an execution's program (trim_cx). */
#define CTL_CACHED_SHA	"airlock.dev/codeSha256"
/*
 * Where the cache kept the code too (trim_cx; at most this), the size of
 * the execution as the API server sent it, managedFields and all.
 */
#define CTL_CACHED_CODE	"airlock.dev/codeCached"
#define CTL_CACHED_CODE_MAX	(16 * 1024)



#endif
