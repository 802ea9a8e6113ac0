#!/usr/bin/env bash
# The root filesystems `airlock run --local` uses: each runner image of
# images/build.sh, unpacked once per key into the cache,
#
#   $AIRLOCK_CACHE/local/<runtime>-<key>/rootfs
#   $AIRLOCK_CACHE/local/<runtime> -> <runtime>-<key>     (swapped atomically)
#
# so a changed image is a new directory and a run in flight keeps its own
# (the previous key is kept; older ones are removed).
#
# usage: images/local.sh [RUNTIME ...]    (default: every profile of the
# chart, images/profiles.sh)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${AIRLOCK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/airlock}
local_dir=${AIRLOCK_LOCAL_ROOT:-$cache/local}
. "$here/profiles.sh"
runtimes=("$@")
[ ${#runtimes[@]} -gt 0 ] || mapfile -t runtimes < <(profiles_names)
mkdir -p "$local_dir"
for rt in "${runtimes[@]}"; do
	profiles_names | grep -qxF "$rt" || { echo "images/local.sh: unknown runtime '$rt' (not in $profiles_values)" >&2; exit 2; }
	out=$("$here/build.sh" "runner-$rt")
	ref=$(sed -n 's/^RUNNER_[A-Z_]*_IMAGE=//p' <<<"$out")
	tar=$(sed -n 's/^RUNNER_[A-Z_]*_IMAGE_TAR=//p' <<<"$out")
	dir=$local_dir/$rt-${ref##*:}
	if [ ! -x "$dir/rootfs/airlock/bin/run" ]; then
		tmp=$(mktemp -d "$local_dir/.$rt.XXXXXX")
		chmod 755 "$tmp"
		mkdir -p "$tmp/oci" "$tmp/rootfs"
		tar -xf "$tar" -C "$tmp/oci"
		# One layer per image (images/build.sh): the manifest's only one.
		layer=$(python3 -c '
import json, sys
d = sys.argv[1]
m = json.load(open(d + "/index.json"))["manifests"][0]["digest"].split(":")[1]
print(json.load(open(d + "/blobs/sha256/" + m))["layers"][0]["digest"].split(":")[1])' "$tmp/oci")
		tar -xf "$tmp/oci/blobs/sha256/$layer" -C "$tmp/rootfs" --numeric-owner
		rm -rf "$tmp/oci"
		rm -rf "$dir"
		mv "$tmp" "$dir"
	fi
	ln -sfn "$(basename "$dir")" "$local_dir/.$rt.link"
	mv -T "$local_dir/.$rt.link" "$local_dir/$rt"
	# Keep this key and the one before (a run may still be using it);
	# older ones only fill the disk.
	# (A key is 12 characters: python-???????????? is not python-data's.)
	ls -dt "$local_dir/$rt"-???????????? 2>/dev/null | tail -n +3 | xargs -r rm -rf
	echo "images/local.sh: $rt -> $dir/rootfs" >&2
done
