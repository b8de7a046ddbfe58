// SPDX-License-Identifier: GPL-2.0-only
/*
 * A resync pass this node is the target of: its beginning, its flushes,
 * and adopting the copy when it completes.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "log.h"
#include "rsnap.h"
#include "secondary.h"

/*
 * Switch the write engine to another path to the same data (the snapshot
 * origin and back): everything received is written and flushed first, and
 * the new engine carries on with the same sequence numbers.
 */
static int pass_reopen(struct secondary *s, const char *path)
{
	int fd, r;

	r = apply_drain(s->apply, (int)s->env->cfg->drain_timeout_ms);
	if (r < 0)
		return log_error_errno(r, "%s: writing what was received", s->resource);
	if (fdatasync(s->dev_fd) < 0)
		return log_error_errno(-errno, "%s: flushing %s", s->resource, s->env->cfg->device);
	fd = open(path, O_RDWR | O_DIRECT | O_CLOEXEC);
	if (fd < 0)
		return log_error_errno(-errno, "%s: open %s", s->resource, path);
	records_engine_free(s);
	close(s->dev_fd);
	s->dev_fd = fd;
	return records_engine_new(s, s->xl->lnext);
}

/*
 * The primary says this copy is complete in its generation gen: adopt it,
 * forget our own bitmap (the primary resynced those regions) and any
 * request to discard our data.
 */
static int pass_adopt(struct secondary *s, uint64_t gen)
{
	char err[256];
	bool adopted = false;
	int r;

	if (gen && (gen != s->gens.current || s->gens.bitmap || s->gens.history)) {
		adopted = true;
		s->gens = (struct gens) { .current = gen, .since = gens_now_ms() };
		r = genstore_save(&s->gs, &s->gens);
		if (r < 0)
			return r;
		log_info("%s: this copy now belongs to data generation %016" PRIx64,
			 s->resource, gen);
	}
	/* our bitmaps go; what other peers lack is no longer known here */
	if (strcmp(s->env->cfg->meta_device, "-") && (adopted || copy_own_bitmap(s, NULL))) {
		r = md_update(s->env->cfg->meta_device, NULL, true, DM_REPL_MD_ROLE_SECONDARY,
			      s->primary_node, err, sizeof(err));
		if (r < 0)
			return log_error_errno(r, "%s: %s", s->resource, err);
	}
	s->discard_my_data = false;
	/* in stream order: consistent with every record before this point */
	s->vouched = true;
	if (rsnap_active(s->env->cfg)) {
		r = pass_reopen(s, s->env->cfg->device);
		if (r < 0 || (r = rsnap_drop(s->env->cfg)) < 0)
			return r;
	}
	if (!s->consistent)
		return copy_set_consistent(s, true);
	return copy_save(s, s->state_durable);
}

/*
 * A resync flush whose turn came: everything before it on disk, and at a
 * pass's end the primary's generation adopted.  Encodes the answer into
 * b; SEC_REFUSED: refused (the Error is queued, c may be gone).
 */
static ssize_t pass_reply_flush(struct secondary *s, struct conn *c,
			       const struct resync_req *q, uint8_t *b, size_t len)
{
	if (fdatasync(s->dev_fd) < 0) {
		log_error_errno(-errno, "%s: flushing %s", s->resource, s->env->cfg->device);
		conn_send_error(c, DMREPL__V1__ERROR__CODE__CODE_IO, "cannot flush the device");
		return SEC_REFUSED;
	}
	if (q->done && pass_adopt(s, q->gen) < 0) {
		conn_send_error(c, DMREPL__V1__ERROR__CODE__CODE_IO, "cannot save the state");
		return SEC_REFUSED;
	}
	return wire_encode_resync_flushed(b, len, q->id);
}

/* Answer the requests whose turn has come (everything before them written). */
void pass_run(struct secondary *s)
{
	struct conn *c = s->conn;
	const struct resync_req *q;
	struct apply_progress e;
	uint8_t *b;
	ssize_t n;

	if (!s->rt || !s->apply || !c || !c->up || c->closing || c->bm_pending)
		return;
	for (;;) {
		apply_progress(s->apply, &e);
		q = resync_target_next(s->rt, e.written);
		if (!q)
			return;
		b = conn_out_space(c, SEC_REPLY_MAX);
		if (!b)
			return;		/* after the output drained */
		n = q->flush ? pass_reply_flush(s, c, q, b, SEC_REPLY_MAX) :
			       verify_reply_hash(s, c, q, b, SEC_REPLY_MAX);
		if (n == SEC_REFUSED)
			return;
		if (n < 0) {
			conn_close(s, "cannot encode a resync reply");
			return;
		}
		c->out_len += (size_t)n;
		resync_target_pop(s->rt);
		conn_flush(c);
		if (s->conn != c)
			return;
	}
}

/*
 * ResyncBegin: the copy is Inconsistent until the pass ends; with
 * resync-snapshot, a snapshot keeps its consistent image meanwhile.
 */
bool pass_frame_begin(struct secondary *s, struct conn *c, struct wire_msg *msg)
{
	const struct config *cfg = s->env->cfg;
	char orig[PATH_MAX];

	log_info("%s: %s resync from %s begins", s->resource,
		 msg->frame->resync_begin->full ? "full" : "bitmap", c->node);
	if (s->consistent && cfg->resync_snapshot[0] && !rsnap_active(cfg)) {
		/* keep the consistent image until the resync is done */
		if (rsnap_create(cfg) < 0 || rsnap_origin_path(cfg, orig, sizeof(orig)) < 0 ||
		    pass_reopen(s, orig) < 0) {
			conn_send_error(c, DMREPL__V1__ERROR__CODE__CODE_IO,
					"cannot take the resync snapshot");
			return true;
		}
	}
	if (copy_set_consistent(s, false) < 0)
		conn_send_error(c, DMREPL__V1__ERROR__CODE__CODE_IO, "cannot save the state");
	return true;
}

/* ResyncFlush: answered once everything received before it is written. */
bool pass_frame_flush(struct secondary *s, struct conn *c, struct wire_msg *msg)
{
	const Dmrepl__V1__ResyncFlush *f = msg->frame->resync_flush;

	records_queue_request(s, c, &(struct resync_req) {
		.flush = true, .id = f->id, .done = f->done, .gen = f->gen,
	});
	return true;
}
