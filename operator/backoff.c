/*
 * backoff.c - see backoff.h.
 */
#include <time.h>
#include <unistd.h>

#include "backoff.h"

long
backoff_step(long cur, long initial, long max)
{
	if (cur <= 0)
		return initial < max ? initial : max;
	return cur > max / 2 ? max : cur * 2;
}

long
backoff_jitter(long d, unsigned r)
{
	if (d <= 0)
		return 0;
	return d / 2 + (long)(r % (unsigned long)(d / 2 + 1));
}

static unsigned
next_random(unsigned *s)
{
	if (*s == 0) {
		struct timespec ts;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		*s = (unsigned)ts.tv_nsec ^ ((unsigned)getpid() << 16) ^ 0x9e3779b9u;
	}
	/* xorshift32: cheap, and a jitter needs no more. */
	*s ^= *s << 13;
	*s ^= *s >> 17;
	*s ^= *s << 5;
	return *s;
}

long
backoff_next(struct backoff *b)
{
	b->cur_ms = backoff_step(b->cur_ms, b->initial_ms, b->max_ms);
	return backoff_jitter(b->cur_ms, next_random(&b->seed));
}

void
backoff_reset(struct backoff *b)
{
	b->cur_ms = 0;
}
