/*
 * exitwait.c - a cold run's exit, straight from its gVisor sandbox.
 *
 * containerd's TaskExit for a container of a gVisor pod comes about
 * 100 ms after the program ended on the test node: the runsc shim first
 * runs `runsc kill --all` on the container and waits for it, then
 * publishes the exit (bench/RESULTS.md, "where the cold time went"). With
 * the agent's --runsc, a thread per cold run asks the sandbox itself:
 * `runsc --root R wait ID` blocks in the sentry until the container's
 * first process exits and prints {"id": ID, "exitStatus": N}, N as the
 * shim would report it (128 + the signal for a signal). gVisor lets any
 * number of clients wait on one container, the shim's own included.
 *
 * The status is the sandbox's, as trusted as the shim's: the program
 * chooses its exit code and nothing else. When the wait fails (the
 * sandbox was killed: the deadline, the output cap, the memory limit),
 * ends by a signal (128 + N: TaskOOM may follow), runs past
 * EXITWAIT_MAX_MS, or more than EXITWAIT_MAX are running, the run goes on
 * as before, on TaskExit, which also brings the OOM flag first. Only a
 * verified execution's pod gets a wait.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "agent_priv.h"
#include "clock.h"
#include "log.h"
#include "xmalloc.h"

/*
 * runsc clients at once: each is a Go process in the agent's cgroup (256
 * MiB by default), 3 MB of its own (22 MB resident, the rest the binary's
 * pages, shared). Past it, TaskExit alone; and a wait longer than
 * EXITWAIT_MAX_MS is given up (a long run gains little from it), so
 * long runs cannot hold every slot.
 */
#define EXITWAIT_MAX	16
#define EXITWAIT_MAX_MS	30000
#define WAIT_OUT_MAX	512	/* {"id":<64 hex>,"exitStatus":N} and room */

struct exitwait {
	struct agent	*a;
	char		*uid;
	char		*cid;
};

int
agent_parse_wait(const char *out, size_t len, const char *cid,
    uint32_t *status)
{
	json_t *o, *id, *st;
	json_int_t v;
	int rc = -1;

	if ((o = json_loadb(out, len, JSON_DISABLE_EOF_CHECK, NULL)) == NULL)
		return -1;
	id = json_object_get(o, "id");
	st = json_object_get(o, "exitStatus");
	if (json_is_string(id) && strcmp(json_string_value(id), cid) == 0 &&
	    json_is_integer(st) && (v = json_integer_value(st)) >= 0 &&
	    v <= 255 + 128) {
		*status = (uint32_t)v;
		rc = 0;
	}
	json_decref(o);
	return rc;
}

int
agent_wait_takes(const struct run *r, const char *cid, uint32_t status)
{
	return r->cid && strcmp(r->cid, cid) == 0 && !r->warm &&
	    !r->exit_exact && !r->exited && !r->recorded && !r->kill_sent &&
	    status <= 128;
}

/* The ticker's poll, woken: a run it should look at now. */
void
agent_wake(struct agent *a)
{
	uint64_t one = 1;

	if (a->wake_fd >= 0)
		(void)!write(a->wake_fd, &one, sizeof(one));
}

/* The exit, from the sandbox: taken unless something else came first. */
static void
take(struct exitwait *e, uint32_t status, int64_t at_ns)
{
	struct agent *a = e->a;
	struct run *r;
	int taken = 0;

	pthread_mutex_lock(&a->lock);
	/*
	 * Not over anything that came first (the kubelet's terminated, a
	 * kill), and not a death by signal: an OOM kill's TaskOOM comes
	 * with containerd's exit, so that one waits for it.
	 */
	if ((r = agent_find_run(a, e->uid)) != NULL &&
	    agent_wait_takes(r, e->cid, status)) {
		if (!r->exited)
			r->exit_seen_ms = clock_mono_ms();
		r->exited = 1;
		r->exit_exact = 1;
		r->exit_early = 1;
		r->status = status;
		r->exited_ns = at_ns;
		taken = 1;
	}
	pthread_mutex_unlock(&a->lock);
	metric_inc(a->m_waits, taken ? "exit" : status > 128 ? "signal" : "late");
	if (taken)
		agent_wake(a);
}

/*
 * Spawn `runsc wait`, read its one line; 0 and the status, else -1 (it
 * failed, or the agent stops and it was killed).
 */
static int
wait_sandbox(struct exitwait *e, uint32_t *status, int64_t *at_ns)
{
	struct agent *a = e->a;
	char *argv[] = { (char *)a->o.runsc, "--root", (char *)a->o.runsc_root,
	    "wait", e->cid, NULL };
	char *envp[] = { "PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL };
	char out[WAIT_OUT_MAX];
	posix_spawn_file_actions_t fa;
	size_t len = 0;
	int p[2], rc, st = 0, got = -1;
	pid_t pid;

	long long t0 = clock_mono_ms();

	if (pipe2(p, O_CLOEXEC) != 0)
		return -1;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, p[1], 1);
	posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	rc = posix_spawn(&pid, a->o.runsc, &fa, NULL, argv, envp);
	posix_spawn_file_actions_destroy(&fa);
	close(p[1]);
	if (rc != 0) {
		close(p[0]);
		return -1;
	}
	/* Until its line is whole, its output ends, or the agent stops. */
	for (;;) {
		struct pollfd pfd = { p[0], POLLIN, 0 };
		ssize_t n;

		/* Past EXITWAIT_MAX_MS, a long run: TaskExit will do. */
		if (atomic_load(&a->stop) ||
		    clock_mono_ms() - t0 > EXITWAIT_MAX_MS) {
			kill(pid, SIGKILL);
			break;
		}
		if (poll(&pfd, 1, 50) <= 0)
			continue;
		n = read(p[0], out + len, sizeof(out) - 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
		if (memchr(out, '\n', len) != NULL) {
			*at_ns = agent_now_ns();
			got = agent_parse_wait(out, len, e->cid, status);
			break;
		}
		if (len == sizeof(out) - 1) {
			kill(pid, SIGKILL);
			break;
		}
	}
	close(p[0]);
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (got == 0 && (!WIFEXITED(st) || WEXITSTATUS(st) != 0))
		got = -1;
	return got;
}

static void *
exitwait_main(void *arg)
{
	struct exitwait *e = arg;
	struct agent *a = e->a;
	uint32_t status = 0;
	int64_t at_ns = 0;

	if (wait_sandbox(e, &status, &at_ns) == 0)
		take(e, status, at_ns);
	else if (!atomic_load(&a->stop))
		metric_inc(a->m_waits, "failed");
	free(e->uid);
	free(e->cid);
	free(e);
	atomic_fetch_sub(&a->exit_waiters, 1);
	return NULL;
}

void
agent_exitwait_spawn(struct agent *a, const char *uid, const char *cid)
{
	struct exitwait *e;
	pthread_attr_t at;
	pthread_t th;

	if (a->o.runsc == NULL)
		return;
	if (atomic_fetch_add(&a->exit_waiters, 1) >= EXITWAIT_MAX) {
		atomic_fetch_sub(&a->exit_waiters, 1);
		metric_inc(a->m_waits, "skipped");
		return;
	}
	e = xcalloc(1, sizeof(*e));
	e->a = a;
	e->uid = xstrdup(uid);
	e->cid = xstrdup(cid);
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&th, &at, exitwait_main, e) != 0) {
		atomic_fetch_sub(&a->exit_waiters, 1);
		metric_inc(a->m_waits, "skipped");
		free(e->uid);
		free(e->cid);
		free(e);
	}
	pthread_attr_destroy(&at);
}
