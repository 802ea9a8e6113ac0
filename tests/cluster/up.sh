#!/usr/bin/env bash
# Start the test control plane (etcd + kube-apiserver, no nodes) under
# <repo>/.cluster, on free loopback ports, with a fresh PKI each time.
# Idempotent: a ready cluster is left alone, a dead or half-started one is
# torn down and replaced. See README.md in this directory.
#
# usage: up.sh            (make cluster-up)
#        NODE=1 up.sh     also a node: containerd + gVisor, scheduler,
#                         controller-manager, kubelet (node.sh)
#        NODES=2 up.sh    two nodes, each with its own kubelet, containerd
#                         and gVisor (NODES=1 is NODE=1)
#        AIRLOCK_APISERVER_PROFILING=1 up.sh
#                         the API server serves /debug/pprof (for
#                         bench/controller.sh APIPROF=; off otherwise)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cluster=$root/.cluster
pki=$cluster/pki
logs=$cluster/logs
t0=$EPOCHREALTIME

SERVICE_CIDR=10.96.0.0/16
SERVICE_IP=10.96.0.1
READY_TIMEOUT=${AIRLOCK_READY_TIMEOUT:-60}
die() { echo "up.sh: $*" >&2; exit 1; }
with_node=false
NODE_COUNT=0
case ${NODE:-0} in
1) with_node=true NODE_COUNT=1 ;;
0) ;;
# Anything else is someone else's variable: plain cluster-up must not change.
*) echo "up.sh: warning: NODE='$NODE' is not 1; starting no node" >&2 ;;
esac
case ${NODES-} in
"") ;;
1 | 2) with_node=true NODE_COUNT=$NODES ;;
*) die "NODES='$NODES': 1 or 2 nodes fit on this machine" ;;
esac
APISERVER_NODE_FLAGS=()

elapsed() { awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }

# One cluster-up or cluster-down at a time per clone. The lock is on this
# directory, so nothing is left behind; down.sh honours the same lock.
exec 9<"$here"
flock 9
export AIRLOCK_CLUSTER_LOCK_HELD=1
# shellcheck source=procs.sh
. "$here/procs.sh"

# is_ours PIDFILE: the pid is alive and really one of our processes (a pid
# may be recycled after a crash or reboot).
is_ours() {
	local pid
	pid=$(cat "$1" 2>/dev/null) || return 1
	[[ $pid =~ ^[0-9]+$ ]] || return 1
	tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -qF "$cluster/"
}

# alive PIDFILE: its process is there and not a zombie. A start-up was
# called failed with the daemon's log still empty (three times in two
# stops: the apiserver, right after a teardown); not understood yet. One
# guess: is_ours read the process's cmdline while it exec'd. So a process
# that is there is waited for, to the deadline, and a failure says what
# the pid file named.
alive() {
	local pid st
	pid=$(cat "$1" 2>/dev/null) || return 1
	[[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null || return 1
	st=$(sed -E 's/^[0-9]+ \(.*\) (.).*/\1/' "/proc/$pid/stat" 2>/dev/null) || return 1
	[ "$st" != Z ]
}

readyz() {
	curl -sf --max-time 2 --cacert "$pki/ca.crt" --cert "$pki/admin.crt" \
		--key "$pki/admin.key" "$APISERVER_URL/readyz" 2>/dev/null | grep -qx ok
}

# running_nodes: how many nodes the cluster in .cluster was started with.
running_nodes() {
	local n
	n=$(sed -n 's/^NODE_COUNT=//p' "$cluster/env" 2>/dev/null)
	[ -n "$n" ] || { grep -q '^NODE_NAME=' "$cluster/env" 2>/dev/null && n=1 || n=0; }
	echo "$n"
}

already_up() {
	local n i
	[ -f "$cluster/env" ] || return 1
	is_ours "$cluster/etcd.pid" && is_ours "$cluster/kube-apiserver.pid" || return 1
	# A cluster with nodes satisfies a plain cluster-up too; NODE=1 and
	# NODES=2 want exactly that many (the one-node tests run one agent,
	# for the one node their pods can land on).
	n=$(running_nodes)
	if $with_node && [ "$n" != "$NODE_COUNT" ]; then return 1; fi
	for i in $(seq "$n"); do
		local suf=
		[ "$i" = 1 ] || suf=-$i
		is_ours "$cluster/containerd$suf.pid" && is_ours "$cluster/kubelet$suf.pid" || return 1
	done
	# shellcheck disable=SC1091
	. "$cluster/env"
	readyz
}

# free_port VAR: set VAR to a port below the ephemeral range (so outgoing
# connections never take it from us) that nothing listens on now and that we
# have not handed out. Another clone may race us for it; start_etcd and
# start_apiserver retry with new ports when a bind fails.
free_port() {
	local p
	for _ in $(seq 50); do
		p=$((20000 + RANDOM % 12000))
		if [ -z "$(ss -Hltn "sport = :$p")" ] && [[ " ${taken[*]-} " != *" $p "* ]]; then
			taken+=("$p")
			printf -v "$1" %s "$p"
			return 0
		fi
	done
	die "no free loopback port found in 20000-31999"
}

# spawn NAME CMD...: run CMD in its own session so it outlives make; the
# process writes its own pid before exec, so the pid file is never a wrapper's.
spawn() {
	local name=$1; shift
	rm -f "$cluster/$name.pid"
	# The command line, for restart.sh to start it again as it was.
	printf '%s\0' "$@" >"$cluster/$name.cmd"
	# 9<&-: the daemon must not inherit the lock, or the next up.sh blocks.
	setsid sh -c 'echo $$ >"$0"; exec "$@"' "$cluster/$name.pid" "$@" \
		</dev/null >"$logs/$name.log" 2>&1 9<&- &
	for _ in $(seq 50); do
		[ -s "$cluster/$name.pid" ] && return 0
		sleep 0.02
	done
	die "$name did not start; log: $logs/$name.log"
}

# held_by LOG: for the port clash LOG tells of, who holds the port.
held_by() {
	local port
	port=$(grep -oiE '127\.0\.0\.1:[0-9]+: bind: address already in use' "$1" |
		head -n1 | sed -E 's/^127\.0\.0\.1:([0-9]+).*/\1/')
	[ -n "$port" ] || return 0
	echo "up.sh: port $port is held by: $(ss -Hltnp "sport = :$port" | grep -o 'users:(.*)' || echo unknown)" >&2
}

# wait_for NAME TIMEOUT CHECK...: poll CHECK until it succeeds. Returns 2 when
# the process died of a port clash (caller retries on new ports), dies on any
# other failure with the tail of the log.
wait_for() {
	local name=$1 timeout=$2; shift 2
	local deadline=$((SECONDS + timeout))
	while ! "$@"; do
		if ! is_ours "$cluster/$name.pid" && ! alive "$cluster/$name.pid"; then
			if grep -qi "address already in use" "$logs/$name.log"; then
				held_by "$logs/$name.log"
				return 2
			fi
			echo "up.sh: $name exited during start-up (pid $(cat "$cluster/$name.pid" 2>/dev/null), cmdline '$(tr '\0' ' ' <"/proc/$(cat "$cluster/$name.pid" 2>/dev/null)/cmdline" 2>/dev/null | cut -c1-120)'); last log lines:" >&2
			tail -n 30 "$logs/$name.log" >&2
			exit 1
		fi
		if ((SECONDS >= deadline)); then
			echo "up.sh: $name not ready after $timeout s; last log lines:" >&2
			tail -n 30 "$logs/$name.log" >&2
			exit 1
		fi
		sleep 0.1
	done
}

# gen_key FILE: EC P-256 is quick to generate and accepted everywhere we care.
gen_key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }

# sign NAME SUBJECT EXTENSIONS: a leaf certificate signed by our CA.
sign() {
	local name=$1 subj=$2 ext=$3
	gen_key "$pki/$name.key"
	openssl req -new -key "$pki/$name.key" -subj "$subj" 2>/dev/null |
		openssl x509 -req -CA "$pki/ca.crt" -CAkey "$pki/ca.key" \
			-set_serial "0x$(openssl rand -hex 16)" -days 3650 \
			-extfile <(printf '%s\n' "$ext") -out "$pki/$name.crt" 2>/dev/null ||
		die "openssl failed to sign $name certificate"
}

make_pki() {
	mkdir -p "$pki"
	gen_key "$pki/ca.key"
	openssl req -x509 -new -key "$pki/ca.key" -subj "/CN=airlock-test-ca" -days 3650 \
		-addext "basicConstraints=critical,CA:TRUE" \
		-addext "keyUsage=critical,keyCertSign,cRLSign" \
		-out "$pki/ca.crt" 2>/dev/null || die "openssl failed to create the ca"
	local san="DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc"
	san+=",DNS:kubernetes.default.svc.cluster.local,IP:127.0.0.1,IP:$SERVICE_IP"
	sign apiserver "/CN=kube-apiserver" "keyUsage=critical,digitalSignature
extendedKeyUsage=serverAuth
subjectAltName=$san"
	local client="keyUsage=critical,digitalSignature
extendedKeyUsage=clientAuth"
	sign admin "/O=system:masters/CN=airlock-admin" "$client"
	sign restricted "/CN=airlock-restricted" "$client"
	gen_key "$pki/sa.key"
	openssl pkey -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null ||
		die "openssl failed to derive the service-account public key"
}

start_etcd() {
	local try rc
	for try in 1 2 3 4 5; do
		local peer_port
		free_port etcd_port
		free_port peer_port
		ETCD_URL=http://127.0.0.1:$etcd_port
		# --unsafe-no-fsync: throwaway data, and fsync dominates write latency.
		spawn etcd "$ETCD_BIN_DIR/etcd" --name=airlock-test \
			--data-dir="$cluster/etcd" \
			--listen-client-urls="$ETCD_URL" --advertise-client-urls="$ETCD_URL" \
			--listen-peer-urls="http://127.0.0.1:$peer_port" \
			--initial-advertise-peer-urls="http://127.0.0.1:$peer_port" \
			--initial-cluster="airlock-test=http://127.0.0.1:$peer_port" \
			--unsafe-no-fsync --log-level=warn
		rc=0
		wait_for etcd 20 etcd_healthy || rc=$?
		[ "$rc" = 0 ] && return 0
		echo "up.sh: etcd port clash (try $try), picking new ports" >&2
		rm -rf "$cluster/etcd"
	done
	die "etcd could not bind a free port after 5 tries"
}

# listens NAME PORT: PORT is bound by our NAME process, not by another
# clone's cluster that took the port between free_port and our bind.
listens() {
	local pid
	pid=$(cat "$cluster/$1.pid" 2>/dev/null) || return 1
	ss -Hltnp "sport = :$2" | grep -q "pid=$pid,"
}

etcd_healthy() {
	listens etcd "$etcd_port" &&
		curl -sf --max-time 1 "$ETCD_URL/health" 2>/dev/null | grep -q '"health":"true"'
}

apiserver_ready() { listens kube-apiserver "$api_port" && readyz; }

start_apiserver() {
	local try rc
	for try in 1 2 3 4 5; do
		free_port api_port
		APISERVER_URL=https://127.0.0.1:$api_port
		# --endpoint-reconciler-type=none: the "kubernetes" service would get
		# 127.0.0.1 as its endpoint, which EndpointSlice validation rejects.
		spawn kube-apiserver "$KUBE_BIN_DIR/kube-apiserver" \
			--etcd-servers="$ETCD_URL" --etcd-compaction-interval=0 \
			--bind-address=127.0.0.1 --advertise-address=127.0.0.1 \
			--secure-port="$api_port" \
			--tls-cert-file="$pki/apiserver.crt" --tls-private-key-file="$pki/apiserver.key" \
			--client-ca-file="$pki/ca.crt" \
			--authorization-mode=Node,RBAC \
			--service-cluster-ip-range="$SERVICE_CIDR" \
			--service-account-issuer=https://kubernetes.default.svc.cluster.local \
			--service-account-key-file="$pki/sa.pub" \
			--service-account-signing-key-file="$pki/sa.key" \
			--endpoint-reconciler-type=none \
			--profiling="$([ "${AIRLOCK_APISERVER_PROFILING-}" = 1 ] && echo true || echo false)" \
			"${APISERVER_NODE_FLAGS[@]}"
		rc=0
		wait_for kube-apiserver "$READY_TIMEOUT" apiserver_ready || rc=$?
		[ "$rc" = 0 ] && return 0
		echo "up.sh: kube-apiserver port clash (try $try), picking a new port" >&2
	done
	die "kube-apiserver could not bind a free port after 5 tries"
}

b64() { base64 -w0 <"$1"; }

write_kubeconfigs() {
	cat >"$cluster/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: airlock-test
  cluster:
    server: $APISERVER_URL
    certificate-authority-data: $(b64 "$pki/ca.crt")
users:
- name: airlock-admin
  user:
    client-certificate-data: $(b64 "$pki/admin.crt")
    client-key-data: $(b64 "$pki/admin.key")
contexts:
- name: airlock-admin
  context:
    cluster: airlock-test
    user: airlock-admin
    namespace: default
current-context: airlock-admin
EOF
	# File paths rather than data on purpose: tests exercise both styles.
	cat >"$cluster/kubeconfig-restricted" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: airlock-test
  cluster:
    server: $APISERVER_URL
    certificate-authority: $pki/ca.crt
users:
- name: airlock-restricted
  user:
    client-certificate: $pki/restricted.crt
    client-key: $pki/restricted.key
contexts:
- name: airlock-restricted
  context:
    cluster: airlock-test
    user: airlock-restricted
    namespace: airlock-restricted
current-context: airlock-restricted
EOF
	chmod 600 "$cluster/kubeconfig" "$cluster/kubeconfig-restricted"
}

apply_rbac() {
	"$KUBE_BIN_DIR/kubectl" --kubeconfig="$cluster/kubeconfig" apply -f - >/dev/null <<'EOF' ||
apiVersion: v1
kind: Namespace
metadata:
  name: airlock-restricted
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: configmap-reader
  namespace: airlock-restricted
rules:
- apiGroups: [""]
  resources: ["configmaps"]
  verbs: ["get", "list", "watch"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: airlock-restricted-configmap-reader
  namespace: airlock-restricted
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: configmap-reader
subjects:
- apiGroup: rbac.authorization.k8s.io
  kind: User
  name: airlock-restricted
EOF
		die "kubectl apply of the airlock-restricted namespace and rbac failed"
}

write_env() {
	cat >"$cluster/env.tmp" <<EOF
# Written by tests/cluster/up.sh; source it.
KUBECONFIG_ADMIN=$cluster/kubeconfig
KUBECONFIG_RESTRICTED=$cluster/kubeconfig-restricted
APISERVER_URL=$APISERVER_URL
ETCD_URL=$ETCD_URL
KUBECTL=$KUBE_BIN_DIR/kubectl
ETCD_BIN_DIR=$ETCD_BIN_DIR
KUBE_BIN_DIR=$KUBE_BIN_DIR
EOF
	if $with_node; then node_env >>"$cluster/env.tmp"; fi
	# Written last and atomically: its presence marks a completed start-up.
	mv "$cluster/env.tmp" "$cluster/env"
}

# A failed start stops what it started but keeps .cluster/logs to read;
# the next up.sh clears it.
stop_on_failure() {
	local rc=$?
	[ "$rc" = 0 ] && return 0
	# The node's background image import, if still going.
	[ -n "${import_pid-}" ] && kill "$import_pid" 2>/dev/null
	"$here/down.sh" --stop-only >/dev/null || true
	echo "up.sh: start-up failed; logs kept in $logs" >&2
	exit "$rc"
}

main() {
	if already_up; then
		echo "up.sh: cluster already up at $APISERVER_URL (checked in $(elapsed) s)"
		exit 0
	fi
	if [ -e "$cluster" ]; then
		if $with_node && [ -f "$cluster/env" ] && [ "$(running_nodes)" != "$NODE_COUNT" ]; then
			echo "up.sh: $cluster holds a cluster with $(running_nodes) nodes; replacing it ($NODE_COUNT wanted)" >&2
		else
			echo "up.sh: $cluster holds a dead or half-started cluster; tearing it down" >&2
		fi
		"$here/down.sh" || die "down.sh failed to clear $cluster"
	fi
	# Nothing of an earlier cluster may run on: it would hold a port or
	# act on this one's objects (a chart agent, a test's daemon).
	local left
	left=$(procs_naming "$cluster")
	# shellcheck disable=SC2086
	[ -z "$left" ] || die "processes of an earlier cluster still run: $(procs_describe $left); stop them (tests/cluster/down.sh)"
	local out
	out=$("$here/build.sh" etcd kube-apiserver kubectl) || die "build.sh failed"
	ETCD_BIN_DIR=$(sed -n 's/^ETCD_BIN_DIR=//p' <<<"$out")
	KUBE_BIN_DIR=$(sed -n 's/^KUBE_BIN_DIR=//p' <<<"$out")
	[ -x "$ETCD_BIN_DIR/etcd" ] && [ -x "$KUBE_BIN_DIR/kube-apiserver" ] ||
		die "build.sh did not report usable binaries"
	if $with_node; then
		# shellcheck source=node.sh
		. "$here/node.sh"
		node_build
	fi

	taken=()
	mkdir -p "$logs"
	trap stop_on_failure EXIT
	make_pki
	if $with_node; then
		node_prepare
		node_pki
		node_apiserver_flags
	fi
	start_etcd
	start_apiserver
	write_kubeconfigs
	apply_rbac
	if $with_node; then node_start; fi
	write_env
	trap - EXIT
	local what=cluster
	if $with_node; then what="cluster with node $NODE_NAME"; fi
	if [ "$NODE_COUNT" -gt 1 ]; then what="cluster with nodes $(sed -n 's/^NODE_NAMES=//p' "$cluster/env" | tr -d '"')"; fi
	echo "up.sh: $what up in $(elapsed) s: $APISERVER_URL (etcd $ETCD_URL); source $cluster/env"
}

main "$@"
