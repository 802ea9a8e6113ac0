#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "buf.h"
#include "ctrd.h"
#include "pb.h"
#include "xmalloc.h"

#define UNARY_TIMEOUT_MS	10000L

struct ctrd {
	char	*socket;
	char	*ns_header;	/* "containerd-namespace: NS" */
};

struct ctrd *
ctrd_new(const char *socket, const char *ns)
{
	struct ctrd *c = xcalloc(1, sizeof(*c));

	c->socket = xstrdup(socket);
	c->ns_header = xasprintf("containerd-namespace: %s", ns);
	return c;
}

void
ctrd_free(struct ctrd *c)
{
	if (c == NULL)
		return;
	free(c->socket);
	free(c->ns_header);
	free(c);
}

/* --- framing ----------------------------------------------------------- */

void
ctrd_framer_init(struct ctrd_framer *f)
{
	memset(f, 0, sizeof(*f));
}

void
ctrd_framer_free(struct ctrd_framer *f)
{
	free(f->msg);
	f->msg = NULL;
}

int
ctrd_framer_feed(struct ctrd_framer *f, const void *p, size_t n,
    int (*fn)(void *arg, const uint8_t *msg, size_t len), void *arg)
{
	const uint8_t *in = p;
	int rc;

	if (f->failed)
		return f->failed;
	while (n > 0) {
		if (f->hdr_have < 5) {
			size_t k = 5 - f->hdr_have < n ? 5 - f->hdr_have : n;

			memcpy(f->hdr + f->hdr_have, in, k);
			f->hdr_have += k;
			in += k;
			n -= k;
			if (f->hdr_have < 5)
				break;
			if (f->hdr[0] != 0)
				return f->failed = K8S_EINVAL;	/* compressed */
			f->want = (size_t)f->hdr[1] << 24 | (size_t)f->hdr[2] << 16 |
			    (size_t)f->hdr[3] << 8 | f->hdr[4];
			if (f->want > CTRD_MSG_MAX)
				return f->failed = K8S_ETOOBIG;
			f->msg_have = 0;
			f->msg = xmalloc(f->want ? f->want : 1);
		}
		size_t k = f->want - f->msg_have < n ? f->want - f->msg_have : n;

		memcpy(f->msg + f->msg_have, in, k);
		f->msg_have += k;
		in += k;
		n -= k;
		if (f->msg_have == f->want) {
			uint8_t *m = f->msg;

			f->msg = NULL;
			f->hdr_have = 0;
			rc = fn(arg, m, f->want);
			free(m);
			if (rc != 0)
				return rc;
		}
	}
	return 0;
}

/* --- decoding ---------------------------------------------------------- */

/* google.protobuf.Timestamp as nanoseconds since the epoch. */
static int
decode_time(const struct pb_field *f, int64_t *ns)
{
	struct pb_reader r;
	struct pb_field g;
	int64_t sec = 0, nsec = 0;
	int rc;

	if (f->wire != PB_LEN)
		return K8S_EINVAL;
	pb_reader_init(&r, f->data, f->len);
	while ((rc = pb_next(&r, &g)) == 1) {
		if (g.num == 1 && g.wire == PB_VARINT)
			sec = (int64_t)g.u;
		else if (g.num == 2 && g.wire == PB_VARINT)
			nsec = (int32_t)(uint32_t)g.u;
	}
	if (rc != 0 || sec < 0 || sec > INT64_MAX / 1000000000 - 1 ||
	    nsec < 0 || nsec > 999999999)
		return K8S_EINVAL;
	*ns = sec * 1000000000 + nsec;
	return 0;
}

/* A string field copied NUL-terminated into scratch, advancing it. */
static const char *
take_str(const struct pb_field *f, char **scratch)
{
	char *s = *scratch;

	if (f->wire != PB_LEN || memchr(f->data, '\0', f->len) != NULL)
		return NULL;
	memcpy(s, f->data, f->len);
	s[f->len] = '\0';
	*scratch += f->len + 1;
	return s;
}

/* TaskStart, TaskExit, TaskOOM: all name the container in field 1. */
static int
decode_task(enum ctrd_event_kind kind, const uint8_t *p, size_t n,
    struct ctrd_event *ev, char **scratch)
{
	struct pb_reader r;
	struct pb_field f;
	int rc;

	pb_reader_init(&r, p, n);
	while ((rc = pb_next(&r, &f)) == 1) {
		if (f.num == 1) {
			if ((ev->container_id = take_str(&f, scratch)) == NULL)
				return K8S_EINVAL;
		} else if (kind == CTRD_EV_TASK_START && f.num == 2 &&
		    f.wire == PB_VARINT) {
			ev->pid = (uint32_t)f.u;
		} else if (kind == CTRD_EV_TASK_EXIT && f.num == 2) {
			if ((ev->exec_id = take_str(&f, scratch)) == NULL)
				return K8S_EINVAL;
		} else if (kind == CTRD_EV_TASK_EXIT && f.num == 3 &&
		    f.wire == PB_VARINT) {
			ev->pid = (uint32_t)f.u;
		} else if (kind == CTRD_EV_TASK_EXIT && f.num == 4 &&
		    f.wire == PB_VARINT) {
			ev->exit_status = (uint32_t)f.u;
		} else if (kind == CTRD_EV_TASK_EXIT && f.num == 5) {
			if (decode_time(&f, &ev->exited_ns) != 0)
				return K8S_EINVAL;
		}
	}
	if (rc != 0 || ev->container_id == NULL)
		return K8S_EINVAL;
	return 0;
}

int
ctrd_decode_envelope(const void *msg, size_t len, struct ctrd_event *ev,
    char *scratch)
{
	struct pb_reader r, ar;
	struct pb_field f, a;
	const uint8_t *value = NULL;
	size_t vlen = 0;
	int rc, have_any = 0;

	memset(ev, 0, sizeof(*ev));
	pb_reader_init(&r, msg, len);
	while ((rc = pb_next(&r, &f)) == 1) {
		switch (f.num) {
		case 1:
			if (decode_time(&f, &ev->ts_ns) != 0)
				return K8S_EINVAL;
			break;
		case 2:
			if ((ev->ns = take_str(&f, &scratch)) == NULL)
				return K8S_EINVAL;
			break;
		case 3:
			if ((ev->topic = take_str(&f, &scratch)) == NULL)
				return K8S_EINVAL;
			break;
		case 4:		/* google.protobuf.Any: type_url, value */
			if (f.wire != PB_LEN)
				return K8S_EINVAL;
			have_any = 1;
			pb_reader_init(&ar, f.data, f.len);
			while ((rc = pb_next(&ar, &a)) == 1)
				if (a.num == 2 && a.wire == PB_LEN) {
					value = a.data;
					vlen = a.len;
				}
			if (rc != 0)
				return K8S_EINVAL;
			break;
		}
	}
	if (rc != 0 || ev->topic == NULL)
		return K8S_EINVAL;
	if (strcmp(ev->topic, "/tasks/start") == 0)
		ev->kind = CTRD_EV_TASK_START;
	else if (strcmp(ev->topic, "/tasks/exit") == 0)
		ev->kind = CTRD_EV_TASK_EXIT;
	else if (strcmp(ev->topic, "/tasks/oom") == 0)
		ev->kind = CTRD_EV_TASK_OOM;
	else
		return 0;
	if (!have_any)
		return K8S_EINVAL;
	return decode_task(ev->kind, value ? value : (const uint8_t *)"", vlen,
	    ev, &scratch);
}

/* --- transport --------------------------------------------------------- */

struct call {
	struct ctrd_framer	 framer;
	int			 grpc_status;	/* -1 until seen */
	char			 grpc_message[256];
	/* unary: the first reply message */
	struct buf		 reply;
	int			 have_reply;
	/* streaming */
	int			(*fn)(void *arg, const struct ctrd_event *ev);
	void			*arg;
	int			 fn_rc;
	atomic_int		*stop;
};

static size_t
on_header(char *p, size_t size, size_t n, void *arg)
{
	struct call *call = arg;
	size_t len = size * n, k;

	if (len > 12 && strncasecmp(p, "grpc-status:", 12) == 0) {
		call->grpc_status = atoi(p + 12);
	} else if (len > 13 && strncasecmp(p, "grpc-message:", 13) == 0) {
		const char *v = p + 13;

		while (v < p + len && *v == ' ')
			v++;
		k = (size_t)(p + len - v);
		while (k > 0 && (v[k - 1] == '\r' || v[k - 1] == '\n'))
			k--;
		if (k >= sizeof(call->grpc_message))
			k = sizeof(call->grpc_message) - 1;
		memcpy(call->grpc_message, v, k);	/* percent-encoded */
		call->grpc_message[k] = '\0';
	}
	return len;
}

static int
unary_msg(void *arg, const uint8_t *msg, size_t len)
{
	struct call *call = arg;

	if (call->have_reply)
		return 0;	/* a unary call has one; ignore more */
	call->have_reply = 1;
	return buf_append(&call->reply, msg, len) == 0 ? 0 : K8S_ETOOBIG;
}

static int
stream_msg(void *arg, const uint8_t *msg, size_t len)
{
	struct call *call = arg;
	struct ctrd_event ev;
	char *scratch = xmalloc(len + 4);
	int rc;

	if (ctrd_decode_envelope(msg, len, &ev, scratch) != 0) {
		free(scratch);
		return K8S_EINVAL;
	}
	rc = call->fn(call->arg, &ev);
	free(scratch);
	if (rc != 0)
		call->fn_rc = rc;
	return rc;
}

static size_t
on_body_unary(char *p, size_t size, size_t n, void *arg)
{
	struct call *call = arg;

	if (ctrd_framer_feed(&call->framer, p, size * n, unary_msg, call) != 0)
		return 0;	/* makes curl fail the transfer */
	return size * n;
}

static size_t
on_body_stream(char *p, size_t size, size_t n, void *arg)
{
	struct call *call = arg;

	if (ctrd_framer_feed(&call->framer, p, size * n, stream_msg, call) != 0)
		return 0;
	return size * n;
}

static int
on_progress(void *arg, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
	struct call *call = arg;

	(void)a; (void)b; (void)c; (void)d;
	return call->stop && atomic_load(call->stop) ? 1 : 0;
}

/*
 * POST one framed request to /service/method and run the response
 * through the call's body handler. The gRPC status decides the outcome.
 */
static int
grpc_call(struct ctrd *c, const char *method, struct buf *req,
    struct call *call, int streaming, struct k8s_error *err)
{
	CURL *h = curl_easy_init();
	struct curl_slist *hdrs = NULL;
	char url[256], frame[5];
	struct buf body;
	CURLcode cc;
	int rc;

	if (h == NULL)
		return k8s_error_set(err, K8S_EIO, 0, NULL, "cannot make a curl handle");
	buf_init(&body, CTRD_MSG_MAX + 5);
	frame[0] = 0;
	frame[1] = (char)(req->len >> 24);
	frame[2] = (char)(req->len >> 16);
	frame[3] = (char)(req->len >> 8);
	frame[4] = (char)req->len;
	if (buf_append(&body, frame, 5) != 0 ||
	    buf_append(&body, req->data ? req->data : "", req->len) != 0) {
		rc = k8s_error_set(err, K8S_ETOOBIG, 0, NULL,
		    "%s: request too large", method);
		goto out;
	}
	snprintf(url, sizeof(url), "http://localhost%s", method);
	hdrs = curl_slist_append(hdrs, "Content-Type: application/grpc");
	hdrs = curl_slist_append(hdrs, "TE: trailers");
	hdrs = curl_slist_append(hdrs, c->ns_header);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, c->socket);
	curl_easy_setopt(h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(h, CURLOPT_POST, 1L);
	curl_easy_setopt(h, CURLOPT_POSTFIELDS, body.data);
	curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)body.len);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, call);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION,
	    streaming ? on_body_stream : on_body_unary);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, call);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
	if (streaming) {
		curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
		curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
		curl_easy_setopt(h, CURLOPT_XFERINFODATA, call);
	} else {
		curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, UNARY_TIMEOUT_MS);
	}
	cc = curl_easy_perform(h);
	if (streaming && call->fn_rc != 0) {
		rc = call->fn_rc;
		goto out;
	}
	if (streaming && call->stop && atomic_load(call->stop)) {
		rc = k8s_error_set(err, K8S_ECANCELED, 0, NULL, "%s: stopped",
		    method);
		goto out;
	}
	if (call->framer.failed) {
		rc = k8s_error_set(err, call->framer.failed == K8S_ETOOBIG ?
		    K8S_ETOOBIG : K8S_EINVAL, 0, NULL, "%s: bad reply from "
		    "containerd: %s", method, k8s_strerror(call->framer.failed));
		goto out;
	}
	if (cc != CURLE_OK && call->grpc_status < 0) {
		rc = k8s_error_set(err, K8S_EIO, 0, NULL, "%s: %s: %s", method,
		    c->socket, curl_easy_strerror(cc));
		goto out;
	}
	switch (call->grpc_status) {
	case 0:
		rc = 0;
		if (streaming)	/* the server ended the stream */
			rc = k8s_error_set(err, K8S_EIO, 0, NULL,
			    "%s: containerd ended the stream", method);
		break;
	case 5:
		rc = k8s_error_set(err, K8S_ENOTFOUND, 5, "NotFound", "%s",
		    call->grpc_message);
		break;
	case 6:
		rc = k8s_error_set(err, K8S_EEXIST, 6, "AlreadyExists", "%s",
		    call->grpc_message);
		break;
	case -1:
		rc = k8s_error_set(err, K8S_EIO, 0, NULL,
		    "%s: no grpc-status from containerd", method);
		break;
	default:
		rc = k8s_error_set(err, K8S_EHTTP, call->grpc_status, NULL,
		    "%s: %s", method, call->grpc_message);
		break;
	}
out:
	curl_slist_free_all(hdrs);
	curl_easy_cleanup(h);
	buf_free(&body);
	return rc;
}

static void
call_init(struct call *call)
{
	memset(call, 0, sizeof(*call));
	ctrd_framer_init(&call->framer);
	call->grpc_status = -1;
	buf_init(&call->reply, CTRD_MSG_MAX);
}

static void
call_free(struct call *call)
{
	ctrd_framer_free(&call->framer);
	buf_free(&call->reply);
}

/* A unary call: req in, *reply (a pb_reader over call->reply) out. */
static int
unary(struct ctrd *c, const char *method, struct buf *req, struct call *call,
    struct pb_reader *reply, struct k8s_error *err)
{
	int rc = grpc_call(c, method, req, call, 0, err);

	if (rc == 0)
		pb_reader_init(reply, call->reply.data, call->reply.len);
	return rc;
}

int
ctrd_version(struct ctrd *c, char **version, struct k8s_error *err)
{
	struct call call;
	struct buf req;
	struct pb_reader r;
	struct pb_field f;
	int rc;

	*version = NULL;
	call_init(&call);
	buf_init(&req, 64);
	rc = unary(c, "/containerd.services.version.v1.Version/Version", &req,
	    &call, &r, err);
	if (rc == 0) {
		while ((rc = pb_next(&r, &f)) == 1)
			if (f.num == 1 && *version == NULL)
				*version = pb_strdup(&f);
	}
	if (rc == PB_EBAD)
		rc = k8s_error_set(err, K8S_EINVAL, 0, NULL, "Version: malformed reply");
	if (rc == 0 && *version == NULL)
		rc = k8s_error_set(err, K8S_EINVAL, 0, NULL, "Version: no version");
	if (rc != 0) {
		free(*version);
		*version = NULL;
	}
	buf_free(&req);
	call_free(&call);
	return rc;
}

/* One map<string,string> entry (key 1, value 2) into obj. */
static int
map_entry(const struct pb_field *f, json_t *obj)
{
	struct pb_reader r;
	struct pb_field g;
	char *k = NULL, *v = NULL;
	int rc;

	pb_reader_init(&r, f->data, f->len);
	while ((rc = pb_next(&r, &g)) == 1) {
		if (g.num == 1 && k == NULL)
			k = pb_strdup(&g);
		else if (g.num == 2 && v == NULL)
			v = pb_strdup(&g);
	}
	if (rc == 0 && k)
		json_object_set_new(obj, k, json_string(v ? v : ""));
	free(k);
	free(v);
	return rc == 0 && k ? 0 : PB_EBAD;
}

/*
 * Containers.Get: the container's labels (when labels is not NULL) and
 * the Process of its OCI spec (when process is not NULL), new references.
 */
static int
container_get(struct ctrd *c, const char *id, json_t **labels,
    json_t **process, struct k8s_error *err)
{
	struct call call;
	struct buf req;
	struct pb_reader r, cr, ar;
	struct pb_field f, g, h;
	json_t *out = json_object(), *spec = NULL;
	int rc;

	call_init(&call);
	buf_init(&req, 4096);
	if (pb_put_str(&req, 1, id) != 0) {
		rc = k8s_error_set(err, K8S_EINVAL, 0, NULL, "container id too long");
		goto out;
	}
	rc = unary(c, "/containerd.services.containers.v1.Containers/Get",
	    &req, &call, &r, err);
	while (rc == 0 && (rc = pb_next(&r, &f)) == 1) {
		if (f.num != 1 || f.wire != PB_LEN)
			continue;
		pb_reader_init(&cr, f.data, f.len);	/* Container */
		while ((rc = pb_next(&cr, &g)) == 1) {
			if (g.num == 2 && g.wire == PB_LEN && map_entry(&g, out) != 0) {
				rc = PB_EBAD;		/* labels */
				break;
			}
			if (g.num != 5 || g.wire != PB_LEN || spec)
				continue;
			pb_reader_init(&ar, g.data, g.len);	/* spec: an Any */
			while (spec == NULL && (rc = pb_next(&ar, &h)) == 1)
				if (h.num == 2 && h.wire == PB_LEN)
					spec = json_loadb((const char *)h.data,
					    h.len, 0, NULL);
			if (rc < 0)
				break;
		}
		if (rc != 0)
			break;
	}
	if (rc == 1)
		rc = 0;
	if (rc == PB_EBAD)
		rc = k8s_error_set(err, K8S_EINVAL, 0, NULL,
		    "Containers/Get: malformed reply");
	else if (rc == 0 && process &&
	    !json_is_object(json_object_get(spec, "process")))
		rc = k8s_error_set(err, K8S_EINVAL, 0, NULL,
		    "Containers/Get: no OCI process in the container's spec");
	if (rc == 0 && labels)
		*labels = json_incref(out);
	if (rc == 0 && process)
		*process = json_incref(json_object_get(spec, "process"));
out:
	json_decref(out);
	json_decref(spec);
	buf_free(&req);
	call_free(&call);
	return rc;
}

int
ctrd_container_labels(struct ctrd *c, const char *id, json_t **labels,
    struct k8s_error *err)
{
	*labels = NULL;
	return container_get(c, id, labels, NULL, err);
}

int
ctrd_kill(struct ctrd *c, const char *id, int sig, int all,
    struct k8s_error *err)
{
	struct call call;
	struct buf req;
	struct pb_reader r;
	int rc;

	call_init(&call);
	buf_init(&req, 4096);
	if (pb_put_str(&req, 1, id) != 0 ||
	    pb_put_uint(&req, 3, (uint64_t)sig) != 0 ||
	    (all && pb_put_uint(&req, 4, 1) != 0)) {
		rc = k8s_error_set(err, K8S_EINVAL, 0, NULL, "container id too long");
		goto out;
	}
	rc = unary(c, "/containerd.services.tasks.v1.Tasks/Kill", &req, &call,
	    &r, err);
out:
	buf_free(&req);
	call_free(&call);
	return rc;
}

#define TASKS		"/containerd.services.tasks.v1.Tasks/"
#define PROCESS_TYPE	"types.containerd.io/opencontainers/runtime-spec/1/Process"

/*
 * The requests that name one exec: container_id = 1, exec_id = 2, and for
 * Kill (the signal) and CloseIO (stdin = true) a varint field 3, left out
 * when 0 as proto3 leaves out a default.
 */
static int
id_exec_call(struct ctrd *c, const char *method, const char *id,
    const char *exec_id, uint64_t field3, struct call *call,
    struct pb_reader *r, struct k8s_error *err)
{
	struct buf req;
	int rc;

	buf_init(&req, 4096);
	if (pb_put_str(&req, 1, id) != 0 || pb_put_str(&req, 2, exec_id) != 0 ||
	    (field3 && pb_put_uint(&req, 3, field3) != 0))
		rc = k8s_error_set(err, K8S_EINVAL, 0, NULL, "container or exec id too long");
	else
		rc = unary(c, method, &req, call, r, err);
	buf_free(&req);
	return rc;
}

/* One of the calls by exec id whose reply says nothing. */
static int
exec_call(struct ctrd *c, const char *method, const char *id,
    const char *exec_id, uint64_t field3, struct k8s_error *err)
{
	struct call call;
	struct pb_reader r;
	int rc;

	call_init(&call);
	rc = id_exec_call(c, method, id, exec_id, field3, &call, &r, err);
	call_free(&call);
	return rc;
}

int
ctrd_exec_create(struct ctrd *c, const char *id, const char *exec_id,
    const char *process_json, const char *stdin_path, const char *stdout_path,
    const char *stderr_path, struct k8s_error *err)
{
	struct call call;
	struct buf req, any;
	struct pb_reader r;
	int rc;

	call_init(&call);
	buf_init(&req, CTRD_MSG_MAX);
	buf_init(&any, CTRD_MSG_MAX);
	if (pb_put_str(&any, 1, PROCESS_TYPE) != 0 ||
	    pb_put_str(&any, 2, process_json) != 0 ||
	    pb_put_str(&req, 1, id) != 0 ||
	    (stdin_path && pb_put_str(&req, 2, stdin_path) != 0) ||
	    pb_put_str(&req, 3, stdout_path) != 0 ||
	    pb_put_str(&req, 4, stderr_path) != 0 ||
	    pb_put_bytes(&req, 6, any.data, any.len) != 0 ||
	    pb_put_str(&req, 7, exec_id) != 0)
		rc = k8s_error_set(err, K8S_EINVAL, 0, NULL, "exec request too large");
	else
		rc = unary(c, TASKS "Exec", &req, &call, &r, err);
	buf_free(&any);
	buf_free(&req);
	call_free(&call);
	return rc;
}

/*
 * method on exec exec_id of task id, whose reply's field 1 (a varint: a
 * pid, an exit status) goes to *out (may be NULL). 0, or the error.
 */
static int
exec_call_u32(struct ctrd *c, const char *method, const char *what,
    const char *id, const char *exec_id, uint32_t *out, struct k8s_error *err)
{
	struct call call;
	struct pb_reader r;
	struct pb_field f;
	int rc;

	if (out)
		*out = 0;
	call_init(&call);
	rc = id_exec_call(c, method, id, exec_id, 0, &call, &r, err);
	if (rc == 0) {
		while ((rc = pb_next(&r, &f)) == 1)
			if (f.num == 1 && f.wire == PB_VARINT && out)
				*out = (uint32_t)f.u;
		if (rc != 0)
			rc = k8s_error_set(err, K8S_EINVAL, 0, NULL,
			    "%s: malformed reply", what);
	}
	call_free(&call);
	return rc;
}

int
ctrd_exec_start(struct ctrd *c, const char *id, const char *exec_id,
    uint32_t *pid, struct k8s_error *err)
{
	return exec_call_u32(c, TASKS "Start", "Tasks/Start", id, exec_id, pid,
	    err);
}

void
ctrd_exec_abort(struct ctrd *c, const char *id, const char *exec_id)
{
	struct k8s_error err;

	/*
	 * A Start that failed or timed out may still have started it: a
	 * running exec cannot be deleted, so it is killed, and its exit
	 * waited for (a kill that landed means it ran: it will exit). With
	 * no exit by then the delete fails, and only the task's end ends it.
	 */
	if (exec_call(c, TASKS "Kill", id, exec_id, SIGKILL, &err) == 0)
		(void)exec_call(c, TASKS "Wait", id, exec_id, 0, &err);
	(void)exec_call(c, TASKS "DeleteProcess", id, exec_id, 0, &err);
}

int
ctrd_exec(struct ctrd *c, const char *id, const char *exec_id,
    const char *process_json, const char *stdin_path, const char *stdout_path,
    const char *stderr_path, uint32_t *pid, struct k8s_error *err)
{
	int rc;

	if (pid)
		*pid = 0;
	if ((rc = ctrd_exec_create(c, id, exec_id, process_json, stdin_path,
	    stdout_path, stderr_path, err)) != 0)
		return rc;
	if ((rc = ctrd_exec_start(c, id, exec_id, pid, err)) != 0)
		ctrd_exec_abort(c, id, exec_id);
	return rc;
}

int
ctrd_exec_wait(struct ctrd *c, const char *id, const char *exec_id,
    uint32_t *status, struct k8s_error *err)
{
	return exec_call_u32(c, TASKS "Wait", "Tasks/Wait", id, exec_id, status,
	    err);
}

int
ctrd_exec_kill(struct ctrd *c, const char *id, const char *exec_id, int sig,
    struct k8s_error *err)
{
	return exec_call(c, TASKS "Kill", id, exec_id, (uint64_t)sig, err);
}

int
ctrd_exec_close_stdin(struct ctrd *c, const char *id, const char *exec_id,
    struct k8s_error *err)
{
	return exec_call(c, TASKS "CloseIO", id, exec_id, 1, err);
}

int
ctrd_exec_delete(struct ctrd *c, const char *id, const char *exec_id,
    struct k8s_error *err)
{
	return exec_call(c, TASKS "DeleteProcess", id, exec_id, 0, err);
}

int
ctrd_call(struct ctrd *c, const char *method, struct buf *req,
    struct buf *reply, struct k8s_error *err)
{
	struct call call;
	struct pb_reader r;
	int rc;

	call_init(&call);
	buf_init(reply, CTRD_MSG_MAX);
	rc = unary(c, method, req, &call, &r, err);
	if (rc == 0 && call.reply.len &&
	    buf_append(reply, call.reply.data, call.reply.len) != 0)
		rc = k8s_error_set(err, K8S_ETOOBIG, 0, NULL, "%s: reply too "
		    "large", method);
	call_free(&call);
	return rc;
}

int
ctrd_subscribe(struct ctrd *c, const char *const *filters,
    int (*fn)(void *arg, const struct ctrd_event *ev), void *arg,
    atomic_int *stop, struct k8s_error *err)
{
	struct call call;
	struct buf req;
	int rc = 0;

	call_init(&call);
	call.fn = fn;
	call.arg = arg;
	call.stop = stop;
	buf_init(&req, 16384);
	for (size_t i = 0; filters && filters[i]; i++)
		if (pb_put_str(&req, 1, filters[i]) != 0)
			rc = k8s_error_set(err, K8S_EINVAL, 0, NULL,
			    "event filters too long");
	if (rc == 0)
		rc = grpc_call(c, "/containerd.services.events.v1.Events/Subscribe",
		    &req, &call, 1, err);
	buf_free(&req);
	call_free(&call);
	return rc;
}

int
ctrd_task_pid(struct ctrd *c, const char *id, uint32_t *pid,
    struct k8s_error *err)
{
	struct call call;
	struct pb_reader r, pr;
	struct pb_field f, g;
	int rc;

	*pid = 0;
	call_init(&call);
	rc = id_exec_call(c, TASKS "Get", id, "", 0, &call, &r, err);
	while (rc == 0 && (rc = pb_next(&r, &f)) == 1) {
		if (f.num != 1 || f.wire != PB_LEN)
			continue;
		pb_reader_init(&pr, f.data, f.len);	/* types.Process */
		while ((rc = pb_next(&pr, &g)) == 1)
			if (g.num == 3 && g.wire == PB_VARINT)
				*pid = (uint32_t)g.u;
		if (rc != 0)
			break;
	}
	if (rc == PB_EBAD || (rc == 0 && *pid == 0))
		rc = k8s_error_set(err, K8S_EINVAL, 0, NULL,
		    "Tasks/Get: no pid in the reply");
	call_free(&call);
	return rc;
}

int
ctrd_container_process(struct ctrd *c, const char *id, json_t **process,
    struct k8s_error *err)
{
	*process = NULL;
	return container_get(c, id, NULL, process, err);
}
