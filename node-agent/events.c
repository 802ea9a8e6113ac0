/*
 * events.c - containerd's task events (agent_priv.h): a run's start, its
 * exit and OOM, and the isolation check made at its start.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent_priv.h"
#include "backoff.h"
#include "clock.h"
#include "log.h"
#include "pool.h"
#include "session.h"
#include "xmalloc.h"

const char AGENT_NETSTACK[] = "its gVisor sandbox has a network (runsc "
    "--network=sandbox) and its pod is not under the network RuntimeClass";

const char *
agent_sandbox_check(const char *cmdline, size_t len)
{
	const char *p = cmdline, *end = cmdline + len;
	size_t alen, off;
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
		/* --network=V or -network=V: V's length is alen - off. */
		off = alen >= 10 && memcmp(p, "--network=", 10) == 0 ? 10 :
		    alen >= 9 && memcmp(p, "-network=", 9) == 0 ? 9 : 0;
		if (off)
			none = alen - off == 4 && memcmp(p + off, "none", 4) == 0 ?
			    1 : alen - off == 7 && memcmp(p + off, "sandbox", 7) ==
			    0 ? 2 : 0;
	}
	if (none == 2)
		return AGENT_NETSTACK;
	if (none != 1)
		return "its gVisor sandbox has a network (runsc --network is not none)";
	return NULL;
}

/*
 * NULL if the process whose cmdline is at path is gVisor with no network,
 * else why not (a static string). A process in the middle of execve shows
 * an empty cmdline for a moment (its new mm has no arguments yet); so does
 * a zombie. An empty read is taken again, every 10 ms for up to 100 ms,
 * before it counts as unreadable: a runc task read just after its start
 * must be refused as what it is. A file that cannot be opened (the
 * process is gone) is not waited for.
 * From the events thread and warm runs' threads: the buffer is the
 * caller's own.
 */
const char *
agent_sandbox_read(const char *path, int wait)
{
	static __thread char buf[64 * 1024];
	ssize_t n = 0, r;
	int fd, tries;

	for (tries = 0; tries < (wait ? 11 : 1); tries++) {
		if (tries > 0)
			usleep(10000);
		if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
			break;
		n = 0;
		while (n < (ssize_t)sizeof(buf) && (r = read(fd, buf + n,
		    sizeof(buf) - (size_t)n)) > 0)
			n += r;
		close(fd);
		if (n > 0)
			break;
	}
	return agent_sandbox_check(buf, n > 0 ? (size_t)n : 0);
}

/*
 * NULL if pid is gVisor with no network, else why not (a static string).
 * wait: an empty cmdline is read again (agent_sandbox_read), never with
 * a->lock held.
 */
const char *
agent_sandbox_refused(uint32_t pid, int wait)
{
	char path[64];

	if (pid <= 1)
		return agent_sandbox_check("", 0);
	snprintf(path, sizeof(path), "/proc/%u/cmdline", pid);
	return agent_sandbox_read(path, wait);
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

/*
 * gVisor runs every container of a pod in one sandbox process, and each
 * TaskStart names that process's pid. An execution pod's sandbox is
 * learned at its pause container's start, labels read then; its program's
 * start, the next TaskStart with that pid, is then known at once. Asking
 * containerd for the program container's labels took 200 ms on the test
 * node, as often as not, and every event after it waited: its exit too.
 */
#define SBX_MAX	4096

struct agent_sbx {
	uint32_t	 pid;
	unsigned long long start;	/* the pid's start time: not reused */
	char		*sid;		/* the pause container's id */
	char		*uid, *ns, *pod;
	struct agent_sbx *next;
};

static void
sbx_free(struct agent_sbx *s)
{
	free(s->sid);
	free(s->uid);
	free(s->ns);
	free(s->pod);
	free(s);
}

void
agent_sbx_free_all(struct agent *a)
{
	struct agent_sbx *s;

	while ((s = a->sbxs) != NULL) {
		a->sbxs = s->next;
		sbx_free(s);
	}
	a->nsbx = 0;
}

unsigned long long
agent_pid_start(uint32_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long start = 0;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%u/stat", pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	/* After the command's ")" (which may hold spaces): field 3 on. */
	if ((p = strrchr(buf, ')')) == NULL)
		return 0;
	for (int field = 2; field < 22 && p; field++)
		p = strchr(p + 1, ' ');
	if (p == NULL || sscanf(p + 1, "%llu", &start) != 1)
		return 0;
	return start;
}

/* Forget the sandboxes matching: its pause container's id, or a gone pid. */
static void
sbx_drop(struct agent *a, const char *sid, int gone)
{
	for (struct agent_sbx **pp = &a->sbxs, *s; (s = *pp) != NULL;) {
		if ((sid && strcmp(s->sid, sid) == 0) ||
		    (gone && kill((pid_t)s->pid, 0) != 0 && errno == ESRCH)) {
			*pp = s->next;
			sbx_free(s);
			a->nsbx--;
		} else {
			pp = &s->next;
		}
	}
}

static void
sbx_add(struct agent *a, uint32_t pid, const char *sid, const char *uid,
    const char *ns, const char *pod)
{
	struct agent_sbx *s;

	for (s = a->sbxs; s; s = s->next)
		if (s->pid == pid)
			break;
	if (s != NULL) {
		/* The pid came back: a new sandbox, the old one gone. */
		free(s->sid);
		free(s->uid);
		free(s->ns);
		free(s->pod);
	} else {
		if (a->nsbx >= SBX_MAX)
			sbx_drop(a, NULL, 1);
		if (a->nsbx >= SBX_MAX)
			return;		/* the labels, then */
		s = xcalloc(1, sizeof(*s));
		s->pid = pid;
		s->next = a->sbxs;
		a->sbxs = s;
		a->nsbx++;
	}
	s->start = agent_pid_start(pid);
	s->sid = xstrdup(sid);
	s->uid = xstrdup(uid);
	s->ns = xstrdup(ns);
	s->pod = xstrdup(pod);
}

/*
 * The program container of a known execution pod: a TaskStart in its
 * sandbox that is not the pause container, before any other (a container
 * added later, an ephemeral one, goes by its labels, and only "run" is
 * taken).
 */
static const struct agent_sbx *
sbx_program(struct agent *a, const struct ctrd_event *ev)
{
	const struct agent_sbx *s;
	struct run *r;
	int first;

	for (s = a->sbxs; s; s = s->next)
		if (s->pid == ev->pid)
			break;
	if (s == NULL || strcmp(s->sid, ev->container_id) == 0)
		return NULL;
	/* The same process, not its pid reused by another's sandbox. */
	if (s->start == 0 || agent_pid_start(ev->pid) != s->start)
		return NULL;
	pthread_mutex_lock(&a->lock);
	first = (r = agent_find_run(a, s->uid)) == NULL || r->cid == NULL;
	pthread_mutex_unlock(&a->lock);
	return first ? s : NULL;
}

/* The program container of execution pod uid started. */
static void
on_start(struct agent *a, const struct ctrd_event *ev, const char *uid,
    const char *ns, const char *pod)
{
	struct k8s_error err;
	json_t *proc = NULL;
	const char *bad = NULL;
	struct run *r;
	int holder, wait_exit, stop_now = 0, check, verified, refused;

	/*
	 * A warm holder: its OCI process now, for the exec of its claim
	 * (warm.c), off that path.
	 */
	holder = strncmp(pod, POOL_HOLDER_PREFIX,
	    strlen(POOL_HOLDER_PREFIX)) == 0 || strncmp(pod,
	    SESSION_POD_PREFIX, strlen(SESSION_POD_PREFIX)) == 0;
	if (holder && ctrd_container_process(a->ctrd, ev->container_id,
	    &proc, &err) != 0)
		proc = NULL;
	pthread_mutex_lock(&a->lock);
	if ((r = agent_find_run(a, uid)) == NULL)
		r = agent_new_run(a, uid, ns, pod);
	if (!r->learned && !holder) {
		/* An execution's pod, by the cache (else the ticker decides). */
		json_t *p = informer_get(a->pods, ns, pod);

		if (p && strcmp(k8s_obj_uid(p), uid) == 0)
			agent_learn_pod(r, p, a->o.network_class);
		json_decref(p);
	}
	if (r->cid == NULL)
		r->cid = xstrdup(ev->container_id);
	r->start_ns = ev->ts_ns;
	r->pid = ev->pid;
	if (proc && r->process == NULL)
		r->process = json_incref(proc);
	json_decref(proc);
	check = r->isolation == NULL;
	verified = r->verified;
	pthread_mutex_unlock(&a->lock);
	/*
	 * Its cmdline, read without the lock: a read of a process in its
	 * execve is tried again for up to 100 ms, for an execution's own
	 * pod only (a tenant's pod named airlock-* with an empty argv must
	 * not hold the events thread).
	 */
	if (check)
		bad = agent_sandbox_refused(ev->pid, verified);
	pthread_mutex_lock(&a->lock);
	if ((r = agent_find_run(a, uid)) == NULL) {
		/* Gone meanwhile (its pod deleted and the run freed). */
		pthread_mutex_unlock(&a->lock);
		return;
	}
	if (bad == AGENT_NETSTACK && r->netstack)
		bad = NULL;	/* its egress: docs/network.md */
	if (r->isolation == NULL && bad) {
		/*
		 * Stopped now if the pod is known to be an execution's
		 * (every ms runs code); else by the ticker once it is, and
		 * never if it is not.
		 */
		r->isolation = xstrdup(bad);
		r->why = CX_KILL_ISOLATION;
		stop_now = r->verified;
	}
	agent_arm_deadline(r);
	/*
	 * Its execution has ended or names another pod (trust.c): the
	 * program does not run, not even until the next tick. The ticker
	 * sees the kill sent and deletes the pod.
	 */
	refused = r->refused && strcmp(r->cid, ev->container_id) == 0;
	if (refused) {
		r->kill_sent = 1;
		r->kill_at_ms = clock_mono_ms();
	}
	/*
	 * Only for a verified execution's pod: a tenant's own pods named
	 * airlock-* must not take the waits' slots.
	 */
	wait_exit = !holder && r->verified && r->isolation == NULL &&
	    !r->waited && strcmp(r->cid, ev->container_id) == 0;
	if (wait_exit)
		r->waited = 1;
	pthread_mutex_unlock(&a->lock);
	if (stop_now) {
		log_warn("sandbox refused", "pod=%s/%s problem=\"%s\"", ns,
		    pod, bad);
		kill_pid(ev->pid);
	} else if (refused) {
		log_warn("program stopped at its start: its execution does not "
		    "expect this pod", "pod=%s/%s", ns, pod);
		kill_pid(ev->pid);
	}
	/* A cold run's exit, from its sandbox (exitwait.c). */
	if (wait_exit)
		agent_exitwait_spawn(a, uid, ev->container_id);
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
		const struct agent_sbx *s;
		const char *uid, *ns, *pod, *name, *kind;

		if ((s = sbx_program(a, ev)) != NULL) {
			on_start(a, ev, s->uid, s->ns, s->pod);
			return 0;
		}
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
		kind = json_string_value(json_object_get(labels, "io.cri-containerd.kind"));
		if (uid && ns && pod && strncmp(pod, "airlock-", 8) == 0) {
			if (name && strcmp(name, CONTAINER) == 0)
				on_start(a, ev, uid, ns, pod);
			else if (kind && strcmp(kind, "sandbox") == 0 &&
			    strncmp(pod, POOL_HOLDER_PREFIX,
			    strlen(POOL_HOLDER_PREFIX)) != 0)
				sbx_add(a, ev->pid, ev->container_id, uid, ns,
				    pod);
		}
		json_decref(labels);
		return 0;
	}
	/* A pod's sandbox ended: its pid may come back as another's. */
	if (ev->kind == CTRD_EV_TASK_EXIT && agent_exit_is_init(ev))
		sbx_drop(a, ev->container_id, 0);
	pthread_mutex_lock(&a->lock);
	/*
	 * A step server's exec, or the sandbox under it: the server is gone
	 * even while a process of a step holds its stdout open.
	 */
	if (ev->kind == CTRD_EV_TASK_EXIT)
		agent_serve_exited(a, ev->container_id, agent_exit_is_init(ev) ?
		    NULL : ev->exec_id);
	for (r = a->runs; r; r = r->next) {
		if (r->cid == NULL || strcmp(r->cid, ev->container_id) != 0)
			continue;
		if (ev->kind == CTRD_EV_TASK_OOM) {
			r->oom = 1;
		} else if (ev->kind == CTRD_EV_TASK_EXIT && r->exit_early &&
		    agent_exit_is_init(ev)) {
			/* The sandbox told first: the quiet wait counts now. */
			r->exit_early = 0;
			r->exit_seen_ms = clock_mono_ms();
		} else if (ev->kind == CTRD_EV_TASK_EXIT) {
			agent_run_exit(a, r, ev);
		}
	}
	pthread_mutex_unlock(&a->lock);
	return 0;
}

/* The exit (status, at exited_ns) taken by run r, which can take it. */
static void
take_exit(struct agent *a, struct run *r, uint32_t status, int64_t exited_ns)
{
	/* Over an exit the pod's status gave first (whole seconds). */
	if (!r->exited)
		r->exit_seen_ms = clock_mono_ms();
	r->exited = 1;
	r->exit_exact = 1;
	r->status = status;
	r->exited_ns = exited_ns;
	/*
	 * Killed with its sandbox: the program stopped when the signal
	 * landed, not when the shim noticed.
	 */
	if (r->sandbox_killed_ns && r->sandbox_killed_ns < r->exited_ns)
		r->exited_ns = r->sandbox_killed_ns;
	agent_warm_maybe_record(a, r);
}

void
agent_run_exit(struct agent *a, struct run *r, const struct ctrd_event *ev)
{
	/*
	 * A warm run's: its exec's exit, or its sandbox's (the deadline's
	 * kill takes the whole sandbox); a step has no exec (its server's
	 * exit is serve.c's). A cold run's: its init's.
	 */
	if (r->exit_exact || r->recorded || !(r->warm ? agent_exit_is_init(ev) ||
	    (!r->step && ev->exec_id && strcmp(ev->exec_id, WARM_EXEC_ID) == 0) :
	    agent_exit_is_init(ev)))
		return;
	if (r->busy || (r->warm && !r->warm_started)) {
		if (!r->pend_exit) {
			r->pend_exit = 1;
			r->pend_status = ev->exit_status;
			r->pend_exited_ns = ev->exited_ns ? ev->exited_ns : ev->ts_ns;
		}
		return;
	}
	take_exit(a, r, ev->exit_status, ev->exited_ns ? ev->exited_ns : ev->ts_ns);
}

void
agent_run_exit_pending(struct agent *a, struct run *r)
{
	if (!r->pend_exit || r->busy || (r->warm && !r->warm_started))
		return;
	r->pend_exit = 0;
	if (!r->exit_exact && !r->recorded)
		take_exit(a, r, r->pend_status, r->pend_exited_ns);
}

void *
agent_events_main(void *arg)
{
	static const char *const filters[] = {
		"namespace==k8s.io,topic==\"/tasks/start\"",
		"namespace==k8s.io,topic==\"/tasks/exit\"",
		"namespace==k8s.io,topic==\"/tasks/oom\"",
		NULL,
	};
	struct agent *a = arg;
	struct k8s_error err;
	struct backoff backoff = { .initial_ms = 100, .max_ms = 5000 };
	char *v;

	while (!atomic_load(&a->stop)) {
		if (ctrd_version(a->ctrd, &v, &err) != 0) {
			if (atomic_exchange(&a->ctrd_ok, 0))
				atomic_store(&a->ctrd_down_ns, (long long)agent_now_ns());
			log_warn("containerd does not answer", "error=\"%s\"",
			    err.message);
		} else {
			if (!atomic_load(&a->ctrd_ok)) {
				struct stat sb;

				log_info("containerd answers", "version=%s", v);
				if (stat(a->o.containerd_socket, &sb) == 0)
					atomic_store(&a->ctrd_started_ns,
					    (long long)sb.st_ctim.tv_sec *
					    1000000000LL + sb.st_ctim.tv_nsec);
			}
			free(v);
			atomic_store(&a->ctrd_ok, 1);
			backoff_reset(&backoff);
			/* Exits missed while the stream was down: start over. */
			agent_sbx_free_all(a);
			if (ctrd_subscribe(a->ctrd, filters, on_task_event, a,
			    &a->stop, &err) == K8S_ECANCELED)
				break;
			atomic_store(&a->ctrd_down_ns, (long long)agent_now_ns());
			log_warn("containerd event stream ended", "error=\"%s\"",
			    err.message);
		}
		for (long t = 0, wait = backoff_next(&backoff); t < wait &&
		    !atomic_load(&a->stop); t += 50)
			usleep(50000);
	}
	return NULL;
}
