/*
 * Unit tests: operator/informer.c against a scripted server: what a relist
 * announces, and stopping from two threads at once. The real API server
 * runs the rest in tests/integration/test_watch_it.c.
 */
#include <pthread.h>
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
#include "fakeapi.h"
#include "informer.h"

struct log {
	pthread_mutex_t	 lock;
	char		 line[16][64];
	int		 n;
};

static void
note(struct log *l, const char *what, json_t *o)
{
	pthread_mutex_lock(&l->lock);
	if (l->n < 16)
		snprintf(l->line[l->n], sizeof(l->line[0]), "%s %s %s", what,
		    k8s_obj_name(o), k8s_obj_rv(o));
	l->n++;
	pthread_mutex_unlock(&l->lock);
}

static void
on_add(void *arg, json_t *o)
{
	note(arg, "add", o);
}

static void
on_update(void *arg, json_t *old, json_t *cur)
{
	(void)old;
	note(arg, "update", cur);
}

static void
on_delete(void *arg, json_t *o, int unknown)
{
	note(arg, unknown ? "gone" : "delete", o);
}

static int
lines(struct log *l)
{
	int n;

	pthread_mutex_lock(&l->lock);
	n = l->n;
	pthread_mutex_unlock(&l->lock);
	return n;
}

#define ITEM(n, rv) "{\"metadata\":{\"name\":\"" n "\",\"namespace\":\"ns1\",\"resourceVersion\":\"" rv "\"}}"

static void
test_relist_diff(void **state)
{
	struct fakeapi *api = fakeapi_start();
	struct k8s_config *cfg = fakeapi_config(api, NULL);
	struct log l = { .lock = PTHREAD_MUTEX_INITIALIZER };
	struct informer_opts io = { .res = &k8s_res_configmaps, .ns = "ns1",
	    .watch_timeout_seconds = 5, .backoff_initial_ms = 20 };
	struct informer_handlers h = { on_add, on_update, on_delete, &l };
	struct k8s_client *c;
	struct k8s_error err;
	struct informer *inf;
	json_t *o;

	(void)state;
	assert_int_equal(k8s_client_new(cfg, NULL, &c, &err), 0);
	/* First list: a, b, c. Watch: 410 at once. Second list: a (same),
	 * b (changed), d (new); c vanished while nobody watched. */
	fakeapi_push(api, 200, NULL, "{\"metadata\":{\"resourceVersion\":\"10\"},\"items\":["
	    ITEM("a", "1") "," ITEM("b", "2") "," ITEM("c", "3") "]}", 0);
	fakeapi_push(api, 200, NULL, "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":410}}\n", 0);
	fakeapi_push(api, 200, NULL, "{\"metadata\":{\"resourceVersion\":\"20\"},\"items\":["
	    ITEM("a", "1") "," ITEM("b", "12") "," ITEM("d", "14") "]}", 0);
	fakeapi_push(api, 200, NULL, "", 2000);	/* a quiet watch */
	inf = informer_new(c, &io, &h);
	assert_int_equal(informer_start(inf), 0);
	for (long long end = clock_mono_ms() + 3000; lines(&l) < 6 && clock_mono_ms() < end;)
		nanosleep(&(struct timespec){ 0, 1000000L }, NULL);
	assert_int_equal(lines(&l), 6);
	assert_string_equal(l.line[0], "add a 1");
	assert_string_equal(l.line[1], "add b 2");
	assert_string_equal(l.line[2], "add c 3");
	assert_string_equal(l.line[3], "update b 12");
	assert_string_equal(l.line[4], "add d 14");
	assert_string_equal(l.line[5], "gone c 3");
	assert_int_equal(informer_len(inf), 3);
	assert_null(informer_get(inf, "ns1", "c"));
	o = informer_get(inf, "ns1", "b");
	assert_string_equal(k8s_obj_rv(o), "12");
	json_decref(o);
	/* Starting twice is refused. */
	assert_int_equal(informer_start(inf), K8S_EINVAL);
	informer_free(inf);
	k8s_client_free(c);
	k8s_config_free(cfg);
	fakeapi_stop(api);
}

/* Keep metadata only: the data never reaches the cache. */
static json_t *
trim(json_t *obj)
{
	return json_pack("{s:O}", "metadata", json_object_get(obj, "metadata"));
}

static int seen_data;

static void
on_add_check(void *arg, json_t *o)
{
	if (json_object_get(o, "data"))
		seen_data++;
	note(arg, "add", o);
}

static void
test_transform(void **state)
{
	struct fakeapi *api = fakeapi_start();
	struct k8s_config *cfg = fakeapi_config(api, NULL);
	struct log l = { .lock = PTHREAD_MUTEX_INITIALIZER };
	struct informer_opts io = { .res = &k8s_res_configmaps, .ns = "ns1", .transform = trim };
	struct informer_handlers h = { on_add_check, on_update, on_delete, &l };
	struct k8s_client *c;
	struct k8s_error err;
	struct informer *inf;
	json_t *o;

	(void)state;
	assert_int_equal(k8s_client_new(cfg, NULL, &c, &err), 0);
	fakeapi_push(api, 200, NULL, "{\"metadata\":{\"resourceVersion\":\"10\"},\"items\":["
	    "{\"metadata\":{\"name\":\"a\",\"namespace\":\"ns1\",\"resourceVersion\":\"1\"},\"data\":{\"k\":\"big\"}}]}", 0);
	fakeapi_push(api, 200, NULL,
	    "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"b\",\"namespace\":\"ns1\",\"resourceVersion\":\"11\"},\"data\":{\"k\":\"big\"}}}\n"
	    "{\"type\":\"DELETED\",\"object\":{\"metadata\":{\"name\":\"a\",\"namespace\":\"ns1\",\"resourceVersion\":\"12\"},\"data\":{\"k\":\"big\"}}}\n", 1000);
	inf = informer_new(c, &io, &h);
	assert_int_equal(informer_start(inf), 0);
	for (long long end = clock_mono_ms() + 3000; lines(&l) < 3 && clock_mono_ms() < end;)
		nanosleep(&(struct timespec){ 0, 1000000L }, NULL);
	assert_int_equal(lines(&l), 3);
	assert_string_equal(l.line[0], "add a 1");
	assert_string_equal(l.line[1], "add b 11");
	assert_string_equal(l.line[2], "delete a 12");
	assert_int_equal(seen_data, 0);
	o = informer_get(inf, "ns1", "b");
	assert_non_null(o);
	assert_null(json_object_get(o, "data"));
	assert_string_equal(k8s_obj_rv(o), "11");
	json_decref(o);
	informer_free(inf);
	k8s_client_free(c);
	k8s_config_free(cfg);
	fakeapi_stop(api);
}

static void *
stopper(void *arg)
{
	informer_stop(arg);
	return NULL;
}

static void
test_concurrent_stop(void **state)
{
	struct fakeapi *api = fakeapi_start();
	struct k8s_config *cfg = fakeapi_config(api, NULL);
	struct log l = { .lock = PTHREAD_MUTEX_INITIALIZER };
	struct informer_opts io = { .res = &k8s_res_configmaps, .ns = "ns1" };
	struct informer_handlers h = { on_add, on_update, on_delete, &l };
	struct k8s_client *c;
	struct k8s_error err;
	struct informer *inf;
	pthread_t t[3];

	(void)state;
	assert_int_equal(k8s_client_new(cfg, NULL, &c, &err), 0);
	fakeapi_push(api, 200, NULL, "{\"metadata\":{\"resourceVersion\":\"1\"},\"items\":[]}", 0);
	fakeapi_push(api, 200, NULL, "", 1500);
	inf = informer_new(c, &io, &h);
	assert_int_equal(informer_start(inf), 0);
	assert_int_equal(informer_wait_synced(inf, 3000), 0);
	for (int i = 0; i < 3; i++)
		pthread_create(&t[i], NULL, stopper, inf);
	for (int i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
	/* Stopped once, cleanly: it can start again. */
	fakeapi_push(api, 200, NULL, "", 1500);
	assert_int_equal(informer_start(inf), 0);
	informer_free(inf);
	k8s_client_free(c);
	k8s_config_free(cfg);
	fakeapi_stop(api);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_relist_diff),
		cmocka_unit_test(test_concurrent_stop),
		cmocka_unit_test(test_transform),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
