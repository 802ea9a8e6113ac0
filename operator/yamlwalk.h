/*
 * yamlwalk.h - reading a small YAML config file field by field.
 *
 * Parses one YAML document with libyaml's document loader and helps a
 * schema-driven walk over it: look a key up in a mapping, get a string or a
 * boolean, refuse keys that must not be silently ignored. Every failure is
 * K8S_EINVAL with a message "<what> '<path>': <field path> ...", e.g.
 * "kubeconfig '/x': users[0].user.exec is not supported".
 *
 * libyaml's loader expands nothing: an alias is one more reference to an
 * existing node, so memory is bounded by the input. Time is bounded by a
 * step budget: every mapping pair or sequence item the walk looks at costs
 * one step (yamlwalk_step()), so a small file that references one huge
 * mapping many times fails instead of taking forever. The walker itself
 * must not recurse generically: an alias can make the node graph cyclic.
 *
 * Helpers taking a map accept NULL for it, meaning an empty mapping. A
 * "where" argument is the field path of that map ("" at the top level).
 */
#ifndef AIRLOCK_YAMLWALK_H
#define AIRLOCK_YAMLWALK_H

#include <stddef.h>
#include <yaml.h>

#include "k8s_error.h"

/* Mapping pairs and sequence items one walk may look at. */
#define YAMLWALK_MAX_STEPS	(16UL * 1024 * 1024)

struct yamlwalk {
	const char		*what;	/* "kubeconfig", for messages */
	const char		*path;	/* the file, for messages */
	struct k8s_error	*err;	/* borrowed; may be NULL */
	yaml_document_t		 doc;
	int			 loaded;	/* doc must be deleted */
	unsigned long		 steps;
};

/* Prepare w; what, path and err are borrowed for w's lifetime. */
void yamlwalk_init(struct yamlwalk *w, const char *what, const char *path,
    struct k8s_error *err);

/*
 * Parse data[0..len), which must hold exactly one YAML document whose top
 * level is a mapping, and set *root to it (owned by w, valid until
 * yamlwalk_free()). K8S_EINVAL for malformed YAML (the message gives
 * libyaml's line and column, or byte offset for encoding errors), no
 * document, several documents, or a top level that is not a mapping.
 */
int yamlwalk_load(struct yamlwalk *w, const char *data, size_t len,
    yaml_node_t **root) __attribute__((warn_unused_result));

/* Free the document; w can be freed after a failed or no yamlwalk_load(). */
void yamlwalk_free(struct yamlwalk *w);

/* Fill w's error with "<what> '<path>': <fmt...>"; returns K8S_EINVAL. */
int yamlwalk_fail(struct yamlwalk *w, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Charge one step: 0, or K8S_EINVAL once the budget is spent. */
int yamlwalk_step(struct yamlwalk *w) __attribute__((warn_unused_result));

/* The node at a libyaml index (a sequence item, a pair's key or value). */
yaml_node_t *yamlwalk_node(struct yamlwalk *w, int index);

/* 1 if n is a scalar whose value is exactly s. */
int yamlwalk_scalar_is(const yaml_node_t *n, const char *s);

/*
 * 1 if n is absent (NULL) or a plain null scalar ("", "~", "null",
 * "Null", "NULL"): the same as an absent key.
 */
int yamlwalk_is_null(const yaml_node_t *n);

/*
 * *out = the value of key in map (borrowed, owned by w), or NULL when the
 * key is absent or its value is a null scalar ("", "~", "null"). A key
 * given twice is an error rather than a guess.
 */
int yamlwalk_lookup(struct yamlwalk *w, yaml_node_t *map, const char *where,
    const char *key, yaml_node_t **out) __attribute__((warn_unused_result));

/*
 * *out = a new copy of the string at key (caller frees with free()), or
 * NULL when absent, null or empty. Errors when the value is not a scalar
 * or holds a NUL byte.
 */
int yamlwalk_string(struct yamlwalk *w, yaml_node_t *map, const char *where,
    const char *key, char **out) __attribute__((warn_unused_result));

/*
 * *out = 1 or 0 for a YAML 1.1 boolean at key (true/false, yes/no, on/off
 * in lower, capitalised or upper case, unquoted, as Go's yaml.v2 reads
 * them); 0 when absent or null. Anything else is an error.
 */
int yamlwalk_bool(struct yamlwalk *w, yaml_node_t *map, const char *where,
    const char *key, int *out) __attribute__((warn_unused_result));

/*
 * Fail with "<where>.<key> is not a known key" on the first key of map
 * that is not one of the NULL-terminated keys (a misspelt key must fail,
 * not fall back to a default); a key that is not a string fails too.
 * Each pair costs a step. map NULL: 0.
 */
int yamlwalk_check_keys(struct yamlwalk *w, yaml_node_t *map, const char *where,
    const char *const *keys) __attribute__((warn_unused_result));

/* Fail with "<where>.<key> is not supported" for the first of the
 * NULL-terminated keys that is present and not null. */
int yamlwalk_refuse(struct yamlwalk *w, yaml_node_t *map, const char *where,
    const char *const *keys) __attribute__((warn_unused_result));

#endif
