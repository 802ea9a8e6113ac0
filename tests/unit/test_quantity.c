/* Unit tests: operator/quantity.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "k8s_error.h"
#include "quantity.h"

#define TOOBIG	K8S_ETOOBIG, 0

/* One input: the milli result (code, value), then the unit result. */
struct qcase {
	const char	*in;
	int		 milli_rc;
	int64_t		 milli;
	int		 unit_rc;
	int64_t		 unit;
};

static const struct qcase valid[] = {
	{ "0", 0, 0, 0, 0 },
	{ "-0", 0, 0, 0, 0 },
	{ "+0", 0, 0, 0, 0 },
	{ "0.0", 0, 0, 0, 0 },
	{ "500m", 0, 500, 0, 1 },
	{ "1", 0, 1000, 0, 1 },
	{ "2", 0, 2000, 0, 2 },
	{ "1.5", 0, 1500, 0, 2 },
	{ "0.1m", 0, 1, 0, 1 },
	{ "1m", 0, 1, 0, 1 },
	{ "100m", 0, 100, 0, 1 },
	{ "1000m", 0, 1000, 0, 1 },
	{ "1001m", 0, 1001, 0, 2 },
	{ "1.0001m", 0, 2, 0, 1 },
	{ "1Ki", 0, 1024000, 0, 1024 },
	{ "0.5Ki", 0, 512000, 0, 512 },
	{ "64Mi", 0, INT64_C(67108864000), 0, 67108864 },
	{ "100Mi", 0, INT64_C(104857600000), 0, 104857600 },
	{ "256Mi", 0, INT64_C(268435456000), 0, 268435456 },
	{ "1Gi", 0, INT64_C(1073741824000), 0, 1073741824 },
	{ "1.5Gi", 0, INT64_C(1610612736000), 0, 1610612736 },
	{ "2Gi", 0, INT64_C(2147483648000), 0, INT64_C(2147483648) },
	{ "8Gi", 0, INT64_C(8589934592000), 0, INT64_C(8589934592) },
	{ "1Ti", 0, INT64_C(1099511627776000), 0, INT64_C(1099511627776) },
	{ "1Pi", 0, INT64_C(1125899906842624000), 0,
	    INT64_C(1125899906842624) },
	{ "1Ei", TOOBIG, 0, INT64_C(1152921504606846976) },
	{ "1.5Ei", TOOBIG, 0, INT64_C(1729382256910270464) },
	{ "7Ei", TOOBIG, 0, INT64_C(8070450532247928832) },
	{ "8Ei", TOOBIG, TOOBIG },
	{ "1n", 0, 1, 0, 1 },
	{ "1u", 0, 1, 0, 1 },
	{ "1000000u", 0, 1000, 0, 1 },
	{ "1500000n", 0, 2, 0, 1 },
	{ "1k", 0, 1000000, 0, 1000 },
	{ "1M", 0, INT64_C(1000000000), 0, 1000000 },
	{ "1G", 0, INT64_C(1000000000000), 0, 1000000000 },
	{ "1T", 0, INT64_C(1000000000000000), 0, INT64_C(1000000000000) },
	{ "1P", 0, INT64_C(1000000000000000000), 0,
	    INT64_C(1000000000000000) },
	{ "1E", TOOBIG, 0, INT64_C(1000000000000000000) },
	{ "1e3", 0, 1000000, 0, 1000 },
	{ "1E3", 0, 1000000, 0, 1000 },
	{ "1e+3", 0, 1000000, 0, 1000 },
	{ "1E-3", 0, 1, 0, 1 },
	{ "1.5e3", 0, 1500000, 0, 1500 },
	{ "12e-1", 0, 1200, 0, 2 },
	{ "1e-999", 0, 1, 0, 1 },
	{ "0e999", 0, 0, 0, 0 },
	{ "1e999", TOOBIG, TOOBIG },
	{ "1.", 0, 1000, 0, 1 },
	{ ".5", 0, 500, 0, 1 },
	{ "0001", 0, 1000, 0, 1 },
	{ "1.000", 0, 1000, 0, 1 },
	{ "0.001", 0, 1, 0, 1 },
	{ "0.000000001", 0, 1, 0, 1 },
	{ "0.0000000000000000000000000000000000000000000000000000000000001",
	    0, 1, 0, 1 },
	{ "12345678901234567890123e-20", 0, 123457, 0, 124 },
	{ "123456789", 0, INT64_C(123456789000), 0, 123456789 },
	{ "9223372036854775", 0, INT64_C(9223372036854775000), 0,
	    INT64_C(9223372036854775) },
	{ "9223372036854775.807", 0, INT64_MAX, 0, INT64_C(9223372036854776) },
	{ "9223372036854776", TOOBIG, 0, INT64_C(9223372036854776) },
	{ "9223372036854775807", TOOBIG, 0, INT64_MAX },
	{ "9223372036854775808", TOOBIG, TOOBIG },
	{ "-1", 0, -1000, 0, -1 },
	{ "+1", 0, 1000, 0, 1 },
	{ "-1.5", 0, -1500, 0, -1 },
	{ "-100m", 0, -100, 0, 0 },
	{ "-0.1m", 0, 0, 0, 0 },
	{ "-1Ki", 0, -1024000, 0, -1024 },
	{ "-9223372036854775.808", 0, INT64_MIN, 0,
	    INT64_C(-9223372036854775) },
	{ "-9223372036854775.809", TOOBIG, 0, INT64_C(-9223372036854775) },
	{ "-9223372036854775808", TOOBIG, 0, INT64_MIN },
	{ "-9223372036854775809", TOOBIG, TOOBIG },
};

static const char *const malformed[] = {
	"", " ", " 1", "1 ", "1\n", "1.2.3", "Mi", "1 Mi", "1Mb", "--1", "+-1",
	"-", "+", ".", ".m", "e3", "1e", "1e+", "1E-", "1ee3", "1e3.5", "1e3m",
	"1K", "1KI", "1KiB", "1mi", "1Ki2", "1m1", "abc", "1,5", "0x10",
	"1_000", "inf", "NaN", "1\xd9\xa1", "1e99999999999", "1e2147483648",
	"1e-2147483649", "1e-21474836480", "1\tm",
	/* 65 characters: one past the cap. */
	"00000000000000000000000000000000000000000000000000000000000000001",
};

static void
test_valid(void **state)
{
	struct k8s_error e;
	int64_t v;
	size_t i;
	int rc;

	(void)state;
	assert_true(sizeof(valid) / sizeof(valid[0]) >= 40);
	for (i = 0; i < sizeof(valid) / sizeof(valid[0]); i++) {
		const struct qcase *c = &valid[i];

		k8s_error_clear(&e);
		v = 424242;
		rc = quantity_parse_milli(c->in, &v, &e);
		if (rc != c->milli_rc || (rc == 0 && v != c->milli) ||
		    (rc != 0 && v != 424242)) {
			print_error("milli '%s': rc %d value %lld (%s); want "
			    "%d %lld\n", c->in, rc, (long long)v, e.message,
			    c->milli_rc, (long long)c->milli);
			fail();
		}
		if (rc != 0) {
			assert_int_equal(e.code, K8S_ETOOBIG);
			assert_non_null(strstr(e.message, c->in));
			assert_non_null(strstr(e.message, "milli-units"));
		}
		k8s_error_clear(&e);
		v = 424242;
		rc = quantity_parse(c->in, &v, &e);
		if (rc != c->unit_rc || (rc == 0 && v != c->unit) ||
		    (rc != 0 && v != 424242)) {
			print_error("unit '%s': rc %d value %lld (%s); want "
			    "%d %lld\n", c->in, rc, (long long)v, e.message,
			    c->unit_rc, (long long)c->unit);
			fail();
		}
		if (rc != 0) {
			assert_int_equal(e.code, K8S_ETOOBIG);
			assert_non_null(strstr(e.message, c->in));
		}
	}
}

static void
test_malformed(void **state)
{
	struct k8s_error e;
	char want[128];
	int64_t v;
	size_t i;

	(void)state;
	assert_true(sizeof(malformed) / sizeof(malformed[0]) >= 15);
	for (i = 0; i < sizeof(malformed) / sizeof(malformed[0]); i++) {
		const char *in = malformed[i];
		int printable = strcspn(in, "\t\n\x80\xd9") == strlen(in);

		/* The quoted input is in the message (capped, if long). */
		snprintf(want, sizeof(want), "quantity '%.64s%s'", in,
		    strlen(in) > QUANTITY_MAX_LEN ? "..." : "");
		k8s_error_clear(&e);
		v = 424242;
		if (quantity_parse_milli(in, &v, &e) != K8S_EINVAL ||
		    (printable && strstr(e.message, want) == NULL)) {
			print_error("milli '%s': code %d message '%s'\n", in,
			    e.code, e.message);
			fail();
		}
		assert_int_equal(e.code, K8S_EINVAL);
		assert_int_equal(v, 424242);
		k8s_error_clear(&e);
		if (quantity_parse(in, &v, &e) != K8S_EINVAL ||
		    (printable && strstr(e.message, want) == NULL)) {
			print_error("unit '%s': code %d message '%s'\n", in,
			    e.code, e.message);
			fail();
		}
		assert_int_equal(v, 424242);
	}
}

/* Each kind of mistake is named; unprintable bytes are not echoed. */
static void
test_messages(void **state)
{
	static const struct { const char *in, *msg; } cases[] = {
		{ "", "quantity '' is not valid: it is empty" },
		{ "Mi", "quantity 'Mi' is not valid: it has no digits" },
		{ "1Mb", "quantity '1Mb' is not valid: unknown suffix 'Mb'" },
		{ "1.2.3", "quantity '1.2.3' is not valid: unknown suffix "
		    "'.3'" },
		{ "1e+", "quantity '1e+' is not valid: the exponent has no "
		    "digits" },
		{ "1e2147483648", "quantity '1e2147483648' is not valid: the "
		    "exponent is out of range" },
		{ "1\n", "quantity '1?' is not valid: unknown suffix '?'" },
		{ "9223372036854775808", "quantity '9223372036854775808' is "
		    "out of range: it does not fit in 64 bits as units" },
	};
	struct k8s_error e;
	int64_t v;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		k8s_error_clear(&e);
		assert_int_not_equal(quantity_parse(cases[i].in, &v, &e), 0);
		assert_string_equal(e.message, cases[i].msg);
	}
	k8s_error_clear(&e);
	assert_int_equal(quantity_parse(NULL, &v, &e), K8S_EINVAL);
	assert_string_equal(e.message, "quantity is missing");
	/* The exponent limit is ParseQuantity's int32, not ours. */
	assert_int_equal(quantity_parse_milli("0e2147483647", &v, &e), 0);
	assert_int_equal(v, 0);
	assert_int_equal(quantity_parse_milli("1e-2147483647", &v, &e), 0);
	assert_int_equal(v, 1);
	assert_int_equal(quantity_parse("1e-2147483648", &v, &e), 0);
	assert_int_equal(v, 1);
	/* A NULL error struct is allowed. */
	assert_int_equal(quantity_parse("x", &v, NULL), K8S_EINVAL);
	assert_int_equal(quantity_parse("1e30", &v, NULL), K8S_ETOOBIG);
}

/* Exactly at the cap is fine; the digits all count. */
static void
test_length_cap(void **state)
{
	char s[QUANTITY_MAX_LEN + 2];
	int64_t v;

	(void)state;
	memset(s, '0', QUANTITY_MAX_LEN);
	s[QUANTITY_MAX_LEN - 1] = '7';
	s[QUANTITY_MAX_LEN] = '\0';
	assert_int_equal(quantity_parse_milli(s, &v, NULL), 0);
	assert_int_equal(v, 7000);
	/* 64 significant digits times 2^60 still computes exactly. */
	memset(s, '0', QUANTITY_MAX_LEN);
	s[0] = '.';
	s[QUANTITY_MAX_LEN - 3] = '1';
	memcpy(s + QUANTITY_MAX_LEN - 2, "Ei", 3);
	assert_int_equal(quantity_parse(s, &v, NULL), 0);
	assert_int_equal(v, 1);
	memset(s, '9', QUANTITY_MAX_LEN);
	memcpy(s + QUANTITY_MAX_LEN - 2, "Ei", 3);
	assert_int_equal(quantity_parse(s, &v, NULL), K8S_ETOOBIG);
	s[QUANTITY_MAX_LEN] = 'x';
	s[QUANTITY_MAX_LEN + 1] = '\0';
	assert_int_equal(quantity_parse(s, &v, NULL), K8S_EINVAL);
}

/* Plain integers in a range: flags, annotations. */
static void
test_parse_int(void **state)
{
	static const char *const bad[] = { "", " ", "x", "1x", "1 ", "0x10", "1.0",
	    "3601", "0", "-1", "99999999999999999999" };
	long long v = 7;

	(void)state;
	assert_int_equal(quantity_parse_int("1", 1, 3600, &v), 0);
	assert_int_equal(v, 1);
	assert_int_equal(quantity_parse_int("3600", 1, 3600, &v), 0);
	assert_int_equal(v, 3600);
	assert_int_equal(quantity_parse_int("-5", -10, 10, &v), 0);
	assert_int_equal(v, -5);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		v = 7;
		if (quantity_parse_int(bad[i], 1, 3600, &v) != -1 || v != 7)
			fail_msg("accepted '%s'", bad[i]);
	}
	assert_int_equal(quantity_parse_int(NULL, 1, 3600, &v), -1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_int),
		cmocka_unit_test(test_valid),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_messages),
		cmocka_unit_test(test_length_cap),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
