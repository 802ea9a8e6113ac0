/*
 * rss_floor - the memory floor for bench/controller.sh: a process linked
 * as the controller is (libcurl with OpenSSL, jansson, libyaml,
 * libmicrohttpd, libcrypto) that does only what every daemon of ours
 * does once: a SHA-256, and one request to the API server over TLS with
 * the operator client. No thread, no cache, no server. Prints its memory
 * as the kernel counts it, in KiB:
 *
 *   rss=<VmRSS> file=<RssFile: the libraries' pages> anon=<RssAnon>
 *
 * usage: rss_floor KUBECONFIG
 */
#include <stdio.h>
#include <string.h>

#include "client.h"
#include "config.h"
#include "sha256.h"

static long
status_kib(const char *field)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long v = -1;
	size_t n = strlen(field);

	if (f == NULL)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, field, n) == 0 && line[n] == ':')
			sscanf(line + n + 1, "%ld", &v);
	fclose(f);
	return v;
}

int
main(int argc, char **argv)
{
	struct k8s_config *kc;
	struct k8s_client *c;
	struct k8s_error err;
	char hex[65];
	long status = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: rss_floor KUBECONFIG\n");
		return 2;
	}
	if (sha256_hex("airlock", 7, hex) != 0) {
		fprintf(stderr, "rss_floor: sha256 failed\n");
		return 1;
	}
	if (k8s_config_load_kubeconfig(argv[1], NULL, &kc, &err) != 0 ||
	    k8s_client_new(kc, NULL, &c, &err) != 0 ||
	    k8s_request(c, "GET", "/version", NULL, NULL, 0, &status, NULL,
	    &err) != 0) {
		fprintf(stderr, "rss_floor: %s\n", err.message);
		return 1;
	}
	printf("rss=%ld file=%ld anon=%ld\n", status_kib("VmRSS"),
	    status_kib("RssFile"), status_kib("RssAnon"));
	k8s_client_free(c);
	k8s_config_free(kc);
	return 0;
}
