/*
 * aclserve.c - see aclserve.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>

#include "aclserve.h"
#include "log.h"

void
aclserve_init(struct aclserve *s, const struct aclserve_source *src,
    int out, const char *ready_file)
{
	memset(s, 0, sizeof(*s));
	s->src = *src;
	s->out = out;
	s->ready_file = ready_file;
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

	if (n == 0 || n > 9 || n >= len || line[n] != ' ')
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
		    ACL_BAD_REQUEST, NULL);
	} else if (acl_parse_line(line, len, &rq) != 0) {
		log_debug("acl: malformed request", "bytes=%zu", len);
		n = acl_format_reply(out, rq.channel, ACL_BAD_REQUEST, NULL);
	} else
		n = s->src.answer(s->src.arg, &rq, out);
	return lines_write(s->out, out, n);
}

int
aclserve_feed(struct aclserve *s, const char *data, size_t n)
{
	return lines_feed(&s->in, data, n, on_line, s);
}

static void
set_ready(struct aclserve *s, int ready)
{
	int fd;

	if (ready) {
		fd = open(s->ready_file, O_WRONLY | O_CREAT | O_TRUNC |
		    O_CLOEXEC, 0644);
		if (fd < 0) {
			log_error("cannot create the ready file", "errno=%d",
			    errno);
			return;
		}
		close(fd);
		log_info("egress grants synced: ready");
	} else {
		if (unlink(s->ready_file) != 0 && errno != ENOENT)
			log_error("cannot remove the ready file", "errno=%d",
			    errno);
		log_warn("egress grants stale: not ready");
	}
	s->ready = ready;
}

void
aclserve_readiness(struct aclserve *s)
{
	int ready;

	if (s->ready_file == NULL)
		return;
	ready = !s->src.stale(s->src.arg);
	if (ready != s->ready)
		set_ready(s, ready);
}

int
aclserve_run(struct aclserve *s, int in)
{
	char chunk[65536];
	int rc = 0;

	/* Not there until this process says so: a restart starts unready. */
	if (s->ready_file != NULL)
		(void)unlink(s->ready_file);
	for (;;) {
		struct pollfd p = { .fd = in, .events = POLLIN };
		ssize_t r;

		aclserve_readiness(s);
		if (poll(&p, 1, 1000) < 0 && errno != EINTR) {
			rc = -1;
			break;
		}
		if (p.revents == 0)
			continue;
		r = read(in, chunk, sizeof(chunk));
		if (r < 0 && (errno == EINTR || errno == EAGAIN))
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
	if (s->ready_file != NULL && s->ready)
		(void)unlink(s->ready_file);
	return rc;
}
