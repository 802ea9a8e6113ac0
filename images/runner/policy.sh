# /airlock/bin/policy.sh - a profile's allowCommands, enforced in the sandbox
# (README: security model; execution/ctl_config.h). The profile's command
# runs it, with bash, in front of the program:
#
#   bash /airlock/bin/policy.sh ALLOWED[,ALLOWED...] PROGRAM [ARG...]
#
# It links the allowed commands found on PATH into a directory of their
# own, makes that the whole PATH, and runs PROGRAM in bash's restricted
# mode (bash -r, "RESTRICTED SHELL" in bash(1)), in which PATH cannot be
# changed and a command named with a '/' is refused, as are `exec`,
# `enable`, `command -p`, `cd` and output redirection to any file, even
# /dev/null (2>&1 and the like still work; an allowed `tee` writes files). A command not on
# that PATH reaches command_not_found_handle (policy.bashrc, read before
# the restrictions and read-only after), which says on stderr
#
#   airlock: policy: command 'curl' is not allowed (main.sh line 4)
#
# and kills the program (exit 137), which the node agent reports as
# PolicyDenied. Builtins (echo, printf, read, test, ...) always work.
#
# A guard against accidents and common misuse, not a boundary: an allowed
# command that runs others (env, xargs, find, sh, python3) or writes files
# where they are run from (ln, cp, chmod) widens the list; gVisor remains
# the boundary.
if [ $# -lt 2 ]; then
	echo "policy.sh: usage: policy.sh ALLOWED[,ALLOWED...] PROGRAM [ARG...]" >&2
	exit 125
fi
IFS=, read -r -a names <<<"$1"
prog=$2
shift 2
paths=()
for n in "${names[@]}"; do
	# hash: the PATH lookup, without a subshell per name.
	if hash -- "$n" 2>/dev/null && [ -n "${BASH_CMDS[$n]-}" ]; then
		paths+=("${BASH_CMDS[$n]}")
	fi
done
# A directory of its own (a warm holder's warm-up ran this once already).
dir=$(mktemp -d /tmp/.airlock-commands.XXXXXX) || exit 125
chmod 0755 "$dir" || exit 125
if [ ${#paths[@]} -gt 0 ]; then
	ln -s -t "$dir" -- "${paths[@]}" || exit 125
fi
# The restricted shell ignores SHELLOPTS and function definitions from
# the environment; BASH_ENV is ours, read before the restrictions apply.
unset CDPATH GLOBIGNORE ENV POSIXLY_CORRECT BASH_XTRACEFD PS4
PATH=$dir BASH_ENV=${BASH_SOURCE%/*}/policy.bashrc exec "$BASH" -r -- "$prog" "$@"
