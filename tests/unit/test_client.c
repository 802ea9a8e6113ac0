/*
 * Unit tests: operator/client.c against a scripted HTTP server, for what a
 * real API server cannot be made to do on demand (500, 429 + Retry-After,
 * slow answers, oversized bodies). The real server is in tests/integration.
 */
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

struct fx {
	struct fakeapi		*api;
	struct k8s_config	*cfg;
	struct k8s_client	*c;
};

static int
setup_opts(void **state, const struct k8s_client_opts *o, const char *token)
{
	struct fx *fx = calloc(1, sizeof(*fx));
	struct k8s_error err;

	fx->api = fakeapi_start();
	fx->cfg = fakeapi_config(fx->api, token);
	assert_int_equal(k8s_client_new(fx->cfg, o, &fx->c, &err), 0);
	*state = fx;
	return 0;
}

/* Above the 1 s test_429_retry_after asks for, so that one shows the
 * server's wait is kept; short, since two tests wait it out in full. */
#define CAP_MS	1200

static int
setup(void **state)
{
	struct k8s_client_opts o = { .max_retry_after_ms = CAP_MS,
	    .allow_token_over_http = 1 };

	return setup_opts(state, &o, "s3cret-token");
}

static int
teardown(void **state)
{
	struct fx *fx = *state;

	k8s_client_free(fx->c);
	k8s_config_free(fx->cfg);
	fakeapi_stop(fx->api);
	free(fx);
	return 0;
}

static long
mono_ms(void)
{
	return (long)clock_mono_ms();
}

static void
test_path(void **state)
{
	struct k8s_resource cx = { "example.com", "v1", "widgets", 1 };
	struct k8s_error err;
	char *p;

	(void)state;
	assert_int_equal(k8s_path(&k8s_res_configmaps, "ns1", "a", NULL, &p, &err), 0);
	assert_string_equal(p, "/api/v1/namespaces/ns1/configmaps/a");
	free(p);
	assert_int_equal(k8s_path(&cx, "t", "x", "status", &p, &err), 0);
	assert_string_equal(p, "/apis/example.com/v1/namespaces/t/widgets/x/status");
	free(p);
	assert_int_equal(k8s_path(&cx, NULL, NULL, NULL, &p, &err), 0);
	assert_string_equal(p, "/apis/example.com/v1/widgets");
	free(p);
	assert_int_equal(k8s_path(&k8s_res_namespaces, "ignored", "kube-system", NULL, &p, &err), 0);
	assert_string_equal(p, "/api/v1/namespaces/kube-system");
	free(p);
	assert_int_equal(k8s_path(&k8s_res_leases, "ns", "l", NULL, &p, &err), 0);
	assert_string_equal(p, "/apis/coordination.k8s.io/v1/namespaces/ns/leases/l");
	free(p);

	const char *bad[] = { "..", ".", "a/b", "a?b", "a#b", "a%2f", "a b", "x\n" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(k8s_path(&k8s_res_pods, "ns", bad[i], NULL, &p, &err), K8S_EINVAL);
		assert_null(p);
		assert_non_null(strstr(err.message, "invalid path segment"));
		assert_int_equal(k8s_path(&k8s_res_pods, bad[i], "n", NULL, &p, &err), K8S_EINVAL);
	}
	assert_int_equal(k8s_path(&k8s_res_pods, "ns", "", NULL, &p, &err), K8S_EINVAL);
}

static void
test_get_sends_token_and_parses(void **state)
{
	struct fx *fx = *state;
	struct k8s_error err;
	json_t *obj;

	fakeapi_push(fx->api, 200, NULL, "{\"metadata\":{\"name\":\"a\","
	    "\"namespace\":\"ns1\",\"resourceVersion\":\"42\",\"uid\":\"u-1\"}}", 0);
	assert_int_equal(k8s_get(fx->c, &k8s_res_configmaps, "ns1", "a", &obj, &err), 0);
	assert_string_equal(k8s_obj_name(obj), "a");
	assert_string_equal(k8s_obj_namespace(obj), "ns1");
	assert_string_equal(k8s_obj_rv(obj), "42");
	assert_string_equal(k8s_obj_uid(obj), "u-1");
	json_decref(obj);
	assert_int_equal(fakeapi_count(fx->api), 1);
	assert_string_equal(fakeapi_request(fx->api, 0), "GET /api/v1/namespaces/ns1/configmaps/a");
	assert_string_equal(fakeapi_auth(fx->api, 0), "Bearer s3cret-token");
}

static void
test_500_status_message(void **state)
{
	struct fx *fx = *state;
	struct k8s_error err;
	json_t *obj;

	fakeapi_push(fx->api, 500, NULL, "{\"kind\":\"Status\",\"status\":\"Failure\","
	    "\"message\":\"etcdserver: request timed out\",\"reason\":\"InternalError\",\"code\":500}", 0);
	assert_int_equal(k8s_get(fx->c, &k8s_res_pods, "ns1", "p", &obj, &err), K8S_EHTTP);
	assert_null(obj);
	assert_int_equal(err.code, K8S_EHTTP);
	assert_int_equal(err.http_status, 500);
	assert_string_equal(err.reason, "InternalError");
	assert_string_equal(err.message, "etcdserver: request timed out");
	/* A 500 without Retry-After is not retried. */
	assert_int_equal(fakeapi_count(fx->api), 1);
}

static void
test_500_not_json(void **state)
{
	struct fx *fx = *state;
	struct k8s_error err;
	json_t *obj;

	fakeapi_push(fx->api, 502, NULL, "<html>bad\x01gateway</html>", 0);
	assert_int_equal(k8s_get(fx->c, &k8s_res_pods, "ns1", "p", &obj, &err), K8S_EHTTP);
	assert_int_equal(err.http_status, 502);
	assert_string_equal(err.reason, "");
	assert_string_equal(err.message, "http 502: <html>bad?gateway</html>");
}

static void
test_429_retry_after(void **state)
{
	struct fx *fx = *state;
	struct k8s_error err;
	json_t *obj;
	long t0 = mono_ms(), dt;

	fakeapi_push(fx->api, 429, "1", "{\"kind\":\"Status\",\"reason\":\"TooManyRequests\",\"message\":\"slow down\",\"code\":429}", 0);
	fakeapi_push(fx->api, 200, NULL, "{\"metadata\":{\"name\":\"p\"}}", 0);
	assert_int_equal(k8s_get(fx->c, &k8s_res_pods, "ns1", "p", &obj, &err), 0);
	dt = mono_ms() - t0;
	assert_string_equal(k8s_obj_name(obj), "p");
	json_decref(obj);
	assert_int_equal(fakeapi_count(fx->api), 2);
	assert_true(dt >= 1000);	/* waited what the server asked */
	assert_true(dt < 2500);
}

static void
test_429_gives_up(void **state)
{
	struct fx *fx = *state;
	struct k8s_error err;
	json_t *obj;

	/* Default max_retries is 3: four answers, then the error surfaces. */
	for (int i = 0; i < 4; i++)
		fakeapi_push(fx->api, 429, "0", "{\"kind\":\"Status\",\"reason\":\"TooManyRequests\","
		    "\"message\":\"too many requests, please try again later\",\"code\":429}", 0);
	fakeapi_push(fx->api, 200, NULL, "{}", 0);
	assert_int_equal(k8s_get(fx->c, &k8s_res_pods, "ns1", "p", &obj, &err), K8S_EHTTP);
	assert_int_equal(err.http_status, 429);
	assert_string_equal(err.reason, "TooManyRequests");
	assert_string_equal(err.message, "too many requests, please try again later");
	assert_int_equal(fakeapi_count(fx->api), 4);
}

static void
test_503_retry_after_capped(void **state)
{
	struct fx *fx = *state;
	struct k8s_error err;
	long t0 = mono_ms(), dt;

	/* Asks for an hour; the client caps it at max_retry_after_ms. */
	fakeapi_push(fx->api, 503, "3600", "{}", 0);
	fakeapi_push(fx->api, 201, NULL, "{\"metadata\":{\"name\":\"c\"}}", 0);
	json_t *obj = json_pack("{s:{s:s}}", "metadata", "name", "c");
	assert_int_equal(k8s_create(fx->c, &k8s_res_configmaps, "ns1", obj, NULL, &err), 0);
	json_decref(obj);
	dt = mono_ms() - t0;
	assert_true(dt >= CAP_MS);
	assert_true(dt < CAP_MS + 1500);
	assert_int_equal(fakeapi_count(fx->api), 2);
	assert_string_equal(fakeapi_request(fx->api, 1), "POST /api/v1/namespaces/ns1/configmaps");
	assert_string_equal(fakeapi_body(fx->api, 1), "{\"metadata\":{\"name\":\"c\"}}");
	assert_string_equal(fakeapi_ctype(fx->api, 1), "application/json");
}

static void
test_409_kinds(void **state)
{
	struct fx *fx = *state;
	struct k8s_error err;
	json_t *obj = json_pack("{s:{s:s, s:s}}", "metadata", "name", "a",
	    "resourceVersion", "7");

	fakeapi_push(fx->api, 409, NULL, "{\"kind\":\"Status\",\"reason\":\"AlreadyExists\","
	    "\"message\":\"configmaps \\\"a\\\" already exists\",\"code\":409}", 0);
	fakeapi_push(fx->api, 409, NULL, "{\"kind\":\"Status\",\"reason\":\"Conflict\","
	    "\"message\":\"the object has been modified\",\"code\":409}", 0);
	assert_int_equal(k8s_create(fx->c, &k8s_res_configmaps, "ns1", obj, NULL, &err), K8S_EEXIST);
	assert_string_equal(err.message, "configmaps \"a\" already exists");
	assert_int_equal(k8s_update(fx->c, &k8s_res_configmaps, "ns1", "a", NULL, obj, NULL, &err), K8S_ECONFLICT);
	assert_int_equal(err.http_status, 409);
	assert_string_equal(err.reason, "Conflict");
	assert_string_equal(fakeapi_request(fx->api, 1), "PUT /api/v1/namespaces/ns1/configmaps/a");
	json_decref(obj);
}

static void
test_bad_json_and_too_big(void **state)
{
	struct fx *fx = *state;
	struct k8s_client_opts o = { .max_response_bytes = 64, .allow_token_over_http = 1 };
	struct k8s_client *small;
	struct k8s_error err;
	json_t *obj;
	char big[200];

	fakeapi_push(fx->api, 200, NULL, "{\"metadata\":", 0);
	assert_int_equal(k8s_get(fx->c, &k8s_res_pods, "ns1", "p", &obj, &err), K8S_EINVAL);
	assert_null(obj);
	assert_non_null(strstr(err.message, "bad JSON in response"));

	memset(big, ' ', sizeof(big) - 3);
	big[0] = '{';
	big[sizeof(big) - 3] = '}';
	big[sizeof(big) - 2] = '\n';
	big[sizeof(big) - 1] = '\0';
	assert_int_equal(k8s_client_new(fx->cfg, &o, &small, &err), 0);
	fakeapi_push(fx->api, 200, NULL, big, 0);
	assert_int_equal(k8s_get(small, &k8s_res_pods, "ns1", "p", &obj, &err), K8S_ETOOBIG);
	assert_non_null(strstr(err.message, "larger than 64 bytes"));
	k8s_client_free(small);
}

static void
test_timeout_and_refused(void **state)
{
	struct fx *fx = *state;
	struct k8s_client_opts o = { .timeout_ms = 300, .allow_token_over_http = 1 };
	struct k8s_client *quick;
	struct k8s_config *cfg;
	struct fakeapi *dead;
	struct k8s_error err;
	json_t *obj;
	long t0;

	assert_int_equal(k8s_client_new(fx->cfg, &o, &quick, &err), 0);
	fakeapi_push(fx->api, 200, NULL, "{}", 1500);
	t0 = mono_ms();
	assert_int_equal(k8s_get(quick, &k8s_res_pods, "ns1", "p", &obj, &err), K8S_ETIMEDOUT);
	assert_true(mono_ms() - t0 < 1200);
	k8s_client_free(quick);

	/* A server that went away: connection refused is a transport error. */
	dead = fakeapi_start();
	cfg = fakeapi_config(dead, NULL);
	fakeapi_stop(dead);
	assert_int_equal(k8s_client_new(cfg, NULL, &quick, &err), 0);
	assert_int_equal(k8s_get(quick, &k8s_res_pods, "ns1", "p", &obj, &err), K8S_EIO);
	assert_int_equal(err.http_status, 0);
	assert_non_null(strstr(err.message, "GET /api/v1/namespaces/ns1/pods/p: "));
	k8s_client_free(quick);
	k8s_config_free(cfg);
}

static void
test_list_all_pages_and_query(void **state)
{
	struct fx *fx = *state;
	struct k8s_list_opts lo = { .label_selector = "app in (a,b)", .limit = 2 };
	struct k8s_error err;
	json_t *items;
	char *rv;

	fakeapi_push(fx->api, 200, NULL, "{\"metadata\":{\"continue\":\"tok/1=\",\"resourceVersion\":\"10\"},"
	    "\"items\":[{\"metadata\":{\"name\":\"a\"}},{\"metadata\":{\"name\":\"b\"}}]}", 0);
	fakeapi_push(fx->api, 200, NULL, "{\"metadata\":{\"resourceVersion\":\"11\"},"
	    "\"items\":[{\"metadata\":{\"name\":\"c\"}}]}", 0);
	assert_int_equal(k8s_list_all(fx->c, &k8s_res_configmaps, "ns1", &lo, &items, &rv, &err), 0);
	assert_int_equal(json_array_size(items), 3);
	assert_string_equal(k8s_obj_name(json_array_get(items, 2)), "c");
	assert_string_equal(rv, "11");
	assert_string_equal(fakeapi_request(fx->api, 0),
	    "GET /api/v1/namespaces/ns1/configmaps?labelSelector=app%20in%20%28a%2Cb%29&limit=2");
	assert_string_equal(fakeapi_request(fx->api, 1),
	    "GET /api/v1/namespaces/ns1/configmaps?labelSelector=app%20in%20%28a%2Cb%29&limit=2&continue=tok%2F1%3D");
	json_decref(items);
	free(rv);
}

static void
test_list_all_expired_continue(void **state)
{
	struct fx *fx = *state;
	struct k8s_list_opts lo = { .limit = 1 };
	struct k8s_error err;
	json_t *items;
	char *rv;

	fakeapi_push(fx->api, 200, NULL, "{\"metadata\":{\"continue\":\"t\"},\"items\":[{\"metadata\":{\"name\":\"a\"}}]}", 0);
	fakeapi_push(fx->api, 410, NULL, "{\"kind\":\"Status\",\"reason\":\"Expired\",\"message\":\"continue expired\",\"code\":410}", 0);
	fakeapi_push(fx->api, 200, NULL, "{\"metadata\":{\"resourceVersion\":\"20\"},\"items\":[{\"metadata\":{\"name\":\"a\"}},{\"metadata\":{\"name\":\"b\"}}]}", 0);
	assert_int_equal(k8s_list_all(fx->c, &k8s_res_configmaps, "ns1", &lo, &items, &rv, &err), 0);
	/* Restarted once without a page size: no duplicate "a". */
	assert_int_equal(json_array_size(items), 2);
	assert_string_equal(rv, "20");
	assert_string_equal(fakeapi_request(fx->api, 2), "GET /api/v1/namespaces/ns1/configmaps");
	json_decref(items);
	free(rv);
}

/* What k8s_list_each hands over, as a trace: "a b|" (| = start over). */
static int
trace_item(void *arg, json_t *item)
{
	char *t = arg;
	size_t n = strlen(t);

	snprintf(t + n, 64 - n, "%s", item ? k8s_obj_name(item) : "|");
	return 0;
}

static int
stop_at_b(void *arg, json_t *item)
{
	(void)arg;
	return item && strcmp(k8s_obj_name(item), "b") == 0 ? K8S_ECANCELED : 0;
}

static void
test_list_each(void **state)
{
	struct fx *fx = *state;
	struct k8s_list_opts lo = { .limit = 1 };
	struct k8s_error err;
	char trace[64] = "", *rv = (char *)"unset";

	/* Page by page, then told to start over when the token expires. */
	fakeapi_push(fx->api, 200, NULL, "{\"metadata\":{\"continue\":\"t\"},\"items\":[{\"metadata\":{\"name\":\"a\"}}]}", 0);
	fakeapi_push(fx->api, 410, NULL, "{\"kind\":\"Status\",\"reason\":\"Expired\",\"message\":\"continue expired\",\"code\":410}", 0);
	fakeapi_push(fx->api, 200, NULL, "{\"metadata\":{\"resourceVersion\":\"20\"},\"items\":[{\"metadata\":{\"name\":\"a\"}},{\"metadata\":{\"name\":\"b\"}}]}", 0);
	assert_int_equal(k8s_list_each(fx->c, &k8s_res_configmaps, "ns1", &lo, trace_item, trace, &rv, &err), 0);
	assert_string_equal(trace, "a|ab");
	assert_string_equal(rv, "20");
	free(rv);
	/* The callback's code stops the walk before the next page. */
	fakeapi_push(fx->api, 200, NULL, "{\"metadata\":{\"continue\":\"t\"},\"items\":[{\"metadata\":{\"name\":\"a\"}},{\"metadata\":{\"name\":\"b\"}}]}", 0);
	rv = (char *)"unset";
	assert_int_equal(k8s_list_each(fx->c, &k8s_res_configmaps, "ns1", &lo, stop_at_b, NULL, &rv, &err), K8S_ECANCELED);
	assert_null(rv);
	assert_int_equal(fakeapi_count(fx->api), 4);
}

/*
 * A page over the response cap is not the end of the list: the same page
 * again, half as long, until it fits (executions with big outputs made a
 * 37 MB page, and a controller that could never relist).
 */
static void
test_list_each_shrinks_pages(void **state)
{
	struct fx *fx = *state;
	struct k8s_client_opts o = { .max_response_bytes = 200, .allow_token_over_http = 1 };
	struct k8s_list_opts lo = { .limit = 4 };
	struct k8s_client *small;
	struct k8s_error err;
	char trace[64] = "", *rv = NULL, big[400];

	assert_int_equal(k8s_client_new(fx->cfg, &o, &small, &err), 0);
	snprintf(big, sizeof(big), "{\"metadata\":{},\"items\":[{\"metadata\":{\"name\":\"a\"}},"
	    "{\"metadata\":{\"name\":\"b\",\"x\":\"%0200d\"}}]}", 0);
	fakeapi_push(fx->api, 200, NULL, big, 0);		/* limit=4: too big */
	fakeapi_push(fx->api, 200, NULL, big, 0);		/* limit=2: still */
	fakeapi_push(fx->api, 200, NULL, "{\"metadata\":{\"continue\":\"t1\"},"
	    "\"items\":[{\"metadata\":{\"name\":\"a\"}}]}", 0);	/* limit=1 */
	fakeapi_push(fx->api, 200, NULL, "{\"metadata\":{\"resourceVersion\":\"9\"},"
	    "\"items\":[{\"metadata\":{\"name\":\"b\"}}]}", 0);
	assert_int_equal(k8s_list_each(small, &k8s_res_configmaps, "ns1", &lo, trace_item,
	    trace, &rv, &err), 0);
	assert_string_equal(trace, "ab");
	assert_string_equal(rv, "9");
	free(rv);
	assert_int_equal(fakeapi_count(fx->api), 4);
	assert_string_equal(fakeapi_request(fx->api, 0), "GET /api/v1/namespaces/ns1/configmaps?limit=4");
	assert_string_equal(fakeapi_request(fx->api, 1), "GET /api/v1/namespaces/ns1/configmaps?limit=2");
	assert_string_equal(fakeapi_request(fx->api, 2), "GET /api/v1/namespaces/ns1/configmaps?limit=1");
	assert_string_equal(fakeapi_request(fx->api, 3),
	    "GET /api/v1/namespaces/ns1/configmaps?limit=1&continue=t1");
	/* One item over the cap is an error, not a loop: 4, 2, 1, then stop. */
	for (int i = 0; i < 3; i++)
		fakeapi_push(fx->api, 200, NULL, big, 0);
	assert_int_equal(k8s_list_each(small, &k8s_res_configmaps, "ns1", &lo, trace_item,
	    trace, &rv, &err), K8S_ETOOBIG);
	assert_int_equal(fakeapi_count(fx->api), 7);
	assert_string_equal(fakeapi_request(fx->api, 6), "GET /api/v1/namespaces/ns1/configmaps?limit=1");
	k8s_client_free(small);
}

/*
 * A list's own page cap (page_bytes), below the client's: the same halving,
 * so a relist of large objects holds one small page at a time (a
 * controller relisting 200 executions of 430 KB peaked at 124 MiB with
 * 32 MiB pages). Other requests keep the client's cap.
 */
static void
test_list_page_bytes(void **state)
{
	struct fx *fx = *state;
	struct k8s_list_opts lo = { .limit = 4, .page_bytes = 200 };
	struct k8s_error err;
	char trace[64] = "", *rv = NULL, big[400];
	json_t *obj = NULL;

	snprintf(big, sizeof(big), "{\"metadata\":{},\"items\":[{\"metadata\":{\"name\":\"a\"}},"
	    "{\"metadata\":{\"name\":\"b\",\"x\":\"%0200d\"}}]}", 0);
	fakeapi_push(fx->api, 200, NULL, big, 0);		/* limit=4: over 200 bytes */
	fakeapi_push(fx->api, 200, NULL, "{\"metadata\":{\"resourceVersion\":\"9\"},"
	    "\"items\":[{\"metadata\":{\"name\":\"a\"}}]}", 0);	/* limit=2 */
	assert_int_equal(k8s_list_each(fx->c, &k8s_res_configmaps, "ns1", &lo, trace_item,
	    trace, &rv, &err), 0);
	assert_string_equal(trace, "a");
	free(rv);
	assert_int_equal(fakeapi_count(fx->api), 2);
	assert_string_equal(fakeapi_request(fx->api, 1), "GET /api/v1/namespaces/ns1/configmaps?limit=2");
	/* A GET of the same bytes is not capped so. */
	fakeapi_push(fx->api, 200, NULL, big, 0);
	assert_int_equal(k8s_get(fx->c, &k8s_res_configmaps, "ns1", "x", &obj, &err), 0);
	json_decref(obj);
}

static void
test_patch_and_delete_bodies(void **state)
{
	struct fx *fx = *state;
	struct k8s_patch_opts apply = { K8S_PATCH_APPLY, "airlock-controller", 1, "status" };
	struct k8s_patch_opts merge = { K8S_PATCH_MERGE, NULL, 0, NULL };
	struct k8s_patch_opts noman = { K8S_PATCH_APPLY, NULL, 0, NULL };
	struct k8s_delete_opts del = { .propagation_policy = "Foreground",
	    .grace_period_set = 1, .grace_period_seconds = 0, .precondition_uid = "uid-9" };
	struct k8s_delete_opts zero = { 0 };
	struct k8s_error err;
	json_t *p = json_pack("{s:{s:s}}", "data", "k", "v");

	fakeapi_push(fx->api, 200, NULL, "{}", 0);
	fakeapi_push(fx->api, 200, NULL, "{}", 0);
	fakeapi_push(fx->api, 200, NULL, "{}", 0);
	assert_int_equal(k8s_patch(fx->c, &k8s_res_configmaps, "ns1", "a", &apply, p, NULL, &err), 0);
	assert_string_equal(fakeapi_request(fx->api, 0),
	    "PATCH /api/v1/namespaces/ns1/configmaps/a/status?fieldManager=airlock-controller&force=true");
	assert_string_equal(fakeapi_ctype(fx->api, 0), "application/apply-patch+yaml");
	assert_int_equal(k8s_patch(fx->c, &k8s_res_configmaps, "ns1", "a", &merge, p, NULL, &err), 0);
	assert_string_equal(fakeapi_ctype(fx->api, 1), "application/merge-patch+json");
	assert_string_equal(fakeapi_body(fx->api, 1), "{\"data\":{\"k\":\"v\"}}");
	assert_int_equal(k8s_patch(fx->c, &k8s_res_configmaps, "ns1", "a", &noman, p, NULL, &err), K8S_EINVAL);
	assert_int_equal(k8s_delete(fx->c, &k8s_res_pods, "ns1", "p", &del, NULL, &err), 0);
	assert_string_equal(fakeapi_request(fx->api, 2), "DELETE /api/v1/namespaces/ns1/pods/p");
	assert_string_equal(fakeapi_body(fx->api, 2),
	    "{\"apiVersion\":\"v1\",\"kind\":\"DeleteOptions\",\"propagationPolicy\":\"Foreground\","
	    "\"gracePeriodSeconds\":0,\"preconditions\":{\"uid\":\"uid-9\"}}");
	/* Zeroed options are the server's defaults, not "grace period 0". */
	fakeapi_push(fx->api, 200, NULL, "{}", 0);
	assert_int_equal(k8s_delete(fx->c, &k8s_res_pods, "ns1", "p", &zero, NULL, &err), 0);
	assert_string_equal(fakeapi_body(fx->api, 3), "{\"apiVersion\":\"v1\",\"kind\":\"DeleteOptions\"}");
	assert_int_equal(fakeapi_count(fx->api), 4);
	json_decref(p);
}

static void
test_no_token_no_header(void **state)
{
	struct fakeapi *api = fakeapi_start();
	struct k8s_config *cfg = fakeapi_config(api, NULL);
	struct k8s_client *c;
	struct k8s_error err;
	json_t *obj;

	(void)state;
	assert_int_equal(k8s_client_new(cfg, NULL, &c, &err), 0);
	fakeapi_push(api, 200, NULL, "{}", 0);
	assert_int_equal(k8s_get(c, &k8s_res_namespaces, NULL, "x", &obj, &err), 0);
	json_decref(obj);
	assert_string_equal(fakeapi_auth(api, 0), "");
	k8s_client_free(c);
	k8s_config_free(cfg);
	fakeapi_stop(api);
}

static void
test_retry_after_huge(void **state)
{
	struct fx *fx = *state;
	struct k8s_error err;
	json_t *obj;
	long t0 = mono_ms(), dt;

	/* Overflowed a long once (seconds * 1000) and spun forever. */
	fakeapi_push(fx->api, 429, "9223372036854776", "{}", 0);
	fakeapi_push(fx->api, 200, NULL, "{}", 0);
	assert_int_equal(k8s_get(fx->c, &k8s_res_pods, "ns1", "p", &obj, &err), 0);
	json_decref(obj);
	dt = mono_ms() - t0;
	assert_true(dt >= CAP_MS);	/* the cap of setup() */
	assert_true(dt < CAP_MS + 1500);
}

static void
test_nul_escape_parses(void **state)
{
	struct fx *fx = *state;
	struct k8s_error err;
	json_t *obj;

	/* Valid JSON the API server accepts in annotations and data. */
	fakeapi_push(fx->api, 200, NULL, "{\"metadata\":{\"name\":\"a\"},\"data\":{\"k\":\"x\\u0000y\"}}", 0);
	assert_int_equal(k8s_get(fx->c, &k8s_res_configmaps, "ns1", "a", &obj, &err), 0);
	assert_int_equal(json_string_length(json_object_get(json_object_get(obj, "data"), "k")), 3);
	json_decref(obj);
}

static void
test_list_all_rv_first_page_only(void **state)
{
	struct fx *fx = *state;
	struct k8s_list_opts lo = { .limit = 1, .resource_version = "5",
	    .resource_version_match = "NotOlderThan" };
	struct k8s_error err;
	json_t *items;
	char *rv;

	fakeapi_push(fx->api, 200, NULL, "{\"metadata\":{\"continue\":\"t1\"},\"items\":[{}]}", 0);
	fakeapi_push(fx->api, 200, NULL, "{\"metadata\":{\"resourceVersion\":\"9\"},\"items\":[{}]}", 0);
	assert_int_equal(k8s_list_all(fx->c, &k8s_res_pods, "ns1", &lo, &items, &rv, &err), 0);
	assert_string_equal(fakeapi_request(fx->api, 0),
	    "GET /api/v1/namespaces/ns1/pods?limit=1&resourceVersion=5&resourceVersionMatch=NotOlderThan");
	assert_string_equal(fakeapi_request(fx->api, 1), "GET /api/v1/namespaces/ns1/pods?limit=1&continue=t1");
	json_decref(items);
	free(rv);

	/* A server that hands back the same token would loop forever. */
	fakeapi_push(fx->api, 200, NULL, "{\"metadata\":{\"continue\":\"same\"},\"items\":[]}", 0);
	fakeapi_push(fx->api, 200, NULL, "{\"metadata\":{\"continue\":\"same\"}}", 0);
	assert_int_equal(k8s_list_all(fx->c, &k8s_res_pods, "ns1", NULL, &items, &rv, &err), K8S_EINVAL);
	assert_null(items);
	assert_string_equal(err.message, "list of pods: the server repeated a continue token");
}

static void
test_token_over_http_refused(void **state)
{
	struct fx *fx = *state;
	struct k8s_client *c;
	struct k8s_error err;
	char want[128];

	assert_int_equal(k8s_client_new(fx->cfg, NULL, &c, &err), K8S_EINVAL);
	assert_null(c);
	snprintf(want, sizeof(want), "refusing to send a bearer token to '%s' over plain http",
	    fakeapi_url(fx->api));
	assert_string_equal(err.message, want);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_path),
		cmocka_unit_test_setup_teardown(test_get_sends_token_and_parses, setup, teardown),
		cmocka_unit_test_setup_teardown(test_500_status_message, setup, teardown),
		cmocka_unit_test_setup_teardown(test_500_not_json, setup, teardown),
		cmocka_unit_test_setup_teardown(test_429_retry_after, setup, teardown),
		cmocka_unit_test_setup_teardown(test_429_gives_up, setup, teardown),
		cmocka_unit_test_setup_teardown(test_503_retry_after_capped, setup, teardown),
		cmocka_unit_test_setup_teardown(test_409_kinds, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_json_and_too_big, setup, teardown),
		cmocka_unit_test_setup_teardown(test_timeout_and_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_list_all_pages_and_query, setup, teardown),
		cmocka_unit_test_setup_teardown(test_list_all_expired_continue, setup, teardown),
		cmocka_unit_test_setup_teardown(test_list_each, setup, teardown),
		cmocka_unit_test_setup_teardown(test_list_each_shrinks_pages, setup, teardown),
		cmocka_unit_test_setup_teardown(test_list_page_bytes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_patch_and_delete_bodies, setup, teardown),
		cmocka_unit_test(test_no_token_no_header),
		cmocka_unit_test_setup_teardown(test_retry_after_huge, setup, teardown),
		cmocka_unit_test_setup_teardown(test_nul_escape_parses, setup, teardown),
		cmocka_unit_test_setup_teardown(test_list_all_rv_first_page_only, setup, teardown),
		cmocka_unit_test_setup_teardown(test_token_over_http_refused, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
