/*
 * result.h - how a run ended, turned into what the execution's status
 * says: phase, reason, message, exit code, and the status object with the
 * program's output. One function for every writer of a result: the node
 * agent (which sends it as a JSON patch, execution/result.c's object
 * field by field) and the CLI's local mode (which prints it as the
 * cluster would have stored it). Pure: no I/O, so every branch is
 * unit-tested (tests/unit/test_result.c).
 */
#ifndef AIRLOCK_RESULT_H
#define AIRLOCK_RESULT_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "crilog.h"
#include "cx.h"

/* Why whoever watched the run killed it, if it did. */
enum cx_kill {
	CX_KILL_NONE,		/* it ended by itself */
	CX_KILL_DEADLINE,	/* at its timeout */
	CX_KILL_OUTPUT,		/* past the hard output cap */
	CX_KILL_ISOLATION,	/* its sandbox was not isolated */
	CX_KILL_CANCEL,		/* a signal to the CLI (local mode) */
	/*
	 * Its start was sent and not confirmed (a warm exec's Tasks.Start
	 * timed out or failed): it may have started, so it was killed, and
	 * it ends StartFailed rather than run a second time.
	 */
	CX_KILL_START,
	/*
	 * A session's step, running when its session ended by its clock
	 * (the node agent's check: Expired), or interrupted because it was
	 * cancelled (spec.cancel): Cancelled, as the controller ends such a
	 * step, with session_end's message.
	 */
	CX_KILL_SESSION,
	/*
	 * Its network traffic passed its cap (network.egressBytes, counted
	 * on the node: docs/network.md, "The byte cap").
	 */
	CX_KILL_EGRESS,
};

struct cx_run_end {
	enum cx_kill	 why;
	int		 oom;		/* the runtime or the cgroup said OOM */
	/*
	 * The profile has a code policy (CX_ANN_POLICY): its guard's refusal
	 * (a last "airlock: policy: " line on stderr, exit 120, or 137 from
	 * bash's guard) ends it PolicyDenied.
	 */
	int		 policy;
	int		 exit_status;	/* the program's; -1 unknown */
	int		 signal;	/* CX_KILL_CANCEL: the one received */
	long long	 timeout_ms;	/* CX_KILL_DEADLINE: the deadline */
	/*
	 * CX_KILL_DEADLINE of a session's step: its kernel was interrupted
	 * at its timeout (SIGINT), not the sandbox killed: exit code 124.
	 */
	int		 interrupted;
	long long	 hard_cap;	/* CX_KILL_OUTPUT: the cap, bytes */
	/*
	 * Egress counted on the node (egress_metered): the cap
	 * (CX_KILL_EGRESS's) and the bytes within it (status.egressBytes).
	 */
	int		 egress_metered;
	long long	 egress_cap;
	long long	 egress_bytes;
	/*
	 * It ended by itself after its traffic passed the cap (the node's
	 * last reading): EgressLimitExceeded too, its own exit code kept.
	 */
	int		 egress_over;
	const char	*isolation;	/* CX_KILL_ISOLATION: why; may be NULL */
	const char	*session_end;	/* CX_KILL_SESSION: the message */
	/*
	 * Set when the API server refused the result as too large (its
	 * words): the output is then left out and the execution fails
	 * ResultTooLarge, so that it still ends.
	 */
	const char	*refused;
	/*
	 * Set when the run's output cannot be read (why, naming the file):
	 * the execution fails ResultLost with its exit code and no output,
	 * rather than pass nothing off as what the program wrote.
	 */
	const char	*lost;

	int64_t		 start_ns;	/* 0: unknown, taken as exited_ns */
	int64_t		 exited_ns;
	const char	*node;		/* status.nodeName */
	const char	*scheduled;	/* the Scheduled condition's message */

	/*
	 * The output, and how much of each stream the status keeps at most
	 * (cx_result_fit to budget). budget: the execution's storage budget
	 * for its output (CX_ANN_OUTPUT_BUDGET); 0: none (the local mode).
	 */
	const struct crilog_stream *out, *err;
	size_t		 out_keep, err_keep;
	size_t		 budget;

	int64_t		 peak_memory;	/* bytes; -1 unknown */
	int64_t		 cpu_ns;	/* -1 unknown */

	/*
	 * Files out (execution/artifacts.h): status.artifacts (borrowed; NULL
	 * or empty: none), and what the message adds about them (NULL: "").
	 */
	json_t		*artifacts;
	const char	*out_note;
};

struct cx_outcome {
	enum cx_reason	 reason;
	const char	*phase;		/* static strings */
	const char	*reason_name;
	int		 exit_code;	/* status.exitCode: 137 when killed */
	char		 message[1600];
};

/*
 * How much of each stream a status keeps (*okeep of out's olen bytes,
 * *ekeep of err's elen) so that both together take at most budget bytes
 * as the API server stores them (jsonsize.h): all of both if they fit;
 * else a stream that needs more than half gets what the other leaves,
 * and both get half when both need more. Cut between characters.
 */
void cx_result_fit(const char *out, size_t olen, const char *err, size_t elen,
    size_t budget, size_t *okeep, size_t *ekeep);

/* Phase, reason, message and exit code of a run that ended as e says. */
void cx_result_outcome(const struct cx_run_end *e, struct cx_outcome *o);

/*
 * The status a run that ended as e says gets: phase, reason, message, the
 * three conditions (Scheduled, Started, Complete: cx.h's order, each True,
 * without observedGeneration, which each writer sets its own way), the
 * exit code, the kept output, its true byte counts and whether it was
 * cut, the times, the node, the usage the node reported and the files
 * out. With a budget, the whole status as stored stays within budget +
 * CX_STATUS_RESERVE (less what others write in it): when the rest of it
 * (status.artifacts, a long message) takes more than the reserve, the
 * output kept is cut further by as much. A new reference; *o (may be
 * NULL) gets the outcome, as of the output finally kept.
 */
json_t *cx_result_status(const struct cx_run_end *e, struct cx_outcome *o);

#endif
