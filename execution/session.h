/*
 * session.h - CodeSession, a sandbox kept across executions (issue 30,
 * docs/sessions.md): what a session may be, and its pod. Pure, as pool.h
 * is: the controller makes the API calls, the unit tests check every
 * field.
 *
 * A session's pod is a pool's holder in every respect (pool_holder: the
 * same hardening, `run --hold`, the startup probe) but its owner, the
 * session, its label SESSION_LABEL_UID (the session's uid) in place of
 * the pool's, its name (SESSION_POD_PREFIX + the session's uid: a second
 * create of it is a 409, never a second pod) and its
 * activeDeadlineSeconds: maxLifetimeSeconds + SESSION_DEADLINE_SLACK, the
 * kubelet's backstop for the lifetime.
 */
#ifndef AIRLOCK_SESSION_H
#define AIRLOCK_SESSION_H

#include <jansson.h>

#include "ctl_config.h"
#include "k8s_error.h"

/* airlock.dev/v1alpha1 codesessions, namespaced. */
extern const struct k8s_resource session_resource;

#define SESSION_LABEL_UID	"airlock.dev/session-uid"
#define SESSION_POD_PREFIX	"airlock-session-"
#define SESSION_DEFAULT_IDLE_S	600	/* the CRD's defaults and ranges */
#define SESSION_DEFAULT_LIFE_S	3600
#define SESSION_MIN_S		10
#define SESSION_MAX_S		86400
#define SESSION_DEFAULT_TTL_S	3600
#define SESSION_DEADLINE_SLACK	30
/* The most files a step carries, the session's and its own. */
#define SESSION_STEP_FILES	64
/* In the sandbox: the kernels a session's steps run in. */
#define SESSION_KERNEL_PY	"/airlock/bin/kernel.py"
#define SESSION_KERNEL_SH	"/airlock/bin/kernel.sh"

/*
 * A step on the session's pod (session_step_patch): the execution's uid
 * and name in these annotations (not CX_LABEL_UID and CX_ANN_NAME, which
 * make a pod an execution's own: its to delete), its run in
 * pool_run_annotations' annotations, with the process's "step" member:
 * {"code": the program's file, "kernel": [argv], "timeoutMs", "graceMs"},
 * what `warm --step` is given (images/runner/warm.c).
 */
#define SESSION_ANN_STEP	"airlock.dev/step-uid"
#define SESSION_ANN_STEP_NAME	"airlock.dev/step"
/*
 * The step of that uid was cancelled while it ran (spec.cancel): the
 * node agent sends `warm --step` SIGTERM, which interrupts the kernel as
 * at a timeout. The next step's patch removes it.
 */
#define SESSION_ANN_CANCEL	"airlock.dev/step-cancel"
/*
 * After a step's timeout, the kernel's SIGINT has this long to bring it
 * back before it is killed and started again (docs/sessions.md); the node
 * agent's own backstop is SESSION_STEP_BACKSTOP_MS after that.
 */
#define SESSION_STEP_GRACE_MS		5000
#define SESSION_STEP_BACKSTOP_MS	10000

/*
 * The session's idleTimeoutSeconds, on its pod (session_pod, and
 * session_claim_patch for a holder claimed): the node agent's idle check
 * reads it there, as it cannot read sessions. Its lifetime needs no
 * annotation: its pod's start + activeDeadlineSeconds - the slack
 * (session_pod_clock), which only the kubelet writes and no update can
 * raise.
 */
#define SESSION_ANN_IDLE	"airlock.dev/session-idle-seconds"

/* status.phase */
#define SESSION_PENDING		"Pending"
#define SESSION_READY		"Ready"
#define SESSION_ENDED		"Ended"

/*
 * Whether the session (borrowed) can be served as its spec says: its
 * runtime a profile of the config that starts its program with the
 * runner and a Python interpreter or bash, with no code policy (the policy's
 * guards run in front of a program, not of a kernel), its resources
 * within the caps. 0, or K8S_EINVAL with err naming the field.
 */
int session_check(const struct ctl_config *cfg, json_t *session,
    struct k8s_error *err) __attribute__((warn_unused_result));

/*
 * The kernel's argv for the session's runtime (NULL-terminated, static
 * strings and the profile's), into argv (room for 4), or -1 when the
 * runtime offers no sessions.
 */
int session_kernel(const struct ctl_config *cfg, const char *runtime,
    const char *argv[4]);

/* The pod's name for a session's uid, into out. */
void session_pod_name(const char *uid, char out[80]);

/*
 * The session's pod (session borrowed, as the API server returned it): a
 * new reference, or NULL with err (K8S_EINVAL) when session_check
 * refuses it.
 */
json_t *session_pod(const struct ctl_config *cfg, json_t *session,
    struct k8s_error *err);

/*
 * The merge patch that puts step cx (borrowed, read afresh or a cached
 * copy with its code; stored: its size as stored, 0 for cx's own) on the
 * session's pod (borrowed: its resourceVersion). Every key a step may
 * write that this one does not is set to null, whether pod shows it or
 * not: a cached pod keeps few of its annotations (ctl_trim_pod). A
 * new reference, or NULL with err: K8S_ETOOBIG (its code, args and env
 * past the annotation budget), K8S_EINVAL (its runtime offers no
 * sessions, or what podspec_build refuses).
 */
json_t *session_step_patch(const struct ctl_config *cfg, json_t *cx,
    json_t *pod, size_t stored, struct k8s_error *err);

/*
 * The claim that makes a pool's idle holder (borrowed: its
 * metadata.resourceVersion and status.startTime are read) the pod of
 * session (borrowed): a merge patch at the holder's version, with the
 * session's uid label in place of the pool's, the session its controller
 * owner, and activeDeadlineSeconds its age + maxLifetimeSeconds +
 * SESSION_DEADLINE_SLACK (as a cold session pod's counts from its start).
 * now_s: the wall clock. A new reference.
 */
json_t *session_claim_patch(json_t *session, json_t *holder, long long now_s);

/*
 * What a step on pod (borrowed) is, read back for the node agent: the
 * execution's name and uid (borrowed from pod), 0; or -1 when the pod is
 * not a session's (its controller owner a CodeSession whose uid its
 * SESSION_LABEL_UID label carries) or carries no step.
 */
int session_pod_step(json_t *pod, const char **cx, const char **cx_uid);

/*
 * A session's clock as its pod (borrowed) says it: the session's name and
 * uid (borrowed from pod: its controller owner, a CodeSession, whose uid
 * its SESSION_LABEL_UID label carries); idle_s from SESSION_ANN_IDLE
 * (0: not there, or not a count in the CRD's range); expires_s, the wall
 * second its lifetime ends: status.startTime + spec.activeDeadlineSeconds
 * - SESSION_DEADLINE_SLACK (0: either not there). 0, or -1 when the pod
 * is not a session's.
 */
struct session_clock {
	const char	*name, *uid;
	long long	 idle_s;
	long long	 expires_s;
};
int session_pod_clock(json_t *pod, struct session_clock *c);

/*
 * What ends a session now by its clock, or NULL: "Expired" once now_s
 * reaches expires_s (a step running or not), else "IdleTimeout" when no
 * step runs (busy 0) and none has for idle_ms (the time since the last
 * activity seen) >= idle_s seconds. Pure: the node agent's check and its
 * unit tests.
 */
const char *session_clock_due(const struct session_clock *c, int busy,
    long long idle_ms, long long now_s);

/*
 * Whether a session's end reason is one of its own course (Closed,
 * Expired, IdleTimeout): its running step ends Cancelled, not Failed.
 */
int session_end_quiet(const char *reason);

/*
 * The message of a step running when its session ended (how: its reason,
 * or "deleted"), into out: the controller's and the node agent's alike.
 */
void session_step_ended_msg(char *out, size_t size, const char *session,
    const char *how);

/* spec.idleTimeoutSeconds, spec.maxLifetimeSeconds, defaults and ranges applied. */
long long session_idle_s(json_t *session);
long long session_lifetime_s(json_t *session);
long long session_ttl_s(json_t *session);

#endif
