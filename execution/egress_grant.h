/*
 * egress_grant.h - an execution's host entries, as the egress proxy reads
 * them (issue 32, docs/network-proxy-research.md).
 *
 * The controller publishes one ConfigMap per execution with host entries,
 * in its own namespace; the proxy's ACL helper (proxy/) watches them and
 * answers Squid from them. Both ends use this module, so the format has
 * one definition:
 *
 *   metadata: name airlock-egress-<uid>, namespace <controller's>,
 *     labels {app.kubernetes.io/managed-by: airlock-controller,
 *             app.kubernetes.io/component: egress-grant,
 *             airlock.dev/execution-uid: <uid>}
 *   data:
 *     uid: <uid>   namespace: <execution's>   name: <execution's>
 *     podIP: <the pod's IPv4, canonical dotted>   (absent until it has one)
 *     hosts: '[{"host":"allowed.test","ports":[8080,8443]}, ...]'
 *
 * The proxy trusts nothing in it: every field is checked and capped here,
 * since a ConfigMap in that namespace may be written by more than the
 * controller.
 */
#ifndef AIRLOCK_EGRESS_GRANT_H
#define AIRLOCK_EGRESS_GRANT_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "ctl_config.h"
#include "k8s_error.h"

#define EGRESS_GRANT_PREFIX	"airlock-egress-"
#define EGRESS_GRANT_COMPONENT	"egress-grant"
/* The proxy's watch: every grant, and nothing else. */
#define EGRESS_GRANT_SELECTOR	"app.kubernetes.io/component=" EGRESS_GRANT_COMPONENT

#define EGRESS_GRANT_UID_MAX		64
#define EGRESS_GRANT_NAME_MAX		253	/* namespace and name */
#define EGRESS_GRANT_HOSTS_TEXT_MAX	(16 * 1024)

/*
 * A parsed grant. Invariants: uid, ns and name are non-empty, of
 * [a-z0-9.-] (uid [a-z0-9-]) and within the caps above; pod_ip is ""
 * or a canonical dotted IPv4 whose value is addr (host byte order);
 * hosts[0..nhosts) (at most CTL_EGRESS_MAX, none twice) each have host
 * set (egress_grant_host_ok()), cidr NULL and 1 to CTL_EGRESS_PORTS_MAX
 * ports, none twice.
 */
struct egress_grant {
	char			*uid;
	char			*ns;
	char			*name;
	char			 pod_ip[16];
	uint32_t		 addr;
	struct ctl_egress	*hosts;
	size_t			 nhosts;
};

/*
 * Whether s (len bytes, no NUL needed) is a host entry's name: 1 to
 * CTL_EGRESS_HOST_MAX bytes of dot-separated labels, each 1 to 63 of
 * [a-z0-9-] not starting or ending with '-', no trailing dot, and a last
 * label that is neither all digits nor 0x-hex (so no name reads as an
 * IP literal). 1 or 0.
 */
int egress_grant_host_ok(const char *s, size_t len);

/*
 * The ConfigMap for an execution (uid, exec_ns/exec_name) in the
 * controller's namespace ctl_ns, with its pod's address pod_ip (NULL: no
 * podIP key) and the entries of e[0..n) that have a host (CIDR entries
 * are the NetworkPolicy's). Strings are borrowed. A new reference.
 */
json_t *egress_grant_configmap(const char *ctl_ns, const char *uid,
    const char *exec_ns, const char *exec_name, const char *pod_ip,
    const struct ctl_egress *e, size_t n);

/*
 * Read configmap (borrowed) into *out, checked field by field as the
 * invariants above say; every data key known, metadata.name the prefix
 * and the uid. On success *out owns its strings: free with
 * egress_grant_free(). K8S_EINVAL naming the field ("data.hosts[2].ports:
 * ..."), *out then empty.
 */
int egress_grant_parse(json_t *configmap, struct egress_grant *out,
    struct k8s_error *err) __attribute__((warn_unused_result));

/* Free what g holds and empty it; NULL or empty is fine. */
void egress_grant_free(struct egress_grant *g);

#endif
