#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "informer.h"
#include "log.h"
#include "xmalloc.h"

struct informer {
	struct k8s_client	*client;
	struct informer_opts	 opts;
	struct informer_handlers h;

	pthread_mutex_t		 lock;	/* guards everything below */
	pthread_cond_t		 cond;	/* signalled when synced */
	json_t			*cache;	/* key -> object */
	int			 synced;
	int			 running;
	int			 stopping;	/* one informer_stop() owns the join */
	char			*last_rv;	/* where a restart resumes */
	struct watch		*watch;
	struct watch_stats	 stats;		/* of watches already freed */
	pthread_t		 thread;
};

/* A pending handler call, made after the lock is dropped. */
struct note {
	enum { N_ADD, N_UPDATE, N_DELETE, N_DELETE_UNKNOWN } kind;
	json_t	*old, *cur;	/* owned references */
};

static char *
obj_key(json_t *obj)
{
	const char *ns = k8s_obj_namespace(obj), *name = k8s_obj_name(obj);

	if (name == NULL)
		return NULL;
	return (ns && ns[0]) ? xasprintf("%s/%s", ns, name) : xstrdup(name);
}

static void
notify(struct informer *inf, struct note *n)
{
	switch (n->kind) {
	case N_ADD:
		if (inf->h.on_add)
			inf->h.on_add(inf->h.arg, n->cur);
		break;
	case N_UPDATE:
		if (inf->h.on_update)
			inf->h.on_update(inf->h.arg, n->old, n->cur);
		break;
	case N_DELETE:
	case N_DELETE_UNKNOWN:
		if (inf->h.on_delete)
			inf->h.on_delete(inf->h.arg, n->old,
			    n->kind == N_DELETE_UNKNOWN);
		break;
	}
	json_decref(n->old);
	json_decref(n->cur);
}

/* What the cache keeps of obj: a new reference. */
static json_t *
keep(struct informer *inf, json_t *obj)
{
	return inf->opts.transform ? inf->opts.transform(obj) : json_incref(obj);
}

/* The watch's relist: replace the cache, announcing every difference. */
static int
relist(void *arg, char **rv, struct k8s_error *err)
{
	struct informer *inf = arg;
	struct k8s_list_opts lo = {
		.label_selector = inf->opts.label_selector,
		.field_selector = inf->opts.field_selector,
		.limit = inf->opts.page_size,
	};
	json_t *items, *fresh, *obj, *old;
	struct note *notes;
	const char *key;
	size_t i, nn = 0;
	void *tmp;
	int rc;

	rc = k8s_list_all(inf->client, inf->opts.res, inf->opts.ns, &lo,
	    &items, rv, err);
	if (rc != 0)
		return rc;
	fresh = json_object();
	json_array_foreach(items, i, obj) {
		char *k = obj_key(obj);

		if (k) {
			json_object_set_new(fresh, k, keep(inf, obj));
			free(k);
		}
	}
	json_decref(items);

	pthread_mutex_lock(&inf->lock);
	notes = xcalloc(json_object_size(fresh) +
	    json_object_size(inf->cache) + 1, sizeof(*notes));
	json_object_foreach(fresh, key, obj) {
		old = json_object_get(inf->cache, key);
		if (old == NULL) {
			notes[nn++] = (struct note){ N_ADD, NULL,
			    json_incref(obj) };
		} else {
			const char *a = k8s_obj_rv(old), *b = k8s_obj_rv(obj);

			if (a == NULL || b == NULL || strcmp(a, b) != 0)
				notes[nn++] = (struct note){ N_UPDATE,
				    json_incref(old), json_incref(obj) };
		}
	}
	json_object_foreach_safe(inf->cache, tmp, key, old) {
		if (json_object_get(fresh, key) == NULL)
			notes[nn++] = (struct note){ N_DELETE_UNKNOWN,
			    json_incref(old), NULL };
	}
	json_decref(inf->cache);
	inf->cache = fresh;
	inf->synced = 1;
	pthread_cond_broadcast(&inf->cond);
	pthread_mutex_unlock(&inf->lock);

	for (i = 0; i < nn; i++)
		notify(inf, &notes[i]);
	free(notes);
	return 0;
}

static int
on_event(void *arg, const struct watch_event *ev)
{
	struct informer *inf = arg;
	struct note n = { N_ADD, NULL, NULL };
	char *key = obj_key(ev->object);
	json_t *old, *obj;

	if (key == NULL) {
		log_warn("watch event object has no name", "resource=%s",
		    inf->opts.res->plural);
		return 0;
	}
	pthread_mutex_lock(&inf->lock);
	old = json_object_get(inf->cache, key);
	if (ev->type == WATCH_DELETED) {
		if (old) {
			/* Report the final state the server sent. */
			n = (struct note){ N_DELETE, keep(inf, ev->object),
			    NULL };
			json_object_del(inf->cache, key);
		} else {
			n.kind = -1;
		}
	} else {
		obj = keep(inf, ev->object);
		if (old)
			n = (struct note){ N_UPDATE, json_incref(old),
			    json_incref(obj) };
		else
			n = (struct note){ N_ADD, NULL, json_incref(obj) };
		json_object_set_new(inf->cache, key, obj);
	}
	pthread_mutex_unlock(&inf->lock);
	free(key);
	if ((int)n.kind >= 0)
		notify(inf, &n);
	return 0;
}

static void
on_tick(void *arg)
{
	struct informer *inf = arg;
	json_t *all = informer_list(inf), *obj;
	size_t i;

	if (inf->h.on_update)
		json_array_foreach(all, i, obj)
			inf->h.on_update(inf->h.arg, obj, obj);
	json_decref(all);
}

static void *
informer_main(void *arg)
{
	struct informer *inf = arg;
	struct watch *w;
	char *rv;

	pthread_mutex_lock(&inf->lock);
	w = inf->watch;
	rv = inf->last_rv ? xstrdup(inf->last_rv) : NULL;
	pthread_mutex_unlock(&inf->lock);
	watch_run(w, rv);
	free(rv);
	return NULL;
}

struct informer *
informer_new(struct k8s_client *c, const struct informer_opts *opts,
    const struct informer_handlers *h)
{
	struct informer *inf = xcalloc(1, sizeof(*inf));

	inf->client = c;
	inf->opts = *opts;
	inf->h = *h;
	if (inf->opts.page_size <= 0)
		inf->opts.page_size = 500;
	inf->cache = json_object();
	pthread_mutex_init(&inf->lock, NULL);
	clock_cond_init(&inf->cond);
	return inf;
}

int
informer_start(struct informer *inf)
{
	struct watch_opts wo = {
		.res = inf->opts.res,
		.ns = inf->opts.ns,
		.label_selector = inf->opts.label_selector,
		.field_selector = inf->opts.field_selector,
		.timeout_seconds = inf->opts.watch_timeout_seconds,
		.backoff_initial_ms = inf->opts.backoff_initial_ms,
		.backoff_max_ms = inf->opts.backoff_max_ms,
		.tick_ms = inf->opts.resync_ms,
	};
	struct watch_handlers wh = {
		.relist = relist,
		.on_event = on_event,
		.on_tick = inf->opts.resync_ms > 0 ? on_tick : NULL,
		.arg = inf,
	};

	pthread_mutex_lock(&inf->lock);
	if (inf->running || inf->stopping) {
		pthread_mutex_unlock(&inf->lock);
		return K8S_EINVAL;
	}
	inf->watch = watch_new(inf->client, &wo, &wh);
	inf->running = 1;
	pthread_mutex_unlock(&inf->lock);
	if (pthread_create(&inf->thread, NULL, informer_main, inf) != 0) {
		log_error("cannot start informer thread", "resource=%s",
		    inf->opts.res->plural);
		abort();
	}
	return 0;
}

void
informer_stop(struct informer *inf)
{
	struct watch_stats ws;

	pthread_mutex_lock(&inf->lock);
	if (inf->stopping) {
		/* Another thread is joining: wait for it to finish. */
		while (inf->running)
			pthread_cond_wait(&inf->cond, &inf->lock);
		pthread_mutex_unlock(&inf->lock);
		return;
	}
	if (!inf->running) {
		pthread_mutex_unlock(&inf->lock);
		return;
	}
	inf->stopping = 1;
	pthread_mutex_unlock(&inf->lock);
	watch_stop(inf->watch);
	pthread_join(inf->thread, NULL);

	pthread_mutex_lock(&inf->lock);
	free(inf->last_rv);
	inf->last_rv = watch_resource_version(inf->watch);
	watch_get_stats(inf->watch, &ws);
	inf->stats.connects += ws.connects;
	inf->stats.relists += ws.relists;
	inf->stats.expired += ws.expired;
	inf->stats.bookmarks += ws.bookmarks;
	watch_free(inf->watch);
	inf->watch = NULL;
	inf->running = 0;
	inf->stopping = 0;
	pthread_cond_broadcast(&inf->cond);
	pthread_mutex_unlock(&inf->lock);
}

int
informer_wait_synced(struct informer *inf, long timeout_ms)
{
	struct timespec until;
	int rc = 0;

	clock_mono_ts(&until, clock_mono_ms() + timeout_ms);
	pthread_mutex_lock(&inf->lock);
	while (!inf->synced && rc != ETIMEDOUT)
		rc = pthread_cond_timedwait(&inf->cond, &inf->lock, &until);
	rc = inf->synced ? 0 : K8S_ETIMEDOUT;
	pthread_mutex_unlock(&inf->lock);
	return rc;
}

json_t *
informer_get(struct informer *inf, const char *ns, const char *name)
{
	char *key = (ns && ns[0]) ? xasprintf("%s/%s", ns, name) :
	    xstrdup(name);
	json_t *obj;

	pthread_mutex_lock(&inf->lock);
	obj = json_incref(json_object_get(inf->cache, key));
	pthread_mutex_unlock(&inf->lock);
	free(key);
	return obj;
}

json_t *
informer_list(struct informer *inf)
{
	json_t *all = json_array(), *obj;
	const char *key;

	pthread_mutex_lock(&inf->lock);
	json_object_foreach(inf->cache, key, obj)
		json_array_append(all, obj);
	pthread_mutex_unlock(&inf->lock);
	return all;
}

size_t
informer_len(struct informer *inf)
{
	size_t n;

	pthread_mutex_lock(&inf->lock);
	n = json_object_size(inf->cache);
	pthread_mutex_unlock(&inf->lock);
	return n;
}

void
informer_get_stats(struct informer *inf, struct watch_stats *out)
{
	struct watch_stats ws = { 0 };

	pthread_mutex_lock(&inf->lock);
	*out = inf->stats;
	if (inf->watch)
		watch_get_stats(inf->watch, &ws);
	pthread_mutex_unlock(&inf->lock);
	out->connects += ws.connects;
	out->relists += ws.relists;
	out->expired += ws.expired;
	out->bookmarks += ws.bookmarks;
}

void
informer_free(struct informer *inf)
{
	if (inf == NULL)
		return;
	informer_stop(inf);
	json_decref(inf->cache);
	free(inf->last_rv);
	pthread_mutex_destroy(&inf->lock);
	pthread_cond_destroy(&inf->cond);
	free(inf);
}
