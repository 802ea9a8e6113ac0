/*
 * ctl_config.h - the operator's config file: runtime profiles, defaults and
 * caps. Read at start-up (YAML); tenants never see or set it.
 *
 *   runtimeClassName: gvisor        # pods run under this RuntimeClass
 *   networkRuntimeClassName: gvisor-net   # those of a profile with egress
 *   allowCustomImages: false        # may spec.image override a profile?
 *   runAsUser: 65532                # the fixed unprivileged uid
 *   tmpSizeLimit: 64Mi              # emptyDir for /tmp and the work dir
 *   priorityClassName: airlock-execution   # scopes the ResourceQuota
 *   profiles:
 *     python:
 *       image: airlock/runner-python:0.1
 *       command: [python3, main.py]         # run in the work dir
 *       sourceFile: main.py                 # where spec.source goes
 *     python-data:                          # preload: [/airlock/bin/run, python3, ...]
 *       image: airlock/runner-python-data:0.1
 *       command: [/airlock/bin/run, python3, main.py]
 *       sourceFile: main.py
 *       preload: [numpy, pandas]            # a holder's zygote imports these
 *       warmup: "import numpy"              # then runs this, once
 *     python-net:
 *       ...
 *       network:                            # docs/network.md; none: no network
 *         egress: [{cidr: 10.20.0.0/16, ports: [5432]}]
 *         egressBytes: 64Mi                 # per execution, both ways; 1Gi
 *   defaults: {cpu: 500m, memory: 256Mi, ephemeralStorage: 64Mi}
 *   caps:     {cpu: "2",  memory: 2Gi,   ephemeralStorage: 1Gi}
 *   quota:    {executions: 20, cpu: "8", memory: 8Gi, storedExecutions: 1000,
 *             storedPools: 10, storedSessions: 20}
 *
 * Quantities are kept both as the text (for the objects we write) and
 * parsed (for comparisons): cpu in millicores, the rest in bytes.
 */
#ifndef AIRLOCK_CTL_CONFIG_H
#define AIRLOCK_CTL_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "k8s_error.h"

/*
 * A profile's code policy (README: security model): checked inside the
 * sandbox by the runner image's guard, which the profile's command runs
 * in front of the program (ctl_config.c: walk_policy).
 */
enum ctl_policy {
	CTL_POLICY_NONE,
	CTL_POLICY_DENY_IMPORTS,	/* Python: images/runner/policy.py */
	CTL_POLICY_ALLOW_COMMANDS,	/* bash: images/runner/policy.sh */
};
#define PROFILE_RUNNER		"/airlock/bin/run"
#define PROFILE_POLICY_PY	"/airlock/bin/policy.py"
#define PROFILE_POLICY_SH	"/airlock/bin/policy.sh"

/*
 * network.egress (docs/network.md): where a profile's executions may
 * connect, over TCP. Each entry either an IPv4 CIDR (canonical: no host
 * bits), which the execution's NetworkPolicy allows, or a host name,
 * which only the egress proxy reaches (host set, cidr NULL); and its
 * ports.
 */
#define CTL_EGRESS_MAX		32
#define CTL_EGRESS_PORTS_MAX	16
#define CTL_EGRESS_HOST_MAX	253	/* a DNS name's longest text form */
/*
 * network.egressBytes (docs/network.md, "The byte cap"): the bytes an
 * execution's pod may move, both ways together, before the node agent's
 * quota ends its connections. A quantity, only beside egress entries;
 * CTL_EGRESS_BYTES_DEFAULT when not given; at most CTL_EGRESS_BYTES_MAX.
 */
#define CTL_EGRESS_BYTES_DEFAULT	(INT64_C(1) << 30)	/* 1Gi */
#define CTL_EGRESS_BYTES_MAX		(INT64_C(1) << 40)	/* 1Ti */
struct ctl_egress {
	char		*host;		/* lowercase, no trailing dot; or NULL */
	char		*cidr;		/* "a.b.c.d/n", as given; NULL for a host */
	uint32_t	 addr;		/* the network, host byte order */
	int		 prefix;	/* 0 to 32 */
	int		 ports[CTL_EGRESS_PORTS_MAX];	/* 1 to 65535, none twice */
	size_t		 nports;	/* at least one */
};

struct ctl_profile {
	char	 *name;		/* the map key: spec.runtime */
	char	 *image;
	char	**command;	/* NULL-terminated argv, the policy's guard in */
	char	 *source_file;	/* relative path, no '..' */
	enum ctl_policy policy;
	/*
	 * preload: the Python modules a holder's zygote imports before it
	 * counts as ready, comma-joined (each a dotted name of at most 100
	 * bytes, at most 32, none twice), or NULL: none. warmup: Python run
	 * once after them (at most 4 KiB), or NULL; never without preload.
	 * Both only for a profile [PROFILE_RUNNER, python3|python, ...].
	 */
	char	*preload;
	char	*warmup;
	/* network.egress: none (NULL, 0) is no network at all. */
	struct ctl_egress	*egress;
	size_t			 negress;
	/* network.egressBytes: 0 without egress, else 1 to CTL_EGRESS_BYTES_MAX. */
	int64_t			 egress_bytes;
};

struct ctl_resources {
	char	*cpu;		/* text as configured, e.g. "500m" */
	char	*memory;
	char	*ephemeral_storage;
	int64_t	 cpu_milli;
	int64_t	 memory_bytes;
	int64_t	 ephemeral_bytes;
};

struct ctl_config {
	char			*runtime_class;		/* default "gvisor" */
	/* Pods of a profile with egress: gVisor's own network stack. */
	char			*network_runtime_class;	/* default "gvisor-net" */
	int			 allow_custom_images;	/* default 0 */
	int64_t			 run_as_user;		/* default 65532; > 0 */
	char			*tmp_size_limit;	/* default "64Mi" */
	int64_t			 tmp_size_bytes;
	char			*priority_class;	/* default "airlock-execution" */
	struct ctl_profile	*profiles;
	size_t			 nprofiles;		/* at least one */
	struct ctl_resources	 defaults;		/* default 500m/256Mi/64Mi */
	struct ctl_resources	 caps;			/* default 2/2Gi/1Gi; >= defaults */
	int64_t			 quota_executions;	/* default 20 */
	/*
	 * quota.storedExecutions: how many CodeExecutions a namespace may
	 * hold, running or finished (until their TTL), by an object-count
	 * quota; default 1000.
	 */
	int64_t			 quota_stored;
	/*
	 * quota.storedPools: how many CodeExecutionPools a namespace may
	 * hold, by the same quota; default 10. Each is a cache entry and a
	 * reconcile in the controller, whatever its replicas.
	 */
	int64_t			 quota_pools;
	/*
	 * quota.storedSessions: how many CodeSessions a namespace may hold,
	 * by the same quota; default 20. Each is a cache entry and, while it
	 * lives, a sandbox (counted by the pods quota too).
	 */
	int64_t			 quota_sessions;
	struct ctl_resources	 quota;			/* cpu/memory; default 8/8Gi; ephemeral unused */
	/* Files out's budget per execution (artifacts.h); files 0: off. */
	int64_t			 artifacts_bytes;	/* default 1 MiB, at most 1 MiB */
	int64_t			 artifacts_files;	/* default 64, at most 256 */
};

/*
 * Load the config at path. Missing keys take the defaults above; unknown
 * keys are refused (a typo must not silently weaken isolation). *out is
 * new; free with ctl_config_free(). K8S_EINVAL with the field path for
 * malformed YAML, a bad quantity, a profile without image/command/
 * sourceFile, an unsafe sourceFile, a bad preload or warmup, no profiles,
 * or defaults above caps;
 * K8S_ETOOBIG for a file over 1 MiB.
 */
int ctl_config_load(const char *path, struct ctl_config **out,
    struct k8s_error *err) __attribute__((warn_unused_result));

/* The same from memory (tests); name labels messages. */
int ctl_config_parse(const char *data, size_t len, const char *name,
    struct ctl_config **out, struct k8s_error *err)
    __attribute__((warn_unused_result));

/* The profile for spec.runtime, or NULL. Borrowed. */
const struct ctl_profile *ctl_config_profile(const struct ctl_config *c,
    const char *name);

void ctl_config_free(struct ctl_config *c);

#endif
