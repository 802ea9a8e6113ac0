#!/usr/bin/env bash
# Build the test node's container images as OCI image-layout archives, once
# per set of inputs, into the cache outside the work tree:
#
#   $AIRLOCK_CACHE/images/<name>-<key>.tar    (import: ctr -n k8s.io images import)
#
# No registry is reachable, so nothing is pulled: the pause and egress-gate
# images are a static C program each, the runner images are minimal Debian
# root filesystems made by mmdebstrap from the machine's own apt sources file. The tag is the key (a
# hash of everything that goes in), so a changed input is a new image and a
# stale one is never reused. See images/README.md.
#
# usage: images/build.sh [image ...]    (default: all but the daemons)
#
# controller, node-agent and egress are Airlock's own daemons: a Debian
# root filesystem with their shared libraries (cached by its own key), plus
# the binary from $AIRLOCK_BIN (default: bin/ at the top of the tree). Build
# them after `make`. egress is the Squid proxy of host entries
# (docs/network-proxy-research.md), with airlock-egress as its ACL helper
# and log daemon.
# Prints, per image, NAME_IMAGE=<reference> and NAME_IMAGE_TAR=<archive>,
# e.g. RUNNER_PYTHON_IMAGE=airlock.dev/runner-python:3f2a...
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${AIRLOCK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/airlock}/images
REGISTRY=airlock.dev
DAEMONS=(controller node-agent egress)
bindir=${AIRLOCK_BIN:-$here/../bin}
# The daemons' shared libraries (ldd bin/airlock-*), by Debian package.
DAEMON_PACKAGES="libcurl4 libjansson4 libyaml-0-2 libmicrohttpd12"
# The proxy: squid-openssl, not squid (the GnuTLS build, which has no
# ssl_bump peek, so no SNI), and openssl for the throwaway certificate of
# the bump port (egress/entrypoint.sh).
EGRESS_PACKAGES="squid-openssl openssl"
# The node agent: iptables, for the egress byte cap's rules in the node's
# netfilter (node-agent/meter.c; the chart passes --iptables with egress).
AGENT_PACKAGES="iptables"

die() { echo "images/build.sh: $*" >&2; exit 1; }

# The runners are the chart's profiles (images/profiles.sh): for each, its
# Debian packages on top of the Essential set (bash, coreutils, dash, ...)
# and the runtime its default command starts (the controller's profiles
# set their own command; this is for running the image by hand).
. "$here/profiles.sh"
runner_packages() { profile_packages "${1#runner-}"; }
runner_cmd() { profile_cmd "${1#runner-}"; }
runner_env() { profile_env "${1#runner-}"; }
# Packages a runner's Depends pull in that its runtime never loads, purged
# after the install (dpkg --force-depends: the image is never upgraded).
# python-data: Debian's python3-fonttools depends on scipy, sympy and lxml,
# scipy on pythran and so on a C++ toolchain with its headers and boost's:
# 650 MB of a 1.1 GB image. numpy, pandas and matplotlib need none of it.
runner_purge() {
	case $1 in
	runner-python-data)
		echo "libboost1.74-dev gcc gcc-12 g++ g++-12 cpp cpp-12 libstdc++-12-dev" \
		     "libgcc-12-dev libc6-dev libc-dev-bin linux-libc-dev libcrypt-dev" \
		     "libnsl-dev libtirpc-dev rpcsvc-proto binutils binutils-common" \
		     "binutils-x86-64-linux-gnu libbinutils libctf0 libctf-nobfd0" \
		     "libgprofng0 libasan8 libtsan2 liblsan0 libubsan1 libitm1 libcc1-0" \
		     "libisl23 libmpc3 libopenblas-pthread-dev libopenblas-dev" \
		     "libblas-dev liblapack-dev libpython3.11-dev libpython3-dev" \
		     "python3.11-dev python3-dev libexpat1-dev zlib1g-dev" \
		     "python3-pythran python3-gast python3-beniget python3-scipy" \
		     "python3-sympy python3-mpmath unicode-data python3-lxml libxslt1.1" \
		     "libxml2 libicu72" ;;
	esac
}
ALL=(pause egress-gate $(profiles_names | sed 's/^/runner-/'))

# The machine's own apt sources: no mirror's address is written anywhere in
# the project. deb822 (.sources) and one-line files both work with mmdebstrap.
apt_sources() {
	local f
	for f in ${AIRLOCK_APT_SOURCES-} /etc/apt/sources.list.d/debian.sources /etc/apt/sources.list; do
		[ -s "$f" ] && grep -qE '^[[:space:]]*(deb|URIs:)' "$f" && { echo "$f"; return 0; }
	done
	die "no apt sources file found (set AIRLOCK_APT_SOURCES)"
}

suite() { . /etc/os-release && echo "${VERSION_CODENAME:?}"; }

arch() { dpkg --print-architecture; }

hash_of() { sha256sum | cut -c1-12; }

# key NAME: a hash of every input of the image.
key() {
	case $1 in
	pause)
		{ cat "$here/build.sh" "$here/pause/pause.c"; gcc --version | head -n1; arch; } | hash_of ;;
	egress-gate)
		{ cat "$here/build.sh" "$here/runner/gate.c"; gcc --version | head -n1; arch; } | hash_of ;;
	runner-*)
		profiles_names | grep -qxF "${1#runner-}" ||
			die "unknown image '$1' (known: ${ALL[*]} ${DAEMONS[*]})"
		{ cat "$here/build.sh" "$here/runner/run" "$here/runner/warm.c" "$here/runner/gate.c" \
		  "$here/runner/policy.py" "$here/runner/policy.sh" "$here/runner/policy.bashrc" \
		  "$here/runner/kernel.py" "$here/runner/kernel.sh" "$here/runner/zygote.py" \
		  "$(apt_sources)"; suite; arch; gcc --version | head -n1
		  runner_packages "$1"; runner_cmd "$1"; runner_env "$1"
		  runner_purge "$1"; } | hash_of ;;
	daemon-base|agent-base|egress-base)
		{ cat "$here/build.sh" "$(apt_sources)"; suite; arch; echo "$1"; } | hash_of ;;
	controller|node-agent)
		[ -x "$bindir/airlock-$1" ] || die "$bindir/airlock-$1 is not built (run make)"
		{ key "$(daemon_base "$1")"; sha256sum <"$bindir/airlock-$1"; } | hash_of ;;
	egress)
		[ -x "$bindir/airlock-egress" ] || die "$bindir/airlock-egress is not built (run make)"
		{ key egress-base; cat "$here/egress/entrypoint.sh" "$here/egress/squid.conf.in"
		  sha256sum <"$bindir/airlock-egress"; } | hash_of ;;
	*) die "unknown image '$1' (known: ${ALL[*]} ${DAEMONS[*]})" ;;
	esac
}

# oci_archive OUT REF LAYER CONFIG: write an OCI image-layout archive holding
# one image of one uncompressed layer. Uncompressed: the archive is imported
# on every cluster start, and containerd then only copies instead of
# gunzipping (the cache is local, size matters less than start-up time).
# CONFIG is the body of the image config's "config" object.
oci_archive() {
	local out=$1 ref=$2 layer=$3 config=$4
	local d; d=$(mktemp -d "$cache/.oci.XXXXXX")
	mkdir -p "$d/blobs/sha256"
	local ldig lsize cfg cdig csize man mdig msize
	ldig=$(sha256sum <"$layer" | cut -d' ' -f1)
	lsize=$(stat -c %s "$layer")
	mv "$layer" "$d/blobs/sha256/$ldig"
	cfg=$(printf '{"architecture":"%s","os":"linux","created":"1970-01-01T00:00:00Z","config":{%s},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]},"history":[{"created":"1970-01-01T00:00:00Z","created_by":"images/build.sh"}]}' \
		"$(arch)" "$config" "$ldig")
	cdig=$(printf %s "$cfg" | sha256sum | cut -d' ' -f1)
	csize=${#cfg}
	printf %s "$cfg" >"$d/blobs/sha256/$cdig"
	man=$(printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%d},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:%s","size":%d}]}' \
		"$cdig" "$csize" "$ldig" "$lsize")
	mdig=$(printf %s "$man" | sha256sum | cut -d' ' -f1)
	msize=${#man}
	printf %s "$man" >"$d/blobs/sha256/$mdig"
	# io.containerd.image.name: the name ctr import gives the image.
	printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%d,"platform":{"architecture":"%s","os":"linux"},"annotations":{"io.containerd.image.name":"%s","org.opencontainers.image.ref.name":"%s"}}]}' \
		"$mdig" "$msize" "$(arch)" "$ref" "${ref##*:}" >"$d/index.json"
	printf '{"imageLayoutVersion":"1.0.0"}' >"$d/oci-layout"
	# .$$: two clones may build the same key at once; mv is atomic.
	tar -C "$d" -cf "$out.tmp.$$" oci-layout index.json blobs
	rm -rf "$d"
	mv "$out.tmp.$$" "$out"
}

build_pause() {
	local out=$1 ref=$2 d
	d=$(mktemp -d "$cache/.pause.XXXXXX")
	mkdir -p "$d/root"
	gcc -static -Os -s -o "$d/root/pause" "$here/pause/pause.c"
	tar -C "$d/root" --owner=0 --group=0 --numeric-owner --mtime=@0 -cf "$d/layer.tar" pause
	# 65535: the conventional non-root uid of pause images; the sandbox
	# container of a restricted pod must not run as root either.
	oci_archive "$out" "$ref" "$d/layer.tar" '"User":"65535:65535","Entrypoint":["/pause"]'
	rm -rf "$d"
}

# The canary of the egress start gate (runner/gate.c): the binary alone,
# listening on 8200-8327 (an execution's policy allows two of them) and 8182 (none
# does). Both above 1024: it runs as 65532, with no capability to bind
# below.
build_egress_gate() {
	local out=$1 ref=$2 d
	d=$(mktemp -d "$cache/.egress-gate.XXXXXX")
	mkdir -p "$d/root"
	gcc -static -O2 -s -o "$d/root/gate" "$here/runner/gate.c" ||
		{ rm -rf "$d"; die "cannot build images/runner/gate.c"; }
	tar -C "$d/root" --owner=0 --group=0 --numeric-owner --mtime=@0 -cf "$d/layer.tar" gate
	oci_archive "$out" "$ref" "$d/layer.tar" \
		'"User":"65532:65532","Entrypoint":["/gate","--serve","8200-8327","8182"]'
	rm -rf "$d"
}

build_runner() {
	local name=$1 out=$2 ref=$3 d pkgs
	d=$(mktemp -d "$cache/.$name.XXXXXX")
	pkgs=$(runner_packages "$name")
	# The purge (runner_purge), a script the hook runs on the new root.
	{
		echo '#!/bin/sh'
		echo "want=\"$(runner_purge "$name")\""
		echo '[ -n "$want" ] || exit 0'
		echo 'have=$(chroot "$1" dpkg-query -W -f="\${Package}\n" $want 2>/dev/null)'
		echo '[ -z "$have" ] || chroot "$1" dpkg --purge --force-depends $have >/dev/null'
	} >"$d/purge.sh"
	# /airlock/bin/warm: static, so that it needs nothing of the image.
	gcc -static -O2 -s -o "$d/warm" "$here/runner/warm.c" ||
		{ rm -rf "$d"; die "cannot build images/runner/warm.c"; }
	# /airlock/bin/gate: run's egress start gate, static for the same reason.
	gcc -static -O2 -s -o "$d/gate" "$here/runner/gate.c" ||
		{ rm -rf "$d"; die "cannot build images/runner/gate.c"; }
	# essential: only the Essential:yes set (libc, bash, dash, coreutils, ...)
	# plus what we include; no apt, no init. Documentation, manuals and
	# locales are left out at dpkg level.
	# The customize hook runs on the host with the new root as $1: the
	# runner user (65532, controller/docs/pod.md), the /airlock layout and
	# the entrypoint.
	# merged-usr hook: a merged /usr made by mmdebstrap itself, with the
	# usr-is-merged marker instead of the usrmerge package, which would pull
	# in the whole of perl (~50 MB per image, imported at every start).
	# No Recommends, as the Dockerfile's --no-install-recommends: with
	# them python-data was 1.1 GB (scipy, sympy, gcc and its headers).
	mmdebstrap --quiet --variant=essential --mode=root \
		--hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
		--aptopt='Apt::Install-Recommends "false"' \
		${pkgs:+--include="$pkgs"} \
		--dpkgopt='path-exclude=/usr/share/doc/*' \
		--dpkgopt='path-include=/usr/share/doc/*/copyright' \
		--dpkgopt='path-exclude=/usr/share/man/*' \
		--dpkgopt='path-exclude=/usr/share/info/*' \
		--dpkgopt='path-exclude=/usr/share/locale/*' \
		--customize-hook='mkdir -p "$1/airlock/bin" "$1/airlock/code" "$1/airlock/work"' \
		--customize-hook='chmod 1777 "$1/airlock/work"' \
		--customize-hook='ln -s /dev/shm/airlock-out "$1/airlock/out"' \
		--customize-hook="install -m 0755 '$here/runner/run' \"\$1/airlock/bin/run\"" \
		--customize-hook="install -m 0755 '$d/warm' \"\$1/airlock/bin/warm\"" \
		--customize-hook="install -m 0755 '$d/gate' \"\$1/airlock/bin/gate\"" \
		--customize-hook="install -m 0644 '$here/runner/policy.py' '$here/runner/policy.sh' '$here/runner/policy.bashrc' \"\$1/airlock/bin/\"" \
		--customize-hook="install -m 0644 '$here/runner/kernel.py' '$here/runner/kernel.sh' '$here/runner/zygote.py' \"\$1/airlock/bin/\"" \
		--customize-hook='echo "airlock:x:65532:65532:airlock runner:/airlock/work:/usr/sbin/nologin" >>"$1/etc/passwd"' \
		--customize-hook='echo "airlock:x:65532:" >>"$1/etc/group"' \
		--customize-hook="sh '$d/purge.sh' \"\$1\"" \
		--customize-hook='rm -rf "$1"/var/cache/* "$1"/var/log/* "$1"/var/lib/apt/lists/*' \
		--customize-hook='if [ -f "$1/etc/matplotlibrc" ]; then sed -i "/^[[:space:]]*backend[[:space:]]*:/d" "$1/etc/matplotlibrc"; echo "backend: Agg" >>"$1/etc/matplotlibrc"; fi' \
		"$(suite)" "$d/layer.tar" "$(apt_sources)" >"$d/mmdebstrap.log" 2>&1 ||
		{ tail -n 40 "$d/mmdebstrap.log" >&2; rm -rf "$d"; die "mmdebstrap failed for $name"; }
	oci_archive "$out" "$ref" "$d/layer.tar" \
		"\"User\":\"65532:65532\",\"Env\":[\"PATH=/usr/local/bin:/usr/bin:/bin\",\"LANG=C.UTF-8\",\"AIRLOCK_CODE_DIR=/airlock/code\"$(e=$(runner_env "$name"); [ -n "$e" ] && echo ",$e")],\"WorkingDir\":\"/airlock/work\",\"Entrypoint\":[\"/airlock/bin/run\"],\"Cmd\":[$(runner_cmd "$name")]"
	rm -rf "$d"
}

# base_packages NAME: the Debian packages of a daemons' base on top of
# Essential. base_purge NAME: those their Depends pull in that the image
# never runs, purged after the install (dpkg --force-depends, as
# runner_purge). base_prune NAME: shell lines run on the new root ($1)
# after that, for files of packages that stay.
base_packages() {
	case $1 in
	daemon-base) echo "$DAEMON_PACKAGES ca-certificates" ;;
	agent-base) echo "$DAEMON_PACKAGES ca-certificates $AGENT_PACKAGES" ;;
	egress-base) echo "$DAEMON_PACKAGES $EGRESS_PACKAGES" ;;
	esac
}
# daemon_base NAME: the base a daemon's image is built on.
daemon_base() {
	case $1 in
	node-agent) echo agent-base ;;
	*) echo daemon-base ;;
	esac
}
# egress-base: squid-openssl depends on libdbi-perl (for log_db_daemon, a
# helper Airlock does not use), so on the whole of perl, 48 MB of a 152 MB
# root; and on logrotate, so on cron. Squid itself is C++ and runs neither.
base_purge() {
	case $1 in
	egress-base)
		echo "libdbi-perl perl perl-modules-5.36 libperl5.36 libgdbm-compat4" \
		     "libgdbm6 logrotate libpopt0 cron cron-daemon-common" ;;
	esac
}
# egress-base: the error pages in English only (error_directory in
# egress/squid.conf.in; 8 MB for all 48 languages), and no pinger, which is
# setuid root and disabled by pinger_enable off.
base_prune() {
	case $1 in
	egress-base)
		echo 'find "$1/usr/share/squid-langpack" -mindepth 1 -maxdepth 1 ! -name en -exec rm -rf {} +'
		echo 'rm -f "$1/usr/lib/squid/pinger"' ;;
	esac
}

# base_root NAME: the daemons' root filesystem (daemon-base: Essential,
# their libraries and CA certificates; egress-base: the same libraries and
# Squid), as a layer tarball cached under its own key (mmdebstrap takes
# ~40 s; a new binary must not pay it again). Prints its path.
base_root() {
	local name=$1 k out d opts=()
	# The daemons' base keeps its Recommends (what it has always had); the
	# proxy's has none: squid-openssl's would add libcap2-bin and
	# ca-certificates, which it never uses (it splices TLS, never verifies).
	[ "$name" = daemon-base ] || opts=(--aptopt='Apt::Install-Recommends "false"')
	k=$(key "$name")
	out=$cache/$name-$k.tar
	if [ ! -s "$out" ]; then
		d=$(mktemp -d "$cache/.$name.XXXXXX")
		{
			echo '#!/bin/sh'
			echo "want=\"$(base_purge "$name")\""
			echo 'set -e'
			echo 'if [ -n "$want" ]; then'
			echo '	have=$(chroot "$1" dpkg-query -W -f="\${Package}\n" $want 2>/dev/null || :)'
			echo '	[ -z "$have" ] || chroot "$1" dpkg --purge --force-depends $have >/dev/null'
			echo 'fi'
			base_prune "$name"
		} >"$d/purge.sh"
		mmdebstrap --quiet --variant=essential --mode=root \
			--hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
			"${opts[@]}" --include="$(base_packages "$name")" \
			--dpkgopt='path-exclude=/usr/share/doc/*' \
			--dpkgopt='path-include=/usr/share/doc/*/copyright' \
			--dpkgopt='path-exclude=/usr/share/man/*' \
			--dpkgopt='path-exclude=/usr/share/info/*' \
			--dpkgopt='path-exclude=/usr/share/locale/*' \
			--customize-hook='echo "airlock:x:65532:65532:airlock:/nonexistent:/usr/sbin/nologin" >>"$1/etc/passwd"' \
			--customize-hook='echo "airlock:x:65532:" >>"$1/etc/group"' \
			--customize-hook="sh '$d/purge.sh' \"\$1\"" \
			--customize-hook='rm -rf "$1"/var/cache/* "$1"/var/log/* "$1"/var/lib/apt/lists/*' \
			"$(suite)" "$d/layer.tar" "$(apt_sources)" >"$d/mmdebstrap.log" 2>&1 ||
			{ tail -n 40 "$d/mmdebstrap.log" >&2; rm -rf "$d"; die "mmdebstrap failed for $name"; }
		mv "$d/layer.tar" "$out.tmp.$$" && mv "$out.tmp.$$" "$out"
		rm -rf "$d"
		ls -t "$cache/$name"-????????????.tar | tail -n +3 | xargs -r rm -f
	fi
	echo "$out"
}

# build_daemon NAME OUT REF: the base plus the stripped binary in
# /usr/local/bin. The controller runs as 65532; the node agent as root,
# which its DaemonSet narrows to the capabilities it needs (the chart).
build_daemon() {
	local name=$1 out=$2 ref=$3 base d user
	base=$(base_root "$(daemon_base "$name")")
	d=$(mktemp -d "$cache/.$name.XXXXXX")
	mkdir -p "$d/root/usr/local/bin"
	strip -o "$d/root/usr/local/bin/airlock-$name" "$bindir/airlock-$name"
	cp "$base" "$d/layer.tar"
	tar -C "$d/root" --owner=0 --group=0 --numeric-owner --mtime=@0 \
		-rf "$d/layer.tar" usr/local/bin/airlock-$name
	case $name in
	controller) user=65532:65532 ;;
	node-agent) user=0:0 ;;
	esac
	oci_archive "$out" "$ref" "$d/layer.tar" \
		"\"User\":\"$user\",\"Env\":[\"PATH=/usr/local/bin:/usr/bin:/bin\"],\"Entrypoint\":[\"/usr/local/bin/airlock-$name\"]"
	rm -rf "$d"
}

# build_egress OUT REF: the proxy's base plus the stripped airlock-egress
# (the ACL helper; through the airlock-egress-log link, Squid's log
# daemon, which Squid starts with argv[0] "(logfile-daemon)", not the
# link's name), the entrypoint and the squid.conf template. uid 65532, as
# the egress-gate container beside it in the pod (images/README.md says
# why not proxy/13).
build_egress() {
	local out=$1 ref=$2 base d
	base=$(base_root egress-base)
	d=$(mktemp -d "$cache/.egress.XXXXXX")
	mkdir -p "$d/root/usr/local/bin" "$d/root/usr/local/share/airlock"
	strip -o "$d/root/usr/local/bin/airlock-egress" "$bindir/airlock-egress"
	chmod 0755 "$d/root/usr/local/bin/airlock-egress"
	ln -s airlock-egress "$d/root/usr/local/bin/airlock-egress-log"
	install -m 0755 "$here/egress/entrypoint.sh" "$d/root/usr/local/bin/airlock-egress-entrypoint"
	install -m 0644 "$here/egress/squid.conf.in" "$d/root/usr/local/share/airlock/squid.conf.in"
	cp "$base" "$d/layer.tar"
	tar -C "$d/root" --owner=0 --group=0 --numeric-owner --mtime=@0 -rf "$d/layer.tar" \
		usr/local/bin/airlock-egress usr/local/bin/airlock-egress-log \
		usr/local/bin/airlock-egress-entrypoint usr/local/share/airlock
	oci_archive "$out" "$ref" "$d/layer.tar" \
		'"User":"65532:65532","Env":["PATH=/usr/local/bin:/usr/bin:/bin"],"ExposedPorts":{"3128/tcp":{}},"Entrypoint":["/usr/local/bin/airlock-egress-entrypoint"]'
	rm -rf "$d"
}

images=("$@")
[ ${#images[@]} -gt 0 ] || images=("${ALL[@]}")
mkdir -p "$cache"
for name in "${images[@]}"; do
	k=$(key "$name")
	ref=$REGISTRY/$name:$k
	out=$cache/$name-$k.tar
	if [ ! -s "$out" ]; then
		start=$SECONDS
		echo "images/build.sh: building $ref (cold; cached in $out)" >&2
		case $name in
		pause) build_pause "$out" "$ref" ;;
		egress-gate) build_egress_gate "$out" "$ref" ;;
		controller|node-agent) build_daemon "$name" "$out" "$ref" ;;
		egress) build_egress "$out" "$ref" ;;
		*) build_runner "$name" "$out" "$ref" ;;
		esac
		echo "images/build.sh: built $name in $((SECONDS - start)) s" >&2
		# Keep this and the one before (another clone may use it); older
		# keys only fill the disk. (A key is 12 characters, so that
		# runner-python's are not runner-python-data's.)
		ls -t "$cache/$name"-????????????.tar | tail -n +3 | xargs -r rm -f
	fi
	var=$(echo "$name" | tr a-z- A-Z_)
	echo "${var}_IMAGE=$ref"
	echo "${var}_IMAGE_TAR=$out"
done
