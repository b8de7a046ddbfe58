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

/* What the steps below share: one metadata file, read and written in turn. */
static struct {
	char md[4096];
	char err[512];
	struct md_info mi;
	struct md_peers p;
	uint8_t *bm;
	int fd;
} x;

/* create: version 2, a fresh table, zeroed slots */
static void test_create(void)
{
	uint64_t need;

	need = md_size_needed(DEV_SECTORS, 64, 3);
	CHECK(need == 2 * 4096 + 4 * 4096, "size needed %llu", (unsigned long long)need);
	sized_file(x.md, need - 1);
	CHECK_RC(md_create(x.md, "r0", DEV_SECTORS, 0, 64, 3, false, x.err, sizeof(x.err)), -ENOSPC);
	CHECK(strstr(x.err, "3 peer slots"), "%s", x.err);
	sized_file(x.md, need);
	CHECK_RC(md_create(x.md, "r0", DEV_SECTORS, 0, 64, 3, false, x.err, sizeof(x.err)), 0);
	CHECK_RC(md_create(x.md, "r0", DEV_SECTORS, 0, 64, 3, false, x.err, sizeof(x.err)), -EEXIST);
	CHECK_RC(md_read(x.md, true, &x.mi, x.err, sizeof(x.err)), 0);
	CHECK(x.mi.version == 2 && x.mi.max_peers == 3 && x.mi.peers_offset == 8192 &&
	      x.mi.set_regions == 0, "version %u, %u slots at %llu, %llu set", x.mi.version,
	      x.mi.max_peers, (unsigned long long)x.mi.peers_offset,
	      (unsigned long long)x.mi.set_regions);
	free(x.mi.bitmap);
	CHECK_RC(md_peers_open(x.md, &x.fd), 0);
	CHECK_RC(md_peers_read(x.fd, &x.mi, &x.p), 0);
	CHECK(x.p.flags & DM_REPL_MD_PEERS_FRESH, "a new table is fresh");
	CHECK(!(x.p.slot[0].flags & DM_REPL_MD_SLOT_USED), "no slot used");
}

/* room to grow: bitmaps for 16 times the device, what md_max_sectors() says */
static void test_grow(void)
{
	char big[4096];
	struct md_info bi;
	uint64_t need;

	path_of(big, sizeof(big), "big");
	need = md_size_needed(16 * DEV_SECTORS, 64, 3);
	CHECK(need == 2 * 4096 + 4 * 8192, "size needed for 16 times: %llu",
	      (unsigned long long)need);
	sized_file(big, need - 1);
	CHECK_RC(md_create(big, "r0", DEV_SECTORS, 16 * DEV_SECTORS, 64, 3, false, x.err,
			   sizeof(x.err)), -ENOSPC);
	CHECK(strstr(x.err, "up to"), "%s", x.err);
	/* one page of bitmap less: 32768 regions of 128 sectors */
	CHECK(md_max_sectors(need - 1, 64, 3) == 32768ULL * 128, "max sectors %llu",
	      (unsigned long long)md_max_sectors(need - 1, 64, 3));
	sized_file(big, need);
	CHECK(md_max_sectors(need, 64, 3) == 16 * DEV_SECTORS, "max sectors %llu",
	      (unsigned long long)md_max_sectors(need, 64, 3));
	CHECK_RC(md_create(big, "r0", DEV_SECTORS, 16 * DEV_SECTORS, 64, 3, false, x.err,
			   sizeof(x.err)), 0);
	CHECK_RC(md_read(big, true, &bi, x.err, sizeof(x.err)), 0);
	CHECK(bi.dev_sectors == DEV_SECTORS && bi.max_sectors == 16 * DEV_SECTORS &&
	      bi.bitmap_bytes == 8192 && bi.nr_regions == 4096 && bi.set_regions == 0,
	      "%llu sectors, up to %llu, %llu bitmap bytes",
	      (unsigned long long)bi.dev_sectors, (unsigned long long)bi.max_sectors,
	      (unsigned long long)bi.bitmap_bytes);
	free(bi.bitmap);
	CHECK(x.mi.max_sectors == 32768ULL * 128, "the first metadata: up to %llu",
	      (unsigned long long)x.mi.max_sectors);
}

/* slots: a bit in slot 1 shows in the union; the table round trips */
static void test_slots(void)
{
	snprintf(x.p.slot[1].name, sizeof(x.p.slot[1].name), "gamma");
	x.p.slot[1].flags = DM_REPL_MD_SLOT_USED | DM_REPL_MD_SLOT_TRACKED;
	snprintf(x.p.slot[0].name, sizeof(x.p.slot[0].name), "beta");
	x.p.slot[0].flags = DM_REPL_MD_SLOT_USED | DM_REPL_MD_SLOT_TRACKED;
	CHECK_RC(md_peers_write(x.fd, &x.mi, &x.p), 0);
	CHECK(posix_memalign((void **)&x.bm, 4096, x.mi.bitmap_bytes) == 0, "alloc");
	memset(x.bm, 0, x.mi.bitmap_bytes);
	x.bm[100 / 8] |= 1U << (100 % 8);
	CHECK_RC(md_slot_write(x.fd, &x.mi, 1, x.bm, 0, 1), 0);
	CHECK_RC(md_slot_write(x.fd, &x.mi, 3, x.bm, 0, 1), -EINVAL);
	close(x.fd);
	set_bit_at(x.md, x.mi.bitmap_offset + 7, 2);		/* region 58, the target's */
	CHECK_RC(md_read(x.md, true, &x.mi, x.err, sizeof(x.err)), 0);
	CHECK(x.mi.set_regions == 2 && (x.mi.bitmap[100 / 8] & (1U << 4)) &&
	      (x.mi.bitmap[7] & (1U << 2)), "union: %llu set", (unsigned long long)x.mi.set_regions);
	free(x.mi.bitmap);
}

/* adoption from beta: every bitmap zeroed, only beta tracked */
static void test_adoption(void)
{
	CHECK_RC(md_update(x.md, NULL, true, DM_REPL_MD_ROLE_SECONDARY, "beta", x.err, sizeof(x.err)),
		 0);
	CHECK_RC(md_read(x.md, true, &x.mi, x.err, sizeof(x.err)), 0);
	CHECK(x.mi.set_regions == 0, "%llu set after the adoption",
	      (unsigned long long)x.mi.set_regions);
	free(x.mi.bitmap);
	CHECK_RC(md_peers_open(x.md, &x.fd), 0);
	CHECK_RC(md_peers_read(x.fd, &x.mi, &x.p), 0);
	close(x.fd);
	CHECK(!(x.p.flags & DM_REPL_MD_PEERS_FRESH), "still fresh after an adoption");
	CHECK(x.p.slot[0].flags & DM_REPL_MD_SLOT_TRACKED, "beta's slot not tracked");
	CHECK(!(x.p.slot[1].flags & DM_REPL_MD_SLOT_TRACKED), "gamma's slot still tracked");
}

/* a corrupt table is refused */
static void test_corrupt(void)
{
	set_bit_at(x.md, x.mi.peers_offset + 40, 0);
	CHECK_RC(md_peers_open(x.md, &x.fd), 0);
	CHECK_RC(md_peers_read(x.fd, &x.mi, &x.p), -EBADMSG);
	close(x.fd);
}

/* version 1: refused with the way out, upgraded in place */
static void test_version1(void)
{
	const uint64_t gen[4] = { 0x1111, 0x2222, 0x3333, 0x4444 };

	CHECK_RC(md_create(x.md, "r0", DEV_SECTORS, 0, 64, 3, true, x.err, sizeof(x.err)), 0);
	set_bit_at(x.md, 4096 + 1, 1);			/* region 9 */
	make_version1(x.md, gen);
	CHECK_RC(md_read(x.md, false, &x.mi, x.err, sizeof(x.err)), -EPROTO);
	CHECK(strstr(x.err, "upgrade-md"), "%s", x.err);
	CHECK_RC(md_create(x.md, "r0", DEV_SECTORS, 0, 64, 3, false, x.err, sizeof(x.err)),
		 -EEXIST);
	CHECK(strstr(x.err, "upgrade-md"), "%s", x.err);
	/* room for 3 slots, not for 4 */
	CHECK_RC(md_upgrade(x.md, 4, x.err, sizeof(x.err)), -ENOSPC);
	CHECK_RC(md_read(x.md, false, &x.mi, x.err, sizeof(x.err)), -EPROTO);
	CHECK_RC(md_upgrade(x.md, 3, x.err, sizeof(x.err)), 0);
	CHECK_RC(md_upgrade(x.md, 3, x.err, sizeof(x.err)), -EALREADY);
	CHECK_RC(md_read(x.md, true, &x.mi, x.err, sizeof(x.err)), 0);
	CHECK(x.mi.version == 2 && x.mi.max_peers == 3, "version %u", x.mi.version);
	CHECK(x.mi.set_regions == 1 && (x.mi.bitmap[1] & 2), "the bitmap was not kept");
	for (int i = 0; i < 4; i++)
		CHECK(x.mi.gen[i] == gen[i], "gen[%d] %llx", i, (unsigned long long)x.mi.gen[i]);
	free(x.mi.bitmap);
	CHECK_RC(md_peers_open(x.md, &x.fd), 0);
	CHECK_RC(md_peers_read(x.fd, &x.mi, &x.p), 0);
	close(x.fd);
	CHECK(x.p.flags & DM_REPL_MD_PEERS_FRESH, "an upgraded table starts fresh");
}

int main(void)
{
	char small[4096];

	CHECK(mkdtemp(dir), "mkdtemp");
	path_of(x.md, sizeof(x.md), "md");
	path_of(small, sizeof(small), "small");
	test_create();
	test_grow();
	test_slots();
	test_adoption();
	test_corrupt();
	test_version1();

	free(x.bm);
	unlink(x.md);
	unlink(small);
	rmdir(dir);
	printf("metadata: create, peer area, union, adoption, upgrade: ok\n");
	return 0;
}
