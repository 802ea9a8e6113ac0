/*
 * Unit tests: execution/egress.c's narrowing, an execution's
 * spec.network.egress against its profile's list (docs/network.md).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "egress.h"
#include "xmalloc.h"

/*
 * python-net's list, set by hand: the config refuses a list until it is
 * enforced from a pod's start (ctl_config.c). 10.0.0.0/8 holds the first.
 */
static struct ctl_profile *
profile(void)
{
	struct ctl_profile *p = xcalloc(1, sizeof(*p));

	p->name = xstrdup("python-net");
	p->egress = xcalloc(5, sizeof(*p->egress));
	p->negress = 5;
	p->egress[0] = (struct ctl_egress){ .cidr = xstrdup("10.20.0.0/16"),
	    .addr = 0x0a140000, .prefix = 16, .ports = { 5432, 443 }, .nports = 2 };
	p->egress[1] = (struct ctl_egress){ .cidr = xstrdup("192.168.1.7/32"),
	    .addr = 0xc0a80107, .prefix = 32, .ports = { 8080 }, .nports = 1 };
	p->egress[2] = (struct ctl_egress){ .cidr = xstrdup("10.0.0.0/8"),
	    .addr = 0x0a000000, .prefix = 8, .ports = { 80 }, .nports = 1 };
	p->egress[3] = (struct ctl_egress){ .host = xstrdup("pypi.org"),
	    .ports = { 443 }, .nports = 1 };
	p->egress[4] = (struct ctl_egress){ .host = xstrdup("data.example.com"),
	    .ports = { 80, 443 }, .nports = 2 };
	return p;
}

static void
profile_free(struct ctl_profile *p)
{
	egress_free(p->egress, p->negress);
	free(p->name);
	free(p);
}

/* The list as "cidr/n:port,port host:port", for exact comparison. */
static char *
show(const struct ctl_egress *e, size_t n)
{
	char *s = xcalloc(1, 1024);

	for (size_t i = 0; i < n; i++) {
		if (e[i].host != NULL)
			snprintf(s + strlen(s), 1024 - strlen(s), "%s%s:",
			    i ? " " : "", e[i].host);
		else
			snprintf(s + strlen(s), 1024 - strlen(s), "%s%s/%d:",
			    i ? " " : "", e[i].cidr, e[i].prefix);
		for (size_t j = 0; j < e[i].nports; j++)
			snprintf(s + strlen(s), 1024 - strlen(s), "%s%d",
			    j ? "," : "", e[i].ports[j]);
	}
	return s;
}

/* egress_effective on network (JSON text, or NULL: absent): its list. */
static char *
effective(const struct ctl_profile *p, const char *network)
{
	json_t *net = network ? json_loads(network, 0, NULL) : NULL;
	struct ctl_egress *e = (struct ctl_egress *)1;
	struct k8s_error err;
	size_t n = 99;
	char *s;

	if (network != NULL && net == NULL)
		fail_msg("bad JSON in the test: %s", network);
	if (egress_effective(p, net, &e, &n, &err) != 0)
		fail_msg("%s: refused: %s", network, err.message);
	if (n == 0)
		assert_null(e);
	s = show(e, n);
	egress_free(e, n);
	json_decref(net);
	return s;
}

static void
test_narrowing_accepted(void **state)
{
	static const struct { const char *network, *want; } t[] = {
		/* Absent: the profile's list, as it is. */
		{ NULL, "10.20.0.0/16/16:5432,443 192.168.1.7/32/32:8080 10.0.0.0/8/8:80 pypi.org:443 data.example.com:80,443" },
		{ "{}", "10.20.0.0/16/16:5432,443 192.168.1.7/32/32:8080 10.0.0.0/8/8:80 pypi.org:443 data.example.com:80,443" },
		/* None. */
		{ "{\"egress\":[]}", "" },
		/* Fewer ports, a smaller CIDR, the very entry. */
		{ "{\"egress\":[{\"cidr\":\"10.20.0.0/16\",\"ports\":[443]}]}",
		  "10.20.0.0/16/16:443" },
		{ "{\"egress\":[{\"cidr\":\"10.20.30.0/24\",\"ports\":[5432]},"
		  "{\"cidr\":\"192.168.1.7/32\",\"ports\":[8080]}]}",
		  "10.20.30.0/24/24:5432 192.168.1.7/32/32:8080" },
		{ "{\"egress\":[{\"cidr\":\"10.20.0.5/32\",\"ports\":[443,5432]}]}",
		  "10.20.0.5/32/32:443,5432" },
		/* Port by port: 80 from 10.0.0.0/8, 443 from 10.20.0.0/16. */
		{ "{\"egress\":[{\"cidr\":\"10.20.1.0/24\",\"ports\":[80,443]}]}",
		  "10.20.1.0/24/24:80,443" },
		{ "{\"egress\":[{\"cidr\":\"10.99.0.0/16\",\"ports\":[80]}]}",
		  "10.99.0.0/16/16:80" },
		/* A host of the profile's, on fewer ports; any case, a root dot. */
		{ "{\"egress\":[{\"host\":\"data.example.com\",\"ports\":[443]}]}",
		  "data.example.com:443" },
		{ "{\"egress\":[{\"host\":\"PyPI.org.\",\"ports\":[443]},"
		  "{\"cidr\":\"10.20.0.0/16\",\"ports\":[5432]}]}",
		  "pypi.org:443 10.20.0.0/16/16:5432" },
	};
	struct ctl_profile *p = profile();

	(void)state;
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		char *got = effective(p, t[i].network);

		if (strcmp(got, t[i].want) != 0)
			fail_msg("%s: got '%s', want '%s'", t[i].network ?
			    t[i].network : "(absent)", got, t[i].want);
		free(got);
	}
	profile_free(p);
}

#define E(x)	"{\"egress\":[" x "]}"
static void
test_narrowing_refused(void **state)
{
	static const struct { const char *network, *want; } t[] = {
		/* Wider than the profile's, or another range, or port. */
		{ E("{\"cidr\":\"10.0.0.0/8\",\"ports\":[5432]}"),
		  "spec.network.egress[0]: 10.0.0.0/8 port 5432 is not in profile "
		  "python-net's egress" },
		{ E("{\"cidr\":\"10.20.0.0/16\",\"ports\":[443]},"
		    "{\"cidr\":\"10.0.0.0/8\",\"ports\":[80,5432]}"),
		  "spec.network.egress[1]: 10.0.0.0/8 port 5432 is not in profile "
		  "python-net's egress" },
		{ E("{\"cidr\":\"192.168.1.6/31\",\"ports\":[8080]}"),
		  "spec.network.egress[0]: 192.168.1.6/31 port 8080 is not in "
		  "profile python-net's egress" },
		{ E("{\"cidr\":\"11.0.0.0/8\",\"ports\":[80]}"),
		  "spec.network.egress[0]: 11.0.0.0/8 port 80 is not in profile "
		  "python-net's egress" },
		{ E("{\"cidr\":\"10.20.0.0/16\",\"ports\":[443,22]}"),
		  "spec.network.egress[0]: 10.20.0.0/16 port 22 is not in profile "
		  "python-net's egress" },
		{ E("{\"cidr\":\"0.0.0.0/0\",\"ports\":[80]}"),
		  "spec.network.egress[0]: 0.0.0.0/0 port 80 is not in profile "
		  "python-net's egress" },
		/* The config's rules for each entry. */
		{ E("{\"cidr\":\"10.20.0.1/16\",\"ports\":[443]}"),
		  "spec.network.egress[0].cidr: '10.20.0.1/16' has host bits set: "
		  "the network is 10.20.0.0/16" },
		{ E("{\"cidr\":\"10.20.0.0\",\"ports\":[443]}"),
		  "spec.network.egress[0].cidr: '10.20.0.0' is not an IPv4 CIDR "
		  "(a.b.c.d/n)" },
		{ E("{\"cidr\":\"10.20.0.0/016\",\"ports\":[443]}"),
		  "spec.network.egress[0].cidr: '10.20.0.0/016' is not an IPv4 CIDR "
		  "(a.b.c.d/n)" },
		{ E("{\"cidr\":\"10.20.0.0/16\\u0000\",\"ports\":[443]}"),
		  "spec.network.egress[0].cidr: '10.20.0.0/16' is not an IPv4 CIDR "
		  "(a.b.c.d/n)" },
		{ E("{\"cidr\":7,\"ports\":[443]}"),
		  "spec.network.egress[0].cidr: must be a string such as 10.20.0.0/16" },
		{ E("{\"ports\":[443]}"),
		  "spec.network.egress[0]: needs a cidr or a host" },
		{ E("{\"cidr\":\"10.20.0.0/16\",\"ports\":[]}"),
		  "spec.network.egress[0].ports: must be a list of 1 to 16 ports" },
		{ E("{\"cidr\":\"10.20.0.0/16\"}"),
		  "spec.network.egress[0].ports: must be a list of 1 to 16 ports" },
		{ E("{\"cidr\":\"10.20.0.0/16\",\"ports\":[1,2,3,4,5,6,7,8,9,10,11,"
		    "12,13,14,15,16,17]}"),
		  "spec.network.egress[0].ports: must be a list of 1 to 16 ports" },
		{ E("{\"cidr\":\"10.20.0.0/16\",\"ports\":[443,0]}"),
		  "spec.network.egress[0].ports[1]: not a port from 1 to 65535" },
		{ E("{\"cidr\":\"10.20.0.0/16\",\"ports\":[65536]}"),
		  "spec.network.egress[0].ports[0]: not a port from 1 to 65535" },
		{ E("{\"cidr\":\"10.20.0.0/16\",\"ports\":[\"443\"]}"),
		  "spec.network.egress[0].ports[0]: not a port from 1 to 65535" },
		{ E("{\"cidr\":\"10.20.0.0/16\",\"ports\":[443.0]}"),
		  "spec.network.egress[0].ports[0]: not a port from 1 to 65535" },
		{ E("{\"cidr\":\"10.20.0.0/16\",\"ports\":[443,5432,443]}"),
		  "spec.network.egress[0].ports[2]: 443 is given twice" },
		{ E("{\"cidr\":\"10.20.0.0/16\",\"ports\":[443]},"
		    "{\"cidr\":\"10.20.0.0/16\",\"ports\":[5432]}"),
		  "spec.network.egress[1].cidr: 10.20.0.0/16 is given twice (list "
		  "its ports in one entry)" },
		{ E("{\"cidr\":\"10.20.0.0/16\",\"ports\":[443],\"host\":\"pypi.org\"}"),
		  "spec.network.egress[0]: has both host and cidr: give one per entry" },
		{ E("{\"host\":\"pypi.org\",\"ports\":[443],\"sni\":\"x\"}"),
		  "spec.network.egress[0].sni: unknown field" },
		{ E("\"10.20.0.0/16\""),
		  "spec.network.egress[0]: must be an object with a cidr or a host, "
		  "and ports" },
		/* Host entries: only the profile's, on its ports; well formed. */
		{ E("{\"host\":\"files.pypi.org\",\"ports\":[443]}"),
		  "spec.network.egress[0]: files.pypi.org port 443 is not in profile "
		  "python-net's egress" },
		{ E("{\"host\":\"pypi.org\",\"ports\":[443, 80]}"),
		  "spec.network.egress[0]: pypi.org port 80 is not in profile "
		  "python-net's egress" },
		{ E("{\"host\":\"pypi.org\",\"ports\":[443]},"
		    "{\"host\":\"PYPI.ORG\",\"ports\":[443]}"),
		  "spec.network.egress[1].host: pypi.org is given twice (list its "
		  "ports in one entry)" },
		{ E("{\"host\":\"*.pypi.org\",\"ports\":[443]}"),
		  "spec.network.egress[0].host: '*.pypi.org' may hold only letters, "
		  "digits, '-' and '.' (no wildcard, no address)" },
		{ E("{\"host\":\"10.20.0.1\",\"ports\":[443]}"),
		  "spec.network.egress[0].host: '10.20.0.1' reads as an address: "
		  "give an address as a cidr" },
		{ E("{\"host\":\"pypi\",\"ports\":[443]}"),
		  "spec.network.egress[0].host: 'pypi' is not a fully qualified "
		  "name (at least two labels, such as pypi.org)" },
		{ E("{\"host\":\"pypi..org\",\"ports\":[443]}"),
		  "spec.network.egress[0].host: 'pypi..org' has an empty label or "
		  "one ending in '-'" },
		{ E("{\"host\":\"pypi.org\\u0000.evil\",\"ports\":[443]}"),
		  "spec.network.egress[0].host: holds a NUL" },
		{ E("{\"host\":443,\"ports\":[443]}"),
		  "spec.network.egress[0].host: must be a string such as pypi.org" },
		{ "{\"egress\":{\"cidr\":\"10.20.0.0/16\"}}",
		  "spec.network.egress: must be a list" },
		{ "{\"egress\":null}", "spec.network.egress: must be a list" },
		{ "{\"ingress\":[]}", "spec.network.ingress: unknown field" },
		{ "[]", "spec.network: must be an object" },
	};
	struct ctl_profile *p = profile();
	struct ctl_egress *e;
	struct k8s_error err;
	size_t n;

	(void)state;
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		json_t *net = json_loads(t[i].network, JSON_ALLOW_NUL, NULL);

		if (net == NULL)
			fail_msg("bad JSON in the test: %s", t[i].network);
		e = (struct ctl_egress *)1;
		n = 99;
		k8s_error_clear(&err);
		if (egress_effective(p, net, &e, &n, &err) != K8S_EINVAL)
			fail_msg("%s: accepted", t[i].network);
		if (strcmp(err.message, t[i].want) != 0)
			fail_msg("%s: got '%s', want '%s'", t[i].network,
			    err.message, t[i].want);
		assert_null(e);
		assert_int_equal(n, 0);
		json_decref(net);
	}
	/* 33 entries: one more than the CRD's maxItems. */
	{
		json_t *net = json_pack("{s:[]}", "egress");

		for (int i = 0; i < 33; i++)
			json_array_append_new(json_object_get(net, "egress"),
			    json_pack("{s:s, s:[i]}", "cidr", "10.20.0.0/16",
			    "ports", 443));
		assert_int_equal(egress_effective(p, net, &e, &n, &err), K8S_EINVAL);
		assert_string_equal(err.message, "spec.network.egress: at most 32 "
		    "entries, not 33");
		json_array_remove(json_object_get(net, "egress"), 32);
		/* 32 are read; the second is the first's CIDR again. */
		assert_int_equal(egress_effective(p, net, &e, &n, &err), K8S_EINVAL);
		assert_string_equal(err.message, "spec.network.egress[1].cidr: "
		    "10.20.0.0/16 is given twice (list its ports in one entry)");
		json_decref(net);
	}
	profile_free(p);
}

/* A profile without egress: only none may be asked for. */
static void
test_narrowing_no_egress(void **state)
{
	struct ctl_profile p = { .name = "python" };
	json_t *net = json_loads(E("{\"cidr\":\"10.20.0.0/16\",\"ports\":[443]}"),
	    0, NULL);
	struct ctl_egress *e;
	struct k8s_error err;
	size_t n;
	char *got;

	(void)state;
	assert_int_equal(egress_effective(&p, net, &e, &n, &err), K8S_EINVAL);
	assert_string_equal(err.message, "spec.network.egress: profile python has "
	    "no egress");
	json_decref(net);
	got = effective(&p, "{\"egress\":[]}");
	assert_string_equal(got, "");
	free(got);
	got = effective(&p, NULL);
	assert_string_equal(got, "");
	free(got);
}

/* egress_spec_parse alone: the shape, with or without egress given. */
static void
test_spec_parse(void **state)
{
	json_t *net = json_loads(E("{\"cidr\":\"8.8.8.0/24\",\"ports\":[53,853]}"),
	    0, NULL), *empty = json_object();
	struct ctl_egress *e;
	struct k8s_error err;
	size_t n;
	int given;
	char *got;

	(void)state;
	assert_int_equal(egress_spec_parse(net, &e, &n, &given, &err), 0);
	assert_int_equal(given, 1);
	got = show(e, n);
	assert_string_equal(got, "8.8.8.0/24/24:53,853");
	free(got);
	egress_free(e, n);
	assert_int_equal(egress_spec_parse(empty, &e, &n, &given, &err), 0);
	assert_int_equal(given, 0);
	assert_null(e);
	assert_int_equal(egress_spec_parse(NULL, &e, &n, &given, &err), 0);
	assert_int_equal(given, 0);
	json_decref(net);
	json_decref(empty);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_narrowing_accepted),
		cmocka_unit_test(test_narrowing_refused),
		cmocka_unit_test(test_narrowing_no_egress),
		cmocka_unit_test(test_spec_parse),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
