/*
 * Integration: the CodeExecution CRD (crds/) on the real kube-apiserver.
 * Installed by server-side apply from the YAML file itself; then valid
 * objects are admitted with their defaults, and invalid ones refused with
 * the field named, including updates to the immutable spec.
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
#include "cli.h"
#include "itutil.h"
#include "pool.h"

static const struct k8s_resource crds = { "apiextensions.k8s.io", "v1",
    "customresourcedefinitions", 0 };
#define cx cx_resource

static struct k8s_client *c;
static struct k8s_config *cfg;
static char *ns;

static int
group_setup(void **state)
{
	(void)state;
	c = it_client(0, &cfg);
	it_install_crd(c);
	ns = it_namespace_new(c, "it-crd");
	return 0;
}

static int
group_teardown(void **state)
{
	(void)state;
	it_namespace_delete(c, ns);
	free(ns);
	it_client_free(c, cfg);
	return 0;
}

/* A CodeExecution named name with the given spec (stolen); NULL spec: none. */
static json_t *
object(const char *name, json_t *spec)
{
	json_t *o = json_pack("{s:s, s:s, s:{s:s}}", "apiVersion", "airlock.dev/v1alpha1",
	    "kind", "CodeExecution", "metadata", "name", name);

	if (spec)
		json_object_set_new(o, "spec", spec);
	return o;
}

static json_t *
spec_json(const char *text)
{
	json_error_t jerr;
	json_t *j = json_loads(text, 0, &jerr);

	if (j == NULL)
		fail_msg("bad test JSON '%s': %s", text, jerr.text);
	return j;
}

/* A string of n copies of ch, as a JSON string value. */
static json_t *
filler(size_t n, char ch)
{
	char *s = malloc(n + 1);
	json_t *j;

	memset(s, ch, n);
	s[n] = '\0';
	j = json_string(s);
	free(s);
	return j;
}

/*
 * bin/airlock checks a spec before sending it (cli_check_spec): it must
 * refuse what the API server refuses, naming the same field (or the field
 * holding it), and admit what it admits with the same defaults.
 */
static void
cli_agrees(const char *name, json_t *spec, const char *want)
{
	struct k8s_error err;
	json_t *copy = spec ? json_deep_copy(spec) : NULL;
	int rc = cli_check_spec(copy, &err);

	if (want == NULL) {
		if (rc != 0)
			fail_msg("%s: the API server admits it, the CLI says '%s'",
			    name, err.message);
		json_decref(copy);
		return;
	}
	if (rc == 0)
		fail_msg("%s: the API server refuses it ('%s'), the CLI does not",
		    name, want);
	{
		size_t sw = strcspn(want, ":"), sc = strcspn(err.message, ":");

		if (strncmp(want, err.message, sw < sc ? sw : sc) != 0)
			fail_msg("%s: the API server names '%.*s', the CLI '%.*s'",
			    name, (int)sw, want, (int)sc, err.message);
	}
	json_decref(copy);
}

static void
expect_refused(const char *name, json_t *spec, const char *want)
{
	struct k8s_error err;
	json_t *o;
	int rc;

	cli_agrees(name, spec, want);
	o = object(name, spec);
	rc = k8s_create(c, &cx, ns, o, NULL, &err);

	json_decref(o);
	if (rc == 0)
		fail_msg("%s: admitted, expected '%s'", name, want);
	assert_int_equal(rc, K8S_EHTTP);
	assert_int_equal(err.http_status, 422);
	assert_string_equal(err.reason, "Invalid");
	if (strstr(err.message, want) == NULL)
		fail_msg("%s: message '%s' lacks '%s'", name, err.message, want);
}

static json_t *
admit(const char *name, json_t *spec)
{
	struct k8s_error err;
	json_t *checked = json_deep_copy(spec), *o, *out;

	cli_agrees(name, spec, NULL);
	o = object(name, spec);
	if (k8s_create(c, &cx, ns, o, &out, &err) != 0)
		fail_msg("%s refused: %s", name, err.message);
	json_decref(o);
	/* The CLI's defaults are the schema's. */
	if (cli_check_spec(checked, &err) != 0 || !json_equal(checked,
	    json_object_get(out, "spec")))
		fail_msg("%s: the CLI makes the spec %s, the API server %s", name,
		    json_dumps(checked, JSON_SORT_KEYS), json_dumps(json_object_get(out,
		    "spec"), JSON_SORT_KEYS));
	json_decref(checked);
	return out;
}

/* n copies of the UTF-8 character u (2 to 4 bytes), as a JSON string value. */
static json_t *
filler_utf8(size_t n, const char *u)
{
	size_t ul = strlen(u);
	char *s = malloc(n * ul + 1);
	json_t *j;

	for (size_t i = 0; i < n; i++)
		memcpy(s + i * ul, u, ul);
	s[n * ul] = '\0';
	j = json_string(s);
	free(s);
	return j;
}

/* {"runtime":"python", key: v}, v taken. */
static json_t *
spec_with(const char *key, json_t *v)
{
	json_t *spec = spec_json("{\"runtime\":\"python\"}");

	json_object_set_new(spec, key, v);
	return spec;
}

static void
test_identity(void **state)
{
	struct k8s_error err;
	json_t *crd, *sp, *names;

	(void)state;
	assert_int_equal(k8s_get(c, &crds, NULL, "codeexecutions.airlock.dev", &crd, &err), 0);
	sp = json_object_get(crd, "spec");
	names = json_object_get(sp, "names");
	assert_string_equal(json_string_value(json_object_get(sp, "group")), "airlock.dev");
	assert_string_equal(json_string_value(json_object_get(sp, "scope")), "Namespaced");
	assert_string_equal(json_string_value(json_object_get(names, "kind")), "CodeExecution");
	assert_string_equal(json_string_value(json_object_get(names, "plural")), "codeexecutions");
	assert_string_equal(json_string_value(json_array_get(json_object_get(names, "shortNames"), 0)), "cx");
	assert_int_equal(json_array_size(json_object_get(names, "shortNames")), 1);
	assert_string_equal(json_string_value(json_array_get(json_object_get(names, "categories"), 0)), "airlock");
	assert_string_equal(json_string_value(json_object_get(json_array_get(
	    json_object_get(sp, "versions"), 0), "name")), "v1alpha1");
	json_decref(crd);
}

static void
test_valid_and_defaults(void **state)
{
	json_t *out, *s, *spec;

	(void)state;
	out = admit("minimal", spec_json("{\"runtime\":\"python\",\"source\":\"print(1)\"}"));
	s = json_object_get(out, "spec");
	assert_int_equal(json_integer_value(json_object_get(s, "timeoutSeconds")), 30);
	assert_int_equal(json_integer_value(json_object_get(s, "ttlSecondsAfterFinished")), 3600);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(s, "output"), "maxBytes")), 65536);
	assert_null(json_object_get(s, "cancel"));
	json_decref(out);

	out = admit("full", spec_json("{\"runtime\":\"node\",\"source\":\"console.log(1)\","
	    "\"files\":[{\"path\":\"lib/a.js\",\"content\":\"x\"},{\"path\":\".env\",\"content\":\"\"}],"
	    "\"stdin\":\"in\",\"args\":[\"-v\",\"\"],\"env\":[{\"name\":\"A_1\",\"value\":\"x\"},{\"name\":\"_b\"}],"
	    "\"timeoutSeconds\":3600,\"resources\":{\"cpu\":\"500m\",\"memory\":\"256Mi\",\"ephemeralStorage\":1},"
	    "\"output\":{\"maxBytes\":1048576},\"ttlSecondsAfterFinished\":0,\"cancel\":false}"));
	s = json_object_get(out, "spec");
	assert_int_equal(json_integer_value(json_object_get(s, "timeoutSeconds")), 3600);
	assert_int_equal(json_integer_value(json_object_get(s, "ttlSecondsAfterFinished")), 0);
	assert_string_equal(json_string_value(json_object_get(json_object_get(s, "resources"), "cpu")), "500m");
	assert_int_equal(json_array_size(json_object_get(s, "files")), 2);
	json_decref(out);

	/* Neighbours that only look alike are fine. */
	json_decref(admit("near-paths", spec_json("{\"runtime\":\"python\",\"files\":[{\"path\":\"lib\",\"content\":\"\"},"
	    "{\"path\":\"lib2/a\",\"content\":\"\"},{\"path\":\"lib.d/a\",\"content\":\"\"},{\"path\":\"a..b\",\"content\":\"\"}]}")));
	/* Exactly 256 KiB of files in all is allowed. */
	spec = spec_json("{\"runtime\":\"bash\",\"files\":[{\"path\":\"a\"},{\"path\":\"b\"}]}");
	json_object_set_new(json_array_get(json_object_get(spec, "files"), 0), "content", filler(131072, 'a'));
	json_object_set_new(json_array_get(json_object_get(spec, "files"), 1), "content", filler(131072, 'b'));
	json_decref(admit("files-at-cap", spec));
	spec = spec_json("{\"runtime\":\"bash\"}");
	json_object_set_new(spec, "source", filler(262144, 'x'));
	json_decref(admit("source-at-cap", spec));
}

static void
test_invalid_refused(void **state)
{
	json_t *spec;
	char args[8192];
	size_t n = 0;

	(void)state;
	expect_refused("no-spec", NULL, "spec: Required value");
	expect_refused("no-runtime", spec_json("{\"source\":\"x\"}"), "spec.runtime: Required value");
	expect_refused("bad-runtime", spec_json("{\"runtime\":\"Python!\"}"),
	    "spec.runtime: Invalid value: \"Python!\": spec.runtime in body should match");
	expect_refused("long-runtime", spec_json("{\"runtime\":"
	    "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"}"),
	    "spec.runtime: Too long: may not be more than 63 bytes");
	expect_refused("timeout-zero", spec_json("{\"runtime\":\"python\",\"timeoutSeconds\":0}"),
	    "spec.timeoutSeconds: Invalid value: 0: spec.timeoutSeconds in body should be greater than or equal to 1");
	expect_refused("timeout-big", spec_json("{\"runtime\":\"python\",\"timeoutSeconds\":3601}"),
	    "spec.timeoutSeconds: Invalid value: 3601: spec.timeoutSeconds in body should be less than or equal to 3600");
	expect_refused("timeout-string", spec_json("{\"runtime\":\"python\",\"timeoutSeconds\":\"30\"}"),
	    "spec.timeoutSeconds: Invalid value: \"string\": spec.timeoutSeconds in body must be of type integer");
	spec = spec_json("{\"runtime\":\"python\"}");
	json_object_set_new(spec, "source", filler(262145, 'x'));
	expect_refused("source-big", spec, "spec.source: Too long: may not be more than 262144 bytes");
	expect_refused("abs-path", spec_json("{\"runtime\":\"python\",\"files\":[{\"path\":\"/etc/passwd\",\"content\":\"x\"}]}"),
	    "spec.files[0].path: Invalid value: \"/etc/passwd\": must be a relative path");
	expect_refused("dotdot-path", spec_json("{\"runtime\":\"python\",\"files\":[{\"path\":\"a/../../x\",\"content\":\"x\"}]}"),
	    "spec.files[0].path: Invalid value: \"a/../../x\": must not contain '.' or '..' segments");
	expect_refused("dot-path", spec_json("{\"runtime\":\"python\",\"files\":[{\"path\":\"ok\",\"content\":\"\"},{\"path\":\"./x\",\"content\":\"x\"}]}"),
	    "spec.files[1].path: Invalid value: \"./x\": must not contain '.' or '..' segments");
	/* The kubelet cannot lay these out: refused before a pod is made. */
	expect_refused("dotdot-prefix", spec_json("{\"runtime\":\"python\",\"files\":[{\"path\":\"..x\",\"content\":\"x\"}]}"),
	    "spec.files[0].path: Invalid value: \"..x\": must not start with '..'");
	expect_refused("file-and-dir", spec_json("{\"runtime\":\"python\",\"files\":[{\"path\":\"lib\",\"content\":\"\"},"
	    "{\"path\":\"lib/a.py\",\"content\":\"x\"}]}"),
	    "spec.files: Invalid value: a path cannot be both a file and a directory holding others");
	expect_refused("dir-and-file", spec_json("{\"runtime\":\"python\",\"files\":[{\"path\":\"a/b/c\",\"content\":\"\"},"
	    "{\"path\":\"a/b\",\"content\":\"x\"}]}"),
	    "spec.files: Invalid value: a path cannot be both a file and a directory holding others");
	expect_refused("empty-segment", spec_json("{\"runtime\":\"python\",\"files\":[{\"path\":\"a//b\",\"content\":\"x\"}]}"),
	    "spec.files[0].path: Invalid value: \"a//b\": must not hold empty segments");
	expect_refused("dup-path", spec_json("{\"runtime\":\"python\",\"files\":[{\"path\":\"a\",\"content\":\"1\"},{\"path\":\"a\",\"content\":\"2\"}]}"),
	    "spec.files[1]: Duplicate value: {\"path\":\"a\"}");
	spec = spec_json("{\"runtime\":\"bash\",\"files\":[{\"path\":\"a\"},{\"path\":\"b\"}]}");
	json_object_set_new(json_array_get(json_object_get(spec, "files"), 0), "content", filler(131072, 'a'));
	json_object_set_new(json_array_get(json_object_get(spec, "files"), 1), "content", filler(131073, 'b'));
	expect_refused("files-big", spec, "spec.files: Invalid value: files may hold at most 262144 bytes in all");
	expect_refused("env-name", spec_json("{\"runtime\":\"python\",\"env\":[{\"name\":\"1BAD\",\"value\":\"x\"}]}"),
	    "spec.env[0].name: Invalid value: \"1BAD\": spec.env[0].name in body should match");
	expect_refused("env-dup", spec_json("{\"runtime\":\"python\",\"env\":[{\"name\":\"A\"},{\"name\":\"A\"}]}"),
	    "spec.env[1]: Duplicate value: {\"name\":\"A\"}");
	expect_refused("output-big", spec_json("{\"runtime\":\"python\",\"output\":{\"maxBytes\":1048577}}"),
	    "spec.output.maxBytes: Invalid value: 1048577: spec.output.maxBytes in body should be less than or equal to 1048576");
	expect_refused("output-zero", spec_json("{\"runtime\":\"python\",\"output\":{\"maxBytes\":0}}"),
	    "spec.output.maxBytes: Invalid value: 0: spec.output.maxBytes in body should be greater than or equal to 1");
	expect_refused("ttl-negative", spec_json("{\"runtime\":\"python\",\"ttlSecondsAfterFinished\":-1}"),
	    "spec.ttlSecondsAfterFinished: Invalid value: -1: spec.ttlSecondsAfterFinished in body should be greater than or equal to 0");
	expect_refused("memory-words", spec_json("{\"runtime\":\"python\",\"resources\":{\"memory\":\"lots\"}}"),
	    "spec.resources.memory: Invalid value: \"lots\": must be a positive quantity such as 256Mi");
	expect_refused("cpu-zero", spec_json("{\"runtime\":\"python\",\"resources\":{\"cpu\":\"0\"}}"),
	    "spec.resources.cpu: Invalid value: \"0\": must be a positive quantity such as 500m or 1");
	n += (size_t)snprintf(args + n, sizeof(args) - n, "{\"runtime\":\"python\",\"args\":[");
	for (int i = 0; i < 65; i++)
		n += (size_t)snprintf(args + n, sizeof(args) - n, "%s\"a\"", i ? "," : "");
	snprintf(args + n, sizeof(args) - n, "]}");
	expect_refused("args-many", spec_json(args), "spec.args: Too many: 65: must have at most 64 items");
	expect_refused("cancel-string", spec_json("{\"runtime\":\"python\",\"cancel\":\"yes\"}"),
	    "spec.cancel: Invalid value: \"string\": spec.cancel in body must be of type boolean");

	/*
	 * Sizes are bytes of UTF-8 (the README says KiB), where the schema's
	 * maxLength counts characters: 'é' is 2 bytes, '😀' 4. The CRD's
	 * size(bytes(x)) rules, the CLI and the pod builder agree. (The
	 * server quotes the whole value before the rule's message, past what
	 * k8s_error keeps: "Invalid value" on a create is the bytes rule, the
	 * only other rule on these fields being immutability.)
	 */
	json_decref(admit("source-utf8-at-cap", spec_with("source", filler_utf8(131072, "é"))));
	expect_refused("source-utf8-big", spec_with("source", filler_utf8(131073, "é")),
	    "spec.source: Invalid value: \"éé");
	expect_refused("stdin-utf8-big", spec_with("stdin", filler_utf8(65537, "😀")),
	    "spec.stdin: Invalid value: \"😀😀");
	spec = spec_json("{\"runtime\":\"bash\",\"files\":[{\"path\":\"a\"},{\"path\":\"b\"}]}");
	json_object_set_new(json_array_get(json_object_get(spec, "files"), 0), "content", filler_utf8(65536, "é"));
	json_object_set_new(json_array_get(json_object_get(spec, "files"), 1), "content", filler_utf8(65537, "é"));
	expect_refused("files-utf8-big", spec, "spec.files: Invalid value: files may hold at most 262144 bytes in all");
	spec = spec_json("{\"runtime\":\"python\",\"files\":[{\"content\":\"x\"}]}");
	json_object_set_new(json_array_get(json_object_get(spec, "files"), 0), "path", filler_utf8(128, "é"));
	expect_refused("path-utf8-long", spec,
	    "spec.files[0].path: Invalid value: \"éé");
	spec = spec_json("{\"runtime\":\"python\",\"files\":[{\"content\":\"x\"}]}");
	json_object_set_new(json_array_get(json_object_get(spec, "files"), 0), "path", filler(256, 'p'));
	expect_refused("path-long", spec, "spec.files[0].path: Too long: may not be more than 255 bytes");
	expect_refused("path-trailing-slash", spec_json("{\"runtime\":\"python\",\"files\":[{\"path\":\"lib/\",\"content\":\"x\"}]}"),
	    "spec.files[0].path: Invalid value: \"lib/\": must not hold empty segments, a trailing '/' or control characters");
	expect_refused("path-control", spec_json("{\"runtime\":\"python\",\"files\":[{\"path\":\"a\\u0001b\",\"content\":\"x\"}]}"),
	    "spec.files[0].path: Invalid value: \"a\\x01b\": must not hold empty segments, a trailing '/' or control characters");
	spec = spec_with("files", json_pack("[{s:o, s:s}]", "path", json_stringn("a\0b", 3),
	    "content", "x"));
	expect_refused("path-nul", spec,
	    "spec.files[0].path: Invalid value: \"a\\x00b\": must not hold empty segments, a trailing '/' or control characters");
	n = (size_t)snprintf(args, sizeof(args), "{\"runtime\":\"python\",\"files\":[");
	for (int i = 0; i < 65; i++)
		n += (size_t)snprintf(args + n, sizeof(args) - n, "%s{\"path\":\"f%d\",\"content\":\"\"}",
		    i ? "," : "", i);
	snprintf(args + n, sizeof(args) - n, "]}");
	expect_refused("files-many", spec_json(args), "spec.files: Too many: 65: must have at most 64 items");
	spec = spec_with("args", json_array());
	json_array_append_new(json_object_get(spec, "args"), filler_utf8(2049, "é"));
	expect_refused("arg-utf8-long", spec,
	    "spec.args[0]: Invalid value: \"éé");
	spec = spec_with("env", json_pack("[{s:s, s:o}]", "name", "BIG", "value", filler_utf8(16385, "é")));
	expect_refused("env-utf8-long", spec,
	    "spec.env[0].value: Invalid value: \"éé");
	spec = spec_with("env", json_pack("[{s:s, s:o}]", "name", "BIG", "value", filler(32769, 'v')));
	expect_refused("env-long", spec, "spec.env[0].value: Too long: may not be more than 32768 bytes");
	expect_refused("ttl-big", spec_json("{\"runtime\":\"python\",\"ttlSecondsAfterFinished\":2592001}"),
	    "spec.ttlSecondsAfterFinished: Invalid value: 2592001: spec.ttlSecondsAfterFinished in body should be less than or equal to 2592000");
	json_decref(admit("ttl-max", spec_json("{\"runtime\":\"python\",\"ttlSecondsAfterFinished\":2592000}")));
	expect_refused("image-long", spec_with("image", filler(513, 'i')),
	    "spec.image: Too long: may not be more than 512 bytes");
	expect_refused("image-utf8-long", spec_with("image", filler_utf8(257, "é")),
	    "spec.image: Invalid value: \"éé");
	json_decref(admit("image", spec_json("{\"runtime\":\"python\",\"image\":\"registry.example/x:1\"}")));
}

static void
test_spec_immutable_cancel_one_way(void **state)
{
	struct k8s_patch_opts merge = { .type = K8S_PATCH_MERGE };
	struct k8s_error err;
	json_t *p;

	(void)state;
	json_decref(admit("imm", spec_json("{\"runtime\":\"python\",\"source\":\"print(1)\"}")));
	p = spec_json("{\"spec\":{\"source\":\"print(2)\"}}");
	assert_int_equal(k8s_patch(c, &cx, ns, "imm", &merge, p, NULL, &err), K8S_EHTTP);
	assert_int_equal(err.http_status, 422);
	assert_non_null(strstr(err.message, "spec.source: Invalid value: \"print(2)\": is immutable"));
	json_decref(p);
	p = spec_json("{\"spec\":{\"timeoutSeconds\":60}}");
	assert_int_equal(k8s_patch(c, &cx, ns, "imm", &merge, p, NULL, &err), K8S_EHTTP);
	assert_non_null(strstr(err.message, "spec.timeoutSeconds: Invalid value: 60: is immutable"));
	json_decref(p);
	p = spec_json("{\"spec\":{\"stdin\":\"sneaky\"}}");
	assert_int_equal(k8s_patch(c, &cx, ns, "imm", &merge, p, NULL, &err), K8S_EHTTP);
	assert_non_null(strstr(err.message, "spec: Invalid value: the spec is immutable after creation, except spec.cancel"));
	json_decref(p);
	/* cancel: false -> true is the one change allowed... */
	p = spec_json("{\"spec\":{\"cancel\":true}}");
	assert_int_equal(k8s_patch(c, &cx, ns, "imm", &merge, p, NULL, &err), 0);
	json_decref(p);
	/* ...and it cannot be taken back, by false or by removal. */
	p = spec_json("{\"spec\":{\"cancel\":false}}");
	assert_int_equal(k8s_patch(c, &cx, ns, "imm", &merge, p, NULL, &err), K8S_EHTTP);
	assert_non_null(strstr(err.message, "spec: Invalid value: spec.cancel cannot be unset once true"));
	json_decref(p);
	p = spec_json("{\"spec\":{\"cancel\":null}}");
	assert_int_equal(k8s_patch(c, &cx, ns, "imm", &merge, p, NULL, &err), K8S_EHTTP);
	assert_non_null(strstr(err.message, "spec.cancel cannot be unset once true"));
	json_decref(p);
}

static void
test_status_subresource(void **state)
{
	struct k8s_patch_opts st = { .type = K8S_PATCH_MERGE, .subresource = "status" };
	struct k8s_patch_opts merge = { .type = K8S_PATCH_MERGE };
	struct k8s_error err;
	json_t *p, *out;
	char cmd[2048], line[512];
	FILE *f;
	int rc;

	(void)state;
	json_decref(admit("st", spec_json("{\"runtime\":\"python\",\"source\":\"print(1)\"}")));
	/* Status through the main resource is ignored... */
	p = spec_json("{\"status\":{\"phase\":\"Succeeded\"}}");
	assert_int_equal(k8s_patch(c, &cx, ns, "st", &merge, p, &out, &err), 0);
	assert_null(json_object_get(out, "status"));
	json_decref(out);
	json_decref(p);
	/* ...and validated through /status. */
	p = spec_json("{\"status\":{\"phase\":\"Exploded\"}}");
	assert_int_equal(k8s_patch(c, &cx, ns, "st", &st, p, NULL, &err), K8S_EHTTP);
	assert_non_null(strstr(err.message, "status.phase: Unsupported value: \"Exploded\""));
	json_decref(p);
	p = spec_json("{\"status\":{\"phase\":\"Succeeded\",\"reason\":\"Completed\",\"exitCode\":0,"
	    "\"durationMillis\":1234,\"stdout\":\"1\\n\",\"codeSha256\":"
	    "\"6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d\","
	    "\"conditions\":[{\"type\":\"Complete\",\"status\":\"True\",\"reason\":\"Completed\","
	    "\"lastTransitionTime\":\"2026-11-23T01:00:00Z\",\"observedGeneration\":1}]}}");
	assert_int_equal(k8s_patch(c, &cx, ns, "st", &st, p, &out, &err), 0);
	assert_string_equal(json_string_value(json_object_get(json_object_get(out, "status"), "phase")), "Succeeded");
	json_decref(out);
	json_decref(p);

	/* What kubectl users see: the printer columns, and wait on Complete. */
	snprintf(cmd, sizeof(cmd), "%s --kubeconfig %s -n %s get cx st 2>&1",
	    it_env("KUBECTL"), it_env("KUBECONFIG_ADMIN"), ns);
	f = popen(cmd, "r");
	assert_non_null(fgets(line, sizeof(line), f));
	{
		char a[6][16];

		assert_int_equal(sscanf(line, "%15s %15s %15s %15s %15s %15s", a[0], a[1], a[2], a[3], a[4], a[5]), 6);
		assert_string_equal(a[0], "NAME");
		assert_string_equal(a[1], "RUNTIME");
		assert_string_equal(a[2], "PHASE");
		assert_string_equal(a[3], "EXIT");
		assert_string_equal(a[4], "DURATION");
		assert_string_equal(a[5], "AGE");
		assert_non_null(fgets(line, sizeof(line), f));
		assert_int_equal(sscanf(line, "%15s %15s %15s %15s %15s", a[0], a[1], a[2], a[3], a[4]), 5);
		assert_string_equal(a[0], "st");
		assert_string_equal(a[1], "python");
		assert_string_equal(a[2], "Succeeded");
		assert_string_equal(a[3], "0");
		assert_string_equal(a[4], "1234");
	}
	assert_int_equal(pclose(f), 0);
	snprintf(cmd, sizeof(cmd), "%s --kubeconfig %s -n %s wait --for=condition=Complete cx/st --timeout=10s 2>&1",
	    it_env("KUBECTL"), it_env("KUBECONFIG_ADMIN"), ns);
	f = popen(cmd, "r");
	assert_non_null(fgets(line, sizeof(line), f));
	assert_string_equal(line, "codeexecution.airlock.dev/st condition met\n");
	rc = pclose(f);
	assert_int_equal(rc, 0);
	/* The short name and the category both reach it. */
	snprintf(cmd, sizeof(cmd), "%s --kubeconfig %s -n %s get airlock -o name 2>&1",
	    it_env("KUBECTL"), it_env("KUBECONFIG_ADMIN"), ns);
	f = popen(cmd, "r");
	rc = 0;
	while (fgets(line, sizeof(line), f)) {
		assert_int_equal(strncmp(line, "codeexecution.airlock.dev/", 26), 0);
		rc += strcmp(line, "codeexecution.airlock.dev/st\n") == 0;
	}
	assert_int_equal(rc, 1);
	assert_int_equal(pclose(f), 0);
}


/* A CodeExecutionPool named name with spec (JSON text): 0, or the error. */
static int
pool_create(const char *name, const char *spec, json_t **out,
    struct k8s_error *err)
{
	json_t *o = json_pack("{s:s, s:s, s:{s:s}, s:o}", "apiVersion",
	    "airlock.dev/v1alpha1", "kind", "CodeExecutionPool", "metadata",
	    "name", name, "spec", spec_json(spec));
	int rc = k8s_create(c, &pool_resource, ns, o, out, err);

	json_decref(o);
	return rc;
}

static void
pool_refused(const char *spec, const char *want)
{
	struct k8s_error err;

	assert_int_equal(pool_create("bad", spec, NULL, &err), K8S_EHTTP);
	assert_int_equal(err.http_status, 422);
	if (strstr(err.message, want) == NULL)
		fail_msg("pool %s: wanted '%s', got '%s'", spec, want, err.message);
}

/*
 * The pool's API: its default, its ranges and immutable fields named in
 * the refusal, the scale subresource (kubectl scale), and the status only
 * through /status. And status.startMode on an execution: Warm or Cold.
 */
static void
test_pool_api(void **state)
{
	struct k8s_patch_opts merge = { .type = K8S_PATCH_MERGE };
	struct k8s_patch_opts st = { .type = K8S_PATCH_MERGE, .subresource = "status" };
	struct k8s_patch_opts sc = { .type = K8S_PATCH_MERGE, .subresource = "scale" };
	struct k8s_error err;
	json_t *out = NULL, *p;
	char path[512];

	(void)state;
	assert_int_equal(pool_create("py", "{\"runtime\":\"python\"}", &out, &err), 0);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(out,
	    "spec"), "replicas")), 1);
	json_decref(out);
	pool_refused("{\"replicas\":1}", "spec.runtime: Required value");
	pool_refused("{\"runtime\":\"Py!\"}", "spec.runtime: Invalid value: \"Py!\"");
	pool_refused("{\"runtime\":\"python\",\"replicas\":-1}",
	    "spec.replicas: Invalid value: -1: spec.replicas in body should be greater than or equal to 0");
	pool_refused("{\"runtime\":\"python\",\"replicas\":65}",
	    "spec.replicas: Invalid value: 65: spec.replicas in body should be less than or equal to 64");
	pool_refused("{\"runtime\":\"python\",\"resources\":{\"cpu\":\"0\"}}",
	    "spec.resources.cpu: Invalid value: \"0\": must be a positive quantity such as 500m or 1");
	pool_refused("{\"runtime\":\"python\",\"resources\":{\"memory\":\"lots\"}}",
	    "spec.resources.memory: Invalid value: \"lots\": must be a positive quantity such as 256Mi");
	/* runtime and resources are fixed; replicas is not. */
	p = spec_json("{\"spec\":{\"runtime\":\"bash\"}}");
	assert_int_equal(k8s_patch(c, &pool_resource, ns, "py", &merge, p, NULL, &err), K8S_EHTTP);
	assert_non_null(strstr(err.message, "spec.runtime: Invalid value: \"bash\": is immutable"));
	json_decref(p);
	p = spec_json("{\"spec\":{\"resources\":{\"cpu\":\"1\"}}}");
	assert_int_equal(k8s_patch(c, &pool_resource, ns, "py", &merge, p, NULL, &err), K8S_EHTTP);
	assert_non_null(strstr(err.message,
	    "spec.resources cannot be added or removed after creation"));
	json_decref(p);
	p = spec_json("{\"spec\":{\"replicas\":3}}");
	assert_int_equal(k8s_patch(c, &pool_resource, ns, "py", &merge, p, &out, &err), 0);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(out,
	    "spec"), "replicas")), 3);
	json_decref(out);
	json_decref(p);
	/* Scale: reads spec.replicas, writes it. */
	snprintf(path, sizeof(path), "/apis/airlock.dev/v1alpha1/namespaces/%s/"
	    "codeexecutionpools/py/scale", ns);
	p = spec_json("{\"spec\":{\"replicas\":5}}");
	assert_int_equal(k8s_patch(c, &pool_resource, ns, "py", &sc, p, &out, &err), 0);
	assert_string_equal(json_string_value(json_object_get(out, "kind")), "Scale");
	assert_int_equal(json_integer_value(json_object_get(json_object_get(out,
	    "spec"), "replicas")), 5);
	json_decref(out);
	json_decref(p);
	assert_int_equal(k8s_get(c, &pool_resource, ns, "py", &out, &err), 0);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(out,
	    "spec"), "replicas")), 5);
	json_decref(out);
	/* Status: ignored through the main resource, checked through /status. */
	p = spec_json("{\"status\":{\"readyReplicas\":2}}");
	assert_int_equal(k8s_patch(c, &pool_resource, ns, "py", &merge, p, &out, &err), 0);
	assert_null(json_object_get(out, "status"));
	json_decref(out);
	json_decref(p);
	p = spec_json("{\"status\":{\"readyReplicas\":-2}}");
	assert_int_equal(k8s_patch(c, &pool_resource, ns, "py", &st, p, NULL, &err), K8S_EHTTP);
	assert_non_null(strstr(err.message, "status.readyReplicas: Invalid value: -2"));
	json_decref(p);
	/* An execution's startMode: Warm or Cold, nothing else. */
	json_decref(admit("mode", spec_json("{\"runtime\":\"python\"}")));
	p = spec_json("{\"status\":{\"startMode\":\"Hot\"}}");
	assert_int_equal(k8s_patch(c, &cx, ns, "mode", &st, p, NULL, &err), K8S_EHTTP);
	assert_non_null(strstr(err.message, "status.startMode: Unsupported value: \"Hot\""));
	json_decref(p);
	p = spec_json("{\"status\":{\"startMode\":\"Warm\"}}");
	assert_int_equal(k8s_patch(c, &cx, ns, "mode", &st, p, NULL, &err), 0);
	json_decref(p);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_identity),
		cmocka_unit_test(test_valid_and_defaults),
		cmocka_unit_test(test_invalid_refused),
		cmocka_unit_test(test_spec_immutable_cancel_one_way),
		cmocka_unit_test(test_status_subresource),
		cmocka_unit_test(test_pool_api),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
