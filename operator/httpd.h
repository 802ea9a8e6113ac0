/*
 * httpd.h - the daemons' small HTTP endpoint: /metrics, /healthz, /readyz.
 *
 * Served by libmicrohttpd in its own thread. Only GET and HEAD are
 * answered (anything else is 405 with "Allow: GET, HEAD"), unknown paths
 * are 404. Bodies are text/plain:
 *
 *   /metrics   200, metrics_render() output, Content-Type
 *              "text/plain; version=0.0.4; charset=utf-8" (404 without a
 *              registry, 500 if rendering fails)
 *   /healthz   200 "ok", or 503 with the health check's message
 *   /readyz    200 "ok" once ready, else 503 with the not-ready reason
 *              ("not ready" when none was given)
 *
 * A client cannot make the server grow without bound: each connection's
 * request is held in a fixed pool (HTTPD_CONN_MEMORY; larger requests are
 * refused by libmicrohttpd), at most HTTPD_MAX_CONNS connections are open
 * at once and an idle one is closed after HTTPD_TIMEOUT_SECS. No one
 * address may hold more than HTTPD_PER_IP_CONNS of them: a client that
 * opens connections and sends nothing cannot fill the server alone
 * (32 such clients once kept /healthz unanswered for 24 s, and liveness
 * probes restarted the daemon). Several addresses still can: 16 of them,
 * each trickling a byte before the idle timeout, hold all HTTPD_MAX_CONNS
 * for as long as they like. So the daemons serve the kubelet's probes on
 * a second server of their own (daemon_serve's probe_addr), which only
 * the node reaches.
 *
 * Thread-safe: the setters may be called from any thread while serving.
 */
#ifndef AIRLOCK_HTTPD_H
#define AIRLOCK_HTTPD_H

#include <stddef.h>
#include <stdint.h>

#include "k8s_error.h"
#include "metrics.h"

#define HTTPD_MAX_CONNS		64
#define HTTPD_PER_IP_CONNS	4
#define HTTPD_TIMEOUT_SECS	5
#define HTTPD_CONN_MEMORY	(16u * 1024)
/* The not-ready reason and a health check's message are cut to this. */
#define HTTPD_REASON_MAX	256

struct httpd;

/*
 * Tests only: an idle timeout in seconds to use in place of
 * HTTPD_TIMEOUT_SECS (0, the default, means that), read by httpd_start().
 * The unit tests that wait the timeout out set it short; no daemon sets it.
 */
extern unsigned int httpd_test_timeout_secs;

/*
 * Start serving on addr: "HOST:PORT", "[IPV6]:PORT" or ":PORT" (every
 * address, IPv6 and IPv4 where the host has both). PORT 0 picks a free
 * port (see httpd_port()). HOST may be a name, resolved once, here, to
 * its first IPv4 address or, failing that, its first IPv6 one.
 * metrics is borrowed and must outlive the server; NULL makes /metrics
 * 404. The server starts not ready.
 *
 * Returns 0 and *out (free with httpd_stop()), K8S_EINVAL for a malformed
 * addr or a HOST that does not resolve, or K8S_EIO if it cannot listen;
 * err gets the detail.
 */
int httpd_start(const char *addr, struct metrics *metrics, struct httpd **out,
    struct k8s_error *err) __attribute__((warn_unused_result));

/* The port actually bound (useful after asking for port 0). */
uint16_t httpd_port(struct httpd *h);

/* Flip /readyz between 200 (ready != 0) and 503, when no check is set. */
void httpd_set_ready(struct httpd *h, int ready);

/* Text for /readyz's 503 body (copied; NULL restores "not ready"). */
void httpd_set_not_ready_reason(struct httpd *h, const char *why);

/*
 * Make /healthz call check(arg, why, whylen) on libmicrohttpd's thread per
 * request: 0 means healthy; otherwise the reply is 503 with the
 * NUL-terminated text check left in why ("unhealthy" if it left none).
 * check NULL removes it. The check runs under a lock this call takes, so
 * once the call returns the old check and arg are no longer used; for the
 * same reason a check must not call httpd_set_health_check().
 */
void httpd_set_health_check(struct httpd *h,
    int (*check)(void *arg, char *why, size_t whylen), void *arg);

/*
 * Make /readyz ask ready(arg) per request, on libmicrohttpd's thread,
 * instead of answering the flag httpd_set_ready() sets: nonzero is ready.
 * Asked, not polled, so that /readyz is never behind what the daemon
 * knows. Like the health check, it runs under the lock this call takes
 * (the same lock as the health check's): once
 * httpd_set_ready_check(h, NULL, NULL) returns, ready is not running and
 * is not called again. Neither check may call either setter.
 */
void httpd_set_ready_check(struct httpd *h, int (*ready)(void *arg),
    void *arg);

/* Stop serving (waits for requests in flight) and free h. NULL is fine. */
void httpd_stop(struct httpd *h);

#endif
