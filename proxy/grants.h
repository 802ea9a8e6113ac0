/*
 * grants.h - the egress grants the ACL helper answers from: a watch of
 * the grant ConfigMaps (egress_grant.h) in one namespace, kept as an
 * index from pod address to grant.
 *
 * At most GRANTS_MAX grants are held: past that, a new one is ignored
 * (a warning once) until one held goes and it changes again. A grant that
 * does not parse is ignored (a warning naming its ConfigMap alone: its
 * contents are the tenant's). Two grants for one address make it
 * ambiguous: neither is used until one goes.
 *
 * The informer's thread writes the index, the helper's main thread reads
 * it: a mutex, held for a lookup and a decision, never across a call to
 * the API. Thread-safe.
 */
#ifndef AIRLOCK_GRANTS_H
#define AIRLOCK_GRANTS_H

#include <stddef.h>

#include "acl.h"
#include "client.h"

#define GRANTS_MAX		8192
/* The watch counts as broken once it has not worked for this long. */
#define GRANTS_STALE_MS		10000

struct grants;

/*
 * Grants of namespace ns (borrowed for its life) through client c, stale
 * after stale_ms (0: GRANTS_STALE_MS). Not started: grants_start().
 */
struct grants *grants_new(struct k8s_client *c, const char *ns,
    long stale_ms);

/* Start the watch. 0, or K8S_EINVAL if it runs already. */
int grants_start(struct grants *gs) __attribute__((warn_unused_result));

/*
 * Whether the answers cannot be trusted: the first list has not synced,
 * or the watch has not worked for stale_ms (informer_ok_at()).
 */
int grants_stale(struct grants *gs);

/*
 * The reply to rq, into out (ACL_REPLY_MAX bytes): look up its source,
 * decide (acl_decide) and format, under the lock. Its length.
 */
size_t grants_answer(struct grants *gs, const struct acl_request *rq,
    char out[ACL_REPLY_MAX]);

/* How many grants are held now. */
size_t grants_len(struct grants *gs);

/* Stop the watch and free everything. NULL is fine. */
void grants_free(struct grants *gs);

#endif
