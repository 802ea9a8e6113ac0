/* Unit tests: operator/config.c, operator/yamlwalk.c, operator/base64.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "base64.h"
#include "config.h"
#include "k8s_error.h"
#include "xmalloc.h"

#define CA_PEM	"-----BEGIN CERTIFICATE-----\nZmFrZS1jYQ==\n" \
		"-----END CERTIFICATE-----\n"
#define CERT_PEM "-----BEGIN CERTIFICATE-----\nZmFrZS1jbGllbnQ=\n" \
		"-----END CERTIFICATE-----\n"
#define KEY_PEM	"-----BEGIN PRIVATE KEY-----\nZmFrZS1rZXk=\n" \
		"-----END PRIVATE KEY-----\n"

/* The absolute directory holding the kubeconfig fixtures. Caller frees. */
static char *
fixture_dir(void)
{
	const char *top = getenv("AIRLOCK_TOP");
	char *cwd, *dir;

	if (top != NULL && top[0] == '/')
		return xasprintf("%s/tests/data/kubeconfig", top);
	cwd = getcwd(NULL, 0);
	assert_non_null(cwd);
	if (top == NULL || strcmp(top, ".") == 0)
		dir = xasprintf("%s/tests/data/kubeconfig", cwd);
	else
		dir = xasprintf("%s/%s/tests/data/kubeconfig", cwd, top);
	free(cwd);
	return dir;
}

static char *
fixture(const char *name)
{
	char *dir = fixture_dir(), *p = xasprintf("%s/%s", dir, name);

	free(dir);
	return p;
}

static void
write_file(const char *path, const void *data, size_t len)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, len, f), len);
	assert_int_equal(fclose(f), 0);
}

static char *
make_tmpdir(void)
{
	char *d = xstrdup("/tmp/airlock-config-XXXXXX");

	assert_non_null(mkdtemp(d));
	return d;
}

static void
remove_tree(const char *dir, const char *const *names)
{
	char *p;

	for (; *names != NULL; names++) {
		p = xasprintf("%s/%s", dir, *names);
		unlink(p);
		free(p);
	}
	assert_int_equal(rmdir(dir), 0);
}

/* Load fixture name with context; assert it fails with code and substring. */
static void
expect_fail(const char *name, const char *context, int code, const char *sub)
{
	struct k8s_config *c = NULL;
	struct k8s_error e;
	char *p = fixture(name);
	int rc;

	k8s_error_clear(&e);
	rc = k8s_config_load_kubeconfig(p, context, &c, &e);
	if (rc != code || strstr(e.message, sub) == NULL ||
	    strstr(e.message, p) == NULL) {
		print_error("%s: rc %d, message '%s'; want %d and '%s'\n", name,
		    rc, e.message, code, sub);
		fail();
	}
	assert_int_equal(e.code, code);
	assert_null(c);
	free(p);
}

static void
test_base64_decode(void **state)
{
	static const struct { const char *in, *out; } ok[] = {
		{ "", "" }, { "Zg==", "f" }, { "Zm8=", "fo" }, { "Zm9v", "foo" },
		{ "Zm9vYg==", "foob" }, { "Zm9vYmE=", "fooba" },
		{ "Zm9vYmFy", "foobar" }, { "Zm9v\nYmFy\r\n", "foobar" },
		{ " Zm 9v YmE= ", "fooba" }, { "+/+/", "\xfb\xff\xbf" },
	};
	static const char *const bad[] = { "Zm9", "Zg=", "Zg", "Z===",
	    "Zg==Zg==", "Zm9v!", "=Zm9", "Zm=v", "Zg===", "Zm9v-_" };
	char *out;
	size_t i, len;

	(void)state;
	for (i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		out = NULL;
		assert_int_equal(base64_decode(ok[i].in, strlen(ok[i].in), &out,
		    &len), 0);
		assert_int_equal(len, strlen(ok[i].out));
		assert_memory_equal(out, ok[i].out, len);
		assert_int_equal(out[len], '\0');
		free(out);
	}
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		out = NULL;
		if (base64_decode(bad[i], strlen(bad[i]), &out, &len) != -1) {
			print_error("'%s' decoded\n", bad[i]);
			fail();
		}
		assert_null(out);
	}
	/* Length-bounded: the bytes after len are not looked at. */
	assert_int_equal(base64_decode("Zm9v!!!!", 4, &out, &len), 0);
	assert_string_equal(out, "foo");
	free(out);
}

static void
test_full_current_context(void **state)
{
	struct k8s_config *c = NULL;
	struct k8s_error e;
	char *p = fixture("full.yaml"), *tok = (char *)"x";

	(void)state;
	assert_int_equal(k8s_config_load_kubeconfig(p, NULL, &c, &e), 0);
	assert_string_equal(c->server, "https://prod.example.com:6443");
	assert_string_equal(c->namespace, "airlock-system");
	assert_int_equal(c->ca_pem_len, strlen(CA_PEM));
	assert_memory_equal(c->ca_pem, CA_PEM, strlen(CA_PEM));
	assert_string_equal(c->ca_pem, CA_PEM);
	assert_null(c->ca_file);
	assert_int_equal(c->cert_pem_len, strlen(CERT_PEM));
	assert_string_equal(c->cert_pem, CERT_PEM);
	assert_null(c->cert_file);
	assert_int_equal(c->key_pem_len, strlen(KEY_PEM));
	assert_string_equal(c->key_pem, KEY_PEM);
	assert_null(c->key_file);
	assert_string_equal(c->tls_server_name, "kubernetes.default.svc");
	assert_int_equal(c->insecure_skip_tls_verify, 0);
	assert_null(c->token);
	assert_null(c->token_file);
	assert_int_equal(k8s_config_token(c, &tok, &e), 0);
	assert_null(tok);
	k8s_config_free(c);
	free(p);
}

static void
test_full_named_context(void **state)
{
	struct k8s_config *c = NULL;
	struct k8s_error e;
	char *p = fixture("full.yaml"), *tok = NULL;

	(void)state;
	assert_int_equal(k8s_config_load_kubeconfig(p, "dev", &c, &e), 0);
	assert_string_equal(c->server, "https://127.0.0.1:16443");
	assert_string_equal(c->namespace, "default");
	assert_int_equal(c->insecure_skip_tls_verify, 1);
	assert_null(c->ca_pem);
	assert_null(c->ca_file);
	assert_null(c->cert_pem);
	assert_null(c->key_pem);
	assert_null(c->tls_server_name);
	assert_string_equal(c->token, "dev-token-123");
	assert_null(c->token_file);
	assert_int_equal(k8s_config_token(c, &tok, &e), 0);
	assert_string_equal(tok, "dev-token-123");
	assert_ptr_not_equal(tok, c->token);	/* a copy */
	free(tok);
	k8s_config_free(c);
	free(p);
}

static void
test_file_paths(void **state)
{
	struct k8s_config *c = NULL;
	struct k8s_error e;
	char *dir = fixture_dir(), *p = fixture("files.yaml"), *want;
	char *cwd = getcwd(NULL, 0), *here;

	(void)state;
	assert_int_equal(k8s_config_load_kubeconfig(p, NULL, &c, &e), 0);
	assert_string_equal(c->server, "https://10.1.2.3:8443");
	assert_string_equal(c->namespace, "ns1");
	want = xasprintf("%s/certs/ca.crt", dir);
	assert_string_equal(c->ca_file, want);
	free(want);
	want = xasprintf("%s/certs/client.crt", dir);
	assert_string_equal(c->cert_file, want);
	free(want);
	assert_string_equal(c->key_file, "/etc/airlock/client.key");
	want = xasprintf("%s/tokens/token", dir);
	assert_string_equal(c->token_file, want);
	free(want);
	assert_null(c->ca_pem);
	assert_null(c->cert_pem);
	assert_null(c->key_pem);
	assert_null(c->token);
	k8s_config_free(c);

	/* A relative kubeconfig path still yields absolute file paths. */
	assert_int_equal(chdir(dir), 0);
	here = getcwd(NULL, 0);
	assert_int_equal(k8s_config_load_kubeconfig("./files.yaml", NULL, &c,
	    &e), 0);
	assert_int_equal(chdir(cwd), 0);
	want = xasprintf("%s/certs/ca.crt", here);
	assert_string_equal(c->ca_file, want);
	free(want);
	k8s_config_free(c);
	free(here);
	free(cwd);
	free(dir);
	free(p);
}

static void
test_missing_current_context(void **state)
{
	struct k8s_config *c = NULL;
	struct k8s_error e;
	char *p = fixture("no-current.yaml"), *tok = (char *)"x";

	(void)state;
	expect_fail("no-current.yaml", NULL, K8S_EINVAL,
	    "current-context is not set");
	assert_int_equal(k8s_config_load_kubeconfig(p, "only", &c, &e), 0);
	assert_string_equal(c->server, "http://localhost:8080");
	assert_string_equal(c->namespace, "default");
	assert_int_equal(k8s_config_token(c, &tok, &e), 0);
	assert_null(tok);
	k8s_config_free(c);
	free(p);
}

static void
test_aliases(void **state)
{
	struct k8s_config *c = NULL;
	struct k8s_error e;
	char *p = fixture("alias.yaml");

	(void)state;
	assert_int_equal(k8s_config_load_kubeconfig(p, NULL, &c, &e), 0);
	assert_string_equal(c->server, "https://shared.example.com:443");
	assert_string_equal(c->token, "shared-token");
	k8s_config_free(c);
	free(p);
}

static void
test_malformed(void **state)
{
	static const struct {
		const char *file, *context, *sub;
	} cases[] = {
		{ "bad-syntax.yaml", NULL, "invalid YAML at line 6 column 4" },
		{ "bad-clusters-string.yaml", NULL, "clusters is not a sequence" },
		{ "bad-no-server.yaml", NULL,
		    "cluster 'c' has no server (clusters[0].cluster.server)" },
		{ "full.yaml", "nope", "context 'nope' not found" },
		{ "bad-unknown-cluster.yaml", NULL, "cluster 'missing' not "
		    "found (referenced by contexts[0].context.cluster)" },
		{ "bad-unknown-user.yaml", NULL, "user 'ghost' not found "
		    "(referenced by contexts[0].context.user)" },
		{ "bad-exec-user.yaml", NULL,
		    "users[0].user.exec is not supported" },
		{ "bad-auth-provider.yaml", NULL,
		    "users[0].user.auth-provider is not supported" },
		{ "bad-basic-auth.yaml", NULL,
		    "users[1].user.username is not supported" },
		{ "bad-base64.yaml", NULL, "clusters[0].cluster."
		    "certificate-authority-data is not valid base64" },
		{ "bad-both-data-file.yaml", NULL, "users[0].user: both "
		    "client-key and client-key-data are set" },
		{ "bad-empty.yaml", NULL, "file holds no YAML document" },
		{ "bad-garbage.bin", NULL, "invalid YAML at byte 0: control "
		    "characters are not allowed" },
		{ "bad-utf8.yaml", NULL, "invalid YAML at byte 18: invalid "
		    "leading UTF-8 octet" },
		{ "bad-missing-name.yaml", NULL, "contexts[1].name is missing" },
		{ "bad-server-type.yaml", NULL,
		    "clusters[0].cluster.server is not a string" },
		{ "bad-duplicate-key.yaml", NULL,
		    "clusters[0].cluster.server is given twice" },
		{ "bad-two-documents.yaml", NULL,
		    "file holds more than one YAML document" },
		{ "bad-alias-cycle.yaml", NULL, "clusters[0] is not a mapping" },
		{ "bad-cert-without-key.yaml", NULL, "users[0].user: "
		    "client-certificate is set without client-key" },
		{ "bad-insecure-with-ca.yaml", NULL, "clusters[0].cluster: "
		    "insecure-skip-tls-verify is set together with a "
		    "certificate authority" },
		{ "bad-token-and-file.yaml", NULL,
		    "users[0].user: both token and tokenFile are set" },
		{ "bad-top-level.yaml", NULL, "top level is not a mapping" },
		{ "bad-bool.yaml", NULL, "clusters[0].cluster."
		    "insecure-skip-tls-verify is not a boolean" },
		{ "bad-scheme.yaml", NULL, "clusters[0].cluster.server "
		    "'ftp://x:6443' is not an http(s) URL" },
		{ "bad-context-no-cluster.yaml", NULL,
		    "context 'a' has no cluster (contexts[0].context.cluster)" },
		{ "bad-proxy-url.yaml", NULL,
		    "clusters[0].cluster.proxy-url is not supported" },
		{ "bad-contexts-item.yaml", NULL,
		    "contexts[0] is not a mapping" },
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		expect_fail(cases[i].file, cases[i].context, K8S_EINVAL,
		    cases[i].sub);
}

static void
test_unreadable(void **state)
{
	struct k8s_config *c = NULL;
	struct k8s_error e;
	char *dir = fixture_dir(), *want;

	(void)state;
	expect_fail("does-not-exist.yaml", NULL, K8S_EINVAL,
	    "does-not-exist.yaml': No such file or directory");
	assert_int_equal(k8s_config_load_kubeconfig(dir, NULL, &c, &e),
	    K8S_EINVAL);
	want = xasprintf("cannot read kubeconfig '%s': Is a directory", dir);
	assert_string_equal(e.message, want);
	free(want);
	assert_int_equal(k8s_config_load_kubeconfig(NULL, NULL, &c, &e),
	    K8S_EINVAL);
	assert_null(c);
	free(dir);
}

/* Every prefix of a valid kubeconfig loads or fails cleanly, never crashes. */
static void
test_truncated(void **state)
{
	static const char *const names[] = { "cut.yaml", NULL };
	struct k8s_config *c;
	struct k8s_error e;
	char *src = fixture("full.yaml"), *dir = make_tmpdir();
	char *p = xasprintf("%s/cut.yaml", dir), *data, prefix[300];
	size_t n, len, ok = 0;
	FILE *f = fopen(src, "r");
	int rc;

	(void)state;
	assert_non_null(f);
	data = xmalloc(1 << 16);
	len = fread(data, 1, 1 << 16, f);
	fclose(f);
	assert_true(len > 1000 && len < (1 << 16));
	snprintf(prefix, sizeof(prefix), "kubeconfig '%s': ", p);
	for (n = 0; n <= len; n++) {
		write_file(p, data, n);
		c = NULL;
		k8s_error_clear(&e);
		rc = k8s_config_load_kubeconfig(p, "prod", &c, &e);
		if (rc == 0) {
			assert_string_equal(c->server,
			    "https://prod.example.com:6443");
			k8s_config_free(c);
			ok++;
			continue;
		}
		assert_int_equal(rc, K8S_EINVAL);
		assert_null(c);
		assert_int_equal(strncmp(e.message, prefix, strlen(prefix)), 0);
	}
	/* Only cuts inside the last context's trailing lines can load. */
	assert_true(ok >= 1 && ok < 200);
	free(data);
	remove_tree(dir, names);
	free(p);
	free(dir);
	free(src);
}

/* A kubeconfig of exactly n bytes: a valid config padded with comments. */
static void
write_padded(const char *path, size_t n)
{
	static const char head[] = "current-context: a\n"
	    "clusters: [{name: c, cluster: {server: 'https://big:1'}}]\n"
	    "contexts: [{name: a, context: {cluster: c}}]\n";
	char *data = xmalloc(n);
	size_t off;

	memcpy(data, head, sizeof(head) - 1);
	for (off = sizeof(head) - 1; off < n; off += 64) {
		size_t line = n - off < 64 ? n - off : 64;

		memset(data + off, 'x', line);
		data[off] = '#';
		data[off + line - 1] = '\n';
	}
	write_file(path, data, n);
	free(data);
}

static void
test_size_cap(void **state)
{
	static const char *const names[] = { "big.yaml", NULL };
	struct k8s_config *c = NULL;
	struct k8s_error e;
	char *dir = make_tmpdir(), *p = xasprintf("%s/big.yaml", dir), *want;

	(void)state;
	write_padded(p, K8S_CONFIG_MAX_KUBECONFIG);
	assert_int_equal(k8s_config_load_kubeconfig(p, NULL, &c, &e), 0);
	assert_string_equal(c->server, "https://big:1");
	k8s_config_free(c);
	c = NULL;
	write_padded(p, K8S_CONFIG_MAX_KUBECONFIG + 1);
	assert_int_equal(k8s_config_load_kubeconfig(p, NULL, &c, &e),
	    K8S_ETOOBIG);
	assert_int_equal(e.code, K8S_ETOOBIG);
	want = xasprintf("kubeconfig '%s' is larger than 4194304 bytes", p);
	assert_string_equal(e.message, want);
	assert_null(c);
	free(want);
	remove_tree(dir, names);
	free(p);
	free(dir);
}

/*
 * 5000 clusters, each an alias of one 5000-key mapping: a 75 KB file whose
 * walk (looking for cluster 'z') is 50 million steps. It must fail on the
 * budget, quickly.
 */
static void
test_alias_budget(void **state)
{
	static const char *const names[] = { "alias.yaml", NULL };
	struct k8s_config *c = NULL;
	struct k8s_error e;
	char *dir = make_tmpdir(), *p = xasprintf("%s/alias.yaml", dir);
	FILE *f = fopen(p, "w");
	int i;

	(void)state;
	assert_non_null(f);
	fprintf(f, "current-context: a\nbig: &m\n  name: m\n");
	for (i = 0; i < 5000; i++)
		fprintf(f, "  k%d: v\n", i);
	fprintf(f, "clusters:\n");
	for (i = 0; i < 5000; i++)
		fprintf(f, "- *m\n");
	fprintf(f, "contexts: [{name: a, context: {cluster: z}}]\n");
	assert_int_equal(fclose(f), 0);
	assert_int_equal(k8s_config_load_kubeconfig(p, NULL, &c, &e),
	    K8S_EINVAL);
	assert_non_null(strstr(e.message, "too many nodes to walk"));
	assert_null(c);
	remove_tree(dir, names);
	free(p);
	free(dir);
}

/* Saved environment, restored after each test that changes it. */
static const char *const env_names[] = { "KUBERNETES_SERVICE_HOST",
    "KUBERNETES_SERVICE_PORT", "KUBECONFIG", "HOME" };
static char *env_saved[4];

static int
env_save(void **state)
{
	size_t i;
	const char *v;

	(void)state;
	for (i = 0; i < 4; i++) {
		v = getenv(env_names[i]);
		env_saved[i] = v != NULL ? xstrdup(v) : NULL;
		unsetenv(env_names[i]);
	}
	return 0;
}

static int
env_restore(void **state)
{
	size_t i;

	(void)state;
	for (i = 0; i < 4; i++) {
		if (env_saved[i] != NULL)
			setenv(env_names[i], env_saved[i], 1);
		else
			unsetenv(env_names[i]);
		free(env_saved[i]);
		env_saved[i] = NULL;
	}
	return 0;
}

static char *
make_sa_dir(void)
{
	char *d = make_tmpdir(), *p;

	p = xasprintf("%s/token", d);
	write_file(p, "sa-token\n", 9);
	free(p);
	p = xasprintf("%s/ca.crt", d);
	write_file(p, CA_PEM, strlen(CA_PEM));
	free(p);
	p = xasprintf("%s/namespace", d);
	write_file(p, "airlock-system\n", 15);
	free(p);
	return d;
}

static const char *const sa_files[] = { "token", "ca.crt", "namespace", NULL };

static void
expect_incluster_fail(const char *dir, const char *sub)
{
	struct k8s_config *c = NULL;
	struct k8s_error e;

	k8s_error_clear(&e);
	assert_int_equal(k8s_config_load_incluster(dir, &c, &e), K8S_EINVAL);
	if (strstr(e.message, sub) == NULL) {
		print_error("message '%s' lacks '%s'\n", e.message, sub);
		fail();
	}
	assert_null(c);
}

static void
test_incluster(void **state)
{
	struct k8s_config *c = NULL;
	struct k8s_error e;
	char *dir = make_sa_dir(), *want, *tok = NULL, *p;

	(void)state;
	expect_incluster_fail(dir, "not running in a cluster: "
	    "KUBERNETES_SERVICE_HOST is not set");
	setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1", 1);
	expect_incluster_fail(dir, "KUBERNETES_SERVICE_PORT is not set");
	setenv("KUBERNETES_SERVICE_PORT", "https", 1);
	expect_incluster_fail(dir,
	    "KUBERNETES_SERVICE_PORT 'https' is not a port number");
	setenv("KUBERNETES_SERVICE_PORT", "443", 1);

	assert_int_equal(k8s_config_load_incluster(dir, &c, &e), 0);
	assert_string_equal(c->server, "https://10.0.0.1:443");
	assert_string_equal(c->namespace, "airlock-system");
	want = xasprintf("%s/token", dir);
	assert_string_equal(c->token_file, want);
	free(want);
	want = xasprintf("%s/ca.crt", dir);
	assert_string_equal(c->ca_file, want);
	free(want);
	assert_null(c->ca_pem);
	assert_null(c->token);
	assert_int_equal(c->insecure_skip_tls_verify, 0);
	assert_int_equal(k8s_config_token(c, &tok, &e), 0);
	assert_string_equal(tok, "sa-token");
	free(tok);
	k8s_config_free(c);

	setenv("KUBERNETES_SERVICE_HOST", "fd00::1", 1);
	setenv("KUBERNETES_SERVICE_PORT", "6443", 1);
	assert_int_equal(k8s_config_load_incluster(dir, &c, &e), 0);
	assert_string_equal(c->server, "https://[fd00::1]:6443");
	k8s_config_free(c);

	/* No namespace file: "default". Missing token or CA: named. */
	p = xasprintf("%s/namespace", dir);
	assert_int_equal(unlink(p), 0);
	free(p);
	assert_int_equal(k8s_config_load_incluster(dir, &c, &e), 0);
	assert_string_equal(c->namespace, "default");
	k8s_config_free(c);
	p = xasprintf("%s/ca.crt", dir);
	assert_int_equal(unlink(p), 0);
	want = xasprintf("cannot read service account ca.crt '%s': No such "
	    "file or directory", p);
	expect_incluster_fail(dir, want);
	free(want);
	free(p);
	p = xasprintf("%s/token", dir);
	assert_int_equal(unlink(p), 0);
	want = xasprintf("cannot read service account token '%s'", p);
	expect_incluster_fail(dir, want);
	free(want);
	free(p);
	remove_tree(dir, sa_files);
	free(dir);
}

static void
test_load_default(void **state)
{
	struct k8s_config *c = NULL;
	struct k8s_error e;
	char *full = fixture("full.yaml"), *files = fixture("files.yaml");
	char *home = make_tmpdir(), *p, *kc, *sa = K8S_CONFIG_DEFAULT_SA_DIR;

	(void)state;
	/* An explicit path wins over KUBECONFIG. */
	kc = xasprintf("::%s:%s", files, full);
	setenv("KUBECONFIG", kc, 1);
	assert_int_equal(k8s_config_load_default(full, "dev", &c, &e), 0);
	assert_string_equal(c->server, "https://127.0.0.1:16443");
	k8s_config_free(c);
	/* KUBECONFIG: its first non-empty entry. */
	assert_int_equal(k8s_config_load_default(NULL, NULL, &c, &e), 0);
	assert_string_equal(c->server, "https://10.1.2.3:8443");
	k8s_config_free(c);
	free(kc);
	unsetenv("KUBECONFIG");

	/* In a cluster: the default service-account directory. */
	setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1", 1);
	setenv("KUBERNETES_SERVICE_PORT", "443", 1);
	assert_int_equal(k8s_config_load_default(NULL, "x", &c, &e),
	    K8S_EINVAL);
	assert_non_null(strstr(e.message, "context 'x' needs a kubeconfig"));
	if (access(sa, F_OK) != 0) {
		assert_int_equal(k8s_config_load_default(NULL, NULL, &c, &e),
		    K8S_EINVAL);
		assert_non_null(strstr(e.message, "cannot read service "
		    "account token '" K8S_CONFIG_DEFAULT_SA_DIR "/token'"));
	}
	unsetenv("KUBERNETES_SERVICE_HOST");
	unsetenv("KUBERNETES_SERVICE_PORT");

	/* Otherwise ~/.kube/config. */
	setenv("HOME", home, 1);
	assert_int_equal(k8s_config_load_default(NULL, NULL, &c, &e),
	    K8S_EINVAL);
	p = xasprintf("cannot read kubeconfig '%s/.kube/config': No such file "
	    "or directory", home);
	assert_string_equal(e.message, p);
	free(p);
	p = xasprintf("%s/.kube", home);
	assert_int_equal(mkdir(p, 0700), 0);
	free(p);
	p = xasprintf("%s/.kube/config", home);
	assert_int_equal(symlink(full, p), 0);
	free(p);
	assert_int_equal(k8s_config_load_default(NULL, NULL, &c, &e), 0);
	assert_string_equal(c->server, "https://prod.example.com:6443");
	k8s_config_free(c);
	unsetenv("HOME");
	assert_int_equal(k8s_config_load_default(NULL, NULL, &c, &e),
	    K8S_EINVAL);
	assert_non_null(strstr(e.message, "HOME is not set"));

	p = xasprintf("%s/.kube/config", home);
	unlink(p);
	free(p);
	p = xasprintf("%s/.kube", home);
	assert_int_equal(rmdir(p), 0);
	free(p);
	assert_int_equal(rmdir(home), 0);
	free(home);
	free(full);
	free(files);
}

static void
expect_token(struct k8s_config *c, const char *want)
{
	struct k8s_error e;
	char *tok = NULL;

	assert_int_equal(k8s_config_token(c, &tok, &e), 0);
	assert_string_equal(tok, want);
	free(tok);
}

/* Set path's mtime to ts exactly. */
static void
set_mtime(const char *path, struct timespec ts)
{
	struct timespec t[2] = { ts, ts };

	assert_int_equal(utimensat(AT_FDCWD, path, t, 0), 0);
}

static void
test_token_rotation(void **state)
{
	static const char *const names[] = { "token", "token.new", NULL };
	struct k8s_config *c = NULL;
	struct k8s_error e;
	struct timespec t1 = { 1700000000, 0 }, t2 = { 1700000100, 5 };
	char *dir = make_tmpdir(), *p = xasprintf("%s/token", dir);
	char *np = xasprintf("%s/token.new", dir);
	char *kc = xasprintf("%s/kubeconfig", dir), *yaml;

	(void)state;
	yaml = xasprintf("current-context: a\n"
	    "clusters: [{name: c, cluster: {server: 'https://x:1'}}]\n"
	    "users: [{name: u, user: {tokenFile: token}}]\n"
	    "contexts: [{name: a, context: {cluster: c, user: u}}]\n");
	write_file(kc, yaml, strlen(yaml));
	free(yaml);
	assert_int_equal(k8s_config_load_kubeconfig(kc, NULL, &c, &e), 0);
	unlink(kc);
	free(kc);
	assert_string_equal(c->token_file, p);

	write_file(p, "token-A\n\n", 9);
	set_mtime(p, t1);
	expect_token(c, "token-A");
	expect_token(c, "token-A");
	/* Rewritten in place: new size and mtime. */
	write_file(p, "token-BB \t\n", 11);
	set_mtime(p, t2);
	expect_token(c, "token-BB");
	/* Same inode, size and mtime: the cache answers, the file is not read. */
	write_file(p, "token-CC \t\n", 11);
	set_mtime(p, t2);
	expect_token(c, "token-BB");
	/* Only the mtime differs. */
	set_mtime(p, t1);
	expect_token(c, "token-CC");
	/* Atomic swap, as the kubelet does: only the inode differs. */
	write_file(np, "token-DD \t\n", 11);
	set_mtime(np, t1);
	assert_int_equal(rename(np, p), 0);
	expect_token(c, "token-DD");
	k8s_config_free(c);
	remove_tree(dir, names);
	free(np);
	free(p);
	free(dir);
}

static void
test_token_errors(void **state)
{
	static const char *const names[] = { "token", NULL };
	struct k8s_config *c = NULL;
	struct k8s_error e;
	char *dir = make_sa_dir(), *p = xasprintf("%s/token", dir);
	char *big, *tok = NULL, *want;

	(void)state;
	setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1", 1);
	setenv("KUBERNETES_SERVICE_PORT", "443", 1);
	assert_int_equal(k8s_config_load_incluster(dir, &c, &e), 0);
	remove_tree(dir, sa_files);
	assert_int_equal(mkdir(dir, 0700), 0);

	assert_int_equal(k8s_config_token(c, &tok, &e), K8S_EIO);
	want = xasprintf("cannot read token file '%s': No such file or "
	    "directory", p);
	assert_string_equal(e.message, want);
	free(want);
	write_file(p, " \n\t\n", 4);
	assert_int_equal(k8s_config_token(c, &tok, &e), K8S_EIO);
	want = xasprintf("token file '%s' is empty", p);
	assert_string_equal(e.message, want);
	free(want);
	write_file(p, "a\rb\n", 4);
	assert_int_equal(k8s_config_token(c, &tok, &e), K8S_EINVAL);
	assert_non_null(strstr(e.message, "contains a control character"));

	/* Exactly at the cap is fine; one byte more is not. */
	big = xmalloc(K8S_CONFIG_MAX_TOKEN + 1);
	memset(big, 't', K8S_CONFIG_MAX_TOKEN + 1);
	write_file(p, big, K8S_CONFIG_MAX_TOKEN);
	assert_int_equal(k8s_config_token(c, &tok, &e), 0);
	assert_int_equal(strlen(tok), K8S_CONFIG_MAX_TOKEN);
	free(tok);
	tok = NULL;
	write_file(p, big, K8S_CONFIG_MAX_TOKEN + 1);
	assert_int_equal(k8s_config_token(c, &tok, &e), K8S_ETOOBIG);
	want = xasprintf("token file '%s' is larger than 65536 bytes", p);
	assert_string_equal(e.message, want);
	free(want);
	assert_null(tok);
	free(big);
	k8s_config_free(c);
	remove_tree(dir, names);
	free(p);
	free(dir);
}

struct token_thread {
	struct k8s_config	*c;
	int			 bad;
};

static void *
token_reader(void *arg)
{
	struct token_thread *t = arg;
	struct k8s_error e;
	char *tok;
	int i;

	for (i = 0; i < 2000; i++) {
		tok = NULL;
		if (k8s_config_token(t->c, &tok, &e) != 0 || tok == NULL ||
		    (strcmp(tok, "token-one") != 0 &&
		    strcmp(tok, "token-two-x") != 0))
			t->bad++;
		free(tok);
	}
	return NULL;
}

/* Readers in several threads while the file is swapped underneath. */
static void
test_token_threads(void **state)
{
	struct token_thread t[4];
	pthread_t th[4];
	struct k8s_config *c = NULL;
	struct k8s_error e;
	char *dir = make_sa_dir(), *p = xasprintf("%s/token", dir);
	char *np = xasprintf("%s/token.new", dir);
	int i;

	(void)state;
	setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1", 1);
	setenv("KUBERNETES_SERVICE_PORT", "443", 1);
	write_file(p, "token-one\n", 10);
	assert_int_equal(k8s_config_load_incluster(dir, &c, &e), 0);
	for (i = 0; i < 4; i++) {
		t[i].c = c;
		t[i].bad = 0;
		assert_int_equal(pthread_create(&th[i], NULL, token_reader,
		    &t[i]), 0);
	}
	for (i = 0; i < 200; i++) {
		write_file(np, i % 2 ? "token-one\n" : "token-two-x\n",
		    i % 2 ? 10 : 12);
		assert_int_equal(rename(np, p), 0);
	}
	for (i = 0; i < 4; i++) {
		assert_int_equal(pthread_join(th[i], NULL), 0);
		assert_int_equal(t[i].bad, 0);
	}
	expect_token(c, "token-one");
	k8s_config_free(c);
	remove_tree(dir, sa_files);
	free(np);
	free(p);
	free(dir);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_base64_decode),
		cmocka_unit_test(test_full_current_context),
		cmocka_unit_test(test_full_named_context),
		cmocka_unit_test(test_file_paths),
		cmocka_unit_test(test_missing_current_context),
		cmocka_unit_test(test_aliases),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_unreadable),
		cmocka_unit_test(test_truncated),
		cmocka_unit_test(test_size_cap),
		cmocka_unit_test(test_alias_budget),
		cmocka_unit_test_setup_teardown(test_incluster, env_save,
		    env_restore),
		cmocka_unit_test_setup_teardown(test_load_default, env_save,
		    env_restore),
		cmocka_unit_test(test_token_rotation),
		cmocka_unit_test_setup_teardown(test_token_errors, env_save,
		    env_restore),
		cmocka_unit_test_setup_teardown(test_token_threads, env_save,
		    env_restore),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
