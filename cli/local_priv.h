/*
 * local_priv.h - what cli/local.c (the run: its bundle, its pipes, its
 * status) and cli/local_host.c (the host around it: the cgroup, runsc, and
 * the records and watchdog that end a run its CLI no longer can) share.
 * Not public; cli.h is.
 */
#ifndef AIRLOCK_LOCAL_PRIV_H
#define AIRLOCK_LOCAL_PRIV_H

#include <ftw.h>
#include <signal.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "cli.h"

#define PIDS_MAX	4096	/* sandbox threads, not guest processes (host-facts) */
#define RUNS_DIR	"/run/airlock/runs"	/* a record per run in flight */
#define WATCHDOG_SLACK_MS	10000	/* past its deadline: the watchdog's */

/*
 * charts/airlock/values.yaml as text, built in by the Makefile
 * ($(B)/gen/values.c): its config.profiles are the runtimes.
 */
extern const char airlock_chart_values[];

/* A run's cgroup: its own directory in each hierarchy it needs. */
struct cg {
	int	 v2;
	char	*dirs[5];	/* v1: one per hierarchy; v2: dirs[0] */
	int	 n;
	char	*mem, *cpu, *acct, *pids;	/* where each controller's files are */
};

/*
 * Make cgroup name under mount with the memory limit mem (bytes), the CPU
 * limit cpu_milli and PIDS_MAX pids; 0, or K8S_EIO naming what failed.
 */
int cg_make(struct cg *g, const char *mount, const char *name, int64_t mem,
    int64_t cpu_milli, struct k8s_error *err);
/* SIGKILL every process of the cgroup; how many there were. */
int cg_kill(struct cg *g);
/* Remove the cgroup (it must be empty, or soon be). */
void cg_free(struct cg *g);
/* Write val to dir/file: 0 or -1. */
int local_put(const char *dir, const char *file, const char *val);

/* The signal mask children start with (local_run blocks signals). */
extern sigset_t local_child_mask;
/*
 * Start argv with its stdout and stderr on out and err_fd (-1:
 * /dev/null), in cgroup g when not NULL. Its pid, or -1.
 */
pid_t local_spawn(const char *const *argv, int out, int err_fd, struct cg *g);
/* runsc --root state ARGS to its end: its exit status, its stderr in msg. */
int local_runsc(const struct local_opts *o, const char *state,
    const char *const *args, char *msg, size_t msglen);

/* Record run id (workspace ws, cgroup g) in RUNS_DIR while it is in flight. */
void local_record_run(const char *id, const char *ws, const struct cg *g);
/* Reap the runs whose CLI and watchdog are both gone. */
void local_sweep_dead(const struct local_opts *o);
/*
 * A watchdog for run id in a session of its own: it reaps the run when
 * the CLI dies, and kills it deadline_ms from now. Its pid, or -1.
 */
pid_t local_watchdog(const struct local_opts *o, const char *id,
    long long deadline_ms);
/* nftw() callback: remove the entry. */
int local_rm_entry(const char *path, const struct stat *st, int type,
    struct FTW *f);

#endif
