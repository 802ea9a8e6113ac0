/*
 * accesslog.c - see accesslog.h.
 *
 * The logformat it reads (squid.conf must say exactly this; fields split
 * by single spaces, "-" for absent, %# fields URL-encoded by Squid):
 *
 *   logformat airlock %ts.%03tu %>a %>p %master_xaction %rm %#>rd %>rP
 *       %#ssl::>sni %<a %Ss %>Hs %err_code %ssl::bump_mode %{reason}note
 *       %{uid}note %{ns}note %{name}note %>st %<st %tr
 *
 * One record per decision. Squid logs more lines than decisions:
 *
 *   - A refused CONNECT on the ssl-bump port is bumped to serve its error
 *     page: the CONNECT's line (TCP_DENIED/200, reason not-in-list, say)
 *     and then the inner GET of the page (NONE_NONE/403) with no reason
 *     note, as no http_access rule annotated it. Lines with no reason are
 *     dropped: every decision the config makes annotates one.
 *   - An allowed CONNECT that is spliced: the CONNECT's own line
 *     (NONE_NONE/200, bump mode splice, no server, the peeked bytes) and
 *     then the tunnel's (TCP_TUNNEL, the server, the bytes both ways),
 *     each its own transaction. The first is dropped: a CONNECT spliced
 *     that reached no server (NONE_NONE) always has its tunnel's line
 *     after it, and that line is the record, bytes and all.
 *   - A CONNECT allowed whose bytes are not TLS: Squid ends it with
 *     ERR_PROTOCOL_UNKNOWN (on_unsupported_protocol), after the allowed
 *     note; the record says refused, reason not-tls.
 *   - A request Squid refuses before any rule (origin-form, 400) carries
 *     no reason: dropped, since it named no host to audit.
 *
 * Strings from the log are the tenant's: %-escapes of printable ASCII are
 * decoded, anything else stays %XX, and each is capped; the JSON writer
 * escapes the rest.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "accesslog.h"
#include "clock.h"
#include "lines.h"
#include "log.h"
#include "xmalloc.h"

enum { F_TIME, F_CLIENT, F_CPORT, F_XACT, F_METHOD, F_HOST, F_PORT, F_SNI,
	F_SERVER, F_STATUS, F_HSTATUS, F_ERR, F_BUMP, F_REASON, F_UID, F_NS,
	F_NAME, F_OUT, F_IN, F_MS, F_COUNT };

static int
hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = tolower(c);
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/*
 * s ("-": absent) as a JSON string: %XX of printable ASCII decoded, every
 * other byte as %XX, at most max bytes and then "...". A new reference.
 */
static json_t *
text(const char *s, size_t max)
{
	char out[300];
	size_t n = 0;

	if (strcmp(s, "-") == 0)
		return json_null();
	for (; *s && n < max; s++) {
		int c = (unsigned char)*s;

		if (c == '%' && hexval(s[1]) >= 0 && hexval(s[2]) >= 0 &&
		    (hexval(s[1]) << 4 | hexval(s[2])) > 0x20 &&
		    (hexval(s[1]) << 4 | hexval(s[2])) < 0x7f) {
			c = hexval(s[1]) << 4 | hexval(s[2]);
			s += 2;
		}
		if (c > 0x20 && c < 0x7f)
			out[n++] = (char)c;
		else if (n + 3 <= max)
			n += (size_t)snprintf(out + n, 4, "%%%02X", c);
		else
			break;
	}
	if (*s)
		n += (size_t)snprintf(out + n, 4, "...");
	return json_stringn(out, n);
}

/* A count ("-": null) of at most 18 digits. */
static json_t *
number(const char *s, int *bad)
{
	size_t n = strlen(s);

	if (strcmp(s, "-") == 0)
		return json_null();
	if (n == 0 || n > 18 || strspn(s, "0123456789") != n) {
		*bad = 1;
		return json_null();
	}
	return json_integer(strtoll(s, NULL, 10));
}

/* An IPv4 or IPv6 address ("-": null). */
static json_t *
address(const char *s, int *bad)
{
	unsigned char a[16];

	if (strcmp(s, "-") == 0)
		return json_null();
	if (inet_pton(AF_INET, s, a) != 1 && inet_pton(AF_INET6, s, a) != 1) {
		*bad = 1;
		return json_null();
	}
	return json_string(s);
}

/* "SECONDS.MMM" as RFC 3339 with milliseconds; "" when malformed. */
static void
when(const char *s, char out[CLOCK_RFC3339_LEN])
{
	const char *dot = strchr(s, '.');
	size_t n = dot ? (size_t)(dot - s) : 0;

	out[0] = '\0';
	if (n == 0 || n > 11 || strspn(s, "0123456789") != n ||
	    strlen(dot + 1) != 3 || strspn(dot + 1, "0123456789") != 3)
		return;
	clock_format_rfc3339(strtoll(s, NULL, 10) * 1000000000LL +
	    strtoll(dot + 1, NULL, 10) * 1000000LL, 1, out);
}

/* Split line at single spaces into exactly F_COUNT fields; 0 or -1. */
static int
split(char *line, char *f[F_COUNT])
{
	int n = 0;

	for (char *p = line;; n++) {
		char *sp = strchr(p, ' ');

		if (n == F_COUNT || *p == '\0' || *p == ' ')
			return -1;
		f[n] = p;
		if (sp == NULL)
			break;
		*sp = '\0';
		p = sp + 1;
	}
	return n == F_COUNT - 1 ? 0 : -1;
}

/* "client": "IP:port", or "[IPv6]:port"; null when either is absent. */
static json_t *
client(json_t *ip, json_t *port)
{
	const char *s = json_string_value(ip);
	json_t *v;

	if (s == NULL || json_is_null(port))
		v = json_null();
	else
		v = json_sprintf(strchr(s, ':') ? "[%s]:%lld" : "%s:%lld", s,
		    (long long)json_integer_value(port));
	json_decref(ip);
	json_decref(port);
	return v;
}

json_t *
accesslog_record(char *line, size_t len, int *malformed)
{
	char *f[F_COUNT], now[CLOCK_RFC3339_LEN];
	json_t *rec, *reason;
	int bad = 0, allowed;

	*malformed = 0;
	line[len] = '\0';
	if (memchr(line, '\0', len) != NULL || split(line, f) != 0) {
		*malformed = 1;
		return NULL;
	}
	if (strcmp(f[F_REASON], "-") == 0 || (strcmp(f[F_METHOD], "CONNECT")
	    == 0 && strcmp(f[F_BUMP], "splice") == 0 &&
	    strcmp(f[F_STATUS], "NONE_NONE") == 0))
		return NULL;
	when(f[F_TIME], now);
	allowed = strcmp(f[F_REASON], "allowed") == 0;
	if (allowed && strcmp(f[F_ERR], "ERR_PROTOCOL_UNKNOWN") == 0) {
		allowed = 0;
		reason = json_string("not-tls");
	} else
		reason = allowed ? json_null() : text(f[F_REASON], 64);
	rec = json_pack("{s:s, s:s, s:s, s:o, s:o, s:o, s:o, s:o, s:o, s:o,"
	    " s:o, s:o, s:s, s:o, s:o, s:o, s:o}",
	    "apiVersion", "airlock.dev/v1alpha1",
	    "kind", "CodeExecutionEgress",
	    "time", now,
	    "namespace", text(f[F_NS], ACCESSLOG_HOST_MAX),
	    "name", text(f[F_NAME], ACCESSLOG_HOST_MAX),
	    "uid", text(f[F_UID], 64),
	    "client", client(address(f[F_CLIENT], &bad),
	    number(f[F_CPORT], &bad)),
	    "method", text(f[F_METHOD], ACCESSLOG_METHOD_MAX),
	    "host", text(f[F_HOST], ACCESSLOG_HOST_MAX),
	    "port", number(f[F_PORT], &bad),
	    "sni", text(f[F_SNI], ACCESSLOG_HOST_MAX),
	    "server", address(f[F_SERVER], &bad),
	    "decision", allowed ? "allowed" : "refused",
	    "reason", reason,
	    "bytesOut", number(f[F_OUT], &bad),
	    "bytesIn", number(f[F_IN], &bad),
	    "durationMillis", number(f[F_MS], &bad));
	if (bad || now[0] == '\0' || rec == NULL) {
		json_decref(rec);
		*malformed = 1;
		return NULL;
	}
	return rec;
}

struct daemon_state {
	int		 out;
	unsigned long	 malformed;
};

static int
on_command(void *arg, char *line, size_t len, int too_long)
{
	struct daemon_state *d = arg;
	json_t *rec;
	char *s;
	int malformed, rc;

	if (too_long) {
		log_warn("log: a line past the cap dropped", "max=%d",
		    ACCESSLOG_LINE_MAX);
		return 0;
	}
	if (len == 0 || line[0] != 'L')
		return 0;	/* R T O F r<n> b<n>: nothing to do on a stream */
	rec = accesslog_record(line + 1, len - 1, &malformed);
	if (malformed && d->malformed++ == 0)
		log_warn("log: a malformed record dropped (the logformat "
		    "differs from accesslog.c's?)");
	if (rec == NULL)
		return 0;
	s = json_dumps(rec, JSON_COMPACT | JSON_ENSURE_ASCII);
	json_decref(rec);
	len = strlen(s);
	s = xrealloc(s, len + 2);
	s[len++] = '\n';
	rc = lines_write(d->out, s, len);
	free(s);
	return rc;
}

int
accesslog_run(int in, int out)
{
	struct daemon_state d = { .out = out };
	struct lines l;
	char chunk[65536];
	int rc;

	lines_init(&l, ACCESSLOG_LINE_MAX);
	for (;;) {
		ssize_t r = read(in, chunk, sizeof(chunk));

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			rc = r == 0 ? 0 : -1;
			break;
		}
		if ((rc = lines_feed(&l, chunk, (size_t)r, on_command, &d)) != 0)
			break;
	}
	lines_free(&l);
	return rc;
}
