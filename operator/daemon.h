/*
 * daemon.h - what each Airlock daemon's main() does around its own work,
 * in the spirit of controller-runtime's Manager: the API client from a
 * kubeconfig (or the pod's service account), the metrics registry, the
 * /metrics, /healthz and /readyz endpoint with readiness asked of the
 * daemon per request, SIGTERM and SIGINT taken by one thread, and
 * range-checked numeric flags. The lease stays with the controller
 * (lease.h): only it elects a leader.
 *
 * Errors at start-up are the operator's to fix, so these print one line
 * naming the program and the flag or the cause, and exit: 2 for a bad
 * flag, 1 for anything else. A daemon listens before it starts a thread
 * of its own (daemon_serve first), and once threads may run it ends with
 * daemon_die, never exit(): see there.
 */
#ifndef AIRLOCK_DAEMON_H
#define AIRLOCK_DAEMON_H

#include <pthread.h>
#include <signal.h>

#include "client.h"
#include "httpd.h"
#include "metrics.h"

struct daemon {
	const char		*name;		/* "airlock-controller" */
	struct k8s_config	*kcfg;
	struct k8s_client	*client;
	struct metrics		*metrics;
	struct httpd		*httpd;		/* NULL: --metrics-addr 0 */
	struct httpd		*probes;	/* NULL: --probe-addr 0 */

	/* private */
	sigset_t		 sigs;
	volatile sig_atomic_t	 quitting;
	int			(*ready)(void *);
	void			*ready_arg;
	pthread_t		 sig_th;
	int			 sig_started;
	void			(*on_signal)(void *);
	void			*on_signal_arg;
};

/*
 * flag's decimal value s in [lo, hi]; out of range or not a number: a
 * line naming the flag and the range, exit 2.
 */
long long daemon_flag_number(const char *prog, const char *flag,
    const char *s, long long lo, long long hi);

/*
 * Print "prog: MESSAGE" to stderr and end the process with status, at
 * once: _exit(), not exit(). exit() runs OpenSSL's clean-up handler while
 * the informers' threads may be in a TLS handshake, and they then crash
 * (a taken port once ended the controller with SIGSEGV instead of its
 * message and status 1).
 */
void daemon_die(const char *prog, int status, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 3, 4)));

/*
 * This process's name among its replicas, for a Lease's holder (caller
 * frees): "POD_PID", the pod's name where the chart gives it ($POD_NAME:
 * on the host's network the host name is the node's, the same for
 * replicas), else the host's.
 */
char *daemon_identity(void);

/* --log-level's value: set it, or a line and exit 2. */
void daemon_flag_log_level(const char *prog, const char *s);

/*
 * Block SIGTERM and SIGINT in this thread and every thread it starts from
 * now on (daemon_wait takes them), ignore SIGPIPE, load the kubeconfig
 * (NULL: the default, in-cluster or $KUBECONFIG) and context, and make the
 * client and the metrics registry. Exit 1 with the error.
 */
void daemon_init(struct daemon *d, const char *name, const char *kubeconfig,
    const char *context);

/*
 * Serve /metrics, /healthz (always healthy: the process answers) and
 * /readyz at addr, and /healthz and /readyz alone at probe_addr; "0" (or
 * NULL for probe_addr) for none. /readyz is 200 while ready(arg) says so,
 * asked per request (on the HTTP server's thread: it must not block) from
 * now until a signal comes, and 503 from then on (ready is not asked once
 * daemon_wait returned). Call it before the daemon starts its threads:
 * ready(arg) must already be safe to ask, and a port that cannot be served
 * ends the process (daemon_die, status 1) with nothing else running.
 *
 * The probes' listener exists because one listener can be filled: 16
 * addresses holding 4 slow connections each take all HTTPD_MAX_CONNS, and
 * the kubelet's probes then go unanswered (issue 27). Nothing but the
 * kubelet should reach probe_addr (the chart admits only the node to it,
 * or binds it to 127.0.0.1 on the host's network), so no other client's
 * connections can hold it.
 */
void daemon_serve(struct daemon *d, const char *addr, const char *probe_addr,
    int (*ready)(void *), void *arg);

/*
 * Take SIGTERM and SIGINT on a thread of their own: on the first, the
 * daemon is quitting (daemon_quitting) and fn(arg) runs there (may be
 * NULL), so that a main() blocked elsewhere (the lease) is told to stop.
 */
void daemon_on_signal(struct daemon *d, void (*fn)(void *), void *arg);

/* 1 once a signal came. */
int daemon_quitting(const struct daemon *d);

/*
 * Wait for the signal (on this thread, or for daemon_on_signal's to have
 * taken it); stop the readiness poll. The signal number.
 */
int daemon_wait(struct daemon *d);

/* Stop both listeners, free the registry, the client and the config. */
void daemon_free(struct daemon *d);

#endif
