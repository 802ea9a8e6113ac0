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

# bench_runc_ns: the namespace $ns made (its default ServiceAccount
# there) and the RuntimeClass airlock-bench-runc (handler runc) for the
# pods the chart runs under the cluster's default runtime (the gate).
bench_runc_ns() {
	k create ns "$ns" >/dev/null
	until k -n "$ns" get serviceaccount default >/dev/null 2>&1; do sleep 0.2; done
	k apply --server-side -f - >/dev/null <<YAML
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata: {name: airlock-bench-runc}
handler: runc
YAML
}

# bench_gate_pod [MORE]: the egress start gate's pod "gate" in $ns, as
# the chart runs it (under airlock-bench-runc), with MORE appended (YAML:
# more containers after the gate's, then the pod's volumes); once ready.
bench_gate_pod() {
	{
		cat <<YAML
apiVersion: v1
kind: Pod
metadata:
  name: gate
  labels: {app.kubernetes.io/component: egress-gate}
spec:
  runtimeClassName: airlock-bench-runc
  automountServiceAccountToken: false
  securityContext: {runAsNonRoot: true, runAsUser: 65532, fsGroup: 65532, seccompProfile: {type: RuntimeDefault}}
  containers:
  - name: gate
    image: $EGRESS_GATE_IMAGE
    command: [/gate, --serve, "8200-8327", "8182"]
    securityContext: {allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: {drop: [ALL]}}
YAML
		printf '%s\n' "${1-}"
	} | k -n "$ns" apply -f - >/dev/null
	k -n "$ns" wait --for=condition=Ready pod/gate --timeout=120s >/dev/null
}

# bench_cleanup: an EXIT trap for a script with one namespace ($ns) and
# daemons ($pids): they stopped, it deleted (not waited for), $work gone.
bench_cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
	k delete ns "$ns" --wait=false >/dev/null 2>&1
	[ -z "${BENCH_KEEP:-}" ] || cp "$work"/*.log "$BENCH_KEEP"/ 2>/dev/null
	rm -rf "$work"
}
