/*
 * serve.h - the records a session's step server answers with
 * (images/runner/warm.c's header, `warm --serve`), read by the node agent
 * (serve.c). The stream is the sandbox's: a tenant's program can write
 * into it, so nothing in it is trusted but its shape, and nothing of it
 * is kept past a line of SERVE_RX_LINE bytes.
 */
#ifndef AIRLOCK_SERVE_H
#define AIRLOCK_SERVE_H

#include <stddef.h>

#define SERVE_RX_LINE	64		/* a record's line, its newline included */
#define SERVE_RX_MAX	(1L << 20)	/* an O or E record's bytes; warm sends 64 KiB */

struct serve_rx {
	char			 line[SERVE_RX_LINE];
	size_t			 llen;
	int			 stream;	/* 1 or 2 while in an O or E's bytes */
	size_t			 left;		/* of them */
	int			 ended;		/* an X was read */
	unsigned long long	 seq;		/* the X's */
	unsigned		 status;
	char			 err[96];	/* why the stream is not records */
};

/*
 * Take n bytes of the stream. The bytes of O (stream 1) and E (2) records
 * go to out as they come, in pieces. Returns how many bytes were taken:
 * all of them, or fewer when an X ended the step (what follows it is not
 * this step's: the caller decides), or -1 when the stream is not records
 * (rx->err says why; nothing more is taken).
 */
long serve_rx_feed(struct serve_rx *rx, const char *p, size_t n,
    void (*out)(void *arg, int stream, const char *p, size_t n), void *arg);

#endif
