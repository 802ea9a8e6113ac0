/*
 * agent.h - the node agent: one per node, it watches the Airlock pods the
 * scheduler put on its node and, for each, the program they run:
 *
 *   - start: containerd's TaskStart event, nanosecond timestamp; the
 *     timeout (the pod's airlock.dev/timeout-ms) counts from there;
 *   - output: the container's CRI log file, tailed every poll_ms into a
 *     crilog (stdout and stderr apart, capped at airlock.dev/output-max-
 *     bytes per stream); past hard_cap bytes in all, the task is killed;
 *   - deadline: SIGKILL to the task through containerd, at the deadline;
 *   - exit: containerd's TaskExit event, with the status, at once (the
 *     kubelet would report it at its next relist, up to a second later);
 *     then the sandbox's peak memory and CPU time from the pod's cgroup.
 *
 * Then it writes the terminal result into the CodeExecution's status and,
 * once that is recorded, deletes the pod. The write is a JSON patch whose
 * first operations test that the phase is still Pending or Running and
 * that the conditions are where the controller put them: it lands at most
 * once, never over a phase the controller decided (Cancelled, or Failed
 * when the pod was lost), and needs no permission to read executions.
 * See node-agent/docs/agent.md.
 */
#ifndef AIRLOCK_AGENT_H
#define AIRLOCK_AGENT_H

#include <sys/types.h>

#include "client.h"
#include "crilog.h"
#include "metrics.h"

struct agent_opts {
	const char	*node_name;		/* required */
	const char	*pod_logs_dir;		/* default /var/log/pods */
	const char	*containerd_socket;	/* default /run/containerd/containerd.sock */
	const char	*containerd_ns;		/* default k8s.io */
	const char	*namespace;		/* NULL: all namespaces */
	long		 poll_ms;		/* default 20 */
	long long	 hard_cap;		/* bytes, both streams; default 16 MiB */
	const char	*cgroup_mount;		/* default /sys/fs/cgroup */
	const char	*cgroup_root;		/* the kubelet's cgroupRoot; default / */
	long		 sweep_ms;		/* orphan pods, stale logs; default 60000 */
	int		 keep_stale_logs;	/* pod logs mounted read-only */
	/*
	 * Where warm runs' FIFOs are made, a directory the task's shim sees
	 * at the same path (the host's); default /run/airlock/exec.
	 */
	const char	*exec_dir;
	/*
	 * runsc's binary and its --root (the shim's): when set, a warm run
	 * is started by `runsc exec` itself, not through containerd's
	 * Tasks.Exec and the shim (warm.c). NULL: containerd.
	 */
	const char	*runsc;
	const char	*runsc_root;
	/*
	 * The RuntimeClass of executions with egress (docs/network.md):
	 * their sandbox may have gVisor's own network stack (runsc
	 * --network=sandbox), never the host's. NULL (the default): none
	 * may. Off until egress ships: the class is read from the pod, which
	 * its creator wrote, and a pod forged under it (issue 27) must not
	 * be let through while no execution can have egress.
	 */
	const char	*network_class;
	/*
	 * The node's iptables (iptables, iptables-nft, iptables-legacy):
	 * with it, PATH-save and PATH-restore beside it, the agent meters
	 * executions with egress and stops one past its byte cap (meter.c).
	 * NULL: no metering, and their start gates never pass.
	 */
	const char	*iptables;
	/*
	 * Told each time readiness changes (node-agent/check.c): why it is
	 * not ready (a message naming what is wrong), or NULL once ready.
	 * From a worker thread; may be NULL.
	 */
	void		(*on_ready)(void *arg, const char *why);
	void		*on_ready_arg;
};

struct agent;

/* c and m are borrowed; opts' strings too. NULL on a missing node name. */
struct agent *agent_new(struct k8s_client *c, struct metrics *m,
    const struct agent_opts *opts);

/* Start its threads: 0, or K8S_EINVAL if already started. */
int agent_start(struct agent *a) __attribute__((warn_unused_result));

/*
 * For /readyz: the pod cache is synced, containerd answers, and the last
 * check of the configuration against the node passed (check.c: the pod
 * log directory is readable, and the running pods' containers and log
 * directories are where the agent was told). Not ready, the agent
 * records nothing and sweeps nothing. agent_not_ready_reason copies why
 * not into why (size bytes; "" when ready).
 */
int agent_ready(struct agent *a);
void agent_not_ready_reason(struct agent *a, char *why, size_t size);

void agent_stop(struct agent *a);

/*
 * Split a kubelet pod log directory's name, "<namespace>_<pod>_<uid>",
 * into bufs of size bytes, if the pod is an execution pod ("airlock-" and
 * a uid): 0, else -1. For the sweep of stale logs; exposed for tests.
 */
int agent_log_dir_name(const char *name, char *ns, char *pod, char *uid,
    size_t size);
void agent_free(struct agent *a);

/*
 * What an execution pod asks of the agent, from its labels, annotations
 * and owner, each clamped to what the CRD allows: the timeout (1 s to
 * 3600 s, in ms), the bytes kept per stream (1 to 1 MiB), the encoded
 * bytes the two streams may take in the status together (0 to 1 MiB; the
 * controller works it out from the execution's size), and the execution's
 * name and uid. A pod whose controller ownerReference is not the
 * CodeExecution (kind and airlock.dev API group, not the uid alone) its
 * label names is not an execution pod. 0, or -1 when pod is not one.
 * That is only what the pod says: the agent follows it once the execution
 * agrees (node-agent/trust.c). Borrowed strings. Exposed for tests.
 */
struct agent_limits {
	long long	 timeout_ms;
	size_t		 max_out;
	size_t		 budget;
	int		 stream;	/* airlock.dev/stream: "true" */
	int		 policy;	/* airlock.dev/policy: "true" */
	/* Files out (airlock.dev/out, execution/artifacts.h); 0 0: off. */
	size_t		 out_bytes, out_files;
	const char	*cx, *cx_uid;
};
int agent_pod_limits(json_t *pod, struct agent_limits *out);

/*
 * How many bytes of each stream's kept text (valid UTF-8) the status can
 * hold when both together may take budget bytes as the API server encodes
 * them (operator/jsonsize.h): all of both if they fit; else a stream that
 * needs less than half keeps all of it and the other the rest; else half
 * each. Cut between characters. Exposed for tests.
 */
/*
 * A container's CRI log followed across the kubelet's rotations (at
 * containerLogMaxSize, 10Mi by default, it renames 0.log and containerd
 * opens a new one): every call reads what was added, and when the name
 * holds a new file, drains the old one to its end before moving on, so
 * no byte is lost or counted twice. Start with fd -1. Returns the bytes
 * read. Exposed for tests.
 */
struct agent_logf {
	int	 fd;
	dev_t	 dev;
	ino_t	 ino;
	/*
	 * A file was opened at least once; else err is why the last open
	 * failed (errno). A run whose log never opened has no known output.
	 */
	int	 opened;
	int	 err;
};
size_t agent_follow_log(struct agent_logf *lf, const char *path,
    struct crilog *log);

/*
 * Whether a TaskExit is the container's own program ending, not a process
 * exec'd into it (kubectl exec), whose exit says nothing of the run's.
 */
struct ctrd_event;
int agent_exit_is_init(const struct ctrd_event *ev);

/*
 * Whether a task's process, by its /proc/PID/cmdline (len bytes, NUL
 * separated), is a gVisor sandbox with no network (runsc-sandbox with
 * --network=none): NULL, else why not. The agent stops a run whose
 * sandbox is not, at its TaskStart (IsolationFailed): a node whose runsc
 * lost its network=none setting must not run tenant code with a network.
 */
const char *agent_sandbox_check(const char *cmdline, size_t len);
/*
 * What agent_sandbox_check answers, the same pointer, for a sandbox with
 * gVisor's own network stack (--network=sandbox): refused unless the pod
 * is an execution's under the network RuntimeClass (agent_learn_pod).
 */
extern const char AGENT_NETSTACK[];
/*
 * The same check of the cmdline file at path (/proc/PID/cmdline). With
 * wait, an empty read is retried for up to 100 ms: a process in execve, as
 * a runc task is just after its start, shows no arguments for a moment.
 */
const char *agent_sandbox_read(const char *path, int wait);

/*
 * `runsc wait ID`'s output (len bytes, {"id":..., "exitStatus":N}): 0 and
 * N in *status if it names container cid and N is an exit status (0 to
 * 383: 128 + a signal at most), else -1.
 */
int agent_parse_wait(const char *out, size_t len, const char *cid,
    uint32_t *status);

/*
 * Live output (spec.output.stream): the ms after a run's n-th copy of its
 * output into the status before the next may go: 100 for the first 20,
 * then twice as long every 10 more, up to 5000. A long, chatty program
 * costs about one status write per 5 s.
 */
long long agent_flush_interval(int n);
/*
 * The node's allowance for those writes, shared by every run, in bytes the
 * API server stores (each copy rewrites the whole object): a bucket
 * refilled with AGENT_FLUSH_RATE bytes a second, holding AGENT_FLUSH_BURST
 * (one copy of the largest execution). 1 and cost taken (cost capped at
 * the burst), or 0 (the run tries again next tick). *tokens and *last_ms
 * are the bucket's state (start at 0 and 0: full at the first call).
 * A run copies at most AGENT_FLUSH_RUN_MAX bytes in all, and one copy is
 * in flight on a node at a time: results never queue behind many.
 */
#define AGENT_FLUSH_RATE	(256 * 1024)
#define AGENT_FLUSH_BURST	(1024 * 1024)
#define AGENT_FLUSH_RUN_MAX	(8LL << 20)
#define AGENT_FLUSH_INFLIGHT	1
int agent_flush_take(double *tokens, long long *last_ms, long long now_ms,
    double cost);

void agent_fit_output(const char *out, size_t olen, const char *err,
    size_t elen, size_t budget, size_t *okeep, size_t *ekeep);

#endif
