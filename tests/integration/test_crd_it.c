/*
 * Integration: the CodeExecution, CodeExecutionPool and CodeSession CRDs
 * (crds/) on the real kube-apiserver. Installed by server-side apply from the YAML files
 * themselves; then valid objects are admitted with their defaults, and
 * invalid ones refused with the field named, including updates to the
 * immutable spec; the status and scale subresources, and what kubectl
 * shows.
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
/* Sessions have no resource of execution/ yet (docs/sessions.md). */
static const struct k8s_resource cxs = { "airlock.dev", "v1alpha1",
    "codesessions", 1 };
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
		if (strncmp(line, "codeexecution.airlock.dev/", 26) != 0 &&
		    strncmp(line, "codeexecutionpool.airlock.dev/", 30) != 0)
			fail_msg("get airlock: not an Airlock object: %s", line);
		rc += strcmp(line, "codeexecution.airlock.dev/st\n") == 0;
	}
	assert_int_equal(rc, 1);
	assert_int_equal(pclose(f), 0);
}

/*
 * An object of res (a CodeExecutionPool, a CodeSession, or a
 * CodeExecution made without the CLI's check) named name with spec (JSON
 * text): 0, or the error.
 */
static int
kind_create(const struct k8s_resource *res, const char *name, const char *spec,
    json_t **out, struct k8s_error *err)
{
	const char *kind = res == &pool_resource ? "CodeExecutionPool" :
	    res == &cxs ? "CodeSession" : "CodeExecution";
	json_t *o = json_pack("{s:s, s:s, s:{s:s}, s:o}", "apiVersion",
	    "airlock.dev/v1alpha1", "kind", kind, "metadata",
	    "name", name, "spec", spec_json(spec));
	int rc = k8s_create(c, res, ns, o, out, err);

	json_decref(o);
	return rc;
}

/* An object of res with spec is refused (422 Invalid), the message holding want. */
static void
kind_refused(const struct k8s_resource *res, const char *spec, const char *want)
{
	struct k8s_error err;
	int rc = kind_create(res, "bad", spec, NULL, &err);

	if (rc == 0)
		fail_msg("%s %s: admitted, expected '%s'", res->plural, spec, want);
	assert_int_equal(rc, K8S_EHTTP);
	assert_int_equal(err.http_status, 422);
	assert_string_equal(err.reason, "Invalid");
	if (strstr(err.message, want) == NULL)
		fail_msg("%s %s: wanted '%s', got '%s'", res->plural, spec, want, err.message);
}

/* The object's spec as created from spec, compared whole to want (JSON text). */
static void
kind_admitted(const struct k8s_resource *res, const char *name, const char *spec,
    const char *want)
{
	struct k8s_error err;
	json_t *out, *w = spec_json(want);

	if (kind_create(res, name, spec, &out, &err) != 0)
		fail_msg("%s %s refused: %s", res->plural, spec, err.message);
	if (!json_equal(json_object_get(out, "spec"), w))
		fail_msg("%s %s: spec %s, wanted %s", res->plural, spec,
		    json_dumps(json_object_get(out, "spec"), JSON_SORT_KEYS), want);
	json_decref(w);
	json_decref(out);
}

#define pool_refused(spec, want)	kind_refused(&pool_resource, spec, want)
#define pool_admitted(name, spec, want)	kind_admitted(&pool_resource, name, spec, want)

/*
 * A merge patch (JSON text) to pool or execution name, on the object or
 * (sub non-NULL) its subresource, is refused with want in the message.
 */
static void
patch_refused(const struct k8s_resource *res, const char *name,
    const char *sub, const char *patch, const char *want)
{
	struct k8s_patch_opts o = { .type = K8S_PATCH_MERGE, .subresource = sub };
	struct k8s_error err;
	json_t *p = spec_json(patch);
	int rc = k8s_patch(c, res, ns, name, &o, p, NULL, &err);

	json_decref(p);
	if (rc == 0)
		fail_msg("%s %s: admitted, expected '%s'", name, patch, want);
	assert_int_equal(rc, K8S_EHTTP);
	assert_int_equal(err.http_status, 422);
	if (strstr(err.message, want) == NULL)
		fail_msg("%s %s: wanted '%s', got '%s'", name, patch, want, err.message);
}

/* The same patch admitted: the object as stored (new reference). */
static json_t *
patched(const struct k8s_resource *res, const char *name, const char *sub,
    const char *patch)
{
	struct k8s_patch_opts o = { .type = K8S_PATCH_MERGE, .subresource = sub };
	struct k8s_error err;
	json_t *p = spec_json(patch), *out;

	if (k8s_patch(c, res, ns, name, &o, p, &out, &err) != 0)
		fail_msg("%s %s: refused: %s", name, patch, err.message);
	json_decref(p);
	return out;
}

/* An integer at obj.a.b (-1 when absent). */
static json_int_t
int_at(json_t *obj, const char *a, const char *b)
{
	json_t *v = json_object_get(json_object_get(obj, a), b);

	return json_is_integer(v) ? json_integer_value(v) : -1;
}

/* The pool's stored spec.replicas. */
static json_int_t
pool_replicas(const char *name)
{
	struct k8s_error err;
	json_int_t n;
	json_t *o;

	if (k8s_get(c, &pool_resource, ns, name, &o, &err) != 0)
		fail_msg("get pool %s: %s", name, err.message);
	n = int_at(o, "spec", "replicas");
	json_decref(o);
	return n;
}

/* kubectl as the admin in the test's namespace: its stdout (caller frees). */
static char *
kubectl(const char *args)
{
	char cmd[2048], *out, *errs;
	int st;

	snprintf(cmd, sizeof(cmd), "'%s' --kubeconfig '%s' -n %s %s",
	    it_env("KUBECTL"), it_env("KUBECONFIG_ADMIN"), ns, args);
	st = it_sh(cmd, &out, &errs);
	if (st != 0)
		fail_msg("%s: exit %d: %s", cmd, st, errs);
	free(errs);
	return out;
}

/* The array at obj.key holds exactly the one string want. */
static void
only_string(json_t *obj, const char *key, const char *want)
{
	json_t *a = json_object_get(obj, key);

	assert_int_equal(json_array_size(a), 1);
	assert_string_equal(json_string_value(json_array_get(a, 0)), want);
}

/*
 * The pool CRD as installed: its names, scope, one version, the status
 * and scale subresources, the printer columns; and discovery, which
 * kubectl resolves "cxpool" and "airlock" from. And the execution's
 * Start column, after Duration, shown only by -o wide.
 */
static void
test_pool_identity(void **state)
{
	static const char *const cols[][4] = {	/* name, type, jsonPath, priority */
		{ "Runtime", "string", ".spec.runtime", NULL },
		{ "Desired", "integer", ".spec.replicas", NULL },
		{ "Ready", "integer", ".status.readyReplicas", NULL },
		/* -o wide: why not (PreloadFailed, issue 31). */
		{ "Reason", "string", ".status.conditions[?(@.type==\"Ready\")].reason", "1" },
		{ "Age", "date", ".metadata.creationTimestamp", NULL },
	};
	struct k8s_error err;
	json_t *crd, *sp, *names, *v, *sub, *col, *r, *disc;
	char path[256];
	size_t i;
	int seen = 0;

	(void)state;
	assert_int_equal(k8s_get(c, &crds, NULL, "codeexecutionpools.airlock.dev", &crd, &err), 0);
	sp = json_object_get(crd, "spec");
	names = json_object_get(sp, "names");
	assert_string_equal(json_string_value(json_object_get(sp, "group")), "airlock.dev");
	assert_string_equal(json_string_value(json_object_get(sp, "scope")), "Namespaced");
	assert_string_equal(json_string_value(json_object_get(names, "kind")), "CodeExecutionPool");
	assert_string_equal(json_string_value(json_object_get(names, "listKind")), "CodeExecutionPoolList");
	assert_string_equal(json_string_value(json_object_get(names, "plural")), "codeexecutionpools");
	assert_string_equal(json_string_value(json_object_get(names, "singular")), "codeexecutionpool");
	only_string(names, "shortNames", "cxpool");
	only_string(names, "categories", "airlock");
	assert_int_equal(json_array_size(json_object_get(sp, "versions")), 1);
	v = json_array_get(json_object_get(sp, "versions"), 0);
	assert_string_equal(json_string_value(json_object_get(v, "name")), "v1alpha1");
	assert_true(json_is_true(json_object_get(v, "served")));
	assert_true(json_is_true(json_object_get(v, "storage")));
	sub = json_object_get(v, "subresources");
	assert_true(json_is_object(json_object_get(sub, "status")));
	assert_int_equal(json_object_size(json_object_get(sub, "status")), 0);
	assert_string_equal(json_string_value(json_object_get(json_object_get(sub, "scale"),
	    "specReplicasPath")), ".spec.replicas");
	assert_string_equal(json_string_value(json_object_get(json_object_get(sub, "scale"),
	    "statusReplicasPath")), ".status.replicas");
	assert_null(json_object_get(json_object_get(sub, "scale"), "labelSelectorPath"));
	assert_int_equal(json_array_size(json_object_get(v, "additionalPrinterColumns")), 5);
	json_array_foreach(json_object_get(v, "additionalPrinterColumns"), i, col) {
		assert_string_equal(json_string_value(json_object_get(col, "name")), cols[i][0]);
		assert_string_equal(json_string_value(json_object_get(col, "type")), cols[i][1]);
		assert_string_equal(json_string_value(json_object_get(col, "jsonPath")), cols[i][2]);
		if (cols[i][3] == NULL)
			assert_null(json_object_get(col, "priority"));
		else
			assert_int_equal(json_integer_value(json_object_get(col, "priority")),
			    atoi(cols[i][3]));
	}
	json_decref(crd);

	/* The execution's Start column: after Duration, -o wide only. */
	assert_int_equal(k8s_get(c, &crds, NULL, "codeexecutions.airlock.dev", &crd, &err), 0);
	v = json_array_get(json_object_get(json_object_get(crd, "spec"), "versions"), 0);
	col = json_object_get(v, "additionalPrinterColumns");
	assert_int_equal(json_array_size(col), 6);
	assert_string_equal(json_string_value(json_object_get(json_array_get(col, 3), "name")), "Duration");
	col = json_array_get(col, 4);
	assert_string_equal(json_string_value(json_object_get(col, "name")), "Start");
	assert_string_equal(json_string_value(json_object_get(col, "type")), "string");
	assert_string_equal(json_string_value(json_object_get(col, "jsonPath")), ".status.startMode");
	assert_int_equal(json_integer_value(json_object_get(col, "priority")), 1);
	json_decref(crd);

	/* Discovery: what kubectl reads to resolve cxpool, airlock and scale. */
	snprintf(path, sizeof(path), "/apis/airlock.dev/v1alpha1");
	assert_int_equal(k8s_request(c, "GET", path, NULL, NULL, 0, NULL, &disc, &err), 0);
	json_array_foreach(json_object_get(disc, "resources"), i, r) {
		const char *n = json_string_value(json_object_get(r, "name"));

		if (strcmp(n, "codeexecutionpools") == 0) {
			seen |= 1;
			assert_string_equal(json_string_value(json_object_get(r, "kind")), "CodeExecutionPool");
			assert_string_equal(json_string_value(json_object_get(r, "singularName")), "codeexecutionpool");
			assert_true(json_is_true(json_object_get(r, "namespaced")));
			only_string(r, "shortNames", "cxpool");
			only_string(r, "categories", "airlock");
		} else if (strcmp(n, "codeexecutionpools/scale") == 0) {
			seen |= 2;
			assert_string_equal(json_string_value(json_object_get(r, "group")), "autoscaling");
			assert_string_equal(json_string_value(json_object_get(r, "version")), "v1");
			assert_string_equal(json_string_value(json_object_get(r, "kind")), "Scale");
		} else if (strcmp(n, "codeexecutionpools/status") == 0) {
			seen |= 4;
		}
	}
	assert_int_equal(seen, 7);
	json_decref(disc);
}

/*
 * A pool's spec: replicas defaults to 1 and runs 0 to 64; runtime as an
 * execution's; resources cpu and memory only, positive quantities. Each
 * refusal names its field.
 */
static void
test_pool_spec(void **state)
{
	char long_rt[128];

	(void)state;
	pool_admitted("py", "{\"runtime\":\"python\"}", "{\"runtime\":\"python\",\"replicas\":1}");
	pool_admitted("none", "{\"runtime\":\"node\",\"replicas\":0}", "{\"runtime\":\"node\",\"replicas\":0}");
	pool_admitted("most", "{\"runtime\":\"bash\",\"replicas\":64}", "{\"runtime\":\"bash\",\"replicas\":64}");
	pool_admitted("sized", "{\"runtime\":\"python\",\"resources\":{\"cpu\":\"500m\",\"memory\":268435456}}",
	    "{\"runtime\":\"python\",\"replicas\":1,\"resources\":{\"cpu\":\"500m\",\"memory\":268435456}}");
	/* cpu and memory only: a pool's sandboxes have no other resource. */
	pool_admitted("pruned", "{\"runtime\":\"python\",\"resources\":{\"cpu\":1,\"ephemeralStorage\":\"1Gi\"},\"image\":\"x\"}",
	    "{\"runtime\":\"python\",\"replicas\":1,\"resources\":{\"cpu\":1}}");

	pool_refused("{\"replicas\":1}", "spec.runtime: Required value");
	pool_refused("{\"runtime\":\"\"}",
	    "spec.runtime: Invalid value: \"\": spec.runtime in body should be at least 1 chars long");
	pool_refused("{\"runtime\":\"Py!\"}",
	    "spec.runtime: Invalid value: \"Py!\": spec.runtime in body should match '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'");
	pool_refused("{\"runtime\":\"-py\"}", "spec.runtime: Invalid value: \"-py\": spec.runtime in body should match");
	memset(long_rt, 'a', 64);
	long_rt[64] = '\0';
	{
		char spec[256];

		snprintf(spec, sizeof(spec), "{\"runtime\":\"%s\"}", long_rt);
		pool_refused(spec, "spec.runtime: Too long: may not be more than 63 bytes");
	}
	pool_refused("{\"runtime\":\"python\",\"replicas\":-1}",
	    "spec.replicas: Invalid value: -1: spec.replicas in body should be greater than or equal to 0");
	pool_refused("{\"runtime\":\"python\",\"replicas\":65}",
	    "spec.replicas: Invalid value: 65: spec.replicas in body should be less than or equal to 64");
	pool_refused("{\"runtime\":\"python\",\"replicas\":\"2\"}",
	    "spec.replicas: Invalid value: \"string\": spec.replicas in body must be of type integer");
	pool_refused("{\"runtime\":\"python\",\"resources\":{\"cpu\":\"0\"}}",
	    "spec.resources.cpu: Invalid value: \"0\": must be a positive quantity such as 500m or 1");
	pool_refused("{\"runtime\":\"python\",\"resources\":{\"cpu\":\"-1\"}}",
	    "spec.resources.cpu: Invalid value: \"-1\": must be a positive quantity such as 500m or 1");
	pool_refused("{\"runtime\":\"python\",\"resources\":{\"memory\":\"lots\"}}",
	    "spec.resources.memory: Invalid value: \"lots\": must be a positive quantity such as 256Mi");
	pool_refused("{\"runtime\":\"python\",\"resources\":{\"memory\":0}}",
	    "spec.resources.memory: Invalid value: 0: must be a positive quantity such as 256Mi");
}

/*
 * runtime and resources are fixed once made (a pool's sandboxes are
 * built from them); replicas is not. A refused change leaves the pool as
 * it was.
 */
static void
test_pool_immutable(void **state)
{
	struct k8s_error err;
	json_t *out;

	(void)state;
	pool_admitted("fixed", "{\"runtime\":\"python\",\"resources\":{\"cpu\":\"1\",\"memory\":\"512Mi\"}}",
	    "{\"runtime\":\"python\",\"replicas\":1,\"resources\":{\"cpu\":\"1\",\"memory\":\"512Mi\"}}");
	patch_refused(&pool_resource, "fixed", NULL, "{\"spec\":{\"runtime\":\"bash\"}}",
	    "spec.runtime: Invalid value: \"bash\": is immutable");
	patch_refused(&pool_resource, "fixed", NULL, "{\"spec\":{\"resources\":{\"cpu\":\"2\"}}}",
	    "spec.resources: Invalid value: is immutable");
	patch_refused(&pool_resource, "fixed", NULL, "{\"spec\":{\"resources\":{\"memory\":null}}}",
	    "spec.resources: Invalid value: is immutable");
	patch_refused(&pool_resource, "fixed", NULL, "{\"spec\":{\"resources\":null}}",
	    "spec: Invalid value: spec.resources cannot be added or removed after creation");
	pool_admitted("bare", "{\"runtime\":\"python\"}", "{\"runtime\":\"python\",\"replicas\":1}");
	patch_refused(&pool_resource, "bare", NULL, "{\"spec\":{\"resources\":{\"cpu\":\"1\"}}}",
	    "spec: Invalid value: spec.resources cannot be added or removed after creation");
	/* replicas changes, and only it. */
	out = patched(&pool_resource, "fixed", NULL, "{\"spec\":{\"replicas\":3}}");
	json_decref(out);
	assert_int_equal(k8s_get(c, &pool_resource, ns, "fixed", &out, &err), 0);
	{
		json_t *want = spec_json("{\"runtime\":\"python\",\"replicas\":3,"
		    "\"resources\":{\"cpu\":\"1\",\"memory\":\"512Mi\"}}");

		if (!json_equal(json_object_get(out, "spec"), want))
			fail_msg("fixed: spec %s", json_dumps(json_object_get(out, "spec"),
			    JSON_SORT_KEYS));
		json_decref(want);
	}
	assert_int_equal(int_at(out, "metadata", "generation"), 2);
	json_decref(out);
	pool_admitted("gone", "{\"runtime\":\"python\"}", "{\"runtime\":\"python\",\"replicas\":1}");
	out = patched(&pool_resource, "gone", NULL, "{\"spec\":{\"replicas\":0}}");
	assert_int_equal(int_at(out, "spec", "replicas"), 0);
	json_decref(out);
}

/*
 * The status only through /status (the controller's), validated there;
 * the scale subresource reads and writes spec.replicas and reports
 * status.replicas: kubectl scale works, and is held to 0-64.
 */
static void
test_pool_status_and_scale(void **state)
{
	struct k8s_error err;
	json_t *out, *scale;
	char path[512], *text, *reason;
	char a[6][16];
	int n;

	(void)state;
	pool_admitted("sc", "{\"runtime\":\"python\"}", "{\"runtime\":\"python\",\"replicas\":1}");
	/* Status through the main resource is ignored... */
	out = patched(&pool_resource, "sc", NULL, "{\"status\":{\"replicas\":2,\"readyReplicas\":2}}");
	assert_null(json_object_get(out, "status"));
	json_decref(out);
	/* ...and taken, checked, through /status. */
	out = patched(&pool_resource, "sc", "status", "{\"status\":{\"observedGeneration\":1,"
	    "\"replicas\":2,\"readyReplicas\":1,\"conditions\":[{\"type\":\"Ready\",\"status\":\"False\","
	    "\"reason\":\"Filling\",\"message\":\"1 of 2 ready\",\"observedGeneration\":1,"
	    "\"lastTransitionTime\":\"2026-11-23T01:00:00Z\"}]}}");
	assert_int_equal(int_at(out, "status", "replicas"), 2);
	assert_int_equal(int_at(out, "status", "readyReplicas"), 1);
	assert_int_equal(int_at(out, "spec", "replicas"), 1);
	json_decref(out);
	patch_refused(&pool_resource, "sc", "status", "{\"status\":{\"readyReplicas\":-2}}",
	    "status.readyReplicas: Invalid value: -2: readyReplicas in body should be greater than or equal to 0");
	patch_refused(&pool_resource, "sc", "status", "{\"status\":{\"replicas\":-1}}",
	    "status.replicas: Invalid value: -1: replicas in body should be greater than or equal to 0");
	patch_refused(&pool_resource, "sc", "status", "{\"status\":{\"conditions\":[{\"type\":\"Other\","
	    "\"status\":\"True\",\"lastTransitionTime\":\"2026-11-23T01:00:00Z\"}]}}",
	    "status.conditions[0].type: Unsupported value: \"Other\": supported values: \"Ready\"");
	patch_refused(&pool_resource, "sc", "status", "{\"status\":{\"conditions\":[{\"type\":\"Ready\","
	    "\"status\":\"Maybe\",\"lastTransitionTime\":\"2026-11-23T01:00:00Z\"}]}}",
	    "status.conditions[0].status: Unsupported value: \"Maybe\": supported values: \"True\", \"False\", \"Unknown\"");
	patch_refused(&pool_resource, "sc", "status", "{\"status\":{\"conditions\":[{\"type\":\"Ready\","
	    "\"status\":\"True\"}]}}", "status.conditions[0].lastTransitionTime: Required value");
	patch_refused(&pool_resource, "sc", "status", "{\"status\":{\"conditions\":["
	    "{\"type\":\"Ready\",\"status\":\"True\",\"lastTransitionTime\":\"2026-11-23T01:00:00Z\"},"
	    "{\"type\":\"Ready\",\"status\":\"False\",\"lastTransitionTime\":\"2026-11-23T01:00:00Z\"}]}}",
	    "status.conditions[1]: Duplicate value: {\"type\":\"Ready\"}");
	reason = malloc(1200);
	n = snprintf(reason, 1200, "{\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\","
	    "\"lastTransitionTime\":\"2026-11-23T01:00:00Z\",\"reason\":\"");
	memset(reason + n, 'r', 1025);
	snprintf(reason + n + 1025, 1200 - (size_t)n - 1025, "\"}]}}");
	patch_refused(&pool_resource, "sc", "status", reason,
	    "status.conditions[0].reason: Too long: may not be more than 1024 bytes");
	free(reason);

	/* GET .../scale: spec.replicas, and status.replicas from the status. */
	snprintf(path, sizeof(path), "/apis/airlock.dev/v1alpha1/namespaces/%s/"
	    "codeexecutionpools/sc/scale", ns);
	assert_int_equal(k8s_request(c, "GET", path, NULL, NULL, 0, NULL, &scale, &err), 0);
	assert_string_equal(json_string_value(json_object_get(scale, "kind")), "Scale");
	assert_string_equal(json_string_value(json_object_get(scale, "apiVersion")), "autoscaling/v1");
	assert_int_equal(int_at(scale, "spec", "replicas"), 1);
	assert_int_equal(int_at(scale, "status", "replicas"), 2);
	/* PUT .../scale sets spec.replicas... */
	json_object_set_new(json_object_get(scale, "spec"), "replicas", json_integer(4));
	assert_int_equal(k8s_update(c, &pool_resource, ns, "sc", "scale", scale, &out, &err), 0);
	assert_int_equal(int_at(out, "spec", "replicas"), 4);
	json_decref(out);
	json_decref(scale);
	assert_int_equal(pool_replicas("sc"), 4);
	/* ...as does a PATCH, held to the same bounds. */
	out = patched(&pool_resource, "sc", "scale", "{\"spec\":{\"replicas\":5}}");
	assert_string_equal(json_string_value(json_object_get(out, "kind")), "Scale");
	assert_int_equal(int_at(out, "spec", "replicas"), 5);
	json_decref(out);
	assert_int_equal(pool_replicas("sc"), 5);
	patch_refused(&pool_resource, "sc", "scale", "{\"spec\":{\"replicas\":65}}",
	    "spec.replicas: Invalid value: 65: spec.replicas in body should be less than or equal to 64");
	assert_int_equal(pool_replicas("sc"), 5);

	/* What kubectl users do and see. */
	text = kubectl("scale cxpool sc --replicas=2");
	assert_string_equal(text, "codeexecutionpool.airlock.dev/sc scaled\n");
	free(text);
	assert_int_equal(pool_replicas("sc"), 2);
	text = kubectl("get cxpool sc");
	assert_int_equal(sscanf(text, "%15s %15s %15s %15s %15s", a[0], a[1], a[2], a[3], a[4]), 5);
	assert_string_equal(a[0], "NAME");
	assert_string_equal(a[1], "RUNTIME");
	assert_string_equal(a[2], "DESIRED");
	assert_string_equal(a[3], "READY");
	assert_string_equal(a[4], "AGE");
	assert_non_null(strchr(text, '\n'));
	assert_int_equal(sscanf(strchr(text, '\n') + 1, "%15s %15s %15s %15s", a[0], a[1], a[2], a[3]), 4);
	assert_string_equal(a[0], "sc");
	assert_string_equal(a[1], "python");
	assert_string_equal(a[2], "2");
	assert_string_equal(a[3], "1");
	free(text);
	/* -o wide adds the Ready condition's reason. */
	text = kubectl("get cxpool sc -o wide");
	assert_int_equal(sscanf(text, "%15s %15s %15s %15s %15s %15s", a[0], a[1], a[2], a[3],
	    a[4], a[5]), 6);
	assert_string_equal(a[4], "REASON");
	assert_string_equal(a[5], "AGE");
	free(text);
	text = kubectl("get airlock -o name");
	assert_non_null(strstr(text, "codeexecutionpool.airlock.dev/sc\n"));
	free(text);
}

/* An execution's status.startMode: Warm or Cold, through /status only. */
static void
test_start_mode(void **state)
{
	json_t *out;
	char *text, a[7][16];

	(void)state;
	json_decref(admit("mode", spec_json("{\"runtime\":\"python\"}")));
	patch_refused(&cx, "mode", "status", "{\"status\":{\"startMode\":\"Hot\"}}",
	    "status.startMode: Unsupported value: \"Hot\": supported values: \"Warm\", \"Cold\", \"Session\"");
	patch_refused(&cx, "mode", "status", "{\"status\":{\"startMode\":\"warm\"}}",
	    "status.startMode: Unsupported value: \"warm\"");
	out = patched(&cx, "mode", NULL, "{\"status\":{\"startMode\":\"Warm\"}}");
	assert_null(json_object_get(out, "status"));
	json_decref(out);
	out = patched(&cx, "mode", "status", "{\"status\":{\"startMode\":\"Warm\"}}");
	assert_string_equal(json_string_value(json_object_get(json_object_get(out, "status"),
	    "startMode")), "Warm");
	json_decref(out);
	out = patched(&cx, "mode", "status", "{\"status\":{\"phase\":\"Succeeded\",\"exitCode\":0,"
	    "\"durationMillis\":12,\"startMode\":\"Cold\"}}");
	assert_string_equal(json_string_value(json_object_get(json_object_get(out, "status"),
	    "startMode")), "Cold");
	json_decref(out);
	/* kubectl get cx -o wide shows it after Duration. */
	text = kubectl("get cx mode -o wide");
	assert_int_equal(sscanf(text, "%15s %15s %15s %15s %15s %15s %15s", a[0], a[1], a[2],
	    a[3], a[4], a[5], a[6]), 7);
	assert_string_equal(a[4], "DURATION");
	assert_string_equal(a[5], "START");
	assert_string_equal(a[6], "AGE");
	assert_non_null(strchr(text, '\n'));
	assert_int_equal(sscanf(strchr(text, '\n') + 1, "%15s %15s %15s %15s %15s %15s",
	    a[0], a[1], a[2], a[3], a[4], a[5]), 6);
	assert_string_equal(a[0], "mode");
	assert_string_equal(a[2], "Succeeded");
	assert_string_equal(a[4], "12");
	assert_string_equal(a[5], "Cold");
	free(text);
}

/*
 * The session CRD as installed: its names, scope, one version, the status
 * subresource and no other, the printer columns (Reason and Pod with -o
 * wide only); discovery resolves cxs.
 */
static void
test_session_identity(void **state)
{
	static const char *const cols[][4] = {	/* name, type, jsonPath, priority */
		{ "Runtime", "string", ".spec.runtime", NULL },
		{ "Phase", "string", ".status.phase", NULL },
		{ "Executions", "integer", ".status.executions", NULL },
		{ "Reason", "string", ".status.reason", "1" },
		{ "Pod", "string", ".status.podName", "1" },
		{ "Age", "date", ".metadata.creationTimestamp", NULL },
	};
	struct k8s_error err;
	json_t *crd, *sp, *names, *v, *sub, *col, *r, *disc;
	size_t i;
	int seen = 0;

	(void)state;
	assert_int_equal(k8s_get(c, &crds, NULL, "codesessions.airlock.dev", &crd, &err), 0);
	sp = json_object_get(crd, "spec");
	names = json_object_get(sp, "names");
	assert_string_equal(json_string_value(json_object_get(sp, "group")), "airlock.dev");
	assert_string_equal(json_string_value(json_object_get(sp, "scope")), "Namespaced");
	assert_string_equal(json_string_value(json_object_get(names, "kind")), "CodeSession");
	assert_string_equal(json_string_value(json_object_get(names, "listKind")), "CodeSessionList");
	assert_string_equal(json_string_value(json_object_get(names, "plural")), "codesessions");
	assert_string_equal(json_string_value(json_object_get(names, "singular")), "codesession");
	only_string(names, "shortNames", "cxs");
	only_string(names, "categories", "airlock");
	assert_int_equal(json_array_size(json_object_get(sp, "versions")), 1);
	v = json_array_get(json_object_get(sp, "versions"), 0);
	assert_string_equal(json_string_value(json_object_get(v, "name")), "v1alpha1");
	assert_true(json_is_true(json_object_get(v, "served")));
	assert_true(json_is_true(json_object_get(v, "storage")));
	sub = json_object_get(v, "subresources");
	assert_int_equal(json_object_size(sub), 1);
	assert_true(json_is_object(json_object_get(sub, "status")));
	assert_int_equal(json_array_size(json_object_get(v, "additionalPrinterColumns")), 6);
	json_array_foreach(json_object_get(v, "additionalPrinterColumns"), i, col) {
		assert_string_equal(json_string_value(json_object_get(col, "name")), cols[i][0]);
		assert_string_equal(json_string_value(json_object_get(col, "type")), cols[i][1]);
		assert_string_equal(json_string_value(json_object_get(col, "jsonPath")), cols[i][2]);
		if (cols[i][3] == NULL)
			assert_null(json_object_get(col, "priority"));
		else
			assert_int_equal(json_integer_value(json_object_get(col, "priority")), 1);
	}
	json_decref(crd);

	assert_int_equal(k8s_request(c, "GET", "/apis/airlock.dev/v1alpha1", NULL, NULL, 0,
	    NULL, &disc, &err), 0);
	json_array_foreach(json_object_get(disc, "resources"), i, r) {
		const char *n = json_string_value(json_object_get(r, "name"));

		if (strcmp(n, "codesessions") == 0) {
			seen |= 1;
			assert_string_equal(json_string_value(json_object_get(r, "kind")), "CodeSession");
			assert_true(json_is_true(json_object_get(r, "namespaced")));
			only_string(r, "shortNames", "cxs");
			only_string(r, "categories", "airlock");
		} else if (strcmp(n, "codesessions/status") == 0) {
			seen |= 2;
		} else if (strcmp(n, "codesessions/scale") == 0) {
			seen |= 4;
		}
	}
	assert_int_equal(seen, 3);
	json_decref(disc);
}

/*
 * A session's spec: the defaults (idle 600 s, lifetime 3600 s, TTL 3600
 * s) read back; the bounds refused with the field named.
 */
static void
test_session_spec(void **state)
{
	(void)state;
	kind_admitted(&cxs, "minimal", "{\"runtime\":\"python\"}",
	    "{\"runtime\":\"python\",\"idleTimeoutSeconds\":600,\"maxLifetimeSeconds\":3600,"
	    "\"ttlSecondsAfterFinished\":3600}");
	kind_admitted(&cxs, "edges", "{\"runtime\":\"python-data\",\"idleTimeoutSeconds\":10,"
	    "\"maxLifetimeSeconds\":86400,\"ttlSecondsAfterFinished\":0,\"close\":false,"
	    "\"resources\":{\"cpu\":\"500m\",\"memory\":\"1Gi\",\"ephemeralStorage\":\"64Mi\"},"
	    "\"files\":[{\"path\":\"data.csv\",\"content\":\"a,b\\n1,2\\n\"}]}",
	    "{\"runtime\":\"python-data\",\"idleTimeoutSeconds\":10,\"maxLifetimeSeconds\":86400,"
	    "\"ttlSecondsAfterFinished\":0,\"close\":false,"
	    "\"resources\":{\"cpu\":\"500m\",\"memory\":\"1Gi\",\"ephemeralStorage\":\"64Mi\"},"
	    "\"files\":[{\"path\":\"data.csv\",\"content\":\"a,b\\n1,2\\n\"}]}");

	kind_refused(&cxs, "{\"idleTimeoutSeconds\":60}", "spec.runtime: Required value");
	kind_refused(&cxs, "{\"runtime\":\"Py!\"}",
	    "spec.runtime: Invalid value: \"Py!\": spec.runtime in body should match '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'");
	kind_refused(&cxs, "{\"runtime\":\"python\",\"idleTimeoutSeconds\":5}",
	    "spec.idleTimeoutSeconds: Invalid value: 5: spec.idleTimeoutSeconds in body should be greater than or equal to 10");
	kind_refused(&cxs, "{\"runtime\":\"python\",\"idleTimeoutSeconds\":90000}",
	    "spec.idleTimeoutSeconds: Invalid value: 90000: spec.idleTimeoutSeconds in body should be less than or equal to 86400");
	kind_refused(&cxs, "{\"runtime\":\"python\",\"maxLifetimeSeconds\":0}",
	    "spec.maxLifetimeSeconds: Invalid value: 0: spec.maxLifetimeSeconds in body should be greater than or equal to 10");
	kind_refused(&cxs, "{\"runtime\":\"python\",\"maxLifetimeSeconds\":86401}",
	    "spec.maxLifetimeSeconds: Invalid value: 86401: spec.maxLifetimeSeconds in body should be less than or equal to 86400");
	kind_refused(&cxs, "{\"runtime\":\"python\",\"ttlSecondsAfterFinished\":2592001}",
	    "spec.ttlSecondsAfterFinished: Invalid value: 2592001: spec.ttlSecondsAfterFinished in body should be less than or equal to 2592000");
	kind_refused(&cxs, "{\"runtime\":\"python\",\"close\":\"yes\"}",
	    "spec.close: Invalid value: \"string\": spec.close in body must be of type boolean");
	kind_refused(&cxs, "{\"runtime\":\"python\",\"resources\":{\"cpu\":\"0\"}}",
	    "spec.resources.cpu: Invalid value: \"0\": must be a positive quantity such as 500m or 1");
	/* files are an execution's files, with the same rules. */
	kind_refused(&cxs, "{\"runtime\":\"python\",\"files\":[{\"path\":\"/etc/passwd\",\"content\":\"x\"}]}",
	    "spec.files[0].path: Invalid value: \"/etc/passwd\": must be a relative path");
	kind_refused(&cxs, "{\"runtime\":\"python\",\"files\":[{\"path\":\"lib\",\"content\":\"\"},"
	    "{\"path\":\"lib/a.py\",\"content\":\"x\"}]}",
	    "spec.files: Invalid value: a path cannot be both a file and a directory holding others");
}

/*
 * Only spec.close changes after creation, and once true it stays true. A
 * refused change leaves the session as it was.
 */
static void
test_session_immutable(void **state)
{
	struct k8s_error err;
	json_t *out, *want;

	(void)state;
	kind_admitted(&cxs, "fixed", "{\"runtime\":\"python\",\"resources\":{\"memory\":\"1Gi\"}}",
	    "{\"runtime\":\"python\",\"idleTimeoutSeconds\":600,\"maxLifetimeSeconds\":3600,"
	    "\"ttlSecondsAfterFinished\":3600,\"resources\":{\"memory\":\"1Gi\"}}");
	patch_refused(&cxs, "fixed", NULL, "{\"spec\":{\"runtime\":\"bash\"}}",
	    "spec.runtime: Invalid value: \"bash\": is immutable");
	patch_refused(&cxs, "fixed", NULL, "{\"spec\":{\"idleTimeoutSeconds\":60}}",
	    "spec.idleTimeoutSeconds: Invalid value: 60: is immutable");
	patch_refused(&cxs, "fixed", NULL, "{\"spec\":{\"maxLifetimeSeconds\":60}}",
	    "spec.maxLifetimeSeconds: Invalid value: 60: is immutable");
	patch_refused(&cxs, "fixed", NULL, "{\"spec\":{\"resources\":{\"memory\":\"2Gi\"}}}",
	    "spec.resources: Invalid value: is immutable");
	patch_refused(&cxs, "fixed", NULL, "{\"spec\":{\"files\":[{\"path\":\"a\",\"content\":\"\"}]}}",
	    "spec: Invalid value: the spec is immutable after creation, except spec.close");
	patch_refused(&cxs, "fixed", NULL, "{\"spec\":{\"resources\":null}}",
	    "spec: Invalid value: the spec is immutable after creation, except spec.close");
	/* close: to true, the one change allowed... */
	out = patched(&cxs, "fixed", NULL, "{\"spec\":{\"close\":true}}");
	assert_true(json_is_true(json_object_get(json_object_get(out, "spec"), "close")));
	assert_int_equal(int_at(out, "metadata", "generation"), 2);
	json_decref(out);
	/* ...and not back, by false or by removal. */
	patch_refused(&cxs, "fixed", NULL, "{\"spec\":{\"close\":false}}",
	    "spec: Invalid value: spec.close cannot be unset once true");
	patch_refused(&cxs, "fixed", NULL, "{\"spec\":{\"close\":null}}",
	    "spec: Invalid value: spec.close cannot be unset once true");
	assert_int_equal(k8s_get(c, &cxs, ns, "fixed", &out, &err), 0);
	want = spec_json("{\"runtime\":\"python\",\"idleTimeoutSeconds\":600,\"maxLifetimeSeconds\":3600,"
	    "\"ttlSecondsAfterFinished\":3600,\"resources\":{\"memory\":\"1Gi\"},\"close\":true}");
	if (!json_equal(json_object_get(out, "spec"), want))
		fail_msg("fixed: spec %s", json_dumps(json_object_get(out, "spec"), JSON_SORT_KEYS));
	assert_int_equal(int_at(out, "metadata", "generation"), 2);
	json_decref(want);
	json_decref(out);
}

/*
 * The status only through /status (the controller's and the node
 * agent's), its enums and bounds checked there; what kubectl shows.
 */
static void
test_session_status(void **state)
{
	json_t *out, *st;
	char *text, a[8][16];

	(void)state;
	kind_admitted(&cxs, "st", "{\"runtime\":\"python\"}",
	    "{\"runtime\":\"python\",\"idleTimeoutSeconds\":600,\"maxLifetimeSeconds\":3600,"
	    "\"ttlSecondsAfterFinished\":3600}");
	out = patched(&cxs, "st", NULL, "{\"status\":{\"phase\":\"Ready\"}}");
	assert_null(json_object_get(out, "status"));
	json_decref(out);
	out = patched(&cxs, "st", "status", "{\"status\":{\"observedGeneration\":1,\"phase\":\"Ready\","
	    "\"startMode\":\"Warm\",\"podName\":\"holder-1\",\"nodeName\":\"n1\","
	    "\"executions\":3,\"restarts\":1,\"droppedOutputBytes\":12,\"peakMemoryBytes\":104857600,"
	    "\"cpuTimeMillis\":250,\"lastActivityTime\":\"2026-11-27T10:00:00Z\","
	    "\"startTime\":\"2026-11-27T09:58:00Z\",\"conditions\":[{\"type\":\"Ready\","
	    "\"status\":\"True\",\"reason\":\"Claimed\",\"observedGeneration\":1,"
	    "\"lastTransitionTime\":\"2026-11-27T09:58:00Z\"}]}}");
	st = json_object_get(out, "status");
	assert_string_equal(json_string_value(json_object_get(st, "phase")), "Ready");
	assert_int_equal(int_at(out, "status", "executions"), 3);
	assert_int_equal(int_at(out, "status", "restarts"), 1);
	assert_int_equal(int_at(out, "status", "droppedOutputBytes"), 12);
	json_decref(out);
	patch_refused(&cxs, "st", "status", "{\"status\":{\"phase\":\"Running\"}}",
	    "status.phase: Unsupported value: \"Running\": supported values: \"Pending\", \"Ready\", \"Ended\"");
	patch_refused(&cxs, "st", "status", "{\"status\":{\"reason\":\"TimedOut\"}}",
	    "status.reason: Unsupported value: \"TimedOut\": supported values: \"Closed\", \"IdleTimeout\", "
	    "\"Expired\", \"OOMKilled\", \"Failed\", \"NodeLost\", \"Deleted\", \"Rejected\"");
	patch_refused(&cxs, "st", "status", "{\"status\":{\"startMode\":\"Session\"}}",
	    "status.startMode: Unsupported value: \"Session\": supported values: \"Warm\", \"Cold\"");
	patch_refused(&cxs, "st", "status", "{\"status\":{\"executions\":-1}}",
	    "status.executions: Invalid value: -1: executions in body should be greater than or equal to 0");
	patch_refused(&cxs, "st", "status", "{\"status\":{\"conditions\":[{\"type\":\"Started\","
	    "\"status\":\"True\",\"lastTransitionTime\":\"2026-11-23T01:00:00Z\"}]}}",
	    "status.conditions[0].type: Unsupported value: \"Started\": supported values: \"Ready\"");
	out = patched(&cxs, "st", "status", "{\"status\":{\"phase\":\"Ended\",\"reason\":\"IdleTimeout\","
	    "\"endTime\":\"2026-11-27T10:10:00Z\",\"audited\":true}}");
	assert_string_equal(json_string_value(json_object_get(json_object_get(out, "status"),
	    "reason")), "IdleTimeout");
	json_decref(out);

	/* kubectl get cxs: runtime, phase, steps; -o wide adds reason and pod. */
	text = kubectl("get cxs st");
	assert_int_equal(sscanf(text, "%15s %15s %15s %15s %15s", a[0], a[1], a[2], a[3], a[4]), 5);
	assert_string_equal(a[1], "RUNTIME");
	assert_string_equal(a[2], "PHASE");
	assert_string_equal(a[3], "EXECUTIONS");
	assert_string_equal(a[4], "AGE");
	assert_non_null(strchr(text, '\n'));
	assert_int_equal(sscanf(strchr(text, '\n') + 1, "%15s %15s %15s %15s", a[0], a[1], a[2], a[3]), 4);
	assert_string_equal(a[0], "st");
	assert_string_equal(a[1], "python");
	assert_string_equal(a[2], "Ended");
	assert_string_equal(a[3], "3");
	free(text);
	text = kubectl("get cxs st -o wide");
	assert_int_equal(sscanf(text, "%15s %15s %15s %15s %15s %15s %15s", a[0], a[1], a[2],
	    a[3], a[4], a[5], a[6]), 7);
	assert_string_equal(a[4], "REASON");
	assert_string_equal(a[5], "POD");
	assert_string_equal(a[6], "AGE");
	assert_int_equal(sscanf(strchr(text, '\n') + 1, "%15s %15s %15s %15s %15s %15s", a[0], a[1],
	    a[2], a[3], a[4], a[5]), 6);
	assert_string_equal(a[4], "IdleTimeout");
	assert_string_equal(a[5], "holder-1");
	free(text);
	text = kubectl("get airlock -o name");
	assert_non_null(strstr(text, "codesession.airlock.dev/st\n"));
	free(text);
}

/*
 * An execution's spec.session: a name, fixed at creation (neither
 * changed, added nor removed), never with a custom image; its step's
 * status.value and startMode Session. Made without the CLI's check
 * (cli_agrees): the CLI does not know spec.session yet.
 */
static void
test_execution_session(void **state)
{
	json_t *out;
	char *big;
	int n;

	(void)state;
	kind_admitted(&cx, "step-1", "{\"runtime\":\"python\",\"session\":\"analysis\",\"source\":\"1+1\"}",
	    "{\"runtime\":\"python\",\"session\":\"analysis\",\"source\":\"1+1\",\"timeoutSeconds\":30,"
	    "\"ttlSecondsAfterFinished\":3600,\"output\":{\"maxBytes\":65536}}");
	kind_refused(&cx, "{\"runtime\":\"python\",\"session\":\"analysis\",\"image\":\"registry.example/x:1\"}",
	    "spec: Invalid value: spec.image cannot be set with spec.session");
	kind_refused(&cx, "{\"runtime\":\"python\",\"session\":\"Bad_Name\"}",
	    "spec.session: Invalid value: \"Bad_Name\": spec.session in body should match");
	kind_refused(&cx, "{\"runtime\":\"python\",\"session\":\"\"}",
	    "spec.session: Invalid value: \"\": spec.session in body should be at least 1 chars long");
	patch_refused(&cx, "step-1", NULL, "{\"spec\":{\"session\":\"other\"}}",
	    "spec.session: Invalid value: \"other\": is immutable");
	patch_refused(&cx, "step-1", NULL, "{\"spec\":{\"session\":null}}",
	    "spec: Invalid value: the spec is immutable after creation, except spec.cancel");
	/* One made without a session cannot be given one. */
	kind_admitted(&cx, "lone", "{\"runtime\":\"python\",\"source\":\"1\"}",
	    "{\"runtime\":\"python\",\"source\":\"1\",\"timeoutSeconds\":30,"
	    "\"ttlSecondsAfterFinished\":3600,\"output\":{\"maxBytes\":65536}}");
	patch_refused(&cx, "lone", NULL, "{\"spec\":{\"session\":\"analysis\"}}",
	    "spec: Invalid value: the spec is immutable after creation, except spec.cancel");
	/* A step is cancelled as any execution is. */
	out = patched(&cx, "step-1", NULL, "{\"spec\":{\"cancel\":true}}");
	assert_true(json_is_true(json_object_get(json_object_get(out, "spec"), "cancel")));
	json_decref(out);

	/* Its value, at most 4096, and startMode Session, through /status. */
	out = patched(&cx, "step-1", "status", "{\"status\":{\"phase\":\"Succeeded\",\"exitCode\":0,"
	    "\"startMode\":\"Session\",\"value\":\"2\"}}");
	assert_string_equal(json_string_value(json_object_get(json_object_get(out, "status"),
	    "value")), "2");
	assert_string_equal(json_string_value(json_object_get(json_object_get(out, "status"),
	    "startMode")), "Session");
	json_decref(out);
	big = malloc(4200);
	n = snprintf(big, 4200, "{\"status\":{\"value\":\"");
	memset(big + n, 'v', 4097);
	snprintf(big + n + 4097, 4200 - (size_t)n - 4097, "\"}}");
	patch_refused(&cx, "step-1", "status", big,
	    "status.value: Too long: may not be more than 4096 bytes");
	free(big);
}

/*
 * spec.network (docs/network.md): the shape is the schema's, the CLI
 * agreeing on each field (expect_refused); whether it narrows the
 * profile's list is the controller's (test_egress, test_podspec).
 */
static void
test_execution_network(void **state)
{
	json_t *spec, *out;

	(void)state;
	out = admit("net-none", spec_json("{\"runtime\":\"python\",\"network\":{\"egress\":[]}}"));
	json_decref(out);
	out = admit("net-one", spec_json("{\"runtime\":\"python\",\"network\":{\"egress\":"
	    "[{\"cidr\":\"10.20.0.0/16\",\"ports\":[443,5432]}]}}"));
	json_decref(out);
	expect_refused("net-port-zero", spec_json("{\"runtime\":\"python\",\"network\":{\"egress\":"
	    "[{\"cidr\":\"10.20.0.0/16\",\"ports\":[0]}]}}"),
	    "spec.network.egress[0].ports[0]: Invalid value: 0: spec.network.egress[0].ports[0] "
	    "in body should be greater than or equal to 1");
	expect_refused("net-port-big", spec_json("{\"runtime\":\"python\",\"network\":{\"egress\":"
	    "[{\"cidr\":\"10.20.0.0/16\",\"ports\":[65536]}]}}"),
	    "spec.network.egress[0].ports[0]: Invalid value: 65536: spec.network.egress[0].ports[0] "
	    "in body should be less than or equal to 65535");
	expect_refused("net-port-twice", spec_json("{\"runtime\":\"python\",\"network\":{\"egress\":"
	    "[{\"cidr\":\"10.20.0.0/16\",\"ports\":[443,443]}]}}"),
	    "spec.network.egress[0].ports[1]: Duplicate value: 443");
	expect_refused("net-no-ports", spec_json("{\"runtime\":\"python\",\"network\":{\"egress\":"
	    "[{\"cidr\":\"10.20.0.0/16\"}]}}"),
	    "spec.network.egress[0].ports: Required value");
	expect_refused("net-no-cidr", spec_json("{\"runtime\":\"python\",\"network\":{\"egress\":"
	    "[{\"ports\":[443]}]}}"),
	    "spec.network.egress[0]: Invalid value: needs one of cidr and host");
	/* A host entry: one of cidr and host, a name's characters. */
	out = admit("net-host", spec_json("{\"runtime\":\"python\",\"network\":{\"egress\":"
	    "[{\"host\":\"pypi.org\",\"ports\":[443]},{\"cidr\":\"10.20.0.0/16\",\"ports\":[5432]}]}}"));
	json_decref(out);
	expect_refused("net-both", spec_json("{\"runtime\":\"python\",\"network\":{\"egress\":"
	    "[{\"host\":\"pypi.org\",\"cidr\":\"10.20.0.0/16\",\"ports\":[443]}]}}"),
	    "spec.network.egress[0]: Invalid value: needs one of cidr and host");
	expect_refused("net-host-star", spec_json("{\"runtime\":\"python\",\"network\":{\"egress\":"
	    "[{\"host\":\"*.pypi.org\",\"ports\":[443]}]}}"),
	    "spec.network.egress[0].host: Invalid value: \"*.pypi.org\"");
	expect_refused("net-cidr-long", spec_json("{\"runtime\":\"python\",\"network\":{\"egress\":"
	    "[{\"cidr\":\"100.100.100.100/320\",\"ports\":[443]}]}}"),
	    "spec.network.egress[0].cidr: Too long: may not be more than 18 bytes");
	spec = spec_json("{\"runtime\":\"python\",\"network\":{\"egress\":[]}}");
	for (int i = 0; i < 33; i++)
		json_array_append_new(json_object_get(json_object_get(spec, "network"),
		    "egress"), json_pack("{s:s, s:[i]}", "cidr", "10.20.0.0/16", "ports", 443));
	expect_refused("net-many", spec, "spec.network.egress: Too many: 33: must have at most 32 items");
	/* Fixed at creation, as the rest of the spec. */
	patch_refused(&cx, "net-one", NULL, "{\"spec\":{\"network\":{\"egress\":[]}}}",
	    "spec.network: Invalid value: is immutable");
	patch_refused(&cx, "net-one", NULL, "{\"spec\":{\"network\":null}}",
	    "spec: Invalid value: the spec is immutable after creation, except spec.cancel");
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
		cmocka_unit_test(test_pool_identity),
		cmocka_unit_test(test_pool_spec),
		cmocka_unit_test(test_pool_immutable),
		cmocka_unit_test(test_pool_status_and_scale),
		cmocka_unit_test(test_start_mode),
		cmocka_unit_test(test_session_identity),
		cmocka_unit_test(test_session_spec),
		cmocka_unit_test(test_session_immutable),
		cmocka_unit_test(test_session_status),
		cmocka_unit_test(test_execution_session),
		cmocka_unit_test(test_execution_network),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
