/*
 * config.c - the operator's config file.
 *
 * A schema walk in the manner of operator/config.c's kubeconfig walk: each
 * mapping's keys are checked against the keys it may hold before anything
 * is read from it (a misspelt key must fail, not fall back to a default),
 * and the walk goes to a fixed depth without recursing on what it finds,
 * so an alias cycle cannot loop it. Aliases can still make a small file
 * name one big node many times, so every per-profile value is capped
 * before it is copied.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buf.h"
#include "artifacts.h"
#include "ctl_config.h"
#include "egress.h"
#include "quantity.h"
#include "xmalloc.h"
#include "yamlwalk.h"

#define CONFIG_MAX_BYTES	(1024 * 1024)
#define PROFILES_MAX		256
#define COMMAND_MAX_ARGS	256
#define COMMAND_MAX_BYTES	(64 * 1024)	/* a profile's whole argv */
#define IMAGE_MAX		1024
#define SOURCE_FILE_MAX		255
#define DNS_LABEL_MAX		63
#define DNS_SUBDOMAIN_MAX	253
#define UID_MAX_K8S		INT64_C(2147483647) /* the API's limit */
#define EXECUTIONS_MAX		INT64_C(1000000)
#define STORED_MAX		INT64_C(1000000)
#define POOLS_MAX		INT64_C(1000)
#define SESSIONS_MAX		INT64_C(1000)
#define POLICY_MAX_ITEMS	256
#define POLICY_ITEM_MAX		128
#define PRELOAD_MAX_ITEMS	32
#define PRELOAD_ITEM_MAX	100
#define WARMUP_MAX		4096

static const char *const top_keys[] = { "runtimeClassName",
    "networkRuntimeClassName", "allowCustomImages", "runAsUser", "tmpSizeLimit", "priorityClassName",
    "profiles", "defaults", "caps", "quota", "artifacts", NULL };
static const char *const artifacts_keys[] = { "maxBytes", "maxFiles", NULL };
static const char *const profile_keys[] = { "image", "command",
    "sourceFile", "policy", "preload", "warmup", "network", NULL };
static const char *const policy_keys[] = { "denyImports", "allowCommands",
    NULL };
static const char *const resource_keys[] = { "cpu", "memory",
    "ephemeralStorage", NULL };
static const char *const quota_keys[] = { "executions", "cpu", "memory",
    "storedExecutions", "storedPools", "storedSessions", NULL };

/* "" at the top level, "." below it, to join a field path. */
static const char *
dot(const char *where)
{
	return *where != '\0' ? "." : "";
}

/* *out = the mapping at key, or NULL when absent or null. */
static int
get_mapping(struct yamlwalk *w, yaml_node_t *map, const char *where,
    const char *key, yaml_node_t **out)
{
	int rc;

	if ((rc = yamlwalk_lookup(w, map, where, key, out)) != 0)
		return rc;
	if (*out != NULL && (*out)->type != YAML_MAPPING_NODE)
		return yamlwalk_fail(w, "%s%s%s is not a mapping", where,
		    dot(where), key);
	return 0;
}

/*
 * *out = a new copy of the string at key, or NULL when absent, null or
 * empty; longer than max bytes is an error, found before copying.
 */
static int
get_string(struct yamlwalk *w, yaml_node_t *map, const char *where,
    const char *key, size_t max, char **out)
{
	yaml_node_t *n;
	int rc;

	*out = NULL;
	if ((rc = yamlwalk_lookup(w, map, where, key, &n)) != 0)
		return rc;
	if (n != NULL && n->type == YAML_SCALAR_NODE &&
	    n->data.scalar.length > max)
		return yamlwalk_fail(w, "%s%s%s is longer than %zu bytes",
		    where, dot(where), key, max);
	return yamlwalk_string(w, map, where, key, out);
}

/*
 * A plain decimal integer at key into *out; *present says whether there
 * was one (*out is untouched when not).
 */
static int
get_int(struct yamlwalk *w, yaml_node_t *map, const char *where,
    const char *key, int64_t *out, int *present)
{
	const unsigned char *s;
	yaml_node_t *n;
	size_t i, len;
	int64_t v = 0;
	int rc, neg;

	*present = 0;
	if ((rc = yamlwalk_lookup(w, map, where, key, &n)) != 0 || n == NULL)
		return rc;
	if (n->type != YAML_SCALAR_NODE ||
	    n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		goto bad;
	s = n->data.scalar.value;
	len = n->data.scalar.length;
	neg = len > 0 && s[0] == '-';
	if (len == (size_t)neg)
		goto bad;
	for (i = (size_t)neg; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			goto bad;
		if (__builtin_mul_overflow(v, 10, &v) ||
		    __builtin_add_overflow(v, (int64_t)(s[i] - '0'), &v))
			return yamlwalk_fail(w, "%s%s%s is out of range", where,
			    dot(where), key);
	}
	*out = neg ? -v : v;
	*present = 1;
	return 0;
bad:
	return yamlwalk_fail(w, "%s%s%s is not an integer", where, dot(where),
	    key);
}

/*
 * The quantity at key, if present, replaces *text and *value: cpu-style
 * (milli-units) when milli is set, else whole units. It must be above zero:
 * Kubernetes reads a zero limit as "no limit".
 */
static int
get_quantity(struct yamlwalk *w, yaml_node_t *map, const char *where,
    const char *key, int milli, char **text, int64_t *value)
{
	struct k8s_error qe;
	char *s = NULL;
	int64_t v;
	int rc;

	k8s_error_clear(&qe);
	if ((rc = get_string(w, map, where, key, QUANTITY_MAX_LEN,
	    &s)) != 0 || s == NULL)
		goto out;
	rc = milli ? quantity_parse_milli(s, &v, &qe) :
	    quantity_parse(s, &v, &qe);
	if (rc != 0) {
		rc = yamlwalk_fail(w, "%s%s%s: %s", where, dot(where), key,
		    qe.message);
		goto out;
	}
	if (v <= 0) {
		rc = yamlwalk_fail(w, "%s%s%s '%s' must be greater than zero",
		    where, dot(where), key, s);
		goto out;
	}
	free(*text);
	*text = s;
	s = NULL;
	*value = v;
out:
	free(s);
	return rc;
}

/* s[0..len) matches [a-z0-9]([-a-z0-9]*[a-z0-9])? */
static int
dns_label(const char *s, size_t len)
{
	size_t i;

	if (len == 0 || s[0] == '-' || s[len - 1] == '-')
		return 0;
	for (i = 0; i < len; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') ||
		    (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
			return 0;
	return 1;
}

/* A DNS-1123 subdomain: dot-separated labels, 253 bytes at most. */
static int
dns_subdomain(const char *s)
{
	size_t n;

	if (strlen(s) > DNS_SUBDOMAIN_MAX)
		return 0;
	for (;;) {
		n = strcspn(s, ".");
		if (!dns_label(s, n))
			return 0;
		if (s[n] == '\0')
			return 1;
		s += n + 1;
	}
}

/* A class name at key, if present, replaces *out. */
static int
get_class_name(struct yamlwalk *w, yaml_node_t *root, const char *key,
    char **out)
{
	char *s = NULL;
	int rc;

	if ((rc = get_string(w, root, "", key, DNS_SUBDOMAIN_MAX, &s)) != 0 ||
	    s == NULL)
		return rc;
	if (!dns_subdomain(s)) {
		rc = yamlwalk_fail(w, "%s '%s' is not a valid name (lowercase "
		    "letters, digits, '-' and '.')", key, s);
		free(s);
		return rc;
	}
	free(*out);
	*out = s;
	return 0;
}

/* Why path is not a safe relative path, or NULL if it is. */
static const char *
unsafe_path(const char *path)
{
	const char *s = path;
	size_t n;

	if (*s == '/')
		return "it is absolute";
	for (; *s != '\0'; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return "it contains a control character";
	for (s = path;; s += n + 1) {
		n = strcspn(s, "/");
		if (n == 0)
			return "it has an empty segment";
		if (n == 1 && s[0] == '.')
			return "it has a '.' segment";
		if (n == 2 && s[0] == '.' && s[1] == '.')
			return "it has a '..' segment";
		if (s[n] == '\0')
			return NULL;
	}
}

static int
walk_command(struct yamlwalk *w, yaml_node_t *map, const char *where,
    struct ctl_profile *p)
{
	yaml_node_item_t *it;
	yaml_node_t *seq, *item;
	size_t i, n, total = 0;
	int rc;

	if ((rc = yamlwalk_lookup(w, map, where, "command", &seq)) != 0)
		return rc;
	if (seq == NULL)
		return yamlwalk_fail(w, "%s.command is missing", where);
	if (seq->type != YAML_SEQUENCE_NODE)
		return yamlwalk_fail(w, "%s.command is not a list", where);
	n = (size_t)(seq->data.sequence.items.top -
	    seq->data.sequence.items.start);
	if (n == 0)
		return yamlwalk_fail(w, "%s.command is empty", where);
	if (n > COMMAND_MAX_ARGS)
		return yamlwalk_fail(w, "%s.command has more than %d items",
		    where, COMMAND_MAX_ARGS);
	p->command = xcalloc(n + 1, sizeof(*p->command));
	for (i = 0, it = seq->data.sequence.items.start; i < n; i++, it++) {
		if ((rc = yamlwalk_step(w)) != 0)
			return rc;
		item = yamlwalk_node(w, *it);
		if (item == NULL || item->type != YAML_SCALAR_NODE)
			return yamlwalk_fail(w, "%s.command[%zu] is not a "
			    "string", where, i);
		if (yamlwalk_is_null(item) || item->data.scalar.length == 0)
			return yamlwalk_fail(w, "%s.command[%zu] is empty",
			    where, i);
		if (memchr(item->data.scalar.value, '\0',
		    item->data.scalar.length) != NULL)
			return yamlwalk_fail(w, "%s.command[%zu] contains a "
			    "NUL byte", where, i);
		total += item->data.scalar.length;
		if (total > COMMAND_MAX_BYTES)
			return yamlwalk_fail(w, "%s.command is longer than %d "
			    "bytes", where, COMMAND_MAX_BYTES);
		p->command[i] = xstrndup((const char *)item->data.scalar.value,
		    item->data.scalar.length);
	}
	return 0;
}

/* A Python module name: identifiers joined by dots. */
static int
module_name(const char *s)
{
	int start = 1;

	for (; *s; s++) {
		if (*s == '.') {
			if (start)
				return 0;
			start = 1;
			continue;
		}
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		    *s == '_' || (!start && *s >= '0' && *s <= '9')))
			return 0;
		start = 0;
	}
	return !start;
}

/* A command name bash looks up in PATH: no '/', ',', space or control. */
static int
command_name(const char *s)
{
	if (*s == '\0' || *s == '-' || strcmp(s, ".") == 0 || strcmp(s, "..") == 0)
		return 0;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		    (*s >= '0' && *s <= '9') || *s == '_' || *s == '.' ||
		    *s == '+' || *s == '-'))
			return 0;
	return 1;
}

/* The last component of a path. */
static const char *
base_name(const char *s)
{
	const char *sl = strrchr(s, '/');

	return sl ? sl + 1 : s;
}

/* Whether the comma-joined list[0..len) holds the name one. */
static int
in_list(const char *list, size_t len, const char *one)
{
	size_t n = strlen(one), i = 0;

	while (i < len) {
		size_t k = strcspn(list + i, ",");

		if (k > len - i)
			k = len - i;
		if (k == n && memcmp(list + i, one, n) == 0)
			return 1;
		i += k + 1;
	}
	return 0;
}

/*
 * A list of names (seq) at where.field, joined by commas, into *list
 * (caller frees): at most max_items of 1 to item_max bytes, each valid;
 * with unique set, a name given twice is refused.
 */
static int
walk_name_list(struct yamlwalk *w, yaml_node_t *seq, const char *where,
    const char *field, size_t max_items, size_t item_max,
    int (*valid)(const char *), int unique, char **list)
{
	yaml_node_item_t *it;
	yaml_node_t *item;
	size_t i, n, len = 0;
	char *out, *one;
	int rc = 0;

	if (seq->type != YAML_SEQUENCE_NODE)
		return yamlwalk_fail(w, "%s.%s is not a list", where, field);
	n = (size_t)(seq->data.sequence.items.top - seq->data.sequence.items.start);
	if (n == 0)
		return yamlwalk_fail(w, "%s.%s is empty", where, field);
	if (n > max_items)
		return yamlwalk_fail(w, "%s.%s has more than %zu items",
		    where, field, max_items);
	out = xcalloc(1, n * (item_max + 1) + 1);
	one = xmalloc(item_max + 1);
	for (i = 0, it = seq->data.sequence.items.start; i < n; i++, it++) {
		if ((rc = yamlwalk_step(w)) != 0)
			goto out;
		item = yamlwalk_node(w, *it);
		if (item == NULL || item->type != YAML_SCALAR_NODE ||
		    yamlwalk_is_null(item) || item->data.scalar.length == 0 ||
		    item->data.scalar.length > item_max ||
		    memchr(item->data.scalar.value, '\0', item->data.scalar.length)) {
			rc = yamlwalk_fail(w, "%s.%s[%zu] is not a name of 1 to "
			    "%zu characters", where, field, i, item_max);
			goto out;
		}
		memcpy(one, item->data.scalar.value, item->data.scalar.length);
		one[item->data.scalar.length] = '\0';
		if (!valid(one)) {
			rc = yamlwalk_fail(w, "%s.%s[%zu] '%s' is not a %s",
			    where, field, i, one, valid == module_name ?
			    "module name (a.b.c)" : "command name (letters, digits, "
			    "'.', '_', '+', '-'; no '/')");
			goto out;
		}
		if (unique && in_list(out, len, one)) {
			rc = yamlwalk_fail(w, "%s.%s[%zu] '%s' is given twice",
			    where, field, i, one);
			goto out;
		}
		if (i > 0)
			out[len++] = ',';
		memcpy(out + len, one, strlen(one));
		len += strlen(one);
	}
	*list = out;
	out = NULL;
out:
	free(one);
	free(out);
	return rc;
}

/*
 * The profile's policy, as its command: the runner image's guard put in
 * front of the program (images/runner/policy.py, policy.sh), so that the
 * cold pod, the warm exec and the CLI's local mode all run it alike.
 *
 *   denyImports:   [RUNNER, PY, -I, /airlock/bin/policy.py, LIST, SOURCE, ...]
 *   allowCommands: [RUNNER, BASH, /airlock/bin/policy.sh, LIST, SOURCE, ...]
 *
 * from [RUNNER, PY, SOURCE, ...] and [RUNNER, BASH, SOURCE, ...].
 */
static int
walk_policy(struct yamlwalk *w, yaml_node_t *body, const char *where,
    struct ctl_profile *p)
{
	yaml_node_t *map, *deny = NULL, *allow = NULL;
	char *list = NULL, **cmd;
	const char *interp;
	size_t n, i, o;
	int rc, py;

	if ((rc = yamlwalk_lookup(w, body, where, "policy", &map)) != 0)
		return rc;
	if (map == NULL || yamlwalk_is_null(map))
		return 0;
	if (map->type != YAML_MAPPING_NODE)
		return yamlwalk_fail(w, "%s.policy is not a mapping", where);
	{
		char pw[DNS_LABEL_MAX + 32];

		snprintf(pw, sizeof(pw), "%s.policy", where);
		if ((rc = yamlwalk_check_keys(w, map, pw, policy_keys)) != 0 ||
		    (rc = yamlwalk_lookup(w, map, pw, "denyImports", &deny)) != 0 ||
		    (rc = yamlwalk_lookup(w, map, pw, "allowCommands", &allow)) != 0)
			return rc;
	}
	if ((deny == NULL) == (allow == NULL))
		return yamlwalk_fail(w, "%s.policy needs one of denyImports "
		    "(Python) or allowCommands (bash)", where);
	for (n = 0; p->command[n]; n++)
		;
	interp = n >= 3 ? base_name(p->command[1]) : "";
	py = deny != NULL;
	if ((rc = walk_name_list(w, py ? deny : allow, where, py ?
	    "policy.denyImports" : "policy.allowCommands", POLICY_MAX_ITEMS,
	    POLICY_ITEM_MAX, py ? module_name : command_name, 0, &list)) != 0)
		return rc;
	if (n < 3 || strcmp(p->command[0], PROFILE_RUNNER) != 0 ||
	    strcmp(p->command[2], p->source_file) != 0 ||
	    (py ? strncmp(interp, "python", 6) != 0 : strcmp(interp, "bash") != 0)) {
		free(list);
		return yamlwalk_fail(w, "%s.policy.%s needs the command [%s, %s, "
		    "%s, ...]", where, py ? "denyImports" : "allowCommands",
		    PROFILE_RUNNER, py ? "python3" : "bash", p->source_file);
	}
	cmd = xcalloc(n + 4, sizeof(*cmd));
	o = 0;
	cmd[o++] = p->command[0];
	cmd[o++] = p->command[1];
	if (py) {
		cmd[o++] = xstrdup("-I");
		cmd[o++] = xstrdup(PROFILE_POLICY_PY);
	} else
		cmd[o++] = xstrdup(PROFILE_POLICY_SH);
	cmd[o++] = list;
	for (i = 2; i < n; i++)
		cmd[o++] = p->command[i];
	free(p->command);
	p->command = cmd;
	p->policy = py ? CTL_POLICY_DENY_IMPORTS : CTL_POLICY_ALLOW_COMMANDS;
	return 0;
}

/*
 * preload and warmup (README: profiles): modules a holder's zygote imports
 * before it counts as ready, and a snippet it runs after them. Only a
 * Python profile started by the runner has a zygote (images/runner), so
 * anything else is refused rather than silently never preloaded. An empty
 * list is none, so that a chart value can turn a default off.
 */
static int
walk_preload(struct yamlwalk *w, yaml_node_t *body, const char *where,
    struct ctl_profile *p)
{
	yaml_node_t *seq;
	const char *interp;
	int rc;

	if ((rc = yamlwalk_lookup(w, body, where, "preload", &seq)) != 0 ||
	    (rc = get_string(w, body, where, "warmup", WARMUP_MAX,
	    &p->warmup)) != 0)
		return rc;
	if (seq != NULL && !yamlwalk_is_null(seq) &&
	    !(seq->type == YAML_SEQUENCE_NODE &&
	    seq->data.sequence.items.top == seq->data.sequence.items.start)) {
		if ((rc = walk_name_list(w, seq, where, "preload",
		    PRELOAD_MAX_ITEMS, PRELOAD_ITEM_MAX, module_name, 1,
		    &p->preload)) != 0)
			return rc;
		interp = p->command[1] != NULL ? base_name(p->command[1]) : "";
		if (strcmp(p->command[0], PROFILE_RUNNER) != 0 ||
		    (strcmp(interp, "python3") != 0 && strcmp(interp, "python") != 0))
			return yamlwalk_fail(w, "%s.preload needs the command [%s, "
			    "python3, ...] (a Python profile started by the runner)",
			    where, PROFILE_RUNNER);
	}
	if (p->warmup != NULL && p->preload == NULL)
		return yamlwalk_fail(w, "%s.warmup needs a preload list", where);
	return 0;
}

/*
 * network (docs/network.md): its egress list is egress.c's; absent or
 * null is no network, what every profile had before.
 */
static int
walk_network(struct yamlwalk *w, yaml_node_t *body, const char *where,
    struct ctl_profile *p)
{
	yaml_node_t *net;
	char at[DNS_LABEL_MAX + 64];
	int rc;

	snprintf(at, sizeof(at), "%s.network", where);
	if ((rc = get_mapping(w, body, where, "network", &net)) != 0 ||
	    net == NULL || (rc = egress_config_walk(w, net, at, p)) != 0)
		return rc;
	/*
	 * The runner holds the program until its policy is in force (the
	 * start gate, docs/network.md): a command that does not start with
	 * it would run the program at once, with the pod open meanwhile.
	 */
	if (p->negress > 0 && (strcmp(p->command[0], PROFILE_RUNNER) != 0 ||
	    p->command[1] == NULL || p->command[1][0] == '-'))
		return yamlwalk_fail(w, "%s.egress needs the command [%s, "
		    "PROGRAM, ...]: the runner holds the program until its "
		    "NetworkPolicy is in force (docs/network.md)", at,
		    PROFILE_RUNNER);
	return 0;
}

/* One profile; body is its value node (NULL or null for an empty one). */
static int
walk_profile(struct yamlwalk *w, const char *name, yaml_node_t *body,
    struct ctl_profile *p)
{
	const char *why;
	char where[DNS_LABEL_MAX + 16];
	int rc;
	size_t i;

	snprintf(where, sizeof(where), "profiles.%s", name);
	p->name = xstrdup(name);
	if (yamlwalk_is_null(body))
		body = NULL;
	if (body != NULL && body->type != YAML_MAPPING_NODE)
		return yamlwalk_fail(w, "%s is not a mapping", where);
	if ((rc = yamlwalk_check_keys(w, body, where, profile_keys)) != 0 ||
	    (rc = get_string(w, body, where, "image", IMAGE_MAX,
	    &p->image)) != 0)
		return rc;
	if (p->image == NULL)
		return yamlwalk_fail(w, "%s.image is missing", where);
	for (i = 0; p->image[i] != '\0'; i++)
		if ((unsigned char)p->image[i] <= 0x20 || p->image[i] == 0x7f)
			return yamlwalk_fail(w, "%s.image '%s' contains "
			    "whitespace or a control character", where,
			    p->image);
	if ((rc = walk_command(w, body, where, p)) != 0 ||
	    (rc = get_string(w, body, where, "sourceFile", SOURCE_FILE_MAX,
	    &p->source_file)) != 0)
		return rc;
	if (p->source_file == NULL)
		return yamlwalk_fail(w, "%s.sourceFile is missing", where);
	if ((why = unsafe_path(p->source_file)) != NULL)
		return yamlwalk_fail(w, "%s.sourceFile '%s' is not a safe "
		    "relative path: %s", where, p->source_file, why);
	if ((rc = walk_policy(w, body, where, p)) != 0 ||
	    (rc = walk_network(w, body, where, p)) != 0)
		return rc;
	return walk_preload(w, body, where, p);
}

static int
walk_profiles(struct yamlwalk *w, yaml_node_t *root, struct ctl_config *c)
{
	yaml_node_pair_t *pair;
	yaml_node_t *map, *k;
	size_t i, j, n;
	int rc;

	if ((rc = get_mapping(w, root, "", "profiles", &map)) != 0)
		return rc;
	n = map == NULL ? 0 : (size_t)(map->data.mapping.pairs.top -
	    map->data.mapping.pairs.start);
	if (n == 0)
		return yamlwalk_fail(w, "profiles: at least one profile is "
		    "required");
	if (n > PROFILES_MAX)
		return yamlwalk_fail(w, "profiles: more than %d profiles",
		    PROFILES_MAX);
	c->profiles = xcalloc(n, sizeof(*c->profiles));
	for (i = 0, pair = map->data.mapping.pairs.start; i < n; i++, pair++) {
		if ((rc = yamlwalk_step(w)) != 0)
			return rc;
		k = yamlwalk_node(w, pair->key);
		if (k == NULL || k->type != YAML_SCALAR_NODE)
			return yamlwalk_fail(w, "profiles has a key that is "
			    "not a string");
		if (k->data.scalar.length > DNS_LABEL_MAX ||
		    !dns_label((const char *)k->data.scalar.value,
		    k->data.scalar.length))
			return yamlwalk_fail(w, "profiles.%.*s: the name is "
			    "not a DNS label (at most %d lowercase letters, "
			    "digits and '-', starting and ending with a "
			    "letter or digit)",
			    (int)(k->data.scalar.length > 64 ? 64 :
			    k->data.scalar.length),
			    (const char *)k->data.scalar.value, DNS_LABEL_MAX);
		for (j = 0; j < i; j++) {
			if ((rc = yamlwalk_step(w)) != 0)
				return rc;
			if (yamlwalk_scalar_is(k, c->profiles[j].name))
				return yamlwalk_fail(w, "profiles.%s is given "
				    "twice", c->profiles[j].name);
		}
		/* Counted first, so ctl_config_free() frees a partial one. */
		c->nprofiles = i + 1;
		if ((rc = walk_profile(w, (const char *)k->data.scalar.value,
		    yamlwalk_node(w, pair->value), &c->profiles[i])) != 0)
			return rc;
	}
	return 0;
}

/* map's integer name, if given, into *out: from lo to hi, else refused. */
static int
get_bounded(struct yamlwalk *w, yaml_node_t *map, const char *key,
    const char *name, int64_t lo, int64_t hi, int64_t *out)
{
	int64_t v;
	int rc, present;

	if ((rc = get_int(w, map, key, name, &v, &present)) != 0)
		return rc;
	if (present && (v < lo || v > hi))
		return yamlwalk_fail(w, "%s.%s must be between %lld and %lld",
		    key, name, (long long)lo, (long long)hi);
	if (present)
		*out = v;
	return 0;
}

/* defaults, caps or quota: each given quantity replaces its default. */
static int
walk_resources(struct yamlwalk *w, yaml_node_t *root, const char *key,
    struct ctl_resources *r, int64_t *executions, int64_t *stored,
    int64_t *pools, int64_t *sessions)
{
	yaml_node_t *map;
	int rc;

	if ((rc = get_mapping(w, root, "", key, &map)) != 0 ||
	    (rc = yamlwalk_check_keys(w, map, key, executions != NULL ? quota_keys :
	    resource_keys)) != 0 ||
	    (rc = get_quantity(w, map, key, "cpu", 1, &r->cpu,
	    &r->cpu_milli)) != 0 ||
	    (rc = get_quantity(w, map, key, "memory", 0, &r->memory,
	    &r->memory_bytes)) != 0)
		return rc;
	if (executions == NULL)
		return get_quantity(w, map, key, "ephemeralStorage", 0,
		    &r->ephemeral_storage, &r->ephemeral_bytes);
	if ((rc = get_bounded(w, map, key, "executions", 1, EXECUTIONS_MAX,
	    executions)) != 0 ||
	    (rc = get_bounded(w, map, key, "storedExecutions", 1, STORED_MAX,
	    stored)) != 0)
		return rc;
	if ((rc = get_bounded(w, map, key, "storedPools", 0, POOLS_MAX, pools)) != 0)
		return rc;
	return get_bounded(w, map, key, "storedSessions", 0, SESSIONS_MAX, sessions);
}

/* Fail if a default is above its cap: every execution starts at one. */
static int
check_caps(struct yamlwalk *w, const struct ctl_config *c)
{
	const struct ctl_resources *d = &c->defaults, *m = &c->caps;

	if (d->cpu_milli > m->cpu_milli)
		return yamlwalk_fail(w, "defaults.cpu '%s' is above caps.cpu "
		    "'%s'", d->cpu, m->cpu);
	if (d->memory_bytes > m->memory_bytes)
		return yamlwalk_fail(w, "defaults.memory '%s' is above "
		    "caps.memory '%s'", d->memory, m->memory);
	if (d->ephemeral_bytes > m->ephemeral_bytes)
		return yamlwalk_fail(w, "defaults.ephemeralStorage '%s' is "
		    "above caps.ephemeralStorage '%s'", d->ephemeral_storage,
		    m->ephemeral_storage);
	return 0;
}

static void
resources_set(struct ctl_resources *r, const char *cpu, int64_t cpu_milli,
    const char *memory, int64_t memory_bytes, const char *eph,
    int64_t eph_bytes)
{
	r->cpu = xstrdup(cpu);
	r->cpu_milli = cpu_milli;
	r->memory = xstrdup(memory);
	r->memory_bytes = memory_bytes;
	r->ephemeral_storage = eph != NULL ? xstrdup(eph) : NULL;
	r->ephemeral_bytes = eph_bytes;
}

/* A config holding the documented defaults and no profiles. */
static struct ctl_config *
config_defaults(void)
{
	struct ctl_config *c = xcalloc(1, sizeof(*c));

	c->runtime_class = xstrdup("gvisor");
	c->network_runtime_class = xstrdup("gvisor-net");
	c->allow_custom_images = 0;
	c->run_as_user = 65532;
	c->tmp_size_limit = xstrdup("64Mi");
	c->tmp_size_bytes = INT64_C(64) << 20;
	c->priority_class = xstrdup("airlock-execution");
	resources_set(&c->defaults, "500m", 500, "256Mi", INT64_C(256) << 20,
	    "64Mi", INT64_C(64) << 20);
	resources_set(&c->caps, "2", 2000, "2Gi", INT64_C(2) << 30, "1Gi",
	    INT64_C(1) << 30);
	c->quota_executions = 20;
	c->quota_stored = 1000;
	c->quota_pools = 10;
	c->quota_sessions = 20;
	c->artifacts_bytes = ARTIFACTS_DEFAULT_BYTES;
	c->artifacts_files = ARTIFACTS_DEFAULT_FILES;
	resources_set(&c->quota, "8", 8000, "8Gi", INT64_C(8) << 30, NULL, 0);
	return c;
}

/*
 * artifacts: {maxBytes, maxFiles}: files out's budget per execution
 * (execution/artifacts.h); maxFiles 0 turns files out off.
 */
static int
walk_artifacts(struct yamlwalk *w, yaml_node_t *root, struct ctl_config *c)
{
	yaml_node_t *map;
	char *text = NULL;
	int64_t v, bytes = c->artifacts_bytes;
	int rc, present;

	if ((rc = get_mapping(w, root, "", "artifacts", &map)) != 0 || map == NULL)
		return rc;
	if ((rc = yamlwalk_check_keys(w, map, "artifacts", artifacts_keys)) != 0 ||
	    (rc = get_quantity(w, map, "artifacts", "maxBytes", 0, &text,
	    &bytes)) != 0)
		goto out;
	if (bytes > ARTIFACTS_MAX_BYTES) {
		rc = yamlwalk_fail(w, "artifacts.maxBytes '%s' is above %d (the "
		    "files, base64 in one object, must stay under etcd's limit)",
		    text, ARTIFACTS_MAX_BYTES);
		goto out;
	}
	c->artifacts_bytes = bytes;
	if ((rc = get_int(w, map, "artifacts", "maxFiles", &v, &present)) != 0)
		goto out;
	if (present && (v < 0 || v > ARTIFACTS_MAX_FILES)) {
		rc = yamlwalk_fail(w, "artifacts.maxFiles %lld is refused: it must "
		    "be from 0 (files out off) to %d", (long long)v,
		    ARTIFACTS_MAX_FILES);
		goto out;
	}
	if (present)
		c->artifacts_files = v;
out:
	free(text);
	return rc;
}

static int
config_walk(struct yamlwalk *w, yaml_node_t *root, struct ctl_config *c)
{
	int64_t uid;
	int rc, present;

	if ((rc = yamlwalk_check_keys(w, root, "", top_keys)) != 0 ||
	    (rc = get_class_name(w, root, "runtimeClassName",
	    &c->runtime_class)) != 0 ||
	    (rc = get_class_name(w, root, "networkRuntimeClassName",
	    &c->network_runtime_class)) != 0 ||
	    (rc = get_class_name(w, root, "priorityClassName",
	    &c->priority_class)) != 0 ||
	    (rc = yamlwalk_bool(w, root, "", "allowCustomImages",
	    &c->allow_custom_images)) != 0 ||
	    (rc = get_int(w, root, "", "runAsUser", &uid, &present)) != 0)
		return rc;
	/* One class for both: no sandbox could be told to have no network. */
	if (strcmp(c->runtime_class, c->network_runtime_class) == 0)
		return yamlwalk_fail(w, "networkRuntimeClassName '%s' is "
		    "runtimeClassName too: the network stack's class must be "
		    "another (docs/network.md)", c->network_runtime_class);
	if (present && (uid < 1 || uid > UID_MAX_K8S))
		return yamlwalk_fail(w, "runAsUser %lld is refused: it must be "
		    "a non-root uid from 1 to %lld", (long long)uid,
		    (long long)UID_MAX_K8S);
	if (present)
		c->run_as_user = uid;
	if ((rc = get_quantity(w, root, "", "tmpSizeLimit", 0,
	    &c->tmp_size_limit, &c->tmp_size_bytes)) != 0 ||
	    (rc = walk_resources(w, root, "defaults", &c->defaults,
	    NULL, NULL, NULL, NULL)) != 0 ||
	    (rc = walk_resources(w, root, "caps", &c->caps, NULL, NULL,
	    NULL, NULL)) != 0 ||
	    (rc = walk_resources(w, root, "quota", &c->quota,
	    &c->quota_executions, &c->quota_stored, &c->quota_pools,
	    &c->quota_sessions)) != 0 ||
	    (rc = check_caps(w, c)) != 0 ||
	    (rc = walk_artifacts(w, root, c)) != 0)
		return rc;
	return walk_profiles(w, root, c);
}

int
ctl_config_parse(const char *data, size_t len, const char *name,
    struct ctl_config **out, struct k8s_error *err)
{
	struct ctl_config *c = NULL;
	struct yamlwalk w;
	yaml_node_t *root;
	int rc;

	if (name == NULL)
		name = "(memory)";
	yamlwalk_init(&w, "config", name, err);
	if (len > CONFIG_MAX_BYTES) {
		rc = k8s_error_set(err, K8S_ETOOBIG, 0, NULL,
		    "config '%s' is larger than %d bytes", name,
		    CONFIG_MAX_BYTES);
		goto out;
	}
	if ((rc = yamlwalk_load(&w, data, len, &root)) != 0)
		goto out;
	c = config_defaults();
	if ((rc = config_walk(&w, root, c)) != 0)
		goto out;
	*out = c;
	c = NULL;
out:
	yamlwalk_free(&w);
	ctl_config_free(c);
	return rc;
}

int
ctl_config_load(const char *path, struct ctl_config **out,
    struct k8s_error *err)
{
	struct buf b;
	int rc;

	buf_init(&b, CONFIG_MAX_BYTES);
	if (path == NULL || *path == '\0') {
		rc = k8s_error_set(err, K8S_EINVAL, 0, NULL,
		    "config path is empty");
		goto out;
	}
	if ((rc = buf_read_file(&b, path, NULL)) == BUF_ETOOBIG) {
		rc = k8s_error_set(err, K8S_ETOOBIG, 0, NULL,
		    "config '%s' is larger than %d bytes", path,
		    CONFIG_MAX_BYTES);
		goto out;
	}
	if (rc != 0) {
		rc = k8s_error_set(err, K8S_EINVAL, 0, NULL,
		    "cannot read config '%s': %s", path, strerror(errno));
		goto out;
	}
	rc = ctl_config_parse(b.data, b.len, path, out, err);
out:
	buf_free(&b);
	return rc;
}

const struct ctl_profile *
ctl_config_profile(const struct ctl_config *c, const char *name)
{
	size_t i;

	if (c == NULL || name == NULL)
		return NULL;
	for (i = 0; i < c->nprofiles; i++)
		if (strcmp(c->profiles[i].name, name) == 0)
			return &c->profiles[i];
	return NULL;
}

static void
resources_free(struct ctl_resources *r)
{
	free(r->cpu);
	free(r->memory);
	free(r->ephemeral_storage);
}

void
ctl_config_free(struct ctl_config *c)
{
	size_t i;
	char **a;

	if (c == NULL)
		return;
	for (i = 0; i < c->nprofiles; i++) {
		free(c->profiles[i].name);
		free(c->profiles[i].image);
		for (a = c->profiles[i].command; a != NULL && *a != NULL; a++)
			free(*a);
		free(c->profiles[i].command);
		free(c->profiles[i].source_file);
		free(c->profiles[i].preload);
		free(c->profiles[i].warmup);
		egress_free(c->profiles[i].egress, c->profiles[i].negress);
	}
	free(c->profiles);
	free(c->runtime_class);
	free(c->network_runtime_class);
	free(c->tmp_size_limit);
	free(c->priority_class);
	resources_free(&c->defaults);
	resources_free(&c->caps);
	resources_free(&c->quota);
	free(c);
}
