/*
 * workqueue.h - a deduplicating, rate-limited queue of string keys.
 *
 * The queue between informers and reconcilers, after client-go's workqueue:
 * keys ("namespace/name") go in from any thread, worker threads take them
 * out with workqueue_get() and hand them back with workqueue_done(). See
 * docs/workqueue.md for the design.
 *
 * Guarantees:
 *  - a key is queued at most once: adding a key that is already waiting to
 *    be handed out does nothing; distinct keys come out in FIFO order;
 *  - a key is never handed to two workers at once: a key added while it is
 *    being processed (between get and done) is marked dirty and queued again
 *    only by workqueue_done(), so the add is never lost;
 *  - delayed adds (workqueue_add_after) wait in a min-heap with at most one
 *    entry per key; the getters themselves wait for the earliest one to fall
 *    due, so the queue runs no thread of its own.
 *
 * Keys are copied on the way in; a key longer than WORKQUEUE_KEY_MAX bytes is
 * refused with a warning in the log, to cap the memory bad input can take.
 * Every function is thread-safe except workqueue_free().
 */
#ifndef AIRLOCK_WORKQUEUE_H
#define AIRLOCK_WORKQUEUE_H

#include <stddef.h>
#include <stdint.h>

#define WORKQUEUE_KEY_MAX	4096	/* bytes, not counting the NUL */

/* A zero field means its default. */
struct workqueue_opts {
	uint64_t base_delay_ms;	/* per-key backoff base, default 5 */
	uint64_t max_delay_ms;	/* per-key backoff cap, default 1000000 (1000 s) */
	double   qps;		/* overall token bucket rate, default 10 */
	int      burst;		/* overall bucket size, default 100 */
};

struct workqueue;

/* A new, empty queue; opts NULL means all defaults. Free with workqueue_free(). */
struct workqueue *workqueue_new(const struct workqueue_opts *opts);

/* Queue key now, unless it is already queued; see the guarantees above. */
void workqueue_add(struct workqueue *q, const char *key);

/*
 * Add key once delay_ms have passed (timers, TTLs); 0 adds it now. A key
 * already waiting keeps the earlier of its two times. Independent of
 * whether the key is queued or being processed now: when the time comes it
 * is added as by workqueue_add().
 */
void workqueue_add_after(struct workqueue *q, const char *key,
    uint64_t delay_ms);

/*
 * Add key after a back-off: the larger of workqueue_backoff_ms() for the
 * key's requeue count and the delay the overall token bucket imposes (see
 * struct workqueue_bucket). Counts one more requeue for key.
 */
void workqueue_add_rate_limited(struct workqueue *q, const char *key);

/* Reset key's requeue count, so its next back-off starts at the base again. */
void workqueue_forget(struct workqueue *q, const char *key);

/* How many rate-limited adds key has had since it was last forgotten. */
int workqueue_requeues(struct workqueue *q, const char *key);

/*
 * Wait until a key is ready and hand it out; the key is "processing" until
 * workqueue_done(). 0 with *keyp a copy the caller frees with free() (after
 * calling workqueue_done() with it), or K8S_ECANCELED once the queue is shut
 * down and no key is ready (*keyp is then NULL).
 */
int workqueue_get(struct workqueue *q, char **keyp)
    __attribute__((warn_unused_result));

/*
 * As workqueue_get(), waiting at most timeout_ms (0: do not wait);
 * K8S_ETIMEDOUT (*keyp NULL) if no key was ready in time.
 */
int workqueue_get_timeout(struct workqueue *q, char **keyp,
    uint64_t timeout_ms) __attribute__((warn_unused_result));

/*
 * Finish processing key. If it was added meanwhile it is queued again now.
 * A key that is not being processed is ignored.
 */
void workqueue_done(struct workqueue *q, const char *key);

/* Keys ready to be handed out now (queue depth, for metrics). */
size_t workqueue_len(struct workqueue *q);

/*
 * Keys ready or being processed (between get and done): 0 means every key
 * added so far has been processed, delayed ones aside.
 */
size_t workqueue_busy(struct workqueue *q);

/* Keys waiting for a delayed add to fall due (for metrics). */
size_t workqueue_waiting(struct workqueue *q);

/*
 * Stop the queue: every blocked getter wakes; keys already ready are still
 * handed out (and so is a key added during its processing, at its done()),
 * then workqueue_get() returns K8S_ECANCELED. Delayed keys are dropped, and
 * adds of any kind after this are ignored. Calling it twice is harmless.
 */
void workqueue_shutdown(struct workqueue *q);

/*
 * Free the queue and every key in it. Only after workqueue_shutdown() and
 * once no thread is inside any workqueue_* call. q may be NULL.
 */
void workqueue_free(struct workqueue *q);

/*
 * The pure arithmetic behind workqueue_add_rate_limited(), exposed so it can
 * be tested exactly. opts NULL or zero fields mean the defaults.
 *
 * Per-key back-off: base_delay_ms * 2^requeues, capped at max_delay_ms
 * (5, 10, 20, 40 ... ms by default). requeues < 0 counts as 0.
 */
uint64_t workqueue_backoff_ms(const struct workqueue_opts *opts, int requeues);

/*
 * The overall token bucket: it holds at most burst tokens, starts full and
 * refills at qps tokens a second. Each take removes one token, and may
 * leave the bucket in debt: the delay is how long until the token taken
 * would have been there. Invariant: tokens <= burst.
 */
struct workqueue_bucket {
	double	 qps;
	double	 burst;
	double	 tokens;	/* may be negative: tokens reserved ahead */
	uint64_t last_ns;	/* when tokens was last brought up to date */
};

void workqueue_bucket_init(struct workqueue_bucket *b,
    const struct workqueue_opts *opts, uint64_t now_ns);

/* Take one token at now_ns (monotonic); the delay in ms, rounded up. */
uint64_t workqueue_bucket_take(struct workqueue_bucket *b, uint64_t now_ns);

#endif
