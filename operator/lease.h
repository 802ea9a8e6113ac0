/*
 * lease.h - leader election on a coordination.k8s.io/v1 Lease.
 *
 * Several replicas run lease_run() on the same Lease; at most one holds it
 * and acts. The holder renews every retry period; a replica that cannot
 * renew within the renew deadline stops acting at once (lease_is_leader()
 * turns false and on_stopped_leading runs) even if the API server is slow
 * to answer. Others take over once the lease has not changed for its
 * duration, measured on their own monotonic clock, never by comparing
 * timestamps written by another machine. On lease_stop() a holder releases
 * the lease so a successor need not wait. See operator/docs/lease.md for
 * the timing argument (takeover within leaseDuration of the holder's last
 * renewal, and never while it may still act).
 *
 * Callbacks run on lease_run()'s thread and must return promptly: while
 * they run, nothing is renewed. The lease makes its own client from the
 * one given, with requests that time out at the renew deadline and are not
 * retried, so on_stopped_leading runs at most a request's time after the
 * deadline even when the API server hangs.
 *
 * Thread-safe: lease_run() blocks in one thread, the rest may be called
 * from any.
 */
#ifndef AIRLOCK_LEASE_H
#define AIRLOCK_LEASE_H

#include "client.h"

struct lease_config {
	const char	*ns;			/* the Lease's namespace */
	const char	*name;
	const char	*identity;		/* unique per replica */
	long		 lease_duration_ms;	/* default 15000; whole seconds */
	long		 renew_deadline_ms;	/* default 10000 */
	long		 retry_period_ms;	/* default 2000 */
};

struct lease_callbacks {
	void	(*on_started_leading)(void *arg);
	/* Leadership lost or released: the process must stop acting. */
	void	(*on_stopped_leading)(void *arg);
	/* The holder changed (NULL/"": nobody). identity is borrowed. */
	void	(*on_new_leader)(void *arg, const char *identity);
	void	*arg;
};

struct lease;

/*
 * cfg and cb are copied, their strings borrowed. K8S_EINVAL (err filled)
 * when a name is missing or the timings break
 * lease_duration > renew_deadline + retry_period.
 */
int lease_new(struct k8s_client *c, const struct lease_config *cfg,
    const struct lease_callbacks *cb, struct lease **out,
    struct k8s_error *err) __attribute__((warn_unused_result));

/*
 * Contend, lead, renew until lease_stop(); then stop acting
 * (on_stopped_leading) and only then release. Returns 0.
 */
int lease_run(struct lease *l);

/* Make lease_run() release and return. Any thread; idempotent. */
void lease_stop(struct lease *l);

/* True while this replica holds the lease within its renew deadline. */
int lease_is_leader(struct lease *l);

/* After lease_run() returned. NULL is fine. */
void lease_free(struct lease *l);

#endif
