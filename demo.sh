#!/usr/bin/env bash
# The first thing to run: installs what is missing (as root, Debian 12),
# builds bin/airlock and the python runner's root filesystem, and runs
# examples/hello.py under gVisor on this machine, with no cluster:
#
#   ./demo.sh
#
# gVisor's runsc is built from its pinned Go module when Go is on PATH
# (as `make test` does), else Debian's runsc package is used.
set -euo pipefail
top=$(cd "$(dirname "$0")" && pwd)
cd "$top"
pkgs=(gcc make pkg-config libcurl4-openssl-dev libjansson-dev libyaml-dev
      libmicrohttpd-dev libssl-dev mmdebstrap ca-certificates python3)
command -v go >/dev/null || pkgs+=(runsc)
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	[ "$(id -u)" -eq 0 ] || { echo "demo.sh: missing ${missing[*]}: run as root" >&2; exit 1; }
	echo "demo.sh: installing ${missing[*]}" >&2
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
		"${missing[@]}" >/dev/null
fi
echo "demo.sh: building bin/airlock" >&2
make -s bin/airlock >/dev/null
if command -v go >/dev/null; then
	runsc=$(tests/cluster/build.sh runsc | sed -n 's/^GVISOR_BIN_DIR=//p')/runsc
else
	runsc=$(command -v runsc)
fi
images/local.sh python
echo "demo.sh: bin/airlock run --local examples/hello.py" >&2
echo >&2
AIRLOCK_RUNSC=$runsc bin/airlock run --local examples/hello.py
