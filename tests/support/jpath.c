/*
 * jpath.c - see jpath.h.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "jpath.h"

json_t *
jp_at(json_t *j, const char *path)
{
	char buf[256], *save = NULL, *tok;

	snprintf(buf, sizeof(buf), "%s", path);
	for (tok = strtok_r(buf, ".", &save); tok && j;
	    tok = strtok_r(NULL, ".", &save)) {
		char *br = strchr(tok, '[');

		if (br) {
			*br = '\0';
			j = json_array_get(json_object_get(j, tok),
			    (size_t)atoi(br + 1));
		} else {
			j = json_object_get(j, tok);
		}
	}
	return j;
}

const char *
jp_str(json_t *j, const char *path)
{
	const char *s = json_string_value(jp_at(j, path));

	if (s == NULL)
		fail_msg("no string at %s", path);
	return s;
}

long long
jp_num(json_t *j, const char *path)
{
	json_t *v = jp_at(j, path);

	if (!json_is_integer(v))
		fail_msg("no integer at %s", path);
	return (long long)json_integer_value(v);
}

int
jp_bool(json_t *j, const char *path)
{
	json_t *v = jp_at(j, path);

	if (!json_is_boolean(v))
		fail_msg("no boolean at %s", path);
	return json_is_true(v);
}

const char *
jp_key(json_t *j, const char *path, const char *k)
{
	const char *s = json_string_value(json_object_get(jp_at(j, path), k));

	if (s == NULL)
		fail_msg("no %s under %s", k, path);
	return s;
}

void
assert_json(json_t *got, const char *want)
{
	json_error_t e;
	json_t *w = json_loads(want, 0, &e);
	char *g;

	if (w == NULL)
		fail_msg("not JSON (%s): %s", e.text, want);
	if (!json_equal(got, w)) {
		g = got ? json_dumps(got, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
		json_decref(w);
		fail_msg("got %s, wanted %s", g ? g : "NULL", want);
	}
	json_decref(w);
}
