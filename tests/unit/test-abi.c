// SPDX-License-Identifier: GPL-2.0-only
/*
 * Pin the layout of <linux/dm-repl.h>: every offset and size the kernel
 * (BUILD_BUG_ON in dm-repl-ring.c) and the daemon rely on.  The checks are
 * compile-time; main() prints the layout for the test log.
 */
#include <stddef.h>
#include <stdio.h>
#include <sys/ioctl.h>

#include <linux/dm-repl.h>

#define OFF(type, field, off) \
	_Static_assert(offsetof(struct type, field) == (off), \
		       #type "." #field " at " #off)
#define FSIZE(type, field, size) \
	_Static_assert(sizeof(((struct type *)0)->field) == (size), \
		       #type "." #field " is " #size " bytes")
#define FIELD(type, field, off, size) OFF(type, field, off); FSIZE(type, field, size)

/* struct dm_repl_ring_hdr: five cache lines */
_Static_assert(DM_REPL_CACHELINE == 64, "cache line");
_Static_assert(sizeof(struct dm_repl_ring_hdr) == 320, "hdr is 320 bytes");
/* line 0: identity and geometry */
FIELD(dm_repl_ring_hdr, magic, 0, 4);
FIELD(dm_repl_ring_hdr, abi_version, 4, 4);
FIELD(dm_repl_ring_hdr, features, 8, 8);
FIELD(dm_repl_ring_hdr, hdr_size, 16, 4);
FIELD(dm_repl_ring_hdr, rec_size, 20, 4);
FIELD(dm_repl_ring_hdr, nr_recs, 24, 4);
FIELD(dm_repl_ring_hdr, region_shift, 28, 4);
FIELD(dm_repl_ring_hdr, rec_offset, 32, 8);
FIELD(dm_repl_ring_hdr, data_offset, 40, 8);
FIELD(dm_repl_ring_hdr, data_size, 48, 8);
FIELD(dm_repl_ring_hdr, dev_sectors, 56, 8);
/* line 1: producer */
FIELD(dm_repl_ring_hdr, prod_seq, 64, 8);
FIELD(dm_repl_ring_hdr, epoch, 72, 8);
FIELD(dm_repl_ring_hdr, state, 80, 4);
FIELD(dm_repl_ring_hdr, state_seq, 84, 4);
FIELD(dm_repl_ring_hdr, dirty_regions, 88, 8);
FIELD(dm_repl_ring_hdr, overflows, 96, 8);
FIELD(dm_repl_ring_hdr, hold_timeouts, 104, 8);
FIELD(dm_repl_ring_hdr, released_seq, 112, 8);
FIELD(dm_repl_ring_hdr, acked_seq, 120, 8);
/* line 2: consumer */
FIELD(dm_repl_ring_hdr, read_seq, 128, 8);
FIELD(dm_repl_ring_hdr, release_seq, 136, 8);
FIELD(dm_repl_ring_hdr, ack_seq, 144, 8);
FIELD(dm_repl_ring_hdr, state_seen, 152, 4);
FIELD(dm_repl_ring_hdr, __upad0, 156, 4);
FIELD(dm_repl_ring_hdr, __upad, 160, 32);
/* line 3: identity */
FIELD(dm_repl_ring_hdr, ring_id, 192, 8);
FIELD(dm_repl_ring_hdr, __ipad, 200, 56);
/* line 4: resync support */
FIELD(dm_repl_ring_hdr, local_seq, 256, 8);
FIELD(dm_repl_ring_hdr, dirty_gen, 264, 8);
FIELD(dm_repl_ring_hdr, __kpad, 272, 48);
_Static_assert(offsetof(struct dm_repl_ring_hdr, prod_seq) % DM_REPL_CACHELINE == 0,
	       "producer line starts a cache line");
_Static_assert(offsetof(struct dm_repl_ring_hdr, read_seq) % DM_REPL_CACHELINE == 0,
	       "consumer line starts a cache line");

/* struct dm_repl_rec: one cache line */
_Static_assert(sizeof(struct dm_repl_rec) == 64, "rec is 64 bytes");
FIELD(dm_repl_rec, seq, 0, 8);
FIELD(dm_repl_rec, sector, 8, 8);
FIELD(dm_repl_rec, nr_sectors, 16, 4);
FIELD(dm_repl_rec, op, 20, 2);
FIELD(dm_repl_rec, flags, 22, 2);
FIELD(dm_repl_rec, epoch, 24, 8);
FIELD(dm_repl_rec, data_offset, 32, 8);
FIELD(dm_repl_rec, data_len, 40, 4);
FIELD(dm_repl_rec, __pad0, 44, 4);
FIELD(dm_repl_rec, __pad1, 48, 16);

/* struct dm_repl_attach */
_Static_assert(sizeof(struct dm_repl_attach) == 32, "attach is 32 bytes");
FIELD(dm_repl_attach, dev_major, 0, 4);
FIELD(dm_repl_attach, dev_minor, 4, 4);
FIELD(dm_repl_attach, flags, 8, 4);
FIELD(dm_repl_attach, __pad, 12, 4);
FIELD(dm_repl_attach, map_size, 16, 8);
FIELD(dm_repl_attach, hdr_size, 24, 8);

/* struct dm_repl_dirty */
_Static_assert(sizeof(struct dm_repl_dirty) == 48, "dirty is 48 bytes");
FIELD(dm_repl_dirty, bitmap, 0, 8);
FIELD(dm_repl_dirty, bitmap_bytes, 8, 8);
FIELD(dm_repl_dirty, nr_regions, 16, 8);
FIELD(dm_repl_dirty, region_bytes, 24, 8);
FIELD(dm_repl_dirty, dirty_regions, 32, 8);
FIELD(dm_repl_dirty, dirty_gen, 40, 8);

/* struct dm_repl_regions */
_Static_assert(sizeof(struct dm_repl_regions) == 32, "regions is 32 bytes");
FIELD(dm_repl_regions, first, 0, 8);
FIELD(dm_repl_regions, count, 8, 8);
FIELD(dm_repl_regions, gen, 16, 8);
FIELD(dm_repl_regions, flags, 24, 4);
FIELD(dm_repl_regions, __pad, 28, 4);

/* constants */
_Static_assert(DM_REPL_MAGIC == 0x4c504552U, "magic is \"REPL\"");
_Static_assert(DM_REPL_ABI_VERSION == 2, "ABI version 2");
_Static_assert(DM_REPL_FEATURES == 0x1f, "features");
_Static_assert(DM_REPL_OP_WRITE == 1 && DM_REPL_OP_FLUSH == 2 &&
	       DM_REPL_OP_DISCARD == 3 && DM_REPL_OP_WRITE_ZEROES == 4 &&
	       DM_REPL_OP_GAP == 5, "ops");
_Static_assert(DM_REPL_F_FUA == 1 && DM_REPL_F_SYNC == 2, "flags");
_Static_assert(DM_REPL_STATE_SYNC == 1 && DM_REPL_STATE_DEGRADED == 2 &&
	       DM_REPL_STATE_OVERFLOW == 4 && DM_REPL_STATE_DIRTY == 8, "states");

/* ioctls: the parts on every architecture ... */
#define IOC(ioc, dir, nr, size, text) \
	_Static_assert(_IOC_TYPE(ioc) == 0xDE && _IOC_NR(ioc) == (nr) && \
		       _IOC_SIZE(ioc) == (size) && _IOC_DIR(ioc) == (dir), text)
IOC(DM_REPL_IOC_ATTACH, _IOC_READ | _IOC_WRITE, 0x00, 32, "ATTACH is _IOWR(0xDE, 0, 32 bytes)");
IOC(DM_REPL_IOC_KICK, _IOC_NONE, 0x01, 0, "KICK is _IO(0xDE, 1)");
IOC(DM_REPL_IOC_GET_DIRTY, _IOC_READ | _IOC_WRITE, 0x02, 48,
    "GET_DIRTY is _IOWR(0xDE, 2, 48 bytes)");
IOC(DM_REPL_IOC_MARK_DIRTY, _IOC_WRITE, 0x03, 32, "MARK_DIRTY is _IOW(0xDE, 3, 32 bytes)");
IOC(DM_REPL_IOC_CLEAR_DIRTY, _IOC_WRITE, 0x04, 32, "CLEAR_DIRTY is _IOW(0xDE, 4, 32 bytes)");
/* ... and the numbers with the asm-generic encoding (x86, arm, riscv) */
#if defined(__x86_64__) || defined(__i386__) || defined(__aarch64__) || \
	defined(__arm__) || defined(__riscv)
_Static_assert(DM_REPL_IOC_ATTACH == 0xc020de00U, "ATTACH number");
_Static_assert(DM_REPL_IOC_KICK == 0x0000de01U, "KICK number");
_Static_assert(DM_REPL_IOC_GET_DIRTY == 0xc030de02U, "GET_DIRTY number");
_Static_assert(DM_REPL_IOC_MARK_DIRTY == 0x4020de03U, "MARK_DIRTY number");
_Static_assert(DM_REPL_IOC_CLEAR_DIRTY == 0x4020de04U, "CLEAR_DIRTY number");
#endif

#define PRINT_FIELD(type, field) \
	printf("  %-28s offset %3zu size %2zu\n", #type "." #field, \
	       offsetof(struct type, field), sizeof(((struct type *)0)->field))

int main(void)
{
	printf("struct dm_repl_ring_hdr: %zu bytes\n", sizeof(struct dm_repl_ring_hdr));
	PRINT_FIELD(dm_repl_ring_hdr, magic);
	PRINT_FIELD(dm_repl_ring_hdr, features);
	PRINT_FIELD(dm_repl_ring_hdr, rec_offset);
	PRINT_FIELD(dm_repl_ring_hdr, dev_sectors);
	PRINT_FIELD(dm_repl_ring_hdr, prod_seq);
	PRINT_FIELD(dm_repl_ring_hdr, hold_timeouts);
	PRINT_FIELD(dm_repl_ring_hdr, read_seq);
	PRINT_FIELD(dm_repl_ring_hdr, release_seq);
	PRINT_FIELD(dm_repl_ring_hdr, ack_seq);
	PRINT_FIELD(dm_repl_ring_hdr, state_seen);
	printf("struct dm_repl_rec: %zu bytes\n", sizeof(struct dm_repl_rec));
	PRINT_FIELD(dm_repl_rec, seq);
	PRINT_FIELD(dm_repl_rec, nr_sectors);
	PRINT_FIELD(dm_repl_rec, op);
	PRINT_FIELD(dm_repl_rec, flags);
	PRINT_FIELD(dm_repl_rec, epoch);
	PRINT_FIELD(dm_repl_rec, data_offset);
	PRINT_FIELD(dm_repl_rec, data_len);
	printf("struct dm_repl_attach: %zu bytes\n", sizeof(struct dm_repl_attach));
	printf("struct dm_repl_dirty: %zu bytes\n", sizeof(struct dm_repl_dirty));
	printf("DM_REPL_IOC_ATTACH    0x%08x\n", (unsigned int)DM_REPL_IOC_ATTACH);
	printf("DM_REPL_IOC_KICK      0x%08x\n", (unsigned int)DM_REPL_IOC_KICK);
	printf("DM_REPL_IOC_GET_DIRTY 0x%08x\n", (unsigned int)DM_REPL_IOC_GET_DIRTY);
	return 0;
}
