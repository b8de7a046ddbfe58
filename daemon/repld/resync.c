// SPDX-License-Identifier: GPL-2.0-only
/*
 * The primary's resync and verify engine.
 *
 * A pass walks a set of regions (a copy of the target's dirty bitmap, or
 * every region for a full sync or a verify) in units of at most 1 MiB
 * (WIRE_MAX_PAYLOAD) and, per unit:
 *
 *   1. notes the peer's stream position L (its cursor) and, with hashes,
 *      sends a HashRequest, which the peer answers after applying
 *      everything before it;
 *   2. once every record below L has reached the local disk
 *      (ring_local_seq() >= L), reads the unit from the backing device
 *      with libaio (several units in flight);
 *   3. drops the attempt and retries the unit later if a record that
 *      overlaps it was queued to the peer meanwhile ("tainted": then
 *      neither the local read nor the peer's hash is a consistent view);
 *   4. otherwise queues the blocks that differ (all of them without
 *      hashes) as RESYNC blocks, which the peer writes in stream order, or,
 *      for a verify, marks the regions whose hashes differ dirty.
 *
 * Application records go first: new units start only while the peer's
 * send queue is at most a quarter full, and at most resync-rate-mb.  Every 64 MiB, and at the end
 * (done), a ResyncFlush makes the peer's copy durable; the regions below
 * the oldest unfinished unit are then cleared in the target, unless
 * another peer still needs a resync or something was marked since the
 * bitmap copy (then the next pass does them again).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libaio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <xxhash.h>

#include "log.h"
#include "manager-internal.h"
#include "ring.h"

#define RS_INFLIGHT	32U			/* units being read or hashed */
#define RS_FLUSH_BYTES	(64ULL << 20)		/* ResyncFlush every ... */
#define RS_BLOCK_SECTORS 8U			/* 4 KiB hash blocks */

enum unit_state {
	U_FREE = 0,
	U_WAIT_LOCAL,		/* records below L not yet on the local disk */
	U_READING,
	U_WAIT_HASH,		/* read done, the peer's hashes not yet here */
	U_SENDING,		/* blocks queued: buffer busy until sent */
};

struct rs_unit {
	enum unit_state state;
	uint64_t sector;
	uint32_t nr_sectors;
	uint64_t id;			/* HashRequest id */
	uint64_t L;			/* the peer's cursor when it started */
	bool tainted;
	bool read_done, hash_done;
	bool read_failed;
	uint64_t sq_mark;		/* sent once sq_head reaches this */
	uint32_t nr_hashes;
	uint64_t peer_hash[WIRE_MAX_HASHES];
	void *buf;
	struct iocb iocb;
};

struct resync {
	struct peer *p;
	enum rs_kind kind;
	bool hashes;
	uint8_t *bitmap;		/* the regions of this pass, LE bit order */
	uint64_t gen;			/* dirty_gen of the copy */
	uint64_t nr_regions, region_sectors, dev_sectors;
	uint64_t total_bytes, done_bytes, sent_bytes, differ_bytes;
	uint64_t next_sector;		/* iterator */
	uint64_t *retry;		/* unit sectors to do again */
	unsigned int nr_retry, max_retry;
	struct rs_unit u[RS_INFLIGHT];
	uint64_t next_id;
	uint64_t flush_id;		/* outstanding ResyncFlush, 0: none */
	uint64_t flush_clear_upto;	/* regions below it cleared on its answer */
	bool flush_done;		/* the final flush */
	uint64_t since_flush;
	uint64_t cleared_upto;
	uint64_t started_ms;
	uint64_t mismatched_regions;
	uint64_t window_ms, window_bytes;	/* resync-rate-mb */
	bool finished;
};

static struct rs_unit *unit_of_iocb(struct resync *rs, struct iocb *cb)
{
	unsigned int i;

	for (i = 0; i < RS_INFLIGHT; i++)
		if (&rs->u[i].iocb == cb)
			return &rs->u[i];
	return NULL;
}

/* ---- the reader ------------------------------------------------------------------ */

int resync_open(struct manager *m)
{
	if (m->rs_ctx_ok)
		return 0;
	m->rs_dev_fd = open(m->cfg->device, O_RDONLY | O_DIRECT | O_CLOEXEC);
	if (m->rs_dev_fd < 0)
		return log_error_errno(-errno, "%s: open %s for resync reads", m->cfg->resource,
				       m->cfg->device);
	m->rs_efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (m->rs_efd < 0)
		return log_error_errno(-errno, "eventfd");
	memset(&m->rs_ctx, 0, sizeof(m->rs_ctx));
	/* every peer may resync at once */
	if (io_setup(RS_INFLIGHT * CFG_MAX_PEERS, &m->rs_ctx) < 0)
		return log_error_errno(-EIO, "%s: io_setup", m->cfg->resource);
	m->ev_resync.kind = EV_RESYNC;
	m->ev_resync.ptr = m;
	if (ep_add(m, m->rs_efd, EPOLLIN, &m->ev_resync) < 0)
		return log_error_errno(-EIO, "epoll add resync");
	m->rs_ctx_ok = true;
	return 0;
}

void resync_close(struct manager *m)
{
	unsigned int i;

	for (i = 0; i < m->nr_peers; i++)
		resync_stop(m->peers[i], NULL);
	if (m->rs_ctx_ok) {
		ep_del(m, m->rs_efd);
		io_destroy(m->rs_ctx);
		m->rs_ctx_ok = false;
	}
	if (m->rs_efd >= 0)
		close(m->rs_efd);
	if (m->rs_dev_fd >= 0)
		close(m->rs_dev_fd);
	m->rs_efd = m->rs_dev_fd = -1;
}

/* ---- passes --------------------------------------------------------------------------- */

static bool region_set(const struct resync *rs, uint64_t r)
{
	return rs->bitmap[r >> 3] & (1U << (r & 7));
}

static const char *kind_name(enum rs_kind k)
{
	return k == RS_FULL ? "full sync" : k == RS_VERIFY ? "verify" : "bitmap resync";
}

int resync_start(struct peer *p, enum rs_kind kind)
{
	struct manager *m = p->m;
	struct dm_repl_dirty d;
	struct resync *rs;
	size_t bytes;
	uint64_t r;
	int err;

	if (p->rs)
		return -EBUSY;
	err = resync_open(m);
	if (err < 0)
		return err;
	err = ring_get_dirty(m->ring, NULL, 0, &d);
	if (err < 0)
		return log_error_errno(err, "%s: the target's dirty bitmap", m->cfg->resource);
	rs = calloc(1, sizeof(*rs));
	bytes = (size_t)((d.nr_regions + 7) / 8);
	if (!rs || !(rs->bitmap = calloc(bytes ? bytes : 1, 1))) {
		free(rs);
		return -ENOMEM;
	}
	rs->p = p;
	rs->kind = kind;
	rs->hashes = kind == RS_VERIFY || m->cfg->resync_checksums;
	rs->nr_regions = d.nr_regions;
	rs->region_sectors = d.region_bytes >> 9;
	{
		struct ring_info ri;

		ring_get_info(m->ring, &ri);
		rs->dev_sectors = ri.dev_sectors;
	}
	if (kind == RS_BITMAP) {
		err = ring_get_dirty(m->ring, rs->bitmap, bytes, &d);
		if (err < 0) {
			free(rs->bitmap);
			free(rs);
			return log_error_errno(err, "%s: the target's dirty bitmap", m->cfg->resource);
		}
	} else {
		memset(rs->bitmap, 0xff, bytes);
	}
	rs->gen = d.dirty_gen;
	for (r = 0; r < rs->nr_regions; r++) {
		if (region_set(rs, r)) {
			uint64_t s = r * rs->region_sectors;
			uint64_t n = rs->dev_sectors - s < rs->region_sectors ?
				     rs->dev_sectors - s : rs->region_sectors;

			rs->total_bytes += n << 9;
		}
	}
	rs->started_ms = now_ms();
	rs->next_id = 1;
	p->rs = rs;
	p->rs_again = false;
	if (kind != RS_VERIFY) {
		uint8_t buf[64];
		ssize_t k = wire_encode_resync_begin(buf, sizeof(buf), 0, kind == RS_FULL);

		if (k < 0 || peer_queue_frame(p, buf, (size_t)k) < 0) {
			resync_stop(p, "cannot queue ResyncBegin");
			return -ENOBUFS;
		}
	}
	log_info("%s: peer %s: %s of %" PRIu64 " MiB starts%s", m->cfg->resource, p->cfg.name,
		 kind_name(kind), rs->total_bytes >> 20, rs->hashes ? " (hashes first)" : "");
	return 0;
}

/* A read completed: mark its unit, whichever peer's pass it belongs to. */
static void resync_complete(struct manager *m, const struct io_event *ev)
{
	unsigned int i;

	for (i = 0; i < m->nr_peers; i++) {
		struct resync *rs = m->peers[i]->rs;
		struct rs_unit *u = rs ? unit_of_iocb(rs, ev->obj) : NULL;

		if (!u)
			continue;
		u->read_done = true;
		if ((long)ev->res != (long)u->nr_sectors << 9)
			u->read_failed = true;
		return;
	}
}

static unsigned int reads_in_flight(const struct resync *rs)
{
	unsigned int i, n = 0;

	for (i = 0; i < RS_INFLIGHT; i++)
		if (rs->u[i].state == U_READING && !rs->u[i].read_done)
			n++;
	return n;
}

/* Wait for every read in flight (their buffers go), then forget the pass. */
void resync_stop(struct peer *p, const char *why)
{
	struct manager *m = p->m;
	struct resync *rs = p->rs;
	struct io_event ev[RS_INFLIGHT];
	unsigned int i;

	if (!rs)
		return;
	while (reads_in_flight(rs)) {
		int n = io_getevents(m->rs_ctx, 1, RS_INFLIGHT, ev, NULL);

		if (n < 0 && n != -EINTR)
			break;
		/* other peers' completions too: they are marked, not lost */
		for (i = 0; n > 0 && i < (unsigned int)n; i++)
			resync_complete(m, &ev[i]);
	}
	if (why)
		log_warning("%s: peer %s: %s interrupted (%s); it starts again later",
			    m->cfg->resource, p->cfg.name, kind_name(rs->kind), why);
	for (i = 0; i < RS_INFLIGHT; i++)
		free(rs->u[i].buf);
	free(rs->retry);
	free(rs->bitmap);
	free(rs);
	p->rs = NULL;
}

/* Next unit: retries first, then the iterator over the pass's regions. */
static bool next_unit(struct resync *rs, uint64_t *sector, uint32_t *nr)
{
	uint64_t s, r, end;

	if (rs->nr_retry) {
		s = rs->retry[--rs->nr_retry];
	} else {
		s = rs->next_sector;
		while (s < rs->dev_sectors) {
			r = s / rs->region_sectors;
			if (region_set(rs, r))
				break;
			s = (r + 1) * rs->region_sectors;
		}
		if (s >= rs->dev_sectors) {
			rs->next_sector = s;
			return false;
		}
	}
	r = s / rs->region_sectors;
	end = (r + 1) * rs->region_sectors;
	if (end > rs->dev_sectors)
		end = rs->dev_sectors;
	if (end - s > WIRE_MAX_SECTORS_PER_REC)
		end = s + WIRE_MAX_SECTORS_PER_REC;
	*sector = s;
	*nr = (uint32_t)(end - s);
	if (s >= rs->next_sector)
		rs->next_sector = end;
	return true;
}

static int retry_unit(struct resync *rs, uint64_t sector)
{
	if (rs->nr_retry == rs->max_retry) {
		unsigned int n = rs->max_retry ? rs->max_retry * 2 : 16;
		uint64_t *x = realloc(rs->retry, n * sizeof(*x));

		if (!x)
			return -ENOMEM;
		rs->retry = x;
		rs->max_retry = n;
	}
	rs->retry[rs->nr_retry++] = sector;
	return 0;
}

/* The lowest region some unfinished unit still needs. */
static uint64_t clear_watermark(const struct resync *rs)
{
	uint64_t w = rs->next_sector / rs->region_sectors;
	unsigned int i;

	if (rs->next_sector >= rs->dev_sectors)
		w = rs->nr_regions;
	for (i = 0; i < RS_INFLIGHT; i++)
		if (rs->u[i].state != U_FREE && rs->u[i].sector / rs->region_sectors < w)
			w = rs->u[i].sector / rs->region_sectors;
	for (i = 0; i < rs->nr_retry; i++)
		if (rs->retry[i] / rs->region_sectors < w)
			w = rs->retry[i] / rs->region_sectors;
	return w;
}

/* Another peer still needs these regions: keep them dirty. */
static bool others_need_resync(const struct peer *p)
{
	struct manager *m = p->m;
	unsigned int i;

	for (i = 0; i < m->nr_peers; i++) {
		const struct peer *q = m->peers[i];

		if (q != p && !q->removed && q->inconsistent)
			return true;
	}
	return false;
}

static void clear_regions(struct resync *rs, uint64_t upto)
{
	struct manager *m = rs->p->m;
	uint64_t r = rs->cleared_upto, start;
	int err;

	if (rs->kind == RS_VERIFY || others_need_resync(rs->p)) {
		rs->cleared_upto = upto;
		return;
	}
	while (r < upto) {
		while (r < upto && !region_set(rs, r))
			r++;
		start = r;
		while (r < upto && region_set(rs, r))
			r++;
		if (r == start)
			break;
		err = ring_clear_dirty(m->ring, start, r - start, rs->gen);
		if (err == -EAGAIN) {
			/* marked meanwhile: those stay; another pass follows */
			rs->p->rs_again = true;
			break;
		}
		if (err < 0) {
			log_error_errno(err, "%s: clearing regions %" PRIu64 "..%" PRIu64,
					m->cfg->resource, start, r - 1);
			rs->p->rs_again = true;
			break;
		}
	}
	rs->cleared_upto = upto;
}

static int queue_flush(struct resync *rs, bool done)
{
	uint8_t buf[64];
	ssize_t k;

	rs->flush_id = rs->next_id++;
	rs->flush_clear_upto = clear_watermark(rs);
	rs->flush_done = done;
	rs->since_flush = 0;
	k = wire_encode_resync_flush(buf, sizeof(buf), rs->flush_id, done,
				     rs->p->m->gens.current);
	if (k < 0 || peer_queue_frame(rs->p, buf, (size_t)k) < 0) {
		rs->flush_id = 0;
		return -ENOBUFS;
	}
	return 0;
}

/* The peer made everything up to flush id durable. */
void resync_flushed(struct peer *p, uint64_t id)
{
	struct resync *rs = p->rs;
	struct manager *m = p->m;

	if (!rs || id != rs->flush_id) {
		if (id == JOIN_FLUSH_ID) {	/* maybe answered twice */
			p->join_pending = false;
			log_info("%s: peer %s: UpToDate in generation %016" PRIx64, m->cfg->resource,
				 p->cfg.name, m->gens.current);
			return;
		}
		peer_close(p, "unexpected ResyncFlushed");
		return;
	}
	rs->flush_id = 0;
	clear_regions(rs, rs->flush_clear_upto);
	if (!rs->flush_done)
		return;
	log_info("%s: peer %s: %s done: %" PRIu64 " MiB in %.1f s, %" PRIu64 " KiB sent as resync blocks",
		 m->cfg->resource, p->cfg.name, kind_name(rs->kind), rs->total_bytes >> 20,
		 (double)(now_ms() - rs->started_ms) / 1000.0, rs->sent_bytes >> 10);
	p->inconsistent = false;
	p->need_full = false;
	p->resyncs_done++;
	p->last_resync_bytes = rs->sent_bytes;
	resync_stop(p, NULL);
}

/* The peer's hashes for unit id. */
void resync_hash_reply(struct peer *p, const Dmrepl__V1__HashReply *h)
{
	struct resync *rs = p->rs;
	unsigned int i;

	for (i = 0; rs && i < RS_INFLIGHT; i++) {
		struct rs_unit *u = &rs->u[i];

		if (u->state == U_FREE || u->id != h->id || u->hash_done)
			continue;
		if (h->n_hash != u->nr_sectors / RS_BLOCK_SECTORS) {
			peer_close(p, "HashReply of the wrong size");
			return;
		}
		memcpy(u->peer_hash, h->hash, h->n_hash * sizeof(uint64_t));
		u->nr_hashes = (uint32_t)h->n_hash;
		u->hash_done = true;
		resync_pump(p->m);
		return;
	}
	peer_close(p, "unexpected HashReply");
}

/* A record overlapping [sector, +nr) is being queued to the peer. */
void resync_taint(struct peer *p, uint64_t sector, uint32_t nr)
{
	struct resync *rs = p->rs;
	unsigned int i;

	for (i = 0; i < RS_INFLIGHT; i++) {
		struct rs_unit *u = &rs->u[i];

		if (u->state != U_FREE && u->state != U_SENDING &&
		    sector < u->sector + u->nr_sectors && u->sector < sector + nr)
			u->tainted = true;
	}
}

/* Whole 4 KiB blocks that differ, coalesced, as RESYNC blocks. */
static int queue_blocks(struct resync *rs, struct rs_unit *u)
{
	struct peer *p = rs->p;
	uint32_t nblk = u->nr_sectors / RS_BLOCK_SECTORS, i = 0, j;
	bool all = !rs->hashes || u->nr_sectors % RS_BLOCK_SECTORS;

	while (i < (all ? 1 : nblk)) {
		uint64_t s;
		uint32_t n;
		struct sendq_entry *e;
		ssize_t k;

		if (all) {
			s = u->sector;
			n = u->nr_sectors;
			i = 1;
		} else {
			const uint8_t *b = (const uint8_t *)u->buf;

			while (i < nblk && XXH3_64bits(b + (size_t)i * 4096, 4096) == u->peer_hash[i])
				i++;
			if (i == nblk)
				break;
			j = i;
			while (j < nblk && XXH3_64bits(b + (size_t)j * 4096, 4096) != u->peer_hash[j])
				j++;
			s = u->sector + (uint64_t)i * RS_BLOCK_SECTORS;
			n = (j - i) * RS_BLOCK_SECTORS;
			i = j;
		}
		if (p->sq_tail - p->sq_head >= SENDQ_LEN)
			return -ENOBUFS;	/* cannot happen: room is checked first */
		e = &p->sq[p->sq_tail % SENDQ_LEN];
		k = wire_encode_resync_data(e->hdr, SENDQ_HDR, s, n);
		if (k < 0)
			return (int)k;
		e->hdr_len = (uint32_t)k;
		e->payload = (const uint8_t *)u->buf + ((s - u->sector) << 9);
		e->payload_len = n << 9;
		e->seq = UINT64_MAX;
		e->splice = false;	/* u->buf is reused: copy it */
		p->sq_tail++;
		rs->sent_bytes += (uint64_t)n << 9;
	}
	u->sq_mark = p->sq_tail;
	return 0;
}

/* A unit whose read and hashes are in: decide. */
static void unit_finish(struct resync *rs, struct rs_unit *u)
{
	struct manager *m = rs->p->m;
	uint32_t i;

	if (u->read_failed) {
		resync_stop(rs->p, "read error on the local device");
		return;
	}
	if (u->tainted) {
		if (retry_unit(rs, u->sector) < 0) {
			resync_stop(rs->p, "out of memory");
			return;
		}
		u->state = U_FREE;
		return;
	}
	if (rs->kind == RS_VERIFY) {
		bool differ = false;

		for (i = 0; i < u->nr_hashes; i++)
			differ |= XXH3_64bits((const uint8_t *)u->buf + (size_t)i * 4096, 4096) !=
				  u->peer_hash[i];
		if (differ) {
			uint64_t r = u->sector / rs->region_sectors;

			rs->mismatched_regions++;
			rs->differ_bytes += (uint64_t)u->nr_sectors << 9;
			if (ring_mark_dirty(m->ring, r, 1) < 0)
				log_warning("%s: cannot mark region %" PRIu64 " dirty",
					    m->cfg->resource, r);
			log_notice("%s: peer %s: verify: sectors %" PRIu64 "+%" PRIu32 " differ",
				   m->cfg->resource, rs->p->cfg.name, u->sector, u->nr_sectors);
		}
		rs->done_bytes += (uint64_t)u->nr_sectors << 9;
		u->state = U_FREE;
		return;
	}
	if (queue_blocks(rs, u) < 0) {
		resync_stop(rs->p, "cannot queue resync blocks");
		return;
	}
	rs->done_bytes += (uint64_t)u->nr_sectors << 9;
	rs->since_flush += (uint64_t)u->nr_sectors << 9;
	u->state = U_SENDING;
}

static void unit_start_read(struct resync *rs, struct rs_unit *u)
{
	struct manager *m = rs->p->m;
	struct iocb *cb = &u->iocb;

	io_prep_pread(cb, m->rs_dev_fd, u->buf, (size_t)u->nr_sectors << 9,
		      (long long)(u->sector << 9));
	io_set_eventfd(cb, m->rs_efd);
	if (io_submit(m->rs_ctx, 1, &cb) != 1) {
		u->read_failed = true;
		u->read_done = true;
		return;
	}
	u->state = U_READING;
}

/* Drive one peer's pass as far as it goes now. */
static void resync_peer_pump(struct resync *rs)
{
	struct peer *p = rs->p;
	struct manager *m = p->m;
	uint64_t local = ring_local_seq(m->ring), now;
	unsigned int i;
	bool busy = false;

	for (i = 0; i < RS_INFLIGHT && p->rs == rs; i++) {
		struct rs_unit *u = &rs->u[i];

		switch (u->state) {
		case U_WAIT_LOCAL:
			if (local >= u->L)
				unit_start_read(rs, u);
			break;
		case U_READING:
		case U_WAIT_HASH:
			if (u->read_done && (!rs->hashes || u->hash_done))
				unit_finish(rs, u);
			else if (u->read_done)
				u->state = U_WAIT_HASH;
			break;
		case U_SENDING:
			if (p->sq_head >= u->sq_mark)
				u->state = U_FREE;
			break;
		case U_FREE:
			break;
		}
		if (p->rs == rs && u->state != U_FREE)
			busy = true;
	}
	if (p->rs != rs)
		return;

	/*
	 * New units: records go first (a unit starts only while the send
	 * queue is at most a quarter full), and at most resync-rate-mb.
	 */
	now = now_ms();
	if (now - rs->window_ms >= 100) {
		rs->window_ms = now;
		rs->window_bytes = 0;
	}
	for (i = 0; i < RS_INFLIGHT && !rs->flush_id; i++) {
		struct rs_unit *u = &rs->u[i];
		uint64_t sector;
		uint32_t nr;
		uint8_t buf[96];
		ssize_t k;

		if (u->state != U_FREE)
			continue;
		if (p->sq_tail - p->sq_head > SENDQ_LEN / 4)
			break;
		if (m->cfg->resync_rate_mb &&
		    rs->window_bytes >= (uint64_t)m->cfg->resync_rate_mb * 1048576 / 10)
			break;
		if (rs->since_flush >= RS_FLUSH_BYTES) {
			if (queue_flush(rs, false) < 0)
				resync_stop(p, "cannot queue ResyncFlush");
			break;
		}
		if (!next_unit(rs, &sector, &nr))
			break;
		/* a unit never crosses its region's end (next_unit()) */
		if (!u->buf && posix_memalign(&u->buf, 4096,
					      rs->region_sectors << 9 < WIRE_MAX_PAYLOAD ?
					      rs->region_sectors << 9 : WIRE_MAX_PAYLOAD)) {
			u->buf = NULL;
			resync_stop(p, "out of memory");
			return;
		}
		u->sector = sector;
		u->nr_sectors = nr;
		rs->window_bytes += (uint64_t)nr << 9;
		u->L = p->cursor;
		u->tainted = u->read_done = u->hash_done = u->read_failed = false;
		u->id = rs->next_id++;
		if (rs->hashes && nr % RS_BLOCK_SECTORS == 0) {
			k = wire_encode_hash_request(buf, sizeof(buf), u->id, sector, nr,
						     RS_BLOCK_SECTORS);
			if (k < 0 || peer_queue_frame(p, buf, (size_t)k) < 0) {
				resync_stop(p, "cannot queue a HashRequest");
				return;
			}
		} else {
			u->hash_done = true;	/* a partial block: send it whole */
		}
		u->state = U_WAIT_LOCAL;
		busy = true;
		if (local >= u->L)
			unit_start_read(rs, u);
	}
	if (p->rs != rs)
		return;
	/* the end: every unit done and sent, nothing to retry */
	if (!busy && !rs->flush_id && !rs->nr_retry && rs->next_sector >= rs->dev_sectors &&
	    !rs->finished) {
		if (rs->kind == RS_VERIFY) {
			log_info("%s: peer %s: verify done: %" PRIu64 " MiB compared, %" PRIu64
				 " regions differ%s", m->cfg->resource, p->cfg.name,
				 rs->total_bytes >> 20, rs->mismatched_regions,
				 rs->mismatched_regions ? " (marked for resync)" : "");
			p->last_verify_mismatches = rs->mismatched_regions;
			p->verifies_done++;
			if (rs->mismatched_regions) {
				p->inconsistent = true;
				p->rs_again = true;
			}
			resync_stop(p, NULL);
			return;
		}
		rs->finished = true;
		if (queue_flush(rs, true) < 0)
			resync_stop(p, "cannot queue ResyncFlush");
	}
}

/* Start what should run, drive what runs. */
void resync_pump(struct manager *m)
{
	unsigned int i;

	for (i = 0; i < m->nr_peers; i++) {
		struct peer *p = m->peers[i];

		if (p->conn != PEER_UP) {
			if (p->rs)
				resync_stop(p, "connection lost");
			continue;
		}
		if (!p->peer_bitmap_done)
			continue;	/* its own regions come first */
		if (!p->rs && p->inconsistent && !p->join_pending &&
		    ring_can_resync(m->ring))
			resync_start(p, p->need_full ? RS_FULL : RS_BITMAP);
		else if (!p->rs && p->rs_again)
			resync_start(p, RS_BITMAP);
		if (p->rs) {
			resync_peer_pump(p->rs);
			peer_flush(p);
		}
	}
}

/* libaio completions. */
void resync_event(struct manager *m)
{
	struct io_event ev[32];
	uint64_t cnt;
	unsigned int j;
	int n;

	if (read(m->rs_efd, &cnt, sizeof(cnt)) < 0 && errno != EAGAIN)
		return;
	while ((n = io_getevents(m->rs_ctx, 0, 32, ev, NULL)) > 0)
		for (j = 0; j < (unsigned int)n; j++)
			resync_complete(m, &ev[j]);
	resync_pump(m);
}

void resync_status(const struct peer *p, struct json_object *o)
{
	const struct resync *rs = p->rs;
	struct json_object *r;
	uint64_t el, rate;

	if (!rs)
		return;
	r = json_object_new_object();
	el = now_ms() - rs->started_ms;
	rate = el ? rs->done_bytes * 1000 / el : 0;
	json_object_object_add(r, "kind", json_object_new_string(
		rs->kind == RS_FULL ? "full" : rs->kind == RS_VERIFY ? "verify" : "bitmap"));
	json_object_object_add(r, "checksums", json_object_new_boolean(rs->hashes));
	json_object_object_add(r, "total_bytes", json_object_new_uint64(rs->total_bytes));
	json_object_object_add(r, "done_bytes", json_object_new_uint64(rs->done_bytes));
	json_object_object_add(r, "sent_bytes", json_object_new_uint64(rs->sent_bytes));
	json_object_object_add(r, "percent", json_object_new_double(
		rs->total_bytes ? (double)rs->done_bytes * 100.0 / (double)rs->total_bytes : 100.0));
	json_object_object_add(r, "rate_bytes_per_s", json_object_new_uint64(rate));
	json_object_object_add(r, "eta_s", json_object_new_int64(
		rate ? (int64_t)((rs->total_bytes - rs->done_bytes) / rate) : -1));
	if (rs->kind == RS_VERIFY)
		json_object_object_add(r, "mismatched_regions",
				       json_object_new_uint64(rs->mismatched_regions));
	json_object_object_add(o, "resync", r);
}
