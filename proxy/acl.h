/*
 * acl.h - Squid's external ACL helper for the egress proxy: the line
 * protocol and the decision (docs/network.md, "Host entries").
 *
 * Squid runs the helper with
 *
 *   external_acl_type airlock ttl=0 negative_ttl=0 cache=0 concurrency=64
 *       %>ha{Proxy-Authorization} %{clt_conn_tag}note %DST %PORT
 *       %ssl::>sni %>rm %DATA airlock-egress acl --key-file FILE
 *
 * and writes one request a line, each field %-encoded, "-" for absent:
 *
 *   CHANNEL AUTH TAG DST PORT SNI METHOD STAGE   (STAGE: connect or tls)
 *
 * AUTH is the request's Proxy-Authorization ("Basic " and base64 of
 * USER:PASS, the execution's pass: egress_token.h), TAG the client
 * connection's tag, which this helper set ("USER.PASS") when it allowed
 * an earlier request on that connection: Squid checks a spliced TLS
 * tunnel once more, on a request of its own making that carries no
 * header (seen with Squid 5.7), and the tag carries the pass to it.
 *
 * The helper answers each with exactly one line, in one write(2) (Squid
 * read a reply written in pieces as result=Unknown):
 *
 *   CHANNEL OK uid=U ns=N name=X [clt_conn_tag=USER.PASS]
 *   CHANNEL ERR [uid=U ns=N name=X] reason=R
 *
 * Values are a single %-encoded token, as Squid's external_acl_type
 * documentation asks of reply values. Everything here is pure but the
 * clock the caller passes.
 */
#ifndef AIRLOCK_ACL_H
#define AIRLOCK_ACL_H

#include <stddef.h>
#include <stdint.h>

#include "egress_token.h"

/*
 * The longest request line: two passes (the header's base64 and the
 * tag, each at most EGRESS_USER_MAX and the HMAC, Squid %-encoding some
 * bytes thrice) and the rest; a longer one is answered bad-request.
 */
#define ACL_LINE_MAX	(8 * (EGRESS_USER_MAX + EGRESS_PASS_LEN + 512))
/*
 * Squid's channel is its request id, a 64-bit count a helper process
 * (helperDispatch: ++nextRequestId): up to 20 digits. One of 1 to 9 alone
 * left the billionth request unanswered, and every later one queued
 * behind it (found by review, 2026-11-28).
 */
#define ACL_CHANNEL_MAX	20
/* Room for any reply: three values of at most 253 bytes, each x3, a tag. */
#define ACL_REPLY_MAX	(2560 + EGRESS_USER_MAX + EGRESS_PASS_LEN + 64)

/*
 * The decisions: the reason= word (NULL for OK), and whether the reply
 * names the execution it was made for (uid=, ns=, name=), so that
 * Squid's later refusals and the log carry whose request it was. One
 * table.
 */
#define ACL_REASONS(X) \
	X(ACL_OK,		NULL,		1) \
	X(ACL_BAD_REQUEST,	"bad-request",	0) \
	X(ACL_NO_PASS,		"no-pass",	0) \
	X(ACL_BAD_PASS,		"bad-pass",	0) \
	X(ACL_EXPIRED,		"expired",	0) \
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
	const char	*auth;
	const char	*tag;
	const char	*dst;
	int		 port;
	const char	*sni;
	const char	*method;
	enum acl_stage	 stage;
};

/*
 * Parse line (len bytes, no newline; at most ACL_LINE_MAX, with room for
 * a NUL at line[len]), decoding it in place, into *rq. 0, or -1 for a
 * malformed line: not eight fields split by single spaces, a bad
 * %-escape or a %00, a channel not 1 to ACL_CHANNEL_MAX digits, a port
 * not 1 to 65535,
 * no dst, or an unknown stage. rq->channel is set whenever the first
 * field was a channel, so that even a refusal goes back on it.
 */
int acl_parse_line(char *line, size_t len, struct acl_request *rq);

/*
 * Whether host (lowercase) reads as an IP address: it has a ':' (IPv6,
 * bracketed or not), or it is one to four dot-separated parts, each
 * digits or 0x and hex digits (dotted, decimal, octal, hex forms).
 */
int acl_ip_literal(const char *host);

/*
 * The reply to rq (a parsed request) into out, whose length is returned:
 * its pass, from AUTH ("Basic", any case, and base64 of USER:PASS) or
 * else TAG ("USER.PASS"), checked under key at now (no-pass, bad-pass,
 * expired); then, on the execution's claims, an IP literal, a dst:port
 * not in its hosts, and at the tls stage a missing SNI or one that is
 * not dst. An OK on a pass from AUTH tags the connection with it.
 */
size_t acl_answer(const struct acl_request *rq, const unsigned char *key,
    size_t keylen, long long now, char out[ACL_REPLY_MAX]);

/*
 * Format the reply to channel (may be "") for r into out (ACL_REPLY_MAX
 * bytes), newline included, naming c (may be NULL) where the table says
 * r does, and with the tag (may be NULL) on an OK. Its length.
 */
size_t acl_format_reply(char out[ACL_REPLY_MAX], const char *channel,
    enum acl_reason r, const struct egress_claims *c, const char *tag);

#endif
