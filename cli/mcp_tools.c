/*
 * mcp_tools.c - the MCP server's tools (mcp.c speaks the protocol): their
 * schemas for tools/list, each call's arguments checked and refused naming
 * the argument, and the result as a model should read it. run_code runs a
 * CodeExecution (cluster_exec) or a local run (local_run); on a cluster,
 * open_session and close_session make and end a CodeSession
 * (cluster_session_open, cluster_session_close), whose steps are run_code
 * calls naming it.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cx.h"
#include "mcp_priv.h"
#include "session.h"
#include "xmalloc.h"

#define TOOL		"run_code"
#define OPEN_WAIT_S	120	/* a session's start: the controller's deadline */
#define CLOSE_WAIT_S	60

/* local_run keeps process-wide state: one at a time (run_tool). */
static pthread_mutex_t local_lock = PTHREAD_MUTEX_INITIALIZER;

/* Cut s before a UTF-8 sequence left incomplete at its end (snprintf's). */
static void
utf8_trim(char *s)
{
	size_t n = strlen(s), i = n, need;

	while (i > 0 && i > n - 4 && ((unsigned char)s[i - 1] & 0xc0) == 0x80)
		i--;
	if (i == 0)
		return;
	i--;
	need = ((unsigned char)s[i] & 0xe0) == 0xc0 ? 2 :
	    ((unsigned char)s[i] & 0xf0) == 0xe0 ? 3 :
	    ((unsigned char)s[i] & 0xf8) == 0xf0 ? 4 : 1;
	if (need > 1 && i + need > n)
		s[i] = '\0';
}

static json_t *
run_schema(int local)
{
	json_t *t = json_pack("{s:s, s:s, s:{s:s, s:{s:{s:s, s:s}, s:{s:s, s:s},"
	    " s:{s:s, s:s}, s:{s:s, s:s, s:{s:s}}, s:{s:s, s:i, s:i, s:s}},"
	    " s:[s], s:b}}",
	    "name", TOOL,
	    "description", local ? "Run a program in a fresh, isolated sandbox "
	    "(gVisor, no network) and return its stdout, stderr and exit code. "
	    "Nothing persists between calls: pass every file the program needs." :
	    "Run a program in a fresh, isolated sandbox (gVisor, no network) and "
	    "return its stdout, stderr and exit code. Nothing persists between "
	    "calls, unless they name a session (open_session): then each call is "
	    "the session's next step, its variables, imports and files kept, and "
	    "the last expression's value is returned too.",
	    "inputSchema", "type", "object", "properties",
	    "code", "type", "string", "description", "The program's source.",
	    "runtime", "type", "string", "description",
	    "Language runtime (the cluster's profiles: python, node and bash by "
	    "default); python if not given.",
	    "stdin", "type", "string", "description",
	    "Text given on standard input.",
	    "files", "type", "object", "description",
	    "Extra files in the working directory: relative path to content.",
	    "additionalProperties", "type", "string",
	    "timeout_seconds", "type", "integer", "minimum", 1, "maximum", 3600,
	    "description", "Wall-clock limit from the program's start.",
	    "required", "code", "additionalProperties", 0);

	if (!local)
		json_object_set_new(json_object_get(json_object_get(t, "inputSchema"),
		    "properties"), "session", json_pack("{s:s, s:i, s:s}", "type",
		    "string", "maxLength", 253, "description", "A session's name "
		    "(open_session): run as its next step, in its runtime unless "
		    "runtime is given."));
	return t;
}

static json_t *
open_schema(int local)
{
	(void)local;
	return json_pack("{s:s, s:s, s:{s:s, s:{s:{s:s, s:i, s:s}, s:{s:s, s:i, s:s},"
	    " s:{s:s, s:i, s:i, s:s}}, s:[s], s:b},"
	    " s:{s:s, s:{s:{s:s}, s:{s:s}}, s:[s, s]}}",
	    "name", "open_session",
	    "description", "Open a session: one sandbox (gVisor, no network) whose "
	    "interpreter is kept across run_code calls that name it, with its "
	    "variables, imports and files. Returns its name. Close it with "
	    "close_session when done; it also ends after idle_timeout_seconds "
	    "without a step.",
	    "inputSchema", "type", "object", "properties",
	    "runtime", "type", "string", "maxLength", 63, "description",
	    "The session's runtime: python, python-data or bash (the cluster's "
	    "profiles that offer sessions).",
	    "memory", "type", "string", "maxLength", 63, "description",
	    "Memory for the sandbox, as 512Mi or 2Gi; the cluster's default if "
	    "not given.",
	    "idle_timeout_seconds", "type", "integer", "minimum", SESSION_MIN_S,
	    "maximum", SESSION_MAX_S, "description", "The session ends after this "
	    "long without a step (600 if not given).",
	    "required", "runtime", "additionalProperties", 0,
	    "outputSchema", "type", "object", "properties", "session", "type",
	    "string", "runtime", "type", "string", "required", "session", "runtime");
}

static json_t *
close_schema(int local)
{
	(void)local;
	return json_pack("{s:s, s:s, s:{s:s, s:{s:{s:s, s:i, s:s}}, s:[s], s:b}}",
	    "name", "close_session",
	    "description", "Close a session (open_session): its sandbox and "
	    "everything in it are gone; a step still running is cancelled.",
	    "inputSchema", "type", "object", "properties",
	    "name", "type", "string", "maxLength", 253, "description",
	    "The session's name, as open_session returned it.",
	    "required", "name", "additionalProperties", 0);
}

static json_t *
tool_result_n(const char *text, size_t len, int is_error)
{
	json_t *t = json_stringn(text, len);

	if (t == NULL)
		t = json_string("error: the result is not valid UTF-8");
	return json_pack("{s:[{s:s, s:o}], s:b}", "content", "type", "text",
	    "text", t, "isError", is_error);
}

json_t *
mcp_tool_result(char *text, int is_error)
{
	utf8_trim(text);
	return tool_result_n(text, strlen(text), is_error);
}

/*
 * Whether args (an object) holds a key not among known's n: 1 with it
 * named in msg (cut to 64 bytes, between characters), else 0.
 */
static int
args_unknown(json_t *args, const char *const *known, size_t n, char *msg,
    size_t msz)
{
	const char *key = cli_unknown_key(args, known, n);
	char k[65];

	if (key == NULL)
		return 0;
	snprintf(k, sizeof(k), "%s", key);
	utf8_trim(k);		/* cut between characters */
	snprintf(msg, msz, "arguments: unknown argument \"%s\"", k);
	return 1;
}

/*
 * An optional string argument: 0 with *s (NULL when absent or null), or -1
 * with msg naming it when it is not a string of 1 to max bytes.
 */
static int
arg_string(json_t *args, const char *key, size_t max, const char **s,
    char *msg, size_t msz)
{
	json_t *v = json_object_get(args, key);

	*s = NULL;
	if (v == NULL || json_is_null(v))
		return 0;
	if (!json_is_string(v) || json_string_length(v) == 0 ||
	    json_string_length(v) > max) {
		snprintf(msg, msz, "%s: must be a string of 1 to %zu bytes", key, max);
		return -1;
	}
	*s = json_string_value(v);
	return 0;
}

/*
 * The CodeExecution for a call's arguments, or NULL with why (naming the
 * argument) in msg. runtime: the default when the call gives none (the
 * session's, or python).
 */
static json_t *
build_cx(json_t *args, const char *runtime, int local, char *msg, size_t msz)
{
	static const char *const known[] = { "code", "runtime", "stdin",
	    "files", "timeout_seconds", "session" };
	json_t *spec, *v, *files;
	const char *key, *session;
	struct k8s_error err;

	if (!json_is_object(args)) {
		snprintf(msg, msz, "arguments: must be an object");
		return NULL;
	}
	if (args_unknown(args, known, sizeof(known) / sizeof(known[0]), msg, msz))
		return NULL;
	v = json_object_get(args, "code");
	if (!json_is_string(v) || json_string_length(v) == 0) {
		snprintf(msg, msz, "code: required, a non-empty string");
		return NULL;
	}
	spec = json_pack("{s:O}", "source", v);
	if ((v = json_object_get(args, "runtime")) != NULL &&
	    !json_is_null(v)) {
		if (!json_is_string(v)) {
			snprintf(msg, msz, "runtime: must be a string");
			goto bad;
		}
		json_object_set(spec, "runtime", v);
	} else {
		json_object_set_new(spec, "runtime", json_string(runtime));
	}
	if (arg_string(args, "session", 253, &session, msg, msz) != 0)
		goto bad;
	if (session && local) {
		snprintf(msg, msz, "session: sessions need a cluster (this server "
		    "runs with --local)");
		goto bad;
	}
	if (session)
		json_object_set_new(spec, "session", json_string(session));
	if ((v = json_object_get(args, "stdin")) != NULL && !json_is_null(v)) {
		if (!json_is_string(v)) {
			snprintf(msg, msz, "stdin: must be a string");
			goto bad;
		}
		json_object_set(spec, "stdin", v);
	}
	if ((v = json_object_get(args, "files")) != NULL && !json_is_null(v)) {
		json_t *c;

		if (!json_is_object(v)) {
			snprintf(msg, msz, "files: must be an object of path to content");
			goto bad;
		}
		files = json_array();
		json_object_foreach(v, key, c) {
			if (!json_is_string(c)) {
				char k[256];

				json_decref(files);
				snprintf(k, sizeof(k), "%s", key);
				utf8_trim(k);
				snprintf(msg, msz, "files[\"%s\"]: must be a string", k);
				goto bad;
			}
			json_array_append_new(files, json_pack("{s:s, s:O}", "path",
			    key, "content", c));
		}
		json_object_set_new(spec, "files", files);
	}
	if ((v = json_object_get(args, "timeout_seconds")) != NULL &&
	    !json_is_null(v)) {
		if (!json_is_integer(v) || json_integer_value(v) < 1 ||
		    json_integer_value(v) > 3600) {
			snprintf(msg, msz, "timeout_seconds: must be an integer from 1 to 3600");
			goto bad;
		}
		json_object_set(spec, "timeoutSeconds", v);
	}
	/* The API server's rules, here: a refusal names the spec's field. */
	if (cli_check_spec(spec, &err) != 0) {
		snprintf(msg, msz, "%s", err.message);
		goto bad;
	}
	return json_pack("{s:s, s:s, s:{s:s}, s:o}", "apiVersion",
	    "airlock.dev/v1alpha1", "kind", "CodeExecution", "metadata",
	    "generateName", "mcp-", "spec", spec);
bad:
	json_decref(spec);
	return NULL;
}

/*
 * How it ended, as a model should read it (airlock.tools.format_result's
 * text): the exit or the reason, then each stream, each section ending
 * with one newline. NUL bytes of the output kept (*len counts them).
 */
static char *
describe(json_t *obj, int *is_error, size_t *len)
{
	json_t *st = json_object_get(obj, "status");
	const char *ph = json_string_value(json_object_get(st, "phase"));
	const char *reason = json_string_value(json_object_get(st, "reason"));
	const char *message = json_string_value(json_object_get(st, "message"));
	json_t *code = json_object_get(st, "exitCode");
	static const char *const streams[] = { "stdout", "stderr" };
	char *text = NULL;
	FILE *f = open_memstream(&text, len);
	int any = 0;

	if (f == NULL)
		abort();
	ph = ph ? ph : "";
	*is_error = strcmp(ph, "Succeeded") != 0;
	if (strcmp(ph, "Succeeded") == 0 || (strcmp(ph, "Failed") == 0 &&
	    reason && strcmp(reason, "Error") == 0))
		fprintf(f, "exit code: %lld", (long long)json_integer_value(code));
	else if (json_is_integer(code))
		fprintf(f, "%s: %s (exit code %lld)", reason ? reason : ph,
		    message ? message : "", (long long)json_integer_value(code));
	else
		fprintf(f, "%s: %s", reason ? reason : ph, message ? message : "");
	for (int i = 0; i < 2; i++) {
		json_t *v = json_object_get(st, streams[i]);
		const char *s = json_is_string(v) ? json_string_value(v) : "";
		size_t n = json_is_string(v) ? json_string_length(v) : 0;
		char key[32];
		int cut;

		snprintf(key, sizeof(key), "%sTruncated", streams[i]);
		cut = json_is_true(json_object_get(st, key));
		if (n == 0 && !cut)
			continue;
		fprintf(f, "\n--- %s ---\n", streams[i]);
		/* A final newline is the next section's, or the last one. */
		fwrite(s, 1, !cut && n && s[n - 1] == '\n' ? n - 1 : n, f);
		if (cut)
			fprintf(f, "%s[%s was cut by the sandbox's output limit]",
			    n && s[n - 1] != '\n' ? "\n" : "", streams[i]);
		any = 1;
	}
	if (json_is_string(json_object_get(st, "value"))) {
		/* A session's step: its last expression, as a REPL shows it. */
		json_t *v = json_object_get(st, "value");

		fprintf(f, "\n--- value ---\n");
		fwrite(json_string_value(v), 1, json_string_length(v), f);
		any = 1;
	}
	if (any)
		fputc('\n', f);
	{
		json_t *a;
		size_t i;

		if (json_array_size(json_object_get(st, "artifacts")) > 0)
			fprintf(f, "%s--- files out ---\n", any ? "" : "\n");
		json_array_foreach(json_object_get(st, "artifacts"), i, a)
			fprintf(f, "%s (%s, %lld bytes)\n",
			    json_string_value(json_object_get(a, "path")),
			    json_string_value(json_object_get(a, "contentType")),
			    (long long)json_integer_value(json_object_get(a, "size")));
	}
	if (fclose(f) != 0)
		abort();
	return text;
}

/*
 * Each PNG of the files out (files: a CodeExecutionArtifacts' `files`,
 * may be NULL) whose content has the sha256 the status lists, as image
 * content after res's text.
 */
static void
add_images(json_t *res, json_t *done, json_t *files)
{
	json_t *want = json_object_get(json_object_get(done, "status"), "artifacts");
	json_t *f, *w;
	size_t i, j;

	json_array_foreach(files, i, f) {
		const char *path = json_string_value(json_object_get(f, "path"));
		const char *b64 = json_string_value(json_object_get(f, "content"));
		const char *sha = json_string_value(json_object_get(f, "sha256"));
		int ok = 0;

		if (!path || !b64 || !sha || strcmp(json_string_value(json_object_get(f,
		    "contentType")) ? json_string_value(json_object_get(f,
		    "contentType")) : "", "image/png") != 0)
			continue;
		json_array_foreach(want, j, w)
			ok |= strcmp(json_string_value(json_object_get(w, "path")) ?
			    json_string_value(json_object_get(w, "path")) : "", path) == 0 &&
			    strcmp(json_string_value(json_object_get(w, "sha256")) ?
			    json_string_value(json_object_get(w, "sha256")) : "", sha) == 0;
		if (ok)
			json_array_append_new(json_object_get(res, "content"), json_pack(
			    "{s:s, s:s, s:s}", "type", "image", "data", b64, "mimeType",
			    "image/png"));
	}
}

static json_t *
run_tool(struct mcp *m, json_t *args, atomic_int *cancel)
{
	char msg[2048], rt[64] = "python";
	json_t *cx, *done = NULL, *res, *files = NULL, *v;
	struct k8s_error err;
	char *text;
	int is_error, rc;

	msg[0] = '\0';
	v = json_is_object(args) ? json_object_get(args, "session") : NULL;
	/* A session argument build_cx would refuse is refused there. */
	if (!m->local && json_is_string(v) && json_string_length(v) >= 1 &&
	    json_string_length(v) <= 253 &&
	    (json_object_get(args, "runtime") == NULL ||
	    json_is_null(json_object_get(args, "runtime")))) {
		/* A step's runtime must be its session's: ask it. */
		rc = cluster_session_runtime(m->co, json_string_value(v), rt,
		    sizeof(rt), msg, sizeof(msg));
		if (rc != 0) {
			text = xasprintf(rc == -2 ? "error: the call was refused: %s" :
			    "error: the sandbox could not run it: %s", msg);
			res = mcp_tool_result(text, 1);
			free(text);
			return res;
		}
	}
	if ((cx = build_cx(args, rt, m->local, msg, sizeof(msg))) == NULL) {
		text = xasprintf("error: the call was refused: %s", msg);
		res = mcp_tool_result(text, 1);
		free(text);
		return res;
	}
	if (m->local) {
		/*
		 * local_run keeps process-wide state (the signal mask its
		 * children start with): one at a time. A cancel does not reach
		 * it; its timeout does.
		 */
		pthread_mutex_lock(&local_lock);
		if (atomic_load(cancel)) {	/* cancelled while it queued */
			rc = -1;
			snprintf(err.message, sizeof(err.message), "cancelled");
		} else {
			struct local_opts lo = *m->lo;

			lo.files_out = &files;
			rc = local_run(m->cfg, cx, &lo, &done, &err);
		}
		pthread_mutex_unlock(&local_lock);
		if (rc != 0)
			snprintf(msg, sizeof(msg), "%s", err.message);
		rc = rc ? -1 : 0;
	} else {
		rc = cluster_exec(m->co, cx, cancel, &done, msg, sizeof(msg));
		if (rc == 0)
			files = cluster_files_out(m->co, done);
	}
	json_decref(cx);
	if (rc != 0) {
		text = xasprintf(rc == -2 ? "error: the call was refused: %s" :
		    "error: the sandbox could not run it: %s", msg);
		res = mcp_tool_result(text, 1);
	} else {
		size_t len;

		text = describe(done, &is_error, &len);
		res = tool_result_n(text, len, is_error);
		add_images(res, done, files);
	}
	free(text);
	json_decref(done);
	json_decref(files);
	return res;
}

/* "REASON: message" of a session, for a model to read. */
static char *
session_end(json_t *obj)
{
	json_t *st = json_object_get(obj, "status");
	const char *why = json_string_value(json_object_get(st, "reason"));
	const char *m = json_string_value(json_object_get(st, "message"));
	const char *ph = json_string_value(json_object_get(st, "phase"));

	return xasprintf("%s%s%s", why ? why : ph ? ph : "Pending",
	    m && *m ? ": " : "", m && *m ? m : "");
}

static json_t *
open_tool(struct mcp *m, json_t *args, atomic_int *cancel)
{
	static const char *const known[] = { "runtime", "memory",
	    "idle_timeout_seconds" };
	struct session_opts so = { .mcp = 1 };
	char msg[2048], *text;
	json_t *s = NULL, *v, *out = NULL, *res;
	int rc;

	msg[0] = '\0';
	if (!json_is_object(args)) {
		snprintf(msg, sizeof(msg), "arguments: must be an object");
		goto refuse;
	}
	if (args_unknown(args, known, sizeof(known) / sizeof(known[0]), msg,
	    sizeof(msg)) ||
	    arg_string(args, "runtime", 63, &so.runtime, msg, sizeof(msg)) ||
	    arg_string(args, "memory", 63, &so.memory, msg, sizeof(msg)))
		goto refuse;
	if ((v = json_object_get(args, "idle_timeout_seconds")) != NULL &&
	    !json_is_null(v)) {
		if (!json_is_integer(v) || json_integer_value(v) < SESSION_MIN_S ||
		    json_integer_value(v) > SESSION_MAX_S) {
			snprintf(msg, sizeof(msg), "idle_timeout_seconds: must be an "
			    "integer from %d to %d", SESSION_MIN_S, SESSION_MAX_S);
			goto refuse;
		}
		so.idle_s = json_integer_value(v);
	}
	if ((s = session_build(&so, msg, sizeof(msg))) == NULL)
		goto refuse;
	rc = cluster_session_open(m->co, s, OPEN_WAIT_S, cancel, &out, msg,
	    sizeof(msg));
	json_decref(s);
	if (rc != 0) {
		text = xasprintf(rc == -2 ? "error: the call was refused: %s" :
		    "error: the session could not be opened: %s", msg);
		res = mcp_tool_result(text, 1);
	} else if (strcmp(json_string_value(json_object_get(json_object_get(out,
	    "status"), "phase")), "Ready") != 0) {
		text = session_end(out);	/* Ended: Rejected, Failed, ... */
		res = mcp_tool_result(text, 1);
	} else {
		text = xstrdup(k8s_obj_name(out));
		res = mcp_tool_result(text, 0);
		json_object_set_new(res, "structuredContent", json_pack("{s:s, s:s}",
		    "session", k8s_obj_name(out), "runtime", so.runtime));
	}
	free(text);
	json_decref(out);
	return res;
refuse:
	text = xasprintf("error: the call was refused: %s", msg);
	res = mcp_tool_result(text, 1);
	free(text);
	return res;
}

static json_t *
close_tool(struct mcp *m, json_t *args, atomic_int *cancel)
{
	static const char *const known[] = { "name" };
	const char *name = NULL;
	char msg[2048], *text, *end;
	json_t *out = NULL, *res;
	int rc;

	msg[0] = '\0';
	if (!json_is_object(args))
		snprintf(msg, sizeof(msg), "arguments: must be an object");
	else if (args_unknown(args, known, 1, msg, sizeof(msg)) ||
	    arg_string(args, "name", 253, &name, msg, sizeof(msg)))
		;
	else if (name == NULL)
		snprintf(msg, sizeof(msg), "name: required, a session's name");
	if (msg[0]) {
		text = xasprintf("error: the call was refused: %s", msg);
		res = mcp_tool_result(text, 1);
		free(text);
		return res;
	}
	rc = cluster_session_close(m->co, name, CLOSE_WAIT_S, cancel, &out, msg,
	    sizeof(msg));
	if (rc != 0) {
		text = xasprintf(rc == -2 ? "error: the call was refused: name: %s" :
		    "error: the session could not be closed: %s", msg);
		res = mcp_tool_result(text, 1);
	} else {
		end = session_end(out);
		text = xasprintf("session %s has ended: %s", name, end);
		free(end);
		res = mcp_tool_result(text, 0);
	}
	free(text);
	json_decref(out);
	return res;
}

const struct tool mcp_tools[] = {
	{ TOOL, 0, run_schema, run_tool },
	{ "open_session", 1, open_schema, open_tool },
	{ "close_session", 1, close_schema, close_tool },
};
const size_t mcp_ntools = sizeof(mcp_tools) / sizeof(mcp_tools[0]);

json_t *
mcp_tools_list(int local)
{
	json_t *l = json_array();

	for (size_t i = 0; i < mcp_ntools; i++)
		if (!local || !mcp_tools[i].cluster_only)
			json_array_append_new(l, mcp_tools[i].schema(local));
	return json_pack("{s:o}", "tools", l);
}
