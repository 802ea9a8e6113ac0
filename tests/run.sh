#!/usr/bin/env bash
# Run test binaries of one tier and tally them, or print the grand total.
#
#   tests/run.sh TIER BUILDDIR BIN...   run each BIN (cmocka, TAP output)
#   tests/run.sh summary [TIER...]      "N passed, N failed, N skipped" over
#                                       all tiers; each TIER named must have
#                                       reported
#
# Each test binary prints TAP; every "ok"/"not ok" line is one test, and one
# marked "# SKIP" (cmocka's skip()) is a skip, neither a pass nor a failure. A binary that
# exits non-zero without reporting a failure (a crash, a sanitizer or
# valgrind error, a timeout) counts as one more failure, so nothing is
# lost. Results accumulate in build/results/TIER as "passed failed skipped".
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
# AIRLOCK_RESULTS: another place for the tally (make check keeps its own).
results=${AIRLOCK_RESULTS:-$top/build/results}
mkdir -p "$results"

if [ "${1:-}" = summary ]; then
	shift
	p=0 f=0 s=0
	for r in "$results"/*; do
		[ -f "$r" ] || continue
		read -r rp rf rs < "$r"
		p=$((p + rp)) f=$((f + rf)) s=$((s + ${rs:-0}))
	done
	# A tier that was expected but never reported (its build or its
	# cluster failed first) is a failure, not a silent gap.
	[ $# -gt 0 ] || set -- "$results"/*
	for t in "$@"; do
		t=$(basename "$t")
		if [ ! -f "$results/$t" ]; then
			echo "  $t: FAIL the tier did not run"
			f=$((f + 1))
		fi
	done
	# Each failure again, last, with its log's tail: a CI that shows only
	# the end of the output still says what failed and why.
	for r in "$results"/failures/*; do
		[ -f "$r" ] || continue
		case $r in *.names|*.why) continue ;; esac
		cat "$r"
	done
	# And their first messages and names alone, on the last lines (a long
	# sanitizer report above can push everything else out of a CI's tail).
	cat "$results"/failures/*.why 2>/dev/null | sed 's/^/why: /'
	cat "$results"/failures/*.names 2>/dev/null | sed 's/^/failed: /'
	echo "$p passed, $f failed, $s skipped"
	[ "$f" -eq 0 ]
	exit
fi

tier=$1 build=$2
shift 2
export AIRLOCK_BUILD=$top/$build AIRLOCK_TOP=$top CMOCKA_MESSAGE_OUTPUT=TAP
# The daemons the tests start come from the same flavour as the tests.
if [ "$build" = build/plain ]; then
	export AIRLOCK_BIN=$top/bin
else
	export AIRLOCK_BIN=$top/$build/bin
fi
[ -f "$top/.cluster/env" ] && export AIRLOCK_CLUSTER_ENV=$top/.cluster/env
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:exitcode=98}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
wrap=()
if [ "${VALGRIND:-0}" = 1 ]; then
	wrap=(valgrind -q --error-exitcode=99 --leak-check=full
	      --errors-for-leak-kinds=definite --show-leak-kinds=definite
	      --suppressions="$top/tests/valgrind.supp" --num-callers=30)
fi

# Namespaces not being deleted, by name, when a cluster is up ("" if none).
live_namespaces() {
	local k c
	k=$(sed -n 's/^KUBECTL=//p' "$top/.cluster/env" 2>/dev/null)
	c=$(sed -n 's/^KUBECONFIG_ADMIN=//p' "$top/.cluster/env" 2>/dev/null)
	[ -n "$k" ] && [ -n "$c" ] || return 0
	"$k" --kubeconfig "$c" get namespaces --request-timeout=10s --no-headers \
	    -o custom-columns=N:.metadata.name,P:.status.phase 2>/dev/null |
	    awk '$2 == "Active" { print $1 }' | sort
}

# What a test binary left behind (a failed test skips its own cleanup) goes
# before the next one starts: a warm pool's holders left running keep their
# CPU requests on the node, and every later tier found no room for a pod.
sweep_left() {
	local left k c end
	left=$(comm -13 <(printf '%s\n' "$1") <(live_namespaces) | grep -v '^$')
	[ -n "$left" ] || return 0
	echo "  $tier/$name: left namespaces behind, deleted: $(echo $left)"
	k=$(sed -n 's/^KUBECTL=//p' "$top/.cluster/env")
	c=$(sed -n 's/^KUBECONFIG_ADMIN=//p' "$top/.cluster/env")
	# shellcheck disable=SC2086
	"$k" --kubeconfig "$c" delete namespace $left --wait=false >/dev/null 2>&1
	end=$((SECONDS + 120))
	# shellcheck disable=SC2086
	while "$k" --kubeconfig "$c" get namespace $left -o name 2>/dev/null | grep -q .; do
		if ((SECONDS > end)); then
			echo "  $tier/$name: its namespaces still there after 120 s"
			break
		fi
		sleep 1
	done
}

pass=0 fail=0 skip=0
logdir=$top/build/logs/$tier
mkdir -p "$logdir"

# run_one BIN: run it, its output in its log, its status beside it.
run_one() {
	local log=$logdir/$(basename "$1").log t0=$EPOCHREALTIME
	timeout --kill-after=10 "${TEST_TIMEOUT:-600}" "${wrap[@]}" "$1" > "$log" 2>&1
	echo $? > "$log.rc"
	# How long it took, for where make test's time goes (issue 29).
	awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f\n", b - a }' > "$log.secs"
}

# JOBS=N (make check): up to N binaries at once, for tiers that use no
# cluster (nothing is swept between them); tallied in order after.
if [ "${JOBS:-1}" -gt 1 ]; then
	for bin in "$@"; do
		while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n; done
		run_one "$bin" &
	done
	wait
fi
for bin in "$@"; do
	name=$(basename "$bin")
	log=$logdir/$name.log
	if [ "${JOBS:-1}" -le 1 ]; then
		case $bin in
		# A unit test uses no cluster, and runs beside a tier that does
		# (make memory): a sweep would delete that tier's namespaces.
		*/tests/unit/*) run_one "$bin" ;;
		*)	before=$(live_namespaces)
			run_one "$bin"
			sweep_left "$before" ;;
		esac
	fi
	rc=$(cat "$log.rc" 2>/dev/null || echo 1)
	# cmocka writes a skip as "not ok N # SKIP name"; TAP also allows
	# "ok N - name # SKIP".
	s=$(grep -cE '^(not )?ok [0-9]+ .*# *SKIP' "$log")
	p=$(grep -E '^ok ' "$log" | grep -cvE '# *SKIP')
	f=$(grep -E '^not ok ' "$log" | grep -cvE '# *SKIP')
	while read -r line; do echo "  $tier/$name: $line"; done < <(grep -E '^(not )?ok ' "$log" |
		sed -E 's/^(not )?ok [0-9]* (- )?# *SKIP *(.*)/SKIP \3/; s/^ok [0-9]* - (.*) # *SKIP.*/SKIP \1/;
		    s/^ok [0-9]* - /PASS /; s/^not ok [0-9]* - /FAIL /')
	echo "  $tier/$name: took $(cat "$log.secs" 2>/dev/null || echo ?) s"
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		f=1
		echo "  $tier/$name: FAIL exited with status $rc"
	fi
	if [ "$rc" -ne 0 ] || [ "$f" -ne 0 ]; then
		mkdir -p "$results/failures"
		{
			grep -E '^not ok ' "$log" | sed -E "s|^not ok [0-9]* (- )?|$tier/$name: |"
			[ "$rc" -eq 0 ] || echo "$tier/$name: exited with status $rc"
		} | cut -c1-200 >> "$results/failures/$tier.names"
		# The first lines of why, short, for the summary's last lines.
		grep -E '^(ERROR|# .*(error|Failure)|SUMMARY: )|^E  ' "$log" | head -n 4 |
		    sed "s|^|$tier/$name: |" | cut -c1-240 >> "$results/failures/$tier.why"
		{
			grep -E '^not ok ' "$log" | sed "s|^|  $tier/$name: |"
			[ "$rc" -eq 0 ] || echo "  $tier/$name: exited with status $rc"
			# Why, first: each failure's message and place, and a
			# sanitizer's summary (its report can fill the tail).
			echo "  --- $log: the failures' messages ---"
			grep -nE '^(ERROR|not ok |# .*(error|Failure)|SUMMARY: )|^E  ' "$log" |
			    head -n 40 | sed 's/^/  | /'
			echo "  --- $log (last 40 lines) ---"
			tail -n 40 "$log" | sed 's/^/  | /'
		} | tee -a "$results/failures/$tier"
	fi
	pass=$((pass + p)) fail=$((fail + f)) skip=$((skip + s))
done
read -r op of os 2>/dev/null < "$results/$tier" || { op=0; of=0; os=0; }
echo "$((op + pass)) $((of + fail)) $((${os:-0} + skip))" > "$results/$tier"
echo "$tier: $pass passed, $fail failed, $skip skipped ($SECONDS s)"
[ "$fail" -eq 0 ]
