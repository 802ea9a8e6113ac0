/*
 * accesslog.h - Squid's logfile daemon for the egress proxy: each access
 * log record that carries a decision becomes one CodeExecutionEgress audit
 * record, a JSON line on stdout (controller/docs/audit.md, "Egress
 * records"). accesslog.c has the logformat it reads.
 *
 * Squid runs it as `logfile_daemon` with the log's path as argv[1], which
 * it ignores, and writes commands a line, the first byte saying which:
 * L<record> a record; R (rotate), T (truncate), O (reopen), F (flush),
 * r<n> (rotate count) and b<n> (buffering) mean nothing for a stream and
 * are ignored (Squid 5.7's log_file_daemon.cc has the list).
 *
 * If stdout cannot be written the daemon exits non-zero, and Squid exits
 * with it: no traffic goes unaudited.
 */
#ifndef AIRLOCK_ACCESSLOG_H
#define AIRLOCK_ACCESSLOG_H

#include <stddef.h>

#include <jansson.h>

/* A command line's most bytes; a longer one is dropped with a warning. */
#define ACCESSLOG_LINE_MAX	65536
/* Caps on what the log holds of the tenant's: longer is cut, "..." added. */
#define ACCESSLOG_HOST_MAX	253
#define ACCESSLOG_METHOD_MAX	32

/*
 * The audit record of one access-log line (the text after 'L', len bytes,
 * modified in place), or NULL: for a line that is no decision (no reason
 * note: Squid's own request for an error page inside a bumped CONNECT;
 * or a spliced CONNECT whose tunnel is logged as a line of its own), and
 * for a malformed one (*malformed set to 1). A new reference.
 */
json_t *accesslog_record(char *line, size_t len, int *malformed);

/*
 * The daemon: read commands from in until its end, write a record per
 * decision to out, one write(2) a line. 0 at the end of in; -1 when out
 * cannot be written or in not read (errno set).
 */
int accesslog_run(int in, int out);

#endif
