/* Unit tests: execution/usage.c, on cgroup trees made in a directory. */
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

#include "usage.h"

#define UID	"7056fc73-9923-4638-a1cc-3f428b37a5b5"
#define UID_	"7056fc73_9923_4638_a1cc_3f428b37a5b5"

static char top[] = "/tmp/airlock-usage-XXXXXX";

static void
mkdirs(const char *rel)
{
	char path[1024], *p;

	snprintf(path, sizeof(path), "%s/%s", top, rel);
	for (p = path + strlen(top) + 1; (p = strchr(p, '/')) != NULL; p++) {
		*p = '\0';
		mkdir(path, 0755);
		*p = '/';
	}
	mkdir(path, 0755);
}

static void
put(const char *rel, const char *text)
{
	char path[1024];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", top, rel);
	assert_non_null(f = fopen(path, "w"));
	fputs(text, f);
	fclose(f);
}

static int
setup(void **state)
{
	(void)state;
	strcpy(top, "/tmp/airlock-usage-XXXXXX");
	return mkdtemp(top) ? 0 : -1;
}

static int
teardown(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", top);
	return system(cmd) == 0 ? 0 : -1;
}

/* cgroup v1, cgroupfs driver, a cgroup root: the test node's layout. */
static void
test_v1_cgroupfs_guaranteed(void **state)
{
	struct usage u;

	(void)state;
	mkdirs("memory/airlock-1/kubepods/pod" UID);
	mkdirs("cpuacct/airlock-1/kubepods/pod" UID);
	put("memory/airlock-1/kubepods/pod" UID "/memory.max_usage_in_bytes",
	    "131039232\n");
	put("cpuacct/airlock-1/kubepods/pod" UID "/cpuacct.usage", "1871421557\n");
	assert_int_equal(usage_read(top, "/airlock-1", UID, &u), 0);
	assert_int_equal(u.peak_memory, 131039232);
	assert_int_equal(u.cpu_ns, 1871421557);
	/* Not under the default root. */
	assert_int_equal(usage_read(top, "/", UID, &u), -1);
	assert_int_equal(u.peak_memory, -1);
	assert_int_equal(u.cpu_ns, -1);
}

/* cpu and cpuacct mounted together, a burstable pod. */
static void
test_v1_joint_cpu_burstable(void **state)
{
	struct usage u;

	(void)state;
	mkdirs("memory/kubepods/burstable/pod" UID);
	mkdirs("cpu,cpuacct/kubepods/burstable/pod" UID);
	put("memory/kubepods/burstable/pod" UID "/memory.max_usage_in_bytes", "4096");
	put("cpu,cpuacct/kubepods/burstable/pod" UID "/cpuacct.usage", "7\n");
	assert_int_equal(usage_read(top, NULL, UID, &u), 0);
	assert_int_equal(u.peak_memory, 4096);
	assert_int_equal(u.cpu_ns, 7);
}

/* cgroup v2, systemd driver: dashes become underscores. */
static void
test_v2_systemd(void **state)
{
	const char *d = "kubepods.slice/kubepods-besteffort.slice/"
	    "kubepods-besteffort-pod" UID_ ".slice";
	char path[512];
	struct usage u;

	(void)state;
	mkdirs(d);
	snprintf(path, sizeof(path), "%s/memory.peak", d);
	put(path, "52428800\n");
	snprintf(path, sizeof(path), "%s/cpu.stat", d);
	put(path, "usage_usec 2500123\nuser_usec 2000000\nsystem_usec 500123\n");
	assert_int_equal(usage_read(top, "/", UID, &u), 0);
	assert_int_equal(u.peak_memory, 52428800);
	assert_int_equal(u.cpu_ns, 2500123000LL);
}

/* cgroup v2 before Linux 5.19: no memory.peak, CPU time only. */
static void
test_v2_no_peak(void **state)
{
	struct usage u;

	(void)state;
	mkdirs("kubepods/pod" UID);
	put("kubepods/pod" UID "/cpu.stat", "user_usec 1\nusage_usec 3\n");
	assert_int_equal(usage_read(top, NULL, UID, &u), 0);
	assert_int_equal(u.peak_memory, -1);
	assert_int_equal(u.cpu_ns, 3000);
}

/* Garbage in the files: unknown, never a wrong number. */
static void
test_malformed(void **state)
{
	static const char *const bad[] = { "", "\n", "-5\n", "12abc\n",
	    "99999999999999999999999\n", " 12\n", "12\n13\n", "0x10" };
	char big[8192];
	struct usage u;

	(void)state;
	mkdirs("memory/kubepods/pod" UID);
	mkdirs("cpuacct/kubepods/pod" UID);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		put("memory/kubepods/pod" UID "/memory.max_usage_in_bytes", bad[i]);
		put("cpuacct/kubepods/pod" UID "/cpuacct.usage", bad[i]);
		assert_int_equal(usage_read(top, NULL, UID, &u), -1);
		assert_int_equal(u.peak_memory, -1);
		assert_int_equal(u.cpu_ns, -1);
	}
	/* A file longer than any count is cut, and so not a count. */
	memset(big, '1', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	put("memory/kubepods/pod" UID "/memory.max_usage_in_bytes", big);
	put("cpuacct/kubepods/pod" UID "/cpuacct.usage", "0\n");
	assert_int_equal(usage_read(top, NULL, UID, &u), 0);
	assert_int_equal(u.peak_memory, -1);
	assert_int_equal(u.cpu_ns, 0);
}

/* cpu.stat without usage_usec, or with an overflowing one. */
static void
test_cpu_stat_malformed(void **state)
{
	struct usage u;

	(void)state;
	mkdirs("kubepods/pod" UID);
	put("kubepods/pod" UID "/memory.peak", "10\n");
	put("kubepods/pod" UID "/cpu.stat", "user_usec 1\nusage_usecs 3\n");
	assert_int_equal(usage_read(top, NULL, UID, &u), 0);
	assert_int_equal(u.peak_memory, 10);
	assert_int_equal(u.cpu_ns, -1);
	put("kubepods/pod" UID "/cpu.stat", "usage_usec 9223372036854776\n");
	assert_int_equal(usage_read(top, NULL, UID, &u), 0);
	assert_int_equal(u.cpu_ns, -1);
}

/* A uid is put into a path: only a plain one is. */
static void
test_uid_checked(void **state)
{
	struct usage u;

	(void)state;
	mkdirs("memory/kubepods/pod" UID);
	put("memory/kubepods/pod" UID "/memory.max_usage_in_bytes", "1\n");
	mkdirs("memory/x");
	put("memory/x/memory.max_usage_in_bytes", "1\n");
	assert_int_equal(usage_read(top, NULL, "../../x", &u), -1);
	assert_int_equal(usage_read(top, NULL, "", &u), -1);
	assert_int_equal(usage_read(top, NULL, NULL, &u), -1);
	assert_int_equal(usage_read(top, NULL, UID "/", &u), -1);
	assert_int_equal(usage_read(top, NULL, UID, &u), 0);
	assert_int_equal(u.peak_memory, 1);
	assert_int_equal(u.cpu_ns, -1);
}

/* A cgroup whose directories are known; the OOM kill count, v1 and v2. */
static void
test_read_dirs(void **state)
{
	char mem[512], cpu[512];
	struct usage u;

	(void)state;
	mkdirs("memory/local-1");
	mkdirs("cpuacct/local-1");
	put("memory/local-1/memory.max_usage_in_bytes", "134221824\n");
	put("memory/local-1/memory.oom_control",
	    "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n");
	put("memory/local-1/memory.failcnt", "42\n");
	put("cpuacct/local-1/cpuacct.usage", "1200000000\n");
	snprintf(mem, sizeof(mem), "%s/memory/local-1", top);
	snprintf(cpu, sizeof(cpu), "%s/cpuacct/local-1", top);
	assert_int_equal(usage_read_dirs(0, mem, cpu, &u), 0);
	assert_int_equal(u.peak_memory, 134221824);
	assert_int_equal(u.cpu_ns, 1200000000);
	assert_int_equal(u.oom_kills, 1);
	assert_int_equal(usage_read_count(mem, "memory.failcnt"), 42);
	assert_int_equal(usage_read_count(mem, "absent"), -1);
	assert_int_equal(usage_read_count(NULL, "memory.failcnt"), -1);
	/* A kernel before 4.13: no oom_kill line, so unknown. */
	put("memory/local-1/memory.oom_control", "oom_kill_disable 0\nunder_oom 0\n");
	assert_int_equal(usage_read_dirs(0, mem, NULL, &u), 0);
	assert_int_equal(u.oom_kills, -1);
	assert_int_equal(u.cpu_ns, -1);

	mkdirs("local-2");
	put("local-2/memory.peak", "1024\n");
	put("local-2/memory.events", "low 0\nhigh 0\nmax 3\noom 1\noom_kill 2\n");
	put("local-2/cpu.stat", "usage_usec 5\n");
	snprintf(mem, sizeof(mem), "%s/local-2", top);
	assert_int_equal(usage_read_dirs(1, mem, mem, &u), 0);
	assert_int_equal(u.peak_memory, 1024);
	assert_int_equal(u.cpu_ns, 5000);
	assert_int_equal(u.oom_kills, 2);
	assert_int_equal(usage_read_dirs(1, NULL, NULL, &u), -1);
	assert_int_equal(u.oom_kills, -1);
}

/*
 * v1 counts an OOM kill only in the killed process's cgroup: a runc
 * container's is below the pod's, gVisor's sandbox in the pod's itself.
 * The pod's count is both; v2's memory.events counts children already.
 */
static void
test_oom_kills(void **state)
{
	struct usage u;

	(void)state;
	mkdirs("memory/kubepods/burstable/pod" UID "/c1");
	mkdirs("memory/kubepods/burstable/pod" UID "/c2");
	put("memory/kubepods/burstable/pod" UID "/memory.max_usage_in_bytes", "4096");
	put("memory/kubepods/burstable/pod" UID "/c1/memory.oom_control",
	    "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n");
	/* A child alone says it. */
	assert_int_equal(usage_read(top, NULL, UID, &u), 0);
	assert_int_equal(u.oom_kills, 2);
	/* The pod's own and each child's add up. */
	put("memory/kubepods/burstable/pod" UID "/memory.oom_control",
	    "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n");
	put("memory/kubepods/burstable/pod" UID "/c2/memory.oom_control",
	    "oom_kill_disable 0\nunder_oom 0\noom_kill 4\n");
	assert_int_equal(usage_read(top, NULL, UID, &u), 0);
	assert_int_equal(u.oom_kills, 7);
	/* v2: the pod's memory.events alone (it counts its children). */
	mkdirs("v2/kubepods/pod" UID "/c1");
	put("v2/kubepods/pod" UID "/memory.peak", "8192\n");
	put("v2/kubepods/pod" UID "/memory.events", "low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n");
	put("v2/kubepods/pod" UID "/c1/memory.events", "oom_kill 1\n");
	{
		char mount[600];

		snprintf(mount, sizeof(mount), "%s/v2", top);
		assert_int_equal(usage_read(mount, NULL, UID, &u), 0);
	}
	assert_int_equal(u.peak_memory, 8192);
	assert_int_equal(u.oom_kills, 1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_v1_cgroupfs_guaranteed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_v1_joint_cpu_burstable, setup, teardown),
		cmocka_unit_test_setup_teardown(test_v2_systemd, setup, teardown),
		cmocka_unit_test_setup_teardown(test_v2_no_peak, setup, teardown),
		cmocka_unit_test_setup_teardown(test_malformed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cpu_stat_malformed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_uid_checked, setup, teardown),
		cmocka_unit_test_setup_teardown(test_read_dirs, setup, teardown),
		cmocka_unit_test_setup_teardown(test_oom_kills, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
