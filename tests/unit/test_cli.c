/*
 * Unit tests: cli/common.c - YAML output, the spec check, files out;
 * cli/cluster.c's create against tests/support/fakeapi.c - what the API
 * server could not take tried again, and never two executions.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include <openssl/evp.h>

#include "base64.h"
#include "cli.h"
#include "clock.h"
#include "fakeapi.h"
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

/*
 * Issue 31: local runs are cold, with no holders: a profile's preload is
 * accepted (the chart's python-data has one; an operator's config is
 * checked as the controller checks it) and not carried.
 */
static void
test_local_preload_ignored(void **state)
{
	char path[] = "/tmp/airlock-test-localcfg-XXXXXX";
	struct k8s_error err;
	struct ctl_config *c = local_config(NULL, &err);
	int fd;
	FILE *f;

	(void)state;
	if (c == NULL)
		fail_msg("local_config: %s", err.message);
	assert_null(ctl_config_profile(c, "python-data")->preload);
	assert_null(ctl_config_profile(c, "python-data")->warmup);
	ctl_config_free(c);

	fd = mkstemp(path);
	assert_true(fd >= 0);
	f = fdopen(fd, "w");
	fputs("profiles:\n  data:\n    image: airlock.dev/runner-python-data:1\n"
	    "    command: [/airlock/bin/run, python3, main.py]\n"
	    "    sourceFile: main.py\n    preload: [numpy]\n    warmup: import numpy\n", f);
	fclose(f);
	c = local_config(path, &err);
	if (c == NULL)
		fail_msg("local_config: %s", err.message);
	assert_string_equal(ctl_config_profile(c, "data")->image, "local/python-data");
	assert_null(ctl_config_profile(c, "data")->preload);
	assert_null(ctl_config_profile(c, "data")->warmup);
	ctl_config_free(c);

	/* A bad one is refused, in the controller's words. */
	f = fopen(path, "w");
	fputs("profiles:\n  data:\n    image: airlock.dev/runner-python-data:1\n"
	    "    command: [/airlock/bin/run, python3, main.py]\n"
	    "    sourceFile: main.py\n    warmup: import numpy\n", f);
	fclose(f);
	assert_null(local_config(path, &err));
	{
		char want[200];

		snprintf(want, sizeof(want), "config '%s': profiles.data.warmup "
		    "needs a preload list", path);
		assert_string_equal(err.message, want);
	}
	unlink(path);
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
	s = spec("{\"runtime\":\"python\",\"session\":\"analysis-1.a\"}");
	assert_int_equal(cli_check_spec(s, &err), 0);
	json_decref(s);
	/* spec.network: its shape here; the profile's list on the cluster. */
	s = spec("{\"runtime\":\"python\",\"network\":{\"egress\":[{\"cidr\":"
	    "\"10.0.0.0/8\",\"ports\":[443,5432]}]}}");
	assert_int_equal(cli_check_spec(s, &err), 0);
	json_decref(s);
	s = spec("{\"runtime\":\"python\",\"network\":{\"egress\":[]}}");
	assert_int_equal(cli_check_spec(s, &err), 0);
	json_decref(s);
}

/*
 * --local has no network to give: a pod that comes with a NetworkPolicy
 * is refused, named by who asked for it; egress: [] (no policy) runs.
 */
static void
test_local_network_refusal(void **state)
{
	json_t *np = json_object();
	json_t *asked = spec("{\"runtime\":\"p\",\"network\":{\"egress\":"
	    "[{\"cidr\":\"10.0.0.0/8\",\"ports\":[443]}]}}");
	json_t *none = spec("{\"runtime\":\"p\",\"network\":{\"egress\":[]}}");
	json_t *plain = spec("{\"runtime\":\"p\"}");

	(void)state;
	assert_string_equal(local_network_refusal(asked, np), "spec.network.egress: "
	    "--local gives no network (its NetworkPolicy is a cluster's, "
	    "docs/network.md): run it on a cluster");
	assert_string_equal(local_network_refusal(plain, np), "spec.runtime: "
	    "profile has network egress, which --local does not give (its "
	    "NetworkPolicy is a cluster's, docs/network.md): run it on a cluster");
	assert_null(local_network_refusal(none, NULL));
	assert_null(local_network_refusal(plain, NULL));
	json_decref(np);
	json_decref(asked);
	json_decref(none);
	json_decref(plain);
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
		{ "{\"runtime\":\"python\",\"session\":\"Big\"}", "spec.session: must be a "
		  "session's name" },
		{ "{\"runtime\":\"python\",\"session\":7}", "spec.session:" },
		{ "{\"runtime\":\"python\",\"session\":\"-a\"}", "spec.session:" },
		{ "{\"runtime\":\"python\",\"session\":\"s\",\"image\":\"x\"}",
		  "spec.image: cannot be set with spec.session" },
		{ "{\"runtime\":\"python\",\"network\":{\"egress\":[{\"cidr\":"
		  "\"10.0.0.1/8\",\"ports\":[443]}]}}", "spec.network.egress[0].cidr: "
		  "'10.0.0.1/8' has host bits set: the network is 10.0.0.0/8" },
		{ "{\"runtime\":\"python\",\"network\":{\"egress\":[{\"cidr\":"
		  "\"10.0.0.0/8\",\"ports\":[0]}]}}",
		  "spec.network.egress[0].ports[0]: not a port from 1 to 65535" },
		{ "{\"runtime\":\"python\",\"network\":{\"ingress\":[]}}",
		  "spec.network.ingress: unknown field" },
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

/* --- creating through an API server that cannot take it yet --------------- */

#define CX_PATH	"/apis/airlock.dev/v1alpha1/namespaces/ns1/codeexecutions"

/* The 503 the chart's MutatingAdmissionPolicy gives right after install. */
static const char unavailable[] = "{\"kind\":\"Status\",\"apiVersion\":\"v1\","
    "\"status\":\"Failure\",\"message\":\"Resource kind airlock.dev/v1alpha1, "
    "Kind=CodeExecution not found. There can be a delay between when "
    "CustomResourceDefinitions are created and when they are available.\","
    "\"reason\":\"ServiceUnavailable\",\"code\":503}";
static const char too_many[] = "{\"kind\":\"Status\",\"status\":\"Failure\","
    "\"message\":\"too many requests, please try again later\","
    "\"reason\":\"TooManyRequests\",\"code\":429}";
static const char exists[] = "{\"kind\":\"Status\",\"status\":\"Failure\","
    "\"message\":\"codeexecutions.airlock.dev \\\"x\\\" already exists\","
    "\"reason\":\"AlreadyExists\",\"code\":409}";
/* The watch's list: the execution, ended. */
static const char ended[] = "{\"kind\":\"CodeExecutionList\",\"metadata\":"
    "{\"resourceVersion\":\"7\"},\"items\":[{\"metadata\":{\"name\":\"x\","
    "\"namespace\":\"ns1\"},\"status\":{\"phase\":\"Succeeded\","
    "\"reason\":\"Completed\",\"exitCode\":0}}]}";

/* A kubeconfig at path for the server at url, namespace ns1. */
static void
kubeconfig(const char *path, const char *url)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fprintf(f, "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
	    "clusters:\n- name: c\n  cluster:\n    server: %s\n"
	    "users:\n- name: u\n  user: {}\n"
	    "contexts:\n- name: c\n  context:\n    cluster: c\n    user: u\n"
	    "    namespace: ns1\n", url);
	fclose(f);
}

static json_t *
new_cx(const char *name)
{
	json_t *cx = json_pack("{s:s, s:s, s:{}, s:{s:s, s:s}}", "apiVersion",
	    "airlock.dev/v1alpha1", "kind", "CodeExecution", "metadata", "spec",
	    "runtime", "python", "source", "print(1)\n");

	json_object_set_new(json_object_get(cx, "metadata"), name ? "name" :
	    "generateName", json_string(name ? name : "mcp-"));
	return cx;
}

/* The i-th request's body as JSON: its metadata.name and create token. */
static void
sent(struct fakeapi *f, int i, char *name, char *token)
{
	json_t *b = json_loads(fakeapi_body(f, i), 0, NULL), *md;

	assert_non_null(b);
	md = json_object_get(b, "metadata");
	assert_null(json_object_get(md, "generateName"));
	snprintf(name, 64, "%s", json_string_value(json_object_get(md, "name")));
	snprintf(token, 64, "%s", json_string_value(json_object_get(json_object_get(md,
	    "annotations"), CLI_ANN_CREATE_TOKEN)));
	json_decref(b);
}

/* A name as generateName draws it: the prefix and 5 of its characters. */
static void
assert_drawn(const char *name, const char *prefix)
{
	size_t n = strlen(prefix);

	assert_int_equal(strncmp(name, prefix, n), 0);
	assert_int_equal(strlen(name), n + 5);
	assert_int_equal(strspn(name + n, "bcdfghjklmnpqrstvwxz2456789"), 5);
}

static void
assert_token(const char *t)
{
	assert_int_equal(strlen(t), 32);
	assert_int_equal(strspn(t, "0123456789abcdef"), 32);
}

/*
 * 503 (the admission policy's "Resource kind ... not found"), then 429
 * with Retry-After, then taken: one execution, the same name and token on
 * every try, and the wait goes on with it.
 */
static void
test_create_retried(void **state)
{
	char kc[] = "/tmp/airlock-kc-XXXXXX", msg[1400], name[64], token[64];
	char n2[64], t2[64], want[256];
	struct fakeapi *f = fakeapi_start();
	struct cli_cluster o = { .kubeconfig = kc, .retry_ms = 30000 };
	json_t *cx = new_cx(NULL), *done = NULL;
	int fd = mkstemp(kc);

	(void)state;
	assert_true(fd >= 0);
	close(fd);
	kubeconfig(kc, fakeapi_url(f));
	fakeapi_push(f, 503, NULL, unavailable, 0);
	fakeapi_push(f, 429, "1", too_many, 0);
	fakeapi_push_echo(f, 201, 2);
	fakeapi_push(f, 200, NULL, ended, 0);
	assert_int_equal(cluster_exec(&o, cx, NULL, &done, msg, sizeof(msg)), 0);
	assert_string_equal(json_string_value(json_object_get(json_object_get(done,
	    "status"), "phase")), "Succeeded");
	assert_int_equal(fakeapi_count(f), 4);
	for (int i = 0; i < 3; i++)
		assert_string_equal(fakeapi_request(f, i), "POST " CX_PATH);
	sent(f, 0, name, token);
	assert_drawn(name, "mcp-");
	assert_token(token);
	for (int i = 1; i < 3; i++) {
		sent(f, i, n2, t2);
		assert_string_equal(n2, name);
		assert_string_equal(t2, token);
	}
	/* Retry-After: 1 was waited out. */
	assert_true(fakeapi_time(f, 2) - fakeapi_time(f, 1) >= 1000);
	snprintf(want, sizeof(want), "GET " CX_PATH "?fieldSelector=metadata.name%%3D%s",
	    name);
	assert_int_equal(strncmp(fakeapi_request(f, 3), want, strlen(want)), 0);
	json_decref(done);
	json_decref(cx);
	fakeapi_stop(f);
	unlink(kc);
}

/*
 * The first create lands but its answer is lost (the connection closes):
 * the retry gets 409, the object under the name carries our token, so it
 * is taken as made. One execution; no third create.
 */
static void
test_create_answer_lost(void **state)
{
	char kc[] = "/tmp/airlock-kc-XXXXXX", msg[1400], name[64], token[64];
	char n2[64], t2[64], want[256];
	struct fakeapi *f = fakeapi_start();
	struct cli_cluster o = { .kubeconfig = kc, .retry_ms = 30000 };
	json_t *cx = new_cx(NULL), *done = NULL;
	int fd = mkstemp(kc);

	(void)state;
	assert_true(fd >= 0);
	close(fd);
	kubeconfig(kc, fakeapi_url(f));
	fakeapi_push(f, 0, NULL, "", 0);	/* stored, answer lost */
	fakeapi_push(f, 409, NULL, exists, 0);
	fakeapi_push_echo(f, 200, 0);		/* the object, as stored */
	fakeapi_push(f, 200, NULL, ended, 0);
	msg[0] = '\0';
	assert_int_equal(cluster_exec(&o, cx, NULL, &done, msg, sizeof(msg)), 0);
	assert_string_equal(msg, "");
	assert_non_null(done);
	assert_int_equal(fakeapi_count(f), 4);
	sent(f, 0, name, token);
	sent(f, 1, n2, t2);
	assert_string_equal(n2, name);
	assert_string_equal(t2, token);
	assert_string_equal(fakeapi_request(f, 0), "POST " CX_PATH);
	assert_string_equal(fakeapi_request(f, 1), "POST " CX_PATH);
	snprintf(want, sizeof(want), "GET " CX_PATH "/%s", name);
	assert_string_equal(fakeapi_request(f, 2), want);
	snprintf(want, sizeof(want), "GET " CX_PATH "?fieldSelector=metadata.name%%3D%s",
	    name);
	assert_int_equal(strncmp(fakeapi_request(f, 3), want, strlen(want)), 0);
	json_decref(done);
	json_decref(cx);
	fakeapi_stop(f);
	unlink(kc);
}

/*
 * A 409 for an object without our token is another's: a name we drew is
 * drawn again (same token); a name the user gave is refused as it was.
 */
static void
test_create_name_taken(void **state)
{
	char kc[] = "/tmp/airlock-kc-XXXXXX", msg[1400], name[64], token[64];
	char n2[64], t2[64];
	static const char other[] = "{\"metadata\":{\"name\":\"x\",\"annotations\":"
	    "{\"airlock.dev/create-token\":\"0123456789abcdef0123456789abcdef\"}}}";
	struct fakeapi *f = fakeapi_start();
	struct cli_cluster o = { .kubeconfig = kc, .retry_ms = 30000 };
	json_t *cx = new_cx(NULL), *done = NULL;
	int fd = mkstemp(kc);

	(void)state;
	assert_true(fd >= 0);
	close(fd);
	kubeconfig(kc, fakeapi_url(f));
	fakeapi_push(f, 409, NULL, exists, 0);
	fakeapi_push(f, 200, NULL, other, 0);
	fakeapi_push_echo(f, 201, 2);
	fakeapi_push(f, 200, NULL, ended, 0);
	assert_int_equal(cluster_exec(&o, cx, NULL, &done, msg, sizeof(msg)), 0);
	assert_int_equal(fakeapi_count(f), 4);
	sent(f, 0, name, token);
	sent(f, 2, n2, t2);
	assert_string_equal(fakeapi_request(f, 2), "POST " CX_PATH);
	assert_string_not_equal(n2, name);
	assert_drawn(n2, "mcp-");
	assert_string_equal(t2, token);
	json_decref(done);
	json_decref(cx);
	fakeapi_stop(f);

	/* --name: the 409 as the API server said it. */
	f = fakeapi_start();
	kubeconfig(kc, fakeapi_url(f));
	cx = new_cx("mine");
	fakeapi_push(f, 409, NULL, exists, 0);
	fakeapi_push(f, 200, NULL, other, 0);
	assert_int_equal(cluster_exec(&o, cx, NULL, &done, msg, sizeof(msg)), -1);
	assert_null(done);
	assert_string_equal(msg, "create: codeexecutions.airlock.dev \"x\" already exists");
	assert_int_equal(fakeapi_count(f), 2);
	assert_string_equal(fakeapi_request(f, 1), "GET " CX_PATH "/mine");
	json_decref(cx);
	fakeapi_stop(f);
	unlink(kc);
}

/*
 * Past --api-retry: airlock run fails with exit 1 and says what the API
 * server said last, how long and how many tries; a real 404 (no CRD) is
 * not retried at all.
 */
static void
test_create_deadline(void **state)
{
	char kc[] = "/tmp/airlock-kc-XXXXXX", errf[] = "/tmp/airlock-err-XXXXXX";
	char buf[4096], *second;
	static const char first[] = "airlock: the API server could not take the "
	    "execution (Resource kind airlock.dev/v1alpha1, Kind=CodeExecution not "
	    "found. There can be a delay between when CustomResourceDefinitions "
	    "are created and when they are available.); trying again for up to "
	    "1 s\n";
	static const char head[] = "airlock: create: the API server refused it "
	    "for 1 s (";
	static const char tail[] = " tries), last with HTTP 503: Resource kind "
	    "airlock.dev/v1alpha1, Kind=CodeExecution not found. There can be a "
	    "delay between when CustomResourceDefinitions are created and when "
	    "they are available.\n";
	struct fakeapi *f = fakeapi_start();
	struct cli_cluster o = { .kubeconfig = kc, .retry_ms = 1000 };
	json_t *cx = new_cx(NULL);
	int fd = mkstemp(kc), efd = mkstemp(errf), saved, tries;
	long long t0;
	ssize_t n;

	(void)state;
	assert_true(fd >= 0 && efd >= 0);
	close(fd);
	kubeconfig(kc, fakeapi_url(f));
	for (int i = 0; i < 40; i++)
		fakeapi_push(f, 503, NULL, unavailable, 0);
	fflush(stderr);
	saved = dup(2);
	dup2(efd, 2);
	t0 = clock_mono_ms();
	assert_int_equal(cluster_run(&o, cx), CLI_EXIT_ERROR);
	t0 = clock_mono_ms() - t0;
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	n = pread(efd, buf, sizeof(buf) - 1, 0);
	close(efd);
	unlink(errf);
	assert_true(n > 0);
	buf[n] = '\0';
	assert_int_equal(strncmp(buf, first, strlen(first)), 0);
	second = buf + strlen(first);
	assert_int_equal(strncmp(second, head, strlen(head)), 0);
	tries = atoi(second + strlen(head));
	assert_int_equal(tries, fakeapi_count(f));
	assert_true(tries >= 3);	/* backoff from 125-250 ms, up to 1 s */
	assert_string_equal(strchr(second + strlen(head), ' '), tail);
	assert_true(t0 >= 1000 && t0 < 2500);
	json_decref(cx);
	fakeapi_stop(f);

	/* 404: the API server has no such resource; said at once. */
	f = fakeapi_start();
	kubeconfig(kc, fakeapi_url(f));
	cx = new_cx(NULL);
	fakeapi_push(f, 404, NULL, "{\"kind\":\"Status\",\"status\":\"Failure\","
	    "\"message\":\"the server could not find the requested resource\","
	    "\"reason\":\"NotFound\",\"code\":404}", 0);
	{
		json_t *done = NULL;

		assert_int_equal(cluster_exec(&o, cx, NULL, &done, buf, sizeof(buf)), -1);
		assert_string_equal(buf, "create: the server could not find the "
		    "requested resource");
	}
	assert_int_equal(fakeapi_count(f), 1);
	json_decref(cx);
	fakeapi_stop(f);
	unlink(kc);
}

/* No API server at all (a closed port): tried for the time, then said. */
static void
test_create_refused(void **state)
{
	char kc[] = "/tmp/airlock-kc-XXXXXX", url[64], msg[1400], port_s[256];
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sa);
	struct cli_cluster o = { .kubeconfig = kc, .retry_ms = 1000 };
	json_t *cx = new_cx(NULL), *done = NULL;
	int fd = mkstemp(kc), s = socket(AF_INET, SOCK_STREAM, 0);
	static const char head[] = "create: no answer from the API server for 1 s (";
	long long t0;

	(void)state;
	assert_true(fd >= 0 && s >= 0);
	close(fd);
	/* A port that was free a moment ago, closed: connect is refused. */
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(getsockname(s, (struct sockaddr *)&sa, &sl), 0);
	close(s);
	snprintf(url, sizeof(url), "http://127.0.0.1:%u", ntohs(sa.sin_port));
	kubeconfig(kc, url);
	t0 = clock_mono_ms();
	assert_int_equal(cluster_exec(&o, cx, NULL, &done, msg, sizeof(msg)), -1);
	t0 = clock_mono_ms() - t0;
	assert_null(done);
	assert_int_equal(strncmp(msg, head, strlen(head)), 0);
	assert_true(atoi(msg + strlen(head)) >= 3);
	snprintf(port_s, sizeof(port_s), "tries): POST " CX_PATH ": Failed to "
	    "connect to 127.0.0.1 port %u ", ntohs(sa.sin_port));
	assert_non_null(strstr(msg, port_s));
	assert_true(t0 >= 1000 && t0 < 2500);
	/* With --api-retry 0: one try, the error as it came. */
	o.retry_ms = 0;
	json_decref(cx);
	cx = new_cx(NULL);
	assert_int_equal(cluster_exec(&o, cx, NULL, &done, msg, sizeof(msg)), -1);
	snprintf(port_s, sizeof(port_s), "create: POST " CX_PATH ": Failed to "
	    "connect to 127.0.0.1 port %u ", ntohs(sa.sin_port));
	assert_int_equal(strncmp(msg, port_s, strlen(port_s)), 0);
	json_decref(cx);
	unlink(kc);
}

/* What is tried again, exactly. */
static void
test_create_retryable(void **state)
{
	static const struct {
		int code;
		long http;
		const char *msg;
		int want;
	} t[] = {
		{ K8S_EHTTP, 503, "Resource kind ... not found", 1 },
		{ K8S_EHTTP, 429, "too many requests", 1 },
		{ K8S_EIO, 0, "POST /x: Failed to connect to 127.0.0.1 port 1 after "
		    "0 ms: Couldn't connect to server", 1 },
		{ K8S_EIO, 0, "POST /x: Empty reply from server", 1 },
		{ K8S_ETIMEDOUT, 0, "POST /x: Operation timed out", 1 },
		{ K8S_EIO, 0, "POST /x: SSL certificate problem: self-signed "
		    "certificate", 0 },
		{ K8S_EIO, 0, "POST /x: Could not resolve host: nowhere", 0 },
		{ K8S_ENOTFOUND, 404, "the server could not find the requested "
		    "resource", 0 },
		{ K8S_EHTTP, 500, "internal error", 0 },
		{ K8S_EHTTP, 504, "timeout", 0 },
		{ K8S_EEXIST, 409, "already exists", 0 },
		{ K8S_EFORBIDDEN, 403, "forbidden", 0 },
		{ K8S_EINVAL, 422, "spec.runtime: Invalid", 0 },
		{ K8S_ETOOBIG, 0, "response larger than", 0 },
		{ K8S_EINVAL, 0, "bad JSON in response", 0 },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		struct k8s_error e;

		k8s_error_set(&e, t[i].code, t[i].http, NULL, "%s", t[i].msg);
		if (cli_create_retryable(&e) != t[i].want)
			fail_msg("%zu (%ld %s): want %d", i, t[i].http, t[i].msg,
			    t[i].want);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_local_profiles),
		cmocka_unit_test(test_local_preload_ignored),
		cmocka_unit_test(test_write_files),
		cmocka_unit_test(test_write_text),
		cmocka_unit_test(test_yaml_exact),
		cmocka_unit_test(test_yaml_round_trip),
		cmocka_unit_test(test_spec_defaults),
		cmocka_unit_test(test_local_network_refusal),
		cmocka_unit_test(test_spec_refused),
		cmocka_unit_test(test_create_retryable),
		cmocka_unit_test(test_create_retried),
		cmocka_unit_test(test_create_answer_lost),
		cmocka_unit_test(test_create_name_taken),
		cmocka_unit_test(test_create_deadline),
		cmocka_unit_test(test_create_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
