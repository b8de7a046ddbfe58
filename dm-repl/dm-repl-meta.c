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
 *    when the round starts), in the on-disk byte order: the I/O buffer;
 *  - m->synced: the image of what is durably on disk.
 * All but staging are native bitmaps (unsigned long), so that every loop
 * over them goes a word at a time; the on-disk little-endian bit order
 * only exists in staging (bitmap_copy_le() converts a page either way).
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
 * No hold of m->lock does more than about REPL_CHUNK_WORDS words of work
 * (dm-repl-core.h): the ring calls with a chunk of regions at most, a
 * round copies MD_COPY_PAGES pages per hold, the clear pass goes a chunk
 * of words per hold; comments at each say why the pieces are safe.
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
#define MD_PAGE_WORDS	(MD_PAGE_BITS / BITS_PER_LONG)
/* pages of a round copied per hold of m->lock: about REPL_CHUNK_WORDS */
#define MD_COPY_PAGES	max_t(u32, 1, REPL_CHUNK_WORDS / MD_PAGE_WORDS)
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
	unsigned long *ondisk;		/* vmalloc, nr_pages pages */
	u8 *staging;			/* the pages being written, LE bit order */
	unsigned long *synced;		/* what is durably on disk */
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
	u32 staged_upto;		/* pending pages below are in staging */
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

/* Page @p of a native bitmap image. */
static inline unsigned long *md_page_ptr(unsigned long *map, u32 p)
{
	return map + (u64)p * MD_PAGE_WORDS;
}

/* Page @p of staging (on-disk byte order). */
static inline unsigned long *md_staging_page(struct repl_meta *m, u32 p)
{
	return (unsigned long *)(m->staging + (u64)p * PAGE_SIZE);
}

/* Word @w of staging, in the native bit order. */
static inline unsigned long md_staged_word(struct repl_meta *m, u64 w)
{
	unsigned long v;

	bitmap_copy_le(&v, (unsigned long *)m->staging + w, BITS_PER_LONG);
	return v;
}

/*
 * The bits of word @w of a region bitmap whose region's extent is active.
 * m->lock held.
 */
static unsigned long md_ext_mask(struct repl_meta *m, u64 w)
{
	u64 r = w * BITS_PER_LONG, x;
	unsigned long mask = 0;
	unsigned int per, i;

	if (m->ext_shift >= ilog2(BITS_PER_LONG))	/* one extent per word */
		return test_bit(r >> m->ext_shift, m->ext_active) ? ~0UL : 0;
	per = 1U << m->ext_shift;
	for (i = 0; i < BITS_PER_LONG; i += per) {
		x = (r + i) >> m->ext_shift;
		if (x >= m->nr_ext)
			break;
		if (test_bit(x, m->ext_active))
			mask |= GENMASK(i + per - 1, i);
	}
	return mask;
}

/*
 * m->lock held: set regions [lo, hi) in ondisk; a page that changed is
 * dirty.  Returns true when one did.
 */
static bool md_ondisk_set(struct repl_meta *m, u64 lo, u64 hi)
{
	bool dirtied = false;
	u64 phi;
	u32 p;

	while (lo < hi) {
		p = md_page(lo);
		phi = min_t(u64, hi, (u64)(p + 1) * MD_PAGE_BITS);
		if (repl_bitmap_set_count(m->ondisk, lo, phi)) {
			__set_bit(p, m->page_dirty);
			dirtied = true;
		}
		lo = phi;
	}
	return dirtied;
}

/* Zero a large bitmap that only the caller uses, rescheduling. */
static void md_zero_words(unsigned long *map, u64 nwords)
{
	u64 w, n;

	for (w = 0; w < nwords; w += n) {
		n = min_t(u64, nwords - w, 64 * REPL_CHUNK_WORDS);
		memset(map + w, 0, n * sizeof(*map));
		cond_resched();
	}
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

/*
 * Copy the round's pending pages, MD_COPY_PAGES per hold of m->lock: from
 * ondisk to staging when the round starts (stage), from staging to synced
 * once it is on disk.
 *
 * Staging is safe in pieces: a pending page not yet copied (at or above
 * staged_upto) will be copied from ondisk as it is then, so
 * repl_meta_intent() takes ondisk's bits, which it has just set, for its
 * staged bits (the write waits for this round); a bit set in ondisk after
 * its page was copied is not in staging, so that write waits for the next
 * round (its page is dirty again).  Only the round work writes staging,
 * page_pending and staged_upto, so md_write_pages() reads them without
 * the lock.
 *
 * So is syncing: until round_done moves, a write that finds its bit
 * staged but not yet synced waits for this round (wait_cur, released
 * right after), and one that finds it synced is right, the bit is on disk.
 */
static void md_copy_pages(struct repl_meta *m, bool stage)
{
	u32 p = 0, n;

	spin_lock_irq(&m->lock);
	for (;;) {
		for (n = 0; n < MD_COPY_PAGES; n++) {
			p = find_next_bit(m->page_pending, m->nr_pages, p);
			if (p >= m->nr_pages)
				break;
			if (stage)
				bitmap_copy_le(md_staging_page(m, p), md_page_ptr(m->ondisk, p),
					       MD_PAGE_BITS);
			else
				bitmap_copy_le(md_page_ptr(m->synced, p), md_staging_page(m, p),
					       MD_PAGE_BITS);
			p++;
		}
		if (p >= m->nr_pages)
			break;
		if (stage)
			m->staged_upto = p;
		spin_unlock_irq(&m->lock);
		cond_resched();
		spin_lock_irq(&m->lock);
	}
	if (stage)
		m->staged_upto = m->nr_pages;
	spin_unlock_irq(&m->lock);
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
		/* a bit per page: nr_regions / 32768 bits, small */
		bitmap_copy(m->page_pending, m->page_dirty, m->nr_pages);
		bitmap_zero(m->page_dirty, m->nr_pages);
		m->staged_upto = 0;
		spin_unlock_irq(&m->lock);
		md_copy_pages(m, true);

		r = md_write_pages(m);

		if (!r)
			md_copy_pages(m, false);
		spin_lock_irq(&m->lock);
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

/*
 * m->lock held: extents [x, x + k), none of them active, get their first
 * write: each sets all its regions.
 */
static void md_activate_extents(struct repl_meta *m, u64 x, u64 k)
{
	repl_bitmap_set_count(m->ext_active, x, x + k);
	m->nr_ext_active += k;
	md_ondisk_set(m, x << m->ext_shift,
		      min_t(u64, (x + k) << m->ext_shift, m->nr_regions));
}

/*
 * m->lock held: an extent with no region in intent goes; its regions
 * keep their bit on disk only when out of sync.  Returns true when that
 * changed a page.  An extent is at most 32768 regions, 512 words.
 */
static bool md_deactivate_extent(struct repl_meta *m, u64 x)
{
	u64 lo = x << m->ext_shift, w;
	u64 hi = min_t(u64, lo + BIT_ULL(m->ext_shift), m->nr_regions);
	bool dirtied = false;
	unsigned long c;

	if (find_next_bit(m->intent, hi, lo) < hi)
		return false;
	__clear_bit(x, m->ext_active);
	m->nr_ext_active--;
	for (w = lo / BITS_PER_LONG; w * BITS_PER_LONG < hi; w++) {
		c = repl_word_mask(w, lo, hi) & m->ondisk[w] & ~m->oos[w];
		if (!c)
			continue;
		m->ondisk[w] &= ~c;
		__set_bit(w / MD_PAGE_WORDS, m->page_dirty);
		dirtied = true;
	}
	return dirtied;
}

/*
 * m->lock held: the round a write to regions [first, end), whose bits are
 * set in ondisk, has to wait for (0: none).  A bit is durable when it is
 * in synced and the round in flight (its page pending) does not clear it;
 * if it is not, the write waits for the round in flight when that one
 * writes the bit (in staging, or in ondisk for a page not yet copied:
 * md_copy_pages()), else for the next one (and its page is dirty).
 */
static u64 md_need_round(struct repl_meta *m, u64 first, u64 end)
{
	unsigned long mask, staged, bad;
	u64 w, need = 0;
	bool pending;
	u32 p;

	for (w = first / BITS_PER_LONG; w * BITS_PER_LONG < end; w++) {
		mask = repl_word_mask(w, first, end);
		p = w / MD_PAGE_WORDS;
		pending = test_bit(p, m->page_pending);
		if (!pending)
			staged = 0;
		else if (p < m->staged_upto)
			staged = md_staged_word(m, w);
		else
			staged = ~0UL;
		bad = mask & ~(m->synced[w] & (pending ? staged : ~0UL));
		if (!bad)
			continue;
		if (bad & staged)
			need = max(need, m->round_started);
		if (bad & ~staged) {
			__set_bit(p, m->page_dirty);
			need = max(need, m->round_started + 1);
		}
	}
	return need;
}

/* Regions [first, *end) clipped to the bitmap; false: none left, or no metadata. */
static bool md_clip(const struct repl_meta *m, u64 first, u64 *end)
{
	if (!m)
		return false;
	*end = min(*end, m->nr_regions);
	return first < *end;
}

/*
 * Before a write to regions [first, end) reaches the disk, their bits must
 * be durable.  Returns 0 when they are, else the metadata round the write
 * has to wait for: then the owner keeps its records unpublished and hands
 * the bio to repl_meta_defer() with the largest round its calls returned.
 * Any context; the ring calls it with ring->lock held, with at most
 * REPL_CHUNK_BITS regions per call (a large discard in several calls).
 */
u64 repl_meta_intent(struct repl_meta *m, u64 first, u64 end)
{
	unsigned long flags;
	u64 x, xend, k, need = 0;

	if (!md_clip(m, first, &end))
		return 0;
	spin_lock_irqsave(&m->lock, flags);
	if (m->failed)
		goto out;
	m->nr_intent += repl_bitmap_set_count(m->intent, first, end);
	repl_bitmap_set_count(m->touched, first, end);
	/* the first write to an extent sets all its regions, up to max_extents */
	x = first >> m->ext_shift;
	xend = ((end - 1) >> m->ext_shift) + 1;
	while (x < xend && m->nr_ext_active < m->max_extents) {
		x = find_next_zero_bit(m->ext_active, xend, x);
		if (x >= xend)
			break;
		k = find_next_bit(m->ext_active, xend, x) - x;
		k = min_t(u64, k, m->max_extents - m->nr_ext_active);
		md_activate_extents(m, x, k);
		x += k;
	}
	/* beyond max_extents, a write marks its own regions */
	md_ondisk_set(m, first, end);
	need = md_need_round(m, first, end);
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
 * held, at most REPL_CHUNK_BITS regions per call.
 */
void repl_meta_set_dirty(struct repl_meta *m, u64 first, u64 end)
{
	unsigned long flags;

	if (!md_clip(m, first, &end))
		return;
	spin_lock_irqsave(&m->lock, flags);
	if (!m->failed) {
		repl_bitmap_set_count(m->oos, first, end);
		if (md_ondisk_set(m, first, end))
			queue_work(m->wq, &m->work);
	}
	spin_unlock_irqrestore(&m->lock, flags);
}

/*
 * Clear bits @c of word @w on disk, but for those of an active extent
 * (they stay until the extent goes); true when a page became dirty.
 * m->lock held.
 */
static bool md_ondisk_clear(struct repl_meta *m, u64 w, unsigned long c)
{
	if (c)
		c &= ~md_ext_mask(m, w);
	if (!c)
		return false;
	m->ondisk[w] &= ~c;
	__set_bit(w / MD_PAGE_WORDS, m->page_dirty);
	return true;
}

/*
 * A resync cleared regions [first, end) (the ring cleared them in its dirty
 * bitmap).  A region's bit on disk goes unless it has intent or its extent
 * is active.  Any context; the ring calls it with ring->lock held, at most
 * REPL_CHUNK_BITS regions per call.
 */
void repl_meta_clear_dirty(struct repl_meta *m, u64 first, u64 end)
{
	unsigned long flags, c;
	bool dirtied = false;
	u64 w;

	if (!md_clip(m, first, &end))
		return;
	spin_lock_irqsave(&m->lock, flags);
	if (m->failed)
		goto out;
	for (w = first / BITS_PER_LONG; w * BITS_PER_LONG < end; w++) {
		c = repl_word_mask(w, first, end) & m->oos[w];
		if (!c)
			continue;
		m->oos[w] &= ~c;
		dirtied |= md_ondisk_clear(m, w, c & m->ondisk[w] & ~m->intent[w]);
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
 * intent.  Process context; every loop is in pieces (see below).
 */
static bool md_clear_pass(struct repl_meta *m, bool final)
{
	u64 nwords = BITS_TO_LONGS(m->nr_regions), w, i, n, x, xe, work;
	u64 ext_words = max_t(u64, 1, BIT_ULL(m->ext_shift) / BITS_PER_LONG);
	bool dirtied = false, again;
	unsigned long *t, c;

	mutex_lock(&m->clear_lock);
	/*
	 * Rotate: touched_prev, which only the clear pass reads, is zeroed
	 * without the lock; then the pointers swap under it.
	 */
	md_zero_words(m->touched_prev, nwords);
	spin_lock_irq(&m->lock);
	t = m->touched_prev;
	m->touched_prev = m->touched;
	m->touched = t;
	spin_unlock_irq(&m->lock);

	/* only the clear pass uses busy */
	md_zero_words(m->busy, nwords);
	m->ops->busy(m->ctx, m->busy);

	/*
	 * Intent, REPL_CHUNK_WORDS words per hold.  A region written between
	 * two holds is in touched, and the regions of its records are busy
	 * or in touched, so the pieces clear nothing a write needs.
	 */
	for (w = 0; w < nwords; w += n) {
		n = min_t(u64, REPL_CHUNK_WORDS, nwords - w);
		spin_lock_irq(&m->lock);
		for (i = w; i < w + n; i++) {
			c = m->intent[i];
			if (!c)
				continue;
			c &= ~m->busy[i];
			if (!final)
				c &= ~(m->touched[i] | m->touched_prev[i]);
			if (!c)
				continue;
			m->intent[i] &= ~c;
			m->nr_intent -= hweight_long(c);
			/* regions marked on their own (max_extents were active) */
			dirtied |= md_ondisk_clear(m, i, c & ~m->oos[i] & m->ondisk[i]);
		}
		spin_unlock_irq(&m->lock);
		cond_resched();
	}

	/*
	 * Extents: a window of REPL_CHUNK_BITS extents and about
	 * REPL_CHUNK_WORDS words of deactivation per hold.  An extent
	 * activated meanwhile has intent in it, so it stays.
	 */
	for (x = 0; x < m->nr_ext; ) {
		xe = min_t(u64, m->nr_ext, x + REPL_CHUNK_BITS);
		work = 0;
		spin_lock_irq(&m->lock);
		while ((x = find_next_bit(m->ext_active, xe, x)) < xe &&
		       work < REPL_CHUNK_WORDS) {
			dirtied |= md_deactivate_extent(m, x);
			work += ext_words;
			x++;
		}
		spin_unlock_irq(&m->lock);
		cond_resched();
	}
	spin_lock_irq(&m->lock);
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

/*
 * The peer area is the daemon's: the target only makes sure it lies after
 * the bitmap and inside the device, so that nothing it writes overlaps it.
 */
static int md_check_peers(const struct dm_repl_md_sb *sb, u64 bitmap_end, u64 size,
			  char **error)
{
	u64 off = le64_to_cpu(sb->peers_offset);
	u32 n = le32_to_cpu(sb->max_peers);
	u64 bytes = le64_to_cpu(sb->bitmap_bytes);

	if (!n || n > DM_REPL_MD_MAX_PEERS || off < bitmap_end ||
	    !IS_ALIGNED(off, DM_REPL_MD_BITMAP_ALIGN) || off > size ||
	    DM_REPL_MD_SB_BYTES + (u64)n * bytes > size - off) {
		*error = "Metadata peer area location or size invalid";
		return -EINVAL;
	}
	return 0;
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
	if (le32_to_cpu(sb->version) == 1) {
		*error = "Metadata format version 1: run 'replctl upgrade-md'";
		return -EINVAL;
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
	    m->bitmap_bytes < need ||
	    !IS_ALIGNED(m->bitmap_bytes, DM_REPL_MD_BITMAP_ALIGN) ||
	    m->bitmap_offset > size || m->bitmap_bytes > size - m->bitmap_offset) {
		*error = "Metadata bitmap location or size invalid";
		return -EINVAL;
	}
	return md_check_peers(sb, m->bitmap_offset + m->bitmap_bytes, size, error);
}

/* The bitmaps of @t, sized by t->nr_regions (nr_pages, nr_ext set here). */
static int md_alloc_maps(struct repl_meta *t)
{
	u64 need = round_up(DIV_ROUND_UP_ULL(t->nr_regions, 8), DM_REPL_MD_BITMAP_ALIGN);

	t->nr_pages = DIV_ROUND_UP_ULL(need, PAGE_SIZE);
	t->nr_ext = DIV_ROUND_UP_ULL(t->nr_regions, BIT_ULL(t->ext_shift));
	t->ondisk = vzalloc((u64)t->nr_pages * PAGE_SIZE);
	t->staging = vzalloc((u64)t->nr_pages * PAGE_SIZE);
	t->synced = vzalloc((u64)t->nr_pages * PAGE_SIZE);
	t->oos = md_bitmap_alloc(t->nr_regions);
	t->intent = md_bitmap_alloc(t->nr_regions);
	t->ext_active = md_bitmap_alloc(t->nr_ext);
	t->touched = md_bitmap_alloc(t->nr_regions);
	t->touched_prev = md_bitmap_alloc(t->nr_regions);
	t->busy = md_bitmap_alloc(t->nr_regions);
	t->page_dirty = md_bitmap_alloc(t->nr_pages);
	t->page_pending = md_bitmap_alloc(t->nr_pages);
	if (!t->ondisk || !t->staging || !t->synced || !t->oos || !t->intent ||
	    !t->ext_active || !t->touched || !t->touched_prev || !t->busy ||
	    !t->page_dirty || !t->page_pending)
		return -ENOMEM;
	return 0;
}

static void md_free_maps(struct repl_meta *t)
{
	kvfree(t->page_pending);
	kvfree(t->page_dirty);
	kvfree(t->busy);
	kvfree(t->touched_prev);
	kvfree(t->touched);
	kvfree(t->ext_active);
	kvfree(t->intent);
	kvfree(t->oos);
	vfree(t->synced);
	vfree(t->staging);
	vfree(t->ondisk);
}

/*
 * Growing the device (a table with a larger length): the bitmaps for the
 * new size, allocated by the table's constructor and swapped in by its
 * preresume, the device suspended.
 */
struct repl_meta_grow {
	u64 dev_sectors;
	struct repl_meta maps;	/* only the bitmaps and their sizes */
};

void repl_meta_grow_free(struct repl_meta_grow *g)
{
	if (!g)
		return;
	md_free_maps(&g->maps);
	kfree(g);
}

/* Can the metadata describe @dev_sectors?  Then the bitmaps for it. */
struct repl_meta_grow *repl_meta_grow_prepare(struct repl_meta *m, u64 dev_sectors,
					      u64 nr_regions, char **error)
{
	u64 need = round_up(DIV_ROUND_UP_ULL(nr_regions, 8), DM_REPL_MD_BITMAP_ALIGN);
	struct repl_meta_grow *g;

	if (need > m->bitmap_bytes) {
		*error = "Metadata has no room for that size (create-md --max-size)";
		return ERR_PTR(-ENOSPC);
	}
	g = kzalloc(sizeof(*g), GFP_KERNEL);
	if (!g) {
		*error = "Cannot allocate the metadata bitmap";
		return ERR_PTR(-ENOMEM);
	}
	g->dev_sectors = dev_sectors;
	g->maps.nr_regions = nr_regions;
	g->maps.ext_shift = m->ext_shift;
	if (md_alloc_maps(&g->maps)) {
		repl_meta_grow_free(g);
		*error = "Cannot allocate the metadata bitmap";
		return ERR_PTR(-ENOMEM);
	}
	return g;
}

/* Copy the first @n words of @from into @to, rescheduling. */
static void md_copy_words(unsigned long *to, const unsigned long *from, u64 n)
{
	u64 w, k;

	for (w = 0; w < n; w += k) {
		k = min_t(u64, n - w, 64 * REPL_CHUNK_WORDS);
		memcpy(to + w, from + w, k * sizeof(*to));
		cond_resched();
	}
}

/*
 * Swap in the grown bitmaps (the old contents copied) and mark regions
 * [@first, new nr_regions) out of sync: the grown part, and the old last
 * region when it was partial.  Their bits are written before the
 * superblock gets the new size, so that a crash never leaves a larger
 * device whose new regions look in sync.  The device is suspended and
 * quiesced (postsuspend), and the owner keeps its consumer's bitmap calls
 * out: nothing else reads or writes the bitmaps.  Frees @g.
 */
void repl_meta_grow_commit(struct repl_meta *m, struct repl_meta_grow *g, u64 first)
{
	struct repl_meta *t = &g->maps;
	u64 words = BITS_TO_LONGS(m->nr_regions), pwords = (u64)m->nr_pages * MD_PAGE_WORDS;
	int r;

	cancel_delayed_work_sync(&m->clear_work);
	flush_work(&m->work);
	mutex_lock(&m->clear_lock);
	md_copy_words(t->ondisk, m->ondisk, pwords);
	md_copy_words((unsigned long *)t->staging, (unsigned long *)m->staging, pwords);
	md_copy_words(t->synced, m->synced, pwords);
	md_copy_words(t->oos, m->oos, words);
	md_copy_words(t->intent, m->intent, words);
	md_copy_words(t->touched, m->touched, words);
	md_copy_words(t->touched_prev, m->touched_prev, words);
	md_copy_words(t->ext_active, m->ext_active, BITS_TO_LONGS(m->nr_ext));
	bitmap_copy(t->page_dirty, m->page_dirty, m->nr_pages);
	spin_lock_irq(&m->lock);
	swap(m->ondisk, t->ondisk);
	swap(m->staging, t->staging);
	swap(m->synced, t->synced);
	swap(m->oos, t->oos);
	swap(m->intent, t->intent);
	swap(m->touched, t->touched);
	swap(m->touched_prev, t->touched_prev);
	swap(m->busy, t->busy);
	swap(m->ext_active, t->ext_active);
	swap(m->page_dirty, t->page_dirty);
	swap(m->page_pending, t->page_pending);
	swap(m->nr_regions, t->nr_regions);
	swap(m->nr_pages, t->nr_pages);
	swap(m->nr_ext, t->nr_ext);
	if (!m->failed && first < m->nr_regions) {
		repl_bitmap_set_count(m->oos, first, m->nr_regions);
		md_ondisk_set(m, first, m->nr_regions);
	}
	spin_unlock_irq(&m->lock);
	mutex_unlock(&m->clear_lock);
	/* the new bits in a round of their own, then the size */
	md_work(&m->work);
	if (!READ_ONCE(m->failed)) {
		mutex_lock(&m->io_lock);
		m->sb->dev_sectors = cpu_to_le64(g->dev_sectors);
		r = md_write_sb(m, !m->active);
		mutex_unlock(&m->io_lock);
		if (r)
			md_fail(m, r);
	}
	repl_meta_grow_free(g);
}

/* The metadata goes (no target, no I/O); also undoes a half-built one. */
void repl_meta_destroy(struct repl_meta *m)
{
	if (!m)
		return;
	cancel_delayed_work_sync(&m->clear_work);
	cancel_work_sync(&m->work);
	md_free_maps(m);
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
	u64 w, nwords, n = 0;
	u32 p;
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
	nwords = BITS_TO_LONGS(m->nr_regions);
	ret = md_alloc_maps(m);
	if (ret) {
		*error = "Cannot allocate the metadata bitmap";
		goto bad;
	}
	/* the bitmap the device has now; the rest of bitmap_bytes is room to grow */
	ret = md_io(m, REQ_OP_READ, m->staging, true, m->bitmap_offset,
		    (u64)m->nr_pages * PAGE_SIZE);
	if (ret) {
		*error = "Cannot read the metadata bitmap";
		goto bad;
	}
	/* no lock: nothing else knows this metadata yet */
	for (p = 0; p < m->nr_pages; p++) {
		bitmap_copy_le(md_page_ptr(m->ondisk, p), md_staging_page(m, p),
			       MD_PAGE_BITS);
		cond_resched();
	}
	/* bits at and above nr_regions are padding: ignored */
	repl_bitmap_clear_count(m->ondisk, m->nr_regions,
				(u64)m->nr_pages * MD_PAGE_BITS);
	memcpy(m->synced, m->ondisk, (u64)m->nr_pages * PAGE_SIZE);
	memcpy(m->oos, m->ondisk, nwords * sizeof(long));
	memcpy(dirty, m->ondisk, nwords * sizeof(long));
	for (w = 0; w < nwords; w++)
		n += hweight_long(m->ondisk[w]);
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
