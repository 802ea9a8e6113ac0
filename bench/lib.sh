# Sourced by the bench/ scripts that use the test cluster: its env and
# kubectl (k), a clock, a free port, a metric read, and what every one of
# them installs first. Sets top and work (a temporary directory the
# script's own EXIT trap removes).
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
. "$top/.cluster/env"
work=$(mktemp -d)
k() { "$KUBECTL" --kubeconfig "$KUBECONFIG_ADMIN" "$@"; }
now() { date +%s.%N; }
# port: one on 127.0.0.1 nothing listens on now, in 10000-19999 (below the
# ephemeral range: no outgoing connection takes it before its daemon binds
# it), never the same twice in the script (kept in $work/ports: $(port)
# runs in a subshell); as it_free_port (itutil.h).
port() {
	local p
	for _ in $(seq 200); do
		p=$((10000 + RANDOM % 10000))
		! grep -qx "$p" "$work/ports" 2>/dev/null || continue
		python3 -c 'import socket, sys; socket.socket().bind(("127.0.0.1", int(sys.argv[1])))' "$p" \
			2>/dev/null || continue
		echo "$p" >>"$work/ports"
		echo "$p"
		return 0
	done
	echo "bench/lib.sh: no free port in 10000-19999" >&2
	return 1
}
# metric ADDR NAME: the value of an unlabelled series at http://ADDR/metrics.
metric() { curl -s "http://$1/metrics" | awk -v m="$2" '$1 == m { print $2 }'; }

# ratio A B: A / B to one decimal, for the reports.
ratio() { echo "scale=1; $1 / $2" | bc; }

# bench_need_node SCRIPT: stop unless the cluster has the real node.
bench_need_node() {
	[ -n "${NODE_NAME-}" ] || { echo "bench/$1: needs make cluster-up NODE=1" >&2; exit 1; }
}

# The CRD (established), the gVisor RuntimeClass and the executions'
# PriorityClass, as the chart would install them.
bench_install() {
	k apply --server-side -f "$top/crds/airlock.dev_codeexecutions.yaml" \
		-f "$top/crds/airlock.dev_codeexecutionpools.yaml" >/dev/null
	k wait --for=condition=Established crd/codeexecutions.airlock.dev \
		crd/codeexecutionpools.airlock.dev >/dev/null
	k apply --server-side -f - >/dev/null <<YAML
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata: {name: gvisor}
handler: runsc
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: airlock-execution}
value: 0
preemptionPolicy: Never
YAML
}

# bench_config IMAGE COMMAND [MORE]: $work/config.yaml, the controller's
# config with one python profile, then the YAML lines MORE.
bench_config() {
	printf 'profiles:\n  python:\n    image: %s\n    command: %s\n    sourceFile: main.py\n' \
		"$1" "$2" >"$work/config.yaml"
	[ -z "${3-}" ] || printf '%s\n' "$3" >>"$work/config.yaml"
}

# bench_daemons BIN NS [AGENT FLAGS...]: BIN's controller (with the
# caller's ctl_flags array, if any) and node agent
# for namespace NS, beside the cluster, at warn (their logs in $work); the
# agent ready, its metrics address in $aaddr, both pids added to the
# caller's pids array (its EXIT trap stops them). To trace a run (not for
# figures: logging costs time): BENCH_LOG_LEVEL=debug, and BENCH_KEEP=DIR
# to keep the logs there after the script (bench_cleanup).
bench_daemons() {
	local bin=$1 s=$2
	shift 2
	"$bin/airlock-controller" --config "$work/config.yaml" --kubeconfig "$KUBECONFIG_ADMIN" \
		--namespace "$s" --lease-namespace "$s" --metrics-addr "127.0.0.1:$(port)" \
		--log-level ${BENCH_LOG_LEVEL:-warn} ${ctl_flags[@]+"${ctl_flags[@]}"} \
		> "$work/controller-$s.log" 2>&1 &
	pids+=($!)
	aaddr=127.0.0.1:$(port)
	"$bin/airlock-node-agent" --kubeconfig "$KUBECONFIG_ADMIN" --node-name "$NODE_NAME" \
		--namespace "$s" --pod-logs-dir "$POD_LOGS_DIR" --containerd-socket "$CONTAINERD_SOCK" \
		--metrics-addr "$aaddr" --log-level ${BENCH_LOG_LEVEL:-warn} "$@" > "$work/agent-$s.log" 2>&1 &
	pids+=($!)
	until curl -sf "http://$aaddr/readyz" >/dev/null 2>&1; do sleep 0.2; done
}

# bench_cleanup: an EXIT trap for a script with one namespace ($ns) and
# daemons ($pids): they stopped, it deleted (not waited for), $work gone.
bench_cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
	k delete ns "$ns" --wait=false >/dev/null 2>&1
	[ -z "${BENCH_KEEP:-}" ] || cp "$work"/*.log "$BENCH_KEEP"/ 2>/dev/null
	rm -rf "$work"
}
