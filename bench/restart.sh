#!/usr/bin/env bash
# Benchmark: both daemons SIGKILLed and restarted while a tenant's whole
# concurrent quota runs (N executions, each with ~190 KiB of code carried
# in its pod's annotations, the most that goes there), against the same
# restarts with nothing running, in the same run. Measured:
#   node agent: start -> it follows every running execution again
#               (airlock_agent_runs == N on its /metrics)
#   controller: start -> a new execution it serves (status Pending)
# and then every one of the N ends with its own output. Needs the real
# node (make cluster-up NODE=1) and `make`. Not a test: it prints numbers
# and appends them to bench/RESULTS.md.
#
# usage: bench/restart.sh [N]      (default 20, the default quota)
set -euo pipefail
n=${1:-20}
. "$(dirname "$0")/lib.sh"
bench_need_node restart.sh
ns=bench-restart-$$
cpid= apid=
trap 'kill -9 $cpid $apid 2>/dev/null; k delete ns "$ns" --wait=false >/dev/null 2>&1; rm -rf "$work"' EXIT

bench_install
k create ns "$ns" >/dev/null
k annotate ns "$ns" airlock.dev/quota-executions=$((n + 5)) >/dev/null
bench_config "$RUNNER_PYTHON_IMAGE" "[/airlock/bin/run, python3, main.py]"
caddr=127.0.0.1:$(port) aaddr=127.0.0.1:$(port)
controller() {
	"$top/bin/airlock-controller" --config "$work/config.yaml" --kubeconfig "$KUBECONFIG_ADMIN" \
		--namespace "$ns" --no-leader-elect --metrics-addr "$caddr" --log-level warn \
		>> "$work/controller.log" 2>&1 &
	cpid=$!
}
agent() {
	"$top/bin/airlock-node-agent" --kubeconfig "$KUBECONFIG_ADMIN" --node-name "$NODE_NAME" \
		--namespace "$ns" --pod-logs-dir "$POD_LOGS_DIR" --containerd-socket "$CONTAINERD_SOCK" \
		--cgroup-root "$CGROUP_ROOT" --metrics-addr "$aaddr" --log-level warn \
		>> "$work/agent.log" 2>&1 &
	apid=$!
}
# start -> the agent follows want runs (in $res; not in a subshell, which
# would keep the new pid to itself)
agent_restart() {
	local t0 r
	kill -9 "$apid"; wait "$apid" 2>/dev/null || true
	t0=$(now); agent
	while :; do
		r=$(metric "$aaddr" airlock_agent_runs 2>/dev/null || true)
		[ -n "$r" ] && [ "${r%.*}" -ge "$1" ] && break
		sleep 0.02
	done
	res=$(printf '%.2f' "$(echo "$(now) - $t0" | bc)")
}
# start -> a new execution NAME is Pending
controller_restart() {
	local t0
	kill -9 "$cpid"; wait "$cpid" 2>/dev/null || true
	t0=$(now); controller
	k -n "$ns" create -f - >/dev/null <<YAML
apiVersion: airlock.dev/v1alpha1
kind: CodeExecution
metadata: {name: $1}
spec: {runtime: python, source: "print(2)"}
YAML
	until [ -n "$(k -n "$ns" get codeexecution "$1" -o jsonpath='{.status.phase}')" ]; do sleep 0.02; done
	res=$(printf '%.2f' "$(echo "$(now) - $t0" | bc)")
}

controller; agent
until curl -sf "http://$aaddr/readyz" >/dev/null 2>&1; do sleep 0.1; done
agent_restart 0; base_agent=$res
controller_restart probe-0; base_ctl=$res

# N executions, ~190 KiB of code each (a comment, then a long sleep).
pad=$(head -c 190000 /dev/zero | tr '\0' '#')
for i in $(seq 1 "$n"); do
	printf '{"apiVersion":"airlock.dev/v1alpha1","kind":"CodeExecution","metadata":{"name":"load-%02d"},"spec":{"runtime":"python","timeoutSeconds":300,"resources":{"cpu":"50m","memory":"64Mi"},"source":"%s\\nimport time\\ntime.sleep(60)\\nprint(\\"done %d\\")\\n"}}\n' "$i" "$pad" "$i"
done > "$work/load.json"
k -n "$ns" create -f "$work/load.json" >/dev/null
t0=$(now)
until [ "$(k -n "$ns" get codeexecutions -o jsonpath='{range .items[*]}{.status.phase}{"\n"}{end}' | grep -c '^Running$')" -ge "$n" ]; do
	sleep 0.5
	[ "$(echo "$(now) - $t0 > 240" | bc)" = 1 ] && { echo "bench: the $n did not all run" >&2; exit 1; }
done
agent_restart "$n"; load_agent=$res
controller_restart probe-1; load_ctl=$res
# Every one of the N still ends, with its own output.
until [ "$(k -n "$ns" get codeexecutions -o jsonpath='{range .items[*]}{.metadata.name} {.status.phase}{"\n"}{end}' | grep -c '^load-.* Succeeded$')" -ge "$n" ]; do
	sleep 1
	[ "$(echo "$(now) - $t0 > 600" | bc)" = 1 ] && { echo "bench: the $n did not all end" >&2; exit 1; }
done
wrong=0
for i in $(seq 1 "$n"); do
	out=$(k -n "$ns" get codeexecution "$(printf load-%02d "$i")" -o jsonpath='{.status.stdout}')
	[ "$out" = "done $i" ] || wrong=$((wrong + 1))
done

cpu=$(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo)
mem=$(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo)
{
	echo
	echo "## daemons restarted under a tenant's full quota, $(date -u +%Y-%m-%d) - N=$n"
	echo
	echo "Machine: $(nproc) cores ($cpu), $mem; one node: kubelet v1.37.2, containerd, gVisor runsc (tests/cluster NODE=1)."
	echo "$n executions running at once, each with ~190 KiB of code in its pod's annotations; each daemon SIGKILLed and started again."
	echo
	echo "| measure | baseline: nothing running | $n running | ratio |"
	echo "|---|---|---|---|"
	echo "| node agent: start -> following every run again, s | $base_agent | $load_agent | $(ratio $load_agent $base_agent)x |"
	echo "| controller: start -> a new execution served (Pending), s | $base_ctl | $load_ctl | $(ratio $load_ctl $base_ctl)x |"
	echo "| of the $n, ended Succeeded with a wrong or missing output | | $wrong | |"
} | tee -a "$top/bench/RESULTS.md"
