/*
 * Unit tests: the node agent's configuration against the node (issue 28:
 * an agent pointed at another node's pod logs recorded "" as the output
 * of 52 programs that printed "ok"). node-agent/check.c's readiness, and
 * record.c's result for a run whose log never opened.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "agent_priv.h"
#include "clock.h"
#include "fakeapi.h"
#include "xmalloc.h"

#define POLL	20
#define NOW	100000LL
#define WALL	INT64_C(1795000000000000000)
#define MS	INT64_C(1000000)
#define NOSOCK	"/nonexistent/airlock/containerd.sock"

/* What the agent told main (agent_opts.on_ready), and how often. */
struct told {
	int	 n;
	char	 why[CHECK_REASON_MAX];	/* "" for ready */
};

static void
on_ready(void *arg, const char *why)
{
	struct told *t = arg;

	t->n++;
	snprintf(t->why, sizeof(t->why), "%s", why ? why : "");
}

struct afx {
	struct agent		 a;
	struct fakeapi		*api;
	struct k8s_config	*cfg;
	struct told		 told;
	char			 dir[64];
	char			 exec[96];
};

static void
afx_start(struct afx *f, int api)
{
	struct k8s_error err;

	memset(f, 0, sizeof(*f));
	snprintf(f->dir, sizeof(f->dir), "/tmp/airlock-agentcfg-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	if (api) {
		f->api = fakeapi_start();
		f->cfg = fakeapi_config(f->api, NULL);
		assert_int_equal(k8s_client_new(f->cfg, NULL, &f->a.client,
		    &err), 0);
	}
	pthread_mutex_init(&f->a.lock, NULL);
	f->a.out_mem = crilog_budget_new(AGENT_OUTPUT_MEMORY);
	f->a.o.node_name = "n1";
	f->a.o.pod_logs_dir = f->dir;
	snprintf(f->exec, sizeof(f->exec), "%s/exec", f->dir);
	f->a.o.exec_dir = f->exec;
	f->a.o.containerd_socket = NOSOCK;
	f->a.o.on_ready = on_ready;
	f->a.o.on_ready_arg = &f->told;
	f->a.ctrd = ctrd_new(NOSOCK, "k8s.io");
}

static void
afx_stop(struct afx *f)
{
	struct run *r;
	char cmd[128];

	while ((r = f->a.runs) != NULL) {
		f->a.runs = r->next;
		agent_free_run(r);
	}
	assert_int_equal(crilog_budget_used(f->a.out_mem), 0);
	crilog_budget_free(f->a.out_mem);
	ctrd_free(f->a.ctrd);
	pthread_mutex_destroy(&f->a.lock);
	if (f->api) {
		k8s_client_free(f->a.client);
		k8s_config_free(f->cfg);
		fakeapi_stop(f->api);
	}
	snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
	assert_int_equal(system(cmd), 0);
}

/*
 * The agent's defaults, as agent_new gives them to what --flag leaves
 * unset: 16 MiB of output in all before a run is stopped (the README's
 * and the chart's hardOutputCap), the kubelet's paths, a sweep a minute.
 */
static void
test_defaults(void **state)
{
	struct agent_opts o = { .node_name = "n1", .containerd_socket = NOSOCK };
	struct fakeapi *api = fakeapi_start();
	struct k8s_config *cfg = fakeapi_config(api, NULL);
	struct metrics *m = metrics_new();
	struct k8s_client *c;
	struct k8s_error err;
	struct agent *a;

	(void)state;
	assert_int_equal(k8s_client_new(cfg, NULL, &c, &err), 0);
	a = agent_new(c, m, &o);
	assert_non_null(a);
	assert_int_equal(a->o.hard_cap, 16777216);
	assert_string_equal(a->o.pod_logs_dir, "/var/log/pods");
	assert_string_equal(a->o.exec_dir, "/run/airlock/exec");
	assert_int_equal(a->o.sweep_ms, 60000);
	agent_free(a);
	/* What is given is kept. */
	o.hard_cap = 4194304;
	a = agent_new(c, m, &o);
	assert_int_equal(a->o.hard_cap, 4194304);
	agent_free(a);
	metrics_free(m);
	k8s_client_free(c);
	k8s_config_free(cfg);
	fakeapi_stop(api);
}

/*
 * A TaskExit the run cannot take when it comes is kept, not dropped: a
 * warm exec's exit before its start is marked (print(1) ends before
 * Tasks.Start's answer is back), a run's while a worker holds it. Dropped,
 * the run waited for its deadline: TimedOut with its output whole
 * (bench/chart.sh on the chart's default agent).
 */
static void
test_exit_kept_until_taken(void **state)
{
	struct agent *a = calloc(1, sizeof(*a));
	struct run w = { .warm = 1, .uid = "w" }, c = { .uid = "c" };
	struct ctrd_event ev = { .kind = CTRD_EV_TASK_EXIT, .container_id = "c1",
	    .exec_id = WARM_EXEC_ID, .exit_status = 3, .exited_ns = 1000 };

	(void)state;
	/* Warm, not marked started yet: kept. */
	agent_run_exit(a, &w, &ev);
	assert_int_equal(w.exited, 0);
	assert_int_equal(w.pend_exit, 1);
	agent_run_exit_pending(a, &w);
	assert_int_equal(w.exited, 0);
	/* Marked started: taken, as it came. */
	w.warm_started = 1;
	agent_run_exit_pending(a, &w);
	assert_int_equal(w.exited, 1);
	assert_int_equal(w.exit_exact, 1);
	assert_int_equal(w.status, 3);
	assert_int_equal(w.exited_ns, 1000);
	assert_int_equal(w.pend_exit, 0);

	/* Cold and busy: kept until the worker lets it go; a kubectl exec's is not its. */
	c.busy = 1;
	ev.exec_id = "exec-1";
	agent_run_exit(a, &c, &ev);
	assert_int_equal(c.pend_exit, 0);
	ev.exec_id = "c1";
	ev.exit_status = 0;
	ev.exited_ns = 2000;
	agent_run_exit(a, &c, &ev);
	assert_int_equal(c.exited, 0);
	assert_int_equal(c.pend_exit, 1);
	c.busy = 0;
	agent_run_exit_pending(a, &c);
	assert_int_equal(c.exited, 1);
	assert_int_equal(c.status, 0);
	assert_int_equal(c.exited_ns, 2000);
	/* Taken, no second exit replaces it. */
	ev.exit_status = 9;
	agent_run_exit(a, &c, &ev);
	assert_int_equal(c.status, 0);
	assert_int_equal(c.pend_exit, 0);
	free(a);
}

/* A verified cold run of pod t/airlock-x (uid pod-uid-1), started. */
static struct run *
running_run(struct afx *f)
{
	struct run *r = agent_new_run(&f->a, "pod-uid-1", "t", "airlock-x");

	r->cx = xstrdup("x");
	r->cx_uid = xstrdup("cx-uid-1");
	r->verified = 1;
	r->max_out = 4096;
	r->budget = 8192;
	r->timeout_ms = 10000;
	agent_run_log(&f->a, r);
	r->cid = xstrdup("c0ffee00c0ffee00");
	r->start_ns = WALL - 1000 * MS;
	return r;
}

/*
 * A pod log directory that is not there, or not a directory: not ready at
 * the first check, with the reason naming the flag and the path, told
 * once; never ready before a check passed.
 */
static void
test_log_dir_unreadable(void **state)
{
	struct afx f;
	char file[128], want[512];

	(void)state;
	afx_start(&f, 0);
	assert_int_equal(atomic_load(&f.a.cfg_ok), 0);
	assert_int_equal(atomic_load(&f.a.act_ok), 0);
	f.a.o.pod_logs_dir = "/nonexistent/airlock/pods";
	agent_check(&f.a);
	assert_int_equal(atomic_load(&f.a.cfg_ok), 0);
	assert_int_equal(atomic_load(&f.a.act_ok), 0);
	assert_string_equal(f.a.cfg_why, "cannot read the pod log directory "
	    "'/nonexistent/airlock/pods' (--pod-logs-dir): No such file or "
	    "directory");
	assert_int_equal(f.told.n, 1);
	assert_string_equal(f.told.why, f.a.cfg_why);
	/* The same answer again is not told again (nor logged). */
	agent_check(&f.a);
	assert_int_equal(f.told.n, 1);

	snprintf(file, sizeof(file), "%s/file", f.dir);
	{
		FILE *fp = fopen(file, "w");

		assert_non_null(fp);
		fclose(fp);
	}
	f.a.o.pod_logs_dir = file;
	agent_check(&f.a);
	snprintf(want, sizeof(want), "cannot read the pod log directory '%s' "
	    "(--pod-logs-dir): Not a directory", file);
	assert_string_equal(f.a.cfg_why, want);
	assert_int_equal(f.told.n, 2);
	afx_stop(&f);
}

/*
 * The exec directory (--exec-dir, where a warm run marks its start) made
 * with the directories above it where a fresh host lacks them; one that
 * cannot be made (a file in the way): not ready, the flag and why named.
 */
static void
test_exec_dir(void **state)
{
	struct afx f;
	char path[160], want[512];
	struct stat st;
	FILE *fp;

	(void)state;
	afx_start(&f, 0);
	snprintf(path, sizeof(path), "%s/run/airlock/exec", f.dir);
	f.a.o.exec_dir = path;
	agent_check(&f.a);
	assert_int_equal(stat(path, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(st.st_mode & 0777, 0700);
	/* Past that check: the next one speaks (containerd, not here). */
	assert_int_equal(strncmp(f.a.cfg_why, "containerd does not answer", 26), 0);
	assert_int_equal(atomic_load(&f.a.act_ok), 1);
	snprintf(path, sizeof(path), "%s/file", f.dir);
	assert_non_null(fp = fopen(path, "w"));
	fclose(fp);
	snprintf(path, sizeof(path), "%s/file/exec", f.dir);
	agent_check(&f.a);
	assert_int_equal(atomic_load(&f.a.cfg_ok), 0);
	snprintf(want, sizeof(want), "cannot make the exec directory '%s' "
	    "(--exec-dir): Not a directory", path);
	assert_string_equal(f.a.cfg_why, want);
	afx_stop(&f);
}

/*
 * The directory is readable but is not this node's: a running pod's log
 * directory is not in it. One miss may be the pod ending; two in a row
 * make the agent not ready, naming the directory it looked for. Once the
 * directory is there, the miss count starts over. A containerd that does
 * not answer is said too (after the directories: they are more telling).
 */
static void
test_running_pod_log_dir_missing(void **state)
{
	struct afx f;
	struct run *r;
	char want[600], pdir[256];
	const char *down = "containerd does not answer at '" NOSOCK
	    "' (--containerd-socket): ";

	(void)state;
	afx_start(&f, 0);
	r = running_run(&f);
	agent_check(&f.a);
	assert_int_equal(r->cfg_miss, 1);
	assert_int_equal(atomic_load(&f.a.cfg_ok), 0);
	/* containerd down alone: not ready, but records are not held. */
	assert_int_equal(atomic_load(&f.a.act_ok), 1);
	assert_memory_equal(f.a.cfg_why, down, strlen(down));

	agent_check(&f.a);
	assert_int_equal(r->cfg_miss, 2);
	snprintf(pdir, sizeof(pdir), "%s/t_airlock-x_pod-uid-1", f.dir);
	snprintf(want, sizeof(want), "the log directory '%s' of running pod "
	    "t/airlock-x does not exist: is --pod-logs-dir ('%s') this "
	    "node's?", pdir, f.dir);
	assert_string_equal(f.a.cfg_why, want);
	assert_string_equal(f.told.why, want);
	assert_int_equal(atomic_load(&f.a.act_ok), 0);

	assert_int_equal(mkdir(pdir, 0755), 0);
	agent_check(&f.a);
	assert_int_equal(r->cfg_miss, 0);
	assert_memory_equal(f.a.cfg_why, down, strlen(down));
	assert_int_equal(atomic_load(&f.a.cfg_ok), 0);
	assert_int_equal(atomic_load(&f.a.act_ok), 1);

	/* A run that ended no longer counts: its directory may go. */
	assert_int_equal(rmdir(pdir), 0);
	r->exited = 1;
	agent_check(&f.a);
	agent_check(&f.a);
	assert_int_equal(r->cfg_miss, 0);
	assert_memory_equal(f.a.cfg_why, down, strlen(down));
	afx_stop(&f);
}

/* The value of the patch operation on path (borrowed), or NULL. */
static json_t *
op_value(json_t *patch, const char *op, const char *path)
{
	json_t *o;
	size_t i;

	json_array_foreach(patch, i, o)
		if (strcmp(json_string_value(json_object_get(o, "op")), op) == 0 &&
		    strcmp(json_string_value(json_object_get(o, "path")), path) == 0)
			return json_object_get(o, "value");
	return NULL;
}

/*
 * A run that exited 0 whose log never opened (the file is not where the
 * agent looks): not recorded after the usual quiet wait, but read again
 * for LOG_MISSING_MS, then recorded Failed/ResultLost naming the file,
 * with no output at all: never Succeeded with stdout "".
 */
static void
test_missing_log_result_lost(void **state)
{
	struct afx f;
	struct run *r;
	enum cx_kill why;
	json_t *patch;
	char *path, want[1024];

	(void)state;
	afx_start(&f, 1);
	r = running_run(&f);
	path = agent_log_path(&f.a, r);
	assert_int_equal(agent_follow_log(&r->lf, path, r->log), 0);
	assert_int_equal(r->lf.opened, 0);
	assert_int_equal(r->lf.err, ENOENT);
	r->exited = 1;
	r->exit_exact = 1;
	r->status = 0;
	r->exited_ns = WALL;
	r->exit_seen_ms = NOW;

	/* Quiet for two polls: a log that was there would be recorded now. */
	assert_int_equal(agent_decide(r, 1 << 20, POLL, NOW + 2 * POLL + 1,
	    WALL, &why), AGENT_WAIT);
	assert_int_equal(agent_decide(r, 1 << 20, POLL, NOW + LOG_MISSING_MS -
	    1, WALL, &why), AGENT_WAIT);
	assert_int_equal(agent_decide(r, 1 << 20, POLL, NOW + LOG_MISSING_MS,
	    WALL, &why), AGENT_RECORD);

	crilog_finish(r->log);
	fakeapi_push(f.api, 200, NULL, "{}", 0);
	assert_int_equal(agent_record(&f.a, r), 1);
	assert_int_equal(fakeapi_count(f.api), 1);
	patch = json_loads(fakeapi_body(f.api, 0), 0, NULL);
	assert_non_null(patch);
	assert_string_equal(json_string_value(op_value(patch, "add",
	    "/status/phase")), "Failed");
	assert_string_equal(json_string_value(op_value(patch, "add",
	    "/status/reason")), "ResultLost");
	snprintf(want, sizeof(want), "the program ended (exit code 0) but its "
	    "output cannot be read: cannot open '%s': No such file or "
	    "directory; what it wrote is not known", path);
	assert_string_equal(json_string_value(op_value(patch, "add",
	    "/status/message")), want);
	assert_int_equal(json_integer_value(op_value(patch, "add",
	    "/status/exitCode")), 0);
	assert_null(op_value(patch, "add", "/status/stdout"));
	assert_null(op_value(patch, "add", "/status/stderr"));
	assert_null(op_value(patch, "add", "/status/stdoutBytes"));
	json_decref(patch);
	free(path);
	afx_stop(&f);
}

/*
 * The same run with its log there and empty: the program wrote nothing,
 * which is recorded as such, at the usual quiet wait.
 */
static void
test_empty_log_is_empty_output(void **state)
{
	struct afx f;
	struct run *r;
	enum cx_kill why;
	json_t *patch;
	char *path, cmd[512];

	(void)state;
	afx_start(&f, 1);
	r = running_run(&f);
	path = agent_log_path(&f.a, r);
	snprintf(cmd, sizeof(cmd), "mkdir -p $(dirname %s) && : > %s", path,
	    path);
	assert_int_equal(system(cmd), 0);
	assert_int_equal(agent_follow_log(&r->lf, path, r->log), 0);
	assert_int_equal(r->lf.opened, 1);
	r->exited = 1;
	r->exit_exact = 1;
	r->exited_ns = WALL;
	r->exit_seen_ms = NOW;
	assert_int_equal(agent_decide(r, 1 << 20, POLL, NOW + 2 * POLL + 1,
	    WALL, &why), AGENT_RECORD);
	crilog_finish(r->log);
	fakeapi_push(f.api, 200, NULL, "{}", 0);
	assert_int_equal(agent_record(&f.a, r), 1);
	patch = json_loads(fakeapi_body(f.api, 0), 0, NULL);
	assert_string_equal(json_string_value(op_value(patch, "add",
	    "/status/reason")), "Completed");
	assert_string_equal(json_string_value(op_value(patch, "add",
	    "/status/stdout")), "");
	json_decref(patch);
	free(path);
	afx_stop(&f);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_log_dir_unreadable),
		cmocka_unit_test(test_exec_dir),
		cmocka_unit_test(test_running_pod_log_dir_missing),
		cmocka_unit_test(test_missing_log_result_lost),
		cmocka_unit_test(test_empty_log_is_empty_output),
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_exit_kept_until_taken),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
