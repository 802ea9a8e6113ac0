#!/usr/bin/env bash
# Benchmark (issue 31): the data runtime at warm speed. python-data as the
# chart ships it (its preload and warm-up: charts/airlock/values.yaml's
# config.profiles.python-data, and its defaults), against the same image
# with nothing preloaded, on the real gVisor node, N of each, interleaved:
#
#   data-api    `import pandas as pd, matplotlib; print(pd.__version__)`,
#               a one-shot CodeExecution of python-data in a namespace with
#               a pool of it: create -> Succeeded with the output in the
#               status (the watch's event in hand); the program forked
#               from the holder's zygote, the modules imported before
#   data-cli    the same through `bin/airlock run -r python-data -c ...`,
#               the whole process
#   plot        examples/plot.py, warm, its PNG and CSV back as artifacts
#               (status.artifacts, two)
#   plain-api   the baseline: data-api's program on a profile of the same
#               image with no preload (a pool of it too): warm, but the
#               imports paid in the request
#   cold-data   data-api's program cold (resources no pool has: a pod of
#               its own), python-data; and cold-plain, the no-preload
#               profile: a cold execution preloads nothing, so the two
#               are the same within the noise (N/4 each, at least 5)
#
# Then, idle, a holder's memory as its pod's cgroup counts it: python-data
# (the modules loaded, the warm-up run) against the no-preload profile's.
#
# Before each sample, untimed: both pools' holders ready and idle, nothing
# terminating, and then the node quiet: at most 25% of its CPU busy over
# 300 ms, waited for up to 15 s (a cold sample's sandbox is torn down on
# the node after its pod has left the API; the samples that start without
# it are counted in the output). The controller and agent are BENCH_BIN's (default bin/), the
# agent as the chart's default has it: containerd alone (BENCH_RUNSC=1:
# with --runsc). Not a test: it prints the medians, p90 and the maximum
# (p99 from N 200) and appends them to bench/RESULTS.md. Needs `make
# cluster-up NODE=1`, `images/local.sh`, `make` and the SDK tier's venv
# (`make sdk` once: PyYAML reads the chart's values).
#
# usage: [BENCH_RUNSC=1] [BENCH_BIN=DIR] bench/data.sh [N]   (default 30)
set -euo pipefail
n=${1:-30}
bin=${BENCH_BIN:-$(cd "$(dirname "$0")/.." && pwd)/bin}
. "$(dirname "$0")/lib.sh"
bench_need_node data.sh
ns=bench-data-$$
pids=()
trap bench_cleanup EXIT

cache=${AIRLOCK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/airlock}
py=$cache/pyvenv-$(sha256sum "$top/tests/sdk/requirements.txt" | cut -c1-12)/bin/python
[ -x "$py" ] || { echo "bench/data.sh: no $py: run make sdk once" >&2; exit 1; }
bench_install
k apply --server-side -f "$top/crds/airlock.dev_codeexecutionartifacts.yaml" >/dev/null
k create ns "$ns" >/dev/null
until k -n "$ns" get serviceaccount default >/dev/null 2>&1; do sleep 0.2; done
# The controller's config: the chart's python-data profile and defaults,
# the local image; python-data-plain the same without preload (nor warm-up).
"$py" - "$top/charts/airlock/values.yaml" "$RUNNER_PYTHON_DATA_IMAGE" > "$work/config.yaml" <<'PY'
import json, sys, yaml
config = yaml.safe_load(open(sys.argv[1]))["config"]
data = dict(config["profiles"]["python-data"], image=sys.argv[2])
assert data.get("preload") and data.get("warmup"), data
plain = {k: v for k, v in data.items() if k not in ("preload", "warmup")}
out = {"profiles": {"python-data": data, "python-data-plain": plain}}
for k in ("defaults", "caps"):
    if k in config:
        out[k] = config[k]
print(json.dumps(out, indent=1))
PY
kubelet=$(pgrep -f "kubelet --config=$top/.cluster/node/kubelet.yaml" | head -n1)
[ -n "$kubelet" ] || { echo "bench/data.sh: no kubelet of this clone running" >&2; exit 1; }
bench_daemons "$bin" "$ns" ${BENCH_RUNSC:+--runsc "$RUNSC" --runsc-root "$RUNSC_ROOT"}
k -n "$ns" apply -f - >/dev/null <<YAML
apiVersion: airlock.dev/v1alpha1
kind: CodeExecutionPool
metadata: {name: data}
spec: {runtime: python-data, replicas: 1}
---
apiVersion: airlock.dev/v1alpha1
kind: CodeExecutionPool
metadata: {name: plain}
spec: {runtime: python-data-plain, replicas: 1}
YAML
k config view --raw -o json > "$work/kc.json"

"$py" - "$n" "$work" "$ns" "$APISERVER_URL" "$top" "$bin" "$KUBECONFIG_ADMIN" "$CGROUP_ROOT" <<'PY'
import glob, json, subprocess, sys, time
n, work, ns, url, top, bindir, kubeconfig, cgroot = int(sys.argv[1]), *sys.argv[2:9]
sys.path.insert(0, top + "/bench")
import lib
A = lib.Api(work, url)
G = "/apis/airlock.dev/v1alpha1/namespaces/%s/" % ns

PROG = "import pandas as pd, matplotlib; print(pd.__version__)\n"
PLOT = open(top + "/examples/plot.py").read()

def holders():
    return [p for p in A.get("/api/v1/namespaces/%s/pods" % ns)["items"]
            if "airlock.dev/pool-uid" in p["metadata"].get("labels", {})]

unquiet = []

def quiet():
    lib.quiet(unquiet)

def idle():
    """Untimed: each pool's one holder ready and idle, nothing else; then
    the node quiet."""
    idle_pods()
    quiet()

def idle_pods():
    t0 = time.monotonic()
    while True:
        ps = A.get("/api/v1/namespaces/%s/pods" % ns)["items"]
        hs = [p for p in ps if "airlock.dev/pool-uid" in p["metadata"].get("labels", {})]
        ok = [p for p in hs if "airlock.dev/execution-uid" not in p["metadata"]["labels"]
              and "deletionTimestamp" not in p["metadata"]
              and (p.get("status", {}).get("containerStatuses") or [{}])[0].get("ready")]
        if len(ps) == 2 and len(ok) == 2:
            return
        if time.monotonic() - t0 > 180:
            raise SystemExit("pools not idle after 180 s: %d pods, %d ready holders"
                             % (len(ps), len(ok)))
        time.sleep(0.05)

def cx(name, spec):
    return A.cx(ns, name, spec)

version = None

def run(name, runtime, mode, extra=None):
    global version
    spec = {"runtime": runtime, "source": PROG, "timeoutSeconds": 120}
    spec.update(extra or {})
    t, st = cx(name, spec)
    assert st["phase"] == "Succeeded" and st["startMode"] == mode, st
    if version is None:
        version = st["stdout"]
    assert st["stdout"] == version, st
    return t

def cli(name):
    t0 = time.monotonic()
    r = subprocess.run([bindir + "/airlock", "run", "-r", "python-data", "--name", name,
                        "-c", PROG, "-n", ns, "--kubeconfig", kubeconfig], capture_output=True)
    t = time.monotonic() - t0
    assert r.returncode == 0 and r.stdout.decode() == version, r
    st = A.get(G + "codeexecutions/" + name)["status"]
    assert st["startMode"] == "Warm", st
    return t

def plot(name):
    t, st = cx(name, {"runtime": "python-data", "source": PLOT, "timeoutSeconds": 120})
    assert st["phase"] == "Succeeded" and st["startMode"] == "Warm", st
    assert st["stdout"] == "rows 10 sum 385\npng True True\n", st
    assert sorted(a["path"] for a in st.get("artifacts", [])) == \
        ["squares.csv", "squares.png"], st.get("artifacts")
    return t

def memory(pod):
    return A.pod_memory(ns, pod, cgroot)

COLD = {"resources": {"memory": "300Mi"}}   # no pool has it: a pod of its own
res = {k: [] for k in ("data-api", "data-cli", "plot", "plain-api", "cold-data", "cold-plain")}
idle()
run("warmup-data", "python-data", "Warm")   # untimed: the first of each
idle()
run("warmup-plain", "python-data-plain", "Warm")
for i in range(n):
    idle()
    res["data-api"].append(run("data-%03d" % i, "python-data", "Warm"))
    idle()
    res["data-cli"].append(cli("cli-%03d" % i))
    idle()
    res["plot"].append(plot("plot-%03d" % i))
    idle()
    res["plain-api"].append(run("plain-%03d" % i, "python-data-plain", "Warm"))
    if i % 4 == 0 or i < 5 - n // 4:
        idle()
        res["cold-data"].append(run("cd-%03d" % i, "python-data", "Cold", COLD))
        idle()
        res["cold-plain"].append(run("cp-%03d" % i, "python-data-plain", "Cold", COLD))
idle()
time.sleep(5)       # untimed: settled, nothing running
uids = {A.get(G + "codeexecutionpools/" + name)["metadata"]["uid"]: name
        for name in ("data", "plain")}
mem = {uids[p["metadata"]["labels"]["airlock.dev/pool-uid"]]: memory(p["metadata"]["name"])
       for p in holders()}
q = lib.q
out = {k: [q(v, 50) * 1000, q(v, 90) * 1000, q(v, 99) * 1000, max(v) * 1000, len(v)]
       for k, v in res.items()}
out["memory"] = mem
out["unquiet"] = len(unquiet)
out["version"] = version.strip()
json.dump(out, open(work + "/out.json", "w"))
PY

cpu=$(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo)
mem=$(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo)
python3 - "$work" "$n" "$cpu" "$mem" "$(date -u +%Y-%m-%d)" "$(git -C "$top" rev-parse --short HEAD)" "${BENCH_RUNSC:+1}" <<'PY' | tee -a "$top/bench/RESULTS.md"
import json, sys
work, n, cpu, mem, day, commit = sys.argv[1], int(sys.argv[2]), *sys.argv[3:7]
runsc = sys.argv[7] == "1"
o = json.load(open(work + "/out.json"))
print("\n## bench/data.sh, %s, %s (%s, %s), N=%d, agent: %s\n" % (day, commit, cpu, mem, n,
      "--runsc" if runsc else "containerd alone (the chart's default)"))
print("python-data as the chart ships it (preload numpy, pandas, matplotlib; its warm-up), "
      "pandas %s.\n" % o["version"])
print("| what | p50 ms | p90 ms | p99 ms | max ms | N | target p50 |")
print("|---|---|---|---|---|---|---|")
for k, label, target in (
        ("data-api", "**warm, preloaded**: `import pandas as pd, matplotlib; "
         "print(pd.__version__)`, create -> Succeeded", "250"),
        ("data-cli", "the same through `bin/airlock run -r python-data -c ...`", "300"),
        ("plot", "`examples/plot.py`, warm, PNG and CSV as artifacts", "600"),
        ("plain-api", "baseline: the same program warm, nothing preloaded", ""),
        ("cold-data", "cold, python-data (a cold execution preloads nothing)", ""),
        ("cold-plain", "cold, the profile without preload", "")):
    p50, p90, p99, mx, cnt = o[k]
    print("| %s | %.0f | %.0f | %s | %.0f | %d | %s |" % (label, p50, p90,
          "%.0f" % p99 if cnt >= 200 else "-", mx, cnt, target or "-"))
print("\nwarm preloaded / warm without (p50): %.3f; cold python-data / cold without (p50): %.2f"
      % (o["data-api"][0] / o["plain-api"][0], o["cold-data"][0] / o["cold-plain"][0]))
print("\nSamples started on a node not quiet after 15 s: %d" % o["unquiet"])
print("\nAn idle holder's memory (the pod's cgroup, memory v1: usage, of it rss), MiB:")
for k, label in (("data", "python-data, preloaded and warmed up"),
                 ("plain", "the same image, nothing preloaded")):
    u, rss = o["memory"][k]
    print("- %s: %.1f, rss %.1f" % (label, u / 1048576, rss / 1048576))
PY
