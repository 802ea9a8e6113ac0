/*
 * cx.h - what a CodeExecution is, for every component: the resource, its
 * phases and reasons, its defaults, the keys of the labels and annotations
 * it puts on what it owns, and the order of its conditions. The CRD
 * (crds/airlock.dev_codeexecutions.yaml) is the API; this is the C side of
 * it, as kubebuilder's api/ package is the Go side of a CRD.
 *
 * Nothing here calls the API server: the controller, the node agent and
 * the CLI read and write executions, and agree through this header on
 * what they read and write.
 */
#ifndef AIRLOCK_CX_H
#define AIRLOCK_CX_H

#include <stdint.h>

#include <jansson.h>

#include "client.h"

/* airlock.dev/v1alpha1 codeexecutions, namespaced. */
extern const struct k8s_resource cx_resource;

/*
 * The spec's defaults and ranges, as the CRD states them (the API server
 * applies them on the cluster; cli_check_spec does for local runs).
 */
#define CX_DEFAULT_TIMEOUT_S	30
#define CX_MAX_TIMEOUT_S	3600
#define CX_DEFAULT_MAX_BYTES	65536		/* output.maxBytes, per stream */
#define CX_MAX_MAX_BYTES	(1 << 20)
#define CX_DEFAULT_TTL_S	3600		/* ttlSecondsAfterFinished */
#define CX_MAX_TTL_S		2592000		/* 30 days */

/*
 * Both streams together, whatever maxBytes says: past it the node agent
 * (and a local run) kills the program, OutputLimitExceeded. The default
 * of --hard-output-cap.
 */
#define CX_HARD_OUTPUT_CAP	(16LL << 20)

/* spec.timeoutSeconds in ms, the default when absent. cx is borrowed. */
long long cx_timeout_ms(json_t *cx);

/* spec.output.maxBytes, the default when absent. */
size_t cx_max_bytes(json_t *cx);
/* spec.output.stream: its output shown in the status while it runs. */
int cx_stream(json_t *cx);

/* --- what an execution owns -------------------------------------------------- */

/* Labels on everything the controller creates for an execution. */
#define CX_LABEL_MANAGED	"app.kubernetes.io/managed-by"
#define CX_MANAGER		"airlock-controller"
#define CX_LABEL_COMPONENT	"app.kubernetes.io/component"
#define CX_COMPONENT		"execution"
#define CX_LABEL_UID		"airlock.dev/execution-uid"
#define CX_ANN_NAME		"airlock.dev/execution"
/* Who created an execution: its request's user, stamped at admission. */
#define CX_ANN_CREATED_BY	"airlock.dev/created-by"
/*
 * What the node agent enforces, in the pod because the agent may read pods
 * but not executions: spec.timeoutSeconds in milliseconds, and
 * spec.output.maxBytes (per stream).
 */
#define CX_ANN_TIMEOUT_MS	"airlock.dev/timeout-ms"
#define CX_ANN_MAX_OUTPUT	"airlock.dev/output-max-bytes"
/*
 * The bytes stdout and stderr may take together in the status, encoded as
 * the API server stores them: CX_OBJECT_BUDGET less the execution's own
 * stored size and CX_STATUS_RESERVE for the rest of the status. The whole
 * object then stays well under etcd's 1.5 MiB request limit.
 */
#define CX_ANN_OUTPUT_BUDGET	"airlock.dev/output-budget-bytes"
/*
 * "true" when spec.output.stream is: the node agent then copies the output
 * so far into the status while the program runs (node-agent/docs/agent.md).
 */
/* "true": the profile has a code policy (ctl_config.h), whose refusal ends it PolicyDenied. */
#define CX_ANN_POLICY		"airlock.dev/policy"
/* An execution pod with egress: its byte cap (docs/network.md, "The byte cap"). */
#define CX_ANN_EGRESS_BYTES	"airlock.dev/egress-bytes"
#define CX_ANN_STREAM		"airlock.dev/stream"
#define CX_OBJECT_BUDGET	(1024 * 1024)
/*
 * Each node agent's heartbeat (controller/agents.c): a Lease of this
 * prefix and its node's name, in the controller's lease namespace,
 * renewed every CX_AGENT_RENEW_S. A node name too long for it (past 239
 * characters) gets no heartbeat, and its results the grace from the exit
 * alone.
 */
#define CX_AGENT_LEASE_PREFIX	"airlock-agent-"
#define CX_AGENT_RENEW_S	10
#define CX_AGENT_LEASE_S	40
#define CX_STATUS_RESERVE	(16 * 1024)

/* --- phases and reasons ------------------------------------------------------ */

/*
 * XX(name, phase, terminal, CLI exit code when no reason says otherwise).
 * CX_EXIT_PROGRAM: the program's own exit code (status.exitCode) when it
 * is 1 to 255, else 1.
 */
#define CX_EXIT_PROGRAM		(-1)
#define CX_EXIT_POLICY		120	/* the profile's code policy refused it */
#define CX_EXIT_NOT_RUN		121	/* the program never ran */
#define CX_EXIT_EGRESS_LIMIT	122	/* its network traffic passed its cap */
#define CX_EXIT_OUTPUT_LIMIT	123
#define CX_EXIT_TIMEOUT		124	/* as timeout(1) */
#define CX_EXIT_OOM		125
#define CX_EXIT_CANCELLED	130	/* 128 + SIGINT */
#define CX_PHASE_MAP(XX)						\
	XX(PENDING,	"Pending",	0, 1)					\
	XX(RUNNING,	"Running",	0, 1)					\
	XX(SUCCEEDED,	"Succeeded",	1, 0)					\
	XX(FAILED,	"Failed",	1, CX_EXIT_PROGRAM)			\
	XX(TIMED_OUT,	"TimedOut",	1, CX_EXIT_TIMEOUT)			\
	XX(CANCELLED,	"Cancelled",	1, CX_EXIT_CANCELLED)

/*
 * XX(name, reason, the phase it ends, CLI exit code). Every reason is
 * written on the Complete condition and in status.reason; the CLI's codes
 * are documented in cli/README.md. In the CRD's order (a unit test
 * holds the two together).
 */
#define CX_REASON_MAP(XX)						\
	XX(COMPLETED,	      "Completed",	     "Succeeded", 0)		\
	XX(ERROR,	      "Error",		     "Failed",	  CX_EXIT_PROGRAM) \
	XX(OOM_KILLED,	      "OOMKilled",	     "Failed",	  CX_EXIT_OOM)	\
	XX(DEADLINE_EXCEEDED, "DeadlineExceeded",    "TimedOut",  CX_EXIT_TIMEOUT) \
	XX(OUTPUT_LIMIT,      "OutputLimitExceeded", "Failed",	  CX_EXIT_OUTPUT_LIMIT) \
	XX(EGRESS_LIMIT,      "EgressLimitExceeded", "Failed",	  CX_EXIT_EGRESS_LIMIT) \
	XX(IMAGE_PULL_FAILED, "ImagePullFailed",     "Failed",	  CX_EXIT_NOT_RUN) \
	XX(UNSCHEDULABLE,     "Unschedulable",	     "Failed",	  CX_EXIT_NOT_RUN) \
	XX(REJECTED,	      "Rejected",	     "Failed",	  CX_EXIT_NOT_RUN) \
	XX(CANCELLED,	      "Cancelled",	     "Cancelled", CX_EXIT_CANCELLED) \
	XX(START_FAILED,      "StartFailed",	     "Failed",	  CX_EXIT_NOT_RUN) \
	XX(POD_DELETED,	      "PodDeleted",	     "Failed",	  CX_EXIT_PROGRAM) \
	XX(RESULT_LOST,	      "ResultLost",	     "Failed",	  CX_EXIT_PROGRAM) \
	XX(RESULT_TOO_LARGE,  "ResultTooLarge",	     "Failed",	  CX_EXIT_PROGRAM) \
	XX(ISOLATION_FAILED,  "IsolationFailed",     "Failed",	  CX_EXIT_PROGRAM) \
	XX(POLICY_DENIED,     "PolicyDenied",	     "Failed",	  CX_EXIT_POLICY) \
	XX(NODE_LOST,	      "NodeLost",	     "Failed",	  CX_EXIT_PROGRAM)

enum cx_phase {
#define XX(name, s, term, code) CX_PHASE_##name,
	CX_PHASE_MAP(XX)
#undef XX
	CX_PHASE_COUNT
};

enum cx_reason {
#define XX(name, s, ph, code) CX_REASON_##name,
	CX_REASON_MAP(XX)
#undef XX
	CX_REASON_COUNT
};

const char *cx_phase_name(enum cx_phase p);
const char *cx_reason_name(enum cx_reason r);

/* The phase a reason ends an execution in. */
enum cx_phase cx_reason_phase(enum cx_reason r);

/* 1 if phase (may be NULL) is one an execution never leaves. */
int cx_phase_terminal(const char *phase);

/*
 * The kubelet's reasons for a terminated container whose end its node
 * lost track of: containerd lost the task (exit 255), or the kubelet
 * cannot find the container (exit 137, and no start time whether or not
 * the program ran). Neither exit is the program's: the node agent never
 * records one, and the controller ends the execution (cx_end_untracked).
 */
#define CX_TERM_UNKNOWN		"Unknown"
#define CX_TERM_STATUS_UNKNOWN	"ContainerStatusUnknown"
/* 1 if reason (may be NULL) is one of those. */
int cx_end_untracked(const char *reason);

/*
 * The exit code `airlock run` and `airlock wait` give for a status: the
 * reason's (when it belongs to the phase), else the phase's, else 1 when
 * there is no phase. See CX_EXIT_PROGRAM.
 */
int cx_exit_code(json_t *status);

/*
 * The conditions, in the order the controller writes them when it first
 * sees an execution's pod: Scheduled, Started, Complete. The node agent's
 * result patch tests /status/conditions/N/type against this order and
 * replaces each by index, so the order is part of the contract between
 * the two: change it only with both.
 */
#define CX_CONDITION_MAP(XX)						\
	XX(SCHEDULED,	"Scheduled")					\
	XX(STARTED,	"Started")					\
	XX(COMPLETE,	"Complete")

enum cx_condition {
#define XX(name, s) CX_COND_##name,
	CX_CONDITION_MAP(XX)
#undef XX
	CX_COND_COUNT
};

const char *cx_condition_name(enum cx_condition c);

#endif
