/*
 * egress_grant.c - see egress_grant.h.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cx.h"
#include "egress.h"
#include "egress_grant.h"
#include "xmalloc.h"

/* One DNS label: 1 to 63 of [a-z0-9-], no '-' at either end. */
static int
label_ok(const char *s, size_t len)
{
	if (len == 0 || len > 63 || s[0] == '-' || s[len - 1] == '-')
		return 0;
	for (size_t i = 0; i < len; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' &&
		    s[i] <= '9') || s[i] == '-'))
			return 0;
	return 1;
}

/* A label an IP literal's last part could be: all digits, or 0x and hex. */
static int
label_numeric(const char *s, size_t len)
{
	size_t i = 0;
	int hex = len > 2 && s[0] == '0' && s[1] == 'x';

	for (i = hex ? 2 : 0; i < len; i++)
		if (!((s[i] >= '0' && s[i] <= '9') ||
		    (hex && s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	return 1;
}

/* Dot-separated labels, len at most max; last_label_numeric_ok as said. */
static int
labels_ok(const char *s, size_t len, size_t max, int numeric_last_ok)
{
	size_t start = 0;

	if (len == 0 || len > max || memchr(s, '\0', len) != NULL)
		return 0;
	for (size_t i = 0; i <= len; i++) {
		if (i < len && s[i] != '.')
			continue;
		if (!label_ok(s + start, i - start))
			return 0;
		if (i == len && !numeric_last_ok &&
		    label_numeric(s + start, i - start))
			return 0;
		start = i + 1;
	}
	return 1;
}

int
egress_grant_host_ok(const char *s, size_t len)
{
	return labels_ok(s, len, CTL_EGRESS_HOST_MAX, 0);
}

json_t *
egress_grant_configmap(const char *ctl_ns, const char *uid,
    const char *exec_ns, const char *exec_name, const char *pod_ip,
    const struct ctl_egress *e, size_t n)
{
	json_t *hosts = json_array(), *data, *cm;
	char *text;

	for (size_t i = 0; i < n; i++) {
		json_t *ports;

		if (e[i].host == NULL)
			continue;
		ports = json_array();
		for (size_t j = 0; j < e[i].nports; j++)
			json_array_append_new(ports, json_integer(e[i].ports[j]));
		json_array_append_new(hosts, json_pack("{s:s, s:o}", "host",
		    e[i].host, "ports", ports));
	}
	text = json_dumps(hosts, JSON_COMPACT);
	json_decref(hosts);
	data = json_pack("{s:s, s:s, s:s, s:s}", "uid", uid, "namespace",
	    exec_ns, "name", exec_name, "hosts", text ? text : "[]");
	free(text);
	if (pod_ip != NULL)
		json_object_set_new(data, "podIP", json_string(pod_ip));
	text = xasprintf(EGRESS_GRANT_PREFIX "%s", uid);
	cm = json_pack("{s:s, s:s, s:{s:s, s:s, s:{s:s, s:s, s:s}}, s:o}",
	    "apiVersion", "v1", "kind", "ConfigMap",
	    "metadata", "name", text, "namespace", ctl_ns,
	    "labels", CX_LABEL_MANAGED, CX_MANAGER,
	    CX_LABEL_COMPONENT, EGRESS_GRANT_COMPONENT, CX_LABEL_UID, uid,
	    "data", data);
	free(text);
	return cm;
}

void
egress_grant_free(struct egress_grant *g)
{
	if (g == NULL)
		return;
	free(g->uid);
	free(g->ns);
	free(g->name);
	egress_free(g->hosts, g->nhosts);
	memset(g, 0, sizeof(*g));
}

static int
bad(struct k8s_error *err, const char *field, const char *why)
{
	return k8s_error_set(err, K8S_EINVAL, 0, NULL, "egress grant: %s: %s",
	    field, why);
}

/* data.KEY: a string that is labels of at most max bytes (uid: one label). */
static int
take_name(json_t *data, const char *key, size_t max, char **out,
    struct k8s_error *err)
{
	json_t *v = json_object_get(data, key);
	char field[32];
	int ok;

	snprintf(field, sizeof(field), "data.%s", key);
	if (!json_is_string(v))
		return bad(err, field, "must be a string");
	ok = max == EGRESS_GRANT_UID_MAX ?
	    json_string_length(v) <= max && json_string_length(v) > 0 &&
	    strspn(json_string_value(v), "abcdefghijklmnopqrstuvwxyz"
	    "0123456789-") == json_string_length(v) :
	    labels_ok(json_string_value(v), json_string_length(v), max, 1);
	if (!ok)
		return bad(err, field, max == EGRESS_GRANT_UID_MAX ?
		    "must be 1 to 64 of [a-z0-9-]" :
		    "must be a lowercase DNS name of at most 253 bytes");
	*out = xstrdup(json_string_value(v));
	return 0;
}

static int
take_ip(json_t *data, struct egress_grant *g, struct k8s_error *err)
{
	json_t *v = json_object_get(data, "podIP");
	struct in_addr in;
	char back[INET_ADDRSTRLEN];

	if (v == NULL)
		return 0;
	if (!json_is_string(v) || json_string_length(v) >= sizeof(g->pod_ip) ||
	    inet_pton(AF_INET, json_string_value(v), &in) != 1 ||
	    inet_ntop(AF_INET, &in, back, sizeof(back)) == NULL ||
	    strcmp(back, json_string_value(v)) != 0)
		return bad(err, "data.podIP", "must be a dotted IPv4 address");
	memcpy(g->pod_ip, back, strlen(back) + 1);
	g->addr = ntohl(in.s_addr);
	return 0;
}

/* Entry i of the hosts list (x, borrowed) into e (zeroed). */
static int
take_host(json_t *x, size_t i, struct ctl_egress *e, struct k8s_error *err)
{
	char at[48];
	const char *k;
	json_t *h, *v;

	snprintf(at, sizeof(at), "data.hosts[%zu]", i);
	if (!json_is_object(x))
		return bad(err, at, "must be an object with host and ports");
	json_object_foreach(x, k, v)
		if (strcmp(k, "host") != 0 && strcmp(k, "ports") != 0)
			return bad(err, at, "unknown field");
	h = json_object_get(x, "host");
	if (!json_is_string(h) || !egress_grant_host_ok(json_string_value(h),
	    json_string_length(h))) {
		snprintf(at, sizeof(at), "data.hosts[%zu].host", i);
		return bad(err, at, "must be a lowercase host name");
	}
	e->host = xstrdup(json_string_value(h));
	snprintf(at, sizeof(at), "egress grant: data.hosts[%zu]", i);
	return egress_json_ports(json_object_get(x, "ports"), at, e, err);
}

static int
take_hosts(json_t *data, struct egress_grant *g, struct k8s_error *err)
{
	json_t *v = json_object_get(data, "hosts"), *list, *x;
	json_error_t jerr;
	size_t i, j;
	int rc = 0;

	if (!json_is_string(v) || json_string_length(v) >
	    EGRESS_GRANT_HOSTS_TEXT_MAX)
		return bad(err, "data.hosts", "must be a string of at most "
		    "16384 bytes");
	list = json_loadb(json_string_value(v), json_string_length(v),
	    JSON_REJECT_DUPLICATES, &jerr);
	if (!json_is_array(list) || json_array_size(list) > CTL_EGRESS_MAX) {
		json_decref(list);
		return bad(err, "data.hosts", "must be a JSON list of at most "
		    "32 entries");
	}
	if (json_array_size(list) > 0)
		g->hosts = xcalloc(json_array_size(list), sizeof(*g->hosts));
	json_array_foreach(list, i, x) {
		g->nhosts = i + 1;
		if ((rc = take_host(x, i, &g->hosts[i], err)) != 0)
			break;
		for (j = 0; j < i; j++)
			if (strcmp(g->hosts[j].host, g->hosts[i].host) == 0) {
				char at[48];

				snprintf(at, sizeof(at), "data.hosts[%zu].host", i);
				rc = bad(err, at, "given twice");
				break;
			}
		if (rc != 0)
			break;
	}
	json_decref(list);
	return rc;
}

static const char *const data_keys[] = { "uid", "namespace", "name",
	"podIP", "hosts", NULL };

int
egress_grant_parse(json_t *cm, struct egress_grant *out,
    struct k8s_error *err)
{
	json_t *data = json_object_get(cm, "data"), *v;
	const char *name = k8s_obj_name(cm), *k;
	size_t i;
	int rc;

	memset(out, 0, sizeof(*out));
	if (!json_is_object(data))
		return bad(err, "data", "must be an object");
	json_object_foreach(data, k, v) {
		for (i = 0; data_keys[i] && strcmp(data_keys[i], k) != 0; i++)
			;
		if (data_keys[i] == NULL)
			return bad(err, "data", "has an unknown key");
	}
	if ((rc = take_name(data, "uid", EGRESS_GRANT_UID_MAX, &out->uid,
	    err)) != 0 ||
	    (rc = take_name(data, "namespace", EGRESS_GRANT_NAME_MAX,
	    &out->ns, err)) != 0 ||
	    (rc = take_name(data, "name", EGRESS_GRANT_NAME_MAX, &out->name,
	    err)) != 0 ||
	    (rc = take_ip(data, out, err)) != 0 ||
	    (rc = take_hosts(data, out, err)) != 0)
		goto out;
	if (name == NULL || strncmp(name, EGRESS_GRANT_PREFIX,
	    strlen(EGRESS_GRANT_PREFIX)) != 0 ||
	    strcmp(name + strlen(EGRESS_GRANT_PREFIX), out->uid) != 0)
		rc = bad(err, "metadata.name", "must be " EGRESS_GRANT_PREFIX
		    " followed by data.uid");
out:
	if (rc != 0)
		egress_grant_free(out);
	return rc;
}
