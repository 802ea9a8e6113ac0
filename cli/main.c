/*
 * airlock - run untrusted code under gVisor: on a cluster through a
 * CodeExecution, or on this machine with --local. See cli/README.md.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "log.h"
#include "quantity.h"
#include "xmalloc.h"
#include "yamljson.h"

#define INPUT_MAX	(1 << 20)	/* a program, stdin or manifest file */

static void
usage(void)
{
	fprintf(stderr,
	    "usage: airlock run [-r RUNTIME] (-c CODE | FILE | -) [--stdin FILE] [--timeout S]\n"
	    "                   [--memory Q] [--cpu Q] [--name NAME] [--rm] [--no-stream]\n"
	    "                   [--out DIR] [--session NAME]\n"
	    "                   [-o json|yaml]\n"
	    "                   [--local [--runsc PATH] [--local-root DIR]\n"
	    "                    [--local-config FILE]]\n"
	    "       airlock apply -f FILE [--out DIR] [--local ...] [-o json|yaml]\n"
	    "       airlock get NAME [-o json|yaml] [--out DIR]\n"
	    "       airlock list [-A] [-o json|yaml]\n"
	    "       airlock logs NAME\n"
	    "       airlock wait NAME [--timeout S] [-o json|yaml]\n"
	    "       airlock delete NAME...\n"
	    "       airlock mcp [--local [--runsc PATH] [--local-root DIR]\n"
	    "                    [--local-config FILE]]\n"
	    "       airlock session create|ls|close ... (airlock session --help)\n"
	    "--session NAME: run as the next step of session NAME (its runtime unless\n"
	    "           -r); the step's value is printed after its stdout\n"
	    "--out DIR: the program's files out go to DIR/NAME/ (NAME the execution's,\n"
	    "           a directory made new), never into DIR itself\n"
	    "cluster commands also take [-n NAMESPACE] [--kubeconfig FILE] [--context NAME]\n"
	    "run, apply and mcp also [--api-retry S]: a create the API server could not\n"
	    "           take (no answer, 503, 429) is tried again for S seconds (30)\n"
	    "exit: the program's code; 124 timeout, 125 out of memory, 123 output\n"
	    "      limit, 120 refused by the code policy, 121 not run, 130 cancelled,\n"
	    "      2 bad input, 1 airlock failed\n");
	exit(CLI_EXIT_USAGE);
}

/* A whole file ("-": standard input), at most INPUT_MAX bytes, or exit 2. */
static char *
slurp(const char *path, size_t *lenp, const char *what)
{
	char msg[256], *buf = cli_slurp(path, INPUT_MAX, lenp, msg, sizeof(msg));

	if (buf == NULL) {
		fprintf(stderr, "airlock: %s %s: %s\n", what, path, msg);
		exit(CLI_EXIT_USAGE);
	}
	return buf;
}

static const char *
runtime_of(const char *file)
{
	const char *dot = file ? strrchr(file, '.') : NULL;

	if (dot && strcmp(dot, ".js") == 0)
		return "node";
	if (dot && strcmp(dot, ".sh") == 0)
		return "bash";
	return "python";
}

/* Run cx here and print as run does; the exit code. */
static int
run_local(json_t *cx, const struct local_opts *lo, const char *output)
{
	struct k8s_error err;
	struct ctl_config *cfg;
	json_t *out;
	int code;

	if ((cfg = local_config(lo->config, &err)) == NULL) {
		fprintf(stderr, "airlock: %s\n", err.message);
		return CLI_EXIT_ERROR;
	}
	if (local_run(cfg, cx, lo, &out, &err) != 0) {
		fprintf(stderr, "airlock: %s\n", err.message);
		ctl_config_free(cfg);
		return CLI_EXIT_ERROR;
	}
	ctl_config_free(cfg);
	code = cli_report(out, output);
	json_decref(out);
	return code;
}

enum {
	OPT_STDIN = 256, OPT_TIMEOUT, OPT_MEMORY, OPT_CPU, OPT_NAME, OPT_RM,
	OPT_LOCAL, OPT_RUNSC, OPT_ROOT, OPT_LOCAL_CONFIG, OPT_OUT, OPT_NO_STREAM,
	OPT_SESSION,
};

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "runtime", required_argument, NULL, 'r' },
		{ "code", required_argument, NULL, 'c' },
		{ "file", required_argument, NULL, 'f' },
		{ "stdin", required_argument, NULL, OPT_STDIN },
		{ "timeout", required_argument, NULL, OPT_TIMEOUT },
		{ "memory", required_argument, NULL, OPT_MEMORY },
		{ "cpu", required_argument, NULL, OPT_CPU },
		{ "name", required_argument, NULL, OPT_NAME },
		{ "rm", no_argument, NULL, OPT_RM },
		{ "no-stream", no_argument, NULL, OPT_NO_STREAM },
		{ "local", no_argument, NULL, OPT_LOCAL },
		{ "runsc", required_argument, NULL, OPT_RUNSC },
		{ "local-root", required_argument, NULL, OPT_ROOT },
		{ "local-config", required_argument, NULL, OPT_LOCAL_CONFIG },
		{ "out", required_argument, NULL, OPT_OUT },
		CLI_CLUSTER_LONGOPTS,
		{ "session", required_argument, NULL, OPT_SESSION },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct cli_cluster co = { .retry_ms = CLI_RETRY_DEFAULT_MS };
	struct local_opts lo = { 0 };
	const char *cmd, *runtime = NULL, *code = NULL, *file = NULL;
	const char *stdin_file = NULL, *memory = NULL, *cpu = NULL, *name = NULL;
	const char *session = NULL;
	char session_rt[64];
	long long timeout = 0;
	int local = 0, no_stream = 0, ch, rc;
	struct k8s_error err;
	json_t *cx, *spec;

	if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)
		usage();
	/*
	 * The library's own log lines (a watch reconnecting, ...) would land
	 * in the middle of the program's stderr: errors only, and those are
	 * printed by the commands themselves.
	 */
	log_set_level(getenv("AIRLOCK_DEBUG") ? LOG_LEVEL_DEBUG : LOG_LEVEL_ERROR);
	cmd = argv[1];
	/* Its own flags: --file and --timeout mean other things there. */
	if (strcmp(cmd, "session") == 0)
		return session_main(argc - 1, argv + 1);
	argv++, argc--;
	while ((ch = getopt_long(argc, argv, "r:c:f:n:o:Ah", longopts, NULL)) != -1) {
		switch (ch) {
		case 'r': runtime = optarg; break;
		case 'c': code = optarg; break;
		case 'f': file = optarg; break;
		case OPT_STDIN: stdin_file = optarg; break;
		case OPT_TIMEOUT:
			if (quantity_parse_int(optarg, 1, 3600, &timeout) != 0)
				cli_die_usage("--timeout: '%s': whole seconds, 1 to 3600", optarg);
			break;
		case OPT_MEMORY: memory = optarg; break;
		case OPT_CPU: cpu = optarg; break;
		case OPT_NAME: name = optarg; break;
		case OPT_RM: co.rm = 1; break;
		case OPT_NO_STREAM: no_stream = 1; break;
		case OPT_LOCAL: local = 1; break;
		case OPT_RUNSC: lo.runsc = optarg; break;
		case OPT_ROOT: lo.root = optarg; break;
		case OPT_LOCAL_CONFIG: lo.config = optarg; break;
		case OPT_OUT: co.out_dir = lo.out_dir = optarg; break;
		case OPT_SESSION: session = optarg; break;
		default:
			if (!cli_cluster_flag(&co, ch, optarg))
				usage();
		}
	}
	argc -= optind;
	argv += optind;

	if (strcmp(cmd, "get") == 0 || strcmp(cmd, "logs") == 0 ||
	    strcmp(cmd, "wait") == 0) {
		if (argc != 1)
			usage();
		if (strcmp(cmd, "get") == 0)
			return cluster_get(&co, argv[0]);
		if (strcmp(cmd, "logs") == 0)
			return cluster_logs(&co, argv[0]);
		co.wait_s = timeout;
		return cluster_wait(&co, argv[0]);
	}
	if (strcmp(cmd, "mcp") == 0) {
		/* An MCP server on stdio: stdout is the protocol's alone. */
		if (argc != 0)
			usage();
		return mcp_serve(&co, &lo, local, stdin, stdout);
	}
	if (strcmp(cmd, "list") == 0) {
		if (argc != 0)
			usage();
		return cluster_list(&co);
	}
	if (strcmp(cmd, "delete") == 0) {
		if (argc < 1)
			usage();
		return cluster_delete(&co, argv, argc);
	}

	if (strcmp(cmd, "apply") == 0) {
		if (file == NULL || argc != 0)
			cli_die_usage("apply: -f FILE is required");
		if (yamljson_load_file(file, "manifest", 0, &cx, &err) != 0)
			cli_die_usage("%s", err.message);
		if (!json_is_object(cx) || strcmp(json_string_value(json_object_get(cx,
		    "kind")) ? json_string_value(json_object_get(cx, "kind")) : "",
		    "CodeExecution") != 0 ||
		    strcmp(json_string_value(json_object_get(cx, "apiVersion")) ?
		    json_string_value(json_object_get(cx, "apiVersion")) : "",
		    "airlock.dev/v1alpha1") != 0)
			cli_die_usage("%s: not an airlock.dev/v1alpha1 CodeExecution", file);
		json_object_del(cx, "status");
	} else if (strcmp(cmd, "run") == 0) {
		size_t len;
		char *src;

		if ((code != NULL) + (argc == 1) != 1 || argc > 1)
			cli_die_usage("run: give the program as -c CODE, a FILE, or - for "
			    "standard input");
		if (session && local)
			cli_die_usage("--session: sessions need a cluster (not with --local)");
		if (session && runtime == NULL) {
			/* A step's runtime must be its session's: ask it. */
			char msg[1200];

			if ((rc = cluster_session_runtime(&co, session, session_rt,
			    sizeof(session_rt), msg, sizeof(msg))) != 0) {
				fprintf(stderr, "airlock: --session: %s\n", msg);
				return rc == -2 ? CLI_EXIT_USAGE : CLI_EXIT_ERROR;
			}
			runtime = session_rt;
		}
		if (code)
			src = xstrdup(code), len = strlen(code);
		else
			src = slurp(argv[0], &len, "program");
		spec = json_object();
		json_object_set_new(spec, "runtime", json_string(runtime ? runtime :
		    runtime_of(code ? NULL : argv[0])));
		if (memchr(src, '\0', len))
			cli_die_usage("the program holds a NUL byte");
		{
			json_t *j = json_stringn(src, len);

			if (j == NULL)
				cli_die_usage("the program is not valid UTF-8 (spec.source "
				    "is text)");
			json_object_set_new(spec, "source", j);
		}
		free(src);
		if (stdin_file) {
			char *in = slurp(stdin_file, &len, "--stdin");

			json_t *j = json_stringn(in, len);

			if (j == NULL)
				cli_die_usage("--stdin %s: not valid UTF-8 (spec.stdin is text)",
				    stdin_file);
			json_object_set_new(spec, "stdin", j);
			free(in);
		}
		if (timeout)
			json_object_set_new(spec, "timeoutSeconds", json_integer(timeout));
		if (session)
			json_object_set_new(spec, "session", json_string(session));
		if (memory || cpu) {
			json_t *r = json_object();

			if (memory)
				json_object_set_new(r, "memory", json_string(memory));
			if (cpu)
				json_object_set_new(r, "cpu", json_string(cpu));
			json_object_set_new(spec, "resources", r);
		}
		/* Its output printed as the program writes it (cluster_run). */
		if (!local && co.output == NULL && !no_stream)
			json_object_set_new(spec, "output", json_pack("{s:b}",
			    "stream", 1));
		cx = json_pack("{s:s, s:s, s:{}, s:o}", "apiVersion",
		    "airlock.dev/v1alpha1", "kind", "CodeExecution", "metadata",
		    "spec", spec);
		if (name)
			json_object_set_new(json_object_get(cx, "metadata"), "name",
			    json_string(name));
		else
			json_object_set_new(json_object_get(cx, "metadata"),
			    "generateName", json_string("run-"));
	} else {
		fprintf(stderr, "airlock: unknown command '%s'\n", cmd);
		usage();
	}

	/* Bad input is named here, before any cluster or sandbox. */
	if (cli_check_spec(json_object_get(cx, "spec"), &err) != 0) {
		fprintf(stderr, "airlock: %s\n", err.message);
		json_decref(cx);
		return CLI_EXIT_USAGE;
	}
	if (local)
		rc = run_local(cx, &lo, co.output);
	else
		rc = cluster_run(&co, cx);
	json_decref(cx);
	return rc;
}
