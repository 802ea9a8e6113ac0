#!/usr/bin/env bash
# Soak: a mixed load of executions on Airlock as the Helm chart installs it
# across the two test nodes (release soak in soak-system: the controller
# and a node agent a node, in pods), with every fault of
# tests/cluster/restart.sh and the chart's own (an agent pod replaced by
# its DaemonSet, a helm upgrade rolling both agents) injected while it
# runs, then an account of what became of each execution
# (bench/soak_report.py). Not a test (make soak runs it; it takes about a
# quarter of an hour): it prints a report, appends it to bench/RESULTS.md,
# and exits non-zero if any execution ended wrong, was lost, ran twice,
# stayed Pending past the start deadline, or left something behind; if an
# excused bucket holds more than 5% of N; or if the controller's RSS grew
# more than 20%.
#
# The load, N executions (default 200) in four waves, cycling through five
# kinds:
#   normal   print its name                    -> Succeeded, that output
#   slow     sleep 3 s, print its name          -> Succeeded, that output
#   timeout  spin past timeoutSeconds 4         -> TimedOut/DeadlineExceeded
#   oom      allocate 400 MB under 128Mi        -> Failed/OOMKilled
#   big      print 300 KiB                      -> Succeeded, 307200 bytes
#                                                  counted, kept truncated
# Each asks for 50m of CPU, so that about 75 fit on the two 2-core nodes
# at once, and has 300 s to finish, waiting for room included; the chart's
# config.quota is raised to the load. The first wave's executions all
# sleep HOLD s (default 120) before their work, so that 50 run at once:
# the API server is SIGKILLed once 50 are Running (or as many as ran when
# the count stopped growing for 30 s: the report says how many; the
# wave's timeout kind sleeps past timeoutSeconds HOLD + 30), then, while they
# still run, the agent pod of the node with most of them is deleted (its
# DaemonSet makes another). Second wave: helm upgrade --reuse-values --set
# nodeAgent.logLevel=debug rolls both agents; etcd SIGKILLed; containerd
# restarted on node 1. Third wave (its slow kind sleeps 30 s): the kubelet
# restarted on node 2; then node 2 lost (restart.sh stop-node: its kubelet,
# containerd, sandboxes and the processes of its pods, its agent's too)
# once at most 5% of N less 2 of its executions are left (each becomes
# NodeLost, a capped bucket); the last wave is made once the node is
# NotReady, so that it goes to node 1, and the node is brought back 20 s
# after that (the report says how long it was away).
# The controller is pinned to node 1 (controller.nodeSelector), so that the
# node's loss is about the agents.
#
# What is right, and what is excused (each excused bucket at most 5% of N):
# see bench/soak_report.py. Left behind, 150 s after the drain (the
# kubelet's container GC and the agent's sweep each run once a minute):
# pods of the namespace, its pod log directories, runsc sandboxes, pod
# cgroups of pods that no longer exist, on either node. Run twice: a pod
# name with two Scheduled Events of different uids.
#
# usage: bench/soak.sh [N]      (needs make cluster-up NODES=2 after make,
#                                so that up.sh built the daemons' images;
#                                HELM, or tests/cluster/build.sh helm)
set -euo pipefail
n=${1:-200}
hold=${HOLD:-120}
. "$(dirname "$0")/lib.sh"
die() { echo "bench/soak.sh: $*" >&2; exit 1; }
[ "${NODE_COUNT:-1}" = 2 ] || die "needs make cluster-up NODES=2"
if [ -z "${CONTROLLER_IMAGE-}" ] || [ -z "${NODE_AGENT_IMAGE-}" ]; then
	die "the cluster has no images of the daemons: make, then make cluster-down and make cluster-up NODES=2"
fi
((n >= 20 && n % 4 == 0)) || die "N is $n: a multiple of 4, at least 20"
if [ -z "${HELM-}" ]; then
	HELM=$("$top/tests/cluster/build.sh" helm | sed -n 's/^HELM_BIN_DIR=//p')/helm
fi
[ -x "$HELM" ] || die "no helm at '$HELM'"
export KUBECONFIG=$KUBECONFIG_ADMIN
rel=soak relns=soak-system ns=soak-$$
nodes=("$NODE_1_NAME" "$NODE_2_NAME")
log() { printf '%s soak: %s\n' "$(date -u +%T)" "$*" >&2; }
restart() { "$top/tests/cluster/restart.sh" "$@"; }
rss_kb() {
	local v
	v=$(awk '/^VmRSS:/ { print $2 }' "/proc/${1:-0}/status" 2>/dev/null) || true
	echo "${v:-0}"
}

# The daemons' logs (the previous container's too), their pods, and the
# soak-system pod log directories of both nodes (agents replaced during
# the soak leave theirs there until the kubelet's GC).
keep_logs() {
	local p i d
	k -n "$relns" get pods -o wide >"$work/pods.txt" 2>&1 || true
	k -n "$relns" get events >"$work/system-events.txt" 2>&1 || true
	for p in $(k -n "$relns" get pods -o name 2>/dev/null); do
		k -n "$relns" logs "$p" >"$work/${p#pod/}.log" 2>&1 || true
		k -n "$relns" logs --previous "$p" >"$work/${p#pod/}.previous.log" 2>/dev/null ||
			rm -f "$work/${p#pod/}.previous.log"
	done
	for i in 1 2; do
		d=NODE_${i}_POD_LOGS_DIR
		mkdir -p "$work/podlogs-$i"
		cp -r "${!d}/${relns}"_* "$work/podlogs-$i/" 2>/dev/null || true
	done
}
cleanup() {
	local i
	# Every step, whatever one before it did (errexit would end the trap).
	set +e
	[ "${rc:-1}" = 0 ] || keep_logs
	[ -z "${node2_down-}" ] || restart start-node "$NODE_2_NAME" >&2 || true
	# The executions go while their controller still runs.
	k -n "$ns" delete cx --all --wait=true --timeout=120s >/dev/null 2>&1
	k delete ns "$ns" --wait=false >/dev/null 2>&1
	"$HELM" uninstall "$rel" -n "$relns" --wait >/dev/null 2>&1
	for i in "${nodes[@]}"; do
		k label node "$i" node-restriction.kubernetes.io/airlock-gvisor- >/dev/null 2>&1
	done
	k delete ns "$relns" --wait=false >/dev/null 2>&1
	if [ "${rc:-1}" = 0 ]; then rm -rf "$work"; else echo "bench/soak.sh: logs kept in $work" >&2; fi
	return 0
}
trap cleanup EXIT

# The values: the test cluster's as tests/nodes/test_nodes_chart.c gives
# them (images imported, never pulled; the API server on loopback; the
# daemons on the machine's network with ports of their own; class names of
# the soak's own), the controller pinned to node 1, the quota the load's.
image() { printf '{repository: "%s", tag: "%s", pullPolicy: Never}' "${1%:*}" "${1##*:}"; }
cport=$(port) cprobe=$(port)
cat >"$work/values.yaml" <<YAML
image: {controller: $(image "$CONTROLLER_IMAGE"), nodeAgent: $(image "$NODE_AGENT_IMAGE")}
apiServer: {host: 127.0.0.1, port: "${APISERVER_URL##*:}"}
controller:
  replicas: 1
  hostNetwork: true
  metricsPort: $cport
  probePort: $cprobe
  nodeSelector: {kubernetes.io/hostname: "$NODE_1_NAME"}
nodeAgent: {hostNetwork: true}
runtimeClass: {name: soak-gvisor}
priorityClass: {name: soak-execution}
config:
  profiles:
    python: {image: "$RUNNER_PYTHON_IMAGE", command: [/airlock/bin/run, python3, main.py], sourceFile: main.py}
  quota: {executions: $((n + 60)), storedExecutions: $((n + 60)), cpu: "1000", memory: 1000Gi}
YAML
aport=("$(port)" "$(port)")
"$top/tests/cluster/chart-node-values.sh" "$top/.cluster/env" "${aport[0]}:$(port)" \
	"${aport[1]}:$(port)" >"$work/groups.yaml"
for i in "${nodes[@]}"; do
	k label node "$i" node-restriction.kubernetes.io/airlock-gvisor=true --overwrite >/dev/null
done
# A release an earlier soak left (killed before its trap ran) goes first.
if "$HELM" status "$rel" -n "$relns" >/dev/null 2>&1; then
	log "uninstalling the release an earlier soak left"
	"$HELM" uninstall "$rel" -n "$relns" --wait >/dev/null
fi
"$HELM" install "$rel" "$top/charts/airlock" -n "$relns" --create-namespace \
	-f "$work/values.yaml" -f "$work/groups.yaml" --wait --timeout 180s >"$work/helm-install.txt"

# ready: the controller's Deployment and both groups' DaemonSets rolled
# out, every pod of the current spec ready.
ready() {
	k -n "$relns" rollout status deploy/"$rel-airlock-controller" --timeout "${1:-180}s" >/dev/null &&
		k -n "$relns" rollout status ds/"$rel-airlock-node-agent-node-1" --timeout "${1:-180}s" >/dev/null &&
		k -n "$relns" rollout status ds/"$rel-airlock-node-agent-node-2" --timeout "${1:-180}s" >/dev/null
}
ready 180 || die "the chart's daemons are not ready in 180 s"
ctl_node=$(k -n "$relns" get pods -l app.kubernetes.io/component=controller \
	-o jsonpath='{.items[0].spec.nodeName}')
log "installed; the controller runs on $ctl_node"
# The daemons' processes, by their command lines (the ports are this
# install's own, so another clone's chart is never matched).
ctl_pid() { pgrep -f "^/usr/local/bin/airlock-controller --config=/etc/airlock/config.yaml --metrics-addr=:$cport( |\$)" | head -n 1; }
agent_pid() { pgrep -f "^/usr/local/bin/airlock-node-agent --node-name=${nodes[$1]} .*--metrics-addr=:${aport[$1]}( |\$)" | head -n 1; }
# agent_pod I: node I+1's agent pod; agent_ready I [OLD [SINCE]]: it is
# another than OLD, Ready, and its container running since SINCE (epoch
# seconds) or later; waits at most 180 s.
agent_pod() {
	k -n "$relns" get pods -l "app.kubernetes.io/component=node-agent,airlock.dev/node-group=node-$(($1 + 1))" \
		-o jsonpath='{.items[0].metadata.name}' 2>/dev/null || true
}
agent_ready() {
	local deadline=$((SECONDS + 180)) p r t
	while ((SECONDS < deadline)); do
		p=$(agent_pod "$1")
		r=$(k -n "$relns" get pod "$p" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status} {.status.containerStatuses[0].state.running.startedAt}' 2>/dev/null) || r=
		t=$(date -d "${r#* }" +%s 2>/dev/null) || t=0
		if [ -n "$p" ] && [ "$p" != "${2-}" ] && [ "${r%% *}" = True ] && ((t >= ${3:-0})); then
			return 0
		fi
		sleep 1
	done
	return 1
}

k create ns "$ns" >/dev/null
until k -n "$ns" get serviceaccount default >/dev/null 2>&1; do sleep 0.2; done

# make_cx NAME KIND [HOLD [SLOW]]: the execution's manifest; HOLD s of
# sleep before its work, the slow kind's sleep SLOW s (3).
make_cx() {
	local src timeout=300 res=', "resources": {"cpu": "50m"}' pre=''
	[ "${3:-0}" = 0 ] || pre="import time\\ntime.sleep($3)\\n"
	case $2 in
	normal) src="print('$1')" ;;
	slow) src="import time\\ntime.sleep(${4:-3})\\nprint('$1')" ;;
	timeout) src="while True:\\n    pass"; timeout=4 ;;
	oom) src="b = bytearray(400 * 1024 * 1024)\\nprint(len(b))"; res=', "resources": {"cpu": "50m", "memory": "128Mi"}' ;;
	big) src="import sys\\nsys.stdout.write('x' * 307200)" ;;
	esac
	# The hold wave's timeout kind sleeps past its deadline, HOLD + 30 s,
	# rather than spin: ten spinning for seconds on two cores would slow
	# the starts of the other forty. It ends DeadlineExceeded all the same.
	if [ "$2" = timeout ] && [ "${3:-0}" != 0 ]; then
		src="time.sleep(100000)" timeout=$(($3 + 30))
	fi
	printf '{"apiVersion":"airlock.dev/v1alpha1","kind":"CodeExecution","metadata":{"name":"%s","namespace":"%s","labels":{"soak-kind":"%s"}},"spec":{"runtime":"python","timeoutSeconds":%d,"source":"%s%s\\n"%s}}\n' \
		"$1" "$ns" "$2" "$timeout" "$pre" "$src" "$res"
}
kinds=(normal slow timeout oom big)
# wave FROM TO [HOLD [SLOW]]
wave() {
	local from=$1 to=$2 i
	{
		echo '{"apiVersion":"v1","kind":"List","items":['
		for ((i = from; i < to; i++)); do
			((i == from)) || echo ,
			make_cx "soak-$i" "${kinds[i % 5]}" "${3:-0}" "${4:-3}"
		done
		echo ']}'
	} >"$work/wave.json"
	k create -f "$work/wave.json" >/dev/null
	log "made soak-$from..soak-$((to - 1))"
}
# (Nothing while the API server is away, rather than a failure.)
phases() { k -n "$ns" get cx -o jsonpath='{range .items[*]}{.status.phase} {.status.nodeName}{"\n"}{end}' 2>/dev/null || true; }
running() { phases | grep -c '^Running ' || true; }
# running_on NODE: its executions not ended yet (pending or running).
running_on() { phases | awk -v n="$1" '$2 == n && $1 != "Succeeded" && $1 != "Failed" && $1 != "TimedOut" && $1 != "Cancelled"' | wc -l; }

# Warm-up, then the controller's RSS before. The chart's controller sets
# a namespace's guardrails up at its first execution; until the stored
# quota has a status the API server refuses creates ("status unknown for
# quota"), so the first goes alone.
{ echo '{"apiVersion":"v1","kind":"List","items":['; make_cx warm-0 normal; echo ']}'; } >"$work/warm0.json"
k create -f "$work/warm0.json" >/dev/null
deadline=$((SECONDS + 60))
until [ -n "$(k -n "$ns" get resourcequota airlock-stored -o jsonpath='{.status.hard}' 2>/dev/null)" ]; do
	((SECONDS < deadline)) || die "the namespace's stored quota had no status 60 s after its first execution"
	sleep 0.5
done
{
	echo '{"apiVersion":"v1","kind":"List","items":['
	for i in 1 2 3 4 5 6 7 8 9; do ((i == 1)) || echo ,; make_cx "warm-$i" normal; done
	echo ']}'
} >"$work/warm.json"
k create -f "$work/warm.json" >/dev/null
deadline=$((SECONDS + 300))
until [ "$(phases | grep -c '^Succeeded ' || true)" = 10 ]; do
	((SECONDS < deadline)) || die "the warm-up did not succeed in 300 s: $(phases | tr '\n' ' ')"
	sleep 1
done
k -n "$ns" delete cx --all --wait=true >/dev/null
sleep 5
ctl0=$(ctl_pid) || die "no controller process (pgrep)"
rss_ctl0=$(rss_kb "$ctl0")
log "RSS before: controller $rss_ctl0 kB (pid $ctl0)"

q=$((n / 4))
t0=$(now)
faults=()
# Wave 1, every one held: the API server SIGKILLed once 50 run, or once
# the count stopped growing for 20 s (at most 240 s).
wave 0 "$q" "$hold"
want=$((q < 50 ? q : 50)) best=0 since=$SECONDS deadline=$((SECONDS + 240))
while :; do
	r=$(running)
	if ((r > best)); then best=$r since=$SECONDS; fi
	((r >= want || (best > 0 && SECONDS - since >= 30) || SECONDS >= deadline)) && break
	sleep 1
done
at_restart=$(running)
log "$at_restart running (at most $best seen); the API server SIGKILLed"
restart --kill apiserver >&2
faults+=("API server SIGKILLed with $at_restart executions Running")
# An agent pod deleted while its node runs executions: the DaemonSet's.
i=0
(($(running_on "${nodes[1]}") > $(running_on "${nodes[0]}"))) && i=1
on=$(running_on "${nodes[i]}") pod=$(agent_pod "$i")
f0=$(now)
k -n "$relns" delete pod "$pod" --wait=false >/dev/null
agent_ready "$i" "$pod" || die "the agent pod on ${nodes[i]} was not replaced in 180 s"
faults+=("agent pod $pod on ${nodes[i]} deleted with $on executions not ended there, replaced by its DaemonSet in $(awk -v a="$f0" -v b="$(now)" 'BEGIN { printf "%.0f", b - a }') s")
# Wave 2: both agents rolled by an upgrade while it runs.
wave "$q" $((2 * q))
sleep 5
"$HELM" upgrade "$rel" "$top/charts/airlock" -n "$relns" --reuse-values \
	--set nodeAgent.logLevel=debug >"$work/helm-upgrade.txt"
ready 240 || die "the agents were not rolled in 240 s"
faults+=("helm upgrade --set nodeAgent.logLevel=debug rolled both agents")
restart --kill etcd >&2; faults+=("etcd SIGKILLed")
f0=$(now); restart containerd "$NODE_1_NAME" >&2; faults+=("containerd restarted on $NODE_1_NAME")
echo "$NODE_1_NAME $f0 $(now)" >>"$work/windows.txt"
# Wave 3, its slow kind 30 s: what runs on node 2 when it is lost.
wave $((2 * q)) $((3 * q)) 0 30
sleep 5; f0=$(now); restart kubelet "$NODE_2_NAME" >&2; faults+=("kubelet restarted on $NODE_2_NAME")
echo "$NODE_2_NAME $f0 $(now)" >>"$work/windows.txt"
# Node 2 lost once at most 5% of N of its executions are left (at most
# 120 s): each becomes NodeLost, an excused bucket capped at 5%.
deadline=$((SECONDS + 120)) few=$((n * 5 / 100 > 2 ? n * 5 / 100 - 2 : 0))
until (($(running_on "$NODE_2_NAME") <= few)) || ((SECONDS >= deadline)); do sleep 1; done
on=$(running_on "$NODE_2_NAME")
ctl_at=$(k -n "$relns" get pods -l app.kubernetes.io/component=controller \
	-o jsonpath='{.items[*].spec.nodeName}' 2>/dev/null) || ctl_at=unknown
lost_at=$(now) node2_down=1
restart stop-node "$NODE_2_NAME" >&2
# The last wave once the node is NotReady, so that it goes to node 1.
deadline=$((SECONDS + 90))
until [ "$(k get node "$NODE_2_NAME" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null ||
	echo True)" != True ] ||
	((SECONDS >= deadline)); do sleep 1; done
wave $((3 * q)) "$n"
t_made=$(now)
sleep 20
restart start-node "$NODE_2_NAME" >&2
node2_down=
back=$(now)
echo "$NODE_2_NAME $lost_at $back" >>"$work/windows.txt"
# (Its lost node is the controller's too if it was scheduled there.)
faults+=("$NODE_2_NAME lost with $on executions not ended there (kubelet, containerd, sandboxes and its pods' processes, the agent's too, SIGKILLed; the controller was on ${ctl_at:-no node}), back after $(awk -v a="$lost_at" -v b="$back" 'BEGIN { printf "%.0f", b - a }') s (20 s after the last wave, made once the node was NotReady)")
agent_ready 1 "" "${lost_at%.*}" || log "warning: node 2's agent is not ready 180 s after its node came back"

# Drain: every execution terminal.
terminal() { phases | grep -cE '^(Succeeded|Failed|TimedOut|Cancelled) ' || true; }
deadline=$((SECONDS + 900))
while [ "$(terminal)" != "$n" ] && ((SECONDS < deadline)); do sleep 2; done
t_drained=$(now)
log "drained: $(terminal) of $n terminal"
k -n "$ns" get cx -o json >"$work/cx.json"
k -n "$ns" get events -o json >"$work/events.json"

# Left behind, after the kubelets' container GC (once a minute) and the
# agents' sweep: each a line; a check whose command fails is one too, so a
# wrong path or a broken runsc never reads as clean.
cgmem=${SOAK_CGROUP_MEMORY:-/sys/fs/cgroup/memory}
left() {
	local i d r c uids
	# Pods that exist (the daemons' among them) keep their cgroups.
	uids=$(k get pods -A -o jsonpath='{range .items[*]}{.metadata.uid}{"\n"}{end}') ||
		echo "check failed: kubectl get pods -A"
	for i in 1 2; do
		d=NODE_${i}_POD_LOGS_DIR r=NODE_${i}_RUNSC_ROOT c=NODE_${i}_CGROUP_ROOT
		find "${!d}" -mindepth 1 -maxdepth 1 -name "${ns}_*" ||
			echo "check failed: the pod logs of node $i (${!d})"
		"$RUNSC" --root "${!r}" list -quiet ||
			echo "check failed: runsc list on node $i (${!r})"
		{ find "$cgmem${!c}" -mindepth 2 -type d -name 'pod*' ||
			echo "check failed: the pod cgroups of node $i ($cgmem${!c})"; } |
			while read -r p; do
				case $p in "check failed"*) echo "$p"; continue ;; esac
				u=${p##*/pod} u=${u//_/-}
				grep -qxF "$u" <<<"$uids" || echo "$p"
			done
	done
	k -n "$ns" get pods -o name || echo "check failed: kubectl get pods -n $ns"
}
for _ in $(seq 30); do
	left >"$work/left.txt"
	[ -s "$work/left.txt" ] || break
	sleep 5
done
ctl1=$(ctl_pid || true)
rss_ctl1=$(rss_kb "${ctl1:-0}")
rss_a1=$(rss_kb "$(agent_pid 0 || echo 0)") rss_a2=$(rss_kb "$(agent_pid 1 || echo 0)")

printf '%s\n' "${faults[@]}" >"$work/faults.txt"
python3 - "$work" <<PY
import json, sys
w = sys.argv[1]
json.dump({"n": $n, "lost_node": "$NODE_2_NAME", "t0": $t0, "t_made": $t_made,
           "t_drained": $t_drained, "faults": open(w + "/faults.txt").read().splitlines(),
           "running_at_restart": $at_restart, "controller_node": "$ctl_node",
           "cores": $(nproc), "kernel": "$(uname -r)",
           "rss": {"controller": [$rss_ctl0, $rss_ctl1], "controller_pids": ["$ctl0", "${ctl1-}"],
                   "agents": {"$NODE_1_NAME": $rss_a1, "$NODE_2_NAME": $rss_a2}}},
          open(w + "/meta.json", "w"))
PY
set +e
python3 "$top/bench/soak_report.py" "$work" | tee "$work/report.md"
rc=${PIPESTATUS[0]}
set -e
{
	echo
	echo "## bench/soak.sh $n ($(date -u +%F), $(git -C "$top" rev-parse --short HEAD))"
	echo
	echo "Machine: $(nproc) cores, kernel $(uname -r)."
	echo
	cat "$work/report.md"
} >>"$top/bench/RESULTS.md"
exit "$rc"
