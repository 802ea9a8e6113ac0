/*
 * egresslog.h - the egress proxy's decisions counted per execution: the
 * parser of a followed proxy log's lines and the capped table the counts
 * are kept in until they are written into the execution's status
 * (status.egress.refused and the rest; docs/network.md, "Audit").
 * egressfollow.c feeds it; nothing here touches the network.
 *
 * The lines are the proxy container's log as the API serves it with
 * timestamps=true: the kubelet's time (RFC 3339, nanoseconds), a space,
 * then the line the container wrote. The proxy's log daemon writes one
 * CodeExecutionEgress record a line (proxy/accesslog.c;
 * controller/docs/audit.md); Squid's and the entrypoint's own lines come
 * on the same log and are not records.
 *
 * The table holds an entry per execution being counted, by uid, at most
 * its max: a record is counted only for an execution the caller knows
 * (egresslog_known_fn: cached, that uid, not counted yet), so what a
 * tenant writes cannot make it grow, and one past the cap is dropped and
 * said (EGRESSLOG_FULL). Not thread-safe: the caller locks.
 */
#ifndef AIRLOCK_EGRESSLOG_H
#define AIRLOCK_EGRESSLOG_H

#include <stddef.h>

/* A record's bytes, 18 digits at most (accesslog.c); sums saturate there. */
#define EGRESSLOG_BYTES_MAX	999999999999999999LL

/*
 * A log line's most bytes. accesslog.c's longest record is under 3 KiB
 * (its strings capped at 253 bytes plus "...", printable ASCII, which
 * JSON at most doubles); with the kubelet's timestamp, well under this.
 */
#define EGRESSLOG_LINE_MAX	8192
/* Executions counted at once, at most (the table's default cap). */
#define EGRESSLOG_TABLE_MAX	65536
/* A uid's most bytes: Kubernetes' are 36; accesslog.c cuts at 64. */
#define EGRESSLOG_UID_MAX	64

struct egress_count {
	long long	refused;	/* decision "refused" */
	long long	allowed;	/* decision "allowed" */
	long long	bytes_out;	/* bytesOut of the allowed ones */
	long long	bytes_in;	/* bytesIn of the allowed ones */
};

/*
 * What became of a line: its name (the metric's label), and whether it
 * may have been a record of an execution counted now (a count may then
 * be short: the caller marks the counts of executions in flight
 * incomplete).
 */
#define EGRESSLOG_RESULTS(X)						\
	X(EGRESSLOG_COUNTED,	"counted",	0)			\
	X(EGRESSLOG_SEEN,	"seen",		0)			\
	X(EGRESSLOG_OTHER,	"other",	0)			\
	X(EGRESSLOG_NO_EXECUTION, "no-execution", 0)			\
	X(EGRESSLOG_UNKNOWN,	"unknown",	0)			\
	X(EGRESSLOG_MALFORMED,	"malformed",	1)			\
	X(EGRESSLOG_TOO_LONG,	"too-long",	1)			\
	X(EGRESSLOG_FULL,	"table-full",	1)
/*
 * COUNTED: a record of an execution known, counted. SEEN: a line a
 * resumed stream had already given (egresslog_line). OTHER: not a record
 * (the proxy's own lines). NO_EXECUTION: a record naming none (no valid
 * pass). UNKNOWN: naming one the caller does not count (not cached, or
 * counted already). MALFORMED: no timestamp, or a record that is not
 * whole. TOO_LONG: past EGRESSLOG_LINE_MAX. FULL: the table was full.
 */
enum egresslog_result {
#define EGRESSLOG_ENUM(e, name, loss)	e,
	EGRESSLOG_RESULTS(EGRESSLOG_ENUM)
#undef EGRESSLOG_ENUM
	EGRESSLOG_NRESULTS
};

/* The result's name ("counted", "table-full"...): static. */
const char *egresslog_result_name(enum egresslog_result r);
/* Whether a line with that result may have been a record lost. */
int egresslog_result_loss(enum egresslog_result r);

/*
 * Whether a record naming execution ns/name of uid is to be counted:
 * 1 or 0. All three are the record's (from the pass the proxy checked).
 */
typedef int (*egresslog_known_fn)(void *arg, const char *ns,
    const char *name, const char *uid);

struct egresslog;

/* An empty table of at most max entries (0: EGRESSLOG_TABLE_MAX). */
struct egresslog *egresslog_new(size_t max);
void egresslog_free(struct egresslog *t);
size_t egresslog_len(const struct egresslog *t);
/* Drop every entry. */
void egresslog_clear(struct egresslog *t);

/*
 * One record (the text the container wrote, len bytes, no newline):
 * counted into its execution's entry, made if need be, when known says
 * so. Never modifies rec.
 */
enum egresslog_result egresslog_count(struct egresslog *t, const char *rec,
    size_t len, egresslog_known_fn known, void *arg);

/*
 * Where a followed log is: the time of its last line (ns since the
 * epoch; 0: none yet) and how many lines had that very time. A stream
 * resumed with sinceTime (whole seconds: the API server drops the rest)
 * gives again lines it gave before, in the same order (the kubelet's
 * file order): while replay is set, those are skipped (again counts the
 * ones of the last time given again), and the first line past them ends
 * the replay. Zeroed: a stream from its start.
 */
struct egresslog_pos {
	long long	ns;
	unsigned long	same;
	unsigned long	again;
	int		replay;
};

/* A new connection of the stream starts: its lines are checked afresh. */
void egresslog_pos_resume(struct egresslog_pos *pos);

/*
 * The kubelet's time at the start of line (RFC 3339 with a fraction of up
 * to 9 digits, "Z" or a numeric offset), then one space: ns since the
 * epoch into *ns and the offset of what follows into *rest. 0, or -1.
 */
int egresslog_split_time(const char *line, size_t len, long long *ns,
    size_t *rest);

/*
 * One line of the log (len bytes, no newline; too_long: it was cut at
 * the cap): one given before (a replay, above) is SEEN; else pos moves
 * on to it, and its record is counted (egresslog_count), or TOO_LONG.
 * A line without the kubelet's time is MALFORMED, pos unchanged.
 */
enum egresslog_result egresslog_line(struct egresslog *t,
    struct egresslog_pos *pos, const char *line, size_t len, int too_long,
    egresslog_known_fn known, void *arg);

/*
 * The execution uid ended: its entry made (zero counts) unless there is
 * one, and the clock_mono_ms() its end was first seen at into *ended
 * (now_ms the first time). 0; 1 when its counts were written already
 * (egresslog_written); -1 when the table is full and has no entry for it.
 */
int egresslog_ended(struct egresslog *t, const char *uid, long long now_ms,
    long long *ended);

/*
 * uid's counts are written: its entry stays, so marked, until forgotten
 * (the caller forgets it once its cache shows them), so that a cache
 * that has not seen the write yet writes no second, smaller count.
 */
void egresslog_written(struct egresslog *t, const char *uid);

/* uid's counts into *c (zeros if it has no entry): 1 if it had one, else 0. */
int egresslog_get(const struct egresslog *t, const char *uid,
    struct egress_count *c);

/* Drop uid's entry, if any. */
void egresslog_forget(struct egresslog *t, const char *uid);

#endif
