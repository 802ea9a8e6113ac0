#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "log.h"
#include "metrics.h"
#include "xmalloc.h"

enum metric_type {
	METRIC_COUNTER,
	METRIC_GAUGE,
	METRIC_HISTOGRAM,
};

static const char *const type_names[] = { "counter", "gauge", "histogram" };

/* Between the names, and the values, of a metric's several labels. */
#define LABEL_SEP	'\x1f'

/* One label value's sample; label_value is NULL for an unlabelled metric. */
struct metric_series {
	char	*label_value;
	double	 value;
};

/*
 * Counters and gauges use series (nseries <= METRICS_MAX_LABEL_VALUES; an
 * unlabelled metric has exactly one). Histograms use bounds and buckets:
 * buckets[i] counts observations in (bounds[i-1], bounds[i]], the last one
 * (index nbounds) those above every bound; rendering makes them cumulative.
 */
struct metric {
	struct metrics		*owner;
	struct metric		*next;
	enum metric_type	 type;
	char			*name;
	char			*help;
	/* Several labels: their names joined by LABEL_SEP, as are values. */
	char			*label_name;
	size_t			 nlabels;
	size_t			 max_series;
	struct metric_series	*series;
	size_t			 nseries;
	size_t			 aseries;
	int			 cap_warned;
	double			*bounds;
	size_t			 nbounds;
	uint64_t		*buckets;
	double			 sum;
	uint64_t		 count;
};

struct metrics {
	pthread_mutex_t	 lock;
	struct metric	*head;
	struct metric	**tailp;
};

struct metrics *
metrics_new(void)
{
	struct metrics *m = xcalloc(1, sizeof(*m));

	pthread_mutex_init(&m->lock, NULL);
	m->tailp = &m->head;
	return m;
}

static void
metric_free(struct metric *mt)
{
	size_t i;

	for (i = 0; i < mt->nseries; i++)
		free(mt->series[i].label_value);
	free(mt->series);
	free(mt->name);
	free(mt->help);
	free(mt->label_name);
	free(mt->bounds);
	free(mt->buckets);
	free(mt);
}

void
metrics_free(struct metrics *m)
{
	struct metric *mt, *next;

	if (m == NULL)
		return;
	for (mt = m->head; mt != NULL; mt = next) {
		next = mt->next;
		metric_free(mt);
	}
	pthread_mutex_destroy(&m->lock);
	free(m);
}

static int
valid_name(const char *s, int colon_ok)
{
	const char *p;

	if (s == NULL || *s == '\0' || (*s >= '0' && *s <= '9'))
		return 0;
	for (p = s; *p; p++) {
		if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		    (*p >= '0' && *p <= '9') || *p == '_' ||
		    (colon_ok && *p == ':'))
			continue;
		return 0;
	}
	return 1;
}

static int
same_str(const char *a, const char *b)
{
	if (a == NULL || b == NULL)
		return a == b;
	return strcmp(a, b) == 0;
}

/* Does an existing metric match a repeated registration? */
static int
metric_matches(const struct metric *mt, enum metric_type type,
    const char *label_name, const double *bounds, size_t nbounds)
{
	if (mt->type != type || !same_str(mt->label_name, label_name))
		return 0;
	if (type != METRIC_HISTOGRAM)
		return 1;
	return mt->nbounds == nbounds &&
	    (nbounds == 0 || memcmp(mt->bounds, bounds,
	    nbounds * sizeof(*bounds)) == 0);
}

/*
 * label_name: NULL, one name, or several LABEL_SEP apart, each checked by
 * the caller.
 */
static struct metric *
metrics_register(struct metrics *m, enum metric_type type, const char *name,
    const char *help, const char *label_name, const double *bounds,
    size_t nbounds, size_t max_series)
{
	struct metric *mt;
	size_t i;

	if (m == NULL || !valid_name(name, 1))
		return NULL;
	for (i = 0; i < nbounds; i++)
		if (!isfinite(bounds[i]) || (i > 0 && bounds[i] <= bounds[i - 1]))
			return NULL;

	pthread_mutex_lock(&m->lock);
	for (mt = m->head; mt != NULL; mt = mt->next)
		if (strcmp(mt->name, name) == 0)
			break;
	if (mt != NULL) {
		if (!metric_matches(mt, type, label_name, bounds, nbounds))
			mt = NULL;
		goto out;
	}
	mt = xcalloc(1, sizeof(*mt));
	mt->owner = m;
	mt->type = type;
	mt->name = xstrdup(name);
	mt->help = help ? xstrdup(help) : NULL;
	mt->label_name = label_name ? xstrdup(label_name) : NULL;
	for (i = 0; label_name && label_name[i]; i++)
		mt->nlabels += label_name[i] == LABEL_SEP;
	mt->nlabels += label_name != NULL;
	mt->max_series = max_series ? max_series : METRICS_MAX_LABEL_VALUES;
	if (type == METRIC_HISTOGRAM) {
		if (nbounds > 0) {
			mt->bounds = xmalloc(nbounds * sizeof(*bounds));
			memcpy(mt->bounds, bounds, nbounds * sizeof(*bounds));
		}
		mt->nbounds = nbounds;
		mt->buckets = xcalloc(nbounds + 1, sizeof(*mt->buckets));
	} else if (label_name == NULL) {
		mt->series = xcalloc(1, sizeof(*mt->series));
		mt->nseries = mt->aseries = 1;
	}
	*m->tailp = mt;
	m->tailp = &mt->next;
out:
	pthread_mutex_unlock(&m->lock);
	return mt;
}

struct metric *
metrics_counter(struct metrics *m, const char *name, const char *help,
    const char *label_name)
{
	if (label_name != NULL && !valid_name(label_name, 0))
		return NULL;
	return metrics_register(m, METRIC_COUNTER, name, help, label_name,
	    NULL, 0, 0);
}

struct metric *
metrics_gauge(struct metrics *m, const char *name, const char *help,
    const char *label_name)
{
	if (label_name != NULL && !valid_name(label_name, 0))
		return NULL;
	return metrics_register(m, METRIC_GAUGE, name, help, label_name,
	    NULL, 0, 0);
}

struct metric *
metrics_histogram(struct metrics *m, const char *name, const char *help,
    const double *bounds, size_t nbounds)
{
	if (nbounds > 0 && bounds == NULL)
		return NULL;
	return metrics_register(m, METRIC_HISTOGRAM, name, help, NULL,
	    bounds, nbounds, 0);
}

static void metric_update(struct metric *, const char *, double, int);

/* The n strings joined by LABEL_SEP (caller frees); NULL if one is NULL. */
static char *
join_labels(const char *const *v, size_t n)
{
	size_t len = 0, i;
	char *out, *p;

	for (i = 0; i < n; i++) {
		if (v[i] == NULL)
			return NULL;
		len += strlen(v[i]) + 1;
	}
	p = out = xmalloc(len);
	for (i = 0; i < n; i++) {
		size_t l = strlen(v[i]);

		memcpy(p, v[i], l);
		p += l;
		*p++ = i + 1 < n ? LABEL_SEP : '\0';
	}
	return out;
}

struct metric *
metrics_counter_labels(struct metrics *m, const char *name, const char *help,
    const char *const *label_names, size_t n, size_t max_series)
{
	struct metric *mt;
	char *joined;
	size_t i;

	if (n < 2 || n > METRICS_MAX_LABELS || label_names == NULL)
		return NULL;
	for (i = 0; i < n; i++)
		if (!valid_name(label_names[i], 0))
			return NULL;
	joined = join_labels(label_names, n);
	mt = metrics_register(m, METRIC_COUNTER, name, help, joined, NULL, 0,
	    max_series);
	free(joined);
	return mt;
}

void
metric_inc_labels(struct metric *c, const char *const *values, size_t n)
{
	char *joined;
	const char *p;
	size_t i;

	if (c == NULL || values == NULL || n < 2 || n != c->nlabels)
		return;
	for (i = 0; i < n; i++)
		for (p = values[i]; p && *p; p++)
			if ((unsigned char)*p < 0x20)
				return;
	if ((joined = join_labels(values, n)) == NULL)
		return;
	metric_update(c, joined, 1, 0);
	free(joined);
}

/*
 * The series for label_value, created if new. NULL when the call does not
 * fit the metric or the cardinality cap is hit. Called with the lock held.
 */
static struct metric_series *
series_get(struct metric *mt, const char *label_value)
{
	struct metric_series *s;
	size_t i;

	if (mt->label_name == NULL)
		return label_value == NULL ? &mt->series[0] : NULL;
	if (label_value == NULL)
		return NULL;
	for (i = 0; i < mt->nseries; i++)
		if (strcmp(mt->series[i].label_value, label_value) == 0)
			return &mt->series[i];
	if (mt->nseries >= mt->max_series) {
		if (!mt->cap_warned) {
			mt->cap_warned = 1;
			log_warn("metric label cardinality cap hit",
			    "metric=%s max=%zu", mt->name, mt->max_series);
		}
		return NULL;
	}
	if (mt->nseries == mt->aseries) {
		mt->aseries = mt->aseries ? mt->aseries * 2 : 4;
		mt->series = xrealloc(mt->series,
		    mt->aseries * sizeof(*mt->series));
	}
	s = &mt->series[mt->nseries++];
	s->label_value = xstrdup(label_value);
	s->value = 0;
	return s;
}

/* set: assign v rather than add it. */
static void
metric_update(struct metric *mt, const char *label_value, double v, int set)
{
	struct metric_series *s;

	if (mt == NULL || mt->type == METRIC_HISTOGRAM)
		return;
	if (set && mt->type != METRIC_GAUGE)
		return;
	if (mt->type == METRIC_COUNTER && !(v >= 0))
		return;
	pthread_mutex_lock(&mt->owner->lock);
	if ((s = series_get(mt, label_value)) != NULL)
		s->value = set ? v : s->value + v;
	pthread_mutex_unlock(&mt->owner->lock);
}

void
metric_inc(struct metric *c, const char *label_value)
{
	if (c != NULL && c->nlabels > 1)
		return;	/* metric_inc_labels' */
	metric_update(c, label_value, 1, 0);
}

void
metric_add(struct metric *c, const char *label_value, double v)
{
	if (c != NULL && c->nlabels > 1)
		return;	/* metric_inc_labels' */
	metric_update(c, label_value, v, 0);
}

void
metric_set(struct metric *g, const char *label_value, double v)
{
	if (g != NULL && g->nlabels > 1)
		return;	/* metric_inc_labels' */
	metric_update(g, label_value, v, 1);
}

void
metric_observe(struct metric *h, double v)
{
	size_t i;

	if (h == NULL || h->type != METRIC_HISTOGRAM)
		return;
	/* NaN compares false everywhere and so lands in +Inf, as in Go's client. */
	for (i = 0; i < h->nbounds; i++)
		if (v <= h->bounds[i])
			break;
	pthread_mutex_lock(&h->owner->lock);
	h->buckets[i]++;
	h->sum += v;
	h->count++;
	pthread_mutex_unlock(&h->owner->lock);
}

const char *
metrics_format_number(char out[METRICS_NUM_MAX], double v)
{
	int prec;

	if (isnan(v))
		return strcpy(out, "NaN");
	if (isinf(v))
		return strcpy(out, v > 0 ? "+Inf" : "-Inf");
	/* Below 2^53 every integral double is exact, so print it as one. */
	if (v == floor(v) && fabs(v) < 9007199254740992.0) {
		snprintf(out, METRICS_NUM_MAX, "%lld", (long long)v);
		return out;
	}
	for (prec = 15; prec < 17; prec++) {
		snprintf(out, METRICS_NUM_MAX, "%.*g", prec, v);
		if (strtod(out, NULL) == v)
			return out;
	}
	snprintf(out, METRICS_NUM_MAX, "%.17g", v);
	return out;
}

/*
 * Append s with the format's escapes: \\ and \n always, \" when quoted
 * (label values; HELP text leaves quotes alone).
 */
static int
put_escaped(struct buf *b, const char *s, int quoted)
{
	const char *p, *run = s;
	int rc = 0;

	for (p = s; *p; p++) {
		const char *esc = NULL;

		if (*p == '\\')
			esc = "\\\\";
		else if (*p == '\n')
			esc = "\\n";
		else if (*p == '"' && quoted)
			esc = "\\\"";
		if (esc == NULL)
			continue;
		rc |= buf_append(b, run, (size_t)(p - run));
		rc |= buf_append_str(b, esc);
		run = p + 1;
	}
	rc |= buf_append(b, run, (size_t)(p - run));
	return rc;
}

/* name[suffix][{label="value"}] number\n */
static int
put_sample(struct buf *b, const char *name, const char *suffix,
    const char *label, const char *value, double v)
{
	char num[METRICS_NUM_MAX];
	int rc = 0;

	rc |= buf_append_str(b, name);
	rc |= buf_append_str(b, suffix);
	if (label != NULL) {
		const char *ln = label, *lv = value;

		rc |= buf_append_str(b, "{");
		/* One name and value, or several, each LABEL_SEP apart. */
		for (;;) {
			const char *ne = strchr(ln, LABEL_SEP);
			const char *ve = strchr(lv, LABEL_SEP);
			size_t vl = ve ? (size_t)(ve - lv) : strlen(lv);
			char *one = xstrndup(lv, vl);

			rc |= buf_append(b, ln, ne ? (size_t)(ne - ln) : strlen(ln));
			rc |= buf_append_str(b, "=\"");
			rc |= put_escaped(b, one, 1);
			rc |= buf_append_str(b, "\"");
			free(one);
			if (ne == NULL || ve == NULL)
				break;
			rc |= buf_append_str(b, ",");
			ln = ne + 1;
			lv = ve + 1;
		}
		rc |= buf_append_str(b, "}");
	}
	rc |= buf_append_str(b, " ");
	rc |= buf_append_str(b, metrics_format_number(num, v));
	rc |= buf_append_str(b, "\n");
	return rc;
}

static int
put_metric(struct buf *b, const struct metric *mt)
{
	char num[METRICS_NUM_MAX];
	uint64_t cum = 0;
	size_t i;
	int rc = 0;

	if (mt->help != NULL) {
		rc |= buf_append_str(b, "# HELP ");
		rc |= buf_append_str(b, mt->name);
		rc |= buf_append_str(b, " ");
		rc |= put_escaped(b, mt->help, 0);
		rc |= buf_append_str(b, "\n");
	}
	rc |= buf_append_str(b, "# TYPE ");
	rc |= buf_append_str(b, mt->name);
	rc |= buf_append_str(b, " ");
	rc |= buf_append_str(b, type_names[mt->type]);
	rc |= buf_append_str(b, "\n");
	if (mt->type != METRIC_HISTOGRAM) {
		for (i = 0; i < mt->nseries; i++)
			rc |= put_sample(b, mt->name, "", mt->label_name,
			    mt->series[i].label_value, mt->series[i].value);
		return rc;
	}
	for (i = 0; i <= mt->nbounds; i++) {
		cum += mt->buckets[i];
		rc |= put_sample(b, mt->name, "_bucket", "le",
		    i < mt->nbounds ? metrics_format_number(num, mt->bounds[i]) :
		    "+Inf", (double)cum);
	}
	rc |= put_sample(b, mt->name, "_sum", NULL, NULL, mt->sum);
	rc |= put_sample(b, mt->name, "_count", NULL, NULL, (double)mt->count);
	return rc;
}

char *
metrics_render(struct metrics *m)
{
	struct metric *mt;
	struct buf b;
	int rc = 0;

	buf_init(&b, METRICS_RENDER_MAX);
	pthread_mutex_lock(&m->lock);
	for (mt = m->head; mt != NULL && rc == 0; mt = mt->next)
		rc = put_metric(&b, mt);
	pthread_mutex_unlock(&m->lock);
	if (rc != 0) {
		log_error("cannot render metrics", "max=%u",
		    (unsigned)METRICS_RENDER_MAX);
		buf_free(&b);
		return NULL;
	}
	return buf_detach(&b, NULL);
}
