/*
 * local_host.c - the host around a local run (local_priv.h): its cgroup,
 * runsc, and what ends a run whose CLI died: a record in RUNS_DIR, a
 * watchdog in a session of its own, and the sweep every local run makes
 * first.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "local_priv.h"
#include "xmalloc.h"

/* --- the cgroup ------------------------------------------------------------- */


int
local_put(const char *dir, const char *file, const char *val)
{
	char path[PATH_MAX];
	int fd, rc;

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	if ((fd = open(path, O_WRONLY | O_CLOEXEC)) < 0)
		return -1;
	rc = write(fd, val, strlen(val)) == (ssize_t)strlen(val) ? 0 : -1;
	close(fd);
	return rc;
}

void
cg_free(struct cg *g)
{
	for (int i = 0; i < g->n; i++) {
		/* The sandbox is gone; its cgroup empties within a moment. */
		for (int t = 0; t < 50 && rmdir(g->dirs[i]) != 0 && errno == EBUSY; t++)
			usleep(20000);
		free(g->dirs[i]);
	}
	memset(g, 0, sizeof(*g));
}

int
cg_make(struct cg *g, const char *mount, const char *name, int64_t mem,
    int64_t cpu_milli, struct k8s_error *err)
{
	static const char *const v1[] = { "memory", "cpu,cpuacct", "cpu", "cpuacct", "pids" };
	char path[PATH_MAX], val[64];
	/* The kernel's least CFS quota is 1 ms a period; the kubelet clamps too. */
	int64_t quota = cpu_milli * 100 < 1000 ? 1000 : cpu_milli * 100;

	memset(g, 0, sizeof(*g));
	snprintf(path, sizeof(path), "%s/cgroup.controllers", mount);
	g->v2 = access(path, F_OK) == 0;
	if (g->v2) {
		snprintf(path, sizeof(path), "%s/%s", mount, name);
		local_put(mount, "cgroup.subtree_control", "+memory +cpu +pids");
		if (mkdir(path, 0755) != 0)
			goto fail;
		g->dirs[g->n++] = xstrdup(path);
		g->mem = g->cpu = g->acct = g->pids = g->dirs[0];
		snprintf(val, sizeof(val), "%lld", (long long)mem);
		if (local_put(path, "memory.max", val) != 0)
			goto fail;
		local_put(path, "memory.swap.max", "0");	/* absent without swap */
		snprintf(val, sizeof(val), "%lld 100000", (long long)quota);
		if (local_put(path, "cpu.max", val) != 0)
			goto fail;
		snprintf(val, sizeof(val), "%d", PIDS_MAX);
		if (local_put(path, "pids.max", val) != 0)
			goto fail;
		return 0;
	}
	for (size_t i = 0; i < sizeof(v1) / sizeof(v1[0]); i++) {
		struct stat st;

		snprintf(path, sizeof(path), "%s/%s", mount, v1[i]);
		if (lstat(path, &st) != 0 || !S_ISDIR(st.st_mode))
			continue;	/* absent, or a symlink to a joint one */
		snprintf(path, sizeof(path), "%s/%s/%s", mount, v1[i], name);
		if (mkdir(path, 0755) != 0)
			goto fail;
		g->dirs[g->n++] = xstrdup(path);
		if (strcmp(v1[i], "memory") == 0)
			g->mem = g->dirs[g->n - 1];
		else if (strcmp(v1[i], "pids") == 0)
			g->pids = g->dirs[g->n - 1];
		if (strstr(v1[i], "cpuacct") && g->acct == NULL)
			g->acct = g->dirs[g->n - 1];
		if (strncmp(v1[i], "cpu", 3) == 0 && strcmp(v1[i], "cpuacct") != 0 &&
		    g->cpu == NULL)
			g->cpu = g->dirs[g->n - 1];
	}
	if (g->mem == NULL || g->cpu == NULL) {
		errno = ENOENT;
		goto fail;
	}
	snprintf(val, sizeof(val), "%lld", (long long)mem);
	if (local_put(g->mem, "memory.limit_in_bytes", val) != 0)
		goto fail;
	local_put(g->mem, "memory.swappiness", "0");	/* not on every kernel */
	snprintf(val, sizeof(val), "%lld", (long long)quota);
	if (local_put(g->cpu, "cpu.cfs_period_us", "100000") != 0 ||
	    local_put(g->cpu, "cpu.cfs_quota_us", val) != 0)
		goto fail;
	snprintf(val, sizeof(val), "%d", PIDS_MAX);
	if (g->pids == NULL || local_put(g->pids, "pids.max", val) != 0)
		goto fail;
	return 0;
fail:
	k8s_error_set(err, K8S_EIO, 0, NULL, "cannot make the run's cgroup with "
	    "its limits under %s: %s (local mode needs root, and the memory, cpu "
	    "and pids controllers)", mount, strerror(errno));
	cg_free(g);
	return -1;
}

/* SIGKILL every process of the cgroup; how many there were. */
int
cg_kill(struct cg *g)
{
	char path[PATH_MAX], line[32];
	int n = 0;
	FILE *f;

	if (g->n == 0)
		return 0;
	snprintf(path, sizeof(path), "%s/cgroup.procs", g->dirs[0]);
	if ((f = fopen(path, "re")) == NULL)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (atoi(line) > 1 && kill(atoi(line), SIGKILL) == 0)
			n++;
	fclose(f);
	return n;
}

/* --- runsc ---------------------------------------------------------------- */

/*
 * Start runsc with args; its stdout and stderr on fds out and err (-1:
 * /dev/null), in cgroup g when given. Its pid.
 */
sigset_t local_child_mask;	/* the mask before local_run blocked signals */

pid_t
local_spawn(const char *const *argv, int out, int err_fd, struct cg *g)
{
	pid_t pid = fork();

	if (pid == 0) {
		int null = open("/dev/null", O_RDWR);

		sigprocmask(SIG_SETMASK, &local_child_mask, NULL);
		dup2(null, 0);
		dup2(out >= 0 ? out : null, 1);
		dup2(err_fd >= 0 ? err_fd : null, 2);
		for (int i = 0; g && i < g->n; i++)
			if (local_put(g->dirs[i], "cgroup.procs", "0") != 0)
				_exit(126);
		execvp(argv[0], (char *const *)argv);
		_exit(127);
	}
	return pid;
}

/* Run runsc to its end; its exit status, its stderr in msg. */
int
local_runsc(const struct local_opts *o, const char *state, const char *const *args,
    char *msg, size_t msglen)
{
	const char *argv[16];
	int p[2], st, n = 0;
	ssize_t r;
	size_t len = 0;
	pid_t pid;

	argv[n++] = o->runsc;
	argv[n++] = "--root";
	argv[n++] = state;
	while (*args && n < 15)
		argv[n++] = *args++;
	argv[n] = NULL;
	if (pipe2(p, O_CLOEXEC) != 0)
		return -1;
	pid = local_spawn(argv, -1, p[1], NULL);
	close(p[1]);
	while (len < msglen - 1 && (r = read(p[0], msg + len, msglen - 1 - len)) > 0)
		len += (size_t)r;
	msg[len] = '\0';
	close(p[0]);
	if (pid < 0 || waitpid(pid, &st, 0) < 0)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* --- runs that outlive their CLI ------------------------------------------- */

/*
 * A run in flight has a record, RUNS_DIR/ID: "PID START\nWORKSPACE\n" and
 * one cgroup directory a line. A watchdog process, in a session of its
 * own, ends the run if the CLI dies (SIGKILL, a crash) and kills its
 * sandbox if it passes its deadline by WATCHDOG_SLACK_MS; and every local
 * run first reaps what runs whose CLI and watchdog both died left.
 */


/* A process's start time (clock ticks since boot), 0 if it is gone. */
static unsigned long long
proc_start(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long t = 0;
	ssize_t n;
	int fd, field;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	/* After the command's ")": field 3 onwards; starttime is field 22. */
	if ((p = strrchr(buf, ')')) == NULL)
		return 0;
	for (field = 2; p && field < 22; field++)
		p = strchr(p + 1, ' ');
	if (p == NULL || sscanf(p + 1, "%llu", &t) != 1)
		return 0;
	return t;
}

void
local_record_run(const char *id, const char *ws, const struct cg *g)
{
	char path[PATH_MAX];
	FILE *f;

	mkdir(RUNS_DIR, 0700);
	snprintf(path, sizeof(path), "%s/%s", RUNS_DIR, id);
	if ((f = fopen(path, "we")) == NULL)
		return;
	fprintf(f, "%d %llu\n%s\n", (int)getpid(), proc_start(getpid()), ws);
	for (int i = 0; i < g->n; i++)
		fprintf(f, "%s\n", g->dirs[i]);
	fclose(f);
}

/* Kill the processes of the cgroups run id's record names; rmdir them if rm. */
static void
kill_recorded(const char *id, int rm)
{
	char path[PATH_MAX], line[PATH_MAX];
	int n = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", RUNS_DIR, id);
	if ((f = fopen(path, "re")) == NULL)
		return;
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		if (n++ < 2 || strncmp(line, "/sys/fs/cgroup/", 15) != 0 ||
		    strstr(line, "/airlock-local-") == NULL)
			continue;
		{
			struct cg one = { .n = 1 };

			one.dirs[0] = line;
			cg_kill(&one);
			for (int t = 0; rm && t < 50 && rmdir(line) != 0 &&
			    errno == EBUSY; t++) {
				usleep(20000);
				cg_kill(&one);
			}
		}
	}
	fclose(f);
}

/* Remove all a dead run left: its sandbox, cgroups, workspace, record. */
static void
reap_run(const struct local_opts *o, const char *id)
{
	char path[PATH_MAX], line[PATH_MAX], msg[256];
	const char *del[] = { "delete", "--force", id, NULL };
	FILE *f;

	kill_recorded(id, 0);
	(void)local_runsc(o, o->state, del, msg, sizeof(msg));
	kill_recorded(id, 1);
	snprintf(path, sizeof(path), "%s/%s", RUNS_DIR, id);
	if ((f = fopen(path, "re")) != NULL) {
		if (fgets(line, sizeof(line), f) && fgets(line, sizeof(line), f)) {
			line[strcspn(line, "\n")] = '\0';
			if (strncmp(line, "/tmp/airlock-local-", 19) == 0 &&
			    strstr(line, "/..") == NULL)
				nftw(line, local_rm_entry, 16, FTW_DEPTH | FTW_PHYS);
		}
		fclose(f);
	}
	unlink(path);
}

/* Reap the runs whose CLI is gone (not running, or its pid reused). */
void
local_sweep_dead(const struct local_opts *o)
{
	char path[PATH_MAX], line[64];
	struct dirent *de;
	DIR *d;

	if ((d = opendir(RUNS_DIR)) == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		unsigned long long start = 0;
		int pid = 0, alive = 0;
		FILE *f;

		if (strncmp(de->d_name, "airlock-local-", 14) != 0 ||
		    strchr(de->d_name, '/'))
			continue;
		snprintf(path, sizeof(path), "%s/%s", RUNS_DIR, de->d_name);
		if ((f = fopen(path, "re")) != NULL) {
			if (fgets(line, sizeof(line), f) &&
			    sscanf(line, "%d %llu", &pid, &start) == 2 && pid > 0)
				alive = start != 0 && proc_start(pid) == start;
			fclose(f);
		}
		if (!alive)
			reap_run(o, de->d_name);
	}
	closedir(d);
}

/*
 * The watchdog of run id: until the CLI (this process) ends, it waits; past
 * deadline_ms from now it kills the run's sandbox (the CLI then records the
 * end as usual); once the CLI is gone, if the CLI did not clean up (its
 * record is still there), it reaps the run. Its pid, or -1.
 */
pid_t
local_watchdog(const struct local_opts *o, const char *id, long long deadline_ms)
{
	int pfd = pidfd_open(getpid(), 0);
	char path[PATH_MAX];
	pid_t pid;

	if (pfd < 0)
		return -1;
	if ((pid = fork()) != 0) {
		close(pfd);
		return pid;
	}
	{
		struct pollfd pf = { pfd, POLLIN, 0 };
		int null = open("/dev/null", O_RDWR);

		setsid();
		dup2(null, 0);
		dup2(null, 1);
		dup2(null, 2);
		if (poll(&pf, 1, deadline_ms > INT32_MAX ? INT32_MAX :
		    (int)deadline_ms) == 0) {
			kill_recorded(id, 0);	/* past its deadline */
			(void)poll(&pf, 1, -1);
		}
		snprintf(path, sizeof(path), "%s/%s", RUNS_DIR, id);
		if (access(path, F_OK) == 0)
			reap_run(o, id);
		_exit(0);
	}
}


int
local_rm_entry(const char *path, const struct stat *st, int type, struct FTW *f)
{
	(void)st;
	(void)f;
	return type == FTW_DP ? rmdir(path) : unlink(path);
}
