#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>

#include <curl/curl.h>

#include "buf.h"
#include "clock.h"
#include "itutil.h"
#include "xmalloc.h"
#include "yamljson.h"

static const struct k8s_resource res_crds = { "apiextensions.k8s.io", "v1",
    "customresourcedefinitions", 0 };

#define MAXVARS 128

static char *keys[MAXVARS], *vals[MAXVARS];
static int nvars = -1;

static void
load_env(void)
{
	const char *path = getenv("AIRLOCK_CLUSTER_ENV");
	char line[4096], def[4096];
	FILE *f;

	if (nvars >= 0)
		return;
	nvars = 0;
	if (path == NULL) {
		snprintf(def, sizeof(def), "%s/.cluster/env",
		    getenv("AIRLOCK_TOP") ? getenv("AIRLOCK_TOP") : ".");
		path = def;
	}
	if ((f = fopen(path, "r")) == NULL)
		fail_msg("no test cluster: cannot open '%s' (run make cluster-up)", path);
	while (fgets(line, sizeof(line), f) && nvars < MAXVARS) {
		char *eq = strchr(line, '='), *v;
		size_t n;

		if (line[0] == '#' || eq == NULL)
			continue;
		*eq = '\0';
		v = eq + 1;
		n = strcspn(v, "\n");
		v[n] = '\0';
		if (n >= 2 && (v[0] == '"' || v[0] == '\'') && v[n - 1] == v[0]) {
			v[n - 1] = '\0';
			v++;
		}
		keys[nvars] = xstrdup(line);
		vals[nvars++] = xstrdup(v);
	}
	if (!feof(f))
		fail_msg("'%s' has more than %d variables", path, MAXVARS);
	fclose(f);
}

const char *
it_env(const char *key)
{
	load_env();
	for (int i = 0; i < nvars; i++)
		if (strcmp(keys[i], key) == 0)
			return vals[i];
	return NULL;
}

const char *
it_env_need(const char *key)
{
	const char *v = it_env(key);

	if (v == NULL || !*v)
		fail_msg("%s is not in .cluster/env: is the cluster up (with NODE=1, after make)?",
		    key);
	return v;
}

struct k8s_client *
it_client(int restricted, struct k8s_config **cfgp)
{
	const char *kc = it_env(restricted ? "KUBECONFIG_RESTRICTED" :
	    "KUBECONFIG_ADMIN");
	struct k8s_client *c;
	struct k8s_error err;

	if (kc == NULL)
		fail_msg("no kubeconfig in the cluster env");
	if (k8s_config_load_kubeconfig(kc, NULL, cfgp, &err) != 0)
		fail_msg("kubeconfig '%s': %s", kc, err.message);
	if (k8s_client_new(*cfgp, NULL, &c, &err) != 0)
		fail_msg("client: %s", err.message);
	return c;
}

void
it_client_free(struct k8s_client *c, struct k8s_config *cfg)
{
	k8s_client_free(c);
	k8s_config_free(cfg);
}

char *
it_namespace_new(struct k8s_client *c, const char *prefix)
{
	struct k8s_error err;
	struct timespec ts;
	json_t *ns;
	char *name;

	/*
	 * 32 random bits. The pid and the microseconds mod 65536 were as
	 * likely to repeat within one binary as 1 in 65536 a pair, and did:
	 * a name still being deleted by an earlier test (clean-clone run,
	 * 2026-11-27: "object is being deleted: namespaces ... already
	 * exists").
	 */
	{
		unsigned r;

		if (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r)) {
			clock_gettime(CLOCK_REALTIME, &ts);
			r = (unsigned)ts.tv_nsec ^ ((unsigned)getpid() << 16);
		}
		name = xasprintf("%s-%08x", prefix, r);
	}
	ns = json_pack("{s:s, s:s, s:{s:s}}", "apiVersion", "v1",
	    "kind", "Namespace", "metadata", "name", name);
	if (k8s_create(c, &k8s_res_namespaces, NULL, ns, NULL, &err) != 0)
		fail_msg("create namespace %s: %s", name, err.message);
	json_decref(ns);
	return name;
}

void
it_namespace_delete(struct k8s_client *c, const char *ns)
{
	struct k8s_error err;

	if (k8s_delete(c, &k8s_res_namespaces, NULL, ns, NULL, NULL, &err) != 0)
		fprintf(stderr, "delete namespace %s: %s\n", ns, err.message);
}

char *
it_configmap(struct k8s_client *c, const char *ns, const char *name,
    const char *v)
{
	struct k8s_error err;
	json_t *cm, *out;
	char *rv;

	cm = json_pack("{s:s, s:s, s:{s:s}, s:{s:s}}", "apiVersion", "v1",
	    "kind", "ConfigMap", "metadata", "name", name, "data", "k", v);
	if (k8s_create(c, &k8s_res_configmaps, ns, cm, &out, &err) != 0)
		fail_msg("create configmap %s/%s: %s", ns, name, err.message);
	rv = xstrdup(k8s_obj_rv(out));
	json_decref(cm);
	json_decref(out);
	return rv;
}

static size_t
collect(char *p, size_t size, size_t n, void *arg)
{
	return buf_append(arg, p, size * n) == 0 ? size * n : 0;
}

/* POST JSON to etcd's v3 gateway; the parsed answer. */
static json_t *
etcd_post(const char *path, const char *body)
{
	const char *base = it_env("ETCD_URL");
	struct curl_slist *h = NULL;
	struct buf b;
	json_t *out;
	char *url;
	CURL *c;

	if (base == NULL)
		fail_msg("no ETCD_URL in the cluster env");
	buf_init(&b, 1 << 20);
	url = xasprintf("%s%s", base, path);
	c = curl_easy_init();
	h = curl_slist_append(h, "Content-Type: application/json");
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 30L);
	if (curl_easy_perform(c) != CURLE_OK)
		fail_msg("etcd %s failed", path);
	out = json_loads(b.data ? b.data : "", 0, NULL);
	if (out == NULL)
		fail_msg("etcd %s: bad answer '%s'", path, b.data ? b.data : "");
	curl_slist_free_all(h);
	curl_easy_cleanup(c);
	free(url);
	buf_free(&b);
	return out;
}

long
it_etcd_compact(void)
{
	json_t *r = etcd_post("/v3/kv/range", "{\"key\":\"AA==\"}");
	const char *rev = json_string_value(json_object_get(
	    json_object_get(r, "header"), "revision"));
	long n = rev ? strtol(rev, NULL, 10) : 0;
	char body[128];

	if (n <= 0)
		fail_msg("etcd revision unreadable");
	json_decref(r);
	snprintf(body, sizeof(body), "{\"revision\":\"%ld\",\"physical\":true}", n);
	json_decref(etcd_post("/v3/kv/compaction", body));
	return n;
}

long
it_mono_ms(void)
{
	return (long)clock_mono_ms();
}

void
it_sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

int
it_under_valgrind(void)
{
	const char *p = getenv("LD_PRELOAD");

	return p != NULL && strstr(p, "vgpreload") != NULL;
}

int
it_wait_for(int (*cond)(void *arg), void *arg, long timeout_ms)
{
	long end = it_mono_ms() + timeout_ms;

	for (;;) {
		if (cond(arg))
			return 1;
		if (it_mono_ms() >= end)
			return 0;
		it_sleep_ms(10);
	}
}

/* What crd_established waits for. */
struct crd_wait {
	struct k8s_client	*c;
	const char		*name;	/* "codeexecutions.airlock.dev" */
};

static int
crd_established(void *arg)
{
	struct crd_wait *w = arg;
	struct k8s_error err;
	json_t *crd, *conds, *cd;
	size_t i;
	int ok = 0;

	if (k8s_get(w->c, &res_crds, NULL, w->name, &crd, &err) != 0)
		return 0;
	conds = json_object_get(json_object_get(crd, "status"), "conditions");
	json_array_foreach(conds, i, cd)
		if (strcmp(json_string_value(json_object_get(cd, "type")), "Established") == 0 &&
		    strcmp(json_string_value(json_object_get(cd, "status")), "True") == 0)
			ok = 1;
	json_decref(crd);
	return ok;
}

void
it_install_crd(struct k8s_client *c)
{
	static const char *const plurals[] = { "codeexecutions",
	    "codeexecutionpools", "codeexecutionartifacts", "codesessions" };
	struct k8s_patch_opts apply = { K8S_PATCH_APPLY, "airlock-tests", 1, NULL };
	struct k8s_error err;
	char path[1024], name[64];
	struct crd_wait w = { c, name };
	json_t *crd;

	for (size_t i = 0; i < sizeof(plurals) / sizeof(plurals[0]); i++) {
		snprintf(path, sizeof(path), "%s/crds/airlock.dev_%s.yaml",
		    getenv("AIRLOCK_TOP") ? getenv("AIRLOCK_TOP") : ".", plurals[i]);
		snprintf(name, sizeof(name), "%s.airlock.dev", plurals[i]);
		if (yamljson_load_file(path, "crd", 0, &crd, &err) != 0)
			fail_msg("%s", err.message);
		if (k8s_patch(c, &res_crds, NULL, name, &apply, crd, NULL, &err) != 0)
			fail_msg("apply crd '%s': %s", name, err.message);
		json_decref(crd);
		if (!it_wait_for(crd_established, &w, 20000))
			fail_msg("crd '%s' not established in 20 s", name);
	}
}

pid_t
it_spawn(const char *name, const char *logpath, const char *const *args)
{
	const char *bin = getenv("AIRLOCK_BIN");
	char path[1024];
	const char *argv[64];
	int n = 0, fd;
	pid_t pid;

	snprintf(path, sizeof(path), "%s/%s", bin ? bin : "bin", name);
	argv[n++] = path;
	while (args && *args && n < 63)
		argv[n++] = *args++;
	argv[n] = NULL;
	if ((pid = fork()) < 0)
		fail_msg("fork failed");
	if (pid == 0) {
		fd = open(logpath, O_WRONLY | O_CREAT | O_APPEND, 0644);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
			close(fd);
		}
		execv(path, (char *const *)argv);
		_exit(127);
	}
	return pid;
}

int
it_stop(pid_t pid, int sig)
{
	int st = -1;

	kill(pid, sig);
	waitpid(pid, &st, 0);
	return st;
}

static void
ensure(struct k8s_client *c, const struct k8s_resource *res, json_t *obj)
{
	struct k8s_error err;
	int rc = k8s_create(c, res, NULL, obj, NULL, &err);

	if (rc != 0 && rc != K8S_EEXIST)
		fail_msg("create %s: %s", res->plural, err.message);
	json_decref(obj);
}

void
it_install_classes(struct k8s_client *c)
{
	static const struct k8s_resource rc = { "node.k8s.io", "v1",
	    "runtimeclasses", 0 };
	static const struct k8s_resource pc = { "scheduling.k8s.io", "v1",
	    "priorityclasses", 0 };

	ensure(c, &rc, json_pack("{s:s, s:s, s:{s:s}, s:s}", "apiVersion",
	    "node.k8s.io/v1", "kind", "RuntimeClass", "metadata", "name",
	    "gvisor", "handler", "runsc"));
	ensure(c, &pc, json_pack("{s:s, s:s, s:{s:s}, s:i, s:s, s:s}",
	    "apiVersion", "scheduling.k8s.io/v1", "kind", "PriorityClass",
	    "metadata", "name", "airlock-execution", "value", 0,
	    "preemptionPolicy", "Never", "description", "Airlock executions"));
}

int
it_free_port(void)
{
	static unsigned seed;
	static int handed[64], nhanded;

	if (seed == 0)
		seed = (unsigned)getpid() ^ (unsigned)it_mono_ms();
	for (int tries = 0; tries < 200; tries++) {
		struct sockaddr_in sa = { .sin_family = AF_INET };
		int fd, port = 10000 + (int)(rand_r(&seed) % 10000), ok, seen = 0;

		for (int i = 0; i < nhanded && i < 64; i++)
			seen |= handed[i] == port;
		if (seen)
			continue;
		sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		sa.sin_port = htons((uint16_t)port);
		if ((fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
			fail_msg("socket: %s", strerror(errno));
		ok = bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
		close(fd);
		if (ok) {
			handed[nhanded++ % 64] = port;
			return port;
		}
	}
	fail_msg("no free port in 10000-19999");
	return -1;
}

/* All of f, NUL-terminated (caller frees). */
static char *
read_all(FILE *f)
{
	size_t cap = 1 << 16, len = 0, n;
	char *buf = malloc(cap);

	if (buf == NULL)
		fail_msg("out of memory");
	while ((n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
		len += n;
		if (cap - len < 4096 && (buf = realloc(buf, cap *= 2)) == NULL)
			fail_msg("out of memory");
	}
	buf[len] = '\0';
	return buf;
}

int
it_sh(const char *cmd, char **outp, char **errp)
{
	char errpath[] = "/tmp/airlock-sh-err-XXXXXX", *full;
	FILE *p, *f;
	int fd, st;

	if (errp) {
		if ((fd = mkstemp(errpath)) < 0)
			fail_msg("mkstemp: %s", strerror(errno));
		close(fd);
		full = xasprintf("%s 2>'%s'", cmd, errpath);
	} else {
		full = xasprintf("%s 2>&1", cmd);
	}
	if ((p = popen(full, "r")) == NULL)
		fail_msg("popen %s", full);
	*outp = read_all(p);
	st = pclose(p);
	free(full);
	if (errp) {
		if ((f = fopen(errpath, "r")) == NULL)
			fail_msg("%s: %s", errpath, strerror(errno));
		*errp = read_all(f);
		fclose(f);
		unlink(errpath);
	}
	return WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ?
	    128 + WTERMSIG(st) : -1;
}

char *
it_drain_fifo(int fd, long timeout_ms)
{
	char *out = xmalloc(1 << 16);
	size_t len = 0;
	long end = it_mono_ms() + timeout_ms;

	for (;;) {
		struct pollfd p = { fd, POLLIN, 0 };
		ssize_t n;

		if (it_mono_ms() > end)
			break;
		(void)poll(&p, 1, 100);
		n = read(fd, out + len, (1 << 16) - 1 - len);
		if (n > 0)
			len += (size_t)n;
		else if (n == 0) {
			out[len] = '\0';
			return out;	/* the writer closed its end */
		} else if (errno != EAGAIN && errno != EINTR)
			break;
	}
	free(out);
	return NULL;
}

const char *
it_str(json_t *st, const char *k)
{
	const char *v = json_string_value(json_object_get(st, k));

	if (v == NULL)
		fail_msg("status.%s is missing", k);
	return v;
}

long long
it_int(json_t *st, const char *k)
{
	json_t *v = json_object_get(st, k);

	if (!json_is_integer(v))
		fail_msg("status.%s is missing", k);
	return json_integer_value(v);
}

int
it_bool(json_t *st, const char *k)
{
	json_t *v = json_object_get(st, k);

	if (!json_is_boolean(v))
		fail_msg("status.%s is missing", k);
	return json_is_true(v);
}

const char *
it_helm(void)
{
	const char *h = getenv("HELM");

	if (h == NULL || !*h)
		fail_msg("HELM is not set (tests/cluster/build.sh helm)");
	return h;
}

void
it_cx_create(struct k8s_client *c, const char *ns, const char *name,
    const char *spec)
{
	struct k8s_error err;
	json_t *s = json_loads(spec, 0, NULL);
	json_t *o;

	if (s == NULL)
		fail_msg("bad spec in the test: %s", spec);
	o = json_pack("{s:s, s:s, s:{s:s}, s:o}", "apiVersion",
	    "airlock.dev/v1alpha1", "kind", "CodeExecution", "metadata", "name",
	    name, "spec", s);
	/*
	 * In a namespace's first seconds the API server may refuse with
	 * "status unknown for quota": the stored quota the controller made on
	 * the namespace's first execution, whose status the cluster's quota
	 * controller rewrote without the execution count before the
	 * controller seeded it again (guardrails.c). Transient, and a client
	 * tries again (the nodes tier hit it once in test_spread).
	 */
	for (long t0 = it_mono_ms();; it_sleep_ms(100)) {
		if (k8s_create(c, &cx_resource, ns, o, NULL, &err) == 0)
			break;
		/*
		 * Likewise a CRD just installed (helm install's crds/) whose
		 * schema the chart's creator stamp (a MutatingAdmissionPolicy)
		 * has not yet fetched: 503, "Resource kind ... not found. There
		 * can be a delay between when CustomResourceDefinitions are
		 * created and when they are available". The API server polls
		 * the schemas every 5 s; measured 3.5 s after the CRDs' apply,
		 * two runs of four (the nodes tier hit it in test_nodes_chart).
		 * The CLI and the SDK try a 503 again as well.
		 */
		if (!((err.http_status == 403 && strstr(err.message,
		    "status unknown for quota")) || (err.http_status == 503 &&
		    strstr(err.message, "CustomResourceDefinitions are created"))) ||
		    it_mono_ms() - t0 > 10000)
			fail_msg("create %s: %s", name, err.message);
	}
	json_decref(o);
}

json_t *
it_cx_until(struct k8s_client *c, const char *ns, const char *name,
    int (*done)(json_t *status), const char *what, long timeout_ms)
{
	long end = it_mono_ms() + timeout_ms;
	struct k8s_error err;
	json_t *o = NULL, *st;

	for (;;) {
		json_decref(o);
		o = NULL;
		if (k8s_get(c, &cx_resource, ns, name, &o, &err) == 0 &&
		    done(json_object_get(o, "status")))
			break;
		if (it_mono_ms() > end)
			fail_msg("%s did not %s within %ld ms: %s", name, what,
			    timeout_ms, o ? json_dumps(json_object_get(o,
			    "status"), 0) : "(none)");
		it_sleep_ms(20);
	}
	st = json_incref(json_object_get(o, "status"));
	json_decref(o);
	return st;
}

static int
ended(json_t *status)
{
	return cx_phase_terminal(json_string_value(json_object_get(status,
	    "phase")));
}

json_t *
it_cx_wait(struct k8s_client *c, const char *ns, const char *name,
    long timeout_ms)
{
	return it_cx_until(c, ns, name, ended, "finish", timeout_ms);
}

int
it_images_bin(const char *name, char *out, size_t n)
{
	char self[4096], *d;
	ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);

	if (len <= 0)
		return -1;
	self[len] = '\0';
	for (int i = 0; i < 3; i++)	/* $(B)/tests/TIER/x -> $(B) */
		if ((d = strrchr(self, '/')) != NULL)
			*d = '\0';
	if ((size_t)snprintf(out, n, "%s/images/%s", self, name) >= n)
		return -1;
	return access(out, X_OK) == 0 ? 0 : -1;
}
