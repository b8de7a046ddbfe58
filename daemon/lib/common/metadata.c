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

uint64_t md_size_needed(uint64_t dev_sectors, unsigned int region_kb)
{
	return DM_REPL_MD_SB_BYTES + md_bitmap_bytes(dev_sectors, region_kb);
}

static uint64_t md_csum(const uint8_t *block)
{
	uint8_t copy[DM_REPL_MD_SB_BYTES];

	memcpy(copy, block, sizeof(copy));
	memset(copy + offsetof(struct dm_repl_md_sb, csum), 0, 8);
	return XXH64(copy, sizeof(copy), 0);
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

int md_read(const char *meta_path, bool want_bitmap, struct md_info *ret, char *err,
	    size_t errlen)
{
	struct md_info mi = { 0 };
	struct dm_repl_md_sb sb;
	uint8_t *block = NULL;
	uint64_t size;
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
	memcpy(&sb, block, sizeof(sb));
	if (le32toh(sb.magic) != DM_REPL_MD_MAGIC) {
		snprintf(err, errlen, "%s: no dm-repl metadata", meta_path);
		goto out;
	}
	if (le64toh(sb.csum) != md_csum(block)) {
		snprintf(err, errlen, "%s: superblock checksum mismatch (corrupt)", meta_path);
		goto out;
	}
	mi.version = le32toh(sb.version);
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
		snprintf(err, errlen, "%s: region size 2^%u invalid", meta_path, mi.region_shift);
		goto out;
	}
	mi.nr_regions = (mi.dev_sectors * 512 + (1ULL << mi.region_shift) - 1) >> mi.region_shift;
	if (mi.bitmap_bytes < (mi.nr_regions + 7) / 8 ||
	    mi.bitmap_offset + mi.bitmap_bytes > size * 512) {
		snprintf(err, errlen, "%s: bitmap location invalid", meta_path);
		goto out;
	}
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
		for (uint64_t i = 0; i < mi.nr_regions; i++)
			mi.set_regions += (bm[i / 8] >> (i % 8)) & 1;
		mi.bitmap = bm;
	}
	*ret = mi;
	r = 0;
out:
	free(block);
	close(fd);
	return r;
}

int md_create(const char *meta_path, const char *resource, uint64_t dev_sectors,
	      unsigned int region_kb, bool force, char *err, size_t errlen)
{
	struct dm_repl_md_sb sb = { 0 };
	struct md_info old;
	uint8_t block[DM_REPL_MD_SB_BYTES] = { 0 }, zero[65536] = { 0 };
	uint64_t size, bytes = md_bitmap_bytes(dev_sectors, region_kb), off;
	char e[256];
	int fd, r;

	if (strlen(resource) >= DM_REPL_MD_NAME_MAX) {
		snprintf(err, errlen, "resource name too long");
		return -EINVAL;
	}
	if (region_kb < 4 || region_kb > (1U << 20) || (region_kb & (region_kb - 1))) {
		snprintf(err, errlen, "region size %u KiB: a power of 2 from 4 to 1048576",
			 region_kb);
		return -EINVAL;
	}
	if (!force && md_read(meta_path, false, &old, e, sizeof(e)) == 0) {
		snprintf(err, errlen, "%s already holds dm-repl metadata of resource %s (--force overwrites it)",
			 meta_path, old.resource);
		return -EEXIST;
	}
	/* O_EXCL: a block device the kernel uses (a live repl device) is refused */
	fd = open(meta_path, O_RDWR | O_EXCL | O_CLOEXEC);
	if (fd < 0) {
		r = -errno;
		snprintf(err, errlen, "%s: %s%s", meta_path, strerror(-r),
			 r == -EBUSY ? " (in use by a device?)" : "");
		return r;
	}
	r = dmdev_size_sectors(fd, &size);
	if (r < 0 || size * 512 < DM_REPL_MD_SB_BYTES + bytes) {
		snprintf(err, errlen, "%s is too small: %llu KiB needed for a device of %llu sectors with %u KiB regions",
			 meta_path, (unsigned long long)(DM_REPL_MD_SB_BYTES + bytes) >> 10,
			 (unsigned long long)dev_sectors, region_kb);
		close(fd);
		return -ENOSPC;
	}
	sb.magic = htole32(DM_REPL_MD_MAGIC);
	sb.version = htole32(DM_REPL_MD_VERSION);
	sb.flags = htole32(DM_REPL_MD_CLEAN);
	sb.region_shift = htole32((uint32_t)__builtin_ctz(region_kb) + 10);
	sb.dev_sectors = htole64(dev_sectors);
	sb.bitmap_offset = htole64(DM_REPL_MD_SB_BYTES);
	sb.bitmap_bytes = htole64(bytes);
	if (getrandom(sb.uuid, sizeof(sb.uuid), 0) != sizeof(sb.uuid))
		memset(sb.uuid, 0x5a, sizeof(sb.uuid));
	memcpy(sb.resource, resource, strlen(resource));	/* checked < 64, rest is 0 */
	memcpy(block, &sb, sizeof(sb));
	sb.csum = htole64(md_csum(block));
	memcpy(block, &sb, sizeof(sb));
	/* the bitmap first, the superblock last: a torn create is no metadata */
	for (off = 0; off < bytes; off += sizeof(zero)) {
		r = pwrite_all(fd, zero, bytes - off < sizeof(zero) ? bytes - off : sizeof(zero),
			       (off_t)(DM_REPL_MD_SB_BYTES + off));
		if (r < 0)
			goto fail;
	}
	if (fsync(fd) < 0) {
		r = -errno;
		goto fail;
	}
	r = pwrite_all(fd, block, sizeof(block), 0);
	if (r < 0)
		goto fail;
	if (fsync(fd) < 0) {
		r = -errno;
		goto fail;
	}
	close(fd);
	return 0;
fail:
	snprintf(err, errlen, "%s: %s", meta_path, strerror(-r));
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

int md_update(const char *meta_path, const uint64_t *gen, bool clear_bitmap, uint32_t role,
	      char *err, size_t errlen)
{
	struct md_info mi;
	struct dm_repl_md_sb sb;
	uint8_t *block = NULL, zero[65536] = { 0 };
	uint64_t off;
	int fd, r, i;

	r = md_read(meta_path, false, &mi, err, errlen);
	if (r < 0)
		return r;
	fd = open(meta_path, O_RDWR | O_EXCL | O_CLOEXEC);
	if (fd < 0) {
		r = -errno;
		snprintf(err, errlen, "%s: %s%s", meta_path, strerror(-r),
			 r == -EBUSY ? " (in use by a repl device)" : "");
		return r;
	}
	if (posix_memalign((void **)&block, 4096, DM_REPL_MD_SB_BYTES)) {
		close(fd);
		return -ENOMEM;
	}
	if (pread(fd, block, DM_REPL_MD_SB_BYTES, 0) != DM_REPL_MD_SB_BYTES) {
		r = -EIO;
		goto fail;
	}
	if (clear_bitmap) {
		for (off = 0; off < mi.bitmap_bytes; off += sizeof(zero)) {
			r = pwrite_all(fd, zero, mi.bitmap_bytes - off < sizeof(zero) ?
					   mi.bitmap_bytes - off : sizeof(zero),
				       (off_t)(mi.bitmap_offset + off));
			if (r < 0)
				goto fail;
		}
		if (fdatasync(fd) < 0) {
			r = -errno;
			goto fail;
		}
	}
	memcpy(&sb, block, sizeof(sb));
	if (gen)
		for (i = 0; i < 4; i++)
			sb.gen[i] = htole64(gen[i]);
	if (role != DM_REPL_MD_ROLE_NONE)
		sb.role = htole32(role);
	sb.events = htole64(le64toh(sb.events) + 1);
	sb.csum = 0;
	memcpy(block, &sb, sizeof(sb));
	sb.csum = htole64(md_csum(block));
	memcpy(block, &sb, sizeof(sb));
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
