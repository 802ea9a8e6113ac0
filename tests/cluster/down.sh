#!/usr/bin/env bash
# Stop the test control plane started by up.sh and remove <repo>/.cluster.
# Idempotent: exits 0 when nothing is up.
#
# usage: down.sh               (make cluster-down)
#        down.sh --stop-only   stop the processes, keep .cluster (up.sh uses
#                              this on a failed start so the logs survive)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cluster=$root/.cluster
STOP_TIMEOUT=10

die() { echo "down.sh: $*" >&2; exit 1; }

stop_only=false
case ${1-} in
--stop-only) stop_only=true ;;
"") ;;
*) die "unknown argument '$1'" ;;
esac

# Same lock as up.sh, unless up.sh (holding it) called us.
if [ -z "${AIRLOCK_CLUSTER_LOCK_HELD-}" ]; then
	exec 9<"$here"
	flock 9
fi

[ -e "$cluster" ] || { echo "down.sh: nothing to stop"; exit 0; }

# our_pid PIDFILE: print the pid if it is alive and really ours: a recycled
# pid never mentions our state directory on its command line.
our_pid() {
	local pid
	pid=$(cat "$1" 2>/dev/null) || return 1
	[[ $pid =~ ^[0-9]+$ ]] || return 1
	tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -qF "$cluster/" || return 1
	echo "$pid"
}

alive() { kill -0 "$1" 2>/dev/null; }

# stop PIDFILE...: TERM them all at once, up to STOP_TIMEOUT s to exit,
# then KILL.
stop() {
	local f pid pids=() names=() i
	for f; do
		pid=$(our_pid "$f") || continue
		kill -TERM "$pid" 2>/dev/null || continue
		pids+=("$pid")
		names+=("$(basename "$f" .pid)")
	done
	local deadline=$((SECONDS + STOP_TIMEOUT))
	for i in "${!pids[@]}"; do
		while alive "${pids[$i]}" && ((SECONDS < deadline)); do sleep 0.1; done
		alive "${pids[$i]}" || continue
		echo "down.sh: ${names[$i]} (${pids[$i]}) still running after $STOP_TIMEOUT s, killing it" >&2
		kill -KILL "${pids[$i]}" 2>/dev/null || true
		for _ in $(seq 50); do alive "${pids[$i]}" || break; sleep 0.1; done
		alive "${pids[$i]}" && die "${names[$i]} (${pids[$i]}) survived SIGKILL"
	done
	return 0
}

# One at a time. The node (node-down.sh) first, while the apiserver is still
# there for the kubelet to say goodbye to; then the apiserver: with etcd gone
# it spends minutes retrying etcd instead of shutting down.
stop_all() {
	local f
	if $with_node; then node_stop; fi
	stop "$cluster/kube-apiserver.pid"
	for f in "$cluster"/*.pid; do
		[ -e "$f" ] && stop "$f"
	done
	return 0
}

# Processes we did not record that name the cluster (a daemon a test
# started with its kubeconfig and left, a ctr): ours, killed. One that
# survives fails the tear-down, which keeps .cluster for the next try.
kill_strays() {
	local strays
	strays=$(procs_naming "$cluster")
	[ -z "$strays" ] && return 0
	# shellcheck disable=SC2086
	echo "down.sh: killing processes that still name $cluster: $(procs_describe $strays)" >&2
	# shellcheck disable=SC2086
	procs_kill down.sh $strays || die "processes of the cluster are left"
}

# The node's kubelet and containerd mount volumes, root filesystems and shm
# under .cluster; never rm -rf through a mount point.
unmount_all() {
	local m
	findmnt -rn -o TARGET | { grep -F "$cluster/" || true; } | sort -r |
		while read -r m; do
			umount "$m" || umount -l "$m" || die "cannot unmount $m"
		done
}

# shellcheck source=procs.sh
. "$here/procs.sh"
with_node=false
if [ -d "$cluster/node" ]; then
	with_node=true
	# shellcheck source=node-down.sh
	. "$here/node-down.sh"
fi

stop_all
kill_strays
# A stopped node leaves mounts, a bridge, cgroups and netns behind: clear
# them even when keeping .cluster for its logs.
unmount_all
if $with_node; then node_clean; fi
$stop_only && { echo "down.sh: processes stopped; $cluster kept"; exit 0; }
rm -rf --one-file-system "$cluster"
echo "down.sh: cluster stopped and $cluster removed"
