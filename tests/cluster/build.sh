#!/usr/bin/env bash
# Build the pinned etcd and Kubernetes server binaries from their Go modules
# into the cache outside the work tree, once per version:
#
#   $AIRLOCK_CACHE/etcd-v$ETCD_VERSION-<modhash>/etcd
#   $AIRLOCK_CACHE/kube-v$KUBE_VERSION-<modhash>/{kube-apiserver,...}
#   $AIRLOCK_CACHE/gvisor-$GVISOR_VERSION-<modhash>/{runsc,containerd-shim-runsc-v1}
#   $AIRLOCK_CACHE/helm-v$HELM_VERSION-<modhash>/helm
#   $AIRLOCK_CACHE/kube-router-v$KUBE_ROUTER_VERSION-<modhash>/kube-router
#
# The key includes a hash of the tool module's go.mod and go.sum, so editing
# the pins rebuilds and nothing stale is reused. Prints the directories.
#
# usage: build.sh [component ...]    (default: etcd kube-apiserver)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/versions.sh"

export GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0
command -v go >/dev/null || { echo "build.sh: go not found in PATH" >&2; exit 1; }

modkey() { cat "$1/go.mod" "$1/go.sum" | sha256sum | cut -c1-12; }
etcd_dir=$AIRLOCK_CACHE/etcd-v$ETCD_VERSION-$(modkey "$here/tools/etcd")
kube_dir=$AIRLOCK_CACHE/kube-v$KUBE_VERSION-$(modkey "$here/tools/kube")
# The shim's one build-time change (see shim_overlay) is part of its key.
SHIM_OOM_SED='s/^\(\toomScoreMax = \)-999$/\10/'
gvisor_dir=$AIRLOCK_CACHE/gvisor-$GVISOR_VERSION-$({ modkey "$here/tools/gvisor"; echo "$SHIM_OOM_SED"; } | sha256sum | cut -c1-12)

helm_dir=$AIRLOCK_CACHE/helm-v$HELM_VERSION-$(modkey "$here/tools/helm")
kube_router_dir=$AIRLOCK_CACHE/kube-router-v$KUBE_ROUTER_VERSION-$(modkey "$here/tools/kube-router")

kube_ldflags="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	kube_ldflags+=" -X $p.gitVersion=v$KUBE_VERSION"
	kube_ldflags+=" -X $p.gitMajor=${KUBE_VERSION%%.*}"
	kube_ldflags+=" -X $p.gitMinor=$(echo "$KUBE_VERSION" | cut -d. -f2)"
	kube_ldflags+=" -X $p.gitTreeState=clean"
done

# build_one DIR NAME MODDIR PKG LDFLAGS [GO BUILD FLAGS]: atomic, so an
# interrupted build never leaves a half-written binary that a later run
# would trust.
build_one() {
	local dir=$1 name=$2 moddir=$3 pkg=$4 ldflags=$5
	shift 5
	[ -x "$dir/$name" ] && return 0
	mkdir -p "$dir"
	local start=$SECONDS
	echo "build.sh: building $name (cold; cached in $dir)" >&2
	(cd "$moddir" && go build -trimpath -ldflags "$ldflags" "$@" -o "$dir/.$name.tmp.$$" "$pkg")
	mv "$dir/.$name.tmp.$$" "$dir/$name"
	echo "build.sh: built $name in $((SECONDS - start)) s" >&2
}

# shim_module: a throwaway copy of the tools module for
# containerd-shim-runsc-v1. The shim sets its daemon's oom_score_adj to -999
# and fails every pod when it cannot; root on these machines lacks
# CAP_SYS_RESOURCE, so the kernel refuses any negative value
# (tests/cluster/README.md). The copy replaces gvisor.dev/gvisor with the
# pinned module's own source, that one constant set to 0 by sed (go build
# -overlay may not touch the module cache). Stops if the line has moved.
shim_module() {
	local src tmp
	src=$(cd "$here/tools/gvisor" && go list -m -f '{{.Dir}}' gvisor.dev/gvisor)
	tmp=$(mktemp -d)
	cp "$here/tools/gvisor/go.mod" "$here/tools/gvisor/go.sum" "$here/tools/gvisor/tools.go" "$tmp/"
	cp -r "$src" "$tmp/gvisor"
	chmod -R u+w "$tmp/gvisor"
	sed -i "$SHIM_OOM_SED" "$tmp/gvisor/pkg/shim/v1/manager.go"
	if cmp -s "$src/pkg/shim/v1/manager.go" "$tmp/gvisor/pkg/shim/v1/manager.go"; then
		echo "build.sh: the shim's oomScoreMax line is not where expected in $src" >&2
		rm -rf "$tmp"
		exit 1
	fi
	(cd "$tmp" && go mod edit -replace gvisor.dev/gvisor=./gvisor)
	echo "$tmp"
}

components=("$@")
[ ${#components[@]} -gt 0 ] || components=(etcd kube-apiserver)
for c in "${components[@]}"; do
	case $c in
	etcd) build_one "$etcd_dir" etcd "$here/tools/etcd" . "-s -w" ;;
	kube-apiserver|kube-controller-manager|kube-scheduler|kubelet|kubectl)
		build_one "$kube_dir" "$c" "$here/tools/kube" "k8s.io/kubernetes/cmd/$c" "$kube_ldflags" ;;
	# gVisor's Go-only branch builds with plain go build, no cgo; runsc
	# reports the pinned version instead of VERSION_MISSING.
	runsc) build_one "$gvisor_dir" runsc "$here/tools/gvisor" gvisor.dev/gvisor/runsc \
		"-s -w -X gvisor.dev/gvisor/runsc/version.version=$GVISOR_VERSION" ;;
	containerd-shim-runsc-v1)
		if [ ! -x "$gvisor_dir/$c" ]; then
			shimmod=$(shim_module)
			trap 'rm -rf "$shimmod"' EXIT
			build_one "$gvisor_dir" "$c" "$shimmod" gvisor.dev/gvisor/shim "-s -w"
			rm -rf "$shimmod"
			trap - EXIT
		fi ;;
	helm) build_one "$helm_dir" helm "$here/tools/helm" helm.sh/helm/v3/cmd/helm \
		"-s -w -X helm.sh/helm/v3/internal/version.version=v$HELM_VERSION -X helm.sh/helm/v3/internal/version.gitTreeState=clean" ;;
	kube-router) build_one "$kube_router_dir" kube-router "$here/tools/kube-router" \
		github.com/cloudnativelabs/kube-router/v2/cmd/kube-router "-s -w" ;;
	*) echo "build.sh: unknown component '$c'" >&2; exit 2 ;;
	esac
done
echo "ETCD_BIN_DIR=$etcd_dir"
echo "KUBE_BIN_DIR=$kube_dir"
echo "GVISOR_BIN_DIR=$gvisor_dir"
echo "HELM_BIN_DIR=$helm_dir"
echo "KUBE_ROUTER_BIN_DIR=$kube_router_dir"
