#include <stdlib.h>

#include "base64.h"
#include "xmalloc.h"

/* 0..63 for alphabet bytes, -1 otherwise. */
static int
b64_value(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

int
base64_decode(const char *in, size_t len, char **out, size_t *outlen)
{
	unsigned char *dst;
	unsigned int acc = 0;
	size_t i, n = 0, quad = 0, pad = 0;
	int v, rc = -1;

	dst = xmalloc(len / 4 * 3 + 3 + 1);
	for (i = 0; i < len; i++) {
		unsigned char c = (unsigned char)in[i];

		if (c == ' ' || c == '\t' || c == '\r' || c == '\n')
			continue;
		if (c == '=') {
			/* Padding only fills the last one or two of a quad. */
			if (quad < 2 || quad + pad >= 4)
				goto out;
			pad++;
			if (quad + pad == 4) {
				if (pad == 1) {
					dst[n++] = (unsigned char)(acc >> 10);
					dst[n++] = (unsigned char)(acc >> 2);
				} else {
					dst[n++] = (unsigned char)(acc >> 4);
				}
			}
			continue;
		}
		if (pad > 0 || (v = b64_value(c)) < 0)
			goto out;
		acc = (acc << 6) | (unsigned int)v;
		if (++quad == 4) {
			dst[n++] = (unsigned char)(acc >> 16);
			dst[n++] = (unsigned char)(acc >> 8);
			dst[n++] = (unsigned char)acc;
			acc = 0;
			quad = 0;
		}
	}
	/* A partial quad must have been completed by its padding. */
	if (quad != 0 && quad + pad != 4)
		goto out;
	dst[n] = '\0';
	*out = (char *)dst;
	*outlen = n;
	dst = NULL;
	rc = 0;
out:
	free(dst);
	return rc;
}

char *
base64_encode(const void *in, size_t len, size_t *outlen)
{
	static const char abc[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	const unsigned char *p = in;
	size_t n = (len + 2) / 3 * 4, o = 0, i;
	char *out = xmalloc(n + 1);

	for (i = 0; i + 2 < len; i += 3) {
		unsigned v = (unsigned)p[i] << 16 | (unsigned)p[i + 1] << 8 | p[i + 2];

		out[o++] = abc[v >> 18];
		out[o++] = abc[(v >> 12) & 63];
		out[o++] = abc[(v >> 6) & 63];
		out[o++] = abc[v & 63];
	}
	if (i < len) {
		unsigned v = (unsigned)p[i] << 16 | (i + 1 < len ? (unsigned)p[i + 1] << 8 : 0);

		out[o++] = abc[v >> 18];
		out[o++] = abc[(v >> 12) & 63];
		out[o++] = i + 1 < len ? abc[(v >> 6) & 63] : '=';
		out[o++] = '=';
	}
	out[o] = '\0';
	if (outlen)
		*outlen = o;
	return out;
}
