/*
 * Integration: operator/client.c against the real kube-apiserver.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "client.h"
#include "itutil.h"
#include "xmalloc.h"

struct fx {
	struct k8s_client	*c;
	struct k8s_config	*cfg;
	char			*ns;
};

static int
setup(void **state)
{
	struct fx *fx = calloc(1, sizeof(*fx));

	fx->c = it_client(0, &fx->cfg);
	fx->ns = it_namespace_new(fx->c, "it-client");
	*state = fx;
	return 0;
}

static int
teardown(void **state)
{
	struct fx *fx = *state;

	it_namespace_delete(fx->c, fx->ns);
	it_client_free(fx->c, fx->cfg);
	free(fx->ns);
	free(fx);
	return 0;
}

static json_t *
configmap(const char *name, const char *v)
{
	return json_pack("{s:s, s:s, s:{s:s}, s:{s:s}}", "apiVersion", "v1",
	    "kind", "ConfigMap", "metadata", "name", name, "data", "k", v);
}

static const char *
data_k(json_t *cm)
{
	return json_string_value(json_object_get(json_object_get(cm, "data"), "k"));
}

static void
test_configmap_crud(void **state)
{
	struct fx *fx = *state;
	struct k8s_patch_opts merge = { .type = K8S_PATCH_MERGE };
	struct k8s_error err;
	json_t *cm = configmap("crud", "one"), *out, *got, *patch;

	assert_int_equal(k8s_create(fx->c, &k8s_res_configmaps, fx->ns, cm, &out, &err), 0);
	assert_string_equal(k8s_obj_name(out), "crud");
	assert_string_equal(k8s_obj_namespace(out), fx->ns);
	assert_non_null(k8s_obj_uid(out));
	json_decref(out);
	/* Creating it again: AlreadyExists, not Conflict. */
	assert_int_equal(k8s_create(fx->c, &k8s_res_configmaps, fx->ns, cm, NULL, &err), K8S_EEXIST);
	assert_int_equal(err.http_status, 409);
	assert_string_equal(err.reason, "AlreadyExists");
	assert_string_equal(err.message, "configmaps \"crud\" already exists");
	json_decref(cm);

	assert_int_equal(k8s_get(fx->c, &k8s_res_configmaps, fx->ns, "crud", &got, &err), 0);
	assert_string_equal(data_k(got), "one");
	json_object_set_new(json_object_get(got, "data"), "k", json_string("two"));
	assert_int_equal(k8s_update(fx->c, &k8s_res_configmaps, fx->ns, "crud", NULL, got, &out, &err), 0);
	assert_string_equal(data_k(out), "two");
	assert_string_not_equal(k8s_obj_rv(out), k8s_obj_rv(got));
	json_decref(out);
	json_decref(got);

	patch = json_pack("{s:{s:s}}", "data", "k", "three");
	assert_int_equal(k8s_patch(fx->c, &k8s_res_configmaps, fx->ns, "crud", &merge, patch, &out, &err), 0);
	assert_string_equal(data_k(out), "three");
	json_decref(out);
	json_decref(patch);

	assert_int_equal(k8s_delete(fx->c, &k8s_res_configmaps, fx->ns, "crud", NULL, NULL, &err), 0);
	assert_int_equal(k8s_get(fx->c, &k8s_res_configmaps, fx->ns, "crud", &got, &err), K8S_ENOTFOUND);
	assert_null(got);
	assert_int_equal(err.http_status, 404);
	assert_string_equal(err.reason, "NotFound");
	assert_string_equal(err.message, "configmaps \"crud\" not found");
	assert_int_equal(k8s_delete(fx->c, &k8s_res_configmaps, fx->ns, "crud", NULL, NULL, &err), K8S_ENOTFOUND);
}

static void
test_pagination(void **state)
{
	struct fx *fx = *state;
	struct k8s_list_opts lo = { .limit = 10, .label_selector = "page=yes" };
	struct k8s_error err;
	json_t *items, *page;
	char name[32], *rv, *cont = NULL;
	int pages = 0, total = 0;

	for (int i = 0; i < 31; i++) {
		json_t *cm;

		snprintf(name, sizeof(name), "page-%02d", i);
		cm = configmap(name, "x");
		json_object_set_new(json_object_get(cm, "metadata"), "labels",
		    json_pack("{s:s}", "page", "yes"));
		assert_int_equal(k8s_create(fx->c, &k8s_res_configmaps, fx->ns, cm, NULL, &err), 0);
		json_decref(cm);
	}
	free(it_configmap(fx->c, fx->ns, "unlabelled", "x"));

	/* Page by page: 10, 10, 10, 1, with a continue token between. */
	do {
		lo.continue_token = cont;
		assert_int_equal(k8s_list(fx->c, &k8s_res_configmaps, fx->ns, &lo, &page, &err), 0);
		size_t n = json_array_size(json_object_get(page, "items"));
		assert_int_equal(n, pages < 3 ? 10 : 1);
		total += (int)n;
		pages++;
		free(cont);
		const char *c = json_string_value(json_object_get(json_object_get(page, "metadata"), "continue"));
		cont = (c && c[0]) ? strdup(c) : NULL;
		json_decref(page);
	} while (cont);
	assert_int_equal(pages, 4);
	assert_int_equal(total, 31);

	lo.continue_token = NULL;
	assert_int_equal(k8s_list_all(fx->c, &k8s_res_configmaps, fx->ns, &lo, &items, &rv, &err), 0);
	assert_int_equal(json_array_size(items), 31);
	for (int i = 0; i < 31; i++) {
		snprintf(name, sizeof(name), "page-%02d", i);
		assert_string_equal(k8s_obj_name(json_array_get(items, i)), name);
	}
	assert_true(strtol(rv, NULL, 10) > 0);
	json_decref(items);
	free(rv);
}

static void
test_stale_update_conflict(void **state)
{
	struct fx *fx = *state;
	struct k8s_error err;
	json_t *v1, *v2;

	free(it_configmap(fx->c, fx->ns, "race", "a"));
	assert_int_equal(k8s_get(fx->c, &k8s_res_configmaps, fx->ns, "race", &v1, &err), 0);
	v2 = json_deep_copy(v1);
	json_object_set_new(json_object_get(v2, "data"), "k", json_string("b"));
	assert_int_equal(k8s_update(fx->c, &k8s_res_configmaps, fx->ns, "race", NULL, v2, NULL, &err), 0);
	/* v1 still carries the old resourceVersion. */
	json_object_set_new(json_object_get(v1, "data"), "k", json_string("c"));
	assert_int_equal(k8s_update(fx->c, &k8s_res_configmaps, fx->ns, "race", NULL, v1, NULL, &err), K8S_ECONFLICT);
	assert_int_equal(err.code, K8S_ECONFLICT);
	assert_int_equal(err.http_status, 409);
	assert_string_equal(err.reason, "Conflict");
	assert_string_equal(err.message, "Operation cannot be fulfilled on configmaps \"race\": "
	    "the object has been modified; please apply your changes to the latest version and try again");
	json_decref(v1);
	json_decref(v2);
}

/*
 * A merge patch that names a resourceVersion is conditional on it: the
 * controller's status writes rely on this to patch only what they change
 * without overwriting a newer state.
 */
static void
test_stale_merge_patch_conflict(void **state)
{
	struct fx *fx = *state;
	struct k8s_patch_opts merge = { .type = K8S_PATCH_MERGE };
	struct k8s_error err;
	json_t *v1, *patch, *now;
	char *rv;

	free(it_configmap(fx->c, fx->ns, "race2", "a"));
	assert_int_equal(k8s_get(fx->c, &k8s_res_configmaps, fx->ns, "race2", &v1, &err), 0);
	rv = xstrdup(k8s_obj_rv(v1));
	patch = json_pack("{s:{s:s}, s:{s:s}}", "metadata", "resourceVersion", rv,
	    "data", "k", "b");
	assert_int_equal(k8s_patch(fx->c, &k8s_res_configmaps, fx->ns, "race2", &merge, patch, NULL, &err), 0);
	json_decref(patch);
	/* The same resourceVersion again is now stale. */
	patch = json_pack("{s:{s:s}, s:{s:s}}", "metadata", "resourceVersion", rv,
	    "data", "other", "c");
	assert_int_equal(k8s_patch(fx->c, &k8s_res_configmaps, fx->ns, "race2", &merge, patch, NULL, &err), K8S_ECONFLICT);
	assert_int_equal(err.http_status, 409);
	json_decref(patch);
	assert_int_equal(k8s_get(fx->c, &k8s_res_configmaps, fx->ns, "race2", &now, &err), 0);
	assert_string_equal(json_string_value(json_object_get(json_object_get(now, "data"), "k")), "b");
	assert_null(json_object_get(json_object_get(now, "data"), "other"));
	json_decref(now);
	json_decref(v1);
	free(rv);
}

static void
test_server_side_apply(void **state)
{
	struct fx *fx = *state;
	struct k8s_patch_opts a = { K8S_PATCH_APPLY, "mgr-a", 0, NULL };
	struct k8s_patch_opts b = { K8S_PATCH_APPLY, "mgr-b", 0, NULL };
	struct k8s_error err;
	json_t *cfg = configmap("ssa", "from-a"), *out, *mf;
	size_t i;
	int found_b = 0;

	/* Apply creates. */
	assert_int_equal(k8s_patch(fx->c, &k8s_res_configmaps, fx->ns, "ssa", &a, cfg, &out, &err), 0);
	assert_string_equal(data_k(out), "from-a");
	json_decref(out);
	/* Another manager changing an owned field: a conflict... */
	json_object_set_new(json_object_get(cfg, "data"), "k", json_string("from-b"));
	assert_int_equal(k8s_patch(fx->c, &k8s_res_configmaps, fx->ns, "ssa", &b, cfg, &out, &err), K8S_ECONFLICT);
	assert_int_equal(err.http_status, 409);
	assert_string_equal(err.reason, "Conflict");
	assert_non_null(strstr(err.message, "conflict with \"mgr-a\""));
	assert_non_null(strstr(err.message, ".data.k"));
	/* ...unless it forces, and then it owns the field. */
	b.force = 1;
	assert_int_equal(k8s_patch(fx->c, &k8s_res_configmaps, fx->ns, "ssa", &b, cfg, &out, &err), 0);
	assert_string_equal(data_k(out), "from-b");
	mf = json_object_get(json_object_get(out, "metadata"), "managedFields");
	for (i = 0; i < json_array_size(mf); i++) {
		json_t *e = json_array_get(mf, i);

		if (strcmp(json_string_value(json_object_get(e, "manager")), "mgr-b") == 0) {
			assert_string_equal(json_string_value(json_object_get(e, "operation")), "Apply");
			found_b = 1;
		}
	}
	assert_true(found_b);
	json_decref(out);
	json_decref(cfg);
}

static void
test_delete_precondition(void **state)
{
	struct fx *fx = *state;
	struct k8s_delete_opts wrong = { .precondition_uid = "00000000-0000-0000-0000-000000000000",
	    .propagation_policy = "Background" };
	struct k8s_delete_opts right = { .grace_period_set = 1, .grace_period_seconds = 0,
	    .propagation_policy = "Foreground" };
	struct k8s_error err;
	json_t *got;

	free(it_configmap(fx->c, fx->ns, "pre", "a"));
	assert_int_equal(k8s_delete(fx->c, &k8s_res_configmaps, fx->ns, "pre", &wrong, NULL, &err), K8S_ECONFLICT);
	assert_int_equal(err.http_status, 409);
	assert_string_equal(err.reason, "Conflict");
	assert_int_equal(k8s_get(fx->c, &k8s_res_configmaps, fx->ns, "pre", &got, &err), 0);
	{
		char want[512];

		snprintf(want, sizeof(want), "Operation cannot be fulfilled on ConfigMap \"pre\": "
		    "the UID in the precondition (00000000-0000-0000-0000-000000000000) does not match "
		    "the UID in record (%s). The object might have been deleted and then recreated",
		    k8s_obj_uid(got));
		assert_string_equal(err.message, want);
	}
	right.precondition_uid = k8s_obj_uid(got);
	assert_int_equal(k8s_delete(fx->c, &k8s_res_configmaps, fx->ns, "pre", &right, NULL, &err), 0);
	json_decref(got);
}

static void
test_rbac_forbidden(void **state)
{
	struct k8s_config *cfg;
	struct k8s_client *c = it_client(1, &cfg);
	struct k8s_error err;
	json_t *out;

	(void)state;
	/* What the restricted user may do... */
	assert_int_equal(k8s_list(c, &k8s_res_configmaps, "airlock-restricted", NULL, &out, &err), 0);
	json_decref(out);
	/* ...and what it may not: the server's own words come through. */
	assert_int_equal(k8s_list(c, &k8s_res_secrets, "airlock-restricted", NULL, &out, &err), K8S_EFORBIDDEN);
	assert_null(out);
	assert_int_equal(err.http_status, 403);
	assert_string_equal(err.reason, "Forbidden");
	assert_string_equal(err.message, "secrets is forbidden: User \"airlock-restricted\" cannot list "
	    "resource \"secrets\" in API group \"\" in the namespace \"airlock-restricted\"");
	assert_int_equal(k8s_get(c, &k8s_res_configmaps, "default", "x", &out, &err), K8S_EFORBIDDEN);
	assert_string_equal(err.message, "configmaps \"x\" is forbidden: User \"airlock-restricted\" cannot get "
	    "resource \"configmaps\" in API group \"\" in the namespace \"default\"");
	it_client_free(c, cfg);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_configmap_crud, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pagination, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stale_update_conflict, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stale_merge_patch_conflict, setup, teardown),
		cmocka_unit_test_setup_teardown(test_server_side_apply, setup, teardown),
		cmocka_unit_test_setup_teardown(test_delete_precondition, setup, teardown),
		cmocka_unit_test(test_rbac_forbidden),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
