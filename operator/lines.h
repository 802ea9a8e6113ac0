/*
 * lines.h - a stream cut into lines of at most a cap, and each answer
 * written whole: the framing Squid's helpers speak (proxy/: requests to
 * the ACL helper, records to the log daemon), and a followed container
 * log (linestream.h).
 *
 * A line past the cap is handed on once, cut, marked too long, and the
 * rest of it up to its newline is dropped, so that a hostile or broken
 * peer costs at most the cap in memory.
 */
#ifndef AIRLOCK_LINES_H
#define AIRLOCK_LINES_H

#include <stddef.h>

/*
 * Called for each line: line (len bytes, no newline, with room for a NUL
 * at line[len]) is the caller's to modify until it returns. too_long: the
 * line was past the cap, and line holds its first cap bytes. A non-zero
 * return stops lines_feed() with it.
 */
typedef int (*lines_fn)(void *arg, char *line, size_t len, int too_long);

/* Invariant: len <= max; buf[0..len) is the line so far. */
struct lines {
	char	*buf;		/* max + 1 bytes */
	size_t	 len, max;
	int	 dropping;	/* inside a too-long line's rest */
};

void lines_init(struct lines *l, size_t max);
void lines_free(struct lines *l);
/* Forget a partial line: the next byte fed starts a new one. */
void lines_reset(struct lines *l);

/* Feed n bytes; fn for each complete line, in order. 0 or fn's value. */
int lines_feed(struct lines *l, const char *data, size_t n, lines_fn fn,
    void *arg) __attribute__((warn_unused_result));

/*
 * Write n bytes to fd, retrying on EINTR and after a partial write: one
 * write(2) for anything a pipe or socket takes whole, so a reader sees
 * each line at once. 0, or -1 with errno set (EPIPE: the reader is gone).
 */
int lines_write(int fd, const char *p, size_t n)
    __attribute__((warn_unused_result));

#endif
