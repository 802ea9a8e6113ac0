/*
 * acl.c - see acl.h.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "acl.h"
#include "base64.h"

static const struct {
	const char	*name;
	int		 names;
} reasons[] = {
#define ACL_ROW(e, name, names) { name, names },
	ACL_REASONS(ACL_ROW)
#undef ACL_ROW
};

const char *
acl_reason_name(enum acl_reason r)
{
	return reasons[r].name;
}

static int
hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = (char)tolower((unsigned char)c);
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Decode %XX in s in place. 0, or -1 for a bad escape or a NUL. */
static int
unescape(char *s)
{
	char *w = s;

	for (const char *r = s; *r; r++) {
		if (*r != '%') {
			*w++ = *r;
			continue;
		}
		if (hexval(r[1]) < 0 || hexval(r[2]) < 0 ||
		    (hexval(r[1]) | hexval(r[2])) == 0)
			return -1;
		*w++ = (char)(hexval(r[1]) << 4 | hexval(r[2]));
		r += 2;
	}
	*w = '\0';
	return 0;
}

/* A host as compared: lowercase, one trailing dot dropped; "-" is NULL. */
static const char *
host_norm(char *s)
{
	size_t n = strlen(s);

	if (strcmp(s, "-") == 0)
		return NULL;
	for (size_t i = 0; i < n; i++)
		s[i] = (char)tolower((unsigned char)s[i]);
	if (n > 1 && s[n - 1] == '.')
		s[n - 1] = '\0';
	return s;
}

static int
all_digits(const char *s, size_t min, size_t max)
{
	size_t n = strlen(s);

	return n >= min && n <= max && strspn(s, "0123456789") == n;
}

/* "-" (absent) as NULL. */
static const char *
given(const char *s)
{
	return strcmp(s, "-") == 0 ? NULL : s;
}

int
acl_parse_line(char *line, size_t len, struct acl_request *rq)
{
	char *f[8], *p = line;
	int n = 0;

	memset(rq, 0, sizeof(*rq));
	rq->channel = "";
	if (len > ACL_LINE_MAX || memchr(line, '\0', len) != NULL)
		return -1;
	/* Squid ends the line with a space after its last field. */
	while (len > 0 && line[len - 1] == ' ')
		len--;
	line[len] = '\0';
	/* Single spaces only: an empty field is malformed, never skipped. */
	for (;;) {
		char *sp = strchr(p, ' ');

		if (n < 8)
			f[n] = p;
		n++;
		if (sp == NULL)
			break;
		*sp = '\0';
		p = sp + 1;
	}
	if (!all_digits(f[0], 1, ACL_CHANNEL_MAX))
		return -1;
	rq->channel = f[0];
	if (n != 8)
		return -1;
	for (int i = 1; i < 8; i++)
		if (f[i][0] == '\0' || unescape(f[i]) != 0)
			return -1;
	if (!all_digits(f[4], 1, 5) || (rq->port = atoi(f[4])) < 1 ||
	    rq->port > 65535)
		return -1;
	if (strcmp(f[7], "connect") == 0)
		rq->stage = ACL_STAGE_CONNECT;
	else if (strcmp(f[7], "tls") == 0)
		rq->stage = ACL_STAGE_TLS;
	else
		return -1;
	rq->auth = given(f[1]);
	rq->tag = given(f[2]);
	rq->method = f[6];
	rq->sni = host_norm(f[5]);
	return (rq->dst = host_norm(f[3])) == NULL ? -1 : 0;
}

int
acl_ip_literal(const char *host)
{
	int parts = 0;

	if (strchr(host, ':') != NULL)
		return 1;
	for (const char *p = host;; parts++) {
		const char *end = strchr(p, '.');
		size_t n = end ? (size_t)(end - p) : strlen(p);
		int hex = n > 2 && p[0] == '0' && p[1] == 'x';

		for (size_t i = hex ? 2 : 0; i < n; i++)
			if (!(isdigit((unsigned char)p[i]) ||
			    (hex && isxdigit((unsigned char)p[i]))))
				return 0;
		if (n == 0 || parts == 4)
			return 0;
		if (end == NULL)
			return 1;
		p = end + 1;
	}
}

static int
listed(const struct egress_claims *c, const char *host, int port)
{
	for (size_t i = 0; i < c->nhosts; i++) {
		if (strcmp(c->hosts[i].host, host) != 0)
			continue;
		for (size_t j = 0; j < c->hosts[i].nports; j++)
			if (c->hosts[i].ports[j] == port)
				return 1;
	}
	return 0;
}

/* The decision for rq on an execution's claims c. */
static enum acl_reason
decide(const struct acl_request *rq, const struct egress_claims *c)
{
	if (acl_ip_literal(rq->dst))
		return ACL_IP_LITERAL;
	if (!listed(c, rq->dst, rq->port))
		return ACL_NOT_IN_LIST;
	if (rq->stage == ACL_STAGE_TLS && rq->sni == NULL)
		return ACL_NO_SNI;
	if (rq->stage == ACL_STAGE_TLS && strcmp(rq->sni, rq->dst) != 0)
		return ACL_SNI_MISMATCH;
	return ACL_OK;
}

/* " key=value", value %-encoded outside [A-Za-z0-9._-]; the new off. */
static size_t
put_kv(char *out, size_t off, const char *key, const char *v)
{
	off += (size_t)snprintf(out + off, ACL_REPLY_MAX - off, " %s=", key);
	for (; *v && off + 4 < ACL_REPLY_MAX; v++) {
		unsigned char c = (unsigned char)*v;

		if (isalnum(c) || c == '.' || c == '_' || c == '-')
			out[off++] = (char)c;
		else
			off += (size_t)snprintf(out + off, 4, "%%%02X", c);
	}
	out[off] = '\0';
	return off;
}

/*
 * rq's pass: from its header into *buf (new, "USER:PASS"), or from its
 * tag; user, ulen, pass, plen point into one of them. ACL_OK, ACL_NO_PASS
 * or ACL_BAD_PASS; *from_auth when it came from the header.
 */
static enum acl_reason
pass_of(const struct acl_request *rq, char **buf, const char **user,
    size_t *ulen, const char **pass, size_t *plen, int *from_auth)
{
	const char *sep;
	size_t len;

	*buf = NULL;
	*from_auth = rq->auth != NULL;
	if (rq->auth != NULL) {
		if (strncasecmp(rq->auth, "Basic ", 6) != 0 ||
		    base64_decode(rq->auth + 6, strlen(rq->auth + 6), buf,
		    &len) != 0)
			return ACL_BAD_PASS;
		*user = *buf;
		sep = memchr(*buf, ':', len);
	} else if (rq->tag != NULL) {
		*user = rq->tag;
		len = strlen(rq->tag);
		sep = strrchr(rq->tag, '.');
	} else
		return ACL_NO_PASS;
	if (sep == NULL)
		return ACL_BAD_PASS;
	*ulen = (size_t)(sep - *user);
	*pass = sep + 1;
	*plen = len - *ulen - 1;
	return ACL_OK;
}

size_t
acl_answer(const struct acl_request *rq, const unsigned char *key,
    size_t keylen, long long now, char out[ACL_REPLY_MAX])
{
	char tag[EGRESS_USER_MAX + EGRESS_PASS_LEN + 2], *buf;
	const char *user = NULL, *pass = NULL, *why;
	struct egress_claims c = { 0 };
	size_t ulen = 0, plen = 0, n;
	int from_auth, checked = 0;
	enum acl_reason r;

	r = pass_of(rq, &buf, &user, &ulen, &pass, &plen, &from_auth);
	if (r == ACL_OK && egress_token_check(user, ulen, pass, plen, now, key,
	    keylen, &c, &why) != 0)
		r = strcmp(why, "expired") == 0 ? ACL_EXPIRED : ACL_BAD_PASS;
	else if (r == ACL_OK) {
		checked = 1;
		r = decide(rq, &c);
	}
	/* Checked, so it fits: at most EGRESS_USER_MAX and the HMAC. */
	if (r == ACL_OK && from_auth)
		snprintf(tag, sizeof(tag), "%.*s.%.*s", (int)ulen, user,
		    (int)plen, pass);
	n = acl_format_reply(out, rq->channel, r, checked ? &c : NULL,
	    r == ACL_OK && from_auth ? tag : NULL);
	egress_claims_free(&c);
	free(buf);
	return n;
}

size_t
acl_format_reply(char out[ACL_REPLY_MAX], const char *channel,
    enum acl_reason r, const struct egress_claims *c, const char *tag)
{
	size_t off;

	off = (size_t)snprintf(out, ACL_REPLY_MAX, "%s%s%s", channel,
	    channel[0] ? " " : "", r == ACL_OK ? "OK" : "ERR");
	if (c != NULL && reasons[r].names) {
		off = put_kv(out, off, "uid", c->uid);
		off = put_kv(out, off, "ns", c->ns);
		off = put_kv(out, off, "name", c->name);
	}
	if (r == ACL_OK && tag != NULL)
		off = put_kv(out, off, "clt_conn_tag", tag);
	if (r != ACL_OK)
		off = put_kv(out, off, "reason", acl_reason_name(r));
	out[off++] = '\n';
	out[off] = '\0';
	return off;
}
