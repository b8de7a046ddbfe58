/* SPDX-License-Identifier: GPL-2.0-only */
/* libreplring internals shared by ring.c (consumer) and ring-mem.c (producer). */
#ifndef REPL_RING_INTERNAL_H
#define REPL_RING_INTERNAL_H

#include <stdatomic.h>
#include <pthread.h>
#include <stdint.h>

#include "ring.h"

/*
 * Access to fields shared with the other side (model: liburing's
 * src/include/liburing/barrier.h).  Every acquire/release names, where it is
 * used, the access it pairs with.  The relaxed forms are READ_ONCE() and
 * WRITE_ONCE(): one access, no tearing, no re-load by the compiler.
 */
#define ring_load_relaxed(p) \
	atomic_load_explicit((_Atomic __typeof__(*(p)) *)(p), memory_order_relaxed)
#define ring_load_acquire(p) \
	atomic_load_explicit((_Atomic __typeof__(*(p)) *)(p), memory_order_acquire)
#define ring_store_relaxed(p, v) \
	atomic_store_explicit((_Atomic __typeof__(*(p)) *)(p), (v), memory_order_relaxed)
#define ring_store_release(p, v) \
	atomic_store_explicit((_Atomic __typeof__(*(p)) *)(p), (v), memory_order_release)
/* smp_mb(): orders an earlier store before a later load (Dekker). */
#define ring_smp_mb() atomic_thread_fence(memory_order_seq_cst)

struct ring {
	bool memory;
	/* ring_free() calls it first: what the producer of a memory ring
	 * holds (ring-mem.c sets it; ring.c knows nothing of it) */
	void (*release_producer)(struct ring *r);
	int fd;			/* kernel: /dev/dm-repl; memory: wake eventfd */

	/* mappings */
	struct dm_repl_ring_hdr *hdr;	/* [0, hdr_size) read-write */
	size_t hdr_len;
	const uint8_t *ro;		/* [rec_offset, map_size) read-only */
	size_t ro_len;
	const struct dm_repl_rec *recs;
	const uint8_t *data;

	/* geometry: copied once from the header and validated */
	uint64_t features;
	uint64_t map_size;
	uint64_t hdr_size;
	uint64_t rec_offset;
	uint64_t data_offset;
	uint64_t data_size;
	uint64_t dev_sectors;
	uint64_t ring_id;		/* read once at map time */
	uint32_t nr_recs;
	uint32_t region_shift;

	/* consumer: the values this process published (it is the only writer) */
	uint64_t read;		/* local read cursor (ring_mark_read) */
	uint64_t read_pub;	/* last read_seq stored */
	uint64_t release;
	uint64_t ack;
	uint64_t nr_sleeps;
	uint64_t nr_wakeups;
	uint64_t nr_kicks;

	/* memory rings: producer state, on its own cache lines */
	struct {
		int memfd;
		int kick_fd;
		uint8_t *base;		/* whole mapping, read-write */
		uint64_t *slot_bytes;	/* data bytes charged to each slot */
		uint64_t prod;		/* next sequence */
		uint64_t epoch;		/* open epoch */
		uint64_t release;	/* release_seq, as last loaded */
		uint64_t ack;		/* ack_seq, as last loaded */
		uint64_t head;		/* offset of the next payload */
		uint64_t used;		/* data bytes in use, incl. skipped tails */
		uint64_t nr_wakes;
		uint64_t nr_full;
		/* the dirty bitmap, as the kernel keeps it (any thread) */
		pthread_mutex_t dirty_lock;
		uint8_t *dirty;			/* LE bit order, one bit per region */
		uint64_t nr_regions;
		uint64_t nr_dirty;
		uint64_t dirty_gen;
	} mem __attribute__((aligned(DM_REPL_CACHELINE)));
};

/* Zeroed ring with every fd at -1 (ring.c). */
struct ring *ring_alloc(void);

/* Maps [0, hdr_size) RW and [rec_offset, map_size) RO from fd (ring.c). */
int ring_map(struct ring *r, int fd, uint64_t map_size, uint64_t hdr_size);


static inline bool ring_is_pow2(uint64_t x)
{
	return x && !(x & (x - 1));
}

#endif /* REPL_RING_INTERNAL_H */
