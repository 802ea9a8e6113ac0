/*
 * mcp_priv.h - what cli/mcp.c (the protocol: messages, calls in threads,
 * cancellation) and cli/mcp_tools.c (the tools: schemas, arguments,
 * results) share. Not public; cli.h is.
 */
#ifndef AIRLOCK_MCP_PRIV_H
#define AIRLOCK_MCP_PRIV_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <jansson.h>

#include "cli.h"

struct call;

struct mcp {
	FILE			*out;
	pthread_mutex_t		 out_lock;
	const struct cli_cluster *co;
	const struct local_opts	*lo;
	struct ctl_config	*cfg;		/* local mode's */
	int			 local;

	pthread_mutex_t		 lock;		/* calls, ncalls */
	pthread_cond_t		 idle;
	struct call		*calls;
	int			 ncalls;
};

/*
 * A tool: its tools/list entry (new reference; local: the server runs
 * with --local) and its call, run in the call's own thread: the result
 * (new reference), a tool error as text when the call failed. *cancel
 * becomes non-zero when the client cancelled the call.
 */
struct tool {
	const char	*name;
	int		 cluster_only;	/* not offered with --local */
	json_t		*(*schema)(int local);
	json_t		*(*call)(struct mcp *m, json_t *args, atomic_int *cancel);
};

extern const struct tool mcp_tools[];
extern const size_t mcp_ntools;

/* {"tools": [...]}, those offered in this mode. New reference. */
json_t *mcp_tools_list(int local);

/* A text result; text is cut before a partial UTF-8 sequence. New reference. */
json_t *mcp_tool_result(char *text, int is_error);

#endif
