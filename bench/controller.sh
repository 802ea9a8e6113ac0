#!/usr/bin/env bash
# Benchmark: airlock-controller memory with N CodeExecutions cached, and
# reconcile throughput (CodeExecution created -> pod created and status
# Pending), each beside a baseline from the same run:
#   memory:     the same controller, synced, with nothing to cache
#   throughput: kubectl creating the same number of pods directly
# Memory is measured twice: with N executions in flight, each with its pod
# (the worst case: all of them at once), and with N finished executions
# waiting out their TTL with their pods collected (the steady state: at
# the default TTL of an hour, 5000 cached is ~1.4 executions a second).
# Needs the test control plane (make cluster-up) and `make`. Not a test:
# it prints numbers and appends them to bench/RESULTS.md.
#
# usage: bench/controller.sh [N]      (default 5000)
set -euo pipefail
n=${1:-5000}
. "$(dirname "$0")/lib.sh"
ns=bench-$$
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; k delete ns "$ns" --wait=false >/dev/null 2>&1; rm -rf "$work"' EXIT

rss_kib() { awk '/^VmRSS/ { print $2 }' "/proc/$1/status"; }

bench_install
k create ns "$ns" >/dev/null
k create ns "$ns-base" >/dev/null
k -n "$ns-base" create serviceaccount default >/dev/null   # no controller-manager makes it
bench_config airlock/runner-python:0.1 "[python3, /airlock/code/main.py]" \
	'quota: {executions: 1000000, cpu: "100000", memory: 100000Gi}'

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
start_controller() {	# LOG: started and ready, its pid in $pid
	"$top/bin/airlock-controller" --config "$work/config.yaml" --kubeconfig "$KUBECONFIG_ADMIN" \
		--namespace "$ns" --lease-namespace "$ns" --metrics-addr "$addr" --workers 2 \
		--log-level warn > "$1" 2>&1 &
	pid=$!
	until curl -sf "http://$addr/readyz" >/dev/null 2>&1; do sleep 0.2; done
}
start_controller "$work/controller.log"
sleep 2
rss_idle=$(rss_kib "$pid")

# Baseline: the API server and kubectl alone creating N pods.
t0=$(now)
k -n "$ns-base" create -f "$work/pods.json" >/dev/null
t1=$(now)
base_s=$(echo "$t1 - $t0" | bc)

# Airlock: N executions created; done when every one is Pending.
t0=$(now)
k -n "$ns" create -f "$work/cx.json" >/dev/null
t_created=$(now)
while :; do
	p=$(metric "$addr" 'airlock_executions_total{phase="Pending"}')
	[ "${p:-0}" -ge "$n" ] && break
	sleep 0.2
done
t1=$(now)
sleep 3
rss_full=$(rss_kib "$pid")
create_s=$(echo "$t_created - $t0" | bc)
total_s=$(echo "$t1 - $t0" | bc)
pods=$(k -n "$ns" get pods --no-headers 2>/dev/null | wc -l)

# The same N, finished: play the node agent (write each one's result, delete
# its pod), then start a fresh controller and let it cache them.
kill "$pid"; wait "$pid" 2>/dev/null || true
k -n "$ns" delete pods --all --force --grace-period=0 --wait=false >/dev/null 2>&1
until [ "$(k -n "$ns" get pods --no-headers 2>/dev/null | wc -l)" -eq 0 ]; do sleep 1; done
"$KUBECTL" --kubeconfig "$KUBECONFIG_ADMIN" config view --raw -o json > "$work/kc.json"
python3 - "$n" "$work" "$ns" "$APISERVER_URL" <<'PY'
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
start_controller "$work/controller2.log"
sleep 5
rss_done=$(rss_kib "$pid")
left=$(k -n "$ns" get pods --no-headers 2>/dev/null | wc -l)
[ "$left" -eq 0 ] || { echo "bench: $left pods came back for finished executions" >&2; exit 1; }

cpu=$(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo)
mem=$(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo)
{
	echo
	echo "## controller, $(date -u +%Y-%m-%d) - N=$n"
	echo
	echo "Machine: $(nproc) cores ($cpu), $mem; kube-apiserver v1.37.2 and etcd v3.7.3 on loopback (tests/cluster)."
	echo
	echo "| measure | baseline | airlock | ratio |"
	echo "|---|---|---|---|"
	echo "| RSS, KiB (baseline: synced, nothing cached) | $rss_idle | $rss_full ($n executions + $pods pods cached) | $(ratio $rss_full $rss_idle)x |"
	echo "| RSS per execution (execution + its pod), KiB | | $(echo "scale=1; ($rss_full - $rss_idle) / $n" | bc) | |"
	echo "| RSS, KiB, $n finished executions cached (pods collected) | $rss_idle | $rss_done | $(echo "scale=2; $rss_done / $rss_idle" | bc)x |"
	echo "| RSS per finished execution, bytes | | $(echo "($rss_done - $rss_idle) * 1024 / $n" | bc) | |"
	echo "| $n objects created, s (baseline: kubectl creates pods) | $base_s | $create_s (kubectl creates executions) | |"
	echo "| created -> every execution Pending with its pod, s | | $total_s | $(echo "scale=2; $total_s / $base_s" | bc)x baseline |"
	echo "| executions reconciled per second | $(echo "scale=0; $n / $base_s" | bc) pods/s | $(echo "scale=0; $n / $total_s" | bc) | |"
} | tee -a "$top/bench/RESULTS.md"
