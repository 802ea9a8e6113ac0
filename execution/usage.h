/*
 * usage.h - what a pod's sandbox used, from the node's cgroups: peak
 * memory, CPU time, and the processes the OOM killer took (v1: the pod's
 * memory.oom_control and its containers', as v1 counts a kill only where
 * it happened; v2: the pod's memory.events, which counts its children's).
 * Under gVisor every process of the pod, and the gVisor kernel that runs
 * them, sits in the pod's cgroup, so these are the sandbox's figures: the
 * program's plus gVisor's own (tens of MiB, a few ms of CPU).
 *
 * The kubelet names the pod's cgroup after its QoS class and its cgroup
 * driver; usage_read looks for each form, under cgroup v1 (memory and
 * cpuacct hierarchies: memory.max_usage_in_bytes, cpuacct.usage) and v2
 * (memory.peak, cpu.stat usage_usec):
 *
 *   cgroupfs   ROOT/kubepods[/burstable|/besteffort]/pod<uid>
 *   systemd    ROOT/kubepods.slice[/kubepods-<qos>.slice]/
 *                  kubepods[-<qos>]-pod<uid with _ for ->.slice
 *
 * ROOT is the kubelet's cgroupRoot ("/" by default) under the mount
 * point (/sys/fs/cgroup).
 */
#ifndef AIRLOCK_USAGE_H
#define AIRLOCK_USAGE_H

#include <stdint.h>

struct usage {
	int64_t	peak_memory;	/* bytes; -1 if the node does not say */
	int64_t	cpu_ns;		/* user + system; -1 if the node does not say */
	int64_t	oom_kills;	/* processes the OOM killer took; -1 unknown */
};

/*
 * Read pod uid's usage. 0 if either figure was found, -1 if neither (no
 * such cgroup, or uid not a plain uid). mount and root may be NULL for the
 * defaults.
 */
int usage_read(const char *mount, const char *root, const char *uid,
    struct usage *u);

/*
 * The same for a cgroup whose directories are known (the CLI's local
 * runs make their own): v1, the memory and the cpuacct hierarchy's
 * directories; v2, the cgroup's directory twice. Either may be NULL.
 */
int usage_read_dirs(int v2, const char *mem_dir, const char *cpu_dir,
    struct usage *u);

/* A file of dir holding one decimal count (memory.failcnt), or -1. */
int64_t usage_read_count(const char *dir, const char *file);

#endif
