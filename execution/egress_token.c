/*
 * egress_token.c - see egress_token.h.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "base64.h"
#include "buf.h"
#include "egress.h"
#include "egress_token.h"
#include "xmalloc.h"

#define CLAIMS_VERSION	1

/* The hex HMAC-SHA256 of s (len bytes) under key into out. */
static void
sign(const char *s, size_t len, const unsigned char *key, size_t keylen,
    char out[EGRESS_PASS_LEN + 1])
{
	unsigned char mac[32];
	unsigned int maclen = sizeof(mac);

	HMAC(EVP_sha256(), key, (int)keylen, (const unsigned char *)s, len, mac,
	    &maclen);
	for (unsigned int i = 0; i < 32; i++)
		snprintf(out + 2 * i, 3, "%02x", mac[i]);
}

int
egress_token_make(const struct ctl_egress *e, size_t n, const char *uid,
    const char *ns, const char *name, long long exp, const unsigned char *key,
    size_t keylen, char **user, char pass[EGRESS_PASS_LEN + 1],
    struct k8s_error *err)
{
	json_t *hosts = json_array(), *claims;
	char *text, *b64;
	size_t len;

	*user = NULL;
	for (size_t i = 0; i < n; i++) {
		json_t *ports = json_array();

		if (e[i].host == NULL) {
			json_decref(ports);
			continue;
		}
		for (size_t j = 0; j < e[i].nports; j++)
			json_array_append_new(ports, json_integer(e[i].ports[j]));
		json_array_append_new(hosts, json_pack("{s:s, s:o}", "host",
		    e[i].host, "ports", ports));
	}
	if (json_array_size(hosts) == 0 || keylen < EGRESS_KEY_MIN) {
		json_decref(hosts);
		return k8s_error_set(err, K8S_EINVAL, 0, NULL, "no host entry "
		    "or no key for an egress pass");
	}
	claims = json_pack("{s:i, s:s, s:s, s:s, s:I, s:o}", "v", CLAIMS_VERSION,
	    "uid", uid, "ns", ns, "name", name, "exp", (json_int_t)exp,
	    "hosts", hosts);
	text = claims ? json_dumps(claims, JSON_COMPACT) : NULL;
	json_decref(claims);
	if (text == NULL)
		return k8s_error_set(err, K8S_EINVAL, 0, NULL, "cannot write "
		    "the egress pass");
	b64 = base64_encode(text, strlen(text), &len);
	free(text);
	/* base64url, no padding: nothing a URL's userinfo must escape. */
	for (size_t i = 0; i < len; i++)
		b64[i] = b64[i] == '+' ? '-' : b64[i] == '/' ? '_' : b64[i];
	while (len > 0 && b64[len - 1] == '=')
		b64[--len] = '\0';
	if (len > EGRESS_USER_MAX) {
		free(b64);
		return k8s_error_set(err, K8S_EINVAL, 0, NULL, "the egress pass "
		    "would take %zu bytes, more than %d", len, EGRESS_USER_MAX);
	}
	sign(b64, len, key, keylen, pass);
	*user = b64;
	return 0;
}

/* base64url user (len bytes, checked alphabet) decoded, or NULL. */
static char *
unurl(const char *user, size_t len, size_t *outlen)
{
	char *std = xmalloc(len + 3), *out = NULL;
	size_t i;

	for (i = 0; i < len; i++) {
		char c = user[i];

		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
		    (c >= '0' && c <= '9') || c == '-' || c == '_'))
			break;
		std[i] = c == '-' ? '+' : c == '_' ? '/' : c;
	}
	if (i == len && len % 4 != 1) {
		while (i % 4 != 0)
			std[i++] = '=';
		if (base64_decode(std, i, &out, outlen) != 0)
			out = NULL;
	}
	free(std);
	return out;
}

/* Whether s is 1 to max of [a-z0-9-], and '.' where dots. */
static int
dns_text(json_t *s, size_t max, int dots)
{
	const char *v = json_string_value(s);
	size_t len = json_string_length(s);

	if (v == NULL || len == 0 || len > max || strlen(v) != len)
		return 0;
	for (size_t i = 0; i < len; i++)
		if (!((v[i] >= 'a' && v[i] <= 'z') || (v[i] >= '0' &&
		    v[i] <= '9') || v[i] == '-' || (dots && v[i] == '.')))
			return 0;
	return 1;
}

/* The claims' JSON (text, len bytes) into out. 0, or -1. */
static int
claims_parse(const char *text, size_t len, struct egress_claims *out)
{
	static const char *const keys[] = { "v", "uid", "ns", "name", "exp",
	    "hosts", NULL };
	json_t *c = json_loadb(text, len, JSON_REJECT_DUPLICATES, NULL), *net;
	struct k8s_error err;
	int given, rc = -1;
	size_t nkeys = 0;

	if (!json_is_object(c))
		goto out;
	for (nkeys = 0; keys[nkeys] != NULL; nkeys++)
		if (json_object_get(c, keys[nkeys]) == NULL)
			goto out;
	if (json_object_size(c) != nkeys ||
	    json_integer_value(json_object_get(c, "v")) != CLAIMS_VERSION ||
	    !json_is_integer(json_object_get(c, "exp")) ||
	    !dns_text(json_object_get(c, "uid"), 64, 0) ||
	    !dns_text(json_object_get(c, "ns"), 253, 1) ||
	    !dns_text(json_object_get(c, "name"), 253, 1))
		goto out;
	/* The hosts as spec.network.egress would have them, hosts alone. */
	net = json_pack("{s:O}", "egress", json_object_get(c, "hosts"));
	rc = egress_spec_parse(net, &out->hosts, &out->nhosts, &given, &err);
	json_decref(net);
	if (rc != 0)
		goto out;
	rc = out->nhosts > 0 ? 0 : -1;
	for (size_t i = 0; i < out->nhosts; i++)
		if (out->hosts[i].host == NULL)
			rc = -1;
	if (rc != 0)
		goto out;
	out->uid = xstrdup(json_string_value(json_object_get(c, "uid")));
	out->ns = xstrdup(json_string_value(json_object_get(c, "ns")));
	out->name = xstrdup(json_string_value(json_object_get(c, "name")));
	out->exp = json_integer_value(json_object_get(c, "exp"));
out:
	json_decref(c);
	if (rc != 0)
		egress_claims_free(out);
	return rc;
}

int
egress_token_check(const char *user, size_t ulen, const char *pass,
    size_t plen, long long now, const unsigned char *key, size_t keylen,
    struct egress_claims *out, const char **why)
{
	char want[EGRESS_PASS_LEN + 1], *text;
	size_t len;
	int rc;

	memset(out, 0, sizeof(*out));
	*why = "malformed";
	if (ulen == 0 || ulen > EGRESS_USER_MAX || plen != EGRESS_PASS_LEN ||
	    keylen < EGRESS_KEY_MIN)
		return -1;
	sign(user, ulen, key, keylen, want);
	if (CRYPTO_memcmp(want, pass, EGRESS_PASS_LEN) != 0) {
		*why = "bad-signature";
		return -1;
	}
	if ((text = unurl(user, ulen, &len)) == NULL)
		return -1;
	rc = claims_parse(text, len, out);
	free(text);
	if (rc != 0)
		return -1;
	if (out->exp <= now) {
		egress_claims_free(out);
		*why = "expired";
		return -1;
	}
	*why = NULL;
	return 0;
}

void
egress_claims_free(struct egress_claims *c)
{
	free(c->uid);
	free(c->ns);
	free(c->name);
	egress_free(c->hosts, c->nhosts);
	memset(c, 0, sizeof(*c));
}

int
egress_key_load(const char *path, unsigned char **key, size_t *keylen,
    struct k8s_error *err)
{
	struct buf b;
	size_t len;
	int rc;

	*key = NULL;
	/* The key and a newline at most: more is refused unread. */
	buf_init(&b, EGRESS_KEY_MAX + 1);
	rc = buf_read_file(&b, path, NULL);
	len = b.len;
	if (len > 0 && b.data[len - 1] == '\n')
		len--;
	if (rc == BUF_EIO)
		rc = k8s_error_set(err, K8S_EINVAL, 0, NULL, "egress key %s: "
		    "%s", path, strerror(errno));
	else if (rc != 0 || len < EGRESS_KEY_MIN || len > EGRESS_KEY_MAX)
		rc = k8s_error_set(err, K8S_EINVAL, 0, NULL, "egress key %s: "
		    "%s%zu bytes, not %d to %d", path, rc != 0 ? "more than " :
		    "", rc != 0 ? (size_t)EGRESS_KEY_MAX + 1 : len,
		    EGRESS_KEY_MIN, EGRESS_KEY_MAX);
	else {
		*key = xmalloc(len);
		memcpy(*key, b.data, len);
		*keylen = len;
	}
	if (b.data != NULL)
		OPENSSL_cleanse(b.data, b.alloc);
	buf_free(&b);
	return rc;
}
