/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * libreplring: the consumer side of the dm-repl ring (and a userspace
 * producer for memory-backed rings).
 *
 * The ring ABI is <linux/dm-repl.h>; read its overview first.  This library
 * maps the ring, validates its geometry once, and gives the consumer:
 *
 *   ring_prod()        how far the producer has published (load-acquire)
 *   ring_rec()         the record with a given sequence, or NULL
 *   ring_payload()     its payload, bounds-checked
 *   ring_mark_read()   "I have looked at everything below seq"
 *   ring_update()      publish release_seq/ack_seq and ring the doorbell once
 *   ring_wait()        publish read_seq and sleep until a record arrives
 *
 * A typical drain loop:
 *
 *	for (;;) {
 *		uint64_t prod = ring_prod(r);
 *		for (; seq < prod; seq++) {
 *			const struct dm_repl_rec *rec = ring_rec(r, seq);
 *			...ring_payload(r, rec, &p, &len)...
 *		}
 *		ring_mark_read(r, seq);
 *		ring_update(r, seq, seq);
 *		ring_wait(r, -1);
 *	}
 *
 * Two backends share the consumer code:
 *  - kernel rings (ring_attach): the misc device /dev/dm-repl; the doorbell is
 *    DM_REPL_IOC_KICK and ring_fd() is that device (POLLIN: new records;
 *    POLLPRI: hdr.state_seq != hdr.state_seen).
 *  - memory rings (ring_mem_new): a memfd laid out exactly like the kernel's
 *    mapping, with a producer in this process (ring_mem_produce).  The
 *    doorbell is an eventfd the producer waits on (ring_mem_kick_fd(),
 *    ring_mem_wait_kick()), consumer wake-ups go through a second eventfd
 *    that ring_fd() returns.
 *
 * Threads: one thread may act as consumer and, for memory rings, one other
 * thread as producer.  Consumer calls must not run concurrently with each
 * other, nor producer calls with each other.
 *
 * Errors are negative errno values; out-parameters (ret, ret_*) are left
 * untouched on failure.  Nothing here logs.
 */
#ifndef REPL_RING_H
#define REPL_RING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <linux/dm-repl.h>

#include "macro.h"


struct ring;

/* Features this library needs from a kernel ring; others are optional. */
#define RING_REQUIRED_FEATURES	(DM_REPL_FEAT_RO_DATA | DM_REPL_FEAT_ACK)

/* Default control device (DM_REPL_MISC_NAME). */
#define RING_CTL_PATH		"/dev/" DM_REPL_MISC_NAME

/* Data area allocation granularity (bytes) of the producers. */
#define RING_DATA_ALIGN		512U

/*
 * Attach to the ring of the repl device dm_dev (st_rdev of /dev/dm-N) through
 * the control device ctl_path (NULL: RING_CTL_PATH).  Maps the header
 * read-write and the records and data read-only.  -EPROTO when the mapping
 * does not look like a ring this library understands; -EBUSY (from the
 * kernel) when another consumer is attached.
 */
int ring_attach(const char *ctl_path, dev_t dm_dev, struct ring **ret);

/*
 * Check a ring header against the sizes the kernel returned from ATTACH.
 * Used by ring_attach(); exposed so tests can check that memory rings are
 * laid out exactly like kernel rings.  0 or -EPROTO.
 */
int ring_hdr_check(const struct dm_repl_ring_hdr *hdr, uint64_t map_size,
		   uint64_t hdr_size);

void ring_free(struct ring *r);
void ring_freep(struct ring **rp);

/* ---- consumer ---------------------------------------------------------- */

/* prod_seq, loaded with acquire semantics: records below it are complete. */
uint64_t ring_prod(const struct ring *r);

/*
 * The record with sequence seq, or NULL unless release_seq <= seq < prod_seq
 * and the slot really holds seq.  The record stays valid until it is
 * released.  Its fields are the kernel's: check them before use.
 */
const struct dm_repl_rec *ring_rec(const struct ring *r, uint64_t seq);

/*
 * The payload of a record returned by ring_rec(): *ret points into the
 * read-only data area, *ret_len bytes (NULL and 0 for records without
 * payload).  -EPROTO when the record's data_offset/data_len do not fit the
 * data area, do not match nr_sectors (WRITE), or a record other than WRITE
 * carries data; -EINVAL when rec is not a record of this ring.
 */
int ring_payload(const struct ring *r, const struct dm_repl_rec *rec,
		 const void **ret, uint32_t *ret_len);

/*
 * Records below seq have been looked at.  Only moves the local read cursor
 * forward (ignored if seq is behind it or beyond prod_seq); ring_wait()
 * publishes it.
 */
void ring_mark_read(struct ring *r, uint64_t seq);

/*
 * Publish release_seq (records and payload below it may be reused) and
 * ack_seq (records below it are acknowledged) with store-release, then ring
 * the doorbell once.  -EINVAL, without touching shared memory, when either
 * value goes backwards or beyond prod_seq.  Releasing a record also marks
 * it read.  Nothing changes: 0 and no doorbell.
 */
int ring_update(struct ring *r, uint64_t release, uint64_t ack);
int ring_release(struct ring *r, uint64_t seq);	/* ring_update(r, seq, ack) */
int ring_ack(struct ring *r, uint64_t seq);	/* ring_update(r, release, seq) */

/*
 * Prepare to sleep: publish read_seq (the local read cursor), then re-check
 * prod_seq.  1: records beyond the read cursor exist, do not sleep; 0: safe
 * to sleep on ring_fd() (POLLIN) until the producer wakes us.  Use this
 * before epoll_wait() when ring_fd() is part of an event loop.
 */
int ring_arm(struct ring *r);

/*
 * ring_arm(), then poll(ring_fd(), POLLIN, timeout_ms) if it returned 0.
 * 1: records to read (or a wake-up), 0: timeout, -errno (-EINTR).
 */
int ring_wait(struct ring *r, int timeout_ms);

/* The fd to poll for new records (see above). */
int ring_fd(const struct ring *r);

/* hdr.state (DM_REPL_STATE_*) and hdr.state_seq, loaded with acquire. */
uint32_t ring_state(const struct ring *r);
uint32_t ring_state_seq(const struct ring *r);
/* Tell the kernel state changes up to state_seq were handled (EPOLLPRI). */
void ring_mark_state_seen(struct ring *r, uint32_t state_seq);

/*
 * Copy out the dirty bitmap (DM_REPL_IOC_GET_DIRTY) into buf (len bytes;
 * buf NULL and len 0 just fill in the counts).  -EOPNOTSUPP for kernels
 * without DM_REPL_FEAT_DIRTY.
 */
int ring_get_dirty(struct ring *r, void *buf, size_t len,
		   struct dm_repl_dirty *ret);

/*
 * Mark regions [first, first + count) out of sync; clear them after a
 * resync, unless something was marked since the bitmap copy of generation
 * gen (ret->dirty_gen of ring_get_dirty()) was taken: -EAGAIN.  -EINVAL
 * for a range outside the device, -EOPNOTSUPP without DM_REPL_FEAT_RESYNC.
 */
int ring_mark_dirty(struct ring *r, uint64_t first, uint64_t count);
int ring_clear_dirty(struct ring *r, uint64_t first, uint64_t count, uint64_t gen);

/* The calls above and ring_local_seq() work on this ring. */
bool ring_can_resync(const struct ring *r);

/* Every record below this has completed its local write (acquire). */
uint64_t ring_local_seq(const struct ring *r);

struct ring_info {
	bool memory;		/* memory ring (ring_mem_new) */
	/* geometry, validated at attach */
	uint64_t features;
	uint32_t nr_recs;
	uint32_t region_shift;
	uint64_t data_size;
	uint64_t dev_sectors;
	uint64_t ring_id;	/* identity of this ring (hdr.ring_id) */
	uint64_t map_size;
	/* producer line: a snapshot, fields loaded one by one */
	uint64_t prod_seq;
	uint64_t epoch;
	uint32_t state;
	uint32_t state_seq;
	uint64_t dirty_regions;
	uint64_t overflows;
	uint64_t hold_timeouts;
	/* consumer cursors, as published by this process */
	uint64_t read_seq;
	uint64_t release_seq;
	uint64_t ack_seq;
	/* this process's consumer counters */
	uint64_t nr_sleeps;	/* ring_wait() called poll() */
	uint64_t nr_wakeups;	/* ... and poll() returned readable */
	uint64_t nr_kicks;	/* doorbells rung */
	/* memory rings: producer counters (read them while it is idle) */
	uint64_t nr_mem_wakes;	/* consumer wake-ups sent (eventfd writes) */
	uint64_t nr_mem_full;	/* ring_mem_produce() returned -EAGAIN */
};

void ring_get_info(const struct ring *r, struct ring_info *ret);

/*
 * The device grew (a longer table resumed, dm-repl(7) RESIZE): take the
 * header's dev_sectors when it is larger than the size this ring has.
 * The kernel sets it before the first record of the grown device, so a
 * consumer that calls this before it reads records past the old end sees
 * the new size.  1: grown (ring_get_info() has the new size), 0: not.
 */
int ring_refresh_size(struct ring *r);

/* ---- memory rings (ring-mem.c) -------------------------------------------- */

/*
 * A ring in a memfd with the kernel's layout: header page, nr_recs records
 * (a power of two) at a page-aligned offset, data_size bytes (a multiple of
 * RING_DATA_ALIGN) at the next page-aligned offset.  -EINVAL on bad sizes.
 */
int ring_mem_new(uint32_t nr_recs, uint64_t data_size, uint64_t dev_sectors,
		 struct ring **ret);

/* The memfd holding the whole mapping (for sharing with another process). */
int ring_mem_memfd(const struct ring *r);

/*
 * Log one operation, like the kernel's target does: WRITE carries len ==
 * nr_sectors * 512 bytes of payload; FLUSH and GAP have no extent; DISCARD
 * and WRITE_ZEROES have an extent and no payload.  FLUSH closes the current
 * epoch.  *ret_seq is the record's sequence.
 * -EAGAIN: no free slot or no contiguous data space below release_seq (wait
 *          with ring_mem_wait_kick() and retry);
 * -EMSGSIZE: the payload can never fit the data area;
 * -EINVAL: bad arguments (unknown op or flag, extent beyond dev_sectors,
 *          len inconsistent with op/nr_sectors);
 * -EOPNOTSUPP: not a memory ring.
 */
int ring_mem_produce(struct ring *r, uint16_t op, uint16_t flags,
		     uint64_t sector, uint32_t nr_sectors,
		     const void *payload, uint32_t len, uint64_t *ret_seq);

/* The doorbell eventfd: readable after the consumer called ring_update(). */
int ring_mem_kick_fd(const struct ring *r);

/*
 * Wait up to timeout_ms for the doorbell, drain it and load release_seq and
 * ack_seq (acquire).  1 kicked, 0 timeout, -errno; -EINVAL when the consumer
 * published an invalid value (ignored, as the kernel does).
 */
int ring_mem_wait_kick(struct ring *r, int timeout_ms);

/* ack_seq as of the last doorbell the producer handled. */
uint64_t ring_mem_acked(const struct ring *r);

/*
 * Set hdr.state and bump hdr.state_seq, as the kernel does when the target
 * changes mode or state (a stand-in for "dmsetup message ... mode").
 * -EOPNOTSUPP: not a memory ring.
 */
int ring_mem_set_state(struct ring *r, uint32_t state);

/*
 * Count a sync write released by the hold timeout in hdr.hold_timeouts, as
 * the kernel does.  -EOPNOTSUPP: not a memory ring.
 */
int ring_mem_count_hold_timeout(struct ring *r);

/*
 * Mark the regions of an extent dirty, as the target does for a write it
 * could not log.  -EINVAL beyond the device, -EOPNOTSUPP: not a memory ring.
 */
int ring_mem_mark_dirty(struct ring *r, uint64_t sector, uint32_t nr_sectors);

#endif /* REPL_RING_H */
