/*
 * k8s_error.h - error codes and the error detail every fallible call fills.
 *
 * Fallible functions return 0 on success or one of the negative K8S_E*
 * codes, and, when given a non-NULL struct k8s_error, fill it in with the
 * detail: the HTTP status and the API server's Status reason and message
 * when there was a response, or a description of the local failure.
 * Nothing is allocated: the struct is plain storage the caller owns, and a
 * long message is truncated, never lost entirely.
 */
#ifndef AIRLOCK_K8S_ERROR_H
#define AIRLOCK_K8S_ERROR_H

enum k8s_errcode {
	K8S_OK		=   0,
	K8S_EINVAL	=  -1,	/* bad argument, malformed config or JSON */
	K8S_EIO		=  -2,	/* transport: connect, TLS, read, timeout */
	K8S_EHTTP	=  -3,	/* any non-success status not listed below */
	K8S_ENOTFOUND	=  -4,	/* 404 */
	K8S_EEXIST	=  -5,	/* 409 with reason AlreadyExists (create) */
	K8S_ECONFLICT	=  -6,	/* 409 Conflict: stale resourceVersion */
	K8S_EGONE	=  -7,	/* 410 Expired/Gone: relist needed */
	K8S_EFORBIDDEN	=  -8,	/* 403 */
	K8S_EUNAUTH	=  -9,	/* 401 */
	K8S_ETOOBIG	= -10,	/* a size cap was hit */
	K8S_ECANCELED	= -11,	/* stopped by a shutdown request */
	K8S_ETIMEDOUT	= -12,	/* a request or wait timed out */
};

struct k8s_error {
	int	code;		/* one of enum k8s_errcode */
	long	http_status;	/* 0 when no response was received */
	char	reason[64];	/* Status.reason, e.g. "Conflict"; may be "" */
	char	message[1024];	/* Status.message or a local description */
};

/* Static string naming the code, e.g. "conflict". Never NULL. */
const char *k8s_strerror(int code);

/*
 * Fill err (if non-NULL) and return code, so callers can write
 * `return k8s_error_set(err, K8S_EINVAL, 0, NULL, "bad %s", x);`.
 * reason may be NULL.
 */
int k8s_error_set(struct k8s_error *err, int code, long http_status,
    const char *reason, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* Reset err to "no error". err may be NULL. */
void k8s_error_clear(struct k8s_error *err);

/* Map an HTTP status and Status reason to a code (0 for 2xx). */
int k8s_errcode_from_http(long http_status, const char *reason);

#endif
