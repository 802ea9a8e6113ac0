/*
 * sha256.h - the SHA-256 of bytes as lowercase hex (libcrypto's), the form
 * every digest Airlock writes or compares takes: a program's codeSha256,
 * a file out's sha256, a guardrail's digest.
 */
#ifndef AIRLOCK_SHA256_H
#define AIRLOCK_SHA256_H

#include <stddef.h>

/*
 * The digest of len bytes at p into out (64 hex digits and a NUL).
 * Returns 0, or -1 if libcrypto failed (out is then "").
 */
int sha256_hex(const void *p, size_t len, char out[65]);

#endif
