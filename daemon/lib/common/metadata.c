// SPDX-License-Identifier: GPL-2.0-only
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include <xxhash.h>

#include "bitmap.h"
#include "dmdev.h"
#include "metadata.h"

static uint64_t md_bitmap_bytes(uint64_t dev_sectors, unsigned int region_kb)
{
	uint64_t region_sectors = (uint64_t)region_kb * 2;
	uint64_t regions = (dev_sectors + region_sectors - 1) / region_sectors;
	uint64_t bytes = (regions + 7) / 8;

	return (bytes + DM_REPL_MD_BITMAP_ALIGN - 1) / DM_REPL_MD_BITMAP_ALIGN *
	       DM_REPL_MD_BITMAP_ALIGN;
}

uint64_t md_size_needed(uint64_t dev_sectors, unsigned int region_kb, unsigned int max_peers)
{
	uint64_t b = md_bitmap_bytes(dev_sectors, region_kb);

	if (!max_peers)
		max_peers = DM_REPL_MD_DEFAULT_PEERS;
	return 2 * DM_REPL_MD_SB_BYTES + (1 + (uint64_t)max_peers) * b;
}

uint64_t md_max_sectors(uint64_t meta_bytes, unsigned int region_kb, unsigned int max_peers)
{
	uint64_t b;

	if (!max_peers)
		max_peers = DM_REPL_MD_DEFAULT_PEERS;
	if (meta_bytes < 2 * DM_REPL_MD_SB_BYTES)
		return 0;
	b = (meta_bytes - 2 * DM_REPL_MD_SB_BYTES) / (1 + (uint64_t)max_peers);
	b -= b % DM_REPL_MD_BITMAP_ALIGN;
	if (b > (UINT64_MAX >> 9) / 8 / ((uint64_t)region_kb * 2))
		return UINT64_MAX >> 9;
	return b * 8 * region_kb * 2;
}

/* csum is at offset 8 of both the superblock and the peer table */
static uint64_t md_csum(const uint8_t *block)
{
	uint8_t copy[DM_REPL_MD_SB_BYTES];

	memcpy(copy, block, sizeof(copy));
	memset(copy + offsetof(struct dm_repl_md_sb, csum), 0, 8);
	return XXH64(copy, sizeof(copy), 0);
}

static uint64_t md_slot_offset(const struct md_info *mi, unsigned int slot)
{
	return mi->peers_offset + DM_REPL_MD_SB_BYTES + (uint64_t)slot * mi->bitmap_bytes;
}

static int pwrite_all(int fd, const void *buf, size_t len, off_t off)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t n = pwrite(fd, p, len, off);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		off += n;
		len -= (size_t)n;
	}
	return 0;
}

static int pread_all(int fd, void *buf, size_t len, off_t off)
{
	uint8_t *p = buf;

	while (len) {
		ssize_t n = pread(fd, p, len, off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		p += n;
		off += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Zeroes over [off, off + len), from an aligned buffer (O_DIRECT). */
static int md_zero(int fd, uint64_t off, uint64_t len)
{
	const size_t chunk = 1U << 20;
	uint8_t *zero;
	int r = 0;

	/* a file (tests, loop-backed setups): a hole reads as zeroes */
	if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)len) == 0)
		return 0;
	if (posix_memalign((void **)&zero, 4096, chunk))
		return -ENOMEM;
	memset(zero, 0, chunk);
	for (uint64_t o = 0; o < len && !r; o += chunk)
		r = pwrite_all(fd, zero, len - o < chunk ? (size_t)(len - o) : chunk,
			       (off_t)(off + o));
	free(zero);
	return r;
}

static void md_block_seal(uint8_t *block)
{
	uint64_t c;

	memset(block + offsetof(struct dm_repl_md_sb, csum), 0, 8);
	c = htole64(md_csum(block));
	memcpy(block + offsetof(struct dm_repl_md_sb, csum), &c, 8);
}

static void md_peers_encode(const struct md_peers *p, uint8_t *block)
{
	struct dm_repl_md_peers t = { 0 };

	t.magic = htole32(DM_REPL_MD_PEERS_MAGIC);
	t.version = htole32(DM_REPL_MD_PEERS_VERSION);
	t.flags = htole32(p->flags);
	t.max_peers = htole32(p->max_peers);
	t.events = htole64(p->events);
	for (unsigned int i = 0; i < DM_REPL_MD_MAX_PEERS; i++) {
		/* NUL padded: the name is at most DM_REPL_MD_NAME_MAX - 1 bytes */
		strncpy(t.slot[i].name, p->slot[i].name, sizeof(t.slot[i].name) - 1);
		t.slot[i].flags = htole32(p->slot[i].flags);
		t.slot[i].since_ms = htole64(p->slot[i].since_ms);
	}
	memset(block, 0, DM_REPL_MD_SB_BYTES);
	memcpy(block, &t, sizeof(t));
	md_block_seal(block);
}

int md_peers_parse(const void *buf, size_t len, uint32_t max_peers, struct md_peers *ret)
{
	const uint8_t *block = buf;
	struct dm_repl_md_peers t;
	struct md_peers p = { 0 };
	uint64_t c;

	if (len < DM_REPL_MD_SB_BYTES)
		return -EBADMSG;
	memcpy(&t, block, sizeof(t));
	memcpy(&c, block + offsetof(struct dm_repl_md_sb, csum), 8);
	if (le32toh(t.magic) != DM_REPL_MD_PEERS_MAGIC || le64toh(c) != md_csum(block) ||
	    le32toh(t.version) != DM_REPL_MD_PEERS_VERSION || le32toh(t.max_peers) != max_peers)
		return -EBADMSG;
	p.flags = le32toh(t.flags);
	p.max_peers = max_peers;
	p.events = le64toh(t.events);
	for (unsigned int i = 0; i < DM_REPL_MD_MAX_PEERS; i++) {
		struct md_slot *sl = &p.slot[i];

		sl->flags = le32toh(t.slot[i].flags);
		sl->since_ms = le64toh(t.slot[i].since_ms);
		if (!(sl->flags & DM_REPL_MD_SLOT_USED))
			continue;
		if (i >= max_peers || !memchr(t.slot[i].name, 0, sizeof(t.slot[i].name)) ||
		    !t.slot[i].name[0])
			return -EBADMSG;
		memcpy(sl->name, t.slot[i].name, sizeof(t.slot[i].name));
	}
	*ret = p;
	return 0;
}

int md_peers_read(int fd, const struct md_info *mi, struct md_peers *ret)
{
	uint8_t *block;
	int r;

	if (posix_memalign((void **)&block, 4096, DM_REPL_MD_SB_BYTES))
		return -ENOMEM;
	r = pread_all(fd, block, DM_REPL_MD_SB_BYTES, (off_t)mi->peers_offset);
	if (r == 0)
		r = md_peers_parse(block, DM_REPL_MD_SB_BYTES, mi->max_peers, ret);
	free(block);
	return r;
}

int md_peers_write(int fd, const struct md_info *mi, struct md_peers *p)
{
	uint8_t *block;
	int r;

	if (posix_memalign((void **)&block, 4096, DM_REPL_MD_SB_BYTES))
		return -ENOMEM;
	p->events++;
	p->max_peers = mi->max_peers;
	md_peers_encode(p, block);
	r = pwrite_all(fd, block, DM_REPL_MD_SB_BYTES, (off_t)mi->peers_offset);
	free(block);
	return r;
}

int md_slot_read(int fd, const struct md_info *mi, unsigned int slot, uint8_t *bitmap)
{
	if (slot >= mi->max_peers)
		return -EINVAL;
	return pread_all(fd, bitmap, mi->bitmap_bytes, (off_t)md_slot_offset(mi, slot));
}

int md_slot_write(int fd, const struct md_info *mi, unsigned int slot, const uint8_t *bitmap,
		  uint64_t first, uint64_t n)
{
	uint64_t pages = mi->bitmap_bytes / DM_REPL_MD_BITMAP_ALIGN;

	if (slot >= mi->max_peers || first > pages || n > pages - first)
		return -EINVAL;
	return pwrite_all(fd, bitmap + first * DM_REPL_MD_BITMAP_ALIGN,
			  n * DM_REPL_MD_BITMAP_ALIGN,
			  (off_t)(md_slot_offset(mi, slot) + first * DM_REPL_MD_BITMAP_ALIGN));
}

int md_peers_open(const char *meta_path, int *ret_fd)
{
	int fd = open(meta_path, O_RDWR | O_DIRECT | O_CLOEXEC);

	if (fd < 0 && errno == EINVAL)
		fd = open(meta_path, O_RDWR | O_CLOEXEC);	/* tmpfs: no O_DIRECT */
	if (fd < 0)
		return -errno;
	*ret_fd = fd;
	return 0;
}

/* The union of the bitmap and every used slot's into mi->bitmap. */
static int md_read_union(int fd, struct md_info *mi)
{
	struct md_peers p;
	uint8_t *b;
	int r;

	r = md_peers_read(fd, mi, &p);
	if (r < 0)
		return r;
	if (posix_memalign((void **)&b, 4096, mi->bitmap_bytes))
		return -ENOMEM;
	for (unsigned int i = 0; i < mi->max_peers && r == 0; i++) {
		if (!(p.slot[i].flags & DM_REPL_MD_SLOT_USED))
			continue;
		r = md_slot_read(fd, mi, i, b);
		for (uint64_t k = 0; r == 0 && k < mi->bitmap_bytes; k++)
			mi->bitmap[k] |= b[k];
	}
	free(b);
	return r;
}

int md_parse_super(const void *buf, size_t len, uint64_t dev_bytes, struct md_info *ret,
		   char *err, size_t errlen)
{
	struct md_info mi = { 0 };
	struct dm_repl_md_sb sb;
	const uint8_t *block = buf;

	if (len < DM_REPL_MD_SB_BYTES) {
		snprintf(err, errlen, "too small for dm-repl metadata");
		return -EBADMSG;
	}
	memcpy(&sb, block, sizeof(sb));
	if (le32toh(sb.magic) != DM_REPL_MD_MAGIC) {
		snprintf(err, errlen, "no dm-repl metadata");
		return -EBADMSG;
	}
	if (le64toh(sb.csum) != md_csum(block)) {
		snprintf(err, errlen, "superblock checksum mismatch (corrupt)");
		return -EBADMSG;
	}
	mi.version = le32toh(sb.version);
	if (mi.version == 1) {
		snprintf(err, errlen, "metadata format version 1, without the peer area: 'replctl upgrade-md' converts it in place (docs/metadata.md)");
		return -EPROTO;
	}
	if (mi.version != DM_REPL_MD_VERSION) {
		snprintf(err, errlen, "metadata format version %u not supported", mi.version);
		return -EBADMSG;
	}
	mi.flags = le32toh(sb.flags);
	mi.dev_sectors = le64toh(sb.dev_sectors);
	mi.region_shift = le32toh(sb.region_shift);
	mi.bitmap_offset = le64toh(sb.bitmap_offset);
	mi.bitmap_bytes = le64toh(sb.bitmap_bytes);
	mi.events = le64toh(sb.events);
	mi.role = le32toh(sb.role);
	for (int i = 0; i < 4; i++)
		mi.gen[i] = le64toh(sb.gen[i]);
	memcpy(mi.uuid, sb.uuid, sizeof(mi.uuid));
	memcpy(mi.resource, sb.resource, DM_REPL_MD_NAME_MAX);
	if (mi.region_shift < 12 || mi.region_shift > 30) {
		snprintf(err, errlen, "region size 2^%u invalid", mi.region_shift);
		return -EBADMSG;
	}
	/* in bytes it fits 64 bits; every sum and product below is checked not to wrap */
	if (mi.dev_sectors > UINT64_MAX >> 9) {
		snprintf(err, errlen, "device size of %llu sectors invalid",
			 (unsigned long long)mi.dev_sectors);
		return -EBADMSG;
	}
	mi.nr_regions = (mi.dev_sectors + (1ULL << (mi.region_shift - 9)) - 1) >>
			(mi.region_shift - 9);
	mi.max_sectors = mi.bitmap_bytes > (UINT64_MAX >> 9) >> (mi.region_shift - 9 + 3) ?
			 UINT64_MAX >> 9 : (mi.bitmap_bytes * 8) << (mi.region_shift - 9);
	if (mi.bitmap_bytes < (mi.nr_regions + 7) / 8 || mi.bitmap_offset < DM_REPL_MD_SB_BYTES ||
	    mi.bitmap_offset > dev_bytes || mi.bitmap_bytes > dev_bytes - mi.bitmap_offset) {
		snprintf(err, errlen, "bitmap location invalid");
		return -EBADMSG;
	}
	mi.peers_offset = le64toh(sb.peers_offset);
	mi.max_peers = le32toh(sb.max_peers);
	/* the table, then max_peers bitmaps: md_slot_offset(&mi, mi.max_peers) <= dev_bytes */
	if (!mi.max_peers || mi.max_peers > DM_REPL_MD_MAX_PEERS ||
	    mi.peers_offset < mi.bitmap_offset + mi.bitmap_bytes ||
	    mi.peers_offset % DM_REPL_MD_BITMAP_ALIGN || mi.peers_offset > dev_bytes ||
	    dev_bytes - mi.peers_offset < DM_REPL_MD_SB_BYTES ||
	    (dev_bytes - mi.peers_offset - DM_REPL_MD_SB_BYTES) / mi.max_peers < mi.bitmap_bytes) {
		snprintf(err, errlen, "peer area location invalid");
		return -EBADMSG;
	}
	*ret = mi;
	return 0;
}

int md_read(const char *meta_path, bool want_bitmap, struct md_info *ret, char *err,
	    size_t errlen)
{
	struct md_info mi;
	uint8_t *block = NULL;
	uint64_t size;
	char e[256];
	int fd, r = -EBADMSG;

	fd = open(meta_path, O_RDONLY | O_DIRECT | O_CLOEXEC);
	if (fd < 0)
		fd = open(meta_path, O_RDONLY | O_CLOEXEC);	/* tmpfs: no O_DIRECT */
	if (fd < 0) {
		r = -errno;
		snprintf(err, errlen, "%s: %s", meta_path, strerror(-r));
		return r;
	}
	if (dmdev_size_sectors(fd, &size) < 0 || size * 512 < DM_REPL_MD_SB_BYTES) {
		snprintf(err, errlen, "%s: too small for dm-repl metadata", meta_path);
		goto out;
	}
	if (posix_memalign((void **)&block, 4096, DM_REPL_MD_SB_BYTES)) {
		r = -ENOMEM;
		goto out;
	}
	if (pread(fd, block, DM_REPL_MD_SB_BYTES, 0) != DM_REPL_MD_SB_BYTES) {
		r = -EIO;
		snprintf(err, errlen, "%s: cannot read the superblock", meta_path);
		goto out;
	}
	r = md_parse_super(block, DM_REPL_MD_SB_BYTES, size * 512, &mi, e, sizeof(e));
	if (r < 0) {
		snprintf(err, errlen, "%s: %s", meta_path, e);
		goto out;
	}
	r = -EBADMSG;
	if (want_bitmap) {
		uint8_t *bm;

		if (posix_memalign((void **)&bm, 4096, mi.bitmap_bytes)) {
			r = -ENOMEM;
			goto out;
		}
		if (pread(fd, bm, mi.bitmap_bytes, (off_t)mi.bitmap_offset) !=
		    (ssize_t)mi.bitmap_bytes) {
			free(bm);
			r = -EIO;
			snprintf(err, errlen, "%s: cannot read the bitmap", meta_path);
			goto out;
		}
		mi.bitmap = bm;
		r = md_read_union(fd, &mi);
		if (r < 0) {
			free(bm);
			snprintf(err, errlen, "%s: cannot read the peer area%s", meta_path,
				 r == -EBADMSG ? " (corrupt)" : "");
			goto out;
		}
		r = -EBADMSG;
		mi.set_regions = bitmap_count(bm, mi.nr_regions);
	}
	*ret = mi;
	r = 0;
out:
	free(block);
	close(fd);
	return r;
}

/* The peer area of a version 2 superblock: an empty table, zeroed slots. */
static int md_write_peer_area(int fd, const struct md_info *mi, uint32_t table_flags)
{
	struct md_peers p = { .flags = table_flags, .max_peers = mi->max_peers };
	int r;

	r = md_zero(fd, mi->peers_offset + DM_REPL_MD_SB_BYTES,
		    (uint64_t)mi->max_peers * mi->bitmap_bytes);
	if (r == 0)
		r = md_peers_write(fd, mi, &p);
	return r;
}

/* Write the superblock block last, sealed, and make everything durable. */
static int md_write_sb(int fd, uint8_t *block)
{
	int r;

	if (fsync(fd) < 0)
		return -errno;
	md_block_seal(block);
	r = pwrite_all(fd, block, DM_REPL_MD_SB_BYTES, 0);
	if (r == 0 && fsync(fd) < 0)
		r = -errno;
	return r;
}

static int md_open_excl(const char *meta_path, char *err, size_t errlen)
{
	/* O_EXCL: a block device the kernel uses (a live repl device) is refused */
	int fd = open(meta_path, O_RDWR | O_EXCL | O_CLOEXEC);

	if (fd < 0) {
		int r = -errno;

		snprintf(err, errlen, "%s: %s%s", meta_path, strerror(-r),
			 r == -EBUSY ? " (in use by a repl device?)" : "");
		return r;
	}
	return fd;
}

/* Opened exclusively, its superblock block read into *block (free it). */
static int md_open_sb(const char *meta_path, uint8_t **block, char *err, size_t errlen)
{
	int fd = md_open_excl(meta_path, err, errlen), r;

	if (fd < 0)
		return fd;
	if (posix_memalign((void **)block, 4096, DM_REPL_MD_SB_BYTES)) {
		close(fd);
		return -ENOMEM;
	}
	r = pread_all(fd, *block, DM_REPL_MD_SB_BYTES, 0);
	if (r < 0) {
		snprintf(err, errlen, "%s: cannot read the superblock: %s", meta_path, strerror(-r));
		free(*block);
		close(fd);
		return r;
	}
	return fd;
}

static int md_check_max_peers(unsigned int *max_peers, char *err, size_t errlen)
{
	if (!*max_peers)
		*max_peers = DM_REPL_MD_DEFAULT_PEERS;
	if (*max_peers > DM_REPL_MD_MAX_PEERS) {
		snprintf(err, errlen, "--max-peers %u: at most %u", *max_peers,
			 DM_REPL_MD_MAX_PEERS);
		return -EINVAL;
	}
	return 0;
}

int md_create(const char *meta_path, const char *resource, uint64_t dev_sectors,
	      uint64_t max_sectors, unsigned int region_kb, unsigned int max_peers, bool force,
	      char *err, size_t errlen)
{
	struct dm_repl_md_sb sb = { 0 };
	struct md_info old, mi = { 0 };
	uint8_t *block;
	uint64_t size, bytes;
	char e[256];
	int fd, r;

	if (max_sectors < dev_sectors)
		max_sectors = dev_sectors;
	bytes = md_bitmap_bytes(max_sectors, region_kb);
	if (strlen(resource) >= DM_REPL_MD_NAME_MAX) {
		snprintf(err, errlen, "resource name too long");
		return -EINVAL;
	}
	if (region_kb < 4 || region_kb > (1U << 20) || (region_kb & (region_kb - 1))) {
		snprintf(err, errlen, "region size %u KiB: a power of 2 from 4 to 1048576",
			 region_kb);
		return -EINVAL;
	}
	r = md_check_max_peers(&max_peers, err, errlen);
	if (r < 0)
		return r;
	r = md_read(meta_path, false, &old, e, sizeof(e));
	if (!force && (r == 0 || r == -EPROTO)) {
		snprintf(err, errlen, "%s already holds dm-repl metadata%s%s (--force overwrites it%s)",
			 meta_path, r ? "" : " of resource ", r ? "" : old.resource,
			 r ? "; 'replctl upgrade-md' keeps it" : "");
		return -EEXIST;
	}
	fd = md_open_excl(meta_path, err, errlen);
	if (fd < 0)
		return fd;
	r = dmdev_size_sectors(fd, &size);
	if (r < 0 || size * 512 < md_size_needed(max_sectors, region_kb, max_peers)) {
		snprintf(err, errlen, "%s is too small: %llu KiB needed for a device of up to %llu sectors with %u KiB regions and %u peer slots",
			 meta_path,
			 (unsigned long long)md_size_needed(max_sectors, region_kb, max_peers) >> 10,
			 (unsigned long long)max_sectors, region_kb, max_peers);
		close(fd);
		return -ENOSPC;
	}
	if (posix_memalign((void **)&block, 4096, DM_REPL_MD_SB_BYTES)) {
		close(fd);
		return -ENOMEM;
	}
	sb.magic = htole32(DM_REPL_MD_MAGIC);
	sb.version = htole32(DM_REPL_MD_VERSION);
	sb.flags = htole32(DM_REPL_MD_CLEAN);
	sb.region_shift = htole32((uint32_t)__builtin_ctz(region_kb) + 10);
	sb.dev_sectors = htole64(dev_sectors);
	sb.bitmap_offset = htole64(DM_REPL_MD_SB_BYTES);
	sb.bitmap_bytes = htole64(bytes);
	sb.peers_offset = htole64(DM_REPL_MD_SB_BYTES + bytes);
	sb.max_peers = htole32(max_peers);
	if (getrandom(sb.uuid, sizeof(sb.uuid), 0) != sizeof(sb.uuid))
		memset(sb.uuid, 0x5a, sizeof(sb.uuid));
	memcpy(sb.resource, resource, strlen(resource));	/* checked < 64, rest is 0 */
	memset(block, 0, DM_REPL_MD_SB_BYTES);
	memcpy(block, &sb, sizeof(sb));
	mi.bitmap_bytes = bytes;
	mi.peers_offset = DM_REPL_MD_SB_BYTES + bytes;
	mi.max_peers = max_peers;
	/* the bitmaps first, the superblock last: a torn create is no metadata */
	r = md_zero(fd, DM_REPL_MD_SB_BYTES, bytes);
	if (r == 0)
		r = md_write_peer_area(fd, &mi, DM_REPL_MD_PEERS_FRESH);
	if (r == 0)
		r = md_write_sb(fd, block);
	if (r < 0)
		snprintf(err, errlen, "%s: %s", meta_path, strerror(-r));
	free(block);
	close(fd);
	return r;
}

int md_upgrade(const char *meta_path, unsigned int max_peers, char *err, size_t errlen)
{
	struct dm_repl_md_sb sb;
	struct md_info mi = { 0 };
	uint8_t *block;
	uint64_t size, need;
	int fd, r;

	r = md_check_max_peers(&max_peers, err, errlen);
	if (r < 0)
		return r;
	r = md_read(meta_path, false, &mi, err, errlen);
	if (r == 0) {
		snprintf(err, errlen, "%s: already format version %u", meta_path, mi.version);
		return -EALREADY;
	}
	if (r != -EPROTO)
		return r;
	fd = md_open_sb(meta_path, &block, err, errlen);
	if (fd < 0)
		return fd;
	if (dmdev_size_sectors(fd, &size) < 0) {
		snprintf(err, errlen, "%s: cannot read its size", meta_path);
		r = -EIO;
		goto out;
	}
	memcpy(&sb, block, sizeof(sb));
	/* version 1 checked the rest; its bytes from 176 on were 0 */
	mi.bitmap_bytes = le64toh(sb.bitmap_bytes);
	mi.peers_offset = le64toh(sb.bitmap_offset) + mi.bitmap_bytes;
	mi.max_peers = max_peers;
	need = md_slot_offset(&mi, max_peers);
	if (size * 512 < need) {
		snprintf(err, errlen, "%s is too small for %u peer slots: %llu KiB needed; grow it, or use --max-peers with fewer",
			 meta_path, max_peers, (unsigned long long)need >> 10);
		r = -ENOSPC;
		goto out;
	}
	/* the slots start tracked: version 1 kept every peer's regions in the bitmap */
	r = md_write_peer_area(fd, &mi, DM_REPL_MD_PEERS_FRESH);
	if (r < 0)
		goto fail;
	sb.version = htole32(DM_REPL_MD_VERSION);
	sb.peers_offset = htole64(mi.peers_offset);
	sb.max_peers = htole32(max_peers);
	sb.__pad2 = 0;
	memcpy(block, &sb, sizeof(sb));
	r = md_write_sb(fd, block);
	if (r == 0)
		goto out;
fail:
	snprintf(err, errlen, "%s: %s", meta_path, strerror(-r));
out:
	free(block);
	close(fd);
	return r;
}

const char *md_role_name(uint32_t role)
{
	switch (role) {
	case DM_REPL_MD_ROLE_NONE:
		return "none";
	case DM_REPL_MD_ROLE_PRIMARY:
		return "primary";
	case DM_REPL_MD_ROLE_SECONDARY:
		return "secondary";
	}
	return "invalid";
}

/*
 * This copy became equal to primary: every slot empty; only primary's is
 * tracked (it is where the data came from), the others are unknown.
 */
static int md_adopt_peers(int fd, const struct md_info *mi, const char *primary)
{
	struct md_peers p;
	unsigned int i, mine = DM_REPL_MD_MAX_PEERS;
	int r;

	r = md_peers_read(fd, mi, &p);
	if (r < 0)
		return r;
	r = md_zero(fd, mi->peers_offset + DM_REPL_MD_SB_BYTES,
		    (uint64_t)mi->max_peers * mi->bitmap_bytes);
	if (r < 0)
		return r;
	p.flags &= ~DM_REPL_MD_PEERS_FRESH;
	for (i = 0; i < mi->max_peers; i++) {
		p.slot[i].flags &= ~DM_REPL_MD_SLOT_TRACKED;
		if (primary && (p.slot[i].flags & DM_REPL_MD_SLOT_USED) &&
		    !strcmp(p.slot[i].name, primary))
			mine = i;
	}
	for (i = 0; primary && mine == DM_REPL_MD_MAX_PEERS && i < mi->max_peers; i++)
		if (!(p.slot[i].flags & DM_REPL_MD_SLOT_USED) &&
		    strlen(primary) < DM_REPL_MD_NAME_MAX) {
			mine = i;
			snprintf(p.slot[i].name, sizeof(p.slot[i].name), "%s", primary);
			p.slot[i].flags = DM_REPL_MD_SLOT_USED;
			p.slot[i].since_ms = 0;
		}
	if (mine < mi->max_peers)
		p.slot[mine].flags |= DM_REPL_MD_SLOT_TRACKED;
	return md_peers_write(fd, mi, &p);
}

int md_update(const char *meta_path, const uint64_t *gen, bool clear_bitmap, uint32_t role,
	      const char *primary, char *err, size_t errlen)
{
	struct md_info mi;
	struct dm_repl_md_sb sb;
	uint8_t *block = NULL;
	int fd, r, i;

	r = md_read(meta_path, false, &mi, err, errlen);
	if (r < 0)
		return r;
	fd = md_open_sb(meta_path, &block, err, errlen);
	if (fd < 0)
		return fd;
	if (clear_bitmap) {
		r = md_zero(fd, mi.bitmap_offset, mi.bitmap_bytes);
		if (r == 0)
			r = md_adopt_peers(fd, &mi, primary);
		if (r == 0 && fdatasync(fd) < 0)
			r = -errno;
		if (r < 0)
			goto fail;
	}
	memcpy(&sb, block, sizeof(sb));
	if (gen)
		for (i = 0; i < 4; i++)
			sb.gen[i] = htole64(gen[i]);
	if (role != DM_REPL_MD_ROLE_NONE)
		sb.role = htole32(role);
	sb.events = htole64(le64toh(sb.events) + 1);
	memcpy(block, &sb, sizeof(sb));
	md_block_seal(block);
	r = pwrite_all(fd, block, DM_REPL_MD_SB_BYTES, 0);
	if (r < 0)
		goto fail;
	if (fdatasync(fd) < 0) {
		r = -errno;
		goto fail;
	}
	free(block);
	close(fd);
	return 0;
fail:
	snprintf(err, errlen, "%s: %s", meta_path, strerror(-r));
	free(block);
	close(fd);
	return r;
}
