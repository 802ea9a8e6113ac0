/*
 * Unit tests: controller/audit.c against a scripted API server. The
 * record's exact line; once per finished execution, then its mark; none
 * for one marked; one for an execution deleted before it ended, by the
 * leader only. The real thing, with the chart's admission policy naming
 * the user, is in tests/chart/test_install.c and tests/e2e.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "controller_priv.h"
#include "cx.h"
#include "fakeapi.h"

#define UID	"0b8f8f4e-63a4-4f54-9c1c-2a7c1d1e6f00"
#define SHA	"4c8a4b0de9bb8a4b9ff6c81bf8c55d8b56d1f5cd8c6e3fd8f1e8d5a7a1c2b3d4"
#define PATCH	"PATCH /apis/airlock.dev/v1alpha1/namespaces/t/codeexecutions/x/status"

struct fx {
	struct fakeapi		*api;
	struct k8s_config	*cfg;
	struct controller	 ctl;
	int			 pipe[2];
};

static int
setup(void **state)
{
	struct fx *fx = calloc(1, sizeof(*fx));
	struct k8s_error err;

	fx->api = fakeapi_start();
	fx->cfg = fakeapi_config(fx->api, NULL);
	assert_int_equal(k8s_client_new(fx->cfg, NULL, &fx->ctl.client, &err), 0);
	pthread_mutex_init(&fx->ctl.lock, NULL);
	pthread_mutex_init(&fx->ctl.audit_lock, NULL);
	fx->ctl.audited = json_object();
	assert_int_equal(pipe(fx->pipe), 0);
	fx->ctl.opts.audit_fd = fx->pipe[1];
	fx->ctl.leading = 1;
	*state = fx;
	return 0;
}

static int
teardown(void **state)
{
	struct fx *fx = *state;

	k8s_client_free(fx->ctl.client);
	k8s_config_free(fx->cfg);
	fakeapi_stop(fx->api);
	json_decref(fx->ctl.audited);
	pthread_mutex_destroy(&fx->ctl.lock);
	pthread_mutex_destroy(&fx->ctl.audit_lock);
	close(fx->pipe[0]);
	close(fx->pipe[1]);
	free(fx);
	return 0;
}

/* What the pipe holds now ("" if nothing); the pipe is made anew. */
static char *
drain(struct fx *fx)
{
	static char out[8192];
	size_t len = 0;
	ssize_t n;

	close(fx->pipe[1]);
	while (len < sizeof(out) - 1 &&
	    (n = read(fx->pipe[0], out + len, sizeof(out) - 1 - len)) > 0)
		len += (size_t)n;
	out[len] = '\0';
	close(fx->pipe[0]);
	assert_int_equal(pipe(fx->pipe), 0);
	fx->ctl.opts.audit_fd = fx->pipe[1];
	return out;
}

/* A finished execution as the cache keeps it before its mark (trim_cx). */
static json_t *
finished(int audited)
{
	json_t *cx = json_pack("{s:{s:s, s:s, s:s, s:s, s:{s:s}},"
	    " s:{s:s}, s:{s:s, s:s, s:i, s:i, s:i, s:i, s:s, s:s}}",
	    "metadata", "name", "x", "namespace", "t", "uid", UID,
	    "resourceVersion", "9", "annotations", CX_ANN_CREATED_BY,
	    "system:serviceaccount:t:agent\"\n",
	    "spec", "runtime", "python",
	    "status", "phase", "Succeeded", "reason", "Completed",
	    "exitCode", 0, "durationMillis", 61, "peakMemoryBytes", 1048576,
	    "cpuTimeMillis", 12, "startMode", "Warm", "codeSha256", SHA);

	if (audited)
		json_object_set_new(json_object_get(cx, "status"), "audited",
		    json_true());
	return cx;
}

static void
test_record_exact(void **state)
{
	struct ctl_profile prof = { .name = "python", .image = "airlock.dev/runner-python:0.1.0" };
	struct ctl_config cfg = { .profiles = &prof, .nprofiles = 1 };
	json_t *cx = finished(0), *rec;
	char *line;

	(void)state;
	rec = ctl_audit_record(&cfg, cx, "2026-11-25T19:00:00.123Z", 0);
	line = json_dumps(rec, JSON_COMPACT | JSON_ENSURE_ASCII);
	assert_string_equal(line,
	    "{\"apiVersion\":\"airlock.dev/v1alpha1\",\"kind\":\"CodeExecutionAudit\","
	    "\"time\":\"2026-11-25T19:00:00.123Z\",\"namespace\":\"t\",\"name\":\"x\","
	    "\"uid\":\"" UID "\",\"user\":\"system:serviceaccount:t:agent\\\"\\n\","
	    "\"codeSha256\":\"" SHA "\",\"runtime\":\"python\","
	    "\"image\":\"airlock.dev/runner-python:0.1.0\",\"phase\":\"Succeeded\","
	    "\"reason\":\"Completed\",\"exitCode\":0,\"durationMillis\":61,"
	    "\"peakMemoryBytes\":1048576,\"cpuTimeMillis\":12,\"startMode\":\"Warm\","
	    "\"session\":null}");
	free(line);
	json_decref(rec);

	/* A custom image is the spec's; no status, no user: nulls; deleted. */
	json_decref(cx);
	cx = json_pack("{s:{s:s, s:s, s:s}, s:{s:s, s:s, s:s}, s:s}",
	    "metadata", "name", "x", "namespace", "t", "uid", UID,
	    "spec", "runtime", "bash", "image", "example.com/mine:1", "session", "an",
	    CTL_CACHED_SHA, SHA);
	rec = ctl_audit_record(&cfg, cx, "2026-11-25T19:00:00.123Z", 1);
	line = json_dumps(rec, JSON_COMPACT);
	assert_string_equal(line,
	    "{\"apiVersion\":\"airlock.dev/v1alpha1\",\"kind\":\"CodeExecutionAudit\","
	    "\"time\":\"2026-11-25T19:00:00.123Z\",\"namespace\":\"t\",\"name\":\"x\","
	    "\"uid\":\"" UID "\",\"user\":null,\"codeSha256\":\"" SHA "\","
	    "\"runtime\":\"bash\",\"image\":\"example.com/mine:1\",\"phase\":\"Pending\","
	    "\"reason\":\"Deleted\",\"exitCode\":null,\"durationMillis\":null,"
	    "\"peakMemoryBytes\":null,\"cpuTimeMillis\":null,\"startMode\":null,"
	    "\"session\":\"an\"}");
	free(line);
	json_decref(rec);
	json_decref(cx);
}

/*
 * A session's record: who, its runtime's image, how it ended, when, how
 * long it lived, its steps and restarts; deleted before it ended: how far
 * it got, reason Deleted, ended then.
 */
static void
test_session_record_exact(void **state)
{
	struct ctl_profile prof = { .name = "python", .image = "airlock.dev/runner-python:0.1.0" };
	struct ctl_config cfg = { .profiles = &prof, .nprofiles = 1 };
	json_t *s = json_pack("{s:{s:s, s:s, s:s, s:s, s:{s:s}}, s:{s:s, s:i},"
	    " s:{s:s, s:s, s:s, s:s, s:s, s:s, s:i, s:i, s:s}}",
	    "metadata", "name", "an", "namespace", "t", "uid", UID,
	    "creationTimestamp", "2026-11-25T18:00:00Z", "annotations",
	    CX_ANN_CREATED_BY, "alice",
	    "spec", "runtime", "python", "maxLifetimeSeconds", 7200,
	    "status", "phase", "Ended", "reason", "IdleTimeout", "startMode", "Warm",
	    "nodeName", "n1", "startTime", "2026-11-25T18:00:02Z",
	    "endTime", "2026-11-25T18:30:00Z", "executions", 12, "restarts", 1,
	    "message", "no execution for its idleTimeoutSeconds"), *rec;
	char *line;

	(void)state;
	rec = ctl_session_audit_record(&cfg, s, "2026-11-25T19:00:00.123Z", 0);
	line = json_dumps(rec, JSON_COMPACT);
	assert_string_equal(line,
	    "{\"apiVersion\":\"airlock.dev/v1alpha1\",\"kind\":\"CodeSessionAudit\","
	    "\"time\":\"2026-11-25T19:00:00.123Z\",\"namespace\":\"t\",\"name\":\"an\","
	    "\"uid\":\"" UID "\",\"user\":\"alice\",\"runtime\":\"python\","
	    "\"image\":\"airlock.dev/runner-python:0.1.0\",\"phase\":\"Ended\","
	    "\"reason\":\"IdleTimeout\",\"startMode\":\"Warm\",\"nodeName\":\"n1\","
	    "\"creationTimestamp\":\"2026-11-25T18:00:00Z\","
	    "\"startTime\":\"2026-11-25T18:00:02Z\",\"endTime\":\"2026-11-25T18:30:00Z\","
	    "\"lifetimeSeconds\":1800,\"executions\":12,\"restarts\":1,"
	    "\"maxLifetimeSeconds\":7200}");
	free(line);
	json_decref(rec);
	/* Deleted while Ready: ended by its deletion, at the record's time. */
	json_object_set_new(json_object_get(s, "status"), "phase", json_string("Ready"));
	json_object_del(json_object_get(s, "status"), "reason");
	json_object_del(json_object_get(s, "status"), "endTime");
	rec = ctl_session_audit_record(&cfg, s, "2026-11-25T19:00:00.123Z", 1);
	assert_string_equal(json_string_value(json_object_get(rec, "phase")), "Ready");
	assert_string_equal(json_string_value(json_object_get(rec, "reason")), "Deleted");
	assert_string_equal(json_string_value(json_object_get(rec, "endTime")),
	    "2026-11-25T19:00:00.123Z");
	assert_int_equal(json_integer_value(json_object_get(rec, "lifetimeSeconds")), 3600);
	json_decref(rec);
	json_decref(s);
}

/* Recorded once, then marked; a second pass (mark not yet seen) only marks. */
static void
test_finished_once_then_marked(void **state)
{
	struct fx *fx = *state;
	json_t *cx = finished(0), *rec;
	char *out;

	fakeapi_push(fx->api, 200, NULL, "{}", 0);
	assert_int_equal(ctl_audit_finished(&fx->ctl, cx), 0);
	out = drain(fx);
	assert_int_equal(strlen(out) > 0 && out[strlen(out) - 1] == '\n', 1);
	assert_ptr_equal(strchr(out, '\n') + 1, out + strlen(out));	/* one line */
	rec = json_loads(out, 0, NULL);
	assert_non_null(rec);
	assert_string_equal(json_string_value(json_object_get(rec, "uid")), UID);
	assert_string_equal(json_string_value(json_object_get(rec, "phase")), "Succeeded");
	assert_null(json_object_get(rec, "stdout"));
	json_decref(rec);
	assert_int_equal(fakeapi_count(fx->api), 1);
	assert_string_equal(fakeapi_request(fx->api, 0), PATCH);
	assert_string_equal(fakeapi_ctype(fx->api, 0), "application/json-patch+json");
	assert_string_equal(fakeapi_body(fx->api, 0),
	    "[{\"op\":\"test\",\"path\":\"/metadata/uid\",\"value\":\"" UID "\"},"
	    "{\"op\":\"add\",\"path\":\"/status/audited\",\"value\":true}]");

	/* The mark failed (500): retried, the record not repeated. */
	fakeapi_push(fx->api, 500, NULL, "{}", 0);	/* no Retry-After: not retried */
	assert_int_not_equal(ctl_audit_finished(&fx->ctl, cx), 0);
	assert_string_equal(drain(fx), "");
	fakeapi_push(fx->api, 200, NULL, "{}", 0);
	json_decref(cx);
	cx = finished(0);
	assert_int_equal(ctl_audit_finished(&fx->ctl, cx), 0);
	assert_string_equal(drain(fx), "");
	json_decref(cx);

	/* Marked: nothing written, nothing sent, and the uid forgotten. */
	cx = finished(1);
	{
		int before = fakeapi_count(fx->api);

		assert_int_equal(ctl_audit_finished(&fx->ctl, cx), 0);
		assert_int_equal(fakeapi_count(fx->api), before);
	}
	assert_string_equal(drain(fx), "");
	assert_null(json_object_get(fx->ctl.audited, UID));
	json_decref(cx);
}

/* A session ended: its record, then its mark on the session; deleted marked: none. */
static void
test_session_finished_marked(void **state)
{
	struct fx *fx = *state;
	json_t *s = json_pack("{s:{s:s, s:s, s:s}, s:{s:s}, s:{s:s, s:s}}",
	    "metadata", "name", "an", "namespace", "t", "uid", UID,
	    "spec", "runtime", "python", "status", "phase", "Ended", "reason", "Closed");
	char *out;

	fakeapi_push(fx->api, 200, NULL, "{}", 0);
	assert_int_equal(ctl_audit_session_finished(&fx->ctl, s), 0);
	out = drain(fx);
	assert_non_null(strstr(out, "{\"apiVersion\":\"airlock.dev/v1alpha1\","
	    "\"kind\":\"CodeSessionAudit\""));
	assert_non_null(strstr(out, "\"phase\":\"Ended\",\"reason\":\"Closed\""));
	assert_int_equal(fakeapi_count(fx->api), 1);
	assert_string_equal(fakeapi_request(fx->api, 0),
	    "PATCH /apis/airlock.dev/v1alpha1/namespaces/t/codesessions/an/status");
	assert_string_equal(fakeapi_body(fx->api, 0),
	    "[{\"op\":\"test\",\"path\":\"/metadata/uid\",\"value\":\"" UID "\"},"
	    "{\"op\":\"add\",\"path\":\"/status/audited\",\"value\":true}]");
	/* The mark seen, then deleted: no second record. */
	json_object_set_new(json_object_get(s, "status"), "audited", json_true());
	assert_int_equal(ctl_audit_session_finished(&fx->ctl, s), 0);
	ctl_audit_session_deleted(&fx->ctl, s);
	assert_string_equal(drain(fx), "");
	assert_int_equal(fakeapi_count(fx->api), 1);
	json_decref(s);
}

/* Gone before the mark, or another of its name now (422): done. */
static void
test_mark_gone(void **state)
{
	struct fx *fx = *state;
	json_t *cx = finished(0);

	fakeapi_push(fx->api, 422, NULL, "{\"kind\":\"Status\",\"code\":422}", 0);
	assert_int_equal(ctl_audit_finished(&fx->ctl, cx), 0);
	assert_non_null(strstr(drain(fx), "\"uid\":\"" UID "\""));
	json_decref(cx);
}

/*
 * Grown by its tenant past what etcd stores: the mark never lands. The
 * record is out, and it goes on to its TTL unmarked (a review of issue 27:
 * it stayed cached, never deleted, each retry failing); a 500 of another
 * kind is still tried again.
 */
static void
test_mark_too_large(void **state)
{
	struct fx *fx = *state;
	json_t *cx = finished(0);

	fakeapi_push(fx->api, 500, NULL, "{\"kind\":\"Status\",\"code\":500,"
	    "\"message\":\"etcdserver: request is too large\"}", 0);
	assert_int_equal(ctl_audit_finished(&fx->ctl, cx), 0);
	assert_non_null(strstr(drain(fx), "\"uid\":\"" UID "\""));
	fakeapi_push(fx->api, 500, NULL, "{\"kind\":\"Status\",\"code\":500,"
	    "\"message\":\"the value is too large for the proxy\"}", 0);
	assert_int_not_equal(ctl_audit_finished(&fx->ctl, cx), 0);
	json_decref(cx);
}

/* Deleted unmarked: recorded by the leader only, once; marked: not. */
static void
test_deleted(void **state)
{
	struct fx *fx = *state;
	json_t *cx = finished(0);
	char *out;

	json_object_set_new(json_object_get(cx, "status"), "phase", json_string("Running"));
	fx->ctl.leading = 0;
	ctl_audit_deleted(&fx->ctl, cx);
	assert_string_equal(drain(fx), "");
	fx->ctl.leading = 1;
	ctl_audit_deleted(&fx->ctl, cx);
	ctl_audit_deleted(&fx->ctl, cx);
	out = drain(fx);
	assert_non_null(strstr(out, "\"phase\":\"Running\",\"reason\":\"Deleted\""));
	assert_int_equal(strchr(out, '\n') - out + 1, (long)strlen(out));
	json_decref(cx);
	json_object_clear(fx->ctl.audited);
	cx = finished(1);
	ctl_audit_deleted(&fx->ctl, cx);
	assert_string_equal(drain(fx), "");
	json_decref(cx);
	assert_int_equal(fakeapi_count(fx->api), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_record_exact),
		cmocka_unit_test(test_session_record_exact),
		cmocka_unit_test_setup_teardown(test_finished_once_then_marked, setup, teardown),
		cmocka_unit_test_setup_teardown(test_session_finished_marked, setup, teardown),
		cmocka_unit_test_setup_teardown(test_mark_gone, setup, teardown),
		cmocka_unit_test_setup_teardown(test_mark_too_large, setup, teardown),
		cmocka_unit_test_setup_teardown(test_deleted, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
