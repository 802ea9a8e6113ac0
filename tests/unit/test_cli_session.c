/*
 * Unit tests: cli/session.c and what it added to cli/common.c - the
 * CodeSession `airlock session create` builds from its flags (each refusal
 * naming the flag and the field), the session spec check, a step's value
 * after its stdout, the capped file read; and against
 * tests/support/fakeapi.c, the requests create, close and run --session's
 * runtime lookup send, and what they make of the answers.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "cli.h"
#include "fakeapi.h"
#include "xmalloc.h"

#define SESSIONS "/apis/airlock.dev/v1alpha1/namespaces/ns1/codesessions"

/* A file of content under a fresh temp name, into path (64 bytes). */
static void
temp_file(char *path, const char *content, size_t len)
{
	int fd;

	snprintf(path, 64, "/tmp/airlock-sess-XXXXXX");
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, content, len), (ssize_t)len);
	close(fd);
}

static char *
dump(json_t *v)
{
	return json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS);
}

/* Every flag into the object, files read from their LOCAL. */
static void
test_build_exact(void **state)
{
	char local[64], arg[128], msg[512], *s;
	char *files[2] = { arg, NULL };
	struct session_opts o = { .runtime = "python-data", .memory = "1Gi",
	    .cpu = "500m", .idle_s = 60, .life_s = 600, .files = files,
	    .nfiles = 1 };
	json_t *v;

	(void)state;
	temp_file(local, "a,b\n1,2\n", 8);
	snprintf(arg, sizeof(arg), "in/data.csv=%s", local);
	v = session_build(&o, msg, sizeof(msg));
	if (v == NULL)
		fail_msg("refused: %s", msg);
	s = dump(v);
	assert_string_equal(s, "{\"apiVersion\":\"airlock.dev/v1alpha1\","
	    "\"kind\":\"CodeSession\",\"metadata\":{\"generateName\":\"session-\"},"
	    "\"spec\":{\"files\":[{\"content\":\"a,b\\n1,2\\n\",\"path\":"
	    "\"in/data.csv\"}],\"idleTimeoutSeconds\":60,\"maxLifetimeSeconds\":600,"
	    "\"resources\":{\"cpu\":\"500m\",\"memory\":\"1Gi\"},\"runtime\":"
	    "\"python-data\"}}");
	free(s);
	json_decref(v);

	/* The least: a runtime; --name in place of generateName; no defaults. */
	o = (struct session_opts){ .runtime = "bash", .name = "analysis" };
	v = session_build(&o, msg, sizeof(msg));
	assert_non_null(v);
	s = dump(v);
	assert_string_equal(s, "{\"apiVersion\":\"airlock.dev/v1alpha1\","
	    "\"kind\":\"CodeSession\",\"metadata\":{\"name\":\"analysis\"},"
	    "\"spec\":{\"runtime\":\"bash\"}}");
	free(s);
	json_decref(v);

	/* --file PATH alone: the local file of that name. */
	assert_int_equal(chdir("/tmp"), 0);
	snprintf(arg, sizeof(arg), "%s", local + strlen("/tmp/"));
	o = (struct session_opts){ .runtime = "python", .files = files, .nfiles = 1 };
	v = session_build(&o, msg, sizeof(msg));
	if (v == NULL)
		fail_msg("refused: %s", msg);
	assert_string_equal(json_string_value(json_object_get(json_array_get(
	    json_object_get(json_object_get(v, "spec"), "files"), 0), "path")), arg);
	assert_string_equal(json_string_value(json_object_get(json_array_get(
	    json_object_get(json_object_get(v, "spec"), "files"), 0), "content")),
	    "a,b\n1,2\n");
	json_decref(v);
	unlink(local);
}

/* tmpl with each '@' replaced by local, into out. */
static void
subst(char *out, size_t n, const char *tmpl, const char *local)
{
	size_t o = 0;

	for (const char *p = tmpl; *p && o + 1 < n; p++) {
		if (*p != '@') {
			out[o++] = *p;
			continue;
		}
		for (const char *q = local; *q && o + 1 < n; q++)
			out[o++] = *q;
	}
	out[o] = '\0';
}

/* Each refusal names the flag, and the field where the spec check spoke. */
static void
test_build_refused(void **state)
{
	char text[64], bin[64], big[64], a1[128], a2[128], want[512], msg[512];
	char *two[2] = { a1, a2 }, *one[1] = { a1 };
	char *blob = malloc(262145);
	struct {
		struct session_opts	 o;
		const char		*msg;	
	} cases[] = {
		{ { .runtime = NULL }, "--runtime: required (python, python-data, bash)" },
		{ { .runtime = "Python" }, "--runtime: spec.runtime: must be a lower-case "
		  "name such as python" },
		{ { .runtime = "python", .memory = "lots" }, "--memory: "
		  "spec.resources.memory: must be a positive quantity such as 500m or "
		  "1Gi, not 'lots'" },
		{ { .runtime = "python", .cpu = "0" }, "--cpu: spec.resources.cpu: must "
		  "be a positive quantity such as 500m or 1Gi, not '0'" },
		{ { .runtime = "python", .idle_s = 9 }, "--idle-timeout: "
		  "spec.idleTimeoutSeconds: must be an integer from 10 to 86400" },
		{ { .runtime = "python", .life_s = 86401 }, "--max-lifetime: "
		  "spec.maxLifetimeSeconds: must be an integer from 10 to 86400" },
	};
	struct {
		const char *arg1, *arg2, *msg;
	} fcases[] = {
		{ "../up=@", NULL, "--file: spec.files[0]: path '../up' must be "
		  "relative, not start with '..', without '.' or '..' segments or "
		  "control characters" },
		{ "a=@", "a=@", "--file: spec.files[1]: path 'a' is given twice" },
		{ "a=@", "a/b=@", "--file: spec.files: 'a' cannot be both a file "
		  "and the directory of 'a/b'" },
		{ "=@", NULL, "--file '=@': give PATH or PATH=LOCAL, neither empty" },
		{ "x=", NULL, "--file 'x=': give PATH or PATH=LOCAL, neither empty" },
		{ "x=@.gone", NULL, "--file x=@.gone: cannot read '@.gone': No such "
		  "file or directory" },
		{ "x=@", NULL, "BIN" },
		{ "x=@", NULL, "BIG" },
	};

	(void)state;
	temp_file(text, "t\n", 2);
	temp_file(bin, "a\0b", 3);
	memset(blob, 'x', 262145);
	temp_file(big, blob, 262145);
	free(blob);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		json_t *v = session_build(&cases[i].o, msg, sizeof(msg));

		if (v != NULL)
			fail_msg("case %zu was taken", i);
		assert_string_equal(msg, cases[i].msg);
	}
	for (size_t i = 0; i < sizeof(fcases) / sizeof(fcases[0]); i++) {
		struct session_opts o = { .runtime = "python", .files = fcases[i].arg2 ?
		    two : one, .nfiles = fcases[i].arg2 ? 2 : 1 };
		const char *local = strcmp(fcases[i].msg, "BIN") == 0 ? bin :
		    strcmp(fcases[i].msg, "BIG") == 0 ? big : text;
		json_t *v;

		subst(a1, sizeof(a1), fcases[i].arg1, local);
		if (fcases[i].arg2)
			subst(a2, sizeof(a2), fcases[i].arg2, local);
		if (strcmp(fcases[i].msg, "BIN") == 0)
			snprintf(want, sizeof(want), "--file x=%s: '%s' is not UTF-8 "
			    "text without NUL bytes (spec.files holds text)", bin, bin);
		else if (strcmp(fcases[i].msg, "BIG") == 0)
			snprintf(want, sizeof(want), "--file x=%s: cannot read '%s': "
			    "more than 262144 bytes", big, big);
		else
			subst(want, sizeof(want), fcases[i].msg, local);
		v = session_build(&o, msg, sizeof(msg));
		if (v != NULL)
			fail_msg("file case %zu was taken", i);
		assert_string_equal(msg, want);
	}
	/* 262144 bytes in all: two files of 131073 are one too many. */
	{
		char h1[64], h2[64];
		char *half = malloc(131073);
		struct session_opts o = { .runtime = "python", .files = two, .nfiles = 2 };

		memset(half, 'y', 131073);
		temp_file(h1, half, 131073);
		temp_file(h2, half, 131073);
		free(half);
		snprintf(a1, sizeof(a1), "a=%s", h1);
		snprintf(a2, sizeof(a2), "b=%s", h2);
		assert_null(session_build(&o, msg, sizeof(msg)));
		assert_string_equal(msg, "--file: spec.files: at most 262144 bytes in all");
		unlink(h1);
		unlink(h2);
	}
	unlink(text);
	unlink(bin);
	unlink(big);
}

static void
test_check_session_spec(void **state)
{
	static const struct {
		const char *spec, *msg;
	} cases[] = {
		{ "{}", "spec.runtime: required" },
		{ "{\"runtime\":\"python\",\"source\":\"x\"}", "spec.source: unknown field" },
		{ "{\"runtime\":\"python\",\"idleTimeoutSeconds\":\"600\"}",
		  "spec.idleTimeoutSeconds: must be an integer from 10 to 86400" },
		{ "{\"runtime\":\"python\",\"maxLifetimeSeconds\":9}",
		  "spec.maxLifetimeSeconds: must be an integer from 10 to 86400" },
		{ "{\"runtime\":\"python\",\"ttlSecondsAfterFinished\":-1}",
		  "spec.ttlSecondsAfterFinished: must be an integer from 0 to 2592000" },
		{ "{\"runtime\":\"python\",\"close\":1}", "spec.close: must be true or false" },
		{ "{\"runtime\":\"python\",\"resources\":{\"gpu\":\"1\"}}",
		  "spec.resources.gpu: unknown field" },
		{ "{\"runtime\":\"python\",\"files\":[{\"path\":\"a\"}]}",
		  "spec.files[0]: needs path and content, strings, and nothing else" },
	};
	struct k8s_error err;
	json_t *s;
	char *d;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		s = json_loads(cases[i].spec, 0, NULL);
		assert_non_null(s);
		assert_int_equal(cli_check_session_spec(s, &err), K8S_EINVAL);
		assert_string_equal(err.message, cases[i].msg);
		json_decref(s);
	}
	/* Taken as it is: the API server's defaults are not written in. */
	s = json_loads("{\"runtime\":\"bash\",\"idleTimeoutSeconds\":10,"
	    "\"maxLifetimeSeconds\":86400,\"ttlSecondsAfterFinished\":0,"
	    "\"close\":true}", 0, NULL);
	assert_int_equal(cli_check_session_spec(s, &err), 0);
	d = dump(s);
	assert_string_equal(d, "{\"close\":true,\"idleTimeoutSeconds\":10,"
	    "\"maxLifetimeSeconds\":86400,\"runtime\":\"bash\","
	    "\"ttlSecondsAfterFinished\":0}");
	free(d);
	json_decref(s);
}

static char *
value_text(const char *status, int tty)
{
	json_t *st = json_loads(status, 0, NULL);
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(st);
	cli_print_value(f, st, tty);
	fclose(f);
	json_decref(st);
	return buf;
}

/* The value on a line of its own, after whatever stdout left. */
static void
test_print_value(void **state)
{
	static const struct {
		const char *status, *want;
		int tty;
	} cases[] = {
		{ "{\"stdout\":\"x = 41\\n\",\"value\":\"42\"}", "42\n", 0 },
		{ "{\"stdout\":\"tail\",\"value\":\"42\"}", "\n42\n", 0 },
		{ "{\"value\":\"'a\\\\nb'\"}", "'a\\nb'\n", 0 },
		{ "{\"stdout\":\"\",\"value\":\"[1, 2]\"}", "[1, 2]\n", 0 },
		{ "{\"stdout\":\"out\\n\"}", "", 0 },
		{ "{\"value\":null}", "", 0 },
		/* A terminal is not driven by it. */
		{ "{\"value\":\"\\u001b]52;c;eA==\\u0007\"}", "^[]52;c;eA==^G\n", 1 },
		{ "{\"value\":\"\\u001b[2J\"}", "\x1b[2J\n", 0 },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *got = value_text(cases[i].status, cases[i].tty);

		if (strcmp(got, cases[i].want) != 0)
			fail_msg("case %zu: '%s', not '%s'", i, got, cases[i].want);
		free(got);
	}
}

static void
test_slurp(void **state)
{
	char path[64], msg[128], *b;
	size_t len = 0;

	(void)state;
	temp_file(path, "12345", 5);
	b = cli_slurp(path, 5, &len, msg, sizeof(msg));
	assert_non_null(b);
	assert_int_equal(len, 5);
	assert_string_equal(b, "12345");
	free(b);
	assert_null(cli_slurp(path, 4, &len, msg, sizeof(msg)));
	assert_string_equal(msg, "more than 4 bytes");
	unlink(path);
	assert_null(cli_slurp(path, 4, &len, msg, sizeof(msg)));
	assert_string_equal(msg, "No such file or directory");
}

/* --- against the fake API server ---------------------------------------- */

struct fx {
	struct fakeapi		*f;
	char			 kc[32];
	struct cli_cluster	 o;
};

static int
setup(void **state)
{
	struct fx *fx = calloc(1, sizeof(*fx));
	int fd;
	FILE *f;

	fx->f = fakeapi_start();
	snprintf(fx->kc, sizeof(fx->kc), "/tmp/airlock-kc-XXXXXX");
	fd = mkstemp(fx->kc);
	assert_true(fd >= 0);
	f = fdopen(fd, "w");
	fprintf(f, "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
	    "clusters:\n- name: c\n  cluster:\n    server: %s\n"
	    "users:\n- name: u\n  user: {}\n"
	    "contexts:\n- name: c\n  context:\n    cluster: c\n    user: u\n"
	    "    namespace: ns1\n", fakeapi_url(fx->f));
	fclose(f);
	fx->o = (struct cli_cluster){ .kubeconfig = fx->kc, .retry_ms = 0 };
	*state = fx;
	return 0;
}

static int
teardown(void **state)
{
	struct fx *fx = *state;

	fakeapi_stop(fx->f);
	unlink(fx->kc);
	free(fx);
	return 0;
}

/* A list of one object, as a watch's first GET returns it. Caller frees. */
static char *
list_of(const char *kind, const char *name, const char *status)
{
	return xasprintf("{\"kind\":\"%sList\",\"metadata\":{\"resourceVersion\":"
	    "\"7\"},\"items\":[{\"metadata\":{\"name\":\"%s\",\"namespace\":"
	    "\"ns1\"},\"status\":%s}]}", kind, name, status);
}

#define READY	"{\"phase\":\"Ready\"}"
#define CLOSED	"{\"phase\":\"Ended\",\"reason\":\"Closed\",\"message\":" \
		"\"closed by spec.close\"}"

static const char not_found[] = "{\"kind\":\"Status\",\"status\":\"Failure\","
    "\"message\":\"codesessions.airlock.dev \\\"gone\\\" not found\","
    "\"reason\":\"NotFound\",\"code\":404}";

/*
 * Made under a drawn session-XXXXX name with the create token, then
 * watched to Ready: the object as it was then.
 */
static void
test_open_ready(void **state)
{
	struct fx *fx = *state;
	char *ready = list_of("CodeSession", "session-x", READY);
	struct session_opts so = { .runtime = "python", .memory = "256Mi" };
	char msg[512], want[256];
	json_t *s = session_build(&so, msg, sizeof(msg)), *out = NULL, *body;
	const char *name;

	assert_non_null(s);
	fakeapi_push_echo(fx->f, 201, 0);
	fakeapi_push(fx->f, 200, NULL, ready, 0);
	assert_int_equal(cluster_session_open(&fx->o, s, 10, NULL, &out, msg,
	    sizeof(msg)), 0);
	assert_string_equal(json_string_value(json_object_get(json_object_get(out,
	    "status"), "phase")), "Ready");
	assert_int_equal(fakeapi_count(fx->f), 2);
	assert_string_equal(fakeapi_request(fx->f, 0), "POST " SESSIONS);
	body = json_loads(fakeapi_body(fx->f, 0), 0, NULL);
	name = json_string_value(json_object_get(json_object_get(body, "metadata"),
	    "name"));
	assert_int_equal(strncmp(name, "session-", 8), 0);
	assert_int_equal(strlen(name), 13);
	assert_null(json_object_get(json_object_get(body, "metadata"), "generateName"));
	assert_int_equal(strlen(json_string_value(json_object_get(json_object_get(
	    json_object_get(body, "metadata"), "annotations"), CLI_ANN_CREATE_TOKEN))),
	    32);
	assert_string_equal(json_string_value(json_object_get(json_object_get(
	    json_object_get(body, "spec"), "resources"), "memory")), "256Mi");
	snprintf(want, sizeof(want), "GET " SESSIONS "?fieldSelector=metadata.name%%3D%s",
	    name);
	assert_int_equal(strncmp(fakeapi_request(fx->f, 1), want, strlen(want)), 0);
	json_decref(body);
	json_decref(out);
	json_decref(s);
	free(ready);
}

/* Refused by the API server (422): -2, its words. */
static void
test_open_refused(void **state)
{
	struct fx *fx = *state;
	struct session_opts so = { .runtime = "python" };
	char msg[512];
	json_t *s = session_build(&so, msg, sizeof(msg)), *out = NULL;

	fakeapi_push(fx->f, 422, NULL, "{\"kind\":\"Status\",\"status\":\"Failure\","
	    "\"message\":\"CodeSession.airlock.dev \\\"s\\\" is invalid: "
	    "spec.maxLifetimeSeconds: Invalid value\",\"reason\":\"Invalid\","
	    "\"code\":422}", 0);
	assert_int_equal(cluster_session_open(&fx->o, s, 10, NULL, &out, msg,
	    sizeof(msg)), -2);
	assert_null(out);
	assert_string_equal(msg, "create: CodeSession.airlock.dev \"s\" is invalid: "
	    "spec.maxLifetimeSeconds: Invalid value");
	assert_int_equal(fakeapi_count(fx->f), 1);
	json_decref(s);
}

/* close: a merge patch of spec.close, then the wait to Ended. */
static void
test_close(void **state)
{
	struct fx *fx = *state;
	char *closed = list_of("CodeSession", "an", CLOSED);
	char msg[512];
	json_t *out = NULL;

	fakeapi_push(fx->f, 200, NULL, "{\"metadata\":{\"name\":\"an\"}}", 0);
	fakeapi_push(fx->f, 200, NULL, closed, 0);
	assert_int_equal(cluster_session_close(&fx->o, "an", 10, NULL, &out, msg,
	    sizeof(msg)), 0);
	assert_string_equal(json_string_value(json_object_get(json_object_get(out,
	    "status"), "reason")), "Closed");
	assert_string_equal(fakeapi_request(fx->f, 0), "PATCH " SESSIONS "/an");
	assert_string_equal(fakeapi_ctype(fx->f, 0), "application/merge-patch+json");
	assert_string_equal(fakeapi_body(fx->f, 0), "{\"spec\":{\"close\":true}}");
	json_decref(out);

	/* No such session: -2, said so; nothing waited for. */
	fakeapi_push(fx->f, 404, NULL, not_found, 0);
	assert_int_equal(cluster_session_close(&fx->o, "gone", 10, NULL, &out, msg,
	    sizeof(msg)), -2);
	assert_null(out);
	assert_string_equal(msg, "no session 'gone' in namespace ns1");
	assert_int_equal(fakeapi_count(fx->f), 3);
	free(closed);
}

/* run --session without -r: the session's runtime, read. */
static void
test_session_runtime(void **state)
{
	struct fx *fx = *state;
	char rt[64], msg[512];

	fakeapi_push(fx->f, 200, NULL, "{\"metadata\":{\"name\":\"an\"},\"spec\":"
	    "{\"runtime\":\"python-data\"}}", 0);
	assert_int_equal(cluster_session_runtime(&fx->o, "an", rt, sizeof(rt), msg,
	    sizeof(msg)), 0);
	assert_string_equal(rt, "python-data");
	assert_string_equal(fakeapi_request(fx->f, 0), "GET " SESSIONS "/an");
	fakeapi_push(fx->f, 404, NULL, not_found, 0);
	assert_int_equal(cluster_session_runtime(&fx->o, "gone", rt, sizeof(rt), msg,
	    sizeof(msg)), -2);
	assert_string_equal(msg, "spec.session: no session 'gone' in namespace ns1");
	/* A runtime too long for the buffer is not cut into another's name. */
	fakeapi_push(fx->f, 200, NULL, "{\"metadata\":{\"name\":\"an\"},\"spec\":"
	    "{\"runtime\":\"python-data\"}}", 0);
	assert_int_equal(cluster_session_runtime(&fx->o, "an", rt, 6, msg,
	    sizeof(msg)), -1);
	assert_string_equal(msg, "session an has no spec.runtime");
}

/* --- the MCP server's session tools, over pipes ------------------------- */

struct srv {
	struct cli_cluster	*o;
	FILE			*in, *out;
	pthread_t		 th;
	int			 to_srv;
	FILE			*from_srv;
};

static void *
serve(void *arg)
{
	struct srv *s = arg;
	struct local_opts lo = { 0 };

	(void)mcp_serve(s->o, &lo, 0, s->in, s->out);
	fclose(s->in);
	fclose(s->out);
	return NULL;
}

static void
srv_start(struct srv *s, struct cli_cluster *o)
{
	int a[2], b[2];

	assert_int_equal(pipe(a), 0);
	assert_int_equal(pipe(b), 0);
	s->o = o;
	s->in = fdopen(a[0], "r");
	s->to_srv = a[1];
	s->out = fdopen(b[1], "w");
	s->from_srv = fdopen(b[0], "r");
	assert_int_equal(pthread_create(&s->th, NULL, serve, s), 0);
}

/* One request in, its response's result out (new reference). */
static json_t *
call(struct srv *s, const char *req)
{
	char line[65536];
	json_t *r, *res;

	assert_int_equal(write(s->to_srv, req, strlen(req)), (ssize_t)strlen(req));
	assert_int_equal(write(s->to_srv, "\n", 1), 1);
	assert_non_null(fgets(line, sizeof(line), s->from_srv));
	r = json_loads(line, 0, NULL);
	assert_non_null(r);
	res = json_incref(json_object_get(r, "result"));
	json_decref(r);
	if (res == NULL)
		fail_msg("no result: %s", line);
	return res;
}

static void
srv_stop(struct srv *s)
{
	close(s->to_srv);
	pthread_join(s->th, NULL);
	fclose(s->from_srv);
}

static const char *
result_text(json_t *res)
{
	return json_string_value(json_object_get(json_array_get(json_object_get(res,
	    "content"), 0), "text"));
}

/*
 * open_session: the name as text and as structured content; run_code with
 * session: the session's runtime read, spec.session sent, the value after
 * the streams; close_session: spec.close, then how it ended.
 */
static void
test_mcp_tools(void **state)
{
	struct fx *fx = *state;
	char *ready = list_of("CodeSession", "session-x", READY);
	char *step = list_of("CodeExecution", "m", "{\"phase\":\"Succeeded\","
	    "\"reason\":\"Completed\",\"exitCode\":0,\"stdout\":\"hi\\n\","
	    "\"value\":\"42\"}");
	char *closed = list_of("CodeSession", "an", CLOSED);
	struct srv s;
	json_t *res, *body, *sc;
	char *d;

	srv_start(&s, &fx->o);
	fakeapi_push_echo(fx->f, 201, 0);
	fakeapi_push(fx->f, 200, NULL, ready, 0);
	res = call(&s, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\","
	    "\"params\":{\"name\":\"open_session\",\"arguments\":{\"runtime\":"
	    "\"python-data\",\"memory\":\"1Gi\",\"idle_timeout_seconds\":60}}}");
	body = json_loads(fakeapi_body(fx->f, 0), 0, NULL);
	d = dump(json_object_get(body, "spec"));
	assert_string_equal(d, "{\"idleTimeoutSeconds\":60,\"resources\":"
	    "{\"memory\":\"1Gi\"},\"runtime\":\"python-data\"}");
	free(d);
	assert_false(json_is_true(json_object_get(res, "isError")));
	assert_int_equal(strncmp(json_string_value(json_object_get(json_object_get(
	    body, "metadata"), "name")), "session-", 8), 0);
	/* The name of the session that was Ready (the fake's list's). */
	assert_string_equal(result_text(res), "session-x");
	sc = json_object_get(res, "structuredContent");
	assert_string_equal(json_string_value(json_object_get(sc, "session")),
	    result_text(res));
	assert_string_equal(json_string_value(json_object_get(sc, "runtime")),
	    "python-data");
	assert_int_equal(json_object_size(sc), 2);
	json_decref(body);
	json_decref(res);

	fakeapi_push(fx->f, 200, NULL, "{\"metadata\":{\"name\":\"an\"},\"spec\":"
	    "{\"runtime\":\"python-data\"}}", 0);
	fakeapi_push_echo(fx->f, 201, 3);
	fakeapi_push(fx->f, 200, NULL, step, 0);
	res = call(&s, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\","
	    "\"params\":{\"name\":\"run_code\",\"arguments\":{\"code\":"
	    "\"print('hi')\\nx + 1\",\"session\":\"an\"}}}");
	assert_string_equal(fakeapi_request(fx->f, 2), "GET " SESSIONS "/an");
	body = json_loads(fakeapi_body(fx->f, 3), 0, NULL);
	assert_string_equal(json_string_value(json_object_get(json_object_get(body,
	    "spec"), "session")), "an");
	assert_string_equal(json_string_value(json_object_get(json_object_get(body,
	    "spec"), "runtime")), "python-data");
	assert_string_equal(result_text(res), "exit code: 0\n--- stdout ---\nhi\n"
	    "--- value ---\n42\n");
	assert_false(json_is_true(json_object_get(res, "isError")));
	json_decref(body);
	json_decref(res);

	/* No such session: refused, named; nothing created. */
	fakeapi_push(fx->f, 404, NULL, not_found, 0);
	res = call(&s, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\","
	    "\"params\":{\"name\":\"run_code\",\"arguments\":{\"code\":\"1\","
	    "\"session\":\"gone\"}}}");
	assert_string_equal(result_text(res), "error: the call was refused: "
	    "spec.session: no session 'gone' in namespace ns1");
	assert_true(json_is_true(json_object_get(res, "isError")));
	assert_int_equal(fakeapi_count(fx->f), 6);
	json_decref(res);

	fakeapi_push(fx->f, 200, NULL, "{\"metadata\":{\"name\":\"an\"}}", 0);
	fakeapi_push(fx->f, 200, NULL, closed, 0);
	res = call(&s, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\","
	    "\"params\":{\"name\":\"close_session\",\"arguments\":{\"name\":\"an\"}}}");
	assert_string_equal(fakeapi_request(fx->f, 6), "PATCH " SESSIONS "/an");
	assert_string_equal(fakeapi_body(fx->f, 6), "{\"spec\":{\"close\":true}}");
	assert_string_equal(result_text(res), "session an has ended: Closed: closed "
	    "by spec.close");
	assert_false(json_is_true(json_object_get(res, "isError")));
	json_decref(res);
	srv_stop(&s);
	free(ready);
	free(step);
	free(closed);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_build_exact),
		cmocka_unit_test(test_build_refused),
		cmocka_unit_test(test_check_session_spec),
		cmocka_unit_test(test_print_value),
		cmocka_unit_test(test_slurp),
		cmocka_unit_test_setup_teardown(test_open_ready, setup, teardown),
		cmocka_unit_test_setup_teardown(test_open_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_close, setup, teardown),
		cmocka_unit_test_setup_teardown(test_session_runtime, setup, teardown),
		cmocka_unit_test_setup_teardown(test_mcp_tools, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
