/*
 * mcp.c - bin/airlock mcp: a Model Context Protocol server on stdio.
 *
 * JSON-RPC 2.0, one message per line (MCP's stdio transport), the
 * initialize handshake's revisions 2024-11-05 to 2025-11-25. The tool
 * run_code: each call is a CodeExecution made and awaited in a thread of
 * its own (cluster_exec), or a local run under gVisor (local_run), so that
 * ping, other calls and notifications/cancelled are answered meanwhile; on
 * a cluster also open_session and close_session (CodeSessions,
 * docs/sessions.md), whose steps are run_code calls naming them (the
 * tools themselves: mcp_tools.c). A
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
#include "log.h"
#include "mcp_priv.h"
#include "xmalloc.h"

#define MCP_LINE_MAX	(4 << 20)	/* code + stdin + files fit twice */
#define MCP_CALLS_MAX	8

/* JSON-RPC's error codes. */
#define E_PARSE		-32700
#define E_REQUEST	-32600
#define E_METHOD	-32601
#define E_PARAMS	-32602

/* Newest first: the one answered when the client's is not among them. */
static const char *const versions[] = {
	"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05",
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

static void
respond_error(struct mcp *m, json_t *id, int code, const char *message)
{
	send_msg(m, json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0",
	    "id", id ? id : json_null(), "error", "code", code, "message",
	    message));
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

	for (size_t i = 0; name && i < mcp_ntools; i++)
		if (strcmp(name, mcp_tools[i].name) == 0 && (!m->local ||
		    !mcp_tools[i].cluster_only))
			tool = &mcp_tools[i];
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

		respond(m, id, mcp_tool_result(busy, 1));
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

		respond(m, id, mcp_tool_result(nostart, 1));
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
		respond(m, id, mcp_tools_list(m->local));
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
