/*
 * informer.h - list+watch one resource into an in-memory cache.
 *
 * The informer lists the resource (paginated), then watches it from the
 * list's resourceVersion, keeping a cache of every object by
 * "namespace/name" ("name" for cluster-scoped ones). Handlers hear of each
 * add, update and delete, in order, from the informer's own thread, and
 * never with the cache lock held, so they may call informer_get().
 *
 * After a 410 Gone the informer relists and compares: an object that
 * vanished while the watch was down is reported to on_delete with
 * final_state_unknown set, and the object is the last state the cache had
 * (client-go's DeletedFinalStateUnknown). With resync_ms set, every object
 * is re-announced through on_update(old == new) that often.
 *
 * Objects handed out (handlers, informer_get) are shared with the cache:
 * treat them as read-only. Thread-safe.
 */
#ifndef AIRLOCK_INFORMER_H
#define AIRLOCK_INFORMER_H

#include <jansson.h>

#include "client.h"
#include "watch.h"

struct informer_handlers {
	/* obj, old and cur are borrowed for the call. */
	void	(*on_add)(void *arg, json_t *obj);
	void	(*on_update)(void *arg, json_t *old, json_t *cur);
	void	(*on_delete)(void *arg, json_t *obj, int final_state_unknown);
	void	*arg;
};

struct informer_opts {
	const struct k8s_resource *res;
	const char	*ns;		/* NULL: all namespaces */
	const char	*label_selector;
	const char	*field_selector;
	long		 page_size;	/* list page; default 500 */
	/*
	 * A list page's most bytes (0: the client's response cap): a page
	 * past it is asked for again, half as long. The relist of a cache
	 * of large objects holds no more than this as text at once.
	 */
	size_t		 page_bytes;
	long		 resync_ms;	/* 0: no resync */
	/*
	 * Optional: make what is cached (and handed to handlers) from an
	 * object as the server sent it: typically a copy trimmed to the
	 * fields the owner reads, so a large cache stays small. Returns a new
	 * reference; obj is borrowed. Runs on the informer's thread.
	 */
	json_t		*(*transform)(json_t *obj);
	/*
	 * Keep each cached object as its compact JSON text rather than a
	 * tree: several times smaller (a jansson node costs tens of bytes),
	 * at the price of a parse per informer_get/informer_list and per
	 * handler call. Objects handed out are then private copies.
	 */
	int		 packed;
	/*
	 * Optional: one index value for an object as cached (a new string,
	 * or NULL for none), for informer_by_index(). Runs on the
	 * informer's thread. It must depend on the cached object alone: the
	 * value an object was filed under is worked out again from it when
	 * it changes or goes, not stored.
	 */
	char		*(*index)(json_t *obj);
	/* Passed to the watch (see watch.h); 0 = its defaults. */
	long		 watch_timeout_seconds;
	long		 backoff_initial_ms;
	long		 backoff_max_ms;
};

struct informer;

/* opts and h are copied; their strings are borrowed for the informer's life. */
struct informer *informer_new(struct k8s_client *c,
    const struct informer_opts *opts, const struct informer_handlers *h);

/*
 * Start the informer's thread. A stopped informer may be started again:
 * it resumes its watch from the last resourceVersion it saw, keeping its
 * cache, and relists only if that version has expired.
 * 0, or K8S_EINVAL if it is already running.
 */
int informer_start(struct informer *inf) __attribute__((warn_unused_result));

/*
 * Stop and join the thread; the cache stays. Idempotent, and safe to call
 * from several threads at once: one joins, the others wait for it.
 */
void informer_stop(struct informer *inf);

/*
 * Wait until the first list is in the cache and the handlers have heard of
 * each of its objects (on_add returned): 0 or K8S_ETIMEDOUT.
 */
int informer_wait_synced(struct informer *inf, long timeout_ms)
    __attribute__((warn_unused_result));

/* A new reference to the cached object, or NULL. ns NULL for cluster-scoped. */
json_t *informer_get(struct informer *inf, const char *ns, const char *name);

/* A new array holding (references to) every cached object. */
json_t *informer_list(struct informer *inf);

size_t informer_len(struct informer *inf);

/*
 * A packed cache written to since its list (watch events) has its values
 * scattered among the pages the events were decoded in, each pinning its
 * page once those are freed. Free every value (with its key and index
 * entry), then copy them back one after another, so that the pages they
 * leave are wholly free (for malloc_trim). The copies are made by the
 * calling thread, in its malloc arena. Only once at least
 * INFORMER_COMPACT_MIN writes, and an eighth of the cache, came since the
 * list or the last compaction: 1 if it did, else 0. Holds the lock for
 * about a microsecond an object.
 */
#define INFORMER_COMPACT_MIN	64
int informer_compact(struct informer *inf);

/* A new array of the cache's keys ("namespace/name", or "name"). */
json_t *informer_keys(struct informer *inf);

/* A new array of the cached objects whose index value is value. */
json_t *informer_by_index(struct informer *inf, const char *value);

/* The watch's counters (connects, relists, 410s, bookmarks). */
void informer_get_stats(struct informer *inf, struct watch_stats *out);

/* Stops it if running, then frees. NULL is fine. */
void informer_free(struct informer *inf);

#endif
