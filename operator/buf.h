/*
 * buf.h - a growable byte buffer with a hard size cap.
 *
 * Everything whose size comes from the network (a response body, a watch
 * line, a log line) is collected in a struct buf, never in an open-ended
 * realloc loop: when appending would make len exceed max, the append fails
 * with BUF_ETOOBIG and the buffer is left as it was (curl's dynbuf "toobig").
 *
 * Invariants: data is NULL or points to alloc bytes; len < alloc when data is
 * non-NULL, and data[len] == '\0', so the contents can be used as a C string
 * when they hold no NUL. len <= max always.
 */
#ifndef AIRLOCK_BUF_H
#define AIRLOCK_BUF_H

#include <stddef.h>

#define BUF_ETOOBIG (-1)
#define BUF_EIO     (-2)	/* errno says why */

struct buf {
	char	*data;
	size_t	 len;
	size_t	 alloc;
	size_t	 max;
};

/* Initialise an empty buffer that will hold at most max bytes. */
void buf_init(struct buf *b, size_t max);

/* Append n bytes. 0, or BUF_ETOOBIG (buffer unchanged) past the cap. */
int buf_append(struct buf *b, const void *p, size_t n)
    __attribute__((warn_unused_result));
int buf_append_str(struct buf *b, const char *s)
    __attribute__((warn_unused_result));

/* Drop the first n bytes (n <= len), keeping the rest. */
void buf_consume(struct buf *b, size_t n);

/* Empty the buffer, keeping its memory and cap. */
void buf_reset(struct buf *b);

/* Free the memory; the buffer is empty and reusable with the same cap. */
void buf_free(struct buf *b);

/*
 * Append the contents of the file at path, failing fast when fstat()
 * already shows it past the cap. If st is non-NULL it receives the
 * fstat() of the file that was read. 0; BUF_ETOOBIG past the cap (the
 * buffer may hold a part); BUF_EIO with errno set otherwise.
 */
struct stat;
int buf_read_file(struct buf *b, const char *path, struct stat *st)
    __attribute__((warn_unused_result));

/*
 * Hand the contents to the caller, who frees them with free(); never NULL
 * (an empty buffer yields ""). The buffer is left empty.
 */
char *buf_detach(struct buf *b, size_t *lenp);

#endif
