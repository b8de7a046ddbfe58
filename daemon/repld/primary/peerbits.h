/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The primary's out-of-sync bitmap of each peer: the regions that one
 * peer lacks.  One slot per configured peer, kept in the peer area of the
 * metadata device (docs/metadata.md) or, without one, in memory only.
 *
 * The target's own bitmap (overflow, unclean shutdown, failed local
 * writes) stands for every peer; the primary moves it into every slot
 * before clearing it in the target, so that from then on each peer's
 * regions live in its slot alone, and no clear for one peer can erase
 * what another still needs.
 *
 * A slot is *tracked* when every region its peer may lack since it was
 * last in sync is in it.  A slot handed out to a peer added later, every
 * slot without a metadata device at start, and the slots of a node that
 * became equal to another primary are not: their peer needs a full sync
 * unless it can resume its stream from the ring.  A slot becomes tracked
 * when its peer is in sync.
 *
 * Marks and clears change the bitmaps in memory; peerbits_sync() makes
 * them durable, and the caller does not let go of what a mark stands for
 * (ring records, the target's bits) before it returned 0.
 */
#ifndef REPL_PEERBITS_H
#define REPL_PEERBITS_H

#include <stdbool.h>
#include <stdint.h>

struct peerbits;

/*
 * meta_path: the metadata device, or "-".  nr_regions: of the target.
 * err gets a one-line reason on failure.
 */
int peerbits_open(const char *meta_path, uint64_t nr_regions, struct peerbits **ret,
		  char *err, size_t errlen);
void peerbits_free(struct peerbits *pb);
/*
 * The device grew to nr_regions: the bitmaps cover it (with a metadata
 * device they had the room already, its bitmap_bytes).  -ENOSPC when the
 * metadata has no room for them, -ENOMEM.
 */
int peerbits_grow(struct peerbits *pb, uint64_t nr_regions);
uint64_t peerbits_regions(const struct peerbits *pb);
bool peerbits_persistent(const struct peerbits *pb);

/*
 * The configured peers, by name: each keeps its slot, a new one gets a
 * free slot, the slots of names not listed are freed.  Returns how many
 * names got no slot (the metadata has too few; those peers stay untracked).
 */
int peerbits_assign(struct peerbits *pb, const char *const *names, unsigned int n);
/* The slot of a peer, or -ENOENT. */
int peerbits_slot(const struct peerbits *pb, const char *name);

bool peerbits_tracked(const struct peerbits *pb, int slot);
/* Its peer is in sync: from now on the slot knows everything it lacks. */
int peerbits_set_tracked(struct peerbits *pb, int slot);

/* Regions [first, first + count) of one slot, or of every used slot (-1). */
void peerbits_mark(struct peerbits *pb, int slot, uint64_t first, uint64_t count);
void peerbits_clear(struct peerbits *pb, int slot, uint64_t first, uint64_t count);
/* Write what changed and make it durable; 0 without a metadata device. */
int peerbits_sync(struct peerbits *pb);
/* Something changed since the last peerbits_sync() that succeeded. */
bool peerbits_dirty(const struct peerbits *pb);

uint64_t peerbits_count(const struct peerbits *pb, int slot);
/* Bumped by every mark of the slot. */
uint64_t peerbits_gen(const struct peerbits *pb, int slot);
/* A copy of the slot's bitmap (LE bit order, (nr_regions + 7) / 8 bytes). */
int peerbits_copy(const struct peerbits *pb, int slot, uint8_t **ret);

#endif
