// SPDX-License-Identifier: GPL-2.0
/*
 * dm-repl metadata device: a superblock and a persistent bitmap (format in
 * include/uapi/linux/dm-repl.h, docs/metadata.md).
 *
 * One-way, as dm-clone-metadata.c and dm-region-hash.c are built: the
 * owner (the ring, dm-repl-ring.c) creates it with repl_meta_create(),
 * giving the geometry, the work queue and three callbacks
 * (struct repl_meta_ops), and calls the functions declared in
 * dm-repl-core.h.  This file never calls a function of the ring nor looks
 * into struct repl_ring: what it needs from the ring comes through the
 * callbacks:
 *  - ready(): a write that waited for a metadata round may go (its bits
 *    are durable, or the device failed); the ring publishes its records
 *    and submits it;
 *  - busy(): the regions still needed by records that are not both
 *    released and written locally, for the clear pass;
 *  - failed(): the metadata device failed, raise a dm event.
 *
 * A set bit means "this region may differ from a peer".  In memory:
 *  - m->oos: out of sync for sure (ring overflow, unacknowledged sync
 *    write, MARK_DIRTY, found set at load); this file's copy of the ring's
 *    dirty bitmap, kept by repl_meta_set_dirty() / repl_meta_clear_dirty()
 *    as the ring changes its own; cleared only by a resync;
 *  - m->intent: written since the bit was last cleared; set before the
 *    first write to a region reaches the disk, cleared lazily once no
 *    record touching the region is waiting for the peers (not released)
 *    or for its local write;
 *  - m->ondisk: the image of the on-disk bitmap (oos | intent | active
 *    extents, as it is to be written);
 *  - m->staging: the pages a metadata round is writing (a copy taken
 *    when the round starts);
 *  - m->synced: the image of what is durably on disk.
 *
 * Invariants (docs/metadata.md says the same for users):
 *  - A write to a region whose bit is not durable (synced, and not being
 *    cleared by the round in flight) is held back (deferred) until a
 *    metadata round has written the bitmap page with FUA, and its records
 *    are published only after that round (the ring keeps them unpublished
 *    until ready()): a peer never has a write whose bit could be lost.
 *    Rounds batch every page dirtied meanwhile, so one metadata write
 *    covers many regions, and a write to a region whose bit is durable
 *    never waits, whatever happens to the rest of its page.
 *  - Nothing is cleared while a record that is not released and written
 *    locally touches the region (busy()), nor while it was written in this
 *    clear interval or the one before (touched, touched_prev), except at a
 *    clean shutdown (no I/O in flight).
 *  - Write-intent extents (extent_kb, a power-of-2 number of regions, as
 *    DRBD's activity-log extents): the first write to an extent that is
 *    not active sets the bits of all its regions on disk, so the next
 *    writes anywhere in the extent find their bit durable.  m->ext_active:
 *    the extents whose every region is set in ondisk for that reason; at
 *    most max_extents of them (as DRBD's al-extents, it bounds the resync
 *    after a crash): beyond, a write marks its own regions only.
 *  - Clearing is lazy: a region's intent goes only after it was idle for
 *    two passes of the clearing work (2 to 4 s), and an extent's bits go
 *    (back to the out-of-sync bits of its regions) once none of its
 *    regions has intent, so a hot extent keeps its bits and costs no
 *    metadata write.  After a crash, every region of the extents that were
 *    active is resynced.
 *
 * Rounds are serialized (md_work() under io_lock), so a deferred write
 * waits either for the round in flight (round_started, when its bit is in
 * what that round writes) or for the next one (round_started + 1): it goes
 * on m->wait_cur or m->wait_next, decided when it is deferred from the
 * round repl_meta_intent() returned; when a round starts, wait_next
 * becomes wait_cur; when it is on disk, wait_cur goes.  No per-bio state.
 *
 * Locking: m->lock (spinlock, irq-safe) protects the bitmaps, the rounds
 * and the wait lists.  The ring calls repl_meta_intent(),
 * repl_meta_set_dirty() and repl_meta_clear_dirty() with ring->lock held:
 * m->lock always nests INSIDE ring->lock, and this file never calls a
 * callback while holding m->lock (the callbacks take ring->lock), so the
 * two never invert.  Metadata I/O is serialized by m->io_lock (a mutex:
 * the round work, activate, quiesce, set_gens), never taken under a
 * spinlock; the clear pass is serialized by m->clear_lock.
 */
#include <linux/module.h>
#include <linux/bio.h>
#include <linux/blkdev.h>
#include <linux/dm-io.h>
#include <linux/err.h>
#include <linux/ioprio.h>
#include <linux/slab.h>
#include <linux/vmalloc.h>
#include <linux/xxhash.h>
#include <linux/bitops.h>

#include "dm-repl-core.h"

#define MD_PAGE_BITS	(PAGE_SIZE * 8)
#define MD_CLEAR_INTERVAL	(2 * HZ)

struct repl_meta {
	/* given at creation, constant */
	struct block_device *bdev;
	dev_t devt;			/* the metadata device */
	dev_t owner_devt;		/* the repl device, for messages */
	u64 nr_regions;
	u32 ext_shift;			/* log2 of regions per extent */
	u32 max_extents;
	struct workqueue_struct *wq;
	const struct repl_meta_ops *ops;
	void *ctx;

	struct dm_io_client *io;
	struct mutex io_lock;		/* serializes metadata I/O */
	struct mutex clear_lock;	/* serializes clear passes */
	struct dm_repl_md_sb *sb;	/* DM_REPL_MD_SB_BYTES, kmalloc */
	u64 bitmap_offset;
	u64 bitmap_bytes;
	u32 nr_pages;
	u64 nr_ext;

	spinlock_t lock;		/* everything below */
	u8 *ondisk;			/* vmalloc, nr_pages pages, LE bit order */
	u8 *staging;			/* the pages being written */
	u8 *synced;			/* what is durably on disk */
	unsigned long *oos;		/* out of sync (the ring's dirty bits) */
	unsigned long *intent;
	unsigned long *ext_active;	/* extents whose bits are all in ondisk */
	u64 nr_ext_active;
	unsigned long *touched;		/* written during this clear interval */
	unsigned long *touched_prev;	/* ... and during the one before */
	unsigned long *busy;		/* clear pass: regions still needed */
	unsigned long *page_dirty;	/* ondisk page changed, not written */
	unsigned long *page_pending;	/* ondisk page being written */
	u64 round_started, round_done;
	u64 nr_intent;
	struct bio_list wait_cur;	/* waiting for round_started */
	struct bio_list wait_next;	/* waiting for round_started + 1 */
	bool failed;
	bool active;			/* resumed: the superblock says in use */

	struct work_struct work;
	struct delayed_work clear_work;
};

/* kvmalloc: a bitmap of millions of regions is more than kmalloc gives */
static unsigned long *md_bitmap_alloc(u64 bits)
{
	return kvcalloc(BITS_TO_LONGS(bits), sizeof(unsigned long),
			GFP_KERNEL | __GFP_NOWARN);
}

static inline u32 md_page(u64 region)
{
	return region / MD_PAGE_BITS;
}

/* Synchronous metadata I/O of len bytes at byte offset off. */
static int md_io(struct repl_meta *m, blk_opf_t opf, void *buf, bool vmem,
		 u64 off, u64 len)
{
	struct dm_io_region where = {
		.bdev = m->bdev,
		.sector = off >> SECTOR_SHIFT,
		.count = len >> SECTOR_SHIFT,
	};
	struct dm_io_request req = {
		.bi_opf = opf,
		.mem.type = vmem ? DM_IO_VMA : DM_IO_KMEM,
		.mem.ptr.addr = buf,
		.client = m->io,
	};
	unsigned long error = 0;
	int r;

	r = dm_io(&req, 1, &where, &error, IOPRIO_DEFAULT);
	return r ? r : error ? -EIO : 0;
}

static u64 md_csum(struct dm_repl_md_sb *sb)
{
	__le64 saved = sb->csum;
	u64 c;

	sb->csum = 0;
	c = xxh64(sb, DM_REPL_MD_SB_BYTES, 0);
	sb->csum = saved;
	return c;
}

/* Write the superblock (FUA) with the clean flag as given.  io_lock held. */
static int md_write_sb(struct repl_meta *m, bool clean)
{
	u32 flags = le32_to_cpu(m->sb->flags);

	if (clean)
		flags |= DM_REPL_MD_CLEAN;
	else
		flags &= ~DM_REPL_MD_CLEAN;
	m->sb->flags = cpu_to_le32(flags);
	le64_add_cpu(&m->sb->events, 1);
	m->sb->csum = cpu_to_le64(md_csum(m->sb));
	return md_io(m, REQ_OP_WRITE | REQ_SYNC | REQ_FUA, m->sb, false, 0,
		     DM_REPL_MD_SB_BYTES);
}

/*
 * Write every page set in m->page_pending, FUA.  io_lock held; only the
 * round work changes page_pending, so it is read here without m->lock.
 */
static int md_write_pages(struct repl_meta *m)
{
	u32 p, q;
	int r;

	for_each_set_bit(p, m->page_pending, m->nr_pages) {
		/* one request per run of pages */
		q = find_next_zero_bit(m->page_pending, m->nr_pages, p);
		r = md_io(m, REQ_OP_WRITE | REQ_SYNC | REQ_FUA,
			  m->staging + (u64)p * PAGE_SIZE, true,
			  m->bitmap_offset + (u64)p * PAGE_SIZE,
			  min_t(u64, (u64)(q - p) * PAGE_SIZE,
				m->bitmap_bytes - (u64)p * PAGE_SIZE));
		if (r)
			return r;
		p = q;
	}
	return 0;
}

/* Hand deferred bios back to the owner.  No lock held. */
static void md_release(struct repl_meta *m, struct bio_list *list)
{
	struct bio *bio;

	while ((bio = bio_list_pop(list)))
		m->ops->ready(m->ctx, bio);
}

/*
 * The metadata device failed; keep serving I/O.  No lock held: tells the
 * owner (a dm event) and lets the round work release every deferred bio.
 */
static void md_fail(struct repl_meta *m, int r)
{
	bool first;

	spin_lock_irq(&m->lock);
	first = !m->failed;
	m->failed = true;
	spin_unlock_irq(&m->lock);
	if (!first)
		return;
	DMERR("%u:%u: metadata device write failed (%d): the bitmap is no longer persistent",
	      MAJOR(m->owner_devt), MINOR(m->owner_devt), r);
	m->ops->failed(m->ctx);
	queue_work(m->wq, &m->work);
}

/* m->lock held: copy the pages of this round (page_pending). */
static void md_copy_pages(struct repl_meta *m, u8 *to, const u8 *from)
{
	u32 p;

	for_each_set_bit(p, m->page_pending, m->nr_pages)
		memcpy(to + (u64)p * PAGE_SIZE, from + (u64)p * PAGE_SIZE, PAGE_SIZE);
}

/*
 * Write rounds until no page is dirty and no bio waits for the next round,
 * releasing the deferred bios of each round once it is on disk (all of
 * them once the device failed).
 */
static void md_work(struct work_struct *work)
{
	struct repl_meta *m = container_of(work, struct repl_meta, work);
	struct bio_list ready = BIO_EMPTY_LIST;
	u64 round;
	int r;

	mutex_lock(&m->io_lock);
	for (;;) {
		spin_lock_irq(&m->lock);
		if (m->failed) {
			bio_list_merge(&ready, &m->wait_cur);
			bio_list_merge(&ready, &m->wait_next);
			bio_list_init(&m->wait_cur);
			bio_list_init(&m->wait_next);
			spin_unlock_irq(&m->lock);
			break;
		}
		if (bitmap_empty(m->page_dirty, m->nr_pages) &&
		    bio_list_empty(&m->wait_next)) {
			spin_unlock_irq(&m->lock);
			break;
		}
		round = ++m->round_started;
		/* what waited for this round (wait_cur is empty here) */
		bio_list_merge(&m->wait_cur, &m->wait_next);
		bio_list_init(&m->wait_next);
		bitmap_copy(m->page_pending, m->page_dirty, m->nr_pages);
		bitmap_zero(m->page_dirty, m->nr_pages);
		md_copy_pages(m, m->staging, m->ondisk);
		spin_unlock_irq(&m->lock);

		r = md_write_pages(m);

		spin_lock_irq(&m->lock);
		if (!r)
			md_copy_pages(m, m->synced, m->staging);
		bitmap_zero(m->page_pending, m->nr_pages);
		m->round_done = round;
		bio_list_merge(&ready, &m->wait_cur);
		bio_list_init(&m->wait_cur);
		spin_unlock_irq(&m->lock);
		if (r)
			md_fail(m, r);
		md_release(m, &ready);
	}
	mutex_unlock(&m->io_lock);
	md_release(m, &ready);
}

/* m->lock held: the first write to extent x sets all its regions. */
static void md_activate_extent(struct repl_meta *m, u64 x)
{
	u64 r = x << m->ext_shift;
	u64 end = min_t(u64, r + BIT_ULL(m->ext_shift), m->nr_regions);

	__set_bit(x, m->ext_active);
	m->nr_ext_active++;
	for (; r < end; r++) {
		if (test_bit_le(r, m->ondisk))
			continue;
		__set_bit_le(r, m->ondisk);
		__set_bit(md_page(r), m->page_dirty);
	}
}

/*
 * m->lock held: an extent with no region in intent goes; its regions
 * keep their bit on disk only when out of sync.  Returns true when that
 * changed a page.
 */
static bool md_deactivate_extent(struct repl_meta *m, u64 x)
{
	u64 r = x << m->ext_shift;
	u64 end = min_t(u64, r + BIT_ULL(m->ext_shift), m->nr_regions);
	bool dirtied = false;

	if (find_next_bit(m->intent, end, r) < end)
		return false;
	__clear_bit(x, m->ext_active);
	m->nr_ext_active--;
	for (; r < end; r++) {
		if (test_bit(r, m->oos) || !test_bit_le(r, m->ondisk))
			continue;
		__clear_bit_le(r, m->ondisk);
		__set_bit(md_page(r), m->page_dirty);
		dirtied = true;
	}
	return dirtied;
}

/*
 * Before a write to regions [first, end) reaches the disk, their bits must
 * be durable.  Returns 0 when they are, else the metadata round the write
 * has to wait for: then the owner keeps its records unpublished and hands
 * the bio to repl_meta_defer() with that round.  Any context; the ring
 * calls it with ring->lock held.
 */
u64 repl_meta_intent(struct repl_meta *m, u64 first, u64 end)
{
	unsigned long flags;
	u64 r, need = 0;
	bool pending;
	u32 page;

	if (!m)
		return 0;
	end = min(end, m->nr_regions);
	spin_lock_irqsave(&m->lock, flags);
	if (m->failed)
		goto out;
	for (r = first; r < end; r++) {
		if (!__test_and_set_bit(r, m->intent))
			m->nr_intent++;
		__set_bit(r, m->touched);
		page = md_page(r);
		if (!test_bit(r >> m->ext_shift, m->ext_active) &&
		    m->nr_ext_active < m->max_extents)
			md_activate_extent(m, r >> m->ext_shift);
		if (!test_bit_le(r, m->ondisk)) {
			__set_bit_le(r, m->ondisk);
			__set_bit(page, m->page_dirty);
		}
		pending = test_bit(page, m->page_pending);
		/* durable, and the round in flight does not clear it */
		if (test_bit_le(r, m->synced) && (!pending || test_bit_le(r, m->staging)))
			continue;
		if (pending && test_bit_le(r, m->staging)) {
			need = max(need, m->round_started);
		} else {
			__set_bit(page, m->page_dirty);
			need = max(need, m->round_started + 1);
		}
	}
	if (!delayed_work_pending(&m->clear_work))
		queue_delayed_work(m->wq, &m->clear_work, MD_CLEAR_INTERVAL);
out:
	spin_unlock_irqrestore(&m->lock, flags);
	return need;
}

/*
 * The bio waits for metadata round @round (from repl_meta_intent()).
 * Returns false when that round is already on disk (or the device failed):
 * the caller goes on with the bio itself.  Otherwise ready() gets it once
 * the round is on disk.  Any context.
 */
bool repl_meta_defer(struct repl_meta *m, struct bio *bio, u64 round)
{
	unsigned long flags;
	bool wait = true;

	spin_lock_irqsave(&m->lock, flags);
	if (m->failed || round <= m->round_done)
		wait = false;
	else if (round == m->round_started)
		bio_list_add(&m->wait_cur, bio);
	else	/* round_started + 1: rounds are serialized */
		bio_list_add(&m->wait_next, bio);
	if (wait)
		queue_work(m->wq, &m->work);
	spin_unlock_irqrestore(&m->lock, flags);
	return wait;
}

/*
 * Regions [first, end) are out of sync (the ring marked them dirty): they
 * must be set on disk too.  Any context; the ring calls it with ring->lock
 * held.
 */
void repl_meta_set_dirty(struct repl_meta *m, u64 first, u64 end)
{
	unsigned long flags;
	bool dirtied = false;
	u64 r;

	if (!m)
		return;
	end = min(end, m->nr_regions);
	spin_lock_irqsave(&m->lock, flags);
	if (m->failed)
		goto out;
	for (r = first; r < end; r++) {
		__set_bit(r, m->oos);
		if (test_bit_le(r, m->ondisk))
			continue;
		__set_bit_le(r, m->ondisk);
		__set_bit(md_page(r), m->page_dirty);
		dirtied = true;
	}
	if (dirtied)
		queue_work(m->wq, &m->work);
out:
	spin_unlock_irqrestore(&m->lock, flags);
}

/*
 * A resync cleared regions [first, end) (the ring cleared them in its dirty
 * bitmap).  A region's bit on disk goes unless it has intent or its extent
 * is active.  Any context; the ring calls it with ring->lock held.
 */
void repl_meta_clear_dirty(struct repl_meta *m, u64 first, u64 end)
{
	unsigned long flags;
	bool dirtied = false;
	u64 r;

	if (!m)
		return;
	end = min(end, m->nr_regions);
	spin_lock_irqsave(&m->lock, flags);
	if (m->failed)
		goto out;
	for (r = find_next_bit(m->oos, end, first); r < end;
	     r = find_next_bit(m->oos, end, r + 1)) {
		__clear_bit(r, m->oos);
		if (test_bit(r, m->intent) ||
		    test_bit(r >> m->ext_shift, m->ext_active) ||
		    !test_bit_le(r, m->ondisk))
			continue;
		__clear_bit_le(r, m->ondisk);
		__set_bit(md_page(r), m->page_dirty);
		dirtied = true;
	}
	if (dirtied)
		queue_work(m->wq, &m->work);
out:
	spin_unlock_irqrestore(&m->lock, flags);
}

/*
 * Lazy clearing.  A region's intent bit may go when no record that is not
 * both released (every peer has it) and written locally touches it
 * (busy()), and (unless @final) no write touched it during this interval
 * or the one before; an extent goes with the last intent in it.  The
 * touched bitmaps rotate before busy() takes its snapshot of the records:
 * a write logged after the snapshot calls repl_meta_intent() after the
 * rotation, so it is in touched.  Returns true while some region has
 * intent.
 */
static bool md_clear_pass(struct repl_meta *m, bool final)
{
	bool dirtied = false, again;
	u64 r, x;

	mutex_lock(&m->clear_lock);
	spin_lock_irq(&m->lock);
	bitmap_copy(m->touched_prev, m->touched, m->nr_regions);
	bitmap_zero(m->touched, m->nr_regions);
	spin_unlock_irq(&m->lock);

	/* only the clear pass uses busy */
	bitmap_zero(m->busy, m->nr_regions);
	m->ops->busy(m->ctx, m->busy);

	spin_lock_irq(&m->lock);
	for_each_set_bit(r, m->intent, m->nr_regions) {
		if (test_bit(r, m->busy) ||
		    (!final && (test_bit(r, m->touched) || test_bit(r, m->touched_prev))))
			continue;
		__clear_bit(r, m->intent);
		m->nr_intent--;
		/* a region marked on its own (max_extents were active) */
		if (!test_bit(r >> m->ext_shift, m->ext_active) &&
		    !test_bit(r, m->oos) && test_bit_le(r, m->ondisk)) {
			__clear_bit_le(r, m->ondisk);
			__set_bit(md_page(r), m->page_dirty);
			dirtied = true;
		}
	}
	for_each_set_bit(x, m->ext_active, m->nr_ext)
		dirtied |= md_deactivate_extent(m, x);
	again = m->nr_intent != 0;
	spin_unlock_irq(&m->lock);
	mutex_unlock(&m->clear_lock);
	if (dirtied)
		queue_work(m->wq, &m->work);
	return again;
}

static void md_clear_work(struct work_struct *work)
{
	struct repl_meta *m = container_of(to_delayed_work(work), struct repl_meta,
					   clear_work);

	if (md_clear_pass(m, false))
		queue_delayed_work(m->wq, &m->clear_work, MD_CLEAR_INTERVAL);
}

/* The superblock says "in use": before the first write after a resume. */
int repl_meta_activate(struct repl_meta *m)
{
	int r;

	if (!m || READ_ONCE(m->failed))
		return 0;
	mutex_lock(&m->io_lock);
	m->sb->role = cpu_to_le32(DM_REPL_MD_ROLE_PRIMARY);
	r = md_write_sb(m, false);
	if (!r)
		m->active = true;
	mutex_unlock(&m->io_lock);
	if (r) {
		DMERR("%u:%u: cannot write the metadata superblock (%d)",
		      MAJOR(m->owner_devt), MINOR(m->owner_devt), r);
		return r;
	}
	return 0;
}

/*
 * Generation identifiers, kept in the superblock for the daemon (it decides
 * with them what a resync must do when peers meet).  Setting them writes
 * the superblock before the message returns.
 */
int repl_meta_get_gens(struct repl_meta *m, u64 *gen)
{
	int i;

	if (!m)
		return -ENODEV;
	mutex_lock(&m->io_lock);
	for (i = 0; i < 4; i++)
		gen[i] = le64_to_cpu(m->sb->gen[i]);
	mutex_unlock(&m->io_lock);
	return 0;
}

int repl_meta_set_gens(struct repl_meta *m, const u64 *gen)
{
	int i, r;

	if (!m)
		return -ENODEV;
	if (READ_ONCE(m->failed))
		return -EIO;
	mutex_lock(&m->io_lock);
	for (i = 0; i < 4; i++)
		m->sb->gen[i] = cpu_to_le64(gen[i]);
	r = md_write_sb(m, !m->active);
	mutex_unlock(&m->io_lock);
	if (r)
		md_fail(m, r);
	return r;
}

/* No I/O in flight (postsuspend, last target gone): write it all, clean. */
void repl_meta_quiesce(struct repl_meta *m)
{
	int r;

	if (!m)
		return;
	/* nothing is in flight: every region no record needs can go now */
	cancel_delayed_work_sync(&m->clear_work);
	if (!READ_ONCE(m->failed))
		md_clear_pass(m, true);
	flush_work(&m->work);
	if (READ_ONCE(m->failed))
		return;
	mutex_lock(&m->io_lock);
	r = md_write_sb(m, true);
	m->active = false;
	mutex_unlock(&m->io_lock);
	if (r)
		md_fail(m, r);
}

/* For the status line; a snapshot, without the lock. */
bool repl_meta_failed(struct repl_meta *m)
{
	return m && READ_ONCE(m->failed);
}

u64 repl_meta_intent_regions(struct repl_meta *m)
{
	return m ? READ_ONCE(m->nr_intent) : 0;
}

u64 repl_meta_active_extents(struct repl_meta *m)
{
	return m ? READ_ONCE(m->nr_ext_active) : 0;
}

static int md_check(struct repl_meta *m, const struct repl_meta_config *cfg,
		    char **error)
{
	struct dm_repl_md_sb *sb = m->sb;
	u64 need = DIV_ROUND_UP_ULL(cfg->nr_regions, 8), size;

	need = round_up(need, DM_REPL_MD_BITMAP_ALIGN);
	size = bdev_nr_bytes(m->bdev);
	if (size < DM_REPL_MD_SB_BYTES + need) {
		*error = "Metadata device too small for the bitmap";
		return -ENOSPC;
	}
	if (le32_to_cpu(sb->magic) != DM_REPL_MD_MAGIC) {
		*error = "No dm-repl metadata on the metadata device (replctl create-md)";
		return -EINVAL;
	}
	if (le64_to_cpu(sb->csum) != md_csum(sb)) {
		*error = "Metadata superblock checksum mismatch: corrupt";
		return -EILSEQ;
	}
	if (le32_to_cpu(sb->version) != DM_REPL_MD_VERSION) {
		*error = "Metadata format version not supported";
		return -EINVAL;
	}
	if (strnlen(sb->resource, DM_REPL_MD_NAME_MAX) == DM_REPL_MD_NAME_MAX ||
	    strcmp(sb->resource, cfg->name)) {
		*error = "Metadata belongs to another resource";
		return -EINVAL;
	}
	if (le64_to_cpu(sb->dev_sectors) != cfg->dev_sectors) {
		*error = "Metadata describes a device of another size";
		return -EINVAL;
	}
	if (le32_to_cpu(sb->region_shift) != cfg->region_shift) {
		*error = "Metadata region size differs from region_kb";
		return -EINVAL;
	}
	if (le32_to_cpu(sb->role) > DM_REPL_MD_ROLE_SECONDARY) {
		*error = "Metadata role invalid";
		return -EINVAL;
	}
	m->bitmap_offset = le64_to_cpu(sb->bitmap_offset);
	m->bitmap_bytes = le64_to_cpu(sb->bitmap_bytes);
	if (m->bitmap_offset < DM_REPL_MD_SB_BYTES ||
	    !IS_ALIGNED(m->bitmap_offset, DM_REPL_MD_BITMAP_ALIGN) ||
	    m->bitmap_bytes != need ||
	    m->bitmap_offset > size || m->bitmap_bytes > size - m->bitmap_offset) {
		*error = "Metadata bitmap location or size invalid";
		return -EINVAL;
	}
	return 0;
}

/* The metadata goes (no target, no I/O); also undoes a half-built one. */
void repl_meta_destroy(struct repl_meta *m)
{
	if (!m)
		return;
	cancel_delayed_work_sync(&m->clear_work);
	cancel_work_sync(&m->work);
	kvfree(m->page_pending);
	kvfree(m->page_dirty);
	kvfree(m->busy);
	kvfree(m->touched_prev);
	kvfree(m->touched);
	kvfree(m->ext_active);
	kvfree(m->intent);
	kvfree(m->oos);
	vfree(m->synced);
	vfree(m->staging);
	vfree(m->ondisk);
	kfree(m->sb);
	if (m->io)
		dm_io_client_destroy(m->io);
	kfree(m);
}

/*
 * Load and check the metadata for a new ring.  Every bit set on disk
 * becomes out of sync: after a clean shutdown those are the regions that
 * were still out of sync or waiting for peers; after a crash they bound
 * what may differ.  They are set in @dirty (the owner's out-of-sync
 * bitmap, cfg->nr_regions bits, zeroed) and counted in *@ret_dirty.
 * Returns the metadata or an ERR_PTR, with *@error set.
 */
struct repl_meta *repl_meta_create(const struct repl_meta_config *cfg,
				   unsigned long *dirty, u64 *ret_dirty,
				   char **error)
{
	struct repl_meta *m;
	u64 r, n = 0;
	int ret;

	m = kzalloc(sizeof(*m), GFP_KERNEL);
	if (!m) {
		*error = "Cannot allocate metadata";
		return ERR_PTR(-ENOMEM);
	}
	m->bdev = cfg->bdev;
	m->devt = cfg->bdev->bd_dev;
	m->owner_devt = cfg->owner_devt;
	m->nr_regions = cfg->nr_regions;
	m->ext_shift = cfg->extent_shift - cfg->region_shift;
	m->max_extents = cfg->max_extents;
	m->wq = cfg->wq;
	m->ops = cfg->ops;
	m->ctx = cfg->ctx;
	mutex_init(&m->io_lock);
	mutex_init(&m->clear_lock);
	spin_lock_init(&m->lock);
	bio_list_init(&m->wait_cur);
	bio_list_init(&m->wait_next);
	INIT_WORK(&m->work, md_work);
	INIT_DELAYED_WORK(&m->clear_work, md_clear_work);
	m->io = dm_io_client_create();
	if (IS_ERR(m->io)) {
		ret = PTR_ERR(m->io);
		m->io = NULL;
		*error = "Cannot create metadata I/O client";
		goto bad;
	}
	m->sb = kzalloc(DM_REPL_MD_SB_BYTES, GFP_KERNEL);
	if (!m->sb) {
		*error = "Cannot allocate metadata";
		ret = -ENOMEM;
		goto bad;
	}
	ret = md_io(m, REQ_OP_READ, m->sb, false, 0, DM_REPL_MD_SB_BYTES);
	if (ret) {
		*error = "Cannot read the metadata device";
		goto bad;
	}
	ret = md_check(m, cfg, error);
	if (ret)
		goto bad;
	m->nr_pages = DIV_ROUND_UP_ULL(m->bitmap_bytes, PAGE_SIZE);
	m->ondisk = vzalloc((u64)m->nr_pages * PAGE_SIZE);
	m->staging = vzalloc((u64)m->nr_pages * PAGE_SIZE);
	m->synced = vzalloc((u64)m->nr_pages * PAGE_SIZE);
	m->oos = md_bitmap_alloc(m->nr_regions);
	m->intent = md_bitmap_alloc(m->nr_regions);
	m->nr_ext = DIV_ROUND_UP_ULL(m->nr_regions, BIT_ULL(m->ext_shift));
	m->ext_active = md_bitmap_alloc(m->nr_ext);
	m->touched = md_bitmap_alloc(m->nr_regions);
	m->touched_prev = md_bitmap_alloc(m->nr_regions);
	m->busy = md_bitmap_alloc(m->nr_regions);
	m->page_dirty = md_bitmap_alloc(m->nr_pages);
	m->page_pending = md_bitmap_alloc(m->nr_pages);
	if (!m->ondisk || !m->staging || !m->synced || !m->oos || !m->intent ||
	    !m->ext_active || !m->touched || !m->touched_prev || !m->busy ||
	    !m->page_dirty || !m->page_pending) {
		*error = "Cannot allocate the metadata bitmap";
		ret = -ENOMEM;
		goto bad;
	}
	ret = md_io(m, REQ_OP_READ, m->ondisk, true, m->bitmap_offset, m->bitmap_bytes);
	if (ret) {
		*error = "Cannot read the metadata bitmap";
		goto bad;
	}
	memcpy(m->synced, m->ondisk, m->bitmap_bytes);
	for (r = find_next_bit_le(m->ondisk, m->nr_regions, 0); r < m->nr_regions;
	     r = find_next_bit_le(m->ondisk, m->nr_regions, r + 1)) {
		__set_bit(r, m->oos);
		__set_bit(r, dirty);
		n++;
	}
	if (n)
		DMINFO("%s: %s shutdown: %llu regions out of sync", cfg->name,
		       le32_to_cpu(m->sb->flags) & DM_REPL_MD_CLEAN ? "clean" : "unclean",
		       n);
	*ret_dirty = n;
	return m;
bad:
	repl_meta_destroy(m);
	return ERR_PTR(ret);
}

/*
 * The last target leaves: write everything, mark the superblock clean, and
 * stop using the device (the target is about to close it).
 */
void repl_meta_detach(struct repl_meta *m)
{
	if (!m)
		return;
	repl_meta_quiesce(m);
	spin_lock_irq(&m->lock);
	m->failed = true;	/* no more metadata I/O */
	spin_unlock_irq(&m->lock);
	cancel_delayed_work_sync(&m->clear_work);
	flush_work(&m->work);
	m->bdev = NULL;
}

dev_t repl_meta_devt(struct repl_meta *m)
{
	return m ? m->devt : 0;
}
