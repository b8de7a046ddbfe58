// SPDX-License-Identifier: GPL-2.0-only
/*
 * The primary's resync and verify passes (resync.h).
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
 *      for a verify, tells the owner which regions differ.
 *
 * Application records go first: new units start only while the peer's
 * send queue is at most a quarter full and what is ahead of the next
 * record (queued, in the socket or on the link, being read) is less than
 * the pace's ahead_max bytes, at the pace's rate (a token bucket of one
 * unit; rsctl.h), in units of at most its unit_sectors.  Every 64 MiB,
 * and at the end (done), a ResyncFlush makes the peer's copy durable; the
 * owner then clears the regions below the oldest unfinished unit, unless
 * something was marked since the pass took them (then the next pass does
 * them again).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libaio.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <xxhash.h>

#include "bitmap.h"
#include "config.h"
#include "log.h"
#include "loop.h"
#include "macro.h"
#include "peer.h"
#include "resync.h"
#include "ring.h"

#define RS_INFLIGHT	32U			/* units being read or hashed */
#define RS_FLUSH_BYTES	(64ULL << 20)		/* ResyncFlush every ... */
#define RS_BLOCK_SECTORS 8U			/* 4 KiB hash blocks */
#define RS_IO_DEPTH	(RS_INFLIGHT * CFG_MAX_PEERS)	/* every peer may resync at once */
#define RS_POLL_MS	1U			/* the least wait for a queue draining */

enum unit_state {
	U_FREE = 0,
	U_WAIT_LOCAL,		/* records below L not yet on the local disk */
	U_READING,
	U_WAIT_HASH,		/* read done, the peer's hashes not yet here */
	U_SENDING,		/* blocks queued: buffer busy until sent */
};

struct resync;

struct rs_unit {
	struct resync *rs;
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

struct resync_io {
	struct loop *loop;
	struct ev ev;			/* the eventfd of the completions */
	int dev_fd;
	io_context_t ctx;
	bool ctx_ok;
	void (*completed)(void *ctx);
	void *completed_ctx;
};

struct resync {
	struct resync_io *io;
	struct ring *ring;
	struct peer *p;
	char resource[CONFIG_NAME_MAX + 1];
	const char *why;		/* why a step failed */
	bool again;			/* regions marked meanwhile: another pass */
	enum rs_kind kind;
	bool hashes;
	uint8_t *bitmap;		/* the regions of this pass, LE bit order */
	const struct resync_owner_ops *ops;
	void *ctx;
	uint64_t nr_regions, region_sectors, dev_sectors;
	uint64_t total_bytes, done_bytes, sent_bytes, differ_bytes;
	uint64_t next_sector;		/* iterator */
	struct rs_retry {
		uint64_t sector;
		uint32_t nr;
	} *retry;			/* units to do again */
	unsigned int nr_retry, max_retry;
	struct rs_unit u[RS_INFLIGHT];
	uint64_t next_id;
	uint64_t flush_id;		/* outstanding ResyncFlush, 0: none */
	uint64_t flush_clear_upto;	/* regions below it cleared on its answer */
	bool flush_done;		/* the final flush */
	uint64_t flush_gen;		/* the generation the last flush carried */
	uint64_t since_flush;
	uint64_t cleared_upto;
	uint64_t started_ms;
	uint64_t mismatched_regions;
	int64_t tokens;			/* bytes the pace lets start now (< 0: owed) */
	uint64_t tokens_ms;		/* when they were counted, 0: never */
	uint64_t ahead_waits;		/* steps that waited for the queue to drain */
	bool finished;
};

/* ---- the reader ------------------------------------------------------------------ */

/* A read completed: mark its unit, whichever peer's pass it belongs to. */
static void resync_complete(const struct io_event *ev)
{
	struct rs_unit *u = container_of(ev->obj, struct rs_unit, iocb);

	u->read_done = true;
	if ((long)ev->res != (long)u->nr_sectors << 9)
		u->read_failed = true;
}

/* libaio completions. */
static void resync_io_event(struct ev *ev, uint32_t events)
{
	struct resync_io *io = container_of(ev, struct resync_io, ev);
	struct io_event e[32];
	uint64_t cnt;
	unsigned int j;
	int n;

	if (read(ev->fd, &cnt, sizeof(cnt)) < 0 && errno != EAGAIN)
		return;
	while ((n = io_getevents(io->ctx, 0, 32, e, NULL)) > 0)
		for (j = 0; j < (unsigned int)n; j++)
			resync_complete(&e[j]);
	io->completed(io->completed_ctx);
}

int resync_io_new(struct loop *l, const char *device, void (*completed)(void *ctx), void *ctx,
		  struct resync_io **ret)
{
	struct resync_io *io = calloc(1, sizeof(*io));
	int r;

	if (!io)
		return -ENOMEM;
	io->loop = l;
	io->completed = completed;
	io->completed_ctx = ctx;
	io->ev = (struct ev) { .fd = -1, .fn = resync_io_event };
	io->dev_fd = open(device, O_RDONLY | O_DIRECT | O_CLOEXEC);
	if (io->dev_fd < 0) {
		r = -errno;
		goto fail;
	}
	io->ev.fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (io->ev.fd < 0) {
		r = -errno;
		goto fail;
	}
	memset(&io->ctx, 0, sizeof(io->ctx));
	r = io_setup(RS_IO_DEPTH, &io->ctx);
	if (r < 0)
		goto fail;
	io->ctx_ok = true;
	r = loop_add(l, &io->ev, EPOLLIN);
	if (r < 0)
		goto fail;
	*ret = io;
	return 0;
fail:
	resync_io_free(io);
	return r;
}

/* After every pass was freed (their reads are done). */
void resync_io_free(struct resync_io *io)
{
	if (!io)
		return;
	if (io->ev.fd >= 0) {
		loop_del(io->loop, &io->ev);
		close(io->ev.fd);
	}
	if (io->ctx_ok)
		io_destroy(io->ctx);
	if (io->dev_fd >= 0)
		close(io->dev_fd);
	free(io);
}

/* ---- passes --------------------------------------------------------------------------- */

static const char *kind_name(enum rs_kind k)
{
	return k == RS_FULL ? "full sync" : k == RS_VERIFY ? "verify" : "bitmap resync";
}

int resync_new(struct resync_io *io, struct ring *ring, struct peer *p, const char *resource,
	       enum rs_kind kind, bool checksums, uint8_t *regions,
	       const struct resync_owner_ops *ops, void *ctx, struct resync **ret)
{
	struct ring_info ri;
	struct resync *rs;
	size_t bytes;
	uint64_t r;

	ring_get_info(ring, &ri);
	rs = calloc(1, sizeof(*rs));
	if (!rs) {
		free(regions);
		return -ENOMEM;
	}
	rs->region_sectors = 1ULL << (ri.region_shift - 9);
	rs->dev_sectors = ri.dev_sectors;
	rs->nr_regions = (ri.dev_sectors + rs->region_sectors - 1) / rs->region_sectors;
	bytes = (size_t)((rs->nr_regions + 7) / 8);
	rs->bitmap = regions;
	if (kind != RS_BITMAP) {
		free(regions);
		rs->bitmap = malloc(bytes ? bytes : 1);
		if (rs->bitmap)
			memset(rs->bitmap, 0xff, bytes);
	}
	if (!rs->bitmap) {
		free(rs);
		return -ENOMEM;
	}
	rs->io = io;
	rs->ring = ring;
	rs->p = p;
	rs->ops = ops;
	rs->ctx = ctx;
	snprintf(rs->resource, sizeof(rs->resource), "%s", resource);
	rs->kind = kind;
	rs->hashes = kind == RS_VERIFY || checksums;
	for (unsigned int i = 0; i < RS_INFLIGHT; i++)
		rs->u[i].rs = rs;
	for (r = 0; r < rs->nr_regions; r++) {
		if (bitmap_test(rs->bitmap, r)) {
			uint64_t s = r * rs->region_sectors;
			uint64_t n = rs->dev_sectors - s < rs->region_sectors ?
				     rs->dev_sectors - s : rs->region_sectors;

			rs->total_bytes += n << 9;
		}
	}
	rs->started_ms = loop_now_ms();
	rs->next_id = 1;
	if (kind != RS_VERIFY) {
		uint8_t buf[64];
		ssize_t k = wire_encode_resync_begin(buf, sizeof(buf), 0, kind == RS_FULL);

		if (k < 0 || peer_queue_frame(p, buf, (size_t)k) < 0) {
			resync_free(rs, "cannot queue ResyncBegin");
			return -ENOBUFS;
		}
	}
	log_info("%s: peer %s: %s of %" PRIu64 " MiB starts%s", rs->resource, p->cfg.name,
		 kind_name(kind), rs->total_bytes >> 20, rs->hashes ? " (hashes first)" : "");
	*ret = rs;
	return 0;
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
void resync_free(struct resync *rs, const char *why)
{
	struct io_event ev[RS_INFLIGHT];
	unsigned int i;

	if (!rs)
		return;
	while (reads_in_flight(rs)) {
		int n = io_getevents(rs->io->ctx, 1, RS_INFLIGHT, ev, NULL);

		if (n < 0 && n != -EINTR)
			break;
		/* other peers' completions too: they are marked, not lost */
		for (i = 0; n > 0 && i < (unsigned int)n; i++)
			resync_complete(&ev[i]);
	}
	if (why)
		log_warning("%s: peer %s: %s interrupted (%s); it starts again later",
			    rs->resource, rs->p->cfg.name, kind_name(rs->kind), why);
	for (i = 0; i < RS_INFLIGHT; i++)
		free(rs->u[i].buf);
	free(rs->retry);
	free(rs->bitmap);
	free(rs);
}

/* Next unit: retries first, then the iterator over the pass's regions. */
/* The next unit, of at most max sectors (a retry: as it was). */
static bool next_unit(struct resync *rs, uint32_t max, uint64_t *sector, uint32_t *nr)
{
	uint64_t s, r, end;

	if (rs->nr_retry) {
		rs->nr_retry--;
		*sector = rs->retry[rs->nr_retry].sector;
		*nr = rs->retry[rs->nr_retry].nr;
		return true;
	} else {
		s = rs->next_sector;
		while (s < rs->dev_sectors) {
			r = s / rs->region_sectors;
			if (bitmap_test(rs->bitmap, r))
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
	if (max && end - s > max)
		end = s + max;
	*sector = s;
	*nr = (uint32_t)(end - s);
	if (s >= rs->next_sector)
		rs->next_sector = end;
	return true;
}

static int retry_unit(struct resync *rs, uint64_t sector, uint32_t nr)
{
	if (rs->nr_retry == rs->max_retry) {
		unsigned int n = rs->max_retry ? rs->max_retry * 2 : 16;
		struct rs_retry *x = realloc(rs->retry, n * sizeof(*x));

		if (!x)
			return -ENOMEM;
		rs->retry = x;
		rs->max_retry = n;
	}
	rs->retry[rs->nr_retry].sector = sector;
	rs->retry[rs->nr_retry++].nr = nr;
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
		if (rs->retry[i].sector / rs->region_sectors < w)
			w = rs->retry[i].sector / rs->region_sectors;
	return w;
}

/* The regions below upto are durable on the peer: the owner clears them. */
static void clear_regions(struct resync *rs, uint64_t upto)
{
	uint64_t r = rs->cleared_upto, start;
	int err;

	if (rs->kind == RS_VERIFY) {
		rs->cleared_upto = upto;
		return;
	}
	while (r < upto) {
		start = bitmap_next_run(rs->bitmap, upto, &r);
		if (r == start)
			break;
		err = rs->ops->clean(rs->ctx, start, r - start);
		if (err == -EAGAIN) {
			/* marked meanwhile: those stay; another pass follows */
			rs->again = true;
			break;
		}
		if (err < 0) {
			log_error_errno(err, "%s: clearing regions %" PRIu64 "..%" PRIu64,
					rs->resource, start, r - 1);
			rs->again = true;
			break;
		}
	}
	rs->cleared_upto = upto;
}

static int queue_flush(struct resync *rs, bool done, uint64_t gen)
{
	uint8_t buf[64];
	ssize_t k;

	rs->flush_id = rs->next_id++;
	rs->flush_clear_upto = clear_watermark(rs);
	rs->flush_done = done;
	rs->flush_gen = gen;
	rs->since_flush = 0;
	/* done tells the peer its copy is complete: not while regions marked
	 * during the pass wait for the next one */
	k = wire_encode_resync_flush(buf, sizeof(buf), rs->flush_id, done && !rs->again, gen);
	if (k < 0 || peer_queue_frame(rs->p, buf, (size_t)k) < 0) {
		rs->flush_id = 0;
		rs->why = "cannot queue ResyncFlush";
		return -ENOBUFS;
	}
	return 0;
}

int resync_flushed(struct resync *rs, uint64_t id)
{
	if (!rs->flush_id || id != rs->flush_id)
		return -EPROTO;
	rs->flush_id = 0;
	clear_regions(rs, rs->flush_clear_upto);
	if (!rs->flush_done)
		return 0;
	log_info("%s: peer %s: %s done: %" PRIu64 " MiB in %.1f s, %" PRIu64 " KiB sent as resync blocks",
		 rs->resource, rs->p->cfg.name, kind_name(rs->kind), rs->total_bytes >> 20,
		 (double)(loop_now_ms() - rs->started_ms) / 1000.0, rs->sent_bytes >> 10);
	return RESYNC_DONE;
}

int resync_hash_reply(struct resync *rs, const Dmrepl__V1__HashReply *h, const char **why)
{
	unsigned int i;

	for (i = 0; i < RS_INFLIGHT; i++) {
		struct rs_unit *u = &rs->u[i];

		if (u->state == U_FREE || u->id != h->id || u->hash_done)
			continue;
		if (h->n_hash != u->nr_sectors / RS_BLOCK_SECTORS) {
			*why = "HashReply of the wrong size";
			return -EPROTO;
		}
		memcpy(u->peer_hash, h->hash, h->n_hash * sizeof(uint64_t));
		u->nr_hashes = (uint32_t)h->n_hash;
		u->hash_done = true;
		return 0;
	}
	*why = "unexpected HashReply";
	return -EPROTO;
}

void resync_taint(struct resync *rs, uint64_t sector, uint32_t nr)
{
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
		const void *data, *zp = NULL;
		uint8_t hdr[PEER_HDR];
		uint64_t s;
		uint32_t n;
		ssize_t k, z;
		int r;

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
		data = (const uint8_t *)u->buf + ((s - u->sector) << 9);
		/* the arena full: raw rather than half a unit queued */
		z = peer_compress(p, data, n << 9, false, &zp);
		k = wire_encode_resync_data_zstd(hdr, sizeof(hdr), s, n, (uint32_t)z);
		if (k < 0)
			return (int)k;
		/* u->buf is reused: copied into the socket, never spliced */
		r = peer_queue_payload(p, hdr, (size_t)k, z > 0 ? zp : data,
				       z > 0 ? (uint32_t)z : n << 9, UINT64_MAX, false);
		if (r < 0)
			return r;	/* cannot happen: room is checked first */
		rs->sent_bytes += (uint64_t)n << 9;
	}
	u->sq_mark = peer_queue_mark(p);
	return 0;
}

/* A unit whose read and hashes are in: decide. */
static int unit_finish(struct resync *rs, struct rs_unit *u)
{
	uint32_t i;

	if (u->read_failed) {
		rs->why = "read error on the local device";
		return -EIO;
	}
	if (u->tainted) {
		if (retry_unit(rs, u->sector, u->nr_sectors) < 0) {
			rs->why = "out of memory";
			return -ENOMEM;
		}
		u->state = U_FREE;
		return 0;
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
			rs->ops->differs(rs->ctx, r);
			log_notice("%s: peer %s: verify: sectors %" PRIu64 "+%" PRIu32 " differ",
				   rs->resource, rs->p->cfg.name, u->sector, u->nr_sectors);
		}
		rs->done_bytes += (uint64_t)u->nr_sectors << 9;
		u->state = U_FREE;
		return 0;
	}
	if (queue_blocks(rs, u) < 0) {
		rs->why = "cannot queue resync blocks";
		return -ENOBUFS;
	}
	rs->done_bytes += (uint64_t)u->nr_sectors << 9;
	rs->since_flush += (uint64_t)u->nr_sectors << 9;
	u->state = U_SENDING;
	return 0;
}

static void unit_start_read(struct resync *rs, struct rs_unit *u)
{
	struct resync_io *io = rs->io;
	struct iocb *cb = &u->iocb;

	io_prep_pread(cb, io->dev_fd, u->buf, (size_t)u->nr_sectors << 9,
		      (long long)(u->sector << 9));
	io_set_eventfd(cb, io->ev.fd);
	if (io_submit(io->ctx, 1, &cb) != 1) {
		u->read_failed = true;
		u->read_done = true;
		return;
	}
	u->state = U_READING;
}

/* What one resync_step() carries from unit to unit. */
struct rs_step {
	struct resync_pace *pace;
	uint64_t stream_pos;		/* the peer's cursor: L of the units started */
	uint64_t local;			/* ring_local_seq() */
	uint64_t reading;		/* bytes ahead that are still being read */
	uint64_t gen;
	bool busy;			/* some unit is not free */
};

/* Move every unit on: start its read, decide it, or free it once sent. */
static int units_advance(struct resync *rs, struct rs_step *st)
{
	struct peer *p = rs->p;
	unsigned int i;
	int r;

	for (i = 0; i < RS_INFLIGHT; i++) {
		struct rs_unit *u = &rs->u[i];

		switch (u->state) {
		case U_WAIT_LOCAL:
			if (st->local >= u->L)
				unit_start_read(rs, u);
			break;
		case U_READING:
		case U_WAIT_HASH:
			if (u->read_done && (!rs->hashes || u->hash_done)) {
				r = unit_finish(rs, u);
				if (r < 0)
					return r;
			} else if (u->read_done) {
				u->state = U_WAIT_HASH;
			}
			break;
		case U_SENDING:
			if (peer_sent_upto(p) >= u->sq_mark)
				u->state = U_FREE;
			break;
		case U_FREE:
			break;
		}
		if (u->state != U_FREE)
			st->busy = true;
		/* with hashes only the blocks that differ go out, and
		 * a verify sends none: their units are not ahead */
		if (!rs->hashes && (u->state == U_WAIT_LOCAL || u->state == U_READING))
			st->reading += (uint64_t)u->nr_sectors << 9;
	}
	return 0;
}

/* Add the tokens the pace's rate gave since the last step, up to a burst. */
static void pace_refill(struct resync *rs, const struct resync_pace *pace)
{
	uint64_t now = loop_now_ms();

	if (pace->rate) {
		uint64_t dt = rs->tokens_ms && now - rs->tokens_ms < 1000 ? now - rs->tokens_ms : 1000;
		uint64_t unit = (uint64_t)pace->unit_sectors << 9;
		int64_t burst = (int64_t)(pace->ahead_max > unit ? pace->ahead_max : unit);

		rs->tokens += (int64_t)(pace->rate / 1000 * dt);
		if (rs->tokens > burst)
			rs->tokens = burst;
	}
	rs->tokens_ms = now;
}

/*
 * Whether the send queue, the token bucket and what is ahead let a new
 * unit start; if not, arm the wake-up that nothing else would give.
 */
static bool pace_allows(struct resync *rs, const struct rs_step *st)
{
	const struct resync_pace *pace = st->pace;
	struct peer *p = rs->p;
	uint64_t ahead;

	if (peer_queued(p) > PEER_QUEUE_LEN / 4)
		return false;
	if (pace->rate && rs->tokens <= 0) {
		/* when the bucket has a byte again */
		loop_wake_in(rs->io->loop, (unsigned int)((uint64_t)-rs->tokens * 1000 /
							  pace->rate) + 1);
		return false;
	}
	ahead = pace->ahead_max ? st->reading + peer_ahead_bytes(p) : 0;
	if (pace->ahead_max && ahead >= pace->ahead_max) {
		rs->ahead_waits++;
		/*
		 * A read's completion wakes us, the link draining
		 * does not: look again once it has drained below
		 * ahead_max at about the pace's rate.
		 */
		if (!st->reading) {
			uint64_t ms = pace->rate ? (ahead - pace->ahead_max) * 1000 /
						   pace->rate : 0;

			loop_wake_in(rs->io->loop, RS_POLL_MS + (unsigned int)(ms < 100 ? ms : 100));
		}
		return false;
	}
	return true;
}

/*
 * Start unit u on sectors sector+nr: charge the pace, ask the peer for
 * its hashes, and read it once the records below L are on the local disk.
 */
static int unit_start(struct resync *rs, struct rs_unit *u, struct rs_step *st,
		      uint64_t sector, uint32_t nr)
{
	uint8_t buf[96];
	ssize_t k;

	/* a unit never crosses its region's end (next_unit()) */
	if (!u->buf && posix_memalign(&u->buf, 4096,
				      rs->region_sectors << 9 < WIRE_MAX_PAYLOAD ?
				      rs->region_sectors << 9 : WIRE_MAX_PAYLOAD)) {
		u->buf = NULL;
		rs->why = "out of memory";
		return -ENOMEM;
	}
	u->sector = sector;
	u->nr_sectors = nr;
	rs->tokens -= (int64_t)nr << 9;
	if (!rs->hashes)
		st->reading += (uint64_t)nr << 9;
	st->pace->started += (uint64_t)nr << 9;
	u->L = st->stream_pos;
	u->tainted = u->read_done = u->hash_done = u->read_failed = false;
	u->id = rs->next_id++;
	if (rs->hashes && nr % RS_BLOCK_SECTORS == 0) {
		k = wire_encode_hash_request(buf, sizeof(buf), u->id, sector, nr,
					     RS_BLOCK_SECTORS);
		if (k < 0 || peer_queue_frame(rs->p, buf, (size_t)k) < 0) {
			rs->why = "cannot queue a HashRequest";
			return -ENOBUFS;
		}
	} else {
		u->hash_done = true;	/* a partial block: send it whole */
	}
	u->state = U_WAIT_LOCAL;
	st->busy = true;
	if (st->local >= u->L)
		unit_start_read(rs, u);
	return 0;
}

/* Start new units in the free slots while the pace allows, or a ResyncFlush. */
static int units_start(struct resync *rs, struct rs_step *st)
{
	unsigned int i;
	int r;

	for (i = 0; i < RS_INFLIGHT && !rs->flush_id; i++) {
		struct rs_unit *u = &rs->u[i];
		uint64_t sector;
		uint32_t nr;

		if (u->state != U_FREE)
			continue;
		if (!pace_allows(rs, st))
			break;
		if (rs->since_flush >= RS_FLUSH_BYTES) {
			r = queue_flush(rs, false, st->gen);
			if (r < 0)
				return r;
			break;
		}
		if (!next_unit(rs, st->pace->unit_sectors, &sector, &nr))
			break;
		r = unit_start(rs, u, st, sector, nr);
		if (r < 0)
			return r;
	}
	return 0;
}

/*
 * The end: every unit done and sent, nothing to retry.  A verify is over
 * (RESYNC_VERIFIED); a resync queues its final ResyncFlush.
 */
static int pass_finish(struct resync *rs, const struct rs_step *st)
{
	if (!st->busy && !rs->flush_id && !rs->nr_retry && rs->next_sector >= rs->dev_sectors &&
	    !rs->finished) {
		if (rs->kind == RS_VERIFY) {
			log_info("%s: peer %s: verify done: %" PRIu64 " MiB compared, %" PRIu64
				 " regions differ%s", rs->resource, rs->p->cfg.name,
				 rs->total_bytes >> 20, rs->mismatched_regions,
				 rs->mismatched_regions ? " (marked for resync)" : "");
			return RESYNC_VERIFIED;
		}
		rs->finished = true;
		return queue_flush(rs, true, st->gen);
	}
	return 0;
}

int resync_step(struct resync *rs, uint64_t stream_pos, struct resync_pace *pace,
		uint64_t gen)
{
	struct rs_step st = {
		.pace = pace,
		.stream_pos = stream_pos,
		.local = ring_local_seq(rs->ring),
		.gen = gen,
	};
	int r;

	pace->started = 0;

	r = units_advance(rs, &st);
	if (r < 0)
		return r;

	/*
	 * New units: records go first.  A unit starts only while the send
	 * queue is at most a quarter full and what is ahead of the next
	 * record -- queued, in the socket or on the link, and the units
	 * still being read, which are queued the moment their read is in
	 * (without hashes: whole) -- is within
	 * pace->ahead_max.  The rate is a token bucket that holds at most
	 * one unit or ahead_max, so units go out evenly rather than in a
	 * burst per interval.
	 */
	pace_refill(rs, pace);
	r = units_start(rs, &st);
	if (r < 0)
		return r;
	return pass_finish(rs, &st);
}

const char *resync_why(const struct resync *rs)
{
	return rs->why ? rs->why : "failed";
}

void resync_mark_again(struct resync *rs)
{
	rs->again = true;
}

bool resync_again(const struct resync *rs)
{
	return rs->again;
}

uint64_t resync_flush_gen(const struct resync *rs)
{
	return rs->flush_gen;
}

uint64_t resync_sent_bytes(const struct resync *rs)
{
	return rs->sent_bytes;
}

uint64_t resync_mismatches(const struct resync *rs)
{
	return rs->mismatched_regions;
}

void resync_status(const struct resync *rs, struct json_object *o)
{
	struct json_object *r;
	uint64_t el, rate;

	r = json_object_new_object();
	el = loop_now_ms() - rs->started_ms;
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
	json_object_object_add(r, "ahead_waits", json_object_new_uint64(rs->ahead_waits));
	json_object_object_add(r, "eta_s", json_object_new_int64(
		rate ? (int64_t)((rs->total_bytes - rs->done_bytes) / rate) : -1));
	if (rs->kind == RS_VERIFY)
		json_object_object_add(r, "mismatched_regions",
				       json_object_new_uint64(rs->mismatched_regions));
	json_object_object_add(o, "resync", r);
}
