# Pinned versions of the test control plane. Sourced by the scripts here.
# Test tooling only: built from Go modules, cached, never shipped.
KUBE_VERSION=1.37.2
ETCD_VERSION=3.7.3
# gVisor (runsc, containerd-shim-runsc-v1) for the test node (up.sh NODE=1):
# the commit of gVisor's Go-only "go" branch pinned in tools/gvisor/go.mod.
GVISOR_VERSION=20260905-160fafc42237
# helm for the chart tests (tests/chart), from its Go module; pinned in
# tools/helm/go.mod.
HELM_VERSION=3.22.0
# kube-router, whose NetworkPolicy controller enforces the tenants' deny-all
# policy on the test node; pinned in tools/kube-router/go.mod.
KUBE_ROUTER_VERSION=2.1.0
AIRLOCK_CACHE=${AIRLOCK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/airlock}
