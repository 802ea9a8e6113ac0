/*
 * agents.c - whether a node's agent is there to record a result (issue 28,
 * item 3).
 *
 * An execution whose program exited and whose result no agent recorded
 * ends ResultLost after opts.result_grace_ms (reconcile.c). That grace
 * must not run while nobody could record: an agent pod being replaced by
 * its DaemonSet (every helm upgrade), an agent that cannot reach the API
 * server, or the API server itself down. So each node agent renews a
 * Lease "airlock-agent-<node>" in the controller's lease namespace every
 * CX_AGENT_RENEW_S (node-agent/main.c, operator/lease.c), and the controller
 * watches them and keeps, per node, on its own monotonic clock (the
 * agent's clock is never compared with ours):
 *  - when it last saw the lease change;
 *  - since when the agent has been heard without a gap: reset when the
 *    holder changes (a new agent process) or when a change comes more
 *    than AGENT_GAP_MS after the last one (an agent, or the API server,
 *    that was away).
 * An agent not heard within AGENT_GAP_MS, or whose lease was released
 * (an agent stopped), is away: a result waits for it, for at most
 * opts.agent_absent_ms from when it went away, then ends ResultLost
 * saying so. One heard since S: the result's grace runs from the later
 * of the exit and S. A node whose agent never renewed a lease (an agent
 * older than this, or one given no lease namespace) keeps the grace from
 * the exit alone.
 */
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "controller_priv.h"
#include "cx.h"
#include "log.h"
#include "podspec.h"
#include "xmalloc.h"

/* Of a Lease: its name and namespace, and the two fields read. */
static json_t *
trim_agent_lease(json_t *obj)
{
	json_t *md = json_object_get(obj, "metadata");
	json_t *spec = json_object_get(obj, "spec");

	return json_pack("{s:{s:O*, s:O*}, s:{s:O*, s:O*}}", "metadata",
	    "name", json_object_get(md, "name"),
	    "namespace", json_object_get(md, "namespace"),
	    "spec",
	    "renewTime", json_object_get(spec, "renewTime"),
	    "holderIdentity", json_object_get(spec, "holderIdentity"));
}

/*
 * ctl->agents: node -> [renewTime last seen, holder last seen, when the
 * lease was last seen to change, since when heard without a gap, when it
 * was seen released (0: not)], all times clock_mono_ms().
 */
enum { A_RENEW, A_HOLDER, A_SEEN, A_SINCE, A_RELEASED };

static long long
agent_field(json_t *e, int i)
{
	return (long long)json_integer_value(json_array_get(e, (size_t)i));
}

/*
 * An agent heard again (a new one, or back from a gap): its node's
 * executions are looked at now, not at their next look, so that a result
 * waiting for it gets the grace from this moment and not later.
 */
static void
requeue_node(struct controller *ctl, const char *node)
{
	json_t *pods, *pod;
	size_t i;

	if (ctl->pod_inf == NULL || ctl->queue == NULL)
		return;
	pods = informer_list(ctl->pod_inf);
	json_array_foreach(pods, i, pod) {
		const char *pn = json_string_value(json_object_get(
		    json_object_get(pod, "spec"), "nodeName"));
		const char *owner = podspec_pod_execution(pod, NULL);
		char *key;

		if (pn == NULL || strcmp(pn, node) != 0 ||
		    k8s_obj_namespace(pod) == NULL)
			continue;
		if (owner == NULL && ctl_session_of_pod(pod))
			key = ctl_session_key(k8s_obj_namespace(pod),
			    ctl_session_of_pod(pod));
		else if (owner == NULL)
			continue;
		else
			key = xasprintf("%s/%s", k8s_obj_namespace(pod), owner);
		workqueue_add(ctl->queue, key);
		free(key);
	}
	json_decref(pods);
}

void
ctl_agent_lease_seen(struct controller *ctl, json_t *lease, long long now)
{
	const char *name = k8s_obj_name(lease), *node;
	json_t *spec = json_object_get(lease, "spec"), *e;
	const char *renew = json_string_value(json_object_get(spec, "renewTime"));
	const char *holder = json_string_value(json_object_get(spec,
	    "holderIdentity"));
	long long since;
	int back;

	if (name == NULL || strncmp(name, CX_AGENT_LEASE_PREFIX,
	    strlen(CX_AGENT_LEASE_PREFIX)) != 0)
		return;
	node = name + strlen(CX_AGENT_LEASE_PREFIX);
	if (renew == NULL)
		renew = "";
	if (holder == NULL)
		holder = "";
	pthread_mutex_lock(&ctl->lock);
	e = json_object_get(ctl->agents, node);
	if (e && strcmp(renew, json_string_value(json_array_get(e, A_RENEW))) ==
	    0 && strcmp(holder, json_string_value(json_array_get(e,
	    A_HOLDER))) == 0) {
		pthread_mutex_unlock(&ctl->lock);
		return;		/* a relist's copy: nothing new heard */
	}
	since = e ? agent_field(e, A_SINCE) : now;
	if (e == NULL || strcmp(holder, json_string_value(json_array_get(e,
	    A_HOLDER))) != 0 || now - agent_field(e, A_SEEN) > AGENT_GAP_MS ||
	    agent_field(e, A_RELEASED))
		since = now;
	back = e != NULL && since == now && holder[0];
	json_object_set_new(ctl->agents, node, json_pack("[s, s, I, I, I]",
	    renew, holder, (json_int_t)now, (json_int_t)since,
	    (json_int_t)(holder[0] ? 0 : now)));
	pthread_mutex_unlock(&ctl->lock);
	if (back)
		requeue_node(ctl, node);
}

static void
agent_add(void *arg, json_t *obj)
{
	ctl_agent_lease_seen(arg, obj, clock_mono_ms());
}

static void
agent_update(void *arg, json_t *old, json_t *cur)
{
	(void)old;
	ctl_agent_lease_seen(arg, cur, clock_mono_ms());
}

/* Deleted: as released (an uninstall, or by hand). */
static void
agent_delete(void *arg, json_t *obj, int unknown)
{
	struct controller *ctl = arg;
	const char *name = k8s_obj_name(obj);
	json_t *e;

	(void)unknown;
	if (name == NULL || strncmp(name, CX_AGENT_LEASE_PREFIX,
	    strlen(CX_AGENT_LEASE_PREFIX)) != 0)
		return;
	pthread_mutex_lock(&ctl->lock);
	e = json_object_get(ctl->agents, name + strlen(CX_AGENT_LEASE_PREFIX));
	if (e && agent_field(e, A_RELEASED) == 0)
		json_array_set_new(e, A_RELEASED, json_integer(clock_mono_ms()));
	pthread_mutex_unlock(&ctl->lock);
}

struct informer *
ctl_agents_informer(struct controller *ctl)
{
	struct informer_opts o = { .res = &k8s_res_leases,
	    .ns = ctl->opts.agent_lease_ns, .transform = trim_agent_lease,
	    .packed = 1 };
	struct informer_handlers h = { agent_add, agent_update, agent_delete,
	    ctl };

	ctl->agents = json_object();
	if (o.ns == NULL || !o.ns[0])
		return NULL;
	return informer_new(ctl->client, &o, &h);
}

long long
ctl_agent_wait(struct controller *ctl, const char *node, long long exit_left,
    long long now, char *msg, size_t len)
{
	json_t *e;
	long long seen, since, released, away_from, left;
	/*
	 * However the agent comes and goes (one that crash-loops is heard
	 * anew each time), no result waits past the grace from the exit and
	 * agent_absent_ms more.
	 */
	long long cap = exit_left + ctl->opts.agent_absent_ms;

	if (msg && len)
		msg[0] = '\0';
	if (ctl->agents == NULL || node == NULL)
		return exit_left;
	pthread_mutex_lock(&ctl->lock);
	e = json_object_get(ctl->agents, node);
	seen = agent_field(e, A_SEEN);
	since = agent_field(e, A_SINCE);
	released = agent_field(e, A_RELEASED);
	pthread_mutex_unlock(&ctl->lock);
	if (e == NULL) {
		/* Before the leases are listed, nothing is known: wait. */
		if (ctl->agent_inf && informer_wait_synced(ctl->agent_inf, 0) != 0)
			left = exit_left > AGENT_GAP_MS ? exit_left : AGENT_GAP_MS;
		else
			left = exit_left;
		return left < cap ? left : cap;
	}
	if (released == 0 && now - seen <= AGENT_GAP_MS) {
		/* Heard: the grace runs from the exit or from its return. */
		left = since + ctl->opts.result_grace_ms - now;
		if (left < exit_left)
			left = exit_left;
		return left < cap ? left : cap;
	}
	/*
	 * Away: wait for it (looking again at least every AGENT_GAP_MS), at
	 * most agent_absent_ms from when it went, and never less than the
	 * grace from the exit.
	 */
	away_from = released ? released : seen + AGENT_GAP_MS;
	left = away_from + ctl->opts.agent_absent_ms - now;
	if (left > cap)
		left = cap;
	if (left > 0)
		return left < AGENT_GAP_MS ? left : AGENT_GAP_MS;
	if (exit_left > 0)
		return exit_left;
	if (msg && len)
		snprintf(msg, len, "the node agent of node %.253s has not been "
		    "heard from for over %ld s", node,
		    ctl->opts.agent_absent_ms / 1000);
	return 0;
}
