// SPDX-License-Identifier: GPL-2.0
/*
 * dm-repl metadata device: a superblock and a persistent bitmap (format in
 * include/uapi/linux/dm-repl.h).
 *
 * A set bit means "this region may differ from a peer".  Three in-memory
 * bitmaps feed it:
 *  - ring->dirty: out of sync for sure (ring overflow, unacknowledged sync
 *    write, unclean shutdown); cleared only by a resync;
 *  - meta->intent: written since the bit was last cleared; set before the
 *    first write to a region reaches the disk, cleared lazily once no
 *    record touching the region is waiting for the peers (not released)
 *    or for its local write;
 *  - meta->ondisk: the image of the on-disk bitmap (dirty | intent, as
 *    it is to be written);
 *  - meta->staging: the pages a metadata round is writing (a copy taken
 *    when the round starts);
 *  - meta->synced: the image of what is durably on disk.
 *
 * A write to a region whose bit is not durable (synced, and not being
 * cleared by the round in flight) is held back (deferred) until a metadata
 * round has written the bitmap page with FUA; rounds batch every page
 * dirtied meanwhile, so one metadata write covers many regions, and a write
 * to a region whose bit is durable never waits, whatever happens to the
 * rest of its page.
 *
 * Write-intent extents (extent_kb, a power-of-2 number of regions, as
 * DRBD's activity-log extents): the first write to an extent that is not
 * active sets the bits of all its regions on disk, so the next writes
 * anywhere in the extent find their bit durable.  meta->ext_active: the
 * extents whose every region is set in ondisk for that reason; at most
 * max_extents of them (as DRBD's al-extents, it bounds the resync after a
 * crash): beyond, a write marks its own regions only.  Clearing
 * is lazy: a region's intent goes only after it was idle for two passes of
 * the clearing work (2 to 4 s), and an extent's bits go (back to the
 * out-of-sync bits of its regions) once none of its regions has intent,
 * so a hot extent keeps its bits and costs no metadata write.  After a
 * crash, every region of the extents that were active is resynced.
 *
 * Locking: the bitmaps and the deferred list are under ring->lock; metadata
 * I/O is serialized by meta->io_lock (work items, activate, quiesce).
 */
#include <linux/module.h>
#include <linux/bio.h>
#include <linux/blkdev.h>
#include <linux/dm-io.h>
#include <linux/ioprio.h>
#include <linux/slab.h>
#include <linux/vmalloc.h>
#include <linux/xxhash.h>
#include <linux/bitops.h>

#include "dm-repl-core.h"

#define MD_PAGE_BITS	(PAGE_SIZE * 8)
#define MD_CLEAR_INTERVAL	(2 * HZ)

struct repl_meta {
	struct repl_ring *ring;
	struct block_device *bdev;
	dev_t devt;
	struct dm_io_client *io;
	struct mutex io_lock;		/* serializes metadata I/O */
	struct dm_repl_md_sb *sb;	/* DM_REPL_MD_SB_BYTES, kmalloc */
	u64 bitmap_offset;
	u64 bitmap_bytes;
	u32 nr_pages;
	u8 *ondisk;			/* vmalloc, nr_pages pages, LE bit order */
	u8 *staging;			/* the pages being written */
	u8 *synced;			/* what is durably on disk */
	unsigned long *intent;
	unsigned long *ext_active;	/* extents whose bits are all in ondisk */
	u32 ext_shift;			/* log2 of regions per extent */
	u64 nr_ext;
	u64 nr_ext_active;
	unsigned long *touched;		/* written during this clear interval */
	unsigned long *touched_prev;	/* ... and during the one before */
	unsigned long *busy;		/* clear pass: regions still needed */
	unsigned long *page_dirty;	/* ondisk page changed, not written */
	unsigned long *page_pending;	/* ondisk page being written */
	u64 round_started, round_done;
	u64 nr_intent;
	struct bio_list deferred;
	struct work_struct work;
	struct delayed_work clear_work;
	bool failed;
	bool was_clean;			/* superblock said clean at load */
	bool active;			/* resumed: the superblock says in use */
};

/* kvmalloc: a bitmap of millions of regions is more than kmalloc gives */
static unsigned long *md_bitmap_alloc(u64 bits)
{
	return kvcalloc(BITS_TO_LONGS(bits), sizeof(unsigned long), GFP_KERNEL);
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

/* Write every page set in m->page_pending, FUA.  io_lock held. */
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

/* ring->lock held: take the deferred bios whose round is on disk. */
static void md_take_ready(struct repl_meta *m, struct bio_list *out)
{
	struct bio_list keep = BIO_EMPTY_LIST;
	struct bio *bio;

	while ((bio = bio_list_pop(&m->deferred))) {
		struct repl_bio *pb = dm_per_bio_data(bio, sizeof(*pb));

		if (m->failed || pb->meta_round <= m->round_done) {
			repl_ring_meta_ready(m->ring, pb);
			bio_list_add(out, bio);
		} else {
			bio_list_add(&keep, bio);
		}
	}
	bio_list_merge(&m->deferred, &keep);
}

static void md_submit(struct bio_list *list)
{
	struct bio *bio;

	while ((bio = bio_list_pop(list)))
		submit_bio_noacct(bio);
}

/* ring->lock held: the metadata device failed; keep serving I/O. */
static void md_fail(struct repl_meta *m, int r)
{
	if (m->failed)
		return;
	m->failed = true;
	DMERR("%u:%u: metadata device write failed (%d): the bitmap is no longer persistent",
	      MAJOR(m->ring->devt), MINOR(m->ring->devt), r);
	repl_ring_queue_work(m->ring, &m->ring->event_work);
}

/* ring->lock held: copy the pages of this round (page_pending). */
static void md_copy_pages(struct repl_meta *m, u8 *to, const u8 *from)
{
	u32 p;

	for_each_set_bit(p, m->page_pending, m->nr_pages)
		memcpy(to + (u64)p * PAGE_SIZE, from + (u64)p * PAGE_SIZE, PAGE_SIZE);
}

/* Write rounds until no page is dirty, releasing deferred bios. */
static void md_work(struct work_struct *work)
{
	struct repl_meta *m = container_of(work, struct repl_meta, work);
	struct repl_ring *ring = m->ring;
	struct bio_list ready = BIO_EMPTY_LIST;
	u64 round;
	int r;

	mutex_lock(&m->io_lock);
	for (;;) {
		spin_lock_irq(&ring->lock);
		if (m->failed || bitmap_empty(m->page_dirty, m->nr_pages)) {
			md_take_ready(m, &ready);
			spin_unlock_irq(&ring->lock);
			break;
		}
		round = ++m->round_started;
		bitmap_copy(m->page_pending, m->page_dirty, m->nr_pages);
		bitmap_zero(m->page_dirty, m->nr_pages);
		md_copy_pages(m, m->staging, m->ondisk);
		spin_unlock_irq(&ring->lock);

		r = md_write_pages(m);

		spin_lock_irq(&ring->lock);
		if (r)
			md_fail(m, r);
		else
			md_copy_pages(m, m->synced, m->staging);
		bitmap_zero(m->page_pending, m->nr_pages);
		m->round_done = round;
		md_take_ready(m, &ready);
		spin_unlock_irq(&ring->lock);
		md_submit(&ready);
	}
	mutex_unlock(&m->io_lock);
	md_submit(&ready);
}

/* ring->lock held: the first write to extent x sets all its regions. */
static void md_activate_extent(struct repl_meta *m, u64 x)
{
	u64 r = x << m->ext_shift;
	u64 end = min_t(u64, r + BIT_ULL(m->ext_shift), m->ring->nr_regions);

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
 * ring->lock held: an extent with no region in intent goes; its regions
 * keep their bit on disk only when out of sync.  Returns true when that
 * changed a page.
 */
static bool md_deactivate_extent(struct repl_meta *m, u64 x)
{
	struct repl_ring *ring = m->ring;
	u64 r = x << m->ext_shift;
	u64 end = min_t(u64, r + BIT_ULL(m->ext_shift), ring->nr_regions);
	bool dirtied = false;

	if (find_next_bit(m->intent, end, r) < end)
		return false;
	__clear_bit(x, m->ext_active);
	m->nr_ext_active--;
	for (; r < end; r++) {
		if (test_bit(r, ring->dirty) || !test_bit_le(r, m->ondisk))
			continue;
		__clear_bit_le(r, m->ondisk);
		__set_bit(md_page(r), m->page_dirty);
		dirtied = true;
	}
	return dirtied;
}

/*
 * ring->lock held.  Before a write to [pb->sector, +nr_sectors) reaches the
 * disk, its regions' bits must be durable.  Returns true when the bio has
 * to wait for a metadata round (repl_meta_defer()).
 */
bool repl_meta_intent(struct repl_ring *ring, struct repl_bio *pb)
{
	struct repl_meta *m = ring->meta;
	unsigned int shift = ring->region_shift - SECTOR_SHIFT;
	u64 first, last, r, need = 0;
	bool defer = false, pending;
	u32 page;

	if (!m || m->failed || !pb->nr_sectors || pb->sector >= ring->dev_sectors)
		return false;
	first = pb->sector >> shift;
	last = min_t(u64, (pb->sector + pb->nr_sectors - 1) >> shift,
		     ring->nr_regions - 1);
	for (r = first; r <= last; r++) {
		if (!__test_and_set_bit(r, m->intent))
			m->nr_intent++;
		__set_bit(r, m->touched);
		page = md_page(r);
		if (!test_bit(r >> m->ext_shift, m->ext_active) &&
		    m->nr_ext_active < ring->max_extents)
			md_activate_extent(m, r >> m->ext_shift);
		if (!test_bit_le(r, m->ondisk)) {
			__set_bit_le(r, m->ondisk);
			__set_bit(page, m->page_dirty);
		}
		pending = test_bit(page, m->page_pending);
		/* durable, and the round in flight does not clear it */
		if (test_bit_le(r, m->synced) && (!pending || test_bit_le(r, m->staging)))
			continue;
		defer = true;
		if (pending && test_bit_le(r, m->staging)) {
			need = max(need, m->round_started);
		} else {
			__set_bit(page, m->page_dirty);
			need = max(need, m->round_started + 1);
		}
	}
	if (!delayed_work_pending(&m->clear_work))
		repl_ring_delay_work(m->ring, &m->clear_work, MD_CLEAR_INTERVAL);
	if (defer)
		pb->meta_round = need;
	return defer;
}

/* ring->lock held: the bio waits for its metadata round. */
void repl_meta_defer(struct repl_ring *ring, struct bio *bio)
{
	bio_list_add(&ring->meta->deferred, bio);
	repl_ring_queue_work(ring, &ring->meta->work);
}

/* ring->lock held: an out-of-sync region must be set on disk too. */
void repl_meta_set_dirty_bit(struct repl_ring *ring, u64 region)
{
	struct repl_meta *m = ring->meta;

	if (!m || m->failed || test_bit_le(region, m->ondisk))
		return;
	__set_bit_le(region, m->ondisk);
	__set_bit(md_page(region), m->page_dirty);
	repl_ring_queue_work(m->ring, &m->work);
}

/* ring->lock held: a resync cleared an out-of-sync region. */
void repl_meta_clear_dirty_bit(struct repl_ring *ring, u64 region)
{
	struct repl_meta *m = ring->meta;

	if (!m || m->failed || test_bit(region, m->intent) ||
	    test_bit(region >> m->ext_shift, m->ext_active) ||
	    !test_bit_le(region, m->ondisk))
		return;
	__clear_bit_le(region, m->ondisk);
	__set_bit(md_page(region), m->page_dirty);
	repl_ring_queue_work(m->ring, &m->work);
}

/*
 * Lazy clearing.  A region's intent bit may go when no record that is not
 * both released (every peer has it) and written locally touches it, and
 * (unless @final) no write touched it during this interval or the one
 * before; an extent goes with the last intent in it.  Records in
 * [min(released, local_done), reserved) are exactly the ones still needed;
 * slots are not reused below that point (ring_reserve()), so they can be
 * read without the lock.  Returns true while some region has intent.
 */
static bool md_clear_pass(struct repl_meta *m, bool final)
{
	struct repl_ring *ring = m->ring;
	unsigned int shift = ring->region_shift - SECTOR_SHIFT;
	u64 lo, hi, s, r, x, first, last;
	bool dirtied = false, again;

	spin_lock_irq(&ring->lock);
	lo = min(ring->released, ring->local_done);
	hi = ring->reserved;
	bitmap_copy(m->touched_prev, m->touched, ring->nr_regions);
	bitmap_zero(m->touched, ring->nr_regions);
	spin_unlock_irq(&ring->lock);

	bitmap_zero(m->busy, ring->nr_regions);
	for (s = lo; s < hi; s++) {
		const struct dm_repl_rec *rec = &ring->recs[s & (ring->nr_recs - 1)];
		u64 sector = READ_ONCE(rec->sector);
		u32 nr = READ_ONCE(rec->nr_sectors);

		if (!nr || sector >= ring->dev_sectors)
			continue;
		first = sector >> shift;
		last = min_t(u64, (sector + nr - 1) >> shift, ring->nr_regions - 1);
		bitmap_set(m->busy, first, last - first + 1);
		cond_resched();
	}

	spin_lock_irq(&ring->lock);
	for_each_set_bit(r, m->intent, ring->nr_regions) {
		if (test_bit(r, m->busy) ||
		    (!final && (test_bit(r, m->touched) || test_bit(r, m->touched_prev))))
			continue;
		__clear_bit(r, m->intent);
		m->nr_intent--;
		/* a region marked on its own (max_extents were active) */
		if (!test_bit(r >> m->ext_shift, m->ext_active) &&
		    !test_bit(r, ring->dirty) && test_bit_le(r, m->ondisk)) {
			__clear_bit_le(r, m->ondisk);
			__set_bit(md_page(r), m->page_dirty);
			dirtied = true;
		}
	}
	for_each_set_bit(x, m->ext_active, m->nr_ext)
		dirtied |= md_deactivate_extent(m, x);
	again = m->nr_intent != 0;
	spin_unlock_irq(&ring->lock);
	if (dirtied)
		repl_ring_queue_work(m->ring, &m->work);
	return again;
}

static void md_clear_work(struct work_struct *work)
{
	struct repl_meta *m = container_of(to_delayed_work(work), struct repl_meta,
					   clear_work);

	if (md_clear_pass(m, false))
		repl_ring_delay_work(m->ring, &m->clear_work, MD_CLEAR_INTERVAL);
}

/* The superblock says "in use": before the first write after a resume. */
int repl_meta_activate(struct repl_ring *ring)
{
	struct repl_meta *m = ring->meta;
	int r;

	if (!m || m->failed)
		return 0;
	mutex_lock(&m->io_lock);
	m->sb->role = cpu_to_le32(DM_REPL_MD_ROLE_PRIMARY);
	r = md_write_sb(m, false);
	if (!r)
		m->active = true;
	mutex_unlock(&m->io_lock);
	if (r) {
		DMERR("%u:%u: cannot write the metadata superblock (%d)",
		      MAJOR(ring->devt), MINOR(ring->devt), r);
		return r;
	}
	return 0;
}

/*
 * Generation identifiers, kept in the superblock for the daemon (it decides
 * with them what a resync must do when peers meet).  Setting them writes
 * the superblock before the message returns.
 */
int repl_meta_get_gens(struct repl_ring *ring, u64 *gen)
{
	struct repl_meta *m = ring->meta;
	int i;

	if (!m)
		return -ENODEV;
	mutex_lock(&m->io_lock);
	for (i = 0; i < 4; i++)
		gen[i] = le64_to_cpu(m->sb->gen[i]);
	mutex_unlock(&m->io_lock);
	return 0;
}

int repl_meta_set_gens(struct repl_ring *ring, const u64 *gen)
{
	struct repl_meta *m = ring->meta;
	int i, r;

	if (!m)
		return -ENODEV;
	if (m->failed)
		return -EIO;
	mutex_lock(&m->io_lock);
	for (i = 0; i < 4; i++)
		m->sb->gen[i] = cpu_to_le64(gen[i]);
	r = md_write_sb(m, !m->active);
	mutex_unlock(&m->io_lock);
	if (r) {
		spin_lock_irq(&ring->lock);
		md_fail(m, r);
		spin_unlock_irq(&ring->lock);
	}
	return r;
}

/* No I/O in flight (postsuspend, last target gone): write it all, clean. */
void repl_meta_quiesce(struct repl_ring *ring)
{
	struct repl_meta *m = ring->meta;
	int r;

	if (!m)
		return;
	/* nothing is in flight: every region no record needs can go now */
	cancel_delayed_work_sync(&m->clear_work);
	if (!m->failed)
		md_clear_pass(m, true);
	flush_work(&m->work);
	if (m->failed)
		return;
	mutex_lock(&m->io_lock);
	r = md_write_sb(m, true);
	m->active = false;
	mutex_unlock(&m->io_lock);
	if (r) {
		spin_lock_irq(&ring->lock);
		md_fail(m, r);
		spin_unlock_irq(&ring->lock);
	}
}

bool repl_meta_failed(struct repl_ring *ring)
{
	return ring->meta && ring->meta->failed;
}

u64 repl_meta_intent_regions(struct repl_ring *ring)
{
	return ring->meta ? ring->meta->nr_intent : 0;
}

u64 repl_meta_active_extents(struct repl_ring *ring)
{
	return ring->meta ? ring->meta->nr_ext_active : 0;
}

static int md_check(struct repl_ring *ring, struct repl_meta *m,
		    const struct repl_ring_geometry *geo, char **error)
{
	struct dm_repl_md_sb *sb = m->sb;
	u64 need = DIV_ROUND_UP_ULL(ring->nr_regions, 8), size;

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
	    strcmp(sb->resource, geo->name)) {
		*error = "Metadata belongs to another resource";
		return -EINVAL;
	}
	if (le64_to_cpu(sb->dev_sectors) != ring->dev_sectors) {
		*error = "Metadata describes a device of another size";
		return -EINVAL;
	}
	if (le32_to_cpu(sb->region_shift) != ring->region_shift) {
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

/*
 * Load and check the metadata of a new ring.  Every bit set on disk
 * becomes out of sync: after a clean shutdown those are the regions that
 * were still out of sync or waiting for peers; after a crash they bound
 * what may differ.
 */
int repl_meta_load(struct repl_ring *ring, const struct repl_ring_geometry *geo,
		   char **error)
{
	struct repl_meta *m;
	u64 r;
	int ret;

	m = kzalloc(sizeof(*m), GFP_KERNEL);
	if (!m) {
		*error = "Cannot allocate metadata";
		return -ENOMEM;
	}
	ring->meta = m;
	m->ring = ring;
	m->bdev = geo->meta_dev->bdev;
	m->devt = geo->meta_dev->bdev->bd_dev;
	mutex_init(&m->io_lock);
	bio_list_init(&m->deferred);
	INIT_WORK(&m->work, md_work);
	INIT_DELAYED_WORK(&m->clear_work, md_clear_work);
	m->io = dm_io_client_create();
	if (IS_ERR(m->io)) {
		ret = PTR_ERR(m->io);
		m->io = NULL;
		*error = "Cannot create metadata I/O client";
		return ret;
	}
	m->sb = kzalloc(DM_REPL_MD_SB_BYTES, GFP_KERNEL);
	if (!m->sb) {
		*error = "Cannot allocate metadata";
		return -ENOMEM;
	}
	ret = md_io(m, REQ_OP_READ, m->sb, false, 0, DM_REPL_MD_SB_BYTES);
	if (ret) {
		*error = "Cannot read the metadata device";
		return ret;
	}
	ret = md_check(ring, m, geo, error);
	if (ret)
		return ret;
	m->nr_pages = DIV_ROUND_UP_ULL(m->bitmap_bytes, PAGE_SIZE);
	m->ondisk = vzalloc((u64)m->nr_pages * PAGE_SIZE);
	m->staging = vzalloc((u64)m->nr_pages * PAGE_SIZE);
	m->synced = vzalloc((u64)m->nr_pages * PAGE_SIZE);
	m->intent = md_bitmap_alloc(ring->nr_regions);
	m->ext_shift = ring->extent_shift - ring->region_shift;
	m->nr_ext = DIV_ROUND_UP_ULL(ring->nr_regions, BIT_ULL(m->ext_shift));
	m->ext_active = md_bitmap_alloc(m->nr_ext);
	m->touched = md_bitmap_alloc(ring->nr_regions);
	m->touched_prev = md_bitmap_alloc(ring->nr_regions);
	m->busy = md_bitmap_alloc(ring->nr_regions);
	m->page_dirty = md_bitmap_alloc(m->nr_pages);
	m->page_pending = md_bitmap_alloc(m->nr_pages);
	if (!m->ondisk || !m->staging || !m->synced || !m->intent || !m->ext_active ||
	    !m->touched ||
	    !m->touched_prev || !m->busy || !m->page_dirty || !m->page_pending) {
		*error = "Cannot allocate the metadata bitmap";
		return -ENOMEM;
	}
	ret = md_io(m, REQ_OP_READ, m->ondisk, true, m->bitmap_offset, m->bitmap_bytes);
	if (ret) {
		*error = "Cannot read the metadata bitmap";
		return ret;
	}
	memcpy(m->synced, m->ondisk, m->bitmap_bytes);
	m->was_clean = le32_to_cpu(m->sb->flags) & DM_REPL_MD_CLEAN;
	for (r = 0; r < ring->nr_regions; r++) {
		r = find_next_bit_le(m->ondisk, ring->nr_regions, r);
		if (r >= ring->nr_regions)
			break;
		__set_bit(r, ring->dirty);
		ring->nr_dirty++;
	}
	if (ring->nr_dirty) {
		ring->state |= DM_REPL_STATE_DIRTY;
		DMINFO("%s: %s shutdown: %llu regions out of sync", geo->name,
		       m->was_clean ? "clean" : "unclean", ring->nr_dirty);
	}
	return 0;
}

/*
 * The last target leaves: write everything, mark the superblock clean, and
 * stop using the device (the target is about to close it).
 */
void repl_meta_detach(struct repl_ring *ring)
{
	struct repl_meta *m = ring->meta;

	if (!m)
		return;
	repl_meta_quiesce(ring);
	spin_lock_irq(&ring->lock);
	m->failed = true;	/* no more metadata I/O */
	spin_unlock_irq(&ring->lock);
	cancel_delayed_work_sync(&m->clear_work);
	flush_work(&m->work);
	m->bdev = NULL;
}

/* The ring's memory goes (no target, no I/O). */
void repl_meta_free(struct repl_ring *ring)
{
	struct repl_meta *m = ring->meta;

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
	vfree(m->synced);
	vfree(m->staging);
	vfree(m->ondisk);
	kfree(m->sb);
	if (m->io)
		dm_io_client_destroy(m->io);
	kfree(m);
	ring->meta = NULL;
}

dev_t repl_meta_devt(struct repl_ring *ring)
{
	return ring->meta ? ring->meta->devt : 0;
}
