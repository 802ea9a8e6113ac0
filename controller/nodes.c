/*
 * nodes.c - a lost node, noticed by the controller itself.
 *
 * Each kubelet renews its Lease in kube-node-lease every quarter of its
 * leaseDurationSeconds (40 s by default: every 10 s). The node lifecycle
 * controller marks a silent node NotReady after 50 s and evicts its pods
 * after 5 minutes more; an execution on it would stay Running all that
 * while. So the leader watches those Leases and keeps, per node, the
 * renewTime last seen and when it saw it change, on its own monotonic
 * clock (the kubelet's clock is never compared with ours). A node whose
 * Lease has not changed for its leaseDurationSeconds, or whose Lease was
 * deleted, is lost: each execution whose pod is bound to it ends Failed,
 * reason NodeLost (reconcile.c), its pod is deleted at once, and new pods
 * and warm sandboxes are kept off it (ctl_avoid_lost_nodes) until its
 * Lease is renewed again.
 *
 * The API server's own outage must not look like every node's: while the
 * watch on Leases is down, nothing is seen to change. So every new watch
 * connection or relist starts every node's clock afresh. A node is thus
 * declared lost between one and two lease durations after its last
 * renewal, plus the 1 s of the check (controller/docs/nodes.md).
 */
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "controller_priv.h"
#include "log.h"
#include "podspec.h"
#include "xmalloc.h"

#define NODE_LEASE_NS		"kube-node-lease"
#define NODE_CHECK_MS		1000
#define NODE_LEASE_DEFAULT_S	40
#define NODE_LEASE_MAX_S	3600

/* Of a Lease: its name (the node's), and the two fields read. */
static json_t *
trim_lease(json_t *obj)
{
	json_t *md = json_object_get(obj, "metadata");
	json_t *spec = json_object_get(obj, "spec");

	return json_pack("{s:{s:O*, s:O*, s:O*}, s:{s:O*, s:O*}}", "metadata",
	    "name", json_object_get(md, "name"),
	    "namespace", json_object_get(md, "namespace"),
	    "resourceVersion", json_object_get(md, "resourceVersion"),
	    "spec",
	    "renewTime", json_object_get(spec, "renewTime"),
	    "leaseDurationSeconds", json_object_get(spec, "leaseDurationSeconds"));
}

/*
 * ctl->nodes: node name -> [renewTime as last seen, clock_mono_ms() when
 * it was seen to change, the lease's duration in ms, lost (0/1)].
 */
static void
lease_seen(struct controller *ctl, json_t *lease, int deleted)
{
	const char *node = k8s_obj_name(lease);
	json_t *spec = json_object_get(lease, "spec"), *e;
	const char *renew = json_string_value(json_object_get(spec, "renewTime"));
	json_int_t dur_s = json_integer_value(json_object_get(spec,
	    "leaseDurationSeconds"));
	long long now = clock_mono_ms();

	if (node == NULL)
		return;
	if (dur_s <= 0 || dur_s > NODE_LEASE_MAX_S)
		dur_s = NODE_LEASE_DEFAULT_S;
	pthread_mutex_lock(&ctl->lock);
	e = json_object_get(ctl->nodes, node);
	if (deleted) {
		/* The Node is gone (its Lease is owned by it): lost now. */
		json_object_set_new(ctl->nodes, node, json_pack("[s, I, I, i]",
		    "", (json_int_t)(now - dur_s * 1000 - 1), dur_s * 1000,
		    e ? (int)json_integer_value(json_array_get(e, 3)) : 0));
	} else if (e == NULL || strcmp(renew ? renew : "", json_string_value(
	    json_array_get(e, 0))) != 0) {
		if (e && json_integer_value(json_array_get(e, 3)))
			log_info("node back: its lease is renewed again",
			    "node=%s", node);
		json_object_set_new(ctl->nodes, node, json_pack("[s, I, I, i]",
		    renew ? renew : "", (json_int_t)now, dur_s * 1000, 0));
	}
	pthread_mutex_unlock(&ctl->lock);
}

static void
lease_add(void *arg, json_t *obj)
{
	lease_seen(arg, obj, 0);
}

static void
lease_update(void *arg, json_t *old, json_t *cur)
{
	(void)old;
	lease_seen(arg, cur, 0);
}

static void
lease_delete(void *arg, json_t *obj, int unknown)
{
	(void)unknown;
	lease_seen(arg, obj, 1);
}

struct informer *
ctl_nodes_informer(struct controller *ctl)
{
	struct informer_opts o = { .res = &k8s_res_leases, .ns = NODE_LEASE_NS,
	    .transform = trim_lease, .packed = 1 };
	struct informer_handlers h = { lease_add, lease_update, lease_delete,
	    ctl };

	ctl->nodes = json_object();
	o.resync_ms = 0;
	return informer_new(ctl->client, &o, &h);
}

int
ctl_node_lost_locked(struct controller *ctl, const char *node)
{
	json_t *e = node && ctl->nodes ? json_object_get(ctl->nodes, node) : NULL;

	return e && json_integer_value(json_array_get(e, 3)) != 0;
}

int
ctl_node_lost(struct controller *ctl, const char *node, char *msg,
    size_t msglen)
{
	int lost;

	if (node == NULL || ctl->nodes == NULL)
		return 0;
	pthread_mutex_lock(&ctl->lock);
	if ((lost = ctl_node_lost_locked(ctl, node)) != 0) {
		json_t *e = json_object_get(ctl->nodes, node);

		if (msg)
			snprintf(msg, msglen, "node %s was lost: its lease (%lld s) "
			    "was not renewed; whether the program ran, and what it "
			    "did, cannot be known, and it is not run again", node,
			    (long long)json_integer_value(json_array_get(e, 2)) / 1000);
	}
	pthread_mutex_unlock(&ctl->lock);
	return lost;
}

void
ctl_avoid_lost_nodes(struct controller *ctl, json_t *pod)
{
	json_t *names = json_array(), *e, *spec;
	const char *node;

	pthread_mutex_lock(&ctl->lock);
	json_object_foreach(ctl->nodes, node, e)
		if (json_integer_value(json_array_get(e, 3)))
			json_array_append_new(names, json_string(node));
	pthread_mutex_unlock(&ctl->lock);
	spec = json_object_get(pod, "spec");
	if (json_array_size(names) == 0 || spec == NULL ||
	    json_object_get(spec, "affinity")) {
		json_decref(names);
		return;
	}
	json_object_set_new(spec, "affinity", json_pack("{s:{s:{s:[{s:[{s:s, "
	    "s:s, s:o}]}]}}}", "nodeAffinity",
	    "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms",
	    "matchExpressions", "key", "kubernetes.io/hostname",
	    "operator", "NotIn", "values", names));
}

/*
 * The check, every NODE_CHECK_MS on the leader (key CTL_NODES_KEY): nodes
 * silent for their lease's duration become lost, and every execution with
 * a pod bound to one is reconciled (it ends NodeLost there); an idle warm
 * sandbox there is deleted, and its pool makes another elsewhere.
 */
int
ctl_nodes_check(struct controller *ctl)
{
	struct watch_stats ws;
	json_t *lost = json_array(), *e, *pods, *pod;
	const char *node;
	long long now = clock_mono_ms();
	unsigned long conns;
	size_t i, j;

	workqueue_add_after(ctl->queue, CTL_NODES_KEY, NODE_CHECK_MS);
	if (informer_wait_synced(ctl->lease_inf, 0) != 0) {
		json_decref(lost);
		return 0;
	}
	informer_get_stats(ctl->lease_inf, &ws);
	conns = ws.connects + ws.relists;
	pthread_mutex_lock(&ctl->lock);
	json_object_foreach(ctl->nodes, node, e) {
		long long seen = json_integer_value(json_array_get(e, 1));
		long long dur = json_integer_value(json_array_get(e, 2));

		/* A new watch: nothing was seen while there was none. */
		if (conns != ctl->nodes_conns && seen > 0 &&
		    json_string_length(json_array_get(e, 0)) > 0 && seen < now) {
			json_array_set_new(e, 1, json_integer(now));
			seen = now;
		}
		if (now - seen > dur && !json_integer_value(json_array_get(e, 3))) {
			json_array_set_new(e, 3, json_integer(1));
			json_array_append_new(lost, json_string(node));
		}
	}
	ctl->nodes_conns = conns;
	pthread_mutex_unlock(&ctl->lock);
	if (json_array_size(lost) == 0) {
		json_decref(lost);
		return 0;
	}
	pods = informer_list(ctl->pod_inf);
	json_array_foreach(lost, i, e) {
		node = json_string_value(e);
		log_warn("node lost: its lease was not renewed in time; its "
		    "executions end NodeLost", "node=%s", node);
		metric_inc(ctl->m_nodes_lost, NULL);
		json_array_foreach(pods, j, pod) {
			const char *pn = json_string_value(json_object_get(
			    json_object_get(pod, "spec"), "nodeName"));
			const char *owner = podspec_pod_execution(pod, NULL);
			const char *ns = k8s_obj_namespace(pod);

			if (pn == NULL || ns == NULL || strcmp(pn, node) != 0)
				continue;
			if (owner) {
				char *key = xasprintf("%s/%s", ns, owner);

				workqueue_add(ctl->queue, key);
				free(key);
			} else if (ctl_holder_pool(pod)) {
				struct k8s_delete_opts now0 = { .grace_period_set = 1,
				    .grace_period_seconds = 0 };
				struct k8s_error err;

				if (k8s_delete(ctl->client, &k8s_res_pods, ns,
				    k8s_obj_name(pod), &now0, NULL, &err) != 0)
					log_debug("cannot delete a sandbox on a lost "
					    "node", "pod=%s/%s status=%ld", ns,
					    k8s_obj_name(pod), err.http_status);
			}
		}
	}
	json_decref(pods);
	json_decref(lost);
	return 0;
}
