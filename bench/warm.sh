#!/usr/bin/env bash
# Benchmark (issue 13): the warm path against the cold one and the floors
# under both, `print(1)` in python on the real gVisor node, N runs of each,
# interleaved, each sample on a quiet node:
#
#   warm-api  a CodeExecution in a namespace with a CodeExecutionPool
#             (replicas 2): create -> status.phase Succeeded with the
#             output in the status (the watch's event in hand)
#   warm-cli  the same through `bin/airlock run -c 'print(1)'`, the whole
#             process timed (its start, kubeconfig, TLS, create, watch)
#   cold-api  a CodeExecution in a namespace with no pool: a pod of its own
#             (its agent with --runsc: the exit straight from the sandbox)
#   cold-ctrd with COLD_CTRD=1: the same, its agent without --runsc (the
#             exit from containerd's TaskExit, as before
#             node-agent/exitwait.c); a third controller and agent run then
#   job       the baseline: a plain Job (gvisor), create -> complete ->
#             logs read
#   cri       a pod through CRI on the node's containerd, no Kubernetes
#             (bench/cri_floor.c)
#   exec      the exec floor: a process exec'd into a running gVisor
#             sandbox through containerd's Tasks API, output from FIFOs
#             (cri_floor -x, five in a row per sandbox: after the first,
#             the sandbox's caches are warm)
#   runsc     the floor of the warm path as built: `runsc exec` of the
#             program into an idle holder of the pool (a sandbox used
#             once, as the agent's are), no Kubernetes, no containerd;
#             the holder is deleted after, untimed, and the pool refills
#
# Before each sample, untimed: the cold namespace holds no pod, the pool's
# two holders are ready and idle, nothing is terminating, and no other
# containerd task runs. The controllers and agents are this clone's bin/
# (all with --runsc but cold-ctrd's). Not a test: it prints
# p50/p90/p99 (with N >= 300; below that the highest, labelled max) and
# appends them to bench/RESULTS.md. Needs `make cluster-up NODE=1` and
# `make`.
#
# usage: bench/warm.sh [N]      (default 50)
set -euo pipefail
n=${1:-50}
. "$(dirname "$0")/lib.sh"
bench_need_node warm.sh
wns=bench-warm-$$
cns=bench-cold-$$
ons=bench-coldc-$$
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
	k delete ns "$wns" "$cns" "$ons" --wait=false >/dev/null 2>&1
	rm -rf "$work"
}
trap cleanup EXIT

bench_install
for s in "$wns" "$cns" "$ons"; do
	k create ns "$s" >/dev/null
	until k -n "$s" get serviceaccount default >/dev/null 2>&1; do sleep 0.2; done
done
bench_config "$RUNNER_PYTHON_IMAGE" "[/airlock/bin/run, python3, main.py]"
# daemons NS [AGENT FLAGS...]: a controller and an agent for NS; the
# agent's metrics address in $aaddr.
daemons() {
	local s=$1
	shift
	caddr=127.0.0.1:$(port)
	"$top/bin/airlock-controller" --config "$work/config.yaml" --kubeconfig "$KUBECONFIG_ADMIN" \
		--namespace "$s" --lease-namespace "$s" --metrics-addr "$caddr" --log-level warn \
		> "$work/controller-$s.log" 2>&1 &
	pids+=($!)
	aaddr=127.0.0.1:$(port)
	"$top/bin/airlock-node-agent" --kubeconfig "$KUBECONFIG_ADMIN" --node-name "$NODE_NAME" \
		--namespace "$s" --pod-logs-dir "$POD_LOGS_DIR" --containerd-socket "$CONTAINERD_SOCK" \
		--metrics-addr "$aaddr" --log-level warn "$@" > "$work/agent-$s.log" 2>&1 &
	pids+=($!)
	until curl -sf "http://$aaddr/readyz" >/dev/null 2>&1; do sleep 0.2; done
}
[ "${COLD_CTRD:-0}" = 1 ] && daemons "$ons"
daemons "$cns" --runsc "$RUNSC" --runsc-root "$RUNSC_ROOT"
daemons "$wns" --runsc "$RUNSC" --runsc-root "$RUNSC_ROOT"
waddr=$aaddr
wcaddr=$caddr
k -n "$wns" apply -f - >/dev/null <<YAML
apiVersion: airlock.dev/v1alpha1
kind: CodeExecutionPool
metadata: {name: py}
spec: {runtime: python, replicas: 2}
YAML
k config view --raw -o json > "$work/kc.json"
mkdir -p "$work/cri-logs"
kubelet=$(pgrep -f "kubelet --config=$top/.cluster/node/kubelet.yaml" | head -n1)
[ -n "$kubelet" ] || { echo "bench/warm.sh: no kubelet of this clone running" >&2; exit 1; }
cri_floor=$top/build/plain/bench/cri_floor
[ -x "$cri_floor" ] || { echo "bench/warm.sh: $cri_floor is not built (make)" >&2; exit 1; }
hist() {
	{ curl -sf "http://$waddr/metrics"; curl -sf "http://$wcaddr/metrics"; } |
		grep '^airlock_\(agent_warm_delivery\|agent_record\|warm_claim\)_seconds_\(sum\|count\)' > "$1"
}
hist "$work/hist.before"

python3 - "$n" "$work" "$wns" "$cns" "$APISERVER_URL" "$RUNNER_PYTHON_IMAGE" "$RUNSC" \
	"$RUNSC_ROOT" "$cri_floor" "$CONTAINERD_SOCK" "$kubelet" "$top" "$KUBECONFIG_ADMIN" "$ons" "${COLD_CTRD:-0}" <<'PY'
import json, os, subprocess, sys, time
(n, work, wns, cns, url, image, runsc, runsc_root, cri_floor, sock, kubelet, top,
 kubeconfig, ons, cold_ctrd) = int(sys.argv[1]), *sys.argv[2:16]
cold_ctrd = cold_ctrd == "1"
kubelet = int(kubelet)
sys.path.insert(0, top + "/bench")
import lib
A = lib.Api(work, url)
REPLICAS = 2
cxp = "/apis/airlock.dev/v1alpha1/namespaces/%s/codeexecutions"

def pods(ns):
    return A.get("/api/v1/namespaces/%s/pods" % ns)["items"]

idle_ready = lib.idle_ready

quiet = []
def quiesce():
    """Untimed: the cold namespace empty, the pool's holders all ready and
    idle, nothing terminating, and no containerd task but the holders'."""
    t0 = time.monotonic()
    while True:
        w, c = pods(wns), pods(cns) + pods(ons)
        ready = [p for p in w if idle_ready(p)]
        tasks = subprocess.run(["ctr", "--address", sock, "-n", "k8s.io", "tasks", "ls"],
                               capture_output=True, text=True, check=True).stdout
        running = [l for l in tasks.splitlines()[1:] if "RUNNING" in l.split()]
        # Each holder pod runs two tasks (its pause container and its own).
        if not c and len(w) == REPLICAS and len(ready) == REPLICAS and \
                len(running) == 2 * REPLICAS:
            break
        if time.monotonic() - t0 > 120:
            raise SystemExit("not quiet after 120 s: warm %d pods (%d ready), cold %d, %d tasks"
                             % (len(w), len(ready), len(c), len(running)))
        time.sleep(0.05)
    quiet.append(time.monotonic() - t0)

def create_and_wait(ns, name):
    t0 = time.monotonic()
    A.req("POST", cxp % ns, {"apiVersion": "airlock.dev/v1alpha1", "kind": "CodeExecution",
        "metadata": {"name": name}, "spec": {"runtime": "python", "source": "print(1)\n"}})
    o = A.watch_until("%s?watch=1&fieldSelector=metadata.name%%3D%s" % (cxp % ns, name),
                      lambda o: o.get("status", {}).get("phase") in
                      ("Succeeded", "Failed", "TimedOut", "Cancelled"))
    t = time.monotonic() - t0
    st = o["status"]
    assert st["phase"] == "Succeeded" and st["stdout"] == "1\n", st
    return t, st

def run_warm_api(i):
    t, st = create_and_wait(wns, "api-%03d" % i)
    assert st.get("startMode") == "Warm", ("ran cold", st)
    return t

def run_cold_api(i):
    t, st = create_and_wait(cns, "cold-%03d" % i)
    assert st.get("startMode") == "Cold", st
    return t

def run_cold_ctrd(i):
    t, st = create_and_wait(ons, "cold-%03d" % i)
    assert st.get("startMode") == "Cold", st
    return t

def run_warm_cli(i):
    name = "cli-%03d" % i
    t0 = time.monotonic()
    r = subprocess.run([top + "/bin/airlock", "run", "--name", name, "-c", "print(1)",
                        "-n", wns, "--kubeconfig", kubeconfig], capture_output=True)
    t = time.monotonic() - t0
    assert r.returncode == 0 and r.stdout == b"1\n", r
    st = A.get(cxp % wns + "/" + name)["status"]
    assert st.get("startMode") == "Warm", ("ran cold", st)
    return t

def run_job(i):
    return A.run_job(cns, "job-%03d" % i, image)

def run_cri(i):
    return float(lib.cri_floor_run(cri_floor, sock, image, work, kubelet)["ms"]) / 1000

def run_exec(i):
    f = lib.cri_floor_run(cri_floor, sock, image, work, kubelet, "-x", "5")
    return [float(x) / 1000 for x in f["exec_ms"].split(",")]

def run_runsc(i):
    """runsc exec into an idle holder, as the agent does, but from here:
    the program's own user and working directory, no tar, no runner."""
    p = next(p for p in pods(wns) if idle_ready(p))
    cid = p["status"]["containerStatuses"][0]["containerID"].split("://", 1)[1]
    t0 = time.monotonic()
    r = subprocess.run([runsc, "--root", runsc_root, "exec", "--user", "65532:65532",
                        "--cwd", "/airlock/work", cid, "python3", "-c", "print(1)"],
                       capture_output=True, stdin=subprocess.DEVNULL)
    t = time.monotonic() - t0
    assert r.returncode == 0 and r.stdout == b"1\n", r
    A.req("DELETE", "/api/v1/namespaces/%s/pods/%s?gracePeriodSeconds=0" %
          (wns, p["metadata"]["name"]))
    return t

def sample(kind, f, *a):
    quiesce()
    res[kind].append(f(*a))

res = {k: [] for k in ("warm-api", "warm-cli", "cold-api", "cold-ctrd", "job", "cri", "exec",
                       "runsc")}
for f in (run_warm_api, run_warm_cli, run_cold_api) + ((run_cold_ctrd,) if cold_ctrd else ()) + \
        (run_job, run_cri, run_runsc):  # warm-up
    quiesce()
    f(999)
quiesce()
run_exec(999)
for i in range(n):
    sample("warm-api", run_warm_api, i)
    sample("warm-cli", run_warm_cli, i)
    sample("cold-api", run_cold_api, i)
    if cold_ctrd:
        sample("cold-ctrd", run_cold_ctrd, i)
    sample("job", run_job, i)
    sample("cri", run_cri, i)
    sample("runsc", run_runsc, i)
    if i % 5 == 0:
        quiesce()
        res["exec"].extend(run_exec(i))

q = lib.q
out = {k: [q(v, p) * 1000 for p in (50, 90, 99)] + [len(v)] if v else [0, 0, 0, 0]
       for k, v in res.items()}
out["quiet"] = [q(quiet, p) * 1000 for p in (50, 90, 99)] + [len(quiet)]
json.dump(out, open(work + "/out.json", "w"))
PY

hist "$work/hist.after"
cpu=$(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo)
mem=$(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo)
python3 - "$work" "$n" "$cpu" "$mem" "$(date -u +%Y-%m-%d)" <<'PY' | tee -a "$top/bench/RESULTS.md"
import json, sys
work, n, cpu, mem, day = sys.argv[1], int(sys.argv[2]), *sys.argv[3:6]
o = json.load(open(work + "/out.json"))
def hist(path):
    return {l.split()[0]: float(l.split()[1]) for l in open(path)}
a, b = hist(work + "/hist.before"), hist(work + "/hist.after")
d = {k: b[k] - a.get(k, 0) for k in b}
def mean(m):
    c = d.get(m + "_count", 0)
    return d.get(m + "_sum", 0) / c * 1000 if c else float("nan")
top = lambda k: "p99" if o[k][3] >= 300 else "max"
cold = o["cold-api"][0]
rows = [
    ("warm-api", "**warm**: CodeExecution create -> Succeeded, output in status (pool in the namespace)"),
    ("warm-cli", "**warm, CLI**: `bin/airlock run -c 'print(1)'`, the whole process"),
    ("cold-api", "cold: CodeExecution create -> Succeeded (no pool: a pod of its own)"),
    ("cold-ctrd", "cold, agent without --runsc: the exit from containerd's TaskExit"),
    ("job", "baseline: Job (gvisor) create -> complete -> logs read"),
    ("cri", "CRI floor: a pod through containerd and runsc, no Kubernetes"),
    ("exec", "exec floor: exec into a running sandbox, containerd Tasks API, 5 per sandbox"),
    ("runsc", "warm floor: `runsc exec` into an idle holder, used once, no containerd"),
]
print()
print("## warm path, %s - print(1) in python, N=%d each, interleaved, each on a quiet node" % (day, n))
print()
print("Machine: 2 cores (%s), %s; one node: kubelet v1.37.2, containerd 1.6.20, gVisor runsc"
      " (tests/cluster NODE=1). bench/warm.sh." % (cpu, mem))
print()
print("| path | N | p50 ms | p90 ms | p99/max ms | p50 vs cold |")
print("|---|---|---|---|---|---|")
for k, label in rows:
    v = o[k]
    if v[3] == 0:
        continue
    print("| %s | %d | %.0f | %.0f | %.0f (%s) | %.2fx |" % (label, v[3], v[0], v[1], v[2], top(k), v[0] / cold))
print()
print("Cold p50 over the CRI floor's p50: %.2fx%s." % (cold / o["cri"][0],
      "; the agent without --runsc: %.2fx" % (o["cold-ctrd"][0] / o["cri"][0])
      if o["cold-ctrd"][3] else ""))
print()
print("The daemons' own clocks over every warm run above (warm-up included), means: the"
      " controller, from the reconcile that found a sandbox to its claim landed, %.1f ms"
      " (airlock_warm_claim_seconds); the node agent, claim seen -> program started %.1f ms"
      " (airlock_agent_warm_delivery_seconds) and exit -> result stored %.1f ms"
      " (airlock_agent_record_seconds)." %
      (mean("airlock_warm_claim_seconds"), mean("airlock_agent_warm_delivery_seconds"),
       mean("airlock_agent_record_seconds")))
print()
print("Before each sample, untimed, the wait for a quiet node (pool refilled and ready, the"
      " cold namespace empty, no other task): p50 %.0f ms, p90 %.0f ms, max %.0f ms." %
      tuple(o["quiet"][:3]))
PY
