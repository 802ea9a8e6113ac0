/*
 * egress.c - see egress.h.
 */
#include <arpa/inet.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cx.h"
#include "egress.h"
#include "quantity.h"
#include "xmalloc.h"

/* The network bits of a /prefix, host byte order. */
static uint32_t
mask(int prefix)
{
	return prefix == 0 ? 0 : ~(uint32_t)0 << (32 - prefix);
}

/*
 * "a.b.c.d/n" in s (len bytes): the network into *addr (host byte order)
 * and *prefix. 0 when well formed (the address as inet_pton reads it, no
 * leading zeros; n from 0 to 32, no leading zero); else -1, or 1 when host
 * bits are set (*addr then holds the network they belong to).
 */
static int
parse_cidr(const unsigned char *s, size_t len, uint32_t *addr, int *prefix)
{
	const unsigned char *slash = memchr(s, '/', len);
	char ip[INET_ADDRSTRLEN];
	struct in_addr in;
	size_t iplen, plen;
	uint32_t a;
	int n;

	if (slash == NULL || (iplen = (size_t)(slash - s)) >= sizeof(ip) ||
	    memchr(s, '\0', iplen) != NULL)
		return -1;
	memcpy(ip, s, iplen);
	ip[iplen] = '\0';
	plen = len - iplen - 1;
	if (inet_pton(AF_INET, ip, &in) != 1 || plen < 1 || plen > 2 ||
	    slash[1] < '0' || slash[1] > '9' || (plen == 2 &&
	    (slash[1] == '0' || slash[2] < '0' || slash[2] > '9')))
		return -1;
	n = plen == 1 ? slash[1] - '0' : (slash[1] - '0') * 10 + slash[2] - '0';
	if (n > 32)
		return -1;
	a = ntohl(in.s_addr);
	*prefix = n;
	*addr = a & mask(n);
	return *addr == a ? 0 : 1;
}

/* One egress entry's ports (a list of 1 to 65535, none twice). */
static int
walk_ports(struct yamlwalk *w, yaml_node_t *entry, const char *where,
    struct ctl_egress *e)
{
	yaml_node_item_t *it;
	yaml_node_t *seq, *item;
	size_t i, j, n;
	int rc;

	if ((rc = yamlwalk_lookup(w, entry, where, "ports", &seq)) != 0)
		return rc;
	if (seq == NULL || yamlwalk_is_null(seq))
		return yamlwalk_fail(w, "%s.ports is missing: list the TCP "
		    "ports it may connect to", where);
	if (seq->type != YAML_SEQUENCE_NODE)
		return yamlwalk_fail(w, "%s.ports is not a list", where);
	n = (size_t)(seq->data.sequence.items.top - seq->data.sequence.items.start);
	if (n == 0)
		return yamlwalk_fail(w, "%s.ports is empty", where);
	if (n > CTL_EGRESS_PORTS_MAX)
		return yamlwalk_fail(w, "%s.ports has more than %d items", where,
		    CTL_EGRESS_PORTS_MAX);
	for (i = 0, it = seq->data.sequence.items.start; i < n; i++, it++) {
		const char *v;
		long long port;

		if ((rc = yamlwalk_step(w)) != 0)
			return rc;
		item = yamlwalk_node(w, *it);
		/* Plain digits, no sign, space or leading zero; all of it. */
		if (item == NULL || item->type != YAML_SCALAR_NODE ||
		    item->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
			goto bad;
		v = (const char *)item->data.scalar.value;
		if (v[0] < '1' || v[0] > '9' ||
		    strlen(v) != item->data.scalar.length ||
		    quantity_parse_int(v, 1, 65535, &port) != 0)
			goto bad;
		for (j = 0; j < e->nports; j++)
			if (e->ports[j] == (int)port)
				return yamlwalk_fail(w, "%s.ports[%zu] %lld is "
				    "given twice", where, i, port);
		e->ports[e->nports++] = (int)port;
		continue;
bad:
		return yamlwalk_fail(w, "%s.ports[%zu] is not a port from 1 to "
		    "65535", where, i);
	}
	return 0;
}

/*
 * Ranges no execution may reach whatever a profile says: the node's and
 * the cloud's own addresses, and what is not one host. A CIDR that
 * overlaps one (inside it, or covering it as 0.0.0.0/0 does) is refused;
 * the first row it meets is named.
 */
static const struct {
	uint32_t	 addr;
	int		 prefix;
	const char	*text, *what;
} forbidden[] = {
	{ 0xa9fe0000, 16, "169.254.0.0/16", "link-local, the cloud metadata address" },
	{ 0x7f000000, 8, "127.0.0.0/8", "loopback" },
	{ 0x00000000, 8, "0.0.0.0/8", "this network" },
	{ 0xe0000000, 3, "224.0.0.0/3", "multicast and reserved" },
};

/* Whether a/n and b/m share an address: one holds the other. */
static int
overlaps(uint32_t a, int n, uint32_t b, int m)
{
	int k = n < m ? n : m;

	return (a & mask(k)) == (b & mask(k));
}

/* The config's refusal of e's CIDR, at its entry's path here, or 0. */
static int
refuse_forbidden(struct yamlwalk *w, const char *here,
    const struct ctl_egress *e)
{
	for (size_t i = 0; i < sizeof(forbidden) / sizeof(forbidden[0]); i++)
		if (overlaps(e->addr, e->prefix, forbidden[i].addr,
		    forbidden[i].prefix))
			return yamlwalk_fail(w, "%s.cidr: %s %s %s (%s)", here,
			    e->cidr, e->prefix <= forbidden[i].prefix ?
			    "covers" : "is in", forbidden[i].text,
			    forbidden[i].what);
	return 0;
}

/*
 * A host entry's name in s (len bytes) into out (lowercase, one trailing
 * dot dropped): a DNS name of at least two labels, each 1 to 63 of
 * [a-z0-9-], not starting or ending with '-', at most CTL_EGRESS_HOST_MAX
 * in all, whose last label is not all digits nor 0x... (so that nothing
 * that reads as an address is a name). NULL, or why not.
 */
static const char *
host_name(const char *s, size_t len, char out[CTL_EGRESS_HOST_MAX + 1])
{
	size_t i, label = 0, labels = 1, last = 0;
	int digits = 1;

	if (len > 0 && s[len - 1] == '.')
		len--;
	if (len == 0 || len > CTL_EGRESS_HOST_MAX)
		return "is not a DNS name of 1 to 253 characters";
	for (i = 0; i < len; i++) {
		char c = s[i] >= 'A' && s[i] <= 'Z' ? (char)(s[i] + 32) : s[i];

		if (c == '.') {
			if (label == 0 || out[i - 1] == '-')
				return "has an empty label or one ending in '-'";
			labels++, label = 0, last = i + 1, digits = 1;
			out[i] = c;
			continue;
		}
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		    c == '-'))
			return "may hold only letters, digits, '-' and '.' "
			    "(no wildcard, no address)";
		if ((c == '-' && label == 0) || ++label > 63)
			return "has a label starting with '-' or longer than 63";
		digits &= c >= '0' && c <= '9';
		out[i] = c;
	}
	out[len] = '\0';
	if (out[len - 1] == '-')
		return "has a label ending in '-'";
	if (labels < 2)
		return "is not a fully qualified name (at least two labels, "
		    "such as pypi.org)";
	if (digits || strncmp(out + last, "0x", 2) == 0)
		return "reads as an address: give an address as a cidr";
	return NULL;
}

static const char *const network_keys[] = { "egress", "egressBytes", NULL };
static const char *const egress_keys[] = { "cidr", "host", "ports", NULL };

/* A host entry's name, the scalar n, at its entry's path here, into e. */
static int
walk_host(struct yamlwalk *w, yaml_node_t *n, const char *here,
    struct ctl_egress *e)
{
	char host[CTL_EGRESS_HOST_MAX + 1];
	const char *v, *why;

	if (n->type != YAML_SCALAR_NODE || yamlwalk_is_null(n))
		return yamlwalk_fail(w, "%s.host is not a string", here);
	v = (const char *)n->data.scalar.value;
	if (strlen(v) != n->data.scalar.length)
		return yamlwalk_fail(w, "%s.host holds a NUL", here);
	if ((why = host_name(v, n->data.scalar.length, host)) != NULL)
		return yamlwalk_fail(w, "%s.host '%.64s' %s", here, v, why);
	e->host = xstrdup(host);
	return 0;
}

/* One entry of the config's list, at its field path here, into e. */
static int
walk_entry(struct yamlwalk *w, yaml_node_t *entry, const char *here,
    struct ctl_egress *e)
{
	yaml_node_t *n, *h;
	uint32_t addr;
	int prefix, rc;

	if (entry == NULL || entry->type != YAML_MAPPING_NODE)
		return yamlwalk_fail(w, "%s is not a mapping", here);
	if ((rc = yamlwalk_check_keys(w, entry, here, egress_keys)) != 0 ||
	    (rc = yamlwalk_lookup(w, entry, here, "host", &h)) != 0 ||
	    (rc = yamlwalk_lookup(w, entry, here, "cidr", &n)) != 0)
		return rc;
	if (h != NULL && n != NULL)
		return yamlwalk_fail(w, "%s has both host and cidr: give one "
		    "per entry", here);
	if (h != NULL)
		return (rc = walk_host(w, h, here, e)) != 0 ? rc :
		    walk_ports(w, entry, here, e);
	if (n == NULL || n->type != YAML_SCALAR_NODE || yamlwalk_is_null(n))
		return yamlwalk_fail(w, "%s needs a cidr or a host", here);
	rc = parse_cidr(n->data.scalar.value, n->data.scalar.length, &addr,
	    &prefix);
	if (rc < 0)
		return yamlwalk_fail(w, "%s.cidr '%.64s' is not an IPv4 "
		    "CIDR (a.b.c.d/n)", here, (const char *)n->data.scalar.value);
	if (rc > 0)
		return yamlwalk_fail(w, "%s.cidr '%.64s' has host bits "
		    "set: the network is %u.%u.%u.%u/%d", here,
		    (const char *)n->data.scalar.value, addr >> 24,
		    addr >> 16 & 255, addr >> 8 & 255, addr & 255, prefix);
	e->cidr = xstrndup((const char *)n->data.scalar.value,
	    n->data.scalar.length);
	e->addr = addr;
	e->prefix = prefix;
	if ((rc = refuse_forbidden(w, here, e)) != 0)
		return rc;
	return walk_ports(w, entry, here, e);
}

/* Whether a and b are the same entry's target: one host, or one CIDR. */
static int
same_target(const struct ctl_egress *a, const struct ctl_egress *b)
{
	if (a->host != NULL || b->host != NULL)
		return a->host != NULL && b->host != NULL &&
		    strcmp(a->host, b->host) == 0;
	return a->addr == b->addr && a->prefix == b->prefix;
}

/* net's egress list into p->egress (egress_config_walk). */
static int
walk_list(struct yamlwalk *w, yaml_node_t *net, const char *at,
    struct ctl_profile *p)
{
	yaml_node_item_t *it;
	yaml_node_t *seq;
	size_t i, j, count;
	int rc;

	if ((rc = yamlwalk_lookup(w, net, at, "egress", &seq)) != 0 ||
	    seq == NULL || yamlwalk_is_null(seq))
		return rc;
	if (seq->type != YAML_SEQUENCE_NODE)
		return yamlwalk_fail(w, "%s.egress is not a list", at);
	count = (size_t)(seq->data.sequence.items.top -
	    seq->data.sequence.items.start);
	if (count > CTL_EGRESS_MAX)
		return yamlwalk_fail(w, "%s.egress has more than %d entries",
		    at, CTL_EGRESS_MAX);
	if (count == 0)
		return 0;
	p->egress = xcalloc(count, sizeof(*p->egress));
	for (i = 0, it = seq->data.sequence.items.start; i < count; i++, it++) {
		char here[256];

		if ((rc = yamlwalk_step(w)) != 0)
			return rc;
		snprintf(here, sizeof(here), "%s.egress[%zu]", at, i);
		/* Counted first, so egress_free() frees a partial one. */
		p->negress = i + 1;
		if ((rc = walk_entry(w, yamlwalk_node(w, *it), here,
		    &p->egress[i])) != 0)
			return rc;
		for (j = 0; j < i; j++)
			if (same_target(&p->egress[j], &p->egress[i]))
				return yamlwalk_fail(w, "%s.%s %s is given "
				    "twice (list its ports in one entry)", here,
				    p->egress[i].host ? "host" : "cidr",
				    p->egress[i].host ? p->egress[i].host :
				    p->egress[i].cidr);
	}
	return 0;
}

/*
 * net's egressBytes into p->egress_bytes, once the list is read: a
 * quantity of bytes from 1 to CTL_EGRESS_BYTES_MAX, only beside egress
 * entries (a cap on no network would read as a promise);
 * CTL_EGRESS_BYTES_DEFAULT when absent or null.
 */
static int
walk_bytes(struct yamlwalk *w, yaml_node_t *net, const char *at,
    struct ctl_profile *p)
{
	struct k8s_error qe;
	yaml_node_t *n;
	char text[QUANTITY_MAX_LEN + 1];
	int64_t v;
	int rc;

	if ((rc = yamlwalk_lookup(w, net, at, "egressBytes", &n)) != 0)
		return rc;
	if (n != NULL && p->negress == 0)
		return yamlwalk_fail(w, "%s.egressBytes needs egress entries "
		    "(it caps the bytes of a profile's network egress)", at);
	if (p->negress == 0)
		return 0;
	p->egress_bytes = CTL_EGRESS_BYTES_DEFAULT;
	if (n == NULL)
		return 0;
	if (n->type != YAML_SCALAR_NODE ||
	    n->data.scalar.length > QUANTITY_MAX_LEN ||
	    memchr(n->data.scalar.value, '\0', n->data.scalar.length) != NULL)
		return yamlwalk_fail(w, "%s.egressBytes is not a quantity of "
		    "bytes (such as 64Mi)", at);
	memcpy(text, n->data.scalar.value, n->data.scalar.length);
	text[n->data.scalar.length] = '\0';
	k8s_error_clear(&qe);
	if ((rc = quantity_parse(text, &v, &qe)) != 0 && rc != K8S_ETOOBIG)
		return yamlwalk_fail(w, "%s.egressBytes: %s", at, qe.message);
	if (rc == 0 && v <= 0)
		return yamlwalk_fail(w, "%s.egressBytes '%s' must be greater "
		    "than zero", at, text);
	if (rc != 0 || v > CTL_EGRESS_BYTES_MAX)
		return yamlwalk_fail(w, "%s.egressBytes '%s' is above 1Ti "
		    "(%lld bytes)", at, text, (long long)CTL_EGRESS_BYTES_MAX);
	p->egress_bytes = v;
	return 0;
}

int
egress_config_walk(struct yamlwalk *w, yaml_node_t *net, const char *at,
    struct ctl_profile *p)
{
	int rc;

	if ((rc = yamlwalk_check_keys(w, net, at, network_keys)) != 0 ||
	    (rc = walk_list(w, net, at, p)) != 0)
		return rc;
	return walk_bytes(w, net, at, p);
}

int
egress_config_hosts(const struct ctl_config *c, struct k8s_error *err)
{
	for (size_t i = 0; i < c->nprofiles; i++)
		for (size_t j = 0; j < c->profiles[i].negress; j++)
			if (c->profiles[i].egress[j].host != NULL) {
				k8s_error_set(err, K8S_EINVAL, 0, NULL, "profiles."
				    "%s.network.egress[%zu].host needs the egress "
				    "proxy's key: start the controller with "
				    "--egress-key FILE (the chart does, with "
				    "egress.enabled)", c->profiles[i].name, j);
				return 1;
			}
	return 0;
}

void
egress_free(struct ctl_egress *e, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(e[i].host);
		free(e[i].cidr);
	}
	free(e);
}

/*
 * The namespace's deny-all still holds for everything in. Without the
 * managed-by label: the guardrails' watch (guardrails.c) is of the
 * namespace's own objects, not one per execution.
 */
json_t *
egress_policy(const struct ctl_egress *e, size_t n, json_t *md, const char *by)
{
	json_t *rules = json_array(), *np;
	const char *uid = json_string_value(json_object_get(json_object_get(md,
	    "labels"), by));

	for (size_t i = 0; i < n; i++) {
		json_t *ports;

		if (e[i].cidr == NULL)		/* a host: the proxy's rule */
			continue;
		ports = json_array();
		for (size_t j = 0; j < e[i].nports; j++)
			json_array_append_new(ports, json_pack("{s:s, s:i}",
			    "protocol", "TCP", "port", e[i].ports[j]));
		json_array_append_new(rules, json_pack("{s:[{s:{s:s}}], s:o}",
		    "to", "ipBlock", "cidr", e[i].cidr, "ports", ports));
	}
	np = json_pack("{s:s, s:s, s:{s:O, s:O, s:{s:s, s:s, s:s*}, s:{s:O*}, s:O},"
	    " s:{s:{s:{s:s}}, s:[s], s:o}}",
	    "apiVersion", "networking.k8s.io/v1", "kind", "NetworkPolicy",
	    "metadata", "name", json_object_get(md, "name"),
	    "namespace", json_object_get(md, "namespace"),
	    "labels", "app.kubernetes.io/name", "airlock",
	    CX_LABEL_COMPONENT, CX_COMPONENT, by, uid,
	    "annotations", CX_ANN_NAME, json_object_get(json_object_get(md,
	    "annotations"), CX_ANN_NAME),
	    "ownerReferences", json_object_get(md, "ownerReferences"),
	    "spec", "podSelector", "matchLabels", by, uid,
	    "policyTypes", "Egress", "egress", rules);
	return np;
}


#define SPEC_AT	"spec.network.egress"

/* spec.network.egress[i].host, h (borrowed), into e. */
static int
spec_host(json_t *h, size_t i, struct ctl_egress *e, struct k8s_error *err)
{
	char host[CTL_EGRESS_HOST_MAX + 1];
	const char *why;

	if (!json_is_string(h))
		return k8s_error_set(err, K8S_EINVAL, 0, NULL, SPEC_AT
		    "[%zu].host: must be a string such as pypi.org", i);
	if (strlen(json_string_value(h)) != json_string_length(h))
		return k8s_error_set(err, K8S_EINVAL, 0, NULL, SPEC_AT
		    "[%zu].host: holds a NUL", i);
	if ((why = host_name(json_string_value(h), json_string_length(h),
	    host)) != NULL)
		return k8s_error_set(err, K8S_EINVAL, 0, NULL, SPEC_AT
		    "[%zu].host: '%.64s' %s", i, json_string_value(h), why);
	e->host = xstrdup(host);
	return 0;
}

/* spec.network.egress[i].cidr, c (borrowed), into e. */
static int
spec_cidr(json_t *c, size_t i, struct ctl_egress *e, struct k8s_error *err)
{
	int rc;

	if (!json_is_string(c))
		return k8s_error_set(err, K8S_EINVAL, 0, NULL, SPEC_AT
		    "[%zu].cidr: must be a string such as 10.20.0.0/16", i);
	rc = parse_cidr((const unsigned char *)json_string_value(c),
	    json_string_length(c), &e->addr, &e->prefix);
	if (rc < 0)
		return k8s_error_set(err, K8S_EINVAL, 0, NULL, SPEC_AT
		    "[%zu].cidr: '%.64s' is not an IPv4 CIDR (a.b.c.d/n)", i,
		    json_string_value(c));
	if (rc > 0)
		return k8s_error_set(err, K8S_EINVAL, 0, NULL, SPEC_AT
		    "[%zu].cidr: '%.64s' has host bits set: the network is "
		    "%u.%u.%u.%u/%d", i, json_string_value(c), e->addr >> 24,
		    e->addr >> 16 & 255, e->addr >> 8 & 255, e->addr & 255,
		    e->prefix);
	e->cidr = xstrdup(json_string_value(c));
	return 0;
}

/* Entry i of spec.network.egress (x, borrowed) into e (zeroed). */
static int
spec_entry(json_t *x, size_t i, struct ctl_egress *e, struct k8s_error *err)
{
	json_t *c, *h, *ports, *v;
	const char *k;
	size_t j, l;
	int rc;

	if (!json_is_object(x))
		return k8s_error_set(err, K8S_EINVAL, 0, NULL, SPEC_AT "[%zu]: "
		    "must be an object with a cidr or a host, and ports", i);
	json_object_foreach(x, k, v)
		if (strcmp(k, "cidr") != 0 && strcmp(k, "host") != 0 &&
		    strcmp(k, "ports") != 0)
			return k8s_error_set(err, K8S_EINVAL, 0, NULL, SPEC_AT
			    "[%zu].%.64s: unknown field", i, k);
	c = json_object_get(x, "cidr");
	h = json_object_get(x, "host");
	if (c != NULL && h != NULL)
		return k8s_error_set(err, K8S_EINVAL, 0, NULL, SPEC_AT
		    "[%zu]: has both host and cidr: give one per entry", i);
	if (c == NULL && h == NULL)
		return k8s_error_set(err, K8S_EINVAL, 0, NULL, SPEC_AT
		    "[%zu]: needs a cidr or a host", i);
	if ((rc = h != NULL ? spec_host(h, i, e, err) :
	    spec_cidr(c, i, e, err)) != 0)
		return rc;
	ports = json_object_get(x, "ports");
	if (!json_is_array(ports) || json_array_size(ports) == 0 ||
	    json_array_size(ports) > CTL_EGRESS_PORTS_MAX)
		return k8s_error_set(err, K8S_EINVAL, 0, NULL, SPEC_AT
		    "[%zu].ports: must be a list of 1 to %d ports", i,
		    CTL_EGRESS_PORTS_MAX);
	json_array_foreach(ports, j, v) {
		json_int_t port = json_integer_value(v);

		if (!json_is_integer(v) || port < 1 || port > 65535)
			return k8s_error_set(err, K8S_EINVAL, 0, NULL, SPEC_AT
			    "[%zu].ports[%zu]: not a port from 1 to 65535", i, j);
		for (l = 0; l < e->nports; l++)
			if (e->ports[l] == (int)port)
				return k8s_error_set(err, K8S_EINVAL, 0, NULL,
				    SPEC_AT "[%zu].ports[%zu]: %d is given twice",
				    i, j, (int)port);
		e->ports[e->nports++] = (int)port;
	}
	return 0;
}

int
egress_spec_parse(json_t *network, struct ctl_egress **out, size_t *n,
    int *given, struct k8s_error *err)
{
	json_t *list, *v;
	const char *k;
	size_t i, j;
	int rc = 0;

	*out = NULL;
	*n = 0;
	*given = 0;
	if (network == NULL)
		return 0;
	if (!json_is_object(network))
		return k8s_error_set(err, K8S_EINVAL, 0, NULL,
		    "spec.network: must be an object");
	json_object_foreach(network, k, v)
		if (strcmp(k, "egress") != 0)
			return k8s_error_set(err, K8S_EINVAL, 0, NULL,
			    "spec.network.%.64s: unknown field", k);
	if ((list = json_object_get(network, "egress")) == NULL)
		return 0;
	if (!json_is_array(list))
		return k8s_error_set(err, K8S_EINVAL, 0, NULL, SPEC_AT
		    ": must be a list");
	if (json_array_size(list) > CTL_EGRESS_MAX)
		return k8s_error_set(err, K8S_EINVAL, 0, NULL, SPEC_AT
		    ": at most %d entries, not %zu", CTL_EGRESS_MAX,
		    json_array_size(list));
	*given = 1;
	if (json_array_size(list) == 0)
		return 0;
	*out = xcalloc(json_array_size(list), sizeof(**out));
	json_array_foreach(list, i, v) {
		*n = i + 1;
		if ((rc = spec_entry(v, i, &(*out)[i], err)) != 0)
			goto out;
		for (j = 0; j < i; j++)
			if (same_target(&(*out)[j], &(*out)[i])) {
				rc = k8s_error_set(err, K8S_EINVAL, 0, NULL,
				    SPEC_AT "[%zu].%s: %s is given twice (list "
				    "its ports in one entry)", i, (*out)[i].host ?
				    "host" : "cidr", (*out)[i].host ?
				    (*out)[i].host : (*out)[i].cidr);
				goto out;
			}
	}
out:
	if (rc != 0) {
		egress_free(*out, *n);
		*out = NULL;
		*n = 0;
	}
	return rc;
}

/*
 * Whether p's list lets e connect to port: e's host is one of its hosts,
 * or e's whole CIDR lies in one of its CIDRs, with port on that entry.
 */
static int
profile_allows(const struct ctl_profile *p, const struct ctl_egress *e,
    int port)
{
	for (size_t i = 0; i < p->negress; i++) {
		const struct ctl_egress *pe = &p->egress[i];

		if (e->host != NULL ? pe->host == NULL ||
		    strcmp(e->host, pe->host) != 0 : pe->cidr == NULL ||
		    e->prefix < pe->prefix ||
		    (e->addr & mask(pe->prefix)) != pe->addr)
			continue;
		for (size_t j = 0; j < pe->nports; j++)
			if (pe->ports[j] == port)
				return 1;
	}
	return 0;
}

int
egress_effective(const struct ctl_profile *p, json_t *network,
    struct ctl_egress **out, size_t *n, struct k8s_error *err)
{
	size_t i, j;
	int given, rc;

	if ((rc = egress_spec_parse(network, out, n, &given, err)) != 0)
		return rc;
	if (!given) {
		*n = p->negress;
		*out = p->negress ? xcalloc(p->negress, sizeof(**out)) : NULL;
		for (i = 0; i < p->negress; i++) {
			(*out)[i] = p->egress[i];
			(*out)[i].host = p->egress[i].host ?
			    xstrdup(p->egress[i].host) : NULL;
			(*out)[i].cidr = p->egress[i].cidr ?
			    xstrdup(p->egress[i].cidr) : NULL;
		}
		return 0;
	}
	if (*n > 0 && p->negress == 0) {
		rc = k8s_error_set(err, K8S_EINVAL, 0, NULL, SPEC_AT
		    ": profile %s has no egress", p->name);
		goto out;
	}
	for (i = 0; i < *n; i++)
		for (j = 0; j < (*out)[i].nports; j++)
			if (!profile_allows(p, &(*out)[i], (*out)[i].ports[j])) {
				rc = k8s_error_set(err, K8S_EINVAL, 0, NULL,
				    SPEC_AT "[%zu]: %s port %d is not in profile "
				    "%s's egress", i, (*out)[i].host ?
				    (*out)[i].host : (*out)[i].cidr,
				    (*out)[i].ports[j], p->name);
				goto out;
			}
out:
	if (rc != 0) {
		egress_free(*out, *n);
		*out = NULL;
		*n = 0;
	}
	return rc;
}
