/*
 * End-to-end, the warm path's delivery (docs/warm-path.md), on the real
 * node: a holder pod under gVisor, hardened as an execution pod, started
 * with no code; then one process exec'd into it through containerd
 * (node-agent/ctrd.h) running the runner image's `/airlock/bin/run --warm`,
 * which unpacks the program and its files from a tar on its stdin
 * (execution/codetar.h) and hands the rest of stdin to the program. What
 * the program prints, on both streams, is read from the exec's FIFOs.
 *
 * The pools, the claim and the agent's part are not built yet; this is the
 * path they will use, tested on its own.
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
#include "codetar.h"
#include "ctrd.h"
#include "itutil.h"

static struct k8s_client *c;
static struct k8s_config *kcfg;
static char *ns;

static int
group_setup(void **state)
{
	(void)state;
	c = it_client(0, &kcfg);
	it_install_classes(c);
	ns = it_namespace_new(c, "e2e-warm");
	return 0;
}

static int
group_teardown(void **state)
{
	(void)state;
	it_namespace_delete(c, ns);
	free(ns);
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

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_warm_delivery),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
