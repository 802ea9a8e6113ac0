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
relist_diff(int packed)
{
	struct fakeapi *api = fakeapi_start();
	struct k8s_config *cfg = fakeapi_config(api, NULL);
	struct log l = { .lock = PTHREAD_MUTEX_INITIALIZER };
	struct informer_opts io = { .res = &k8s_res_configmaps, .ns = "ns1",
	    .watch_timeout_seconds = 5, .backoff_initial_ms = 20,
	    .packed = packed };
	struct informer_handlers h = { on_add, on_update, on_delete, &l };
	struct k8s_client *c;
	struct k8s_error err;
	struct informer *inf;
	json_t *o;

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

static void
test_relist_diff(void **state)
{
	(void)state;
	relist_diff(0);
}

/* The same announcements from a cache that keeps objects as text. */
static void
test_relist_diff_packed(void **state)
{
	(void)state;
	relist_diff(1);
}

/*
 * Packed objects come back as they went in: nested values, a number past
 * 2^53, an escaped NUL, multi-byte UTF-8; each read a private copy.
 */
static void
test_packed_roundtrip(void **state)
{
	struct fakeapi *api = fakeapi_start();
	struct k8s_config *cfg = fakeapi_config(api, NULL);
	struct log l = { .lock = PTHREAD_MUTEX_INITIALIZER };
	struct informer_opts io = { .res = &k8s_res_configmaps, .ns = "ns1",
	    .packed = 1 };
	struct informer_handlers h = { on_add, on_update, on_delete, &l };
	static const char obj[] = "{\"metadata\":{\"name\":\"a\",\"namespace\":"
	    "\"ns1\",\"resourceVersion\":\"7\",\"generation\":9007199254740993},"
	    "\"data\":{\"nul\":\"x\\u0000y\",\"utf8\":\"\u00e9\u2603\","
	    "\"list\":[1,2.5,true,null,{}]}}";
	struct k8s_client *c;
	struct k8s_error err;
	struct informer *inf;
	json_t *o, *o2, *want, *all;
	char body[512];

	(void)state;
	assert_int_equal(k8s_client_new(cfg, NULL, &c, &err), 0);
	snprintf(body, sizeof(body), "{\"metadata\":{\"resourceVersion\":\"10\"},"
	    "\"items\":[%s]}", obj);
	fakeapi_push(api, 200, NULL, body, 0);
	fakeapi_push(api, 200, NULL, "", 2000);
	inf = informer_new(c, &io, &h);
	assert_int_equal(informer_start(inf), 0);
	assert_int_equal(informer_wait_synced(inf, 3000), 0);
	want = json_loads(obj, JSON_ALLOW_NUL, NULL);
	assert_non_null(want);
	o = informer_get(inf, "ns1", "a");
	o2 = informer_get(inf, "ns1", "a");
	assert_non_null(o);
	assert_true(json_equal(o, want));
	assert_ptr_not_equal(o, o2);	/* private copies */
	assert_int_equal(json_integer_value(json_object_get(json_object_get(o,
	    "metadata"), "generation")), 9007199254740993LL);
	assert_int_equal(json_string_length(json_object_get(json_object_get(o,
	    "data"), "nul")), 3);
	all = informer_list(inf);
	assert_int_equal(json_array_size(all), 1);
	assert_true(json_equal(json_array_get(all, 0), want));
	for (long long end = clock_mono_ms() + 3000; lines(&l) < 1 && clock_mono_ms() < end;)
		nanosleep(&(struct timespec){ 0, 1000000L }, NULL);
	assert_int_equal(lines(&l), 1);
	assert_string_equal(l.line[0], "add a 7");
	json_decref(all);
	json_decref(o);
	json_decref(o2);
	json_decref(want);
	informer_free(inf);
	k8s_client_free(c);
	k8s_config_free(cfg);
	fakeapi_stop(api);
}

/* Index by the label "team". */
static char *
by_team(json_t *o)
{
	const char *t = json_string_value(json_object_get(json_object_get(
	    json_object_get(o, "metadata"), "labels"), "team"));

	return t ? strdup(t) : NULL;
}

/* The names informer_by_index finds for value, sorted, space-separated. */
static void
names(struct informer *inf, const char *value, char *out, size_t len)
{
	json_t *all = informer_by_index(inf, value), *o;
	const char *v[8];
	size_t i, n = 0;

	json_array_foreach(all, i, o)
		if (n < 8)
			v[n++] = k8s_obj_name(o);
	for (i = 1; i < n; i++)	/* insertion sort: a handful */
		for (size_t j = i; j > 0 && strcmp(v[j - 1], v[j]) > 0; j--) {
			const char *t = v[j];

			v[j] = v[j - 1];
			v[j - 1] = t;
		}
	out[0] = '\0';
	for (i = 0; i < n; i++)
		snprintf(out + strlen(out), len - strlen(out), "%s%s",
		    i ? " " : "", v[i]);
	json_decref(all);
}

#define TEAM(n, rv, team) "{\"metadata\":{\"name\":\"" n "\",\"namespace\":\"ns1\",\"resourceVersion\":\"" rv "\",\"labels\":{\"team\":\"" team "\"}}}"

/*
 * The index follows adds, a value that changes, deletes and a relist,
 * packed or not.
 */
static void
index_case(int packed)
{
	struct fakeapi *api = fakeapi_start();
	struct k8s_config *cfg = fakeapi_config(api, NULL);
	struct log l = { .lock = PTHREAD_MUTEX_INITIALIZER };
	struct informer_opts io = { .res = &k8s_res_configmaps, .ns = "ns1",
	    .packed = packed, .index = by_team, .backoff_initial_ms = 20 };
	struct informer_handlers h = { on_add, on_update, on_delete, &l };
	struct k8s_client *c;
	struct k8s_error err;
	struct informer *inf;
	char got[128];

	assert_int_equal(k8s_client_new(cfg, NULL, &c, &err), 0);
	fakeapi_push(api, 200, NULL, "{\"metadata\":{\"resourceVersion\":\"10\"},\"items\":["
	    TEAM("a", "1", "red") "," TEAM("b", "2", "red") "," TEAM("c", "3", "blue") ","
	    ITEM("d", "4") "]}", 0);
	fakeapi_push(api, 200, NULL,
	    "{\"type\":\"MODIFIED\",\"object\":" TEAM("b", "11", "blue") "}\n"
	    "{\"type\":\"DELETED\",\"object\":" TEAM("a", "12", "red") "}\n", 0);
	/* The next watch is held until the test has looked, then expires. */
	fakeapi_push(api, 200, NULL,
	    "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":410}}\n",
	    FAKEAPI_HOLD);
	/* The relist: c gone while nobody watched, e new. */
	fakeapi_push(api, 200, NULL, "{\"metadata\":{\"resourceVersion\":\"20\"},\"items\":["
	    TEAM("b", "11", "blue") "," TEAM("e", "14", "red") "," ITEM("d", "4") "]}", 0);
	fakeapi_push(api, 200, NULL, "", 2000);
	inf = informer_new(c, &io, &h);
	assert_int_equal(informer_start(inf), 0);
	assert_int_equal(informer_wait_synced(inf, 3000), 0);
	/* After the watch's events, before the relist. */
	for (long long end = clock_mono_ms() + 3000; lines(&l) < 6 && clock_mono_ms() < end;)
		nanosleep(&(struct timespec){ 0, 1000000L }, NULL);
	assert_int_equal(lines(&l), 6);	/* 4 adds, update b, delete a */
	names(inf, "red", got, sizeof(got));
	assert_string_equal(got, "");
	names(inf, "blue", got, sizeof(got));
	assert_string_equal(got, "b c");
	assert_int_equal(lines(&l), 6);
	fakeapi_release(api);
	/* After the relist. */
	for (long long end = clock_mono_ms() + 3000; lines(&l) < 8 && clock_mono_ms() < end;)
		nanosleep(&(struct timespec){ 0, 1000000L }, NULL);
	assert_int_equal(lines(&l), 8);	/* then add e, gone c */
	names(inf, "red", got, sizeof(got));
	assert_string_equal(got, "e");
	names(inf, "blue", got, sizeof(got));
	assert_string_equal(got, "b");
	names(inf, "green", got, sizeof(got));
	assert_string_equal(got, "");
	informer_free(inf);
	k8s_client_free(c);
	k8s_config_free(cfg);
	fakeapi_stop(api);
}

/*
 * informer_compact: not after a list alone, nor under INFORMER_COMPACT_MIN
 * writes; after 70 events, once, and the cache, its index and the index's
 * upkeep by later events are as before.
 */
static void
test_compact(void **state)
{
	struct fakeapi *api = fakeapi_start();
	struct k8s_config *cfg = fakeapi_config(api, NULL);
	struct log l = { .lock = PTHREAD_MUTEX_INITIALIZER };
	struct informer_opts io = { .res = &k8s_res_configmaps, .ns = "ns1",
	    .packed = 1, .index = by_team, .backoff_initial_ms = 20 };
	struct informer_handlers h = { on_add, on_update, on_delete, &l };
	static const char *const team[] = { "red", "blue", "green" };
	struct k8s_client *c;
	struct k8s_error err;
	struct informer *inf;
	json_t *o;
	char got[128], events[16384], name[2] = "a";
	size_t at = 0;

	(void)state;
	assert_int_equal(k8s_client_new(cfg, NULL, &c, &err), 0);
	fakeapi_push(api, 200, NULL, "{\"metadata\":{\"resourceVersion\":\"10\"},\"items\":["
	    TEAM("a", "1", "red") "," TEAM("b", "2", "red") "," TEAM("c", "3", "blue") ","
	    TEAM("d", "4", "blue") "]}", 0);
	/* 70 updates, a b c d a ..., teams red blue green red ... */
	for (int i = 0; i < 70; i++)
		at += (size_t)snprintf(events + at, sizeof(events) - at,
		    "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":"
		    "\"%c\",\"namespace\":\"ns1\",\"resourceVersion\":\"%d\","
		    "\"labels\":{\"team\":\"%s\"}}}}\n", "abcd"[i % 4], 100 + i,
		    team[i % 3]);
	assert_true(at < sizeof(events) - 1);
	/* Held back until the test has compacted. */
	fakeapi_push(api, 200, NULL, events, FAKEAPI_HOLD);
	/* Held back until the test has checked the compacted state. */
	fakeapi_push(api, 200, NULL,
	    "{\"type\":\"MODIFIED\",\"object\":" TEAM("a", "200", "blue") "}\n"
	    "{\"type\":\"DELETED\",\"object\":" TEAM("c", "201", "red") "}\n", FAKEAPI_HOLD);
	fakeapi_push(api, 200, NULL, "", 5000);
	inf = informer_new(c, &io, &h);
	assert_int_equal(informer_start(inf), 0);
	assert_int_equal(informer_wait_synced(inf, 3000), 0);
	assert_int_equal(informer_compact(inf), 0);	/* a list: packed already */
	fakeapi_release(api);
	for (long long end = clock_mono_ms() + 3000; lines(&l) < 74 && clock_mono_ms() < end;)
		nanosleep(&(struct timespec){ 0, 1000000L }, NULL);
	assert_int_equal(lines(&l), 74);
	assert_int_equal(informer_compact(inf), 1);
	assert_int_equal(informer_compact(inf), 0);	/* nothing since */
	assert_int_equal(informer_len(inf), 4);
	/* a: 68 (green), b: 69 (red), c: 66 (red), d: 67 (blue) */
	for (int i = 0; i < 4; i++) {
		static const char *const rv[] = { "168", "169", "166", "167" };

		name[0] = (char)('a' + i);
		o = informer_get(inf, "ns1", name);
		assert_non_null(o);
		assert_string_equal(k8s_obj_name(o), name);
		assert_string_equal(k8s_obj_rv(o), rv[i]);
		json_decref(o);
	}
	names(inf, "red", got, sizeof(got));
	assert_string_equal(got, "b c");
	names(inf, "blue", got, sizeof(got));
	assert_string_equal(got, "d");
	names(inf, "green", got, sizeof(got));
	assert_string_equal(got, "a");
	assert_int_equal(lines(&l), 74);
	fakeapi_release(api);
	/* Events after it: a from green to blue, c deleted (red: b). */
	for (long long end = clock_mono_ms() + 4000; lines(&l) < 76 && clock_mono_ms() < end;)
		nanosleep(&(struct timespec){ 0, 1000000L }, NULL);
	assert_int_equal(lines(&l), 76);
	names(inf, "blue", got, sizeof(got));
	assert_string_equal(got, "a d");
	names(inf, "green", got, sizeof(got));
	assert_string_equal(got, "");
	names(inf, "red", got, sizeof(got));
	assert_string_equal(got, "b");
	assert_int_equal(informer_len(inf), 3);
	o = informer_get(inf, "ns1", "a");
	assert_string_equal(k8s_obj_rv(o), "200");
	json_decref(o);
	informer_free(inf);
	k8s_client_free(c);
	k8s_config_free(cfg);
	fakeapi_stop(api);
}

static void
test_index(void **state)
{
	(void)state;
	index_case(1);
}

static void
test_index_tree(void **state)
{
	(void)state;
	index_case(0);
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
	    "{\"type\":\"DELETED\",\"object\":{\"metadata\":{\"name\":\"a\",\"namespace\":\"ns1\",\"resourceVersion\":\"12\"},\"data\":{\"k\":\"big\"}}}\n",
	    FAKEAPI_HOLD);	/* the watch's events once the list is in */
	inf = informer_new(c, &io, &h);
	assert_int_equal(informer_start(inf), 0);
	assert_int_equal(informer_wait_synced(inf, 3000), 0);
	fakeapi_release(api);
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

/* An add handler slow enough that the list is synced long before. */
static void
on_add_slow(void *arg, json_t *o)
{
	struct timespec ts = { 0, 20 * 1000 * 1000 };

	nanosleep(&ts, NULL);
	note(arg, "add", o);
}

/*
 * Synced means every listed object's add was handled: a controller takes
 * "synced, queue empty" for its first pass done, and was ready at once
 * when the handlers that queue each key had not run yet.
 */
static void
test_synced_after_handlers(void **state)
{
	struct fakeapi *api = fakeapi_start();
	struct k8s_config *cfg = fakeapi_config(api, NULL);
	struct log l = { .lock = PTHREAD_MUTEX_INITIALIZER };
	struct informer_opts io = { .res = &k8s_res_configmaps, .ns = "ns1" };
	struct informer_handlers h = { on_add_slow, on_update, on_delete, &l };
	struct k8s_client *c;
	struct k8s_error err;
	struct informer *inf;

	(void)state;
	assert_int_equal(k8s_client_new(cfg, NULL, &c, &err), 0);
	fakeapi_push(api, 200, NULL, "{\"metadata\":{\"resourceVersion\":\"10\"},"
	    "\"items\":[" ITEM("a", "1") "," ITEM("b", "2") "," ITEM("c", "3") ","
	    ITEM("d", "4") "," ITEM("e", "5") "]}", 0);
	fakeapi_push(api, 200, NULL, "", 2000);
	inf = informer_new(c, &io, &h);
	assert_int_equal(informer_start(inf), 0);
	assert_int_equal(informer_wait_synced(inf, 3000), 0);
	assert_int_equal(lines(&l), 5);
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
		cmocka_unit_test(test_relist_diff_packed),
		cmocka_unit_test(test_packed_roundtrip),
		cmocka_unit_test(test_index),
		cmocka_unit_test(test_index_tree),
		cmocka_unit_test(test_compact),
		cmocka_unit_test(test_concurrent_stop),
		cmocka_unit_test(test_transform),
		cmocka_unit_test(test_synced_after_handlers),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
