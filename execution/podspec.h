/*
 * podspec.h - the objects the controller creates, built from a
 * CodeExecution and the operator's config. Pure: no API calls, so every
 * field is unit-tested, and tests/integration checks the apiserver admits
 * them (Pod Security "restricted" included).
 *
 * The pod contract (the runner images implement it; see
 * controller/docs/pod.md). A profile whose command starts with
 * /airlock/bin/run, with no custom image and code within
 * PODSPEC_ANNOTATION_BUDGET, gets a direct pod, with no volume:
 *   env            the tar of the program, spec.files and .stdin
 *                  (codetar.h), base64, in PODSPEC_TAR_ENV0, 1, ...
 *   command        /airlock/bin/warm --env CHUNKS, then the profile's
 *                  command past /airlock/bin/run, then spec.args; warm
 *                  unpacks into the working directory, drops the env
 *                  vars and becomes the program, .stdin as its stdin
 *   /tmp           gVisor's own tmpfs, the working directory and HOME
 * Any other gets the volumes:
 *   /airlock/code  read-only: the program (profile's sourceFile), spec.files
 *                  at their paths, and .stdin when spec.stdin is set
 *   /airlock/work  writable emptyDir, the working directory
 *   /tmp           writable emptyDir
 * and the profile's command, then spec.args.
 *
 * Code reaches a volume pod without an extra API call when it fits in
 * annotations (a downward-API volume projects them as files); past
 * PODSPEC_ANNOTATION_BUDGET bytes it goes in a ConfigMap owned by the
 * CodeExecution, which costs one more request.
 */
#ifndef AIRLOCK_PODSPEC_H
#define AIRLOCK_PODSPEC_H

#include <stdint.h>

#include <jansson.h>

#include "ctl_config.h"
#include "cx.h"
#include "k8s_error.h"

/* Annotations are capped at 256 KiB per object; leave room for others. */
#define PODSPEC_ANNOTATION_BUDGET	(192 * 1024)
/* A direct pod's code: env var names, and the most bytes in each. */
#define PODSPEC_TAR_ENV			"AIRLOCK_TAR_"
#define PODSPEC_TAR_CHUNK		(64 * 1024)
#define PODSPEC_MAX_FILES		64	/* the CRD's spec.files maxItems */

struct podspec_result {
	json_t	*pod;		/* always, on success */
	json_t	*configmap;	/* when the code does not fit annotations */
	json_t	*netpol;	/* its egress NetworkPolicy, when its list is not empty */
	struct ctl_egress *egress;	/* that list (spec.network narrows the profile's) */
	size_t	 negress;
	int	 hosts;		/* whether it has host entries: the proxy's */
	char	 code_sha256[65];	/* of the program text (spec.source) */
};

/*
 * Build the pod (and maybe ConfigMap) for the CodeExecution cx (borrowed;
 * as the API server returned it, defaults applied). The pod is named
 * "airlock-<uid>", so a controller that restarts mid-way finds its pod
 * instead of making a second one. On success the caller owns the json_t
 * references in *out. K8S_EINVAL, with a message for the tenant, when
 * the execution must be Rejected: unknown runtime profile, a custom image
 * the config does not allow, resources above the config's caps, or a
 * spec.network that is not a narrowing of its profile's egress
 * (egress_effective()). The pod's RuntimeClass and the NetworkPolicy
 * (netpol) follow the execution's list, not the profile's: egress: []
 * gives the plain class and no policy. A pod with egress carries its
 * profile's byte cap in the annotation CX_ANN_EGRESS_BYTES.
 */
int podspec_build(const struct ctl_config *cfg, json_t *cx,
    struct podspec_result *out, struct k8s_error *err)
    __attribute__((warn_unused_result));

/*
 * The same for a cx whose size as stored (the output budget's) is size,
 * as a cache that keeps the object without its managedFields knows it;
 * 0: cx as it is.
 */
int podspec_build_sized(const struct ctl_config *cfg, json_t *cx,
    size_t size, struct podspec_result *out, struct k8s_error *err)
    __attribute__((warn_unused_result));

void podspec_result_free(struct podspec_result *r);

/*
 * The start gate (docs/network.md): an execution with egress holds its
 * program until its NetworkPolicy is seen in force, by the gate pods in
 * the controller's namespace (label PODSPEC_GATE_LABEL=
 * PODSPEC_GATE_COMPONENT), which listen on every port of the range
 * PODSPEC_GATE_OPEN_BASE + [0, PODSPEC_GATE_OPEN_PORTS), of which its
 * policy allows three picked by its uid (podspec_gate_ports), and on
 * PODSPEC_GATE_CLOSED, which it never does; for at most
 * PODSPEC_GATE_SECONDS, after which the program never runs. Two ports of
 * its own, P and Q, that must connect: a policy left on the node for an
 * earlier pod at the same address (kube-router matches by address until
 * its next sync) allows other ones, but for 1 in 8128 pairs. The third,
 * M, the metered port, must be refused with a reset: the node agent's
 * chain for the pod (docs/network.md, "The byte cap") rejects the pod's
 * connects to port M, ahead of its byte quota, so M refused while P and
 * Q connect shows the quota in place. M is never P or Q.
 */
#define PODSPEC_GATE_LABEL	"app.kubernetes.io/component"
#define PODSPEC_GATE_COMPONENT	"egress-gate"
#define PODSPEC_GATE_OPEN_BASE	8200
#define PODSPEC_GATE_OPEN_PORTS	128
#define PODSPEC_GATE_CLOSED	8182
#define PODSPEC_GATE_NPORTS	3	/* P, Q, M */
#define PODSPEC_GATE_SECONDS	30
#define PODSPEC_GATE_ENV	"AIRLOCK_EGRESS_GATE"
#define PODSPEC_GATE_ADDR	16	/* an IPv4 address's text and NUL */
#define PODSPEC_GATE_MAX	8	/* addresses handed to one pod */
/*
 * The egress proxy (docs/network.md, "Host entries") runs in the gate
 * pods: an execution with host entries has it in HTTP(S)_PROXY, with its
 * pass (egress_token.h) as the URL's user and password. The pass expires
 * PODSPEC_PASS_SLACK seconds after the pod's own deadline
 * (activeDeadlineSeconds, which counts from its start): room for the
 * pod to be scheduled and started.
 */
#define PODSPEC_PROXY_PORT	3128
#define PODSPEC_PASS_SLACK	600

/*
 * The gate ports of execution uid, all three in the range and different:
 * ports[0] and ports[1] its open ones, P and Q, and ports[2] its metered
 * one, M; each from a 16-bit word of the SHA-256 of uid (the first three)
 * mod PODSPEC_GATE_OPEN_PORTS, Q one up when it falls on P, M one up
 * (again) while it falls on P or Q. The node agent, which knows the
 * execution's uid from its pod's label, computes the same M for its
 * reject rule. An earlier pod's M at the same address is this one's for
 * about 1 uid in 128 (the agent removes a pod's chain when it ends).
 */
void podspec_gate_ports(const char *uid, int ports[PODSPEC_GATE_NPORTS]);

struct podspec_gate {
	const char	*ns;	/* the gate pods' namespace */
	char		 addrs[PODSPEC_GATE_MAX][PODSPEC_GATE_ADDR];
	size_t		 n;	/* at least one */
	const unsigned char *key;	/* the proxy's key, for host entries */
	size_t		 keylen;
	long long	 now;	/* Unix seconds: the pass's expiry counts from it */
	/*
	 * The uid the gate ports are from: NULL, the pod's execution's (its
	 * CX_LABEL_UID); a pool's holders, the pool's (POOL_LABEL_UID), which
	 * the node agent reads from the holder's label alike.
	 */
	const char	*id;
};

/*
 * Give r (a podspec_build result with egress: r->netpol set) its gate:
 * the pod's env PODSPEC_GATE_ENV, "P,Q M CLOSED SECONDS ADDR..." (P, Q,
 * M its podspec_gate_ports; the words are gate --wait's arguments, which
 * images/runner/gate.c describes), set last so that it wins over a
 * spec.env of that name, and the policy's rule to the gate pods' P, Q
 * and M (M allowed: a refusal there is the agent's rule alone). With host entries (r->hosts), the proxy too:
 * http://PASS@ADDR:PODSPEC_PROXY_PORT, ADDR one of g's addresses (by the
 * execution's uid), in HTTP_PROXY, HTTPS_PROXY and their lowercase forms,
 * the CIDR entries in NO_PROXY, and the policy's rule to the proxy's
 * port. 0, or K8S_EINVAL when r has no policy, g no address, or (with
 * host entries) no key.
 */
int podspec_egress_gate(struct podspec_result *r, const struct podspec_gate *g,
    struct k8s_error *err) __attribute__((warn_unused_result));

/*
 * What the CRD cannot see: a file of spec (borrowed) at, or under, the
 * profile's source file or the stdin file (.stdin, set or not), an env
 * name with the prefix PODSPEC_TAR_ENV or AIRLOCK_OUT, and where the
 * profile p has a code policy, the variables that change how its guard's
 * interpreter starts (BASH_ENV, POSIXLY_CORRECT, LD_*, PYTHON*, ...). 0, or K8S_EINVAL naming the
 * field (podspec_build's, and a warm claim's, refusal).
 */
int podspec_check_reserved(json_t *spec, const struct ctl_profile *p,
    struct k8s_error *err) __attribute__((warn_unused_result));

/* The SHA-256 of spec.source in hex ("" source when absent). */
void podspec_code_sha256(json_t *cx, char out[65]);

/*
 * The execution an execution pod runs: its name (the CX_ANN_NAME
 * annotation), and in *uid (when not NULL) its uid (the CX_LABEL_UID
 * label); each NULL where absent. Borrowed from pod.
 */
const char *podspec_pod_execution(json_t *pod, const char **uid);

/*
 * Whether obj's controller owner reference (Kubernetes allows one) is an
 * airlock.dev object of this kind and uid: a uid alone is not enough, a
 * ReplicaSet's pods carry their ReplicaSet's, which a tenant can copy
 * into a label (issue 27).
 */
int podspec_controlled_by(json_t *obj, const char *kind, const char *uid);

/* The pod's name for an execution uid: "airlock-<uid>". Caller frees. */
char *podspec_pod_name(const char *uid);

/*
 * The namespace guardrails. NetworkPolicy "airlock-deny-all": no ingress,
 * no egress (DNS included) for execution pods. ResourceQuota
 * "airlock-executions": scoped by PriorityClass to execution pods only,
 * capping how many run at once and their cpu and memory; the config's
 * quota unless the Namespace (borrowed, may be NULL) carries the
 * annotations airlock.dev/quota-executions, -cpu, -memory, which a cluster
 * admin sets. A bad annotation is ignored and described in *warning
 * (caller frees; NULL when none). New references.
 */
json_t *podspec_network_policy(const char *ns);

/* The most a quota annotation may say; past it, it is clamped to this. */
#define PODSPEC_QUOTA_MAX_EXECUTIONS	INT64_C(1000000)
#define PODSPEC_QUOTA_MAX_CPU_MILLI	INT64_C(100000000)	/* 100k cores */
#define PODSPEC_QUOTA_MAX_MEMORY	(INT64_C(1) << 50)	/* 1Pi */

/*
 * ServiceAccount "airlock-execution": what execution pods run as instead
 * of the namespace's "default", which the tenant may have bound to roles.
 * It has no bindings and no token is mounted. A new reference.
 */
#define PODSPEC_SERVICE_ACCOUNT	"airlock-execution"
json_t *podspec_service_account(const char *ns);
json_t *podspec_resource_quota(const struct ctl_config *cfg, const char *ns,
    json_t *namespace_obj, char **warning);

/*
 * ResourceQuota "airlock-stored": how many CodeExecutions the namespace
 * may hold, running or finished until their TTL
 * (count/codeexecutions.airlock.dev, the config's quota.storedExecutions),
 * so that no tenant grows the controller's caches or lists without bound.
 * CodeExecutionPools too (count/codeexecutionpools.airlock.dev, the
 * config's quota.storedPools): each costs the controller a cache entry
 * and a reconcile, whatever its replicas. CodeSessions too
 * (count/codesessions.airlock.dev, quota.storedSessions).
 * Not scoped: an object count has no PriorityClass. A cluster admin
 * overrides it per namespace with the annotation below; a bad one is
 * ignored and described in *warning (caller frees). A new reference.
 */
#define PODSPEC_QUOTA_STORED		"airlock-stored"
#define PODSPEC_ANN_QUOTA_STORED	"airlock.dev/quota-stored-executions"
json_t *podspec_object_quota(const struct ctl_config *cfg, const char *ns,
    json_t *namespace_obj, char **warning);

#endif
