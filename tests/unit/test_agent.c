/* Unit tests: node-agent/agent.c's pure parts. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <unistd.h>

#include "agent.h"
#include "ctrd.h"

#define CXUID	"ccbbf721-b9ed-449b-a12c-3cf68aa3769a"
#define PODUID	"7056fc73-9923-4638-a1cc-3f428b37a5b5"

static void
test_log_dir_name(void **state)
{
	char ns[64], pod[64], uid[64];

	(void)state;
	assert_int_equal(agent_log_dir_name("t1_airlock-" CXUID "_" PODUID,
	    ns, pod, uid, sizeof(ns)), 0);
	assert_string_equal(ns, "t1");
	assert_string_equal(pod, "airlock-" CXUID);
	assert_string_equal(uid, PODUID);
}

/* Anything but an execution pod's directory is left alone. */
static void
test_log_dir_name_refused(void **state)
{
	static const char *const bad[] = {
		"",
		"_",
		"__",
		"t1_web-0_" PODUID,				/* not ours */
		"t1_airlock-controller-5d8f_" PODUID,		/* ours, not an execution */
		"t1_airlock-" CXUID "x_" PODUID,		/* one too long */
		"t1_airlock-" "CCBBF721-B9ED-449B-A12C-3CF68AA3769A_" PODUID,
		"_airlock-" CXUID "_" PODUID,			/* no namespace */
		"t1_airlock-" CXUID "_",			/* no uid */
		"t1_airlock-" CXUID,				/* two parts */
		"t1_airlock-" CXUID "_" PODUID "_x",		/* four */
		"t1_airlock-" CXUID "_" PODUID "_",
		"..",
	};
	char ns[64], pod[64], uid[64];

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (agent_log_dir_name(bad[i], ns, pod, uid, sizeof(ns)) != -1)
			fail_msg("accepted '%s'", bad[i]);
	/* A part longer than the buffers. */
	assert_int_equal(agent_log_dir_name("t1_airlock-" CXUID "_" PODUID,
	    ns, pod, uid, 40), -1);
	{
		char longns[400];

		memset(longns, 'a', 260);
		strcpy(longns + 260, "_airlock-" CXUID "_x");
		assert_int_equal(agent_log_dir_name(longns, ns, pod, uid,
		    sizeof(ns)), -1);
	}
}

static json_t *
pod_with(const char *owner_uid, const char *timeout, const char *maxout,
    const char *budget)
{
	json_t *ann = json_pack("{s:s}", "airlock.dev/execution", "cx-1");
	json_t *pod;

	if (timeout)
		json_object_set_new(ann, "airlock.dev/timeout-ms", json_string(timeout));
	if (maxout)
		json_object_set_new(ann, "airlock.dev/output-max-bytes", json_string(maxout));
	if (budget)
		json_object_set_new(ann, "airlock.dev/output-budget-bytes", json_string(budget));
	pod = json_pack("{s:{s:{s:s}, s:o}}", "metadata", "labels",
	    "airlock.dev/execution-uid", CXUID, "annotations", ann);
	if (owner_uid)
		json_object_set_new(json_object_get(pod, "metadata"), "ownerReferences",
		    json_pack("[{s:s, s:s, s:b}, {s:s, s:s, s:s, s:b}]", "kind", "Other",
		    "uid", "x", "controller", 0, "apiVersion", "airlock.dev/v1alpha1",
		    "kind", "CodeExecution", "uid", owner_uid, "controller", 1));
	return pod;
}

/* pod_with's pod, its controller owner of kind at api (NULL: none said). */
static json_t *
pod_owned_by(const char *api, const char *kind)
{
	json_t *pod = pod_with(CXUID, "2000", "100", "5000");
	json_t *ref = json_array_get(json_object_get(json_object_get(pod,
	    "metadata"), "ownerReferences"), 1);

	json_object_del(ref, "apiVersion");
	json_object_del(ref, "kind");
	if (api)
		json_object_set_new(ref, "apiVersion", json_string(api));
	if (kind)
		json_object_set_new(ref, "kind", json_string(kind));
	return pod;
}

/* The pod's numbers are clamped to the CRD's ranges; its owner must match. */
static void
test_pod_limits(void **state)
{
	struct agent_limits l;
	json_t *p;

	(void)state;
	p = pod_with(CXUID, "2000", "100", "5000");
	assert_int_equal(agent_pod_limits(p, &l), 0);
	assert_string_equal(l.cx, "cx-1");
	assert_string_equal(l.cx_uid, CXUID);
	assert_int_equal(l.timeout_ms, 2000);
	assert_int_equal(l.max_out, 100);
	assert_int_equal(l.budget, 5000);
	json_decref(p);
	/* Forged values: LLONG_MAX, overflow, negative, junk. */
	p = pod_with(CXUID, "9223372036854775807", "99999999999999999999", "-5");
	assert_int_equal(agent_pod_limits(p, &l), 0);
	assert_int_equal(l.timeout_ms, 3600000);
	assert_int_equal(l.max_out, 65536);	/* not a number it can hold */
	assert_int_equal(l.budget, 0);
	json_decref(p);
	p = pod_with(CXUID, "0", "9223372036854775807", "99999999");
	assert_int_equal(agent_pod_limits(p, &l), 0);
	assert_int_equal(l.timeout_ms, 1000);
	assert_int_equal(l.max_out, 1048576);
	assert_int_equal(l.budget, 1048576);
	json_decref(p);
	p = pod_with(CXUID, NULL, "lots", NULL);
	assert_int_equal(agent_pod_limits(p, &l), 0);
	assert_int_equal(l.timeout_ms, 30000);
	assert_int_equal(l.max_out, 65536);
	assert_int_equal(l.budget, 131072);
	json_decref(p);
	/* Not owned by the execution its label names: not an execution pod. */
	p = pod_with("11111111-2222-3333-4444-555555555555", "2000", "100", "5000");
	assert_int_equal(agent_pod_limits(p, &l), -1);
	json_decref(p);
	p = pod_with(NULL, "2000", "100", "5000");
	assert_int_equal(agent_pod_limits(p, &l), -1);
	json_decref(p);
	/*
	 * A ReplicaSet's pod whose template copied the ReplicaSet's own uid
	 * into the label (issue 27): the uids match, the owner is no
	 * execution. Nor is a CodeExecution of another API group, or an
	 * owner that does not say what it is.
	 */
	p = pod_owned_by("apps/v1", "ReplicaSet");
	assert_int_equal(agent_pod_limits(p, &l), -1);
	json_decref(p);
	p = pod_owned_by("evil.example/v1", "CodeExecution");
	assert_int_equal(agent_pod_limits(p, &l), -1);
	json_decref(p);
	p = pod_owned_by("airlock.dev/v1alpha1", NULL);
	assert_int_equal(agent_pod_limits(p, &l), -1);
	json_decref(p);
	p = pod_owned_by(NULL, "CodeExecution");
	assert_int_equal(agent_pod_limits(p, &l), -1);
	json_decref(p);
	p = pod_owned_by("airlock.dev/v1alpha1", "CodeExecution");
	assert_int_equal(agent_pod_limits(p, &l), 0);
	json_decref(p);
}

/* Both streams together fit the budget, counted as the API server stores them. */
static void
test_fit_output(void **state)
{
	size_t o, e;
	char *big = malloc(1 << 20);

	(void)state;
	agent_fit_output("hello", 5, "err", 3, 8, &o, &e);
	assert_int_equal(o, 5);
	assert_int_equal(e, 3);
	/* One short stream keeps all; the other gets the rest. */
	agent_fit_output("hi", 2, "0123456789", 10, 8, &o, &e);
	assert_int_equal(o, 2);
	assert_int_equal(e, 6);
	agent_fit_output("0123456789", 10, "", 0, 8, &o, &e);
	assert_int_equal(o, 8);
	assert_int_equal(e, 0);
	/* Both long: half each. */
	agent_fit_output("0123456789", 10, "abcdefghij", 10, 9, &o, &e);
	assert_int_equal(o, 4);
	assert_int_equal(e, 5);
	/* The run: a MiB of NUL and a MiB of '<' is 12 MiB encoded. */
	memset(big, 0, 1 << 20);
	{
		char *lt = malloc(1 << 20);

		memset(lt, '<', 1 << 20);
		agent_fit_output(big, 1 << 20, lt, 1 << 20, 1000000, &o, &e);
		assert_int_equal(o, 500000 / 6);
		assert_int_equal(e, 500000 / 6);
		free(lt);
	}
	/* Never inside a character. */
	agent_fit_output("\xc3\xa9\xc3\xa9", 4, "", 0, 3, &o, &e);
	assert_int_equal(o, 2);
	agent_fit_output("abc", 3, "def", 3, 0, &o, &e);
	assert_int_equal(o, 0);
	assert_int_equal(e, 0);
	free(big);
}

static void
append(const char *path, const char *text)
{
	FILE *f = fopen(path, "a");

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

/*
 * The kubelet rotates a container's log by renaming 0.log; containerd
 * writes on to the old file until it opens the new one. Every byte is read
 * once, in order, across the rotation (the agent used to stop at the
 * rename, losing the rest of the output and its counts).
 */
static void
test_follow_log_rotation(void **state)
{
	char dir[] = "/tmp/airlock-follow-XXXXXX", path[128], old[128];
	struct agent_logf lf = { .fd = -1 };
	struct crilog *log = crilog_new(1024, 4096);
	const char *t;
	size_t n;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/0.log", dir);
	snprintf(old, sizeof(old), "%s/0.log.20261124-110000", dir);
	/* Not there yet. */
	assert_int_equal(agent_follow_log(&lf, path, log), 0);
	append(path, "2026-11-24T11:00:00.000000001Z stdout F A\n");
	assert_int_equal(agent_follow_log(&lf, path, log), 42);
	/* Renamed; containerd still writes the old file; no new one yet. */
	assert_int_equal(rename(path, old), 0);
	append(old, "2026-11-24T11:00:00.000000002Z stderr F err1\n");
	assert_int_equal(agent_follow_log(&lf, path, log), 45);
	/* More to the old one, then the new one opens: old first, then new. */
	append(old, "2026-11-24T11:00:00.000000003Z stdout F B\n");
	append(path, "2026-11-24T11:00:00.000000004Z stdout F C\n");
	assert_int_equal(agent_follow_log(&lf, path, log), 84);
	append(path, "2026-11-24T11:00:00.000000005Z stdout P D\n"
	    "2026-11-24T11:00:00.000000006Z stdout F E\n");
	assert_int_equal(agent_follow_log(&lf, path, log), 84);
	assert_int_equal(agent_follow_log(&lf, path, log), 0);
	crilog_finish(log);
	t = crilog_text(crilog_stdout(log), &n);
	assert_int_equal(n, 9);
	assert_memory_equal(t, "A\nB\nC\nDE\n", 9);
	assert_int_equal(crilog_stdout(log)->total, 9);
	t = crilog_text(crilog_stderr(log), &n);
	assert_int_equal(n, 5);
	assert_memory_equal(t, "err1\n", 5);
	close(lf.fd);
	crilog_free(log);
	unlink(path);
	unlink(old);
	rmdir(dir);
}

/* An exec'd process's exit (kubectl exec) is not the program's. */
static void
test_exit_is_init(void **state)
{
	struct ctrd_event ev = { .kind = CTRD_EV_TASK_EXIT, .container_id = "c1" };

	(void)state;
	ev.exec_id = "c1";
	assert_int_equal(agent_exit_is_init(&ev), 1);
	ev.exec_id = "exec-1";
	assert_int_equal(agent_exit_is_init(&ev), 0);
	ev.exec_id = "c1x";
	assert_int_equal(agent_exit_is_init(&ev), 0);
	ev.exec_id = NULL;
	assert_int_equal(agent_exit_is_init(&ev), 1);
}

#define ARGS(s)	s, sizeof(s) - 1

/* Only gVisor with no network runs tenant code. */
static void
test_sandbox_check(void **state)
{
	(void)state;
	/* As the test node's runsc-sandbox shows itself. */
	assert_null(agent_sandbox_check(ARGS("runsc-sandbox\0--root=/run/runsc\0--log-format=json\0"
	    "--network=none\0--log-fd=3\0boot\0--bundle=/b\0--cpu-num\0002\0cid\0")));
	assert_string_equal(agent_sandbox_check(ARGS("runsc-sandbox\0--root=/r\0boot\0--network=none\0")),
	    "its gVisor sandbox has a network (runsc --network is not none)");
	/* gVisor's own stack: a refusal of its own, taken back for egress. */
	assert_ptr_equal(agent_sandbox_check(ARGS("runsc-sandbox\0--network=sandbox\0boot\0")),
	    AGENT_NETSTACK);
	assert_ptr_equal(agent_sandbox_check(ARGS("runsc-sandbox\0--network=host\0"
	    "-network=sandbox\0boot\0")), AGENT_NETSTACK);
	assert_string_equal(agent_sandbox_check(ARGS("runsc-sandbox\0--network=sandbox\0"
	    "--network=host\0boot\0")),
	    "its gVisor sandbox has a network (runsc --network is not none)");
	assert_string_equal(agent_sandbox_check(ARGS("runsc-sandbox\0--network=sandboxx\0boot\0")),
	    "its gVisor sandbox has a network (runsc --network is not none)");
	assert_string_equal(agent_sandbox_check(ARGS("runsc-sandbox\0--network=none\0"
	    "--network=host\0boot\0")),
	    "its gVisor sandbox has a network (runsc --network is not none)");
	assert_null(agent_sandbox_check(ARGS("runsc-sandbox\0--network=host\0-network=none\0boot\0")));
	/* runc: the program's own process. */
	assert_string_equal(agent_sandbox_check(ARGS("python3\0main.py\0")),
	    "it is not a gVisor sandbox");
	assert_string_equal(agent_sandbox_check(ARGS("runsc-sandboxx\0--network=none\0")),
	    "it is not a gVisor sandbox");
	/* Unreadable, or not NUL-terminated: refused, never read past the end. */
	assert_non_null(strstr(agent_sandbox_check("", 0), "cannot be read"));
	assert_non_null(strstr(agent_sandbox_check("runsc-sandbox", 13), "cannot be read"));
	assert_null(agent_sandbox_check(ARGS("runsc-sandbox\0--network=none")));
}

/*
 * A cmdline read empty at first (a process in execve) is read again before
 * it counts as unreadable: a runc task's start was once refused as
 * "cannot be read" rather than "not a gVisor sandbox". The file fills
 * about 5 ms after the check starts (the retries wait up to 100 ms).
 */
struct fill_later {
	const char *path;
	const char *text;
	size_t len;
};

static void *
fill_later_main(void *arg)
{
	struct fill_later *f = arg;
	FILE *fp;

	usleep(5000);
	if ((fp = fopen(f->path, "r+")) != NULL) {
		fwrite(f->text, 1, f->len, fp);
		fclose(fp);
	}
	return NULL;
}

static void
test_sandbox_read_retries(void **state)
{
	char path[] = "/tmp/airlock-cmdline-XXXXXX";
	struct fill_later f = { path, ARGS("python3\0main.py\0") };
	pthread_t t;
	int fd;

	(void)state;
	assert_true((fd = mkstemp(path)) >= 0);
	close(fd);
	assert_int_equal(pthread_create(&t, NULL, fill_later_main, &f), 0);
	assert_string_equal(agent_sandbox_read(path, 1), "it is not a gVisor sandbox");
	pthread_join(t, NULL);
	/* Still empty after the retries: unreadable. Gone: not waited for. */
	assert_int_equal(truncate(path, 0), 0);
	assert_non_null(strstr(agent_sandbox_read(path, 1), "cannot be read"));
	assert_non_null(strstr(agent_sandbox_read(path, 0), "cannot be read"));
	unlink(path);
	assert_non_null(strstr(agent_sandbox_read(path, 1), "cannot be read"));
}

/* `runsc wait`'s line: the status only for the container asked about. */
static void
test_parse_wait(void **state)
{
	uint32_t st = 999;

	(void)state;
	assert_int_equal(agent_parse_wait(ARGS("{\"id\":\"c1\",\"exitStatus\":3}\n"),
	    "c1", &st), 0);
	assert_int_equal(st, 3);
	assert_int_equal(agent_parse_wait(ARGS("{\"id\":\"c1\",\"exitStatus\":137}\n"),
	    "c1", &st), 0);
	assert_int_equal(st, 137);
	assert_int_equal(agent_parse_wait(ARGS("{\"exitStatus\":0,\"id\":\"c1\"}"),
	    "c1", &st), 0);
	assert_int_equal(st, 0);
	st = 999;
	/* Another container's, or not an exit status: nothing taken. */
	assert_int_equal(agent_parse_wait(ARGS("{\"id\":\"c2\",\"exitStatus\":0}\n"),
	    "c1", &st), -1);
	assert_int_equal(agent_parse_wait(ARGS("{\"id\":\"c1\",\"exitStatus\":-1}\n"),
	    "c1", &st), -1);
	assert_int_equal(agent_parse_wait(ARGS("{\"id\":\"c1\",\"exitStatus\":384}\n"),
	    "c1", &st), -1);
	assert_int_equal(agent_parse_wait(ARGS("{\"id\":\"c1\",\"exitStatus\":\"0\"}\n"),
	    "c1", &st), -1);
	assert_int_equal(agent_parse_wait(ARGS("{\"id\":\"c1\",\"exitStatus\":1.5}\n"),
	    "c1", &st), -1);
	assert_int_equal(agent_parse_wait(ARGS("{\"id\":\"c1\"}\n"), "c1", &st), -1);
	assert_int_equal(agent_parse_wait(ARGS("{\"id\":\"c1\",\"exitSt"), "c1", &st), -1);
	assert_int_equal(agent_parse_wait(ARGS("waiting on container: EOF\n"), "c1", &st), -1);
	assert_int_equal(agent_parse_wait("", 0, "c1", &st), -1);
	assert_int_equal(st, 999);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_log_dir_name),
		cmocka_unit_test(test_pod_limits),
		cmocka_unit_test(test_fit_output),
		cmocka_unit_test(test_sandbox_check),
		cmocka_unit_test(test_sandbox_read_retries),
		cmocka_unit_test(test_exit_is_init),
		cmocka_unit_test(test_follow_log_rotation),
		cmocka_unit_test(test_log_dir_name_refused),
		cmocka_unit_test(test_parse_wait),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
