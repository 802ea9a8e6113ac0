/*
 * Unit tests: controller/agents.c, whether a node's agent is there to
 * record a result. Leases are fed as the informer would, at chosen times
 * on the controller's monotonic clock; ctl_agent_wait says how long a
 * result still waits. Grace 2000 ms, an agent away for 8000 ms at most.
 * The whole path on a real API server: test_agent_away
 * (tests/integration/test_controller_it.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "controller_priv.h"

#define GRACE	2000
#define ABSENT	8000
#define T0	1000000LL	/* any time on the monotonic clock */

static int
setup(void **state)
{
	struct controller *ctl = calloc(1, sizeof(*ctl));

	pthread_mutex_init(&ctl->lock, NULL);
	ctl->agents = json_object();
	ctl->opts.result_grace_ms = GRACE;
	ctl->opts.agent_absent_ms = ABSENT;
	*state = ctl;
	return 0;
}

static int
teardown(void **state)
{
	struct controller *ctl = *state;

	json_decref(ctl->agents);
	pthread_mutex_destroy(&ctl->lock);
	free(ctl);
	return 0;
}

/* The agent's Lease as the informer keeps it. */
static void
seen(struct controller *ctl, const char *name, const char *holder,
    const char *renew, long long at)
{
	json_t *l = json_pack("{s:{s:s, s:s}, s:{s:s, s:s}}", "metadata", "name",
	    name, "namespace", "airlock-system", "spec", "holderIdentity", holder,
	    "renewTime", renew);

	ctl_agent_lease_seen(ctl, l, at);
	json_decref(l);
}

/* No lease for the node: the grace from the exit alone, as before. */
static void
test_unknown(void **state)
{
	struct controller *ctl = *state;
	char msg[400] = "x";

	assert_int_equal(ctl_agent_wait(ctl, "n1", 1500, T0, msg, sizeof(msg)), 1500);
	assert_string_equal(msg, "");
	assert_int_equal(ctl_agent_wait(ctl, "n1", -5, T0, msg, sizeof(msg)), -5);
	/* Not an agent's lease: not taken for one. */
	seen(ctl, "airlock-controller", "ctl-0", "2026-11-27T04:00:00.000000Z", T0);
	seen(ctl, "n1", "agent-a", "2026-11-27T04:00:00.000000Z", T0);
	assert_int_equal(json_object_size(ctl->agents), 0);
	assert_int_equal(ctl_agent_wait(ctl, "n1", -5, T0, msg, sizeof(msg)), -5);
	assert_int_equal(ctl_agent_wait(ctl, NULL, 7, T0, msg, sizeof(msg)), 7);
}

/*
 * Heard all along: the grace from the exit decides. A new agent (another
 * holder) gives the result the whole grace from its first renewal.
 */
static void
test_new_agent(void **state)
{
	struct controller *ctl = *state;
	char msg[400];

	seen(ctl, "airlock-agent-n1", "agent-a", "2026-11-27T04:00:00.000000Z", T0);
	seen(ctl, "airlock-agent-n1", "agent-a", "2026-11-27T04:00:10.000000Z",
	    T0 + 10000);
	assert_int_equal(ctl_agent_wait(ctl, "n1", -1, T0 + 12000, msg,
	    sizeof(msg)), -1);
	assert_int_equal(ctl_agent_wait(ctl, "n1", 700, T0 + 12000, msg,
	    sizeof(msg)), 700);
	/* A relist's copy of the same renewal is nothing new. */
	seen(ctl, "airlock-agent-n1", "agent-a", "2026-11-27T04:00:10.000000Z",
	    T0 + 14000);
	assert_int_equal(ctl_agent_wait(ctl, "n1", -1, T0 + 14000, msg,
	    sizeof(msg)), -1);
	seen(ctl, "airlock-agent-n1", "agent-b", "2026-11-27T04:00:20.000000Z",
	    T0 + 20000);
	assert_int_equal(ctl_agent_wait(ctl, "n1", -3000, T0 + 20500, msg,
	    sizeof(msg)), GRACE - 500);
	assert_string_equal(msg, "");
	assert_int_equal(ctl_agent_wait(ctl, "n1", -3000, T0 + 20000 + GRACE, msg,
	    sizeof(msg)), 0);
}

/*
 * Not heard for over AGENT_GAP_MS (the API server, or the agent, away):
 * the result waits; the next renewal gives it the whole grace.
 */
static void
test_gap(void **state)
{
	struct controller *ctl = *state;
	char msg[400];

	seen(ctl, "airlock-agent-n1", "agent-a", "2026-11-27T04:00:00.000000Z", T0);
	/* Heard 15 s ago at most: still there. */
	assert_int_equal(ctl_agent_wait(ctl, "n1", -1, T0 + AGENT_GAP_MS, msg,
	    sizeof(msg)), -1);
	/* Past it: away since T0 + AGENT_GAP_MS; looked at again soon. */
	assert_int_equal(ctl_agent_wait(ctl, "n1", -1, T0 + AGENT_GAP_MS + 1, msg,
	    sizeof(msg)), ABSENT - 1);
	assert_string_equal(msg, "");
	seen(ctl, "airlock-agent-n1", "agent-a", "2026-11-27T04:00:40.000000Z",
	    T0 + 40000);
	assert_int_equal(ctl_agent_wait(ctl, "n1", -1, T0 + 40000, msg,
	    sizeof(msg)), GRACE);
	/* Renewals within the gap do not restart it. */
	seen(ctl, "airlock-agent-n1", "agent-a", "2026-11-27T04:00:50.000000Z",
	    T0 + 50000);
	assert_int_equal(ctl_agent_wait(ctl, "n1", -1, T0 + 50000, msg,
	    sizeof(msg)), -1);
}

/*
 * Released (an agent stopped) or deleted: away at once; past
 * agent_absent_ms the result ends, saying why; never before the grace
 * from the exit.
 */
static void
test_away(void **state)
{
	struct controller *ctl = *state;
	char msg[400];

	seen(ctl, "airlock-agent-n1", "agent-a", "2026-11-27T04:00:00.000000Z", T0);
	seen(ctl, "airlock-agent-n1", "", "2026-11-27T04:00:01.000000Z", T0 + 1000);
	assert_int_equal(ctl_agent_wait(ctl, "n1", 0, T0 + 1000, msg,
	    sizeof(msg)), ABSENT);
	assert_int_equal(ctl_agent_wait(ctl, "n1", 0, T0 + 8000, msg,
	    sizeof(msg)), 1000);
	assert_string_equal(msg, "");
	assert_int_equal(ctl_agent_wait(ctl, "n1", 400, T0 + 1000 + ABSENT, msg,
	    sizeof(msg)), 400);
	assert_string_equal(msg, "");
	assert_int_equal(ctl_agent_wait(ctl, "n1", 0, T0 + 1000 + ABSENT, msg,
	    sizeof(msg)), 0);
	assert_string_equal(msg, "the node agent of node n1 has not been heard "
	    "from for over 8 s");
	/* Back, a new holder: heard, the grace from now. */
	seen(ctl, "airlock-agent-n1", "agent-b", "2026-11-27T04:00:30.000000Z",
	    T0 + 30000);
	assert_int_equal(ctl_agent_wait(ctl, "n1", -1, T0 + 30000, msg,
	    sizeof(msg)), GRACE);
	assert_string_equal(msg, "");
	/*
	 * However it comes and goes, no wait past the grace from the exit
	 * and agent_absent_ms more: heard anew, or away.
	 */
	assert_int_equal(ctl_agent_wait(ctl, "n1", -ABSENT + 300, T0 + 30000, msg,
	    sizeof(msg)), 300);
	assert_int_equal(ctl_agent_wait(ctl, "n1", -ABSENT, T0 + 30000, msg,
	    sizeof(msg)), 0);
	assert_string_equal(msg, "");
	seen(ctl, "airlock-agent-n1", "", "2026-11-27T04:00:31.000000Z", T0 + 31000);
	assert_int_equal(ctl_agent_wait(ctl, "n1", -ABSENT + 300, T0 + 31000, msg,
	    sizeof(msg)), 300);
	assert_int_equal(ctl_agent_wait(ctl, "n1", -ABSENT, T0 + 31000, msg,
	    sizeof(msg)), 0);
	assert_string_equal(msg, "the node agent of node n1 has not been heard "
	    "from for over 8 s");
	/* The other node's agent is another's. */
	assert_int_equal(ctl_agent_wait(ctl, "n2", -1, T0 + 30000, msg,
	    sizeof(msg)), -1);
}

/*
 * An agent that comes and goes (a crash loop, or one that changes its
 * holder at every renewal): a result looked at every 10 s, its grace from
 * the exit spent at T0, ends by T0 + agent_absent_ms, not later (the cap
 * is fixed by the exit; start.c passes a warm claim's spent bound so).
 */
static void
test_flapping_capped(void **state)
{
	struct controller *ctl = *state;
	char msg[400], holder[32], renew[64];
	long long t, left = 1, ended = -1;

	for (t = T0; t <= T0 + 4 * ABSENT && ended < 0; t += 1000) {
		if ((t - T0) % 2000 == 0) {
			snprintf(holder, sizeof(holder), "agent-%lld", (t - T0) / 2000);
			snprintf(renew, sizeof(renew), "2026-11-27T04:%02lld:%02lld.000000Z",
			    (t - T0) / 60000, (t - T0) / 1000 % 60);
			seen(ctl, "airlock-agent-n1", holder, renew, t);
		}
		left = ctl_agent_wait(ctl, "n1", T0 - t, t, msg, sizeof(msg));
		if (left <= 0)
			ended = t;
	}
	assert_int_equal(ended, T0 + ABSENT);
	assert_string_equal(msg, "");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_unknown, setup, teardown),
		cmocka_unit_test_setup_teardown(test_new_agent, setup, teardown),
		cmocka_unit_test_setup_teardown(test_gap, setup, teardown),
		cmocka_unit_test_setup_teardown(test_away, setup, teardown),
		cmocka_unit_test_setup_teardown(test_flapping_capped, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
