#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "k8s_error.h"

const char *
k8s_strerror(int code)
{
	switch (code) {
	case K8S_OK:		return "ok";
	case K8S_EINVAL:	return "invalid argument";
	case K8S_EIO:		return "transport error";
	case K8S_EHTTP:		return "http error";
	case K8S_ENOTFOUND:	return "not found";
	case K8S_EEXIST:	return "already exists";
	case K8S_ECONFLICT:	return "conflict";
	case K8S_EGONE:		return "gone";
	case K8S_EFORBIDDEN:	return "forbidden";
	case K8S_EUNAUTH:	return "unauthorized";
	case K8S_ETOOBIG:	return "too big";
	case K8S_ECANCELED:	return "canceled";
	case K8S_ETIMEDOUT:	return "timed out";
	}
	return "unknown error";
}

int
k8s_error_set(struct k8s_error *err, int code, long http_status,
    const char *reason, const char *fmt, ...)
{
	va_list ap;

	if (err == NULL)
		return code;
	err->code = code;
	err->http_status = http_status;
	snprintf(err->reason, sizeof(err->reason), "%s", reason ? reason : "");
	va_start(ap, fmt);
	vsnprintf(err->message, sizeof(err->message), fmt, ap);
	va_end(ap);
	return code;
}

void
k8s_error_clear(struct k8s_error *err)
{
	if (err == NULL)
		return;
	err->code = K8S_OK;
	err->http_status = 0;
	err->reason[0] = '\0';
	err->message[0] = '\0';
}

int
k8s_errcode_from_http(long st, const char *reason)
{
	if (st >= 200 && st < 300)
		return K8S_OK;
	switch (st) {
	case 401:	return K8S_EUNAUTH;
	case 403:	return K8S_EFORBIDDEN;
	case 404:	return K8S_ENOTFOUND;
	case 409:
		if (reason && strcmp(reason, "AlreadyExists") == 0)
			return K8S_EEXIST;
		return K8S_ECONFLICT;
	case 410:	return K8S_EGONE;
	}
	return K8S_EHTTP;
}
