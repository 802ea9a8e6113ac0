/*
 * Unit tests: execution/egress_grant.c, the ConfigMap the controller
 * publishes per execution and the egress proxy reads: its exact shape,
 * the round trip, and each bad field refused by name.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "egress_grant.h"
#include "xmalloc.h"

static const struct ctl_egress entries[] = {
	{ .host = "allowed.test", .ports = { 8080, 8443 }, .nports = 2 },
	{ .cidr = "10.20.0.0/16", .addr = 0x0a140000, .prefix = 16,
	  .ports = { 5432 }, .nports = 1 },
	{ .host = "db.example.com", .ports = { 5432 }, .nports = 1 },
};

static json_t *
grant(const char *pod_ip)
{
	return egress_grant_configmap("airlock-system", "0b8f-uid-a", "team-a",
	    "run-x7k2p", pod_ip, entries, 3);
}

static void
test_configmap_shape(void **state)
{
	json_t *cm = grant("10.244.0.7");
	char *s = json_dumps(cm, JSON_COMPACT | JSON_SORT_KEYS);

	(void)state;
	assert_string_equal(s, "{\"apiVersion\":\"v1\",\"data\":{\"hosts\":"
	    "\"[{\\\"host\\\":\\\"allowed.test\\\",\\\"ports\\\":[8080,8443]},"
	    "{\\\"host\\\":\\\"db.example.com\\\",\\\"ports\\\":[5432]}]\","
	    "\"name\":\"run-x7k2p\",\"namespace\":\"team-a\",\"podIP\":"
	    "\"10.244.0.7\",\"uid\":\"0b8f-uid-a\"},\"kind\":\"ConfigMap\","
	    "\"metadata\":{\"labels\":{\"airlock.dev/execution-uid\":"
	    "\"0b8f-uid-a\",\"app.kubernetes.io/component\":\"egress-grant\","
	    "\"app.kubernetes.io/managed-by\":\"airlock-controller\"},\"name\":"
	    "\"airlock-egress-0b8f-uid-a\",\"namespace\":\"airlock-system\"}}");
	free(s);
	json_decref(cm);
	/* No address yet: no podIP key at all. */
	cm = grant(NULL);
	assert_null(json_object_get(json_object_get(cm, "data"), "podIP"));
	json_decref(cm);
}

static void
test_round_trip(void **state)
{
	struct egress_grant g;
	struct k8s_error err;
	json_t *cm = grant("10.244.0.7");

	(void)state;
	assert_int_equal(egress_grant_parse(cm, &g, &err), 0);
	assert_string_equal(g.uid, "0b8f-uid-a");
	assert_string_equal(g.ns, "team-a");
	assert_string_equal(g.name, "run-x7k2p");
	assert_string_equal(g.pod_ip, "10.244.0.7");
	assert_int_equal(g.addr, 0x0af40007);
	assert_int_equal(g.nhosts, 2);
	assert_string_equal(g.hosts[0].host, "allowed.test");
	assert_null(g.hosts[0].cidr);
	assert_int_equal(g.hosts[0].nports, 2);
	assert_int_equal(g.hosts[0].ports[0], 8080);
	assert_int_equal(g.hosts[0].ports[1], 8443);
	assert_string_equal(g.hosts[1].host, "db.example.com");
	assert_int_equal(g.hosts[1].nports, 1);
	assert_int_equal(g.hosts[1].ports[0], 5432);
	egress_grant_free(&g);
	assert_null(g.uid);
	egress_grant_free(&g);		/* twice is fine */
	json_decref(cm);
	cm = grant(NULL);
	assert_int_equal(egress_grant_parse(cm, &g, &err), 0);
	assert_string_equal(g.pod_ip, "");
	assert_int_equal(g.addr, 0);
	egress_grant_free(&g);
	json_decref(cm);
}

static void
test_host_ok(void **state)
{
	static const struct { const char *s; int ok; } cases[] = {
		{ "allowed.test", 1 }, { "a", 1 }, { "x-1.example.com", 1 },
		{ "api.0x1g", 1 }, { "a.b9", 1 }, { "1a.test", 1 },
		{ "", 0 }, { "Allowed.test", 0 }, { "allowed.test.", 0 },
		{ ".test", 0 }, { "a..b", 0 }, { "-a.test", 0 },
		{ "a-.test", 0 }, { "a_b.test", 0 }, { "127.0.0.1", 0 },
		{ "2130706434", 0 }, { "a.0x7f", 0 }, { "a.b.09", 0 },
		{ "host:80", 0 }, { "a b", 0 },
	};
	char big[300];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		if (egress_grant_host_ok(cases[i].s, strlen(cases[i].s)) !=
		    cases[i].ok)
			fail_msg("%s: expected %d", cases[i].s, cases[i].ok);
	}
	/* A 64-byte label; then four labels of 63: 253 bytes, then 255. */
	memset(big, 'a', sizeof(big));
	assert_int_equal(egress_grant_host_ok(big, 64), 0);
	assert_int_equal(egress_grant_host_ok(big, 63), 1);
	for (int i = 0; i < 3; i++)
		big[63 + 64 * i] = '.';
	assert_int_equal(egress_grant_host_ok(big, 253), 1);
	assert_int_equal(egress_grant_host_ok(big, 255), 0);
	/* A NUL inside is never a name. */
	assert_int_equal(egress_grant_host_ok("a\0b", 3), 0);
}

/* The grant with data.KEY set to v (stolen; NULL deletes it). */
static json_t *
with(const char *key, json_t *v)
{
	json_t *cm = grant("10.244.0.7");

	if (v == NULL)
		json_object_del(json_object_get(cm, "data"), key);
	else
		json_object_set_new(json_object_get(cm, "data"), key, v);
	return cm;
}

static void
refused(json_t *cm, const char *message)
{
	struct egress_grant g;
	struct k8s_error err;

	assert_int_equal(egress_grant_parse(cm, &g, &err), K8S_EINVAL);
	assert_string_equal(err.message, message);
	assert_null(g.uid);
	assert_null(g.hosts);
	json_decref(cm);
}

static json_t *
hosts(const char *text)
{
	return with("hosts", json_string(text));
}

static void
test_bad_fields(void **state)
{
	char big[EGRESS_GRANT_HOSTS_TEXT_MAX + 8], many[2048];
	size_t off;

	(void)state;
	refused(with("uid", NULL), "egress grant: data.uid: must be a string");
	refused(with("uid", json_string("UPPER")), "egress grant: data.uid: "
	    "must be 1 to 64 of [a-z0-9-]");
	refused(with("uid", json_string("")), "egress grant: data.uid: "
	    "must be 1 to 64 of [a-z0-9-]");
	memset(big, 'a', 65);
	big[65] = '\0';
	refused(with("uid", json_string(big)), "egress grant: data.uid: "
	    "must be 1 to 64 of [a-z0-9-]");
	refused(with("namespace", json_integer(1)), "egress grant: "
	    "data.namespace: must be a string");
	refused(with("namespace", json_string("Team")), "egress grant: "
	    "data.namespace: must be a lowercase DNS name of at most 253 bytes");
	refused(with("name", json_string("a/b")), "egress grant: "
	    "data.name: must be a lowercase DNS name of at most 253 bytes");
	refused(with("podIP", json_string("10.244.0.07")), "egress grant: "
	    "data.podIP: must be a dotted IPv4 address");
	refused(with("podIP", json_string("::1")), "egress grant: "
	    "data.podIP: must be a dotted IPv4 address");
	refused(with("podIP", json_string("10.244.0.7 ")), "egress grant: "
	    "data.podIP: must be a dotted IPv4 address");
	refused(with("extra", json_string("x")), "egress grant: data: has "
	    "an unknown key");
	refused(with("hosts", NULL), "egress grant: data.hosts: must be a "
	    "string of at most 16384 bytes");
	refused(hosts("[{\"host\":\"a.test\",\"ports\":[80]}"), "egress "
	    "grant: data.hosts: must be a JSON list of at most 32 entries");
	refused(hosts("{}"), "egress grant: data.hosts: must be a JSON list "
	    "of at most 32 entries");
	refused(hosts("[{\"host\":\"a.test\",\"host\":\"b.test\",\"ports\":"
	    "[80]}]"), "egress grant: data.hosts: must be a JSON list of at "
	    "most 32 entries");
	refused(hosts("[7]"), "egress grant: data.hosts[0]: must be an object "
	    "with host and ports");
	refused(hosts("[{\"host\":\"a.test\",\"ports\":[80],\"cidr\":\"x\"}]"),
	    "egress grant: data.hosts[0]: unknown field");
	refused(hosts("[{\"host\":\"a.test\",\"ports\":[80]},{\"host\":"
	    "\"10.0.0.1\",\"ports\":[80]}]"), "egress grant: data.hosts[1]."
	    "host: must be a lowercase host name");
	refused(hosts("[{\"host\":\"a.test\",\"ports\":[80]},{\"host\":"
	    "\"a.test\",\"ports\":[81]}]"), "egress grant: data.hosts[1].host: "
	    "given twice");
	refused(hosts("[{\"host\":\"a.test\",\"ports\":[]}]"), "egress grant: "
	    "data.hosts[0].ports: must be a list of 1 to 16 ports");
	refused(hosts("[{\"host\":\"a.test\",\"ports\":[0]}]"), "egress grant: "
	    "data.hosts[0].ports[0]: not a port from 1 to 65535");
	refused(hosts("[{\"host\":\"a.test\",\"ports\":[80,65536]}]"),
	    "egress grant: data.hosts[0].ports[1]: not a port from 1 to 65535");
	refused(hosts("[{\"host\":\"a.test\",\"ports\":[80,80]}]"),
	    "egress grant: data.hosts[0].ports[1]: 80 is given twice");
	/* 33 entries; then text past the cap. */
	off = (size_t)snprintf(many, sizeof(many), "[");
	for (int i = 0; i < 33; i++)
		off += (size_t)snprintf(many + off, sizeof(many) - off,
		    "%s{\"host\":\"h%d.test\",\"ports\":[80]}", i ? "," : "", i);
	snprintf(many + off, sizeof(many) - off, "]");
	refused(hosts(many), "egress grant: data.hosts: must be a JSON list "
	    "of at most 32 entries");
	memset(big, ' ', sizeof(big) - 1);
	big[0] = '[';
	big[sizeof(big) - 2] = ']';
	big[sizeof(big) - 1] = '\0';
	refused(hosts(big), "egress grant: data.hosts: must be a string of at "
	    "most 16384 bytes");
	/* Not an object; then a name that is not the uid's. */
	refused(json_string("x"), "egress grant: data: must be an object");
	{
		json_t *cm = grant(NULL);

		json_object_set_new(json_object_get(cm, "metadata"), "name",
		    json_string("airlock-egress-other"));
		refused(cm, "egress grant: metadata.name: must be "
		    "airlock-egress- followed by data.uid");
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_configmap_shape),
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_host_ok),
		cmocka_unit_test(test_bad_fields),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
