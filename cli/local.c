/*
 * local.c - a CodeExecution run here, under gVisor, with no cluster: the
 * same pod the controller would make (podspec_build decides the command,
 * the limits and the rejections), turned into an OCI bundle for runsc.
 *
 *   runsc create   with the program's stdout and stderr on our pipes, in a
 *                  cgroup of its own made here (memory, CPU, pids limits;
 *                  runsc --ignore-cgroups leaves it alone), network none
 *   runsc start    the timeout counts from here, as the node agent counts
 *                  from containerd's TaskStart
 *   runsc wait     the exit status; meanwhile the pipes are read into a
 *                  crilog (the agent's caps and UTF-8 policy), and past
 *                  the deadline or the hard output cap every process of the
 *                  cgroup gets SIGKILL
 *
 * then the cgroup's peak memory, CPU time and OOM count, and the status
 * object the node agent would have written. The host side (the cgroup,
 * runsc, the run records and the watchdog) is cli/local_host.c.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <glob.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "artifacts.h"
#include "buf.h"
#include "cli.h"
#include "clock.h"
#include "crilog.h"
#include "local_priv.h"
#include "podspec.h"
#include "quantity.h"
#include "result.h"
#include "usage.h"
#include "xmalloc.h"
#include "yamljson.h"

#define DRAIN_MS	2000	/* output still arriving after the exit */

/*
 * The runtime profiles are the chart's (charts/airlock/values.yaml,
 * config.profiles: the one list of runtimes, which images/build.sh and
 * images/local.sh read too), built into the CLI by the Makefile. A local
 * run uses each profile's command and source file, with the root
 * filesystem images/local.sh unpacked for it ("local/<name>").
 */
/* The local root filesystem of a runner image, ".../runner-NAME:TAG": NAME. */
static int
runner_of(const char *image, char *out, size_t outsz)
{
	const char *base = strrchr(image, '/'), *end;

	base = base ? base + 1 : image;
	if (strncmp(base, "runner-", 7) != 0)
		return -1;
	base += 7;
	end = base + strcspn(base, ":@");
	if (end == base || (size_t)(end - base) >= outsz)
		return -1;
	memcpy(out, base, (size_t)(end - base));
	out[end - base] = '\0';
	return 0;
}

struct ctl_config *
local_config(const char *path, struct k8s_error *err)
{
	json_t *values = NULL, *profiles, *p, *mine, *cfg;
	struct ctl_config *c = NULL;
	const char *name;
	char *text;

	if (path == NULL) {
		if (yamljson_load(airlock_chart_values, strlen(airlock_chart_values),
		    "chart values", "charts/airlock/values.yaml", 0, &values, err) != 0)
			return NULL;
		profiles = json_object_get(json_object_get(values, "config"),
		    "profiles");
	} else {
		struct ctl_config *check;
		struct buf b;
		int rc;

		/* The controller's own check first: its errors, its words. */
		if (ctl_config_load(path, &check, err) != 0)
			return NULL;
		ctl_config_free(check);
		buf_init(&b, 1 << 20);
		if (buf_read_file(&b, path, NULL) != 0) {
			buf_free(&b);
			k8s_error_set(err, K8S_EINVAL, 0, NULL, "%s: cannot read it", path);
			return NULL;
		}
		rc = yamljson_load(b.data ? b.data : "", b.len, "config", path, 0,
		    &values, err);
		buf_free(&b);
		if (rc != 0)
			return NULL;
		profiles = json_object_get(values, "profiles");
	}
	mine = json_object();
	json_object_foreach(profiles, name, p) {
		char image[300], runner[200];

		if (path == NULL)
			snprintf(runner, sizeof(runner), "%s", name);
		else if (runner_of(json_string_value(json_object_get(p, "image")),
		    runner, sizeof(runner)) != 0) {
			k8s_error_set(err, K8S_EINVAL, 0, NULL, "%s: profiles.%s.image "
			    "'%s': local runs use the runner images' root filesystems "
			    "(an image named .../runner-NAME:TAG; images/local.sh)", path,
			    name, json_string_value(json_object_get(p, "image")));
			json_decref(mine);
			json_decref(values);
			return NULL;
		}
		snprintf(image, sizeof(image), "local/%s", runner);
		/*
		 * preload and warmup (checked above, as the controller checks
		 * them) are not carried: every local run is a cold one, with no
		 * holder to import ahead, and a cold execution preloads nothing.
		 */
		json_object_set_new(mine, name, json_pack("{s:s, s:O, s:O, s:O*}",
		    "image", image, "command", json_object_get(p, "command"),
		    "sourceFile", json_object_get(p, "sourceFile"), "policy",
		    json_object_get(p, "policy")));
	}
	cfg = json_pack("{s:o}", "profiles", mine);
	text = json_dumps(cfg, JSON_COMPACT);
	json_decref(cfg);
	if (text == NULL || ctl_config_parse(text, strlen(text), path ? path :
	    "the chart's profiles", &c, err) != 0)
		c = NULL;
	free(text);
	json_decref(values);
	return c;
}

static int64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* --- the bundle ----------------------------------------------------------- */

static int
write_file(const char *dir, const char *rel, const char *data, size_t len)
{
	char path[PATH_MAX], *slash;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, rel);
	for (slash = path + strlen(dir) + 1; (slash = strchr(slash, '/')) != NULL; slash++) {
		*slash = '\0';
		if (mkdir(path, 0755) != 0 && errno != EEXIST)
			return -1;
		*slash = '/';
	}
	if ((fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW,
	    0644)) < 0)
		return -1;
	if (len && write(fd, data, len) != (ssize_t)len) {
		close(fd);
		return -1;
	}
	return close(fd);
}

/* The program's files as the pod's code volume holds them. */
static int
write_code(const char *dir, const struct ctl_profile *p, json_t *spec)
{
	json_t *src = json_object_get(spec, "source"), *f, *in;
	size_t i;

	if (mkdir(dir, 0755) != 0)
		return -1;
	if (src && write_file(dir, p->source_file, json_string_value(src),
	    json_string_length(src)) != 0)
		return -1;
	json_array_foreach(json_object_get(spec, "files"), i, f) {
		json_t *c = json_object_get(f, "content");

		if (write_file(dir, json_string_value(json_object_get(f, "path")),
		    json_string_value(c), json_string_length(c)) != 0)
			return -1;
	}
	if ((in = json_object_get(spec, "stdin")) != NULL &&
	    write_file(dir, ".stdin", json_string_value(in),
	    json_string_length(in)) != 0)
		return -1;
	return 0;
}

/* The OCI runtime config for the pod's container. A new reference. */
static json_t *
oci_config(json_t *pod, const char *rootfs, const char *code, int64_t tmp_bytes)
{
	json_t *c = json_array_get(json_object_get(json_object_get(pod, "spec"),
	    "containers"), 0);
	json_int_t uid = json_integer_value(json_object_get(json_object_get(c,
	    "securityContext"), "runAsUser"));
	json_t *args = json_array(), *env = json_array(), *x;
	const char *cwd = json_string_value(json_object_get(c, "workingDir"));
	char tmpopt[64];
	int home = 0;
	size_t i;

	json_array_foreach(json_object_get(c, "command"), i, x)
		json_array_append(args, x);
	json_array_foreach(json_object_get(c, "args"), i, x)
		json_array_append(args, x);
	/*
	 * The runner image's environment, then the pod's; the pod's HOME
	 * (a direct pod's /tmp) over the image's, never both.
	 */
	json_array_foreach(json_object_get(c, "env"), i, x)
		home |= strcmp(json_string_value(json_object_get(x, "name")),
		    "HOME") == 0;
	json_array_append_new(env, json_string("PATH=/usr/local/bin:/usr/bin:/bin"));
	json_array_append_new(env, json_string("LANG=C.UTF-8"));
	if (!home)
		json_array_append_new(env, json_string("HOME=/airlock/work"));
	json_array_foreach(json_object_get(c, "env"), i, x) {
		char *kv = xasprintf("%s=%s", json_string_value(json_object_get(x, "name")),
		    json_string_value(json_object_get(x, "value")));

		json_array_append_new(env, json_string(kv));
		free(kv);
	}
	snprintf(tmpopt, sizeof(tmpopt), "size=%lld", (long long)tmp_bytes);
	return json_pack("{s:s, s:{s:b, s:{s:I, s:I}, s:o, s:o, s:s, s:b,"
	    " s:{s:[], s:[], s:[], s:[], s:[]}, s:[{s:s, s:i, s:i}]},"
	    " s:{s:s, s:b}, s:s,"
	    " s:[{s:s, s:s, s:s}, {s:s, s:s, s:s, s:[s, s, s, s]},"
	    "    {s:s, s:s, s:s, s:[s, s, s, s, s]}, {s:s, s:s, s:s, s:[s, s, s, s]},"
	    "    {s:s, s:s, s:s, s:[s, s]}, {s:s, s:s, s:s, s:[s, s, s]},"
	    "    {s:s, s:s, s:s, s:[s, s, s, s]}],"
	    " s:{s:[{s:s}, {s:s}, {s:s}, {s:s}], s:[s, s, s], s:[s, s, s]}}",
	    "ociVersion", "1.0.2",
	    "process", "terminal", 0, "user", "uid", uid, "gid", uid,
	    "args", args, "env", env, "cwd", cwd ? cwd : "/airlock/work",
	    "noNewPrivileges", 1,
	    "capabilities", "bounding", "effective", "inheritable", "permitted",
	    "ambient",
	    "rlimits", "type", "RLIMIT_NOFILE", "hard", 1024, "soft", 1024,
	    "root", "path", rootfs, "readonly", 1,
	    "hostname", "airlock",
	    "mounts",
	    "destination", "/proc", "type", "proc", "source", "proc",
	    "destination", "/dev", "type", "tmpfs", "source", "tmpfs",
	    "options", "nosuid", "strictatime", "mode=755", "size=65536k",
	    "destination", "/airlock/code", "type", "bind", "source", code,
	    "options", "rbind", "ro", "nosuid", "nodev", "noexec",
	    "destination", "/airlock/work", "type", "tmpfs", "source", "tmpfs",
	    "options", "nosuid", "nodev", "mode=1777", tmpopt,
	    "destination", "/sys", "type", "sysfs", "source", "sysfs",
	    "options", "ro", "nosuid",
	    "destination", "/dev/shm", "type", "tmpfs", "source", "shm",
	    "options", "nosuid", "nodev", "mode=1777",
	    "destination", "/tmp", "type", "tmpfs", "source", "tmpfs",
	    "options", "nosuid", "nodev", "mode=1777", tmpopt,
	    "linux", "namespaces", "type", "pid", "type", "ipc", "type", "uts",
	    "type", "mount",
	    "maskedPaths", "/proc/kcore", "/proc/keys", "/sys/firmware",
	    "readonlyPaths", "/proc/sys", "/proc/sysrq-trigger", "/proc/bus");
}


/* --- the run ---------------------------------------------------------------- */

struct run {
	struct crilog	*log;
	int64_t		 start_ns, exited_ns;
	int		 exit_status;	/* from runsc wait; -1 unknown */
	enum cx_kill	 why;
	int		 oom;
	int		 signal;	/* CX_KILL_CANCEL: the one we got */
	int64_t		 peak, cpu_ns;
};

/* Read what a pipe holds: 0 on EOF, 1 if it may hold more. */
static int
drain(int fd, struct crilog *log, int is_err)
{
	char buf[65536];
	ssize_t n = read(fd, buf, sizeof(buf));

	if (n > 0) {
		crilog_feed_stream(log, is_err, buf, (size_t)n);
		return 1;
	}
	return n < 0 && (errno == EAGAIN || errno == EINTR);
}

static void
kill_run(const struct local_opts *o, const char *state, const char *id,
    struct cg *g)
{
	const char *args[] = { "kill", "--all", id, "KILL", NULL };
	char msg[256];

	cg_kill(g);	/* every process at once: the sandbox stops */
	(void)local_runsc(o, state, args, msg, sizeof(msg));
}

/* Close the fds of a NULL-less list of pairs that are open (>= 0). */
static void
close_all(int *fds, int n)
{
	for (int i = 0; i < n; i++)
		if (fds[i] >= 0) {
			close(fds[i]);
			fds[i] = -1;
		}
}

/*
 * create, start, wait. Fills r; 0, or an error with err when runsc would
 * not run it. sfd: a signalfd for SIGINT, SIGTERM, SIGHUP, which stop the
 * run as a cancel does on a cluster.
 */
static int
execute(const struct local_opts *o, const char *ws, const char *id,
    struct cg *g, long long timeout_ms, int sfd, struct run *r,
    struct k8s_error *err)
{
	char state[PATH_MAX], bundle[PATH_MAX], pidfile[PATH_MAX], msg[4096];
	char wbuf[256];
	const char *create[] = { o->runsc, "--root", state, "--network=none",
	    "--ignore-cgroups", "create", "--bundle", bundle, "--pid-file",
	    pidfile, id, NULL };
	pid_t sandbox = 0;
	int sandbox_st = -1;
	int fds[6] = { -1, -1, -1, -1, -1, -1 };	/* out, err, wait: read, write */
	int st = 0, open_out = 1, open_err = 1, open_w = 1;
	size_t wlen = 0;
	int64_t deadline, drain_until = 0;
	pid_t pid, waiter;

	snprintf(state, sizeof(state), "%s", o->state);
	snprintf(bundle, sizeof(bundle), "%s/bundle", ws);
	snprintf(pidfile, sizeof(pidfile), "%s/sandbox.pid", ws);
	/*
	 * The sandbox runsc create leaves behind becomes our child, not
	 * init's: a program that ends before runsc wait connects takes its
	 * sandbox with it, and runsc wait, not its parent, cannot learn the
	 * exit status ("sandbox no longer running and its exit status is
	 * unavailable"; 16 of 40 runs of `echo hi` under load). We can: the
	 * sandbox exits with its program's status.
	 */
	(void)prctl(PR_SET_CHILD_SUBREAPER, 1);
	if (pipe2(fds, O_CLOEXEC) != 0 || pipe2(fds + 2, O_CLOEXEC) != 0 ||
	    pipe2(fds + 4, O_CLOEXEC) != 0) {
		k8s_error_set(err, K8S_EIO, 0, NULL, "pipe: %s", strerror(errno));
		close_all(fds, 6);
		return err->code;
	}
	pid = local_spawn(create, fds[1], fds[3], g);
	close(fds[1]);
	close(fds[3]);
	fds[1] = fds[3] = -1;
	if (pid < 0 || waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) ||
	    WEXITSTATUS(st) != 0) {
		int code = pid > 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
		ssize_t n;

		fcntl(fds[2], F_SETFL, O_NONBLOCK);
		n = read(fds[2], msg, sizeof(msg) - 1);
		msg[n > 0 ? n : 0] = '\0';
		close_all(fds, 6);
		return k8s_error_set(err, K8S_EIO, 0, NULL, "%s create failed "
		    "(exit %d): %s", o->runsc, code, code == 127 ? "not found "
		    "(--runsc, AIRLOCK_RUNSC)" : code == 126 ? "cannot join the "
		    "run's cgroup" : msg);
	}
	{
		FILE *f = fopen(pidfile, "r");
		int v = 0;

		if (f && fscanf(f, "%d", &v) == 1 && v > 1)
			sandbox = (pid_t)v;
		if (f)
			fclose(f);
	}
	{
		const char *start[] = { "start", id, NULL };

		if (local_runsc(o, state, start, msg, sizeof(msg)) != 0) {
			close_all(fds, 6);
			return k8s_error_set(err, K8S_EIO, 0, NULL, "%s start: %s",
			    o->runsc, msg);
		}
	}
	r->start_ns = now_ns();
	deadline = r->start_ns + timeout_ms * 1000000;
	{
		const char *wait_args[] = { o->runsc, "--root", state, "wait", id, NULL };

		waiter = local_spawn(wait_args, fds[5], -1, NULL);
		close(fds[5]);
		fds[5] = -1;
		if (waiter < 0) {
			close_all(fds, 6);
			return k8s_error_set(err, K8S_EIO, 0, NULL, "fork: %s",
			    strerror(errno));
		}
	}
	fcntl(fds[0], F_SETFL, O_NONBLOCK);
	fcntl(fds[2], F_SETFL, O_NONBLOCK);
	fcntl(fds[4], F_SETFL, O_NONBLOCK);
	while (open_out || open_err || open_w) {
		struct pollfd pf[4] = { { open_out ? fds[0] : -1, POLLIN, 0 },
		    { open_err ? fds[2] : -1, POLLIN, 0 },
		    { open_w ? fds[4] : -1, POLLIN, 0 }, { sfd, POLLIN, 0 } };
		int64_t now = now_ns(), wait_ms = 100;

		if (r->why == CX_KILL_NONE && open_w && (deadline - now) / 1000000 < wait_ms)
			wait_ms = (deadline - now) / 1000000;
		if (wait_ms < 0)
			wait_ms = 0;
		poll(pf, 4, (int)wait_ms);
		if (open_out && (pf[0].revents & (POLLIN | POLLHUP | POLLERR)))
			open_out = drain(fds[0], r->log, 0);
		if (open_err && (pf[1].revents & (POLLIN | POLLHUP | POLLERR)))
			open_err = drain(fds[2], r->log, 1);
		if (open_w && (pf[2].revents & (POLLIN | POLLHUP | POLLERR))) {
			ssize_t n = read(fds[4], wbuf + wlen, sizeof(wbuf) - 1 - wlen);

			if (n > 0)
				wlen += (size_t)n;
			else if (n == 0 || errno != EAGAIN) {
				open_w = 0;
				if (r->exited_ns == 0)
					r->exited_ns = now_ns();
				drain_until = now_ns() + (int64_t)DRAIN_MS * 1000000;
			}
		}
		if (sfd >= 0 && (pf[3].revents & POLLIN)) {
			struct signalfd_siginfo si;

			if (read(sfd, &si, sizeof(si)) == sizeof(si) &&
			    r->why == CX_KILL_NONE && open_w) {
				r->why = CX_KILL_CANCEL;
				r->signal = (int)si.ssi_signo;
				r->exited_ns = now_ns();
				kill_run(o, state, id, g);
			}
		}
		now = now_ns();
		if (r->why == CX_KILL_NONE && open_w) {
			const struct crilog_stream *so = crilog_stdout(r->log);
			const struct crilog_stream *se = crilog_stderr(r->log);

			if ((long long)(so->total + se->total +
			    crilog_frame_bytes(r->log)) > o->hard_cap)
				r->why = CX_KILL_OUTPUT;
			else if (now >= deadline)
				r->why = CX_KILL_DEADLINE;
			if (r->why != CX_KILL_NONE) {
				r->exited_ns = now_ns();
				kill_run(o, state, id, g);
			}
		}
		/* Reaped at once, so that runsc wait does not wait on a zombie. */
		if (sandbox > 0 && sandbox_st < 0 &&
		    waitpid(sandbox, &sandbox_st, WNOHANG) != sandbox)
			sandbox_st = -1;
		if (!open_w && drain_until && now > drain_until)
			break;	/* a straggler holds the pipes: enough */
	}
	close_all(fds, 6);
	waitpid(waiter, &st, 0);
	for (int i = 0; sandbox > 0 && sandbox_st < 0 && i < 100; i++) {
		if (waitpid(sandbox, &sandbox_st, WNOHANG) == sandbox)
			break;
		sandbox_st = -1;
		usleep(20000);
	}
	wbuf[wlen] = '\0';
	{
		json_t *w = json_loads(wbuf, 0, NULL);

		r->exit_status = json_is_integer(json_object_get(w, "exitStatus")) ?
		    (int)json_integer_value(json_object_get(w, "exitStatus")) : -1;
		json_decref(w);
		if (r->exit_status < 0 && sandbox_st >= 0)
			r->exit_status = WIFEXITED(sandbox_st) ?
			    WEXITSTATUS(sandbox_st) : WIFSIGNALED(sandbox_st) ?
			    128 + WTERMSIG(sandbox_st) : -1;
	}
	return 0;
}

/* The status the node agent would have written, with the controller's. */
static json_t *
result(json_t *cx, const struct podspec_result *pr, struct run *r,
    long long hard_cap, json_t *artifacts, const char *out_note)
{
	const char *pol = json_string_value(json_object_get(json_object_get(
	    json_object_get(pr->pod, "metadata"), "annotations"), CX_ANN_POLICY));
	struct cx_run_end e = { .why = r->why, .oom = r->oom,
	    .policy = pol && strcmp(pol, "true") == 0,
	    .exit_status = r->exit_status, .signal = r->signal,
	    .timeout_ms = cx_timeout_ms(cx), .hard_cap = hard_cap,
	    .start_ns = r->start_ns, .exited_ns = r->exited_ns,
	    .node = "local", .scheduled = "run locally",
	    .out = crilog_stdout(r->log), .err = crilog_stderr(r->log),
	    .out_keep = SIZE_MAX, .err_keep = SIZE_MAX,
	    .peak_memory = r->peak, .cpu_ns = r->cpu_ns,
	    .artifacts = artifacts, .out_note = out_note };
	json_t *st = cx_result_status(&e, NULL), *c;
	size_t i;

	if (st == NULL)
		return NULL;
	/* The controller's part: the generation it saw, and the code's hash. */
	json_object_set_new(st, "observedGeneration", json_integer(1));
	json_array_foreach(json_object_get(st, "conditions"), i, c)
		json_object_set_new(c, "observedGeneration", json_integer(1));
	json_object_set_new(st, "codeSha256", json_string(pr->code_sha256));
	return st;
}

/* Rejected before anything ran, as the controller would say it. */
static json_t *
rejected(const char *why)
{
	char t[CLOCK_RFC3339_LEN];

	clock_format_rfc3339(now_ns(), 1, t);
	return json_pack("{s:s, s:s, s:s, s:i, s:[{s:s, s:s, s:s, s:s, s:s, s:i}]}",
	    "phase", "Failed", "reason", "Rejected", "message", why,
	    "observedGeneration", 1, "conditions", "type", "Complete", "status",
	    "True", "reason", "Rejected", "message", why, "lastTransitionTime", t,
	    "observedGeneration", 1);
}

/*
 * Airlock's cache directory, as images/local.sh and tests/cluster/build.sh
 * name it: $AIRLOCK_CACHE, else $XDG_CACHE_HOME/airlock, else
 * ~/.cache/airlock.
 */
static void
cache_dir(char *buf, size_t len)
{
	const char *home = getenv("HOME") ? getenv("HOME") : "/root";

	if (getenv("AIRLOCK_CACHE"))
		snprintf(buf, len, "%s", getenv("AIRLOCK_CACHE"));
	else if (getenv("XDG_CACHE_HOME"))
		snprintf(buf, len, "%s/airlock", getenv("XDG_CACHE_HOME"));
	else
		snprintf(buf, len, "%s/.cache/airlock", home);
}

/*
 * runsc when neither --runsc nor AIRLOCK_RUNSC names one: runsc on PATH,
 * else the newest that tests/cluster/build.sh built in the cache
 * (CACHE/gvisor-VERSION-HASH/runsc: ./demo.sh and make test build it).
 * buf, or NULL when there is none.
 */
static const char *
find_runsc(const char *cache, char *buf, size_t len)
{
	const char *path = getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin";
	struct stat st;
	time_t best = 0;
	glob_t g;
	char pat[PATH_MAX + 32];

	for (const char *d = path; *d;) {
		size_t n = strcspn(d, ":");

		if (n > 0) {
			snprintf(buf, len, "%.*s/runsc", (int)n, d);
			if (access(buf, X_OK) == 0)
				return buf;
		}
		d += n + (d[n] == ':');
	}
	buf[0] = '\0';
	snprintf(pat, sizeof(pat), "%s/gvisor-*/runsc", cache);
	if (glob(pat, 0, NULL, &g) == 0) {
		for (size_t i = 0; i < g.gl_pathc; i++)
			if (access(g.gl_pathv[i], X_OK) == 0 &&
			    stat(g.gl_pathv[i], &st) == 0 && st.st_mtime >= best) {
				best = st.st_mtime;
				snprintf(buf, len, "%s", g.gl_pathv[i]);
			}
		globfree(&g);
	}
	return buf[0] ? buf : NULL;
}

const char *
local_network_refusal(json_t *spec, json_t *netpol)
{
	if (netpol == NULL)
		return NULL;
	if (json_array_size(json_object_get(json_object_get(spec, "network"),
	    "egress")) > 0)
		return "spec.network.egress: --local gives no network (its "
		    "NetworkPolicy is a cluster's, docs/network.md): run it on "
		    "a cluster";
	return "spec.runtime: profile has network egress, which --local does "
	    "not give (its NetworkPolicy is a cluster's, docs/network.md): "
	    "run it on a cluster";
}

int
local_run(const struct ctl_config *cfg, json_t *cx0, const struct local_opts *o,
    json_t **outp, struct k8s_error *err)
{
	struct podspec_result pr = { 0 };
	struct k8s_error perr;
	struct local_opts opts = *o;
	struct run r = { .exit_status = -1, .peak = -1, .cpu_ns = -1 };
	struct cg g = { 0 };
	json_t *cx = json_deep_copy(cx0), *spec = json_object_get(cx, "spec");
	json_t *md, *c, *lim, *bundle_cfg = NULL;
	const struct ctl_profile *p;
	char ws[] = "/tmp/airlock-local-XXXXXX", path[PATH_MAX], rootfs[PATH_MAX + 128];
	char id[40], uid[40], code[PATH_MAX], cache[PATH_MAX - 16], runsc[PATH_MAX];
	unsigned char rnd[16];
	int64_t mem = 0, cpu = 0, tmp = 0;
	int rc = -1;
	char t[CLOCK_RFC3339_LEN];
	sigset_t sigs;
	int sfd = -1, blocked = 0;
	pid_t wd = -1;
	FILE *rf;

	*outp = NULL;
	sigprocmask(SIG_SETMASK, NULL, &local_child_mask);
	cache_dir(cache, sizeof(cache));
	if (opts.runsc == NULL)
		opts.runsc = getenv("AIRLOCK_RUNSC");
	if (opts.runsc == NULL &&
	    (opts.runsc = find_runsc(cache, runsc, sizeof(runsc))) == NULL) {
		k8s_error_set(err, K8S_EINVAL, 0, NULL, "gVisor's runsc was not "
		    "found: none on PATH, and none in %s/gvisor-*/ "
		    "(tests/cluster/build.sh runsc builds one there, as ./demo.sh "
		    "and make test do); or name one with --runsc or AIRLOCK_RUNSC",
		    cache);
		json_decref(cx);
		return -1;
	}
	if (opts.cgroup_mount == NULL)
		opts.cgroup_mount = "/sys/fs/cgroup";
	if (opts.hard_cap <= 0)
		opts.hard_cap = CX_HARD_OUTPUT_CAP;
	/*
	 * runsc's state root, shared by every local run: runsc keeps a
	 * network namespace bind-mounted there (null-netns), made once.
	 */
	if (opts.state == NULL)
		opts.state = "/run/airlock/runsc";
	if (mkdir("/run/airlock", 0700) != 0 && errno != EEXIST) {
		k8s_error_set(err, K8S_EIO, 0, NULL, "/run/airlock: %s (local mode "
		    "needs root)", strerror(errno));
		json_decref(cx);
		return K8S_EIO;
	}
	mkdir(opts.state, 0700);
	local_sweep_dead(&opts);
	/* An object as the API server would hold it. */
	if ((rf = fopen("/dev/urandom", "re")) == NULL || fread(rnd, 1, 16, rf) != 16) {
		if (rf)
			fclose(rf);
		json_decref(cx);
		return k8s_error_set(err, K8S_EIO, 0, NULL, "/dev/urandom");
	}
	fclose(rf);
	rnd[6] = (unsigned char)((rnd[6] & 0x0f) | 0x40);
	rnd[8] = (unsigned char)((rnd[8] & 0x3f) | 0x80);
	snprintf(uid, sizeof(uid), "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
	    "%02x%02x%02x%02x%02x%02x", rnd[0], rnd[1], rnd[2], rnd[3], rnd[4],
	    rnd[5], rnd[6], rnd[7], rnd[8], rnd[9], rnd[10], rnd[11], rnd[12],
	    rnd[13], rnd[14], rnd[15]);
	snprintf(id, sizeof(id), "airlock-local-%.8s", uid);
	if ((md = json_object_get(cx, "metadata")) == NULL)
		json_object_set_new(cx, "metadata", md = json_object());
	if (json_object_get(md, "name") == NULL) {
		/*
		 * As the API server names it: generateName and 5 characters,
		 * of the uid's first group (all hex: the second's fifth is a
		 * '-', and a name ending in one is no name; --out refused it).
		 */
		const char *gn = json_string_value(json_object_get(md, "generateName"));
		char *n = xasprintf("%s%.5s", gn ? gn : "local-", uid);

		json_object_set_new(md, "name", json_string(n));
		free(n);
	}
	json_object_set_new(md, "namespace", json_string("local"));
	json_object_set_new(md, "uid", json_string(uid));
	json_object_set_new(md, "generation", json_integer(1));
	clock_format_rfc3339(now_ns(), 0, t);
	json_object_set_new(md, "creationTimestamp", json_string(t));

	if (podspec_build(cfg, cx, &pr, &perr) != 0) {
		json_object_set_new(cx, "status", rejected(perr.message));
		*outp = cx;
		return 0;
	}
	p = ctl_config_profile(cfg, json_string_value(json_object_get(spec, "runtime")));
	if (local_network_refusal(spec, pr.netpol) != NULL) {
		json_object_set_new(cx, "status", rejected(
		    local_network_refusal(spec, pr.netpol)));
		podspec_result_free(&pr);
		*outp = cx;
		return 0;
	}
	c = json_array_get(json_object_get(json_object_get(pr.pod, "spec"),
	    "containers"), 0);
	lim = json_object_get(json_object_get(c, "resources"), "limits");
	if (quantity_parse(json_string_value(json_object_get(lim, "memory")), &mem, err) != 0 ||
	    quantity_parse_milli(json_string_value(json_object_get(lim, "cpu")), &cpu, err) != 0 ||
	    quantity_parse(cfg->tmp_size_limit, &tmp, err) != 0)
		goto out;
	/* Where images/local.sh puts them, by the same variables. */
	if (opts.root == NULL)
		opts.root = getenv("AIRLOCK_LOCAL_ROOT");
	if (opts.root == NULL) {
		snprintf(path, sizeof(path), "%s/local", cache);
		opts.root = path;
	}
	/* Its image is "local/RUNNER" (local_config). */
	snprintf(rootfs, sizeof(rootfs), "%s/%s/rootfs", opts.root,
	    strncmp(p->image, "local/", 6) == 0 ? p->image + 6 : p->name);
	{
		/* runsc refuses a root reached through a symlink. */
		char real[PATH_MAX];

		if (realpath(rootfs, real) != NULL)
			snprintf(rootfs, sizeof(rootfs), "%s", real);
	}
	{
		char probe[PATH_MAX + 160];

		snprintf(probe, sizeof(probe), "%s/airlock/bin/run", rootfs);
		if (access(probe, X_OK) != 0) {
			k8s_error_set(err, K8S_EINVAL, 0, NULL, "no root filesystem for "
			    "runtime %s at %s (make local-images, or --local-root)",
			    p->name, rootfs);
			goto out;
		}
	}
	if (mkdtemp(ws) == NULL) {
		k8s_error_set(err, K8S_EIO, 0, NULL, "mkdtemp: %s", strerror(errno));
		goto out;
	}
	snprintf(code, sizeof(code), "%s/code", ws);
	snprintf(path, sizeof(path), "%s/bundle", ws);
	if (write_code(code, p, spec) != 0 || mkdir(path, 0700) != 0) {
		k8s_error_set(err, K8S_EIO, 0, NULL, "cannot write the program to %s: %s",
		    ws, strerror(errno));
		goto clean;
	}
	bundle_cfg = oci_config(pr.pod, rootfs, code, tmp);
	snprintf(path, sizeof(path), "%s/bundle/config.json", ws);
	if (bundle_cfg == NULL || json_dump_file(bundle_cfg, path, 0) != 0) {
		k8s_error_set(err, K8S_EIO, 0, NULL, "cannot write %s", path);
		goto clean;
	}
	/*
	 * From here on SIGINT, SIGTERM and SIGHUP stop the run and leave
	 * nothing behind, through the cleanup below.
	 */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGHUP);
	sigprocmask(SIG_BLOCK, &sigs, &local_child_mask);
	blocked = 1;
	if ((sfd = signalfd(-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK)) < 0) {
		k8s_error_set(err, K8S_EIO, 0, NULL, "signalfd: %s", strerror(errno));
		goto clean;
	}
	if (cg_make(&g, opts.cgroup_mount, id, mem, cpu, err) != 0)
		goto clean;
	local_record_run(id, ws, &g);
	wd = local_watchdog(&opts, id, json_integer_value(json_object_get(spec,
	    "timeoutSeconds")) * 1000 + WATCHDOG_SLACK_MS);
	r.log = crilog_new(cx_max_bytes(cx), 65536);
	/* Files out (artifacts.h): the frame warm writes, as the agent takes it. */
	if (cfg->artifacts_files > 0) {
		char nonce[33];

		artifacts_nonce(k8s_obj_uid(cx), nonce);
		crilog_out_frame(r.log, nonce, (size_t)((cfg->artifacts_bytes +
		    cfg->artifacts_files * 1024 + 65536 + 1024 + 2) / 3 * 4));
	}
	if (execute(&opts, ws, id, &g, json_integer_value(json_object_get(spec,
	    "timeoutSeconds")) * 1000, sfd, &r, err) != 0)
		goto kill;
	crilog_finish(r.log);
	/* The cgroup's figures, now that the sandbox is done. */
	{
		struct usage u;

		usage_read_dirs(g.v2, g.mem, g.acct, &u);
		r.peak = u.peak_memory;
		r.cpu_ns = u.cpu_ns;
		/* Before Linux 4.13 v1 counts no kills: a SIGKILL at the limit. */
		r.oom = u.oom_kills > 0 || (!g.v2 && r.exit_status == 137 &&
		    usage_read_count(g.mem, "memory.failcnt") > 0);
	}
	{
		struct artifacts arts;
		json_t *list = NULL;
		char note[1024];
		const char *body;
		size_t blen;
		int fst;

		note[0] = '\0';
		body = crilog_frame(r.log, &blen, &fst);
		memset(&arts, 0, sizeof(arts));
		if (fst == CRILOG_FRAME_COMPLETE) {
			artifacts_parse(body, blen, (size_t)cfg->artifacts_bytes,
			    (size_t)cfg->artifacts_files, &arts);
			artifacts_message(&arts, note, sizeof(note));
			if (arts.nfiles > 0)
				list = artifacts_status(&arts);
		} else if (fst != CRILOG_FRAME_NONE)
			snprintf(note, sizeof(note), "; no files out: %s",
			    fst == CRILOG_FRAME_TOO_LARGE ? "more than the budget arrived" :
			    fst == CRILOG_FRAME_INCOMPLETE ? "the program's end cut them "
			    "short" : "they arrived malformed");
		json_object_set_new(cx, "status", result(cx, &pr, &r, opts.hard_cap,
		    list, note));
		if (o->files_out && list) {
			json_t *obj = artifacts_object(&arts, "local", "local",
			    k8s_obj_uid(cx), "local");

			*o->files_out = json_incref(json_object_get(obj, "files"));
			json_decref(obj);
		}
		/* Written where asked, checked as the cluster's would be. */
		if (o->out_dir && list) {
			json_t *obj = artifacts_object(&arts, "local", "local",
			    k8s_obj_uid(cx), "local");
			char wmsg[512];
			int n = cli_write_files(o->out_dir, k8s_obj_name(cx),
			    json_object_get(obj, "files"), list, wmsg, sizeof(wmsg));

			if (n < 0)
				fprintf(stderr, "airlock: files out: %s\n", wmsg);
			else if (!o->quiet)
				fprintf(stderr, "airlock: %d file%s out written to %s/%s\n",
				    n, n == 1 ? "" : "s", o->out_dir, k8s_obj_name(cx));
			json_decref(obj);
		}
		json_decref(list);
		artifacts_free(&arts);
	}
	*outp = json_incref(cx);
	rc = 0;
kill:
	if (wd > 0) {
		kill(wd, SIGKILL);
		waitpid(wd, NULL, 0);
	}
	{
		char state[PATH_MAX + 8], msg[512];
		const char *del[] = { "delete", "--force", id, NULL };

		snprintf(state, sizeof(state), "%s", opts.state);
		cg_kill(&g);
		(void)local_runsc(&opts, state, del, msg, sizeof(msg));
		cg_kill(&g);
	}
clean:
	cg_free(&g);
	nftw(ws, local_rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	{
		char rec[PATH_MAX];

		snprintf(rec, sizeof(rec), "%s/%s", RUNS_DIR, id);
		unlink(rec);
	}
	if (sfd >= 0)
		close(sfd);
	if (blocked)
		sigprocmask(SIG_SETMASK, &local_child_mask, NULL);
out:
	crilog_free(r.log);
	json_decref(bundle_cfg);
	podspec_result_free(&pr);
	json_decref(cx);
	return rc == 0 ? 0 : (err->code ? err->code : K8S_EIO);
}
