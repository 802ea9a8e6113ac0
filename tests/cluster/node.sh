# shellcheck shell=bash
# The test node: containerd + gVisor, kube-scheduler, kube-controller-manager
# and a kubelet, on top of the control plane of up.sh. Sourced by up.sh when
# NODE=1; uses its helpers (die, spawn, wait_for, free_port, sign, is_ours).
# See README.md in this directory, section "The node".
#
# Everything the node keeps lives under .cluster/node (containerd root and
# state, runsc root, kubelet root-dir, CNI config and IPAM, pod logs), except
# what the components hard-code elsewhere; node-down.sh removes that too.

RUNTIME_CLASS=gvisor
RUNSC_HANDLER=runsc
# Egress (issue 32, docs/network.md): a sandbox with gVisor's own network
# stack (runsc network=sandbox, never the host's), for executions an
# operator allows egress. Only with the shim built here (GVISOR_SHIM=
# gvisor): the fallback's one runsc root and config cannot hold two.
RUNTIME_CLASS_NET=gvisor-net
RUNSC_NET_HANDLER=runsc-net

# node_select I: make node I (1..NODE_COUNT) the one the functions below
# act on. Node 1 keeps the names it had before there could be two
# (airlock-node, .cluster/node, containerd.pid, kubelet.pid), so a NODE=1
# cluster is what it always was; node I > 1 is airlock-node-I in
# .cluster/node-I, with containerd-I.pid and kubelet-I.pid. Every name is
# derived, never stored, so down.sh and restart.sh derive the same ones.
# The ids come from the clone's path, so two clones' nodes never share a
# bridge, a cgroup or a subnet; node I's subnet is 10.(243+I).<n>.0/24.
node_select() {
	local h
	NODE_INDEX=$1
	h=$(printf %s "$cluster" | sha256sum | cut -c1-6)
	if [ "$1" = 1 ]; then
		NODE_NAME=airlock-node node=$cluster/node PSUF= NODE_ID=$h
	else
		NODE_NAME=airlock-node-$1 node=$cluster/node-$1 PSUF=-$1 NODE_ID=${h}n$1
	fi
	BRIDGE=alk$NODE_ID                 # <= 15 characters, a Linux limit
	CNI_NETWORK=airlock-$NODE_ID
	CGROUP_ROOT=/airlock-$NODE_ID
	POD_SUBNET=10.$((243 + $1)).$((16#${h:0:2})).0/24
	CONTAINERD_SOCK=$node/containerd/containerd.sock
	POD_LOGS_DIR=$node/pod-logs
	kubelet_healthz_port=${node_healthz[$1]-}
}
declare -A node_healthz=()

# node_ids: written to node/ids before anything is created: node-down.sh
# reads it to know what to remove, even after a start that failed half-way.
node_ids() {
	mkdir -p "$node" "$cluster/node"
	cat >"$node/ids" <<EOF
NODE_ID=$NODE_ID
BRIDGE=$BRIDGE
CNI_NETWORK=$CNI_NETWORK
CGROUP_ROOT=$CGROUP_ROOT
POD_SUBNET=$POD_SUBNET
EOF
	# Host directories the kubelet and containerd create when missing and
	# never remove; node-down.sh removes them again if we made them.
	local d
	for d in /var/log/containers /var/run/netns /var/lib/cni /run/containerd; do
		[ -e "$d" ] || echo "$d" >>"$cluster/node/created-dirs"
	done
	return 0
}

# node_ip: the address the kubelet registers and serves on. The kubelet
# refuses a loopback node IP, so take the first global IPv4 address; the
# apiserver reaches the kubelet there (traffic to our own address stays on
# this machine).
node_ip() {
	NODE_IP=$(ip -4 -o addr show scope global |
		awk '$2 !~ /^(alk|cni|veth)/ { sub(/\/.*/, "", $4); print $4; exit }')
	[ -n "$NODE_IP" ] || die "no global IPv4 address for the node (ip -4 addr)"
}

# node_build: binaries and images. gVisor: the pinned runsc and its shim,
# built here (GVISOR_SHIM=gvisor); when that build fails, or with
# AIRLOCK_GVISOR=debian, Debian's runsc under containerd's runc shim
# (GVISOR_SHIM=runc-v2, see write_runsc_oci).
node_build() {
	"$here/node-deps.sh" || die "node-deps.sh failed"
	local out
	out=$("$here/build.sh" kube-scheduler kube-controller-manager kubelet kube-router) ||
		die "build.sh failed for the node"
	KUBE_ROUTER=$(sed -n 's/^KUBE_ROUTER_BIN_DIR=//p' <<<"$out")/kube-router
	[ -x "$KUBE_ROUTER" ] || die "build.sh did not report kube-router"
	GVISOR_SHIM=gvisor
	if [ "${AIRLOCK_GVISOR:-build}" = debian ] ||
		! out=$("$here/build.sh" runsc containerd-shim-runsc-v1); then
		echo "up.sh: warning: falling back to Debian's runsc without gVisor's shim (one sandbox per container)" >&2
		"$here/node-deps.sh" runsc || die "node-deps.sh could not install runsc"
		GVISOR_SHIM=runc-v2
		RUNSC=$(command -v runsc) || die "no runsc in PATH"
	else
		GVISOR_BIN_DIR=$(sed -n 's/^GVISOR_BIN_DIR=//p' <<<"$out")
		RUNSC=$GVISOR_BIN_DIR/runsc
		[ -x "$RUNSC" ] && [ -x "$GVISOR_BIN_DIR/containerd-shim-runsc-v1" ] ||
			die "build.sh did not report usable gVisor binaries"
	fi
	out=$("$root/images/build.sh") || die "images/build.sh failed"
	eval "$(grep -E '^[A-Z_]+_IMAGE(_TAR)?=[^ ]+$' <<<"$out")"
	[ -n "${PAUSE_IMAGE-}" ] && [ -n "${RUNNER_PYTHON_IMAGE-}" ] &&
		[ -n "${EGRESS_GATE_IMAGE-}" ] ||
		die "images/build.sh did not report the images"
	# Airlock's own daemons, once `make` has built them (the chart's
	# tests run them in the cluster).
	CONTROLLER_IMAGE= CONTROLLER_IMAGE_TAR= NODE_AGENT_IMAGE= NODE_AGENT_IMAGE_TAR=
	EGRESS_IMAGE= EGRESS_IMAGE_TAR=
	if [ -x "$root/bin/airlock-controller" ] && [ -x "$root/bin/airlock-node-agent" ]; then
		out=$(AIRLOCK_BIN="$root/bin" "$root/images/build.sh" controller node-agent) ||
			die "images/build.sh failed for the daemons"
		eval "$(grep -E '^[A-Z_]+_IMAGE(_TAR)?=[^ ]+$' <<<"$out")"
	fi
	# The egress proxy (Squid and airlock-egress), for the e2e tier's
	# host entries.
	if [ -x "$root/bin/airlock-egress" ]; then
		out=$(AIRLOCK_BIN="$root/bin" "$root/images/build.sh" egress) ||
			die "images/build.sh failed for the egress proxy"
		eval "$(grep -E '^[A-Z_]+_IMAGE(_TAR)?=[^ ]+$' <<<"$out")"
	fi
}

# The kubelet refuses a cgroup root that does not exist in every hierarchy
# (cgroup v1 here: host-facts.md). Our own root per clone keeps the node's
# pods apart from everything else and makes cleanup a matter of rmdir.
node_cgroups() {
	local h
	for h in /sys/fs/cgroup/*/; do
		h=${h%/}
		[ -e "$h/cgroup.procs" ] || continue
		[ "${h##*/}" = unified ] && continue   # cgroup2 with no controllers
		mkdir -p "$h$CGROUP_ROOT"
		# A new cpuset cgroup starts with no cpus and no memory nodes, and
		# nothing can join it until they are set.
		if [ -e "$h/cpuset.cpus" ]; then
			cat "$h/cpuset.cpus" >"$h$CGROUP_ROOT/cpuset.cpus"
			cat "$h/cpuset.mems" >"$h$CGROUP_ROOT/cpuset.mems"
		fi
	done
}

node_pki() {
	local client="keyUsage=critical,digitalSignature
extendedKeyUsage=clientAuth" i
	sign kube-scheduler "/CN=system:kube-scheduler" "$client"
	sign kube-controller-manager "/CN=system:kube-controller-manager" "$client"
	# The apiserver's identity towards the kubelet (logs, exec): a member of
	# system:masters passes the kubelet's webhook authorization.
	sign apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" "$client"
	sign kube-router "/CN=system:airlock-test:kube-router" "$client"
	for i in $(seq "$NODE_COUNT"); do
		node_select "$i"
		# The Node authorizer knows a kubelet by this exact name and group.
		sign "kubelet-client$PSUF" "/O=system:nodes/CN=system:node:$NODE_NAME" "$client"
		sign "kubelet-serving$PSUF" "/CN=$NODE_NAME" "keyUsage=critical,digitalSignature
extendedKeyUsage=serverAuth
subjectAltName=DNS:$NODE_NAME,IP:$NODE_IP"
	done
	node_select 1
}

# Extra kube-apiserver flags with a node: it talks to the kubelet (kubectl
# logs/exec) with its own client certificate and checks the kubelet's
# serving certificate against our CA, at the InternalIP.
node_apiserver_flags() {
	APISERVER_NODE_FLAGS=(
		--kubelet-client-certificate="$pki/apiserver-kubelet-client.crt"
		--kubelet-client-key="$pki/apiserver-kubelet-client.key"
		--kubelet-certificate-authority="$pki/ca.crt"
		--kubelet-preferred-address-types=InternalIP
	)
}

# containerd-shim-runsc-v1 is built with containerd 2's shim library, which
# answers `start` with JSON bootstrap parameters; containerd 1.6 expects the
# bare socket address (and reads the shim's stdout and stderr together).
# This wrapper, first in containerd's PATH, hands 1.6 the address and keeps
# everything else the real shim's.
write_shim_wrapper() {
	mkdir -p "$node/bin"
	cat >"$node/bin/containerd-shim-runsc-v1" <<EOF
#!/bin/sh
real=$GVISOR_BIN_DIR/containerd-shim-runsc-v1
for a; do last=\$a; done
[ "\${last-}" = start ] || exec "\$real" "\$@"
err=\$(mktemp)
if ! out=\$("\$real" "\$@" 2>"\$err"); then
	cat "\$err" >&2; rm -f "\$err"; exit 1
fi
cat "\$err" >>"$logs/shim-start.log"; rm -f "\$err"
case \$out in
"{"*) printf '%s' "\$out" | sed -n 's/.*"address":"\\([^"]*\\)".*/\\1/p' ;;
*) printf '%s' "\$out" ;;
esac
EOF
	chmod 755 "$node/bin/containerd-shim-runsc-v1"
}

# write_runsc_oci: the fallback's runtime binary for containerd's runc v2
# shim. That shim would run a pod's containers inside the pause container's
# sandbox, where their output never reaches the log file and their exit is
# never reported (host-facts.md). Renaming the two CRI annotations runsc
# reads at create makes every container its own sandbox (two per pod).
# Renaming rather than deleting keeps the JSON valid without parsing it.
# And when a container has exited, its sandbox is gone: `runsc kill` then
# fails with "sandbox is not running", which the shim passes on as an
# unknown error, and containerd never records the exit. The container is
# dead, which is what the kill wanted: report success.
write_runsc_oci() {
	mkdir -p "$node/bin"
	cat >"$node/bin/runsc-oci" <<EOF
#!/bin/sh
runsc="$RUNSC --network=none"
cmd= bundle= prev=
for a; do
	case \$a in create|kill) [ -n "\$cmd" ] || cmd=\$a ;; --bundle=*) bundle=\${a#--bundle=} ;; esac
	case \$prev in --bundle|-b) bundle=\$a ;; esac
	prev=\$a
done
case \$cmd in
create)
	[ -f "\$bundle/config.json" ] &&
		sed -i -E 's/"io\\.kubernetes\\.cri\\.(container-type|sandbox-id)":/"airlock.fallback.\\1":/g' "\$bundle/config.json"
	;;
kill)
	out=\$(\$runsc "\$@" 2>&1) && { printf '%s' "\$out"; exit 0; }
	case \$out in *"sandbox is not running"*) exit 0 ;; esac
	printf '%s\\n' "\$out" >&2
	exit 1 ;;
esac
exec \$runsc "\$@"
EOF
	chmod 755 "$node/bin/runsc-oci"
}

# runsc_runtime: the containerd runtime section of the gvisor handler (and
# with the shim built here, the gvisor-net one's).
runsc_runtime() {
	local r='[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.'$RUNSC_HANDLER']'
	local n='[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.'$RUNSC_NET_HANDLER']'
	if [ "$GVISOR_SHIM" = gvisor ]; then
		cat <<EOF
    $r
      runtime_type = "io.containerd.runsc.v1"
      [${r:1:-1}.options]
        TypeUrl = "io.containerd.runsc.v1.options"
        ConfigPath = "$node/runsc.toml"
    # The RuntimeClass "gvisor-net" names this one.
    $n
      runtime_type = "io.containerd.runsc.v1"
      [${n:1:-1}.options]
        TypeUrl = "io.containerd.runsc.v1.options"
        ConfigPath = "$node/runsc-net.toml"
EOF
	else
		cat <<EOF
    $r
      runtime_type = "io.containerd.runc.v2"
      [${r:1:-1}.options]
        BinaryName = "$node/bin/runsc-oci"
        Root = "$node/runsc"
        SystemdCgroup = false
EOF
	fi
}

write_containerd_config() {
	local cd=$node/containerd
	mkdir -p "$cd" "$node/cni/net.d" "$node/cni/ipam"
	# For node-down.sh: which runsc to ask for leftover sandboxes.
	echo "$RUNSC" >"$node/runsc-binary"
	# network=none: Airlock pods get no network at all, only loopback
	# inside the sandbox (and Debian's older runsc needs it on kernels
	# >= 6.11: host-facts.md).
	cat >"$node/runsc.toml" <<EOF
binary_name = "$RUNSC"
root = "$node/runsc"
[runsc_config]
network = "none"
EOF
	# network=sandbox: gVisor's own stack on the pod's interface; what it
	# may reach is the pod's NetworkPolicy's to say (docs/network.md).
	cat >"$node/runsc-net.toml" <<EOF
binary_name = "$RUNSC"
root = "$node/runsc"
[runsc_config]
network = "sandbox"
EOF
	# AIRLOCK_RUNSC_DEBUG=1: runsc's debug logs, one directory per
	# container, for when a sandbox misbehaves.
	if [ "${AIRLOCK_RUNSC_DEBUG-}" = 1 ]; then
		printf 'debug = "true"\ndebug-log = "%s/runsc/%%ID%%/"\n' "$logs" >>"$node/runsc.toml"
	fi
	free_port stream_port
	cat >"$cd/config.toml" <<EOF
version = 2
root = "$cd/root"
state = "$cd/state"
oom_score = 0
# Unused here, and slow or noisy to start.
disabled_plugins = ["io.containerd.internal.v1.tracing", "io.containerd.tracing.processor.v1.otlp",
  "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.blockfile"]
[grpc]
  address = "$CONTAINERD_SOCK"
[ttrpc]
  address = "$cd/containerd.sock.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  # Root lacks CAP_SYS_RESOURCE here: without this runc fails every pod
  # ("can't get final child's PID from pipe: EOF"), host-facts.md.
  restrict_oom_score_adj = true
  disable_apparmor = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "$stream_port"
  enable_cdi = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "/usr/sbin/runc"
        Root = "$node/runc"
        SystemdCgroup = false
    # The RuntimeClass "gvisor" names this handler.
$(runsc_runtime)
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$node/cni/net.d"
    max_conf_num = 1
EOF
	# A bridge with no gateway address and no masquerading: gVisor pods
	# never use the interface (network=none), but CRI insists on a pod
	# network and an IP. isGateway=false also keeps the bridge plugin from
	# turning on the host's ip_forward. IPAM state stays in .cluster.
	cat >"$node/cni/net.d/10-airlock.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "$CNI_NETWORK",
  "plugins": [{
    "type": "bridge",
    "bridge": "$BRIDGE",
    "isGateway": false,
    "ipMasq": false,
    "hairpinMode": false,
    "ipam": {
      "type": "host-local",
      "ranges": [[{"subnet": "$POD_SUBNET"}]],
      "dataDir": "$node/cni/ipam"
    }
  }]
}
EOF
}

containerd_ready() {
	ctr --address "$CONTAINERD_SOCK" version >/dev/null 2>&1
}

start_containerd() {
	if [ "$GVISOR_SHIM" = gvisor ]; then write_shim_wrapper; else write_runsc_oci; fi
	write_containerd_config
	# PATH: containerd finds shims by name; ours (the wrapper) first.
	spawn "containerd$PSUF" env PATH="$node/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
		containerd --config "$node/containerd/config.toml" --log-level warn
	wait_for "containerd$PSUF" 30 containerd_ready
}

# import_images: in the background while the control plane starts, one
# node after the other (two at once only compete for the two cores); up.sh
# waits for it before declaring the nodes ready. A failure leaves a mark
# that wait_images reports.
import_images() {
	(
		set +e
		for i in $(seq "$NODE_COUNT"); do
		node_select "$i"
		for tar in "$PAUSE_IMAGE_TAR" "$RUNNER_PYTHON_IMAGE_TAR" \
			"$RUNNER_NODE_IMAGE_TAR" "$RUNNER_BASH_IMAGE_TAR" \
			"$RUNNER_PYTHON_DATA_IMAGE_TAR" "$EGRESS_GATE_IMAGE_TAR" \
			${CONTROLLER_IMAGE_TAR:+"$CONTROLLER_IMAGE_TAR"} \
			${NODE_AGENT_IMAGE_TAR:+"$NODE_AGENT_IMAGE_TAR"} \
			${EGRESS_IMAGE_TAR:+"$EGRESS_IMAGE_TAR"}; do
			ctr --address "$CONTAINERD_SOCK" -n k8s.io images import \
				--snapshotter overlayfs "$tar" >>"$logs/image-import.log" 2>&1 ||
				{ echo "$tar" >"$node/import-failed"; exit 1; }
		done
		touch "$node/imported"
		done
	) </dev/null 9<&- &
	import_pid=$!
}

wait_images() {
	local i
	wait "$import_pid" || true
	for i in $(seq "$NODE_COUNT"); do
		node_select "$i"
		[ -e "$node/imported" ] ||
			die "image import failed on $NODE_NAME ($(cat "$node/import-failed" 2>/dev/null)); log: $logs/image-import.log"
	done
}

b64kc() { base64 -w0 <"$1"; }

# node_kubeconfig NAME CERT: a kubeconfig for a component, certs embedded.
node_kubeconfig() {
	cat >"$node/$1.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: airlock-test
  cluster:
    server: $APISERVER_URL
    certificate-authority-data: $(b64kc "$pki/ca.crt")
users:
- name: $1
  user:
    client-certificate-data: $(b64kc "$pki/$2.crt")
    client-key-data: $(b64kc "$pki/$2.key")
contexts:
- name: $1
  context:
    cluster: airlock-test
    user: $1
current-context: $1
EOF
	chmod 600 "$node/$1.kubeconfig"
}

healthz() {
	curl -sfk --max-time 2 "https://127.0.0.1:$1/healthz" 2>/dev/null | grep -qx ok
}
scheduler_ready() { listens kube-scheduler "$sched_port" && healthz "$sched_port"; }
kcm_ready() { listens kube-controller-manager "$kcm_port" && healthz "$kcm_port"; }
kubelet_ready() {
	curl -sf --max-time 2 "http://127.0.0.1:$kubelet_healthz_port/healthz" 2>/dev/null | grep -qx ok
}

start_scheduler() {
	node_kubeconfig kube-scheduler kube-scheduler
	free_port sched_port
	# One scheduler, a throwaway cluster: no leader election to wait for.
	spawn kube-scheduler "$KUBE_BIN_DIR/kube-scheduler" \
		--kubeconfig="$node/kube-scheduler.kubeconfig" \
		--authentication-kubeconfig="$node/kube-scheduler.kubeconfig" \
		--authorization-kubeconfig="$node/kube-scheduler.kubeconfig" \
		--bind-address=127.0.0.1 --secure-port="$sched_port" \
		--leader-elect=false --profiling=false
}

start_controller_manager() {
	node_kubeconfig kube-controller-manager kube-controller-manager
	free_port kcm_port
	# All default controllers (namespace deletion, garbage collection,
	# service accounts and their tokens, node lifecycle, ...), each under
	# its own service account as on a kubeadm cluster. The bootstrap-token
	# ones are off by default and stay off.
	spawn kube-controller-manager "$KUBE_BIN_DIR/kube-controller-manager" \
		--kubeconfig="$node/kube-controller-manager.kubeconfig" \
		--authentication-kubeconfig="$node/kube-controller-manager.kubeconfig" \
		--authorization-kubeconfig="$node/kube-controller-manager.kubeconfig" \
		--bind-address=127.0.0.1 --secure-port="$kcm_port" \
		--leader-elect=false --profiling=false \
		--use-service-account-credentials=true \
		--service-account-private-key-file="$pki/sa.key" \
		--root-ca-file="$pki/ca.crt" \
		--cluster-signing-cert-file="$pki/ca.crt" --cluster-signing-key-file="$pki/ca.key" \
		--service-cluster-ip-range="$SERVICE_CIDR" \
		--controllers='*'
}

write_kubelet_config() {
	free_port kubelet_port
	free_port kubelet_healthz_port
	POD_LOGS_DIR=$node/pod-logs
	mkdir -p "$node/kubelet" "$POD_LOGS_DIR"
	# Evictions: thresholds near zero, so a nearly full test disk or a busy
	# machine never evicts test pods (the defaults evict at 10% disk free).
	# Image GC off (100%): the images are imported, never pulled back.
	cat >"$node/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $NODE_IP
port: $kubelet_port
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $kubelet_healthz_port
tlsCertFile: $pki/kubelet-serving.crt
tlsPrivateKeyFile: $pki/kubelet-serving.key
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: $pki/ca.crt
authorization:
  mode: Webhook
containerRuntimeEndpoint: unix://$CONTAINERD_SOCK
imageServiceEndpoint: unix://$CONTAINERD_SOCK
# cgroup v1 only on these machines (host-facts.md): the kubelet refuses it
# unless told otherwise. No systemd, so cgroupfs.
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: $CGROUP_ROOT
podLogsDir: $POD_LOGS_DIR
# Logs rotated small and often (1Mi, checked every 3 s, the least allowed),
# so the e2e tests see the node agent follow a rotation (test_log_rotation)
# as it must at the default 10Mi.
containerLogMaxSize: 1Mi
containerLogMaxFiles: 5
containerLogMonitorInterval: 3s
evictionHard:
  memory.available: "1Mi"
  nodefs.available: "1Mi"
  nodefs.inodesFree: "1"
  imagefs.available: "1Mi"
  imagefs.inodesFree: "1"
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
# Root cannot lower oom_score_adj here (no CAP_SYS_RESOURCE).
oomScoreAdj: 0
failSwapOn: false
# No iptables on the node: nothing of ours uses it.
makeIPTablesUtilChains: false
resolvConf: ""
serializeImagePulls: false
registerNode: true
# The node's Lease lasts 15 s (renewed every 3.75 s), not 40: the
# controller finds a lost node within one to two lease durations
# (controller/docs/nodes.md), and the tests wait for it.
nodeLeaseDurationSeconds: 15
rotateCertificates: false
serverTLSBootstrap: false
EOF
}

start_kubelet() {
	node_kubeconfig kubelet "kubelet-client$PSUF"
	write_kubelet_config
	node_healthz[$NODE_INDEX]=$kubelet_healthz_port
	spawn "kubelet$PSUF" "$KUBE_BIN_DIR/kubelet" \
		--config="$node/kubelet.yaml" \
		--kubeconfig="$node/kubelet.kubeconfig" \
		--root-dir="$node/kubelet" \
		--hostname-override="$NODE_NAME" \
		--node-ip="$NODE_IP" \
		--v=1
}

# start_netpol: kube-router's NetworkPolicy controller and nothing else of
# it (no routes, no service proxy, no CNI), so the tenants' deny-all policy
# is enforced on this node: iptables rules on the bridge's traffic (the
# kernel's br_netfilter passes bridged packets through them) and ipsets of
# the selected pods' addresses. Needs the Node object, so after the kubelet
# has registered. Its rules are the host's, not the bridge's: down.sh runs
# kube-router --cleanup-config. One per machine: two clones' nodes share the
# host's address and would each rewrite the other's rules.
start_netpol() {
	node_kubeconfig kube-router kube-router
	"$KUBE_BIN_DIR/kubectl" --kubeconfig="$cluster/kubeconfig" apply -f - >/dev/null <<EOF ||
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: airlock-test:kube-router
rules:
- apiGroups: [""]
  resources: [namespaces, pods, services, endpoints, nodes]
  verbs: [get, list, watch]
- apiGroups: [networking.k8s.io]
  resources: [networkpolicies]
  verbs: [get, list, watch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: airlock-test:kube-router
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: airlock-test:kube-router
subjects:
- apiGroup: rbac.authorization.k8s.io
  kind: User
  name: system:airlock-test:kube-router
EOF
		die "kubectl apply of kube-router's role failed"
	echo "$KUBE_ROUTER" >"$node/kube-router-binary"
	# Bridged traffic through iptables (the default here; said, not assumed).
	echo 1 >/proc/sys/net/bridge/bridge-nf-call-iptables ||
		die "cannot set net.bridge.bridge-nf-call-iptables (br_netfilter)"
	free_port netpol_port
	spawn kube-router "$KUBE_ROUTER" \
		--kubeconfig="$node/kube-router.kubeconfig" \
		--hostname-override="$NODE_NAME" \
		--run-firewall=true --run-router=false --run-service-proxy=false \
		--enable-cni=false --service-cluster-ip-range="$SERVICE_CIDR" \
		--health-port="$netpol_port" --metrics-port=0 --v=1
}

netpol_ready() {
	curl -sf --max-time 2 "http://127.0.0.1:$netpol_port/healthz" >/dev/null 2>&1
}

node_ready() {
	[ "$("$KUBE_BIN_DIR/kubectl" --kubeconfig="$cluster/kubeconfig" get node "$NODE_NAME" \
		-o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]
}

# Pods are refused until their namespace's "default" ServiceAccount exists,
# which the controller-manager creates a moment after it starts.
default_sa() {
	"$KUBE_BIN_DIR/kubectl" --kubeconfig="$cluster/kubeconfig" -n default \
		get serviceaccount default >/dev/null 2>&1
}

# runtimeclass NAME HANDLER: the RuntimeClass NAME for the handler.
runtimeclass() {
	"$KUBE_BIN_DIR/kubectl" --kubeconfig="$cluster/kubeconfig" apply -f - >/dev/null <<EOF ||
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata:
  name: $1
handler: $2
EOF
		die "kubectl apply of the $1 RuntimeClass failed"
}

apply_runtimeclass() {
	runtimeclass "$RUNTIME_CLASS" "$RUNSC_HANDLER"
	[ "$GVISOR_SHIM" != gvisor ] || runtimeclass "$RUNTIME_CLASS_NET" "$RUNSC_NET_HANDLER"
}

# node_prepare: before etcd, so containerd and the image import run while
# the control plane starts.
node_prepare() {
	local i
	node_ip
	for i in $(seq "$NODE_COUNT"); do
		node_select "$i"
		node_ids
		node_cgroups
		start_containerd
	done
	import_images
	node_select 1
}

# node_start: after the apiserver is ready. The scheduler, the
# controller-manager and kube-router are the cluster's, one each, with
# their kubeconfigs in node 1's directory.
node_start() {
	local i
	node_select 1
	start_scheduler
	start_controller_manager
	for i in $(seq "$NODE_COUNT"); do
		node_select "$i"
		start_kubelet
	done
	apply_runtimeclass
	wait_for kube-scheduler 60 scheduler_ready
	wait_for kube-controller-manager 60 kcm_ready
	for i in $(seq "$NODE_COUNT"); do
		node_select "$i"
		wait_for "kubelet$PSUF" 60 kubelet_ready
	done
	wait_images
	for i in $(seq "$NODE_COUNT"); do
		node_select "$i"
		wait_for "kubelet$PSUF" "$READY_TIMEOUT" node_ready
	done
	node_select 1
	start_netpol
	wait_for kube-controller-manager 60 default_sa
	wait_for kube-router 60 netpol_ready
}

# node_env: node 1's variables under their plain names (NODE_NAME, ...),
# as with one node; then NODE_COUNT, NODE_NAMES (space-separated)
# and each node I's as NODE_I_NAME, NODE_I_CONTAINERD_SOCK, NODE_I_CTR,
# NODE_I_POD_LOGS_DIR, NODE_I_KUBELET_ROOT_DIR, NODE_I_RUNSC_ROOT,
# NODE_I_CGROUP_ROOT, NODE_I_BRIDGE, for tests that walk the nodes.
node_env() {
	local i names=
	node_select 1
	cat <<EOF
NODE_NAME=$NODE_NAME
NODE_IP=$NODE_IP
RUNTIME_CLASS=$RUNTIME_CLASS
RUNTIME_CLASS_NET=$([ "$GVISOR_SHIM" = gvisor ] && echo "$RUNTIME_CLASS_NET")
CONTAINERD_SOCK=$CONTAINERD_SOCK
CTR="ctr --address $CONTAINERD_SOCK -n k8s.io"
POD_LOGS_DIR=$POD_LOGS_DIR
KUBELET_ROOT_DIR=$node/kubelet
RUNSC=$RUNSC
GVISOR_SHIM=$GVISOR_SHIM
RUNSC_ROOT=$node/runsc/k8s.io
CGROUP_ROOT=$CGROUP_ROOT
PAUSE_IMAGE=$PAUSE_IMAGE
RUNNER_PYTHON_IMAGE=$RUNNER_PYTHON_IMAGE
RUNNER_NODE_IMAGE=$RUNNER_NODE_IMAGE
RUNNER_BASH_IMAGE=$RUNNER_BASH_IMAGE
RUNNER_PYTHON_DATA_IMAGE=$RUNNER_PYTHON_DATA_IMAGE
EGRESS_GATE_IMAGE=$EGRESS_GATE_IMAGE
EGRESS_IMAGE=$EGRESS_IMAGE
CONTROLLER_IMAGE=$CONTROLLER_IMAGE
NODE_AGENT_IMAGE=$NODE_AGENT_IMAGE
NODE_COUNT=$NODE_COUNT
EOF
	for i in $(seq "$NODE_COUNT"); do
		node_select "$i"
		names+=${names:+ }$NODE_NAME
		cat <<EOF
NODE_${i}_NAME=$NODE_NAME
NODE_${i}_CONTAINERD_SOCK=$CONTAINERD_SOCK
NODE_${i}_CTR="ctr --address $CONTAINERD_SOCK -n k8s.io"
NODE_${i}_POD_LOGS_DIR=$POD_LOGS_DIR
NODE_${i}_KUBELET_ROOT_DIR=$node/kubelet
NODE_${i}_RUNSC_ROOT=$node/runsc/k8s.io
NODE_${i}_CGROUP_ROOT=$CGROUP_ROOT
NODE_${i}_BRIDGE=$BRIDGE
EOF
	done
	echo "NODE_NAMES=\"$names\""
	node_select 1
}
