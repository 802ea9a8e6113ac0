#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "xmalloc.h"

void
buf_init(struct buf *b, size_t max)
{
	b->data = NULL;
	b->len = 0;
	b->alloc = 0;
	b->max = max;
}

int
buf_append(struct buf *b, const void *p, size_t n)
{
	size_t need;

	if (n > b->max - b->len)
		return BUF_ETOOBIG;
	need = b->len + n + 1;
	if (need > b->alloc) {
		size_t a = b->alloc ? b->alloc : 256;

		while (a < need)
			a *= 2;
		/* Never allocate far past the cap for a buffer near it. */
		if (a > b->max + 1)
			a = b->max + 1;
		b->data = xrealloc(b->data, a);
		b->alloc = a;
	}
	if (n)
		memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = '\0';
	return 0;
}

int
buf_append_str(struct buf *b, const char *s)
{
	return buf_append(b, s, strlen(s));
}

void
buf_consume(struct buf *b, size_t n)
{
	if (n >= b->len) {
		buf_reset(b);
		return;
	}
	memmove(b->data, b->data + n, b->len - n);
	b->len -= n;
	b->data[b->len] = '\0';
}

void
buf_reset(struct buf *b)
{
	b->len = 0;
	if (b->data)
		b->data[0] = '\0';
}

void
buf_free(struct buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = 0;
	b->alloc = 0;
}

char *
buf_detach(struct buf *b, size_t *lenp)
{
	char *p = b->data ? b->data : xstrdup("");

	if (lenp)
		*lenp = b->len;
	b->data = NULL;
	b->len = 0;
	b->alloc = 0;
	return p;
}
