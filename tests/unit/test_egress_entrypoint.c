/*
 * Unit tests: images/egress/entrypoint.sh's render mode, run with the
 * host's dash on this tree's squid.conf.in: the EGRESS_* variables as
 * Squid gets them, the denied list less the exemptions (a CIDR
 * difference, IPv4 and IPv6), and every refusal's message and exit 2.
 * Squid itself is not run here (images/README.md says how the image was
 * run). Skipped without dash.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "itutil.h"

static char script[4096 + 64];
static char tmpl[4096 + 64];

static int
group_setup(void **state)
{
	char self[4096], *d;
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

	(void)state;
	if (n <= 0)
		return -1;
	self[n] = '\0';
	/* The source tree: the first directory above the test that holds it. */
	while ((d = strrchr(self, '/')) != NULL && d != self) {
		*d = '\0';
		snprintf(script, sizeof(script), "%s/images/egress/entrypoint.sh", self);
		snprintf(tmpl, sizeof(tmpl), "%s/images/egress/squid.conf.in", self);
		if (access(script, R_OK) == 0 && access(tmpl, R_OK) == 0)
			return 0;
	}
	return -1;
}

static int
have_dash(void **state)
{
	(void)state;
	if (system("command -v dash >/dev/null 2>&1") != 0)
		skip();
	return 0;
}

/*
 * Render with env (assignments for env -i) and keep the lines starting
 * with prefix: the exit status, those lines in *out, stderr in *err
 * (caller frees both).
 */
static int
render(const char *env, const char *prefix, char **out, char **err)
{
	char *cmd;
	int st;

	/* In ( ): it_sh appends its 2> to the whole command. */
	assert_true(asprintf(&cmd, "(f=/tmp/airlock-egress-render.$$; "
	    "env -i PATH=/usr/bin:/bin AIRLOCK_EGRESS_TEMPLATE='%s' %s "
	    "dash '%s' render >$f; st=$?; grep '^%s' $f; rm -f $f; exit $st)",
	    tmpl, env, script, prefix) > 0);
	st = it_sh(cmd, out, err);
	free(cmd);
	return st;
}

static void
expect_line(const char *env, const char *prefix, const char *want)
{
	char *out, *err;
	int st = render(env, prefix, &out, &err);

	if (st != 0 || strcmp(out, want) != 0 || strcmp(err, "") != 0)
		fail_msg("%s\nexit %d\nstdout: %s\nwant:   %s\nstderr: %s", env, st,
		    out, want, err);
	free(out);
	free(err);
}

static void
expect_refused(const char *env, const char *want_err)
{
	char *out, *err;
	int st = render(env, "", &out, &err);

	if (st != 2 || strcmp(out, "") != 0 || strcmp(err, want_err) != 0)
		fail_msg("%s\nexit %d (want 2)\nstdout: %s\nstderr: %s\nwant:   %s",
		    env, st, out, err, want_err);
	free(out);
	free(err);
}

#define BASE "EGRESS_KEY_FILE=/etc/hostname EGRESS_PORTS='80 443' "
#define FIXED "0.0.0.0/8 0:0:0:0:0:0:0:0/128 0:0:0:0:0:0:0:1/128 "

/* Only the two required variables: the defaults. */
static void
test_defaults(void **state)
{
	(void)state;
	expect_line(BASE, "acl internal ", "acl internal dst " FIXED
	    "10.0.0.0/8 100.64.0.0/10 127.0.0.0/8 169.254.0.0/16 "
	    "172.16.0.0/12 192.168.0.0/16 224.0.0.0/3 64:ff9b:0:0:0:0:0:0/96 "
	    "fc00:0:0:0:0:0:0:0/7 fe80:0:0:0:0:0:0:0/10\n");
	expect_line(BASE, "acl ports ", "acl ports port 80 443\n");
	expect_line(BASE, "hosts_file ", "hosts_file none\n");
	expect_line(BASE, "# dns_nameservers", "# dns_nameservers: the pod's "
	    "/etc/resolv.conf (EGRESS_DNS empty)\n");
	expect_line(BASE, "client_lifetime ", "client_lifetime 3600 seconds\n");
	expect_line(BASE, "external_acl_type ", "external_acl_type airlock "
	    "ttl=0 negative_ttl=0 cache=0 concurrency=64 children-max=1 "
	    "children-startup=1 queue-size=4096 %>ha{Proxy-Authorization} "
	    "%{clt_conn_tag}note %DST %PORT %ssl::>sni %>rm "
	    "%DATA /usr/local/bin/airlock-egress acl --key-file=/etc/hostname\n");
	expect_line(BASE, "access_log ", "access_log daemon:/run/airlock/audit "
	    "airlock\n");
	/*
	 * Squid's cache manager and any scheme but HTTP outside a CONNECT
	 * are refused before the helper is asked (review, 2026-11-28).
	 */
	expect_line(BASE, "http_access ", "http_access deny manager r_manager\n"
	    "http_access deny !CONNECT !http_scheme r_scheme\n"
	    "http_access deny !exec_allows\n"
	    "http_access deny !ports r_port\n"
	    "http_access deny ip_literal r_literal\n"
	    "http_access deny !resolved r_dns\n"
	    "http_access deny internal r_internal\n"
	    "http_access allow r_ok\n"
	    "http_access deny all\n");
	expect_line(BASE, "cachemgr_passwd ", "cachemgr_passwd disable all\n");
	expect_line(BASE, "email_err_data ", "email_err_data off\n");
	/* Nothing left unrendered. */
	expect_line(BASE, "[^#].*@[A-Z_]*@", "");
}

static void
test_values(void **state)
{
	(void)state;
	expect_line(BASE "EGRESS_DNS='10.96.0.10  fd00::a' ", "dns_nameservers ",
	    "dns_nameservers 10.96.0.10 fd00::a\n");
	expect_line(BASE "EGRESS_HOSTS_FILE=/etc/hostname ", "hosts_file ",
	    "hosts_file /etc/hostname\n");
	expect_line(BASE "EGRESS_MAX_SECONDS=86400 ", "client_lifetime ",
	    "client_lifetime 86400 seconds\n");
	/* The list replaced: the never-exempt ranges stay. */
	expect_line(BASE "EGRESS_DENIED_CIDRS='10.96.0.0/12' "
	    "EGRESS_EXTRA_DENIED_CIDRS='192.0.2.1/32 2001:db8::/32' ",
	    "acl internal ", "acl internal dst " FIXED "10.96.0.0/12 "
	    "127.0.0.0/8 169.254.0.0/16 192.0.2.1/32 2001:db8:0:0:0:0:0:0/32 "
	    "fe80:0:0:0:0:0:0:0/10\n");
}

/*
 * An exemption is subtracted: a /32 out of 10.0.0.0/8 leaves the 24
 * ranges around it (10.244.1.7 itself absent); a whole entry goes; an
 * IPv6 one is cut out of fc00::/7.
 */
static void
test_exempt(void **state)
{
	(void)state;
	expect_line(BASE "EGRESS_EXEMPT_CIDRS=10.244.1.7/32 ", "acl internal ",
	    "acl internal dst " FIXED "10.0.0.0/9 10.128.0.0/10 10.192.0.0/11 "
	    "10.224.0.0/12 10.240.0.0/14 10.244.0.0/24 10.244.1.0/30 "
	    "10.244.1.128/25 10.244.1.16/28 10.244.1.32/27 10.244.1.4/31 "
	    "10.244.1.6/32 10.244.1.64/26 10.244.1.8/29 10.244.128.0/17 "
	    "10.244.16.0/20 10.244.2.0/23 10.244.32.0/19 10.244.4.0/22 "
	    "10.244.64.0/18 10.244.8.0/21 10.245.0.0/16 10.246.0.0/15 "
	    "10.248.0.0/13 100.64.0.0/10 127.0.0.0/8 169.254.0.0/16 "
	    "172.16.0.0/12 192.168.0.0/16 224.0.0.0/3 64:ff9b:0:0:0:0:0:0/96 "
	    "fc00:0:0:0:0:0:0:0/7 fe80:0:0:0:0:0:0:0/10\n");
	expect_line(BASE "EGRESS_EXEMPT_CIDRS='172.16.0.0/12 100.0.0.0/8' ",
	    "acl internal ", "acl internal dst " FIXED "10.0.0.0/8 "
	    "127.0.0.0/8 169.254.0.0/16 192.168.0.0/16 224.0.0.0/3 "
	    "64:ff9b:0:0:0:0:0:0/96 fc00:0:0:0:0:0:0:0/7 "
	    "fe80:0:0:0:0:0:0:0/10\n");
	expect_line(BASE "EGRESS_DENIED_CIDRS='fc00::/7' "
	    "EGRESS_EXEMPT_CIDRS=fd12:3456::/32 ", "acl internal ",
	    "acl internal dst " FIXED "127.0.0.0/8 169.254.0.0/16 "
	    "fc00:0:0:0:0:0:0:0/8 fd00:0:0:0:0:0:0:0/12 fd10:0:0:0:0:0:0:0/15 "
	    "fd12:0:0:0:0:0:0:0/19 fd12:2000:0:0:0:0:0:0/20 "
	    "fd12:3000:0:0:0:0:0:0/22 fd12:3400:0:0:0:0:0:0/26 "
	    "fd12:3440:0:0:0:0:0:0/28 fd12:3450:0:0:0:0:0:0/30 "
	    "fd12:3454:0:0:0:0:0:0/31 fd12:3457:0:0:0:0:0:0/32 "
	    "fd12:3458:0:0:0:0:0:0/29 fd12:3460:0:0:0:0:0:0/27 "
	    "fd12:3480:0:0:0:0:0:0/25 fd12:3500:0:0:0:0:0:0/24 "
	    "fd12:3600:0:0:0:0:0:0/23 fd12:3800:0:0:0:0:0:0/21 "
	    "fd12:4000:0:0:0:0:0:0/18 fd12:8000:0:0:0:0:0:0/17 "
	    "fd13:0:0:0:0:0:0:0/16 fd14:0:0:0:0:0:0:0/14 fd18:0:0:0:0:0:0:0/13 "
	    "fd20:0:0:0:0:0:0:0/11 fd40:0:0:0:0:0:0:0/10 fd80:0:0:0:0:0:0:0/9 "
	    "fe80:0:0:0:0:0:0:0/10\n");
}

#define E "airlock-egress-entrypoint: "

static void
test_refused(void **state)
{
	(void)state;
	expect_refused("EGRESS_PORTS=80", E "EGRESS_KEY_FILE: not set (the passes' "
	    "key: the chart's Secret)\n");
	expect_refused("EGRESS_KEY_FILE=key EGRESS_PORTS=80",
	    E "EGRESS_KEY_FILE: 'key' is not an absolute path\n");
	expect_refused("EGRESS_KEY_FILE='/etc/a b' EGRESS_PORTS=80",
	    E "EGRESS_KEY_FILE: '/etc/a b' has characters other than A-Z a-z 0-9 . _ / -\n");
	expect_refused("EGRESS_KEY_FILE=/nonexistent/key EGRESS_PORTS=80",
	    E "EGRESS_KEY_FILE: cannot read '/nonexistent/key'\n");
	expect_refused("EGRESS_KEY_FILE=/etc/hostname EGRESS_PORTS=' '",
	    E "EGRESS_PORTS: not set (the profiles' host-entry ports)\n");
	expect_refused("EGRESS_KEY_FILE=/etc/hostname EGRESS_PORTS='80 0'",
	    E "EGRESS_PORTS: '0' is not a TCP port (1..65535)\n");
	expect_refused("EGRESS_KEY_FILE=/etc/hostname EGRESS_PORTS=65536",
	    E "EGRESS_PORTS: '65536' is not a TCP port (1..65535)\n");
	expect_refused("EGRESS_KEY_FILE=/etc/hostname EGRESS_PORTS=080",
	    E "EGRESS_PORTS: '080' is not a TCP port (1..65535)\n");
	/* No glob expansion: '*' is refused as itself. */
	expect_refused("EGRESS_KEY_FILE=/etc/hostname EGRESS_PORTS='*'",
	    E "EGRESS_PORTS: '*' is not a TCP port (1..65535)\n");
	expect_refused(BASE "EGRESS_MAX_SECONDS=0",
	    E "EGRESS_MAX_SECONDS: '0' is not a number of seconds (1..2592000)\n");
	expect_refused(BASE "EGRESS_MAX_SECONDS=99999999999",
	    E "EGRESS_MAX_SECONDS: '99999999999' is not a number of seconds "
	    "(1..2592000)\n");
	{
		FILE *f = fopen("/tmp/airlock-egress-hosts-nonl", "w");

		assert_non_null(f);
		fputs("10.1.2.3 a.test", f);
		fclose(f);
		expect_refused(BASE "EGRESS_HOSTS_FILE=/tmp/airlock-egress-hosts-nonl",
		    E "EGRESS_HOSTS_FILE: '/tmp/airlock-egress-hosts-nonl' does not end "
		    "with a newline (Squid would skip its last line)\n");
		unlink("/tmp/airlock-egress-hosts-nonl");
	}
	expect_refused(BASE "EGRESS_DNS=10.0.0.256",
	    E "EGRESS_DNS: '10.0.0.256' is not an IP address\n");
	expect_refused(BASE "EGRESS_DNS=dns.example",
	    E "EGRESS_DNS: 'dns.example' is not an IP address\n");
	expect_refused(BASE "EGRESS_HOSTS_FILE=hosts",
	    E "EGRESS_HOSTS_FILE: 'hosts' is not an absolute path\n");
	expect_refused(BASE "EGRESS_HOSTS_FILE='/etc/a|b'",
	    E "EGRESS_HOSTS_FILE: '/etc/a|b' has characters other than "
	    "A-Z a-z 0-9 . _ / -\n");
	expect_refused(BASE "EGRESS_HOSTS_FILE=/nonexistent/hosts",
	    E "EGRESS_HOSTS_FILE: cannot read '/nonexistent/hosts'\n");
	expect_refused(BASE "EGRESS_DENIED_CIDRS=",
	    E "EGRESS_DENIED_CIDRS: empty\n");
	expect_refused(BASE "EGRESS_DENIED_CIDRS=10.0.0.0",
	    E "EGRESS_DENIED_CIDRS: '10.0.0.0' is not a CIDR (ADDR/LEN, no bits "
	    "set past LEN)\n");
	expect_refused(BASE "EGRESS_EXTRA_DENIED_CIDRS=10.0.0.1/8",
	    E "EGRESS_EXTRA_DENIED_CIDRS: '10.0.0.1/8' is not a CIDR (ADDR/LEN, "
	    "no bits set past LEN)\n");
	expect_refused(BASE "EGRESS_EXEMPT_CIDRS=10.0.0.0/33",
	    E "EGRESS_EXEMPT_CIDRS: '10.0.0.0/33' is not a CIDR (ADDR/LEN, no "
	    "bits set past LEN)\n");
	expect_refused(BASE "EGRESS_EXEMPT_CIDRS=1:2::3::/64",
	    E "EGRESS_EXEMPT_CIDRS: '1:2::3::/64' is not a CIDR (ADDR/LEN, no "
	    "bits set past LEN)\n");
	expect_refused(BASE "EGRESS_EXEMPT_CIDRS=12345::/16",
	    E "EGRESS_EXEMPT_CIDRS: '12345::/16' is not a CIDR (ADDR/LEN, no "
	    "bits set past LEN)\n");
	expect_refused(BASE "EGRESS_EXEMPT_CIDRS=1:2:3:4:5:6:7/64",
	    E "EGRESS_EXEMPT_CIDRS: '1:2:3:4:5:6:7/64' is not a CIDR (ADDR/LEN, "
	    "no bits set past LEN)\n");
	expect_refused(BASE "EGRESS_EXEMPT_CIDRS=::ffff:10.0.0.0/104",
	    E "EGRESS_EXEMPT_CIDRS: '::ffff:10.0.0.0/104' is not a CIDR "
	    "(ADDR/LEN, no bits set past LEN)\n");
}

/*
 * Exemptions that touch loopback, link-local or "this network" are
 * refused, not narrowed, in any spelling: inside one, covering one, or
 * as IPv6 covering the v4-mapped space.
 */
static void
test_never_exempt(void **state)
{
	(void)state;
	expect_refused(BASE "EGRESS_EXEMPT_CIDRS=127.0.0.5/32",
	    E "EGRESS_EXEMPT_CIDRS: '127.0.0.5/32' overlaps 127.0.0.0/8, which "
	    "is never exempt\n");
	expect_refused(BASE "EGRESS_EXEMPT_CIDRS='10.1.0.0/16 169.254.169.254/32'",
	    E "EGRESS_EXEMPT_CIDRS: '169.254.169.254/32' overlaps "
	    "169.254.0.0/16, which is never exempt\n");
	expect_refused(BASE "EGRESS_EXEMPT_CIDRS=0.0.0.0/0",
	    E "EGRESS_EXEMPT_CIDRS: '0.0.0.0/0' overlaps 0.0.0.0/8, which is "
	    "never exempt\n");
	expect_refused(BASE "EGRESS_EXEMPT_CIDRS=::/0",
	    E "EGRESS_EXEMPT_CIDRS: '0:0:0:0:0:0:0:0/0' overlaps 0.0.0.0/8, "
	    "which is never exempt\n");
	expect_refused(BASE "EGRESS_EXEMPT_CIDRS=::ffff:0:0/96",
	    E "EGRESS_EXEMPT_CIDRS: '0.0.0.0/0' overlaps 0.0.0.0/8, which is "
	    "never exempt\n");
	expect_refused(BASE "EGRESS_EXEMPT_CIDRS=::1/128",
	    E "EGRESS_EXEMPT_CIDRS: '0:0:0:0:0:0:0:1/128' overlaps "
	    "0:0:0:0:0:0:0:1/128, which is never exempt\n");
	expect_refused(BASE "EGRESS_EXEMPT_CIDRS=fe80::/64",
	    E "EGRESS_EXEMPT_CIDRS: 'fe80:0:0:0:0:0:0:0/64' overlaps "
	    "fe80:0:0:0:0:0:0:0/10, which is never exempt\n");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_defaults, have_dash),
		cmocka_unit_test_setup(test_values, have_dash),
		cmocka_unit_test_setup(test_exempt, have_dash),
		cmocka_unit_test_setup(test_refused, have_dash),
		cmocka_unit_test_setup(test_never_exempt, have_dash),
	};

	return cmocka_run_group_tests(tests, group_setup, NULL);
}
