#!/usr/bin/env bash
# A dry run of bench/soak.sh with no cluster: kubectl (bench/testdata/
# soak-kubectl, whose executions run for three reads of their phase and end
# right), helm, restart.sh, pgrep and sleep are stand-ins, and a copy of
# the script runs in a tree of its own with a made-up .cluster/env. It
# checks the script's own flow (every step, the values, the report and
# RESULTS.md), not Airlock: bench/soak.sh on a NODES=2 cluster does that.
#
# usage: bench/test_soak_dry.sh      (exits non-zero on a failure)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
d=$(mktemp -d)
sleeper=
trap '[ -z "$sleeper" ] || kill "$sleeper"; rm -rf "$d"' EXIT
mkdir -p "$d/top/bench" "$d/top/tests/cluster" "$d/top/.cluster" "$d/bin" "$d/state" \
	"$d/nodes/node/pods" "$d/nodes/node-2/pods" "$d/cgroup/soak-dry-run-none-1" \
	"$d/cgroup/soak-dry-run-none-2"
cp "$here/soak.sh" "$here/lib.sh" "$here/soak_report.py" "$d/top/bench/"
cp "$here/../tests/cluster/chart-node-values.sh" "$d/top/tests/cluster/"
ln -s "$here/../charts" "$d/top/charts"
cat >"$d/top/.cluster/env" <<ENV
NODE_COUNT=2
RUNSC=/bin/true
NODE_1_NAME=airlock-node
NODE_1_CONTAINERD_SOCK=$d/nodes/node/containerd.sock
NODE_1_POD_LOGS_DIR=$d/nodes/node/pods
NODE_1_RUNSC_ROOT=$d/nodes/node/runsc
NODE_1_CGROUP_ROOT=/soak-dry-run-none-1
NODE_2_NAME=airlock-node-2
NODE_2_CONTAINERD_SOCK=$d/nodes/node-2/containerd.sock
NODE_2_POD_LOGS_DIR=$d/nodes/node-2/pods
NODE_2_RUNSC_ROOT=$d/nodes/node-2/runsc
NODE_2_CGROUP_ROOT=/soak-dry-run-none-2
KUBECTL=$d/bin/kubectl
KUBECONFIG_ADMIN=$d/kubeconfig
APISERVER_URL=https://127.0.0.1:24567
CONTROLLER_IMAGE=airlock.dev/controller:0.1.0
NODE_AGENT_IMAGE=airlock.dev/node-agent:0.1.0
RUNNER_PYTHON_IMAGE=airlock.dev/runner-python:0.1.0
ENV
cp "$here/testdata/soak-kubectl" "$d/bin/kubectl"
printf '#!/bin/sh\necho "restart.sh $*" >>"%s/state/calls"\n' "$d" >"$d/top/tests/cluster/restart.sh"
# shellcheck disable=SC2016 # $* and $KUBECONFIG are the stand-in's own
printf '#!/bin/sh\necho "helm $* KUBECONFIG=$KUBECONFIG" >>"%s/state/calls"\n' "$d" >"$d/bin/helm"
printf '#!/bin/sh\nexec /bin/sleep 0.01\n' >"$d/bin/sleep"
# pgrep: a process of ours, for its RSS.
/bin/sleep 600 &
sleeper=$!
printf '#!/bin/sh\necho "pgrep $*" >>"%s/state/calls"\necho %s\n' "$d" "$sleeper" >"$d/bin/pgrep"
chmod +x "$d/bin/"* "$d/top/tests/cluster/restart.sh"
git -C "$d/top" init -q
git -C "$d/top" -c user.name=dry -c user.email=dry@run commit -q --allow-empty -m dry

fail() { echo "test_soak_dry.sh: $*" >&2; exit 1; }
rc=0
(cd "$d/top" && SOAK_MOCK=$d/state SOAK_CGROUP_MEMORY=$d/cgroup PATH=$d/bin:$PATH HELM=$d/bin/helm \
	timeout 120 bash bench/soak.sh 40 >"$d/out" 2>"$d/err") || rc=$?
[ "$rc" = 0 ] || { cat "$d/err" >&2; fail "soak.sh exited $rc"; }
grep -qxF -- "- **wrong 0, lost 0, run twice 0, Pending past the start deadline 0, left behind 0**." "$d/out" ||
	fail "no all-zero line in the report"
grep -qxF -- "- Verdict: passed." "$d/top/bench/RESULTS.md" || fail "no report in RESULTS.md"
grep -q "^## bench/soak.sh 40 (.*, [0-9a-f]*)$" "$d/top/bench/RESULTS.md" || fail "no heading with the commit"
for want in "restart.sh --kill apiserver" "restart.sh --kill etcd" "restart.sh containerd airlock-node" \
	"restart.sh kubelet airlock-node-2" "restart.sh stop-node airlock-node-2" \
	"restart.sh start-node airlock-node-2" "helm uninstall soak -n soak-system --wait KUBECONFIG=$d/kubeconfig" \
	"helm upgrade soak $d/top/charts/airlock -n soak-system --reuse-values --set nodeAgent.logLevel=debug KUBECONFIG=$d/kubeconfig"; do
	grep -qxF -- "$want" "$d/state/calls" || fail "never called: $want"
done
grep -q -- "-n soak-system delete pod agent-2-0 --wait=false" "$d/state/calls" || fail "no agent pod deleted"
grep -q -- "label node airlock-node-2 node-restriction.kubernetes.io/airlock-gvisor-$" "$d/state/calls" ||
	fail "node 2 not unlabelled"
echo "test_soak_dry.sh: ok"
