// SPDX-License-Identifier: GPL-2.0-only
/*
 * libreplring, consumer side: attach to a dm-repl ring, read records and
 * payload, publish read/release/ack indices.  See ring.h and
 * <linux/dm-repl.h>.
 *
 * Everything read from the kernel-written areas is untrusted: the geometry
 * is copied once and validated, record fields are read once and checked
 * before they are used to compute an address.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "ring-internal.h"

struct ring *ring_alloc(void)
{
	struct ring *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	r->fd = -1;
	r->mem.memfd = -1;
	r->mem.kick_fd = -1;
	return r;
}

void ring_free(struct ring *r)
{
	if (!r)
		return;
	if (r->ro)
		munmap((void *)r->ro, r->ro_len);
	if (r->hdr)
		munmap(r->hdr, r->hdr_len);
	if (r->release_producer)
		r->release_producer(r);
	if (r->fd >= 0)
		close(r->fd);
	free(r);
}

void ring_freep(struct ring **rp)
{
	ring_free(*rp);
	*rp = NULL;
}

static uint64_t page_size(void)
{
	long ps = sysconf(_SC_PAGESIZE);

	return ps > 0 ? (uint64_t)ps : 4096;
}

int ring_hdr_check(const struct dm_repl_ring_hdr *hdr, uint64_t map_size,
		   uint64_t hdr_size)
{
	uint64_t ps = page_size();
	uint64_t rec_bytes;

	if (hdr_size < sizeof(*hdr) || hdr_size % ps || hdr_size > map_size)
		return -EPROTO;
	if (map_size > (uint64_t)INT64_MAX || map_size > SIZE_MAX)
		return -EPROTO;
	if (hdr->magic != DM_REPL_MAGIC ||
	    hdr->abi_version != DM_REPL_ABI_VERSION ||
	    hdr->hdr_size != hdr_size ||
	    hdr->rec_size != sizeof(struct dm_repl_rec))
		return -EPROTO;
	if ((hdr->features & RING_REQUIRED_FEATURES) != RING_REQUIRED_FEATURES)
		return -EPROTO;
	if (!ring_is_pow2(hdr->nr_recs) || hdr->region_shift >= 64)
		return -EPROTO;

	/* records: page-aligned (it is an mmap offset), after the header */
	rec_bytes = (uint64_t)hdr->nr_recs * hdr->rec_size;
	if (hdr->rec_offset < hdr_size || hdr->rec_offset % ps ||
	    hdr->rec_offset > map_size ||
	    rec_bytes > map_size - hdr->rec_offset)
		return -EPROTO;

	/* data: after the records, inside the mapping, not empty */
	if (hdr->data_offset < hdr->rec_offset + rec_bytes ||
	    hdr->data_offset > map_size || hdr->data_size == 0 ||
	    hdr->data_size > map_size - hdr->data_offset)
		return -EPROTO;
	return 0;
}

int ring_map(struct ring *r, int fd, uint64_t map_size, uint64_t hdr_size)
{
	struct dm_repl_ring_hdr snap;
	uint64_t prod, release, ack;
	void *p;
	int ret;

	if (hdr_size < sizeof(snap) || hdr_size > map_size ||
	    hdr_size > SIZE_MAX)
		return -EPROTO;
	p = mmap(NULL, hdr_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return -errno;
	r->hdr = p;
	r->hdr_len = hdr_size;

	/* One copy of the geometry: validate it, then use only the copy. */
	memcpy(&snap, r->hdr, sizeof(snap));
	ret = ring_hdr_check(&snap, map_size, hdr_size);
	if (ret < 0)
		return ret;
	r->features = snap.features;
	r->map_size = map_size;
	r->hdr_size = hdr_size;
	r->rec_offset = snap.rec_offset;
	r->data_offset = snap.data_offset;
	r->data_size = snap.data_size;
	r->dev_sectors = snap.dev_sectors;
	r->ring_id = snap.ring_id;
	r->nr_recs = snap.nr_recs;
	r->region_shift = snap.region_shift;

	p = mmap(NULL, map_size - r->rec_offset, PROT_READ, MAP_SHARED, fd,
		 (off_t)r->rec_offset);
	if (p == MAP_FAILED)
		return -errno;
	r->ro = p;
	r->ro_len = map_size - r->rec_offset;
	r->recs = p;
	r->data = r->ro + (r->data_offset - r->rec_offset);

	/*
	 * Resume where the previous consumer left off.  The consumer line is
	 * ours but a previous consumer (or the kernel's reset of read_seq on
	 * attach) wrote it: check it against prod_seq.
	 */
	prod = ring_prod(r);
	release = ring_load_relaxed(&r->hdr->release_seq);
	ack = ring_load_relaxed(&r->hdr->ack_seq);
	if (release > prod || ack > prod)
		return -EPROTO;
	r->read = r->read_pub = r->release = release;
	r->ack = ack;
	ring_store_relaxed(&r->hdr->read_seq, release);
	return 0;
}

int ring_attach(const char *ctl_path, dev_t dm_dev, struct ring **ret)
{
	_cleanup_(ring_freep) struct ring *r = NULL;
	struct dm_repl_attach att = {
		.dev_major = major(dm_dev),
		.dev_minor = minor(dm_dev),
	};
	int err;

	r = ring_alloc();
	if (!r)
		return -ENOMEM;
	r->fd = open(ctl_path ? ctl_path : RING_CTL_PATH, O_RDWR | O_CLOEXEC);
	if (r->fd < 0)
		return -errno;
	if (ioctl(r->fd, DM_REPL_IOC_ATTACH, &att) < 0)
		return -errno;
	err = ring_map(r, r->fd, att.map_size, att.hdr_size);
	if (err < 0)
		return err;
	*ret = r;
	r = NULL;
	return 0;
}

uint64_t ring_prod(const struct ring *r)
{
	/*
	 * Pairs with the producer's store-release of prod_seq: the records
	 * and payload below the value we see are complete before we read
	 * them.
	 */
	return ring_load_acquire(&r->hdr->prod_seq);
}

const struct dm_repl_rec *ring_rec(const struct ring *r, uint64_t seq)
{
	const struct dm_repl_rec *rec;

	if (seq < r->release || seq >= ring_prod(r))
		return NULL;
	rec = &r->recs[seq & (r->nr_recs - 1)];
	if (ring_load_relaxed(&rec->seq) != seq)
		return NULL;
	return rec;
}

int ring_payload(const struct ring *r, const struct dm_repl_rec *rec,
		 const void **ret, uint32_t *ret_len)
{
	uintptr_t at = (uintptr_t)rec, base = (uintptr_t)r->recs;
	uint64_t off;
	uint32_t len, nr_sectors;
	uint16_t op;

	if (at < base || (at - base) % sizeof(*rec) ||
	    (at - base) / sizeof(*rec) >= r->nr_recs)
		return -EINVAL;

	/* Read each field once; check the copies. */
	op = ring_load_relaxed(&rec->op);
	nr_sectors = ring_load_relaxed(&rec->nr_sectors);
	off = ring_load_relaxed(&rec->data_offset);
	len = ring_load_relaxed(&rec->data_len);

	if (op != DM_REPL_OP_WRITE) {
		if (len)
			return -EPROTO;
		*ret = NULL;
		*ret_len = 0;
		return 0;
	}
	if ((uint64_t)len != (uint64_t)nr_sectors << 9)
		return -EPROTO;
	if (off > r->data_size || len > r->data_size - off)
		return -EPROTO;
	*ret = len ? r->data + off : NULL;
	*ret_len = len;
	return 0;
}

void ring_mark_read(struct ring *r, uint64_t seq)
{
	if (seq > r->read && seq <= ring_prod(r))
		r->read = seq;
}

static int ring_kick(struct ring *r)
{
	r->nr_kicks++;
	if (r->memory) {
		uint64_t one = 1;

		if (write(r->mem.kick_fd, &one, sizeof(one)) < 0 &&
		    errno != EAGAIN)
			return -errno;
		return 0;
	}
	if (ioctl(r->fd, DM_REPL_IOC_KICK, 0) < 0)
		return -errno;
	return 0;
}

int ring_update(struct ring *r, uint64_t release, uint64_t ack)
{
	uint64_t prod = ring_prod(r);

	if (release < r->release || ack < r->ack ||
	    release > prod || ack > prod)
		return -EINVAL;
	if (release == r->release && ack == r->ack)
		return 0;

	/* Keep release_seq <= read_seq as the kernel sees them. */
	if (release > r->read)
		r->read = release;
	if (release > r->read_pub) {
		ring_store_relaxed(&r->hdr->read_seq, release);
		r->read_pub = release;
	}
	/* Pairs with the producer's load-acquire of ack_seq on the doorbell. */
	ring_store_release(&r->hdr->ack_seq, ack);
	/*
	 * Pairs with the producer's load-acquire of release_seq on the
	 * doorbell: our reads of the records and payload below release (and
	 * the read_seq store above) happen before it reuses their slots and
	 * data.
	 */
	ring_store_release(&r->hdr->release_seq, release);
	r->release = release;
	r->ack = ack;
	return ring_kick(r);
}

int ring_release(struct ring *r, uint64_t seq)
{
	return ring_update(r, seq, r->ack);
}

int ring_ack(struct ring *r, uint64_t seq)
{
	return ring_update(r, r->release, seq);
}

int ring_arm(struct ring *r)
{
	if (r->memory) {
		uint64_t v;

		/* Consume old wake-ups before publishing read_seq. */
		if (read(r->fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
			return -errno;
	}
	/* Only the barrier below orders this store (WRITE_ONCE + smp_mb). */
	ring_store_relaxed(&r->hdr->read_seq, r->read);
	r->read_pub = r->read;
	/*
	 * Full barrier: our store of read_seq before our reload of prod_seq.
	 * Pairs with the producer's smp_mb() between its store of prod_seq
	 * and its load of read_seq: either it sees read_seq == its previous
	 * prod_seq and wakes us, or we see its new prod_seq here.
	 */
	ring_smp_mb();
	return ring_prod(r) != r->read;
}

int ring_wait(struct ring *r, int timeout_ms)
{
	struct pollfd pfd = { .fd = r->fd, .events = POLLIN };
	int n;

	n = ring_arm(r);
	if (n != 0)
		return n;
	r->nr_sleeps++;
	n = poll(&pfd, 1, timeout_ms);
	if (n < 0)
		return -errno;
	if (n == 0)
		return 0;
	if (pfd.revents & POLLNVAL)
		return -EBADF;
	if (!(pfd.revents & POLLIN)) {
		if (pfd.revents & POLLHUP)
			return -ENODEV;
		return -EIO;
	}
	r->nr_wakeups++;
	return 1;
}

int ring_fd(const struct ring *r)
{
	return r->fd;
}

uint32_t ring_state(const struct ring *r)
{
	/* A snapshot (READ_ONCE); load ring_state_seq() first to pair. */
	return ring_load_relaxed(&r->hdr->state);
}

uint32_t ring_state_seq(const struct ring *r)
{
	/* Pairs with the kernel's store-release of state_seq after state. */
	return ring_load_acquire(&r->hdr->state_seq);
}

void ring_mark_state_seen(struct ring *r, uint32_t state_seq)
{
	/* Pairs with the kernel's load of state_seen in its poll(). */
	ring_store_release(&r->hdr->state_seen, state_seq);
}

static int mem_get_dirty(struct ring *r, void *buf, size_t len, struct dm_repl_dirty *d)
{
	size_t bytes = (size_t)((r->mem.nr_regions + 7) / 8);

	if (buf && len < bytes)
		return -ENOSPC;
	pthread_mutex_lock(&r->mem.dirty_lock);
	if (buf)
		memcpy(buf, r->mem.dirty, bytes);
	d->nr_regions = r->mem.nr_regions;
	d->region_bytes = 1ULL << r->region_shift;
	d->dirty_regions = r->mem.nr_dirty;
	d->dirty_gen = r->mem.dirty_gen;
	pthread_mutex_unlock(&r->mem.dirty_lock);
	return 0;
}

int ring_get_dirty(struct ring *r, void *buf, size_t len,
		   struct dm_repl_dirty *ret)
{
	struct dm_repl_dirty d = {
		.bitmap = (uintptr_t)buf,
		.bitmap_bytes = buf ? len : 0,
	};
	int err;

	if (r->memory) {
		err = mem_get_dirty(r, buf, len, &d);
		if (err < 0)
			return err;
	} else {
		if (!(r->features & DM_REPL_FEAT_DIRTY))
			return -EOPNOTSUPP;
		if (ioctl(r->fd, DM_REPL_IOC_GET_DIRTY, &d) < 0)
			return -errno;
	}
	if (d.dirty_regions > d.nr_regions)
		return -EPROTO;
	*ret = d;
	return 0;
}

/* memory rings: the kernel's MARK_DIRTY / CLEAR_DIRTY */
static int mem_regions(struct ring *r, uint64_t first, uint64_t count, uint64_t gen,
		       bool clear)
{
	uint64_t i;
	int err = 0;

	pthread_mutex_lock(&r->mem.dirty_lock);
	if (clear && gen != r->mem.dirty_gen) {
		err = -EAGAIN;
		goto out;
	}
	for (i = first; i < first + count; i++) {
		uint8_t bit = (uint8_t)(1U << (i & 7));
		bool set = r->mem.dirty[i >> 3] & bit;

		if (clear && set) {
			r->mem.dirty[i >> 3] &= (uint8_t)~bit;
			r->mem.nr_dirty--;
		} else if (!clear && !set) {
			r->mem.dirty[i >> 3] |= bit;
			r->mem.nr_dirty++;
		}
	}
	if (!clear)
		r->mem.dirty_gen++;
	ring_store_relaxed(&r->hdr->dirty_regions, r->mem.nr_dirty);
	ring_store_relaxed(&r->hdr->dirty_gen, r->mem.dirty_gen);
out:
	pthread_mutex_unlock(&r->mem.dirty_lock);
	return err;
}

static int ring_regions(struct ring *r, unsigned long cmd, uint64_t first, uint64_t count,
			uint64_t gen)
{
	struct dm_repl_regions rg = { .first = first, .count = count, .gen = gen };
	uint64_t nr_regions = ((r->dev_sectors << 9) + (1ULL << r->region_shift) - 1) >>
			      r->region_shift;

	if (!count || first >= nr_regions || count > nr_regions - first)
		return -EINVAL;
	if (r->memory)
		return mem_regions(r, first, count, gen, cmd == DM_REPL_IOC_CLEAR_DIRTY);
	if (!(r->features & DM_REPL_FEAT_RESYNC))
		return -EOPNOTSUPP;
	if (ioctl(r->fd, cmd, &rg) < 0)
		return -errno;
	return 0;
}

int ring_mark_dirty(struct ring *r, uint64_t first, uint64_t count)
{
	return ring_regions(r, DM_REPL_IOC_MARK_DIRTY, first, count, 0);
}

int ring_clear_dirty(struct ring *r, uint64_t first, uint64_t count, uint64_t gen)
{
	return ring_regions(r, DM_REPL_IOC_CLEAR_DIRTY, first, count, gen);
}

bool ring_can_resync(const struct ring *r)
{
	return r->memory || (r->features & DM_REPL_FEAT_RESYNC);
}

uint64_t ring_local_seq(const struct ring *r)
{
	/* memory rings: the producer writes its device before it logs */
	if (r->memory || !(r->features & DM_REPL_FEAT_RESYNC))
		return ring_prod(r);
	return ring_load_acquire(&r->hdr->local_seq);
}

int ring_refresh_size(struct ring *r)
{
	uint64_t s = ring_load_acquire(&r->hdr->dev_sectors);

	if (s <= r->dev_sectors || s > UINT64_MAX >> 10)
		return 0;
	r->dev_sectors = s;
	return 1;
}

void ring_get_info(const struct ring *r, struct ring_info *ret)
{
	const struct dm_repl_ring_hdr *h = r->hdr;
	/* state_seq first (acquire): the fields below are at least as new. */
	uint32_t state_seq = ring_state_seq(r);

	*ret = (struct ring_info) {
		.memory = r->memory,
		.features = r->features,
		.nr_recs = r->nr_recs,
		.region_shift = r->region_shift,
		.data_size = r->data_size,
		.dev_sectors = r->dev_sectors,
		.ring_id = r->ring_id,
		.map_size = r->map_size,
		.prod_seq = ring_prod(r),
		.epoch = ring_load_relaxed(&h->epoch),
		.state = ring_load_relaxed(&h->state),
		.state_seq = state_seq,
		.dirty_regions = ring_load_relaxed(&h->dirty_regions),
		.overflows = ring_load_relaxed(&h->overflows),
		.hold_timeouts = ring_load_relaxed(&h->hold_timeouts),
		.read_seq = r->read_pub,
		.release_seq = r->release,
		.ack_seq = r->ack,
		.nr_sleeps = r->nr_sleeps,
		.nr_wakeups = r->nr_wakeups,
		.nr_kicks = r->nr_kicks,
		.nr_mem_wakes = r->mem.nr_wakes,
		.nr_mem_full = r->mem.nr_full,
	};
}
