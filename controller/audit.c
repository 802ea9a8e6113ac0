/*
 * audit.c - one audit record per execution, on the controller's standard
 * output (controller/docs/audit.md has the format).
 *
 * A finished execution is recorded by the leader's reconcile, which then
 * marks it (status.audited: true) so that no later leader records it
 * again: a record is written before its mark, so a crash between the two
 * repeats it (same uid) rather than loses it. One deleted before it
 * finished, or before its mark, is recorded from the cache's last copy
 * when the leader sees the deletion.
 *
 * The record holds no code and no output: the program's hash, and what
 * the status says of how it ended. A step of a session names it; a
 * session (docs/sessions.md) has a record of its own, once it ended or
 * went, marked the same way: who, its lifetime, its steps, how it ended.
 */
#include <errno.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "controller_priv.h"
#include "cx.h"
#include "log.h"
#include "session.h"
#include "xmalloc.h"

/* How long a uid recorded here is remembered without its mark seen. */
#define AUDIT_REMEMBER_MS	600000

static json_t *
nullable(json_t *v)
{
	return v ? json_incref(v) : json_null();
}

/* What every record starts with: its kind, when, and whose. */
static json_t *
head(const char *kind, const char *now, json_t *md)
{
	return json_pack("{s:s, s:s, s:s, s:o, s:o, s:o, s:o}",
	    "apiVersion", "airlock.dev/v1alpha1",
	    "kind", kind,
	    "time", now,
	    "namespace", nullable(json_object_get(md, "namespace")),
	    "name", nullable(json_object_get(md, "name")),
	    "uid", nullable(json_object_get(md, "uid")),
	    "user", nullable(json_object_get(json_object_get(md, "annotations"),
	    CX_ANN_CREATED_BY)));
}

json_t *
ctl_audit_record(const struct ctl_config *cfg, json_t *cx, const char *now,
    int deleted)
{
	json_t *md = json_object_get(cx, "metadata");
	json_t *spec = json_object_get(cx, "spec");
	json_t *st = json_object_get(cx, "status");
	const char *runtime = json_string_value(json_object_get(spec, "runtime"));
	const char *image = json_string_value(json_object_get(spec, "image"));
	const char *phase = json_string_value(json_object_get(st, "phase"));
	json_t *sha = json_object_get(st, "codeSha256"), *rec, *out;
	const struct ctl_profile *p;

	if (!json_is_string(sha))
		sha = json_object_get(cx, CTL_CACHED_SHA);
	if (image == NULL && cfg && runtime &&
	    (p = ctl_config_profile(cfg, runtime)) != NULL)
		image = p->image;
	if (deleted && !cx_phase_terminal(phase)) {
		/* Ended by its deletion: how far it got, and why it stopped. */
		rec = json_pack("{s:s, s:s}", "phase", phase ? phase : "Pending",
		    "reason", "Deleted");
	} else
		rec = json_pack("{s:o, s:o}", "phase", nullable(json_object_get(st,
		    "phase")), "reason", nullable(json_object_get(st, "reason")));
	out = head("CodeExecutionAudit", now, md);
	json_object_update_new(out, json_pack("{s:o, s:o, s:o, s:o, s:o, s:o,"
	    " s:o, s:o, s:o, s:o}",
	    "codeSha256", nullable(sha),
	    "runtime", nullable(json_object_get(spec, "runtime")),
	    "image", image ? json_string(image) : json_null(),
	    "phase", json_incref(json_object_get(rec, "phase")),
	    "reason", json_incref(json_object_get(rec, "reason")),
	    "exitCode", nullable(json_object_get(st, "exitCode")),
	    "durationMillis", nullable(json_object_get(st, "durationMillis")),
	    "peakMemoryBytes", nullable(json_object_get(st, "peakMemoryBytes")),
	    "cpuTimeMillis", nullable(json_object_get(st, "cpuTimeMillis")),
	    "startMode", nullable(json_object_get(st, "startMode"))));
	json_object_set_new(out, "session", nullable(json_object_get(spec,
	    "session")));
	json_decref(rec);
	return out;
}

json_t *
ctl_session_audit_record(const struct ctl_config *cfg, json_t *s,
    const char *now, int deleted)
{
	json_t *md = json_object_get(s, "metadata");
	json_t *spec = json_object_get(s, "spec");
	json_t *st = json_object_get(s, "status");
	const char *runtime = json_string_value(json_object_get(spec, "runtime"));
	const char *phase = json_string_value(json_object_get(st, "phase"));
	const struct ctl_profile *p = cfg && runtime ?
	    ctl_config_profile(cfg, runtime) : NULL;
	int ended = phase && strcmp(phase, "Ended") == 0;
	long long made = clock_parse_rfc3339(json_string_value(json_object_get(md,
	    "creationTimestamp")));
	long long end = clock_parse_rfc3339(json_string_value(json_object_get(st,
	    "endTime")));
	json_t *out;

	/* Ended by its deletion: how far it got. */
	if (deleted && !ended)
		end = clock_parse_rfc3339(now);
	out = head("CodeSessionAudit", now, md);
	json_object_update_new(out, json_pack("{s:o, s:o, s:o, s:o, s:o, s:o,"
	    " s:o, s:o, s:o, s:o, s:o, s:o, s:o}",
	    "runtime", nullable(json_object_get(spec, "runtime")),
	    "image", p ? json_string(p->image) : json_null(),
	    "phase", deleted && !ended ? json_string(phase ? phase : "Pending") :
	    nullable(json_object_get(st, "phase")),
	    "reason", deleted && !ended ? json_string("Deleted") :
	    nullable(json_object_get(st, "reason")),
	    "startMode", nullable(json_object_get(st, "startMode")),
	    "nodeName", nullable(json_object_get(st, "nodeName")),
	    "creationTimestamp", nullable(json_object_get(md, "creationTimestamp")),
	    "startTime", nullable(json_object_get(st, "startTime")),
	    "endTime", deleted && !ended ? json_string(now) :
	    nullable(json_object_get(st, "endTime")),
	    "lifetimeSeconds", made > 0 && end >= made ? json_integer(end - made) :
	    json_null(),
	    "executions", json_integer(json_integer_value(json_object_get(st,
	    "executions"))),
	    "restarts", json_integer(json_integer_value(json_object_get(st,
	    "restarts"))),
	    "maxLifetimeSeconds", json_integer(session_lifetime_s(s))));
	return out;
}

/* Write the line whole: one write(2), so lines never interleave. */
static void
emit(struct controller *ctl, json_t *rec)
{
	char *line = json_dumps(rec, JSON_COMPACT | JSON_ENSURE_ASCII);
	size_t len, off = 0;

	if (line == NULL)
		return;
	len = strlen(line);
	line = xrealloc(line, len + 2);
	line[len++] = '\n';
	line[len] = '\0';
	pthread_mutex_lock(&ctl->audit_lock);
	while (off < len) {
		ssize_t n = write(ctl->opts.audit_fd, line + off, len - off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			log_error("cannot write an audit record", "errno=%d", errno);
			break;
		}
		off += (size_t)n;
	}
	pthread_mutex_unlock(&ctl->audit_lock);
	free(line);
}

/* Record cx (or session s), once per process per uid; 1 if it was recorded now. */
static int
record_once(struct controller *ctl, json_t *cx, int deleted, int session)
{
	const char *uid = k8s_obj_uid(cx), *k;
	char now[CLOCK_RFC3339_LEN];
	long long t = clock_mono_ms();
	json_t *rec, *v;
	void *tmp;
	int fresh;

	if (uid == NULL)
		return 0;
	pthread_mutex_lock(&ctl->lock);
	fresh = json_object_get(ctl->audited, uid) == NULL;
	if (fresh) {
		/* Forgotten in a sweep a minute at most, not on each record. */
		if (t - ctl->audited_swept > 60000) {
			json_object_foreach_safe(ctl->audited, tmp, k, v)
				if (t - json_integer_value(v) > AUDIT_REMEMBER_MS)
					json_object_del(ctl->audited, k);
			ctl->audited_swept = t;
		}
		json_object_set_new(ctl->audited, uid, json_integer(t));
	}
	pthread_mutex_unlock(&ctl->lock);
	if (!fresh)
		return 0;
	{
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		clock_format_rfc3339((long long)ts.tv_sec * 1000000000 + ts.tv_nsec,
		    1, now);
	}
	rec = session ? ctl_session_audit_record(ctl->cfg, cx, now, deleted) :
	    ctl_audit_record(ctl->cfg, cx, now, deleted);
	if (rec == NULL)
		return 0;
	emit(ctl, rec);
	if (!session) {
		const char *labels[] = {
			json_string_value(json_object_get(rec, "namespace")),
			json_string_value(json_object_get(rec, "runtime")),
			json_string_value(json_object_get(rec, "phase")),
		};

		/* The tenant names its runtime: a profile's name, or "unknown". */
		if (labels[1] == NULL || ctl->cfg == NULL ||
		    ctl_config_profile(ctl->cfg, labels[1]) == NULL)
			labels[1] = "unknown";
		metric_inc_labels(ctl->m_finished, labels, 3);
	}
	json_decref(rec);
	return 1;
}

static int
finished(struct controller *ctl, const struct k8s_resource *res, json_t *cx)
{
	struct k8s_patch_opts po = { .type = K8S_PATCH_JSON,
	    .subresource = "status" };
	struct k8s_error err;
	json_t *patch;
	int rc;

	if (k8s_obj_uid(cx) == NULL)
		return 0;
	if (json_is_true(json_object_get(json_object_get(cx, "status"), "audited"))) {
		pthread_mutex_lock(&ctl->lock);
		json_object_del(ctl->audited, k8s_obj_uid(cx));
		pthread_mutex_unlock(&ctl->lock);
		return 0;
	}
	record_once(ctl, cx, 0, res == &session_resource);
	/* The mark, on this one only (a new one of the same name is not). */
	patch = json_pack("[{s:s, s:s, s:s}, {s:s, s:s, s:b}]",
	    "op", "test", "path", "/metadata/uid", "value", k8s_obj_uid(cx),
	    "op", "add", "path", "/status/audited", "value", 1);
	rc = k8s_patch(ctl->client, res, k8s_obj_namespace(cx),
	    k8s_obj_name(cx), &po, patch, NULL, &err);
	json_decref(patch);
	if (rc == K8S_ENOTFOUND || (rc == K8S_EHTTP && err.http_status == 422))
		return 0;	/* gone, or another of its name: recorded already */
	/*
	 * Its tenant grew it past what etcd stores (a mark is a few bytes):
	 * never marked, however often tried. The record is written; the
	 * execution goes on to its TTL unmarked (a restart may write the
	 * record again: at least once), or it would stay cached for good.
	 */
	if (rc != 0 && ctl_too_large(&err)) {
		log_warn("cannot mark an execution audited: too large to store; "
		    "left unmarked", "execution=%s/%s", k8s_obj_namespace(cx),
		    k8s_obj_name(cx));
		return 0;
	}
	if (rc != 0)
		log_warn("cannot mark an execution audited", "execution=%s/%s "
		    "error=\"%s\"", k8s_obj_namespace(cx), k8s_obj_name(cx),
		    err.message);
	return rc;
}

int
ctl_audit_finished(struct controller *ctl, json_t *cx)
{
	return finished(ctl, &cx_resource, cx);
}

int
ctl_audit_session_finished(struct controller *ctl, json_t *s)
{
	return finished(ctl, &session_resource, s);
}

/* Deleted: its record, by the leader, unless marked. */
static void
deleted(struct controller *ctl, json_t *obj, int session)
{
	if (!atomic_load(&ctl->leading) ||
	    json_is_true(json_object_get(json_object_get(obj, "status"), "audited")))
		return;
	record_once(ctl, obj, 1, session);
}

void
ctl_audit_deleted(struct controller *ctl, json_t *cx)
{
	deleted(ctl, cx, 0);
}

void
ctl_audit_session_deleted(struct controller *ctl, json_t *s)
{
	deleted(ctl, s, 1);
}
