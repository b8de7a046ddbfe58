/* SPDX-License-Identifier: GPL-2.0 */
/*
 * dm-repl internals shared by the target (dm-repl-target.c) and the ring
 * (dm-repl-ring.c).  The ABI seen by userspace is in
 * include/uapi/linux/dm-repl.h.
 */
#ifndef DM_REPL_CORE_H
#define DM_REPL_CORE_H

#include <linux/types.h>
#include <linux/bits.h>
#include <linux/list.h>
#include <linux/bio.h>
#include <linux/device-mapper.h>
#include <linux/dm-repl.h>

#define DM_MSG_PREFIX "repl"

/* Largest bio the target accepts; dm core splits bigger ones for us. */
#define REPL_MAX_IO_SECTORS	2048U		/* 1 MiB */
#define REPL_PAYLOAD_ALIGN	512U

/*
 * A sync write is released from degraded mode once the consumer has
 * acknowledged all but this many records ("caught up").
 */
#define REPL_CATCHUP_RECORDS	64U

enum repl_mode {
	REPL_MODE_ASYNC = 0,
	REPL_MODE_SYNC = 1,
};

/*
 * Payloads of at least this size are copied into the ring by a worker,
 * while the local write runs; smaller ones are copied inline in .map.
 */
#define REPL_COPY_OFFLOAD_BYTES	(64U << 10)

/* Per-bio state, in the space dm reserves with ti->per_io_data_size. */
struct repl_bio {
	u64 seq;
	sector_t sector;
	u32 nr_sectors;
	u32 flags;			/* RB_*, under ring->lock once logged */
	unsigned long deadline;		/* jiffies: give up waiting for the ack */
	const enum repl_mode *mode;	/* the mode of the target that mapped it */
	struct repl_ring *ring;
	struct list_head held;		/* ring->held, under ring->lock */
	struct bvec_iter iter;		/* payload, for the copy worker */
	u64 data_off;
	struct work_struct copy_work;
};

#define RB_LOGGED	BIT(0)	/* has a record in the ring */
#define RB_HELD		BIT(1)	/* completion held for an ack */
#define RB_RELEASED	BIT(2)	/* held and then released: complete */
#define RB_UNLOGGED	BIT(3)	/* not logged: region marked dirty */
#define RB_COPIED	BIT(4)	/* payload is in the ring */
#define RB_LOCAL_DONE	BIT(5)	/* local write done, waiting for the copy */

struct repl_ring;

/* One "repl" target (one per table: the target is a singleton). */
struct repl_c {
	struct dm_target *ti;
	struct dm_dev *dev;
	struct repl_ring *ring;
	enum repl_mode mode;		/* changed under the ring lock */
	unsigned int ring_size_mb;
	unsigned int hold_timeout_ms;
	unsigned int region_kb;
	struct list_head ring_node;	/* ring->targets, under ring->tmutex */
};

struct repl_ring_geometry {
	u64 data_size;		/* bytes */
	u64 dev_sectors;
	u32 region_shift;	/* log2 of the region size in bytes */
};

struct repl_ring_stats {
	u64 prod_seq;
	u64 released;
	u64 acked;
	u64 data_used;
	u64 data_size;
	u64 recs_used;
	u32 nr_recs;
	u32 state;
	u64 bytes_logged;
	u64 dirty_regions;
	u64 region_bytes;
	u64 overflows;
	u64 hold_timeouts;
	u64 bad_updates;
	unsigned int nr_held;
	bool consumer;
};

/* dm-repl-ring.c */
int repl_ring_get(dev_t devt, const struct repl_ring_geometry *geo,
		  struct repl_c *rc, struct repl_ring **ret, char **error);
void repl_ring_put(struct repl_ring *ring, struct repl_c *rc);
void repl_ring_log(struct repl_ring *ring, struct bio *bio,
		   struct repl_bio *pb, u16 op, u16 flags,
		   unsigned int timeout_ms);
int repl_ring_end_io(struct repl_ring *ring, struct repl_bio *pb,
		     blk_status_t error);
void repl_ring_set_mode(struct repl_ring *ring, enum repl_mode *mode,
			enum repl_mode new_mode);
void repl_ring_stats(struct repl_ring *ring, struct repl_ring_stats *st);
int repl_ring_init(void);
void repl_ring_exit(void);

#endif /* DM_REPL_CORE_H */
