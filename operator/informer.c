#include <errno.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "buf.h"
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
	/*
	 * index value -> its one key, or { key: null, ... } for several. An
	 * object's own value is not kept: it is worked out again from the
	 * cached object (ival_of), a parse where the cache is packed.
	 */
	json_t			*index;
	int			 synced;
	int			 running;
	int			 stopping;	/* one informer_stop() owns the join */
	char			*last_rv;	/* where a restart resumes */
	size_t			 writes;	/* cache writes since the last compaction */
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

static json_t *stored(json_t *v);

/*
 * Call the handler for n, whose old and cur are cache values: decoded
 * here, one note at a time, so a relist of thousands never holds them
 * all as trees at once.
 */
static void
notify(struct informer *inf, struct note *n)
{
	json_t *old = n->old ? stored(n->old) : NULL;
	json_t *cur = n->cur ? stored(n->cur) : NULL;

	switch (n->kind) {
	case N_ADD:
		if (inf->h.on_add && cur)
			inf->h.on_add(inf->h.arg, cur);
		break;
	case N_UPDATE:
		if (inf->h.on_update && old && cur)
			inf->h.on_update(inf->h.arg, old, cur);
		break;
	case N_DELETE:
	case N_DELETE_UNKNOWN:
		if (inf->h.on_delete && old)
			inf->h.on_delete(inf->h.arg, old,
			    n->kind == N_DELETE_UNKNOWN);
		break;
	}
	json_decref(old);
	json_decref(cur);
	json_decref(n->old);
	json_decref(n->cur);
}

/*
 * What the cache keeps of obj, as a tree (not packed; a new reference),
 * or as its compact text (packed: *text, caller frees, and NULL returned).
 * *ival gets the object's index value.
 */
static json_t *
keep_form(struct informer *inf, json_t *obj, char **ival, char **text,
    size_t *len)
{
	json_t *t = inf->opts.transform ? inf->opts.transform(obj) :
	    json_incref(obj);

	*text = NULL;
	if (ival)
		*ival = (inf->opts.index && t) ? inf->opts.index(t) : NULL;
	if (!inf->opts.packed || t == NULL)
		return t;
	*len = json_dumpb(t, NULL, 0, JSON_COMPACT);
	*text = xmalloc(*len + 1);
	if (*len == 0 || json_dumpb(t, *text, *len, JSON_COMPACT) != *len) {
		free(*text);
		*text = NULL;
		return t;	/* cannot happen for a server's object */
	}
	json_decref(t);
	return NULL;
}

/*
 * What the cache keeps of obj: a new reference. Packed, it is a JSON
 * string holding the object's text; stored() turns it back.
 */
static json_t *
keep(struct informer *inf, json_t *obj, char **ival)
{
	char *text;
	size_t len;
	json_t *t = keep_form(inf, obj, ival, &text, &len), *s;

	if (text == NULL)
		return t;
	s = json_stringn_nocheck(text, len);
	free(text);
	return s;
}

/* A new reference to the object a cache value holds. */
static json_t *
stored(json_t *v)
{
	json_error_t e;

	if (!json_is_string(v))
		return json_incref(v);
	return json_loadb(json_string_value(v), json_string_length(v),
	    JSON_ALLOW_NUL, &e);
}

/* The index value of a cache value (NULL: none); caller frees. */
static char *
ival_of(struct informer *inf, json_t *v)
{
	json_t *o;
	char *iv;

	if (inf->opts.index == NULL || v == NULL)
		return NULL;
	o = stored(v);
	iv = o ? inf->opts.index(o) : NULL;
	json_decref(o);
	return iv;
}

/* File key under value. */
static void
index_add(json_t *index, const char *key, const char *value)
{
	json_t *e = json_object_get(index, value), *set;

	if (e == NULL) {
		json_object_set_new(index, value, json_string(key));
	} else if (json_is_string(e)) {
		if (strcmp(json_string_value(e), key) == 0)
			return;
		set = json_object();
		json_object_set_new(set, json_string_value(e), json_null());
		json_object_set_new(set, key, json_null());
		json_object_set_new(index, value, set);
	} else {
		json_object_set_new(e, key, json_null());
	}
}

/* Take key out from under value. */
static void
index_del(json_t *index, const char *key, const char *value)
{
	json_t *e = json_object_get(index, value);

	if (json_is_string(e)) {
		if (strcmp(json_string_value(e), key) == 0)
			json_object_del(index, value);
	} else if (e) {
		json_object_del(e, key);
		if (json_object_size(e) == 0)
			json_object_del(index, value);
		else if (json_object_size(e) == 1)	/* one key: a string */
			json_object_set_new(index, value, json_string(
			    json_object_iter_key(json_object_iter(e))));
	}
}

/*
 * A relist fills a new cache page by page. Packed, the kept texts are
 * staged in one buffer and become the cache's strings only after the
 * last page is freed: made while a page's tree was alive, each would sit
 * between that tree's freed nodes and pin their pages (a 5000-object
 * list left the process megabytes larger for good).
 */
struct staged {
	size_t	 key, ival, text, len;	/* offsets in the stage; 0: none */
};

struct fill {
	struct informer	*inf;
	json_t		*fresh;
	json_t		*index;		/* the fresh cache's index */
	struct buf	 stage;		/* "\0" key "\0" ival "\0" text ... */
	struct staged	*st;
	size_t		 nst, capst;
};

static void
fill_reset(struct fill *f)
{
	json_object_clear(f->fresh);
	json_object_clear(f->index);
	buf_reset(&f->stage);
	f->nst = 0;
}

/* Append s with its NUL; its offset, or 0 if the stage is full. */
static size_t
stage_str(struct buf *b, const char *s, size_t n)
{
	size_t at = b->len;

	if (buf_append(b, s, n) != 0 || buf_append(b, "", 1) != 0)
		return 0;
	return at;
}

/*
 * One entry staged: key's text (none: key is only filed under iv) and its
 * index value iv (or none). 0, or K8S_ETOOBIG when the stage is full.
 */
static int
stage_entry(struct fill *f, const char *k, const char *iv, const char *text,
    size_t len)
{
	struct staged e = { 0, 0, 0, len };

	if (f->stage.len == 0 && stage_str(&f->stage, "", 0) != 0)
		abort();	/* offset 0 stays "none" */
	if ((e.key = stage_str(&f->stage, k, strlen(k))) == 0 ||
	    (iv && (e.ival = stage_str(&f->stage, iv, strlen(iv))) == 0) ||
	    (text && (e.text = stage_str(&f->stage, text, len)) == 0))
		return K8S_ETOOBIG;
	if (f->nst == f->capst) {
		f->capst = f->capst ? 2 * f->capst : 256;
		f->st = xrealloc(f->st, f->capst * sizeof(*f->st));
	}
	f->st[f->nst++] = e;
	return 0;
}

/* One listed object into the new cache, kept as the cache keeps it. */
static int
fill_one(void *arg, json_t *obj)
{
	struct fill *f = arg;
	char *k, *iv, *text;
	size_t len;
	json_t *t;

	if (obj == NULL) {		/* the list starts over */
		fill_reset(f);
		return 0;
	}
	if ((k = obj_key(obj)) == NULL)
		return 0;
	t = keep_form(f->inf, obj, &iv, &text, &len);
	if (text) {
		int rc = stage_entry(f, k, iv, text, len);

		free(text);
		if (rc != 0) {
			free(k);
			free(iv);
			return rc;
		}
	} else {
		json_object_set_new(f->fresh, k, t);
		if (iv)
			index_add(f->index, k, iv);
	}
	free(iv);
	free(k);
	return 0;
}

/* The staged texts into the new cache, now that every page is freed. */
static void
fill_unstage(struct fill *f)
{
	const char *base = f->stage.data;

	for (size_t i = 0; i < f->nst; i++) {
		const struct staged *e = &f->st[i];

		if (e->text)
			json_object_set_new(f->fresh, base + e->key,
			    json_stringn_nocheck(base + e->text, e->len));
		if (e->ival)
			index_add(f->index, base + e->key, base + e->ival);
	}
	buf_free(&f->stage);
	free(f->st);
	f->st = NULL;
	f->nst = f->capst = 0;
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
		.page_bytes = inf->opts.page_bytes,
	};
	struct fill f = { inf, json_object(), json_object(), { 0 }, NULL, 0,
	    0 };
	json_t *fresh = f.fresh, *obj, *old;
	struct note *notes;
	const char *key;
	size_t i, nn = 0;
	void *tmp;
	int rc;

	/* Page by page: only what the cache keeps outlives its page. */
	buf_init(&f.stage, (size_t)1 << 34);
	rc = k8s_list_each(inf->client, inf->opts.res, inf->opts.ns, &lo,
	    fill_one, &f, rv, err);
	if (rc != 0) {
		buf_free(&f.stage);
		free(f.st);
		json_decref(fresh);
		json_decref(f.index);
		return rc;
	}
	fill_unstage(&f);

	pthread_mutex_lock(&inf->lock);
	notes = xcalloc(json_object_size(fresh) +
	    json_object_size(inf->cache) + 1, sizeof(*notes));
	json_object_foreach(fresh, key, obj) {
		old = json_object_get(inf->cache, key);
		if (old == NULL) {
			notes[nn++] = (struct note){ N_ADD, NULL,
			    json_incref(obj) };
		} else if (!json_equal(old, obj)) {
			json_t *o = stored(old), *c = stored(obj);
			const char *a = k8s_obj_rv(o), *b = k8s_obj_rv(c);

			if (a == NULL || b == NULL || strcmp(a, b) != 0)
				notes[nn++] = (struct note){ N_UPDATE,
				    json_incref(old), json_incref(obj) };
			json_decref(o);
			json_decref(c);
		}
	}
	json_object_foreach_safe(inf->cache, tmp, key, old) {
		if (json_object_get(fresh, key) == NULL)
			notes[nn++] = (struct note){ N_DELETE_UNKNOWN,
			    json_incref(old), NULL };
	}
	json_decref(inf->cache);
	json_decref(inf->index);
	inf->cache = fresh;
	inf->index = f.index;
	inf->writes = 0;	/* made in one run: nothing to compact */
	pthread_mutex_unlock(&inf->lock);

	for (i = 0; i < nn; i++)
		notify(inf, &notes[i]);
	free(notes);
	/*
	 * Synced once the handlers have heard of every object listed, not
	 * before (as client-go's HasSynced): one who sees it synced (a
	 * controller taking an empty queue for its first pass done) finds
	 * each object's add handled.
	 */
	pthread_mutex_lock(&inf->lock);
	inf->synced = 1;
	pthread_cond_broadcast(&inf->cond);
	pthread_mutex_unlock(&inf->lock);
#if defined(__GLIBC__) && !defined(__SANITIZE_ADDRESS__)
	/*
	 * The pages were parsed into trees many times the size of what was
	 * kept, between the kept values: give the freed pages back, or a
	 * large list leaves the process that much bigger for good. (Not
	 * under ASan: its allocator is not glibc's, and a trim racing a
	 * thread's exit there trips glibc's arena accounting.)
	 */
	malloc_trim(0);
#endif
	return 0;
}

static int
on_event(void *arg, const struct watch_event *ev)
{
	struct informer *inf = arg;
	struct note n = { N_ADD, NULL, NULL };
	char *key = obj_key(ev->object), *was;
	json_t *old, *obj;

	if (key == NULL) {
		log_warn("watch event object has no name", "resource=%s",
		    inf->opts.res->plural);
		return 0;
	}
	pthread_mutex_lock(&inf->lock);
	old = json_object_get(inf->cache, key);
	was = ival_of(inf, old);
	if (ev->type == WATCH_DELETED) {
		if (old) {
			/* Report the final state the server sent. */
			n = (struct note){ N_DELETE, keep(inf, ev->object,
			    NULL), NULL };
			if (was)
				index_del(inf->index, key, was);
			json_object_del(inf->cache, key);
			inf->writes++;
		} else {
			n.kind = -1;
		}
	} else {
		char *iv;

		obj = keep(inf, ev->object, &iv);
		if (was && (iv == NULL || strcmp(was, iv) != 0))
			index_del(inf->index, key, was);
		if (iv)
			index_add(inf->index, key, iv);
		free(iv);
		if (old)
			n = (struct note){ N_UPDATE, json_incref(old),
			    json_incref(obj) };
		else
			n = (struct note){ N_ADD, NULL, json_incref(obj) };
		json_object_set_new(inf->cache, key, obj);
		inf->writes++;
	}
	pthread_mutex_unlock(&inf->lock);
	free(was);
	free(key);
	if ((int)n.kind >= 0)
		notify(inf, &n);
	return 0;
}

static void
on_tick(void *arg)
{
	struct informer *inf = arg;
	json_t *all = json_array(), *v, *obj;
	const char *key;
	size_t i;

	if (inf->h.on_update == NULL)
		goto out;
	/* Cache values; each decoded only for its own call. */
	pthread_mutex_lock(&inf->lock);
	json_object_foreach(inf->cache, key, v)
		json_array_append(all, v);
	pthread_mutex_unlock(&inf->lock);
	json_array_foreach(all, i, v) {
		if ((obj = stored(v)) != NULL)
			inf->h.on_update(inf->h.arg, obj, obj);
		json_decref(obj);
	}
out:
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
	inf->index = json_object();
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
	if (obj && inf->opts.packed) {
		json_t *v = obj;

		obj = stored(v);
		json_decref(v);
	}
	free(key);
	return obj;
}

/* The cache's objects, or with keys set its keys, as a new array. */
static json_t *
snapshot(struct informer *inf, int keys)
{
	json_t *all = json_array(), *obj;
	const char *key;
	size_t i;

	pthread_mutex_lock(&inf->lock);
	json_object_foreach(inf->cache, key, obj)
		json_array_append_new(all, keys ? json_string(key) :
		    json_incref(obj));
	pthread_mutex_unlock(&inf->lock);
	/* Parsed outside the lock: the watch need not wait for it. */
	if (!keys && inf->opts.packed)
		json_array_foreach(all, i, obj)
			json_array_set_new(all, i, stored(obj));
	return all;
}

json_t *
informer_list(struct informer *inf)
{
	return snapshot(inf, 0);
}

json_t *
informer_keys(struct informer *inf)
{
	return snapshot(inf, 1);
}

json_t *
informer_by_index(struct informer *inf, const char *value)
{
	json_t *all = json_array(), *e, *v;
	const char *key;
	size_t i;

	pthread_mutex_lock(&inf->lock);
	e = json_object_get(inf->index, value);
	if (json_is_string(e))
		json_array_append(all, json_object_get(inf->cache,
		    json_string_value(e)));
	else
		json_object_foreach(e, key, v)
			json_array_append(all, json_object_get(inf->cache, key));
	pthread_mutex_unlock(&inf->lock);
	json_array_foreach(all, i, v)
		json_array_set_new(all, i, stored(v));
	return all;
}

int
informer_compact(struct informer *inf)
{
	struct fill f = { inf, NULL, NULL, { 0 }, NULL, 0, 0 };
	const char *key, *value, *k;
	json_t *v, *e, *x;
	int done = 0;

	if (!inf->opts.packed)
		return 0;
	buf_init(&f.stage, (size_t)1 << 34);
	pthread_mutex_lock(&inf->lock);
	if (inf->writes < INFORMER_COMPACT_MIN ||
	    inf->writes < json_object_size(inf->cache) / 8)
		goto out;
	/*
	 * Left as it is on a failure (a value kept as a tree, the stage
	 * full), and not tried again for as many writes.
	 */
	inf->writes = 0;
	json_object_foreach(inf->cache, key, v)
		if (!json_is_string(v) || stage_entry(&f, key, NULL,
		    json_string_value(v), json_string_length(v)) != 0)
			goto out;
	/* The index, as entries with no text. */
	json_object_foreach(inf->index, value, e) {
		if (json_is_string(e)) {
			if (stage_entry(&f, json_string_value(e), value, NULL,
			    0) != 0)
				goto out;
			continue;
		}
		json_object_foreach(e, k, x)
			if (stage_entry(&f, k, value, NULL, 0) != 0)
				goto out;
	}
	/*
	 * The old values are freed first, so that the new ones fill the
	 * freed space from its start, one after another.
	 */
	json_decref(inf->cache);
	json_decref(inf->index);
	inf->cache = f.fresh = json_object();
	inf->index = f.index = json_object();
	fill_unstage(&f);
	done = 1;
out:
	pthread_mutex_unlock(&inf->lock);
	buf_free(&f.stage);
	free(f.st);
	return done;
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
	json_decref(inf->index);
	free(inf->last_rv);
	pthread_mutex_destroy(&inf->lock);
	pthread_cond_destroy(&inf->cond);
	free(inf);
}
