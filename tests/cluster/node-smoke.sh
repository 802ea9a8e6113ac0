#!/usr/bin/env bash
# Smoke test of the test node (NODE=1 tests/cluster/up.sh): gVisor pods from
# the runner images, hardened as controller/docs/pod.md describes, with
# exact checks on what they print (read from the CRI log files on disk), on
# their exit codes (from the pod status), on gVisor really being the kernel
# they see and on them having no network. Exits non-zero on any failure.
#
# usage: tests/cluster/node-smoke.sh     (on a running NODE=1 cluster)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
env_file=$root/.cluster/env
NS=node-smoke
TIMEOUT=${SMOKE_TIMEOUT:-120}

fails=0
passes=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
pass() { echo "ok: $*"; passes=$((passes + 1)); }
die() { echo "node-smoke.sh: $*" >&2; exit 1; }

[ -f "$env_file" ] || die "no cluster: run NODE=1 tests/cluster/up.sh"
# shellcheck disable=SC1090
. "$env_file"
[ -n "${NODE_NAME-}" ] || die "the cluster has no node: run NODE=1 tests/cluster/up.sh"
k() { "$KUBECTL" --kubeconfig="$KUBECONFIG_ADMIN" "$@"; }
ms_since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%d", (b - a) * 1000 }'; }

# expect WHAT WANT GOT: exact comparison, both shown on a mismatch.
expect() {
	if [ "$2" == "$3" ]; then
		pass "$1"
	else
		fail "$1"
		diff <(printf '%s\n' "$2") <(printf '%s\n' "$3") | sed 's/^/    /' >&2 || true
	fi
}

# 1. The node is Ready.
t0=$EPOCHREALTIME
deadline=$((SECONDS + TIMEOUT))
until [ "$(k get node "$NODE_NAME" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]; do
	((SECONDS < deadline)) || die "node $NODE_NAME not Ready after $TIMEOUT s"
	sleep 0.5
done
pass "node $NODE_NAME Ready (waited $(ms_since "$t0") ms)"

# A fresh namespace; its deletion at the end checks the namespace and
# garbage-collector controllers.
k delete namespace "$NS" --ignore-not-found --wait=true >/dev/null
k create namespace "$NS" >/dev/null
deadline=$((SECONDS + 30))
until k -n "$NS" get serviceaccount default >/dev/null 2>&1; do
	((SECONDS < deadline)) || die "no default ServiceAccount in $NS after 30 s (kube-controller-manager?)"
	sleep 0.2
done
pass "kube-controller-manager made the default ServiceAccount of $NS"
token=$(k -n "$NS" create token default --duration=10m)
if [[ $token == ey*.*.* ]]; then pass "a token for $NS/default"; else fail "no token for $NS/default: '$token'"; fi

# pod NAME IMAGE CODE_VOLUME_YAML COMMAND_JSON: a pod hardened like the
# controller's (controller/docs/pod.md): gvisor, uid 65532, read-only root,
# no capabilities, seccomp RuntimeDefault, no token, no DNS, the code
# read-only at /airlock/code, emptyDirs at /airlock/work and /tmp.
pod() {
	local name=$1 image=$2 codevol=$3 cmd=$4 annotations=${5-}
	cat <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: $name
  namespace: $NS
  annotations: {$annotations}
spec:
  runtimeClassName: $RUNTIME_CLASS
  restartPolicy: Never
  activeDeadlineSeconds: 60
  automountServiceAccountToken: false
  enableServiceLinks: false
  dnsPolicy: None
  dnsConfig:
    nameservers: ["127.0.0.1"]
  securityContext:
    runAsNonRoot: true
    runAsUser: 65532
    runAsGroup: 65532
    seccompProfile: {type: RuntimeDefault}
  containers:
  - name: run
    image: $image
    imagePullPolicy: Never
    command: $cmd
    workingDir: /airlock/work
    env:
    - {name: AIRLOCK_CODE_DIR, value: /airlock/code}
    resources:
      requests: {cpu: 250m, memory: 256Mi}
      limits: {cpu: 250m, memory: 256Mi}
    securityContext:
      runAsNonRoot: true
      runAsUser: 65532
      allowPrivilegeEscalation: false
      readOnlyRootFilesystem: true
      capabilities: {drop: [ALL]}
      seccompProfile: {type: RuntimeDefault}
    volumeMounts:
    - {name: code, mountPath: /airlock/code, readOnly: true}
    - {name: work, mountPath: /airlock/work}
    - {name: tmp, mountPath: /tmp}
  volumes:
  - name: code
$codevol
  - {name: work, emptyDir: {sizeLimit: 64Mi}}
  - {name: tmp, emptyDir: {sizeLimit: 64Mi}}
EOF
}

# run_pod NAME YAML: create it, wait for Succeeded or Failed; sets PHASE,
# EXIT_CODE, LOG_FILE, and prints the create-to-end time. LOG_LATENCY: the
# time until the container's first full line was in its CRI log file (what
# a node agent reading the files sees; the pod's phase lags it by the
# kubelet's 1 s PLEG relist and the sandbox's teardown).
declare -A LATENCY LOG_LATENCY
run_pod() {
	local name=$1 yaml=$2 t uid
	t=$EPOCHREALTIME
	uid=$(k create -f - -o jsonpath='{.metadata.uid}' <<<"$yaml")
	# The kubelet's layout: <podLogsDir>/<ns>_<pod>_<uid>/<container>/<restart>.log
	LOG_FILE=$POD_LOGS_DIR/${NS}_${name}_${uid}/run/0.log
	deadline=$((SECONDS + TIMEOUT))
	LOG_LATENCY[$name]=
	while :; do
		if [ -z "${LOG_LATENCY[$name]}" ] && grep -q ' F ' "$LOG_FILE" 2>/dev/null; then
			LOG_LATENCY[$name]=$(ms_since "$t")
		fi
		PHASE=$(k -n "$NS" get pod "$name" -o jsonpath='{.status.phase}')
		case $PHASE in Succeeded|Failed) break ;; esac
		if ((SECONDS >= deadline)); then
			k -n "$NS" describe pod "$name" >&2
			die "pod $name still $PHASE after $TIMEOUT s"
		fi
		sleep 0.05
	done
	LATENCY[$name]=$(ms_since "$t")
	echo "time: $name create -> first log line on disk: ${LOG_LATENCY[$name]:-?} ms, -> $PHASE: ${LATENCY[$name]} ms"
	EXIT_CODE=$(k -n "$NS" get pod "$name" -o jsonpath='{.status.containerStatuses[0].state.terminated.exitCode}')
	[ -f "$LOG_FILE" ] || die "no CRI log file $LOG_FILE"
}

# stream FILE STREAM: the text of one stream's full lines, after checking
# that every line of the file is in the CRI format.
stream() {
	local bad
	bad=$(grep -cvE '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]+Z (stdout|stderr) [FP] ' "$1" || true)
	[ "$bad" = 0 ] || fail "$bad lines of $1 are not 'TIMESTAMP STREAM F|P text'"
	awk -v s="$2" '$2 == s && $3 == "F" { sub(/^[^ ]+ [^ ]+ [^ ]+ /, ""); print }' "$1"
}

# 2. python: stdout and stderr, stdin from /airlock/code/.stdin, spec.files
# copied next to the program, the sandbox's kernel and network.
k -n "$NS" create configmap py-code \
	--from-literal=main.py="$(cat <<'EOF'
import errno, os, socket, sys
print("hello from python")
print("warning from python", file=sys.stderr)
print("stdin:", sys.stdin.read().strip())
print("file:", open("data/input.txt").read().strip())
print("uid:", os.getuid(), "gid:", os.getgid(), "cwd:", os.getcwd())
print("kernel:", open("/proc/version").read().split()[2])
print("interfaces:", " ".join(sorted(n for _, n in socket.if_nameindex())))
for host, port in [(os.environ["HOST_IP"], int(os.environ["HOST_PORT"])), ("127.0.0.1", int(os.environ["API_PORT"]))]:
    s = socket.socket()
    s.settimeout(5)
    try:
        s.connect((host, port))
        print("connect", host, "succeeded")
    except OSError as e:
        print("connect", host if host == "127.0.0.1" else "node", "failed:", errno.errorcode.get(e.errno, e))
# /var/tmp: world-writable in the image, so only the read-only mount stops it.
try:
    open("/var/tmp/rootfs-write", "w")
    print("root fs writable")
except OSError as e:
    print("root fs write failed:", errno.errorcode[e.errno])
open("/tmp/scratch", "w").write("x")
print("tmp writable")
sys.exit(0)
EOF
)" --from-literal=.stdin="the stdin line" --from-literal=input.txt="file content" >/dev/null
kubelet_port=$(k get node "$NODE_NAME" -o jsonpath='{.status.daemonEndpoints.kubeletEndpoint.Port}')
api_port=${APISERVER_URL##*:}
py_yaml=$(pod py "$RUNNER_PYTHON_IMAGE" "    configMap:
      name: py-code
      defaultMode: 0444
      items:
      - {key: main.py, path: main.py}
      - {key: .stdin, path: .stdin}
      - {key: input.txt, path: data/input.txt}" '["/airlock/bin/run", "python3", "main.py"]')
# The program reads its targets from the environment.
py_yaml=${py_yaml/"    - {name: AIRLOCK_CODE_DIR, value: /airlock/code}"/"    - {name: AIRLOCK_CODE_DIR, value: /airlock/code}
    - {name: HOST_IP, value: \"$NODE_IP\"}
    - {name: HOST_PORT, value: \"$kubelet_port\"}
    - {name: API_PORT, value: \"$api_port\"}"}
run_pod py "$py_yaml"
expect "python pod phase" Succeeded "$PHASE"
expect "python exit code" 0 "$EXIT_CODE"
# What gVisor reports differs between the pinned runsc and Debian's older
# one (the fallback, GVISOR_SHIM=runc-v2).
if [ "${GVISOR_SHIM-}" = runc-v2 ]; then
	kernel=4.4.0 unreach=EHOSTUNREACH
else
	kernel=4.19.0-gvisor unreach=ENETUNREACH
fi
expect "python stdout (CRI log file)" "hello from python
stdin: the stdin line
file: file content
uid: 65532 gid: 65532 cwd: /airlock/work
kernel: $kernel
interfaces: lo
connect node failed: $unreach
connect 127.0.0.1 failed: ECONNREFUSED
root fs write failed: EROFS
tmp writable" "$(stream "$LOG_FILE" stdout)"
expect "python stderr (CRI log file)" "warning from python" "$(stream "$LOG_FILE" stderr)"
# kubectl logs goes apiserver -> kubelet (its client certificate); the two
# streams interleave in no fixed order.
expect "kubectl logs through the kubelet" "$({ stream "$LOG_FILE" stdout; stream "$LOG_FILE" stderr; } | sort)" \
	"$(k -n "$NS" logs py | sort)"

# 3. node: the code from a downward-API volume (the controller's small-code
# path), a non-zero exit code.
node_yaml=$(pod nodejs "$RUNNER_NODE_IMAGE" "    downwardAPI:
      defaultMode: 0444
      items:
      - path: main.js
        fieldRef: {fieldPath: \"metadata.annotations['airlock.dev/source']\"}" \
	'["/airlock/bin/run", "node", "main.js"]' \
	"\"airlock.dev/source\": \"console.log('hello from node', process.version.split('.')[0]); console.error('oops from node'); process.exit(3)\"")
run_pod nodejs "$node_yaml"
expect "node pod phase" Failed "$PHASE"
expect "node exit code" 3 "$EXIT_CODE"
expect "node stdout" "hello from node v18" "$(stream "$LOG_FILE" stdout)"
expect "node stderr" "oops from node" "$(stream "$LOG_FILE" stderr)"

# 4. bash: gVisor's own kernel messages, seen with dmesg inside the sandbox.
k -n "$NS" create configmap sh-code --from-literal=main.sh="$(cat <<'EOF'
echo "hello from bash $BASH_VERSINFO"
dmesg | grep -c gVisor >/dev/null && echo "dmesg: gVisor"
id -u
exit 0
EOF
)" >/dev/null
sh_yaml=$(pod sh "$RUNNER_BASH_IMAGE" "    configMap:
      name: sh-code
      defaultMode: 0444" '["/airlock/bin/run", "bash", "main.sh"]')
run_pod sh "$sh_yaml"
expect "bash pod phase" Succeeded "$PHASE"
expect "bash exit code" 0 "$EXIT_CODE"
expect "bash stdout" "hello from bash 5
dmesg: gVisor
65532" "$(stream "$LOG_FILE" stdout)"

# 5. Latency of the smallest pod (bash, echo), a few times in a row: what
# the kubelet, containerd and gVisor add before a CodeExecution's own work.
runs=${SMOKE_LATENCY_RUNS:-5}
lat=()
loglat=()
for i in $(seq "$runs"); do
	y=$(pod "echo$i" "$RUNNER_BASH_IMAGE" "    emptyDir: {}" '["bash", "-c", "echo hi"]')
	run_pod "echo$i" "$y" >/dev/null
	if [ "$PHASE" != Succeeded ] || [ "$(stream "$LOG_FILE" stdout)" != hi ]; then
		fail "echo$i: $PHASE, '$(stream "$LOG_FILE" stdout)'"
	fi
	lat+=("${LATENCY[echo$i]}")
	loglat+=("${LOG_LATENCY[echo$i]}")
	k -n "$NS" delete pod "echo$i" --wait=false >/dev/null
done
median() { printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
median=$(median "${lat[@]}")
logmedian=$(median "${loglat[@]}")
echo "time: echo pod create -> 'hi' in the CRI log file, $runs in a row: ${loglat[*]} ms (median $logmedian ms)"
echo "time: echo pod create -> Succeeded, $runs in a row: ${lat[*]} ms (median $median ms)"

# 6. The garbage collector: a dependent goes with its owner (the
# controller's ConfigMaps are owned by their CodeExecution).
owner_uid=$(k -n "$NS" create configmap gc-owner -o jsonpath='{.metadata.uid}')
k apply -f - >/dev/null <<EOF
apiVersion: v1
kind: ConfigMap
metadata:
  name: gc-dependent
  namespace: $NS
  ownerReferences:
  - {apiVersion: v1, kind: ConfigMap, name: gc-owner, uid: $owner_uid}
EOF
t=$EPOCHREALTIME
k -n "$NS" delete configmap gc-owner --wait=true >/dev/null
deadline=$((SECONDS + 30))
while k -n "$NS" get configmap gc-dependent >/dev/null 2>&1 && ((SECONDS < deadline)); do sleep 0.2; done
if k -n "$NS" get configmap gc-dependent >/dev/null 2>&1; then
	fail "garbage collector: gc-dependent outlived its owner by 30 s"
else
	pass "garbage collector deleted the owner's dependent ($(ms_since "$t") ms)"
fi

# 7. The namespace really goes: pods, configmaps, the namespace itself.
t=$EPOCHREALTIME
k delete namespace "$NS" --wait=true --timeout=60s >/dev/null ||
	fail "namespace $NS not deleted within 60 s"
if k get namespace "$NS" >/dev/null 2>&1; then
	fail "namespace $NS still exists"
else
	pass "namespace $NS deleted ($(ms_since "$t") ms)"
fi

echo "timings (pod create -> end): python ${LATENCY[py]} ms, node ${LATENCY[nodejs]} ms, bash ${LATENCY[sh]} ms, echo median $median ms (output on disk: $logmedian ms)"
echo "$passes passed, $fails failed"
[ "$fails" = 0 ]
