/*
 * sweep.c - what nothing else would remove (agent_priv.h): pods whose
 * execution is gone, and pod log directories the kubelet left behind.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent_priv.h"
#include "clock.h"
#include "log.h"
#include "podspec.h"
#include "xmalloc.h"

/*
 * Whether pod's execution is gone: 1 gone (or replaced by a new one of
 * the same name), 0 there, -1 unknown. The probe is a JSON patch that
 * changes nothing, on the status the agent may patch anyway: it reads no
 * execution, which the agent may not.
 */
static int
execution_gone(struct agent *a, const char *ns, const char *cx,
    const char *cx_uid)
{
	struct k8s_error err;
	int rc = cx_uid ? agent_probe(a, &cx_resource, ns, cx, "/metadata/uid",
	    cx_uid, NULL, &err) : agent_probe(a, &cx_resource, ns, cx,
	    "/apiVersion", "airlock.dev/v1alpha1", NULL, &err);

	if (rc == 0)
		return 0;
	if (rc == K8S_ENOTFOUND || (cx_uid && err.http_status == 422))
		return 1;
	log_warn("cannot tell whether an execution exists", "execution=%s/%s "
	    "error=\"%s\"", ns, cx, err.message);
	return -1;
}

/*
 * Delete the pods on this node whose execution is gone. The controller
 * deletes them as the execution goes, and the garbage collector after it;
 * this catches what both missed (a pod made by hand, owner references
 * removed, or the controller down), the pods that never started among
 * them, which no result would ever collect.
 */
void
agent_sweep_orphans(struct agent *a)
{
	json_t *pods = informer_list(a->pods), *pod;
	size_t i;

	json_array_foreach(pods, i, pod) {
		json_t *md = json_object_get(pod, "metadata");
		const char *cx_uid;
		const char *cx = podspec_pod_execution(pod, &cx_uid);
		const char *pns = k8s_obj_namespace(pod);
		const char *name = k8s_obj_name(pod), *uid = k8s_obj_uid(pod);

		if (cx == NULL || pns == NULL || name == NULL || uid == NULL ||
		    json_object_get(md, "deletionTimestamp") ||
		    execution_gone(a, pns, cx, cx_uid) != 1)
			continue;
		log_info("deleting orphan pod", "pod=%s/%s execution=%s", pns,
		    name, cx);
		if (agent_delete_pod(a, pns, name, uid))
			metric_inc(a->m_swept, "pods");
	}
	json_decref(pods);
}

/* Remove name under dirfd and all it holds, depth levels down at most. */
static int
remove_tree(int dirfd, const char *name, int depth)
{
	struct dirent *de;
	DIR *d;
	int fd, rc = 0;

	if (unlinkat(dirfd, name, 0) == 0)
		return 0;
	if (errno != EISDIR && errno != EPERM)
		return -1;
	if (depth == 0 || (fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY |
	    O_NOFOLLOW | O_CLOEXEC)) < 0)
		return -1;
	if ((d = fdopendir(fd)) == NULL) {
		close(fd);
		return -1;
	}
	while ((de = readdir(d)) != NULL)
		if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0 &&
		    remove_tree(fd, de->d_name, depth - 1) != 0)
			rc = -1;
	closedir(d);
	if (rc == 0 && unlinkat(dirfd, name, AT_REMOVEDIR) != 0)
		rc = -1;
	return rc;
}

/*
 * ns, pod and uid from a kubelet pod log directory's name,
 * "<namespace>_<pod>_<uid>" (none of the three holds a '_'), if the pod is
 * an execution pod, "airlock-" and its execution's uid. 0 or -1.
 */
int
agent_log_dir_name(const char *name, char *ns, char *pod, char *uid,
    size_t size)
{
	const char *u1 = strchr(name, '_'), *u2 = u1 ? strchr(u1 + 1, '_') : NULL;
	const char *p;
	size_t nl, pl, ul;

	if (u1 == NULL || u2 == NULL || strchr(u2 + 1, '_'))
		return -1;
	nl = (size_t)(u1 - name);
	pl = (size_t)(u2 - u1 - 1);
	ul = strlen(u2 + 1);
	if (nl == 0 || ul == 0 || nl >= size || pl >= size || ul >= size)
		return -1;
	p = u1 + 1;
	if (pl != 8 + 36 || strncmp(p, "airlock-", 8) != 0 ||
	    strspn(p + 8, "0123456789abcdef-") != 36)
		return -1;
	memcpy(ns, name, nl);
	ns[nl] = '\0';
	memcpy(pod, p, pl);
	pod[pl] = '\0';
	memcpy(uid, u2 + 1, ul + 1);
	return 0;
}

/*
 * Remove the log directories of execution pods that are gone, older than
 * LOG_STALE_S. The kubelet removes a pod's logs with the pod; what it
 * missed (it was restarted, or the node's disk was full) would stay, and
 * hold the output of tenant code, forever.
 */
void
agent_sweep_logs(struct agent *a)
{
	char ns[256], pod[256], uid[256];
	time_t now = time(NULL);
	struct dirent *de;
	struct stat st;
	struct run *r;
	int dfd;
	DIR *d;

	if ((d = opendir(a->o.pod_logs_dir)) == NULL)
		return;
	dfd = dirfd(d);
	while ((de = readdir(d)) != NULL) {
		struct k8s_error err;
		json_t *cur = NULL;
		int rc, known;

		if (agent_log_dir_name(de->d_name, ns, pod, uid, sizeof(ns)) != 0 ||
		    (a->o.namespace && strcmp(ns, a->o.namespace) != 0) ||
		    fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
		    !S_ISDIR(st.st_mode) || now - st.st_mtime < LOG_STALE_S)
			continue;
		/* A run of that very pod: name and uid (a name is reused). */
		pthread_mutex_lock(&a->lock);
		known = (r = agent_find_run(a, uid)) != NULL && strcmp(r->ns, ns) == 0 &&
		    strcmp(r->pod, pod) == 0;
		pthread_mutex_unlock(&a->lock);
		if (known)
			continue;
		/* The pod may be someone else's of that name: ask. */
		rc = k8s_get(a->client, &k8s_res_pods, ns, pod, &cur, &err);
		if (rc == 0 && strcmp(k8s_obj_uid(cur) ? k8s_obj_uid(cur) : "",
		    uid) == 0) {
			json_decref(cur);
			continue;
		}
		json_decref(cur);
		if (rc != 0 && rc != K8S_ENOTFOUND)
			continue;
		if (remove_tree(dfd, de->d_name, 4) == 0) {
			log_info("removed stale pod logs", "dir=%s", de->d_name);
			metric_inc(a->m_swept, "logdirs");
		} else {
			log_warn("cannot remove stale pod logs", "dir=%s "
			    "error=\"%s\"", de->d_name, strerror(errno));
		}
	}
	closedir(d);
}

/*
 * Run runsc with args (NULL-terminated, after --root); its standard
 * output, up to RUNSC_LIST_MAX bytes, as a new string in *outp when it
 * exits 0. 0, or -1.
 */
int
agent_runsc_run(struct agent *a, const char *const *args, char **outp)
{
	char *argv[12] = { (char *)a->o.runsc, "--root", (char *)a->o.runsc_root };
	char *envp[] = { "PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL };
	posix_spawn_file_actions_t fa;
	size_t len = 0, cap = 0, i;
	char *out = NULL;
	int p[2], rc, st = 0;
	pid_t pid;

	for (i = 0; args[i] && i + 3 < sizeof(argv) / sizeof(argv[0]) - 1; i++)
		argv[i + 3] = (char *)args[i];
	argv[i + 3] = NULL;
	if (pipe2(p, O_CLOEXEC) != 0)
		return -1;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, p[1], 1);
	posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	rc = posix_spawn(&pid, a->o.runsc, &fa, NULL, argv, envp);
	posix_spawn_file_actions_destroy(&fa);
	close(p[1]);
	if (rc != 0) {
		close(p[0]);
		return -1;
	}
	for (;;) {
		ssize_t n;

		if (len + 4096 + 1 > cap) {
			if (cap >= RUNSC_LIST_MAX) {
				kill(pid, SIGKILL);
				break;
			}
			cap = cap ? cap * 2 : 65536;
			out = xrealloc(out, cap);
		}
		n = read(p[0], out + len, cap - len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	close(p[0]);
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (out)
		out[len] = '\0';
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || len + 4096 + 1 > RUNSC_LIST_MAX) {
		free(out);
		return -1;
	}
	if (outp)
		*outp = out ? out : xstrdup("");
	else
		free(out);
	return 0;
}

/*
 * Whether runsc container c (its OCI state from `runsc list`) is an
 * execution pod's whose pod is gone: its CRI annotations name an airlock-
 * pod (namespace, name, uid), this agent follows no run of that uid, and
 * the API server has no pod of that name and uid. 1 gone, 0 not (or not
 * known). containerd's NotFound alone is no evidence: an agent talking to
 * another containerd (a wrong --containerd-socket) gets it for every
 * container on the node (issue 28).
 */
static int
runsc_pod_gone(struct agent *a, json_t *c)
{
	json_t *ann = json_object_get(c, "annotations"), *cur = NULL;
	const char *ns = json_string_value(json_object_get(ann,
	    "io.kubernetes.cri.sandbox-namespace"));
	const char *pod = json_string_value(json_object_get(ann,
	    "io.kubernetes.cri.sandbox-name"));
	const char *uid = json_string_value(json_object_get(ann,
	    "io.kubernetes.cri.sandbox-uid"));
	struct k8s_error err;
	int rc, known;

	if (ns == NULL || pod == NULL || uid == NULL || !uid[0] ||
	    strncmp(pod, "airlock-", 8) != 0)
		return 0;
	pthread_mutex_lock(&a->lock);
	known = agent_find_run(a, uid) != NULL;
	pthread_mutex_unlock(&a->lock);
	if (known)
		return 0;
	rc = k8s_get(a->client, &k8s_res_pods, ns, pod, &cur, &err);
	if (rc == 0) {
		/* A pod of that name: gone only if it is another (a new uid). */
		const char *now = k8s_obj_uid(cur);

		rc = now != NULL && strcmp(now, uid) != 0;
		json_decref(cur);
		return rc;
	}
	return rc == K8S_ENOTFOUND;
}

/*
 * runsc's state for containers containerd no longer knows, left stopped
 * in the node's runsc root: a sandbox SIGKILLed with its node (or its
 * shim) leaves it there when containerd's cleanup of the dead shim
 * cannot `runsc delete` it. Once a minute, each such container that is
 * stopped, that containerd answers NotFound for, and whose execution pod
 * the API server says is gone (runsc_pod_gone) is deleted with `runsc
 * delete --force`. Never one containerd knows, nor a running one, nor
 * one that cannot be matched to a pod.
 */
void
agent_sweep_runsc(struct agent *a)
{
	static const char *const list[] = { "list", "-format=json", NULL };
	long long now = clock_mono_ms();
	json_t *all, *c;
	char *out = NULL;
	size_t i;

	if (a->o.runsc == NULL || a->o.runsc_root == NULL ||
	    !atomic_load(&a->ctrd_ok) || now < a->next_runsc_sweep_ms)
		return;
	a->next_runsc_sweep_ms = now + RUNSC_SWEEP_MS;
	if (agent_runsc_run(a, list, &out) != 0) {
		log_debug("runsc list failed", "root=%s", a->o.runsc_root);
		return;
	}
	all = json_loads(out, 0, NULL);
	free(out);
	json_array_foreach(all, i, c) {
		const char *id = json_string_value(json_object_get(c, "id"));
		const char *st = json_string_value(json_object_get(c, "status"));
		struct k8s_error err;
		json_t *labels = NULL;
		int rc;

		if (id == NULL || st == NULL || strcmp(st, "stopped") != 0)
			continue;
		rc = ctrd_container_labels(a->ctrd, id, &labels, &err);
		json_decref(labels);
		if (rc != K8S_ENOTFOUND || !runsc_pod_gone(a, c))
			continue;
		{
			const char *del[] = { "delete", "--force", id, NULL };

			if (agent_runsc_run(a, del, NULL) == 0) {
				log_info("removed a stopped sandbox containerd no "
				    "longer knows", "container=%.12s", id);
				metric_inc(a->m_swept, "sandboxes");
			} else {
				log_warn("cannot remove a stopped sandbox",
				    "container=%.12s", id);
			}
		}
	}
	json_decref(all);
}
