/*
 * config.h - how to reach the API server: a kubeconfig or in-cluster.
 *
 * A struct k8s_config is built by one of the loaders below and freed with
 * k8s_config_free(). After loading, the public fields are read-only (the
 * HTTP client reads them from any thread); only k8s_config_token() touches
 * the private token cache, under its own lock.
 *
 * Invariants of a loaded config:
 *   - server is "scheme://host[:port][/path]" with no trailing slash; the
 *     scheme is http or https ("https://" is assumed when none was given).
 *   - namespace is never NULL ("default" when nothing set it).
 *   - Of each TLS pair at most one is set: *_pem (decoded bytes, with a NUL
 *     after the last one so PEM text is a C string) or *_file (an absolute
 *     path; relative kubeconfig paths are resolved against the kubeconfig's
 *     directory). cert and key are both set or both unset.
 *   - insecure_skip_tls_verify is never set together with a CA.
 *   - At most one of token and token_file is set.
 * Files named by *_file and token_file are not read at load time.
 */
#ifndef AIRLOCK_CONFIG_H
#define AIRLOCK_CONFIG_H

#include <pthread.h>
#include <stddef.h>
#include <sys/types.h>
#include <time.h>

#include "k8s_error.h"

/* Caps: a kubeconfig, a token file, and the service-account namespace file. */
#define K8S_CONFIG_MAX_KUBECONFIG	(4 * 1024 * 1024)
#define K8S_CONFIG_MAX_TOKEN		(64 * 1024)
#define K8S_CONFIG_DEFAULT_SA_DIR \
	"/var/run/secrets/kubernetes.io/serviceaccount"

struct k8s_config {
	char	*server;		/* "https://host:port", no trailing slash */
	char	*namespace;		/* default namespace; "default" when unset */
	/* TLS material: PEM bytes (decoded from *-data) or a file path. */
	char	*ca_pem;	size_t ca_pem_len;	char *ca_file;
	char	*cert_pem;	size_t cert_pem_len;	char *cert_file;
	char	*key_pem;	size_t key_pem_len;	char *key_file;
	int	 insecure_skip_tls_verify;
	char	*tls_server_name;	/* optional SNI/verify name override */
	char	*token;			/* static bearer token, or NULL */
	char	*token_file;		/* bearer token re-read when the file changes, or NULL */

	/*
	 * Private: the token_file cache, guarded by tok_mu. tok_value is
	 * what the file held when it had identity (tok_dev, tok_ino,
	 * tok_size, tok_mtime); it is reused while stat() reports the same
	 * identity and the read is younger than a minute (CLOCK_MONOTONIC
	 * tok_read_at), so even a same-size rewrite within one timestamp
	 * tick is picked up eventually.
	 */
	pthread_mutex_t	 tok_mu;
	char		*tok_value;	/* NULL when nothing is cached */
	dev_t		 tok_dev;
	ino_t		 tok_ino;
	off_t		 tok_size;
	struct timespec	 tok_mtime;
	struct timespec	 tok_read_at;
};

/*
 * Load the kubeconfig at path, for context (NULL = its current-context).
 * Supported: clusters[].cluster.{server, certificate-authority(-data),
 * insecure-skip-tls-verify, tls-server-name}; users[].user.{client-certificate
 * (-data), client-key(-data), token, tokenFile}; contexts[].context.{cluster,
 * user, namespace}. Other keys are ignored, except those whose silent loss
 * would change who we talk to or as whom; those are refused: exec,
 * auth-provider, username, password, as, as-uid, as-groups, as-user-extra,
 * proxy-url. Only the selected context, cluster and user must be usable;
 * every list entry must still be a mapping with a name.
 *
 * On success *out is a new config the caller frees with k8s_config_free().
 * Errors (*out untouched, err filled with a message that names the file and
 * the field path, e.g. "kubeconfig '/x': users[0].user.exec is not
 * supported"):
 *   K8S_ETOOBIG  the file is larger than K8S_CONFIG_MAX_KUBECONFIG
 *   K8S_EINVAL   anything else: unreadable file, malformed YAML (with
 *                libyaml's line and column), empty file or several
 *                documents, wrong node types, duplicate keys, missing names,
 *                unknown context/cluster/user, no server, unsupported
 *                fields, bad base64, both -data and file for one item,
 *                cert without key, insecure-skip-tls-verify with a CA,
 *                both token and tokenFile, or a document so alias-heavy
 *                that walking it would take unbounded time
 */
int k8s_config_load_kubeconfig(const char *path, const char *context,
    struct k8s_config **out, struct k8s_error *err)
    __attribute__((warn_unused_result));

/*
 * In-cluster config: server from KUBERNETES_SERVICE_HOST and
 * KUBERNETES_SERVICE_PORT (an IPv6 host is bracketed), token_file =
 * sa_dir/token, ca_file = sa_dir/ca.crt, namespace from sa_dir/namespace
 * (trimmed; "default" when that file is absent). sa_dir NULL means
 * K8S_CONFIG_DEFAULT_SA_DIR.
 * On success *out is a new config the caller frees with k8s_config_free().
 * K8S_EINVAL, naming what is wrong, when either variable is unset or
 * malformed, token or ca.crt is not readable, or namespace exists but
 * cannot be read. The token itself is read by k8s_config_token().
 */
int k8s_config_load_incluster(const char *sa_dir, struct k8s_config **out,
    struct k8s_error *err) __attribute__((warn_unused_result));

/*
 * What a daemon's --kubeconfig flag does: the kubeconfig at path if
 * non-NULL; else the first non-empty entry of $KUBECONFIG (a ':'-separated
 * list); else in-cluster (default sa_dir) when KUBERNETES_SERVICE_HOST is
 * set, where a non-NULL context is refused; else $HOME/.kube/config.
 * Ownership and errors as for the loader chosen; K8S_EINVAL when HOME is
 * needed but unset.
 */
int k8s_config_load_default(const char *path, const char *context,
    struct k8s_config **out, struct k8s_error *err)
    __attribute__((warn_unused_result));

/*
 * The bearer token to send now: a copy of the static token, or of
 * token_file's contents with trailing whitespace trimmed, or NULL when the
 * config has neither. The file is stat()ed on every call and re-read when
 * its inode, size or mtime changed (service-account tokens rotate) or the
 * cached copy is over a minute old. Thread-safe; c must not be NULL. The
 * caller frees *out with free().
 * Errors (*out untouched):
 *   K8S_EIO      the token file is missing, unreadable or empty
 *   K8S_ETOOBIG  the token file is larger than K8S_CONFIG_MAX_TOKEN
 *   K8S_EINVAL   the token holds a control character (it goes in a header)
 */
int k8s_config_token(struct k8s_config *c, char **out, struct k8s_error *err)
    __attribute__((warn_unused_result));

/* Free c and everything it owns; NULL is fine. */
void k8s_config_free(struct k8s_config *c);

#endif
