/*
 * acl.h - Squid's external ACL helper for the egress proxy: the line
 * protocol and the decision (docs/network-proxy-research.md, section 2).
 *
 * Squid runs the helper with
 *
 *   external_acl_type airlock ttl=0 negative_ttl=0 cache=0 concurrency=64
 *       %>a %DST %PORT %ssl::>sni %>rm %DATA airlock-egress acl ...
 *
 * and writes one request a line, each field %-encoded, "-" for absent:
 *
 *   CHANNEL SRC DST PORT SNI METHOD STAGE        (STAGE: connect or tls)
 *
 * The helper answers each with exactly one line, in one write(2) (Squid
 * read a reply written in pieces as result=Unknown):
 *
 *   CHANNEL OK uid=U ns=N name=X
 *   CHANNEL ERR [uid=U ns=N name=X] reason=R
 *
 * Values are a single %-encoded token, as Squid's external_acl_type
 * documentation asks of reply values. Everything here is pure: no API,
 * no clock; grants.h supplies the grant and the staleness.
 */
#ifndef AIRLOCK_ACL_H
#define AIRLOCK_ACL_H

#include <stddef.h>
#include <stdint.h>

#include "egress_grant.h"

/* The longest request line; a longer one is answered bad-request. */
#define ACL_LINE_MAX	8192
/* Room for any reply: three values of at most 253 bytes, each x3. */
#define ACL_REPLY_MAX	2560

/*
 * The decisions: the reason= word (NULL for OK), and whether the reply
 * names the grant it was made on (uid=, ns=, name=), so that Squid's
 * later refusals and the log carry whose request it was. One table.
 */
#define ACL_REASONS(X) \
	X(ACL_OK,		NULL,		1) \
	X(ACL_STALE,		"stale",	0) \
	X(ACL_BAD_REQUEST,	"bad-request",	0) \
	X(ACL_NO_EXECUTION,	"no-execution",	0) \
	X(ACL_AMBIGUOUS,	"ambiguous",	0) \
	X(ACL_IP_LITERAL,	"ip-literal",	1) \
	X(ACL_NOT_IN_LIST,	"not-in-list",	1) \
	X(ACL_NO_SNI,		"no-sni",	1) \
	X(ACL_SNI_MISMATCH,	"sni-mismatch",	1)

enum acl_reason {
#define ACL_ENUM(e, name, names) e,
	ACL_REASONS(ACL_ENUM)
#undef ACL_ENUM
};

/* The reason= word of r, or NULL for ACL_OK. */
const char *acl_reason_name(enum acl_reason r);

enum acl_stage { ACL_STAGE_CONNECT, ACL_STAGE_TLS };

/*
 * One request, its strings decoded in place in the line it was parsed
 * from (borrowed from it). dst and sni are lowercased, one trailing dot
 * dropped; absent ("-") is NULL. channel is "" when not even it parsed.
 */
struct acl_request {
	const char	*channel;
	const char	*src;
	const char	*dst;
	int		 port;
	const char	*sni;
	const char	*method;
	enum acl_stage	 stage;
};

/*
 * Parse line (len bytes, no newline; at most ACL_LINE_MAX, with room for
 * a NUL at line[len]), decoding it in place, into *rq. 0, or -1 for a malformed line: not seven fields split
 * by single spaces, a bad %-escape or a %00, a channel not 1 to 9 digits,
 * a port not 1 to 65535, no dst, or an unknown stage. rq->channel is set
 * whenever the first field was a channel, so that even a refusal goes
 * back on it.
 */
int acl_parse_line(char *line, size_t len, struct acl_request *rq);

/*
 * Whether host (lowercase) reads as an IP address: it has a ':' (IPv6,
 * bracketed or not), or it is one to four dot-separated parts, each
 * digits or 0x and hex digits (dotted, decimal, octal, hex forms).
 */
int acl_ip_literal(const char *host);

/*
 * rq->src as an IPv4 address (host byte order) into *addr: dotted, or
 * IPv4-mapped IPv6 (::ffff:a.b.c.d). 0, or -1 for anything else (an IPv6
 * client has no grant).
 */
int acl_src_addr(const char *src, uint32_t *addr);

/*
 * The decision for rq: stale first (the grants cannot be trusted), then
 * no grant for its source (g NULL: no-execution; ambiguous set: two
 * grants claim the address), an IP literal, a dst:port not in g's hosts,
 * and at the tls stage a missing SNI or one that is not dst.
 */
enum acl_reason acl_decide(const struct acl_request *rq,
    const struct egress_grant *g, int ambiguous, int stale);

/*
 * Format the reply to channel (may be "") for r into out (ACL_REPLY_MAX
 * bytes), newline included, naming g (may be NULL) where the table says
 * r does. Its length.
 */
size_t acl_format_reply(char out[ACL_REPLY_MAX], const char *channel,
    enum acl_reason r, const struct egress_grant *g);

#endif
