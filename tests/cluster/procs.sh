# shellcheck shell=bash
# Every process of a test cluster, found and stopped (issue 28, item 7).
# Sourced by down.sh (through node-down.sh), restart.sh and up.sh.
#
# A pod's processes live in the cgroups under its node's cgroupRoot
# (CGROUP_ROOT, .cluster/node*/ids): a runc container's outlives its shim,
# reparented to init, and names nothing of .cluster on its command line
# (the chart's controller, its node agent). So a node's processes are
# those of its cgroups; the cluster's own (etcd, the kubelets, shims,
# runsc) name .cluster on their command lines.

# procs_live PID: alive and not a zombie (a zombie cannot be killed; its
# parent reaps it).
procs_live() {
	local st
	st=$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null) || return 1
	[ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]
}

# procs_in_cgroup ROOT: the live pids in every hierarchy's ROOT and below,
# once each.
procs_in_cgroup() {
	local root=$1 f p
	[ -n "$root" ] || return 0
	for f in /sys/fs/cgroup/*"$root"; do
		if [ -d "$f" ]; then find "$f" -name cgroup.procs -exec cat {} + 2>/dev/null || true; fi
	done | sort -un | while read -r p; do
		if [ "$p" != $$ ] && procs_live "$p"; then echo "$p"; fi
	done
	return 0
}

# procs_ancestors: this shell and its ancestors' pids, one a line.
procs_ancestors() {
	local p=$$
	while [ -n "$p" ] && [ "$p" != 0 ]; do
		echo "$p"
		p=$(awk '{ print $4 }' "/proc/$p/stat" 2>/dev/null)
	done
}

# procs_naming DIR: the live pids whose command line names DIR/ as a path
# of its own (at a word's start, or after = or :; not inside a longer path,
# as another clone's /tmp/x/work/main/.cluster/ would be), not this shell
# or its ancestors.
procs_naming() {
	local p dir mine
	dir=$(printf '%s/' "$1" | sed 's/[][\.*^$/]/\\&/g')
	mine=" $(procs_ancestors | tr '\n' ' ')"
	for p in /proc/[0-9]*; do
		p=${p#/proc/}
		[[ $mine == *" $p "* ]] && continue
		tr '\0' ' ' 2>/dev/null <"/proc/$p/cmdline" | grep -qE "(^|[ =:])$dir" || continue
		if procs_live "$p"; then echo "$p"; fi
	done
	return 0
}

# procs_describe PID...: "PID (COMMAND LINE)" each, one line.
procs_describe() {
	local p out=()
	for p; do
		out+=("$p ($(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | cut -c1-100 | sed 's/ *$//'))")
	done
	echo "${out[*]}"
}

# procs_kill WHAT PID...: SIGKILL them; 0 when all are gone within 5 s,
# else says which are left (naming WHAT) and returns 1.
procs_kill() {
	local what=$1 p left=()
	shift
	[ $# -eq 0 ] && return 0
	kill -KILL "$@" 2>/dev/null || true
	for _ in $(seq 50); do
		left=()
		for p; do procs_live "$p" && left+=("$p"); done
		[ ${#left[@]} -eq 0 ] && return 0
		sleep 0.1
	done
	echo "$what: processes survived SIGKILL: $(procs_describe "${left[@]}")" >&2
	return 1
}
