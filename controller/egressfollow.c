/*
 * egressfollow.c - the egress proxy's decisions counted into each
 * execution's status: status.egress.refused, allowed, bytesOut, bytesIn
 * and countsComplete (docs/network.md, "Audit").
 *
 * The proxies (the gate pods' container "proxy", in the controller's own
 * namespace) cannot reach the API server, nor the controller them; but
 * the API serves their log, where the log daemon writes a record a
 * decision (proxy/accesslog.c). So, while this replica leads and only
 * when some profile has host entries, it follows the log of each gate
 * pod whose proxy runs, one stream and thread a pod:
 *
 *   GET /api/v1/namespaces/NS/pods/POD/log?container=proxy&follow=true
 *       &timestamps=true&sinceTime=T
 *
 * counts each record of an execution it has cached (egresslog.c), and
 * once an execution with host entries (status.egress.proxied) has ended,
 * and a grace has passed with every stream open (opts.egress_grace_ms),
 * writes its counts in one JSON patch.
 *
 * A stream that breaks is opened again after a backoff, from the time of
 * its last line (egresslog_pos: lines given again are skipped). Records
 * are missed only when the log they were in is gone before it was read:
 * the proxy container replaced (or its pod deleted) while its stream was
 * broken, the lines before a new leader's look back (FOLLOW_LOOKBACK_S),
 * a line not understood, the table full. Each of those sets loss_ms, and
 * an execution created at or before it gets countsComplete false: its
 * counts are a lower bound.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backoff.h"
#include "clock.h"
#include "controller_priv.h"
#include "cx.h"
#include "egresslog.h"
#include "linestream.h"
#include "log.h"
#include "xmalloc.h"

#define FOLLOW_CONTAINER	"proxy"
/* Gate pods followed at once; more are not (said, and counted as loss). */
#define FOLLOW_MAX_STREAMS	32
/*
 * A new leader reads this far back: an execution in flight started at
 * most its longest timeout (3600 s) and its start deadline ago.
 */
#define FOLLOW_LOOKBACK_S	(2 * 3600)
/*
 * From an execution's end seen, or a stream opened, to its counts
 * written: opts.egress_grace_ms (5 s by default). The longest an ended
 * execution waits for a stream that is not open: 12 times as long.
 */
#define FOLLOW_MAXWAIT(grace)	(12 * (grace))

struct stream {
	struct egress_follow	*f;
	char			 pod[254], pod_uid[EGRESSLOG_UID_MAX + 1];
	char			 cid[256];	/* the proxy's container at the last open */
	struct linestream	*ls;
	pthread_t		 thread;
	struct egresslog_pos	 pos;		/* its thread's */
	int			 clean;		/* its thread's: see ended() */
	/* f->lock held: */
	long long		 live_since;	/* mono ms it opened; 0: not open */
	int			 gone, done, stop;
};

struct egress_follow {
	struct controller	*ctl;
	pthread_mutex_t		 lock;
	pthread_cond_t		 cond;		/* backoff waits */
	/* lock held: */
	struct egresslog	*table;
	struct stream		*s[FOLLOW_MAX_STREAMS];
	size_t			 n;
	int			 leading, too_many;
	long long		 since_s;	/* wall s: where a new stream starts */
	long long		 loss_ms;	/* wall ms: a record missed then or before */
	struct metric		*m_lines, *m_open, *m_written;
};

/* Records may have been missed now. f->lock held. */
static void
loss_locked(struct egress_follow *f, const char *pod, const char *why)
{
	f->loss_ms = clock_wall_ms();
	log_warn("egress records may be missed: counts of executions in "
	    "flight are a lower bound", "pod=%s why=\"%s\"", pod, why);
}

/* The proxy container of gate pod name, while it runs ("": none). */
static void
proxy_cid(struct egress_follow *f, const char *name, char cid[256])
{
	json_t *p = informer_get(f->ctl->gate_inf, f->ctl->opts.agent_lease_ns,
	    name);
	const char *c = json_string_value(json_object_get(p, "proxy"));

	snprintf(cid, 256, "%s", c ? c : "");
	json_decref(p);
}

/* Records of an execution cached, that uid, not counted yet. */
static int
known(void *arg, const char *ns, const char *name, const char *uid)
{
	struct controller *ctl = arg;
	json_t *cx = informer_get(ctl->cx_inf, ns, name);
	const char *u = k8s_obj_uid(cx);
	int ok = u && strcmp(u, uid) == 0 && json_object_get(json_object_get(
	    json_object_get(cx, "status"), "egress"), "refused") == NULL;

	json_decref(cx);
	return ok;
}

static int
on_line(void *arg, char *line, size_t len, int too_long)
{
	struct stream *s = arg;
	struct egress_follow *f = s->f;
	enum egresslog_result r;

	pthread_mutex_lock(&f->lock);
	r = egresslog_line(f->table, &s->pos, line, len, too_long, known,
	    f->ctl);
	if (egresslog_result_loss(r))
		loss_locked(f, s->pod, egresslog_result_name(r));
	pthread_mutex_unlock(&f->lock);
	metric_inc(f->m_lines, egresslog_result_name(r));
	return 0;
}

/*
 * Open. If the proxy container is not the one of the last open and that
 * stream did not end at its container's end, what the last one wrote
 * after the break is gone with it.
 */
static void
on_open(void *arg)
{
	struct stream *s = arg;
	char cid[256];

	proxy_cid(s->f, s->pod, cid);
	pthread_mutex_lock(&s->f->lock);
	if (s->cid[0] && !s->clean && strcmp(cid, s->cid) != 0)
		loss_locked(s->f, s->pod, "its proxy container was replaced "
		    "while its log was not followed");
	snprintf(s->cid, sizeof(s->cid), "%s", cid);
	s->live_since = clock_mono_ms();
	pthread_mutex_unlock(&s->f->lock);
	metric_add(s->f->m_open, NULL, 1);
}

/* The log's path from the stream's last line's second (or the look back). */
static char *
log_path(struct stream *s)
{
	char since[CLOCK_RFC3339_LEN], *path = NULL, *out;
	long long ns = s->pos.ns;
	struct k8s_error err;

	if (ns == 0) {
		pthread_mutex_lock(&s->f->lock);
		ns = s->f->since_s * 1000000000LL;
		pthread_mutex_unlock(&s->f->lock);
	}
	clock_format_rfc3339(ns, 0, since);
	if (k8s_path(&k8s_res_pods, s->f->ctl->opts.agent_lease_ns, s->pod,
	    "log", &path, &err) != 0)
		return NULL;
	out = xasprintf("%s?container=" FOLLOW_CONTAINER "&follow=true"
	    "&timestamps=true&sinceTime=%s", path, since);
	free(path);
	return out;
}

/* Wait ms, or less if the stream is stopped: 0, or -1 when stopped. */
static int
stream_wait(struct stream *s, long ms)
{
	struct timespec until;
	int stop;

	clock_mono_ts(&until, clock_mono_ms() + ms);
	pthread_mutex_lock(&s->f->lock);
	while (!s->stop)
		if (pthread_cond_timedwait(&s->f->cond, &s->f->lock, &until) != 0)
			break;
	stop = s->stop;
	pthread_mutex_unlock(&s->f->lock);
	return stop ? -1 : 0;
}

/*
 * One connection ended with rc (and err): whether the stream goes on.
 * The server ending it (rc 0) is taken as the end of its container's
 * log: the kubelet ends a followed log when its container stops. Then
 * a pod found gone, or a container other than the one it opened on,
 * lost nothing. After a failure they mean the log's last lines went
 * with it.
 */
static int
ended(struct stream *s, int rc, const struct k8s_error *err)
{
	int gone;

	pthread_mutex_lock(&s->f->lock);
	if (s->live_since)
		metric_add(s->f->m_open, NULL, -1);
	s->live_since = 0;
	gone = s->gone;
	if (rc == K8S_ENOTFOUND && !s->clean)
		loss_locked(s->f, s->pod, "its pod went while its log was "
		    "not followed");
	pthread_mutex_unlock(&s->f->lock);
	if (rc == K8S_ECANCELED || rc == K8S_ENOTFOUND)
		return 0;
	s->clean = rc == 0;
	if (rc == 0)
		return !gone;
	log_warn("egress log stream broken: reconnecting", "pod=%s code=%ld "
	    "error=\"%s\"", s->pod, err->http_status, err->message);
	return 1;
}

static void *
stream_main(void *arg)
{
	struct stream *s = arg;
	struct backoff b = { .initial_ms = 1000, .max_ms = 30000 };
	struct linestream_handlers h = { on_open, on_line, s };
	struct k8s_error err;
	char *path;
	int rc;

	s->clean = 1;	/* nothing read yet: nothing to miss */
	for (;;) {
		long long t0 = clock_mono_ms();

		/* Records are counted only against a full cache. */
		if (informer_wait_synced(s->f->ctl->cx_inf, 0) != 0) {
			if (stream_wait(s, 200) != 0)
				break;
			continue;
		}
		if ((path = log_path(s)) == NULL)
			break;
		egresslog_pos_resume(&s->pos);
		rc = linestream_get(s->ls, path, &h, &err);
		free(path);
		if (!ended(s, rc, &err))
			break;
		/*
		 * Ended by the server after a while: at once again (if that
		 * was not its container's end, the gap stays short). A stream
		 * that lived a while was healthy: the backoff starts over.
		 */
		if (clock_mono_ms() - t0 > 30000)
			backoff_reset(&b);
		if (rc == 0 && clock_mono_ms() - t0 >= 1000)
			continue;
		if (stream_wait(s, backoff_next(&b)) != 0)
			break;
	}
	pthread_mutex_lock(&s->f->lock);
	s->done = 1;
	pthread_mutex_unlock(&s->f->lock);
	return NULL;
}

/* A stream for gate pod name (uid pod_uid), started. f->lock held. */
static void
start_locked(struct egress_follow *f, const char *name, const char *pod_uid)
{
	struct stream *s;

	if (f->n == FOLLOW_MAX_STREAMS) {
		if (!f->too_many)
			loss_locked(f, name, "more gate pods than "
			    "FOLLOW_MAX_STREAMS: not followed");
		f->too_many = 1;
		return;
	}
	s = xcalloc(1, sizeof(*s));
	s->f = f;
	snprintf(s->pod, sizeof(s->pod), "%s", name);
	snprintf(s->pod_uid, sizeof(s->pod_uid), "%s", pod_uid);
	s->ls = linestream_new(f->ctl->client, EGRESSLOG_LINE_MAX);
	if (pthread_create(&s->thread, NULL, stream_main, s) != 0) {
		/* Not followed: its records are missed, and said so. */
		log_warn("cannot start following an egress proxy's log",
		    "pod=%s", name);
		loss_locked(f, name, "no thread to follow it");
		linestream_free(s->ls);
		free(s);
		return;
	}
	f->s[f->n++] = s;
}

static void
stream_free(struct stream *s)
{
	pthread_join(s->thread, NULL);
	linestream_free(s->ls);
	free(s);
}

/*
 * While leading, the streams match the gate pods: one for each whose
 * proxy runs (by name and uid); one whose pod went is marked gone and
 * ends at its log's end; ended ones are joined.
 */
static void
sync_streams(struct egress_follow *f)
{
	json_t *pods = informer_list(f->ctl->gate_inf), *p;
	struct stream *done[FOLLOW_MAX_STREAMS];
	size_t i, k, nd = 0;

	pthread_mutex_lock(&f->lock);
	if (!f->leading) {
		pthread_mutex_unlock(&f->lock);
		json_decref(pods);
		return;
	}
	for (k = 0; k < f->n; k++) {
		int there = 0;

		json_array_foreach(pods, i, p)
			there |= k8s_obj_name(p) && k8s_obj_uid(p) &&
			    strcmp(k8s_obj_name(p), f->s[k]->pod) == 0 &&
			    strcmp(k8s_obj_uid(p), f->s[k]->pod_uid) == 0;
		f->s[k]->gone |= !there;
	}
	json_array_foreach(pods, i, p) {
		const char *name = k8s_obj_name(p);
		const char *uid = k8s_obj_uid(p);
		int have = 0;

		if (name == NULL || uid == NULL || !json_is_string(
		    json_object_get(p, "proxy")))
			continue;
		for (k = 0; k < f->n; k++)
			have |= strcmp(f->s[k]->pod, name) == 0 &&
			    strcmp(f->s[k]->pod_uid, uid) == 0;
		if (!have)
			start_locked(f, name, uid);
	}
	for (k = 0; k < f->n;)
		if (f->s[k]->done) {
			done[nd++] = f->s[k];
			f->s[k] = f->s[--f->n];
		} else
			k++;
	pthread_mutex_unlock(&f->lock);
	for (k = 0; k < nd; k++)
		stream_free(done[k]);
	json_decref(pods);
}

struct egress_follow *
ctl_egress_follow_new(struct controller *ctl, struct metrics *m)
{
	struct egress_follow *f;
	int hosts = 0;

	for (size_t i = 0; i < ctl->cfg->nprofiles; i++)
		for (size_t j = 0; j < ctl->cfg->profiles[i].negress; j++)
			hosts |= ctl->cfg->profiles[i].egress[j].host != NULL;
	if (!hosts || ctl->gate_inf == NULL)
		return NULL;
	if (ctl->opts.egress_grace_ms <= 0)
		ctl->opts.egress_grace_ms = 5000;
	f = xcalloc(1, sizeof(*f));
	f->ctl = ctl;
	pthread_mutex_init(&f->lock, NULL);
	clock_cond_init(&f->cond);
	f->table = egresslog_new(EGRESSLOG_TABLE_MAX);
	f->m_lines = metrics_counter(m, "airlock_egress_log_lines_total",
	    "Lines of the egress proxies' logs read, by what became of them "
	    "(counted, seen, other, no-execution, unknown, malformed, "
	    "too-long, table-full).", "result");
	f->m_open = metrics_gauge(m, "airlock_egress_log_streams",
	    "Proxy log streams open.", NULL);
	f->m_written = metrics_counter(m, "airlock_egress_counts_written_total",
	    "Executions whose egress counts were written, by whether they "
	    "are complete.", "complete");
	return f;
}

void
ctl_egress_follow_leading(struct egress_follow *f, int leading)
{
	struct stream *all[FOLLOW_MAX_STREAMS];
	size_t n = 0;

	if (f == NULL)
		return;
	pthread_mutex_lock(&f->lock);
	if (leading && !f->leading) {
		f->since_s = clock_wall_ms() / 1000 - FOLLOW_LOOKBACK_S;
		f->loss_ms = f->since_s * 1000;
		f->too_many = 0;
	}
	f->leading = leading;
	if (!leading) {
		/* Every stream stopped and joined: none outlives the lead. */
		egresslog_clear(f->table);
		for (n = 0; n < f->n; n++) {
			all[n] = f->s[n];
			all[n]->stop = 1;
			linestream_stop(all[n]->ls);
		}
		f->n = 0;
		pthread_cond_broadcast(&f->cond);
	}
	pthread_mutex_unlock(&f->lock);
	for (size_t k = 0; k < n; k++)
		stream_free(all[k]);
	if (leading)
		sync_streams(f);
}

void
ctl_egress_follow_sync(struct egress_follow *f)
{
	if (f != NULL)
		sync_streams(f);
}

void
ctl_egress_follow_free(struct egress_follow *f)
{
	if (f == NULL)
		return;
	ctl_egress_follow_leading(f, 0);	/* every stream joined */
	egresslog_free(f->table);
	pthread_mutex_destroy(&f->lock);
	pthread_cond_destroy(&f->cond);
	free(f);
}

void
ctl_egress_forget(struct controller *ctl, const char *uid)
{
	struct egress_follow *f = ctl->follow;

	if (f == NULL || uid == NULL)
		return;
	pthread_mutex_lock(&f->lock);
	egresslog_forget(f->table, uid);
	pthread_mutex_unlock(&f->lock);
}

/*
 * Whether uid's counts may be written at now (mono ms): 0, with *c and
 * *complete set; -1 when they were written; else the ms to wait. Its end first seen at E, they are
 * written once every stream has been open for the grace and E is the
 * grace past; a stream not open holds them back up to FOLLOW_MAXWAIT
 * past E, and they are incomplete then. f->lock held.
 */
static long long
ready_locked(struct egress_follow *f, const char *uid, long long created_ms,
    long long now, struct egress_count *c, int *complete)
{
	long long end, until, grace = f->ctl->opts.egress_grace_ms;
	long long maxwait = FOLLOW_MAXWAIT(grace);
	int closed = 0;

	memset(c, 0, sizeof(*c));
	*complete = 0;
	switch (egresslog_ended(f->table, uid, now, &end)) {
	case 1:
		return -1;	/* written; the cache has not seen it yet */
	case -1:
		return 0;	/* the table is full: none of its records counted */
	}
	until = end + grace;
	for (size_t k = 0; k < f->n; k++) {
		long long open = f->s[k]->live_since;

		if (f->s[k]->done)
			continue;
		if (open == 0)
			closed = 1;
		else if (open + grace > until)
			until = open + grace;
	}
	if (closed && now < end + maxwait)
		return end + maxwait - now < 1000 ? end + maxwait - now : 1000;
	if (!closed && now < until)
		return until - now;
	egresslog_get(f->table, uid, c);
	*complete = !closed && !f->too_many && created_ms > f->loss_ms;
	return 0;
}

/* The counts into cx's status.egress: one JSON patch that tests the uid. */
static int
write_counts(struct controller *ctl, json_t *cx, const struct egress_count *c,
    int complete)
{
	struct k8s_patch_opts po = { .type = K8S_PATCH_JSON,
	    .subresource = "status" };
	struct k8s_error err;
	json_t *patch;
	int rc;

	patch = json_pack("[{s:s, s:s, s:s}, {s:s, s:s, s:I}, {s:s, s:s, s:I},"
	    " {s:s, s:s, s:I}, {s:s, s:s, s:I}, {s:s, s:s, s:b}]",
	    "op", "test", "path", "/metadata/uid", "value", k8s_obj_uid(cx),
	    "op", "add", "path", "/status/egress/refused", "value",
	    (json_int_t)c->refused,
	    "op", "add", "path", "/status/egress/allowed", "value",
	    (json_int_t)c->allowed,
	    "op", "add", "path", "/status/egress/bytesOut", "value",
	    (json_int_t)c->bytes_out,
	    "op", "add", "path", "/status/egress/bytesIn", "value",
	    (json_int_t)c->bytes_in,
	    "op", "add", "path", "/status/egress/countsComplete", "value",
	    complete);
	rc = k8s_patch(ctl->client, &cx_resource, k8s_obj_namespace(cx),
	    k8s_obj_name(cx), &po, patch, NULL, &err);
	json_decref(patch);
	/* Gone, another of its name, or too large to store: never written. */
	if (rc == K8S_ENOTFOUND || (rc == K8S_EHTTP && err.http_status == 422))
		return 0;
	if (rc != 0 && ctl_too_large(&err)) {
		log_warn("cannot write an execution's egress counts: too large "
		    "to store", "execution=%s/%s", k8s_obj_namespace(cx),
		    k8s_obj_name(cx));
		return 0;
	}
	if (rc != 0)
		log_warn("cannot write an execution's egress counts",
		    "execution=%s/%s error=\"%s\"", k8s_obj_namespace(cx),
		    k8s_obj_name(cx), err.message);
	return rc;
}

int
ctl_egress_count(struct controller *ctl, json_t *cx, const char *key)
{
	struct egress_follow *f = ctl->follow;
	json_t *eg = json_object_get(json_object_get(cx, "status"), "egress");
	const char *uid = k8s_obj_uid(cx);
	long long created = clock_parse_rfc3339(json_string_value(
	    json_object_get(json_object_get(cx, "metadata"),
	    "creationTimestamp"))), wait = 0;
	struct egress_count c;
	int complete, rc, leading;

	if (f == NULL || uid == NULL ||
	    !json_is_true(json_object_get(eg, "proxied")))
		return 0;
	if (json_object_get(eg, "refused") != NULL) {
		/* Written: a record come late made no entry to keep. */
		ctl_egress_forget(ctl, uid);
		return 0;
	}
	pthread_mutex_lock(&f->lock);
	if ((leading = f->leading))
		wait = ready_locked(f, uid, created > 0 ? created * 1000 : -1,
		    clock_mono_ms(), &c, &complete);
	pthread_mutex_unlock(&f->lock);
	if (!leading || wait < 0)
		return 0;	/* the next leader writes them; or written */
	if (wait > 0) {
		workqueue_add_after(ctl->queue, key, (uint64_t)wait);
		return 0;
	}
	if ((rc = write_counts(ctl, cx, &c, complete)) == 0) {
		pthread_mutex_lock(&f->lock);
		egresslog_written(f->table, uid);
		pthread_mutex_unlock(&f->lock);
		metric_inc(f->m_written, complete ? "true" : "false");
	}
	return rc;
}

void
ctl_egress_trim_keep(json_t *out, json_t *cx)
{
	json_t *eg = json_object_get(json_object_get(cx, "status"), "egress");
	json_t *at = json_object_get(json_object_get(cx, "metadata"),
	    "creationTimestamp");

	if (!json_is_true(json_object_get(eg, "proxied")))
		return;
	json_object_set(json_object_get(out, "status"), "egress", eg);
	if (at)
		json_object_set(json_object_get(out, "metadata"),
		    "creationTimestamp", at);
}
