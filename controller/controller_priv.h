/*
 * controller_priv.h - the controller's state, shared by controller.c (the
 * machinery) and reconcile.c (the logic). Not public.
 */
#ifndef AIRLOCK_CONTROLLER_PRIV_H
#define AIRLOCK_CONTROLLER_PRIV_H

#include <pthread.h>
#include <stdatomic.h>

#include "controller.h"
#include "informer.h"
#include "workqueue.h"

struct controller {
	struct k8s_client	*client;
	const struct ctl_config	*cfg;
	struct controller_opts	 opts;
	struct informer		*cx_inf;
	struct informer		*pod_inf;
	struct informer		*guard_inf[3];	/* see ctl_guard_res */
	struct workqueue	*queue;
	pthread_t		*threads;

	pthread_mutex_t		 lock;		/* leading, stopping, guarded */
	pthread_cond_t		 cond;
	atomic_int		 leading;
	atomic_llong		 trimmed_at;	/* clock_mono_ms() of the last trim */
	int			 stopping;
	json_t			*guarded;	/* ns -> true: guardrails applied */
	/*
	 * uid -> clock_mono_ms(): executions this process ended itself, for
	 * as long as the cache may still show them in flight. Without it, the
	 * reconcile their pod's deletion triggers would read the stale cache
	 * (Pending, no pod) and make a new pod for a finished execution.
	 */
	json_t			*ended;
	json_t			*guard_owner;	/* its ownerReference, lock held */
	long long		 guard_owner_at;	/* when it was read */

	struct metric		*m_phase;
	struct metric		*m_latency;
	struct metric		*m_depth;
	struct metric		*m_leader;
};

/* The guardrails' kinds: ServiceAccount, NetworkPolicy, ResourceQuota. */
extern const struct k8s_resource *const ctl_guard_res[3];

/* The condition of type in a status or a pod's status (borrowed), or NULL. */
json_t *ctl_find_condition(json_t *status, const char *type);

/* Succeeded, Failed, TimedOut or Cancelled: nothing more will run. */

/*
 * Whether the API server's answer to a create means it will never succeed
 * as sent (the execution is then Rejected): any 4xx but 408, 409 and 429,
 * and a 403 for a quota that is full for now.
 */
int ctl_create_refused(const struct k8s_error *err);

/* Where the cache keeps the hash of an execution's program (trim_cx). */
#define CTL_CACHED_SHA	"airlock.dev/codeSha256"



#endif
