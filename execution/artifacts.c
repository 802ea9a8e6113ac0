/*
 * artifacts.c - see artifacts.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "artifacts.h"
#include "base64.h"
#include "sha256.h"
#include "xmalloc.h"

#define BLOCK		512
#define DROPPED_NAME	".airlock-dropped"
#define STEP_NAME	".airlock-step"
#define VALUE_NAME	".airlock-value"

static int is_text(const unsigned char *p, size_t len);

const struct k8s_resource artifacts_resource = {
	"airlock.dev", "v1alpha1", "codeexecutionartifacts", 1
};

void
artifacts_nonce(const char *uid, char out[33])
{
	char in[128], full[65];

	snprintf(in, sizeof(in), "airlock.dev/out\n%s", uid ? uid : "");
	sha256_hex(in, strlen(in), full);
	memcpy(out, full, 32);
	out[32] = '\0';
}

int
artifacts_path_ok(const char *p)
{
	const char *s = p, *e;

	if (*p == '\0' || *p == '/' || strlen(p) > ARTIFACTS_PATH_MAX)
		return 0;
	for (e = p; *e; e++)
		if ((unsigned char)*e < 0x20 || (unsigned char)*e >= 0x7f || *e == '\\')
			return 0;
	for (;;) {
		e = strchr(s, '/');
		if (e == NULL)
			e = s + strlen(s);
		if (e == s || (e - s == 1 && s[0] == '.') ||
		    (e - s == 2 && s[0] == '.' && s[1] == '.'))
			return 0;
		if (*e == '\0')
			return 1;
		s = e + 1;
	}
}

/* An octal field: its value, or -1. */
static long long
octal(const char *p, size_t n)
{
	long long v = 0;
	size_t i = 0;

	while (i < n && p[i] == ' ')
		i++;
	if (i == n || p[i] < '0' || p[i] > '7')
		return -1;
	for (; i < n && p[i] >= '0' && p[i] <= '7'; i++) {
		if (v > (1LL << 40))
			return -1;
		v = v * 8 + (p[i] - '0');
	}
	return v;
}

static int
header_sum_ok(const unsigned char *h)
{
	long long want = octal((const char *)h + 148, 8);
	unsigned sum = 0;

	for (int i = 0; i < BLOCK; i++)
		sum += (i >= 148 && i < 156) ? ' ' : h[i];
	return want >= 0 && (unsigned long long)want == sum;
}

static void
drop(struct artifacts *a, const char *path, long long size, const char *why)
{
	struct artifact_dropped *d;

	if (a->ndropped >= 1024)
		return;		/* the message says how many; enough */
	a->dropped = xrealloc(a->dropped, (a->ndropped + 1) * sizeof(*a->dropped));
	d = &a->dropped[a->ndropped++];
	d->path = xstrdup(path);
	d->size = size;
	d->why = xstrdup(why);
}

/* The runner's list of what it left out: "SIZE\tWHY\tPATH\n" lines. */
static void
read_dropped(struct artifacts *a, const char *p, size_t len)
{
	const char *end = p + len;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *t1, *t2;
		char size[24], why[128], path[ARTIFACTS_PATH_MAX + 1];
		size_t n;

		if (nl == NULL)
			nl = end;
		t1 = memchr(p, '\t', (size_t)(nl - p));
		t2 = t1 ? memchr(t1 + 1, '\t', (size_t)(nl - t1 - 1)) : NULL;
		if (t2 != NULL && (size_t)(t1 - p) < sizeof(size) &&
		    (size_t)(t2 - t1 - 1) < sizeof(why) &&
		    (n = (size_t)(nl - t2 - 1)) < sizeof(path)) {
			memcpy(size, p, (size_t)(t1 - p));
			size[t1 - p] = '\0';
			memcpy(why, t1 + 1, (size_t)(t2 - t1 - 1));
			why[t2 - t1 - 1] = '\0';
			memcpy(path, t2 + 1, n);
			path[n] = '\0';
			/* Its words, but only printable ones. */
			for (char *c = why; *c; c++)
				if ((unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7f)
					*c = '?';
			for (char *c = path; *c; c++)
				if ((unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7f)
					*c = '?';
			drop(a, path, strtoll(size, NULL, 10), why);
		}
		p = nl + 1;
	}
}

/*
 * ".airlock-step": "KIND CODE RESTARTED DROPPED RESTARTS\n", or an older
 * runner's "KIND CODE RESTARTED DROPPED\n" (RESTARTED 0-2, restarts
 * unknown); a bad one is no report.
 */
static void
read_step(struct step_report *r, const char *data, size_t len)
{
	static const char *const kinds[] = { [STEP_OK] = "ok", [STEP_ERROR] =
	    "error", [STEP_EXIT] = "exit", [STEP_TIMEOUT] = "timeout",
	    [STEP_DIED] = "died", [STEP_FAILED] = "failed" };
	char line[128], kind[16], sep, end;
	long code, restarted;
	long long dropped, restarts = -1;
	int n;

	r->kind = STEP_NONE;
	r->restarts = -1;
	if (len == 0 || len >= sizeof(line) || memchr(data, '\n', len) != data + len - 1)
		return;
	memcpy(line, data, len);
	line[len] = '\0';
	n = sscanf(line, "%15[a-z] %ld %ld %lld%c%lld%c", kind, &code, &restarted,
	    &dropped, &sep, &restarts, &end);
	/* Four fields: "...DROPPED\n"; five: "...DROPPED RESTARTS\n". */
	if (n == 5)
		end = sep;
	else if (n != 7 || sep != ' ')
		return;
	if (end != '\n' || code < 0 || code > 255 ||
	    restarted < 0 || restarted > (n == 7 ? 3 : 2) || dropped < 0 ||
	    (n == 7 && (restarts < 0 || restarts > ARTIFACTS_RESTARTS_MAX)))
		return;
	for (size_t k = STEP_OK; k < sizeof(kinds) / sizeof(kinds[0]); k++)
		if (strcmp(kind, kinds[k]) == 0) {
			r->kind = (enum step_kind)k;
			r->code = (int)code;
			r->restarted = (int)restarted;
			r->dropped = dropped;
			r->restarts = restarts;
		}
}

void
artifacts_parse(const char *b64, size_t len, size_t max_bytes,
    size_t max_files, struct artifacts *a)
{
	size_t alen = 0, off = 0;

	memset(a, 0, sizeof(*a));
	a->step.restarts = -1;	/* no report: unknown */
	if (base64_decode(b64, len, &a->archive, &alen) != 0) {
		snprintf(a->error, sizeof(a->error), "the files out are not base64");
		a->archive = NULL;
		return;
	}
	while (off + BLOCK <= alen) {
		const unsigned char *h = (const unsigned char *)a->archive + off;
		char name[ARTIFACTS_PATH_MAX + 2];
		size_t nlen, plen;
		long long size;
		const char *data;
		int dup = 0;

		if (h[0] == '\0')
			return;		/* the end */
		if (!header_sum_ok(h)) {
			snprintf(a->error, sizeof(a->error), "the files out are not "
			    "a ustar archive (a bad header checksum at byte %zu)", off);
			return;
		}
		nlen = strnlen((const char *)h, 100);
		plen = strnlen((const char *)h + 345, 155);
		if (plen)
			snprintf(name, sizeof(name), "%.*s/%.*s", (int)plen,
			    (const char *)h + 345, (int)nlen, (const char *)h);
		else
			snprintf(name, sizeof(name), "%.*s", (int)nlen, (const char *)h);
		size = octal((const char *)h + 124, 12);
		off += BLOCK;
		if (size < 0 || (size_t)size > alen - off) {
			snprintf(a->error, sizeof(a->error), "the files out are cut "
			    "short (at %.64s)", name);
			return;
		}
		data = a->archive + off;
		off += ((size_t)size + BLOCK - 1) / BLOCK * BLOCK;
		if (off > alen)
			off = alen;
		if (h[156] != '0' && h[156] != '\0') {
			drop(a, artifacts_path_ok(name) ? name : "(a bad name)", -1,
			    "not a regular file");
			continue;
		}
		if (strcmp(name, DROPPED_NAME) == 0) {
			read_dropped(a, data, (size_t)size);
			continue;
		}
		if (strcmp(name, STEP_NAME) == 0) {
			read_step(&a->step, data, (size_t)size);
			continue;
		}
		if (strcmp(name, VALUE_NAME) == 0) {
			/*
			 * Text (the status is JSON), cut between characters;
			 * the program can write this file too: anything else
			 * is no value.
			 */
			size_t n = (size_t)size < ARTIFACTS_VALUE_MAX ?
			    (size_t)size : ARTIFACTS_VALUE_MAX;

			for (int back = 0; back < 3 && (size_t)size > n && n > 0 &&
			    !is_text((const unsigned char *)data, n); back++)
				n--;
			a->step.value = is_text((const unsigned char *)data, n) ?
			    data : NULL;
			a->step.value_len = a->step.value ? n : 0;
			continue;
		}
		if (!artifacts_path_ok(name)) {
			drop(a, "(a bad name)", size, "its name is not a relative path "
			    "of printable ASCII");
			continue;
		}
		for (size_t i = 0; i < a->nfiles; i++)
			dup |= strcmp(a->files[i].path, name) == 0;
		if (dup) {
			drop(a, name, size, "given twice");
			continue;
		}
		if (a->nfiles >= max_files) {
			drop(a, name, size, "past the limit on files");
			continue;
		}
		if ((size_t)size > max_bytes - a->bytes) {
			drop(a, name, size, "over the byte budget");
			continue;
		}
		a->files = xrealloc(a->files, (a->nfiles + 1) * sizeof(*a->files));
		{
			struct artifact *f = &a->files[a->nfiles++];

			f->path = xstrdup(name);
			f->size = (size_t)size;
			f->data = data;
			sha256_hex(data, f->size, f->sha256);
			f->content_type = artifacts_content_type(name, data, f->size);
		}
		a->bytes += (size_t)size;
	}
}

void
artifacts_free(struct artifacts *a)
{
	for (size_t i = 0; i < a->nfiles; i++)
		free(a->files[i].path);
	for (size_t i = 0; i < a->ndropped; i++) {
		free(a->dropped[i].path);
		free(a->dropped[i].why);
	}
	free(a->files);
	free(a->dropped);
	free(a->archive);
	memset(a, 0, sizeof(*a));
}

static int
ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	return n >= m && strcmp(s + n - m, suffix) == 0;
}

/*
 * Valid UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing past
 * U+10FFFF, as jansson checks it) with no control bytes but tab, CR and
 * LF: text.
 */
static int
is_text(const unsigned char *p, size_t len)
{
	size_t i = 0;

	while (i < len) {
		unsigned char c = p[i];
		size_t n = c < 0x80 ? 1 : c >= 0xc2 && c <= 0xdf ? 2 :
		    c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
		unsigned char lo = 0x80, hi = 0xbf;

		if (n == 0 || i + n > len)
			return 0;
		if (n == 1 && c < 0x20 && c != '\t' && c != '\n' && c != '\r')
			return 0;
		/* The second byte's range rules out the overlong and the rest. */
		if (c == 0xe0)
			lo = 0xa0;
		else if (c == 0xed)
			hi = 0x9f;
		else if (c == 0xf0)
			lo = 0x90;
		else if (c == 0xf4)
			hi = 0x8f;
		for (size_t k = 1; k < n; k++) {
			unsigned char b = p[i + k];

			if (k == 1 ? b < lo || b > hi : (b & 0xc0) != 0x80)
				return 0;
		}
		i += n;
	}
	return 1;
}

const char *
artifacts_content_type(const char *path, const char *data, size_t len)
{
	const unsigned char *d = (const unsigned char *)data;

	if (len >= 8 && memcmp(d, "\x89PNG\r\n\x1a\n", 8) == 0)
		return "image/png";
	if (len >= 3 && memcmp(d, "\xff\xd8\xff", 3) == 0)
		return "image/jpeg";
	if (len >= 6 && (memcmp(d, "GIF87a", 6) == 0 || memcmp(d, "GIF89a", 6) == 0))
		return "image/gif";
	if (len >= 5 && memcmp(d, "%PDF-", 5) == 0)
		return "application/pdf";
	if (len >= 4 && memcmp(d, "PK\x03\x04", 4) == 0)
		return "application/zip";
	if (is_text(d, len)) {
		if (ends_with(path, ".svg"))
			return "image/svg+xml";
		if (ends_with(path, ".csv"))
			return "text/csv";
		if (ends_with(path, ".json"))
			return "application/json";
		if (ends_with(path, ".html") || ends_with(path, ".htm"))
			return "text/html";
		if (ends_with(path, ".md"))
			return "text/markdown";
		return "text/plain";
	}
	return "application/octet-stream";
}

json_t *
artifacts_status(const struct artifacts *a)
{
	json_t *out = json_array();

	for (size_t i = 0; i < a->nfiles; i++)
		json_array_append_new(out, json_pack("{s:s, s:I, s:s, s:s}", "path",
		    a->files[i].path, "size", (json_int_t)a->files[i].size,
		    "sha256", a->files[i].sha256, "contentType",
		    a->files[i].content_type));
	return out;
}

json_t *
artifacts_object(const struct artifacts *a, const char *ns, const char *name,
    const char *uid, const char *node)
{
	json_t *files = json_array();

	for (size_t i = 0; i < a->nfiles; i++) {
		char *b = base64_encode(a->files[i].data, a->files[i].size, NULL);

		json_array_append_new(files, json_pack("{s:s, s:I, s:s, s:s, s:s}",
		    "path", a->files[i].path, "size", (json_int_t)a->files[i].size,
		    "sha256", a->files[i].sha256, "contentType",
		    a->files[i].content_type, "content", b));
		free(b);
	}
	return json_pack("{s:s, s:s, s:{s:s, s:s, s:{s:s, s:s}, s:{s:s},"
	    " s:[{s:s, s:s, s:s, s:s, s:b, s:b}]}, s:o}",
	    "apiVersion", "airlock.dev/v1alpha1", "kind", "CodeExecutionArtifacts",
	    "metadata", "name", name, "namespace", ns, "labels",
	    "app.kubernetes.io/managed-by", "airlock-node-agent",
	    "airlock.dev/execution-uid", uid,
	    "annotations", ARTIFACTS_ANN_NODE, node ? node : "",
	    "ownerReferences", "apiVersion", "airlock.dev/v1alpha1", "kind",
	    "CodeExecution", "name", name, "uid", uid, "controller", 1,
	    "blockOwnerDeletion", 0,
	    "files", files);
}

void
artifacts_message(const struct artifacts *a, char *out, size_t out_size)
{
	size_t o = 0;

	out[0] = '\0';
	if (a->error[0] != '\0') {
		snprintf(out, out_size, "; no files out: %s", a->error);
		return;
	}
	if (a->ndropped == 0)
		return;
	o = (size_t)snprintf(out, out_size, "; %zu file%s out left out:",
	    a->ndropped, a->ndropped == 1 ? "" : "s");
	for (size_t i = 0; i < a->ndropped && o < out_size; i++) {
		char one[ARTIFACTS_PATH_MAX + 200];
		int n;

		if (a->dropped[i].size >= 0)
			n = snprintf(one, sizeof(one), "%s %s (%lld bytes: %s)",
			    i ? "," : "", a->dropped[i].path, a->dropped[i].size,
			    a->dropped[i].why);
		else
			n = snprintf(one, sizeof(one), "%s %s (%s)", i ? "," : "",
			    a->dropped[i].path, a->dropped[i].why);
		if (o + (size_t)n + 4 >= out_size) {
			snprintf(out + o, out_size - o, " ...");
			return;
		}
		memcpy(out + o, one, (size_t)n + 1);
		o += (size_t)n;
	}
}
