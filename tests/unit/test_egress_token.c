/*
 * Unit tests: execution/egress_token.c, an execution's pass through the
 * egress proxy: made by the controller, checked by the proxy's helper.
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

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "base64.h"
#include "egress_token.h"
#include "xmalloc.h"

static const unsigned char key[] = "0123456789abcdef0123456789abcdef";
#define KEYLEN	32
#define NOW	1700000000LL

static const struct ctl_egress list[] = {
	{ .cidr = "10.20.0.0/16", .addr = 0x0a140000, .prefix = 16,
	  .ports = { 5432 }, .nports = 1 },
	{ .host = "pypi.org", .ports = { 443 }, .nports = 1 },
	{ .host = "data.example.com", .ports = { 80, 443 }, .nports = 2 },
};

/* The pass for JSON claims text, signed with k: user new, pass filled. */
static char *
forge(const char *claims, const unsigned char *k, char pass[65])
{
	size_t len;
	char *u = base64_encode(claims, strlen(claims), &len);
	unsigned char mac[32];
	unsigned int maclen = 32;

	for (size_t i = 0; i < len; i++)
		u[i] = u[i] == '+' ? '-' : u[i] == '/' ? '_' : u[i];
	while (len > 0 && u[len - 1] == '=')
		u[--len] = '\0';
	HMAC(EVP_sha256(), k, KEYLEN, (unsigned char *)u, len, mac, &maclen);
	for (int i = 0; i < 32; i++)
		snprintf(pass + 2 * i, 3, "%02x", mac[i]);
	return u;
}

/* Check user/pass at NOW: why, or "ok" with *c filled. */
static const char *
check(const char *user, const char *pass, struct egress_claims *c)
{
	const char *why;

	if (egress_token_check(user, strlen(user), pass, strlen(pass), NOW, key,
	    KEYLEN, c, &why) == 0)
		return "ok";
	assert_non_null(why);
	assert_null(c->uid);
	assert_null(c->hosts);
	return why;
}

/* Made, then checked: the host entries alone, and who. */
static void
test_round_trip(void **state)
{
	struct egress_claims c;
	struct k8s_error err;
	char *user, pass[65];

	(void)state;
	assert_int_equal(egress_token_make(list, 3, "0b9c-11", "team-a",
	    "run.x", NOW + 60, key, KEYLEN, &user, pass, &err), 0);
	assert_int_equal(strlen(pass), 64);
	assert_int_equal(strspn(user, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnop"
	    "qrstuvwxyz0123456789-_"), strlen(user));
	assert_string_equal(check(user, pass, &c), "ok");
	assert_string_equal(c.uid, "0b9c-11");
	assert_string_equal(c.ns, "team-a");
	assert_string_equal(c.name, "run.x");
	assert_int_equal(c.exp, NOW + 60);
	assert_int_equal(c.nhosts, 2);
	assert_string_equal(c.hosts[0].host, "pypi.org");
	assert_null(c.hosts[0].cidr);
	assert_int_equal(c.hosts[1].nports, 2);
	assert_int_equal(c.hosts[1].ports[1], 443);
	egress_claims_free(&c);
	free(user);
	/* No host entry, or no key: no pass. */
	assert_int_equal(egress_token_make(list, 1, "u", "n", "x", NOW, key,
	    KEYLEN, &user, pass, &err), K8S_EINVAL);
	assert_null(user);
	assert_int_equal(egress_token_make(list, 3, "u", "n", "x", NOW, key,
	    KEYLEN - 1, &user, pass, &err), K8S_EINVAL);
}

/* Anything changed, another key, or late: refused, saying which. */
static void
test_refused(void **state)
{
	struct egress_claims c;
	struct k8s_error err;
	char *user, pass[65], bad[65];
	static const unsigned char other[] = "ffffffffffffffffffffffffffffffff";

	(void)state;
	assert_int_equal(egress_token_make(list, 3, "0b9c-11", "team-a", "run",
	    NOW + 60, key, KEYLEN, &user, pass, &err), 0);
	memcpy(bad, pass, 65);
	bad[0] = bad[0] == '0' ? '1' : '0';
	assert_string_equal(check(user, bad, &c), "bad-signature");
	assert_string_equal(check(user, "00", &c), "malformed");
	user[5] = user[5] == 'A' ? 'B' : 'A';
	assert_string_equal(check(user, pass, &c), "bad-signature");
	free(user);
	assert_int_equal(egress_token_make(list, 3, "u", "team-a", "run", NOW,
	    key, KEYLEN, &user, pass, &err), 0);
	assert_string_equal(check(user, pass, &c), "expired");
	free(user);
	assert_int_equal(egress_token_make(list, 3, "u", "team-a", "run", NOW + 1,
	    other, KEYLEN, &user, pass, &err), 0);
	assert_string_equal(check(user, pass, &c), "bad-signature");
	free(user);
	assert_string_equal(check("", pass, &c), "malformed");
}

/*
 * Signed with the key, but not what the controller writes: every field
 * and cap checked all the same.
 */
static void
test_claims_strict(void **state)
{
	static const char *const bad[] = {
		"[]",
		"{\"v\":2,\"uid\":\"u\",\"ns\":\"n\",\"name\":\"x\",\"exp\":1800000000,"
		"\"hosts\":[{\"host\":\"pypi.org\",\"ports\":[443]}]}",
		"{\"v\":1,\"uid\":\"u\",\"ns\":\"n\",\"name\":\"x\",\"exp\":1800000000,"
		"\"hosts\":[{\"host\":\"pypi.org\",\"ports\":[443]}],\"more\":1}",
		"{\"v\":1,\"uid\":\"U\",\"ns\":\"n\",\"name\":\"x\",\"exp\":1800000000,"
		"\"hosts\":[{\"host\":\"pypi.org\",\"ports\":[443]}]}",
		"{\"v\":1,\"uid\":\"u\",\"ns\":\"n\",\"name\":\"x\",\"exp\":\"1800000000\","
		"\"hosts\":[{\"host\":\"pypi.org\",\"ports\":[443]}]}",
		"{\"v\":1,\"uid\":\"u\",\"ns\":\"n\",\"name\":\"x\",\"exp\":1800000000,"
		"\"hosts\":[{\"cidr\":\"10.0.0.0/8\",\"ports\":[443]}]}",
		"{\"v\":1,\"uid\":\"u\",\"ns\":\"n\",\"name\":\"x\",\"exp\":1800000000,"
		"\"hosts\":[]}",
		"{\"v\":1,\"uid\":\"u\",\"ns\":\"n\",\"name\":\"x\",\"exp\":1800000000,"
		"\"hosts\":[{\"host\":\"10.0.0.1\",\"ports\":[443]}]}",
		"{\"v\":1,\"uid\":\"u\",\"ns\":\"n\",\"name\":\"x\",\"exp\":1800000000,"
		"\"hosts\":[{\"host\":\"pypi.org\",\"ports\":[0]}]}",
		"{\"v\":1,\"uid\":\"u\",\"ns\":\"n\",\"name\":\"x\",\"uid\":\"v\","
		"\"exp\":1800000000,\"hosts\":[{\"host\":\"pypi.org\",\"ports\":[443]}]}",
		"{\"v\":1,\"uid\":\"u\",\"ns\":\"n\",\"name\":\"x\",\"exp\":1800000000,"
		"\"hosts\":[{\"host\":\"pypi.org\\u0000x\",\"ports\":[443]}]}",
	};
	static const char good[] = "{\"v\":1,\"uid\":\"u\",\"ns\":\"n\",\"name\":"
	    "\"x\",\"exp\":1800000000,\"hosts\":[{\"host\":\"pypi.org\","
	    "\"ports\":[443]}]}";
	struct egress_claims c;
	char *user, pass[65];

	(void)state;
	user = forge(good, key, pass);
	assert_string_equal(check(user, pass, &c), "ok");
	egress_claims_free(&c);
	free(user);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *why;

		user = forge(bad[i], key, pass);
		why = check(user, pass, &c);
		if (strcmp(why, "malformed") != 0)
			fail_msg("claims %zu: %s, want malformed", i, why);
		free(user);
	}
	/* Not base64url, though signed. */
	user = xstrdup("ab+c");
	{
		unsigned char mac[32];
		unsigned int maclen = 32;

		HMAC(EVP_sha256(), key, KEYLEN, (unsigned char *)user, 4, mac,
		    &maclen);
		for (int i = 0; i < 32; i++)
			snprintf(pass + 2 * i, 3, "%02x", mac[i]);
	}
	assert_string_equal(check(user, pass, &c), "malformed");
	free(user);
}

/* The key's file: its bytes, a newline dropped, 32 to 4096 of them. */
static void
test_key_load(void **state)
{
	char path[] = "/tmp/airlock-key-XXXXXX";
	int fd = mkstemp(path);
	unsigned char *k;
	struct k8s_error err;
	size_t n;

	(void)state;
	assert_true(fd >= 0);
	assert_int_equal(write(fd, key, KEYLEN), KEYLEN);
	assert_int_equal(write(fd, "\n", 1), 1);
	assert_int_equal(egress_key_load(path, &k, &n, &err), 0);
	assert_int_equal(n, KEYLEN);
	assert_memory_equal(k, key, KEYLEN);
	free(k);
	assert_int_equal(ftruncate(fd, 31), 0);
	assert_int_equal(egress_key_load(path, &k, &n, &err), K8S_EINVAL);
	assert_non_null(strstr(err.message, "31 bytes, not 32 to 4096"));
	assert_null(k);
	close(fd);
	unlink(path);
	assert_int_equal(egress_key_load(path, &k, &n, &err), K8S_EINVAL);
	assert_non_null(strstr(err.message, "No such file or directory"));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_claims_strict),
		cmocka_unit_test(test_key_load),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
