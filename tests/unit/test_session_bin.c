/*
 * Unit tests: a session's steps in the sandbox (docs/sessions.md):
 * `warm --step` (images/runner/warm.c, built for the host as
 * $(B)/images/warm) with the Python kernel (images/runner/kernel.py) on
 * the host's python3, read back through the node agent's own parsers
 * (crilog's frame filter, artifacts_parse's step report). State, files,
 * values, exceptions, timeouts with the state kept and with the kernel
 * restarted, exits, output written between steps, and each step's own
 * environment and stdin. The kernel's restarts, counted in the report,
 * and a kernel killed between steps, said by the next step. And
 * `warm --serve`, the same steps over one process: requests written and
 * records read by the test itself (serve_start, serve_step, serve_answer).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <signal.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "artifacts.h"
#include "buf.h"
#include "codetar.h"
#include "crilog.h"
#include "itutil.h"

#define NONCE	"5e55105e55105e55105e55105e55105e"

static char warm[4096 + 16], kernel[4096 + 64], kernel_cmd[4096 + 128];
static char kernel_sh[4096 + 64];
static const char *code_name = "main.py";

struct sess {
	char	dir[64];	/* the test's: work/, session/, out/ in it */
};

struct step {
	int		 status;	/* warm's exit status */
	char		*out, *err;	/* the program's, the frame taken out */
	struct step_report report;
	char		 value[ARTIFACTS_VALUE_MAX + 1];
	size_t		 nfiles;
	char		 files[8][64];
};

static int
group_setup(void **state)
{
	const char *top = getenv("AIRLOCK_TOP");

	(void)state;
	if (top == NULL || it_images_bin("warm", warm, sizeof(warm)) != 0)
		return -1;
	snprintf(kernel, sizeof(kernel), "%s/images/runner/kernel.py", top);
	snprintf(kernel_cmd, sizeof(kernel_cmd), "python3 %s", kernel);
	snprintf(kernel_sh, sizeof(kernel_sh), "%s/images/runner/kernel.sh", top);
	return access(kernel, R_OK) == 0 && access(kernel_sh, R_OK) == 0 ?
	    0 : -1;
}

/* > 0: run_step sends the step client SIGTERM this long after its start. */
static long cancel_after_ms;

static int
setup(void **state)
{
	struct sess *s = calloc(1, sizeof(*s));
	char p[128];

	cancel_after_ms = 0;	/* a failed test may have left it set */
	snprintf(s->dir, sizeof(s->dir), "/tmp/airlock-session-test-XXXXXX");
	if (mkdtemp(s->dir) == NULL)
		return -1;
	snprintf(p, sizeof(p), "%s/work", s->dir);
	mkdir(p, 0700);
	*state = s;
	return 0;
}

static int
teardown(void **state)
{
	struct sess *s = *state;
	char cmd[256], *o = NULL;
	int rc;

	/* The kernel, by its lock's holder, then the directory. */
	snprintf(cmd, sizeof(cmd), "p=$(cat %s/session/kernel.pid 2>/dev/null) && "
	    "kill -9 -$p; rm -rf %s", s->dir, s->dir);
	rc = it_sh(cmd, &o, NULL);
	free(o);
	free(s);
	return rc == 0 ? 0 : -1;
}

static int
exists(void *path)
{
	return access(path, F_OK) == 0;
}

/* 1 once no kernel holds the session's lock (path: kernel.lock). */
static int
lock_free(void *path)
{
	int fd = open(path, O_RDWR | O_CLOEXEC), got;

	if (fd < 0)
		return 0;
	got = flock(fd, LOCK_EX | LOCK_NB) == 0;
	close(fd);
	return got;
}

/*
 * Kill the session's kernel between steps, as the OOM killer or a
 * thread's os._exit would, and wait until it is gone.
 */
static void
kill_kernel(struct sess *s)
{
	char p[128], buf[32] = "";
	FILE *f;
	long pid;

	snprintf(p, sizeof(p), "%s/session/kernel.pid", s->dir);
	assert_non_null(f = fopen(p, "r"));
	assert_non_null(fgets(buf, sizeof(buf), f));
	fclose(f);
	pid = atol(buf);
	assert_true(pid > 1);
	assert_int_equal(kill((pid_t)pid, SIGKILL), 0);
	snprintf(p, sizeof(p), "%s/session/kernel.lock", s->dir);
	assert_int_equal(it_wait_for(lock_free, p, 10000), 1);
}

static void
step_free(struct step *r)
{
	free(r->out);
	free(r->err);
}

static void step_parse(struct step *r);

/*
 * Run one step: code as main.py, with files (name, text pairs, NULL
 * ended), stdin (NULL: none), env ("NAME=VALUE ..." for env(1), or ""),
 * its timeout and grace in ms.
 */
static void
run_step(struct sess *s, const char *code, const char *const *files,
    const char *stdin_, const char *env, long timeout_ms, long grace_ms,
    struct step *r)
{
	struct codetar_entry e[8];
	size_t n = 0, bad;
	struct buf tar;
	char tarpath[128], cmd[16384], bytes[32] = "-";
	FILE *f;

	memset(r, 0, sizeof(*r));
	e[n++] = (struct codetar_entry){ code_name, code, strlen(code) };
	for (; files && files[0]; files += 2)
		e[n++] = (struct codetar_entry){ files[0], files[1], strlen(files[1]) };
	buf_init(&tar, 1 << 20);
	assert_int_equal(codetar_build(e, n, &tar, &bad), 0);
	snprintf(tarpath, sizeof(tarpath), "%s/in.tar", s->dir);
	assert_non_null(f = fopen(tarpath, "w"));
	assert_int_equal(fwrite(tar.data, 1, tar.len, f), tar.len);
	if (stdin_ != NULL) {
		fputs(stdin_, f);
		snprintf(bytes, sizeof(bytes), "%zu", tar.len);
	}
	fclose(f);
	buf_free(&tar);
	if (cancel_after_ms > 0)	/* as the node agent's cancel: tick.c */
		snprintf(cmd, sizeof(cmd), "{ cd %s/work && { env %s AIRLOCK_SESSION_DIR=%s/"
		    "session AIRLOCK_TEST_OUT=%s/out AIRLOCK_OUT='" NONCE " 100000 8' "
		    "%s --step %s %ld %ld %s %s < %s & }; p=$!; sleep %ld.%03ld; "
		    "kill -TERM $p; wait $p; echo \"%s$?\"; }", s->dir, env, s->dir,
		    s->dir, warm, bytes, timeout_ms, grace_ms, code_name, kernel_cmd,
		    tarpath, cancel_after_ms / 1000, cancel_after_ms % 1000, "\x1f");
	else
		snprintf(cmd, sizeof(cmd), "{ cd %s/work && env %s AIRLOCK_SESSION_DIR=%s/"
		    "session AIRLOCK_TEST_OUT=%s/out AIRLOCK_OUT='" NONCE " 100000 8' %s "
		    "--step %s %ld %ld %s %s < %s; echo \"%s$?\"; }", s->dir, env, s->dir,
		    s->dir, warm, bytes, timeout_ms, grace_ms, code_name, kernel_cmd,
		    tarpath, "\x1f");
	assert_int_equal(it_sh(cmd, &r->out, &r->err), 0);
	/* The status, after the \x1f the shell printed last. */
	{
		char *m = strrchr(r->out, '\x1f');

		assert_non_null(m);
		r->status = atoi(m + 1);
		*m = '\0';
	}
	step_parse(r);
}

/*
 * r->out as the step client wrote it: the frame taken out (as the node
 * agent's crilog does) and read (artifacts_parse: the report, the value,
 * the files); r->out is then the program's stdout alone.
 */
static void
step_parse(struct step *r)
{
	struct crilog *l;
	struct artifacts a;
	const char *body;
	size_t len;
	int st;

	l = crilog_new(1 << 20, 1 << 20);
	crilog_out_frame(l, NONCE, 1 << 20);
	crilog_feed_stream(l, 0, r->out, strlen(r->out));
	crilog_finish(l);
	body = crilog_frame(l, &len, &st);
	assert_int_equal(st, CRILOG_FRAME_COMPLETE);
	artifacts_parse(body, len, 100000, 8, &a);
	assert_string_equal(a.error, "");
	r->report = a.step;
	r->report.value = NULL;
	if (a.step.value != NULL)
		memcpy(r->value, a.step.value, a.step.value_len);
	r->nfiles = a.nfiles;
	for (size_t i = 0; i < a.nfiles && i < 8; i++)
		snprintf(r->files[i], sizeof(r->files[i]), "%s", a.files[i].path);
	free(r->out);
	r->out = strdup(crilog_text(crilog_stdout(l), NULL));
	artifacts_free(&a);
	crilog_free(l);
}

#define STEP(s, code, r)	run_step((s), (code), NULL, NULL, "", 10000, 2000, (r))

/* Globals and imports across three steps; the last expression's value. */
static void
test_state_across_steps(void **state)
{
	struct step r;

	STEP(*state, "import json\nx = 41\n", &r);
	assert_int_equal(r.status, 0);
	assert_int_equal(r.report.kind, STEP_OK);
	assert_int_equal(r.report.restarted, 0);
	assert_int_equal(r.report.restarts, 0);
	assert_string_equal(r.out, "");
	assert_string_equal(r.err, "");
	assert_string_equal(r.value, "");
	step_free(&r);
	STEP(*state, "x += 1\nprint(x)\n", &r);
	assert_string_equal(r.out, "42\n");
	assert_string_equal(r.err, "");
	step_free(&r);
	STEP(*state, "print(json.dumps({'x': x}))\n{'x': x}\n", &r);
	assert_int_equal(r.status, 0);
	assert_string_equal(r.out, "{\"x\": 42}\n");
	assert_string_equal(r.value, "{'x': 42}");
	assert_int_equal(r.report.restarted, 0);
	assert_int_equal(r.report.restarts, 0);
	step_free(&r);
	/* None shows nothing; a statement last shows nothing. */
	STEP(*state, "x\nNone\n", &r);
	assert_string_equal(r.value, "");
	step_free(&r);
}

/* The working directory's files are kept; a step's files replace them. */
static void
test_files_kept(void **state)
{
	static const char *const files[] = { "data.csv", "a,b\n1,2\n", NULL };
	static const char *const again[] = { "data.csv", "a,b\n3,4\n", NULL };
	struct step r;

	run_step(*state, "open('made.txt', 'w').write('kept')\n", files, NULL, "",
	    10000, 2000, &r);
	assert_int_equal(r.status, 0);
	step_free(&r);
	STEP(*state, "print(open('made.txt').read(), open('data.csv').read())\n", &r);
	assert_string_equal(r.out, "kept a,b\n1,2\n\n");
	step_free(&r);
	run_step(*state, "print(open('data.csv').read())\n", again, NULL, "", 10000,
	    2000, &r);
	assert_string_equal(r.out, "a,b\n3,4\n\n");
	step_free(&r);
}

/* An exception: exit 1, the traceback on stderr (its line, not the kernel's). */
static void
test_exception_keeps_state(void **state)
{
	struct step r;

	STEP(*state, "y = 7\n", &r);
	step_free(&r);
	STEP(*state, "print('before')\n1 / 0\n", &r);
	assert_int_equal(r.status, 1);
	assert_int_equal(r.report.kind, STEP_ERROR);
	assert_string_equal(r.out, "before\n");
	assert_string_equal(r.err, "Traceback (most recent call last):\n"
	    "  File \"<step 2>\", line 2, in <module>\n"
	    "    1 / 0\n"
	    "    ~~^~~\n"
	    "ZeroDivisionError: division by zero\n");
	step_free(&r);
	STEP(*state, "y\n", &r);
	assert_int_equal(r.status, 0);
	assert_string_equal(r.value, "7");
	step_free(&r);
	STEP(*state, "y +\n", &r);
	assert_int_equal(r.status, 1);
	assert_non_null(strstr(r.err, "SyntaxError: invalid syntax\n"));
	assert_null(strstr(r.err, "kernel.py"));
	step_free(&r);
}

/* At its timeout the step is interrupted; the state stays. */
static void
test_timeout_keeps_state(void **state)
{
	struct step r;

	STEP(*state, "z = 'kept'\n", &r);
	step_free(&r);
	run_step(*state, "import time\nprint('started', flush=True)\ntime.sleep(30)\n",
	    NULL, NULL, "", 500, 2000, &r);
	assert_int_equal(r.status, 124);
	assert_int_equal(r.report.kind, STEP_TIMEOUT);
	assert_int_equal(r.report.restarted, 0);
	assert_string_equal(r.out, "started\n");
	assert_non_null(strstr(r.err, "KeyboardInterrupt\n"));
	assert_null(strstr(r.err, "kernel.py"));
	step_free(&r);
	STEP(*state, "z\n", &r);
	assert_string_equal(r.value, "'kept'");
	step_free(&r);
}

/*
 * Cancelled while it runs (SIGTERM to the step client, as the node agent
 * sends it): the kernel interrupted at once, not at the step's timeout,
 * and the session's state kept.
 */
static void
test_cancel_interrupts(void **state)
{
	struct step r;
	long t0;

	STEP(*state, "z = 'kept'\n", &r);
	step_free(&r);
	cancel_after_ms = 700;
	t0 = it_mono_ms();
	run_step(*state, "import time\nprint('started', flush=True)\ntime.sleep(30)\n",
	    NULL, NULL, "", 60000, 2000, &r);
	cancel_after_ms = 0;
	assert_true(it_mono_ms() - t0 < 10000);
	assert_int_equal(r.status, 124);
	assert_int_equal(r.report.kind, STEP_TIMEOUT);
	assert_int_equal(r.report.restarted, 0);
	assert_string_equal(r.out, "started\n");
	assert_non_null(strstr(r.err, "KeyboardInterrupt\n"));
	step_free(&r);
	STEP(*state, "z\n", &r);
	assert_string_equal(r.value, "'kept'");
	step_free(&r);
}

/* A loop that swallows the interrupt: killed at the grace's end, restarted. */
static void
test_uninterruptible_restarts(void **state)
{
	struct step r;
	long t0;

	STEP(*state, "w = 1\n", &r);
	step_free(&r);
	t0 = it_mono_ms();
	run_step(*state, "import time\nwhile True:\n    try:\n        time.sleep(1)\n"
	    "    except KeyboardInterrupt:\n        pass\n", NULL, NULL, "", 500, 500, &r);
	assert_true(it_mono_ms() - t0 < 5000);
	assert_int_equal(r.status, 124);
	assert_int_equal(r.report.kind, STEP_TIMEOUT);
	assert_int_equal(r.report.restarted, 1);
	assert_int_equal(r.report.restarts, 1);
	assert_string_equal(r.err, "airlock: the session's kernel did not stop within "
	    "the grace after the timeout; a new one was started, and the session's "
	    "state is lost\n");
	step_free(&r);
	STEP(*state, "print('w' in globals())\n", &r);
	assert_string_equal(r.out, "False\n");
	assert_int_equal(r.report.restarted, 0);
	assert_int_equal(r.report.restarts, 1);
	step_free(&r);
}

/* sys.exit: its status, and a new kernel; exit() too. */
static void
test_exit_restarts(void **state)
{
	struct step r;

	STEP(*state, "v = 1\n", &r);
	step_free(&r);
	STEP(*state, "import sys\nprint('bye')\nsys.exit(3)\n", &r);
	assert_int_equal(r.status, 3);
	assert_int_equal(r.report.kind, STEP_EXIT);
	assert_int_equal(r.report.code, 3);
	assert_int_equal(r.report.restarted, 1);
	assert_int_equal(r.report.restarts, 1);
	assert_string_equal(r.out, "bye\n");
	step_free(&r);
	/* The end's restart is not the next step's: that one finds a kernel. */
	STEP(*state, "print('v' in globals())\n", &r);
	assert_string_equal(r.out, "False\n");
	assert_string_equal(r.err, "");
	assert_int_equal(r.report.restarted, 0);
	assert_int_equal(r.report.restarts, 1);
	step_free(&r);
	STEP(*state, "exit()\n", &r);
	assert_int_equal(r.status, 0);
	assert_int_equal(r.report.kind, STEP_EXIT);
	assert_int_equal(r.report.restarted, 1);
	assert_int_equal(r.report.restarts, 2);
	step_free(&r);
}

/*
 * The kernel dies between steps (killed, as by the OOM killer): the next
 * step runs on a new kernel, says the state was lost (RESTARTED 3, and
 * stderr), and the count goes up; the step after runs as usual.
 */
static void
test_kernel_dies_between_steps(void **state)
{
	struct step r;

	STEP(*state, "u = 1\n", &r);
	assert_int_equal(r.report.restarts, 0);
	step_free(&r);
	kill_kernel(*state);
	STEP(*state, "print('u' in globals())\n6 * 7\n", &r);
	assert_int_equal(r.status, 0);
	assert_int_equal(r.report.kind, STEP_OK);
	assert_int_equal(r.report.code, 0);
	assert_int_equal(r.report.restarted, 3);
	assert_int_equal(r.report.restarts, 1);
	assert_string_equal(r.out, "False\n");
	assert_string_equal(r.value, "42");
	assert_string_equal(r.err, "airlock: the session's kernel was not running at "
	    "this step's start; a new one was started, and the session's earlier "
	    "state is lost\n");
	step_free(&r);
	STEP(*state, "u = 2\nu\n", &r);
	assert_int_equal(r.report.restarted, 0);
	assert_int_equal(r.report.restarts, 1);
	assert_string_equal(r.value, "2");
	assert_string_equal(r.err, "");
	step_free(&r);
	/* Both in one step: dead at its start, exited at its end. 3, counted twice. */
	kill_kernel(*state);
	STEP(*state, "print('u' in globals())\nexit(5)\n", &r);
	assert_int_equal(r.status, 5);
	assert_int_equal(r.report.kind, STEP_EXIT);
	assert_int_equal(r.report.code, 5);
	assert_int_equal(r.report.restarted, 3);
	assert_int_equal(r.report.restarts, 3);
	assert_string_equal(r.out, "False\n");
	step_free(&r);
	STEP(*state, "u = 3\n", &r);
	assert_int_equal(r.report.restarted, 0);
	assert_int_equal(r.report.restarts, 3);
	step_free(&r);
}

/*
 * No kernel could start after an exit (2, not counted): the next step
 * starts one, says 3 and counts it; one loss, said and counted once each.
 */
static void
test_restart_fails_then_next_step(void **state)
{
	struct step r;

	STEP(*state, "t = 1\n", &r);
	step_free(&r);
	/* The kernel runs: this step uses it; its end's restart cannot. */
	snprintf(kernel_cmd, sizeof(kernel_cmd), "/nonexistent/python3");
	STEP(*state, "exit(2)\n", &r);
	snprintf(kernel_cmd, sizeof(kernel_cmd), "python3 %s", kernel);
	assert_int_equal(r.status, 2);
	assert_int_equal(r.report.kind, STEP_EXIT);
	assert_int_equal(r.report.restarted, 2);
	assert_int_equal(r.report.restarts, 0);
	step_free(&r);
	STEP(*state, "print('t' in globals())\n", &r);
	assert_int_equal(r.status, 0);
	assert_int_equal(r.report.restarted, 3);
	assert_int_equal(r.report.restarts, 1);
	assert_string_equal(r.out, "False\n");
	step_free(&r);
}

/*
 * The count's file, which the session's own code can write: a bad one
 * reads as 0, a symlink is neither read nor written through.
 */
static void
test_restarts_file(void **state)
{
	struct sess *s = *state;
	char p[128], v[128], buf[32] = "";
	struct step r;
	FILE *f;

	STEP(s, "exit()\n", &r);
	assert_int_equal(r.report.restarts, 1);
	step_free(&r);
	snprintf(p, sizeof(p), "%s/session/restarts", s->dir);
	assert_non_null(f = fopen(p, "r"));
	assert_non_null(fgets(buf, sizeof(buf), f));
	fclose(f);
	assert_string_equal(buf, "1\n");
	static const char *const bad[] = { "x\n", "-4\n", "1000001\n", "7 8\n", "" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_non_null(f = fopen(p, "w"));
		fputs(bad[i], f);
		fclose(f);
		STEP(s, "exit()\n", &r);
		if (r.report.restarts != 1)
			fail_msg("after '%s': restarts %lld", bad[i], r.report.restarts);
		step_free(&r);
	}
	/* The most there is: it stays. */
	assert_non_null(f = fopen(p, "w"));
	fputs("1000000", f);
	fclose(f);
	STEP(s, "exit()\n", &r);
	assert_int_equal(r.report.restarts, 1000000);
	step_free(&r);
	/* A symlink planted at the count and its temporary file. */
	snprintf(v, sizeof(v), "%s/victim", s->dir);
	assert_non_null(f = fopen(v, "w"));
	fputs("5\n", f);
	fclose(f);
	unlink(p);
	assert_int_equal(symlink(v, p), 0);
	snprintf(p, sizeof(p), "%s/session/restarts.tmp", s->dir);
	assert_int_equal(symlink(v, p), 0);
	STEP(s, "exit()\n", &r);
	assert_int_equal(r.report.restarts, 1);
	step_free(&r);
	assert_non_null(f = fopen(v, "r"));
	assert_non_null(fgets(buf, sizeof(buf), f));
	fclose(f);
	assert_string_equal(buf, "5\n");
}

/*
 * What a thread writes while no step runs is dropped, and counted in the
 * next step's report; the next step's output is its own. The thread
 * writes when the test (between steps) makes a file, and says it has.
 */
static void
test_output_between_steps_dropped(void **state)
{
	struct sess *s = *state;
	char go[128], done[128], cmd[512];
	struct step r;

	snprintf(go, sizeof(go), "%s/go", s->dir);
	snprintf(done, sizeof(done), "%s/done", s->dir);
	snprintf(cmd, sizeof(cmd), "import os, threading, time\n"
	    "def bg():\n    while not os.path.exists('%s'):\n        time.sleep(0.01)\n"
	    "    print('y' * 49, flush=True)\n    open('%s', 'w').close()\n"
	    "threading.Thread(target=bg).start()\n", go, done);
	STEP(s, cmd, &r);
	assert_string_equal(r.out, "");
	assert_int_equal(r.report.dropped, 0);
	step_free(&r);
	fclose(fopen(go, "w"));
	assert_int_equal(it_wait_for(exists, done, 10000), 1);
	STEP(s, "print('mine')\n", &r);
	assert_string_equal(r.out, "mine\n");
	assert_int_equal(r.report.dropped, 50);
	step_free(&r);
	STEP(s, "pass\n", &r);
	assert_int_equal(r.report.dropped, 0);
	step_free(&r);
}

/* Each step's env and stdin are its own. */
static void
test_env_and_stdin_per_step(void **state)
{
	struct step r;

	run_step(*state, "import os, sys\nprint(os.environ.get('TOKEN'), sys.stdin.read())\n",
	    NULL, "from stdin", "TOKEN=t1", 10000, 2000, &r);
	assert_string_equal(r.out, "t1 from stdin\n");
	step_free(&r);
	STEP(*state, "import os, sys\nprint(os.environ.get('TOKEN'), repr(sys.stdin.read()))\n",
	    &r);
	assert_string_equal(r.out, "None ''\n");
	step_free(&r);
}

/* A value's text is cut to ARTIFACTS_VALUE_MAX bytes, on a character. */
static void
test_value_capped(void **state)
{
	struct step r;

	STEP(*state, "'\\u00e9' * 5000\n", &r);
	assert_int_equal(r.status, 0);
	/* "'" then 2047 two-byte characters fit in 4096 bytes. */
	assert_int_equal(strlen(r.value), 4095);
	assert_memory_equal(r.value, "'\xc3\xa9\xc3\xa9", 5);
	step_free(&r);
}

/* Files out are each step's own: /airlock/out is emptied before each. */
static void
test_files_out_per_step(void **state)
{
	struct step r;

	STEP(*state, "import os\nout = os.environ['AIRLOCK_TEST_OUT']\n"
	    "open(out + '/one.txt', 'w').write('1')\n", &r);
	assert_int_equal(r.nfiles, 1);
	assert_string_equal(r.files[0], "one.txt");
	step_free(&r);
	STEP(*state, "open(out + '/two.txt', 'w').write('2')\n", &r);
	assert_int_equal(r.nfiles, 1);
	assert_string_equal(r.files[0], "two.txt");
	step_free(&r);
}

/* A kernel that cannot start: 125, why, and the report says no kernel. */
static void
test_kernel_cannot_start(void **state)
{
	struct step r;

	snprintf(kernel_cmd, sizeof(kernel_cmd), "/nonexistent/python3");
	STEP(*state, "print(1)\n", &r);
	snprintf(kernel_cmd, sizeof(kernel_cmd), "python3 %s", kernel);
	assert_int_equal(r.status, 125);
	assert_int_equal(r.report.kind, STEP_FAILED);
	assert_int_equal(r.report.restarted, 2);
	assert_int_equal(r.report.restarts, 0);
	assert_string_equal(r.out, "");
	assert_string_equal(r.err, "warm: the session's kernel exited (127) before it "
	    "was ready:\ncannot run /nonexistent/python3: No such file or directory\n");
	step_free(&r);
}

/*
 * The step's own code puts FIFOs where the step client reads files (its
 * value, and the files out): the client does not block on them (it did,
 * past the step's timeout and grace, holding the session's step lock).
 */
static void
test_planted_fifo(void **state)
{
	struct step r;
	long t0 = it_mono_ms();

	run_step(*state, "import os\nd = os.environ['AIRLOCK_SESSION_DIR']\n"
	    "os.mkfifo(d + '/step/value')\n"
	    "os.mkfifo(os.environ['AIRLOCK_TEST_OUT'] + '/pipe')\n", NULL, NULL, "",
	    2000, 500, &r);
	assert_true(it_mono_ms() - t0 < 2000);
	assert_int_equal(r.status, 0);
	assert_int_equal(r.report.kind, STEP_OK);
	assert_string_equal(r.value, "");
	step_free(&r);
	STEP(*state, "print('next')\n", &r);
	assert_string_equal(r.out, "next\n");
	step_free(&r);
}

/*
 * The kernel dies under a step while a child it forked lives on: a dead
 * kernel, seen at once (the child does not hold the kernel's lock), not a
 * step that times out.
 */
static void
test_kernel_dies_forked_child(void **state)
{
	struct step r;
	long t0;

	STEP(*state, "v = 1\n", &r);
	step_free(&r);
	t0 = it_mono_ms();
	run_step(*state, "import os, time\nif os.fork() == 0:\n    time.sleep(30)\n"
	    "    os._exit(0)\nos._exit(1)\n", NULL, NULL, "", 5000, 500, &r);
	assert_true(it_mono_ms() - t0 < 4000);
	assert_int_equal(r.report.kind, STEP_DIED);
	assert_int_equal(r.status, 137);
	assert_int_equal(r.report.restarted, 1);
	assert_int_equal(r.report.restarts, 1);
	step_free(&r);
	STEP(*state, "print('v' in globals())\n", &r);
	assert_string_equal(r.out, "False\n");
	assert_int_equal(r.report.restarted, 0);
	assert_int_equal(r.report.restarts, 1);
	step_free(&r);
}

/* bash's kernel: the step as it would be at a bash prompt. */
static int
bash_setup(void **state)
{
	snprintf(kernel_cmd, sizeof(kernel_cmd), "bash %s", kernel_sh);
	code_name = "main.sh";
	return setup(state);
}

static int
bash_teardown(void **state)
{
	snprintf(kernel_cmd, sizeof(kernel_cmd), "python3 %s", kernel);
	code_name = "main.py";
	return teardown(state);
}

/*
 * Variables, functions, the working directory and options kept; a
 * failing command Failed with its status, the state kept; interrupted at
 * the timeout, kept; exit: its status, and a new shell.
 */
static void
test_bash_session(void **state)
{
	struct step r;

	STEP(*state, "x=41\nf() { echo \"f:$1\"; }\nmkdir -p sub && cd sub\n", &r);
	assert_int_equal(r.status, 0);
	assert_int_equal(r.report.kind, STEP_OK);
	step_free(&r);
	STEP(*state, "x=$((x + 1)); echo $x; f hi; basename \"$PWD\"\n", &r);
	assert_string_equal(r.out, "42\nf:hi\nsub\n");
	step_free(&r);
	STEP(*state, "echo before; ls /nonexistent-airlock\n", &r);
	assert_int_equal(r.status, 2);
	assert_int_equal(r.report.kind, STEP_ERROR);
	assert_string_equal(r.out, "before\n");
	assert_non_null(strstr(r.err, "/nonexistent-airlock"));
	step_free(&r);
	run_step(*state, "echo started; sleep 30; echo not-reached\n", NULL, NULL, "",
	    500, 2000, &r);
	assert_int_equal(r.status, 124);
	assert_int_equal(r.report.kind, STEP_TIMEOUT);
	assert_int_equal(r.report.restarted, 0);
	assert_string_equal(r.out, "started\n");
	step_free(&r);
	STEP(*state, "echo $x\n", &r);
	assert_string_equal(r.out, "42\n");
	step_free(&r);
	STEP(*state, "echo bye; exit 4\n", &r);
	assert_int_equal(r.status, 4);
	assert_int_equal(r.report.kind, STEP_EXIT);
	assert_int_equal(r.report.restarted, 1);
	assert_int_equal(r.report.restarts, 1);
	assert_string_equal(r.out, "bye\n");
	step_free(&r);
	STEP(*state, "echo \"${x:-gone}\"\n", &r);
	assert_string_equal(r.out, "gone\n");
	step_free(&r);
	/* A shell killed between steps: the next says so, on a new one. */
	STEP(*state, "x=5\n", &r);
	step_free(&r);
	kill_kernel(*state);
	STEP(*state, "echo \"${x:-gone}\"\n", &r);
	assert_int_equal(r.report.kind, STEP_OK);
	assert_int_equal(r.report.restarted, 3);
	assert_int_equal(r.report.restarts, 2);
	assert_string_equal(r.out, "gone\n");
	step_free(&r);
	/* set -e is kept: a failing command then ends the shell, as a script. */
	STEP(*state, "set -e\n", &r);
	step_free(&r);
	STEP(*state, "false\necho not-reached\n", &r);
	assert_int_equal(r.status, 1);
	assert_int_equal(r.report.kind, STEP_EXIT);
	assert_int_equal(r.report.restarts, 3);
	assert_string_equal(r.out, "");
	step_free(&r);
}


/* --- warm --serve: the steps of a session over one process ------------- */

struct server {
	pid_t	pid;
	int	in, out;	/* its stdin's write end, its stdout's read end */
};

/* One answer: every record up to X (or EOF), the O and E bytes apart. */
struct answer {
	int			 x;		/* 1: X came */
	unsigned long long	 seq;
	int			 status;
	struct buf		 o, e;
	int			 no, ne;	/* records of each */
};

/* The step's env when the test gives none: the files-out setting alone. */
static const char out_env[] = "AIRLOCK_OUT=" NONCE " 100000 8";

/* `warm --serve python3 kernel.py`, with pipes, in the session's dir. */
static void
serve_start(struct sess *s, struct server *v)
{
	int in[2], out[2];
	char p[128];

	assert_int_equal(pipe2(in, O_CLOEXEC), 0);
	assert_int_equal(pipe2(out, O_CLOEXEC), 0);
	fflush(NULL);
	assert_true((v->pid = fork()) >= 0);
	if (v->pid == 0) {
		snprintf(p, sizeof(p), "%s/work", s->dir);
		if (chdir(p) != 0 || dup2(in[0], 0) < 0 || dup2(out[1], 1) < 0)
			_exit(126);
		snprintf(p, sizeof(p), "%s/session", s->dir);
		setenv("AIRLOCK_SESSION_DIR", p, 1);
		snprintf(p, sizeof(p), "%s/out", s->dir);
		setenv("AIRLOCK_TEST_OUT", p, 1);
		/* Not the test's SIG_IGN: the server must ignore SIGPIPE itself. */
		signal(SIGPIPE, SIG_DFL);
		execl(warm, warm, "--serve", "python3", kernel, (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	v->in = in[1];
	v->out = out[0];
	/* A server that went must not kill the test on a write. */
	signal(SIGPIPE, SIG_IGN);
}

static void
send_all(struct server *v, const void *p, size_t n)
{
	const char *c = p;

	while (n > 0) {
		ssize_t w = write(v->in, c, n);

		assert_true(w > 0);
		c += w;
		n -= (size_t)w;
	}
}

/*
 * A STEP request, written at once with tail after it (NULL: none): code
 * as main.py, stdin_ (NULL: none, limit "-"), env (env_len bytes of
 * NAME=VALUE\0 entries; NULL: out_env alone). The bytes written.
 */
static size_t
serve_request(struct server *v, unsigned seq, const char *code,
    const char *stdin_, const char *env, size_t env_len, long timeout_ms,
    long grace_ms, const char *tail)
{
	struct codetar_entry e = { code_name, code, strlen(code) };
	struct buf tar, all;
	char head[256], limit[32] = "-";
	size_t bad, n, slen = stdin_ ? strlen(stdin_) : 0;

	if (env == NULL) {
		env = out_env;
		env_len = sizeof(out_env);
	}
	buf_init(&tar, 1 << 20);
	assert_int_equal(codetar_build(&e, 1, &tar, &bad), 0);
	if (stdin_ != NULL)
		snprintf(limit, sizeof(limit), "%zu", tar.len);
	snprintf(head, sizeof(head), "STEP %u %s %ld %ld %s %zu %zu\n", seq, limit,
	    timeout_ms, grace_ms, code_name, env_len, tar.len + slen);
	buf_init(&all, 4 << 20);
	assert_int_equal(buf_append_str(&all, head), 0);
	assert_int_equal(buf_append(&all, env, env_len), 0);
	assert_int_equal(buf_append(&all, tar.data, tar.len), 0);
	assert_int_equal(buf_append(&all, stdin_, slen), 0);
	assert_int_equal(buf_append_str(&all, tail ? tail : ""), 0);
	send_all(v, all.data, all.len);
	n = all.len;
	buf_free(&all);
	buf_free(&tar);
	return n;
}

static void
serve_step(struct server *v, unsigned seq, const char *code,
    const char *stdin_, const char *env, size_t env_len, long timeout_ms,
    long grace_ms)
{
	(void)serve_request(v, seq, code, stdin_, env, env_len, timeout_ms,
	    grace_ms, NULL);
}

/* n bytes of the server's stdout, within the deadline, or the test fails. */
static size_t
recv_bytes(struct server *v, void *p, size_t n, long deadline)
{
	size_t got = 0;

	while (got < n) {
		struct pollfd pf = { .fd = v->out, .events = POLLIN };
		long left = deadline - it_mono_ms();
		ssize_t r;

		if (left <= 0)
			fail_msg("no answer from warm --serve in time");
		if (poll(&pf, 1, (int)left) <= 0)
			continue;
		if ((r = read(v->out, (char *)p + got, n - got)) <= 0)
			break;
		got += (size_t)r;
	}
	return got;
}

/*
 * Read records until X or EOF (at most timeout_ms): any record that is
 * not "O LEN", "E LEN" or "X SEQ STATUS" fails the test.
 */
static void
serve_answer(struct server *v, struct answer *a, long timeout_ms)
{
	long deadline = it_mono_ms() + timeout_ms;

	memset(a, 0, sizeof(*a));
	buf_init(&a->o, 8 << 20);
	buf_init(&a->e, 8 << 20);
	for (;;) {
		char line[128], kind;
		size_t n = 0, len;
		char *data;

		while (n < sizeof(line) - 1 && recv_bytes(v, line + n, 1, deadline) == 1 &&
		    line[n] != '\n')
			n++;
		if (n == 0)
			return;		/* EOF */
		line[n] = '\0';
		if (sscanf(line, "X %llu %d", &a->seq, &a->status) == 2) {
			a->x = 1;
			return;
		}
		if (sscanf(line, "%c %zu", &kind, &len) != 2 || (kind != 'O' &&
		    kind != 'E') || len == 0)
			fail_msg("not a record: '%s'", line);
		assert_non_null(data = malloc(len));
		assert_int_equal(recv_bytes(v, data, len, deadline), len);
		assert_int_equal(buf_append(kind == 'O' ? &a->o : &a->e, data, len), 0);
		if (kind == 'O')
			a->no++;
		else
			a->ne++;
		free(data);
	}
}

static void
answer_free(struct answer *a)
{
	buf_free(&a->o);
	buf_free(&a->e);
}

/* An answer as a step of run_step's: the frame read, r->out the program's. */
static void
answer_step(struct answer *a, struct step *r)
{
	memset(r, 0, sizeof(*r));
	r->status = a->status;
	assert_non_null(r->out = strndup(a->o.data ? a->o.data : "", a->o.len));
	assert_non_null(r->err = strndup(a->e.data ? a->e.data : "", a->e.len));
	step_parse(r);
}

/*
 * The answer to step seq, within 20 s: X seq status, or the test fails;
 * the step in r, its O and E records counted in *no and *ne (if not NULL).
 */
static void
serve_expect(struct server *v, unsigned long long seq, int status,
    struct step *r, int *no, int *ne)
{
	struct answer a;

	serve_answer(v, &a, 20000);
	assert_int_equal(a.x, 1);
	assert_int_equal(a.seq, seq);
	assert_int_equal(a.status, status);
	if (no != NULL)
		*no = a.no;
	if (ne != NULL)
		*ne = a.ne;
	answer_step(&a, r);
	answer_free(&a);
}

/* One step on the server that ends well: r. */
static void
serve_run(struct server *v, unsigned seq, const char *code, struct step *r)
{
	serve_step(v, seq, code, NULL, NULL, 0, 10000, 2000);
	serve_expect(v, seq, 0, r, NULL, NULL);
}

/* The server's exit status once it has gone (within timeout_ms), or fail. */
static int
serve_wait(struct server *v, long timeout_ms)
{
	long deadline = it_mono_ms() + timeout_ms;
	int st;

	while (waitpid(v->pid, &st, WNOHANG) == 0) {
		if (it_mono_ms() > deadline) {
			kill(v->pid, SIGKILL);
			waitpid(v->pid, &st, 0);
			fail_msg("warm --serve did not exit");
		}
		it_sleep_ms(10);
	}
	if (v->in >= 0)
		close(v->in);
	if (v->out >= 0)
		close(v->out);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* EOF on its stdin between steps: exit 0. */
static void
serve_stop(struct server *v)
{
	close(v->in);
	v->in = -1;
	assert_int_equal(serve_wait(v, 10000), 0);
}

/* Three steps over one server: the state kept, the last one's value. */
static void
test_serve_state_across_steps(void **state)
{
	struct server v;
	struct step r;

	serve_start(*state, &v);
	serve_run(&v, 1, "x = 1\n", &r);
	assert_int_equal(r.status, 0);
	assert_string_equal(r.out, "");
	assert_string_equal(r.value, "");
	step_free(&r);
	serve_run(&v, 2, "x += 1\n", &r);
	assert_int_equal(r.status, 0);
	step_free(&r);
	serve_run(&v, 3, "print(x)\nx\n", &r);
	assert_int_equal(r.status, 0);
	assert_int_equal(r.report.kind, STEP_OK);
	assert_int_equal(r.report.restarted, 0);
	assert_int_equal(r.report.restarts, 0);
	assert_string_equal(r.out, "2\n");
	assert_string_equal(r.err, "");
	assert_string_equal(r.value, "2");
	step_free(&r);
	serve_stop(&v);
}

/*
 * stdout in O records, stderr in E records, each apart; the request's
 * env and stdin are the step's, and the next step's env is its own.
 */
static void
test_serve_streams_env_stdin(void **state)
{
	static const char env[] = "TOKEN=t1\0AIRLOCK_OUT=" NONCE " 100000 8";
	struct server v;
	struct step r;
	int no, ne;

	serve_start(*state, &v);
	serve_step(&v, 1, "import os, sys\nprint(os.environ['TOKEN'], sys.stdin.read(), "
	    "flush=True)\nsys.stderr.write('to err\\n')\n", "from stdin", env,
	    sizeof(env), 10000, 2000);
	serve_expect(&v, 1, 0, &r, &no, &ne);
	assert_int_equal(ne, 1);
	assert_true(no >= 2);		/* the program's line, then the frame */
	assert_string_equal(r.out, "t1 from stdin\n");
	assert_string_equal(r.err, "to err\n");
	assert_int_equal(r.report.kind, STEP_OK);
	step_free(&r);
	serve_run(&v, 2, "import os, sys\nprint(os.environ.get('TOKEN'), "
	    "repr(sys.stdin.read()))\n", &r);
	assert_string_equal(r.out, "None ''\n");
	assert_string_equal(r.err, "");
	step_free(&r);
	serve_stop(&v);
}

/* A step past its timeout: X 124, interrupted; the state kept. */
static void
test_serve_timeout_keeps_state(void **state)
{
	struct server v;
	struct step r;

	serve_start(*state, &v);
	serve_run(&v, 1, "z = 'kept'\n", &r);
	step_free(&r);
	serve_step(&v, 2, "import time\nprint('started', flush=True)\ntime.sleep(30)\n",
	    NULL, NULL, 0, 500, 2000);
	serve_expect(&v, 2, 124, &r, NULL, NULL);
	assert_int_equal(r.report.kind, STEP_TIMEOUT);
	assert_int_equal(r.report.restarted, 0);
	assert_string_equal(r.out, "started\n");
	assert_non_null(strstr(r.err, "KeyboardInterrupt\n"));
	step_free(&r);
	serve_run(&v, 3, "z\n", &r);
	assert_int_equal(r.status, 0);
	assert_string_equal(r.value, "'kept'");
	step_free(&r);
	serve_stop(&v);
}

/*
 * CANCEL of the running step: interrupted at once (not at its 60 s
 * timeout), X 124, the state kept. A CANCEL of another step is nothing
 * to cancel: the step runs on, and one between steps is ignored.
 */
static void
test_serve_cancel_interrupts(void **state)
{
	struct server v;
	struct step r;
	long t0;

	serve_start(*state, &v);
	serve_run(&v, 1, "z = 'kept'\n", &r);
	step_free(&r);
	send_all(&v, "CANCEL 1\n", 9);	/* ended: nothing to cancel */
	serve_step(&v, 2, "import time\nprint('started', flush=True)\ntime.sleep(30)\n",
	    NULL, NULL, 0, 60000, 2000);
	t0 = it_mono_ms();
	it_sleep_ms(300);
	send_all(&v, "CANCEL 1\n", 9);
	it_sleep_ms(400);
	send_all(&v, "CANCEL 2\n", 9);
	serve_expect(&v, 2, 124, &r, NULL, NULL);
	assert_true(it_mono_ms() - t0 < 5000);
	assert_int_equal(r.report.kind, STEP_TIMEOUT);
	assert_int_equal(r.report.restarted, 0);
	assert_string_equal(r.out, "started\n");
	assert_non_null(strstr(r.err, "KeyboardInterrupt\n"));
	step_free(&r);
	serve_run(&v, 3, "z\n", &r);
	assert_string_equal(r.value, "'kept'");
	step_free(&r);
	serve_stop(&v);
}

/*
 * A CANCEL written with its STEP, in one write: the server's first read
 * takes both, and the step is interrupted all the same (the CANCEL waited
 * in its buffer, where polling stdin does not see it), not at its 60 s
 * timeout. So early an interrupt can reach the kernel before the step's
 * code does, and the kernel is started again: the next step runs.
 */
static void
test_serve_cancel_with_step(void **state)
{
	struct server v;
	struct step r;
	long t0;

	serve_start(*state, &v);
	serve_run(&v, 1, "z = 'kept'\n", &r);
	step_free(&r);
	t0 = it_mono_ms();
	/* One read of the server's (4 KiB) takes all of it. */
	assert_true(serve_request(&v, 2, "import time\ntime.sleep(30)\n", NULL,
	    NULL, 0, 60000, 2000, "CANCEL 2\n") < 4096);
	serve_expect(&v, 2, 124, &r, NULL, NULL);
	assert_true(it_mono_ms() - t0 < 5000);
	assert_int_equal(r.report.kind, STEP_TIMEOUT);
	step_free(&r);
	serve_run(&v, 3, "print('next')\n", &r);
	assert_string_equal(r.out, "next\n");
	step_free(&r);
	serve_stop(&v);
}

/*
 * What a refused request is answered: why in an E record (the last; the
 * only one unless a step ran), X SEQ 125 (SEQ 0 before one is read),
 * nothing after, and the server exits 125.
 */
static void
refused(struct server *v, unsigned long long seq, const char *why, int ran)
{
	struct answer a;
	size_t wl = strlen(why);
	char tail;

	serve_answer(v, &a, 20000);
	assert_int_equal(a.x, 1);
	assert_int_equal(a.seq, seq);
	assert_int_equal(a.status, 125);
	if (!ran) {
		assert_int_equal(a.ne, 1);
		assert_int_equal(a.e.len, wl);
	}
	assert_true(a.e.len >= wl);
	assert_memory_equal(a.e.data + a.e.len - wl, why, wl);
	answer_free(&a);
	assert_int_equal(recv_bytes(v, &tail, 1, it_mono_ms() + 10000), 0);
	assert_int_equal(serve_wait(v, 10000), 125);
}

/* Send text (n bytes) to a new server, and see it refused with seq, why. */
static void
refuse(struct sess *s, const char *text, size_t n, unsigned long long seq,
    const char *why)
{
	struct server v;

	serve_start(s, &v);
	send_all(&v, text, n);
	close(v.in);	/* the cut-short ones: EOF, not a wait */
	v.in = -1;
	refused(&v, seq, why, 0);
}

#define REFUSE(s, text, seq, why)	refuse((s), (text), sizeof(text) - 1, (seq), (why))

/* Malformed requests: refused, never guessed at; the server exits. */
static void
test_serve_malformed(void **state)
{
	struct server v;
	struct step r;
	char started[192], code[320];

	REFUSE(*state, "HELLO\n", 0,
	    "warm: a request is not a STEP or a CANCEL SEQ line\n");
	REFUSE(*state, "CANCEL x\n", 0,
	    "warm: a request is not a STEP or a CANCEL SEQ line\n");
	REFUSE(*state, "STEP 1 - 10 10 main.py 0\n", 0,
	    "warm: a STEP request has not 8 fields\n");
	REFUSE(*state, "STEP 1  - 10 10 main.py 0 0\n", 0,
	    "warm: a STEP request has not 8 fields\n");
	REFUSE(*state, "STEP 0 - 10 10 main.py 0 0\n", 0,
	    "warm: a STEP's seq is not a number from 1\n");
	REFUSE(*state, "STEP 7 - 0 10 main.py 0 0\n", 7,
	    "warm: the STEP's timeout_ms is not a number from 1\n");
	REFUSE(*state, "STEP 7 x 10 10 main.py 0 0\n", 7,
	    "warm: the STEP's limit is not '-' or a byte count up to 67108864\n");
	REFUSE(*state, "STEP 7 - 10 -1 main.py 0 0\n", 7,
	    "warm: the STEP's grace_ms is not a number\n");
	REFUSE(*state, "STEP 8 - 10 10 main.py 5 0\nA=123", 8,
	    "warm: the step's env does not end with a NUL\n");
	REFUSE(*state, "STEP 8 - 10 10 main.py 5 0\nA=12\0", 8,
	    "warm: the step's env has no AIRLOCK_OUT\n");
	REFUSE(*state, "STEP 8 - 10 10 main.py 4 0\nA12\0", 8,
	    "warm: the step's env holds an entry that is not NAME=VALUE\n");
	REFUSE(*state, "STEP 8 - 10 10 main.py 5 0\nA=12", 8,
	    "warm: the requests end inside the step's env\n");
	REFUSE(*state, "STEP 9", 0, "warm: the requests end inside a line\n");
	/* Not an archive: refused as --step refuses it. */
	{
		char req[256 + sizeof(out_env) + 600];
		int n = snprintf(req, sizeof(req), "STEP 3 - 10 10 main.py %zu 512\n",
		    sizeof(out_env));

		memcpy(req + n, out_env, sizeof(out_env));
		memset(req + n + sizeof(out_env), 'z', 512);
		refuse(*state, req, (size_t)n + sizeof(out_env) + 512, 3,
		    "warm: the archive holds something other than a file\n");
	}
	/*
	 * Another request while a step runs: the step interrupted, refused.
	 * Sent once the step's code runs (its file made): sooner, the
	 * interrupt can reach the kernel before the step does, and the kernel
	 * is started again (test_serve_cancel_with_step).
	 */
	snprintf(started, sizeof(started), "%s/started", ((struct sess *)*state)->dir);
	snprintf(code, sizeof(code), "import time\nopen(%s%s%s, 'w').close()\n"
	    "time.sleep(30)\n", "'", started, "'");
	serve_start(*state, &v);
	serve_step(&v, 4, code, NULL, NULL, 0, 60000, 2000);
	assert_int_equal(it_wait_for(exists, started, 20000), 1);
	send_all(&v, "STEP 5 - 10 10 main.py 0 0\n", 27);
	refused(&v, 4, "warm: a request other than CANCEL came while a step ran\n", 1);
	/* Interrupted, not killed: the session's kernel is the same. */
	run_step(*state, "print('ok')\n", NULL, NULL, "", 10000, 2000, &r);
	assert_string_equal(r.out, "ok\n");
	assert_int_equal(r.report.restarted, 0);
	assert_int_equal(r.report.restarts, 0);
	step_free(&r);
}

/* EOF between steps: exit 0, the kernel left running with the state. */
static void
test_serve_eof_between_steps(void **state)
{
	struct sess *s = *state;
	struct server v;
	struct step r;
	char lock[128];

	serve_start(s, &v);
	serve_run(&v, 1, "x = 5\n", &r);
	assert_int_equal(r.status, 0);
	step_free(&r);
	serve_stop(&v);
	snprintf(lock, sizeof(lock), "%s/session/kernel.lock", s->dir);
	assert_int_equal(lock_free(lock), 0);
	/* The next client, --step here, finds the kernel and its state. */
	STEP(s, "x\n", &r);
	assert_int_equal(r.status, 0);
	assert_string_equal(r.value, "5");
	assert_int_equal(r.report.restarted, 0);
	step_free(&r);
	/* And a new server after it. */
	serve_start(s, &v);
	serve_run(&v, 1, "x + 1\n", &r);
	assert_string_equal(r.value, "6");
	step_free(&r);
	serve_stop(&v);
}

/*
 * The agent gone while a step runs (stdin and stdout closed): the step
 * ends as it would (its output dropped: no SIGPIPE death), then the
 * server exits 0, the step's state kept.
 */
static void
test_serve_agent_gone(void **state)
{
	struct server v;
	struct step r;

	serve_start(*state, &v);
	serve_step(&v, 1, "import time\ntime.sleep(1)\nprint('x' * 200000, flush=True)\n"
	    "y = 'done'\n", NULL, NULL, 0, 10000, 2000);
	close(v.in);
	close(v.out);
	v.in = v.out = -1;
	assert_int_equal(serve_wait(&v, 15000), 0);
	STEP(*state, "y\n", &r);
	assert_int_equal(r.status, 0);
	assert_string_equal(r.value, "'done'");
	assert_int_equal(r.report.restarted, 0);
	step_free(&r);
}

/*
 * The bounds: a line of 256 bytes with its newline (read: here its code
 * is not in the archive) and not one more; env-bytes up to 256 KiB (a
 * step with 256 KiB exactly runs); body-bytes up to 64 MiB; a limit
 * within the body.
 */
static void
test_serve_bounds(void **state)
{
	char line[512], why[512], code[300], zero[1024] = { 0 };
	size_t envlen = 256 << 10, big;
	char *env = malloc(envlen);
	struct server v;
	struct step r;
	int fixed, n;

	fixed = snprintf(NULL, 0, "STEP 2 - 10 10  %zu 1024\n", sizeof(out_env));
	memset(code, 'c', sizeof(code));
	code[256 - fixed] = '\0';
	n = snprintf(line, sizeof(line), "STEP 2 - 10 10 %s %zu 1024\n", code,
	    sizeof(out_env));
	assert_int_equal(n, 256);
	serve_start(*state, &v);
	send_all(&v, line, (size_t)n);
	send_all(&v, out_env, sizeof(out_env));
	send_all(&v, zero, sizeof(zero));	/* an archive with nothing in it */
	snprintf(why, sizeof(why), "warm: the archive has no '%s'\n", code);
	refused(&v, 2, why, 0);
	code[256 - fixed] = 'c';
	code[257 - fixed] = '\0';
	n = snprintf(line, sizeof(line), "STEP 2 - 10 10 %s %zu 1024\n", code,
	    sizeof(out_env));
	assert_int_equal(n, 257);
	refuse(*state, line, (size_t)n, 0, "warm: a request line is over 256 bytes\n");

	REFUSE(*state, "STEP 1 - 10 10 main.py 262145 0\n", 1,
	    "warm: the STEP's env-bytes is over 262144\n");
	REFUSE(*state, "STEP 1 - 10 10 main.py 54 67108865\n", 1,
	    "warm: the STEP's body-bytes is over 67108864\n");
	REFUSE(*state, "STEP 1 1025 10 10 main.py 54 1024\n", 1,
	    "warm: the STEP's limit is over its body-bytes\n");
	REFUSE(*state, "STEP 1 67108865 10 10 main.py 54 1024\n", 1,
	    "warm: the STEP's limit is not '-' or a byte count up to 67108864\n");

	/* 256 KiB of env exactly: taken, and the step sees it. */
	assert_non_null(env);
	memcpy(env, out_env, sizeof(out_env));
	memcpy(env + sizeof(out_env), "BIG=", 4);
	big = envlen - sizeof(out_env) - 4 - 1;
	memset(env + sizeof(out_env) + 4, 'b', big);
	env[envlen - 1] = '\0';
	serve_start(*state, &v);
	serve_step(&v, 1, "import os\nlen(os.environ['BIG'])\n", NULL, env, envlen,
	    10000, 2000);
	serve_expect(&v, 1, 0, &r, NULL, NULL);
	snprintf(why, sizeof(why), "%zu", big);
	assert_string_equal(r.value, why);
	step_free(&r);
	serve_stop(&v);
	free(env);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_state_across_steps, setup, teardown),
		cmocka_unit_test_setup_teardown(test_files_kept, setup, teardown),
		cmocka_unit_test_setup_teardown(test_exception_keeps_state, setup, teardown),
		cmocka_unit_test_setup_teardown(test_timeout_keeps_state, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cancel_interrupts, setup, teardown),
		cmocka_unit_test_setup_teardown(test_uninterruptible_restarts, setup, teardown),
		cmocka_unit_test_setup_teardown(test_exit_restarts, setup, teardown),
		cmocka_unit_test_setup_teardown(test_kernel_dies_between_steps, setup, teardown),
		cmocka_unit_test_setup_teardown(test_restarts_file, setup, teardown),
		cmocka_unit_test_setup_teardown(test_restart_fails_then_next_step, setup, teardown),
		cmocka_unit_test_setup_teardown(test_output_between_steps_dropped, setup, teardown),
		cmocka_unit_test_setup_teardown(test_env_and_stdin_per_step, setup, teardown),
		cmocka_unit_test_setup_teardown(test_value_capped, setup, teardown),
		cmocka_unit_test_setup_teardown(test_files_out_per_step, setup, teardown),
		cmocka_unit_test_setup_teardown(test_kernel_cannot_start, setup, teardown),
		cmocka_unit_test_setup_teardown(test_planted_fifo, setup, teardown),
		cmocka_unit_test_setup_teardown(test_kernel_dies_forked_child, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bash_session, bash_setup, bash_teardown),
		cmocka_unit_test_setup_teardown(test_serve_state_across_steps, setup, teardown),
		cmocka_unit_test_setup_teardown(test_serve_streams_env_stdin, setup, teardown),
		cmocka_unit_test_setup_teardown(test_serve_timeout_keeps_state, setup, teardown),
		cmocka_unit_test_setup_teardown(test_serve_cancel_interrupts, setup, teardown),
		cmocka_unit_test_setup_teardown(test_serve_cancel_with_step, setup, teardown),
		cmocka_unit_test_setup_teardown(test_serve_malformed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_serve_eof_between_steps, setup, teardown),
		cmocka_unit_test_setup_teardown(test_serve_agent_gone, setup, teardown),
		cmocka_unit_test_setup_teardown(test_serve_bounds, setup, teardown),
	};

	return cmocka_run_group_tests(tests, group_setup, NULL);
}
