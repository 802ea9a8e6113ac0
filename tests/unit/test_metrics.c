/* Unit tests: operator/metrics.c. */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "log.h"
#include "metrics.h"

/* Render m and compare with want exactly. */
static void
assert_render(struct metrics *m, const char *want)
{
	char *got = metrics_render(m);

	assert_non_null(got);
	assert_string_equal(got, want);
	free(got);
}

static void
test_counter_unlabelled(void **state)
{
	struct metrics *m = metrics_new();
	struct metric *c;

	(void)state;
	c = metrics_counter(m, "airlock_syncs_total", "Syncs done.", NULL);
	assert_non_null(c);
	/* Registered but untouched: the one series is there, at 0. */
	assert_render(m,
	    "# HELP airlock_syncs_total Syncs done.\n"
	    "# TYPE airlock_syncs_total counter\n"
	    "airlock_syncs_total 0\n");
	metric_inc(c, NULL);
	metric_inc(c, NULL);
	metric_add(c, NULL, 1);
	metric_add(c, NULL, -5);	/* counters never go down */
	metric_add(c, NULL, NAN);
	metric_set(c, NULL, 100);	/* set is for gauges */
	metric_inc(c, "x");		/* no label on this metric */
	metric_observe(c, 1);
	assert_render(m,
	    "# HELP airlock_syncs_total Syncs done.\n"
	    "# TYPE airlock_syncs_total counter\n"
	    "airlock_syncs_total 3\n");
	metric_add(c, NULL, 0.5);
	assert_render(m,
	    "# HELP airlock_syncs_total Syncs done.\n"
	    "# TYPE airlock_syncs_total counter\n"
	    "airlock_syncs_total 3.5\n");
	/* NULL metrics are no-ops, so failed registrations are harmless. */
	metric_inc(NULL, NULL);
	metric_set(NULL, NULL, 1);
	metric_observe(NULL, 1);
	metrics_free(m);
	metrics_free(NULL);
}

static void
test_counter_labelled(void **state)
{
	struct metrics *m = metrics_new();
	struct metric *c;

	(void)state;
	c = metrics_counter(m, "airlock_reconciles_total", "Reconciles.",
	    "result");
	assert_non_null(c);
	/* No value seen yet: only the header lines. */
	assert_render(m,
	    "# HELP airlock_reconciles_total Reconciles.\n"
	    "# TYPE airlock_reconciles_total counter\n");
	metric_inc(c, "ok");
	metric_inc(c, "error");
	metric_inc(c, "ok");
	metric_add(c, "error", 4);
	metric_inc(c, NULL);		/* label required: ignored */
	assert_render(m,
	    "# HELP airlock_reconciles_total Reconciles.\n"
	    "# TYPE airlock_reconciles_total counter\n"
	    "airlock_reconciles_total{result=\"ok\"} 2\n"
	    "airlock_reconciles_total{result=\"error\"} 5\n");
	metrics_free(m);
}

static void
test_counter_labels(void **state)
{
	static const char *const names[] = { "namespace", "runtime", "phase" };
	static const char *const bad[] = { "namespace", "run-time" };
	struct metrics *m = metrics_new();
	struct metric *c;
	char *logs = NULL;
	size_t loglen = 0;
	FILE *f = open_memstream(&logs, &loglen);

	(void)state;
	assert_null(metrics_counter_labels(m, "x_total", NULL, names, 1, 0));
	assert_null(metrics_counter_labels(m, "x_total", NULL, bad, 2, 0));
	assert_null(metrics_counter_labels(m, "x_total", NULL, names, 5, 0));
	c = metrics_counter_labels(m, "airlock_done_total", "Done.", names, 3, 2);
	assert_non_null(c);
	/* Again, the same: the same metric; other labels: refused. */
	assert_ptr_equal(metrics_counter_labels(m, "airlock_done_total", "Done.",
	    names, 3, 2), c);
	assert_null(metrics_counter_labels(m, "airlock_done_total", NULL, names, 2, 0));
	assert_null(metrics_counter(m, "airlock_done_total", NULL, "namespace"));
	metric_inc_labels(c, (const char *[]){ "a", "python", "Succeeded" }, 3);
	metric_inc_labels(c, (const char *[]){ "a", "python", "Succeeded" }, 3);
	metric_inc_labels(c, (const char *[]){ "b\"q", "bash", "Failed" }, 3);
	/* Ignored: a count that is not the metric's, a NULL, a control byte,
	 * one value through the one-label calls. */
	metric_inc_labels(c, (const char *[]){ "a", "python" }, 2);
	metric_inc_labels(c, (const char *[]){ "a", NULL, "x" }, 3);
	metric_inc_labels(c, (const char *[]){ "a\x1f" "b", "c", "d" }, 3);
	metric_inc(c, "a");
	metric_add(c, "a", 2);
	assert_non_null(f);
	log_set_stream(f);
	/* Past max_series (2): dropped, and said once. */
	metric_inc_labels(c, (const char *[]){ "c", "node", "TimedOut" }, 3);
	log_set_stream(NULL);
	fclose(f);
	assert_non_null(strstr(logs, "metric=airlock_done_total max=2"));
	free(logs);
	assert_render(m,
	    "# HELP airlock_done_total Done.\n"
	    "# TYPE airlock_done_total counter\n"
	    "airlock_done_total{namespace=\"a\",runtime=\"python\",phase=\"Succeeded\"} 2\n"
	    "airlock_done_total{namespace=\"b\\\"q\",runtime=\"bash\",phase=\"Failed\"} 1\n");
	metric_inc_labels(NULL, (const char *[]){ "a", "b" }, 2);
	metrics_free(m);
}

static void
test_gauge(void **state)
{
	struct metrics *m = metrics_new();
	struct metric *g, *q;

	(void)state;
	g = metrics_gauge(m, "airlock_sandboxes", NULL, NULL);
	q = metrics_gauge(m, "airlock_queue_depth", "Queue depth.", "queue");
	assert_non_null(g);
	assert_non_null(q);
	metric_set(g, NULL, 7);
	metric_add(g, NULL, -9);	/* gauges may go down */
	metric_inc(g, NULL);
	metric_set(q, "pods", 0.1);
	metric_set(q, "nodes", INFINITY);
	metric_set(q, "leases", -INFINITY);
	metric_set(q, "other", NAN);
	metric_observe(g, 3);		/* not a histogram: ignored */
	assert_render(m,
	    "# TYPE airlock_sandboxes gauge\n"
	    "airlock_sandboxes -1\n"
	    "# HELP airlock_queue_depth Queue depth.\n"
	    "# TYPE airlock_queue_depth gauge\n"
	    "airlock_queue_depth{queue=\"pods\"} 0.1\n"
	    "airlock_queue_depth{queue=\"nodes\"} +Inf\n"
	    "airlock_queue_depth{queue=\"leases\"} -Inf\n"
	    "airlock_queue_depth{queue=\"other\"} NaN\n");
	metrics_free(m);
}

static void
test_histogram(void **state)
{
	static const double bounds[] = { 0.25, 1, 5 };
	struct metrics *m = metrics_new();
	struct metric *h;

	(void)state;
	h = metrics_histogram(m, "airlock_sync_seconds", "Sync latency.",
	    bounds, 3);
	assert_non_null(h);
	assert_render(m,
	    "# HELP airlock_sync_seconds Sync latency.\n"
	    "# TYPE airlock_sync_seconds histogram\n"
	    "airlock_sync_seconds_bucket{le=\"0.25\"} 0\n"
	    "airlock_sync_seconds_bucket{le=\"1\"} 0\n"
	    "airlock_sync_seconds_bucket{le=\"5\"} 0\n"
	    "airlock_sync_seconds_bucket{le=\"+Inf\"} 0\n"
	    "airlock_sync_seconds_sum 0\n"
	    "airlock_sync_seconds_count 0\n");
	/* A value equal to a bound counts in that bound's bucket. */
	metric_observe(h, 0.25);
	metric_observe(h, 0.5);
	metric_observe(h, 1);
	metric_observe(h, 5);
	metric_observe(h, 7);
	metric_observe(h, -1);
	metric_inc(h, NULL);		/* not a counter: ignored */
	assert_render(m,
	    "# HELP airlock_sync_seconds Sync latency.\n"
	    "# TYPE airlock_sync_seconds histogram\n"
	    "airlock_sync_seconds_bucket{le=\"0.25\"} 2\n"
	    "airlock_sync_seconds_bucket{le=\"1\"} 4\n"
	    "airlock_sync_seconds_bucket{le=\"5\"} 5\n"
	    "airlock_sync_seconds_bucket{le=\"+Inf\"} 6\n"
	    "airlock_sync_seconds_sum 12.75\n"
	    "airlock_sync_seconds_count 6\n");
	/* No bounds at all: just the +Inf bucket. */
	h = metrics_histogram(m, "airlock_empty", NULL, NULL, 0);
	assert_non_null(h);
	metric_observe(h, 2);
	metrics_free(m);

	m = metrics_new();
	h = metrics_histogram(m, "x", NULL, NULL, 0);
	metric_observe(h, 1e300);
	assert_render(m,
	    "# TYPE x histogram\n"
	    "x_bucket{le=\"+Inf\"} 1\n"
	    "x_sum 1e+300\n"
	    "x_count 1\n");
	metrics_free(m);
}

static void
test_escaping(void **state)
{
	struct metrics *m = metrics_new();
	struct metric *c;

	(void)state;
	/* HELP escapes \ and newline but not quotes; label values all three. */
	c = metrics_counter(m, "esc", "a \"b\" c\\d\ne", "path");
	metric_inc(c, "C:\\dir \"x\"\nnext");
	metric_inc(c, "");
	assert_render(m,
	    "# HELP esc a \"b\" c\\\\d\\ne\n"
	    "# TYPE esc counter\n"
	    "esc{path=\"C:\\\\dir \\\"x\\\"\\nnext\"} 1\n"
	    "esc{path=\"\"} 1\n");
	metrics_free(m);
}

static void
test_bad_names(void **state)
{
	static const double up[] = { 1, 2 }, flat[] = { 1, 1 },
	    down[] = { 2, 1 }, nan[] = { NAN }, inf[] = { 1, INFINITY };
	struct metrics *m = metrics_new();
	struct metric *c;

	(void)state;
	assert_null(metrics_counter(m, "", NULL, NULL));
	assert_null(metrics_counter(m, NULL, NULL, NULL));
	assert_null(metrics_counter(m, "1abc", NULL, NULL));
	assert_null(metrics_counter(m, "a-b", NULL, NULL));
	assert_null(metrics_counter(m, "a b", NULL, NULL));
	assert_null(metrics_gauge(m, "caf\xc3\xa9", NULL, NULL));
	assert_null(metrics_counter(m, "ok", NULL, "a:b"));	/* no ':' in labels */
	assert_null(metrics_counter(m, "ok", NULL, "9x"));
	assert_null(metrics_counter(m, "ok", NULL, ""));
	assert_null(metrics_histogram(m, "h", NULL, flat, 2));
	assert_null(metrics_histogram(m, "h", NULL, down, 2));
	assert_null(metrics_histogram(m, "h", NULL, nan, 1));
	assert_null(metrics_histogram(m, "h", NULL, inf, 2));
	assert_null(metrics_histogram(m, "h", NULL, NULL, 1));
	assert_null(metrics_counter(NULL, "ok", NULL, NULL));

	/* Colons and underscores are fine; so is a leading one. */
	c = metrics_counter(m, "_ns:sub_total", "first", "_lbl9");
	assert_non_null(c);
	/* The same name again: same metric only if the shape matches. */
	assert_ptr_equal(metrics_counter(m, "_ns:sub_total", "second",
	    "_lbl9"), c);
	assert_null(metrics_gauge(m, "_ns:sub_total", NULL, "_lbl9"));
	assert_null(metrics_counter(m, "_ns:sub_total", NULL, NULL));
	assert_null(metrics_counter(m, "_ns:sub_total", NULL, "other"));
	assert_non_null(metrics_histogram(m, "h", NULL, up, 2));
	assert_non_null(metrics_histogram(m, "h", NULL, up, 2));
	assert_null(metrics_histogram(m, "h", NULL, up, 1));
	assert_null(metrics_counter(m, "h", NULL, NULL));
	assert_render(m,
	    "# HELP _ns:sub_total first\n"
	    "# TYPE _ns:sub_total counter\n"
	    "# TYPE h histogram\n"
	    "h_bucket{le=\"1\"} 0\n"
	    "h_bucket{le=\"2\"} 0\n"
	    "h_bucket{le=\"+Inf\"} 0\n"
	    "h_sum 0\n"
	    "h_count 0\n");
	metrics_free(m);
}

static size_t
count_substr(const char *s, const char *sub)
{
	size_t n = 0;

	while ((s = strstr(s, sub)) != NULL) {
		n++;
		s += strlen(sub);
	}
	return n;
}

static void
test_cardinality_cap(void **state)
{
	struct metrics *m = metrics_new();
	struct metric *c;
	char *logs = NULL, *out, val[16], line[64];
	size_t loglen = 0;
	FILE *f = open_memstream(&logs, &loglen);
	int i;

	(void)state;
	assert_non_null(f);
	log_set_stream(f);
	c = metrics_counter(m, "pods_total", NULL, "pod");
	for (i = 0; i < METRICS_MAX_LABEL_VALUES + 20; i++) {
		snprintf(val, sizeof(val), "p%d", i);
		metric_inc(c, val);
	}
	metric_inc(c, "p0");		/* existing values still count */
	metric_inc(c, "p99");
	metric_inc(c, "p100");		/* still dropped, not warned again */
	log_set_stream(NULL);
	fclose(f);

	assert_int_equal(count_substr(logs, "level=warn"), 1);
	assert_int_equal(count_substr(logs,
	    "msg=\"metric label cardinality cap hit\" metric=pods_total"), 1);
	free(logs);

	out = metrics_render(m);
	assert_non_null(out);
	assert_int_equal(count_substr(out, "pods_total{pod="),
	    METRICS_MAX_LABEL_VALUES);
	assert_non_null(strstr(out, "pods_total{pod=\"p0\"} 2\n"));
	assert_non_null(strstr(out, "pods_total{pod=\"p98\"} 1\n"));
	snprintf(line, sizeof(line), "pods_total{pod=\"p%d\"} 2\n",
	    METRICS_MAX_LABEL_VALUES - 1);
	assert_non_null(strstr(out, line));
	assert_null(strstr(out, "p100"));
	free(out);
	metrics_free(m);
}

#define NTHREADS	4
#define NINCS		100000

struct worker {
	struct metric	*plain;
	struct metric	*labelled;
	struct metric	*hist;
	struct metrics	*m;
};

static void *
worker_run(void *arg)
{
	struct worker *w = arg;
	int i;

	for (i = 0; i < NINCS; i++) {
		metric_inc(w->plain, NULL);
		metric_inc(w->labelled, (i & 1) ? "odd" : "even");
		metric_observe(w->hist, 1);
		if (i % 10000 == 0)
			free(metrics_render(w->m));	/* readers race writers */
	}
	return NULL;
}

static void
test_concurrent(void **state)
{
	static const double bounds[] = { 1 };
	struct metrics *m = metrics_new();
	struct worker w;
	pthread_t t[NTHREADS];
	int i;

	(void)state;
	w.m = m;
	w.plain = metrics_counter(m, "c", NULL, NULL);
	w.labelled = metrics_counter(m, "l", NULL, "k");
	w.hist = metrics_histogram(m, "h", NULL, bounds, 1);
	for (i = 0; i < NTHREADS; i++)
		assert_int_equal(pthread_create(&t[i], NULL, worker_run, &w), 0);
	for (i = 0; i < NTHREADS; i++)
		assert_int_equal(pthread_join(t[i], NULL), 0);
	assert_render(m,
	    "# TYPE c counter\n"
	    "c 400000\n"
	    "# TYPE l counter\n"
	    "l{k=\"even\"} 200000\n"
	    "l{k=\"odd\"} 200000\n"
	    "# TYPE h histogram\n"
	    "h_bucket{le=\"1\"} 400000\n"
	    "h_bucket{le=\"+Inf\"} 400000\n"
	    "h_sum 400000\n"
	    "h_count 400000\n");
	metrics_free(m);
}

static void
test_format_number(void **state)
{
	char b[METRICS_NUM_MAX];

	(void)state;
	assert_string_equal(metrics_format_number(b, 3), "3");
	assert_string_equal(metrics_format_number(b, 0), "0");
	assert_string_equal(metrics_format_number(b, -0.0), "0");
	assert_string_equal(metrics_format_number(b, -42), "-42");
	assert_string_equal(metrics_format_number(b, 123456789012.0),
	    "123456789012");
	assert_string_equal(metrics_format_number(b, 9007199254740991.0),
	    "9007199254740991");
	/* 2^53 and up: %g form, which may still print all the digits. */
	assert_string_equal(metrics_format_number(b, 9007199254740994.0),
	    "9007199254740994");
	assert_string_equal(metrics_format_number(b, 1e17), "1e+17");
	assert_string_equal(metrics_format_number(b, 1e20), "1e+20");
	assert_string_equal(metrics_format_number(b, 0.1), "0.1");
	assert_string_equal(metrics_format_number(b, 0.1 + 0.2),
	    "0.30000000000000004");
	assert_string_equal(metrics_format_number(b, 1.0 / 3),
	    "0.3333333333333333");
	assert_string_equal(metrics_format_number(b, -2.5e-7), "-2.5e-07");
	assert_string_equal(metrics_format_number(b, -1.7976931348623157e308),
	    "-1.7976931348623157e+308");
	assert_string_equal(metrics_format_number(b, 4.9406564584124654e-324),
	    "4.94065645841247e-324");
	assert_string_equal(metrics_format_number(b, INFINITY), "+Inf");
	assert_string_equal(metrics_format_number(b, -INFINITY), "-Inf");
	assert_string_equal(metrics_format_number(b, NAN), "NaN");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_counter_unlabelled),
		cmocka_unit_test(test_counter_labelled),
		cmocka_unit_test(test_counter_labels),
		cmocka_unit_test(test_gauge),
		cmocka_unit_test(test_histogram),
		cmocka_unit_test(test_escaping),
		cmocka_unit_test(test_bad_names),
		cmocka_unit_test(test_cardinality_cap),
		cmocka_unit_test(test_concurrent),
		cmocka_unit_test(test_format_number),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
