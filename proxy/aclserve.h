/*
 * aclserve.h - the ACL helper's loop: Squid's requests on one fd, one
 * reply each on another (acl.h has the protocol), and the ready file the
 * pod's readiness probe checks.
 *
 * Reading never waits on the API: the answers come from a source that
 * only looks at memory (grants.h), kept up to date by its own thread.
 */
#ifndef AIRLOCK_ACLSERVE_H
#define AIRLOCK_ACLSERVE_H

#include "acl.h"
#include "lines.h"

/* Where answers come from: grants.h in the helper, a stand-in in tests. */
struct aclserve_source {
	/* The reply to rq (a parsed request) into out; its length. */
	size_t	(*answer)(void *arg, const struct acl_request *rq,
		    char out[ACL_REPLY_MAX]);
	/* Whether the answers are stale (the ready file goes). */
	int	(*stale)(void *arg);
	void	*arg;
};

struct aclserve {
	struct aclserve_source	 src;
	int			 out;
	struct lines		 in;
	const char		*ready_file;	/* NULL: none */
	int			 ready;		/* the file is there */
};

/* src is copied; ready_file (may be NULL) borrowed. */
void aclserve_init(struct aclserve *s, const struct aclserve_source *src,
    int out, const char *ready_file);
void aclserve_free(struct aclserve *s);

/*
 * Feed n bytes read from Squid: a reply for each whole line, each in one
 * write(2). A line past ACL_LINE_MAX is answered bad-request (on its
 * channel, if it began with one) and the rest of it dropped. 0, or -1
 * when out cannot be written (errno set).
 */
int aclserve_feed(struct aclserve *s, const char *data, size_t n)
    __attribute__((warn_unused_result));

/*
 * Create the ready file (empty) when the source is not stale, remove it
 * when it is; a no-op without one. Logged when it changes.
 */
void aclserve_readiness(struct aclserve *s);

/*
 * Serve in until its end (0) or an error (-1: reading in or writing out
 * failed), checking readiness at least every second. The ready file is
 * removed on the way out.
 */
int aclserve_run(struct aclserve *s, int in);

#endif
