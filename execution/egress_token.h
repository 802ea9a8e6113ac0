/*
 * egress_token.h - an execution's pass through the egress proxy (issue 32,
 * docs/network.md "Host entries").
 *
 * An execution with host entries reaches them only through the egress
 * proxy, which must know, for each request, which execution asks and
 * which hosts it may reach. The controller says so in the pod itself:
 * HTTP_PROXY=http://USER:PASS@proxy:3128, where USER is the claims
 * (execution uid, namespace, name, its host entries, an expiry) as
 * base64url JSON, and PASS the hex HMAC-SHA256 of USER under a key only
 * the controller and the proxy hold (a Secret). Clients send it as
 * Proxy-Authorization: Basic on every request and CONNECT; the proxy's
 * ACL helper checks it. No API access for the proxy, no per-execution
 * object to make and clean up, no window in which an address is reused,
 * nothing to wait for at start: the pass is complete when the pod is.
 *
 * What it does not do: bind the pass to the pod. Anyone holding it may
 * use it, until it expires, from wherever the proxy's policy admits
 * (execution pods): the execution's own tenant, who can read the pod,
 * gains nothing it did not have; see docs/network.md.
 */
#ifndef AIRLOCK_EGRESS_TOKEN_H
#define AIRLOCK_EGRESS_TOKEN_H

#include <stddef.h>

#include "ctl_config.h"
#include "k8s_error.h"

#define EGRESS_KEY_MIN		32	/* bytes of the shared key */
#define EGRESS_KEY_MAX		4096
/*
 * The base64url claims: a header of about 5.6 KiB, which Squid passes to
 * its helper twice a line (header and tag); a profile of many long host
 * names may not fit, and its execution ends StartFailed saying so.
 */
#define EGRESS_USER_MAX		4096
#define EGRESS_PASS_LEN		64	/* hex HMAC-SHA256 */

/* What a pass says. Its hosts each have host set, cidr NULL. */
struct egress_claims {
	char			*uid, *ns, *name;
	long long		 exp;	/* Unix seconds: no use after it */
	struct ctl_egress	*hosts;
	size_t			 nhosts;
};

/*
 * The pass of execution uid (ns/name) for the host entries of
 * e[0..n) (CIDR entries are skipped: the NetworkPolicy's), good until
 * exp, under key (keylen >= EGRESS_KEY_MIN): *user new (free()), pass
 * filled. 0, or K8S_EINVAL when there is no host entry or it would be
 * longer than EGRESS_USER_MAX.
 */
int egress_token_make(const struct ctl_egress *e, size_t n, const char *uid,
    const char *ns, const char *name, long long exp, const unsigned char *key,
    size_t keylen, char **user, char pass[EGRESS_PASS_LEN + 1],
    struct k8s_error *err) __attribute__((warn_unused_result));

/*
 * Check a pass (user, ulen bytes; pass, plen bytes; from the network: any
 * bytes) at time now: its HMAC under key (in constant time), then its
 * claims, strictly (every field, every cap, host entries as the config
 * has them). 0 with *out filled (egress_claims_free()), or -1 with why:
 * "malformed", "bad-signature" or "expired".
 */
int egress_token_check(const char *user, size_t ulen, const char *pass,
    size_t plen, long long now, const unsigned char *key, size_t keylen,
    struct egress_claims *out, const char **why)
    __attribute__((warn_unused_result));

void egress_claims_free(struct egress_claims *c);

/*
 * The shared key from the file at path (a Secret's mount): its bytes, a
 * trailing newline dropped, EGRESS_KEY_MIN to EGRESS_KEY_MAX of them.
 * *key new (free()). K8S_EINVAL naming the file and what is wrong.
 */
int egress_key_load(const char *path, unsigned char **key, size_t *keylen,
    struct k8s_error *err) __attribute__((warn_unused_result));

#endif
