/*
 * clirun.h - run bin/airlock (of the flavour under test, $AIRLOCK_BIN) as a
 * user would, its stdout and stderr captured apart, byte for byte.
 */
#ifndef AIRLOCK_CLIRUN_H
#define AIRLOCK_CLIRUN_H

#include <stddef.h>
#include <sys/types.h>

struct cli_result {
	char	*out, *err;		/* NUL-terminated; may hold NULs */
	size_t	 out_len, err_len;
	int	 status;		/* exit code, or 128 + signal */
};

/*
 * Run airlock with the NULL-terminated args, stdin from stdin_path (NULL:
 * /dev/null). Waits at most timeout_ms, then kills it and fails the test.
 */
void cli_run(struct cli_result *r, const char *stdin_path, long timeout_ms,
    const char *const *args);

/* Start it without waiting; finish with cli_finish. */
pid_t cli_start(const char *const *args, int *out_fd, int *err_fd);
void cli_finish(struct cli_result *r, pid_t pid, int out_fd, int err_fd,
    long timeout_ms);

void cli_result_free(struct cli_result *r);

/* Fail the test unless airlock exited with code, showing what it printed. */
void cli_expect_status(const struct cli_result *r, int code);

#endif
