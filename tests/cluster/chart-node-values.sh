#!/usr/bin/env bash
# The test cluster's nodes as the chart's node groups: prints a values file
# with one entry of nodeAgent.nodeGroups a node, picked by its host name,
# with that node's own pod logs, containerd socket, runsc root and cgroup
# root (the chart tier's values carry node 1's alone), and an exec
# directory of its own next to its pod logs. With it, `helm install -f`
# runs an agent on each node of a NODES=2 cluster (issue 28 item 2).
#
# usage: tests/cluster/chart-node-values.sh [ENV [METRICS:PROBE...]]
#
# ENV is .cluster/env by default. METRICS:PROBE, one a node in order, are
# each node's agent's ports: the test nodes share the machine's network,
# so agents on hostNetwork (as the chart tier runs them) need ports of
# their own. None: the chart's ports on every node.
#
# The env file is read, not sourced: node.sh's node_env writes it, and
# NODE_COUNT, NODE_<i>_NAME, NODE_<i>_CONTAINERD_SOCK, NODE_<i>_POD_LOGS_DIR,
# NODE_<i>_RUNSC_ROOT, NODE_<i>_CGROUP_ROOT and RUNSC are what is used.
# Nothing is printed unless every node's values are there.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
env_file=${1:-$(cd "$here/../.." && pwd)/.cluster/env}
shift $(($# > 0 ? 1 : 0))
ports=("$@")

die() { echo "chart-node-values.sh: $*" >&2; exit 1; }

[ -r "$env_file" ] && [ -f "$env_file" ] ||
	die "cannot read '$env_file': no cluster (tests/cluster/up.sh)"

# get VAR: its value in the env file (the last one; quotes around it
# dropped), or a refusal naming it.
get() {
	local v
	v=$(sed -n "s/^$1=//p" "$env_file" | tail -n 1)
	[ -n "$v" ] || die "no $1 in '$env_file'"
	v=${v#\"} v=${v%\"}
	printf '%s' "$v"
}

# q S: S as a single-quoted YAML scalar.
q() { printf "'%s'" "${1//\'/\'\'}"; }

n=$(sed -n 's/^NODE_COUNT=//p' "$env_file" | tail -n 1)
case $n in
'' | *[!0-9]* | 0 | 0*) die "NODE_COUNT in '$env_file' is '$n': the cluster has no node (NODE=1 or NODES=2 tests/cluster/up.sh)" ;;
esac
runsc=$(get RUNSC)
[ ${#ports[@]} -eq 0 ] || [ ${#ports[@]} -eq "$n" ] ||
	die "${#ports[@]} METRICS:PROBE port pairs for $n nodes: one a node, or none"
for p in "${ports[@]}"; do
	[[ $p =~ ^[1-9][0-9]{0,4}:[1-9][0-9]{0,4}$ ]] && [ "${p%:*}" -le 65535 ] &&
		[ "${p#*:}" -le 65535 ] || die "'$p' is not METRICS:PROBE, two port numbers"
done

out="# The test cluster's nodes as node groups (tests/cluster/chart-node-values.sh).
nodeAgent:
  nodeGroups:
"
for i in $(seq "$n"); do
	name=$(get "NODE_${i}_NAME")
	sock=$(get "NODE_${i}_CONTAINERD_SOCK")
	logs=$(get "NODE_${i}_POD_LOGS_DIR")
	root=$(get "NODE_${i}_RUNSC_ROOT")
	cgroot=$(get "NODE_${i}_CGROUP_ROOT")
	# Warm runs' FIFOs are made at the same path on the host as in the
	# agent: one directory a node, or two nodes' agents share one.
	out+="    - name: node-$i
      nodeSelector: {kubernetes.io/hostname: $(q "$name")}
      hostPaths:
        podLogs: $(q "$logs")
        containerdSocket: $(q "$sock")
        cgroup: /sys/fs/cgroup
        execDir: $(q "$(dirname "$logs")/airlock-exec")
      runsc: {path: $(q "$runsc"), root: $(q "$root")}
      cgroupRoot: $(q "$cgroot")
"
	if [ ${#ports[@]} -gt 0 ]; then
		p=${ports[$((i - 1))]}
		out+="      metricsPort: ${p%:*}
      probePort: ${p#*:}
"
	fi
done
printf '%s' "$out"
