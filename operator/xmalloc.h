/*
 * xmalloc.h - allocation that cannot fail.
 *
 * Small internal allocations go through these; on out-of-memory they print
 * a message and abort(), as Redis's zmalloc does, so callers never carry an
 * error path for a few bytes. Anything sized by network input must also go
 * through a capped buffer (buf.h) first: these do not cap.
 */
#ifndef AIRLOCK_XMALLOC_H
#define AIRLOCK_XMALLOC_H

#include <stddef.h>

void *xmalloc(size_t n);
void *xcalloc(size_t nmemb, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
/* Caller frees with free(). */
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
