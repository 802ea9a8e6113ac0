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
 * A loss is remembered after the node comes back: a pod bound to it before
 * it came back (its PodScheduled time) was on it when it was lost, so its
 * execution ends NodeLost even when the controller gets to it late (under
 * load its queue can lag its caches by tens of seconds, and the kubelet
 * and a new node agent can be back first). Without that, a node agent
 * started again with the node recorded what containerd said of the dead
 * sandboxes (exit 255 or 137) as the program's result.
 *
 * The API server's own outage must not look like every node's: while the
 * watch on Leases is down, nothing is seen to change. So every new watch
 * connection or relist starts every node's clock afresh. A node is thus
 * declared lost between one and two lease durations after its last
 * renewal, plus the 1 s of the check (controller/docs/nodes.md).
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "controller_priv.h"
#include "log.h"
#include "podspec.h"
#include "xmalloc.h"

#define NODE_LEASE_NS		"kube-node-lease"
#define NODE_CHECK_MS		1000
#define NODE_LEASE_DEFAULT_S	40
#define NODE_LEASE_MAX_S	3600
#define NODE_AFTER_S		600	/* how long the check looks back */
/*
 * A pod's PodScheduled time is the API server's clock, a node's return
 * ours: a pod bound this close before the return is not taken for one
 * that was there when the node was lost (it was bound while the node was
 * gone, and the kubelet back may run it).
 */
#define NODE_SKEW_S		2

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
 * it was seen to change, the lease's duration in ms, lost (0/1), when its
 * last loss was declared and when it came back from it (wall clock,
 * seconds; 0 for none)].
 */
enum { N_RENEW, N_SEEN, N_DUR, N_LOST, N_LOST_AT, N_BACK_AT };

static json_int_t
node_field(json_t *e, int i)
{
	return json_integer_value(json_array_get(e, (size_t)i));
}

static void
lease_seen(struct controller *ctl, json_t *lease, int deleted)
{
	const char *node = k8s_obj_name(lease);
	json_t *spec = json_object_get(lease, "spec"), *e;
	const char *renew = json_string_value(json_object_get(spec, "renewTime"));
	json_int_t dur_s = json_integer_value(json_object_get(spec,
	    "leaseDurationSeconds"));
	long long now = clock_mono_ms();
	json_int_t lost_at, back_at;

	if (node == NULL)
		return;
	if (dur_s <= 0 || dur_s > NODE_LEASE_MAX_S)
		dur_s = NODE_LEASE_DEFAULT_S;
	pthread_mutex_lock(&ctl->lock);
	e = json_object_get(ctl->nodes, node);
	lost_at = node_field(e, N_LOST_AT);
	back_at = node_field(e, N_BACK_AT);
	if (deleted) {
		/* The Node is gone (its Lease is owned by it): lost now. */
		json_object_set_new(ctl->nodes, node, json_pack("[s, I, I, i, I, I]",
		    "", (json_int_t)(now - dur_s * 1000 - 1), dur_s * 1000,
		    e ? (int)node_field(e, N_LOST) : 0, lost_at, back_at));
	} else if (e == NULL || strcmp(renew ? renew : "", json_string_value(
	    json_array_get(e, N_RENEW))) != 0) {
		if (e && node_field(e, N_LOST)) {
			log_info("node back: its lease is renewed again",
			    "node=%s", node);
			back_at = (json_int_t)time(NULL);
		}
		json_object_set_new(ctl->nodes, node, json_pack("[s, I, I, i, I, I]",
		    renew ? renew : "", (json_int_t)now, dur_s * 1000, 0,
		    lost_at, back_at));
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


/*
 * 1 if a pod bound to node at bound_s (wall clock, seconds; 0 unknown) was
 * there when it was lost: the node is lost now, or the pod was bound
 * before the node came back from its last loss.
 */
static int
lost_with_locked(struct controller *ctl, const char *node, long long bound_s)
{
	json_t *e = node && ctl->nodes ? json_object_get(ctl->nodes, node) : NULL;

	if (e == NULL)
		return 0;
	if (node_field(e, N_LOST))
		return 1;
	return bound_s > 0 && node_field(e, N_LOST_AT) > 0 &&
	    node_field(e, N_BACK_AT) > 0 &&
	    bound_s < node_field(e, N_BACK_AT) - NODE_SKEW_S;
}

/* When a pod was bound to its node (PodScheduled), in seconds; 0 unknown. */
static long long
pod_bound_at(json_t *pod)
{
	json_t *c = ctl_find_condition(json_object_get(pod, "status"),
	    "PodScheduled");
	long long t;

	if (c == NULL || strcmp(json_string_value(json_object_get(c, "status")) ?
	    json_string_value(json_object_get(c, "status")) : "", "True") != 0)
		return 0;
	t = clock_parse_rfc3339(json_string_value(json_object_get(c,
	    "lastTransitionTime")));
	return t > 0 ? t : 0;
}

int
ctl_pod_lost_locked(struct controller *ctl, json_t *pod)
{
	return lost_with_locked(ctl, json_string_value(json_object_get(
	    json_object_get(pod, "spec"), "nodeName")), pod_bound_at(pod));
}

int
ctl_node_lost(struct controller *ctl, json_t *pod, char *msg, size_t msglen)
{
	const char *node = json_string_value(json_object_get(json_object_get(pod,
	    "spec"), "nodeName"));
	int lost;

	if (node == NULL || ctl->nodes == NULL)
		return 0;
	pthread_mutex_lock(&ctl->lock);
	if ((lost = lost_with_locked(ctl, node, pod_bound_at(pod))) != 0 && msg) {
		json_t *e = json_object_get(ctl->nodes, node);
		char at[CLOCK_RFC3339_LEN] = "", back[CLOCK_RFC3339_LEN] = "";

		if (node_field(e, N_LOST_AT) > 0)
			clock_format_rfc3339((long long)node_field(e, N_LOST_AT) *
			    1000000000LL, 0, at);
		if (!node_field(e, N_LOST) && node_field(e, N_BACK_AT) > 0)
			clock_format_rfc3339((long long)node_field(e, N_BACK_AT) *
			    1000000000LL, 0, back);
		char lease[64] = "";

		if (!back[0])
			snprintf(lease, sizeof(lease), " (%lld s)",
			    (long long)node_field(e, N_DUR) / 1000);
		snprintf(msg, msglen, "node %s was lost%s%s%s%s: its lease%s was "
		    "not renewed in time; whether the program ran, and what it "
		    "did, cannot be known, and it is not run again", node,
		    at[0] ? " at " : "", at, back[0] ? ", back at " : "", back,
		    lease);
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
		if (node_field(e, N_LOST))
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
 * silent for their lease's duration become lost. Then, on every check
 * while a node is lost or its pods from before its loss remain, each
 * execution with a pod there from then is queued (it ends NodeLost in its
 * reconcile: queued again each second, since a busy queue or a lagging
 * cache may let one pass), and an idle warm sandbox there is deleted (its
 * pool makes another elsewhere).
 */
int
ctl_nodes_check(struct controller *ctl)
{
	struct watch_stats ws;
	json_t *e, *pods, *pod;
	const char *node;
	long long now = clock_mono_ms();
	unsigned long conns;
	size_t j;
	int any = 0;

	workqueue_add_after(ctl->queue, CTL_NODES_KEY, NODE_CHECK_MS);
	if (informer_wait_synced(ctl->lease_inf, 0) != 0)
		return 0;
	informer_get_stats(ctl->lease_inf, &ws);
	conns = ws.connects + ws.relists;
	pthread_mutex_lock(&ctl->lock);
	json_object_foreach(ctl->nodes, node, e) {
		long long seen = node_field(e, N_SEEN);
		long long dur = node_field(e, N_DUR);

		/* A new watch: nothing was seen while there was none. */
		if (conns != ctl->nodes_conns && seen > 0 &&
		    json_string_length(json_array_get(e, N_RENEW)) > 0 &&
		    seen < now) {
			json_array_set_new(e, N_SEEN, json_integer(now));
			seen = now;
		}
		if (now - seen > dur && !node_field(e, N_LOST)) {
			json_array_set_new(e, N_LOST, json_integer(1));
			json_array_set_new(e, N_LOST_AT, json_integer(time(NULL)));
			json_array_set_new(e, N_BACK_AT, json_integer(0));
			log_warn("node lost: its lease was not renewed in time; its "
			    "executions end NodeLost", "node=%s", node);
			metric_inc(ctl->m_nodes_lost, NULL);
		}
		/*
		 * Lost lately, or back lately: pods from before may be left
		 * (after that, each execution's own resync finds them).
		 */
		any |= (node_field(e, N_LOST) && time(NULL) -
		    node_field(e, N_LOST_AT) < NODE_AFTER_S) ||
		    (node_field(e, N_BACK_AT) > 0 && time(NULL) -
		    node_field(e, N_BACK_AT) < NODE_AFTER_S);
	}
	ctl->nodes_conns = conns;
	pthread_mutex_unlock(&ctl->lock);
	if (!any)
		return 0;
	pods = informer_list(ctl->pod_inf);
	json_array_foreach(pods, j, pod) {
		const char *pn = json_string_value(json_object_get(
		    json_object_get(pod, "spec"), "nodeName"));
		const char *owner = podspec_pod_execution(pod, NULL);
		const char *ns = k8s_obj_namespace(pod);
		int lost;

		if (pn == NULL || ns == NULL)
			continue;
		pthread_mutex_lock(&ctl->lock);
		lost = ctl_pod_lost_locked(ctl, pod);
		pthread_mutex_unlock(&ctl->lock);
		if (!lost)
			continue;
		if (owner) {
			char *key = xasprintf("%s/%s", ns, owner);

			workqueue_add(ctl->queue, key);
			free(key);
		} else if (ctl_session_of_pod(pod)) {
			/* Its session ends NodeLost (sessions.c). */
			char *key = ctl_session_key(ns, ctl_session_of_pod(pod));

			workqueue_add(ctl->queue, key);
			free(key);
		} else if (ctl_holder_pool(pod) && !json_object_get(
		    json_object_get(pod, "metadata"), "deletionTimestamp")) {
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
	json_decref(pods);
	return 0;
}
