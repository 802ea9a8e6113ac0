/*
 * mcp.c - bin/airlock mcp: a Model Context Protocol server on stdio.
 *
 * JSON-RPC 2.0, one message per line (MCP's stdio transport), the
 * initialize handshake's revisions 2024-11-05 to 2025-11-25. The tool
 * run_code: each call is a CodeExecution made and awaited in a thread of
 * its own (cluster_exec), or a local run under gVisor (local_run), so that
 * ping, other calls and notifications/cancelled are answered meanwhile; on
 * a cluster also open_session and close_session (CodeSessions,
 * docs/sessions.md), whose steps are run_code calls naming them. A
 * cancelled call cancels its execution and, as the protocol asks, gets no
 * response. Only protocol messages go to stdout; logs go to stderr.
 *
 * Every size from the client is capped: a line at MCP_LINE_MAX (past it,
 * the line is read to its end and dropped, with a parse error), calls in
 * flight at MCP_CALLS_MAX; the code, stdin and files by cli_check_spec,
 * as the API server would.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cx.h"
#include "log.h"
#include "session.h"
#include "xmalloc.h"

#define MCP_LINE_MAX	(4 << 20)	/* code + stdin + files fit twice */
#define MCP_CALLS_MAX	8
#define TOOL		"run_code"
#define OPEN_WAIT_S	120	/* a session's start: the controller's deadline */
#define CLOSE_WAIT_S	60

/* JSON-RPC's error codes. */
#define E_PARSE		-32700
#define E_REQUEST	-32600
#define E_METHOD	-32601
#define E_PARAMS	-32602

/* Newest first: the one answered when the client's is not among them. */
static const char *const versions[] = {
	"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05",
};

struct call;

static pthread_mutex_t local_lock = PTHREAD_MUTEX_INITIALIZER;

struct mcp {
	FILE			*out;
	pthread_mutex_t		 out_lock;
	const struct cli_cluster *co;
	const struct local_opts	*lo;
	struct ctl_config	*cfg;		/* local mode's */
	int			 local;

	pthread_mutex_t		 lock;		/* calls, ncalls */
	pthread_cond_t		 idle;
	struct call		*calls;
	int			 ncalls;
};

struct call {
	struct mcp	*m;
	const struct tool *tool;
	json_t		*id;
	json_t		*args;
	atomic_int	 cancel;
	struct call	*next;
};

/* --- output ------------------------------------------------------------ */

static void
send_msg(struct mcp *m, json_t *msg)
{
	char *s = json_dumps(msg, JSON_COMPACT);

	pthread_mutex_lock(&m->out_lock);
	if (s) {
		/* jansson escapes control characters: one line. */
		fputs(s, m->out);
		fputc('\n', m->out);
		fflush(m->out);
	}
	pthread_mutex_unlock(&m->out_lock);
	free(s);
	json_decref(msg);
}

static void respond_error(struct mcp *m, json_t *id, int code,
    const char *message);

static void
respond(struct mcp *m, json_t *id, json_t *result)
{
	if (result == NULL) {		/* a result jansson could not build */
		respond_error(m, id, -32603, "internal error: the result "
		    "could not be encoded");
		return;
	}
	send_msg(m, json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id,
	    "result", result));
}

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

static void
respond_error(struct mcp *m, json_t *id, int code, const char *message)
{
	send_msg(m, json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0",
	    "id", id ? id : json_null(), "error", "code", code, "message",
	    message));
}

/* --- the tool ------------------------------------------------------------ */

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
open_schema(void)
{
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
close_schema(void)
{
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

static json_t *
tool_result(char *text, int is_error)
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
	const char *key;
	json_t *v;

	json_object_foreach(args, key, v) {
		size_t i;

		for (i = 0; i < n; i++)
			if (strcmp(key, known[i]) == 0)
				break;
		if (i == n) {
			char k[65];

			snprintf(k, sizeof(k), "%s", key);
			utf8_trim(k);		/* cut between characters */
			snprintf(msg, msz, "arguments: unknown argument \"%s\"", k);
			return 1;
		}
	}
	return 0;
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
			res = tool_result(text, 1);
			free(text);
			return res;
		}
	}
	if ((cx = build_cx(args, rt, m->local, msg, sizeof(msg))) == NULL) {
		text = xasprintf("error: the call was refused: %s", msg);
		res = tool_result(text, 1);
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
		res = tool_result(text, 1);
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
		res = tool_result(text, 1);
	} else if (strcmp(json_string_value(json_object_get(json_object_get(out,
	    "status"), "phase")), "Ready") != 0) {
		text = session_end(out);	/* Ended: Rejected, Failed, ... */
		res = tool_result(text, 1);
	} else {
		text = xstrdup(k8s_obj_name(out));
		res = tool_result(text, 0);
		json_object_set_new(res, "structuredContent", json_pack("{s:s, s:s}",
		    "session", k8s_obj_name(out), "runtime", so.runtime));
	}
	free(text);
	json_decref(out);
	return res;
refuse:
	text = xasprintf("error: the call was refused: %s", msg);
	res = tool_result(text, 1);
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
		res = tool_result(text, 1);
		free(text);
		return res;
	}
	rc = cluster_session_close(m->co, name, CLOSE_WAIT_S, cancel, &out, msg,
	    sizeof(msg));
	if (rc != 0) {
		text = xasprintf(rc == -2 ? "error: the call was refused: name: %s" :
		    "error: the session could not be closed: %s", msg);
		res = tool_result(text, 1);
	} else {
		end = session_end(out);
		text = xasprintf("session %s has ended: %s", name, end);
		free(end);
		res = tool_result(text, 0);
	}
	free(text);
	json_decref(out);
	return res;
}

/* The tools: run_code everywhere, sessions on a cluster only. */
struct tool {
	const char	*name;
	int		 cluster_only;
	json_t		*(*schema)(int local);
	json_t		*(*call)(struct mcp *m, json_t *args, atomic_int *cancel);
};

static json_t *open_schema_(int local) { (void)local; return open_schema(); }
static json_t *close_schema_(int local) { (void)local; return close_schema(); }

static const struct tool tools[] = {
	{ TOOL, 0, run_schema, run_tool },
	{ "open_session", 1, open_schema_, open_tool },
	{ "close_session", 1, close_schema_, close_tool },
};

static json_t *
tools_list(int local)
{
	json_t *l = json_array();

	for (size_t i = 0; i < sizeof(tools) / sizeof(tools[0]); i++)
		if (!local || !tools[i].cluster_only)
			json_array_append_new(l, tools[i].schema(local));
	return json_pack("{s:o}", "tools", l);
}

static void *
call_main(void *arg)
{
	struct call *c = arg;
	struct mcp *m = c->m;
	json_t *res = c->tool->call(m, c->args, &c->cancel);

	pthread_mutex_lock(&m->lock);
	for (struct call **pp = &m->calls; *pp; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	pthread_mutex_unlock(&m->lock);
	/* A cancelled request gets no response (the protocol's rule). */
	if (atomic_load(&c->cancel))
		json_decref(res);
	else
		respond(m, c->id, res);
	json_decref(c->id);
	json_decref(c->args);
	free(c);
	/* Last: mcp_serve returns (and m goes) once every call is here. */
	pthread_mutex_lock(&m->lock);
	m->ncalls--;
	pthread_cond_broadcast(&m->idle);
	pthread_mutex_unlock(&m->lock);
	return NULL;
}

/* --- requests ------------------------------------------------------------ */

static void
on_initialize(struct mcp *m, json_t *id, json_t *params)
{
	const char *want = json_string_value(json_object_get(params,
	    "protocolVersion"));
	const char *v = versions[0];

	for (size_t i = 0; want && i < sizeof(versions) / sizeof(versions[0]); i++)
		if (strcmp(want, versions[i]) == 0)
			v = versions[i];
	respond(m, id, json_pack("{s:s, s:{s:{s:b}}, s:{s:s, s:s}, s:s}",
	    "protocolVersion", v, "capabilities", "tools", "listChanged", 0,
	    "serverInfo", "name", "airlock", "version", "0.1.0",
	    "instructions", m->local ?
	    "run_code runs each program in a fresh gVisor sandbox on this machine." :
	    "run_code runs each program as a CodeExecution: a fresh gVisor "
	    "sandbox on the cluster, with no network. To keep variables and "
	    "files across calls, open_session, pass its name as run_code's "
	    "session, and close_session when done."));
}

static void
on_call(struct mcp *m, json_t *id, json_t *params)
{
	const char *name = json_string_value(json_object_get(params, "name"));
	json_t *args = json_object_get(params, "arguments");
	struct call *c;
	pthread_attr_t at;
	pthread_t th;

	const struct tool *tool = NULL;

	for (size_t i = 0; name && i < sizeof(tools) / sizeof(tools[0]); i++)
		if (strcmp(name, tools[i].name) == 0 && (!m->local ||
		    !tools[i].cluster_only))
			tool = &tools[i];
	if (tool == NULL) {
		respond_error(m, id, E_PARAMS, m->local ? "unknown tool: tools/list "
		    "has run_code" : "unknown tool: tools/list has run_code, "
		    "open_session and close_session");
		return;
	}
	pthread_mutex_lock(&m->lock);
	if (m->ncalls >= MCP_CALLS_MAX) {
		pthread_mutex_unlock(&m->lock);
		char busy[] = "error: too many calls at once (8 run at a "
		    "time); try again when one has ended";

		respond(m, id, tool_result(busy, 1));
		return;
	}
	c = xcalloc(1, sizeof(*c));
	c->m = m;
	c->tool = tool;
	c->id = json_incref(id);
	c->args = args ? json_incref(args) : json_object();
	c->next = m->calls;
	m->calls = c;
	m->ncalls++;
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&th, &at, call_main, c) != 0) {
		m->calls = c->next;
		m->ncalls--;
		pthread_mutex_unlock(&m->lock);
		char nostart[] = "error: cannot start the call";

		respond(m, id, tool_result(nostart, 1));
		json_decref(c->id);
		json_decref(c->args);
		free(c);
	} else {
		pthread_mutex_unlock(&m->lock);
	}
	pthread_attr_destroy(&at);
}

static void
on_cancelled(struct mcp *m, json_t *params)
{
	json_t *rid = json_object_get(params, "requestId");

	pthread_mutex_lock(&m->lock);
	for (struct call *c = m->calls; rid && c; c = c->next)
		if (json_equal(c->id, rid))
			atomic_store(&c->cancel, 1);
	pthread_mutex_unlock(&m->lock);
}

static void
dispatch(struct mcp *m, json_t *msg)
{
	json_t *id = json_object_get(msg, "id");
	json_t *params = json_object_get(msg, "params");
	const char *method = json_string_value(json_object_get(msg, "method"));
	const char *jv = json_string_value(json_object_get(msg, "jsonrpc"));

	if (!json_is_object(msg) || jv == NULL || strcmp(jv, "2.0") != 0 ||
	    (id && !json_is_string(id) && !json_is_integer(id))) {
		respond_error(m, NULL, E_REQUEST, "not a JSON-RPC 2.0 message "
		    "(batches are not taken)");
		return;
	}
	if (method == NULL) {
		/* A response (this server asks nothing) or no method at all. */
		if (json_object_get(msg, "method") != NULL ||
		    (id && !json_object_get(msg, "result") &&
		    !json_object_get(msg, "error")))
			respond_error(m, id, E_REQUEST, "method: must be a string");
		return;
	}
	if (params && !json_is_object(params)) {
		if (id)
			respond_error(m, id, E_PARAMS, "params: must be an object");
		return;
	}
	if (id == NULL) {	/* notifications */
		if (strcmp(method, "notifications/cancelled") == 0)
			on_cancelled(m, params);
		return;
	}
	if (strcmp(method, "initialize") == 0)
		on_initialize(m, id, params);
	else if (strcmp(method, "ping") == 0)
		respond(m, id, json_object());
	else if (strcmp(method, "tools/list") == 0)
		respond(m, id, tools_list(m->local));
	else if (strcmp(method, "tools/call") == 0)
		on_call(m, id, params);
	else
		respond_error(m, id, E_METHOD, "method not found");
}

/*
 * The next line of in, without its newline, in *buf (grown to at most
 * MCP_LINE_MAX); *over set when it was longer (then read to its end and
 * dropped). -1 at the end of input.
 */
static ssize_t
read_line(FILE *in, char **buf, size_t *cap, int *over)
{
	size_t len = 0;
	int ch;

	*over = 0;
	while ((ch = getc(in)) != EOF && ch != '\n') {
		if (len >= MCP_LINE_MAX) {
			*over = 1;
			continue;
		}
		if (len + 1 >= *cap) {
			*cap = *cap ? *cap * 2 : 4096;
			*buf = xrealloc(*buf, *cap);
		}
		(*buf)[len++] = (char)ch;
	}
	if (ch == EOF && len == 0 && !*over)
		return -1;
	if (*buf == NULL)
		*buf = xmalloc(*cap = 1);
	(*buf)[len] = '\0';
	return (ssize_t)len;
}

int
mcp_serve(const struct cli_cluster *o, const struct local_opts *lo, int local,
    FILE *in, FILE *out)
{
	struct mcp m = { .out = out, .co = o, .lo = lo, .local = local };
	struct k8s_error err;
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	int over;

	if (local && (m.cfg = local_config(lo->config, &err)) == NULL) {
		fprintf(stderr, "airlock: %s\n", err.message);
		return CLI_EXIT_ERROR;
	}
	/* A client gone: writes fail (EPIPE), the read ends; not a kill. */
	signal(SIGPIPE, SIG_IGN);
	pthread_mutex_init(&m.out_lock, NULL);
	pthread_mutex_init(&m.lock, NULL);
	pthread_cond_init(&m.idle, NULL);
	log_info("mcp server ready", "mode=%s", local ? "local" : "cluster");
	while ((n = read_line(in, &line, &cap, &over)) >= 0) {
		json_error_t je;
		json_t *msg;

		if (over) {
			respond_error(&m, NULL, E_PARSE, "message longer than 4 MiB");
			continue;
		}
		if (n == 0)
			continue;
		if ((msg = json_loadb(line, (size_t)n, JSON_REJECT_DUPLICATES,
		    &je)) == NULL) {
			respond_error(&m, NULL, E_PARSE, "not JSON");
			continue;
		}
		dispatch(&m, msg);
		json_decref(msg);
	}
	free(line);
	/* The client is gone: its calls' executions are cancelled, then ended. */
	pthread_mutex_lock(&m.lock);
	for (struct call *c = m.calls; c; c = c->next)
		atomic_store(&c->cancel, 1);
	while (m.ncalls > 0)
		pthread_cond_wait(&m.idle, &m.lock);
	pthread_mutex_unlock(&m.lock);
	pthread_cond_destroy(&m.idle);
	pthread_mutex_destroy(&m.lock);
	pthread_mutex_destroy(&m.out_lock);
	ctl_config_free(m.cfg);
	return 0;
}
