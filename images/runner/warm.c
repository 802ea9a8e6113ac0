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
 *
 * The archive is execution/codetar.h's: ustar, regular files only, paths
 * relative. Anything else (another entry type, an absolute path, a ".."
 * or empty component, a path through a symlink, a file there already) is
 * refused: exit 125 with a message on stderr, and the program never runs.
 * Static (gcc -static), so it needs nothing of the image but a kernel.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define BLOCK		512
#define MAX_TOTAL	(64L << 20)	/* more than any execution may carry */

static void die(const char *fmt, ...)
    __attribute__((format(printf, 1, 2), noreturn));

static void
die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "warm: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(125);
}

/* The archive in memory (warm --env): read_full's fd -1. */
static const unsigned char *mem;
static size_t mem_len, mem_off;

/* Read exactly n bytes (fewer at EOF): the count read. */
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
		r = read(fd, (char *)buf + got, n - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	return got;
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
		parents(name);
		if ((out = open(name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
		    O_CLOEXEC, 0644)) < 0)
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

int
main(int argc, char **argv)
{
	long limit = -1;
	char *end;
	int fd = -1;

	if (argc >= 4 && strcmp(argv[1], "--env") == 0) {
		from_env(argv[2]);
		unpack(-1, (long)mem_len);
		fd = open(".stdin", O_RDONLY | O_NOFOLLOW);
		if (fd >= 0) {
			if (unlink(".stdin") != 0)
				die("%s", "cannot remove .stdin");
		} else if (errno != ENOENT ||
		    (fd = open("/dev/null", O_RDONLY)) < 0)
			die("%s", "cannot open .stdin or /dev/null");
		return become(fd, argv + 3);
	}
	if (argc < 3)
		die("%s", "usage: warm BYTES|- PROGRAM [ARG...], or warm --env N PROGRAM [ARG...]");
	if (strcmp(argv[1], "-") != 0) {
		errno = 0;
		limit = strtol(argv[1], &end, 10);
		if (errno || *end || end == argv[1] || limit < 0 || limit > MAX_TOTAL)
			die("'%s' is not a byte count", argv[1]);
	}
	unpack(0, limit);
	if (limit < 0 && (fd = open("/dev/null", O_RDONLY)) < 0)
		die("%s", "cannot open /dev/null");
	return become(fd, argv + 2);
}
