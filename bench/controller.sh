#!/usr/bin/env bash
# Benchmark: airlock-controller reconcile throughput and memory, each beside
# a baseline from the same run, repeated R times:
#   throughput: N CodeExecutions are created while no controller runs; the
#               clock starts when the controller starts and stops when every
#               one is Pending with its pod. Baseline: kubectl creating the
#               same N pods directly (the API server's own cost of N pods),
#               into a namespace with a pods quota as the executions' has
#               (admission writes each pod into the quota's status).
#               Both print the API requests each cost, by verb and resource.
#   floor:      the same N executions given their pods and status by
#               bench/api_floor, a client that does nothing else (no watch,
#               no cache), with the controller's 2 status writes each, with
#               1, and with none: what the requests alone cost, whatever
#               the controller around them does.
#   memory:     RSS once the controller is ready (/readyz: informers synced
#               and the leader's first pass done), against the same
#               controller ready on an empty namespace; with N executions in
#               flight, each with its pod (read once the work queue is
#               empty), and with N finished executions waiting out their TTL
#               with their pods collected (a fresh controller, read at ready);
#               each of the two again 3 s after the queue drained (settled:
#               the caches packed and the heap trimmed, as when idle).
#               Beside them, the stack's floor: bench/rss_floor, linked as
#               the controller is, after one SHA-256 and one TLS request.
# Each round uses fresh namespaces. Medians over the rounds, with min-max.
# Needs the test control plane (make cluster-up) and `make`. Not a test:
# it prints numbers and appends them to bench/RESULTS.md.
#
# The controller runs with the chart's default of 4 workers (WORKERS=);
# CONTROLLER= runs another build of it (an A/B against an older commit),
# and RESULTS= appends the table elsewhere than bench/RESULTS.md. Each phase
# also prints what the API server and etcd spent on it in CPU time;
# APIPROF=FILE saves the API server's CPU profile (APIPROF_S seconds, 10)
# from the start of round 1's controller phase, and FILE.base of its
# baseline (go tool pprof -top FILE); the cluster must serve it
# (AIRLOCK_APISERVER_PROFILING=1 make cluster-up).
#
# usage: bench/controller.sh [N [R]]      (default 5000 3)
set -euo pipefail
n=${1:-5000}
rounds=${2:-3}
. "$(dirname "$0")/lib.sh"
pid=
nss=()
# Under set -e a failing command in the trap (kill with no controller left)
# would be the script's exit status: each is allowed to fail.
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; for x in "${nss[@]}"; do k delete ns "$x" --wait=false >/dev/null 2>&1 || true; done; rm -rf "$work"' EXIT

rss_kib() { awk '/^VmRSS/ { print $2 }' "/proc/$1/status"; }
# The CPU time the API server and etcd have used, ms (utime + stime): each
# phase's share is what it cost the control plane, whoever was waiting.
cluster_dir=$(dirname "$KUBECONFIG_ADMIN")
tick=$(getconf CLK_TCK)
cpu_ms() { awk -v t="$tick" '{ print int(($14 + $15) * 1000 / t) }' "/proc/$(cat "$cluster_dir/$1.pid")/stat"; }
cp_cpu() { echo "$(cpu_ms kube-apiserver) $(cpu_ms etcd)"; }
# cp_per BEFORE AFTER N: "API server A ms, etcd E ms" per one of N.
cp_per() { echo "$1 $2" | awk -v n="$3" '{ printf "%.2f %.2f", ($3 - $1) / n, ($4 - $2) / n }'; }
# prof_start ROUND FILE: with APIPROF set, in round 1, the API server's CPU
# profile into FILE, taken in the background until prof_wait.
prof_pid=
prof_start() {
	[ -n "${APIPROF-}" ] && [ "$1" = 1 ] || return 0
	k get --raw "/debug/pprof/profile?seconds=${APIPROF_S:-10}" > "$2" &
	prof_pid=$!
}
prof_wait() { [ -z "$prof_pid" ] || { wait "$prof_pid" || true; prof_pid=; }; }
# Of that, the process's own memory (heap, stacks), not the shared
# libraries' pages.
anon_kib() { awk '/^RssAnon/ { print $2 }' "/proc/$1/status"; }

bench_install
bench_config airlock/runner-python:0.1 "[python3, /airlock/code/main.py]" \
	'quota: {executions: 1000000, storedExecutions: 1000000, cpu: "100000", memory: 100000Gi}'

# N executions and N plain pods of the same program, as one List each.
python3 - "$n" "$work" <<'PY'
import json, sys
n, work = int(sys.argv[1]), sys.argv[2]
src = "import sys\nprint(sum(range(10)))\n"
cx = {"apiVersion": "v1", "kind": "List", "items": [
    {"apiVersion": "airlock.dev/v1alpha1", "kind": "CodeExecution",
     "metadata": {"name": "cx-%05d" % i}, "spec": {"runtime": "python", "source": src}}
    for i in range(n)]}
pods = {"apiVersion": "v1", "kind": "List", "items": [
    {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "pod-%05d" % i,
     "annotations": {"airlock.dev/source": src}},
     "spec": {"restartPolicy": "Never", "containers": [{"name": "run",
       "image": "airlock/runner-python:0.1", "command": ["python3", "main.py"]}]}}
    for i in range(n)]}
json.dump(cx, open(work + "/cx.json", "w"))
json.dump(pods, open(work + "/pods.json", "w"))
PY

addr=127.0.0.1:$(port)
floor=$top/build/plain/bench/api_floor
[ -x "$floor" ] && [ -x "$top/build/plain/bench/rss_floor" ] ||
	{ echo "bench: build/plain/bench/{api,rss}_floor are missing (make)" >&2; exit 1; }
# The memory floor: a process linked as the controller is, after one
# SHA-256 and one TLS request (bench/rss_floor), "rss file anon" KiB.
read -r stack_rss stack_file stack_anon <<<"$("$top/build/plain/bench/rss_floor" "$KUBECONFIG_ADMIN" |
	sed 's/rss=\([0-9]*\) file=\([0-9]*\) anon=\([0-9]*\)/\1 \2 \3/')"
start_controller() {	# NS LOG: started and ready, its pid in $pid
	"${CONTROLLER:-$top/bin/airlock-controller}" --config "$work/config.yaml" --kubeconfig "$KUBECONFIG_ADMIN" \
		--namespace "$1" --lease-namespace "$1" --metrics-addr "$addr" --workers "${WORKERS:-4}" \
		--log-level warn > "$2" 2>&1 &
	pid=$!
	# Ready and leading: a replica that does not lead yet is ready once
	# synced (a standby is), before it has looked at anything.
	until [ "$(metric "$addr" airlock_leader 2>/dev/null)" = 1 ] &&
		curl -sf "http://$addr/readyz" >/dev/null 2>&1; do
		kill -0 "$pid" 2>/dev/null || { echo "bench: the controller exited; see $2" >&2; exit 1; }
		sleep 0.05
	done
}
stop_controller() { kill "$pid"; wait "$pid" 2>/dev/null || true; pid=; }
# The API server's request counts, "VERB resource[/subresource] COUNT" per
# line (every client's: in the controller's phase, the bench's own polls
# are a few reads).
api_counts() {
	k get --raw /metrics | awk '/^apiserver_request_total\{/ {
		v = $0; sub(/.*verb="/, "", v); sub(/".*/, "", v)
		r = $0; sub(/.*[{,]resource="/, "", r); sub(/".*/, "", r)
		s = ""; if ($0 ~ /subresource="[^"]/) { s = $0; sub(/.*subresource="/, "", s); sub(/".*/, "", s); s = "/" s }
		n[v " " r s] += $NF } END { for (x in n) print x, n[x] }' | sort
}
# api_per BEFORE AFTER N: what changed between two api_counts, per one of N,
# the busiest first, as "VERB resource x.xx; ...".
api_per() {
	join -a 2 -e 0 -o 0,1.2,2.2 <(awk '{ print $1 "_" $2, $3 }' "$1" | sort) \
		<(awk '{ print $1 "_" $2, $3 }' "$2" | sort) |
		awk -v n="$3" '{ d = ($3 - $2) / n; if (d >= 0.01) printf "%s %.2f\n", $1, d }' |
		sort -k2 -gr | awk '{ sub(/_/, " ", $1); printf "%s%s %s", (NR > 1 ? "; " : ""), $1, $2 } END { print "" }'
}

# The same N, finished: play the node agent (write each one's result; the
# pods are deleted by the caller).
finish_all() {	# NS
	"$KUBECTL" --kubeconfig "$KUBECONFIG_ADMIN" config view --raw -o json > "$work/kc.json"
	python3 - "$n" "$work" "$1" "$APISERVER_URL" <<'PY'
import base64, concurrent.futures, datetime, http.client, json, ssl, sys, threading, urllib.parse
n, work, ns, url = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
kc = json.load(open(work + "/kc.json"))
u, cl = kc["users"][0]["user"], kc["clusters"][0]["cluster"]
for f, k in (("crt", "client-certificate-data"), ("key", "client-key-data"), ("ca", None)):
    data = cl["certificate-authority-data"] if k is None else u[k]
    open("%s/%s.pem" % (work, f), "wb").write(base64.b64decode(data))
ctx = ssl.create_default_context(cafile=work + "/ca.pem")
ctx.load_cert_chain(work + "/crt.pem", work + "/key.pem")
host = urllib.parse.urlparse(url)
local = threading.local()
now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
def done(i):
    if not hasattr(local, "c"):
        local.c = http.client.HTTPSConnection(host.hostname, host.port, context=ctx)
    st = {"phase": "Succeeded", "reason": "Completed", "exitCode": 0,
          "stdout": "45\n", "stderr": "", "stdoutBytes": 3, "stderrBytes": 0,
          "stdoutTruncated": False, "stderrTruncated": False,
          "completionTime": now, "durationMillis": 412,
          "conditions": [{"type": t, "status": "True", "reason": r, "message": m,
                          "observedGeneration": 1, "lastTransitionTime": now}
                         for t, r, m in (("Scheduled", "Scheduled", "scheduled to node node-1"),
                                         ("Started", "Started", "the program is running"),
                                         ("Complete", "Completed", "exit code 0"))]}
    local.c.request("PATCH", "/apis/airlock.dev/v1alpha1/namespaces/%s/codeexecutions/cx-%05d/status" % (ns, i),
                    json.dumps({"status": st}), {"Content-Type": "application/merge-patch+json"})
    r = local.c.getresponse(); r.read()
    if r.status != 200:
        raise SystemExit("status patch of cx-%05d: HTTP %d" % (i, r.status))
with concurrent.futures.ThreadPoolExecutor(8) as ex:
    list(ex.map(done, range(n)))
PY
}

# pods_quota NS: the same quota work as the executions' pods pay
# (admission counts each pod into the quota's status, one more write): a
# pods quota, its status set as the quota controller would (this cluster
# runs none).
pods_quota() {
	k -n "$1" create quota base --hard=pods=1000000 >/dev/null
	k -n "$1" patch quota base --subresource=status --type=merge \
		-p '{"status":{"hard":{"pods":"1000000"},"used":{"pods":"0"}}}' >/dev/null
}

for r in $(seq "$rounds"); do
	ns=bench-$$-$r
	nss+=("$ns" "$ns-base" "$ns-idle")
	k create ns "$ns" >/dev/null
	k create ns "$ns-base" >/dev/null
	k create ns "$ns-idle" >/dev/null
	k -n "$ns-base" create serviceaccount default >/dev/null   # no controller-manager makes it
	pods_quota "$ns-base"

	# Idle: ready on an empty namespace.
	start_controller "$ns-idle" "$work/controller-idle-$r.log"
	rss_idle[r]=$(rss_kib "$pid")
	anon_idle[r]=$(anon_kib "$pid")
	stop_controller

	# Baseline: the API server and kubectl alone creating N pods.
	api_counts > "$work/api-base-before"
	c0=$(cp_cpu)
	prof_start "$r" "${APIPROF-}.base"
	t0=$(now)
	k -n "$ns-base" create -f "$work/pods.json" >/dev/null
	prof_wait
	base_s[r]=$(echo "$(now) - $t0" | bc)
	read -r base_api_ms[r] base_etcd_ms[r] <<<"$(cp_per "$c0" "$(cp_cpu)" "$n")"
	api_counts > "$work/api-base-after"
	api_base[r]=$(api_per "$work/api-base-before" "$work/api-base-after" "$n")
	# No namespace controller runs on this control plane: what a phase
	# made goes once it is measured (one collection delete; pods with no
	# node go at once), so that each phase finds the API server's caches
	# as the one before it did.
	k delete --raw "/api/v1/namespaces/$ns-base/pods" >/dev/null

	# Airlock: N executions created while no controller runs, then the
	# controller alone, from its start to every one Pending with its pod.
	t0=$(now)
	k -n "$ns" create -f "$work/cx.json" >/dev/null
	create_s[r]=$(echo "$(now) - $t0" | bc)
	api_counts > "$work/api-before"
	c0=$(cp_cpu)
	prof_start "$r" "${APIPROF-}"
	t0=$(now)
	start_controller "$ns" "$work/controller-$r.log"
	ready_s[r]=$(echo "$(now) - $t0" | bc)
	while :; do
		p=$(metric "$addr" 'airlock_executions_total{phase="Pending"}')
		[ "${p:-0}" -ge "$n" ] && break
		sleep 0.05
	done
	total_s[r]=$(echo "$(now) - $t0" | bc)
	until [ "$(metric "$addr" airlock_workqueue_depth)" = 0 ]; do sleep 0.05; done
	read -r cx_api_ms[r] cx_etcd_ms[r] <<<"$(cp_per "$c0" "$(cp_cpu)" "$n")"
	prof_wait
	api_counts > "$work/api-after"
	api[r]=$(api_per "$work/api-before" "$work/api-after" "$n")
	reconciles[r]=$(echo "scale=2; $(metric "$addr" airlock_reconcile_seconds_count) / $n" | bc)
	rss_full[r]=$(rss_kib "$pid")
	anon_full[r]=$(anon_kib "$pid")
	# Settled: the controller packs its caches and trims the heap when its
	# queue drains, at most once a second (its node check comes every
	# second): read again 3 s on.
	sleep 3
	rss_full_s[r]=$(rss_kib "$pid")
	pods[r]=$(k -n "$ns" get pods --no-headers 2>/dev/null | wc -l)
	[ "${pods[r]}" -eq "$n" ] || { echo "bench: ${pods[r]} pods for $n executions" >&2; exit 1; }
	stop_controller

	# Finished: results written, pods gone, a fresh controller ready.
	k -n "$ns" delete pods --all --force --grace-period=0 --wait=false >/dev/null 2>&1
	until [ "$(k -n "$ns" get pods --no-headers 2>/dev/null | wc -l)" -eq 0 ]; do sleep 1; done
	finish_all "$ns"
	start_controller "$ns" "$work/controller-done-$r.log"
	rss_done[r]=$(rss_kib "$pid")
	anon_done[r]=$(anon_kib "$pid")
	until [ "$(metric "$addr" airlock_workqueue_depth)" = 0 ]; do sleep 0.05; done
	sleep 3
	rss_done_s[r]=$(rss_kib "$pid")
	stop_controller
	left=$(k -n "$ns" get pods --no-headers 2>/dev/null | wc -l)
	[ "$left" -eq 0 ] || { echo "bench: $left pods came back for finished executions" >&2; exit 1; }
	k delete --raw "/apis/airlock.dev/v1alpha1/namespaces/$ns/codeexecutions" >/dev/null
	# The floor: the same N executions, each given its pod and status by
	# api_floor (no controller: no watch, cache, queue or guardrails), with
	# 2 status writes as the controller makes, with 1, and with none:
	# what any controller must cost the API server, whatever its design.
	for w in 2 1 0; do
		fns=$ns-floor$w
		nss+=("$fns")
		k create ns "$fns" >/dev/null
		k -n "$fns" create serviceaccount airlock-execution >/dev/null
		pods_quota "$fns"
		k -n "$fns" create -f "$work/cx.json" >/dev/null
		c0=$(cp_cpu)
		out=$("$floor" "$KUBECONFIG_ADMIN" "$work/config.yaml" "$fns" "${WORKERS:-4}" "$w")
		floor_s[w * 100 + r]=$(sed 's/.*seconds=\([0-9.]*\).*/\1/' <<<"$out")
		read -r fa _ <<<"$(cp_per "$c0" "$(cp_cpu)" "$n")"
		floor_api_ms[w * 100 + r]=$fa
		echo "bench: round $r: floor, $w status writes: $out" >&2
		k delete --raw "/api/v1/namespaces/$fns/pods" >/dev/null
		k delete --raw "/apis/airlock.dev/v1alpha1/namespaces/$fns/codeexecutions" >/dev/null
	done

	echo "bench: round $r: pods ${base_s[r]} s, controller ${total_s[r]} s (ready at ${ready_s[r]} s)," \
		"RSS idle ${rss_idle[r]} full ${rss_full[r]} done ${rss_done[r]} KiB" >&2
done

# med / spread FMT VALUES...: the median and "min-max" of the values, in
# printf format FMT.
med() { local f=$1; shift; printf '%s\n' "$@" | sort -g | awk -v f="$f" '{ v[NR] = $1 } END { m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf f, m }'; }
spread() { local f=$1; shift; printf '%s\n' "$@" | sort -g | awk -v f="$f" 'NR == 1 { lo = $1 } { hi = $1 } END { printf f "-" f, lo, hi }'; }
ratios=()
rate=()
api_ratio=()
for r in $(seq "$rounds"); do
	ratios+=("$(echo "scale=3; ${total_s[r]} / ${base_s[r]}" | bc)")
	rate+=("$(echo "scale=1; $n / ${total_s[r]}" | bc)")
	api_ratio+=("$(echo "scale=3; ${cx_api_ms[r]} / ${base_api_ms[r]}" | bc)")
	per_full+=("$(echo "scale=1; (${rss_full[r]} - ${rss_idle[r]}) / $n" | bc)")
	per_done+=("$(echo "(${rss_done[r]} - ${rss_idle[r]}) * 1024 / $n" | bc)")
	per_full_s+=("$(echo "(${rss_full_s[r]} - ${rss_idle[r]}) * 1024 / $n" | bc)")
	per_done_s+=("$(echo "(${rss_done_s[r]} - ${rss_idle[r]}) * 1024 / $n" | bc)")
done

cpu=$(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo)
mem=$(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo)
{
	echo
	echo "## controller, $(date -u +%Y-%m-%d) - N=$n, $rounds rounds"
	echo
	echo "Machine: $(nproc) cores ($cpu), $mem; kube-apiserver v1.37.2 and etcd v3.7.3 on loopback (tests/cluster)."
	echo "The executions are created with no controller running; its clock starts with the controller (${WORKERS:-4} workers)."
	echo "Medians over the rounds, min-max in brackets."
	echo
	echo "| measure | baseline | airlock | ratio |"
	echo "|---|---|---|---|"
	echo "| $n created, s | $(med %.2f "${base_s[@]}") [$(spread %.2f "${base_s[@]}")] (kubectl creates pods) | $(med %.2f "${create_s[@]}") [$(spread %.2f "${create_s[@]}")] (kubectl creates executions) | |"
	echo "| controller start -> ready (synced, first pass), s | | $(med %.2f "${ready_s[@]}") [$(spread %.2f "${ready_s[@]}")] | |"
	echo "| controller start -> every execution Pending with its pod, s | $(med %.2f "${base_s[@]}") (pods created) | $(med %.2f "${total_s[@]}") [$(spread %.2f "${total_s[@]}")] | $(med %.2f "${ratios[@]}")x [$(spread %.2f "${ratios[@]}")] |"
	for w in 2 1 0; do
		fs=() fa=() fr=()
		for r in $(seq "$rounds"); do
			fs+=("${floor_s[w * 100 + r]}")
			fa+=("${floor_api_ms[w * 100 + r]}")
			fr+=("$(echo "scale=3; ${floor_s[w * 100 + r]} / ${base_s[r]}" | bc)")
		done
		echo "| the floor (bench/api_floor, ${WORKERS:-4} threads, no controller): list, then each execution's pod and $w status writes, s; API server CPU ms per execution | | $(med %.2f "${fs[@]}") [$(spread %.2f "${fs[@]}")]; $(med %.2f "${fa[@]}") ms | $(med %.2f "${fr[@]}")x [$(spread %.2f "${fr[@]}")] |"
	done
	echo "| executions reconciled per second | | $(med %.2f "${rate[@]}") [$(spread %.2f "${rate[@]}")] | |"
	echo "| RSS, KiB, ready (baseline: ready on an empty namespace) | $(med %.0f "${rss_idle[@]}") [$(spread %.0f "${rss_idle[@]}")] | $(med %.0f "${rss_full[@]}") [$(spread %.0f "${rss_full[@]}")] ($n in flight + their pods) | |"
	echo "| RSS, KiB, of a process linked as the controller after one SHA-256 and one TLS request (bench/rss_floor): all / the libraries' pages / heap and stack | $stack_rss / $stack_file / $stack_anon | | |"
	echo "| RSS per execution in flight (execution + its pod), KiB | | $(med %.2f "${per_full[@]}") [$(spread %.2f "${per_full[@]}")] | |"
	echo "| RSS, KiB, ready with $n finished executions (pods collected) | | $(med %.0f "${rss_done[@]}") [$(spread %.0f "${rss_done[@]}")] | |"
	echo "| RSS, KiB, settled (3 s after the queue drained): $n in flight + their pods / $n finished | | $(med %.0f "${rss_full_s[@]}") [$(spread %.0f "${rss_full_s[@]}")] / $(med %.0f "${rss_done_s[@]}") [$(spread %.0f "${rss_done_s[@]}")] | |"
	echo "| RSS per execution, settled, bytes: in flight (+ its pod) / finished | | $(med %.0f "${per_full_s[@]}") [$(spread %.0f "${per_full_s[@]}")] / $(med %.0f "${per_done_s[@]}") [$(spread %.0f "${per_done_s[@]}")] | |"
	echo "| of which RssAnon (heap, stacks), KiB: ready / in flight / finished | $(med %.0f "${anon_idle[@]}") | $(med %.0f "${anon_full[@]}") / $(med %.0f "${anon_done[@]}") | |"
	echo "| RSS per finished execution, bytes | | $(med %.0f "${per_done[@]}") [$(spread %.0f "${per_done[@]}")] | |"
	echo "| reconciles per execution, controller start -> queue empty | | $(med %.2f "${reconciles[@]}") [$(spread %.2f "${reconciles[@]}")] | |"
	echo "| kube-apiserver CPU per pod / per execution, ms | $(med %.2f "${base_api_ms[@]}") [$(spread %.2f "${base_api_ms[@]}")] | $(med %.2f "${cx_api_ms[@]}") [$(spread %.2f "${cx_api_ms[@]}")] | $(med %.2f "${api_ratio[@]}")x |"
	echo "| etcd CPU per pod / per execution, ms | $(med %.2f "${base_etcd_ms[@]}") [$(spread %.2f "${base_etcd_ms[@]}")] | $(med %.2f "${cx_etcd_ms[@]}") [$(spread %.2f "${cx_etcd_ms[@]}")] | |"
	echo
	echo "API requests per pod, baseline (all clients; round 1 of $rounds): ${api_base[1]}"
	echo
	echo "API requests per execution, controller start -> queue empty (all clients; round 1 of $rounds): ${api[1]}"
} | tee -a "${RESULTS:-$top/bench/RESULTS.md}"
