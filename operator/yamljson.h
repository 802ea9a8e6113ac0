/*
 * yamljson.h - a YAML document as a jansson value, the way kubectl reads
 * manifests.
 *
 * The top level must be a mapping (a Kubernetes object or a config file).
 * Plain scalars are typed as sigs.k8s.io/yaml types them: null (~, null,
 * empty), booleans (true/false, yes/no, on/off, in lower, capitalised or
 * upper case), integers (decimal, 0x hex, 0o octal) that fit in 64 bits,
 * floats (including .inf, .nan); anything else, and every quoted scalar, is
 * a string. Explicit tags (!!str 7) are not honoured: quote instead.
 * Mapping keys must be scalars and unique.
 *
 * Bounded: libyaml's loader keeps aliases as references, so a small file
 * can name one big subtree many times; expanding it would blow up memory.
 * The output may hold at most max_nodes values and nest at most 64 deep (an
 * alias cycle hits the depth cap), and the input is parsed by yamlwalk,
 * whose step budget also applies.
 */
#ifndef AIRLOCK_YAMLJSON_H
#define AIRLOCK_YAMLJSON_H

#include <stddef.h>
#include <jansson.h>

#include "k8s_error.h"

#define YAMLJSON_MAX_DEPTH	64
#define YAMLJSON_DEFAULT_NODES	(256 * 1024)

/*
 * Convert data[0..len). what and name label error messages
 * ("manifest 'crds/x.yaml': spec.versions[0] ..."). max_nodes 0 means
 * YAMLJSON_DEFAULT_NODES. *out is a new reference. K8S_EINVAL with the
 * field path for malformed YAML, a non-scalar or duplicate key, or a cap.
 */
int yamljson_load(const char *data, size_t len, const char *what,
    const char *name, size_t max_nodes, json_t **out, struct k8s_error *err)
    __attribute__((warn_unused_result));

/* The same for a file, read with a 4 MiB cap (K8S_ETOOBIG past it). */
int yamljson_load_file(const char *path, const char *what, size_t max_nodes,
    json_t **out, struct k8s_error *err)
    __attribute__((warn_unused_result));

#endif
