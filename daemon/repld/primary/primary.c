// SPDX-License-Identifier: GPL-2.0-only
/*
 * The primary role: find or create the repl device over the configured
 * device, attach to its ring, keep one connection and one stream per peer
 * (stream.c), and react to what happens: the ring's events, the peers'
 * frames, the tick.  See primary.h for how its files divide the work.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "ctl.h"
#include "dmdev.h"
#include "log.h"
#include "loop.h"
#include "metadata.h"
#include "peerbits.h"
#include "primary.h"
#include "ring.h"
#include "tracemark.h"

static struct primary *primary_of(struct role *r)
{
	return container_of(r, struct primary, role);
}

/* ---- the kernel side ---------------------------------------------------- */

static int primary_target_mode(void *ctx, bool sync)
{
	struct primary *pri = ctx;

	return dmdev_message(pri->dm_name, sync ? "mode sync" : "mode async", NULL, 0);
}

static int primary_target_hold(void *ctx, unsigned int ms)
{
	struct primary *pri = ctx;
	char msg[64];

	snprintf(msg, sizeof(msg), "hold_timeout_ms %u", ms);
	return dmdev_message(pri->dm_name, msg, NULL, 0);
}

static const struct manager_kernel_ops primary_target_ops = {
	.set_mode = primary_target_mode,
	.set_hold_timeout = primary_target_hold,
};

static unsigned int primary_hold_ms(const struct config *c)
{
	return c->on_peer_loss == LOSS_BLOCK ? 60000 : c->hold_timeout_ms;
}

/* ---- a peer's connection ---------------------------------------------------- */

static struct replica *replica_of(struct peer *p)
{
	return container_of(p, struct replica, conn);
}

static void primary_peer_connected(struct peer *p)
{
	handshake_hello(replica_of(p));
}

/* ---- what a secondary sends: its Hello and bitmap, acks, resync answers ---- */

static void frame_hello(struct replica *rp, const Dmrepl__V1__Frame *f)
{
	handshake_reply(rp, f->hello);
}

static void frame_peer_bitmap(struct replica *rp, const Dmrepl__V1__Frame *f)
{
	handshake_bitmap(rp, f->peer_bitmap);
}

static void frame_ack(struct replica *rp, const Dmrepl__V1__Frame *f)
{
	tracemark('P', "ack", f->ack->written);
	if (!stream_ack(rp, f->ack->received, f->ack->written, f->ack->durable))
		peer_close(&rp->conn, "invalid acknowledgment");
	else
		rp->conn.acks_received++;
}

static void frame_keepalive(struct replica *rp, const Dmrepl__V1__Frame *f)
{
}

static void frame_hash_reply(struct replica *rp, const Dmrepl__V1__Frame *f)
{
	const char *why;

	if (!rp->rs)
		peer_close(&rp->conn, "unexpected HashReply");
	else if (resync_hash_reply(rp->rs, f->hash_reply, &why) < 0)
		peer_close(&rp->conn, why);
	else
		stream_request_pump(rp->pri);
}

static void frame_resync_flushed(struct replica *rp, const Dmrepl__V1__Frame *f)
{
	stream_resync_flushed(rp, f->resync_flushed->id);
}

static void frame_error(struct replica *rp, const Dmrepl__V1__Frame *f)
{
	char reason[200];

	snprintf(reason, sizeof(reason), "peer reported error %d: %s", f->error->code,
		 f->error->reason);
	peer_close(&rp->conn, reason);
}

struct primary_frame {
	void (*fn)(struct replica *rp, const Dmrepl__V1__Frame *f);
	/* the connection is closed for this reason before the handshake */
	const char *early;
};

static const struct primary_frame primary_frames[] = {
	[DMREPL__V1__FRAME__MSG_HELLO] = { frame_hello, NULL },
	[DMREPL__V1__FRAME__MSG_PEER_BITMAP] = { frame_peer_bitmap,
						 "PeerBitmap before the handshake" },
	[DMREPL__V1__FRAME__MSG_ACK] = { frame_ack, "Ack before the handshake" },
	[DMREPL__V1__FRAME__MSG_KEEPALIVE] = { frame_keepalive, NULL },
	[DMREPL__V1__FRAME__MSG_HASH_REPLY] = { frame_hash_reply,
						"HashReply before the handshake" },
	[DMREPL__V1__FRAME__MSG_RESYNC_FLUSHED] = { frame_resync_flushed,
						    "ResyncFlushed before the handshake" },
	[DMREPL__V1__FRAME__MSG_ERROR] = { frame_error, NULL },
};

/* One frame to its handler, by its type. */
static void primary_peer_frame(struct peer *p, const struct wire_msg *msg)
{
	unsigned int t = (unsigned int)msg->frame->msg_case;
	const struct primary_frame *f = t < ARRAY_SIZE(primary_frames) ? &primary_frames[t] : NULL;

	if (!f || !f->fn)
		peer_close(p, "unexpected frame from a secondary");
	else if (f->early && p->state != PEER_UP)
		peer_close(p, f->early);
	else
		f->fn(replica_of(p), msg->frame);
}

static void primary_peer_pump(struct peer *p)
{
	if (p->state == PEER_UP)
		stream_request_pump(replica_of(p)->pri);
}

static void primary_peer_closed(struct peer *p, enum peer_state was, const char *why)
{
	struct replica *rp = replica_of(p);
	struct primary *pri = rp->pri;

	/* a peer that was in sync in the stream is not any more: a new
	 * generation begins at the next write (one that was not in sync holds
	 * an older generation, already kept as the bitmap's or the history:
	 * a rotation for it would push that out and make it unrelated) */
	if (was == PEER_UP && !rp->inconsistent && !pri->rotate_pending && pri->ring) {
		pri->rotate_pending = true;
		pri->rotate_mark = ring_prod(pri->ring);
	}
	/* ... and a cluster manager must not promote it: fence it (also
	 * when the administrator disconnected it: we go on writing) */
	if (was == PEER_UP && !rp->inconsistent)
		fence_peer_lost(rp);
	stream_resync_stop(rp, rp->rs ? "connection lost" : NULL);
	rp->join_pending = false;
}

static const struct peer_ops primary_peer_ops = {
	.connected = primary_peer_connected,
	.frame = primary_peer_frame,
	.pump = primary_peer_pump,
	.closed = primary_peer_closed,
};

/* ---- the ring ------------------------------------------------------------- */

static void primary_ring_event(struct ev *ev, uint32_t events)
{
	struct primary *pri = container_of(ev, struct primary, ev_ring);

	tracemark('P', "wake", -1);
	if (events & EPOLLPRI) {
		uint32_t seq = ring_state_seq(pri->ring), st = ring_state(pri->ring);

		if (st != pri->kernel_state)
			log_notice("%s: target state:%s%s%s%s", pri->resource,
				   st & DM_REPL_STATE_SYNC ? " sync" : " async",
				   st & DM_REPL_STATE_DEGRADED ? " degraded" : "",
				   st & DM_REPL_STATE_OVERFLOW ? " overflow" : "",
				   st & DM_REPL_STATE_DIRTY ? " dirty-regions" : "");
		if (pri->kernel_mode_known && !!(st & DM_REPL_STATE_SYNC) != pri->kernel_sync)
			log_notice("%s: the target was switched to %s mode outside repld (dmsetup message); the peers' modes would keep it %s",
				   pri->resource, st & DM_REPL_STATE_SYNC ? "sync" : "async",
				   pri->kernel_sync ? "sync" : "async");
		pri->kernel_state = st;
		ring_mark_state_seen(pri->ring, seq);
	}
	if (events & EPOLLHUP) {
		log_error("%s: the repl device is gone", pri->resource);
		loop_exit(pri->env->loop, -ENODEV);
		return;
	}
	stream_request_pump(pri);
}

/*
 * Once per turn of the loop, before it sleeps: the pump ships what is
 * there, then the steps that follow from it, each on its own condition;
 * the acknowledgments go to the kernel and our read cursor is published
 * so the kernel wakes us for the next record (and not before).  True when
 * a record arrived or a pump was asked for meanwhile: do not sleep.
 */
static bool primary_before_sleep(struct role *r)
{
	struct primary *pri = primary_of(r);

	pri->pump_wanted = false;
	stream_pump(pri);
	stream_rotate_step(pri);
	stream_gens_step(pri);
	stream_bits_step(pri);
	stream_resync_pump(pri);
	stream_meta_step(pri);
	stream_update_ring(pri);
	return ring_arm(pri->ring) > 0 || pri->pump_wanted;
}

/* ---- tick: reconnects, keepalives, timeouts, ring holding ---------------- */

/*
 * An async peer whose backlog (what it has not made durable) holds more
 * than congestion-fill-pct of the ring stops holding it, so that neither
 * the application nor the other peers ever wait for it: its connection is
 * reset (its queue refers to ring pages about to be reused), the records
 * go without it into its own bitmap, and it is Behind until the bitmap
 * resync after its reconnection brings it back to streaming.
 */
static void primary_pull_ahead(struct primary *pri)
{
	const struct config *c = pri->env->cfg;
	struct ring_info ri;

	if (!c->congestion_fill_pct)
		return;
	ring_get_info(pri->ring, &ri);
	for (unsigned int i = 0; i < pri->nr_replicas; i++) {
		struct replica *rp = pri->replicas[i];
		uint64_t recs, bytes;

		if (rp->mode != MODE_ASYNC || rp->conn.state != PEER_UP || !rp->holds_ring)
			continue;
		recs = ri.prod_seq - rp->durable;
		bytes = stream_ring_bytes(pri, rp->durable, ri.prod_seq);
		if (recs * 100 <= (uint64_t)c->congestion_fill_pct * ri.nr_recs &&
		    bytes * 100 <= (uint64_t)c->congestion_fill_pct * ri.data_size)
			continue;
		log_warning("%s: peer %s: congested (%" PRIu64 " records, %" PRIu64
			    " bytes behind, more than %u%% of the ring): pulled ahead, it catches up by resync",
			    pri->resource, rp->conn.cfg.name, recs, bytes, c->congestion_fill_pct);
		/* closed while still counted in sync: a new generation follows */
		peer_abort(&rp->conn, "congested: pulled ahead");
		rp->holds_ring = false;
		rp->inconsistent = true;
		rp->behind = true;
		rp->pulled_ahead++;
	}
}

static void primary_tick(struct role *r, uint64_t now)
{
	struct primary *pri = primary_of(r);
	const struct config *c = pri->env->cfg;
	unsigned int i, fill = 0;
	bool fill_known = false;

	for (i = 0; i < pri->nr_replicas; i++) {
		struct replica *rp = pri->replicas[i];

		peer_tick(&rp->conn, now, !rp->admin_down && !rp->removed && !pri->env->draining,
			  c->peer_timeout_ms, c->keepalive_ms);
		/* a peer that is away while the ring fills stops holding it */
		if (rp->conn.state != PEER_UP && rp->holds_ring) {
			if (!fill_known) {
				fill = stream_ring_fill_pct(pri);
				fill_known = true;
			}
			if (fill >= 50 || rp->removed) {
				log_warning("%s: peer %s: away while the ring is %u%% full: releasing its records; it needs a resync",
					    pri->resource, rp->conn.cfg.name, fill);
				rp->holds_ring = false;
				rp->inconsistent = true;
			}
		}
	}
	primary_pull_ahead(pri);
	stream_request_pump(pri);
	stream_update_ring(pri);
	stream_check_in_sync(pri);
	pri->gens_failed = false;	/* a failed store: again before the loop sleeps */
	fence_tick(pri, now);
}

static void primary_status_line(struct role *r, char *line, size_t len)
{
	struct primary *pri = primary_of(r);
	unsigned int i;
	int n;

	n = snprintf(line, len, "primary %s:", pri->resource);
	for (i = 0; i < pri->nr_replicas && n >= 0 && (size_t)n < len; i++) {
		struct replica *rp = pri->replicas[i];

		n += snprintf(line + n, len - (size_t)n, " %s %s %s", rp->conn.cfg.name,
			      rp->admin_down ? "StandAlone" : peer_state_name(rp->conn.state),
			      config_mode_name(rp->mode));
	}
}

static bool primary_drained(struct role *r)
{
	struct primary *pri = primary_of(r);
	unsigned int i;

	if (!pri->drain_target)
		pri->drain_target = ring_prod(pri->ring);
	for (i = 0; i < pri->nr_replicas; i++) {
		struct replica *rp = pri->replicas[i];

		if (rp->conn.state == PEER_UP && rp->written < pri->drain_target)
			return false;
	}
	return true;
}

/* ---- setup ------------------------------------------------------------------ */

/*
 * The size to create the repl device with: what the metadata describes, a
 * backing device extended since (lvextend while it was down) grows only
 * with "replctl resize", once the peers' devices have grown too.  Without
 * metadata, the backing device's size, @sectors as given.
 */
static int primary_device_size(struct primary *pri, uint64_t *sectors)
{
	const struct config *c = pri->env->cfg;
	struct md_info mi;
	char err[512];
	int r;

	if (!strcmp(c->meta_device, "-"))
		return 0;
	r = md_read(c->meta_device, false, &mi, err, sizeof(err));
	if (r < 0)
		return log_error_errno(r, "%s: %s", c->resource, err);
	if (mi.dev_sectors > *sectors) {
		log_error("%s: %s has %" PRIu64 " sectors, the metadata describes %" PRIu64
			  ": a repl device does not shrink", c->resource, c->device, *sectors,
			  mi.dev_sectors);
		return -EINVAL;
	}
	if (mi.dev_sectors < *sectors)
		log_notice("%s: %s has grown to %" PRIu64 " sectors; the repl device keeps %" PRIu64
			   " until 'replctl resize %s'", c->resource, c->device, *sectors,
			   mi.dev_sectors, c->resource);
	*sectors = mi.dev_sectors;
	return 0;
}

/* Find the repl device, or create it over the configured device. */
static int primary_open_device(struct primary *pri, dev_t *ret)
{
	const struct config *c = pri->env->cfg;
	struct dmdev_info info;
	bool sync = false;
	unsigned int i;
	uint64_t sectors;
	char uuid[96];
	int fd, r;

	r = dmdev_get(pri->dm_name, &info);
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
		r = primary_device_size(pri, &sectors);
		if (r < 0)
			return r;
		for (i = 0; i < c->nr_peers; i++)
			sync |= c->peers[i].mode != MODE_ASYNC;
		snprintf(uuid, sizeof(uuid), "REPL-%s", c->dm_name);
		r = dmdev_create(pri->dm_name, uuid, &(struct dmdev_table) {
			.data_dev = c->device,
			.meta_dev = c->meta_device,
			.sectors = sectors,
			.mode = sync ? "sync" : "async",
			.ring_size_mb = c->ring_size_mb,
			.hold_timeout_ms = primary_hold_ms(c),
			.region_kb = c->region_kb,
			.extent_kb = c->extent_kb,
			.max_extents = c->max_extents,
			.record_kb = c->record_kb,
		});
		if (r < 0)
			return log_error_errno(r, "%s: cannot create the repl device over %s (is dm-repl loaded? see the kernel log)",
					       c->resource, c->device);
		log_info("%s: created /dev/mapper/%s over %s (%" PRIu64 " sectors)", c->resource,
			 pri->dm_name, c->device, sectors);
		r = dmdev_get(pri->dm_name, &info);
		if (r < 0 || !info.exists)
			return log_error_errno(r < 0 ? r : -ENODEV, "%s: device vanished", c->resource);
	} else if (strcmp(info.target, "repl")) {
		log_error("%s: /dev/mapper/%s exists but is a '%s' device, not repl", c->resource,
			  pri->dm_name, info.target);
		return -EEXIST;
	}
	*ret = makedev(info.major, info.minor);
	return 0;
}

static void primary_free(struct role *r)
{
	struct primary *pri = primary_of(r);
	unsigned int i;

	for (i = 0; i < pri->nr_replicas; i++)
		stream_replica_free(pri->replicas[i]);
	free(pri->replicas);
	resync_io_free(pri->rs_io);
	peerbits_free(pri->pb);
	free(pri->tgt_bits);
	if (pri->ring) {
		loop_del(pri->env->loop, &pri->ev_ring);
		ring_free(pri->ring);
	}
	free(pri);
}

static int primary_start_ring(struct primary *pri)
{
	const struct config *c = pri->env->cfg;
	struct ring_info ri;
	int r;

	ring_get_info(pri->ring, &ri);
	pri->released = ri.release_seq;
	pri->acked = ri.ack_seq;
	log_info("%s: ring %016" PRIx64 ": %" PRIu64 " MiB, records %" PRIu64 "..%" PRIu64,
		 c->resource, ri.ring_id, ri.data_size >> 20, pri->released, ri.prod_seq);
	/* the repl device holds the metadata device: through the target */
	genstore_init(&pri->gs, pri->resource, pri->ring_from_caller ? NULL : pri->dm_name,
		      c->meta_device, c->state_dir, ROLE_PRIMARY);
	r = genstore_load(&pri->gs, &pri->gens);
	if (r < 0)
		return r;
	if (!pri->gens.current) {
		/* the first primary of this data: its generation begins */
		pri->gens.current = gens_new_id();
		pri->gens.since = gens_now_ms();
		r = stream_save_gens(pri);
		if (r < 0)
			return r;
	}
	log_info("%s: data generation %016" PRIx64 " (bitmap %016" PRIx64 ")",
		 c->resource, pri->gens.current, pri->gens.bitmap);
	/* no peer is in sync yet: the first write begins a generation */
	pri->rotate_pending = true;
	pri->rotate_mark = ri.prod_seq;
	return 0;
}

/* Each peer's out-of-sync bitmap: in the metadata device's peer area. */
static int primary_open_bits(struct primary *pri)
{
	const struct config *c = pri->env->cfg;
	struct ring_info ri;
	uint64_t region_sectors;
	char err[512];
	int r;

	ring_get_info(pri->ring, &ri);
	region_sectors = 1ULL << (ri.region_shift - 9);
	r = peerbits_open(c->meta_device, (ri.dev_sectors + region_sectors - 1) / region_sectors,
			  &pri->pb, err, sizeof(err));
	if (r < 0)
		return log_error_errno(r, "%s: %s", pri->resource, err);
	return stream_assign_slots(pri);
}

static int primary_start(struct role_env *env, const struct role_args *args, struct role **ret)
{
	const struct config *c = env->cfg;
	struct primary *pri;
	unsigned int i;
	dev_t dev = 0;
	int r;

	pri = calloc(1, sizeof(*pri));
	if (!pri) {
		ring_free(args->ring);
		return -ENOMEM;
	}
	pri->role = (struct role) { .ops = &primary_role_ops, .env = env };
	pri->env = env;
	pri->peer_ops = &primary_peer_ops;
	pri->ev_ring.fd = -1;
	snprintf(pri->resource, sizeof(pri->resource), "%s", c->resource);
	snprintf(pri->dm_name, sizeof(pri->dm_name), "%s", c->dm_name);
	*ret = &pri->role;	/* the manager frees it, whatever happens below */
	if (args->ring) {
		pri->ring = args->ring;
		pri->ring_from_caller = true;
		pri->kops = args->kops;
		pri->kctx = args->kctx;
	} else {
		r = primary_open_device(pri, &dev);
		if (r < 0)
			return r;
		r = ring_attach(NULL, dev, &pri->ring);
		if (r == -EBUSY)
			return log_error_errno(r, "%s: another repld is attached to the ring",
					       c->resource);
		if (r < 0)
			return log_error_errno(r, "%s: attach to the ring of /dev/mapper/%s",
					       c->resource, pri->dm_name);
		pri->kops = &primary_target_ops;
		pri->kctx = pri;
		pri->kops->set_hold_timeout(pri->kctx, primary_hold_ms(c));
	}
	r = primary_start_ring(pri);
	if (r < 0)
		return r;
	pri->replicas = calloc(c->nr_peers, sizeof(*pri->replicas));
	if (!pri->replicas)
		return -ENOMEM;
	for (i = 0; i < c->nr_peers; i++) {
		pri->replicas[i] = stream_replica_new(pri, &c->peers[i]);
		if (!pri->replicas[i])
			return log_error_errno(-ENOMEM, "peer");
		pri->nr_replicas++;
	}
	r = primary_open_bits(pri);
	if (r < 0)
		return r;
	fence_load(pri);
	pri->ev_ring = (struct ev) { .fd = ring_fd(pri->ring), .fn = primary_ring_event };
	r = loop_add(env->loop, &pri->ev_ring, EPOLLIN | EPOLLPRI);
	if (r < 0)
		return log_error_errno(r, "epoll add ring");
	stream_update_kernel_mode(pri);
	for (i = 0; i < pri->nr_replicas; i++)
		peer_connect(&pri->replicas[i]->conn);
	return 0;
}

/* the peers (admin_reload), then the target's hold when it changed */
static int primary_reload(struct role *r, const struct config *n)
{
	struct primary *pri = primary_of(r);
	unsigned int hold = primary_hold_ms(n);
	int ret;

	ret = admin_reload(pri, n);
	if (ret < 0 || hold == primary_hold_ms(pri->env->cfg))
		return ret;
	ret = pri->kops->set_hold_timeout(pri->kctx, hold);
	if (ret < 0)
		log_error_errno(ret, "%s: reload: cannot set the target's hold timeout to %u ms",
				pri->resource, hold);
	else
		log_info("%s: reload: hold timeout %u ms", pri->resource, hold);
	return 0;
}

static void primary_status(struct role *r, struct json_object *o)
{
	admin_status(primary_of(r), o);
}

static int primary_may_switch(struct role *r, enum repl_role to, bool force, char *err,
			      size_t len)
{
	return admin_may_switch(primary_of(r), to, force, err, len);
}

const struct role_ops primary_role_ops = {
	.role = ROLE_PRIMARY,
	.start = primary_start,
	.tick = primary_tick,
	.before_sleep = primary_before_sleep,
	.drained = primary_drained,
	.reload = primary_reload,
	.status = primary_status,
	.status_line = primary_status_line,
	.may_switch = primary_may_switch,
	.free = primary_free,
	.commands = admin_commands,
};
