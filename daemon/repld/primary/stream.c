// SPDX-License-Identifier: GPL-2.0-only
/*
 * The primary's stream: consume the ring, ship every record to every peer.
 *
 * Each peer (struct replica) has a cursor (next record to queue), a send
 * queue of frames whose payloads point into the ring's read-only data area
 * (its connection, peer.c), and the three cumulative acknowledgments it
 * sent back (received, written, durable).
 *
 * What the kernel is told:
 *  - release_seq = min(durable) over the peers that still hold the ring:
 *    a peer that reconnects resumes from its durable point, so records
 *    stay until every such peer has them durably.  A peer that is down
 *    while the ring is more than half full stops holding it and is marked
 *    inconsistent (its copy then needs a resync).
 *  - ack_seq = min over sync peers of "written" and over semi-sync peers
 *    of "received"; everything published when there is none.
 *  - the target's mode is sync while any sync or semi-sync peer is
 *    configured and not disconnected by the administrator; a peer that is
 *    gone makes writes wait up to the hold timeout, then the target
 *    degrades by itself and comes back once the peer has caught up.
 *
 * The data generation (gens.h) moves on at the first write while some
 * peer is not in sync; the peers that are join it, and its bitmap
 * generation is forgotten once every peer is UpToDate again.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bitmap.h"
#include "log.h"
#include "loop.h"
#include "peerbits.h"
#include "primary.h"
#include "ring.h"
#include "tcpinfo.h"
#include "tracemark.h"

/* When record seq was queued to the peer, in us; 0: not among the last STREAM_LAT_RING. */
static uint64_t stream_queued_at_us(const struct replica *rp, uint64_t seq)
{
	const struct stream_lat *l = &rp->lat[seq % STREAM_LAT_RING];

	return l->seq == seq ? l->t_us : 0;
}

/* The peer counts for the target's sync mode (sync or semi-sync, not down by the admin). */
static bool stream_counts_for_sync(const struct replica *rp)
{
	return !rp->admin_down && !rp->removed && rp->mode != MODE_ASYNC;
}

void stream_update_kernel_mode(struct primary *pri)
{
	bool sync = false;
	unsigned int i;
	int r;

	for (i = 0; i < pri->nr_replicas; i++)
		sync |= stream_counts_for_sync(pri->replicas[i]);
	if (pri->kernel_mode_known && sync == pri->kernel_sync)
		return;
	r = pri->kops->set_mode(pri->kctx, sync);
	if (r < 0) {
		log_error_errno(r, "%s: cannot set the target to %s mode", pri->resource,
				sync ? "sync" : "async");
		return;
	}
	log_info("%s: target in %s mode", pri->resource, sync ? "sync" : "async");
	pri->kernel_sync = sync;
	pri->kernel_mode_known = true;
}

uint64_t stream_ring_bytes(struct primary *pri, uint64_t from, uint64_t to)
{
	uint64_t bytes = 0;

	for (uint64_t seq = from; seq < to; seq++) {
		const struct dm_repl_rec *rec = ring_rec(pri->ring, seq);

		if (rec)
			bytes += rec->data_len;
	}
	return bytes;
}

unsigned int stream_ring_fill_pct(struct primary *pri)
{
	struct ring_info ri;
	uint64_t recs, bytes, s;

	ring_get_info(pri->ring, &ri);
	recs = ri.prod_seq - pri->released;
	bytes = stream_ring_bytes(pri, pri->released, ri.prod_seq);
	s = recs * 100 / ri.nr_recs;
	return (unsigned int)(bytes * 100 / ri.data_size > s ? bytes * 100 / ri.data_size : s);
}

/*
 * The device grew (dm-repl(7) RESIZE): before any record past the old end
 * is read, and before the target's bits for the grown part are moved, the
 * peers' bitmaps cover the new size.  The grown regions come marked in
 * the target's bitmap, and reach every peer's bitmap through
 * stream_bits_step(): a bitmap resync sends them.
 */
void stream_check_size(struct primary *pri)
{
	uint64_t old = peerbits_regions(pri->pb), nr;
	struct ring_info ri;
	int r;

	if (ring_refresh_size(pri->ring) <= 0)
		return;
	ring_get_info(pri->ring, &ri);
	nr = ((ri.dev_sectors << 9) + (1ULL << ri.region_shift) - 1) >> ri.region_shift;
	r = peerbits_grow(pri->pb, nr);
	if (r < 0) {
		log_error_errno(r, "%s: the device grew to %" PRIu64 " sectors, but the peers' bitmaps cannot follow",
				pri->resource, ri.dev_sectors);
		loop_exit(pri->env->loop, r);
		return;
	}
	log_notice("%s: the device grew to %" PRIu64 " sectors (%" PRIu64 " regions, from %" PRIu64
		   "): the new part goes to the peers by resync",
		   pri->resource, ri.dev_sectors, nr, old);
}

void stream_mark_records(struct replica *rp, uint64_t from, uint64_t to)
{
	struct primary *pri = rp->pri;
	struct ring_info ri;
	unsigned int shift;

	stream_check_size(pri);
	ring_get_info(pri->ring, &ri);
	shift = ri.region_shift - 9;
	for (uint64_t s = from; s < to; s++) {
		const struct dm_repl_rec *rec = ring_rec(pri->ring, s);
		uint64_t first, last;

		if (!rec || !rec->nr_sectors || rec->sector >= ri.dev_sectors ||
		    rec->nr_sectors > ri.dev_sectors - rec->sector)
			continue;
		first = rec->sector >> shift;
		last = (rec->sector + rec->nr_sectors - 1) >> shift;
		peerbits_mark(pri->pb, rp->slot, first, last - first + 1);
	}
}

/* Make the peers' bitmaps durable; false (logged, in status): they are not. */
static bool stream_sync_bits(struct primary *pri)
{
	int r = peerbits_sync(pri->pb);
	uint64_t now = loop_now_ms();

	if (r < 0 && (!pri->pb_error || now - pri->pb_error_ms >= 10000)) {
		log_error_errno(r, "%s: cannot write the peers' out-of-sync bitmaps to the metadata device: records stay in the ring until it works",
				pri->resource);
		pri->pb_error_ms = now;
	} else if (r == 0 && pri->pb_error) {
		log_notice("%s: the peers' out-of-sync bitmaps are written again", pri->resource);
	}
	pri->pb_error = r;
	return r == 0;
}

/* What may be released as far as the peers holding the ring go: their least durable. */
static uint64_t stream_release_to(const struct primary *pri)
{
	uint64_t release = ring_prod(pri->ring);

	for (unsigned int i = 0; i < pri->nr_replicas; i++) {
		const struct replica *rp = pri->replicas[i];

		if (rp->holds_ring && rp->durable < release)
			release = rp->durable;
	}
	return release > pri->released ? release : pri->released;
}

/*
 * Records about to be released that a peer which stopped holding the ring
 * never got: their regions go into that peer's bitmap.  They are released
 * once that is durable (stream_meta_step(), marked_upto).
 */
static void stream_mark_released(struct primary *pri)
{
	uint64_t s = pri->released > pri->mark_pending ? pri->released : pri->mark_pending;
	uint64_t release = stream_release_to(pri);
	unsigned int i;

	if (release <= s)
		return;
	for (i = 0; i < pri->nr_replicas; i++) {
		struct replica *rp = pri->replicas[i];

		if (!rp->holds_ring && !rp->removed)
			stream_mark_records(rp, s, release);
	}
	pri->mark_pending = release;
}

uint64_t stream_peer_oos(struct replica *rp)
{
	struct ring_info ri;

	ring_get_info(rp->pri->ring, &ri);
	return peerbits_count(rp->pri->pb, rp->slot) + ri.dirty_regions;
}

void stream_peer_in_sync(struct replica *rp)
{
	struct primary *pri = rp->pri;

	rp->full_why = NULL;
	if (rp->behind)
		log_info("%s: peer %s: caught up, streaming again", pri->resource,
			 rp->conn.cfg.name);
	rp->behind = false;
	if (rp->slot < 0 || peerbits_tracked(pri->pb, rp->slot))
		return;
	if (peerbits_set_tracked(pri->pb, rp->slot) < 0)
		log_warning("%s: peer %s: cannot record that its bitmap is tracked", pri->resource,
			    rp->conn.cfg.name);
}

int stream_assign_slots(struct primary *pri)
{
	const char *names[CFG_MAX_PEERS];
	unsigned int i, n = 0;
	int r;

	for (i = 0; i < pri->nr_replicas && n < CFG_MAX_PEERS; i++)
		if (!pri->replicas[i]->removed)
			names[n++] = pri->replicas[i]->conn.cfg.name;
	r = peerbits_assign(pri->pb, names, n);
	if (r < 0)
		return log_error_errno(r, "%s: cannot hand out the peers' bitmap slots",
				       pri->resource);
	if (r > 0)
		log_warning("%s: the metadata device has too few peer slots for %u peers ('replctl create-md --max-peers'): %d of them always get a full sync",
			    pri->resource, n, r);
	for (i = 0; i < pri->nr_replicas; i++) {
		struct replica *rp = pri->replicas[i];

		rp->slot = peerbits_slot(pri->pb, rp->conn.cfg.name);
		if (rp->slot >= 0 && peerbits_tracked(pri->pb, rp->slot))
			rp->full_why = NULL;
		else if (rp->slot < 0)
			rp->full_why = "no peer slot left in the metadata";
		else if (!peerbits_persistent(pri->pb))
			rp->full_why = "not in sync since repld started, and there is no metadata device to remember what it lacks";
		else
			rp->full_why = "not in sync since its bitmap slot was handed out (a new peer, or this node's data came from another primary)";
		if (rp->slot >= 0 && peerbits_count(pri->pb, rp->slot))
			rp->inconsistent = true;
	}
	return 0;
}

/*
 * The target's bitmap stands for every peer (overflow, unclean shutdown,
 * failed local writes): its bits go into every peer's bitmap, and once
 * that is durable (stream_meta_step()) they are cleared in the target, so
 * that one peer's resync clears only its own.  Nothing is taken while the
 * last bits taken are not cleared yet.
 */
static void stream_take_target_bits(struct primary *pri)
{
	struct dm_repl_dirty d;
	struct ring_info ri;
	uint8_t *b = NULL;
	uint64_t r, start;
	size_t bytes;

	ring_get_info(pri->ring, &ri);
	if (pri->tgt_bits || !ri.dirty_regions || (ri.state & DM_REPL_STATE_OVERFLOW) ||
	    !ring_can_resync(pri->ring))
		return;
	if (ring_get_dirty(pri->ring, NULL, 0, &d) < 0)
		return;
	bytes = (size_t)((d.nr_regions + 7) / 8);
	b = malloc(bytes ? bytes : 1);
	/* grown since the size was read: the next time, every bit has its place */
	if (!b || ring_get_dirty(pri->ring, b, bytes, &d) < 0 ||
	    d.nr_regions != peerbits_regions(pri->pb)) {
		free(b);
		return;
	}
	for (r = 0; r < d.nr_regions;) {
		start = bitmap_next_run(b, d.nr_regions, &r);
		if (r > start)
			peerbits_mark(pri->pb, -1, start, r - start);
	}
	for (unsigned int i = 0; i < pri->nr_replicas; i++) {
		struct replica *rp = pri->replicas[i];

		if (!rp->inconsistent)
			log_info("%s: peer %s: regions out of sync in the target: it needs a resync",
				 pri->resource, rp->conn.cfg.name);
		rp->inconsistent = true;
		if (rp->rs)
			resync_mark_again(rp->rs);
	}
	pri->tgt_bits = b;
	pri->tgt_regions = d.nr_regions;
	pri->tgt_gen = d.dirty_gen;
}

/* The target's bits taken are durable in the peers' bitmaps: clear them there. */
static void stream_clear_target_bits(struct primary *pri)
{
	uint64_t r, start;

	if (!pri->tgt_bits)
		return;
	for (r = 0; r < pri->tgt_regions;) {
		start = bitmap_next_run(pri->tgt_bits, pri->tgt_regions, &r);
		/* EAGAIN: marked meanwhile; those stay for the next time */
		if (r > start && ring_clear_dirty(pri->ring, start, r - start, pri->tgt_gen) < 0)
			break;
	}
	free(pri->tgt_bits);
	pri->tgt_bits = NULL;
}

/* Bitmap bookkeeping, in memory: the target's bits and the released records' regions. */
void stream_bits_step(struct primary *pri)
{
	stream_check_size(pri);
	stream_take_target_bits(pri);
	stream_mark_released(pri);
}

/*
 * The metadata write: the peers' bitmaps as the bookkeeping, the resync
 * and the handshake left them, durably; then what waited for it, the
 * target's bits cleared and the records marked released.  When it fails,
 * both wait, and the next turn tries again.
 */
void stream_meta_step(struct primary *pri)
{
	if (peerbits_dirty(pri->pb) && !stream_sync_bits(pri))
		return;
	pri->marked_upto = pri->mark_pending;
	stream_clear_target_bits(pri);
}

/* Some peer that does not hold the ring gets the regions of released records. */
static bool stream_must_mark(const struct primary *pri)
{
	unsigned int i;

	for (i = 0; i < pri->nr_replicas; i++)
		if (!pri->replicas[i]->holds_ring && !pri->replicas[i]->removed)
			return true;
	return false;
}

void stream_update_ring(struct primary *pri)
{
	/* everything is acknowledged while no peer counts for sync */
	uint64_t release = stream_release_to(pri), ack = ring_prod(pri->ring);
	unsigned int i;
	int r;

	for (i = 0; i < pri->nr_replicas; i++) {
		struct replica *rp = pri->replicas[i];

		if (!stream_counts_for_sync(rp))
			continue;
		if (rp->mode == MODE_SYNC && rp->written < ack)
			ack = rp->written;
		if (rp->mode == MODE_SEMI_SYNC && rp->received < ack)
			ack = rp->received;
	}
	if (ack < pri->acked)
		ack = pri->acked;
	/* not before their regions are durable in the bitmaps of the peers
	 * that need them; the sync writes do not wait for that */
	if (stream_must_mark(pri) && release > pri->marked_upto)
		release = pri->marked_upto > pri->released ? pri->marked_upto : pri->released;
	if (release == pri->released && ack == pri->acked)
		return;
	r = ring_update(pri->ring, release, ack);
	if (r < 0) {
		log_error_errno(r, "%s: ring update (release %" PRIu64 ", ack %" PRIu64 ")",
				pri->resource, release, ack);
		return;
	}
	pri->released = release;
	pri->acked = ack;
}

/* ---- replicas ------------------------------------------------------------------- */

struct replica *stream_replica_new(struct primary *pri, const struct config_peer *cp)
{
	const struct config *c = pri->env->cfg;
	struct replica *rp = calloc(1, sizeof(*rp));

	if (!rp)
		return NULL;
	if (peer_init(&rp->conn, pri->env->loop, pri->peer_ops, pri->resource, cp,
		      c->reconnect_min_ms, c->reconnect_max_ms) < 0) {
		free(rp);
		return NULL;
	}
	peer_set_tls(&rp->conn, &pri->env->tls);
	peer_set_compress(&rp->conn, cp->compress == COMPRESS_ZSTD ? cp->compress_level : 0);
	peer_set_rate_limit(&rp->conn, cp->rate_limit);
	fence_init(&rp->fence);
	rp->pri = pri;
	rp->mode = cp->mode;
	rp->slot = -1;
	rp->holds_ring = true;
	rp->cursor = pri->released;
	rp->received = rp->written = rp->durable = pri->released;
	rsctl_init(&rp->rsc, loop_now_ms());
	return rp;
}

void stream_replica_free(struct replica *rp)
{
	if (!rp)
		return;
	resync_free(rp->rs, NULL);
	fence_fini(rp);
	peer_fini(&rp->conn);
	free(rp);
}

struct replica *stream_find(struct primary *pri, const char *name)
{
	unsigned int i;

	for (i = 0; i < pri->nr_replicas; i++)
		if (!pri->replicas[i]->removed && !strcmp(pri->replicas[i]->conn.cfg.name, name))
			return pri->replicas[i];
	return NULL;
}

int stream_save_gens(struct primary *pri)
{
	return genstore_save(&pri->gs, &pri->gens);
}

/* ---- sending ------------------------------------------------------------------------ */

/*
 * Compressing costs far more than queueing a ring payload (a MiB takes
 * milliseconds, 20 ms under TCG): stream_fill() returns once it has
 * compressed this much, so that stream_pump() hands it to the socket
 * before compressing more.  Filling the whole arena (8 MiB) first left
 * the link idle while the socket drained.
 */
#define STREAM_ZFILL_BYTES	(256U << 10)

/* Queue records from the ring: header frame + payload pointing into it. */
static void stream_fill(struct replica *rp, uint64_t prod)
{
	struct primary *pri = rp->pri;
	struct peer *p = &rp->conn;
	uint64_t now_us = loop_now_ns() / 1000, zin = 0;

	while (rp->cursor < prod && peer_queued(p) < PEER_QUEUE_LEN) {
		const struct dm_repl_rec *rec = ring_rec(pri->ring, rp->cursor);
		uint8_t hdr[PEER_HDR];
		const void *payload, *zp = NULL;
		uint32_t len;
		ssize_t n, z;

		if (!rec || ring_payload(pri->ring, rec, &payload, &len) < 0) {
			log_error("%s: record %" PRIu64 " unreadable in the ring", pri->resource,
				  rp->cursor);
			peer_close(p, "ring record unreadable");
			return;
		}
		if (rec->op == DM_REPL_OP_GAP) {
			/* the kernel stopped logging for a while: a hole */
			log_warning("%s: peer %s: the ring overflowed (GAP at record %" PRIu64
				    "): it needs a resync", pri->resource, p->cfg.name, rp->cursor);
			rp->inconsistent = true;
			if (rp->rs)
				resync_mark_again(rp->rs);	/* new regions in the bitmap */
		} else if (rp->rs && rec->nr_sectors) {
			resync_taint(rp->rs, rec->sector, rec->nr_sectors);
		}
		z = 0;
		if (rec->op == DM_REPL_OP_WRITE) {
			z = peer_compress(p, payload, len, true, &zp);
			if (z < 0)
				return;		/* the arena is full: once it drains */
		}
		/* a GAP travels too: sequence numbers stay contiguous */
		n = wire_encode_data_zstd(hdr, sizeof(hdr), rec, (uint32_t)z);
		if (n < 0) {
			peer_close(p, "cannot encode a record");
			return;
		}
		if (z > 0)
			peer_queue_payload(p, hdr, (size_t)n, zp, (uint32_t)z, rp->cursor, false);
		else
			peer_queue_payload(p, hdr, (size_t)n, payload, len, rp->cursor, true);
		rp->lat[rp->cursor % STREAM_LAT_RING] = (struct stream_lat) { rp->cursor, now_us };
		tracemark('P', "read", rp->cursor);
		rp->cursor++;
		if (z > 0 && (zin += len) >= STREAM_ZFILL_BYTES)
			return;		/* to the socket first */
	}
}

void stream_send_join(struct replica *rp)
{
	uint8_t buf[64];
	ssize_t k = wire_encode_resync_flush(buf, sizeof(buf), RESYNC_JOIN_FLUSH_ID, true,
					     rp->pri->gens.current);

	if (k < 0 || peer_queue_frame(&rp->conn, buf, (size_t)k) < 0)
		peer_close(&rp->conn, "cannot queue a ResyncFlush");
}

/*
 * The first write while some peer is not in sync: a new data generation,
 * so that a peer that went away (and maybe became primary) is recognised
 * as behind -- or as a split brain -- when it comes back.  Stored by the
 * generations step.
 */
void stream_rotate_step(struct primary *pri)
{
	if (!pri->rotate_pending || pri->pumped <= pri->rotate_mark)
		return;
	pri->rotate_pending = false;
	pri->gens_old = pri->gens.current;
	gens_rotate(&pri->gens);
	pri->gens_store |= GENS_ROTATED;
}

/* The generation moved on: the peers that are here and in sync get every write: they join. */
static void stream_joins(struct primary *pri)
{
	log_info("%s: writes without every peer: data generation %016" PRIx64 " -> %016" PRIx64
		 " (bitmap from %016" PRIx64 ")", pri->resource, pri->gens_old, pri->gens.current,
		 pri->gens.bitmap);
	for (unsigned int i = 0; i < pri->nr_replicas; i++) {
		struct replica *rp = pri->replicas[i];

		if (rp->conn.state != PEER_UP || rp->inconsistent || rp->rs ||
		    !rp->peer_bitmap_done)
			continue;
		rp->join_pending = true;
		stream_send_join(rp);
	}
}

/*
 * The generation identifiers changed in memory: store them, then do what
 * waited for that (a new generation's joins, the log of an UpToDate one).
 * A store that fails is logged and tried again at the next tick.
 */
void stream_gens_step(struct primary *pri)
{
	unsigned int what = pri->gens_store;

	if (!what || pri->gens_failed)
		return;
	if (stream_save_gens(pri) < 0) {
		pri->gens_failed = true;
		return;
	}
	pri->gens_store = 0;
	if (what & GENS_ROTATED)
		stream_joins(pri);
	if (what & GENS_UPTODATE)
		log_info("%s: every peer UpToDate in generation %016" PRIx64, pri->resource,
			 pri->gens.current);
}

void stream_check_in_sync(struct primary *pri)
{
	unsigned int i, n = 0;

	/* a new generation whose joins are not sent yet */
	if (pri->gens_store & GENS_ROTATED)
		return;
	for (i = 0; i < pri->nr_replicas; i++) {
		const struct replica *rp = pri->replicas[i];

		if (rp->removed)
			continue;
		if (rp->conn.state != PEER_UP || rp->inconsistent || rp->rs ||
		    !rp->peer_bitmap_done || rp->join_pending)
			return;
		n++;
	}
	if (!n || (!pri->gens.bitmap && !pri->gens.history && !pri->rotate_pending))
		return;
	pri->rotate_pending = false;
	if (pri->gens.bitmap || pri->gens.history) {
		pri->gens.bitmap = pri->gens.history = 0;
		pri->gens_store |= GENS_UPTODATE;
	}
}

/* ---- resync -------------------------------------------------------------------------- */

void stream_resync_stop(struct replica *rp, const char *why)
{
	if (!rp->rs)
		return;
	rp->rs_again |= resync_again(rp->rs);
	resync_free(rp->rs, why);
	rp->rs = NULL;
}

static void stream_resync_completed(void *ctx)
{
	stream_request_pump(ctx);
}

static int stream_resync_clean(void *ctx, uint64_t first, uint64_t count)
{
	struct replica *rp = ctx;
	struct primary *pri = rp->pri;

	if (peerbits_gen(pri->pb, rp->slot) != rp->rs_gen)
		return -EAGAIN;		/* marked since: the next pass */
	/* written by this turn's metadata step; a clear not yet on disk
	 * only means more work after a crash */
	peerbits_clear(pri->pb, rp->slot, first, count);
	return 0;
}

static void stream_resync_differs(void *ctx, uint64_t r)
{
	struct replica *rp = ctx;

	peerbits_mark(rp->pri->pb, rp->slot, r, 1);	/* written by the metadata step */
}

static const struct resync_owner_ops stream_resync_ops = {
	.clean = stream_resync_clean,
	.differs = stream_resync_differs,
};

int stream_resync_start(struct replica *rp, enum rs_kind kind)
{
	struct primary *pri = rp->pri;
	const struct config *c = pri->env->cfg;
	uint8_t *regions = NULL;
	int r;

	if (rp->rs)
		return -EBUSY;
	rp->gap_scanned = 0;
	if (!pri->rs_io) {
		r = resync_io_new(pri->env->loop, c->device, stream_resync_completed, pri,
				  &pri->rs_io);
		if (r < 0)
			return log_error_errno(r, "%s: %s for resync reads", pri->resource,
					       c->device);
	}
	if (kind == RS_BITMAP && rp->full_why) {
		log_warning("%s: peer %s: full sync instead of a bitmap resync: %s", pri->resource,
			    rp->conn.cfg.name, rp->full_why);
		kind = RS_FULL;
	}
	if (kind == RS_BITMAP) {
		r = peerbits_copy(pri->pb, rp->slot, &regions);
		if (r < 0)
			return r;
	}
	rp->rs_gen = peerbits_gen(pri->pb, rp->slot);
	r = resync_new(pri->rs_io, pri->ring, &rp->conn, pri->resource, kind,
		       c->resync_checksums, regions, &stream_resync_ops, rp, &rp->rs);
	if (r == 0 || r == -ENOBUFS) {
		rp->rs_again = false;
		rsctl_restart(&rp->rsc, loop_now_ms());
	}
	if (r < 0 && r != -ENOBUFS)
		return log_error_errno(r, "%s: peer %s: cannot start a resync", pri->resource,
				       rp->conn.cfg.name);
	return r;
}

void stream_resync_flushed(struct replica *rp, uint64_t id)
{
	struct primary *pri = rp->pri;
	int r;

	if (id == RESYNC_JOIN_FLUSH_ID) {	/* maybe answered twice */
		if (rp->join_pending && !rp->inconsistent)
			stream_peer_in_sync(rp);
		rp->join_pending = false;
		log_info("%s: peer %s: UpToDate in generation %016" PRIx64, pri->resource,
			 rp->conn.cfg.name, pri->gens.current);
		return;
	}
	r = rp->rs ? resync_flushed(rp->rs, id) : -EPROTO;
	if (r < 0) {
		peer_close(&rp->conn, "unexpected ResyncFlushed");
		return;
	}
	if (r == RESYNC_DONE) {
		uint64_t gen = resync_flush_gen(rp->rs);

		rp->need_full = false;
		rp->resyncs_done++;
		rp->last_resync_bytes = resync_sent_bytes(rp->rs);
		stream_resync_stop(rp, NULL);
		/* regions marked during the pass stay: then another pass */
		if (!rp->rs_again && !peerbits_count(pri->pb, rp->slot)) {
			rp->inconsistent = false;
			stream_peer_in_sync(rp);
			/*
			 * The generation moved on after the last flush was
			 * queued (a first write while the pass ran): the peer
			 * joins the new one before anyone counts it in it.
			 */
			if (gen != pri->gens.current) {
				rp->join_pending = true;
				stream_send_join(rp);
			}
		} else {
			rp->rs_again = true;
		}
	}
}

/*
 * Whether the ring overflowed and its GAP has not been sent to the peer
 * yet (the target is still overflowing, or the peer's queue was full).
 * The GAP's regions need another pass, which the stream learns when it
 * sends the GAP: until then no pass may end, or its final flush would tell
 * the peer its copy is complete while it lacks the overflow's writes (it
 * would say UpToDate, and record it, until the GAP arrived).  Looks at
 * each record once.
 */
static bool stream_gap_unsent(struct replica *rp)
{
	struct primary *pri = rp->pri;
	uint64_t prod = ring_prod(pri->ring), s;

	/* overflowing: the GAP is not even in the ring yet */
	if (ring_state(pri->ring) & DM_REPL_STATE_OVERFLOW)
		return true;
	for (s = rp->gap_scanned > rp->cursor ? rp->gap_scanned : rp->cursor; s < prod; s++) {
		const struct dm_repl_rec *rec = ring_rec(pri->ring, s);

		if (rec && rec->op == DM_REPL_OP_GAP) {
			rp->gap_scanned = s;	/* here again until the stream sent it */
			return true;
		}
	}
	rp->gap_scanned = prod;
	return false;
}

/*
 * How long the oldest record the controller waits for (written by a sync
 * peer, received by another) has been queued; 0: none is waiting.
 */
static uint64_t stream_oldest_wait_us(const struct replica *rp)
{
	uint64_t s = rp->mode == MODE_SYNC ? rp->written : rp->received, t, now;

	if (s >= rp->cursor)
		return 0;
	t = stream_queued_at_us(rp, s);
	now = loop_now_ns() / 1000;
	return t && now > t ? now - t : 0;
}

/* Drive the peer's pass; a verify's result and a failure end it here. */
static void stream_resync_step(struct replica *rp)
{
	const struct config *c = rp->pri->env->cfg;
	struct resync_pace pace;
	int r;
	uint64_t now = loop_now_ms();
	uint32_t rtt;

	if (stream_gap_unsent(rp))
		return;		/* it waits for the GAP to go out first */
	rsctl_set_bounds(&rp->rsc, c->resync_min_rate_mb, c->resync_rate_mb);
	rsctl_pending(&rp->rsc, stream_oldest_wait_us(rp));
	if (now - rp->rtt_read_ms >= RSCTL_STEP_MS && rp->conn.ev.fd >= 0) {
		rp->rtt_read_ms = now;
		if (tcpinfo_min_rtt_us(rp->conn.ev.fd, &rtt) == 0)
			rsctl_set_rtt(&rp->rsc, rtt);
	}
	pace.rate = rsctl_rate(&rp->rsc, now);
	pace.ahead_max = rsctl_ahead_max(&rp->rsc);
	pace.unit_sectors = rsctl_unit_sectors(&rp->rsc);
	r = resync_step(rp->rs, rp->cursor, &pace, rp->pri->gens.current);
	rsctl_used(&rp->rsc, pace.started);

	if (r == RESYNC_VERIFIED) {
		uint64_t n = resync_mismatches(rp->rs);

		rp->last_verify_mismatches = n;
		rp->verifies_done++;
		if (n) {
			rp->inconsistent = true;
			rp->rs_again = true;
		}
		stream_resync_stop(rp, NULL);
	} else if (r < 0) {
		stream_resync_stop(rp, resync_why(rp->rs));
	}
}

/* Start what should run, drive what runs. */
void stream_resync_pump(struct primary *pri)
{
	unsigned int i;

	for (i = 0; i < pri->nr_replicas; i++) {
		struct replica *rp = pri->replicas[i];

		if (rp->conn.state != PEER_UP) {
			stream_resync_stop(rp, "connection lost");
			continue;
		}
		if (!rp->peer_bitmap_done)
			continue;	/* its own regions come first */
		if (!rp->rs && rp->inconsistent && !rp->join_pending &&
		    ring_can_resync(pri->ring))
			stream_resync_start(rp, rp->need_full ? RS_FULL : RS_BITMAP);
		else if (!rp->rs && rp->rs_again)
			stream_resync_start(rp, RS_BITMAP);
		if (rp->rs) {
			stream_resync_step(rp);
			peer_flush(&rp->conn);
		}
	}
}

void stream_request_pump(struct primary *pri)
{
	pri->pump_wanted = true;
}

void stream_pump(struct primary *pri)
{
	uint64_t prod = ring_prod(pri->ring);
	unsigned int i;

	/* after the records' counter: a record past the old end sees the new size */
	stream_check_size(pri);
	for (i = 0; i < pri->nr_replicas; i++) {
		struct replica *rp = pri->replicas[i];
		struct peer *p = &rp->conn;

		if (p->state != PEER_UP || p->want_out)
			continue;
		do {
			stream_fill(rp, prod);
			peer_flush(p);
		} while (p->state == PEER_UP && !p->want_out && rp->cursor < prod);
	}
	ring_mark_read(pri->ring, prod);
	pri->pumped = prod;
}

bool stream_ack(struct replica *rp, uint64_t received, uint64_t written, uint64_t durable)
{
	/* cumulative and monotonic; never beyond what we sent */
	if (received > rp->cursor || written > received || durable > received ||
	    received < rp->received || written < rp->written || durable < rp->durable)
		return false;
	/* the latency of the newest record the ack covers, for the resync
	 * controller: written for a sync peer, received otherwise */
	if ((rp->mode == MODE_SYNC ? written > rp->written : received > rp->received)) {
		uint64_t s = (rp->mode == MODE_SYNC ? written : received) - 1, now = loop_now_ns() / 1000;
		uint64_t t = stream_queued_at_us(rp, s);

		if (t && now >= t)
			rsctl_sample(&rp->rsc, loop_now_ms(), now - t);
	}
	rp->received = received;
	rp->written = written;
	rp->durable = durable;
	stream_update_ring(rp->pri);
	return true;
}
