/*
 * jsonsize.h - how many bytes a value takes once the API server has it.
 *
 * The API server decodes what it is sent and stores objects as its own
 * JSON encoding (Go's encoding/json), so the size that counts against
 * etcd's request limit (1.5 MiB by default) and the API server's body
 * limit (3 MiB) is that encoding's, not the sender's: Go escapes '<', '>'
 * and '&' as \u003c (6 bytes each), control bytes as \u00XX (6) or \n, \r,
 * \t (2), '"' and '\' as 2, and U+2028/U+2029 as 6. A megabyte of NUL is
 * six megabytes stored.
 *
 * Strings are taken to be valid UTF-8 (jansson's strings are).
 */
#ifndef AIRLOCK_JSONSIZE_H
#define AIRLOCK_JSONSIZE_H

#include <stddef.h>

#include <jansson.h>

/* Bytes s[0..n) takes inside a JSON string as the API server writes it. */
size_t jsonsize_string(const char *s, size_t n);

/*
 * The longest prefix of s[0..n) that takes at most budget bytes encoded
 * (as jsonsize_string counts) and ends between two characters. Its length.
 */
size_t jsonsize_prefix(const char *s, size_t n, size_t budget);

/*
 * Bytes v takes, compact, as the API server writes it: strings as above,
 * numbers as jansson prints them (Go's differ only for reals, which
 * Kubernetes objects do not hold). 0 for NULL.
 */
size_t jsonsize_value(json_t *v);

#endif
