/*
 * common.c - see cli.h: exit codes, output, and the spec check local runs
 * need because no API server checks them.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <yaml.h>

#include "artifacts.h"
#include "base64.h"
#include "cli.h"
#include "egress.h"
#include "quantity.h"
#include "session.h"
#include "sha256.h"
#include "xmalloc.h"

void
cli_die_usage(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "airlock: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(CLI_EXIT_USAGE);
}

int
cli_cluster_flag(struct cli_cluster *o, int ch, const char *arg)
{
	long long s;

	switch (ch) {
	case 'n': o->ns = arg; return 1;
	case 'A': o->all_ns = 1; return 1;
	case 'o':
		if (strcmp(arg, "json") != 0 && strcmp(arg, "yaml") != 0)
			cli_die_usage("-o: '%s': json or yaml", arg);
		o->output = arg;
		return 1;
	case CLI_OPT_KUBECONFIG: o->kubeconfig = arg; return 1;
	case CLI_OPT_CONTEXT: o->context = arg; return 1;
	case CLI_OPT_API_RETRY:
		if (quantity_parse_int(arg, 0, 3600, &s) != 0)
			cli_die_usage("--api-retry: '%s': whole seconds, 0 to 3600", arg);
		o->retry_ms = (long)s * 1000;
		return 1;
	}
	return 0;
}

char *
cli_slurp(const char *path, size_t max, size_t *lenp, char *msg, size_t msz)
{
	int fd = strcmp(path, "-") == 0 ? 0 : open(path, O_RDONLY | O_CLOEXEC);
	size_t len = 0, cap = 65536;
	char *buf;
	ssize_t n;

	if (fd < 0) {
		snprintf(msg, msz, "%s", strerror(errno));
		return NULL;
	}
	buf = xmalloc(cap + 1);
	while ((n = read(fd, buf + len, cap - len)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 || (len += (size_t)n) > max) {
			if (n < 0)
				snprintf(msg, msz, "%s", strerror(errno));
			else
				snprintf(msg, msz, "more than %zu bytes", max);
			free(buf);
			if (fd != 0)
				close(fd);
			return NULL;
		}
		if (len == cap)
			buf = xrealloc(buf, (cap *= 2) + 1);
	}
	if (fd != 0)
		close(fd);
	buf[len] = '\0';
	*lenp = len;
	return buf;
}

/* --- output --------------------------------------------------------------- */

static int
emit(yaml_emitter_t *e, yaml_event_t *ev)
{
	return yaml_emitter_emit(e, ev) ? 0 : -1;
}

/* A string that YAML would read back as something else gets quotes. */
static int
needs_quotes(const char *s, size_t n)
{
	static const char *const words[] = { "", "~", "null", "Null", "NULL",
	    "true", "True", "TRUE", "false", "False", "FALSE", "yes", "Yes",
	    "YES", "no", "No", "NO", "on", "On", "ON", "off", "Off", "OFF",
	    ".inf", ".nan", "-.inf", "y", "n", "Y", "N" };
	char *end;

	for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
		if (strlen(words[i]) == n && memcmp(s, words[i], n) == 0)
			return 1;
	if (memchr(s, '\0', n))
		return 1;
	/* Dates, times, versions and numbers in any YAML 1.1 spelling. */
	if (n && (isdigit((unsigned char)s[0]) || s[0] == '-' || s[0] == '+' ||
	    s[0] == '.'))
		return 1;
	(void)strtod(s, &end);
	return end == s + n;	/* a number */
}

static int
emit_value(yaml_emitter_t *e, json_t *v)
{
	yaml_event_t ev;
	const char *k;
	json_t *x;
	size_t i;
	char num[64];

	switch (json_typeof(v)) {
	case JSON_OBJECT:
		yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1,
		    YAML_BLOCK_MAPPING_STYLE);
		if (emit(e, &ev))
			return -1;
		json_object_foreach(v, k, x) {
			yaml_scalar_event_initialize(&ev, NULL, NULL,
			    (yaml_char_t *)k, (int)strlen(k), 1, 1,
			    needs_quotes(k, strlen(k)) ? YAML_DOUBLE_QUOTED_SCALAR_STYLE :
			    YAML_ANY_SCALAR_STYLE);
			if (emit(e, &ev) || emit_value(e, x))
				return -1;
		}
		yaml_mapping_end_event_initialize(&ev);
		return emit(e, &ev);
	case JSON_ARRAY:
		yaml_sequence_start_event_initialize(&ev, NULL, NULL, 1,
		    YAML_BLOCK_SEQUENCE_STYLE);
		if (emit(e, &ev))
			return -1;
		json_array_foreach(v, i, x)
			if (emit_value(e, x))
				return -1;
		yaml_sequence_end_event_initialize(&ev);
		return emit(e, &ev);
	case JSON_STRING: {
		const char *s = json_string_value(v);
		size_t n = json_string_length(v);
		/* Lines as lines (libyaml falls back to quotes if it must). */
		int style = memchr(s, '\n', n) && !memchr(s, '\0', n) ?
		    YAML_LITERAL_SCALAR_STYLE : needs_quotes(s, n) ?
		    YAML_DOUBLE_QUOTED_SCALAR_STYLE : YAML_ANY_SCALAR_STYLE;

		yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *)s,
		    (int)n, 1, 1, style);
		return emit(e, &ev);
	}
	case JSON_INTEGER:
		snprintf(num, sizeof(num), "%" JSON_INTEGER_FORMAT, json_integer_value(v));
		break;
	case JSON_REAL:
		snprintf(num, sizeof(num), "%.17g", json_real_value(v));
		break;
	case JSON_TRUE:
		snprintf(num, sizeof(num), "true");
		break;
	case JSON_FALSE:
		snprintf(num, sizeof(num), "false");
		break;
	default:
		snprintf(num, sizeof(num), "null");
		break;
	}
	yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *)num,
	    (int)strlen(num), 1, 1, YAML_PLAIN_SCALAR_STYLE);
	return emit(e, &ev);
}

static int
write_file(void *data, unsigned char *buf, size_t size)
{
	return fwrite(buf, 1, size, data) == size;
}

int
cli_yaml(FILE *f, json_t *v)
{
	yaml_emitter_t e;
	yaml_event_t ev;
	int rc = -1;

	if (!yaml_emitter_initialize(&e))
		return -1;
	yaml_emitter_set_output(&e, write_file, f);
	yaml_emitter_set_unicode(&e, 1);
	yaml_emitter_set_width(&e, -1);
	yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING);
	if (emit(&e, &ev))
		goto out;
	yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, 1);
	if (emit(&e, &ev) || emit_value(&e, v))
		goto out;
	yaml_document_end_event_initialize(&ev, 1);
	if (emit(&e, &ev))
		goto out;
	yaml_stream_end_event_initialize(&ev);
	rc = emit(&e, &ev);
out:
	yaml_emitter_delete(&e);
	return rc;
}

int
cli_print(FILE *f, json_t *v, const char *format)
{
	if (strcmp(format, "json") == 0) {
		if (json_dumpf(v, f, JSON_INDENT(2) | JSON_ENCODE_ANY) != 0)
			return K8S_EIO;
		fputc('\n', f);
		return 0;
	}
	if (strcmp(format, "yaml") == 0)
		return cli_yaml(f, v) == 0 ? 0 : K8S_EIO;
	return K8S_EINVAL;
}

void
cli_print_streams(json_t *st)
{
	cli_print_streams_from(st, 0, 0);
}

void
cli_print_streams_from(json_t *st, size_t ofrom, size_t efrom)
{
	json_t *o = json_object_get(st, "stdout"), *e = json_object_get(st, "stderr");

	fflush(stdout);
	if (json_is_string(o) && json_string_length(o) > ofrom)
		cli_write_text(stdout, json_string_value(o) + ofrom,
		    json_string_length(o) - ofrom, isatty(STDOUT_FILENO));
	cli_print_value(stdout, st, isatty(STDOUT_FILENO));
	fflush(stdout);
	if (json_is_string(e) && json_string_length(e) > efrom)
		cli_write_text(stderr, json_string_value(e) + efrom,
		    json_string_length(e) - efrom, isatty(STDERR_FILENO));
	if (json_is_true(json_object_get(st, "stdoutTruncated")))
		fprintf(stderr, "\nairlock: stdout cut at %zu of %lld bytes "
		    "(spec.output.maxBytes)\n", json_string_length(o),
		    (long long)json_integer_value(json_object_get(st, "stdoutBytes")));
	if (json_is_true(json_object_get(st, "stderrTruncated")))
		fprintf(stderr, "\nairlock: stderr cut at %zu of %lld bytes "
		    "(spec.output.maxBytes)\n", json_string_length(e),
		    (long long)json_integer_value(json_object_get(st, "stderrBytes")));
	fflush(stderr);
}

void
cli_print_value(FILE *f, json_t *st, int tty)
{
	json_t *v = json_object_get(st, "value"), *o = json_object_get(st, "stdout");
	size_t n = json_string_length(o);

	if (!json_is_string(v))
		return;
	/* On a line of its own, as a REPL shows it. */
	if (n > 0 && json_string_value(o)[n - 1] != '\n')
		fputc('\n', f);
	cli_write_text(f, json_string_value(v), json_string_length(v), tty);
	fputc('\n', f);
}

void
cli_write_text(FILE *f, const char *s, size_t n, int tty)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i, from = 0;

	if (!tty) {
		fwrite(s, 1, n, f);
		return;
	}
	for (i = 0; i < n; i++) {
		unsigned char c = p[i];
		size_t len = 0;

		if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f)
			len = 1;
		else if (c == 0xc2 && i + 1 < n && p[i + 1] >= 0x80 &&
		    p[i + 1] <= 0x9f)
			len = 2;	/* U+0080..U+009F: C1 controls, CSI among them */
		if (len == 0)
			continue;
		fwrite(s + from, 1, i - from, f);
		if (len == 2)
			fputs("\xef\xbf\xbd", f);	/* U+FFFD */
		else
			fprintf(f, "^%c", c == 0x7f ? '?' : c + '@');
		i += len - 1;
		from = i + 1;
	}
	fwrite(s + from, 1, n - from, f);
}

int
cli_report(json_t *obj, const char *output)
{
	return cli_report_from(obj, output, 0, 0);
}

int
cli_report_from(json_t *obj, const char *output, size_t ofrom, size_t efrom)
{
	json_t *st = json_object_get(obj, "status");
	const char *why = json_string_value(json_object_get(st, "reason"));

	if (output)
		return cli_print(stdout, obj, output) == 0 ? cx_exit_code(st) :
		    CLI_EXIT_ERROR;
	cli_print_streams_from(st, ofrom, efrom);
	/* An end other than the program's own exit says why. */
	if (why && strcmp(why, "Completed") != 0 && strcmp(why, "Error") != 0) {
		const char *m = json_string_value(json_object_get(st, "message"));

		fprintf(stderr, "airlock: %s: ", why);
		/* It may quote the tenant's own strings: never raw to a terminal. */
		cli_write_text(stderr, m ? m : "", m ? strlen(m) : 0,
		    isatty(STDERR_FILENO));
		fputc('\n', stderr);
	}
	return cx_exit_code(st);
}

/* --- the spec, as the CRD's schema says (crds/) ----------------------------- */

static int bad(struct k8s_error *err, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int
bad(struct k8s_error *err, const char *field, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return k8s_error_set(err, K8S_EINVAL, 0, "Invalid", "spec.%s: %s", field, msg);
}

static int
check_string(json_t *spec, const char *key, size_t max, struct k8s_error *err)
{
	json_t *v = json_object_get(spec, key);
	char lim[32];

	if (v == NULL)
		return 0;
	if (!json_is_string(v))
		return bad(err, key, "must be a string");
	snprintf(lim, sizeof(lim), "%zu", max);
	if (json_string_length(v) > max)
		return bad(err, key, "longer than %s bytes", lim);
	return 0;
}

/*
 * Lowercase letters, digits and '-' (and '.', but never two in a row,
 * where dots), at most max, starting and ending with a letter or digit:
 * a DNS-1123 label (63, no dots) or subdomain (253, dots).
 */
static int
dns_name(const char *s, size_t max, int dots)
{
	size_t n = strlen(s);

	if (n == 0 || n > max || !isalnum((unsigned char)s[0]) ||
	    !isalnum((unsigned char)s[n - 1]))
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!(islower((unsigned char)s[i]) || isdigit((unsigned char)s[i]) ||
		    s[i] == '-' || (dots && s[i] == '.')))
			return 0;
	return !dots || strstr(s, "..") == NULL;
}

/* ^[a-z0-9]([-a-z0-9]*[a-z0-9])?$, at most 63. */
static int
dns_label(const char *s)
{
	return dns_name(s, 63, 0);
}

static int
safe_path(const char *p)
{
	const char *seg = p;

	/* The kubelet refuses a volume path that starts with "..". */
	if (*p == '\0' || *p == '/' || strlen(p) > 255 ||
	    strncmp(p, "..", 2) == 0)
		return 0;
	for (const char *q = p; *q; q++)
		if ((unsigned char)*q < 0x20)
			return 0;
	for (;;) {
		const char *slash = strchr(seg, '/');
		size_t n = slash ? (size_t)(slash - seg) : strlen(seg);

		if (n == 0 || (n == 1 && seg[0] == '.') ||
		    (n == 2 && seg[0] == '.' && seg[1] == '.'))
			return 0;
		if (!slash)
			return 1;
		seg = slash + 1;
	}
}

static int
check_int(json_t *spec, const char *key, json_int_t lo, json_int_t hi,
    json_int_t dflt, struct k8s_error *err)
{
	json_t *v = json_object_get(spec, key);
	char lim[64];

	if (v == NULL) {
		if (dflt >= 0)
			json_object_set_new(spec, key, json_integer(dflt));
		return 0;
	}
	snprintf(lim, sizeof(lim), "%" JSON_INTEGER_FORMAT " to %" JSON_INTEGER_FORMAT, lo, hi);
	if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
		return bad(err, key, "must be an integer from %s", lim);
	return 0;
}

/* spec.runtime, required: a profile's name. */
static int
check_runtime(json_t *spec, struct k8s_error *err)
{
	json_t *v = json_object_get(spec, "runtime");

	if (v == NULL)
		return bad(err, "runtime", "required");
	if (!json_is_string(v) || !dns_label(json_string_value(v)))
		return bad(err, "runtime", "must be a lower-case name such as "
		    "python");
	return 0;
}

const char *
cli_unknown_key(json_t *obj, const char *const *known, size_t n)
{
	const char *k;
	json_t *v;

	json_object_foreach(obj, k, v) {
		size_t j;

		for (j = 0; j < n; j++)
			if (strcmp(k, known[j]) == 0)
				break;
		if (j == n)
			return k;
	}
	return NULL;
}

/* Every key of spec one of known's n, else the first other named. */
static int
check_known(json_t *spec, const char *const *known, size_t n,
    struct k8s_error *err)
{
	const char *k = cli_unknown_key(spec, known, n);

	return k ? bad(err, k, "unknown field") : 0;
}

/* spec.files, an execution's or a session's: the CRDs' rules. */
static int
check_files(json_t *spec, struct k8s_error *err)
{
	json_t *v, *x;
	size_t i, total = 0;

	if ((v = json_object_get(spec, "files")) == NULL)
		return 0;
	if (!json_is_array(v) || json_array_size(v) > 64)
		return bad(err, "files", "must be a list of at most 64");
	json_array_foreach(v, i, x) {
		const char *p = json_string_value(json_object_get(x, "path"));
		json_t *c = json_object_get(x, "content");
		char f[64];

		snprintf(f, sizeof(f), "files[%zu]", i);
		if (!json_is_object(x) || json_object_size(x) != 2 || p == NULL ||
		    !json_is_string(c))
			return bad(err, f, "needs path and content, strings, "
			    "and nothing else");
		if (!safe_path(p) || strlen(p) != json_string_length(
		    json_object_get(x, "path")))	/* a NUL in it */
			return bad(err, f, "path '%s' must be relative, not "
			    "start with '..', without '.' or '..' segments "
			    "or control characters", p);
		for (size_t j = 0; j < i; j++)
			if (strcmp(p, json_string_value(json_object_get(
			    json_array_get(v, j), "path"))) == 0)
				return bad(err, f, "path '%s' is given twice", p);
		total += json_string_length(c);
	}
	if (total > 262144)
		return bad(err, "files", "at most 262144 bytes in all");
	json_array_foreach(v, i, x) {
		const char *p = json_string_value(json_object_get(x, "path"));
		size_t pl = strlen(p);

		for (size_t j = 0; j < json_array_size(v); j++) {
			const char *q = json_string_value(json_object_get(
			    json_array_get(v, j), "path"));

			if (strncmp(q, p, pl) == 0 && q[pl] == '/')
				return bad(err, "files", "'%s' cannot be "
				    "both a file and the directory of '%s'",
				    p, q);
		}
	}
	return 0;
}

/* spec.resources: cpu, memory, ephemeralStorage, positive quantities. */
static int
check_resources(json_t *spec, struct k8s_error *err)
{
	const char *k;
	json_t *v, *x;

	if ((v = json_object_get(spec, "resources")) == NULL)
		return 0;
	if (!json_is_object(v))
		return bad(err, "resources", "must be an object");
	json_object_foreach(v, k, x) {
		char f[64], q[64];
		int64_t n;

		snprintf(f, sizeof(f), "resources.%s", k);
		if (strcmp(k, "cpu") != 0 && strcmp(k, "memory") != 0 &&
		    strcmp(k, "ephemeralStorage") != 0)
			return bad(err, f, "unknown field");
		if (json_is_integer(x))
			snprintf(q, sizeof(q), "%" JSON_INTEGER_FORMAT, json_integer_value(x));
		else if (json_is_string(x) && json_string_length(x) < sizeof(q))
			snprintf(q, sizeof(q), "%s", json_string_value(x));
		else
			return bad(err, f, "must be a quantity such as 500m or 1Gi");
		if ((strcmp(k, "cpu") == 0 ? quantity_parse_milli(q, &n, NULL) :
		    quantity_parse(q, &n, NULL)) != 0 || n <= 0)
			return bad(err, f, "must be a positive quantity such as "
			    "500m or 1Gi, not '%s'", q);
	}
	return 0;
}

int
cli_check_spec(json_t *spec, struct k8s_error *err)
{
	static const char *const known[] = { "runtime", "image", "source",
	    "files", "stdin", "args", "env", "timeoutSeconds", "resources",
	    "output", "ttlSecondsAfterFinished", "cancel", "session",
	    "network" };
	struct ctl_egress *eg;
	const char *k;
	json_t *v, *x;
	size_t i, neg;
	int given;

	if (!json_is_object(spec))
		return k8s_error_set(err, K8S_EINVAL, 0, "Invalid", "spec: must be an object");
	if (check_known(spec, known, sizeof(known) / sizeof(known[0]), err) != 0)
		return K8S_EINVAL;
	if (check_runtime(spec, err) != 0)
		return K8S_EINVAL;
	if (check_string(spec, "image", 512, err) ||
	    check_string(spec, "source", 262144, err) ||
	    check_string(spec, "stdin", 262144, err))
		return K8S_EINVAL;
	if (check_files(spec, err) != 0)
		return K8S_EINVAL;
	if ((v = json_object_get(spec, "args")) != NULL) {
		if (!json_is_array(v) || json_array_size(v) > 64)
			return bad(err, "args", "must be a list of at most 64 strings");
		json_array_foreach(v, i, x)
			if (!json_is_string(x) || json_string_length(x) > 4096)
				return bad(err, "args", "each a string of at most 4096 "
				    "bytes");
	}
	if ((v = json_object_get(spec, "env")) != NULL) {
		if (!json_is_array(v) || json_array_size(v) > 64)
			return bad(err, "env", "must be a list of at most 64");
		json_array_foreach(v, i, x) {
			const char *n = json_string_value(json_object_get(x, "name"));
			json_t *val = json_object_get(x, "value");
			char f[64];

			snprintf(f, sizeof(f), "env[%zu].name", i);
			if (n == NULL || !*n || strlen(n) > 128 ||
			    strspn(n, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
			    "0123456789_") != strlen(n) || isdigit((unsigned char)n[0]))
				return bad(err, f, "must be a name such as MY_VAR");
			if (val && (!json_is_string(val) || json_string_length(val) > 32768)) {
				snprintf(f, sizeof(f), "env[%zu].value", i);
				return bad(err, f, "must be a string of at most "
				    "32768 bytes");
			}
			for (size_t j = 0; j < i; j++)
				if (strcmp(n, json_string_value(json_object_get(
				    json_array_get(v, j), "name"))) == 0) {
					snprintf(f, sizeof(f), "env[%zu]", i);
					return bad(err, f, "name '%s' is given twice", n);
				}
		}
	}
	if (check_int(spec, "timeoutSeconds", 1, CX_MAX_TIMEOUT_S,
	    CX_DEFAULT_TIMEOUT_S, err) ||
	    check_int(spec, "ttlSecondsAfterFinished", 0, CX_MAX_TTL_S,
	    CX_DEFAULT_TTL_S, err))
		return K8S_EINVAL;
	if (check_resources(spec, err) != 0)
		return K8S_EINVAL;
	/* Its shape; the profile's list judges the rest (egress_effective). */
	if (egress_spec_parse(json_object_get(spec, "network"), &eg, &neg,
	    &given, err) != 0) {
		if (err != NULL)
			snprintf(err->reason, sizeof(err->reason), "Invalid");
		return K8S_EINVAL;
	}
	egress_free(eg, neg);
	if ((v = json_object_get(spec, "output")) == NULL)
		json_object_set_new(spec, "output", v = json_object());
	if (!json_is_object(v))
		return bad(err, "output", "must be an object");
	json_object_foreach(v, k, x)
		if (strcmp(k, "maxBytes") != 0 && strcmp(k, "stream") != 0)
			return bad(err, "output", "unknown field %s", k);
	if (json_object_get(v, "stream") &&
	    !json_is_boolean(json_object_get(v, "stream")))
		return bad(err, "output.stream", "must be true or false");
	if (check_int(v, "maxBytes", 1, CX_MAX_MAX_BYTES, CX_DEFAULT_MAX_BYTES,
	    err))
		return bad(err, "output.maxBytes", "must be an integer from 1 to "
		    "1048576");
	if ((v = json_object_get(spec, "cancel")) != NULL && !json_is_boolean(v))
		return bad(err, "cancel", "must be true or false");
	if ((v = json_object_get(spec, "session")) != NULL) {
		/* The CRD's: a session's name, and never a custom image with it. */
		const char *n = json_string_value(v);
		size_t len = n ? strlen(n) : 0;

		if (n == NULL || len == 0 || len > 253 ||
		    strspn(n, "abcdefghijklmnopqrstuvwxyz0123456789-.") != len ||
		    !isalnum((unsigned char)n[0]) || !isalnum((unsigned char)n[len - 1]))
			return bad(err, "session", "must be a session's name (lowercase "
			    "letters, digits, '-' and '.', at most 253)");
		if (json_object_get(spec, "image"))
			return bad(err, "image", "cannot be set with spec.session");
	}
	return 0;
}

int
cli_check_session_spec(json_t *spec, struct k8s_error *err)
{
	static const char *const known[] = { "runtime", "resources",
	    "idleTimeoutSeconds", "maxLifetimeSeconds", "files",
	    "ttlSecondsAfterFinished", "close" };
	json_t *v;

	if (!json_is_object(spec))
		return k8s_error_set(err, K8S_EINVAL, 0, "Invalid", "spec: must be an object");
	/* The API server fills the defaults in: none set here (-1). */
	if (check_known(spec, known, sizeof(known) / sizeof(known[0]), err) ||
	    check_runtime(spec, err) || check_resources(spec, err) ||
	    check_files(spec, err) ||
	    check_int(spec, "idleTimeoutSeconds", SESSION_MIN_S, SESSION_MAX_S,
	    -1, err) ||
	    check_int(spec, "maxLifetimeSeconds", SESSION_MIN_S, SESSION_MAX_S,
	    -1, err) ||
	    check_int(spec, "ttlSecondsAfterFinished", 0, CX_MAX_TTL_S, -1, err))
		return K8S_EINVAL;
	if ((v = json_object_get(spec, "close")) != NULL && !json_is_boolean(v))
		return bad(err, "close", "must be true or false");
	return 0;
}

/*
 * A path files out may be written to: a file out's (artifacts_path_ok),
 * and no component starting with '.' (not .git/config, .envrc,
 * .vscode/...: a program must not plant what a tool run in DIR obeys).
 */
static int
out_path_ok(const char *p)
{
	return artifacts_path_ok(p) && *p != '.' && strstr(p, "/.") == NULL;
}

/*
 * Open path (checked) for writing under the directory fd top, making its
 * directories, never through a symlink. The fd, or -1.
 */
static int
open_under(int top, const char *path)
{
	char *dup = xstrdup(path), *s = dup, *slash;
	int dfd = fcntl(top, F_DUPFD_CLOEXEC, 3), fd;

	while (dfd >= 0 && (slash = strchr(s, '/')) != NULL) {
		int next;

		*slash = '\0';
		if (mkdirat(dfd, s, 0755) != 0 && errno != EEXIST)
			next = -1;
		else
			next = openat(dfd, s, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
			    O_CLOEXEC);
		close(dfd);
		dfd = next;
		s = slash + 1;
	}
	/* Never over a file there: O_EXCL. */
	fd = dfd >= 0 ? openat(dfd, s, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
	    O_CLOEXEC, 0644) : -1;
	if (dfd >= 0)
		close(dfd);
	free(dup);
	return fd;
}

/*
 * A name a directory may be made of: a DNS-1123 subdomain, as the API
 * server holds metadata.name to (no '/', no leading '.'); a local run's
 * name comes from the manifest, which no API server checked.
 */
static int
dir_name_ok(const char *s)
{
	return dns_name(s, 253, 1);
}

int
cli_write_files(const char *dir, const char *name, json_t *files, json_t *want,
    char *msg, size_t msz)
{
	json_t *f, *w;
	size_t i, j;
	int top, n = 0;

	if (name == NULL || !dir_name_ok(name)) {
		snprintf(msg, msz, "metadata.name '%s': not a name a directory can "
		    "be made of", name ? name : "");
		return -1;
	}
	if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
		snprintf(msg, msz, "%s: %s", dir, strerror(errno));
		return -1;
	}
	if ((top = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
		snprintf(msg, msz, "%s: %s", dir, strerror(errno));
		return -1;
	}
	/*
	 * Into DIR/NAME, made here and new: the program's files never land
	 * beside the user's own (a conftest.py, Makefile or json.py in DIR is
	 * obeyed by what runs there), nor in a directory already there.
	 */
	{
		int sub = -1;

		if (mkdirat(top, name, 0755) == 0)
			sub = openat(top, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
			    O_CLOEXEC);
		if (sub < 0) {
			snprintf(msg, msz, "%s/%s: %s", dir, name, strerror(errno));
			close(top);
			return -1;
		}
		close(top);
		top = sub;
	}
	json_array_foreach(files, i, f) {
		const char *path = json_string_value(json_object_get(f, "path"));
		const char *sha = json_string_value(json_object_get(f, "sha256"));
		const char *b64 = json_string_value(json_object_get(f, "content"));
		char hex[65], *data = NULL;
		size_t len = 0;
		int fd, listed = 0;

		if (path == NULL || !out_path_ok(path) || sha == NULL || b64 == NULL) {
			snprintf(msg, msz, "a file out with a bad path or no content");
			goto fail;
		}
		json_array_foreach(want, j, w)
			listed |= strcmp(json_string_value(json_object_get(w, "path")) ?
			    json_string_value(json_object_get(w, "path")) : "", path) == 0 &&
			    strcmp(json_string_value(json_object_get(w, "sha256")) ?
			    json_string_value(json_object_get(w, "sha256")) : "", sha) == 0;
		if (!listed) {
			snprintf(msg, msz, "%s: not as the execution's status lists it", path);
			goto fail;
		}
		if (base64_decode(b64, strlen(b64), &data, &len) != 0) {
			snprintf(msg, msz, "%s: its content is not base64", path);
			goto fail;
		}
		sha256_hex(data, len, hex);
		if (strcmp(hex, sha) != 0) {
			free(data);
			snprintf(msg, msz, "%s: its content does not have its sha256", path);
			goto fail;
		}
		if ((fd = open_under(top, path)) < 0) {
			free(data);
			snprintf(msg, msz, "%s/%s/%s: %s", dir, name, path,
			    strerror(errno));
			goto fail;
		}
		for (size_t off = 0; off < len;) {
			ssize_t wr = write(fd, data + off, len - off);

			if (wr < 0 && errno == EINTR)
				continue;
			if (wr <= 0) {
				snprintf(msg, msz, "%s/%s/%s: %s", dir, name, path,
				    strerror(errno));
				close(fd);
				free(data);
				goto fail;
			}
			off += (size_t)wr;
		}
		close(fd);
		free(data);
		n++;
	}
	close(top);
	return n;
fail:
	close(top);
	return -1;
}
