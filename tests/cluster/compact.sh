#!/usr/bin/env bash
# Compact the test cluster's etcd at its current revision, through etcd's v3
# JSON gateway, so every older revision is gone (the apiserver itself never
# compacts: up.sh passes --etcd-compaction-interval=0). Prints the revision.
#
# usage: compact.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
env_file=$(cd "$here/../.." && pwd)/.cluster/env

die() { echo "compact.sh: $*" >&2; exit 1; }

[ -f "$env_file" ] || die "no cluster: $env_file missing (run make cluster-up)"
# shellcheck disable=SC1090
. "$env_file"

post() { curl -sS --fail-with-body --max-time 10 -X POST -d "$2" "$ETCD_URL$1"; }

# A range over the single key "\0" matches nothing; we only want its header.
resp=$(post /v3/kv/range '{"key":"AA=="}') || die "range request to $ETCD_URL failed: $resp"
rev=$(grep -o '"revision":"[0-9]*"' <<<"$resp" | head -n1 | tr -dc 0-9)
[ -n "$rev" ] || die "no header.revision in range response: $resp"

# physical: return only once the old revisions are really removed, so a
# request made right after this script sees the compaction.
resp=$(post /v3/kv/compaction "{\"revision\":\"$rev\",\"physical\":true}") ||
	die "compaction at revision $rev failed: $resp"
echo "compact.sh: compacted etcd at revision $rev"
