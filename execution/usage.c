/*
 * usage.c - see usage.h.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "usage.h"

#define FILE_MAX	4096		/* cpu.stat is a few lines */

/* A uid goes into a path: hex digits and dashes only. */
static int
plain_uid(const char *uid)
{
	size_t n = strlen(uid);

	if (n == 0 || n > 64)
		return 0;
	return strspn(uid, "0123456789abcdefABCDEF-") == n;
}

/* The file's text, NUL-terminated, in buf; its length or -1. */
static ssize_t
slurp(const char *path, char *buf, size_t size)
{
	ssize_t n, len = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

	if (fd < 0)
		return -1;
	while ((size_t)len < size - 1 &&
	    (n = read(fd, buf + len, size - 1 - (size_t)len)) != 0) {
		if (n < 0) {
			if (errno == EINTR)
				continue;
			close(fd);
			return -1;
		}
		len += n;
	}
	close(fd);
	buf[len] = '\0';
	return len;
}

/* A decimal count, alone on its line (a trailing newline allowed). */
static int64_t
number(const char *s)
{
	char *end;
	long long v;

	if (*s < '0' || *s > '9')
		return -1;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || (*end != '\0' && strcmp(end, "\n") != 0))
		return -1;
	return v;
}

static int64_t
read_number(const char *path)
{
	char buf[64];

	if (slurp(path, buf, sizeof(buf)) <= 0)
		return -1;
	return number(buf);
}

/* The count after "key " on a line of a flat keyed file (cpu.stat, memory.events). */
static int64_t
read_key(const char *path, const char *key)
{
	char buf[FILE_MAX], *line, *save = NULL;
	size_t klen = strlen(key);

	if (slurp(path, buf, sizeof(buf)) <= 0)
		return -1;
	for (line = strtok_r(buf, "\n", &save); line;
	    line = strtok_r(NULL, "\n", &save))
		if (strncmp(line, key, klen) == 0 && line[klen] == ' ')
			return number(line + klen + 1);
	return -1;
}

int64_t
usage_read_count(const char *dir, const char *file)
{
	char path[PATH_MAX + 64];

	if (dir == NULL)
		return -1;
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	return read_number(path);
}

int
usage_read_dirs(int v2, const char *mem_dir, const char *cpu_dir,
    struct usage *u)
{
	char path[PATH_MAX + 32];

	u->peak_memory = u->cpu_ns = u->oom_kills = -1;
	if (v2) {
		/* memory.peak since Linux 5.19. */
		u->peak_memory = usage_read_count(mem_dir, "memory.peak");
		if (mem_dir) {
			snprintf(path, sizeof(path), "%s/memory.events", mem_dir);
			u->oom_kills = read_key(path, "oom_kill");
		}
		if (cpu_dir) {
			int64_t us;

			snprintf(path, sizeof(path), "%s/cpu.stat", cpu_dir);
			us = read_key(path, "usage_usec");
			u->cpu_ns = us < 0 || us > INT64_MAX / 1000 ? -1 : us * 1000;
		}
	} else {
		u->peak_memory = usage_read_count(mem_dir, "memory.max_usage_in_bytes");
		u->cpu_ns = usage_read_count(cpu_dir, "cpuacct.usage");
		if (mem_dir) {
			snprintf(path, sizeof(path), "%s/memory.oom_control", mem_dir);
			u->oom_kills = read_key(path, "oom_kill");	/* Linux 4.13 */
		}
	}
	return u->peak_memory < 0 && u->cpu_ns < 0 ? -1 : 0;
}

static int
is_dir(const char *path)
{
	return access(path, X_OK) == 0;
}

/*
 * The pod's cgroup, relative to a hierarchy's root, as the kubelet would
 * have named it: form 0-2 cgroupfs, 3-5 systemd; QoS guaranteed,
 * burstable, besteffort.
 */
static void
pod_dir(int form, const char *uid, char *out, size_t size)
{
	static const char *const qos[] = { "", "burstable", "besteffort" };
	const char *q = qos[form % 3];
	char u[72];
	size_t i;

	if (form < 3) {
		snprintf(out, size, "kubepods%s%s/pod%s", *q ? "/" : "", q, uid);
		return;
	}
	for (i = 0; uid[i] && i < sizeof(u) - 1; i++)
		u[i] = uid[i] == '-' ? '_' : uid[i];
	u[i] = '\0';
	if (*q)
		snprintf(out, size, "kubepods.slice/kubepods-%s.slice/"
		    "kubepods-%s-pod%s.slice", q, q, u);
	else
		snprintf(out, size, "kubepods.slice/kubepods-pod%s.slice", u);
}

/*
 * cgroup v1 counts an OOM kill in the killed process's own cgroup alone
 * (v2, in memory.events, in its ancestors' too). gVisor's sandbox lives
 * in the pod's cgroup itself, runc's containers each in one below it: so
 * on v1 the pod's count is its own and its containers' together.
 */
static void
add_container_ooms(const char *pod_dir, struct usage *u)
{
	char path[PATH_MAX + 300];
	struct dirent *de;
	int64_t n;
	DIR *d;

	if ((d = opendir(pod_dir)) == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.' || strlen(de->d_name) > 255)
			continue;
		snprintf(path, sizeof(path), "%s/%s/memory.oom_control", pod_dir,
		    de->d_name);
		if ((n = read_key(path, "oom_kill")) < 0)
			continue;
		u->oom_kills = u->oom_kills < 0 ? n : u->oom_kills + n;
	}
	closedir(d);
}

int
usage_read(const char *mount, const char *root, const char *uid,
    struct usage *u)
{
	char rel[256], mem[PATH_MAX], cpu[PATH_MAX];

	u->peak_memory = u->cpu_ns = u->oom_kills = -1;
	if (mount == NULL)
		mount = "/sys/fs/cgroup";
	if (root == NULL || strcmp(root, "/") == 0)
		root = "";
	if (uid == NULL || !plain_uid(uid))
		return -1;
	for (int form = 0; form < 6; form++) {
		pod_dir(form, uid, rel, sizeof(rel));
		/* cgroup v1: one hierarchy per controller. */
		snprintf(mem, sizeof(mem), "%s/memory%s/%s", mount, root, rel);
		if (is_dir(mem)) {
			snprintf(cpu, sizeof(cpu), "%s/cpuacct%s/%s", mount, root, rel);
			usage_read_dirs(0, mem, cpu, u);
			add_container_ooms(mem, u);
			if (u->cpu_ns < 0) {
				snprintf(cpu, sizeof(cpu), "%s/cpu,cpuacct%s/%s",
				    mount, root, rel);
				u->cpu_ns = usage_read_count(cpu, "cpuacct.usage");
			}
			break;
		}
		/* cgroup v2: one tree. */
		snprintf(mem, sizeof(mem), "%s%s/%s", mount, root, rel);
		if (is_dir(mem)) {
			usage_read_dirs(1, mem, mem, u);
			break;
		}
	}
	return u->peak_memory < 0 && u->cpu_ns < 0 ? -1 : 0;
}
