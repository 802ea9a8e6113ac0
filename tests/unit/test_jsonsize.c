/* Unit tests: operator/jsonsize.c, Go's encoding/json sizes counted. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "jsonsize.h"

static void
test_string(void **state)
{
	(void)state;
	assert_int_equal(jsonsize_string("", 0), 0);
	assert_int_equal(jsonsize_string("abc", 3), 3);
	/* "\"" and "\\": 2 each; \n \r \t: 2; other control bytes: \u00XX. */
	assert_int_equal(jsonsize_string("\"\\", 2), 4);
	assert_int_equal(jsonsize_string("\n\r\t", 3), 6);
	assert_int_equal(jsonsize_string("\0\x01\x1f", 3), 18);
	/* Go escapes HTML's three: \u003c \u003e \u0026. */
	assert_int_equal(jsonsize_string("<>&", 3), 18);
	/* DEL and '/' are not escaped. */
	assert_int_equal(jsonsize_string("\x7f/", 2), 2);
	/* UTF-8 kept as is, but U+2028 and U+2029 become \u2028 \u2029. */
	assert_int_equal(jsonsize_string("\xc3\xa9", 2), 2);
	assert_int_equal(jsonsize_string("\xe2\x82\xac", 3), 3);
	assert_int_equal(jsonsize_string("\xf0\x9f\x98\x80", 4), 4);
	assert_int_equal(jsonsize_string("\xe2\x80\xa8\xe2\x80\xa9", 6), 12);
	/* The case: a MiB of NUL and a MiB of '<' is 12 MiB stored. */
	{
		size_t n = 1 << 20;
		char *b = calloc(1, n);

		assert_int_equal(jsonsize_string(b, n), 6 * n);
		memset(b, '<', n);
		assert_int_equal(jsonsize_string(b, n), 6 * n);
		free(b);
	}
}

static void
test_prefix(void **state)
{
	(void)state;
	assert_int_equal(jsonsize_prefix("abcdef", 6, 100), 6);
	assert_int_equal(jsonsize_prefix("abcdef", 6, 4), 4);
	assert_int_equal(jsonsize_prefix("abcdef", 6, 0), 0);
	/* "<" costs 6: a budget of 8 takes "a<" (7), not "a<b" (8)? It does. */
	assert_int_equal(jsonsize_prefix("a<b", 3, 7), 2);
	assert_int_equal(jsonsize_prefix("a<b", 3, 8), 3);
	assert_int_equal(jsonsize_prefix("a<b", 3, 6), 1);
	/* Never inside a character: "é" (2 bytes) whole or not at all. */
	assert_int_equal(jsonsize_prefix("a\xc3\xa9", 3, 2), 1);
	assert_int_equal(jsonsize_prefix("a\xc3\xa9", 3, 3), 3);
	assert_int_equal(jsonsize_prefix("\xf0\x9f\x98\x80x", 5, 3), 0);
	assert_int_equal(jsonsize_prefix("\xf0\x9f\x98\x80x", 5, 4), 4);
	/* U+2028 is 3 bytes that cost 6. */
	assert_int_equal(jsonsize_prefix("\xe2\x80\xa8z", 4, 5), 0);
	assert_int_equal(jsonsize_prefix("\xe2\x80\xa8z", 4, 7), 4);
	/* The prefix's cost is within budget, and one more character is not. */
	{
		const char *s = "x\n<\"\x01\xc3\xa9&y";
		size_t n = strlen(s);

		for (size_t b = 0; b < 40; b++) {
			size_t k = jsonsize_prefix(s, n, b);

			assert_true(jsonsize_string(s, k) <= b);
			if (k < n) {
				size_t k2 = k + 1;

				while (k2 < n && ((unsigned char)s[k2] & 0xc0) == 0x80)
					k2++;
				assert_true(jsonsize_string(s, k2) > b);
			}
		}
	}
}

static void
test_value(void **state)
{
	json_t *v;

	(void)state;
	assert_int_equal(jsonsize_value(NULL), 0);
	v = json_loads("{\"a\":1,\"b\":[true,false,null,\"<\"],\"c\":{},\"d\":-12}",
	    0, NULL);
	/* {"a":1,"b":[true,false,null,"\u003c"],"c":{},"d":-12} */
	assert_int_equal(jsonsize_value(v),
	    strlen("{\"a\":1,\"b\":[true,false,null,\"\\u003c\"],\"c\":{},\"d\":-12}"));
	json_decref(v);
	v = json_pack("{s:s}", "k<", "\n");
	assert_int_equal(jsonsize_value(v), strlen("{\"k\\u003c\":\"\\n\"}"));
	json_decref(v);
	v = json_array();
	assert_int_equal(jsonsize_value(v), 2);
	json_decref(v);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_string),
		cmocka_unit_test(test_prefix),
		cmocka_unit_test(test_value),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
