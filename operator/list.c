/*
 * list.c - the client's lists (client.h): one page, every page through a
 * callback with the page size halved when a page is too big to take, or
 * all items at once.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "client.h"
#include "client_priv.h"
#include "log.h"
#include "xmalloc.h"

int
k8s_list(struct k8s_client *c, const struct k8s_resource *res,
    const char *ns, const struct k8s_list_opts *o, json_t **out,
    struct k8s_error *err)
{
	struct buf q;
	char *path, num[32];
	int rc;

	*out = NULL;
	if ((rc = k8s_path(res, ns, NULL, NULL, &path, err)) != 0)
		return rc;
	buf_init(&q, PATH_MAX_LEN);
	rc = buf_append_str(&q, path) ? K8S_ETOOBIG : 0;
	free(path);
	if (o && rc == 0) {
		if (o->label_selector && rc == 0)
			rc = k8s_query_append(&q, "labelSelector", o->label_selector);
		if (o->field_selector && rc == 0)
			rc = k8s_query_append(&q, "fieldSelector", o->field_selector);
		if (o->limit > 0 && rc == 0) {
			snprintf(num, sizeof(num), "%ld", o->limit);
			rc = k8s_query_append(&q, "limit", num);
		}
		if (o->continue_token && rc == 0)
			rc = k8s_query_append(&q, "continue", o->continue_token);
		if (o->resource_version && rc == 0)
			rc = k8s_query_append(&q, "resourceVersion",
			    o->resource_version);
		if (o->resource_version_match && rc == 0)
			rc = k8s_query_append(&q, "resourceVersionMatch",
			    o->resource_version_match);
	}
	if (rc != 0)
		rc = k8s_error_set(err, rc, 0, NULL, "list query too long");
	else
		rc = k8s_request_capped(c, q.data, o ? o->page_bytes : 0, out,
		    err);
	buf_free(&q);
	return rc;
}

int
k8s_list_each(struct k8s_client *c, const struct k8s_resource *res,
    const char *ns, const struct k8s_list_opts *opts,
    int (*each)(void *arg, json_t *item), void *arg, char **rv,
    struct k8s_error *err)
{
	struct k8s_list_opts o = { 0 };
	json_t *page = NULL, *it;
	char *cont = NULL;
	size_t total = 0, i;
	int rc, restarted = 0;

	if (rv)
		*rv = NULL;
	if (opts)
		o = *opts;
	for (;;) {
		o.continue_token = cont;
		rc = k8s_list(c, res, ns, &o, &page, err);
		if (rc == K8S_EGONE && cont && !restarted) {
			/* The continue token expired: one full list instead. */
			restarted = 1;
			total = 0;
			if ((rc = each(arg, NULL)) != 0)
				goto out;
			free(cont);
			cont = NULL;
			o.limit = 0;
			continue;
		}
		if (rc == K8S_ETOOBIG && o.limit != 1 && err->http_status == 0) {
			/*
			 * The page is over the response cap: the same page
			 * again, half as long. Objects are each under etcd's
			 * 1.5 MiB, so one item always fits.
			 */
			o.limit = o.limit > 1 ? o.limit / 2 : 250;
			log_info("list page too big; smaller pages", "resource=%s "
			    "limit=%ld", res->plural, o.limit);
			continue;
		}
		if (rc != 0)
			goto out;
		json_t *its = json_object_get(page, "items");
		json_t *md = json_object_get(page, "metadata");
		const char *next = json_string_value(json_object_get(md,
		    "continue"));

		if (its != NULL && !json_is_array(its)) {
			rc = k8s_error_set(err, K8S_EINVAL, 200, NULL,
			    "list of %s: items is not an array", res->plural);
			goto out;
		}
		total += json_array_size(its);
		if (total > K8S_LIST_MAX_ITEMS) {
			rc = k8s_error_set(err, K8S_ETOOBIG, 200, NULL,
			    "list of %s: more than %d items", res->plural,
			    K8S_LIST_MAX_ITEMS);
			goto out;
		}
		json_array_foreach(its, i, it)
			if ((rc = each(arg, it)) != 0)
				goto out;
		if (next && cont && strcmp(next, cont) == 0) {
			rc = k8s_error_set(err, K8S_EINVAL, 200, NULL,
			    "list of %s: the server repeated a continue token",
			    res->plural);
			goto out;
		}
		free(cont);
		cont = (next && next[0]) ? xstrdup(next) : NULL;
		if (cont == NULL) {
			const char *r = json_string_value(json_object_get(md,
			    "resourceVersion"));

			if (rv)
				*rv = xstrdup(r ? r : "");
			break;
		}
		json_decref(page);
		page = NULL;
		/* Later pages are pinned by the token; the server refuses both. */
		o.resource_version = NULL;
		o.resource_version_match = NULL;
	}
out:
	if (rc != 0 && rv) {
		free(*rv);
		*rv = NULL;
	}
	json_decref(page);
	free(cont);
	return rc;
}

static int
append_item(void *arg, json_t *item)
{
	json_t *all = arg;

	if (item == NULL)
		json_array_clear(all);
	else
		json_array_append(all, item);
	return 0;
}

int
k8s_list_all(struct k8s_client *c, const struct k8s_resource *res,
    const char *ns, const struct k8s_list_opts *opts, json_t **items,
    char **rv, struct k8s_error *err)
{
	json_t *all = json_array();
	int rc;

	*items = NULL;
	rc = k8s_list_each(c, res, ns, opts, append_item, all, rv, err);
	if (rc != 0) {
		json_decref(all);
		return rc;
	}
	*items = all;
	return 0;
}
