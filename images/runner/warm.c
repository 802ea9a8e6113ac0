/*
 * warm.c - /airlock/bin/warm, the process a warm run execs into its
 * sandbox (docs/warm-path.md): it unpacks the program and its files from
 * the tar on its standard input into the working directory, then becomes
 * the program. What `run --warm` does with sh, head and tar, in one
 * static process: the two processes fewer cost about 30 ms a run under
 * gVisor on the test node.
 *
 *   warm BYTES PROGRAM [ARG...]   the first BYTES of stdin are the tar;
 *                                 the rest is the program's stdin
 *   warm - PROGRAM [ARG...]       stdin is the tar alone; the program
 *                                 reads /dev/null
 *   warm --env N PROGRAM [ARG...] a direct pod's (execution/podspec.h):
 *                                 the tar is base64 in env vars
 *                                 AIRLOCK_TAR_0 .. AIRLOCK_TAR_<N-1>,
 *                                 removed before the program runs; a
 *                                 .stdin it holds is the program's stdin
 *                                 (unlinked first), else /dev/null
 *   warm --run PROGRAM [ARG...]   nothing to unpack (run's volume pods):
 *                                 only the files out below
 *
 * Files out (execution/artifacts.h): with AIRLOCK_OUT set ("NONCE
 * MAXBYTES MAXFILES", removed before the program runs), the program runs
 * as a child in a process group of its own, with /airlock/out (a symlink
 * to /dev/shm/airlock-out in the runner images: a tmpfs, and not the
 * working directory, which is /tmp in a direct pod) made first. When it has
 * exited, what is left of its group is killed, and the regular files
 * under /airlock/out, by path, as many as MAXFILES and MAXBYTES allow,
 * are written to standard output after everything the program wrote,
 * framed so that the node agent takes them out of the stream:
 *
 *   "\x1e" "AIRLOCK-OUT " NONCE " " LEN "\n"  LEN bytes: a ustar, in base64
 *   "\x1e" "AIRLOCK-END " NONCE "\n"
 *
 * The archive's last entry, ".airlock-dropped", lists what was left out,
 * a line each: "SIZE<TAB>REASON<TAB>PATH". Then warm exits with the
 * program's status (128 + the signal that killed it). Without
 * AIRLOCK_OUT it becomes the program, as before.
 *
 * The archive is execution/codetar.h's: ustar, regular files only, paths
 * relative. Anything else (another entry type, an absolute path, a ".."
 * or empty component, a path through a symlink, a file there already) is
 * refused: exit 125 with a message on stderr, and the program never runs.
 * Static (gcc -static), so it needs nothing of the image but a kernel.
 *
 * The zygote (a preload profile's holder, images/runner/zygote.py, whose
 * header is the protocol's reference; docs/warm-path.md): when PROGRAM's
 * basename is python3 or python and a socket is at $AIRLOCK_ZYGOTE_SOCK
 * (/dev/shm/airlock-zygote.sock), `warm BYTES|-` and a session's kernel
 * start ask the zygote to fork the program instead of exec'ing it:
 *
 *   -> "SPAWN ARGC ENVC LEN\n" + LEN bytes (argv, env, cwd, each ended by
 *      a NUL; at most 256 KiB, 4096 args, 4096 env entries), with fds
 *      0, 1, 2 (a kernel's: /dev/null and its log) as SCM_RIGHTS
 *   <- "PID N\n", later "EXIT S\n" (S: the exit code, 128 + a signal)
 *   <- "ERR why\n": refused, nothing ran
 *
 * warm then stays: it forwards the signals it gets to the child's group,
 * waits for EXIT and exits with S (the files out first, with AIRLOCK_OUT,
 * after the group is killed, as with a child of its own). No socket, a
 * refused connect, a request over the bounds or not sent whole, or an
 * ERR: the program is exec'd as without a zygote. A request sent whole
 * and no PID answer (EOF, another line, or none within 10 s): the zygote
 * may have forked it, so it is not run again: exit 125 and why on
 * stderr. The zygote gone after PID: the child's group killed, exit 125
 * and why on stderr.
 *
 * warm --serve KERNEL [ARG...] (docs/sessions.md, "The step server: one
 * exec a session") runs a session's steps as `warm --step` does (step_run,
 * below), one after another, for as long as its stdin is open: one exec a
 * session, not one a step. Requests on stdin, one at a time:
 *
 *   "STEP SEQ LIMIT TIMEOUT_MS GRACE_MS CODE ENVLEN BODYLEN\n"
 *       then ENVLEN bytes: the step's environment, "NAME=VALUE\0" each
 *       (AIRLOCK_OUT among them: the step's files-out nonce and limits),
 *       then BODYLEN bytes: what --step reads on its stdin (the archive;
 *       when LIMIT is not "-", its first LIMIT bytes, the rest the
 *       program's stdin)
 *   "CANCEL SEQ\n"  while step SEQ runs: interrupted as --step's SIGTERM;
 *       a cancel of a step that is not running (it just ended) is ignored
 *
 * Answers on stdout, records: "O LEN\n" + LEN bytes (the program's stdout,
 * the files-out frame inside it, byte for byte what --step writes on fd 1),
 * "E LEN\n" + LEN bytes (its stderr, and warm's own messages), then
 * "X SEQ STATUS\n" (STATUS what --step exits with). Bounds: a line 256
 * bytes with its newline, ENVLEN 256 KiB, BODYLEN MAX_TOTAL. Anything
 * else (a bad line, a field out of bounds, a refused archive, another
 * line while a step runs) is answered "E" why, "X SEQ 125" (SEQ 0 when
 * there is none), and the server exits 125: it never guesses where the
 * next request starts. EOF between steps: exit 0, the kernel left
 * running for the next server or --step. EOF while a step runs (the
 * agent is gone): the step ends as it would, its output dropped, then
 * exit 0.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define BLOCK		512
#define MAX_TOTAL	(64L << 20)	/* more than any execution may carry */

/* --- output: raw fds 1 and 2, or --serve's records ---------------------- */

/*
 * serving: --serve, whose stdout carries records (see the top) and whose
 * step stdout and stderr go in them. out_lost: its stdout is gone (the
 * agent is), and output is dropped: the step still ends as it should.
 * serve_seq: the request being run, for die's answer (0: none).
 */
static int serving, out_lost;
static unsigned long long serve_seq;

/* Write all n bytes to fd: 0, or -1 (the reader is gone). */
static int
write_all(int fd, const void *p, size_t n)
{
	const char *c = p;

	while (n > 0) {
		ssize_t w = write(fd, c, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		c += w;
		n -= (size_t)w;
	}
	return 0;
}

/*
 * n bytes of the step's stream fd (1: stdout, 2: stderr). --step: to that
 * fd, exiting 125 if it is gone (nobody to tell). --serve: one record.
 */
static void
emit(int fd, const void *p, size_t n)
{
	char h[32];

	if (!serving) {
		if (write_all(fd, p, n) != 0)
			exit(125);
		return;
	}
	if (out_lost || n == 0)
		return;
	snprintf(h, sizeof(h), "%c %zu\n", fd == 1 ? 'O' : 'E', n);
	if (write_all(1, h, strlen(h)) != 0 || write_all(1, p, n) != 0)
		out_lost = 1;
}

static void emitf(int fd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* A message of warm's own on the step's stream fd: 4 KiB (a kernel log's 2 fit). */
static void
emitf(int fd, const char *fmt, ...)
{
	char buf[4096];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n > 0)
		emit(fd, buf, (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1);
}

/* --serve: the end of request seq, with its status. */
static void
serve_end(unsigned long long seq, int status)
{
	char x[64];

	snprintf(x, sizeof(x), "X %llu %d\n", seq, status);
	if (!out_lost && write_all(1, x, strlen(x)) != 0)
		out_lost = 1;
}

static void die(const char *fmt, ...)
    __attribute__((format(printf, 1, 2), noreturn));

/*
 * Refuse, exit 125, why on stderr. Under --serve the request in hand (or
 * the stream: seq 0) is answered so, and the server goes: its input can
 * no longer be trusted to be where a request starts.
 */
static void
die(const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (serving) {
		emitf(2, "warm: %s\n", msg);
		serve_end(serve_seq, 125);
	} else
		fprintf(stderr, "warm: %s\n", msg);
	exit(125);
}

/*
 * An execution with egress (docs/network.md, "The start gate"): its
 * program waits until its NetworkPolicy is seen in force and its byte
 * quota in place, as run's cold form does; a direct pod (--env) never
 * goes through run. The variable holds gate --wait's arguments, "OPEN
 * METERED CLOSED SECONDS IP [IP...]" (at most 12 words: 8 addresses).
 * Not in force in time: gate has said why on stderr, and the program
 * never runs.
 */
#ifndef GATE_BIN
#define GATE_BIN "/airlock/bin/gate"
#endif
static void
egress_gate(void)
{
	const char *v = getenv("AIRLOCK_EGRESS_GATE");
	char buf[512], *args[16], *save = NULL, *t;
	int n = 0, status;
	pid_t pid;

	if (v == NULL || *v == '\0')
		return;
	if (strlen(v) >= sizeof(buf))
		die("%s", "AIRLOCK_EGRESS_GATE is too long");
	strcpy(buf, v);
	args[n++] = GATE_BIN;
	args[n++] = "--wait";
	for (t = strtok_r(buf, " ", &save); t != NULL; t = strtok_r(NULL, " ",
	    &save)) {
		if (n == (int)(sizeof(args) / sizeof(args[0])) - 1)
			die("%s", "AIRLOCK_EGRESS_GATE has too many words");
		args[n++] = t;
	}
	args[n] = NULL;
	if ((pid = fork()) < 0)
		die("cannot start the egress gate: %s", strerror(errno));
	if (pid == 0) {
		execv(args[0], args);
		fprintf(stderr, "warm: cannot run %s: %s\n", args[0],
		    strerror(errno));
		_exit(125);
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			die("cannot wait for the egress gate: %s", strerror(errno));
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		exit(125);
}

/* The archive in memory (warm --env): read_full's fd -1. */
static const unsigned char *mem;
static size_t mem_len, mem_off;

/*
 * The step's input, fd 0: through inb first (what --serve read past a
 * request's line), at most in_left bytes (-1: to EOF, --step's stdin).
 */
static char inb[4096];
static size_t inb_pos, inb_len;
static long long in_left = -1;

static ssize_t
in_read(void *buf, size_t n)
{
	ssize_t r;

	if (in_left >= 0 && (long long)n > in_left)
		n = (size_t)in_left;
	if (n == 0)
		return 0;
	if (inb_pos < inb_len) {
		r = (ssize_t)(inb_len - inb_pos < n ? inb_len - inb_pos : n);
		memcpy(buf, inb + inb_pos, (size_t)r);
		inb_pos += (size_t)r;
	} else
		while ((r = read(0, buf, n)) < 0 && errno == EINTR)
			;
	if (r > 0 && in_left >= 0)
		in_left -= r;
	return r;
}

/* Read exactly n bytes (fewer at EOF): the count read. fd 0: in_read. */
static size_t
read_full(int fd, void *buf, size_t n)
{
	size_t got = 0;
	ssize_t r;

	if (fd < 0) {
		got = mem_len - mem_off < n ? mem_len - mem_off : n;
		memcpy(buf, mem + mem_off, got);
		mem_off += got;
		return got;
	}

	while (got < n) {
		r = fd == 0 ? in_read((char *)buf + got, n - got) :
		    read(fd, (char *)buf + got, n - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	return got;
}

/*
 * Open a regular file (flags as open's, O_CREAT's mode): never a symlink,
 * and never a FIFO or device, which the session's own code could have put
 * in its place and whose open would block. -1 otherwise.
 */
static int
open_reg(const char *path, int flags, mode_t mode)
{
	int fd = open(path, flags | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC, mode);
	struct stat st;

	if (fd < 0)
		return -1;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
	    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0) {
		close(fd);
		errno = EINVAL;
		return -1;
	}
	return fd;
}

/* An octal field of a header: its value, or -1. */
static long
octal(const char *p, size_t n)
{
	long v = 0;
	size_t i = 0;

	while (i < n && p[i] == ' ')
		i++;
	if (i == n || p[i] < '0' || p[i] > '7')
		return -1;
	for (; i < n && p[i] >= '0' && p[i] <= '7'; i++) {
		if (v > MAX_TOTAL)
			return -1;
		v = v * 8 + (p[i] - '0');
	}
	return v;
}

/* A path as the archive may hold it: relative, no "", "." or "..". */
static int
safe_path(const char *p)
{
	const char *s = p, *e;

	if (*p == '\0' || *p == '/')
		return 0;
	for (;;) {
		e = strchr(s, '/');
		if (e == NULL)
			e = s + strlen(s);
		if (e == s || (e - s == 1 && s[0] == '.') ||
		    (e - s == 2 && s[0] == '.' && s[1] == '.'))
			return 0;
		if (*e == '\0')
			return 1;
		s = e + 1;
	}
}

/* Make the directories of path, as mkdir -p, none through a symlink. */
static void
parents(char *path)
{
	struct stat st;

	for (char *s = strchr(path, '/'); s; s = strchr(s + 1, '/')) {
		*s = '\0';
		if (mkdir(path, 0755) != 0 && (errno != EEXIST ||
		    lstat(path, &st) != 0 || !S_ISDIR(st.st_mode)))
			die("cannot make directory %s", path);
		*s = '/';
	}
}

/*
 * A session step's unpack (warm --step): the entry named step_code goes to
 * step_code_path instead, and a file already there is replaced (unlinked
 * first; never written through a symlink, never a directory).
 */
static const char *step_code, *step_code_path;
static int replace_files;

/* Unpack the archive from fd, at most limit bytes (-1: to its end). */
static void
unpack(int fd, long limit)
{
	char h[BLOCK], name[256 + 1], buf[65536];
	long total = 0;

	for (;;) {
		long size, left;
		size_t plen, nlen;
		int out;

		if (limit >= 0 && total + BLOCK > limit)
			break;		/* BYTES ended without the end blocks */
		if (read_full(fd, h, BLOCK) != BLOCK)
			die("%s", "the archive ends in a header");
		total += BLOCK;
		if (h[0] == '\0') {
			/* The end: a zero block (two, the second read too). */
			if (limit >= 0 && total + BLOCK <= limit) {
				if (read_full(fd, h, BLOCK) != BLOCK)
					die("%s", "the archive ends early");
				total += BLOCK;
			}
			break;
		}
		if (h[156] != '0' && h[156] != '\0')
			die("%s", "the archive holds something other than a file");
		plen = strnlen(h + 345, 155);
		nlen = strnlen(h, 100);
		if (plen)
			snprintf(name, sizeof(name), "%.*s/%.*s", (int)plen, h + 345,
			    (int)nlen, h);
		else
			snprintf(name, sizeof(name), "%.*s", (int)nlen, h);
		if (!safe_path(name))
			die("refused path '%s'", name);
		if ((size = octal(h + 124, 12)) < 0 || total + size > MAX_TOTAL ||
		    (limit >= 0 && total + size > limit))
			die("bad size for '%s'", name);
		if (step_code != NULL && strcmp(name, step_code) == 0) {
			(void)unlink(step_code_path);
			out = open(step_code_path, O_WRONLY | O_CREAT | O_EXCL |
			    O_NOFOLLOW | O_CLOEXEC, 0600);
		} else {
			struct stat st;

			parents(name);
			if (replace_files && lstat(name, &st) == 0 &&
			    !S_ISDIR(st.st_mode) && unlink(name) != 0)
				die("cannot replace '%s'", name);
			out = open(name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
			    O_CLOEXEC, 0644);
		}
		if (out < 0)
			die("cannot create '%s'", name);
		for (left = size; left > 0;) {
			size_t want = left < (long)sizeof(buf) ? (size_t)left :
			    sizeof(buf), got = read_full(fd, buf, want);

			if (got != want)
				die("'%s' is cut short", name);
			if (write(out, buf, got) != (ssize_t)got)
				die("cannot write '%s'", name);
			left -= (long)got;
		}
		if (close(out) != 0)
			die("cannot write '%s'", name);
		total += size;
		if (size % BLOCK) {
			size_t pad = BLOCK - (size_t)(size % BLOCK);

			if (read_full(fd, buf, pad) != pad)
				die("'%s' is cut short", name);
			total += (long)pad;
		}
	}
	/* BYTES said more than the archive: it is read, not left to the program. */
	while (limit >= 0 && total < limit) {
		size_t want = limit - total < (long)sizeof(buf) ?
		    (size_t)(limit - total) : sizeof(buf);

		if (read_full(fd, buf, want) != want)
			die("%s", "stdin ends before BYTES");
		total += (long)want;
	}
}

static int
b64val(int c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	return c == '+' ? 62 : c == '/' ? 63 : -1;
}

/*
 * warm --env N: decode AIRLOCK_TAR_0 .. N-1 (one base64 text, cut in
 * pieces anywhere) into mem, and unset them.
 */
static void
from_env(const char *count)
{
	unsigned char *out;
	size_t cap = 0, len = 0;
	unsigned long acc = 0;
	int bits = 0, pad = 0;
	char *end, name[48];
	long n;

	errno = 0;
	n = strtol(count, &end, 10);
	if (errno || *end || end == count || n < 1 || n > 1024)
		die("'%s' is not a count of env vars", count);
	for (long i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "AIRLOCK_TAR_%ld", i);
		const char *v = getenv(name);

		if (v == NULL)
			die("%s is not set", name);
		cap += strlen(v);
	}
	if (cap / 4 * 3 > MAX_TOTAL || (out = malloc(cap / 4 * 3 + 3)) == NULL)
		die("%s", "the archive is too big");
	for (long i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "AIRLOCK_TAR_%ld", i);
		for (const char *v = getenv(name); *v; v++) {
			int d;

			if (*v == '=') {
				pad++;
				continue;
			}
			if (pad || (d = b64val((unsigned char)*v)) < 0)
				die("%s is not base64", name);
			acc = acc << 6 | (unsigned long)d;
			if ((bits += 6) >= 8) {
				bits -= 8;
				out[len++] = (unsigned char)(acc >> bits);
			}
		}
		unsetenv(name);
	}
	if (pad > 2)
		die("%s", "the archive is not base64");
	mem = out;
	mem_len = len;
}

/*
 * Become the program argv[0..]: with fd (when not -1) as its standard
 * input. Returns only when it cannot be run: 127, as a shell does.
 */
static int
become(int fd, char **argv)
{
	if (fd >= 0) {
		if (dup2(fd, 0) < 0)
			die("%s", "cannot set stdin");
		if (fd > 0)
			close(fd);
	}
	execvp(argv[0], argv);
	fprintf(stderr, "warm: cannot run %s: %s\n", argv[0], strerror(errno));
	return 127;
}

/* --- files out ----------------------------------------------------------- */

#define OUT_ENV		"AIRLOCK_OUT"
#ifndef OUT_DIR		/* the unit tests' build sets its own */
#define OUT_DIR		"/airlock/out"	/* -> OUT_REAL in the runner images */
#define OUT_REAL	"/dev/shm/airlock-out"
#endif
#define OUT_DIR_MAX	128
/* The unit tests' build (WARM_TEST) takes both from AIRLOCK_TEST_OUT. */
static const char *out_dir = OUT_DIR, *out_real = OUT_REAL;
#define OUT_DROPPED	".airlock-dropped"
#define OUT_MAX_WALK	4096	/* entries looked at, files and directories */
#define OUT_MAX_DEPTH	16
#define OUT_PATH_MAX	255	/* what a ustar name and prefix hold */
#define OUT_MAX_LISTED	180	/* lines of the left-out list */

struct outfile {
	char		*path;		/* relative to OUT_DIR */
	long long	 size;
	const char	*why;		/* NULL: sent; else why it was left out */
};

static struct outfile *outs;
static size_t nouts, aouts, walked;

/* Entries of the archive made here, not files (a session step's report). */
struct extra {
	const char	*name;
	const char	*data;
	size_t		 len;
};
static struct extra extras[2];
static size_t nextras;
static char out_nonce[65];
static long long out_max_bytes, out_max_files;

static void
out_add(const char *path, long long size, const char *why)
{
	if (nouts == aouts) {
		aouts = aouts ? aouts * 2 : 32;
		if ((outs = realloc(outs, aouts * sizeof(*outs))) == NULL)
			die("%s", "out of memory");
	}
	if ((outs[nouts].path = strdup(path)) == NULL)
		die("%s", "out of memory");
	outs[nouts].size = size;
	outs[nouts++].why = why;
}

/* A name the archive, a status and a terminal can show: printable ASCII. */
static int
out_name_ok(const char *p)
{
	for (; *p; p++)
		if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f ||
		    *p == '\\')
			return 0;
	return 1;
}

/* Every entry under OUT_DIR/rel (rel "" at the top), depth first. */
static void
out_walk(const char *rel, int depth)
{
	char dir[OUT_PATH_MAX + OUT_DIR_MAX + 2], path[OUT_PATH_MAX + 1];
	struct dirent *e;
	struct stat st;
	DIR *d;

	snprintf(dir, sizeof(dir), "%s%s%s", out_dir, *rel ? "/" : "", rel);
	if ((d = opendir(dir)) == NULL)
		return;
	while ((e = readdir(d)) != NULL) {
		int n;

		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		n = snprintf(path, sizeof(path), "%s%s%s", rel, *rel ? "/" : "",
		    e->d_name);
		if (++walked > OUT_MAX_WALK) {
			out_add(n < (int)sizeof(path) ? path : e->d_name, -1,
			    "past the 4096 entries looked at");
			break;
		}
		if (n >= (int)sizeof(path)) {
			out_add(e->d_name, -1, "its path is over 255 bytes");
			continue;
		}
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
			continue;
		if (S_ISDIR(st.st_mode)) {
			if (depth >= OUT_MAX_DEPTH)
				out_add(path, -1, "nested over 16 directories deep");
			else
				out_walk(path, depth + 1);
		} else if (!S_ISREG(st.st_mode))
			out_add(path, -1, "not a regular file");
		else if (!out_name_ok(path))
			out_add("(a name that is not printable ASCII)", st.st_size,
			    "its name is not printable ASCII");
		else if (depth == 0 && strcmp(path, OUT_DROPPED) == 0)
			out_add(path, st.st_size, "the name is the list of left-out files'");
		else
			out_add(path, st.st_size, NULL);
	}
	closedir(d);
}

static int
out_cmp(const void *a, const void *b)
{
	return strcmp(((const struct outfile *)a)->path,
	    ((const struct outfile *)b)->path);
}


/*
 * The archive goes out in base64: the CRI log a cold run's stdout passes
 * through drops a CR before an LF (containerd's line reader), and a PNG
 * starts with one.
 */
static unsigned char b64_in[3];
static size_t b64_have;
static char b64_buf[65536];
static size_t b64_len;

static void
b64_flush(void)
{
	emit(1, b64_buf, b64_len);
	b64_len = 0;
}

static void
b64_group(const unsigned char *g, size_t n)
{
	static const char abc[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	unsigned v = (unsigned)g[0] << 16 | (n > 1 ? (unsigned)g[1] << 8 : 0) |
	    (n > 2 ? g[2] : 0);

	if (b64_len + 4 > sizeof(b64_buf))
		b64_flush();
	b64_buf[b64_len++] = abc[v >> 18];
	b64_buf[b64_len++] = abc[(v >> 12) & 63];
	b64_buf[b64_len++] = n > 1 ? abc[(v >> 6) & 63] : '=';
	b64_buf[b64_len++] = n > 2 ? abc[v & 63] : '=';
}

/* n bytes of the archive, encoded. */
static void
out_write(const void *p, size_t n)
{
	const unsigned char *c = p;

	while (n > 0) {
		b64_in[b64_have++] = *c++;
		n--;
		if (b64_have == 3) {
			b64_group(b64_in, 3);
			b64_have = 0;
		}
	}
}

static void
out_write_end(void)
{
	if (b64_have > 0)
		b64_group(b64_in, b64_have);
	b64_have = 0;
	b64_flush();
}

/* A ustar header for path of size bytes. */
static void
out_header(char h[BLOCK], const char *path, long long size)
{
	size_t len = strlen(path), i;
	unsigned sum = 0;
	const char *slash;

	memset(h, 0, BLOCK);
	if (len <= 100)
		memcpy(h, path, len);
	else {
		/* prefix/name: the last '/' that leaves both within bounds. */
		for (slash = path + len; slash > path; slash--)
			if (*slash == '/' && (size_t)(slash - path) <= 155 &&
			    len - (size_t)(slash - path) - 1 <= 100)
				break;
		memcpy(h + 345, path, (size_t)(slash - path));
		memcpy(h, slash + 1, len - (size_t)(slash - path) - 1);
	}
	snprintf(h + 100, 8, "%07o", 0644);
	snprintf(h + 108, 8, "%07o", 65532);
	snprintf(h + 116, 8, "%07o", 65532);
	snprintf(h + 124, 12, "%011llo", size);
	snprintf(h + 136, 12, "%011o", 0);
	h[156] = '0';
	memcpy(h + 257, "ustar", 6);
	memcpy(h + 263, "00", 2);
	memset(h + 148, ' ', 8);
	for (i = 0; i < BLOCK; i++)
		sum += (unsigned char)h[i];
	snprintf(h + 148, 8, "%06o", sum);
}

/* Can path go in a ustar header (a name of 100, a prefix of 155)? */
static int
out_fits(const char *path)
{
	size_t len = strlen(path);
	const char *s;

	if (len <= 100)
		return 1;
	for (s = path + len; s > path; s--)
		if (*s == '/' && (size_t)(s - path) <= 155 &&
		    len - (size_t)(s - path) - 1 <= 100)
			return 1;
	return 0;
}

/* The files under OUT_DIR, framed, on stdout. */
static void
out_send(void)
{
	static const char zero[BLOCK];
	char h[BLOCK], line[OUT_PATH_MAX + 128], buf[65536];
	long long total = 0, files = 0, len = 2 * BLOCK, dlen = 0, ndropped = 0;
	char *list = NULL;
	size_t i, lcap = 0, llen = 0;

	out_walk("", 0);
	if (nouts == 0 && nextras == 0)
		return;
	if (nouts > 0)
		qsort(outs, nouts, sizeof(*outs), out_cmp);
	for (i = 0; i < nouts; i++) {
		struct outfile *f = &outs[i];

		if (f->why == NULL && !out_fits(f->path))
			f->why = "its path does not fit a ustar header";
		else if (f->why == NULL && files >= out_max_files)
			f->why = "past the limit on files";
		else if (f->why == NULL && (f->size > out_max_bytes ||
		    f->size > out_max_bytes - total))
			f->why = "over the byte budget";
		if (f->why == NULL) {
			files++;
			total += f->size;
			len += BLOCK + (f->size + BLOCK - 1) / BLOCK * BLOCK;
			continue;
		}
		/* The list is held to ~50 KiB: the agent allows the frame 64. */
		if (++ndropped > OUT_MAX_LISTED) {
			if (ndropped == OUT_MAX_LISTED + 1)
				snprintf(line, sizeof(line), "-1\tand more, not listed\t...\n");
			else
				continue;
		} else
			snprintf(line, sizeof(line), "%lld\t%s\t%s\n", f->size, f->why,
			    f->path);
		if (llen + strlen(line) + 1 > lcap) {
			lcap = (llen + strlen(line) + 1) * 2;
			if ((list = realloc(list, lcap)) == NULL)
				die("%s", "out of memory");
		}
		memcpy(list + llen, line, strlen(line) + 1);
		llen += strlen(line);
	}
	if (llen > 0) {
		dlen = (long long)llen;
		len += BLOCK + (dlen + BLOCK - 1) / BLOCK * BLOCK;
	}
	for (i = 0; i < nextras; i++)
		len += BLOCK + ((long long)extras[i].len + BLOCK - 1) / BLOCK * BLOCK;
	/* The length of the base64 text. */
	snprintf(line, sizeof(line), "\x1e" "AIRLOCK-OUT %s %lld\n", out_nonce,
	    (len + 2) / 3 * 4);
	emit(1, line, strlen(line));
	for (i = 0; i < nouts; i++) {
		struct outfile *f = &outs[i];
		long long left = f->size;
		char path[OUT_DIR_MAX + OUT_PATH_MAX + 2];
		int fd;

		if (f->why != NULL)
			continue;
		out_header(h, f->path, f->size);
		out_write(h, BLOCK);
		snprintf(path, sizeof(path), "%s/%s", out_dir, f->path);
		/* A file walked; a FIFO by now would block: read as zeros. */
		fd = open_reg(path, O_RDONLY, 0);
		/* As long as it said: cut if it grew, zeros if it shrank. */
		while (left > 0) {
			size_t want = left < (long long)sizeof(buf) ? (size_t)left :
			    sizeof(buf);
			ssize_t r = fd >= 0 ? read(fd, buf, want) : 0;

			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0) {
				memset(buf, 0, want);
				r = (ssize_t)want;
			}
			out_write(buf, (size_t)r);
			left -= r;
		}
		if (fd >= 0)
			close(fd);
		if (f->size % BLOCK)
			out_write(zero, BLOCK - (size_t)(f->size % BLOCK));
	}
	if (dlen > 0) {
		out_header(h, OUT_DROPPED, dlen);
		out_write(h, BLOCK);
		out_write(list, (size_t)dlen);
		if (dlen % BLOCK)
			out_write(zero, BLOCK - (size_t)(dlen % BLOCK));
	}
	for (i = 0; i < nextras; i++) {
		out_header(h, extras[i].name, (long long)extras[i].len);
		out_write(h, BLOCK);
		out_write(extras[i].data, extras[i].len);
		if (extras[i].len % BLOCK)
			out_write(zero, BLOCK - extras[i].len % BLOCK);
	}
	out_write(zero, BLOCK);
	out_write(zero, BLOCK);
	out_write_end();
	snprintf(line, sizeof(line), "\x1e" "AIRLOCK-END %s\n", out_nonce);
	emit(1, line, strlen(line));
	free(list);
}

static pid_t child;

static void
forward(int sig)
{
	if (child > 0)
		kill(-child, sig);
}

/*
 * AIRLOCK_OUT, if set, read and removed: 1 (files out wanted), else 0.
 * Bad values are ignored, files out then off: the agent, which set it,
 * checks what arrives anyway.
 */
static int
out_parse(const char *v)
{
	char nonce[65];
	long long b, f;

	if (v == NULL)
		return 0;
	if (sscanf(v, "%64[0-9a-f] %lld %lld", nonce, &b, &f) != 3 || b < 0 ||
	    f < 0 || b > MAX_TOTAL)
		return 0;
	snprintf(out_nonce, sizeof(out_nonce), "%s", nonce);
	out_max_bytes = b;
	out_max_files = f;
	return 1;
}

static int
out_wanted(void)
{
	int ok = out_parse(getenv(OUT_ENV));

	unsetenv(OUT_ENV);
	return ok;
}

/* The signals the node agent or the runtime sends warm: to the child's group. */
static void
forward_signals(void)
{
	static const int sigs[] = { SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1,
	    SIGUSR2 };
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = forward;
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaction(sigs[i], &sa, NULL);
}

/* --- the zygote (images/runner/zygote.py's header: the protocol) --------- */

#define ZYGOTE_SOCK		"/dev/shm/airlock-zygote.sock"
#define ZYGOTE_BODY_MAX		(256L << 10)
#define ZYGOTE_ARGS_MAX		4096
#define ZYGOTE_ENV_MAX		4096
#define ZYGOTE_ANSWER_MAX	512	/* an answer's line, "ERR why" the longest */
#define ZYGOTE_ANSWER_S		10	/* connect, the request, its PID answer */
#define ZYGOTE_REFUSED		(-1)	/* nothing ran: the caller runs it */
#define ZYGOTE_UNKNOWN		(-2)	/* sent, no PID: it may run; never again */

/* The socket option opt (SO_SNDTIMEO, SO_RCVTIMEO) of fd to s seconds (0: none). */
static int
zygote_bound(int fd, int s, int opt)
{
	struct timeval tv = { .tv_sec = s };

	return setsockopt(fd, SOL_SOCKET, opt, &tv, sizeof(tv));
}

/*
 * A connection to the preload profile's zygote, when argv runs python3 or
 * python and a zygote listens at $AIRLOCK_ZYGOTE_SOCK (ZYGOTE_SOCK): its
 * fd; else -1, and the program runs as without one.
 */
static int
zygote_connect(char **argv)
{
	const char *path = getenv("AIRLOCK_ZYGOTE_SOCK"), *b = strrchr(argv[0], '/');
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;
	int fd;

	if (path == NULL || *path == '\0')
		path = ZYGOTE_SOCK;
	b = b ? b + 1 : argv[0];
	if ((strcmp(b, "python3") != 0 && strcmp(b, "python") != 0) ||
	    strlen(path) >= sizeof(sa.sun_path) || stat(path, &st) != 0 ||
	    !S_ISSOCK(st.st_mode))
		return -1;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return -1;
	/*
	 * Bounded until the PID answer (zygote_spawn clears the receive
	 * bound then): a zygote stopped, or with its backlog full, costs
	 * ZYGOTE_ANSWER_S, never the execution's whole timeout.
	 */
	if (zygote_bound(fd, ZYGOTE_ANSWER_S, SO_SNDTIMEO) != 0 ||
	    zygote_bound(fd, ZYGOTE_ANSWER_S, SO_RCVTIMEO) != 0 ||
	    connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/*
 * A line of the zygote's answer, its newline dropped: 1; 0 at EOF, on an
 * error, or past ZYGOTE_ANSWER_MAX bytes. Byte by byte: never a byte of
 * the next answer, which may come much later.
 */
static int
zygote_line(int conn, char line[ZYGOTE_ANSWER_MAX])
{
	size_t n = 0;

	for (;;) {
		char c;
		ssize_t r = read(conn, &c, 1);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return 0;
		if (c == '\n') {
			line[n] = '\0';
			return 1;
		}
		if (n == ZYGOTE_ANSWER_MAX - 1)
			return 0;
		line[n++] = c;
	}
}

/* "NAME=..." names the variable of entry e ("NAME=VALUE")? */
static int
same_name(const char *a, const char *e)
{
	size_t n = strcspn(e, "=");

	return strncmp(a, e, n + 1) == 0;
}

/*
 * SPAWN argv on conn: the child's fds 0-2 are fds[0..2], its environment
 * environ with the entries of extra (NULL-ended "NAME=VALUE", or NULL)
 * in place of those names, its working directory this one. The child's
 * pid, once the zygote said it (conn closed otherwise). ZYGOTE_REFUSED
 * when the request is over the bounds, was not sent whole, or the zygote
 * answered ERR: nothing ran, and the caller runs the program itself.
 * ZYGOTE_UNKNOWN when it was sent whole and no PID came (EOF, a timeout,
 * another line): the zygote may have forked it, so it must not run again.
 */
static pid_t
zygote_spawn(int conn, char **argv, char *const *extra, const int fds[3])
{
	extern char **environ;
	char head[64], line[ZYGOTE_ANSWER_MAX], cwd[4096], *body = NULL;
	char cbuf[CMSG_SPACE(3 * sizeof(int))];
	size_t len = 0, argc = 0, envc = 0, off;
	struct msghdr msg = { 0 };
	struct cmsghdr *cm;
	struct iovec iov[2];
	long pid = -1;
	ssize_t w;
	int pass;

	if (getcwd(cwd, sizeof(cwd)) == NULL)
		goto out;
	/* Twice: the size, then the bytes. */
	for (pass = 0; pass < 2; pass++) {
		off = 0;
#define ZYGOTE_PUT(s) do {						\
		size_t n_ = strlen(s) + 1;				\
		if (pass == 1)						\
			memcpy(body + off, (s), n_);			\
		off += n_;						\
	} while (0)
		for (argc = 0; argv[argc]; argc++)
			ZYGOTE_PUT(argv[argc]);
		envc = 0;
		for (char **e = environ; *e; e++) {
			int dup = 0;

			for (char *const *x = extra; x && *x && !dup; x++)
				dup = same_name(*x, *e);
			if (!dup && strchr(*e, '=') != NULL && **e != '=') {
				ZYGOTE_PUT(*e);
				envc++;
			}
		}
		for (char *const *x = extra; x && *x; x++, envc++)
			ZYGOTE_PUT(*x);
		ZYGOTE_PUT(cwd);
#undef ZYGOTE_PUT
		if (pass == 0) {
			len = off;
			if (len > ZYGOTE_BODY_MAX || argc > ZYGOTE_ARGS_MAX ||
			    envc > ZYGOTE_ENV_MAX || (body = malloc(len)) == NULL)
				goto out;
		}
	}
	snprintf(head, sizeof(head), "SPAWN %zu %zu %zu\n", argc, envc, len);
	iov[0] = (struct iovec){ head, strlen(head) };
	iov[1] = (struct iovec){ body, len };
	msg.msg_iov = iov;
	msg.msg_iovlen = 2;
	memset(cbuf, 0, sizeof(cbuf));
	msg.msg_control = cbuf;
	msg.msg_controllen = sizeof(cbuf);
	cm = CMSG_FIRSTHDR(&msg);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(3 * sizeof(int));
	memcpy(CMSG_DATA(cm), fds, 3 * sizeof(int));
	/* The fds go with the first bytes; what a full buffer left, after. */
	while ((w = sendmsg(conn, &msg, MSG_NOSIGNAL)) < 0 && errno == EINTR)
		;
	if (w < 0)
		goto out;
	off = (size_t)w;
	while (off < iov[0].iov_len + len) {
		const char *p = off < iov[0].iov_len ? head + off :
		    body + (off - iov[0].iov_len);
		size_t n = off < iov[0].iov_len ? iov[0].iov_len - off :
		    len - (off - iov[0].iov_len);

		if ((w = send(conn, p, n, MSG_NOSIGNAL)) < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			goto out;
		off += (size_t)w;
	}
	free(body);
	body = NULL;
	if (zygote_line(conn, line)) {
		if (strncmp(line, "ERR ", 4) == 0)
			goto out;
		if (sscanf(line, "PID %ld", &pid) == 1 && pid > 1 && pid <= INT_MAX &&
		    zygote_bound(conn, 0, SO_RCVTIMEO) == 0)
			return (pid_t)pid;	/* EXIT may come much later */
	}
	close(conn);
	return ZYGOTE_UNKNOWN;
out:
	free(body);
	close(conn);
	return ZYGOTE_REFUSED;
}

/*
 * The status of the zygote's child pid, from "EXIT S" on conn. The zygote
 * gone first: what is left of the child's group is killed, 125.
 */
static int
zygote_wait(int conn, pid_t pid)
{
	char line[ZYGOTE_ANSWER_MAX];
	int st;

	if (zygote_line(conn, line) && sscanf(line, "EXIT %d", &st) == 1 &&
	    st >= 0 && st <= 255)
		return st;
	kill(-pid, SIGKILL);
	emitf(2, "warm: the zygote ended while the program ran: its status "
	    "is lost\n");
	return 125;
}

/*
 * The one-shot path through the zygote: the program (argv, fd its stdin
 * when not -1) run as the zygote's child, then with out the files out,
 * as run_then_send. Its status; -1 when no zygote took it (none there,
 * or it refused): nothing ran.
 */
static int
zygote_run(int fd, char **argv, int out)
{
	int conn = zygote_connect(argv), fds[3] = { fd >= 0 ? fd : 0, 1, 2 }, st;

	if (conn < 0)
		return -1;
	if (out)
		(void)mkdir(out_real, 0755);
	fflush(NULL);
	if ((child = zygote_spawn(conn, argv, NULL, fds)) < 0) {
		int unknown = child == ZYGOTE_UNKNOWN;

		child = 0;
		if (!unknown)
			return -1;
		emitf(2, "warm: the zygote gave no pid for the program: it may "
		    "have started, and is not run again\n");
		return 125;
	}
	if (fd > 0)
		close(fd);
	forward_signals();
	st = zygote_wait(conn, child);
	close(conn);
	if (out) {
		/* Whatever it left running would write over the frame. */
		kill(-child, SIGKILL);
		out_send();
	}
	return st;
}

/*
 * Run the program as a child (become), then send its files out; exit
 * with its status.
 */
static int
run_then_send(int fd, char **argv)
{
	int st;

	/*
	 * There for the program, which may mkdir -p it or not. (The root
	 * filesystem is read-only: /airlock/out is a symlink to /dev/shm.)
	 */
	(void)mkdir(out_real, 0755);
	fflush(NULL);
	if ((child = fork()) < 0)
		die("%s", "cannot fork");
	if (child == 0) {
		setpgid(0, 0);
		exit(become(fd, argv));
	}
	setpgid(child, child);
	if (fd > 0)
		close(fd);
	forward_signals();
	while (waitpid(child, &st, 0) < 0)
		if (errno != EINTR)
			die("%s", "cannot wait for the program");
	/* Whatever it left running would write over the frame. */
	kill(-child, SIGKILL);
	out_send();
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	return 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

/* --- a session's step (docs/sessions.md) --------------------------------- */

#define SESSION_DIR	"/dev/shm/airlock-session"
#define VALUE_MAX	4096
#define KERNEL_START_MS	60000

static char sdir[512];
static pid_t kernel_pid;

static long long
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* sdir/name, in buf of n bytes. */
static char *
spath(char *buf, size_t n, const char *name)
{
	if ((size_t)snprintf(buf, n, "%s/%s", sdir, name) >= n)
		die("%s", "the session directory's path is too long");
	return buf;
}

/* A FIFO at sdir/name, made if it is not there; never a symlink. */
static void
fifo(const char *name)
{
	char p[600];
	struct stat st;

	if (mkfifo(spath(p, sizeof(p), name), 0600) != 0 && (errno != EEXIST ||
	    lstat(p, &st) != 0 || !S_ISFIFO(st.st_mode)))
		die("cannot make the FIFO %s", p);
}

/* Read what fd holds now (non-blocking), and drop it. */
static void
drain_drop(int fd)
{
	char buf[4096];

	while (read(fd, buf, sizeof(buf)) > 0)
		;
}

/* 1 if a kernel holds sdir/kernel.lock. */
static int
kernel_alive(void)
{
	char p[600];
	int fd = open_reg(spath(p, sizeof(p), "kernel.lock"), O_RDWR | O_CREAT,
	    0600), alive;

	if (fd < 0)
		die("cannot open %s", p);
	alive = flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK;
	close(fd);
	return alive;
}

/* Its pid, as the kernel's READY said (sdir/kernel.pid), or 0. */
static pid_t
kernel_pid_read(void)
{
	char p[600], buf[32];
	int fd = open_reg(spath(p, sizeof(p), "kernel.pid"), O_RDONLY, 0);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	long v;

	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	v = strtol(buf, NULL, 10);
	return v > 1 ? (pid_t)v : 0;
}

/*
 * The session's kernel restarts so far: how many times a kernel was
 * started in this sandbox after its first one, each time with the
 * session's state lost. Kept in sdir/restarts (decimal) across steps,
 * each its own warm process; kernel_start adds to it. A missing or bad
 * file reads as 0: the session's own code can write it, and so only
 * misstates its own count. It stops at RESTARTS_MAX, what the node agent
 * takes (execution/artifacts.h, ARTIFACTS_RESTARTS_MAX).
 */
#define RESTARTS_MAX	1000000
static long long restarts;

static long long
restarts_read(void)
{
	char p[600], buf[16], *end;
	int fd = open_reg(spath(p, sizeof(p), "restarts"), O_RDONLY, 0);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	long long v;

	if (fd >= 0)
		close(fd);
	if (n <= 0 || buf[0] < '0' || buf[0] > '9')
		return 0;
	buf[n] = '\0';
	errno = 0;
	v = strtoll(buf, &end, 10);
	if (errno || (*end != '\0' && strcmp(end, "\n") != 0) || v > RESTARTS_MAX)
		return 0;
	return v;
}

/*
 * One more restart, written as a new file renamed over the old one, so
 * that a step killed meanwhile leaves the old count or the new, never
 * half of one. A count that cannot be written is said on stderr, and the
 * step goes on: its result matters more than the count.
 */
static void
restarts_add(void)
{
	char p[600], q[600];
	int fd, ok;

	if (restarts < RESTARTS_MAX)
		restarts++;
	spath(p, sizeof(p), "restarts");
	(void)unlink(spath(q, sizeof(q), "restarts.tmp"));
	fd = open(q, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		ok = 0;
	else {
		ok = dprintf(fd, "%lld\n", restarts) > 0;
		ok = close(fd) == 0 && ok;
	}
	if (!ok || rename(q, p) != 0) {
		emitf(2, "warm: cannot write the count of the session's "
		    "kernel restarts to %s: %s\n", p, strerror(errno));
		(void)unlink(q);
	}
}

/*
 * A line from the ack FIFO, waiting until deadline (ms); "" at the
 * deadline. Partial lines are kept in lbuf between calls.
 */
static char lbuf[256];
static size_t llen;

static int
ack_line(int ack, char *line, size_t n)
{
	char *nl = memchr(lbuf, '\n', llen);
	size_t l;
	ssize_t r;

	if (nl == NULL && llen < sizeof(lbuf)) {
		r = read(ack, lbuf + llen, sizeof(lbuf) - llen);
		if (r > 0)
			llen += (size_t)r;
		nl = memchr(lbuf, '\n', llen);
	}
	if (nl == NULL) {
		if (llen == sizeof(lbuf))
			llen = 0;	/* no line in 256 bytes: not the kernel's */
		return 0;
	}
	l = (size_t)(nl - lbuf);
	snprintf(line, n, "%.*s", (int)l, lbuf);
	memmove(lbuf, nl + 1, llen - l - 1);
	llen -= l + 1;
	return 1;
}

/*
 * Start the kernel (argv) in a session of its own, its output to
 * sdir/kernel.log, and wait for its READY on ack: 0 for the sandbox's
 * first kernel, 1 for one that replaces a kernel started here before (a
 * restart: counted), or -1 with why on stderr (its log's end with it).
 * "Started here before" is sdir/kernel.pid, written at each READY and
 * never removed: it outlives the kernel and the warm process that
 * started it.
 */
/*
 * The kernel a zygote started (zc its connection): started through the
 * zygote, as its child, with /dev/null and the log as its 0-2 and the
 * session's two variables; the pid, or zygote_spawn's ZYGOTE_REFUSED or
 * ZYGOTE_UNKNOWN (zc closed).
 */
static pid_t
kernel_spawn(char **argv, int zc, const char *log_path)
{
	char se[600 + 32], so[OUT_DIR_MAX + 32];
	char *const extra[] = { se, so, NULL };
	int null = open("/dev/null", O_RDONLY | O_CLOEXEC), log, fds[3];
	pid_t pid;

	(void)unlink(log_path);
	log = open(log_path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
	    0600);
	if (null < 0 || log < 0) {
		if (null >= 0)
			close(null);
		if (log >= 0)
			close(log);
		close(zc);
		return -1;
	}
	snprintf(se, sizeof(se), "AIRLOCK_SESSION_DIR=%s", sdir);
	snprintf(so, sizeof(so), "AIRLOCK_OUT_DIR=%s", out_dir);
	fds[0] = null;
	fds[1] = fds[2] = log;
	pid = zygote_spawn(zc, argv, extra, fds);
	close(null);
	close(log);
	return pid;
}

/*
 * Has the kernel pid ended before its READY? 1 with its status in *st
 * (as a shell says it), else 0. zc >= 0: the zygote's child, its EXIT
 * on zc (the zygote gone: 125).
 */
static int
kernel_ended(pid_t pid, int zc, int *st)
{
	struct pollfd pf = { .fd = zc, .events = POLLIN };
	char line[ZYGOTE_ANSWER_MAX];
	int w;

	if (zc < 0) {
		if (waitpid(pid, &w, WNOHANG) != pid)
			return 0;
		*st = WIFEXITED(w) ? WEXITSTATUS(w) : 128 + WTERMSIG(w);
		return 1;
	}
	if (poll(&pf, 1, 0) <= 0)
		return 0;
	if (!zygote_line(zc, line) || sscanf(line, "EXIT %d", st) != 1)
		*st = 125;
	return 1;
}

static int
kernel_start(char **argv, int ack, long long deadline)
{
	char p[600], line[256];
	pid_t pid = -1;
	int st, zc;

	llen = 0;
	drain_drop(ack);
	spath(p, sizeof(p), "kernel.log");	/* here: a die in the child would answer */
	fflush(NULL);
	if ((zc = zygote_connect(argv)) >= 0 &&
	    (pid = kernel_spawn(argv, zc, p)) < 0) {
		zc = -1;
		if (pid == ZYGOTE_UNKNOWN) {
			emitf(2, "warm: the zygote gave no pid for the session's "
			    "kernel: it may have started, and is not started again\n");
			return -1;
		}
	}
	if (pid < 0 && (pid = fork()) < 0)
		die("%s", "cannot fork");
	if (pid == 0) {
		int null, log;

		/* Its own group first: a kill of it reaches it, whatever follows. */
		setsid();
		signal(SIGPIPE, SIG_DFL);	/* --serve's SIG_IGN is not the kernel's */
		(void)unlink(p);
		null = open("/dev/null", O_RDONLY);
		log = open(p, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0600);
		if (null < 0 || log < 0 || dup2(null, 0) < 0 || dup2(log, 1) < 0 ||
		    dup2(log, 2) < 0)
			_exit(125);
		if (null > 2)
			close(null);
		if (log > 2)
			close(log);
		setenv("AIRLOCK_SESSION_DIR", sdir, 1);
		setenv("AIRLOCK_OUT_DIR", out_dir, 1);
		execvp(argv[0], argv);
		fprintf(stderr, "cannot run %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	for (;;) {
		struct pollfd pf[2] = { { .fd = ack, .events = POLLIN },
		    { .fd = zc, .events = POLLIN } };
		long long left = deadline - now_ms();

		if (ack_line(ack, line, sizeof(line))) {
			long v;

			if (sscanf(line, "READY %ld", &v) == 1 && v == pid) {
				struct stat sb;
				int fd, again;

				again = lstat(spath(p, sizeof(p), "kernel.pid"), &sb) == 0;
				(void)unlink(p);
				fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
				    O_CLOEXEC, 0600);

				if (fd < 0 || dprintf(fd, "%ld\n", v) < 0 || close(fd) != 0)
					die("cannot write %s", p);
				kernel_pid = pid;
				if (again)
					restarts_add();
				/* The zygote's: it outlives this client. */
				if (zc >= 0)
					close(zc);
				return again;
			}
			continue;
		}
		if (kernel_ended(pid, zc, &st)) {
			char buf[2048];
			int fd = open_reg(spath(p, sizeof(p), "kernel.log"), O_RDONLY, 0);
			ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : 0;

			if (fd >= 0)
				close(fd);
			if (zc >= 0)
				close(zc);
			buf[n > 0 ? n : 0] = '\0';
			emitf(2, "warm: the session's kernel exited (%d) before it "
			    "was ready%s%s", st, *buf ? ":\n" : "\n", buf);
			return -1;
		}
		if (left <= 0) {
			kill(-pid, SIGKILL);
			if (zc >= 0)
				close(zc);
			emitf(2, "warm: the session's kernel was not ready in "
			    "time\n");
			return -1;
		}
		(void)poll(pf, zc >= 0 ? 2 : 1, left < 50 ? (int)left : 50);
	}
}

/* Empty dir (OUT_REAL: each step's files out are its own). */
static void
rm_tree(const char *dir, int depth)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char p[OUT_PATH_MAX + OUT_DIR_MAX + 64];
	struct stat st;

	if (d == NULL)
		return;
	while ((e = readdir(d)) != NULL) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if ((size_t)snprintf(p, sizeof(p), "%s/%s", dir, e->d_name) >= sizeof(p))
			continue;
		if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode) && depth < OUT_MAX_DEPTH) {
			rm_tree(p, depth + 1);
			(void)rmdir(p);
		} else
			(void)unlink(p);
	}
	closedir(d);
}

/* Copy what fd has now to out (1 or 2): 0 at EOF, 1 if more may come. */
static int
relay(int fd, int out)
{
	char buf[65536];
	ssize_t n = read(fd, buf, sizeof(buf));

	if (n == 0)
		return 0;
	if (n < 0)
		return errno == EAGAIN || errno == EINTR;
	emit(out, buf, (size_t)n);
	return 1;
}

/*
 * warm --step BYTES|- TIMEOUT_MS GRACE_MS CODE KERNEL [ARG...]
 *
 * One execution of a session: unpack the archive (the entry named CODE is
 * the step's program, the others files of the working directory, replaced
 * if there), start the kernel if none runs, have it run the step, relay
 * its output, and interrupt it at TIMEOUT_MS (SIGINT to its group): one
 * that is not back GRACE_MS later is killed, and a new one started. Then
 * the files out, with the step's report and value (".airlock-step",
 * ".airlock-value") in the archive; the exit status is the step's.
 *
 * The report is "KIND CODE RESTARTED DROPPED RESTARTS\n" (read by
 * execution/artifacts.c): RESTARTS the session's kernel restarts so far,
 * this step's included; RESTARTED 1 when a new kernel was started after
 * the step (it exited, died, or was not back in its grace), 2 when none
 * could start (the next step tries again), 3 when the kernel had died
 * since the last step (a thread's os._exit, an OOM-killed kernel) and
 * this step started a new one before it ran: the step ran without the
 * session's earlier state, which nothing else would tell. (After a 2,
 * the step that next starts a kernel says 3 and counts it: the count is
 * of kernels started, and the loss was said by the 2.) A step can see
 * both a dead kernel at its start and a restart at its end: RESTARTED is
 * then 3 (its KIND says the end's restart: exit and died always restart,
 * and stderr says a timeout's) unless the end's could not start a kernel
 * (2: the session has none now, what matters next). RESTARTS counts both.
 */
/*
 * SIGTERM to a step: its execution was cancelled while it ran (the node
 * agent sends it, node-agent/tick.c). The kernel is interrupted now, as
 * at the step's timeout, with the same grace; the session goes on.
 */
static volatile sig_atomic_t step_cancelled;

static void
on_cancel(int sig)
{
	(void)sig;
	step_cancelled = 1;
}

/*
 * One step, from either client: --step's argv, environ and stdin, or a
 * --serve request. env: env_len bytes of "NAME=VALUE\0" entries (the
 * step's, written to step/env; not AIRLOCK_OUT, which out_parse took).
 * The archive (and the program's stdin) is read from fd 0 through in_read.
 */
struct step_req {
	long		 limit;		/* the archive's bytes; -1: all of the input */
	long long	 timeout, grace;	/* ms */
	const char	*code;		/* the entry that is the step's program */
	const char	*env;
	size_t		 env_len;
	unsigned	 kseq;		/* the kernel's RUN/DONE number */
};

/* --serve: the input's state while a step runs (serve_input, serve_lines). */
static int in_eof;
static char serve_bad[256];
static void serve_input(void);
static void serve_lines(void);

/* What a step before this one (--serve) left in the files-out state. */
static void
out_reset(void)
{
	for (size_t i = 0; i < nouts; i++)
		free(outs[i].path);
	nouts = walked = nextras = 0;
	b64_have = b64_len = 0;
}

static int
step_run(const struct step_req *rq, char **kargv)
{
	char p[600], q[600], line[256], report[128], kind[16] = "died";
	static char value[VALUE_MAX + 1];
	long long timeout = rq->timeout, grace = rq->grace, start = now_ms(),
	    deadline, hard = 0;
	long limit = rq->limit, code = 137, dropped = 0;
	int slock, ctl, ack, o, e, o_open = 1, e_open = 1;
	int done = 0, interrupted = 0, restarted = 0, lost = 0, gone, rc;
	const char *env = getenv("AIRLOCK_SESSION_DIR");
	unsigned seq = rq->kseq;
	struct stat st;
	ssize_t vn;

	out_reset();
	step_cancelled = 0;
	kernel_pid = 0;
	snprintf(sdir, sizeof(sdir), "%s", env && *env ? env : SESSION_DIR);
	if ((mkdir(sdir, 0700) != 0 && errno != EEXIST) || lstat(sdir, &st) != 0 ||
	    !S_ISDIR(st.st_mode))
		die("cannot make the session directory %s", sdir);
	if ((mkdir(spath(p, sizeof(p), "step"), 0700) != 0 && errno != EEXIST) ||
	    lstat(p, &st) != 0 || !S_ISDIR(st.st_mode))
		die("cannot make %s", p);
	slock = open_reg(spath(p, sizeof(p), "step.lock"), O_RDWR | O_CREAT, 0600);
	if (slock < 0 || flock(slock, LOCK_EX | LOCK_NB) != 0)
		die("%s", "another step of this session is running");
	fifo("ctl");
	fifo("ack");
	if ((ctl = open(spath(p, sizeof(p), "ctl"), O_RDWR | O_NONBLOCK | O_CLOEXEC)) < 0 ||
	    (ack = open(spath(q, sizeof(q), "ack"), O_RDWR | O_NONBLOCK | O_CLOEXEC)) < 0)
		die("%s", "cannot open the session's FIFOs");
	/* What a step that was killed left there is not this one's. */
	drain_drop(ctl);
	drain_drop(ack);
	static const char *const stale[] = { "step/code", "step/stdin", "step/env", "step/value",
	    "step/value.tmp", "step/out", "step/err" };
	for (size_t i = 0; i < sizeof(stale) / sizeof(stale[0]); i++)
		(void)unlink(spath(p, sizeof(p), stale[i]));

	step_code = rq->code;
	free((char *)step_code_path);
	step_code_path = strdup(spath(p, sizeof(p), "step/code"));
	replace_files = 1;
	unpack(0, limit);
	if (limit >= 0) {	/* the rest of the input is the program's stdin */
		char buf[65536];
		int fd = open(spath(p, sizeof(p), "step/stdin"), O_WRONLY | O_CREAT |
		    O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		ssize_t n;

		if (fd < 0)
			die("cannot create %s", p);
		while ((n = in_read(buf, sizeof(buf))) != 0)
			if (n < 0 || write_all(fd, buf, (size_t)n) != 0)
				die("%s", "cannot keep the program's stdin");
		close(fd);
	}
	/* --serve, "-": what follows the end blocks is this request's too. */
	while (in_left > 0) {
		char buf[4096];

		if (in_read(buf, sizeof(buf)) <= 0)
			break;
	}
	if (in_left > 0)
		die("%s", "the requests end inside the step's body");
	if (access(step_code_path, F_OK) != 0)
		die("the archive has no '%s'", step_code);
	{	/* The step's environment, for the kernel to set while it runs. */
		int efd = open(spath(p, sizeof(p), "step/env"), O_WRONLY | O_CREAT |
		    O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);

		if (efd < 0 || write_all(efd, rq->env, rq->env_len) != 0 ||
		    close(efd) != 0)
			die("cannot write %s", p);
	}

	deadline = start + timeout;
	restarts = restarts_read();
	if (!kernel_alive() || (kernel_pid = kernel_pid_read()) <= 0) {
		int k = kernel_start(kargv, ack, start + KERNEL_START_MS);

		if (k < 0) {
			snprintf(report, sizeof(report), "failed 125 2 0 %lld\n",
			    restarts);
			extras[nextras++] = (struct extra){ ".airlock-step", report,
			    strlen(report) };
			out_send();
			rc = 125;
			goto out;
		}
		/* Not this sandbox's first: the last one is gone, its state too. */
		if (k == 1) {
			lost = 1;
			emitf(2, "airlock: the session's kernel was not running "
			    "at this step's start; a new one was started, and the "
			    "session's earlier state is lost\n");
		}
	}

	spath(p, sizeof(p), "step/out");
	spath(q, sizeof(q), "step/err");
	if (mkfifo(p, 0600) != 0 || mkfifo(q, 0600) != 0 ||
	    (o = open(p, O_RDONLY | O_NONBLOCK | O_CLOEXEC)) < 0 ||
	    (e = open(q, O_RDONLY | O_NONBLOCK | O_CLOEXEC)) < 0)
		die("%s", "cannot make the step's FIFOs");
	(void)mkdir(out_real, 0755);
	rm_tree(out_real, 0);
	llen = 0;
	if (dprintf(ctl, "RUN %u\n", seq) < 0)
		die("%s", "cannot reach the kernel");

	/*
	 * Until DONE: relay, interrupt at the deadline, kill at the grace's
	 * end. The FIFOs are at EOF only once every writer has closed them:
	 * the kernel and what it started.
	 */
	while (!done) {
		struct pollfd pf[4] = { { .fd = ack, .events = POLLIN },
		    { .fd = o_open ? o : -1, .events = POLLIN },
		    { .fd = e_open ? e : -1, .events = POLLIN },
		    { .fd = serving && !in_eof ? 0 : -1, .events = POLLIN } };
		long long now = now_ms(), wake = interrupted ? hard : deadline;

		/*
		 * What the request's read brought past its end (a CANCEL sent
		 * right after it) is in inb already: fd 0 will not say so.
		 */
		if (serving && inb_pos < inb_len && memchr(inb + inb_pos, '\n',
		    inb_len - inb_pos) != NULL)
			serve_lines();

		if (!interrupted && (now >= deadline || step_cancelled)) {
			kill(-kernel_pid, SIGINT);
			interrupted = 1;
			hard = now + grace;
			continue;
		}
		if (interrupted && now >= hard)
			break;
		(void)poll(pf, 4, wake - now > 100 ? 100 : (int)(wake - now));
		if (pf[3].revents)
			serve_input();	/* a CANCEL, or EOF: the agent gone */
		if (pf[1].revents)
			o_open = relay(o, 1);
		if (pf[2].revents)
			e_open = relay(e, 2);
		/*
		 * Gone or not, asked before its acks are read: a DONE it wrote
		 * just before it exited (sys.exit) is in the FIFO then, and
		 * read below, never taken for a death (CI, 9cc985b: exit 137).
		 */
		gone = !kernel_alive();
		while (ack_line(ack, line, sizeof(line))) {
			unsigned s;
			char k[16];
			long c, d;

			if (sscanf(line, "DONE %u %15s %ld %ld", &s, k, &c, &d) == 4 &&
			    s == seq) {
				snprintf(kind, sizeof(kind), "%s", k);
				code = c;
				dropped = d;
				done = 1;
			} else if (sscanf(line, "FAIL %u", &s) == 1 && s == seq) {
				emitf(2, "warm: the kernel could not run the step: %s\n",
				    line);
				snprintf(kind, sizeof(kind), "failed");
				code = 125;
				done = 1;
			}
		}
		if (!done && gone)
			break;	/* it died: a C extension's crash, os._exit, OOM */
	}
	/* What it wrote before DONE; not what a process it left writes after. */
	while (o_open && (o_open = relay(o, 1)) == 1) {
		struct pollfd pf = { .fd = o, .events = POLLIN };

		if (poll(&pf, 1, 0) <= 0)
			break;
	}
	while (e_open && (e_open = relay(e, 2)) == 1) {
		struct pollfd pf = { .fd = e, .events = POLLIN };

		if (poll(&pf, 1, 0) <= 0)
			break;
	}
	close(o);
	close(e);
	(void)unlink(p);
	(void)unlink(q);
	if (interrupted)
		snprintf(kind, sizeof(kind), "timeout");
	if (!done) {
		/* Not back in its grace, or dead: a new kernel, the state lost. */
		kill(-kernel_pid, SIGKILL);
		for (long long t = now_ms() + 2000; kernel_alive() && now_ms() < t;)
			(void)poll(NULL, 0, 10);
		restarted = 1;
		code = interrupted ? 124 : 137;
		if (!interrupted)
			snprintf(kind, sizeof(kind), "died");
		emitf(2, "airlock: the session's kernel %s; a new one was "
		    "started, and the session's state is lost\n", interrupted ?
		    "did not stop within the grace after the timeout" : "died");
	} else if (strcmp(kind, "exit") == 0) {
		for (long long t = now_ms() + 2000; kernel_alive() && now_ms() < t;)
			(void)poll(NULL, 0, 10);
		restarted = 1;
	} else if (interrupted)
		code = 124;
	if (restarted && kernel_start(kargv, ack, now_ms() + KERNEL_START_MS) < 0)
		restarted = 2;	/* no new kernel: the next step tries again */
	else if (lost)
		restarted = 3;	/* over 1: see the report's comment above */

	vn = 0;
	if (done) {
		int fd = open_reg(spath(p, sizeof(p), "step/value"), O_RDONLY, 0);

		if (fd >= 0) {
			vn = read_full(fd, value, VALUE_MAX);
			close(fd);
		}
	}
	snprintf(report, sizeof(report), "%s %ld %d %ld %lld\n", kind, code,
	    restarted, dropped, restarts);
	extras[nextras++] = (struct extra){ ".airlock-step", report, strlen(report) };
	if (vn > 0)
		extras[nextras++] = (struct extra){ ".airlock-value", value, (size_t)vn };
	out_send();
	rc = (int)(code & 0xff);
out:
	close(ctl);
	close(ack);
	close(slock);
	return rc;
}

/*
 * warm --step BYTES|- TIMEOUT_MS GRACE_MS CODE KERNEL [ARG...]: one step,
 * its env the process's own, its input stdin; its exit status the step's.
 */
static int
step_main(char **argv)
{
	extern char **environ;
	struct step_req rq = { .limit = -1, .code = argv[3],
	    .kseq = (unsigned)getpid() };
	struct sigaction sa;
	char *end, *envb = NULL;
	size_t cap = 0;
	int rc;

	/* No SA_RESTART: the relay's poll returns at once. */
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_cancel;
	sigaction(SIGTERM, &sa, NULL);
	if (strcmp(argv[0], "-") != 0) {
		errno = 0;
		rq.limit = strtol(argv[0], &end, 10);
		if (errno || *end || end == argv[0] || rq.limit < 0 ||
		    rq.limit > MAX_TOTAL)
			die("'%s' is not a byte count", argv[0]);
	}
	rq.timeout = strtoll(argv[1], &end, 10);
	if (*end || rq.timeout <= 0)
		die("'%s' is not a timeout in ms", argv[1]);
	rq.grace = strtoll(argv[2], &end, 10);
	if (*end || rq.grace < 0)
		die("'%s' is not a grace in ms", argv[2]);
	/* Not the shell's own: the kernel's are its working directory's. */
	for (char **v = environ; *v; v++) {
		size_t n = strlen(*v) + 1;

		if (strncmp(*v, "PWD=", 4) == 0 || strncmp(*v, "OLDPWD=", 7) == 0 ||
		    strncmp(*v, "SHLVL=", 6) == 0 || strncmp(*v, "_=", 2) == 0)
			continue;
		if (rq.env_len + n > cap) {
			cap = (rq.env_len + n) * 2;
			if ((envb = realloc(envb, cap)) == NULL)
				die("%s", "out of memory");
		}
		memcpy(envb + rq.env_len, *v, n);
		rq.env_len += n;
	}
	rq.env = envb;
	rc = step_run(&rq, argv + 4);
	free(envb);
	return rc;
}

/* --- warm --serve: a session's steps over one process (see the top) ------ */

#define SERVE_LINE_MAX	256		/* a request's line, its newline included */
#define SERVE_ENV_MAX	(256L << 10)
#define SERVE_MS_MAX	1000000000000LL	/* a timeout or grace: ~31 years */

/*
 * Take a line (its newline dropped) out of inb: 1, 0 if none is whole
 * yet, -1 if SERVE_LINE_MAX bytes hold no newline.
 */
static int
inb_line(char line[SERVE_LINE_MAX])
{
	size_t have = inb_len - inb_pos;
	char *nl = memchr(inb + inb_pos, '\n', have < SERVE_LINE_MAX ? have :
	    SERVE_LINE_MAX);
	size_t l;

	if (nl == NULL)
		return have >= SERVE_LINE_MAX ? -1 : 0;
	l = (size_t)(nl - (inb + inb_pos));
	memcpy(line, inb + inb_pos, l);
	line[l] = '\0';
	inb_pos += l + 1;
	return 1;
}

/* One read of fd 0 into inb: its count, 0 at EOF. */
static ssize_t
inb_fill(void)
{
	ssize_t r;

	memmove(inb, inb + inb_pos, inb_len - inb_pos);
	inb_len -= inb_pos;
	inb_pos = 0;
	while ((r = read(0, inb + inb_len, sizeof(inb) - inb_len)) < 0 &&
	    errno == EINTR)
		;
	if (r < 0)
		die("cannot read the requests: %s", strerror(errno));
	inb_len += (size_t)r;
	return r;
}

/* Split line at single spaces into at most max fields: their count, -1 if bad. */
static int
fields(char *line, char **f, int max)
{
	int n = 0;

	for (char *s = line;; s++) {
		char *sp = strchr(s, ' ');

		if (n == max || *s == ' ' || *s == '\0')
			return -1;
		f[n++] = s;
		if (sp == NULL)
			return n;
		*sp = '\0';
		s = sp;
	}
}

/* A decimal of 1..19 digits, at most max: 0, else -1. */
static int
dec(const char *t, unsigned long long max, unsigned long long *v)
{
	size_t n = strlen(t);

	if (n == 0 || n > 19 || strspn(t, "0123456789") != n)
		return -1;
	*v = strtoull(t, NULL, 10);
	return *v <= max ? 0 : -1;
}

/* A CANCEL line: the step it names, or 0 if line is not one. */
static unsigned long long
cancel_seq(char *line)
{
	unsigned long long v;
	char *f[3];

	if (strncmp(line, "CANCEL ", 7) != 0 || fields(line, f, 3) != 2 ||
	    dec(f[1], ~0ULL >> 1, &v) != 0 || v == 0)
		return 0;
	return v;
}

/*
 * While a step runs: what came on stdin. A CANCEL of it interrupts it (as
 * SIGTERM does --step's); of another step, none to cancel: ignored. EOF:
 * the agent is gone; the step goes on to its end. Anything else: the
 * step is interrupted, and serve_main refuses once it has ended.
 */
static void
serve_lines(void)
{
	char line[SERVE_LINE_MAX];
	int r;

	while ((r = inb_line(line)) == 1) {
		unsigned long long c = cancel_seq(line);

		if (c == serve_seq)
			step_cancelled = 1;
		else if (c == 0 && serve_bad[0] == '\0') {
			snprintf(serve_bad, sizeof(serve_bad), "%s", "a request other "
			    "than CANCEL came while a step ran");
			step_cancelled = 1;
		}
	}
	if (r < 0 && serve_bad[0] == '\0') {
		snprintf(serve_bad, sizeof(serve_bad), "a request line is over %d "
		    "bytes", SERVE_LINE_MAX);
		step_cancelled = 1;
	}
	if (r < 0)
		inb_pos = inb_len;	/* refused already: room for EOF to be seen */
}

static void
serve_input(void)
{
	if (inb_fill() == 0)
		in_eof = 1;
	serve_lines();
}

/*
 * The step's env as the request sent it: "NAME=VALUE\0" entries. Its
 * AIRLOCK_OUT (required, as --step's) is taken out of it and parsed.
 */
static void
serve_env(char *env, size_t *len)
{
	size_t i = 0, w = 0;
	int out = 0;

	if (*len > 0 && env[*len - 1] != '\0')
		die("%s", "the step's env does not end with a NUL");
	while (i < *len) {
		size_t n = strlen(env + i) + 1;
		const char *eq = strchr(env + i, '=');

		if (eq == NULL || eq == env + i)
			die("%s", "the step's env holds an entry that is not NAME=VALUE");
		if (strncmp(env + i, OUT_ENV "=", sizeof(OUT_ENV)) == 0) {
			if (!(out = out_parse(env + i + sizeof(OUT_ENV))))
				die("%s", "the step's env has a bad " OUT_ENV);
		} else {
			memmove(env + w, env + i, n);
			w += n;
		}
		i += n;
	}
	if (!out)
		die("%s", "the step's env has no " OUT_ENV);
	*len = w;
}

/* warm --serve KERNEL [ARG...]: requests until EOF. */
static int
serve_main(char **kargv)
{
	struct sigaction sa;
	unsigned kseq = (unsigned)getpid();
	char line[SERVE_LINE_MAX], code[SERVE_LINE_MAX];

	serving = 1;
	/* The agent gone mid-step: its output dropped, the step ended well. */
	signal(SIGPIPE, SIG_IGN);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_cancel;
	sigaction(SIGTERM, &sa, NULL);
	for (;;) {
		unsigned long long seq, lim, tmo, grace, elen, blen;
		struct step_req rq;
		char *f[9], *env;
		size_t envlen;
		int r, status;

		/* Kernels this server started and that exited since. */
		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
		serve_seq = 0;
		while ((r = inb_line(line)) == 0)
			if (inb_fill() == 0) {
				if (inb_len > inb_pos)
					die("%s", "the requests end inside a line");
				return 0;
			}
		if (r < 0)
			die("a request line is over %d bytes", SERVE_LINE_MAX);
		if (cancel_seq(line) != 0)
			continue;	/* its step ended as it was sent */
		if (strncmp(line, "STEP ", 5) != 0)
			die("%s", "a request is not a STEP or a CANCEL SEQ line");
		if (fields(line, f, 9) != 8)
			die("%s", "a STEP request has not 8 fields");
		if (dec(f[1], ~0ULL >> 1, &seq) != 0 || seq == 0)
			die("%s", "a STEP's seq is not a number from 1");
		serve_seq = seq;
		if (strcmp(f[2], "-") == 0)
			lim = ~0ULL;
		else if (dec(f[2], MAX_TOTAL, &lim) != 0)
			die("the STEP's limit is not '-' or a byte count up to %ld",
			    MAX_TOTAL);
		if (dec(f[3], SERVE_MS_MAX, &tmo) != 0 || tmo == 0)
			die("%s", "the STEP's timeout_ms is not a number from 1");
		if (dec(f[4], SERVE_MS_MAX, &grace) != 0)
			die("%s", "the STEP's grace_ms is not a number");
		if (dec(f[6], ~0ULL >> 1, &elen) != 0 || elen > SERVE_ENV_MAX)
			die("the STEP's env-bytes is over %ld", SERVE_ENV_MAX);
		if (dec(f[7], ~0ULL >> 1, &blen) != 0 || blen > MAX_TOTAL)
			die("the STEP's body-bytes is over %ld", MAX_TOTAL);
		if (lim != ~0ULL && lim > blen)
			die("%s", "the STEP's limit is over its body-bytes");
		snprintf(code, sizeof(code), "%s", f[5]);
		if ((env = malloc(elen + 1)) == NULL)
			die("%s", "out of memory");
		in_left = (long long)elen;
		if (read_full(0, env, elen) != elen)
			die("%s", "the requests end inside the step's env");
		envlen = (size_t)elen;
		serve_env(env, &envlen);
		rq = (struct step_req){ .limit = lim == ~0ULL ? -1 : (long)lim,
		    .timeout = (long long)tmo, .grace = (long long)grace,
		    .code = code, .env = env, .env_len = envlen, .kseq = ++kseq };
		in_left = (long long)blen;
		status = step_run(&rq, kargv);
		free(env);
		if (serve_bad[0] != '\0')
			die("%s", serve_bad);
		serve_end(seq, status);
		if (in_eof)
			return 0;	/* the agent is gone; the kernel stays */
	}
}

int
main(int argc, char **argv)
{
	long limit = -1;
	char *end;
	int fd = -1, out = out_wanted(), rc;

#ifdef WARM_TEST
	{
		const char *t = getenv("AIRLOCK_TEST_OUT");

		if (t != NULL && *t == '/' && strlen(t) < OUT_DIR_MAX)
			out_dir = out_real = t;
	}
#endif

	if (argc >= 4 && strcmp(argv[1], "--env") == 0) {
		egress_gate();
		from_env(argv[2]);
		unpack(-1, (long)mem_len);
		fd = open(".stdin", O_RDONLY | O_NOFOLLOW);
		if (fd >= 0) {
			if (unlink(".stdin") != 0)
				die("%s", "cannot remove .stdin");
		} else if (errno != ENOENT ||
		    (fd = open("/dev/null", O_RDONLY)) < 0)
			die("%s", "cannot open .stdin or /dev/null");
		return out ? run_then_send(fd, argv + 3) : become(fd, argv + 3);
	}
	if (argc >= 7 && strcmp(argv[1], "--step") == 0) {
		if (!out)
			die("%s", "--step needs AIRLOCK_OUT");
		return step_main(argv + 2);
	}
	if (argc >= 3 && strcmp(argv[1], "--serve") == 0)
		return serve_main(argv + 2);
	if (argc >= 3 && strcmp(argv[1], "--run") == 0)
		return out ? run_then_send(-1, argv + 2) : become(-1, argv + 2);
	if (argc < 3)
		die("%s", "usage: warm BYTES|- PROGRAM [ARG...], warm --env N PROGRAM [ARG...], "
		    "warm --run PROGRAM [ARG...], warm --step ..., or warm --serve KERNEL...");
	if (strcmp(argv[1], "-") != 0) {
		errno = 0;
		limit = strtol(argv[1], &end, 10);
		if (errno || *end || end == argv[1] || limit < 0 || limit > MAX_TOTAL)
			die("'%s' is not a byte count", argv[1]);
	}
	unpack(0, limit);
	if (limit < 0 && (fd = open("/dev/null", O_RDONLY)) < 0)
		die("%s", "cannot open /dev/null");
	if ((rc = zygote_run(fd, argv + 2, out)) >= 0)
		return rc;
	return out ? run_then_send(fd, argv + 2) : become(fd, argv + 2);
}
