/*
 * jpath.h - reading JSON in tests by a dotted path with [i] indexes, e.g.
 * "spec.containers[0].name", failing the test (cmocka) when the value is
 * missing or of another type. For tests only.
 */
#ifndef AIRLOCK_JPATH_H
#define AIRLOCK_JPATH_H

#include <jansson.h>

/* The value at path (borrowed), or NULL. */
json_t *jp_at(json_t *j, const char *path);
const char *jp_str(json_t *j, const char *path);
long long jp_num(json_t *j, const char *path);
int jp_bool(json_t *j, const char *path);
/* A key that holds dots (labels, annotations) under the object at path. */
const char *jp_key(json_t *j, const char *path, const char *k);
/* Fail unless got equals the JSON text want (key order aside). */
void assert_json(json_t *got, const char *want);

#endif
