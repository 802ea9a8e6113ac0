/*
 * airlock-node-agent - one per node: enforces each execution's timeout,
 * captures its stdout and stderr apart, records its result and collects
 * its pod. See agent.h.
 */
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "cx.h"
#include "daemon.h"
#include "lease.h"
#include "log.h"
#include "xmalloc.h"

static void
usage(void)
{
	fprintf(stderr,
	    "usage: airlock-node-agent --node-name NAME [--kubeconfig FILE] [--context NAME]\n"
	    "       [--namespace NS] [--pod-logs-dir DIR] [--containerd-socket PATH]\n"
	    "       [--poll-ms MS] [--hard-output-cap BYTES] [--metrics-addr ADDR] [--probe-addr ADDR]\n"
	    "       [--cgroup-mount DIR] [--cgroup-root PATH] [--sweep-ms MS] [--keep-stale-logs]\n"
	    "       [--exec-dir DIR] [--runsc PATH --runsc-root DIR] [--log-level LEVEL]\n"
	    "       [--lease-namespace NS] [--network-runtime-class NAME]\n"
	    "       [--iptables PATH]\n");
	exit(2);
}

static struct daemon d;

/* /readyz's 503 says why (NULL or "": ready). */
static void
say_why(const char *why)
{
	if (why && !why[0])
		why = NULL;
	if (d.httpd)
		httpd_set_not_ready_reason(d.httpd, why);
	if (d.probes)
		httpd_set_not_ready_reason(d.probes, why);
}

static struct agent *agent;

static int
ready(void *arg)
{
	char why[600];
	int ok = agent_ready(arg);

	/*
	 * The pod cache is synced, containerd answers and the configuration
	 * matches the node (check.c). The reason is for the next answer:
	 * this one's was read before the question.
	 */
	agent_not_ready_reason(arg, why, sizeof(why));
	say_why(ok ? NULL : why);
	return ok;
}

/* Told by the agent's check as soon as its answer changes. */
static void
on_ready(void *arg, const char *why)
{
	(void)arg;
	(void)why;
	if (agent != NULL)
		(void)ready(agent);
}

/*
 * The heartbeat (controller/agents.c): a Lease of its node's, renewed
 * every CX_AGENT_RENEW_S while the agent runs and released when it stops,
 * so that the controller's grace for a result runs only while an agent is
 * there to record it. Held or not, the agent works: the Lease says it is
 * heard, it does not decide who acts.
 */
static struct lease *heartbeat;
static pthread_t heartbeat_thread;
static char *heartbeat_name, *heartbeat_id;

static void *
heartbeat_run(void *arg)
{
	(void)arg;
	lease_run(heartbeat);
	return NULL;
}

/* Made before any thread runs (see daemon_die); run once the agent is. */
static void
heartbeat_new(const char *prog, const char *ns, const char *node)
{
	struct lease_config lc = { .ns = ns, .lease_duration_ms =
	    CX_AGENT_LEASE_S * 1000, .renew_deadline_ms =
	    (CX_AGENT_LEASE_S - CX_AGENT_RENEW_S - 5) * 1000,
	    .retry_period_ms = CX_AGENT_RENEW_S * 1000 };
	struct k8s_error err;

	if (strlen(CX_AGENT_LEASE_PREFIX) + strlen(node) > 253) {
		log_warn("no heartbeat: the node's name is too long for its "
		    "lease's", "node=%s", node);
		return;
	}
	heartbeat_name = xasprintf("%s%s", CX_AGENT_LEASE_PREFIX, node);
	/*
	 * daemon_identity and when it started: in its container the agent is
	 * always pid 1, and one restarted there must be heard as a new agent.
	 */
	{
		struct timespec ts;
		char *id = daemon_identity();

		clock_gettime(CLOCK_REALTIME, &ts);
		heartbeat_id = xasprintf("%s_%lld%03ld", id, (long long)ts.tv_sec,
		    ts.tv_nsec / 1000000);
		free(id);
	}
	lc.name = heartbeat_name;
	lc.identity = heartbeat_id;
	if (lease_new(d.client, &lc, NULL, &heartbeat, &err) != 0)
		daemon_die(prog, 2, "%s", err.message);
}

/* After the agent stopped: released, a successor is heard at once. */
static void
heartbeat_stop(void)
{
	if (heartbeat == NULL)
		return;
	lease_stop(heartbeat);
	pthread_join(heartbeat_thread, NULL);
	lease_free(heartbeat);
	free(heartbeat_name);
	free(heartbeat_id);
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "kubeconfig", required_argument, NULL, 'k' },
		{ "context", required_argument, NULL, 'x' },
		{ "node-name", required_argument, NULL, 'N' },
		{ "namespace", required_argument, NULL, 'n' },
		{ "pod-logs-dir", required_argument, NULL, 'p' },
		{ "containerd-socket", required_argument, NULL, 's' },
		{ "poll-ms", required_argument, NULL, 'P' },
		{ "hard-output-cap", required_argument, NULL, 'H' },
		{ "metrics-addr", required_argument, NULL, 'm' },
		{ "probe-addr", required_argument, NULL, 'b' },
		{ "log-level", required_argument, NULL, 'l' },
		{ "cgroup-mount", required_argument, NULL, 'C' },
		{ "cgroup-root", required_argument, NULL, 'R' },
		{ "sweep-ms", required_argument, NULL, 'S' },
		{ "keep-stale-logs", no_argument, NULL, 'K' },
		{ "exec-dir", required_argument, NULL, 'E' },
		{ "runsc", required_argument, NULL, 'r' },
		{ "runsc-root", required_argument, NULL, 'o' },
		{ "network-runtime-class", required_argument, NULL, 'W' },
		{ "iptables", required_argument, NULL, 'I' },
		{ "lease-namespace", required_argument, NULL, 'L' },
		{ NULL, 0, NULL, 0 },
	};
	static const char prog[] = "airlock-node-agent";
	const char *kubeconfig = NULL, *context = NULL, *metrics_addr = ":8081";
	const char *probe_addr = "0", *lease_ns = NULL;
	struct agent_opts o = { 0 };
	struct agent *a;
	int ch;

	while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (ch) {
		case 'k': kubeconfig = optarg; break;
		case 'x': context = optarg; break;
		case 'N': o.node_name = optarg; break;
		case 'n': o.namespace = optarg; break;
		case 'p': o.pod_logs_dir = optarg; break;
		case 's': o.containerd_socket = optarg; break;
		case 'P': o.poll_ms = (long)daemon_flag_number(prog, "--poll-ms", optarg, 1, 1000); break;
		case 'H': o.hard_cap = daemon_flag_number(prog, "--hard-output-cap", optarg, 1, 1LL << 40); break;
		case 'C': o.cgroup_mount = optarg; break;
		case 'R': o.cgroup_root = optarg; break;
		case 'K': o.keep_stale_logs = 1; break;
		case 'E': o.exec_dir = optarg; break;
		case 'r': o.runsc = optarg; break;
		case 'o': o.runsc_root = optarg; break;
		case 'W': o.network_class = optarg; break;
		case 'I': o.iptables = optarg; break;
		case 'L': lease_ns = optarg; break;
		case 'S': o.sweep_ms = (long)daemon_flag_number(prog, "--sweep-ms", optarg, 100, 86400000); break;
		case 'm': metrics_addr = optarg; break;
		case 'b': probe_addr = optarg; break;
		case 'l': daemon_flag_log_level(prog, optarg); break;
		default: usage();
		}
	}
	if (o.node_name == NULL)
		o.node_name = getenv("NODE_NAME");
	if (o.node_name == NULL || !o.node_name[0] || optind != argc)
		usage();
	if ((o.runsc == NULL) != (o.runsc_root == NULL)) {
		fprintf(stderr, "%s: --runsc and --runsc-root go together\n", prog);
		exit(2);
	}
	o.on_ready = on_ready;
	daemon_init(&d, prog, kubeconfig, context);
	if ((a = agent_new(d.client, d.metrics, &o)) == NULL)
		daemon_die(prog, 1, "cannot make the agent");
	agent = a;
	if (lease_ns && *lease_ns)
		heartbeat_new(prog, lease_ns, o.node_name);
	/* The port before any thread of the agent's: see daemon_die. */
	daemon_serve(&d, metrics_addr, probe_addr, ready, a);
	if (agent_start(a) != 0)
		daemon_die(prog, 1, "cannot start the agent");
	if (heartbeat && pthread_create(&heartbeat_thread, NULL, heartbeat_run,
	    NULL) != 0)
		daemon_die(prog, 1, "cannot start the heartbeat");
	log_info("node agent started", "node=%s heartbeat=%s", o.node_name,
	    heartbeat ? lease_ns : "(none)");
	daemon_wait(&d);
	agent_stop(a);
	heartbeat_stop();
	daemon_free(&d);
	agent_free(a);
	log_info("node agent stopped");
	return 0;
}
