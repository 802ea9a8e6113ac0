/*
 * session.c - `airlock session create|ls|close` and what run --session and
 * the MCP server's session tools need: CodeSessions (docs/sessions.md),
 * made as run makes an execution (cluster.c's create, tried again and
 * never twice) and awaited on a watch of the one object.
 */
#include <getopt.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "cluster_priv.h"
#include "quantity.h"
#include "session.h"
#include "xmalloc.h"

#define SESSION_FILES_MAX	262144	/* spec.files, all of them (the CRD's) */
#define CREATE_WAIT_S		120	/* the controller's start deadline */
#define CLOSE_WAIT_S		60

/* --- building ---------------------------------------------------------- */

/*
 * Which flag (and MCP argument) sets which field: a refusal of the spec
 * check names both (`--file: spec.files[1]: path '../x' must be
 * relative, ...`).
 */
static const struct {
	const char	*field, *flag, *arg;
} flags[] = {
	{ "spec.runtime", "--runtime", "runtime" },
	{ "spec.resources.memory", "--memory", "memory" },
	{ "spec.resources.cpu", "--cpu", NULL },
	{ "spec.idleTimeoutSeconds", "--idle-timeout", "idle_timeout_seconds" },
	{ "spec.maxLifetimeSeconds", "--max-lifetime", NULL },
	{ "spec.files", "--file", NULL },
};

/* --file PATH[=LOCAL]: {path, content} from LOCAL, or NULL with msg. */
static json_t *
file_entry(const char *arg, char *msg, size_t msz)
{
	const char *eq = strchr(arg, '=');
	char *path = eq ? xstrndup(arg, (size_t)(eq - arg)) : xstrdup(arg);
	const char *local = eq ? eq + 1 : arg;
	char why[256], *data = NULL;
	json_t *content, *f = NULL;
	size_t len;

	if (*path == '\0' || *local == '\0') {
		snprintf(msg, msz, "--file '%s': give PATH or PATH=LOCAL, neither "
		    "empty", arg);
		goto out;
	}
	if ((data = cli_slurp(local, SESSION_FILES_MAX, &len, why,
	    sizeof(why))) == NULL) {
		snprintf(msg, msz, "--file %s: cannot read '%s': %s", arg, local, why);
		goto out;
	}
	if (memchr(data, '\0', len) || (content = json_stringn(data, len)) == NULL) {
		snprintf(msg, msz, "--file %s: '%s' is not UTF-8 text without NUL "
		    "bytes (spec.files holds text)", arg, local);
		goto out;
	}
	f = json_pack("{s:s, s:o}", "path", path, "content", content);
out:
	free(data);
	free(path);
	return f;
}

json_t *
session_build(const struct session_opts *o, char *msg, size_t msz)
{
	json_t *spec = json_object(), *res = NULL, *files;
	struct k8s_error err;
	json_t *s;

	if (o->runtime == NULL) {
		snprintf(msg, msz, "%s: required (python, python-data, bash)",
		    o->mcp ? "runtime" : "--runtime");
		goto bad;
	}
	json_object_set_new(spec, "runtime", json_string(o->runtime));
	if (o->memory || o->cpu) {
		res = json_object();
		if (o->memory)
			json_object_set_new(res, "memory", json_string(o->memory));
		if (o->cpu)
			json_object_set_new(res, "cpu", json_string(o->cpu));
		json_object_set_new(spec, "resources", res);
	}
	if (o->idle_s)
		json_object_set_new(spec, "idleTimeoutSeconds", json_integer(o->idle_s));
	if (o->life_s)
		json_object_set_new(spec, "maxLifetimeSeconds", json_integer(o->life_s));
	if (o->nfiles > 0) {
		json_object_set_new(spec, "files", files = json_array());
		for (size_t i = 0; i < o->nfiles; i++) {
			json_t *f = file_entry(o->files[i], msg, msz);

			if (f == NULL)
				goto bad;
			json_array_append_new(files, f);
		}
	}
	if (cli_check_session_spec(spec, &err) != 0) {
		const char *flag = NULL;

		for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++)
			if (strncmp(err.message, flags[i].field,
			    strlen(flags[i].field)) == 0)
				flag = o->mcp ? flags[i].arg : flags[i].flag;
		snprintf(msg, msz, "%s%s%s", flag ? flag : "", flag ? ": " : "",
		    err.message);
		goto bad;
	}
	s = json_pack("{s:s, s:s, s:{}, s:o}", "apiVersion", "airlock.dev/v1alpha1",
	    "kind", "CodeSession", "metadata", "spec", spec);
	json_object_set_new(json_object_get(s, "metadata"), o->name ? "name" :
	    "generateName", json_string(o->name ? o->name : "session-"));
	return s;
bad:
	json_decref(spec);
	return NULL;
}

/* --- the cluster --------------------------------------------------------- */

static const char *
st_str(json_t *obj, const char *key)
{
	return json_string_value(json_object_get(json_object_get(obj, "status"),
	    key));
}

static int
ready_or_ended(json_t *obj)
{
	const char *ph = st_str(obj, "phase");

	return ph && (strcmp(ph, SESSION_READY) == 0 ||
	    strcmp(ph, SESSION_ENDED) == 0);
}

static int
ended(json_t *obj)
{
	const char *ph = st_str(obj, "phase");

	return ph && strcmp(ph, SESSION_ENDED) == 0;
}

/* spec.close: true. 0, or a K8S_E* code with err. */
static int
close_patch(struct conn *k, const char *name, struct k8s_error *err)
{
	struct k8s_patch_opts mp = { .type = K8S_PATCH_MERGE };
	json_t *p = json_pack("{s:{s:b}}", "spec", "close", 1);
	int rc = k8s_patch(k->c, &session_resource, k->ns, name, &mp, p, NULL, err);

	json_decref(p);
	return rc;
}

/* "REASON: message" of an ended session, or its phase. */
static void
end_text(json_t *obj, char *buf, size_t n)
{
	const char *why = st_str(obj, "reason"), *m = st_str(obj, "message");
	const char *ph = st_str(obj, "phase");

	snprintf(buf, n, "%s%s%s", why ? why : ph ? ph : "Pending", m && *m ? ": " :
	    "", m && *m ? m : "");
}

/*
 * Create session in k, then (timeout_s >= 0) wait for Ready or Ended.
 * As cluster_session_open says; a session not Ready in time (or when
 * *stop is set) is closed, and 1 returned with msg.
 */
static int
open_in(struct conn *k, json_t *session, long retry_ms, int say,
    long timeout_s, atomic_int *stop, json_t **out, char *msg, size_t msz)
{
	struct k8s_error err;
	json_t *created = NULL, *last = NULL;
	char *name;

	*out = NULL;
	if (cli_create(k, &session_resource, session, stop, retry_ms, say,
	    &created, &err) != 0) {
		snprintf(msg, msz, "create: %s", err.message);
		return err.http_status == 422 || err.http_status == 400 ? -2 : -1;
	}
	if (timeout_s < 0) {
		*out = created;
		return 0;
	}
	name = xstrdup(k8s_obj_name(created));
	json_decref(created);
	*out = cli_wait(k, &session_resource, name, ready_or_ended, timeout_s,
	    stop, &last, msg, msz);
	if (*out == NULL) {
		char st[1200];

		end_text(last, st, sizeof(st));
		if (msg[0] == '\0')
			snprintf(msg, msz, "session %s was not Ready %s (phase %.1100s); "
			    "closed", name, stop && atomic_load(stop) ? "when "
			    "interrupted" : "in time", st);
		/* Nothing of it should be left running for nobody. */
		if (close_patch(k, name, &err) != 0 && err.code != K8S_ENOTFOUND)
			fprintf(stderr, "airlock: close %s: %s\n", name, err.message);
	}
	json_decref(last);
	free(name);
	return *out ? 0 : 1;
}

/* conn_open, its error into msg. */
static int
conn_open_msg(const struct cli_cluster *o, struct conn *k, char *msg,
    size_t msz)
{
	struct k8s_error err;

	if (conn_open(o, k, &err) == 0)
		return 0;
	snprintf(msg, msz, "%s", err.message);
	return -1;
}

int
cluster_session_open(const struct cli_cluster *o, json_t *session,
    long timeout_s, atomic_int *stop, json_t **out, char *msg, size_t msz)
{
	struct conn k;
	int rc;

	*out = NULL;
	if (conn_open_msg(o, &k, msg, msz) != 0)
		return -1;
	rc = open_in(&k, session, o->retry_ms, 0, timeout_s, stop, out, msg, msz);
	conn_close(&k);
	return rc > 0 ? -1 : rc;
}

/* Close name and wait for its end (timeout_s < 0: not). As below. */
static int
close_in(struct conn *k, const char *name, long timeout_s, atomic_int *stop,
    json_t **out, char *msg, size_t msz)
{
	struct k8s_error err;

	*out = NULL;
	if (close_patch(k, name, &err) != 0) {
		if (err.code == K8S_ENOTFOUND) {
			snprintf(msg, msz, "no session '%s' in namespace %s", name,
			    k->ns);
			return -2;
		}
		snprintf(msg, msz, "close %s: %s", name, err.message);
		return -1;
	}
	if (timeout_s < 0)
		return 0;
	if ((*out = cli_wait(k, &session_resource, name, ended, timeout_s, stop,
	    NULL, msg, msz)) == NULL) {
		if (msg[0] == '\0' && stop && atomic_load(stop))
			snprintf(msg, msz, "session %s: spec.close is set; stopped "
			    "waiting for its end", name);
		else if (msg[0] == '\0')
			snprintf(msg, msz, "session %s did not end within %ld s of "
			    "spec.close", name, timeout_s);
		return -1;
	}
	return 0;
}

int
cluster_session_close(const struct cli_cluster *o, const char *name,
    long timeout_s, atomic_int *stop, json_t **out, char *msg, size_t msz)
{
	struct conn k;
	int rc;

	*out = NULL;
	if (conn_open_msg(o, &k, msg, msz) != 0)
		return -1;
	rc = close_in(&k, name, timeout_s, stop, out, msg, msz);
	conn_close(&k);
	return rc;
}

int
cluster_session_runtime(const struct cli_cluster *o, const char *name,
    char *rt, size_t rtsz, char *msg, size_t msz)
{
	struct conn k;
	struct k8s_error err;
	json_t *obj = NULL;
	const char *r;
	int rc = -1;

	if (conn_open_msg(o, &k, msg, msz) != 0)
		return -1;
	if (k8s_get(k.c, &session_resource, k.ns, name, &obj, &err) != 0) {
		if (err.code == K8S_ENOTFOUND) {
			snprintf(msg, msz, "spec.session: no session '%s' in namespace "
			    "%s", name, k.ns);
			rc = -2;
		} else
			snprintf(msg, msz, "session %s: %s", name, err.message);
	} else if ((r = json_string_value(json_object_get(json_object_get(obj,
	    "spec"), "runtime"))) == NULL || strlen(r) >= rtsz) {
		snprintf(msg, msz, "session %s has no spec.runtime", name);
	} else {
		snprintf(rt, rtsz, "%s", r);
		rc = 0;
	}
	json_decref(obj);
	conn_close(&k);
	return rc;
}

/* --- the commands ---------------------------------------------------------- */

static atomic_int interrupted;

static void
on_interrupt(int sig)
{
	(void)sig;
	atomic_store(&interrupted, 1);
}

/* Ctrl-C stops the wait (the session is then closed), not the process. */
static void
catch_interrupt(void)
{
	struct sigaction sa = { .sa_handler = on_interrupt };

	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
}

static void
usage(void)
{
	fprintf(stderr,
	    "usage: airlock session create --runtime R [--name N] [--memory Q] [--cpu Q]\n"
	    "                              [--idle-timeout S] [--max-lifetime S]\n"
	    "                              [--file PATH[=LOCAL]]... [--no-wait] [--timeout S]\n"
	    "       airlock session ls [-A] [-o json|yaml]\n"
	    "       airlock session close NAME [--no-wait] [--timeout S]\n"
	    "each also takes [-n NAMESPACE] [--kubeconfig FILE] [--context NAME]\n"
	    "steps: airlock run --session NAME (-c CODE | FILE | -)\n");
	exit(CLI_EXIT_USAGE);
}

/*
 * "airlock: " and msg on stderr: it may quote the session's status
 * message, which may quote the tenant's own strings (never raw to a
 * terminal).
 */
static void
say(const char *msg)
{
	fputs("airlock: ", stderr);
	cli_write_text(stderr, msg, strlen(msg), isatty(STDERR_FILENO));
	fputc('\n', stderr);
}

static int
create(const struct cli_cluster *co, const struct session_opts *so,
    int no_wait, long timeout_s)
{
	struct conn k;
	char msg[2048], why[1200];
	json_t *s, *out = NULL;
	int rc;

	if ((s = session_build(so, msg, sizeof(msg))) == NULL) {
		fprintf(stderr, "airlock: %s\n", msg);
		return CLI_EXIT_USAGE;
	}
	if (cli_connect(co, &k) != 0) {
		json_decref(s);
		return CLI_EXIT_ERROR;
	}
	catch_interrupt();
	rc = open_in(&k, s, co->retry_ms, 1, no_wait ? -1 : timeout_s,
	    &interrupted, &out, msg, sizeof(msg));
	json_decref(s);
	conn_close(&k);
	if (rc != 0) {
		say(msg);
		return rc == -2 ? CLI_EXIT_USAGE : atomic_load(&interrupted) ?
		    CX_EXIT_CANCELLED : CLI_EXIT_ERROR;
	}
	if (ended(out)) {
		end_text(out, why, sizeof(why));
		snprintf(msg, sizeof(msg), "session %s ended before it was Ready: %s",
		    k8s_obj_name(out), why);
		say(msg);
		json_decref(out);
		return CX_EXIT_NOT_RUN;
	}
	printf("%s\n", k8s_obj_name(out));
	json_decref(out);
	return 0;
}

static int
close_cmd(const struct cli_cluster *co, const char *name, int no_wait,
    long timeout_s)
{
	struct conn k;
	char msg[2048], why[1200];
	json_t *out = NULL;
	int rc;

	if (cli_connect(co, &k) != 0)
		return CLI_EXIT_ERROR;
	catch_interrupt();
	rc = close_in(&k, name, no_wait ? -1 : timeout_s, &interrupted, &out, msg,
	    sizeof(msg));
	conn_close(&k);
	if (rc != 0) {
		say(msg);
		return atomic_load(&interrupted) ? CX_EXIT_CANCELLED : CLI_EXIT_ERROR;
	}
	if (out) {
		end_text(out, why, sizeof(why));
		cli_write_text(stdout, why, strlen(why), isatty(STDOUT_FILENO));
		fputc('\n', stdout);
		json_decref(out);
	}
	return 0;
}

/* NAME RUNTIME PHASE REASON STEPS AGE, as kubectl get cxs prints. */
static void
ls_row(json_t *o, int with_ns, long long now)
{
	json_t *md = json_object_get(o, "metadata");
	const char *ph = st_str(o, "phase"), *why = st_str(o, "reason");
	char a[24];

	cli_age(o, now, a, sizeof(a));
	if (with_ns)
		printf("%-20s ", json_string_value(json_object_get(md, "namespace")));
	printf("%-30s %-12s %-8s %-12s %-5lld %s\n",
	    json_string_value(json_object_get(md, "name")),
	    json_string_value(json_object_get(json_object_get(o, "spec"), "runtime")),
	    ph ? ph : SESSION_PENDING, why ? why : "",
	    (long long)json_integer_value(json_object_get(json_object_get(o,
	    "status"), "executions")), a);
}

static int
ls(const struct cli_cluster *co)
{
	struct conn k;
	struct k8s_error err;
	json_t *list = NULL, *item;
	size_t i;
	int code = 0;

	if (cli_connect(co, &k) != 0)
		return CLI_EXIT_ERROR;
	if (k8s_list(k.c, &session_resource, co->all_ns ? NULL : k.ns, NULL, &list,
	    &err) != 0) {
		code = cli_api_error("list sessions", &err);
	} else if (co->output) {
		code = cli_print(stdout, list, co->output) == 0 ? 0 : CLI_EXIT_ERROR;
	} else {
		if (co->all_ns)
			printf("%-20s ", "NAMESPACE");
		printf("%-30s %-12s %-8s %-12s %-5s %s\n", "NAME", "RUNTIME",
		    "PHASE", "REASON", "STEPS", "AGE");
		json_array_foreach(json_object_get(list, "items"), i, item)
			ls_row(item, co->all_ns, (long long)time(NULL));
	}
	json_decref(list);
	conn_close(&k);
	return code;
}

enum {
	OPT_NAME = 256, OPT_MEMORY, OPT_CPU, OPT_IDLE, OPT_LIFE, OPT_FILE,
	OPT_NO_WAIT, OPT_TIMEOUT,
};

int
session_main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "runtime", required_argument, NULL, 'r' },
		{ "name", required_argument, NULL, OPT_NAME },
		{ "memory", required_argument, NULL, OPT_MEMORY },
		{ "cpu", required_argument, NULL, OPT_CPU },
		{ "idle-timeout", required_argument, NULL, OPT_IDLE },
		{ "max-lifetime", required_argument, NULL, OPT_LIFE },
		{ "file", required_argument, NULL, OPT_FILE },
		{ "no-wait", no_argument, NULL, OPT_NO_WAIT },
		{ "timeout", required_argument, NULL, OPT_TIMEOUT },
		CLI_CLUSTER_LONGOPTS,
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct cli_cluster co = { .retry_ms = CLI_RETRY_DEFAULT_MS };
	struct session_opts so = { 0 };
	char **files;
	long long timeout = -1;
	const char *sub;
	int no_wait = 0, ch, rc;

	if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)
		usage();
	sub = argv[1];
	argv++, argc--;
	/* At most one per argument: argc bounds them. */
	files = xcalloc((size_t)argc, sizeof(*files));
	while ((ch = getopt_long(argc, argv, "r:n:o:Ah", longopts, NULL)) != -1) {
		switch (ch) {
		case 'r': so.runtime = optarg; break;
		case OPT_NAME: so.name = optarg; break;
		case OPT_MEMORY: so.memory = optarg; break;
		case OPT_CPU: so.cpu = optarg; break;
		case OPT_IDLE:
			if (quantity_parse_int(optarg, SESSION_MIN_S, SESSION_MAX_S,
			    &so.idle_s) != 0)
				cli_die_usage("--idle-timeout: '%s': whole seconds, %d to %d",
				    optarg, SESSION_MIN_S, SESSION_MAX_S);
			break;
		case OPT_LIFE:
			if (quantity_parse_int(optarg, SESSION_MIN_S, SESSION_MAX_S,
			    &so.life_s) != 0)
				cli_die_usage("--max-lifetime: '%s': whole seconds, %d to %d",
				    optarg, SESSION_MIN_S, SESSION_MAX_S);
			break;
		case OPT_FILE: files[so.nfiles++] = optarg; break;
		case OPT_NO_WAIT: no_wait = 1; break;
		case OPT_TIMEOUT:
			if (quantity_parse_int(optarg, 1, 3600, &timeout) != 0)
				cli_die_usage("--timeout: '%s': whole seconds, 1 to 3600", optarg);
			break;
		default:
			if (!cli_cluster_flag(&co, ch, optarg))
				usage();
		}
	}
	argc -= optind;
	argv += optind;
	so.files = files;
	if (strcmp(sub, "create") == 0) {
		if (argc != 0)
			cli_die_usage("session create: unexpected '%s' (the name is "
			    "--name)", argv[0]);
		rc = create(&co, &so, no_wait, timeout > 0 ? (long)timeout :
		    CREATE_WAIT_S);
	} else if (strcmp(sub, "ls") == 0 || strcmp(sub, "list") == 0) {
		if (argc != 0)
			usage();
		rc = ls(&co);
	} else if (strcmp(sub, "close") == 0) {
		if (argc != 1)
			cli_die_usage("session close: give one NAME");
		rc = close_cmd(&co, argv[0], no_wait, timeout > 0 ? (long)timeout :
		    CLOSE_WAIT_S);
	} else {
		fprintf(stderr, "airlock: session: unknown subcommand '%s'\n", sub);
		usage();
	}
	free(files);
	return rc;
}
