#include <stdio.h>
#include <string.h>

#include "clock.h"

long long
clock_mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

long long
clock_wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
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

void
clock_format_rfc3339(long long ns, int ms, char out[CLOCK_RFC3339_LEN])
{
	time_t s = (time_t)(ns / 1000000000);
	struct tm tm;
	size_t n;

	gmtime_r(&s, &tm);
	n = strftime(out, CLOCK_RFC3339_LEN, "%Y-%m-%dT%H:%M:%S", &tm);
	if (ms)
		snprintf(out + n, CLOCK_RFC3339_LEN - n, ".%03dZ",
		    (int)(ns / 1000000 % 1000));
	else
		snprintf(out + n, CLOCK_RFC3339_LEN - n, "Z");
}

long long
clock_parse_rfc3339(const char *s)
{
	struct tm tm;

	if (s == NULL)
		return -1;
	memset(&tm, 0, sizeof(tm));
	if (strptime(s, "%Y-%m-%dT%H:%M:%S", &tm) == NULL)
		return -1;
	return (long long)timegm(&tm);
}
