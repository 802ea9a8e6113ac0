# shellcheck shell=bash
# Tear-down of the test node (node.sh). Sourced by down.sh when
# .cluster/node exists; uses its helpers (stop, die, alive).
#
# The order matters: the kubelet first (or it restarts what we stop), then
# every pod through containerd while it still runs (the shims unmount the
# root filesystems and runsc deletes its sandboxes), then containerd, then
# whatever the components made outside .cluster: network namespaces, the
# bridge and its veths, cgroups, the kubelet's symlinks in /var/log/containers.

node=$cluster/node
PSUF=

# node_each FN: FN once per node the cluster had (.cluster/node is node 1,
# .cluster/node-I node I; node.sh's node_select), with node, PSUF and the
# node's ids set.
node_each() {
	local d
	for d in "$cluster/node" "$cluster"/node-[0-9]*; do
		[ -d "$d" ] || continue
		node=$d PSUF=
		[ "$d" = "$cluster/node" ] || PSUF=-${d##*/node-}
		BRIDGE= CNI_NETWORK= CGROUP_ROOT=
		node_load_ids
		"$1"
	done
	node=$cluster/node PSUF=
}

node_load_ids() {
	# shellcheck disable=SC1091
	[ -f "$node/ids" ] && . "$node/ids"
	return 0
}

nctr() { timeout 20 ctr --address "$node/containerd/containerd.sock" -n k8s.io "$@"; }

# node_kill_pods: stop and delete every container and sandbox of the node,
# remembering their network namespaces (containerd 1.6 keeps them in
# /var/run/netns, outside .cluster) to remove afterwards.
node_kill_pods() {
	local ids id
	[ -S "$node/containerd/containerd.sock" ] || return 0
	ids=$(nctr containers ls -q 2>/dev/null) || return 0
	printf '%s\n' $ids >>"$node/container-ids"
	for id in $ids; do
		nctr containers info "$id" 2>/dev/null |
			grep -o '"/var/run/netns/[^"]*"\|"/run/netns/[^"]*"' | tr -d '"' >>"$node/netns" || true
	done
	for id in $ids; do
		nctr tasks kill -s SIGKILL "$id" >/dev/null 2>&1 || true
	done
	for id in $ids; do
		nctr tasks delete -f "$id" >/dev/null 2>&1 || true
		nctr containers delete "$id" >/dev/null 2>&1 || true
	done
	return 0
}

# node_kill_strays [DIR] [SIGNALS]: shims and runsc sandboxes and gofers
# outlive containerd by design. Each names .cluster on its command line (the
# containerd socket, runsc's --root), so they are ours: TERM, then KILL.
# With DIR, only those naming DIR/ (one node's).
node_kill_strays() {
	local p pids=() sig where=${1:-$cluster}
	for sig in ${2:-TERM KILL}; do
		pids=()
		for p in /proc/[0-9]*; do
			[ "${p#/proc/}" = $$ ] && continue
			tr '\0' ' ' 2>/dev/null <"$p/cmdline" | grep -qF "$where/" || continue
			tr '\0' ' ' 2>/dev/null <"$p/cmdline" | grep -qE 'containerd-shim|runsc' || continue
			pids+=("${p#/proc/}")
		done
		[ ${#pids[@]} -eq 0 ] && return 0
		kill -"$sig" "${pids[@]}" 2>/dev/null || true
		for _ in $(seq 50); do
			local left=0
			for p in "${pids[@]}"; do alive "$p" && left=1; done
			[ $left = 0 ] && break
			sleep 0.1
		done
	done
	return 0
}

# runsc keeps container state (and cgroups) in its root; a sandbox killed
# from outside leaves it there. delete --force clears it.
node_runsc_cleanup() {
	local runsc id
	runsc=$(cat "$node/runsc-binary" 2>/dev/null) || return 0
	[ -x "$runsc" ] && [ -d "$node/runsc/k8s.io" ] || return 0
	for id in $("$runsc" --root "$node/runsc/k8s.io" list -quiet 2>/dev/null); do
		timeout 20 "$runsc" --root "$node/runsc/k8s.io" delete --force "$id" >/dev/null 2>&1 || true
	done
}

# node_bundle_netns: the ids and network namespaces of the tasks containerd
# started, from their OCI bundles, which outlive a dead containerd; so they
# are found even when node_kill_pods cannot ask it.
node_bundle_netns() {
	local b=$node/containerd/state/io.containerd.runtime.v2.task/k8s.io d
	[ -d "$b" ] || return 0
	for d in "$b"/*/; do
		[ -d "$d" ] && basename "$d" >>"$node/container-ids"
	done
	cat "$b"/*/config.json 2>/dev/null |
		grep -o '"/var/run/netns/[^"]*"\|"/run/netns/[^"]*"' | tr -d '"' >>"$node/netns" || true
}

# node_stop: everything of the nodes' that runs. Before the apiserver stops.
# The kubelets first, all of them, or one restarts what we stop.
node_stop() {
	node_each node_bundle_netns
	stop "$cluster"/kubelet.pid "$cluster"/kubelet-[0-9]*.pid "$cluster/kube-scheduler.pid" \
		"$cluster/kube-controller-manager.pid" "$cluster/kube-router.pid"
	node_each node_stop_one
	node_kill_strays
	node_each node_runsc_cleanup
	node_each node_kill_cgroup
}

# node_kill_cgroup: whatever still runs in the node's pods' cgroups (a
# runc container outlives its shim: the chart's controller and agent
# did, holding their ports for the next cluster). Fails loudly.
node_kill_cgroup() {
	local pids
	pids=$(procs_in_cgroup "${CGROUP_ROOT-}")
	[ -z "$pids" ] && return 0
	echo "down.sh: killing what still runs in ${CGROUP_ROOT}'s pods: $(procs_describe $pids)" >&2
	# shellcheck disable=SC2086
	procs_kill "down.sh: ${CGROUP_ROOT}" $pids || die "processes of ${node##*/} are left"
}

node_stop_one() {
	node_kill_pods
	stop "$cluster/containerd$PSUF.pid"
}

node_rm_netns() {
	local ns
	[ -f "$node/netns" ] || return 0
	sort -u "$node/netns" | while read -r ns; do
		[ -e "$ns" ] || continue
		umount "$ns" 2>/dev/null || umount -l "$ns" 2>/dev/null || true
		rm -f "$ns"
	done
}

node_rm_links() {
	local l
	[ -n "${BRIDGE-}" ] || return 0
	# A veth whose netns is gone is gone too; any left on our bridge goes.
	for l in $(ip -o link show master "$BRIDGE" 2>/dev/null | awk -F': ' '{ sub(/@.*/, "", $2); print $2 }'); do
		ip link delete "$l" 2>/dev/null || true
	done
	if ip link show "$BRIDGE" >/dev/null 2>&1; then
		ip link delete "$BRIDGE" || die "cannot delete bridge $BRIDGE"
	fi
}

node_rm_cgroups() {
	local h d
	[ -n "${CGROUP_ROOT-}" ] || return 0
	for h in /sys/fs/cgroup/*/; do
		d=${h%/}$CGROUP_ROOT
		[ -d "$d" ] || continue
		# Deepest first; a cgroup whose last process just died may need a
		# moment before rmdir succeeds.
		for _ in $(seq 20); do
			find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null
			[ -d "$d" ] || break
			sleep 0.1
		done
		[ -d "$d" ] && echo "down.sh: warning: cannot remove cgroup $d" >&2
	done
	return 0
}

node_rm_host_files() {
	local d
	# The kubelet's /var/log/containers/*.log symlinks into our pod logs.
	[ -d /var/log/containers ] &&
		find /var/log/containers -maxdepth 1 -type l -lname "$node/*" -delete
	# libcni's result cache (containerd 1.6 does not move it), one file per
	# network (ours and containerd's own loopback) per sandbox still set up.
	[ -n "${CNI_NETWORK-}" ] && rm -f /var/lib/cni/results/"$CNI_NETWORK"-*
	if [ -f "$node/container-ids" ]; then
		while read -r d; do
			[ -n "$d" ] && rm -f /var/lib/cni/results/*-"$d"-*
		done <"$node/container-ids"
	fi
	return 0
}

# kube-router's iptables chains and ipsets are the host's. Its own
# --cleanup-config cannot be used: it says it cleaned the policy chains and
# leaves them, then panics in the service proxy's cleanup (no IPVS here).
# Removed by name instead, once it has stopped: the jumps from the built-in
# chains, then its chains (KUBE-ROUTER-*, KUBE-NWPLCY-*, KUBE-POD-FW-*),
# then its ipsets (KUBE-SRC-*, KUBE-DST-*). Only on a node that ran it.
node_rm_netpol() {
	local chain rule chains
	[ -f "$node/kube-router-binary" ] || return 0
	command -v iptables >/dev/null || return 0
	for chain in INPUT FORWARD OUTPUT; do
		iptables -S "$chain" 2>/dev/null | { grep -- '-j KUBE-ROUTER-' || true; } |
			sed 's/^-A /-D /' | while read -r rule; do eval "iptables $rule"; done
	done
	chains=$(iptables -S 2>/dev/null | awk '$1 == "-N" && $2 ~ /^KUBE-(ROUTER|NWPLCY|POD-FW)-/ { print $2 }')
	for chain in $chains; do iptables -F "$chain"; done
	for chain in $chains; do iptables -X "$chain" || echo "down.sh: warning: cannot remove iptables chain $chain" >&2; done
	if command -v ipset >/dev/null; then
		ipset list -n 2>/dev/null | { grep -E '^KUBE-(SRC|DST)-' || true; } | xargs -r -n1 ipset destroy ||
			echo "down.sh: warning: cannot remove kube-router's ipsets" >&2
	fi
	return 0
}

# node_clean: after every process is gone, before .cluster is removed.
node_clean() {
	local d
	node_rm_netpol
	node_each node_clean_one
	# Host directories we created, when nothing else has put files there.
	if [ -f "$cluster/node/created-dirs" ]; then
		while read -r d; do
			[ -d "$d" ] && find "$d" -depth -type d -empty -delete 2>/dev/null
		done <"$cluster/node/created-dirs"
	fi
	return 0
}

node_clean_one() {
	node_rm_netns
	node_rm_links
	node_rm_cgroups
	node_rm_host_files
}
