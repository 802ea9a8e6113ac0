#include "clock.h"

long long
clock_mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void
clock_mono_ts(struct timespec *ts, long long at_ms)
{
	ts->tv_sec = (time_t)(at_ms / 1000);
	ts->tv_nsec = (long)(at_ms % 1000) * 1000000L;
}

void
clock_cond_init(pthread_cond_t *c)
{
	pthread_condattr_t ca;

	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(c, &ca);
	pthread_condattr_destroy(&ca);
}
