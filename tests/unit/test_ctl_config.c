/* Unit tests: controller/config.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "ctl_config.h"
#include "egress.h"
#include "k8s_error.h"
#include "xmalloc.h"

#define MIB	(1024 * 1024)

static const char minimal_yaml[] =
    "profiles:\n"
    "  sh: {image: busybox, command: [sh], sourceFile: run.sh}\n";

static char *
fixture(const char *name)
{
	const char *top = getenv("AIRLOCK_TOP");

	return xasprintf("%s/tests/data/ctlconfig/%s",
	    top != NULL && *top != '\0' ? top : ".", name);
}

static struct ctl_config *
load_ok(const char *name)
{
	struct ctl_config *c = NULL;
	struct k8s_error e;
	char *p = fixture(name);

	k8s_error_clear(&e);
	if (ctl_config_load(p, &c, &e) != 0) {
		print_error("%s: %s\n", name, e.message);
		fail();
	}
	free(p);
	assert_non_null(c);
	return c;
}

/* Assert the file fails with code and a message naming it and sub. */
static void
expect_fail(const char *name, int code, const char *sub)
{
	struct ctl_config *c = NULL;
	struct k8s_error e;
	char *p = fixture(name), *prefix = xasprintf("config '%s': ", p);
	int rc;

	k8s_error_clear(&e);
	rc = ctl_config_load(p, &c, &e);
	if (rc != code || e.code != code || strstr(e.message, sub) == NULL ||
	    strncmp(e.message, prefix, strlen(prefix)) != 0) {
		print_error("%s: rc %d, message '%s'; want %d and '%s'\n", name,
		    rc, e.message, code, sub);
		fail();
	}
	assert_null(c);
	free(prefix);
	free(p);
}

/* Parse from memory; assert a failure with sub, or success if sub NULL. */
static void
expect_parse(const char *yaml, size_t len, int code, const char *sub)
{
	struct ctl_config *c = NULL;
	struct k8s_error e;
	int rc;

	k8s_error_clear(&e);
	rc = ctl_config_parse(yaml, len, "mem", &c, &e);
	if (rc != code || (sub != NULL && strstr(e.message, sub) == NULL)) {
		print_error("rc %d, message '%s'; want %d and '%s'\n", rc,
		    e.message, code, sub ? sub : "");
		fail();
	}
	if (code == 0)
		assert_non_null(c);
	else
		assert_null(c);
	ctl_config_free(c);
}

static void
assert_argv(char **argv, const char *const *want)
{
	size_t i;

	assert_non_null(argv);
	for (i = 0; want[i] != NULL; i++) {
		assert_non_null(argv[i]);
		assert_string_equal(argv[i], want[i]);
	}
	assert_null(argv[i]);
}

static void
assert_resources(const struct ctl_resources *r, const char *cpu,
    int64_t cpu_milli, const char *memory, int64_t memory_bytes,
    const char *eph, int64_t eph_bytes)
{
	assert_string_equal(r->cpu, cpu);
	assert_int_equal(r->cpu_milli, cpu_milli);
	assert_string_equal(r->memory, memory);
	assert_int_equal(r->memory_bytes, memory_bytes);
	if (eph == NULL)
		assert_null(r->ephemeral_storage);
	else
		assert_string_equal(r->ephemeral_storage, eph);
	assert_int_equal(r->ephemeral_bytes, eph_bytes);
}

/* Everything a config without those keys must hold. */
static void
assert_defaults(const struct ctl_config *c)
{
	assert_string_equal(c->runtime_class, "gvisor");
	assert_int_equal(c->allow_custom_images, 0);
	assert_int_equal(c->run_as_user, 65532);
	assert_string_equal(c->tmp_size_limit, "64Mi");
	assert_int_equal(c->tmp_size_bytes, 67108864);
	assert_string_equal(c->priority_class, "airlock-execution");
	assert_resources(&c->defaults, "500m", 500, "256Mi", 268435456,
	    "64Mi", 67108864);
	assert_resources(&c->caps, "2", 2000, "2Gi", INT64_C(2147483648),
	    "1Gi", 1073741824);
	assert_int_equal(c->quota_executions, 20);
	assert_int_equal(c->quota_stored, 1000);
	assert_int_equal(c->quota_pools, 10);
	assert_int_equal(c->quota_sessions, 20);
	assert_resources(&c->quota, "8", 8000, "8Gi", INT64_C(8589934592),
	    NULL, 0);
}

static void
test_full(void **state)
{
	static const char *const py[] = { "python3", "-u", "main.py", NULL };
	static const char *const node[] = { "node", "--max-old-space-size=128",
	    "src/index.js", NULL };
	struct ctl_config *c = load_ok("full.yaml");

	(void)state;
	assert_string_equal(c->runtime_class, "gvisor-kvm");
	assert_int_equal(c->allow_custom_images, 1);
	assert_int_equal(c->run_as_user, 10001);
	assert_string_equal(c->tmp_size_limit, "128Mi");
	assert_int_equal(c->tmp_size_bytes, 134217728);
	assert_string_equal(c->priority_class, "airlock.exec-low");
	assert_int_equal(c->nprofiles, 2);
	assert_string_equal(c->profiles[0].name, "python");
	assert_string_equal(c->profiles[0].image, "airlock/runner-python:0.2");
	assert_argv(c->profiles[0].command, py);
	assert_string_equal(c->profiles[0].source_file, "main.py");
	assert_string_equal(c->profiles[1].name, "node-20");
	assert_string_equal(c->profiles[1].image,
	    "registry.example.com/airlock/runner-node@sha256:0123abcd");
	assert_argv(c->profiles[1].command, node);
	assert_string_equal(c->profiles[1].source_file, "src/index.js");
	assert_resources(&c->defaults, "250m", 250, "128Mi", 134217728,
	    "32Mi", 33554432);
	assert_resources(&c->caps, "4", 4000, "1.5Gi", 1610612736, "2Gi",
	    INT64_C(2147483648));
	assert_int_equal(c->quota_executions, 50);
	assert_int_equal(c->quota_stored, 300);
	assert_int_equal(c->quota_pools, 3);
	assert_int_equal(c->quota_sessions, 7);
	assert_resources(&c->quota, "16", 16000, "32Gi",
	    INT64_C(34359738368), NULL, 0);
	ctl_config_free(c);
}

static void
test_minimal(void **state)
{
	static const char *const sh[] = { "sh", "run.sh", NULL };
	static const char nulls[] = "defaults:\ncaps: ~\nquota: null\n"
	    "runAsUser:\nruntimeClassName: ''\ntmpSizeLimit: NULL\n"
	    "profiles: {sh: {image: busybox, command: [sh], sourceFile: x}}\n";
	struct ctl_config *c = load_ok("minimal.yaml");

	(void)state;
	assert_defaults(c);
	assert_int_equal(c->nprofiles, 1);
	assert_string_equal(c->profiles[0].name, "sh");
	assert_string_equal(c->profiles[0].image, "busybox:1.36");
	assert_argv(c->profiles[0].command, sh);
	assert_string_equal(c->profiles[0].source_file, "run.sh");
	ctl_config_free(c);

	/* The same from memory; null blocks are empty blocks. */
	c = NULL;
	assert_int_equal(ctl_config_parse(minimal_yaml, strlen(minimal_yaml),
	    NULL, &c, NULL), 0);
	assert_defaults(c);
	ctl_config_free(c);
	c = NULL;
	assert_int_equal(ctl_config_parse(nulls, strlen(nulls), NULL, &c,
	    NULL), 0);
	assert_defaults(c);
	ctl_config_free(c);
}

/*
 * config.artifacts: 1 MiB and 64 files unless given; maxBytes at most
 * 1 MiB (the files, base64 in one object, stay under etcd's limit);
 * maxFiles 0 to 256, 0 turning files out off (test_podspec checks a pod
 * then carries no files-out setting).
 */
static void
test_artifacts(void **state)
{
	struct ctl_config *c = load_ok("minimal.yaml");

	(void)state;
	assert_int_equal(c->artifacts_bytes, 1048576);
	assert_int_equal(c->artifacts_files, 64);
	ctl_config_free(c);
	c = load_ok("artifacts-off.yaml");
	assert_int_equal(c->artifacts_bytes, 1048576);
	assert_int_equal(c->artifacts_files, 0);
	ctl_config_free(c);
	expect_fail("bad-artifacts-bytes.yaml", K8S_EINVAL, "artifacts.maxBytes '1048577' is "
	    "above 1048576 (the files, base64 in one object, must stay under etcd's limit)");
	expect_fail("bad-artifacts-files.yaml", K8S_EINVAL, "artifacts.maxFiles 257 is "
	    "refused: it must be from 0 (files out off) to 256");
	expect_fail("bad-artifacts-negative.yaml", K8S_EINVAL, "artifacts.maxFiles -1 is "
	    "refused: it must be from 0 (files out off) to 256");
}

/* A block given in part keeps the defaults of the keys it leaves out. */
static void
test_partial(void **state)
{
	static const char *const sh[] = { "sh", NULL };
	struct ctl_config *c = load_ok("partial.yaml");

	(void)state;
	assert_string_equal(c->runtime_class, "gvisor");
	assert_int_equal(c->run_as_user, 1000);
	assert_resources(&c->defaults, "1", 1000, "256Mi", 268435456,
	    "64Mi", 67108864);
	assert_resources(&c->caps, "2", 2000, "4Gi", INT64_C(4294967296),
	    "1Gi", 1073741824);
	assert_int_equal(c->quota_executions, 5);
	assert_resources(&c->quota, "8", 8000, "8Gi", INT64_C(8589934592),
	    NULL, 0);
	assert_int_equal(c->nprofiles, 1);
	assert_argv(c->profiles[0].command, sh);
	assert_string_equal(c->profiles[0].source_file, "a/b/run.sh");
	ctl_config_free(c);
}

/* Aliased bodies are copied, not shared: each profile owns its strings. */
static void
test_alias(void **state)
{
	static const char *const cmd[] = { "sh", "-c", "exec ./x", NULL };
	struct ctl_config *c = load_ok("alias.yaml");

	(void)state;
	assert_int_equal(c->nprofiles, 3);
	assert_string_equal(c->profiles[1].name, "two");
	assert_string_equal(c->profiles[1].image, "busybox");
	assert_argv(c->profiles[1].command, cmd);
	assert_string_equal(c->profiles[1].source_file, "x");
	assert_ptr_not_equal(c->profiles[0].image, c->profiles[1].image);
	assert_string_equal(c->profiles[2].image, "alpine");
	assert_argv(c->profiles[2].command, cmd);
	assert_string_equal(c->profiles[2].source_file, "y");
	ctl_config_free(c);
}

static void
test_profile_lookup(void **state)
{
	struct ctl_config *c = load_ok("full.yaml");
	const struct ctl_profile *p;

	(void)state;
	p = ctl_config_profile(c, "python");
	assert_ptr_equal(p, &c->profiles[0]);
	p = ctl_config_profile(c, "node-20");
	assert_ptr_equal(p, &c->profiles[1]);
	assert_string_equal(p->image,
	    "registry.example.com/airlock/runner-node@sha256:0123abcd");
	assert_null(ctl_config_profile(c, "node"));
	assert_null(ctl_config_profile(c, "node-200"));
	assert_null(ctl_config_profile(c, "Python"));
	assert_null(ctl_config_profile(c, ""));
	assert_null(ctl_config_profile(c, NULL));
	assert_null(ctl_config_profile(NULL, "python"));
	ctl_config_free(c);
	ctl_config_free(NULL);
}

/* A profile's code policy: its guard in front of the program, or a clear error. */
static void
test_policy(void **state)
{
	static const char ok[] =
	    "profiles:\n"
	    "  py: {image: i, command: [/airlock/bin/run, python3, main.py], sourceFile: main.py,\n"
	    "       policy: {denyImports: [subprocess, ctypes, os.path]}}\n"
	    "  sh: {image: i, command: [/airlock/bin/run, /bin/bash, main.sh, -x], sourceFile: main.sh,\n"
	    "       policy: {allowCommands: [ls, python3.11, g++, x-y_z]}}\n"
	    "  plain: {image: i, command: [/airlock/bin/run, python3, main.py], sourceFile: main.py}\n";
	static const struct { const char *yaml, *msg; } bad[] = {
		{ "policy: {}", "profiles.p.policy needs one of denyImports (Python) "
		    "or allowCommands (bash)" },
		{ "policy: {denyImports: [a], allowCommands: [b]}", "needs one of" },
		{ "policy: {denyimports: [a]}", "profiles.p.policy.denyimports is not "
		    "a known key" },
		{ "policy: [a]", "profiles.p.policy is not a mapping" },
		{ "policy: {denyImports: []}", "profiles.p.policy.denyImports is empty" },
		{ "policy: {denyImports: subprocess}", "policy.denyImports is not a list" },
		{ "policy: {denyImports: [os..path]}", "policy.denyImports[0] 'os..path' "
		    "is not a module name" },
		{ "policy: {denyImports: [json, 1abc]}", "denyImports[1] '1abc'" },
		{ "policy: {denyImports: ['a,b']}", "'a,b' is not a module name" },
		{ "policy: {allowCommands: [/usr/bin/curl]}", "policy.allowCommands[0] "
		    "'/usr/bin/curl' is not a command name" },
		{ "policy: {allowCommands: [..]}", "'..' is not a command name" },
		{ "policy: {allowCommands: [-x]}", "'-x' is not a command name" },
		{ "policy: {allowCommands: [[ls]]}", "allowCommands[0] is not a name" },
		{ "policy: {allowCommands: [ls]}", "profiles.p.policy.allowCommands needs "
		    "the command [/airlock/bin/run, bash, main.py, ...]" },
	};
	struct ctl_config *c = NULL;
	struct k8s_error e;

	(void)state;
	k8s_error_clear(&e);
	assert_int_equal(ctl_config_parse(ok, strlen(ok), "mem", &c, &e), 0);
	assert_int_equal(ctl_config_profile(c, "py")->policy, CTL_POLICY_DENY_IMPORTS);
	assert_argv(ctl_config_profile(c, "py")->command, (const char *const[]){
	    "/airlock/bin/run", "python3", "-I", "/airlock/bin/policy.py",
	    "subprocess,ctypes,os.path", "main.py", NULL });
	assert_int_equal(ctl_config_profile(c, "sh")->policy, CTL_POLICY_ALLOW_COMMANDS);
	assert_argv(ctl_config_profile(c, "sh")->command, (const char *const[]){
	    "/airlock/bin/run", "/bin/bash", "/airlock/bin/policy.sh",
	    "ls,python3.11,g++,x-y_z", "main.sh", "-x", NULL });
	assert_int_equal(ctl_config_profile(c, "plain")->policy, CTL_POLICY_NONE);
	assert_argv(ctl_config_profile(c, "plain")->command, (const char *const[]){
	    "/airlock/bin/run", "python3", "main.py", NULL });
	ctl_config_free(c);

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *y = xasprintf("profiles:\n  p: {image: i, command: "
		    "[/airlock/bin/run, python3, main.py], sourceFile: main.py, %s}\n",
		    bad[i].yaml);

		expect_parse(y, strlen(y), K8S_EINVAL, bad[i].msg);
		free(y);
	}
	/* denyImports needs python in front of the source file. */
	{
		static const char *const cmds[] = { "[python3, main.py]",
		    "[/airlock/bin/run, node, main.py]",
		    "[/airlock/bin/run, python3, -u, main.py]",
		    "[/airlock/bin/run, python3]" };

		for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
			char *y = xasprintf("profiles:\n  p: {image: i, command: %s, "
			    "sourceFile: main.py, policy: {denyImports: [a]}}\n", cmds[i]);

			expect_parse(y, strlen(y), K8S_EINVAL, "profiles.p.policy.denyImports "
			    "needs the command [/airlock/bin/run, python3, main.py, ...]");
			free(y);
		}
	}
}

/* err's whole message, for the config named "mem". */
static void
expect_message(const char *yaml, const char *msg)
{
	struct ctl_config *c = NULL;
	struct k8s_error e;
	char *want = xasprintf("config 'mem': %s", msg);
	int rc;

	k8s_error_clear(&e);
	rc = ctl_config_parse(yaml, strlen(yaml), "mem", &c, &e);
	if (rc != K8S_EINVAL || strcmp(e.message, want) != 0) {
		print_error("%s: rc %d, message '%s'; want '%s'\n", yaml, rc,
		    e.message, want);
		fail();
	}
	assert_null(c);
	free(want);
}

/*
 * Profile p, a Python one the runner starts, with preload [list] and
 * warmup (unless NULL): accepted when msg is NULL, else refused with it.
 */
static void
preload_case(const char *list, const char *warmup, const char *msg)
{
	char *f = xasprintf("preload: [%s]%s%s", list, warmup ? ", warmup: " : "",
	    warmup ? warmup : "");
	char *y = xasprintf("profiles:\n  p: {image: i, command: [/airlock/bin/run, "
	    "python3, main.py], sourceFile: main.py, %s}\n", f);

	if (msg == NULL)
		expect_parse(y, strlen(y), 0, NULL);
	else
		expect_message(y, msg);
	free(y);
	free(f);
}

/*
 * preload and warmup: what a holder's zygote imports and runs ahead
 * (issue 31), refused with the field named for anything but a Python
 * profile the runner starts.
 */
static void
test_preload(void **state)
{
	static const char ok[] =
	    "profiles:\n"
	    "  data: {image: i, command: [/airlock/bin/run, python3, main.py], sourceFile: main.py,\n"
	    "         preload: [numpy, pandas, matplotlib.pyplot, _x9],\n"
	    "         warmup: \"import matplotlib\\nmatplotlib.use('Agg')\\n\"}\n"
	    "  guarded: {image: i, command: [/airlock/bin/run, /usr/bin/python, main.py],\n"
	    "         sourceFile: main.py, policy: {denyImports: [ctypes]}, preload: [json]}\n"
	    "  off: {image: i, command: [/airlock/bin/run, python3, main.py], sourceFile: main.py,\n"
	    "         preload: []}\n"
	    "  plain: {image: i, command: [/airlock/bin/run, python3, main.py], sourceFile: main.py}\n";
	static const struct { const char *yaml, *msg; } bad[] = {
		{ "command: [python3, main.py], preload: [numpy]",
		    "profiles.p.preload needs the command [/airlock/bin/run, python3, "
		    "...] (a Python profile started by the runner)" },
		{ "command: [/airlock/bin/run, node, main.py], preload: [numpy]",
		    "profiles.p.preload needs the command [/airlock/bin/run, python3, "
		    "...] (a Python profile started by the runner)" },
		{ "command: [/airlock/bin/run, python3.11, main.py], preload: [numpy]",
		    "profiles.p.preload needs the command [/airlock/bin/run, python3, "
		    "...] (a Python profile started by the runner)" },
		{ "command: [/airlock/bin/run], preload: [numpy]",
		    "profiles.p.preload needs the command [/airlock/bin/run, python3, "
		    "...] (a Python profile started by the runner)" },
		{ "command: [/airlock/bin/run, python3, main.py], preload: numpy",
		    "profiles.p.preload is not a list" },
		{ "command: [/airlock/bin/run, python3, main.py], preload: {a: b}",
		    "profiles.p.preload is not a list" },
		{ "command: [/airlock/bin/run, python3, main.py], preload: [numpy, os..path]",
		    "profiles.p.preload[1] 'os..path' is not a module name (a.b.c)" },
		{ "command: [/airlock/bin/run, python3, main.py], preload: ['a,b']",
		    "profiles.p.preload[0] 'a,b' is not a module name (a.b.c)" },
		{ "command: [/airlock/bin/run, python3, main.py], preload: [numpy, '']",
		    "profiles.p.preload[1] is not a name of 1 to 100 characters" },
		{ "command: [/airlock/bin/run, python3, main.py], preload: [[numpy]]",
		    "profiles.p.preload[0] is not a name of 1 to 100 characters" },
		{ "command: [/airlock/bin/run, python3, main.py], preload: [numpy, pandas, numpy]",
		    "profiles.p.preload[2] 'numpy' is given twice" },
		{ "command: [/airlock/bin/run, python3, main.py], warmup: 'import numpy'",
		    "profiles.p.warmup needs a preload list" },
		{ "command: [/airlock/bin/run, python3, main.py], preload: [], warmup: x",
		    "profiles.p.warmup needs a preload list" },
		{ "command: [/airlock/bin/run, python3, main.py], preload: [a], warmup: [x]",
		    "profiles.p.warmup is not a string" },
		{ "command: [/airlock/bin/run, python3, main.py], preload: [a], prelaod: [b]",
		    "profiles.p.prelaod is not a known key" },
	};
	struct ctl_config *c = NULL;
	struct k8s_error e;
	char *y, *big;

	(void)state;
	k8s_error_clear(&e);
	assert_int_equal(ctl_config_parse(ok, strlen(ok), "mem", &c, &e), 0);
	assert_string_equal(ctl_config_profile(c, "data")->preload,
	    "numpy,pandas,matplotlib.pyplot,_x9");
	assert_string_equal(ctl_config_profile(c, "data")->warmup,
	    "import matplotlib\nmatplotlib.use('Agg')\n");
	/* The policy's guard in front, as without preload. */
	assert_string_equal(ctl_config_profile(c, "guarded")->preload, "json");
	assert_null(ctl_config_profile(c, "guarded")->warmup);
	assert_argv(ctl_config_profile(c, "guarded")->command, (const char *const[]){
	    "/airlock/bin/run", "/usr/bin/python", "-I", "/airlock/bin/policy.py",
	    "ctypes", "main.py", NULL });
	assert_null(ctl_config_profile(c, "off")->preload);
	assert_null(ctl_config_profile(c, "plain")->preload);
	assert_null(ctl_config_profile(c, "plain")->warmup);
	ctl_config_free(c);

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		y = xasprintf("profiles:\n  p: {image: i, sourceFile: main.py, %s}\n",
		    bad[i].yaml);
		expect_message(y, bad[i].msg);
		free(y);
	}

	/* The caps: 32 names, 100 bytes each, a 4 KiB warm-up. */
	{
		char list[33 * 8 + 1] = "", name[8];

		for (int i = 0; i < 32; i++) {
			snprintf(name, sizeof(name), "%sm%d", i ? "," : "", i);
			strcat(list, name);
		}
		preload_case(list, NULL, NULL);
		strcat(list, ",m32");
		preload_case(list, NULL, "profiles.p.preload has more than 32 items");
	}
	big = xcalloc(1, 4098);
	memset(big, 'a', 100);
	preload_case(big, NULL, NULL);
	big[100] = 'a';
	preload_case(big, NULL, "profiles.p.preload[0] is not a name of 1 to 100 "
	    "characters");
	memset(big, 'x', 4096);
	preload_case("a", big, NULL);
	big[4096] = 'x';
	preload_case("a", big, "profiles.p.warmup is longer than 4096 bytes");
	free(big);
}

static void
test_malformed(void **state)
{
	static const struct { const char *file, *msg; } cases[] = {
		{ "bad-syntax.yaml", "invalid YAML at line" },
		{ "bad-top-level.yaml", "top level is not a mapping" },
		{ "bad-duplicate-key.yaml", "runAsUser is given twice" },
		{ "bad-unknown-key.yaml",
		    "profiles.python.imgae is not a known key" },
		{ "bad-unknown-top.yaml", "runtimeClass is not a known key" },
		{ "bad-unknown-resource.yaml",
		    "defaults.mem is not a known key" },
		{ "bad-quota-ephemeral.yaml",
		    "quota.ephemeralStorage is not a known key" },
		{ "bad-quantity.yaml", "defaults.memory: quantity '256MB' is "
		    "not valid: unknown suffix 'MB'" },
		{ "bad-quantity-zero.yaml",
		    "caps.cpu '0' must be greater than zero" },
		{ "bad-quantity-range.yaml",
		    "tmpSizeLimit: quantity '9Ei' is out of range" },
		{ "bad-defaults-above-caps.yaml",
		    "defaults.memory '4Gi' is above caps.memory '2Gi'" },
		{ "bad-cpu-above-cap.yaml",
		    "defaults.cpu '2001m' is above caps.cpu '2'" },
		{ "bad-ephemeral-above-cap.yaml", "defaults.ephemeralStorage "
		    "'64Mi' is above caps.ephemeralStorage '32Mi'" },
		{ "bad-run-as-root.yaml", "runAsUser 0 is refused: it must be "
		    "a non-root uid from 1 to 2147483647" },
		{ "bad-run-as-negative.yaml", "runAsUser -5 is refused" },
		{ "bad-run-as-huge.yaml", "runAsUser 4294967296 is refused" },
		{ "bad-run-as-string.yaml", "runAsUser is not an integer" },
		{ "bad-source-dotdot.yaml", "profiles.python.sourceFile '../x' "
		    "is not a safe relative path: it has a '..' segment" },
		{ "bad-source-inner-dotdot.yaml", "profiles.python.sourceFile "
		    "'src/../../main.py' is not a safe relative path: it has "
		    "a '..' segment" },
		{ "bad-source-abs.yaml", "profiles.python.sourceFile "
		    "'/etc/passwd' is not a safe relative path: it is "
		    "absolute" },
		{ "bad-source-dot.yaml", "profiles.python.sourceFile "
		    "'./main.py' is not a safe relative path: it has a '.' "
		    "segment" },
		{ "bad-source-trailing-slash.yaml", "profiles.python."
		    "sourceFile 'src/' is not a safe relative path: it has an "
		    "empty segment" },
		{ "bad-no-source.yaml", "profiles.python.sourceFile is "
		    "missing" },
		{ "bad-no-image.yaml", "profiles.python.image is missing" },
		{ "bad-profile-null.yaml", "profiles.python.image is missing" },
		{ "bad-image-space.yaml", "profiles.python.image 'airlock/"
		    "runner python' contains whitespace" },
		{ "bad-no-command.yaml", "profiles.python.command is missing" },
		{ "bad-command-empty.yaml",
		    "profiles.python.command is empty" },
		{ "bad-command-string.yaml",
		    "profiles.python.command is not a list" },
		{ "bad-command-item-empty.yaml",
		    "profiles.python.command[1] is empty" },
		{ "bad-command-item-list.yaml",
		    "profiles.python.command[1] is not a string" },
		{ "bad-no-profiles.yaml",
		    "profiles: at least one profile is required" },
		{ "bad-profiles-empty.yaml",
		    "profiles: at least one profile is required" },
		{ "bad-profiles-list.yaml", "profiles is not a mapping" },
		{ "bad-profile-name.yaml", "profiles.Python_3: the name is not "
		    "a DNS label" },
		{ "bad-profile-twice.yaml", "profiles.python is given twice" },
		{ "bad-runtime-class.yaml",
		    "runtimeClassName 'gVisor' is not a valid name" },
		{ "bad-priority-class.yaml",
		    "priorityClassName '-airlock' is not a valid name" },
		{ "bad-allow-custom.yaml",
		    "allowCustomImages is not a boolean" },
		{ "bad-executions.yaml",
		    "quota.executions must be between 1 and 1000000" },
		{ "bad-stored-pools.yaml",
		    "quota.storedPools must be between 0 and 1000" },
		{ "bad-stored-sessions.yaml",
		    "quota.storedSessions must be between 0 and 1000" },
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		expect_fail(cases[i].file, K8S_EINVAL, cases[i].msg);
}

/* Names and paths at and just past their limits. */
static void
test_limits(void **state)
{
	static const char *const good_names[] = { "a", "0", "a-b", "a1-2b",
	    "123", NULL };
	static const char *const bad_names[] = { "-a", "a-", "a_b", "a.b",
	    "A", "\"\"", "a b", NULL };
	char *y, *s;
	size_t i;

	(void)state;
	for (i = 0; good_names[i] != NULL; i++) {
		y = xasprintf("profiles: {%s: {image: i, command: [c], "
		    "sourceFile: f}}", good_names[i]);
		expect_parse(y, strlen(y), 0, NULL);
		free(y);
	}
	for (i = 0; bad_names[i] != NULL; i++) {
		y = xasprintf("profiles: {%s: {image: i, command: [c], "
		    "sourceFile: f}}", bad_names[i]);
		expect_parse(y, strlen(y), K8S_EINVAL, "is not a DNS label");
		free(y);
	}
	/* 63 bytes of profile name pass, 64 do not. */
	s = xmalloc(300);
	memset(s, 'a', 64);
	s[63] = '\0';
	y = xasprintf("profiles: {%s: {image: i, command: [c], sourceFile: f}}",
	    s);
	expect_parse(y, strlen(y), 0, NULL);
	free(y);
	s[63] = 'a';
	s[64] = '\0';
	y = xasprintf("profiles: {%s: {image: i, command: [c], sourceFile: f}}",
	    s);
	expect_parse(y, strlen(y), K8S_EINVAL, "is not a DNS label");
	free(y);
	/* sourceFile: 255 bytes pass, 256 do not. */
	memset(s, 'f', 256);
	s[1] = '/';
	s[255] = '\0';
	y = xasprintf("profiles: {p: {image: i, command: [c], sourceFile: %s}}",
	    s);
	expect_parse(y, strlen(y), 0, NULL);
	free(y);
	s[255] = 'f';
	s[256] = '\0';
	y = xasprintf("profiles: {p: {image: i, command: [c], sourceFile: %s}}",
	    s);
	expect_parse(y, strlen(y), K8S_EINVAL,
	    "profiles.p.sourceFile is longer than 255 bytes");
	free(y);
	/* A class name: 253 bytes pass, 254 do not; dots are allowed. */
	memset(s, 'r', 254);
	s[100] = '.';
	s[253] = '\0';
	y = xasprintf("runtimeClassName: %s\n%s", s, minimal_yaml);
	expect_parse(y, strlen(y), 0, NULL);
	free(y);
	s[253] = 'r';
	s[254] = '\0';
	y = xasprintf("runtimeClassName: %s\n%s", s, minimal_yaml);
	expect_parse(y, strlen(y), K8S_EINVAL,
	    "runtimeClassName is longer than 253 bytes");
	free(y);
	free(s);
	y = xasprintf("priorityClassName: a..b\n%s", minimal_yaml);
	expect_parse(y, strlen(y), K8S_EINVAL,
	    "priorityClassName 'a..b' is not a valid name");
	free(y);
	y = xasprintf("runAsUser: 2147483647\n%s", minimal_yaml);
	expect_parse(y, strlen(y), 0, NULL);
	free(y);
	y = xasprintf("runAsUser: 2147483648\n%s", minimal_yaml);
	expect_parse(y, strlen(y), K8S_EINVAL, "runAsUser 2147483648 is "
	    "refused");
	free(y);
	y = xasprintf("runAsUser: 99999999999999999999\n%s", minimal_yaml);
	expect_parse(y, strlen(y), K8S_EINVAL, "runAsUser is out of range");
	free(y);
	/* Equal to the cap is fine. */
	y = xasprintf("defaults: {cpu: 2, memory: 2Gi, ephemeralStorage: "
	    "1024Mi}\n%s", minimal_yaml);
	expect_parse(y, strlen(y), 0, NULL);
	free(y);
}

/* Argument lists, profile counts and images are capped before copying. */
static void
test_caps(void **state)
{
	char *y, *img, *p;
	size_t i, len, cap = 64 * 1024;

	(void)state;
	p = xmalloc(cap);
	len = (size_t)snprintf(p, cap, "profiles:\n  p:\n    image: i\n"
	    "    sourceFile: f\n    command:\n");
	for (i = 0; i < 257; i++)
		len += (size_t)snprintf(p + len, cap - len,
		    "    - a%zu\n", i);
	expect_parse(p, len, K8S_EINVAL,
	    "profiles.p.command has more than 256 items");
	len = (size_t)snprintf(p, cap, "profiles:\n");
	for (i = 0; i < 257; i++)
		len += (size_t)snprintf(p + len, cap - len,
		    "  p%zu: {image: i, command: [c], sourceFile: f}\n", i);
	expect_parse(p, len, K8S_EINVAL, "profiles: more than 256 "
	    "profiles");
	/* 256 of them are fine. */
	len = (size_t)snprintf(p, cap, "profiles:\n");
	for (i = 0; i < 256; i++)
		len += (size_t)snprintf(p + len, cap - len,
		    "  p%zu: {image: i, command: [c], sourceFile: f}\n", i);
	expect_parse(p, len, 0, NULL);
	free(p);
	img = xmalloc(1026);
	memset(img, 'i', 1025);
	img[1025] = '\0';
	y = xasprintf("profiles: {p: {image: %s, command: [c], sourceFile: f}}",
	    img);
	expect_parse(y, strlen(y), K8S_EINVAL,
	    "profiles.p.image is longer than 1024 bytes");
	free(y);
	img[1024] = '\0';
	y = xasprintf("profiles: {p: {image: %s, command: [c], sourceFile: f}}",
	    img);
	expect_parse(y, strlen(y), 0, NULL);
	free(y);
	free(img);
}

static void
test_size_cap(void **state)
{
	struct ctl_config *c = NULL;
	struct k8s_error e;
	char path[] = "/tmp/airlock-ctlconfig-XXXXXX", *data;
	size_t len = MIB;
	FILE *f;
	int fd;

	(void)state;
	/* Exactly 1 MiB: the minimal config padded with a comment. */
	data = xmalloc(len + 2);
	memcpy(data, minimal_yaml, strlen(minimal_yaml));
	memset(data + strlen(minimal_yaml), ' ', len - strlen(minimal_yaml));
	data[strlen(minimal_yaml)] = '#';
	data[len - 1] = '\n';
	assert_int_equal(ctl_config_parse(data, len, "big", &c, &e), 0);
	assert_int_equal(c->nprofiles, 1);
	ctl_config_free(c);
	c = NULL;
	fd = mkstemp(path);
	assert_true(fd >= 0);
	f = fdopen(fd, "w");
	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, len, f), len);
	assert_int_equal(fflush(f), 0);
	assert_int_equal(ctl_config_load(path, &c, &e), 0);
	ctl_config_free(c);
	c = NULL;

	/* One byte more. */
	data[len] = '\n';
	assert_int_equal(ctl_config_parse(data, len + 1, "big", &c, &e),
	    K8S_ETOOBIG);
	assert_string_equal(e.message, "config 'big' is larger than 1048576 "
	    "bytes");
	assert_int_equal(fwrite("\n", 1, 1, f), 1);
	assert_int_equal(fclose(f), 0);
	k8s_error_clear(&e);
	assert_int_equal(ctl_config_load(path, &c, &e), K8S_ETOOBIG);
	assert_int_equal(e.code, K8S_ETOOBIG);
	assert_non_null(strstr(e.message, path));
	assert_non_null(strstr(e.message, "is larger than 1048576 bytes"));
	assert_null(c);
	assert_int_equal(unlink(path), 0);
	free(data);
}

static void
test_unreadable(void **state)
{
	struct ctl_config *c = NULL;
	struct k8s_error e;
	char *p = fixture("no-such-file.yaml");

	(void)state;
	k8s_error_clear(&e);
	assert_int_equal(ctl_config_load(p, &c, &e), K8S_EINVAL);
	assert_non_null(strstr(e.message, "cannot read config '"));
	assert_non_null(strstr(e.message, "No such file or directory"));
	assert_null(c);
	free(p);
	p = fixture("");
	assert_int_equal(ctl_config_load(p, &c, &e), K8S_EINVAL);
	assert_non_null(strstr(e.message, "cannot read config '"));
	free(p);
	assert_int_equal(ctl_config_load("", &c, &e), K8S_EINVAL);
	assert_string_equal(e.message, "config path is empty");
	assert_int_equal(ctl_config_load(NULL, &c, NULL), K8S_EINVAL);
	expect_parse("", 0, K8S_EINVAL, "config 'mem': file holds no YAML "
	    "document");
	expect_parse(NULL, 0, K8S_EINVAL, "file holds no YAML document");
	assert_null(c);
}

/*
 * network.egress (issue 32, docs/network.md): IPv4 CIDRs and their TCP
 * ports; none is no network; anything else refused with the field named.
 */
static void
test_network_egress(void **state)
{
	static const char none[] =
	    "networkRuntimeClassName: gvisor-egress\n"
	    "profiles:\n"
	    "  none: {image: i, command: [python3, main.py], sourceFile: main.py,\n"
	    "        network: {egress: []}}\n"
	    "  nulled: {image: i, command: [python3, main.py], sourceFile: main.py,\n"
	    "        network: {}}\n"
	    "  plain: {image: i, command: [python3, main.py], sourceFile: main.py}\n";
	static const struct { const char *yaml, *msg; } bad[] = {
		{ "network: {egress: [{host: pypi.org, cidr: 10.0.0.0/8, ports: [443]}]}",
		    "profiles.p.network.egress[0] has both host and cidr: give one "
		    "per entry" },
		{ "network: {egress: [{host: '*.pypi.org', ports: [443]}]}",
		    "profiles.p.network.egress[0].host '*.pypi.org' may hold only "
		    "letters, digits, '-' and '.' (no wildcard, no address)" },
		{ "network: {egress: [{host: 169.254.169.254, ports: [80]}]}",
		    "profiles.p.network.egress[0].host '169.254.169.254' reads as an "
		    "address: give an address as a cidr" },
		{ "network: {egress: [{host: 0x7f000001.0x1, ports: [80]}]}",
		    "profiles.p.network.egress[0].host '0x7f000001.0x1' reads as an "
		    "address: give an address as a cidr" },
		{ "network: {egress: [{host: localhost, ports: [80]}]}",
		    "profiles.p.network.egress[0].host 'localhost' is not a fully "
		    "qualified name (at least two labels, such as pypi.org)" },
		{ "network: {egress: [{host: -a.org, ports: [80]}]}",
		    "profiles.p.network.egress[0].host '-a.org' has a label starting "
		    "with '-' or longer than 63" },
		{ "network: {egress: [{host: a-.org, ports: [80]}]}",
		    "profiles.p.network.egress[0].host 'a-.org' has an empty label or "
		    "one ending in '-'" },
		{ "network: {egress: [{host: a.org-, ports: [80]}]}",
		    "profiles.p.network.egress[0].host 'a.org-' has a label ending in '-'" },
		{ "network: {egress: [{host: '', ports: [80]}]}",
		    "profiles.p.network.egress[0].host '' is not a DNS name of 1 to 253 "
		    "characters" },
		{ "network: {egress: [{host: [a.org], ports: [80]}]}",
		    "profiles.p.network.egress[0].host is not a string" },
		{ "network: {egress: [{host: a.org}]}",
		    "profiles.p.network.egress[0].ports is missing: list the TCP "
		    "ports it may connect to" },
		{ "network: {egress: [{host: pypi.org, ports: [443]}, {host: PyPI.org., ports: [80]}]}",
		    "profiles.p.network.egress[1].host pypi.org is given twice "
		    "(list its ports in one entry)" },
		{ "network: {egress: [{cidr: 10.0.0.0/8}]}",
		    "profiles.p.network.egress[0].ports is missing: list the TCP "
		    "ports it may connect to" },
		{ "network: {egress: [{ports: [1]}]}",
		    "profiles.p.network.egress[0] needs a cidr or a host" },
		{ "network: {egress: [{cidr: 10.0.0.0/8, ports: []}]}",
		    "profiles.p.network.egress[0].ports is empty" },
		{ "network: {egress: [{cidr: 10.0.0.0/8, ports: 443}]}",
		    "profiles.p.network.egress[0].ports is not a list" },
		{ "network: {egress: [{cidr: 10.0.0.0/8, ports: [0]}]}",
		    "profiles.p.network.egress[0].ports[0] is not a port from 1 to 65535" },
		{ "network: {egress: [{cidr: 10.0.0.0/8, ports: [1, 65536]}]}",
		    "profiles.p.network.egress[0].ports[1] is not a port from 1 to 65535" },
		{ "network: {egress: [{cidr: 10.0.0.0/8, ports: ['443']}]}",
		    "profiles.p.network.egress[0].ports[0] is not a port from 1 to 65535" },
		{ "network: {egress: [{cidr: 10.0.0.0/8, ports: [0443]}]}",
		    "profiles.p.network.egress[0].ports[0] is not a port from 1 to 65535" },
		{ "network: {egress: [{cidr: 10.0.0.0/8, ports: [443, 80, 443]}]}",
		    "profiles.p.network.egress[0].ports[2] 443 is given twice" },
		{ "network: {egress: [{cidr: 10.1.0.0/8, ports: [1]}]}",
		    "profiles.p.network.egress[0].cidr '10.1.0.0/8' has host bits "
		    "set: the network is 10.0.0.0/8" },
		{ "network: {egress: [{cidr: 10.0.0.0, ports: [1]}]}",
		    "profiles.p.network.egress[0].cidr '10.0.0.0' is not an IPv4 CIDR (a.b.c.d/n)" },
		{ "network: {egress: [{cidr: 10.0.0.256/32, ports: [1]}]}",
		    "profiles.p.network.egress[0].cidr '10.0.0.256/32' is not an IPv4 CIDR (a.b.c.d/n)" },
		{ "network: {egress: [{cidr: 10.0.0.0/33, ports: [1]}]}",
		    "profiles.p.network.egress[0].cidr '10.0.0.0/33' is not an IPv4 CIDR (a.b.c.d/n)" },
		{ "network: {egress: [{cidr: 010.0.0.0/8, ports: [1]}]}",
		    "profiles.p.network.egress[0].cidr '010.0.0.0/8' is not an IPv4 CIDR (a.b.c.d/n)" },
		{ "network: {egress: [{cidr: 10.0.0.0/08, ports: [1]}]}",
		    "profiles.p.network.egress[0].cidr '10.0.0.0/08' is not an IPv4 CIDR (a.b.c.d/n)" },
		{ "network: {egress: [{cidr: 'fd00::/8', ports: [1]}]}",
		    "profiles.p.network.egress[0].cidr 'fd00::/8' is not an IPv4 CIDR (a.b.c.d/n)" },
		{ "network: {egress: [{cidr: 10.0.0.0/8, ports: [1]}, {cidr: 10.0.0.0/8, ports: [2]}]}",
		    "profiles.p.network.egress[1].cidr 10.0.0.0/8 is given twice "
		    "(list its ports in one entry)" },
		{ "network: {egress: [{cidr: 10.0.0.0/8, ports: [1], proto: udp}]}",
		    "profiles.p.network.egress[0].proto is not a known key" },
		{ "network: {egres: []}", "profiles.p.network.egres is not a known key" },
		{ "network: {egress: {cidr: 10.0.0.0/8}}",
		    "profiles.p.network.egress is not a list" },
		{ "network: [x]", "profiles.p.network is not a mapping" },
		{ "network: {egress: [10.0.0.0/8]}",
		    "profiles.p.network.egress[0] is not a mapping" },
		/* Ranges no execution may reach, inside them or covering them. */
		{ "network: {egress: [{cidr: 0.0.0.0/0, ports: [443]}]}",
		    "profiles.p.network.egress[0].cidr: 0.0.0.0/0 covers 169.254.0.0/16 "
		    "(link-local, the cloud metadata address)" },
		{ "network: {egress: [{cidr: 10.0.0.0/8, ports: [1]}, {cidr: 128.0.0.0/1, ports: [443]}]}",
		    "profiles.p.network.egress[1].cidr: 128.0.0.0/1 covers 169.254.0.0/16 "
		    "(link-local, the cloud metadata address)" },
		{ "network: {egress: [{cidr: 169.254.169.254/32, ports: [80]}]}",
		    "profiles.p.network.egress[0].cidr: 169.254.169.254/32 is in "
		    "169.254.0.0/16 (link-local, the cloud metadata address)" },
		{ "network: {egress: [{cidr: 169.254.0.0/16, ports: [80]}]}",
		    "profiles.p.network.egress[0].cidr: 169.254.0.0/16 covers "
		    "169.254.0.0/16 (link-local, the cloud metadata address)" },
		{ "network: {egress: [{cidr: 127.0.0.1/32, ports: [80]}]}",
		    "profiles.p.network.egress[0].cidr: 127.0.0.1/32 is in 127.0.0.0/8 (loopback)" },
		{ "network: {egress: [{cidr: 64.0.0.0/2, ports: [80]}]}",
		    "profiles.p.network.egress[0].cidr: 64.0.0.0/2 covers 127.0.0.0/8 (loopback)" },
		{ "network: {egress: [{cidr: 0.1.2.0/24, ports: [80]}]}",
		    "profiles.p.network.egress[0].cidr: 0.1.2.0/24 is in 0.0.0.0/8 (this network)" },
		{ "network: {egress: [{cidr: 0.0.0.0/7, ports: [80]}]}",
		    "profiles.p.network.egress[0].cidr: 0.0.0.0/7 covers 0.0.0.0/8 (this network)" },
		{ "network: {egress: [{cidr: 224.0.0.251/32, ports: [5353]}]}",
		    "profiles.p.network.egress[0].cidr: 224.0.0.251/32 is in 224.0.0.0/3 "
		    "(multicast and reserved)" },
		{ "network: {egress: [{cidr: 255.255.255.255/32, ports: [1]}]}",
		    "profiles.p.network.egress[0].cidr: 255.255.255.255/32 is in 224.0.0.0/3 "
		    "(multicast and reserved)" },
		{ "network: {egress: [{cidr: 192.0.0.0/2, ports: [1]}]}",
		    "profiles.p.network.egress[0].cidr: 192.0.0.0/2 covers 224.0.0.0/3 "
		    "(multicast and reserved)" },
	};
	struct ctl_config *c = NULL;
	struct k8s_error e;
	char *y;

	(void)state;
	k8s_error_clear(&e);
	assert_int_equal(ctl_config_parse(none, strlen(none), "mem", &c, &e), 0);
	assert_string_equal(c->network_runtime_class, "gvisor-egress");
	for (const char *const *n = (const char *const[]){ "none", "nulled",
	    "plain", NULL }; *n != NULL; n++) {
		assert_null(ctl_config_profile(c, *n)->egress);
		assert_int_equal(ctl_config_profile(c, *n)->negress, 0);
	}
	ctl_config_free(c);
	/* The default class. */
	y = xasprintf("profiles:\n  p: {image: i, command: [x], sourceFile: m}\n");
	assert_int_equal(ctl_config_parse(y, strlen(y), "mem", &c, &e), 0);
	assert_string_equal(c->network_runtime_class, "gvisor-net");
	ctl_config_free(c);
	free(y);
	expect_message("networkRuntimeClassName: Bad_Name\nprofiles:\n  p: {image: i, "
	    "command: [x], sourceFile: m}\n", "networkRuntimeClassName 'Bad_Name' "
	    "is not a valid name (lowercase letters, digits, '-' and '.')");
	/* The same class as the plain one: no sandbox would lack a network. */
	expect_message("networkRuntimeClassName: gvisor\nprofiles:\n  p: {image: i, "
	    "command: [x], sourceFile: m}\n", "networkRuntimeClassName 'gvisor' "
	    "is runtimeClassName too: the network stack's class must be another "
	    "(docs/network.md)");
	expect_message("runtimeClassName: gvisor-net\nprofiles:\n  p: {image: i, "
	    "command: [x], sourceFile: m}\n", "networkRuntimeClassName 'gvisor-net' "
	    "is runtimeClassName too: the network stack's class must be another "
	    "(docs/network.md)");
	/*
	 * Well formed, but not started by the runner, which holds the
	 * program until its policy is in force: refused.
	 */
	for (const char *const *cmd = (const char *const[]){ "[x]", "[x, y]",
	    "[/airlock/bin/run]", "[/airlock/bin/run, --hold, m, sh]", NULL };
	    *cmd != NULL; cmd++) {
		y = xasprintf("profiles:\n  p: {image: i, command: %s, sourceFile: "
		    "m,\n    network: {egress: [{cidr: 10.20.0.0/16, ports: "
		    "[5432]}]}}\n", *cmd);
		expect_message(y, "profiles.p.network.egress needs the command "
		    "[/airlock/bin/run, PROGRAM, ...]: the runner holds the "
		    "program until its NetworkPolicy is in force (docs/network.md)");
		free(y);
	}
	/* Read whole. */
	y = xasprintf("profiles:\n  p: {image: i, command: [/airlock/bin/run, x], "
	    "sourceFile: m,\n"
	    "    network: {egress: [{cidr: 10.20.0.0/16, ports: [5432, 443]},\n"
	    "                       {cidr: 192.168.1.7/32, ports: [8080]},\n"
	    "                       {cidr: 203.0.113.0/24, ports: [65535, 1]},\n"
	    "                       {host: Files.PyPI.org., ports: [443]}]}}\n");
	assert_int_equal(ctl_config_parse(y, strlen(y), "mem", &c, &e), 0);
	{
		const struct ctl_profile *p = ctl_config_profile(c, "p");

		assert_int_equal(p->negress, 4);
		assert_null(p->egress[1].host);
		assert_string_equal(p->egress[3].host, "files.pypi.org");
		assert_null(p->egress[3].cidr);
		assert_int_equal(p->egress[3].nports, 1);
		assert_int_equal(p->egress[3].ports[0], 443);
		/* A controller without the proxy's key refuses it. */
		assert_int_equal(egress_config_hosts(c, &e), 1);
		assert_string_equal(e.message, "profiles.p.network.egress[3].host "
		    "needs the egress proxy's key: start the controller with "
		    "--egress-key FILE (the chart does, with egress.enabled)");
		assert_string_equal(p->egress[1].cidr, "192.168.1.7/32");
		assert_int_equal(p->egress[1].addr, 0xc0a80107);
		assert_int_equal(p->egress[1].prefix, 32);
		assert_int_equal(p->egress[2].nports, 2);
		assert_int_equal(p->egress[2].ports[0], 65535);
		assert_int_equal(p->egress[2].ports[1], 1);
	}
	ctl_config_free(c);
	free(y);

	/* Next to the forbidden ranges, outside them: read whole. */
	y = xasprintf("profiles:\n  p: {image: i, command: [/airlock/bin/run, x], "
	    "sourceFile: m,\n"
	    "    network: {egress: [{cidr: 1.0.0.0/8, ports: [1]},\n"
	    "        {cidr: 126.0.0.0/8, ports: [1]}, {cidr: 128.0.0.0/3, ports: [1]},\n"
	    "        {cidr: 169.253.0.0/16, ports: [1]}, {cidr: 169.255.0.0/16, ports: [1]},\n"
	    "        {cidr: 170.0.0.0/7, ports: [1]}, {cidr: 223.255.255.255/32, ports: [1]}]}}\n");
	assert_int_equal(ctl_config_parse(y, strlen(y), "mem", &c, &e), 0);
	assert_int_equal(ctl_config_profile(c, "p")->negress, 7);
	assert_int_equal(egress_config_hosts(c, &e), 0);
	ctl_config_free(c);
	free(y);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		y = xasprintf("profiles:\n  p: {image: i, command: [python3, main.py], "
		    "sourceFile: main.py, %s}\n", bad[i].yaml);
		expect_message(y, bad[i].msg);
		free(y);
	}
	/* The caps: 32 entries of 16 ports. */
	{
		char *list = xcalloc(1, 33 * 200), one[200], ports[100] = "";

		for (int i = 1; i <= 16; i++)
			snprintf(ports + strlen(ports), sizeof(ports) - strlen(ports),
			    "%s%d", i > 1 ? ", " : "", i);
		for (int i = 0; i < 32; i++) {
			snprintf(one, sizeof(one), "%s{cidr: 10.0.%d.0/24, ports: [%s]}",
			    i ? ", " : "", i, ports);
			strcat(list, one);
		}
		y = xasprintf("profiles:\n  p: {image: i, command: [/airlock/bin/run, x], "
		    "sourceFile: m, network: {egress: [%s]}}\n", list);
		assert_int_equal(ctl_config_parse(y, strlen(y), "mem", &c, &e), 0);
		assert_int_equal(ctl_config_profile(c, "p")->negress, 32);
		assert_int_equal(ctl_config_profile(c, "p")->egress[31].nports, 16);
		ctl_config_free(c);
		free(y);
		y = xasprintf("profiles:\n  p: {image: i, command: [x], sourceFile: m, "
		    "network: {egress: [%s, {cidr: 10.1.0.0/16, ports: [1]}]}}\n", list);
		expect_message(y, "profiles.p.network.egress has more than 32 entries");
		free(y);
		y = xasprintf("profiles:\n  p: {image: i, command: [x], sourceFile: m, "
		    "network: {egress: [{cidr: 10.0.0.0/8, ports: [%s, 17]}]}}\n", ports);
		expect_message(y, "profiles.p.network.egress[0].ports has more than 16 items");
		free(y);
		free(list);
	}
}

/*
 * network.egressBytes (docs/network.md, "The byte cap"): a quantity of
 * bytes, 1Gi when a profile with egress does not give one, 0 without
 * egress; refused, naming the field: not a quantity, not above zero,
 * above 1Ti, or on a profile without egress entries.
 */
static void
test_network_egress_bytes(void **state)
{
#define NET_PROFILE	"profiles:\n  p: {image: i, command: [/airlock/bin/run, x], " \
	"sourceFile: m,\n    network: "
#define NET_EGRESS	"egress: [{cidr: 10.20.0.0/16, ports: [5432]}]"
	static const struct { const char *net; long long bytes; } ok[] = {
		{ "{" NET_EGRESS "}", 1LL << 30 },
		{ "{" NET_EGRESS ", egressBytes: null}", 1LL << 30 },
		{ "{" NET_EGRESS ", egressBytes: 64Mi}", 64LL << 20 },
		{ "{" NET_EGRESS ", egressBytes: 104857600}", 104857600 },
		{ "{" NET_EGRESS ", egressBytes: '1e6'}", 1000000 },
		{ "{" NET_EGRESS ", egressBytes: 1}", 1 },
		{ "{" NET_EGRESS ", egressBytes: 1Ti}", 1LL << 40 },
		{ "{" NET_EGRESS ", egressBytes: 1099511627776}", 1LL << 40 },
		/* Rounded up, as Kubernetes rounds a quantity. */
		{ "{" NET_EGRESS ", egressBytes: 0.5}", 1 },
		/* No egress: no cap, and none to give. */
		{ "{egress: []}", 0 },
		{ "{egressBytes: null}", 0 },
	};
	static const struct { const char *net, *msg; } bad[] = {
		{ "{" NET_EGRESS ", egressBytes: 64MB}",
		    "profiles.p.network.egressBytes: quantity '64MB' is not valid: "
		    "unknown suffix 'MB'" },
		{ "{" NET_EGRESS ", egressBytes: lots}",
		    "profiles.p.network.egressBytes: quantity 'lots' is not valid: "
		    "it has no digits" },
		{ "{" NET_EGRESS ", egressBytes: ''}",
		    "profiles.p.network.egressBytes: quantity '' is not valid: it is empty" },
		{ "{" NET_EGRESS ", egressBytes: [64Mi]}",
		    "profiles.p.network.egressBytes is not a quantity of bytes (such as 64Mi)" },
		{ "{" NET_EGRESS ", egressBytes: {a: 1}}",
		    "profiles.p.network.egressBytes is not a quantity of bytes (such as 64Mi)" },
		{ "{" NET_EGRESS ", egressBytes: 0}",
		    "profiles.p.network.egressBytes '0' must be greater than zero" },
		{ "{" NET_EGRESS ", egressBytes: 0Mi}",
		    "profiles.p.network.egressBytes '0Mi' must be greater than zero" },
		{ "{" NET_EGRESS ", egressBytes: -1Mi}",
		    "profiles.p.network.egressBytes '-1Mi' must be greater than zero" },
		{ "{" NET_EGRESS ", egressBytes: 1099511627777}",
		    "profiles.p.network.egressBytes '1099511627777' is above 1Ti "
		    "(1099511627776 bytes)" },
		{ "{" NET_EGRESS ", egressBytes: 2Ti}",
		    "profiles.p.network.egressBytes '2Ti' is above 1Ti (1099511627776 bytes)" },
		/* Past 64 bits: above 1Ti all the same. */
		{ "{" NET_EGRESS ", egressBytes: 9Ei}",
		    "profiles.p.network.egressBytes '9Ei' is above 1Ti (1099511627776 bytes)" },
		{ "{egressBytes: 64Mi}",
		    "profiles.p.network.egressBytes needs egress entries (it caps "
		    "the bytes of a profile's network egress)" },
		{ "{egress: [], egressBytes: 64Mi}",
		    "profiles.p.network.egressBytes needs egress entries (it caps "
		    "the bytes of a profile's network egress)" },
		{ "{egress: null, egressBytes: 1}",
		    "profiles.p.network.egressBytes needs egress entries (it caps "
		    "the bytes of a profile's network egress)" },
		{ "{" NET_EGRESS ", egressbytes: 64Mi}",
		    "profiles.p.network.egressbytes is not a known key" },
	};
	struct ctl_config *c = NULL;
	struct k8s_error e;
	char *y;

	(void)state;
	k8s_error_clear(&e);
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		y = xasprintf(NET_PROFILE "%s}\n", ok[i].net);
		if (ctl_config_parse(y, strlen(y), "mem", &c, &e) != 0)
			fail_msg("%s: %s", y, e.message);
		if (ctl_config_profile(c, "p")->egress_bytes != ok[i].bytes)
			fail_msg("%s: %lld bytes, want %lld", y, (long long)
			    ctl_config_profile(c, "p")->egress_bytes, ok[i].bytes);
		ctl_config_free(c);
		c = NULL;
		free(y);
	}
	/* A profile without network has no cap either. */
	y = xasprintf("profiles:\n  p: {image: i, command: [x], sourceFile: m}\n");
	assert_int_equal(ctl_config_parse(y, strlen(y), "mem", &c, &e), 0);
	assert_int_equal(ctl_config_profile(c, "p")->egress_bytes, 0);
	ctl_config_free(c);
	free(y);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		y = xasprintf(NET_PROFILE "%s}\n", bad[i].net);
		expect_message(y, bad[i].msg);
		free(y);
	}
#undef NET_PROFILE
#undef NET_EGRESS
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_full),
		cmocka_unit_test(test_minimal),
		cmocka_unit_test(test_partial),
		cmocka_unit_test(test_alias),
		cmocka_unit_test(test_profile_lookup),
		cmocka_unit_test(test_policy),
		cmocka_unit_test(test_preload),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_limits),
		cmocka_unit_test(test_caps),
		cmocka_unit_test(test_size_cap),
		cmocka_unit_test(test_artifacts),
		cmocka_unit_test(test_network_egress),
		cmocka_unit_test(test_network_egress_bytes),
		cmocka_unit_test(test_unreadable),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
