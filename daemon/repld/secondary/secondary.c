// SPDX-License-Identifier: GPL-2.0-only
/*
 * The secondary role: its operations for the manager (role.h) and its
 * commands.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "config.h"
#include "ctl.h"
#include "dmdev.h"
#include "log.h"
#include "rsnap.h"
#include "sock.h"
#include "state.h"
#include "secondary.h"

static bool secondary_before_sleep(struct role *r)
{
	struct secondary *s = secondary_of(r);

	if (!frames_more(s->conn))
		return false;
	frames_read(s);
	return frames_more(s->conn);
}

static void secondary_tick(struct role *r, uint64_t now)
{
	struct secondary *s = secondary_of(r);
	const struct config *cfg = s->env->cfg;
	struct conn *c = s->conn;

	if (s->apply) {
		int e = apply_run(s->apply);

		if (e < 0 && c)
			conn_send_error(c, DMREPL__V1__ERROR__CODE__CODE_IO,
					"write to the device failed");
		records_persist(s, true);
		pass_run(s);
	}
	for (unsigned int i = 0; i < SEC_MAX_CANDS; i++)
		if (s->cands[i] && now - s->cands[i]->since_ms > cfg->peer_timeout_ms)
			conn_drop(s, s->cands[i], "no Hello within peer-timeout-ms");
	c = s->conn;
	if (c) {
		if (!c->up && now - c->since_ms > cfg->peer_timeout_ms) {
			conn_close(s, "no Hello in time");
		} else if (c->up && now - c->last_rx_ms > cfg->peer_timeout_ms) {
			conn_close(s, "no frame from the primary within peer-timeout-ms");
		} else if (c->up && now - c->last_tx_ms >= cfg->keepalive_ms &&
			   c->out_len == c->out_off) {
			uint8_t *b = conn_out_space(c, 32);
			ssize_t n = b ? wire_encode_keepalive(b, 32, now) : -ENOSPC;

			if (n > 0) {
				c->out_len += (size_t)n;
				conn_flush(c);
			}
		}
		records_send_ack(s);
	}
}

static void secondary_status_line(struct role *r, char *buf, size_t len)
{
	struct secondary *s = secondary_of(r);

	snprintf(buf, len, "secondary %s: primary %s", s->resource,
		 s->conn && s->conn->up ? s->primary_node : "not connected");
}

static bool secondary_drained(struct role *r)
{
	struct secondary *s = secondary_of(r);

	return !s->apply || !apply_busy(s->apply);
}

static void secondary_free(struct role *r)
{
	struct secondary *s = secondary_of(r);
	unsigned int i;

	conn_close(s, NULL);
	for (i = 0; i < SEC_MAX_CANDS; i++)
		conn_drop(s, s->cands[i], NULL);
	records_engine_stop(s);
	for (i = 0; i < s->nr_listen; i++) {
		loop_del(s->env->loop, &s->listen[i].ev);
		close(s->listen[i].ev.fd);
	}
	if (s->dev_fd >= 0)
		close(s->dev_fd);
	resync_target_free(s->rt);
	free(s->xl);
	free(s->zin);
	ZSTD_freeDCtx(s->zdctx);
	free(s);
}

static int secondary_start(struct role_env *env, const struct role_args *args, struct role **ret)
{
	const struct config *cfg = env->cfg;
	struct secondary *s;
	char path[PATH_MAX];
	unsigned int i;
	int r;

	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->role = (struct role) { .ops = &secondary_role_ops, .env = env };
	s->ev_apply.fn = frames_apply_event;
	s->env = env;
	s->dev_fd = -1;
	snprintf(s->resource, sizeof(s->resource), "%s", cfg->resource);
	*ret = &s->role;	/* the manager frees it, whatever happens below */
	s->zin = malloc(WIRE_MAX_PAYLOAD);
	s->zdctx = ZSTD_createDCtx();
	if (!s->zin || !s->zdctx)
		return -ENOMEM;

	snprintf(path, sizeof(path), "%s", cfg->device);
	if (rsnap_active(cfg)) {
		/* a resync was interrupted: keep the snapshot, write through
		 * its origin until a resync completes */
		r = rsnap_origin_path(cfg, path, sizeof(path));
		if (r < 0)
			return r;
		log_warning("%s: the resync snapshot is still there (an interrupted resync): writing through %s",
			    s->resource, path);
	}
	s->dev_fd = open(path, O_RDWR | O_DIRECT | O_CLOEXEC);
	if (s->dev_fd < 0)
		return log_error_errno(-errno, "%s: open %s with O_DIRECT", s->resource,
				       path);
	r = dmdev_size_sectors(s->dev_fd, &s->dev_sectors);
	if (r < 0)
		return log_error_errno(r, "%s: size of %s", s->resource, cfg->device);
	r = state_dir_make(cfg->state_dir);
	if (r < 0)
		return log_error_errno(r, "%s: state directory %s", s->resource, cfg->state_dir);
	copy_load(s);
	genstore_init(&s->gs, s->resource, NULL, cfg->meta_device, cfg->state_dir,
		      ROLE_SECONDARY);
	r = genstore_load(&s->gs, &s->gens);
	if (r < 0)
		return r;
	if (args->demoted) {
		/* the primary until now: its copy is the consistent one; its
		 * own bitmap goes to the next primary */
		s->consistent = true;
		s->discard_my_data = false;
		r = copy_save(s, s->state_durable);
		if (r < 0)
			return log_error_errno(r, "%s: saving the state", s->resource);
	}
	r = listen_open(s);
	if (r < 0)
		return r;
	for (i = 0; i < s->nr_listen; i++) {
		s->listen[i].s = s;
		s->listen[i].ev.fn = listen_event;
		r = loop_add(env->loop, &s->listen[i].ev, EPOLLIN);
		if (r < 0)
			return log_error_errno(r, "epoll add listen");
	}
	log_info("%s: %s, %" PRIu64 " sectors; resume point: %s %" PRIu64, s->resource,
		 cfg->device, s->dev_sectors, s->stream_id ? "record" : "none",
		 s->state_durable);
	return 0;
}

static void secondary_status(struct role *r, struct json_object *o)
{
	struct secondary *s = secondary_of(r);
	struct json_object *po = json_object_new_object();
	struct apply_progress p = { 0 };
	uint64_t n;

	json_object_object_add(o, "generation", genstore_json(&s->gens));
	if (s->apply)
		records_progress(s, &p);
	json_object_object_add(o, "device", json_object_new_string(s->env->cfg->device));
	json_object_object_add(o, "disk", json_object_new_string(s->consistent ? "UpToDate" :
								     "Inconsistent"));
	json_object_object_add(o, "discard_my_data", json_object_new_boolean(s->discard_my_data));
	json_object_object_add(o, "resync_snapshot",
			       json_object_new_boolean(rsnap_active(s->env->cfg)));
	json_object_object_add(o, "resync_blocks", json_object_new_uint64(s->rs_blocks));
	json_object_object_add(o, "resync_bytes", json_object_new_uint64(s->rs_bytes));
	json_object_object_add(o, "hash_requests", json_object_new_uint64(s->hash_requests));
	json_object_object_add(o, "device_sectors", json_object_new_uint64(s->dev_sectors));
	json_object_object_add(o, "io_errors", json_object_new_uint64(records_io_errors(s)));
	json_object_object_add(po, "name", json_object_new_string(s->primary_node[0] ?
								   s->primary_node : "-"));
	json_object_object_add(po, "connection", json_object_new_string(
		s->conn && s->conn->up ? "Connected" : "Connecting"));
	json_object_object_add(po, "mode", json_object_new_string(
		s->conn ? config_mode_name(s->conn->mode) : "-"));
	json_object_object_add(po, "stream_id", json_object_new_uint64(s->stream_id));
	json_object_object_add(po, "received", json_object_new_uint64(p.received));
	json_object_object_add(po, "written", json_object_new_uint64(p.written));
	json_object_object_add(po, "durable", json_object_new_uint64(
		s->apply ? p.durable : s->state_durable));
	json_object_object_add(po, "connects", json_object_new_uint64(s->primary_connects));
	/* what the primary compressed, as this end decoded it */
	json_object_object_add(po, "compress", peer_zstats_json(
		s->zst.in_bytes ? "zstd" : "none", 0, s->conn && s->conn->up && s->conn->zseen,
		&s->zst));
	if (s->conn) {
		char t[200];

		tls_io_describe(&s->conn->io, t, sizeof(t));
		json_object_object_add(po, "transport", json_object_new_string(t));
	}
	json_object_object_add(o, "primary", po);
	n = 0;
	for (unsigned int i = 0; i < SEC_MAX_CANDS; i++)
		n += s->cands[i] != NULL;
	json_object_object_add(o, "pending_connections", json_object_new_uint64(n));
	json_object_object_add(o, "refused_connections", json_object_new_uint64(s->refused));
}

/*
 * SIGHUP: the peers (who may connect) and the timeouts are read from the
 * configuration when they are needed; a connected primary the new one
 * does not allow (removed, or its address changed) is dropped now.
 */
static int secondary_reload(struct role *r, const struct config *n)
{
	struct secondary *s = secondary_of(r);
	struct conn *c = s->conn;
	const char *why;
	char reason[160];

	if (!c || !c->up || c->closing)
		return 0;	/* a Hello still to come is checked against n */
	why = hello_primary_refusal(n, c->node, &c->sa);
	if (!why)
		return 0;
	snprintf(reason, sizeof(reason), "the reloaded configuration no longer allows it: %s",
		 why);
	conn_send_error(c, DMREPL__V1__ERROR__CODE__CODE_UNKNOWN_PEER, reason);
	return 0;
}

/* replctl primary: not onto a torn image. */
static int secondary_may_switch(struct role *r, enum repl_role to, bool force, char *err,
				size_t len)
{
	struct secondary *s = secondary_of(r);

	if (to == ROLE_PRIMARY && !s->consistent && !rsnap_active(s->env->cfg) && !force) {
		snprintf(err, len, "this copy is Inconsistent (a resync did not complete) and there is no resync snapshot to go back to: promoting it would expose a torn image. Let the resync finish, or use --force");
		return -EPERM;
	}
	return 0;
}

/*
 * replctl discard-my-data: the next handshake tells the primary that this
 * copy's own changes may go (split brain resolved in the primary's favour).
 */
static int secondary_cmd_discard(void *ctx, struct json_object *req, char *err, size_t len)
{
	struct secondary *s = secondary_of(ctx);
	int r;

	s->discard_my_data = true;
	r = copy_save(s, s->state_durable);
	if (r < 0) {
		snprintf(err, len, "cannot save the state: %s", strerror(-r));
		return r;
	}
	log_warning("%s: this copy's changes will be discarded at the next connection",
		    s->resource);
	if (s->conn)
		conn_close(s, "discard-my-data: reconnect with the new state");
	return 0;
}

static const struct ctl_command secondary_commands[] = {
	{ .name = "discard-my-data", .fn = secondary_cmd_discard },
	CTL_SECONDARY_REFUSALS,
	{ .name = NULL },
};

const struct role_ops secondary_role_ops = {
	.role = ROLE_SECONDARY,
	.start = secondary_start,
	.tick = secondary_tick,
	.before_sleep = secondary_before_sleep,
	.drained = secondary_drained,
	.reload = secondary_reload,
	.status = secondary_status,
	.status_line = secondary_status_line,
	.may_switch = secondary_may_switch,
	.free = secondary_free,
	.commands = secondary_commands,
};

void secondary_adopt_fd(struct role *r, int fd, const struct sockaddr_storage *sa)
{
	listen_new_conn(secondary_of(r), fd, sa);
}
