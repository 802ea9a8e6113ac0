/*
 * status.c - how the controller writes what it decided (controller_priv.h):
 * conditions, Events, and the status as a merge patch of what changed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "controller_priv.h"
#include "cx.h"
#include "jsonsize.h"
#include "log.h"

void
ctl_now_rfc3339(char out[CLOCK_RFC3339_LEN])
{
	clock_format_rfc3339((long long)time(NULL) * 1000000000, 0, out);
}

/* The condition of this type in status (borrowed), or NULL. */
json_t *
ctl_find_condition(json_t *status, const char *type)
{
	json_t *c;
	size_t i;

	json_array_foreach(json_object_get(status, "conditions"), i, c) {
		const char *t = json_string_value(json_object_get(c, "type"));

		if (t && strcmp(t, type) == 0)
			return c;
	}
	return NULL;
}

/* Set or update condition type in status, keeping lastTransitionTime
 * unless its status changes (Kubernetes API conventions). */
void
ctl_set_condition(json_t *status, const char *type, const char *st,
    const char *reason, const char *msg, json_int_t gen)
{
	json_t *conds = json_object_get(status, "conditions"), *c;
	char now[CLOCK_RFC3339_LEN];

	if (!json_is_array(conds)) {
		conds = json_array();
		json_object_set_new(status, "conditions", conds);
	}
	if ((c = ctl_find_condition(status, type)) == NULL) {
		c = json_object();
		json_object_set_new(c, "type", json_string(type));
		json_array_append_new(conds, c);
	}
	if (json_object_get(c, "status") == NULL ||
	    strcmp(json_string_value(json_object_get(c, "status")), st) != 0) {
		ctl_now_rfc3339(now);
		json_object_set_new(c, "status", json_string(st));
		json_object_set_new(c, "lastTransitionTime", json_string(now));
	}
	json_object_set_new(c, "reason", json_string(reason));
	json_object_set_new(c, "message", json_string(msg));
	json_object_set_new(c, "observedGeneration", json_integer(gen));
}

/* A field of the condition of this type in status, or "". */
const char *
ctl_condition_field(json_t *status, const char *type, const char *field)
{
	const char *v = json_string_value(json_object_get(ctl_find_condition(status,
	    type), field));

	return v ? v : "";
}

void
ctl_emit_event(struct controller *ctl, json_t *cx, const char *type,
    const char *reason, const char *msg)
{
	ctl_emit_event_kind(ctl, cx, "CodeExecution", type, reason, msg);
}

void
ctl_emit_event_kind(struct controller *ctl, json_t *cx, const char *kind,
    const char *type, const char *reason, const char *msg)
{
	struct k8s_error err;
	char now[CLOCK_RFC3339_LEN];
	json_t *ev;

	ctl_now_rfc3339(now);
	ev = json_pack("{s:s, s:s, s:{s:s}, s:{s:s, s:s, s:s, s:s, s:s},"
	    " s:s, s:s, s:s, s:{s:s}, s:s, s:s, s:i, s:s}",
	    "apiVersion", "v1", "kind", "Event",
	    "metadata", "generateName", "airlock-",
	    "involvedObject", "apiVersion", "airlock.dev/v1alpha1",
	    "kind", kind, "name", k8s_obj_name(cx),
	    "namespace", k8s_obj_namespace(cx), "uid", k8s_obj_uid(cx),
	    "reason", reason, "message", msg, "type", type,
	    "source", "component", CTL_FIELD_MANAGER,
	    "firstTimestamp", now, "lastTimestamp", now, "count", 1,
	    "reportingComponent", CTL_FIELD_MANAGER);
	if (k8s_create(ctl->client, &k8s_res_events, k8s_obj_namespace(cx),
	    ev, NULL, &err) != 0)
		log_warn("cannot record event", "reason=%s error=\"%s\"",
		    reason, k8s_strerror(err.code));
	json_decref(ev);
}

void
ctl_note(struct notes *ns, const char *type, const char *reason, const char *msg)
{
	if (ns->n < 4) {
		ns->e[ns->n].type = type;
		ns->e[ns->n].reason = reason;
		snprintf(ns->e[ns->n].msg, sizeof(ns->e[0].msg), "%s", msg);
		ns->n++;
	}
}

/*
 * Write what changed in status, and only that, then record the notes.
 *
 * A JSON merge patch of the changed keys (null for a removed one), which
 * carries the resourceVersion the change was computed from: the server
 * refuses it with 409 if the object moved on meanwhile, and the key is
 * retried against the newer state. Keys the controller did not change,
 * the node agent's result among them, are not in the patch, so a cache
 * that does not hold them (see trim_cx) cannot erase them. notes may be
 * NULL.
 */
int
ctl_write_status(struct controller *ctl, json_t *cx, json_t *status,
    struct notes *notes)
{
	return ctl_write_status_of(ctl, &cx_resource, cx, status, notes);
}

int
ctl_write_status_of(struct controller *ctl, const struct k8s_resource *res,
    json_t *cx, json_t *status, struct notes *notes)
{
	struct k8s_patch_opts po = { .type = K8S_PATCH_MERGE,
	    .subresource = "status" };
	json_t *old = json_object_get(cx, "status"), *diff, *patch, *v;
	json_t *out = NULL;
	struct k8s_error err;
	const char *k;
	int rc;

	diff = json_object();
	json_object_foreach(status, k, v)
		if (!json_equal(v, json_object_get(old, k)))
			json_object_set(diff, k, v);
	json_object_foreach(old, k, v)
		if (json_object_get(status, k) == NULL)
			json_object_set_new(diff, k, json_null());
	if (json_object_size(diff) == 0) {
		json_decref(diff);
		return 0;
	}
	patch = json_pack("{s:{s:s?}, s:o}", "metadata", "resourceVersion",
	    k8s_obj_rv(cx), "status", diff);
	rc = k8s_patch(ctl->client, res, k8s_obj_namespace(cx),
	    k8s_obj_name(cx), &po, patch, &out, &err);
	json_decref(patch);
	/*
	 * The caller's copy follows the write, so that a second write in the
	 * same reconcile is made at the new resourceVersion.
	 */
	if (rc == 0 && json_is_string(json_object_get(json_object_get(out,
	    "metadata"), "resourceVersion"))) {
		json_object_set(json_object_get(cx, "metadata"), "resourceVersion",
		    json_object_get(json_object_get(out, "metadata"),
		    "resourceVersion"));
		json_object_set(cx, "status", json_object_get(out, "status"));
	}
	json_decref(out);
	if (rc != 0 && rc != K8S_ECONFLICT && rc != K8S_ENOTFOUND)
		log_warn("cannot write status", "%s=%s/%s error=\"%s\"",
		    res->plural, k8s_obj_namespace(cx), k8s_obj_name(cx), err.message);
	/*
	 * Never stored, however often tried: the API server's limit (413), or
	 * etcd's ("request is too large"): the object has grown past what a
	 * status adds to (its metadata is the tenant's to grow).
	 */
	if (rc != 0 && ctl_too_large(&err))
		rc = CTL_ETOOLARGE;
	if (rc == 0 && notes) {
		for (int i = 0; i < notes->n; i++)
			ctl_emit_event_kind(ctl, cx, res == &cx_resource ?
			    "CodeExecution" : "CodeSession", notes->e[i].type,
			    notes->e[i].reason, notes->e[i].msg);
		if (notes->phase)
			metric_inc(ctl->m_phase, notes->phase);
	}
	return rc == K8S_ENOTFOUND ? 0 : rc;
}

/*
 * An execution so close to etcd's request limit that not even its Rejected
 * status can be written (the API server admitted it; nothing more fits)
 * would stay without a phase forever. It is deleted, with a Warning Event
 * that says why: the one end left to it.
 */
int
ctl_too_large_to_end(struct controller *ctl, json_t *cx)
{
	struct k8s_delete_opts del = { .precondition_uid = k8s_obj_uid(cx) };
	struct k8s_error err;
	char msg[300];
	int rc;

	snprintf(msg, sizeof(msg), "deleted: it takes %zu bytes as stored, too "
	    "close to etcd's limit for any status to be written (at most %d "
	    "leave room for a result)", jsonsize_value(cx),
	    CX_OBJECT_BUDGET - CX_STATUS_RESERVE);
	ctl_emit_event(ctl, cx, "Warning", "TooLarge", msg);
	rc = k8s_delete(ctl->client, &cx_resource, k8s_obj_namespace(cx),
	    k8s_obj_name(cx), &del, NULL, &err);
	log_warn("execution too large to end; deleted", "execution=%s/%s "
	    "bytes=%zu", k8s_obj_namespace(cx), k8s_obj_name(cx),
	    jsonsize_value(cx));
	return rc == K8S_ENOTFOUND ? 0 : rc;
}

int
ctl_too_large(const struct k8s_error *err)
{
	return err->http_status == 413 || strstr(err->message,
	    "etcdserver: request is too large") != NULL;
}

/* Phase, reason and message into status, with the Complete condition. */
static void
set_terminal(json_t *cx, json_t *status, const char *phase,
    const char *reason, const char *msg)
{
	json_int_t gen = json_integer_value(json_object_get(json_object_get(cx,
	    "metadata"), "generation"));
	char now[CLOCK_RFC3339_LEN];
	json_t *end;

	ctl_now_rfc3339(now);
	end = json_pack("{s:s, s:s, s:s, s:s, s:I}", "phase", phase, "reason",
	    reason, "message", msg, "completionTime", now,
	    "observedGeneration", (json_int_t)gen);
	json_object_update(status, end);
	json_decref(end);
	ctl_set_condition(status, "Complete", "True", reason, msg, gen);
}

int
ctl_finish(struct controller *ctl, json_t *cx, json_t *status,
    const char *phase, const char *reason, const char *msg)
{
	struct notes n = { 0 };
	struct k8s_error err;
	json_t *fresh = NULL, *own = NULL;
	int rc, written = 0;

	n.phase = phase;
	ctl_note(&n, strcmp(reason, "Cancelled") == 0 ? "Normal" : "Warning",
	    reason, msg);
	for (int attempt = 0;; attempt++) {
		set_terminal(cx, status, phase, reason, msg);
		rc = ctl_write_status(ctl, cx, status, &n);
		written = rc == 0;
		if (rc == CTL_ETOOLARGE) {
			/*
			 * No end of it can be stored: deleted, with the
			 * Event that says why, its one end left (issue 27:
			 * a tenant grew a started one's labels to etcd's
			 * limit, and it ran on forever). Measured afresh:
			 * the cache's copy is trimmed.
			 */
			json_t *cur = NULL;

			if (k8s_get(ctl->client, &cx_resource,
			    k8s_obj_namespace(cx), k8s_obj_name(cx), &cur,
			    &err) == 0 && strcmp(k8s_obj_uid(cur) ?
			    k8s_obj_uid(cur) : "", k8s_obj_uid(cx)) == 0 &&
			    jsonsize_value(cur) > CX_OBJECT_BUDGET)
				rc = ctl_too_large_to_end(ctl, cur);
			json_decref(cur);
			break;
		}
		if (rc != K8S_ECONFLICT || attempt == 2)
			break;
		/*
		 * The cache lagged behind the execution. The decision stands
		 * (what it was made on, a pod that is gone or failed, is
		 * not undone by a newer execution), unless the execution
		 * ended meanwhile or is another one of the same name: write
		 * it on the execution as it is now. Retrying through the
		 * queue instead would find the pod deleted and misname the
		 * end PodDeleted.
		 */
		json_t *cur = NULL;

		if (k8s_get(ctl->client, &cx_resource, k8s_obj_namespace(cx),
		    k8s_obj_name(cx), &cur, &err) != 0) {
			json_decref(cur);
			break;
		}
		if (strcmp(k8s_obj_uid(cur) ? k8s_obj_uid(cur) : "",
		    k8s_obj_uid(cx)) != 0 || cx_phase_terminal(json_string_value(
		    json_object_get(json_object_get(cur, "status"), "phase")))) {
			json_decref(cur);
			rc = 0;
			break;
		}
		json_decref(fresh);
		json_decref(own);
		fresh = cx = cur;
		own = status = json_deep_copy(json_object_get(cur, "status"));
		if (status == NULL)
			own = status = json_object();
	}
	if (rc == 0) {
		long long at = clock_mono_ms();
		const char *k;
		json_t *v;
		void *tmp;

		if (written)
			log_info("execution finished", "execution=%s/%s "
			    "phase=%s reason=%s", k8s_obj_namespace(cx),
			    k8s_obj_name(cx), phase, reason);
		/*
		 * Ended, by this write or another: the cache may show it
		 * in flight a while yet, and must not make it a new pod.
		 */
		pthread_mutex_lock(&ctl->lock);
		/* Drop what an execution deleted meanwhile left behind. */
		json_object_foreach_safe(ctl->ended, tmp, k, v)
			if (at - json_integer_value(v) >= 600000)
				json_object_del(ctl->ended, k);
		json_object_set_new(ctl->ended, k8s_obj_uid(cx),
		    json_integer(at));
		pthread_mutex_unlock(&ctl->lock);
	}
	json_decref(own);
	json_decref(fresh);
	return rc;
}
