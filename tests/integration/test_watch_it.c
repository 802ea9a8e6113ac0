/*
 * Integration: operator/watch.c and operator/informer.c against the real
 * kube-apiserver and etcd: event order, 410 after compaction, missed
 * deletes found by the relist.
 *
 * The 410 tests watch core/v1 Events. kube-apiserver keeps a watch cache
 * for most resources and answers a resumed watch from the cache's own
 * history (at least 75 s of it), whatever etcd compacted; Events are not
 * cached by default, so their watches reach etcd, and a compacted
 * resourceVersion comes back as the in-band ERROR 410 a real informer
 * meets after a long disconnect. (See tests/cluster/README.md.)
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "client.h"
#include "informer.h"
#include "itutil.h"
#include "watch.h"

#define MAXLOG 64

/* What the handlers saw, as "add a", "update a 2", "delete a", "gone b". */
struct log {
	pthread_mutex_t	 lock;
	char		 line[MAXLOG][80];
	int		 n;
	int		 resyncs;
};

static void logf_(struct log *l, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
logf_(struct log *l, const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&l->lock);
	va_start(ap, fmt);
	if (l->n < MAXLOG)
		vsnprintf(l->line[l->n], sizeof(l->line[0]), fmt, ap);
	va_end(ap);
	l->n++;
	pthread_mutex_unlock(&l->lock);
}

/* A ConfigMap's data.k, or an Event's message: the value tests change. */
static const char *
val(json_t *o)
{
	json_t *d = json_object_get(o, "data");

	return json_string_value(d ? json_object_get(d, "k") : json_object_get(o, "message"));
}

static void
on_add(void *arg, json_t *o)
{
	logf_(arg, "add %s %s", k8s_obj_name(o), val(o));
}

static void
on_update(void *arg, json_t *old, json_t *cur)
{
	struct log *l = arg;

	if (old == cur) {
		pthread_mutex_lock(&l->lock);
		l->resyncs++;
		pthread_mutex_unlock(&l->lock);
		return;
	}
	logf_(arg, "update %s %s", k8s_obj_name(cur), val(cur));
}

static void
on_delete(void *arg, json_t *o, int unknown)
{
	logf_(arg, "%s %s %s", unknown ? "gone" : "delete", k8s_obj_name(o), val(o));
}

/* Wait until the log holds n lines. */
static void
wait_lines(struct log *l, int n)
{
	for (long end = it_mono_ms() + 10000; it_mono_ms() < end; it_sleep_ms(10)) {
		pthread_mutex_lock(&l->lock);
		int have = l->n;
		pthread_mutex_unlock(&l->lock);
		if (have >= n)
			return;
	}
	fail_msg("handlers saw %d events, expected %d", l->n, n);
}

static void
update_obj(struct k8s_client *c, const struct k8s_resource *res, const char *ns,
    const char *name, const char *v)
{
	struct k8s_patch_opts merge = { .type = K8S_PATCH_MERGE };
	struct k8s_error err;
	json_t *p = res == &k8s_res_events ? json_pack("{s:s}", "message", v) :
	    json_pack("{s:{s:s}}", "data", "k", v);

	if (k8s_patch(c, res, ns, name, &merge, p, NULL, &err) != 0)
		fail_msg("patch %s: %s", name, err.message);
	json_decref(p);
}

static void
delete_obj(struct k8s_client *c, const struct k8s_resource *res, const char *ns,
    const char *name)
{
	struct k8s_error err;

	if (k8s_delete(c, res, ns, name, NULL, NULL, &err) != 0)
		fail_msg("delete %s: %s", name, err.message);
}

static void
update_cm(struct k8s_client *c, const char *ns, const char *name, const char *v)
{
	update_obj(c, &k8s_res_configmaps, ns, name, v);
}

static void
delete_cm(struct k8s_client *c, const char *ns, const char *name)
{
	delete_obj(c, &k8s_res_configmaps, ns, name);
}

/* A core/v1 Event about nothing in particular, with message v. */
static void
event(struct k8s_client *c, const char *ns, const char *name, const char *v)
{
	struct k8s_error err;
	json_t *e = json_pack("{s:s, s:s, s:{s:s}, s:{s:s, s:s, s:s}, s:s, s:s, s:s}",
	    "apiVersion", "v1", "kind", "Event", "metadata", "name", name,
	    "involvedObject", "kind", "ConfigMap", "namespace", ns, "name", "x",
	    "reason", "Test", "message", v, "type", "Normal");

	if (k8s_create(c, &k8s_res_events, ns, e, NULL, &err) != 0)
		fail_msg("create event %s: %s", name, err.message);
	json_decref(e);
}

static void
test_informer_sees_changes_in_order(void **state)
{
	struct k8s_config *cfg;
	struct k8s_client *c = it_client(0, &cfg);
	char *ns = it_namespace_new(c, "it-watch");
	struct log l = { .lock = PTHREAD_MUTEX_INITIALIZER };
	struct informer_opts io = { .res = &k8s_res_configmaps, .page_size = 2 };
	struct informer_handlers h = { on_add, on_update, on_delete, &l };
	struct informer *inf;
	json_t *got;

	(void)state;
	io.ns = ns;
	free(it_configmap(c, ns, "pre1", "p1"));
	free(it_configmap(c, ns, "pre2", "p2"));
	free(it_configmap(c, ns, "pre3", "p3"));
	inf = informer_new(c, &io, &h);
	assert_int_equal(informer_start(inf), 0);
	assert_int_equal(informer_wait_synced(inf, 10000), 0);
	assert_int_equal(informer_len(inf), 3);
	wait_lines(&l, 3);

	free(it_configmap(c, ns, "a", "1"));
	update_cm(c, ns, "a", "2");
	update_cm(c, ns, "a", "3");
	delete_cm(c, ns, "a");
	free(it_configmap(c, ns, "b", "1"));
	wait_lines(&l, 8);

	/* The initial list (paged by 2) in name order, then the watch. */
	const char *want[] = { "add pre1 p1", "add pre2 p2", "add pre3 p3",
	    "add a 1", "update a 2", "update a 3", "delete a 3", "add b 1" };
	assert_int_equal(l.n, 8);
	for (size_t i = 0; i < 8; i++)
		assert_string_equal(l.line[i], want[i]);
	got = informer_get(inf, ns, "b");
	assert_non_null(got);
	assert_string_equal(val(got), "1");
	json_decref(got);
	assert_null(informer_get(inf, ns, "a"));
	assert_int_equal(informer_len(inf), 4);

	informer_free(inf);
	it_namespace_delete(c, ns);
	free(ns);
	it_client_free(c, cfg);
}

/* A raw watch from a compacted resourceVersion is told 410 and relists. */
struct raw {
	struct k8s_client	*c;
	const char		*ns;
	struct watch		*w;
	char			 seen[16][64];
	int			 n, relists;
	char			*list_rv;
};

static int
raw_relist(void *arg, char **rv, struct k8s_error *err)
{
	struct raw *r = arg;
	json_t *items;
	int rc;

	r->relists++;
	rc = k8s_list_all(r->c, &k8s_res_events, r->ns, NULL, &items, rv, err);
	if (rc == 0) {
		snprintf(r->seen[r->n++ % 16], 64, "relist %zu", json_array_size(items));
		json_decref(items);
	}
	return rc;
}

static int
raw_event(void *arg, const struct watch_event *ev)
{
	struct raw *r = arg;
	static const char *const names[] = { "ADDED", "MODIFIED", "DELETED" };

	snprintf(r->seen[r->n++ % 16], 64, "%s %s", names[ev->type], k8s_obj_name(ev->object));
	if (ev->type == WATCH_ADDED && strcmp(k8s_obj_name(ev->object), "after") == 0)
		watch_stop(r->w);
	return 0;
}

static void *
create_after(void *arg)
{
	struct raw *r = arg;

	it_sleep_ms(1500);
	event(r->c, r->ns, "after", "x");
	return NULL;
}

static void
test_watch_410_after_compaction(void **state)
{
	struct k8s_config *cfg;
	struct k8s_client *c = it_client(0, &cfg);
	char *ns = it_namespace_new(c, "it-gone");
	struct raw r = { .c = c, .ns = ns };
	struct watch_opts wo = { .res = &k8s_res_events, .timeout_seconds = 30 };
	struct watch_handlers wh = { raw_relist, raw_event, NULL, &r };
	struct watch_stats st;
	struct k8s_error err;
	json_t *items;
	char *old_rv;
	pthread_t th;

	(void)state;
	wo.ns = ns;
	event(c, ns, "first", "x");
	assert_int_equal(k8s_list_all(c, &k8s_res_events, ns, NULL, &items, &old_rv, &err), 0);
	json_decref(items);
	for (int i = 0; i < 5; i++) {
		char name[32];

		snprintf(name, sizeof(name), "churn%d", i);
		event(c, ns, name, "x");
		delete_obj(c, &k8s_res_events, ns, name);
	}
	it_etcd_compact();

	r.w = watch_new(c, &wo, &wh);
	pthread_create(&th, NULL, create_after, &r);
	assert_int_equal(watch_run(r.w, old_rv), K8S_ECANCELED);
	pthread_join(th, NULL);
	watch_get_stats(r.w, &st);
	/* The old version was refused, one relist followed, then events. */
	assert_int_equal(st.expired, 1);
	assert_int_equal(r.relists, 1);
	assert_int_equal(r.n, 2);
	assert_string_equal(r.seen[0], "relist 1");
	assert_string_equal(r.seen[1], "ADDED after");
	watch_free(r.w);
	free(old_rv);
	it_namespace_delete(c, ns);
	free(ns);
	it_client_free(c, cfg);
}

static void
test_informer_restart_detects_missed_deletes(void **state)
{
	struct k8s_config *cfg;
	struct k8s_client *c = it_client(0, &cfg);
	char *ns = it_namespace_new(c, "it-relist");
	struct log l = { .lock = PTHREAD_MUTEX_INITIALIZER };
	struct informer_opts io = { .res = &k8s_res_events };
	struct informer_handlers h = { on_add, on_update, on_delete, &l };
	struct watch_stats st;
	struct informer *inf;

	(void)state;
	io.ns = ns;
	event(c, ns, "keep", "1");
	event(c, ns, "doomed", "1");
	event(c, ns, "changed", "1");
	inf = informer_new(c, &io, &h);
	assert_int_equal(informer_start(inf), 0);
	assert_int_equal(informer_wait_synced(inf, 10000), 0);
	wait_lines(&l, 3);
	informer_stop(inf);

	/* While it is down: a delete, a change, a create; then compaction. */
	delete_obj(c, &k8s_res_events, ns, "doomed");
	update_obj(c, &k8s_res_events, ns, "changed", "2");
	event(c, ns, "new", "1");
	it_etcd_compact();

	assert_int_equal(informer_start(inf), 0);
	wait_lines(&l, 6);
	it_sleep_ms(200);	/* nothing more may arrive */
	assert_int_equal(l.n, 6);
	/* The relist reports the difference: order is by cache key. */
	assert_string_equal(l.line[3], "update changed 2");
	assert_string_equal(l.line[4], "add new 1");
	assert_string_equal(l.line[5], "gone doomed 1");
	informer_get_stats(inf, &st);
	assert_int_equal(st.expired, 1);
	assert_int_equal(st.relists, 2);
	assert_int_equal(informer_len(inf), 3);
	informer_free(inf);
	it_namespace_delete(c, ns);
	free(ns);
	it_client_free(c, cfg);
}

static void
test_informer_resync(void **state)
{
	struct k8s_config *cfg;
	struct k8s_client *c = it_client(0, &cfg);
	char *ns = it_namespace_new(c, "it-resync");
	struct log l = { .lock = PTHREAD_MUTEX_INITIALIZER };
	struct informer_opts io = { .res = &k8s_res_configmaps, .resync_ms = 300 };
	struct informer_handlers h = { on_add, on_update, on_delete, &l };
	struct informer *inf;
	int r;

	(void)state;
	io.ns = ns;
	free(it_configmap(c, ns, "x", "1"));
	free(it_configmap(c, ns, "y", "1"));
	inf = informer_new(c, &io, &h);
	assert_int_equal(informer_start(inf), 0);
	assert_int_equal(informer_wait_synced(inf, 10000), 0);
	it_sleep_ms(1000);
	informer_stop(inf);
	pthread_mutex_lock(&l.lock);
	r = l.resyncs;
	pthread_mutex_unlock(&l.lock);
	/* Two objects, every 300 ms over ~1 s: 2-4 rounds. */
	assert_true(r >= 4);
	assert_true(r <= 8);
	assert_int_equal(r % 2, 0);
	assert_int_equal(l.n, 2);
	informer_free(inf);
	it_namespace_delete(c, ns);
	free(ns);
	it_client_free(c, cfg);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_informer_sees_changes_in_order),
		cmocka_unit_test(test_watch_410_after_compaction),
		cmocka_unit_test(test_informer_restart_detects_missed_deletes),
		cmocka_unit_test(test_informer_resync),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
