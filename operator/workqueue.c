/*
 * workqueue.c - see workqueue.h and docs/workqueue.md.
 *
 * One mutex guards everything; one condition variable (on CLOCK_MONOTONIC)
 * wakes getters. Each key the queue knows about has one struct wq_entry in
 * a search tree (tsearch(3)), holding all of its state; an entry is freed
 * as soon as it holds none (wq_release).
 */
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <search.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "k8s_error.h"
#include "log.h"
#include "workqueue.h"
#include "xmalloc.h"

#define DEF_BASE_DELAY_MS	5
#define DEF_MAX_DELAY_MS	1000000
#define DEF_QPS			10.0
#define DEF_BURST		100
#define NO_DEADLINE		UINT64_MAX

/*
 * Invariants: dirty && !processing <=> the entry is in the ready FIFO;
 * heap_idx >= 0 <=> it is in the delayed heap, due at due_ns.
 */
struct wq_entry {
	char		*key;		/* first: see wq_cmp() */
	struct wq_entry	*qnext;		/* ready FIFO */
	unsigned	 dirty:1;	/* needs (another) processing */
	unsigned	 processing:1;	/* handed out, done() not yet called */
	int		 requeues;	/* rate-limited adds since forget */
	long		 heap_idx;	/* -1 if not delayed */
	uint64_t	 due_ns;
};

struct workqueue {
	pthread_mutex_t	  mu;
	pthread_cond_t	  cv;
	uint64_t	  base_delay_ms;
	uint64_t	  max_delay_ms;
	struct workqueue_bucket bucket;
	int		  shutdown;
	void		 *keys;		/* tsearch(3) root: every known key */
	struct wq_entry	 *head, *tail;	/* ready FIFO */
	size_t		  nready;
	size_t		  nprocessing;	/* handed out, not done */
	struct wq_entry	**heap;		/* delayed, min-heap on due_ns */
	size_t		  nheap, heapcap;
};

static uint64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* now + ms, saturating, so a huge delay means "never" rather than wrapping. */
static uint64_t
deadline_after(uint64_t now, uint64_t ms)
{
	if (ms > (UINT64_MAX - now) / 1000000u)
		return NO_DEADLINE;
	return now + ms * 1000000u;
}

static void
opts_fill(struct workqueue_opts *o, const struct workqueue_opts *in)
{
	if (in != NULL)
		*o = *in;
	else
		memset(o, 0, sizeof(*o));
	if (o->base_delay_ms == 0)
		o->base_delay_ms = DEF_BASE_DELAY_MS;
	if (o->max_delay_ms == 0)
		o->max_delay_ms = DEF_MAX_DELAY_MS;
	if (!(o->qps > 0))	/* also catches NaN */
		o->qps = DEF_QPS;
	if (o->burst <= 0)
		o->burst = DEF_BURST;
}

uint64_t
workqueue_backoff_ms(const struct workqueue_opts *opts, int requeues)
{
	struct workqueue_opts o;

	opts_fill(&o, opts);
	if (requeues < 0)
		requeues = 0;
	if (requeues >= 64 || o.base_delay_ms > (UINT64_MAX >> requeues))
		return o.max_delay_ms;
	if ((o.base_delay_ms << requeues) > o.max_delay_ms)
		return o.max_delay_ms;
	return o.base_delay_ms << requeues;
}

void
workqueue_bucket_init(struct workqueue_bucket *b,
    const struct workqueue_opts *opts, uint64_t now)
{
	struct workqueue_opts o;

	opts_fill(&o, opts);
	b->qps = o.qps;
	b->burst = o.burst;
	b->tokens = b->burst;
	b->last_ns = now;
}

uint64_t
workqueue_bucket_take(struct workqueue_bucket *b, uint64_t now)
{
	double ms;

	if (now > b->last_ns) {
		b->tokens += (double)(now - b->last_ns) * b->qps / 1e9;
		if (b->tokens > b->burst)
			b->tokens = b->burst;
		b->last_ns = now;
	}
	b->tokens -= 1;
	if (b->tokens >= 0)
		return 0;
	ms = ceil(-b->tokens * 1000.0 / b->qps);
	return ms >= 1.8e19 ? UINT64_MAX : (uint64_t)ms;
}

static int
wq_cmp(const void *a, const void *b)
{
	return strcmp(((const struct wq_entry *)a)->key,
	    ((const struct wq_entry *)b)->key);
}

static struct wq_entry *
wq_lookup(struct workqueue *q, const char *key)
{
	struct wq_entry probe = { .key = (char *)key }, **pp;

	if (key == NULL)
		return NULL;
	pp = tfind(&probe, &q->keys, wq_cmp);
	return pp != NULL ? *pp : NULL;
}

static struct wq_entry *
wq_lookup_or_create(struct workqueue *q, const char *key, size_t len)
{
	struct wq_entry probe = { .key = (char *)key }, **pp;

	if ((pp = tsearch(&probe, &q->keys, wq_cmp)) == NULL)
		abort();	/* out of memory, as in xmalloc */
	if (*pp == &probe) {	/* new: put a real entry in the probe's place */
		*pp = xcalloc(1, sizeof(**pp));
		(*pp)->key = xstrndup(key, len);
		(*pp)->heap_idx = -1;
	}
	return *pp;
}

static void
wq_free_entry(void *p)
{
	struct wq_entry *e = p;

	free(e->key);
	free(e);
}

/* Free e if it holds no state any more. */
static void
wq_release(struct workqueue *q, struct wq_entry *e)
{
	if (e->dirty || e->processing || e->heap_idx >= 0 || e->requeues > 0)
		return;
	tdelete(e, &q->keys, wq_cmp);
	wq_free_entry(e);
}

/* 0 if key may enter the queue; long keys are refused to cap memory. */
static int
key_check(const char *key, size_t *lenp)
{
	if (key == NULL ||
	    (*lenp = strnlen(key, WORKQUEUE_KEY_MAX + 1)) > WORKQUEUE_KEY_MAX) {
		log_warn("workqueue key refused", "reason=%s max=%d",
		    key == NULL ? "null" : "too_long", WORKQUEUE_KEY_MAX);
		return -1;
	}
	return 0;
}

static void
heap_set(struct workqueue *q, size_t i, struct wq_entry *e)
{
	q->heap[i] = e;
	e->heap_idx = (long)i;
}

static void
heap_up(struct workqueue *q, size_t i)
{
	struct wq_entry *e = q->heap[i];

	while (i > 0 && q->heap[(i - 1) / 2]->due_ns > e->due_ns) {
		heap_set(q, i, q->heap[(i - 1) / 2]);
		i = (i - 1) / 2;
	}
	heap_set(q, i, e);
}

static void
heap_down(struct workqueue *q, size_t i)
{
	struct wq_entry *e = q->heap[i];
	size_t c;

	while ((c = 2 * i + 1) < q->nheap) {
		if (c + 1 < q->nheap && q->heap[c + 1]->due_ns < q->heap[c]->due_ns)
			c++;
		if (q->heap[c]->due_ns >= e->due_ns)
			break;
		heap_set(q, i, q->heap[c]);
		i = c;
	}
	heap_set(q, i, e);
}

static void
heap_push(struct workqueue *q, struct wq_entry *e)
{
	if (q->nheap == q->heapcap) {
		q->heapcap = q->heapcap ? q->heapcap * 2 : 16;
		q->heap = xrealloc(q->heap, q->heapcap * sizeof(*q->heap));
	}
	heap_set(q, q->nheap++, e);
	heap_up(q, q->nheap - 1);
}

/* The heart of the dedup: see docs/workqueue.md. Called locked. */
static void
wq_add_locked(struct workqueue *q, struct wq_entry *e)
{
	if (e->dirty)
		return;
	e->dirty = 1;
	if (e->processing)
		return;
	e->qnext = NULL;
	if (q->tail != NULL)
		q->tail->qnext = e;
	else
		q->head = e;
	q->tail = e;
	q->nready++;
	pthread_cond_signal(&q->cv);
}

/* Move every delayed key that has fallen due to the ready FIFO. */
static void
wq_promote_due(struct workqueue *q, uint64_t now)
{
	struct wq_entry *e;

	while (q->nheap > 0 && q->heap[0]->due_ns <= now) {
		e = q->heap[0];
		e->heap_idx = -1;
		if (--q->nheap > 0) {
			heap_set(q, 0, q->heap[q->nheap]);
			heap_down(q, 0);
		}
		wq_add_locked(q, e);
	}
}

/* Called locked; due is absolute (monotonic ns). */
static void
wq_add_at_locked(struct workqueue *q, const char *key, size_t len,
    uint64_t due)
{
	struct wq_entry *e = wq_lookup_or_create(q, key, len);

	if (e->heap_idx >= 0) {
		if (e->due_ns <= due)
			return;
		e->due_ns = due;
		heap_up(q, (size_t)e->heap_idx);
	} else {
		e->due_ns = due;
		heap_push(q, e);
	}
	/* A new earliest time: getters must shorten their waits. */
	if (e->heap_idx == 0)
		pthread_cond_broadcast(&q->cv);
}

struct workqueue *
workqueue_new(const struct workqueue_opts *opts)
{
	struct workqueue *q = xcalloc(1, sizeof(*q));
	struct workqueue_opts o;

	opts_fill(&o, opts);
	q->base_delay_ms = o.base_delay_ms;
	q->max_delay_ms = o.max_delay_ms;
	workqueue_bucket_init(&q->bucket, &o, now_ns());
	pthread_mutex_init(&q->mu, NULL);
	clock_cond_init(&q->cv);
	return q;
}

void
workqueue_add(struct workqueue *q, const char *key)
{
	size_t len;

	if (key_check(key, &len) != 0)
		return;
	pthread_mutex_lock(&q->mu);
	if (!q->shutdown)
		wq_add_locked(q, wq_lookup_or_create(q, key, len));
	pthread_mutex_unlock(&q->mu);
}

void
workqueue_add_after(struct workqueue *q, const char *key, uint64_t delay_ms)
{
	size_t len;

	if (delay_ms == 0) {
		workqueue_add(q, key);
		return;
	}
	if (key_check(key, &len) != 0)
		return;
	pthread_mutex_lock(&q->mu);
	if (!q->shutdown)
		wq_add_at_locked(q, key, len, deadline_after(now_ns(), delay_ms));
	pthread_mutex_unlock(&q->mu);
}

void
workqueue_add_rate_limited(struct workqueue *q, const char *key)
{
	struct workqueue_opts o = { q->base_delay_ms, q->max_delay_ms, 0, 0 };
	struct wq_entry *e;
	uint64_t now, delay, bucket;
	size_t len;

	if (key_check(key, &len) != 0)
		return;
	pthread_mutex_lock(&q->mu);
	if (q->shutdown)
		goto out;
	now = now_ns();
	e = wq_lookup_or_create(q, key, len);
	delay = workqueue_backoff_ms(&o, e->requeues);
	if (e->requeues < INT_MAX)
		e->requeues++;
	bucket = workqueue_bucket_take(&q->bucket, now);
	if (bucket > delay)
		delay = bucket;
	/* delay >= 1 (base_delay_ms >= 1), so this always goes by the heap. */
	wq_add_at_locked(q, key, len, deadline_after(now, delay));
out:
	pthread_mutex_unlock(&q->mu);
}

void
workqueue_forget(struct workqueue *q, const char *key)
{
	struct wq_entry *e;

	pthread_mutex_lock(&q->mu);
	if ((e = wq_lookup(q, key)) != NULL) {
		e->requeues = 0;
		wq_release(q, e);
	}
	pthread_mutex_unlock(&q->mu);
}

int
workqueue_requeues(struct workqueue *q, const char *key)
{
	struct wq_entry *e;
	int n = 0;

	pthread_mutex_lock(&q->mu);
	if ((e = wq_lookup(q, key)) != NULL)
		n = e->requeues;
	pthread_mutex_unlock(&q->mu);
	return n;
}

static int
wq_get(struct workqueue *q, char **keyp, uint64_t deadline)
{
	struct wq_entry *e;
	struct timespec ts;
	uint64_t now, wake;
	int rc;

	*keyp = NULL;
	pthread_mutex_lock(&q->mu);
	for (;;) {
		now = now_ns();
		wq_promote_due(q, now);
		if ((e = q->head) != NULL) {
			if ((q->head = e->qnext) == NULL)
				q->tail = NULL;
			q->nready--;
			e->dirty = 0;
			e->processing = 1;
			q->nprocessing++;
			*keyp = xstrdup(e->key);
			rc = 0;
			goto out;
		}
		if (q->shutdown) {
			rc = K8S_ECANCELED;
			goto out;
		}
		if (now >= deadline) {
			rc = K8S_ETIMEDOUT;
			goto out;
		}
		wake = deadline;
		if (q->nheap > 0 && q->heap[0]->due_ns < wake)
			wake = q->heap[0]->due_ns;
		if (wake == NO_DEADLINE) {
			pthread_cond_wait(&q->cv, &q->mu);
		} else {
			ts.tv_sec = (time_t)(wake / 1000000000u);
			ts.tv_nsec = (long)(wake % 1000000000u);
			/* ETIMEDOUT or a wake-up: either way, look again. */
			(void)pthread_cond_timedwait(&q->cv, &q->mu, &ts);
		}
	}
out:
	pthread_mutex_unlock(&q->mu);
	return rc;
}

int
workqueue_get(struct workqueue *q, char **keyp)
{
	return wq_get(q, keyp, NO_DEADLINE);
}

int
workqueue_get_timeout(struct workqueue *q, char **keyp, uint64_t timeout_ms)
{
	return wq_get(q, keyp, deadline_after(now_ns(), timeout_ms));
}

void
workqueue_done(struct workqueue *q, const char *key)
{
	struct wq_entry *e;

	pthread_mutex_lock(&q->mu);
	e = wq_lookup(q, key);
	if (e == NULL || !e->processing) {
		log_debug("key not being processed", "fn=%s", __func__);
		goto out;
	}
	e->processing = 0;
	q->nprocessing--;
	if (e->dirty) {
		/* Added while processing: queue it now, at the back. */
		e->dirty = 0;
		wq_add_locked(q, e);
	}
	wq_release(q, e);
out:
	pthread_mutex_unlock(&q->mu);
}

/* One of the queue's counts, read under its lock. */
enum wq_count { WQ_READY, WQ_BUSY, WQ_WAITING };

static size_t
count(struct workqueue *q, enum wq_count which)
{
	size_t n;

	pthread_mutex_lock(&q->mu);
	n = which == WQ_READY ? q->nready : which == WQ_BUSY ?
	    q->nready + q->nprocessing : q->nheap;
	pthread_mutex_unlock(&q->mu);
	return n;
}

size_t
workqueue_len(struct workqueue *q)
{
	return count(q, WQ_READY);
}

size_t
workqueue_busy(struct workqueue *q)
{
	return count(q, WQ_BUSY);
}

size_t
workqueue_waiting(struct workqueue *q)
{
	return count(q, WQ_WAITING);
}

void
workqueue_shutdown(struct workqueue *q)
{
	struct wq_entry *e;

	pthread_mutex_lock(&q->mu);
	q->shutdown = 1;
	while (q->nheap > 0) {
		e = q->heap[--q->nheap];
		e->heap_idx = -1;
		wq_release(q, e);
	}
	pthread_cond_broadcast(&q->cv);
	pthread_mutex_unlock(&q->mu);
}

void
workqueue_free(struct workqueue *q)
{
	if (q == NULL)
		return;
	tdestroy(q->keys, wq_free_entry);
	free(q->heap);
	pthread_cond_destroy(&q->cv);
	pthread_mutex_destroy(&q->mu);
	free(q);
}
