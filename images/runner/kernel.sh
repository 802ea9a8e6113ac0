# /airlock/bin/kernel.sh - a bash session's kernel (docs/sessions.md).
#
#   bash /airlock/bin/kernel.sh
#
# The same protocol as kernel.py (read its header): the session directory
# ($AIRLOCK_SESSION_DIR), kernel.lock held for the kernel's life, "RUN
# SEQ" lines on ctl, "READY PID" and "DONE SEQ KIND CODE DROPPED" on ack.
# Each step is sourced into this one shell, so its variables, functions,
# options and working directory are the next step's. Its status is the
# last command's: KIND ok for 0, error else. `exit` in a step ends this
# shell: the EXIT trap says so (KIND exit), and the step client starts a
# new one. The step's env (step/env) is exported into the shell: kept
# after the step, as `export` would.
#
# SIGINT (the client's timeout) reaches the step's commands (the whole
# process group); the trap makes the step return 130 at its next
# command, and the shell waits for the next RUN.
S=${AIRLOCK_SESSION_DIR:-/dev/shm/airlock-session}
exec 7<>"$S/kernel.lock" 3<>"$S/ctl" 4<>"$S/ack" </dev/null >/dev/null 2>&1 || exit 125
flock -n 7 || exit 3
seq=
trap ': ' INT
# The step's redirections are still in force at its exit: the FIFO by name.
trap 'rc=$?; [ -n "$seq" ] && printf "DONE %s exit %d 0\n" "$seq" "$rc" >"$S/ack"' EXIT
printf 'READY %d\n' "$$" >&4
# The step's shell options are its own (set -e, -u, ...), kept for the
# next step, and not this loop's. Through a file: a command substitution
# would not see -e. A step with -e whose command fails ends the shell, as
# it would end a script: a new kernel, the state lost.
set +o >"$S/opts"
while set +eu; set +o pipefail; IFS=' ' read -r cmd seq <&3; do
	[ "$cmd" = RUN ] || { seq=; continue; }
	d=$S/step
	in=/dev/null
	[ -e "$d/stdin" ] && in=$d/stdin
	if [ -e "$d/env" ]; then
		while IFS= read -r -d '' kv; do
			case $kv in
			[A-Za-z_]*=*) export "$kv" ;;
			esac
		done <"$d/env"
	fi
	# The step's fds: its stdin and FIFOs; not the kernel's own, which a
	# process it leaves running would otherwise hold.
	__airlock_step() {
		trap 'return 130' INT
		. "$d/code"
	}
	. "$S/opts"
	__airlock_step <"$in" >"$d/out" 2>"$d/err" 3<&- 4>&- 7>&-
	rc=$?
	set +o >"$S/opts"
	set +eu
	set +o pipefail
	trap ': ' INT
	if [ "$rc" -eq 0 ]; then kind=ok; else kind=error; fi
	printf 'DONE %s %s %d 0\n' "$seq" "$kind" "$rc" >&4
	seq=
done
