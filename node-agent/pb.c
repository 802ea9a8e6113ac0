#include <string.h>

#include "pb.h"
#include "xmalloc.h"

int
pb_put_varint(struct buf *b, uint64_t v)
{
	uint8_t out[10];
	size_t n = 0;

	do {
		out[n] = v & 0x7f;
		v >>= 7;
		if (v)
			out[n] |= 0x80;
		n++;
	} while (v);
	return buf_append(b, out, n);
}

int
pb_put_uint(struct buf *b, int field, uint64_t v)
{
	int rc;

	if ((rc = pb_put_varint(b, (uint64_t)field << 3 | PB_VARINT)) != 0)
		return rc;
	return pb_put_varint(b, v);
}

int
pb_put_bytes(struct buf *b, int field, const void *p, size_t n)
{
	int rc;

	if ((rc = pb_put_varint(b, (uint64_t)field << 3 | PB_LEN)) != 0 ||
	    (rc = pb_put_varint(b, n)) != 0)
		return rc;
	return buf_append(b, p, n);
}

int
pb_put_str(struct buf *b, int field, const char *s)
{
	return pb_put_bytes(b, field, s, strlen(s));
}

void
pb_reader_init(struct pb_reader *r, const void *p, size_t n)
{
	r->p = p;
	r->end = r->p + n;
}

/* At most 10 bytes; the tenth may carry only the top bit of a uint64. */
static int
get_varint(struct pb_reader *r, uint64_t *v)
{
	uint64_t x = 0;

	for (int i = 0; i < 10; i++) {
		if (r->p >= r->end)
			return PB_EBAD;
		uint8_t c = *r->p++;

		if (i == 9 && c > 1)
			return PB_EBAD;
		x |= (uint64_t)(c & 0x7f) << (7 * i);
		if ((c & 0x80) == 0) {
			*v = x;
			return 0;
		}
	}
	return PB_EBAD;
}

static int
get_fixed(struct pb_reader *r, size_t n, uint64_t *v)
{
	uint64_t x = 0;

	if ((size_t)(r->end - r->p) < n)
		return PB_EBAD;
	for (size_t i = 0; i < n; i++)
		x |= (uint64_t)r->p[i] << (8 * i);
	r->p += n;
	*v = x;
	return 0;
}

int
pb_next(struct pb_reader *r, struct pb_field *f)
{
	uint64_t key, len;

	if (r->p >= r->end)
		return 0;
	if (get_varint(r, &key) != 0)
		return PB_EBAD;
	if ((key >> 3) == 0 || (key >> 3) > 0x1fffffff)
		return PB_EBAD;
	memset(f, 0, sizeof(*f));
	f->num = (int)(key >> 3);
	f->wire = (enum pb_wire)(key & 7);
	switch (f->wire) {
	case PB_VARINT:
		return get_varint(r, &f->u) == 0 ? 1 : PB_EBAD;
	case PB_I64:
		return get_fixed(r, 8, &f->u) == 0 ? 1 : PB_EBAD;
	case PB_I32:
		return get_fixed(r, 4, &f->u) == 0 ? 1 : PB_EBAD;
	case PB_LEN:
		if (get_varint(r, &len) != 0 ||
		    len > (uint64_t)(r->end - r->p))
			return PB_EBAD;
		f->data = r->p;
		f->len = (size_t)len;
		r->p += len;
		return 1;
	default:			/* groups (3, 4) and 6, 7 */
		return PB_EBAD;
	}
}

char *
pb_strdup(const struct pb_field *f)
{
	if (f->wire != PB_LEN || memchr(f->data, '\0', f->len) != NULL)
		return NULL;
	return xstrndup((const char *)f->data, f->len);
}
