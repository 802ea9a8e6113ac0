/*
 * Unit tests: the zygote of a preload profile (images/runner/zygote.py,
 * docs/warm-path.md "The zygote") on the host's python3, driven by
 * /airlock/bin/warm (images/runner/warm.c, built for the host as
 * $(B)/images/warm) as the node agent's exec drives it in the sandbox:
 * the one-shot path (`warm BYTES python3 main.py`) and a session's
 * kernel (`warm --step`). What the child inherits (argv, __name__, cwd,
 * env, stdin, fds, signals), exit codes, the preloaded module not
 * imported again, a preload that fails, the code policy over a
 * preloaded denied module, a kernel restarted (two SPAWNs on one
 * zygote), and malformed requests, refused without harm to the zygote.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "buf.h"
#include "codetar.h"
#include "itutil.h"

static char warm[4096 + 16], zygote[4096 + 64], policy[4096 + 64],
    kernel[4096 + 64];

/* One zygote for a test: its directory (the socket, work dirs), its pid. */
struct zyg {
	char	dir[64];
	char	sock[96];
	pid_t	pid;
	int	runs;
	const char *deny;	/* the start command's DENIED (NULL: ftplib) */
};

static int
group_setup(void **state)
{
	char self[4096], top[4096], *d;
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

	(void)state;
	if (n <= 0)
		return -1;
	self[n] = '\0';
	snprintf(top, sizeof(top), "%s", self);
	for (int i = 0; i < 3; i++)	/* $(B)/tests/unit/x -> $(B) */
		if ((d = strrchr(self, '/')) != NULL)
			*d = '\0';
	snprintf(warm, sizeof(warm), "%s/images/warm", self);
	/* The source tree: the first directory above the test that holds it. */
	while ((d = strrchr(top, '/')) != NULL && d != top) {
		*d = '\0';
		snprintf(zygote, sizeof(zygote), "%s/images/runner/zygote.py", top);
		if (access(zygote, R_OK) == 0)
			break;
	}
	snprintf(policy, sizeof(policy), "%s/images/runner/policy.py", top);
	snprintf(kernel, sizeof(kernel), "%s/images/runner/kernel.py", top);
	return access(warm, X_OK) == 0 && access(zygote, R_OK) == 0 &&
	    access(policy, R_OK) == 0 && access(kernel, R_OK) == 0 ? 0 : -1;
}

static int
sock_there(void *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISSOCK(st.st_mode);
}

/*
 * Start a zygote preloading preload (its stderr to dir/zygote.log); as
 * the sandbox's init (pid 1 of a pid namespace of its own, as under
 * runsc) when init.
 */
static void
zyg_start_as(struct zyg *z, const char *preload, int init)
{
	char log[128];

	snprintf(log, sizeof(log), "%s/zygote.log", z->dir);
	z->pid = fork();
	assert_true(z->pid >= 0);
	if (z->pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);

		if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
			_exit(126);
		setenv("AIRLOCK_PRELOAD", preload, 1);
		setenv("AIRLOCK_ZYGOTE_SOCK", z->sock, 1);
		unsetenv("AIRLOCK_WARMUP");
		if (init)	/* killed with unshare (teardown's SIGKILL) */
			execlp("unshare", "unshare", "--pid", "--fork",
			    "--kill-child", "python3", "-I", zygote, "python3", "-I",
			    policy, z->deny ? z->deny : "ftplib", "main.py", (char *)NULL);
		else
			execlp("python3", "python3", "-I", zygote, "python3", "-I",
			    policy, z->deny ? z->deny : "ftplib", "main.py", (char *)NULL);
		_exit(127);
	}
	assert_true(it_wait_for(sock_there, z->sock, 20000));
}

static void
zyg_start(struct zyg *z, const char *preload)
{
	zyg_start_as(z, preload, 0);
}

static int
setup(void **state)
{
	struct zyg *z = calloc(1, sizeof(*z));

	snprintf(z->dir, sizeof(z->dir), "/tmp/airlock-zygote-test-XXXXXX");
	if (mkdtemp(z->dir) == NULL)
		return -1;
	snprintf(z->sock, sizeof(z->sock), "%s/z.sock", z->dir);
	*state = z;
	return 0;
}

static int
teardown(void **state)
{
	struct zyg *z = *state;
	char cmd[256], *o = NULL;
	int rc;

	if (z->pid > 0) {
		kill(z->pid, SIGKILL);
		waitpid(z->pid, NULL, 0);
	}
	/* A session's kernel, by its pid file. */
	snprintf(cmd, sizeof(cmd), "p=$(cat %s/session/kernel.pid 2>/dev/null) && "
	    "kill -9 -$p; rm -rf %s", z->dir, z->dir);
	rc = it_sh(cmd, &o, NULL);
	free(o);
	free(z);
	return rc == 0 ? 0 : -1;
}

/*
 * `warm BYTES ARGV` in a new work directory of z's (its path in wd when
 * not NULL): the tar of main.py (src), then in as the program's stdin,
 * with env (shell assignments, or "") in front. Its exit status; its
 * stdout and stderr, apart.
 */
static int
zrun(struct zyg *z, const char *env, const char *src, const char *in,
    const char *argv, char **out, char **err, char wd[128])
{
	const struct codetar_entry e[] = { { "main.py", src, strlen(src) } };
	char dir[128], path[160], cmd[16384];
	struct buf tar;
	size_t bad;
	FILE *f;

	snprintf(dir, sizeof(dir), "%s/w%d", z->dir, z->runs++);
	assert_int_equal(mkdir(dir, 0700), 0);
	if (wd != NULL)
		snprintf(wd, 128, "%s", dir);
	buf_init(&tar, 1 << 20);
	assert_int_equal(codetar_build(e, 1, &tar, &bad), 0);
	snprintf(path, sizeof(path), "%s.in", dir);
	assert_non_null(f = fopen(path, "w"));
	assert_int_equal(fwrite(tar.data, 1, tar.len, f), tar.len);
	fputs(in, f);
	assert_int_equal(fclose(f), 0);
	/* The redirect first: argv may end in more commands (a kill). */
	snprintf(cmd, sizeof(cmd), "cd %s && <%s %s AIRLOCK_ZYGOTE_SOCK=%s %s %zu %s",
	    dir, path, env, z->sock, warm, tar.len, argv);
	buf_free(&tar);
	return it_sh(cmd, out, err);
}

/*
 * The preloaded modules are the zygote's: in sys.modules at the
 * program's start, and its import of them finds nothing to load (a
 * finder first on sys.meta_path sees no lookup). Without the zygote
 * (no socket) warm runs python3 itself: the same program sees them
 * loaded anew.
 */
static const char reimport_py[] =
    "import sys\n"
    "pre = [m for m in ('decimal', 'json') if m in sys.modules]\n"
    "seen = []\n"
    "class F:\n"
    "    @staticmethod\n"
    "    def find_spec(name, path=None, target=None):\n"
    "        seen.append(name)\n"
    "sys.meta_path.insert(0, F)\n"
    "import decimal, json\n"
    "print(pre, [m for m in seen if m in ('decimal', 'json')])\n";

static void
test_preloaded_not_reimported(void **state)
{
	struct zyg *z = *state;
	char *out, *err;

	zyg_start(z, "decimal,json");
	assert_int_equal(zrun(z, "", reimport_py, "", "python3 main.py", &out,
	    &err, NULL), 0);
	assert_string_equal(out, "['decimal', 'json'] []\n");
	assert_string_equal(err, "");
	free(out);
	free(err);
	/* No zygote there: warm runs python3, which imports them. */
	kill(z->pid, SIGKILL);
	waitpid(z->pid, NULL, 0);
	z->pid = 0;
	unlink(z->sock);
	assert_int_equal(zrun(z, "", reimport_py, "", "python3 main.py", &out,
	    &err, NULL), 0);
	assert_string_equal(out, "[] ['decimal', 'json']\n");
	free(out);
	free(err);
}

/*
 * What the child gets: argv, __name__ and __file__, the working directory
 * and sys.path[0], exactly warm's environment, the rest of warm's stdin,
 * fds 0-2 and no other, a session of its own, and a fresh interpreter's
 * signal dispositions.
 */
static void
test_passthrough(void **state)
{
	static const char src[] =
	    "import os, signal, sys\n"
	    "print(sys.argv, __name__, __file__ == os.getcwd() + '/main.py')\n"
	    "print(os.getcwd() == sys.path[0], os.getcwd())\n"
	    "print(sorted(os.environ.items()))\n"
	    "print(repr(sys.stdin.read()))\n"
	    "def isopen(fd):\n"
	    "    try:\n"
	    "        os.fstat(fd)\n"
	    "        return True\n"
	    "    except OSError:\n"
	    "        return False\n"
	    "print([fd for fd in range(0, 1024) if isopen(fd)])\n"
	    "print(os.getsid(0) == os.getpid(), 'decimal' in sys.modules)\n"
	    "print(signal.getsignal(signal.SIGINT) is signal.default_int_handler,\n"
	    "      [signal.getsignal(s) for s in (signal.SIGPIPE, signal.SIGXFSZ,\n"
	    "       signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP)],\n"
	    "      signal.pthread_sigmask(signal.SIG_BLOCK, []))\n";
	struct zyg *z = *state;
	char *out, *err, wd[128], want[2048];

	zyg_start(z, "decimal");
	assert_int_equal(zrun(z, "env -i LANG=C.UTF-8 ZT_A='a b' PATH=/usr/bin:/bin",
	    src, "in-put\nrest", "python3 main.py one 'two words'", &out, &err,
	    wd), 0);
	snprintf(want, sizeof(want),
	    "['main.py', 'one', 'two words'] __main__ True\n"
	    "True %s\n"
	    "[('AIRLOCK_ZYGOTE_SOCK', '%s'), ('LANG', 'C.UTF-8'), "
	    "('PATH', '/usr/bin:/bin'), ('ZT_A', 'a b')]\n"
	    "'in-put\\nrest'\n"
	    "[0, 1, 2]\n"
	    "True True\n"
	    "True [<Handlers.SIG_IGN: 1>, <Handlers.SIG_IGN: 1>, "
	    "<Handlers.SIG_DFL: 0>, <Handlers.SIG_DFL: 0>, <Handlers.SIG_DFL: 0>] "
	    "set()\n", wd, z->sock);
	assert_string_equal(out, want);
	assert_string_equal(err, "");
	free(out);
	free(err);
}

/*
 * The two PYTHON* variables the child applies, as python3 does
 * (PYTHONUNBUFFERED: stdout and stderr raw, all written through, none
 * line-buffered; PYTHONDONTWRITEBYTECODE), and the -I form (no program
 * directory on sys.path), under either interpreter name.
 */
static void
test_flags_and_forms(void **state)
{
	static const char src[] =
	    "import os, sys\n"
	    "print([type(f.buffer).__name__ for f in (sys.stdin, sys.stdout, sys.stderr)],\n"
	    "      [(f.line_buffering, f.write_through) for f in (sys.stdin, sys.stdout, sys.stderr)],\n"
	    "      sys.dont_write_bytecode, os.getcwd() in sys.path, 'decimal' in sys.modules)\n";
	struct zyg *z = *state;
	char *out, *err;

	zyg_start(z, "decimal");
	assert_int_equal(zrun(z, "env -i LANG=C.UTF-8 PYTHONUNBUFFERED=1 "
	    "PYTHONDONTWRITEBYTECODE=1", src, "", "python3 main.py", &out, &err,
	    NULL), 0);
	assert_string_equal(out, "['BufferedReader', 'FileIO', 'FileIO'] "
	    "[(False, True), (False, True), (False, True)] True True True\n");
	free(out);
	free(err);
	assert_int_equal(zrun(z, "env -i LANG=C.UTF-8", src, "", "python -I main.py",
	    &out, &err, NULL), 0);
	assert_string_equal(out, "['BufferedReader', 'BufferedWriter', "
	    "'BufferedWriter'] [(False, False), (False, False), (True, False)] "
	    "False False True\n");
	free(out);
	free(err);
}

/* Exit statuses as python3's, and a traceback from the program's frame. */
static void
test_exit_codes(void **state)
{
	static const struct {
		const char	*src, *out, *err;
		int		 status;
	} c[] = {
		{ "print('ok')\n", "ok\n", "", 0 },
		{ "import sys\nprint('x', end='')\nsys.exit(3)\n", "x", "", 3 },
		{ "import sys\nsys.exit('bye')\n", "", "bye\n", 1 },
		{ "import sys\nsys.exit(256 + 7)\n", "", "", 7 },
		{ "print('before')\nraise ValueError('boom')\n", "before\n",
		  "Traceback (most recent call last):\n"
		  "  File \"@/main.py\", line 2, in <module>\n"
		  "    raise ValueError('boom')\n"
		  "ValueError: boom\n", 1 },
		{ "import os\nprint('flushed', flush=True)\nos.kill(os.getpid(), 9)\n",
		  "flushed\n", "", 137 },
		{ "raise KeyboardInterrupt\n", "",
		  "Traceback (most recent call last):\n"
		  "  File \"@/main.py\", line 1, in <module>\n"
		  "    raise KeyboardInterrupt\n"
		  "KeyboardInterrupt\n", 130 },
		{ "import atexit, threading, time\n"
		  "atexit.register(print, 'atexit')\n"
		  "threading.Thread(target=lambda: (time.sleep(0.2), print('thread'))).start()\n",
		  "thread\natexit\n", "", 0 },
	};
	struct zyg *z = *state;

	zyg_start(z, "json");
	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		char *out, *err, wd[128], want[1024];

		assert_int_equal(zrun(z, "", c[i].src, "", "python3 main.py", &out,
		    &err, wd), c[i].status);
		assert_string_equal(out, c[i].out);
		/* "@": the work directory. */
		{
			const char *at = strchr(c[i].err, '@');

			if (at == NULL)
				snprintf(want, sizeof(want), "%s", c[i].err);
			else
				snprintf(want, sizeof(want), "%.*s%s%s",
				    (int)(at - c[i].err), c[i].err, wd, at + 1);
		}
		assert_string_equal(err, want);
		free(out);
		free(err);
	}
	/* A program that is not there: python3's message and 2. */
	{
		char *out, *err, wd[128], want[1024];

		assert_int_equal(zrun(z, "", "", "", "python3 gone.py", &out, &err,
		    wd), 2);
		snprintf(want, sizeof(want), "python3: can't open file '%s/gone.py': "
		    "[Errno 2] No such file or directory\n", wd);
		assert_string_equal(out, "");
		assert_string_equal(err, want);
		free(out);
		free(err);
	}
}

/*
 * warm's side of a zygote's child: with AIRLOCK_OUT, its output, then
 * (once the child's group is killed: a process it left never writes
 * over the frame) the files out, and its status; the signals warm gets
 * go to the child.
 */
static void
test_files_out_and_signals(void **state)
{
	static const char files_py[] =
	    "import os, sys, time\n"
	    "os.makedirs(os.environ['ZT_OUT'], exist_ok=True)\n"
	    "open(os.environ['ZT_OUT'] + '/a.txt', 'w').write('xyz')\n"
	    "print('out', flush=True)\n"
	    "if os.fork() == 0:\n"
	    "    time.sleep(3)\n"
	    "    print('late', flush=True)\n"
	    "    os._exit(0)\n"
	    "sys.exit(7)\n";
	static const char term_py[] =
	    "import signal, sys, time\n"
	    "signal.signal(signal.SIGTERM, lambda s, f: (print('term', flush=True), sys.exit(5)))\n"
	    "print('ready', flush=True)\n"
	    "time.sleep(5)\n";
	struct zyg *z = *state;
	char env[512], *out, *err;
	const char *end;
	long t0;

	zyg_start(z, "decimal");
	snprintf(env, sizeof(env), "AIRLOCK_OUT='0123abcd 1000 4' "
	    "AIRLOCK_TEST_OUT=%s/out ZT_OUT=%s/out", z->dir, z->dir);
	t0 = it_mono_ms();
	assert_int_equal(zrun(z, env, files_py, "", "python3 main.py", &out, &err,
	    NULL), 7);
	assert_true(it_mono_ms() - t0 < 2500);
	assert_string_equal(err, "");
	assert_memory_equal(out, "out\n\x1e" "AIRLOCK-OUT 0123abcd ", 25);
	end = "\x1e" "AIRLOCK-END 0123abcd\n";
	assert_true(strlen(out) > strlen(end));
	assert_string_equal(out + strlen(out) - strlen(end), end);
	assert_null(strstr(out, "late"));
	free(out);
	free(err);
	/* SIGTERM to warm: the program's handler runs, its status is warm's. */
	assert_int_equal(zrun(z, "", term_py, "", "python3 main.py & "
	    "sleep 1; kill -TERM $!; wait $!; echo \"exit $?\"; :", &out, &err,
	    NULL), 0);
	assert_string_equal(out, "ready\nterm\nexit 5\n");
	free(out);
	free(err);
}

/*
 * The zygote gone while its child runs (in a pod, the container's end;
 * here only the zygote): warm kills the child's group and says so, 125.
 */
static void
test_zygote_gone(void **state)
{
	struct zyg *z = *state;
	char *out, *err;
	long t0;

	zyg_start(z, "decimal");
	t0 = it_mono_ms();
	/* Its group killed when the zygote went: long before its 30 s. */
	assert_int_equal(zrun(z, "", "import os, time\nos.kill(os.getppid(), 9)\n"
	    "time.sleep(30)\nprint('never')\n", "", "python3 main.py", &out, &err,
	    NULL), 125);
	if (it_mono_ms() - t0 >= 15000)
		fail_msg("warm took %ld ms to see the zygote gone", it_mono_ms() - t0);
	assert_string_equal(out, "");
	assert_string_equal(err, "warm: the zygote ended while the program ran: "
	    "its status is lost\n");
	free(out);
	free(err);
}

/* A preload or warm-up that fails: exit 3, one line why, never a socket. */
static void
test_preload_fails(void **state)
{
	struct zyg *z = *state;
	char cmd[8192], *out, *err;

	snprintf(cmd, sizeof(cmd), "{ AIRLOCK_ZYGOTE_SOCK=%s AIRLOCK_PRELOAD="
	    "json,airlock_no_such_module timeout 20 python3 -I %s; echo \"exit $?\"; }",
	    z->sock, zygote);
	assert_int_equal(it_sh(cmd, &out, &err), 0);
	assert_string_equal(out, "exit 3\n");
	assert_string_equal(err, "airlock: preload: airlock_no_such_module: "
	    "ModuleNotFoundError: No module named 'airlock_no_such_module'\n");
	assert_false(access(z->sock, F_OK) == 0);
	free(out);
	free(err);
	snprintf(cmd, sizeof(cmd), "{ AIRLOCK_ZYGOTE_SOCK=%s AIRLOCK_PRELOAD=json "
	    "AIRLOCK_WARMUP='x = 1\n1 / 0' timeout 20 python3 -I %s; echo \"exit $?\"; }",
	    z->sock, zygote);
	assert_int_equal(it_sh(cmd, &out, &err), 0);
	assert_string_equal(out, "exit 3\n");
	assert_string_equal(err, "airlock: preload: warm-up: ZeroDivisionError: "
	    "division by zero\n");
	assert_false(access(z->sock, F_OK) == 0);
	free(out);
	free(err);
}

/*
 * The code policy over a preloaded denied module (issue 31): absent from
 * sys.modules at the program's start, refused by import statement and
 * by importlib, exit 120; a preloaded allowed one stays.
 */
static void
test_policy_preloaded(void **state)
{
	struct zyg *z = *state;
	char *out, *err, argv[8192 + 64];

	z->deny = "subprocess,ftplib";
	zyg_start(z, "json,subprocess,venv");
	snprintf(argv, sizeof(argv), "python3 -I %s subprocess,ftplib main.py", policy);
	assert_int_equal(zrun(z, "", "import sys, importlib\n"
	    "print(sys.modules.get('subprocess'), 'json' in sys.modules, sys.argv)\n"
	    "importlib.import_module('subprocess')\nprint('reached')\n", "",
	    argv, &out, &err, NULL), 120);
	assert_string_equal(out, "None True ['main.py']\n");
	assert_string_equal(err, "airlock: policy: import of 'subprocess' refused "
	    "(at run time, main.py line 3)\n");
	free(out);
	free(err);
	assert_int_equal(zrun(z, "", "print('never')\nimport subprocess\n", "",
	    argv, &out, &err, NULL), 120);
	assert_string_equal(out, "");
	assert_string_equal(err, "airlock: policy: import of 'subprocess' refused "
	    "(main.py line 2)\n");
	free(out);
	free(err);
	/* What it allows runs, from the zygote. */
	assert_int_equal(zrun(z, "", "import sys, json\nprint(json.dumps([1]), "
	    "'subprocess' in sys.modules)\n", "", argv, &out, &err, NULL), 0);
	assert_string_equal(out, "[1] False\n");
	assert_string_equal(err, "");
	free(out);
	free(err);
	/*
	 * A library the program imports that imports it (webbrowser) gets the
	 * zygote's copy, the one a preloaded library (venv) holds.
	 */
	assert_int_equal(zrun(z, "", "import sys, venv, webbrowser\n"
	    "print(vars(webbrowser)['sub' + 'process'] is vars(venv)['sub' + "
	    "'process'], 'subprocess' in sys.modules)\n", "", argv, &out, &err,
	    NULL), 0);
	assert_string_equal(out, "True False\n");
	assert_string_equal(err, "");
	free(out);
	free(err);
}

/*
 * A session's kernel from the zygote, restarted after sys.exit by a
 * second SPAWN on the same zygote: each kernel is the zygote's child,
 * with the module preloaded, and the second is a new process.
 */
static void
test_kernel_restart(void **state)
{
	struct zyg *z = *state;
	static const char src[] = "import os, sys\n"
	    "print('decimal' in sys.modules, os.getppid(), os.getpid())\nsys.exit(0)\n";
	const struct codetar_entry e = { "main.py", src, sizeof(src) - 1 };
	char cmd[16384], *out, *err, zp[32], first[64] = "";
	struct buf tar;
	size_t bad;
	FILE *f;

	zyg_start(z, "decimal");
	snprintf(zp, sizeof(zp), "%d", (int)z->pid);
	buf_init(&tar, 1 << 20);
	assert_int_equal(codetar_build(&e, 1, &tar, &bad), 0);
	snprintf(cmd, sizeof(cmd), "%s/step.tar", z->dir);
	assert_non_null(f = fopen(cmd, "w"));
	assert_int_equal(fwrite(tar.data, 1, tar.len, f), tar.len);
	assert_int_equal(fclose(f), 0);
	buf_free(&tar);
	for (int step = 0; step < 2; step++) {
		char want[64];
		const char *sp;

		snprintf(cmd, sizeof(cmd), "mkdir -p %s/swork && cd %s/swork && "
		    "AIRLOCK_ZYGOTE_SOCK=%s AIRLOCK_SESSION_DIR=%s/session "
		    "AIRLOCK_TEST_OUT=%s/out AIRLOCK_OUT='0123abcd 1000 1' "
		    "%s --step - 20000 1000 main.py python3 %s <%s/step.tar",
		    z->dir, z->dir, z->sock, z->dir, z->dir, warm, kernel, z->dir);
		assert_int_equal(it_sh(cmd, &out, &err), 0);
		/* "True ZYGOTE_PID KERNEL_PID", then the files-out frame. */
		snprintf(want, sizeof(want), "True %s ", zp);
		assert_memory_equal(out, want, strlen(want));
		sp = out + strlen(want);
		if (step == 0)
			snprintf(first, sizeof(first), "%.*s", (int)strcspn(sp, "\n"), sp);
		else
			assert_true(strncmp(sp, first, strlen(first)) != 0 ||
			    sp[strlen(first)] != '\n');
		assert_non_null(strstr(out, "\x1e" "AIRLOCK-OUT 0123abcd "));
		free(out);
		free(err);
	}
}

/*
 * The zygote keeps what it is given (the hostile review of issue 31):
 * a request naming a policy.py other than the one it loaded at its start
 * (never loaded into the zygote), or it with another list of denied
 * modules, is refused: warm runs the program itself, the preloaded module
 * not there; and as the sandbox's init, a
 * program's SIGINT to it (which Python would raise as KeyboardInterrupt)
 * is ignored: it serves the next program.
 */
static void
test_zygote_kept(void **state)
{
	struct zyg *z = *state;
	char *out, *err, argv[8192 + 64], cmd[8192 + 256];

	zyg_start_as(z, "decimal", 1);
	snprintf(cmd, sizeof(cmd), "cp %s %s/policy.py", policy, z->dir);
	assert_int_equal(it_sh(cmd, &out, NULL), 0);
	free(out);
	snprintf(argv, sizeof(argv), "python3 -I %s/policy.py ftplib main.py", z->dir);
	assert_int_equal(zrun(z, "", "import sys\nprint('decimal' in sys.modules)\n",
	    "", argv, &out, &err, NULL), 0);
	assert_string_equal(out, "False\n");
	assert_string_equal(err, "");
	free(out);
	free(err);
	/* Its policy.py with another list (none): refused the same way. */
	snprintf(argv, sizeof(argv), "python3 -I %s '' main.py", policy);
	assert_int_equal(zrun(z, "", "import sys\nprint('decimal' in sys.modules)\n",
	    "", argv, &out, &err, NULL), 0);
	assert_string_equal(out, "False\n");
	free(out);
	free(err);
	/* Its own policy.py: the zygote's child. */
	snprintf(argv, sizeof(argv), "python3 -I %s ftplib main.py", policy);
	assert_int_equal(zrun(z, "", "import os, signal, sys\n"
	    "print('decimal' in sys.modules, os.getppid())\n"
	    "os.kill(1, signal.SIGINT)\n", "", argv, &out, &err, NULL), 0);
	assert_string_equal(out, "True 1\n");
	free(out);
	free(err);
	assert_int_equal(zrun(z, "", "import sys\nprint('decimal' in sys.modules)\n",
	    "", argv, &out, &err, NULL), 0);
	assert_string_equal(out, "True\n");
	free(out);
	free(err);
}

/*
 * A zygote that takes the request and gives no PID (it went, or answered
 * something else): it may have forked the program, so warm does not run
 * it again: exit 125 and why, the program's output never there. ERR
 * alone means nothing ran (test_malformed: warm runs it).
 */
static void
test_no_pid_not_run_again(void **state)
{
	static const char *const answer[] = { "", "HELLO\n", "PID 2147483648\n" };
	struct zyg *z = *state;

	for (size_t i = 0; i < sizeof(answer) / sizeof(answer[0]); i++) {
		struct sockaddr_un sa = { .sun_family = AF_UNIX };
		int l = socket(AF_UNIX, SOCK_STREAM, 0), st;
		char *out, *err;
		pid_t srv;

		unlink(z->sock);
		snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", z->sock);
		assert_int_equal(bind(l, (struct sockaddr *)&sa, sizeof(sa)), 0);
		assert_int_equal(listen(l, 4), 0);
		if ((srv = fork()) == 0) {
			char b[4096];
			int c = accept(l, NULL, NULL);

			/* The request's line and body, then the answer. */
			usleep(200 * 1000);
			(void)read(c, b, sizeof(b));
			(void)write(c, answer[i], strlen(answer[i]));
			_exit(0);
		}
		close(l);
		assert_int_equal(zrun(z, "", "print('ran')\n", "", "python3 main.py",
		    &out, &err, NULL), 125);
		assert_string_equal(out, "");
		assert_string_equal(err, "warm: the zygote gave no pid for the "
		    "program: it may have started, and is not run again\n");
		free(out);
		free(err);
		assert_int_equal(waitpid(srv, &st, 0), srv);
	}
}

/* What a socket answers to req: all of it, up to its EOF (caller frees). */
static char *
ask(const char *sock, const void *req, size_t n)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char *buf = calloc(1, 4096);
	size_t got = 0;
	ssize_t r;
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(write(fd, req, n), (ssize_t)n);
	while (got < 4095 && (r = read(fd, buf + got, 4095 - got)) > 0)
		got += (size_t)r;
	close(fd);
	return buf;
}

/*
 * Malformed requests: refused, "ERR why" and closed, the zygote still
 * serving; an argv it cannot run as python3 would: refused, and warm
 * runs the program itself.
 */
static void
test_malformed(void **state)
{
	static const struct {
		const char	*req;
		size_t		 n;
		const char	*answer;
	} c[] = {
		{ "HELLO\n", 6, "ERR the request is not 'SPAWN ARGC ENVC LEN'\n" },
		{ "SPAWN 1 0\n", 10, "ERR the request is not 'SPAWN ARGC ENVC LEN'\n" },
		{ "SPAWN 1 0 262145\n", 17, "ERR ARGC, ENVC or LEN is out of bounds\n" },
		{ "SPAWN 0 0 2\n/\0", 14, "ERR ARGC, ENVC or LEN is out of bounds\n" },
		{ "SPAWN 1 0 4097 x\n", 17, "ERR the request is not 'SPAWN ARGC ENVC LEN'\n" },
		{ "SPAWN 1 0 10\npython3\0/\0", 23, "ERR the request has 0 fds, not 3\n" },
		{ "SPAWN 1 0 2\n/\0xx", 16, "ERR bytes follow the request\n" },
		{ "SPAWN1111111111111111111111111111111111111111111111111111111111111111",
		  69, "ERR the request line is over 64 bytes\n" },
	};
	struct zyg *z = *state;
	char *out, *err;

	zyg_start(z, "decimal");
	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		char *a = ask(z->sock, c[i].req, c[i].n);

		assert_string_equal(a, c[i].answer);
		free(a);
	}
	/* Refused by the zygote, run by warm: decimal not loaded. */
	assert_int_equal(zrun(z, "", "import sys\nprint('decimal' in sys.modules)\n",
	    "", "python3 -B main.py", &out, &err, NULL), 0);
	assert_string_equal(out, "False\n");
	free(out);
	free(err);
	assert_int_equal(zrun(z, "PYTHONPATH=/nonexistent",
	    "import sys\nprint('decimal' in sys.modules)\n", "", "python3 main.py",
	    &out, &err, NULL), 0);
	assert_string_equal(out, "False\n");
	free(out);
	free(err);
	/* And the zygote still serves. */
	assert_int_equal(zrun(z, "", "import sys\nprint('decimal' in sys.modules)\n",
	    "", "python3 main.py", &out, &err, NULL), 0);
	assert_string_equal(out, "True\n");
	assert_int_equal(kill(z->pid, 0), 0);
	free(out);
	free(err);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_preloaded_not_reimported, setup, teardown),
		cmocka_unit_test_setup_teardown(test_passthrough, setup, teardown),
		cmocka_unit_test_setup_teardown(test_flags_and_forms, setup, teardown),
		cmocka_unit_test_setup_teardown(test_exit_codes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_files_out_and_signals, setup, teardown),
		cmocka_unit_test_setup_teardown(test_zygote_gone, setup, teardown),
		cmocka_unit_test_setup_teardown(test_preload_fails, setup, teardown),
		cmocka_unit_test_setup_teardown(test_policy_preloaded, setup, teardown),
		cmocka_unit_test_setup_teardown(test_kernel_restart, setup, teardown),
		cmocka_unit_test_setup_teardown(test_malformed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_zygote_kept, setup, teardown),
		cmocka_unit_test_setup_teardown(test_no_pid_not_run_again, setup,
		    teardown),
	};

	return cmocka_run_group_tests(tests, group_setup, NULL);
}
