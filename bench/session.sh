#!/usr/bin/env bash
# Benchmark (issue 30): a session's step against a one-shot warm execution,
# on the real gVisor node, in the same run, N of each, interleaved:
#
#   step      a CodeExecution naming a Ready python session (`x = x + 1`,
#             its last value back in status.value): create -> Succeeded,
#             the watch's event in hand. The kernel is up: no interpreter
#             start, no import, nothing unpacked but the step.
#   warm      the baseline: `print(1)` as a one-shot CodeExecution in a
#             namespace with a CodeExecutionPool (replicas 2): create ->
#             Succeeded.
#   ready-warm  a CodeSession's create -> Ready, the pool's runtime and
#             resources: a holder of the pool claimed; then deleted, untimed
#   ready-cold  the same with other resources (memory 200Mi): a pod of its
#             own
#
# Before each sample, untimed: the pool's two holders ready and idle,
# nothing terminating. The controller and agent are this clone's bin/ (the
# agent with --runsc, as the chart's default). Not a test: it prints the
# medians and p90 (max below N 300) and appends them to bench/RESULTS.md.
# Needs `make cluster-up NODE=1` and `make`.
#
# usage: bench/session.sh [N]      (default 30)
set -euo pipefail
n=${1:-30}
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
bench_config "$RUNNER_PYTHON_IMAGE" "[/airlock/bin/run, python3, main.py]"
"$top/bin/airlock-controller" --config "$work/config.yaml" --kubeconfig "$KUBECONFIG_ADMIN" \
	--namespace "$ns" --lease-namespace "$ns" --metrics-addr "127.0.0.1:$(port)" \
	--log-level warn > "$work/controller.log" 2>&1 &
pids+=($!)
aaddr=127.0.0.1:$(port)
"$top/bin/airlock-node-agent" --kubeconfig "$KUBECONFIG_ADMIN" --node-name "$NODE_NAME" \
	--namespace "$ns" --pod-logs-dir "$POD_LOGS_DIR" --containerd-socket "$CONTAINERD_SOCK" \
	--metrics-addr "$aaddr" --log-level warn --runsc "$RUNSC" --runsc-root "$RUNSC_ROOT" \
	> "$work/agent.log" 2>&1 &
pids+=($!)
until curl -sf "http://$aaddr/readyz" >/dev/null 2>&1; do sleep 0.2; done
k -n "$ns" apply -f - >/dev/null <<YAML
apiVersion: airlock.dev/v1alpha1
kind: CodeExecutionPool
metadata: {name: py}
spec: {runtime: python, replicas: 2}
YAML

k config view --raw -o json > "$work/kc.json"
python3 - "$n" "$work" "$ns" "$APISERVER_URL" "$top" <<'PY'
import json, sys, time
n, work, ns, url, top = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
sys.path.insert(0, top + "/bench")
import lib
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
    t0 = time.monotonic()
    A.req("POST", G + "codeexecutions", {"apiVersion": "airlock.dev/v1alpha1",
          "kind": "CodeExecution", "metadata": {"name": name}, "spec": spec})
    o = A.watch_until(G + "codeexecutions?watch=1&fieldSelector=metadata.name%%3D%s" % name,
                      lambda o: o.get("status", {}).get("phase") in END)
    return time.monotonic() - t0, o["status"]

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

res = {"step": [], "warm": [], "ready-warm": [], "ready-cold": []}
holders_idle()
session("s", "Warm")
t, st = cx("step-init", {"runtime": "python", "session": "s", "source": "x = 0\n"})
assert st["phase"] == "Succeeded", st
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
    if i < 10:
        holders_idle()
        res["ready-warm"].append(session("rw-%03d" % i, "Warm"))
        delete("rw-%03d" % i)
        holders_idle()
        res["ready-cold"].append(session("rc-%03d" % i, "Cold", {"runtime": "python",
                                 "resources": {"memory": "200Mi"}}))
        delete("rc-%03d" % i)
close("s")
q = lib.q
out = {k: [q(v, 50) * 1000, q(v, 90) * 1000, max(v) * 1000, len(v)] for k, v in res.items()}
json.dump(out, open(work + "/out.json", "w"))
PY

cpu=$(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo)
mem=$(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo)
python3 - "$work" "$n" "$cpu" "$mem" "$(date -u +%Y-%m-%d)" "$(git -C "$top" rev-parse --short HEAD)" <<'PY' | tee -a "$top/bench/RESULTS.md"
import json, sys
work, n, cpu, mem, day, commit = sys.argv[1], int(sys.argv[2]), *sys.argv[3:7]
o = json.load(open(work + "/out.json"))
print("\n## bench/session.sh, %s, %s (%s, %s), N=%d\n" % (day, commit, cpu, mem, n))
print("| what | p50 ms | p90 ms | max ms | N |")
print("|---|---|---|---|---|")
for k, label in (("step", "a session's step (`x = x + 1`, value back)"),
                 ("warm", "a one-shot warm execution (`print(1)`, pool of 2)"),
                 ("ready-warm", "a session created -> Ready (a pool's holder claimed)"),
                 ("ready-cold", "a session created -> Ready (a pod of its own)")):
    p50, p90, mx, cnt = o[k]
    print("| %s | %.0f | %.0f | %.0f | %d |" % (label, p50, p90, mx, cnt))
print("\nstep / warm (p50): %.2f" % (o["step"][0] / o["warm"][0]))
PY
