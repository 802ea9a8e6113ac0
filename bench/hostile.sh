#!/usr/bin/env bash
# Benchmark: the controller's memory under a hostile tenant (issue 27),
# beside a baseline build in the same run (CONTROLLER_BASE=, e.g. main
# before the fix). One controller for the whole cluster, as the chart
# runs it, with the chart's default quotas; a tenant namespace and a
# victim's. The tenant:
#   1. tries 2000 CodeExecutionPools with 20 KB annotations each;
#   2. makes 200 executions with 1800 labels and a 250 KB annotation each
#      (about 430 KB stored: under the 1 MiB budget), all waiting on its
#      full pods quota, an hour's timeout.
# Read: the controller's RSS once every one of them waits; then a victim's
# execution in its own namespace, ms from create to its pod; then the
# controller restarted (it lists all of it again): RSS once ready and the
# victim again. The target: RSS under 64 MiB, the victim within 2 s.
# Needs the test control plane (make cluster-up) and `make`. Not a test:
# it prints numbers and appends them to bench/RESULTS.md (RESULTS=).
#
# CONTROLLER= runs another build than bin/ as "this".
#
# usage: bench/hostile.sh [POOLS [EXECUTIONS]]    (default 2000 200)
set -euo pipefail
pools=${1:-2000}
n=${2:-200}
limit=${LIMIT:-120}	# s: the most each wait for the controller is given
. "$(dirname "$0")/lib.sh"
pid=
nss=()
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$work"' EXIT
rss_kib() { awk '/^VmRSS/ { print $2 }' "/proc/$1/status"; }
addr=127.0.0.1:$(port)
"$KUBECTL" --kubeconfig "$KUBECONFIG_ADMIN" config view --raw -o json > "$work/kc.json"
hp() { python3 "$top/bench/hostile.py" "$work" "$APISERVER_URL" "$@"; }

# start_controller BIN LEASE_NS LOG: started, leading and ready (or
# LIMIT s gone: ready is then "no"), its pid in $pid.
start_controller() {
	local t0=$SECONDS
	"$1" --config "$work/config.yaml" --kubeconfig "$KUBECONFIG_ADMIN" \
		--lease-namespace "$2" --metrics-addr "$addr" --log-level warn > "$3" 2>&1 &
	pid=$!
	ready=yes
	until [ "$(metric "$addr" airlock_leader 2>/dev/null)" = 1 ] &&
		curl -sf "http://$addr/readyz" >/dev/null 2>&1; do
		kill -0 "$pid" 2>/dev/null || { echo "bench: the controller exited; see $3" >&2; exit 1; }
		[ $((SECONDS - t0)) -lt "$limit" ] || { ready=no; return 0; }
		sleep 0.05
	done
}
stop_controller() { kill "$pid"; wait "$pid" 2>/dev/null || true; pid=; }
# Until the work queue is empty, twice 1 s apart, or LIMIT s (a
# controller that cannot keep up is read as it is): the depth left.
drained() {
	local z=0 t0=$SECONDS d=
	while [ "$z" -lt 2 ] && [ $((SECONDS - t0)) -lt "$limit" ]; do
		sleep 1
		d=$(metric "$addr" airlock_workqueue_depth)
		if [ "$d" = 0 ]; then z=$((z + 1)); else z=0; fi
	done
	echo "${d:-?}"
}
# The namespace's objects go by collection deletes: this control plane
# runs no namespace controller.
cleanup_ns() {
	k delete --raw "/apis/airlock.dev/v1alpha1/namespaces/$1/codeexecutions" >/dev/null 2>&1 || true
	k delete --raw "/apis/airlock.dev/v1alpha1/namespaces/$1/codeexecutionpools" >/dev/null 2>&1 || true
	k delete --raw "/api/v1/namespaces/$1/pods" >/dev/null 2>&1 || true
}

bench_install
bench_config airlock/runner-python:0.1 "[python3, /airlock/code/main.py]"

# one LABEL BIN: the attack against the controller BIN; a line of results.
one() {
	local label=$1 bin=$2 ns=hostile-$$-$1 vns=victim-$$-$1 tried admitted refused rss1 rss2 v1 v2 t0
	local w d1 d2 hwm
	k create ns "$ns" >/dev/null
	k create ns "$vns" >/dev/null
	start_controller "$bin" "$ns" "$work/controller-$label.log"
	# The guardrails first (a tenant's first object brings them), then
	# the pods quota counted full, as the quota controller would.
	k annotate ns "$ns" airlock.dev/quota-executions=1 >/dev/null
	hp victim "$ns" first >/dev/null
	k -n "$ns" patch quota airlock-executions --subresource=status --type=merge \
		-p '{"status":{"hard":{"pods":"1"},"used":{"pods":"1"}}}' >/dev/null
	read -r tried admitted refused <<<"$(hp pools "$ns" "$pools" 20000)"
	hp cx "$ns" "$n" >/dev/null
	t0=$SECONDS
	until w=$(hp waiting "$ns"); [ "$w" -ge "$n" ] || [ $((SECONDS - t0)) -ge "$limit" ]; do sleep 1; done
	d1=$(drained)
	rss1=$(rss_kib "$pid")
	v1=$(hp victim "$vns" v1)
	stop_controller
	start_controller "$bin" "$ns" "$work/controller-$label-2.log"
	[ "$ready" = yes ] && d2=$(drained) || d2="not ready in $limit s"
	rss2=$(rss_kib "$pid")
	hwm=$(awk '/^VmHWM/ { print $2 }' "/proc/$pid/status")
	v2=$(hp victim "$vns" v2)
	stop_controller
	cleanup_ns "$ns"
	cleanup_ns "$vns"
	printf '| %s | %s of %s | %s of %s | %s | %.1f | %s | %s | %.1f | %.1f | %s |\n' "$label" "$admitted" \
		"$tried" "$w" "$n" "$d1" "$(echo "$rss1 / 1024" | bc -l)" "$v1" "$d2" \
		"$(echo "$rss2 / 1024" | bc -l)" "$(echo "$hwm / 1024" | bc -l)" "$v2"
}

rows=()
if [ -n "${CONTROLLER_BASE-}" ]; then
	rows+=("$(one base "$CONTROLLER_BASE")")
	echo "${rows[-1]}"
fi
rows+=("$(one this "${CONTROLLER:-$top/bin/airlock-controller}")")
echo "${rows[-1]}"
{
	echo
	echo "## Hostile tenant: controller memory ($(date -u +%Y-%m-%d), commit $(git -C "$top" rev-parse --short HEAD), $(nproc) cores)"
	echo
	echo "bench/hostile.sh $pools $n: one cluster-wide controller, default quotas; the tenant's pools (20 KB annotation each) and executions (1800 labels, 250 KB annotation, waiting on a full pods quota). Each wait for the controller is cut at $limit s (queue left: its depth then; victim > 30000: its pod not made in 30 s). Target: RSS < 64 MiB, victim < 2000 ms."
	echo
	echo "| controller | pools admitted | executions seen waiting | queue left | RSS MiB | victim ms | queue left after restart | RSS MiB after restart | peak RSS MiB after restart | victim ms after restart |"
	echo "|---|---|---|---|---|---|---|---|---|---|"
	printf '%s\n' "${rows[@]}"
} >> "${RESULTS:-$top/bench/RESULTS.md}"
