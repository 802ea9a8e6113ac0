/* meterrules.c - see meter.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "meter.h"

int
meter_chain_name(const char *pod_uid, char out[METER_NAME])
{
	size_t n = strlen(METER_PREFIX);

	memcpy(out, METER_PREFIX, n);
	for (const char *p = pod_uid; *p && n < METER_NAME - 1; p++) {
		if (*p == '-')
			continue;
		if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
			return -1;
		out[n++] = *p;
	}
	out[n] = '\0';
	return n == METER_NAME - 1 ? 0 : -1;
}

const struct meter_seen *
meter_find(const struct meter_seen *seen, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(seen[i].name, name) == 0)
			return &seen[i];
	return NULL;
}

/* The entry of chain (len bytes at p) in out[0..*n), added if new and room. */
static struct meter_seen *
entry(struct meter_seen *out, size_t max, size_t *n, const char *p, size_t len)
{
	char name[METER_NAME];

	if (len != METER_NAME - 1 || strncmp(p, METER_PREFIX,
	    strlen(METER_PREFIX)) != 0)
		return NULL;
	memcpy(name, p, len);
	name[len] = '\0';
	for (size_t i = 0; i < *n; i++)
		if (strcmp(out[i].name, name) == 0)
			return &out[i];
	if (*n == max)
		return NULL;
	memset(&out[*n], 0, sizeof(out[*n]));
	memcpy(out[*n].name, name, sizeof(name));
	return &out[(*n)++];
}

/* The word after flag in rule (" -s 10.0.0.1/32 "): its address, /32 cut. */
static int
addr_of(const char *rule, const char *flag, char ip[METER_IP])
{
	const char *p = strstr(rule, flag);
	size_t len;

	if (p == NULL)
		return -1;
	p += strlen(flag);
	len = strcspn(p, "/ \n");
	if (len == 0 || len >= METER_IP || strncmp(p + len, "/32", 3) != 0)
		return -1;
	memcpy(ip, p, len);
	ip[len] = '\0';
	return 0;
}

/* One "[P:B] -A CHAIN ..." line (its end at eol) into out. */
static void
parse_rule(const char *line, const char *eol, struct meter_seen *out,
    size_t max, size_t *n)
{
	char rule[512];
	long long pkts, bytes;
	int used = 0;
	const char *chain, *target;
	size_t clen;
	struct meter_seen *s;

	if ((size_t)(eol - line) >= sizeof(rule))
		return;
	memcpy(rule, line, (size_t)(eol - line));
	rule[eol - line] = '\0';
	if (sscanf(rule, "[%lld:%lld] -A %n", &pkts, &bytes, &used) != 2 ||
	    used == 0)
		return;
	chain = rule + used;
	clen = strcspn(chain, " ");
	if (clen == strlen(METER_CHAIN) && strncmp(chain, METER_CHAIN, clen) == 0) {
		/* A jump: "-s IP/32 -j NAME" or "-d IP/32 -j NAME". */
		if ((target = strstr(chain, " -j ")) == NULL ||
		    (s = entry(out, max, n, target + 4, strcspn(target + 4,
		    " "))) == NULL)
			return;
		if (addr_of(chain, " -s ", s->src) != 0)
			(void)addr_of(chain, " -d ", s->dst);
		if (s->njump < METER_JUMPS && strlen(chain) < METER_RULE)
			memcpy(s->jump[s->njump++], chain, strlen(chain) + 1);
		return;
	}
	if ((s = entry(out, max, n, chain, clen)) == NULL)
		return;
	if (strstr(chain, " -m quota ") != NULL) {
		s->quota = 1;
		s->bytes = bytes;
	} else if (s->quota) {
		s->over += pkts;
	}
}

/*
 * The next rule line of METER_TABLE in a listing ("[P:B] -A CHAIN ..."),
 * from *cur on, which moves past it; its end (its newline, or the text's)
 * in *eol. *in_table: whether *cur is inside that table's section. NULL
 * past the last. One pass over the text, whatever its size.
 */
static const char *
next_rule(const char **cur, int *in_table, const char **eol)
{
	while (*cur != NULL && **cur != '\0') {
		const char *line = *cur, *e = strchr(line, '\n');

		if (e == NULL)
			e = line + strlen(line);
		*cur = *e ? e + 1 : NULL;
		if (*line == '*')
			*in_table = (size_t)(e - line) == strlen("*" METER_TABLE) &&
			    strncmp(line, "*" METER_TABLE, strlen("*" METER_TABLE)) == 0;
		else if (*in_table && *line == '[') {
			*eol = e;
			return line;
		}
	}
	return NULL;
}

size_t
meter_parse(const char *text, struct meter_seen *out, size_t max)
{
	const char *cur = text, *line, *eol;
	size_t n = 0;
	int in_table = 0;

	while ((line = next_rule(&cur, &in_table, &eol)) != NULL)
		parse_rule(line, eol, out, max, &n);
	return n;
}

enum meter_jump
meter_forward(const char *text)
{
	static const char fwd[] = "-A FORWARD ", jump[] = "-A FORWARD -j " METER_CHAIN;
	const char *cur = text, *line, *eol, *rule;
	int in_table = 0, first = 1;

	while ((line = next_rule(&cur, &in_table, &eol)) != NULL) {
		/* The rule's words after its counters: "[P:B] -A ...". */
		if ((rule = memchr(line, ']', (size_t)(eol - line))) == NULL ||
		    (size_t)(eol - rule) < 2 + strlen(fwd) ||
		    strncmp(rule + 2, fwd, strlen(fwd)) != 0)
			continue;
		rule += 2;
		if ((size_t)(eol - rule) == strlen(jump) &&
		    strncmp(rule, jump, strlen(jump)) == 0)
			return first ? METER_FIRST : METER_LATER;
		first = 0;
	}
	return METER_ABSENT;
}

int
meter_forward_fix(struct buf *b, enum meter_jump where)
{
	if (where == METER_FIRST)
		return 0;
	if (where == METER_LATER &&
	    buf_append_str(b, "-D FORWARD -j " METER_CHAIN "\n") != 0)
		return BUF_ETOOBIG;
	return buf_append_str(b, "-I FORWARD 1 -j " METER_CHAIN "\n");
}

int
meter_install(struct buf *b, const char *name, const char *ip, int port,
    long long cap)
{
	char t[1024];

	snprintf(t, sizeof(t),
	    ":%s - [0:0]\n"
	    "-A %s -s %s/32 -p tcp -m tcp --dport %d -j DROP\n"
	    "-A %s -m quota --quota %lld -j RETURN\n"
	    "-A %s -j DROP\n"
	    "-I %s -s %s/32 -j %s\n"
	    "-I %s -d %s/32 -m conntrack --ctdir REPLY -j %s\n",
	    name, name, ip, port, name, cap, name,
	    METER_CHAIN, ip, name, METER_CHAIN, ip, name);
	return buf_append_str(b, t);
}

int
meter_remove(struct buf *b, const struct meter_seen *s)
{
	char t[METER_JUMPS * (METER_RULE + 4) + 128];
	int n = 0;

	for (int i = 0; i < s->njump; i++)
		n += snprintf(t + n, sizeof(t) - (size_t)n, "-D %s\n", s->jump[i]);
	snprintf(t + n, sizeof(t) - (size_t)n, "-F %s\n-X %s\n", s->name, s->name);
	return buf_append_str(b, t);
}
