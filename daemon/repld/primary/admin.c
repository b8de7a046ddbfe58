// SPDX-License-Identifier: GPL-2.0-only
/*
 * The primary's administration: the control commands for its peers
 * (set-mode, connect, disconnect, resync, verify), a reload that adds,
 * removes and changes peers live, the status, and whether it may become a
 * secondary now.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "dmdev.h"
#include "log.h"
#include "peerbits.h"
#include "primary.h"
#include "ring.h"

static struct primary *admin_primary(void *ctx)
{
	return container_of((struct role *)ctx, struct primary, role);
}

/* The peer a command names: NULL with the reason in err. */
static struct replica *admin_peer(struct primary *pri, struct json_object *req, char *err,
				  size_t len)
{
	const char *name = ctl_arg_str(req, "peer");
	struct replica *rp;

	if (!name) {
		snprintf(err, len, "missing \"peer\"");
		return NULL;
	}
	rp = stream_find(pri, name);
	if (!rp)
		snprintf(err, len, "no peer '%s' in resource %s", name, pri->resource);
	return rp;
}

/* The peers or their modes changed: the target's mode, release and ack follow. */
static void admin_peers_changed(struct primary *pri)
{
	stream_update_kernel_mode(pri);
	stream_update_ring(pri);
}

static void admin_set_peer_mode(struct replica *rp, enum peer_mode mode)
{
	struct peer *p = &rp->conn;
	uint8_t buf[32];
	ssize_t n;

	if (rp->mode == mode)
		return;
	log_info("%s: peer %s: mode %s -> %s", rp->pri->resource, p->cfg.name,
		 config_mode_name(rp->mode), config_mode_name(mode));
	rp->mode = mode;
	if (p->state == PEER_UP) {
		n = wire_encode_set_mode(buf, sizeof(buf), (Dmrepl__V1__Mode)mode);
		if (n > 0 && peer_queue_frame(p, buf, (size_t)n) == 0)
			peer_flush(p);
	}
}

static int admin_cmd_set_mode(void *ctx, struct json_object *req, char *err, size_t len)
{
	struct primary *pri = admin_primary(ctx);
	const char *mode = ctl_arg_str(req, "mode");
	struct replica *rp;
	enum peer_mode pm;

	if (ctl_arg_str(req, "peer") && !mode) {
		snprintf(err, len, "missing \"mode\"");
		return -EINVAL;
	}
	rp = admin_peer(pri, req, err, len);
	if (!rp)
		return -ENOENT;
	if (config_mode_parse(mode, &pm) < 0) {
		snprintf(err, len, "mode '%s': expected async, semi-sync or sync", mode);
		return -EINVAL;
	}
	admin_set_peer_mode(rp, pm);
	admin_peers_changed(pri);
	return 0;
}

static int admin_cmd_connect(void *ctx, struct json_object *req, char *err, size_t len)
{
	struct primary *pri = admin_primary(ctx);
	struct replica *rp = admin_peer(pri, req, err, len);
	struct peer *p;

	if (!rp)
		return -ENOENT;
	p = &rp->conn;
	if (!strcmp(ctl_arg_str(req, "cmd"), "connect")) {
		rp->admin_down = false;
		peer_reset_backoff(p);
		log_info("%s: peer %s: connect requested", pri->resource, p->cfg.name);
	} else {
		rp->admin_down = true;
		peer_close(p, NULL);
		snprintf(p->last_error, sizeof(p->last_error), "disconnected by the administrator");
		log_info("%s: peer %s: disconnected by the administrator", pri->resource,
			 p->cfg.name);
	}
	admin_peers_changed(pri);
	return 0;
}

/* replctl resync / verify: start a pass now (the peer must be connected). */
static int admin_cmd_resync(void *ctx, struct json_object *req, char *err, size_t len)
{
	struct primary *pri = admin_primary(ctx);
	struct replica *rp = admin_peer(pri, req, err, len);
	bool verify = !strcmp(ctl_arg_str(req, "cmd"), "verify");
	enum rs_kind kind = verify ? RS_VERIFY : ctl_arg_bool(req, "full") ? RS_FULL : RS_BITMAP;
	const char *name;
	int r;

	if (!rp)
		return -ENOENT;
	name = rp->conn.cfg.name;
	if (rp->conn.state != PEER_UP) {
		snprintf(err, len, "peer %s is not connected", name);
		return -ENOTCONN;
	}
	if (!ring_can_resync(pri->ring)) {
		snprintf(err, len, "the loaded dm-repl module cannot resync (no DM_REPL_FEAT_RESYNC)");
		return -EOPNOTSUPP;
	}
	if (rp->rs) {
		snprintf(err, len, "peer %s: a resync or verify is already running", name);
		return -EBUSY;
	}
	if (kind == RS_FULL)
		rp->need_full = true;
	if (kind != RS_VERIFY)
		rp->inconsistent = true;
	r = stream_resync_start(rp, kind);
	if (r < 0) {
		snprintf(err, len, "peer %s: cannot start: %s", name, strerror(-r));
		return r;
	}
	stream_request_pump(pri);
	return 0;
}

const struct ctl_command admin_commands[] = {
	{ .name = "set-mode", .fn = admin_cmd_set_mode },
	{ .name = "connect", .fn = admin_cmd_connect },
	{ .name = "disconnect", .fn = admin_cmd_connect },
	{ .name = "resync", .fn = admin_cmd_resync },
	{ .name = "verify", .fn = admin_cmd_resync },
	CTL_PRIMARY_REFUSALS,
	{ .name = NULL },
};

/* SIGHUP: peers added, removed, modes and addresses changed; live. */
int admin_reload(struct primary *pri, const struct config *n)
{
	struct replica **nr;
	unsigned int i, k = 0;

	nr = calloc(n->nr_peers + pri->nr_replicas, sizeof(*nr));
	if (!nr)
		return -ENOMEM;
	for (i = 0; i < n->nr_peers; i++) {
		const struct config_peer *cp = &n->peers[i];
		struct replica *rp = stream_find(pri, cp->name);

		if (rp) {
			struct peer *p = &rp->conn;

			peer_set_backoff(p, n->reconnect_min_ms, n->reconnect_max_ms);
			if (strcmp(p->cfg.address.text, cp->address.text)) {
				p->cfg.address = cp->address;
				peer_close(p, "address changed by reload");
				p->next_attempt_ms = 0;
			}
			admin_set_peer_mode(rp, cp->mode);
			p->cfg.mode = cp->mode;
			if (cp->compress != p->cfg.compress ||
			    cp->compress_level != p->cfg.compress_level)
				log_info("%s: peer %s: compress %s, from the next record", pri->resource,
					 cp->name, config_compress_name(cp->compress));
			peer_set_compress(p, cp->compress == COMPRESS_ZSTD ? cp->compress_level : 0);
			if (cp->rate_limit != p->cfg.rate_limit)
				log_info("%s: peer %s: rate-limit %" PRIu64 " bytes/s (0: none)",
					 pri->resource, cp->name, cp->rate_limit);
			peer_set_rate_limit(p, cp->rate_limit);
			p->cfg.compress = cp->compress;
			p->cfg.compress_level = cp->compress_level;
			p->cfg.rate_limit = cp->rate_limit;
		} else {
			rp = stream_replica_new(pri, cp);
			if (!rp) {
				/* the ones added here go again; the rest stays */
				while (k--)
					if (!stream_find(pri, nr[k]->conn.cfg.name))
						stream_replica_free(nr[k]);
				free(nr);
				return -ENOMEM;
			}
			peer_set_backoff(&rp->conn, n->reconnect_min_ms, n->reconnect_max_ms);
			peer_reset_backoff(&rp->conn);
			log_info("%s: peer %s added by reload", pri->resource, cp->name);
		}
		nr[k++] = rp;
	}
	for (i = 0; i < pri->nr_replicas; i++) {
		struct replica *rp = pri->replicas[i];
		unsigned int j;
		bool kept = false;

		for (j = 0; j < k; j++)
			kept |= nr[j] == rp;
		if (!kept) {
			log_info("%s: peer %s removed by reload", pri->resource, rp->conn.cfg.name);
			/* its slot goes: re-added, it is a peer whose
			 * bitmap is not tracked (a full sync unless it
			 * resumes from the ring) */
			stream_replica_free(rp);
		}
	}
	free(pri->replicas);
	pri->replicas = nr;
	pri->nr_replicas = k;
	stream_assign_slots(pri);
	/* the manager makes n the configuration once this returns */
	admin_peers_changed(pri);
	return 0;
}

/* The local writes that failed, as the target counts them (its status line). */
static void admin_io_errors(struct primary *pri, struct json_object *k)
{
	char st[1024];
	uint64_t n;

	if (dmdev_status(pri->dm_name, st, sizeof(st)) == 0 && dmdev_repl_io_errors(st, &n) == 0)
		json_object_object_add(k, "io_errors", json_object_new_uint64(n));
}

/* The generation, and the target's state as its ring reports it (into *ri). */
static void admin_status_target(struct primary *pri, struct json_object *o,
				struct ring_info *ri)
{
	const struct config *c = pri->env->cfg;
	struct json_object *k = json_object_new_object();
	uint64_t used;

	json_object_object_add(o, "generation", genstore_json(&pri->gens));
	ring_get_info(pri->ring, ri);
	used = stream_ring_bytes(pri, pri->released, ri->prod_seq);
	/* what the target says, which is what dmsetup status says */
	json_object_object_add(k, "mode", json_object_new_string(
		ri->state & DM_REPL_STATE_SYNC ? "sync" : "async"));
	json_object_object_add(k, "state", json_object_new_string(
		ri->state & DM_REPL_STATE_OVERFLOW ? "overflow" :
		ri->state & DM_REPL_STATE_DEGRADED ? "degraded" : "ok"));
	json_object_object_add(k, "device_sectors", json_object_new_uint64(ri->dev_sectors));
	json_object_object_add(k, "head", json_object_new_uint64(ri->prod_seq));
	json_object_object_add(k, "tail", json_object_new_uint64(pri->released));
	json_object_object_add(k, "acked", json_object_new_uint64(pri->acked));
	json_object_object_add(k, "ring_bytes", json_object_new_uint64(ri->data_size));
	json_object_object_add(k, "ring_used_bytes", json_object_new_uint64(used));
	json_object_object_add(k, "dirty_regions", json_object_new_uint64(ri->dirty_regions));
	json_object_object_add(k, "overflows", json_object_new_uint64(ri->overflows));
	json_object_object_add(k, "hold_timeouts", json_object_new_uint64(ri->hold_timeouts));
	admin_io_errors(pri, k);
	json_object_object_add(k, "stream_id", json_object_new_uint64(ri->ring_id));
	json_object_object_add(k, "metadata", json_object_new_string(
		strcmp(c->meta_device, "-") ? c->meta_device :
		"none: an unclean shutdown means a full resync"));
	json_object_object_add(k, "peer_bitmaps", json_object_new_string(
		peerbits_persistent(pri->pb) ? "metadata device" :
		"memory: a peer not in sync since repld started gets a full sync"));
	if (pri->pb_error)
		json_object_object_add(k, "peer_bitmaps_error", json_object_new_string(
			strerror(-pri->pb_error)));
	json_object_object_add(o, "device", json_object_new_string(pri->dm_name));
	json_object_object_add(o, "target", k);
}

/* A peer's identity and its connection, replication and disk states. */
static void admin_status_peer_state(struct json_object *po, struct replica *rp,
				    const struct ring_info *ri)
{
	struct peer *p = &rp->conn;
	uint64_t oos = stream_peer_oos(rp);
	bool lacking = rp->inconsistent || oos;

	json_object_object_add(po, "name", json_object_new_string(p->cfg.name));
	json_object_object_add(po, "address", json_object_new_string(p->cfg.address.text));
	json_object_object_add(po, "mode", json_object_new_string(config_mode_name(rp->mode)));
	json_object_object_add(po, "connection", json_object_new_string(
		rp->admin_down ? "StandAlone" : peer_state_name(p->state)));
	json_object_object_add(po, "replication", json_object_new_string(
		rp->behind && lacking ? "Behind" :
		lacking ? "Inconsistent" :
		p->state != PEER_UP ? "Off" :
		rp->received >= ri->prod_seq ? "Established" : "Catching-up"));
	/* never UpToDate while a region is known to differ, nor before
	 * it joined our generation */
	json_object_object_add(po, "disk", json_object_new_string(
		lacking ? "Inconsistent" : rp->join_pending ? "Consistent" : "UpToDate"));
	json_object_object_add(po, "out_of_sync_regions", json_object_new_uint64(oos));
	json_object_object_add(po, "bitmap_tracked", json_object_new_boolean(!rp->full_why));
	if (rp->full_why)
		json_object_object_add(po, "full_sync_reason",
				       json_object_new_string(rp->full_why));
}

/* The pass running to the peer, if any, with its pace controller's view. */
static void admin_status_peer_resync(struct json_object *po, struct replica *rp)
{
	struct json_object *r;

	if (!rp->rs)
		return;
	resync_status(rp->rs, po);
	if (json_object_object_get_ex(po, "resync", &r)) {
		uint64_t base = rsctl_base_us(&rp->rsc);

		/* the controller (rsctl.h): its rate, and what the
		 * records see */
		json_object_object_add(r, "pace_bytes_per_s",
				       json_object_new_uint64(rp->rsc.rate));
		json_object_object_add(r, "record_latency_base_us",
				       json_object_new_uint64(base == UINT64_MAX ? 0 : base));
		json_object_object_add(r, "record_latency_last_us",
				       json_object_new_uint64(rp->rsc.last_mean_us));
		json_object_object_add(r, "pace_backoffs",
				       json_object_new_uint64(rp->rsc.backoffs));
	}
}

/* One peer's status object. */
static struct json_object *admin_status_peer(struct primary *pri, struct replica *rp,
					     const struct ring_info *ri)
{
	struct peer *p = &rp->conn;
	struct json_object *po = json_object_new_object();
	uint64_t from = p->state == PEER_UP ? rp->received : rp->durable;
	uint64_t lag_bytes = stream_ring_bytes(pri, from, ri->prod_seq);

	admin_status_peer_state(po, rp, ri);
	admin_status_peer_resync(po, rp);
	json_object_object_add(po, "resyncs_done", json_object_new_uint64(rp->resyncs_done));
	json_object_object_add(po, "last_resync_bytes",
			       json_object_new_uint64(rp->last_resync_bytes));
	json_object_object_add(po, "verifies_done", json_object_new_uint64(rp->verifies_done));
	json_object_object_add(po, "last_verify_mismatches",
			       json_object_new_uint64(rp->last_verify_mismatches));
	json_object_object_add(po, "sent", json_object_new_uint64(rp->cursor));
	json_object_object_add(po, "received", json_object_new_uint64(rp->received));
	json_object_object_add(po, "written", json_object_new_uint64(rp->written));
	json_object_object_add(po, "durable", json_object_new_uint64(rp->durable));
	json_object_object_add(po, "lag_records", json_object_new_uint64(
		ri->prod_seq > from ? ri->prod_seq - from : 0));
	json_object_object_add(po, "lag_bytes", json_object_new_uint64(lag_bytes));
	json_object_object_add(po, "records_sent", json_object_new_uint64(p->records_sent));
	json_object_object_add(po, "acks_received", json_object_new_uint64(p->acks_received));
	json_object_object_add(po, "bytes_sent", json_object_new_uint64(p->bytes_sent));
	json_object_object_add(po, "connects", json_object_new_uint64(p->connects));
	json_object_object_add(po, "compress", peer_zstats_json(
		config_compress_name(p->cfg.compress), p->zlevel,
		p->state == PEER_UP && peer_compressing(p), &p->zst));
	json_object_object_add(po, "rate_limit_bytes", json_object_new_uint64(p->rate_limit));
	if (p->state == PEER_UP) {
		char t[200];

		tls_io_describe(&p->io, t, sizeof(t));
		json_object_object_add(po, "transport", json_object_new_string(t));
	}
	json_object_object_add(po, "holds_ring", json_object_new_boolean(rp->holds_ring));
	json_object_object_add(po, "pulled_ahead", json_object_new_uint64(rp->pulled_ahead));
	json_object_object_add(po, "fence", json_object_new_string(
		fence_state_name(rp->fence.state)));
	json_object_object_add(po, "fence_failures",
			       json_object_new_uint64(rp->fence.failures));
	if (p->last_error[0])
		json_object_object_add(po, "last_error",
				       json_object_new_string(p->last_error));
	return po;
}

void admin_status(struct primary *pri, struct json_object *o)
{
	struct json_object *peers = json_object_new_array();
	struct ring_info ri;
	unsigned int i;

	admin_status_target(pri, o, &ri);
	for (i = 0; i < pri->nr_replicas; i++)
		json_object_array_add(peers, admin_status_peer(pri, pri->replicas[i], &ri));
	json_object_object_add(o, "peers", peers);
}

/* replctl secondary: not while the repl device is in use. */
int admin_may_switch(struct primary *pri, enum repl_role to, bool force, char *err,
		     size_t len)
{
	struct dmdev_info info;

	if (to != ROLE_SECONDARY || pri->ring_from_caller)
		return 0;
	if (dmdev_get(pri->dm_name, &info) == 0 && info.exists && info.open_count > 0) {
		snprintf(err, len, "/dev/mapper/%s is open (%d users: mounted, or used by LVM?): stop using it first",
			 pri->dm_name, info.open_count);
		return -EBUSY;
	}
	return 0;
}
