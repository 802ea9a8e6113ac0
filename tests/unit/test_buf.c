/* Unit tests: operator/buf.c, operator/k8s_error.c, operator/log.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "buf.h"
#include "clock.h"
#include "k8s_error.h"
#include "log.h"

static void
test_buf_append_and_cap(void **state)
{
	struct buf b;

	(void)state;
	buf_init(&b, 10);
	assert_int_equal(buf_append(&b, "hello", 5), 0);
	assert_int_equal(buf_append(&b, "world", 5), 0);
	assert_int_equal(b.len, 10);
	assert_string_equal(b.data, "helloworld");
	/* One byte past the cap fails and leaves the contents alone. */
	assert_int_equal(buf_append(&b, "!", 1), BUF_ETOOBIG);
	assert_int_equal(b.len, 10);
	assert_string_equal(b.data, "helloworld");
	assert_true(b.alloc <= 11);
	buf_free(&b);
}

static void
test_buf_consume_detach(void **state)
{
	struct buf b;
	size_t len;
	char *s;

	(void)state;
	buf_init(&b, 100);
	assert_int_equal(buf_append_str(&b, "line1\nline2"), 0);
	buf_consume(&b, 6);
	assert_int_equal(b.len, 5);
	assert_string_equal(b.data, "line2");
	s = buf_detach(&b, &len);
	assert_int_equal(len, 5);
	assert_string_equal(s, "line2");
	assert_null(b.data);
	free(s);
	s = buf_detach(&b, &len);	/* empty buffer: "" not NULL */
	assert_int_equal(len, 0);
	assert_string_equal(s, "");
	free(s);
	buf_consume(&b, 3);		/* consuming an empty buffer is fine */
	assert_int_equal(b.len, 0);
	buf_free(&b);
}

static void
test_buf_binary(void **state)
{
	struct buf b;
	const char bin[] = { 'a', '\0', 'b' };

	(void)state;
	buf_init(&b, 3);
	assert_int_equal(buf_append(&b, bin, 3), 0);
	assert_memory_equal(b.data, bin, 3);
	assert_int_equal(b.data[3], '\0');
	buf_free(&b);
}

static void
test_buf_read_file(void **state)
{
	char path[] = "/tmp/airlock-buf-XXXXXX";
	int fd = mkstemp(path);
	struct stat st;
	struct buf b;

	(void)state;
	assert_int_equal(write(fd, "0123456789", 10), 10);
	close(fd);
	buf_init(&b, 10);
	assert_int_equal(buf_read_file(&b, path, &st), 0);
	assert_int_equal(b.len, 10);
	assert_string_equal(b.data, "0123456789");
	assert_int_equal(st.st_size, 10);
	buf_free(&b);
	buf_init(&b, 9);	/* one byte short */
	assert_int_equal(buf_read_file(&b, path, NULL), BUF_ETOOBIG);
	buf_free(&b);
	unlink(path);
	buf_init(&b, 10);
	assert_int_equal(buf_read_file(&b, path, NULL), BUF_EIO);
	assert_int_equal(errno, ENOENT);
	buf_free(&b);
}

static void
test_errcode_from_http(void **state)
{
	(void)state;
	assert_int_equal(k8s_errcode_from_http(200, NULL), K8S_OK);
	assert_int_equal(k8s_errcode_from_http(201, NULL), K8S_OK);
	assert_int_equal(k8s_errcode_from_http(404, "NotFound"), K8S_ENOTFOUND);
	assert_int_equal(k8s_errcode_from_http(409, "AlreadyExists"), K8S_EEXIST);
	assert_int_equal(k8s_errcode_from_http(409, "Conflict"), K8S_ECONFLICT);
	assert_int_equal(k8s_errcode_from_http(409, NULL), K8S_ECONFLICT);
	assert_int_equal(k8s_errcode_from_http(410, "Expired"), K8S_EGONE);
	assert_int_equal(k8s_errcode_from_http(403, "Forbidden"), K8S_EFORBIDDEN);
	assert_int_equal(k8s_errcode_from_http(401, NULL), K8S_EUNAUTH);
	assert_int_equal(k8s_errcode_from_http(500, NULL), K8S_EHTTP);
	assert_int_equal(k8s_errcode_from_http(429, "TooManyRequests"), K8S_EHTTP);
}

static void
test_error_set_truncates(void **state)
{
	struct k8s_error e;
	char big[3000];

	(void)state;
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	assert_int_equal(k8s_error_set(&e, K8S_EHTTP, 500, "InternalError",
	    "boom: %s", big), K8S_EHTTP);
	assert_int_equal(e.http_status, 500);
	assert_string_equal(e.reason, "InternalError");
	assert_int_equal(strlen(e.message), sizeof(e.message) - 1);
	assert_memory_equal(e.message, "boom: xxx", 9);
	assert_int_equal(k8s_error_set(NULL, K8S_EIO, 0, NULL, "x"), K8S_EIO);
	k8s_error_clear(&e);
	assert_int_equal(e.code, 0);
	assert_string_equal(e.message, "");
	assert_string_equal(k8s_strerror(K8S_ECONFLICT), "conflict");
	assert_string_equal(k8s_strerror(12345), "unknown error");
}

static void
test_log_format(void **state)
{
	char *out = NULL, q[LOG_QUOTE_MAX];
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);
	enum log_level lvl;

	(void)state;
	log_set_stream(f);
	log_set_level(LOG_LEVEL_INFO);
	log_debug("hidden", "k=%d", 1);
	log_info("lease \"acquired\"", "lease=%s n=%d", "ns/x", 3);
	log_warn("plain");
	log_set_stream(NULL);
	fclose(f);
	/* time=... level=info msg="lease \"acquired\"" lease=ns/x n=3 */
	assert_non_null(strstr(out, " level=info msg=\"lease \\\"acquired\\\"\" lease=ns/x n=3\n"));
	assert_non_null(strstr(out, " level=warn msg=\"plain\"\n"));
	assert_null(strstr(out, "hidden"));
	assert_int_equal(strncmp(out, "time=", 5), 0);
	free(out);

	assert_string_equal(log_quote(q, "a b\n\x01"), "\"a b\\n\\x01\"");
	assert_int_equal(log_parse_level("warn", &lvl), 0);
	assert_int_equal(lvl, LOG_LEVEL_WARN);
	assert_int_equal(log_parse_level("loud", &lvl), -1);
}

/* Status timestamps: written as the API server writes them, read back. */
static void
test_rfc3339(void **state)
{
	char out[CLOCK_RFC3339_LEN];

	(void)state;
	clock_format_rfc3339(0, 0, out);
	assert_string_equal(out, "1970-01-01T00:00:00Z");
	clock_format_rfc3339(1795000000123456789LL, 0, out);
	assert_string_equal(out, "2026-11-18T11:06:40Z");
	clock_format_rfc3339(1795000000123456789LL, 1, out);
	assert_string_equal(out, "2026-11-18T11:06:40.123Z");
	assert_int_equal(clock_parse_rfc3339("2026-11-23T01:00:00Z"), 1795395600LL);
	assert_int_equal(clock_parse_rfc3339("2026-11-18T11:06:40.123Z"), 1795000000LL);
	assert_int_equal(clock_parse_rfc3339(NULL), -1);
	assert_int_equal(clock_parse_rfc3339("yesterday"), -1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_buf_append_and_cap),
		cmocka_unit_test(test_buf_consume_detach),
		cmocka_unit_test(test_buf_binary),
		cmocka_unit_test(test_buf_read_file),
		cmocka_unit_test(test_errcode_from_http),
		cmocka_unit_test(test_error_set_truncates),
		cmocka_unit_test(test_log_format),
		cmocka_unit_test(test_rfc3339),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
