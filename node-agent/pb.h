/*
 * pb.h - the protocol buffers wire format, as much as the node agent's
 * containerd client needs: varints, length-delimited fields, and a reader
 * that walks a message field by field without trusting it.
 *
 * No schema, no generated code: each caller encodes its few request
 * messages with pb_put_*() and picks the fields it wants out of a reply
 * with pb_next(). Fields it does not know are skipped, as protobuf
 * requires; malformed input (a varint past 10 bytes, a length past the
 * end, a group or an unknown wire type) stops the walk with PB_EBAD and
 * never reads outside the buffer.
 */
#ifndef AIRLOCK_PB_H
#define AIRLOCK_PB_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"

#define PB_EBAD		(-1)	/* malformed message */

enum pb_wire {
	PB_VARINT = 0,
	PB_I64 = 1,
	PB_LEN = 2,
	PB_I32 = 5,
};

/* Appenders: 0, or BUF_ETOOBIG when b's cap is reached. */
int pb_put_varint(struct buf *b, uint64_t v)
    __attribute__((warn_unused_result));
int pb_put_uint(struct buf *b, int field, uint64_t v)
    __attribute__((warn_unused_result));
int pb_put_bytes(struct buf *b, int field, const void *p, size_t n)
    __attribute__((warn_unused_result));
int pb_put_str(struct buf *b, int field, const char *s)
    __attribute__((warn_unused_result));

/* A walk over one message; p..end is borrowed for the walk's life. */
struct pb_reader {
	const uint8_t	*p, *end;
};

/* One field as pb_next() found it. */
struct pb_field {
	int		 num;		/* field number, >= 1 */
	enum pb_wire	 wire;
	uint64_t	 u;		/* PB_VARINT, PB_I64, PB_I32 */
	const uint8_t	*data;		/* PB_LEN: points into the message */
	size_t		 len;
};

void pb_reader_init(struct pb_reader *r, const void *p, size_t n);

/* The next field: 1, 0 at the end of the message, or PB_EBAD. */
int pb_next(struct pb_reader *r, struct pb_field *f)
    __attribute__((warn_unused_result));

/*
 * A length-delimited field as a new NUL-terminated string (caller frees),
 * or NULL if it holds a NUL byte or is not PB_LEN.
 */
char *pb_strdup(const struct pb_field *f);

#endif
