#!/bin/sh
# airlock-egress-entrypoint: the egress image's entrypoint (images/README.md,
# "The egress proxy").
#
#   airlock-egress-entrypoint          render /run/airlock/squid.conf from the
#                                      environment, make the throwaway bump
#                                      certificate, exec squid in the foreground
#   airlock-egress-entrypoint parse    render, then squid -k parse (exit: its)
#   airlock-egress-entrypoint render   only print the squid.conf it would run
#   airlock-egress-entrypoint ready    the readiness probe: exit 0 when squid
#                                      listens on 3128
#
# A bad variable: "airlock-egress-entrypoint: NAME: why" on stderr, exit 2.
set -euf

RUN=/run/airlock
# AIRLOCK_EGRESS_TEMPLATE: for tests/unit/test_egress_entrypoint.c, which
# renders with this tree's template on the host.
TEMPLATE=${AIRLOCK_EGRESS_TEMPLATE:-/usr/local/share/airlock/squid.conf.in}
PORT=3128
DEFAULT_DENIED="0.0.0.0/8 10.0.0.0/8 100.64.0.0/10 127.0.0.0/8 169.254.0.0/16
172.16.0.0/12 192.168.0.0/16 224.0.0.0/3 ::/128 ::1/128 fc00::/7 fe80::/10
64:ff9b::/96"
# Never exempt, and always denied whatever EGRESS_DENIED_CIDRS says: this
# host ("this network", loopback) and link-local (cloud metadata).
HARD_DENIED="0.0.0.0/8 127.0.0.0/8 169.254.0.0/16 ::/128 ::1/128 fe80::/10"

die() { echo "airlock-egress-entrypoint: $*" >&2; exit 2; }

# --- addresses as bit strings -------------------------------------------
# Every address is written as the 128 bits of its IPv6 form, an IPv4 one
# as v4-mapped (::ffff:a.b.c.d), which is how Squid compares them too (a
# v4-mapped AAAA answer matches an IPv4 dst entry). A CIDR is then the
# string of its first LEN bits: A contains B iff A is a prefix of B, and
# A less B is the siblings along B's path below A.

Z16=0000000000000000
ZEROS=$Z16$Z16$Z16$Z16$Z16$Z16$Z16$Z16
V4MAPPED=$Z16$Z16$Z16$Z16${Z16}1111111111111111

# bits N WIDTH: N in binary, WIDTH digits.
bits() {
	_n=$1 _i=$(($2 - 1)) _o=
	while [ "$_i" -ge 0 ]; do
		_o=$_o$(((_n >> _i) & 1))
		_i=$((_i - 1))
	done
	printf %s "$_o"
}

# decimal S MAX: S is a decimal number 0..MAX without leading zeros.
decimal() {
	case $1 in '' | *[!0-9]* | 0?*) return 1 ;; esac
	[ "${#1}" -le 10 ] && [ "$1" -le "$2" ]
}

# v4_bits ADDR: its 128 bits, or status 1 when it is not a dotted quad.
v4_bits() {
	case $1 in *[!0-9.]* | .* | *. | *..*) return 1 ;; esac
	_oifs=$IFS; IFS=.; set -- $1; IFS=$_oifs
	[ $# -eq 4 ] || return 1
	_b=$V4MAPPED
	for _q; do
		decimal "$_q" 255 || return 1
		_b=$_b$(bits "$_q" 8)
	done
	printf %s "$_b"
}

# v6_bits ADDR: its 128 bits, or status 1 when it is not hex groups (with
# at most one "::"; no embedded dotted quad).
v6_bits() {
	case $1 in *[!0-9a-fA-F:]* | *:::* | '') return 1 ;; esac
	case $1 in
	*::*::*) return 1 ;;
	*::*) _head=${1%%::*} _tail=${1#*::} _gap=1 ;;
	*) _head=$1 _tail= _gap=0 ;;
	esac
	for _part in "$_head" "$_tail"; do
		case $_part in :* | *:) return 1 ;; esac
	done
	_oifs=$IFS; IFS=:
	set -- $_head
	_nh=$#
	set -- $_tail
	_nt=$#
	IFS=$_oifs
	_fill=$((8 - _nh - _nt))
	if [ "$_gap" = 1 ]; then [ "$_fill" -ge 1 ] || return 1
	else [ "$_fill" -eq 0 ] || return 1; fi
	_b=
	_oifs=$IFS; IFS=:
	for _g in $_head; do
		case $_g in ?????* | '') IFS=$_oifs; return 1 ;; esac
		_b=$_b$(bits "$((0x$_g))" 16)
	done
	while [ "$_fill" -gt 0 ]; do
		_b=${_b}0000000000000000
		_fill=$((_fill - 1))
	done
	for _g in $_tail; do
		case $_g in ?????* | '') IFS=$_oifs; return 1 ;; esac
		_b=$_b$(bits "$((0x$_g))" 16)
	done
	IFS=$_oifs
	printf %s "$_b"
}

# addr_bits ADDR: v4_bits or v6_bits.
addr_bits() {
	case $1 in
	*:*) v6_bits "$1" ;;
	*) v4_bits "$1" ;;
	esac
}

# head_bits BITS LEN: the first LEN characters of BITS.
head_bits() {
	_s=$1 _o= _i=0
	while [ "$_i" -lt "$2" ]; do
		_r=${_s#?}
		_o=$_o${_s%"$_r"}
		_s=$_r
		_i=$((_i + 1))
	done
	printf %s "$_o"
}

# cidr_bits CIDR: its prefix as a bit string after a "p" (so that ::/0 is
# not an empty word); status 1 when it is not ADDR/LEN, or has bits set
# past LEN.
cidr_bits() {
	case $1 in */*) ;; *) return 1 ;; esac
	_a=${1%/*} _l=${1##*/}
	case $_a in
	*:*) decimal "$_l" 128 || return 1 ;;
	*) decimal "$_l" 32 || return 1; _l=$((_l + 96)) ;;
	esac
	_all=$(addr_bits "$_a") || return 1
	_p=$(head_bits "$_all" "$_l")
	case ${_all#"$_p"} in *1*) return 1 ;; esac
	printf p%s "$_p"
}

# bits_cidr PREFIX: PREFIX back in text: dotted under ::ffff:0:0/96,
# uncompressed hex groups otherwise. One loop and no $(...): it runs for
# every piece of a difference (~30 for a /32 exempt out of 10.0.0.0/8).
bits_cidr() {
	_p=${1#p}
	_l=${#_p}
	_s=$_p$ZEROS
	if [ "$_l" -ge 96 ] && [ "${_p#"$V4MAPPED"}" != "$_p" ]; then
		_s=${_s#"$V4MAPPED"} _n=32 _w=8 _sep=. _len=$((_l - 96))
	else
		_n=128 _w=4 _sep=: _len=$_l
	fi
	_t= _g= _v=0 _i=0
	while [ "$_i" -lt "$_n" ]; do
		_r=${_s#?}
		_v=$((_v * 2 + ${_s%"$_r"}))
		_s=$_r
		_i=$((_i + 1))
		[ $((_i % _w)) -eq 0 ] || continue
		if [ "$_w" = 8 ]; then
			_t=$_t${_t:+.}$_v
		else
			# A hex digit per nibble, leading zeros of a group dropped.
			case $_v in 10) _v=a ;; 11) _v=b ;; 12) _v=c ;; 13) _v=d ;; 14) _v=e ;; 15) _v=f ;; esac
			_g=$_g$_v
			_g=${_g#0}
			if [ $((_i % 16)) -eq 0 ]; then
				_t=$_t${_t:+$_sep}${_g:-0}
				_g=
			fi
		fi
		_v=0
	done
	printf '%s/%d' "$_t" "$_len"
}

# minus A B: the prefixes of A less B, for B strictly inside A.
minus() {
	_p=$1 _rest=${2#"$1"}
	while [ -n "$_rest" ]; do
		_r=${_rest#?}
		_c=${_rest%"$_r"}
		if [ "$_c" = 0 ]; then printf '%s1\n' "$_p"; else printf '%s0\n' "$_p"; fi
		_p=$_p$_c
		_rest=$_r
	done
}

# cidrs NAME VALUE: VALUE's CIDRs as prefixes, one a line; die naming NAME.
cidrs() {
	for _c in $2; do
		cidr_bits "$_c" || die "$1: '$_c' is not a CIDR (ADDR/LEN, no bits set past LEN)"
		echo
	done
}

# --- the environment ----------------------------------------------------

# render: check every variable, print the squid.conf.
render() {
	key=${EGRESS_KEY_FILE-}
	[ -n "$key" ] || die "EGRESS_KEY_FILE: not set (the passes' key: the chart's Secret)"
	case $key in
	/*) ;;
	*) die "EGRESS_KEY_FILE: '$key' is not an absolute path" ;;
	esac
	case $key in
	*[!A-Za-z0-9._/-]*) die "EGRESS_KEY_FILE: '$key' has characters other than A-Z a-z 0-9 . _ / -" ;;
	esac
	[ -f "$key" ] && [ -r "$key" ] || die "EGRESS_KEY_FILE: cannot read '$key'"

	ports=${EGRESS_PORTS-}
	[ -n "$(echo $ports)" ] || die "EGRESS_PORTS: not set (the profiles' host-entry ports)"
	for p in $ports; do
		decimal "$p" 65535 && [ "$p" -ge 1 ] ||
			die "EGRESS_PORTS: '$p' is not a TCP port (1..65535)"
	done

	max=${EGRESS_MAX_SECONDS:-3600}
	decimal "$max" 2592000 && [ "$max" -ge 1 ] ||
		die "EGRESS_MAX_SECONDS: '$max' is not a number of seconds (1..2592000)"

	# Unset or empty: the pod's own resolver (/etc/resolv.conf).
	dns=$(echo ${EGRESS_DNS-})
	for a in $dns; do
		addr_bits "$a" >/dev/null || die "EGRESS_DNS: '$a' is not an IP address"
	done
	if [ -n "$dns" ]; then
		dnsline="dns_nameservers $dns"
	else
		dnsline="# dns_nameservers: the pod's /etc/resolv.conf (EGRESS_DNS empty)"
	fi

	hosts=${EGRESS_HOSTS_FILE:-none}
	if [ "$hosts" != none ]; then
		case $hosts in
		/*) ;;
		*) die "EGRESS_HOSTS_FILE: '$hosts' is not an absolute path" ;;
		esac
		case $hosts in
		*[!A-Za-z0-9._/-]*) die "EGRESS_HOSTS_FILE: '$hosts' has characters other than A-Z a-z 0-9 . _ / -" ;;
		esac
		[ -f "$hosts" ] && [ -r "$hosts" ] || die "EGRESS_HOSTS_FILE: cannot read '$hosts'"
		# Squid 5.7 skips a last line without its newline (seen: the
		# name then has no address).
		[ -z "$(tail -c 1 "$hosts")" ] ||
			die "EGRESS_HOSTS_FILE: '$hosts' does not end with a newline (Squid would skip its last line)"
	fi

	# (die in $(...) leaves only the subshell: hence || exit 2.)
	denied=$(cidrs EGRESS_DENIED_CIDRS "${EGRESS_DENIED_CIDRS-$DEFAULT_DENIED}") || exit 2
	extra=$(cidrs EGRESS_EXTRA_DENIED_CIDRS "${EGRESS_EXTRA_DENIED_CIDRS-}") || exit 2
	hard=$(cidrs HARD_DENIED "$HARD_DENIED") || exit 2
	exempt=$(cidrs EGRESS_EXEMPT_CIDRS "${EGRESS_EXEMPT_CIDRS-}") || exit 2
	[ -n "$(echo $denied)" ] || die "EGRESS_DENIED_CIDRS: empty"

	# An exemption touching a never-exempt range is refused, not narrowed:
	# the operator asked for something that cannot be.
	for e in $exempt; do
		for h in $hard; do
			case $e in "$h"*) ;; *) case $h in "$e"*) ;; *) continue ;; esac ;; esac
			die "EGRESS_EXEMPT_CIDRS: '$(bits_cidr "$e")' overlaps $(bits_cidr "$h"), which is never exempt"
		done
	done

	# internal = (denied + extra) less the exemptions, + the never-exempt.
	set -- $denied $extra
	for e in $exempt; do
		kept=
		for d; do
			case $e in
			"$d") ;;                                  # the same range: gone
			"$d"*) kept="$kept $(minus "$d" "$e")" ;; # inside: d less e
			*) case $d in "$e"*) ;; *) kept="$kept $d" ;; esac ;;
			esac
		done
		set -- $kept
	done
	internal=
	for d in "$@" $hard; do
		internal="$internal $(bits_cidr "$d")"
	done
	internal=$(printf '%s\n' $internal | LC_ALL=C sort -u | tr '\n' ' ')

	[ -r "$TEMPLATE" ] || die "cannot read the template '$TEMPLATE'"
	# Every value is checked above to hold none of sed's | \ & or newline.
	sed -e "s|@KEY_FILE@|$key|g" \
	    -e "s|@PORTS@|$(echo $ports)|g" \
	    -e "s|@MAX_SECONDS@|$max|g" \
	    -e "s|@DNS_LINE@|$dnsline|g" \
	    -e "s|@HOSTS_FILE@|$hosts|g" \
	    -e "s|@INTERNAL_CIDRS@|${internal% }|g" \
	    "$TEMPLATE"
}

# conf: render into $RUN/squid.conf.
conf() {
	[ -d "$RUN" ] && [ -w "$RUN" ] || die "'$RUN' is not a writable directory (the chart's emptyDir)"
	render >"$RUN/squid.conf.tmp"
	mv "$RUN/squid.conf.tmp" "$RUN/squid.conf"
}

# cert: the bump port's throwaway pair. A refused CONNECT gets its 403
# inside a handshake with it; nothing trusts it and nothing else uses it.
cert() {
	(umask 077 && openssl req -x509 -newkey rsa:2048 -nodes -days 2 \
		-subj /CN=airlock-egress-refused \
		-keyout "$RUN/bump.key" -out "$RUN/bump.crt" 2>"$RUN/openssl.err") ||
		{ cat "$RUN/openssl.err" >&2; echo "airlock-egress-entrypoint: cannot make the bump certificate" >&2; exit 1; }
	rm -f "$RUN/openssl.err"
}

# ready: a socket listening on :3128 (IPv4 or IPv6 any address; what a
# tcpSocket probe would prove, since the kernel completes the handshake for
# a listening socket). No TCP client in the image (dash has no /dev/tcp),
# so /proc/net.
ready() {
	hex=$(printf '%04X' "$PORT")
	grep -qE "^ *[0-9]+: [0-9A-F]+:$hex [0-9A-F]+:[0-9A-F]+ 0A " /proc/net/tcp /proc/net/tcp6 2>/dev/null ||
		{ echo "not ready: nothing listens on $PORT" >&2; exit 1; }
}

case ${1-run} in
run)
	conf
	cert
	# The audit records: Squid gives airlock-egress-log one socket as its
	# stdin and stdout, so it writes them to this FIFO, and cat copies
	# them to the container's stdout. Opened read-write, cat never sees
	# an end when a log daemon Squid restarts closes it; if cat dies, the
	# daemon's write fails and Squid exits with it: no unaudited traffic.
	rm -f "$RUN/audit" "$RUN/squid.err"
	mkfifo -m 600 "$RUN/audit" "$RUN/squid.err"
	cat <>"$RUN/audit" &
	# Squid's own log (cache_log: stderr) can carry a request's raw
	# bytes, newlines and all (a header with a NUL is logged whole, before
	# any rule): each of its lines is prefixed, so that none can read as
	# an audit record where the controller follows this container's log,
	# stdout and stderr together (the hostile review of the counts: a
	# forged record was counted).
	sed -u 's/^/squid: /' <>"$RUN/squid.err" >&2 &
	exec /usr/sbin/squid -N -f "$RUN/squid.conf" 2>"$RUN/squid.err"
	;;
parse)
	conf
	cert
	exec /usr/sbin/squid -k parse -f "$RUN/squid.conf"
	;;
render) render ;;
ready) ready ;;
*) echo "usage: airlock-egress-entrypoint [run|parse|render|ready]" >&2; exit 2 ;;
esac
