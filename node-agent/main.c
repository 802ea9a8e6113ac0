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
#include <unistd.h>

#include "agent.h"
#include "client.h"
#include "httpd.h"
#include "log.h"
#include "metrics.h"
#include "quantity.h"

static void
usage(void)
{
	fprintf(stderr,
	    "usage: airlock-node-agent --node-name NAME [--kubeconfig FILE] [--context NAME]\n"
	    "       [--namespace NS] [--pod-logs-dir DIR] [--containerd-socket PATH]\n"
	    "       [--poll-ms MS] [--hard-output-cap BYTES] [--metrics-addr ADDR]\n"
	    "       [--cgroup-mount DIR] [--cgroup-root PATH] [--sweep-ms MS] [--keep-stale-logs]\n"
	    "       [--log-level LEVEL]\n");
	exit(2);
}

static int
health(void *arg, char *why, size_t len)
{
	(void)arg;
	(void)why;
	(void)len;
	return 0;
}

static struct agent *the_agent;

static void *
readiness(void *arg)
{
	struct httpd *h = arg;

	/* Ready once the pod cache is synced and containerd answers. */
	while (!agent_ready(the_agent))
		usleep(50000);
	if (h)
		httpd_set_ready(h, 1);
	return NULL;
}

/* A flag's decimal value in [lo, hi], or exit 2 naming the flag. */
static long long
flag_number(const char *flag, const char *s, long long lo, long long hi)
{
	long long v;

	if (quantity_parse_int(s, lo, hi, &v) != 0) {
		fprintf(stderr, "airlock-node-agent: %s: '%s' is not a number "
		    "from %lld to %lld\n", flag, s, lo, hi);
		exit(2);
	}
	return v;
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
		{ "log-level", required_argument, NULL, 'l' },
		{ "cgroup-mount", required_argument, NULL, 'C' },
		{ "cgroup-root", required_argument, NULL, 'R' },
		{ "sweep-ms", required_argument, NULL, 'S' },
		{ "keep-stale-logs", no_argument, NULL, 'K' },
		{ NULL, 0, NULL, 0 },
	};
	const char *kubeconfig = NULL, *context = NULL, *metrics_addr = ":8081";
	struct agent_opts o = { 0 };
	struct k8s_config *kcfg;
	struct k8s_client *client;
	struct metrics *m;
	struct httpd *h = NULL;
	struct k8s_error err;
	enum log_level lvl;
	sigset_t set;
	pthread_t ready_th;
	int ch, sig;

	while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (ch) {
		case 'k': kubeconfig = optarg; break;
		case 'x': context = optarg; break;
		case 'N': o.node_name = optarg; break;
		case 'n': o.namespace = optarg; break;
		case 'p': o.pod_logs_dir = optarg; break;
		case 's': o.containerd_socket = optarg; break;
		case 'P': o.poll_ms = (long)flag_number("--poll-ms", optarg, 1, 1000); break;
		case 'H': o.hard_cap = flag_number("--hard-output-cap", optarg, 1, 1LL << 40); break;
		case 'C': o.cgroup_mount = optarg; break;
		case 'R': o.cgroup_root = optarg; break;
		case 'K': o.keep_stale_logs = 1; break;
		case 'S': o.sweep_ms = (long)flag_number("--sweep-ms", optarg, 100, 86400000); break;
		case 'm': metrics_addr = optarg; break;
		case 'l':
			if (log_parse_level(optarg, &lvl) != 0) {
				fprintf(stderr, "airlock-node-agent: --log-level: "
				    "unknown level '%s'\n", optarg);
				exit(2);
			}
			log_set_level(lvl);
			break;
		default: usage();
		}
	}
	if (o.node_name == NULL)
		o.node_name = getenv("NODE_NAME");
	if (o.node_name == NULL || !o.node_name[0] || optind != argc)
		usage();
	if (k8s_config_load_default(kubeconfig, context, &kcfg, &err) != 0 ||
	    k8s_client_new(kcfg, NULL, &client, &err) != 0) {
		fprintf(stderr, "airlock-node-agent: %s\n", err.message);
		exit(1);
	}

	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);

	m = metrics_new();
	the_agent = agent_new(client, m, &o);
	if (strcmp(metrics_addr, "0") != 0) {
		if (httpd_start(metrics_addr, m, &h, &err) != 0) {
			fprintf(stderr, "airlock-node-agent: %s\n", err.message);
			exit(1);
		}
		httpd_set_health_check(h, health, NULL);
	}
	if (agent_start(the_agent) != 0) {
		fprintf(stderr, "airlock-node-agent: cannot start\n");
		exit(1);
	}
	log_info("node agent started", "node=%s", o.node_name);
	pthread_create(&ready_th, NULL, readiness, h);
	pthread_detach(ready_th);
	sigwait(&set, &sig);
	log_info("shutting down", "signal=%d", sig);
	agent_stop(the_agent);
	httpd_stop(h);
	agent_free(the_agent);
	metrics_free(m);
	k8s_client_free(client);
	k8s_config_free(kcfg);
	log_info("node agent stopped");
	return 0;
}
