/*
 * warm.c - the warm path's node side (docs/warm-path.md): a holder pod on
 * this node that the controller claimed for an execution gets its program
 * exec'd into its running gVisor sandbox, once.
 *
 * One thread per claimed holder (agent_warm_spawn), for as long as its
 * program runs:
 *   1. the sandbox is checked (gVisor, no network) as at a cold TaskStart;
 *   2. the program's files as a tar (execution/codetar.h), then spec.stdin,
 *      go into the exec's stdin; the image's `/airlock/bin/warm BYTES`
 *      (images/runner/warm.c) unpacks them in the fresh working directory
 *      and execs the program;
 *   3. the exec runs with the container's own OCI process (its user, no
 *      capabilities, no new privileges, its env) but the args and the
 *      spec's env, as CRI's exec does: started by `runsc exec` itself
 *      (the agent's --runsc) or by containerd's Tasks.Exec and the shim;
 *   4. its stdout and stderr FIFOs are read into the run's crilog, through
 *      the same caps as a cold run's CRI log (crilog_feed_stream);
 *   5. the deadline counts from the exec's start; the ticker enforces it
 *      and the hard output cap as for a cold run (the sandbox's process
 *      killed: every process in it goes);
 *   6. the exit comes from containerd's TaskExit for WARM_EXEC_ID (or the
 *      sandbox's own, when it died), and the result is recorded at once
 *      once both streams reached EOF. The ticker then deletes the pod.
 *
 * Until its start was asked for (Tasks.Start sent, a runsc exec client
 * spawned), nothing of the program ran: a failure before gives the
 * execution back to the controller to run cold (fall_back). Once asked
 * for, a start that failed or timed out (Tasks.Start's 10 s) may have
 * started it all the same: the exec is killed and the execution ends
 * StartFailed (agent_warm_start_failed), never run cold. A second Exec of
 * WARM_EXEC_ID (an agent restarted after it) is refused by containerd:
 * the program is never run twice; that execution's pod is deleted and the
 * controller ends it (PodDeleted).
 *
 * A session's step (docs/sessions.md) is the same run on the session's
 * pod, the same checks, but no exec of its own: a request to the pod's
 * step server (`warm --serve`, serve.c; exec'd by the session's first
 * step, and again after one ended), which starts the kernel at the first
 * step and keeps it. Its exec directory is its own (the execution's uid:
 * the pod runs many), the mark that it was tried. It never falls back
 * (there is no cold path for a step): a step that cannot start ends
 * StartFailed, one tried before ResultLost.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent_priv.h"
#include "buf.h"
#include "clock.h"
#include "codetar.h"
#include "log.h"
#include "pool.h"
#include "session.h"
#include "xmalloc.h"

#define IO_CHUNK	(64 * 1024)
#define EOF_GRACE_MS	2000	/* exited, and a stream still open: stop */

struct warm {
	struct agent	*a;
	char		*uid;		/* the pod's */
	char		*ns, *pod, *cid;
	/* A step's execution uid (NULL: not a step): its exec directory's name. */
	char		*step_uid;
	long long	 seen_ms;
};

static void
warm_free(struct warm *w)
{
	free(w->uid);
	free(w->ns);
	free(w->pod);
	free(w->cid);
	free(w->step_uid);
	free(w);
}

/* A warm sandbox's CPU time before the program is not the program's. */
void
agent_warm_usage(struct run *r)
{
	if (r->usage.cpu_ns >= 0 && r->cpu_before_ns >= 0)
		r->usage.cpu_ns = r->usage.cpu_ns > r->cpu_before_ns ?
		    r->usage.cpu_ns - r->cpu_before_ns : 0;
	else
		r->usage.cpu_ns = -1;
}

/* The record, at once, once the exit is known and the output complete. */
void
agent_warm_maybe_record(struct agent *a, struct run *r)
{
	char key[300];

	/* Held while the configuration disagrees: the ticker records it later. */
	if (!r->warm || !r->exited || !r->io_done || r->busy || r->recorded ||
	    !atomic_load(&a->act_ok))
		return;
	/*
	 * Metered (a holder with egress): its bytes are read at its end and
	 * its chain removed first, as a cold run's; the ticker records it
	 * then (or after METER_FINAL_MS without them).
	 */
	if (r->meter_wanted && !r->meter_done) {
		agent_wake(a);
		return;
	}
	agent_usage_once(a, r);
	crilog_finish(r->log);
	r->busy = 1;
	snprintf(key, sizeof(key), "record/%s", r->uid);
	workqueue_add(a->q, key);
}

/*
 * Give the execution back to the controller, to run cold: a status patch
 * tested to land only while it still names this pod and runs, which
 * writes startMode Cold, Pending, no pod, and says why. 1 when written or
 * moot (the execution ended, or names another pod).
 */
static int
fall_back(struct agent *a, const char *ns, const char *cx, const char *cx_uid,
    const char *pod, const char *why)
{
	struct k8s_patch_opts po = { .type = K8S_PATCH_JSON,
	    .subresource = "status" };
	struct k8s_error err;
	char msg[600];
	json_t *p;
	int rc;

	snprintf(msg, sizeof(msg), "its warm sandbox failed before the program "
	    "started (%.500s); running it cold", why);
	p = json_pack("[{s:s, s:s, s:s}, {s:s, s:s, s:s}, {s:s, s:s, s:s},"
	    " {s:s, s:s, s:s}, {s:s, s:s, s:s},"
	    " {s:s, s:s, s:s}, {s:s, s:s, s:s}, {s:s, s:s},"
	    " {s:s, s:s}, {s:s, s:s},"
	    " {s:s, s:s, s:s}, {s:s, s:s, s:s}, {s:s, s:s, s:s},"
	    " {s:s, s:s, s:s}, {s:s, s:s, s:s}, {s:s, s:s, s:s}]",
	    "op", "test", "path", "/metadata/uid", "value", cx_uid,
	    "op", "test", "path", "/status/phase", "value", "Running",
	    "op", "test", "path", "/status/podName", "value", pod,
	    "op", "test", "path", "/status/conditions/0/type", "value", "Scheduled",
	    "op", "test", "path", "/status/conditions/1/type", "value", "Started",
	    "op", "replace", "path", "/status/startMode", "value", "Cold",
	    "op", "replace", "path", "/status/phase", "value", "Pending",
	    "op", "remove", "path", "/status/podName",
	    "op", "remove", "path", "/status/nodeName",
	    "op", "remove", "path", "/status/startTime",
	    "op", "replace", "path", "/status/conditions/0/status", "value", "False",
	    "op", "replace", "path", "/status/conditions/0/reason", "value", "Pending",
	    "op", "replace", "path", "/status/conditions/0/message", "value", msg,
	    "op", "replace", "path", "/status/conditions/1/status", "value", "False",
	    "op", "replace", "path", "/status/conditions/1/reason", "value", "Pending",
	    "op", "replace", "path", "/status/conditions/1/message", "value",
	    "not started");
	rc = k8s_patch(a->client, &cx_resource, ns, cx, &po, p, NULL, &err);
	json_decref(p);
	if (rc == 0) {
		log_info("warm sandbox given back", "execution=%s/%s pod=%s "
		    "why=\"%s\"", ns, cx, pod, why);
		return 1;
	}
	if (rc == K8S_ENOTFOUND || (rc == K8S_EHTTP && err.http_status == 422))
		return 1;	/* gone, ended, or names another pod */
	log_warn("cannot give a warm sandbox back", "execution=%s/%s error=\"%s\"",
	    ns, cx, err.message);
	return 0;
}

/*
 * The exec's OCI process: the container's own, with args
 * [warm, BYTES or -, argv[1..]] and the claim's env over the container's. A new string, or NULL when the claim's argv does not start
 * with the runner.
 */
/*
 * The program's env: the container's (base's "env", NAME=VALUE strings),
 * each the spec names replaced by the spec's. A new array.
 */
static json_t *
step_env(json_t *base, const struct pool_process *pp)
{
	json_t *env = json_array(), *v, *e;
	size_t i, j;

	json_array_foreach(json_object_get(base, "env"), i, v) {
		const char *s = json_string_value(v), *eq;
		int over = 0;

		if (s == NULL || (eq = strchr(s, '=')) == NULL)
			continue;
		json_array_foreach(pp->env, j, e) {
			const char *name = json_string_value(json_object_get(e, "name"));

			if (strlen(name) == (size_t)(eq - s) &&
			    strncmp(s, name, (size_t)(eq - s)) == 0)
				over = 1;
		}
		if (!over)
			json_array_append(env, v);
	}
	json_array_foreach(pp->env, j, e) {
		char *kv = xasprintf("%s=%s", json_string_value(json_object_get(e,
		    "name")), json_string_value(json_object_get(e, "value")));

		json_array_append_new(env, json_string(kv));
		free(kv);
	}
	return env;
}

static char *
exec_process(json_t *base, const struct pool_process *pp, size_t tar_len)
{
	json_t *p = json_deep_copy(base), *args = json_array(), *v;
	char n[32], *out;
	size_t i;

	if (p == NULL || strcmp(json_string_value(json_array_get(pp->argv, 0)),
	    POOL_RUNNER) != 0) {
		json_decref(p);
		json_decref(args);
		return NULL;
	}
	/* No spec.stdin: all of stdin is the tar, one process fewer. */
	if (pp->stdin_data == NULL)
		snprintf(n, sizeof(n), "-");
	else
		snprintf(n, sizeof(n), "%zu", tar_len);
	json_array_append_new(args, json_string(POOL_WARM));
	json_array_append_new(args, json_string(n));
	json_array_foreach(pp->argv, i, v)
		if (i > 0)
			json_array_append(args, v);
	json_object_set_new(p, "args", args);
	json_object_set_new(p, "env", step_env(p, pp));
	json_object_del(p, "terminal");
	json_object_del(p, "consoleSize");
	out = json_dumps(p, JSON_COMPACT);
	json_decref(p);
	return out;
}

/*
 * A session step's request to its server (images/runner/warm.c's
 * header), but for its line, which needs the server's seq: the code's
 * name, the timeout and grace, the env ("NAME=VALUE\0" each), the kernel's
 * argv (a new reference). Why not, or NULL.
 */
struct step_req {
	char		 code[96];
	long long	 timeout_ms, grace_ms;
	struct buf	 env;
	json_t		*kernel;
};

#define STEP_ENV_MAX	(192 * 1024)	/* below warm --serve's 256 KiB */

static const char *
step_request(json_t *base, const struct pool_process *pp, struct step_req *q)
{
	json_t *st = json_object_get(pp->proc, "step"), *env, *v;
	const char *code = json_string_value(json_object_get(st, "code"));
	json_t *kernel = json_object_get(st, "kernel");
	size_t i;

	buf_init(&q->env, STEP_ENV_MAX);
	q->timeout_ms = json_integer_value(json_object_get(st, "timeoutMs"));
	q->grace_ms = json_integer_value(json_object_get(st, "graceMs"));
	if (strcmp(json_string_value(json_array_get(pp->argv, 0)),
	    POOL_RUNNER) != 0 || code == NULL || code[0] == '\0' ||
	    strlen(code) >= sizeof(q->code) || strpbrk(code, " \t\n\r") ||
	    !json_is_array(kernel) || json_array_size(kernel) == 0 ||
	    q->timeout_ms <= 0 || q->grace_ms < 0)
		return "its step cannot be read";
	json_array_foreach(kernel, i, v)
		if (!json_is_string(v))
			return "its step cannot be read";
	snprintf(q->code, sizeof(q->code), "%s", code);
	env = step_env(base, pp);
	json_array_foreach(env, i, v) {
		const char *kv = json_string_value(v);

		if (kv == NULL || buf_append(&q->env, kv, strlen(kv) + 1) != 0) {
			json_decref(env);
			return "its env is over 192 KiB";
		}
	}
	json_decref(env);
	q->kernel = json_incref(kernel);
	return NULL;
}

/* The input: the tar of the files, then stdin. 0, or why not (static). */
static const char *
build_input(const struct pool_process *pp, struct buf *in, size_t *tar_len)
{
	struct codetar_entry e[sizeof(pp->files) / sizeof(pp->files[0])];
	size_t bad;

	for (size_t i = 0; i < pp->nfiles; i++)
		e[i] = (struct codetar_entry){ pp->files[i].path,
		    pp->files[i].data, pp->files[i].len };
	buf_init(in, codetar_size(e, pp->nfiles) + pp->stdin_len + 1);
	if (codetar_build(e, pp->nfiles, in, &bad) != 0)
		return "a file's path cannot be stored in the archive";
	*tar_len = in->len;
	if (pp->stdin_len && buf_append(in, pp->stdin_data, pp->stdin_len) != 0)
		return "stdin does not fit";
	return NULL;
}

static void
set_io_done(struct agent *a, const char *uid)
{
	struct run *r;

	pthread_mutex_lock(&a->lock);
	if ((r = agent_find_run(a, uid)) != NULL) {
		r->io_done = 1;
		agent_warm_maybe_record(a, r);
	}
	pthread_mutex_unlock(&a->lock);
}

static void end_unstarted(struct warm *w, const char *isolation,
    const char *why);
static void tried_before(struct warm *w);
static void start_failed(struct warm *w, int sent, const char *why);

/* A runsc exec client the agent started (start_runsc), until reaped. */
struct child {
	pid_t	 pid;
	int	 pidfd;
	int	 reaped;
};

/* The client exited: the program's exit status is its own (128 + signal). */
static void
reap(struct warm *w, struct child *c)
{
	struct agent *a = w->a;
	struct run *r;
	int st = 0;

	if (c->reaped || waitpid(c->pid, &st, WNOHANG) != c->pid)
		return;
	c->reaped = 1;
	pthread_mutex_lock(&a->lock);
	if ((r = agent_find_run(a, w->uid)) != NULL && !r->exited) {
		r->exited = 1;
		r->exit_exact = 1;	/* the client's own: no event refines it */
		r->status = WIFEXITED(st) ? (uint32_t)WEXITSTATUS(st) :
		    128 + (uint32_t)WTERMSIG(st);
		r->exited_ns = agent_now_ns();
		if (r->sandbox_killed_ns && r->sandbox_killed_ns < r->exited_ns)
			r->exited_ns = r->sandbox_killed_ns;
		r->exit_seen_ms = clock_mono_ms();
	}
	pthread_mutex_unlock(&a->lock);
}

/*
 * Pump: input into fd[0] while it takes it, fd[1] and fd[2] into the
 * run's crilog until both reach EOF (or the run exited EOF_GRACE_MS ago,
 * or the agent stops); with a child (runsc), its exit too.
 */
static void
pump(struct warm *w, int fd[3], struct buf *in, size_t *off, struct child *c)
{
	static __thread char chunk[IO_CHUNK];
	struct agent *a = w->a;
	struct pollfd pfd[4];
	int open_[3] = { fd[0] >= 0, 1, 1 };
	long long exited_at = 0;
	int unread;

	while ((open_[1] || open_[2] || (c->pidfd >= 0 && !c->reaped)) &&
	    !atomic_load(&a->stop)) {
		int n = 0, idx[4];
		struct run *r;

		for (int i = 0; i < 3; i++) {
			if (!open_[i])
				continue;
			pfd[n] = (struct pollfd){ fd[i], i ? POLLIN : POLLOUT, 0 };
			idx[n++] = i;
		}
		if (c->pidfd >= 0 && !c->reaped) {
			pfd[n] = (struct pollfd){ c->pidfd, POLLIN, 0 };
			idx[n++] = 3;
		}
		/* FIFO input written, not yet all read: look again soon. */
		(void)poll(pfd, (nfds_t)n, fd[0] >= 0 && !open_[0] ? 2 : 50);
		for (int k = 0; k < n; k++) {
			int i = idx[k];
			ssize_t got;

			if (i == 3) {
				if (pfd[k].revents)
					reap(w, c);
				continue;
			}
			if (i == 0) {
				if (!(pfd[k].revents & (POLLOUT | POLLERR)))
					continue;
				got = write(fd[0], in->data + *off, in->len - *off);
				if (got > 0)
					*off += (size_t)got;
				if (*off == in->len || (got < 0 && errno != EAGAIN))
					open_[0] = 0;
				continue;
			}
			if (!(pfd[k].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			while ((got = read(fd[i], chunk, sizeof(chunk))) > 0) {
				pthread_mutex_lock(&a->lock);
				if ((r = agent_find_run(a, w->uid)) != NULL &&
				    r->log)
					crilog_feed_stream(r->log, i == 2, chunk,
					    (size_t)got);
				pthread_mutex_unlock(&a->lock);
			}
			if (got == 0 || (got < 0 && errno != EAGAIN &&
			    errno != EINTR))
				open_[i] = 0;
		}
		if (fd[0] >= 0 && !open_[0] && c->pidfd >= 0) {
			/* A pipe: what is in it stays readable after the close. */
			close(fd[0]);
			fd[0] = -1;
		} else if (fd[0] >= 0 && !open_[0] && *off == in->len &&
		    ioctl(fd[0], FIONREAD, &unread) == 0 && unread == 0) {
			/*
			 * A FIFO, all of it read by the shim (what is still in
			 * it when stdin is closed is lost): the program gets
			 * EOF after it.
			 */
			struct k8s_error err;

			close(fd[0]);
			fd[0] = -1;
			if (ctrd_exec_close_stdin(a->ctrd, w->cid, WARM_EXEC_ID,
			    &err) != 0)
				log_debug("cannot close a warm exec's stdin",
				    "pod=%s/%s error=\"%s\"", w->ns, w->pod,
				    err.message);
		}
		pthread_mutex_lock(&a->lock);
		r = agent_find_run(a, w->uid);
		if (r == NULL || (r->recorded && !r->exited)) {
			pthread_mutex_unlock(&a->lock);
			break;		/* the pod went: cancelled, deleted */
		}
		if (r->exited && exited_at == 0)
			exited_at = clock_mono_ms();
		pthread_mutex_unlock(&a->lock);
		if (exited_at && clock_mono_ms() - exited_at > EOF_GRACE_MS)
			break;
	}
}

/*
 * Through containerd (Tasks.Exec, then Start): FIFOs in dir, the input
 * written into the stdin one before the start. 0 started; else the run
 * was ended or given back here.
 */
static int
start_ctrd(struct warm *w, const char *proc, struct buf *in, size_t *off,
    int fd[3], const char *dir, char path[3][600])
{
	struct agent *a = w->a;
	struct k8s_error err;

	for (int i = 0; i < 3; i++) {
		snprintf(path[i], 600, "%s/%s", dir,
		    (const char *[]){ "in", "out", "err" }[i]);
		if (mkfifo(path[i], 0600) != 0 || (fd[i] = open(path[i],
		    (i ? O_RDONLY : O_RDWR) | O_NONBLOCK | O_CLOEXEC)) < 0) {
			end_unstarted(w, NULL, "cannot make the exec's FIFOs");
			return -1;
		}
	}
	/* All of the input at once if the pipe can hold it (it usually can). */
	(void)fcntl(fd[0], F_SETPIPE_SZ, (int)(in->len < (1 << 20) ?
	    in->len + 1 : (1 << 20)));
	{
		ssize_t got = write(fd[0], in->data, in->len);

		*off = got > 0 ? (size_t)got : 0;
	}
	if (ctrd_exec_create(a->ctrd, w->cid, WARM_EXEC_ID, proc, path[0],
	    path[1], path[2], &err) == 0) {
		if (ctrd_exec_start(a->ctrd, w->cid, WARM_EXEC_ID, NULL, &err) == 0)
			return 0;
		/*
		 * Ended first: the abort may wait out containerd's timeouts
		 * (not when stopping; the pod's deletion ends it anyway).
		 */
		start_failed(w, 1, err.message);
		if (!atomic_load(&a->stop))
			ctrd_exec_abort(a->ctrd, w->cid, WARM_EXEC_ID);
		return -1;
	}
	if (err.code == K8S_EEXIST) {
		/* Made before (an agent restarted): never twice. */
		log_warn("warm exec already made; not run again", "pod=%s/%s",
		    w->ns, w->pod);
		tried_before(w);
	} else {
		start_failed(w, 0, err.message);
	}
	return -1;
}

/*
 * Straight through runsc (`runsc --root R exec --process FILE ID`, the
 * agent's --runsc): no containerd and no shim in the way, which cost
 * 35-65 ms an exec on the test node; the program's stdio are the agent's
 * pipes, its exit the client's. 0 started; else the run was ended or
 * given back here.
 */
static int
start_runsc(struct warm *w, const char *proc, struct buf *in, size_t *off,
    int fd[3], struct child *c, const char *dir, char path[3][600])
{
	struct agent *a = w->a;
	posix_spawn_file_actions_t fa;
	int p[3][2] = { { -1, -1 }, { -1, -1 }, { -1, -1 } }, pf, rc;
	char *argv[8], *envp[] = { "PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL };
	FILE *f;

	snprintf(path[0], 600, "%s/process.json", dir);
	if ((pf = open(path[0], O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
	    0600)) < 0 || (f = fdopen(pf, "w")) == NULL) {
		if (pf >= 0)
			close(pf);
		end_unstarted(w, NULL, "cannot write the exec's process");
		return -1;
	}
	rc = fputs(proc, f) < 0;
	if (fclose(f) != 0 || rc) {
		end_unstarted(w, NULL, "cannot write the exec's process");
		return -1;
	}
	for (int i = 0; i < 3; i++)
		if (pipe2(p[i], O_CLOEXEC) != 0) {
			for (int j = 0; j < i; j++) {
				close(p[j][0]);
				close(p[j][1]);
			}
			end_unstarted(w, NULL, "cannot make the exec's pipes");
			return -1;
		}
	/* Ours: stdin's write end, the read ends of stdout and stderr. */
	fd[0] = p[0][1];
	fd[1] = p[1][0];
	fd[2] = p[2][0];
	(void)fcntl(fd[0], F_SETPIPE_SZ, (int)(in->len < (1 << 20) ?
	    in->len + 1 : (1 << 20)));
	for (int i = 0; i < 3; i++)
		(void)fcntl(fd[i], F_SETFL, O_NONBLOCK);
	{
		ssize_t got = write(fd[0], in->data, in->len);

		*off = got > 0 ? (size_t)got : 0;
	}
	argv[0] = (char *)a->o.runsc;
	argv[1] = "--root";
	argv[2] = (char *)a->o.runsc_root;
	argv[3] = "exec";
	argv[4] = "--process";
	argv[5] = path[0];
	argv[6] = w->cid;
	argv[7] = NULL;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, p[0][0], 0);
	posix_spawn_file_actions_adddup2(&fa, p[1][1], 1);
	posix_spawn_file_actions_adddup2(&fa, p[2][1], 2);
	rc = posix_spawn(&c->pid, a->o.runsc, &fa, NULL, argv, envp);
	posix_spawn_file_actions_destroy(&fa);
	close(p[0][0]);
	close(p[1][1]);
	close(p[2][1]);
	if (rc != 0) {
		start_failed(w, 0, "cannot start runsc");
		return -1;
	}
	if ((c->pidfd = (int)syscall(SYS_pidfd_open, c->pid, 0)) < 0) {
		/*
		 * Cannot wait for it by poll: it goes. The client may have
		 * started the program in the sandbox already, which its kill
		 * does not stop: the run ends, and its pod (the sandbox) with it.
		 */
		kill(c->pid, SIGKILL);
		(void)waitpid(c->pid, NULL, 0);
		start_failed(w, 1, "cannot follow runsc");
		return -1;
	}
	return 0;
}

/*
 * Run r ends now, killed (137) for why, never having run or with its
 * start not known, and goes to be recorded (lock held).
 */
static void
end_killed(struct agent *a, struct run *r, enum cx_kill why)
{
	r->why = why;
	r->start_ns = r->exited_ns = agent_now_ns();
	r->exited = 1;
	r->status = 137;
	r->exit_seen_ms = clock_mono_ms();
	r->io_done = 1;
	agent_warm_maybe_record(a, r);
}

/*
 * Its exec was made before, by an agent that then restarted: never run
 * twice. A warm run's pod is deleted (the controller ends it, PodDeleted);
 * a session's step ends here, ResultLost: its output went with that agent.
 */
static void
tried_before(struct warm *w)
{
	struct agent *a = w->a;
	struct run *r;

	pthread_mutex_lock(&a->lock);
	if ((r = agent_find_run(a, w->uid)) != NULL) {
		if (w->step_uid && !r->recorded) {
			free(r->lost);
			r->lost = xstrdup("the node agent restarted while it "
			    "ran: its output cannot be had, and it is not run "
			    "again");
			end_killed(a, r, CX_KILL_NONE);
		} else {
			r->recorded = 1;
		}
	}
	pthread_mutex_unlock(&a->lock);
}

/* Stop before the program ran: refused (isolation) or given back. */
static void
end_unstarted(struct warm *w, const char *isolation, const char *why)
{
	struct agent *a = w->a;
	struct run *r;
	char *cx = NULL, *cx_uid = NULL;

	pthread_mutex_lock(&a->lock);
	if ((r = agent_find_run(a, w->uid)) != NULL) {
		if (isolation) {
			/* The program never runs; the execution fails. */
			free(r->isolation);
			r->isolation = xstrdup(isolation);
			end_killed(a, r, CX_KILL_ISOLATION);
		} else if (w->step_uid) {
			/*
			 * A session's step has no cold path to go back to: it
			 * ends, StartFailed, saying why.
			 */
			log_warn("session step not started", "pod=%s/%s "
			    "why=\"%s\"", w->ns, w->pod, why);
			free(r->note);
			r->note = xasprintf("; its session's sandbox could not "
			    "start it: %.400s", why);
			end_killed(a, r, CX_KILL_START);
		} else {
			cx = xstrdup(r->cx);
			cx_uid = xstrdup(r->cx_uid);
		}
	}
	pthread_mutex_unlock(&a->lock);
	if (cx == NULL)
		return;
	for (int i = 0; i < 5 && !atomic_load(&a->stop); i++) {
		if (fall_back(a, w->ns, cx, cx_uid, w->pod, why))
			break;
		usleep(200000);
	}
	pthread_mutex_lock(&a->lock);
	if ((r = agent_find_run(a, w->uid)) != NULL)
		r->recorded = 1;	/* the ticker deletes the pod */
	pthread_mutex_unlock(&a->lock);
	free(cx);
	free(cx_uid);
}

int
agent_warm_start_failed(struct agent *a, struct run *r, int sent)
{
	if (!sent)
		return 1;
	end_killed(a, r, CX_KILL_START);
	return 0;
}

/* Its start failed: given back, or ended (agent_warm_start_failed). */
static void
start_failed(struct warm *w, int sent, const char *why)
{
	struct agent *a = w->a;
	struct run *r;
	int back = 0;

	pthread_mutex_lock(&a->lock);
	if ((r = agent_find_run(a, w->uid)) != NULL)
		back = agent_warm_start_failed(a, r, sent);
	pthread_mutex_unlock(&a->lock);
	if (back)
		end_unstarted(w, NULL, why);
	else if (sent)
		log_warn("warm start not confirmed; killed, not run again",
		    "pod=%s/%s error=\"%s\"", w->ns, w->pod, why);
}

/* Its program (or step) was asked to start: its deadline counts from now. */
static void
started(struct warm *w, uint32_t pid)
{
	struct agent *a = w->a;
	struct run *r;

	pthread_mutex_lock(&a->lock);
	if ((r = agent_find_run(a, w->uid)) != NULL) {
		r->start_ns = agent_now_ns();
		r->pid = pid;
		r->warm_started = 1;
		agent_arm_deadline(r);
	}
	pthread_mutex_unlock(&a->lock);
	metric_observe(a->m_deliver, (double)(clock_mono_ms() - w->seen_ms) /
	    1000.0);
}

/*
 * Its server gone with the step in it (not a record's end): a kill of the
 * agent's (deadline, output, the session's end) ends the run by the
 * sandbox's exit, a sandbox that died as killed (137); else it ends here,
 * StartFailed when
 * the server never answered (it may not have started the step) or
 * ResultLost (it ran; what it wrote is not whole). Never run again.
 */
static void
served_lost(struct warm *w, enum serve_end e, const char *said, uint32_t pid)
{
	struct agent *a = w->a;
	struct run *r;

	pthread_mutex_lock(&a->lock);
	if ((r = agent_step_run(a, w->uid, w->step_uid)) == NULL ||
	    r->recorded) {
		pthread_mutex_unlock(&a->lock);
		return;
	}
	if (r->exited || r->why != CX_KILL_NONE || r->kill_sent) {
		/* The agent's kill: its exit comes as the sandbox's. */
		r->io_done = 1;
		agent_warm_maybe_record(a, r);
	} else if (pid && kill((pid_t)pid, 0) != 0 && errno == ESRCH) {
		/* The sandbox died under it (killed, as the host's OOM does). */
		r->exited = 1;
		r->status = 137;
		r->exited_ns = agent_now_ns();
		r->exit_seen_ms = clock_mono_ms();
		r->io_done = 1;
		agent_warm_maybe_record(a, r);
	} else if (e == SERVE_UNSTARTED) {
		free(r->note);
		r->note = xasprintf("; its session's step server ended before "
		    "it answered%s%.200s", said[0] ? ": " : "", said);
		end_killed(a, r, CX_KILL_START);
	} else {
		free(r->lost);
		r->lost = xstrdup(e == SERVE_BROKEN ? "its session's step server "
		    "wrote what is not its records while it ran: its output "
		    "cannot be had, and it is not run again" : "its session's "
		    "step server ended while it ran: its output cannot be had, "
		    "and it is not run again");
		end_killed(a, r, CX_KILL_NONE);
	}
	pthread_mutex_unlock(&a->lock);
}

/*
 * A session's step: one request to the pod's step server (serve.c),
 * started now if the pod has none. limit: the archive's bytes in in when
 * a program stdin follows it, else -1.
 */
static void
served_step(struct warm *w, json_t *base, struct step_req *q,
    const struct buf *in, long long limit, uint32_t pid)
{
	struct agent *a = w->a;
	struct agent_server *s;
	struct buf req;
	unsigned long long seq;
	unsigned status = 0;
	char why[300], line[256], lim[32];
	enum serve_end e;
	struct run *r;
	int n;

	if ((s = agent_serve_take(a, w->uid, w->ns, w->pod, w->cid, pid, base,
	    q->kernel, why, sizeof(why))) == NULL) {
		end_unstarted(w, NULL, why);
		return;
	}
	seq = agent_serve_next_seq(s);
	if (limit >= 0)
		snprintf(lim, sizeof(lim), "%lld", limit);
	else
		snprintf(lim, sizeof(lim), "-");
	n = snprintf(line, sizeof(line), "STEP %llu %s %lld %lld %s %zu %zu\n",
	    seq, lim, q->timeout_ms, q->grace_ms, q->code, q->env.len, in->len);
	buf_init(&req, (size_t)n + q->env.len + in->len);
	if (n <= 0 || (size_t)n >= sizeof(line) ||
	    buf_append(&req, line, (size_t)n) != 0 ||
	    buf_append(&req, q->env.data, q->env.len) != 0 ||
	    buf_append(&req, in->data, in->len) != 0) {
		buf_free(&req);
		agent_serve_put(a, s, 1);
		end_unstarted(w, NULL, "its step's request cannot be made");
		return;
	}
	started(w, pid);
	log_debug("session step sent", "pod=%s/%s seq=%llu after_claim_seen_ms="
	    "%lld", w->ns, w->pod, seq, clock_mono_ms() - w->seen_ms);
	e = agent_serve_step(a, s, w->uid, w->step_uid, &req, seq, &status);
	buf_free(&req);
	if (e == SERVE_DONE || e == SERVE_DONE_BROKEN) {
		pthread_mutex_lock(&a->lock);
		if ((r = agent_step_run(a, w->uid, w->step_uid)) != NULL &&
		    !r->exited) {
			r->exited = 1;
			r->exit_exact = 1;	/* the server's word: no event refines it */
			r->status = status;
			r->exited_ns = agent_now_ns();
			r->exit_seen_ms = clock_mono_ms();
		}
		pthread_mutex_unlock(&a->lock);
		agent_serve_put(a, s, e == SERVE_DONE);
		set_io_done(a, w->uid);
		return;
	}
	(void)snprintf(why, sizeof(why), "%s", agent_serve_said(s));
	agent_serve_put(a, s, 0);
	if (e != SERVE_RUN_GONE)
		served_lost(w, e, why, pid);
}

static void *
warm_main(void *arg)
{
	struct warm *w = arg;
	struct agent *a = w->a;
	struct pool_process pp = { 0 };
	struct k8s_error err;
	struct buf in;
	json_t *pod = informer_get(a->pods, w->ns, w->pod), *base = NULL;
	const char *bad = NULL;
	char dir[512], path[3][600] = { "", "", "" }, *proc = NULL;
	char *refused = NULL;
	const char *sname, *suid;
	struct child child = { -1, -1, 0 };
	size_t tar_len = 0, off = 0;
	uint32_t pid = 0;
	int fd[3] = { -1, -1, -1 }, made = 0, has_stdin = 0, checked = 0;
	struct step_req q = { .kernel = NULL };
	struct run *r;

	buf_init(&in, 0);
	buf_init(&q.env, 0);
	if (pod == NULL || strcmp(k8s_obj_uid(pod), w->uid) != 0 ||
	    (w->step_uid && (session_pod_step(pod, &sname, &suid) != 0 ||
	    strcmp(suid, w->step_uid) != 0)) ||
	    pool_process_read(pod, &pp) != 0) {
		pool_process_free(&pp);
		end_unstarted(w, NULL, "its claim cannot be read");
		goto out;
	}
	/* The sandbox's pid and check, from its TaskStart; else asked now. */
	pthread_mutex_lock(&a->lock);
	if ((r = agent_find_run(a, w->uid)) != NULL) {
		pid = r->pid;
		refused = r->isolation ? xstrdup(r->isolation) : NULL;
		base = json_incref(r->process);
	}
	pthread_mutex_unlock(&a->lock);
	/* A step on a live server: its sandbox was checked at its start. */
	if (w->step_uid && pid == 0 && base == NULL && refused == NULL)
		checked = agent_serve_sandbox(a, w->uid, &pid, &base);
	if (pid == 0 && ctrd_task_pid(a->ctrd, w->cid, &pid, &err) != 0) {
		pool_process_free(&pp);
		end_unstarted(w, NULL, err.message);
		goto out;
	}
	/* A sandbox that died is not refused, it is given back. */
	if (kill((pid_t)pid, 0) != 0 && errno == ESRCH) {
		pool_process_free(&pp);
		free(refused);
		end_unstarted(w, NULL, "its sandbox is gone");
		goto out;
	}
	if (!checked && refused == NULL &&
	    (bad = agent_sandbox_refused(pid, 1)) != NULL) {
		/* A network stack its execution granted (trust.c): its egress. */
		pthread_mutex_lock(&a->lock);
		r = agent_find_run(a, w->uid);
		if (bad != AGENT_NETSTACK || r == NULL || !r->netstack)
			refused = xstrdup(bad);
		pthread_mutex_unlock(&a->lock);
	}
	if (refused != NULL) {
		pool_process_free(&pp);
		log_warn("sandbox refused", "pod=%s/%s problem=\"%s\"", w->ns,
		    w->pod, refused);
		end_unstarted(w, refused, NULL);
		free(refused);
		goto out;
	}
	buf_free(&in);
	if ((bad = build_input(&pp, &in, &tar_len)) != NULL ||
	    (base == NULL && ctrd_container_process(a->ctrd, w->cid, &base,
	    &err) != 0) ||
	    (w->step_uid ? (bad = step_request(base, &pp, &q)) != NULL :
	    (proc = exec_process(base, &pp, tar_len)) == NULL)) {
		pool_process_free(&pp);
		end_unstarted(w, NULL, bad ? bad : base ? "its command does not "
		    "start with the runner" : err.message);
		goto out;
	}
	has_stdin = pp.stdin_data != NULL;
	pool_process_free(&pp);
	/* A step's mark is its own: the pod runs many. */
	snprintf(dir, sizeof(dir), "%s/%s", a->o.exec_dir, w->step_uid ?
	    w->step_uid : w->uid);
	(void)mkdir(a->o.exec_dir, 0700);
	/*
	 * The directory is the mark that this pod's program was tried: it
	 * stays until the pod is deleted (tick.c), on the host, so an agent
	 * that restarts never starts it a second time.
	 */
	if (mkdir(dir, 0700) != 0) {
		if (errno == EEXIST) {
			log_warn("warm run tried before on this node; not run "
			    "again", "pod=%s/%s", w->ns, w->pod);
			tried_before(w);
		} else {
			end_unstarted(w, NULL, "cannot make the exec's directory");
		}
		goto out;
	}
	made = 1;
	/*
	 * The sandbox's CPU time and OOM kills so far (its start, the
	 * holder's warm-up): the program is charged what it adds (tick.c
	 * takes it off); a warm-up's OOM is not the program's.
	 */
	{
		struct usage u;

		if (usage_read(a->o.cgroup_mount, a->o.cgroup_root, w->uid,
		    &u) != 0)
			u.cpu_ns = u.oom_kills = -1;
		pthread_mutex_lock(&a->lock);
		if ((r = agent_find_run(a, w->uid)) != NULL) {
			r->cpu_before_ns = u.cpu_ns;
			r->oom_before = u.oom_kills;
		}
		pthread_mutex_unlock(&a->lock);
	}
	if (w->step_uid) {
		served_step(w, base, &q, &in, has_stdin ? (long long)tar_len : -1,
		    pid);
		goto out;
	}
	if ((a->o.runsc ? start_runsc(w, proc, &in, &off, fd, &child, dir,
	    path) : start_ctrd(w, proc, &in, &off, fd, dir, path)) != 0)
		goto out;
	started(w, pid);
	log_debug("warm run started", "pod=%s/%s after_claim_seen_ms=%lld",
	    w->ns, w->pod, clock_mono_ms() - w->seen_ms);
	pump(w, fd, &in, &off, &child);
	set_io_done(a, w->uid);
out:
	for (int i = 0; i < 3; i++)
		if (fd[i] >= 0)
			close(fd[i]);
	if (made)
		for (int i = 0; i < 3; i++)
			if (path[i][0])
				(void)unlink(path[i]);
	if (child.pidfd >= 0) {
		/*
		 * Stopping, or the pod went: the client goes (the program
		 * goes with its sandbox, the pod's), and is reaped.
		 */
		if (!child.reaped) {
			kill(child.pid, SIGKILL);
			(void)waitpid(child.pid, NULL, 0);
		}
		close(child.pidfd);
	}
	free(proc);
	json_decref(q.kernel);
	buf_free(&q.env);
	json_decref(base);
	json_decref(pod);
	buf_free(&in);
	warm_free(w);
	atomic_fetch_sub(&a->warm_threads, 1);
	return NULL;
}

void
agent_warm_spawn(struct agent *a, struct run *r)
{
	struct warm *w = xcalloc(1, sizeof(*w));
	pthread_attr_t at;
	pthread_t th;

	w->a = a;
	w->uid = xstrdup(r->uid);
	w->ns = xstrdup(r->ns);
	w->pod = xstrdup(r->pod);
	w->cid = xstrdup(r->cid);
	w->step_uid = r->step && r->cx_uid ? xstrdup(r->cx_uid) : NULL;
	w->seen_ms = clock_mono_ms();
	r->warm_spawned = 1;
	atomic_fetch_add(&a->warm_threads, 1);
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&th, &at, warm_main, w) != 0) {
		atomic_fetch_sub(&a->warm_threads, 1);
		warm_free(w);
		r->warm_spawned = 0;	/* the next pod event tries again */
	}
	pthread_attr_destroy(&at);
}

/* Remove the exec directory of pod uid, and what a run left in it. */
void
agent_warm_forget(struct agent *a, const char *uid)
{
	static const char *const names[] = { "process.json", "in", "out", "err" };
	char path[700];

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s/%s", a->o.exec_dir, uid,
		    names[i]);
		(void)unlink(path);
	}
	snprintf(path, sizeof(path), "%s/%s", a->o.exec_dir, uid);
	(void)rmdir(path);
}

/*
 * Exec directories no run has (an agent restarted, and their pods went
 * while it was down), untouched for LOG_STALE_S: the mark that a program
 * was tried is no longer needed once its pod is gone for that long.
 */
void
agent_warm_sweep(struct agent *a)
{
	DIR *d = opendir(a->o.exec_dir);
	struct dirent *de;
	struct stat st;
	char path[700];
	int known;

	if (d == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", a->o.exec_dir, de->d_name);
		if (lstat(path, &st) != 0 || !S_ISDIR(st.st_mode) ||
		    time(NULL) - st.st_mtime < LOG_STALE_S)
			continue;
		pthread_mutex_lock(&a->lock);
		known = agent_find_run(a, de->d_name) != NULL;
		/* A step's mark is named for its execution: kept while its run is. */
		for (struct run *r = a->runs; r && !known; r = r->next)
			known = r->step && r->cx_uid &&
			    strcmp(r->cx_uid, de->d_name) == 0;
		pthread_mutex_unlock(&a->lock);
		if (!known)
			agent_warm_forget(a, de->d_name);
	}
	closedir(d);
}
