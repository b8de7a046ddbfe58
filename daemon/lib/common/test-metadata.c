// SPDX-License-Identifier: GPL-2.0-only
/*
 * The metadata format in files: create, the peer area (table and slots),
 * the union md_read() gives, the adoption md_update() records, and the
 * upgrade of format version 1 (kept bitmap and generations, refused
 * without room).
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <xxhash.h>

#include "check.h"
#include "metadata.h"

#define DEV_SECTORS	(256ULL << 11)	/* 256 MiB: 4096 regions of 64 KiB */

static char dir[] = "/tmp/test-metadata-XXXXXX";

static void path_of(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "%s/%s", dir, name);
}

static void sized_file(const char *path, uint64_t bytes)
{
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);

	CHECK(fd >= 0 && ftruncate(fd, (off_t)bytes) == 0, "%s", path);
	close(fd);
}

/* Rewrite the superblock as format version 1 would have had it. */
static void make_version1(const char *path, const uint64_t *gen)
{
	uint8_t b[DM_REPL_MD_SB_BYTES];
	struct dm_repl_md_sb sb;
	uint64_t c;
	int fd = open(path, O_RDWR);

	CHECK(fd >= 0 && pread(fd, b, sizeof(b), 0) == (ssize_t)sizeof(b), "read %s", path);
	memcpy(&sb, b, sizeof(sb));
	sb.version = htole32(1);
	sb.peers_offset = 0;
	sb.max_peers = 0;
	for (int i = 0; i < 4; i++)
		sb.gen[i] = htole64(gen[i]);
	sb.csum = 0;
	memcpy(b, &sb, sizeof(sb));
	c = htole64(XXH64(b, sizeof(b), 0));
	memcpy(b + 8, &c, 8);
	CHECK(pwrite(fd, b, sizeof(b), 0) == (ssize_t)sizeof(b), "write %s", path);
	close(fd);
}

static void set_bit_at(const char *path, uint64_t off, unsigned int bit)
{
	uint8_t v = (uint8_t)(1U << bit);
	int fd = open(path, O_RDWR);

	CHECK(fd >= 0 && pwrite(fd, &v, 1, (off_t)off) == 1, "set bit in %s", path);
	close(fd);
}

int main(void)
{
	char md[4096], small[4096], err[512];
	struct md_info mi;
	struct md_peers p;
	uint8_t *bm;
	uint64_t need;
	int fd;

	CHECK(mkdtemp(dir), "mkdtemp");
	path_of(md, sizeof(md), "md");
	path_of(small, sizeof(small), "small");

	/* --- create: version 2, a fresh table, zeroed slots */
	need = md_size_needed(DEV_SECTORS, 64, 3);
	CHECK(need == 2 * 4096 + 4 * 4096, "size needed %llu", (unsigned long long)need);
	sized_file(md, need - 1);
	CHECK_RC(md_create(md, "r0", DEV_SECTORS, 0, 64, 3, false, err, sizeof(err)), -ENOSPC);
	CHECK(strstr(err, "3 peer slots"), "%s", err);
	sized_file(md, need);
	CHECK_RC(md_create(md, "r0", DEV_SECTORS, 0, 64, 3, false, err, sizeof(err)), 0);
	CHECK_RC(md_create(md, "r0", DEV_SECTORS, 0, 64, 3, false, err, sizeof(err)), -EEXIST);
	CHECK_RC(md_read(md, true, &mi, err, sizeof(err)), 0);
	CHECK(mi.version == 2 && mi.max_peers == 3 && mi.peers_offset == 8192 &&
	      mi.set_regions == 0, "version %u, %u slots at %llu, %llu set", mi.version,
	      mi.max_peers, (unsigned long long)mi.peers_offset,
	      (unsigned long long)mi.set_regions);
	free(mi.bitmap);
	CHECK_RC(md_peers_open(md, &fd), 0);
	CHECK_RC(md_peers_read(fd, &mi, &p), 0);
	CHECK(p.flags & DM_REPL_MD_PEERS_FRESH, "a new table is fresh");
	CHECK(!(p.slot[0].flags & DM_REPL_MD_SLOT_USED), "no slot used");

	/* --- room to grow: bitmaps for 16 times the device, what md_max_sectors() says */
	{
		char big[4096];
		struct md_info bi;

		path_of(big, sizeof(big), "big");
		need = md_size_needed(16 * DEV_SECTORS, 64, 3);
		CHECK(need == 2 * 4096 + 4 * 8192, "size needed for 16 times: %llu",
		      (unsigned long long)need);
		sized_file(big, need - 1);
		CHECK_RC(md_create(big, "r0", DEV_SECTORS, 16 * DEV_SECTORS, 64, 3, false, err,
				   sizeof(err)), -ENOSPC);
		CHECK(strstr(err, "up to"), "%s", err);
		/* one page of bitmap less: 32768 regions of 128 sectors */
		CHECK(md_max_sectors(need - 1, 64, 3) == 32768ULL * 128, "max sectors %llu",
		      (unsigned long long)md_max_sectors(need - 1, 64, 3));
		sized_file(big, need);
		CHECK(md_max_sectors(need, 64, 3) == 16 * DEV_SECTORS, "max sectors %llu",
		      (unsigned long long)md_max_sectors(need, 64, 3));
		CHECK_RC(md_create(big, "r0", DEV_SECTORS, 16 * DEV_SECTORS, 64, 3, false, err,
				   sizeof(err)), 0);
		CHECK_RC(md_read(big, true, &bi, err, sizeof(err)), 0);
		CHECK(bi.dev_sectors == DEV_SECTORS && bi.max_sectors == 16 * DEV_SECTORS &&
		      bi.bitmap_bytes == 8192 && bi.nr_regions == 4096 && bi.set_regions == 0,
		      "%llu sectors, up to %llu, %llu bitmap bytes",
		      (unsigned long long)bi.dev_sectors, (unsigned long long)bi.max_sectors,
		      (unsigned long long)bi.bitmap_bytes);
		free(bi.bitmap);
		CHECK(mi.max_sectors == 32768ULL * 128, "the first metadata: up to %llu",
		      (unsigned long long)mi.max_sectors);
	}

	/* --- slots: a bit in slot 1 shows in the union; the table round trips */
	snprintf(p.slot[1].name, sizeof(p.slot[1].name), "gamma");
	p.slot[1].flags = DM_REPL_MD_SLOT_USED | DM_REPL_MD_SLOT_TRACKED;
	snprintf(p.slot[0].name, sizeof(p.slot[0].name), "beta");
	p.slot[0].flags = DM_REPL_MD_SLOT_USED | DM_REPL_MD_SLOT_TRACKED;
	CHECK_RC(md_peers_write(fd, &mi, &p), 0);
	CHECK(posix_memalign((void **)&bm, 4096, mi.bitmap_bytes) == 0, "alloc");
	memset(bm, 0, mi.bitmap_bytes);
	bm[100 / 8] |= 1U << (100 % 8);
	CHECK_RC(md_slot_write(fd, &mi, 1, bm, 0, 1), 0);
	CHECK_RC(md_slot_write(fd, &mi, 3, bm, 0, 1), -EINVAL);
	close(fd);
	set_bit_at(md, mi.bitmap_offset + 7, 2);		/* region 58, the target's */
	CHECK_RC(md_read(md, true, &mi, err, sizeof(err)), 0);
	CHECK(mi.set_regions == 2 && (mi.bitmap[100 / 8] & (1U << 4)) &&
	      (mi.bitmap[7] & (1U << 2)), "union: %llu set", (unsigned long long)mi.set_regions);
	free(mi.bitmap);

	/* --- adoption from beta: every bitmap zeroed, only beta tracked */
	CHECK_RC(md_update(md, NULL, true, DM_REPL_MD_ROLE_SECONDARY, "beta", err, sizeof(err)),
		 0);
	CHECK_RC(md_read(md, true, &mi, err, sizeof(err)), 0);
	CHECK(mi.set_regions == 0, "%llu set after the adoption",
	      (unsigned long long)mi.set_regions);
	free(mi.bitmap);
	CHECK_RC(md_peers_open(md, &fd), 0);
	CHECK_RC(md_peers_read(fd, &mi, &p), 0);
	close(fd);
	CHECK(!(p.flags & DM_REPL_MD_PEERS_FRESH), "still fresh after an adoption");
	CHECK(p.slot[0].flags & DM_REPL_MD_SLOT_TRACKED, "beta's slot not tracked");
	CHECK(!(p.slot[1].flags & DM_REPL_MD_SLOT_TRACKED), "gamma's slot still tracked");

	/* --- a corrupt table is refused */
	set_bit_at(md, mi.peers_offset + 40, 0);
	CHECK_RC(md_peers_open(md, &fd), 0);
	CHECK_RC(md_peers_read(fd, &mi, &p), -EBADMSG);
	close(fd);

	/* --- version 1: refused with the way out, upgraded in place */
	{
		const uint64_t gen[4] = { 0x1111, 0x2222, 0x3333, 0x4444 };

		CHECK_RC(md_create(md, "r0", DEV_SECTORS, 0, 64, 3, true, err, sizeof(err)), 0);
		set_bit_at(md, 4096 + 1, 1);			/* region 9 */
		make_version1(md, gen);
		CHECK_RC(md_read(md, false, &mi, err, sizeof(err)), -EPROTO);
		CHECK(strstr(err, "upgrade-md"), "%s", err);
		CHECK_RC(md_create(md, "r0", DEV_SECTORS, 0, 64, 3, false, err, sizeof(err)),
			 -EEXIST);
		CHECK(strstr(err, "upgrade-md"), "%s", err);
		/* room for 3 slots, not for 4 */
		CHECK_RC(md_upgrade(md, 4, err, sizeof(err)), -ENOSPC);
		CHECK_RC(md_read(md, false, &mi, err, sizeof(err)), -EPROTO);
		CHECK_RC(md_upgrade(md, 3, err, sizeof(err)), 0);
		CHECK_RC(md_upgrade(md, 3, err, sizeof(err)), -EALREADY);
		CHECK_RC(md_read(md, true, &mi, err, sizeof(err)), 0);
		CHECK(mi.version == 2 && mi.max_peers == 3, "version %u", mi.version);
		CHECK(mi.set_regions == 1 && (mi.bitmap[1] & 2), "the bitmap was not kept");
		for (int i = 0; i < 4; i++)
			CHECK(mi.gen[i] == gen[i], "gen[%d] %llx", i, (unsigned long long)mi.gen[i]);
		free(mi.bitmap);
		CHECK_RC(md_peers_open(md, &fd), 0);
		CHECK_RC(md_peers_read(fd, &mi, &p), 0);
		close(fd);
		CHECK(p.flags & DM_REPL_MD_PEERS_FRESH, "an upgraded table starts fresh");
	}

	free(bm);
	unlink(md);
	unlink(small);
	rmdir(dir);
	printf("metadata: create, peer area, union, adoption, upgrade: ok\n");
	return 0;
}
