/*
 * quantity.h - Kubernetes resource quantities ("500m", "256Mi", "1e3").
 *
 * The grammar is that of k8s.io/apimachinery's resource.ParseQuantity:
 *
 *   quantity := [+-] mantissa [suffix]
 *   mantissa := digits [ "." [digits] ] | "." digits
 *   suffix   := Ki | Mi | Gi | Ti | Pi | Ei          (powers of 1024)
 *             | n | u | m | k | M | G | T | P | E    (powers of 1000)
 *             | (e|E) [+-] digits                     (powers of ten)
 *
 * Nothing else: no spaces, no "K" or "KiB", no hex, no digit grouping.
 * ParseQuantity itself is laxer than its documented grammar in a few
 * corners ("Mi" and "-" parse as zero there); those are refused here.
 *
 * Values are computed exactly (integer arithmetic on the decimal digits,
 * no floating point) and rounded once toward +infinity, as Kubernetes
 * rounds what it cannot represent: "0.1m" is 1 milli-unit, "1.5" is 2
 * units, "-1.5" is -1 unit. Kubernetes clamps a value past 2^63-1; these
 * functions fail instead.
 */
#ifndef AIRLOCK_QUANTITY_H
#define AIRLOCK_QUANTITY_H

#include <stdint.h>

#include "k8s_error.h"

/* The longest quantity text accepted, in bytes. */
#define QUANTITY_MAX_LEN	64

/*
 * Parse s into the value times 1000 (milli-units, how CPU is counted).
 * K8S_EINVAL, with s quoted in the message, for malformed input: NULL,
 * empty, longer than QUANTITY_MAX_LEN, no digits ("Mi", "-"), spaces,
 * "1.2.3", an unknown suffix ("1Mb", "1K"), or a decimal exponent beyond
 * 32 bits (ParseQuantity refuses those too). K8S_ETOOBIG when the rounded
 * milli value does not fit in an int64. *out is set only on success.
 */
int quantity_parse_milli(const char *s, int64_t *out, struct k8s_error *err)
    __attribute__((warn_unused_result));

/*
 * The value in whole units, rounded up ("1.5" -> 2, "100m" -> 1, "1Ki" ->
 * 1024), how bytes are counted. The same K8S_EINVAL cases; K8S_ETOOBIG
 * only when the unit value does not fit in an int64 ("7Ei" fits here
 * although its milli value does not).
 */
int quantity_parse(const char *s, int64_t *out, struct k8s_error *err)
    __attribute__((warn_unused_result));

/*
 * s as a plain decimal integer from lo to hi, with nothing after it (a
 * flag's value, an annotation): 0 and *out, or -1 (*out untouched).
 */
int quantity_parse_int(const char *s, long long lo, long long hi,
    long long *out) __attribute__((warn_unused_result));

#endif
