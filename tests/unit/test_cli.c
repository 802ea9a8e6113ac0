/* Unit tests: cli/common.c - YAML output, the spec check. */
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

#include <openssl/evp.h>

#include "base64.h"
#include "cli.h"
#include "yamljson.h"

/* The local mode's runtimes are the chart's profiles, on local roots. */
static void
test_local_profiles(void **state)
{
	static const struct {
		const char *name, *image, *argv[4], *source;
	} want[] = {
		{ "python", "local/python", { "/airlock/bin/run", "python3", "main.py" }, "main.py" },
		{ "node", "local/node", { "/airlock/bin/run", "node", "main.js" }, "main.js" },
		{ "bash", "local/bash", { "/airlock/bin/run", "bash", "main.sh" }, "main.sh" },
		{ "python-data", "local/python-data", { "/airlock/bin/run", "python3", "main.py" },
		  "main.py" },
	};
	struct k8s_error err;
	struct ctl_config *c = local_config(NULL, &err);

	(void)state;
	if (c == NULL)
		fail_msg("local_config: %s", err.message);
	assert_int_equal(c->nprofiles, 4);
	for (size_t i = 0; i < 4; i++) {
		const struct ctl_profile *p = NULL;

		for (size_t j = 0; j < c->nprofiles; j++)
			if (strcmp(c->profiles[j].name, want[i].name) == 0)
				p = &c->profiles[j];
		if (p == NULL)
			fail_msg("no profile %s", want[i].name);
		assert_string_equal(p->image, want[i].image);
		assert_string_equal(p->source_file, want[i].source);
		for (size_t k = 0; k < 3; k++)
			assert_string_equal(p->command[k], want[i].argv[k]);
		assert_null(p->command[3]);
	}
	ctl_config_free(c);
}

static char *
yaml_of(json_t *v)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_int_equal(cli_yaml(f, v), 0);
	fclose(f);
	return buf;
}

static void
test_yaml_exact(void **state)
{
	json_t *v = json_loads("{\"kind\":\"CodeExecution\",\"spec\":{\"runtime\":\"python\","
	    "\"timeoutSeconds\":30,\"args\":[\"a\",\"b\"],\"cancel\":false},"
	    "\"status\":{\"stdout\":\"1\\n2\\n\",\"phase\":\"Succeeded\"}}",
	    JSON_PRESERVE_ORDER, NULL);
	char *y = yaml_of(v);

	(void)state;
	assert_string_equal(y,
	    "kind: CodeExecution\n"
	    "spec:\n"
	    "  runtime: python\n"
	    "  timeoutSeconds: 30\n"
	    "  args:\n"
	    "  - a\n"
	    "  - b\n"
	    "  cancel: false\n"
	    "status:\n"
	    "  stdout: |\n"
	    "    1\n"
	    "    2\n"
	    "  phase: Succeeded\n");
	free(y);
	json_decref(v);
}

/* Whatever the strings hold, the YAML reads back as the same JSON. */
static void
test_yaml_round_trip(void **state)
{
	static const char *const strs[] = { "", "true", "no", "null", "~", "123",
	    "-1", "1e5", ".5", "0x1F", "2026-11-23T06:17:01Z", "a: b", "- x",
	    "# not a comment", "tab\there", "a\nb", "trailing\n\n", " lead",
	    "\"quoted\"", "caf\xc3\xa9 \xe2\x82\xac", "[1, 2]", "{a: 1}", "&anchor",
	    "*alias", "!tag", "|", ">", "@", "`", "%", "key:", "yes" };
	struct k8s_error err;

	(void)state;
	for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++) {
		json_t *v = json_pack("{s:s, s:[s], s:i, s:b, s:n}", "s", strs[i],
		    "l", strs[i], "n", 7, "b", 1, "z");
		json_t *back = NULL;
		char *y = yaml_of(v);

		if (yamljson_load(y, strlen(y), "yaml", "test", 0, &back, &err) != 0)
			fail_msg("'%s': unreadable YAML: %s\n%s", strs[i], err.message, y);
		if (!json_equal(v, back))
			fail_msg("'%s' came back as %s from\n%s", strs[i],
			    json_dumps(back, 0), y);
		json_decref(back);
		json_decref(v);
		free(y);
	}
}

static json_t *
spec(const char *s)
{
	json_t *v = json_loads(s, 0, NULL);

	if (v == NULL)
		fail_msg("bad test spec %s", s);
	return v;
}

static void
test_spec_defaults(void **state)
{
	struct k8s_error err;
	json_t *s = spec("{\"runtime\":\"python\",\"source\":\"print(1)\"}");

	(void)state;
	assert_int_equal(cli_check_spec(s, &err), 0);
	assert_int_equal(json_integer_value(json_object_get(s, "timeoutSeconds")), 30);
	assert_int_equal(json_integer_value(json_object_get(s, "ttlSecondsAfterFinished")), 3600);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(s, "output"),
	    "maxBytes")), 65536);
	json_decref(s);
	s = spec("{\"runtime\":\"bash\",\"files\":[{\"path\":\"a/b.txt\",\"content\":\"x\"}],"
	    "\"env\":[{\"name\":\"A_1\",\"value\":\"v\"}],\"args\":[\"-x\"],"
	    "\"resources\":{\"cpu\":\"250m\",\"memory\":\"64Mi\"},\"timeoutSeconds\":3600,"
	    "\"output\":{\"maxBytes\":1},\"cancel\":false,\"stdin\":\"in\"}");
	assert_int_equal(cli_check_spec(s, &err), 0);
	assert_int_equal(json_integer_value(json_object_get(s, "timeoutSeconds")), 3600);
	json_decref(s);
}

/* Each bad spec is refused, and the message names the field. */
static void
test_spec_refused(void **state)
{
	static const struct {
		const char *spec, *want;
	} t[] = {
		{ "{\"source\":\"x\"}", "spec.runtime: required" },
		{ "{\"runtime\":\"Python\"}", "spec.runtime:" },
		{ "{\"runtime\":\"python\",\"code\":\"x\"}", "spec.code: unknown field" },
		{ "{\"runtime\":\"python\",\"source\":7}", "spec.source: must be a string" },
		{ "{\"runtime\":\"python\",\"timeoutSeconds\":0}", "spec.timeoutSeconds:" },
		{ "{\"runtime\":\"python\",\"timeoutSeconds\":3601}", "spec.timeoutSeconds:" },
		{ "{\"runtime\":\"python\",\"timeoutSeconds\":\"30\"}", "spec.timeoutSeconds:" },
		{ "{\"runtime\":\"python\",\"files\":[{\"path\":\"/etc/x\",\"content\":\"\"}]}", "spec.files[0]:" },
		{ "{\"runtime\":\"python\",\"files\":[{\"path\":\"a/../b\",\"content\":\"\"}]}", "spec.files[0]:" },
		{ "{\"runtime\":\"python\",\"files\":[{\"path\":\"a//b\",\"content\":\"\"}]}", "spec.files[0]:" },
		{ "{\"runtime\":\"python\",\"files\":[{\"path\":\"..x\",\"content\":\"\"}]}",
		  "spec.files[0]: path '..x' must be relative, not start with '..'" },
		{ "{\"runtime\":\"python\",\"files\":[{\"path\":\"lib/a.py\",\"content\":\"\"},"
		  "{\"path\":\"lib\",\"content\":\"\"}]}",
		  "spec.files: 'lib' cannot be both a file and the directory of 'lib/a.py'" },
		{ "{\"runtime\":\"python\",\"files\":[{\"path\":\"a\",\"content\":\"\"},"
		  "{\"path\":\"a\",\"content\":\"\"}]}", "spec.files[1]: path 'a' is given twice" },
		{ "{\"runtime\":\"python\",\"files\":[{\"path\":\"a\"}]}", "spec.files[0]:" },
		{ "{\"runtime\":\"python\",\"env\":[{\"name\":\"1A\"}]}", "spec.env[0].name:" },
		{ "{\"runtime\":\"python\",\"env\":[{\"name\":\"A-B\"}]}", "spec.env[0].name:" },
		{ "{\"runtime\":\"python\",\"env\":[{\"name\":\"A\"},{\"name\":\"B\"},"
		  "{\"name\":\"A\"}]}", "spec.env[2]: name 'A' is given twice" },
		{ "{\"runtime\":\"python\",\"args\":[1]}", "spec.args:" },
		{ "{\"runtime\":\"python\",\"resources\":{\"cpu\":\"lots\"}}", "spec.resources.cpu:" },
		{ "{\"runtime\":\"python\",\"resources\":{\"memory\":\"0\"}}", "spec.resources.memory:" },
		{ "{\"runtime\":\"python\",\"resources\":{\"gpu\":\"1\"}}", "spec.resources.gpu: unknown field" },
		{ "{\"runtime\":\"python\",\"output\":{\"maxBytes\":0}}", "spec.output.maxBytes:" },
		{ "{\"runtime\":\"python\",\"output\":{\"maxBytes\":1048577}}", "spec.output.maxBytes:" },
		{ "{\"runtime\":\"python\",\"output\":{\"stream\":\"yes\"}}", "spec.output.stream: must be true or false" },
		{ "{\"runtime\":\"python\",\"output\":{\"live\":true}}", "spec.output: unknown field live" },
		{ "{\"runtime\":\"python\",\"cancel\":\"yes\"}", "spec.cancel:" },
		{ "[]", "spec: must be an object" },
	};
	struct k8s_error err;

	(void)state;
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		json_t *s = spec(t[i].spec);

		if (cli_check_spec(s, &err) != K8S_EINVAL)
			fail_msg("accepted %s", t[i].spec);
		if (strstr(err.message, t[i].want) == NULL)
			fail_msg("%s: '%s' does not say '%s'", t[i].spec, err.message, t[i].want);
		json_decref(s);
	}
	/* Sizes: one byte over each limit. */
	{
		char *big = malloc(262146);
		json_t *s;

		memset(big, 'x', 262145);
		big[262145] = '\0';
		s = json_pack("{s:s, s:s}", "runtime", "python", "source", big);
		assert_int_equal(cli_check_spec(s, &err), K8S_EINVAL);
		assert_non_null(strstr(err.message, "spec.source: longer than 262144"));
		json_decref(s);
		big[262144] = '\0';
		s = json_pack("{s:s, s:s}", "runtime", "python", "source", big);
		assert_int_equal(cli_check_spec(s, &err), 0);
		json_decref(s);
		free(big);
	}
}

/* Output to a terminal cannot drive it; piped output stays byte-exact. */
static void
test_write_text(void **state)
{
	static const char in[] = "ok\t\x1b]52;c;SGVsbG8=\x07\x1b[2J\r\x7f\xc2\x9b" "31m\xc3\xa9\n";
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	(void)state;
	f = open_memstream(&buf, &len);
	cli_write_text(f, in, sizeof(in) - 1, 0);
	fclose(f);
	assert_int_equal(len, sizeof(in) - 1);
	assert_memory_equal(buf, in, len);
	free(buf);
	f = open_memstream(&buf, &len);
	cli_write_text(f, in, sizeof(in) - 1, 1);
	fclose(f);
	assert_string_equal(buf, "ok\t^[]52;c;SGVsbG8=^G^[[2J^M^?\xef\xbf\xbd" "31m\xc3\xa9\n");
	free(buf);
	/* NUL, and a lone 0xc2 at the end, are not a problem. */
	f = open_memstream(&buf, &len);
	cli_write_text(f, "a\0b\xc2", 4, 1);
	fclose(f);
	assert_int_equal(len, 5);
	assert_memory_equal(buf, "a^@b\xc2", 5);
	free(buf);
}

static const char *
sha256_text(const char *t)
{
	static char hex[4][65];
	static int n;
	unsigned char md[32];
	unsigned int len = 0;
	char *out = hex[n++ % 4];

	EVP_Digest(t, strlen(t), md, &len, EVP_sha256(), NULL);
	for (unsigned i = 0; i < 32; i++)
		snprintf(out + 2 * i, 3, "%02x", md[i]);
	return out;
}

/* A files-out entry: path, and content given as text; its sha256. */
static json_t *
fo(const char *path, const char *text, json_t *want)
{
	char *b = base64_encode(text, strlen(text), NULL);
	json_t *f = json_pack("{s:s, s:s, s:s}", "path", path, "sha256",
	    sha256_text(text), "content", b);

	free(b);
	json_array_append_new(want, json_pack("{s:s, s:s}", "path", path, "sha256",
	    sha256_text(text)));
	return f;
}

/*
 * --out DIR: into DIR/NAME/ (the execution's name), a directory made new,
 * so nothing lands beside the user's files; each file checked against
 * the status's list and digest, never through a symlink, and no
 * dot-named component (.git/config, .envrc).
 */
static void
test_write_files(void **state)
{
	char dir[] = "/tmp/airlock-out-test-XXXXXX", path[256], want_msg[512];
	char msg[512], buf[64];
	json_t *files, *want;
	FILE *f;

	(void)state;
	assert_non_null(mkdtemp(dir));
	files = json_array();
	want = json_array();
	json_array_append_new(files, fo("a.txt", "A\n", want));
	json_array_append_new(files, fo("sub/dir/b.csv", "1,2\n", want));
	json_array_append_new(files, fo("conftest.py", "import os\n", want));
	snprintf(path, sizeof(path), "%s/new", dir);
	assert_int_equal(cli_write_files(path, "run-x7k2q", files, want, msg,
	    sizeof(msg)), 3);
	snprintf(path, sizeof(path), "%s/new/run-x7k2q/sub/dir/b.csv", dir);
	assert_non_null(f = fopen(path, "r"));
	assert_non_null(fgets(buf, sizeof(buf), f));
	fclose(f);
	assert_string_equal(buf, "1,2\n");
	snprintf(path, sizeof(path), "%s/new/run-x7k2q/conftest.py", dir);
	assert_int_equal(access(path, F_OK), 0);
	/* Nothing beside the user's own files in DIR. */
	snprintf(path, sizeof(path), "%s/new/conftest.py", dir);
	assert_int_equal(access(path, F_OK), -1);
	snprintf(path, sizeof(path), "%s/new/a.txt", dir);
	assert_int_equal(access(path, F_OK), -1);
	/* Again for the same name: its directory is there, refused. */
	snprintf(path, sizeof(path), "%s/new", dir);
	assert_int_equal(cli_write_files(path, "run-x7k2q", files, want, msg,
	    sizeof(msg)), -1);
	snprintf(want_msg, sizeof(want_msg), "%s/new/run-x7k2q: File exists", dir);
	assert_string_equal(msg, want_msg);
	/* A directory of the user's with that name is not written into. */
	snprintf(path, sizeof(path), "%s/new/src", dir);
	assert_int_equal(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/new", dir);
	assert_int_equal(cli_write_files(path, "src", files, want, msg,
	    sizeof(msg)), -1);
	snprintf(want_msg, sizeof(want_msg), "%s/new/src: File exists", dir);
	assert_string_equal(msg, want_msg);
	snprintf(path, sizeof(path), "%s/new/src/a.txt", dir);
	assert_int_equal(access(path, F_OK), -1);
	/* A local run's name is the manifest's, unchecked: a path is refused. */
	{
		static const char *const names[] = { "../up", "a/b", ".hidden", "",
		    "..", "Run", "a..b", "-a" };

		for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
			snprintf(path, sizeof(path), "%s/names", dir);
			assert_int_equal(cli_write_files(path, names[i], files, want,
			    msg, sizeof(msg)), -1);
			snprintf(want_msg, sizeof(want_msg), "metadata.name '%s': not a "
			    "name a directory can be made of", names[i]);
			assert_string_equal(msg, want_msg);
		}
		snprintf(path, sizeof(path), "%s/up", dir);
		assert_int_equal(access(path, F_OK), -1);
	}
	json_decref(files);
	json_decref(want);

	{
		static const char *const bad[] = { ".git/config", "a/.envrc", "../up",
		    "/etc/x", "a/../b", "x\\y", "" };

		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			files = json_array();
			want = json_array();
			json_array_append_new(files, fo(bad[i], "x", want));
			snprintf(path, sizeof(path), "%s/bad%zu", dir, i);
			assert_int_equal(cli_write_files(path, "run-b", files, want, msg,
			    sizeof(msg)), -1);
			assert_string_equal(msg, "a file out with a bad path or no content");
			json_decref(files);
			json_decref(want);
		}
	}
	/* Not listed, or not with its digest: refused. */
	files = json_array();
	want = json_array();
	json_array_append_new(files, fo("c.txt", "C", want));
	json_object_set_new(json_array_get(want, 0), "sha256", json_string(sha256_text("D")));
	snprintf(path, sizeof(path), "%s/d", dir);
	assert_int_equal(cli_write_files(path, "run-c", files, want, msg, sizeof(msg)), -1);
	assert_string_equal(msg, "c.txt: not as the execution's status lists it");
	json_object_set_new(json_array_get(files, 0), "sha256", json_string(sha256_text("D")));
	assert_int_equal(cli_write_files(path, "run-d", files, want, msg, sizeof(msg)), -1);
	assert_string_equal(msg, "c.txt: its content does not have its sha256");
	json_decref(files);
	json_decref(want);
	/* Through a symlink a directory of DIR/NAME points out of it: refused. */
	snprintf(path, sizeof(path), "%s/s", dir);
	assert_int_equal(mkdir(path, 0755), 0);
	files = json_array();
	want = json_array();
	json_array_append_new(files, fo("link/planted", "x", want));
	/* The name's directory is made new, so the link must be a symlink NAME. */
	snprintf(path, sizeof(path), "%s/s/run-l", dir);
	assert_int_equal(symlink("/tmp", path), 0);
	snprintf(path, sizeof(path), "%s/s", dir);
	assert_int_equal(cli_write_files(path, "run-l", files, want, msg, sizeof(msg)), -1);
	snprintf(want_msg, sizeof(want_msg), "%s/s/run-l: File exists", dir);
	assert_string_equal(msg, want_msg);
	assert_int_equal(access("/tmp/link/planted", F_OK), -1);
	json_decref(files);
	json_decref(want);
	snprintf(path, sizeof(path), "rm -rf %s", dir);
	assert_int_equal(system(path), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_local_profiles),
		cmocka_unit_test(test_write_files),
		cmocka_unit_test(test_write_text),
		cmocka_unit_test(test_yaml_exact),
		cmocka_unit_test(test_yaml_round_trip),
		cmocka_unit_test(test_spec_defaults),
		cmocka_unit_test(test_spec_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
