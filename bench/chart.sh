#!/usr/bin/env bash
# Benchmark (issue 29): the README's figures, on the chart's defaults.
# The chart is installed as a user would (helm install), with only what
# the test cluster needs given (its images imported, never pulled; the API
# server on loopback; the daemons on the machine's network with ports of
# their own; the test node's pod logs, containerd socket and cgroup root;
# class names of the bench's own). Everything else is the chart's: one
# controller for every namespace, log level info, the agent without runsc
# (warm runs through containerd's Tasks.Exec), the default quota.
# `print(1)` in python on the real gVisor node, N runs of each, interleaved,
# each sample on a quiet node:
#
#   warm-api  a CodeExecution in a namespace with a CodeExecutionPool
#             (replicas 2, both holders ready and idle before the sample:
#             a refilled pool): create -> status.phase Succeeded with the
#             output in the status (the watch's event in hand)
#   warm-cli  the same through `bin/airlock run -c 'print(1)'`, the whole
#             process timed
#   cold-api  a CodeExecution in a namespace with no pool
#   job       baseline: a plain Job (gvisor) create -> complete -> logs
#             read; the Job controller's batching included
#   pod       baseline: a plain Pod (gvisor) create -> Succeeded -> logs
#             read, no controller between
#
# Then what a refilled pool does not promise: 20 warm-api in a row, each
# created when the last ended (the pool of 2 refilling meanwhile), and 10
# at once; how many ran warm, and their times. Then live output, warm: a
# line every 300 ms, 100 lines a second (past the agent's throttle), and
# the same with --no-stream, each line's latency to `airlock run`'s stdout.
#
# Not a test: it prints medians and appends them to bench/RESULTS.md with
# the commit. Needs `make cluster-up NODE=1` and `make`.
#
# usage: bench/chart.sh [N]      (default 20)
set -euo pipefail
n=${1:-20}
. "$(dirname "$0")/lib.sh"
bench_need_node chart.sh
HELM=${HELM:-$("$top/tests/cluster/build.sh" helm | sed -n 's/^HELM_BIN_DIR=//p')/helm}
# Every helm call's, the uninstall's too: without it the uninstall failed,
# the namespace's delete took the release's record, and the release's
# cluster-wide objects (its admission policies among them) stayed.
export KUBECONFIG=$KUBECONFIG_ADMIN
rel=bench relns=bench-system
wns=bench-warm-$$ cns=bench-cold-$$ bns=bench-base-$$
cleanup() {
	local rc=$?
	# A failed run keeps the daemons' logs, for why.
	if [ "$rc" != 0 ]; then
		mkdir -p "$top/build/logs"
		for c in controller node-agent; do
			k -n "$relns" logs -l "app.kubernetes.io/component=$c" --tail=-1 \
				>"$top/build/logs/bench-chart-$c.log" 2>&1 || true
		done
		echo "bench/chart.sh: the daemons' logs in build/logs/bench-chart-*.log" >&2
	fi
	"$HELM" uninstall "$rel" -n "$relns" --wait >/dev/null 2>&1 || true
	k label node "$NODE_NAME" node-restriction.kubernetes.io/airlock-gvisor- >/dev/null 2>&1 || true
	k delete ns "$wns" "$cns" "$bns" "$relns" --wait=false >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT

image() { printf '{repository: "%s", tag: "%s", pullPolicy: Never}' "${1%:*}" "${1##*:}"; }
cat >"$work/values.yaml" <<YAML
image: {controller: $(image "$CONTROLLER_IMAGE"), nodeAgent: $(image "$NODE_AGENT_IMAGE")}
apiServer: {host: 127.0.0.1, port: "${APISERVER_URL##*:}"}
controller: {hostNetwork: true, metricsPort: $(port), probePort: $(port)}
nodeAgent:
  hostNetwork: true
  metricsPort: $(port)
  probePort: $(port)
  hostPaths: {podLogs: "$POD_LOGS_DIR", containerdSocket: "$CONTAINERD_SOCK", cgroup: /sys/fs/cgroup}
  cgroupRoot: "$CGROUP_ROOT"
runtimeClass: {name: bench-gvisor}
priorityClass: {name: bench-execution}
config:
  profiles:
    python: {image: "$RUNNER_PYTHON_IMAGE", command: [/airlock/bin/run, python3, main.py], sourceFile: main.py}
YAML
k label node "$NODE_NAME" node-restriction.kubernetes.io/airlock-gvisor=true --overwrite >/dev/null
if "$HELM" status "$rel" -n "$relns" >/dev/null 2>&1; then
	"$HELM" uninstall "$rel" -n "$relns" --wait >/dev/null
fi
"$HELM" install "$rel" "$top/charts/airlock" -n "$relns" \
	--create-namespace -f "$work/values.yaml" --wait --timeout 180s >/dev/null
for s in "$wns" "$cns" "$bns"; do
	k create ns "$s" >/dev/null
	until k -n "$s" get serviceaccount default >/dev/null 2>&1; do sleep 0.2; done
done
k -n "$wns" apply -f - >/dev/null <<YAML
apiVersion: airlock.dev/v1alpha1
kind: CodeExecutionPool
metadata: {name: py}
spec: {runtime: python, replicas: 2}
YAML
k config view --raw -o json >"$work/kc.json"
settings=$(k -n "$relns" get deploy "$rel-airlock-controller" -o jsonpath='{.spec.template.spec.containers[0].args}')
agent_args=$(k -n "$relns" get ds "$rel-airlock-node-agent" -o jsonpath='{.spec.template.spec.containers[0].args}')

python3 - "$n" "$work" "$wns" "$cns" "$bns" "$APISERVER_URL" "$RUNNER_PYTHON_IMAGE" "$top" \
	"$KUBECONFIG_ADMIN" "$CONTAINERD_SOCK" <<'PY'
import json, subprocess, sys, threading, time
n, work, wns, cns, bns, url, image, top, kubeconfig, sock = int(sys.argv[1]), *sys.argv[2:11]
sys.path.insert(0, top + "/bench")
import lib
A = lib.Api(work, url)
REPLICAS = 2
cxp = "/apis/airlock.dev/v1alpha1/namespaces/%s/codeexecutions"

def pods(ns):
    return A.get("/api/v1/namespaces/%s/pods" % ns)["items"]

idle_ready = lib.idle_ready

base = []
def quiesce():
    """Untimed: the cold and baseline namespaces empty, the pool's two
    holders ready and idle, and as many containerd tasks running as the
    first time it was so (the holders', the chart's daemons', the node's)."""
    t0 = time.monotonic()
    while True:
        w, c = pods(wns), pods(cns) + pods(bns)
        tasks = subprocess.run(["ctr", "--address", sock, "-n", "k8s.io", "tasks", "ls"],
                               capture_output=True, text=True, check=True).stdout
        running = [l for l in tasks.splitlines()[1:] if "RUNNING" in l.split()]
        if not c and len(w) == REPLICAS and all(idle_ready(p) for p in w):
            if not base:
                base.append(len(running))
            if len(running) == base[0]:
                return
        if time.monotonic() - t0 > 120:
            raise SystemExit("not quiet after 120 s: warm %d pods, others %d, %d tasks"
                             % (len(w), len(c), len(running)))
        time.sleep(0.05)

def create_and_wait(ns, name):
    path = "%s?watch=1&fieldSelector=metadata.name%%3D%s" % (cxp % ns, name)
    opened, box = threading.Event(), {}
    def watch():
        box["o"] = A.watch_until(path, lambda o: o.get("status", {}).get("phase") in
                                 ("Succeeded", "Failed", "TimedOut", "Cancelled"), opened.set)
        box["t"] = time.monotonic()
    w = threading.Thread(target=watch, daemon=True)
    w.start()
    assert opened.wait(30), "the watch did not open"
    t0 = time.monotonic()
    A.req("POST", cxp % ns, {"apiVersion": "airlock.dev/v1alpha1", "kind": "CodeExecution",
        "metadata": {"name": name}, "spec": {"runtime": "python", "source": "print(1)\n"}},
        c=A.conn())
    w.join(120)
    st = box["o"]["status"]
    assert st["phase"] == "Succeeded" and st["stdout"] == "1\n", st
    return box["t"] - t0, st

def run_warm_api(i):
    t, st = create_and_wait(wns, "api-%03d" % i)
    assert st.get("startMode") == "Warm", ("ran cold", st)
    return t

def run_cold_api(i):
    t, st = create_and_wait(cns, "cold-%03d" % i)
    assert st.get("startMode") == "Cold", st
    return t

def run_warm_cli(i):
    name = "cli-%03d" % i
    t0 = time.monotonic()
    r = subprocess.run([top + "/bin/airlock", "run", "--name", name, "-c", "print(1)",
                        "-n", wns, "--kubeconfig", kubeconfig], capture_output=True)
    t = time.monotonic() - t0
    assert r.returncode == 0 and r.stdout == b"1\n", r
    assert A.get(cxp % wns + "/" + name)["status"].get("startMode") == "Warm", "ran cold"
    return t

def run_job(i):
    return A.run_job(bns, "job-%03d" % i, image, "bench-gvisor")

def run_pod(i):
    return A.run_pod(bns, "pod-%03d" % i, image, "bench-gvisor")

res = {k: [] for k in ("warm-api", "warm-cli", "cold-api", "job", "pod")}
kinds = (("warm-api", run_warm_api), ("warm-cli", run_warm_cli), ("cold-api", run_cold_api),
         ("job", run_job), ("pod", run_pod))
for _, f in kinds:      # warm-up, untimed
    quiesce()
    f(999)
for i in range(n):
    for k, f in kinds:
        quiesce()
        res[k].append(f(i))

# Back to back, against the pool of 2: in a row, then at once.
quiesce()
row = [create_and_wait(wns, "row-%02d" % i) for i in range(20)]
quiesce()
burst = [None] * 10
def one(i):
    burst[i] = create_and_wait(wns, "burst-%02d" % i)
ts = [threading.Thread(target=one, args=(i,)) for i in range(10)]
for t in ts:
    t.start()
for t in ts:
    t.join(300)
assert all(burst), "a burst execution did not end"

# Live output, warm (a refilled pool): a line's latency from the program's
# print to `airlock run`'s stdout (one clock), a line every 300 ms; then 100
# lines a second for 3 s, faster than the agent's throttle writes the
# status; and --no-stream, the output at the end.
SLOW = ("import time\nfor i in range(10):\n    print('%.6f' % time.time(), flush=True)\n"
        "    time.sleep(0.3)\n")
FAST = ("import time\nfor i in range(300):\n    print('%.6f' % time.time(), flush=True)\n"
        "    time.sleep(0.01)\n")
def stream(name, prog, lines, live):
    p = subprocess.Popen([top + "/bin/airlock", "run", "--name", name, "-c", prog, "-n", wns,
                          "--kubeconfig", kubeconfig] + ([] if live else ["--no-stream"]),
                         stdout=subprocess.PIPE)
    lat = [time.time() - float(l) for l in p.stdout]
    assert p.wait() == 0 and len(lat) == lines, (p.returncode, len(lat))
    return lat
lines = {"live": [], "fast": [], "end": []}
for i in range(max(3, n // 4)):
    for k, prog, nl, live in (("live", SLOW, 10, True), ("fast", FAST, 300, True),
                              ("end", SLOW, 10, False)):
        quiesce()
        lines[k] += stream("s-%s-%03d" % (k, i), prog, nl, live)

q = lib.q
out = {k: {"p50": q(v, 50) * 1000, "max": max(v) * 1000, "n": len(v)} for k, v in res.items()}
for k, v in lines.items():
    out["lines-" + k] = {"p50": q(v, 50) * 1000, "p90": q(v, 90) * 1000, "max": max(v) * 1000,
                         "n": len(v)}
for k, v in (("row", row), ("burst", burst)):
    t = [x[0] for x in v]
    out[k] = {"p50": q(t, 50) * 1000, "max": max(t) * 1000, "n": len(t),
              "warm": sum(1 for x in v if x[1].get("startMode") == "Warm"),
              "warm_p50": q([x[0] for x in v if x[1].get("startMode") == "Warm"] or [0], 50) * 1000,
              "cold_p50": q([x[0] for x in v if x[1].get("startMode") == "Cold"] or [0], 50) * 1000}
json.dump(out, open(work + "/out.json", "w"))
PY

cpu=$(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo)
commit=$(git -C "$top" rev-parse --short HEAD)
python3 - "$work" "$n" "$cpu" "$(date -u +%Y-%m-%d)" "$commit" "$settings" "$agent_args" <<'PY' | tee -a "$top/bench/RESULTS.md"
import json, sys
work, n, cpu, day, commit, settings, agent_args = sys.argv[1], int(sys.argv[2]), *sys.argv[3:8]
o = json.load(open(work + "/out.json"))
print()
print("## the chart's defaults, %s (%s) - `print(1)`, N=%d each, interleaved" % (day, commit, n))
print()
print("Machine: 2 cores (%s); one node (tests/cluster NODE=1). bench/chart.sh: the chart installed"
      " with only the test cluster's own values (images, API server, ports, the node's paths);"
      " the controller's args %s, the agent's %s." % (cpu, settings, agent_args))
print()
print("| what | p50 ms | max ms | ratio to warm p50 |")
print("|---|---|---|---|")
w = o["warm-api"]["p50"]
for k, what in (("warm-api", "**warm**: create -> Succeeded, output in status (a refilled pool of 2)"),
                ("warm-cli", "warm, `bin/airlock run -c 'print(1)'`, the whole process"),
                ("cold-api", "cold: create -> Succeeded (no pool)"),
                ("pod", "baseline: a plain Pod (gvisor) create -> Succeeded -> logs read"),
                ("job", "baseline: a Job (gvisor) create -> complete -> logs read")):
    v = o[k]
    print("| %s | %.0f | %.0f | %.1f |" % (what, v["p50"], v["max"], v["p50"] / w))
print()
print("Back to back against the pool of 2 (what a refilled pool does not promise):")
print()
print("| what | warm of N | p50 ms (warm / cold) | max ms |")
print("|---|---|---|---|")
for k, what in (("row", "20 in a row, each created when the last ended"), ("burst", "10 at once")):
    v = o[k]
    print("| %s | %d of %d | %.0f (%.0f / %.0f) | %.0f |" % (what, v["warm"], v["n"], v["p50"],
          v["warm_p50"], v["cold_p50"], v["max"]))
print()
print("Live output, warm: a line's latency, the program's print to `airlock run`'s stdout:")
print()
print("| program | lines | p50 / p90 / max ms |")
print("|---|---|---|")
for k, what in (("lines-live", "a line every 300 ms, 10 lines"),
                ("lines-fast", "100 lines a second for 3 s (past the agent's throttle)"),
                ("lines-end", "a line every 300 ms, `--no-stream` (the output at the end)")):
    v = o[k]
    print("| %s | %d | %.0f / %.0f / %.0f |" % (what, v["n"], v["p50"], v["p90"], v["max"]))
PY
