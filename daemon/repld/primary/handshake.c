// SPDX-License-Identifier: GPL-2.0-only
/*
 * The primary's half of the handshake with a secondary: our Hello, its
 * Hello (who it is, what it holds: resume point, consistency, generation
 * identifiers), its own bitmap (PeerBitmap, when it was a primary).  From
 * them: where its stream resumes, and what it needs -- nothing, a bitmap
 * resync, a full sync -- or why it is refused (split brain, newer or
 * unrelated data: replication to it stops, its data untouched).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "bitmap.h"
#include "log.h"
#include "loop.h"
#include "peerbits.h"
#include "primary.h"
#include "ring.h"

void handshake_hello(struct replica *rp)
{
	struct primary *pri = rp->pri;
	struct peer *p = &rp->conn;
	unsigned int pct = pri->env->cfg->congestion_fill_pct;
	struct ring_info ri;
	uint8_t buf[PEER_HDR];
	ssize_t n;

	ring_get_info(pri->ring, &ri);
	/*
	 * The ring keeps a record until every peer has it durable, and an
	 * async peer whose backlog passes congestion-fill-pct of the ring is
	 * pulled ahead: so that a peer which keeps up is never pulled ahead
	 * for its checkpoint-ms alone, it makes records durable at the latest
	 * every half of that backlog (half the ring when nobody is pulled ahead).
	 */
	if (!pct)
		pct = 100;
	{
		Dmrepl__V1__Hello hello = DMREPL__V1__HELLO__INIT;

		hello.protocol_version = WIRE_PROTOCOL_VERSION;
		hello.node = pri->env->cfg->node;
		hello.resource = pri->resource;
		hello.role = DMREPL__V1__ROLE__ROLE_PRIMARY;
		hello.device_sectors = ri.dev_sectors;
		hello.stream_id = ri.ring_id;
		hello.mode = (Dmrepl__V1__Mode)rp->mode;
		hello.durable_every_records = (uint64_t)ri.nr_recs * pct / 200 + 1;
		hello.durable_every_bytes = ri.data_size * pct / 200 + 1;
		n = wire_encode_hello(buf, sizeof(buf), &hello);
	}
	if (n < 0 || peer_queue_frame(p, buf, (size_t)n) < 0)
		peer_close(p, "cannot encode Hello");
}

/*
 * Divergent data (split brain, a newer peer, unrelated data): who wins?
 * Data only flows from the primary, so it may only ever be us; anything
 * else stops replication to that peer with the reason, data untouched.
 */
static bool handshake_we_win(struct replica *rp, const Dmrepl__V1__Hello *h, enum gen_verdict v,
			     char *why, size_t len)
{
	struct primary *pri = rp->pri;
	const struct config *c = pri->env->cfg;
	const struct config_peer *p = &rp->conn.cfg;

	if (h->discard_my_data) {
		log_warning("%s: peer %s: %s, and the peer discards its changes (discard-my-data)",
			    pri->resource, p->name, gens_verdict_name(v));
		return true;
	}
	if (v == GV_SPLIT_BRAIN && c->after_split_brain == ASB_DISCARD_YOUNGER &&
	    h->gen_since != pri->gens.since) {
		if (h->gen_since > pri->gens.since) {
			log_warning("%s: peer %s: split brain; after-split-brain = discard-younger-primary: the peer became primary later, its changes are discarded",
				    pri->resource, p->name);
			return true;
		}
		snprintf(why, len, "split brain: this node (%s) is the younger primary; after-split-brain = discard-younger-primary keeps %s's data: make %s primary",
			 c->node, p->name, p->name);
		return false;
	}
	if (v == GV_SPLIT_BRAIN && c->after_split_brain == ASB_DISCARD_LEAST) {
		uint64_t mine = stream_peer_oos(rp);

		if (h->dirty_regions < mine ||
		    (h->dirty_regions == mine && h->gen_since > pri->gens.since)) {
			log_warning("%s: peer %s: split brain; after-split-brain = discard-least-changes: the peer changed %" PRIu64
				    " regions, this node %" PRIu64 ": the peer's changes are discarded",
				    pri->resource, p->name, h->dirty_regions, mine);
			return true;
		}
		snprintf(why, len, "split brain: %s changed %" PRIu64 " regions, this node %" PRIu64
			 "; after-split-brain = discard-least-changes keeps %s's data: make %s primary",
			 p->name, h->dirty_regions, mine, p->name, p->name);
		return false;
	}
	if (v == GV_SPLIT_BRAIN)
		snprintf(why, len, "split brain: both %s and %s wrote since generation %016" PRIx64
			 " while disconnected; replication stopped, no data touched. Resolve: on the node whose changes are to go, run 'replctl discard-my-data %s' (as a secondary), then 'replctl connect %s %s' here",
			 c->node, p->name, pri->gens.bitmap ? pri->gens.bitmap : h->gen_bitmap,
			 pri->resource, pri->resource, p->name);
	else if (v == GV_PEER_NEWER)
		snprintf(why, len, "%s holds newer data (it was primary after this node and this node did not write since): make %s primary, or discard its changes with 'replctl discard-my-data %s' there",
			 p->name, p->name, pri->resource);
	else
		snprintf(why, len, "%s holds unrelated data (no common generation): 'replctl discard-my-data %s' there starts a full sync",
			 p->name, pri->resource);
	return false;
}

/* What handshake_done() gathers and decides from the peer's Hello. */
struct handshake_state {
	const Dmrepl__V1__Hello *h;
	struct gens pg;			/* the peer's generations */
	struct ring_info ri;
	uint64_t tail;			/* the oldest record not released */
	enum gen_verdict v;		/* what the peer needs */
	bool resumable;			/* its stream may resume from the ring */
};

/* The peer is the one configured, speaks our protocol, and has room. */
static int handshake_check(struct replica *rp, struct handshake_state *hs)
{
	struct primary *pri = rp->pri;
	const Dmrepl__V1__Hello *h = hs->h;

	ring_get_info(pri->ring, &hs->ri);
	if (h->protocol_version != WIRE_PROTOCOL_VERSION)
		return -EPROTONOSUPPORT;
	if (h->role != DMREPL__V1__ROLE__ROLE_SECONDARY || strcmp(h->node, rp->conn.cfg.name) ||
	    strcmp(h->resource, pri->resource))
		return -EPROTO;
	if (h->device_sectors < hs->ri.dev_sectors)
		return -ENOSPC;
	return 0;
}

/* Record what the Hello says, and forget what the last connection knew. */
static void handshake_take_hello(struct replica *rp, const struct handshake_state *hs)
{
	struct peer *p = &rp->conn;
	const Dmrepl__V1__Hello *h = hs->h;

	/* its payloads compressed, if so configured */
	p->zstd_peer = (h->features & WIRE_FEATURE_ZSTD) != 0;
	if (p->zlevel && !p->zstd_peer)
		log_warning("%s: peer %s does not accept zstd: its payloads go uncompressed",
			    rp->pri->resource, p->cfg.name);
	rp->peer_gens = hs->pg;
	rp->need_full = false;
	rp->join_pending = false;
	rp->peer_bitmap_done = false;
	rp->peer_bitmap_regions = 0;
	rp->peer_bitmap_next = 0;
	rp->peer_sectors = h->device_sectors;
}

/*
 * Compare the generations into hs->v and whether the stream may resume;
 * -ESTALE (why in last_error) when the peer's data is divergent and ours
 * does not win.
 */
static int handshake_verdict(struct replica *rp, struct handshake_state *hs)
{
	struct primary *pri = rp->pri;
	struct peer *p = &rp->conn;
	const Dmrepl__V1__Hello *h = hs->h;
	char why[1024];

	hs->v = gens_compare(&pri->gens, &hs->pg);
	hs->resumable = h->stream_id == hs->ri.ring_id && h->resume_seq >= hs->tail &&
			h->resume_seq <= hs->ri.prod_seq;
	if (hs->v == GV_PEER_NEWER || hs->v == GV_SPLIT_BRAIN || hs->v == GV_UNRELATED) {
		if (!handshake_we_win(rp, h, hs->v, why, sizeof(why))) {
			log_error("%s: peer %s: %s", pri->resource, p->cfg.name, why);
			snprintf(p->last_error, sizeof(p->last_error), "%s", why);
			rp->split_brain = true;
			return -ESTALE;
		}
		/* ours wins: its changes (PeerBitmap) and ours (bitmap), or
		 * everything when we do not know what it changed */
		hs->resumable = false;
		hs->v = hs->v == GV_UNRELATED ? GV_FULL : GV_BITMAP;
		if (hs->v == GV_BITMAP && !h->dirty_regions && !h->gen_bitmap)
			hs->v = GV_FULL;
	}
	rp->split_brain = false;
	return 0;
}

/*
 * Where the peer's stream resumes, and what it needs besides: nothing,
 * a bitmap resync (inconsistent), or a full sync (need_full too).
 */
static uint64_t handshake_resume(struct replica *rp, const struct handshake_state *hs)
{
	struct primary *pri = rp->pri;
	const struct config *c = pri->env->cfg;
	struct peer *p = &rp->conn;
	const Dmrepl__V1__Hello *h = hs->h;
	enum gen_verdict v = hs->v;
	uint64_t tail = hs->tail, resume;

	if (hs->resumable && (v == GV_SAME || v == GV_BITMAP)) {
		/* the stream resumes; a copy with a hole (GAP) catches up with
		 * the bitmap; it joins our generation */
		resume = h->resume_seq;
		if (!h->consistent) {
			rp->inconsistent = true;
		} else {
			/* it lacks only what the ring still holds: from now
			 * on its bitmap knows everything */
			rp->join_pending = true;
			stream_peer_in_sync(rp);
		}
	} else if (v != GV_FULL && h->consistent && rp->full_why) {
		/* nothing recorded what the peer may lack */
		log_warning("%s: peer %s: its copy cannot be resumed from this ring and its out-of-sync bitmap is not tracked (%s): full sync",
			    pri->resource, p->cfg.name, rp->full_why);
		rp->inconsistent = true;
		rp->need_full = true;
		resume = tail;
	} else if (v != GV_FULL && h->consistent) {
		/* a consistent copy of an earlier generation of ours: what it
		 * lacks is in the bitmap (unclean restart, records released
		 * without it, a failover) */
		log_warning("%s: peer %s: its copy (generation %016" PRIx64 ", stream %016" PRIx64
			    " up to %" PRIu64 ") cannot be resumed from this ring: bitmap resync",
			    pri->resource, p->cfg.name, hs->pg.current, h->stream_id, h->resume_seq);
		rp->inconsistent = true;
		resume = tail;
	} else if ((v == GV_SAME || v == GV_BITMAP) && !rp->full_why) {
		/* an Inconsistent copy of ours (a resync interrupted, a hole):
		 * its tracked bitmap still holds every region it lacks, since
		 * only what was durable on it was cleared */
		log_warning("%s: peer %s: its copy is Inconsistent (an interrupted resync, or a hole): bitmap resync of the regions it lacks",
			    pri->resource, p->cfg.name);
		rp->inconsistent = true;
		resume = tail;
	} else if (v == GV_FULL && !hs->pg.current && c->skip_initial_sync && tail == 0) {
		/* a new secondary, the administrator says both devices were
		 * equal (zeroed) when the target was created, and the ring
		 * holds every write since: no initial sync; it records
		 * itself consistent on our ResyncFlush */
		rp->inconsistent = false;
		rp->join_pending = true;
		stream_peer_in_sync(rp);
		resume = 0;
	} else {
		log_warning("%s: peer %s: its copy is not consistent%s: full sync",
			    pri->resource, p->cfg.name,
			    hs->pg.current ? " (an interrupted resync, or divergent data)" :
			    " (a new secondary)");
		rp->inconsistent = true;
		rp->need_full = true;
		resume = tail;
	}
	return resume;
}

/* The peer is up: its stream starts at record resume. */
static void handshake_up(struct replica *rp, uint64_t resume)
{
	struct peer *p = &rp->conn;

	rp->cursor = resume;
	rp->received = rp->written = rp->durable = resume;
	rp->holds_ring = true;
	peer_set_up(p);
	rp->ever_connected = true;
	log_info("%s: peer %s connected (%s), resuming at record %" PRIu64 "%s", rp->pri->resource,
		 p->cfg.name, config_mode_name(rp->mode), resume,
		 rp->inconsistent ? " (inconsistent)" : "");
}

/*
 * The peer told us what it holds.  Choose where its stream resumes, and
 * what it needs: nothing, a bitmap resync, a full sync -- or refuse.
 */
static int handshake_done(struct replica *rp, const Dmrepl__V1__Hello *h)
{
	struct handshake_state hs = {
		.h = h,
		.pg = { h->gen_current, h->gen_bitmap, h->gen_history, h->gen_since },
		.tail = rp->pri->released,
	};
	int r;

	r = handshake_check(rp, &hs);
	if (r < 0)
		return r;
	handshake_take_hello(rp, &hs);
	r = handshake_verdict(rp, &hs);
	if (r < 0)
		return r;
	handshake_up(rp, handshake_resume(rp, &hs));
	return 0;
}

void handshake_reply(struct replica *rp, const Dmrepl__V1__Hello *h)
{
	struct peer *p = &rp->conn;
	char why[sizeof(p->last_error)];
	int r;

	if (p->state != PEER_HANDSHAKE) {
		peer_close(p, "unexpected Hello");
		return;
	}
	r = handshake_done(rp, h);
	if (r == -ESTALE) {
		/* divergent data: stop until the administrator acts */
		uint8_t eb[512];
		ssize_t k;

		snprintf(why, sizeof(why), "%s", p->last_error);
		k = wire_encode_error(eb, sizeof(eb), DMREPL__V1__ERROR__CODE__CODE_DIVERGED, why);
		/* best effort: tell the peer why, then close */
		if (k > 0)
			peer_send_now(p, eb, (size_t)k);
		rp->admin_down = true;
		peer_close(p, why);
		stream_update_kernel_mode(rp->pri);
	} else if (r < 0) {
		snprintf(why, sizeof(why), "handshake refused: %s",
			 r == -EPROTONOSUPPORT ? "protocol version" :
			 r == -ENOSPC ? "the peer's device is smaller" :
			 "node, resource or role do not match the configuration");
		peer_close(p, why);
	}
}

/* Regions a PeerBitmap may reach past the device: the padding of a bitmap. */
#define PEER_BITMAP_SLACK	(1ULL << 20)

/* The peer's own bitmap: its regions need the resync too. */
void handshake_bitmap(struct replica *rp, const Dmrepl__V1__PeerBitmap *b)
{
	struct primary *pri = rp->pri;
	struct peer *p = &rp->conn;
	struct ring_info ri;
	uint64_t i, r, s, e, first, last;

	if (rp->peer_bitmap_done) {
		peer_close(p, "PeerBitmap after its last piece");
		return;
	}
	ring_get_info(pri->ring, &ri);
	/*
	 * The pieces come in order (those without a bit set are skipped) and
	 * end at most PEER_BITMAP_SLACK regions past the peer's own device
	 * (a bitmap's padding): anything else is not a bitmap but a flood.
	 */
	if (b->first_region < rp->peer_bitmap_next) {
		peer_close(p, "PeerBitmap piece out of order");
		return;
	}
	if (b->first_region > (rp->peer_sectors >> (b->region_shift - 9)) + PEER_BITMAP_SLACK) {
		peer_close(p, "PeerBitmap beyond the device of the peer");
		return;
	}
	rp->peer_bitmap_next = b->first_region + (uint64_t)b->bits.len * 8;
	for (i = 0; i < (uint64_t)b->bits.len * 8; i++) {
		if (!bitmap_test(b->bits.data, i))
			continue;
		r = b->first_region + i;
		if (r > (ri.dev_sectors >> (b->region_shift - 9)))
			break;		/* beyond our device (and no overflow below) */
		s = r << (b->region_shift - 9);
		if (s >= ri.dev_sectors)
			break;
		e = (r + 1) << (b->region_shift - 9);
		if (e > ri.dev_sectors)
			e = ri.dev_sectors;
		first = s >> (ri.region_shift - 9);
		last = (e - 1) >> (ri.region_shift - 9);
		peerbits_mark(pri->pb, rp->slot, first, last - first + 1);
		rp->peer_bitmap_regions++;
	}
	if (!b->last)
		return;
	rp->peer_bitmap_done = true;
	if (rp->peer_bitmap_regions) {
		log_info("%s: peer %s: %" PRIu64 " regions of its own to resync", pri->resource,
			 p->cfg.name, rp->peer_bitmap_regions);
		rp->inconsistent = true;
		rp->join_pending = false;
	}
	if (rp->join_pending)
		stream_send_join(rp);
}
