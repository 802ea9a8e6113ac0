/*
 * cluster_priv.h - what cli/cluster.c (executions) shares with
 * cli/session.c (sessions): the connection, the create that is tried
 * again and never made twice, and the wait on a watch of one object.
 * Not public; cli.h is.
 */
#ifndef AIRLOCK_CLUSTER_PRIV_H
#define AIRLOCK_CLUSTER_PRIV_H

#include <stdatomic.h>
#include <jansson.h>

#include "cli.h"
#include "client.h"
#include "config.h"

struct conn {
	struct k8s_config	*cfg;
	struct k8s_client	*c;
	const char		*ns;	/* o->ns, else the context's, else default */
};

/*
 * Connect as o says (kubeconfig, context, namespace). 0, or -1 with err
 * (conn_open) or with the error said on stderr (cli_connect). Undone by
 * conn_close.
 */
int conn_open(const struct cli_cluster *o, struct conn *k,
    struct k8s_error *err) __attribute__((warn_unused_result));
int cli_connect(const struct cli_cluster *o, struct conn *k)
    __attribute__((warn_unused_result));
void conn_close(struct conn *k);

/* "airlock: WHAT: message" on stderr; the exit code (2 for 400/422, else 1). */
int cli_api_error(const char *what, const struct k8s_error *err);

/*
 * Create obj of res in k->ns, once, tried again for retry_ms as run's
 * create is (cluster.c: a name drawn here from metadata.generateName, or
 * "run-", and CLI_ANN_CREATE_TOKEN set, so a lost answer's 409 is known
 * as ours). obj's metadata is changed so. say: one line on stderr when it
 * waits. 0 and *created (new reference), or a K8S_E* code with err.
 */
int cli_create(struct conn *k, const struct k8s_resource *res, json_t *obj,
    atomic_int *cancel, long retry_ms, int say, json_t **created,
    struct k8s_error *err) __attribute__((warn_unused_result));

/*
 * Wait on a watch of res's object name until done(obj) is true: that
 * object (new reference). NULL when timeout_s (0: none) passed, *stop
 * (may be NULL) became non-zero, it was deleted ("NS/NAME was deleted" in
 * msg) or cannot be watched ("cannot watch ..." in msg); msg is "" for
 * the first two. *last (if given): the object as last seen, or NULL (new
 * reference).
 */
json_t *cli_wait(struct conn *k, const struct k8s_resource *res,
    const char *name, int (*done)(json_t *obj), long timeout_s,
    atomic_int *stop, json_t **last, char *msg, size_t msz);

/* obj's age at now (Unix seconds) as kubectl says it: 5s, 3m, 2h, 4d, ?. */
void cli_age(json_t *obj, long long now, char *a, size_t n);

#endif
