/*
 * log.h - leveled key=value logging to stderr.
 *
 * One line per call, written with a single fwrite under the stream lock, so
 * lines from several threads never interleave:
 *
 *   time=2026-11-23T01:02:03.123Z level=info msg="lease acquired" lease=a/b
 *
 * msg is quoted and escaped here; the key=value part is the caller's printf
 * format, and values that may hold spaces or quotes must be passed through
 * log_quote(). Tenant code, stdout/stderr and secrets never go into info
 * level or above (see README's security notes); debug is for developers.
 *
 * Thread-safe.
 */
#ifndef AIRLOCK_LOG_H
#define AIRLOCK_LOG_H

#include <stdio.h>

enum log_level {
	LOG_LEVEL_DEBUG,
	LOG_LEVEL_INFO,
	LOG_LEVEL_WARN,
	LOG_LEVEL_ERROR,
};

void log_set_level(enum log_level level);
enum log_level log_get_level(void);

/* Parse "debug", "info", "warn" or "error". 0, or -1 if unknown. */
int log_parse_level(const char *s, enum log_level *out)
    __attribute__((warn_unused_result));

/* Send log lines to f instead of stderr (tests); NULL restores stderr. */
void log_set_stream(FILE *f);

void log_write(enum log_level level, const char *msg, const char *kvfmt, ...)
    __attribute__((format(printf, 3, 4)));

/*
 * Quote s for a key=value line ("..." with \" \\ \n escaped, control bytes
 * as \xNN, at most 256 bytes of s) into out, which must hold 1100 bytes.
 * Returns out, so it can be passed straight to a %s.
 */
#define LOG_QUOTE_MAX 1100
const char *log_quote(char out[LOG_QUOTE_MAX], const char *s);

/* log_info("msg") or log_info("msg", "k=%s n=%d", v, n). */
#define log_debug(msg, ...) log_write(LOG_LEVEL_DEBUG, msg, "" __VA_ARGS__)
#define log_info(msg, ...)  log_write(LOG_LEVEL_INFO,  msg, "" __VA_ARGS__)
#define log_warn(msg, ...)  log_write(LOG_LEVEL_WARN,  msg, "" __VA_ARGS__)
#define log_error(msg, ...) log_write(LOG_LEVEL_ERROR, msg, "" __VA_ARGS__)

#endif
