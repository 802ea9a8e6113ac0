/*
 * agent.c - see agent.h. Three threads share the table of runs (one per
 * execution pod on this node, keyed by the pod's uid) under one lock:
 *
 *   informer  pods on this node: a run learns its timeout, output cap and
 *             execution from its pod, or is made from the pod's status
 *             when an event was missed (the agent restarted);
 *   events    containerd's task events: start time, exit status, OOM;
 *   ticker    every poll_ms: tail logs, enforce the deadline and the hard
 *             output cap, record finished runs, delete recorded pods.
 *
 * Network calls (containerd, the API server) are made outside the lock.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "clock.h"
#include "cx.h"
#include "crilog.h"
#include "ctrd.h"
#include "informer.h"
#include "jsonsize.h"
#include "log.h"
#include "podspec.h"
#include "result.h"
#include "quantity.h"
#include "usage.h"
#include "xmalloc.h"

#define CONTAINER	"run"		/* podspec's container name */
#define AGENT_WORKERS	4		/* API calls in parallel */
#define MAX_RECORD	(64 * 1024)	/* a CRI log record; containerd cuts at 16 KiB */
#define READ_CHUNK	(256 * 1024)
#define VERIFY_MS	5000		/* a started container no pod claims: not ours */
#define LOG_STALE_S	600		/* a pod log dir untouched that long, no pod */
#define KILL_RETRY_MS	1000		/* a kill with no exit after it: again */



struct run {
	struct run	*next;
	char		*uid, *ns, *pod;	/* the pod */
	char		*cx;			/* its execution, once verified */
	char		*cx_uid;		/* and that execution's uid */
	size_t		 budget;		/* encoded bytes of output in status */
	char		*cid;			/* the container, once known */
	int		 verified;		/* our pod, seen in the cache */
	long long	 seen_ms;		/* made, for VERIFY_MS */
	long long	 timeout_ms;
	size_t		 max_out;
	int64_t		 start_ns, deadline_ns;

	struct crilog	*log;
	struct agent_logf lf;			/* its CRI log, followed */
	long long	 last_read_ms;		/* last time the log grew */

	int		 exited;
	uint32_t	 status;
	int64_t		 exited_ns;
	long long	 exit_seen_ms;
	int		 oom;
	enum cx_kill	 why;
	char		*isolation;		/* why the sandbox is refused */
	int		 kill_sent;
	long long	 kill_at_ms;		/* sent then; again if no exit */
	int64_t		 sandbox_killed_ns;	/* SIGKILL landed on runsc-sandbox */
	uint32_t	 pid;			/* the task's, from TaskStart */
	int		 usage_done;
	struct usage	 usage;			/* -1: the node did not say */

	int		 recorded;		/* result written, or someone's */
	int		 busy;			/* a call is in flight for it */
	long long	 retry_ms;
	int		 attempts;
};

struct agent {
	struct k8s_client	*client;
	struct agent_opts	 o;
	struct ctrd		*ctrd;
	struct informer		*pods;
	char			*field_selector;

	pthread_mutex_t		 lock;
	struct run		*runs;
	atomic_int		 stop;
	atomic_int		 ctrd_ok;
	int			 started;
	pthread_t		 ev_th, tick_th;
	pthread_t		 workers[AGENT_WORKERS];
	long long		 next_sweep_ms;
	int			 sweeping;
	struct todo		*q;		/* for the workers; lock held */
	size_t			 qn, qcap;
	pthread_cond_t		 qcond;

	struct metric		*m_results, *m_record, *m_active, *m_swept;
};

static int64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* RFC 3339 seconds (as the kubelet writes them) to ns, or 0. */
static int64_t
parse_time(const char *s)
{
	long long t = clock_parse_rfc3339(s);

	return t < 0 ? 0 : (int64_t)t * 1000000000;
}

static struct run *
find_run(struct agent *a, const char *uid)
{
	struct run *r;

	for (r = a->runs; r; r = r->next)
		if (strcmp(r->uid, uid) == 0)
			return r;
	return NULL;
}

static struct run *
new_run(struct agent *a, const char *uid, const char *ns, const char *pod)
{
	struct run *r = xcalloc(1, sizeof(*r));

	r->uid = xstrdup(uid);
	r->ns = xstrdup(ns);
	r->pod = xstrdup(pod);
	r->lf.fd = -1;
	r->usage.peak_memory = r->usage.cpu_ns = -1;
	r->seen_ms = clock_mono_ms();
	r->next = a->runs;
	a->runs = r;
	return r;
}

static void
free_run(struct run *r)
{
	if (r->lf.fd >= 0)
		close(r->lf.fd);
	crilog_free(r->log);
	free(r->uid);
	free(r->ns);
	free(r->pod);
	free(r->cx);
	free(r->cx_uid);
	free(r->isolation);
	free(r->cid);
	free(r);
}

/* An annotation's number, clamped to [lo, hi]; dflt when absent or bad. */
static long long
ann_number(json_t *ann, const char *key, long long lo, long long hi,
    long long dflt)
{
	long long n;

	if (quantity_parse_int(json_string_value(json_object_get(ann, key)),
	    LLONG_MIN, LLONG_MAX, &n) != 0)
		return dflt;
	return n < lo ? lo : n > hi ? hi : n;
}

int
agent_pod_limits(json_t *pod, struct agent_limits *out)
{
	json_t *md = json_object_get(pod, "metadata"), *ref;
	json_t *ann = json_object_get(md, "annotations");
	const char *owner = NULL;
	size_t i;

	memset(out, 0, sizeof(*out));
	out->cx = podspec_pod_execution(pod, &out->cx_uid);
	if (out->cx == NULL || out->cx_uid == NULL)
		return -1;
	json_array_foreach(json_object_get(md, "ownerReferences"), i, ref)
		if (json_is_true(json_object_get(ref, "controller")))
			owner = json_string_value(json_object_get(ref, "uid"));
	if (owner == NULL || strcmp(owner, out->cx_uid) != 0)
		return -1;
	/* The CRD's ranges: 1 to 3600 s, 1 byte to 1 MiB per stream. */
	out->timeout_ms = ann_number(ann, CX_ANN_TIMEOUT_MS, 1000,
	    CX_MAX_TIMEOUT_S * 1000LL, CX_DEFAULT_TIMEOUT_S * 1000LL);
	out->max_out = (size_t)ann_number(ann, CX_ANN_MAX_OUTPUT, 1,
	    CX_MAX_MAX_BYTES, CX_DEFAULT_MAX_BYTES);
	out->budget = (size_t)ann_number(ann, CX_ANN_OUTPUT_BUDGET, 0,
	    CX_OBJECT_BUDGET, 2 * CX_DEFAULT_MAX_BYTES);
	return 0;
}

void
agent_fit_output(const char *out, size_t olen, const char *err, size_t elen,
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

/* What the run learns from its pod (lock held). */
static void
learn_pod(struct agent *a, struct run *r, json_t *pod)
{
	struct agent_limits lim;

	if (!r->verified && agent_pod_limits(pod, &lim) == 0) {
		r->verified = 1;
		r->cx = xstrdup(lim.cx);
		r->cx_uid = xstrdup(lim.cx_uid);
		r->timeout_ms = lim.timeout_ms;
		r->max_out = lim.max_out;
		r->budget = lim.budget;
		r->log = crilog_new(r->max_out, MAX_RECORD);
		if (r->start_ns)
			r->deadline_ns = r->start_ns + r->timeout_ms * 1000000;
	}
	(void)a;
}

/*
 * A pod the cache announced: make or complete its run. A run made here
 * rather than from a TaskStart event (the agent was down when it started)
 * takes its start, and maybe its exit, from the kubelet's report.
 */
static void
pod_seen(struct agent *a, json_t *pod)
{
	json_t *md = json_object_get(pod, "metadata");
	json_t *cs = json_array_get(json_object_get(json_object_get(pod,
	    "status"), "containerStatuses"), 0);
	json_t *state = json_object_get(cs, "state");
	const char *uid = k8s_obj_uid(pod);
	const char *cid = json_string_value(json_object_get(cs, "containerID"));
	json_t *term = json_object_get(state, "terminated");
	struct run *r;

	if (uid == NULL || k8s_obj_namespace(pod) == NULL)
		return;
	pthread_mutex_lock(&a->lock);
	r = find_run(a, uid);
	if (r == NULL && cid == NULL) {
		pthread_mutex_unlock(&a->lock);
		return;			/* not started: the event will come */
	}
	if (r == NULL) {
		if (json_object_get(md, "deletionTimestamp")) {
			pthread_mutex_unlock(&a->lock);
			return;
		}
		r = new_run(a, uid, k8s_obj_namespace(pod), k8s_obj_name(pod));
	}
	learn_pod(a, r, pod);
	if (r->cid == NULL && cid && strncmp(cid, "containerd://", 13) == 0)
		r->cid = xstrdup(cid + 13);
	if (r->start_ns == 0) {
		int64_t t = parse_time(json_string_value(json_object_get(
		    json_object_get(state, "running"), "startedAt")));

		if (t == 0)
			t = parse_time(json_string_value(json_object_get(term,
			    "startedAt")));
		if (t) {
			r->start_ns = t;
			r->deadline_ns = t + r->timeout_ms * 1000000;
		}
	}
	if (!r->exited && term && json_integer_value(json_object_get(term,
	    "exitCode")) >= 0 && json_object_get(term, "exitCode")) {
		const char *why = json_string_value(json_object_get(term,
		    "reason"));

		r->exited = 1;
		r->status = (uint32_t)json_integer_value(json_object_get(term,
		    "exitCode"));
		r->exited_ns = parse_time(json_string_value(json_object_get(term,
		    "finishedAt")));
		if (r->exited_ns == 0)
			r->exited_ns = now_ns();
		r->exit_seen_ms = clock_mono_ms();
		if (why && strcmp(why, "OOMKilled") == 0)
			r->oom = 1;
	}
	pthread_mutex_unlock(&a->lock);
}

static void
pod_add(void *arg, json_t *pod)
{
	pod_seen(arg, pod);
}

static void
pod_update(void *arg, json_t *old, json_t *cur)
{
	(void)old;
	pod_seen(arg, cur);
}

static void
pod_delete(void *arg, json_t *pod, int unknown)
{
	struct agent *a = arg;
	struct run *r;

	(void)unknown;
	pthread_mutex_lock(&a->lock);
	/*
	 * Gone before its result was recorded: cancelled, or deleted by
	 * hand. The controller decides what that execution became.
	 */
	if ((r = find_run(a, k8s_obj_uid(pod))) != NULL && !r->exited)
		r->recorded = 1;
	pthread_mutex_unlock(&a->lock);
}

/*
 * Of a pod the cache keeps what the agent reads: identity, its execution's
 * uid, the three annotations meant for it (not the code, up to 192 KiB),
 * and the container's status.
 */
static json_t *
trim_pod(json_t *pod)
{
	static const char *const keep[] = { CX_ANN_NAME,
	    CX_ANN_TIMEOUT_MS, CX_ANN_MAX_OUTPUT,
	    CX_ANN_OUTPUT_BUDGET };
	json_t *md = json_object_get(pod, "metadata");
	json_t *ann = json_object_get(md, "annotations");
	json_t *euid = json_object_get(json_object_get(md, "labels"),
	    CX_LABEL_UID);
	json_t *out, *a = json_object(), *l = json_object(), *ref;
	size_t j;

	for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++)
		if (json_object_get(ann, keep[i]))
			json_object_set(a, keep[i], json_object_get(ann, keep[i]));
	if (euid)
		json_object_set(l, CX_LABEL_UID, euid);
	out = json_pack("{s:{s:O*, s:O*, s:O*, s:O*, s:O*, s:o, s:o},"
	    " s:{s:O*}}",
	    "metadata", "name", json_object_get(md, "name"),
	    "namespace", json_object_get(md, "namespace"),
	    "uid", json_object_get(md, "uid"),
	    "resourceVersion", json_object_get(md, "resourceVersion"),
	    "deletionTimestamp", json_object_get(md, "deletionTimestamp"),
	    "annotations", a, "labels", l,
	    "status", "containerStatuses", json_object_get(json_object_get(pod,
	    "status"), "containerStatuses"));
	if (out == NULL)
		return json_incref(pod);
	json_array_foreach(json_object_get(md, "ownerReferences"), j, ref)
		if (json_is_true(json_object_get(ref, "controller")))
			json_object_set_new(json_object_get(out, "metadata"),
			    "ownerReferences", json_pack("[{s:b, s:O*}]",
			    "controller", 1, "uid", json_object_get(ref, "uid")));
	return out;
}

/* --- containerd events ---------------------------------------------------- */

const char *
agent_sandbox_check(const char *cmdline, size_t len)
{
	const char *p = cmdline, *end = cmdline + len;
	size_t alen;
	int none = -1;

	if (len == 0 || strnlen(cmdline, len) == len)
		return "its process cannot be read (is the agent in the host's "
		    "PID namespace?)";
	if (strcmp(p, "runsc-sandbox") != 0)
		return "it is not a gVisor sandbox";
	/*
	 * runsc's flags come before the command; the last --network wins.
	 * The last argument may lack its NUL (a process can rewrite its
	 * arguments): every comparison is bounded by alen.
	 */
	for (p += strlen(p) + 1; p < end; p += alen + 1) {
		alen = strnlen(p, (size_t)(end - p));
		if (alen == 4 && memcmp(p, "boot", 4) == 0)
			break;
		if (alen >= 10 && memcmp(p, "--network=", 10) == 0)
			none = alen == 14 && memcmp(p + 10, "none", 4) == 0;
		else if (alen >= 9 && memcmp(p, "-network=", 9) == 0)
			none = alen == 13 && memcmp(p + 9, "none", 4) == 0;
	}
	if (none != 1)
		return "its gVisor sandbox has a network (runsc --network is not none)";
	return NULL;
}

/* NULL if pid is gVisor with no network, else why not (static). */
static const char *
sandbox_refused(uint32_t pid)
{
	static char buf[64 * 1024];	/* the events thread's own */
	char path[64];
	ssize_t n = 0, r;
	int fd;

	snprintf(path, sizeof(path), "/proc/%u/cmdline", pid);
	if (pid > 1 && (fd = open(path, O_RDONLY | O_CLOEXEC)) >= 0) {
		while (n < (ssize_t)sizeof(buf) && (r = read(fd, buf + n,
		    sizeof(buf) - (size_t)n)) > 0)
			n += r;
		close(fd);
	}
	return agent_sandbox_check(buf, n > 0 ? (size_t)n : 0);
}

/* SIGKILL to pid through a pidfd, if it is still a gVisor sandbox. */
static void
kill_pid(uint32_t pid)
{
	int pfd;

	if (pid > 1 && (pfd = pidfd_open((pid_t)pid, 0)) >= 0) {
		(void)pidfd_send_signal(pfd, SIGKILL, NULL, 0);
		close(pfd);
	}
}

int
agent_exit_is_init(const struct ctrd_event *ev)
{
	/* No id at all: containerd before 1.0 only; take it as the init's. */
	return ev->exec_id == NULL || ev->exec_id[0] == '\0' ||
	    strcmp(ev->exec_id, ev->container_id) == 0;
}

static int
on_task_event(void *arg, const struct ctrd_event *ev)
{
	struct agent *a = arg;
	struct k8s_error err;
	json_t *labels = NULL;
	struct run *r;

	if (ev->container_id == NULL)
		return 0;
	if (ev->kind == CTRD_EV_TASK_START) {
		const char *uid, *ns, *pod, *name, *bad;
		int stop_now = 0;

		if (ctrd_container_labels(a->ctrd, ev->container_id, &labels,
		    &err) != 0) {
			log_warn("cannot read container labels", "container=%s "
			    "error=\"%s\"", ev->container_id, err.message);
			return 0;
		}
		uid = json_string_value(json_object_get(labels, "io.kubernetes.pod.uid"));
		ns = json_string_value(json_object_get(labels, "io.kubernetes.pod.namespace"));
		pod = json_string_value(json_object_get(labels, "io.kubernetes.pod.name"));
		name = json_string_value(json_object_get(labels, "io.kubernetes.container.name"));
		if (uid && ns && pod && name && strcmp(name, CONTAINER) == 0 &&
		    strncmp(pod, "airlock-", 8) == 0) {
			pthread_mutex_lock(&a->lock);
			if ((r = find_run(a, uid)) == NULL)
				r = new_run(a, uid, ns, pod);
			if (r->cid == NULL)
				r->cid = xstrdup(ev->container_id);
			r->start_ns = ev->ts_ns;
			r->pid = ev->pid;
			if (r->isolation == NULL && (bad = sandbox_refused(ev->pid))) {
				/*
				 * Stopped now if the pod is known to be an
				 * execution's (every ms runs code); else by the
				 * ticker once it is, and never if it is not.
				 */
				r->isolation = xstrdup(bad);
				r->why = CX_KILL_ISOLATION;
				stop_now = r->verified;
			}
			if (r->verified)
				r->deadline_ns = r->start_ns + r->timeout_ms * 1000000;
			pthread_mutex_unlock(&a->lock);
			if (stop_now) {
				log_warn("sandbox refused", "pod=%s/%s problem=\"%s\"",
				    ns, pod, bad);
				kill_pid(ev->pid);
			}
		}
		json_decref(labels);
		return 0;
	}
	pthread_mutex_lock(&a->lock);
	for (r = a->runs; r; r = r->next) {
		if (r->cid == NULL || strcmp(r->cid, ev->container_id) != 0)
			continue;
		if (ev->kind == CTRD_EV_TASK_OOM) {
			r->oom = 1;
		} else if (ev->kind == CTRD_EV_TASK_EXIT && !r->exited &&
		    agent_exit_is_init(ev)) {
			r->exited = 1;
			r->status = ev->exit_status;
			r->exited_ns = ev->exited_ns ? ev->exited_ns : ev->ts_ns;
			r->exit_seen_ms = clock_mono_ms();
			/*
			 * Killed with its sandbox: the program stopped when
			 * the signal landed, not when the shim noticed.
			 */
			if (r->sandbox_killed_ns &&
			    r->sandbox_killed_ns < r->exited_ns)
				r->exited_ns = r->sandbox_killed_ns;
		}
	}
	pthread_mutex_unlock(&a->lock);
	return 0;
}

static void *
events_main(void *arg)
{
	static const char *const filters[] = {
		"namespace==k8s.io,topic==\"/tasks/start\"",
		"namespace==k8s.io,topic==\"/tasks/exit\"",
		"namespace==k8s.io,topic==\"/tasks/oom\"",
		NULL,
	};
	struct agent *a = arg;
	struct k8s_error err;
	long backoff = 100;
	char *v;

	while (!atomic_load(&a->stop)) {
		if (ctrd_version(a->ctrd, &v, &err) != 0) {
			atomic_store(&a->ctrd_ok, 0);
			log_warn("containerd does not answer", "error=\"%s\"",
			    err.message);
		} else {
			if (!atomic_load(&a->ctrd_ok))
				log_info("containerd answers", "version=%s", v);
			free(v);
			atomic_store(&a->ctrd_ok, 1);
			backoff = 100;
			if (ctrd_subscribe(a->ctrd, filters, on_task_event, a,
			    &a->stop, &err) == K8S_ECANCELED)
				break;
			log_warn("containerd event stream ended", "error=\"%s\"",
			    err.message);
		}
		for (long t = 0; t < backoff && !atomic_load(&a->stop); t += 50)
			usleep(50000);
		if (backoff < 5000)
			backoff *= 2;
	}
	return NULL;
}

/* --- the ticker ----------------------------------------------------------- */

static size_t
drain(int fd, struct crilog *log)
{
	static char chunk[READ_CHUNK];	/* the ticker's own */
	size_t total = 0;
	ssize_t n;

	while ((n = read(fd, chunk, sizeof(chunk))) > 0) {
		crilog_feed(log, chunk, (size_t)n);
		total += (size_t)n;
	}
	return total;
}

static int
open_log(struct agent_logf *lf, const char *path)
{
	struct stat st;

	if ((lf->fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0)
		return -1;
	if (fstat(lf->fd, &st) != 0) {
		close(lf->fd);
		return lf->fd = -1;
	}
	lf->dev = st.st_dev;
	lf->ino = st.st_ino;
	return 0;
}

size_t
agent_follow_log(struct agent_logf *lf, const char *path, struct crilog *log)
{
	struct stat st;
	size_t n;

	if (lf->fd < 0 && open_log(lf, path) != 0)
		return 0;
	n = drain(lf->fd, log);
	/*
	 * Rotated: the kubelet renamed the file and containerd writes a new
	 * one under the name. The old one is complete once the new one is
	 * there; what is left of it is read before the new one.
	 */
	if (stat(path, &st) == 0 && (st.st_ino != lf->ino ||
	    st.st_dev != lf->dev)) {
		n += drain(lf->fd, log);
		close(lf->fd);
		lf->fd = -1;
		if (open_log(lf, path) == 0)
			n += drain(lf->fd, log);
	}
	return n;
}

/* Read what the run's log gained (lock held: reads a local file only). */
static void
tail(struct agent *a, struct run *r)
{
	char *path = xasprintf("%s/%s_%s_%s/%s/0.log", a->o.pod_logs_dir,
	    r->ns, r->pod, r->uid, CONTAINER);

	if (agent_follow_log(&r->lf, path, r->log) > 0)
		r->last_read_ms = clock_mono_ms();
	free(path);
}

enum action { ACT_NONE, ACT_KILL, ACT_RECORD, ACT_DELETE, ACT_SWEEP };

struct todo {
	enum action	 act;
	char		*uid;
};

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
    const char *refused, const char **reasonp)
{
	char sched[300];
	struct cx_run_end e = { .why = r->why, .oom = r->oom,
	    .exit_status = (int)(int32_t)r->status, .timeout_ms = r->timeout_ms,
	    .hard_cap = a->o.hard_cap, .isolation = r->isolation,
	    .refused = refused, .start_ns = r->start_ns,
	    .exited_ns = r->exited_ns, .node = a->o.node_name,
	    .scheduled = sched, .out = crilog_stdout(r->log),
	    .err = crilog_stderr(r->log), .budget = r->budget,
	    .peak_memory = r->usage.peak_memory, .cpu_ns = r->usage.cpu_ns };
	struct cx_outcome oc;
	size_t olen, elen, i;
	const char *key;
	json_t *p, *st, *v;

	const char *otext = crilog_text(e.out, &olen);
	const char *etext = crilog_text(e.err, &elen);

	agent_fit_output(otext, olen, etext, elen, r->budget, &e.out_keep,
	    &e.err_keep);
	snprintf(sched, sizeof(sched), "scheduled to node %s", a->o.node_name);
	if ((st = cx_result_status(&e, &oc)) == NULL)
		return NULL;
	*reasonp = oc.reason_name;
	p = json_pack("[{s:s, s:s, s:s}, {s:s, s:s, s:s}]",
	    "op", "test", "path", "/metadata/uid", "value", r->cx_uid,
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
	json_decref(st);
	return p;
}

/*
 * A status patch that only tests path == value: it changes nothing, so it
 * reads an execution (into *cur, when not NULL) with no permission but
 * the status patch the agent has anyway. 0, or the k8s_patch error.
 */
static int
probe(struct agent *a, const char *ns, const char *cx, const char *path,
    const char *value, json_t **cur, struct k8s_error *err)
{
	struct k8s_patch_opts po = { .type = K8S_PATCH_JSON,
	    .subresource = "status" };
	json_t *p = json_pack("[{s:s, s:s, s:s}]", "op", "test", "path", path,
	    "value", value);
	int rc = k8s_patch(a->client, &cx_resource, ns, cx, &po, p, cur, err);

	json_decref(p);
	return rc;
}

/*
 * The execution's phase as the server has it ("" if none), or NULL. *gone
 * when it is gone, or another object now has its name (the uid test).
 */
static char *
read_phase(struct agent *a, struct run *r, int *gone)
{
	struct k8s_error err;
	json_t *cur = NULL;
	const char *ph;
	char *out;
	int rc = probe(a, r->ns, r->cx, "/metadata/uid", r->cx_uid, &cur, &err);

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
 * Record r's result (r is busy: the ticker leaves it alone). 1 when the
 * execution has its final result, whoever wrote it; 0 to try again later.
 * A result refused as too large is not retried as it is: it is recorded
 * once more without its output (ResultTooLarge), so the execution ends.
 */
static int
record(struct agent *a, struct run *r)
{
	static const char *const expect[] = { "Running", "Pending" };
	struct k8s_patch_opts po = { .type = K8S_PATCH_JSON,
	    .subresource = "status" };
	struct k8s_error err;
	const char *reason = NULL;
	json_t *patch[2];
	char *ph, refused[256];
	int gone, done = -1, rc = K8S_EHTTP, big = 0;

	refused[0] = '\0';
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
			    refused : NULL, &reason);
		pthread_mutex_unlock(&a->lock);
		for (int i = 0; i < 2 && done < 0 && !big; i++) {
			rc = k8s_patch(a->client, &cx_resource, r->ns, r->cx, &po,
			    patch[i], NULL, &err);
			if (rc == 0) {
				/* From containerd's exited_at to the result stored. */
				long long ms = (long long)((now_ns() -
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
	if (done >= 0)
		return done;
	/* The tests failed: see what the execution is now. */
	ph = read_phase(a, r, &gone);
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
static int
delete_pod(struct agent *a, const char *ns, const char *name, const char *uid)
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

/* --- the sweep ------------------------------------------------------------- */

/*
 * Whether pod's execution is gone: 1 gone (or replaced by a new one of
 * the same name), 0 there, -1 unknown. The probe is a JSON patch that
 * changes nothing, on the status the agent may patch anyway: it reads no
 * execution, which the agent may not.
 */
static int
execution_gone(struct agent *a, const char *ns, const char *cx,
    const char *cx_uid)
{
	struct k8s_error err;
	int rc = cx_uid ? probe(a, ns, cx, "/metadata/uid", cx_uid, NULL, &err) :
	    probe(a, ns, cx, "/apiVersion", "airlock.dev/v1alpha1", NULL, &err);

	if (rc == 0)
		return 0;
	if (rc == K8S_ENOTFOUND || (cx_uid && err.http_status == 422))
		return 1;
	log_warn("cannot tell whether an execution exists", "execution=%s/%s "
	    "error=\"%s\"", ns, cx, err.message);
	return -1;
}

/*
 * Delete the pods on this node whose execution is gone. The controller
 * deletes them as the execution goes, and the garbage collector after it;
 * this catches what both missed (a pod made by hand, owner references
 * removed, or the controller down), the pods that never started among
 * them, which no result would ever collect.
 */
static void
sweep_orphans(struct agent *a)
{
	json_t *pods = informer_list(a->pods), *pod;
	size_t i;

	json_array_foreach(pods, i, pod) {
		json_t *md = json_object_get(pod, "metadata");
		const char *cx_uid;
		const char *cx = podspec_pod_execution(pod, &cx_uid);
		const char *pns = k8s_obj_namespace(pod);
		const char *name = k8s_obj_name(pod), *uid = k8s_obj_uid(pod);

		if (cx == NULL || pns == NULL || name == NULL || uid == NULL ||
		    json_object_get(md, "deletionTimestamp") ||
		    execution_gone(a, pns, cx, cx_uid) != 1)
			continue;
		log_info("deleting orphan pod", "pod=%s/%s execution=%s", pns,
		    name, cx);
		if (delete_pod(a, pns, name, uid))
			metric_inc(a->m_swept, "pods");
	}
	json_decref(pods);
}

/* Remove name under dirfd and all it holds, depth levels down at most. */
static int
remove_tree(int dirfd, const char *name, int depth)
{
	struct dirent *de;
	DIR *d;
	int fd, rc = 0;

	if (unlinkat(dirfd, name, 0) == 0)
		return 0;
	if (errno != EISDIR && errno != EPERM)
		return -1;
	if (depth == 0 || (fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY |
	    O_NOFOLLOW | O_CLOEXEC)) < 0)
		return -1;
	if ((d = fdopendir(fd)) == NULL) {
		close(fd);
		return -1;
	}
	while ((de = readdir(d)) != NULL)
		if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0 &&
		    remove_tree(fd, de->d_name, depth - 1) != 0)
			rc = -1;
	closedir(d);
	if (rc == 0 && unlinkat(dirfd, name, AT_REMOVEDIR) != 0)
		rc = -1;
	return rc;
}

/*
 * ns, pod and uid from a kubelet pod log directory's name,
 * "<namespace>_<pod>_<uid>" (none of the three holds a '_'), if the pod is
 * an execution pod, "airlock-" and its execution's uid. 0 or -1.
 */
int
agent_log_dir_name(const char *name, char *ns, char *pod, char *uid,
    size_t size)
{
	const char *u1 = strchr(name, '_'), *u2 = u1 ? strchr(u1 + 1, '_') : NULL;
	const char *p;
	size_t nl, pl, ul;

	if (u1 == NULL || u2 == NULL || strchr(u2 + 1, '_'))
		return -1;
	nl = (size_t)(u1 - name);
	pl = (size_t)(u2 - u1 - 1);
	ul = strlen(u2 + 1);
	if (nl == 0 || ul == 0 || nl >= size || pl >= size || ul >= size)
		return -1;
	p = u1 + 1;
	if (pl != 8 + 36 || strncmp(p, "airlock-", 8) != 0 ||
	    strspn(p + 8, "0123456789abcdef-") != 36)
		return -1;
	memcpy(ns, name, nl);
	ns[nl] = '\0';
	memcpy(pod, p, pl);
	pod[pl] = '\0';
	memcpy(uid, u2 + 1, ul + 1);
	return 0;
}

/*
 * Remove the log directories of execution pods that are gone, older than
 * LOG_STALE_S. The kubelet removes a pod's logs with the pod; what it
 * missed (it was restarted, or the node's disk was full) would stay, and
 * hold the output of tenant code, forever.
 */
static void
sweep_logs(struct agent *a)
{
	char ns[256], pod[256], uid[256];
	time_t now = time(NULL);
	struct dirent *de;
	struct stat st;
	struct run *r;
	int dfd;
	DIR *d;

	if ((d = opendir(a->o.pod_logs_dir)) == NULL)
		return;
	dfd = dirfd(d);
	while ((de = readdir(d)) != NULL) {
		struct k8s_error err;
		json_t *cur = NULL;
		int rc, known;

		if (agent_log_dir_name(de->d_name, ns, pod, uid, sizeof(ns)) != 0 ||
		    (a->o.namespace && strcmp(ns, a->o.namespace) != 0) ||
		    fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
		    !S_ISDIR(st.st_mode) || now - st.st_mtime < LOG_STALE_S)
			continue;
		/* A run of that very pod: name and uid (a name is reused). */
		pthread_mutex_lock(&a->lock);
		known = (r = find_run(a, uid)) != NULL && strcmp(r->ns, ns) == 0 &&
		    strcmp(r->pod, pod) == 0;
		pthread_mutex_unlock(&a->lock);
		if (known)
			continue;
		/* The pod may be someone else's of that name: ask. */
		rc = k8s_get(a->client, &k8s_res_pods, ns, pod, &cur, &err);
		if (rc == 0 && strcmp(k8s_obj_uid(cur) ? k8s_obj_uid(cur) : "",
		    uid) == 0) {
			json_decref(cur);
			continue;
		}
		json_decref(cur);
		if (rc != 0 && rc != K8S_ENOTFOUND)
			continue;
		if (remove_tree(dfd, de->d_name, 4) == 0) {
			log_info("removed stale pod logs", "dir=%s", de->d_name);
			metric_inc(a->m_swept, "logdirs");
		} else {
			log_warn("cannot remove stale pod logs", "dir=%s "
			    "error=\"%s\"", de->d_name, strerror(errno));
		}
	}
	closedir(d);
}

/*
 * 1 if pid is a gVisor sandbox: runsc re-executes itself with argv[0]
 * "runsc-sandbox" for the sentry, which runs every process of the pod.
 */
static int
is_sandbox(uint32_t pid)
{
	char path[64], arg0[32];
	ssize_t n;
	int fd;

	if (pid <= 1)
		return 0;
	snprintf(path, sizeof(path), "/proc/%u/cmdline", pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return 0;
	n = read(fd, arg0, sizeof(arg0) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	arg0[n] = '\0';
	return strcmp(arg0, "runsc-sandbox") == 0;
}

/*
 * Stop a run's program now. Under gVisor the task's pid is the sandbox's
 * host process: SIGKILL to it stops every guest process at once, where
 * containerd's Tasks/Kill goes through the shim running `runsc kill`
 * (measured 76-156 ms on the test node). Needs the host's pid namespace,
 * as the node agent's DaemonSet has. Elsewhere (runc), Tasks/Kill.
 * Returns the time the signal was sent when it went to the sandbox, or 0.
 */
static int64_t
kill_run(struct agent *a, const char *cid, uint32_t pid, struct k8s_error *err)
{
	int64_t t = now_ns();
	int pfd;

	/*
	 * Through a pidfd taken before the check: a pid reused between the
	 * look at its command line and the signal cannot be hit.
	 */
	if (pid > 1 && (pfd = pidfd_open((pid_t)pid, 0)) >= 0) {
		int ok = is_sandbox(pid) && pidfd_send_signal(pfd, SIGKILL,
		    NULL, 0) == 0;

		close(pfd);
		if (ok)
			return t;
	}
	if (ctrd_kill(a->ctrd, cid, SIGKILL, 1, err) != 0 &&
	    err->code != K8S_ENOTFOUND)
		log_warn("cannot kill", "container=%s error=\"%s\"", cid,
		    err->message);
	return 0;
}

/*
 * Carry out one decision of the ticker. Kills run on the ticker itself;
 * records and deletes (API calls, ~50 ms each) on the workers, so a burst
 * of exits is recorded in parallel, not one after another.
 */
static void
act(struct agent *a, struct todo *td)
{
	struct run *r, **pp;
	struct k8s_error err;
	char *cid = NULL;
	int ok;

	if (td->act == ACT_SWEEP) {
		sweep_orphans(a);
		if (!a->o.keep_stale_logs)
			sweep_logs(a);
		pthread_mutex_lock(&a->lock);
		a->sweeping = 0;
		pthread_mutex_unlock(&a->lock);
		return;
	}
	pthread_mutex_lock(&a->lock);
	r = find_run(a, td->uid);
	if (r && r->cid)
		cid = xstrdup(r->cid);
	pthread_mutex_unlock(&a->lock);
	if (r == NULL)
		goto out;
	switch (td->act) {
	case ACT_KILL: {
		int64_t t;
		uint32_t pid;

		pthread_mutex_lock(&a->lock);
		pid = r->pid;
		pthread_mutex_unlock(&a->lock);
		t = kill_run(a, cid, pid, &err);
		pthread_mutex_lock(&a->lock);
		r->sandbox_killed_ns = t;
		if (t && r->exited && t < r->exited_ns)
			r->exited_ns = t;
		pthread_mutex_unlock(&a->lock);
		log_info("killed", "pod=%s/%s why=%s after_start_ms=%lld "
		    "sandbox=%d", r->ns, r->pod, r->why == CX_KILL_DEADLINE ?
		    "deadline" : r->why == CX_KILL_OUTPUT ? "output" : "isolation",
		    (long long)(((t ? t : now_ns()) -
		    r->start_ns) / 1000000), t != 0);
		break;
	}
	case ACT_RECORD:
		ok = record(a, r);	/* r is busy: nobody frees it */
		pthread_mutex_lock(&a->lock);
		r->busy = 0;
		if (ok)
			r->recorded = 1;
		else
			r->retry_ms = clock_mono_ms() +
			    (r->attempts < 6 ? 100L << r->attempts++ : 5000);
		pthread_mutex_unlock(&a->lock);
		break;
	case ACT_DELETE:
		ok = delete_pod(a, r->ns, r->pod, r->uid);
		pthread_mutex_lock(&a->lock);
		r->busy = 0;
		if (ok) {
			for (pp = &a->runs; *pp && *pp != r; pp = &(*pp)->next)
				;
			if (*pp)
				*pp = r->next;
			free_run(r);
		} else {
			r->retry_ms = clock_mono_ms() + 1000;
		}
		pthread_mutex_unlock(&a->lock);
		break;
	default:
		break;
	}
out:
	free(cid);
	free(td->uid);
}

/* One pass over the runs; the decisions, acted on outside the lock. */
static void
tick(struct agent *a)
{
	struct todo todo[64];
	int n = 0, active = 0;
	long long now = clock_mono_ms();
	int64_t wall = now_ns();
	struct run *r, **pp;

	pthread_mutex_lock(&a->lock);
	for (pp = &a->runs; (r = *pp) != NULL;) {
		if (r->busy) {
			pp = &r->next;
			continue;
		}
		if (!r->verified) {
			json_t *pod = informer_get(a->pods, r->ns, r->pod);

			if (pod && strcmp(k8s_obj_uid(pod), r->uid) == 0)
				learn_pod(a, r, pod);
			json_decref(pod);
			if (!r->verified) {
				if (now - r->seen_ms > VERIFY_MS) {
					*pp = r->next;	/* not one of ours */
					free_run(r);
					continue;
				}
				pp = &r->next;
				continue;
			}
		}
		active++;
		if (!r->recorded)
			tail(a, r);
		/* A kill that did not take (containerd busy, a race): again. */
		if (r->kill_sent && !r->exited && !r->recorded &&
		    now - r->kill_at_ms >= KILL_RETRY_MS)
			r->kill_sent = 0;
		if (!r->exited && !r->kill_sent && !r->recorded && r->cid) {
			const struct crilog_stream *o = crilog_stdout(r->log);
			const struct crilog_stream *e = crilog_stderr(r->log);

			if (r->why != CX_KILL_NONE)
				;	/* refused at its start (isolation) */
			else if ((long long)(o->total + e->total) > a->o.hard_cap)
				r->why = CX_KILL_OUTPUT;
			else if (r->deadline_ns && wall >= r->deadline_ns)
				r->why = CX_KILL_DEADLINE;
			if (r->why != CX_KILL_NONE && n < 64) {
				r->kill_sent = 1;
				r->kill_at_ms = now;
				todo[n++] = (struct todo){ ACT_KILL, xstrdup(r->uid) };
			}
		}
		/*
		 * Exited: the cgroup's figures at once, before the idle
		 * sandbox adds to its CPU time or the kubelet removes it.
		 */
		if (r->exited && !r->usage_done) {
			usage_read(a->o.cgroup_mount, a->o.cgroup_root, r->uid,
			    &r->usage);
			r->usage_done = 1;
		}
		/*
		 * Exited: record once the log has been quiet for two polls,
		 * so the last lines containerd copies after the exit are in.
		 */
		if (r->exited && !r->recorded && now >= r->retry_ms &&
		    now - r->exit_seen_ms >= 2 * a->o.poll_ms &&
		    now - r->last_read_ms >= 2 * a->o.poll_ms && n < 64) {
			crilog_finish(r->log);
			r->busy = 1;
			todo[n++] = (struct todo){ ACT_RECORD, xstrdup(r->uid) };
		} else if (r->recorded && n < 64 && now >= r->retry_ms) {
			r->busy = 1;
			todo[n++] = (struct todo){ ACT_DELETE, xstrdup(r->uid) };
		}
		pp = &r->next;
	}
	if (now >= a->next_sweep_ms && !a->sweeping && n < 64) {
		a->sweeping = 1;
		a->next_sweep_ms = now + a->o.sweep_ms;
		todo[n++] = (struct todo){ ACT_SWEEP, NULL };
	}
	pthread_mutex_unlock(&a->lock);
	metric_set(a->m_active, NULL, active);

	for (int i = 0; i < n; i++) {
		if (todo[i].act == ACT_KILL) {
			act(a, &todo[i]);
			continue;
		}
		pthread_mutex_lock(&a->lock);
		if (a->qn == a->qcap) {
			a->qcap = a->qcap ? 2 * a->qcap : 64;
			a->q = xrealloc(a->q, a->qcap * sizeof(*a->q));
		}
		a->q[a->qn++] = todo[i];
		pthread_cond_signal(&a->qcond);
		pthread_mutex_unlock(&a->lock);
	}
}

static void *
worker_main(void *arg)
{
	struct agent *a = arg;
	struct todo t;

	pthread_mutex_lock(&a->lock);
	for (;;) {
		while (a->qn == 0 && !atomic_load(&a->stop))
			pthread_cond_wait(&a->qcond, &a->lock);
		if (a->qn == 0)
			break;
		t = a->q[0];
		memmove(a->q, a->q + 1, --a->qn * sizeof(*a->q));
		pthread_mutex_unlock(&a->lock);
		act(a, &t);
		pthread_mutex_lock(&a->lock);
	}
	pthread_mutex_unlock(&a->lock);
	return NULL;
}

static void *
tick_main(void *arg)
{
	struct agent *a = arg;

	while (!atomic_load(&a->stop)) {
		int64_t wait = (int64_t)a->o.poll_ms * 1000000, now;
		struct run *r;

		tick(a);
		/* Wake for the nearest deadline, not a poll later. */
		now = now_ns();
		pthread_mutex_lock(&a->lock);
		for (r = a->runs; r; r = r->next)
			if (r->deadline_ns && !r->kill_sent && !r->exited &&
			    r->deadline_ns - now < wait)
				wait = r->deadline_ns - now;
		pthread_mutex_unlock(&a->lock);
		if (wait > 0)
			usleep((useconds_t)(wait / 1000));
	}
	return NULL;
}

/* --- life cycle ----------------------------------------------------------- */

static const double record_bounds[] = { 0.01, 0.025, 0.05, 0.1, 0.2, 0.5,
    1, 2.5, 5 };

struct agent *
agent_new(struct k8s_client *c, struct metrics *m,
    const struct agent_opts *opts)
{
	struct agent *a;
	struct informer_opts io = { .res = &k8s_res_pods, .packed = 1,
	    .transform = trim_pod,
	    .label_selector = CX_LABEL_MANAGED "=" CX_MANAGER ","
	    CX_LABEL_COMPONENT "=" CX_COMPONENT };
	struct informer_handlers h;

	if (opts == NULL || opts->node_name == NULL || !opts->node_name[0])
		return NULL;
	a = xcalloc(1, sizeof(*a));
	a->client = c;
	a->o = *opts;
	if (a->o.pod_logs_dir == NULL)
		a->o.pod_logs_dir = "/var/log/pods";
	if (a->o.containerd_socket == NULL)
		a->o.containerd_socket = "/run/containerd/containerd.sock";
	if (a->o.containerd_ns == NULL)
		a->o.containerd_ns = "k8s.io";
	if (a->o.poll_ms <= 0)
		a->o.poll_ms = 20;
	if (a->o.hard_cap <= 0)
		a->o.hard_cap = CX_HARD_OUTPUT_CAP;
	if (a->o.sweep_ms <= 0)
		a->o.sweep_ms = 60000;
	/* The first sweep once the cache has had time to fill. */
	a->next_sweep_ms = clock_mono_ms() + a->o.sweep_ms;
	a->ctrd = ctrd_new(a->o.containerd_socket, a->o.containerd_ns);

	a->field_selector = xasprintf("spec.nodeName=%s", a->o.node_name);
	pthread_mutex_init(&a->lock, NULL);
	pthread_cond_init(&a->qcond, NULL);
	io.field_selector = a->field_selector;
	io.ns = a->o.namespace;
	h = (struct informer_handlers){ pod_add, pod_update, pod_delete, a };
	a->pods = informer_new(c, &io, &h);
	a->m_results = metrics_counter(m, "airlock_agent_results_total",
	    "Results recorded, by reason.", "reason");
	a->m_record = metrics_histogram(m, "airlock_agent_record_seconds",
	    "From the exit to the result recorded.", record_bounds,
	    sizeof(record_bounds) / sizeof(record_bounds[0]));
	a->m_active = metrics_gauge(m, "airlock_agent_runs",
	    "Executions this agent follows now.", NULL);
	a->m_swept = metrics_counter(m, "airlock_agent_swept_total",
	    "Orphan pods and stale pod log directories removed.", "kind");
	return a;
}

int
agent_start(struct agent *a)
{
	if (a->started)
		return K8S_EINVAL;
	if (informer_start(a->pods) != 0)
		return K8S_EINVAL;
	a->started = 1;
	pthread_create(&a->ev_th, NULL, events_main, a);
	pthread_create(&a->tick_th, NULL, tick_main, a);
	for (int i = 0; i < AGENT_WORKERS; i++)
		pthread_create(&a->workers[i], NULL, worker_main, a);
	return 0;
}

int
agent_ready(struct agent *a)
{
	return informer_wait_synced(a->pods, 0) == 0 &&
	    atomic_load(&a->ctrd_ok);
}

void
agent_stop(struct agent *a)
{
	if (!a->started)
		return;
	atomic_store(&a->stop, 1);
	pthread_mutex_lock(&a->lock);
	pthread_cond_broadcast(&a->qcond);
	pthread_mutex_unlock(&a->lock);
	pthread_join(a->ev_th, NULL);
	pthread_join(a->tick_th, NULL);
	for (int i = 0; i < AGENT_WORKERS; i++)
		pthread_join(a->workers[i], NULL);
	informer_stop(a->pods);
	a->started = 0;
}

void
agent_free(struct agent *a)
{
	struct run *r;

	if (a == NULL)
		return;
	agent_stop(a);
	informer_free(a->pods);
	while ((r = a->runs) != NULL) {
		a->runs = r->next;
		free_run(r);
	}
	for (size_t i = 0; i < a->qn; i++)
		free(a->q[i].uid);
	free(a->q);
	ctrd_free(a->ctrd);
	free(a->field_selector);
	pthread_cond_destroy(&a->qcond);
	pthread_mutex_destroy(&a->lock);
	free(a);
}
