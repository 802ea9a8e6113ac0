# /airlock/bin/policy.bashrc - read by the restricted bash policy.sh starts
# (as BASH_ENV, before the restrictions apply). A command that is not on
# the allowed PATH ends the program: the guard's line on stderr, then
# SIGKILL to the program's shell ($$: this runs in the forked child).
command_not_found_handle() {
	echo "airlock: policy: command '$1' is not allowed (${BASH_SOURCE[1]:-?} line ${BASH_LINENO[0]:-?})" 1>&2
	kill -KILL $$
}
readonly -f command_not_found_handle
