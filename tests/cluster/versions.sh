# Pinned versions of the test control plane. Sourced by the scripts here.
# Test tooling only: built from Go modules, cached, never shipped.
KUBE_VERSION=1.37.2
ETCD_VERSION=3.7.3
AIRLOCK_CACHE=${AIRLOCK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/airlock}
