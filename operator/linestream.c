/*
 * linestream.c - see linestream.h. The transfer is watch.c's: a curl
 * multi handle polled a second at a time, which linestream_stop() wakes.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "buf.h"
#include "client_priv.h"
#include "linestream.h"
#include "log.h"
#include "xmalloc.h"

#define ERRBODY_MAX	(64u << 10)	/* a non-2xx answer's body */

struct linestream {
	struct k8s_client	*client;
	CURLM			*multi;		/* lives as long as s: wakeup target */
	atomic_bool		 stop;
	pthread_mutex_t		 lock;		/* linestream_stop against _free */

	/* Per request, touched only by the thread in linestream_get. */
	struct lines		 lines;
	struct buf		 errbody;
	const struct linestream_handlers *h;
	long			 status;
	int			 opened;
	int			 handler_rc;
};

struct linestream *
linestream_new(struct k8s_client *c, size_t max_line)
{
	struct linestream *s = xcalloc(1, sizeof(*s));

	s->client = c;
	if ((s->multi = curl_multi_init()) == NULL) {
		fprintf(stderr, "fatal: curl_multi_init failed\n");
		abort();
	}
	atomic_init(&s->stop, false);
	pthread_mutex_init(&s->lock, NULL);
	lines_init(&s->lines, max_line);
	buf_init(&s->errbody, ERRBODY_MAX);
	return s;
}

void
linestream_stop(struct linestream *s)
{
	pthread_mutex_lock(&s->lock);
	atomic_store(&s->stop, true);
	curl_multi_wakeup(s->multi);	/* under the lock: see linestream_free */
	pthread_mutex_unlock(&s->lock);
}

void
linestream_free(struct linestream *s)
{
	if (s == NULL)
		return;
	pthread_mutex_lock(&s->lock);
	pthread_mutex_unlock(&s->lock);
	curl_multi_cleanup(s->multi);
	pthread_mutex_destroy(&s->lock);
	lines_free(&s->lines);
	buf_free(&s->errbody);
	free(s);
}

static int
is_2xx(long status)
{
	return status >= 200 && status < 300;
}

static size_t
on_header(char *p, size_t size, size_t n, void *arg)
{
	struct linestream *s = arg;
	size_t len = size * n;

	/* The status line of each response (redirects aside) comes first. */
	if (len > 9 && strncmp(p, "HTTP/", 5) == 0) {
		const char *sp = memchr(p, ' ', len);

		s->status = sp ? strtol(sp + 1, NULL, 10) : 0;
	} else if ((len == 2 && p[0] == '\r' && p[1] == '\n') ||
	    (len == 1 && p[0] == '\n')) {
		if (is_2xx(s->status) && !s->opened) {
			s->opened = 1;
			if (s->h->on_open)
				s->h->on_open(s->h->arg);
		}
	}
	return len;
}

static size_t
on_body(char *p, size_t size, size_t n, void *arg)
{
	struct linestream *s = arg;
	size_t len = size * n;

	if (!is_2xx(s->status))
		/* An error answer: keep (a capped amount of) it for the message. */
		return buf_append(&s->errbody, p, len) == 0 ? len : 0;
	s->handler_rc = lines_feed(&s->lines, p, len, s->h->on_line, s->h->arg);
	return s->handler_rc == 0 ? len : 0;
}

/* Run h's transfer on s's multi handle until it ends or s is stopped. */
static CURLcode
perform(struct linestream *s, CURL *h)
{
	CURLcode cc = CURLE_OK;
	CURLMsg *msg;
	int running = 1, left;

	curl_multi_add_handle(s->multi, h);
	while (running && !atomic_load(&s->stop)) {
		if (curl_multi_perform(s->multi, &running) != CURLM_OK) {
			cc = CURLE_RECV_ERROR;
			break;
		}
		if (running)
			curl_multi_poll(s->multi, NULL, 0, 1000, NULL);
	}
	while ((msg = curl_multi_info_read(s->multi, &left)) != NULL)
		if (msg->msg == CURLMSG_DONE && msg->easy_handle == h)
			cc = msg->data.result;
	curl_multi_remove_handle(s->multi, h);
	return cc;
}

int
linestream_get(struct linestream *s, const char *path,
    const struct linestream_handlers *h, struct k8s_error *err)
{
	struct curl_slist *hdrs = NULL;
	char ebuf[CURL_ERROR_SIZE] = "";
	CURL *c;
	CURLcode cc;
	int rc;

	k8s_error_clear(err);
	if (atomic_load(&s->stop))
		return k8s_error_set(err, K8S_ECANCELED, 0, NULL, "stopped");
	if ((c = curl_easy_init()) == NULL) {
		fprintf(stderr, "fatal: curl_easy_init failed\n");
		abort();
	}
	/* No whole-request timeout: it lasts as long as the container. */
	if ((rc = k8s_client_setup(s->client, c, "GET", path, 0, &hdrs,
	    err)) != 0)
		goto out;
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, s);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, s);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, ebuf);
	lines_reset(&s->lines);
	buf_reset(&s->errbody);
	s->h = h;
	s->status = 0;
	s->opened = 0;
	s->handler_rc = 0;
	log_debug("line stream connect", "path=%s", path);
	cc = perform(s, c);
	if (atomic_load(&s->stop))
		rc = k8s_error_set(err, K8S_ECANCELED, 0, NULL, "stopped");
	else if (s->handler_rc != 0)
		rc = s->handler_rc;
	else if (s->status != 0 && !is_2xx(s->status))
		rc = k8s_error_from_response(s->status, s->errbody.data,
		    s->errbody.len, err);
	else if (cc != CURLE_OK || s->status == 0)
		rc = k8s_error_set(err, K8S_EIO, 0, NULL, "GET %s: %s", path,
		    ebuf[0] ? ebuf : curl_easy_strerror(cc));
	else
		rc = 0;
out:
	k8s_headers_free(hdrs);
	curl_easy_cleanup(c);
	return rc;
}
