/*
 * egress.h - where an execution may connect (issue 32, docs/network.md).
 *
 * The operator's config gives a profile a list of IPv4 CIDRs and their TCP
 * ports (struct ctl_egress, ctl_config.h); an execution runs with that list
 * unless its spec.network.egress narrows it. This module reads the list
 * from the config, checks an execution's narrowing against it, and builds
 * the NetworkPolicy that enforces the list an execution ends up with. No
 * API calls: every decision is unit-tested (test_ctl_config, test_egress,
 * test_podspec).
 */
#ifndef AIRLOCK_EGRESS_H
#define AIRLOCK_EGRESS_H

#include <stddef.h>

#include <jansson.h>

#include "ctl_config.h"
#include "k8s_error.h"
#include "yamlwalk.h"

/*
 * Read a profile's network mapping net (the config's profiles.NAME.network,
 * not NULL; at is its field path) into p->egress and p->negress: absent,
 * null or [] egress is none. Each entry a cidr (canonical, no host bits,
 * none given twice, none overlapping a range no execution may reach:
 * 169.254.0.0/16, 127.0.0.0/8, 0.0.0.0/8, 224.0.0.0/3, so no 0.0.0.0/0
 * either) or a host name (a DNS name of two labels or more, lowercased),
 * and 1 to CTL_EGRESS_PORTS_MAX TCP ports. Then egressBytes into
 * p->egress_bytes: a quantity from 1 to CTL_EGRESS_BYTES_MAX,
 * CTL_EGRESS_BYTES_DEFAULT when absent, refused without egress entries
 * (which leave it 0). K8S_EINVAL through w with the field named
 * ("profiles.p.network.egressBytes '2Ti' is above 1Ti (...)");
 * p->negress counts what was allocated, so egress_free(p->egress,
 * p->negress) frees a partial list.
 */
int egress_config_walk(struct yamlwalk *w, yaml_node_t *net, const char *at,
    struct ctl_profile *p) __attribute__((warn_unused_result));

/*
 * An execution's spec.network (borrowed; NULL when absent), checked as
 * the CRD's schema would, since a CRD may be older than the controller:
 * an object with at most the key egress, a list of at most CTL_EGRESS_MAX
 * entries, each {cidr, ports} with the config's rules (canonical IPv4
 * CIDR, none given twice, 1 to CTL_EGRESS_PORTS_MAX ports from 1 to
 * 65535, none twice). *given: whether egress is there at all. *out (new,
 * NULL when *n is 0; free with egress_free()) and *n: its entries.
 * K8S_EINVAL naming the field ("spec.network.egress[1].ports[0]: ...").
 */
int egress_spec_parse(json_t *network, struct ctl_egress **out, size_t *n,
    int *given, struct k8s_error *err) __attribute__((warn_unused_result));

/*
 * The list an execution of profile p runs with, from its spec.network
 * (borrowed, may be NULL): the profile's own list when spec.network or
 * its egress is absent; none for egress: []; else the execution's, each
 * entry's CIDR inside a profile entry's (as long a prefix or longer, the
 * same network bits) whose ports hold that port, for every port. *out is
 * new (NULL when *n is 0): free with egress_free(). K8S_EINVAL naming
 * the entry for a malformed spec.network (egress_spec_parse()), a
 * non-empty list on a profile without egress ("spec.network.egress:
 * profile python has no egress") or an entry outside the profile's
 * ("spec.network.egress[1]: 10.0.0.0/8 port 5432 is not in profile
 * python-net's egress"): the execution is Rejected.
 */
int egress_effective(const struct ctl_profile *p, json_t *network,
    struct ctl_egress **out, size_t *n, struct k8s_error *err)
    __attribute__((warn_unused_result));

/*
 * Whether a profile of c has a host entry: 1 with err naming the first
 * ("profiles.P.network.egress[I].host needs ..."), which a controller
 * without the egress proxy's key refuses to start with; else 0.
 */
int egress_config_hosts(const struct ctl_config *c, struct k8s_error *err);

/* Free a list of n entries (NULL, 0 is fine). */
void egress_free(struct ctl_egress *e, size_t n);

/*
 * The NetworkPolicy for the list e[0..n) (n > 0; borrowed): the pods
 * with md's label by (an execution's uid label, CX_LABEL_UID; a pool's
 * holders', POOL_LABEL_UID) at its value may connect to each entry's
 * CIDR on its TCP ports, and nowhere else. Named, labelled and owned as
 * md (borrowed) says, with its label by. A new reference, or NULL when md
 * lacks strings it needs.
 */
json_t *egress_policy(const struct ctl_egress *e, size_t n, json_t *md,
    const char *by);

#endif
