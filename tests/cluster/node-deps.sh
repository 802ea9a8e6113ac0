#!/usr/bin/env bash
# Install the Debian packages the test node (up.sh with NODE=1) needs, when
# missing: the container runtime, the CNI plugins and the image builder.
# Separate from tests/deps.sh because only NODE=1 needs them, and they are
# large. Only root can install; anyone else gets the list.
#
# usage: node-deps.sh          the node's packages
#        node-deps.sh runsc    also Debian's runsc (up.sh's fallback when
#                              gVisor cannot be built)
set -euo pipefail
# containerd 1.6 (CRI), runc (its default runtime; the pause container of a
# gvisor pod runs in runsc, but the node's own plumbing needs runc present),
# containernetworking-plugins (bridge, host-local, loopback in /usr/lib/cni),
# mmdebstrap (runner image root filesystems), gcc (the static pause binary),
# iptables and ipset (kube-router's NetworkPolicy controller programs them).
pkgs=(containerd runc containernetworking-plugins mmdebstrap gcc libc6-dev
      iproute2 util-linux procps kmod iptables ipset)
[ "${1-}" = runsc ] && pkgs+=(runsc)
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' ||
		missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
	echo "node-deps.sh: missing packages: ${missing[*]} (run as root, or install them)" >&2
	exit 1
fi
echo "node-deps.sh: installing ${missing[*]}" >&2
apt-get update -qq
# --no-install-recommends: containerd recommends nothing we use, and mmdebstrap
# recommends a pile of tools (arch-test, qemu helpers) we do not need.
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	"${missing[@]}" >/dev/null
# Debian's containerd package ships a systemd unit and no init script; with no
# systemd nothing starts it, and nothing must: up.sh runs its own containerd.
