/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The engine's interval map: which record (an opaque owner) last took each
 * sector.  Segments never overlap; a treap keyed by start sector keeps the
 * operations O(log n) in the number of segments.
 */
#ifndef REPL_APPLY_MAP_H
#define REPL_APPLY_MAP_H

#include <stdint.h>

struct apply_seg {
	uint64_t start;		/* key */
	uint64_t end;
	void *owner;
	struct apply_seg *left, *right;
	uint32_t prio;
};

struct apply_map {
	struct apply_seg *root;
	struct apply_seg *free;		/* spare segments */
	unsigned int nr_free;
	uint64_t rng;			/* the treap's priorities */
};

void apply_map_init(struct apply_map *m, uint64_t seed);
void apply_map_fini(struct apply_map *m);

/*
 * Give [start, end) to owner.  Before that, visit(ctx, o) is called for the
 * owner o of every segment inside the range, in sector order (an owner of
 * several segments more than once); if it fails, nothing changes and its
 * error is returned.  -ENOMEM.
 */
int apply_map_take(struct apply_map *m, uint64_t start, uint64_t end, void *owner,
		   int (*visit)(void *ctx, void *owner), void *ctx);

/* Remove the segments of owner; they all lie inside [start, end). */
void apply_map_drop(struct apply_map *m, uint64_t start, uint64_t end, const void *owner);

#endif
