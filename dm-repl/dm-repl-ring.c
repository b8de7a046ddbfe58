// SPDX-License-Identifier: GPL-2.0
/*
 * dm-repl ring: the write log shared with the replication daemon.
 *
 * One ring per mapped device.  It outlives a table reload (the new table's
 * target picks up the ring of the old one) and a daemon restart (the ring
 * belongs to the device, not to the consumer).  Userspace reaches it through
 * the misc device /dev/dm-repl (dm-repl-dev.c), which calls the consumer
 * functions at the end of this file.  The work queues are the module's
 * (dm-repl-target.c), handed over in the geometry.
 *
 * Locking: repl_rings_lock (mutex) protects the registry and the consumer
 * attachment; ring->tmutex the list of targets using the ring; ring->lock
 * (spinlock, taken from bio completion context, so irq-safe) everything
 * else: producer state, held bios, the dirty bitmap and the counters.
 * Never drop a ring reference while holding repl_rings_lock or tmutex.
 *
 * The metadata device (dm-repl-meta.c, ring->meta) has its own spinlock,
 * taken INSIDE ring->lock when the ring calls repl_meta_intent(),
 * repl_meta_set_dirty() or repl_meta_clear_dirty() with ring->lock held:
 * the order is always ring->lock -> meta's lock.  The metadata calls back
 * into the ring only through ring_meta_ops, never with its own lock held,
 * and those callbacks take ring->lock, so the order never inverts.  No
 * metadata mutex is ever taken under ring->lock.
 *
 * Everything userspace can write (the consumer line of the header, ioctl
 * arguments, mmap offsets) is read once and checked before use.  The
 * records and payloads are mapped read-only, so the kernel may trust them.
 */
#include <linux/module.h>
#include <linux/mm.h>
#include <linux/slab.h>
#include <linux/vmalloc.h>
#include <linux/uaccess.h>
#include <linux/log2.h>
#include <linux/mutex.h>
#include <linux/kref.h>
#include <linux/jiffies.h>
#include <linux/workqueue.h>
#include <linux/random.h>
#include <linux/cpumask.h>
#include <linux/topology.h>

#include "dm-repl-core.h"

#define CREATE_TRACE_POINTS
#include "dm-repl-trace.h"

static LIST_HEAD(repl_rings);
static DEFINE_MUTEX(repl_rings_lock);
static atomic_t repl_copy_turn = ATOMIC_INIT(0);

static inline u32 ring_slot(const struct repl_ring *ring, u64 seq)
{
	return seq & (ring->nr_recs - 1);
}

/* ring->lock held.  Mirror the kernel's view into the header (informational
 * for userspace; the kernel never reads these fields back).
 */
static void ring_mirror_state(struct repl_ring *ring)
{
	struct dm_repl_ring_hdr *hdr = ring->hdr;

	WRITE_ONCE(hdr->epoch, ring->epoch);
	WRITE_ONCE(hdr->state, ring->state);
	WRITE_ONCE(hdr->dirty_regions, ring->nr_dirty);
	WRITE_ONCE(hdr->overflows, ring->overflows);
	WRITE_ONCE(hdr->hold_timeouts, ring->hold_timeouts);
	WRITE_ONCE(hdr->released_seq, ring->released);
	WRITE_ONCE(hdr->acked_seq, ring->acked);
	/*
	 * The state fields above must be visible before the new state_seq,
	 * which the consumer reads (acquire) to learn that something changed.
	 */
	smp_store_release(&hdr->state_seq, ring->state_seq);
}

/* ring->lock held: a state change the daemon and dmsetup should see. */
static void ring_state_changed(struct repl_ring *ring)
{
	ring->state_seq++;
	ring_mirror_state(ring);
	queue_work(ring->wq, &ring->event_work);
	wake_up_all(&ring->poll_wq);
}

static void ring_event_work(struct work_struct *work)
{
	struct repl_ring *ring = container_of(work, struct repl_ring, event_work);
	struct repl_c *rc;

	/* dm_table_event() takes a mutex: only ever call it from here. */
	mutex_lock(&ring->tmutex);
	list_for_each_entry(rc, &ring->targets, ring_node)
		dm_table_event(rc->ti->table);
	mutex_unlock(&ring->tmutex);
}

/*
 * ring->lock held.  Mark regions [first, end) dirty, at most
 * REPL_CHUNK_BITS of them.  Every piece bumps dirty_gen: a copy of the
 * bitmap taken before it cannot be used to clear (CLEAR_DIRTY checks the
 * generation).
 */
static void ring_mark_chunk(struct repl_ring *ring, u64 first, u64 end)
{
	bool was_clean = !ring->nr_dirty;

	ring->nr_dirty += repl_bitmap_set_count(ring->dirty, first, end);
	repl_meta_set_dirty(ring->meta, first, end);
	ring->dirty_gen++;
	WRITE_ONCE(ring->hdr->dirty_gen, ring->dirty_gen);
	if (was_clean && ring->nr_dirty) {
		ring->state |= DM_REPL_STATE_DIRTY;
		ring_state_changed(ring);
	} else {
		WRITE_ONCE(ring->hdr->dirty_regions, ring->nr_dirty);
	}
}

/*
 * Mark regions [first, end) dirty, a chunk per hold of ring->lock (not
 * held on entry): a range can be the whole device.  May sleep.
 */
static void ring_mark_regions(struct repl_ring *ring, u64 first, u64 end)
{
	u64 e;

	while (first < end) {
		e = min(end, round_down(first, REPL_CHUNK_BITS) + REPL_CHUNK_BITS);
		spin_lock_irq(&ring->lock);
		ring_mark_chunk(ring, first, e);
		spin_unlock_irq(&ring->lock);
		first = e;
		if (first < end)
			cond_resched();
	}
}

/*
 * Mark the regions of an unlogged extent dirty (a discard: up to 4 GiB).
 * ring->lock not held; may sleep.
 */
static void repl_ring_mark_dirty(struct repl_ring *ring, sector_t sector, u32 nr)
{
	unsigned int shift = ring->region_shift - SECTOR_SHIFT;

	if (!nr || sector >= ring->dev_sectors)
		return;
	if (nr > ring->dev_sectors - sector)
		nr = ring->dev_sectors - sector;
	ring_mark_regions(ring, sector >> shift, ((sector + nr - 1) >> shift) + 1);
}

/*
 * The regions [*first, *end) whose bits must be durable on the metadata
 * device before the bio reaches the disk; false when there are none (no
 * metadata device, no extent).
 */
static bool ring_meta_regions(const struct repl_ring *ring,
			      const struct repl_bio *pb, u64 *first, u64 *end)
{
	unsigned int shift = ring->region_shift - SECTOR_SHIFT;

	if (!ring->meta || !pb->nr_sectors || pb->sector >= ring->dev_sectors)
		return false;
	*first = pb->sector >> shift;
	*end = min_t(u64, (pb->sector + pb->nr_sectors - 1) >> shift,
		     ring->nr_regions - 1) + 1;
	return true;
}

/*
 * ring->lock held: write intent for the next chunk of [*first, end)
 * (repl_meta_intent()); advances *first.  Returns the metadata round to
 * wait for, 0 for none.
 */
static u64 ring_meta_intent_chunk(struct repl_ring *ring, u64 *first, u64 end)
{
	u64 e = min(end, round_down(*first, REPL_CHUNK_BITS) + REPL_CHUNK_BITS);
	u64 round = repl_meta_intent(ring->meta, *first, e);

	*first = e;
	return round;
}

/*
 * Write intent for regions [first, end), a chunk per hold of ring->lock
 * (not held on entry); may sleep.  Returns the largest round to wait for.
 */
static u64 ring_meta_intent_rest(struct repl_ring *ring, u64 first, u64 end)
{
	u64 round = 0;

	while (first < end) {
		cond_resched();
		spin_lock_irq(&ring->lock);
		round = max(round, ring_meta_intent_chunk(ring, &first, end));
		spin_unlock_irq(&ring->lock);
	}
	return round;
}

/*
 * ring->lock held.  Reserve @nr record slots and @len payload bytes.  The
 * payload is contiguous; a payload that does not fit before the end of the
 * data area starts at offset 0.  All of it (and the skipped tail) is
 * charged to the last slot: the space is free once every record of the
 * write is released.
 */
static int ring_reserve(struct repl_ring *ring, u32 nr, u32 len, u64 *ret_seq,
			u64 *ret_off)
{
	u64 need = ALIGN(len, REPL_PAYLOAD_ALIGN), pad = 0, off = 0;
	u32 i, slot;

	/* a slot is reused only once released and written locally */
	if (ring->reserved + nr - min(ring->released, ring->local_done) >
	    ring->nr_recs)
		return -ENOSPC;
	if (need) {
		off = ring->data_head;
		if (need > ring->data_size - off) {
			pad = ring->data_size - off;
			off = 0;
		}
		if (ring->data_used + pad + need > ring->data_size)
			return -ENOSPC;
		ring->data_head = off + need;
		if (ring->data_head == ring->data_size)
			ring->data_head = 0;
		ring->data_used += pad + need;
	}
	for (i = 0; i < nr; i++) {
		slot = ring_slot(ring, ring->reserved + i);
		ring->slot_bytes[slot] = i == nr - 1 ? pad + need : 0;
		__clear_bit(slot, ring->slot_done);
		__clear_bit(slot, ring->slot_local);
	}
	*ret_seq = ring->reserved;
	ring->reserved += nr;
	*ret_off = off;
	return 0;
}

/*
 * ring->lock held.  The record @seq is complete: publish every complete
 * record in sequence order, and wake the consumer if it had caught up.
 */
static void ring_commit(struct repl_ring *ring, u64 seq)
{
	struct dm_repl_ring_hdr *hdr = ring->hdr;
	u64 old = ring->prod;
	bool woke = false;

	__set_bit(ring_slot(ring, seq), ring->slot_done);
	while (ring->prod < ring->reserved &&
	       test_bit(ring_slot(ring, ring->prod), ring->slot_done))
		ring->prod++;
	if (ring->prod == old)
		return;
	/*
	 * Records and payloads below prod are complete: the store-release
	 * pairs with the consumer's load-acquire of prod_seq.
	 */
	smp_store_release(&hdr->prod_seq, ring->prod);
	/*
	 * Order the prod_seq store before the read_seq load; pairs with the
	 * full barrier between the consumer's read_seq store and its reload
	 * of prod_seq (and with the smp_mb() in repl_poll()).
	 */
	smp_mb();
	if (READ_ONCE(hdr->read_seq) == old) {
		wake_up(&ring->poll_wq);
		woke = true;
	}
	trace_repl_publish(ring->prod, woke);
}

/* ring->lock held: the local write of records [seq, seq + nr) is complete. */
static void ring_local_done(struct repl_ring *ring, u64 seq, u32 nr)
{
	while (nr--)
		__set_bit(ring_slot(ring, seq + nr), ring->slot_local);
	while (ring->local_done < ring->reserved &&
	       test_bit(ring_slot(ring, ring->local_done), ring->slot_local))
		ring->local_done++;
	WRITE_ONCE(ring->hdr->local_seq, ring->local_done);
}

/* ring->lock held: fill in a record's fields (not yet published). */
static void ring_fill(struct repl_ring *ring, u64 seq, u16 op, u16 flags,
		      sector_t sector, u32 nr_sectors, u64 off, u32 len)
{
	struct dm_repl_rec *rec = &ring->recs[ring_slot(ring, seq)];

	rec->seq = seq;
	rec->sector = sector;
	rec->nr_sectors = nr_sectors;
	rec->op = op;
	rec->flags = flags;
	rec->epoch = ring->epoch;
	rec->data_offset = off;
	rec->data_len = len;
	rec->__pad0 = 0;
	if (op == DM_REPL_OP_FLUSH) {
		ring->epoch++;
		WRITE_ONCE(ring->hdr->epoch, ring->epoch);
	}
	ring->bytes_logged += len;
}

/*
 * ring->lock held: sync writes stop waiting for acknowledgments until the
 * consumer has acknowledged everything logged so far (and is close to the
 * head); see repl_ring_kick().
 */
static void ring_degrade(struct repl_ring *ring)
{
	ring->degraded_seq = ring->reserved;
	ring->state |= DM_REPL_STATE_DEGRADED;
}

/* ring->lock held: the ring stayed full too long, stop logging. */
static void ring_enter_overflow(struct repl_ring *ring)
{
	if (ring->state & DM_REPL_STATE_OVERFLOW)
		return;
	ring->state |= DM_REPL_STATE_OVERFLOW;
	if (ring->state & DM_REPL_STATE_SYNC)
		ring_degrade(ring);
	ring->overflows++;
	DMWARN_LIMIT("%u:%u: ring full for too long: not logging writes, dirty bitmap takes over",
		     MAJOR(ring->devt), MINOR(ring->devt));
	ring_state_changed(ring);
	wake_up_all(&ring->space_wq);
}

/*
 * ring->lock held: drained (the consumer released every record) while in
 * overflow: log again, after a GAP record.  Records after the GAP do not
 * include the writes the dirty bitmap stands for, so not before every
 * unlogged write has its regions in the bitmap (nr_marking: the last one
 * to finish calls this again).
 */
static void ring_leave_overflow(struct repl_ring *ring)
{
	u64 seq, off;

	if (!(ring->state & DM_REPL_STATE_OVERFLOW) ||
	    ring->released != ring->reserved || ring->nr_marking)
		return;
	ring->state &= ~DM_REPL_STATE_OVERFLOW;
	if (!ring_reserve(ring, 1, 0, &seq, &off)) {
		ring_fill(ring, seq, DM_REPL_OP_GAP, 0, 0, 0, 0, 0);
		ring_local_done(ring, seq, 1);	/* nothing to write */
		ring_commit(ring, seq);
	}
	ring_state_changed(ring);
}

/* The regions of writes counted in nr_marking are all in the bitmap. */
static void ring_marking_done(struct repl_ring *ring)
{
	spin_lock_irq(&ring->lock);
	if (!--ring->nr_marking)
		ring_leave_overflow(ring);
	spin_unlock_irq(&ring->lock);
}

/* The sectors of the record that starts at @sector: up to a boundary. */
static u32 ring_piece_sectors(const struct repl_bio *pb, sector_t sector)
{
	sector_t end = pb->sector + pb->nr_sectors;
	sector_t next = round_down(sector, pb->rec_sectors) + pb->rec_sectors;

	return min(end, next) - sector;
}

/* How many records a write of [sector, +nr_sectors) needs. */
static u32 ring_nr_pieces(const struct repl_bio *pb)
{
	sector_t last = pb->sector + pb->nr_sectors - 1;

	return (last >> ilog2(pb->rec_sectors)) -
		(pb->sector >> ilog2(pb->rec_sectors)) + 1;
}

/* Copy @len bytes of the bio from @pos into the ring at @dst; advance @pos. */
static void ring_copy_bytes(u8 *dst, struct bio *bio, struct bvec_iter *pos,
			    u32 len)
{
	struct bvec_iter iter, start = *pos;
	struct bio_vec bv;

	start.bi_size = len;
	__bio_for_each_segment(bv, bio, iter, start) {
		memcpy_from_bvec(dst, &bv);
		dst += bv.bv_len;
	}
	bio_advance_iter(bio, pos, len);
}

/* Has every record of this write been acknowledged? */
static bool ring_acked(const struct repl_ring *ring, const struct repl_bio *pb)
{
	return pb->seq + pb->nr_recs <= ring->acked;
}

/*
 * ring->lock held: when a held write stops waiting for its ack.  Its hold
 * timeout counts from when it was mapped or from when the consumer last
 * acknowledged anything, whichever is later: a peer that keeps
 * acknowledging, however far behind (a slow link under a large backlog),
 * is slow, not gone, and its writes wait for it; only hold_timeout_ms
 * without any acknowledgment releases them.
 */
static unsigned long ring_hold_deadline(const struct repl_ring *ring,
					const struct repl_bio *pb)
{
	unsigned long from = pb->mapped;

	if (time_after(ring->acked_jif, from))
		from = ring->acked_jif;
	return from + pb->hold_jiffies;
}

/*
 * ring->lock held: add @pb to ring->held, which is kept in record order so
 * that an acknowledgment takes the acknowledged bios off its front instead
 * of walking every held bio (tens of thousands behind a slow link).  Bios
 * complete locally about in record order: the walk from the tail is short.
 */
static void ring_held_add(struct repl_ring *ring, struct repl_bio *pb)
{
	struct repl_bio *prev;

	list_for_each_entry_reverse(prev, &ring->held, held) {
		if (prev->seq < pb->seq) {
			list_add(&pb->held, &prev->held);
			return;
		}
	}
	list_add(&pb->held, &ring->held);
}

/*
 * ring->lock held.  Does a bio whose local write is done have to wait for
 * the acknowledgment of its record?  If so, hold it.
 */
static bool ring_hold_locked(struct repl_ring *ring, struct repl_bio *pb)
{
	if (READ_ONCE(*pb->mode) != REPL_MODE_SYNC ||
	    (ring->state & DM_REPL_STATE_DEGRADED) || ring_acked(ring, pb))
		return false;
	ring_held_add(ring, pb);
	pb->flags |= RB_HELD;
	if (!ring->nr_held++) {
		unsigned long deadline = ring_hold_deadline(ring, pb);

		mod_delayed_work(ring->wq, &ring->hold_work,
				 time_after(deadline, jiffies) ?
				 deadline - jiffies : 0);
	}
	return true;
}

/*
 * ring->lock held, after records were copied or RB_META_WAIT cleared: a
 * record is published once its payload is in the ring and its write's
 * metadata round (if it needed one) is on disk.  Records from @from on
 * are the ones not yet looked at, so each record is committed once.
 */
static void ring_commit_ready(struct repl_ring *ring, struct repl_bio *pb,
			      u32 from)
{
	if (pb->flags & RB_META_WAIT)
		return;
	for (; from < pb->nr_copied; from++)
		ring_commit(ring, pb->seq + from);
}

/*
 * ring->lock held: the metadata round a deferred bio waited for is on disk
 * (or the metadata device failed); publish the records already copied
 * (the copy worker publishes the rest).
 */
static void ring_meta_publish(struct repl_ring *ring, struct repl_bio *pb)
{
	if (!(pb->flags & RB_META_WAIT))
		return;
	pb->flags &= ~RB_META_WAIT;
	ring_commit_ready(ring, pb, 0);
}

/*
 * Copy worker: the payload goes into the ring, record by record, while the
 * local write runs; each record is published as soon as it is copied, so
 * the consumer can ship the first piece of a large write while the rest is
 * still being copied.  The bio cannot complete before the copy is done
 * (repl_ring_end_io() waits for RB_COPIED), so its pages stay valid.
 */
static void ring_copy_work(struct work_struct *work)
{
	struct repl_bio *pb = container_of(work, struct repl_bio, copy_work);
	struct bio *bio = dm_bio_from_per_bio_data(pb, sizeof(*pb));
	struct repl_ring *ring = pb->ring;
	struct bvec_iter pos = pb->iter;
	sector_t sector = pb->sector;
	u64 off = pb->data_off;
	/*
	 * Once RB_COPIED is set and the lock dropped, the local write's
	 * completion may end the bio and free pb: the loop must not read it
	 * again, not even for its condition.
	 */
	const u32 nr = pb->nr_recs;
	const u64 seq = pb->seq;
	bool complete = false;
	u32 i, len;

	for (i = 0; i < nr; i++) {
		len = ring_piece_sectors(pb, sector) << SECTOR_SHIFT;
		ring_copy_bytes(ring->data + off, bio, &pos, len);
		sector += len >> SECTOR_SHIFT;
		off += len;

		spin_lock_irq(&ring->lock);
		pb->nr_copied = i + 1;
		ring_commit_ready(ring, pb, i);
		if (i == nr - 1) {
			pb->flags |= RB_COPIED;
			/* A failed local write is never held. */
			if ((pb->flags & RB_LOCAL_DONE) &&
			    (bio->bi_status || !ring_hold_locked(ring, pb))) {
				pb->flags |= RB_RELEASED;
				complete = true;
			}
		}
		spin_unlock_irq(&ring->lock);
	}
	if (complete) {
		trace_repl_complete(seq, nr);
		bio_endio(bio);
	}
}

/*
 * The CPU a large payload is copied on: another CPU of the submitter's
 * node.  Waking a worker on the submitter's own CPU preempts the submitter
 * inside dm's submission path, before the local write is issued, so the
 * copy ran first and the local write (and the submitter's next write)
 * waited for it: ftrace of 1 MiB writes at qd8 on two CPUs showed 39 % of
 * the copies on the submitting CPU, ahead of their own local write.  The
 * node's other online CPUs take turns; alone on its node, the submitter's
 * CPU copies.
 */
static int repl_copy_cpu(void)
{
	unsigned int self = raw_smp_processor_id();
	const struct cpumask *node = cpumask_of_node(cpu_to_node(self));
	unsigned int n = cpumask_weight_and(node, cpu_online_mask), k, cpu;

	if (n < 2)
		return self;
	k = (unsigned int)atomic_inc_return(&repl_copy_turn) % (n - 1);
	for_each_cpu_and(cpu, node, cpu_online_mask) {
		if (cpu == self)
			continue;
		if (!k--)
			return cpu;
	}
	return self;	/* the online mask changed meanwhile */
}

/*
 * Log a bio: give it sequence numbers, copy its payload, publish its
 * records.  A write is cut into one record per @record_kb piece (split at
 * record_kb boundaries of the device), but stays one bio for the local
 * write.  Waits up to @timeout_ms for ring space; then (or when the ring
 * is already in overflow) marks the bio's regions dirty instead.  Large
 * payloads are copied by a worker after this returns, while dm submits the
 * local write.  With a metadata device, a write whose regions are not yet
 * durably marked waits for a metadata round: then this returns
 * DM_MAPIO_SUBMITTED and ring_meta_ready() submits the bio; otherwise
 * DM_MAPIO_REMAPPED.
 */
int repl_ring_log(struct repl_ring *ring, struct bio *bio,
		  struct repl_bio *pb, u16 op, u16 flags,
		  unsigned int timeout_ms, unsigned int record_kb)
{
	u32 len = op == DM_REPL_OP_WRITE ? bio->bi_iter.bi_size : 0;
	unsigned long deadline = jiffies + msecs_to_jiffies(timeout_ms);
	u64 seq, off, gen, o, round = 0, r = 0, rend = 0;
	bool meta_wait = false, waited = false;
	sector_t sector;
	u32 i, n;
	long left;

	pb->rec_sectors = record_kb << 1;
	pb->nr_recs = len ? ring_nr_pieces(pb) : 1;
	pb->nr_copied = 0;
	pb->ring = ring;
	spin_lock_irq(&ring->lock);
	for (;;) {
		if (ring->state & DM_REPL_STATE_OVERFLOW)
			goto unlogged;
		if (!ring_reserve(ring, pb->nr_recs, len, &seq, &off))
			break;
		left = (long)(deadline - jiffies);
		if (left <= 0) {
			ring_enter_overflow(ring);
			goto unlogged;
		}
		if (!waited) {
			ring->space_waits++;
			waited = true;
		}
		gen = ring->space_gen;
		spin_unlock_irq(&ring->lock);
		/* Back-pressure: the writer waits for the consumer. */
		wait_event_timeout(ring->space_wq,
				   READ_ONCE(ring->space_gen) != gen ||
				   (READ_ONCE(ring->state) & DM_REPL_STATE_OVERFLOW),
				   left);
		spin_lock_irq(&ring->lock);
	}
	pb->seq = seq;
	trace_repl_logged(seq, pb->nr_recs, pb->sector);
	if (!len) {
		ring_fill(ring, seq, op, flags, pb->sector, pb->nr_sectors, off, 0);
	} else {
		for (i = 0, sector = pb->sector, o = off; i < pb->nr_recs; i++) {
			n = ring_piece_sectors(pb, sector);
			ring_fill(ring, seq + i, op, flags, sector, n, o,
				  n << SECTOR_SHIFT);
			sector += n;
			o += n << SECTOR_SHIFT;
		}
	}
	/*
	 * A peer must not get a write whose bits could still be lost: after
	 * a crash, a region that differs from a peer has to be in the bitmap.
	 * So the records are published only once the metadata round is done
	 * (ring_meta_publish()).  The first chunk of the write's regions is
	 * marked in this hold of the lock; the rest (a large discard) in one
	 * hold per chunk below, with the records kept unpublished meanwhile.
	 */
	if (ring_meta_regions(ring, pb, &r, &rend))
		round = ring_meta_intent_chunk(ring, &r, rend);
	meta_wait = round || r < rend;
	if (meta_wait)
		pb->flags |= RB_META_WAIT;
	spin_unlock_irq(&ring->lock);
	round = max(round, ring_meta_intent_rest(ring, r, rend));

	if (len >= REPL_COPY_OFFLOAD_BYTES) {
		pb->flags |= RB_LOGGED;
		pb->data_off = off;
		pb->iter = bio->bi_iter;
		INIT_WORK(&pb->copy_work, ring_copy_work);
		queue_work_on(repl_copy_cpu(), ring->copy_wq, &pb->copy_work);
	} else {
		struct bvec_iter pos = bio->bi_iter;

		/* Copies of concurrent writers proceed in parallel. */
		if (len)
			ring_copy_bytes(ring->data + off, bio, &pos, len);
		spin_lock_irq(&ring->lock);
		pb->flags |= RB_LOGGED | RB_COPIED;
		pb->nr_copied = pb->nr_recs;
		ring_commit_ready(ring, pb, 0);
		spin_unlock_irq(&ring->lock);
	}
	goto out;

unlogged:
	/* A discard can cover 4 GiB: its regions are marked in chunks. */
	if (op != DM_REPL_OP_FLUSH) {
		ring->nr_marking++;
		spin_unlock_irq(&ring->lock);
		repl_ring_mark_dirty(ring, pb->sector, pb->nr_sectors);
		ring_marking_done(ring);
		pb->flags |= RB_UNLOGGED;
	} else {
		spin_unlock_irq(&ring->lock);
	}
	if (ring_meta_regions(ring, pb, &r, &rend))
		round = ring_meta_intent_rest(ring, r, rend);
out:
	/* the metadata work submits it once the round is on disk */
	if (round && repl_meta_defer(ring->meta, bio, round))
		return DM_MAPIO_SUBMITTED;
	/* no round, or it is already on disk */
	if (meta_wait) {
		spin_lock_irq(&ring->lock);
		ring_meta_publish(ring, pb);
		spin_unlock_irq(&ring->lock);
	}
	return DM_MAPIO_REMAPPED;
}

/*
 * The metadata's callbacks (struct repl_meta_ops), each called without any
 * metadata lock held, so taking ring->lock here keeps the one lock order
 * ring->lock -> meta->lock.
 */

/* A deferred bio's bits are durable: publish its records, submit it. */
static void ring_meta_ready(void *ctx, struct bio *bio)
{
	struct repl_ring *ring = ctx;

	spin_lock_irq(&ring->lock);
	ring_meta_publish(ring, dm_per_bio_data(bio, sizeof(struct repl_bio)));
	spin_unlock_irq(&ring->lock);
	submit_bio_noacct(bio);
}

/*
 * The clear pass: regions of the records in [min(released, local_done),
 * reserved) are still needed.  Slots are not reused below that point
 * (ring_reserve()), so the records can be read without the lock; a slot
 * reused meanwhile only makes another region busy for one pass.
 */
static void ring_meta_busy(void *ctx, unsigned long *busy)
{
	struct repl_ring *ring = ctx;
	unsigned int shift = ring->region_shift - SECTOR_SHIFT;
	u64 lo, hi, s, first, last;

	spin_lock_irq(&ring->lock);
	lo = min(ring->released, ring->local_done);
	hi = ring->reserved;
	spin_unlock_irq(&ring->lock);

	for (s = lo; s < hi; s++) {
		const struct dm_repl_rec *rec = &ring->recs[ring_slot(ring, s)];
		u64 sector = READ_ONCE(rec->sector);
		u32 nr = READ_ONCE(rec->nr_sectors);

		if (!nr || sector >= ring->dev_sectors)
			continue;
		first = sector >> shift;
		last = min_t(u64, (sector + nr - 1) >> shift, ring->nr_regions - 1);
		repl_bitmap_set_count(busy, first, last + 1);
		cond_resched();
	}
}

/* The metadata device failed: tell dmsetup (and the daemon) by an event. */
static void ring_meta_failed(void *ctx)
{
	struct repl_ring *ring = ctx;

	queue_work(ring->wq, &ring->event_work);
}

static const struct repl_meta_ops ring_meta_ops = {
	.ready = ring_meta_ready,
	.busy = ring_meta_busy,
	.failed = ring_meta_failed,
};

/*
 * Complete the bios of @list, taken off ring->held and marked RB_RELEASED.
 * With @mark (the target goes), their regions go
 * into the dirty bitmap first, a chunk per hold of ring->lock: held
 * discards can cover terabytes.  ring->lock not held; may sleep.
 */
static void ring_complete_list(struct repl_ring *ring, struct list_head *list,
			       bool mark)
{
	struct repl_bio *pb, *tmp;

	list_for_each_entry_safe(pb, tmp, list, held) {
		list_del_init(&pb->held);
		if (mark)
			repl_ring_mark_dirty(ring, pb->sector, pb->nr_sectors);
		trace_repl_complete(pb->seq, pb->nr_recs);
		/* Re-enters repl_end_io(), which sees RB_RELEASED. */
		bio_endio(dm_bio_from_per_bio_data(pb, sizeof(*pb)));
	}
}

/*
 * ring->lock held: move held bios (all, or those acked) to @out;
 * @timed_out counts them in hold_timeouts.  The acked ones are a prefix
 * of ring->held (record order, ring_held_add()).
 */
static void ring_take_held(struct repl_ring *ring, struct list_head *out,
			   bool all, bool timed_out)
{
	struct repl_bio *pb, *tmp;

	list_for_each_entry_safe(pb, tmp, &ring->held, held) {
		if (!all && !ring_acked(ring, pb))
			break;
		list_move_tail(&pb->held, out);
		pb->flags |= RB_RELEASED;
		ring->nr_held--;
		if (timed_out)
			ring->hold_timeouts++;
	}
}

/*
 * A local write of [sector, +nr_sectors) failed (completion context, or
 * any other; ring->lock not held).  Count it and raise an event; with
 * @mark (its record was logged, so it may be on its way to the peers,
 * which then differ from the local disk) mark its regions out of sync
 * first, in the dirty bitmap and on the metadata device, as an overflow
 * does.  A write has at most 1 MiB (max_io_len), one chunk of regions or
 * two; a discard or write-zeroes up to 4 GiB, a few chunks with 4 KiB
 * regions: the lock is dropped between chunks, as everywhere.  Called
 * before the bio completes, so the writer sees the error only once its
 * regions are marked.
 */
void repl_ring_io_error(struct repl_ring *ring, sector_t sector, u32 nr_sectors,
			bool mark)
{
	unsigned int shift = ring->region_shift - SECTOR_SHIFT;
	unsigned long flags;
	u64 first = 0, end = 0, e;

	if (mark && nr_sectors && sector < ring->dev_sectors) {
		first = sector >> shift;
		end = min_t(u64, (sector + nr_sectors - 1) >> shift,
			    ring->nr_regions - 1) + 1;
	}
	spin_lock_irqsave(&ring->lock, flags);
	while (first < end) {
		e = min(end, round_down(first, REPL_CHUNK_BITS) + REPL_CHUNK_BITS);
		ring_mark_chunk(ring, first, e);
		first = e;
		if (first < end) {
			spin_unlock_irqrestore(&ring->lock, flags);
			spin_lock_irqsave(&ring->lock, flags);
		}
	}
	ring->io_errors++;
	/* the event work raises the dm event; the consumer is woken too */
	ring_state_changed(ring);
	spin_unlock_irqrestore(&ring->lock, flags);
	DMWARN_LIMIT("%u:%u: local write of sectors %llu+%u failed%s",
		     MAJOR(ring->devt), MINOR(ring->devt),
		     (unsigned long long)sector, nr_sectors,
		     mark ? ": its regions are marked out of sync" : "");
}

/*
 * The local write of a logged bio completed (the target's .end_io, once
 * per bio: a bio completed again by bio_endio() is RB_RELEASED and does
 * not come here).  A failed one is never held, and its regions are marked
 * (repl_ring_io_error()).  Returns DM_ENDIO_INCOMPLETE while its payload
 * is still being copied, or while (sync mode) its record waits for its
 * acknowledgment; the bio is then completed later with bio_endio(), and
 * .end_io returns DM_ENDIO_DONE for it because it is marked RB_RELEASED.
 */
int repl_ring_end_io(struct repl_ring *ring, struct repl_bio *pb,
		     blk_status_t error)
{
	unsigned long flags;
	int r = DM_ENDIO_DONE;

	/* before the copy worker may complete it: pb is still ours */
	if (error)
		repl_ring_io_error(ring, pb->sector, pb->nr_sectors, true);
	spin_lock_irqsave(&ring->lock, flags);
	if (!(pb->flags & RB_LOCAL_MARKED)) {
		pb->flags |= RB_LOCAL_MARKED;
		ring_local_done(ring, pb->seq, pb->nr_recs);
	}
	if (!(pb->flags & RB_COPIED)) {
		pb->flags |= RB_LOCAL_DONE;
		r = DM_ENDIO_INCOMPLETE;
	} else if (!error && ring_hold_locked(ring, pb)) {
		r = DM_ENDIO_INCOMPLETE;
	}
	spin_unlock_irqrestore(&ring->lock, flags);
	if (r == DM_ENDIO_DONE)
		trace_repl_complete(pb->seq, pb->nr_recs);
	return r;
}

static void ring_hold_work(struct work_struct *work)
{
	struct repl_ring *ring = container_of(to_delayed_work(work),
					      struct repl_ring, hold_work);
	unsigned long earliest = 0, deadline;
	struct repl_bio *pb;
	LIST_HEAD(done);
	bool expired = false;

	spin_lock_irq(&ring->lock);
	list_for_each_entry(pb, &ring->held, held) {
		deadline = ring_hold_deadline(ring, pb);
		if (!time_after(deadline, jiffies)) {
			expired = true;
			break;
		}
		if (!earliest || time_before(deadline, earliest))
			earliest = deadline;
	}
	if (expired) {
		/*
		 * The consumer did not acknowledge in time: complete every
		 * held write and act async until the consumer has caught up.
		 * Their records stay in the ring: the consumer releases them
		 * once its peers have them, or marks their regions for a peer
		 * it releases them without, so nothing is marked here (a mark
		 * would stay after the peer got the records).
		 */
		ring_take_held(ring, &done, true, true);
		if (!(ring->state & DM_REPL_STATE_DEGRADED)) {
			ring_degrade(ring);
			DMWARN_LIMIT("%u:%u: sync write not acknowledged in time: acting async",
				     MAJOR(ring->devt), MINOR(ring->devt));
		}
		ring_state_changed(ring);
	} else if (earliest) {
		mod_delayed_work(ring->wq, &ring->hold_work,
				 time_after(earliest, jiffies) ?
				 earliest - jiffies : 0);
	}
	spin_unlock_irq(&ring->lock);
	if (expired)
		ring_complete_list(ring, &done, false);
}

/*
 * Change a target's mode.  Leaving sync mode completes every held write
 * (nothing waits for an ack any more) and clears the degraded state.
 */
void repl_ring_set_mode(struct repl_ring *ring, enum repl_mode *mode,
			enum repl_mode new_mode)
{
	LIST_HEAD(done);

	spin_lock_irq(&ring->lock);
	WRITE_ONCE(*mode, new_mode);
	if (new_mode == REPL_MODE_SYNC) {
		ring->state |= DM_REPL_STATE_SYNC;
		/* Unlogged writes cannot be acknowledged. */
		if (ring->state & DM_REPL_STATE_OVERFLOW)
			ring_degrade(ring);
	} else {
		ring_take_held(ring, &done, true, false);
		ring->state &= ~(DM_REPL_STATE_SYNC | DM_REPL_STATE_DEGRADED);
	}
	ring_state_changed(ring);
	spin_unlock_irq(&ring->lock);
	ring_complete_list(ring, &done, false);
}

/*
 * The doorbell: read the consumer's release_seq and ack_seq once, check
 * them, free ring space, complete acknowledged writes.
 */
int repl_ring_kick(struct repl_ring *ring)
{
	struct dm_repl_ring_hdr *hdr = ring->hdr;
	u64 rel, ack, s;
	bool bad = false, freed = false;
	LIST_HEAD(done);

	spin_lock_irq(&ring->lock);
	/*
	 * Pairs with the consumer's store-release: its reads of the records
	 * and payloads below release_seq are done before we reuse them.
	 */
	rel = smp_load_acquire(&hdr->release_seq);
	/* Pairs with the consumer's store-release of ack_seq. */
	ack = smp_load_acquire(&hdr->ack_seq);

	if (rel < ring->released || rel > ring->prod) {
		bad = true;
	} else if (rel > ring->released) {
		for (s = ring->released; s < rel; s++)
			ring->data_used -= ring->slot_bytes[ring_slot(ring, s)];
		ring->released = rel;
		if (!ring->data_used)
			ring->data_head = 0;
		ring->space_gen++;
		freed = true;
	}

	if (ack < ring->acked || ack > ring->prod) {
		bad = true;
	} else if (ack > ring->acked) {
		trace_repl_ack(ack);
		ring->acked = ack;
		ring->acked_jif = jiffies;
		ring_take_held(ring, &done, false, false);
	}

	ring_leave_overflow(ring);
	if ((ring->state & DM_REPL_STATE_DEGRADED) &&
	    !(ring->state & DM_REPL_STATE_OVERFLOW) &&
	    ring->acked >= ring->degraded_seq &&
	    ring->prod - ring->acked <= REPL_CATCHUP_RECORDS) {
		ring->state &= ~DM_REPL_STATE_DEGRADED;
		ring_state_changed(ring);
	}
	if (bad)
		ring->bad_updates++;
	WRITE_ONCE(hdr->released_seq, ring->released);
	WRITE_ONCE(hdr->acked_seq, ring->acked);
	spin_unlock_irq(&ring->lock);

	if (freed)
		wake_up_all(&ring->space_wq);
	ring_complete_list(ring, &done, false);
	if (bad) {
		DMWARN_LIMIT("%u:%u: consumer wrote invalid release/ack (%llu/%llu)",
			     MAJOR(ring->devt), MINOR(ring->devt), rel, ack);
		return -EINVAL;
	}
	return 0;
}

void repl_ring_stats(struct repl_ring *ring, struct repl_ring_stats *st)
{
	spin_lock_irq(&ring->lock);
	st->prod_seq = ring->prod;
	st->released = ring->released;
	st->acked = ring->acked;
	st->data_used = ring->data_used;
	st->data_size = ring->data_size;
	st->recs_used = ring->reserved - ring->released;
	st->nr_recs = ring->nr_recs;
	st->state = ring->state;
	st->bytes_logged = ring->bytes_logged;
	st->dirty_regions = ring->nr_dirty;
	st->region_bytes = 1ULL << ring->region_shift;
	st->overflows = ring->overflows;
	st->hold_timeouts = ring->hold_timeouts;
	st->bad_updates = ring->bad_updates;
	st->io_errors = ring->io_errors;
	st->space_waits = ring->space_waits;
	st->nr_held = ring->nr_held;
	st->meta = !ring->meta ? -1 : repl_meta_failed(ring->meta) ? 1 : 0;
	st->intent_regions = repl_meta_intent_regions(ring->meta);
	st->active_extents = repl_meta_active_extents(ring->meta);
	spin_unlock_irq(&ring->lock);
	st->consumer = READ_ONCE(ring->consumer);
}

static void ring_free(struct repl_ring *ring)
{
	repl_meta_destroy(ring->meta);
	bitmap_free(ring->slot_local);
	kvfree(ring->dirty);
	bitmap_free(ring->slot_done);
	kvfree(ring->slot_bytes);
	vfree(ring->area);
	kfree(ring);
}

static void ring_release(struct kref *kref)
{
	struct repl_ring *ring = container_of(kref, struct repl_ring, kref);

	cancel_delayed_work_sync(&ring->hold_work);
	cancel_work_sync(&ring->event_work);
	ring_free(ring);
}

static void ring_put(struct repl_ring *ring)
{
	kref_put(&ring->kref, ring_release);
}

static struct repl_ring *ring_find(dev_t devt)
{
	struct repl_ring *ring;

	lockdep_assert_held(&repl_rings_lock);
	list_for_each_entry(ring, &repl_rings, node)
		if (ring->devt == devt)
			return ring;
	return NULL;
}

/*
 * The shared area: zeroed pages mapped with VM_USERMAP so that
 * remap_vmalloc_range() accepts them.  Allocated page by page without
 * warnings: a ring too big for the machine is an error for the table line,
 * not a kernel splat.  vfree() frees pages and array (VM_MAP_PUT_PAGES).
 */
static void *ring_area_alloc(size_t size)
{
	unsigned int nr = size >> PAGE_SHIFT, i;
	struct page **pages;
	void *area;

	pages = kvcalloc(nr, sizeof(*pages), GFP_KERNEL | __GFP_NOWARN);
	if (!pages)
		return NULL;
	for (i = 0; i < nr; i++) {
		pages[i] = alloc_page(GFP_KERNEL | __GFP_ZERO | __GFP_NOWARN |
				      __GFP_RETRY_MAYFAIL);
		if (!pages[i])
			goto fail;
		cond_resched();
	}
	area = vmap(pages, nr, VM_MAP | VM_USERMAP | VM_MAP_PUT_PAGES,
		    PAGE_KERNEL);
	if (area)
		return area;
fail:
	while (i--)
		__free_page(pages[i]);
	kvfree(pages);
	return NULL;
}

static bool ring_meta_in_use(dev_t meta)
{
	struct repl_ring *ring;

	lockdep_assert_held(&repl_rings_lock);
	list_for_each_entry(ring, &repl_rings, node)
		if (repl_meta_devt(ring->meta) == meta)
			return true;
	return false;
}

static u32 ring_nr_recs(u64 data_size)
{
	u64 n = data_size >> 12;	/* one slot per 4 KiB of data */

	n = clamp_t(u64, n, 1024, 1U << 20);
	return roundup_pow_of_two(n);
}

static int ring_alloc(dev_t devt, const struct repl_ring_geometry *geo,
		      struct repl_ring **ret, char **error)
{
	struct dm_repl_ring_hdr *hdr;
	struct repl_ring *ring;
	u64 rec_bytes;

	/* Pin the ABI layout. */
	BUILD_BUG_ON(sizeof(struct dm_repl_ring_hdr) != 5 * DM_REPL_CACHELINE);
	BUILD_BUG_ON(offsetof(struct dm_repl_ring_hdr, local_seq) != 4 * DM_REPL_CACHELINE);
	BUILD_BUG_ON(offsetof(struct dm_repl_ring_hdr, ring_id) != 3 * DM_REPL_CACHELINE);
	BUILD_BUG_ON(offsetof(struct dm_repl_ring_hdr, prod_seq) != DM_REPL_CACHELINE);
	BUILD_BUG_ON(offsetof(struct dm_repl_ring_hdr, read_seq) != 2 * DM_REPL_CACHELINE);
	BUILD_BUG_ON(offsetof(struct dm_repl_ring_hdr, release_seq) != 2 * DM_REPL_CACHELINE + 8);
	BUILD_BUG_ON(offsetof(struct dm_repl_ring_hdr, ack_seq) != 2 * DM_REPL_CACHELINE + 16);
	BUILD_BUG_ON(sizeof(struct dm_repl_rec) != 64);
	BUILD_BUG_ON(offsetof(struct dm_repl_rec, epoch) != 24);
	BUILD_BUG_ON(offsetof(struct dm_repl_rec, data_offset) != 32);
	BUILD_BUG_ON(offsetof(struct dm_repl_rec, data_len) != 40);
	BUILD_BUG_ON(sizeof(struct dm_repl_attach) != 32);
	BUILD_BUG_ON(sizeof(struct dm_repl_dirty) != 48);
	BUILD_BUG_ON(sizeof(struct dm_repl_regions) != 32);
	BUILD_BUG_ON(sizeof(struct dm_repl_md_sb) != 192);
	BUILD_BUG_ON(offsetof(struct dm_repl_md_sb, peers_offset) != 176);
	BUILD_BUG_ON(sizeof(struct dm_repl_md_peers) > DM_REPL_MD_SB_BYTES);
	BUILD_BUG_ON(offsetof(struct dm_repl_md_sb, resource) != 64);
	BUILD_BUG_ON(sizeof(struct dm_repl_ring_hdr) > PAGE_SIZE);

	ring = kzalloc(sizeof(*ring), GFP_KERNEL);
	if (!ring) {
		*error = "Cannot allocate ring";
		return -ENOMEM;
	}
	kref_init(&ring->kref);
	INIT_LIST_HEAD(&ring->node);
	INIT_LIST_HEAD(&ring->targets);
	INIT_LIST_HEAD(&ring->held);
	mutex_init(&ring->tmutex);
	init_rwsem(&ring->resize_sem);
	spin_lock_init(&ring->lock);
	init_waitqueue_head(&ring->space_wq);
	init_waitqueue_head(&ring->poll_wq);
	INIT_DELAYED_WORK(&ring->hold_work, ring_hold_work);
	INIT_WORK(&ring->event_work, ring_event_work);
	ring->devt = devt;
	ring->acked_jif = jiffies;
	ring->wq = geo->wq;
	ring->copy_wq = geo->copy_wq;
	ring->nr_recs = ring_nr_recs(geo->data_size);
	ring->data_size = geo->data_size;
	ring->dev_sectors = geo->dev_sectors;
	ring->region_shift = geo->region_shift;
	ring->extent_shift = geo->extent_shift;
	ring->max_extents = geo->max_extents;
	ring->nr_regions = DIV_ROUND_UP_ULL(geo->dev_sectors,
					    1ULL << (geo->region_shift - SECTOR_SHIFT));

	rec_bytes = PAGE_ALIGN((u64)ring->nr_recs * sizeof(struct dm_repl_rec));
	ring->area_size = PAGE_SIZE + rec_bytes + PAGE_ALIGN(ring->data_size);
	ring->area = ring_area_alloc(ring->area_size);
	ring->slot_bytes = kvcalloc(ring->nr_recs, sizeof(u32),
				    GFP_KERNEL | __GFP_NOWARN);
	ring->slot_done = bitmap_zalloc(ring->nr_recs, GFP_KERNEL | __GFP_NOWARN);
	ring->slot_local = bitmap_zalloc(ring->nr_recs, GFP_KERNEL | __GFP_NOWARN);
	ring->dirty = kvcalloc(BITS_TO_LONGS(ring->nr_regions),
			       sizeof(unsigned long), GFP_KERNEL | __GFP_NOWARN);
	if (!ring->area || !ring->slot_bytes || !ring->slot_done || !ring->slot_local ||
	    !ring->dirty) {
		ring_free(ring);
		*error = "Cannot allocate ring";
		return -ENOMEM;
	}
	hdr = ring->area;
	ring->hdr = hdr;
	ring->recs = ring->area + PAGE_SIZE;
	ring->data = ring->area + PAGE_SIZE + rec_bytes;

	hdr->magic = DM_REPL_MAGIC;
	hdr->abi_version = DM_REPL_ABI_VERSION;
	hdr->features = DM_REPL_FEATURES;
	hdr->hdr_size = PAGE_SIZE;
	hdr->rec_size = sizeof(struct dm_repl_rec);
	hdr->nr_recs = ring->nr_recs;
	hdr->region_shift = ring->region_shift;
	hdr->rec_offset = PAGE_SIZE;
	hdr->data_offset = PAGE_SIZE + rec_bytes;
	hdr->data_size = ring->data_size;
	hdr->dev_sectors = ring->dev_sectors;
	do {
		hdr->ring_id = get_random_u64();
	} while (!hdr->ring_id);
	if (geo->meta_dev) {
		struct repl_meta_config cfg = {
			.bdev = geo->meta_dev->bdev,
			.name = geo->name,
			.owner_devt = devt,
			.dev_sectors = ring->dev_sectors,
			.nr_regions = ring->nr_regions,
			.region_shift = ring->region_shift,
			.extent_shift = ring->extent_shift,
			.max_extents = ring->max_extents,
			.wq = ring->wq,
			.ops = &ring_meta_ops,
			.ctx = ring,
		};
		struct repl_meta *m = repl_meta_create(&cfg, ring->dirty,
						       &ring->nr_dirty, error);

		if (IS_ERR(m)) {
			ring_free(ring);
			return PTR_ERR(m);
		}
		ring->meta = m;
		if (ring->nr_dirty)
			ring->state |= DM_REPL_STATE_DIRTY;
	}
	*ret = ring;
	return 0;
}

/*
 * Find the ring of the mapped device @devt (a table reload keeps it) or
 * create it, and register @rc as one of its targets.
 */
int repl_ring_get(dev_t devt, const struct repl_ring_geometry *geo,
		  struct repl_c *rc, struct repl_ring **ret, char **error)
{
	struct repl_ring *ring;
	int r = 0;

	mutex_lock(&repl_rings_lock);
	ring = ring_find(devt);
	if (ring) {
		if (ring->data_size != geo->data_size) {
			*error = "ring_size_mb cannot change while the device exists";
			r = -EINVAL;
		} else if (ring->region_shift != geo->region_shift) {
			*error = "region_kb cannot change while the device exists";
			r = -EINVAL;
		} else if (ring->extent_shift != geo->extent_shift) {
			*error = "extent_kb cannot change while the device exists";
			r = -EINVAL;
		} else if (ring->max_extents != geo->max_extents) {
			*error = "max_extents cannot change while the device exists";
			r = -EINVAL;
		} else if (geo->dev_sectors < ring->dev_sectors) {
			*error = "Device size cannot shrink";
			r = -EINVAL;
		} else if (repl_meta_devt(ring->meta) !=
			   (geo->meta_dev ? geo->meta_dev->bdev->bd_dev : 0)) {
			*error = "meta_dev cannot change while the device exists";
			r = -EINVAL;
		} else {
			kref_get(&ring->kref);
		}
	} else if (geo->data_size >> PAGE_SHIFT > totalram_pages() / 2) {
		*error = "ring_size_mb is more than half of the memory";
		r = -ENOMEM;
	} else if (geo->meta_dev && ring_meta_in_use(geo->meta_dev->bdev->bd_dev)) {
		*error = "Metadata device already used by another repl device";
		r = -EBUSY;
	} else {
		r = ring_alloc(devt, geo, &ring, error);
		if (!r)
			list_add(&ring->node, &repl_rings);
	}
	if (!r) {
		mutex_lock(&ring->tmutex);
		list_add_tail(&rc->ring_node, &ring->targets);
		ring->nr_targets++;
		mutex_unlock(&ring->tmutex);
		*ret = ring;
	}
	mutex_unlock(&repl_rings_lock);
	return r;
}

/*
 * ring->lock held: move the held bios that the target @rc mapped to @out,
 * counted as timed out (ring_complete_list() marks their regions).  The
 * other tables of the ring keep theirs: the live table's held writes wait
 * for their acknowledgment or the hold timeout whatever happens to an
 * inactive or an old table.
 */
static void ring_take_held_of(struct repl_ring *ring, struct list_head *out,
			      const struct repl_c *rc)
{
	struct repl_bio *pb, *tmp;

	list_for_each_entry_safe(pb, tmp, &ring->held, held) {
		if (pb->mode != &rc->mode)
			continue;
		list_move_tail(&pb->held, out);
		pb->flags |= RB_RELEASED;
		ring->nr_held--;
		ring->hold_timeouts++;
	}
}

/* A target stops using the ring (destructor). */
void repl_ring_put(struct repl_ring *ring, struct repl_c *rc)
{
	LIST_HEAD(done);
	bool last, mark;

	/*
	 * Only this table's held bios, which point at its mode: suspend
	 * waited for them (an inactive table never mapped any), so this is a
	 * safety net.  A bio held by another table is not this one's to end.
	 */
	spin_lock_irq(&ring->lock);
	ring_take_held_of(ring, &done, rc);
	mark = !list_empty(&done);
	if (mark)
		ring->nr_marking++;
	spin_unlock_irq(&ring->lock);
	if (mark) {
		ring_complete_list(ring, &done, true);
		ring_marking_done(ring);
	}

	mutex_lock(&repl_rings_lock);
	mutex_lock(&ring->tmutex);
	list_del_init(&rc->ring_node);
	last = !--ring->nr_targets;
	mutex_unlock(&ring->tmutex);
	if (last) {
		list_del_init(&ring->node);
		WRITE_ONCE(ring->dead, true);
	}
	mutex_unlock(&repl_rings_lock);
	if (last) {
		/* the target closes the metadata device after this */
		repl_meta_detach(ring->meta);
		/* The event work may still reference the target list. */
		flush_work(&ring->event_work);
		wake_up_all(&ring->poll_wq);
		wake_up_all(&ring->space_wq);
	}
	ring_put(ring);
}

/*
 * The consumer side, for /dev/dm-repl (dm-repl-dev.c).
 */

/* Take a reference to the ring (a mapping of it). */
void repl_ring_kref_get(struct repl_ring *ring)
{
	kref_get(&ring->kref);
}

void repl_ring_kref_put(struct repl_ring *ring)
{
	ring_put(ring);
}

/*
 * Become the one consumer of the ring of the mapped device @devt; holds a
 * reference until repl_ring_detach().  A new consumer starts at the oldest
 * record not released.
 */
int repl_ring_attach(dev_t devt, struct repl_ring **ret)
{
	struct dm_repl_ring_hdr *hdr;
	struct repl_ring *ring;
	int r = 0;

	mutex_lock(&repl_rings_lock);
	ring = ring_find(devt);
	if (!ring) {
		r = -ENODEV;
		goto out;
	}
	if (ring->consumer) {
		r = -EBUSY;
		goto out;
	}
	kref_get(&ring->kref);
	WRITE_ONCE(ring->consumer, true);

	hdr = ring->hdr;
	spin_lock_irq(&ring->lock);
	WRITE_ONCE(hdr->read_seq, ring->released);
	WRITE_ONCE(hdr->release_seq, ring->released);
	WRITE_ONCE(hdr->ack_seq, ring->acked);
	WRITE_ONCE(hdr->state_seen, ring->state_seq - 1);
	ring_mirror_state(ring);
	spin_unlock_irq(&ring->lock);
	*ret = ring;
out:
	mutex_unlock(&repl_rings_lock);
	return r;
}

/* The consumer's file is closed. */
void repl_ring_detach(struct repl_ring *ring)
{
	mutex_lock(&repl_rings_lock);
	WRITE_ONCE(ring->consumer, false);
	mutex_unlock(&repl_rings_lock);
	ring_put(ring);
}

/*
 * DM_REPL_IOC_GET_DIRTY: copy the dirty bitmap to @ubuf (little-endian bit
 * order, (nr_regions + 7) / 8 bytes), unless it is NULL; return the number
 * of dirty regions and the generation as they were when the copy began.
 * A chunk per hold of ring->lock, through a bounce buffer (copy_to_user()
 * may fault).  The generation is read with the first chunk: a region
 * marked during the copy bumps it, so a CLEAR_DIRTY with it fails
 * (EAGAIN); a mark before it is in every chunk copied after.
 */
int repl_ring_copy_dirty(struct repl_ring *ring, u8 __user *ubuf, u64 ubytes,
			 u64 *ret_dirty, u64 *ret_gen, u64 *ret_regions)
{
	u64 bytes, nwords, w, n, len;
	unsigned long *bounce;
	int ret = 0;

	down_read(&ring->resize_sem);
	*ret_regions = ring->nr_regions;
	bytes = DIV_ROUND_UP_ULL(ring->nr_regions, 8);
	nwords = BITS_TO_LONGS(ring->nr_regions);
	if (!ubuf) {
		spin_lock_irq(&ring->lock);
		*ret_dirty = ring->nr_dirty;
		*ret_gen = ring->dirty_gen;
		spin_unlock_irq(&ring->lock);
		goto out;
	}
	/* a buffer for a device before it grew: the caller learns the size */
	if (ubytes < bytes) {
		ret = -ENOSPC;
		goto out;
	}
	bounce = kmalloc_array(REPL_CHUNK_WORDS, sizeof(*bounce), GFP_KERNEL);
	if (!bounce) {
		ret = -ENOMEM;
		goto out;
	}
	for (w = 0; w < nwords; w += n) {
		n = min_t(u64, REPL_CHUNK_WORDS, nwords - w);
		spin_lock_irq(&ring->lock);
		if (!w) {
			*ret_dirty = ring->nr_dirty;
			*ret_gen = ring->dirty_gen;
		}
		bitmap_copy_le(bounce, ring->dirty + w, n * BITS_PER_LONG);
		spin_unlock_irq(&ring->lock);
		len = min_t(u64, n * sizeof(*bounce), bytes - w * sizeof(*bounce));
		if (copy_to_user(ubuf + w * sizeof(*bounce), bounce, len)) {
			ret = -EFAULT;
			break;
		}
		cond_resched();
	}
	kfree(bounce);
out:
	up_read(&ring->resize_sem);
	return ret;
}

/* DM_REPL_IOC_MARK_DIRTY: regions [first, first + count), checked. */
void repl_ring_mark_regions(struct repl_ring *ring, u64 first, u64 count)
{
	down_read(&ring->resize_sem);
	ring_mark_regions(ring, first, first + count);
	up_read(&ring->resize_sem);
}

/*
 * DM_REPL_IOC_CLEAR_DIRTY: clear regions [first, first + count), checked,
 * unless a region was marked since the copy of generation @gen (-EAGAIN).
 * A chunk per hold of ring->lock, the generation checked in each: once it
 * changed, the rest of the range stays; what was cleared before was not
 * marked since the copy, so it is in sync.
 */
int repl_ring_clear_regions(struct repl_ring *ring, u64 first, u64 count,
			    u64 gen)
{
	u64 end = first + count, e;
	int ret = 0;

	down_read(&ring->resize_sem);
	for (; first < end; first = e) {
		e = min(end, round_down(first, REPL_CHUNK_BITS) + REPL_CHUNK_BITS);
		spin_lock_irq(&ring->lock);
		if (gen != ring->dirty_gen) {
			spin_unlock_irq(&ring->lock);
			ret = -EAGAIN;
			break;
		}
		ring->nr_dirty -= repl_bitmap_clear_count(ring->dirty, first, e);
		repl_meta_clear_dirty(ring->meta, first, e);
		if (!ring->nr_dirty && (ring->state & DM_REPL_STATE_DIRTY)) {
			ring->state &= ~DM_REPL_STATE_DIRTY;
			ring_state_changed(ring);
		} else {
			WRITE_ONCE(ring->hdr->dirty_regions, ring->nr_dirty);
		}
		spin_unlock_irq(&ring->lock);
		cond_resched();
	}
	up_read(&ring->resize_sem);
	return ret;
}

/*
 * Growing the device: a table longer than the ring's device (lvextend
 * below it, then a reload) gets the ring's bitmaps for its length from
 * its constructor, and swaps them in at its preresume, the device
 * suspended (repl_ring_grow_commit()).  The grown part is out of sync
 * until a resync has sent it to the peers.
 */
struct repl_ring_grow {
	u64 dev_sectors;
	u64 nr_regions;
	unsigned long *dirty;
	struct repl_meta_grow *meta;
};

void repl_ring_grow_free(struct repl_ring_grow *g)
{
	if (!g)
		return;
	repl_meta_grow_free(g->meta);
	kvfree(g->dirty);
	kfree(g);
}

struct repl_ring_grow *repl_ring_grow_prepare(struct repl_ring *ring, u64 dev_sectors,
					      char **error)
{
	struct repl_ring_grow *g;

	g = kzalloc(sizeof(*g), GFP_KERNEL);
	if (!g) {
		*error = "Cannot allocate the grown bitmap";
		return ERR_PTR(-ENOMEM);
	}
	g->dev_sectors = dev_sectors;
	g->nr_regions = DIV_ROUND_UP_ULL(dev_sectors, 1ULL << (ring->region_shift - SECTOR_SHIFT));
	g->dirty = kvcalloc(BITS_TO_LONGS(g->nr_regions), sizeof(unsigned long),
			    GFP_KERNEL | __GFP_NOWARN);
	if (!g->dirty) {
		repl_ring_grow_free(g);
		*error = "Cannot allocate the grown bitmap";
		return ERR_PTR(-ENOMEM);
	}
	if (ring->meta) {
		g->meta = repl_meta_grow_prepare(ring->meta, dev_sectors, g->nr_regions, error);
		if (IS_ERR(g->meta)) {
			int r = PTR_ERR(g->meta);

			g->meta = NULL;
			repl_ring_grow_free(g);
			return ERR_PTR(r);
		}
	}
	return g;
}

/*
 * Preresume of the longer table: no I/O in flight, the metadata quiesced
 * (postsuspend).  Regions from the one holding the old end on are marked
 * out of sync, durably with a metadata device before its superblock says
 * the new size; the ring header's dev_sectors tells the consumer.  Frees @g.
 */
void repl_ring_grow_commit(struct repl_ring *ring, struct repl_ring_grow *g)
{
	u64 first, old_words, marked;

	down_write(&ring->resize_sem);
	if (g->dev_sectors <= ring->dev_sectors) {
		/* grown to this size already, by an earlier table */
		up_write(&ring->resize_sem);
		repl_ring_grow_free(g);
		return;
	}
	first = ring->dev_sectors >> (ring->region_shift - SECTOR_SHIFT);
	old_words = BITS_TO_LONGS(ring->nr_regions);
	/* nothing writes the bitmap: no I/O, no consumer call */
	memcpy(g->dirty, ring->dirty, old_words * sizeof(unsigned long));
	marked = repl_bitmap_set_count(g->dirty, first, g->nr_regions);
	spin_lock_irq(&ring->lock);
	swap(ring->dirty, g->dirty);
	ring->dev_sectors = g->dev_sectors;
	ring->nr_regions = g->nr_regions;
	ring->nr_dirty += marked;
	ring->dirty_gen++;
	WRITE_ONCE(ring->hdr->dev_sectors, ring->dev_sectors);
	if (marked && !(ring->state & DM_REPL_STATE_DIRTY)) {
		ring->state |= DM_REPL_STATE_DIRTY;
		ring_state_changed(ring);
	} else {
		WRITE_ONCE(ring->hdr->dirty_regions, ring->nr_dirty);
	}
	spin_unlock_irq(&ring->lock);
	if (ring->meta)
		repl_meta_grow_commit(ring->meta, g->meta, first);
	g->meta = NULL;
	up_write(&ring->resize_sem);
	DMINFO("%u:%u: grown to %llu sectors, %llu regions out of sync",
	       MAJOR(ring->devt), MINOR(ring->devt), ring->dev_sectors, marked);
	repl_ring_grow_free(g);
}

/* Before the first I/O after a resume. */
int repl_ring_activate(struct repl_ring *ring)
{
	return repl_meta_activate(ring->meta);
}

/* After a suspend: no I/O is in flight. */
void repl_ring_quiesce(struct repl_ring *ring)
{
	repl_meta_quiesce(ring->meta);
}
