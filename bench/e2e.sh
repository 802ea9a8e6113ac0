#!/usr/bin/env bash
# Benchmark: latency of `print(1)` in python on the real gVisor node, from
# the create request to the program's output in hand, over N runs each:
#
#   airlock  a CodeExecution: create -> status.phase Succeeded (the output
#            is in the status)
#   job      the baseline: a plain Job, runtimeClassName gvisor, the same
#            image and command: create -> Job complete -> `logs` read
#   cri      the raw floor: a pod sandbox and container started straight
#            through CRI on the node's containerd, runtime handler runsc,
#            the same image and command: RunPodSandbox -> exited -> CRI log
#            read (bench/cri_floor.c; crictl's module is not on the Go
#            proxy here)
#   floor    gVisor alone: `runsc do` on the host's root filesystem, no
#            containerd, no Kubernetes
#   exec     the exec floor, what a warm path cannot go under: the same
#            command exec'd into an already running gVisor sandbox through
#            containerd's Tasks API, output read from FIFOs (cri_floor -x:
#            a holder pod started untimed, then 5 execs in a row, each a
#            sample)
#
# and the two ways the controller delivers code (controller/docs/pod.md),
# with programs just under and just over the annotation budget (192 KiB):
#   annot    190 KiB of source: annotations + a downward-API volume
#   cmap     200 KiB of source: an owned ConfigMap, one more request
#
# Sequential runs, interleaved (airlock, job, cri, floor, airlock, ...), so
# drift hits all four alike. Each sample starts on a quiet node: no pod in
# the namespace and no running containerd task (the previous run's pod torn
# down, the kubelet back from the CRI run's pause and caught up); that wait
# is not timed, and its median is reported beside the results. Needs `make cluster-up NODE=1` and `make`.
# Not a test: it prints p50/p90 and p99 (with N >= 300; below that the
# highest, labelled max) and appends them to bench/RESULTS.md.
#
# usage: bench/e2e.sh [N]      (default 50)
set -euo pipefail
n=${1:-50}
. "$(dirname "$0")/lib.sh"
bench_need_node e2e.sh
ns=bench-e2e-$$
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
	k delete ns "$ns" --wait=false >/dev/null 2>&1
	rm -rf "$work"
}
trap cleanup EXIT

bench_install
k create ns "$ns" >/dev/null
until k -n "$ns" get serviceaccount default >/dev/null 2>&1; do sleep 0.2; done
bench_config "$RUNNER_PYTHON_IMAGE" "[/airlock/bin/run, python3, main.py]"
"$top/bin/airlock-controller" --config "$work/config.yaml" --kubeconfig "$KUBECONFIG_ADMIN" \
	--namespace "$ns" --lease-namespace "$ns" --metrics-addr 0 --log-level warn \
	> "$work/controller.log" 2>&1 &
pids+=($!)
aaddr=127.0.0.1:$(port)
"$top/bin/airlock-node-agent" --kubeconfig "$KUBECONFIG_ADMIN" --node-name "$NODE_NAME" \
	--namespace "$ns" --pod-logs-dir "$POD_LOGS_DIR" --containerd-socket "$CONTAINERD_SOCK" \
	--metrics-addr "$aaddr" --log-level warn > "$work/agent.log" 2>&1 &
pids+=($!)
k config view --raw -o json > "$work/kc.json"

mkdir -p "$work/runsc-root" "$work/cri-logs"
# The kubelet kills, at its next housekeeping (every 2 s), any running pod
# sandbox it has no pod for: the CRI runs pause it (SIGSTOP) for their
# half second, and only then.
kubelet=$(pgrep -f "kubelet --config=$top/.cluster/node/kubelet.yaml" | head -n1)
[ -n "$kubelet" ] || { echo "bench/e2e.sh: no kubelet of this clone running" >&2; exit 1; }
cri_floor=$top/build/plain/bench/cri_floor
[ -x "$cri_floor" ] || { echo "bench/e2e.sh: $cri_floor is not built (make)" >&2; exit 1; }
# The agent's own clock of its part, containerd's exit -> result stored:
# airlock_agent_record_seconds, read before and after the runs.
record_hist() { curl -sf "http://$aaddr/metrics" | grep '^airlock_agent_record_seconds' > "$1"; }
until curl -sf "http://$aaddr/readyz" >/dev/null 2>&1; do sleep 0.2; done
record_hist "$work/record.before"
python3 - "$n" "$work" "$ns" "$APISERVER_URL" "$RUNNER_PYTHON_IMAGE" "$RUNSC" \
	"$cri_floor" "$CONTAINERD_SOCK" "$kubelet" "$top/bench" <<'PY'
import json, os, subprocess, sys, time
n, work, ns, url, image, runsc, cri_floor, sock, kubelet, bench = int(sys.argv[1]), *sys.argv[2:11]
kubelet = int(kubelet)
sys.path.insert(0, bench)
import lib
A = lib.Api(work, url)
cxp = "/apis/airlock.dev/v1alpha1/namespaces/%s/codeexecutions" % ns

def run_airlock(i, pad=0, prefix="cx"):
    name = "%s-%03d" % (prefix, i)
    src = "print(1)\n" + ("#" * (pad - 1) + "\n" if pad else "")
    t0 = time.monotonic()
    A.req("POST", cxp, {"apiVersion": "airlock.dev/v1alpha1", "kind": "CodeExecution",
        "metadata": {"name": name}, "spec": {"runtime": "python", "source": src}})
    o = A.watch_until("%s?watch=1&fieldSelector=metadata.name%%3D%s" % (cxp, name),
                    lambda o: o.get("status", {}).get("phase") in
                    ("Succeeded", "Failed", "TimedOut", "Cancelled"))
    t = time.monotonic() - t0
    assert o["status"]["phase"] == "Succeeded" and o["status"]["stdout"] == "1\n", o["status"]
    return t

def run_job(i):
    return A.run_job(ns, "job-%03d" % i, image)

def run_floor(i):
    t0 = time.monotonic()
    out = subprocess.run([runsc, "--root", work + "/runsc-root", "--network=none", "do",
                          "python3", "-c", "print(1)"], capture_output=True, check=True).stdout
    t = time.monotonic() - t0
    assert out == b"1\n", out
    return t

def cri_floor_run(*opts):
    return lib.cri_floor_run(cri_floor, sock, image, work, kubelet, *opts)

def run_cri(i):
    # The tool times itself (create -> output read); its own start and the
    # untimed sandbox removal are left out, as for the others.
    return float(cri_floor_run()["ms"]) / 1000

def run_exec(i):
    # Five execs per holder sandbox; the holder's start is not timed.
    return [float(x) / 1000 for x in cri_floor_run("-x", "5")["exec_ms"].split(",")]

quiet = []
def quiesce():
    """Untimed: until no pod is left in the namespace and no containerd
    task runs, so one sample's teardown never overlaps the next."""
    t0 = time.monotonic()
    while True:
        pods = A.get("/api/v1/namespaces/%s/pods" % ns)["items"]
        tasks = subprocess.run(["ctr", "--address", sock, "-n", "k8s.io", "tasks", "ls"],
                               capture_output=True, text=True, check=True).stdout
        running = [l for l in tasks.splitlines()[1:] if "RUNNING" in l.split()]
        if not pods and not running:
            break
        if time.monotonic() - t0 > 120:
            raise SystemExit("not quiet after 120 s: %d pods, %d tasks" % (len(pods), len(running)))
        time.sleep(0.05)
    quiet.append(time.monotonic() - t0)

def sample(kind, f, *a):
    quiesce()
    res[kind].append(f(*a))

res = {"airlock": [], "job": [], "cri": [], "floor": [], "exec": [], "annot": [], "cmap": []}
for f in (run_airlock, run_job, run_cri, run_floor, run_exec):  # warm-up, not counted
    quiesce()
    f(999)
for i in range(n):
    sample("airlock", run_airlock, i)
    sample("job", run_job, i)
    sample("cri", run_cri, i)
    sample("floor", run_floor, i)
    if i % 5 == 0:
        quiesce()
        res["exec"].extend(run_exec(i))
for i in range(max(n // 2, 1)):
    sample("annot", run_airlock, i, 190 << 10, "annot")
    sample("cmap", run_airlock, i, 200 << 10, "cmap")

q = lib.q
out = {k: (q(v, 50), q(v, 90), q(v, 99)) for k, v in res.items()}
out["quiet"] = (q(quiet, 50), q(quiet, 90), q(quiet, 99))
json.dump(out, open(work + "/out.json", "w"))
PY

read -r a50 a90 a99 j50 j90 j99 r50 r90 r99 f50 f90 f99 x50 x90 x99 n50 n90 n99 c50 c90 c99 q50 q90 q99 < <(python3 -c '
import json,sys; o=json.load(open(sys.argv[1]))
print(*["%.0f" % (x*1000) for k in ("airlock","job","cri","floor","exec","annot","cmap","quiet") for x in o[k]])' "$work/out.json")
record_hist "$work/record.after"
# Its count, mean and the bucket holding the median, over every Airlock
# run above (the warm-up's and the code-delivery runs' included).
read -r rec_n rec_mean rec_p50 < <(python3 - "$work/record.before" "$work/record.after" <<'PY'
import re, sys
def load(path):
    d = {}
    for line in open(path):
        name, v = line.rsplit(" ", 1)
        d[name] = float(v)
    return d
a, b = load(sys.argv[1]), load(sys.argv[2])
delta = {k: b[k] - a.get(k, 0) for k in b}
n = delta["airlock_agent_record_seconds_count"]
mean = delta["airlock_agent_record_seconds_sum"] / n * 1000 if n else 0
le = sorted((float(re.search(r'le="([^"]+)"', k).group(1)), v) for k, v in delta.items()
            if "_bucket" in k)
p50 = next((b_ for b_, v in le if v >= n / 2), float("inf"))
print("%d %.0f %s" % (n, mean, "%g" % (p50 * 1000) if p50 != float("inf") else "inf"))
PY
)
cpu=$(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo)
# The third quantile: p99 needs 300 samples or more; with fewer,
# round(0.99 * (N - 1)) is the last one: say so.
top_label() { if [ "$1" -ge 300 ]; then echo p99; else echo max; fi; }
mem=$(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo)
{
	echo
	echo "## e2e latency, $(date -u +%Y-%m-%d) - print(1) in python, N=$n each, interleaved, each on a quiet node"
	echo
	echo "Machine: $(nproc) cores ($cpu), $mem; one node: kubelet v1.37.2, containerd 1.6.20, gVisor runsc (tests/cluster NODE=1)."
	echo
	echo "| path | p50 ms | p90 ms | $(top_label "$n") ms | p50 vs Job |"
	echo "|---|---|---|---|---|"
	echo "| Airlock: CodeExecution create -> Succeeded, output in status | $a50 | $a90 | $a99 | $(echo "scale=2; $a50 / $j50" | bc)x |"
	echo "| baseline: Job (gvisor) create -> complete -> logs read | $j50 | $j90 | $j99 | 1.00x |"
	echo "| raw floor: pod through CRI (containerd, runsc), no Kubernetes | $r50 | $r90 | $r99 | $(echo "scale=2; $r50 / $j50" | bc)x |"
	echo "| gVisor alone: runsc do (host rootfs), no containerd | $f50 | $f90 | $f99 | $(echo "scale=2; $f50 / $j50" | bc)x |"
	echo "| exec floor: exec into a running gVisor sandbox (containerd Tasks API, FIFOs), N=$(( (n + 4) / 5 * 5 )) | $x50 | $x90 | $x99 | $(echo "scale=2; $x50 / $j50" | bc)x |"
	echo
	echo "Code delivery, N=$((n / 2)) each, interleaved (p50 ratio: ConfigMap / annotations):"
	echo
	echo "| path | p50 ms | p90 ms | $(top_label $((n / 2))) ms | p50 ratio |"
	echo "|---|---|---|---|---|"
	echo "| 190 KiB source, annotations + downward API | $n50 | $n90 | $n99 | 1.00x |"
	echo "| 200 KiB source, owned ConfigMap | $c50 | $c90 | $c99 | $(echo "scale=2; $c50 / $n50" | bc)x |"
	echo
	echo "The node agent's part of each Airlock run, containerd's exit -> result stored"
	echo "(its airlock_agent_record_seconds histogram, read before and after): $rec_n results,"
	echo "mean $rec_mean ms, median at or under $rec_p50 ms (the histogram's bucket)."
	echo
	echo "Before each sample, untimed, the wait for a quiet node (no pod in the namespace,"
	echo "no running containerd task): p50 $q50 ms, p90 $q90 ms, max $q99 ms."
} | tee -a "$top/bench/RESULTS.md"
