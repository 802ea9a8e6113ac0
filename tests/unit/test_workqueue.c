/*
 * Unit tests: operator/workqueue.c.
 *
 * Timing checks use CLOCK_MONOTONIC with exact lower bounds ("not before
 * 200 ms") and generous upper bounds, so a loaded machine or valgrind slows
 * them down without making them fail. cmocka's asserts only run on the main
 * thread: worker threads record what they saw and the main thread checks it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "k8s_error.h"
#include "log.h"
#include "workqueue.h"

#define MS	1000000ull	/* ns */
#define SLACK	(300 * MS)	/* upper-bound allowance for a busy machine */

static uint64_t
mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void
sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) != 0)
		;
}

/*
 * Join th, failing the test (rather than hanging it) if th is still
 * blocked after 10 s: a getter that is never woken is the bug to catch.
 */
static void
join(pthread_t th)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 10;
	assert_int_equal(pthread_timedjoin_np(th, NULL, &ts), 0);
}

/* Take one key, which must be want, and finish it. */
static void
take(struct workqueue *q, const char *want)
{
	char *k = NULL;

	assert_int_equal(workqueue_get_timeout(q, &k, 5000), 0);
	assert_string_equal(k, want);
	workqueue_done(q, k);
	free(k);
}

static void
expect_empty(struct workqueue *q)
{
	char *k = (char *)"junk";

	assert_int_equal(workqueue_get_timeout(q, &k, 0), K8S_ETIMEDOUT);
	assert_null(k);
}

static void
test_backoff_formula(void **state)
{
	struct workqueue_opts o = { 5, 1000, 0, 0 };
	struct workqueue_opts odd = { 3, 50, 0, 0 };

	(void)state;
	/* Defaults: 5 ms doubling, capped at 1000 s. */
	assert_int_equal(workqueue_backoff_ms(NULL, 0), 5);
	assert_int_equal(workqueue_backoff_ms(NULL, 1), 10);
	assert_int_equal(workqueue_backoff_ms(NULL, 2), 20);
	assert_int_equal(workqueue_backoff_ms(NULL, 3), 40);
	assert_int_equal(workqueue_backoff_ms(NULL, 17), 655360);
	assert_int_equal(workqueue_backoff_ms(NULL, 18), 1000000);
	assert_int_equal(workqueue_backoff_ms(NULL, 63), 1000000);
	assert_int_equal(workqueue_backoff_ms(NULL, 64), 1000000);
	assert_int_equal(workqueue_backoff_ms(NULL, 2147483647), 1000000);
	assert_int_equal(workqueue_backoff_ms(NULL, -3), 5);
	/* Explicit options. */
	assert_int_equal(workqueue_backoff_ms(&o, 7), 640);
	assert_int_equal(workqueue_backoff_ms(&o, 8), 1000);
	assert_int_equal(workqueue_backoff_ms(&odd, 4), 48);
	assert_int_equal(workqueue_backoff_ms(&odd, 5), 50);
	/* Zero fields are the defaults. */
	o.base_delay_ms = 0;
	o.max_delay_ms = 0;
	assert_int_equal(workqueue_backoff_ms(&o, 1), 10);
	assert_int_equal(workqueue_backoff_ms(&o, 30), 1000000);
}

static void
test_bucket_arithmetic(void **state)
{
	struct workqueue_opts o = { 0, 0, 10, 2 };
	struct workqueue_bucket b;
	uint64_t t = 1000 * MS;

	(void)state;
	workqueue_bucket_init(&b, &o, t);
	/* Burst 2 is free; then each token is 100 ms further out. */
	assert_int_equal(workqueue_bucket_take(&b, t), 0);
	assert_int_equal(workqueue_bucket_take(&b, t), 0);
	assert_int_equal(workqueue_bucket_take(&b, t), 100);
	assert_int_equal(workqueue_bucket_take(&b, t), 200);
	/* 300 ms later 3 tokens came back: the debt of 2 is paid, 1 left. */
	t += 300 * MS;
	assert_int_equal(workqueue_bucket_take(&b, t), 0);
	assert_int_equal(workqueue_bucket_take(&b, t), 100);
	/* Half a token back after 50 ms: the next is 50 ms + 100 ms away. */
	t += 50 * MS;
	assert_int_equal(workqueue_bucket_take(&b, t), 150);
	/* A long idle time refills to burst, never beyond. */
	t += 3600000 * MS;
	assert_int_equal(workqueue_bucket_take(&b, t), 0);
	assert_int_equal(workqueue_bucket_take(&b, t), 0);
	assert_int_equal(workqueue_bucket_take(&b, t), 100);
	/* A clock that goes backwards refills nothing. */
	assert_int_equal(workqueue_bucket_take(&b, t - 500 * MS), 200);

	/* Defaults: 100 free, then 10/s. */
	workqueue_bucket_init(&b, NULL, 0);
	for (int i = 0; i < 100; i++)
		assert_int_equal(workqueue_bucket_take(&b, 0), 0);
	assert_int_equal(workqueue_bucket_take(&b, 0), 100);
}

static void
test_dedup_fifo(void **state)
{
	struct workqueue *q = workqueue_new(NULL);

	(void)state;
	workqueue_add(q, "ns/a");
	workqueue_add(q, "ns/b");
	workqueue_add(q, "ns/a");
	workqueue_add(q, "ns/c");
	workqueue_add(q, "ns/b");
	assert_int_equal(workqueue_len(q), 3);
	take(q, "ns/a");
	assert_int_equal(workqueue_len(q), 2);
	take(q, "ns/b");
	take(q, "ns/c");
	assert_int_equal(workqueue_len(q), 0);
	expect_empty(q);
	/* A finished key can be queued again, and "" is a key like any other. */
	workqueue_add(q, "ns/a");
	workqueue_add(q, "");
	assert_int_equal(workqueue_len(q), 2);
	take(q, "ns/a");
	take(q, "");
	expect_empty(q);
	workqueue_shutdown(q);
	workqueue_free(q);
}

/* busy: ready or handed out; a key is not done until done() says so. */
static void
test_busy(void **state)
{
	struct workqueue *q = workqueue_new(NULL);
	char *k = NULL, *k2 = NULL;

	(void)state;
	assert_int_equal(workqueue_busy(q), 0);
	workqueue_add(q, "a");
	workqueue_add(q, "b");
	workqueue_add_after(q, "later", 60000);
	assert_int_equal(workqueue_busy(q), 2);
	assert_int_equal(workqueue_get(q, &k), 0);
	/* Handed out: no longer ready, still busy. */
	assert_int_equal(workqueue_len(q), 1);
	assert_int_equal(workqueue_busy(q), 2);
	assert_int_equal(workqueue_get(q, &k2), 0);
	assert_int_equal(workqueue_len(q), 0);
	assert_int_equal(workqueue_busy(q), 2);
	/* Re-added while processing: busy counts it once. */
	workqueue_add(q, k);
	assert_int_equal(workqueue_busy(q), 2);
	workqueue_done(q, k2);
	assert_int_equal(workqueue_busy(q), 1);
	workqueue_done(q, k);	/* queued again: ready */
	assert_int_equal(workqueue_busy(q), 1);
	assert_int_equal(workqueue_len(q), 1);
	take(q, k);
	assert_int_equal(workqueue_busy(q), 0);
	assert_int_equal(workqueue_waiting(q), 1);
	free(k);
	free(k2);
	workqueue_shutdown(q);
	workqueue_free(q);
}

static void
test_dirty_while_processing(void **state)
{
	struct workqueue *q = workqueue_new(NULL);
	char *k = NULL;

	(void)state;
	workqueue_add(q, "x");
	workqueue_add(q, "y");
	assert_int_equal(workqueue_get(q, &k), 0);
	assert_string_equal(k, "x");
	/* Re-added while processing: remembered, but not handed out. */
	workqueue_add(q, "x");
	workqueue_add(q, "x");
	assert_int_equal(workqueue_len(q), 1);
	take(q, "y");
	expect_empty(q);
	/* done() queues it exactly once, behind what came meanwhile. */
	workqueue_add(q, "z");
	workqueue_done(q, k);
	free(k);
	assert_int_equal(workqueue_len(q), 2);
	take(q, "z");
	take(q, "x");
	expect_empty(q);
	/* done() for a key not being processed changes nothing. */
	workqueue_done(q, "x");
	workqueue_done(q, "never");
	assert_int_equal(workqueue_len(q), 0);
	workqueue_shutdown(q);
	workqueue_free(q);
}

#define NKEYS		8
#define NWORKERS	4
#define ROUNDS		3

struct conc {
	struct workqueue *q;
	atomic_int	 inflight[NKEYS];
	atomic_int	 processed[NKEYS];
	atomic_int	 overlaps;
	atomic_int	 total;
	atomic_int	 bad;
};

static void *
conc_worker(void *arg)
{
	struct conc *c = arg;
	char *k;
	int i, n;

	for (;;) {
		int rc = workqueue_get(c->q, &k);

		if (rc == K8S_ECANCELED)
			break;
		if (rc != 0 || sscanf(k, "ns/k%d", &i) != 1 || i < 0 ||
		    i >= NKEYS) {
			atomic_fetch_add(&c->bad, 1);
			free(k);
			break;
		}
		if (atomic_fetch_add(&c->inflight[i], 1) != 0)
			atomic_fetch_add(&c->overlaps, 1);
		n = atomic_fetch_add(&c->processed[i], 1) + 1;
		if (n < ROUNDS) {
			workqueue_add(c->q, k);
			workqueue_add(c->q, k);
		}
		/* Time for an idle worker to grab k, were it queued wrongly. */
		sleep_ms(3);
		atomic_fetch_sub(&c->inflight[i], 1);
		workqueue_done(c->q, k);
		free(k);
		atomic_fetch_add(&c->total, 1);
	}
	return NULL;
}

static void
test_no_concurrent_processing(void **state)
{
	struct conc c;
	pthread_t th[NWORKERS];
	char key[32];
	int i;

	(void)state;
	memset(&c, 0, sizeof(c));
	c.q = workqueue_new(NULL);
	for (i = 0; i < NWORKERS; i++)
		assert_int_equal(pthread_create(&th[i], NULL, conc_worker, &c), 0);
	for (i = 0; i < NKEYS; i++) {
		snprintf(key, sizeof(key), "ns/k%d", i);
		workqueue_add(c.q, key);
	}
	for (i = 0; i < 10000 && atomic_load(&c.total) < NKEYS * ROUNDS; i++)
		sleep_ms(1);
	/* Nothing extra may turn up later either. */
	sleep_ms(50);
	assert_int_equal(workqueue_len(c.q), 0);
	workqueue_shutdown(c.q);
	for (i = 0; i < NWORKERS; i++)
		join(th[i]);
	assert_int_equal(atomic_load(&c.bad), 0);
	assert_int_equal(atomic_load(&c.overlaps), 0);
	assert_int_equal(atomic_load(&c.total), NKEYS * ROUNDS);
	for (i = 0; i < NKEYS; i++)
		assert_int_equal(atomic_load(&c.processed[i]), ROUNDS);
	workqueue_free(c.q);
}

static void
test_add_after_delay(void **state)
{
	struct workqueue *q = workqueue_new(NULL);
	uint64_t t0, el;
	char *k = NULL;

	(void)state;
	t0 = mono_ns();
	workqueue_add_after(q, "ttl/x", 200);
	assert_int_equal(workqueue_len(q), 0);
	assert_int_equal(workqueue_waiting(q), 1);
	expect_empty(q);
	assert_int_equal(workqueue_get(q, &k), 0);
	el = mono_ns() - t0;
	assert_string_equal(k, "ttl/x");
	assert_true(el >= 200 * MS);
	assert_true(el < 200 * MS + SLACK);
	assert_int_equal(workqueue_waiting(q), 0);
	workqueue_done(q, k);
	free(k);
	/* Delay 0 is a plain add. */
	workqueue_add_after(q, "now", 0);
	assert_int_equal(workqueue_len(q), 1);
	assert_int_equal(workqueue_waiting(q), 0);
	take(q, "now");
	workqueue_shutdown(q);
	workqueue_free(q);
}

static void
test_add_after_order_and_dedup(void **state)
{
	struct workqueue *q = workqueue_new(NULL);
	uint64_t t0, el;
	char *k = NULL;

	(void)state;
	t0 = mono_ns();
	workqueue_add_after(q, "c", 150);
	workqueue_add_after(q, "a", 50);
	workqueue_add_after(q, "b", 100);
	/* Waiting with an earlier time: the earlier one stays. */
	workqueue_add_after(q, "a", 1000);
	/* Waiting with a later time: moved up to the earlier one. */
	workqueue_add_after(q, "c", 120);
	assert_int_equal(workqueue_waiting(q), 3);
	assert_int_equal(workqueue_len(q), 0);

	assert_int_equal(workqueue_get(q, &k), 0);
	el = mono_ns() - t0;
	assert_string_equal(k, "a");
	assert_true(el >= 50 * MS && el < 50 * MS + SLACK);
	workqueue_done(q, k);
	free(k);
	assert_int_equal(workqueue_get(q, &k), 0);
	el = mono_ns() - t0;
	assert_string_equal(k, "b");
	assert_true(el >= 100 * MS && el < 100 * MS + SLACK);
	workqueue_done(q, k);
	free(k);
	assert_int_equal(workqueue_get(q, &k), 0);
	el = mono_ns() - t0;
	assert_string_equal(k, "c");
	assert_true(el >= 120 * MS && el < 120 * MS + SLACK);
	workqueue_done(q, k);
	free(k);
	assert_int_equal(workqueue_waiting(q), 0);
	expect_empty(q);

	/* A delayed key that is also queued now comes out once, then again. */
	workqueue_add(q, "d");
	workqueue_add_after(q, "d", 300);
	take(q, "d");
	expect_empty(q);
	take(q, "d");
	expect_empty(q);
	workqueue_shutdown(q);
	workqueue_free(q);
}

struct getter {
	struct workqueue *q;
	uint64_t	 timeout_ms;	/* 0: workqueue_get() */
	int		 rc;
	char		*key;
	uint64_t	 returned;
};

static void *
getter_main(void *arg)
{
	struct getter *g = arg;

	if (g->timeout_ms == 0)
		g->rc = workqueue_get(g->q, &g->key);
	else
		g->rc = workqueue_get_timeout(g->q, &g->key, g->timeout_ms);
	g->returned = mono_ns();
	return NULL;
}

static void
test_blocked_getter_wakes(void **state)
{
	struct workqueue *q = workqueue_new(NULL);
	struct getter g = { .q = q };
	pthread_t th;
	uint64_t t0;

	(void)state;
	/* A plain add wakes a getter blocked on an empty queue. */
	assert_int_equal(pthread_create(&th, NULL, getter_main, &g), 0);
	sleep_ms(50);
	t0 = mono_ns();
	workqueue_add(q, "now");
	join(th);
	assert_int_equal(g.rc, 0);
	assert_string_equal(g.key, "now");
	assert_true(g.returned - t0 < SLACK);
	workqueue_done(q, g.key);
	free(g.key);

	/*
	 * A getter already sleeping until a far-off key must wake for an
	 * earlier one added later: not before it is due, and well before
	 * the far one.
	 */
	memset(&g, 0, sizeof(g));
	g.q = q;
	workqueue_add_after(q, "late", 3000);
	assert_int_equal(pthread_create(&th, NULL, getter_main, &g), 0);
	sleep_ms(50);
	t0 = mono_ns();
	workqueue_add_after(q, "soon", 100);
	join(th);
	assert_int_equal(g.rc, 0);
	assert_string_equal(g.key, "soon");
	assert_true(g.returned - t0 >= 100 * MS);
	assert_true(g.returned - t0 < 100 * MS + SLACK);
	workqueue_done(q, g.key);
	free(g.key);
	assert_int_equal(workqueue_waiting(q), 1);
	workqueue_shutdown(q);
	workqueue_free(q);
}

static void
test_get_timeout(void **state)
{
	struct workqueue *q = workqueue_new(NULL);
	char *k = (char *)"junk";
	uint64_t t0, el;

	(void)state;
	t0 = mono_ns();
	assert_int_equal(workqueue_get_timeout(q, &k, 100), K8S_ETIMEDOUT);
	el = mono_ns() - t0;
	assert_null(k);
	assert_true(el >= 100 * MS && el < 100 * MS + SLACK);
	/* A key due before the timeout is handed out, not a timeout. */
	workqueue_add_after(q, "t", 50);
	assert_int_equal(workqueue_get_timeout(q, &k, 2000), 0);
	assert_string_equal(k, "t");
	workqueue_done(q, k);
	free(k);
	/* One due after it is not. */
	workqueue_add_after(q, "t", 400);
	assert_int_equal(workqueue_get_timeout(q, &k, 50), K8S_ETIMEDOUT);
	assert_int_equal(workqueue_waiting(q), 1);
	workqueue_shutdown(q);
	workqueue_free(q);
}

static void
test_rate_limited_per_key(void **state)
{
	struct workqueue *q = workqueue_new(NULL);
	uint64_t t0, el, want;
	char *k = NULL;
	int i;

	(void)state;
	/* Delays 5, 10, 20, 40 ms, and one entry per key however many adds. */
	for (i = 0; i < 4; i++) {
		want = workqueue_backoff_ms(NULL, i) * MS;
		t0 = mono_ns();
		workqueue_add_rate_limited(q, "ns/r");
		assert_int_equal(workqueue_requeues(q, "ns/r"), i + 1);
		assert_int_equal(workqueue_waiting(q), 1);
		assert_int_equal(workqueue_get(q, &k), 0);
		el = mono_ns() - t0;
		assert_string_equal(k, "ns/r");
		assert_true(el >= want);
		assert_true(el < want + SLACK);
		workqueue_done(q, k);
		free(k);
	}
	assert_int_equal(workqueue_requeues(q, "ns/r"), 4);
	assert_int_equal(workqueue_requeues(q, "ns/other"), 0);
	workqueue_forget(q, "ns/r");
	assert_int_equal(workqueue_requeues(q, "ns/r"), 0);
	/* After forget the back-off starts at the base again. */
	t0 = mono_ns();
	workqueue_add_rate_limited(q, "ns/r");
	assert_int_equal(workqueue_requeues(q, "ns/r"), 1);
	assert_int_equal(workqueue_get(q, &k), 0);
	el = mono_ns() - t0;
	assert_true(el >= 5 * MS && el < 5 * MS + SLACK);
	workqueue_done(q, k);
	free(k);
	workqueue_forget(q, "ns/r");
	workqueue_forget(q, "never-seen");
	workqueue_shutdown(q);
	workqueue_free(q);
}

static void
test_rate_limited_bucket(void **state)
{
	struct workqueue_opts o = { .qps = 10, .burst = 2 };
	struct workqueue *q = workqueue_new(&o);
	uint64_t t0, el[3];
	char *k[3];
	int i;

	(void)state;
	t0 = mono_ns();
	workqueue_add_rate_limited(q, "a");
	workqueue_add_rate_limited(q, "b");
	workqueue_add_rate_limited(q, "c");
	assert_int_equal(workqueue_waiting(q), 3);
	for (i = 0; i < 3; i++) {
		assert_int_equal(workqueue_get(q, &k[i]), 0);
		el[i] = mono_ns() - t0;
	}
	/* a and b ride the burst (5 ms per-key); c waits for a token. */
	assert_string_equal(k[0], "a");
	assert_string_equal(k[1], "b");
	assert_string_equal(k[2], "c");
	assert_true(el[0] >= 5 * MS);
	assert_true(el[1] >= 5 * MS);
	assert_true(el[1] < 100 * MS);
	assert_true(el[2] >= 100 * MS);
	assert_true(el[2] < 100 * MS + SLACK);
	for (i = 0; i < 3; i++) {
		assert_int_equal(workqueue_requeues(q, k[i]), 1);
		workqueue_done(q, k[i]);
		workqueue_forget(q, k[i]);
		free(k[i]);
	}
	workqueue_shutdown(q);
	workqueue_free(q);
}

static void
test_shutdown(void **state)
{
	struct workqueue_opts slow = { .base_delay_ms = 1000 };
	struct workqueue *q = workqueue_new(NULL);
	struct getter g[3];
	pthread_t th[3];
	uint64_t t0;
	char *k = NULL;
	int i;

	(void)state;
	memset(g, 0, sizeof(g));
	for (i = 0; i < 3; i++) {
		g[i].q = q;
		g[i].timeout_ms = i == 2 ? 10000 : 0;
		assert_int_equal(pthread_create(&th[i], NULL, getter_main,
		    &g[i]), 0);
	}
	workqueue_add_after(q, "late", 5000);
	sleep_ms(100);
	t0 = mono_ns();
	workqueue_shutdown(q);
	for (i = 0; i < 3; i++) {
		join(th[i]);
		assert_int_equal(g[i].rc, K8S_ECANCELED);
		assert_null(g[i].key);
		assert_true(g[i].returned - t0 < 50 * MS);
	}
	assert_int_equal(workqueue_waiting(q), 0);
	assert_int_equal(workqueue_get(q, &k), K8S_ECANCELED);
	workqueue_shutdown(q);
	workqueue_free(q);

	/* Ready keys are still handed out; delayed ones and later adds not. */
	q = workqueue_new(&slow);
	workqueue_add(q, "r1");
	workqueue_add(q, "p");
	workqueue_add(q, "r2");
	workqueue_add_after(q, "d", 1000);
	workqueue_add_rate_limited(q, "rl");
	assert_int_equal(workqueue_get(q, &k), 0);
	assert_string_equal(k, "r1");
	workqueue_done(q, k);
	free(k);
	assert_int_equal(workqueue_get(q, &k), 0);
	assert_string_equal(k, "p");
	workqueue_add(q, "p");		/* dirty while processing */
	workqueue_shutdown(q);
	assert_int_equal(workqueue_waiting(q), 0);
	workqueue_add(q, "z");
	workqueue_add_after(q, "z", 10);
	workqueue_add_rate_limited(q, "z");
	assert_int_equal(workqueue_len(q), 1);
	assert_int_equal(workqueue_waiting(q), 0);
	assert_int_equal(workqueue_requeues(q, "z"), 0);
	take(q, "r2");
	workqueue_done(q, k);		/* the dirty key goes out once more */
	free(k);
	take(q, "p");
	assert_int_equal(workqueue_get(q, &k), K8S_ECANCELED);
	assert_null(k);
	assert_int_equal(workqueue_get_timeout(q, &k, 1000), K8S_ECANCELED);
	workqueue_free(q);
	workqueue_free(NULL);
}

static void
test_key_too_long(void **state)
{
	struct workqueue *q = workqueue_new(NULL);
	char *big = malloc(WORKQUEUE_KEY_MAX + 2), *k = NULL, *out = NULL, *p;
	size_t len = 0;
	int n;
	FILE *f = open_memstream(&out, &len);

	(void)state;
	assert_non_null(big);
	memset(big, 'x', WORKQUEUE_KEY_MAX + 1);
	big[WORKQUEUE_KEY_MAX + 1] = '\0';
	log_set_stream(f);
	log_set_level(LOG_LEVEL_INFO);
	workqueue_add(q, big);
	workqueue_add_after(q, big, 10);
	workqueue_add_rate_limited(q, big);
	log_set_stream(NULL);
	fclose(f);
	assert_int_equal(workqueue_len(q), 0);
	assert_int_equal(workqueue_waiting(q), 0);
	assert_int_equal(workqueue_requeues(q, big), 0);
	assert_non_null(strstr(out, " level=warn msg=\"workqueue key refused\" "
	    "reason=too_long max=4096\n"));
	/* Three refusals, three lines, and the key itself is not logged. */
	for (n = 0, p = out; (p = strchr(p, '\n')) != NULL; p++)
		n++;
	assert_int_equal(n, 3);
	assert_null(strstr(out, "xxxx"));
	free(out);

	/* Exactly the limit is fine. */
	big[WORKQUEUE_KEY_MAX] = '\0';
	workqueue_add(q, big);
	assert_int_equal(workqueue_len(q), 1);
	assert_int_equal(workqueue_get(q, &k), 0);
	assert_int_equal(strlen(k), WORKQUEUE_KEY_MAX);
	assert_string_equal(k, big);
	workqueue_done(q, k);
	free(k);
	free(big);
	workqueue_shutdown(q);
	workqueue_free(q);
}

#define NHEAP	20

static void
test_delayed_heap_order(void **state)
{
	struct workqueue *q = workqueue_new(NULL);
	uint64_t lo[NHEAP], hi[NHEAP], d;
	char key[32], *k = NULL;
	int i, j, prev = -1;

	(void)state;
	/*
	 * All far off first (in reverse, scrambling the heap), so the second
	 * round moves each one up from wherever it sits.
	 */
	for (i = 0; i < NHEAP; i++) {
		snprintf(key, sizeof(key), "h/%d", i);
		workqueue_add_after(q, key, 600000 - (uint64_t)i);
	}
	/* Then due in a scrambled order, 20 ms apart. */
	for (i = 0; i < NHEAP; i++) {
		j = i * 7 % NHEAP;
		d = 20 + 20 * (uint64_t)j;
		snprintf(key, sizeof(key), "h/%d", j);
		lo[j] = mono_ns() + d * MS;
		workqueue_add_after(q, key, d);
		hi[j] = mono_ns() + d * MS;
	}
	assert_int_equal(workqueue_waiting(q), NHEAP);
	/* Let them all fall due, so one get pops the whole heap. */
	sleep_ms(500);
	for (i = 0; i < NHEAP; i++) {
		assert_int_equal(workqueue_get_timeout(q, &k, 5000), 0);
		assert_int_equal(sscanf(k, "h/%d", &j), 1);
		/* j's due time cannot be certainly later than prev's. */
		if (prev >= 0)
			assert_true(hi[j] >= lo[prev]);
		assert_true(mono_ns() >= lo[j]);
		prev = j;
		workqueue_done(q, k);
		free(k);
	}
	assert_int_equal(workqueue_waiting(q), 0);
	expect_empty(q);
	workqueue_shutdown(q);
	workqueue_free(q);
}

static void
test_many_keys(void **state)
{
	struct workqueue *q = workqueue_new(NULL);
	char key[32], *k = NULL;
	int i;

	(void)state;
	/* Enough keys to grow the hash table and the heap several times. */
	for (i = 0; i < 1000; i++) {
		snprintf(key, sizeof(key), "ns/%d", i);
		workqueue_add(q, key);
		workqueue_add_after(q, key, 600000 - (uint64_t)i);
	}
	for (i = 0; i < 1000; i++) {
		snprintf(key, sizeof(key), "ns/%d", i);
		workqueue_add(q, key);
	}
	assert_int_equal(workqueue_len(q), 1000);
	assert_int_equal(workqueue_waiting(q), 1000);
	for (i = 0; i < 1000; i++) {
		snprintf(key, sizeof(key), "ns/%d", i);
		assert_int_equal(workqueue_get_timeout(q, &k, 0), 0);
		assert_string_equal(k, key);
		workqueue_done(q, k);
		free(k);
	}
	expect_empty(q);
	workqueue_shutdown(q);
	assert_int_equal(workqueue_waiting(q), 0);
	workqueue_free(q);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_backoff_formula),
		cmocka_unit_test(test_bucket_arithmetic),
		cmocka_unit_test(test_dedup_fifo),
		cmocka_unit_test(test_busy),
		cmocka_unit_test(test_dirty_while_processing),
		cmocka_unit_test(test_no_concurrent_processing),
		cmocka_unit_test(test_add_after_delay),
		cmocka_unit_test(test_add_after_order_and_dedup),
		cmocka_unit_test(test_delayed_heap_order),
		cmocka_unit_test(test_blocked_getter_wakes),
		cmocka_unit_test(test_get_timeout),
		cmocka_unit_test(test_rate_limited_per_key),
		cmocka_unit_test(test_rate_limited_bucket),
		cmocka_unit_test(test_shutdown),
		cmocka_unit_test(test_key_too_long),
		cmocka_unit_test(test_many_keys),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
