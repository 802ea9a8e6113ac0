#!/usr/bin/env bash
# Benchmark (issue 32): what egress adds to an execution. The same program
# (`print(1)`), cold, N of each, interleaved, on the real gVisor node:
#
#   plain    a profile without network (gVisor's network=none, the
#            namespace's deny-all): the baseline
#   egress   a profile with one CIDR entry: the pod under the network
#            RuntimeClass (gVisor's own stack), its NetworkPolicy made
#            before it, and the start gate holding the program until that
#            policy is in force (docs/network.md)
#
# Each: create -> Succeeded (the watch's event in hand), and the status's
# durationMillis (the container's start to the program's exit, the gate's
# wait in it). Then warm, N of each, interleaved: a CodeExecutionPool of
# one holder per profile (docs/network.md, "Warm": the egress holder's
# gate passed and its chain made before it is ready), each sample claiming
# one, untimed before it: both pools' holders ready and idle, nothing
# else in the namespace. The gate pod runs in the namespace under runc, as the chart runs it
# under the cluster's default runtime. Before each sample, untimed: the
# node quiet (at most 25% busy over 300 ms, at most 15 s). Not a test: it
# prints medians, p90 and the maximum and appends them to bench/RESULTS.md.
# Needs `make cluster-up NODE=1` (with the gVisor shim built here: the
# node's RUNTIME_CLASS_NET), `make` and the SDK tier's venv (`make sdk`).
#
# usage: [BENCH_BIN=DIR] bench/egress.sh [N]   (default 20)
set -euo pipefail
n=${1:-20}
bin=${BENCH_BIN:-$(cd "$(dirname "$0")/.." && pwd)/bin}
. "$(dirname "$0")/lib.sh"
bench_need_node egress.sh
[ -n "${RUNTIME_CLASS_NET-}" ] || { echo "bench/egress.sh: the node has no network RuntimeClass" >&2; exit 1; }
ns=bench-egress-$$
pids=()
trap bench_cleanup EXIT

bench_install
bench_runc_ns
bench_gate_pod
cat > "$work/config.yaml" <<YAML
networkRuntimeClassName: $RUNTIME_CLASS_NET
profiles:
  python:
    image: $RUNNER_PYTHON_IMAGE
    command: [/airlock/bin/run, python3, main.py]
    sourceFile: main.py
  python-net:
    image: $RUNNER_PYTHON_IMAGE
    command: [/airlock/bin/run, python3, main.py]
    sourceFile: main.py
    network: {egress: [{cidr: 10.253.0.0/16, ports: [5432]}]}
YAML
bench_daemons "$bin" "$ns" --network-runtime-class "$RUNTIME_CLASS_NET" --iptables iptables

cache=${AIRLOCK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/airlock}
py=$cache/pyvenv-$(sha256sum "$top/tests/sdk/requirements.txt" | cut -c1-12)/bin/python
[ -x "$py" ] || py=python3
k config view --raw --minify -o json > "$work/kc.json"
"$py" - "$n" "$work" "$ns" "$APISERVER_URL" "$top" <<'PY'
import json, sys, time
n, work, ns, url, top = int(sys.argv[1]), *sys.argv[2:6]
sys.path.insert(0, top + "/bench")
import lib
A = lib.Api(work, url)

unquiet = []
def quiet():
    lib.quiet(unquiet)

def run(name, runtime):
    quiet()
    t, st = A.cx(ns, name, {"runtime": runtime, "source": "print(1)\n", "timeoutSeconds": 60})
    assert st["phase"] == "Succeeded" and st["stdout"] == "1\n", st
    assert (runtime == "python-net") == bool(st.get("egress", {}).get("granted")), st
    return t, st["durationMillis"] / 1000

run("warm-up-plain", "python")      # untimed: the first of each
run("warm-up-egress", "python-net")
res = {"plain": [], "egress": [], "plain-d": [], "egress-d": []}
for i in range(n):
    for k, rt in (("plain", "python"), ("egress", "python-net")):
        t, d = run("%s-%03d" % (k, i), rt)
        res[k].append(t)
        res[k + "-d"].append(d)

# Warm: a pool of one holder each.
pp = "/apis/airlock.dev/v1alpha1/namespaces/%s/codeexecutionpools" % ns
for name, rt in (("plain", "python"), ("net", "python-net")):
    A.req("POST", pp, {"apiVersion": "airlock.dev/v1alpha1", "kind": "CodeExecutionPool",
                       "metadata": {"name": name}, "spec": {"runtime": rt, "replicas": 1}})

def pods():
    return A.get("/api/v1/namespaces/%s/pods" % ns)["items"]

idle_ready = lib.idle_ready

def refilled():
    t0 = time.monotonic()
    while True:
        # Every pod but the gate's: the two holders, idle and ready.
        ps = [p for p in pods() if p["metadata"]["name"] != "gate"]
        if len(ps) == 2 and all(idle_ready(p) for p in ps):
            return
        if time.monotonic() - t0 > 120:
            raise SystemExit("pools not refilled after 120 s: %d pods" % len(ps))
        time.sleep(0.05)

def run_warm(name, runtime):
    refilled()
    t, st = A.cx(ns, name, {"runtime": runtime, "source": "print(1)\n", "timeoutSeconds": 60})
    assert st["phase"] == "Succeeded" and st["stdout"] == "1\n", st
    assert st.get("startMode") == "Warm", ("ran cold", st)
    assert (runtime == "python-net") == bool(st.get("egress", {}).get("granted")), st
    return t

run_warm("wwarm-up-plain", "python")    # untimed: the first of each
run_warm("wwarm-up-egress", "python-net")
res["warm-plain"], res["warm-egress"] = [], []
for i in range(n):
    for k, rt in (("warm-plain", "python"), ("warm-egress", "python-net")):
        res[k].append(run_warm("%s-%03d" % (k, i), rt))

q = lib.q
out = {k: [q(v, 50) * 1000, q(v, 90) * 1000, max(v) * 1000, len(v)] for k, v in res.items()}
out["unquiet"] = len(unquiet)
json.dump(out, open(work + "/out.json", "w"))
PY

cpu=$(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo)
mem=$(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo)
python3 - "$work" "$n" "$cpu" "$mem" "$(date -u +%Y-%m-%d)" "$(git -C "$top" rev-parse --short HEAD)" <<'PY' | tee -a "$top/bench/RESULTS.md"
import json, sys
work, n, cpu, mem, day, commit = sys.argv[1], int(sys.argv[2]), *sys.argv[3:7]
o = json.load(open(work + "/out.json"))
print("\n## bench/egress.sh, %s, %s (%s, %s), N=%d, cold and warm, kube-router enforcing\n"
      % (day, commit, cpu, mem, n))
print("| what | p50 ms | p90 ms | max ms | N |")
print("|---|---|---|---|---|")
for k, label in (("plain", "no network: create -> Succeeded"),
                 ("egress", "one CIDR entry, the start gate: create -> Succeeded"),
                 ("plain-d", "no network: durationMillis (container start -> exit)"),
                 ("egress-d", "egress: durationMillis (the gate's wait in it)"),
                 ("warm-plain", "warm, no network: create -> Succeeded"),
                 ("warm-egress", "warm, one CIDR entry (a holder under its pool's policy): create -> Succeeded")):
    p50, p90, mx, cnt = o[k]
    print("| %s | %.0f | %.0f | %.0f | %d |" % (label, p50, p90, mx, cnt))
print("\nAdded by egress (p50): %.0f ms create -> Succeeded (ratio %.2f), %.0f ms of it "
      "between the container's start and the program's exit"
      % (o["egress"][0] - o["plain"][0], o["egress"][0] / o["plain"][0],
         o["egress-d"][0] - o["plain-d"][0]))
print("\nAdded by egress, warm (p50): %.0f ms create -> Succeeded (ratio %.2f)"
      % (o["warm-egress"][0] - o["warm-plain"][0], o["warm-egress"][0] / o["warm-plain"][0]))
print("\nSamples started on a node not quiet after 15 s: %d" % o["unquiet"])
PY
