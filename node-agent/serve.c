/*
 * serve.c - a session's step server (docs/sessions.md, "The step server:
 * one exec a session"): the node agent execs `warm --serve KERNEL...` into
 * a session's sandbox once, at the first step it runs there, and writes
 * each step after it as a request on that process's stdin; the step's
 * output and its end come back as records on its stdout (the protocol is
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
 * Started by containerd's Tasks.Exec, with the agent's --runsc too (FIFOs
 * in its directory under the exec directory): `runsc exec`'s client
 * would stay resident in the agent's cgroup for the session's life, and
 * the exec's cost is paid once a session. Its end is known from its
 * FIFO's EOF or, since a process of the step's can hold its stdout open,
 * from containerd's TaskExit for its exec (agent_serve_exited).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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
#define SERVE_BUSY_TRIES	50	/* polls a step waits for the one before */
#define SERVE_GONE_MS	1000	/* exited: what is still in its FIFO, then go */
#define SERVE_READS	16	/* chunks read a pass, then the run looked at */
/* warm --serve writes nothing on stderr once serving: more is not its. */
#define SERVE_ERR_MAX	4096

struct agent_server {
	struct agent_server	*next;
	char			*uid, *ns, *pod, *cid;
	char			*exec_id;	/* its exec in the pod's task */
	/*
	 * Its sandbox's pid, checked (gVisor, no network) before it was
	 * started, and the container's OCI process: the same for every step
	 * while it lives (agent_serve_sandbox), two containerd calls fewer.
	 */
	uint32_t		 pid;
	json_t			*base;
	char			 dir[600];
	int			 fd[3];		/* its stdin (ours), stdout, stderr */
	unsigned long long	 seq;		/* the last request's */
	int			 busy;
	int			 gone;		/* its exec, or the sandbox, exited */
	/*
	 * A record came from it, ever: one that ends without has not run a
	 * step (an image whose warm has no --serve, say). This step's: what
	 * stderr said first, and how much.
	 */
	int			 answered;
	char			 errtail[200];
	size_t			 errlen, errtotal;
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
	json_decref(s->base);
	free(s);
}

/* Its FIFOs closed (its stdin's EOF ends it) and its files removed. */
static void
server_close(struct agent_server *s)
{
	static const char *const names[] = { "in", "out", "err" };
	char path[700];

	for (int i = 0; i < 3; i++)
		if (s->fd[i] >= 0) {
			close(s->fd[i]);
			s->fd[i] = -1;
		}
	for (size_t i = 0; s->dir[0] && i < sizeof(names) / sizeof(names[0]);
	    i++) {
		snprintf(path, sizeof(path), "%s/%s", s->dir, names[i]);
		(void)unlink(path);
	}
	if (s->dir[0])
		(void)rmdir(s->dir);
	s->dir[0] = '\0';
}

/* End s (out of the list): closed, its exec gone, freed. */
static void
server_end(struct agent *a, struct agent_server *s)
{
	server_close(s);
	/*
	 * Its stdin's EOF ends it; the kill makes sure, and the exec is
	 * removed from its task (the shim would keep every server's). Not
	 * when stopping: the next agent's servers are new ones, and the
	 * pod's end takes the old.
	 */
	if (s->exec_id != NULL && !atomic_load(&a->stop))
		ctrd_exec_abort(a->ctrd, s->cid, s->exec_id);
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

/*
 * Its directory, FIFOs and exec: 0, or -1 with why. Names that an agent
 * restarted (its counters from 0 again) cannot meet: the clock's ms in
 * each, and a directory taken is passed over.
 */
static int
server_start(struct agent *a, struct agent_server *s, const char *proc,
    char *why, size_t whylen)
{
	static atomic_uint n;
	struct k8s_error err;
	char path[3][700], id[80];
	int made = 0;

	(void)mkdir(a->o.exec_dir, 0700);
	for (int i = 0; i < 4 && !made; i++) {
		snprintf(id, sizeof(id), "serve-%lld-%u",
		    (long long)(agent_now_ns() / 1000000),
		    atomic_fetch_add(&n, 1));
		snprintf(s->dir, sizeof(s->dir), "%s/%s-%s", a->o.exec_dir, id,
		    s->uid);
		made = mkdir(s->dir, 0700) == 0;
		if (!made && errno != EEXIST)
			break;
	}
	if (!made) {
		s->dir[0] = '\0';
		snprintf(why, whylen, "cannot make its step server's directory");
		return -1;
	}
	for (int i = 0; i < 3; i++) {
		snprintf(path[i], sizeof(path[i]), "%s/%s", s->dir,
		    (const char *[]){ "in", "out", "err" }[i]);
		if (mkfifo(path[i], 0600) != 0 || (s->fd[i] = open(path[i],
		    (i ? O_RDONLY : O_RDWR) | O_NONBLOCK | O_CLOEXEC)) < 0) {
			snprintf(why, whylen, "cannot make its step server's FIFOs");
			return -1;
		}
	}
	pthread_mutex_lock(&a->lock);
	s->exec_id = xstrdup(id);	/* agent_serve_exited reads it, locked */
	pthread_mutex_unlock(&a->lock);
	if (ctrd_exec_create(a->ctrd, s->cid, id, proc, path[0], path[1],
	    path[2], &err) != 0) {
		snprintf(why, whylen, "%s", err.message);
		return -1;
	}
	if (ctrd_exec_start(a->ctrd, s->cid, s->exec_id, NULL, &err) != 0) {
		/* It may run: server_end kills it. Nothing was sent to it. */
		snprintf(why, whylen, "%s", err.message);
		return -1;
	}
	return 0;
}

/* Exited, or wrote when no step asked: ended before it is taken (lock held). */
static int
server_done(const struct agent_server *s)
{
	struct pollfd p = { s->fd[1], POLLIN, 0 };

	return s->gone || poll(&p, 1, 0) != 0;
}

int
agent_serve_sandbox(struct agent *a, const char *uid, uint32_t *pid,
    json_t **base)
{
	struct agent_server *s;
	int ok = 0;

	pthread_mutex_lock(&a->lock);
	for (s = a->servers; s != NULL; s = s->next)
		if (strcmp(s->uid, uid) == 0)
			break;
	if (s != NULL && !s->busy && !s->gone && s->pid != 0) {
		*pid = s->pid;
		*base = json_incref(s->base);
		ok = 1;
	}
	pthread_mutex_unlock(&a->lock);
	return ok;
}

struct agent_server *
agent_serve_take(struct agent *a, const char *uid, const char *ns,
    const char *pod, const char *cid, uint32_t pid, json_t *base,
    json_t *kernel, char *why, size_t whylen)
{
	struct agent_server *s, **pp, *stale = NULL;
	char *proc;
	int rc;

	pthread_mutex_lock(&a->lock);
	/*
	 * Busy: the step before, ended by the ticker (its pod's cancel, a
	 * kill), whose thread gives it back within a poll.
	 */
	for (int tries = 0;; tries++) {
		for (pp = &a->servers; (s = *pp) != NULL; pp = &s->next)
			if (strcmp(s->uid, uid) == 0)
				break;
		if (s == NULL || !s->busy || tries == SERVE_BUSY_TRIES)
			break;
		pthread_mutex_unlock(&a->lock);
		usleep(SERVE_POLL_MS * 1000);
		pthread_mutex_lock(&a->lock);
	}
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
	s->pid = pid;
	s->base = json_incref(base);
	s->fd[0] = s->fd[1] = s->fd[2] = -1;
	/*
	 * Listed, busy, before its start: an exit that comes before the
	 * start's answer finds it (agent_serve_exited).
	 */
	s->busy = 1;
	pthread_mutex_lock(&a->lock);
	s->next = a->servers;
	a->servers = s;
	pthread_mutex_unlock(&a->lock);
	rc = server_start(a, s, proc, why, whylen);
	free(proc);
	if (rc != 0) {
		agent_serve_put(a, s, 0);
		return NULL;
	}
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

void
agent_serve_exited(struct agent *a, const char *cid, const char *exec_id)
{
	for (struct agent_server *s = a->servers; s; s = s->next)
		if (strcmp(s->cid, cid) == 0 && (exec_id == NULL ||
		    (s->exec_id && strcmp(s->exec_id, exec_id) == 0)))
			s->gone = 1;
}

unsigned long long
agent_serve_next_seq(struct agent_server *s)
{
	return ++s->seq;
}

const char *
agent_serve_said(struct agent_server *s)
{
	size_t n = s->errlen < sizeof(s->errtail) ? s->errlen :
	    sizeof(s->errtail) - 1;

	/* One line of printable ASCII, for a message (a status's UTF-8). */
	for (size_t i = 0; i < n; i++)
		if (s->errtail[i] < 0x20 || s->errtail[i] > 0x7e)
			s->errtail[i] = ' ';
	s->errtail[n] = '\0';
	return s->errtail;
}

/*
 * The run of step step_uid on pod uid (lock held): the pod's run, if it
 * is that step's (never the pod's next one).
 */
struct run *
agent_step_run(struct agent *a, const char *uid, const char *step_uid)
{
	struct run *r = agent_find_run(a, uid);

	return r && r->step && r->cx_uid && strcmp(r->cx_uid, step_uid) == 0 ?
	    r : NULL;
}

/*
 * A read's output, gathered (at most a read's bytes each), then fed to
 * the run's crilog under one lock: a record can be a few bytes.
 */
struct feed {
	char	*out[2];
	size_t	 len[2];
};

static void
feed_out(void *arg, int stream, const char *p, size_t n)
{
	struct feed *f = arg;

	memcpy(f->out[stream - 1] + f->len[stream - 1], p, n);
	f->len[stream - 1] += n;
}

/*
 * Its end, inside a step: a server that never answered may not have
 * started it; one that did had it, whole or not.
 */
static enum serve_end
ended(const struct agent_server *s)
{
	return s->answered ? SERVE_LOST : SERVE_UNSTARTED;
}

/* What a read gathered, into the step's run. */
static void
feed_flush(struct agent *a, const char *uid, const char *step_uid,
    struct feed *f)
{
	struct run *r;

	if (f->len[0] == 0 && f->len[1] == 0)
		return;
	pthread_mutex_lock(&a->lock);
	if ((r = agent_step_run(a, uid, step_uid)) != NULL && r->log) {
		if (f->len[0])
			crilog_feed_stream(r->log, 0, f->out[0], f->len[0]);
		if (f->len[1])
			crilog_feed_stream(r->log, 1, f->out[1], f->len[1]);
	}
	pthread_mutex_unlock(&a->lock);
	f->len[0] = f->len[1] = 0;
}

static enum serve_end
serve_loop(struct agent *a, struct agent_server *s, const char *uid,
    const char *step_uid, const struct buf *req, unsigned long long seq,
    unsigned *status, char *chunk, struct feed *f);

enum serve_end
agent_serve_step(struct agent *a, struct agent_server *s, const char *uid,
    const char *step_uid, const struct buf *req, unsigned long long seq,
    unsigned *status)
{
	char *mem = xmalloc(3 * SERVE_CHUNK);
	struct feed f = { { mem + SERVE_CHUNK, mem + 2 * SERVE_CHUNK }, { 0, 0 } };
	enum serve_end e = serve_loop(a, s, uid, step_uid, req, seq, status, mem,
	    &f);

	free(mem);
	return e;
}

static enum serve_end
serve_loop(struct agent *a, struct agent_server *s, const char *uid,
    const char *step_uid, const struct buf *req, unsigned long long seq,
    unsigned *status, char *chunk, struct feed *f)
{
	struct serve_rx rx = { 0 };
	char cancel[48] = "";
	size_t off = 0, coff = 0, clen = 0;
	long long gone_at = 0;
	int err_open = 1;

	s->errlen = s->errtotal = 0;
	for (;;) {
		struct pollfd pfd[3];
		int n = 0, want_cancel = 0, run_gone = 0, gone;
		struct run *r;
		ssize_t got = -1;

		if (atomic_load(&a->stop))
			return SERVE_RUN_GONE;
		pthread_mutex_lock(&a->lock);
		r = agent_step_run(a, uid, step_uid);
		if (r == NULL || (r->recorded && !r->exited))
			run_gone = 1;	/* the pod went: cancelled, deleted */
		else
			want_cancel = r->interrupt_sent;
		gone = s->gone;
		pthread_mutex_unlock(&a->lock);
		if (run_gone)
			return SERVE_RUN_GONE;
		if (gone && gone_at == 0)
			gone_at = clock_mono_ms();
		if (gone_at && clock_mono_ms() - gone_at > SERVE_GONE_MS)
			return ended(s);
		if (want_cancel && clen == 0)
			clen = (size_t)snprintf(cancel, sizeof(cancel),
			    "CANCEL %llu\n", seq);
		/* The request whole first; a cancel after it. */
		if (off < req->len || (clen && coff < clen))
			pfd[n++] = (struct pollfd){ s->fd[0], POLLOUT, 0 };
		pfd[n++] = (struct pollfd){ s->fd[1], POLLIN, 0 };
		if (err_open)
			pfd[n++] = (struct pollfd){ s->fd[2], POLLIN, 0 };
		(void)poll(pfd, (nfds_t)n, SERVE_POLL_MS);
		if (off < req->len) {
			got = write(s->fd[0], req->data + off, req->len - off);
			if (got > 0)
				off += (size_t)got;
			else if (got < 0 && errno != EAGAIN && errno != EINTR)
				return ended(s);
		} else if (clen && coff < clen) {
			got = write(s->fd[0], cancel + coff, clen - coff);
			if (got > 0)
				coff += (size_t)got;
		}
		for (int i = 0; err_open && i < SERVE_READS; i++) {
			if ((got = read(s->fd[2], chunk, SERVE_CHUNK)) <= 0) {
				if (got == 0 || (errno != EAGAIN && errno != EINTR))
					err_open = 0;
				break;
			}
			if (s->errlen < sizeof(s->errtail)) {
				size_t k = (size_t)got < sizeof(s->errtail) -
				    s->errlen ? (size_t)got : sizeof(s->errtail) -
				    s->errlen;

				memcpy(s->errtail + s->errlen, chunk, k);
				s->errlen += k;
			}
			if ((s->errtotal += (size_t)got) > SERVE_ERR_MAX) {
				log_warn("step server wrote past its stderr's "
				    "bound; ended", "pod=%s/%s", s->ns, s->pod);
				return SERVE_BROKEN;
			}
		}
		for (int i = 0; i < SERVE_READS; i++) {
			long took;

			if ((got = read(s->fd[1], chunk, SERVE_CHUNK)) <= 0)
				break;
			took = serve_rx_feed(&rx, chunk, (size_t)got, feed_out, f);
			feed_flush(a, uid, step_uid, f);
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
				/*
				 * Bytes past the end, or an end before the
				 * request was all taken: not a server to keep.
				 */
				return took == got && off == req->len ? SERVE_DONE :
				    SERVE_DONE_BROKEN;
			}
		}
		if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR))
			return ended(s);
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
	if (done == NULL)
		return;
	/*
	 * Closed here (its fds and files go at once); its exec ended on a
	 * worker: containerd's calls must not hold the ticker.
	 */
	for (s = done; ; s = s->next) {
		server_close(s);
		if (s->next == NULL)
			break;
	}
	pthread_mutex_lock(&a->lock);
	s->next = a->servers_ended;
	a->servers_ended = done;
	workqueue_add(a->q, "serve-end");
	pthread_mutex_unlock(&a->lock);
}

void
agent_serve_end_swept(struct agent *a)
{
	struct agent_server *s, *done;

	pthread_mutex_lock(&a->lock);
	done = a->servers_ended;
	a->servers_ended = NULL;
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
	while ((s = a->servers_ended) != NULL) {
		a->servers_ended = s->next;
		server_end(a, s);
	}
}
