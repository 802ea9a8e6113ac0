#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

int
buf_read_file(struct buf *b, const char *path, struct stat *st)
{
	char chunk[8192];
	struct stat sb;
	ssize_t n;
	int fd, rc = BUF_EIO, saved;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return BUF_EIO;
	if (fstat(fd, &sb) == -1)
		goto out;
	if (S_ISREG(sb.st_mode) && (uintmax_t)sb.st_size > b->max) {
		rc = BUF_ETOOBIG;
		goto out;
	}
	for (;;) {
		n = read(fd, chunk, sizeof(chunk));
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1)
			goto out;
		if (n == 0)
			break;
		if (buf_append(b, chunk, (size_t)n) != 0) {
			rc = BUF_ETOOBIG;
			goto out;
		}
	}
	if (st != NULL)
		*st = sb;
	rc = 0;
out:
	saved = errno;
	close(fd);
	errno = saved;
	return rc;
}
