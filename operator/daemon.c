/*
 * daemon.c - see daemon.h.
 */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon.h"
#include "log.h"
#include "quantity.h"
#include "xmalloc.h"

static int sig_taken;	/* the signal daemon_on_signal's thread took */

long long
daemon_flag_number(const char *prog, const char *flag, const char *s,
    long long lo, long long hi)
{
	long long v;

	/* Digits only (a sign where lo allows): no space, no unit. */
	if (s == NULL || !(isdigit((unsigned char)s[0]) || (s[0] == '-' &&
	    lo < 0)) || quantity_parse_int(s, lo, hi, &v) != 0) {
		fprintf(stderr, "%s: %s: '%s' is not a number from %lld to %lld\n",
		    prog, flag, s ? s : "", lo, hi);
		exit(2);
	}
	return v;
}

void
daemon_die(const char *prog, int status, const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	int n;

	/* One write, so that no log line of a running thread splits it. */
	n = snprintf(line, sizeof(line), "%s: ", prog);
	if (n < 0 || (size_t)n >= sizeof(line) / 2)
		n = 0;
	va_start(ap, fmt);
	vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	strcat(line, "\n");
	fflush(stdout);
	fputs(line, stderr);
	fflush(stderr);
	_exit(status);
}

void
daemon_flag_log_level(const char *prog, const char *s)
{
	enum log_level lvl;

	if (log_parse_level(s, &lvl) != 0) {
		fprintf(stderr, "%s: --log-level: unknown level '%s'\n", prog, s);
		exit(2);
	}
	log_set_level(lvl);
}

void
daemon_init(struct daemon *d, const char *name, const char *kubeconfig,
    const char *context)
{
	struct k8s_error err;

	memset(d, 0, sizeof(*d));
	d->name = name;
	sigemptyset(&d->sigs);
	sigaddset(&d->sigs, SIGTERM);
	sigaddset(&d->sigs, SIGINT);
	pthread_sigmask(SIG_BLOCK, &d->sigs, NULL);
	signal(SIGPIPE, SIG_IGN);
	if (k8s_config_load_default(kubeconfig, context, &d->kcfg, &err) != 0 ||
	    k8s_client_new(d->kcfg, NULL, &d->client, &err) != 0)
		daemon_die(name, 1, "%s", err.message);
	d->metrics = metrics_new();
}

static int
healthy(void *arg, char *why, size_t len)
{
	(void)arg;
	(void)why;
	(void)len;
	return 0;
}

/* Quitting (a signal came), a daemon is not ready, whatever it says. */
static int
ready_unless_quitting(void *arg)
{
	struct daemon *d = arg;

	return !d->quitting && d->ready(d->ready_arg);
}

/* One listener: NULL for "0"; daemon_die if addr cannot be served. */
static struct httpd *
serve_one(struct daemon *d, const char *addr, struct metrics *metrics)
{
	struct k8s_error err;
	struct httpd *h;

	if (addr == NULL || strcmp(addr, "0") == 0)
		return NULL;
	if (httpd_start(addr, metrics, &h, &err) != 0)
		daemon_die(d->name, 1, "%s", err.message);
	httpd_set_health_check(h, healthy, NULL);
	httpd_set_ready_check(h, ready_unless_quitting, d);
	return h;
}

void
daemon_serve(struct daemon *d, const char *addr, const char *probe_addr,
    int (*ready)(void *), void *arg)
{
	d->ready = ready;
	d->ready_arg = arg;
	d->httpd = serve_one(d, addr, d->metrics);
	/* No registry: /metrics is 404 there, the scrapers' port is addr. */
	d->probes = serve_one(d, probe_addr, NULL);
}

static void *
take_signal(void *arg)
{
	struct daemon *d = arg;
	int sig;

	sigwait(&d->sigs, &sig);
	sig_taken = sig;
	d->quitting = 1;
	log_info("shutting down", "signal=%d", sig);
	if (d->on_signal)
		d->on_signal(d->on_signal_arg);
	return NULL;
}

void
daemon_on_signal(struct daemon *d, void (*fn)(void *), void *arg)
{
	d->on_signal = fn;
	d->on_signal_arg = arg;
	d->sig_started = pthread_create(&d->sig_th, NULL, take_signal, d) == 0;
}

int
daemon_quitting(const struct daemon *d)
{
	return d->quitting;
}

static void
not_ready(struct httpd *h)
{
	if (h == NULL)
		return;
	httpd_set_ready_check(h, NULL, NULL);
	httpd_set_not_ready_reason(h, "shutting down");
	httpd_set_ready(h, 0);
}

int
daemon_wait(struct daemon *d)
{
	int sig;

	if (d->sig_started) {
		pthread_join(d->sig_th, NULL);
		d->sig_started = 0;
		sig = sig_taken;
	} else {
		sigwait(&d->sigs, &sig);
		d->quitting = 1;
		log_info("shutting down", "signal=%d", sig);
	}
	/*
	 * Quitting: not ready, and ready() is not asked again, as what it
	 * reads is freed from now on.
	 */
	not_ready(d->httpd);
	not_ready(d->probes);
	return sig;
}

void
daemon_free(struct daemon *d)
{
	httpd_stop(d->httpd);
	httpd_stop(d->probes);
	metrics_free(d->metrics);
	k8s_client_free(d->client);
	k8s_config_free(d->kcfg);
	memset(d, 0, sizeof(*d));
}

char *
daemon_identity(void)
{
	char host[256] = "unknown";

	if (getenv("POD_NAME") && *getenv("POD_NAME"))
		snprintf(host, sizeof(host), "%s", getenv("POD_NAME"));
	else
		gethostname(host, sizeof(host) - 1);
	return xasprintf("%s_%d", host, (int)getpid());
}
