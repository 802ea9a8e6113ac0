/*
 * pool.h - CodeExecutionPool, the warm path's API side (docs/warm-path.md):
 * the holder pods a pool keeps, how an execution is matched to one, and
 * the claim that hands a holder one execution. Pure, as podspec.h is: the
 * controller makes the API calls, the node agent reads what the claim
 * wrote, and the unit tests check every field.
 *
 * A holder is an execution pod in every respect (podspec_build: gVisor, no
 * network, Pod Security "restricted", no token, the labels the deny-all
 * NetworkPolicy selects, requests equal to limits, counted by the quota)
 * but that it has no code, no activeDeadlineSeconds, its container runs
 * `run --hold` until claimed (`run --zygote` for a profile with preload:
 * POOL_ENV_PRELOAD below), and its owner is the pool.
 *
 * The claim is one merge patch of the holder, conditional on the
 * resourceVersion the controller read: the execution's uid label and name
 * annotation (the holder is now its execution pod: the agent's
 * agent_pod_limits and the controller's index find it), the code
 * annotations the cold path uses (airlock.dev/source, file-N, stdin), the
 * process to run (POOL_ANN_PROCESS), the limits, the execution as owner in
 * place of the pool, and activeDeadlineSeconds (which the API server lets
 * be set once on a running pod, and lowered, never raised).
 */
#ifndef AIRLOCK_POOL_H
#define AIRLOCK_POOL_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "ctl_config.h"
#include "k8s_error.h"

/* airlock.dev/v1alpha1 codeexecutionpools, namespaced. */
extern const struct k8s_resource pool_resource;

#define POOL_MAX_REPLICAS	64		/* the CRD's maximum */
#define POOL_LABEL_UID		"airlock.dev/pool-uid"
/* What a holder can run: runtime and resources, pool_key's form. */
#define POOL_ANN_KEY		"airlock.dev/warm-key"
/* After the claim: the argv after the runner and the spec's env, JSON. */
#define POOL_ANN_PROCESS	"airlock.dev/warm-process"
#define POOL_HOLDER_PREFIX	"airlock-warm-"
#define POOL_KEY_LEN		160

/*
 * The runner images' entrypoint, which a profile's command must start
 * with for a warm start, and their warm unpacker (images/runner/warm.c),
 * which the warm run execs in its place: `warm BYTES|- PROGRAM...`, the
 * first BYTES of stdin (all of it: -) the tar of the program and its
 * files.
 */
#define POOL_RUNNER		"/airlock/bin/run"
#define POOL_WARM		"/airlock/bin/warm"

/*
 * A holder of a profile with preload (ctl_config.h) runs `run --zygote`
 * in place of `run --hold`, with the modules in POOL_ENV_PRELOAD
 * (comma-separated) and the profile's warm-up in POOL_ENV_WARMUP (only
 * when it has one); the zygote makes POOL_ZYGOTE_SOCK once they are
 * imported, which the startup probe waits for. A failed import ends it
 * with a termination message that starts POOL_PRELOAD_FAILED
 * ("airlock: preload: MODULE: ExcType: message"), exit 3.
 */
#define POOL_ENV_PRELOAD	"AIRLOCK_PRELOAD"
#define POOL_ENV_WARMUP		"AIRLOCK_WARMUP"
#define POOL_ZYGOTE_SOCK	"/dev/shm/airlock-zygote.sock"
#define POOL_PRELOAD_FAILED	"airlock: preload:"

/*
 * The key of what a pool offers, or an execution needs:
 * "<runtime>/<cpu milli>/<memory bytes>/<ephemeral bytes>", the
 * resources after the config's defaults and checked against its caps.
 * spec is a pool's or an execution's spec (borrowed). 0, or K8S_EINVAL
 * naming the field (an unknown runtime, a bad or capped resource).
 */
int pool_key(const struct ctl_config *cfg, json_t *spec,
    char key[POOL_KEY_LEN], struct k8s_error *err)
    __attribute__((warn_unused_result));

/*
 * The limits (requests are the same) podspec_build gives an execution's or
 * a pool's spec (borrowed), after the config's defaults and caps: cpu in
 * milli-cores, memory in bytes. 0, or K8S_EINVAL naming the field.
 */
int pool_spec_resources(const struct ctl_config *cfg, json_t *spec,
    int64_t *cpu_milli, int64_t *mem, struct k8s_error *err)
    __attribute__((warn_unused_result));

/*
 * Lending (docs/warm-path.md, "Holders are lent"): holders hold capacity
 * on their node that an execution of any tenant may need more. When an
 * execution's pod is unschedulable for want of cpu or memory, the
 * controller takes back idle holders (of any pool) on one node, the
 * fewest that free what it needs, and holds their pools' refill until it
 * is scheduled or ended.
 */

/* The cpu (milli) and memory (bytes) in a pool_key. 0, or -1 malformed. */
int pool_key_resources(const char *key, int64_t *cpu_milli, int64_t *mem);

/*
 * Whether the scheduler's Unschedulable message msg (may be NULL) says a
 * node was short of cpu (*cpu = 1) or of memory (*mem = 1): the only
 * shortages holders can be the cause of (not a taint, a selector, a
 * volume). 1 when either.
 */
int pool_lend_short(const char *msg, int *cpu, int *mem);

/* An idle holder bound to a node, as pool_lend_pick weighs it. */
struct pool_lend_cand {
	const char	*node;		/* spec.nodeName; borrowed */
	int64_t		 cpu_milli, mem;	/* what it requests */
	int		 ready;		/* warm-up over: of use to a claim */
};
#define POOL_LEND_MAX_CANDS	4096	/* holders weighed at one take-back */

/*
 * Which of the n idle holders c to take back so that one node gets
 * need_cpu milli-cores and need_mem bytes (0: that resource was not
 * short): those of the node where the fewest cover it (greedily, the
 * largest share of what is left first, a not-ready holder before a
 * ready one), then where the fewest ready ones go, then the node first by
 * name. The node's own free room is not known here and counted as none.
 * Their indices into out (room for n), and their count; 0 when no node's
 * idle holders cover the need, or nothing is needed.
 */
size_t pool_lend_pick(const struct pool_lend_cand *c, size_t n,
    int64_t need_cpu, int64_t need_mem, size_t *out);

/*
 * A pool whose holders were taken back at since_ms (monotonic) does not
 * refill while waiting (an execution they were taken for is neither
 * scheduled nor ended), for at most POOL_LEND_HOLD_MAX_MS: else it took
 * the room back before the scheduler gave it. The ms until it is looked
 * at again (at most POOL_LEND_RECHECK_MS) while held; 0 refill now.
 */
#define POOL_LEND_HOLD_MAX_MS	600000
#define POOL_LEND_RECHECK_MS	1000
long long pool_lend_hold(int waiting, long long since_ms, long long now_ms);

/*
 * A holder pod for pool (borrowed, as the API server returned it): a new
 * reference with metadata.generateName POOL_HOLDER_PREFIX, or NULL with
 * err (K8S_EINVAL, for the pool's Ready condition) when the pool's
 * runtime or resources are refused.
 */
json_t *pool_holder(const struct ctl_config *cfg, json_t *pool,
    struct k8s_error *err);

/*
 * The egress of pool's holders (docs/network.md, "Warm"), when its
 * profile has egress entries (CIDRs only: pool_key refuses host entries):
 * in *np a new NetworkPolicy, named POOL_NETPOL_PREFIX and the pool's uid,
 * owned by the pool, that lets its holders (POOL_LABEL_UID) reach the
 * profile's whole list and the start gate g (podspec_egress_gate, its
 * ports from the pool's uid); and holder (a pool_holder pod, changed) gets
 * the gate's env. *np NULL and holder unchanged for a profile without
 * egress. 0, or K8S_EINVAL with err.
 */
#define POOL_NETPOL_PREFIX	"airlock-pool-"
/*
 * The holder is stamped (annotation POOL_ANN_EGRESS) with the first
 * POOL_STAMP_LEN hex digits of the SHA-256 of the policy's spec and the
 * profile's byte cap: what its gate passed under. A holder whose stamp
 * is not the pool's now (a new config's list or cap) is never claimed.
 */
#define POOL_ANN_EGRESS		"airlock.dev/egress-stamp"
#define POOL_STAMP_LEN		16
struct podspec_gate;
int pool_holder_egress(const struct ctl_config *cfg, json_t *pool,
    json_t *holder, const struct podspec_gate *g, json_t **np,
    struct k8s_error *err) __attribute__((warn_unused_result));

/*
 * The stamp the holders of pool (a profile with egress, its gate pods in
 * gate_ns) get now, into stamp; "" and K8S_EINVAL when no holder can be
 * built, "" and 0 for a profile without egress. No API call.
 */
int pool_egress_stamp(const struct ctl_config *cfg, json_t *pool,
    const char *gate_ns, char stamp[POOL_STAMP_LEN + 1],
    struct k8s_error *err);

/*
 * Whether the holder pod (borrowed, possibly trimmed by a cache) is idle,
 * i.e. not claimed and not being deleted, and ready: its container
 * running and ready (its startup probe passed: the warm-up is over).
 */
int pool_holder_idle(json_t *pod);
/* An unclaimed holder whose pod ended (Failed, Succeeded): replaced. */
int pool_holder_dead(json_t *pod);
int pool_holder_ready(json_t *pod);
/*
 * Whether a holder-shaped pod (a pool's or a session's) runs and its
 * warm-up is over (the startup probe passed), and it is not being deleted.
 */
int pool_sandbox_ready(json_t *pod);

/*
 * Whether the holder pod's (borrowed) container ended, now or before a
 * restart, with a termination message of a failed preload (it starts
 * POOL_PRELOAD_FAILED): 1, and the message into msg (size bytes, NUL
 * ended; size 0: not copied), trailing blanks cut, at most
 * POOL_PRELOAD_MSG_MAX bytes, newlines and tabs as spaces and any other
 * byte outside printable ASCII as '?'. 0 otherwise. Such a holder never
 * becomes ready: the controller deletes it and says why in an Event.
 */
#define POOL_PRELOAD_MSG_MAX	1024
int pool_holder_preload_failed(json_t *pod, char *msg, size_t size);

/*
 * A pool whose holders ended unused failures times in a row (none ready
 * between), the last at since_ms (monotonic), waits this many ms more
 * before it makes another: none after one (an eviction is replaced at
 * once), then POOL_FAIL_BACKOFF_MS doubling up to POOL_FAIL_BACKOFF_MAX_MS
 * (kubelet's CrashLoopBackOff cap), so that a holder that always fails
 * (a module the image lacks) is not made again in a loop. 0: make now.
 */
#define POOL_FAIL_BACKOFF_MS		2000
#define POOL_FAIL_BACKOFF_MAX_MS	300000
long long pool_fail_backoff(long long failures, long long since_ms,
    long long now_ms);

/*
 * Whether the execution cx (borrowed, as read afresh) can run warm at
 * all, whatever the pools: no custom image, not a session's step. The
 * code's size is the
 * claim's to judge (pool_claim_patch).
 */
int pool_cx_warmable(json_t *cx);

/*
 * The claim of holder (borrowed: its metadata.resourceVersion and
 * status.startTime are read) for cx (borrowed, read afresh). now_s is
 * the wall clock; stored, the execution's size as the API server stores
 * it, for the output budget (0: cx's own, when cx was read as stored). A
 * new merge patch, or NULL with err: K8S_ETOOBIG when
 * the code, args and env do not fit the annotation budget (the
 * execution then runs cold), K8S_EINVAL for what podspec_build refuses.
 */
json_t *pool_claim_patch(const struct ctl_config *cfg, json_t *cx,
    json_t *holder, long long now_s, size_t stored, struct k8s_error *err);

/*
 * The annotations that carry an execution's run into a sandbox already
 * running (a claim, a session's step): its files (the code annotations,
 * airlock.dev/source, file-N, stdin), the process (POOL_ANN_PROCESS, with
 * the members of extra, borrowed, added), its name and limits (CX_ANN_*)
 * and the files out's (ARTIFACTS_ANN). A new object, or NULL with err:
 * K8S_ETOOBIG past the annotation budget, K8S_EINVAL for what
 * podspec_build refuses.
 */
json_t *pool_run_annotations(const struct ctl_config *cfg, json_t *cx,
    size_t stored, json_t *extra, struct k8s_error *err);

/*
 * What the node agent runs in a claimed holder, read back from its
 * annotations (pod borrowed; the strings point into it): argv, the env
 * entries (name, value) to set over the container's, and the files in the
 * order of the tar, their contents, and stdin (NULL when none). 0, or -1
 * when the pod carries no well-formed claim; either way free *out with
 * pool_process_free.
 */
struct pool_file {
	const char	*path, *data;
	size_t		 len;
};
struct pool_process {
	json_t		*proc;		/* the parsed annotation, owned */
	json_t		*argv;		/* strings; borrowed */
	json_t		*env;		/* [{name, value}]; borrowed */
	struct pool_file files[66];	/* the program, 64 files, spare */
	size_t		 nfiles;
	const char	*stdin_data;
	size_t		 stdin_len;
};
int pool_process_read(json_t *pod, struct pool_process *out);
void pool_process_free(struct pool_process *p);

#endif
