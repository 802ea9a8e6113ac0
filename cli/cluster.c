/*
 * cluster.c - the CLI's commands against a cluster: the CodeExecution API,
 * with the caller's kubeconfig. A run waits on a watch of its one object,
 * never by polling; Ctrl-C sets spec.cancel and waits for the Cancelled
 * the controller writes (a second Ctrl-C leaves at once).
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sys/random.h>

#include "artifacts.h"
#include "backoff.h"
#include "cli.h"
#include "cluster_priv.h"
#include "cx.h"
#include "client.h"
#include "clock.h"
#include "config.h"
#include "log.h"
#include "watch.h"
#include "xmalloc.h"


int
conn_open(const struct cli_cluster *o, struct conn *k, struct k8s_error *err)
{
	if (k8s_config_load_default(o->kubeconfig, o->context, &k->cfg, err) != 0)
		return -1;
	if (k8s_client_new(k->cfg, NULL, &k->c, err) != 0) {
		k8s_config_free(k->cfg);
		return -1;
	}
	k->ns = o->ns ? o->ns : k->cfg->namespace ? k->cfg->namespace : "default";
	return 0;
}

int
cli_connect(const struct cli_cluster *o, struct conn *k)
{
	struct k8s_error err;

	if (conn_open(o, k, &err) != 0) {
		fprintf(stderr, "airlock: %s\n", err.message);
		return -1;
	}
	return 0;
}

void
conn_close(struct conn *k)
{
	k8s_client_free(k->c);
	k8s_config_free(k->cfg);
}

int
cli_api_error(const char *what, const struct k8s_error *err)
{
	fprintf(stderr, "airlock: %s: %s\n", what, err->message);
	return err->http_status == 422 || err->http_status == 400 ?
	    CLI_EXIT_USAGE : CLI_EXIT_ERROR;
}

/* --- waiting ---------------------------------------------------------------- */

struct waiter {
	struct conn	*k;
	const char	*name;
	struct watch	*w;
	json_t		*obj;		/* the terminal object */
	int		 deleted;
	char		*selector;
	long long	 end;		/* monotonic ms; 0 never */
	char		 failed[1100];	/* a refusal retrying cannot fix */
	atomic_int	*cancel;	/* set: cancel the execution, once */
	int		 cancel_sent;
	/* cli_wait's: another kind, its own end, a caller's stop. */
	const struct k8s_resource *res;	/* NULL: cx_resource */
	int		(*done)(json_t *obj);
	atomic_int	*stop;		/* set: stop waiting */
	json_t		*last;		/* the object as last seen (done) */
};

static void
on_tick(void *arg)
{
	struct waiter *wt = arg;

	if ((wt->end && clock_mono_ms() >= wt->end) ||
	    (wt->stop && atomic_load(wt->stop)))
		watch_stop(wt->w);
	if (wt->cancel && !wt->cancel_sent && atomic_load(wt->cancel)) {
		struct k8s_patch_opts mp = { .type = K8S_PATCH_MERGE };
		struct k8s_error err;
		json_t *p = json_pack("{s:{s:b}}", "spec", "cancel", 1);

		/*
		 * Until it lands (a tick later on a failure); the wait goes on
		 * to the controller's Cancelled.
		 */
		if (k8s_patch(wt->k->c, &cx_resource, wt->k->ns, wt->name, &mp, p,
		    NULL, &err) == 0)
			wt->cancel_sent = 1;
		else
			log_warn("cannot cancel", "execution=%s/%s error=\"%s\"",
			    wt->k->ns, wt->name, err.message);
		json_decref(p);
	}
}

static atomic_int interrupts;

/*
 * Live output (spec.output.stream, set by run): what of each stream the
 * status showed so far has been printed. The status holds a prefix of the
 * final text while the program runs, so the rest is printed at the end.
 */
static int live;
static size_t live_sent[2];

/* --- creating --------------------------------------------------------------- */

/*
 * A namespace's stored-executions quota that the quota controller has not
 * counted yet (its first moments) refuses every create it covers with 403
 * "status unknown for quota", and nothing is made: the same create again,
 * every 200 ms for up to 10 s.
 */
#define QUOTA_UNCOUNTED_WAIT_MS	10000

/* generateName's alphabet and length, as the API server draws them. */
static const char name_chars[] = "bcdfghjklmnpqrstvwxz2456789";
#define NAME_RANDOM_LEN		5
#define NAME_PREFIX_MAX		58	/* 63 - 5, as the API server cuts it */

/*
 * A transport failure that waiting cannot heal: the certificate, TLS, or
 * a host name that does not resolve (curl's words, in the message).
 */
static const char *const not_transient[] = { "SSL", "certificate",
    "resolve" };

int
cli_create_retryable(const struct k8s_error *err)
{
	if (err->http_status == 503 || err->http_status == 429)
		return 1;
	if (err->http_status != 0 || (err->code != K8S_EIO &&
	    err->code != K8S_ETIMEDOUT))
		return 0;
	for (size_t i = 0; i < sizeof(not_transient) / sizeof(not_transient[0]); i++)
		if (strstr(err->message, not_transient[i]))
			return 0;
	return 1;
}

static void
random_bytes(unsigned char *p, size_t n)
{
	while (n > 0) {
		ssize_t got = getrandom(p, n, 0);

		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			abort();	/* no randomness: nothing safe to do */
		p += got;
		n -= (size_t)got;
	}
}

/* metadata.name: prefix and five random characters, as generateName. */
static void
pick_name(json_t *md, const char *prefix)
{
	unsigned char r[NAME_RANDOM_LEN];
	char name[NAME_PREFIX_MAX + NAME_RANDOM_LEN + 1];
	size_t n = strlen(prefix);

	if (n > NAME_PREFIX_MAX)
		n = NAME_PREFIX_MAX;
	memcpy(name, prefix, n);
	random_bytes(r, sizeof(r));
	for (size_t i = 0; i < NAME_RANDOM_LEN; i++)
		name[n + i] = name_chars[r[i] % (sizeof(name_chars) - 1)];
	name[n + NAME_RANDOM_LEN] = '\0';
	json_object_set_new(md, "name", json_string(name));
}

/*
 * Whether the object that holds our name is ours: made by an earlier try
 * whose answer was lost. 1 ours (*got: it, new reference), 0 another's,
 * -1 unknown (it could not be read; err says why).
 */
static int
ours(struct conn *k, const struct k8s_resource *res, const char *name,
    const char *token, json_t **got, struct k8s_error *err)
{
	json_t *obj = NULL;
	const char *t;

	if (k8s_get(k->c, res, k->ns, name, &obj, err) != 0)
		return -1;
	t = json_string_value(json_object_get(json_object_get(json_object_get(obj,
	    "metadata"), "annotations"), CLI_ANN_CREATE_TOKEN));
	if (t && strcmp(t, token) == 0) {
		*got = obj;
		return 1;
	}
	json_decref(obj);
	return 0;
}

/*
 * Create cx (its metadata is changed: a name chosen, the token set), once.
 *
 * The API server may refuse for a while what it takes later: down or
 * restarting (no answer: connection refused, reset, a timeout), 503 (the
 * chart's MutatingAdmissionPolicy on CodeExecution answers "Resource kind
 * airlock.dev/v1alpha1, Kind=CodeExecution not found. There can be a
 * delay ..." until the API server has the new CRD's schema, right after
 * `helm install`: k8s.io/apiserver's admission/plugin/policy/mutating/
 * dispatcher.go, NewServiceUnavailable; its type converter polls the
 * OpenAPI paths every 5 s, 10 s in older releases), 429 (the client
 * waited out its Retry-After three times already). Those are tried
 * again, backing off, until retry_ms have passed; a try under way then
 * is not cut short.
 *
 * A try whose answer was lost may have made the object. So the name is
 * chosen here before the first try, never by generateName, and the
 * object carries a random token (CLI_ANN_CREATE_TOKEN): a 409 for a name
 * whose object holds our token is our own earlier try, taken as made; one
 * without it is another's (for a name we drew, we draw another: nothing
 * of ours can be under the taken one).
 */
int
cli_create(struct conn *k, const struct k8s_resource *res, json_t *cx,
    atomic_int *cancel, long retry_ms, int say, json_t **created,
    struct k8s_error *err)
{
	long long start = clock_mono_ms();
	long long quota_until = start + QUOTA_UNCOUNTED_WAIT_MS;
	long long until = start + (retry_ms > 0 ? retry_ms : 0);
	struct backoff bo = { .initial_ms = 250, .max_ms = 2000 };
	json_t *md = json_object_get(cx, "metadata"), *ann;
	char *prefix = NULL;
	unsigned char tok[16];
	char token[33];
	int rc, tries = 0, said = 0, redraws = 0;

	if (md == NULL)
		json_object_set_new(cx, "metadata", md = json_object());
	if (json_object_get(md, "name") == NULL) {
		const char *gn = json_string_value(json_object_get(md,
		    "generateName"));

		prefix = xstrdup(gn ? gn : "run-");
		json_object_del(md, "generateName");
		pick_name(md, prefix);
	}
	random_bytes(tok, sizeof(tok));
	for (size_t i = 0; i < sizeof(tok); i++)
		snprintf(token + 2 * i, 3, "%02x", tok[i]);
	if (!json_is_object(ann = json_object_get(md, "annotations")))
		json_object_set_new(md, "annotations", ann = json_object());
	json_object_set_new(ann, CLI_ANN_CREATE_TOKEN, json_string(token));

	for (;;) {
		const char *name = json_string_value(json_object_get(md, "name"));
		long long now;
		long wait;

		rc = k8s_create(k->c, res, k->ns, cx, created, err);
		tries++;
		if (rc == 0)
			break;
		if (rc == K8S_EEXIST) {
			struct k8s_error gerr;
			int mine = ours(k, res, name, token, created, &gerr);

			if (mine == 1) {
				log_debug("an earlier try made it", "execution=%s/%s "
				    "tries=%d", k->ns, name, tries);
				rc = 0;
				break;
			}
			if (mine == 0 && prefix && redraws++ < 3) {
				pick_name(md, prefix);	/* another's name: draw again */
				continue;
			}
			/* Unread (or gone since): whose it is is not known yet. */
			if (mine == 0 || (!cli_create_retryable(&gerr) &&
			    gerr.code != K8S_ENOTFOUND))
				break;	/* the 409 as it is */
			*err = gerr;
		} else if (rc == K8S_EFORBIDDEN && strstr(err->message,
		    "status unknown for quota") && clock_mono_ms() < quota_until) {
			log_debug("the namespace's quota is not counted yet; trying "
			    "again", "namespace=%s", k->ns);
			if (atomic_load(&interrupts) || (cancel && atomic_load(cancel)))
				break;
			nanosleep(&(struct timespec){ 0, 200 * 1000000L }, NULL);
			continue;
		} else if (!cli_create_retryable(err)) {
			break;
		}
		now = clock_mono_ms();
		if (now >= until || atomic_load(&interrupts) ||
		    (cancel && atomic_load(cancel))) {
			char last[sizeof(err->message)];

			if (retry_ms <= 0 || (cancel && atomic_load(cancel)) ||
			    atomic_load(&interrupts))
				break;
			snprintf(last, sizeof(last), "%s", err->message);
			if (err->http_status)
				snprintf(err->message, sizeof(err->message), "the API "
				    "server refused it for %lld s (%d tries), last with "
				    "HTTP %ld: %.900s", (now - start + 500) / 1000, tries,
				    err->http_status, last);
			else
				snprintf(err->message, sizeof(err->message), "no answer "
				    "from the API server for %lld s (%d tries): %.900s",
				    (now - start + 500) / 1000, tries, last);
			break;
		}
		if (say && !said) {
			fprintf(stderr, "airlock: the API server could not take the "
			    "%s (%s); trying again for up to %ld s\n",
			    res == &cx_resource ? "execution" : "session",
			    err->message, (retry_ms + 999) / 1000);
			said = 1;
		}
		wait = backoff_next(&bo);
		if (wait > until - now)
			wait = (long)(until - now);
		log_debug("the API server could not take the create; trying again",
		    "execution=%s/%s status=%ld after_ms=%ld", k->ns, name,
		    err->http_status, wait);
		nanosleep(&(struct timespec){ wait / 1000, (wait % 1000) * 1000000L },
		    NULL);
	}
	free(prefix);
	return rc;
}

static void
print_new(json_t *st)
{
	static const char *const keys[] = { "stdout", "stderr" };

	for (int i = 0; i < 2; i++) {
		json_t *v = json_object_get(st, keys[i]);
		FILE *f = i ? stderr : stdout;

		if (!json_is_string(v) || json_string_length(v) <= live_sent[i])
			continue;
		cli_write_text(f, json_string_value(v) + live_sent[i],
		    json_string_length(v) - live_sent[i], isatty(fileno(f)));
		fflush(f);
		live_sent[i] = json_string_length(v);
	}
}

static int
take(struct waiter *wt, json_t *o)
{
	const char *ph = json_string_value(json_object_get(json_object_get(o,
	    "status"), "phase"));

	if (wt->done) {
		json_decref(wt->last);
		wt->last = json_incref(o);
		if (!wt->done(o))
			return 0;
	} else if (!cx_phase_terminal(ph)) {
		if (live && ph && strcmp(ph, "Running") == 0)
			print_new(json_object_get(o, "status"));
		return 0;
	}
	json_decref(wt->obj);
	wt->obj = json_incref(o);
	return 1;
}

static int
on_event(void *arg, const struct watch_event *ev)
{
	struct waiter *wt = arg;

	if (ev->type == WATCH_DELETED) {
		wt->deleted = 1;
		return 1;
	}
	return take(wt, ev->object);
}

static int
relist(void *arg, char **rv, struct k8s_error *err)
{
	struct waiter *wt = arg;
	struct k8s_list_opts lo = { .field_selector = wt->selector };
	json_t *list = NULL, *item;
	int rc = k8s_list(wt->k->c, wt->res ? wt->res : &cx_resource, wt->k->ns,
	    &lo, &list, err);

	if (rc == K8S_EFORBIDDEN || rc == K8S_EUNAUTH || rc == K8S_ENOTFOUND) {
		/* Not allowed to list (or no such API): waiting will not help. */
		snprintf(wt->failed, sizeof(wt->failed), "%s", err->message);
		watch_stop(wt->w);
		*rv = xstrdup("");
		return 0;
	}
	if (rc != 0)
		return rc;
	*rv = xstrdup(json_string_value(json_object_get(json_object_get(list,
	    "metadata"), "resourceVersion")));
	item = json_array_get(json_object_get(list, "items"), 0);
	if (item == NULL)
		wt->deleted = 1;
	if (item == NULL || take(wt, item))
		watch_stop(wt->w);
	json_decref(list);
	return 0;
}

struct sigctx {
	struct conn	*k;
	const char	*name;
	sigset_t	 set;
	struct watch	*w;
};

/* Ctrl-C: cancel the execution; again: leave now. */
static void *
signals(void *arg)
{
	struct sigctx *s = arg;
	int sig;

	for (;;) {
		if (sigwait(&s->set, &sig) != 0)
			continue;
		if (sig == SIGUSR1)
			return NULL;	/* done: exit the thread */
		if (atomic_fetch_add(&interrupts, 1) > 0)
			_exit(CX_EXIT_CANCELLED);
		{
			struct k8s_patch_opts mp = { .type = K8S_PATCH_MERGE };
			struct k8s_error err;
			json_t *p = json_pack("{s:{s:b}}", "spec", "cancel", 1);

			fprintf(stderr, "\nairlock: cancelling %s/%s (Ctrl-C again to "
			    "leave without waiting)\n", s->k->ns, s->name);
			if (k8s_patch(s->k->c, &cx_resource, s->k->ns, s->name, &mp, p, NULL,
			    &err) != 0)
				fprintf(stderr, "airlock: cannot cancel: %s\n", err.message);
			json_decref(p);
		}
	}
}

/*
 * Wait for name to end: its object (new reference), or NULL with a message
 * printed (in msg instead, when given). timeout_s 0: no limit. cancel,
 * when given and once set, cancels the execution.
 */
static json_t *
wait_for_msg(struct conn *k, const char *name, long timeout_s,
    int cancel_on_int, atomic_int *cancel, char *msg, size_t msz)
{
	struct waiter wt = { .k = k, .name = name, .cancel = cancel,
	    .end = timeout_s > 0 ? clock_mono_ms() + timeout_s * 1000 : 0 };
	struct watch_opts wo = { .res = &cx_resource, .ns = k->ns,
	    .tick_ms = timeout_s > 0 || cancel ? 50 : 0 };
	char buf[1400];
	struct watch_handlers h = { relist, on_event, on_tick, &wt };
	struct sigctx sc = { .k = k, .name = name };
	pthread_t th;

	wt.selector = xasprintf("metadata.name=%s", name);
	wo.field_selector = wt.selector;
	wt.w = watch_new(k->c, &wo, &h);
	sc.w = wt.w;
	if (cancel_on_int) {
		sigemptyset(&sc.set);
		sigaddset(&sc.set, SIGINT);
		sigaddset(&sc.set, SIGTERM);
		sigaddset(&sc.set, SIGUSR1);
		pthread_sigmask(SIG_BLOCK, &sc.set, NULL);
		pthread_create(&th, NULL, signals, &sc);
	}
	(void)watch_run(wt.w, NULL);
	if (cancel_on_int) {
		pthread_kill(th, SIGUSR1);
		pthread_join(th, NULL);
	}
	watch_free(wt.w);
	free(wt.selector);
	buf[0] = '\0';
	if (wt.failed[0])
		snprintf(buf, sizeof(buf), "cannot watch %s/%s: %s", k->ns, name,
		    wt.failed);
	else if (wt.deleted && wt.obj == NULL)
		snprintf(buf, sizeof(buf), "%s/%s was deleted before it ended",
		    k->ns, name);
	else if (wt.obj == NULL)
		snprintf(buf, sizeof(buf), "%s/%s did not end within %ld s", k->ns,
		    name, timeout_s);
	if (buf[0] && msg)
		snprintf(msg, msz, "%s", buf);
	else if (buf[0])
		fprintf(stderr, "airlock: %s\n", buf);
	return wt.obj;
}

static json_t *
wait_for(struct conn *k, const char *name, long timeout_s, int cancel_on_int)
{
	return wait_for_msg(k, name, timeout_s, cancel_on_int, NULL, NULL, 0);
}

json_t *
cli_wait(struct conn *k, const struct k8s_resource *res, const char *name,
    int (*done)(json_t *obj), long timeout_s, atomic_int *stop, json_t **last,
    char *msg, size_t msz)
{
	struct waiter wt = { .k = k, .name = name, .res = res, .done = done,
	    .stop = stop, .end = timeout_s > 0 ? clock_mono_ms() +
	    timeout_s * 1000 : 0 };
	/* Ticks for the timeout and the caller's stop. */
	struct watch_opts wo = { .res = res, .ns = k->ns, .tick_ms = 50 };
	struct watch_handlers h = { relist, on_event, on_tick, &wt };

	msg[0] = '\0';
	wt.selector = xasprintf("metadata.name=%s", name);
	wo.field_selector = wt.selector;
	wt.w = watch_new(k->c, &wo, &h);
	(void)watch_run(wt.w, NULL);
	watch_free(wt.w);
	free(wt.selector);
	if (wt.failed[0])
		snprintf(msg, msz, "cannot watch %s/%s: %s", k->ns, name, wt.failed);
	else if (wt.deleted && wt.obj == NULL)
		snprintf(msg, msz, "%s/%s was deleted", k->ns, name);
	if (last)
		*last = wt.last;
	else
		json_decref(wt.last);
	return wt.obj;
}

int
cluster_exec(const struct cli_cluster *o, json_t *cx, atomic_int *cancel,
    json_t **done, char *msg, size_t msz)
{
	struct conn k;
	struct k8s_error err;
	json_t *created = NULL;
	char *name;

	*done = NULL;
	if (conn_open(o, &k, &err) != 0) {
		snprintf(msg, msz, "%s", err.message);
		return -1;
	}
	if (cli_create(&k, &cx_resource, cx, cancel, o->retry_ms, 0, &created,
	    &err) != 0) {
		snprintf(msg, msz, "create: %s", err.message);
		conn_close(&k);
		return err.http_status == 422 || err.http_status == 400 ? -2 : -1;
	}
	name = xstrdup(json_string_value(json_object_get(json_object_get(created,
	    "metadata"), "name")));
	json_decref(created);
	*done = wait_for_msg(&k, name, 0, 0, cancel, msg, msz);
	free(name);
	conn_close(&k);
	return *done ? 0 : -1;
}

/*
 * The execution's files out (its CodeExecutionArtifacts, checked against
 * its status.artifacts) into dir/NAME/. 0, or CLI_EXIT_ERROR said on stderr.
 */
static int
files_out(struct conn *k, json_t *cx, const char *dir)
{
	json_t *want = json_object_get(json_object_get(cx, "status"), "artifacts");
	json_t *obj = NULL;
	struct k8s_error err;
	const char *name = k8s_obj_name(cx), *uid;
	char msg[512];
	int n;

	if (json_array_size(want) == 0) {
		fprintf(stderr, "airlock: %s has no files out\n", name);
		return 0;
	}
	if (k8s_get(k->c, &artifacts_resource, k->ns, name, &obj, &err) != 0) {
		fprintf(stderr, "airlock: files out of %s: %s\n", name, err.message);
		return CLI_EXIT_ERROR;
	}
	uid = json_string_value(json_object_get(json_object_get(json_object_get(obj,
	    "metadata"), "labels"), CX_LABEL_UID));
	if (uid == NULL || strcmp(uid, k8s_obj_uid(cx) ? k8s_obj_uid(cx) : "") != 0) {
		fprintf(stderr, "airlock: files out of %s: they are another "
		    "execution's\n", name);
		json_decref(obj);
		return CLI_EXIT_ERROR;
	}
	n = cli_write_files(dir, name, json_object_get(obj, "files"), want, msg,
	    sizeof(msg));
	json_decref(obj);
	if (n < 0) {
		fprintf(stderr, "airlock: files out of %s: %s\n", name, msg);
		return CLI_EXIT_ERROR;
	}
	fprintf(stderr, "airlock: %d file%s out written to %s/%s\n", n,
	    n == 1 ? "" : "s", dir, name);
	return 0;
}

json_t *
cluster_files_out(const struct cli_cluster *o, json_t *done)
{
	struct conn k;
	struct k8s_error err;
	json_t *obj = NULL, *files = NULL;
	const char *uid;

	if (json_array_size(json_object_get(json_object_get(done, "status"),
	    "artifacts")) == 0)
		return NULL;
	if (conn_open(o, &k, &err) != 0)
		return NULL;
	k.ns = k8s_obj_namespace(done) ? k8s_obj_namespace(done) : "default";
	if (k8s_get(k.c, &artifacts_resource, k.ns, k8s_obj_name(done), &obj,
	    &err) == 0) {
		uid = json_string_value(json_object_get(json_object_get(
		    json_object_get(obj, "metadata"), "labels"), CX_LABEL_UID));
		if (uid && k8s_obj_uid(done) && strcmp(uid, k8s_obj_uid(done)) == 0)
			files = json_incref(json_object_get(obj, "files"));
	}
	json_decref(obj);
	conn_close(&k);
	return files;
}

int
cluster_run(const struct cli_cluster *o, json_t *cx)
{
	struct conn k;
	struct k8s_error err;
	json_t *created = NULL, *done;
	char *name;
	int code;

	if (cli_connect(o, &k) != 0)
		return CLI_EXIT_ERROR;
	live = o->output == NULL && cx_stream(cx);
	if (cli_create(&k, &cx_resource, cx, NULL, o->retry_ms, 1, &created,
	    &err) != 0) {
		code = cli_api_error("create", &err);
		conn_close(&k);
		return code;
	}
	name = xstrdup(json_string_value(json_object_get(json_object_get(created,
	    "metadata"), "name")));
	json_decref(created);
	if ((done = wait_for(&k, name, 0, 1)) == NULL) {
		code = atomic_load(&interrupts) ? CX_EXIT_CANCELLED : CLI_EXIT_ERROR;
	} else {
		code = cli_report_from(done, o->output, live_sent[0], live_sent[1]);
		if (o->out_dir && files_out(&k, done, o->out_dir) != 0 && code == 0)
			code = CLI_EXIT_ERROR;
		json_decref(done);
	}
	if (o->rm && k8s_delete(k.c, &cx_resource, k.ns, name, NULL, NULL, &err) != 0 &&
	    err.code != K8S_ENOTFOUND)
		fprintf(stderr, "airlock: delete %s: %s\n", name, err.message);
	free(name);
	conn_close(&k);
	return code;
}

int
cluster_wait(const struct cli_cluster *o, const char *name)
{
	struct conn k;
	json_t *done;
	int code;

	if (cli_connect(o, &k) != 0)
		return CLI_EXIT_ERROR;
	if ((done = wait_for(&k, name, o->wait_s, 0)) == NULL) {
		code = CLI_EXIT_ERROR;
	} else {
		code = o->output ? (cli_print(stdout, done, o->output) == 0 ?
		    cx_exit_code(json_object_get(done, "status")) : CLI_EXIT_ERROR) :
		    cx_exit_code(json_object_get(done, "status"));
		json_decref(done);
	}
	conn_close(&k);
	return code;
}

void
cli_age(json_t *obj, long long now, char *a, size_t n)
{
	long long made = clock_parse_rfc3339(json_string_value(json_object_get(
	    json_object_get(obj, "metadata"), "creationTimestamp")));
	long long age = made > 0 ? now - made : -1;

	if (age >= 86400)
		snprintf(a, n, "%lldd", age / 86400);
	else if (age >= 3600)
		snprintf(a, n, "%lldh", age / 3600);
	else if (age >= 60)
		snprintf(a, n, "%lldm", age / 60);
	else if (age >= 0)
		snprintf(a, n, "%llds", age);
	else
		snprintf(a, n, "?");
}

/* NAME RUNTIME PHASE EXIT DURATION AGE, as kubectl get cx prints. */
static void
row(json_t *o, int with_ns)
{
	json_t *md = json_object_get(o, "metadata"), *st = json_object_get(o, "status");
	json_t *code = json_object_get(st, "exitCode");
	json_t *dur = json_object_get(st, "durationMillis");
	char c[16] = "", d[24] = "", a[24];
	const char *ph = json_string_value(json_object_get(st, "phase"));

	if (json_is_integer(code))
		snprintf(c, sizeof(c), "%lld", (long long)json_integer_value(code));
	if (json_is_integer(dur))
		snprintf(d, sizeof(d), "%lldms", (long long)json_integer_value(dur));
	cli_age(o, (long long)time(NULL), a, sizeof(a));
	if (with_ns)
		printf("%-20s ", json_string_value(json_object_get(md, "namespace")));
	printf("%-30s %-8s %-10s %-5s %-10s %s\n",
	    json_string_value(json_object_get(md, "name")),
	    json_string_value(json_object_get(json_object_get(o, "spec"), "runtime")),
	    ph ? ph : "Pending", c, d, a);
}

static void
header(int with_ns)
{
	if (with_ns)
		printf("%-20s ", "NAMESPACE");
	printf("%-30s %-8s %-10s %-5s %-10s %s\n", "NAME", "RUNTIME", "PHASE",
	    "EXIT", "DURATION", "AGE");
}

int
cluster_get(const struct cli_cluster *o, const char *name)
{
	struct conn k;
	struct k8s_error err;
	json_t *obj = NULL;
	int code = 0;

	if (cli_connect(o, &k) != 0)
		return CLI_EXIT_ERROR;
	if (k8s_get(k.c, &cx_resource, k.ns, name, &obj, &err) != 0) {
		code = cli_api_error(name, &err);
	} else if (o->output) {
		code = cli_print(stdout, obj, o->output) == 0 ? 0 : CLI_EXIT_ERROR;
	} else {
		header(0);
		row(obj, 0);
	}
	if (code == 0 && obj && o->out_dir)
		code = files_out(&k, obj, o->out_dir);
	json_decref(obj);
	conn_close(&k);
	return code;
}

int
cluster_list(const struct cli_cluster *o)
{
	struct conn k;
	struct k8s_error err;
	json_t *list = NULL, *item;
	size_t i;
	int code = 0;

	if (cli_connect(o, &k) != 0)
		return CLI_EXIT_ERROR;
	if (k8s_list(k.c, &cx_resource, o->all_ns ? NULL : k.ns, NULL, &list, &err) != 0) {
		code = cli_api_error("list", &err);
	} else if (o->output) {
		code = cli_print(stdout, list, o->output) == 0 ? 0 : CLI_EXIT_ERROR;
	} else {
		header(o->all_ns);
		json_array_foreach(json_object_get(list, "items"), i, item)
			row(item, o->all_ns);
	}
	json_decref(list);
	conn_close(&k);
	return code;
}

int
cluster_logs(const struct cli_cluster *o, const char *name)
{
	struct conn k;
	struct k8s_error err;
	json_t *obj = NULL, *st;
	int code = 0;

	if (cli_connect(o, &k) != 0)
		return CLI_EXIT_ERROR;
	if (k8s_get(k.c, &cx_resource, k.ns, name, &obj, &err) != 0) {
		code = cli_api_error(name, &err);
	} else {
		st = json_object_get(obj, "status");
		if (!cx_phase_terminal(json_string_value(json_object_get(st, "phase")))) {
			fprintf(stderr, "airlock: %s has not ended yet (airlock wait %s)\n",
			    name, name);
			code = CLI_EXIT_ERROR;
		} else {
			cli_print_streams(st);
		}
	}
	json_decref(obj);
	conn_close(&k);
	return code;
}

int
cluster_delete(const struct cli_cluster *o, char *const *names, int n)
{
	struct conn k;
	struct k8s_error err;
	int code = 0;

	if (cli_connect(o, &k) != 0)
		return CLI_EXIT_ERROR;
	for (int i = 0; i < n; i++) {
		if (k8s_delete(k.c, &cx_resource, k.ns, names[i], NULL, NULL, &err) != 0)
			code = cli_api_error(names[i], &err);
		else
			printf("codeexecution.airlock.dev \"%s\" deleted\n", names[i]);
	}
	conn_close(&k);
	return code;
}
