/*
 * Unit tests: operator/linestream.c, a long GET handed on a line at a
 * time, against a scripted server: lines in order, one past the cap cut
 * once and its rest dropped, a partial last line never handed on, an
 * error answer's Status, and a stop from another thread ending a stream
 * held open at once.
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
#include <cmocka.h>

#include "clock.h"
#include "fakeapi.h"
#include "linestream.h"

struct got {
	char	text[1024];
	int	opens;
};

static void
on_open(void *arg)
{
	((struct got *)arg)->opens++;
}

static int
on_line(void *arg, char *line, size_t len, int too_long)
{
	struct got *g = arg;
	size_t n = strlen(g->text);

	snprintf(g->text + n, sizeof(g->text) - n, "%s%.*s|", too_long ? "LONG:" :
	    "", (int)len, line);
	return 0;
}

struct fx {
	struct fakeapi		*api;
	struct k8s_config	*cfg;
	struct k8s_client	*c;
	struct linestream	*s;
};

static int
setup(void **state)
{
	struct fx *fx = calloc(1, sizeof(*fx));
	struct k8s_error err;

	fx->api = fakeapi_start();
	fx->cfg = fakeapi_config(fx->api, NULL);
	assert_int_equal(k8s_client_new(fx->cfg, NULL, &fx->c, &err), 0);
	fx->s = linestream_new(fx->c, 8);
	*state = fx;
	return 0;
}

static int
teardown(void **state)
{
	struct fx *fx = *state;

	linestream_free(fx->s);
	k8s_client_free(fx->c);
	k8s_config_free(fx->cfg);
	fakeapi_stop(fx->api);
	free(fx);
	return 0;
}

/* An answer that ends: its lines, the long one cut, the partial one not. */
static void
test_lines(void **state)
{
	struct fx *fx = *state;
	struct got g = { "", 0 };
	struct linestream_handlers h = { on_open, on_line, &g };
	struct k8s_error err;

	fakeapi_push(fx->api, 200, NULL, "a\nbb\n0123456789abcdef\n\nlast\npart", 0);
	assert_int_equal(linestream_get(fx->s, "/api/v1/namespaces/n/pods/p/log?"
	    "follow=true", &h, &err), 0);
	assert_string_equal(g.text, "a|bb|LONG:01234567||last|");
	assert_int_equal(g.opens, 1);
	assert_string_equal(fakeapi_request(fx->api, 0),
	    "GET /api/v1/namespaces/n/pods/p/log?follow=true");
	/* The next request starts clean: no partial line carried over. */
	g.text[0] = '\0';
	fakeapi_push(fx->api, 200, NULL, "ial\nnext\n", 0);
	assert_int_equal(linestream_get(fx->s, "/x", &h, &err), 0);
	assert_string_equal(g.text, "ial|next|");
}

/* An error answer: its code and Status message; never opened. */
static void
test_error(void **state)
{
	struct fx *fx = *state;
	struct got g = { "", 0 };
	struct linestream_handlers h = { on_open, on_line, &g };
	struct k8s_error err;

	fakeapi_push(fx->api, 403, NULL, "{\"kind\":\"Status\",\"code\":403,\"reason\":"
	    "\"Forbidden\",\"message\":\"pods \\\"p\\\" is forbidden: no log\"}", 0);
	assert_int_equal(linestream_get(fx->s, "/x", &h, &err), K8S_EFORBIDDEN);
	assert_int_equal(err.http_status, 403);
	assert_string_equal(err.message, "pods \"p\" is forbidden: no log");
	assert_int_equal(g.opens, 0);
	assert_string_equal(g.text, "");
}

static long long stopped_at;

static void *
stopper(void *arg)
{
	struct fx *fx = arg;

	nanosleep(&(struct timespec){ 0, 100000000L }, NULL);
	stopped_at = clock_mono_ms();
	linestream_stop(fx->s);
	return NULL;
}

/* A stream held open ends at once when stopped, and stays stopped. */
static void
test_stop(void **state)
{
	struct fx *fx = *state;
	struct got g = { "", 0 };
	struct linestream_handlers h = { on_open, on_line, &g };
	struct k8s_error err;
	pthread_t t;

	fakeapi_push_stream(fx->api, "one\ntwo\nthr");
	pthread_create(&t, NULL, stopper, fx);
	assert_int_equal(linestream_get(fx->s, "/x", &h, &err), K8S_ECANCELED);
	/* Promptly (2 ms here; curl's own poll ends within ~0.1 s anyway). */
	assert_true(clock_mono_ms() - stopped_at < 500);
	pthread_join(t, NULL);
	assert_string_equal(g.text, "one|two|");
	assert_int_equal(g.opens, 1);
	assert_int_equal(linestream_get(fx->s, "/x", &h, &err), K8S_ECANCELED);
	assert_int_equal(fakeapi_count(fx->api), 1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_lines, setup, teardown),
		cmocka_unit_test_setup_teardown(test_error, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stop, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
