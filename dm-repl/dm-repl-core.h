/* SPDX-License-Identifier: GPL-2.0 */
/*
 * dm-repl internals shared by the target (dm-repl-target.c), the ring
 * (dm-repl-ring.c), /dev/dm-repl (dm-repl-dev.c) and the metadata device
 * (dm-repl-meta.c).  The ABI seen by userspace is in
 * include/uapi/linux/dm-repl.h.
 */
#ifndef DM_REPL_CORE_H
#define DM_REPL_CORE_H

#include <linux/types.h>
#include <linux/bits.h>
#include <linux/bitops.h>
#include <linux/list.h>
#include <linux/bio.h>
#include <linux/kref.h>
#include <linux/mutex.h>
#include <linux/rwsem.h>
#include <linux/spinlock.h>
#include <linux/wait.h>
#include <linux/workqueue.h>
#include <linux/dm-ioctl.h>
#include <linux/device-mapper.h>
#include <linux/dm-repl.h>

#define DM_MSG_PREFIX "repl"

#define REPL_PAYLOAD_ALIGN	512U

/*
 * A sync write is released from degraded mode once the consumer has
 * acknowledged all but this many records ("caught up").
 */
#define REPL_CATCHUP_RECORDS	64U

/*
 * Work on a bitmap of regions under a spinlock with interrupts off is cut
 * into pieces of REPL_CHUNK_WORDS words of bitmap (16 KiB, 131072 regions
 * on 64-bit), tens of microseconds each, with the lock dropped (and
 * cond_resched() where the context may sleep) between pieces: on a 16 TiB
 * device with 4 KiB regions a bitmap is 2^32 bits, 512 MiB, and one pass
 * over it takes a second or more.  Loops over such pieces go a word at a
 * time, never a region at a time.
 */
#define REPL_CHUNK_WORDS	2048U
#define REPL_CHUNK_BITS		((u64)REPL_CHUNK_WORDS * BITS_PER_LONG)

/*
 * The bits of bitmap word @w that lie in [@lo, @hi); the word must overlap
 * the range.  The kernel's bitmap helpers take unsigned int bit numbers,
 * too small for such bitmaps, so the module's range loops use this.
 */
static inline unsigned long repl_word_mask(u64 w, u64 lo, u64 hi)
{
	u64 first = w * BITS_PER_LONG;
	unsigned long mask = ~0UL;

	if (lo > first)
		mask &= ~0UL << (lo - first);
	if (hi < first + BITS_PER_LONG)
		mask &= ~0UL >> (first + BITS_PER_LONG - hi);
	return mask;
}

/* Set (or clear) bits [lo, hi) of @map; returns how many changed. */
static inline u64 repl_bitmap_change_count(unsigned long *map, u64 lo, u64 hi, bool set)
{
	unsigned long mask, old;
	u64 w, n = 0;

	if (lo >= hi)
		return 0;
	for (w = lo / BITS_PER_LONG; w * BITS_PER_LONG < hi; w++) {
		mask = repl_word_mask(w, lo, hi);
		old = map[w];
		map[w] = set ? old | mask : old & ~mask;
		n += hweight_long(old ^ map[w]);
	}
	return n;
}

static inline u64 repl_bitmap_set_count(unsigned long *map, u64 lo, u64 hi)
{
	return repl_bitmap_change_count(map, lo, hi, true);
}

static inline u64 repl_bitmap_clear_count(unsigned long *map, u64 lo, u64 hi)
{
	return repl_bitmap_change_count(map, lo, hi, false);
}

enum repl_mode {
	REPL_MODE_ASYNC = 0,
	REPL_MODE_SYNC = 1,
};

/*
 * Payloads of at least this size are copied into the ring by a worker,
 * while the local write runs; smaller ones are copied inline in .map.
 */
#define REPL_COPY_OFFLOAD_BYTES	(64U << 10)

/*
 * The target's max_io_len: dm core splits reads and writes at this size
 * (1 MiB).  The ring's record_kb is independent of it: a write spanning
 * several records stays one bio, so the local write is never cut to the
 * ring's record size.  Discards and write-zeroes are not split at
 * max_io_len (6.1's __send_changing_extent_only() splits them only at the
 * target's end): they come as large as the data device's discard and
 * write-zeroes limits allow, up to 4 GiB per bio (bi_size is 32 bits),
 * and a blkdiscard of a whole device arrives as a stream of such bios.
 */
#define REPL_MAX_IO_SECTORS	(DM_REPL_MAX_RECORD_KB << 1)

/*
 * Per-bio state, in the space dm reserves with ti->per_io_data_size.  A
 * logged write owns the records [seq, seq + nr_recs): one per record_kb
 * piece, in sector order, published one by one as their payloads land.
 */
struct repl_bio {
	u64 seq;			/* its first record */
	sector_t sector;
	u32 nr_sectors;
	u32 nr_recs;
	u32 nr_copied;			/* records copied, under ring->lock */
	u32 rec_sectors;		/* record_kb in sectors, a power of 2 */
	u32 flags;			/* RB_*, under ring->lock once logged */
	unsigned long mapped;		/* jiffies when mapped */
	unsigned long hold_jiffies;	/* hold_timeout_ms when mapped */
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
#define RB_COPIED	BIT(4)	/* every payload is in the ring */
#define RB_LOCAL_DONE	BIT(5)	/* local write done, waiting for the copy */
#define RB_LOCAL_MARKED	BIT(6)	/* local completion counted */
#define RB_META_WAIT	BIT(7)	/* record unpublished until its bits are durable */

struct repl_meta;

/* The ring of one mapped device (dm-repl-ring.c), shared by its targets. */
struct repl_ring {
	struct kref kref;
	struct list_head node;		/* repl_rings */
	dev_t devt;
	bool dead;			/* no target left: consumer sees HUP */
	bool consumer;			/* a file is attached */
	struct workqueue_struct *wq;	/* the module's: events, hold timeout */
	struct workqueue_struct *copy_wq;	/* the module's: payload copies */

	struct mutex tmutex;		/* protects targets, nr_targets */
	/*
	 * Held for write while the device grows (repl_ring_grow_commit());
	 * for read by the consumer's bitmap calls, which then see one size.
	 */
	struct rw_semaphore resize_sem;
	struct list_head targets;	/* struct repl_c, ring_node */
	unsigned int nr_targets;

	/* the shared area: header page | records | data */
	void *area;
	size_t area_size;
	struct dm_repl_ring_hdr *hdr;
	struct dm_repl_rec *recs;
	u8 *data;
	u32 nr_recs;
	u64 data_size;
	u64 dev_sectors;
	u32 region_shift;		/* bytes */
	u32 extent_shift;		/* bytes: write-intent extent */
	u32 max_extents;		/* active write-intent extents at most */

	spinlock_t lock;		/* everything below */
	u64 reserved;			/* next sequence number handed out */
	u64 prod;			/* published: records below are complete */
	u64 released;			/* consumer released records below */
	u64 acked;			/* consumer acknowledged records below */
	u64 data_head;			/* offset of the next payload */
	u64 data_used;			/* bytes in use, incl. wrap padding */
	u32 *slot_bytes;		/* data bytes charged to each slot */
	unsigned long *slot_done;	/* payload copied, ready to publish */
	unsigned long *slot_local;	/* local write completed */
	u64 local_done;			/* local writes below are complete */
	u64 epoch;
	u64 degraded_seq;		/* prod when the ring last degraded */
	unsigned long acked_jif;	/* jiffies when acked last grew */
	u32 state;			/* DM_REPL_STATE_* */
	u32 state_seq;
	u64 space_gen;			/* bumped when space is released */
	struct list_head held;		/* struct repl_bio, held for an ack, in record order */
	unsigned int nr_held;
	/*
	 * Unlogged writes and timed-out held writes whose regions are being
	 * marked dirty, in pieces without the lock: the ring does not leave
	 * overflow (GAP) before they are all in the bitmap.
	 */
	unsigned int nr_marking;
	unsigned long *dirty;		/* out of sync: needs a resync */
	u64 nr_regions;			/* grows with dev_sectors, both under lock */
	u64 nr_dirty;
	u64 dirty_gen;			/* bumped whenever a region is marked */
	struct repl_meta *meta;		/* NULL: no metadata device */
	u64 bytes_logged;
	u64 overflows;
	u64 hold_timeouts;
	u64 bad_updates;
	u64 io_errors;			/* failed local writes */
	u64 space_waits;		/* writes that waited for ring space */

	wait_queue_head_t space_wq;	/* writers waiting for ring space */
	wait_queue_head_t poll_wq;	/* the consumer */
	struct delayed_work hold_work;	/* hold timeout */
	struct work_struct event_work;	/* dm_table_event() */
};

/* One "repl" target (one per table: the target is a singleton). */
struct repl_c {
	struct dm_target *ti;
	struct dm_dev *dev;
	struct repl_ring *ring;
	enum repl_mode mode;		/* changed under the ring lock */
	struct dm_dev *meta_dev;	/* NULL: "-" */
	unsigned int ring_size_mb;
	unsigned int hold_timeout_ms;
	unsigned int region_kb;
	unsigned int extent_kb;
	unsigned int record_kb;		/* largest payload of one record */
	unsigned int max_extents;
	bool io_error_stop;		/* on_io_error stop */
	bool io_stopped;		/* stop: a local write failed */
	struct repl_ring_grow *grow;	/* longer than the ring: grown at resume */
	struct list_head ring_node;	/* ring->targets, under ring->tmutex */
};

struct repl_ring_geometry {
	u64 data_size;		/* bytes */
	u64 dev_sectors;
	u32 region_shift;	/* log2 of the region size in bytes */
	u32 extent_shift;	/* log2 of the write-intent extent in bytes */
	u32 max_extents;	/* active at most */
	struct dm_dev *meta_dev;	/* NULL: no metadata device */
	char name[DM_NAME_LEN];	/* the mapped device's name (dmsetup's) */
	/* the module's work queues (dm-repl-target.c), for a new ring */
	struct workqueue_struct *wq;
	struct workqueue_struct *copy_wq;
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
	u64 io_errors;
	u64 space_waits;
	unsigned int nr_held;
	bool consumer;
	int meta;			/* -1 none, 0 ok, 1 failed */
	u64 intent_regions;
	u64 active_extents;
};

/* dm-repl-ring.c */
int repl_ring_get(dev_t devt, const struct repl_ring_geometry *geo,
		  struct repl_c *rc, struct repl_ring **ret, char **error);
void repl_ring_put(struct repl_ring *ring, struct repl_c *rc);
int repl_ring_log(struct repl_ring *ring, struct bio *bio,
		  struct repl_bio *pb, u16 op, u16 flags,
		  unsigned int timeout_ms, unsigned int record_kb);
int repl_ring_activate(struct repl_ring *ring);
void repl_ring_quiesce(struct repl_ring *ring);
int repl_ring_end_io(struct repl_ring *ring, struct repl_bio *pb,
		     blk_status_t error);
void repl_ring_io_error(struct repl_ring *ring, sector_t sector, u32 nr_sectors,
			bool mark);
void repl_ring_set_mode(struct repl_ring *ring, enum repl_mode *mode,
			enum repl_mode new_mode);
void repl_ring_stats(struct repl_ring *ring, struct repl_ring_stats *st);
struct repl_ring_grow;
struct repl_ring_grow *repl_ring_grow_prepare(struct repl_ring *ring, u64 dev_sectors,
					      char **error);
void repl_ring_grow_commit(struct repl_ring *ring, struct repl_ring_grow *g);
void repl_ring_grow_free(struct repl_ring_grow *g);
/* dm-repl-ring.c, the consumer side (dm-repl-dev.c) */
int repl_ring_attach(dev_t devt, struct repl_ring **ret);
void repl_ring_detach(struct repl_ring *ring);
void repl_ring_kref_get(struct repl_ring *ring);
void repl_ring_kref_put(struct repl_ring *ring);
int repl_ring_kick(struct repl_ring *ring);
int repl_ring_copy_dirty(struct repl_ring *ring, u8 __user *ubuf, u64 ubytes,
			 u64 *ret_dirty, u64 *ret_gen, u64 *ret_regions);
void repl_ring_mark_regions(struct repl_ring *ring, u64 first, u64 count);
int repl_ring_clear_regions(struct repl_ring *ring, u64 first, u64 count,
			    u64 gen);

/* dm-repl-dev.c: module init and exit */
int repl_dev_register(void);
void repl_dev_unregister(void);

/*
 * dm-repl-meta.c: the metadata device (persistent bitmap).  One-way: it
 * knows its owner (the ring) only through these callbacks, and never
 * calls the ring or reads struct repl_ring.  None is called with the
 * metadata's own lock held; each may take the owner's locks.
 */
struct repl_meta_ops {
	/*
	 * A deferred bio (repl_meta_defer()) may go: its metadata round is on
	 * disk, or the metadata device failed.  The owner publishes its
	 * records and submits it.  Process context (the metadata work).
	 */
	void (*ready)(void *ctx, struct bio *bio);
	/*
	 * Set in @busy (nr_regions bits, zeroed) every region touched by a
	 * record that is not both released and written locally.  Process
	 * context (the clear pass), may sleep.
	 */
	void (*busy)(void *ctx, unsigned long *busy);
	/* The metadata device failed: raise a dm event.  Process context. */
	void (*failed)(void *ctx);
};

struct repl_meta_config {
	struct block_device *bdev;	/* the metadata device */
	const char *name;		/* resource: the mapped device's name */
	dev_t owner_devt;		/* the repl device, for messages */
	u64 dev_sectors;
	u64 nr_regions;
	u32 region_shift;		/* log2 of the region size in bytes */
	u32 extent_shift;		/* log2 of the extent size in bytes */
	u32 max_extents;
	struct workqueue_struct *wq;	/* metadata rounds and clear passes */
	const struct repl_meta_ops *ops;
	void *ctx;			/* for the callbacks */
};

struct repl_meta;
struct repl_meta *repl_meta_create(const struct repl_meta_config *cfg,
				   unsigned long *dirty, u64 *ret_dirty,
				   char **error);
void repl_meta_destroy(struct repl_meta *m);
u64 repl_meta_intent(struct repl_meta *m, u64 first, u64 end);
bool repl_meta_defer(struct repl_meta *m, struct bio *bio, u64 round);
void repl_meta_set_dirty(struct repl_meta *m, u64 first, u64 end);
void repl_meta_clear_dirty(struct repl_meta *m, u64 first, u64 end);
int repl_meta_activate(struct repl_meta *m);
void repl_meta_quiesce(struct repl_meta *m);
void repl_meta_detach(struct repl_meta *m);
dev_t repl_meta_devt(struct repl_meta *m);
bool repl_meta_failed(struct repl_meta *m);
u64 repl_meta_intent_regions(struct repl_meta *m);
u64 repl_meta_active_extents(struct repl_meta *m);
int repl_meta_get_gens(struct repl_meta *m, u64 *gen);
int repl_meta_set_gens(struct repl_meta *m, const u64 *gen);
struct repl_meta_grow;
struct repl_meta_grow *repl_meta_grow_prepare(struct repl_meta *m, u64 dev_sectors,
					      u64 nr_regions, char **error);
void repl_meta_grow_commit(struct repl_meta *m, struct repl_meta_grow *g, u64 first);
void repl_meta_grow_free(struct repl_meta_grow *g);

#endif /* DM_REPL_CORE_H */
