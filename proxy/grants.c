/*
 * grants.c - see grants.h.
 *
 * The index is an array scanned whole per lookup: at most GRANTS_MAX
 * addresses, a few microseconds, and a scan sees a second grant for the
 * same address (ambiguous) without a second structure to keep in step.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "grants.h"
#include "informer.h"
#include "log.h"
#include "xmalloc.h"

struct held {
	char			*key;	/* the ConfigMap's name */
	struct egress_grant	 g;
};

struct grants {
	pthread_mutex_t	 lock;		/* guards held, n, alloc, warned */
	struct held	*held;
	size_t		 n, alloc;
	int		 warned;	/* the cap's warning, once */
	long		 stale_ms;
	struct informer	*inf;
};

/* What the cache keeps of a grant: its name and data, no managedFields. */
static json_t *
trim(json_t *obj)
{
	json_t *md = json_object_get(obj, "metadata");

	return json_pack("{s:{s:O*, s:O*, s:O*}, s:O*}",
	    "metadata", "name", json_object_get(md, "name"),
	    "namespace", json_object_get(md, "namespace"),
	    "resourceVersion", json_object_get(md, "resourceVersion"),
	    "data", json_object_get(obj, "data"));
}

static struct held *
find(struct grants *gs, const char *key)
{
	for (size_t i = 0; i < gs->n; i++)
		if (strcmp(gs->held[i].key, key) == 0)
			return &gs->held[i];
	return NULL;
}

/* Drop the grant held under key, if any. With the lock. */
static void
drop(struct grants *gs, const char *key)
{
	struct held *h = find(gs, key);

	if (h == NULL)
		return;
	free(h->key);
	egress_grant_free(&h->g);
	*h = gs->held[--gs->n];
}

/* Hold g (taken) under key, replacing what was. With the lock. */
static void
hold(struct grants *gs, const char *key, struct egress_grant *g)
{
	struct held *h = find(gs, key);

	if (h != NULL) {
		egress_grant_free(&h->g);
		h->g = *g;
		return;
	}
	if (gs->n == GRANTS_MAX) {
		if (!gs->warned)
			log_warn("egress grants past the cap: the extra are "
			    "ignored", "max=%d", GRANTS_MAX);
		gs->warned = 1;
		egress_grant_free(g);
		return;
	}
	if (gs->n == gs->alloc) {
		gs->alloc = gs->alloc ? gs->alloc * 2 : 64;
		gs->held = xrealloc(gs->held, gs->alloc * sizeof(*gs->held));
	}
	gs->held[gs->n].key = xstrdup(key);
	gs->held[gs->n++].g = *g;
}

static void
put(struct grants *gs, json_t *obj)
{
	const char *key = k8s_obj_name(obj);
	char q[LOG_QUOTE_MAX], q2[LOG_QUOTE_MAX];
	struct egress_grant g;
	struct k8s_error err;

	if (key == NULL)
		return;
	if (egress_grant_parse(obj, &g, &err) != 0) {
		/* The message names a field, never its value. */
		log_warn("egress grant ignored", "configmap=%s error=%s",
		    log_quote(q, key), log_quote(q2, err.message));
		pthread_mutex_lock(&gs->lock);
		drop(gs, key);
		pthread_mutex_unlock(&gs->lock);
		return;
	}
	log_debug("egress grant", "uid=%s", g.uid);
	pthread_mutex_lock(&gs->lock);
	hold(gs, key, &g);
	pthread_mutex_unlock(&gs->lock);
}

static void
on_add(void *arg, json_t *obj)
{
	put(arg, obj);
}

static void
on_update(void *arg, json_t *old, json_t *cur)
{
	(void)old;
	put(arg, cur);
}

static void
on_delete(void *arg, json_t *obj, int final_state_unknown)
{
	struct grants *gs = arg;
	const char *key = k8s_obj_name(obj);

	(void)final_state_unknown;
	if (key == NULL)
		return;
	pthread_mutex_lock(&gs->lock);
	drop(gs, key);
	pthread_mutex_unlock(&gs->lock);
}

struct grants *
grants_new(struct k8s_client *c, const char *ns, long stale_ms)
{
	struct grants *gs = xcalloc(1, sizeof(*gs));
	/*
	 * A short watch (60 s): a silent dead peer is cut by curl's
	 * low-speed limit at timeout + 30 s, and is stale only then.
	 */
	struct informer_opts io = { .res = &k8s_res_configmaps, .ns = ns,
	    .label_selector = EGRESS_GRANT_SELECTOR, .transform = trim,
	    .watch_timeout_seconds = 60, .backoff_max_ms = 5000 };
	struct informer_handlers h = { on_add, on_update, on_delete, gs };

	pthread_mutex_init(&gs->lock, NULL);
	gs->stale_ms = stale_ms > 0 ? stale_ms : GRANTS_STALE_MS;
	gs->inf = informer_new(c, &io, &h);
	return gs;
}

int
grants_start(struct grants *gs)
{
	return informer_start(gs->inf);
}

int
grants_stale(struct grants *gs)
{
	if (informer_wait_synced(gs->inf, 0) != 0)
		return 1;
	return clock_mono_ms() - informer_ok_at(gs->inf) > gs->stale_ms;
}

size_t
grants_answer(struct grants *gs, const struct acl_request *rq,
    char out[ACL_REPLY_MAX])
{
	const struct egress_grant *g = NULL;
	int stale = grants_stale(gs), ambiguous = 0;
	uint32_t addr;
	size_t len;

	pthread_mutex_lock(&gs->lock);
	if (!stale && acl_src_addr(rq->src, &addr) == 0)
		for (size_t i = 0; i < gs->n; i++) {
			if (gs->held[i].g.pod_ip[0] == '\0' ||
			    gs->held[i].g.addr != addr)
				continue;
			ambiguous |= g != NULL;
			g = &gs->held[i].g;
		}
	if (ambiguous)
		g = NULL;
	len = acl_format_reply(out, rq->channel, acl_decide(rq, g, ambiguous,
	    stale), g);
	pthread_mutex_unlock(&gs->lock);
	return len;
}

size_t
grants_len(struct grants *gs)
{
	size_t n;

	pthread_mutex_lock(&gs->lock);
	n = gs->n;
	pthread_mutex_unlock(&gs->lock);
	return n;
}

void
grants_free(struct grants *gs)
{
	if (gs == NULL)
		return;
	informer_free(gs->inf);
	for (size_t i = 0; i < gs->n; i++) {
		free(gs->held[i].key);
		egress_grant_free(&gs->held[i].g);
	}
	free(gs->held);
	pthread_mutex_destroy(&gs->lock);
	free(gs);
}
