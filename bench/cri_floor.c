/*
 * cri_floor - the raw floor for bench/e2e.sh: one pod started straight
 * through CRI, as the kubelet would start it, with no API server, no
 * scheduler and no kubelet in the way:
 *
 *   RunPodSandbox (runtime handler, e.g. runsc) -> CreateContainer ->
 *   StartContainer -> ContainerStatus until EXITED (every 2 ms) -> the
 *   CRI log file read
 *
 * then, untimed, StopPodSandbox and RemovePodSandbox. Prints one line:
 *
 *   ms=<create to output in hand> exit=<code> stdout=<text, JSON-quoted>
 *
 * usage: cri_floor SOCKET HANDLER IMAGE LOGDIR CMD [ARG ...]
 *        cri_floor -x N SOCKET HANDLER IMAGE LOGDIR CMD [ARG ...]
 *
 * With -x, the exec floor instead: the pod's container is a holder
 * (`sleep infinity`), started and running (untimed, reported as ready_ms),
 * and CMD is run in it N times, one after another, through containerd's
 * Tasks.Exec (node-agent/ctrd.h), its output read from FIFOs: each timed
 * from the exec request to exit status and output in hand. Prints
 *
 *   ready_ms=<holder start> exec_ms=<ms,ms,...> exit=<last> stdout=<last>
 *
 * containerd's CRI plugin serves runtime.v1 on the same socket as its own
 * API; the messages are encoded by hand (node-agent/pb.h), with the field
 * numbers of k8s.io/cri-api's api.proto.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "buf.h"
#include "crilog.h"
#include "ctrd.h"
#include "pb.h"

#define SVC	"/runtime.v1.RuntimeService/"
#define CONTAINER_RUNNING	1
#define CONTAINER_EXITED	2

static long long
mono_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* A sandbox made and not yet removed, for die() to remove. */
static struct ctrd *the_ctrd;
static char *the_sandbox;

static void remove_sandbox(void);

static void
die(const char *what, const struct k8s_error *err)
{
	fprintf(stderr, "cri_floor: %s: %s\n", what, err ? err->message : strerror(errno));
	remove_sandbox();
	exit(1);
}

/* Append a nested message as field num. */
static void
put_msg(struct buf *b, int num, const struct buf *m)
{
	if (pb_put_bytes(b, num, m->data ? m->data : "", m->len) != 0)
		die("message too large", NULL);
}

static void
put_str(struct buf *b, int num, const char *s)
{
	if (pb_put_str(b, num, s) != 0)
		die("message too large", NULL);
}

/* The first string field num of a reply. */
static char *
reply_str(const struct buf *reply, int num)
{
	struct pb_reader r;
	struct pb_field f;

	pb_reader_init(&r, reply->data, reply->len);
	while (pb_next(&r, &f) == 1)
		if (f.num == num && f.wire == PB_LEN)
			return pb_strdup(&f);
	return NULL;
}

static void
call(struct ctrd *c, const char *method, struct buf *req, struct buf *reply)
{
	struct k8s_error err;
	char m[128];

	snprintf(m, sizeof(m), SVC "%s", method);
	if (ctrd_call(c, m, req, reply, &err) != 0)
		die(method, &err);
}

/* Stop and remove the_sandbox, if any; errors only reported. */
static void
remove_sandbox(void)
{
	static const char *const steps[] = { SVC "StopPodSandbox", SVC "RemovePodSandbox" };
	struct k8s_error err;
	struct buf req, reply;
	char *id = the_sandbox;

	if (id == NULL)
		return;
	the_sandbox = NULL;
	buf_init(&req, 4096);
	if (pb_put_str(&req, 1, id) == 0)
		for (int i = 0; i < 2; i++) {
			if (ctrd_call(the_ctrd, steps[i], &req, &reply, &err) != 0)
				fprintf(stderr, "cri_floor: %s: %s\n", steps[i], err.message);
			buf_free(&reply);
		}
	buf_free(&req);
	free(id);
}

/* The container's state and exit code, from ContainerStatus. */
static int
status(struct ctrd *c, const char *id, int *exit_code)
{
	struct buf req, reply;
	struct pb_reader r, s;
	struct pb_field f, g;
	int state = 0;

	buf_init(&req, 4096);
	put_str(&req, 1, id);
	call(c, "ContainerStatus", &req, &reply);
	pb_reader_init(&r, reply.data, reply.len);
	while (pb_next(&r, &f) == 1) {
		if (f.num != 1 || f.wire != PB_LEN)
			continue;
		pb_reader_init(&s, f.data, f.len);
		while (pb_next(&s, &g) == 1) {
			if (g.num == 3 && g.wire == PB_VARINT)
				state = (int)g.u;
			else if (g.num == 7 && g.wire == PB_VARINT)
				*exit_code = (int)(int32_t)g.u;
		}
	}
	buf_free(&req);
	buf_free(&reply);
	return state;
}

/* All of a FIFO's read side up to its EOF (non-blocking fd). */
static size_t
drain(int fd, char *out, size_t cap)
{
	size_t len = 0;

	for (;;) {
		struct pollfd p = { fd, POLLIN, 0 };
		ssize_t n;

		(void)poll(&p, 1, 1000);
		n = read(fd, out + len, cap - 1 - len);
		if (n > 0)
			len += (size_t)n;
		else if (n == 0 || (errno != EAGAIN && errno != EINTR))
			break;
		if (len == cap - 1)
			break;
	}
	out[len] = '\0';
	return len;
}

/* The exec floor: run argv n times in the running container. */
static void
exec_floor(struct ctrd *c, const char *container, const char *dir, int n,
    char **argv, long long ready_us)
{
	char fifo[2][4096], out[65536], err_text[65536], eid[32];
	json_t *proc, *args = json_array();
	char *pj, *q;
	struct k8s_error err;
	uint32_t st = 0;
	int fd[2];

	for (char **a = argv; *a; a++)
		json_array_append_new(args, json_string(*a));
	proc = json_pack("{s:o, s:s, s:[s], s:{s:i, s:i}, s:b}", "args", args, "cwd", "/",
	    "env", "PATH=/usr/local/bin:/usr/bin:/bin", "user", "uid", 65532, "gid", 65532,
	    "noNewPrivileges", 1);
	pj = json_dumps(proc, JSON_COMPACT);
	json_decref(proc);
	printf("ready_ms=%.1f exec_ms=", (double)ready_us / 1000.0);
	for (int i = 0; i < n; i++) {
		long long t0 = mono_us();

		for (int k = 0; k < 2; k++) {
			snprintf(fifo[k], sizeof(fifo[k]), "%s/exec-%d-%d", dir, i, k);
			if (mkfifo(fifo[k], 0600) != 0 ||
			    (fd[k] = open(fifo[k], O_RDONLY | O_NONBLOCK | O_CLOEXEC)) < 0)
				die(fifo[k], NULL);
		}
		snprintf(eid, sizeof(eid), "x%d", i);
		if (ctrd_exec(c, container, eid, pj, NULL, fifo[0], fifo[1], NULL, &err) != 0)
			die("exec", &err);
		if (ctrd_exec_wait(c, container, eid, &st, &err) != 0)
			die("exec wait", &err);
		drain(fd[0], out, sizeof(out));
		drain(fd[1], err_text, sizeof(err_text));
		printf("%s%.1f", i ? "," : "", (double)(mono_us() - t0) / 1000.0);
		/* Untimed: the exec's state, the FIFOs. */
		if (ctrd_exec_delete(c, container, eid, &err) != 0)
			die("exec delete", &err);
		for (int k = 0; k < 2; k++) {
			close(fd[k]);
			unlink(fifo[k]);
		}
	}
	{
		json_t *js = json_string_nocheck(out);

		q = json_dumps(js, JSON_ENCODE_ANY);
		json_decref(js);
	}
	printf(" exit=%u stdout=%s\n", st, q);
	free(q);
	free(pj);
}

int
main(int argc, char **argv)
{
	struct buf md, nso, secctx, linux_, sbcfg, req, reply, cmd;
	struct buf cmeta, img, uid, csec, clinux, ccfg;
	char name[64], path[4096], chunk[65536];
	const char *sock, *handler, *image, *logdir;
	struct crilog *log;
	struct ctrd *c;
	char *sandbox, *container;
	long long t0, t1;
	int exit_code = 0, fd;	/* proto3 leaves a 0 out */
	ssize_t n;
	size_t olen;
	const char *otext;
	json_t *js;
	char *q;

	int execs = 0;

	if (argc > 3 && strcmp(argv[1], "-x") == 0) {
		execs = atoi(argv[2]);
		argv += 2;
		argc -= 2;
		if (execs < 1)
			argc = 0;
	}
	if (argc < 6) {
		fprintf(stderr, "usage: cri_floor [-x N] SOCKET HANDLER IMAGE LOGDIR CMD [ARG ...]\n");
		return 2;
	}
	sock = argv[1], handler = argv[2], image = argv[3], logdir = argv[4];
	c = the_ctrd = ctrd_new(sock, "k8s.io");
	snprintf(name, sizeof(name), "floor-%d-%lld", (int)getpid(), mono_us());

	/* PodSandboxConfig */
	buf_init(&md, 4096);
	put_str(&md, 1, name);			/* name */
	put_str(&md, 2, name);			/* uid */
	put_str(&md, 3, "airlock-bench");	/* namespace */
	buf_init(&nso, 64);			/* NamespaceOption: all POD (0) */
	buf_init(&secctx, 256);
	put_msg(&secctx, 1, &nso);
	buf_init(&linux_, 1024);
	put_msg(&linux_, 2, &secctx);
	buf_init(&sbcfg, 8192);
	put_msg(&sbcfg, 1, &md);
	put_str(&sbcfg, 2, name);		/* hostname */
	put_str(&sbcfg, 3, logdir);		/* log_directory */
	put_msg(&sbcfg, 8, &linux_);

	/* ContainerConfig */
	buf_init(&cmeta, 256);
	put_str(&cmeta, 1, "run");
	buf_init(&img, 1024);
	put_str(&img, 1, image);
	buf_init(&cmd, 65536);
	if (execs) {
		put_str(&cmd, 3, "sleep");	/* the holder */
		put_str(&cmd, 3, "infinity");
	} else {
		for (int i = 5; i < argc; i++)
			put_str(&cmd, 3, argv[i]);	/* command, repeated */
	}
	buf_init(&uid, 64);
	if (pb_put_uint(&uid, 1, 65532) != 0)	/* Int64Value */
		die("uid", NULL);
	buf_init(&csec, 256);
	put_msg(&csec, 5, &uid);		/* run_as_user */
	buf_init(&clinux, 512);
	put_msg(&clinux, 2, &csec);
	buf_init(&ccfg, 65536 + 8192);
	put_msg(&ccfg, 1, &cmeta);
	put_msg(&ccfg, 2, &img);
	if (buf_append(&ccfg, cmd.data ? cmd.data : "", cmd.len) != 0)
		die("command too long", NULL);
	put_str(&ccfg, 11, "run.log");		/* log_path, under log_directory */
	put_msg(&ccfg, 15, &clinux);

	t0 = mono_us();
	buf_init(&req, 65536 + 16384);
	put_msg(&req, 1, &sbcfg);
	put_str(&req, 2, handler);
	call(c, "RunPodSandbox", &req, &reply);
	if ((sandbox = reply_str(&reply, 1)) == NULL)
		die("RunPodSandbox: no id", NULL);
	the_sandbox = strdup(sandbox);
	buf_free(&req);
	buf_free(&reply);

	buf_init(&req, 65536 + 16384);
	put_str(&req, 1, sandbox);
	put_msg(&req, 2, &ccfg);
	put_msg(&req, 3, &sbcfg);
	call(c, "CreateContainer", &req, &reply);
	if ((container = reply_str(&reply, 1)) == NULL)
		die("CreateContainer: no id", NULL);
	buf_free(&req);
	buf_free(&reply);

	buf_init(&req, 4096);
	put_str(&req, 1, container);
	call(c, "StartContainer", &req, &reply);
	buf_free(&req);
	buf_free(&reply);

	if (execs) {
		while (status(c, container, &exit_code) != CONTAINER_RUNNING) {
			if (mono_us() - t0 > 60000000LL)
				die("holder not running after 60 s", NULL);
			usleep(2000);
		}
		exec_floor(c, container, logdir, execs, argv + 5, mono_us() - t0);
		remove_sandbox();
		snprintf(path, sizeof(path), "%s/run.log", logdir);
		unlink(path);
		goto out;
	}
	while (status(c, container, &exit_code) != CONTAINER_EXITED) {
		if (mono_us() - t0 > 60000000LL)
			die("not exited after 60 s", NULL);
		usleep(2000);
	}
	log = crilog_new(65536, 65536);
	snprintf(path, sizeof(path), "%s/run.log", logdir);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		die(path, NULL);
	while ((n = read(fd, chunk, sizeof(chunk))) > 0)
		crilog_feed(log, chunk, (size_t)n);
	close(fd);
	crilog_finish(log);
	t1 = mono_us();

	otext = crilog_text(crilog_stdout(log), &olen);
	js = json_stringn_nocheck(otext, olen);
	q = json_dumps(js, JSON_ENCODE_ANY);
	printf("ms=%.1f exit=%d stdout=%s\n", (double)(t1 - t0) / 1000.0,
	    exit_code, q);
	free(q);
	json_decref(js);
	crilog_free(log);

	/* Untimed: what the kubelet does after the pod is gone. */
	remove_sandbox();
	unlink(path);
out:
	free(sandbox);
	free(container);
	buf_free(&md);
	buf_free(&nso);
	buf_free(&secctx);
	buf_free(&linux_);
	buf_free(&sbcfg);
	buf_free(&cmeta);
	buf_free(&img);
	buf_free(&cmd);
	buf_free(&uid);
	buf_free(&csec);
	buf_free(&clinux);
	buf_free(&ccfg);
	ctrd_free(c);
	return 0;
}
