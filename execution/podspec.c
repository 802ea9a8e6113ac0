#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/evp.h>

#include "buf.h"
#include "client.h"
#include "codetar.h"
#include "egress.h"
#include "egress_token.h"
#include "artifacts.h"
#include "podspec.h"
#include "jsonsize.h"
#include "quantity.h"
#include "sha256.h"
#include "xmalloc.h"

#define CODE_DIR	"/airlock/code"
#define WORK_DIR	"/airlock/work"
#define STDIN_FILE	".stdin"
/* The direct path's working directory: gVisor's own tmpfs (see below). */
#define TMP_DIR		"/tmp"
#define RUNNER		"/airlock/bin/run"
#define UNPACKER	"/airlock/bin/warm"
/* Past the run's own deadline, the kubelet's backstop. */
#define DEADLINE_SLACK	30

const char *
podspec_pod_execution(json_t *pod, const char **uid)
{
	json_t *md = json_object_get(pod, "metadata");

	if (uid)
		*uid = json_string_value(json_object_get(json_object_get(md,
		    "labels"), CX_LABEL_UID));
	return json_string_value(json_object_get(json_object_get(md,
	    "annotations"), CX_ANN_NAME));
}

int
podspec_controlled_by(json_t *obj, const char *kind, const char *uid)
{
	json_t *ref, *owner = NULL;
	const char *ouid, *k, *api;
	size_t i;

	json_array_foreach(json_object_get(json_object_get(obj, "metadata"),
	    "ownerReferences"), i, ref)
		if (json_is_true(json_object_get(ref, "controller")))
			owner = ref;
	ouid = json_string_value(json_object_get(owner, "uid"));
	k = json_string_value(json_object_get(owner, "kind"));
	api = json_string_value(json_object_get(owner, "apiVersion"));
	return uid && ouid && strcmp(ouid, uid) == 0 && k && strcmp(k, kind) == 0 &&
	    api && strncmp(api, "airlock.dev/", 12) == 0;
}

char *
podspec_pod_name(const char *uid)
{
	return xasprintf("airlock-%s", uid);
}


void
podspec_result_free(struct podspec_result *r)
{
	json_decref(r->pod);
	json_decref(r->configmap);
	json_decref(r->netpol);
	egress_free(r->egress, r->negress);
	r->pod = r->configmap = r->netpol = NULL;
	r->egress = NULL;
	r->negress = 0;
}

void
podspec_code_sha256(json_t *cx, char out[65])
{
	const char *src = json_string_value(json_object_get(json_object_get(cx,
	    "spec"), "source"));

	sha256_hex(src ? src : "", src ? strlen(src) : 0, out);
}

static json_t *
labels(const char *uid)
{
	return json_pack("{s:s, s:s, s:s, s:s}",
	    "app.kubernetes.io/name", "airlock",
	    CX_LABEL_MANAGED, CX_MANAGER,
	    CX_LABEL_COMPONENT, CX_COMPONENT,
	    CX_LABEL_UID, uid);
}

/*
 * One resource: the spec's value or the config's default, checked against
 * the cap. out receives the text to write into the pod: exactly the text
 * that was checked (an integer, int-or-string, as whole units).
 */
static int
pick_resource(json_t *res, const char *key, const char *dflt, int64_t cap,
    const char *cap_text, int milli, char out[QUANTITY_MAX_LEN + 1],
    struct k8s_error *err)
{
	json_t *v = json_object_get(res, key);
	const char *s;
	int64_t n;
	int rc;

	if (v == NULL) {
		snprintf(out, QUANTITY_MAX_LEN + 1, "%s", dflt);
		return 0;
	}
	if (json_is_integer(v)) {
		snprintf(out, QUANTITY_MAX_LEN + 1, "%lld",
		    (long long)json_integer_value(v));
		s = out;
	} else if ((s = json_string_value(v)) == NULL) {
		return k8s_error_set(err, K8S_EINVAL, 0, NULL,
		    "spec.resources.%s: not a quantity", key);
	}
	/* The whole text: the parser refuses more than QUANTITY_MAX_LEN. */
	rc = milli ? quantity_parse_milli(s, &n, err) : quantity_parse(s, &n, err);
	if (rc != 0)
		return k8s_error_set(err, K8S_EINVAL, 0, NULL,
		    "spec.resources.%s: '%.80s' is not a quantity", key, s);
	if (n > cap)
		return k8s_error_set(err, K8S_EINVAL, 0, NULL,
		    "spec.resources.%s: %s is above this cluster's cap of %s",
		    key, s, cap_text);
	if (s != out)
		snprintf(out, QUANTITY_MAX_LEN + 1, "%s", s);
	return 0;
}

static json_t *
resources(const struct ctl_config *cfg, json_t *spec, struct k8s_error *err)
{
	json_t *res = json_object_get(spec, "resources"), *q;
	char cpu[QUANTITY_MAX_LEN + 1], mem[QUANTITY_MAX_LEN + 1];
	char eph[QUANTITY_MAX_LEN + 1];

	if (pick_resource(res, "cpu", cfg->defaults.cpu, cfg->caps.cpu_milli,
	    cfg->caps.cpu, 1, cpu, err) != 0 ||
	    pick_resource(res, "memory", cfg->defaults.memory,
	    cfg->caps.memory_bytes, cfg->caps.memory, 0, mem, err) != 0 ||
	    pick_resource(res, "ephemeralStorage",
	    cfg->defaults.ephemeral_storage, cfg->caps.ephemeral_bytes,
	    cfg->caps.ephemeral_storage, 0, eph, err) != 0)
		return NULL;
	q = json_pack("{s:s, s:s, s:s}", "cpu", cpu, "memory", mem,
	    "ephemeral-storage", eph);
	/* Requests equal limits: the execution gets what it is charged. */
	return json_pack("{s:O, s:o}", "requests", q, "limits", q);
}

/* Collect key -> path items for the code volume, and the payloads. */
struct code {
	json_t	*data;		/* key -> content */
	json_t	*items;		/* [{key, path}] */
	size_t	 bytes;
};

static void
code_add(struct code *c, const char *key, const char *path, json_t *content)
{
	json_object_set(c->data, key, content);
	json_array_append_new(c->items, json_pack("{s:s, s:s}", "key", key,
	    "path", path));
	c->bytes += json_string_length(content);
}

/* 1 if the two paths cannot both be made: equal, or one under the other. */
static int
path_clash(const char *a, const char *b)
{
	size_t al = strlen(a), bl = strlen(b);

	if (al > bl)
		return path_clash(b, a);
	return strncmp(a, b, al) == 0 && (b[al] == '\0' || b[al] == '/');
}

/*
 * What the CRD cannot see: a file at, or under, the profile's source file
 * or the stdin file (the kubelet would fail a volume pod's setup; warm.c
 * would refuse a direct pod's archive, and the program would never
 * start), or an env name that would be taken for the code's.
 */
/* The proxy's variables, which podspec_egress_gate sets: any case. */
static const char *const proxy_vars[] = { "HTTP_PROXY", "HTTPS_PROXY",
    "NO_PROXY", NULL };

static int
proxy_env(const char *n)
{
	for (size_t i = 0; proxy_vars[i] != NULL; i++)
		if (strcasecmp(n, proxy_vars[i]) == 0)
			return 1;
	return 0;
}

/*
 * Variables that change how bash or Python start, or what the dynamic
 * linker loads: under a code policy they would run the tenant's code
 * before the guard, or switch it off (BASH_ENV, POSIXLY_CORRECT).
 */
static int
policy_env(const char *n)
{
	static const char *const names[] = { "BASH_ENV", "ENV", "BASHOPTS",
	    "SHELLOPTS", "POSIXLY_CORRECT", "PS4", "CDPATH", "GLOBIGNORE",
	    "BASH_XTRACEFD" };

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(n, names[i]) == 0)
			return 1;
	return strncmp(n, "LD_", 3) == 0 || strncmp(n, "PYTHON", 6) == 0 ||
	    strncmp(n, "BASH_FUNC", 9) == 0;
}

int
podspec_check_reserved(json_t *spec, const struct ctl_profile *p,
    struct k8s_error *err)
{
	const char *source_file = p->source_file;
	int policy = p->policy != CTL_POLICY_NONE;

	/* .stdin is the runner's, stdin set or not (warm.c opens it). */
	const char *mine[2] = { source_file, STDIN_FILE };
	json_t *f;
	size_t i;

	json_array_foreach(json_object_get(spec, "env"), i, f) {
		const char *n = json_string_value(json_object_get(f, "name"));

		if (n && strncmp(n, PODSPEC_TAR_ENV, strlen(PODSPEC_TAR_ENV)) == 0)
			return k8s_error_set(err, K8S_EINVAL, 0, NULL,
			    "spec.env[%zu].name: '%.128s': names starting with "
			    PODSPEC_TAR_ENV " are Airlock's", i, n);
		if (n && (strcmp(n, ARTIFACTS_ENV) == 0 ||
		    strcmp(n, PODSPEC_GATE_ENV) == 0))
			return k8s_error_set(err, K8S_EINVAL, 0, NULL,
			    "spec.env[%zu].name: '%s' is Airlock's", i, n);
		if (n && p->negress > 0 && proxy_env(n))
			return k8s_error_set(err, K8S_EINVAL, 0, NULL,
			    "spec.env[%zu].name: '%.32s' is set by Airlock where "
			    "the runtime has network egress (the egress proxy)",
			    i, n);
		/*
		 * Egress: the runner's shell starts before the start gate
		 * (docs/network.md); what changes how it starts would run
		 * the tenant's code with the pod still open.
		 */
		if (n && p->negress > 0 && (policy_env(n) || strcmp(n,
		    "IFS") == 0))
			return k8s_error_set(err, K8S_EINVAL, 0, NULL,
			    "spec.env[%zu].name: '%.128s' is refused where the "
			    "runtime has network egress (it would change how the "
			    "runner starts, before its start gate)", i, n);
		if (n && policy && policy_env(n))
			return k8s_error_set(err, K8S_EINVAL, 0, NULL,
			    "spec.env[%zu].name: '%.128s' is refused where the "
			    "runtime has a code policy (it would change how the "
			    "guard's interpreter starts)", i, n);
	}

	json_array_foreach(json_object_get(spec, "files"), i, f) {
		const char *fp = json_string_value(json_object_get(f, "path"));

		for (int k = 0; k < 2 && fp; k++)
			if (mine[k] && path_clash(fp, mine[k]))
				return k8s_error_set(err, K8S_EINVAL, 0, NULL,
				    "spec.files[%zu].path: '%s' clashes with the "
				    "%s file '%s'", i, fp, k ? "stdin" :
				    "program's", mine[k]);
	}
	return 0;
}

static json_t *
env(json_t *spec, int direct)
{
	json_t *out = json_array(), *e;
	int home = 0;
	size_t i;

	json_array_foreach(json_object_get(spec, "env"), i, e) {
		json_t *v = json_object_get(e, "value");
		const char *n = json_string_value(json_object_get(e, "name"));

		home |= n && strcmp(n, "HOME") == 0;
		/* name/value only: never valueFrom, whatever was sent */
		json_array_append_new(out, json_pack("{s:O, s:o}", "name",
		    json_object_get(e, "name"), "value",
		    v ? json_incref(v) : json_string("")));
	}
	/* The image's home (/airlock/work) is not writable in a direct pod. */
	if (direct && !home)
		json_array_insert_new(out, 0, json_pack("{s:s, s:s}", "name",
		    "HOME", "value", TMP_DIR));
	json_array_append_new(out, json_pack("{s:s, s:s}", "name",
	    "AIRLOCK_CODE_DIR", "value", direct ? TMP_DIR : CODE_DIR));
	return out;
}

/*
 * A direct pod's code: the tar of the program, spec.files and .stdin
 * (execution/codetar.h), base64 in env vars PODSPEC_TAR_ENV0, 1, ...,
 * of at most PODSPEC_TAR_CHUNK bytes each (a Linux execve refuses a
 * string over 128 KiB; this stays under it for any runtime). Appended
 * to env. 0, or K8S_EINVAL when a path cannot be stored.
 */
static int
tar_env(json_t *env, json_t *data, json_t *items, size_t *chunks,
    struct k8s_error *err)
{
	struct codetar_entry e[PODSPEC_MAX_FILES + 2];
	size_t n = 0, i, bad = 0, off, b64len;
	int rc;
	struct buf tar;
	unsigned char *b64;
	json_t *it;

	json_array_foreach(items, i, it) {
		json_t *v = json_object_get(data, json_string_value(
		    json_object_get(it, "key")));

		if (n == sizeof(e) / sizeof(e[0]))
			return k8s_error_set(err, K8S_EINVAL, 0, NULL,
			    "spec.files: too many files");
		e[n++] = (struct codetar_entry){ json_string_value(
		    json_object_get(it, "path")), json_string_value(v),
		    json_string_length(v) };
	}
	buf_init(&tar, codetar_size(e, n));
	if ((rc = codetar_build(e, n, &tar, &bad)) != 0) {
		buf_free(&tar);
		return k8s_error_set(err, K8S_EINVAL, 0, NULL, rc == -1 ?
		    "spec.files: the path '%.80s' cannot be stored" :
		    "spec.files: the archive of '%.80s' does not fit", rc == -1 ?
		    e[bad].path : e[0].path);
	}
	b64 = xmalloc(4 * ((tar.len + 2) / 3) + 1);
	b64len = (size_t)EVP_EncodeBlock(b64, (unsigned char *)tar.data,
	    (int)tar.len);
	buf_free(&tar);
	for (off = 0, i = 0; off < b64len; off += PODSPEC_TAR_CHUNK, i++) {
		char name[32];
		size_t len = b64len - off < PODSPEC_TAR_CHUNK ? b64len - off :
		    PODSPEC_TAR_CHUNK;

		snprintf(name, sizeof(name), "%s%zu", PODSPEC_TAR_ENV, i);
		json_array_append_new(env, json_pack("{s:s, s:s%}", "name",
		    name, "value", (char *)b64 + off, len));
	}
	free(b64);
	*chunks = i;
	return 0;
}

void
podspec_gate_ports(const char *uid, int ports[PODSPEC_GATE_NPORTS])
{
	char h[65];
	unsigned a, b, m;

	sha256_hex(uid, strlen(uid), h);
	sscanf(h, "%4x%4x%4x", &a, &b, &m);
	a %= PODSPEC_GATE_OPEN_PORTS;
	b %= PODSPEC_GATE_OPEN_PORTS;
	m %= PODSPEC_GATE_OPEN_PORTS;
	if (b == a)
		b = (b + 1) % PODSPEC_GATE_OPEN_PORTS;
	/* At most two steps: the range has 128 ports. */
	while (m == a || m == b)
		m = (m + 1) % PODSPEC_GATE_OPEN_PORTS;
	ports[0] = PODSPEC_GATE_OPEN_BASE + (int)a;
	ports[1] = PODSPEC_GATE_OPEN_BASE + (int)b;
	ports[2] = PODSPEC_GATE_OPEN_BASE + (int)m;
}

/* A rule of r's policy to the gate pods of g on ports[0..n). */
static void
gate_rule(json_t *rules, const struct podspec_gate *g, const int *ports,
    size_t n)
{
	json_t *pl = json_array();

	for (size_t i = 0; i < n; i++)
		json_array_append_new(pl, json_pack("{s:s, s:i}", "protocol",
		    "TCP", "port", ports[i]));
	json_array_append_new(rules, json_pack("{s:[{s:{s:{s:s}}, s:{s:{s:s}}}],"
	    " s:o}", "to", "namespaceSelector", "matchLabels",
	    "kubernetes.io/metadata.name", g->ns, "podSelector", "matchLabels",
	    PODSPEC_GATE_LABEL, PODSPEC_GATE_COMPONENT, "ports", pl));
}

/* Append name=value to the container c's env. */
static void
set_env(json_t *c, const char *name, const char *value)
{
	if (!json_is_array(json_object_get(c, "env")))
		json_object_set_new(c, "env", json_array());
	json_array_append_new(json_object_get(c, "env"), json_pack(
	    "{s:s, s:s}", "name", name, "value", value));
}

/*
 * The proxy's env in c: the gate address of g that the uid picks (its
 * first hex digit: executions spread over the gate pods) with the pass
 * of the execution (metadata md) for r's host entries, and the CIDR
 * entries of r, which are reached directly, in NO_PROXY.
 */
static int
proxy_env_set(json_t *c, const struct podspec_result *r,
    const struct podspec_gate *g, json_t *md, struct k8s_error *err)
{
	const char *uid = json_string_value(json_object_get(json_object_get(md,
	    "labels"), CX_LABEL_UID));
	const char *ns = json_string_value(json_object_get(md, "namespace"));
	const char *name = json_string_value(json_object_get(json_object_get(md,
	    "annotations"), CX_ANN_NAME));
	json_int_t deadline = json_integer_value(json_object_get(json_object_get(
	    r->pod, "spec"), "activeDeadlineSeconds"));
	char pass[EGRESS_PASS_LEN + 1], no[CTL_EGRESS_MAX * 20 + 1] = "";
	char *user, *url;
	size_t n = 0;

	if (uid == NULL || uid[0] == '\0' || ns == NULL || name == NULL)
		return k8s_error_set(err, K8S_EINVAL, 0, NULL,
		    "no egress start gate to give the pod");
	if (egress_token_make(r->egress, r->negress, uid, ns, name, g->now +
	    deadline + PODSPEC_PASS_SLACK, g->key, g->keylen, &user, pass,
	    err) != 0)
		return K8S_EINVAL;
	url = xasprintf("http://%s:%s@%.15s:%d", user, pass,
	    g->addrs[(size_t)(uid[0] % 16) % g->n], PODSPEC_PROXY_PORT);
	free(user);
	for (size_t i = 0; i < r->negress; i++)
		if (r->egress[i].cidr != NULL)
			n += (size_t)snprintf(no + n, sizeof(no) - n, "%s%.18s",
			    n ? "," : "", r->egress[i].cidr);
	for (size_t i = 0; proxy_vars[i] != NULL; i++) {
		char lower[16];
		const char *v = strcmp(proxy_vars[i], "NO_PROXY") == 0 ? no : url;
		size_t j;

		for (j = 0; proxy_vars[i][j] != '\0' && j + 1 < sizeof(lower);
		    j++)
			lower[j] = (char)(proxy_vars[i][j] >= 'A' &&
			    proxy_vars[i][j] <= 'Z' ? proxy_vars[i][j] + 32 :
			    proxy_vars[i][j]);
		lower[j] = '\0';
		set_env(c, proxy_vars[i], v);
		set_env(c, lower, v);
	}
	free(url);
	return 0;
}

int
podspec_egress_gate(struct podspec_result *r, const struct podspec_gate *g,
    struct k8s_error *err)
{
	json_t *c = json_array_get(json_object_get(json_object_get(r->pod,
	    "spec"), "containers"), 0);
	json_t *rules = json_object_get(json_object_get(r->netpol, "spec"),
	    "egress");
	const char *uid = json_string_value(json_object_get(json_object_get(
	    json_object_get(r->pod, "metadata"), "labels"), CX_LABEL_UID));
	char val[64 + PODSPEC_GATE_MAX * PODSPEC_GATE_ADDR];
	int n, ports[PODSPEC_GATE_NPORTS + 1];

	if (g->id != NULL)
		uid = g->id;
	if (r->netpol == NULL || !json_is_array(rules) || c == NULL ||
	    g->n == 0 || g->n > PODSPEC_GATE_MAX || g->ns == NULL || uid == NULL ||
	    (r->hosts && g->id != NULL))
		return k8s_error_set(err, K8S_EINVAL, 0, NULL,
		    "no egress start gate to give the pod");
	if (r->hosts && proxy_env_set(c, r, g, json_object_get(r->pod,
	    "metadata"), err) != 0)
		return K8S_EINVAL;
	podspec_gate_ports(uid, ports);
	ports[PODSPEC_GATE_NPORTS] = PODSPEC_PROXY_PORT;
	n = snprintf(val, sizeof(val), "%d,%d %d %d %d", ports[0], ports[1],
	    ports[2], PODSPEC_GATE_CLOSED, PODSPEC_GATE_SECONDS);
	for (size_t i = 0; i < g->n; i++)
		n += snprintf(val + n, sizeof(val) - (size_t)n, " %.15s",
		    g->addrs[i]);
	set_env(c, PODSPEC_GATE_ENV, val);
	/* M too: refused only by the agent's rule, never by the policy. */
	gate_rule(rules, g, ports, r->hosts ? PODSPEC_GATE_NPORTS + 1 :
	    PODSPEC_GATE_NPORTS);
	return 0;
}

int
podspec_build(const struct ctl_config *cfg, json_t *cx,
    struct podspec_result *out, struct k8s_error *err)
{
	return podspec_build_sized(cfg, cx, 0, out, err);
}

int
podspec_build_sized(const struct ctl_config *cfg, json_t *cx, size_t size,
    struct podspec_result *out, struct k8s_error *err)
{
	json_t *spec = json_object_get(cx, "spec"), *md, *f, *res, *cmd, *vol;
	json_t *args, *ev;
	const char *runtime = json_string_value(json_object_get(spec, "runtime"));
	const char *image = json_string_value(json_object_get(spec, "image"));
	const char *uid, *ns, *src;
	const struct ctl_profile *p;
	struct ctl_egress *eg;
	struct code code;
	json_int_t timeout;
	size_t i, stored, neg;
	char *podname, key[32];
	int direct;

	memset(out, 0, sizeof(*out));
	md = json_object_get(cx, "metadata");
	uid = json_string_value(json_object_get(md, "uid"));
	ns = json_string_value(json_object_get(md, "namespace"));
	if (uid == NULL || ns == NULL || runtime == NULL)
		return k8s_error_set(err, K8S_EINVAL, 0, NULL,
		    "execution lacks metadata.uid, metadata.namespace or spec.runtime");
	if ((p = ctl_config_profile(cfg, runtime)) == NULL)
		return k8s_error_set(err, K8S_EINVAL, 0, NULL,
		    "spec.runtime: unknown runtime profile '%s'", runtime);
	if (image && !cfg->allow_custom_images)
		return k8s_error_set(err, K8S_EINVAL, 0, NULL,
		    "spec.image: custom images are not allowed on this cluster");
	/*
	 * Never a pod of its own for a session's step (docs/sessions.md): the
	 * controller routes it first; this holds whatever the order.
	 */
	if (json_object_get(spec, "session"))
		return k8s_error_set(err, K8S_EINVAL, 0, NULL,
		    "spec.session: a session's step runs in its session's sandbox, "
		    "never in a pod of its own");
	if (podspec_check_reserved(spec, p, err) != 0)
		return K8S_EINVAL;
	/* The guard is the runner image's: a tenant's image would bring its own. */
	if (image && p->policy != CTL_POLICY_NONE)
		return k8s_error_set(err, K8S_EINVAL, 0, NULL,
		    "spec.image: runtime '%s' has a code policy, which runs in its "
		    "own image only", runtime);
	/* The start gate is the runner image's too: a tenant's would skip it. */
	if (image && p->negress > 0)
		return k8s_error_set(err, K8S_EINVAL, 0, NULL,
		    "spec.image: runtime '%s' has network egress, whose start "
		    "gate runs in its own image only (docs/network.md)", runtime);
	stored = size ? size : jsonsize_value(cx);
	if (stored + CX_STATUS_RESERVE > CX_OBJECT_BUDGET)
		return k8s_error_set(err, K8S_EINVAL, 0, NULL,
		    "spec: the execution takes %zu bytes as stored (kubectl "
		    "apply's copy of it included); at most %d leave room for "
		    "its result", stored, CX_OBJECT_BUDGET -
		    CX_STATUS_RESERVE);
	if ((res = resources(cfg, spec, err)) == NULL)
		return K8S_EINVAL;
	/* What it may connect to: its profile's list, or less. */
	if (egress_effective(p, json_object_get(spec, "network"), &eg, &neg,
	    err) != 0) {
		json_decref(res);
		return K8S_EINVAL;
	}
	timeout = cx_timeout_ms(cx) / 1000;

	code.data = json_object();
	code.items = json_array();
	code.bytes = 0;
	src = json_string_value(json_object_get(spec, "source"));
	podspec_code_sha256(cx, out->code_sha256);
	{
		/* No source (files only) still gets its, empty, file. */
		json_t *empty = src ? NULL : json_string("");

		code_add(&code, "source", p->source_file, src ?
		    json_object_get(spec, "source") : empty);
		json_decref(empty);
	}
	json_array_foreach(json_object_get(spec, "files"), i, f) {
		snprintf(key, sizeof(key), "file-%zu", i);
		code_add(&code, key, json_string_value(json_object_get(f,
		    "path")), json_object_get(f, "content"));
	}
	if (json_object_get(spec, "stdin"))
		code_add(&code, "stdin", STDIN_FILE, json_object_get(spec,
		    "stdin"));

	podname = podspec_pod_name(uid);
	direct = image == NULL && p->command[0] != NULL &&
	    strcmp(p->command[0], RUNNER) == 0 &&
	    code.bytes <= PODSPEC_ANNOTATION_BUDGET;
	if (direct) {
		/* The code goes in env (tar_env, below): no volume at all. */
		vol = json_object();
		md = json_pack("{s:s, s:s, s:o, s:{s:s}}", "name", podname,
		    "namespace", ns, "labels", labels(uid), "annotations",
		    CX_ANN_NAME, k8s_obj_name(cx));
	} else if (code.bytes <= PODSPEC_ANNOTATION_BUDGET) {
		json_t *ann = json_object(), *items = json_array(), *it;
		const char *k;
		json_t *v;

		json_object_foreach(code.data, k, v) {
			char *ak = xasprintf("airlock.dev/%s", k);

			json_object_set(ann, ak, v);
			free(ak);
		}
		json_array_foreach(code.items, i, it) {
			char *fp = xasprintf("metadata.annotations['airlock.dev/%s']",
			    json_string_value(json_object_get(it, "key")));

			json_array_append_new(items, json_pack("{s:O, s:{s:s}}",
			    "path", json_object_get(it, "path"), "fieldRef",
			    "fieldPath", fp));
			free(fp);
		}
		json_object_set_new(ann, CX_ANN_NAME,
		    json_string(k8s_obj_name(cx)));
		vol = json_pack("{s:s, s:{s:o, s:i}}", "name", "code",
		    "downwardAPI", "items", items, "defaultMode", 0444);
		md = json_pack("{s:s, s:s, s:o, s:o}", "name", podname,
		    "namespace", ns, "labels", labels(uid), "annotations", ann);
	} else {
		out->configmap = json_pack("{s:s, s:s, s:{s:s, s:s, s:o, s:{s:s}},"
		    " s:O, s:b}", "apiVersion", "v1", "kind", "ConfigMap",
		    "metadata", "name", podname, "namespace", ns,
		    "labels", labels(uid), "annotations", CX_ANN_NAME,
		    k8s_obj_name(cx), "data", code.data, "immutable", 1);
		vol = json_pack("{s:s, s:{s:s, s:O, s:i}}", "name", "code",
		    "configMap", "name", podname, "items", code.items,
		    "defaultMode", 0444);
		md = json_pack("{s:s, s:s, s:o, s:{s:s}}", "name", podname,
		    "namespace", ns, "labels", labels(uid), "annotations",
		    CX_ANN_NAME, k8s_obj_name(cx));
	}
	{
		json_t *ann = json_object_get(md, "annotations");
		char v[32];

		snprintf(v, sizeof(v), "%lld", (long long)timeout * 1000);
		json_object_set_new(ann, CX_ANN_TIMEOUT_MS, json_string(v));
		snprintf(v, sizeof(v), "%zu", cx_max_bytes(cx));
		json_object_set_new(ann, CX_ANN_MAX_OUTPUT, json_string(v));
		snprintf(v, sizeof(v), "%zu", CX_OBJECT_BUDGET -
		    CX_STATUS_RESERVE - stored);
		json_object_set_new(ann, CX_ANN_OUTPUT_BUDGET, json_string(v));
		if (cx_stream(cx))
			json_object_set_new(ann, CX_ANN_STREAM, json_string("true"));
		if (p->policy != CTL_POLICY_NONE)
			json_object_set_new(ann, CX_ANN_POLICY, json_string("true"));
		/* The agent's quota (0: a profile not read from a config). */
		if (neg > 0) {
			snprintf(v, sizeof(v), "%lld", (long long)(p->egress_bytes > 0 ?
			    p->egress_bytes : CTL_EGRESS_BYTES_DEFAULT));
			json_object_set_new(ann, CX_ANN_EGRESS_BYTES, json_string(v));
		}
	}
	json_object_set_new(md, "ownerReferences", json_pack(
	    "[{s:s, s:s, s:s, s:s, s:b, s:b}]", "apiVersion",
	    "airlock.dev/v1alpha1", "kind", "CodeExecution", "name",
	    k8s_obj_name(cx), "uid", uid, "controller", 1,
	    "blockOwnerDeletion", 1));
	if (out->configmap)
		json_object_set(json_object_get(out->configmap, "metadata"),
		    "ownerReferences", json_object_get(md, "ownerReferences"));

	cmd = json_array();
	ev = env(spec, direct);
	/* Files out, for the runner's warm (not a custom image's command). */
	if (image == NULL && strcmp(p->command[0], RUNNER) == 0 &&
	    cfg->artifacts_files > 0) {
		char nonce[33], v[128];

		artifacts_nonce(uid, nonce);
		snprintf(v, sizeof(v), "%s %lld %lld", nonce,
		    (long long)cfg->artifacts_bytes, (long long)cfg->artifacts_files);
		json_array_append_new(ev, json_pack("{s:s, s:s}", "name",
		    ARTIFACTS_ENV, "value", v));
		snprintf(v, sizeof(v), "%lld %lld", (long long)cfg->artifacts_bytes,
		    (long long)cfg->artifacts_files);
		json_object_set_new(json_object_get(md, "annotations"),
		    ARTIFACTS_ANN, json_string(v));
	}
	if (direct) {
		size_t chunks = 0;
		char nb[32];

		if (tar_env(ev, code.data, code.items, &chunks, err) != 0) {
			json_decref(ev);
			json_decref(cmd);
			json_decref(res);
			json_decref(md);
			json_decref(vol);
			free(podname);
			json_decref(code.data);
			json_decref(code.items);
			egress_free(eg, neg);
			return K8S_EINVAL;
		}
		snprintf(nb, sizeof(nb), "%zu", chunks);
		json_array_append_new(cmd, json_string(UNPACKER));
		json_array_append_new(cmd, json_string("--env"));
		json_array_append_new(cmd, json_string(nb));
	} else
		json_array_append_new(cmd, json_string(p->command[0]));
	for (char **a = p->command + 1; *a; a++)
		json_array_append_new(cmd, json_string(*a));
	args = json_object_get(spec, "args") ?
	    json_incref(json_object_get(spec, "args")) : json_array();

	out->pod = json_pack("{s:s, s:s, s:o, s:{"
	    "s:s, s:s, s:s, s:s, s:I, s:b, s:b, s:s, s:{s:[s]},"
	    "s:b, s:b, s:b, s:I,"
	    "s:{s:b, s:I, s:I, s:I, s:{s:s}},"
	    "s:[{s:s, s:s, s:o, s:o, s:s, s:o, s:o,"
	    "  s:{s:b, s:b, s:b, s:I, s:{s:[s]}, s:{s:s}},"
	    "  s:[{s:s, s:s, s:b}, {s:s, s:s}, {s:s, s:s}]}],"
	    "s:[o, {s:s, s:{s:s, s:s}}, {s:s, s:{s:s, s:s}}]}}",
	    "apiVersion", "v1", "kind", "Pod", "metadata", md, "spec",
	    "serviceAccountName", PODSPEC_SERVICE_ACCOUNT,
	    "runtimeClassName", neg > 0 ? cfg->network_runtime_class :
	    cfg->runtime_class,
	    "priorityClassName", cfg->priority_class,
	    "restartPolicy", "Never",
	    "activeDeadlineSeconds", (json_int_t)(timeout + DEADLINE_SLACK),
	    "automountServiceAccountToken", 0,
	    "enableServiceLinks", 0,
	    /* No resolver at all: nothing listens on loopback inside. */
	    "dnsPolicy", "None", "dnsConfig", "nameservers", "127.0.0.1",
	    "hostNetwork", 0, "hostPID", 0, "hostIPC", 0,
	    "terminationGracePeriodSeconds", (json_int_t)1,
	    "securityContext",
	    "runAsNonRoot", 1, "runAsUser", (json_int_t)cfg->run_as_user,
	    "runAsGroup", (json_int_t)cfg->run_as_user,
	    "fsGroup", (json_int_t)cfg->run_as_user,
	    "seccompProfile", "type", "RuntimeDefault",
	    "containers",
	    "name", "run", "image", image ? image : p->image,
	    "command", cmd,
	    "args", args,
	    "workingDir", WORK_DIR,
	    "env", ev,
	    "resources", res,
	    "securityContext",
	    "allowPrivilegeEscalation", 0, "readOnlyRootFilesystem", 1,
	    "runAsNonRoot", 1, "runAsUser", (json_int_t)cfg->run_as_user,
	    "capabilities", "drop", "ALL",
	    "seccompProfile", "type", "RuntimeDefault",
	    "volumeMounts",
	    "name", "code", "mountPath", CODE_DIR, "readOnly", 1,
	    "name", "work", "mountPath", WORK_DIR,
	    "name", "tmp", "mountPath", "/tmp",
	    "volumes", vol,
	    "name", "work", "emptyDir", "medium", "Memory", "sizeLimit",
	    cfg->tmp_size_limit,
	    "name", "tmp", "emptyDir", "medium", "Memory", "sizeLimit",
	    cfg->tmp_size_limit);
	if (direct && out->pod) {
		json_t *ps = json_object_get(out->pod, "spec");
		json_t *c = json_array_get(json_object_get(ps, "containers"), 0);

		/*
		 * No volume, so the kubelet starts the pod at once: it waits on
		 * volumes in 300 ms steps (WaitForAttachAndMount), about 280 ms
		 * a pod on the test node. The working directory is gVisor's
		 * tmpfs at /tmp (runsc mounts one on an image's empty /tmp),
		 * charged to the pod's memory limit like the emptyDirs it
		 * replaces, fresh with the sandbox; the root stays read-only.
		 */
		json_object_del(ps, "volumes");
		json_object_del(c, "volumeMounts");
		json_object_set_new(c, "workingDir", json_string(TMP_DIR));
	}
	/* No policy, no pod: one that selects nothing would leave it open. */
	if (neg > 0 && out->pod && (out->netpol = egress_policy(eg, neg,
	    json_object_get(out->pod, "metadata"), CX_LABEL_UID)) == NULL) {
		json_decref(out->pod);
		out->pod = NULL;
	}
	for (i = 0; i < neg; i++)
		out->hosts |= eg[i].host != NULL;
	out->egress = eg;
	out->negress = neg;
	eg = NULL;
	neg = 0;
	free(podname);
	json_decref(code.data);
	json_decref(code.items);
	egress_free(eg, neg);
	if (out->pod == NULL) {
		podspec_result_free(out);
		return k8s_error_set(err, K8S_EINVAL, 0, NULL,
		    "cannot build the pod (bad strings in the spec?)");
	}
	return 0;
}

json_t *
podspec_service_account(const char *ns)
{
	return json_pack("{s:s, s:s, s:{s:s, s:s, s:{s:s}}, s:b}",
	    "apiVersion", "v1", "kind", "ServiceAccount",
	    "metadata", "name", PODSPEC_SERVICE_ACCOUNT, "namespace", ns,
	    "labels", CX_LABEL_MANAGED, CX_MANAGER,
	    "automountServiceAccountToken", 0);
}

json_t *
podspec_network_policy(const char *ns)
{
	/* Both policy types and no rules: nothing in, nothing out, no DNS. */
	return json_pack("{s:s, s:s, s:{s:s, s:s, s:{s:s}},"
	    " s:{s:{s:{s:s, s:s}}, s:[s, s]}}",
	    "apiVersion", "networking.k8s.io/v1", "kind", "NetworkPolicy",
	    "metadata", "name", "airlock-deny-all", "namespace", ns,
	    "labels", CX_LABEL_MANAGED, CX_MANAGER,
	    "spec", "podSelector", "matchLabels",
	    CX_LABEL_MANAGED, CX_MANAGER,
	    CX_LABEL_COMPONENT, CX_COMPONENT,
	    "policyTypes", "Ingress", "Egress");
}

struct buf_warn {
	char	*msg;	/* the first problem found; caller frees */
};

/*
 * A namespace annotation overriding a quota value, if well formed, and at
 * most max (in milli-units when milli, else units), whose text is maxtext:
 * a value past it (a typo, or whoever may annotate the namespace raising
 * its own quota without bound) is clamped, with a warning.
 */
static const char *
override(json_t *ann, const char *key, int milli, int64_t max,
    const char *maxtext, struct buf_warn *w)
{
	const char *v = json_string_value(json_object_get(ann, key));
	struct k8s_error e;
	int64_t n;

	if (v == NULL)
		return NULL;
	if ((milli ? quantity_parse_milli(v, &n, &e) :
	    quantity_parse(v, &n, &e)) != 0 || n <= 0) {
		if (w->msg == NULL)
			w->msg = xasprintf("namespace annotation %s: '%.64s' "
			    "is not a positive quantity; using the default",
			    key, v);
		return NULL;
	}
	if (n > max) {
		if (w->msg == NULL)
			w->msg = xasprintf("namespace annotation %s: '%.64s' "
			    "is above the most a quota may say, %s; using %s",
			    key, v, maxtext, maxtext);
		return maxtext;
	}
	return v;
}

json_t *
podspec_resource_quota(const struct ctl_config *cfg, const char *ns,
    json_t *namespace_obj, char **warning)
{
	json_t *ann = json_object_get(json_object_get(namespace_obj,
	    "metadata"), "annotations");
	struct buf_warn w = { NULL };
	const char *n = override(ann, "airlock.dev/quota-executions", 0,
	    PODSPEC_QUOTA_MAX_EXECUTIONS, "1000000", &w);
	const char *cpu = override(ann, "airlock.dev/quota-cpu", 1,
	    PODSPEC_QUOTA_MAX_CPU_MILLI, "100k", &w);
	const char *mem = override(ann, "airlock.dev/quota-memory", 0,
	    PODSPEC_QUOTA_MAX_MEMORY, "1Pi", &w);
	char pods[32];

	snprintf(pods, sizeof(pods), "%lld", (long long)cfg->quota_executions);
	if (n && strspn(n, "0123456789") != strlen(n)) {
		if (w.msg == NULL)
			w.msg = xasprintf("namespace annotation "
			    "airlock.dev/quota-executions: '%.64s' is not a "
			    "whole number; using the default", n);
		n = NULL;
	}
	*warning = w.msg;
	cpu = cpu ? cpu : cfg->quota.cpu;
	mem = mem ? mem : cfg->quota.memory;
	return json_pack("{s:s, s:s, s:{s:s, s:s, s:{s:s}},"
	    " s:{s:{s:s, s:s, s:s, s:s, s:s},"
	    " s:{s:[{s:s, s:s, s:[s]}]}}}",
	    "apiVersion", "v1", "kind", "ResourceQuota",
	    "metadata", "name", "airlock-executions", "namespace", ns,
	    "labels", CX_LABEL_MANAGED, CX_MANAGER,
	    "spec", "hard", "pods", n ? n : pods,
	    "requests.cpu", cpu, "limits.cpu", cpu,
	    "requests.memory", mem, "limits.memory", mem,
	    "scopeSelector", "matchExpressions", "scopeName", "PriorityClass",
	    "operator", "In", "values", cfg->priority_class);
}

json_t *
podspec_object_quota(const struct ctl_config *cfg, const char *ns,
    json_t *namespace_obj, char **warning)
{
	json_t *ann = json_object_get(json_object_get(namespace_obj,
	    "metadata"), "annotations");
	const char *v = json_string_value(json_object_get(ann,
	    PODSPEC_ANN_QUOTA_STORED));
	char n[32], pools[32], sessions[32];

	*warning = NULL;
	snprintf(n, sizeof(n), "%lld", (long long)cfg->quota_stored);
	snprintf(pools, sizeof(pools), "%lld", (long long)cfg->quota_pools);
	snprintf(sessions, sizeof(sessions), "%lld", (long long)cfg->quota_sessions);
	if (v && (strlen(v) == 0 || strlen(v) > 9 ||
	    strspn(v, "0123456789") != strlen(v) || atoll(v) < 1))
		*warning = xasprintf("namespace annotation %s: '%.64s' is not "
		    "a whole number from 1 to 999999999; using the default",
		    PODSPEC_ANN_QUOTA_STORED, v);
	else if (v)
		snprintf(n, sizeof(n), "%s", v);
	/*
	 * Files out's objects too, as many: one an execution, but one whose
	 * execution was deleted with --cascade=orphan outlives it, and would
	 * otherwise grow etcd without bound (its tenant may delete them).
	 */
	return json_pack("{s:s, s:s, s:{s:s, s:s, s:{s:s}}, s:{s:{s:s, s:s,"
	    " s:s, s:s}}}",
	    "apiVersion", "v1", "kind", "ResourceQuota",
	    "metadata", "name", PODSPEC_QUOTA_STORED, "namespace", ns,
	    "labels", CX_LABEL_MANAGED, CX_MANAGER,
	    "spec", "hard", "count/codeexecutions.airlock.dev", n,
	    "count/codeexecutionartifacts.airlock.dev", n,
	    "count/codeexecutionpools.airlock.dev", pools,
	    "count/codesessions.airlock.dev", sessions);
}
