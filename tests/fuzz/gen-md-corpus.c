// SPDX-License-Identifier: GPL-2.0-only
/*
 * Write the seed corpus of fuzz-superblock: superblocks and peer tables
 * made by md_create(), md_update() and md_peers_write() in a file, as they
 * are and with a field broken.  The input layout is fuzz-superblock.c's;
 * the seeds let the fuzzer make the checksums right and pad the blocks, so
 * their trailing zeroes are left out.  The checked-in
 * tests/fuzz/corpus-superblock was made with
 *
 *	gen-md-corpus tests/fuzz/corpus-superblock
 *
 * (files found by the fuzzer may be added next to them).
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <xxhash.h>

#include "check.h"
#include "metadata.h"

#define DEV_SECTORS	(256ULL << 11)	/* 256 MiB */

static const char *out_dir;
static char md_path[] = "/tmp/gen-md-corpus-XXXXXX";

/* What md_create() made, read back: the superblock and the peer table. */
struct image {
	uint64_t dev_bytes;
	struct dm_repl_md_sb sb;
	uint8_t sb_block[DM_REPL_MD_SB_BYTES];
	uint8_t pt_block[DM_REPL_MD_SB_BYTES];
};

static size_t trimmed(const uint8_t *b, size_t len)
{
	while (len && !b[len - 1])
		len--;
	return len;
}

/* One seed: ctl, the device size, the superblock's length, both blocks. */
static void seed(const char *name, uint8_t ctl, uint64_t dev_bytes, const uint8_t *sb,
		 size_t sb_len, const uint8_t *pt, size_t pt_len)
{
	char path[4096];
	uint64_t d = htole64(dev_bytes);
	uint8_t n[2] = { (uint8_t)sb_len, (uint8_t)(sb_len >> 8) };
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", out_dir, name);
	f = fopen(path, "wb");
	CHECK(f, "%s: %s", path, strerror(errno));
	CHECK(fwrite(&ctl, 1, 1, f) == 1 && fwrite(&d, 8, 1, f) == 1 && fwrite(n, 2, 1, f) == 1,
	      "write %s", path);
	CHECK(fwrite(sb, 1, sb_len, f) == sb_len && fwrite(pt, 1, pt_len, f) == pt_len,
	      "write %s", path);
	CHECK(fclose(f) == 0, "close %s", path);
}

/* The image with sb in place of its superblock, resealed by the fuzzer. */
static void seed_sb(const char *name, const struct image *im, const struct dm_repl_md_sb *sb)
{
	uint8_t b[DM_REPL_MD_SB_BYTES];

	memcpy(b, im->sb_block, sizeof(b));
	memcpy(b, sb, sizeof(*sb));
	memset(b + 8, 0, 8);
	seed(name, 0, im->dev_bytes, b, trimmed(b, sizeof(b)), im->pt_block,
	     trimmed(im->pt_block, sizeof(im->pt_block)));
}

static void seed_pt(const char *name, const struct image *im, const struct dm_repl_md_peers *t)
{
	uint8_t b[DM_REPL_MD_SB_BYTES];

	memcpy(b, im->pt_block, sizeof(b));
	memcpy(b, t, sizeof(*t));
	memset(b + 8, 0, 8);
	seed(name, 0, im->dev_bytes, im->sb_block, trimmed(im->sb_block, sizeof(im->sb_block)),
	     b, trimmed(b, sizeof(b)));
}

static void seed_image(const char *name, const struct image *im)
{
	seed_sb(name, im, &im->sb);
}

static void load(struct image *im)
{
	char err[512];
	struct md_info mi;
	int fd;

	CHECK_RC(md_read(md_path, false, &mi, err, sizeof(err)), 0);
	fd = open(md_path, O_RDONLY);
	CHECK(fd >= 0, "open %s", md_path);
	CHECK(pread(fd, im->sb_block, sizeof(im->sb_block), 0) == sizeof(im->sb_block),
	      "read the superblock");
	CHECK(pread(fd, im->pt_block, sizeof(im->pt_block), (off_t)mi.peers_offset) ==
	      sizeof(im->pt_block), "read the peer table");
	im->dev_bytes = (uint64_t)lseek(fd, 0, SEEK_END);
	close(fd);
	/* the same seeds every time: a fixed uuid, the checksum made again */
	memcpy(&im->sb, im->sb_block, sizeof(im->sb));
	memset(im->sb.uuid, 0xa5, sizeof(im->sb.uuid));
	im->sb.csum = 0;
	memcpy(im->sb_block, &im->sb, sizeof(im->sb));
	im->sb.csum = htole64(XXH64(im->sb_block, sizeof(im->sb_block), 0));
	memcpy(im->sb_block, &im->sb, sizeof(im->sb));
}

static void create(struct image *im, unsigned int region_kb, unsigned int max_peers)
{
	char err[512];
	int fd = open(md_path, O_RDWR | O_TRUNC);

	CHECK(fd >= 0 && ftruncate(fd, (off_t)md_size_needed(DEV_SECTORS, region_kb,
							     max_peers)) == 0, "size %s", md_path);
	close(fd);
	CHECK_RC(md_create(md_path, "r0", DEV_SECTORS, 0, region_kb, max_peers, true, err,
			   sizeof(err)), 0);
	load(im);
}

int main(int argc, char **argv)
{
	const uint64_t gen[4] = { 0x1f2e3d4c5b6a7988ULL, 0x1122334455667788ULL, 0,
				  1700000000000ULL };
	struct image im, im2;
	struct dm_repl_md_sb sb;
	struct dm_repl_md_peers t;
	struct md_info mi;
	struct md_peers p;
	uint8_t b[DM_REPL_MD_SB_BYTES];
	char err[512];
	int fd;

	if (argc != 2) {
		fprintf(stderr, "usage: gen-md-corpus <dir>\n");
		return 2;
	}
	out_dir = argv[1];
	fd = mkstemp(md_path);
	CHECK(fd >= 0, "mkstemp");
	close(fd);

	/* valid: fresh, default slots, gens and role, used slots */
	create(&im, 64, 3);
	seed_image("valid-fresh", &im);
	/* as read: the real checksums, nothing padded */
	seed("valid-fresh-raw", 0x0f, im.dev_bytes, im.sb_block, sizeof(im.sb_block),
	     im.pt_block, sizeof(im.pt_block));
	create(&im2, 4, 0);
	seed_image("valid-4k-regions-default-peers", &im2);
	create(&im2, 1U << 20, DM_REPL_MD_MAX_PEERS);
	seed_image("valid-1g-regions-32-peers", &im2);

	create(&im, 64, 3);
	CHECK_RC(md_update(md_path, gen, true, DM_REPL_MD_ROLE_SECONDARY, "alpha", err,
			   sizeof(err)), 0);
	CHECK_RC(md_read(md_path, false, &mi, err, sizeof(err)), 0);
	CHECK_RC(md_peers_open(md_path, &fd), 0);
	CHECK_RC(md_peers_read(fd, &mi, &p), 0);
	snprintf(p.slot[2].name, sizeof(p.slot[2].name), "%s",
		 "a-peer-name-of-sixty-three-bytes-which-is-the-longest-allowed-x");
	p.slot[2].flags = DM_REPL_MD_SLOT_USED;
	p.slot[2].since_ms = 1700000000123ULL;
	CHECK_RC(md_peers_write(fd, &mi, &p), 0);
	close(fd);
	load(&im);
	seed_image("valid-secondary-slots", &im);

	/* the superblock broken */
	sb = im.sb;
	sb.magic = 0;
	seed_sb("bad-magic", &im, &sb);
	memcpy(b, im.sb_block, sizeof(b));
	b[100] ^= 1;					/* in the resource name */
	seed("bad-checksum", 0x01, im.dev_bytes, b, 200, im.pt_block, 0);
	seed("bad-short", 0x02, im.dev_bytes, im.sb_block, 200, im.pt_block, 0);
	seed("bad-device-too-small", 0, 8191, im.sb_block, trimmed(im.sb_block, 4096),
	     im.pt_block, 0);
	sb = im.sb;
	sb.version = htole32(1);
	sb.peers_offset = 0;
	sb.max_peers = 0;
	seed_sb("bad-version-1", &im, &sb);
	sb = im.sb;
	sb.version = htole32(3);
	seed_sb("bad-version-3", &im, &sb);
	sb = im.sb;
	sb.region_shift = htole32(11);
	seed_sb("bad-region-shift-11", &im, &sb);
	sb.region_shift = htole32(31);
	seed_sb("bad-region-shift-31", &im, &sb);
	sb = im.sb;
	sb.bitmap_bytes = htole64((DEV_SECTORS / 128 + 7) / 8 - 1);	/* a byte short */
	seed_sb("bad-bitmap-too-small", &im, &sb);
	sb = im.sb;
	sb.bitmap_offset = htole64(im.dev_bytes);
	seed_sb("bad-bitmap-past-end", &im, &sb);
	sb = im.sb;
	sb.peers_offset = htole64(le64toh(sb.peers_offset) - 4096);
	seed_sb("bad-peers-over-bitmap", &im, &sb);
	sb = im.sb;
	sb.peers_offset = htole64(le64toh(sb.peers_offset) + 512);
	seed_sb("bad-peers-unaligned", &im, &sb);
	sb = im.sb;
	sb.max_peers = 0;
	seed_sb("bad-max-peers-0", &im, &sb);
	sb.max_peers = htole32(DM_REPL_MD_MAX_PEERS + 1);
	seed_sb("bad-max-peers-33", &im, &sb);
	sb.max_peers = htole32(4);
	seed_sb("bad-max-peers-past-end", &im, &sb);
	/* sums that wrapped past 2^64 and were accepted once */
	sb = im.sb;
	sb.bitmap_offset = htole64(0ULL - 4096);
	sb.bitmap_bytes = htole64(8192);
	sb.peers_offset = htole64(8192);
	sb.max_peers = htole32(1);
	seed_sb("bad-bitmap-wraps", &im, &sb);
	sb = im.sb;
	sb.bitmap_bytes = htole64(0ULL - 4096);		/* slot 1 lands on the superblock */
	sb.bitmap_offset = htole64(8192);
	sb.peers_offset = htole64(4096);
	sb.max_peers = htole32(2);
	seed_sb("bad-slots-wrap", &im, &sb);
	sb = im.sb;
	sb.dev_sectors = htole64(1ULL << 55);		/* 2^64 bytes: 0 regions */
	seed_sb("bad-dev-sectors-wrap", &im, &sb);
	sb = im.sb;
	sb.dev_sectors = 0;				/* no bitmap, the table at 0 */
	sb.bitmap_offset = 0;
	sb.bitmap_bytes = 0;
	sb.peers_offset = 0;
	seed_sb("bad-peers-over-superblock", &im, &sb);
	sb = im.sb;
	memset(sb.resource, 'r', sizeof(sb.resource));
	seed_sb("odd-resource-unterminated", &im, &sb);

	/* the peer table broken */
	memcpy(&t, im.pt_block, sizeof(t));
	t.magic = 0;
	seed_pt("bad-table-magic", &im, &t);
	memcpy(&t, im.pt_block, sizeof(t));
	t.version = htole32(2);
	seed_pt("bad-table-version", &im, &t);
	memcpy(&t, im.pt_block, sizeof(t));
	t.max_peers = htole32(4);
	seed_pt("bad-table-max-peers", &im, &t);
	memcpy(b, im.pt_block, sizeof(b));
	b[40] ^= 1;					/* in slot 0's name */
	seed("bad-table-checksum", 0x04, im.dev_bytes, im.sb_block,
	     trimmed(im.sb_block, 4096), b, 300);
	seed("bad-table-short", 0x08, im.dev_bytes, im.sb_block,
	     trimmed(im.sb_block, 4096), im.pt_block, 300);
	memcpy(&t, im.pt_block, sizeof(t));
	memset(t.slot[2].name, 'x', sizeof(t.slot[2].name));
	seed_pt("bad-slot-name-unterminated", &im, &t);
	memcpy(&t, im.pt_block, sizeof(t));
	t.slot[2].name[0] = 0;
	seed_pt("bad-slot-name-empty", &im, &t);
	memcpy(&t, im.pt_block, sizeof(t));
	t.slot[3] = t.slot[2];
	seed_pt("bad-slot-past-max-peers", &im, &t);
	memcpy(&t, im.pt_block, sizeof(t));
	t.slot[2].flags = 0;
	seed_pt("odd-slot-free-with-name", &im, &t);

	unlink(md_path);
	return 0;
}
