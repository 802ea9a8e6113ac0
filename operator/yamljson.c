#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "yamljson.h"
#include "yamlwalk.h"

#define MAX_FILE	(4u << 20)
#define PATH_MAX_LEN	512

struct conv {
	struct yamlwalk	 w;
	size_t		 nodes, max_nodes;
};

static int
is_one_of(const char *s, const char *const *list)
{
	for (; *list; list++)
		if (strcmp(s, *list) == 0)
			return 1;
	return 0;
}

/* Type a plain scalar; a new reference. */
static json_t *
plain_scalar(const char *s)
{
	static const char *const nulls[] = { "", "~", "null", "Null", "NULL", NULL };
	static const char *const trues[] = { "true", "True", "TRUE", "yes",
	    "Yes", "YES", "on", "On", "ON", NULL };
	static const char *const falses[] = { "false", "False", "FALSE", "no",
	    "No", "NO", "off", "Off", "OFF", NULL };
	static const char *const infs[] = { ".inf", ".Inf", ".INF", "+.inf",
	    "+.Inf", "+.INF", NULL };
	static const char *const ninfs[] = { "-.inf", "-.Inf", "-.INF", NULL };
	static const char *const nans[] = { ".nan", ".NaN", ".NAN", NULL };
	char *end;
	long long ll;
	double d;
	int base = 10;
	const char *digits = s;

	if (is_one_of(s, nulls))
		return json_null();
	if (is_one_of(s, trues))
		return json_true();
	if (is_one_of(s, falses))
		return json_false();
	if (is_one_of(s, infs) || is_one_of(s, ninfs) || is_one_of(s, nans))
		return json_string(s);	/* JSON has no such numbers */
	if (strncmp(s, "0x", 2) == 0) {
		base = 16;
		digits = s + 2;
	} else if (strncmp(s, "0o", 2) == 0) {
		base = 8;
		digits = s + 2;
	}
	if (digits[0] != '\0' && strchr("+-0123456789", digits[0])) {
		errno = 0;
		ll = strtoll(digits, &end, base);
		if (*end == '\0' && errno == 0 && (base == 10 ||
		    (digits[0] != '-' && digits[0] != '+')))
			return json_integer(ll);
		if (base == 10 && strpbrk(s, ".eE")) {
			errno = 0;
			d = strtod(s, &end);
			if (*end == '\0' && errno == 0 && isfinite(d))
				return json_real(d);
		}
	}
	return json_stringn(s, strlen(s));
}

static int convert(struct conv *c, yaml_node_t *n, struct buf *path,
    int depth, json_t **out);

/*
 * Append ".key" or "[i]" to path for the duration of a child's conversion;
 * returns the length to pop back to. A path past its cap is only cut short
 * in messages.
 */
static size_t
path_push(struct buf *path, const char *key, size_t i)
{
	size_t old = path->len;
	char tmp[PATH_MAX_LEN];
	int rc;

	if (key)
		snprintf(tmp, sizeof(tmp), "%s%s", path->len ? "." : "", key);
	else
		snprintf(tmp, sizeof(tmp), "[%zu]", i);
	rc = buf_append_str(path, tmp);
	(void)rc;
	return old;
}

static void
path_pop(struct buf *path, size_t old)
{
	path->len = old;
	if (path->data)
		path->data[old] = '\0';
}

static const char *
where(struct buf *path)
{
	return path->len ? path->data : "(top level)";
}

static int
convert_mapping(struct conv *c, yaml_node_t *n, struct buf *path, int depth,
    json_t **out)
{
	json_t *obj = json_object();
	yaml_node_pair_t *p;
	int rc = 0;

	for (p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
		yaml_node_t *k = yamlwalk_node(&c->w, p->key);
		yaml_node_t *v = yamlwalk_node(&c->w, p->value);
		json_t *jv = NULL;
		const char *key;
		size_t old;

		if ((rc = yamlwalk_step(&c->w)) != 0)
			break;
		if (k == NULL || k->type != YAML_SCALAR_NODE) {
			rc = yamlwalk_fail(&c->w, "%s: mapping keys must be scalars",
			    where(path));
			break;
		}
		key = (const char *)k->data.scalar.value;
		if (strlen(key) != k->data.scalar.length) {
			rc = yamlwalk_fail(&c->w, "%s: key holds a NUL byte",
			    where(path));
			break;
		}
		if (json_object_get(obj, key) != NULL) {
			rc = yamlwalk_fail(&c->w, "%s%s%s: duplicate key",
			    path->len ? path->data : "", path->len ? "." : "", key);
			break;
		}
		old = path_push(path, key, 0);
		rc = convert(c, v, path, depth + 1, &jv);
		path_pop(path, old);
		if (rc != 0)
			break;
		json_object_set_new(obj, key, jv);
	}
	if (rc != 0) {
		json_decref(obj);
		return rc;
	}
	*out = obj;
	return 0;
}

static int
convert(struct conv *c, yaml_node_t *n, struct buf *path, int depth,
    json_t **out)
{
	json_t *arr;
	yaml_node_item_t *it;
	size_t i, old;
	int rc;

	*out = NULL;
	if (n == NULL)
		return yamlwalk_fail(&c->w, "%s: dangling node", where(path));
	if (depth > YAMLJSON_MAX_DEPTH)
		return yamlwalk_fail(&c->w, "%s: nested deeper than %d levels",
		    where(path), YAMLJSON_MAX_DEPTH);
	if (++c->nodes > c->max_nodes)
		return yamlwalk_fail(&c->w, "%s: more than %zu values",
		    where(path), c->max_nodes);
	switch (n->type) {
	case YAML_SCALAR_NODE: {
		const char *s = (const char *)n->data.scalar.value;

		if (strlen(s) != n->data.scalar.length)
			return yamlwalk_fail(&c->w, "%s: value holds a NUL byte",
			    where(path));
		/*
		 * libyaml's loader tags every untagged scalar !!str, so an
		 * explicit tag cannot be told apart: quoting decides.
		 */
		if (n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
			*out = json_stringn(s, n->data.scalar.length);
		else
			*out = plain_scalar(s);
		if (*out == NULL)	/* jansson refuses invalid UTF-8 */
			return yamlwalk_fail(&c->w, "%s: not valid UTF-8",
			    where(path));
		return 0;
	}
	case YAML_MAPPING_NODE:
		return convert_mapping(c, n, path, depth, out);
	case YAML_SEQUENCE_NODE:
		arr = json_array();
		for (it = n->data.sequence.items.start, i = 0;
		    it < n->data.sequence.items.top; it++, i++) {
			json_t *jv;

			if ((rc = yamlwalk_step(&c->w)) != 0) {
				json_decref(arr);
				return rc;
			}
			old = path_push(path, NULL, i);
			rc = convert(c, yamlwalk_node(&c->w, *it), path,
			    depth + 1, &jv);
			path_pop(path, old);
			if (rc != 0) {
				json_decref(arr);
				return rc;
			}
			json_array_append_new(arr, jv);
		}
		*out = arr;
		return 0;
	default:
		return yamlwalk_fail(&c->w, "%s: empty node", where(path));
	}
}

int
yamljson_load(const char *data, size_t len, const char *what,
    const char *name, size_t max_nodes, json_t **out, struct k8s_error *err)
{
	struct conv c;
	struct buf path;
	yaml_node_t *root;
	int rc;

	*out = NULL;
	memset(&c, 0, sizeof(c));
	c.max_nodes = max_nodes ? max_nodes : YAMLJSON_DEFAULT_NODES;
	yamlwalk_init(&c.w, what, name, err);
	buf_init(&path, 4096);
	if ((rc = yamlwalk_load(&c.w, data, len, &root)) == 0)
		rc = convert(&c, root, &path, 0, out);
	buf_free(&path);
	yamlwalk_free(&c.w);
	return rc;
}

int
yamljson_load_file(const char *path, const char *what, size_t max_nodes,
    json_t **out, struct k8s_error *err)
{
	struct buf b;
	int rc;

	*out = NULL;
	buf_init(&b, MAX_FILE);
	rc = buf_read_file(&b, path, NULL);
	if (rc == BUF_ETOOBIG)
		rc = k8s_error_set(err, K8S_ETOOBIG, 0, NULL,
		    "%s '%s' is larger than %u bytes", what, path, MAX_FILE);
	else if (rc != 0)
		rc = k8s_error_set(err, K8S_EINVAL, 0, NULL,
		    "cannot read %s '%s': %s", what, path, strerror(errno));
	else
		rc = yamljson_load(b.data ? b.data : "", b.len, what, path,
		    max_nodes, out, err);
	buf_free(&b);
	return rc;
}
