/*
 * client.h - a Kubernetes REST client on libcurl.
 *
 * One struct k8s_client per API server. Requests are synchronous and the
 * client is thread-safe: any number of threads may issue requests at once.
 * It keeps a pool of curl easy handles, so a connection (and its TLS
 * session) is reused by the next request that picks the handle up.
 *
 * Objects go in and come out as jansson values. Unless a comment says
 * otherwise, json_t arguments are borrowed (the caller keeps its reference)
 * and json_t results are new references the caller releases with
 * json_decref(). A result pointer may be NULL when the caller does not want
 * the object back.
 *
 * Every fallible call returns 0 or a negative K8S_E* code and fills the
 * caller's struct k8s_error (may be NULL) with the HTTP status and the API
 * server's Status reason and message. A 409 on update is K8S_ECONFLICT, on
 * create K8S_EEXIST; 404 is K8S_ENOTFOUND; 410 is K8S_EGONE.
 *
 * Responses are read into a capped buffer (max_response_bytes); a larger
 * response fails with K8S_ETOOBIG and is never parsed.
 *
 * 429 Too Many Requests, and 5xx answers that carry Retry-After, are
 * retried up to max_retries times after the delay the server asks for
 * (capped at max_retry_after_ms), like client-go does.
 */
#ifndef AIRLOCK_CLIENT_H
#define AIRLOCK_CLIENT_H

#include <stddef.h>
#include <jansson.h>

#include "config.h"
#include "k8s_error.h"

/* A resource type: where its objects live in the REST path space. */
struct k8s_resource {
	const char	*group;		/* "" for the core group */
	const char	*version;	/* "v1" */
	const char	*plural;	/* "configmaps" */
	int		 namespaced;
};

extern const struct k8s_resource k8s_res_configmaps;
extern const struct k8s_resource k8s_res_secrets;
extern const struct k8s_resource k8s_res_namespaces;
extern const struct k8s_resource k8s_res_pods;
extern const struct k8s_resource k8s_res_events;
extern const struct k8s_resource k8s_res_leases;

struct k8s_client_opts {
	long		 timeout_ms;		/* whole request; default 30000 */
	long		 connect_timeout_ms;	/* default 10000 */
	size_t		 max_response_bytes;	/* default 32 MiB */
	int		 max_retries;		/* default 3; -1 for none */
	long		 max_retry_after_ms;	/* default 10000 */
	const char	*user_agent;		/* default "airlock/0.1" */
	int		 allow_token_over_http;	/* tests only: else refused */
};

struct k8s_client;

/*
 * Create a client for cfg, which is borrowed and must outlive the client.
 * opts may be NULL; zero fields take the defaults. K8S_EINVAL for an
 * unusable config (no server, unsupported option).
 */
int k8s_client_new(struct k8s_config *cfg, const struct k8s_client_opts *opts,
    struct k8s_client **out, struct k8s_error *err)
    __attribute__((warn_unused_result));

/* Free the client and its pooled connections. NULL is fine. */
void k8s_client_free(struct k8s_client *c);

/* The config the client was made from (borrowed). */
struct k8s_config *k8s_client_config(struct k8s_client *c);

/* The options in force, defaults filled in (borrowed). */
const struct k8s_client_opts *k8s_client_get_opts(struct k8s_client *c);

/*
 * Build the path of an object, a collection (name NULL) or a subresource
 * (sub non-NULL) of res: /api/v1/namespaces/NS/configmaps/NAME/status.
 * ns NULL or "" on a namespaced resource means all namespaces.
 * Names are checked to be path-safe; K8S_EINVAL otherwise.
 * Caller frees *out.
 */
int k8s_path(const struct k8s_resource *res, const char *ns, const char *name,
    const char *sub, char **out, struct k8s_error *err)
    __attribute__((warn_unused_result));

/*
 * The general request. path is absolute ("/api/v1/...") and may carry a
 * query. body may be NULL. *status receives the HTTP status (may be NULL).
 * On a 2xx answer with a body, *out is the parsed JSON (new reference) when
 * out is non-NULL; an unparseable 2xx body is K8S_EINVAL.
 */
int k8s_request(struct k8s_client *c, const char *method, const char *path,
    const char *content_type, const char *body, size_t body_len,
    long *status, json_t **out, struct k8s_error *err)
    __attribute__((warn_unused_result));

/* A GET whose response is capped at cap bytes (at most the client's). */
int k8s_request_capped(struct k8s_client *c, const char *path, size_t cap,
    json_t **out, struct k8s_error *err)
    __attribute__((warn_unused_result));

int k8s_get(struct k8s_client *c, const struct k8s_resource *res,
    const char *ns, const char *name, json_t **out, struct k8s_error *err)
    __attribute__((warn_unused_result));

struct k8s_list_opts {
	const char	*label_selector;
	const char	*field_selector;
	long		 limit;			/* page size; 0 = server default */
	const char	*continue_token;
	const char	*resource_version;
	const char	*resource_version_match; /* "NotOlderThan", "Exact" */
	/*
	 * A page's response cap in bytes (0: the client's): k8s_list_each
	 * halves a page past it, so that a list of large objects is never
	 * held a big page at a time.
	 */
	size_t		 page_bytes;
};

/* One page: the List object as the server sent it. opts may be NULL. */
int k8s_list(struct k8s_client *c, const struct k8s_resource *res,
    const char *ns, const struct k8s_list_opts *opts, json_t **out,
    struct k8s_error *err)
    __attribute__((warn_unused_result));

/*
 * Every page, following metadata.continue. *items is a new array of all
 * objects; *rv (caller frees, may be NULL) the list's resourceVersion.
 * If a continue token expires mid-way (410), the list starts over once
 * without a page size, as client-go's pager does. resource_version and
 * resource_version_match apply to the first page only. At most
 * K8S_LIST_MAX_ITEMS objects: K8S_ETOOBIG past that.
 */
#define K8S_LIST_MAX_ITEMS	(1 << 20)
int k8s_list_all(struct k8s_client *c, const struct k8s_resource *res,
    const char *ns, const struct k8s_list_opts *opts, json_t **items,
    char **rv, struct k8s_error *err)
    __attribute__((warn_unused_result));

/*
 * The same walk, handing each object (borrowed) to each() as its page
 * arrives, so a caller that keeps a little of each never holds the whole
 * list: only one page is in memory at a time. each(arg, NULL) means the
 * list starts over (an expired continue token): forget what came before.
 * A non-zero return from each() stops the walk and is returned.
 * A page larger than the client's response cap is asked for again, half
 * as long (limit 0 starts at 250), down to one item: a list works
 * whatever its objects' sizes.
 */
int k8s_list_each(struct k8s_client *c, const struct k8s_resource *res,
    const char *ns, const struct k8s_list_opts *opts,
    int (*each)(void *arg, json_t *item), void *arg, char **rv,
    struct k8s_error *err)
    __attribute__((warn_unused_result));

int k8s_create(struct k8s_client *c, const struct k8s_resource *res,
    const char *ns, json_t *obj, json_t **out, struct k8s_error *err)
    __attribute__((warn_unused_result));

/*
 * PUT obj to NAME (sub NULL) or to its subresource (e.g. "status").
 * obj's metadata.resourceVersion is the precondition: K8S_ECONFLICT when
 * it is stale.
 */
int k8s_update(struct k8s_client *c, const struct k8s_resource *res,
    const char *ns, const char *name, const char *sub, json_t *obj,
    json_t **out, struct k8s_error *err)
    __attribute__((warn_unused_result));

enum k8s_patch_type {
	K8S_PATCH_MERGE,	/* application/merge-patch+json */
	K8S_PATCH_JSON,		/* application/json-patch+json */
	K8S_PATCH_STRATEGIC,	/* application/strategic-merge-patch+json */
	K8S_PATCH_APPLY,	/* server-side apply (application/apply-patch+yaml) */
};

struct k8s_patch_opts {
	enum k8s_patch_type	 type;
	const char		*field_manager;	/* required for APPLY */
	int			 force;		/* APPLY: take over conflicting fields */
	const char		*subresource;	/* e.g. "status", or NULL */
};

int k8s_patch(struct k8s_client *c, const struct k8s_resource *res,
    const char *ns, const char *name, const struct k8s_patch_opts *opts,
    json_t *patch, json_t **out, struct k8s_error *err)
    __attribute__((warn_unused_result));

struct k8s_delete_opts {
	const char	*propagation_policy;	/* "Foreground", "Background", "Orphan" or NULL */
	int		 grace_period_set;	/* 0: the server's default grace */
	long		 grace_period_seconds;	/* used when grace_period_set */
	const char	*precondition_uid;	/* delete only this incarnation */
	const char	*precondition_rv;
};

/* opts may be NULL; a zeroed struct also means the server's defaults. */
int k8s_delete(struct k8s_client *c, const struct k8s_resource *res,
    const char *ns, const char *name, const struct k8s_delete_opts *opts,
    json_t **out, struct k8s_error *err)
    __attribute__((warn_unused_result));

/* Borrowed helpers for objects: metadata.name etc., or NULL. */
const char *k8s_obj_name(json_t *obj);
const char *k8s_obj_namespace(json_t *obj);
const char *k8s_obj_rv(json_t *obj);
const char *k8s_obj_uid(json_t *obj);

#endif
