/*
 * artifacts.h - files out: what a program leaves in /airlock/out/ comes
 * back with its result (issue 15; README: files out).
 *
 * The runner (images/runner/warm.c) writes the files, as a ustar archive
 * in base64, in a frame on stdout after the program's own output; the
 * node agent takes the frame out of the stream (crilog_out_frame), and
 * this checks it, as untrusted input, against the operator's budget:
 *
 *  - regular files only, relative paths of printable ASCII without "",
 *    "." or ".." components, each once;
 *  - at most max_files of them and max_bytes in all, taken by path in
 *    order; the rest are listed as dropped, with why.
 *
 * What is kept is stored in a CodeExecutionArtifacts object of the
 * execution's name, owned by it (deleted with it), whose `files` hold
 * each file's path, size, sha256, contentType and content (base64); the
 * execution's status.artifacts lists the same without the content. A
 * CodeExecutionArtifacts is its own kind, not a ConfigMap, so that who
 * may read the files is said apart from who may read executions: the
 * chart's airlock-editor may, airlock-viewer may not (docs in
 * charts/airlock/README.md).
 *
 * Pure: no I/O.
 */
#ifndef AIRLOCK_ARTIFACTS_H
#define AIRLOCK_ARTIFACTS_H

#include <stddef.h>

#include <jansson.h>

#include "client.h"

/* airlock.dev/v1alpha1 codeexecutionartifacts, namespaced. */
extern const struct k8s_resource artifacts_resource;

/* The operator's budget: the default, and what etcd allows at most. */
#define ARTIFACTS_DEFAULT_BYTES	(1024 * 1024)
#define ARTIFACTS_DEFAULT_FILES	64
#define ARTIFACTS_MAX_BYTES	(1024 * 1024)	/* base64 in JSON: ~1.4 MB in etcd */
#define ARTIFACTS_MAX_FILES	256
#define ARTIFACTS_PATH_MAX	255
/* On the execution pod (and a claim), for the agent: "MAXBYTES MAXFILES". */
#define ARTIFACTS_ANN		"airlock.dev/out"
#define ARTIFACTS_ANN_NODE	"airlock.dev/node"
/* In the program's environment, for the runner: "NONCE MAXBYTES MAXFILES". */
#define ARTIFACTS_ENV		"AIRLOCK_OUT"

struct artifact {
	char		*path;
	size_t		 size;
	char		 sha256[65];
	const char	*content_type;
	const char	*data;		/* into the decoded archive */
};

struct artifact_dropped {
	char		*path;
	long long	 size;		/* -1: not a file, or unknown */
	char		*why;
};

/*
 * A session step's report (warm --step, docs/sessions.md): the archive's
 * ".airlock-step", "KIND CODE RESTARTED DROPPED RESTARTS\n" (a runner
 * image older than RESTARTS writes the first four fields only), and
 * ".airlock-value", the text of the step's last expression. The program
 * can write files of those names too: the last of each wins, and warm
 * writes its own last. They only mean something for a session's
 * execution.
 */
#define ARTIFACTS_VALUE_MAX	4096
#define ARTIFACTS_RESTARTS_MAX	1000000	/* warm's count stops there */

enum step_kind {
	STEP_NONE,		/* no report in the archive */
	STEP_OK,		/* the code ran to its end */
	STEP_ERROR,		/* an exception; its traceback on stderr */
	STEP_EXIT,		/* it exited (sys.exit, exit): the kernel restarted */
	STEP_TIMEOUT,		/* interrupted at its timeout */
	STEP_DIED,		/* the kernel died under it: restarted */
	STEP_FAILED,		/* the kernel could not run it */
};

struct step_report {
	enum step_kind	 kind;
	int		 code;		/* the exit status it stands for, 0-255 */
	/*
	 * 0; 1: a new kernel was started after this step (its state lost);
	 * 2: none could start (the next step tries again); 3: the kernel had
	 * died since the last step and a new one was started before this
	 * step, which ran without the session's earlier state. One value:
	 * 2 wins over 3, 3 over 1 (warm.c, step_main).
	 */
	int		 restarted;
	long long	 dropped;	/* bytes written between steps, dropped */
	/*
	 * The session's kernel restarts so far, this step's included
	 * (status.restarts): 0 to ARTIFACTS_RESTARTS_MAX; -1 unknown (no
	 * report, or an older runner's four fields).
	 */
	long long	 restarts;
	const char	*value;		/* into the archive; NULL: none */
	size_t		 value_len;	/* <= ARTIFACTS_VALUE_MAX */
};

struct artifacts {
	char			*archive;	/* the decoded tar, owned */
	struct artifact		*files;
	size_t			 nfiles;
	struct artifact_dropped	*dropped;
	size_t			 ndropped;
	size_t			 bytes;		/* of the files kept */
	struct step_report	 step;
	/* Set when nothing could be read: why (the frame's or the tar's fault). */
	char			 error[256];
};

/*
 * The frame's nonce for the execution of uid: 32 hex digits, the first
 * of SHA-256("airlock.dev/out\n" uid). Not a secret (the program could
 * forge its own files, which it can write anyway): it keeps a program's
 * output from being taken for a frame by chance.
 */
void artifacts_nonce(const char *uid, char out[33]);

/*
 * Check the frame's body (b64, len bytes: base64 of a ustar archive)
 * into *a, keeping at most max_files files and max_bytes bytes. Never
 * fails: an unreadable archive sets a->error and keeps nothing. Free with
 * artifacts_free().
 */
void artifacts_parse(const char *b64, size_t len, size_t max_bytes,
    size_t max_files, struct artifacts *a);
void artifacts_free(struct artifacts *a);

/*
 * A path a file out may have: relative, printable ASCII without '\\',
 * at most ARTIFACTS_PATH_MAX, no "", "." or ".." component.
 */
int artifacts_path_ok(const char *p);

/* A file's content type, from its first bytes and its name. */
const char *artifacts_content_type(const char *path, const char *data,
    size_t len);

/* status.artifacts: [{path, size, sha256, contentType}]. New reference. */
json_t *artifacts_status(const struct artifacts *a);

/*
 * The CodeExecutionArtifacts object for the execution (name, namespace,
 * uid) run on node: the files with their content, owned by the
 * execution, its node in the annotation ARTIFACTS_ANN_NODE. New.
 */
json_t *artifacts_object(const struct artifacts *a, const char *ns,
    const char *name, const char *uid, const char *node);

/*
 * What status.message adds about the files left out, "" if none: "; 2
 * files out left out: big.bin (2097152 bytes: over the byte budget),
 * ..." (at most out_size bytes, cut with "...").
 */
void artifacts_message(const struct artifacts *a, char *out, size_t out_size);

#endif
