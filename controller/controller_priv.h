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
	struct workqueue	*queue;
	pthread_t		*threads;

	pthread_mutex_t		 lock;		/* leading, stopping, guarded */
	pthread_cond_t		 cond;
	atomic_int		 leading;
	int			 stopping;
	json_t			*guarded;	/* ns -> true: guardrails applied */

	struct metric		*m_phase;
	struct metric		*m_latency;
	struct metric		*m_depth;
	struct metric		*m_leader;
};

#endif
