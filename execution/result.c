/*
 * result.c - see result.h.
 */
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "jsonsize.h"
#include "result.h"

#define POLICY_PREFIX	"airlock: policy: "
/*
 * Of CX_STATUS_RESERVE, what the status holds besides the result's own
 * fields: podName, startMode, codeSha256, observedGeneration (on the
 * status and each condition), audited. The result's other fields take the
 * rest; past it (a long list of files out, a message full of '<'), they
 * take it from the output.
 */
#define STATUS_OTHERS	1024

/*
 * The guard's words: its last line on stderr that starts "airlock:
 * policy: ", as "policy: ..." (at most 1 KiB; bytes outside printable ASCII as '?').
 */
static void
policy_message(const struct crilog_stream *err, char *out, size_t outsz)
{
	size_t len = 0, n, i;
	const char *text = err ? crilog_text(err, &len) : "", *p, *line = NULL;

	for (p = text; p < text + len; p++)
		if ((p == text || p[-1] == '\n') && (size_t)(text + len - p) >=
		    sizeof(POLICY_PREFIX) - 1 && memcmp(p, POLICY_PREFIX,
		    sizeof(POLICY_PREFIX) - 1) == 0)
			line = p;
	if (line == NULL) {
		snprintf(out, outsz, "refused by the profile's code policy");
		return;
	}
	line += sizeof("airlock: ") - 1;
	for (n = 0; line + n < text + len && line[n] != '\n' && n < 1024; n++)
		;
	if (n >= outsz)
		n = outsz - 1;
	for (i = 0; i < n; i++)
		out[i] = (unsigned char)line[i] < 0x20 ||
		    (unsigned char)line[i] >= 0x7f ? '?' : line[i];
	out[n] = '\0';
}

void
cx_result_outcome(const struct cx_run_end *e, struct cx_outcome *o)
{
	size_t olen = 0, elen = 0;

	o->exit_code = e->why != CX_KILL_NONE ? 137 : e->exit_status;
	switch (e->why) {
	case CX_KILL_CANCEL:
		o->reason = CX_REASON_CANCELLED;
		snprintf(o->message, sizeof(o->message), "stopped by %s",
		    strsignal(e->signal));
		break;
	case CX_KILL_SESSION:
		o->reason = CX_REASON_CANCELLED;
		snprintf(o->message, sizeof(o->message), "%.900s",
		    e->session_end ? e->session_end : "its session ended while "
		    "it ran");
		break;
	case CX_KILL_DEADLINE:
		o->reason = CX_REASON_DEADLINE_EXCEEDED;
		if (e->interrupted) {
			o->exit_code = 124;	/* timeout(1)'s */
			snprintf(o->message, sizeof(o->message), "interrupted at "
			    "its %lld ms timeout", e->timeout_ms);
			break;
		}
		snprintf(o->message, sizeof(o->message), "killed at its %lld ms "
		    "deadline", e->timeout_ms);
		break;
	case CX_KILL_ISOLATION:
		o->reason = CX_REASON_ISOLATION_FAILED;
		snprintf(o->message, sizeof(o->message), "stopped at its start: "
		    "%.400s", e->isolation ? e->isolation :
		    "the sandbox is not isolated");
		break;
	case CX_KILL_START:
		o->reason = CX_REASON_START_FAILED;
		snprintf(o->message, sizeof(o->message), "its start was not "
		    "confirmed: the program, which may have started, was killed "
		    "and is not run again");
		break;
	case CX_KILL_EGRESS:
		o->reason = CX_REASON_EGRESS_LIMIT;
		snprintf(o->message, sizeof(o->message), "stopped: its network "
		    "traffic passed its cap of %lld bytes (network.egressBytes)",
		    e->egress_cap);
		break;
	case CX_KILL_OUTPUT:
		o->reason = CX_REASON_OUTPUT_LIMIT;
		snprintf(o->message, sizeof(o->message), "killed after writing "
		    "more than %lld bytes", e->hard_cap);
		break;
	case CX_KILL_NONE:
	default:
		if (e->egress_over && !e->oom) {
			o->reason = CX_REASON_EGRESS_LIMIT;
			snprintf(o->message, sizeof(o->message), "its network "
			    "traffic passed its cap of %lld bytes "
			    "(network.egressBytes); it ended with exit code %d",
			    e->egress_cap, e->exit_status);
		} else if (e->oom) {
			o->reason = CX_REASON_OOM_KILLED;
			snprintf(o->message, sizeof(o->message), "out of memory");
		} else if (e->policy && (e->exit_status == CX_EXIT_POLICY ||
		    e->exit_status == 137)) {
			o->reason = CX_REASON_POLICY_DENIED;
			policy_message(e->err, o->message, sizeof(o->message));
		} else if (e->exit_status == 0) {
			o->reason = CX_REASON_COMPLETED;
			snprintf(o->message, sizeof(o->message), "exit code 0");
		} else {
			o->reason = CX_REASON_ERROR;
			snprintf(o->message, sizeof(o->message), "exit code %d",
			    e->exit_status);
		}
		break;
	}
	if (e->out)
		(void)crilog_text(e->out, &olen);
	if (e->err)
		(void)crilog_text(e->err, &elen);
	if (e->lost) {
		char how[512];

		snprintf(how, sizeof(how), "%.500s", o->message);
		o->reason = CX_REASON_RESULT_LOST;
		snprintf(o->message, sizeof(o->message), "the program ended (%s) "
		    "but its output cannot be read: %.900s; what it wrote is not "
		    "known", how, e->lost);
	} else if (e->refused) {
		o->reason = CX_REASON_RESULT_TOO_LARGE;
		snprintf(o->message, sizeof(o->message), "the API server refused "
		    "the result (%.200s); its %zu bytes of stdout and %zu of "
		    "stderr are left out", e->refused, olen, elen);
	} else if (e->out_keep < olen || e->err_keep < elen) {
		size_t m = strlen(o->message);

		snprintf(o->message + m, sizeof(o->message) - m, "; output cut "
		    "to %zu bytes of stdout and %zu of stderr to fit the "
		    "execution's %zu-byte storage budget", e->out_keep,
		    e->err_keep, e->budget);
	}
	if (e->out_note && *e->out_note) {
		size_t m = strlen(o->message);

		snprintf(o->message + m, sizeof(o->message) - m, "%s", e->out_note);
	}
	o->reason_name = cx_reason_name(o->reason);
	o->phase = cx_phase_name(cx_reason_phase(o->reason));
}

/* A stream's kept text, at most keep bytes of it (none when refused). */
static json_t *
kept(const struct crilog_stream *s, size_t keep, int refused, int *cut)
{
	size_t len = 0;
	const char *text = s ? crilog_text(s, &len) : "";

	if (refused || keep > len)
		keep = refused ? 0 : len;
	*cut = (s && s->truncated) || keep < len;
	return json_stringn_nocheck(text, keep);
}

static json_t *
condition(enum cx_condition c, const char *reason, const char *msg,
    const char *when)
{
	return json_pack("{s:s, s:s, s:s, s:s, s:s}", "type",
	    cx_condition_name(c), "status", "True", "reason", reason,
	    "message", msg, "lastTransitionTime", when);
}

void
cx_result_fit(const char *out, size_t olen, const char *err, size_t elen,
    size_t budget, size_t *okeep, size_t *ekeep)
{
	size_t eo = jsonsize_string(out, olen), ee = jsonsize_string(err, elen);
	size_t half = budget / 2;

	*okeep = olen;
	*ekeep = elen;
	if (eo + ee <= budget)
		return;
	if (eo <= half)
		*ekeep = jsonsize_prefix(err, elen, budget - eo);
	else if (ee <= half)
		*okeep = jsonsize_prefix(out, olen, budget - ee);
	else {
		*okeep = jsonsize_prefix(out, olen, half);
		*ekeep = jsonsize_prefix(err, elen, budget - half);
	}
}

static json_t *
status_build(const struct cx_run_end *e, struct cx_outcome *op)
{
	struct cx_outcome oc;
	char t0[CLOCK_RFC3339_LEN], t1[CLOCK_RFC3339_LEN];
	int64_t start = e->start_ns ? e->start_ns : e->exited_ns;
	long long dur = (e->exited_ns - start) / 1000000;
	int ocut, ecut;
	json_t *st, *so, *se;

	cx_result_outcome(e, &oc);
	if (op)
		*op = oc;
	if (dur < 0)
		dur = 0;
	clock_format_rfc3339(start, 1, t0);
	clock_format_rfc3339(e->exited_ns, 1, t1);
	so = kept(e->out, e->out_keep, e->refused != NULL, &ocut);
	se = kept(e->err, e->err_keep, e->refused != NULL, &ecut);
	st = json_pack("{s:s, s:s, s:s, s:[o, o, o], s:i, s:o, s:o, s:b, s:b,"
	    " s:I, s:I, s:s, s:s, s:I, s:s}",
	    "phase", oc.phase, "reason", oc.reason_name, "message", oc.message,
	    "conditions",
	    condition(CX_COND_SCHEDULED, "Scheduled", e->scheduled ?
		e->scheduled : "", t0),
	    condition(CX_COND_STARTED, "Started", "the program started", t0),
	    condition(CX_COND_COMPLETE, oc.reason_name, oc.message, t1),
	    "exitCode", oc.exit_code, "stdout", so, "stderr", se,
	    "stdoutTruncated", ocut, "stderrTruncated", ecut,
	    "stdoutBytes", (json_int_t)(e->out ? e->out->total : 0),
	    "stderrBytes", (json_int_t)(e->err ? e->err->total : 0),
	    "startTime", t0, "completionTime", t1,
	    "durationMillis", (json_int_t)dur,
	    "nodeName", e->node ? e->node : "");
	/* Nothing was read: no output is shown, not even an empty one. */
	if (st && e->lost) {
		static const char *const out[] = { "stdout", "stderr",
		    "stdoutTruncated", "stderrTruncated", "stdoutBytes",
		    "stderrBytes" };

		for (size_t i = 0; i < sizeof(out) / sizeof(out[0]); i++)
			json_object_del(st, out[i]);
	}
	if (st && e->peak_memory >= 0)
		json_object_set_new(st, "peakMemoryBytes",
		    json_integer(e->peak_memory));
	if (st && e->egress_metered)
		json_object_set_new(st, "egressBytes",
		    json_integer(e->egress_bytes));
	if (st && e->cpu_ns >= 0)
		json_object_set_new(st, "cpuTimeMillis",
		    json_integer(e->cpu_ns / 1000000));
	if (st && json_array_size(e->artifacts) > 0)
		json_object_set(st, "artifacts", e->artifacts);
	return st;
}

/* Bytes the kept text of stdout and stderr takes stored, quotes aside. */
static size_t
output_size(json_t *st)
{
	json_t *o = json_object_get(st, "stdout"), *r = json_object_get(st,
	    "stderr");

	return jsonsize_string(json_string_value(o), json_string_length(o)) +
	    jsonsize_string(json_string_value(r), json_string_length(r));
}

json_t *
cx_result_status(const struct cx_run_end *e, struct cx_outcome *op)
{
	struct cx_run_end f = *e;
	json_t *st = status_build(&f, op);

	/*
	 * The budget is the output's when the rest of the status fits
	 * CX_STATUS_RESERVE. Past it, the output gives up what the rest
	 * takes over. Cutting the output can lengthen the message ("output
	 * cut to ..."), which is part of the rest: measured again, a few
	 * times at most (the cut is said once; its numbers only shrink).
	 */
	for (int i = 0; st && e->budget && i < 4; i++) {
		size_t kept = output_size(st), rest = jsonsize_value(st) - kept;
		size_t share, olen = 0, elen = 0, ok, ek;
		const char *ot, *et;

		if (rest + STATUS_OTHERS <= CX_STATUS_RESERVE)
			break;
		share = rest + STATUS_OTHERS - CX_STATUS_RESERVE < e->budget ?
		    e->budget - (rest + STATUS_OTHERS - CX_STATUS_RESERVE) : 0;
		if (kept <= share)
			break;
		ot = f.out ? crilog_text(f.out, &olen) : "";
		et = f.err ? crilog_text(f.err, &elen) : "";
		cx_result_fit(ot, f.out_keep < olen ? f.out_keep : olen, et,
		    f.err_keep < elen ? f.err_keep : elen, share, &ok, &ek);
		f.out_keep = ok;
		f.err_keep = ek;
		json_decref(st);
		st = status_build(&f, op);
	}
	return st;
}
