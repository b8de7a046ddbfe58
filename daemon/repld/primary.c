// SPDX-License-Identifier: GPL-2.0-only
/*
 * The primary: consume the ring, ship every record to every peer.
 *
 * Each peer has a cursor (next record to queue), a send queue of frames
 * whose payloads point into the ring's read-only data area, and the three
 * cumulative acknowledgments it sent back (received, written, durable).
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
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "dmdev.h"
#include "log.h"
#include "manager-internal.h"
#include "ring.h"

#define BATCH_IOV	(2 * 64)

static const char *conn_name(enum peer_conn c)
{
	switch (c) {
	case PEER_DOWN:
		return "Connecting";	/* drbdadm's word for "trying" */
	case PEER_CONNECTING:
		return "Connecting";
	case PEER_HANDSHAKE:
		return "Handshake";
	case PEER_UP:
		return "Connected";
	}
	return "?";
}

/* ---- the kernel side ---------------------------------------------------- */

static int target_set_mode(void *ctx, bool sync)
{
	struct manager *m = ctx;

	return dmdev_message(m->dm_name, sync ? "mode sync" : "mode async", NULL, 0);
}

static int target_set_hold(void *ctx, unsigned int ms)
{
	struct manager *m = ctx;
	char msg[64];

	snprintf(msg, sizeof(msg), "hold_timeout_ms %u", ms);
	return dmdev_message(m->dm_name, msg, NULL, 0);
}

static const struct manager_kernel_ops target_ops = {
	.set_mode = target_set_mode,
	.set_hold_timeout = target_set_hold,
};

static bool peer_counts_for_sync(const struct peer *p)
{
	return !p->admin_down && !p->removed && p->mode != MODE_ASYNC;
}

/* Set the target's mode from the peers' modes (live, no reconnect). */
static void primary_update_kernel_mode(struct manager *m)
{
	bool sync = false;
	unsigned int i;
	int r;

	for (i = 0; i < m->nr_peers; i++)
		sync |= peer_counts_for_sync(m->peers[i]);
	if (m->kernel_mode_known && sync == m->kernel_sync)
		return;
	r = m->kops->set_mode(m->kctx, sync);
	if (r < 0) {
		log_error_errno(r, "%s: cannot set the target to %s mode", m->cfg->resource,
				sync ? "sync" : "async");
		return;
	}
	log_info("%s: target in %s mode", m->cfg->resource, sync ? "sync" : "async");
	m->kernel_sync = sync;
	m->kernel_mode_known = true;
}

/* ring fill in per cent of the tighter of data and record slots */
static unsigned int ring_fill_pct(struct manager *m)
{
	struct ring_info ri;
	uint64_t recs, bytes = 0, s;
	const struct dm_repl_rec *rec;

	ring_get_info(m->ring, &ri);
	recs = ri.prod_seq - m->released;
	for (s = m->released; s < ri.prod_seq; s++) {
		rec = ring_rec(m->ring, s);
		if (rec)
			bytes += rec->data_len;
	}
	s = recs * 100 / ri.nr_recs;
	return (unsigned int)(bytes * 100 / ri.data_size > s ? bytes * 100 / ri.data_size : s);
}

/* Mark the regions of records [from, to) dirty in the target's bitmap. */
static void primary_mark_records(struct manager *m, uint64_t from, uint64_t to)
{
	struct ring_info ri;

	ring_get_info(m->ring, &ri);
	for (uint64_t s = from; s < to; s++) {
		const struct dm_repl_rec *rec = ring_rec(m->ring, s);
		unsigned int shift = ri.region_shift - 9;
		uint64_t first, last;

		if (!rec || !rec->nr_sectors || rec->sector >= ri.dev_sectors ||
		    rec->nr_sectors > ri.dev_sectors - rec->sector)
			continue;
		first = rec->sector >> shift;
		last = (rec->sector + rec->nr_sectors - 1) >> shift;
		if (first == m->last_marked_region && last == first)
			continue;	/* a run of writes to one region: once */
		m->last_marked_region = last;
		if (ring_mark_dirty(m->ring, first, last - first + 1) < 0)
			log_warning("%s: cannot mark regions %" PRIu64 "..%" PRIu64 " dirty",
				    m->cfg->resource, first, last);
	}
}

/*
 * Records about to be released that a peer which stopped holding the ring
 * never got: their regions go into the target's bitmap first, so that
 * peer's bitmap resync covers them.
 */
static void primary_mark_released(struct manager *m, uint64_t release)
{
	uint64_t s = m->released > m->marked_upto ? m->released : m->marked_upto;
	unsigned int i;
	bool needed = false;

	for (i = 0; i < m->nr_peers; i++)
		needed |= !m->peers[i]->holds_ring && !m->peers[i]->removed;
	if (needed && ring_can_resync(m->ring))
		primary_mark_records(m, s, release);
	m->marked_upto = release;
}

/* Publish release and ack to the kernel when they moved. */
static void primary_update_ring(struct manager *m)
{
	uint64_t prod = ring_prod(m->ring), release = prod, ack = prod;
	bool any_sync = false;
	unsigned int i;
	int r;

	for (i = 0; i < m->nr_peers; i++) {
		struct peer *p = m->peers[i];

		if (p->holds_ring && p->durable < release)
			release = p->durable;
		if (!peer_counts_for_sync(p))
			continue;
		any_sync = true;
		if (p->mode == MODE_SYNC && p->written < ack)
			ack = p->written;
		if (p->mode == MODE_SEMI_SYNC && p->received < ack)
			ack = p->received;
	}
	if (!any_sync)
		ack = prod;
	if (release < m->released)
		release = m->released;
	if (ack < m->acked)
		ack = m->acked;
	if (release == m->released && ack == m->acked)
		return;
	if (release > m->released)
		primary_mark_released(m, release);
	r = ring_update(m->ring, release, ack);
	if (r < 0) {
		log_error_errno(r, "%s: ring update (release %" PRIu64 ", ack %" PRIu64 ")",
				m->cfg->resource, release, ack);
		return;
	}
	m->released = release;
	m->acked = ack;
}

/* ---- peers: connection ---------------------------------------------------- */

/* A secondary never sends payloads: a Data frame from it is refused. */
static void *peer_no_payload(void *ctx, const Dmrepl__V1__Data *d)
{
	(void)ctx;
	(void)d;
	return NULL;
}

static void peer_pipe_close(struct peer *p)
{
	for (int i = 0; i < 2; i++) {
		if (p->pipe[i] >= 0)
			close(p->pipe[i]);
		p->pipe[i] = -1;
	}
	p->pipe_len = 0;
}

void peer_close(struct peer *p, const char *why)
{
	struct manager *m = p->m;

	if (p->fd >= 0) {
		ep_del(m, p->fd);
		close(p->fd);
		p->fd = -1;
	}
	peer_pipe_close(p);
	if (p->conn != PEER_DOWN && why)
		log_warning("%s: peer %s: connection lost: %s", m->cfg->resource, p->cfg.name, why);
	if (p->conn == PEER_UP && !m->rotate_pending && m->ring) {
		m->rotate_pending = true;
		m->rotate_mark = ring_prod(m->ring);
	}
	resync_stop(p, p->rs ? "connection lost" : NULL);
	p->join_pending = false;
	if (why)
		snprintf(p->last_error, sizeof(p->last_error), "%s", why);
	p->conn = PEER_DOWN;
	p->state_since_ms = now_ms();
	p->want_out = false;
	p->sq_head = p->sq_tail = 0;
	p->sq_off = 0;
	/* a fresh reader for the next connection */
	wire_reader_free(&p->rd);
	if (wire_reader_init(&p->rd, peer_no_payload, NULL) < 0)
		p->admin_down = true;	/* out of memory: stop trying */
	p->next_attempt_ms = now_ms() + p->backoff_ms;
	p->backoff_ms = p->backoff_ms * 2 > m->cfg->reconnect_max_ms ?
			m->cfg->reconnect_max_ms : p->backoff_ms * 2;
}

int peer_queue_frame(struct peer *p, const uint8_t *frame, size_t len)
{
	struct sendq_entry *e;

	if (p->sq_tail - p->sq_head >= SENDQ_LEN || len > SENDQ_HDR)
		return -ENOBUFS;
	e = &p->sq[p->sq_tail % SENDQ_LEN];
	memcpy(e->hdr, frame, len);
	e->hdr_len = (uint32_t)len;
	e->payload = NULL;
	e->payload_len = 0;
	e->seq = UINT64_MAX;
	e->splice = false;
	p->sq_tail++;
	return 0;
}

static void peer_arm(struct peer *p, bool out)
{
	if (p->fd < 0 || out == p->want_out)
		return;
	p->want_out = out;
	ep_mod(p->m, p->fd, EPOLLIN | EPOLLRDHUP | (out ? EPOLLOUT : 0), &p->ev);
}

static void peer_send_hello(struct peer *p)
{
	struct manager *m = p->m;
	struct ring_info ri;
	uint8_t buf[SENDQ_HDR];
	ssize_t n;

	ring_get_info(m->ring, &ri);
	{
		Dmrepl__V1__Hello hello = DMREPL__V1__HELLO__INIT;

		hello.protocol_version = WIRE_PROTOCOL_VERSION;
		hello.node = m->cfg->node;
		hello.resource = m->cfg->resource;
		hello.role = DMREPL__V1__ROLE__ROLE_PRIMARY;
		hello.device_sectors = ri.dev_sectors;
		hello.stream_id = ri.ring_id;
		hello.mode = (Dmrepl__V1__Mode)p->mode;
		n = wire_encode_hello(buf, sizeof(buf), &hello);
	}
	if (n < 0 || peer_queue_frame(p, buf, (size_t)n) < 0) {
		peer_close(p, "cannot encode Hello");
		return;
	}
	p->conn = PEER_HANDSHAKE;
	p->state_since_ms = now_ms();
}

static void peer_connect(struct peer *p)
{
	struct manager *m = p->m;
	int fd, r;

	fd = socket(p->cfg.address.sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		peer_close(p, "socket() failed");
		return;
	}
	sock_set_common(fd);
	p->fd = fd;
	p->connects++;
	r = connect(fd, (struct sockaddr *)&p->cfg.address.sa, p->cfg.address.len);
	if (r < 0 && errno != EINPROGRESS) {
		char why[320];

		snprintf(why, sizeof(why), "connect %s: %s", p->cfg.address.text, strerror(errno));
		close(fd);
		p->fd = -1;
		peer_close(p, why);
		return;
	}
	p->conn = PEER_CONNECTING;
	p->state_since_ms = now_ms();
	p->last_rx_ms = now_ms();
	p->want_out = true;
	r = ep_add(m, fd, EPOLLIN | EPOLLOUT | EPOLLRDHUP, &p->ev);
	if (r < 0)
		peer_close(p, "epoll");
}

/*
 * The peer told us what it holds.  Choose where its stream resumes, and
 * whether its copy is still a prefix of ours.
 */
/*
 * Divergent data (split brain, a newer peer, unrelated data): who wins?
 * Data only flows from the primary, so it may only ever be us; anything
 * else stops replication to that peer with the reason, data untouched.
 */
static bool divergence_we_win(struct peer *p, const Dmrepl__V1__Hello *h, enum gen_verdict v,
			      char *why, size_t len)
{
	struct manager *m = p->m;
	struct ring_info ri;

	if (h->discard_my_data) {
		log_warning("%s: peer %s: %s, and the peer discards its changes (discard-my-data)",
			    m->cfg->resource, p->cfg.name, gens_verdict_name(v));
		return true;
	}
	if (v == GV_SPLIT_BRAIN && m->cfg->after_split_brain == ASB_DISCARD_YOUNGER &&
	    h->gen_since != m->gens.since) {
		if (h->gen_since > m->gens.since) {
			log_warning("%s: peer %s: split brain; after-split-brain = discard-younger-primary: the peer became primary later, its changes are discarded",
				    m->cfg->resource, p->cfg.name);
			return true;
		}
		snprintf(why, len, "split brain: this node (%s) is the younger primary; after-split-brain = discard-younger-primary keeps %s's data: make %s primary",
			 m->cfg->node, p->cfg.name, p->cfg.name);
		return false;
	}
	if (v == GV_SPLIT_BRAIN && m->cfg->after_split_brain == ASB_DISCARD_LEAST) {
		ring_get_info(m->ring, &ri);
		if (h->dirty_regions < ri.dirty_regions ||
		    (h->dirty_regions == ri.dirty_regions && h->gen_since > m->gens.since)) {
			log_warning("%s: peer %s: split brain; after-split-brain = discard-least-changes: the peer changed %" PRIu64
				    " regions, this node %" PRIu64 ": the peer's changes are discarded",
				    m->cfg->resource, p->cfg.name, h->dirty_regions, ri.dirty_regions);
			return true;
		}
		snprintf(why, len, "split brain: %s changed %" PRIu64 " regions, this node %" PRIu64
			 "; after-split-brain = discard-least-changes keeps %s's data: make %s primary",
			 p->cfg.name, h->dirty_regions, ri.dirty_regions, p->cfg.name, p->cfg.name);
		return false;
	}
	if (v == GV_SPLIT_BRAIN)
		snprintf(why, len, "split brain: both %s and %s wrote since generation %016" PRIx64
			 " while disconnected; replication stopped, no data touched. Resolve: on the node whose changes are to go, run 'replctl discard-my-data %s' (as a secondary), then 'replctl connect %s %s' here",
			 m->cfg->node, p->cfg.name, m->gens.bitmap ? m->gens.bitmap : h->gen_bitmap,
			 m->cfg->resource, m->cfg->resource, p->cfg.name);
	else if (v == GV_PEER_NEWER)
		snprintf(why, len, "%s holds newer data (it was primary after this node and this node did not write since): make %s primary, or discard its changes with 'replctl discard-my-data %s' there",
			 p->cfg.name, p->cfg.name, m->cfg->resource);
	else
		snprintf(why, len, "%s holds unrelated data (no common generation): 'replctl discard-my-data %s' there starts a full sync",
			 p->cfg.name, m->cfg->resource);
	return false;
}

/*
 * The peer told us what it holds.  Choose where its stream resumes, and
 * what it needs: nothing, a bitmap resync, a full sync -- or refuse.
 */
static int peer_handshake_done(struct peer *p, const Dmrepl__V1__Hello *h)
{
	struct manager *m = p->m;
	struct ring_info ri;
	uint64_t tail = m->released, resume;
	struct gens pg = { h->gen_current, h->gen_bitmap, h->gen_history, h->gen_since };
	enum gen_verdict v;
	bool resumable;
	char why[1024];

	ring_get_info(m->ring, &ri);
	if (h->protocol_version != WIRE_PROTOCOL_VERSION)
		return -EPROTONOSUPPORT;
	if (h->role != DMREPL__V1__ROLE__ROLE_SECONDARY || strcmp(h->node, p->cfg.name) ||
	    strcmp(h->resource, m->cfg->resource))
		return -EPROTO;
	if (h->device_sectors < ri.dev_sectors)
		return -ENOSPC;

	p->peer_gens = pg;
	p->need_full = false;
	p->join_pending = false;
	p->peer_bitmap_done = false;
	p->peer_bitmap_regions = 0;
	v = gens_compare(&m->gens, &pg);
	resumable = h->stream_id == ri.ring_id && h->resume_seq >= tail &&
		    h->resume_seq <= ri.prod_seq;
	if (v == GV_PEER_NEWER || v == GV_SPLIT_BRAIN || v == GV_UNRELATED) {
		if (!divergence_we_win(p, h, v, why, sizeof(why))) {
			log_error("%s: peer %s: %s", m->cfg->resource, p->cfg.name, why);
			snprintf(p->last_error, sizeof(p->last_error), "%s", why);
			p->split_brain = true;
			return -ESTALE;
		}
		/* ours wins: its changes (PeerBitmap) and ours (bitmap), or
		 * everything when we do not know what it changed */
		resumable = false;
		v = v == GV_UNRELATED ? GV_FULL : GV_BITMAP;
		if (v == GV_BITMAP && !h->dirty_regions && !h->gen_bitmap)
			v = GV_FULL;
	}
	p->split_brain = false;

	if (resumable && (v == GV_SAME || v == GV_BITMAP)) {
		/* the stream resumes; a copy with a hole (GAP) catches up with
		 * the bitmap; it joins our generation */
		resume = h->resume_seq;
		if (!h->consistent)
			p->inconsistent = true;
		else
			p->join_pending = true;
	} else if (v != GV_FULL && h->consistent && h->stream_id != ri.ring_id &&
		   !strcmp(m->cfg->meta_device, "-")) {
		/* another ring, and no metadata device: nothing recorded what
		 * the peer may lack (an unclean restart loses the bitmap) */
		log_warning("%s: peer %s: its copy is of an earlier ring and there is no metadata device (no persistent bitmap): full sync",
			    m->cfg->resource, p->cfg.name);
		p->inconsistent = true;
		p->need_full = true;
		resume = tail;
	} else if (v != GV_FULL && h->consistent) {
		/* a consistent copy of an earlier generation of ours: what it
		 * lacks is in the bitmap (unclean restart, records released
		 * without it, a failover) */
		log_warning("%s: peer %s: its copy (generation %016" PRIx64 ", stream %016" PRIx64
			    " up to %" PRIu64 ") cannot be resumed from this ring: bitmap resync",
			    m->cfg->resource, p->cfg.name, pg.current, h->stream_id, h->resume_seq);
		p->inconsistent = true;
		resume = tail;
	} else if (v == GV_FULL && !pg.current && m->cfg->skip_initial_sync && tail == 0) {
		/* a new secondary, the administrator says both devices were
		 * equal (zeroed) when the target was created, and the ring
		 * holds every write since: no initial sync; it records
		 * itself consistent on our ResyncFlush */
		p->inconsistent = false;
		p->join_pending = true;
		resume = 0;
	} else {
		log_warning("%s: peer %s: its copy is not consistent%s: full sync",
			    m->cfg->resource, p->cfg.name,
			    pg.current ? " (an interrupted resync, or divergent data)" :
			    " (a new secondary)");
		p->inconsistent = true;
		p->need_full = true;
		resume = tail;
	}
	p->cursor = resume;
	p->received = p->written = p->durable = resume;
	p->holds_ring = true;
	p->conn = PEER_UP;
	p->ever_connected = true;
	p->state_since_ms = now_ms();
	p->backoff_ms = m->cfg->reconnect_min_ms;
	p->last_error[0] = '\0';
	log_info("%s: peer %s connected (%s), resuming at record %" PRIu64 "%s", m->cfg->resource,
		 p->cfg.name, config_mode_name(p->mode), resume,
		 p->inconsistent ? " (inconsistent)" : "");
	return 0;
}

/* The peer needs no resync: it joins our current generation. */
static void peer_send_join(struct peer *p)
{
	uint8_t buf[64];
	ssize_t k = wire_encode_resync_flush(buf, sizeof(buf), JOIN_FLUSH_ID, true,
					     p->m->gens.current);

	if (k < 0 || peer_queue_frame(p, buf, (size_t)k) < 0)
		peer_close(p, "cannot queue a ResyncFlush");
}

/* The peer's own bitmap: its regions need the resync too. */
static void peer_handle_bitmap(struct peer *p, const Dmrepl__V1__PeerBitmap *b)
{
	struct manager *m = p->m;
	struct ring_info ri;
	uint64_t i, r, s, e, first, last;

	if (p->peer_bitmap_done) {
		peer_close(p, "PeerBitmap after its last piece");
		return;
	}
	ring_get_info(m->ring, &ri);
	for (i = 0; i < (uint64_t)b->bits.len * 8; i++) {
		if (!(b->bits.data[i / 8] & (1U << (i % 8))))
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
		if (ring_mark_dirty(m->ring, first, last - first + 1) < 0) {
			peer_close(p, "cannot mark the peer's regions");
			return;
		}
		p->peer_bitmap_regions++;
	}
	if (!b->last)
		return;
	p->peer_bitmap_done = true;
	if (p->peer_bitmap_regions) {
		log_info("%s: peer %s: %" PRIu64 " regions of its own to resync", m->cfg->resource,
			 p->cfg.name, p->peer_bitmap_regions);
		p->inconsistent = true;
		p->join_pending = false;
	}
	if (p->join_pending)
		peer_send_join(p);
}

static void peer_handle_ack(struct peer *p, const Dmrepl__V1__Ack *a)
{
	struct manager *m = p->m;
	uint64_t sent = p->cursor;

	/* cumulative and monotonic; never beyond what we sent */
	if (a->received > sent || a->written > a->received || a->durable > a->received ||
	    a->received < p->received || a->written < p->written || a->durable < p->durable) {
		peer_close(p, "invalid acknowledgment");
		return;
	}
	p->received = a->received;
	p->written = a->written;
	p->durable = a->durable;
	primary_update_ring(m);
}

static void peer_read(struct peer *p)
{
	struct wire_msg msg;
	int r;

	r = wire_reader_fill(&p->rd, p->fd);
	if (r == 0) {
		peer_close(p, "closed by peer");
		return;
	}
	if (r < 0 && r != -EAGAIN) {
		peer_close(p, strerror(-r));
		return;
	}
	p->last_rx_ms = now_ms();
	while (p->fd >= 0 && (r = wire_reader_next(&p->rd, &msg)) > 0) {
		const Dmrepl__V1__Frame *f = msg.frame;

		switch (f->msg_case) {
		case DMREPL__V1__FRAME__MSG_HELLO:
			if (p->conn != PEER_HANDSHAKE) {
				peer_close(p, "unexpected Hello");
				break;
			}
			r = peer_handshake_done(p, f->hello);
			if (r == -ESTALE) {
				/* divergent data: stop until the administrator acts */
				char why[sizeof(p->last_error)];

				snprintf(why, sizeof(why), "%s", p->last_error);
				{
					uint8_t eb[512];
					ssize_t k = wire_encode_error(eb, sizeof(eb),
						DMREPL__V1__ERROR__CODE__CODE_DIVERGED, why);

					/* best effort: tell the peer why, then close */
					if (k > 0 && write(p->fd, eb, (size_t)k) < 0)
						log_debug("%s: peer %s: cannot send the Error",
							  p->m->cfg->resource, p->cfg.name);
				}
				p->admin_down = true;
				peer_close(p, why);
				primary_update_kernel_mode(p->m);
			} else if (r < 0) {
				char why[320];

				snprintf(why, sizeof(why), "handshake refused: %s",
					 r == -EPROTONOSUPPORT ? "protocol version" :
					 r == -ENOSPC ? "the peer's device is smaller" :
					 "node, resource or role do not match the configuration");
				peer_close(p, why);
			}
			break;
		case DMREPL__V1__FRAME__MSG_PEER_BITMAP:
			if (p->conn != PEER_UP)
				peer_close(p, "PeerBitmap before the handshake");
			else
				peer_handle_bitmap(p, f->peer_bitmap);
			break;
		case DMREPL__V1__FRAME__MSG_ACK:
			if (p->conn != PEER_UP)
				peer_close(p, "Ack before the handshake");
			else
				peer_handle_ack(p, f->ack);
			break;
		case DMREPL__V1__FRAME__MSG_KEEPALIVE:
			break;
		case DMREPL__V1__FRAME__MSG_HASH_REPLY:
			if (p->conn != PEER_UP)
				peer_close(p, "HashReply before the handshake");
			else
				resync_hash_reply(p, f->hash_reply);
			break;
		case DMREPL__V1__FRAME__MSG_RESYNC_FLUSHED:
			if (p->conn != PEER_UP)
				peer_close(p, "ResyncFlushed before the handshake");
			else
				resync_flushed(p, f->resync_flushed->id);
			break;
		case DMREPL__V1__FRAME__MSG_ERROR: {
			char why[200];

			snprintf(why, sizeof(why), "peer reported error %d: %s", f->error->code,
				 f->error->reason);
			peer_close(p, why);
			break;
		}
		default:
			peer_close(p, "unexpected frame from a secondary");
			break;
		}
	}
	if (r == -ENOBUFS && p->fd >= 0)
		peer_close(p, "Data frame from a secondary");
	else if (r < 0 && p->fd >= 0)
		peer_close(p, wire_reader_error(&p->rd));
}

/* ---- peers: sending --------------------------------------------------------- */

/* Queue records from the ring: header frame + payload pointing into it. */
static void peer_fill(struct peer *p, uint64_t prod)
{
	struct manager *m = p->m;

	while (p->cursor < prod && p->sq_tail - p->sq_head < SENDQ_LEN) {
		const struct dm_repl_rec *rec = ring_rec(m->ring, p->cursor);
		struct sendq_entry *e;
		const void *payload;
		uint32_t len;
		ssize_t n;

		if (!rec || ring_payload(m->ring, rec, &payload, &len) < 0) {
			log_error("%s: record %" PRIu64 " unreadable in the ring", m->cfg->resource,
				  p->cursor);
			peer_close(p, "ring record unreadable");
			return;
		}
		if (rec->op == DM_REPL_OP_GAP) {
			/* the kernel stopped logging for a while: a hole */
			if (!p->inconsistent)
				log_warning("%s: peer %s: the ring overflowed (GAP at record %" PRIu64
					    "): it needs a resync", m->cfg->resource, p->cfg.name,
					    p->cursor);
			p->inconsistent = true;
			if (p->rs)
				p->rs_again = true;	/* new regions in the bitmap */
		} else if (p->rs && rec->nr_sectors) {
			resync_taint(p, rec->sector, rec->nr_sectors);
		}
		/* a GAP travels too: sequence numbers stay contiguous */
		e = &p->sq[p->sq_tail % SENDQ_LEN];
		n = wire_encode_data(e->hdr, SENDQ_HDR, rec);
		if (n < 0) {
			peer_close(p, "cannot encode a record");
			return;
		}
		e->hdr_len = (uint32_t)n;
		e->payload = payload;
		e->payload_len = len;
		e->seq = p->cursor;
		e->splice = len >= SPLICE_MIN_BYTES && !p->no_splice;
		p->sq_tail++;
		p->cursor++;
	}
}

/* Account @sent bytes that left the queue (to the socket or the pipe). */
static void peer_sent(struct peer *p, size_t sent)
{
	p->sq_off += sent;
	while (p->sq_head != p->sq_tail) {
		struct sendq_entry *e = &p->sq[p->sq_head % SENDQ_LEN];
		size_t total = e->hdr_len + e->payload_len;

		if (p->sq_off < total)
			break;
		p->sq_off -= total;
		if (e->seq != UINT64_MAX)
			p->records_sent++;
		p->sq_head++;
	}
}

/* Splicing does not work here: say so once, copy from now on. */
static void peer_stop_splicing(struct peer *p, const char *what)
{
	log_warning("%s: peer %s: %s: %s; sending ring payloads by copy",
		    p->m->cfg->resource, p->cfg.name, what, strerror(errno));
	p->no_splice = true;
	for (unsigned int i = p->sq_head; i != p->sq_tail; i++)
		p->sq[i % SENDQ_LEN].splice = false;
}

/*
 * Move the rest of the head entry (a large ring payload) into the pipe:
 * the header by copy, the payload by vmsplice(), which hands the socket
 * references to the ring's pages.  Returns bytes moved, 0 when the pipe
 * is full, -1 when splicing failed (the entry is then sent by copy).
 */
static ssize_t peer_fill_pipe(struct peer *p)
{
	struct sendq_entry *e = &p->sq[p->sq_head % SENDQ_LEN];
	size_t off = p->sq_off;
	struct iovec iov;
	ssize_t n;

	if (p->pipe[0] < 0) {
		if (pipe2(p->pipe, O_NONBLOCK | O_CLOEXEC) < 0) {
			p->pipe[0] = p->pipe[1] = -1;
			peer_stop_splicing(p, "pipe2");
			return -1;
		}
		/* best effort: a bigger pipe means fewer splice() calls */
		(void)fcntl(p->pipe[1], F_SETPIPE_SZ, (int)SPLICE_PIPE_BYTES);
	}
	if (off < e->hdr_len) {
		n = write(p->pipe[1], e->hdr + off, e->hdr_len - off);
		if (n < 0 && errno == EAGAIN)
			return 0;
		if (n < 0) {
			peer_stop_splicing(p, "pipe write");
			return -1;
		}
		return n;
	}
	off -= e->hdr_len;
	iov.iov_base = (void *)((const uint8_t *)e->payload + off);
	iov.iov_len = e->payload_len - off;
	n = vmsplice(p->pipe[1], &iov, 1, SPLICE_F_NONBLOCK);
	if (n < 0) {
		if (errno == EAGAIN)
			return 0;
		if (p->pipe_len) {
			/* the header is in the pipe: drain it, then copy */
			e->splice = false;
			return 0;
		}
		peer_stop_splicing(p, "vmsplice");
		return -1;
	}
	return n;
}

/*
 * A write to the socket failed (errno): true to retry it (EINTR);
 * otherwise wait for EPOLLOUT (EAGAIN) or close the connection.
 */
static bool peer_send_failed(struct peer *p)
{
	if (errno == EINTR)
		return true;
	if (errno == EAGAIN)
		peer_arm(p, true);
	else
		peer_close(p, strerror(errno));
	return false;
}

/* @sent bytes reached the socket. */
static void peer_on_wire(struct peer *p, ssize_t sent)
{
	p->bytes_sent += (uint64_t)sent;
	p->last_tx_ms = now_ms();
}

void peer_flush(struct peer *p)
{
	struct iovec iov[BATCH_IOV];
	bool pipe_full = false;
	unsigned int i, n;
	ssize_t sent;

	while (p->fd >= 0 && (p->pipe_len || p->sq_head != p->sq_tail)) {
		size_t off = p->sq_off;

		if (p->sq_head != p->sq_tail && p->sq[p->sq_head % SENDQ_LEN].splice &&
		    !pipe_full) {
			/* header and payload together into the pipe, then out */
			sent = peer_fill_pipe(p);
			if (sent > 0) {
				p->pipe_len += (size_t)sent;
				peer_sent(p, (size_t)sent);
			} else if (sent == 0) {
				pipe_full = true;
				if (!p->pipe_len) {
					errno = EAGAIN;
					peer_stop_splicing(p, "empty pipe refuses data");
				}
			}
			continue;
		}
		if (p->pipe_len) {
			/* what is in the pipe goes first */
			sent = splice(p->pipe[0], NULL, p->fd, NULL, p->pipe_len,
				      SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
			if (sent < 0) {
				if (peer_send_failed(p))
					continue;
				return;
			}
			p->pipe_len -= (size_t)sent;
			peer_on_wire(p, sent);
			pipe_full = false;
			continue;
		}

		n = 0;
		for (i = p->sq_head; i != p->sq_tail && n + 2 <= BATCH_IOV; i++) {
			struct sendq_entry *e = &p->sq[i % SENDQ_LEN];

			if (e->splice)
				break;
			if (off < e->hdr_len) {
				iov[n].iov_base = e->hdr + off;
				iov[n].iov_len = e->hdr_len - off;
				n++;
				off = 0;
			} else {
				off -= e->hdr_len;
			}
			if (e->payload_len) {
				iov[n].iov_base = (void *)((const uint8_t *)e->payload + off);
				iov[n].iov_len = e->payload_len - off;
				n++;
			}
			off = 0;
		}
		sent = writev(p->fd, iov, (int)n);
		if (sent < 0) {
			if (peer_send_failed(p))
				continue;
			return;
		}
		peer_on_wire(p, sent);
		peer_sent(p, (size_t)sent);
	}
	peer_arm(p, false);
}

/*
 * The first write while some peer is not in sync: a new data generation,
 * so that a peer that went away (and maybe became primary) is recognised
 * as behind -- or as a split brain -- when it comes back.
 */
static void primary_rotate(struct manager *m)
{
	uint64_t old = m->gens.current;

	m->rotate_pending = false;
	gens_rotate(&m->gens);
	if (gens_save(m) < 0)
		return;
	log_info("%s: writes without every peer: data generation %016" PRIx64 " -> %016" PRIx64
		 " (bitmap from %016" PRIx64 ")", m->cfg->resource, old, m->gens.current,
		 m->gens.bitmap);
	/* the peers that are here and in sync get every write: they join */
	for (unsigned int i = 0; i < m->nr_peers; i++) {
		struct peer *p = m->peers[i];

		if (p->conn != PEER_UP || p->inconsistent || p->rs || !p->peer_bitmap_done)
			continue;
		p->join_pending = true;
		peer_send_join(p);
	}
}

/* Every peer connected and UpToDate in our generation: no bitmap needed. */
static void primary_check_in_sync(struct manager *m)
{
	unsigned int i, n = 0;

	for (i = 0; i < m->nr_peers; i++) {
		const struct peer *p = m->peers[i];

		if (p->removed)
			continue;
		if (p->conn != PEER_UP || p->inconsistent || p->rs || !p->peer_bitmap_done ||
		    p->join_pending)
			return;
		n++;
	}
	if (!n || (!m->gens.bitmap && !m->gens.history && !m->rotate_pending))
		return;
	m->rotate_pending = false;
	if (m->gens.bitmap || m->gens.history) {
		m->gens.bitmap = m->gens.history = 0;
		if (gens_save(m) == 0)
			log_info("%s: every peer UpToDate in generation %016" PRIx64,
				 m->cfg->resource, m->gens.current);
	}
}

/* Queue and send what the ring has for every connected peer. */
static void primary_pump(struct manager *m)
{
	uint64_t prod = ring_prod(m->ring);
	unsigned int i;

	for (i = 0; i < m->nr_peers; i++) {
		struct peer *p = m->peers[i];

		if (p->conn != PEER_UP || p->want_out)
			continue;
		do {
			peer_fill(p, prod);
			peer_flush(p);
		} while (p->conn == PEER_UP && !p->want_out && p->cursor < prod);
	}
	ring_mark_read(m->ring, prod);
	if (m->rotate_pending && prod > m->rotate_mark)
		primary_rotate(m);
	resync_pump(m);
}

/*
 * Before the loop sleeps: ship what is there, then publish our read
 * cursor so the kernel wakes us for the next record (and not before).
 * True when a record arrived meanwhile: do not sleep.
 */
bool primary_before_sleep(struct manager *m)
{
	primary_pump(m);
	primary_update_ring(m);
	return ring_arm(m->ring) > 0;
}

void primary_peer_event(struct manager *m, struct peer *p, uint32_t events)
{
	if (p->conn == PEER_CONNECTING && (events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
		int err = 0;
		socklen_t len = sizeof(err);

		getsockopt(p->fd, SOL_SOCKET, SO_ERROR, &err, &len);
		if (err) {
			char why[320];

			snprintf(why, sizeof(why), "connect %s: %s", p->cfg.address.text,
				 strerror(err));
			peer_close(p, why);
			return;
		}
		peer_send_hello(p);
	}
	if (p->fd >= 0 && (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)))
		peer_read(p);
	if (p->fd >= 0 && (events & EPOLLOUT)) {
		/* peer_flush() disarms EPOLLOUT once the queue is empty */
		peer_flush(p);
		if (p->conn == PEER_UP && !p->want_out) {
			peer_fill(p, ring_prod(m->ring));
			peer_flush(p);
		}
	}
	if (p->fd >= 0 && p->conn == PEER_UP)
		primary_pump(m);
}

void primary_ring_event(struct manager *m, uint32_t events)
{
	if (events & EPOLLPRI) {
		uint32_t seq = ring_state_seq(m->ring), st = ring_state(m->ring);

		if (st != m->kernel_state)
			log_notice("%s: target state:%s%s%s%s", m->cfg->resource,
				   st & DM_REPL_STATE_SYNC ? " sync" : " async",
				   st & DM_REPL_STATE_DEGRADED ? " degraded" : "",
				   st & DM_REPL_STATE_OVERFLOW ? " overflow" : "",
				   st & DM_REPL_STATE_DIRTY ? " dirty-regions" : "");
		if (m->kernel_mode_known && !!(st & DM_REPL_STATE_SYNC) != m->kernel_sync)
			log_notice("%s: the target was switched to %s mode outside repld (dmsetup message); the peers' modes would keep it %s",
				   m->cfg->resource, st & DM_REPL_STATE_SYNC ? "sync" : "async",
				   m->kernel_sync ? "sync" : "async");
		m->kernel_state = st;
		m->kernel_state_seq = seq;
		ring_mark_state_seen(m->ring, seq);
	}
	if (events & EPOLLHUP) {
		log_error("%s: the repl device is gone", m->cfg->resource);
		m->exit_code = -ENODEV;
		m->stop = true;
		return;
	}
	primary_pump(m);
	primary_update_ring(m);
}

/* ---- tick: reconnects, keepalives, timeouts, ring holding ---------------- */

void primary_tick(struct manager *m)
{
	uint64_t now = now_ms();
	unsigned int i, fill = 0;
	bool fill_known = false;
	char line[256];
	int n = 0;

	for (i = 0; i < m->nr_peers; i++) {
		struct peer *p = m->peers[i];

		switch (p->conn) {
		case PEER_DOWN:
			if (!p->admin_down && !p->removed && !m->draining &&
			    now >= p->next_attempt_ms)
				peer_connect(p);
			break;
		case PEER_CONNECTING:
		case PEER_HANDSHAKE:
			if (now - p->state_since_ms > m->cfg->peer_timeout_ms)
				peer_close(p, "handshake timed out");
			break;
		case PEER_UP:
			if (now - p->last_rx_ms > m->cfg->peer_timeout_ms) {
				peer_close(p, "no answer within peer-timeout-ms");
				break;
			}
			if (now - p->last_tx_ms >= m->cfg->keepalive_ms &&
			    p->sq_head == p->sq_tail) {
				uint8_t buf[32];
				ssize_t k = wire_encode_keepalive(buf, sizeof(buf), now);

				if (k > 0 && peer_queue_frame(p, buf, (size_t)k) == 0)
					peer_flush(p);
			}
			break;
		}
		/* a peer that is away while the ring fills stops holding it */
		if (p->conn != PEER_UP && p->holds_ring) {
			if (!fill_known) {
				fill = ring_fill_pct(m);
				fill_known = true;
			}
			if (fill >= 50 || p->removed) {
				log_warning("%s: peer %s: away while the ring is %u%% full: releasing its records; it needs a resync",
					    m->cfg->resource, p->cfg.name, fill);
				p->holds_ring = false;
				p->inconsistent = true;
			}
		}
	}
	primary_pump(m);
	primary_update_ring(m);
	primary_check_in_sync(m);

	n = snprintf(line, sizeof(line), "primary %s:", m->cfg->resource);
	for (i = 0; i < m->nr_peers && n < (int)sizeof(line); i++) {
		struct peer *p = m->peers[i];

		n += snprintf(line + n, sizeof(line) - (size_t)n, " %s %s %s", p->cfg.name,
			      p->admin_down ? "StandAlone" : conn_name(p->conn),
			      config_mode_name(p->mode));
	}
	snprintf(m->status_line, sizeof(m->status_line), "%s", line);
}

bool primary_drained(struct manager *m)
{
	unsigned int i;

	if (!m->drain_target)
		m->drain_target = ring_prod(m->ring);
	for (i = 0; i < m->nr_peers; i++) {
		struct peer *p = m->peers[i];

		if (p->conn == PEER_UP && p->written < m->drain_target)
			return false;
	}
	return true;
}

/* ---- setup ------------------------------------------------------------------ */

static struct peer *peer_new(struct manager *m, const struct config_peer *cp)
{
	struct peer *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->sq = calloc(SENDQ_LEN, sizeof(*p->sq));
	if (!p->sq || wire_reader_init(&p->rd, peer_no_payload, NULL) < 0) {
		free(p->sq);
		free(p);
		return NULL;
	}
	p->m = m;
	p->ev.kind = EV_PEER;
	p->ev.ptr = p;
	p->cfg = *cp;
	p->mode = cp->mode;
	p->fd = -1;
	p->pipe[0] = p->pipe[1] = -1;
	p->holds_ring = true;
	p->backoff_ms = m->cfg->reconnect_min_ms;
	p->state_since_ms = now_ms();
	return p;
}

static void peer_free(struct peer *p)
{
	if (!p)
		return;
	ep_forget(p->m, &p->ev);
	if (p->fd >= 0)
		close(p->fd);
	peer_pipe_close(p);
	wire_reader_free(&p->rd);
	free(p->sq);
	free(p);
}

/* Find the repl device, or create it over the configured device. */
static int primary_open_device(struct manager *m, dev_t *ret)
{
	struct config *c = m->cfg;
	struct dmdev_info info;
	bool sync = false;
	unsigned int i;
	uint64_t sectors;
	char uuid[96];
	int fd, r;

	r = dmdev_get(m->dm_name, &info);
	if (r < 0)
		return log_error_errno(r, "%s: device-mapper not usable", c->resource);
	if (!info.exists) {
		fd = open(c->device, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return log_error_errno(-errno, "%s: open %s", c->resource, c->device);
		r = dmdev_size_sectors(fd, &sectors);
		close(fd);
		if (r < 0)
			return log_error_errno(r, "%s: size of %s", c->resource, c->device);
		for (i = 0; i < c->nr_peers; i++)
			sync |= c->peers[i].mode != MODE_ASYNC;
		snprintf(uuid, sizeof(uuid), "REPL-%s", c->dm_name);
		r = dmdev_create(m->dm_name, uuid, &(struct dmdev_table) {
			.data_dev = c->device,
			.meta_dev = c->meta_device,
			.sectors = sectors,
			.mode = sync ? "sync" : "async",
			.ring_size_mb = c->ring_size_mb,
			.hold_timeout_ms = c->on_peer_loss == LOSS_BLOCK ? 60000 : c->hold_timeout_ms,
			.region_kb = c->region_kb,
			.extent_kb = c->extent_kb,
			.max_extents = c->max_extents,
			.record_kb = c->record_kb,
		});
		if (r < 0)
			return log_error_errno(r, "%s: cannot create the repl device over %s (is dm-repl loaded? see the kernel log)",
					       c->resource, c->device);
		log_info("%s: created /dev/mapper/%s over %s (%" PRIu64 " sectors)", c->resource,
			 m->dm_name, c->device, sectors);
		r = dmdev_get(m->dm_name, &info);
		if (r < 0 || !info.exists)
			return log_error_errno(r < 0 ? r : -ENODEV, "%s: device vanished", c->resource);
	} else if (strcmp(info.target, "repl")) {
		log_error("%s: /dev/mapper/%s exists but is a '%s' device, not repl", c->resource,
			  m->dm_name, info.target);
		return -EEXIST;
	}
	*ret = makedev(info.major, info.minor);
	return 0;
}

int primary_start(struct manager *m)
{
	unsigned int i;
	dev_t dev = 0;
	int r;

	if (!m->ring) {
		r = primary_open_device(m, &dev);
		if (r < 0)
			return r;
		r = ring_attach(NULL, dev, &m->ring);
		if (r == -EBUSY)
			return log_error_errno(r, "%s: another repld is attached to the ring",
					       m->cfg->resource);
		if (r < 0)
			return log_error_errno(r, "%s: attach to the ring of /dev/mapper/%s",
					       m->cfg->resource, m->dm_name);
		m->kops = &target_ops;
		m->kctx = m;
		if (m->kops->set_hold_timeout)
			m->kops->set_hold_timeout(m->kctx, m->cfg->on_peer_loss == LOSS_BLOCK ?
							   60000 : m->cfg->hold_timeout_ms);
	}
	{
		struct ring_info ri;

		ring_get_info(m->ring, &ri);
		m->released = ri.release_seq;
		m->acked = ri.ack_seq;
		log_info("%s: ring %016" PRIx64 ": %" PRIu64 " MiB, records %" PRIu64 "..%" PRIu64,
			 m->cfg->resource, ri.ring_id, ri.data_size >> 20, m->released, ri.prod_seq);
		r = gens_load(m);
		if (r < 0)
			return r;
		if (!m->gens.current) {
			/* the first primary of this data: its generation begins */
			m->gens.current = gens_new_id();
			m->gens.since = gens_now_ms();
			r = gens_save(m);
			if (r < 0)
				return r;
		}
		log_info("%s: data generation %016" PRIx64 " (bitmap %016" PRIx64 ")",
			 m->cfg->resource, m->gens.current, m->gens.bitmap);
		/* no peer is in sync yet: the first write begins a generation */
		m->rotate_pending = true;
		m->rotate_mark = ri.prod_seq;
	}
	m->peers = calloc(m->cfg->nr_peers, sizeof(*m->peers));
	if (!m->peers)
		return -ENOMEM;
	for (i = 0; i < m->cfg->nr_peers; i++) {
		m->peers[i] = peer_new(m, &m->cfg->peers[i]);
		if (!m->peers[i])
			return log_error_errno(-ENOMEM, "peer");
		m->peers[i]->cursor = m->released;
		m->peers[i]->received = m->peers[i]->written = m->peers[i]->durable = m->released;
	}
	m->nr_peers = m->cfg->nr_peers;
	m->ev_ring.ptr = NULL;
	r = ep_add(m, ring_fd(m->ring), EPOLLIN | EPOLLPRI, &m->ev_ring);
	if (r < 0)
		return log_error_errno(r, "epoll add ring");
	primary_update_kernel_mode(m);
	for (i = 0; i < m->nr_peers; i++)
		peer_connect(m->peers[i]);
	return 0;
}

void primary_free(struct manager *m)
{
	unsigned int i;

	resync_close(m);
	for (i = 0; i < m->nr_peers; i++)
		peer_free(m->peers[i]);
	free(m->peers);
	m->peers = NULL;
	m->nr_peers = 0;
	ring_free(m->ring);
	m->ring = NULL;
}

/* ---- administration ---------------------------------------------------------- */

static struct peer *primary_find(struct manager *m, const char *name)
{
	unsigned int i;

	for (i = 0; i < m->nr_peers; i++)
		if (!m->peers[i]->removed && !strcmp(m->peers[i]->cfg.name, name))
			return m->peers[i];
	return NULL;
}

static void peer_set_mode(struct peer *p, enum peer_mode mode)
{
	struct manager *m = p->m;
	uint8_t buf[32];
	ssize_t n;

	if (p->mode == mode)
		return;
	log_info("%s: peer %s: mode %s -> %s", m->cfg->resource, p->cfg.name,
		 config_mode_name(p->mode), config_mode_name(mode));
	p->mode = mode;
	if (p->conn == PEER_UP) {
		n = wire_encode_set_mode(buf, sizeof(buf), (Dmrepl__V1__Mode)mode);
		if (n > 0 && peer_queue_frame(p, buf, (size_t)n) == 0)
			peer_flush(p);
	}
}

int primary_set_mode(struct manager *m, const char *peer, const char *mode, char *err,
		     size_t len)
{
	enum peer_mode pm;
	struct peer *p = primary_find(m, peer);

	if (!p) {
		snprintf(err, len, "no peer '%s' in resource %s", peer, m->cfg->resource);
		return -ENOENT;
	}
	if (config_mode_parse(mode, &pm) < 0) {
		snprintf(err, len, "mode '%s': expected async, semi-sync or sync", mode);
		return -EINVAL;
	}
	peer_set_mode(p, pm);
	primary_update_kernel_mode(m);
	primary_update_ring(m);
	return 0;
}

int primary_connect(struct manager *m, const char *peer, bool up, char *err, size_t len)
{
	struct peer *p = primary_find(m, peer);

	if (!p) {
		snprintf(err, len, "no peer '%s' in resource %s", peer, m->cfg->resource);
		return -ENOENT;
	}
	if (up) {
		p->admin_down = false;
		p->next_attempt_ms = 0;
		p->backoff_ms = m->cfg->reconnect_min_ms;
		log_info("%s: peer %s: connect requested", m->cfg->resource, p->cfg.name);
	} else {
		p->admin_down = true;
		peer_close(p, NULL);
		snprintf(p->last_error, sizeof(p->last_error), "disconnected by the administrator");
		log_info("%s: peer %s: disconnected by the administrator", m->cfg->resource,
			 p->cfg.name);
	}
	primary_update_kernel_mode(m);
	primary_update_ring(m);
	return 0;
}

/* replctl resync / verify: start a pass now (the peer must be connected). */
int primary_resync(struct manager *m, const char *peer, enum rs_kind kind, char *err, size_t len)
{
	struct peer *p = primary_find(m, peer);
	int r;

	if (!p) {
		snprintf(err, len, "no peer '%s' in resource %s", peer, m->cfg->resource);
		return -ENOENT;
	}
	if (p->conn != PEER_UP) {
		snprintf(err, len, "peer %s is not connected", peer);
		return -ENOTCONN;
	}
	if (!ring_can_resync(m->ring)) {
		snprintf(err, len, "the loaded dm-repl module cannot resync (no DM_REPL_FEAT_RESYNC)");
		return -EOPNOTSUPP;
	}
	if (p->rs) {
		snprintf(err, len, "peer %s: a resync or verify is already running", peer);
		return -EBUSY;
	}
	if (kind == RS_FULL)
		p->need_full = true;
	if (kind != RS_VERIFY)
		p->inconsistent = true;
	r = resync_start(p, kind);
	if (r < 0) {
		snprintf(err, len, "peer %s: cannot start: %s", peer, strerror(-r));
		return r;
	}
	resync_pump(m);
	return 0;
}

/* SIGHUP: peers added, removed, modes and addresses changed; live. */
int primary_reload(struct manager *m, struct config *n)
{
	struct peer **np;
	unsigned int i, k = 0;

	np = calloc(n->nr_peers + m->nr_peers, sizeof(*np));
	if (!np)
		return -ENOMEM;
	for (i = 0; i < n->nr_peers; i++) {
		const struct config_peer *cp = &n->peers[i];
		struct peer *p = primary_find(m, cp->name);

		if (p) {
			if (strcmp(p->cfg.address.text, cp->address.text)) {
				p->cfg.address = cp->address;
				peer_close(p, "address changed by reload");
				p->next_attempt_ms = 0;
			}
			peer_set_mode(p, cp->mode);
			p->cfg.mode = cp->mode;
		} else {
			p = peer_new(m, cp);
			if (!p) {
				free(np);
				return -ENOMEM;
			}
			p->cursor = m->released;
			p->received = p->written = p->durable = m->released;
			log_info("%s: peer %s added by reload", m->cfg->resource, cp->name);
		}
		np[k++] = p;
	}
	for (i = 0; i < m->nr_peers; i++) {
		struct peer *p = m->peers[i];
		unsigned int j;
		bool kept = false;

		for (j = 0; j < k; j++)
			kept |= np[j] == p;
		if (!kept) {
			log_info("%s: peer %s removed by reload", m->cfg->resource, p->cfg.name);
			/*
			 * What it has not acknowledged may sit unread in a
			 * socket that refers to ring pages (spliced payloads),
			 * which are reused once released: mark those regions,
			 * so that re-adding the peer resyncs them.
			 */
			if (p->conn == PEER_UP && p->holds_ring && p->durable < p->cursor &&
			    ring_can_resync(m->ring))
				primary_mark_records(m, p->durable, p->cursor);
			peer_free(p);
		}
	}
	free(m->peers);
	m->peers = np;
	m->nr_peers = k;
	config_free(m->cfg);
	m->cfg = n;
	primary_update_kernel_mode(m);
	primary_update_ring(m);
	return 0;
}

/* ---- status ------------------------------------------------------------------ */

void primary_status(struct manager *m, struct json_object *o)
{
	struct json_object *peers = json_object_new_array(), *k = json_object_new_object();
	struct ring_info ri;
	unsigned int i;
	uint64_t s, used = 0;

	ring_get_info(m->ring, &ri);
	for (s = m->released; s < ri.prod_seq; s++) {
		const struct dm_repl_rec *rec = ring_rec(m->ring, s);

		if (rec)
			used += rec->data_len;
	}
	/* what the target says, which is what dmsetup status says */
	json_object_object_add(k, "mode", json_object_new_string(
		ri.state & DM_REPL_STATE_SYNC ? "sync" : "async"));
	json_object_object_add(k, "state", json_object_new_string(
		ri.state & DM_REPL_STATE_OVERFLOW ? "overflow" :
		ri.state & DM_REPL_STATE_DEGRADED ? "degraded" : "ok"));
	json_object_object_add(k, "head", json_object_new_uint64(ri.prod_seq));
	json_object_object_add(k, "tail", json_object_new_uint64(m->released));
	json_object_object_add(k, "acked", json_object_new_uint64(m->acked));
	json_object_object_add(k, "ring_bytes", json_object_new_uint64(ri.data_size));
	json_object_object_add(k, "ring_used_bytes", json_object_new_uint64(used));
	json_object_object_add(k, "dirty_regions", json_object_new_uint64(ri.dirty_regions));
	json_object_object_add(k, "overflows", json_object_new_uint64(ri.overflows));
	json_object_object_add(k, "hold_timeouts", json_object_new_uint64(ri.hold_timeouts));
	json_object_object_add(k, "stream_id", json_object_new_uint64(ri.ring_id));
	json_object_object_add(k, "metadata", json_object_new_string(
		strcmp(m->cfg->meta_device, "-") ? m->cfg->meta_device :
		"none: an unclean shutdown means a full resync"));
	json_object_object_add(o, "device", json_object_new_string(m->dm_name));
	json_object_object_add(o, "target", k);

	for (i = 0; i < m->nr_peers; i++) {
		struct peer *p = m->peers[i];
		struct json_object *po = json_object_new_object();
		uint64_t lag_bytes = 0, from = p->conn == PEER_UP ? p->received : p->durable;

		for (s = from; s < ri.prod_seq; s++) {
			const struct dm_repl_rec *rec = ring_rec(m->ring, s);

			if (rec)
				lag_bytes += rec->data_len;
		}
		json_object_object_add(po, "name", json_object_new_string(p->cfg.name));
		json_object_object_add(po, "address", json_object_new_string(p->cfg.address.text));
		json_object_object_add(po, "mode", json_object_new_string(config_mode_name(p->mode)));
		json_object_object_add(po, "connection", json_object_new_string(
			p->admin_down ? "StandAlone" : conn_name(p->conn)));
		json_object_object_add(po, "replication", json_object_new_string(
			p->inconsistent ? "Inconsistent" :
			p->conn != PEER_UP ? "Off" :
			p->received >= ri.prod_seq ? "Established" : "Catching-up"));
		json_object_object_add(po, "disk", json_object_new_string(
			p->inconsistent ? "Inconsistent" : "UpToDate"));
		resync_status(p, po);
		json_object_object_add(po, "resyncs_done", json_object_new_uint64(p->resyncs_done));
		json_object_object_add(po, "last_resync_bytes",
				       json_object_new_uint64(p->last_resync_bytes));
		json_object_object_add(po, "verifies_done", json_object_new_uint64(p->verifies_done));
		json_object_object_add(po, "last_verify_mismatches",
				       json_object_new_uint64(p->last_verify_mismatches));
		json_object_object_add(po, "sent", json_object_new_uint64(p->cursor));
		json_object_object_add(po, "received", json_object_new_uint64(p->received));
		json_object_object_add(po, "written", json_object_new_uint64(p->written));
		json_object_object_add(po, "durable", json_object_new_uint64(p->durable));
		json_object_object_add(po, "lag_records", json_object_new_uint64(
			ri.prod_seq > from ? ri.prod_seq - from : 0));
		json_object_object_add(po, "lag_bytes", json_object_new_uint64(lag_bytes));
		json_object_object_add(po, "records_sent", json_object_new_uint64(p->records_sent));
		json_object_object_add(po, "bytes_sent", json_object_new_uint64(p->bytes_sent));
		json_object_object_add(po, "connects", json_object_new_uint64(p->connects));
		json_object_object_add(po, "holds_ring", json_object_new_boolean(p->holds_ring));
		if (p->last_error[0])
			json_object_object_add(po, "last_error",
					       json_object_new_string(p->last_error));
		json_object_array_add(peers, po);
	}
	json_object_object_add(o, "peers", peers);
}
