/*
 * aclserve.c - see aclserve.h.
 */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>

#include "aclserve.h"
#include "log.h"

void
aclserve_init(struct aclserve *s, const unsigned char *key, size_t keylen,
    long long (*now)(void), int out)
{
	memset(s, 0, sizeof(*s));
	s->key = key;
	s->keylen = keylen;
	s->now = now;
	s->out = out;
	lines_init(&s->in, ACL_LINE_MAX);
}

void
aclserve_free(struct aclserve *s)
{
	lines_free(&s->in);
}

/* The channel a cut line began with ("" if none): its first field. */
static const char *
cut_channel(char *line, size_t len)
{
	size_t n = strspn(line, "0123456789");

	if (n == 0 || n > ACL_CHANNEL_MAX || n >= len || line[n] != ' ')
		return "";
	line[n] = '\0';
	return line;
}

static int
on_line(void *arg, char *line, size_t len, int too_long)
{
	struct aclserve *s = arg;
	struct acl_request rq;
	char out[ACL_REPLY_MAX];
	size_t n;

	line[len] = '\0';
	if (too_long) {
		log_debug("acl: request past the cap", "bytes=%zu", len);
		n = acl_format_reply(out, cut_channel(line, len),
		    ACL_BAD_REQUEST, NULL, NULL);
	} else if (acl_parse_line(line, len, &rq) != 0) {
		log_debug("acl: malformed request", "bytes=%zu", len);
		n = acl_format_reply(out, rq.channel, ACL_BAD_REQUEST, NULL,
		    NULL);
	} else
		n = acl_answer(&rq, s->key, s->keylen, s->now(), out);
	return lines_write(s->out, out, n);
}

int
aclserve_feed(struct aclserve *s, const char *data, size_t n)
{
	return lines_feed(&s->in, data, n, on_line, s);
}

int
aclserve_run(struct aclserve *s, int in)
{
	char chunk[65536];
	int rc = 0;

	for (;;) {
		ssize_t r = read(in, chunk, sizeof(chunk));

		if (r < 0 && errno == EAGAIN) {
			/* A non-blocking stdin: wait for it, never spin. */
			struct pollfd p = { .fd = in, .events = POLLIN };

			(void)poll(&p, 1, -1);
			continue;
		}
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			rc = r == 0 ? 0 : -1;
			break;
		}
		if (aclserve_feed(s, chunk, (size_t)r) != 0) {
			log_error("cannot write to squid", "errno=%d", errno);
			rc = -1;
			break;
		}
	}
	return rc;
}
