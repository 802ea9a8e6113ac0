/*
 * End-to-end, the warm path (docs/warm-path.md) on the real node.
 *
 * First its delivery alone: a holder pod under gVisor, hardened as an
 * execution pod, started with no code; then one process exec'd into it
 * through containerd (node-agent/ctrd.h) running the runner image's
 * `/airlock/bin/run --warm`, which unpacks the program and its files from
 * a tar on its stdin (execution/codetar.h) and hands the rest of stdin to
 * the program. What the program prints, on both streams, is read from the
 * exec's FIFOs.
 *
 * Then the whole path, with the controller and the node agent as
 * processes beside the cluster and a CodeExecutionPool in the namespace:
 * each guarantee of the warm path, one test each (freshness, tenant scope,
 * claim races, a sandbox killed mid-claim, an agent restarted mid-run, a
 * pool resized and deleted, idle holders lent to another tenant, the CLI,
 * what is observable). The hostile
 * cases run warm in test_warm_hostile_e2e.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "client.h"
#include "clirun.h"
#include "codetar.h"
#include "ctrd.h"
#include "cx.h"
#include "itutil.h"
#include "pool.h"
#include "quantity.h"

static struct k8s_client *c;
static struct k8s_config *kcfg;
static char *ns;
static char *quota_ns;	/* test_warm_observable's, until it deletes it */
static char *lent_ns;	/* test_warm_lent's, likewise */
static pid_t lent_all, lent_agent;	/* its daemons, while it runs */
static char confpath[] = "/tmp/airlock-e2e-warm-XXXXXX";
static pid_t ctl_pid, agent_pid;
static char agent_log[512];
static int gen;

/* The node agent (warm runs through runsc) beside the cluster. */
static pid_t
start_agent(void)
{
	const char *top = getenv("AIRLOCK_TOP") ? getenv("AIRLOCK_TOP") : ".";
	char addr[32];
	const char *args[] = { "--kubeconfig", it_env_need("KUBECONFIG_ADMIN"),
	    "--node-name", it_env_need("NODE_NAME"), "--namespace", ns,
	    "--pod-logs-dir", it_env_need("POD_LOGS_DIR"), "--containerd-socket",
	    it_env_need("CONTAINERD_SOCK"), "--metrics-addr", addr,
	    "--cgroup-root", it_env_need("CGROUP_ROOT"), "--sweep-ms", "2000",
	    "--runsc", it_env_need("RUNSC"), "--runsc-root",
	    it_env_need("RUNSC_ROOT"), NULL };

	snprintf(addr, sizeof(addr), "127.0.0.1:%d", it_free_port());
	snprintf(agent_log, sizeof(agent_log), "%s/build/logs/e2e-agent-%s-%d.log",
	    top, ns, ++gen);
	return it_spawn("airlock-node-agent", agent_log, args);
}

/* A controller: the leader-elected one, or (elect 0) one more, unelected. */
static pid_t
start_controller_in(const char *ns_, int elect, char *metrics, size_t msize)
{
	const char *top = getenv("AIRLOCK_TOP") ? getenv("AIRLOCK_TOP") : ".";
	char log[512], addr[32];
	const char *args[] = { "--config", confpath, "--kubeconfig",
	    it_env_need("KUBECONFIG_ADMIN"), "--namespace", ns_, "--lease-namespace",
	    ns_, "--metrics-addr", addr, "--lease-duration-ms", "3000",
	    "--renew-deadline-ms", "2000", "--retry-period-ms", "500",
	    elect ? NULL : "--no-leader-elect", NULL };

	snprintf(addr, sizeof(addr), "127.0.0.1:%d", it_free_port());
	if (metrics)
		snprintf(metrics, msize, "%s", addr);
	snprintf(log, sizeof(log), "%s/build/logs/e2e-controller-%s-%d.log", top,
	    ns_, ++gen);
	return it_spawn("airlock-controller", log, args);
}

static pid_t
start_controller(int elect, char *metrics, size_t msize)
{
	return start_controller_in(ns, elect, metrics, msize);
}

static char ctl_metrics[32];

/*
 * Daemons a test starts beyond the group's two: stopped by the test, and
 * by the group's teardown if the test failed first (a daemon left running
 * would act on the next test's objects).
 */
static pid_t extras[8];

static pid_t
extra(pid_t pid)
{
	for (size_t i = 0; i < sizeof(extras) / sizeof(extras[0]); i++)
		if (extras[i] == 0)
			return extras[i] = pid;
	fail_msg("more than %zu extra daemons", sizeof(extras) / sizeof(extras[0]));
	return pid;
}

/* Stop an extra daemon: its wait status. */
static int
extra_stop(pid_t pid, int sig)
{
	for (size_t i = 0; i < sizeof(extras) / sizeof(extras[0]); i++)
		if (extras[i] == pid)
			extras[i] = 0;
	return it_stop(pid, sig);
}

static int
group_setup(void **state)
{
	FILE *f;
	int fd;

	(void)state;
	c = it_client(0, &kcfg);
	it_install_crd(c);
	it_install_classes(c);
	ns = it_namespace_new(c, "e2e-warm");
	if ((fd = mkstemp(confpath)) < 0 || (f = fdopen(fd, "w")) == NULL)
		fail_msg("cannot write the controller config");
	fprintf(f, "profiles:\n"
	    "  python:\n    image: %s\n    command: [/airlock/bin/run, python3, main.py]\n"
	    "    sourceFile: main.py\n", it_env_need("RUNNER_PYTHON_IMAGE"));
	fclose(f);
	ctl_pid = start_controller(1, ctl_metrics, sizeof(ctl_metrics));
	agent_pid = start_agent();
	return 0;
}

static int
group_teardown(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(extras) / sizeof(extras[0]); i++)
		if (extras[i])
			(void)extra_stop(extras[i], SIGKILL);
	kill(agent_pid, SIGCONT);
	if (it_stop(agent_pid, SIGTERM) != 0)
		fail_msg("the node agent did not exit cleanly on SIGTERM");
	/* 0 while test_warm_lent runs its own, if it failed then. */
	if (ctl_pid > 0 && it_stop(ctl_pid, SIGTERM) != 0)
		fail_msg("the controller did not exit cleanly on SIGTERM");
	it_namespace_delete(c, ns);
	free(ns);
	if (lent_ns) {
		it_namespace_delete(c, lent_ns);
		free(lent_ns);
	}
	if (quota_ns) {
		/* test_warm_observable's, when it failed: its holders hold CPU. */
		it_namespace_delete(c, quota_ns);
		free(quota_ns);
	}
	unlink(confpath);
	it_client_free(c, kcfg);
	return 0;
}

struct holder {
	const char	*name;
	char		 container[128];	/* containerd's id */
};

static int
holder_running(void *arg)
{
	struct holder *h = arg;
	struct k8s_error err;
	json_t *o = NULL, *cs;
	const char *id;
	int ok = 0;

	if (k8s_get(c, &k8s_res_pods, ns, h->name, &o, &err) == 0) {
		cs = json_array_get(json_object_get(json_object_get(o, "status"),
		    "containerStatuses"), 0);
		id = json_string_value(json_object_get(cs, "containerID"));
		if (id && json_object_get(json_object_get(cs, "state"), "running") &&
		    strncmp(id, "containerd://", 13) == 0) {
			snprintf(h->container, sizeof(h->container), "%s", id + 13);
			ok = 1;
		}
	}
	json_decref(o);
	return ok;
}

/* A holder: an execution pod with no code, waiting. */
static void
make_holder(struct holder *h)
{
	struct k8s_error err;
	json_t *pod;

	pod = json_pack("{s:s, s:s, s:{s:s}, s:{s:s, s:s, s:b, s:b, s:{s:b, s:I, s:I, s:{s:s}},"
	    " s:[{s:s, s:s, s:s, s:[s, s], s:s, s:{s:b, s:b, s:{s:[s]}},"
	    " s:{s:{s:s, s:s}, s:{s:s, s:s}},"
	    " s:[{s:s, s:s}, {s:s, s:s}]}],"
	    " s:[{s:s, s:{s:s}}, {s:s, s:{s:s}}]}}",
	    "apiVersion", "v1", "kind", "Pod", "metadata", "name", h->name,
	    "spec", "runtimeClassName", "gvisor", "restartPolicy", "Never",
	    "automountServiceAccountToken", 0, "enableServiceLinks", 0,
	    "securityContext", "runAsNonRoot", 1, "runAsUser", (json_int_t)65532,
	    "runAsGroup", (json_int_t)65532, "seccompProfile", "type", "RuntimeDefault",
	    "containers", "name", "run", "image", it_env_need("RUNNER_PYTHON_IMAGE"),
	    "imagePullPolicy", "Never", "command", "sleep", "infinity",
	    "workingDir", "/airlock/work",
	    "securityContext", "allowPrivilegeEscalation", 0, "readOnlyRootFilesystem", 1,
	    "capabilities", "drop", "ALL",
	    "resources", "requests", "cpu", "500m", "memory", "256Mi",
	    "limits", "cpu", "500m", "memory", "256Mi",
	    "volumeMounts", "name", "work", "mountPath", "/airlock/work",
	    "name", "tmp", "mountPath", "/tmp",
	    "volumes", "name", "work", "emptyDir", "medium", "Memory",
	    "name", "tmp", "emptyDir", "medium", "Memory");
	if (pod == NULL)
		fail_msg("json_pack of the holder");
	if (k8s_create(c, &k8s_res_pods, ns, pod, NULL, &err) != 0)
		fail_msg("create holder: %s", err.message);
	json_decref(pod);
	if (!it_wait_for(holder_running, h, 120000))
		fail_msg("holder %s is not running after 120 s", h->name);
}

static const char program[] =
    "import os, sys\n"
    "print('files', sorted(os.listdir('.')))\n"
    "print('csv', open('data/in.csv').read().strip())\n"
    "print('args', sys.argv[1:])\n"
    "print('env', os.environ.get('GREETING'))\n"
    "print('stdin', sys.stdin.read())\n"
    "print('uid', os.getuid(), os.getgid())\n"
    "print('tmp', os.listdir('/tmp'))\n"
    "open('/tmp/mine', 'w').write('x')\n"
    "print('to stderr', file=sys.stderr)\n"
    "sys.exit(3)\n";

/*
 * A program, a file in a subdirectory, args, env and stdin delivered into
 * a running gVisor holder; exact output on each stream and the exit status.
 * The sandbox had nothing of it before: the working directory holds the
 * two files and /tmp is empty.
 */
static void
test_warm_delivery(void **state)
{
	struct holder h = { "holder-1", "" };
	const struct codetar_entry files[] = {
		{ "main.py", program, sizeof(program) - 1 },
		{ "data/in.csv", "a,b\n1,2\n", 8 },
	};
	char dir[] = "/tmp/airlock-warm-XXXXXX", fifo[3][256], json[1024], nbytes[32];
	struct ctrd *cc = ctrd_new(it_env_need("CONTAINERD_SOCK"), "k8s.io");
	struct k8s_error err;
	struct buf tar;
	size_t bad;
	uint32_t st;
	long t0;
	int fd[3];
	char *o, *e;

	(void)state;
	make_holder(&h);
	buf_init(&tar, 1 << 20);
	assert_int_equal(codetar_build(files, 2, &tar, &bad), 0);
	snprintf(nbytes, sizeof(nbytes), "%zu", tar.len);
	assert_non_null(mkdtemp(dir));
	for (int i = 0; i < 3; i++) {
		snprintf(fifo[i], sizeof(fifo[i]), "%s/%s", dir, (const char *[]){ "in", "out", "err" }[i]);
		assert_int_equal(mkfifo(fifo[i], 0600), 0);
		fd[i] = open(fifo[i], (i ? O_RDONLY : O_RDWR) | O_NONBLOCK);
		assert_true(fd[i] >= 0);
	}
	assert_true(fcntl(fd[0], F_SETPIPE_SZ, 1 << 18) >= (int)tar.len + 16);
	assert_int_equal(write(fd[0], tar.data, tar.len), (ssize_t)tar.len);
	assert_int_equal(write(fd[0], "the input", 9), 9);
	snprintf(json, sizeof(json), "{\"args\": [\"/airlock/bin/run\", \"--warm\", \"%s\","
	    " \"python3\", \"main.py\", \"one\", \"two words\"], \"cwd\": \"/airlock/work\","
	    " \"env\": [\"PATH=/usr/local/bin:/usr/bin:/bin\", \"GREETING=hi there\"],"
	    " \"user\": {\"uid\": 65532, \"gid\": 65532}, \"noNewPrivileges\": true}", nbytes);
	t0 = it_mono_ms();
	if (ctrd_exec(cc, h.container, "warm-1", json, fifo[0], fifo[1], fifo[2], NULL, &err) != 0)
		fail_msg("exec: %s", err.message);
	close(fd[0]);
	assert_int_equal(ctrd_exec_close_stdin(cc, h.container, "warm-1", &err), 0);
	if (ctrd_exec_wait(cc, h.container, "warm-1", &st, &err) != 0)
		fail_msg("wait: %s", err.message);
	o = it_drain_fifo(fd[1], 5000);
	e = it_drain_fifo(fd[2], 5000);
	print_message("# exec -> exit and output: %ld ms\n", it_mono_ms() - t0);
	assert_non_null(o);
	assert_non_null(e);
	assert_string_equal(o,
	    "files ['data', 'main.py']\n"
	    "csv a,b\n1,2\n"
	    "args ['one', 'two words']\n"
	    "env hi there\n"
	    "stdin the input\n"
	    "uid 65532 65532\n"
	    "tmp []\n");
	assert_string_equal(e, "to stderr\n");
	assert_int_equal(st, 3);
	free(o);
	free(e);
	assert_int_equal(ctrd_exec_delete(cc, h.container, "warm-1", &err), 0);
	for (int i = 1; i < 3; i++)
		close(fd[i]);
	for (int i = 0; i < 3; i++)
		unlink(fifo[i]);
	rmdir(dir);
	buf_free(&tar);
	ctrd_free(cc);
	{
		/* One use: the holder goes. */
		struct k8s_delete_opts now = { .grace_period_set = 1, .grace_period_seconds = 0 };

		if (k8s_delete(c, &k8s_res_pods, ns, h.name, &now, NULL, &err) != 0)
			fail_msg("delete holder: %s", err.message);
	}
}


/* --- the whole path ------------------------------------------------------- */

static void
make_pool(const char *name, int replicas)
{
	struct k8s_error err;
	json_t *o = json_pack("{s:s, s:s, s:{s:s}, s:{s:s, s:i}}", "apiVersion",
	    "airlock.dev/v1alpha1", "kind", "CodeExecutionPool", "metadata",
	    "name", name, "spec", "runtime", "python", "replicas", replicas);

	if (k8s_create(c, &pool_resource, ns, o, NULL, &err) != 0)
		fail_msg("create pool %s: %s", name, err.message);
	json_decref(o);
}

/*
 * The pool at replicas, made if it is not there: each test sets up the
 * pool it needs, whatever ran before it (AIRLOCK_TEST_FILTER runs one).
 */
static void
scale_pool(const char *name, int replicas)
{
	struct k8s_patch_opts merge = { .type = K8S_PATCH_MERGE };
	struct k8s_error err;
	json_t *p = json_pack("{s:{s:i}}", "spec", "replicas", replicas);
	int rc = k8s_patch(c, &pool_resource, ns, name, &merge, p, NULL, &err);

	json_decref(p);
	if (rc == K8S_ENOTFOUND)
		make_pool(name, replicas);
	else if (rc != 0)
		fail_msg("scale pool %s: %s", name, err.message);
}

/* The pool's holders, idle and running: how many, and all, claimed or not. */
struct holders {
	const char	*ns;
	int		 want_ready;
	int		 ready, idle, total;
};

static int
count_holders(void *arg)
{
	struct holders *h = arg;
	struct k8s_error err;
	json_t *list = NULL, *p;
	size_t i;

	h->ready = h->idle = h->total = 0;
	struct k8s_list_opts lo = { .label_selector = POOL_LABEL_UID };

	if (k8s_list(c, &k8s_res_pods, h->ns, &lo, &list, &err) != 0)
		return 0;
	json_array_foreach(json_object_get(list, "items"), i, p) {
		if (json_object_get(json_object_get(p, "metadata"),
		    "deletionTimestamp"))
			continue;
		h->total++;
		h->idle += pool_holder_idle(p);
		h->ready += pool_holder_ready(p);
	}
	json_decref(list);
	return h->want_ready < 0 ? 0 : h->ready == h->want_ready &&
	    h->idle == h->want_ready && h->total == h->want_ready;
}

static void
wait_ready(int n)
{
	struct holders h = { ns, n, 0, 0, 0 };

	if (!it_wait_for(count_holders, &h, 120000))
		fail_msg("%d ready sandboxes wanted; after 120 s %d ready, %d idle, "
		    "%d in all", n, h.ready, h.idle, h.total);
}

/* A pod by name, or NULL. */
static json_t *
get_pod(const char *name)
{
	struct k8s_error err;
	json_t *o = NULL;

	if (k8s_get(c, &k8s_res_pods, ns, name, &o, &err) != 0)
		return NULL;
	return o;
}

static int
pod_gone(void *arg)
{
	json_t *o = get_pod(arg);

	json_decref(o);
	return o == NULL;
}

static void
expect_warm(json_t *st, const char *name)
{
	if (strcmp(it_str(st, "startMode"), "Warm") != 0)
		fail_msg("%s ran %s, not warm: %s", name, it_str(st, "startMode"),
		    it_str(st, "message"));
	if (strncmp(it_str(st, "podName"), POOL_HOLDER_PREFIX,
	    strlen(POOL_HOLDER_PREFIX)) != 0)
		fail_msg("%s ran in %s, not a holder", name, it_str(st, "podName"));
}

/*
 * One use: an execution leaves files in /tmp (its working directory, a
 * direct pod's) and below it and a process running; the next one, in
 * the same pool, sees none of them, runs in another sandbox, and the
 * first one's is gone.
 */
static void
test_warm_freshness(void **state)
{
	json_t *a, *b;

	(void)state;
	scale_pool("py", 1);
	wait_ready(1);
	it_cx_create(c, ns, "dirty", "{\"runtime\":\"python\",\"source\":"
	    "\"import os, subprocess\\n"
	    "open('/tmp/left', 'w').write('x')\\n"
	    "os.mkdir('d'); open('d/mine', 'w').write('x')\\n"
	    "subprocess.Popen(['sleep', '1000'], start_new_session=True)\\n"
	    "print(os.getcwd(), sorted(os.listdir('.')), os.listdir('d'))\\n\"}");
	a = it_cx_wait(c, ns, "dirty", 60000);
	expect_warm(a, "dirty");
	assert_string_equal(it_str(a, "phase"), "Succeeded");
	assert_string_equal(it_str(a, "stdout"), "/tmp ['d', 'left', 'main.py'] ['mine']\n");
	if (!it_wait_for(pod_gone, (void *)it_str(a, "podName"), 30000))
		fail_msg("warm sandbox %s was not deleted after its one use",
		    it_str(a, "podName"));
	wait_ready(1);
	it_cx_create(c, ns, "clean", "{\"runtime\":\"python\",\"source\":"
	    "\"import os\\n"
	    "procs = [open('/proc/%s/cmdline' % p, 'rb').read()"
	    " for p in os.listdir('/proc') if p.isdigit()]\\n"
	    "print(os.getcwd(), sorted(os.listdir('/tmp')),"
	    " b'sleep\\\\x001000\\\\x00' in procs)\\n\"}");
	b = it_cx_wait(c, ns, "clean", 60000);
	expect_warm(b, "clean");
	assert_string_equal(it_str(b, "phase"), "Succeeded");
	assert_string_equal(it_str(b, "stdout"), "/tmp ['main.py'] False\n");
	assert_string_not_equal(it_str(a, "podName"), it_str(b, "podName"));
	json_decref(a);
	json_decref(b);
}

/*
 * Another namespace, with no pool: its execution runs cold, never in
 * this namespace's sandboxes. The sandboxes count in their own
 * namespace's quota, as executions do.
 */
static void
test_warm_tenant_scope(void **state)
{
	char *ns2 = it_namespace_new(c, "e2e-warm-other");
	const char *aargs[] = { "--kubeconfig", it_env_need("KUBECONFIG_ADMIN"),
	    "--node-name", it_env_need("NODE_NAME"), "--namespace", ns2,
	    "--pod-logs-dir", it_env_need("POD_LOGS_DIR"), "--containerd-socket",
	    it_env_need("CONTAINERD_SOCK"), "--metrics-addr", "127.0.0.1:0",
	    "--cgroup-root", it_env_need("CGROUP_ROOT"), NULL };
	pid_t ctl2, agent2;
	struct k8s_error err;
	json_t *st, *q = NULL;
	long long used = -1;
	long end;

	(void)state;
	scale_pool("py", 1);
	wait_ready(1);
	ctl2 = extra(start_controller_in(ns2, 0, NULL, 0));
	agent2 = extra(it_spawn("airlock-node-agent",
	    "build/logs/e2e-warm-scope-agent.log", aargs));
	it_cx_create(c, ns2, "elsewhere", "{\"runtime\":\"python\",\"source\":"
	    "\"print('cold')\\n\"}");
	st = it_cx_wait(c, ns2, "elsewhere", 120000);
	assert_string_equal(it_str(st, "phase"), "Succeeded");
	assert_string_equal(it_str(st, "stdout"), "cold\n");
	assert_string_equal(it_str(st, "startMode"), "Cold");
	assert_string_not_equal(it_str(st, "podName"), "");
	assert_int_equal(strncmp(it_str(st, "podName"), "airlock-warm-", 13) != 0, 1);
	json_decref(st);
	extra_stop(ctl2, SIGTERM);
	extra_stop(agent2, SIGTERM);
	it_namespace_delete(c, ns2);
	free(ns2);
	/* This namespace's quota counts its one idle sandbox. */
	for (end = it_mono_ms() + 30000; used != 1 && it_mono_ms() < end;
	    it_sleep_ms(200)) {
		json_decref(q);
		q = NULL;
		if (k8s_get(c, &(struct k8s_resource){ "", "v1", "resourcequotas", 1 },
		    ns, "airlock-executions", &q, &err) == 0)
			used = atoll(json_string_value(json_object_get(json_object_get(
			    json_object_get(q, "status"), "used"), "pods")) ?
			    json_string_value(json_object_get(json_object_get(
			    json_object_get(q, "status"), "used"), "pods")) : "-1");
	}
	json_decref(q);
	if (used != 1)
		fail_msg("the quota counts %lld pods, not the 1 idle sandbox", used);
}

/* How often the agent's log says an execution ended or was found ended. */
static int
log_count(const char *what, const char *name)
{
	char cmd[1200], *out = NULL;
	int n;

	snprintf(cmd, sizeof(cmd), "grep -c -- '%s.*execution=%s/%s ' %s/build/logs/"
	    "e2e-agent-%s-*.log | awk -F: '{ s += $NF } END { print s + 0 }'",
	    what, ns, name, getenv("AIRLOCK_TOP") ? getenv("AIRLOCK_TOP") : ".", ns);
	if (it_sh(cmd, &out, NULL) != 0)
		fail_msg("grep failed: %s", cmd);
	n = atoi(out);
	free(out);
	return n;
}

/* The controller at metrics address arg answers /readyz 200. */
static int
controller_ready(void *arg)
{
	char cmd[128], *out = NULL;
	int rc;

	snprintf(cmd, sizeof(cmd), "curl -sf -o /dev/null http://%s/readyz", (char *)arg);
	rc = it_sh(cmd, &out, NULL);
	free(out);
	return rc == 0;
}

/*
 * Two more controllers act on the same namespace with no leader
 * election, three in all, on eight executions at once and a pool of
 * three: every execution ends once with its own output, no sandbox runs
 * two of them, and the node agent records each exactly once.
 */
static void
test_warm_claim_race(void **state)
{
	pid_t more[2];
	char name[32], spec[200], used[8][64];
	int warm = 0;

	(void)state;
	scale_pool("py", 3);
	wait_ready(3);
	for (int i = 0; i < 2; i++) {
		char addr[32];

		more[i] = extra(start_controller(0, addr, sizeof(addr)));
		/* Its caches filled, and each execution looked at once: /readyz. */
		if (!it_wait_for(controller_ready, addr, 30000))
			fail_msg("controller %d not ready in 30 s", i);
	}
	for (int i = 0; i < 8; i++) {
		snprintf(name, sizeof(name), "race-%d", i);
		snprintf(spec, sizeof(spec), "{\"runtime\":\"python\",\"source\":"
		    "\"print('run %d')\\n\"}", i);
		it_cx_create(c, ns, name, spec);
	}
	for (int i = 0; i < 8; i++) {
		json_t *st;
		char want[32];

		snprintf(name, sizeof(name), "race-%d", i);
		st = it_cx_wait(c, ns, name, 180000);
		snprintf(want, sizeof(want), "run %d\n", i);
		assert_string_equal(it_str(st, "phase"), "Succeeded");
		assert_string_equal(it_str(st, "stdout"), want);
		snprintf(used[i], sizeof(used[i]), "%s", it_str(st, "podName"));
		if (strcmp(it_str(st, "startMode"), "Warm") == 0)
			warm++;
		for (int j = 0; j < i; j++)
			if (strcmp(used[i], used[j]) == 0)
				fail_msg("race-%d and race-%d both ran in %s", j, i,
				    used[i]);
		json_decref(st);
	}
	/*
	 * Every one of the 3 ready holders was used: a claim lost to another
	 * controller goes cold, but leaves its holder to the one that won
	 * (3 of 8 in each of this stop's ten runs; more only if a refill came
	 * first).
	 */
	print_message("# claim race: %d of 8 warm\n", warm);
	if (warm < 3)
		fail_msg("only %d of 8 ran warm from a pool of 3 ready holders", warm);
	for (int i = 0; i < 2; i++)
		if (extra_stop(more[i], SIGTERM) != 0)
			fail_msg("controller %d did not exit cleanly", i);
	for (int i = 0; i < 8; i++) {
		snprintf(name, sizeof(name), "race-%d", i);
		if (log_count("execution finished", name) != 1 ||
		    log_count("already ended", name) != 0)
			fail_msg("%s recorded %d times (and found ended %d times)",
			    name, log_count("execution finished", name),
			    log_count("already ended", name));
	}
	scale_pool("py", 1);
	wait_ready(1);
}

/* No process *(pid_t *)arg any more (reaped). */
static int
pid_gone(void *arg)
{
	return kill(*(pid_t *)arg, 0) != 0 && errno == ESRCH;
}

static int
path_exists(void *arg)
{
	return access(arg, F_OK) == 0;
}

/* The runsc-sandbox process of a pod's container, by containerd's word. */
static uint32_t
sandbox_pid(const char *pod)
{
	struct ctrd *cc = ctrd_new(it_env_need("CONTAINERD_SOCK"), "k8s.io");
	struct k8s_error err;
	json_t *o = get_pod(pod);
	const char *id = json_string_value(json_object_get(json_array_get(
	    json_object_get(json_object_get(o, "status"), "containerStatuses"), 0),
	    "containerID"));
	uint32_t pid = 0;

	if (id == NULL || strncmp(id, "containerd://", 13) != 0 ||
	    ctrd_task_pid(cc, id + 13, &pid, &err) != 0)
		fail_msg("no task for pod %s", pod);
	json_decref(o);
	ctrd_free(cc);
	return pid;
}

static int
named(json_t *status)
{
	return json_object_get(status, "podName") != NULL;
}

/* The execution's status once it names a pod; a new reference. */
static json_t *
wait_named(const char *name)
{
	return it_cx_until(c, ns, name, named, "name a pod", 60000);
}

/*
 * A sandbox killed after its claim, before its program could start (the
 * agent stopped meanwhile): the execution is given back and runs cold,
 * with its own output; never silently lost.
 */
static void
test_warm_killed_mid_claim(void **state)
{
	json_t *st, *named;
	char pod[128];
	pid_t sb;

	(void)state;
	scale_pool("py", 1);
	wait_ready(1);
	kill(agent_pid, SIGSTOP);
	it_cx_create(c, ns, "orphaned", "{\"runtime\":\"python\",\"source\":"
	    "\"print('ran anyway')\\n\"}");
	named = wait_named("orphaned");
	expect_warm(named, "orphaned");
	snprintf(pod, sizeof(pod), "%s", it_str(named, "podName"));
	json_decref(named);
	sb = (pid_t)sandbox_pid(pod);
	if (kill(sb, SIGKILL) != 0)
		fail_msg("kill the sandbox of %s: %s", pod, strerror(errno));
	/* Gone (reaped by its shim) before the agent looks. */
	if (!it_wait_for(pid_gone, &sb, 10000))
		fail_msg("the sandbox of %s (pid %d) is still there 10 s after SIGKILL", pod,
		    (int)sb);
	kill(agent_pid, SIGCONT);
	st = it_cx_wait(c, ns, "orphaned", 120000);
	assert_string_equal(it_str(st, "phase"), "Succeeded");
	assert_string_equal(it_str(st, "stdout"), "ran anyway\n");
	assert_string_equal(it_str(st, "startMode"), "Cold");
	assert_string_not_equal(it_str(st, "podName"), pod);
	json_decref(st);
}

/*
 * The agent killed while a warm program runs, and started again: the
 * program is not run a second time (the exec directory on the host says
 * it was tried); its pod goes and the execution ends PodDeleted.
 */
static void
test_warm_agent_restart(void **state)
{
	json_t *st;

	(void)state;
	scale_pool("py", 1);
	wait_ready(1);
	it_cx_create(c, ns, "interrupted", "{\"runtime\":\"python\",\"source\":"
	    "\"import time\\nprint('once', flush=True)\\ntime.sleep(4)\\n\"}");
	st = wait_named("interrupted");
	expect_warm(st, "interrupted");
	{
		/* Started: the agent's mark that it was tried, made just before the exec. */
		json_t *pod = get_pod(it_str(st, "podName"));
		char mark[256];

		if (pod == NULL)
			fail_msg("interrupted's pod %s is not there", it_str(st, "podName"));
		snprintf(mark, sizeof(mark), "/run/airlock/exec/%s", json_string_value(
		    json_object_get(json_object_get(pod, "metadata"), "uid")));
		json_decref(pod);
		if (!it_wait_for(path_exists, mark, 30000))
			fail_msg("the agent did not start interrupted's program in 30 s (no %s)",
			    mark);
	}
	json_decref(st);
	it_stop(agent_pid, SIGKILL);
	agent_pid = start_agent();
	st = it_cx_wait(c, ns, "interrupted", 120000);
	assert_string_equal(it_str(st, "phase"), "Failed");
	assert_string_equal(it_str(st, "reason"), "PodDeleted");
	json_decref(st);
	{
		char cmd[700], *out = NULL;

		snprintf(cmd, sizeof(cmd), "grep -c 'tried before on this node' %s",
		    agent_log);
		(void)it_sh(cmd, &out, NULL);
		if (atoi(out ? out : "0") != 1)
			fail_msg("the restarted agent did not refuse the run once: %s",
			    out ? out : "");
		free(out);
	}
}

/*
 * Scaled up and down, then deleted while one of its sandboxes runs an
 * execution: the idle ones go, the claimed one finishes its program.
 */
static void
test_warm_pool_resize_delete(void **state)
{
	struct k8s_delete_opts bg = { .propagation_policy = "Background" };
	struct k8s_error err;
	struct holders h = { NULL, -1, 0, 0, 0 };
	json_t *st;
	long end;

	(void)state;
	h.ns = ns;
	scale_pool("py", 3);
	wait_ready(3);
	scale_pool("py", 1);
	wait_ready(1);
	scale_pool("py", 2);
	wait_ready(2);
	it_cx_create(c, ns, "outlives", "{\"runtime\":\"python\",\"source\":"
	    "\"import time\\ntime.sleep(3)\\nprint('finished')\\n\"}");
	st = wait_named("outlives");
	expect_warm(st, "outlives");
	/*
	 * Claimed: the holder is the execution's now (its uid label), no
	 * longer the pool's. Between the execution's status and that patch
	 * the holder is still the pool's, and the pool's delete takes it: the
	 * run then goes cold (test_warm_killed_mid_claim's case), as seen
	 * once under ASan's pace.
	 */
	{
		const char *pod = it_str(st, "podName");
		char *uid = NULL;
		json_t *cxo = NULL, *p = NULL;

		if (k8s_get(c, &cx_resource, ns, "outlives", &cxo, &err) != 0)
			fail_msg("get outlives: %s", err.message);
		uid = strdup(k8s_obj_uid(cxo));
		json_decref(cxo);
		for (end = it_mono_ms() + 30000;; it_sleep_ms(50)) {
			const char *l;

			json_decref(p);
			p = NULL;
			if (k8s_get(c, &k8s_res_pods, ns, pod, &p, &err) == 0 &&
			    (l = json_string_value(json_object_get(json_object_get(
			    json_object_get(p, "metadata"), "labels"), CX_LABEL_UID))) &&
			    strcmp(l, uid) == 0)
				break;
			if (it_mono_ms() > end)
				fail_msg("holder %s not claimed by outlives in 30 s", pod);
		}
		json_decref(p);
		free(uid);
	}
	json_decref(st);
	if (k8s_delete(c, &pool_resource, ns, "py", &bg, NULL, &err) != 0)
		fail_msg("delete pool: %s", err.message);
	for (end = it_mono_ms() + 60000; it_mono_ms() < end; it_sleep_ms(100)) {
		(void)count_holders(&h);
		if (h.idle == 0)
			break;
	}
	if (h.idle != 0)
		fail_msg("%d idle sandboxes left 60 s after their pool's delete",
		    h.idle);
	st = it_cx_wait(c, ns, "outlives", 60000);
	assert_string_equal(it_str(st, "phase"), "Succeeded");
	assert_string_equal(it_str(st, "stdout"), "finished\n");
	assert_string_equal(it_str(st, "startMode"), "Warm");
	json_decref(st);
	make_pool("py", 1);
}

/* --- holders are lent (controller/lend.c) --------------------------------- */

static const struct k8s_resource res_nodes = { "", "v1", "nodes", 0 };

/* The node's allocatable cpu less what its live pods request, in milli. */
static long long
node_free_cpu_pods(const char *node, int *pods)
{
	struct k8s_list_opts lo = { 0 };
	struct k8s_error err;
	json_t *o = NULL, *items, *p, *ctr;
	char sel[300], *rv;
	int64_t alloc, req;
	long long used = 0;
	size_t i, j;

	if (k8s_get(c, &res_nodes, NULL, node, &o, &err) != 0)
		fail_msg("get node %s: %s", node, err.message);
	if (quantity_parse_milli(json_string_value(json_object_get(json_object_get(
	    json_object_get(o, "status"), "allocatable"), "cpu")), &alloc, &err) != 0)
		fail_msg("node %s: allocatable cpu: %s", node, err.message);
	json_decref(o);
	snprintf(sel, sizeof(sel), "spec.nodeName=%s,status.phase!=Succeeded,"
	    "status.phase!=Failed", node);
	lo.field_selector = sel;
	if (k8s_list_all(c, &k8s_res_pods, NULL, &lo, &items, &rv, &err) != 0)
		fail_msg("list the node's pods: %s", err.message);
	json_array_foreach(items, i, p)
		json_array_foreach(json_object_get(json_object_get(p, "spec"),
		    "containers"), j, ctr) {
			const char *q = json_string_value(json_object_get(json_object_get(
			    json_object_get(ctr, "resources"), "requests"), "cpu"));

			if (q && quantity_parse_milli(q, &req, &err) == 0)
				used += req;
		}
	if (pods)
		*pods = (int)json_array_size(items);
	json_decref(items);
	free(rv);
	return (long long)alloc - used;
}

static long long
node_free_cpu(const char *node)
{
	return node_free_cpu_pods(node, NULL);
}

/* The Ready condition of pool py in ns: its reason and message. */
static void
pool_ready(char *reason, size_t rlen, char *msg, size_t mlen)
{
	struct k8s_error err;
	json_t *o = NULL, *x;
	size_t i;

	reason[0] = msg[0] = '\0';
	if (k8s_get(c, &pool_resource, ns, "py", &o, &err) != 0)
		return;
	json_array_foreach(json_object_get(json_object_get(o, "status"), "conditions"), i, x)
		if (strcmp(json_string_value(json_object_get(x, "type")), "Ready") == 0) {
			snprintf(reason, rlen, "%s", it_str(x, "reason"));
			snprintf(msg, mlen, "%s", it_str(x, "message"));
		}
	json_decref(o);
}

/* The messages of pool py's Normal HoldersTakenBack Events: how many. */
/*
 * Delete the pool's HoldersTakenBack Events so far: the group's own
 * controller may have taken holders back for this namespace's executions
 * in earlier tests (under ASan, slower, the claim race's cold ones waited
 * for cpu), and those are not this test's.
 */
static void
forget_taken_back_events(void)
{
	struct k8s_list_opts lo = { .field_selector =
	    "involvedObject.kind=CodeExecutionPool,involvedObject.name=py,"
	    "reason=HoldersTakenBack" };
	struct k8s_error err;
	json_t *items, *e;
	char *rv;
	size_t i;

	if (k8s_list_all(c, &k8s_res_events, ns, &lo, &items, &rv, &err) != 0)
		fail_msg("list events: %s", err.message);
	json_array_foreach(items, i, e)
		if (k8s_delete(c, &k8s_res_events, ns, k8s_obj_name(e), NULL, NULL,
		    &err) != 0 && err.http_status != 404)
			fail_msg("delete event %s: %s", k8s_obj_name(e), err.message);
	if (i > 0)
		print_message("# %zu HoldersTakenBack Events of earlier tests deleted\n", i);
	json_decref(items);
	free(rv);
}

static int
taken_back_events(char *first, size_t len)
{
	struct k8s_list_opts lo = { .field_selector =
	    "involvedObject.kind=CodeExecutionPool,involvedObject.name=py,"
	    "reason=HoldersTakenBack,type=Normal" };
	struct k8s_error err;
	json_t *items;
	char *rv;
	int n;

	if (k8s_list_all(c, &k8s_res_events, ns, &lo, &items, &rv, &err) != 0)
		fail_msg("list events: %s", err.message);
	n = (int)json_array_size(items);
	if (first)
		snprintf(first, len, "%s", n ? it_str(json_array_get(items, 0),
		    "message") : "");
	json_decref(items);
	free(rv);
	return n;
}

/*
 * Issue 27, item 11, on the real node: a pool's idle holders fill the
 * node's cpu, and another namespace's cold executions (500m each) still
 * run. The controller takes idle holders back for them (the fewest: one
 * for one), says so on the pool (Ready False, Lent; a Normal Event
 * HoldersTakenBack), holds the refill while they wait, and refills after.
 * The controller here watches every namespace, as the chart's does: a
 * namespaced one would not see the other tenant's pool.
 */
static void
test_warm_lent(void **state)
{
	char *ns2 = lent_ns = it_namespace_new(c, "e2e-warm-lent");
	const char *top = getenv("AIRLOCK_TOP") ? getenv("AIRLOCK_TOP") : ".";
	const char *aargs[] = { "--kubeconfig", it_env_need("KUBECONFIG_ADMIN"),
	    "--node-name", it_env_need("NODE_NAME"), "--namespace", ns2,
	    "--pod-logs-dir", it_env_need("POD_LOGS_DIR"), "--containerd-socket",
	    it_env_need("CONTAINERD_SOCK"), "--metrics-addr", "127.0.0.1:0",
	    "--cgroup-root", it_env_need("CGROUP_ROOT"), NULL };
	char addr[32], log[512], reason[64], msg[600], want[600], first[600], *out = NULL;
	const char *cargs[] = { "--config", confpath, "--kubeconfig",
	    it_env_need("KUBECONFIG_ADMIN"), "--lease-namespace", ns,
	    "--metrics-addr", addr, "--lease-duration-ms", "3000",
	    "--renew-deadline-ms", "2000", "--retry-period-ms", "500", NULL };
	const char *names[3] = { "burst-0", "burst-1", "burst-2" };
	pid_t all, agent2;
	long long free_cpu, more, n, size, lent_seen = 0;
	json_t *st;
	long end;

	(void)state;
	/* The group's controller watches ns only: one for every namespace. */
	if (it_stop(ctl_pid, SIGTERM) != 0)
		fail_msg("the controller did not exit cleanly on SIGTERM");
	ctl_pid = 0;
	snprintf(addr, sizeof(addr), "127.0.0.1:%d", it_free_port());
	snprintf(log, sizeof(log), "%s/build/logs/e2e-controller-lent-%d.log", top, ++gen);
	lent_all = all = extra(it_spawn("airlock-controller", log, cargs));
	lent_agent = agent2 = extra(it_spawn("airlock-node-agent",
	    "build/logs/e2e-warm-lent-agent.log", aargs));
	/* Room for how many 500m sandboxes: the pool fills the node. */
	scale_pool("py", 0);
	wait_ready(0);
	/* Earlier tests' pods gone first (at most 60 s): their room is the pool's. */
	{
		int pods = 1;

		for (end = it_mono_ms() + 60000; it_mono_ms() < end; it_sleep_ms(200)) {
			(void)node_free_cpu_pods(it_env_need("NODE_NAME"), &pods);
			if (pods == 0)
				break;
		}
		if (pods)
			print_message("# %d pods of earlier tests still on the node\n", pods);
	}
	free_cpu = node_free_cpu(it_env_need("NODE_NAME"));
	n = free_cpu / 500;
	print_message("# node %s: %lld m free: a pool of %lld fills it\n",
	    it_env_need("NODE_NAME"), free_cpu, n);
	if (n < 1 || n > POOL_MAX_REPLICAS)
		fail_msg("the node has %lld m of cpu free: not 1 to %d sandboxes", free_cpu,
		    POOL_MAX_REPLICAS);
	scale_pool("py", (int)n);
	wait_ready((int)n);
	/*
	 * A pod of an earlier test that was still ending when the room was
	 * read (CI, stop 37: 1500 m free, then 500 m more once it went) left
	 * room after all: the pool grows into it, until none is left.
	 */
	for (int i = 0; i < 4 && (more = node_free_cpu(it_env_need(
	    "NODE_NAME"))) >= 500; i++) {
		n += more / 500;
		if (n > POOL_MAX_REPLICAS)
			fail_msg("the node has room for over %d sandboxes", POOL_MAX_REPLICAS);
		print_message("# %lld m more came free: a pool of %lld\n", more, n);
		scale_pool("py", (int)n);
		wait_ready((int)n);
	}
	size = n;
	assert_true(node_free_cpu(it_env_need("NODE_NAME")) < 500);
	forget_taken_back_events();

	/* One cold execution of another tenant: one holder taken back for it. */
	it_cx_create(c, ns2, "needs-room", "{\"runtime\":\"python\",\"source\":"
	    "\"print('room')\\n\"}");
	for (end = it_mono_ms() + 60000; it_mono_ms() < end; it_sleep_ms(50)) {
		pool_ready(reason, sizeof(reason), msg, sizeof(msg));
		if (strcmp(reason, "Lent") == 0) {
			lent_seen = 1;
			break;
		}
	}
	if (!lent_seen)
		fail_msg("pool py never said Lent in 60 s (last: %s: %s)", reason, msg);
	snprintf(want, sizeof(want), "%lld of %lld sandboxes: 1 taken back for "
	    "executions no node had room for; refilled once they are scheduled", n - 1, n);
	assert_string_equal(msg, want);
	st = it_cx_wait(c, ns2, "needs-room", 60000);
	if (strcmp(it_str(st, "phase"), "Succeeded") != 0)
		fail_msg("needs-room ended %s/%s: %s", it_str(st, "phase"),
		    it_str(st, "reason"), it_str(st, "message"));
	assert_string_equal(it_str(st, "stdout"), "room\n");
	assert_string_equal(it_str(st, "startMode"), "Cold");
	json_decref(st);
	assert_int_equal(taken_back_events(first, sizeof(first)), 1);
	snprintf(want, sizeof(want), "1 idle sandbox on node %s taken back for an "
	    "execution no node had cpu for; the pool refills once it is scheduled",
	    it_env_need("NODE_NAME"));
	assert_string_equal(first, want);
	{
		char cmd[300];

		snprintf(cmd, sizeof(cmd), "curl -sf http://%s/metrics | grep "
		    "'^airlock_pool_sandboxes_taken_back_total '", addr);
		if (it_sh(cmd, &out, NULL) != 0)
			fail_msg("metrics: %s", out ? out : "");
		assert_string_equal(out, "airlock_pool_sandboxes_taken_back_total 1\n");
		free(out);
		out = NULL;
	}
	/* It refills once the room is free again. */
	wait_ready((int)n);
	/* Its status follows the holders' within moments. */
	for (end = it_mono_ms() + 10000; it_mono_ms() < end; it_sleep_ms(100)) {
		pool_ready(reason, sizeof(reason), msg, sizeof(msg));
		if (strcmp(reason, "Ready") == 0)
			break;
	}
	assert_string_equal(reason, "Ready");

	/* The second try: three at once, 0 of 3 ran in 20 s. All do now. */
	for (int i = 0; i < 3; i++)
		it_cx_create(c, ns2, names[i], "{\"runtime\":\"python\",\"source\":"
		    "\"print('burst')\\n\"}");
	for (int i = 0; i < 3; i++) {
		st = it_cx_wait(c, ns2, names[i], 60000);
		if (strcmp(it_str(st, "phase"), "Succeeded") != 0)
			fail_msg("%s ended %s/%s: %s", names[i], it_str(st, "phase"),
			    it_str(st, "reason"), it_str(st, "message"));
		assert_string_equal(it_str(st, "stdout"), "burst\n");
		json_decref(st);
	}
	/* At most one take-back per execution that waited: 1 + 3. */
	n = taken_back_events(NULL, 0);
	if (n < 2 || n > 4)
		fail_msg("%lld HoldersTakenBack Events for 1 + 3 executions", n);
	wait_ready((int)size);

	/* Back as the group had it: the namespaced controller, one sandbox. */
	lent_all = lent_agent = 0;
	extra_stop(agent2, SIGTERM);
	if (extra_stop(all, SIGTERM) != 0)
		fail_msg("the controller did not exit cleanly on SIGTERM");
	it_namespace_delete(c, ns2);
	free(ns2);
	lent_ns = NULL;
	ctl_pid = start_controller(1, ctl_metrics, sizeof(ctl_metrics));
	scale_pool("py", 1);
	wait_ready(1);
}

/*
 * After a test_warm_lent that failed midway: its daemons stopped, the
 * group's controller and one sandbox back, so that the tests after it
 * test what they say.
 */
static void
group_back(void)
{
	if (ctl_pid != 0)
		return;
	if (lent_agent)
		extra_stop(lent_agent, SIGTERM);
	if (lent_all)
		extra_stop(lent_all, SIGTERM);
	lent_all = lent_agent = 0;
	ctl_pid = start_controller(1, ctl_metrics, sizeof(ctl_metrics));
	scale_pool("py", 1);
}

/* The CLI needs nothing to run warm; -o wide's column says it did. */
static void
test_warm_cli(void **state)
{
	struct cli_result r;
	const char *run[] = { "run", "--name", "cli-warm", "-c", "print(6 * 7)",
	    "--kubeconfig", it_env_need("KUBECONFIG_ADMIN"), "-n", ns, NULL };
	char cmd[700], *out = NULL;

	(void)state;
	group_back();
	scale_pool("py", 1);
	wait_ready(1);
	cli_run(&r, NULL, 60000, run);
	cli_expect_status(&r, 0);
	assert_string_equal(r.out, "42\n");
	cli_result_free(&r);
	snprintf(cmd, sizeof(cmd), "%s --kubeconfig %s -n %s get cx cli-warm -o wide "
	    "--no-headers | awk '{ print $6 }'", it_env_need("KUBECTL"),
	    it_env_need("KUBECONFIG_ADMIN"), ns);
	if (it_sh(cmd, &out, NULL) != 0)
		fail_msg("kubectl get -o wide failed: %s", out ? out : "");
	assert_string_equal(out, "Warm\n");
	free(out);
}

/*
 * What an operator sees: the pool's status and printer columns, the
 * gauges, and a Warning Event when the quota cannot hold the pool.
 */
static void
test_warm_observable(void **state)
{
	struct k8s_patch_opts merge = { .type = K8S_PATCH_MERGE };
	struct k8s_error err;
	char cmd[800], *out = NULL;
	json_t *p;
	long end;

	(void)state;
	group_back();
	scale_pool("py", 1);
	wait_ready(1);
	/* A claim of its own, for the claims counter; then the pool refilled. */
	{
		json_t *st;

		it_cx_create(c, ns, "observed", "{\"runtime\":\"python\",\"source\":"
		    "\"print('seen')\\n\"}");
		st = it_cx_wait(c, ns, "observed", 60000);
		assert_string_equal(it_str(st, "stdout"), "seen\n");
		expect_warm(st, "observed");
		json_decref(st);
		wait_ready(1);
	}
	snprintf(cmd, sizeof(cmd), "curl -sf http://%s/metrics | grep "
	    "'^airlock_pool_sandboxes\\|^airlock_warm_claims_total'", ctl_metrics);
	/* The controller's cache follows the API's within moments. */
	for (end = it_mono_ms() + 10000; it_mono_ms() < end; it_sleep_ms(100)) {
		free(out);
		out = NULL;
		if (it_sh(cmd, &out, NULL) != 0)
			fail_msg("metrics: %s", out ? out : "");
		if (strstr(out, "airlock_pool_sandboxes{state=\"ready\"} 1\n"))
			break;
	}
	if (strstr(out, "airlock_pool_sandboxes{state=\"desired\"} 1\n") == NULL ||
	    strstr(out, "airlock_pool_sandboxes{state=\"ready\"} 1\n") == NULL ||
	    strstr(out, "airlock_warm_claims_total{result=\"claimed\"}") == NULL)
		fail_msg("the gauges do not say 1 desired, 1 ready, and claims: %s",
		    out);
	free(out);
	out = NULL;
	{
		/*
		 * A namespace with room for two pods in all (its annotation,
		 * set before its controller starts), and a pool of five.
		 */
		char *ns3 = quota_ns = it_namespace_new(c, "e2e-warm-quota");
		char *saved = ns;
		pid_t ctl3;

		p = json_pack("{s:{s:{s:s}}}", "metadata", "annotations",
		    "airlock.dev/quota-executions", "2");
		if (k8s_patch(c, &k8s_res_namespaces, NULL, ns3, &merge, p, NULL,
		    &err) != 0)
			fail_msg("annotate namespace: %s", err.message);
		json_decref(p);
		ctl3 = extra(start_controller_in(ns3, 0, NULL, 0));
		ns = ns3;		/* make_pool's */
		make_pool("py", 5);
		ns = saved;
		for (end = it_mono_ms() + 60000; it_mono_ms() < end; it_sleep_ms(200)) {
			snprintf(cmd, sizeof(cmd), "%s --kubeconfig %s -n %s get events "
			    "--field-selector involvedObject.kind=CodeExecutionPool,"
			    "reason=QuotaExceeded -o name | wc -l", it_env_need("KUBECTL"),
			    it_env_need("KUBECONFIG_ADMIN"), ns3);
			free(out);
			out = NULL;
			if (it_sh(cmd, &out, NULL) == 0 && atoi(out) >= 1)
				break;
		}
		if (out == NULL || atoi(out) < 1)
			fail_msg("no QuotaExceeded Event on the pool within 60 s");
		/* Desired and Ready columns, and why it is not Ready. */
		for (end = it_mono_ms() + 60000; it_mono_ms() < end; it_sleep_ms(200)) {
			free(out);
			out = NULL;
			snprintf(cmd, sizeof(cmd), "%s --kubeconfig %s -n %s get cxpool "
			    "py --no-headers | awk '{ print $3, $4 }'; %s --kubeconfig "
			    "%s -n %s get cxpool py -o "
			    "jsonpath='{.status.conditions[0].reason}'",
			    it_env_need("KUBECTL"), it_env_need("KUBECONFIG_ADMIN"), ns3,
			    it_env_need("KUBECTL"), it_env_need("KUBECONFIG_ADMIN"), ns3);
			if (it_sh(cmd, &out, NULL) == 0 &&
			    strcmp(out, "5 2\nQuotaExceeded") == 0)
				break;
		}
		assert_string_equal(out, "5 2\nQuotaExceeded");
		free(out);
		extra_stop(ctl3, SIGTERM);
		it_namespace_delete(c, ns3);
		free(ns3);
		quota_ns = NULL;
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_warm_delivery),
		cmocka_unit_test(test_warm_freshness),
		cmocka_unit_test(test_warm_tenant_scope),
		cmocka_unit_test(test_warm_claim_race),
		cmocka_unit_test(test_warm_killed_mid_claim),
		cmocka_unit_test(test_warm_agent_restart),
		cmocka_unit_test(test_warm_pool_resize_delete),
		cmocka_unit_test(test_warm_lent),
		cmocka_unit_test(test_warm_cli),
		cmocka_unit_test(test_warm_observable),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
