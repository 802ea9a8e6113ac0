#!/usr/bin/env bash
# Benchmark: `airlock run --local` against its floor, `print(1)` in python,
# N runs each, interleaved (local, floor, local, ...):
#
#   local   bin/airlock run --local -c 'print(1)': the CLI builds the pod,
#           the bundle and the cgroup, runs runsc create/start/wait, reads
#           the pipes, collects the status and cleans up
#   floor   runsc --network=none run on a ready bundle of the same root
#           filesystem and command: gVisor alone, nothing prepared per run
#
# Needs root, make, images/local.sh python and a runsc (AIRLOCK_RUNSC, or
# the pinned one tests/cluster/build.sh builds). Not a test: prints
# p50/p90 and p99 (with N >= 300; below that the highest, labelled max)
# and appends them to bench/RESULTS.md.
#
# usage: bench/local.sh [N]     (default 30)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
n=${1:-30}
runsc=${AIRLOCK_RUNSC:-$("$top/tests/cluster/build.sh" runsc | sed -n 's/^GVISOR_BIN_DIR=//p')/runsc}
export AIRLOCK_RUNSC=$runsc
"$top/images/local.sh" python 2>/dev/null
cache=${AIRLOCK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/airlock}
rootfs=$(realpath "${AIRLOCK_LOCAL_ROOT:-$cache/local}/python/rootfs")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/bundle" /run/airlock/runsc   # runsc keeps its null-netns mount there
python3 - "$work/bundle/config.json" "$rootfs" <<'PY'
import json, sys
json.dump({"ociVersion": "1.0.2",
  "process": {"terminal": False, "user": {"uid": 65532, "gid": 65532},
              "args": ["python3", "-c", "print(1)"], "cwd": "/tmp",
              "env": ["PATH=/usr/bin:/bin"]},
  "root": {"path": sys.argv[2], "readonly": True},
  "mounts": [{"destination": "/proc", "type": "proc", "source": "proc"},
             {"destination": "/tmp", "type": "tmpfs", "source": "tmpfs"}],
  "linux": {"namespaces": [{"type": t} for t in ("pid", "ipc", "uts", "mount")]}},
  open(sys.argv[1], "w"))
PY
python3 - "$n" "$top/bin/airlock" "$runsc" "$work" > "$work/out.json" <<'PY'
import json, subprocess, sys, time
n, airlock, runsc, work = int(sys.argv[1]), *sys.argv[2:5]
def local():
    t = time.monotonic()
    out = subprocess.run([airlock, "run", "--local", "-c", "print(1)"],
                         capture_output=True, check=True).stdout
    assert out == b"1\n", out
    return time.monotonic() - t
def floor(i):
    t = time.monotonic()
    out = subprocess.run([runsc, "--root", "/run/airlock/runsc", "--network=none",
                          "--ignore-cgroups", "run", "--bundle", work + "/bundle",
                          "floor-%d" % i], capture_output=True, check=True).stdout
    assert out == b"1\n", out
    return time.monotonic() - t
local(); floor(999)
res = {"local": [], "floor": []}
for i in range(n):
    res["local"].append(local())
    res["floor"].append(floor(i))
def q(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))] * 1000
print(json.dumps({k: [q(v, 50), q(v, 90), q(v, 99)] for k, v in res.items()}))
PY
read -r l50 l90 l99 f50 f90 f99 < <(python3 -c '
import json,sys; o=json.load(open(sys.argv[1]))
print(*["%.0f" % x for k in ("local","floor") for x in o[k]])' "$work/out.json")
cpu=$(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo)
mem=$(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo)
{
	echo
	echo "## local mode, $(date -u +%Y-%m-%d) - print(1) in python, N=$n each, interleaved"
	echo
	echo "Machine: $(nproc) cores ($cpu), $mem; runsc $("$runsc" --version | head -n1 | awk '{print $3}')."
	echo
	echo "| path | p50 ms | p90 ms | $([ "$n" -ge 300 ] && echo p99 || echo max) ms | p50 vs floor |"
	echo "|---|---|---|---|---|"
	echo "| airlock run --local (pod, bundle, cgroup, create/start/wait, status, cleanup) | $l50 | $l90 | $l99 | $(echo "scale=2; $l50 / $f50" | bc)x |"
	echo "| floor: runsc run on a ready bundle | $f50 | $f90 | $f99 | 1.00x |"
} | tee -a "$top/bench/RESULTS.md"
