#!/usr/bin/env bash
# Benchmark (issue 30): a session's step against a one-shot warm execution
# and the exec floor, on the real gVisor node, in the same run, N of each,
# interleaved:
#
#   step      a CodeExecution naming a Ready python session (`x = x + 1`,
#             its last value back in status.value): create -> Succeeded,
#             the watch's event in hand. The kernel is up: no interpreter
#             start, no import, nothing unpacked but the step.
#   sdk-step  the same through the SDK, in the same session:
#             `s.run("y = y + 1\ny")`, its Result in hand (create, watch,
#             the value parsed).
#   describe  `df.describe()` in a python-data session whose earlier step
#             made a 100k-row frame (pandas imported then): its value back.
#   warm      the baseline: `print(1)` as a one-shot CodeExecution in a
#             namespace with a CodeExecutionPool (replicas 2): create ->
#             Succeeded.
#   exec      the floor: `python3 -c 'print(1)'` exec'd into a running
#             gVisor sandbox through containerd's Tasks API, no Kubernetes
#             (bench/cri_floor.c -x, five per sandbox, every fifth round).
#   ready-warm  a CodeSession's create -> Ready, the pool's runtime and
#             resources: a holder of the pool claimed; then deleted, untimed
#             (20, before the rest: the node's two CPUs hold no more pods)
#   ready-cold  the same with other resources (memory 200Mi): a pod of its
#             own (20, interleaved with ready-warm)
#
# Then, idle, each sandbox's memory as its pod's cgroup counts it: an idle
# holder, the python session (after its steps), the python-data session
# (its frame held).
#
# Before each sample, untimed: the pool's two holders ready and idle,
# nothing terminating. The controller and agent are this clone's bin/, the
# agent as the chart's default has it: containerd alone (BENCH_RUNSC=1:
# with --runsc, the chart's nodeAgent.runsc.path). Not a test: it prints the
# medians, p90 and p99 (max below N 200) and appends them to
# bench/RESULTS.md. Needs `make cluster-up NODE=1`, `images/local.sh` and
# `make`.
#
# usage: [BENCH_RUNSC=1] [BENCH_BIN=DIR] bench/session.sh [N]   (default 200;
# BENCH_BIN: where the controller and agent are, default bin/: a copy lets
# make run meanwhile)
set -euo pipefail
n=${1:-200}
bin=${BENCH_BIN:-$(cd "$(dirname "$0")/.." && pwd)/bin}
. "$(dirname "$0")/lib.sh"
bench_need_node session.sh
ns=bench-session-$$
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
	k delete ns "$ns" --wait=false >/dev/null 2>&1
	rm -rf "$work"
}
trap cleanup EXIT

bench_install
k apply --server-side -f "$top/crds/airlock.dev_codesessions.yaml" \
	-f "$top/crds/airlock.dev_codeexecutionartifacts.yaml" >/dev/null
k wait --for=condition=Established crd/codesessions.airlock.dev >/dev/null
k create ns "$ns" >/dev/null
until k -n "$ns" get serviceaccount default >/dev/null 2>&1; do sleep 0.2; done
bench_config "$RUNNER_PYTHON_IMAGE" "[/airlock/bin/run, python3, main.py]" "$(printf \
	'  python-data:\n    image: %s\n    command: [/airlock/bin/run, python3, main.py]\n    sourceFile: main.py' \
	"$RUNNER_PYTHON_DATA_IMAGE")"
kubelet=$(pgrep -f "kubelet --config=$top/.cluster/node/kubelet.yaml" | head -n1)
[ -n "$kubelet" ] || { echo "bench/session.sh: no kubelet of this clone running" >&2; exit 1; }
cri_floor=$top/build/plain/bench/cri_floor
[ -x "$cri_floor" ] || { echo "bench/session.sh: $cri_floor is not built (make)" >&2; exit 1; }
mkdir -p "$work/cri-logs"
bench_daemons "$bin" "$ns" ${BENCH_RUNSC:+--runsc "$RUNSC" --runsc-root "$RUNSC_ROOT"}
k -n "$ns" apply -f - >/dev/null <<YAML
apiVersion: airlock.dev/v1alpha1
kind: CodeExecutionPool
metadata: {name: py}
spec: {runtime: python, replicas: 2}
YAML

k config view --raw -o json > "$work/kc.json"
# The SDK's dependencies: the SDK tier's venv (tests/sdk/test_sdk_tier makes it).
cache=${AIRLOCK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/airlock}
py=$cache/pyvenv-$(sha256sum "$top/tests/sdk/requirements.txt" | cut -c1-12)/bin/python
[ -x "$py" ] || { echo "bench/session.sh: no $py: run make sdk once" >&2; exit 1; }
PYTHONPATH="$top/sdk/python/src${PYTHONPATH:+:$PYTHONPATH}" "$py" - "$n" "$work" "$ns" \
	"$APISERVER_URL" "$top" "$cri_floor" "$CONTAINERD_SOCK" "$RUNNER_PYTHON_IMAGE" "$kubelet" \
	"$KUBECONFIG_ADMIN" "$CGROUP_ROOT" <<'PY'
import glob, json, sys, time
n, work, ns, url, top = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
cri_floor, sock, image, kubelet, kubeconfig, cgroot = sys.argv[6:12]
sys.path.insert(0, top + "/bench")
import lib
import airlock
A = lib.Api(work, url)
G = "/apis/airlock.dev/v1alpha1/namespaces/%s/" % ns
END = ("Succeeded", "Failed", "TimedOut", "Cancelled")

def holders_idle():
    t0 = time.monotonic()
    while True:
        ps = A.get("/api/v1/namespaces/%s/pods" % ns)["items"]
        hs = [p for p in ps if "airlock.dev/pool-uid" in p["metadata"].get("labels", {})]
        ok = [p for p in hs if "airlock.dev/execution-uid" not in p["metadata"]["labels"]
              and "deletionTimestamp" not in p["metadata"]
              and (p.get("status", {}).get("containerStatuses") or [{}])[0].get("ready")]
        if len(hs) == 2 and len(ok) == 2:
            return
        if time.monotonic() - t0 > 120:
            raise SystemExit("pool not idle after 120 s")
        time.sleep(0.05)

def cx(name, spec):
    return A.cx(ns, name, spec)

def session(name, mode, spec=None):
    t0 = time.monotonic()
    A.req("POST", G + "codesessions", {"apiVersion": "airlock.dev/v1alpha1",
          "kind": "CodeSession", "metadata": {"name": name},
          "spec": spec or {"runtime": "python"}})
    o = A.watch_until(G + "codesessions?watch=1&fieldSelector=metadata.name%%3D%s" % name,
                      lambda o: o.get("status", {}).get("phase") in ("Ready", "Ended"))
    assert o["status"]["phase"] == "Ready" and o["status"]["startMode"] == mode, o["status"]
    return time.monotonic() - t0

def close(name):
    A.req("PATCH", G + "codesessions/" + name, {"spec": {"close": True}},
          ctype="application/merge-patch+json")

def delete(name):
    """Gone, not only ended: ended ones count in the namespace's quota of
    stored sessions (20) until their TTL."""
    A.req("DELETE", G + "codesessions/" + name)

def memory(pod):
    return A.pod_memory(ns, pod, cgroot)

def pod_of(name):
    return A.get(G + "codesessions/" + name)["status"]["podName"]

res = {"step": [], "sdk-step": [], "describe": [], "warm": [], "exec": [],
       "ready-warm": [], "ready-cold": []}
# First, the sessions' start (the node's two CPUs hold the pool's two
# holders and one session's pod besides, at the default 500m each).
for i in range(20):
    holders_idle()
    res["ready-warm"].append(session("rw-%03d" % i, "Warm"))
    delete("rw-%03d" % i)
    holders_idle()
    res["ready-cold"].append(session("rc-%03d" % i, "Cold", {"runtime": "python",
                             "resources": {"memory": "200Mi"}}))
    delete("rc-%03d" % i)
holders_idle()
session("s", "Warm")
t, st = cx("step-init", {"runtime": "python", "session": "s", "source": "x = 0\ny = 0\n"})
assert st["phase"] == "Succeeded", st
session("d", "Cold", {"runtime": "python-data"})
t, st = cx("d-init", {"runtime": "python-data", "session": "d", "timeoutSeconds": 120,
                      "source": "import numpy as np, pandas as pd\n"
                                "df = pd.DataFrame(np.random.default_rng(1).random((100000, 4)),"
                                " columns=list('abcd'))\nlen(df)\n"})
assert st["phase"] == "Succeeded" and st.get("value") == "100000", st
# The SDK's steps go to session s too (its y): no third sandbox.
sdk = airlock.Client(namespace=ns, kubeconfig=kubeconfig)
ss = airlock.Session(sdk, "s", "python")
holders_idle()
cx("warm-init", {"runtime": "python", "source": "print(1)\n"})
for i in range(n):
    holders_idle()
    t, st = cx("warm-%03d" % i, {"runtime": "python", "source": "print(1)\n"})
    assert st["phase"] == "Succeeded" and st["stdout"] == "1\n" and st["startMode"] == "Warm", st
    res["warm"].append(t)
    holders_idle()
    t, st = cx("step-%03d" % i, {"runtime": "python", "session": "s", "source": "x = x + 1\nx\n"})
    assert st["phase"] == "Succeeded" and st.get("value") == str(i + 1), st
    assert st["startMode"] == "Session", st
    res["step"].append(t)
    t0 = time.monotonic()
    r = ss.run("y = y + 1\ny")
    res["sdk-step"].append(time.monotonic() - t0)
    assert (r.phase, r.value) == ("Succeeded", str(i + 1)), r
    t, st = cx("desc-%03d" % i, {"runtime": "python-data", "session": "d",
                                 "source": "df.describe()\n"})
    assert st["phase"] == "Succeeded" and "count  100000.000000" in st.get("value", ""), st
    res["describe"].append(t)
    if i % 5 == 0:
        res["exec"] += [float(x) / 1000 for x in lib.cri_floor_run(
            cri_floor, sock, image, work, int(kubelet), "-x", "5")["exec_ms"].split(",")]
holders_idle()
time.sleep(5)       # untimed: settled, nothing running
hs = [p["metadata"]["name"] for p in A.get("/api/v1/namespaces/%s/pods" % ns)["items"]
      if "airlock.dev/pool-uid" in p["metadata"].get("labels", {})]
mem = {"holder": memory(hs[0]), "session": memory(pod_of("s")),
       "data-session": memory(pod_of("d"))}
close("s")
close("d")
q = lib.q
out = {k: [q(v, 50) * 1000, q(v, 90) * 1000, q(v, 99) * 1000, max(v) * 1000, len(v)]
       for k, v in res.items()}
out["memory"] = mem
json.dump(out, open(work + "/out.json", "w"))
PY

cpu=$(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo)
mem=$(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo)
python3 - "$work" "$n" "$cpu" "$mem" "$(date -u +%Y-%m-%d)" "$(git -C "$top" rev-parse --short HEAD)" "${BENCH_RUNSC:+1}" <<'PY' | tee -a "$top/bench/RESULTS.md"
import json, sys
work, n, cpu, mem, day, commit = sys.argv[1], int(sys.argv[2]), *sys.argv[3:7]
runsc = sys.argv[7] == "1"
o = json.load(open(work + "/out.json"))
print("\n## bench/session.sh, %s, %s (%s, %s), N=%d, agent: %s\n" % (day, commit, cpu, mem, n,
      "--runsc" if runsc else "containerd alone (the chart's default)"))
print("| what | p50 ms | p90 ms | p99 ms | max ms | N |")
print("|---|---|---|---|---|---|")
for k, label in (("step", "a session's step (`x = x + 1`, value back)"),
                 ("sdk-step", "the same through the SDK's `s.run`"),
                 ("describe", "`df.describe()`, 100k rows, python-data session"),
                 ("warm", "a one-shot warm execution (`print(1)`, pool of 2)"),
                 ("exec", "exec floor: `print(1)` exec'd into a running sandbox (cri_floor -x)"),
                 ("ready-warm", "a session created -> Ready (a pool's holder claimed)"),
                 ("ready-cold", "a session created -> Ready (a pod of its own)")):
    p50, p90, p99, mx, cnt = o[k]
    # p99 said only where N makes it more than the maximum's rank.
    print("| %s | %.0f | %.0f | %s | %.0f | %d |" % (label, p50, p90,
          "%.0f" % p99 if cnt >= 200 else "-", mx, cnt))
print("\nstep / warm (p50): %.2f; step / exec floor (p50): %.2f" % (
    o["step"][0] / o["warm"][0], o["step"][0] / o["exec"][0]))
print("\nIdle memory (the pod's cgroup, memory v1: usage, of it rss), MiB:")
for k, label in (("holder", "an idle holder"), ("session", "the python session, idle"),
                 ("data-session", "the python-data session, its frame held")):
    u, rss = o["memory"][k]
    print("- %s: %.1f, rss %.1f" % (label, u / 1048576, rss / 1048576))
PY
