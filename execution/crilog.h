/*
 * crilog.h - an incremental parser for CRI container log files.
 *
 * The node agent tails the file the container runtime writes for a
 * container (/var/log/pods/NS_POD_UID/CONTAINER/0.log) and feeds it here in
 * whatever chunks read() returns; a chunk may end anywhere, mid-record or
 * mid-character. The parser rebuilds the program's stdout and stderr
 * separately, as text that can go straight into a JSON status: valid UTF-8
 * and bounded.
 *
 * Format (containerd, pkg/cri/io/logger.go), one record per line:
 *
 *	TIMESTAMP SP STREAM SP TAG SP CONTENT LF
 *
 *  - TIMESTAMP is RFC 3339 with 0 to 9 fraction digits, as Go's
 *    RFC3339Nano writes it ("2026-11-22T07:11:31.301173195Z"); a numeric
 *    offset ("+05:30", "-07:00") is accepted too and converted to UTC.
 *    Upper-case 'T' and 'Z' only; seconds 00-59; the instant must fit in an
 *    int64_t of nanoseconds (1677-09-21 to 2262-04-11).
 *  - STREAM is "stdout" or "stderr".
 *  - TAG is "P" (partial) or "F" (full), possibly followed by more tags
 *    joined by ':' ("F:x"), which are ignored.
 *  - CONTENT is any bytes but LF, possibly none ("TS stdout F " LF).
 *
 * A stream is the concatenation, in file order, of CONTENT for P records and
 * CONTENT "\n" for F records. containerd cuts lines longer than 16 KiB into
 * P records, and a stream that ends without a newline ends with a P record.
 * Known limitation of the format: containerd reads lines with Go's
 * bufio.Reader.ReadLine, which drops a CR right before the LF, so a program
 * that wrote "a\r\n" comes back as "a\n"; nothing here can recover it. A CR
 * anywhere else is kept.
 *
 * Bad records: a record longer than max_record bytes (not counting its LF),
 * a timestamp that does not parse, an unknown stream or tag, or a missing
 * field (fewer than three SP) is counted in crilog_bad_records() and skipped
 * up to the next LF. It contributes nothing to either stream. An oversized
 * record is discarded as it arrives, never buffered past max_record.
 *
 * UTF-8 policy: the kept text is always valid UTF-8. Invalid input is
 * replaced by U+FFFD (EF BF BD) once per maximal subpart of an ill-formed
 * sequence, as the WHATWG Encoding Standard decoder and Unicode's "best
 * practice" (chapter 3, U+FFFD substitution) do: a lead byte followed by the
 * longest run of continuation bytes that could still begin a valid
 * character becomes one U+FFFD; the offending byte is then looked at again.
 * So a stray continuation byte, C0, C1, F5-FF each give one U+FFFD; an
 * overlong E0 80 80 gives three, a surrogate ED A0 80 three, F4 90 80 80
 * (past U+10FFFF) four, and a truncated E2 82 followed by 'x' gives one and
 * then 'x'. Decoding state is kept per stream, across records and across
 * feeds, so a character split over two P records or two chunks survives
 * intact. A character still incomplete when the stream ends becomes U+FFFD
 * at crilog_finish(); until then it is held back, not shown. NUL is kept
 * (JSON encodes it as \u0000).
 *
 * Cap semantics: each stream keeps at most cap bytes of sanitised text: the
 * longest prefix of the sanitised stream that fits, cut before the first
 * character (or U+FFFD) that does not, so never in the middle of one. Once a
 * character has been dropped nothing later is kept either: the kept text is
 * always a prefix. truncated is 1 exactly when the kept text is not the
 * whole sanitised stream; total counts every byte the program wrote to the
 * stream (CONTENT bytes, plus one for the newline of each F record), kept
 * or not, before sanitising.
 *
 * Memory: O(cap + max_record) whatever the input: one record buffer of at
 * most max_record + 1 bytes and at most cap + 1 bytes of text per stream,
 * all allocated as needed. Allocation goes through xmalloc (aborts on OOM).
 * Not thread-safe: one struct crilog belongs to one thread at a time.
 */
#ifndef AIRLOCK_CRILOG_H
#define AIRLOCK_CRILOG_H

#include <stddef.h>
#include <stdint.h>

/*
 * What the parser knows about one of the two streams. Read-only for the
 * caller; the kept text itself is read with crilog_text().
 * Invariants: truncated == 0 implies the kept text is the whole sanitised
 * stream so far; first_ns <= last_ns is NOT implied (a runtime's clock may
 * step back); both are 0 when the stream has no record yet.
 */
struct crilog_stream {
	uint64_t total;		/* raw bytes the program wrote, kept or not */
	int	 truncated;	/* 1 if the kept text is not the whole stream */
	int64_t	 first_ns;	/* timestamp of its first record, ns since epoch */
	int64_t	 last_ns;	/* timestamp of its last record */
};

struct crilog;

/*
 * A new parser keeping at most cap bytes of text per stream and accepting
 * records of at most max_record bytes (not counting the LF; containerd's
 * records are about 16 KiB plus a 40-byte header, so 64 KiB is ample).
 * Never NULL; free with crilog_free().
 */
struct crilog *crilog_new(size_t cap, size_t max_record);

/*
 * Parse n more bytes of the file. Any chunking gives the same result as
 * feeding the whole file at once. Ignored after crilog_finish().
 */
void crilog_feed(struct crilog *l, const void *buf, size_t n);

/*
 * n raw bytes the program wrote to stdout (stderr_ 0) or stderr (1), not
 * CRI records: for a caller that reads the program's pipes itself (the
 * CLI's local mode). The same UTF-8 policy, cap and counts apply. Timestamps
 * stay 0. Ignored after crilog_finish().
 */
void crilog_feed_stream(struct crilog *l, int stderr_, const void *buf,
    size_t n);

/*
 * The file ends here: an unterminated last record is counted bad and
 * dropped, and a character left incomplete at the end of either stream
 * becomes U+FFFD. Later calls to crilog_feed() and crilog_finish() do
 * nothing.
 */
void crilog_finish(struct crilog *l);

/* Borrowed, valid (and updated in place) until crilog_free(). */
const struct crilog_stream *crilog_stdout(const struct crilog *l);
const struct crilog_stream *crilog_stderr(const struct crilog *l);

/*
 * The kept text of s (from crilog_stdout() or crilog_stderr()): valid UTF-8,
 * *len <= cap bytes, may hold NUL, and followed by a NUL not counted in
 * *len. Never NULL (no text is ""). Borrowed: valid until the next
 * crilog_feed(), crilog_finish() or crilog_free() on its parser.
 */
const char *crilog_text(const struct crilog_stream *s, size_t *len);

/*
 * Files out (execution/artifacts.h): from now on, the frame the runner
 * writes on stdout after the program's output,
 *
 *   0x1e "AIRLOCK-OUT " NONCE " " LEN LF  LEN bytes  0x1e "AIRLOCK-END " NONCE LF
 *
 * is taken out of stdout wherever it starts (even mid-line): its bytes
 * are not the stream's, nor counted in its total. Up to max bytes of the
 * body are kept; a longer one is counted and dropped (TOO_LARGE). Only
 * the first frame is taken; stdout after it is the program's again. A
 * marker that starts but does not match is the program's output, kept.
 */
void crilog_out_frame(struct crilog *l, const char *nonce, size_t max);

#define CRILOG_FRAME_NONE	0	/* none seen */
#define CRILOG_FRAME_COMPLETE	1
#define CRILOG_FRAME_INCOMPLETE	2	/* it started, the stream ended first */
#define CRILOG_FRAME_MALFORMED	3	/* a bad length or closing marker */
#define CRILOG_FRAME_TOO_LARGE	4	/* the body was over max */

/*
 * The frame's body (borrowed; "" unless COMPLETE) and *len; *status one
 * of CRILOG_FRAME_*.
 */
const char *crilog_frame(const struct crilog *l, size_t *len, int *status);

/* Bytes of the frame seen so far, markers and all (for the output cap). */
uint64_t crilog_frame_bytes(const struct crilog *l);

#define CRILOG_FRAME_NO_MEMORY	5	/* its budget (below) could not hold it */

/*
 * A byte budget that many parsers share (the node agent's runs, one each),
 * so that their buffers together stay under limit whatever their number:
 * every growth of a parser's kept text, record buffer or frame body is
 * taken from it first, and given back when freed. Thread-safe (atomic):
 * parsers on different threads may share one.
 *
 * A parser whose growth the budget refuses is starved (crilog_starved):
 * its kept text stops there, still a prefix, and the stream is marked
 * truncated; its byte counts go on (but for a record split across feeds
 * that could not be buffered: it is dropped, and both streams stop
 * keeping text, so neither shows what came after); a frame it could not
 * hold is CRILOG_FRAME_NO_MEMORY. A growth that does not fit the doubled
 * size is tried once more at just what it needs.
 *
 * With a floor, each buffer's first floor bytes are its own, not taken
 * from the budget: a parser keeps at least that much of each stream
 * however many others spent the budget (one tenant's runs cannot leave
 * another's with nothing). The bound is then limit plus floor times the
 * buffers (4 a parser) of the parsers alive.
 */
struct crilog_budget;

/* limit bytes in all. Never NULL; free with crilog_budget_free(). */
struct crilog_budget *crilog_budget_new(size_t limit);
/* The same, each buffer's first floor bytes not counted (above). */
struct crilog_budget *crilog_budget_new_floor(size_t limit, size_t floor);
/* Every parser drawing from b must have been freed first. NULL is fine. */
void crilog_budget_free(struct crilog_budget *b);
/* Bytes taken now; the most ever taken at once; the limit. */
size_t crilog_budget_used(const struct crilog_budget *b);
size_t crilog_budget_peak(const struct crilog_budget *b);
size_t crilog_budget_limit(const struct crilog_budget *b);

/*
 * crilog_new, its buffers taken from b (borrowed: it must outlive the
 * parser). b NULL: no budget, as crilog_new.
 */
struct crilog *crilog_new_budget(size_t cap, size_t max_record,
    struct crilog_budget *b);

/* 1 once its budget refused it memory (see above), else 0. */
int crilog_starved(const struct crilog *l);

/* Records skipped so far as malformed or oversized. */
uint64_t crilog_bad_records(const struct crilog *l);

/*
 * Bytes of heap the parser holds now (at most about 2 cap + max_record
 * and the frame's max); with a budget, all but sizeof its state is
 * taken from the budget.
 */
size_t crilog_memory(const struct crilog *l);

/* Free the parser and its text; NULL is fine. */
void crilog_free(struct crilog *l);

#endif
