/*
 * config.c - kubeconfig and in-cluster loading, and the bearer token cache.
 *
 * The kubeconfig walk follows the kubeconfig schema to a fixed depth and
 * never recurses on what it finds, so an alias that makes the YAML node
 * graph cyclic cannot loop it; yamlwalk.h bounds its time.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base64.h"
#include "buf.h"
#include "config.h"
#include "xmalloc.h"
#include "yamlwalk.h"

/* Re-read an unchanged token file this often anyway (client-go: a minute). */
#define TOKEN_MAX_AGE_SEC	60
#define NAMESPACE_MAX		4096

static struct k8s_config *
config_new(void)
{
	struct k8s_config *c = xcalloc(1, sizeof(*c));

	if (pthread_mutex_init(&c->tok_mu, NULL) != 0)
		abort();
	return c;
}

static void
free_secret(char *s, size_t len)
{
	if (s == NULL)
		return;
	explicit_bzero(s, len);
	free(s);
}

void
k8s_config_free(struct k8s_config *c)
{
	if (c == NULL)
		return;
	free(c->server);
	free(c->namespace);
	free(c->ca_pem);
	free(c->ca_file);
	free(c->cert_pem);
	free(c->cert_file);
	free_secret(c->key_pem, c->key_pem_len);
	free(c->key_file);
	free(c->tls_server_name);
	if (c->token != NULL)
		free_secret(c->token, strlen(c->token));
	free(c->token_file);
	if (c->tok_value != NULL)
		free_secret(c->tok_value, strlen(c->tok_value));
	pthread_mutex_destroy(&c->tok_mu);
	free(c);
}

/* dir/rel without a doubled slash. Caller frees. */
static char *
path_join(const char *dir, const char *rel)
{
	size_t n = strlen(dir);

	return xasprintf("%s%s%s", dir, n > 0 && dir[n - 1] == '/' ? "" : "/",
	    rel);
}

/* 1 if s[0..len) holds a control byte (which cannot go into a header). */
static int
has_ctl(const char *s, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			return 1;
	return 0;
}

/*
 * The API server URL for a kubeconfig server value: http(s) only, https://
 * assumed without a scheme, trailing slashes dropped. NULL if unusable.
 */
static char *
server_url(const char *s)
{
	const char *host = s, *sep = strstr(s, "://");
	char *url;
	size_t n;

	if (has_ctl(s, strlen(s)) || strchr(s, ' ') != NULL)
		return NULL;
	if (sep != NULL) {
		if (!((sep - s == 4 && strncasecmp(s, "http", 4) == 0) ||
		    (sep - s == 5 && strncasecmp(s, "https", 5) == 0)))
			return NULL;
		host = sep + 3;
		url = xstrdup(s);
	} else
		url = xasprintf("https://%s", s);
	if (*host == '\0' || *host == '/') {
		free(url);
		return NULL;
	}
	n = strlen(url);
	while (url[n - 1] == '/')
		url[--n] = '\0';
	return url;
}

/* --- the kubeconfig walk ------------------------------------------------ */

/* The state of one kubeconfig walk. */
struct kc {
	struct yamlwalk	 w;
	char		*dir;	/* absolute directory of the file */
};

/* A path from the kubeconfig: relative ones are to its directory. */
static char *
kc_resolve(struct kc *k, const char *path)
{
	return path[0] == '/' ? xstrdup(path) : path_join(k->dir, path);
}

/*
 * One TLS item given as filekey (a path) or datakey (base64 PEM), not both.
 * Sets *pem and *pemlen, or *file, or neither when the item is absent.
 */
static int
kc_pem(struct kc *k, yaml_node_t *map, const char *where, const char *filekey,
    const char *datakey, char **pem, size_t *pemlen, char **file)
{
	struct yamlwalk *w = &k->w;
	yaml_node_t *n;
	char *path = NULL;
	int rc;

	if ((rc = yamlwalk_string(w, map, where, filekey, &path)) != 0 ||
	    (rc = yamlwalk_lookup(w, map, where, datakey, &n)) != 0)
		goto out;
	if (n != NULL && n->type != YAML_SCALAR_NODE) {
		rc = yamlwalk_fail(w, "%s.%s is not a string", where, datakey);
		goto out;
	}
	if (n != NULL && n->data.scalar.length == 0)
		n = NULL;
	if (n != NULL && path != NULL) {
		rc = yamlwalk_fail(w, "%s: both %s and %s are set", where,
		    filekey, datakey);
		goto out;
	}
	if (path != NULL)
		*file = kc_resolve(k, path);
	if (n == NULL)
		goto out;
	if (base64_decode((const char *)n->data.scalar.value,
	    n->data.scalar.length, pem, pemlen) != 0) {
		rc = yamlwalk_fail(w, "%s.%s is not valid base64", where,
		    datakey);
		goto out;
	}
	if (*pemlen == 0) {
		free(*pem);
		*pem = NULL;
	}
out:
	free(path);
	return rc;
}

/*
 * Check every entry of list (clusters, users, contexts) is a mapping with a
 * name and a mapping (or null) under bodykey; if name is non-NULL, find the
 * one entry so named: *body (NULL if null) and *index. ref, if non-NULL,
 * says where the name came from, for the not-found message.
 */
static int
kc_find(struct kc *k, yaml_node_t *root, const char *list, const char *bodykey,
    const char *name, const char *ref, yaml_node_t **body, size_t *index)
{
	struct yamlwalk *w = &k->w;
	yaml_node_item_t *it;
	yaml_node_t *seq, *item, *nn, *b;
	char where[64];
	size_t i;
	int rc, found = 0;

	if ((rc = yamlwalk_lookup(w, root, "", list, &seq)) != 0)
		return rc;
	if (seq != NULL && seq->type != YAML_SEQUENCE_NODE)
		return yamlwalk_fail(w, "%s is not a sequence", list);
	for (i = 0, it = seq ? seq->data.sequence.items.start : NULL;
	    seq != NULL && it < seq->data.sequence.items.top; it++, i++) {
		if ((rc = yamlwalk_step(w)) != 0)
			return rc;
		snprintf(where, sizeof(where), "%s[%zu]", list, i);
		item = yamlwalk_node(w, *it);
		if (item == NULL || item->type != YAML_MAPPING_NODE)
			return yamlwalk_fail(w, "%s is not a mapping", where);
		if ((rc = yamlwalk_lookup(w, item, where, "name", &nn)) != 0 ||
		    (rc = yamlwalk_lookup(w, item, where, bodykey, &b)) != 0)
			return rc;
		if (nn == NULL)
			return yamlwalk_fail(w, "%s.name is missing", where);
		if (nn->type != YAML_SCALAR_NODE)
			return yamlwalk_fail(w, "%s.name is not a string",
			    where);
		if (b != NULL && b->type != YAML_MAPPING_NODE)
			return yamlwalk_fail(w, "%s.%s is not a mapping",
			    where, bodykey);
		if (name == NULL || !yamlwalk_scalar_is(nn, name))
			continue;
		if (found++)
			return yamlwalk_fail(w, "%s '%s' is defined twice",
			    bodykey, name);
		*body = b;
		*index = i;
	}
	if (name != NULL && !found)
		return yamlwalk_fail(w, "%s '%s' not found%s%s%s", bodykey,
		    name, ref ? " (referenced by " : "", ref ? ref : "",
		    ref ? ")" : "");
	return 0;
}

static int
kc_cluster(struct kc *k, yaml_node_t *body, size_t index, const char *name,
    struct k8s_config *c)
{
	struct yamlwalk *w = &k->w;
	static const char *const refused[] = { "proxy-url", NULL };
	char where[64], *server = NULL;
	int rc;

	snprintf(where, sizeof(where), "clusters[%zu].cluster", index);
	if ((rc = yamlwalk_refuse(w, body, where, refused)) != 0 ||
	    (rc = yamlwalk_string(w, body, where, "server", &server)) != 0)
		goto out;
	if (server == NULL) {
		rc = yamlwalk_fail(w, "cluster '%s' has no server (%s.server)",
		    name, where);
		goto out;
	}
	if ((c->server = server_url(server)) == NULL) {
		rc = yamlwalk_fail(w, "%s.server '%s' is not an http(s) URL",
		    where, server);
		goto out;
	}
	if ((rc = kc_pem(k, body, where, "certificate-authority",
	    "certificate-authority-data", &c->ca_pem, &c->ca_pem_len,
	    &c->ca_file)) != 0 ||
	    (rc = yamlwalk_bool(w, body, where, "insecure-skip-tls-verify",
	    &c->insecure_skip_tls_verify)) != 0 ||
	    (rc = yamlwalk_string(w, body, where, "tls-server-name",
	    &c->tls_server_name)) != 0)
		goto out;
	/* client-go refuses this too: which of the two was meant? */
	if (c->insecure_skip_tls_verify && (c->ca_pem || c->ca_file))
		rc = yamlwalk_fail(w, "%s: insecure-skip-tls-verify is set "
		    "together with a certificate authority", where);
out:
	free(server);
	return rc;
}

static int
kc_user(struct kc *k, yaml_node_t *body, size_t index, struct k8s_config *c)
{
	struct yamlwalk *w = &k->w;
	static const char *const refused[] = { "exec", "auth-provider",
	    "username", "password", "as", "as-uid", "as-groups",
	    "as-user-extra", NULL };
	char where[64], *tokfile = NULL;
	int rc, cert, key;

	snprintf(where, sizeof(where), "users[%zu].user", index);
	if ((rc = yamlwalk_refuse(w, body, where, refused)) != 0 ||
	    (rc = kc_pem(k, body, where, "client-certificate",
	    "client-certificate-data", &c->cert_pem, &c->cert_pem_len,
	    &c->cert_file)) != 0 ||
	    (rc = kc_pem(k, body, where, "client-key", "client-key-data",
	    &c->key_pem, &c->key_pem_len, &c->key_file)) != 0)
		goto out;
	cert = c->cert_pem != NULL || c->cert_file != NULL;
	key = c->key_pem != NULL || c->key_file != NULL;
	if (cert != key) {
		rc = yamlwalk_fail(w, "%s: %s is set without %s", where,
		    cert ? "client-certificate" : "client-key",
		    cert ? "client-key" : "client-certificate");
		goto out;
	}
	if ((rc = yamlwalk_string(w, body, where, "token", &c->token)) != 0 ||
	    (rc = yamlwalk_string(w, body, where, "tokenFile", &tokfile)) != 0)
		goto out;
	if (c->token != NULL && has_ctl(c->token, strlen(c->token))) {
		rc = yamlwalk_fail(w, "%s.token contains a control character",
		    where);
		goto out;
	}
	if (c->token != NULL && tokfile != NULL) {
		rc = yamlwalk_fail(w, "%s: both token and tokenFile are set",
		    where);
		goto out;
	}
	if (tokfile != NULL)
		c->token_file = kc_resolve(k, tokfile);
out:
	free(tokfile);
	return rc;
}

/* Fill c from the mapping at the top of the document. */
static int
kc_walk(struct kc *k, yaml_node_t *root, const char *context,
    struct k8s_config *c)
{
	struct yamlwalk *w = &k->w;
	yaml_node_t *ctx = NULL, *cl = NULL, *us = NULL;
	char where[64], ref[96], *current = NULL, *cname = NULL, *uname = NULL;
	size_t ci = 0, cli = 0, ui = 0;
	int rc;

	if ((rc = yamlwalk_string(w, root, "", "current-context",
	    &current)) != 0)
		goto out;
	if (context == NULL && (context = current) == NULL) {
		rc = yamlwalk_fail(w, "current-context is not set and no "
		    "context was given");
		goto out;
	}
	if ((rc = kc_find(k, root, "contexts", "context", context, NULL, &ctx,
	    &ci)) != 0)
		goto out;
	snprintf(where, sizeof(where), "contexts[%zu].context", ci);
	if ((rc = yamlwalk_string(w, ctx, where, "cluster", &cname)) != 0 ||
	    (rc = yamlwalk_string(w, ctx, where, "user", &uname)) != 0 ||
	    (rc = yamlwalk_string(w, ctx, where, "namespace",
	    &c->namespace)) != 0)
		goto out;
	if (cname == NULL) {
		rc = yamlwalk_fail(w, "context '%s' has no cluster "
		    "(%s.cluster)", context, where);
		goto out;
	}
	snprintf(ref, sizeof(ref), "%s.cluster", where);
	if ((rc = kc_find(k, root, "clusters", "cluster", cname, ref, &cl,
	    &cli)) != 0)
		goto out;
	snprintf(ref, sizeof(ref), "%s.user", where);
	/* A context without a user is anonymous, as with kubectl. */
	if ((rc = kc_find(k, root, "users", "user", uname, ref, &us,
	    &ui)) != 0 ||
	    (rc = kc_cluster(k, cl, cli, cname, c)) != 0 ||
	    (uname != NULL && (rc = kc_user(k, us, ui, c)) != 0))
		goto out;
	if (c->namespace == NULL)
		c->namespace = xstrdup("default");
out:
	free(current);
	free(cname);
	free(uname);
	return rc;
}

/* The absolute directory of path (not symlink-resolved), or NULL. */
static char *
dir_of(const char *path)
{
	char *cwd, *abs, *slash;

	if (path[0] == '/')
		abs = xstrdup(path);
	else {
		if ((cwd = getcwd(NULL, 0)) == NULL)
			return NULL;
		while (path[0] == '.' && path[1] == '/')
			for (path += 2; *path == '/'; path++)
				;
		abs = path_join(cwd, path);
		free(cwd);
	}
	slash = strrchr(abs, '/');
	slash[slash == abs ? 1 : 0] = '\0';
	return abs;
}

int
k8s_config_load_kubeconfig(const char *path, const char *context,
    struct k8s_config **out, struct k8s_error *err)
{
	yaml_node_t *root;
	struct k8s_config *c = NULL;
	struct kc k;
	struct buf b;
	int rc;

	yamlwalk_init(&k.w, "kubeconfig", path, err);
	k.dir = NULL;
	buf_init(&b, K8S_CONFIG_MAX_KUBECONFIG);
	if (path == NULL || *path == '\0') {
		rc = k8s_error_set(err, K8S_EINVAL, 0, NULL,
		    "kubeconfig path is empty");
		goto out;
	}
	if ((rc = buf_read_file(&b, path, NULL)) == BUF_ETOOBIG) {
		rc = k8s_error_set(err, K8S_ETOOBIG, 0, NULL,
		    "kubeconfig '%s' is larger than %d bytes", path,
		    K8S_CONFIG_MAX_KUBECONFIG);
		goto out;
	}
	if (rc != 0 || (k.dir = dir_of(path)) == NULL) {
		rc = k8s_error_set(err, K8S_EINVAL, 0, NULL,
		    "cannot read kubeconfig '%s': %s", path, strerror(errno));
		goto out;
	}
	if ((rc = yamlwalk_load(&k.w, b.data, b.len, &root)) != 0)
		goto out;
	c = config_new();
	if ((rc = kc_walk(&k, root, context, c)) != 0)
		goto out;
	*out = c;
	c = NULL;
out:
	yamlwalk_free(&k.w);
	buf_free(&b);
	free(k.dir);
	k8s_config_free(c);
	return rc;
}

/* --- in-cluster and the default search ---------------------------------- */

static int
valid_port(const char *s)
{
	unsigned long v = 0;

	if (*s == '\0' || strlen(s) > 5)
		return 0;
	for (; *s != '\0'; s++) {
		if (!isdigit((unsigned char)*s))
			return 0;
		v = v * 10 + (unsigned long)(*s - '0');
	}
	return v >= 1 && v <= 65535;
}

/* Fail with "cannot read service account <what> '<path>': <errno>". */
static int
sa_unreadable(struct k8s_error *err, const char *what, const char *path)
{
	return k8s_error_set(err, K8S_EINVAL, 0, NULL,
	    "cannot read service account %s '%s': %s", what, path,
	    strerror(errno));
}

int
k8s_config_load_incluster(const char *sa_dir, struct k8s_config **out,
    struct k8s_error *err)
{
	const char *host = getenv("KUBERNETES_SERVICE_HOST");
	const char *port = getenv("KUBERNETES_SERVICE_PORT");
	struct k8s_config *c = NULL;
	struct buf b;
	char *nspath = NULL, *s, *e;
	int rc, v6;

	buf_init(&b, NAMESPACE_MAX);
	if (sa_dir == NULL)
		sa_dir = K8S_CONFIG_DEFAULT_SA_DIR;
	if (host == NULL || *host == '\0') {
		rc = k8s_error_set(err, K8S_EINVAL, 0, NULL, "not running in a "
		    "cluster: KUBERNETES_SERVICE_HOST is not set");
		goto out;
	}
	if (port == NULL || *port == '\0') {
		rc = k8s_error_set(err, K8S_EINVAL, 0, NULL, "not running in a "
		    "cluster: KUBERNETES_SERVICE_PORT is not set");
		goto out;
	}
	if (!valid_port(port)) {
		rc = k8s_error_set(err, K8S_EINVAL, 0, NULL,
		    "KUBERNETES_SERVICE_PORT '%s' is not a port number", port);
		goto out;
	}
	if (has_ctl(host, strlen(host)) || strpbrk(host, " /?#@") != NULL) {
		rc = k8s_error_set(err, K8S_EINVAL, 0, NULL,
		    "KUBERNETES_SERVICE_HOST '%s' is not a host name or "
		    "address", host);
		goto out;
	}
	v6 = strchr(host, ':') != NULL && host[0] != '[';
	c = config_new();
	c->server = xasprintf("https://%s%s%s:%s", v6 ? "[" : "", host,
	    v6 ? "]" : "", port);
	c->token_file = path_join(sa_dir, "token");
	c->ca_file = path_join(sa_dir, "ca.crt");
	nspath = path_join(sa_dir, "namespace");
	if (access(c->token_file, R_OK) == -1) {
		rc = sa_unreadable(err, "token", c->token_file);
		goto out;
	}
	if (access(c->ca_file, R_OK) == -1) {
		rc = sa_unreadable(err, "ca.crt", c->ca_file);
		goto out;
	}
	/* No namespace file: client-go falls back to "default" too. */
	rc = buf_read_file(&b, nspath, NULL);
	if (rc == BUF_ETOOBIG)
		errno = EFBIG;
	if (rc != 0 && (rc == BUF_ETOOBIG || errno != ENOENT)) {
		rc = sa_unreadable(err, "namespace", nspath);
		goto out;
	}
	rc = 0;
	s = b.data != NULL ? b.data : "";
	while (isspace((unsigned char)*s))
		s++;
	for (e = s + strlen(s); e > s && isspace((unsigned char)e[-1]); e--)
		;
	c->namespace = e > s ? xstrndup(s, (size_t)(e - s)) :
	    xstrdup("default");
	*out = c;
	c = NULL;
out:
	buf_free(&b);
	free(nspath);
	k8s_config_free(c);
	return rc;
}

int
k8s_config_load_default(const char *path, const char *context,
    struct k8s_config **out, struct k8s_error *err)
{
	const char *env, *home;
	char *p;
	int rc;

	if (path != NULL)
		return k8s_config_load_kubeconfig(path, context, out, err);
	if ((env = getenv("KUBECONFIG")) != NULL) {
		while (*env == ':')
			env++;
		if (*env != '\0') {
			p = xstrndup(env, strcspn(env, ":"));
			rc = k8s_config_load_kubeconfig(p, context, out, err);
			free(p);
			return rc;
		}
	}
	if ((env = getenv("KUBERNETES_SERVICE_HOST")) != NULL && *env != '\0') {
		if (context != NULL)
			return k8s_error_set(err, K8S_EINVAL, 0, NULL,
			    "context '%s' needs a kubeconfig, but none was "
			    "given and KUBERNETES_SERVICE_HOST selects "
			    "in-cluster config", context);
		return k8s_config_load_incluster(NULL, out, err);
	}
	if ((home = getenv("HOME")) == NULL || *home == '\0')
		return k8s_error_set(err, K8S_EINVAL, 0, NULL, "no kubeconfig: "
		    "none given, KUBECONFIG and KUBERNETES_SERVICE_HOST unset, "
		    "and HOME is not set");
	p = path_join(home, ".kube/config");
	rc = k8s_config_load_kubeconfig(p, context, out, err);
	free(p);
	return rc;
}

/* --- the bearer token --------------------------------------------------- */

static int
same_file(const struct k8s_config *c, const struct stat *st)
{
	return c->tok_dev == st->st_dev && c->tok_ino == st->st_ino &&
	    c->tok_size == st->st_size &&
	    c->tok_mtime.tv_sec == st->st_mtim.tv_sec &&
	    c->tok_mtime.tv_nsec == st->st_mtim.tv_nsec;
}

int
k8s_config_token(struct k8s_config *c, char **out, struct k8s_error *err)
{
	struct timespec now;
	struct stat st;
	struct buf b;
	int rc = 0;

	if (c->token_file == NULL) {
		*out = c->token != NULL ? xstrdup(c->token) : NULL;
		return 0;
	}
	buf_init(&b, K8S_CONFIG_MAX_TOKEN);
	pthread_mutex_lock(&c->tok_mu);
	clock_gettime(CLOCK_MONOTONIC, &now);
	if (stat(c->token_file, &st) == -1) {
		rc = k8s_error_set(err, K8S_EIO, 0, NULL,
		    "cannot read token file '%s': %s", c->token_file,
		    strerror(errno));
		goto out;
	}
	if (c->tok_value != NULL && same_file(c, &st) &&
	    now.tv_sec - c->tok_read_at.tv_sec < TOKEN_MAX_AGE_SEC) {
		*out = xstrdup(c->tok_value);
		goto out;
	}
	/* The identity cached is that of the file actually read (fstat). */
	if ((rc = buf_read_file(&b, c->token_file, &st)) == BUF_ETOOBIG) {
		rc = k8s_error_set(err, K8S_ETOOBIG, 0, NULL,
		    "token file '%s' is larger than %d bytes", c->token_file,
		    K8S_CONFIG_MAX_TOKEN);
		goto out;
	}
	if (rc != 0) {
		rc = k8s_error_set(err, K8S_EIO, 0, NULL,
		    "cannot read token file '%s': %s", c->token_file,
		    strerror(errno));
		goto out;
	}
	while (b.len > 0 && isspace((unsigned char)b.data[b.len - 1]))
		b.len--;
	if (b.len == 0) {
		rc = k8s_error_set(err, K8S_EIO, 0, NULL,
		    "token file '%s' is empty", c->token_file);
		goto out;
	}
	if (has_ctl(b.data, b.len)) {
		rc = k8s_error_set(err, K8S_EINVAL, 0, NULL,
		    "token file '%s' contains a control character",
		    c->token_file);
		goto out;
	}
	if (c->tok_value != NULL)
		free_secret(c->tok_value, strlen(c->tok_value));
	c->tok_value = xstrndup(b.data, b.len);
	c->tok_dev = st.st_dev;
	c->tok_ino = st.st_ino;
	c->tok_size = st.st_size;
	c->tok_mtime = st.st_mtim;
	c->tok_read_at = now;
	*out = xstrdup(c->tok_value);
out:
	pthread_mutex_unlock(&c->tok_mu);
	if (b.data != NULL)
		explicit_bzero(b.data, b.alloc);
	buf_free(&b);
	return rc;
}
