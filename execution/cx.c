/*
 * cx.c - see cx.h.
 */
#include <string.h>

#include "cx.h"

const struct k8s_resource cx_resource = { "airlock.dev", "v1alpha1",
    "codeexecutions", 1 };

static const struct {
	const char	*name;
	int		 terminal, exit_code;
} phases[CX_PHASE_COUNT] = {
#define XX(name, s, term, code) { s, term, code },
	CX_PHASE_MAP(XX)
#undef XX
};

static const struct {
	const char	*name, *phase;
	int		 exit_code;
} reasons[CX_REASON_COUNT] = {
#define XX(name, s, ph, code) { s, ph, code },
	CX_REASON_MAP(XX)
#undef XX
};

static const char *const conditions[CX_COND_COUNT] = {
#define XX(name, s) s,
	CX_CONDITION_MAP(XX)
#undef XX
};

long long
cx_timeout_ms(json_t *cx)
{
	json_int_t s = json_integer_value(json_object_get(json_object_get(cx,
	    "spec"), "timeoutSeconds"));

	return (s > 0 ? (long long)s : CX_DEFAULT_TIMEOUT_S) * 1000;
}

size_t
cx_max_bytes(json_t *cx)
{
	json_int_t n = json_integer_value(json_object_get(json_object_get(
	    json_object_get(cx, "spec"), "output"), "maxBytes"));

	return n > 0 ? (size_t)n : CX_DEFAULT_MAX_BYTES;
}

int
cx_stream(json_t *cx)
{
	return json_is_true(json_object_get(json_object_get(json_object_get(cx,
	    "spec"), "output"), "stream"));
}

const char *
cx_phase_name(enum cx_phase p)
{
	return (unsigned)p < CX_PHASE_COUNT ? phases[p].name : "";
}

const char *
cx_reason_name(enum cx_reason r)
{
	return (unsigned)r < CX_REASON_COUNT ? reasons[r].name : "";
}

static int
find_phase(const char *phase)
{
	for (int i = 0; phase && i < CX_PHASE_COUNT; i++)
		if (strcmp(phases[i].name, phase) == 0)
			return i;
	return -1;
}

enum cx_phase
cx_reason_phase(enum cx_reason r)
{
	int p = (unsigned)r < CX_REASON_COUNT ? find_phase(reasons[r].phase) : -1;

	return p < 0 ? CX_PHASE_FAILED : (enum cx_phase)p;
}

int
cx_phase_terminal(const char *phase)
{
	int p = find_phase(phase);

	return p >= 0 && phases[p].terminal;
}

int
cx_end_untracked(const char *reason)
{
	return reason && (strcmp(reason, CX_TERM_UNKNOWN) == 0 ||
	    strcmp(reason, CX_TERM_STATUS_UNKNOWN) == 0);
}

int
cx_exit_code(json_t *st)
{
	const char *ph = json_string_value(json_object_get(st, "phase"));
	const char *why = json_string_value(json_object_get(st, "reason"));
	json_t *code = json_object_get(st, "exitCode");
	int p = find_phase(ph), rc = CX_EXIT_PROGRAM;

	if (ph == NULL)
		return 1;
	if (p >= 0)
		rc = phases[p].exit_code;
	for (int i = 0; why && i < CX_REASON_COUNT; i++)
		if (strcmp(reasons[i].name, why) == 0 &&
		    strcmp(reasons[i].phase, ph) == 0)
			rc = reasons[i].exit_code;
	if (rc != CX_EXIT_PROGRAM)
		return rc;
	if (json_is_integer(code) && json_integer_value(code) > 0 &&
	    json_integer_value(code) <= 255)
		return (int)json_integer_value(code);
	return 1;
}

const char *
cx_condition_name(enum cx_condition c)
{
	return (unsigned)c < CX_COND_COUNT ? conditions[c] : "";
}
