/*
 * record.c - a run's result into its execution's status (agent_priv.h):
 * one JSON patch, tested so that it lands at most once and only on the
 * execution the pod was made for; a result too large to store still ends
 * the execution (ResultTooLarge).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent_priv.h"
#include "clock.h"
#include "artifacts.h"
#include "jsonsize.h"
#include "log.h"
#include "session.h"
#include "xmalloc.h"

void
agent_fit_output(const char *out, size_t olen, const char *err, size_t elen,
    size_t budget, size_t *okeep, size_t *ekeep)
{
	cx_result_fit(out, olen, err, elen, budget, okeep, ekeep);
}

/*
 * A refusal to store files out that a moment cures: the namespace's
 * quota not yet counting them (a quota the controller just made), the
 * API server busy or unreachable.
 */
static int
transient(int rc, const struct k8s_error *err)
{
	return rc == K8S_EIO || rc == K8S_ETIMEDOUT || err->http_status == 429 ||
	    err->http_status >= 500 || (rc == K8S_EFORBIDDEN &&
	    strstr(err->message, "status unknown for quota") != NULL);
}

/* How long after the exit files out may be retried before the result goes without them. */
#define FILES_OUT_RETRY_MS	20000

/*
 * Files out: the runner's frame, checked (artifacts_parse), its files
 * stored in the execution's CodeExecutionArtifacts; *list gets
 * status.artifacts (NULL: none) and note what the message adds. 1 when
 * the store failed for now (transient()) and the result should wait for
 * a retry; 0 otherwise.
 */
static int
files_out(struct agent *a, struct run *r, json_t **list, char *note,
    size_t note_size, struct step_report *step, char **value)
{
	struct artifacts arts;
	struct k8s_error err;
	const char *body;
	size_t len;
	int st, rc;
	json_t *obj, *cur = NULL;

	*list = NULL;
	note[0] = '\0';
	/*
	 * The object is named for the execution the API server vouched for
	 * (trust.c), never for what a pod alone says: a forged pod's files
	 * would otherwise be stored under a name of its choosing.
	 */
	if (!r->verified || r->out_files == 0 || r->log == NULL)
		return 0;
	body = crilog_frame(r->log, &len, &st);
	switch (st) {
	case CRILOG_FRAME_NONE:
		return 0;
	case CRILOG_FRAME_TOO_LARGE:
		snprintf(note, note_size, "; no files out: more than the %zu-byte "
		    "budget arrived", r->out_bytes);
		return 0;
	case CRILOG_FRAME_INCOMPLETE:
		snprintf(note, note_size, "; no files out: the program's end cut "
		    "them short");
		return 0;
	case CRILOG_FRAME_MALFORMED:
		snprintf(note, note_size, "; no files out: they arrived malformed");
		return 0;
	case CRILOG_FRAME_NO_MEMORY:
		snprintf(note, note_size, "; no files out: the node agent's memory "
		    "for output was full");
		return 0;
	}
	artifacts_parse(body, len, r->out_bytes, r->out_files, &arts);
	artifacts_message(&arts, note, note_size);
	if (r->step) {
		/* A session step's report (artifacts.h), and its value. */
		*step = arts.step;
		step->value = NULL;
		if (arts.step.value)
			*value = xstrndup(arts.step.value, arts.step.value_len);
	}
	if (arts.nfiles == 0) {
		artifacts_free(&arts);
		return 0;
	}
	obj = artifacts_object(&arts, r->ns, r->cx, r->cx_uid, a->o.node_name);
	rc = k8s_create(a->client, &artifacts_resource, r->ns, obj, NULL, &err);
	json_decref(obj);
	if (rc == K8S_EEXIST &&
	    k8s_get(a->client, &artifacts_resource, r->ns, r->cx, &cur, &err) == 0) {
		/*
		 * Ours, from an earlier try of this record: this execution's,
		 * this node's, these files.
		 */
		json_t *md = json_object_get(cur, "metadata"), *want, *have, *f;
		const char *uid = json_string_value(json_object_get(json_object_get(
		    md, "labels"), CX_LABEL_UID));
		const char *node = json_string_value(json_object_get(json_object_get(
		    md, "annotations"), ARTIFACTS_ANN_NODE));
		size_t i;

		want = artifacts_status(&arts);
		have = json_array();
		json_array_foreach(json_object_get(cur, "files"), i, f)
			json_array_append_new(have, json_pack("{s:O?, s:O?, s:O?, s:O?}",
			    "path", json_object_get(f, "path"), "size",
			    json_object_get(f, "size"), "sha256", json_object_get(f,
			    "sha256"), "contentType", json_object_get(f, "contentType")));
		rc = uid && strcmp(uid, r->cx_uid) == 0 && node &&
		    strcmp(node, a->o.node_name) == 0 && json_equal(want, have) ? 0 :
		    K8S_EEXIST;
		if (rc != 0)
			snprintf(err.message, sizeof(err.message), "another "
			    "CodeExecutionArtifacts of the name is there");
		json_decref(want);
		json_decref(have);
		json_decref(cur);
	}
	if (rc == 0)
		*list = artifacts_status(&arts);
	else if (transient(rc, &err) && (agent_now_ns() - r->exited_ns) / 1000000 <
	    FILES_OUT_RETRY_MS) {
		log_debug("files out not stored yet", "execution=%s/%s error=\"%s\"",
		    r->ns, r->cx, err.message);
		artifacts_free(&arts);
		return 1;
	} else {
		size_t n = strlen(note);

		log_warn("cannot store files out", "execution=%s/%s error=\"%s\"",
		    r->ns, r->cx, err.message);
		snprintf(note + n, note_size - n, "; %zu files out not stored: %.200s",
		    arts.nfiles, err.message);
	}
	artifacts_free(&arts);
	return 0;
}

/*
 * The JSON patch that records a run's result, if the execution is still
 * the one the pod was made for (its uid), the phase is still expect and
 * the conditions sit where the controller put them. The output is cut to
 * the run's budget as the API server will store it; with refused set (the
 * server refused the result as too large anyway: refused holds why) the
 * output is left out and the execution fails ResultTooLarge, so that it
 * still ends.
 */
static json_t *
result_patch(struct agent *a, struct run *r, const char *expect,
    const char *refused, const char **reasonp, json_t *arts, const char *note,
    const struct step_report *step, const char *value)
{
	char sched[300];
	struct cx_run_end e = { .why = r->why, .oom = r->oom, .policy = r->policy,
	    .exit_status = (int)(int32_t)r->status, .timeout_ms = r->timeout_ms,
	    .hard_cap = a->o.hard_cap, .isolation = r->isolation,
	    .session_end = r->session_end,
	    .refused = refused, .start_ns = r->start_ns,
	    .exited_ns = r->exited_ns, .node = a->o.node_name,
	    .scheduled = sched, .out = crilog_stdout(r->log),
	    .err = crilog_stderr(r->log), .budget = r->budget,
	    .peak_memory = r->usage.peak_memory, .cpu_ns = r->usage.cpu_ns,
	    .artifacts = arts, .out_note = note,
	    .egress_metered = r->meter_read, .egress_cap = r->meter_cap,
	    .egress_bytes = r->meter_bytes, .egress_over = r->meter_over };
	struct cx_outcome oc;
	size_t olen, elen, i;
	const char *key;
	json_t *p, *st, *v;

	const char *otext = crilog_text(e.out, &olen);
	const char *etext = crilog_text(e.err, &elen);
	char lost[1024];

	/*
	 * A cold run's log never opened (agent_decide waited LOG_MISSING_MS
	 * for it): its output is not known, and is not recorded as empty.
	 */
	if (!r->warm && !r->lf.opened) {
		char *path = agent_log_path(a, r);

		snprintf(lost, sizeof(lost), "cannot open '%.700s': %s", path,
		    r->lf.err ? strerror(r->lf.err) : "never tried");
		free(path);
		e.lost = lost;
	}

	if (r->lost)
		e.lost = r->lost;
	/* A step's value is stored beside its output, within its budget. */
	{
		json_t *vs = value ? json_string(value) : NULL;
		size_t vsize = vs ? jsonsize_value(vs) : 0;
		size_t budget = r->budget > vsize ? r->budget - vsize : 0;

		json_decref(vs);
		/*
		 * Interrupted because it was cancelled (its step server was
		 * sent a CANCEL): Cancelled, as the controller writes it.
		 */
		if (step && r->interrupt_sent && e.why == CX_KILL_NONE) {
			e.why = CX_KILL_SESSION;
			e.session_end = "cancelled by spec.cancel";
		}
		/* Interrupted at its timeout by the step client, not killed. */
		if (step && step->kind == STEP_TIMEOUT && e.why == CX_KILL_NONE) {
			e.why = CX_KILL_DEADLINE;
			e.interrupted = 1;
		}

		agent_fit_output(otext, olen, etext, elen, budget, &e.out_keep,
		    &e.err_keep);
	}
	snprintf(sched, sizeof(sched), "scheduled to node %s", a->o.node_name);
	if ((st = cx_result_status(&e, &oc)) == NULL)
		return NULL;
	*reasonp = oc.reason_name;
	/*
	 * The execution still names this pod: a warm one given back to run
	 * cold (warm.c) names none, or its own pod, and takes no result from
	 * this one.
	 */
	p = json_pack("[{s:s, s:s, s:s}, {s:s, s:s, s:s}, {s:s, s:s, s:s}]",
	    "op", "test", "path", "/metadata/uid", "value", r->cx_uid,
	    "op", "test", "path", "/status/podName", "value", r->pod,
	    "op", "test", "path", "/status/phase", "value", expect);
	/*
	 * The conditions are where the controller put them (cx.h's order):
	 * each is tested, then replaced by index, keeping the generation
	 * the controller observed.
	 */
	for (i = 0; i < CX_COND_COUNT; i++) {
		char path[64];

		snprintf(path, sizeof(path), "/status/conditions/%zu/type", i);
		json_array_append_new(p, json_pack("{s:s, s:s, s:s}", "op", "test",
		    "path", path, "value", cx_condition_name((enum cx_condition)i)));
	}
	json_array_foreach(json_object_get(st, "conditions"), i, v) {
		char path[64], gen[96];

		snprintf(path, sizeof(path), "/status/conditions/%zu", i);
		snprintf(gen, sizeof(gen), "%s/observedGeneration", path);
		json_array_append_new(p, json_pack("{s:s, s:s, s:O}", "op",
		    "replace", "path", path, "value", v));
		json_array_append_new(p, json_pack("{s:s, s:s, s:s}", "op", "copy",
		    "from", "/status/observedGeneration", "path", gen));
	}
	json_object_foreach(st, key, v) {
		char path[64];

		if (strcmp(key, "conditions") == 0)
			continue;
		snprintf(path, sizeof(path), "/status/%s", key);
		json_array_append_new(p, json_pack("{s:s, s:s, s:O}", "op", "add",
		    "path", path, "value", v));
	}
	if (value && !e.lost && !refused)
		json_array_append_new(p, json_pack("{s:s, s:s, s:s}", "op", "add",
		    "path", "/status/value", "value", value));
	json_decref(st);
	return p;
}

/*
 * A status patch that only tests path == value: it changes nothing, so it
 * reads an object of res (into *cur, when not NULL) with no permission but
 * the status patch the agent has anyway. 0, or the k8s_patch error.
 */
int
agent_probe(struct agent *a, const struct k8s_resource *res, const char *ns,
    const char *name, const char *path, const char *value, json_t **cur,
    struct k8s_error *err)
{
	struct k8s_patch_opts po = { .type = K8S_PATCH_JSON,
	    .subresource = "status" };
	json_t *p = json_pack("[{s:s, s:s, s:s}]", "op", "test", "path", path,
	    "value", value);
	int rc = k8s_patch(a->client, res, ns, name, &po, p, cur, err);

	json_decref(p);
	return rc;
}

char *
agent_read_phase(struct agent *a, const struct k8s_resource *res,
    const char *ns, const char *name, const char *uid, int *gone)
{
	struct k8s_error err;
	json_t *cur = NULL;
	const char *ph;
	char *out;
	int rc = agent_probe(a, res, ns, name, "/metadata/uid", uid, &cur, &err);

	*gone = rc == K8S_ENOTFOUND || (rc == K8S_EHTTP &&
	    err.http_status == 422);
	if (rc != 0)
		return NULL;
	ph = json_string_value(json_object_get(json_object_get(cur, "status"),
	    "phase"));
	out = xstrdup(ph ? ph : "");
	json_decref(cur);
	return out;
}

/*
 * The API server will never store this as sent: the body is over its
 * limit (413), or etcd's ("request is too large", a 500).
 */
static int
too_large(const struct k8s_error *err)
{
	return err->http_status == 413 || strcasestr(err->message,
	    "too large") != NULL;
}

/*
 * A cold run in flight when containerd's event stream ended (containerd
 * restarted or died), and ending after: the old containerd closed its log
 * as it went, and what the program wrote until the new one reattached (or
 * all it wrote last, when it exited before that) sat in a pipe no one
 * read. The exit is known; the output may lack its end: said in the
 * message, rather than passed off as whole.
 *
 * An agent started after such a restart saw no stream end. Then the
 * containerd answering now having started after the run did (its
 * socket's ctime) says the same, unless this agent saw the log closed:
 * a run that exited under the old containerd may have died with its
 * output unwritten (the soak's node loss: `Succeeded`, output empty).
 */
void
agent_ctrd_note(struct agent *a, const struct run *r, char *note,
    size_t note_size)
{
	long long down = atomic_load(&a->ctrd_down_ns);
	long long began = atomic_load(&a->ctrd_started_ns);
	char when[CLOCK_RFC3339_LEN];
	size_t n = strlen(note);

	if (r->warm)
		return;
	if (down > 0) {
		if (r->start_ns >= down || r->exited_ns < down -
		    CTRD_DOWN_MARGIN_NS)
			return;
	} else if (began <= 0 || r->start_ns >= began - CTRD_DOWN_MARGIN_NS ||
	    r->log_closed) {
		return;
	} else {
		down = began;
	}
	clock_format_rfc3339(down, 1, when);
	snprintf(note + n, note_size - n, "; containerd restarted while it ran "
	    "(%s): output written after then may be missing", when);
}

/*
 * What a session step's message adds (docs/sessions.md, "Failure
 * semantics"): the kernel gone before the step (it ran without the
 * session's earlier state); the kernel restarted after it (the state
 * lost), or could not start; output its background work wrote between
 * steps, dropped.
 */
static void
step_note(const struct run *r, const struct step_report *st, char *note,
    size_t note_size)
{
	size_t n = strlen(note);

	/* Before what the step's end did: it came first. */
	if (!r->note && st->kind != STEP_NONE && st->restarted == 3) {
		snprintf(note + n, note_size - n, "; the session's kernel was no "
		    "longer running when this step began (it had died since an "
		    "earlier step) and was started again: the session's earlier "
		    "state is lost");
		n = strlen(note);
	}
	if (r->note)
		snprintf(note + n, note_size - n, "%s", r->note);
	else if (st->kind == STEP_NONE && !r->lost && r->out_files > 0)
		snprintf(note + n, note_size - n, "; the session's step client "
		    "sent no report (its stderr says why)");
	else if (st->kind == STEP_FAILED)
		snprintf(note + n, note_size - n, "; the session's kernel could "
		    "not start");
	else if (st->kind == STEP_DIED)
		snprintf(note + n, note_size - n, "; the session's kernel died "
		    "under it and was started again: its state is lost");
	else if (st->kind == STEP_EXIT)
		snprintf(note + n, note_size - n, "; the program exited the "
		    "session's kernel, which was started again: its state is lost");
	/* 3 says nothing of the timeout's end: warm's stderr does. */
	else if (st->kind == STEP_TIMEOUT && (st->restarted == 1 ||
	    st->restarted == 2))
		snprintf(note + n, note_size - n, "; the kernel was not back "
		    "within %d ms of the interrupt and was started again: the "
		    "session's state is lost", SESSION_STEP_GRACE_MS);
	n = strlen(note);
	if (st->dropped > 0)
		snprintf(note + n, note_size - n, "; %lld bytes written between "
		    "steps were dropped", st->dropped);
}

/*
 * Record r's result (r is busy: the ticker leaves it alone). 1 when the
 * execution has its final result, whoever wrote it; 0 to try again later.
 * A result refused as too large is not retried as it is: it is recorded
 * once more without its output (ResultTooLarge), so the execution ends.
 */
int
agent_record(struct agent *a, struct run *r)
{
	static const char *const expect[] = { "Running", "Pending" };
	struct k8s_patch_opts po = { .type = K8S_PATCH_JSON,
	    .subresource = "status" };
	struct k8s_error err;
	const char *reason = NULL;
	json_t *patch[2], *arts;
	struct step_report step = { .kind = STEP_NONE };
	char *ph, refused[256], note[1024], *value = NULL;
	int gone, done = -1, rc = K8S_EHTTP, big = 0;

	refused[0] = '\0';
	/* Files out first: a moment's refusal to store them holds the result. */
	if (files_out(a, r, &arts, note, sizeof(note), &step, &value) != 0) {
		free(value);
		return 0;
	}
	/* The session's count, from a report that has one (old runners: -1). */
	if (r->step && step.kind != STEP_NONE && step.restarts > 0)
		agent_session_restarts(a, r->ns, r->pod, step.restarts);
	/* Killed with its session (sessions.c): that is the whole story. */
	if (r->step && r->why != CX_KILL_SESSION)
		step_note(r, &step, note, sizeof(note));
	agent_ctrd_note(a, r, note, sizeof(note));
	agent_memory_note(a, r, note, sizeof(note));
	for (int attempt = 0; attempt < 2 && done < 0; attempt++) {
		if (attempt == 1 && !big)
			break;
		big = 0;
		/*
		 * Built under the lock: a late TaskOOM event may still write
		 * the run. The calls are made without it.
		 */
		pthread_mutex_lock(&a->lock);
		for (int i = 0; i < 2; i++)
			patch[i] = result_patch(a, r, expect[i], attempt ?
			    refused : NULL, &reason, arts, note, r->step ? &step :
			    NULL, value);
		pthread_mutex_unlock(&a->lock);
		for (int i = 0; i < 2 && done < 0 && !big; i++) {
			rc = k8s_patch(a->client, &cx_resource, r->ns, r->cx, &po,
			    patch[i], NULL, &err);
			if (rc == 0) {
				/* From containerd's exited_at to the result stored. */
				long long ms = (long long)((agent_now_ns() -
				    r->exited_ns) / 1000000);

				metric_inc(a->m_results, reason);
				metric_observe(a->m_record, (double)ms / 1000.0);
				log_info("execution finished", "execution=%s/%s "
				    "reason=%s exit=%u duration_ms=%lld "
				    "recorded_after_exit_ms=%lld", r->ns, r->cx,
				    reason, r->status, (long long)((r->exited_ns -
				    r->start_ns) / 1000000), ms);
				done = 1;
			} else if (rc == K8S_ENOTFOUND) {
				done = 1;	/* the execution is gone */
			} else if (rc == K8S_EHTTP && too_large(&err)) {
				log_warn("result refused as too large",
				    "execution=%s/%s error=\"%s\"", r->ns, r->cx,
				    err.message);
				snprintf(refused, sizeof(refused), "%.200s", err.message);
				if (attempt == 1)
					done = 1;	/* nothing smaller to send */
				big = 1;
			} else if (rc == K8S_EIO || rc == K8S_ETIMEDOUT ||
			    err.http_status >= 500 || err.http_status == 429) {
				done = 0;
			}
		}
		json_decref(patch[0]);
		json_decref(patch[1]);
	}
	json_decref(arts);
	free(value);
	if (done >= 0)
		return done;
	/* The tests failed: see what the execution is now. */
	ph = agent_read_phase(a, &cx_resource, r->ns, r->cx, r->cx_uid,
	    &gone);
	if (gone)
		return 1;
	if (ph && cx_phase_terminal(ph)) {
		log_info("execution already ended", "execution=%s/%s phase=%s",
		    r->ns, r->cx, ph);
		free(ph);
		return 1;
	}
	log_warn("cannot record result yet", "execution=%s/%s phase=%s "
	    "error=\"%s\"", r->ns, r->cx, ph ? ph : "?", err.message);
	free(ph);
	return 0;
}

/* Delete pod ns/name if its uid is still uid: 1 done (or gone), 0 not. */
int
agent_delete_pod(struct agent *a, const char *ns, const char *name, const char *uid)
{
	struct k8s_delete_opts del = { .grace_period_set = 1,
	    .grace_period_seconds = 0, .precondition_uid = uid };
	struct k8s_error err;
	int rc = k8s_delete(a->client, &k8s_res_pods, ns, name, &del, NULL,
	    &err);

	if (rc != 0 && rc != K8S_ENOTFOUND && rc != K8S_ECONFLICT) {
		log_warn("cannot delete pod", "pod=%s/%s error=\"%s\"", ns,
		    name, err.message);
		return 0;
	}
	return 1;
}

long long
agent_flush_interval(int n)
{
	long long ms = 100;

	for (int k = 20; k <= n && ms < 5000; k += 10)
		ms *= 2;
	return ms < 5000 ? ms : 5000;
}

int
agent_flush_take(double *tokens, long long *last_ms, long long now_ms,
    double cost)
{
	if (*last_ms == 0)
		*tokens = AGENT_FLUSH_BURST;
	else if (now_ms > *last_ms)
		*tokens += (double)(now_ms - *last_ms) * AGENT_FLUSH_RATE / 1000.0;
	if (*tokens > AGENT_FLUSH_BURST)
		*tokens = AGENT_FLUSH_BURST;
	*last_ms = now_ms;
	if (cost > AGENT_FLUSH_BURST)
		cost = AGENT_FLUSH_BURST;
	if (*tokens < cost)
		return 0;
	*tokens -= cost;
	return 1;
}

/*
 * Each stream's text so far, cut to half the run's storage budget (as
 * encoded): the final result keeps at least that much of each (it gives
 * a stream that needs less than half all of it, and the other the rest),
 * so what a client was shown is always a prefix of the final text. Tested
 * to land only while the execution is the one the pod was made for and
 * still Running: never over a result.
 */
void
agent_flush(struct agent *a, struct run *r)
{
	struct k8s_patch_opts po = { .type = K8S_PATCH_JSON,
	    .subresource = "status" };
	struct k8s_error err;
	const char *otext, *etext;
	size_t olen, elen, okeep, ekeep;
	json_t *patch;
	int rc;

	pthread_mutex_lock(&a->lock);
	if (r->exited || r->recorded || r->log == NULL || r->cx == NULL) {
		pthread_mutex_unlock(&a->lock);
		return;
	}
	otext = crilog_text(crilog_stdout(r->log), &olen);
	etext = crilog_text(crilog_stderr(r->log), &elen);
	okeep = jsonsize_prefix(otext, olen, r->budget / 2);
	ekeep = jsonsize_prefix(etext, elen, r->budget / 2);
	if (okeep == r->flushed_out && ekeep == r->flushed_err) {
		pthread_mutex_unlock(&a->lock);
		return;
	}
	patch = json_pack("[{s:s, s:s, s:s}, {s:s, s:s, s:s}, {s:s, s:s, s:s},"
	    " {s:s, s:s, s:o}, {s:s, s:s, s:o}]",
	    "op", "test", "path", "/metadata/uid", "value", r->cx_uid,
	    "op", "test", "path", "/status/phase", "value", "Running",
	    "op", "test", "path", "/status/podName", "value", r->pod,
	    "op", "add", "path", "/status/stdout", "value",
	    json_stringn(otext, okeep),
	    "op", "add", "path", "/status/stderr", "value",
	    json_stringn(etext, ekeep));
	pthread_mutex_unlock(&a->lock);
	if (patch == NULL)		/* not UTF-8: cannot be, crilog's text is */
		return;
	rc = k8s_patch(a->client, &cx_resource, r->ns, r->cx, &po, patch, NULL,
	    &err);
	json_decref(patch);
	pthread_mutex_lock(&a->lock);
	if (rc == 0) {
		r->flushed_out = okeep;
		r->flushed_err = ekeep;
	} else {
		/*
		 * Not shown (the controller has not written Running yet, or
		 * the server failed): again at the run's next turn, even if
		 * the program writes nothing more.
		 */
		r->flushed_total = 0;
	}
	pthread_mutex_unlock(&a->lock);
	metric_inc(a->m_flush, rc == 0 ? "written" : err.http_status == 422 ?
	    "refused" : "failed");
}
