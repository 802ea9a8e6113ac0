/*
 * crilog.c - an incremental parser for CRI container log files.
 *
 * Records are cut at LF. A record that arrives whole inside one chunk is
 * parsed in place; only a record that straddles chunks is copied into the
 * record buffer, which is capped at max_record, so a flood costs one memchr
 * and a header parse per record and never more memory. Each stream's
 * content then runs through a WHATWG-style UTF-8 decoder whose state lives
 * with the stream, and only whole characters reach the kept text. Once a
 * stream's text is full its content is only counted, not decoded.
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "buf.h"
#include "crilog.h"
#include "xmalloc.h"

#define NS_PER_SEC	INT64_C(1000000000)

static const unsigned char replacement[3] = { 0xEF, 0xBF, 0xBD };

/*
 * A stream and its private state. pub comes first so that the pointer
 * handed out by crilog_stdout() converts back to its side.
 * Invariants: text.len <= cap; text holds whole characters only; seen > 0
 * exactly when a multi-byte character is in progress, seq[0..seen) holding
 * its bytes so far and lo..hi the range its next byte must fall in.
 */
struct side {
	struct crilog_stream pub;
	struct crilog	*l;		/* its parser: the budget */
	struct buf	 text;		/* max = cap */
	int		 full;		/* a character was dropped: keep nothing more */
	int		 has_records;
	unsigned char	 seq[4];
	unsigned	 seen;		/* bytes of seq[] filled */
	unsigned	 need;		/* total length of the character in progress */
	unsigned char	 lo, hi;
};

/*
 * Files out (crilog_out_frame): the frame images/runner/warm.c writes on
 * stdout after the program's own output. state: scanning for the opening
 * marker (matched: bytes of it matched so far), reading the length, the
 * body, or the closing marker.
 */
enum frame_state { FR_OFF, FR_SCAN, FR_LEN, FR_BODY, FR_END, FR_DONE };

struct frame {
	enum frame_state state;
	char		 open[96], close[96];	/* the two markers */
	size_t		 open_len, close_len, matched;
	uint64_t	 want, got, bytes;
	int		 status;		/* CRILOG_FRAME_* */
	struct buf	 body;			/* max = the caller's */
};

struct crilog {
	struct side	 out, err;
	struct frame	 fr;
	struct buf	 line;		/* a record split across feeds; max = max_record */
	size_t		 max_record;
	uint64_t	 bad;
	int		 skipping;	/* inside an oversized record, already counted */
	int		 finished;
	struct crilog_budget *bud;	/* NULL: none */
	int		 starved;	/* the budget refused a growth */
};

/*
 * Invariants: used <= limit; peak >= used. Each buffer's first floor
 * bytes are not taken from it (charge()).
 */
struct crilog_budget {
	size_t		 limit;
	size_t		 floor;
	atomic_size_t	 used;
	atomic_size_t	 peak;
};

struct crilog_budget *
crilog_budget_new(size_t limit)
{
	return crilog_budget_new_floor(limit, 0);
}

struct crilog_budget *
crilog_budget_new_floor(size_t limit, size_t floor)
{
	struct crilog_budget *b = xcalloc(1, sizeof(*b));

	b->limit = limit;
	b->floor = floor;
	atomic_init(&b->used, 0);
	atomic_init(&b->peak, 0);
	return b;
}

void
crilog_budget_free(struct crilog_budget *b)
{
	free(b);
}

size_t
crilog_budget_used(const struct crilog_budget *b)
{
	return atomic_load(&((struct crilog_budget *)b)->used);
}

size_t
crilog_budget_peak(const struct crilog_budget *b)
{
	return atomic_load(&((struct crilog_budget *)b)->peak);
}

size_t
crilog_budget_limit(const struct crilog_budget *b)
{
	return b->limit;
}

/* What a buffer of alloc bytes takes from b: all but its floor. */
static size_t
charge(const struct crilog_budget *b, size_t alloc)
{
	return alloc > b->floor ? alloc - b->floor : 0;
}

/* Take n bytes of b: 0, or -1 (nothing taken) when they do not fit. */
static int
budget_take(struct crilog_budget *b, size_t n)
{
	size_t used = atomic_load(&b->used), peak;

	do {
		if (n > b->limit - used)
			return -1;
	} while (!atomic_compare_exchange_weak(&b->used, &used, used + n));
	peak = atomic_load(&b->peak);
	while (used + n > peak &&
	    !atomic_compare_exchange_weak(&b->peak, &peak, used + n))
		;
	return 0;
}

/*
 * Make room in b for need bytes of content (and its NUL), as buf_append
 * would grow it (doubling, never past its cap), with l's budget paying
 * for the growth; failing that, just what is needed. 0, or -1 (b as it
 * was) when the budget cannot: the caller then keeps nothing more.
 */
static int
reserve(struct crilog *l, struct buf *b, size_t need)
{
	size_t want = need + 1, a = b->alloc ? b->alloc : 256;

	if (want <= b->alloc || l->bud == NULL)
		return 0;	/* buf_append grows it itself */
	while (a < want)
		a *= 2;
	if (a > b->max + 1)
		a = b->max + 1;
	if (a < want)
		a = want;	/* past the cap: buf_append refuses it anyway */
	if (budget_take(l->bud, charge(l->bud, a) - charge(l->bud,
	    b->alloc)) != 0) {
		a = want;
		if (budget_take(l->bud, charge(l->bud, a) - charge(l->bud,
		    b->alloc)) != 0) {
			l->starved = 1;
			return -1;
		}
	}
	b->data = xrealloc(b->data, a);
	if (b->alloc == 0)
		b->data[0] = '\0';
	b->alloc = a;
	return 0;
}

/* Free b's memory, its bytes back to l's budget. */
static void
release(struct crilog *l, struct buf *b)
{
	if (l->bud && b->alloc)
		atomic_fetch_sub(&l->bud->used, charge(l->bud, b->alloc));
	buf_free(b);
}

/*
 * Append n bytes to the kept text. An ASCII run may be cut anywhere
 * (partial != 0); a character or U+FFFD is kept whole or not at all.
 */
static void
keep(struct side *s, const void *p, size_t n, int partial)
{
	size_t room = s->text.max - s->text.len;

	if (n > room) {
		s->full = 1;
		s->pub.truncated = 1;
		if (!partial)
			return;
		n = room;
	}
	if (n > 0 && reserve(s->l, &s->text, s->text.len + n) != 0) {
		/* The node's budget is spent: the text stops here, a prefix. */
		s->full = 1;
		s->pub.truncated = 1;
		return;
	}
	/* Cannot fail: n fits under the cap. */
	if (n > 0 && buf_append(&s->text, p, n) != 0)
		abort();
}

static void
seq_reset(struct side *s)
{
	s->seen = 0;
	s->need = 0;
	s->lo = 0x80;
	s->hi = 0xBF;
}

/* Run content through the decoder (WHATWG "UTF-8 decoder", section 9.1.1). */
static void
decode(struct side *s, const unsigned char *p, size_t n)
{
	size_t i = 0, j;
	unsigned c;

	while (i < n && !s->full) {
		c = p[i];
		if (s->seen == 0) {
			if (c < 0x80) {
				for (j = i + 1; j < n && p[j] < 0x80; j++)
					;
				keep(s, p + i, j - i, 1);
				i = j;
				continue;
			}
			i++;
			if (c >= 0xC2 && c <= 0xDF)
				s->need = 2;
			else if (c >= 0xE0 && c <= 0xEF) {
				s->need = 3;
				if (c == 0xE0)		/* overlong */
					s->lo = 0xA0;
				else if (c == 0xED)	/* surrogate */
					s->hi = 0x9F;
			} else if (c >= 0xF0 && c <= 0xF4) {
				s->need = 4;
				if (c == 0xF0)		/* overlong */
					s->lo = 0x90;
				else if (c == 0xF4)	/* past U+10FFFF */
					s->hi = 0x8F;
			} else {
				keep(s, replacement, 3, 0);
				continue;
			}
			s->seq[s->seen++] = (unsigned char)c;
			continue;
		}
		if (c < s->lo || c > s->hi) {
			/* The maximal subpart ends here; c is looked at again. */
			seq_reset(s);
			keep(s, replacement, 3, 0);
			continue;
		}
		i++;
		s->lo = 0x80;
		s->hi = 0xBF;
		s->seq[s->seen++] = (unsigned char)c;
		if (s->seen == s->need) {
			keep(s, s->seq, s->seen, 0);
			seq_reset(s);
		}
	}
}

/* The stream ended: a character in progress becomes U+FFFD. */
static void
decode_end(struct side *s)
{
	if (s->seen == 0)
		return;
	seq_reset(s);
	if (!s->full)
		keep(s, replacement, 3, 0);
}

/* n decimal digits at p; -1 if any is not a digit. */
static int
digits(const char *p, int n)
{
	int i, v = 0;

	for (i = 0; i < n; i++) {
		if (p[i] < '0' || p[i] > '9')
			return -1;
		v = v * 10 + (p[i] - '0');
	}
	return v;
}

/* Days from 1970-01-01 to y-m-d in the proleptic Gregorian calendar. */
static int64_t
days_from_civil(int64_t y, int m, int d)
{
	int64_t era, yoe, doy, doe;

	y -= m <= 2;
	era = (y >= 0 ? y : y - 399) / 400;
	yoe = y - era * 400;
	doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
	doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + doe - 719468;
}

static int
days_in_month(int y, int m)
{
	static const int mdays[12] =
	    { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };

	if (m == 2 && y % 4 == 0 && (y % 100 != 0 || y % 400 == 0))
		return 29;
	return mdays[m - 1];
}

/*
 * Parse an RFC 3339 timestamp of exactly n bytes into ns since the epoch,
 * UTC. 0, or -1 if it is malformed or out of the int64_t range.
 */
static int
parse_ts(const char *p, size_t n, int64_t *ns)
{
	int y, mo, d, h, mi, sec, off = 0, oh, om, nd = 0;
	int64_t secs, frac = 0;
	size_t i = 19;

	if (n < 20 || p[4] != '-' || p[7] != '-' || p[10] != 'T' ||
	    p[13] != ':' || p[16] != ':')
		return -1;
	if ((y = digits(p, 4)) < 0 || (mo = digits(p + 5, 2)) < 1 ||
	    mo > 12 || (d = digits(p + 8, 2)) < 1 ||
	    d > days_in_month(y, mo) || (h = digits(p + 11, 2)) < 0 ||
	    h > 23 || (mi = digits(p + 14, 2)) < 0 || mi > 59 ||
	    (sec = digits(p + 17, 2)) < 0 || sec > 59)
		return -1;
	if (p[i] == '.') {
		for (i++; i < n && p[i] >= '0' && p[i] <= '9'; i++) {
			if (++nd > 9)
				return -1;
			frac = frac * 10 + (p[i] - '0');
		}
		if (nd == 0)
			return -1;
		for (; nd < 9; nd++)
			frac *= 10;
	}
	if (i + 1 == n && p[i] == 'Z')
		;
	else if (i + 6 == n && (p[i] == '+' || p[i] == '-') &&
	    p[i + 3] == ':' && (oh = digits(p + i + 1, 2)) >= 0 && oh <= 23 &&
	    (om = digits(p + i + 4, 2)) >= 0 && om <= 59)
		off = (p[i] == '-' ? -1 : 1) * (oh * 3600 + om * 60);
	else
		return -1;

	secs = days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec -
	    off;
	/* Borrow a second so the exact minimum of int64_t stays reachable. */
	if (secs < 0 && frac > 0) {
		secs++;
		frac -= NS_PER_SEC;
	}
	if (__builtin_mul_overflow(secs, NS_PER_SEC, ns) ||
	    __builtin_add_overflow(*ns, frac, ns))
		return -1;
	return 0;
}

/* One complete record of n bytes, LF excluded. */
/* Bytes of the program's stream s. */
static void
stream_bytes(struct side *s, const unsigned char *p, size_t n)
{
	s->pub.total += n;
	decode(s, p, n);
}

/*
 * Stdout's bytes through the frame filter: the program's go to the
 * stream, the frame's to fr->body. The opening marker starts with 0x1e,
 * which it holds nowhere else, so a partial match that fails restarts at
 * the failing byte.
 */
static void
frame_filter(struct crilog *l, const unsigned char *p, size_t n)
{
	struct frame *fr = &l->fr;
	const unsigned char *end = p + n;

	while (p < end) {
		switch (fr->state) {
		case FR_OFF:
		case FR_DONE:
			stream_bytes(&l->out, p, (size_t)(end - p));
			return;
		case FR_SCAN:
			if (fr->matched == 0) {
				const unsigned char *m = memchr(p, 0x1e,
				    (size_t)(end - p));

				if (m == NULL) {
					stream_bytes(&l->out, p, (size_t)(end - p));
					return;
				}
				stream_bytes(&l->out, p, (size_t)(m - p));
				p = m;
			}
			if (*p == (unsigned char)fr->open[fr->matched]) {
				p++;
				if (++fr->matched == fr->open_len) {
					fr->state = FR_LEN;
					fr->matched = 0;
					fr->want = 0;
				}
			} else {
				/* Not the marker: what matched was the program's. */
				stream_bytes(&l->out, (const unsigned char *)fr->open,
				    fr->matched);
				if (fr->matched == 0) {
					stream_bytes(&l->out, p, 1);
					p++;
				}
				fr->matched = 0;
			}
			break;
		case FR_LEN:
			fr->bytes++;
			if (*p >= '0' && *p <= '9' && fr->matched < 12) {
				fr->want = fr->want * 10 + (uint64_t)(*p - '0');
				fr->matched++;
			} else if (*p == '\n' && fr->matched > 0) {
				fr->state = FR_BODY;
				fr->matched = 0;
				fr->got = 0;
			} else {
				fr->status = CRILOG_FRAME_MALFORMED;
				fr->state = FR_DONE;
			}
			p++;
			break;
		case FR_BODY: {
			size_t take = (size_t)(end - p);

			if (take > fr->want - fr->got)
				take = (size_t)(fr->want - fr->got);
			if (fr->status == 0 && take <= fr->body.max -
			    fr->body.len && reserve(l, &fr->body,
			    fr->body.len + take) != 0) {
				fr->status = CRILOG_FRAME_NO_MEMORY;
				release(l, &fr->body);
			} else if (fr->status == 0 && buf_append(&fr->body, p,
			    take) != 0) {
				fr->status = CRILOG_FRAME_TOO_LARGE;
				release(l, &fr->body);
			}
			fr->got += take;
			fr->bytes += take;
			p += take;
			if (fr->got == fr->want)
				fr->state = FR_END;
			break;
		}
		case FR_END:
			fr->bytes++;
			if (*p != (unsigned char)fr->close[fr->matched]) {
				if (fr->status == 0)
					fr->status = CRILOG_FRAME_MALFORMED;
				fr->state = FR_DONE;
				break;	/* this byte is the program's again */
			}
			p++;
			if (++fr->matched == fr->close_len) {
				if (fr->status == 0)
					fr->status = CRILOG_FRAME_COMPLETE;
				fr->state = FR_DONE;
			}
			break;
		}
	}
}

/* n raw bytes of a stream: stdout through the frame filter. */
static void
raw(struct crilog *l, struct side *s, const void *p, size_t n)
{
	if (s == &l->out && l->fr.state != FR_OFF)
		frame_filter(l, p, n);
	else
		stream_bytes(s, p, n);
}

static void
record(struct crilog *l, const char *p, size_t n)
{
	const char *end = p + n, *stream, *tag, *content, *sp;
	struct side *s;
	int64_t ns;
	size_t tlen;
	int full;

	if ((sp = memchr(p, ' ', n)) == NULL ||
	    parse_ts(p, (size_t)(sp - p), &ns) != 0)
		goto bad;
	stream = sp + 1;
	if ((sp = memchr(stream, ' ', (size_t)(end - stream))) == NULL)
		goto bad;
	if (sp - stream == 6 && memcmp(stream, "stdout", 6) == 0)
		s = &l->out;
	else if (sp - stream == 6 && memcmp(stream, "stderr", 6) == 0)
		s = &l->err;
	else
		goto bad;
	tag = sp + 1;
	if ((sp = memchr(tag, ' ', (size_t)(end - tag))) == NULL)
		goto bad;
	content = sp + 1;
	tlen = (size_t)(sp - tag);
	if (tlen == 0 || (*tag != 'P' && *tag != 'F') ||
	    (tlen > 1 && tag[1] != ':'))
		goto bad;
	full = *tag == 'F';

	if (!s->has_records) {
		s->has_records = 1;
		s->pub.first_ns = ns;
	}
	s->pub.last_ns = ns;
	raw(l, s, content, (size_t)(end - content));
	if (full)
		raw(l, s, "\n", 1);
	return;
bad:
	l->bad++;
}

static void
side_init(struct crilog *l, struct side *s, size_t cap)
{
	memset(s, 0, sizeof(*s));
	s->l = l;
	buf_init(&s->text, cap);
	seq_reset(s);
}

struct crilog *
crilog_new_budget(size_t cap, size_t max_record, struct crilog_budget *b)
{
	struct crilog *l = xcalloc(1, sizeof(*l));

	side_init(l, &l->out, cap);
	side_init(l, &l->err, cap);
	buf_init(&l->line, max_record);
	l->max_record = max_record;
	l->bud = b;
	return l;
}

struct crilog *
crilog_new(size_t cap, size_t max_record)
{
	return crilog_new_budget(cap, max_record, NULL);
}

int
crilog_starved(const struct crilog *l)
{
	return l->starved;
}

void
crilog_feed(struct crilog *l, const void *buf, size_t n)
{
	const char *p = buf, *end = p + n, *lf;
	size_t seg;

	if (l->finished)
		return;
	while (p < end) {
		lf = memchr(p, '\n', (size_t)(end - p));
		seg = (size_t)((lf != NULL ? lf : end) - p);
		if (l->skipping) {
			if (lf != NULL)
				l->skipping = 0;
		} else if (seg > l->max_record - l->line.len) {
			/* Oversized: count it now, drop what is buffered. */
			l->bad++;
			l->skipping = lf == NULL;
			buf_reset(&l->line);
		} else if (l->line.len == 0 && lf != NULL) {
			record(l, p, seg);	/* whole in this chunk */
		} else if (reserve(l, &l->line, l->line.len + seg) != 0) {
			/*
			 * No memory to rebuild a split record: dropped, and
			 * neither stream keeps more text (what follows would
			 * not be a prefix). It is not counted bad: it was not.
			 */
			l->out.full = l->err.full = 1;
			l->out.pub.truncated = l->err.pub.truncated = 1;
			l->skipping = lf == NULL;
			buf_reset(&l->line);
		} else {
			/* Cannot fail: seg fits under max_record. */
			if (buf_append(&l->line, p, seg) != 0)
				abort();
			if (lf != NULL) {
				record(l, l->line.data, l->line.len);
				buf_reset(&l->line);
			}
		}
		if (lf == NULL)
			break;
		p = lf + 1;
	}
}

void
crilog_feed_stream(struct crilog *l, int stderr_, const void *buf, size_t n)
{
	struct side *s = stderr_ ? &l->err : &l->out;

	if (l->finished || n == 0)
		return;
	raw(l, s, buf, n);
}

void
crilog_out_frame(struct crilog *l, const char *nonce, size_t max)
{
	struct frame *fr = &l->fr;

	release(l, &fr->body);
	memset(fr, 0, sizeof(*fr));
	fr->open_len = (size_t)snprintf(fr->open, sizeof(fr->open),
	    "\x1e" "AIRLOCK-OUT %.64s ", nonce);
	fr->close_len = (size_t)snprintf(fr->close, sizeof(fr->close),
	    "\x1e" "AIRLOCK-END %.64s\n", nonce);
	buf_init(&fr->body, max);
	fr->state = FR_SCAN;
}

const char *
crilog_frame(const struct crilog *l, size_t *len, int *status)
{
	const struct frame *fr = &l->fr;

	if (fr->status)
		*status = fr->status;
	else if (fr->state == FR_OFF || fr->state == FR_SCAN)
		*status = CRILOG_FRAME_NONE;
	else
		*status = CRILOG_FRAME_INCOMPLETE;
	*len = *status == CRILOG_FRAME_COMPLETE ? fr->body.len : 0;
	return *status == CRILOG_FRAME_COMPLETE && fr->body.data ?
	    fr->body.data : "";
}

uint64_t
crilog_frame_bytes(const struct crilog *l)
{
	return l->fr.bytes + (l->fr.state != FR_OFF ? l->fr.matched : 0);
}

void
crilog_finish(struct crilog *l)
{
	if (l->finished)
		return;
	l->finished = 1;
	if (l->line.len > 0)
		l->bad++;
	l->skipping = 0;
	release(l, &l->line);
	/* A marker begun at the very end was the program's output. */
	if (l->fr.state == FR_SCAN && l->fr.matched > 0) {
		stream_bytes(&l->out, (const unsigned char *)l->fr.open,
		    l->fr.matched);
		l->fr.matched = 0;
	}
	decode_end(&l->out);
	decode_end(&l->err);
}

const struct crilog_stream *
crilog_stdout(const struct crilog *l)
{
	return &l->out.pub;
}

const struct crilog_stream *
crilog_stderr(const struct crilog *l)
{
	return &l->err.pub;
}

const char *
crilog_text(const struct crilog_stream *s, size_t *len)
{
	const struct side *sd = (const struct side *)s;

	if (len != NULL)
		*len = sd->text.len;
	return sd->text.data != NULL ? sd->text.data : "";
}

uint64_t
crilog_bad_records(const struct crilog *l)
{
	return l->bad;
}

size_t
crilog_memory(const struct crilog *l)
{
	return sizeof(*l) + l->line.alloc + l->out.text.alloc +
	    l->err.text.alloc + l->fr.body.alloc;
}

void
crilog_free(struct crilog *l)
{
	if (l == NULL)
		return;
	release(l, &l->line);
	release(l, &l->out.text);
	release(l, &l->err.text);
	release(l, &l->fr.body);
	free(l);
}
