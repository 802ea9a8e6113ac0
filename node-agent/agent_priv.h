/*
 * agent_priv.h - what the node agent's files share, not for its users
 * (agent.h is). One lock guards the table of runs; see agent.c for the
 * threads and what each does, and node-agent/docs/agent.md for why.
 *
 *   agent.c    the run table, the pod cache that feeds it, life cycle
 *   events.c   containerd's task events: start, exit, OOM
 *   tick.c     the ticker: tail logs, decide (agent_decide), kill, and
 *              hand records and deletes to the workers
 *   record.c   a run's result into its execution's status
 *   sweep.c    orphan pods and stale pod logs
 *   check.c    the configuration against the node: readiness
 *   sessions.c a session's idle and lifetime ends, the controller down
 */
#ifndef AIRLOCK_AGENT_PRIV_H
#define AIRLOCK_AGENT_PRIV_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "agent.h"
#include "backoff.h"
#include "ctrd.h"
#include "informer.h"
#include "result.h"
#include "usage.h"
#include "workqueue.h"

#define CONTAINER	"run"		/* podspec's container name */
#define AGENT_WORKERS	4		/* API calls in parallel */
#define MAX_RECORD	(64 * 1024)	/* a CRI log record; containerd cuts at 16 KiB */
#define READ_CHUNK	(256 * 1024)
#define VERIFY_MS	5000		/* a started container no pod claims: not ours */
#define LOG_STALE_S	600		/* a pod log dir untouched that long, no pod */
#define RUNSC_SWEEP_MS	60000		/* runsc's own leftovers looked for this often */
#define RUNSC_LIST_MAX	(8 << 20)	/* bytes of `runsc list` read at most */
#define CTRD_DOWN_MARGIN_NS	1000000000LL	/* exits this long before the stream ended count too */
#define KILL_RETRY_MS	1000		/* a kill with no exit after it: again */
/*
 * A cold run's CRI log not there (never opened) this long after its exit:
 * recorded ResultLost, naming the file. containerd makes the file before
 * the program starts, so its absence is a fault, not empty output; the
 * wait covers a slow filesystem, well within the controller's 30 s grace.
 */
#define LOG_MISSING_MS	5000
#define CHECK_MS	5000		/* the configuration checked this often */
#define CHECK_MISSES	2		/* a running pod missed this many checks in a row */
#define CHECK_CTRD_MAX	4		/* running pods containerd is asked about, each check */
#define CHECK_REASON_MAX	512
/*
 * The crilogs of all runs together hold at most this many bytes of
 * output (crilog_budget), and each run's four buffers their first
 * AGENT_OUTPUT_FLOOR bytes besides: a run keeps at least 64 KiB of each
 * stream however many others filled the budget (a hostile review of issue
 * 27: one tenant's runs left later ones with nothing). A node's agent,
 * 256Mi in the chart, stays bounded whatever the number of runs: 72 MiB
 * plus 256 KiB a run, 99.5 MiB at the kubelet's 110 pods
 * (node-agent/docs/agent.md).
 */
#define AGENT_OUTPUT_MEMORY	(72LL << 20)
#define AGENT_OUTPUT_FLOOR	((size_t)64 << 10)

/* One execution pod on this node, keyed by the pod's uid. */
struct run {
	struct run	*next;
	char		*uid, *ns, *pod;	/* the pod */
	char		*cx;			/* its execution, once learned */
	char		*cx_uid;		/* and that execution's uid */
	size_t		 budget;		/* encoded bytes of output in status */
	char		*cid;			/* the container, once known */
	/*
	 * Trust, in two steps (trust.c). learned: the cached pod names an
	 * execution by its label and its controller owner (a CodeExecution
	 * of that uid): the limits above are read. verified: that execution,
	 * read from the API server, has that uid, names this pod
	 * (status.podName) and has not ended. Only a verified run is
	 * followed: its log read, its deadline armed, its result recorded,
	 * its files out stored. refused: the execution has ended, names
	 * another pod, or is gone: the program is killed (or never let
	 * run) and the pod deleted, nothing recorded.
	 */
	int		 learned;
	int		 verified;
	int		 refused;
	long long	 verify_ms;		/* the next probe, if not yet */
	int		 waited;		/* its exit wait was started */
	struct backoff	 vretry;
	long long	 seen_ms;		/* made, for VERIFY_MS */
	long long	 timeout_ms;
	size_t		 max_out;
	int64_t		 start_ns, deadline_ns;	/* deadline: agent_arm_deadline */

	struct crilog	*log;
	struct agent_logf lf;			/* its CRI log, followed */
	long long	 last_read_ms;		/* last time the log grew */
	/*
	 * Its writer closed the log (inotify IN_CLOSE_WRITE on the file
	 * followed, log_wd): both streams ended, nothing more comes.
	 */
	int		 log_wd;		/* 0: no watch */
	int		 log_closed;
	off_t		 closed_size;		/* the log's, at the close */
	ino_t		 log_ino;
	dev_t		 log_dev;

	int		 exited;
	int		 exit_exact;		/* from containerd's TaskExit */
	/*
	 * The exit came from the sandbox (exitwait.c) before containerd's:
	 * its output is all in once the log closes, and a quiet log alone
	 * is not enough until TaskExit (containerd may still be copying).
	 */
	int		 exit_early;
	uint32_t	 status;
	int64_t		 exited_ns;
	long long	 exit_seen_ms;
	/*
	 * A TaskExit that came when the run could not take it (a warm exec
	 * not marked started yet: print(1) can end before Tasks.Start's
	 * answer is back; or the run busy): kept, applied by the next tick
	 * that can (agent_run_exit_pending). Dropped, the run waited for its
	 * deadline and ended TimedOut with its output whole (bench/chart.sh,
	 * the chart's default agent, this stop).
	 */
	int		 pend_exit;
	uint32_t	 pend_status;
	int64_t		 pend_exited_ns;
	int		 oom;
	/*
	 * Its end is not the program's: the kubelet says containerd lost
	 * the task (reason Unknown, exit 255) or could not find the
	 * container (ContainerStatusUnknown, 137), as after a node's loss;
	 * or its program never started as far as anyone saw (no TaskStart,
	 * no start time: a start that failed). Not recorded: the controller
	 * decides (NodeLost, ResultLost or StartFailed).
	 */
	int		 unknown;
	enum cx_kill	 why;
	char		*isolation;		/* why the sandbox is refused */
	/*
	 * Egress (docs/network.md): netclass, its pod is an execution's
	 * own under the network RuntimeClass (the pod's spec, which its
	 * creator wrote); egress, the execution as the API server has it
	 * says the controller granted it to this very pod (status.egress,
	 * which only the controller may write). netstack, both: its sandbox
	 * may have gVisor's network stack.
	 */
	int		 netclass;
	int		 egress;
	int		 netstack;
	/*
	 * The byte cap (meter.c): its pod's address and its cap
	 * (CX_ANN_EGRESS_BYTES), learned from its pod; meter_wanted, both
	 * and an agent that meters (--iptables). meter_on: its chain was
	 * put in place; meter_done: read at its end and taken away (or never
	 * made); meter_read, with a reading: meter_bytes, within the cap.
	 */
	char		 ip[16];
	long long	 meter_cap;
	/*
	 * Its gate's metered port M (podspec_gate_ports): from its
	 * execution's uid, or a pool's holder's from its pool's (it is
	 * metered before any claim); 0 until known.
	 */
	int		 meter_port;
	int		 meter_wanted;
	int		 meter_on;
	int		 meter_done;
	int		 meter_read;
	int		 meter_over;		/* past its cap at the last reading */
	long long	 meter_bytes;
	int		 kill_sent;
	long long	 kill_at_ms;		/* sent then; again if no exit */
	int64_t		 sandbox_killed_ns;	/* SIGKILL landed on runsc-sandbox */
	uint32_t	 pid;			/* the task's, from TaskStart */
	int		 usage_done;
	struct usage	 usage;			/* -1: the node did not say */

	/* The warm path (warm.c): a claimed holder, the program exec'd in. */
	int		 warm;
	int		 warm_spawned;		/* its thread was started */
	int		 warm_started;		/* Tasks.Start returned */
	int		 io_done;		/* its output is all read */
	int64_t		 cpu_before_ns;		/* the holder's, at the start; -1 */
	int64_t		 oom_before;		/* the holder's OOM kills then; -1 */
	json_t		*process;		/* its OCI process, from TaskStart */
	/*
	 * A session's step (docs/sessions.md): a warm run on the session's
	 * pod, a request to its step server (serve.c), no exec of its own;
	 * the run is the pod's (its uid), one step at a time. Recorded, it stays parked (never the
	 * pod deleted) until the pod carries another step or goes (tick.c).
	 * lost: why its output cannot be had (an agent that restarted
	 * during it), recorded ResultLost; note: what its message adds
	 * (why it could not start).
	 */
	int		 step;
	char		*lost;
	char		*note;
	char		*session_end;	/* CX_KILL_SESSION's message */
	/*
	 * The step was cancelled while it ran (SESSION_ANN_CANCEL on the
	 * pod names it): its thread writes the step server a CANCEL once
	 * (interrupt_sent), which interrupts the kernel as at a timeout (its
	 * status is Cancelled already; the session and its state stay).
	 */
	int		 interrupt_wanted, interrupt_sent;

	/* Live output (spec.output.stream): copies into the status so far. */
	int		 stream;
	int		 policy;	/* its profile has a code policy */
	size_t		 out_bytes, out_files;	/* files out's budget; 0 0: off */
	int		 flushing;		/* a copy in flight: not freed */
	int		 nflush;
	long long	 flushed_bytes;		/* charged so far, of RUN_MAX */
	long long	 next_flush_ms;
	uint64_t	 flushed_total;		/* bytes seen at the last copy */
	size_t		 flushed_out, flushed_err;	/* what it held */

	/* Checks in a row its log directory, its container, was not found. */
	int		 cfg_miss, ctrd_miss;
	int		 recorded;		/* result written, or someone's */
	int		 busy;			/* a call is in flight for it */
	long long	 retry_ms;
	struct backoff	 retry;			/* a record that failed: again */
};

struct agent {
	struct k8s_client	*client;
	struct agent_opts	 o;
	struct ctrd		*ctrd;
	struct informer		*pods;
	char			*field_selector;

	pthread_mutex_t		 lock;
	struct run		*runs;
	atomic_int		 stop;
	atomic_int		 ctrd_ok;
	/*
	 * When containerd's event stream last ended (agent_now_ns(); 0:
	 * never): a containerd restarted then closed every log it wrote,
	 * and a program that exited before the new one reattached lost what
	 * it wrote in between (record.c says so in the result).
	 */
	atomic_llong		 ctrd_down_ns;
	/*
	 * When the containerd that answers now started (its socket's
	 * ctime, wall ns; 0: unknown): a run that started before it went
	 * through a restart this agent may not have seen (it started after).
	 */
	atomic_llong		 ctrd_started_ns;
	int			 started;
	pthread_t		 ev_th, tick_th;
	pthread_t		 workers[AGENT_WORKERS];
	long long		 next_sweep_ms;
	/*
	 * The configuration check (check.c), on a worker every CHECK_MS:
	 * cfg_ok once it passed, else cfg_why says why not (written with
	 * the lock held; the flags read without it too). act_ok: records
	 * and sweeps may go, as they may once it passed, or when only
	 * containerd does not answer; never before the first check, nor
	 * while the log directory or a running pod disagrees with the node.
	 */
	atomic_int		 cfg_ok;
	atomic_int		 act_ok;
	char			 cfg_why[CHECK_REASON_MAX];
	int			 cfg_checked;	/* a check ran */
	long long		 next_check_ms;
	int			 checking;
	long long		 next_runsc_sweep_ms;	/* sweep.c, sweeping held */
	int			 sweeping;
	/*
	 * What the workers do, as keys: "record/UID", "delete/UID" (a
	 * run's pod uid), "session/..." (sessions.c), "check", "sweep" and
	 * "serve-end" (serve.c).
	 */
	struct workqueue	*q;
	/*
	 * inotify, IN_CLOSE_WRITE on the CRI logs of cold runs: the ticker
	 * wakes on it and records at once, where a quiet log otherwise waits
	 * two polls. -1 when inotify is not there: the quiet wait alone.
	 */
	int			 ino_fd;
	/* An eventfd the ticker polls too: agent_wake. -1 if none. */
	int			 wake_fd;

	/*
	 * The execution pods' gVisor sandboxes by pid, learned at their pause
	 * container's TaskStart (events.c; the events thread's alone).
	 */
	struct agent_sbx	*sbxs;
	int			 nsbx;

	/* The byte cap's passes (meter.c): one at a time, on a worker. */
	int			 metering;
	int			 meter_setup;	/* its chain and FORWARD's jump made */
	int			 meter_failed;	/* the last pass did not get through */
	long long		 next_meter_ms;

	atomic_int		 warm_threads;	/* warm.c's, running */
	atomic_int		 exit_waiters;	/* exitwait.c's, running */

	/* Every run's crilog draws its memory from here (AGENT_OUTPUT_MEMORY). */
	struct crilog_budget	*out_mem;

	struct metric		*m_results, *m_record, *m_active, *m_swept;
	struct metric		*m_trust;
	struct metric		*m_deliver, *m_waits, *m_flush;
	double			 flush_tokens;	/* agent_flush_take's bucket */
	long long		 flush_last_ms;
	int			 nflushing;	/* copies in flight */
	/*
	 * The session pods on this node, their clocks (sessions.c): at most
	 * AGENT_SESSIONS_MAX (a node's pods are fewer), looked at every
	 * AGENT_SESSIONS_MS by the ticker.
	 */
	struct agent_session	*sessions;
	int			 nsessions;
	long long		 next_sessions_ms;
	/*
	 * The session pods' step servers (serve.c), one a pod at most; and
	 * those the ticker ended, for a worker to end ("serve-end").
	 */
	struct agent_server	*servers, *servers_ended;
};

#define AGENT_SESSIONS_MAX	1024
#define AGENT_SESSIONS_MS	1000
#define AGENT_SESSIONS_INDEX	"session"	/* the pod cache's index value */
/* A step killed at its session's end is recorded before its pod goes, within this. */
#define AGENT_SESSION_STEP_WAIT_MS	3000

/* agent.c: the table (lock held for each). */
int64_t agent_now_ns(void);
struct run *agent_find_run(struct agent *a, const char *uid);
struct run *agent_new_run(struct agent *a, const char *uid, const char *ns,
    const char *pod);
void agent_free_run(struct run *r);
void agent_learn_pod(struct run *r, json_t *pod, const char *netclass);
/*
 * Its exit from the kubelet's terminated state (term, borrowed), unless
 * one came before. One whose end the node lost track of, or whose program
 * never started as far as anyone saw, is marked unknown (not recorded).
 */
void agent_learn_exit(struct run *r, json_t *term);
/*
 * The one place a run's deadline is set: its start plus its timeout, once
 * both are known (the start from TaskStart or the kubelet, the timeout
 * from the verified pod); 0 until then.
 */
void agent_arm_deadline(struct run *r);

/* A pod the cache announced: make or complete its run (lock not held). */
void agent_pod_seen(struct agent *a, json_t *pod);
/*
 * A session's pod (SESSION_LABEL_UID), or a holder's: the agent keeps its
 * sandbox's run (pid, isolation check, OCI process) for the exec to come.
 */
int agent_pod_keeps_sandbox(json_t *pod);

/* trust.c */
/*
 * What the execution cx (as the API server has it, borrowed; its uid
 * already tested equal to the pod's label) says of pod: AGENT_TRUST when
 * its status names pod and its phase is not terminal; AGENT_NOT_YET when
 * it names no pod yet (the controller writes podName just after the
 * create) and has not ended; AGENT_ENDED when its phase is terminal;
 * AGENT_OTHER_POD when it names another. Pure; unit-tested. AGENT_GONE
 * is the probe's own answer (404, or 422: another execution of the name).
 */
enum agent_trust { AGENT_TRUST, AGENT_NOT_YET, AGENT_ENDED, AGENT_OTHER_POD,
    AGENT_GONE };
enum agent_trust agent_trust_verdict(json_t *cx, const char *pod);
/*
 * Did the controller grant execution cx egress (status.egress.granted),
 * for the pod of uid pod_uid (status.egress.podUID: the one it made)?
 */
int agent_trust_egress(json_t *cx, const char *pod_uid);
/*
 * r may have gVisor's network stack once both its pod's class and its
 * execution say so; a refusal of its sandbox for that alone is then
 * taken back (lock held).
 */
void agent_netstack_grant(struct run *r);
/*
 * Ask the API server about learned run r (r busy; without the lock) and
 * act on the answer, locked: verified (its crilog made, its deadline
 * armed, its exit wait started), refused (to be killed and deleted), or
 * asked again after a backoff. The probe is a status patch that only
 * tests the uid (agent_probe): no read permission, and the status guard
 * admits it for this node's executions only.
 */
void agent_verify(struct agent *a, struct run *r);
/*
 * The verified run r's crilog, from the node's budget (lock held); and
 * the note a result adds when that budget ran short (note as in
 * agent_ctrd_note).
 */
void agent_run_log(struct agent *a, struct run *r);
void agent_memory_note(struct agent *a, const struct run *r, char *note,
    size_t note_size);

/* events.c */
void *agent_events_main(void *arg);
void agent_sbx_free_all(struct agent *a);
/*
 * When pid started (/proc/PID/stat's 22nd field, in clock ticks since
 * boot): with the pid, a process's identity. 0 when it cannot be read.
 */
unsigned long long agent_pid_start(uint32_t pid);

/*
 * sweep.c: run runsc with args (NULL-terminated, after --root; at most
 * eight); its standard output, up to RUNSC_LIST_MAX bytes, as a new string
 * in *outp (when not NULL) if it exits 0. 0, or -1.
 */
int agent_runsc_run(struct agent *a, const char *const *args, char **outp);

/*
 * serve.c: a session pod's step server, `warm --serve` (docs/sessions.md).
 * agent_serve_take: the pod's (uid) own, idle, or one started now from
 * base (the container's OCI process) and kernel (its argv) in the sandbox
 * of pid (checked), taken; NULL with why when none could be (nothing of a
 * step was sent). Given back with agent_serve_put: kept (keep) for the
 * next step, or ended. agent_serve_sandbox: 1 with the pid and base (a new
 * reference) of the pod's idle, live server, as checked at its start.
 */
struct agent_server;
struct buf;
int agent_serve_sandbox(struct agent *a, const char *uid, uint32_t *pid,
    json_t **base);
struct agent_server *agent_serve_take(struct agent *a, const char *uid,
    const char *ns, const char *pod, const char *cid, uint32_t pid,
    json_t *base, json_t *kernel, char *why, size_t whylen);
void agent_serve_put(struct agent *a, struct agent_server *s, int keep);
unsigned long long agent_serve_next_seq(struct agent_server *s);
/*
 * containerd's TaskExit of exec exec_id in container cid (NULL: the
 * sandbox's own): its server is gone (lock held).
 */
void agent_serve_exited(struct agent *a, const char *cid, const char *exec_id);
/* What it wrote on stderr first, one line (a message's). */
const char *agent_serve_said(struct agent_server *s);
/*
 * Write request req (step seq) and read the answer: its output into the
 * crilog of step step_uid's run on pod uid, a CANCEL sent once that run's interrupt_sent
 * is set. DONE: its X came, *status the step's (DONE_BROKEN: and bytes after
 * it; the server must go). UNSTARTED: the server ended with no record
 * ever (it may not have started). LOST: it ended inside the step. BROKEN:
 * what it wrote is not records. RUN_GONE: the run went, or the agent stops.
 */
enum serve_end { SERVE_DONE, SERVE_DONE_BROKEN, SERVE_UNSTARTED, SERVE_LOST,
    SERVE_BROKEN, SERVE_RUN_GONE };
enum serve_end agent_serve_step(struct agent *a, struct agent_server *s,
    const char *uid, const char *step_uid, const struct buf *req,
    unsigned long long seq, unsigned *status);
/* Pod uid's run if it is step step_uid's (lock held), else NULL. */
struct run *agent_step_run(struct agent *a, const char *uid,
    const char *step_uid);
/*
 * The ticker's: idle servers whose pod went, or that ended or wrote, put
 * aside for a worker's agent_serve_end_swept.
 */
void agent_serve_sweep(struct agent *a);
void agent_serve_end_swept(struct agent *a);
void agent_serve_free_all(struct agent *a);

/* tick.c */
void *agent_tick_main(void *arg);
void *agent_worker_main(void *arg);

/* record.c */
int agent_probe(struct agent *a, const struct k8s_resource *res,
    const char *ns, const char *name, const char *path, const char *value,
    json_t **cur, struct k8s_error *err);
/*
 * An object's phase as the server has it ("" if none), or NULL: read by
 * a probe that tests its uid. *gone when it is gone, or another object
 * now has its name.
 */
char *agent_read_phase(struct agent *a, const struct k8s_resource *res,
    const char *ns, const char *name, const char *uid, int *gone);
int agent_record(struct agent *a, struct run *r);
int agent_delete_pod(struct agent *a, const char *ns, const char *name,
    const char *uid);
/*
 * Append to note (a NUL-terminated string in note_size bytes) that
 * containerd restarted while cold run r ran, when it did: its output may
 * lack its end.
 */
void agent_ctrd_note(struct agent *a, const struct run *r, char *note,
    size_t note_size);
/* r's output so far into its running execution's status (r busy). */
void agent_flush(struct agent *a, struct run *r);

/*
 * events.c (lock held): containerd's TaskExit ev for run r, its program's
 * (its init, or a warm run's exec or sandbox): applied now if r can take
 * it, else kept for agent_run_exit_pending, which tick.c calls for each
 * run it may touch (not busy).
 */
void agent_run_exit(struct agent *a, struct run *r, const struct ctrd_event *ev);
void agent_run_exit_pending(struct agent *a, struct run *r);

/* warm.c (lock held for both) */
#define WARM_EXEC_ID	"airlock-run"	/* a holder's one exec */
void agent_warm_spawn(struct agent *a, struct run *r);
void agent_warm_maybe_record(struct agent *a, struct run *r);
void agent_warm_usage(struct run *r);
/*
 * Run r's program failed to start (unit-tested). sent: its start was
 * asked for (Tasks.Start sent, a runsc exec client spawned), so it may
 * run whatever the failure said: r ends here, killed at its start
 * (CX_KILL_START: StartFailed), its record queued, and 0; the caller
 * kills what may run. Else nothing of it ran: 1, the caller gives it
 * back to run cold.
 */
int agent_warm_start_failed(struct agent *a, struct run *r, int sent);
void agent_usage_once(struct agent *a, struct run *r);
/* Without the lock: a deleted pod's exec directory; stale ones. */
void agent_warm_forget(struct agent *a, const char *uid);
void agent_warm_sweep(struct agent *a);

/*
 * events.c: NULL if pid is gVisor with no network, else why not (static).
 * wait: an empty cmdline (a process in execve) is read again for up to
 * 100 ms; never with a->lock held.
 */
const char *agent_sandbox_refused(uint32_t pid, int wait);

/*
 * exitwait.c: with --runsc, a cold run's exit straight from its sandbox
 * (`runsc wait`), ~100 ms before containerd's TaskExit; without the lock.
 */
void agent_exitwait_spawn(struct agent *a, const char *uid, const char *cid);
/*
 * Whether run r takes status from `runsc wait` on container cid (lock
 * held; unit-tested): its own container, cold, nothing came first (an
 * exit, a kill, a record), and not a death by signal (over 128: a TaskOOM
 * may follow).
 */
int agent_wait_takes(const struct run *r, const char *cid, uint32_t status);
void agent_wake(struct agent *a);

/*
 * meter.c (docs/network.md, "The byte cap"). agent_meter_pass, a worker's
 * "meter" key (without the lock): the chains of metered runs made, read
 * and removed; a run past its cap gets CX_KILL_EGRESS. agent_meter_due
 * (lock held): whether the ticker should queue a pass now.
 */
#define METER_MS	1000		/* a live metered run's counters read this often */
#define METER_IDLE_MS	60000		/* with none: stale chains looked for this often */
#define METER_FINAL_MS	5000		/* an ended run's last reading waited for at most */
void agent_meter_pass(struct agent *a);
int agent_meter_due(const struct agent *a, long long now);

/* check.c */
/*
 * Check the configuration against the node (without the lock): 0; -1
 * with why (a message naming the flag and its value) when the pod log
 * directory cannot be read, or a running pod's log directory or
 * container is not where the flags say (CHECK_MISSES checks in a row:
 * counted in its run); 1 with why when containerd does not answer and
 * nothing else is wrong.
 */
int agent_check_config(struct agent *a, char *why, size_t why_size);
/* Check, and set readiness from the answer (a worker's "check" key). */
void agent_check(struct agent *a);

/* tick.c: where run r's CRI log is (a new string). */
char *agent_log_path(const struct agent *a, const struct run *r);

/* sweep.c */
void agent_sweep_orphans(struct agent *a);
void agent_sweep_logs(struct agent *a);
void agent_sweep_runsc(struct agent *a);

/*
 * What the ticker does about a run now, decided from the run and the
 * clocks alone (lock held; unit-tested). AGENT_KILL with *why: the
 * program must stop now (an isolation refusal made at its start, more
 * than hard_cap bytes of output, or its deadline passed), and no kill is
 * in flight, or the last one is KILL_RETRY_MS old with no exit. Its exit
 * seen, AGENT_RECORD once its log has been quiet for two polls (the last
 * lines containerd copies after the exit are in) and any retry delay has
 * passed. Recorded, AGENT_DELETE. Else AGENT_WAIT. A run that exited is
 * never killed, whatever its deadline: the exit wins the race. A cold
 * run whose log never opened is recorded (ResultLost) only once it has
 * stayed so LOG_MISSING_MS after the exit.
 */
enum agent_step { AGENT_WAIT, AGENT_KILL, AGENT_RECORD, AGENT_DELETE };
enum agent_step agent_decide(const struct run *r, long long hard_cap,
    long poll_ms, long long now_ms, int64_t wall_ns, enum cx_kill *why);

/*
 * sessions.c: the session pods' clocks. agent_sessions_pass (the ticker,
 * without the lock) looks at each and queues "session/POD-UID" for one
 * whose end is due; agent_session_end (a worker) writes that end and
 * deletes the pod. agent_sessions_free at the agent's end.
 */
void agent_sessions_pass(struct agent *a);
void agent_session_end(struct agent *a, const char *pod_uid);
void agent_sessions_free(struct agent *a);
/*
 * The session whose pod ns/pod is (the cache's) has had n kernel restarts,
 * as its step's report says (warm --step counts them in the sandbox):
 * status.restarts written, by a patch that tests the session's uid. A
 * failure is left for the next step's report, which says it again.
 */
void agent_session_restarts(struct agent *a, const char *ns, const char *pod,
    long long n);

#endif
