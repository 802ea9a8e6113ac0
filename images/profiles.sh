# Sourced by images/build.sh and images/local.sh: the runtimes are the
# chart's profiles (charts/airlock/values.yaml, config.profiles), the one
# list the CLI's local mode is built from too; each runner's Debian
# packages are its target's in images/runner/Dockerfile. Adding a runtime
# is an entry there and a target here.
#
# The values are read with awk, so config.profiles keeps the layout it has:
# a profile a key at four spaces, its image, command (a flow list) and
# sourceFile at six.
profiles_values=${AIRLOCK_VALUES:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/charts/airlock/values.yaml}
profiles_dockerfile=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/runner/Dockerfile

# Each profile: NAME<TAB>COMMAND, the command as in the values, "[a, b]".
profiles_list() {
	awk '
	/^config:/ { inconfig = 1; next }
	/^[^ #]/ { inconfig = 0 }
	inconfig && /^  profiles:/ { inprof = 1; next }
	inprof && /^  [^ ]/ { inprof = 0 }
	inprof && /^    [A-Za-z0-9_-]+:[ ]*$/ { name = $1; sub(/:$/, "", name); next }
	inprof && name != "" && /^      command:/ {
		cmd = $0; sub(/^      command:[ ]*/, "", cmd); print name "\t" cmd
	}' "$profiles_values"
}

profiles_names() { profiles_list | cut -f1; }

# The image's default command as JSON strings, "a","b" (without the
# entrypoint /airlock/bin/run), from the profile's command.
profile_cmd() {
	profiles_list | awk -F'\t' -v n="$1" '$1 == n {
		c = $2; gsub(/^\[|\]$/, "", c); k = split(c, a, /,[ ]*/); out = ""
		for (i = 1; i <= k; i++) {
			if (a[i] == "/airlock/bin/run") continue
			out = out (out == "" ? "" : ",") "\"" a[i] "\""
		}
		print out
	}'
}

# The environment of runtime NAME's image beyond the base's: its Dockerfile
# target's `ENV K=V` lines, as JSON strings "K=V","K2=V2" (or nothing).
profile_env() {
	awk -v n="$1" '
	/^FROM / { intarget = ($NF == n); next }
	intarget && /^ENV [A-Za-z_][A-Za-z0-9_]*=[^ "]*$/ {
		out = out (out == "" ? "" : ",") "\"" $2 "\""
	}
	END { print out }' "$profiles_dockerfile"
}

# The Debian packages of runtime NAME: its Dockerfile target's apt-get install.
profile_packages() {
	awk -v n="$1" '
	/^FROM / { intarget = ($NF == n); next }
	intarget && /apt-get install/ {
		s = $0; sub(/.*--no-install-recommends[ ]*/, "", s); sub(/[ ]*\\$/, "", s)
		sub(/[ ]*&&.*/, "", s); print s
	}' "$profiles_dockerfile"
}
