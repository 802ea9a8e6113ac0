/*
 * codetar.c - see codetar.h. The ustar header, field by field (POSIX
 * pax, "ustar Interchange Format"): numbers are octal, NUL-terminated
 * within their field; the checksum is the byte sum of the header with
 * the checksum field taken as eight spaces.
 */
#include <stdio.h>
#include <string.h>

#include "codetar.h"

#define NAME_LEN	100
#define PREFIX_LEN	155

static size_t
padded(size_t len)
{
	return (len + CODETAR_BLOCK - 1) / CODETAR_BLOCK * CODETAR_BLOCK;
}

size_t
codetar_size(const struct codetar_entry *e, size_t n)
{
	size_t total = 2 * CODETAR_BLOCK;

	for (size_t i = 0; i < n; i++)
		total += CODETAR_BLOCK + padded(e[i].len);
	return total;
}

/* A path tar can hold and we can trust: relative, no "..", no empty part. */
static int
path_ok(const char *p)
{
	const char *s = p;

	if (*p == '\0' || *p == '/')
		return 0;
	for (;;) {
		const char *slash = strchr(s, '/');
		size_t len = slash ? (size_t)(slash - s) : strlen(s);

		if (len == 0 || (len == 2 && s[0] == '.' && s[1] == '.'))
			return 0;
		if (slash == NULL)
			return 1;
		s = slash + 1;
	}
}

/*
 * Split path into ustar's prefix and name: the whole path in name when it
 * fits, else at the last '/' that leaves both parts within their fields.
 */
static int
split(const char *path, char name[NAME_LEN + 1], char prefix[PREFIX_LEN + 1])
{
	size_t len = strlen(path);

	memset(name, 0, NAME_LEN + 1);
	memset(prefix, 0, PREFIX_LEN + 1);
	if (len <= NAME_LEN) {
		memcpy(name, path, len);
		return 0;
	}
	for (size_t i = len; i-- > 0;) {
		if (path[i] != '/')
			continue;
		if (len - i - 1 > NAME_LEN)
			return -1;	/* the last part alone is too long */
		if (i <= PREFIX_LEN && len - i - 1 > 0) {
			memcpy(prefix, path, i);
			memcpy(name, path + i + 1, len - i - 1);
			return 0;
		}
	}
	return -1;
}

static void
octal(char *field, size_t width, unsigned long long v)
{
	/* width - 1 digits, zero-padded, then the NUL. */
	snprintf(field, width, "%0*llo", (int)(width - 1), v);
}

int
codetar_build(const struct codetar_entry *e, size_t n, struct buf *out,
    size_t *bad)
{
	static const char zero[CODETAR_BLOCK];

	for (size_t i = 0; i < n; i++) {
		unsigned char h[CODETAR_BLOCK];
		char name[NAME_LEN + 1], prefix[PREFIX_LEN + 1];
		unsigned sum = 0;

		if (!path_ok(e[i].path) || split(e[i].path, name, prefix) != 0) {
			*bad = i;
			return -1;
		}
		memset(h, 0, sizeof(h));
		memcpy(h, name, strnlen(name, NAME_LEN));		/* name */
		octal((char *)h + 100, 8, 0644);			/* mode */
		octal((char *)h + 108, 8, 0);				/* uid */
		octal((char *)h + 116, 8, 0);				/* gid */
		octal((char *)h + 124, 12, e[i].len);			/* size */
		octal((char *)h + 136, 12, 0);				/* mtime */
		memset(h + 148, ' ', 8);				/* chksum */
		h[156] = '0';						/* typeflag */
		memcpy(h + 257, "ustar", 6);				/* magic */
		memcpy(h + 263, "00", 2);				/* version */
		memcpy(h + 345, prefix, strnlen(prefix, PREFIX_LEN));	/* prefix */
		for (size_t k = 0; k < sizeof(h); k++)
			sum += h[k];
		snprintf((char *)h + 148, 8, "%06o", sum);
		h[155] = ' ';
		if (buf_append(out, h, sizeof(h)) != 0 ||
		    (e[i].len && buf_append(out, e[i].data, e[i].len) != 0) ||
		    buf_append(out, zero, padded(e[i].len) - e[i].len) != 0)
			return -2;
	}
	if (buf_append(out, zero, CODETAR_BLOCK) != 0 ||
	    buf_append(out, zero, CODETAR_BLOCK) != 0)
		return -2;
	return 0;
}
