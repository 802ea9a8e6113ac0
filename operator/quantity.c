/*
 * quantity.c - Kubernetes resource quantities, parsed exactly.
 *
 * The mantissa's significant digits are kept as a decimal number, least
 * significant digit first; a binary suffix multiplies that number by 2^k
 * in place, after which the value is digits * 10^e and its integer part
 * and "is there a fraction" fall out of where the decimal point lands.
 * Input is capped at QUANTITY_MAX_LEN, so the digit array is small and
 * fixed, and no mantissa is too long to be read.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "quantity.h"

#define QDIGITS_STR_(x)	#x
#define QDIGITS_STR(x)	QDIGITS_STR_(x)

/* 2^60 (Ei) has 19 decimal digits: at most that many are added. */
#define QDIGITS_MAX	(QUANTITY_MAX_LEN + 20)

/* A parsed quantity: (-1)^neg * digits * 10^exp10 * 2^exp2. */
struct qvalue {
	int		neg;
	unsigned char	d[QDIGITS_MAX];	/* least significant 1st */
	size_t		nd;		/* 0 for the value zero */
	int64_t		exp10;
	int		exp2;
};

struct qsuffix {
	const char	*name;
	int		 exp10;
	int		 exp2;
};

static const struct qsuffix suffixes[] = {
	{ "Ki", 0, 10 }, { "Mi", 0, 20 }, { "Gi", 0, 30 }, { "Ti", 0, 40 },
	{ "Pi", 0, 50 }, { "Ei", 0, 60 },
	{ "n", -9, 0 }, { "u", -6, 0 }, { "m", -3, 0 }, { "k", 3, 0 },
	{ "M", 6, 0 }, { "G", 9, 0 }, { "T", 12, 0 }, { "P", 15, 0 },
	{ "E", 18, 0 },
};

/* s, quoted for a message: printable ASCII only, the cap shown as "...". */
static void
quote(const char *s, char *dst, size_t size)
{
	size_t i, n = 0;

	for (i = 0; s[i] != '\0' && i < QUANTITY_MAX_LEN && n + 4 < size;
	    i++) {
		unsigned char c = (unsigned char)s[i];

		dst[n++] = c >= 0x20 && c < 0x7f ? (char)c : '?';
	}
	if (s[i] != '\0' && n + 4 <= size) {
		memcpy(dst + n, "...", 3);
		n += 3;
	}
	dst[n] = '\0';
}

static int
bad(struct k8s_error *err, const char *s, const char *why)
{
	char q[QUANTITY_MAX_LEN + 8];

	quote(s, q, sizeof(q));
	return k8s_error_set(err, K8S_EINVAL, 0, NULL,
	    "quantity '%s' is not valid: %s", q, why);
}

static int
is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* The suffix at p (the rest of the string) into v's exponents. */
static int
parse_suffix(const char *s, const char *p, struct qvalue *v,
    struct k8s_error *err)
{
	char msg[QUANTITY_MAX_LEN + 32], q[QUANTITY_MAX_LEN + 8];
	int64_t e = 0;
	size_t i;
	int neg = 0;

	if (*p == '\0')
		return 0;
	for (i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++)
		if (strcmp(p, suffixes[i].name) == 0) {
			v->exp10 += suffixes[i].exp10;
			v->exp2 = suffixes[i].exp2;
			return 0;
		}
	/* A lone "E" is exa, matched above; "e" alone is nothing. */
	if ((*p == 'e' || *p == 'E') && p[1] != '\0') {
		const char *q0 = p + 1;

		if (*q0 == '+' || *q0 == '-')
			neg = *q0++ == '-';
		if (*q0 == '\0')
			return bad(err, s, "the exponent has no digits");
		/* Saturate: anything past 2^40 is out of range anyway. */
		for (; is_digit(*q0); q0++)
			if (e < INT64_C(1) << 40)
				e = e * 10 + (*q0 - '0');
		if (*q0 == '\0') {
			/* ParseQuantity reads the exponent as an int32. */
			if (e > (int64_t)INT32_MAX + neg)
				return bad(err, s, "the exponent is out of "
				    "range");
			v->exp10 += neg ? -e : e;
			return 0;
		}
	}
	quote(p, q, sizeof(q));
	snprintf(msg, sizeof(msg), "unknown suffix '%s'", q);
	return bad(err, s, msg);
}

/* Split s into sign, significant digits and exponents. */
static int
parse_text(const char *s, struct qvalue *v, struct k8s_error *err)
{
	unsigned char rev[QUANTITY_MAX_LEN];
	const char *p;
	size_t n = 0, i;
	int seen = 0;

	memset(v, 0, sizeof(*v));
	if (s == NULL)
		return k8s_error_set(err, K8S_EINVAL, 0, NULL,
		    "quantity is missing");
	if (*s == '\0')
		return bad(err, s, "it is empty");
	if (strnlen(s, QUANTITY_MAX_LEN + 1) > QUANTITY_MAX_LEN)
		return bad(err, s, "it is longer than the limit of "
		    QDIGITS_STR(QUANTITY_MAX_LEN) " characters");
	p = s;
	if (*p == '+' || *p == '-')
		v->neg = *p++ == '-';
	for (; is_digit(*p); p++, seen = 1)
		if (n > 0 || *p != '0')
			rev[n++] = (unsigned char)(*p - '0');
	if (*p == '.')
		for (p++; is_digit(*p); p++, seen = 1) {
			if (n > 0 || *p != '0')
				rev[n++] = (unsigned char)(*p - '0');
			v->exp10--;
		}
	if (!seen)
		return bad(err, s, "it has no digits");
	for (i = 0; i < n; i++)
		v->d[i] = rev[n - 1 - i];
	v->nd = n;
	return parse_suffix(s, p, v, err);
}

/*
 * ceil(v * 10^scale10) into *out: 0, or K8S_ETOOBIG. v is not kept:
 * the binary exponent is applied to its digits in place.
 */
static int
qvalue_ceil(struct qvalue *v, int scale10, int64_t *out)
{
	uint64_t mag = 0;
	int64_t e;
	size_t i, k, lo = 0;
	int frac = 0, carry, x;

	if (v->nd == 0) {
		*out = 0;
		return 0;
	}
	for (; v->exp2 > 0; v->exp2--) {
		for (i = 0, carry = 0; i < v->nd; i++) {
			x = v->d[i] * 2 + carry;
			v->d[i] = (unsigned char)(x % 10);
			carry = x / 10;
		}
		if (carry)
			v->d[v->nd++] = (unsigned char)carry;
	}
	e = v->exp10 + scale10;
	if (e >= 0) {
		/* The value is at least 10^(nd-1+e): 10^19 is past 2^63. */
		if ((int64_t)v->nd + e > 19)
			return K8S_ETOOBIG;
	} else {
		k = (uint64_t)-e < v->nd ? (size_t)-e : v->nd;
		for (i = 0; i < k; i++)
			frac |= v->d[i] != 0;
		lo = k;
	}
	for (i = v->nd; i > lo; i--)
		if (__builtin_mul_overflow(mag, 10, &mag) ||
		    __builtin_add_overflow(mag, v->d[i - 1], &mag))
			return K8S_ETOOBIG;
	for (; e > 0; e--)
		if (__builtin_mul_overflow(mag, 10, &mag))
			return K8S_ETOOBIG;
	/* ceil(-x) is -floor(x): only a positive value rounds its magnitude. */
	if (!v->neg && frac && __builtin_add_overflow(mag, 1, &mag))
		return K8S_ETOOBIG;
	if (!v->neg) {
		if (mag > (uint64_t)INT64_MAX)
			return K8S_ETOOBIG;
		*out = (int64_t)mag;
	} else {
		if (mag > (uint64_t)INT64_MAX + 1)
			return K8S_ETOOBIG;
		*out = mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN :
		    -(int64_t)mag;
	}
	return 0;
}

static int
parse_scaled(const char *s, int scale10, int64_t *out, struct k8s_error *err)
{
	char q[QUANTITY_MAX_LEN + 8];
	struct qvalue v;
	int64_t r;
	int rc;

	if ((rc = parse_text(s, &v, err)) != 0)
		return rc;
	if (qvalue_ceil(&v, scale10, &r) != 0) {
		quote(s, q, sizeof(q));
		return k8s_error_set(err, K8S_ETOOBIG, 0, NULL,
		    "quantity '%s' is out of range: it does not fit in 64 "
		    "bits as %s", q, scale10 ? "milli-units" : "units");
	}
	*out = r;
	return 0;
}

int
quantity_parse_milli(const char *s, int64_t *out, struct k8s_error *err)
{
	return parse_scaled(s, 3, out, err);
}

int
quantity_parse(const char *s, int64_t *out, struct k8s_error *err)
{
	return parse_scaled(s, 0, out, err);
}

int
quantity_parse_int(const char *s, long long lo, long long hi, long long *out)
{
	char *end;
	long long v;

	if (s == NULL)
		return -1;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}
