/*
 * fakeapi.h - a scripted HTTP server for unit tests of the client and watch.
 *
 * It answers requests, in order, with responses pushed beforehand, and
 * records every request. It exists for what a real API server cannot be
 * made to do on demand (500s, 429 with Retry-After, a slow answer, a torn
 * stream); everything else is tested against the real kube-apiserver in
 * tests/integration/. Served by libmicrohttpd on 127.0.0.1, one thread
 * per connection.
 */
#ifndef AIRLOCK_FAKEAPI_H
#define AIRLOCK_FAKEAPI_H

#include <jansson.h>

#include "client.h"
#include "config.h"
#include "informer.h"

struct fakeapi;

/* Starts on a free port; aborts the test program if it cannot. */
struct fakeapi *fakeapi_start(void);
void fakeapi_stop(struct fakeapi *f);

/* "http://127.0.0.1:PORT". Borrowed. */
const char *fakeapi_url(struct fakeapi *f);

/*
 * Queue one response. retry_after may be NULL; body is copied; delay_ms
 * holds the answer back. With no response queued the server answers 599.
 * Status 0 closes the connection with no answer at all: a request that
 * arrived (it is recorded) but whose answer was lost.
 */
void fakeapi_push(struct fakeapi *f, int status, const char *retry_after,
    const char *body, long delay_ms);

/*
 * delay_ms FAKEAPI_HOLD holds the answer until the test releases it: for
 * "not before the test has checked X", which a fixed delay only makes
 * likely and always costs in full. fakeapi_release() lets the next held
 * answer (in push order) go, whether or not its request came yet.
 * fakeapi_stop() ends every hold and delay at once (the answer goes out
 * then, to a client that is gone by then), so that a test's quiet watch
 * or long delay does not cost its full time at the end.
 */
#define FAKEAPI_HOLD	(-1L)
void fakeapi_release(struct fakeapi *f);

/*
 * Queue a 200 that is a long stream (a followed log): body sent at once,
 * then the answer held open until fakeapi_release() lets it end (in push
 * order among the held answers) or fakeapi_stop().
 */
void fakeapi_push_stream(struct fakeapi *f, const char *body);

/*
 * Queue a response whose body is the body request req (0-based) sent: the
 * object a create stored, as a later GET of it returns it.
 */
void fakeapi_push_echo(struct fakeapi *f, int status, int req);

/* How many requests arrived, and the i-th as "METHOD URL" (borrowed). */
int fakeapi_count(struct fakeapi *f);
/* Waits until at least n requests arrived or timeout_ms passed; returns
 * the count then. */
int fakeapi_wait_count(struct fakeapi *f, int n, long timeout_ms);
const char *fakeapi_request(struct fakeapi *f, int i);
/* The i-th request's body and its Authorization and Content-Type headers
 * ("" when absent). Borrowed. */
const char *fakeapi_body(struct fakeapi *f, int i);
const char *fakeapi_auth(struct fakeapi *f, int i);
const char *fakeapi_ctype(struct fakeapi *f, int i);
/* When the i-th request arrived, in clock_mono_ms() terms; 0 if none. */
long long fakeapi_time(struct fakeapi *f, int i);

/*
 * A config for the fake server, loaded from a kubeconfig written to a
 * temp file (so the real loader is used). token may be NULL. Caller frees
 * with k8s_config_free().
 */
struct k8s_config *fakeapi_config(struct fakeapi *f, const char *token);

/*
 * A cache for a unit test: an informer on res, started and synced, that
 * listed items (stolen; the list at resourceVersion 10) from a fake
 * server of its own, whose watch then stays quiet quiet_ms. Its server,
 * config and client into *src, *kc and *cl, for the caller to free
 * after informer_stop() and informer_free(). Fails the test if it does
 * not sync in 5 s.
 */
struct informer *fakeapi_informer(const struct k8s_resource *res,
    json_t *items, json_t *(*transform)(json_t *), char *(*index)(json_t *),
    long quiet_ms, struct fakeapi **src, struct k8s_config **kc,
    struct k8s_client **cl);
/* Stop and free what fakeapi_informer() made. */
void fakeapi_informer_free(struct informer *inf, struct fakeapi *src,
    struct k8s_config *kc, struct k8s_client *cl);

#endif
