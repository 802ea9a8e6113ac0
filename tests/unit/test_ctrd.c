/*
 * Unit tests: node-agent/pb.c and the parts of node-agent/ctrd.c that
 * need no containerd: gRPC framing at every split point, event envelope
 * decoding, and malformed protobuf of every kind. The calls themselves
 * run against a real containerd in tests/integration/test_ctrd_it.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "ctrd.h"
#include "pb.h"

/* Encode a varint and read it back; then the bytes it must take. */
static void
test_varint_roundtrip(void **state)
{
	static const uint64_t v[] = { 0, 1, 127, 128, 300, 16383, 16384,
	    UINT32_MAX, (uint64_t)INT64_MAX, UINT64_MAX };
	static const size_t len[] = { 1, 1, 1, 2, 2, 2, 3, 5, 9, 10 };

	(void)state;
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		struct buf b;
		struct pb_reader r;
		struct pb_field f;

		buf_init(&b, 64);
		assert_int_equal(pb_put_uint(&b, 7, v[i]), 0);
		assert_int_equal(b.len, 1 + len[i]);
		pb_reader_init(&r, b.data, b.len);
		assert_int_equal(pb_next(&r, &f), 1);
		assert_int_equal(f.num, 7);
		assert_int_equal(f.wire, PB_VARINT);
		assert_true(f.u == v[i]);
		assert_int_equal(pb_next(&r, &f), 0);
		buf_free(&b);
	}
}

/* Every way a message can lie: each is PB_EBAD, none reads past the end. */
static void
test_malformed(void **state)
{
	static const struct { const char *what; const char *p; size_t n; } bad[] = {
		{ "varint of 11 bytes", "\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 12 },
		{ "10th varint byte > 1", "\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\x02", 11 },
		{ "varint cut short", "\x08\xff", 2 },
		{ "key cut short", "\x80", 1 },
		{ "field number 0", "\x00\x01", 2 },
		{ "length past the end", "\x0a\x05" "abc", 5 },
		{ "huge length", "\x0a\xff\xff\xff\xff\x0f", 6 },
		{ "fixed64 cut short", "\x09" "1234567", 8 },
		{ "fixed32 cut short", "\x0d" "123", 4 },
		{ "start group", "\x0b", 1 },
		{ "end group", "\x0c", 1 },
		{ "wire type 6", "\x0e\x00", 2 },
		{ "wire type 7", "\x0f\x00", 2 },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		/* An exact-size heap copy: ASan sees any read past it. */
		char *p = malloc(bad[i].n);
		struct pb_reader r;
		struct pb_field f;
		int rc;

		memcpy(p, bad[i].p, bad[i].n);
		pb_reader_init(&r, p, bad[i].n);
		while ((rc = pb_next(&r, &f)) == 1)
			;
		if (rc != PB_EBAD)
			fail_msg("%s: got %d, want PB_EBAD", bad[i].what, rc);
		free(p);
	}
}

/* Known-good fields of each wire type, and unknown ones skipped. */
static void
test_fields(void **state)
{
	static const char msg[] =
	    "\x08\x96\x01"			/* 1: varint 150 */
	    "\x12\x03" "abc"			/* 2: "abc" */
	    "\x19\x01\x02\x03\x04\x05\x06\x07\x08"	/* 3: fixed64 */
	    "\x25\x01\x00\x00\x80"		/* 4: fixed32 */
	    "\x2a\x00";				/* 5: empty bytes */
	struct pb_reader r;
	struct pb_field f;
	char *s;

	(void)state;
	pb_reader_init(&r, msg, sizeof(msg) - 1);
	assert_int_equal(pb_next(&r, &f), 1);
	assert_int_equal(f.num, 1);
	assert_int_equal(f.u, 150);
	assert_int_equal(pb_next(&r, &f), 1);
	assert_int_equal(f.wire, PB_LEN);
	s = pb_strdup(&f);
	assert_string_equal(s, "abc");
	free(s);
	assert_int_equal(pb_next(&r, &f), 1);
	assert_true(f.u == 0x0807060504030201ULL);
	assert_int_equal(pb_next(&r, &f), 1);
	assert_true(f.u == 0x80000001ULL);
	assert_int_equal(pb_next(&r, &f), 1);
	assert_int_equal(f.num, 5);
	assert_int_equal(f.len, 0);
	s = pb_strdup(&f);
	assert_string_equal(s, "");
	free(s);
	assert_int_equal(pb_next(&r, &f), 0);
	/* A string holding NUL is not a C string. */
	pb_reader_init(&r, "\x12\x03" "a\0b", 5);
	assert_int_equal(pb_next(&r, &f), 1);
	assert_null(pb_strdup(&f));
}

/* An events.Envelope holding a TaskExit, as containerd sends it. */
static size_t
exit_envelope_of(struct buf *b, uint32_t status, const char *id)
{
	struct buf ts, ex, any, exts;

	buf_init(&ts, 64);
	buf_init(&ex, 256);
	buf_init(&any, 512);
	buf_init(&exts, 64);
	assert_int_equal(pb_put_uint(&ts, 1, 1795000000), 0);
	assert_int_equal(pb_put_uint(&ts, 2, 123456789), 0);
	assert_int_equal(pb_put_uint(&exts, 1, 1795000001), 0);
	assert_int_equal(pb_put_uint(&exts, 2, 5), 0);
	assert_int_equal(pb_put_str(&ex, 1, "c0ffee"), 0);
	assert_int_equal(pb_put_str(&ex, 2, id), 0);
	assert_int_equal(pb_put_uint(&ex, 3, 4242), 0);
	assert_int_equal(pb_put_uint(&ex, 4, status), 0);
	assert_int_equal(pb_put_bytes(&ex, 5, exts.data, exts.len), 0);
	assert_int_equal(pb_put_str(&any, 1, "containerd.events.TaskExit"), 0);
	assert_int_equal(pb_put_bytes(&any, 2, ex.data, ex.len), 0);
	assert_int_equal(pb_put_bytes(b, 1, ts.data, ts.len), 0);
	assert_int_equal(pb_put_str(b, 2, "k8s.io"), 0);
	assert_int_equal(pb_put_str(b, 3, "/tasks/exit"), 0);
	assert_int_equal(pb_put_bytes(b, 4, any.data, any.len), 0);
	buf_free(&ts);
	buf_free(&ex);
	buf_free(&any);
	buf_free(&exts);
	return b->len;
}

static size_t
exit_envelope(struct buf *b, uint32_t status)
{
	return exit_envelope_of(b, status, "c0ffee");
}

static void
test_envelope(void **state)
{
	struct buf b;
	struct ctrd_event ev;
	char *scratch;

	(void)state;
	buf_init(&b, 4096);
	exit_envelope(&b, 137);
	scratch = malloc(b.len + 4);
	assert_int_equal(ctrd_decode_envelope(b.data, b.len, &ev, scratch), 0);
	assert_int_equal(ev.kind, CTRD_EV_TASK_EXIT);
	assert_true(ev.ts_ns == 1795000000123456789LL);
	assert_string_equal(ev.ns, "k8s.io");
	assert_string_equal(ev.topic, "/tasks/exit");
	assert_string_equal(ev.container_id, "c0ffee");
	assert_string_equal(ev.exec_id, "c0ffee");
	assert_int_equal(ev.pid, 4242);
	assert_int_equal(ev.exit_status, 137);
	assert_true(ev.exited_ns == 1795000001000000005LL);
	/* Every truncation of it is refused or decodes without the exit. */
	for (size_t n = 0; n < b.len; n++) {
		char *p = malloc(n ? n : 1);

		memcpy(p, b.data, n);
		if (ctrd_decode_envelope(p, n, &ev, scratch) == 0 &&
		    ev.kind == CTRD_EV_TASK_EXIT && ev.exit_status == 137 &&
		    ev.exited_ns == 1795000001000000005LL)
			fail_msg("a %zu-byte prefix decoded as the whole", n);
		free(p);
	}
	free(scratch);
	buf_free(&b);
	/* A kubectl exec's process exiting names its exec id, not the container's. */
	buf_init(&b, 4096);
	exit_envelope_of(&b, 0, "exec-7");
	scratch = malloc(b.len + 4);
	assert_int_equal(ctrd_decode_envelope(b.data, b.len, &ev, scratch), 0);
	assert_string_equal(ev.container_id, "c0ffee");
	assert_string_equal(ev.exec_id, "exec-7");
	free(scratch);
	buf_free(&b);
}

struct got {
	int	n;
	size_t	len[4];
	char	first[4];
};

static int
collect(void *arg, const uint8_t *msg, size_t len)
{
	struct got *g = arg;

	if (g->n < 4) {
		g->len[g->n] = len;
		g->first[g->n] = len ? (char)msg[0] : '-';
	}
	g->n++;
	return 0;
}

/* Three messages (one empty) fed at every split point of the stream. */
static void
test_framer_splits(void **state)
{
	static const char stream[] =
	    "\x00\x00\x00\x00\x03" "abc"
	    "\x00\x00\x00\x00\x00"
	    "\x00\x00\x00\x01\x02";	/* then 258 bytes of "x" */
	char big[5 + 3 + 5 + 5 + 258];
	size_t n = sizeof(big);

	(void)state;
	memcpy(big, stream, 18);
	memset(big + 18, 'x', 258);
	for (size_t cut = 0; cut <= n; cut++) {
		for (size_t cut2 = cut; cut2 <= n; cut2 += 7) {
			struct ctrd_framer f;
			struct got g = { 0 };

			ctrd_framer_init(&f);
			assert_int_equal(ctrd_framer_feed(&f, big, cut, collect, &g), 0);
			assert_int_equal(ctrd_framer_feed(&f, big + cut, cut2 - cut, collect, &g), 0);
			assert_int_equal(ctrd_framer_feed(&f, big + cut2, n - cut2, collect, &g), 0);
			assert_int_equal(g.n, 3);
			assert_int_equal(g.len[0], 3);
			assert_int_equal(g.first[0], 'a');
			assert_int_equal(g.len[1], 0);
			assert_int_equal(g.len[2], 258);
			assert_int_equal(g.first[2], 'x');
			ctrd_framer_free(&f);
		}
	}
}

static int
stop_now(void *arg, const uint8_t *msg, size_t len)
{
	(void)arg; (void)msg; (void)len;
	return 42;
}

static void
test_framer_refuses(void **state)
{
	struct ctrd_framer f;
	struct got g = { 0 };

	(void)state;
	/* Past CTRD_MSG_MAX: refused from the header alone, and for good. */
	ctrd_framer_init(&f);
	assert_int_equal(ctrd_framer_feed(&f, "\x00\x00\x40\x00\x01", 5, collect, &g), K8S_ETOOBIG);
	assert_int_equal(ctrd_framer_feed(&f, "\x00\x00\x00\x00\x00", 5, collect, &g), K8S_ETOOBIG);
	assert_int_equal(g.n, 0);
	ctrd_framer_free(&f);
	/* Compressed: we never ask for it. */
	ctrd_framer_init(&f);
	assert_int_equal(ctrd_framer_feed(&f, "\x01\x00\x00\x00\x00", 5, collect, &g), K8S_EINVAL);
	ctrd_framer_free(&f);
	/* The handler's code comes back unchanged. */
	ctrd_framer_init(&f);
	assert_int_equal(ctrd_framer_feed(&f, "\x00\x00\x00\x00\x01z", 6, stop_now, NULL), 42);
	ctrd_framer_free(&f);
	/* A message cut off mid-way is held, not delivered (and freed). */
	ctrd_framer_init(&f);
	assert_int_equal(ctrd_framer_feed(&f, "\x00\x00\x00\x00\x09" "abc", 8, collect, &g), 0);
	assert_int_equal(g.n, 0);
	ctrd_framer_free(&f);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_varint_roundtrip),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_fields),
		cmocka_unit_test(test_envelope),
		cmocka_unit_test(test_framer_splits),
		cmocka_unit_test(test_framer_refuses),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
