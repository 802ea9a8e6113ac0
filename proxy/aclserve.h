/*
 * aclserve.h - the ACL helper's loop: Squid's requests on one fd, one
 * reply each on another (acl.h has the protocol). The answers need
 * nothing but the key and the clock: no API, nothing to wait for.
 */
#ifndef AIRLOCK_ACLSERVE_H
#define AIRLOCK_ACLSERVE_H

#include "acl.h"
#include "lines.h"

struct aclserve {
	const unsigned char	*key;	/* the passes' key, borrowed */
	size_t			 keylen;
	long long		(*now)(void);	/* Unix seconds */
	int			 out;
	struct lines		 in;
};

/* key is borrowed; now is the clock (time(NULL), or a test's). */
void aclserve_init(struct aclserve *s, const unsigned char *key,
    size_t keylen, long long (*now)(void), int out);
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
 * Serve in until its end (0) or an error (-1: reading in or writing out
 * failed).
 */
int aclserve_run(struct aclserve *s, int in);

#endif
