#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>

#include "buf.h"
#include "client.h"
#include "client_priv.h"
#include "log.h"
#include "xmalloc.h"

const struct k8s_resource k8s_res_configmaps = { "", "v1", "configmaps", 1 };
const struct k8s_resource k8s_res_secrets = { "", "v1", "secrets", 1 };
const struct k8s_resource k8s_res_namespaces = { "", "v1", "namespaces", 0 };
const struct k8s_resource k8s_res_pods = { "", "v1", "pods", 1 };
const struct k8s_resource k8s_res_events = { "", "v1", "events", 1 };
const struct k8s_resource k8s_res_leases =
    { "coordination.k8s.io", "v1", "leases", 1 };

#define POOL_MAX	16	/* idle handles kept; more are freed */

struct k8s_client {
	struct k8s_config	*cfg;
	struct k8s_client_opts	 opts;
	pthread_mutex_t		 lock;		/* guards pool */
	CURL			*pool[POOL_MAX];
	int			 npool;
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;

static void
curl_init_once(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
}

int
k8s_client_new(struct k8s_config *cfg, const struct k8s_client_opts *opts,
    struct k8s_client **out, struct k8s_error *err)
{
	struct k8s_client *c;

	*out = NULL;
	if (cfg == NULL || cfg->server == NULL || cfg->server[0] == '\0')
		return k8s_error_set(err, K8S_EINVAL, 0, NULL,
		    "config has no server");
	if (strncmp(cfg->server, "https://", 8) != 0 &&
	    strncmp(cfg->server, "http://", 7) != 0)
		return k8s_error_set(err, K8S_EINVAL, 0, NULL,
		    "server '%s' is not an http(s) URL", cfg->server);
	if (strncmp(cfg->server, "http://", 7) == 0 &&
	    (cfg->token || cfg->token_file) &&
	    !(opts && opts->allow_token_over_http))
		return k8s_error_set(err, K8S_EINVAL, 0, NULL,
		    "refusing to send a bearer token to '%s' over plain http",
		    cfg->server);
	if (cfg->tls_server_name != NULL)
		return k8s_error_set(err, K8S_EINVAL, 0, NULL,
		    "tls-server-name is not supported");
	pthread_once(&curl_once, curl_init_once);

	c = xcalloc(1, sizeof(*c));
	c->cfg = cfg;
	if (opts)
		c->opts = *opts;
	if (c->opts.timeout_ms <= 0)
		c->opts.timeout_ms = 30000;
	if (c->opts.connect_timeout_ms <= 0)
		c->opts.connect_timeout_ms = 10000;
	if (c->opts.max_response_bytes == 0)
		c->opts.max_response_bytes = 32u << 20;
	if (c->opts.max_retries == 0)
		c->opts.max_retries = 3;
	else if (c->opts.max_retries < 0)
		c->opts.max_retries = 0;
	if (c->opts.max_retry_after_ms <= 0)
		c->opts.max_retry_after_ms = 10000;
	if (c->opts.user_agent == NULL)
		c->opts.user_agent = "airlock/0.1";
	pthread_mutex_init(&c->lock, NULL);
	*out = c;
	return 0;
}

void
k8s_client_free(struct k8s_client *c)
{
	if (c == NULL)
		return;
	for (int i = 0; i < c->npool; i++)
		curl_easy_cleanup(c->pool[i]);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

struct k8s_config *
k8s_client_config(struct k8s_client *c)
{
	return c->cfg;
}

const struct k8s_client_opts *
k8s_client_get_opts(struct k8s_client *c)
{
	return &c->opts;
}

static CURL *
handle_get(struct k8s_client *c)
{
	CURL *h = NULL;

	pthread_mutex_lock(&c->lock);
	if (c->npool > 0)
		h = c->pool[--c->npool];
	pthread_mutex_unlock(&c->lock);
	if (h == NULL && (h = curl_easy_init()) == NULL) {
		fprintf(stderr, "fatal: curl_easy_init failed\n");
		abort();
	}
	return h;
}

/* Back to the pool, keeping its connection open for the next request. */
static void
handle_put(struct k8s_client *c, CURL *h)
{
	pthread_mutex_lock(&c->lock);
	if (c->npool < POOL_MAX) {
		c->pool[c->npool++] = h;
		h = NULL;
	}
	pthread_mutex_unlock(&c->lock);
	if (h)
		curl_easy_cleanup(h);
}

static void
blob(CURL *h, CURLoption opt, char *data, size_t len)
{
	struct curl_blob b = { .data = data, .len = len,
	    .flags = CURL_BLOB_COPY };

	curl_easy_setopt(h, opt, &b);
}

int
k8s_client_setup(struct k8s_client *c, CURL *h, const char *method,
    const char *path, long timeout_ms, struct curl_slist **hdrs,
    struct k8s_error *err)
{
	struct k8s_config *cfg = c->cfg;
	char *url, *token = NULL;
	int rc;

	curl_easy_reset(h);
	url = xasprintf("%s%s", cfg->server, path);
	curl_easy_setopt(h, CURLOPT_URL, url);
	free(url);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h, CURLOPT_USERAGENT, c->opts.user_agent);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, c->opts.connect_timeout_ms);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
	curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(h, CURLOPT_TCP_KEEPIDLE, 30L);
	curl_easy_setopt(h, CURLOPT_TCP_KEEPINTVL, 10L);
	curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
	if (strcmp(method, "GET") == 0)
		curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);

	if (cfg->ca_pem)
		blob(h, CURLOPT_CAINFO_BLOB, cfg->ca_pem, cfg->ca_pem_len);
	else if (cfg->ca_file)
		curl_easy_setopt(h, CURLOPT_CAINFO, cfg->ca_file);
	if (cfg->cert_pem)
		blob(h, CURLOPT_SSLCERT_BLOB, cfg->cert_pem, cfg->cert_pem_len);
	else if (cfg->cert_file)
		curl_easy_setopt(h, CURLOPT_SSLCERT, cfg->cert_file);
	if (cfg->key_pem)
		blob(h, CURLOPT_SSLKEY_BLOB, cfg->key_pem, cfg->key_pem_len);
	else if (cfg->key_file)
		curl_easy_setopt(h, CURLOPT_SSLKEY, cfg->key_file);
	if (cfg->insecure_skip_tls_verify) {
		curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
	}

	*hdrs = curl_slist_append(*hdrs, "Accept: application/json");
	if ((rc = k8s_config_token(cfg, &token, err)) != 0)
		return rc;
	if (token) {
		char *auth = xasprintf("Authorization: Bearer %s", token);

		*hdrs = curl_slist_append(*hdrs, auth);
		explicit_bzero(auth, strlen(auth));
		explicit_bzero(token, strlen(token));
		free(auth);
		free(token);
	}
	return 0;
}

void
k8s_headers_free(struct curl_slist *hdrs)
{
	/* The Authorization header holds the token: wipe it before free. */
	for (struct curl_slist *s = hdrs; s; s = s->next)
		explicit_bzero(s->data, strlen(s->data));
	curl_slist_free_all(hdrs);
}

/* Make a server-supplied string safe for a one-line message. */
static void
sanitize(char *dst, size_t dstlen, const char *src, size_t len)
{
	size_t o = 0;

	for (size_t i = 0; i < len && o + 1 < dstlen; i++) {
		unsigned char ch = (unsigned char)src[i];

		dst[o++] = (ch >= 0x20 && ch < 0x7f) ? (char)ch : '?';
	}
	dst[o] = '\0';
}

int
k8s_error_from_response(long status, const char *body, size_t len,
    struct k8s_error *err)
{
	json_t *st = NULL;
	const char *reason = NULL, *msg = NULL;
	char snippet[200];
	int code;

	if (body && len > 0)
		st = json_loadb(body, len, JSON_ALLOW_NUL, NULL);
	if (json_is_object(st)) {
		reason = json_string_value(json_object_get(st, "reason"));
		msg = json_string_value(json_object_get(st, "message"));
	}
	code = k8s_errcode_from_http(status, reason);
	if (msg) {
		k8s_error_set(err, code, status, reason, "%s", msg);
	} else {
		sanitize(snippet, sizeof(snippet), body ? body : "",
		    body ? (len < 160 ? len : 160) : 0);
		k8s_error_set(err, code, status, reason, "http %ld%s%s",
		    status, snippet[0] ? ": " : "", snippet);
	}
	json_decref(st);
	return code;
}

struct xfer {
	struct buf	body;
	long		retry_after_s;	/* -1: no Retry-After header */
};

static size_t
write_cb(char *p, size_t size, size_t n, void *arg)
{
	struct xfer *x = arg;

	if (buf_append(&x->body, p, size * n) != 0)
		return 0;	/* curl fails the transfer: CURLE_WRITE_ERROR */
	return size * n;
}

static size_t
header_cb(char *p, size_t size, size_t n, void *arg)
{
	struct xfer *x = arg;
	size_t len = size * n;
	static const char name[] = "retry-after:";

	if (len > sizeof(name) - 1 && len < 64 &&
	    strncasecmp(p, name, sizeof(name) - 1) == 0) {
		char v[64];
		char *end;
		long s;

		memcpy(v, p + sizeof(name) - 1, len - (sizeof(name) - 1));
		v[len - (sizeof(name) - 1)] = '\0';
		s = strtol(v, &end, 10);
		while (*end == ' ' || *end == '\r' || *end == '\n')
			end++;
		/* Only delta-seconds; an HTTP-date is treated as 1 s. */
		x->retry_after_s = (*end == '\0' && s >= 0) ? s : 1;
		if (x->retry_after_s > 86400)
			x->retry_after_s = 86400;	/* the cap applies later */
	}
	return len;
}

static void
sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static int request(struct k8s_client *c, const char *method,
    const char *path, const char *content_type, const char *body,
    size_t body_len, size_t cap, long *statusp, json_t **out,
    struct k8s_error *err);

int
k8s_request(struct k8s_client *c, const char *method, const char *path,
    const char *content_type, const char *body, size_t body_len,
    long *statusp, json_t **out, struct k8s_error *err)
{
	return request(c, method, path, content_type, body, body_len, 0,
	    statusp, out, err);
}

int
k8s_request_capped(struct k8s_client *c, const char *path, size_t cap,
    json_t **out, struct k8s_error *err)
{
	return request(c, "GET", path, NULL, NULL, 0, cap, NULL, out, err);
}

/* cap: the response's, below the client's own (0: the client's). */
static int
request(struct k8s_client *c, const char *method, const char *path,
    const char *content_type, const char *body, size_t body_len, size_t cap,
    long *statusp, json_t **out, struct k8s_error *err)
{
	struct xfer x;
	struct curl_slist *hdrs = NULL;
	char ebuf[CURL_ERROR_SIZE];
	CURL *h = handle_get(c);
	json_error_t jerr;
	long status = 0;
	int rc, attempt;

	if (out)
		*out = NULL;
	if (cap == 0 || cap > c->opts.max_response_bytes)
		cap = c->opts.max_response_bytes;
	buf_init(&x.body, cap);
	for (attempt = 0;; attempt++) {
		buf_reset(&x.body);
		x.retry_after_s = -1;
		hdrs = NULL;
		if ((rc = k8s_client_setup(c, h, method, path,
		    c->opts.timeout_ms, &hdrs, err)) != 0) {
			k8s_headers_free(hdrs);
			goto out;
		}
		if (content_type) {
			char *ct = xasprintf("Content-Type: %s", content_type);

			hdrs = curl_slist_append(hdrs, ct);
			free(ct);
		}
		if (body) {
			curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
			curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE,
			    (curl_off_t)body_len);
		}
		curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
		curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, write_cb);
		curl_easy_setopt(h, CURLOPT_WRITEDATA, &x);
		curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, header_cb);
		curl_easy_setopt(h, CURLOPT_HEADERDATA, &x);
		curl_easy_setopt(h, CURLOPT_ERRORBUFFER, ebuf);
		ebuf[0] = '\0';

		CURLcode cc = curl_easy_perform(h);

		k8s_headers_free(hdrs);
		hdrs = NULL;
		if (cc == CURLE_WRITE_ERROR) {
			rc = k8s_error_set(err, K8S_ETOOBIG, 0, NULL,
			    "%s %s: response larger than %zu bytes", method,
			    path, cap);
			goto out;
		}
		if (cc != CURLE_OK) {
			rc = k8s_error_set(err, cc == CURLE_OPERATION_TIMEDOUT ?
			    K8S_ETIMEDOUT : K8S_EIO, 0, NULL, "%s %s: %s",
			    method, path, ebuf[0] ? ebuf : curl_easy_strerror(cc));
			goto out;
		}
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
		if (attempt < c->opts.max_retries &&
		    (status == 429 || (status >= 500 && x.retry_after_s >= 0))) {
			long ms = (x.retry_after_s < 0 ? 1 : x.retry_after_s) * 1000;

			if (ms > c->opts.max_retry_after_ms)
				ms = c->opts.max_retry_after_ms;
			log_debug("retrying request", "method=%s path=%s "
			    "status=%ld after_ms=%ld", method, path, status, ms);
			sleep_ms(ms);
			continue;
		}
		break;
	}
	if (statusp)
		*statusp = status;
	if (status < 200 || status >= 300) {
		rc = k8s_error_from_response(status, x.body.data, x.body.len,
		    err);
		goto out;
	}
	rc = 0;
	if (out && x.body.len > 0) {
		*out = json_loadb(x.body.data, x.body.len, JSON_ALLOW_NUL,
		    &jerr);
		if (*out == NULL)
			rc = k8s_error_set(err, K8S_EINVAL, status, NULL,
			    "%s %s: bad JSON in response: %s", method, path,
			    jerr.text);
	}
out:
	if (statusp && rc != 0 && status == 0)
		*statusp = 0;
	buf_free(&x.body);
	handle_put(c, h);
	return rc;
}

/* Path segments come from users and objects: keep them inside their slot. */
static int
segment_ok(const char *s)
{
	if (s[0] == '\0' || strcmp(s, ".") == 0 || strcmp(s, "..") == 0 ||
	    strlen(s) > 253)
		return 0;
	for (; *s; s++)
		if (*s == '/' || *s == '%' || *s == '?' || *s == '#' ||
		    (unsigned char)*s <= 0x20 || (unsigned char)*s >= 0x7f)
			return 0;
	return 1;
}

int
k8s_path(const struct k8s_resource *res, const char *ns, const char *name,
    const char *sub, char **out, struct k8s_error *err)
{
	const char *parts[] = { ns, name, sub };
	char *base, *p;

	*out = NULL;
	for (size_t i = 0; i < 3; i++)
		if (parts[i] && parts[i][0] && !segment_ok(parts[i]))
			return k8s_error_set(err, K8S_EINVAL, 0, NULL,
			    "invalid path segment '%.64s'", parts[i]);
	if ((name && !name[0]) || (sub && !name))
		return k8s_error_set(err, K8S_EINVAL, 0, NULL,
		    "empty object name");
	if (res->group[0])
		base = xasprintf("/apis/%s/%s", res->group, res->version);
	else
		base = xasprintf("/api/%s", res->version);
	if (res->namespaced && ns && ns[0])
		p = xasprintf("%s/namespaces/%s/%s", base, ns, res->plural);
	else
		p = xasprintf("%s/%s", base, res->plural);
	free(base);
	if (name) {
		base = p;
		p = sub ? xasprintf("%s/%s/%s", base, name, sub) :
		    xasprintf("%s/%s", base, name);
		free(base);
	}
	*out = p;
	return 0;
}

int
k8s_query_append(struct buf *b, const char *key, const char *value)
{
	static const char hex[] = "0123456789ABCDEF";
	int rc;

	rc = buf_append_str(b, strchr(b->data ? b->data : "", '?') ? "&" : "?");
	rc = rc ? rc : buf_append_str(b, key);
	rc = rc ? rc : buf_append(b, "=", 1);
	for (const unsigned char *s = (const unsigned char *)value;
	    *s && rc == 0; s++) {
		if (isalnum(*s) || strchr("-_.~", *s)) {
			rc = buf_append(b, s, 1);
		} else {
			char e[3] = { '%', hex[*s >> 4], hex[*s & 15] };

			rc = buf_append(b, e, 3);
		}
	}
	return rc ? K8S_ETOOBIG : 0;
}

int
k8s_get(struct k8s_client *c, const struct k8s_resource *res,
    const char *ns, const char *name, json_t **out, struct k8s_error *err)
{
	char *path;
	int rc;

	*out = NULL;
	if ((rc = k8s_path(res, ns, name, NULL, &path, err)) != 0)
		return rc;
	rc = k8s_request(c, "GET", path, NULL, NULL, 0, NULL, out, err);
	free(path);
	return rc;
}

/* POST/PUT/PATCH a JSON value to path. */
static int
send_json(struct k8s_client *c, const char *method, const char *path,
    const char *ctype, json_t *obj, json_t **out, struct k8s_error *err)
{
	char *body = json_dumps(obj, JSON_COMPACT);
	int rc;

	if (body == NULL)
		return k8s_error_set(err, K8S_EINVAL, 0, NULL,
		    "%s %s: object cannot be encoded", method, path);
	rc = k8s_request(c, method, path, ctype, body, strlen(body), NULL,
	    out, err);
	free(body);
	return rc;
}

int
k8s_create(struct k8s_client *c, const struct k8s_resource *res,
    const char *ns, json_t *obj, json_t **out, struct k8s_error *err)
{
	char *path;
	int rc;

	if (out)
		*out = NULL;
	if ((rc = k8s_path(res, ns, NULL, NULL, &path, err)) != 0)
		return rc;
	rc = send_json(c, "POST", path, "application/json", obj, out, err);
	free(path);
	return rc;
}

int
k8s_update(struct k8s_client *c, const struct k8s_resource *res,
    const char *ns, const char *name, const char *sub, json_t *obj,
    json_t **out, struct k8s_error *err)
{
	char *path;
	int rc;

	if (out)
		*out = NULL;
	if ((rc = k8s_path(res, ns, name, sub, &path, err)) != 0)
		return rc;
	rc = send_json(c, "PUT", path, "application/json", obj, out, err);
	free(path);
	return rc;
}

int
k8s_patch(struct k8s_client *c, const struct k8s_resource *res,
    const char *ns, const char *name, const struct k8s_patch_opts *o,
    json_t *patch, json_t **out, struct k8s_error *err)
{
	static const char *const ctypes[] = {
		[K8S_PATCH_MERGE] = "application/merge-patch+json",
		[K8S_PATCH_JSON] = "application/json-patch+json",
		[K8S_PATCH_STRATEGIC] = "application/strategic-merge-patch+json",
		/* JSON is YAML: the apply endpoint takes it as is. */
		[K8S_PATCH_APPLY] = "application/apply-patch+yaml",
	};
	struct buf q;
	char *path;
	int rc;

	if (out)
		*out = NULL;
	if ((unsigned)o->type > K8S_PATCH_APPLY)
		return k8s_error_set(err, K8S_EINVAL, 0, NULL,
		    "unknown patch type %d", (int)o->type);
	if (o->type == K8S_PATCH_APPLY &&
	    (o->field_manager == NULL || o->field_manager[0] == '\0'))
		return k8s_error_set(err, K8S_EINVAL, 0, NULL,
		    "server-side apply needs a field manager");
	if ((rc = k8s_path(res, ns, name, o->subresource, &path, err)) != 0)
		return rc;
	buf_init(&q, PATH_MAX_LEN);
	rc = buf_append_str(&q, path) ? K8S_ETOOBIG : 0;
	free(path);
	if (rc == 0 && o->field_manager)
		rc = k8s_query_append(&q, "fieldManager", o->field_manager);
	if (rc == 0 && o->type == K8S_PATCH_APPLY && o->force)
		rc = k8s_query_append(&q, "force", "true");
	if (rc != 0)
		rc = k8s_error_set(err, rc, 0, NULL, "patch query too long");
	else
		rc = send_json(c, "PATCH", q.data, ctypes[o->type], patch, out,
		    err);
	buf_free(&q);
	return rc;
}

int
k8s_delete(struct k8s_client *c, const struct k8s_resource *res,
    const char *ns, const char *name, const struct k8s_delete_opts *o,
    json_t **out, struct k8s_error *err)
{
	json_t *body = json_pack("{s:s, s:s}", "apiVersion", "v1",
	    "kind", "DeleteOptions");
	char *path;
	int rc;

	if (out)
		*out = NULL;
	if (o) {
		if (o->propagation_policy)
			json_object_set_new(body, "propagationPolicy",
			    json_string(o->propagation_policy));
		if (o->grace_period_set)
			json_object_set_new(body, "gracePeriodSeconds",
			    json_integer(o->grace_period_seconds));
		if (o->precondition_uid || o->precondition_rv) {
			json_t *pre = json_object();

			if (o->precondition_uid)
				json_object_set_new(pre, "uid",
				    json_string(o->precondition_uid));
			if (o->precondition_rv)
				json_object_set_new(pre, "resourceVersion",
				    json_string(o->precondition_rv));
			json_object_set_new(body, "preconditions", pre);
		}
	}
	if ((rc = k8s_path(res, ns, name, NULL, &path, err)) == 0) {
		rc = send_json(c, "DELETE", path, "application/json", body,
		    out, err);
		free(path);
	}
	json_decref(body);
	return rc;
}

static const char *
meta_str(json_t *obj, const char *key)
{
	return json_string_value(json_object_get(json_object_get(obj,
	    "metadata"), key));
}

const char *
k8s_obj_name(json_t *obj)
{
	return meta_str(obj, "name");
}

const char *
k8s_obj_namespace(json_t *obj)
{
	return meta_str(obj, "namespace");
}

const char *
k8s_obj_rv(json_t *obj)
{
	return meta_str(obj, "resourceVersion");
}

const char *
k8s_obj_uid(json_t *obj)
{
	return meta_str(obj, "uid");
}
