/*
 * Unit tests: controller/egressfollow.c against a scripted API server
 * that serves the proxy's log as a held-open stream (a followed log):
 * the request the controller makes, the records counted once through a
 * break and a resume, one status patch with the exact counts after the
 * grace, a stream lost (its pod gone after a break) marking the counts
 * incomplete, and nothing at all when no profile has host entries or an
 * execution has none.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "clock.h"
#include "controller_priv.h"
#include "cx.h"
#include "fakeapi.h"
#include "xmalloc.h"

#define UID	"0b8f8f4e-63a4-4f54-9c1c-2a7c1d1e6f00"
#define NS	"airlock-system"
#define LOG	"GET /api/v1/namespaces/" NS "/pods/gate-1/log?container=proxy" \
	"&follow=true&timestamps=true&sinceTime="
#define PATCH	"PATCH /apis/airlock.dev/v1alpha1/namespaces/t/codeexecutions/x/status"
#define GRACE	300

#define CONF(egress) "profiles:\n  python-net:\n    image: i\n" \
	"    command: [/airlock/bin/run, python3, main.py]\n" \
	"    sourceFile: main.py\n    network: {egress: [" egress "]}\n"

struct fx {
	struct fakeapi		*api, *cx_src, *gate_src;
	struct k8s_config	*cfg, *cx_kc, *gate_kc;
	struct k8s_client	*cx_cl, *gate_cl;
	struct ctl_config	*conf;
	struct metrics		*m;
	struct controller	 ctl;
};

/* The execution x, ended, made now; with host entries when proxied. */
static json_t *
execution(int proxied)
{
	char now[CLOCK_RFC3339_LEN];
	json_t *eg = json_pack("{s:b, s:s}", "granted", 1, "podUID", "pod-uid");

	clock_format_rfc3339((long long)time(NULL) * 1000000000LL, 0, now);
	if (proxied)
		json_object_set_new(eg, "proxied", json_true());
	return json_pack("{s:s, s:s, s:{s:s, s:s, s:s, s:s, s:s}, s:{s:s, s:o}}",
	    "apiVersion", "airlock.dev/v1alpha1", "kind", "CodeExecution",
	    "metadata", "name", "x", "namespace", "t", "uid", UID,
	    "resourceVersion", "7", "creationTimestamp", now,
	    "status", "phase", "Succeeded", "egress", eg);
}

static void
start(struct fx *fx, const char *conf, int proxied)
{
	struct k8s_error err;

	fx->api = fakeapi_start();
	fx->cfg = fakeapi_config(fx->api, NULL);
	assert_int_equal(k8s_client_new(fx->cfg, NULL, &fx->ctl.client, &err), 0);
	assert_int_equal(ctl_config_parse(conf, strlen(conf), "test", &fx->conf,
	    &err), 0);
	fx->ctl.cfg = fx->conf;
	fx->ctl.opts.agent_lease_ns = NS;
	fx->ctl.opts.egress_grace_ms = GRACE;
	fx->ctl.queue = workqueue_new(NULL);
	fx->ctl.cx_inf = fakeapi_informer(&cx_resource, json_pack("[o]",
	    execution(proxied)), NULL, NULL, 60000, &fx->cx_src, &fx->cx_kc,
	    &fx->cx_cl);
	/* As egress.c's trim_gate keeps it: its proxy running. */
	fx->ctl.gate_inf = fakeapi_informer(&k8s_res_pods, json_pack("[{s:{s:s,"
	    " s:s, s:s}, s:s, s:s}]", "metadata", "name", "gate-1", "namespace",
	    NS, "uid", "gate-uid-1", "ip", "10.0.0.5", "proxy",
	    "containerd://c1"), NULL, NULL, 60000, &fx->gate_src, &fx->gate_kc,
	    &fx->gate_cl);
	fx->m = metrics_new();
	fx->ctl.follow = ctl_egress_follow_new(&fx->ctl, fx->m);
}

static int
setup(void **state)
{
	*state = xcalloc(1, sizeof(struct fx));
	return 0;
}

static int
teardown(void **state)
{
	struct fx *fx = *state;

	ctl_egress_follow_free(fx->ctl.follow);
	fakeapi_informer_free(fx->ctl.cx_inf, fx->cx_src, fx->cx_kc, fx->cx_cl);
	fakeapi_informer_free(fx->ctl.gate_inf, fx->gate_src, fx->gate_kc,
	    fx->gate_cl);
	workqueue_free(fx->ctl.queue);
	k8s_client_free(fx->ctl.client);
	k8s_config_free(fx->cfg);
	fakeapi_stop(fx->api);
	ctl_config_free(fx->conf);
	metrics_free(fx->m);
	free(fx);
	return 0;
}

/* ctl_egress_count on the cached x until a request n arrives (or 10 s). */
static void
count_until(struct fx *fx, int n)
{
	long long end = clock_mono_ms() + 10000;

	while (fakeapi_count(fx->api) < n && clock_mono_ms() < end) {
		json_t *cx = informer_get(fx->ctl.cx_inf, "t", "x");

		assert_int_equal(ctl_egress_count(&fx->ctl, cx, "t/x"), 0);
		json_decref(cx);
		nanosleep(&(struct timespec){ 0, 20000000L }, NULL);
	}
	assert_int_equal(fakeapi_count(fx->api), n);
}

/* ctl_egress_count on the cached x for ms; the requests then. */
static int
count_for(struct fx *fx, long ms)
{
	long long end = clock_mono_ms() + ms;

	while (clock_mono_ms() < end) {
		json_t *cx = informer_get(fx->ctl.cx_inf, "t", "x");

		(void)ctl_egress_count(&fx->ctl, cx, "t/x");
		json_decref(cx);
		nanosleep(&(struct timespec){ 0, 20000000L }, NULL);
	}
	return fakeapi_count(fx->api);
}

/* The sinceTime of request i, in seconds since the epoch. */
static long long
since(struct fx *fx, int i)
{
	const char *r = fakeapi_request(fx->api, i);

	assert_true(strncmp(r, LOG, strlen(LOG)) == 0);
	return clock_parse_rfc3339(r + strlen(LOG));
}

/* The value of the op on path in the JSON patch request i sent (borrowed, until the next call). */
static json_t *
op_value(struct fx *fx, int i, const char *path)
{
	static json_t *patch;
	json_t *op;
	size_t k;

	json_decref(patch);
	patch = json_loads(fakeapi_body(fx->api, i), 0, NULL);
	json_array_foreach(patch, k, op)
		if (strcmp(json_string_value(json_object_get(op, "path")), path) == 0)
			return json_object_get(op, "value");
	fail_msg("no op on %s in %s", path, fakeapi_body(fx->api, i));
	return NULL;
}

#define REC(decision, out, in) "{\"apiVersion\":\"airlock.dev/v1alpha1\"," \
	"\"kind\":\"CodeExecutionEgress\",\"time\":\"2026-11-28T11:09:28.360Z\"," \
	"\"namespace\":\"t\",\"name\":\"x\",\"uid\":\"" UID "\",\"decision\":\"" \
	decision "\",\"bytesOut\":" out ",\"bytesIn\":" in "}\n"
#define NOBODY "{\"kind\":\"CodeExecutionEgress\",\"namespace\":null," \
	"\"name\":null,\"uid\":null,\"decision\":\"refused\"}\n"

/*
 * The log followed from the leader's look back, broken, resumed from its
 * last line's second (its lines given again skipped), and, once the
 * execution ended and the grace passed with the stream open, one patch
 * with the exact counts, complete.
 */
static void
test_counted(void **state)
{
	struct fx *fx = *state;
	const char *first = "2026-11-28T11:09:28.100000000Z " REC("refused", "90", "0")
	    "2026-11-28T11:09:28.200000000Z " REC("allowed", "700", "2103")
	    "2026-11-28T11:09:28.200000000Z " NOBODY
	    "2026-11-28T11:09:29.500000000Z squid: a line of its own\n"
	    "2026-11-28T11:09:29.500000000Z " REC("refused", "1", "0");
	char *second = xasprintf("%s%s", "2026-11-28T11:09:29.500000000Z squid: a "
	    "line of its own\n2026-11-28T11:09:29.500000000Z " REC("refused", "1", "0")
	    "2026-11-28T11:09:30.000000000Z " REC("allowed", "5", "6")
	    "2026-11-28T11:09:30.000000000Z " REC("refused", "2", "0"),
	    "2026-11-28T11:09:31.000000000Z ");	/* a partial line: dropped */
	json_t *patch, *want;
	long long t0;

	(void)state;
	start(fx, CONF("{host: allowed.test, ports: [443]}"), 1);
	assert_non_null(fx->ctl.follow);
	fakeapi_push_stream(fx->api, first);
	fakeapi_push_stream(fx->api, second);
	fakeapi_push(fx->api, 200, NULL, "{}", 0);
	/* Not leading: nothing followed, nothing written. */
	count_until(fx, 0);
	t0 = (long long)time(NULL);
	ctl_egress_follow_leading(fx->ctl.follow, 1);
	assert_int_equal(fakeapi_wait_count(fx->api, 1, 5000), 1);
	/* From two hours back (a new leader's look back). */
	assert_in_range(since(fx, 0), t0 - 7200, (long long)time(NULL) - 7200);
	/* Its end seen: the counts wait for the grace. */
	count_until(fx, 1);
	/* The server ends it; the proxy still runs: resumed from 11:09:29. */
	fakeapi_release(fx->api);
	assert_int_equal(fakeapi_wait_count(fx->api, 2, 5000), 2);
	assert_int_equal(since(fx, 1), 1795864169LL);
	count_until(fx, 3);
	assert_string_equal(fakeapi_request(fx->api, 2), PATCH);
	/* At least the grace after it opened again. */
	assert_true(fakeapi_time(fx->api, 2) - fakeapi_time(fx->api, 1) >= GRACE);
	patch = json_loads(fakeapi_body(fx->api, 2), 0, NULL);
	want = json_loads("[{\"op\": \"test\", \"path\": \"/metadata/uid\", \"value\": \""
	    UID "\"}, {\"op\": \"add\", \"path\": \"/status/egress/refused\", \"value\": 3},"
	    " {\"op\": \"add\", \"path\": \"/status/egress/allowed\", \"value\": 2},"
	    " {\"op\": \"add\", \"path\": \"/status/egress/bytesOut\", \"value\": 705},"
	    " {\"op\": \"add\", \"path\": \"/status/egress/bytesIn\", \"value\": 2109},"
	    " {\"op\": \"add\", \"path\": \"/status/egress/countsComplete\", \"value\": true}]",
	    0, NULL);
	if (!json_equal(patch, want))
		fail_msg("patch %s", fakeapi_body(fx->api, 2));
	json_decref(patch);
	json_decref(want);
	/*
	 * Written: not again while the cache has not seen it yet (its entry
	 * made anew, a fresh grace, a second patch would follow).
	 */
	assert_int_equal(count_for(fx, 3 * GRACE), 3);
	free(second);
}

/*
 * The stream broken (a 500), then its pod gone (404): what it logged in
 * between is lost, and the counts are written incomplete.
 */
static void
test_lost(void **state)
{
	struct fx *fx = *state;

	(void)state;
	start(fx, CONF("{host: allowed.test, ports: [443]}"), 1);
	fakeapi_push(fx->api, 500, NULL, "{\"kind\":\"Status\",\"code\":500,"
	    "\"message\":\"kubelet away\"}", 0);
	fakeapi_push(fx->api, 404, NULL, "{\"kind\":\"Status\",\"code\":404,"
	    "\"reason\":\"NotFound\",\"message\":\"pods \\\"gate-1\\\" not found\"}", 0);
	fakeapi_push(fx->api, 200, NULL, "{}", 0);
	ctl_egress_follow_leading(fx->ctl.follow, 1);
	assert_int_equal(fakeapi_wait_count(fx->api, 2, 5000), 2);
	count_until(fx, 3);
	assert_string_equal(fakeapi_request(fx->api, 2), PATCH);
	assert_int_equal(json_integer_value(op_value(fx, 2,
	    "/status/egress/refused")), 0);
	assert_true(json_is_false(op_value(fx, 2, "/status/egress/countsComplete")));
}

/* No profile with host entries: no stream, no patch, no request at all. */
static void
test_no_hosts(void **state)
{
	struct fx *fx = *state;

	start(fx, CONF("{cidr: 10.20.0.0/16, ports: [5432]}"), 1);
	assert_null(fx->ctl.follow);
	ctl_egress_follow_leading(fx->ctl.follow, 1);
	assert_int_equal(count_for(fx, 3 * GRACE), 0);
}

/*
 * An execution without host entries (not proxied): never a patch. A
 * lead lost and won again follows the log again.
 */
static void
test_not_proxied(void **state)
{
	struct fx *fx = *state;

	start(fx, CONF("{host: allowed.test, ports: [443]}"), 0);
	fakeapi_push_stream(fx->api, "");
	ctl_egress_follow_leading(fx->ctl.follow, 1);
	assert_int_equal(fakeapi_wait_count(fx->api, 1, 5000), 1);
	assert_int_equal(count_for(fx, 3 * GRACE), 1);
	/* Losing the lead stops the stream; leading again follows anew. */
	ctl_egress_follow_leading(fx->ctl.follow, 0);
	fakeapi_push_stream(fx->api, "");
	ctl_egress_follow_leading(fx->ctl.follow, 1);
	assert_int_equal(fakeapi_wait_count(fx->api, 2, 5000), 2);
	assert_true(strncmp(fakeapi_request(fx->api, 1), LOG, strlen(LOG)) == 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_counted, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lost, setup, teardown),
		cmocka_unit_test_setup_teardown(test_no_hosts, setup, teardown),
		cmocka_unit_test_setup_teardown(test_not_proxied, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
