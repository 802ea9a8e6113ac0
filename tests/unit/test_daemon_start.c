/*
 * Unit tests: bin/airlock-controller and bin/airlock-node-agent (from
 * $AIRLOCK_BIN, as tests/run.sh sets it) failing at start-up: a taken
 * metrics or probe port, or a bad lease setting, ends the process with
 * status 1 or 2 and one line naming the cause, never a crash.
 *
 * The daemons talk TLS to a stand-in API server (libmicrohttpd with the
 * self-signed pair in tests/data/tls/): the crash this guards against
 * (exit 139 on a taken port, issue 28) came from exit()'s OpenSSL
 * clean-up freeing what the informers' TLS handshakes, already under
 * way, were using. Plain HTTP never showed it.
 */
#include <sys/socket.h>
#include <sys/wait.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>
#include <microhttpd.h>

/* Each case runs the daemon this often: the crash was a race (12 in 30). */
#define RUNS	12

static char top[4096];
static char bindir[4096];
static char kubeconfig[64];
static struct MHD_Daemon *api;
static char *tls_key, *tls_cert;

static char *
slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	char *s;
	long n;

	if (f == NULL)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	s = calloc(1, (size_t)n + 1);
	if (s == NULL || fread(s, 1, (size_t)n, f) != (size_t)n) {
		free(s);
		s = NULL;
	}
	fclose(f);
	return s;
}

/* Every request: an empty list, so the informers keep the TLS busy. */
static enum MHD_Result
api_answer(void *cls, struct MHD_Connection *conn, const char *url,
    const char *method, const char *version, const char *upload,
    size_t *upload_size, void **req_cls)
{
	static const char list[] = "{\"kind\":\"List\",\"apiVersion\":\"v1\","
	    "\"metadata\":{\"resourceVersion\":\"1\"},\"items\":[]}";
	static int seen;
	struct MHD_Response *r;
	enum MHD_Result ret;

	(void)cls;
	(void)url;
	(void)method;
	(void)version;
	(void)upload;
	if (*req_cls == NULL) {
		*req_cls = &seen;
		return MHD_YES;
	}
	if (*upload_size != 0) {
		*upload_size = 0;
		return MHD_YES;
	}
	r = MHD_create_response_from_buffer(strlen(list), (void *)list,
	    MHD_RESPMEM_PERSISTENT);
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
	    "application/json");
	ret = MHD_queue_response(conn, MHD_HTTP_OK, r);
	MHD_destroy_response(r);
	return ret;
}

static int
group_setup(void **state)
{
	const char *t = getenv("AIRLOCK_TOP"), *b = getenv("AIRLOCK_BIN");
	const union MHD_DaemonInfo *info;
	struct sockaddr_in sin;
	char path[4200];
	FILE *f;
	int fd;

	(void)state;
	snprintf(top, sizeof(top), "%s", t ? t : ".");
	snprintf(bindir, sizeof(bindir), "%s", b ? b : "bin");
	snprintf(path, sizeof(path), "%s/tests/data/tls/server.key", top);
	tls_key = slurp(path);
	snprintf(path, sizeof(path), "%s/tests/data/tls/server.crt", top);
	tls_cert = slurp(path);
	if (tls_key == NULL || tls_cert == NULL ||
	    MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES)
		return -1;
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	api = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD |
	    MHD_USE_THREAD_PER_CONNECTION | MHD_USE_TLS, 0, NULL, NULL,
	    api_answer, NULL,
	    MHD_OPTION_HTTPS_MEM_KEY, tls_key,
	    MHD_OPTION_HTTPS_MEM_CERT, tls_cert,
	    MHD_OPTION_SOCK_ADDR, &sin,
	    MHD_OPTION_END);
	if (api == NULL)
		return -1;
	info = MHD_get_daemon_info(api, MHD_DAEMON_INFO_BIND_PORT);
	snprintf(kubeconfig, sizeof(kubeconfig), "/tmp/airlock-kc-XXXXXX");
	if ((fd = mkstemp(kubeconfig)) < 0 || (f = fdopen(fd, "w")) == NULL)
		return -1;
	fprintf(f, "current-context: c\n"
	    "clusters:\n"
	    "- name: c\n"
	    "  cluster:\n"
	    "    server: https://127.0.0.1:%u\n"
	    "    insecure-skip-tls-verify: true\n"
	    "users:\n"
	    "- name: u\n"
	    "  user: {token: t}\n"
	    "contexts:\n"
	    "- {name: c, context: {cluster: c, user: u, namespace: ns1}}\n",
	    (unsigned)info->port);
	fclose(f);
	return 0;
}

static int
group_teardown(void **state)
{
	(void)state;
	if (api)
		MHD_stop_daemon(api);
	unlink(kubeconfig);
	free(tls_key);
	free(tls_cert);
	return 0;
}

/* A listening socket on 127.0.0.1: the port someone else holds. */
static int
take_port(uint16_t *port)
{
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	assert_true(fd >= 0);
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	assert_int_equal(listen(fd, 1), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sin, &len), 0);
	*port = ntohs(sin.sin_port);
	return fd;
}

static long
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

/*
 * Run bindir/name with args; its stderr (cut to n - 1 bytes) in out.
 * Returns the exit status, or 128 + the signal that ended it. Killed and
 * failed if it runs past 10 s.
 */
static int
run(const char *name, const char *const *args, char *out, size_t n)
{
	const char *argv[32];
	char path[4200];
	size_t got = 0;
	long deadline = now_ms() + 10000;
	int p[2], st, i = 0, null;
	pid_t pid;

	snprintf(path, sizeof(path), "%s/%s", bindir, name);
	argv[i++] = path;
	while (*args && i < 31)
		argv[i++] = *args++;
	argv[i] = NULL;
	assert_int_equal(pipe(p), 0);
	if ((pid = fork()) == 0) {
		null = open("/dev/null", O_RDWR);
		dup2(null, 0);
		dup2(null, 1);
		dup2(p[1], 2);
		close(p[0]);
		execv(path, (char *const *)argv);
		_exit(127);
	}
	close(p[1]);
	for (;;) {
		struct pollfd pfd = { p[0], POLLIN, 0 };
		ssize_t r;

		if (poll(&pfd, 1, (int)(deadline - now_ms())) <= 0) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			close(p[0]);
			fail_msg("%s still running after 10 s", name);
		}
		r = read(p[0], out + got, n - 1 - got);
		if (r <= 0)
			break;
		got += (size_t)r;
		if (got == n - 1)
			break;
	}
	out[got] = '\0';
	close(p[0]);
	waitpid(pid, &st, 0);
	if (WIFSIGNALED(st))
		return 128 + WTERMSIG(st);
	return WEXITSTATUS(st);
}

/* RUNS runs of name with args: each status want and stderr exactly line. */
static void
expect_runs(const char *name, const char *const *args, int want,
    const char *line)
{
	char out[4096];
	int st;

	for (int i = 0; i < RUNS; i++) {
		st = run(name, args, out, sizeof(out));
		if (st != want || strcmp(out, line) != 0)
			fail_msg("run %d of %s: status %d (want %d), said '%s' "
			    "(want '%s')", i + 1, name, st, want, out, line);
	}
}

/* The message libmicrohttpd gives; the part after "cannot listen on". */
static void
busy_line(char *line, size_t n, const char *prog, const char *addr,
    uint16_t port)
{
	snprintf(line, n, "%s: cannot listen on '%s': Failed to bind to port "
	    "%u: Address already in use\n", prog, addr, (unsigned)port);
}

static void
test_controller_port_taken(void **state)
{
	char cfg[4200], addr[32], line[256];
	uint16_t port;
	int fd = take_port(&port);
	const char *args[] = { "--config", cfg, "--kubeconfig", kubeconfig,
	    "--metrics-addr", addr, "--log-level", "error", NULL };

	(void)state;
	snprintf(cfg, sizeof(cfg), "%s/tests/data/ctlconfig/minimal.yaml", top);
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", (unsigned)port);
	busy_line(line, sizeof(line), "airlock-controller", addr, port);
	expect_runs("airlock-controller", args, 1, line);
	close(fd);
}

static void
test_agent_port_taken(void **state)
{
	char addr[32], line[256];
	uint16_t port;
	int fd = take_port(&port);
	/* With its heartbeat: the lease's settings are checked first. */
	const char *args[] = { "--node-name", "n1", "--kubeconfig", kubeconfig,
	    "--containerd-socket", "/nonexistent/containerd.sock",
	    "--metrics-addr", addr, "--log-level", "error",
	    "--lease-namespace", "airlock-system", NULL };

	(void)state;
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", (unsigned)port);
	busy_line(line, sizeof(line), "airlock-node-agent", addr, port);
	expect_runs("airlock-node-agent", args, 1, line);
	close(fd);
}

/* The probes' port taken (the metrics one free): the same, for it. */
static void
test_probe_port_taken(void **state)
{
	char cfg[4200], addr[32], line[256];
	uint16_t port;
	int fd = take_port(&port);
	const char *cargs[] = { "--config", cfg, "--kubeconfig", kubeconfig,
	    "--metrics-addr", "127.0.0.1:0", "--probe-addr", addr,
	    "--log-level", "error", NULL };
	const char *aargs[] = { "--node-name", "n1", "--kubeconfig", kubeconfig,
	    "--containerd-socket", "/nonexistent/containerd.sock",
	    "--metrics-addr", "127.0.0.1:0", "--probe-addr", addr,
	    "--log-level", "error", NULL };

	(void)state;
	snprintf(cfg, sizeof(cfg), "%s/tests/data/ctlconfig/minimal.yaml", top);
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", (unsigned)port);
	busy_line(line, sizeof(line), "airlock-controller", addr, port);
	expect_runs("airlock-controller", cargs, 1, line);
	busy_line(line, sizeof(line), "airlock-node-agent", addr, port);
	expect_runs("airlock-node-agent", aargs, 1, line);
	close(fd);
}

/* A lease setting the lease refuses: a flag's fault, exit 2. */
static void
test_controller_bad_lease(void **state)
{
	char cfg[4200];
	const char *args[] = { "--config", cfg, "--kubeconfig", kubeconfig,
	    "--metrics-addr", "0", "--log-level", "error",
	    "--lease-namespace", "ns1", "--lease-duration-ms", "1000", NULL };

	(void)state;
	snprintf(cfg, sizeof(cfg), "%s/tests/data/ctlconfig/minimal.yaml", top);
	expect_runs("airlock-controller", args, 2, "airlock-controller: lease "
	    "duration 1000 ms must be whole seconds and exceed renew deadline "
	    "+ retry period (12000 ms)\n");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_controller_port_taken),
		cmocka_unit_test(test_agent_port_taken),
		cmocka_unit_test(test_probe_port_taken),
		cmocka_unit_test(test_controller_bad_lease),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
