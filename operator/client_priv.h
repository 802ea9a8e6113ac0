/*
 * client_priv.h - what the client's files (client.c, list.c) and the
 * watch module share. Not public.
 */
#ifndef AIRLOCK_CLIENT_PRIV_H
#define AIRLOCK_CLIENT_PRIV_H

#include <curl/curl.h>

#include "client.h"

#define PATH_MAX_LEN	8192	/* a request path with its query */

/*
 * Set h up for METHOD on path (absolute, with query): URL, TLS material,
 * the bearer token (re-read if it rotated), Accept, User-Agent, timeouts
 * (timeout_ms 0: none, for long-lived streams). Headers are appended to
 * *hdrs, which the caller frees with curl_slist_free_all() after the
 * transfer with k8s_headers_free(), also when this fails. The caller sets
 * the body and the write callbacks.
 */
int k8s_client_setup(struct k8s_client *c, CURL *h, const char *method,
    const char *path, long timeout_ms, struct curl_slist **hdrs,
    struct k8s_error *err)
    __attribute__((warn_unused_result));

/* Free a header list from k8s_client_setup(), wiping the token first. */
void k8s_headers_free(struct curl_slist *hdrs);

/*
 * Turn a non-2xx answer into an error code and fill err: reason and message
 * from a Status body when there is one, the first bytes of the body
 * (sanitised) otherwise. Returns the code.
 */
int k8s_error_from_response(long status, const char *body, size_t len,
    struct k8s_error *err);

/* Percent-encode s for a query value into b. 0 or K8S_ETOOBIG. */
struct buf;
int k8s_query_append(struct buf *b, const char *key, const char *value)
    __attribute__((warn_unused_result));

#endif
