#!/usr/bin/env bash
# Install the Debian packages the build and the tests need, when missing.
# Only root can; anyone else gets the list to install.
set -euo pipefail
pkgs=(gcc make pkg-config libcurl4-openssl-dev libjansson-dev libyaml-dev
      libmicrohttpd-dev libcmocka-dev valgrind openssl curl ca-certificates
      iproute2 util-linux libssl-dev
      containerd runc)   # test_ctrd_it runs a private containerd
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' ||
		missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	if [ "$(id -u)" -ne 0 ]; then
		echo "deps.sh: missing packages: ${missing[*]} (run as root, or install them)" >&2
		exit 1
	fi
	echo "deps.sh: installing ${missing[*]}" >&2
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
# Go builds the test control plane (tests/cluster/build.sh); Debian's is too old.
if ! command -v go >/dev/null; then
	echo "deps.sh: go >= 1.26 is needed to build the test control plane; not found in PATH" >&2
	exit 1
fi
