/*
 * meter.c - the egress byte cap on this node (docs/network.md, "The byte
 * cap"): each execution pod with egress gets its chain (meter.h) in the
 * node's netfilter before its program may run, its counters are read
 * while it runs (past its cap: stopped, EgressLimitExceeded), and at its
 * end, its bytes go into its result and the chain goes.
 *
 * One pass (a worker's "meter" key) does it all from one listing,
 * `iptables-save -c -t mangle`, and one `iptables-restore --noflush`:
 * install the chains of runs that need one, read the counters, remove
 * the chains of runs that ended and those no pod of this node owns (an
 * agent that restarted finds its runs' chains and keeps them, counters
 * and all). The ticker asks for a pass as soon as a run needs one, and
 * every METER_MS while a metered run lives.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent_priv.h"
#include "clock.h"
#include "log.h"
#include "meter.h"
#include "podspec.h"
#include "xmalloc.h"

#define METER_LIST_MAX	(8 << 20)	/* bytes of a listing read at most */
#define METER_SCRIPT_MAX (4 << 20)
#define METER_CMD_MS	10000		/* an iptables command's time at most */

/*
 * Run argv (argv[0] a path, or a name on the agent's PATH), in its stdin
 * (may be NULL), its stdout up to METER_LIST_MAX into *outp when outp is
 * set. 0 when it exited 0, else -1.
 */
static int
run_cmd(char *const *argv, const char *in, char **outp, char *err, size_t errlen)
{
	char *envp[] = { "PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL };
	posix_spawn_file_actions_t fa;
	int ip[2] = { -1, -1 }, op[2], ep[2] = { -1, -1 }, rc, st = 0;
	struct buf out;
	pid_t pid;

	buf_init(&out, METER_LIST_MAX);
	if (pipe2(op, O_CLOEXEC) != 0)
		return -1;
	if ((in && pipe2(ip, O_CLOEXEC) != 0) || pipe2(ep, O_CLOEXEC | O_NONBLOCK) != 0) {
		close(op[0]);
		close(op[1]);
		if (ip[0] >= 0) {
			close(ip[0]);
			close(ip[1]);
		}
		return -1;
	}
	posix_spawn_file_actions_init(&fa);
	if (in)
		posix_spawn_file_actions_adddup2(&fa, ip[0], 0);
	else
		posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, op[1], 1);
	posix_spawn_file_actions_adddup2(&fa, ep[1], 2);
	rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, envp);
	posix_spawn_file_actions_destroy(&fa);
	close(op[1]);
	close(ep[1]);
	if (in)
		close(ip[0]);
	if (rc != 0) {
		close(op[0]);
		close(ep[0]);
		if (in)
			close(ip[1]);
		return -1;
	}
	/* A script is a few KiB a run: written whole before anything is read. */
	for (size_t off = 0, len = in ? strlen(in) : 0; off < len;) {
		ssize_t w = write(ip[1], in + off, len - off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			break;
		off += (size_t)w;
	}
	if (in)
		close(ip[1]);
	for (long long end = clock_mono_ms() + METER_CMD_MS;;) {
		struct pollfd pf = { op[0], POLLIN, 0 };
		char chunk[65536];
		long long left = end - clock_mono_ms();
		int k = left > 0 ? poll(&pf, 1, (int)left) : 0;
		ssize_t n;

		if (k < 0 && errno == EINTR)
			continue;
		/* A hung iptables (its lock held elsewhere): killed, a failure. */
		if (k == 0) {
			kill(pid, SIGKILL);
			st = -1;
			break;
		}
		n = read(op[0], chunk, sizeof(chunk));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		if (buf_append(&out, chunk, (size_t)n) != 0) {
			kill(pid, SIGKILL);
			st = -1;
			break;
		}
	}
	close(op[0]);
	while (waitpid(pid, &rc, 0) < 0 && errno == EINTR)
		;
	/* Its first words on stderr, for the log (iptables' own, no tenant's). */
	if (err && errlen) {
		ssize_t n = read(ep[0], err, errlen - 1);

		err[n > 0 ? n : 0] = '\0';
		err[strcspn(err, "\n")] = '\0';
	}
	close(ep[0]);
	if (st == 0 && (!WIFEXITED(rc) || WEXITSTATUS(rc) != 0))
		st = -1;
	if (st == 0 && outp)
		*outp = buf_detach(&out, NULL);
	buf_free(&out);
	return st;
}

/* PATH-SUFFIX: iptables-save beside iptables, iptables-nft-restore beside iptables-nft. */
static char *
tool(const struct agent *a, const char *suffix)
{
	return xasprintf("%s%s", a->o.iptables, suffix);
}

/*
 * METER_CHAIN, and FORWARD's jump to it first: made once (kept across
 * the agent's restarts, as the chains are). 0, or -1.
 */
static int
setup(struct agent *a)
{
	char *ipt = (char *)a->o.iptables;
	char *mk[] = { ipt, "-w", "-t", METER_TABLE, "-N", METER_CHAIN, NULL };
	char *has[] = { ipt, "-w", "-t", METER_TABLE, "-C", "FORWARD", "-j",
	    METER_CHAIN, NULL };
	char *ins[] = { ipt, "-w", "-t", METER_TABLE, "-I", "FORWARD", "1", "-j",
	    METER_CHAIN, NULL };

	(void)run_cmd(mk, NULL, NULL, NULL, 0);	/* fails when it is there */
	if (run_cmd(has, NULL, NULL, NULL, 0) == 0 ||
	    run_cmd(ins, NULL, NULL, NULL, 0) == 0)
		return 0;
	return -1;
}

/* What a pass knows of a metered run, copied under the lock. */
struct want {
	char		 uid[64];
	char		 name[METER_NAME];
	char		 ip[METER_IP];
	int		 port;
	long long	 cap;
	int		 ended;		/* exited: read it, then remove */
	int		 live;		/* not exited: install if absent */
	/*
	 * A warm run's: its holder's sandbox outlives the program (what it
	 * left running), so its chain is read at its end but kept, its quota
	 * still the cap, until its pod is gone (owned()).
	 */
	int		 keep;
	int		 idle;		/* an unclaimed holder's: nothing to watch */
};

/* The runs a pass is about (lock held); *nw of them, malloc'd. */
static struct want *
wanted(struct agent *a, size_t *nw)
{
	struct want *w = NULL;
	size_t n = 0, cap = 0;

	for (struct run *r = a->runs; r; r = r->next) {
		if (!r->meter_wanted || r->meter_done || r->meter_port == 0)
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 16;
			w = xrealloc(w, cap * sizeof(*w));
		}
		memset(&w[n], 0, sizeof(w[n]));
		if (meter_chain_name(r->uid, w[n].name) != 0)
			continue;
		snprintf(w[n].uid, sizeof(w[n].uid), "%s", r->uid);
		snprintf(w[n].ip, sizeof(w[n].ip), "%s", r->ip);
		w[n].port = r->meter_port;
		w[n].cap = r->meter_cap;
		w[n].ended = r->exited || r->refused || r->recorded;
		/*
		 * Made as soon as its address is known, before its execution
		 * is asked whether it granted the network (trust.c): a chain
		 * only takes away, and waiting for that answer held every
		 * program ~200 ms longer at its gate (bench/egress.sh).
		 */
		w[n].live = !w[n].ended && r->ip[0] != '\0';
		w[n].keep = r->warm && !r->refused;
		w[n].idle = !r->learned;
		n++;
	}
	*nw = n;
	return w;
}

/*
 * Is chain name a wanted run's, or else some pod's of this node (the
 * cache's)? The cache is listed (a parse of every pod) only for a chain
 * no run wants, once a pass, into *pods.
 */
static int
owned(struct agent *a, const char *name, json_t **pods, const struct want *w,
    size_t nw)
{
	json_t *p;
	size_t i;
	char mine[METER_NAME];

	for (i = 0; i < nw; i++)
		if (strcmp(w[i].name, name) == 0 && (!w[i].ended || !w[i].keep))
			return !w[i].ended;
	if (*pods == NULL)
		*pods = informer_list(a->pods);
	json_array_foreach(*pods, i, p) {
		const char *uid = k8s_obj_uid(p);

		if (uid && meter_chain_name(uid, mine) == 0 &&
		    strcmp(mine, name) == 0)
			return 1;
	}
	return 0;
}

/*
 * The script of a pass: FORWARD's jump put first again if something was
 * put before it, installs and removals. 0, or -1 (too big).
 */
static int
script(struct buf *b, enum meter_jump fwd, const struct meter_seen *seen,
    size_t ns, const struct want *w, size_t nw, struct agent *a, json_t **pods)
{
	int rc = buf_append_str(b, "*" METER_TABLE "\n");

	if (rc == 0 && fwd != METER_FIRST) {
		log_warn("egress meter: FORWARD's jump to its chain put first again",
		    "was=%s", fwd == METER_LATER ? "later" : "absent");
		rc = meter_forward_fix(b, fwd);
	}

	for (size_t i = 0; rc == 0 && i < nw; i++) {
		const struct meter_seen *s = meter_find(seen, ns, w[i].name);

		/* One without its quota rule is not ours as made: again. */
		if (s && !s->quota && w[i].live)
			rc = meter_remove(b, s);
		if (rc == 0 && w[i].live && (s == NULL || !s->quota))
			rc = meter_install(b, w[i].name, w[i].ip, w[i].port,
			    w[i].cap);
	}
	for (size_t i = 0; rc == 0 && i < ns; i++)
		if (!owned(a, seen[i].name, pods, w, nw))
			rc = meter_remove(b, &seen[i]);
	if (rc == 0)
		rc = buf_append_str(b, "COMMIT\n");
	return rc == 0 ? 0 : -1;
}

/*
 * What the pass saw, into the runs (lock held). 1 when a run's last
 * reading was taken (its record waits on it).
 */
static int
apply(struct agent *a, const struct meter_seen *seen, size_t ns,
    const struct want *w, size_t nw, int written)
{
	long long now = clock_mono_ms();
	int live = 0, read = 0;

	for (size_t i = 0; i < nw; i++) {
		const struct meter_seen *s = meter_find(seen, ns, w[i].name);
		struct run *r = agent_find_run(a, w[i].uid);

		if (r == NULL)
			continue;
		if (s && s->quota)
			r->meter_bytes = s->bytes;
		if (w[i].ended) {
			/* Read at its end and removed (or never made). */
			if (written || s == NULL) {
				r->meter_done = 1;
				read = 1;
				r->meter_read = s != NULL || r->meter_on;
				/* Cut off, then it ended by itself: said too. */
				r->meter_over = s != NULL && s->over > 0 &&
				    r->why == CX_KILL_NONE;
			} else {
				live = 1;	/* its last reading: again soon */
			}
			continue;
		}
		/* An unclaimed holder's chain in place: read on the idle clock. */
		if (!(w[i].idle && s != NULL && s->quota))
			live = 1;
		if (written && w[i].live)
			r->meter_on = 1;
		if (s && s->over > 0 && !r->exited && r->why == CX_KILL_NONE &&
		    !w[i].idle) {
			r->why = CX_KILL_EGRESS;
			log_info("egress cap reached: stopping the run", "pod=%s/%s "
			    "cap=%lld", r->ns, r->pod, r->meter_cap);
		}
	}
	a->next_meter_ms = now + (live ? METER_MS : METER_IDLE_MS);
	return read;
}

void
agent_meter_pass(struct agent *a)
{
	char *save = tool(a, "-save"), *restore = tool(a, "-restore");
	char *list_argv[] = { save, "-c", "-t", METER_TABLE, NULL };
	char *restore_argv[] = { restore, "-w", "--noflush", NULL };
	struct meter_seen *seen = xcalloc(METER_SEEN_MAX, sizeof(*seen));
	char *text = NULL, why[256] = "";
	struct want *w;
	size_t nw, ns = 0;
	struct buf b;
	json_t *pods = NULL;
	int written = 0, read = 0;

	buf_init(&b, METER_SCRIPT_MAX);
	pthread_mutex_lock(&a->lock);
	w = wanted(a, &nw);
	pthread_mutex_unlock(&a->lock);
	if (!a->meter_setup && setup(a) == 0)
		a->meter_setup = 1;
	if (!a->meter_setup)
		log_error("cannot make the egress meter's chain", "iptables=%s "
		    "chain=%s", a->o.iptables, METER_CHAIN);
	else if (run_cmd(list_argv, NULL, &text, why, sizeof(why)) != 0)
		log_error("cannot list the egress meter's chains", "cmd=%s "
		    "error=\"%s\"", save, why);
	else {
		ns = meter_parse(text, seen, METER_SEEN_MAX);
		if (script(&b, meter_forward(text), seen, ns, w, nw, a, &pods) != 0)
			log_error("egress meter: too many chains to change at once",
			    "chains=%zu runs=%zu", ns, nw);
		else if (b.len == strlen("*" METER_TABLE "\nCOMMIT\n") ||
		    run_cmd(restore_argv, b.data, NULL, why, sizeof(why)) == 0 ||
		    /* Once more: iptables-nft fails now and then beside another writer. */
		    (usleep(100000) == 0 &&
		    run_cmd(restore_argv, b.data, NULL, why, sizeof(why)) == 0))
			written = 1;
		else
			log_error("egress meter: iptables-restore failed", "cmd=%s "
			    "error=\"%s\"", restore, why);
	}
	pthread_mutex_lock(&a->lock);
	if (text != NULL)
		read = apply(a, seen, ns, w, nw, written);
	else	/* iptables failed: again in a while, not at once */
		a->next_meter_ms = clock_mono_ms() + METER_MS;
	a->meter_failed = !written;
	if (!written)
		a->meter_setup = 0;	/* the chain or FORWARD's jump may be gone */
	a->metering = 0;
	pthread_mutex_unlock(&a->lock);
	/*
	 * A run read at its end waits on this pass for its record: the
	 * ticker looks now, not at its next poll.
	 */
	if (read)
		agent_wake(a);
	json_decref(pods);
	buf_free(&b);
	free(text);
	free(w);
	free(seen);
	free(save);
	free(restore);
}

int
agent_meter_due(const struct agent *a, long long now)
{
	if (a->o.iptables == NULL || a->metering)
		return 0;
	/*
	 * Not before the pod cache has its first list: a pass removes the
	 * chains of pods it does not know, which would be all of them.
	 */
	if (informer_wait_synced(a->pods, 0) != 0)
		return 0;
	/* On its clock: the first at once, then METER_MS or METER_IDLE_MS. */
	if (now >= a->next_meter_ms)
		return 1;
	/* After a pass that failed, only on the clock (METER_MS later). */
	if (!a->meter_setup || a->meter_failed)
		return 0;
	for (const struct run *r = a->runs; r; r = r->next)
		if (r->meter_wanted && !r->meter_done &&
		    ((!r->meter_on && r->ip[0] && !r->exited) ||
		    r->exited || r->refused))
			return 1;	/* installable now, or ended: at once */
	return 0;
}
