/*
 * serve.c - a session's step server (docs/sessions.md, "One step client a
 * session"): the node agent execs `warm --serve KERNEL...` into a session's
 * sandbox once, at the first step it runs there, and writes each step
 * after it as a request on that process's stdin; the step's output and its
 * end come back as records on its stdout (the protocol is
 * images/runner/warm.c's header). One exec a session, where each step was
 * one exec (`warm --step`): the exec alone is the 60 ms floor
 * bench/session.sh measures.
 *
 * A server is its pod's (by uid), kept in the agent's list: taken by the
 * step that runs on it (agent_serve_take, which starts one if the pod has
 * none), given back by agent_serve_put when the step ended with its X
 * record, else ended there. The ticker ends idle servers whose pod went,
 * whose process ended, or that wrote between steps (agent_serve_sweep).
 * Ending one closes its stdin: `warm --serve` exits at that EOF and leaves
 * the kernel running, for the next server.
 *
 * Started by `runsc exec` (the agent's --runsc: its pipes are the
 * client's stdio) or by containerd's Tasks.Exec (FIFOs in its directory
 * under the exec directory, named serve-POD_UID-N).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent_priv.h"
#include "clock.h"
#include "log.h"
#include "pool.h"
#include "serve.h"
#include "xmalloc.h"

#define SERVE_CHUNK	(64 * 1024)
#define SERVE_POLL_MS	20	/* a step's loop looks at its run this often */

struct agent_server {
	struct agent_server	*next;
	char			*uid, *ns, *pod, *cid;
	char			*exec_id;	/* containerd's; NULL under --runsc */
	char			 dir[600];
	pid_t			 pid;		/* --runsc: the client */
	int			 pidfd;
	int			 fd[3];		/* its stdin (ours), stdout, stderr */
	unsigned long long	 seq;		/* the last request's */
	int			 busy;
	int			 answered;	/* a record came from it */
	char			 errtail[200];	/* what it said on stderr, first */
	size_t			 errlen;
};

/* --- the records --------------------------------------------------------- */

static int
rx_num(const char *s, unsigned long long max, unsigned long long *v)
{
	unsigned long long n = 0;

	if (*s == '\0' || (s[0] == '0' && s[1] != '\0'))
		return -1;
	for (; *s; s++) {
		if (*s < '0' || *s > '9' || n > (max - (unsigned)(*s - '0')) / 10)
			return -1;
		n = n * 10 + (unsigned)(*s - '0');
	}
	*v = n;
	return 0;
}

static long
rx_fail(struct serve_rx *rx, const char *why)
{
	snprintf(rx->err, sizeof(rx->err), "%s", why);
	return -1;
}

/* A record's line, without its newline: 0, or -1 (rx->err). */
static int
rx_line(struct serve_rx *rx)
{
	unsigned long long v, st;
	char *sp;

	if (rx->llen < 3 || rx->line[1] != ' ')
		return (int)rx_fail(rx, "a record's line is not 'O|E|X ...'");
	if (rx->line[0] == 'O' || rx->line[0] == 'E') {
		if (rx_num(rx->line + 2, SERVE_RX_MAX, &v) != 0 || v == 0)
			return (int)rx_fail(rx, "an output record's length is not "
			    "a number from 1 to 1 MiB");
		rx->stream = rx->line[0] == 'O' ? 1 : 2;
		rx->left = (size_t)v;
		return 0;
	}
	if (rx->line[0] != 'X' || (sp = strchr(rx->line + 2, ' ')) == NULL)
		return (int)rx_fail(rx, "a record's line is not 'O|E|X ...'");
	*sp = '\0';
	if (rx_num(rx->line + 2, ~0ULL >> 1, &v) != 0 ||
	    rx_num(sp + 1, 255, &st) != 0)
		return (int)rx_fail(rx, "an end record is not 'X SEQ STATUS'");
	rx->ended = 1;
	rx->seq = v;
	rx->status = (unsigned)st;
	return 0;
}

long
serve_rx_feed(struct serve_rx *rx, const char *p, size_t n,
    void (*out)(void *arg, int stream, const char *p, size_t n), void *arg)
{
	size_t i = 0;

	if (rx->err[0] != '\0')
		return -1;
	while (i < n && !rx->ended) {
		if (rx->left > 0) {
			size_t k = n - i < rx->left ? n - i : rx->left;

			out(arg, rx->stream, p + i, k);
			rx->left -= k;
			i += k;
			continue;
		}
		if (p[i] == '\n') {
			rx->line[rx->llen] = '\0';
			i++;
			if (rx_line(rx) != 0)
				return -1;
			rx->llen = 0;
			continue;
		}
		if (rx->llen + 1 >= sizeof(rx->line))
			return rx_fail(rx, "a record's line is too long");
		rx->line[rx->llen++] = p[i++];
	}
	return (long)i;
}

/* --- the servers ---------------------------------------------------------- */

static void
server_free(struct agent_server *s)
{
	free(s->uid);
	free(s->ns);
	free(s->pod);
	free(s->cid);
	free(s->exec_id);
	free(s);
}

/* End s (out of the list): its stdin closed, its process gone, its files. */
static void
server_end(struct agent *a, struct agent_server *s)
{
	static const char *const names[] = { "process.json", "in", "out", "err" };
	char path[700];

	for (int i = 0; i < 3; i++)
		if (s->fd[i] >= 0)
			close(s->fd[i]);
	if (s->pidfd >= 0) {
		kill(s->pid, SIGKILL);
		(void)waitpid(s->pid, NULL, 0);
		close(s->pidfd);
	} else if (s->exec_id != NULL && !atomic_load(&a->stop)) {
		/*
		 * Its stdin's EOF ends it; the kill makes sure, and the exec is
		 * removed from its task (the shim would keep every server's).
		 */
		ctrd_exec_abort(a->ctrd, s->cid, s->exec_id);
	}
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", s->dir, names[i]);
		(void)unlink(path);
	}
	(void)rmdir(s->dir);
	server_free(s);
}

/* The process JSON of `warm --serve KERNEL...`: base's, its own args. */
static char *
serve_process(json_t *base, json_t *kernel)
{
	json_t *p = json_deep_copy(base), *args = json_array(), *v;
	char *out;
	size_t i;

	if (p == NULL || args == NULL) {
		json_decref(p);
		json_decref(args);
		return NULL;
	}
	json_array_append_new(args, json_string(POOL_WARM));
	json_array_append_new(args, json_string("--serve"));
	json_array_foreach(kernel, i, v)
		json_array_append(args, v);
	json_object_set_new(p, "args", args);
	json_object_del(p, "terminal");
	json_object_del(p, "consoleSize");
	out = json_dumps(p, JSON_COMPACT);
	json_decref(p);
	return out;
}

static int
write_file(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	size_t n = strlen(s);
	ssize_t w = -1;

	if (fd >= 0) {
		w = write(fd, s, n);
		if (close(fd) != 0)
			w = -1;
	}
	return w == (ssize_t)n ? 0 : -1;
}

/* Through runsc exec: 0, or -1 with why. */
static int
start_runsc(struct agent *a, struct agent_server *s, const char *proc,
    char *why, size_t whylen)
{
	posix_spawn_file_actions_t fa;
	int p[3][2] = { { -1, -1 }, { -1, -1 }, { -1, -1 } }, rc;
	char path[700], *argv[8];
	char *envp[] = { "PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL };

	snprintf(path, sizeof(path), "%s/process.json", s->dir);
	if (write_file(path, proc) != 0) {
		snprintf(why, whylen, "cannot write its step server's process");
		return -1;
	}
	for (int i = 0; i < 3; i++)
		if (pipe2(p[i], O_CLOEXEC) != 0) {
			for (int j = 0; j < i; j++) {
				close(p[j][0]);
				close(p[j][1]);
			}
			snprintf(why, whylen, "cannot make its step server's pipes");
			return -1;
		}
	s->fd[0] = p[0][1];
	s->fd[1] = p[1][0];
	s->fd[2] = p[2][0];
	for (int i = 0; i < 3; i++)
		(void)fcntl(s->fd[i], F_SETFL, O_NONBLOCK);
	argv[0] = (char *)a->o.runsc;
	argv[1] = "--root";
	argv[2] = (char *)a->o.runsc_root;
	argv[3] = "exec";
	argv[4] = "--process";
	argv[5] = path;
	argv[6] = s->cid;
	argv[7] = NULL;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, p[0][0], 0);
	posix_spawn_file_actions_adddup2(&fa, p[1][1], 1);
	posix_spawn_file_actions_adddup2(&fa, p[2][1], 2);
	rc = posix_spawn(&s->pid, a->o.runsc, &fa, NULL, argv, envp);
	posix_spawn_file_actions_destroy(&fa);
	close(p[0][0]);
	close(p[1][1]);
	close(p[2][1]);
	if (rc != 0) {
		snprintf(why, whylen, "cannot start runsc");
		return -1;
	}
	if ((s->pidfd = (int)syscall(SYS_pidfd_open, s->pid, 0)) < 0) {
		kill(s->pid, SIGKILL);
		(void)waitpid(s->pid, NULL, 0);
		snprintf(why, whylen, "cannot follow runsc");
		return -1;
	}
	return 0;
}

/* Through containerd's Tasks.Exec, FIFOs in its directory: 0, or -1. */
static int
start_ctrd(struct agent *a, struct agent_server *s, const char *proc,
    char *why, size_t whylen)
{
	static atomic_ullong n;
	struct k8s_error err;
	char path[3][700], id[80];

	for (int i = 0; i < 3; i++) {
		snprintf(path[i], sizeof(path[i]), "%s/%s", s->dir,
		    (const char *[]){ "in", "out", "err" }[i]);
		if (mkfifo(path[i], 0600) != 0 || (s->fd[i] = open(path[i],
		    (i ? O_RDONLY : O_RDWR) | O_NONBLOCK | O_CLOEXEC)) < 0) {
			snprintf(why, whylen, "cannot make its step server's FIFOs");
			return -1;
		}
	}
	/* Unique past a restart: a Tasks.Exec id is refused twice. */
	snprintf(id, sizeof(id), "serve-%lld-%llu", (long long)time(NULL),
	    (unsigned long long)atomic_fetch_add(&n, 1));
	s->exec_id = xstrdup(id);
	if (ctrd_exec_create(a->ctrd, s->cid, s->exec_id, proc, path[0],
	    path[1], path[2], &err) != 0) {
		snprintf(why, whylen, "%s", err.message);
		free(s->exec_id);
		s->exec_id = NULL;
		return -1;
	}
	if (ctrd_exec_start(a->ctrd, s->cid, s->exec_id, NULL, &err) != 0) {
		snprintf(why, whylen, "%s", err.message);
		ctrd_exec_abort(a->ctrd, s->cid, s->exec_id);
		free(s->exec_id);
		s->exec_id = NULL;
		return -1;
	}
	return 0;
}

/* Ended, or wrote when no step asked: poll says so at once. */
static int
server_done(const struct agent_server *s)
{
	struct pollfd p[2] = { { s->fd[1], POLLIN, 0 }, { s->pidfd, POLLIN, 0 } };

	return poll(p, s->pidfd >= 0 ? 2 : 1, 0) != 0;
}

struct agent_server *
agent_serve_take(struct agent *a, const char *uid, const char *ns,
    const char *pod, const char *cid, json_t *base, json_t *kernel,
    char *why, size_t whylen)
{
	struct agent_server *s, **pp, *stale = NULL;
	static atomic_uint dirs;
	char *proc;
	int rc;

	pthread_mutex_lock(&a->lock);
	for (pp = &a->servers; (s = *pp) != NULL; pp = &s->next)
		if (strcmp(s->uid, uid) == 0)
			break;
	if (s != NULL && !s->busy && server_done(s)) {
		*pp = s->next;
		stale = s;
		s = NULL;
	} else if (s != NULL) {
		rc = s->busy;
		s->busy = 1;
		pthread_mutex_unlock(&a->lock);
		if (rc) {
			snprintf(why, whylen, "its step server is busy");
			return NULL;
		}
		return s;
	}
	pthread_mutex_unlock(&a->lock);
	if (stale)
		server_end(a, stale);
	if ((proc = serve_process(base, kernel)) == NULL) {
		snprintf(why, whylen, "its step server's process cannot be made");
		return NULL;
	}
	s = xcalloc(1, sizeof(*s));
	s->uid = xstrdup(uid);
	s->ns = xstrdup(ns);
	s->pod = xstrdup(pod);
	s->cid = xstrdup(cid);
	s->pid = -1;
	s->pidfd = -1;
	s->fd[0] = s->fd[1] = s->fd[2] = -1;
	snprintf(s->dir, sizeof(s->dir), "%s/serve-%s-%u", a->o.exec_dir, uid,
	    atomic_fetch_add(&dirs, 1));
	(void)mkdir(a->o.exec_dir, 0700);
	if (mkdir(s->dir, 0700) != 0) {
		snprintf(why, whylen, "cannot make its step server's directory");
		free(proc);
		server_free(s);
		return NULL;
	}
	rc = a->o.runsc ? start_runsc(a, s, proc, why, whylen) :
	    start_ctrd(a, s, proc, why, whylen);
	free(proc);
	if (rc != 0) {
		server_end(a, s);
		return NULL;
	}
	s->busy = 1;
	pthread_mutex_lock(&a->lock);
	s->next = a->servers;
	a->servers = s;
	pthread_mutex_unlock(&a->lock);
	log_debug("step server started", "pod=%s/%s", ns, pod);
	return s;
}

void
agent_serve_put(struct agent *a, struct agent_server *s, int keep)
{
	struct agent_server **pp;

	pthread_mutex_lock(&a->lock);
	if (keep && !atomic_load(&a->stop)) {
		s->busy = 0;
		pthread_mutex_unlock(&a->lock);
		return;
	}
	for (pp = &a->servers; *pp != NULL; pp = &(*pp)->next)
		if (*pp == s) {
			*pp = s->next;
			break;
		}
	pthread_mutex_unlock(&a->lock);
	server_end(a, s);
}

unsigned long long
agent_serve_next_seq(struct agent_server *s)
{
	return ++s->seq;
}

int
agent_serve_answered(const struct agent_server *s)
{
	return s->answered;
}

const char *
agent_serve_said(struct agent_server *s)
{
	size_t n = s->errlen;

	/* One line of what it said, for a message: no control bytes. */
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s->errtail[i] < 0x20)
			s->errtail[i] = ' ';
	s->errtail[n < sizeof(s->errtail) ? n : sizeof(s->errtail) - 1] = '\0';
	return s->errtail;
}

struct feed {
	struct agent	*a;
	const char	*uid;
};

static void
feed_out(void *arg, int stream, const char *p, size_t n)
{
	struct feed *f = arg;
	struct run *r;

	pthread_mutex_lock(&f->a->lock);
	if ((r = agent_find_run(f->a, f->uid)) != NULL && r->log)
		crilog_feed_stream(r->log, stream == 2, p, n);
	pthread_mutex_unlock(&f->a->lock);
}

enum serve_end
agent_serve_step(struct agent *a, struct agent_server *s, const char *uid,
    const struct buf *req, unsigned long long seq, unsigned *status)
{
	static __thread char chunk[SERVE_CHUNK];
	struct serve_rx rx = { 0 };
	struct feed f = { a, uid };
	char cancel[48] = "";
	size_t off = 0, coff = 0, clen = 0;

	for (;;) {
		struct pollfd pfd[4];
		int n = 0, want_cancel = 0, gone = 0;
		struct run *r;
		ssize_t got;

		if (atomic_load(&a->stop))
			return SERVE_RUN_GONE;
		pthread_mutex_lock(&a->lock);
		r = agent_find_run(a, uid);
		if (r == NULL || (r->recorded && !r->exited))
			gone = 1;	/* the pod went: cancelled, deleted */
		else
			want_cancel = r->serve_cancel;
		pthread_mutex_unlock(&a->lock);
		if (gone)
			return SERVE_RUN_GONE;
		if (want_cancel && clen == 0)
			clen = (size_t)snprintf(cancel, sizeof(cancel),
			    "CANCEL %llu\n", seq);
		/* The request whole first; a cancel after it. */
		if (off < req->len || (clen && coff < clen))
			pfd[n++] = (struct pollfd){ s->fd[0], POLLOUT, 0 };
		pfd[n++] = (struct pollfd){ s->fd[1], POLLIN, 0 };
		pfd[n++] = (struct pollfd){ s->fd[2], POLLIN, 0 };
		if (s->pidfd >= 0)
			pfd[n++] = (struct pollfd){ s->pidfd, POLLIN, 0 };
		(void)poll(pfd, (nfds_t)n, SERVE_POLL_MS);
		if (off < req->len) {
			got = write(s->fd[0], req->data + off, req->len - off);
			if (got > 0)
				off += (size_t)got;
			else if (got < 0 && errno != EAGAIN && errno != EINTR)
				return s->answered ? SERVE_LOST : SERVE_UNSTARTED;
		} else if (clen && coff < clen) {
			got = write(s->fd[0], cancel + coff, clen - coff);
			if (got > 0)
				coff += (size_t)got;
		}
		while ((got = read(s->fd[2], chunk, sizeof(chunk))) > 0) {
			size_t k = (size_t)got;

			if (s->errlen < sizeof(s->errtail) - 1) {
				if (k > sizeof(s->errtail) - 1 - s->errlen)
					k = sizeof(s->errtail) - 1 - s->errlen;
				memcpy(s->errtail + s->errlen, chunk, k);
				s->errlen += k;
			}
		}
		while ((got = read(s->fd[1], chunk, sizeof(chunk))) > 0) {
			long took = serve_rx_feed(&rx, chunk, (size_t)got,
			    feed_out, &f);

			s->answered = 1;
			if (took < 0) {
				log_warn("step server broke its protocol; ended",
				    "pod=%s/%s why=\"%s\"", s->ns, s->pod, rx.err);
				return SERVE_BROKEN;
			}
			if (rx.ended) {
				if (rx.seq != seq) {
					log_warn("step server ended another step; "
					    "ended", "pod=%s/%s", s->ns, s->pod);
					return SERVE_BROKEN;
				}
				*status = rx.status;
				/* Past the end: not a request's; the server goes. */
				return took == got ? SERVE_DONE : SERVE_DONE_BROKEN;
			}
		}
		if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR))
			return s->answered ? SERVE_LOST : SERVE_UNSTARTED;
	}
}

void
agent_serve_sweep(struct agent *a)
{
	struct agent_server *s, **pp, *done = NULL;

	pthread_mutex_lock(&a->lock);
	for (pp = &a->servers; (s = *pp) != NULL;) {
		json_t *pod = s->busy ? NULL : informer_get(a->pods, s->ns,
		    s->pod);
		int end = !s->busy && (pod == NULL || strcmp(k8s_obj_uid(pod),
		    s->uid) != 0 || json_object_get(json_object_get(pod,
		    "metadata"), "deletionTimestamp") != NULL || server_done(s));

		json_decref(pod);
		if (end) {
			*pp = s->next;
			s->next = done;
			done = s;
		} else {
			pp = &s->next;
		}
	}
	pthread_mutex_unlock(&a->lock);
	while ((s = done) != NULL) {
		done = s->next;
		log_debug("step server ended", "pod=%s/%s", s->ns, s->pod);
		server_end(a, s);
	}
}

void
agent_serve_free_all(struct agent *a)
{
	struct agent_server *s;

	while ((s = a->servers) != NULL) {
		a->servers = s->next;
		server_end(a, s);
	}
}
