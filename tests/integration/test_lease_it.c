/*
 * Integration: operator/lease.c. Real processes (tool_lease) contend for one
 * Lease on the real kube-apiserver: exactly one leads; SIGKILL the leader
 * and another takes over within the lease duration of its last renewal,
 * never while the old one could still act; SIGTERM releases at once.
 */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "client.h"
#include "itutil.h"
#include "lease.h"

#define D_MS	3000
#define RD_MS	2000
#define P_MS	500

struct proc {
	pid_t		 pid;
	char		 id[32];
	FILE		*out;
	pthread_t	 reader;
	pthread_mutex_t	 lock;
	long long	 leading, stopped, exited;	/* mono ms, 0 = never */
	long long	 first_act, last_act;
	long long	 acts;
};

static void *
reader(void *arg)
{
	struct proc *p = arg;
	char line[128];
	long long t;

	while (fgets(line, sizeof(line), p->out)) {
		char what[16];

		if (sscanf(line, "%15s %lld", what, &t) != 2)
			continue;
		pthread_mutex_lock(&p->lock);
		if (strcmp(what, "LEADING") == 0 && p->leading == 0)
			p->leading = t;
		else if (strcmp(what, "STOPPED") == 0)
			p->stopped = t;
		else if (strcmp(what, "EXIT") == 0)
			p->exited = t;
		else if (strcmp(what, "ACT") == 0) {
			if (p->acts++ == 0)
				p->first_act = t;
			p->last_act = t;
		}
		pthread_mutex_unlock(&p->lock);
	}
	return NULL;
}

static void
spawn(struct proc *p, const char *ns, const char *name, const char *id)
{
	char tool[1024], d[16], rd[16], per[16];
	const char *kc = it_env("KUBECONFIG_ADMIN");
	int fds[2];

	memset(p, 0, sizeof(*p));
	pthread_mutex_init(&p->lock, NULL);
	snprintf(p->id, sizeof(p->id), "%s", id);
	snprintf(tool, sizeof(tool), "%s/tests/integration/tool_lease",
	    getenv("AIRLOCK_BUILD") ? getenv("AIRLOCK_BUILD") : "build/plain");
	snprintf(d, sizeof(d), "%d", D_MS);
	snprintf(rd, sizeof(rd), "%d", RD_MS);
	snprintf(per, sizeof(per), "%d", P_MS);
	assert_int_equal(pipe(fds), 0);
	p->pid = fork();
	assert_true(p->pid >= 0);
	if (p->pid == 0) {
		dup2(fds[1], 1);
		close(fds[0]);
		close(fds[1]);
		execl(tool, tool, kc, ns, name, id, d, rd, per, (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	p->out = fdopen(fds[0], "r");
	pthread_create(&p->reader, NULL, reader, p);
}

static int
reap(struct proc *p)
{
	int st = -1;

	waitpid(p->pid, &st, 0);
	pthread_join(p->reader, NULL);
	fclose(p->out);
	return st;
}

static long long
get(struct proc *p, long long *field)
{
	long long v;

	pthread_mutex_lock(&p->lock);
	v = *field;
	pthread_mutex_unlock(&p->lock);
	return v;
}

static const char *
holder(struct k8s_client *c, const char *ns, const char *name, char *buf, size_t len)
{
	struct k8s_error err;
	json_t *l;

	if (k8s_get(c, &k8s_res_leases, ns, name, &l, &err) != 0)
		fail_msg("get lease: %s", err.message);
	snprintf(buf, len, "%s", json_string_value(json_object_get(
	    json_object_get(l, "spec"), "holderIdentity")));
	json_decref(l);
	return buf;
}

/* Wait until some process leads: its index, or fail. */
static int
wait_leader(struct proc *ps, int n, long timeout_ms)
{
	for (long end = it_mono_ms() + timeout_ms; it_mono_ms() < end; it_sleep_ms(5))
		for (int i = 0; i < n; i++)
			if (get(&ps[i], &ps[i].leading))
				return i;
	fail_msg("no leader within %ld ms", timeout_ms);
	return -1;
}

static void
test_lease_contention_and_takeover(void **state)
{
	struct k8s_config *cfg;
	struct k8s_client *c = it_client(0, &cfg);
	char *ns = it_namespace_new(c, "it-lease");
	struct proc ps[3];
	char hb[64];
	int a, b, st;
	long long t_kill, takeover, t_term, handover;

	(void)state;
	spawn(&ps[0], ns, "ctl", "replica-0");
	spawn(&ps[1], ns, "ctl", "replica-1");
	a = wait_leader(ps, 2, 10000);
	b = 1 - a;
	/* Several renew periods: the other never leads, never acts. */
	it_sleep_ms(4 * P_MS);
	assert_int_equal(get(&ps[b], &ps[b].leading), 0);
	assert_int_equal(get(&ps[b], &ps[b].acts), 0);
	assert_true(get(&ps[a], &ps[a].acts) >= 10);
	assert_string_equal(holder(c, ns, "ctl", hb, sizeof(hb)), ps[a].id);

	/* Kill the leader outright: no release, the lease must expire. */
	t_kill = it_mono_ms();
	kill(ps[a].pid, SIGKILL);
	st = reap(&ps[a]);
	assert_true(WIFSIGNALED(st));
	for (long end = t_kill + D_MS + 3000; it_mono_ms() < end && !get(&ps[b], &ps[b].leading);)
		it_sleep_ms(5);
	assert_true(get(&ps[b], &ps[b].leading) > 0);
	takeover = ps[b].leading - t_kill;
	fprintf(stderr, "# takeover after SIGKILL: %lld ms (lease %d ms)\n", takeover, D_MS);
	/* Within the lease duration of the last renewal (+ a request's time)... */
	assert_true(takeover <= D_MS + 300);
	/* ...and not before the dead leader's renew deadline could have run out. */
	assert_true(takeover >= D_MS - 2 * P_MS - 200);
	for (long end = it_mono_ms() + 1000; it_mono_ms() < end && !get(&ps[b], &ps[b].first_act);)
		it_sleep_ms(5);
	assert_true(get(&ps[b], &ps[b].first_act) >= t_kill);
	assert_string_equal(holder(c, ns, "ctl", hb, sizeof(hb)), ps[b].id);

	/* A third replica; then SIGTERM the leader: it releases, hands over fast. */
	spawn(&ps[2], ns, "ctl", "replica-2");
	it_sleep_ms(2 * P_MS);
	assert_int_equal(get(&ps[2], &ps[2].leading), 0);
	t_term = it_mono_ms();
	kill(ps[b].pid, SIGTERM);
	st = reap(&ps[b]);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	assert_true(ps[b].stopped > 0);
	assert_true(ps[b].exited >= ps[b].stopped);
	for (long end = t_term + 3000; it_mono_ms() < end && !get(&ps[2], &ps[2].leading);)
		it_sleep_ms(5);
	handover = get(&ps[2], &ps[2].leading) - t_term;
	fprintf(stderr, "# handover after SIGTERM (release): %lld ms\n", handover);
	assert_true(get(&ps[2], &ps[2].leading) > 0);
	assert_true(handover <= P_MS + 300);
	for (long end = it_mono_ms() + 1000; it_mono_ms() < end && !get(&ps[2], &ps[2].first_act);)
		it_sleep_ms(5);
	/* Never two actors: the old one's last act precedes the new one's first. */
	assert_true(ps[b].last_act < get(&ps[2], &ps[2].first_act));
	assert_true(ps[b].last_act <= ps[b].stopped);
	assert_string_equal(holder(c, ns, "ctl", hb, sizeof(hb)), "replica-2");

	kill(ps[2].pid, SIGTERM);
	st = reap(&ps[2]);
	assert_int_equal(WEXITSTATUS(st), 0);
	/* Released on the way out: nobody holds it. */
	assert_string_equal(holder(c, ns, "ctl", hb, sizeof(hb)), "");
	it_namespace_delete(c, ns);
	free(ns);
	it_client_free(c, cfg);
}

static void
test_lease_config_refused(void **state)
{
	struct k8s_config *cfg;
	struct k8s_client *c = it_client(0, &cfg);
	struct lease_config bad = { "ns", "n", "id", 3000, 2000, 1000 };
	struct lease_config noid = { "ns", "n", "", 0, 0, 0 };
	struct lease *l;
	struct k8s_error err;

	(void)state;
	assert_int_equal(lease_new(c, &bad, NULL, &l, &err), K8S_EINVAL);
	assert_null(l);
	assert_string_equal(err.message, "lease duration 3000 ms must be whole seconds "
	    "and exceed renew deadline + retry period (3000 ms)");
	assert_int_equal(lease_new(c, &noid, NULL, &l, &err), K8S_EINVAL);
	assert_string_equal(err.message, "lease needs a namespace, a name and an identity");
	it_client_free(c, cfg);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lease_config_refused),
		cmocka_unit_test(test_lease_contention_and_takeover),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
