/* Unit tests: operator/yamljson.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "buf.h"
#include "yamljson.h"

static json_t *
load_ok(const char *y)
{
	struct k8s_error err;
	json_t *j;

	if (yamljson_load(y, strlen(y), "manifest", "t.yaml", 0, &j, &err) != 0)
		fail_msg("'%s': %s", y, err.message);
	return j;
}

static void
expect_json(const char *yaml, const char *json)
{
	json_t *got = load_ok(yaml), *want = json_loads(json, JSON_DECODE_ANY, NULL);
	char *g = json_dumps(got, JSON_COMPACT | JSON_SORT_KEYS);

	assert_non_null(want);
	if (!json_equal(got, want))
		fail_msg("yaml '%s' gave %s, want %s", yaml, g, json);
	free(g);
	json_decref(got);
	json_decref(want);
}

static void
expect_error(const char *yaml, size_t max_nodes, const char *msg)
{
	struct k8s_error err;
	json_t *j;

	assert_int_equal(yamljson_load(yaml, strlen(yaml), "manifest", "t.yaml",
	    max_nodes, &j, &err), K8S_EINVAL);
	assert_null(j);
	if (strstr(err.message, msg) == NULL)
		fail_msg("yaml '%.40s': message '%s' lacks '%s'", yaml, err.message, msg);
}

static void
test_scalar_types(void **state)
{
	(void)state;
	expect_json("a: ~\nb: null\nc:\nd: NULL", "{\"a\":null,\"b\":null,\"c\":null,\"d\":null}");
	expect_json("a: true\nb: False\nc: YES\nd: no\ne: On\nf: off",
	    "{\"a\":true,\"b\":false,\"c\":true,\"d\":false,\"e\":true,\"f\":false}");
	expect_json("a: 42\nb: -7\nc: 0x1F\nd: 0o17\ne: +3\nf: 007",
	    "{\"a\":42,\"b\":-7,\"c\":31,\"d\":15,\"e\":3,\"f\":7}");
	expect_json("a: 1.5\nb: -2e3\nc: .inf\nd: .nan\ne: 1.2.3",
	    "{\"a\":1.5,\"b\":-2000.0,\"c\":\".inf\",\"d\":\".nan\",\"e\":\"1.2.3\"}");
	/* Too big for 64 bits: kept as text, not wrapped. */
	expect_json("a: 99999999999999999999", "{\"a\":\"99999999999999999999\"}");
	/* Quoting keeps strings strings. */
	expect_json("a: \"true\"\nb: '42'\nd: \"0x1F\"\ne: |\n  two\n  lines\n",
	    "{\"a\":\"true\",\"b\":\"42\",\"d\":\"0x1F\",\"e\":\"two\\nlines\\n\"}");
	expect_json("a: \"caf\\u00e9\"\nb: '-'\nc: 12:30", "{\"a\":\"caf\\u00e9\",\"b\":\"-\",\"c\":\"12:30\"}");
}

static void
test_structure(void **state)
{
	(void)state;
	expect_json("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  labels: {a: b}\n"
	    "data:\n  k: v\nlist:\n- 1\n- [2, 3]\n- {x: y}\n- \n",
	    "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"x\","
	    "\"labels\":{\"a\":\"b\"}},\"data\":{\"k\":\"v\"},\"list\":[1,[2,3],{\"x\":\"y\"},null]}");
	/* Aliases are expanded (within the budget). */
	expect_json("base: &b {cpu: 1}\nuse: *b\nagain: [*b, *b]",
	    "{\"base\":{\"cpu\":1},\"use\":{\"cpu\":1},\"again\":[{\"cpu\":1},{\"cpu\":1}]}");
	expect_json("---\na: 1\n...\n", "{\"a\":1}");
}

static void
test_errors(void **state)
{
	char deep[1024];
	size_t n = 0;

	(void)state;
	expect_error("a: 1\na: 2\n", 0, "a: duplicate key");
	expect_error("spec:\n  x: 1\n  x: 2\n", 0, "spec.x: duplicate key");
	expect_error("? [a, b]\n: c\n", 0, "mapping keys must be scalars");
	expect_error("a: [1, 2\n", 0, "t.yaml");
	expect_error("- 1\n- 2\n", 0, "manifest 't.yaml'");
	expect_error("a: 1\n---\nb: 2\n", 0, "t.yaml");
	expect_error("", 0, "t.yaml");
	/* Raw invalid UTF-8 (a quoted "\\xff" is the escape for U+00FF). */
	expect_error("a: b\xff\xfe" "c\n", 0, "manifest 't.yaml': invalid YAML");
	expect_error("a: \"x\\0y\"\n", 0, "a: value holds a NUL byte");
	/* A cycle through an alias: caught by the depth cap. */
	expect_error("a: &x [*x]\n", 0, "nested deeper than 64 levels");
	/* A billion laughs in miniature: ten levels of ten aliases each. */
	expect_error("l0: &a [x,x,x,x,x,x,x,x,x,x]\n"
	    "l1: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
	    "l2: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
	    "l3: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]\n"
	    "l4: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d]\n"
	    "l5: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e,*e]\n"
	    "l6: [*f,*f,*f,*f,*f,*f,*f,*f,*f,*f]\n", 0, "more than 262144 values");
	expect_error("a: [1, 2, 3, 4]\n", 4, "a[2]: more than 4 values");
	/* 65 levels of nesting. */
	for (int i = 0; i < 65; i++)
		n += (size_t)snprintf(deep + n, sizeof(deep) - n, "{a: ");
	n += (size_t)snprintf(deep + n, sizeof(deep) - n, "1");
	for (int i = 0; i < 65; i++)
		deep[n++] = '}';
	deep[n] = '\0';
	expect_error(deep, 0, "nested deeper than 64 levels");
}

static void
test_every_prefix(void **state)
{
	const char *y = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: \"x\"\n"
	    "  labels: {a: b, c: [1, 2]}\ndata:\n  k: |\n    v\n";
	struct k8s_error err;
	size_t len = strlen(y), ok = 0;

	(void)state;
	/* Every truncation either loads or fails cleanly (ASan/valgrind watch). */
	for (size_t i = 0; i <= len; i++) {
		json_t *j;
		int rc = yamljson_load(y, i, "manifest", "t.yaml", 0, &j, &err);

		assert_true(rc == 0 || rc == K8S_EINVAL);
		assert_true((rc == 0) == (j != NULL));
		ok += rc == 0;
		json_decref(j);
	}
	assert_true(ok > 0);
	assert_true(ok < len);
}

static void
test_file(void **state)
{
	char path[] = "/tmp/airlock-yamljson-XXXXXX";
	struct k8s_error err;
	json_t *j;
	int fd = mkstemp(path);
	FILE *f = fdopen(fd, "w");

	(void)state;
	fputs("a: 1\n", f);
	fclose(f);
	assert_int_equal(yamljson_load_file(path, "config", 0, &j, &err), 0);
	assert_int_equal(json_integer_value(json_object_get(j, "a")), 1);
	json_decref(j);
	/* One byte over 4 MiB. */
	f = fopen(path, "w");
	for (int i = 0; i < 4 * 1024; i++)
		fprintf(f, "%01023d\n", 0);
	fputc('\n', f);
	fclose(f);
	assert_int_equal(yamljson_load_file(path, "config", 0, &j, &err), K8S_ETOOBIG);
	assert_non_null(strstr(err.message, "is larger than 4194304 bytes"));
	unlink(path);
	assert_int_equal(yamljson_load_file(path, "config", 0, &j, &err), K8S_EINVAL);
	assert_non_null(strstr(err.message, "cannot read config '/tmp/airlock-yamljson-"));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_scalar_types),
		cmocka_unit_test(test_structure),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_every_prefix),
		cmocka_unit_test(test_file),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
