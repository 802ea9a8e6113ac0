#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "xmalloc.h"
#include "yamlwalk.h"

void
yamlwalk_init(struct yamlwalk *w, const char *what, const char *path,
    struct k8s_error *err)
{
	memset(w, 0, sizeof(*w));
	w->what = what;
	w->path = path;
	w->err = err;
}

void
yamlwalk_free(struct yamlwalk *w)
{
	if (w->loaded)
		yaml_document_delete(&w->doc);
	w->loaded = 0;
}

int
yamlwalk_fail(struct yamlwalk *w, const char *fmt, ...)
{
	char msg[900];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return k8s_error_set(w->err, K8S_EINVAL, 0, NULL, "%s '%s': %s",
	    w->what, w->path, msg);
}

int
yamlwalk_step(struct yamlwalk *w)
{
	if (++w->steps > YAMLWALK_MAX_STEPS)
		return yamlwalk_fail(w, "too many nodes to walk (alias loop?)");
	return 0;
}

yaml_node_t *
yamlwalk_node(struct yamlwalk *w, int index)
{
	return yaml_document_get_node(&w->doc, index);
}

static int
parse_error(struct yamlwalk *w, const yaml_parser_t *p)
{
	const char *problem = p->problem != NULL ? p->problem : "parse error";

	if (p->error == YAML_MEMORY_ERROR)
		return yamlwalk_fail(w, "out of memory parsing YAML");
	/* Encoding errors come from the reader, which has no line/column. */
	if (p->error == YAML_READER_ERROR)
		return yamlwalk_fail(w, "invalid YAML at byte %zu: %s",
		    p->problem_offset, problem);
	if (p->context != NULL)
		return yamlwalk_fail(w, "invalid YAML at line %zu column %zu: "
		    "%s (%s at line %zu column %zu)", p->problem_mark.line + 1,
		    p->problem_mark.column + 1, problem, p->context,
		    p->context_mark.line + 1, p->context_mark.column + 1);
	return yamlwalk_fail(w, "invalid YAML at line %zu column %zu: %s",
	    p->problem_mark.line + 1, p->problem_mark.column + 1, problem);
}

int
yamlwalk_load(struct yamlwalk *w, const char *data, size_t len,
    yaml_node_t **root)
{
	yaml_parser_t parser;
	yaml_document_t extra;
	yaml_node_t *top;
	int rc;

	if (!yaml_parser_initialize(&parser))
		return yamlwalk_fail(w, "cannot initialise the YAML parser");
	yaml_parser_set_input_string(&parser,
	    (const unsigned char *)(data != NULL ? data : ""), len);
	/* On failure libyaml has already freed the document. */
	if (!yaml_parser_load(&parser, &w->doc)) {
		rc = parse_error(w, &parser);
		goto out;
	}
	w->loaded = 1;
	if ((top = yaml_document_get_root_node(&w->doc)) == NULL) {
		rc = yamlwalk_fail(w, "file holds no YAML document");
		goto out;
	}
	/* Parse the rest too, so trailing garbage is not silently ignored. */
	if (!yaml_parser_load(&parser, &extra)) {
		rc = parse_error(w, &parser);
		goto out;
	}
	rc = yaml_document_get_root_node(&extra) != NULL;
	yaml_document_delete(&extra);
	if (rc) {
		rc = yamlwalk_fail(w, "file holds more than one YAML document");
		goto out;
	}
	if (top->type != YAML_MAPPING_NODE) {
		rc = yamlwalk_fail(w, "top level is not a mapping");
		goto out;
	}
	*root = top;
	rc = 0;
out:
	yaml_parser_delete(&parser);
	return rc;
}

/* "" at the top level, "." below it, to join a field path. */
static const char *
dot(const char *where)
{
	return *where != '\0' ? "." : "";
}

int
yamlwalk_is_null(const yaml_node_t *n)
{
	const char *v;
	size_t len;

	if (n == NULL)
		return 1;
	if (n->type != YAML_SCALAR_NODE ||
	    n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		return 0;
	v = (const char *)n->data.scalar.value;
	len = n->data.scalar.length;
	return len == 0 || (len == 1 && v[0] == '~') || (len == 4 &&
	    (memcmp(v, "null", 4) == 0 || memcmp(v, "Null", 4) == 0 ||
	    memcmp(v, "NULL", 4) == 0));
}

int
yamlwalk_scalar_is(const yaml_node_t *n, const char *s)
{
	size_t len = strlen(s);

	return n != NULL && n->type == YAML_SCALAR_NODE &&
	    n->data.scalar.length == len &&
	    memcmp(n->data.scalar.value, s, len) == 0;
}

int
yamlwalk_lookup(struct yamlwalk *w, yaml_node_t *map, const char *where,
    const char *key, yaml_node_t **out)
{
	yaml_node_pair_t *p;
	yaml_node_t *found = NULL;
	int seen = 0, rc;

	*out = NULL;
	if (map == NULL)
		return 0;
	for (p = map->data.mapping.pairs.start;
	    p < map->data.mapping.pairs.top; p++) {
		if ((rc = yamlwalk_step(w)) != 0)
			return rc;
		if (!yamlwalk_scalar_is(yamlwalk_node(w, p->key), key))
			continue;
		if (seen++)
			return yamlwalk_fail(w, "%s%s%s is given twice", where,
			    dot(where), key);
		found = yamlwalk_node(w, p->value);
	}
	if (!yamlwalk_is_null(found))
		*out = found;
	return 0;
}

int
yamlwalk_string(struct yamlwalk *w, yaml_node_t *map, const char *where,
    const char *key, char **out)
{
	yaml_node_t *n;
	int rc;

	*out = NULL;
	if ((rc = yamlwalk_lookup(w, map, where, key, &n)) != 0 || n == NULL)
		return rc;
	if (n->type != YAML_SCALAR_NODE)
		return yamlwalk_fail(w, "%s%s%s is not a string", where,
		    dot(where), key);
	if (n->data.scalar.length == 0)
		return 0;
	if (memchr(n->data.scalar.value, '\0', n->data.scalar.length) != NULL)
		return yamlwalk_fail(w, "%s%s%s contains a NUL byte", where,
		    dot(where), key);
	*out = xstrndup((const char *)n->data.scalar.value,
	    n->data.scalar.length);
	return 0;
}

int
yamlwalk_bool(struct yamlwalk *w, yaml_node_t *map, const char *where,
    const char *key, int *out)
{
	static const char *const yes[] = { "true", "True", "TRUE", "yes",
	    "Yes", "YES", "on", "On", "ON", NULL };
	static const char *const no[] = { "false", "False", "FALSE", "no",
	    "No", "NO", "off", "Off", "OFF", NULL };
	yaml_node_t *n;
	int i, rc;

	*out = 0;
	if ((rc = yamlwalk_lookup(w, map, where, key, &n)) != 0 || n == NULL)
		return rc;
	/* A quoted "true" is a string to YAML, and so to kubectl. */
	if (n->type == YAML_SCALAR_NODE &&
	    n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE) {
		for (i = 0; yes[i] != NULL; i++)
			if (yamlwalk_scalar_is(n, yes[i])) {
				*out = 1;
				return 0;
			}
		for (i = 0; no[i] != NULL; i++)
			if (yamlwalk_scalar_is(n, no[i]))
				return 0;
	}
	return yamlwalk_fail(w, "%s%s%s is not a boolean", where, dot(where),
	    key);
}

int
yamlwalk_check_keys(struct yamlwalk *w, yaml_node_t *map, const char *where,
    const char *const *keys)
{
	yaml_node_pair_t *p;
	yaml_node_t *k;
	size_t i;
	int rc, known;

	if (map == NULL)
		return 0;
	for (p = map->data.mapping.pairs.start;
	    p < map->data.mapping.pairs.top; p++) {
		if ((rc = yamlwalk_step(w)) != 0)
			return rc;
		k = yamlwalk_node(w, p->key);
		if (k == NULL || k->type != YAML_SCALAR_NODE)
			return yamlwalk_fail(w, "%s has a key that is not a "
			    "string", *where != '\0' ? where : "top level");
		for (i = 0, known = 0; keys[i] != NULL && !known; i++)
			known = yamlwalk_scalar_is(k, keys[i]);
		if (!known)
			return yamlwalk_fail(w, "%s%s%.*s is not a known key",
			    where, dot(where),
			    (int)(k->data.scalar.length > 64 ? 64 :
			    k->data.scalar.length),
			    (const char *)k->data.scalar.value);
	}
	return 0;
}

int
yamlwalk_refuse(struct yamlwalk *w, yaml_node_t *map, const char *where,
    const char *const *keys)
{
	yaml_node_t *n;
	int rc;

	for (; *keys != NULL; keys++) {
		if ((rc = yamlwalk_lookup(w, map, where, *keys, &n)) != 0)
			return rc;
		if (n != NULL)
			return yamlwalk_fail(w, "%s%s%s is not supported",
			    where, dot(where), *keys);
	}
	return 0;
}
