/*
 * meter.h - the egress byte cap's rules in the node's netfilter, as text
 * (docs/network.md, "The byte cap"). Pure: no I/O, unit-tested
 * (tests/unit/test_meter.c); node-agent/meter.c runs iptables with them.
 *
 * All in the mangle table (METER_TABLE), whose FORWARD runs before the
 * filter table's, where a NetworkPolicy engine accepts what its policies
 * allow (kube-router puts its jump first in filter's FORWARD on every
 * sync, and accepts there: counting in filter, behind it, missed those
 * packets; the hostile review of the byte cap). Each execution pod with
 * egress gets a chain of its own, METER_PREFIX and 16 hex digits of its
 * pod's uid, jumped to from METER_CHAIN (which the first rule of mangle's
 * FORWARD jumps to) for packets from its address and for replies to it:
 * one quota rule counts both ways, so the cap is one figure, and packets
 * to it that are not replies to its own connections (anyone's flood)
 * count nothing.
 *
 *   -s IP -p tcp --dport M -j DROP
 *       the metered port: the start gate sees M dropped while its policy
 *       lets M through, and so knows the chain is in place before the
 *       program runs;
 *   -m quota --quota CAP -j RETURN
 *       within the cap: on to the NetworkPolicy engine's rules;
 *   -j DROP
 *       past it: nothing more, and the agent stops the execution.
 */
#ifndef AIRLOCK_METER_H
#define AIRLOCK_METER_H

#include <stddef.h>

#include "buf.h"

#define METER_TABLE	"mangle"
#define METER_CHAIN	"AIRLOCK-EGRESS"
#define METER_PREFIX	"AIRLOCK-E-"
#define METER_NAME	(sizeof(METER_PREFIX) + 16)	/* a chain's name and NUL */
#define METER_IP	16				/* an IPv4 address's text and NUL */
#define METER_SEEN_MAX	4096				/* chains read from one listing */
#define METER_RULE	192				/* a jump rule's words */
#define METER_JUMPS	4				/* jumps to one chain read */

/* Pod uid's chain name in out; 0, or -1 when uid has fewer than 16 hex digits. */
int meter_chain_name(const char *pod_uid, char out[METER_NAME]);

/* A chain of ours as `iptables-save -c -t filter` shows it. */
struct meter_seen {
	char		 name[METER_NAME];
	long long	 bytes;		/* counted by its quota rule: within the cap */
	long long	 over;		/* packets of the rules after it: past the cap */
	int		 quota;		/* its quota rule was there */
	/* The jump rules to it in METER_CHAIN, by address: "-s IP/32", "-d IP/32". */
	char		 src[METER_IP], dst[METER_IP];
	/*
	 * Every rule that jumps to it, as listed, after "-A ": removed by the
	 * same words (a chain goes only once nothing jumps to it).
	 */
	char		 jump[METER_JUMPS][METER_RULE];
	int		 njump;
};

/*
 * Read the chains of ours in text (iptables-save -c -t mangle's output):
 * at most max into out, in the order they first appear. Lines of other
 * chains, and lines it does not understand, are skipped. Their count.
 */
size_t meter_parse(const char *text, struct meter_seen *out, size_t max);

/*
 * Where FORWARD jumps to METER_CHAIN in text (a METER_TABLE listing):
 * METER_FIRST, its first rule; METER_LATER, a later one (a NetworkPolicy
 * engine that put its own first would accept packets before they are
 * counted); METER_ABSENT.
 */
enum meter_jump { METER_ABSENT, METER_FIRST, METER_LATER };
enum meter_jump meter_forward(const char *text);
/* Append to b the moves that make FORWARD's jump to METER_CHAIN its first rule. */
int meter_forward_fix(struct buf *b, enum meter_jump where);

/* The one of name in seen[0..n), or NULL. */
const struct meter_seen *meter_find(const struct meter_seen *seen, size_t n,
    const char *name);

/*
 * Append to b, for iptables-restore --noflush inside "*filter" and
 * "COMMIT" (after "*mangle"): the chain name for address ip, metered port port and cap
 * bytes, and its two jumps first in METER_CHAIN (install); or the removal
 * of seen's jumps and chain (remove). 0, or BUF_ETOOBIG.
 */
int meter_install(struct buf *b, const char *name, const char *ip, int port,
    long long cap);
int meter_remove(struct buf *b, const struct meter_seen *seen);

#endif
