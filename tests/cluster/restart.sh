#!/usr/bin/env bash
# Faults for the test cluster of up.sh: restart one component in place, or
# lose a node and bring it back. Each command returns once what it restarted
# is healthy again (or, for stop-node, once everything of the node is dead).
# See README.md in this directory, section "Faults".
#
# usage: restart.sh [--kill] apiserver | etcd
#        restart.sh [--kill] containerd [NODE] | kubelet [NODE]
#        restart.sh stop-node NODE     the node's kubelet, containerd, shims
#                                      and sandboxes SIGKILLed, as a lost
#                                      machine's would be; nothing cleaned
#        restart.sh start-node NODE    a stopped node's containerd and
#                                      kubelet started again, Ready
#
# NODE is a node's name (.cluster/env: NODE_NAMES), node 1's by default.
# A restart stops with SIGTERM (up to 10 s, then SIGKILL), or with --kill
# at once with SIGKILL, a crash; then starts the component with the very
# command line up.sh gave it (.cluster/NAME.cmd), appending to its log.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cluster=$root/.cluster
pki=$cluster/pki
logs=$cluster/logs
STOP_TIMEOUT=10

die() { echo "restart.sh: $*" >&2; exit 1; }
usage() { sed -n 's/^# usage: /usage: /p; s/^#        /       /p' "$0" | sed '/^# NODE/q' >&2; exit 2; }

sig=TERM
if [ "${1-}" = --kill ]; then sig=KILL; shift; fi
what=${1-}
[ -n "$what" ] || usage
shift

[ -f "$cluster/env" ] || die "no cluster in $cluster (tests/cluster/up.sh)"
# shellcheck disable=SC1091
. "$cluster/env"

exec 9<"$here"
flock 9
# shellcheck source=procs.sh
. "$here/procs.sh"

# our_pid PIDFILE: the pid, if it is alive and still the process up.sh
# started: its command line is the end of the one saved beside the pid
# file (NAME.cmd; `env VAR=... cmd` execs cmd). Under load a pid is
# recycled within seconds, and a shim or a gofer of this cluster would
# match a mere mention of .cluster/.
our_pid() {
	local pid have want
	pid=$(cat "$1" 2>/dev/null) || return 1
	[[ $pid =~ ^[0-9]+$ ]] || return 1
	have=$(tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline") || return 1
	[[ $have == *"$cluster/"* ]] || return 1
	if [ -f "${1%.pid}.cmd" ]; then
		want=$(tr '\0' ' ' <"${1%.pid}.cmd")
		[[ $want == *"$have" ]] || return 1
	fi
	echo "$pid"
}
alive() { kill -0 "$1" 2>/dev/null; }

# node_of NAME: node, PSUF for the node called NAME (node.sh's node_select).
node_of() {
	local name=${1:-${NODE_NAME-}} i n
	[ -n "$name" ] || die "the cluster has no node"
	for i in $(seq "${NODE_COUNT:-1}"); do
		n=NODE_${i}_NAME
		if [ "${!n:-$NODE_NAME}" = "$name" ]; then
			if [ "$i" = 1 ]; then node=$cluster/node PSUF=; else node=$cluster/node-$i PSUF=-$i; fi
			NODE=$name
			return 0
		fi
	done
	die "no node called '$name' (nodes: ${NODE_NAMES:-$NODE_NAME})"
}

# stop_proc NAME SIGNAL: stop our process NAME; with TERM, up to
# STOP_TIMEOUT s before SIGKILL.
stop_proc() {
	local name=$1 s=$2 pid
	pid=$(our_pid "$cluster/$name.pid") || { echo "restart.sh: $name was not running" >&2; return 0; }
	kill -"$s" "$pid" 2>/dev/null || true
	local deadline=$((SECONDS + STOP_TIMEOUT))
	while alive "$pid" && ((SECONDS < deadline)); do sleep 0.05; done
	if alive "$pid"; then
		echo "restart.sh: $name ($pid) still running after $STOP_TIMEOUT s, killing it" >&2
		kill -KILL "$pid" 2>/dev/null || true
		for _ in $(seq 100); do alive "$pid" || break; sleep 0.05; done
	fi
	alive "$pid" && die "$name ($pid) survived SIGKILL"
	return 0
}

# start_proc NAME: start NAME again from the command line up.sh saved.
start_proc() {
	local name=$1 args=()
	[ -f "$cluster/$name.cmd" ] || die "no saved command line for $name ($cluster/$name.cmd)"
	mapfile -d '' args <"$cluster/$name.cmd"
	our_pid "$cluster/$name.pid" >/dev/null && die "$name is already running"
	rm -f "$cluster/$name.pid"
	echo "--- restart.sh: started again at $(date -u +%FT%T.%NZ)" >>"$logs/$name.log"
	setsid sh -c 'echo $$ >"$0"; exec "$@"' "$cluster/$name.pid" "${args[@]}" \
		</dev/null >>"$logs/$name.log" 2>&1 9<&- &
	for _ in $(seq 100); do
		[ -s "$cluster/$name.pid" ] && return 0
		sleep 0.02
	done
	die "$name did not start; log: $logs/$name.log"
}

# wait_until NAME TIMEOUT CHECK...
wait_until() {
	local name=$1 timeout=$2; shift 2
	local deadline=$((SECONDS + timeout))
	until "$@"; do
		our_pid "$cluster/$name.pid" >/dev/null ||
			{ tail -n 20 "$logs/$name.log" >&2; die "$name exited while starting again"; }
		((SECONDS < deadline)) ||
			{ tail -n 20 "$logs/$name.log" >&2; die "$name not healthy $timeout s after its restart"; }
		sleep 0.05
	done
}

etcd_ok() { curl -sf --max-time 1 "$ETCD_URL/health" 2>/dev/null | grep -q '"health":"true"'; }
apiserver_ok() {
	curl -sf --max-time 2 --cacert "$pki/ca.crt" --cert "$pki/admin.crt" \
		--key "$pki/admin.key" "$APISERVER_URL/readyz" 2>/dev/null | grep -qx ok
}
# containerd serves its API only once its plugins have loaded, and the
# task plugin first cleans up every shim left from before; a shim whose
# delete hangs (a sandbox killed with its node) costs 5 s, one after the
# other (CI, 2026-11-28: a lost node's containerd took over 30 s with
# about ten). So up to CONTAINERD_WAIT_S (120) before it counts as failed.
CONTAINERD_WAIT_S=120
containerd_ok() { ctr --address "$node/containerd/containerd.sock" version >/dev/null 2>&1; }
kubelet_ok() {
	local port
	port=$(sed -n 's/^healthzPort: //p' "$node/kubelet.yaml")
	curl -sf --max-time 2 "http://127.0.0.1:$port/healthz" 2>/dev/null | grep -qx ok
}
node_ready_ok() {
	[ "$("$KUBECTL" --kubeconfig="$KUBECONFIG_ADMIN" get node "$NODE" \
		-o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]
}

# kill_node_strays: every shim, runsc sandbox and gofer of the node (each
# names the node's directory on its command line), SIGKILLed.
kill_node_strays() {
	local p pids=()
	for p in /proc/[0-9]*; do
		[ "${p#/proc/}" = $$ ] && continue
		tr '\0' ' ' 2>/dev/null <"$p/cmdline" | grep -qF "$node/" || continue
		tr '\0' ' ' 2>/dev/null <"$p/cmdline" | grep -qE 'containerd-shim|runsc' || continue
		pids+=("${p#/proc/}")
	done
	[ ${#pids[@]} -eq 0 ] && return 0
	kill -KILL "${pids[@]}" 2>/dev/null || true
	for _ in $(seq 100); do
		local left=0
		for p in "${pids[@]}"; do alive "$p" && left=1; done
		[ $left = 0 ] && return 0
		sleep 0.05
	done
	die "processes of $NODE survived SIGKILL: ${pids[*]}"
}

t0=$EPOCHREALTIME
case $what in
etcd)
	[ $# = 0 ] || usage
	stop_proc etcd "$sig"
	start_proc etcd
	wait_until etcd 30 etcd_ok
	# The apiserver's etcd client reconnects by itself; ready means both.
	wait_until kube-apiserver 60 apiserver_ok
	;;
apiserver | kube-apiserver)
	[ $# = 0 ] || usage
	stop_proc kube-apiserver "$sig"
	start_proc kube-apiserver
	wait_until kube-apiserver 60 apiserver_ok
	;;
containerd)
	[ $# -le 1 ] || usage
	node_of "${1-}"
	stop_proc "containerd$PSUF" "$sig"
	start_proc "containerd$PSUF"
	wait_until "containerd$PSUF" "$CONTAINERD_WAIT_S" containerd_ok
	;;
kubelet)
	[ $# -le 1 ] || usage
	node_of "${1-}"
	stop_proc "kubelet$PSUF" "$sig"
	start_proc "kubelet$PSUF"
	wait_until "kubelet$PSUF" 60 kubelet_ok
	wait_until "kubelet$PSUF" 60 node_ready_ok
	;;
stop-node)
	[ $# = 1 ] || usage
	node_of "$1"
	# All at once, as when the power goes: no process gets to tidy up.
	for n in "kubelet$PSUF" "containerd$PSUF"; do
		pid=$(our_pid "$cluster/$n.pid") && kill -KILL "$pid" 2>/dev/null || true
	done
	kill_node_strays
	# And every process of its pods, as a lost machine's: the chart's
	# agent or controller on it must not run on (procs.sh).
	CGROUP_ROOT=$(sed -n 's/^CGROUP_ROOT=//p' "$node/ids" 2>/dev/null)
	# shellcheck disable=SC2046
	procs_kill "restart.sh: $NODE" $(procs_in_cgroup "$CGROUP_ROOT") ||
		die "processes of $NODE survived SIGKILL"
	for n in "kubelet$PSUF" "containerd$PSUF"; do
		pid=$(our_pid "$cluster/$n.pid") || continue
		for _ in $(seq 100); do alive "$pid" || break; sleep 0.05; done
		alive "$pid" && die "$n ($pid) survived SIGKILL"
	done
	;;
start-node)
	[ $# = 1 ] || usage
	node_of "$1"
	start_proc "containerd$PSUF"
	wait_until "containerd$PSUF" "$CONTAINERD_WAIT_S" containerd_ok
	start_proc "kubelet$PSUF"
	wait_until "kubelet$PSUF" 60 kubelet_ok
	wait_until "kubelet$PSUF" 60 node_ready_ok
	;;
*) usage ;;
esac
printf 'restart.sh: %s%s done in %s s\n' "$what" "${NODE:+ $NODE}" \
	"$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }')"
