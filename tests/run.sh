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
results=$top/build/results
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
		cat "$r"
	done
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

pass=0 fail=0 skip=0
logdir=$top/build/logs/$tier
mkdir -p "$logdir"
for bin in "$@"; do
	name=$(basename "$bin")
	log=$logdir/$name.log
	timeout --kill-after=10 "${TEST_TIMEOUT:-600}" "${wrap[@]}" "$bin" > "$log" 2>&1
	rc=$?
	# cmocka writes a skip as "not ok N # SKIP name"; TAP also allows
	# "ok N - name # SKIP".
	s=$(grep -cE '^(not )?ok [0-9]+ .*# *SKIP' "$log")
	p=$(grep -E '^ok ' "$log" | grep -cvE '# *SKIP')
	f=$(grep -E '^not ok ' "$log" | grep -cvE '# *SKIP')
	while read -r line; do echo "  $tier/$name: $line"; done < <(grep -E '^(not )?ok ' "$log" |
		sed -E 's/^(not )?ok [0-9]* (- )?# *SKIP *(.*)/SKIP \3/; s/^ok [0-9]* - (.*) # *SKIP.*/SKIP \1/;
		    s/^ok [0-9]* - /PASS /; s/^not ok [0-9]* - /FAIL /')
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		f=1
		echo "  $tier/$name: FAIL exited with status $rc"
	fi
	if [ "$rc" -ne 0 ] || [ "$f" -ne 0 ]; then
		mkdir -p "$results/failures"
		{
			grep -E '^not ok ' "$log" | sed "s|^|  $tier/$name: |"
			[ "$rc" -eq 0 ] || echo "  $tier/$name: exited with status $rc"
			echo "  --- $log (last 40 lines) ---"
			tail -n 40 "$log" | sed 's/^/  | /'
		} | tee -a "$results/failures/$tier"
	fi
	pass=$((pass + p)) fail=$((fail + f)) skip=$((skip + s))
done
read -r op of os 2>/dev/null < "$results/$tier" || { op=0; of=0; os=0; }
echo "$((op + pass)) $((of + fail)) $((${os:-0} + skip))" > "$results/$tier"
echo "$tier: $pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
