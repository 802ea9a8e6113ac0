/*
 * egress.c - the start gate's pods, which an execution with egress checks
 * its NetworkPolicy against before its program runs (docs/network.md,
 * "The start gate").
 *
 * A NetworkPolicy engine may apply a new pod's policies seconds after the
 * pod has an address (kube-router: 5 to 7 s on the test node), and until
 * then nothing selects it: the program could reach anything. So the
 * runner (images/runner/run) holds the program until it sees the policy
 * in force: the gate pods, in the controller's own namespace, listen on
 * two ports; the execution's policy allows the first and never the
 * second. This keeps the ready gate pods' addresses, which the pod of an
 * execution with egress gets in its env (podspec_egress_gate).
 *
 * Watched only when a profile has egress, and only in the controller's
 * namespace, by label: tenants cannot make pods there.
 */
#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

#include "controller_priv.h"
#include "log.h"
#include "podspec.h"

/*
 * Of a gate pod: its name and uid, its address while it is ready, and
 * the id of its proxy container while that runs (egressfollow.c follows
 * its log).
 */
static json_t *
trim_gate(json_t *obj)
{
	json_t *md = json_object_get(obj, "metadata");
	json_t *st = json_object_get(obj, "status"), *c;
	const char *ip = json_string_value(json_object_get(st, "podIP"));
	const char *proxy = NULL;
	int ready = 0;
	size_t i;

	json_array_foreach(json_object_get(st, "conditions"), i, c) {
		const char *t = json_string_value(json_object_get(c, "type"));
		const char *s = json_string_value(json_object_get(c, "status"));

		if (t && s && strcmp(t, "Ready") == 0)
			ready = strcmp(s, "True") == 0;
	}
	json_array_foreach(json_object_get(st, "containerStatuses"), i, c) {
		const char *n = json_string_value(json_object_get(c, "name"));

		if (n && strcmp(n, "proxy") == 0 && json_object_get(
		    json_object_get(c, "state"), "running") != NULL)
			proxy = json_string_value(json_object_get(c,
			    "containerID"));
	}
	if (json_object_get(md, "deletionTimestamp") != NULL)
		ready = 0;
	return json_pack("{s:{s:O*, s:O*, s:O*}, s:s?, s:s?}", "metadata",
	    "name", json_object_get(md, "name"),
	    "namespace", json_object_get(md, "namespace"),
	    "uid", json_object_get(md, "uid"),
	    "ip", ready ? ip : NULL, "proxy", proxy);
}

/* A gate pod came, changed or went: the proxy log streams follow. */
static void
gate_added(void *arg, json_t *obj)
{
	(void)obj;
	ctl_egress_follow_sync(((struct controller *)arg)->follow);
}

static void
gate_updated(void *arg, json_t *old, json_t *cur)
{
	(void)old;
	gate_added(arg, cur);
}

static void
gate_deleted(void *arg, json_t *obj, int unknown)
{
	(void)unknown;
	gate_added(arg, obj);
}

struct informer *
ctl_gate_informer(struct controller *ctl)
{
	struct informer_opts o = { .res = &k8s_res_pods,
	    .ns = ctl->opts.agent_lease_ns, .label_selector = CTL_GATE_SELECTOR,
	    .transform = trim_gate, .packed = 1 };
	struct informer_handlers h = { gate_added, gate_updated, gate_deleted,
	    ctl };
	int any = 0;

	for (size_t i = 0; i < ctl->cfg->nprofiles; i++)
		any |= ctl->cfg->profiles[i].negress > 0;
	if (!any)
		return NULL;
	if (o.ns == NULL || !o.ns[0]) {
		log_warn("egress has no start gate: the controller has no "
		    "namespace of its own (--lease-namespace); executions "
		    "with egress will not start", "");
		return NULL;
	}
	return informer_new(ctl->client, &o, &h);
}

static int
by_text(const void *a, const void *b)
{
	return strcmp((const char *)a, (const char *)b);
}

size_t
ctl_gate_addrs(struct controller *ctl, char addrs[][PODSPEC_GATE_ADDR],
    size_t max)
{
	json_t *pods, *p;
	size_t i, n = 0;
	struct in_addr in;

	if (ctl->gate_inf == NULL)
		return 0;
	pods = informer_list(ctl->gate_inf);
	json_array_foreach(pods, i, p) {
		const char *ip = json_string_value(json_object_get(p, "ip"));

		/* IPv4 only: what the gate and the policy's ipBlock take. */
		if (n == max || ip == NULL || inet_pton(AF_INET, ip, &in) != 1)
			continue;
		strcpy(addrs[n++], ip);
	}
	json_decref(pods);
	/* The same list for the same pods, whatever the cache's order. */
	qsort(addrs, n, PODSPEC_GATE_ADDR, by_text);
	return n;
}
