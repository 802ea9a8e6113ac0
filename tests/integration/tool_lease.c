/*
 * tool_lease - one contender for the lease integration test.
 *
 *   tool_lease KUBECONFIG NAMESPACE NAME IDENTITY DURATION_MS RENEW_MS RETRY_MS
 *
 * Prints "LEADING <mono ms>" when it becomes leader and "STOPPED <mono ms>"
 * when it stops, flushed at once, and acts (prints "ACT <n>") every 100 ms
 * only while lease_is_leader() holds, so the test can check that two never
 * act at once. SIGTERM releases the lease and exits 0.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "client.h"
#include "clock.h"
#include "lease.h"
#include "log.h"

static struct lease *the_lease;
static atomic_int quit;

static void
started(void *arg)
{
	(void)arg;
	printf("LEADING %lld\n", clock_mono_ms());
	fflush(stdout);
}

static void
stopped(void *arg)
{
	(void)arg;
	printf("STOPPED %lld\n", clock_mono_ms());
	fflush(stdout);
}

static void *
signals(void *arg)
{
	sigset_t *set = arg;
	int sig;

	sigwait(set, &sig);
	lease_stop(the_lease);
	return NULL;
}

static void *
actor(void *arg)
{
	(void)arg;
	while (!atomic_load(&quit)) {
		if (lease_is_leader(the_lease)) {
			printf("ACT %lld\n", clock_mono_ms());
			fflush(stdout);
		}
		usleep(100000);
	}
	return NULL;
}

int
main(int argc, char **argv)
{
	struct lease_callbacks cb = { started, stopped, NULL, NULL };
	struct lease_config lc;
	struct k8s_config *cfg;
	struct k8s_client *c;
	struct k8s_error err;
	sigset_t set;
	pthread_t sig_th, act_th;

	if (argc != 8) {
		fprintf(stderr, "usage: tool_lease KUBECONFIG NS NAME ID DURATION_MS RENEW_MS RETRY_MS\n");
		return 2;
	}
	log_set_level(LOG_LEVEL_WARN);
	lc = (struct lease_config){ argv[2], argv[3], argv[4], atol(argv[5]),
	    atol(argv[6]), atol(argv[7]) };
	if (k8s_config_load_kubeconfig(argv[1], NULL, &cfg, &err) != 0 ||
	    k8s_client_new(cfg, NULL, &c, &err) != 0 ||
	    lease_new(c, &lc, &cb, &the_lease, &err) != 0) {
		fprintf(stderr, "tool_lease: %s\n", err.message);
		return 1;
	}
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	pthread_create(&sig_th, NULL, signals, &set);
	pthread_create(&act_th, NULL, actor, NULL);
	lease_run(the_lease);
	pthread_join(sig_th, NULL);
	atomic_store(&quit, 1);
	pthread_join(act_th, NULL);
	printf("EXIT %lld\n", clock_mono_ms());
	fflush(stdout);
	lease_free(the_lease);
	k8s_client_free(c);
	k8s_config_free(cfg);
	return 0;
}
