/*
 * Unit tests: what the controller's caches keep of an execution, a pod and
 * a pool (controller.c's transforms). A tenant writes what it likes into
 * metadata, after admission too: none of it may reach a cache (issue 27:
 * 200 executions with 250 KB annotations and 1800 labels took 131 MiB,
 * 110 pools with 1.2 MB of metadata 139 MiB).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "controller_priv.h"
#include "cx.h"
#include "jsonsize.h"
#include "pool.h"

#define UID	"0b8f8f4e-63a4-4f54-9c1c-2a7c1d1e6f00"

/* A tenant's metadata at its worst: 1800 labels, a 250 KB annotation. */
static json_t *
hostile_metadata(const char *name)
{
	json_t *labels = json_object(), *ann = json_object();
	char k[64], *big = malloc(250001);

	for (int i = 0; i < 1800; i++) {
		snprintf(k, sizeof(k), "tenant.example/label-%04d", i);
		json_object_set_new(labels, k, json_string(
		    "vvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvv"));
	}
	memset(big, 'a', 250000);
	big[250000] = '\0';
	json_object_set_new(ann, "tenant.example/big", json_string(big));
	free(big);
	json_object_set_new(ann, CX_ANN_CREATED_BY, json_string("alice"));
	json_object_set_new(ann, "kubectl.kubernetes.io/last-applied-configuration",
	    json_string("{}"));
	return json_pack("{s:s, s:s, s:s, s:s, s:i, s:s, s:o, s:o, s:[s],"
	    " s:[{s:s}]}", "name", name, "namespace", "t", "uid", UID,
	    "resourceVersion", "42", "generation", 1, "creationTimestamp",
	    "2026-11-27T00:00:00Z", "labels", labels, "annotations", ann,
	    "finalizers", "tenant.example/keep", "managedFields", "manager",
	    "kubectl");
}

static void
test_cx_in_flight_keeps_no_tenant_metadata(void **state)
{
	json_t *cx, *t, *md;
	size_t before, after;

	(void)state;
	cx = json_pack("{s:s, s:s, s:o, s:{s:s, s:s, s:i}, s:{s:s, s:s}}",
	    "apiVersion", "airlock.dev/v1alpha1", "kind", "CodeExecution",
	    "metadata", hostile_metadata("x"),
	    "spec", "runtime", "python", "source", "print(1)",
	    "timeoutSeconds", 30,
	    "status", "phase", "Pending", "startMode", "Cold");
	before = jsonsize_value(cx);
	t = ctl_trim_cx(cx);
	after = jsonsize_value(t);
	print_message("# in flight: %zu bytes -> %zu kept\n", before, after);
	md = json_object_get(t, "metadata");
	assert_null(json_object_get(md, "labels"));
	assert_null(json_object_get(md, "finalizers"));
	assert_null(json_object_get(md, "managedFields"));
	assert_int_equal(json_object_size(json_object_get(md, "annotations")), 1);
	assert_string_equal(json_string_value(json_object_get(json_object_get(md,
	    "annotations"), CX_ANN_CREATED_BY)), "alice");
	assert_string_equal(json_string_value(json_object_get(md, "uid")), UID);
	assert_string_equal(json_string_value(json_object_get(md,
	    "resourceVersion")), "42");
	assert_string_equal(json_string_value(json_object_get(md,
	    "creationTimestamp")), "2026-11-27T00:00:00Z");
	assert_int_equal(json_integer_value(json_object_get(md, "generation")), 1);
	assert_string_equal(json_string_value(json_object_get(json_object_get(t,
	    "status"), "startMode")), "Cold");
	/* Under a kilobyte, whatever the metadata: it was over 400 KB. */
	assert_true(before > 400000);
	assert_true(after < 1024);
	json_decref(t);
	json_decref(cx);
}

static void
test_cx_finished_keeps_no_tenant_metadata(void **state)
{
	json_t *cx, *t;

	(void)state;
	cx = json_pack("{s:o, s:{s:s}, s:{s:s, s:s, s:b}}",
	    "metadata", hostile_metadata("x"), "spec", "runtime", "python",
	    "status", "phase", "Succeeded", "completionTime",
	    "2026-11-27T00:00:01Z", "audited", 1);
	t = ctl_trim_cx(cx);
	assert_null(json_object_get(json_object_get(t, "metadata"), "labels"));
	assert_null(json_object_get(json_object_get(t, "metadata"), "annotations"));
	assert_true(jsonsize_value(t) < 512);
	json_decref(t);
	json_decref(cx);
}

/*
 * Finished, not audited yet: the created-by it keeps for the record is
 * capped too (a review of issue 27: 256 KiB each, for 1000 executions),
 * and cut between characters, never inside one.
 */
static void
test_created_by_capped_unaudited(void **state)
{
	json_t *cx, *t, *md = hostile_metadata("x");
	char by[700];
	const char *kept;

	(void)state;
	memset(by, 'u', 511);
	strcpy(by + 511, "\xc3\xa9tail");	/* an e-acute across byte 512 */
	json_object_set_new(json_object_get(md, "annotations"), CX_ANN_CREATED_BY,
	    json_string(by));
	cx = json_pack("{s:o, s:{s:s}, s:{s:s}}", "metadata", md, "spec", "runtime",
	    "python", "status", "phase", "Failed");
	t = ctl_trim_cx(cx);
	kept = json_string_value(json_object_get(json_object_get(json_object_get(t,
	    "metadata"), "annotations"), CX_ANN_CREATED_BY));
	assert_non_null(kept);
	assert_int_equal(strlen(kept), 511);
	assert_null(json_object_get(json_object_get(t, "metadata"), "labels"));
	json_decref(t);
	json_decref(cx);
}

/*
 * Finished, not audited yet: its egress grant is kept for that visit
 * (reconcile.c deletes the granted execution's NetworkPolicy then);
 * once audited, not.
 */
static void
test_egress_kept_unaudited(void **state)
{
	json_t *cx, *t;

	(void)state;
	for (int audited = 0; audited < 2; audited++) {
		cx = json_pack("{s:{s:s, s:s, s:s}, s:{s:s}, s:{s:s, s:b, s:{s:b, s:s}}}",
		    "metadata", "name", "x", "namespace", "n", "uid", "u",
		    "spec", "runtime", "python", "status", "phase", "Succeeded",
		    "audited", audited, "egress", "granted", 1, "podUID", "p");
		t = ctl_trim_cx(cx);
		if (audited) {
			assert_null(json_object_get(json_object_get(t, "status"),
			    "egress"));
		} else {
			assert_true(json_is_true(json_object_get(json_object_get(
			    json_object_get(t, "status"), "egress"), "granted")));
			assert_string_equal(json_string_value(json_object_get(
			    json_object_get(json_object_get(t, "status"), "egress"),
			    "podUID")), "p");
		}
		json_decref(t);
		json_decref(cx);
	}
}

/* The one annotation kept is capped all the same. */
static void
test_created_by_capped(void **state)
{
	json_t *cx, *t, *md = hostile_metadata("x");
	char *by = malloc(100001);

	(void)state;
	memset(by, 'u', 100000);
	by[100000] = '\0';
	json_object_set_new(json_object_get(md, "annotations"), CX_ANN_CREATED_BY,
	    json_string(by));
	free(by);
	cx = json_pack("{s:o, s:{s:s}, s:{}}", "metadata", md, "spec", "runtime",
	    "python", "status");
	t = ctl_trim_cx(cx);
	assert_int_equal(strlen(json_string_value(json_object_get(json_object_get(
	    json_object_get(t, "metadata"), "annotations"), CX_ANN_CREATED_BY))),
	    512);
	json_decref(t);
	json_decref(cx);
}

static void
test_pool_keeps_no_tenant_metadata(void **state)
{
	json_t *pool, *t, *md;

	(void)state;
	pool = json_pack("{s:s, s:s, s:o, s:{s:s, s:i}, s:{s:i, s:i}}",
	    "apiVersion", "airlock.dev/v1alpha1", "kind", "CodeExecutionPool",
	    "metadata", hostile_metadata("p"),
	    "spec", "runtime", "python", "replicas", 3,
	    "status", "replicas", 2, "readyReplicas", 1);
	t = ctl_trim_pool(pool);
	md = json_object_get(t, "metadata");
	assert_null(json_object_get(md, "labels"));
	assert_null(json_object_get(md, "finalizers"));
	assert_string_equal(json_string_value(json_object_get(md, "name")), "p");
	assert_string_equal(json_string_value(json_object_get(md, "uid")), UID);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(t,
	    "spec"), "replicas")), 3);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(t,
	    "status"), "readyReplicas")), 1);
	assert_true(jsonsize_value(t) < 1024);
	json_decref(t);
	json_decref(pool);
}

/* A pod that is not the controller's may carry a name no execution has. */
static void
test_pod_annotation_capped(void **state)
{
	json_t *pod, *t, *md = hostile_metadata("airlock-x");
	char *big = malloc(300);

	(void)state;
	memset(big, 'n', 299);
	big[299] = '\0';
	json_object_set_new(json_object_get(md, "annotations"), CX_ANN_NAME,
	    json_string(big));
	json_object_set_new(json_object_get(md, "labels"), CX_LABEL_UID,
	    json_string(UID));
	json_object_set_new(md, "creationTimestamp",
	    json_string("2026-11-27T01:00:00Z"));
	pod = json_pack("{s:o, s:{s:s}, s:{s:s}}", "metadata", md, "spec",
	    "nodeName", "n1", "status", "phase", "Pending");
	t = ctl_trim_pod(pod);
	assert_null(json_object_get(json_object_get(t, "metadata"), "annotations"));
	/* The start deadline counts from it (start.c). */
	assert_string_equal(json_string_value(json_object_get(json_object_get(t,
	    "metadata"), "creationTimestamp")), "2026-11-27T01:00:00Z");
	assert_int_equal(json_object_size(json_object_get(json_object_get(t,
	    "metadata"), "labels")), 1);
	assert_true(jsonsize_value(t) < 1024);
	json_decref(t);
	/* A name a pod may carry is kept. */
	json_object_set_new(json_object_get(json_object_get(pod, "metadata"),
	    "annotations"), CX_ANN_NAME, json_string("x"));
	t = ctl_trim_pod(pod);
	assert_string_equal(json_string_value(json_object_get(json_object_get(
	    json_object_get(t, "metadata"), "annotations"), CX_ANN_NAME)), "x");
	json_decref(t);
	free(big);
	json_decref(pod);
}

/*
 * Issue 31: a holder's failed preload, now or before a restart, stays in
 * the cache (pool_holder_preload_failed reads it there); the last end's
 * other messages do not, and its own is capped at 1 KiB.
 */
static void
test_pod_preload_failed_kept(void **state)
{
	char msg[POOL_PRELOAD_MSG_MAX + 1], *big = calloc(1, 3000);
	json_t *pod, *t;

	(void)state;
	strcpy(big, "airlock: preload: m: E: ");
	memset(big + strlen(big), 'x', 2000);
	big[2500] = '\0';
	pod = json_pack("{s:{s:s, s:s}, s:{s:s, s:[{s:b, s:{s:{}}, s:{s:{s:i, s:s}}}]}}",
	    "metadata", "name", "airlock-warm-x", "namespace", "a",
	    "status", "phase", "Running", "containerStatuses", "ready", 0,
	    "state", "running", "lastState", "terminated", "exitCode", 3,
	    "message", big);
	t = ctl_trim_pod(pod);
	assert_int_equal(pool_holder_preload_failed(t, msg, sizeof(msg)), 1);
	assert_int_equal(strlen(msg), 1024);
	assert_int_equal(json_string_length(json_object_get(json_object_get(
	    json_object_get(json_array_get(json_object_get(json_object_get(t,
	    "status"), "containerStatuses"), 0), "lastState"), "terminated"),
	    "message")), 1024);
	assert_true(jsonsize_value(t) < 2048);
	json_decref(t);
	json_decref(pod);
	/* Another end before the restart: nothing of it. */
	pod = json_pack("{s:{s:s, s:s}, s:{s:s, s:[{s:b, s:{s:{}}, s:{s:{s:i, s:s}}}]}}",
	    "metadata", "name", "airlock-warm-x", "namespace", "a",
	    "status", "phase", "Running", "containerStatuses", "ready", 0,
	    "state", "running", "lastState", "terminated", "exitCode", 137,
	    "message", "OOMKilled");
	t = ctl_trim_pod(pod);
	assert_null(json_object_get(json_array_get(json_object_get(json_object_get(t,
	    "status"), "containerStatuses"), 0), "lastState"));
	assert_int_equal(pool_holder_preload_failed(t, msg, sizeof(msg)), 0);
	json_decref(t);
	json_decref(pod);
	free(big);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cx_in_flight_keeps_no_tenant_metadata),
		cmocka_unit_test(test_cx_finished_keeps_no_tenant_metadata),
		cmocka_unit_test(test_created_by_capped),
		cmocka_unit_test(test_created_by_capped_unaudited),
		cmocka_unit_test(test_egress_kept_unaudited),
		cmocka_unit_test(test_pool_keeps_no_tenant_metadata),
		cmocka_unit_test(test_pod_annotation_capped),
		cmocka_unit_test(test_pod_preload_failed_kept),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
