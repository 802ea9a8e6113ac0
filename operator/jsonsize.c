/*
 * jsonsize.c - see jsonsize.h. Go's encoding/json escaping, counted.
 */
#include <stdio.h>
#include <string.h>

#include "jsonsize.h"

/* The encoded length of the character at s (n bytes left), and its size. */
static size_t
char_cost(const unsigned char *s, size_t n, size_t *len)
{
	unsigned char c = s[0];

	*len = 1;
	if (c < 0x20)
		return (c == '\n' || c == '\r' || c == '\t') ? 2 : 6;
	if (c == '"' || c == '\\')
		return 2;
	if (c == '<' || c == '>' || c == '&')
		return 6;
	if (c < 0x80)
		return 1;
	if (c >= 0xf0)
		*len = 4;
	else if (c >= 0xe0)
		*len = 3;
	else if (c >= 0xc0)
		*len = 2;
	if (*len > n)
		*len = n;
	/* U+2028 and U+2029: E2 80 A8 / E2 80 A9. */
	if (*len == 3 && c == 0xe2 && s[1] == 0x80 &&
	    (s[2] == 0xa8 || s[2] == 0xa9))
		return 6;
	return *len;
}

size_t
jsonsize_string(const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t out = 0, len;

	for (size_t i = 0; i < n; i += len)
		out += char_cost(p + i, n - i, &len);
	return out;
}

size_t
jsonsize_prefix(const char *s, size_t n, size_t budget)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t used = 0, i = 0, len, cost;

	while (i < n) {
		cost = char_cost(p + i, n - i, &len);
		if (used + cost > budget)
			break;
		used += cost;
		i += len;
	}
	return i;
}

size_t
jsonsize_value(json_t *v)
{
	size_t n = 0, i;
	const char *k;
	json_t *x;
	char num[64];

	if (v == NULL)
		return 0;
	switch (json_typeof(v)) {
	case JSON_OBJECT:
		n = 2;		/* {} */
		json_object_foreach(v, k, x)
			n += (n > 2 ? 1 : 0) + 3 + jsonsize_string(k,
			    strlen(k)) + jsonsize_value(x);	/* ,"k": */
		return n;
	case JSON_ARRAY:
		n = 2;
		json_array_foreach(v, i, x)
			n += (i ? 1 : 0) + jsonsize_value(x);
		return n;
	case JSON_STRING:
		return 2 + jsonsize_string(json_string_value(v),
		    json_string_length(v));
	case JSON_INTEGER:
		return (size_t)snprintf(num, sizeof(num), "%" JSON_INTEGER_FORMAT,
		    json_integer_value(v));
	case JSON_REAL:
		return (size_t)snprintf(num, sizeof(num), "%.17g",
		    json_real_value(v));
	case JSON_TRUE:
		return 4;
	case JSON_FALSE:
		return 5;
	default:
		return 4;	/* null */
	}
}
