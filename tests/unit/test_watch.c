/*
 * Unit tests: operator/watch.c. The decoder is fed streams split at every
 * pair of byte boundaries, byte by byte, with oversized lines and malformed
 * events; the watch loop runs against a scripted server for 410 Gone,
 * bookmarks, resumption and backoff. tests/integration has the real thing.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "client.h"
#include "clock.h"
#include "fakeapi.h"
#include "itutil.h"
#include "watch.h"

#define STREAM \
	"{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"11\"}}}\n" \
	"\n" \
	"{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"ConfigMap\",\"metadata\":{\"resourceVersion\":\"12\"}}}\r\n" \
	"{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"13\"},\"data\":{\"k\":\"v\\u00e9\\u0000\"}}}\n" \
	"{\"type\":\"DELETED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"14\"}}}\n" \
	"{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":410,\"reason\":\"Expired\",\"message\":\"too old resource version: 1 (14)\"}}\n"

static const char *const expect[] = {
	"ADDED a 11", "BOOKMARK - 12", "MODIFIED a 13", "DELETED a 14", "ERROR 410",
};
#define NEXPECT (sizeof(expect) / sizeof(expect[0]))

struct seen {
	char	ev[16][96];
	int	n;
	int	stop_after;	/* return 99 after this many; 0 = never */
};

static int
record(void *arg, const struct watch_event *ev)
{
	static const char *const names[] = { "ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR" };
	struct seen *s = arg;
	json_t *md = json_object_get(ev->object, "metadata");
	const char *name = json_string_value(json_object_get(md, "name"));
	const char *rv = json_string_value(json_object_get(md, "resourceVersion"));

	if (s->n < 16) {
		if (ev->type == WATCH_ERROR)
			snprintf(s->ev[s->n], sizeof(s->ev[0]), "ERROR %lld",
			    (long long)json_integer_value(json_object_get(ev->object, "code")));
		else
			snprintf(s->ev[s->n], sizeof(s->ev[0]), "%s %s %s", names[ev->type],
			    name ? name : "-", rv ? rv : "-");
	}
	s->n++;
	return (s->stop_after && s->n >= s->stop_after) ? 99 : 0;
}

static void
check_seen(const struct seen *s)
{
	assert_int_equal(s->n, NEXPECT);
	for (size_t i = 0; i < NEXPECT; i++)
		assert_string_equal(s->ev[i], expect[i]);
}

/*
 * A cut point the pair test uses. Under valgrind (100k decodes took 52 s
 * there) only every 11th byte and the bytes next to a line end: each kind
 * of chunk the full run makes (empty, ending in '\r', a split "\r\n", a
 * line whole or in three) is still made; plain and ASan cut everywhere.
 */
static int
cut_point(const char *st, size_t len, size_t k, int sparse)
{
	if (!sparse || k == 0 || k == len || k % 11 == 0)
		return 1;
	for (size_t d = k > 1 ? k - 2 : 0; d <= k + 1 && d < len; d++)
		if (st[d] == '\n' || st[d] == '\r')
			return 1;
	return 0;
}

static void
test_decoder_every_split(void **state)
{
	const char *st = STREAM;
	size_t len = strlen(st);
	int sparse = it_under_valgrind();
	struct watch_decoder d;
	struct k8s_error err;
	long pairs = 0;

	(void)state;
	watch_decoder_init(&d, 4096);
	/* Every pair of cut points: three chunks, each possibly empty. */
	for (size_t i = 0; i <= len; i++) {
		if (!cut_point(st, len, i, sparse))
			continue;
		for (size_t j = i; j <= len; j++) {
			struct seen s = { .n = 0 };

			if (!cut_point(st, len, j, sparse))
				continue;
			watch_decoder_reset(&d);
			assert_int_equal(watch_decoder_feed(&d, st, i, record, &s, &err), 0);
			assert_int_equal(watch_decoder_feed(&d, st + i, j - i, record, &s, &err), 0);
			assert_int_equal(watch_decoder_feed(&d, st + j, len - j, record, &s, &err), 0);
			check_seen(&s);
			assert_int_equal(d.line.len, 0);
			pairs++;
		}
	}
	watch_decoder_free(&d);
	if (!sparse)
		assert_int_equal(pairs, (long)((len + 1) * (len + 2) / 2));
	print_message("# %ld pairs of cut points over %zu bytes\n", pairs, len);
}

static void
test_decoder_byte_by_byte(void **state)
{
	const char *st = STREAM;
	struct watch_decoder d;
	struct k8s_error err;
	struct seen s = { .n = 0 };

	(void)state;
	watch_decoder_init(&d, 4096);
	for (size_t i = 0; st[i]; i++)
		assert_int_equal(watch_decoder_feed(&d, st + i, 1, record, &s, &err), 0);
	check_seen(&s);
	watch_decoder_free(&d);
}

static void
test_decoder_partial_line_kept(void **state)
{
	struct watch_decoder d;
	struct k8s_error err;
	struct seen s = { .n = 0 };
	const char *half = "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"x\"";

	(void)state;
	watch_decoder_init(&d, 4096);
	assert_int_equal(watch_decoder_feed(&d, half, strlen(half), record, &s, &err), 0);
	assert_int_equal(s.n, 0);
	assert_int_equal(d.line.len, strlen(half));
	/* A new connection drops the torn line instead of gluing it on. */
	watch_decoder_reset(&d);
	assert_int_equal(watch_decoder_feed(&d, STREAM, strlen(STREAM), record, &s, &err), 0);
	check_seen(&s);
	watch_decoder_free(&d);
}

static void
test_decoder_oversized_line(void **state)
{
	char line[200];
	struct watch_decoder d;
	struct k8s_error err;
	struct seen s = { .n = 0 };
	/* Exactly 64 bytes before the newline is accepted. */
	const char *ok64 = "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"abcdefghijklmn\"}}}";

	(void)state;
	assert_int_equal(strlen(ok64), 64);
	watch_decoder_init(&d, 64);
	snprintf(line, sizeof(line), "%s\n", ok64);
	assert_int_equal(watch_decoder_feed(&d, line, strlen(line), record, &s, &err), 0);
	assert_int_equal(s.n, 1);

	/* 65 bytes, whole: refused. */
	snprintf(line, sizeof(line), "%s \n", ok64);
	assert_int_equal(watch_decoder_feed(&d, line, strlen(line), record, &s, &err), K8S_ETOOBIG);
	assert_string_equal(err.message, "watch event longer than 64 bytes");
	assert_int_equal(s.n, 1);

	/* 65 bytes arriving in pieces, no newline yet: refused as it grows. */
	watch_decoder_reset(&d);
	assert_int_equal(watch_decoder_feed(&d, line, 40, record, &s, &err), 0);
	assert_int_equal(watch_decoder_feed(&d, line + 40, 25, record, &s, &err), K8S_ETOOBIG);
	assert_int_equal(d.line.len, 0);

	/* A huge unterminated flood never grows the buffer past the cap. */
	watch_decoder_reset(&d);
	memset(line, 'x', sizeof(line));
	assert_int_equal(watch_decoder_feed(&d, line, sizeof(line), record, &s, &err), K8S_ETOOBIG);
	assert_true(d.line.alloc <= 65);

	/* Usable again after a reset. */
	watch_decoder_reset(&d);
	snprintf(line, sizeof(line), "%s\n", ok64);
	assert_int_equal(watch_decoder_feed(&d, line, strlen(line), record, &s, &err), 0);
	assert_int_equal(s.n, 2);
	watch_decoder_free(&d);
}

static void
test_decoder_malformed(void **state)
{
	static const struct { const char *line; const char *msg; } bad[] = {
		{ "not json\n", "watch event is not JSON" },
		{ "{\"type\":\"ADDED\",\"object\":{\n", "watch event is not JSON" },
		{ "[1,2]\n", "watch event lacks a type" },
		{ "{\"object\":{}}\n", "watch event lacks a type" },
		{ "{\"type\":\"ADDED\"}\n", "watch event lacks an object" },
		{ "{\"type\":\"ADDED\",\"object\":\"s\"}\n", "watch event lacks an object" },
		{ "{\"type\":7,\"object\":{}}\n", "watch event lacks a type" },
		{ "{\"type\":\"EXPLODED\",\"object\":{}}\n", "unknown watch event type 'EXPLODED'" },
		/* Invalid UTF-8 inside a string. */
		{ "{\"type\":\"ADDED\",\"object\":{\"k\":\"\xff\xfe\"}}\n", "watch event is not JSON" },
		/* Overlong encoding of '/'. */
		{ "{\"type\":\"ADDED\",\"object\":{\"k\":\"\xc0\xaf\"}}\n", "watch event is not JSON" },
	};
	struct watch_decoder d;
	struct k8s_error err;

	(void)state;
	watch_decoder_init(&d, 4096);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct seen s = { .n = 0 };

		watch_decoder_reset(&d);
		assert_int_equal(watch_decoder_feed(&d, bad[i].line, strlen(bad[i].line),
		    record, &s, &err), K8S_EINVAL);
		assert_int_equal(s.n, 0);
		if (strstr(err.message, bad[i].msg) == NULL)
			fail_msg("line %zu: '%s' lacks '%s'", i, err.message, bad[i].msg);
	}
	/* An embedded NUL is not JSON either. */
	{
		const char nul[] = "{\"type\":\"ADDED\",\0\"object\":{}}\n";
		struct seen s = { .n = 0 };

		watch_decoder_reset(&d);
		assert_int_equal(watch_decoder_feed(&d, nul, sizeof(nul) - 1, record, &s, &err), K8S_EINVAL);
	}
	watch_decoder_free(&d);
}

static void
test_decoder_handler_stops(void **state)
{
	struct watch_decoder d;
	struct k8s_error err;
	struct seen s = { .stop_after = 2 };

	(void)state;
	watch_decoder_init(&d, 4096);
	assert_int_equal(watch_decoder_feed(&d, STREAM, strlen(STREAM), record, &s, &err), 99);
	assert_int_equal(s.n, 2);
	watch_decoder_free(&d);
}

/* The watch loop against the scripted server. */
struct loop {
	struct watch	*w;
	int		 relists;
	char		 events[8][64];
	int		 nev;
	int		 stop_at;	/* watch_stop after this many events */
};

static int
loop_relist(void *arg, char **rv, struct k8s_error *err)
{
	struct loop *l = arg;

	(void)err;
	l->relists++;
	*rv = strdup(l->relists == 1 ? "100" : "200");
	return 0;
}

static int
loop_event(void *arg, const struct watch_event *ev)
{
	struct loop *l = arg;

	if (l->nev < 8)
		snprintf(l->events[l->nev], sizeof(l->events[0]), "%d %s", (int)ev->type,
		    k8s_obj_name(ev->object));
	if (++l->nev == l->stop_at)
		watch_stop(l->w);
	return 0;
}

#define WPATH "GET /api/v1/namespaces/ns1/configmaps?watch=1&allowWatchBookmarks=true&resourceVersion="

static void
test_watch_resume_410_relist(void **state)
{
	struct fakeapi *api = fakeapi_start();
	struct k8s_config *cfg = fakeapi_config(api, NULL);
	struct watch_opts wo = { .res = &k8s_res_configmaps, .ns = "ns1",
	    .timeout_seconds = 7, .backoff_initial_ms = 50, .label_selector = "a=b" };
	struct loop l = { .stop_at = 3 };
	struct watch_handlers wh = { loop_relist, loop_event, NULL, &l };
	struct watch_stats st;
	struct k8s_client *c;
	struct k8s_error err;
	char *rv;

	(void)state;
	assert_int_equal(k8s_client_new(cfg, NULL, &c, &err), 0);
	/* 1: an event and a bookmark, then the server ends the stream. */
	fakeapi_push(api, 200, NULL,
	    "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"101\"}}}\n"
	    "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"105\"}}}\n", 0);
	/* 2: resumed at 105, which has been compacted: in-band 410. */
	fakeapi_push(api, 200, NULL,
	    "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":410,\"reason\":\"Expired\","
	    "\"message\":\"too old resource version: 105 (150)\"}}\n", 0);
	/* 3: after the relist (rv 200), a 500: back off, same rv. */
	fakeapi_push(api, 500, NULL, "{\"kind\":\"Status\",\"code\":500,\"message\":\"boom\"}", 0);
	/* 4: an HTTP-level 410 also means relist. */
	fakeapi_push(api, 410, NULL, "{\"kind\":\"Status\",\"code\":410,\"reason\":\"Gone\",\"message\":\"gone\"}", 0);
	/* 5: events flow again; the third event stops the watch. */
	fakeapi_push(api, 200, NULL,
	    "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"b\",\"resourceVersion\":\"201\"}}}\n"
	    "{\"type\":\"DELETED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"202\"}}}\n", 0);
	l.w = watch_new(c, &wo, &wh);
	assert_int_equal(watch_run(l.w, NULL), K8S_ECANCELED);

	assert_int_equal(l.relists, 3);
	assert_int_equal(l.nev, 3);
	assert_string_equal(l.events[0], "0 a");
	assert_string_equal(l.events[1], "1 b");
	assert_string_equal(l.events[2], "2 a");
	assert_int_equal(fakeapi_count(api), 5);
	assert_string_equal(fakeapi_request(api, 0), WPATH "100&timeoutSeconds=7&labelSelector=a%3Db");
	assert_string_equal(fakeapi_request(api, 1), WPATH "105&timeoutSeconds=7&labelSelector=a%3Db");
	assert_string_equal(fakeapi_request(api, 2), WPATH "200&timeoutSeconds=7&labelSelector=a%3Db");
	assert_string_equal(fakeapi_request(api, 3), WPATH "200&timeoutSeconds=7&labelSelector=a%3Db");
	assert_string_equal(fakeapi_request(api, 4), WPATH "200&timeoutSeconds=7&labelSelector=a%3Db");
	watch_get_stats(l.w, &st);
	assert_int_equal(st.connects, 5);
	assert_int_equal(st.relists, 3);
	assert_int_equal(st.expired, 2);
	assert_int_equal(st.bookmarks, 1);
	rv = watch_resource_version(l.w);
	assert_string_equal(rv, "202");
	free(rv);
	watch_free(l.w);
	k8s_client_free(c);
	k8s_config_free(cfg);
	fakeapi_stop(api);
}

static void
test_watch_oversized_reconnects(void **state)
{
	struct fakeapi *api = fakeapi_start();
	struct k8s_config *cfg = fakeapi_config(api, NULL);
	struct watch_opts wo = { .res = &k8s_res_configmaps, .ns = "ns1",
	    .timeout_seconds = 5, .backoff_initial_ms = 20, .max_line = 128 };
	struct loop l = { .stop_at = 2 };
	struct watch_handlers wh = { loop_relist, loop_event, NULL, &l };
	struct k8s_client *c;
	struct k8s_error err;
	char big[512];

	(void)state;
	assert_int_equal(k8s_client_new(cfg, NULL, &c, &err), 0);
	snprintf(big, sizeof(big),
	    "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"7\"}}}\n"
	    "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"%0300d\"}}}\n", 0);
	fakeapi_push(api, 200, NULL, big, 0);
	fakeapi_push(api, 200, NULL,
	    "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"c\",\"resourceVersion\":\"9\"}}}\n", 0);
	l.w = watch_new(c, &wo, &wh);
	assert_int_equal(watch_run(l.w, "5"), K8S_ECANCELED);
	/* No relist: the stream broke, not the resourceVersion. */
	assert_int_equal(l.relists, 0);
	assert_string_equal(l.events[0], "0 a");
	assert_string_equal(l.events[1], "0 c");
	assert_string_equal(fakeapi_request(api, 1), WPATH "7&timeoutSeconds=5");
	watch_free(l.w);
	k8s_client_free(c);
	k8s_config_free(cfg);
	fakeapi_stop(api);
}

struct stopper {
	struct watch	*w;
	long		 after_ms;
	struct timespec	 at;		/* when it asked */
};

static void *
stop_later(void *arg)
{
	struct stopper *s = arg;

	usleep((useconds_t)s->after_ms * 1000);
	clock_gettime(CLOCK_MONOTONIC, &s->at);
	watch_stop(s->w);
	return NULL;
}

static void
test_watch_stop_is_prompt(void **state)
{
	struct fakeapi *api = fakeapi_start();
	struct k8s_config *cfg = fakeapi_config(api, NULL);
	struct watch_opts wo = { .res = &k8s_res_configmaps, .ns = "ns1" };
	struct loop l = { 0 };
	struct watch_handlers wh = { loop_relist, loop_event, NULL, &l };
	struct k8s_client *c;
	struct k8s_error err;
	struct stopper s;
	struct timespec t1;
	pthread_t th;
	long ms;

	(void)state;
	assert_int_equal(k8s_client_new(cfg, NULL, &c, &err), 0);
	fakeapi_push(api, 200, NULL, "", 1500);	/* a quiet, open watch */
	l.w = watch_new(c, &wo, &wh);
	s = (struct stopper){ l.w, 200, { 0, 0 } };
	pthread_create(&th, NULL, stop_later, &s);
	assert_int_equal(watch_run(l.w, "1"), K8S_ECANCELED);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	pthread_join(th, NULL);
	/*
	 * From the stop asked for, not from a clock of the test's: under
	 * load the thread's sleep may start well before or after the test's
	 * own reading (check-asan saw 'ms >= 200' fail, twice). Not stopped,
	 * the quiet watch would have ended 1.3 s after it.
	 */
	ms = (t1.tv_sec - s.at.tv_sec) * 1000 + (t1.tv_nsec - s.at.tv_nsec) / 1000000;
	if (ms < 0 || ms >= 1000)
		fail_msg("watch_run returned %ld ms after the stop", ms);
	watch_free(l.w);
	k8s_client_free(c);
	k8s_config_free(cfg);
	fakeapi_stop(api);
}

/* A handler's own code comes back unchanged, even one that looks like a
 * transport error, and the refused event is not resumed past. */
static int
refuse_b(void *arg, const struct watch_event *ev)
{
	(void)arg;
	return strcmp(k8s_obj_name(ev->object), "b") == 0 ? K8S_EIO : 0;
}

static void
test_watch_handler_code_returned(void **state)
{
	struct fakeapi *api = fakeapi_start();
	struct k8s_config *cfg = fakeapi_config(api, NULL);
	struct watch_opts wo = { .res = &k8s_res_configmaps, .ns = "ns1", .timeout_seconds = 5 };
	struct loop l = { 0 };
	struct watch_handlers wh = { loop_relist, refuse_b, NULL, &l };
	struct k8s_client *c;
	struct k8s_error err;
	struct watch *w;
	char *rv;

	(void)state;
	assert_int_equal(k8s_client_new(cfg, NULL, &c, &err), 0);
	fakeapi_push(api, 200, NULL,
	    "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"2\"}}}\n"
	    "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"b\",\"resourceVersion\":\"3\"}}}\n", 0);
	w = watch_new(c, &wo, &wh);
	assert_int_equal(watch_run(w, "1"), K8S_EIO);
	assert_int_equal(fakeapi_count(api), 1);	/* no reconnect */
	rv = watch_resource_version(w);
	assert_string_equal(rv, "2");
	free(rv);
	watch_free(w);
	k8s_client_free(c);
	k8s_config_free(cfg);
	fakeapi_stop(api);
}

static void
test_watch_bad_event_twice_relists(void **state)
{
	struct fakeapi *api = fakeapi_start();
	struct k8s_config *cfg = fakeapi_config(api, NULL);
	struct watch_opts wo = { .res = &k8s_res_configmaps, .ns = "ns1",
	    .timeout_seconds = 5, .backoff_initial_ms = 20 };
	struct loop l = { .stop_at = 1 };
	struct watch_handlers wh = { loop_relist, loop_event, NULL, &l };
	struct k8s_client *c;
	struct k8s_error err;
	const char *bad = "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"x\"},\"k\":tru}}\n";

	(void)state;
	assert_int_equal(k8s_client_new(cfg, NULL, &c, &err), 0);
	fakeapi_push(api, 200, NULL, bad, 0);
	fakeapi_push(api, 200, NULL, bad, 0);
	fakeapi_push(api, 200, NULL,
	    "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"ok\",\"resourceVersion\":\"101\"}}}\n", 0);
	l.w = watch_new(c, &wo, &wh);
	assert_int_equal(watch_run(l.w, "9"), K8S_ECANCELED);
	/* Same version twice: the second failure relists (rv 100). */
	assert_int_equal(l.relists, 1);
	assert_string_equal(fakeapi_request(api, 0), WPATH "9&timeoutSeconds=5");
	assert_string_equal(fakeapi_request(api, 1), WPATH "9&timeoutSeconds=5");
	assert_string_equal(fakeapi_request(api, 2), WPATH "100&timeoutSeconds=5");
	assert_string_equal(l.events[0], "0 ok");
	watch_free(l.w);
	k8s_client_free(c);
	k8s_config_free(cfg);
	fakeapi_stop(api);
}

static void
test_watch_empty_answers_back_off(void **state)
{
	struct fakeapi *api = fakeapi_start();
	struct k8s_config *cfg = fakeapi_config(api, NULL);
	struct watch_opts wo = { .res = &k8s_res_configmaps, .ns = "ns1",
	    .timeout_seconds = 5, .backoff_initial_ms = 200 };
	struct loop l = { .stop_at = 1 };
	struct watch_handlers wh = { loop_relist, loop_event, NULL, &l };
	struct k8s_client *c;
	struct k8s_error err;
	long long t0, dt;

	(void)state;
	assert_int_equal(k8s_client_new(cfg, NULL, &c, &err), 0);
	/* A proxy that answers 200 and hangs up: not a reason to hammer it. */
	fakeapi_push(api, 200, NULL, "", 0);
	fakeapi_push(api, 200, NULL, "", 0);
	fakeapi_push(api, 200, NULL,
	    "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"x\",\"resourceVersion\":\"5\"}}}\n", 0);
	l.w = watch_new(c, &wo, &wh);
	t0 = clock_mono_ms();
	assert_int_equal(watch_run(l.w, "4"), K8S_ECANCELED);
	dt = clock_mono_ms() - t0;
	/* Backoff 200 then 400 ms, each slept for at least half. */
	assert_true(dt >= 300);
	assert_true(dt < 1500);
	assert_int_equal(fakeapi_count(api), 3);
	watch_free(l.w);
	k8s_client_free(c);
	k8s_config_free(cfg);
	fakeapi_stop(api);
}

static int
relist_nothing(void *arg, char **rv, struct k8s_error *err)
{
	struct loop *l = arg;

	(void)err;
	if (++l->relists == 1) {
		*rv = NULL;		/* a buggy owner: must not crash */
		return 0;
	}
	*rv = strdup("50");
	return 0;
}

static void
test_watch_relist_without_rv(void **state)
{
	struct fakeapi *api = fakeapi_start();
	struct k8s_config *cfg = fakeapi_config(api, NULL);
	struct watch_opts wo = { .res = &k8s_res_configmaps, .ns = "ns1",
	    .timeout_seconds = 5, .backoff_initial_ms = 20 };
	struct loop l = { .stop_at = 1 };
	struct watch_handlers wh = { relist_nothing, loop_event, NULL, &l };
	struct k8s_client *c;
	struct k8s_error err;

	(void)state;
	assert_int_equal(k8s_client_new(cfg, NULL, &c, &err), 0);
	fakeapi_push(api, 200, NULL,
	    "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"x\",\"resourceVersion\":\"51\"}}}\n", 0);
	l.w = watch_new(c, &wo, &wh);
	assert_int_equal(watch_run(l.w, NULL), K8S_ECANCELED);
	assert_int_equal(l.relists, 2);
	assert_string_equal(fakeapi_request(api, 0), WPATH "50&timeoutSeconds=5");
	watch_free(l.w);
	k8s_client_free(c);
	k8s_config_free(cfg);
	fakeapi_stop(api);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_decoder_every_split),
		cmocka_unit_test(test_decoder_byte_by_byte),
		cmocka_unit_test(test_decoder_partial_line_kept),
		cmocka_unit_test(test_decoder_oversized_line),
		cmocka_unit_test(test_decoder_malformed),
		cmocka_unit_test(test_decoder_handler_stops),
		cmocka_unit_test(test_watch_resume_410_relist),
		cmocka_unit_test(test_watch_oversized_reconnects),
		cmocka_unit_test(test_watch_stop_is_prompt),
		cmocka_unit_test(test_watch_handler_code_returned),
		cmocka_unit_test(test_watch_bad_event_twice_relists),
		cmocka_unit_test(test_watch_empty_answers_back_off),
		cmocka_unit_test(test_watch_relist_without_rv),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
