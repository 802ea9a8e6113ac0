/*
 * Integration tests: node-agent/ctrd.c against a real containerd (Debian's,
 * the one the test node runs), started here in a private directory with
 * its CRI plugin off, running real runc containers from a one-file rootfs:
 * a static program that exits with a given code, or waits to be killed.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "agent_priv.h"
#include "ctrd.h"
#include "fakeapi.h"
#include "itutil.h"
#include "xmalloc.h"

static char dir[] = "/tmp/airlock-ctrd-XXXXXX";
static char sock[128];
static pid_t ctrd_pid;

static int
sh(const char *fmt, ...)
{
	char cmd[2048];
	va_list ap;
	int st;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	st = system(cmd);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int
sock_up(void *arg)
{
	struct stat st;

	(void)arg;
	return stat(sock, &st) == 0;
}

static int
setup(void **state)
{
	char path[256];
	FILE *f;

	(void)state;
	if (mkdtemp(dir) == NULL)
		return -1;
	snprintf(sock, sizeof(sock), "%s/containerd.sock", dir);
	snprintf(path, sizeof(path), "%s/config.toml", dir);
	if ((f = fopen(path, "w")) == NULL)
		return -1;
	fprintf(f, "version = 2\nroot = \"%s/root\"\nstate = \"%s/state\"\n"
	    "disabled_plugins = [\"io.containerd.grpc.v1.cri\"]\n"
	    "[grpc]\n  address = \"%s\"\n[ttrpc]\n  address = \"%s.ttrpc\"\n",
	    dir, dir, sock, sock);
	fclose(f);
	/* The rootfs: one static program. */
	snprintf(path, sizeof(path), "%s/prog.c", dir);
	if ((f = fopen(path, "w")) == NULL)
		return -1;
	fputs("#include <stdlib.h>\n#include <string.h>\n#include <unistd.h>\n"
	    "int main(int c, char **v) {"
	    " if (c > 3 && strcmp(v[1], \"out\") == 0) {"
	    " write(1, v[2], strlen(v[2])); write(2, v[3], strlen(v[3])); return 0; }"
	    " if (c > 1 && strcmp(v[1], \"cat\") == 0) { char b[4096]; long n, t = 0;"
	    " while ((n = read(0, b, sizeof(b))) > 0) { write(1, b, n); t += n; }"
	    " return t == 0 ? 9 : 0; }"
	    " if (c > 1) return atoi(v[1]);"
	    " for (;;) pause(); }\n", f);
	fclose(f);
	if (sh("mkdir -p %s/rootfs && gcc -static -O1 -o %s/rootfs/prog %s/prog.c",
	    dir, dir, dir) != 0)
		fail_msg("cannot build the static test program");
	if ((ctrd_pid = fork()) == 0) {
		char log[256];

		snprintf(log, sizeof(log), "%s/containerd.log", dir);
		snprintf(path, sizeof(path), "%s/config.toml", dir);
		freopen(log, "w", stdout);
		freopen(log, "a", stderr);
		execlp("containerd", "containerd", "--config", path, (char *)NULL);
		_exit(127);
	}
	if (!it_wait_for(sock_up, NULL, 10000))
		fail_msg("containerd did not start (see %s/containerd.log)", dir);
	return 0;
}

static int
teardown(void **state)
{
	(void)state;
	sh("for t in $(ctr -a %s -n k8s.io tasks ls -q 2>/dev/null); do"
	    " ctr -a %s -n k8s.io tasks kill -s KILL $t; done >/dev/null 2>&1",
	    sock, sock);
	it_sleep_ms(200);
	sh("for t in $(ctr -a %s -n k8s.io tasks ls -q 2>/dev/null); do"
	    " ctr -a %s -n k8s.io tasks rm -f $t; done >/dev/null 2>&1;"
	    " for c in $(ctr -a %s -n k8s.io c ls -q 2>/dev/null); do"
	    " ctr -a %s -n k8s.io c rm $c; done >/dev/null 2>&1",
	    sock, sock, sock, sock);
	kill(ctrd_pid, SIGTERM);
	waitpid(ctrd_pid, NULL, 0);
	sh("umount -R %s/state %s/root >/dev/null 2>&1; rm -rf %s", dir, dir,
	    dir);
	return 0;
}

/* Events as a subscriber thread saw them. */
struct seen {
	pthread_mutex_t	 lock;
	struct ctrd	*c;
	atomic_int	 stop;
	int		 rc;
	int		 n;
	struct {
		enum ctrd_event_kind kind;
		char		 id[64];
		int64_t		 ts_ns, exited_ns;
		uint32_t	 status, pid;
	}		 ev[32];
};

static int
on_event(void *arg, const struct ctrd_event *ev)
{
	struct seen *s = arg;

	pthread_mutex_lock(&s->lock);
	if (s->n < 32 && ev->container_id) {
		s->ev[s->n].kind = ev->kind;
		snprintf(s->ev[s->n].id, sizeof(s->ev[0].id), "%s", ev->container_id);
		s->ev[s->n].ts_ns = ev->ts_ns;
		s->ev[s->n].exited_ns = ev->exited_ns;
		s->ev[s->n].status = ev->exit_status;
		s->ev[s->n].pid = ev->pid;
		s->n++;
	}
	pthread_mutex_unlock(&s->lock);
	return 0;
}

static void *
subscriber(void *arg)
{
	struct seen *s = arg;
	static const char *const filters[] = { "topic~=\"^/tasks/\"", NULL };
	struct k8s_error err;

	s->rc = ctrd_subscribe(s->c, filters, on_event, s, &s->stop, &err);
	return NULL;
}

/* The index of the first event of kind for id, or -1. */
static int
find(struct seen *s, enum ctrd_event_kind kind, const char *id)
{
	int i, at = -1;

	pthread_mutex_lock(&s->lock);
	for (i = 0; i < s->n && at < 0; i++)
		if (s->ev[i].kind == kind && strcmp(s->ev[i].id, id) == 0)
			at = i;
	pthread_mutex_unlock(&s->lock);
	return at;
}

struct want {
	struct seen		*s;
	enum ctrd_event_kind	 kind;
	const char		*id;
};

static int
has_event(void *arg)
{
	struct want *w = arg;

	return find(w->s, w->kind, w->id) >= 0;
}

static void
test_version_and_errors(void **state)
{
	struct ctrd *c = ctrd_new(sock, "k8s.io");
	struct k8s_error err;
	json_t *labels;
	char *v;

	(void)state;
	if (ctrd_version(c, &v, &err) != 0)
		fail_msg("version: %s", err.message);
	if (strncmp(v, "1.", 2) != 0 && strncmp(v, "2.", 2) != 0)
		fail_msg("unexpected containerd version '%s'", v);
	free(v);
	assert_int_equal(ctrd_container_labels(c, "no-such-container", &labels, &err), K8S_ENOTFOUND);
	assert_null(labels);
	assert_int_equal(err.http_status, 5);
	assert_int_equal(ctrd_kill(c, "no-such-container", SIGKILL, 1, &err), K8S_ENOTFOUND);
	ctrd_free(c);
	/* Nothing listening: a transport error naming the socket. */
	c = ctrd_new("/nonexistent/containerd.sock", "k8s.io");
	assert_int_equal(ctrd_version(c, &v, &err), K8S_EIO);
	assert_non_null(strstr(err.message, "/nonexistent/containerd.sock"));
	ctrd_free(c);
}

/*
 * A task that exits 7, and one killed through ctrd_kill: their start and
 * exit events with exact statuses, the labels, and how fast a kill lands.
 */
static void
test_events_labels_kill(void **state)
{
	struct seen s = { .lock = PTHREAD_MUTEX_INITIALIZER };
	struct want w = { &s, 0, NULL };
	struct k8s_error err;
	pthread_t th;
	json_t *labels;
	long long t0;
	int i, j;

	(void)state;
	s.c = ctrd_new(sock, "k8s.io");
	pthread_create(&th, NULL, subscriber, &s);
	/*
	 * containerd does not say when a subscription is live: probe tasks
	 * are run until one's exit reaches the subscriber.
	 */
	for (int k = 0;; k++) {
		char probe[32];

		snprintf(probe, sizeof(probe), "probe%d", k);
		if (sh("ctr -a %s -n k8s.io run --rm --rootfs %s/rootfs %s /prog 0"
		    " >/dev/null", sock, dir, probe) != 0)
			fail_msg("ctr run %s failed (see %s/containerd.log)", probe, dir);
		w.kind = CTRD_EV_TASK_EXIT;
		w.id = probe;
		if (it_wait_for(has_event, &w, 1000))
			break;
		if (k == 20)
			fail_msg("the subscription never delivered an event");
	}

	if (sh("ctr -a %s -n k8s.io run -d"
	    " --label io.kubernetes.pod.uid=u-123 --label io.kubernetes.container.name=run"
	    " --rootfs %s/rootfs exit7 /prog 7 >/dev/null", sock, dir) != 0)
		fail_msg("ctr run exit7 failed (see %s/containerd.log)", dir);
	w.kind = CTRD_EV_TASK_EXIT;
	w.id = "exit7";
	if (!it_wait_for(has_event, &w, 10000))
		fail_msg("no exit event for exit7");
	i = find(&s, CTRD_EV_TASK_START, "exit7");
	j = find(&s, CTRD_EV_TASK_EXIT, "exit7");
	assert_true(i >= 0 && i < j);
	assert_true(s.ev[i].pid > 0);
	assert_int_equal(s.ev[j].status, 7);
	assert_int_equal(s.ev[j].pid, s.ev[i].pid);
	/*
	 * A TaskStart event carries the time containerd published it, after
	 * the start returned; a program that exits at once (this one) may be
	 * gone by then, so only closeness holds (seen under valgrind: exited
	 * before the start event's stamp).
	 */
	assert_true(llabs(s.ev[j].exited_ns - s.ev[i].ts_ns) < 5000000000LL);
	/* Labels outlive the task. */
	assert_int_equal(ctrd_container_labels(s.c, "exit7", &labels, &err), 0);
	assert_string_equal(json_string_value(json_object_get(labels,
	    "io.kubernetes.pod.uid")), "u-123");
	assert_string_equal(json_string_value(json_object_get(labels,
	    "io.kubernetes.container.name")), "run");
	json_decref(labels);

	/* A task that runs until killed. */
	if (sh("ctr -a %s -n k8s.io run -d --rootfs %s/rootfs sleeper /prog"
	    " >/dev/null", sock, dir) != 0)
		fail_msg("ctr run sleeper failed");
	w.kind = CTRD_EV_TASK_START;
	w.id = "sleeper";
	if (!it_wait_for(has_event, &w, 10000))
		fail_msg("no start event for sleeper");
	it_sleep_ms(200);
	assert_int_equal(find(&s, CTRD_EV_TASK_EXIT, "sleeper"), -1);
	t0 = it_mono_ms();
	assert_int_equal(ctrd_kill(s.c, "sleeper", SIGKILL, 1, &err), 0);
	w.kind = CTRD_EV_TASK_EXIT;
	if (!it_wait_for(has_event, &w, 5000))
		fail_msg("no exit event after the kill");
	print_message("# kill -> exit event: %lld ms\n", it_mono_ms() - t0);
	j = find(&s, CTRD_EV_TASK_EXIT, "sleeper");
	assert_int_equal(s.ev[j].status, 128 + SIGKILL);

	/* Stopping the subscription. */
	t0 = it_mono_ms();
	atomic_store(&s.stop, 1);
	pthread_join(th, NULL);
	assert_int_equal(s.rc, K8S_ECANCELED);
	if (it_mono_ms() - t0 > 2000)
		fail_msg("stop took %lld ms", it_mono_ms() - t0);
	ctrd_free(s.c);
}

/*
 * Processes run in a running task (the warm path's delivery): output
 * through the caller's FIFOs, exact exit statuses, a kill, and the
 * errors a caller must tell apart.
 */
static void
test_exec(void **state)
{
	static const char proc_fmt[] = "{\"args\": %s, \"cwd\": \"/\","
	    " \"env\": [\"PATH=/\"], \"user\": {\"uid\": 0, \"gid\": 0}}";
	struct ctrd *c = ctrd_new(sock, "k8s.io");
	struct k8s_error err;
	char fifo[2][256], json[512], *o, *e;
	uint32_t pid, st;
	int fd[2];

	(void)state;
	if (sh("ctr -a %s -n k8s.io run -d --rootfs %s/rootfs holder /prog >/dev/null",
	    sock, dir) != 0)
		fail_msg("ctr run holder failed (see %s/containerd.log)", dir);
	for (int i = 0; i < 2; i++) {
		snprintf(fifo[i], sizeof(fifo[i]), "%s/exec-%s", dir, i ? "err" : "out");
		assert_int_equal(mkfifo(fifo[i], 0600), 0);
		fd[i] = open(fifo[i], O_RDONLY | O_NONBLOCK);
		assert_true(fd[i] >= 0);
	}
	snprintf(json, sizeof(json), proc_fmt, "[\"/prog\", \"out\", \"hello\", \"oops\"]");
	if (ctrd_exec(c, "holder", "e1", json, NULL, fifo[0], fifo[1], &pid, &err) != 0)
		fail_msg("exec: %s", err.message);
	assert_true(pid > 0);
	assert_int_equal(ctrd_exec_wait(c, "holder", "e1", &st, &err), 0);
	assert_int_equal(st, 0);
	o = it_drain_fifo(fd[0], 5000);
	e = it_drain_fifo(fd[1], 5000);
	assert_non_null(o);
	assert_non_null(e);
	assert_string_equal(o, "hello");
	assert_string_equal(e, "oops");
	free(o);
	free(e);
	assert_int_equal(ctrd_exec_delete(c, "holder", "e1", &err), 0);

	/* An exit status, as is (the FIFOs serve again). */
	snprintf(json, sizeof(json), proc_fmt, "[\"/prog\", \"3\"]");
	assert_int_equal(ctrd_exec(c, "holder", "e2", json, NULL, fifo[0], fifo[1], NULL, &err), 0);
	assert_int_equal(ctrd_exec_wait(c, "holder", "e2", &st, &err), 0);
	assert_int_equal(st, 3);
	assert_int_equal(ctrd_exec_delete(c, "holder", "e2", &err), 0);

	/* One that would wait forever, killed. */
	snprintf(json, sizeof(json), proc_fmt, "[\"/prog\"]");
	assert_int_equal(ctrd_exec(c, "holder", "e3", json, NULL, fifo[0], fifo[1], NULL, &err), 0);
	/* Its id is taken while it is there. */
	assert_int_equal(ctrd_exec(c, "holder", "e3", json, NULL, fifo[0], fifo[1], NULL, &err),
	    K8S_EEXIST);
	assert_int_equal(ctrd_exec_kill(c, "holder", "e3", SIGKILL, &err), 0);
	assert_int_equal(ctrd_exec_wait(c, "holder", "e3", &st, &err), 0);
	assert_int_equal(st, 128 + SIGKILL);
	assert_int_equal(ctrd_exec_delete(c, "holder", "e3", &err), 0);
	assert_int_equal(ctrd_exec_delete(c, "holder", "e3", &err), K8S_ENOTFOUND);

	/* stdin: what the caller wrote before the start, then EOF by CloseIO. */
	{
		char in[256];
		static char big[200000];
		int fin;

		snprintf(in, sizeof(in), "%s/exec-in", dir);
		assert_int_equal(mkfifo(in, 0600), 0);
		fin = open(in, O_RDWR | O_NONBLOCK);
		assert_true(fin >= 0);
		/* Past a default pipe (64 KiB): the caller makes room first. */
		assert_true(fcntl(fin, F_SETPIPE_SZ, 1 << 18) >= (int)sizeof(big));
		for (size_t k = 0; k < sizeof(big); k++)
			big[k] = (char)('a' + k % 26);
		assert_int_equal(write(fin, big, sizeof(big)), (ssize_t)sizeof(big));
		snprintf(json, sizeof(json), proc_fmt, "[\"/prog\", \"cat\"]");
		if (ctrd_exec(c, "holder", "e6", json, in, fifo[0], fifo[1], NULL,
		    &err) != 0)
			fail_msg("exec with stdin: %s", err.message);
		{
			char *got = calloc(1, sizeof(big) + 1);
			size_t len = 0;
			long end = it_mono_ms() + 10000;

			/* The process takes the bytes out; EOF only once we say so. */
			while (len < sizeof(big) && it_mono_ms() < end) {
				struct pollfd p = { fd[0], POLLIN, 0 };
				ssize_t n;

				(void)poll(&p, 1, 100);
				if ((n = read(fd[0], got + len, sizeof(big) - len)) > 0)
					len += (size_t)n;
			}
			close(fin);
			assert_int_equal(ctrd_exec_close_stdin(c, "holder", "e6", &err), 0);
			if (ctrd_exec_wait(c, "holder", "e6", &st, &err) != 0)
				fail_msg("wait: %s (read %zu)", err.message, len);
			assert_int_equal(st, 0);
			assert_int_equal(len, sizeof(big));
			assert_memory_equal(got, big, sizeof(big));
			free(got);
		}
		assert_int_equal(ctrd_exec_delete(c, "holder", "e6", &err), 0);
		unlink(in);
	}

	/* No such container; a process the runtime cannot start. */
	assert_int_equal(ctrd_exec(c, "no-such", "e4", json, NULL, fifo[0], fifo[1], NULL, &err),
	    K8S_ENOTFOUND);
	snprintf(json, sizeof(json), proc_fmt, "[\"/no-such-program\"]");
	assert_int_not_equal(ctrd_exec(c, "holder", "e5", json, NULL, fifo[0], fifo[1], NULL, &err), 0);
	print_message("# a program that is not there: %s\n", err.message);
	/* ... and its exec is not left behind: the id is free again. */
	snprintf(json, sizeof(json), proc_fmt, "[\"/prog\", \"4\"]");
	assert_int_equal(ctrd_exec(c, "holder", "e5", json, NULL, fifo[0], fifo[1], NULL, &err), 0);
	assert_int_equal(ctrd_exec_wait(c, "holder", "e5", &st, &err), 0);
	assert_int_equal(st, 4);
	assert_int_equal(ctrd_exec_delete(c, "holder", "e5", &err), 0);

	assert_int_equal(ctrd_kill(c, "holder", SIGKILL, 1, &err), 0);
	for (int i = 0; i < 2; i++)
		close(fd[i]);
	ctrd_free(c);
}

/*
 * A Start that fails is no proof that nothing started (warm.c's rule,
 * docs/warm-path.md): with a stdout FIFO nobody reads, the shim has the
 * process running (runc exec) and then waits on the FIFO's open, past
 * the unary call's 10 s. The caller sees a timeout while the program
 * runs: a warm run must then end, never be run again cold.
 */
static void
test_exec_start_timeout(void **state)
{
	static const char json[] = "{\"args\": [\"/prog\"], \"cwd\": \"/\","
	    " \"env\": [\"PATH=/\"], \"user\": {\"uid\": 0, \"gid\": 0}}";
	struct ctrd *c = ctrd_new(sock, "k8s.io");
	struct k8s_error err;
	char out[256], errp[256];
	long long t0, took;
	int fd;

	(void)state;
	if (sh("ctr -a %s -n k8s.io run -d --rootfs %s/rootfs holder2 /prog "
	    ">/dev/null", sock, dir) != 0)
		fail_msg("ctr run holder2 failed (see %s/containerd.log)", dir);
	snprintf(out, sizeof(out), "%s/unread-out", dir);
	snprintf(errp, sizeof(errp), "%s/unread-err", dir);
	assert_int_equal(mkfifo(out, 0600), 0);
	assert_int_equal(mkfifo(errp, 0600), 0);
	fd = open(errp, O_RDONLY | O_NONBLOCK);	/* stderr read; stdout not */
	assert_true(fd >= 0);
	assert_int_equal(ctrd_exec_create(c, "holder2", "w1", json, NULL, out,
	    errp, &err), 0);
	/* Made, not started: the task has its init process alone. */
	assert_int_equal(sh("test $(ctr -a %s -n k8s.io tasks ps holder2 | "
	    "tail -n +2 | wc -l) -eq 1", sock), 0);
	t0 = it_mono_ms();
	assert_int_not_equal(ctrd_exec_start(c, "holder2", "w1", NULL, &err), 0);
	took = it_mono_ms() - t0;
	print_message("# start with an unread stdout: %lld ms, %s\n", took,
	    err.message);
	assert_int_equal(err.code, K8S_EIO);
	assert_true(took >= 9500 && took < 15000);
	/* ... and yet the program runs: init and the exec'd one. */
	assert_int_equal(sh("test $(ctr -a %s -n k8s.io tasks ps holder2 | "
	    "tail -n +2 | wc -l) -eq 2", sock), 0);
	ctrd_exec_abort(c, "holder2", "w1");
	/* What surely stops it: its task killed, as a pod deletion does. */
	assert_int_equal(ctrd_kill(c, "holder2", SIGKILL, 1, &err), 0);
	close(fd);
	unlink(out);
	unlink(errp);
	ctrd_free(c);
}


/* A small file's text (a new string), or NULL. */
static char *
read_text(const char *path)
{
	char *buf = xcalloc(1, 4096);
	FILE *f = fopen(path, "r");
	size_t n;

	if (f == NULL) {
		free(buf);
		return NULL;
	}
	n = fread(buf, 1, 4095, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

/* An agent's parts the configuration check and the runsc sweep use. */
static void
agent_init(struct agent *a, const char *socket, const char *logs)
{
	memset(a, 0, sizeof(*a));
	pthread_mutex_init(&a->lock, NULL);
	a->o.node_name = "n1";
	a->o.pod_logs_dir = logs;
	a->o.containerd_socket = socket;
	a->ctrd = ctrd_new(socket, "k8s.io");
}

static void
agent_fini(struct agent *a)
{
	struct run *r;

	while ((r = a->runs) != NULL) {
		a->runs = r->next;
		agent_free_run(r);
	}
	ctrd_free(a->ctrd);
	pthread_mutex_destroy(&a->lock);
}

/*
 * The configuration check against a real containerd (issue 28): the
 * right socket and a readable log directory pass; a wrong socket is
 * refused naming it; a running pod whose container this containerd does
 * not know (another node's containerd) is refused after two checks,
 * naming the container and the flag; one it knows under the pod's uid
 * passes.
 */
static void
test_config_check(void **state)
{
	char logs[256], pdir[300], why[CHECK_REASON_MAX];
	struct agent a;
	struct run *r;

	(void)state;
	snprintf(logs, sizeof(logs), "%s/pods", dir);
	assert_int_equal(sh("mkdir -p %s", logs), 0);
	agent_init(&a, sock, logs);
	assert_int_equal(agent_check_config(&a, why, sizeof(why)), 0);
	assert_string_equal(why, "");
	agent_fini(&a);

	agent_init(&a, "/nonexistent/airlock/containerd.sock", logs);
	assert_int_equal(agent_check_config(&a, why, sizeof(why)), 1);
	assert_string_equal(why, "containerd does not answer at "
	    "'/nonexistent/airlock/containerd.sock' (--containerd-socket): "
	    "/containerd.services.version.v1.Version/Version: "
	    "/nonexistent/airlock/containerd.sock: Couldn't connect to server");
	agent_fini(&a);

	if (sh("ctr -a %s -n k8s.io run -d --label io.kubernetes.pod.uid=uid-cfg"
	    " --rootfs %s/rootfs cfgrun /prog >/dev/null", sock, dir) != 0)
		fail_msg("ctr run cfgrun failed (see %s/containerd.log)", dir);
	agent_init(&a, sock, logs);
	r = agent_new_run(&a, "uid-cfg", "t", "airlock-cfg");
	r->verified = 1;
	r->start_ns = 1;
	r->cid = xstrdup("not-this-containerds");
	snprintf(pdir, sizeof(pdir), "%s/t_airlock-cfg_uid-cfg", logs);
	assert_int_equal(sh("mkdir -p %s", pdir), 0);
	assert_int_equal(agent_check_config(&a, why, sizeof(why)), 0);
	assert_int_equal(agent_check_config(&a, why, sizeof(why)), -1);
	{
		char want[600];

		snprintf(want, sizeof(want), "containerd at '%s' does not know "
		    "container not-this-con of running pod t/airlock-cfg: is "
		    "--containerd-socket this node's?", sock);
		assert_string_equal(why, want);
	}
	free(r->cid);
	r->cid = xstrdup("cfgrun");
	assert_int_equal(agent_check_config(&a, why, sizeof(why)), 0);
	assert_int_equal(r->ctrd_miss, 0);
	assert_int_equal(r->cfg_miss, 0);
	/* Known, but as another pod's: not this run's container. */
	free(r->uid);
	r->uid = xstrdup("uid-other");
	assert_int_equal(sh("mkdir -p %s/t_airlock-cfg_uid-other", logs), 0);
	assert_int_equal(agent_check_config(&a, why, sizeof(why)), 0);
	assert_int_equal(agent_check_config(&a, why, sizeof(why)), -1);
	agent_fini(&a);
	sh("ctr -a %s -n k8s.io tasks kill -s KILL cfgrun >/dev/null 2>&1", sock);
}

/*
 * The runsc sweep removes a stopped sandbox containerd does not know only
 * on positive evidence that its pod is gone: its annotations name an
 * airlock- pod the API server no longer has. One that names no pod (or a
 * pod the API server still has, or that still runs) is left alone: an
 * agent talking to the wrong containerd gets NotFound for every one.
 */
static void
test_runsc_sweep_unmatched(void **state)
{
	char script[300], list[300], deleted[300], *got;
	struct k8s_config *cfg;
	struct k8s_error err;
	struct fakeapi *api;
	struct agent a;
	FILE *f;

	(void)state;
	snprintf(script, sizeof(script), "%s/runsc", dir);
	snprintf(list, sizeof(list), "%s/runsc-list.json", dir);
	snprintf(deleted, sizeof(deleted), "%s/runsc-deleted", dir);
	assert_non_null(f = fopen(list, "w"));
	fputs("[{\"id\":\"aaaa1111\",\"status\":\"stopped\"},"
	    "{\"id\":\"bbbb2222\",\"status\":\"stopped\",\"annotations\":{"
	    "\"io.kubernetes.cri.sandbox-namespace\":\"t\","
	    "\"io.kubernetes.cri.sandbox-name\":\"airlock-gone\","
	    "\"io.kubernetes.cri.sandbox-uid\":\"uid-gone\"}},"
	    "{\"id\":\"cccc3333\",\"status\":\"stopped\",\"annotations\":{"
	    "\"io.kubernetes.cri.sandbox-namespace\":\"t\","
	    "\"io.kubernetes.cri.sandbox-name\":\"airlock-here\","
	    "\"io.kubernetes.cri.sandbox-uid\":\"uid-here\"}},"
	    "{\"id\":\"dddd4444\",\"status\":\"stopped\",\"annotations\":{"
	    "\"io.kubernetes.cri.sandbox-namespace\":\"t\","
	    "\"io.kubernetes.cri.sandbox-name\":\"nginx\","
	    "\"io.kubernetes.cri.sandbox-uid\":\"uid-nginx\"}},"
	    "{\"id\":\"eeee5555\",\"status\":\"running\",\"annotations\":{"
	    "\"io.kubernetes.cri.sandbox-namespace\":\"t\","
	    "\"io.kubernetes.cri.sandbox-name\":\"airlock-gone\","
	    "\"io.kubernetes.cri.sandbox-uid\":\"uid-gone\"}}]\n", f);
	fclose(f);
	assert_non_null(f = fopen(script, "w"));
	fprintf(f, "#!/bin/sh\n# --root ROOT list -format=json | --root ROOT "
	    "delete --force ID\ncase \"$3\" in\nlist) cat %s;;\n"
	    "delete) echo \"$5\" >> %s;;\nesac\n", list, deleted);
	fclose(f);
	assert_int_equal(chmod(script, 0755), 0);

	api = fakeapi_start();
	cfg = fakeapi_config(api, NULL);
	agent_init(&a, sock, dir);
	assert_int_equal(k8s_client_new(cfg, NULL, &a.client, &err), 0);
	a.o.runsc = script;
	a.o.runsc_root = dir;
	atomic_store(&a.ctrd_ok, 1);
	fakeapi_push(api, 404, NULL, "{\"kind\":\"Status\",\"code\":404,"
	    "\"reason\":\"NotFound\"}", 0);
	fakeapi_push(api, 200, NULL, "{\"kind\":\"Pod\",\"metadata\":{"
	    "\"name\":\"airlock-here\",\"namespace\":\"t\",\"uid\":\"uid-here\"}}",
	    0);
	agent_sweep_runsc(&a);
	assert_non_null(got = read_text(deleted));
	assert_string_equal(got, "bbbb2222\n");
	free(got);
	assert_int_equal(fakeapi_count(api), 2);
	assert_string_equal(fakeapi_request(api, 0),
	    "GET /api/v1/namespaces/t/pods/airlock-gone");
	assert_string_equal(fakeapi_request(api, 1),
	    "GET /api/v1/namespaces/t/pods/airlock-here");
	k8s_client_free(a.client);
	agent_fini(&a);
	k8s_config_free(cfg);
	fakeapi_stop(api);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_version_and_errors),
		cmocka_unit_test(test_events_labels_kill),
		cmocka_unit_test(test_exec),
		cmocka_unit_test(test_exec_start_timeout),
		cmocka_unit_test(test_config_check),
		cmocka_unit_test(test_runsc_sweep_unmatched),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
