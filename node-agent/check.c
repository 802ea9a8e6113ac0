/*
 * check.c - the agent's configuration against the node (agent_priv.h).
 * An agent told another node's pod log directory (or containerd socket,
 * on a host that runs several nodes) finds no log for any of its runs,
 * and would record nothing as every program's output: 52 executions on a
 * test node ended Succeeded with stdout "" for programs that printed "ok"
 * (issue 28). So at its start and every CHECK_MS it checks what it was
 * told against what it finds, and while they disagree it is not ready
 * (/readyz says why), records nothing and sweeps nothing.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "agent_priv.h"
#include "log.h"
#include "xmalloc.h"

/* A running run's identity, copied out of the table for the calls. */
struct check_run {
	char	*uid, *ns, *pod, *cid;
};

/* The runs whose program runs now, as copies (lock taken here). */
static struct check_run *
running(struct agent *a, size_t *np)
{
	struct check_run *v = NULL;
	size_t n = 0, cap = 0;
	struct run *r;

	pthread_mutex_lock(&a->lock);
	for (r = a->runs; r; r = r->next) {
		if (!r->verified || r->refused || r->cid == NULL || !r->cid[0] ||
		    r->start_ns == 0 || r->exited || r->recorded)
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 16;
			v = xrealloc(v, cap * sizeof(*v));
		}
		v[n++] = (struct check_run){ xstrdup(r->uid), xstrdup(r->ns),
		    xstrdup(r->pod), xstrdup(r->cid) };
	}
	pthread_mutex_unlock(&a->lock);
	*np = n;
	return v;
}

/*
 * Whether containerd knows container cid as one of pod uid's: 0 yes (or
 * cannot tell: containerd's own trouble is ctrd_version's to report), -1
 * it says NotFound or names another pod.
 */
static int
ctrd_knows(struct agent *a, const char *cid, const char *uid)
{
	struct k8s_error err;
	json_t *labels = NULL;
	const char *puid;
	int rc = ctrd_container_labels(a->ctrd, cid, &labels, &err);

	if (rc == K8S_ENOTFOUND)
		return -1;
	puid = json_string_value(json_object_get(labels,
	    "io.kubernetes.pod.uid"));
	rc = rc == 0 && (puid == NULL || strcmp(puid, uid) != 0) ? -1 : 0;
	json_decref(labels);
	return rc;
}

/*
 * path and the directories above it made where missing (as mkdir -p;
 * path itself 0700): 0, or -1 with errno. A fresh host has no /run/airlock:
 * a warm run or a session's step could not mark its start (warm.c), and
 * ended StartFailed.
 */
static int
make_dirs(const char *path)
{
	char p[4096];
	size_t n = strlen(path);
	struct stat st;

	if (n == 0 || n >= sizeof(p)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(p, path, n + 1);
	for (char *s = p + 1; *s; s++)
		if (*s == '/') {
			*s = '\0';
			if (mkdir(p, 0755) != 0 && errno != EEXIST)
				return -1;
			*s = '/';
		}
	if (mkdir(p, 0700) != 0 && errno != EEXIST)
		return -1;
	if (stat(p, &st) != 0)
		return -1;
	if (!S_ISDIR(st.st_mode)) {
		errno = ENOTDIR;
		return -1;
	}
	return 0;
}

int
agent_check_config(struct agent *a, char *why, size_t why_size)
{
	struct k8s_error err;
	struct check_run *v;
	struct dirent *de;
	size_t n, i;
	char *ver = NULL, down[CHECK_REASON_MAX];
	int rc = 0, answers;
	DIR *d;

	why[0] = '\0';
	errno = 0;
	if ((d = opendir(a->o.pod_logs_dir)) == NULL ||
	    ((de = readdir(d)) == NULL && errno != 0)) {
		snprintf(why, why_size, "cannot read the pod log directory "
		    "'%s' (--pod-logs-dir): %s", a->o.pod_logs_dir,
		    strerror(errno));
		if (d)
			closedir(d);
		return -1;
	}
	closedir(d);
	if (a->o.exec_dir != NULL && make_dirs(a->o.exec_dir) != 0) {
		snprintf(why, why_size, "cannot make the exec directory '%s' "
		    "(--exec-dir): %s", a->o.exec_dir, strerror(errno));
		return -1;
	}
	answers = ctrd_version(a->ctrd, &ver, &err) == 0;
	free(ver);
	if (!answers)
		snprintf(down, sizeof(down), "containerd does not answer at '%s' "
		    "(--containerd-socket): %.300s", a->o.containerd_socket,
		    err.message);
	/*
	 * Each program running now has its pod's log directory (the kubelet
	 * makes it before the sandbox) and a container containerd knows as
	 * its pod's. One check's miss may be a race with the pod's end; a
	 * run missing CHECK_MISSES checks in a row is not. A containerd that
	 * does not answer cannot tell; the directories are checked anyway.
	 */
	v = running(a, &n);
	for (i = 0; i < n; i++) {
		char *dir = xasprintf("%s/%s_%s_%s", a->o.pod_logs_dir, v[i].ns,
		    v[i].pod, v[i].uid);
		struct stat st;
		int dir_ok = stat(dir, &st) == 0 && S_ISDIR(st.st_mode);
		/*
		 * containerd is asked about a few runs only (a call can take
		 * 200 ms on a busy node): a wrong socket misses them all.
		 */
		int asked = answers && i < CHECK_CTRD_MAX;
		int ctrd_ok = !asked || ctrd_knows(a, v[i].cid, v[i].uid) == 0;
		struct run *r;

		pthread_mutex_lock(&a->lock);
		r = agent_find_run(a, v[i].uid);
		if (r != NULL && !r->exited && !r->recorded) {
			r->cfg_miss = dir_ok ? 0 : r->cfg_miss + 1;
			if (asked)
				r->ctrd_miss = ctrd_ok ? 0 : r->ctrd_miss + 1;
			if (rc == 0 && r->cfg_miss >= CHECK_MISSES) {
				rc = -1;
				snprintf(why, why_size, "the log directory '%s' "
				    "of running pod %s/%s does not exist: is "
				    "--pod-logs-dir ('%s') this node's?", dir,
				    v[i].ns, v[i].pod, a->o.pod_logs_dir);
			} else if (rc == 0 && r->ctrd_miss >= CHECK_MISSES) {
				rc = -1;
				snprintf(why, why_size, "containerd at '%s' does "
				    "not know container %.12s of running pod "
				    "%s/%s: is --containerd-socket this node's?",
				    a->o.containerd_socket, v[i].cid, v[i].ns,
				    v[i].pod);
			}
		}
		pthread_mutex_unlock(&a->lock);
		free(dir);
		free(v[i].uid);
		free(v[i].ns);
		free(v[i].pod);
		free(v[i].cid);
	}
	free(v);
	if (rc == 0 && !answers) {
		snprintf(why, why_size, "%s", down);
		rc = 1;
	}
	return rc;
}

void
agent_check(struct agent *a)
{
	char why[CHECK_REASON_MAX];
	int rc = agent_check_config(a, why, sizeof(why)), ok = rc == 0, changed;

	pthread_mutex_lock(&a->lock);
	changed = atomic_load(&a->cfg_ok) != ok || strcmp(a->cfg_why, ok ? "" :
	    why) != 0 || !a->cfg_checked;
	snprintf(a->cfg_why, sizeof(a->cfg_why), "%s", ok ? "" : why);
	a->cfg_checked = 1;
	atomic_store(&a->cfg_ok, ok);
	/*
	 * containerd down alone holds nothing: output comes from the log
	 * files and exits from the kubelet too (record.c flags what a
	 * restart may have cut).
	 */
	atomic_store(&a->act_ok, rc >= 0);
	pthread_mutex_unlock(&a->lock);
	if (!changed)
		return;
	/* Once per reason: a check every CHECK_MS would flood the log. */
	if (rc < 0)
		log_warn("node agent not ready: it records nothing until this "
		    "is fixed", "reason=\"%s\"", why);
	else if (rc > 0)
		log_warn("node agent not ready", "reason=\"%s\"", why);
	else
		log_info("configuration checked against the node", "logs=%s "
		    "containerd=%s", a->o.pod_logs_dir, a->o.containerd_socket);
	if (a->o.on_ready)
		a->o.on_ready(a->o.on_ready_arg, ok ? NULL : why);
}
