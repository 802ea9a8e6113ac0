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

#include "client.h"
#include "controller.h"
#include "ctl_config.h"
#include "httpd.h"
#include "lease.h"
#include "log.h"
#include "metrics.h"
#include "xmalloc.h"

static struct controller *ctl;
static struct lease *the_lease;
static volatile sig_atomic_t quitting;

static void
usage(void)
{
	fprintf(stderr,
	    "usage: airlock-controller --config FILE [--kubeconfig FILE] [--context NAME]\n"
	    "       [--namespace NS] [--metrics-addr ADDR] [--workers N] [--log-level LEVEL]\n"
	    "       [--no-leader-elect] [--lease-namespace NS] [--lease-name NAME] [--identity ID]\n"
	    "       [--lease-duration-ms MS] [--renew-deadline-ms MS] [--retry-period-ms MS]\n"
	    "       [--guardrail-owner-clusterrole NAME] [--result-grace-ms MS]\n");
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
	if (!quitting)
		log_error("lost the leader lease; workers paused");
}

static int
health(void *arg, char *why, size_t len)
{
	(void)arg;
	(void)why;
	(void)len;
	return 0;
}

/*
 * /readyz follows controller_ready: synced and, while leading, every
 * execution looked at once since the lead began; polled until quitting.
 */
static void *
readiness(void *arg)
{
	struct httpd *h = arg;

	while (!quitting) {
		httpd_set_ready(h, controller_ready(ctl));
		usleep(100000);
	}
	return NULL;
}

static void *
signals(void *arg)
{
	sigset_t *set = arg;
	int sig;

	sigwait(set, &sig);
	quitting = 1;
	log_info("shutting down", "signal=%d", sig);
	if (the_lease)
		lease_stop(the_lease);
	else
		controller_set_leading(ctl, 0);
	return NULL;
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
		{ NULL, 0, NULL, 0 },
	};
	const char *kubeconfig = NULL, *context = NULL, *confpath = NULL;
	const char *metrics_addr = ":8080", *lease_ns = NULL;
	const char *lease_name = "airlock-controller", *owner_role = NULL;
	char *identity = NULL;
	struct controller_opts co = { 0 };
	struct lease_config lc = { 0 };
	struct k8s_config *kcfg;
	struct k8s_client *client;
	struct ctl_config *cfg;
	struct metrics *m;
	struct httpd *h = NULL;
	struct k8s_error err;
	enum log_level lvl;
	int leader_elect = 1, ch;
	sigset_t set;
	pthread_t sig_th, ready_th;

	while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (ch) {
		case 'k': kubeconfig = optarg; break;
		case 'x': context = optarg; break;
		case 'c': confpath = optarg; break;
		case 'n': co.namespace = optarg; break;
		case 'm': metrics_addr = optarg; break;
		case 'w': co.workers = atoi(optarg); break;
		case 'l':
			if (log_parse_level(optarg, &lvl) != 0) {
				fprintf(stderr, "airlock-controller: --log-level: "
				    "unknown level '%s'\n", optarg);
				exit(2);
			}
			log_set_level(lvl);
			break;
		case 'N': leader_elect = 0; break;
		case 'L': lease_ns = optarg; break;
		case 'E': lease_name = optarg; break;
		case 'i': identity = xstrdup(optarg); break;
		case 'D': lc.lease_duration_ms = atol(optarg); break;
		case 'R': lc.renew_deadline_ms = atol(optarg); break;
		case 'P': lc.retry_period_ms = atol(optarg); break;
		case 'O': owner_role = optarg; break;
		case 'G': co.result_grace_ms = atol(optarg); break;
		default: usage();
		}
	}
	if (confpath == NULL || optind != argc)
		usage();
	if (ctl_config_load(confpath, &cfg, &err) != 0) {
		fprintf(stderr, "airlock-controller: %s\n", err.message);
		exit(1);
	}
	if (k8s_config_load_default(kubeconfig, context, &kcfg, &err) != 0 ||
	    k8s_client_new(kcfg, NULL, &client, &err) != 0) {
		fprintf(stderr, "airlock-controller: %s\n", err.message);
		exit(1);
	}
	co.guard_owner_role = owner_role;
	if (lease_ns == NULL)
		lease_ns = getenv("POD_NAMESPACE") ? getenv("POD_NAMESPACE") :
		    kcfg->namespace;
	if (identity == NULL) {
		char host[256] = "unknown";

		/*
		 * The pod's name where the chart gives it: on the host's
		 * network the host name is the node's, the same for replicas.
		 */
		if (getenv("POD_NAME") && *getenv("POD_NAME"))
			snprintf(host, sizeof(host), "%s", getenv("POD_NAME"));
		else
			gethostname(host, sizeof(host) - 1);
		identity = xasprintf("%s_%d", host, (int)getpid());
	}

	/* Signals go to one thread; everything else runs with them blocked. */
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);

	m = metrics_new();
	ctl = controller_new(client, cfg, m, &co);
	if (strcmp(metrics_addr, "0") != 0) {
		if (httpd_start(metrics_addr, m, &h, &err) != 0) {
			fprintf(stderr, "airlock-controller: %s\n", err.message);
			exit(1);
		}
		httpd_set_health_check(h, health, NULL);
	}
	if (controller_start(ctl) != 0) {
		fprintf(stderr, "airlock-controller: cannot start\n");
		exit(1);
	}
	log_info("controller started", "identity=%s namespace=%s leader_elect=%d",
	    identity, co.namespace ? co.namespace : "(all)", leader_elect);
	pthread_create(&sig_th, NULL, signals, &set);
	if (h)
		pthread_create(&ready_th, NULL, readiness, h);
	if (leader_elect) {
		struct lease_callbacks cb = { started, stopped, NULL, NULL };

		lc.ns = lease_ns;
		lc.name = lease_name;
		lc.identity = identity;
		if (lease_new(client, &lc, &cb, &the_lease, &err) != 0) {
			fprintf(stderr, "airlock-controller: %s\n", err.message);
			exit(2);
		}
		lease_run(the_lease);
	} else {
		controller_set_leading(ctl, 1);
		/*
		 * Every signal is blocked here, so pause() would never return:
		 * the signal thread's end is what says "stop".
		 */
	}
	pthread_join(sig_th, NULL);
	if (h)
		pthread_join(ready_th, NULL);
	controller_stop(ctl);
	httpd_stop(h);
	controller_free(ctl);
	lease_free(the_lease);
	metrics_free(m);
	k8s_client_free(client);
	k8s_config_free(kcfg);
	ctl_config_free(cfg);
	free(identity);
	log_info("controller stopped");
	return 0;
}
