/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * dm-repl: the ring shared between the device-mapper target "repl" and the
 * replication daemon (repld).  This header is the only definition of that
 * ABI; the module, the daemon and the tests all include it.
 *
 * Overview
 * --------
 * Every write that enters a "repl" target is given a sequence number and
 * logged as a fixed-size record (struct dm_repl_rec) in a record array; its
 * payload is copied into a data area.  Userspace opens the misc device
 * /dev/dm-repl, attaches to one repl device with DM_REPL_IOC_ATTACH and maps
 * three regions of the same file:
 *
 *   offset 0            hdr_size bytes   struct dm_repl_ring_hdr   RW
 *   offset rec_offset   nr_recs records  struct dm_repl_rec[]      RO
 *   offset data_offset  data_size bytes  payloads                  RO
 *
 * A writable mapping must be exactly [0, hdr_size); any other range of
 * [0, map_size) may be mapped read-only (rec_offset..map_size in one mmap
 * is the usual way).  All offsets are byte offsets from the start of the
 * mapping; there are no pointers.
 *
 * Sequence numbers are 64 bit and never wrap in practice.  The record with
 * sequence s lives in slot (s & (nr_recs - 1)).  Three consumer indices are
 * written by userspace, one producer index by the kernel:
 *
 *   release_seq <= read_seq <= prod_seq,   ack_seq <= prod_seq
 *
 *   prod_seq     records [release_seq, prod_seq) are valid.  The kernel
 *                stores it with release semantics after the record and its
 *                payload are complete; load it with acquire semantics.
 *   read_seq     records below it have been looked at by the consumer.  Only
 *                used to decide whether the kernel must wake the consumer:
 *                it wakes poll()ers when it publishes a record and read_seq
 *                equals the previous prod_seq (the consumer had caught up).
 *   release_seq  records below it (and their payload bytes) may be reused.
 *   ack_seq      records below it are acknowledged by every peer that needs
 *                an acknowledgment; in sync mode the target completes a
 *                write to the upper layer only when its record is below
 *                ack_seq (and its local write has completed).
 *
 * Userspace stores release_seq/ack_seq with release semantics and then rings
 * the doorbell (DM_REPL_IOC_KICK); the kernel reads them once, and ignores
 * and reports (-EINVAL) a value that goes backwards or beyond prod_seq.
 * Userspace must treat every field the kernel writes as the kernel's.
 *
 * Sequence numbers start at 0 when the device is created.  A consumer that
 * attaches finds read_seq = release_seq = the oldest record not released,
 * ack_seq = the kernel's acknowledged index, and state_seen = state_seq - 1
 * (so EPOLLPRI fires at once and it reads the state).  release_seq above
 * read_seq is allowed (read_seq only steers wake-ups).
 *
 * poll(): EPOLLIN when prod_seq > read_seq, EPOLLPRI when state_seq !=
 * state_seen, EPOLLHUP when the device is gone (the ring stays mapped and
 * readable), EPOLLERR before ATTACH.
 *
 * Payloads: a WRITE's payload is contiguous in the data area (it never
 * wraps), starts at a multiple of 512 bytes, and data_len == nr_sectors *
 * 512.  Other records have data_len == 0.  A write is cut into several
 * records at multiples of the target's record_kb (a power of 2, at most
 * DM_REPL_MAX_RECORD_KB, default 256 KiB) on the device: the records of
 * one write have consecutive sequence numbers, in sector order.
 *
 * Flush and epochs: an empty REQ_PREFLUSH becomes a DM_REPL_OP_FLUSH record
 * that closes epoch e (its epoch field is e); later records carry e + 1.
 * hdr.epoch is the current (open) epoch.  A flush that arrives while the
 * ring is in overflow is not logged and does not advance the epoch.
 *
 * Overflow: when the ring stays full longer than the target's
 * hold_timeout_ms, the target stops logging, marks the regions of unlogged
 * writes in a dirty bitmap (DM_REPL_IOC_GET_DIRTY) and sets
 * DM_REPL_STATE_OVERFLOW.  When the consumer has released every record, the
 * target logs a DM_REPL_OP_GAP record and resumes logging: records after a
 * GAP do not include the writes the dirty bitmap stands for.
 */
#ifndef _UAPI_LINUX_DM_REPL_H
#define _UAPI_LINUX_DM_REPL_H

#include <linux/types.h>
#include <linux/ioctl.h>

#define DM_REPL_MAGIC		0x4c504552U	/* "REPL" in little endian */
#define DM_REPL_ABI_VERSION	2U
#define DM_REPL_MISC_NAME	"dm-repl"	/* /dev/dm-repl */

/* hdr.features: what this kernel implements */
#define DM_REPL_FEAT_RO_DATA	(1ULL << 0) /* records and payload map read-only */
#define DM_REPL_FEAT_ACK	(1ULL << 1) /* ack_seq gates sync completions */
#define DM_REPL_FEAT_GAP	(1ULL << 2) /* GAP record after an overflow */
#define DM_REPL_FEAT_DIRTY	(1ULL << 3) /* DM_REPL_IOC_GET_DIRTY */
#define DM_REPL_FEAT_RESYNC	(1ULL << 4) /* local_seq, MARK/CLEAR_DIRTY */
#define DM_REPL_FEATURES	(DM_REPL_FEAT_RO_DATA | DM_REPL_FEAT_ACK | \
				 DM_REPL_FEAT_GAP | DM_REPL_FEAT_DIRTY | \
				 DM_REPL_FEAT_RESYNC)

/* hdr.state bits (kernel-written; a copy of what dmsetup status shows) */
#define DM_REPL_STATE_SYNC	(1U << 0) /* target mode is sync */
#define DM_REPL_STATE_DEGRADED	(1U << 1) /* sync hold timed out: acting async */
#define DM_REPL_STATE_OVERFLOW	(1U << 2) /* ring full: writes go to the bitmap */
#define DM_REPL_STATE_DIRTY	(1U << 3) /* dirty bitmap has regions set */

#define DM_REPL_CACHELINE	64

struct dm_repl_ring_hdr {
	/* line 0: identity and geometry, written once by the kernel */
	__u32 magic;		/* DM_REPL_MAGIC */
	__u32 abi_version;	/* DM_REPL_ABI_VERSION */
	__u64 features;		/* DM_REPL_FEAT_* */
	__u32 hdr_size;		/* bytes at offset 0, mapped read-write */
	__u32 rec_size;		/* sizeof(struct dm_repl_rec) */
	__u32 nr_recs;		/* record slots, a power of two */
	__u32 region_shift;	/* log2(bytes per dirty-bitmap region) */
	__u64 rec_offset;	/* offset of the record array */
	__u64 data_offset;	/* offset of the data area */
	__u64 data_size;	/* bytes in the data area */
	/*
	 * Size of the repl device, 512-byte sectors.  It grows when a longer
	 * table resumes (dm-repl(7) RESIZE), set before the first record past
	 * the old end is published; it never shrinks.
	 */
	__u64 dev_sectors;

	/* line 1: producer, written by the kernel only */
	__u64 prod_seq;		/* store-release; see above */
	__u64 epoch;		/* current (open) epoch */
	__u32 state;		/* DM_REPL_STATE_* */
	__u32 state_seq;	/* bumped on every state change (EPOLLPRI) */
	__u64 dirty_regions;	/* number of bits set in the dirty bitmap */
	__u64 overflows;	/* times the ring overflowed */
	__u64 hold_timeouts;	/* sync writes released without an ack */
	__u64 released_seq;	/* release_seq as last accepted by the kernel */
	__u64 acked_seq;	/* ack_seq as last accepted by the kernel */

	/* line 2: consumer, written by userspace only */
	__u64 read_seq;
	__u64 release_seq;
	__u64 ack_seq;
	__u32 state_seen;	/* last state_seq the consumer handled */
	__u32 __upad0;
	__u64 __upad[4];

	/*
	 * line 3: more identity, written once by the kernel.  ring_id is
	 * random and new for every ring: sequence numbers are meaningful only
	 * together with it.
	 */
	__u64 ring_id;
	__u64 __ipad[7];

	/*
	 * line 4: resync support, written by the kernel only.  Every record
	 * below local_seq has completed its local write (a resync may read
	 * the device and see them).  dirty_gen changes whenever a region is
	 * marked dirty; DM_REPL_IOC_CLEAR_DIRTY takes it back.
	 */
	__u64 local_seq;
	__u64 dirty_gen;
	__u64 __kpad[6];
};

/* Record operations */
#define DM_REPL_OP_WRITE	1	/* payload: data_len bytes at data_offset */
#define DM_REPL_OP_FLUSH	2	/* closes epoch rec.epoch; no extent */
#define DM_REPL_OP_DISCARD	3	/* extent, no payload */
#define DM_REPL_OP_WRITE_ZEROES	4	/* extent, no payload */
#define DM_REPL_OP_GAP		5	/* writes were not logged: see bitmap */

/* Record flags */
#define DM_REPL_F_FUA		(1U << 0) /* durable before acknowledged */
#define DM_REPL_F_SYNC		(1U << 1) /* target held the bio for an ack */

struct dm_repl_rec {
	__u64 seq;
	__u64 sector;		/* first 512-byte sector on the device */
	__u32 nr_sectors;	/* extent length in sectors (0 for FLUSH/GAP) */
	__u16 op;		/* DM_REPL_OP_* */
	__u16 flags;		/* DM_REPL_F_* */
	__u64 epoch;
	__u64 data_offset;	/* offset of the payload inside the data area */
	__u32 data_len;		/* payload bytes (WRITE only, else 0) */
	__u32 __pad0;
	__u64 __pad1[2];
};

/*
 * DM_REPL_IOC_ATTACH: become the one consumer of a repl device's ring.
 * Needs CAP_SYS_ADMIN (EPERM otherwise), as dm's own ioctls do.
 */
struct dm_repl_attach {
	__u32 dev_major;	/* in: the repl device (st_rdev of /dev/dm-N) */
	__u32 dev_minor;
	__u32 flags;		/* in: must be 0 */
	__u32 __pad;		/* in: must be 0 */
	__u64 map_size;		/* out: bytes of the whole mapping */
	__u64 hdr_size;		/* out: bytes of the read-write header */
};

/* DM_REPL_IOC_GET_DIRTY: copy out the dirty bitmap (little-endian bit order,
 * bit i of byte j is region j*8+i).  bitmap == 0 asks for the counts only;
 * a buffer smaller than (nr_regions + 7) / 8 bytes fails with ENOSPC (the
 * device may have grown since the consumer read the size).
 * The kernel copies a large bitmap in pieces: dirty_regions and dirty_gen
 * are those of when the copy began, and the copy holds every region dirty
 * then (and maybe some marked during the copy, which changes dirty_gen).
 */
struct dm_repl_dirty {
	__u64 bitmap;		/* in: user address of the buffer, or 0 */
	__u64 bitmap_bytes;	/* in: buffer size */
	__u64 nr_regions;	/* out */
	__u64 region_bytes;	/* out */
	__u64 dirty_regions;	/* out: bits set when the copy began */
	__u64 dirty_gen;	/* out: generation when the copy began */
};

/*
 * DM_REPL_IOC_MARK_DIRTY: mark regions [first, first + count) out of sync
 * (the consumer dropped records a peer did not get; a verify found them
 * different).  gen and flags must be 0.
 * DM_REPL_IOC_CLEAR_DIRTY: a resync made them equal everywhere: clear
 * them, unless a region was marked since the bitmap copy of generation gen
 * was taken: then EAGAIN, and the regions stay dirty from the piece of the
 * range where the kernel found the generation changed on (a large range is
 * cleared in pieces; those cleared before were not marked since the copy,
 * so they are in sync).  flags must be 0.
 */
struct dm_repl_regions {
	__u64 first;
	__u64 count;
	__u64 gen;
	__u32 flags;
	__u32 __pad;
};

/*
 * The metadata device (<meta_dev> in the table), little endian:
 *
 *   bytes [0, 4096)                          struct dm_repl_md_sb, the rest 0
 *   [bitmap_offset, +bitmap_bytes)           the bitmap, one bit per region,
 *                                            bit i of byte j is region 8j+i
 *   [peers_offset, +4096)                    struct dm_repl_md_peers
 *   [peers_offset + 4096 + s * bitmap_bytes, +bitmap_bytes)
 *                                            the bitmap of peer slot s
 *
 * A set bit means the region may differ between this device and a peer: a
 * write to it may not have reached every peer (set durably before the
 * first write to a clean region, cleared lazily once the peers have it),
 * or it is known to be out of sync (ring overflow, unacknowledged sync
 * write, unclean shutdown).  csum is xxh64 (seed 0) of the 4096-byte block
 * with csum set to 0.  Written by "replctl create-md", then by the target.
 *
 * That bitmap stands for every peer.  The peer area (format version 2)
 * belongs to the daemon, which the target never reads or writes: one
 * bitmap per peer slot, the regions that one peer lacks (records released
 * without it, its own changes as a former primary, a verify's findings).
 * A peer needs the union of the target's bitmap and its slot's; no clear
 * for one peer touches another's slot.
 */
#define DM_REPL_MD_MAGIC	0x444d5052U	/* "RPMD" in little endian */
#define DM_REPL_MD_VERSION	2U	/* 1: no peer area (replctl upgrade-md) */
#define DM_REPL_MD_SB_BYTES	4096U
#define DM_REPL_MD_BITMAP_ALIGN	4096U
/*
 * Regions per write-intent extent (table feature extent_kb) at most: an
 * extent never spans a 4 KiB page of the bitmap.
 */
#define DM_REPL_MAX_EXTENT_REGIONS	32768U
/* Defaults of extent_kb (or region_kb when larger) and max_extents (DRBD's al-extents). */
#define DM_REPL_DEFAULT_EXTENT_KB	4096U
#define DM_REPL_DEFAULT_MAX_EXTENTS	1237U
/*
 * Largest payload of one record (table feature record_kb, a power of 2):
 * the target splits longer writes into records of at most this much.
 */
#define DM_REPL_MIN_RECORD_KB		4U
#define DM_REPL_MAX_RECORD_KB		1024U
#define DM_REPL_DEFAULT_RECORD_KB	256U
#define DM_REPL_MD_NAME_MAX	64U

/* sb.flags */
#define DM_REPL_MD_CLEAN	(1U << 0) /* no write was in flight at shutdown */
/* role: what the node that last wrote the superblock was */
#define DM_REPL_MD_ROLE_NONE		0	/* fresh from create-md */
#define DM_REPL_MD_ROLE_PRIMARY		1	/* the repl target used it */
#define DM_REPL_MD_ROLE_SECONDARY	2	/* repld as a secondary updated it */

struct dm_repl_md_sb {
	__le32 magic;
	__le32 version;
	__le64 csum;
	__le32 flags;
	__le32 region_shift;	/* log2 of the region size in bytes */
	__le64 dev_sectors;	/* size of the data device it describes */
	__le64 bitmap_offset;	/* bytes from the start of the device */
	/*
	 * A multiple of DM_REPL_MD_BITMAP_ALIGN, at least the bitmap of
	 * dev_sectors: the rest is room for the device to grow into
	 */
	__le64 bitmap_bytes;
	__u8 uuid[16];		/* random at creation */
	char resource[DM_REPL_MD_NAME_MAX];	/* the dm device's name, NUL padded */
	__le64 events;		/* bumped on every superblock write */
	/*
	 * generation identifiers, for the daemon: current, bitmap, history,
	 * since (docs/metadata.md); the kernel stores them (message set_gens)
	 * and does not interpret them
	 */
	__le64 gen[4];
	__le32 role;		/* DM_REPL_MD_ROLE_* */
	__le32 __pad;
	/* version 2: the peer area, after the bitmap, 4096-aligned */
	__le64 peers_offset;
	__le32 max_peers;	/* 1 .. DM_REPL_MD_MAX_PEERS */
	__le32 __pad2;
};

/*
 * The peer area's first block (daemon-owned; csum as for the superblock,
 * over its own 4096 bytes).  A used slot belongs to the peer of that name.
 * TRACKED: every region the peer may lack since it was last in sync is in
 * its slot's bitmap (or in the target's); without it the slot's peer
 * needs a full sync.  FRESH (table flag): no slot was handed out since the
 * metadata was created, so the first ones are tracked from the start.
 */
#define DM_REPL_MD_PEERS_MAGIC		0x54505052U	/* "RPPT" */
#define DM_REPL_MD_PEERS_VERSION	1U
#define DM_REPL_MD_MAX_PEERS		32U
#define DM_REPL_MD_PEERS_FRESH		(1U << 0)
#define DM_REPL_MD_SLOT_USED		(1U << 0)
#define DM_REPL_MD_SLOT_TRACKED		(1U << 1)
#define DM_REPL_MD_DEFAULT_PEERS	4U

struct dm_repl_md_slot {
	char name[DM_REPL_MD_NAME_MAX];	/* the peer's node name, NUL padded */
	__le32 flags;			/* DM_REPL_MD_SLOT_* */
	__le32 __pad;
	__le64 since_ms;		/* when it was handed out (ms since the epoch) */
};

struct dm_repl_md_peers {
	__le32 magic;
	__le32 version;
	__le64 csum;
	__le32 flags;			/* DM_REPL_MD_PEERS_* */
	__le32 max_peers;		/* as in the superblock */
	__le64 events;			/* bumped on every write of this block */
	struct dm_repl_md_slot slot[DM_REPL_MD_MAX_PEERS];
};

#define DM_REPL_IOC_MAGIC	0xDE
#define DM_REPL_IOC_ATTACH	_IOWR(DM_REPL_IOC_MAGIC, 0x00, struct dm_repl_attach)
#define DM_REPL_IOC_KICK	_IO(DM_REPL_IOC_MAGIC, 0x01)
#define DM_REPL_IOC_GET_DIRTY	_IOWR(DM_REPL_IOC_MAGIC, 0x02, struct dm_repl_dirty)
#define DM_REPL_IOC_MARK_DIRTY	_IOW(DM_REPL_IOC_MAGIC, 0x03, struct dm_repl_regions)
#define DM_REPL_IOC_CLEAR_DIRTY	_IOW(DM_REPL_IOC_MAGIC, 0x04, struct dm_repl_regions)

#endif /* _UAPI_LINUX_DM_REPL_H */
