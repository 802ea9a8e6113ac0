#!/usr/bin/env bash
# Soak: a mixed load of executions on two real nodes, with every fault of
# tests/cluster/restart.sh injected while it runs, then an account of
# what became of each execution. Not a test (make soak runs it; it takes
# several minutes): it prints a report, appends it to bench/RESULTS.md,
# and exits non-zero if any execution was lost, ran twice, ended wrong,
# or left something behind, or if our daemons' RSS grew more than 20%.
#
# The load, N executions (default 200) in four waves, cycling through five
# kinds:
#   normal   print its name                    -> Succeeded, that output
#   slow     sleep 3 s, print its name          -> Succeeded, that output
#   timeout  spin past timeoutSeconds 4         -> TimedOut/DeadlineExceeded
#   oom      allocate 400 MB under 128Mi        -> Failed/OOMKilled
#   big      print 300 KiB                      -> Succeeded, 307200 bytes
#                                                  counted, kept truncated
# The faults, between the waves: the API server SIGKILLed; etcd SIGKILLed
# and containerd restarted on node 1; the kubelet restarted on node 2;
# then node 2 lost (kubelet, containerd, sandboxes and its agent
# SIGKILLed) while the last wave is made, and brought back 20 s later.
#
# Each asks for 100m of CPU (so that 40 fit on the two 2-core nodes at
# once) and has 300 s to finish, waiting for room included; the quota is
# raised to the load. What is right: on a node that survived, each kind's result above (a run
# in flight through containerd's restart may instead say that its output
# may lack its end: counted apart); on the lost node, that result if it
# ended before the loss, else Failed/NodeLost; an execution that never got
# room (Unschedulable, or its timeout passed waiting for the quota) is
# counted apart, as is right under overload. So is one caught by a fault
# on its node (containerd's or the kubelet's restart, the loss) while it
# started or ran, which ends saying so: StartFailed (its start was lost),
# ResultLost (the node lost track of it), or exit 137 (SIGKILLed from
# outside: the kubelet restarted kills what it cannot account for); each
# is listed. The same endings outside a fault's window are wrong. Left behind, 90 s after the
# drain (the kubelet's container GC runs once a minute): pods of the
# namespace, pod log directories, runsc sandboxes, pod cgroups, on either
# node. Run twice: a pod name with two Scheduled Events of different uids.
#
# usage: bench/soak.sh [N]      (needs make cluster-up NODES=2 and make)
set -euo pipefail
n=${1:-200}
. "$(dirname "$0")/lib.sh"
[ "${NODE_COUNT:-1}" = 2 ] || { echo "bench/soak.sh: needs make cluster-up NODES=2" >&2; exit 1; }
ns=soak-$$
pids=()
cleanup() {
	for p in "${pids[@]}" ${agent2-}; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
	k delete ns "$ns" --wait=false >/dev/null 2>&1
	if [ "${rc:-1}" = 0 ]; then rm -rf "$work"; else echo "bench/soak.sh: logs kept in $work" >&2; fi
	return 0
}
trap cleanup EXIT
restart() { "$top/tests/cluster/restart.sh" "$@"; }
rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }
log() { printf '%s soak: %s\n' "$(date -u +%T)" "$*" >&2; }

bench_install
k create ns "$ns" >/dev/null
until k -n "$ns" get serviceaccount default >/dev/null 2>&1; do sleep 0.2; done
bench_config "$RUNNER_PYTHON_IMAGE" "[/airlock/bin/run, python3, main.py]" \
	"quota: {executions: $((n + 60)), storedExecutions: $((n + 60)), cpu: \"1000\", memory: 1000Gi}"
caddr=127.0.0.1:$(port)
"$top/bin/airlock-controller" --config "$work/config.yaml" --kubeconfig "$KUBECONFIG_ADMIN" \
	--namespace "$ns" --lease-namespace "$ns" --metrics-addr "$caddr" --log-level info \
	> "$work/controller.log" 2>&1 &
ctl=$!
pids+=("$ctl")
start_agent() {
	local i=$1 v
	for v in NAME POD_LOGS_DIR CONTAINERD_SOCK CGROUP_ROOT RUNSC_ROOT; do
		eval "local $v=\$NODE_${i}_$v"
	done
	"$top/bin/airlock-node-agent" --kubeconfig "$KUBECONFIG_ADMIN" --node-name "$NAME" \
		--namespace "$ns" --pod-logs-dir "$POD_LOGS_DIR" --containerd-socket "$CONTAINERD_SOCK" \
		--cgroup-root "$CGROUP_ROOT" --runsc "$RUNSC" --runsc-root "$RUNSC_ROOT" \
		--metrics-addr 0 --sweep-ms 5000 --log-level info >> "$work/agent-$i.log" 2>&1 &
	last_pid=$!
}
start_agent 1
agent1=$last_pid
pids+=("$agent1")
start_agent 2
agent2=$last_pid

# make_cx NAME KIND: the execution's manifest.
make_cx() {
	local src timeout=300 res=', "resources": {"cpu": "100m"}'
	case $2 in
	normal) src="print('$1')" ;;
	slow) src="import time\ntime.sleep(3)\nprint('$1')" ;;
	timeout) src="while True:\n    pass"; timeout=4 ;;
	oom) src="b = bytearray(400 * 1024 * 1024)\nprint(len(b))"; res=', "resources": {"cpu": "100m", "memory": "128Mi"}' ;;
	big) src="import sys\nsys.stdout.write('x' * 307200)" ;;
	esac
	printf '{"apiVersion":"airlock.dev/v1alpha1","kind":"CodeExecution","metadata":{"name":"%s","namespace":"%s","labels":{"soak-kind":"%s"}},"spec":{"runtime":"python","timeoutSeconds":%d,"source":"%s\\n"%s}}\n' \
		"$1" "$ns" "$2" "$timeout" "$src" "$res"
}
kinds=(normal slow timeout oom big)
wave() {
	local from=$1 to=$2 i
	{
		echo '{"apiVersion":"v1","kind":"List","items":['
		for ((i = from; i < to; i++)); do
			((i == from)) || echo ,
			make_cx "soak-$i" "${kinds[i % 5]}"
		done
		echo ']}'
	} >"$work/wave.json"
	k create -f "$work/wave.json" >/dev/null
	log "made soak-$from..soak-$((to - 1))"
}

# Warm-up, then the daemons' RSS before.
{
	echo '{"apiVersion":"v1","kind":"List","items":['
	for i in 0 1 2 3 4 5 6 7 8 9; do ((i == 0)) || echo ,; make_cx "warm-$i" normal; done
	echo ']}'
} >"$work/warm.json"
k create -f "$work/warm.json" >/dev/null
until [ "$(k -n "$ns" get cx -o jsonpath='{range .items[*]}{.status.phase}{"\n"}{end}' | grep -c Succeeded)" = 10 ]; do sleep 1; done
k -n "$ns" delete cx --all --wait=true >/dev/null
sleep 5
rss_ctl0=$(rss_kb "$ctl") rss_a10=$(rss_kb "$agent1") rss_a20=$(rss_kb "$agent2")
log "RSS before: controller $rss_ctl0 kB, agents $rss_a10 / $rss_a20 kB"

q=$((n / 4))
t0=$(now)
faults=()
wave 0 "$q"
sleep 5; restart --kill apiserver >&2; faults+=("apiserver SIGKILLed")
wave "$q" $((2 * q))
sleep 5; restart --kill etcd >&2; faults+=("etcd SIGKILLed")
f0=$(now); restart containerd "$NODE_1_NAME" >&2; faults+=("containerd restarted on $NODE_1_NAME")
echo "$NODE_1_NAME $f0 $(now)" >>"$work/windows.txt"
wave $((2 * q)) $((3 * q))
sleep 5; f0=$(now); restart kubelet "$NODE_2_NAME" >&2; faults+=("kubelet restarted on $NODE_2_NAME")
echo "$NODE_2_NAME $f0 $(now)" >>"$work/windows.txt"
sleep 5
lost_at=$(now)
kill -KILL "$agent2"; wait "$agent2" 2>/dev/null || true
restart stop-node "$NODE_2_NAME" >&2
faults+=("$NODE_2_NAME lost (kubelet, containerd, sandboxes, agent SIGKILLed), back after 20 s")
wave $((3 * q)) "$n"
t_made=$(now)
sleep 20
restart start-node "$NODE_2_NAME" >&2
start_agent 2
agent2=$last_pid
echo "$NODE_2_NAME $lost_at $(now)" >>"$work/windows.txt"

# Drain: every execution terminal.
terminal() {
	k -n "$ns" get cx -o jsonpath='{range .items[*]}{.status.phase}{"\n"}{end}' |
		grep -cE '^(Succeeded|Failed|TimedOut|Cancelled)$' || true
}
deadline=$((SECONDS + 900))
while [ "$(terminal)" != "$n" ] && ((SECONDS < deadline)); do sleep 2; done
t_drained=$(now)
log "drained: $(terminal) of $n terminal"
k -n "$ns" get cx -o json >"$work/cx.json"
k -n "$ns" get events -o json >"$work/events.json"
rss_ctl1=$(rss_kb "$ctl") rss_a11=$(rss_kb "$agent1")

# Left behind, after the kubelets' container GC.
sleep 90
left() {
	local i d r c
	for i in 1 2; do
		d=$(eval echo "\$NODE_${i}_POD_LOGS_DIR") r=$(eval echo "\$NODE_${i}_RUNSC_ROOT")
		c=$(eval echo "\$NODE_${i}_CGROUP_ROOT")
		ls -d "$d/${ns}"_* 2>/dev/null || true
		"$RUNSC" --root "$r" list -quiet 2>/dev/null || true
		find "/sys/fs/cgroup/memory$c" -mindepth 2 -type d -name 'pod*' 2>/dev/null || true
	done
	k -n "$ns" get pods -o name
}
left >"$work/left.txt"
rss_ctl2=$(rss_kb "$ctl") rss_a12=$(rss_kb "$agent1")

set +e
python3 - "$work" "$n" "$NODE_2_NAME" "$lost_at" "$t0" "$t_made" "$t_drained" \
	"$rss_ctl0" "$rss_ctl2" "$rss_a10" "$rss_a12" "$(printf '%s; ' "${faults[@]}")" \
	"$(nproc)" "$(uname -r)" <<'PY' | tee "$work/report.md"
import json, sys, collections
(work, n, lost_node, lost_at, t0, t_made, t_drained, c0, c1, a0, a1, faults,
 cores, kernel) = sys.argv[1:]
n = int(n)
items = json.load(open(work + "/cx.json"))["items"]
ev = json.load(open(work + "/events.json"))["items"]
left = [l for l in open(work + "/left.txt").read().split("\n") if l]
ok = collections.Counter()
bad = []
flagged = nodelost = capacity = 0
faulted = []
# A node's fault windows (containerd or kubelet restarted, the node lost),
# wall-clock seconds: what ran on it then may end by the fault.
windows = collections.defaultdict(list)
for line in open(work + "/windows.txt"):
    node, a, b = line.split()
    windows[node].append((float(a), float(b)))
def ts(s):
    import datetime
    if not s: return None
    return datetime.datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()
def in_fault(cx, st):
    start = ts(st.get("startTime")) or ts(cx["metadata"]["creationTimestamp"])
    end = ts(st.get("completionTime"))
    return any(end is not None and end >= a - 2 and start <= b + 30
               for a, b in windows.get(st.get("nodeName"), []))
for cx in items:
    name = cx["metadata"]["name"]
    kind = cx["metadata"]["labels"]["soak-kind"]
    st = cx.get("status", {})
    ph, rs, out = st.get("phase"), st.get("reason"), st.get("stdout", "")
    msg = st.get("message", "")
    if ph not in ("Succeeded", "Failed", "TimedOut", "Cancelled"):
        bad.append((name, "not ended", ph)); continue
    if rs == "NodeLost":
        if st.get("nodeName") == lost_node:
            nodelost += 1; continue
        bad.append((name, "NodeLost on a node that was not lost", st.get("nodeName"))); continue
    if rs == "Unschedulable" or (ph == "TimedOut" and "never ran" in msg):
        capacity += 1; continue
    want = {"normal": ("Succeeded", name + "\n"), "slow": ("Succeeded", name + "\n"),
            "timeout": ("TimedOut", None), "oom": ("Failed", None),
            "big": ("Succeeded", None)}[kind]
    right = ph == want[0] and (want[1] is None or out == want[1])
    if kind == "timeout": right = right and rs == "DeadlineExceeded"
    if kind == "oom": right = right and rs == "OOMKilled"
    if kind == "big": right = right and st.get("stdoutBytes") == 307200 and st.get("stdoutTruncated") is True
    if not right and ph == want[0] and "containerd restarted while it ran" in msg:
        flagged += 1; continue
    # Caught by a fault on its node, and said so: its start failed or was
    # lost (StartFailed), the node lost track of it (ResultLost), or it was
    # SIGKILLed from outside (exit 137, not its deadline, not OOM).
    if not right and in_fault(cx, st) and (rs in ("StartFailed", "ResultLost") or
                                           (rs == "Error" and st.get("exitCode") == 137)):
        faulted.append((name, kind, rs, msg[:120], st.get("nodeName"))); continue
    if right: ok[kind] += 1
    else: bad.append((name, kind, ph, rs, out[:40], msg[:160], st.get("nodeName"),
                      st.get("startTime"), st.get("completionTime")))
uids = collections.defaultdict(set)
for e in ev:
    io = e.get("involvedObject", {})
    if e.get("reason") == "Scheduled" and io.get("kind") == "Pod":
        uids[io["name"]].add(io["uid"])
twice = [p for p, u in uids.items() if len(u) > 1]
lost = n - len(items) + sum(1 for b in bad if b[1] == "not ended")
made, drained = float(t_made) - float(t0), float(t_drained) - float(t_made)
grow_c = (int(c1) - int(c0)) / int(c0) * 100
grow_a = (int(a1) - int(a0)) / int(a0) * 100
print(f"### Soak, {n} executions on two nodes ({cores} cores, kernel {kernel})\n")
print(f"- Faults injected during the load: {faults.rstrip('; ')}.")
print(f"- Executions: {len(items)} of {n} made; right on surviving nodes or before the loss: "
      f"{sum(ok.values())} ({', '.join(f'{k} {v}' for k, v in sorted(ok.items()))}); "
      f"NodeLost on {lost_node}: {nodelost}; ended waiting for capacity, never run (Unschedulable, or the quota past its timeout): {capacity}; output flagged as possibly cut by containerd's restart: {flagged}; "
      f"caught by a fault on its node while it started or ran, and said so (StartFailed, ResultLost, or SIGKILLed: 137): {len(faulted)}; "
      f"wrong: {len([b for b in bad if b[1] != 'not ended'])}; lost (never ended): {lost}; "
      f"run twice: {len(twice)}.")
print(f"- Left behind 90 s after the drain (pods, pod log dirs, runsc sandboxes, pod cgroups): {len(left)}.")
print(f"- Time to make all {n}: {made:.1f} s; from the last made to all ended: {drained:.1f} s.")
print(f"- RSS before -> after (90 s after the drain): controller {int(c0)/1024:.1f} -> {int(c1)/1024:.1f} MiB "
      f"({grow_c:+.0f}%); node 1's agent {int(a0)/1024:.1f} -> {int(a1)/1024:.1f} MiB ({grow_a:+.0f}%); "
      f"node 2's agent died with its node and was started again.")
for f in faulted:
    print("  - caught by a fault:", f)
for b in bad[:20]:
    print("  - wrong:", b)
for l in left[:20]:
    print("  - left:", l)
fail = bad or twice or left or lost or grow_c > 20 or grow_a > 20
sys.exit(1 if fail else 0)
PY
rc=${PIPESTATUS[0]}
set -e
{
	echo
	echo "## bench/soak.sh $n ($(date -u +%F))"
	echo
	cat "$work/report.md"
} >>"$top/bench/RESULTS.md"
exit "$rc"
