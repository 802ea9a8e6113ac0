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
# The SDK tier (tests/sdk) makes a venv with pip: Python >= 3.9 with venv
# and ensurepip (Debian splits them out into python3-venv).
if ! python3 -c 'import sys, venv, ensurepip; sys.exit(sys.version_info < (3, 9))' 2>/dev/null; then
	if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
		echo "deps.sh: installing python3-venv" >&2
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 python3-venv >/dev/null
	else
		echo "deps.sh: python3 >= 3.9 with venv is needed for the SDK tier (python3-venv)" >&2
		exit 1
	fi
fi
