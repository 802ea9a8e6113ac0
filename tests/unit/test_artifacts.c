/*
 * Unit tests: execution/artifacts.c on what a program can make the frame
 * hold (the runner is in the sandbox: its archive is untrusted): names
 * that climb out, other entry types, a second copy, a bad checksum, a cut
 * archive, more than the budget; the object and status it becomes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "artifacts.h"
#include "base64.h"
#include "xmalloc.h"

#define UID	"0b8f8f4e-63a4-4f54-9c1c-2a7c1d1e6f00"

/* A tar under construction. */
struct tar {
	char	*p;
	size_t	 len;
};

static void
entry(struct tar *t, const char *name, char type, const char *data, size_t len,
    int bad_sum)
{
	char h[512];
	unsigned sum = 0;

	memset(h, 0, sizeof(h));
	memcpy(h, name, strlen(name) < 100 ? strlen(name) : 100);
	snprintf(h + 100, 8, "%07o", 0644);
	snprintf(h + 124, 12, "%011o", (unsigned)len);
	h[156] = type;
	memcpy(h + 257, "ustar", 6);
	memcpy(h + 263, "00", 2);
	memset(h + 148, ' ', 8);
	for (int i = 0; i < 512; i++)
		sum += (unsigned char)h[i];
	snprintf(h + 148, 8, "%06o", sum + (bad_sum ? 1 : 0));
	t->p = xrealloc(t->p, t->len + 512 + (len + 511) / 512 * 512);
	memcpy(t->p + t->len, h, 512);
	t->len += 512;
	memset(t->p + t->len, 0, (len + 511) / 512 * 512);
	memcpy(t->p + t->len, data, len);
	t->len += (len + 511) / 512 * 512;
}

static char *
finish(struct tar *t, size_t *len)
{
	char *b;

	t->p = xrealloc(t->p, t->len + 1024);
	memset(t->p + t->len, 0, 1024);
	t->len += 1024;
	b = base64_encode(t->p, t->len, len);
	free(t->p);
	return b;
}

static void
test_parse_hostile(void **state)
{
	struct tar t = { 0 };
	struct artifacts a;
	char *b, msg[2048];
	size_t len;

	(void)state;
	entry(&t, "ok.txt", '0', "hello\n", 6, 0);
	entry(&t, "../up.txt", '0', "x", 1, 0);
	entry(&t, "/etc/abs", '0', "x", 1, 0);
	entry(&t, "a/./b", '0', "x", 1, 0);
	entry(&t, "tab\there", '0', "x", 1, 0);
	entry(&t, "link", '2', "", 0, 0);
	entry(&t, "ok.txt", '0', "again", 5, 0);
	entry(&t, "big.bin", '0', "0123456789", 10, 0);
	entry(&t, "two.csv", '0', "a,b\n", 4, 0);
	entry(&t, "three.json", '0', "{}", 2, 0);
	entry(&t, ".airlock-dropped", '0', "99\tover the byte budget\thuge.dat\n"
	    "-1\tnot a regular file\tfifo\nbroken line\n", 71, 0);
	b = finish(&t, &len);
	artifacts_parse(b, len, 12, 2, &a);
	free(b);
	assert_string_equal(a.error, "");
	assert_int_equal(a.nfiles, 2);
	assert_string_equal(a.files[0].path, "ok.txt");
	assert_int_equal(a.files[0].size, 6);
	assert_string_equal(a.files[0].sha256,
	    "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03");
	assert_string_equal(a.files[1].path, "two.csv");
	assert_string_equal(a.files[1].content_type, "text/csv");
	assert_int_equal(a.bytes, 10);
	artifacts_message(&a, msg, sizeof(msg));
	assert_string_equal(msg, "; 10 files out left out: (a bad name) (1 bytes: its name "
	    "is not a relative path of printable ASCII), (a bad name) (1 bytes: its name "
	    "is not a relative path of printable ASCII), (a bad name) (1 bytes: its name "
	    "is not a relative path of printable ASCII), (a bad name) (1 bytes: its name "
	    "is not a relative path of printable ASCII), link (not a regular file), "
	    "ok.txt (5 bytes: given twice), big.bin (10 bytes: over the byte budget), "
	    "three.json (2 bytes: past the limit on files), huge.dat (99 bytes: over the "
	    "byte budget), fifo (not a regular file)");
	{
		json_t *st = artifacts_status(&a);
		char *s = json_dumps(st, JSON_COMPACT);

		assert_string_equal(s, "[{\"path\":\"ok.txt\",\"size\":6,\"sha256\":"
		    "\"5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03\","
		    "\"contentType\":\"text/plain\"},{\"path\":\"two.csv\",\"size\":4,\"sha256\":"
		    "\"5be08c9684a1d25efcee09318204824278b08bbfb4aef973ffefd0b9d7478313\","
		    "\"contentType\":\"text/csv\"}]");
		free(s);
		json_decref(st);
	}
	{
		json_t *o = artifacts_object(&a, "t", "x", UID, "n1");
		json_t *f0 = json_array_get(json_object_get(o, "files"), 0);

		assert_string_equal(json_string_value(json_object_get(f0, "content")),
		    "aGVsbG8K");
		assert_string_equal(json_string_value(json_object_get(json_array_get(
		    json_object_get(json_object_get(o, "metadata"), "ownerReferences"), 0),
		    "uid")), UID);
		assert_string_equal(json_string_value(json_object_get(json_object_get(
		    json_object_get(o, "metadata"), "annotations"), "airlock.dev/node")), "n1");
		json_decref(o);
	}
	artifacts_free(&a);
}

/* An archive that cannot be read keeps nothing, and says why. */
static void
test_parse_unreadable(void **state)
{
	struct tar t = { 0 };
	struct artifacts a;
	char *b, msg[512];
	size_t len;

	(void)state;
	artifacts_parse("not base64!", 11, 100, 10, &a);
	assert_int_equal(a.nfiles, 0);
	artifacts_message(&a, msg, sizeof(msg));
	assert_string_equal(msg, "; no files out: the files out are not base64");
	artifacts_free(&a);

	entry(&t, "a.txt", '0', "a", 1, 1);
	b = finish(&t, &len);
	artifacts_parse(b, len, 100, 10, &a);
	free(b);
	assert_int_equal(a.nfiles, 0);
	assert_string_equal(a.error, "the files out are not a ustar archive (a bad "
	    "header checksum at byte 0)");
	artifacts_free(&a);

	/* Cut: a header promising more than there is. */
	memset(&t, 0, sizeof(t));
	entry(&t, "a.txt", '0', "abcdef", 6, 0);
	snprintf(t.p + 124, 12, "%011o", 100000);
	{
		unsigned sum = 0;

		memset(t.p + 148, ' ', 8);
		for (int i = 0; i < 512; i++)
			sum += (unsigned char)t.p[i];
		snprintf(t.p + 148, 8, "%06o", sum);
	}
	b = finish(&t, &len);
	artifacts_parse(b, len, 1 << 20, 10, &a);
	free(b);
	assert_int_equal(a.nfiles, 0);
	assert_string_equal(a.error, "the files out are cut short (at a.txt)");
	artifacts_free(&a);
}

static void
test_content_type(void **state)
{
	(void)state;
	assert_string_equal(artifacts_content_type("x", "\x89PNG\r\n\x1a\n", 8), "image/png");
	assert_string_equal(artifacts_content_type("x.csv", "\xff\xd8\xff\xe0", 4), "image/jpeg");
	assert_string_equal(artifacts_content_type("x", "%PDF-1.7", 8), "application/pdf");
	assert_string_equal(artifacts_content_type("x.csv", "a,b\n", 4), "text/csv");
	assert_string_equal(artifacts_content_type("x.json", "{}", 2), "application/json");
	assert_string_equal(artifacts_content_type("x.svg", "<svg/>", 6), "image/svg+xml");
	assert_string_equal(artifacts_content_type("x.txt", "caf\xc3\xa9", 5), "text/plain");
	assert_string_equal(artifacts_content_type("x.txt", "\xc3", 1),
	    "application/octet-stream");
	assert_string_equal(artifacts_content_type("x", "a\0b", 3), "application/octet-stream");
	assert_string_equal(artifacts_content_type("x", "", 0), "text/plain");
}

static void
test_nonce(void **state)
{
	char a[33], b[33];

	(void)state;
	artifacts_nonce(UID, a);
	artifacts_nonce("another", b);
	assert_int_equal(strlen(a), 32);
	assert_string_not_equal(a, b);
	artifacts_nonce(UID, b);
	assert_string_equal(a, b);
}

/* One step report from an archive of entries (name, text) pairs. */
static struct step_report
report_of(const char *const *e, char *value, size_t vcap)
{
	struct tar t = { 0 };
	struct artifacts a;
	struct step_report r;
	char *b;
	size_t len;

	for (; e[0]; e += 2)
		entry(&t, e[0], '0', e[1], strlen(e[1]), 0);
	b = finish(&t, &len);
	artifacts_parse(b, len, 1000, 4, &a);
	assert_string_equal(a.error, "");
	/* The report's entries are not files out. */
	assert_int_equal(a.nfiles, 0);
	assert_int_equal(a.ndropped, 0);
	r = a.step;
	value[0] = '\0';
	if (r.value != NULL)
		snprintf(value, vcap, "%.*s", (int)r.value_len, r.value);
	r.value = NULL;
	artifacts_free(&a);
	free(b);
	return r;
}

/*
 * A session step's report (warm --step): its fields; anything malformed
 * is no report at all; the last of each entry wins; a value is cut to
 * ARTIFACTS_VALUE_MAX.
 */
static void
test_step_report(void **state)
{
	static char big[ARTIFACTS_VALUE_MAX + 100];
	char v[ARTIFACTS_VALUE_MAX + 200];
	struct step_report r;

	(void)state;
	r = report_of((const char *const[]){ ".airlock-step", "timeout 124 1 50 7\n",
	    ".airlock-value", "'x'", NULL }, v, sizeof(v));
	assert_int_equal(r.kind, STEP_TIMEOUT);
	assert_int_equal(r.code, 124);
	assert_int_equal(r.restarted, 1);
	assert_int_equal(r.dropped, 50);
	assert_int_equal(r.restarts, 7);
	assert_string_equal(v, "'x'");
	/* An older runner's four fields: the count unknown. */
	r = report_of((const char *const[]){ ".airlock-step", "ok 0 0 0\n", NULL }, v,
	    sizeof(v));
	assert_int_equal(r.kind, STEP_OK);
	assert_int_equal(r.code, 0);
	assert_int_equal(r.restarted, 0);
	assert_int_equal(r.dropped, 0);
	assert_int_equal(r.restarts, -1);
	assert_string_equal(v, "");
	r = report_of((const char *const[]){ ".airlock-step", "died 137 2 9\n", NULL },
	    v, sizeof(v));
	assert_int_equal(r.kind, STEP_DIED);
	assert_int_equal(r.restarted, 2);
	assert_int_equal(r.dropped, 9);
	assert_int_equal(r.restarts, -1);
	/* Died between steps (3); the count's bounds. */
	r = report_of((const char *const[]){ ".airlock-step", "error 1 3 0 1\n", NULL },
	    v, sizeof(v));
	assert_int_equal(r.kind, STEP_ERROR);
	assert_int_equal(r.code, 1);
	assert_int_equal(r.restarted, 3);
	assert_int_equal(r.restarts, 1);
	r = report_of((const char *const[]){ ".airlock-step", "ok 0 0 0 0\n", NULL }, v,
	    sizeof(v));
	assert_int_equal(r.kind, STEP_OK);
	assert_int_equal(r.restarts, 0);
	r = report_of((const char *const[]){ ".airlock-step", "exit 0 1 0 1000000\n",
	    NULL }, v, sizeof(v));
	assert_int_equal(r.kind, STEP_EXIT);
	assert_int_equal(r.restarts, 1000000);
	/* No report: unknown too. */
	r = report_of((const char *const[]){ ".airlock-value", "1", NULL }, v, sizeof(v));
	assert_int_equal(r.kind, STEP_NONE);
	assert_int_equal(r.restarts, -1);
	/* The program's own file first, warm's last: warm's counts. */
	r = report_of((const char *const[]){ ".airlock-step", "ok 0 0 0\n",
	    ".airlock-step", "exit 3 1 0\n", NULL }, v, sizeof(v));
	assert_int_equal(r.kind, STEP_EXIT);
	assert_int_equal(r.code, 3);
	assert_int_equal(r.restarts, -1);
	/*
	 * 3 only with the count (no older runner says it); a count out of
	 * range, or not the last field, or not after one space.
	 */
	static const char *const bad[] = { "ok 0 0 0", "ok 0 0 0\nmore\n", "fine 0 0 0\n",
	    "ok 256 0 0\n", "ok -1 0 0\n", "ok 0 3 0\n", "ok 0 0 -5\n", "ok 0 0\n",
	    "OK 0 0 0\n", "", "ok 0 4 0 0\n", "ok 0 -1 0 0\n", "ok 0 0 0 -1\n",
	    "ok 0 0 0 1000001\n", "ok 0 0 0 99999999999999999999\n", "ok 0 0 0 1 2\n",
	    "ok 0 0 0 1", "ok 0 0 0 1 \n", "ok 0 0 0x1\n", "ok 0 0 0 x\n", "ok 0 0 0 \n",
	    "ok 256 0 0 0\n", "ok 0 0 -5 0\n" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		r = report_of((const char *const[]){ ".airlock-step", bad[i], NULL }, v,
		    sizeof(v));
		if (r.kind != STEP_NONE)
			fail_msg("report '%s' taken as kind %d", bad[i], r.kind);
		if (r.restarts != -1)
			fail_msg("report '%s' gave restarts %lld", bad[i], r.restarts);
	}
	memset(big, 'a', sizeof(big) - 1);
	r = report_of((const char *const[]){ ".airlock-value", big, NULL }, v, sizeof(v));
	assert_int_equal(r.kind, STEP_NONE);
	assert_int_equal(strlen(v), ARTIFACTS_VALUE_MAX);
	/* Cut between characters: a 2-byte one across the limit goes whole. */
	big[ARTIFACTS_VALUE_MAX - 1] = (char)0xc3;
	big[ARTIFACTS_VALUE_MAX] = (char)0xa9;
	r = report_of((const char *const[]){ ".airlock-value", big, NULL }, v, sizeof(v));
	assert_int_equal(strlen(v), ARTIFACTS_VALUE_MAX - 1);
	/* Not text (the program wrote it): no value. */
	r = report_of((const char *const[]){ ".airlock-value", "a\xff", NULL }, v,
	    sizeof(v));
	assert_string_equal(v, "");
	r = report_of((const char *const[]){ ".airlock-value", "a\x01b", NULL }, v,
	    sizeof(v));
	assert_string_equal(v, "");
	r = report_of((const char *const[]){ ".airlock-value", "caf\xc3\xa9\n", NULL },
	    v, sizeof(v));
	assert_string_equal(v, "caf\xc3\xa9\n");
	/* What jansson refuses: overlong, a surrogate, past U+10FFFF. */
	static const char *const nottext[] = { "\xc0\xaf", "\xe0\x80\xaf",
	    "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xf5\x80\x80\x80" };
	for (size_t i = 0; i < sizeof(nottext) / sizeof(nottext[0]); i++) {
		r = report_of((const char *const[]){ ".airlock-value", nottext[i], NULL },
		    v, sizeof(v));
		if (v[0] != '\0')
			fail_msg("value %zu taken as text", i);
	}
	/* The highest there is, and a 3-byte one past the surrogates: text. */
	r = report_of((const char *const[]){ ".airlock-value", "\xf4\x8f\xbf\xbf\xee\x80\x80",
	    NULL }, v, sizeof(v));
	assert_string_equal(v, "\xf4\x8f\xbf\xbf\xee\x80\x80");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_hostile),
		cmocka_unit_test(test_parse_unreadable),
		cmocka_unit_test(test_content_type),
		cmocka_unit_test(test_nonce),
		cmocka_unit_test(test_step_report),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
