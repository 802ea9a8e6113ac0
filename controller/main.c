/*
 * airlock-controller - turns CodeExecutions into hardened gVisor pods.
 * See controller.h for the machinery and controller/docs/pod.md for the pod.
 */
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "controller.h"
#include "ctl_config.h"
#include "daemon.h"
#include "lease.h"
#include "egress.h"
#include "egress_token.h"
#include "log.h"
#include "xmalloc.h"

static struct controller *ctl;
static struct lease *the_lease;
static struct daemon d;

static void
usage(void)
{
	fprintf(stderr,
	    "usage: airlock-controller --config FILE [--kubeconfig FILE] [--context NAME]\n"
	    "       [--namespace NS] [--metrics-addr ADDR] [--probe-addr ADDR] [--workers N]\n"
	    "       [--log-level LEVEL]\n"
	    "       [--no-leader-elect] [--lease-namespace NS] [--lease-name NAME] [--identity ID]\n"
	    "       [--lease-duration-ms MS] [--renew-deadline-ms MS] [--retry-period-ms MS]\n"
	    "       [--guardrail-owner-clusterrole NAME] [--result-grace-ms MS]\n"
	    "       [--pool-refill-delay-ms MS] [--start-deadline-seconds S]\n"
	    "       [--agent-absent-seconds S] [--egress-key FILE]\n");
	exit(2);
}

static void
started(void *arg)
{
	(void)arg;
	controller_set_leading(ctl, 1);
}

static void
stopped(void *arg)
{
	(void)arg;
	/* Stop acting now; keep contending unless we are on our way out. */
	controller_set_leading(ctl, 0);
	if (!daemon_quitting(&d))
		log_error("lost the leader lease; workers paused");
}

/* For /readyz: see controller_ready. */
static int
ready(void *arg)
{
	return controller_ready(arg);
}

/* On SIGTERM or SIGINT: give the lease up (lease_run returns), or stop. */
static void
quit(void *arg)
{
	(void)arg;
	if (the_lease)
		lease_stop(the_lease);
	else
		controller_set_leading(ctl, 0);
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "kubeconfig", required_argument, NULL, 'k' },
		{ "context", required_argument, NULL, 'x' },
		{ "config", required_argument, NULL, 'c' },
		{ "namespace", required_argument, NULL, 'n' },
		{ "metrics-addr", required_argument, NULL, 'm' },
		{ "probe-addr", required_argument, NULL, 'b' },
		{ "workers", required_argument, NULL, 'w' },
		{ "log-level", required_argument, NULL, 'l' },
		{ "no-leader-elect", no_argument, NULL, 'N' },
		{ "lease-namespace", required_argument, NULL, 'L' },
		{ "lease-name", required_argument, NULL, 'E' },
		{ "identity", required_argument, NULL, 'i' },
		{ "lease-duration-ms", required_argument, NULL, 'D' },
		{ "renew-deadline-ms", required_argument, NULL, 'R' },
		{ "retry-period-ms", required_argument, NULL, 'P' },
		{ "guardrail-owner-clusterrole", required_argument, NULL, 'O' },
		{ "result-grace-ms", required_argument, NULL, 'G' },
		{ "pool-refill-delay-ms", required_argument, NULL, 'F' },
		{ "start-deadline-seconds", required_argument, NULL, 'S' },
		{ "agent-absent-seconds", required_argument, NULL, 'A' },
		{ "egress-key", required_argument, NULL, 'K' },
		{ NULL, 0, NULL, 0 },
	};
	const char *kubeconfig = NULL, *context = NULL, *confpath = NULL;
	const char *metrics_addr = ":8080", *probe_addr = "0", *lease_ns = NULL;
	const char *lease_name = "airlock-controller", *owner_role = NULL;
	const char *egress_key = NULL;
	unsigned char *key = NULL;
	static const char prog[] = "airlock-controller";
	char *identity = NULL;
	struct controller_opts co = { .refill_delay_ms = 500 };
	struct lease_config lc = { 0 };
	struct ctl_config *cfg;
	struct k8s_error err;
	int leader_elect = 1, ch;

	while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (ch) {
		case 'k': kubeconfig = optarg; break;
		case 'x': context = optarg; break;
		case 'c': confpath = optarg; break;
		case 'n': co.namespace = optarg; break;
		case 'm': metrics_addr = optarg; break;
		case 'b': probe_addr = optarg; break;
		case 'w': co.workers = (int)daemon_flag_number(prog, "--workers",
		    optarg, 1, 64); break;
		case 'l': daemon_flag_log_level(prog, optarg); break;
		case 'N': leader_elect = 0; break;
		case 'L': lease_ns = optarg; break;
		case 'E': lease_name = optarg; break;
		case 'i': identity = xstrdup(optarg); break;
		case 'D': lc.lease_duration_ms = (long)daemon_flag_number(prog,
		    "--lease-duration-ms", optarg, 1000, 3600000); break;
		case 'R': lc.renew_deadline_ms = (long)daemon_flag_number(prog,
		    "--renew-deadline-ms", optarg, 100, 3600000); break;
		case 'P': lc.retry_period_ms = (long)daemon_flag_number(prog,
		    "--retry-period-ms", optarg, 100, 3600000); break;
		case 'O': owner_role = optarg; break;
		case 'G': co.result_grace_ms = (long)daemon_flag_number(prog,
		    "--result-grace-ms", optarg, 1, 86400000); break;
		case 'F': co.refill_delay_ms = (long)daemon_flag_number(prog,
		    "--pool-refill-delay-ms", optarg, 0, 60000); break;
		case 'S': co.start_deadline_ms = 1000 * (long)daemon_flag_number(
		    prog, "--start-deadline-seconds", optarg, 1, 86400); break;
		case 'A': co.agent_absent_ms = 1000 * (long)daemon_flag_number(
		    prog, "--agent-absent-seconds", optarg, 1, 86400); break;
		case 'K': egress_key = optarg; break;
		default: usage();
		}
	}
	if (confpath == NULL || optind != argc)
		usage();
	if (ctl_config_load(confpath, &cfg, &err) != 0)
		daemon_die(prog, 1, "%s", err.message);
	if (egress_key && egress_key_load(egress_key, &key, &co.egress_key_len,
	    &err) != 0)
		daemon_die(prog, 1, "--egress-key: %s", err.message);
	co.egress_key = key;
	if (key == NULL && egress_config_hosts(cfg, &err))
		daemon_die(prog, 1, "%s", err.message);
	/* Signals go to one thread; everything else runs with them blocked. */
	daemon_init(&d, prog, kubeconfig, context);
	co.guard_owner_role = owner_role;
	if (lease_ns == NULL)
		lease_ns = getenv("POD_NAMESPACE") ? getenv("POD_NAMESPACE") :
		    d.kcfg->namespace;
	/* The agents renew their heartbeats beside the leader's lease. */
	co.agent_lease_ns = lease_ns;
	if (identity == NULL)
		identity = daemon_identity();

	ctl = controller_new(d.client, cfg, d.metrics, &co);
	/*
	 * Everything that can refuse to start does so before the informers'
	 * threads run (see daemon_die): the lease's settings, then the port.
	 */
	if (leader_elect) {
		struct lease_callbacks cb = { started, stopped, NULL, NULL };

		lc.ns = lease_ns;
		lc.name = lease_name;
		lc.identity = identity;
		if (lease_new(d.client, &lc, &cb, &the_lease, &err) != 0)
			daemon_die(prog, 2, "%s", err.message);
	}
	daemon_serve(&d, metrics_addr, probe_addr, ready, ctl);
	if (controller_start(ctl) != 0)
		daemon_die(prog, 1, "cannot start the informers");
	log_info("controller started", "identity=%s namespace=%s leader_elect=%d",
	    identity, co.namespace ? co.namespace : "(all)", leader_elect);
	if (leader_elect) {
		daemon_on_signal(&d, quit, NULL);
		lease_run(the_lease);
	} else {
		controller_set_leading(ctl, 1);
		daemon_on_signal(&d, quit, NULL);
	}
	daemon_wait(&d);
	controller_stop(ctl);
	daemon_free(&d);
	controller_free(ctl);
	lease_free(the_lease);
	ctl_config_free(cfg);
	free(key);
	free(identity);
	log_info("controller stopped");
	return 0;
}
