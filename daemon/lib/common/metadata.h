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
	uint64_t nr_regions;
	uint64_t set_regions;		/* bits set in the bitmap */
	uint8_t *bitmap;		/* md_read() with want_bitmap; free() it */
};

/* Bytes a metadata device needs for a device of dev_sectors. */
uint64_t md_size_needed(uint64_t dev_sectors, unsigned int region_kb);

/*
 * Write a new superblock and an empty bitmap to meta_path.  -EEXIST when
 * it already holds valid dm-repl metadata and !force; -ENOSPC when it is
 * too small; err gets a one-line reason on failure.
 */
int md_create(const char *meta_path, const char *resource, uint64_t dev_sectors,
	      unsigned int region_kb, bool force, char *err, size_t errlen);

/* Read and check the superblock (and the bitmap).  -EBADMSG: not valid. */
int md_read(const char *meta_path, bool want_bitmap, struct md_info *ret, char *err,
	    size_t errlen);

/*
 * Metadata no target uses (a secondary's, a demoted primary's): set the
 * generation identifiers (gen != NULL) and/or zero the bitmap (a resync
 * made this copy equal to its primary), and the role (DM_REPL_MD_ROLE_*;
 * NONE keeps it).  The superblock is rewritten with a new checksum and
 * made durable.  Opened O_EXCL: -EBUSY while a target holds it.
 */
int md_update(const char *meta_path, const uint64_t *gen, bool clear_bitmap, uint32_t role,
	      char *err, size_t errlen);

/* "none", "primary", "secondary" or "invalid" */
const char *md_role_name(uint32_t role);

#endif
