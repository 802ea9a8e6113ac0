/*
 * base64.h - standard base64 (RFC 4648, "+/" alphabet, '=' padding).
 *
 * Used for the *-data fields of a kubeconfig, which Go writes with
 * encoding/base64's StdEncoding.
 */
#ifndef AIRLOCK_BASE64_H
#define AIRLOCK_BASE64_H

#include <stddef.h>

/*
 * Decode len bytes of in. Whitespace (space, tab, CR, LF) is skipped, so
 * wrapped input decodes; anything else outside the alphabet, missing or
 * misplaced padding, or a length that is not a multiple of four is an error.
 * On success *out is a new buffer of *outlen bytes plus a terminating NUL
 * (so decoded text can be used as a C string), which the caller frees with
 * free(). Returns 0, or -1 on malformed input (*out untouched).
 */
int base64_decode(const char *in, size_t len, char **out, size_t *outlen)
    __attribute__((warn_unused_result));

/*
 * Encode len bytes of in, without line breaks: a new NUL-terminated
 * string of *outlen (may be NULL) bytes, which the caller frees.
 */
char *base64_encode(const void *in, size_t len, size_t *outlen);

#endif
