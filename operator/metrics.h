/*
 * metrics.h - a Prometheus metric registry (text exposition format 0.0.4).
 *
 * A struct metrics holds counters, gauges and histograms. Counters and
 * gauges have no label, one, or several (metrics_counter_labels). metrics_render() writes them out for a /metrics endpoint
 * (httpd.h serves it):
 *
 *   # HELP airlock_reconciles_total Reconciles by result.
 *   # TYPE airlock_reconciles_total counter
 *   airlock_reconciles_total{result="ok"} 3
 *
 * Invariants: metrics render in registration order, the values of a label
 * in the order they were first seen. A metric without a label always has
 * its one series (starting at 0); a labelled one has a series per value,
 * at most METRICS_MAX_LABEL_VALUES of them, so a label fed from something
 * unbounded (a pod name) cannot make the registry grow without bound: new
 * values past the cap are dropped and logged once per metric.
 *
 * Thread-safe: one mutex per registry guards every metric in it.
 */
#ifndef AIRLOCK_METRICS_H
#define AIRLOCK_METRICS_H

#include <stddef.h>

#define METRICS_MAX_LABEL_VALUES	100
/* metrics_render() gives up (returns NULL) past this many bytes. */
#define METRICS_RENDER_MAX		(16u << 20)

struct metrics;
struct metric;

/* A new, empty registry. Caller frees with metrics_free(). */
struct metrics *metrics_new(void);

/* Free the registry and every metric in it. m may be NULL. */
void metrics_free(struct metrics *m);

/*
 * Register a metric. name must match [a-zA-Z_:][a-zA-Z0-9_:]*, label_name
 * [a-zA-Z_][a-zA-Z0-9_]* or be NULL for no label; help may be NULL (no
 * # HELP line). Strings are copied.
 *
 * Returns a borrowed pointer, valid until metrics_free(), or NULL for a bad
 * name or label name. Registering a name again returns the existing metric
 * when the type and label name (for histograms: the bounds) match, NULL
 * otherwise; the first help text stays.
 */
struct metric *metrics_counter(struct metrics *m, const char *name,
    const char *help, const char *label_name);
struct metric *metrics_gauge(struct metrics *m, const char *name,
    const char *help, const char *label_name);
/*
 * bounds: nbounds finite upper bounds, strictly ascending (copied); the
 * +Inf bucket is implicit, so nbounds may be 0. NULL if they are not.
 */
struct metric *metrics_histogram(struct metrics *m, const char *name,
    const char *help, const double *bounds, size_t nbounds);

/*
 * Update a metric. label_value must be NULL exactly when the metric has no
 * label; a call that breaks this, or that does not fit the metric's type,
 * is ignored. Every function accepts a NULL metric and does nothing, so a
 * failed registration needs no check at each call site.
 *
 * metric_inc and metric_add work on counters and gauges; for counters a v
 * that is negative or NaN is ignored. metric_set is for gauges only.
 */
void metric_inc(struct metric *c, const char *label_value);
void metric_add(struct metric *c, const char *label_value, double v);
void metric_set(struct metric *g, const char *label_value, double v);

/*
 * A counter with n (2..METRICS_MAX_LABELS) labels, updated by
 * metric_inc_labels with one value for each, in the names' order:
 *
 *   airlock_executions_finished_total{namespace="a",runtime="python",phase="Succeeded"} 3
 *
 * Its series are capped at max_series (0: METRICS_MAX_LABEL_VALUES), as
 * a one-label metric's values are. A value holding a control character
 * (below 0x20) is not counted.
 */
#define METRICS_MAX_LABELS	4
struct metric *metrics_counter_labels(struct metrics *m, const char *name,
    const char *help, const char *const *label_names, size_t n,
    size_t max_series);
void metric_inc_labels(struct metric *c, const char *const *values, size_t n);

/* Record v in a histogram: it counts in the first bucket with v <= bound. */
void metric_observe(struct metric *h, double v);

/*
 * Render every metric in the text format 0.0.4: # HELP / # TYPE lines,
 * label values escaped (\\ \" \n), histograms as cumulative
 * _bucket{le="..."} series, then _sum and _count. Numbers are integers
 * where exact ("3"), else the shortest %.15g..%.17g that reads back the
 * same, and +Inf, -Inf, NaN.
 *
 * Caller frees with free(). NULL only if the text would exceed
 * METRICS_RENDER_MAX (logged).
 */
char *metrics_render(struct metrics *m);

/*
 * Format v as metrics_render() does into out (at least 32 bytes), and
 * return out.
 */
#define METRICS_NUM_MAX 32
const char *metrics_format_number(char out[METRICS_NUM_MAX], double v);

#endif
