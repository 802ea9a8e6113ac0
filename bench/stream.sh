#!/usr/bin/env bash
# Benchmark (issue 14): live output. A python program prints a line with
# its own clock (time.time()) every 300 ms, 10 lines, under
# `bin/airlock run`; each line's latency is when the CLI wrote it to its
# stdout (read here on a pipe, same clock) less when the program printed
# it. Against, in the same run, interleaved: `bin/airlock run --no-stream`
# (the output at the end, as before spec.output.stream). Also the write
# amplification: the execution's status writes (watch events) and the
# bytes the API server stored for them (each event's object, as JSON),
# streaming or not. Cold and warm (a CodeExecutionPool of one). And a
# program that prints 100 lines a second for 3 s, faster than the agent's
# throttle lets it write the status: what a line waits then.
#
# Not a test: it prints p50/p90/max and appends them to bench/RESULTS.md.
# Needs `make cluster-up NODE=1` and `make`.
#
# usage: bench/stream.sh [N]      (runs of each kind; default 10)
set -euo pipefail
n=${1:-10}
. "$(dirname "$0")/lib.sh"
bench_need_node stream.sh
ns=bench-stream-$$
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
	--namespace "$ns" --lease-namespace "$ns" --metrics-addr 127.0.0.1:$(port) --log-level warn \
	> "$work/controller.log" 2>&1 &
pids+=($!)
aaddr=127.0.0.1:$(port)
"$top/bin/airlock-node-agent" --kubeconfig "$KUBECONFIG_ADMIN" --node-name "$NODE_NAME" \
	--namespace "$ns" --pod-logs-dir "$POD_LOGS_DIR" --containerd-socket "$CONTAINERD_SOCK" \
	--metrics-addr "$aaddr" --log-level warn --runsc "$RUNSC" --runsc-root "$RUNSC_ROOT" \
	> "$work/agent.log" 2>&1 &
pids+=($!)
until curl -sf "http://$aaddr/readyz" >/dev/null 2>&1; do sleep 0.2; done
k config view --raw -o json > "$work/kc.json"

python3 - "$n" "$work" "$ns" "$APISERVER_URL" "$top" "$KUBECONFIG_ADMIN" <<'PY'
import json, os, subprocess, sys, threading, time
n, work, ns, url, top, kubeconfig = int(sys.argv[1]), *sys.argv[2:7]
sys.path.insert(0, top + "/bench")
import lib
A = lib.Api(work, url)
cxp = "/apis/airlock.dev/v1alpha1/namespaces/%s/codeexecutions" % ns
PROG = ("import time\nfor i in range(10):\n    print('%.6f' % time.time(), flush=True)\n"
        "    time.sleep(0.3)\n")
# Faster than the agent's throttle lets the status be written (issue 29):
# 100 lines a second for 3 s.
FAST = ("import time\nfor i in range(300):\n    print('%.6f' % time.time(), flush=True)\n"
        "    time.sleep(0.01)\n")

def pool(replicas):
    """Cold: no pool. Warm: a pool of one."""
    base = "/apis/airlock.dev/v1alpha1/namespaces/%s/codeexecutionpools" % ns
    if replicas:
        A.req("POST", base, {"apiVersion": "airlock.dev/v1alpha1",
                             "kind": "CodeExecutionPool", "metadata": {"name": "py"},
                             "spec": {"runtime": "python", "replicas": replicas}})

def ready_holders():
    items = A.get("/api/v1/namespaces/%s/pods" % ns)["items"]
    ok = 0
    for p in items:
        md, st = p["metadata"], p.get("status", {})
        cs = (st.get("containerStatuses") or [{}])[0]
        if "airlock.dev/pool-uid" in md.get("labels", {}) and \
                "airlock.dev/execution-uid" not in md.get("labels", {}) and \
                "deletionTimestamp" not in md and cs.get("ready") is True:
            ok += 1
    return ok, len(items)

def quiesce(warm):
    t0 = time.monotonic()
    while True:
        ready, pods = ready_holders()
        if (warm and ready == 1 and pods == 1) or (not warm and pods == 0):
            return
        if time.monotonic() - t0 > 120:
            raise SystemExit("not quiet after 120 s")
        time.sleep(0.1)

class Writes(threading.Thread):
    """The execution's watch events and their objects' sizes."""
    def __init__(self, name):
        super().__init__(daemon=True)
        self.name, self.events, self.bytes = name, 0, 0
        self.opened = threading.Event()
    def run(self):
        path = "%s?watch=1&fieldSelector=metadata.name%%3D%s" % (cxp, self.name)
        def done(o):
            self.events += 1
            self.bytes += len(json.dumps(o, separators=(",", ":")))
            return o.get("status", {}).get("phase") in ("Succeeded", "Failed",
                                                         "TimedOut", "Cancelled")
        A.watch_until(path, done, self.opened.set)

def one(name, stream, prog=PROG, lines=10):
    w = Writes(name)
    w.start()
    assert w.opened.wait(30), "the watch did not open in 30 s"  # before the create
    args = [top + "/bin/airlock", "run", "--name", name, "-c", prog, "-n", ns,
            "--kubeconfig", kubeconfig] + ([] if stream else ["--no-stream"])
    p = subprocess.Popen(args, stdout=subprocess.PIPE)
    lat = []
    for line in p.stdout:
        lat.append(time.time() - float(line))
    assert p.wait() == 0 and len(lat) == lines, (p.returncode, len(lat))
    w.join(60)
    return lat, w.events, w.bytes

res = {}
for warm in (False, True):
    pool(1 if warm else 0)
    for i in range(n):
        for stream, fast in ((True, False), (False, False), (True, True)):
            quiesce(warm)
            k = ("warm" if warm else "cold", "fast" if fast else "stream" if stream else "end")
            lat, ev, by = one("s-%s-%s-%03d" % (k[0], k[1], i), stream,
                              *((FAST, 300) if fast else (PROG, 10)))
            r = res.setdefault(k, {"lat": [], "first": [], "ev": [], "by": []})
            r["lat"] += lat
            r["first"].append(lat[0])
            r["ev"].append(ev)
            r["by"].append(by)
q = lib.q
out = {"%s/%s" % k: {"lat": [q(v["lat"], p) * 1000 for p in (50, 90, 100)],
                     "first": [q(v["first"], p) * 1000 for p in (50, 90, 100)],
                     "ev": q(v["ev"], 50), "by": q(v["by"], 50), "n": len(v["lat"])}
       for k, v in res.items()}
json.dump(out, open(work + "/out.json", "w"))
PY

cpu=$(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo)
python3 - "$work" "$n" "$cpu" "$(date -u +%Y-%m-%d)" "$(git -C "$top" rev-parse --short HEAD)" <<'PY' | tee -a "$top/bench/RESULTS.md"
import json, sys
work, n, cpu, day, commit = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
o = json.load(open(work + "/out.json"))
print()
print("## live output, %s (%s) - a line every 300 ms, 10 lines, `bin/airlock run`, N=%d runs each" % (day, commit, n))
print()
print("Machine: 2 cores (%s); one node (tests/cluster NODE=1). bench/stream.sh. A line's latency:"
      " the CLI wrote it to its stdout less the program printed it (one clock)." % cpu)
print()
print("| path | lines | line latency p50 / p90 / max ms | first line p50 ms | status writes (watch events) p50 | bytes stored p50 |")
print("|---|---|---|---|---|---|")
for k in ("cold/stream", "cold/end", "cold/fast", "warm/stream", "warm/end", "warm/fast"):
    v = o[k]
    print("| %s | %d | %.0f / %.0f / %.0f | %.0f | %d | %d |" % (
        k.replace("/end", ", --no-stream").replace("/stream", ", live")
        .replace("/fast", ", live, 100 lines a second for 3 s"), v["n"], *v["lat"],
        v["first"][0], v["ev"], v["by"]))
PY
