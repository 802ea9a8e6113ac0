/*
 * Unit tests: operator/lease.c against a scripted server, for what the real
 * API server cannot be made to do on demand: fail every renewal, or hang.
 * Contention and takeover between processes are in tests/integration.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "client.h"
#include "clock.h"
#include "fakeapi.h"
#include "lease.h"

struct run {
	struct lease	*l;
	long long	 started, stopped;	/* mono ms of the callbacks */
	pthread_t	 th;
};

static void
on_start(void *arg)
{
	((struct run *)arg)->started = clock_mono_ms();
}

static void
on_stop(void *arg)
{
	((struct run *)arg)->stopped = clock_mono_ms();
}

static void
nap(void)
{
	struct timespec ts = { 0, 1000000L };

	nanosleep(&ts, NULL);
}

static void *
runner(void *arg)
{
	lease_run(((struct run *)arg)->l);
	return NULL;
}

/*
 * Polls lease_is_leader() until it turns false or `limit` ms pass, and
 * checks the safety property at every poll, whatever the scheduler does:
 * a replica that says it leads at instant T has renewed within the renew
 * deadline before T. The last renewal that succeeded is request `good`;
 * the lease dates a renewal from before it sent it, so from no later than
 * the fake server's arrival time, which makes this bound a safe one to
 * hold the lease to. Returns when the lease was first seen not leading.
 */
static long long
watch_leadership(struct fakeapi *api, struct run *r, int good, long deadline,
    long long limit)
{
	long long t, end = clock_mono_ms() + limit;

	for (;;) {
		t = clock_mono_ms();
		if (!lease_is_leader(r->l))
			return t;
		assert_true(t < fakeapi_time(api, good) + deadline);
		assert_true(t < end);
		nap();
	}
}

/*
 * Timing bounds here are the lease's promises, and only those: under
 * valgrind, beside another test tier on two cores, this thread may not run
 * for hundreds of ms, so an upper bound on when the test *saw* something
 * would measure the scheduler. Lower bounds (nothing stops early) and the
 * safety check above hold under any delay; liveness is checked with room
 * (seconds, where the wrong behaviour takes far longer or forever).
 */
static void
test_failed_renewals_stop_acting(void **state)
{
	struct fakeapi *api = fakeapi_start();
	struct k8s_config *cfg = fakeapi_config(api, NULL);
	struct lease_config lc = { "ns1", "ctl", "me", 3000, 1000, 500 };
	struct run r = { 0 };
	struct lease_callbacks cb = { on_start, on_stop, NULL, &r };
	struct k8s_client *c;
	struct k8s_error err;
	long long t0, lost_at;
	int i, n, gets = 0;

	(void)state;
	assert_int_equal(k8s_client_new(cfg, NULL, &c, &err), 0);
	/* No Lease yet: create it and lead. Then every request fails (599). */
	fakeapi_push(api, 404, NULL, "{\"kind\":\"Status\",\"reason\":\"NotFound\",\"code\":404}", 0);
	fakeapi_push(api, 201, NULL, "{}", 0);
	assert_int_equal(lease_new(c, &lc, &cb, &r.l, &err), 0);
	t0 = clock_mono_ms();
	pthread_create(&r.th, NULL, runner, &r);
	while (!lease_is_leader(r.l) && clock_mono_ms() - t0 < 10000)
		nap();
	assert_true(lease_is_leader(r.l));
	/* Acting stops by the renew deadline, counted from the create. */
	lost_at = watch_leadership(api, &r, 1, 1000, 10000);
	assert_true(lost_at >= t0 + 1000);
	/* The callback follows; not before the deadline. */
	while (r.stopped == 0 && clock_mono_ms() - lost_at < 10000)
		nap();
	assert_true(r.started > 0);
	assert_true(r.stopped >= t0 + 1000);
	/* It kept trying meanwhile, a GET every P/4 (125 ms) after the first
	 * failure: at least 3 before the deadline, however slow this run. */
	n = fakeapi_count(api);
	for (i = 2; i < n; i++)
		if (fakeapi_time(api, i) < fakeapi_time(api, 1) + 1000 &&
		    strncmp(fakeapi_request(api, i), "GET ", 4) == 0)
			gets++;
	assert_true(gets >= 3);
	lease_stop(r.l);
	pthread_join(r.th, NULL);
	lease_free(r.l);
	k8s_client_free(c);
	k8s_config_free(cfg);
	fakeapi_stop(api);
}

static void
test_hung_renewal_stops_acting(void **state)
{
	struct fakeapi *api = fakeapi_start();
	struct k8s_config *cfg = fakeapi_config(api, NULL);
	struct lease_config lc = { "ns1", "ctl", "me", 3000, 1000, 500 };
	struct k8s_client_opts co = { .timeout_ms = 60000 };
	struct run r = { 0 };
	struct lease_callbacks cb = { on_start, on_stop, NULL, &r };
	struct k8s_client *c;
	struct k8s_error err;
	long long t0, lost_at;

	(void)state;
	assert_int_equal(k8s_client_new(cfg, &co, &c, &err), 0);
	fakeapi_push(api, 404, NULL, "{\"kind\":\"Status\",\"reason\":\"NotFound\",\"code\":404}", 0);
	fakeapi_push(api, 201, NULL, "{}", 0);
	/* The first renewal's GET never gets its answer while the test runs.
	 * The client given allows 60 s; the lease's own requests end at the
	 * 1 s renew deadline. */
	fakeapi_push(api, 200, NULL, "{}", FAKEAPI_HOLD);
	assert_int_equal(lease_new(c, &lc, &cb, &r.l, &err), 0);
	t0 = clock_mono_ms();
	pthread_create(&r.th, NULL, runner, &r);
	while (!lease_is_leader(r.l) && clock_mono_ms() - t0 < 10000)
		nap();
	assert_true(lease_is_leader(r.l));
	/* Not acting past the deadline even though the request is still out. */
	lost_at = watch_leadership(api, &r, 1, 1000, 10000);
	assert_true(lost_at >= t0 + 1000);
	/* The callback follows when the lease's request times out (renewal
	 * started at +500 ms, times out at +1500 ms), not at the client's 60 s:
	 * 10 s is room for a slow run and far from 60. */
	while (r.stopped == 0 && clock_mono_ms() - lost_at < 10000)
		nap();
	assert_true(r.stopped >= t0 + 1400);
	lease_stop(r.l);
	pthread_join(r.th, NULL);
	lease_free(r.l);
	k8s_client_free(c);
	k8s_config_free(cfg);
	fakeapi_stop(api);
}

#define LEASE(rv) "{\"metadata\":{\"name\":\"ctl\",\"namespace\":\"ns1\",\"resourceVersion\":\"" rv "\"}," \
	"\"spec\":{\"holderIdentity\":\"other\",\"leaseDurationSeconds\":1,\"leaseTransitions\":0}}"

/*
 * A follower whose polls failed for longer than the lease duration, then
 * sees a fresh renewal, must not take over at once: the holder is alive.
 * (It did: the change was dated by its last successful poll, long ago.)
 */
static void
test_stale_follower_waits(void **state)
{
	struct fakeapi *api = fakeapi_start();
	struct k8s_config *cfg = fakeapi_config(api, NULL);
	/* D 1 s (as the record says): the shortest there is (whole seconds). */
	struct lease_config lc = { "ns1", "ctl", "me", 1000, 500, 250 };
	struct run r = { 0 };
	struct lease_callbacks cb = { on_start, on_stop, NULL, &r };
	struct k8s_client *c;
	struct k8s_error err;
	int i, n, put = -1, changed = 6;

	(void)state;
	assert_int_equal(k8s_client_new(cfg, NULL, &c, &err), 0);
	fakeapi_push(api, 200, NULL, LEASE("1"), 0);
	for (i = 0; i < 5; i++)		/* 1.25 s of failures: longer than D */
		fakeapi_push(api, 500, NULL, "{}", 0);
	for (i = 0; i < 12; i++)	/* then a renewal, and silence */
		fakeapi_push(api, 200, NULL, LEASE("2"), 0);
	fakeapi_push(api, 200, NULL, "{}", 0);	/* the takeover PUT */
	assert_int_equal(lease_new(c, &lc, &cb, &r.l, &err), 0);
	pthread_create(&r.th, NULL, runner, &r);
	for (long long end = clock_mono_ms() + 12000; r.started == 0 && clock_mono_ms() < end;)
		nap();
	lease_stop(r.l);
	pthread_join(r.th, NULL);
	n = fakeapi_count(api);
	for (i = 0; i < n; i++)
		if (strncmp(fakeapi_request(api, i), "PUT ", 4) == 0 && put < 0)
			put = i;
	assert_true(put > changed);
	assert_string_equal(fakeapi_request(api, changed), "GET /apis/coordination.k8s.io/v1/namespaces/ns1/leases/ctl");
	/* Not before D - P after the poll that saw the new record; and it
	 * does take over: D + P is the promise, 3 s is room for a slow run. */
	assert_true(fakeapi_time(api, put) - fakeapi_time(api, changed) >= 1000 - 250 - 50);
	assert_true(fakeapi_time(api, put) - fakeapi_time(api, changed) <= 3000);
	assert_true(r.started > 0);
	lease_free(r.l);
	k8s_client_free(c);
	k8s_config_free(cfg);
	fakeapi_stop(api);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_failed_renewals_stop_acting),
		cmocka_unit_test(test_hung_renewal_stops_acting),
		cmocka_unit_test(test_stale_follower_waits),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
