/*
 * Unit tests: node-agent/tick.c's agent_decide, what the ticker does about
 * a run at an instant: the deadline, an output flood, an isolation
 * refusal, OOM, and the races between an exit and a kill.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "agent_priv.h"
#include "clock.h"

#define CAP	1000		/* hard_cap, bytes */
#define POLL	20		/* poll_ms */
#define NOW	100000LL	/* the monotonic clock, ms */
#define WALL	INT64_C(1795000000000000000)	/* the wall clock, ns */
#define MS	INT64_C(1000000)
#define SEC	(1000 * MS)

struct fixture {
	struct run	r;
	struct crilog	*log;
};

static int
setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	f->log = crilog_new(4096, 65536);
	f->r.log = f->log;
	f->r.cid = "c1";
	f->r.verified = 1;
	f->r.timeout_ms = 2000;
	f->r.start_ns = WALL - 1000 * MS;
	agent_arm_deadline(&f->r);
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	struct fixture *f = *state;

	crilog_free(f->log);
	free(f);
	return 0;
}

static enum agent_step
decide(struct run *r, long long now, int64_t wall, enum cx_kill *why)
{
	return agent_decide(r, CAP, POLL, now, wall, why);
}

static void
test_arm_deadline(void **state)
{
	struct fixture *f = *state;
	struct run r = { 0 };

	assert_int_equal(f->r.deadline_ns, WALL + 1000 * MS);
	/* Unknown until both the start and the verified timeout are. */
	r.timeout_ms = 2000;
	agent_arm_deadline(&r);
	assert_int_equal(r.deadline_ns, 0);
	r.start_ns = WALL;
	agent_arm_deadline(&r);
	assert_int_equal(r.deadline_ns, 0);
	r.verified = 1;
	agent_arm_deadline(&r);
	assert_int_equal(r.deadline_ns, WALL + 2000 * MS);
}

static void
test_deadline(void **state)
{
	struct fixture *f = *state;
	enum cx_kill why;

	assert_int_equal(decide(&f->r, NOW, WALL, &why), AGENT_WAIT);
	assert_int_equal(why, CX_KILL_NONE);
	assert_int_equal(decide(&f->r, NOW, WALL + 1000 * MS - 1, &why), AGENT_WAIT);
	assert_int_equal(decide(&f->r, NOW, WALL + 1000 * MS, &why), AGENT_KILL);
	assert_int_equal(why, CX_KILL_DEADLINE);
	/* No deadline yet (no start seen): never killed for time. */
	f->r.deadline_ns = 0;
	assert_int_equal(decide(&f->r, NOW, WALL + 9999 * MS, &why), AGENT_WAIT);
	/* No container known yet: nothing to kill. */
	agent_arm_deadline(&f->r);
	f->r.cid = NULL;
	assert_int_equal(decide(&f->r, NOW, WALL + 9999 * MS, &why), AGENT_WAIT);
}

static void
test_flood(void **state)
{
	struct fixture *f = *state;
	char buf[600];
	enum cx_kill why;

	memset(buf, 'x', sizeof(buf));
	crilog_feed_stream(f->log, 0, buf, 500);
	crilog_feed_stream(f->log, 1, buf, 500);
	/* At the cap, not past it. */
	assert_int_equal(decide(&f->r, NOW, WALL, &why), AGENT_WAIT);
	crilog_feed_stream(f->log, 1, buf, 1);
	assert_int_equal(decide(&f->r, NOW, WALL, &why), AGENT_KILL);
	assert_int_equal(why, CX_KILL_OUTPUT);
	/* Past both: the flood is what is reported. */
	assert_int_equal(decide(&f->r, NOW, WALL + 5000 * MS, &why), AGENT_KILL);
	assert_int_equal(why, CX_KILL_OUTPUT);
}

static void
test_isolation(void **state)
{
	struct fixture *f = *state;
	enum cx_kill why;

	f->r.why = CX_KILL_ISOLATION;
	assert_int_equal(decide(&f->r, NOW, WALL, &why), AGENT_KILL);
	assert_int_equal(why, CX_KILL_ISOLATION);
}

/* A kill with no exit after it is sent again, KILL_RETRY_MS later. */
static void
test_kill_retry(void **state)
{
	struct fixture *f = *state;
	enum cx_kill why;

	f->r.why = CX_KILL_DEADLINE;
	f->r.kill_sent = 1;
	f->r.kill_at_ms = NOW;
	assert_int_equal(decide(&f->r, NOW + KILL_RETRY_MS - 1, WALL + 5000 * MS,
	    &why), AGENT_WAIT);
	assert_int_equal(decide(&f->r, NOW + KILL_RETRY_MS, WALL + 5000 * MS, &why),
	    AGENT_KILL);
	assert_int_equal(why, CX_KILL_DEADLINE);
}

/* The exit wins: a run that exited is recorded, never killed. */
static void
test_exit_races_deadline(void **state)
{
	struct fixture *f = *state;
	enum cx_kill why;

	f->r.exited = 1;
	f->r.exit_seen_ms = NOW;
	f->r.last_read_ms = NOW - 100;
	assert_int_equal(decide(&f->r, NOW, WALL + 5000 * MS, &why), AGENT_WAIT);
	assert_int_equal(why, CX_KILL_NONE);
	/* Recorded once the log has been quiet for two polls. */
	assert_int_equal(decide(&f->r, NOW + 2 * POLL - 1, WALL + 5000 * MS, &why),
	    AGENT_WAIT);
	assert_int_equal(decide(&f->r, NOW + 2 * POLL, WALL + 5000 * MS, &why),
	    AGENT_RECORD);
	assert_int_equal(why, CX_KILL_NONE);
	/* The log grew after the exit: wait for it to be quiet again. */
	f->r.last_read_ms = NOW + 30;
	assert_int_equal(decide(&f->r, NOW + 2 * POLL, WALL, &why), AGENT_WAIT);
	assert_int_equal(decide(&f->r, NOW + 30 + 2 * POLL, WALL, &why), AGENT_RECORD);
	/* A failed record waits for its retry time. */
	f->r.retry_ms = NOW + 500;
	assert_int_equal(decide(&f->r, NOW + 499, WALL, &why), AGENT_WAIT);
	assert_int_equal(decide(&f->r, NOW + 500, WALL, &why), AGENT_RECORD);
}

/*
 * Its log's writer closed the file (inotify): recorded at containerd's
 * exit, with no quiet wait; before the exit, a close changes nothing.
 */
static void
test_log_closed(void **state)
{
	struct fixture *f = *state;
	enum cx_kill why;

	f->r.log_closed = 1;
	f->r.last_read_ms = NOW;
	assert_int_equal(decide(&f->r, NOW, WALL, &why), AGENT_WAIT);
	/* An exit from the pod's status (whole seconds): the quiet wait. */
	f->r.exited = 1;
	f->r.exit_seen_ms = NOW;
	assert_int_equal(decide(&f->r, NOW, WALL, &why), AGENT_WAIT);
	/* containerd's own: at once. */
	f->r.exit_exact = 1;
	assert_int_equal(decide(&f->r, NOW, WALL, &why), AGENT_RECORD);
	assert_int_equal(why, CX_KILL_NONE);
	/* Not closed: the quiet wait, as before. */
	f->r.log_closed = 0;
	assert_int_equal(decide(&f->r, NOW, WALL, &why), AGENT_WAIT);
	/* A failed record still waits for its retry time. */
	f->r.log_closed = 1;
	f->r.retry_ms = NOW + 500;
	assert_int_equal(decide(&f->r, NOW + 499, WALL, &why), AGENT_WAIT);
	assert_int_equal(decide(&f->r, NOW + 500, WALL, &why), AGENT_RECORD);
}

/*
 * The exit from the sandbox (runsc wait), before containerd's: recorded
 * when the log closes; a quiet log is not enough until TaskExit came
 * (containerd may still be copying the program's last output).
 */
static void
test_exit_early(void **state)
{
	struct fixture *f = *state;
	enum cx_kill why;

	f->r.exited = 1;
	f->r.exit_exact = 1;
	f->r.exit_early = 1;
	f->r.exit_seen_ms = NOW;
	f->r.last_read_ms = NOW;
	assert_int_equal(decide(&f->r, NOW + 1000, WALL, &why), AGENT_WAIT);
	f->r.log_closed = 1;
	assert_int_equal(decide(&f->r, NOW + 1, WALL, &why), AGENT_RECORD);
	assert_int_equal(why, CX_KILL_NONE);
	/* TaskExit came (exit_early cleared), the log still open: quiet. */
	f->r.log_closed = 0;
	f->r.exit_early = 0;
	f->r.exit_seen_ms = NOW + 1000;
	assert_int_equal(decide(&f->r, NOW + 1000 + 2 * POLL - 1, WALL, &why),
	    AGENT_WAIT);
	assert_int_equal(decide(&f->r, NOW + 1000 + 2 * POLL, WALL, &why),
	    AGENT_RECORD);
	/* An exit is never killed, early or not, whatever the deadline. */
	f->r.exit_early = 1;
	f->r.deadline_ns = 1;
	assert_int_equal(decide(&f->r, NOW, WALL, &why), AGENT_WAIT);
}

/* runsc wait's status is taken only when nothing came first. */
static void
test_wait_takes(void **state)
{
	struct fixture *f = *state;

	f->r.cid = "c1";
	assert_true(agent_wait_takes(&f->r, "c1", 0));
	assert_true(agent_wait_takes(&f->r, "c1", 128));
	/* A death by signal: TaskOOM may follow; TaskExit decides. */
	assert_false(agent_wait_takes(&f->r, "c1", 137));
	assert_false(agent_wait_takes(&f->r, "c2", 0));
	f->r.exited = 1;		/* the kubelet's terminated came first */
	assert_false(agent_wait_takes(&f->r, "c1", 0));
	f->r.exited = 0;
	f->r.kill_sent = 1;
	assert_false(agent_wait_takes(&f->r, "c1", 0));
	f->r.kill_sent = 0;
	f->r.warm = 1;
	assert_false(agent_wait_takes(&f->r, "c1", 0));
	f->r.warm = 0;
	f->r.exit_exact = 1;
	assert_false(agent_wait_takes(&f->r, "c1", 0));
	f->r.exit_exact = 0;
	f->r.recorded = 1;
	assert_false(agent_wait_takes(&f->r, "c1", 0));
	f->r.recorded = 0;
	f->r.cid = NULL;
	assert_false(agent_wait_takes(&f->r, "c1", 0));
}

/* A process's start time: stable, and read past a ")" in its name. */
static void
test_pid_start(void **state)
{
	unsigned long long t = agent_pid_start((uint32_t)getpid());
	char name[16];

	(void)state;
	assert_true(t > 0);
	prctl(PR_GET_NAME, name);
	prctl(PR_SET_NAME, "x) 1 2 3 4 5");
	assert_true(agent_pid_start((uint32_t)getpid()) == t);
	prctl(PR_SET_NAME, name);
	assert_true(agent_pid_start(0x7ffffff0u) == 0);
}

/* Live output's pace: per run, then per node. */
static void
test_flush_pace(void **state)
{
	static const struct { int n; long long ms; } t[] = {
		{ 0, 100 }, { 1, 100 }, { 19, 100 }, { 20, 200 }, { 29, 200 },
		{ 30, 400 }, { 40, 800 }, { 50, 1600 }, { 60, 3200 }, { 69, 3200 },
		{ 70, 5000 }, { 1000, 5000 }, { 1 << 30, 5000 },
	};
	double tokens = 0;
	long long last = 0;

	(void)state;
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (agent_flush_interval(t[i].n) != t[i].ms)
			fail_msg("after %d: %lld ms, not %lld", t[i].n,
			    agent_flush_interval(t[i].n), t[i].ms);
	/*
	 * Bytes: a full bucket (1 MiB) at first: four 256 KiB copies, not a
	 * fifth; then 256 KiB a second.
	 */
	for (int i = 0; i < 4; i++)
		assert_int_equal(agent_flush_take(&tokens, &last, 1000, 262144), 1);
	assert_int_equal(agent_flush_take(&tokens, &last, 1000, 1), 0);
	assert_int_equal(agent_flush_take(&tokens, &last, 1499, 131072), 0);
	assert_int_equal(agent_flush_take(&tokens, &last, 1500, 130972), 1);
	assert_int_equal(agent_flush_take(&tokens, &last, 1500, 1000), 0);
	/* A copy of the largest object: once a full bucket has refilled. */
	assert_int_equal(agent_flush_take(&tokens, &last, 5499, 4e6), 0);
	assert_int_equal(agent_flush_take(&tokens, &last, 5500, 4e6), 1);
	/* Idle for long: never more than a full bucket. */
	assert_int_equal(agent_flush_take(&tokens, &last, 100000, 1048576), 1);
	assert_int_equal(agent_flush_take(&tokens, &last, 100000, 1), 0);
}

/* Killed, then its exit: recorded with the kill's reason. */
static void
test_exit_after_kill(void **state)
{
	struct fixture *f = *state;
	enum cx_kill why;

	f->r.why = CX_KILL_DEADLINE;
	f->r.kill_sent = 1;
	f->r.kill_at_ms = NOW - 5000;
	f->r.exited = 1;
	f->r.exit_seen_ms = NOW - 100;
	f->r.last_read_ms = NOW - 100;
	assert_int_equal(decide(&f->r, NOW, WALL + 5000 * MS, &why), AGENT_RECORD);
	assert_int_equal(why, CX_KILL_DEADLINE);
}

/* OOM is the runtime's doing, not a kill: recorded as it exited. */
static void
test_oom(void **state)
{
	struct fixture *f = *state;
	enum cx_kill why;

	f->r.oom = 1;
	assert_int_equal(decide(&f->r, NOW, WALL, &why), AGENT_WAIT);
	f->r.exited = 1;
	f->r.status = 137;
	f->r.exit_seen_ms = NOW - 100;
	assert_int_equal(decide(&f->r, NOW, WALL + 5000 * MS, &why), AGENT_RECORD);
	assert_int_equal(why, CX_KILL_NONE);
}

/*
 * The pod cgroup's OOM kill count is an OOM too: a warm run's exit is its
 * runsc client's, which can come before the shim's TaskOOM (a memory bomb
 * was recorded Error so). Read once, when the run has exited; of a warm
 * run, only the kills past the holder's before the program.
 */
static void
test_oom_from_cgroup(void **state)
{
	static const char *const kills[] = { "0", "1" };
	struct fixture *f = *state;
	struct agent a = { 0 };
	char top[] = "/tmp/airlock-oom-XXXXXX", cmd[400], path[300];
	FILE *fp;

	assert_non_null(mkdtemp(top));
	a.o.cgroup_mount = top;
	f->r.uid = "7056fc73-9923-4638-a1cc-3f428b37a5b5";
	f->r.warm = 1;
	f->r.cpu_before_ns = -1;
	f->r.oom_before = 0;
	for (int i = 0; i < 2; i++) {
		snprintf(path, sizeof(path), "%s/memory/kubepods/burstable/pod%s",
		    top, f->r.uid);
		snprintf(cmd, sizeof(cmd), "mkdir -p '%s'", path);
		assert_int_equal(system(cmd), 0);
		strcat(path, "/memory.oom_control");
		assert_non_null(fp = fopen(path, "w"));
		fprintf(fp, "oom_kill_disable 0\nunder_oom 0\noom_kill %s\n",
		    kills[i]);
		fclose(fp);
		strcpy(strrchr(path, '/'), "/memory.max_usage_in_bytes");
		assert_non_null(fp = fopen(path, "w"));
		fputs("134221824\n", fp);
		fclose(fp);

		f->r.exited = 0;
		f->r.usage_done = 0;
		f->r.oom = 0;
		agent_usage_once(&a, &f->r);	/* not exited: not yet */
		assert_int_equal(f->r.usage_done, 0);
		assert_int_equal(f->r.oom, 0);
		f->r.exited = 1;
		f->r.status = 128;
		agent_usage_once(&a, &f->r);
		assert_int_equal(f->r.usage_done, 1);
		assert_int_equal(f->r.usage.peak_memory, 134221824);
		assert_int_equal(f->r.usage.oom_kills, i);
		assert_int_equal(f->r.oom, i);
	}
	/*
	 * A warm run: the holder's warm-up had that kill, not the program;
	 * and when what it had is unknown, the count says nothing.
	 */
	for (int before = -1; before <= 1; before++) {
		f->r.usage_done = 0;
		f->r.oom = 0;
		f->r.oom_before = before;
		agent_usage_once(&a, &f->r);
		assert_int_equal(f->r.usage.oom_kills, 1);
		assert_int_equal(f->r.oom, before == 0);
	}
	/* Cold: no warm-up, every kill is the program's. */
	f->r.warm = 0;
	f->r.usage_done = 0;
	f->r.oom = 0;
	agent_usage_once(&a, &f->r);
	assert_int_equal(f->r.oom, 1);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", top);
	assert_int_equal(system(cmd), 0);
}

/* Recorded (or its pod deleted before an exit): the pod goes. */
static void
test_recorded(void **state)
{
	struct fixture *f = *state;
	enum cx_kill why;

	f->r.recorded = 1;
	assert_int_equal(decide(&f->r, NOW, WALL + 5000 * MS, &why), AGENT_DELETE);
	f->r.retry_ms = NOW + 1000;
	assert_int_equal(decide(&f->r, NOW, WALL, &why), AGENT_WAIT);
	f->r.exited = 1;
	assert_int_equal(decide(&f->r, NOW + 1000, WALL, &why), AGENT_DELETE);
}

/*
 * The kubelet says the node lost track of the container (containerd's
 * "Unknown", exit 255; the kubelet's "ContainerStatusUnknown", 137): that
 * exit is not the program's, and the agent leaves it to the controller.
 */
static void
test_unknown_end(void **state)
{
	struct fixture *f = *state;
	enum cx_kill why;

	f->r.exited = 1;
	f->r.status = 255;
	f->r.unknown = 1;
	f->r.exit_seen_ms = NOW - 10000;
	f->r.log_closed = 1;
	f->r.exit_exact = 1;
	assert_int_equal(decide(&f->r, NOW, WALL + 5000 * MS, &why), AGENT_WAIT);
	assert_int_equal(decide(&f->r, NOW + 600000, WALL + 600000 * MS, &why), AGENT_WAIT);
	f->r.unknown = 0;
	assert_int_equal(decide(&f->r, NOW, WALL + 5000 * MS, &why), AGENT_RECORD);
}

/*
 * An exit taken from the kubelet: a true one is kept; one whose end the
 * node lost track of, or whose program never started as far as anyone
 * saw (the soak's node 2: a start that failed under the kubelet's restart,
 * exit 128 with the zero start time, recorded as the program's Error), is
 * marked unknown and so never recorded.
 */
static void
test_learn_exit(void **state)
{
	static const char *const cases[][4] = {
		/* reason, startedAt, exitCode, unknown */
		{ "Completed", "2026-11-26T01:23:39Z", "0", "0" },
		{ "Error", "1970-01-01T00:00:00Z", "128", "1" },
		{ "StartError", NULL, "128", "1" },
		{ "Unknown", "2026-11-26T01:23:39Z", "255", "1" },
		{ "ContainerStatusUnknown", NULL, "137", "1" },
	};
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct run r = { 0 };
		json_t *term = json_pack("{s:s, s:I, s:s}", "reason", cases[i][0],
		    "exitCode", (json_int_t)atoi(cases[i][2]), "finishedAt",
		    "2026-11-26T01:23:40Z");

		r.ns = "ns";
		r.pod = "p";
		if (cases[i][1]) {
			json_object_set_new(term, "startedAt", json_string(cases[i][1]));
			/* As pod_seen does before: the start from the kubelet. */
			r.start_ns = (int64_t)clock_parse_rfc3339(cases[i][1]) * SEC;
		}
		agent_learn_exit(&r, term);
		assert_int_equal(r.exited, 1);
		assert_int_equal(r.status, atoi(cases[i][2]));
		assert_int_equal(r.exited_ns, INT64_C(1795656220) * SEC);
		assert_int_equal(r.unknown, atoi(cases[i][3]));
		/* An exit in hand is not taken again. */
		r.status = 7;
		agent_learn_exit(&r, term);
		assert_int_equal(r.status, 7);
		json_decref(term);
	}
	{
		/* The start seen at TaskStart counts, whatever the kubelet says. */
		struct run r = { 0 };
		json_t *term = json_pack("{s:s, s:i, s:s}", "reason", "Error",
		    "exitCode", 3, "finishedAt", "2026-11-26T01:23:40Z");

		r.ns = "ns";
		r.pod = "p";
		r.start_ns = 1795656219 * SEC;
		agent_learn_exit(&r, term);
		assert_int_equal(r.unknown, 0);
		assert_int_equal(r.status, 3);
		json_decref(term);
	}
}

/*
 * Said in the result when containerd restarted while a cold run ran:
 * seen by this agent (its stream ended), or not (the agent started after,
 * as with a node back from its loss) and then known from when the
 * containerd now answering started.
 */
static void
test_ctrd_note(void **state)
{
	struct agent *a = calloc(1, sizeof(*a));
	struct run r = { 0 };
	char note[256];

	(void)state;
	r.start_ns = 100 * SEC;
	r.exited_ns = 101 * SEC;
	/* No restart known: nothing. */
	note[0] = '\0';
	agent_ctrd_note(a, &r, note, sizeof(note));
	assert_string_equal(note, "");
	/* Seen: the stream ended at 100.5 s, while it ran. */
	atomic_store(&a->ctrd_down_ns, 100 * SEC + SEC / 2);
	agent_ctrd_note(a, &r, note, sizeof(note));
	assert_string_equal(note, "; containerd restarted while it ran "
	    "(1970-01-01T00:01:40.500Z): output written after then may be missing");
	/* Seen, but it had exited more than 1 s before: its output was whole. */
	note[0] = '\0';
	atomic_store(&a->ctrd_down_ns, 103 * SEC);
	agent_ctrd_note(a, &r, note, sizeof(note));
	assert_string_equal(note, "");
	/* Not seen: containerd started at 160 s, after the run did. */
	atomic_store(&a->ctrd_down_ns, 0);
	atomic_store(&a->ctrd_started_ns, 160 * SEC);
	agent_ctrd_note(a, &r, note, sizeof(note));
	assert_string_equal(note, "; containerd restarted while it ran "
	    "(1970-01-01T00:02:40.000Z): output written after then may be missing");
	/* ... unless this agent saw its log closed: then it is whole. */
	note[0] = '\0';
	r.log_closed = 1;
	agent_ctrd_note(a, &r, note, sizeof(note));
	assert_string_equal(note, "");
	/* A run started under this containerd: nothing. */
	r.log_closed = 0;
	r.start_ns = 161 * SEC;
	r.exited_ns = 162 * SEC;
	agent_ctrd_note(a, &r, note, sizeof(note));
	assert_string_equal(note, "");
	/* Warm runs read their output from pipes: never. */
	r.start_ns = 100 * SEC;
	r.warm = 1;
	agent_ctrd_note(a, &r, note, sizeof(note));
	assert_string_equal(note, "");
	free(a);
}

/*
 * A warm run: its output comes from pipes, not a log, so it is recorded
 * once both reached EOF (io_done), with no quiet-log wait; and before its
 * exec starts it has no deadline, so it is not killed for one.
 */
static void
test_warm(void **state)
{
	struct fixture *f = *state;
	enum cx_kill why;

	f->r.warm = 1;
	f->r.start_ns = 0;
	agent_arm_deadline(&f->r);
	assert_int_equal(f->r.deadline_ns, 0);
	assert_int_equal(decide(&f->r, NOW, WALL + 5000 * MS, &why), AGENT_WAIT);
	assert_int_equal(why, CX_KILL_NONE);
	f->r.start_ns = WALL - 1000 * MS;
	agent_arm_deadline(&f->r);
	assert_int_equal(decide(&f->r, NOW, WALL + 5000 * MS, &why), AGENT_KILL);
	assert_int_equal(why, CX_KILL_DEADLINE);
	f->r.why = CX_KILL_NONE;
	f->r.exited = 1;
	f->r.exit_seen_ms = NOW;
	f->r.last_read_ms = NOW;
	assert_int_equal(decide(&f->r, NOW, WALL, &why), AGENT_WAIT);
	f->r.io_done = 1;
	assert_int_equal(decide(&f->r, NOW, WALL, &why), AGENT_RECORD);
	f->r.retry_ms = NOW + 100;
	assert_int_equal(decide(&f->r, NOW + 99, WALL, &why), AGENT_WAIT);
	assert_int_equal(decide(&f->r, NOW + 100, WALL, &why), AGENT_RECORD);
}

int
main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(test_arm_deadline),
		T(test_deadline),
		T(test_flood),
		T(test_isolation),
		T(test_kill_retry),
		T(test_exit_races_deadline),
		T(test_log_closed),
		T(test_exit_early),
		T(test_wait_takes),
		T(test_pid_start),
		T(test_flush_pace),
		T(test_exit_after_kill),
		T(test_oom),
		T(test_oom_from_cgroup),
		T(test_recorded),
		T(test_unknown_end),
		T(test_learn_exit),
		T(test_ctrd_note),
		T(test_warm),
	};
#undef T

	return cmocka_run_group_tests(tests, NULL, NULL);
}
