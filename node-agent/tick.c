/*
 * tick.c - the ticker (agent_priv.h): every poll_ms it reads what each
 * run's log gained, decides what each run needs (agent_decide), kills on
 * the spot and hands records, deletes and sweeps to the workers.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/pidfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent_priv.h"
#include "clock.h"
#include "log.h"
#include "pool.h"
#include "session.h"
#include "xmalloc.h"

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

	if ((lf->fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0) {
		lf->err = errno;
		return -1;
	}
	if (fstat(lf->fd, &st) != 0) {
		lf->err = errno;
		close(lf->fd);
		return lf->fd = -1;
	}
	lf->dev = st.st_dev;
	lf->ino = st.st_ino;
	lf->opened = 1;
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

/*
 * Watch the file the run's log is read from for its close (lock held).
 * Only while the watch is on that very file: after a rotation, the one
 * now read; if the name already holds another, none (the quiet wait).
 */
static void
watch_log(struct agent *a, struct run *r, const char *path)
{
	struct stat st;

	if (a->ino_fd < 0 || r->lf.fd < 0 || r->log_wd < 0)
		return;
	if (r->log_wd > 0) {
		if (r->lf.ino == r->log_ino && r->lf.dev == r->log_dev)
			return;
		(void)inotify_rm_watch(a->ino_fd, r->log_wd);
		r->log_wd = 0;
		r->log_closed = 0;
	}
	r->log_wd = inotify_add_watch(a->ino_fd, path, IN_CLOSE_WRITE);
	if (r->log_wd < 0)
		return;
	if (stat(path, &st) != 0 || st.st_ino != r->lf.ino ||
	    st.st_dev != r->lf.dev) {
		(void)inotify_rm_watch(a->ino_fd, r->log_wd);
		r->log_wd = -1;
		return;
	}
	r->log_ino = st.st_ino;
	r->log_dev = st.st_dev;
}

char *
agent_log_path(const struct agent *a, const struct run *r)
{
	return xasprintf("%s/%s_%s_%s/%s/0.log", a->o.pod_logs_dir, r->ns,
	    r->pod, r->uid, CONTAINER);
}

/* Read what the run's log gained (lock held: reads a local file only). */
static void
tail(struct agent *a, struct run *r)
{
	char *path = agent_log_path(a, r);

	if (agent_follow_log(&r->lf, path, r->log) > 0)
		r->last_read_ms = clock_mono_ms();
	if (r->log_closed && r->lf.fd >= 0 &&
	    lseek(r->lf.fd, 0, SEEK_CUR) > r->closed_size)
		r->log_closed = 0;
	watch_log(a, r, path);
	free(path);
}

/* The runs whose log's writer closed it, from inotify's events. */
static void
log_closes(struct agent *a)
{
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	const struct inotify_event *ev;
	struct run *r;
	ssize_t n;

	while ((n = read(a->ino_fd, buf, sizeof(buf))) > 0) {
		pthread_mutex_lock(&a->lock);
		for (char *p = buf; p < buf + n; p += sizeof(*ev) + ev->len) {
			ev = (const struct inotify_event *)p;
			if (!(ev->mask & IN_CLOSE_WRITE))
				continue;
			for (r = a->runs; r; r = r->next)
				if (r->log_wd == ev->wd) {
					struct stat st;

					/*
					 * Its size now: a writer that opens
					 * it again (containerd restarted)
					 * and adds to it undoes the close.
					 */
					r->log_closed = 1;
					r->closed_size = r->lf.fd >= 0 &&
					    fstat(r->lf.fd, &st) == 0 ?
					    st.st_size : 0;
				}
		}
		pthread_mutex_unlock(&a->lock);
	}
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
	int64_t t = agent_now_ns();
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

/* A kill, on the ticker itself: every ms of a run past its end counts. */
static void
kill_now(struct agent *a, const char *uid)
{
	struct k8s_error err;
	struct run *r;
	char *cid = NULL;
	uint32_t pid = 0;
	int64_t t;

	pthread_mutex_lock(&a->lock);
	if ((r = agent_find_run(a, uid)) != NULL) {
		cid = r->cid ? xstrdup(r->cid) : NULL;
		pid = r->pid;
	}
	pthread_mutex_unlock(&a->lock);
	if (r == NULL || cid == NULL) {
		free(cid);
		return;
	}
	/* The run stays: only the ticker frees runs, and only by DELETE. */
	t = kill_run(a, cid, pid, &err);
	pthread_mutex_lock(&a->lock);
	r->sandbox_killed_ns = t;
	if (t && r->exited && t < r->exited_ns)
		r->exited_ns = t;
	log_info("killed", "pod=%s/%s why=%s after_start_ms=%lld sandbox=%d",
	    r->ns, r->pod, r->refused ? "refused" :
	    r->why == CX_KILL_DEADLINE ? "deadline" :
	    r->why == CX_KILL_OUTPUT ? "output" :
	    r->why == CX_KILL_SESSION ? "session" : "isolation",
	    (long long)(((t ? t : agent_now_ns()) - r->start_ns) / 1000000),
	    t != 0);
	pthread_mutex_unlock(&a->lock);
	free(cid);
}

/*
 * Carry out one key of the workers' queue (agent_priv.h): a record or a
 * delete (API calls, ~50 ms each) in parallel with the others, so a burst
 * of exits is recorded at once, not one after another; or the sweep.
 */
static void
act(struct agent *a, const char *key)
{
	struct run *r, **pp;
	int ok;

	if (strcmp(key, "check") == 0) {
		agent_check(a);
		pthread_mutex_lock(&a->lock);
		a->checking = 0;
		pthread_mutex_unlock(&a->lock);
		return;
	}
	if (strncmp(key, "session/", 8) == 0) {
		agent_session_end(a, key + 8);
		return;
	}
	if (strcmp(key, "meter") == 0) {
		agent_meter_pass(a);	/* clears metering */
		return;
	}
	if (strcmp(key, "serve-end") == 0) {
		agent_serve_end_swept(a);
		return;
	}
	if (strcmp(key, "sweep") == 0) {
		agent_sweep_orphans(a);
		if (!a->o.keep_stale_logs)
			agent_sweep_logs(a);
		agent_warm_sweep(a);
		agent_sweep_runsc(a);
		pthread_mutex_lock(&a->lock);
		a->sweeping = 0;
		pthread_mutex_unlock(&a->lock);
		return;
	}
	pthread_mutex_lock(&a->lock);
	r = agent_find_run(a, strchr(key, '/') + 1);
	pthread_mutex_unlock(&a->lock);
	if (r == NULL)
		return;
	/* r is busy (or flushing): nobody else frees it. */
	if (strncmp(key, "record/", 7) == 0) {
		ok = agent_record(a, r);
		pthread_mutex_lock(&a->lock);
		r->busy = 0;
		if (ok)
			r->recorded = 1;
		else
			r->retry_ms = clock_mono_ms() + backoff_next(&r->retry);
		pthread_mutex_unlock(&a->lock);
	} else if (strncmp(key, "verify/", 7) == 0) {
		agent_verify(a, r);		/* clears busy */
	} else if (strncmp(key, "flush/", 6) == 0) {
		agent_flush(a, r);
		pthread_mutex_lock(&a->lock);
		r->flushing = 0;
		a->nflushing--;
		pthread_mutex_unlock(&a->lock);
	} else if (strncmp(key, "delete/", 7) == 0) {
		ok = agent_delete_pod(a, r->ns, r->pod, r->uid);
		if (ok && r->warm)
			agent_warm_forget(a, r->uid);
		pthread_mutex_lock(&a->lock);
		r->busy = 0;
		if (ok) {
			for (pp = &a->runs; *pp && *pp != r; pp = &(*pp)->next)
				;
			if (*pp)
				*pp = r->next;
			agent_free_run(r);
		} else {
			r->retry_ms = clock_mono_ms() + 1000;
		}
		pthread_mutex_unlock(&a->lock);
	}
}

enum agent_step
agent_decide(const struct run *r, long long hard_cap, long poll_ms,
    long long now, int64_t wall_ns, enum cx_kill *why)
{
	*why = r->why;
	/*
	 * Its execution does not expect it (trust.c): a program running is
	 * killed at once, then the pod deleted; nothing is recorded.
	 */
	if (r->refused && !r->exited && r->cid && (!r->kill_sent ||
	    now - r->kill_at_ms >= KILL_RETRY_MS))
		return AGENT_KILL;
	if (r->recorded)	/* a session's pod stays (tick parks the step) */
		return now >= r->retry_ms && !r->step ? AGENT_DELETE :
		    AGENT_WAIT;
	if (r->exited && r->unknown)	/* the controller decides */
		return AGENT_WAIT;
	/*
	 * Metered (meter.c): its bytes are read at its end and its chain
	 * removed before its result goes, for METER_FINAL_MS at most (then
	 * it goes without them: iptables does not answer).
	 */
	if (r->exited && r->meter_wanted && !r->meter_done &&
	    now - r->exit_seen_ms < METER_FINAL_MS)
		return AGENT_WAIT;
	if (r->exited && r->warm)	/* its output comes from FIFOs: warm.c */
		return r->io_done && now >= r->retry_ms ? AGENT_RECORD :
		    AGENT_WAIT;
	if (r->exited && !r->lf.opened) {
		/*
		 * Its log was never there: read again every tick for a while,
		 * then ResultLost (record.c), never an empty output.
		 */
		return now >= r->retry_ms && now - r->exit_seen_ms >=
		    LOG_MISSING_MS ? AGENT_RECORD : AGENT_WAIT;
	}
	if (r->exited) {
		/*
		 * Its log closed (read to its end this tick) and containerd's
		 * exit in hand (an OOM comes before it), or quiet.
		 */
		if (now >= r->retry_ms && ((r->log_closed && r->exit_exact) ||
		    (!r->exit_early && now - r->exit_seen_ms >= 2 * poll_ms &&
		    now - r->last_read_ms >= 2 * poll_ms)))
			return AGENT_RECORD;
		return AGENT_WAIT;
	}
	/* A kill that did not take (containerd busy, a race): again. */
	if (r->cid == NULL || (r->kill_sent && now - r->kill_at_ms <
	    KILL_RETRY_MS))
		return AGENT_WAIT;
	if (*why == CX_KILL_NONE) {
		const struct crilog_stream *o = crilog_stdout(r->log);
		const struct crilog_stream *e = crilog_stderr(r->log);

		/* The files out's frame counts too: a forged one is output. */
		if ((long long)(o->total + e->total +
		    crilog_frame_bytes(r->log)) > hard_cap)
			*why = CX_KILL_OUTPUT;
		else if (r->deadline_ns && wall_ns >= r->deadline_ns)
			*why = CX_KILL_DEADLINE;
	}
	return *why == CX_KILL_NONE ? AGENT_WAIT : AGENT_KILL;
}

/*
 * A run's cgroup figures, once it exited: at once, before an idle warm
 * sandbox adds to its CPU time or the kubelet removes the cgroup. The
 * pod cgroup's OOM kill count (its own and its containers', usage.c) says
 * OOM too, which the runtime's TaskOOM may say too late: a warm run's exit
 * is its runsc client's, and can be in hand before the shim's event (seen
 * in CI: a memory bomb recorded as Error). Of a warm run, only kills past
 * those of the holder's warm-up count, and none when those are unknown.
 * Called locked.
 */
void
agent_usage_once(struct agent *a, struct run *r)
{
	int64_t before = r->warm ? r->oom_before : 0;

	if (!r->exited || r->usage_done)
		return;
	usage_read(a->o.cgroup_mount, a->o.cgroup_root, r->uid, &r->usage);
	if (r->warm)
		agent_warm_usage(r);
	if (before >= 0 && r->usage.oom_kills > before)
		r->oom = 1;
	r->usage_done = 1;
}

/* One pass over the runs; the decisions, acted on outside the lock. */
static void
tick(struct agent *a)
{
	char *kills[64];
	json_t *again[64];
	int n = 0, active = 0, nagain = 0;
	long long now = clock_mono_ms();
	int64_t wall = agent_now_ns();
	struct run *r, **pp;
	enum cx_kill why;
	char key[300];

	pthread_mutex_lock(&a->lock);
	for (pp = &a->runs; (r = *pp) != NULL;) {
		if (r->busy) {
			pp = &r->next;
			continue;
		}
		/*
		 * A session's step recorded (or refused): parked until the pod
		 * carries another step, then freed and the pod seen again,
		 * which makes that step's run; or until the pod goes.
		 */
		if (r->step && r->recorded && !r->flushing) {
			json_t *pod = informer_get(a->pods, r->ns, r->pod);
			const char *c, *u = NULL;
			int same = pod && strcmp(k8s_obj_uid(pod), r->uid) == 0;

			if (same && session_pod_step(pod, &c, &u) == 0 &&
			    strcmp(u, r->cx_uid) == 0) {
				json_decref(pod);
				pp = &r->next;
				continue;
			}
			if (same && u && nagain == 64) {
				/* No room to see it again now: the next tick. */
				json_decref(pod);
				pp = &r->next;
				continue;
			}
			if (same && u)
				again[nagain++] = json_incref(pod);
			json_decref(pod);
			*pp = r->next;
			agent_free_run(r);
			continue;
		}
		/* An exit that came while it could not take it. */
		agent_run_exit_pending(a, r);
		if (!r->verified && !r->refused && r->learned && !r->recorded) {
			/* Its execution asked (trust.c), and again if not yet. */
			if (now >= r->verify_ms) {
				r->busy = 1;
				snprintf(key, sizeof(key), "verify/%s", r->uid);
				workqueue_add(a->q, key);
			}
			pp = &r->next;
			continue;
		}
		if (!r->verified && !r->refused && !r->learned) {
			json_t *pod = informer_get(a->pods, r->ns, r->pod);

			int holder = 0;

			if (pod && strcmp(k8s_obj_uid(pod), r->uid) == 0) {
				/*
				 * A holder: its run keeps the sandbox's pid
				 * and isolation check for the claim, and is
				 * learnt by claimed_seen alone (agent.c), which
				 * knows its start is not the program's: a
				 * deadline from the holder's start would kill
				 * it as soon as it is claimed.
				 */
				holder = agent_pod_keeps_sandbox(pod);
				if (!holder)
					agent_learn_pod(r, pod,
					    a->o.network_class);
			}
			json_decref(pod);
			if (!r->learned) {
				if (now - r->seen_ms > VERIFY_MS && !holder) {
					*pp = r->next;	/* not one of ours */
					agent_free_run(r);
				} else {
					pp = &r->next;
				}
				continue;
			}
			/* Learned now: asked about at the next tick. */
			pp = &r->next;
			continue;
		}
		active++;
		/*
		 * A step cancelled while it runs: its thread writes a CANCEL
		 * to the step server, which interrupts the kernel as at a
		 * timeout (warm.c, serve.c).
		 */
		if (r->interrupt_wanted && !r->interrupt_sent && r->warm_started &&
		    !r->exited && !r->recorded) {
			r->interrupt_sent = 1;
			log_info("cancelled step interrupted", "pod=%s/%s", r->ns,
			    r->pod);
		}
		if (!r->recorded && !r->warm && r->cid)
			tail(a, r);
		r->meter_wanted = a->o.iptables != NULL && r->meter_cap > 0;
		if (r->verified)
			agent_usage_once(a, r);
		switch (agent_decide(r, a->o.hard_cap, a->o.poll_ms, now, wall,
		    &why)) {
		case AGENT_KILL:
			if (n < 64) {
				r->why = why;
				r->kill_sent = 1;
				r->kill_at_ms = now;
				kills[n++] = xstrdup(r->uid);
			}
			break;
		case AGENT_RECORD:
			/*
			 * Not while the configuration check fails: what the
			 * log says may be another node's, or nothing (check.c).
			 */
			if (!atomic_load(&a->act_ok))
				break;
			/* The log is complete: closed, or the exit seen and quiet. */
			if (r->log_wd > 0) {
				(void)inotify_rm_watch(a->ino_fd, r->log_wd);
				r->log_wd = -1;
			}
			crilog_finish(r->log);
			r->busy = 1;
			snprintf(key, sizeof(key), "record/%s", r->uid);
			workqueue_add(a->q, key);
			break;
		case AGENT_DELETE:
			if (r->flushing)
				break;		/* it holds r: next tick */
			r->busy = 1;
			snprintf(key, sizeof(key), "delete/%s", r->uid);
			workqueue_add(a->q, key);
			break;
		case AGENT_WAIT:
			/* Live output: its growth into the status, paced. */
			if (r->stream && r->verified && !r->exited &&
			    !r->flushing && r->log != NULL &&
			    now >= r->next_flush_ms &&
			    a->nflushing < AGENT_FLUSH_INFLIGHT &&
			    r->flushed_bytes < AGENT_FLUSH_RUN_MAX) {
				uint64_t t = crilog_stdout(r->log)->total +
				    crilog_stderr(r->log)->total;
				/*
				 * What the API server stores for a copy: the
				 * object (the budget is what it leaves) and
				 * the output so far.
				 */
				double cost = (double)(CX_OBJECT_BUDGET -
				    r->budget) + (double)(t < r->budget ? t :
				    r->budget);

				if (t != r->flushed_total && agent_flush_take(
				    &a->flush_tokens, &a->flush_last_ms, now,
				    cost)) {
					r->flushed_total = t;
					r->flushed_bytes += (long long)cost;
					a->nflushing++;
					r->next_flush_ms = now +
					    agent_flush_interval(++r->nflush);
					/*
					 * Not busy: a kill or the record is
					 * never held up by a copy in flight.
					 */
					r->flushing = 1;
					snprintf(key, sizeof(key), "flush/%s",
					    r->uid);
					workqueue_add(a->q, key);
				}
			}
			break;
		}
		pp = &r->next;
	}
	if (agent_meter_due(a, now)) {
		a->metering = 1;
		workqueue_add(a->q, "meter");
	}
	if (now >= a->next_check_ms && !a->checking) {
		a->checking = 1;
		a->next_check_ms = now + CHECK_MS;
		workqueue_add(a->q, "check");
	}
	/* A sweep acts on what it finds: only once the configuration is right. */
	if (now >= a->next_sweep_ms && !a->sweeping && atomic_load(&a->act_ok)) {
		a->sweeping = 1;
		a->next_sweep_ms = now + a->o.sweep_ms;
		workqueue_add(a->q, "sweep");
	}
	pthread_mutex_unlock(&a->lock);
	metric_set(a->m_active, NULL, active);
	if (now >= a->next_sessions_ms) {
		a->next_sessions_ms = now + AGENT_SESSIONS_MS;
		agent_sessions_pass(a);
		agent_serve_sweep(a);
	}
	for (int i = 0; i < n; i++) {
		kill_now(a, kills[i]);
		free(kills[i]);
	}
	for (int i = 0; i < nagain; i++) {
		agent_pod_seen(a, again[i]);
		json_decref(again[i]);
	}
}

void *
agent_worker_main(void *arg)
{
	struct agent *a = arg;
	char *key;

	while (workqueue_get(a->q, &key) == 0) {
		act(a, key);
		workqueue_done(a->q, key);
		free(key);
	}
	return NULL;
}

void *
agent_tick_main(void *arg)
{
	struct agent *a = arg;

	while (!atomic_load(&a->stop)) {
		int64_t wait = (int64_t)a->o.poll_ms * 1000000, now;
		struct run *r;

		tick(a);
		/* Wake for the nearest deadline, not a poll later. */
		now = agent_now_ns();
		pthread_mutex_lock(&a->lock);
		for (r = a->runs; r; r = r->next)
			if (r->deadline_ns && !r->kill_sent && !r->exited &&
			    r->deadline_ns - now < wait)
				wait = r->deadline_ns - now;
		pthread_mutex_unlock(&a->lock);
		if (wait > 0) {
			/*
			 * A log closed or an exit from a sandbox (agent_wake)
			 * wakes it: that run is recorded now. A missing fd
			 * (-1) is ignored by poll.
			 */
			struct pollfd pfd[2] = { { a->ino_fd, POLLIN, 0 },
			    { a->wake_fd, POLLIN, 0 } };
			uint64_t n;

			if (poll(pfd, 2, (int)((wait + 999999) / 1000000)) > 0) {
				if (pfd[0].revents)
					log_closes(a);
				if (pfd[1].revents)
					(void)!read(a->wake_fd, &n, sizeof(n));
			}
		}
	}
	return NULL;
}
