/*
 * ctrd.h - a small client of containerd's own gRPC API, over its unix
 * socket: what the node agent needs of the node's container runtime that
 * the kubelet reports too late or not at all.
 *
 *   - task events as they happen (start, exit with its status, OOM), each
 *     with containerd's nanosecond timestamp: the kubelet learns of an
 *     exit by relisting, up to a second later, and reports start times
 *     in whole seconds;
 *   - a container's labels, which name the pod it belongs to;
 *   - killing a task, at once;
 *   - running a process in a running task (an exec), reading its output
 *     from FIFOs of the caller's, not from the CRI log.
 *
 * gRPC is HTTP/2 with prior knowledge (no TLS on a unix socket), each
 * message framed as 1 byte "compressed" (always 0 here) + 4 bytes
 * big-endian length + the protobuf bytes, and the outcome in the
 * grpc-status trailer. libcurl does the HTTP/2; pb.h the protobuf.
 * Every reply and every streamed message is capped (CTRD_MSG_MAX).
 *
 * Errors: 0 or a negative K8S_E* code, detail in struct k8s_error, whose
 * http_status holds the gRPC status code (0 when none was received):
 * NOT_FOUND (5) is K8S_ENOTFOUND, ALREADY_EXISTS (6) K8S_EEXIST,
 * a transport failure K8S_EIO, any other status K8S_EHTTP.
 */
#ifndef AIRLOCK_CTRD_H
#define AIRLOCK_CTRD_H

#include <stdatomic.h>
#include <stdint.h>

#include <jansson.h>

#include "buf.h"
#include "k8s_error.h"

#define CTRD_MSG_MAX	(4 << 20)	/* one reply or one event */

struct ctrd;

/*
 * A client of the containerd listening on socket, acting in containerd
 * namespace ns ("k8s.io" for the kubelet's containers). Strings are
 * copied. Calls from several threads at once are fine.
 */
struct ctrd *ctrd_new(const char *socket, const char *ns);
void ctrd_free(struct ctrd *c);

/* containerd's version (caller frees): a cheap liveness check. */
int ctrd_version(struct ctrd *c, char **version, struct k8s_error *err)
    __attribute__((warn_unused_result));

/* A container's labels, as a new JSON object of strings. */
int ctrd_container_labels(struct ctrd *c, const char *id, json_t **labels,
    struct k8s_error *err)
    __attribute__((warn_unused_result));

/* Send sig to a container's task; all: to every process in it. */
int ctrd_kill(struct ctrd *c, const char *id, int sig, int all,
    struct k8s_error *err)
    __attribute__((warn_unused_result));

/*
 * A process run inside container id's running task: containerd's
 * Tasks.Exec (ctrd_exec_create), then Tasks.Start (ctrd_exec_start).
 * exec_id names it within the task; process_json is an OCI runtime-spec
 * Process object (args, env, cwd, user, ...), checked by the runtime, not
 * here. stdout_path and stderr_path are opened for writing by the task's
 * shim: a FIFO's read side must be open before the call (O_RDONLY |
 * O_NONBLOCK), or the shim waits on its open. stdin_path (NULL: none, the
 * process reads EOF) is a FIFO the shim copies to the process: open it
 * O_RDWR before the call (never blocks) and write; the shim holds it open
 * too, so the process sees EOF only after ctrd_exec_close_stdin. *pid
 * (NULL: not wanted) is the pid the runtime reports (under gVisor, the
 * sandbox's own). When Start fails, the exec is aborted
 * (ctrd_exec_abort): a failed Start may have started it all the same.
 */
int ctrd_exec(struct ctrd *c, const char *id, const char *exec_id,
    const char *process_json, const char *stdin_path, const char *stdout_path,
    const char *stderr_path, uint32_t *pid, struct k8s_error *err)
    __attribute__((warn_unused_result));

/*
 * The two halves of ctrd_exec. After ctrd_exec_create the process exists
 * and does not run; it runs only once ctrd_exec_start is called. Any
 * failure of ctrd_exec_start (a reply with an error, the unary call's
 * 10 s timeout, a broken connection) leaves it unknown whether it runs:
 * the shim may have started it before the reply was lost.
 */
int ctrd_exec_create(struct ctrd *c, const char *id, const char *exec_id,
    const char *process_json, const char *stdin_path, const char *stdout_path,
    const char *stderr_path, struct k8s_error *err)
    __attribute__((warn_unused_result));
int ctrd_exec_start(struct ctrd *c, const char *id, const char *exec_id,
    uint32_t *pid, struct k8s_error *err)
    __attribute__((warn_unused_result));

/*
 * Best effort, for an exec whose start is unknown: SIGKILL it (when that
 * lands, its exit is waited for, at most the unary call's 10 s), then
 * Tasks.DeleteProcess. Errors are dropped: an exec never made, or gone,
 * is the outcome wanted.
 */
void ctrd_exec_abort(struct ctrd *c, const char *id, const char *exec_id);

/*
 * Tasks.Wait for an exec's exit: *status is its exit status (128 + the
 * signal for a killed one). Bounded by the unary call's 10 s: a caller
 * with longer programs takes the exit from the event stream instead
 * (struct ctrd_event's exec_id).
 */
int ctrd_exec_wait(struct ctrd *c, const char *id, const char *exec_id,
    uint32_t *status, struct k8s_error *err)
    __attribute__((warn_unused_result));

/* End an exec's stdin (Tasks.CloseIO): its process reads EOF. */
int ctrd_exec_close_stdin(struct ctrd *c, const char *id, const char *exec_id,
    struct k8s_error *err)
    __attribute__((warn_unused_result));

/* Send sig to an exec'd process (Tasks.Kill with its exec id). */
int ctrd_exec_kill(struct ctrd *c, const char *id, const char *exec_id,
    int sig, struct k8s_error *err)
    __attribute__((warn_unused_result));

/* Drop a finished exec from its task (Tasks.DeleteProcess). */
int ctrd_exec_delete(struct ctrd *c, const char *id, const char *exec_id,
    struct k8s_error *err)
    __attribute__((warn_unused_result));

/*
 * The pid of container id's task (Tasks.Get): under gVisor, the sandbox's
 * host process.
 */
int ctrd_task_pid(struct ctrd *c, const char *id, uint32_t *pid,
    struct k8s_error *err)
    __attribute__((warn_unused_result));

/*
 * The OCI Process of container id's spec (Containers.Get), as the
 * kubelet made it: user, env (the image's and the pod's), cwd,
 * capabilities, rlimits, noNewPrivileges. A new reference. What an exec
 * into the container runs with, args aside (as CRI's exec does).
 */
int ctrd_container_process(struct ctrd *c, const char *id, json_t **process,
    struct k8s_error *err)
    __attribute__((warn_unused_result));

/*
 * Any unary call: method is "/package.Service/Method", req the encoded
 * request message. The reply message is copied into *reply (caller frees
 * with buf_free); capped at CTRD_MSG_MAX. For callers with their own
 * messages (bench/cri_floor.c speaks CRI this way).
 */
int ctrd_call(struct ctrd *c, const char *method, struct buf *req,
    struct buf *reply, struct k8s_error *err)
    __attribute__((warn_unused_result));

enum ctrd_event_kind {
	CTRD_EV_OTHER,
	CTRD_EV_TASK_START,
	CTRD_EV_TASK_EXIT,
	CTRD_EV_TASK_OOM,
};

/* One event; every pointer is borrowed for the handler call only. */
struct ctrd_event {
	enum ctrd_event_kind	 kind;
	int64_t			 ts_ns;		/* when containerd published it */
	const char		*ns;		/* containerd namespace */
	const char		*topic;		/* e.g. "/tasks/exit" */
	const char		*container_id;	/* task events */
	/*
	 * exit: the process that exited; the container's own init process
	 * has the container's id, an exec'd one (kubectl exec) its exec id.
	 */
	const char		*exec_id;
	uint32_t		 pid;		/* start, exit */
	uint32_t		 exit_status;	/* exit */
	int64_t			 exited_ns;	/* exit */
};

/*
 * Subscribe to events matching any of filters (containerd's filter
 * syntax, e.g. "topic~=\"^/tasks/\""; NULL-terminated; NULL for all)
 * and call fn for each, in order, from this thread, until fn returns
 * non-zero (returned as is), *stop becomes non-zero (K8S_ECANCELED,
 * within about a second), or the stream fails. containerd says nothing
 * when a subscription starts: events published while it is being set up
 * may be missed, so a caller lists what it needs after subscribing.
 */
int ctrd_subscribe(struct ctrd *c, const char *const *filters,
    int (*fn)(void *arg, const struct ctrd_event *ev), void *arg,
    atomic_int *stop, struct k8s_error *err)
    __attribute__((warn_unused_result));

/*
 * Decoders, exposed for tests: one events.Envelope message into ev
 * (strings point into scratch, which must hold len + 4 bytes).
 * 0, or K8S_EINVAL when the message is malformed.
 */
int ctrd_decode_envelope(const void *msg, size_t len, struct ctrd_event *ev,
    char *scratch)
    __attribute__((warn_unused_result));

/*
 * The gRPC message framing over a byte stream: feed bytes as they come;
 * each complete message is handed to fn (borrowed). A message over
 * CTRD_MSG_MAX or a compressed one is K8S_ETOOBIG / K8S_EINVAL and the
 * framer stays failed.
 */
struct ctrd_framer {
	uint8_t		 hdr[5];
	size_t		 hdr_have;	/* bytes of hdr so far */
	size_t		 want;		/* the message's length, hdr full */
	size_t		 msg_have;	/* bytes of the message so far */
	uint8_t		*msg;		/* want bytes, while collecting */
	int		 failed;	/* the error it failed with, or 0 */
};

void ctrd_framer_init(struct ctrd_framer *f);
int ctrd_framer_feed(struct ctrd_framer *f, const void *p, size_t n,
    int (*fn)(void *arg, const uint8_t *msg, size_t len), void *arg)
    __attribute__((warn_unused_result));
void ctrd_framer_free(struct ctrd_framer *f);

#endif
