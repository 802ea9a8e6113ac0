/*
 * gate.c - /airlock/bin/gate, the egress start gate, and its canary.
 *
 * An execution allowed network egress gets a NetworkPolicy of its own,
 * but the policy engine (kube-router on the test node) applies a new
 * pod's policy 5-7 s after the pod starts, and until then the pod can
 * reach anything. So the runner holds the tenant's program until the
 * policy is seen in force, by asking a canary that listens on two TCP
 * ports: OPEN (the execution's policy allows it) and CLOSED (no policy
 * does). One process serves both, so one cannot be down while the other
 * is up. Before the policy is in force both connect; after, only OPEN.
 * The program must not send before the node agent's byte quota for the
 * pod is in place either, so the gate also waits for the agent's rule
 * that drops one more port of the range, METERED.
 *
 *   gate --serve OPEN CLOSED
 *       the canary: listen on 0.0.0.0:OPEN (a port, or a range A-B of at
 *       most 256: every port of it) and :CLOSED, accept each
 *       connection and close it at once, at most 64 a port before the
 *       other's turn (a flood on OPEN never fills CLOSED's queue, whose
 *       dropped SYNs would look like the policy's). Nothing is read or
 *       kept, so memory is bounded whatever arrives. Exit 0 on SIGTERM or
 *       SIGINT, 1 when a port cannot be listened on, 2 on bad arguments.
 *
 *   gate --wait OPEN METERED CLOSED SECONDS IP [IP...]
 *       run's, before the program. OPEN is a port or a list P,Q,... of
 *       at most 4, all of which must connect: the execution's policy
 *       allows ports of the gate's range picked by its uid, so that a
 *       policy left on the node for an earlier pod at the same address
 *       (kube-router matches a pod's rules by address until its next sync:
 *       seen on the test node, 2026-11-28, the earlier pod's CIDRs reached
 *       from the new one) is not taken for this one's: it allows other
 *       ports. METERED, M, one more port of that range, which the policy
 *       allows too but the node agent's chain for the pod drops, ahead of
 *       the pod's byte quota, in the mangle table, before any policy
 *       engine's filter rules (docs/network.md, "The byte cap"): dropped,
 *       it shows the quota in place. The canary listens on M as on OPEN
 *       (one process, the whole range), so only the node's rule keeps a
 *       connect to M from completing. Rounds on one canary address at a
 *       time (at most 8) until one passes or SECONDS (1-3600) have gone:
 *         1. IP:OPEN connects within 1 s, each of its ports (the first's
 *            time is the round trip, rtt);
 *         2. three connects to IP:CLOSED at once, given T =
 *            clamp(20 * rtt, 25 ms, 500 ms): none may complete, and one
 *            to IP:OPEN beside them must (else the round is retried);
 *         3. the same for IP:METERED, but each connect must still be
 *            under way at T (dropped): refused or unreachable, which a
 *            Service's rule can answer for any address, is not the meter;
 *         4. IP:OPEN connects again: a canary that died during the round
 *            would have refused CLOSED and METERED too.
 *       A CLOSED connect that times out, is refused or finds the host or
 *       net unreachable is denied: only a completed connect shows the
 *       policy is not in force; for METERED only a connect still under
 *       way shows the meter. Two rounds in a row that pass, on one
 *       address (a SYN lost once, a queue full for a moment, is never
 *       taken for the policy): exit 0, silent. CLOSED or METERED
 *       answered: the same address again 50 ms later. OPEN did not
 *       connect: that canary cannot vouch, so the next address, 50 ms
 *       later. At the deadline (checked between rounds: a round started
 *       before it finishes, at most 4 s with two OPEN ports), one line
 *       on stderr, naming the check the last round failed, and exit 125:
 *         airlock: egress: the execution's network policy was not seen
 *         in force within N s (REASON)
 *         airlock: egress: the egress meter was not seen in place
 *         within N s (REASON)
 *       Any other error (no socket, another errno) fails the round: the
 *       program never goes through on a doubt. Bad arguments: exit 125,
 *       as any failure of the runner before the program.
 *
 * Static in the runner images (gcc -static), so it needs nothing of the
 * image; images/build.sh also packs it alone as the egress-gate image.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE	/* accept4 */
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_IPS		8
#define SERVE_OPEN_MAX	256	/* ports of a --serve range */
#define WAIT_OPEN_MAX	4	/* ports of a --wait list */
#define NCLOSED		3
#define PASSES		2	/* rounds in a row */
#define SERVE_BATCH	64	/* accepts a port, then the other's turn */
#define OPEN_MS		1000
#define RETRY_MS	50
#define T_MIN_MS	25
#define T_MAX_MS	500
#define WAIT_FAIL	125

static const char usage[] = "usage: gate --serve OPEN CLOSED | "
    "gate --wait OPEN METERED CLOSED SECONDS IP [IP...]";
static const char policy_unseen[] = "the execution's network policy was not "
    "seen in force";
static const char meter_unseen[] = "the egress meter was not seen in place";

static long long
now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void
sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* s as a number in [min, max]: plain digits, no sign, no leading zero. */
static int
parse_num(const char *s, long min, long max, long *out)
{
	long v = 0;

	if (*s == '\0' || (s[0] == '0' && s[1] != '\0') || strlen(s) > 9)
		return -1;
	for (const char *p = s; *p; p++) {
		if (*p < '0' || *p > '9')
			return -1;
		v = v * 10 + (*p - '0');
	}
	if (v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

/*
 * OPEN, s: a port; with range_ok "A-B" (A < B, at most SERVE_OPEN_MAX
 * ports), else "P,Q,..." (at most WAIT_OPEN_MAX, none twice); into
 * ports[0..*n). 0, or -1.
 */
static int
parse_open(const char *s, int range_ok, long *ports, int *n)
{
	char buf[64], *save = NULL, *t;
	long a, b;
	const char *dash = strchr(s, '-');

	*n = 0;
	if (strlen(s) >= sizeof(buf))
		return -1;
	if (dash != NULL) {
		if (!range_ok || (size_t)(dash - s) >= sizeof(buf))
			return -1;
		memcpy(buf, s, (size_t)(dash - s));
		buf[dash - s] = '\0';
		if (parse_num(buf, 1, 65535, &a) != 0 ||
		    parse_num(dash + 1, 1, 65535, &b) != 0 || b <= a ||
		    b - a + 1 > SERVE_OPEN_MAX)
			return -1;
		for (long p = a; p <= b; p++)
			ports[(*n)++] = p;
		return 0;
	}
	strcpy(buf, s);
	for (t = strtok_r(buf, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save)) {
		if (*n == (range_ok ? 1 : WAIT_OPEN_MAX) ||
		    parse_num(t, 1, 65535, &ports[*n]) != 0)
			return -1;
		for (int i = 0; i < *n; i++)
			if (ports[i] == ports[*n])
				return -1;
		(*n)++;
	}
	return *n > 0 && s[strlen(s) - 1] != ',' ? 0 : -1;
}

/*
 * One port, argv[i] named name, into *port, unlike each of the earlier
 * ones: open[0..nopen) (OPEN) and, when metered is not NULL, *metered
 * (METERED). 0, or -1 with why on stderr.
 */
static int
parse_other(char **argv, int i, const char *mode, const char *name,
    const long *open, int nopen, const long *metered, long *port)
{
	if (parse_num(argv[i], 1, 65535, port) != 0) {
		fprintf(stderr, "gate: %s: %s '%s' is not a port (1-65535)\n", mode,
		    name, argv[i]);
		return -1;
	}
	for (int k = 0; k < nopen; k++)
		if (open[k] == *port) {
			fprintf(stderr, "gate: %s: %s '%s' is the same port as OPEN\n",
			    mode, name, argv[i]);
			return -1;
		}
	if (metered != NULL && *metered == *port) {
		fprintf(stderr, "gate: %s: %s '%s' is the same port as METERED\n",
		    mode, name, argv[i]);
		return -1;
	}
	return 0;
}

/*
 * The ports of argv[2] (OPEN, into open[0..*nopen)), with metered not
 * NULL argv[3] (METERED, --wait's), then CLOSED, all told apart. 0, or -1
 * with why on stderr.
 */
static int
parse_ports(char **argv, const char *mode, long *open, int *nopen,
    long *metered, long *closed)
{
	if (parse_open(argv[2], strcmp(mode, "--serve") == 0, open, nopen) != 0) {
		fprintf(stderr, "gate: %s: OPEN '%s' is not a port (1-65535)\n", mode, argv[2]);
		return -1;
	}
	if (metered != NULL && parse_other(argv, 3, mode, "METERED", open, *nopen,
	    NULL, metered) != 0)
		return -1;
	return parse_other(argv, metered != NULL ? 4 : 3, mode, "CLOSED", open,
	    *nopen, metered, closed);
}

/* --serve */

/*
 * OPEN must never answer while CLOSED does not: a wait would take that
 * for the policy. So CLOSED listens first, and OPEN goes first at the
 * end: closed by the handler, and, killed, by the kernel, which closes
 * a dying process's fds in order and OPEN's are the lower.
 */
static int serve_open_fd[SERVE_OPEN_MAX];
static int serve_nopen;

static void
serve_stop(int sig)
{
	(void)sig;
	for (int i = 0; i < serve_nopen; i++)
		close(serve_open_fd[i]);
	_exit(0);
}

/* fd (a non-blocking socket) listening on 0.0.0.0:port; -1 with why on stderr. */
static int
serve_listen(int fd, long port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	int one = 1;

	sa.sin_addr.s_addr = htonl(INADDR_ANY);
	sa.sin_port = htons((unsigned short)port);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
	    bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
	    listen(fd, SOMAXCONN) != 0) {
		fprintf(stderr, "gate: cannot listen on port %ld: %s\n", port, strerror(errno));
		return -1;
	}
	return 0;
}

/*
 * Accept and close what waits on each ready socket: at most SERVE_BATCH
 * a port before the others' turn, so that connects flooding one port (an
 * execution may loop on an open one) never leave another's queue to
 * fill: a full queue drops a SYN, which a runner would take for its
 * policy's drop. A failed accept (the peer gone, no fd to spare) leaves
 * the rest to the next poll().
 */
static void
serve_accept(struct pollfd *pfd, int n)
{
	for (int i = 0; i < n; i++) {
		int c;

		if (!(pfd[i].revents & POLLIN))
			continue;
		for (int k = 0; k < SERVE_BATCH && (c = accept4(pfd[i].fd, NULL,
		    NULL, SOCK_CLOEXEC)) >= 0; k++)
			close(c);
	}
}

static int
serve(int argc, char **argv)
{
	struct pollfd pfd[SERVE_OPEN_MAX + 1];
	struct sigaction sa = { 0 };
	long open[SERVE_OPEN_MAX], closed;
	int n;

	if (argc != 4) {
		fprintf(stderr, "gate: %s\n", usage);
		return 2;
	}
	if (parse_ports(argv, "--serve", open, &n, NULL, &closed) != 0)
		return 2;
	/* _exit in the handler: no flag to check between poll() calls. */
	sa.sa_handler = serve_stop;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	/* OPEN's sockets first (the lower fds), CLOSED's last... */
	for (int i = 0; i < n; i++)
		serve_open_fd[i] = pfd[i].fd = socket(AF_INET, SOCK_STREAM |
		    SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	serve_nopen = n;
	pfd[n].fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	/* ... but CLOSED listening first. */
	if (serve_listen(pfd[n].fd, closed) != 0)
		return 1;
	for (int i = 0; i < n; i++)
		if (serve_listen(pfd[i].fd, open[i]) != 0)
			return 1;
	for (int i = 0; i <= n; i++)
		pfd[i].events = POLLIN;
	fprintf(stderr, "gate: serving %s and %ld\n", argv[2], closed);
	for (;;) {
		if (poll(pfd, (nfds_t)n + 1, -1) < 0) {
			if (errno == EINTR)
				continue;
			fprintf(stderr, "gate: poll: %s\n", strerror(errno));
			return 1;
		}
		serve_accept(pfd, n + 1);
	}
}

/* --wait */

/* Whether a connect's errno says the way is shut: the policy's doing. */
static int
denied(int err)
{
	return err == ECONNREFUSED || err == EHOSTUNREACH || err == ENETUNREACH ||
	    err == ETIMEDOUT;
}

/*
 * Start a non-blocking connect to ip:port. 1 connected already, 0 under
 * way, -1 failed (errno set); *fdp the socket, or -1 when there is none.
 */
static int
conn_start(struct in_addr ip, long port, int *fdp)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr = ip };

	sa.sin_port = htons((unsigned short)port);
	*fdp = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (*fdp < 0)
		return -1;
	if (connect(*fdp, (struct sockaddr *)&sa, sizeof(sa)) == 0)
		return 1;
	return errno == EINPROGRESS ? 0 : -1;
}

/* A connect that poll() says is done: 0 connected, else its errno. */
static int
conn_error(int fd)
{
	int err = 0;
	socklen_t len = sizeof(err);

	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
		return errno ? errno : EIO;
	return err;
}

/*
 * Connect to ip:port within OPEN_MS. 0, with the time it took in *rtt_us;
 * -1 with why in why.
 */
static int
probe_open(struct in_addr ip, long port, long long *rtt_us, char *why, size_t n)
{
	long long t0 = now_us();
	int fd, r = conn_start(ip, port, &fd), err = errno;

	if (r == 0) {
		struct pollfd p = { .fd = fd, .events = POLLOUT };
		int k;

		while ((k = poll(&p, 1, OPEN_MS)) < 0 && errno == EINTR)
			;
		err = k < 0 ? errno : k == 0 ? ETIMEDOUT : conn_error(fd);
		r = err == 0 ? 1 : -1;
	}
	*rtt_us = now_us() - t0;
	if (fd >= 0)
		close(fd);
	if (r == 1)
		return 0;
	if (fd < 0)
		snprintf(why, n, "cannot make a socket: %s", strerror(err));
	else
		snprintf(why, n, "no gate answered on port %ld", port);
	return -1;
}

/*
 * Three connects to ip:closed at once, for t_ms, and beside them one to
 * ip:open, the control: a connect that took longer than T for want of
 * CPU or a full queue would look denied, and the control, on the same
 * path at the same time, shows the path was quick enough. 0 when the
 * control connected within t_ms and no CLOSED connect completed, each
 * denied or still under way (with drop_only, METERED's check: each still
 * under way, a drop; refused or unreachable, which a tenant's Service
 * can answer for any address, is not the meter); 1 when one completed;
 * 2 when the control did not connect; -1 on any other error. why says
 * which, but for 0.
 */
static int
probe_closed(struct in_addr ip, long open, long closed, long t_ms,
    int drop_only, char *why, size_t n)
{
	struct pollfd p[NCLOSED + 1];
	char addr[INET_ADDRSTRLEN];
	long long end = now_us() + t_ms * 1000;
	int rc = 0, left = 0, ctl = 0;

	inet_ntop(AF_INET, &ip, addr, sizeof(addr));
	for (int i = 0; i <= NCLOSED; i++)
		p[i].fd = -1;
	for (int i = 0; i <= NCLOSED && rc == 0; i++) {
		int r = conn_start(ip, i < NCLOSED ? closed : open, &p[i].fd), err = errno;

		p[i].events = POLLOUT;
		if (r == 1)
			i < NCLOSED ? (rc = 1) : (ctl = 1);
		else if (r < 0 && (i == NCLOSED || drop_only || !denied(err))) {
			snprintf(why, n, "connect to %s:%ld: %s", addr,
			    i < NCLOSED ? closed : open, strerror(err));
			rc = -1;
		} else if (r == 0)
			left++;
		if (r != 0 && p[i].fd >= 0) {
			close(p[i].fd);
			p[i].fd = -1;	/* poll() skips it */
		}
	}
	while (rc == 0 && left > 0) {
		long long rest = end - now_us();
		int k;

		if (rest <= 0)
			break;
		k = poll(p, NCLOSED + 1, (int)((rest + 999) / 1000));
		if (k < 0 && errno != EINTR) {
			snprintf(why, n, "poll: %s", strerror(errno));
			rc = -1;
		}
		for (int i = 0; k > 0 && rc == 0 && i <= NCLOSED; i++) {
			int err;

			if (p[i].fd < 0 || p[i].revents == 0)
				continue;
			err = conn_error(p[i].fd);
			if (i == NCLOSED)
				ctl = err == 0;
			else if (err == 0)
				rc = 1;
			else if (drop_only || !denied(err)) {
				snprintf(why, n, "connect to %s:%ld: %s", addr, closed, strerror(err));
				rc = -1;
			}
			close(p[i].fd);
			p[i].fd = -1;
			left--;
		}
	}
	for (int i = 0; i <= NCLOSED; i++)
		if (p[i].fd >= 0)
			close(p[i].fd);
	if (rc == 1)
		snprintf(why, n, "%s:%ld still answered", addr, closed);
	else if (rc == 0 && !ctl) {
		snprintf(why, n, "%s:%ld did not answer within %ld ms beside CLOSED", addr, open, t_ms);
		rc = 2;
	}
	return rc;
}

enum round { ROUND_PASS, ROUND_AGAIN, ROUND_NEXT };

/*
 * One round on ip (see the header); why says what failed, *what which
 * check (policy_unseen or meter_unseen).
 */
static enum round
round_once(struct in_addr ip, const long *open, int nopen, long metered,
    long closed, char *why, size_t n, const char **what)
{
	long long rtt, other;
	long t;

	*what = policy_unseen;
	if (probe_open(ip, open[0], &rtt, why, n) != 0)
		return ROUND_NEXT;
	/* This execution's other ports: one refused is an older policy's. */
	for (int i = 1; i < nopen; i++)
		if (probe_open(ip, open[i], &other, why, n) != 0)
			return ROUND_AGAIN;
	t = (long)(rtt * 20 / 1000);
	t = t < T_MIN_MS ? T_MIN_MS : t > T_MAX_MS ? T_MAX_MS : t;
	if (probe_closed(ip, open[0], closed, t, 0, why, n) != 0)
		return ROUND_AGAIN;
	/* The policy is in force: now the node's meter, which drops M. */
	if (probe_closed(ip, open[0], metered, t, 1, why, n) != 0) {
		*what = meter_unseen;
		return ROUND_AGAIN;
	}
	if (probe_open(ip, open[0], &rtt, why, n) != 0)
		return ROUND_NEXT;
	return ROUND_PASS;
}

static int
wait_main(int argc, char **argv)
{
	struct in_addr ips[MAX_IPS];
	char why[256] = "no round ran";
	const char *what = policy_unseen;
	long open[WAIT_OPEN_MAX], metered, closed, secs;
	int nopen;
	long long deadline;
	int nip = argc - 6, cur = 0;

	if (argc < 7) {
		fprintf(stderr, "gate: %s\n", usage);
		return WAIT_FAIL;
	}
	if (parse_ports(argv, "--wait", open, &nopen, &metered, &closed) != 0)
		return WAIT_FAIL;
	if (parse_num(argv[5], 1, 3600, &secs) != 0) {
		fprintf(stderr, "gate: --wait: SECONDS '%s' is not a number of seconds (1-3600)\n",
		    argv[5]);
		return WAIT_FAIL;
	}
	if (nip > MAX_IPS) {
		fprintf(stderr, "gate: --wait: %d addresses, more than %d\n", nip, MAX_IPS);
		return WAIT_FAIL;
	}
	for (int i = 0; i < nip; i++)
		if (inet_pton(AF_INET, argv[6 + i], &ips[i]) != 1) {
			fprintf(stderr, "gate: --wait: IP '%s' is not an IPv4 address\n", argv[6 + i]);
			return WAIT_FAIL;
		}
	deadline = now_us() + secs * 1000000;
	for (int passed = 0;;) {
		/*
		 * PASSES rounds in a row, on the same address: one SYN lost
		 * (a queue full for a moment) is never taken for the policy.
		 */
		switch (round_once(ips[cur], open, nopen, metered, closed, why,
		    sizeof(why), &what)) {
		case ROUND_PASS:
			if (++passed == PASSES)
				return 0;
			continue;
		case ROUND_NEXT:
			cur = (cur + 1) % nip;
			passed = 0;
			break;
		case ROUND_AGAIN:
			passed = 0;
			break;
		}
		sleep_ms(RETRY_MS);
		if (now_us() >= deadline)
			break;
	}
	fprintf(stderr, "airlock: egress: %s within %ld s (%s)\n", what, secs, why);
	return WAIT_FAIL;
}

int
main(int argc, char **argv)
{
	if (argc >= 2 && strcmp(argv[1], "--serve") == 0)
		return serve(argc, argv);
	if (argc >= 2 && strcmp(argv[1], "--wait") == 0)
		return wait_main(argc, argv);
	fprintf(stderr, "gate: %s\n", usage);
	return 2;
}
