#!/usr/bin/env bash
# The layering (README, "The tour"): operator/ -> execution/ ->
# {controller, node-agent, cli, proxy}. A layer uses only the layers below it and
# never a sibling: checked in the sources (no #include "../") and in the
# libraries, with nm: no symbol a library uses may be defined in a layer
# above it or beside it.
#
# usage: tests/layering.sh BUILDDIR...   (each with its lib*.a)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
fail=0

if grep -rnE '#include *"\.\./' "$top"/operator "$top"/execution "$top"/controller \
	"$top"/node-agent "$top"/cli "$top"/proxy --include='*.[ch]'; then
	echo "layering: a relative #include above (the Makefile's -I paths say the layers)" >&2
	fail=1
fi

# rank LIB: 0 operator, 1 execution, 2 the four on top.
rank() { case $1 in operator) echo 0 ;; execution) echo 1 ;; *) echo 2 ;; esac; }

for b in "$@"; do
	declare -A owner=()
	for lib in operator execution controller node-agent cli proxy; do
		while read -r sym; do owner[$sym]=$lib; done < <(nm --defined-only -g "$b/lib$lib.a" 2>/dev/null |
			awk 'NF == 3 && $2 ~ /[TDBR]/ { print $3 }')
	done
	for lib in operator execution controller node-agent cli proxy; do
		[ -f "$b/lib$lib.a" ] || { echo "layering: no $b/lib$lib.a" >&2; fail=1; continue; }
		while read -r sym; do
			o=${owner[$sym]-}
			[ -n "$o" ] && [ "$o" != "$lib" ] || continue
			if [ "$(rank "$o")" -ge "$(rank "$lib")" ]; then
				echo "layering: lib$lib.a uses $sym of lib$o.a ($b)" >&2
				fail=1
			fi
		done < <(nm -u "$b/lib$lib.a" | awk '$1 == "U" { print $2 }' | sort -u)
	done
	unset owner
done
[ "$fail" = 0 ] && echo "layering: ok ($*)"
exit "$fail"
