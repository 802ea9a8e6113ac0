#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "lease.h"
#include "log.h"
#include "xmalloc.h"

struct lease {
	struct k8s_client	*client;	/* ours: requests end by the renew deadline */
	struct lease_config	 cfg;
	struct lease_callbacks	 cb;
	pthread_mutex_t		 lock;
	pthread_cond_t		 cond;		/* stop wakes sleeps */
	atomic_bool		 stop;
	atomic_bool		 leading;
	atomic_llong		 renewed_at;	/* mono ms of the last good renew's start */

	/* Run thread only. */
	char	*seen_rv;	/* resourceVersion of the record last seen */
	char	*seen_holder;
	long long seen_at;	/* mono ms: the record is no older than this */
	long long last_poll;	/* mono ms start of the previous GET */
	long	 seen_duration_ms;
};

/* Lease times are MicroTime: RFC 3339 with microseconds, in UTC. */
static void
micro_time(char out[32])
{
	struct timespec ts;
	struct tm tm;
	size_t n;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	n = strftime(out, 32, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(out + n, 32 - n, ".%06ldZ", ts.tv_nsec / 1000);
}

int
lease_new(struct k8s_client *c, const struct lease_config *cfg,
    const struct lease_callbacks *cb, struct lease **out,
    struct k8s_error *err)
{
	struct lease *l;

	*out = NULL;
	if (!cfg->ns || !cfg->name || !cfg->identity || !cfg->identity[0])
		return k8s_error_set(err, K8S_EINVAL, 0, NULL,
		    "lease needs a namespace, a name and an identity");
	l = xcalloc(1, sizeof(*l));
	l->cfg = *cfg;
	if (cb)
		l->cb = *cb;
	if (l->cfg.lease_duration_ms <= 0)
		l->cfg.lease_duration_ms = 15000;
	if (l->cfg.renew_deadline_ms <= 0)
		l->cfg.renew_deadline_ms = 10000;
	if (l->cfg.retry_period_ms <= 0)
		l->cfg.retry_period_ms = 2000;
	/* The safety margin of docs/lease.md. */
	if (l->cfg.lease_duration_ms <= l->cfg.renew_deadline_ms +
	    l->cfg.retry_period_ms || l->cfg.lease_duration_ms % 1000 != 0) {
		k8s_error_set(err, K8S_EINVAL, 0, NULL,
		    "lease duration %ld ms must be whole seconds and exceed "
		    "renew deadline + retry period (%ld ms)",
		    l->cfg.lease_duration_ms, l->cfg.renew_deadline_ms +
		    l->cfg.retry_period_ms);
		free(l);
		return K8S_EINVAL;
	}
	{
		/* A renewal that hangs must not outlive the deadline it serves. */
		struct k8s_client_opts o = *k8s_client_get_opts(c);
		int rc;

		o.timeout_ms = l->cfg.renew_deadline_ms;
		o.max_retries = -1;
		if ((rc = k8s_client_new(k8s_client_config(c), &o, &l->client,
		    err)) != 0) {
			free(l);
			return rc;
		}
	}
	pthread_mutex_init(&l->lock, NULL);
	clock_cond_init(&l->cond);
	*out = l;
	return 0;
}

void
lease_free(struct lease *l)
{
	if (l == NULL)
		return;
	k8s_client_free(l->client);
	pthread_mutex_destroy(&l->lock);
	pthread_cond_destroy(&l->cond);
	free(l->seen_rv);
	free(l->seen_holder);
	free(l);
}

void
lease_stop(struct lease *l)
{
	pthread_mutex_lock(&l->lock);
	atomic_store(&l->stop, true);
	pthread_cond_broadcast(&l->cond);
	pthread_mutex_unlock(&l->lock);
}

int
lease_is_leader(struct lease *l)
{
	return atomic_load(&l->leading) &&
	    clock_mono_ms() - atomic_load(&l->renewed_at) < l->cfg.renew_deadline_ms;
}

/* Sleep until mono ms `until` or stop. */
static void
sleep_until(struct lease *l, long long until)
{
	struct timespec ts;

	clock_mono_ts(&ts, until);
	pthread_mutex_lock(&l->lock);
	while (!atomic_load(&l->stop) &&
	    pthread_cond_timedwait(&l->cond, &l->lock, &ts) == 0)
		;
	pthread_mutex_unlock(&l->lock);
}

static json_t *
lease_spec(const char *holder, long dur_s,
    const char *acquire, long transitions)
{
	char now[32];

	micro_time(now);
	return json_pack("{s:s, s:I, s:s, s:s, s:I}",
	    "holderIdentity", holder, "leaseDurationSeconds", (json_int_t)dur_s,
	    "acquireTime", acquire ? acquire : now, "renewTime", now,
	    "leaseTransitions", (json_int_t)transitions);
}

static void
set_leading(struct lease *l, bool on, long long renew_start)
{
	if (on) {
		atomic_store(&l->renewed_at, renew_start);
		if (!atomic_exchange(&l->leading, true)) {
			log_info("became leader", "lease=%s/%s identity=%s",
			    l->cfg.ns, l->cfg.name, l->cfg.identity);
			if (l->cb.on_started_leading)
				l->cb.on_started_leading(l->cb.arg);
		}
	} else if (atomic_exchange(&l->leading, false)) {
		log_info("stopped leading", "lease=%s/%s identity=%s",
		    l->cfg.ns, l->cfg.name, l->cfg.identity);
		if (l->cb.on_stopped_leading)
			l->cb.on_stopped_leading(l->cb.arg);
	}
}

static void
observe(struct lease *l, json_t *lease, long long poll_start,
    long long poll_end)
{
	json_t *spec = json_object_get(lease, "spec");
	const char *rv = k8s_obj_rv(lease);
	const char *holder = json_string_value(json_object_get(spec,
	    "holderIdentity"));
	json_int_t dur = json_integer_value(json_object_get(spec,
	    "leaseDurationSeconds"));

	if (rv == NULL || l->seen_rv == NULL || strcmp(rv, l->seen_rv) != 0) {
		/*
		 * The record changed since our previous poll started (or we
		 * never saw it). It was written after that poll began, and a
		 * live holder writes every retry period, so its latest write
		 * is no older than poll_end - P. Date it by the later of the
		 * two: never earlier than a live holder's last renewal minus
		 * P (safety), and no later than a dead holder's last one when
		 * we poll steadily (liveness). See docs/lease.md.
		 */
		l->seen_at = poll_end - l->cfg.retry_period_ms;
		if (l->seen_rv && l->last_poll > l->seen_at)
			l->seen_at = l->last_poll;
		free(l->seen_rv);
		l->seen_rv = rv ? xstrdup(rv) : NULL;
		if ((holder == NULL) != (l->seen_holder == NULL) ||
		    (holder && strcmp(holder, l->seen_holder) != 0)) {
			free(l->seen_holder);
			l->seen_holder = holder ? xstrdup(holder) : NULL;
			if (l->cb.on_new_leader)
				l->cb.on_new_leader(l->cb.arg, holder);
		}
	}
	l->seen_duration_ms = dur > 0 ? (long)dur * 1000 :
	    l->cfg.lease_duration_ms;
	l->last_poll = poll_start;
}

/*
 * One attempt to acquire or renew. Returns 1 when we hold the lease after
 * it, 0 when someone else does, a negative code on an API failure.
 * *next_try is when to come back.
 */
static int
try_acquire_or_renew(struct lease *l, long long *next_try)
{
	const struct k8s_resource *res = &k8s_res_leases;
	struct k8s_error err;
	long long start = clock_mono_ms();
	json_t *lease = NULL, *spec;
	const char *holder, *acq;
	json_int_t trans;
	long dur_s = l->cfg.lease_duration_ms / 1000;
	int rc, mine;

	*next_try = start + l->cfg.retry_period_ms;
	rc = k8s_get(l->client, res, l->cfg.ns, l->cfg.name, &lease, &err);
	if (rc == K8S_ENOTFOUND) {
		lease = json_pack("{s:s, s:s, s:{s:s, s:s}, s:o}",
		    "apiVersion", "coordination.k8s.io/v1", "kind", "Lease",
		    "metadata", "name", l->cfg.name, "namespace", l->cfg.ns,
		    "spec", lease_spec(l->cfg.identity, dur_s, NULL, 0));
		rc = k8s_create(l->client, res, l->cfg.ns, lease, NULL, &err);
		json_decref(lease);
		if (rc == 0)
			return 1;
		return rc == K8S_EEXIST ? 0 : rc;
	}
	if (rc != 0)
		goto fail;
	observe(l, lease, start, clock_mono_ms());
	spec = json_object_get(lease, "spec");
	holder = json_string_value(json_object_get(spec, "holderIdentity"));
	acq = json_string_value(json_object_get(spec, "acquireTime"));
	trans = json_integer_value(json_object_get(spec, "leaseTransitions"));
	mine = holder && strcmp(holder, l->cfg.identity) == 0;
	if (!mine && holder && holder[0]) {
		long long expiry = l->seen_at + l->seen_duration_ms;

		if (start < expiry) {
			/* Come back exactly at expiry if that is sooner. */
			if (expiry < *next_try)
				*next_try = expiry;
			json_decref(lease);
			return 0;
		}
	}
	/* Ours to renew, released, or expired: write ourselves in. */
	json_object_set_new(lease, "spec", lease_spec(l->cfg.identity,
	    dur_s, mine ? acq : NULL, mine ? (long)trans : (long)trans + 1));
	rc = k8s_update(l->client, res, l->cfg.ns, l->cfg.name, NULL, lease,
	    NULL, &err);
	json_decref(lease);
	if (rc == 0)
		return 1;
	if (rc == K8S_ECONFLICT)
		return 0;	/* someone else wrote first */
fail:
	log_warn("lease request failed", "lease=%s/%s status=%ld error=\"%s\"",
	    l->cfg.ns, l->cfg.name, err.http_status, k8s_strerror(rc));
	return rc;
}

static void
release(struct lease *l)
{
	struct k8s_error err;
	json_t *lease = NULL;
	const char *holder;
	int rc;

	if (k8s_get(l->client, &k8s_res_leases, l->cfg.ns, l->cfg.name, &lease,
	    &err) != 0)
		return;
	holder = json_string_value(json_object_get(json_object_get(lease,
	    "spec"), "holderIdentity"));
	if (holder && strcmp(holder, l->cfg.identity) == 0) {
		json_int_t trans = json_integer_value(json_object_get(
		    json_object_get(lease, "spec"), "leaseTransitions"));

		json_object_set_new(lease, "spec", lease_spec("", 1, NULL,
		    (long)trans));
		rc = k8s_update(l->client, &k8s_res_leases, l->cfg.ns,
		    l->cfg.name, NULL, lease, NULL, &err);
		if (rc == 0)
			log_info("released lease", "lease=%s/%s", l->cfg.ns,
			    l->cfg.name);
		else
			log_warn("cannot release lease", "lease=%s/%s "
			    "error=\"%s\"", l->cfg.ns, l->cfg.name,
			    k8s_strerror(rc));
	}
	json_decref(lease);
}

int
lease_run(struct lease *l)
{
	long long next, start;
	int rc;

	while (!atomic_load(&l->stop)) {
		start = clock_mono_ms();
		rc = try_acquire_or_renew(l, &next);
		if (rc == 1) {
			set_leading(l, true, start);
		} else if (rc == 0) {
			set_leading(l, false, 0);
		} else if (atomic_load(&l->leading)) {
			/* Keep trying to renew until the deadline passes. */
			if (clock_mono_ms() - atomic_load(&l->renewed_at) >=
			    l->cfg.renew_deadline_ms)
				set_leading(l, false, 0);
			else
				next = start + l->cfg.retry_period_ms / 4;
		}
		if (atomic_load(&l->leading) && !lease_is_leader(l))
			set_leading(l, false, 0);
		sleep_until(l, next);
	}
	if (atomic_load(&l->leading)) {
		/* Stop acting first: a successor may start the moment we release. */
		set_leading(l, false, 0);
		release(l);
	}
	return 0;
}
