// SPDX-License-Identifier: GPL-2.0-only
/*
 * libreplring, memory rings: a ring in a memfd with the kernel's layout and
 * a producer with the kernel target's semantics, for tests and for a
 * userspace stand-in of the target.
 *
 * Producer rules (the same as the kernel's, see <linux/dm-repl.h>):
 *  - record seq lives in slot seq & (nr_recs - 1); a slot is free when
 *    seq - nr_recs < release_seq;
 *  - payloads are allocated contiguously in the data area, in units of
 *    RING_DATA_ALIGN bytes, at the data head; one that does not fit before
 *    the end of the area starts at offset 0 and the skipped tail is charged
 *    to its record; the bytes charged to a record are free once it is below
 *    release_seq; when nothing is in use the head goes back to offset 0;
 *  - release_seq/ack_seq are loaded (acquire) when the doorbell rings and
 *    when the producer is short of slots or data space, and ignored when
 *    they go backwards or beyond prod_seq;
 *  - a record is published with a store-release of prod_seq; the consumer
 *    is woken when read_seq equals the previous prod_seq;
 *  - a FLUSH record carries the epoch it closes; later records carry the
 *    next one.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "ring-internal.h"

/* A random ring identity, never 0, like the kernel's. */
static uint64_t mem_ring_id(void)
{
	uint64_t id = 0;

	while (!id) {
		if (getrandom(&id, sizeof(id), 0) != sizeof(id))
			id = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
	}
	return id;
}

#define MEM_MAX_RECS		(1U << 24)
#define MEM_MAX_DATA		(1ULL << 40)
#define MEM_REGION_SHIFT	16

static uint64_t round_up(uint64_t x, uint64_t a)
{
	return (x + a - 1) / a * a;
}

static void ring_mem_release(struct ring *r)
{
	if (r->mem.base)
		munmap(r->mem.base, r->map_size);
	if (r->mem.memfd >= 0)
		close(r->mem.memfd);
	if (r->mem.kick_fd >= 0)
		close(r->mem.kick_fd);
	free(r->mem.slot_bytes);
	free(r->mem.dirty);
	pthread_mutex_destroy(&r->mem.dirty_lock);
}

int ring_mem_new(uint32_t nr_recs, uint64_t data_size, uint64_t dev_sectors,
		 struct ring **ret)
{
	_cleanup_(ring_freep) struct ring *r = NULL;
	struct dm_repl_ring_hdr *h;
	uint64_t ps, hdr_size, rec_offset, data_offset, map_size;
	long sc = sysconf(_SC_PAGESIZE);
	void *p;
	int err;

	if (!ring_is_pow2(nr_recs) || nr_recs > MEM_MAX_RECS ||
	    !data_size || data_size % RING_DATA_ALIGN ||
	    data_size > MEM_MAX_DATA)
		return -EINVAL;

	ps = sc > 0 ? (uint64_t)sc : 4096;
	hdr_size = round_up(sizeof(struct dm_repl_ring_hdr), ps);
	rec_offset = hdr_size;
	data_offset = round_up(rec_offset +
			       (uint64_t)nr_recs * sizeof(struct dm_repl_rec), ps);
	map_size = data_offset + round_up(data_size, ps);

	r = ring_alloc();
	if (!r)
		return -ENOMEM;
	r->memory = true;
	r->release_producer = ring_mem_release;
	pthread_mutex_init(&r->mem.dirty_lock, NULL);
	r->mem.slot_bytes = calloc(nr_recs, sizeof(*r->mem.slot_bytes));
	if (!r->mem.slot_bytes)
		return -ENOMEM;
	r->mem.nr_regions = (dev_sectors * 512 + (1ULL << MEM_REGION_SHIFT) - 1) >>
			    MEM_REGION_SHIFT;
	r->mem.dirty = calloc(r->mem.nr_regions / 8 + 1, 1);
	if (!r->mem.dirty)
		return -ENOMEM;
	r->mem.memfd = memfd_create("dm-repl-ring", MFD_CLOEXEC);
	if (r->mem.memfd < 0)
		return -errno;
	if (ftruncate(r->mem.memfd, (off_t)map_size) < 0)
		return -errno;
	p = mmap(NULL, map_size, PROT_READ | PROT_WRITE, MAP_SHARED,
		 r->mem.memfd, 0);
	if (p == MAP_FAILED)
		return -errno;
	r->mem.base = p;
	r->map_size = map_size;	/* for ring_mem_release() */
	r->mem.kick_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (r->mem.kick_fd < 0)
		return -errno;
	r->fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (r->fd < 0)
		return -errno;

	/* What the kernel fills in before it answers ATTACH. */
	h = p;
	h->magic = DM_REPL_MAGIC;
	h->abi_version = DM_REPL_ABI_VERSION;
	h->features = DM_REPL_FEAT_RO_DATA | DM_REPL_FEAT_ACK |
		      DM_REPL_FEAT_GAP | DM_REPL_FEAT_DIRTY | DM_REPL_FEAT_RESYNC;
	h->hdr_size = (uint32_t)hdr_size;
	h->rec_size = sizeof(struct dm_repl_rec);
	h->nr_recs = nr_recs;
	h->region_shift = MEM_REGION_SHIFT;
	h->rec_offset = rec_offset;
	h->data_offset = data_offset;
	h->data_size = data_size;
	h->dev_sectors = dev_sectors;
	h->ring_id = mem_ring_id();

	/* The consumer maps it like a kernel ring, through the same checks. */
	err = ring_map(r, r->mem.memfd, map_size, hdr_size);
	if (err < 0)
		return err;
	*ret = r;
	r = NULL;
	return 0;
}

int ring_mem_memfd(const struct ring *r)
{
	return r->memory ? r->mem.memfd : -EOPNOTSUPP;
}

int ring_mem_kick_fd(const struct ring *r)
{
	return r->memory ? r->mem.kick_fd : -EOPNOTSUPP;
}

uint64_t ring_mem_acked(const struct ring *r)
{
	return r->mem.ack;
}

/* Load release_seq and ack_seq; free the slots and data below release_seq. */
static int mem_reload(struct ring *r)
{
	struct dm_repl_ring_hdr *h = (struct dm_repl_ring_hdr *)r->mem.base;
	uint64_t release, ack;
	int ret = 0;

	/*
	 * Pairs with the consumer's store-release of release_seq in
	 * ring_update(): its reads of what it released happen before we
	 * overwrite the slots and payload.
	 */
	release = ring_load_acquire(&h->release_seq);
	/* Pairs with the consumer's store-release of ack_seq. */
	ack = ring_load_acquire(&h->ack_seq);

	if (release < r->mem.release || release > r->mem.prod) {
		ret = -EINVAL;
	} else if (release > r->mem.release) {
		for (uint64_t s = r->mem.release; s < release; s++)
			r->mem.used -= r->mem.slot_bytes[s & (r->nr_recs - 1)];
		r->mem.release = release;
		if (!r->mem.used)
			r->mem.head = 0;
	}
	if (ack < r->mem.ack || ack > r->mem.prod)
		ret = -EINVAL;
	else
		r->mem.ack = ack;
	/* Like the kernel: mirror what was accepted (informational). */
	ring_store_relaxed(&h->released_seq, r->mem.release);
	ring_store_relaxed(&h->acked_seq, r->mem.ack);
	return ret;
}

/*
 * Allocate need bytes (a multiple of RING_DATA_ALIGN, <= data_size) of
 * contiguous data space for the next record.  *ret_charge is what the
 * record holds until it is released (need plus a skipped tail).  false:
 * not enough free space.
 */
static bool mem_data_alloc(struct ring *r, uint64_t need, uint64_t *ret_off,
			   uint64_t *ret_charge)
{
	uint64_t off = r->mem.head, pad = 0;

	if (!need) {
		*ret_off = 0;
		*ret_charge = 0;
		return true;
	}
	if (need > r->data_size - off) {
		pad = r->data_size - off;
		off = 0;
	}
	if (r->mem.used + pad + need > r->data_size)
		return false;
	r->mem.head = off + need;
	if (r->mem.head == r->data_size)
		r->mem.head = 0;
	r->mem.used += pad + need;
	*ret_off = off;
	*ret_charge = pad + need;
	return true;
}

static int mem_check_args(const struct ring *r, uint16_t op, uint16_t flags,
			  uint64_t sector, uint32_t nr_sectors,
			  const void *payload, uint32_t len)
{
	if (flags & ~(DM_REPL_F_FUA | DM_REPL_F_SYNC))
		return -EINVAL;
	switch (op) {
	case DM_REPL_OP_WRITE:
		if ((uint64_t)len != (uint64_t)nr_sectors << 9 ||
		    (len && !payload))
			return -EINVAL;
		break;
	case DM_REPL_OP_DISCARD:
	case DM_REPL_OP_WRITE_ZEROES:
		if (len || !nr_sectors)
			return -EINVAL;
		break;
	case DM_REPL_OP_FLUSH:
	case DM_REPL_OP_GAP:
		if (len || nr_sectors || sector)
			return -EINVAL;
		break;
	default:
		return -EINVAL;
	}
	if (sector > r->dev_sectors || nr_sectors > r->dev_sectors - sector)
		return -EINVAL;
	return 0;
}

int ring_mem_produce(struct ring *r, uint16_t op, uint16_t flags,
		     uint64_t sector, uint32_t nr_sectors,
		     const void *payload, uint32_t len, uint64_t *ret_seq)
{
	struct dm_repl_ring_hdr *h = (struct dm_repl_ring_hdr *)r->mem.base;
	struct dm_repl_rec *rec;
	uint64_t seq = r->mem.prod, alloc, off, charge;
	uint32_t slot;
	int err;

	if (!r->memory)
		return -EOPNOTSUPP;
	err = mem_check_args(r, op, flags, sector, nr_sectors, payload, len);
	if (err < 0)
		return err;
	alloc = round_up(len, RING_DATA_ALIGN);
	if (alloc > r->data_size)
		return -EMSGSIZE;

	if (seq - r->mem.release >= r->nr_recs) {
		(void)mem_reload(r);	/* bad values are ignored */
		if (seq - r->mem.release >= r->nr_recs)
			goto full;
	}
	if (!mem_data_alloc(r, alloc, &off, &charge)) {
		(void)mem_reload(r);
		if (!mem_data_alloc(r, alloc, &off, &charge))
			goto full;
	}

	slot = (uint32_t)(seq & (r->nr_recs - 1));
	rec = (struct dm_repl_rec *)(r->mem.base + r->rec_offset) + slot;
	memset(rec, 0, sizeof(*rec));
	rec->seq = seq;
	rec->sector = sector;
	rec->nr_sectors = nr_sectors;
	rec->op = op;
	rec->flags = flags;
	rec->epoch = r->mem.epoch;
	rec->data_offset = off;
	rec->data_len = len;
	if (len)
		memcpy(r->mem.base + r->data_offset + off, payload, len);
	r->mem.slot_bytes[slot] = charge;
	if (op == DM_REPL_OP_FLUSH) {
		r->mem.epoch++;
		ring_store_relaxed(&h->epoch, r->mem.epoch);
	}

	/*
	 * Pairs with the consumer's load-acquire of prod_seq in ring_prod()
	 * and ring_rec(): the record and its payload are visible before the
	 * new prod_seq is.
	 */
	ring_store_release(&h->prod_seq, seq + 1);
	r->mem.prod = seq + 1;
	/*
	 * Full barrier: our store of prod_seq before our load of read_seq.
	 * Pairs with the smp_mb() in ring_arm(): either the consumer sees the
	 * new prod_seq, or we see its read_seq == seq and wake it.
	 */
	ring_smp_mb();
	if (ring_load_relaxed(&h->read_seq) == seq) {
		uint64_t one = 1;

		r->mem.nr_wakes++;
		if (write(r->fd, &one, sizeof(one)) < 0) {
			/* Only EAGAIN (counter full): the fd is readable. */
		}
	}
	*ret_seq = seq;
	return 0;

full:
	r->mem.nr_full++;
	return -EAGAIN;
}

int ring_mem_wait_kick(struct ring *r, int timeout_ms)
{
	struct pollfd pfd = { .fd = r->mem.kick_fd, .events = POLLIN };
	uint64_t v;
	int n;

	if (!r->memory)
		return -EOPNOTSUPP;
	n = poll(&pfd, 1, timeout_ms);
	if (n < 0)
		return -errno;
	if (n == 0)
		return 0;
	/* Drain before loading, so a later doorbell is not lost. */
	if (read(r->mem.kick_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		return -errno;
	n = mem_reload(r);
	return n < 0 ? n : 1;
}

int ring_mem_set_state(struct ring *r, uint32_t state)
{
	struct dm_repl_ring_hdr *h;

	if (!r->memory)
		return -EOPNOTSUPP;
	h = (struct dm_repl_ring_hdr *)r->mem.base;
	ring_store_relaxed(&h->state, state);
	/* like the kernel: the state before its sequence number (EPOLLPRI) */
	ring_store_release(&h->state_seq, ring_load_relaxed(&h->state_seq) + 1);
	return 0;
}

int ring_mem_count_hold_timeout(struct ring *r)
{
	struct dm_repl_ring_hdr *h;

	if (!r->memory)
		return -EOPNOTSUPP;
	h = (struct dm_repl_ring_hdr *)r->mem.base;
	/* the producer's line: only the producer writes it */
	ring_store_relaxed(&h->hold_timeouts, ring_load_relaxed(&h->hold_timeouts) + 1);
	return 0;
}

int ring_mem_mark_dirty(struct ring *r, uint64_t sector, uint32_t nr_sectors)
{
	unsigned int shift = MEM_REGION_SHIFT - 9;

	if (!r->memory)
		return -EOPNOTSUPP;
	if (!nr_sectors || sector >= r->dev_sectors || nr_sectors > r->dev_sectors - sector)
		return -EINVAL;
	return ring_mark_dirty(r, sector >> shift,
			       ((sector + nr_sectors - 1) >> shift) - (sector >> shift) + 1);
}
