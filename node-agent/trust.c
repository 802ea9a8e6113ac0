/*
 * trust.c - whether a pod is one the controller made for an execution
 * that is still to run in it (agent_priv.h), and the memory its output
 * may take.
 *
 * A pod's labels, annotations and owner reference are what its creator
 * wrote: the forgery guard (the chart) keeps anyone but the controller
 * from writing Airlock's, but the agent does not rest on an admission
 * policy it cannot see (issue 27: a ReplicaSet's pods went past it). So a
 * run is followed only once the execution itself, as the API server has
 * it, vouches for the pod: its uid is the pod's owner's, its status names
 * the pod, and it has not ended. The last two also stop a pod a deposed
 * leader made after the execution's first pod ran (issue 27 item 9): the
 * program would run a second time.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent_priv.h"
#include "artifacts.h"
#include "clock.h"
#include "cx.h"
#include "log.h"
#include "pool.h"
#include "xmalloc.h"

enum agent_trust
agent_trust_verdict(json_t *cx, const char *pod)
{
	json_t *st = json_object_get(cx, "status");
	const char *phase = json_string_value(json_object_get(st, "phase"));
	const char *named = json_string_value(json_object_get(st, "podName"));

	if (phase && cx_phase_terminal(phase))
		return AGENT_ENDED;
	if (named == NULL || named[0] == '\0')
		return AGENT_NOT_YET;
	return strcmp(named, pod) == 0 ? AGENT_TRUST : AGENT_OTHER_POD;
}

int
agent_trust_egress(json_t *cx, const char *pod_uid)
{
	json_t *e = json_object_get(json_object_get(cx, "status"), "egress");
	const char *granted_to = json_string_value(json_object_get(e, "podUID"));

	return json_is_true(json_object_get(e, "granted")) && pod_uid != NULL &&
	    granted_to != NULL && strcmp(granted_to, pod_uid) == 0;
}

static const char *const trust_names[] = {
	[AGENT_TRUST] = "trusted",
	[AGENT_NOT_YET] = "not_yet",
	[AGENT_ENDED] = "ended",
	[AGENT_OTHER_POD] = "other_pod",
	[AGENT_GONE] = "gone",
};

void
agent_run_log(struct agent *a, struct run *r)
{
	if (r->log != NULL)
		return;
	r->log = crilog_new_budget(r->max_out, MAX_RECORD, a->out_mem);
	if (r->out_files > 0) {
		char nonce[33];

		/*
		 * The frame's base64: the files, a header and padding each,
		 * the runner's list of what it left out, the end.
		 */
		artifacts_nonce(r->cx_uid, nonce);
		crilog_out_frame(r->log, nonce, (r->out_bytes +
		    r->out_files * 1024 + 65536 + 1024 + 2) / 3 * 4);
	}
}

void
agent_memory_note(struct agent *a, const struct run *r, char *note,
    size_t note_size)
{
	size_t n = strlen(note), olen, elen;

	if (r->log == NULL || !crilog_starved(r->log) || a->out_mem == NULL)
		return;
	(void)crilog_text(crilog_stdout(r->log), &olen);
	(void)crilog_text(crilog_stderr(r->log), &elen);
	snprintf(note + n, note_size - n, "; output kept short (%zu bytes of "
	    "stdout, %zu of stderr): the node agent's memory for the output "
	    "of all its runs (%zu MiB) was full", olen, elen,
	    crilog_budget_limit(a->out_mem) >> 20);
}

/*
 * The verdict on learned run r from the API server: the execution by the
 * name r learned, tested to have the uid its owner reference gave.
 */
static enum agent_trust
ask(struct agent *a, const char *ns, const char *cx, const char *cx_uid,
    const char *pod, const char *pod_uid, char **name, char **uid, int *egress)
{
	struct k8s_error err;
	json_t *cur = NULL;
	enum agent_trust v;
	int rc = agent_probe(a, &cx_resource, ns, cx, "/metadata/uid", cx_uid,
	    &cur, &err);

	*name = *uid = NULL;
	*egress = 0;
	if (rc == K8S_ENOTFOUND || (rc == K8S_EHTTP && err.http_status == 422))
		return AGENT_GONE;
	if (rc != 0) {
		/*
		 * The status guard refuses until the controller has written
		 * the execution's nodeName; the server may be busy: later.
		 */
		log_debug("cannot ask about an execution yet", "execution=%s/%s "
		    "status=%ld error=\"%s\"", ns, cx, err.http_status,
		    err.message);
		return AGENT_NOT_YET;
	}
	v = agent_trust_verdict(cur, pod);
	if (v == AGENT_TRUST) {
		/* What the server has, not what the pod said. */
		*name = xstrdup(k8s_obj_name(cur) ? k8s_obj_name(cur) : cx);
		*uid = xstrdup(k8s_obj_uid(cur) ? k8s_obj_uid(cur) : cx_uid);
		*egress = agent_trust_egress(cur, pod_uid);
	}
	json_decref(cur);
	return v;
}

void
agent_verify(struct agent *a, struct run *r)
{
	char *ns, *cx, *cx_uid, *pod, *puid, *name, *uid;
	char *wait_uid = NULL, *wait_cid = NULL;
	enum agent_trust v;
	json_t *p = NULL;
	int egress;

	pthread_mutex_lock(&a->lock);
	ns = xstrdup(r->ns);
	cx = xstrdup(r->cx);
	cx_uid = xstrdup(r->cx_uid);
	pod = xstrdup(r->pod);
	puid = xstrdup(r->uid);
	pthread_mutex_unlock(&a->lock);
	v = ask(a, ns, cx, cx_uid, pod, puid, &name, &uid, &egress);
	metric_inc(a->m_trust, trust_names[v]);
	pthread_mutex_lock(&a->lock);
	switch (v) {
	case AGENT_TRUST:
		free(r->cx);
		free(r->cx_uid);
		r->cx = name;
		r->cx_uid = uid;
		r->verified = 1;
		r->egress = egress;
		agent_netstack_grant(r);
		agent_run_log(a, r);
		agent_arm_deadline(r);
		/*
		 * A cold program that started before this answer: its exit
		 * from its sandbox, as on_start would have asked.
		 */
		if (!r->warm && r->pid && r->cid && !r->exited && !r->waited &&
		    r->isolation == NULL && strncmp(r->pod, POOL_HOLDER_PREFIX,
		    strlen(POOL_HOLDER_PREFIX)) != 0) {
			r->waited = 1;
			wait_uid = xstrdup(puid);
			wait_cid = xstrdup(r->cid);
		}
		break;
	case AGENT_NOT_YET:
		r->verify_ms = clock_mono_ms() + backoff_next(&r->vretry);
		break;
	case AGENT_ENDED:
	case AGENT_OTHER_POD:
	case AGENT_GONE:
		r->recorded = 1;
		if (r->step) {
			/*
			 * A session's step seen again after its end (an agent
			 * restarted, the pod changed): never started here,
			 * nothing to kill, the session's pod kept (parked).
			 */
			log_debug("session step not run: its execution does "
			    "not expect it", "pod=%s/%s execution=%s why=%s",
			    ns, pod, cx, trust_names[v]);
			break;
		}
		/* The ticker kills it (if it runs) and deletes the pod. */
		r->refused = 1;
		log_warn("pod refused: its execution does not expect it",
		    "pod=%s/%s execution=%s why=%s started=%d", ns, pod, cx,
		    trust_names[v], r->start_ns != 0);
		break;
	}
	r->busy = 0;
	pthread_mutex_unlock(&a->lock);
	if (wait_uid)
		agent_exitwait_spawn(a, wait_uid, wait_cid);
	/* A claimed holder's program is started from its pod (claimed_seen). */
	if (v == AGENT_TRUST && a->pods &&
	    (p = informer_get(a->pods, ns, pod)) != NULL) {
		if (k8s_obj_uid(p) && strcmp(k8s_obj_uid(p), puid) == 0)
			agent_pod_seen(a, p);
		json_decref(p);
	}
	free(wait_uid);
	free(wait_cid);
	free(ns);
	free(cx);
	free(cx_uid);
	free(pod);
	free(puid);
}
