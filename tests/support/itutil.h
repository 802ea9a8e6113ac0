/*
 * itutil.h - helpers for integration tests against the real control plane
 * that tests/cluster/up.sh started (.cluster/env describes it).
 *
 * Nothing here is skipped quietly: without a cluster every helper fails
 * the calling test with a message saying so.
 */
#ifndef AIRLOCK_ITUTIL_H
#define AIRLOCK_ITUTIL_H

#include <jansson.h>

#include "client.h"
#include "cx.h"

/* A value from .cluster/env (borrowed), or NULL. */
const char *it_env(const char *key);

/*
 * The same, for a key the test cannot run without: a missing or empty one
 * fails the test, naming the key (the node's keys need NODE=1 up.sh).
 */
const char *it_env_need(const char *key);

/* A client as the admin (restricted = 0) or the least-privileged user. */
struct k8s_client *it_client(int restricted, struct k8s_config **cfgp);
void it_client_free(struct k8s_client *c, struct k8s_config *cfg);

/* Create a fresh namespace "PREFIX-xxxxxx"; returns its name (caller frees). */
char *it_namespace_new(struct k8s_client *c, const char *prefix);
void it_namespace_delete(struct k8s_client *c, const char *ns);

/* Create ConfigMap ns/name with data {k: v}; returns its resourceVersion. */
char *it_configmap(struct k8s_client *c, const char *ns, const char *name,
    const char *v);

/* The CodeExecution resource. */


/*
 * Install the CRDs of crds/ (CodeExecution, CodeExecutionPool,
 * CodeExecutionArtifacts, CodeSession) from their files by server-side
 * apply, and wait until each is Established; every
 * integration and e2e test that needs the API calls this. Fails the test
 * (cmocka) on any error.
 */
void it_install_crd(struct k8s_client *c);

/*
 * What the Helm chart will install cluster-wide, for pods to be admitted:
 * RuntimeClass "gvisor" and PriorityClass "airlock-execution". Idempotent.
 */
void it_install_classes(struct k8s_client *c);

/* Compact etcd at its current revision; returns that revision. */
long it_etcd_compact(void);

/*
 * Start a program of the flavour under test ($AIRLOCK_BIN/NAME) with the
 * NULL-terminated extra arguments, stdout and stderr to logpath. Returns
 * its pid. it_stop() signals it and reaps it: its wait status.
 */
#include <sys/types.h>
pid_t it_spawn(const char *name, const char *logpath, const char *const *args);
int it_stop(pid_t pid, int sig);

/*
 * A TCP port on 127.0.0.1 nothing listens on right now, in 10000-19999:
 * below the ephemeral range, so no outgoing connection (the tests and the
 * daemons make thousands) takes it before the daemon it is for binds it,
 * however long that is (the chart test's are bound minutes later), and
 * apart from tests/cluster/up.sh's 20000-31999. Never the same twice in a
 * process. A kernel-chosen port (bind to 0) is an ephemeral one: free
 * now, anyone's a moment later.
 */
int it_free_port(void);

/*
 * The path of $(B)/images/NAME, the host build of a runner image's binary
 * (the Makefile's), found from this test's own path ($(B)/tests/TIER/x),
 * into out: 0 when it is there and executable, else -1.
 */
int it_images_bin(const char *name, char *out, size_t n);

long it_mono_ms(void);
void it_sleep_ms(long ms);

/* 1 when this process runs under valgrind (its preload is in LD_PRELOAD). */
int it_under_valgrind(void);

/*
 * Fields of a status object: the test fails with "status.K is missing"
 * when K is absent or of another type.
 */
const char *it_str(json_t *st, const char *k);
long long it_int(json_t *st, const char *k);
int it_bool(json_t *st, const char *k);

/*
 * Run cmd with /bin/sh: its exit status (128 + signal if killed). *outp
 * gets its stdout (caller frees); its stderr goes to *errp, apart, when
 * errp is non-NULL, else after the stdout (2>&1).
 */
int it_sh(const char *cmd, char **outp, char **errp);

/*
 * All of a FIFO's read side (opened O_NONBLOCK) up to its EOF, as a new
 * NUL-terminated string of at most 64 KiB - 1 bytes; NULL on a read error
 * or after timeout_ms without EOF.
 */
char *it_drain_fifo(int fd, long timeout_ms);

/* The helm binary $HELM names (make chart sets it), or the test fails. */
const char *it_helm(void);

/*
 * A CodeExecution named name in ns from spec (JSON text), or the test
 * fails; and the wait for its end: its status (a new reference), or the
 * test fails after timeout_ms naming it and its status.
 */
void it_cx_create(struct k8s_client *c, const char *ns, const char *name,
    const char *spec);
json_t *it_cx_wait(struct k8s_client *c, const char *ns, const char *name,
    long timeout_ms);
/* The same until done(status) is true; what says what it waited for. */
json_t *it_cx_until(struct k8s_client *c, const char *ns, const char *name,
    int (*done)(json_t *status), const char *what, long timeout_ms);

/* Poll cond(arg) every 10 ms until true or timeout: 1 if it came true. */
int it_wait_for(int (*cond)(void *arg), void *arg, long timeout_ms);

#endif
