/*
 * cli.h - bin/airlock: run code on a cluster (a CodeExecution) or, with
 * --local, on this machine under gVisor with no cluster at all. See
 * cli/README.md for the commands and exit codes.
 */
#ifndef AIRLOCK_CLI_H
#define AIRLOCK_CLI_H

#include <stdatomic.h>
#include <stdio.h>
#include <jansson.h>

#include "ctl_config.h"
#include "cx.h"
#include "k8s_error.h"

/*
 * Exit codes. A program that ran to its end gives its own exit code
 * (0-255); these mean the program did not end by itself. They can collide
 * with a program's own code: -o json gives the status, unambiguous.
 */
#define CLI_EXIT_ERROR		1	/* airlock failed: API, runtime, I/O */
#define CLI_EXIT_USAGE		2	/* bad flags or bad input, named */
/* The rest, by phase and reason, are execution/cx.h's (cx_exit_code). */

/*
 * Print v as "json" (indented) or "yaml" to f. K8S_EINVAL for another
 * format.
 */
int cli_print(FILE *f, json_t *v, const char *format);

/* v as YAML on f (JSON's data model: maps, lists, scalars). */
int cli_yaml(FILE *f, json_t *v);

/*
 * The program's output from a status: stdout to stdout and stderr to
 * stderr, byte for byte as kept (NUL included) when piped, neutralised
 * when a terminal (cli_write_text); a note on stderr when a stream was
 * cut at output.maxBytes.
 */
void cli_print_streams(json_t *status);
/* The same, from byte ofrom of stdout and efrom of stderr (shown live). */
void cli_print_streams_from(json_t *status, size_t ofrom, size_t efrom);

/*
 * status.value (a session's step: its last expression's repr), if set, to
 * f on a line of its own (a newline first when status.stdout does not end
 * with one), as a REPL shows it; neutralised as cli_write_text when tty.
 * cli_print_streams prints it after stdout.
 */
void cli_print_value(FILE *f, json_t *status, int tty);

/* "airlock: " and the message on stderr, then exit 2: a bad flag. */
void cli_die_usage(const char *fmt, ...)
    __attribute__((format(printf, 1, 2), noreturn));

/*
 * A whole file (path "-": standard input), at most max bytes: a new
 * NUL-terminated buffer (caller frees), its length in *lenp; or NULL with
 * why in msg (strerror's words, "more than N bytes").
 */
char *cli_slurp(const char *path, size_t max, size_t *lenp, char *msg,
    size_t msz);

/*
 * Untrusted text to f: byte for byte unless tty. To a terminal, the
 * control characters that would drive it (ESC and the other C0 controls
 * but newline and tab, DEL, and the C1 controls U+0080..U+009F) are shown
 * in caret notation (^[) or as U+FFFD, so a program cannot move the
 * cursor, retitle the window, write the clipboard (OSC 52) or hide text.
 */
void cli_write_text(FILE *f, const char *s, size_t n, int tty);

/*
 * How run and apply end, on a cluster or here: the object as -o output
 * says ("json", "yaml"), or without it the program's streams and, for an
 * end other than its own exit, a line on stderr saying why. The exit code.
 */
int cli_report(json_t *obj, const char *output);
/* The same, the streams' first ofrom and efrom bytes already printed. */
int cli_report_from(json_t *obj, const char *output, size_t ofrom,
    size_t efrom);

/*
 * Check a CodeExecution spec as the API server's schema would (field
 * names, types, sizes, patterns) and apply its defaults in place. 0, or
 * K8S_EINVAL naming the field ("spec.timeoutSeconds: ...").
 */
int cli_check_spec(json_t *spec, struct k8s_error *err)
    __attribute__((warn_unused_result));

/* The first key of obj (an object) not among known's n (borrowed), or NULL. */
const char *cli_unknown_key(json_t *obj, const char *const *known, size_t n);

/*
 * The same for a CodeSession's spec (crds/airlock.dev_codesessions.yaml):
 * runtime, resources, idleTimeoutSeconds and maxLifetimeSeconds (10 to
 * 86400), files, ttlSecondsAfterFinished, close. No defaults are set: the
 * API server's are. 0, or K8S_EINVAL naming the field.
 */
int cli_check_session_spec(json_t *spec, struct k8s_error *err)
    __attribute__((warn_unused_result));

/*
 * Files out into dir/name/ (dir made if missing; name, the execution's,
 * made new: refused if it is there already, or is not a DNS-1123
 * subdomain): files is a CodeExecutionArtifacts' `files` ([{path, sha256,
 * content (base64)}]), each checked against want, status.artifacts
 * ([{path, sha256}]): a file that is not in it, or not with that digest,
 * is refused, as is a path that is not relative, climbs out or has a
 * component starting with '.'. Written below dir/name only, through no
 * symlink. The count written, or -1 with why in msg.
 */
int cli_write_files(const char *dir, const char *name, json_t *files,
    json_t *want, char *msg, size_t msz);

/* --- the cluster (cli/cluster.c) ------------------------------------------- */

struct cli_cluster {
	const char	*kubeconfig, *context, *ns;	/* NULL: defaults */
	const char	*output;			/* NULL, "json", "yaml" */
	int		 all_ns;			/* list -A */
	int		 rm;				/* run: delete afterwards */
	long		 wait_s;			/* wait: give up after; 0 never */
	const char	*out_dir;			/* run, get: files out in DIR/NAME/ */
	/*
	 * run, mcp: how long a create the API server could not take (no
	 * answer, 503, 429) is tried again; 0 not at all. main: 30 s.
	 */
	long		 retry_ms;
};

#define CLI_RETRY_DEFAULT_MS	30000

/*
 * The flags every cluster command takes, for getopt_long: -n, -o, -A and
 * these long ones (values above any command's own). cli_cluster_flag sets
 * o from one (a bad value: exit 2, named); 0 for a flag not among them.
 */
enum { CLI_OPT_KUBECONFIG = 1000, CLI_OPT_CONTEXT, CLI_OPT_API_RETRY };
#define CLI_CLUSTER_LONGOPTS \
	{ "namespace", required_argument, NULL, 'n' }, \
	{ "output", required_argument, NULL, 'o' }, \
	{ "all-namespaces", no_argument, NULL, 'A' }, \
	{ "kubeconfig", required_argument, NULL, CLI_OPT_KUBECONFIG }, \
	{ "context", required_argument, NULL, CLI_OPT_CONTEXT }, \
	{ "api-retry", required_argument, NULL, CLI_OPT_API_RETRY }
int cli_cluster_flag(struct cli_cluster *o, int ch, const char *arg);

/*
 * The annotation a create carries, a random token of the client's own:
 * the object a lost answer hid is known as ours by it (cluster.c,
 * create_cx). The Python SDK sets the same.
 */
#define CLI_ANN_CREATE_TOKEN	"airlock.dev/create-token"

/*
 * Whether a create that failed with err is tried again: 503, 429, or no
 * answer at all (connection refused or reset, a timeout), but not a TLS,
 * certificate or host name failure, which waiting does not heal. A 404
 * is not: the API server says that for a CRD that is not installed.
 */
int cli_create_retryable(const struct k8s_error *err);

/*
 * Each returns the process's exit code, having printed what it should
 * (errors on stderr, naming the field or the object).
 */
int cluster_run(const struct cli_cluster *o, json_t *cx);
int cluster_get(const struct cli_cluster *o, const char *name);
int cluster_list(const struct cli_cluster *o);
int cluster_logs(const struct cli_cluster *o, const char *name);
int cluster_delete(const struct cli_cluster *o, char *const *names, int n);
int cluster_wait(const struct cli_cluster *o, const char *name);

/*
 * For the MCP server: make cx (tried again as run does: o->retry_ms) and
 * wait for its end without printing. 0
 * and *done (new reference); -2 when the API server refused it (bad
 * input, its words in msg); -1 with msg otherwise. While it waits, *cancel
 * becoming non-zero cancels the execution (spec.cancel), and the wait goes
 * on to its Cancelled. Each call connects on its own: calls may run in
 * threads side by side.
 */
int cluster_exec(const struct cli_cluster *o, json_t *cx, atomic_int *cancel,
    json_t **done, char *msg, size_t msz);
/*
 * The files out of done (an ended execution): its CodeExecutionArtifacts'
 * `files`, if it has any and they are its own; else NULL. New reference.
 */
json_t *cluster_files_out(const struct cli_cluster *o, json_t *done);

/* --- sessions (cli/session.c) ---------------------------------------------- */

/* What `airlock session create` and MCP's open_session were given. */
struct session_opts {
	const char	*runtime;		/* required */
	const char	*name;			/* NULL: generateName "session-" */
	const char	*memory, *cpu;		/* NULL: the operator's default */
	long long	 idle_s, life_s;	/* 0: the CRD's default */
	char *const	*files;			/* --file PATH[=LOCAL], as given */
	size_t		 nfiles;
	int		 mcp;			/* refusals name MCP's arguments */
};

/*
 * The CodeSession o describes, its spec checked as the API server would
 * (cli_check_session_spec): a new reference, or NULL with why in msg,
 * naming the flag (--memory, --file PATH=LOCAL, ...) and the field. Each
 * --file is read here: LOCAL (PATH when there is no '='), UTF-8 text
 * without NUL bytes, at most 262144 bytes (the spec's cap for all).
 */
json_t *session_build(const struct session_opts *o, char *msg, size_t msz);

/* bin/airlock session SUBCOMMAND ...: argv[0] is "session". Exit code. */
int session_main(int argc, char **argv);

/*
 * For run --session and MCP's run_code: the runtime of session name in
 * o's namespace into rt. 0; -2 when there is no such session
 * ("spec.session: no session 'x' in namespace NS" in msg); -1 with why
 * in msg otherwise.
 */
int cluster_session_runtime(const struct cli_cluster *o, const char *name,
    char *rt, size_t rtsz, char *msg, size_t msz);

/*
 * For MCP: make session (as run makes an execution: tried again for
 * o->retry_ms, never twice) and wait up to timeout_s for it to be Ready
 * or Ended. 0 and *out (new reference, Ready or Ended: the caller reads
 * status.phase); -2 when the API server refused it (its words in msg);
 * -1 with msg otherwise. Not Ready in time, or *stop set: closed, -1.
 */
int cluster_session_open(const struct cli_cluster *o, json_t *session,
    long timeout_s, atomic_int *stop, json_t **out, char *msg, size_t msz);

/*
 * Close session name (spec.close) and wait up to timeout_s for it to be
 * Ended: 0 and *out (new reference); -2 when there is no such session;
 * -1 with msg otherwise.
 */
int cluster_session_close(const struct cli_cluster *o, const char *name,
    long timeout_s, atomic_int *stop, json_t **out, char *msg, size_t msz);

/* --- local mode (cli/local.c) --------------------------------------------- */

struct local_opts {
	const char	*runsc;		/* default: runsc in PATH */
	const char	*root;		/* ROOT/RUNTIME/rootfs; default ~/.cache/airlock/local */
	/*
	 * An operator's config (the chart's config: block, as the controller
	 * reads it) whose profiles, policies included, local runs use
	 * instead of the chart's; NULL: the chart's.
	 */
	const char	*config;
	const char	*out_dir;	/* files out written in DIR/NAME/; NULL: not */
	json_t		**files_out;	/* if set: the files out (artifacts' `files`) */
	const char	*cgroup_mount;	/* default /sys/fs/cgroup */
	const char	*state;		/* runsc --root; default /run/airlock/runsc */
	long long	 hard_cap;	/* both streams; default 16 MiB */
	int		 quiet;		/* no progress on stderr */
};

/*
 * The config local runs use: the chart's default profiles (python, node,
 * bash), or those of the config at path (may be NULL), and the
 * controller's default limits. A profile runs in the root filesystem of
 * its image's runner (".../runner-NAME:TAG": images/local.sh's NAME).
 * New; ctl_config_free().
 */
struct ctl_config *local_config(const char *path, struct k8s_error *err);

/*
 * Run CodeExecution cx (borrowed; its spec already checked) under gVisor
 * here: network none, the profile's root filesystem read-only, /tmp and
 * the work directory tmpfs, memory, CPU and pids limits in a cgroup of its
 * own, the timeout counted from the program's start, output capped. On 0,
 * *out is the object with the status the cluster would have written.
 * K8S_EINVAL/K8S_EIO with a message when the run could not be made.
 */
int local_run(const struct ctl_config *cfg, json_t *cx,
    const struct local_opts *o, json_t **out, struct k8s_error *err)
    __attribute__((warn_unused_result));

/*
 * Why local_run refuses an execution of spec (borrowed) whose pod came
 * with the NetworkPolicy netpol (podspec_build's; NULL: none), or NULL:
 * a network is a NetworkPolicy's, a cluster's alone. The profile's own
 * egress and a spec.network.egress of its are named apart; egress: []
 * leaves the execution none (no policy), which runs here. Static text.
 */
const char *local_network_refusal(json_t *spec, json_t *netpol);

/* --- the MCP server (cli/mcp.c) ------------------------------------------ */

/*
 * bin/airlock mcp (cli/mcp.c): a Model Context Protocol server on stdin
 * and stdout, its one tool run_code running each call as a CodeExecution
 * (or locally, with local set). Returns when stdin ends; 0, or 1 when it
 * could not start.
 */
int mcp_serve(const struct cli_cluster *o, const struct local_opts *lo,
    int local, FILE *in, FILE *out);

#endif
