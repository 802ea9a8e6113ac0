/*
 * `airlock run --local`: the end-to-end cases that apply without a
 * cluster, each through the real binary under the pinned runsc, with the
 * runner root filesystems images/local.sh unpacked. No cluster is used;
 * .cluster/env only says where runsc is.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include <jansson.h>

#include "clirun.h"
#include "itutil.h"

static int
group_setup(void **state)
{
	(void)state;
	setenv("AIRLOCK_RUNSC", it_env_need("RUNSC"), 1);
	return 0;
}

#define RUN(r, ...) do { \
	const char *args_[] = { "run", "--local", __VA_ARGS__, NULL }; \
	cli_run((r), NULL, 60000, args_); \
} while (0)

/* The status of a run with -o json. */
static json_t *
status_of(struct cli_result *r)
{
	json_t *o = json_loads(r->out, 0, NULL), *st;

	if (o == NULL)
		fail_msg("not JSON on stdout: %s\nstderr: %s", r->out, r->err);
	st = json_incref(json_object_get(o, "status"));
	json_decref(o);
	return st;
}

/*
 * The README's first local command as a new user types it, after
 * ./demo.sh: no --runsc, no AIRLOCK_RUNSC, none on PATH. The CLI takes
 * the runsc the test tooling built in the cache; with none there, it
 * says what to run.
 */
static void
test_runsc_found(void **state)
{
	char cache[PATH_MAX], root[PATH_MAX + 8], want[3 * PATH_MAX];
	struct cli_result r;
	char *slash, *path = strdup(getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin");
	char empty[] = "/tmp/airlock-nopath-XXXXXX";

	(void)state;
	/* RUNSC is CACHE/gvisor-VERSION-HASH/runsc. */
	snprintf(cache, sizeof(cache), "%s", it_env_need("RUNSC"));
	for (int i = 0; i < 2; i++)
		if ((slash = strrchr(cache, '/')) != NULL)
			*slash = '\0';
	snprintf(root, sizeof(root), "%s/local", cache);
	/*
	 * A PATH with no runsc on it, whatever this machine has installed
	 * (a node whose gVisor build failed gets Debian's in /usr/bin).
	 */
	if (mkdtemp(empty) == NULL)
		fail_msg("mkdtemp: %s", strerror(errno));
	unsetenv("AIRLOCK_RUNSC");
	setenv("AIRLOCK_CACHE", cache, 1);
	setenv("PATH", empty, 1);
	RUN(&r, "-c", "print(6 * 7)");
	cli_expect_status(&r, 0);
	assert_string_equal(r.out, "42\n");
	cli_result_free(&r);
	/* The cluster's direct pod, run here: /tmp its directory and HOME. */
	RUN(&r, "-c", "import os\nd = os.environ['AIRLOCK_CODE_DIR']\n"
	    "print(os.getcwd(), os.environ['HOME'], d, sorted(os.listdir(d)))");
	cli_expect_status(&r, 0);
	assert_string_equal(r.out, "/tmp /tmp /tmp ['main.py']\n");
	cli_result_free(&r);

	setenv("AIRLOCK_CACHE", "/nonexistent/airlock-cache", 1);
	setenv("AIRLOCK_LOCAL_ROOT", root, 1);
	RUN(&r, "-c", "print(6 * 7)");
	cli_expect_status(&r, 1);
	snprintf(want, sizeof(want), "airlock: gVisor's runsc was not found: none on "
	    "PATH, and none in /nonexistent/airlock-cache/gvisor-*/ "
	    "(tests/cluster/build.sh runsc builds one there, as ./demo.sh and make "
	    "test do); or name one with --runsc or AIRLOCK_RUNSC\n");
	assert_string_equal(r.err, want);
	assert_string_equal(r.out, "");
	cli_result_free(&r);
	unsetenv("AIRLOCK_CACHE");
	unsetenv("AIRLOCK_LOCAL_ROOT");
	setenv("AIRLOCK_RUNSC", it_env_need("RUNSC"), 1);
	setenv("PATH", path, 1);
	free(path);
	rmdir(empty);
}

/* stdout and stderr apart and in order, byte for byte; the exit code. */
static void
test_streams_and_exit(void **state)
{
	struct cli_result r;

	(void)state;
	RUN(&r, "-c", "import sys\nprint('out1', flush=True)\n"
	    "print('err1', file=sys.stderr, flush=True)\nsys.stdout.write('no newline')\n"
	    "sys.stdout.flush()\nprint('err2', file=sys.stderr)\nsys.exit(3)\n");
	cli_expect_status(&r, 3);
	assert_string_equal(r.out, "out1\nno newline");
	assert_string_equal(r.err, "err1\nerr2\n");
	cli_result_free(&r);
	{
		const char *args[] = { "run", "--local", "-r", "bash", "-c",
		    "echo hi; echo there >&2", NULL };

		cli_run(&r, NULL, 60000, args);
	}
	cli_expect_status(&r, 0);
	assert_string_equal(r.out, "hi\n");
	assert_string_equal(r.err, "there\n");
	cli_result_free(&r);
	/* The program from standard input ("-"), and --stdin for its input. */
	{
		char prog[] = "/tmp/airlock-prog-XXXXXX", in[] = "/tmp/airlock-in-XXXXXX";
		const char *args[] = { "run", "--local", "--stdin", in, "-", NULL };
		int fd;

		if ((fd = mkstemp(prog)) < 0 || write(fd, "import sys\nprint(sys.stdin.read()[::-1])\n", 41) != 41)
			fail_msg("mkstemp");
		close(fd);
		if ((fd = mkstemp(in)) < 0 || write(fd, "abc", 3) != 3)
			fail_msg("mkstemp");
		close(fd);
		cli_run(&r, prog, 60000, args);
		cli_expect_status(&r, 0);
		assert_string_equal(r.out, "cba\n");
		cli_result_free(&r);
		unlink(prog);
		unlink(in);
	}
}

/*
 * --local-config: an operator's profiles, policies included, run here as
 * on the cluster (the same guards, in the runner's root filesystem).
 */
static void
test_local_policy(void **state)
{
	char conf[] = "/tmp/airlock-local-config-XXXXXX";
	static const char yaml[] =
	    "profiles:\n"
	    "  python-guarded:\n    image: registry.example/airlock/runner-python:1.2\n"
	    "    command: [/airlock/bin/run, python3, main.py]\n    sourceFile: main.py\n"
	    "    policy: {denyImports: [subprocess]}\n"
	    "  bash-guarded:\n    image: registry.example/airlock/runner-bash:1.2\n"
	    "    command: [/airlock/bin/run, bash, main.sh]\n    sourceFile: main.sh\n"
	    "    policy: {allowCommands: [ls]}\n";
	struct cli_result r;
	json_t *st;
	int fd;

	(void)state;
	if ((fd = mkstemp(conf)) < 0 || write(fd, yaml, sizeof(yaml) - 1) !=
	    (ssize_t)(sizeof(yaml) - 1))
		fail_msg("mkstemp");
	close(fd);
	RUN(&r, "--local-config", conf, "-r", "python-guarded", "-o", "json", "-c",
	    "print(1)\nimport subprocess\n");
	cli_expect_status(&r, 120);
	st = status_of(&r);
	assert_string_equal(it_str(st, "reason"), "PolicyDenied");
	assert_string_equal(it_str(st, "message"),
	    "policy: import of 'subprocess' refused (main.py line 2)");
	assert_string_equal(it_str(st, "stdout"), "");
	json_decref(st);
	cli_result_free(&r);
	RUN(&r, "--local-config", conf, "-r", "python-guarded", "-c",
	    "print(1)\n__import__('subprocess')\n");
	cli_expect_status(&r, 120);
	assert_string_equal(r.out, "1\n");
	assert_non_null(strstr(r.err, "airlock: policy: import of 'subprocess' refused "
	    "(at run time, main.py line 2)\n"));
	cli_result_free(&r);
	RUN(&r, "--local-config", conf, "-r", "bash-guarded", "-o", "json", "-c",
	    "ls -d /tmp\nid\n");
	cli_expect_status(&r, 120);
	st = status_of(&r);
	assert_string_equal(it_str(st, "reason"), "PolicyDenied");
	assert_string_equal(it_str(st, "message"),
	    "policy: command 'id' is not allowed (main.sh line 2)");
	assert_string_equal(it_str(st, "stdout"), "/tmp\n");
	json_decref(st);
	cli_result_free(&r);
	/*
	 * Files out, here too: --out DIR, checked as the cluster's are, in
	 * DIR/NAME/ (never beside what DIR holds).
	 */
	{
		char dir[] = "/tmp/airlock-local-out-XXXXXX", path[256], got[64];
		FILE *f;

		assert_non_null(mkdtemp(dir));
		RUN(&r, "--out", dir, "--name", "local-out", "-c",
		    "open('/airlock/out/x.csv', 'w').write('a,b\\n')\n");
		cli_expect_status(&r, 0);
		snprintf(path, sizeof(path), "airlock: 1 file out written to "
		    "%s/local-out\n", dir);
		assert_non_null(strstr(r.err, path));
		cli_result_free(&r);
		snprintf(path, sizeof(path), "%s/x.csv", dir);
		assert_int_equal(access(path, F_OK), -1);
		snprintf(path, sizeof(path), "%s/local-out/x.csv", dir);
		assert_non_null(f = fopen(path, "r"));
		assert_non_null(fgets(got, sizeof(got), f));
		fclose(f);
		assert_string_equal(got, "a,b\n");
		/* Named as the API server would (run-XXXXX): a name --out takes. */
		RUN(&r, "--out", dir, "-c",
		    "open('/airlock/out/y.txt', 'w').write('y')\n");
		cli_expect_status(&r, 0);
		snprintf(path, sizeof(path), "airlock: 1 file out written to %s/run-", dir);
		if (strncmp(r.err, path, strlen(path)) != 0 ||
		    strspn(r.err + strlen(path), "0123456789abcdef") != 5 ||
		    r.err[strlen(path) + 5] != '\n')
			fail_msg("files out of an unnamed run: %s", r.err);
		cli_result_free(&r);
		snprintf(path, sizeof(path), "rm -rf %s", dir);
		assert_int_equal(system(path), 0);
	}
	/* Allowed, it runs; a profile the config does not have is refused. */
	RUN(&r, "--local-config", conf, "-r", "python-guarded", "-c", "import json\nprint(2)\n");
	cli_expect_status(&r, 0);
	assert_string_equal(r.out, "2\n");
	cli_result_free(&r);
	RUN(&r, "--local-config", conf, "-r", "python", "-c", "print(3)\n");
	assert_int_not_equal(r.status, 0);
	cli_result_free(&r);
	unlink(conf);
}

static void
test_status_object(void **state)
{
	struct cli_result r;
	json_t *st;

	(void)state;
	RUN(&r, "-o", "json", "-c", "print('hello')");
	cli_expect_status(&r, 0);
	st = status_of(&r);
	assert_string_equal(it_str(st, "phase"), "Succeeded");
	assert_string_equal(it_str(st, "reason"), "Completed");
	assert_int_equal(it_int(st, "exitCode"), 0);
	assert_string_equal(it_str(st, "stdout"), "hello\n");
	assert_int_equal(it_int(st, "stdoutBytes"), 6);
	assert_int_equal(it_int(st, "stderrBytes"), 0);
	assert_true(json_is_false(json_object_get(st, "stdoutTruncated")));
	assert_string_equal(it_str(st, "nodeName"), "local");
	assert_int_equal(json_array_size(json_object_get(st, "conditions")), 3);
	assert_in_range(it_int(st, "peakMemoryBytes"), 4 << 20, 256 << 20);
	assert_true(it_int(st, "cpuTimeMillis") > 0);
	assert_in_range(it_int(st, "durationMillis"), 1, 30000);
	assert_int_equal(strlen(it_str(st, "codeSha256")), 64);
	json_decref(st);
	cli_result_free(&r);
}

static void
test_timeout(void **state)
{
	struct cli_result r;
	json_t *st;
	long long d;

	(void)state;
	RUN(&r, "-o", "json", "--timeout", "2", "-c",
	    "print('before', flush=True)\nwhile True: pass\n");
	cli_expect_status(&r, 124);
	st = status_of(&r);
	assert_string_equal(it_str(st, "phase"), "TimedOut");
	assert_string_equal(it_str(st, "reason"), "DeadlineExceeded");
	assert_int_equal(it_int(st, "exitCode"), 137);
	assert_string_equal(it_str(st, "stdout"), "before\n");
	d = it_int(st, "durationMillis");
	print_message("# local timeout 2000 ms: ran %lld ms\n", d);
	if (d < 2000 || d > 2100)
		fail_msg("killed after %lld ms, not within 100 ms of 2000", d);
	json_decref(st);
	cli_result_free(&r);
}

static void
test_oom(void **state)
{
	struct cli_result r;
	json_t *st;

	(void)state;
	RUN(&r, "-o", "json", "--memory", "128Mi", "-c",
	    "a = []\nprint('start', flush=True)\nwhile True: a.append(bytearray(8 << 20))\n");
	cli_expect_status(&r, 125);
	st = status_of(&r);
	assert_string_equal(it_str(st, "phase"), "Failed");
	assert_string_equal(it_str(st, "reason"), "OOMKilled");
	assert_string_equal(it_str(st, "stdout"), "start\n");
	/* The kernel may charge a page or so past the limit (seen: + 4 KiB). */
	assert_in_range(it_int(st, "peakMemoryBytes"), 100 << 20, (128 << 20) + (1 << 20));
	json_decref(st);
	cli_result_free(&r);
}

/* No network: the host, a public address, DNS. */
static void
test_network_denied(void **state)
{
	char prog[1024], want[256];
	struct cli_result r;

	(void)state;
	snprintf(prog, sizeof(prog), "import socket\n"
	    "def conn(h, p):\n"
	    "    s = socket.socket(); s.settimeout(2)\n"
	    "    try:\n"
	    "        s.connect((h, p)); return 'open'\n"
	    "    except OSError:\n"
	    "        return 'fail'\n"
	    "for h, p in [('%s', 22), ('1.1.1.1', 443), ('127.0.0.1', 22)]:\n"
	    "    print(h, conn(h, p))\n"
	    "try:\n"
	    "    socket.getaddrinfo('example.com', 443); print('dns open')\n"
	    "except OSError:\n"
	    "    print('dns fail')\n", it_env_need("NODE_IP"));
	RUN(&r, "-c", prog);
	cli_expect_status(&r, 0);
	snprintf(want, sizeof(want), "%s fail\n1.1.1.1 fail\n127.0.0.1 fail\ndns fail\n",
	    it_env_need("NODE_IP"));
	assert_string_equal(r.out, want);
	cli_result_free(&r);
}

/* A read-only root, a writable /tmp of 64 MiB, not root. */
static void
test_filesystem_and_user(void **state)
{
	struct cli_result r;

	(void)state;
	RUN(&r, "-c", "import os, errno\n"
	    "print('uid', os.getuid(), os.getgid())\n"
	    "try:\n"
	    "    open('/var/tmp/x', 'w'); print('root writable')\n"
	    "except OSError as e:\n"
	    "    print('root', errno.errorcode[e.errno])\n"
	    "open('/tmp/t', 'w').write('ok'); print('tmp', open('/tmp/t').read())\n"
	    "n = 0\n"
	    "try:\n"
	    "    with open('/tmp/fill', 'wb') as f:\n"
	    "        for n in range(1, 257):\n"
	    "            f.write(b'x' * (1 << 20)); f.flush()\n"
	    "except OSError as e:\n"
	    "    print('fill', errno.errorcode[e.errno], 'before', n <= 65)\n");
	cli_expect_status(&r, 0);
	assert_string_equal(r.out, "uid 65532 65532\nroot EROFS\ntmp ok\nfill ENOSPC before True\n");
	cli_result_free(&r);
}

/* A manifest with stdin, files and a small output cap. */
static void
test_apply_manifest(void **state)
{
	char path[] = "/tmp/airlock-cx-XXXXXX";
	struct cli_result r;
	json_t *st;
	FILE *f;
	int fd;

	(void)state;
	if ((fd = mkstemp(path)) < 0 || (f = fdopen(fd, "w")) == NULL)
		fail_msg("mkstemp");
	fprintf(f, "apiVersion: airlock.dev/v1alpha1\nkind: CodeExecution\n"
	    "metadata: {name: manifest}\n"
	    "spec:\n  runtime: python\n"
	    "  source: |\n    import sys\n    print(open('data/in.txt').read().strip(), sys.stdin.read().strip())\n"
	    "    print('x' * 100)\n"
	    "  stdin: from-stdin\n"
	    "  files:\n  - {path: data/in.txt, content: from-file}\n"
	    "  output: {maxBytes: 10}\n");
	fclose(f);
	{
		const char *args[] = { "apply", "--local", "-f", path, "-o", "json", NULL };

		cli_run(&r, NULL, 60000, args);
	}
	cli_expect_status(&r, 0);
	st = status_of(&r);
	assert_string_equal(it_str(st, "stdout"), "from-file ");
	assert_true(json_is_true(json_object_get(st, "stdoutTruncated")));
	assert_int_equal(it_int(st, "stdoutBytes"), 21 + 101);
	json_decref(st);
	cli_result_free(&r);
	/* Without -o: the kept text, and a note that it was cut. */
	{
		const char *args[] = { "apply", "--local", "-f", path, NULL };

		cli_run(&r, NULL, 60000, args);
	}
	cli_expect_status(&r, 0);
	assert_string_equal(r.out, "from-file ");
	assert_non_null(strstr(r.err, "stdout cut at 10 of 122 bytes"));
	cli_result_free(&r);
	unlink(path);
}

static void
test_output_flood(void **state)
{
	struct cli_result r;
	json_t *st;

	(void)state;
	RUN(&r, "-o", "json", "-c", "import sys\nb = b'x' * (1 << 20)\n"
	    "for i in range(64): sys.stdout.buffer.write(b)\n");
	cli_expect_status(&r, 123);
	st = status_of(&r);
	assert_string_equal(it_str(st, "reason"), "OutputLimitExceeded");
	assert_int_equal(json_string_length(json_object_get(st, "stdout")), 65536);
	assert_true(it_int(st, "stdoutBytes") > 16 << 20);
	assert_true(it_int(st, "stdoutBytes") < 64 << 20);
	json_decref(st);
	cli_result_free(&r);
}

static void
test_binary_output(void **state)
{
	struct cli_result r;

	(void)state;
	RUN(&r, "-c", "import sys\nsys.stdout.buffer.write(b'a\\xffb\\xc3\\xa9\\x00z\\n')\n");
	cli_expect_status(&r, 0);
	assert_int_equal(r.out_len, 10);
	assert_memory_equal(r.out, "a\xef\xbf\xbd" "b\xc3\xa9\0z\n", 10);
	cli_result_free(&r);
}

/* Bad input: named, with exit 2; what the controller refuses: 121. */
static void
test_bad_input(void **state)
{
	char path[] = "/tmp/airlock-cx-XXXXXX", bin[] = "/tmp/airlock-prog-XXXXXX";
	struct cli_result r;
	FILE *f;
	int fd;

	(void)state;
	if ((fd = mkstemp(path)) < 0 || (f = fdopen(fd, "w")) == NULL)
		fail_msg("mkstemp");
	fprintf(f, "apiVersion: airlock.dev/v1alpha1\nkind: CodeExecution\n"
	    "metadata: {name: bad}\nspec: {runtime: python, code: 'print(1)'}\n");
	fclose(f);
	{
		const char *args[] = { "apply", "--local", "-f", path, NULL };

		cli_run(&r, NULL, 60000, args);
	}
	cli_expect_status(&r, 2);
	assert_non_null(strstr(r.err, "spec.code: unknown field"));
	cli_result_free(&r);
	unlink(path);

	RUN(&r, "--timeout", "0", "-c", "print(1)");
	cli_expect_status(&r, 2);
	assert_non_null(strstr(r.err, "--timeout"));
	cli_result_free(&r);

	RUN(&r, "-r", "ruby", "-c", "puts 1");
	cli_expect_status(&r, 121);
	assert_non_null(strstr(r.err, "Rejected"));
	cli_result_free(&r);

	RUN(&r, "--memory", "64Gi", "-c", "print(1)");
	cli_expect_status(&r, 121);
	assert_non_null(strstr(r.err, "Rejected"));
	cli_result_free(&r);

	if ((fd = mkstemp(bin)) < 0 || write(fd, "print('\xff')\n", 11) != 11)
		fail_msg("mkstemp");
	close(fd);
	RUN(&r, bin);
	cli_expect_status(&r, 2);
	assert_non_null(strstr(r.err, "not valid UTF-8"));
	cli_result_free(&r);
	unlink(bin);

	RUN(&r, "/nonexistent/prog.py");
	cli_expect_status(&r, 2);
	assert_non_null(strstr(r.err, "/nonexistent/prog.py"));
	cli_result_free(&r);
}

/* A fork bomb ends at its limits, and the next run is normal. */
static void
test_fork_bomb(void **state)
{
	struct cli_result r;
	json_t *st;

	(void)state;
	RUN(&r, "-o", "json", "-r", "bash", "--timeout", "5", "-c", ":(){ :|:& };:; sleep 60\n");
	st = status_of(&r);
	print_message("# local fork bomb: %s/%s after %lld ms\n", it_str(st, "phase"),
	    it_str(st, "reason"), it_int(st, "durationMillis"));
	if (r.status != 124 && r.status != 125)
		fail_msg("fork bomb ended with exit %d", r.status);
	json_decref(st);
	cli_result_free(&r);
	RUN(&r, "-c", "print('fine')");
	cli_expect_status(&r, 0);
	assert_string_equal(r.out, "fine\n");
	cli_result_free(&r);
}

static void run_in_flight(char *id, size_t n);

/*
 * Wait until the one local run in flight's cgroup holds at least bytes of
 * memory (v1 memory.usage_in_bytes, v2 memory.current): 1, or 0 after
 * timeout_ms.
 */
static int
wait_run_memory(long long bytes, long timeout_ms)
{
	static const char *const files[][2] = {
	    { "/sys/fs/cgroup/memory/", "/memory.usage_in_bytes" },
	    { "/sys/fs/cgroup/", "/memory.current" } };
	char id[64], path[512];
	long t0 = it_mono_ms();

	for (; it_mono_ms() - t0 < timeout_ms; it_sleep_ms(50)) {
		run_in_flight(id, sizeof(id));
		for (size_t i = 0; id[0] && i < 2; i++) {
			long long v = 0;
			FILE *f;

			snprintf(path, sizeof(path), "%s%s%s", files[i][0], id,
			    files[i][1]);
			if ((f = fopen(path, "r")) == NULL)
				continue;
			if (fscanf(f, "%lld", &v) != 1)
				v = 0;
			fclose(f);
			if (v >= bytes)
				return 1;
		}
	}
	return 0;
}

/* Ctrl-C stops the run (Cancelled, exit 130) and leaves nothing behind. */
static void
test_ctrl_c(void **state)
{
	/*
	 * It prints, then touches 64 MiB: the memory its cgroup shows says
	 * the line is in the CLI's pipe, so the signal cannot come before.
	 */
	const char *args[] = { "run", "--local", "-c",
	    "import time\nprint('up', flush=True)\nb = b'x' * (64 << 20)\ntime.sleep(60)\n",
	    NULL };
	struct cli_result r;
	long t0;
	int out, err;
	pid_t pid;

	(void)state;
	pid = cli_start(args, &out, &err);
	if (!wait_run_memory(48LL << 20, 30000))
		fail_msg("the run never reached 48 MiB");
	t0 = it_mono_ms();
	assert_int_equal(kill(pid, SIGINT), 0);
	cli_finish(&r, pid, out, err, 30000);
	print_message("# local Ctrl-C: done %ld ms after the signal\n", it_mono_ms() - t0);
	cli_expect_status(&r, 130);
	assert_string_equal(r.out, "up\n");
	assert_non_null(strstr(r.err, "airlock: Cancelled: stopped by Interrupt"));
	cli_result_free(&r);
}

/* examples/ runs as the README says it does. */
static void
test_examples(void **state)
{
	static const struct {
		const char *file, *out, *err;
		int status;
	} t[] = {
		{ "hello.yaml", "hello from python 3\n", "", 0 },
		{ "node.yaml", "hello from node 18\n", "uid 65532\n", 0 },
		{ "bash.yaml", "hello, world\n3\n", "", 0 },
		{ "limits.yaml", "hi FROM STDIN\n"
		  "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
		  "\nairlock: stdout cut at 100 of 1015 bytes (spec.output.maxBytes)\n", 0 },
	};
	const char *top = getenv("AIRLOCK_TOP") ? getenv("AIRLOCK_TOP") : ".";
	struct cli_result r;
	char path[4096];

	(void)state;
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		const char *args[] = { "apply", "--local", "-f", path, NULL };

		snprintf(path, sizeof(path), "%s/examples/%s", top, t[i].file);
		cli_run(&r, NULL, 60000, args);
		if (r.status != t[i].status || strcmp(r.out, t[i].out) != 0 ||
		    strcmp(r.err, t[i].err) != 0)
			fail_msg("%s: exit %d\nstdout: %s\nstderr: %s", t[i].file,
			    r.status, r.out, r.err);
		cli_result_free(&r);
	}
	snprintf(path, sizeof(path), "%s/examples/hello.py", top);
	RUN(&r, path);
	cli_expect_status(&r, 0);
	assert_int_equal(strncmp(r.out, "hello from gVisor: Linux ", 25), 0);
	assert_string_equal(r.err, "this line went to stderr\n");
	cli_result_free(&r);
}

/* The one run in flight's id, from its record in /run/airlock/runs, or "". */
static void
run_in_flight(char *id, size_t n)
{
	struct dirent *de;
	DIR *d = opendir("/run/airlock/runs");

	id[0] = '\0';
	while (d && (de = readdir(d)) != NULL)
		if (strncmp(de->d_name, "airlock-local-", 14) == 0 &&
		    strlen(de->d_name) < n)
			memcpy(id, de->d_name, strlen(de->d_name) + 1);
	if (d)
		closedir(d);
}

/* Whether dir/id/leaf (leaf may be "") exists. */
static int
exists(const char *dir, const char *id, const char *leaf)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%s%s%s", dir, id, *leaf ? "/" : "", leaf);
	return access(path, F_OK) == 0;
}

/*
 * Fail naming anything whose name starts with prefix (a run's id, or
 * "airlock-local-" for any run) in a place a local run leaves things: its
 * workspace in /tmp, its record, its runsc state, its cgroup in any
 * hierarchy: cgroup v2's (the mount itself and unified/) and each of v1's
 * controllers. A check of v1's memory alone passed on a v2 host.
 */
static void
expect_nothing_left(const char *prefix)
{
	static const char *const places[] = { "/tmp", "/run/airlock/runs",
	    "/run/airlock/runsc", "/sys/fs/cgroup" };
	char dirs[64][300];
	int n = 0;
	struct dirent *de;
	DIR *d;

	for (size_t i = 0; i < sizeof(places) / sizeof(places[0]); i++)
		snprintf(dirs[n++], sizeof(dirs[0]), "%s", places[i]);
	if ((d = opendir("/sys/fs/cgroup")) != NULL) {
		while ((de = readdir(d)) != NULL && n < 64)
			if (de->d_type == DT_DIR && de->d_name[0] != '.')
				snprintf(dirs[n++], sizeof(dirs[0]), "/sys/fs/cgroup/%s",
				    de->d_name);
		closedir(d);
	}
	for (int i = 0; i < n; i++) {
		if ((d = opendir(dirs[i])) == NULL)
			continue;
		while ((de = readdir(d)) != NULL)
			if (strstr(de->d_name, prefix) != NULL)
				fail_msg("%s/%s was left behind", dirs[i], de->d_name);
		closedir(d);
	}
}

/*
 * A CLI SIGKILLed mid-run: its watchdog ends the run at once and leaves
 * nothing, neither the sandbox (which used to run on with no deadline) nor
 * its workspace (tenant code in /tmp), its cgroup or its runsc state.
 */
static void
test_cli_killed(void **state)
{
	const char *args[] = { "run", "--local", "-r", "bash", "--timeout", "600", "-c",
	    "echo up; sleep 600", NULL };
	char id[64], cmd[1024];
	struct cli_result r;
	long long t0;
	int out, err, left = 1;
	pid_t pid;

	(void)state;
	pid = cli_start(args, &out, &err);
	for (t0 = it_mono_ms(); it_mono_ms() - t0 < 30000; it_sleep_ms(100)) {
		run_in_flight(id, sizeof(id));
		if (id[0] && exists("/sys/fs/cgroup/memory", id, "cgroup.procs"))
			break;
	}
	if (!id[0])
		fail_msg("no run in flight");
	it_sleep_ms(1500);	/* the sandbox runs */
	snprintf(cmd, sizeof(cmd), "%s --root /run/airlock/runsc state %s >/dev/null 2>&1",
	    it_env_need("RUNSC"), id);
	assert_int_equal(system(cmd), 0);
	t0 = it_mono_ms();
	assert_int_equal(kill(pid, SIGKILL), 0);
	cli_finish(&r, pid, out, err, 30000);
	cli_result_free(&r);
	while (it_mono_ms() - t0 < 10000 && (left = exists("/run/airlock/runs", id, "")))
		it_sleep_ms(50);
	print_message("# local run reaped %lld ms after its CLI was killed\n", it_mono_ms() - t0);
	if (left)
		fail_msg("run %s still recorded 10 s after its CLI died", id);
	assert_int_not_equal(system(cmd), 0);
	expect_nothing_left(id);
	expect_nothing_left("airlock-local-");
}

/* What a run whose CLI and watchdog both died left is reaped by the next run. */
static void
test_dead_runs_swept(void **state)
{
	char ws[] = "/tmp/airlock-local-XXXXXX", path[256];
	struct cli_result r;
	FILE *f;

	(void)state;
	assert_non_null(mkdtemp(ws));
	snprintf(path, sizeof(path), "%s/main.py", ws);
	assert_non_null(f = fopen(path, "w"));
	fputs("print('tenant code')\n", f);
	fclose(f);
	mkdir("/run/airlock/runs", 0700);
	/* A pid that is not running, or is someone else now (start time 1). */
	assert_non_null(f = fopen("/run/airlock/runs/airlock-local-deadbeef", "w"));
	fprintf(f, "%d 1\n%s\n", (int)getpid(), ws);
	fclose(f);
	RUN(&r, "-c", "print(1)");
	cli_expect_status(&r, 0);
	cli_result_free(&r);
	assert_int_not_equal(access(ws, F_OK), 0);
	assert_int_not_equal(access("/run/airlock/runs/airlock-local-deadbeef", F_OK), 0);
}

/* Nothing is left behind: no work directory, record, runsc state or cgroup. */
static void
test_nothing_left(void **state)
{
	(void)state;
	expect_nothing_left("airlock-local-");
}

/*
 * A program that ends at once, with the machine busy: its exit status
 * comes back every time. (runsc wait, started after the program ended,
 * found its sandbox gone and no status: 16 of 40 such runs under three
 * busy loops ended Failed with exit code -1, the CLI exiting 1; this was
 * the clean-clone run's unexplained bash failure.)
 */
static void
test_fast_exit_under_load(void **state)
{
	const char *args[] = { "run", "--local", "-r", "bash", "-c", "echo hi; exit 7", NULL };
	struct cli_result r;
	pid_t busy[3];
	int wrong = 0;

	(void)state;
	for (int i = 0; i < 3; i++)
		if ((busy[i] = fork()) == 0)
			for (;;)
				;
	for (int i = 0; i < 20; i++) {
		cli_run(&r, NULL, 60000, args);
		if (r.status != 7 || strcmp(r.out, "hi\n") != 0) {
			print_message("# run %d: exit %d, stdout '%s', stderr '%s'\n", i,
			    r.status, r.out, r.err);
			wrong++;
		}
		cli_result_free(&r);
	}
	for (int i = 0; i < 3; i++) {
		kill(busy[i], SIGKILL);
		waitpid(busy[i], NULL, 0);
	}
	assert_int_equal(wrong, 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_streams_and_exit),
		cmocka_unit_test(test_runsc_found),
		cmocka_unit_test(test_status_object),
		cmocka_unit_test(test_local_policy),
		cmocka_unit_test(test_timeout),
		cmocka_unit_test(test_oom),
		cmocka_unit_test(test_network_denied),
		cmocka_unit_test(test_filesystem_and_user),
		cmocka_unit_test(test_apply_manifest),
		cmocka_unit_test(test_output_flood),
		cmocka_unit_test(test_binary_output),
		cmocka_unit_test(test_bad_input),
		cmocka_unit_test(test_fork_bomb),
		cmocka_unit_test(test_ctrl_c),
		cmocka_unit_test(test_examples),
		cmocka_unit_test(test_cli_killed),
		cmocka_unit_test(test_dead_runs_swept),
		cmocka_unit_test(test_fast_exit_under_load),
		cmocka_unit_test(test_nothing_left),
	};

	return cmocka_run_group_tests(tests, group_setup, NULL);
}
