/*
 * egresslog.c - see egresslog.h.
 *
 * The table is open addressing with linear probing, a power of two of
 * slots at most half full, grown by doubling up to what max entries need;
 * an entry is removed by shifting the ones after it back (no tombstones),
 * so a table that sees many executions come and go stays as fast as a
 * fresh one.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "egresslog.h"
#include "xmalloc.h"

struct entry {
	char			uid[EGRESSLOG_UID_MAX + 1];	/* "": free */
	struct egress_count	c;
	long long		ended;		/* mono ms; 0: not ended yet */
	int			written;	/* its counts were written */
};

struct egresslog {
	struct entry	*slots;
	size_t		 nslots;	/* a power of two */
	size_t		 n, max;
};

static const struct {
	const char	*name;
	int		 loss;
} results[] = {
#define EGRESSLOG_ROW(e, name, loss)	[e] = { name, loss },
	EGRESSLOG_RESULTS(EGRESSLOG_ROW)
#undef EGRESSLOG_ROW
};

const char *
egresslog_result_name(enum egresslog_result r)
{
	return (unsigned)r < EGRESSLOG_NRESULTS ? results[r].name : "?";
}

int
egresslog_result_loss(enum egresslog_result r)
{
	return (unsigned)r < EGRESSLOG_NRESULTS ? results[r].loss : 1;
}

#define MIN_SLOTS	64

struct egresslog *
egresslog_new(size_t max)
{
	struct egresslog *t = xcalloc(1, sizeof(*t));

	t->max = max ? max : EGRESSLOG_TABLE_MAX;
	t->nslots = MIN_SLOTS;
	t->slots = xcalloc(t->nslots, sizeof(*t->slots));
	return t;
}

void
egresslog_free(struct egresslog *t)
{
	if (t == NULL)
		return;
	free(t->slots);
	free(t);
}

size_t
egresslog_len(const struct egresslog *t)
{
	return t->n;
}

void
egresslog_clear(struct egresslog *t)
{
	free(t->slots);
	t->nslots = MIN_SLOTS;
	t->slots = xcalloc(t->nslots, sizeof(*t->slots));
	t->n = 0;
}

/* FNV-1a. */
static size_t
hash(const char *s)
{
	uint64_t h = 14695981039346656037ULL;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	return (size_t)h;
}

/* uid's slot, or the free slot where it would go. */
static size_t
find(const struct egresslog *t, const char *uid)
{
	size_t i = hash(uid) & (t->nslots - 1);

	while (t->slots[i].uid[0] && strcmp(t->slots[i].uid, uid) != 0)
		i = (i + 1) & (t->nslots - 1);
	return i;
}

static void
grow(struct egresslog *t)
{
	struct entry *old = t->slots;
	size_t nold = t->nslots;

	t->nslots *= 2;
	t->slots = xcalloc(t->nslots, sizeof(*t->slots));
	for (size_t i = 0; i < nold; i++)
		if (old[i].uid[0])
			t->slots[find(t, old[i].uid)] = old[i];
	free(old);
}

/* uid's entry, made if need be; NULL when the table is full. */
static struct entry *
get_or_make(struct egresslog *t, const char *uid)
{
	size_t i = find(t, uid);

	if (t->slots[i].uid[0])
		return &t->slots[i];
	if (t->n >= t->max)
		return NULL;
	if (2 * (t->n + 1) > t->nslots) {
		grow(t);
		i = find(t, uid);
	}
	memset(&t->slots[i], 0, sizeof(t->slots[i]));
	strcpy(t->slots[i].uid, uid);
	t->n++;
	return &t->slots[i];
}

void
egresslog_forget(struct egresslog *t, const char *uid)
{
	size_t mask = t->nslots - 1, i, j;

	if (uid == NULL || strlen(uid) > EGRESSLOG_UID_MAX)
		return;
	i = find(t, uid);
	if (!t->slots[i].uid[0])
		return;
	t->slots[i].uid[0] = '\0';
	t->n--;
	/* Shift back each later entry of the run that may probe past i. */
	for (j = (i + 1) & mask; t->slots[j].uid[0]; j = (j + 1) & mask) {
		size_t home = hash(t->slots[j].uid) & mask;

		/* j's home is cyclically in (i, j]: it stays. */
		if (i <= j ? (i < home && home <= j) : (i < home || home <= j))
			continue;
		t->slots[i] = t->slots[j];
		t->slots[j].uid[0] = '\0';
		i = j;
	}
}

int
egresslog_get(const struct egresslog *t, const char *uid,
    struct egress_count *c)
{
	size_t i;

	memset(c, 0, sizeof(*c));
	if (uid == NULL || strlen(uid) > EGRESSLOG_UID_MAX)
		return 0;
	i = find(t, uid);
	if (!t->slots[i].uid[0])
		return 0;
	*c = t->slots[i].c;
	return 1;
}

int
egresslog_ended(struct egresslog *t, const char *uid, long long now_ms,
    long long *ended)
{
	struct entry *e;

	if (uid == NULL || !uid[0] || strlen(uid) > EGRESSLOG_UID_MAX ||
	    (e = get_or_make(t, uid)) == NULL)
		return -1;
	if (e->ended == 0)
		e->ended = now_ms > 0 ? now_ms : 1;
	*ended = e->ended;
	return e->written;
}

void
egresslog_written(struct egresslog *t, const char *uid)
{
	struct entry *e;

	if (uid != NULL && uid[0] && strlen(uid) <= EGRESSLOG_UID_MAX &&
	    (e = get_or_make(t, uid)) != NULL)
		e->written = 1;
}

/* A byte count of a record: a non-negative integer, or null (0). */
static int
bytes(json_t *v, long long *out)
{
	if (json_is_null(v) || v == NULL) {
		*out = 0;
		return 0;
	}
	/* Squid's counts are 18 digits at most (accesslog.c): more is no record. */
	if (!json_is_integer(v) || json_integer_value(v) < 0 ||
	    json_integer_value(v) > EGRESSLOG_BYTES_MAX)
		return -1;
	*out = (long long)json_integer_value(v);
	return 0;
}

/* Add what the record rec (a CodeExecutionEgress) says to c. */
static int
tally(json_t *rec, struct egress_count *c)
{
	const char *d = json_string_value(json_object_get(rec, "decision"));
	long long out, in;

	if (d == NULL || bytes(json_object_get(rec, "bytesOut"), &out) != 0 ||
	    bytes(json_object_get(rec, "bytesIn"), &in) != 0)
		return -1;
	if (strcmp(d, "refused") == 0) {
		c->refused++;
	} else if (strcmp(d, "allowed") == 0) {
		c->allowed++;
		c->bytes_out += out;
		c->bytes_in += in;
	} else
		return -1;
	return 0;
}

enum egresslog_result
egresslog_count(struct egresslog *t, const char *rec, size_t len,
    egresslog_known_fn known, void *arg)
{
	enum egresslog_result r = EGRESSLOG_MALFORMED;
	struct egress_count c = { 0 };
	const char *ns, *name, *uid, *kind;
	struct entry *e;
	json_t *o;
	size_t i;

	for (i = 0; i < len && (rec[i] == ' ' || rec[i] == '\t'); i++)
		;
	if (i == len || rec[i] != '{')
		return EGRESSLOG_OTHER;
	if ((o = json_loadb(rec, len, JSON_REJECT_DUPLICATES, NULL)) == NULL)
		return EGRESSLOG_MALFORMED;
	kind = json_string_value(json_object_get(o, "kind"));
	uid = json_string_value(json_object_get(o, "uid"));
	ns = json_string_value(json_object_get(o, "namespace"));
	name = json_string_value(json_object_get(o, "name"));
	if (kind == NULL || strcmp(kind, "CodeExecutionEgress") != 0)
		r = EGRESSLOG_OTHER;
	else if (tally(o, &c) != 0)
		r = EGRESSLOG_MALFORMED;
	else if (json_is_null(json_object_get(o, "uid")))
		r = EGRESSLOG_NO_EXECUTION;
	else if (uid == NULL || ns == NULL || name == NULL)
		r = EGRESSLOG_MALFORMED;
	else if (!uid[0] || strlen(uid) > EGRESSLOG_UID_MAX ||
	    !known(arg, ns, name, uid))
		r = EGRESSLOG_UNKNOWN;
	else if ((e = get_or_make(t, uid)) == NULL)
		r = EGRESSLOG_FULL;
	else {
		e->c.refused += c.refused;
		e->c.allowed += c.allowed;
		/* Saturating: a sum never wraps to a negative the CRD refuses. */
		e->c.bytes_out = e->c.bytes_out > EGRESSLOG_BYTES_MAX - c.bytes_out ?
		    EGRESSLOG_BYTES_MAX : e->c.bytes_out + c.bytes_out;
		e->c.bytes_in = e->c.bytes_in > EGRESSLOG_BYTES_MAX - c.bytes_in ?
		    EGRESSLOG_BYTES_MAX : e->c.bytes_in + c.bytes_in;
		r = EGRESSLOG_COUNTED;
	}
	json_decref(o);
	return r;
}

void
egresslog_pos_resume(struct egresslog_pos *pos)
{
	pos->again = 0;
	pos->replay = pos->ns != 0;
}

/* n digits at s as a number, or -1. */
static long
digits(const char *s, int n)
{
	long v = 0;

	for (int i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	return v;
}

/* "±HH:MM" at s: its seconds east of UTC, or 0 for "Z"; the length, or -1. */
static int
zone(const char *s, size_t left, long *off)
{
	long h, m;

	*off = 0;
	if (left >= 1 && s[0] == 'Z')
		return 1;
	if (left < 6 || (s[0] != '+' && s[0] != '-') || s[3] != ':' ||
	    (h = digits(s + 1, 2)) < 0 || (m = digits(s + 4, 2)) < 0 ||
	    h > 23 || m > 59)
		return -1;
	*off = (s[0] == '+' ? 1 : -1) * (h * 3600 + m * 60);
	return 6;
}

int
egresslog_split_time(const char *s, size_t len, long long *ns, size_t *rest)
{
	long f[6], frac = 0, off;
	struct tm tm = { 0 };
	size_t i = 19;
	int nd = 0, z;
	time_t secs;

	if (len < 21 || s[4] != '-' || s[7] != '-' || s[10] != 'T' ||
	    s[13] != ':' || s[16] != ':')
		return -1;
	f[0] = digits(s, 4), f[1] = digits(s + 5, 2), f[2] = digits(s + 8, 2);
	f[3] = digits(s + 11, 2), f[4] = digits(s + 14, 2);
	f[5] = digits(s + 17, 2);
	for (int k = 0; k < 6; k++)
		if (f[k] < 0)
			return -1;
	if (f[0] < 1970 || f[1] < 1 || f[1] > 12 || f[2] < 1 || f[2] > 31 ||
	    f[3] > 23 || f[4] > 59 || f[5] > 60)
		return -1;
	if (s[i] == '.') {
		for (i++; i < len && s[i] >= '0' && s[i] <= '9'; i++, nd++)
			if (nd < 9)
				frac = frac * 10 + (s[i] - '0');
		if (nd == 0 || nd > 9)
			return -1;
		for (; nd < 9; nd++)
			frac *= 10;
	}
	if ((z = zone(s + i, len - i, &off)) < 0)
		return -1;
	i += (size_t)z;
	if (i >= len || s[i] != ' ')
		return -1;
	tm.tm_year = (int)f[0] - 1900, tm.tm_mon = (int)f[1] - 1;
	tm.tm_mday = (int)f[2], tm.tm_hour = (int)f[3];
	tm.tm_min = (int)f[4], tm.tm_sec = (int)f[5];
	if ((secs = timegm(&tm)) == (time_t)-1)
		return -1;
	*ns = ((long long)secs - off) * 1000000000LL + frac;
	*rest = i + 1;
	return 0;
}

enum egresslog_result
egresslog_line(struct egresslog *t, struct egresslog_pos *pos,
    const char *line, size_t len, int too_long, egresslog_known_fn known,
    void *arg)
{
	long long ns;
	size_t rest;

	if (egresslog_split_time(line, len, &ns, &rest) != 0)
		return too_long ? EGRESSLOG_TOO_LONG : EGRESSLOG_MALFORMED;
	if (pos->replay) {
		if (ns < pos->ns || (ns == pos->ns && pos->again < pos->same)) {
			pos->again += ns == pos->ns;
			return EGRESSLOG_SEEN;
		}
		pos->replay = 0;	/* past what it gave before: all new */
	}
	if (ns > pos->ns) {
		pos->ns = ns;
		pos->same = 1;
	} else if (ns == pos->ns) {
		pos->same++;
	}
	/* Else the node's clock went back: pos stays at the latest time. */
	if (too_long)
		return EGRESSLOG_TOO_LONG;
	return egresslog_count(t, line + rest, len - rest, known, arg);
}
