/*
 * lines.c - see lines.h.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lines.h"
#include "xmalloc.h"

void
lines_init(struct lines *l, size_t max)
{
	l->buf = xmalloc(max + 1);
	l->len = 0;
	l->max = max;
	l->dropping = 0;
}

void
lines_free(struct lines *l)
{
	free(l->buf);
	l->buf = NULL;
}

void
lines_reset(struct lines *l)
{
	l->len = 0;
	l->dropping = 0;
}

int
lines_feed(struct lines *l, const char *data, size_t n, lines_fn fn,
    void *arg)
{
	int rc = 0;

	while (n > 0 && rc == 0) {
		const char *nl = memchr(data, '\n', n);
		size_t take = nl ? (size_t)(nl - data) : n;

		if (l->dropping) {
			l->dropping = nl == NULL;
		} else if (take <= l->max - l->len) {
			memcpy(l->buf + l->len, data, take);
			l->len += take;
			if (nl != NULL) {
				rc = fn(arg, l->buf, l->len, 0);
				l->len = 0;
			}
		} else {
			/* Past the cap: hand on its first max bytes, once. */
			memcpy(l->buf + l->len, data, l->max - l->len);
			rc = fn(arg, l->buf, l->max, 1);
			l->len = 0;
			l->dropping = nl == NULL;
		}
		take += nl ? 1 : 0;
		data += take;
		n -= take;
	}
	return rc;
}

int
lines_write(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			if (w == 0)
				errno = EIO;
			return -1;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}
