/*
 * Unit tests: execution/codetar.c. Archives are unpacked by the system's
 * GNU tar, as the runner image's tar will, and compared byte for byte.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "codetar.h"

static char *
slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *p;
	long n;

	if (f == NULL)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	p = malloc((size_t)n + 1);
	*len = fread(p, 1, (size_t)n, f);
	p[*len] = '\0';
	fclose(f);
	return p;
}

static void
test_unpacked_by_tar(void **state)
{
	char dir[] = "/tmp/airlock-codetar-XXXXXX", path[512], cmd[1024];
	char longpath[200], bin[300];
	struct buf b;
	size_t bad = 99, len;
	FILE *f;

	(void)state;
	/* 150 bytes: stored as ustar prefix + name. */
	memset(longpath, 'd', sizeof(longpath));
	memcpy(longpath + 60, "/", 1);
	memcpy(longpath + 145, "/f.txt", 7);
	for (size_t i = 0; i < sizeof(bin); i++)
		bin[i] = (char)(i * 7);		/* NULs and high bytes */
	{
		const struct codetar_entry e[] = {
			{ "main.py", "print(open('data/in.csv').read())\n", 34 },
			{ "data/in.csv", "a,b\n1,2\n", 8 },
			{ longpath, "deep", 4 },
			{ "bin.dat", bin, sizeof(bin) },
			{ "empty", "", 0 },
			{ ".hidden", "x", 1 },
		};
		size_t n = sizeof(e) / sizeof(e[0]);

		buf_init(&b, 1 << 20);
		assert_int_equal(codetar_build(e, n, &b, &bad), 0);
		assert_int_equal(b.len, codetar_size(e, n));
		assert_int_equal(b.len % 512, 0);
		assert_non_null(mkdtemp(dir));
		snprintf(path, sizeof(path), "%s/a.tar", dir);
		f = fopen(path, "wb");
		assert_int_equal(fwrite(b.data, 1, b.len, f), b.len);
		fclose(f);
		snprintf(cmd, sizeof(cmd), "mkdir %s/x && tar -x -f %s -C %s/x", dir, path, dir);
		assert_int_equal(system(cmd), 0);
		for (size_t i = 0; i < n; i++) {
			char *got;

			snprintf(path, sizeof(path), "%s/x/%s", dir, e[i].path);
			got = slurp(path, &len);
			if (got == NULL)
				fail_msg("%s was not unpacked", e[i].path);
			assert_int_equal(len, e[i].len);
			assert_memory_equal(got, e[i].data, len);
			free(got);
		}
		/* Exactly these files, nothing else (count the regular files). */
		snprintf(cmd, sizeof(cmd), "test $(find %s/x -type f | wc -l) -eq %zu", dir, n);
		assert_int_equal(system(cmd), 0);
		/* GNU tar reads the archive as ustar and finds it whole. */
		snprintf(cmd, sizeof(cmd), "tar -t -f %s/a.tar --format=ustar >/dev/null 2>&1"
		    " && tar -t -f %s/a.tar | head -1 | grep -qx main.py", dir, dir);
		assert_int_equal(system(cmd), 0);
		snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
		assert_int_equal(system(cmd), 0);
		buf_free(&b);
	}
}

static void
test_refused_paths(void **state)
{
	char last[120], body[170];
	struct buf b;
	size_t bad;

	(void)state;
	memset(last, 'n', sizeof(last) - 1);
	last[0] = 'a', last[1] = '/';
	last[sizeof(last) - 1] = '\0';		/* a 117-byte last part */
	memset(body, 'p', sizeof(body) - 1);
	body[sizeof(body) - 1] = '\0';		/* 169 bytes, no '/' */
	{
		const char *paths[] = { "", "/etc/passwd", "../x", "a/../../x", "a//b",
			"a/", last, body, "..", NULL };

		for (size_t i = 0; paths[i]; i++) {
			const struct codetar_entry e[] = { { "ok.py", "", 0 }, { paths[i], "x", 1 } };

			buf_init(&b, 1 << 16);
			bad = 99;
			if (codetar_build(e, 2, &b, &bad) != -1)
				fail_msg("path '%s' was stored", paths[i]);
			assert_int_equal(bad, 1);
			buf_free(&b);
		}
	}
	/* Names that only look odd are fine. */
	{
		const struct codetar_entry e[] = { { "..x", "", 0 }, { "a/.b/..c", "", 0 } };

		buf_init(&b, 1 << 16);
		assert_int_equal(codetar_build(e, 2, &b, &bad), 0);
		buf_free(&b);
	}
}

static void
test_cap(void **state)
{
	static const char big[4000];
	const struct codetar_entry e[] = { { "main.py", big, sizeof(big) } };
	struct buf b;
	size_t bad;

	(void)state;
	/* 512 + 4096 + 1024 = 5632 bytes: one short is refused. */
	assert_int_equal(codetar_size(e, 1), 5632);
	buf_init(&b, 5631);
	assert_int_equal(codetar_build(e, 1, &b, &bad), -2);
	buf_free(&b);
	buf_init(&b, 5632);
	assert_int_equal(codetar_build(e, 1, &b, &bad), 0);
	assert_int_equal(b.len, 5632);
	buf_free(&b);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_unpacked_by_tar),
		cmocka_unit_test(test_refused_paths),
		cmocka_unit_test(test_cap),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
