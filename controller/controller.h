/*
 * controller.h - the CodeExecution controller: informers on CodeExecutions
 * and on execution pods feed a work queue keyed "namespace/name"; workers
 * reconcile each key while this replica holds the leader lease.
 *
 * Status ownership (the node agent is the other writer, issue 4):
 *   controller: phase Pending/Running, and the terminal phases it decides
 *               itself (Failed/Rejected, Failed/ImagePullFailed,
 *               Failed/Unschedulable past the timeout, Failed/StartFailed
 *               past the start deadline, Failed/Error when
 *               the pod is lost mid-run, Cancelled); conditions Scheduled
 *               and Started; podName, nodeName, codeSha256, startTime,
 *               observedGeneration, message.
 *   node agent: the terminal result: phase Succeeded/Failed/TimedOut,
 *               reason, exitCode, stdout/stderr and their counts, timing,
 *               condition Complete.
 * The controller never writes over a terminal phase. Its status writes
 * are merge patches of only the keys it changed, carrying the
 * resourceVersion they were computed from, so they never overwrite a newer
 * state; a 409 requeues the key. The node agent's one write is a JSON
 * patch that first tests the phase is still Pending or Running
 * (node-agent/docs/agent.md).
 *
 * The caches hold objects packed as JSON text and trimmed to what is read;
 * a finished execution is kept as little more than its TTL. Guardrails
 * are watched too: one deleted or loosened is applied again at once.
 */
#ifndef AIRLOCK_CONTROLLER_H
#define AIRLOCK_CONTROLLER_H

#include <jansson.h>

#include "client.h"
#include "ctl_config.h"
#include "metrics.h"


struct controller_opts {
	const char	*namespace;	/* NULL: all namespaces */
	int		 workers;	/* default 2 */
	long		 resync_ms;	/* default 60000 */
	/*
	 * How long after its program's exit a finished pod may wait for the
	 * node agent's result before the execution ends ResultLost; default
	 * 30000 (the agent takes milliseconds, and retries past blips).
	 */
	long		 result_grace_ms;
	/*
	 * The namespace of the node agents' heartbeat Leases (agents.c): the
	 * grace above then runs only while the node's agent is heard, and a
	 * result waits for an agent away for at most agent_absent_ms
	 * (default 300000). NULL: the grace runs from the exit alone.
	 */
	const char	*agent_lease_ns;
	long		 agent_absent_ms;
	/*
	 * The egress proxy's key (egress_token.h), which signs the pass of
	 * an execution with host entries; NULL when no profile has one.
	 */
	const unsigned char *egress_key;
	size_t		 egress_key_len;
	/*
	 * How long an execution's pod may go without its program starting
	 * (from the pod's creation) before the execution ends StartFailed
	 * and the pod is deleted, whatever the kubelet does; a warm claim
	 * gets this plus its timeout and result_grace_ms for its result
	 * (start.c). Default 120000.
	 */
	long		 start_deadline_ms;
	/*
	 * A ClusterRole named as the owner of every namespace guardrail, or
	 * NULL. The chart names its controller ClusterRole: uninstalling the
	 * release deletes it, and the garbage collector then deletes the
	 * guardrails in every namespace (charts/airlock/README.md). Its uid is
	 * read again every resync_ms, so a role made anew is followed; while
	 * it is missing no guardrail is applied, and so no pod is made.
	 */
	const char	*guard_owner_role;
	/*
	 * How long after a warm sandbox is claimed its pool makes the one
	 * that replaces it (pools.c); 0: at once.
	 */
	long		 refill_delay_ms;
	/*
	 * Where audit records go, one JSON line each (controller/docs/
	 * audit.md): a file descriptor; 0 means standard output (1).
	 */
	int		 audit_fd;
	/*
	 * An execution with host entries gets its egress counts written
	 * that long after its end, every proxy log stream open that long
	 * (controller/egressfollow.c); it waits up to 12 times as long for
	 * a stream that is not open. Default 5000.
	 */
	long		 egress_grace_ms;
};

struct controller;

/* cfg, c and m are borrowed and must outlive the controller. */
struct controller *controller_new(struct k8s_client *c,
    const struct ctl_config *cfg, struct metrics *m,
    const struct controller_opts *opts);

/* Start informers and workers. Workers act only while leading. */
int controller_start(struct controller *ctl)
    __attribute__((warn_unused_result));

/* Leadership gained or lost (from the lease callbacks). */
void controller_set_leading(struct controller *ctl, int leading);

/*
 * For /readyz: the informers are synced and, while leading, every
 * execution there was at the lead's start has been reconciled once.
 */
int controller_ready(struct controller *ctl);

/* Stop workers and informers; then free. */
void controller_stop(struct controller *ctl);
void controller_free(struct controller *ctl);

/* One reconcile of key "ns/name" (exposed for tests). 0, or a code that
 * makes the worker requeue the key with backoff. */
int controller_reconcile(struct controller *ctl, const char *key);

#endif
