/*
 * linestream.h - a long GET whose answer is text lines, handed on a line
 * at a time as they arrive: a container's log followed through the API
 * (GET /api/v1/namespaces/NS/pods/NAME/log?follow=true), which stays open
 * for as long as the container runs.
 *
 * Lines go through the capped splitter of lines.h: one longer than
 * max_line is handed on once, cut and marked too long, and its rest
 * dropped, so the stream costs at most max_line in memory whatever the
 * peer sends. A partial line at the answer's end is dropped, never handed
 * on: a caller that resumes (a log's sinceTime) reads it again whole.
 *
 * One request at a time per struct linestream; linestream_stop() from any
 * thread ends the one under way and every later one at once.
 */
#ifndef AIRLOCK_LINESTREAM_H
#define AIRLOCK_LINESTREAM_H

#include <stddef.h>

#include "client.h"
#include "k8s_error.h"
#include "lines.h"

struct linestream_handlers {
	/*
	 * A 2xx answer's headers are in: the stream is open (may be NULL).
	 * Called once per request, before its first line.
	 */
	void	(*on_open)(void *arg);
	/*
	 * Each complete line of a 2xx answer (lines.h's lines_fn: line is
	 * the callee's to modify until it returns). Non-zero stops the
	 * request, and linestream_get returns it.
	 */
	lines_fn on_line;
	void	*arg;
};

struct linestream;

/* c is borrowed and must outlive the stream. */
struct linestream *linestream_new(struct k8s_client *c, size_t max_line);

/*
 * GET path (absolute, with its query) and hand the answer's lines to h
 * until it ends. 0 when the server ended it; K8S_ECANCELED after
 * linestream_stop(); on_line's non-zero value; a non-2xx answer's code
 * (K8S_ENOTFOUND, K8S_EFORBIDDEN, K8S_EHTTP...) with the Status's message
 * in err; K8S_EIO when the transfer failed (err says how).
 */
int linestream_get(struct linestream *s, const char *path,
    const struct linestream_handlers *h, struct k8s_error *err)
    __attribute__((warn_unused_result));

/* End the request under way, and any later one, promptly. Any thread. */
void linestream_stop(struct linestream *s);

/*
 * After linestream_get returned and any linestream_stop() call returned.
 * NULL is fine.
 */
void linestream_free(struct linestream *s);

#endif
