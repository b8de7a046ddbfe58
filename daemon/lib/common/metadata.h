/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The metadata device of a repl target (format: <linux/dm-repl.h>,
 * struct dm_repl_md_sb): create it, read it back.
 */
#ifndef REPL_METADATA_H
#define REPL_METADATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <linux/dm-repl.h>

struct md_info {
	char resource[DM_REPL_MD_NAME_MAX + 1];
	uint8_t uuid[16];
	uint32_t version;
	uint32_t flags;
	uint64_t dev_sectors;
	uint32_t region_shift;
	uint64_t bitmap_offset;
	uint64_t bitmap_bytes;
	uint64_t events;
	uint64_t gen[4];		/* generation identifiers (gens.h) */
	uint32_t role;			/* DM_REPL_MD_ROLE_* */
	uint64_t peers_offset;		/* the peer area */
	uint32_t max_peers;
	uint64_t nr_regions;
	uint64_t max_sectors;		/* what bitmap_bytes can describe: grow up to it */
	uint64_t set_regions;		/* bits set in the bitmap */
	/*
	 * md_read() with want_bitmap: every region that may differ from some
	 * peer, the target's bitmap and every used peer slot's together;
	 * free() it
	 */
	uint8_t *bitmap;
};

/* The peer area's table (struct dm_repl_md_peers), in host order. */
struct md_slot {
	char name[DM_REPL_MD_NAME_MAX + 1];	/* "" when free */
	uint32_t flags;				/* DM_REPL_MD_SLOT_* */
	uint64_t since_ms;
};

struct md_peers {
	uint32_t flags;				/* DM_REPL_MD_PEERS_* */
	uint32_t max_peers;
	uint64_t events;
	struct md_slot slot[DM_REPL_MD_MAX_PEERS];
};

/*
 * Bytes a metadata device needs for a device of up to dev_sectors (its
 * bitmaps sized for that).
 */
uint64_t md_size_needed(uint64_t dev_sectors, unsigned int region_kb, unsigned int max_peers);

/* The largest device a metadata device of meta_bytes can describe (0: none). */
uint64_t md_max_sectors(uint64_t meta_bytes, unsigned int region_kb, unsigned int max_peers);

/*
 * Write a new superblock, an empty bitmap and an empty peer area of
 * max_peers slots (0: DM_REPL_MD_DEFAULT_PEERS) to meta_path, the bitmaps
 * sized for a device of max_sectors (the device may grow up to it; at
 * least dev_sectors).  -EEXIST
 * when it already holds valid dm-repl metadata and !force; -ENOSPC when
 * it is too small; err gets a one-line reason on failure.
 */
int md_create(const char *meta_path, const char *resource, uint64_t dev_sectors,
	      uint64_t max_sectors, unsigned int region_kb, unsigned int max_peers, bool force,
	      char *err, size_t errlen);

/*
 * Format version 1 (no peer area) to 2, in place, keeping the bitmap and
 * the generations: the peer area goes right after the bitmap, its slots
 * tracked from the start (version 1 kept everything in the one bitmap).
 * Opened O_EXCL: -EBUSY while a target holds it.
 */
int md_upgrade(const char *meta_path, unsigned int max_peers, char *err, size_t errlen);

/*
 * Read and check the superblock (and the bitmaps).  -EBADMSG: not valid;
 * -EPROTO: format version 1 (md_upgrade()).
 */
int md_read(const char *meta_path, bool want_bitmap, struct md_info *ret, char *err,
	    size_t errlen);

/*
 * The checks of md_read() on a superblock block in memory: len bytes at buf
 * (at least DM_REPL_MD_SB_BYTES), from a metadata device of dev_bytes.  No
 * bitmap (ret->bitmap NULL, set_regions 0).  The same results as md_read(),
 * err without the device's name.
 */
int md_parse_super(const void *buf, size_t len, uint64_t dev_bytes, struct md_info *ret,
		   char *err, size_t errlen);

/*
 * Metadata no target uses (a secondary's, a demoted primary's): set the
 * generation identifiers (gen != NULL) and/or zero the bitmaps (a resync
 * made this copy equal to its primary), and the role (DM_REPL_MD_ROLE_*;
 * NONE keeps it).  The superblock is rewritten with a new checksum and
 * made durable.  Opened O_EXCL: -EBUSY while a target holds it.
 *
 * With clear_bitmap, the peer slots say what this copy now knows: only
 * the primary it became equal to (primary, given) is tracked (an empty
 * slot: they are equal); what any other peer lacks is unknown here.
 */
int md_update(const char *meta_path, const uint64_t *gen, bool clear_bitmap, uint32_t role,
	      const char *primary, char *err, size_t errlen);

/*
 * The peer area, for the daemon that keeps it (the target never touches
 * it, so it may be written while a target holds the device).
 * md_peers_open(): O_RDWR (O_DIRECT where the device allows it), not
 * exclusive.  Bitmaps are mi->bitmap_bytes long, 4096-byte aligned.
 */
int md_peers_open(const char *meta_path, int *ret_fd);
int md_peers_read(int fd, const struct md_info *mi, struct md_peers *ret);
/* The check and decode of md_peers_read() on a block in memory: -EBADMSG, or 0. */
int md_peers_parse(const void *buf, size_t len, uint32_t max_peers, struct md_peers *ret);
/* Bump events, checksum, write the table (not synced). */
int md_peers_write(int fd, const struct md_info *mi, struct md_peers *p);
int md_slot_read(int fd, const struct md_info *mi, unsigned int slot, uint8_t *bitmap);
/* Write pages [first, first + n) of slot's bitmap from bitmap (not synced). */
int md_slot_write(int fd, const struct md_info *mi, unsigned int slot, const uint8_t *bitmap,
		  uint64_t first, uint64_t n);

/* "none", "primary", "secondary" or "invalid" */
const char *md_role_name(uint32_t role);

#endif
