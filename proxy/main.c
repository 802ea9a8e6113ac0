/*
 * airlock-egress - the two programs the egress proxy's Squid runs
 * (docs/network-proxy-research.md), one binary:
 *
 *   airlock-egress acl --key-file FILE [--log-level LEVEL]
 *     the external ACL helper (aclserve.h, acl.h), checking each
 *     request's pass under the key in FILE (egress_token.h)
 *   airlock-egress-log [PATH]  or  airlock-egress log [PATH]
 *     the logfile daemon (accesslog.h), writing the audit records to PATH
 *     (appended), or to stdout for "-" or none
 *
 * The mode is the name the binary was run by (the path given to execve:
 * Squid sets argv[0] to "(logfile-daemon)" or the like, so argv[0] says
 * nothing), else the first argument.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <time.h>
#include <unistd.h>

#include "accesslog.h"
#include "aclserve.h"
#include "daemon.h"
#include "egress_token.h"
#include "log.h"

static void
usage(void)
{
	fprintf(stderr,
	    "usage: airlock-egress acl --key-file FILE [--log-level LEVEL]\n"
	    "       airlock-egress log [PATH]   (or as airlock-egress-log [PATH])\n");
	exit(2);
}

static long long
now(void)
{
	return (long long)time(NULL);
}

static int
acl_main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "key-file", required_argument, NULL, 'k' },
		{ "log-level", required_argument, NULL, 'l' },
		{ NULL, 0, NULL, 0 },
	};
	static const char prog[] = "airlock-egress acl";
	const char *key_file = NULL;
	unsigned char *key;
	struct k8s_error err;
	struct aclserve s;
	size_t keylen;
	int ch, rc;

	while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (ch) {
		case 'k': key_file = optarg; break;
		case 'l': daemon_flag_log_level(prog, optarg); break;
		default: usage();
		}
	}
	if (key_file == NULL || optind != argc)
		usage();
	if (egress_key_load(key_file, &key, &keylen, &err) != 0)
		daemon_die(prog, 1, "--key-file: %s", err.message);
	signal(SIGPIPE, SIG_IGN);
	log_info("egress acl helper started");
	aclserve_init(&s, key, keylen, now, STDOUT_FILENO);
	rc = aclserve_run(&s, STDIN_FILENO);
	aclserve_free(&s);
	free(key);
	log_info("egress acl helper stopped");
	return rc == 0 ? 0 : 1;
}

/*
 * Squid gives its logfile daemon one socket as stdin and stdout (seen in
 * /proc on 5.7), so the records cannot go to stdout there: they go to
 * PATH, access_log daemon:PATH's. In the proxy's container that is a FIFO
 * the entrypoint makes and copies to the container's stdout (`cat` in the
 * background): /proc/1/fd/1 was refused (EACCES) to Squid's user, since
 * reopening a file descriptor through /proc checks the file's owner, the
 * runtime's. If the reader goes, the write fails and the daemon exits,
 * and Squid with it. stdout is for running it by hand and for tests.
 */
static int
log_main(const char *path)
{
	int out = STDOUT_FILENO;

	signal(SIGPIPE, SIG_IGN);
	if (path != NULL && strcmp(path, "-") != 0 &&
	    (out = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC,
	    0640)) < 0) {
		fprintf(stderr, "airlock-egress-log: cannot open '%s': %s\n",
		    path, strerror(errno));
		return 1;
	}
	if (accesslog_run(STDIN_FILENO, out) != 0) {
		/* Squid then exits: no traffic goes unaudited. */
		log_error("egress log daemon: cannot go on", "errno=%d", errno);
		return 1;
	}
	return 0;
}

int
main(int argc, char **argv)
{
	const char *path = (const char *)getauxval(AT_EXECFN), *base;

	if (path == NULL)
		path = argv[0];
	base = strrchr(path, '/');
	base = base ? base + 1 : path;
	if (strcmp(base, "airlock-egress-log") == 0)
		return log_main(argc >= 2 ? argv[1] : NULL);
	if (argc >= 2 && strcmp(argv[1], "log") == 0)
		return log_main(argc >= 3 ? argv[2] : NULL);
	if (argc >= 2 && strcmp(argv[1], "acl") == 0)
		return acl_main(argc - 1, argv + 1);
	usage();
}
