/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Generation identifiers: which data a node holds, relative to its peers.
 *
 *   current  random id of the data generation the node's data belongs to
 *            (0: it never held a full copy);
 *   bitmap   the generation its out-of-sync bitmap counts from: set when a
 *            primary first writes without all its peers (current moves on,
 *            the old current is kept here), cleared when every peer is
 *            UpToDate again; 0: none;
 *   history  the last generation between bitmap and current (a peer
 *            that holds it needs the bitmap resync too);
 *   since    when current began (milliseconds since the epoch).
 *
 * When a primary meets a secondary, gens_compare() says what to do.
 */
#ifndef REPL_GENS_H
#define REPL_GENS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gens {
	uint64_t current, bitmap, history, since;
};

enum gen_verdict {
	GV_SAME,	/* the same generation: resume the stream, or bitmap resync */
	GV_BITMAP,	/* the primary moved on from the peer's generation: bitmap */
	GV_FULL,	/* the peer never held a copy: full sync */
	GV_PEER_NEWER,	/* the peer moved on from the primary's generation */
	GV_SPLIT_BRAIN,	/* both moved on from a common generation */
	GV_UNRELATED,	/* no common generation */
};

/* p: the primary's, s: the secondary's. */
enum gen_verdict gens_compare(const struct gens *p, const struct gens *s);
const char *gens_verdict_name(enum gen_verdict v);

/* A new current generation: the old one becomes the bitmap's, or, when
 * the bitmap already counts from an earlier one, the history. */
void gens_rotate(struct gens *g);

/* Milliseconds since the epoch (CLOCK_REALTIME), for since. */
uint64_t gens_now_ms(void);

/* A new generation id: random, never 0. */
uint64_t gens_new_id(void);

/*
 * The four of them as hex numbers ("current bitmap history since", as the
 * <resource>.gens file and the target's "gens" message have them) from
 * len bytes at text (not necessarily NUL-terminated): 0, -EBADMSG or
 * -ENOMEM, *ret untouched on failure.
 */
int gens_parse(const char *text, size_t len, struct gens *ret);

#endif
