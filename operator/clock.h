/*
 * clock.h - the monotonic clock every timer in the library runs on.
 *
 * Deadlines, backoffs, lease expiry and queue delays are all measured on
 * CLOCK_MONOTONIC, never on the wall clock, which NTP may step. Condition
 * variables made with clock_cond_init() take absolute CLOCK_MONOTONIC
 * deadlines in pthread_cond_timedwait(), built with clock_mono_ts().
 */
#ifndef AIRLOCK_CLOCK_H
#define AIRLOCK_CLOCK_H

#include <pthread.h>
#include <time.h>

/* Milliseconds on CLOCK_MONOTONIC. */
long long clock_mono_ms(void);
/* Wall-clock ms since the epoch (CLOCK_REALTIME). */
long long clock_wall_ms(void);

/* The timespec of the monotonic instant at_ms (as clock_mono_ms counts). */
void clock_mono_ts(struct timespec *ts, long long at_ms);

/* Initialise c so that its timed waits use CLOCK_MONOTONIC. */
void clock_cond_init(pthread_cond_t *c);

/*
 * Wall-clock times as the API server writes them (RFC 3339, UTC), for
 * status fields only; never for timing.
 */
#define CLOCK_RFC3339_LEN	32	/* "2026-11-23T05:00:00.000Z" + NUL, and room */

/* ns since the epoch as RFC 3339 UTC, with milliseconds if ms is set. */
void clock_format_rfc3339(long long ns, int ms, char out[CLOCK_RFC3339_LEN]);

/* Seconds since the epoch of "YYYY-MM-DDTHH:MM:SS..." (UTC), or -1. */
long long clock_parse_rfc3339(const char *s);

#endif
