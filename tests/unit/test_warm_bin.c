/*
 * Unit tests: /airlock/bin/warm (images/runner/warm.c), built for the host
 * as $(B)/images/warm, on what a direct pod hands it: the tar of the
 * program, its files and .stdin, base64 in AIRLOCK_TAR_0 .. N-1, cut
 * anywhere. In the sandbox it parses tenant data; here every path of it
 * runs, under ASan in the asan tier.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include <openssl/evp.h>

#include "buf.h"
#include "artifacts.h"
#include "codetar.h"
#include "crilog.h"
#include "itutil.h"

static char warm[4096 + 16];

static int
group_setup(void **state)
{
	(void)state;
	return it_images_bin("warm", warm, sizeof(warm));
}

/* The base64 of the tar of e[0..n). A new string. */
static char *
b64_tar(const struct codetar_entry *e, size_t n)
{
	struct buf tar;
	size_t bad;
	char *out;

	buf_init(&tar, 1 << 22);
	assert_int_equal(codetar_build(e, n, &tar, &bad), 0);
	out = malloc(4 * ((tar.len + 2) / 3) + 1);
	EVP_EncodeBlock((unsigned char *)out, (unsigned char *)tar.data, (int)tar.len);
	buf_free(&tar);
	return out;
}

/*
 * Run warm --env COUNT sh -c SCRIPT in a fresh directory, with the
 * base64 text b64 cut into pieces of piece bytes (the last shorter), as
 * AIRLOCK_TAR_0.. (count_arg NULL: their number). Its exit status; its
 * stdout and stderr, together, in out.
 */
static int
run(const char *b64, size_t piece, const char *count_arg, const char *script,
    char **out)
{
	char dir[] = "/tmp/airlock-warm-test-XXXXXX", cmd[16384], count[32];
	size_t len = strlen(b64), n = 0;
	int st;

	assert_non_null(mkdtemp(dir));
	for (size_t off = 0; off < len; off += piece, n++) {
		char name[48], *v = strndup(b64 + off, piece);

		snprintf(name, sizeof(name), "AIRLOCK_TAR_%zu", n);
		setenv(name, v, 1);
		free(v);
	}
	snprintf(count, sizeof(count), "%zu", n);
	snprintf(cmd, sizeof(cmd), "cd %s && %s --env %s sh -c '%s' 2>&1; echo \"exit $?\"",
	    dir, warm, count_arg ? count_arg : count, script);
	st = it_sh(cmd, out, NULL);
	for (size_t i = 0; i < n + 2; i++) {
		char name[48];

		snprintf(name, sizeof(name), "AIRLOCK_TAR_%zu", i);
		unsetenv(name);
	}
	{
		char *o = NULL;

		snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
		if (it_sh(cmd, &o, NULL) != 0)
			fail_msg("cannot remove %s", dir);
		free(o);
	}
	return st;
}

/*
 * The files, byte for byte, in the working directory; .stdin the
 * program's standard input and gone from the directory; the vars gone
 * from its environment. Whatever the pieces' size: a piece's end falls
 * inside a base64 quantum, or on it.
 */
static void
test_unpack_any_pieces(void **state)
{
	static const size_t pieces[] = { 7, 11, 64, 1 << 20 };
	const struct codetar_entry e[] = { { "main.py", "print(1)\n", 9 },
	    { "lib/data.bin", "a\0b\n", 4 }, { ".stdin", "in-put", 6 } };
	char *b64 = b64_tar(e, 3), *out;

	(void)state;
	for (size_t i = 0; i < sizeof(pieces) / sizeof(pieces[0]); i++) {
		assert_int_equal(run(b64, pieces[i], NULL, "cat; echo; ls -A; "
		    "od -An -c lib/data.bin; cat main.py; env | grep -c AIRLOCK_TAR_",
		    &out), 0);
		assert_string_equal(out, "in-put\nlib\nmain.py\n   a  \\0   b  \\n\n"
		    "print(1)\n0\nexit 1\n");
		free(out);
	}
	free(b64);
}

/*
 * A direct pod with egress (docs/network.md): warm --env runs the start
 * gate before the program. Nothing answers on the gate's open port: the
 * gate says so, warm exits 125, and the program never ran (no file). A
 * gate address whose open port answers and whose closed port refuses,
 * but whose metered port answers too: no meter, the same. Its metered
 * port dropping connects (a listener whose queue is full: the kernel
 * drops the SYN, as the node agent's rule does): the program runs.
 */
static void
test_egress_gate(void **state)
{
	const struct codetar_entry e[] = { { "main.sh", "x", 1 } };
	char *b64 = b64_tar(e, 1), *out, gate[128];
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t len = sizeof(sa);
	int open_fd = socket(AF_INET, SOCK_STREAM, 0), closed_port, meter_port;
	int busy_fd = socket(AF_INET, SOCK_STREAM, 0), busy_port;

	(void)state;
	/*
	 * Ports: two listening, two free (nothing there: refused). Nothing
	 * accepts: the backlog holds a second of rounds (at most 3 connects
	 * to OPEN each, 20 a second).
	 */
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(busy_fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(busy_fd, 128), 0);
	assert_int_equal(getsockname(busy_fd, (struct sockaddr *)&sa, &len), 0);
	busy_port = ntohs(sa.sin_port);
	sa.sin_port = 0;
	assert_int_equal(bind(open_fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(open_fd, 128), 0);
	assert_int_equal(getsockname(open_fd, (struct sockaddr *)&sa, &len), 0);
	closed_port = it_free_port();
	meter_port = it_free_port();

	snprintf(gate, sizeof(gate), "%d %d %d 1 127.0.0.1", closed_port,
	    meter_port, ntohs(sa.sin_port));
	setenv("AIRLOCK_EGRESS_GATE", gate, 1);
	assert_int_equal(run(b64, 1 << 20, NULL, "touch ran; echo ran", &out), 0);
	assert_non_null(strstr(out, "airlock: egress: "));
	assert_non_null(strstr(out, "no gate answered"));
	assert_null(strstr(out, "ran\n"));
	assert_non_null(strstr(out, "exit 125\n"));
	free(out);

	/* The metered port answers: no meter. */
	snprintf(gate, sizeof(gate), "%d %d %d 1 127.0.0.1", ntohs(sa.sin_port),
	    busy_port, closed_port);
	setenv("AIRLOCK_EGRESS_GATE", gate, 1);
	assert_int_equal(run(b64, 1 << 20, NULL, "touch ran; echo ran", &out), 0);
	if (strstr(out, "airlock: egress: the egress meter was not seen in place "
	    "within 1 s") == NULL)
		fail_msg("%s: %s", gate, out);
	assert_null(strstr(out, "ran\n"));
	assert_non_null(strstr(out, "exit 125\n"));
	free(out);

	{
		int full = socket(AF_INET, SOCK_STREAM, 0), c[2];
		struct sockaddr_in fa = { .sin_family = AF_INET };
		socklen_t flen = sizeof(fa);

		fa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		assert_int_equal(bind(full, (struct sockaddr *)&fa, sizeof(fa)), 0);
		assert_int_equal(listen(full, 0), 0);
		assert_int_equal(getsockname(full, (struct sockaddr *)&fa, &flen), 0);
		/* Backlog 0 holds one; two fill it, and the next SYNs are dropped. */
		for (int i = 0; i < 2; i++) {
			c[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
			(void)connect(c[i], (struct sockaddr *)&fa, sizeof(fa));
		}
		usleep(100000);
		snprintf(gate, sizeof(gate), "%d %d %d 5 127.0.0.1", ntohs(sa.sin_port),
		    ntohs(fa.sin_port), closed_port);
		setenv("AIRLOCK_EGRESS_GATE", gate, 1);
		assert_int_equal(run(b64, 1 << 20, NULL, "echo ran", &out), 0);
		assert_string_equal(out, "ran\nexit 0\n");
		free(out);
		close(c[0]);
		close(c[1]);
		close(full);
	}
	unsetenv("AIRLOCK_EGRESS_GATE");
	close(open_fd);
	close(busy_fd);
	free(b64);
}

/* No .stdin: the program reads /dev/null, never a terminal or a pipe. */
static void
test_no_stdin(void **state)
{
	const struct codetar_entry e[] = { { "main.sh", "x", 1 } };
	char *b64 = b64_tar(e, 1), *out;

	(void)state;
	assert_int_equal(run(b64, 7, NULL, "wc -c; ls -A", &out), 0);
	assert_string_equal(out, "0\nmain.sh\nexit 0\n");
	free(out);
	free(b64);
}

/* What it refuses: exit 125 and why, the program never run. */
static void
test_refused(void **state)
{
	const struct codetar_entry ok[] = { { "main.py", "x", 1 } };
	char *b64 = b64_tar(ok, 1), *bad, *out;
	struct buf tar;

	(void)state;
	/* A count that is not one, or names a var that is not set. */
	assert_int_equal(run(b64, 8, "x", "echo ran", &out), 0);
	assert_string_equal(out, "warm: 'x' is not a count of env vars\nexit 125\n");
	free(out);
	assert_int_equal(run(b64, 8, "0", "echo ran", &out), 0);
	assert_string_equal(out, "warm: '0' is not a count of env vars\nexit 125\n");
	free(out);
	assert_int_equal(run(b64, 1 << 20, "2", "echo ran", &out), 0);
	assert_string_equal(out, "warm: AIRLOCK_TAR_1 is not set\nexit 125\n");
	free(out);
	/* Not base64, or padding inside. */
	bad = strdup(b64);
	bad[10] = '*';
	assert_int_equal(run(bad, 1 << 20, NULL, "echo ran", &out), 0);
	assert_string_equal(out, "warm: AIRLOCK_TAR_0 is not base64\nexit 125\n");
	free(out);
	free(bad);
	bad = malloc(strlen(b64) + 8);
	sprintf(bad, "QQ==%s", b64);
	assert_int_equal(run(bad, 1 << 20, NULL, "echo ran", &out), 0);
	assert_string_equal(out, "warm: AIRLOCK_TAR_0 is not base64\nexit 125\n");
	free(out);
	free(bad);
	free(b64);
	/* A path out of the directory, made by hand (codetar refuses it). */
	buf_init(&tar, 1 << 16);
	{
		char h[512] = { 0 }, sum[8];
		unsigned s = 0;

		snprintf(h, 100, "../escape");
		memcpy(h + 100, "0000644", 7);
		memcpy(h + 124, "00000000001", 11);
		h[156] = '0';
		memcpy(h + 257, "ustar", 6);
		memset(h + 148, ' ', 8);
		for (int i = 0; i < 512; i++)
			s += (unsigned char)h[i];
		snprintf(sum, sizeof(sum), "%06o", s);
		memcpy(h + 148, sum, 7);
		assert_int_equal(buf_append(&tar, h, 512), 0);
		memset(h, 0, 512);
		h[0] = 'x';
		assert_int_equal(buf_append(&tar, h, 512), 0);
		memset(h, 0, 512);
		assert_int_equal(buf_append(&tar, h, 512), 0);
		assert_int_equal(buf_append(&tar, h, 512), 0);
	}
	bad = malloc(4 * ((tar.len + 2) / 3) + 1);
	EVP_EncodeBlock((unsigned char *)bad, (unsigned char *)tar.data, (int)tar.len);
	buf_free(&tar);
	assert_int_equal(run(bad, 100, NULL, "echo ran", &out), 0);
	assert_string_equal(out, "warm: refused path '../escape'\nexit 125\n");
	free(out);
	free(bad);
}

/*
 * Files out: with AIRLOCK_OUT, the program runs as warm's child and its
 * /airlock/out (here OUT_DIR, /tmp/airlock-test-out: the Makefile's) goes
 * out after its output, framed; the node agent's side (crilog's filter,
 * artifacts_parse) reads back the files, byte for byte, and what was
 * left out, with why. Its exit status is the program's.
 */
static void
test_files_out(void **state)
{
	char cmd[16384], *out = NULL, nonce[33];
	struct crilog *l;
	struct artifacts a;
	const char *body;
	size_t len;
	int st;

	(void)state;
	artifacts_nonce("0b8f8f4e-63a4-4f54-9c1c-2a7c1d1e6f00", nonce);
	{
		static const char script[] =
		    "printf 'out, no newline'\n"
		    "[ -z \"$AIRLOCK_OUT\" ] || echo leaked\n"
		    "mkdir -p /tmp/airlock-test-out/sub && cd /tmp/airlock-test-out || exit 9\n"
		    "printf '\\211PNG\\r\\n\\032\\nrest' > p.png\n"
		    "printf 'a,b\\n1,2\\n' > sub/t.csv\n"
		    "head -c 3500 /dev/zero > big.bin\n"
		    "echo x > c.txt\necho y > d.txt\nln -s /etc/passwd link\n"
		    "sleep 60 &\nexit 7\n";
		FILE *f = fopen("/tmp/airlock-test-script.sh", "w");

		assert_non_null(f);
		fputs(script, f);
		fclose(f);
	}
	snprintf(cmd, sizeof(cmd), "rm -rf /tmp/airlock-test-out && cd /tmp && "
	    "AIRLOCK_OUT='%s 3000 3' %s --run sh /tmp/airlock-test-script.sh "
	    "2>/dev/null; echo \" exit $?\"", nonce, warm);
	assert_int_equal(it_sh(cmd, &out, NULL), 0);
	l = crilog_new(65536, 65536);
	crilog_out_frame(l, nonce, 1 << 20);
	crilog_feed_stream(l, 0, out, strlen(out));
	crilog_finish(l);
	/* Its output, its status; the frame is not in it. */
	assert_string_equal(crilog_text(crilog_stdout(l), NULL), "out, no newline exit 7\n");
	body = crilog_frame(l, &len, &st);
	assert_int_equal(st, CRILOG_FRAME_COMPLETE);
	artifacts_parse(body, len, 3000, 3, &a);
	assert_string_equal(a.error, "");
	/* By path: big.bin, c.txt, d.txt, p.png, sub/t.csv; 3 files, 3000 bytes. */
	assert_int_equal(a.nfiles, 3);
	assert_string_equal(a.files[0].path, "c.txt");
	assert_string_equal(a.files[0].content_type, "text/plain");
	assert_string_equal(a.files[1].path, "d.txt");
	assert_string_equal(a.files[2].path, "p.png");
	assert_int_equal(a.files[2].size, 12);
	assert_memory_equal(a.files[2].data, "\x89PNG\r\n\x1a\nrest", 12);
	assert_string_equal(a.files[2].content_type, "image/png");
	{
		/* What the runner left out, and why, in its words. */
		char msg[1024];

		artifacts_message(&a, msg, sizeof(msg));
		assert_string_equal(msg, "; 3 files out left out: big.bin (3500 bytes: "
		    "over the byte budget), link (not a regular file), sub/t.csv "
		    "(8 bytes: past the limit on files)");
	}
	artifacts_free(&a);
	crilog_free(l);
	free(out);
	/* Nothing in it: no frame at all. Without AIRLOCK_OUT: as before. */
	snprintf(cmd, sizeof(cmd), "rm -rf /tmp/airlock-test-out && cd /tmp && "
	    "AIRLOCK_OUT='%s 3000 3' %s --run sh -c 'echo hi' && "
	    "%s --run sh -c 'echo \"$$\"; exit 3'; echo \"exit $?\"", nonce, warm, warm);
	out = NULL;
	assert_int_equal(it_sh(cmd, &out, NULL), 0);
	assert_null(strchr(out, 0x1e));
	assert_non_null(strstr(out, "hi\n"));
	assert_non_null(strstr(out, "exit 3\n"));
	free(out);
	/* Killed by a signal: 128 + it, as a shell says. */
	snprintf(cmd, sizeof(cmd), "cd /tmp && AIRLOCK_OUT='%s 3000 3' %s --run sh -c "
	    "'kill -TERM $$'; echo \"exit $?\"", nonce, warm);
	out = NULL;
	assert_int_equal(it_sh(cmd, &out, NULL), 0);
	assert_non_null(strstr(out, "exit 143\n"));
	free(out);
	assert_int_equal(system("rm -rf /tmp/airlock-test-out /tmp/airlock-test-script.sh"), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_unpack_any_pieces),
		cmocka_unit_test(test_egress_gate),
		cmocka_unit_test(test_no_stdin),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_files_out),
	};

	return cmocka_run_group_tests(tests, group_setup, NULL);
}
