#!/usr/bin/env bash
# Benchmark: a controller restarting over N finished CodeExecutions that
# each carry the largest result the status may hold (about 1 MiB: the
# output budget, 1 MiB less the object and 16 KiB), against the same
# restart over an empty namespace in the same run. Measured: from the
# controller's start to a new execution it serves (status Pending), its
# peak RSS, and how often it had to shrink a list page. N=500 at 1 MiB
# each is a 500 MB list: past the client's 32 MiB response cap, which
# once kept a restarted controller relisting forever (issue 11).
# Needs the test control plane (make cluster-up) and `make`. Not a test:
# it prints numbers and appends them to bench/RESULTS.md.
#
# usage: bench/relist.sh [N]      (default 500)
set -euo pipefail
n=${1:-500}
. "$(dirname "$0")/lib.sh"
ns=bench-relist-$$
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; k delete ns "$ns" "$ns-base" --wait=false >/dev/null 2>&1; rm -rf "$work"' EXIT

bench_install
k create ns "$ns" >/dev/null
k create ns "$ns-base" >/dev/null
bench_config airlock/runner-python:0.1 "[python3, /airlock/code/main.py]"

# N executions, then each one's result: 500000 bytes of stdout and of
# stderr, as the node agent would write at the budget.
{
	printf '{"apiVersion":"v1","kind":"List","items":['
	for i in $(seq 0 $((n - 1))); do
		[ "$i" -gt 0 ] && printf ','
		printf '{"apiVersion":"airlock.dev/v1alpha1","kind":"CodeExecution","metadata":{"name":"cx-%05d"},"spec":{"runtime":"python","source":"print(1)","output":{"maxBytes":1048576}}}' "$i"
	done
	printf ']}'
} > "$work/cx.json"
t=$(date -u +%Y-%m-%dT%H:%M:%SZ)
{
	printf '{"status":{"phase":"Succeeded","reason":"Completed","message":"exit code 0","exitCode":0,'
	printf '"stdout":"%s",' "$(head -c 500000 /dev/zero | tr '\0' x)"
	printf '"stderr":"%s",' "$(head -c 500000 /dev/zero | tr '\0' y)"
	printf '"stdoutBytes":500000,"stderrBytes":500000,"stdoutTruncated":false,"stderrTruncated":false,'
	printf '"completionTime":"%s","durationMillis":10}}' "$t"
} > "$work/status.json"
t0=$(now)
k -n "$ns" create -f "$work/cx.json" >/dev/null
seq -f 'cx-%05g' 0 $((n - 1)) | xargs -P 4 -I{} "$KUBECTL" --kubeconfig "$KUBECONFIG_ADMIN" \
	-n "$ns" patch codeexecution {} --subresource=status --type=merge \
	--patch-file "$work/status.json" >/dev/null
fill_s=$(printf %.0f "$(echo "$(now) - $t0" | bc)")
stored=$(k -n "$ns" get codeexecutions -o json | wc -c)

# One restart: start the controller, create a new execution at once; the
# time until that one is Pending (the caches loaded, the queue served).
restart() {	# NAMESPACE LOG -> "seconds peak_rss_kib"
	local port addr t0 t1 ph hwm
	port=$(port)
	addr=127.0.0.1:$port
	t0=$(now)
	"$top/bin/airlock-controller" --config "$work/config.yaml" --kubeconfig "$KUBECONFIG_ADMIN" \
		--namespace "$1" --lease-namespace "$1" --metrics-addr "$addr" --workers 2 \
		--no-leader-elect > "$2" 2>&1 &
	pid=$!
	k -n "$1" create -f - >/dev/null <<YAML
apiVersion: airlock.dev/v1alpha1
kind: CodeExecution
metadata: {name: probe}
spec: {runtime: python, source: "print(2)"}
YAML
	while :; do
		ph=$(k -n "$1" get codeexecution probe -o jsonpath='{.status.phase}')
		[ "$ph" = Pending ] && break
		kill -0 "$pid" 2>/dev/null || { echo "bench: the controller died" >&2; cat "$2" >&2; exit 1; }
		sleep 0.05
	done
	t1=$(now)
	hwm=$(awk '/^VmHWM/ { print $2 }' "/proc/$pid/status")
	kill "$pid"; wait "$pid" 2>/dev/null || true
	pid=
	printf '%.2f %s\n' "$(echo "$t1 - $t0" | bc)" "$hwm"
}
read -r base_s base_kib < <(restart "$ns-base" "$work/base.log")
read -r full_s full_kib < <(restart "$ns" "$work/full.log")
shrinks=$(grep -c 'list page too big' "$work/full.log" || true)

cpu=$(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo)
mem=$(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo)
{
	echo
	echo "## controller restart over big results, $(date -u +%Y-%m-%d) - N=$n"
	echo
	echo "Machine: $(nproc) cores ($cpu), $mem; kube-apiserver v1.37.2 and etcd v3.7.3 on loopback (tests/cluster)."
	echo "$n finished executions, each with 500000 bytes of stdout and 500000 of stderr:"
	echo "the list is $stored bytes as JSON (made in $fill_s s). One restart each, then a new execution."
	echo
	echo "| measure | baseline: empty namespace | $n big results | ratio |"
	echo "|---|---|---|---|"
	echo "| start -> a new execution Pending, s | $base_s | $full_s | $(ratio $full_s $base_s)x |"
	echo "| peak RSS, KiB | $base_kib | $full_kib | $(ratio $full_kib $base_kib)x |"
	echo "| list pages refused as over 32 MiB, then asked again half as long | 0 | $shrinks | |"
} | tee -a "$top/bench/RESULTS.md"
