/*
 * Unit tests: execution/pool.c's lending decisions (docs/warm-path.md,
 * "Holders are lent"): which scheduler messages say a node was short of
 * what holders hold, which idle holders to take back (one node, the
 * fewest, a not-ready one first), and how long a pool's refill is held.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "client.h"
#include "ctl_config.h"
#include "pool.h"

static const char conf[] =
    "runtimeClassName: gvisor-test\n"
    "runAsUser: 65532\n"
    "profiles:\n"
    "  python:\n"
    "    image: airlock/runner-python:0.1\n"
    "    command: [/airlock/bin/run, python3, main.py]\n"
    "    sourceFile: main.py\n"
    "  raw:\n"
    "    image: airlock/runner-python:0.1\n"
    "    command: [python3, main.py]\n"
    "    sourceFile: main.py\n";

#define MI	(1024LL * 1024)

/* The scheduler's own words (kube-scheduler 1.35), and others. */
static void
test_short(void **state)
{
	int cpu = -1, mem = -1;

	(void)state;
	assert_int_equal(pool_lend_short("0/1 nodes are available: 1 "
	    "Insufficient cpu. preemption: 0/1 nodes are available: 1 No "
	    "preemption victims found for incoming pod.", &cpu, &mem), 1);
	assert_int_equal(cpu, 1);
	assert_int_equal(mem, 0);
	assert_int_equal(pool_lend_short("0/1 nodes are available: 1 "
	    "Insufficient memory.", &cpu, &mem), 1);
	assert_int_equal(cpu, 0);
	assert_int_equal(mem, 1);
	assert_int_equal(pool_lend_short("0/2 nodes are available: 1 "
	    "Insufficient cpu, 1 Insufficient memory.", &cpu, &mem), 1);
	assert_int_equal(cpu, 1);
	assert_int_equal(mem, 1);
	/* Not for holders to fix: a selector, a taint, no nodes. */
	assert_int_equal(pool_lend_short("0/1 nodes are available: 1 node(s) "
	    "didn't match Pod's node affinity/selector.", &cpu, &mem), 0);
	assert_int_equal(cpu, 0);
	assert_int_equal(mem, 0);
	assert_int_equal(pool_lend_short("0/1 nodes are available: 1 node(s) "
	    "had untolerated taint {node.kubernetes.io/not-ready: }.", &cpu,
	    &mem), 0);
	assert_int_equal(pool_lend_short("no nodes available to schedule pods",
	    &cpu, &mem), 0);
	assert_int_equal(pool_lend_short(NULL, &cpu, &mem), 0);
	assert_int_equal(cpu, 0);
	assert_int_equal(mem, 0);
}

static void
test_key_resources(void **state)
{
	int64_t cpu = -1, mem = -1;

	(void)state;
	assert_int_equal(pool_key_resources("python/500/268435456/67108864",
	    &cpu, &mem), 0);
	assert_int_equal(cpu, 500);
	assert_int_equal(mem, 268435456);
	assert_int_equal(pool_key_resources("py-3/2000/1/0", &cpu, &mem), 0);
	assert_int_equal(cpu, 2000);
	assert_int_equal(mem, 1);
	cpu = mem = -1;
	assert_int_equal(pool_key_resources("python/abc/1/2", &cpu, &mem), -1);
	assert_int_equal(pool_key_resources("python/1/x/2", &cpu, &mem), -1);
	assert_int_equal(pool_key_resources("python/-1/1/2", &cpu, &mem), -1);
	assert_int_equal(pool_key_resources("500/1/2", &cpu, &mem), -1);
	assert_int_equal(pool_key_resources("python/500/1", &cpu, &mem), -1);
	assert_int_equal(pool_key_resources("", &cpu, &mem), -1);
	assert_int_equal(pool_key_resources(NULL, &cpu, &mem), -1);
	assert_int_equal(cpu, -1);
	assert_int_equal(mem, -1);
}

/* What pool_key and the claim use: the config's defaults, its caps. */
static void
test_spec_resources(void **state)
{
	struct ctl_config *cfg;
	struct k8s_error err;
	int64_t cpu = -1, mem = -1;
	json_t *spec;

	(void)state;
	if (ctl_config_parse(conf, sizeof(conf) - 1, "test", &cfg, &err) != 0)
		fail_msg("config: %s", err.message);
	spec = json_pack("{s:s}", "runtime", "python");
	assert_int_equal(pool_spec_resources(cfg, spec, &cpu, &mem, &err), 0);
	assert_int_equal(cpu, 500);
	assert_int_equal(mem, 256 * MI);
	json_decref(spec);
	/* A runtime a pool cannot hold still has its resources. */
	spec = json_pack("{s:s, s:{s:s, s:s}}", "runtime", "raw", "resources",
	    "cpu", "250m", "memory", "128Mi");
	assert_int_equal(pool_spec_resources(cfg, spec, &cpu, &mem, &err), 0);
	assert_int_equal(cpu, 250);
	assert_int_equal(mem, 128 * MI);
	json_decref(spec);
	spec = json_pack("{s:s, s:{s:s}}", "runtime", "python", "resources",
	    "cpu", "lots");
	assert_int_equal(pool_spec_resources(cfg, spec, &cpu, &mem, &err),
	    K8S_EINVAL);
	assert_non_null(strstr(err.message, "spec.resources.cpu"));
	json_decref(spec);
	ctl_config_free(cfg);
}

/* Three 500m holders fill a node: one frees room for a 500m execution. */
static void
test_pick_one_of_three(void **state)
{
	struct pool_lend_cand c[] = {
		{ "node-a", 500, 256 * MI, 1 },
		{ "node-a", 500, 256 * MI, 1 },
		{ "node-a", 500, 256 * MI, 0 },
	};
	size_t out[3] = { 9, 9, 9 };

	(void)state;
	/* The one still warming up: of no use yet, and it burns cpu. */
	assert_int_equal(pool_lend_pick(c, 3, 500, 0, out), 1);
	assert_int_equal(out[0], 2);
	c[2].ready = 1;
	assert_int_equal(pool_lend_pick(c, 3, 500, 0, out), 1);
	assert_int_equal(out[0], 0);
	/* 1200m: three. */
	assert_int_equal(pool_lend_pick(c, 3, 1200, 0, out), 3);
	assert_int_equal(out[0], 0);
	assert_int_equal(out[1], 1);
	assert_int_equal(out[2], 2);
	/* More than all of them: none, not all for nothing. */
	assert_int_equal(pool_lend_pick(c, 3, 1600, 0, out), 0);
}

/* The node where the fewest cover it, across pools and nodes. */
static void
test_pick_fewest_node(void **state)
{
	struct pool_lend_cand c[] = {
		{ "node-a", 250, 128 * MI, 0 },
		{ "node-a", 250, 128 * MI, 0 },
		{ "node-b", 500, 256 * MI, 1 },
		{ "node-c", 200, 128 * MI, 0 },
	};
	size_t out[4] = { 9, 9, 9, 9 };

	(void)state;
	assert_int_equal(pool_lend_pick(c, 4, 500, 0, out), 1);
	assert_int_equal(out[0], 2);
	/* node-b can not: node-a's two can. */
	assert_int_equal(pool_lend_pick(c, 4, 0, 256 * MI, out), 1);
	assert_int_equal(out[0], 2);
	assert_int_equal(pool_lend_pick(c, 4, 0, 300 * MI, out), 0);
	c[2].cpu_milli = 400;
	assert_int_equal(pool_lend_pick(c, 4, 500, 0, out), 2);
	assert_int_equal(out[0], 0);
	assert_int_equal(out[1], 1);
	/* Never holders of two nodes for one pod: it runs on one. */
	c[0].node = "node-x";
	assert_int_equal(pool_lend_pick(c, 4, 500, 0, out), 0);
}

/* Both short: the one covering most of both first. */
static void
test_pick_both(void **state)
{
	struct pool_lend_cand c[] = {
		{ "node-a", 1000, 128 * MI, 1 },
		{ "node-a", 250, 512 * MI, 1 },
		{ "node-a", 250, 512 * MI, 1 },
	};
	size_t out[3] = { 9, 9, 9 };

	(void)state;
	assert_int_equal(pool_lend_pick(c, 3, 500, 512 * MI, out), 2);
	assert_int_equal(out[0], 1);
	assert_int_equal(out[1], 0);
	assert_int_equal(pool_lend_pick(c, 3, 1000, 0, out), 1);
	assert_int_equal(out[0], 0);
}

/* Equal counts: fewer ready holders lost, then the first node by name. */
static void
test_pick_ties(void **state)
{
	struct pool_lend_cand c[] = {
		{ "node-b", 500, 256 * MI, 0 },
		{ "node-a", 500, 256 * MI, 1 },
		{ "node-c", 500, 256 * MI, 0 },
	};
	size_t out[3] = { 9, 9, 9 };

	(void)state;
	assert_int_equal(pool_lend_pick(c, 3, 500, 0, out), 1);
	assert_int_equal(out[0], 0);
	c[0].ready = 1;
	assert_int_equal(pool_lend_pick(c, 3, 500, 0, out), 1);
	assert_int_equal(out[0], 2);
	c[2].ready = 1;
	assert_int_equal(pool_lend_pick(c, 3, 500, 0, out), 1);
	assert_int_equal(out[0], 1);
}

/* Nothing short, nothing to weigh, a holder on no node yet. */
static void
test_pick_nothing(void **state)
{
	struct pool_lend_cand c[] = {
		{ "", 500, 256 * MI, 0 },
		{ NULL, 500, 256 * MI, 0 },
	};
	size_t out[2] = { 9, 9 };

	(void)state;
	assert_int_equal(pool_lend_pick(c, 2, 500, 0, out), 0);
	c[0].node = "node-a";
	assert_int_equal(pool_lend_pick(c, 2, 0, 0, out), 0);
	assert_int_equal(pool_lend_pick(c, 0, 500, 0, out), 0);
	assert_int_equal(out[0], 9);
	assert_int_equal(pool_lend_pick(c, 2, 500, 0, out), 1);
	assert_int_equal(out[0], 0);
}

static void
test_hold(void **state)
{
	(void)state;
	/* Nothing waits: refill now. */
	assert_int_equal(pool_lend_hold(0, 1000, 1500), 0);
	/* One waits: looked at again within a second. */
	assert_int_equal(pool_lend_hold(1, 1000, 1500), POOL_LEND_RECHECK_MS);
	assert_int_equal(pool_lend_hold(1, 1000, 1000 + POOL_LEND_HOLD_MAX_MS -
	    300), 300);
	/* Never longer than the cap, whatever waits. */
	assert_int_equal(pool_lend_hold(1, 1000, 1000 + POOL_LEND_HOLD_MAX_MS),
	    0);
	assert_int_equal(pool_lend_hold(3, 1000, 5000 + POOL_LEND_HOLD_MAX_MS),
	    0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_short),
		cmocka_unit_test(test_key_resources),
		cmocka_unit_test(test_spec_resources),
		cmocka_unit_test(test_pick_one_of_three),
		cmocka_unit_test(test_pick_fewest_node),
		cmocka_unit_test(test_pick_both),
		cmocka_unit_test(test_pick_ties),
		cmocka_unit_test(test_pick_nothing),
		cmocka_unit_test(test_hold),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
