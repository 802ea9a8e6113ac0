/*
 * Unit tests: what a session step's message says of its report
 * (node-agent/record.c, step_note; docs/sessions.md, "Failure
 * semantics"): a kernel found dead at the step's start (RESTARTED 3), with
 * and without a restart at the step's end. The step's output, with the
 * runner's files-out frame holding ".airlock-step", goes through the
 * agent's own filter and agent_record, against a fake API server.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "agent_priv.h"
#include "artifacts.h"
#include "base64.h"
#include "buf.h"
#include "codetar.h"
#include "fakeapi.h"
#include "xmalloc.h"

#define WALL	INT64_C(1795000000000000000)
#define MS	INT64_C(1000000)
#define NOSOCK	"/nonexistent/airlock/containerd.sock"

struct fx {
	struct agent		 a;
	struct fakeapi		*api;
	struct k8s_config	*cfg;
};

static int
setup(void **state)
{
	struct fx *f = xcalloc(1, sizeof(*f));
	struct k8s_error err;

	f->api = fakeapi_start();
	f->cfg = fakeapi_config(f->api, NULL);
	if (k8s_client_new(f->cfg, NULL, &f->a.client, &err) != 0)
		return -1;
	pthread_mutex_init(&f->a.lock, NULL);
	f->a.out_mem = crilog_budget_new(AGENT_OUTPUT_MEMORY);
	f->a.o.node_name = "n1";
	f->a.o.containerd_socket = NOSOCK;
	f->a.ctrd = ctrd_new(NOSOCK, "k8s.io");
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	struct fx *f = *state;
	struct run *r;

	while ((r = f->a.runs) != NULL) {
		f->a.runs = r->next;
		agent_free_run(r);
	}
	crilog_budget_free(f->a.out_mem);
	ctrd_free(f->a.ctrd);
	pthread_mutex_destroy(&f->a.lock);
	k8s_client_free(f->a.client);
	k8s_config_free(f->cfg);
	fakeapi_stop(f->api);
	free(f);
	return 0;
}

/* How step_message's run was stopped: cancelled (tick.c), or with its session. */
static int cancelled;
static const char *session_end;
static char phase[32];

/*
 * A session step run that wrote "hi\n" then the frame with report, exited
 * status; recorded: its status.message (and phase in phase). Caller frees.
 */
static char *
step_message(struct fx *f, const char *report, unsigned status)
{
	struct run *r = agent_new_run(&f->a, "pod-uid-1", "t", "airlock-s");
	struct codetar_entry e[] = { { ".airlock-step", report, strlen(report) } };
	struct buf tar;
	size_t bad, blen, i;
	char nonce[33], *b64, *out, *msg;
	json_t *patch, *o;
	int n;

	r->cx = xstrdup("step-1");
	r->cx_uid = xstrdup("cx-uid-1");
	r->verified = 1;
	r->warm = 1;
	r->step = 1;
	r->max_out = 1 << 20;
	r->budget = 1 << 20;
	r->timeout_ms = 10000;
	r->out_bytes = 100000;
	r->out_files = 8;
	agent_run_log(&f->a, r);
	r->start_ns = WALL - 1000 * MS;
	r->exited = 1;
	r->exit_exact = 1;
	r->status = status;
	r->exited_ns = WALL;
	r->interrupt_sent = cancelled;
	if (session_end) {
		r->why = CX_KILL_SESSION;
		r->session_end = xstrdup(session_end);
	}

	buf_init(&tar, 1 << 16);
	assert_int_equal(codetar_build(e, 1, &tar, &bad), 0);
	b64 = base64_encode(tar.data, tar.len, &blen);
	buf_free(&tar);
	artifacts_nonce(r->cx_uid, nonce);
	out = xasprintf("hi\n\x1e" "AIRLOCK-OUT %s %zu\n%s\x1e" "AIRLOCK-END %s\n",
	    nonce, blen, b64, nonce);
	free(b64);
	crilog_feed_stream(r->log, 0, out, strlen(out));
	free(out);
	crilog_finish(r->log);

	n = fakeapi_count(f->api);
	fakeapi_push(f->api, 200, NULL, "{}", 0);
	assert_int_equal(agent_record(&f->a, r), 1);
	assert_int_equal(fakeapi_count(f->api), n + 1);
	assert_non_null(patch = json_loads(fakeapi_body(f->api, n), 0, NULL));
	msg = NULL;
	phase[0] = '\0';
	json_array_foreach(patch, i, o) {
		if (strcmp(json_string_value(json_object_get(o, "path")),
		    "/status/message") == 0)
			msg = xstrdup(json_string_value(json_object_get(o, "value")));
		if (strcmp(json_string_value(json_object_get(o, "op")), "add") == 0 &&
		    strcmp(json_string_value(json_object_get(o, "path")),
		    "/status/phase") == 0)
			snprintf(phase, sizeof(phase), "%s", json_string_value(
			    json_object_get(o, "value")));
	}
	json_decref(patch);
	assert_non_null(msg);
	return msg;
}

#define GONE	"; the session's kernel was no longer running when this step " \
	"began (it had died since an earlier step) and was started again: the " \
	"session's earlier state is lost"

/* A kernel dead at the step's start: said, whatever the step then did. */
static void
test_kernel_gone_before_step(void **state)
{
	char *m;

	m = step_message(*state, "ok 0 3 0 1\n", 0);
	assert_string_equal(m, "exit code 0" GONE);
	free(m);
	/* Then exited: both, in the order they happened. */
	m = step_message(*state, "exit 5 3 0 3\n", 5);
	assert_string_equal(m, "exit code 5" GONE "; the program exited the "
	    "session's kernel, which was started again: its state is lost");
	free(m);
	/* Interrupted and back in time: 3 is not a restart at the timeout. */
	m = step_message(*state, "timeout 124 3 0 1\n", 124);
	assert_string_equal(m, "interrupted at its 10000 ms timeout" GONE);
	free(m);
}

/* The other reports say what they said before. */
static void
test_other_reports(void **state)
{
	char *m;

	m = step_message(*state, "ok 0 0 0 0\n", 0);
	assert_string_equal(m, "exit code 0");
	free(m);
	m = step_message(*state, "ok 0 0 0\n", 0);
	assert_string_equal(m, "exit code 0");
	free(m);
	m = step_message(*state, "timeout 124 1 0 1\n", 124);
	assert_string_equal(m, "interrupted at its 10000 ms timeout; the kernel "
	    "was not back within 5000 ms of the interrupt and was started again: "
	    "the session's state is lost");
	free(m);
}

/*
 * Interrupted because it was cancelled: Cancelled, as the controller
 * writes it, whatever the step client's report; the state lost is said.
 * Killed with its session at its lifetime's end: Cancelled, the session
 * named, and no note of a missing report.
 */
static void
test_cancelled_and_expired(void **state)
{
	char *m;

	cancelled = 1;
	m = step_message(*state, "timeout 124 0 0 0\n", 124);
	assert_string_equal(m, "cancelled by spec.cancel");
	assert_string_equal(phase, "Cancelled");
	free(m);
	m = step_message(*state, "timeout 124 1 0 1\n", 124);
	assert_string_equal(m, "cancelled by spec.cancel; the kernel was not back "
	    "within 5000 ms of the interrupt and was started again: the session's "
	    "state is lost");
	free(m);
	cancelled = 0;
	session_end = "its session 'an' ended (Expired) while it ran";
	m = step_message(*state, "garbage", 137);
	assert_string_equal(m, "its session 'an' ended (Expired) while it ran");
	assert_string_equal(phase, "Cancelled");
	free(m);
	session_end = NULL;
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_kernel_gone_before_step, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_other_reports, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cancelled_and_expired, setup,
		    teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
