/*
 * backoff.h - one jittered exponential backoff for every retry loop: the
 * watch's reconnects, the node agent's containerd event stream and its
 * result writes.
 *
 * The delay starts at initial_ms and doubles up to max_ms; each wait is
 * drawn uniformly from [delay/2, delay] ("equal jitter"), so that many
 * clients that failed together (an API server restart) do not return
 * together, and none comes back sooner than half the delay. A success
 * resets it.
 */
#ifndef AIRLOCK_BACKOFF_H
#define AIRLOCK_BACKOFF_H

struct backoff {
	long		 initial_ms;	/* > 0 */
	long		 max_ms;	/* >= initial_ms */
	long		 cur_ms;	/* 0: none yet */
	unsigned	 seed;		/* the jitter's; 0: seeded on first use */
};

/* The next wait, in ms: see above. */
long backoff_next(struct backoff *b);

/* After a success: the next wait is initial_ms's again. */
void backoff_reset(struct backoff *b);

/*
 * The arithmetic behind backoff_next, exposed so it is tested exactly:
 * the delay after cur (initial, then double, capped at max), and the wait
 * a random r picks for a delay d (d/2 + r % (d/2 + 1)).
 */
long backoff_step(long cur, long initial, long max);
long backoff_jitter(long d, unsigned r);

#endif
