/*
 * ctl_session_reconcile when the session cache has not
 * listed yet (a controller's start: wait_leading waits for the executions'
 * and the pods' caches only). The pods' cache holds a live session's pod;
 * the session's cache is empty. Expected: nothing deleted.
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
#include "fakeapi.h"
#include "session.h"

static void
test_unsynced_session_cache_keeps_pod(void **state)
{
	struct fakeapi *api = fakeapi_start();
	struct k8s_config *cfg = fakeapi_config(api, NULL);
	struct informer_handlers none = { NULL, NULL, NULL, NULL };
	struct informer_opts po = { .res = &k8s_res_pods, .transform = ctl_trim_pod,
	    .packed = 1, .index = ctl_pod_index, .watch_timeout_seconds = 5 };
	struct informer_opts so = { .res = &session_resource, .packed = 1,
	    .transform = ctl_trim_session };
	struct controller ctl;
	struct k8s_error err;
	int n0;

	(void)state;
	memset(&ctl, 0, sizeof(ctl));
	assert_int_equal(k8s_client_new(cfg, NULL, &ctl.client, &err), 0);
	pthread_mutex_init(&ctl.lock, NULL);
	ctl.queue = workqueue_new(NULL);
	/* The pods' list: the session s1's running pod. */
	fakeapi_push(api, 200, NULL, "{\"metadata\":{\"resourceVersion\":\"10\"},"
	    "\"items\":[{\"metadata\":{\"name\":\"airlock-session-u1\","
	    "\"namespace\":\"t\",\"uid\":\"p1\",\"resourceVersion\":\"9\","
	    "\"labels\":{\"" SESSION_LABEL_UID "\":\"u1\"},"
	    "\"ownerReferences\":[{\"apiVersion\":\"airlock.dev/v1alpha1\","
	    "\"kind\":\"CodeSession\",\"name\":\"s1\",\"uid\":\"u1\","
	    "\"controller\":true}]},\"spec\":{\"nodeName\":\"n1\"},"
	    "\"status\":{\"phase\":\"Running\"}}]}", 0);
	fakeapi_push(api, 200, NULL, "", 3000);	/* a quiet watch */
	fakeapi_push(api, 200, NULL, "{\"kind\":\"Status\"}", 0);	/* a DELETE */
	ctl.pod_inf = informer_new(ctl.client, &po, &none);
	ctl.session_inf = informer_new(ctl.client, &so, &none);	/* not listed yet */
	assert_int_equal(informer_start(ctl.pod_inf), 0);
	assert_int_equal(informer_wait_synced(ctl.pod_inf, 3000), 0);
	assert_int_equal(fakeapi_wait_count(api, 2, 3000), 2);
	n0 = fakeapi_count(api);

	/* What a pod event's key "session:t/s1" brings. */
	assert_int_equal(ctl_session_reconcile(&ctl, "t", "s1"), 0);
	for (int i = n0; i < fakeapi_count(api); i++)
		fprintf(stderr, "# request after the reconcile: %s\n",
		    fakeapi_request(api, i));
	/* Without the guard in ctl_session_reconcile: DELETE airlock-session-u1. */
	assert_int_equal(fakeapi_count(api), n0);

	informer_stop(ctl.pod_inf);
	informer_free(ctl.pod_inf);
	informer_free(ctl.session_inf);
	workqueue_shutdown(ctl.queue);
	workqueue_free(ctl.queue);
	k8s_client_free(ctl.client);
	k8s_config_free(cfg);
	fakeapi_stop(api);
	pthread_mutex_destroy(&ctl.lock);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_unsynced_session_cache_keeps_pod),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
