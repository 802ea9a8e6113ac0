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
	long long t0, lost_at = 0;

	(void)state;
	assert_int_equal(k8s_client_new(cfg, NULL, &c, &err), 0);
	/* No Lease yet: create it and lead. Then every request fails (599). */
	fakeapi_push(api, 404, NULL, "{\"kind\":\"Status\",\"reason\":\"NotFound\",\"code\":404}", 0);
	fakeapi_push(api, 201, NULL, "{}", 0);
	assert_int_equal(lease_new(c, &lc, &cb, &r.l, &err), 0);
	t0 = clock_mono_ms();
	pthread_create(&r.th, NULL, runner, &r);
	while (!lease_is_leader(r.l) && clock_mono_ms() - t0 < 2000)
		nap();
	assert_true(lease_is_leader(r.l));
	while (lease_is_leader(r.l) && clock_mono_ms() - t0 < 5000)
		nap();
	lost_at = clock_mono_ms();
	assert_false(lease_is_leader(r.l));
	/* Acting stops at the renew deadline, counted from the last good renewal. */
	assert_true(lost_at - t0 >= 1000);
	assert_true(lost_at - t0 < 1300);
	/* The callback follows within one short retry (P/4). */
	while (r.stopped == 0 && clock_mono_ms() - t0 < 3000)
		nap();
	assert_true(r.started > 0);
	assert_true(r.stopped >= t0 + 1000);
	assert_true(r.stopped < t0 + 1400);
	/* It kept trying meanwhile: a GET every P/4 after the first failure. */
	assert_true(fakeapi_count(api) >= 6);
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
	struct k8s_client_opts co = { .timeout_ms = 2500 };
	struct run r = { 0 };
	struct lease_callbacks cb = { on_start, on_stop, NULL, &r };
	struct k8s_client *c;
	struct k8s_error err;
	long long t0, lost_at;

	(void)state;
	assert_int_equal(k8s_client_new(cfg, &co, &c, &err), 0);
	fakeapi_push(api, 404, NULL, "{\"kind\":\"Status\",\"reason\":\"NotFound\",\"code\":404}", 0);
	fakeapi_push(api, 201, NULL, "{}", 0);
	/* The first renewal's GET hangs for 4 s. The client given allows 2.5 s;
	 * the lease's own requests end at the 1 s renew deadline. */
	fakeapi_push(api, 200, NULL, "{}", 4000);
	assert_int_equal(lease_new(c, &lc, &cb, &r.l, &err), 0);
	t0 = clock_mono_ms();
	pthread_create(&r.th, NULL, runner, &r);
	while (!lease_is_leader(r.l) && clock_mono_ms() - t0 < 2000)
		nap();
	assert_true(lease_is_leader(r.l));
	while (lease_is_leader(r.l) && clock_mono_ms() - t0 < 5000)
		nap();
	lost_at = clock_mono_ms();
	/* Not acting at the deadline even though the request is still out. */
	assert_true(lost_at - t0 >= 1000);
	assert_true(lost_at - t0 < 1300);
	/* The callback follows when the lease's request times out (renewal
	 * started at +500 ms, times out at +1500 ms), not at 2.5 s. */
	while (r.stopped == 0 && clock_mono_ms() - t0 < 4000)
		nap();
	assert_true(r.stopped >= t0 + 1400);
	assert_true(r.stopped < t0 + 1900);
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
	/* Not before D - P after the poll that saw the new record. */
	assert_true(fakeapi_time(api, put) - fakeapi_time(api, changed) >= 1000 - 250 - 50);
	assert_true(fakeapi_time(api, put) - fakeapi_time(api, changed) <= 1000 + 300);
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
