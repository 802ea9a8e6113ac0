/*
 * watch.h - Kubernetes watch streams: decode, resume, relist, reconnect.
 *
 * Two layers. The decoder turns the bytes of a watch response, however the
 * network chunks them, into events: it buffers up to a newline in a capped
 * buffer (an oversized line is K8S_ETOOBIG, never a crash) and needs no
 * network, so it is tested by splitting streams at every byte.
 *
 * The watch drives one resource's watch for as long as it runs: it resumes
 * from the last resourceVersion it saw (objects and BOOKMARKs), asks its
 * owner to relist when there is none or when the server says 410 Gone
 * (an HTTP 410 or an in-band ERROR event with code 410), and reconnects
 * after failures with jittered exponential backoff. See
 * operator/docs/watch.md.
 */
#ifndef AIRLOCK_WATCH_H
#define AIRLOCK_WATCH_H

#include <stddef.h>
#include <jansson.h>

#include "buf.h"
#include "client.h"
#include "k8s_error.h"

enum watch_event_type {
	WATCH_ADDED,
	WATCH_MODIFIED,
	WATCH_DELETED,
	WATCH_BOOKMARK,
	WATCH_ERROR,
};

struct watch_event {
	enum watch_event_type	 type;
	json_t			*object;	/* borrowed, valid during the callback */
};

/* Return 0 to go on; anything else stops the decoder (or watch) with it. */
typedef int (*watch_event_fn)(void *arg, const struct watch_event *ev);

struct watch_decoder {
	struct buf	line;		/* the incomplete line so far */
};

/* max_line: the longest event line accepted, in bytes. */
void watch_decoder_init(struct watch_decoder *d, size_t max_line);
/* Drop any partial line (a new connection starts clean). */
void watch_decoder_reset(struct watch_decoder *d);
void watch_decoder_free(struct watch_decoder *d);

/*
 * Feed the next len bytes; fn is called for each complete event, in order.
 * Blank lines are skipped. Returns 0; K8S_ETOOBIG for a line longer than
 * max_line; K8S_EINVAL for a line that is not a watch event (bad JSON, no
 * type or object, unknown type); or the first non-zero value fn returned.
 * After an error the stream is unusable: reset before feeding a new one.
 */
int watch_decoder_feed(struct watch_decoder *d, const char *data, size_t len,
    watch_event_fn fn, void *arg, struct k8s_error *err)
    __attribute__((warn_unused_result));

struct watch_opts {
	const struct k8s_resource *res;
	const char	*ns;			/* NULL: all namespaces */
	const char	*label_selector;
	const char	*field_selector;
	size_t		 max_line;		/* default 16 MiB */
	long		 timeout_seconds;	/* per connection; default random 300..599 */
	long		 backoff_initial_ms;	/* default 500 */
	long		 backoff_max_ms;	/* default 30000 */
	long		 tick_ms;		/* on_tick period; 0: none */
};

struct watch_handlers {
	/*
	 * List afresh and return the list's resourceVersion in *rv (malloc'd).
	 * Called when the watch has no resourceVersion to resume from: at
	 * start and after 410 Gone. A failure is retried with backoff.
	 */
	int	(*relist)(void *arg, char **rv, struct k8s_error *err);
	/* ADDED, MODIFIED and DELETED events, in order. Non-zero stops. */
	watch_event_fn on_event;
	/* Every tick_ms while running (e.g. resync), from the same thread. */
	void	(*on_tick)(void *arg);
	void	*arg;
};

struct watch;

/* opts and handlers are copied; the strings they point to are borrowed. */
struct watch *watch_new(struct k8s_client *c, const struct watch_opts *opts,
    const struct watch_handlers *h);

/*
 * Watch until watch_stop(): blocks in the calling thread, which is the one
 * every handler runs in. Resumes from rv when non-NULL, else relists first.
 * Returns K8S_ECANCELED after watch_stop(), or the non-zero value on_event
 * returned, unchanged (the event it refused is not resumed past).
 */
int watch_run(struct watch *w, const char *rv);

/* Make watch_run return promptly. Any thread; idempotent. */
void watch_stop(struct watch *w);

/* The last resourceVersion seen, or NULL. Caller frees. Any thread. */
char *watch_resource_version(struct watch *w);

/* Counters for tests and metrics. Any thread. */
struct watch_stats {
	unsigned long	connects;	/* watch requests made */
	unsigned long	relists;	/* relist calls that succeeded */
	unsigned long	expired;	/* 410s seen */
	unsigned long	bookmarks;
};
void watch_get_stats(struct watch *w, struct watch_stats *out);

/*
 * After watch_run has returned and any watch_stop() call has returned: the
 * owner of a watch run in another thread stops it, joins that thread, then
 * frees. NULL is fine.
 */
void watch_free(struct watch *w);

#endif
