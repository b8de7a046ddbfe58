// SPDX-License-Identifier: GPL-2.0-only
/*
 * Fuzz target for the metadata superblock and peer table parsers
 * (daemon/lib/common/metadata.c: md_parse_super(), md_peers_parse()), what
 * md_read() and md_peers_read() make of the blocks they read.
 *
 * Input:
 *   byte 0        control: bit 0 keep the superblock's checksum as it is
 *                 (else it is made right, so that the checks behind it are
 *                 reached), bit 1 the superblock as long as given (else
 *                 padded with zeroes to a block), bit 2 keep the peer
 *                 table's checksum, bit 3 the peer table as long as given
 *   bytes 1..8    the metadata device's size in bytes, little endian
 *   bytes 9..10   n, the superblock's length, little endian
 *   n bytes       the superblock
 *   the rest      the peer table
 *
 * What is accepted must describe a layout inside the device: the bitmap
 * after the superblock, the peer area after the bitmap, no sum that wraps.
 */
#include <endian.h>
#include <errno.h>
#include <string.h>

#include <xxhash.h>

#include "fuzz.h"
#include "metadata.h"

__extension__ typedef unsigned __int128 u128;

static uint8_t *block(const uint8_t *p, size_t n, bool pad, bool keep_csum, size_t *ret_len)
{
	size_t len = pad && n < DM_REPL_MD_SB_BYTES ? DM_REPL_MD_SB_BYTES : n;
	uint8_t *b = calloc(1, len ? len : 1);

	ASSERT(b);
	memcpy(b, p, n);
	if (!keep_csum && len >= DM_REPL_MD_SB_BYTES) {
		uint64_t c;

		memset(b + 8, 0, 8);
		c = htole64(XXH64(b, DM_REPL_MD_SB_BYTES, 0));
		memcpy(b + 8, &c, 8);
	}
	*ret_len = len;
	return b;
}

static void check_super(const struct md_info *mi, uint64_t dev_bytes)
{
	u128 bitmap_end = (u128)mi->bitmap_offset + mi->bitmap_bytes;
	u128 peers_end = (u128)mi->peers_offset + DM_REPL_MD_SB_BYTES +
			 (u128)mi->max_peers * mi->bitmap_bytes;
	u128 region = (u128)1 << mi->region_shift;

	ASSERT(mi->version == DM_REPL_MD_VERSION);
	ASSERT(mi->region_shift >= 12 && mi->region_shift <= 30);
	ASSERT(memchr(mi->resource, 0, sizeof(mi->resource)));
	ASSERT(!mi->bitmap && !mi->set_regions);
	ASSERT(mi->nr_regions == ((u128)mi->dev_sectors * 512 + region - 1) / region);
	ASSERT((u128)mi->bitmap_bytes * 8 >= mi->nr_regions);
	ASSERT(mi->bitmap_offset >= DM_REPL_MD_SB_BYTES);
	ASSERT(bitmap_end <= dev_bytes);
	ASSERT(mi->peers_offset >= bitmap_end);
	ASSERT(mi->peers_offset % DM_REPL_MD_BITMAP_ALIGN == 0);
	ASSERT(mi->max_peers >= 1 && mi->max_peers <= DM_REPL_MD_MAX_PEERS);
	ASSERT(peers_end <= dev_bytes);
}

static void check_peers(const struct md_peers *p, uint32_t max_peers)
{
	ASSERT(p->max_peers == max_peers);
	for (unsigned int i = 0; i < DM_REPL_MD_MAX_PEERS; i++) {
		const struct md_slot *sl = &p->slot[i];

		ASSERT(memchr(sl->name, 0, sizeof(sl->name)));
		if (sl->flags & DM_REPL_MD_SLOT_USED)
			ASSERT(i < max_peers && sl->name[0] &&
			       strlen(sl->name) < DM_REPL_MD_NAME_MAX);
		else
			ASSERT(!sl->name[0]);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct md_info mi;
	struct md_peers p;
	uint64_t dev_bytes;
	uint32_t max_peers;
	uint8_t ctl, *sb, *pt;
	size_t n, sb_len, pt_len;
	char err[256];
	int r;

	if (size < 11)
		return 0;
	ctl = data[0];
	memcpy(&dev_bytes, data + 1, 8);
	dev_bytes = le64toh(dev_bytes);
	n = (size_t)data[9] | (size_t)data[10] << 8;
	data += 11;
	size -= 11;
	if (n > size)
		n = size;

	sb = block(data, n, !(ctl & 2), ctl & 1, &sb_len);
	memset(err, 0, sizeof(err));
	memset(&mi, 0x5a, sizeof(mi));
	r = md_parse_super(sb, sb_len, dev_bytes, &mi, err, sizeof(err));
	ASSERT(r == 0 || r == -EBADMSG || r == -EPROTO);
	if (r == 0)
		check_super(&mi, dev_bytes);
	else
		ASSERT_MSG(err);

	pt = block(data + n, size - n, !(ctl & 8), ctl & 4, &pt_len);
	/* the superblock's max_peers, else the table's own, else 1 */
	max_peers = 1;
	if (r == 0) {
		max_peers = mi.max_peers;
	} else if (pt_len >= 24) {
		memcpy(&max_peers, pt + 20, 4);
		max_peers = le32toh(max_peers);
	}
	memset(&p, 0x5a, sizeof(p));
	r = md_peers_parse(pt, pt_len, max_peers, &p);
	ASSERT(r == 0 || r == -EBADMSG);
	if (r == 0)
		check_peers(&p, max_peers);

	free(sb);
	free(pt);
	return 0;
}
