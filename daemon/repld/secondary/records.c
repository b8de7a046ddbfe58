// SPDX-License-Identifier: GPL-2.0-only
/*
 * The records: translated to engine sequences, written by the write
 * engine, acknowledged to the primary; the write engine's life.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "config.h"
#include "dmdev.h"
#include "log.h"
#include "rsnap.h"
#include "sock.h"
#include "secondary.h"
#include "tracemark.h"

/*
 * Does the device here reach sector @end?  A replica extended while repld
 * runs (the primary grew, dm-repl(7) RESIZE) is measured again before the
 * answer is no.
 */
bool records_device_holds(struct secondary *s, uint64_t end)
{
	uint64_t n;

	if (end <= s->dev_sectors)
		return true;
	if (dmdev_size_sectors(s->dev_fd, &n) < 0 || n <= s->dev_sectors)
		return false;
	log_notice("%s: the device grew from %" PRIu64 " to %" PRIu64 " sectors", s->resource,
		   s->dev_sectors, n);
	s->dev_sectors = n;
	if (s->apply)
		apply_grow(s->apply, n);
	return end <= n;
}

/* Stream progress for "every engine sequence below l is done". */
static uint64_t xl_wire(const struct sec_xlate *x, uint64_t l)
{
	unsigned int i;

	for (i = x->len; i-- > 0;) {
		const struct xl_seg *g = &x->seg[(x->head + i) % XL_MAX];

		if (g->lstart < l)
			return g->wstart + (l - g->lstart < g->n ? l - g->lstart : g->n);
	}
	return x->wbase;
}

/* A stream record took engine sequence x->lnext. */
static int xl_record(struct sec_xlate *x, uint64_t wseq)
{
	struct xl_seg *g = x->len ? &x->seg[(x->head + x->len - 1) % XL_MAX] : NULL;

	if (g && g->lstart + g->n == x->lnext && g->wstart + g->n == wseq) {
		g->n++;
	} else {
		if (x->len == XL_MAX)
			return -ENOBUFS;
		g = &x->seg[(x->head + x->len) % XL_MAX];
		*g = (struct xl_seg) { .lstart = x->lnext, .wstart = wseq, .n = 1 };
		x->len++;
	}
	x->lnext++;
	x->wnext = wseq + 1;
	return 0;
}

/* Forget segments wholly below engine sequence l (all durable). */
static void xl_trim(struct sec_xlate *x, uint64_t l)
{
	while (x->len > 1) {
		const struct xl_seg *g = &x->seg[x->head];

		if (g->lstart + g->n > l)
			break;
		x->wbase = g->wstart + g->n;
		x->head = (x->head + 1) % XL_MAX;
		x->len--;
	}
}

/* The engine's progress in the primary's stream sequence. */
/* The device writes that failed since repld started, over every engine. */
uint64_t records_io_errors(const struct secondary *s)
{
	struct apply_stats st = { 0 };

	if (s->apply)
		apply_get_stats(s->apply, &st);
	return s->io_errors + st.io_errors;
}

/* The engine goes (its failed writes stay counted). */
void records_engine_free(struct secondary *s)
{
	s->io_errors = records_io_errors(s);
	loop_del(s->env->loop, &s->ev_apply);
	apply_free(s->apply);
	s->apply = NULL;
}

void records_progress(struct secondary *s, struct apply_progress *p)
{
	struct apply_progress e;
	struct sec_xlate *x = s->xl;

	apply_progress(s->apply, &e);
	if (!x->started) {
		p->received = p->written = p->durable = x->wbase;
		return;
	}
	p->received = x->wnext;
	p->written = xl_wire(x, e.written);
	p->durable = xl_wire(x, e.durable);
	xl_trim(x, e.durable);
}

/*
 * Persist the resume point when the device made more records durable.  The
 * primary releases its ring up to what we acknowledge as durable, so we
 * acknowledge only what is also in the state file: a restart must be able
 * to resume from there.
 */
void records_persist(struct secondary *s, bool force)
{
	struct apply_progress p;
	struct apply_stats st;
	int r;

	if (!s->apply)
		return;
	records_progress(s, &p);
	if (p.durable <= s->state_durable)
		return;
	/*
	 * What FLUSH records made durable is saved at most every 100 ms; what
	 * a checkpoint did (by the timer, or by the primary's bound) at once:
	 * those come at most as often as that bound asks for.
	 */
	apply_get_stats(s->apply, &st);
	if (!force && st.checkpoints == s->saved_checkpoints &&
	    loop_now_ms() - s->last_state_write_ms < 100)
		return;
	r = copy_save(s, p.durable);
	if (r < 0)
		log_error_errno(r, "%s: saving the resume point", s->resource);
	else
		s->saved_checkpoints = st.checkpoints;
}

/* Acknowledge progress the primary has not heard of yet. */
void records_send_ack(struct secondary *s)
{
	struct conn *c = s->conn;
	struct apply_progress p;
	uint8_t *b;
	ssize_t n;

	if (!c || !c->up || !s->apply || c->closing || c->bm_pending)
		return;
	records_persist(s, false);
	records_progress(s, &p);
	if (p.durable > s->state_durable)
		p.durable = s->state_durable;
	if (p.received == c->acked.received && p.written == c->acked.written &&
	    p.durable == c->acked.durable)
		return;
	/*
	 * A sync peer's primary waits for written alone: an Ack that moves
	 * only received would cost a packet here and a wake-up there for
	 * nothing.  The writes in flight carry it when they complete
	 * (frames_apply_event), as DRBD's protocol C acks a write once.
	 */
	if (c->mode == MODE_SYNC && p.written == c->acked.written &&
	    p.durable == c->acked.durable && p.written < p.received)
		return;
	b = conn_out_space(c, 64);
	if (!b)
		return;		/* output full: a later Ack carries it */
	n = wire_encode_ack(b, 64, p.received, p.written, p.durable);
	if (n < 0)
		return;
	c->out_len += (size_t)n;
	c->acked = p;
	conn_flush(c);
	tracemark('S', "acksent", p.written);
}

int records_engine_stop(struct secondary *s)
{
	struct apply_progress p;
	int r = 0;

	if (!s->apply)
		return 0;
	r = apply_drain(s->apply, (int)s->env->cfg->drain_timeout_ms);
	records_progress(s, &p);
	if (r < 0)
		log_error_errno(r, "%s: writing the last records", s->resource);
	else if (p.durable != s->state_durable)
		copy_save(s, p.durable);
	records_engine_free(s);
	if (s->rt)
		resync_target_clear(s->rt);	/* their connection is gone */
	return r;
}

/* A write engine on s->dev_fd whose next record is engine sequence seq. */
int records_engine_new(struct secondary *s, uint64_t seq)
{
	struct apply_config cfg;
	int r;

	apply_config_init(&cfg);
	cfg.checkpoint_ms = s->env->cfg->checkpoint_ms;
	cfg.checkpoint_records = s->durable_every_records;
	cfg.checkpoint_bytes = s->durable_every_bytes;
	r = apply_new(s->dev_fd, s->dev_sectors, &cfg, &s->apply);
	if (r < 0)
		return log_error_errno(r, "%s: write engine", s->resource);
	r = apply_set_seq(s->apply, seq);
	if (r < 0)
		return log_error_errno(r, "%s: write engine", s->resource);
	s->ev_apply.fd = apply_fd(s->apply);	/* .fn: secondary_start() */
	r = loop_add(s->env->loop, &s->ev_apply, EPOLLIN);
	if (r < 0)
		return log_error_errno(r, "epoll add engine");
	return 0;
}

int records_engine_start(struct secondary *s)
{
	if (!s->xl)
		s->xl = malloc(sizeof(*s->xl));
	if (!s->rt && resync_target_new(&s->rt) < 0)
		s->rt = NULL;
	if (!s->xl || !s->rt)
		return log_error_errno(-ENOMEM, "%s: write engine", s->resource);
	s->xl->lnext = s->xl->wnext = s->xl->wbase = 0;
	s->xl->head = s->xl->len = 0;
	s->xl->started = false;
	s->xl->epoch = 0;
	s->xl->after_flush = false;
	resync_target_clear(s->rt);
	return records_engine_new(s, 0);
}

/* The wire reader asks where a payload goes: an aligned engine buffer. */
void *records_payload_buf(void *ctx, const Dmrepl__V1__Data *d)
{
	struct conn *c = ctx;
	struct secondary *s = c->s;

	if (c != s->conn || !s->apply)
		return NULL;
	/* payloads come with WRITE and RESYNC, nr_sectors * 512 decoded */
	if (!c->pending && apply_buf_get(s->apply, d->nr_sectors << 9, &c->pending) < 0)
		return NULL;
	if (d->encoding == DMREPL__V1__ENCODING__ENCODING_ZSTD)
		return s->zin;
	return c->pending->data;
}

/*
 * A zstd payload, read into s->zin: decoded into its engine buffer, where
 * it must fill exactly nr_sectors * 512 bytes.  Anything else is a
 * protocol error (the connection goes, the buffer back to the engine).
 */
static int records_unzstd(struct secondary *s, struct conn *c, struct wire_msg *msg)
{
	const Dmrepl__V1__Data *d = msg->frame->data;
	size_t want = (size_t)d->nr_sectors << 9, n;
	uint64_t t0;

	if (d->encoding != DMREPL__V1__ENCODING__ENCODING_ZSTD || !msg->payload)
		return 0;
	t0 = loop_now_ns();
	n = ZSTD_decompressDCtx(s->zdctx, c->pending->data, want, msg->payload, msg->payload_len);
	s->zst.ns += loop_now_ns() - t0;
	if (ZSTD_isError(n) || n != want) {
		char why[200];

		snprintf(why, sizeof(why), "zstd payload of record %" PRIu64 " at sector %" PRIu64
			 ": %s", d->seq, d->sector,
			 ZSTD_isError(n) ? ZSTD_getErrorName(n) : "wrong decoded size");
		apply_buf_put(s->apply, c->pending);
		c->pending = NULL;
		conn_send_error(c, DMREPL__V1__ERROR__CODE__CODE_PROTOCOL, why);
		return -EPROTO;
	}
	s->zst.in_bytes += want;
	s->zst.out_bytes += msg->payload_len;
	c->zseen = true;
	msg->payload = c->pending->data;
	msg->payload_len = (uint32_t)want;
	return 0;
}

/* Issue what the engine has queued, reap what completed. */
void records_apply(struct secondary *s)
{
	if (s->conn)
		s->conn->unissued = 0;
	if (s->apply && apply_run(s->apply) < 0 && s->conn)
		conn_send_error(s->conn, DMREPL__V1__ERROR__CODE__CODE_IO,
				"write to the device failed");
	tracemark('S', "reaped", -1);
}

/* A record's buffer back to the engine, and the connection refused. */
static void data_refuse(struct secondary *s, struct conn *c, struct apply_buf *buf,
			Dmrepl__V1__Error__Code code, const char *why)
{
	apply_buf_put(s->apply, buf);
	conn_send_error(c, code, why);
}

/*
 * The first record on this engine: the primary chose where the stream
 * resumes, and what is below counts as here (it resyncs what is not).
 * Anywhere else than where our Hello offered to go on, the records below
 * are not here: a hole, until the primary's resync fills it -- on disk
 * before any record past it is applied.  Returns the Error's reason, or
 * NULL.
 */
static const char *data_first(struct secondary *s, uint64_t seq)
{
	struct sec_xlate *x = s->xl;

	x->started = true;
	x->wbase = seq;
	if (seq != s->hello_resume && s->consistent && !s->vouched) {
		log_warning("%s: the stream goes on at record %" PRIu64
			    ", not where this copy stopped: a hole until the resync completes",
			    s->resource, seq);
		if (copy_set_consistent(s, false) < 0)
			return "cannot save the state";
	}
	if (s->state_durable < seq && copy_save(s, seq) < 0)
		return "cannot save the state";
	return NULL;
}

/*
 * A stream record (not a resync block) in the sequence translation.
 * Returns the Error's reason and *code, or NULL.
 */
static const char *data_record(struct secondary *s, const Dmrepl__V1__Data *d,
			       Dmrepl__V1__Error__Code *code)
{
	struct sec_xlate *x = s->xl;
	const char *why;

	*code = DMREPL__V1__ERROR__CODE__CODE_PROTOCOL;
	if (x->started && d->seq != x->wnext)
		return "record out of sequence";
	if (!x->started) {
		why = data_first(s, d->seq);
		if (why) {
			*code = DMREPL__V1__ERROR__CODE__CODE_IO;
			return why;
		}
	}
	if (xl_record(x, d->seq) < 0)
		return "too many resync blocks between records";
	x->lnext--;	/* taken once the engine has it */
	x->epoch = d->epoch;
	x->after_flush = d->op == DM_REPL_OP_FLUSH;
	if (d->op == DM_REPL_OP_GAP && s->consistent) {
		log_warning("%s: the primary's ring overflowed (GAP at record %" PRIu64
			    "): this copy has a hole", s->resource, d->seq);
		if (copy_set_consistent(s, false) < 0) {
			*code = DMREPL__V1__ERROR__CODE__CODE_IO;
			return "cannot save the state";
		}
	}
	return NULL;
}

static void records_data(struct secondary *s, struct conn *c, const struct wire_msg *msg)
{
	const Dmrepl__V1__Data *d = msg->frame->data;
	struct sec_xlate *x = s->xl;
	bool resync = d->op == WIRE_OP_RESYNC;
	struct apply_rec rec = {
		.seq = x->lnext,
		.sector = d->sector,
		.nr_sectors = d->nr_sectors,
		.op = resync ? DM_REPL_OP_WRITE : (uint16_t)d->op,
		.flags = (uint16_t)d->flags,
		.epoch = d->epoch,
	};
	struct apply_buf *buf = msg->payload ? c->pending : NULL;
	Dmrepl__V1__Error__Code code;
	const char *why;
	int r;

	c->pending = NULL;
	if (wire_check_extent(d, s->dev_sectors) < 0 &&
	    (d->sector > UINT64_MAX - d->nr_sectors ||
	     !records_device_holds(s, d->sector + d->nr_sectors))) {
		data_refuse(s, c, buf, DMREPL__V1__ERROR__CODE__CODE_PROTOCOL,
			    "record beyond the end of the device (the primary grew: extend this one)");
		return;
	}
	if (resync) {
		/* between the records, in their epoch */
		rec.epoch = x->epoch + (x->after_flush ? 1 : 0);
		x->epoch = rec.epoch;
		x->after_flush = false;
		s->rs_blocks++;
		s->rs_bytes += (uint64_t)d->nr_sectors << 9;
	} else {
		why = data_record(s, d, &code);
		if (why) {
			data_refuse(s, c, buf, code, why);
			return;
		}
	}
	/* the engine takes the buffer, whatever it answers */
	r = apply_submit(s->apply, &rec, buf);
	if (r < 0) {
		conn_send_error(c, DMREPL__V1__ERROR__CODE__CODE_PROTOCOL,
				r == -EINVAL ? "record out of sequence or malformed" :
				"cannot queue the record");
		return;
	}
	tracemark('S', "recv", d->seq);
	x->lnext++;
}

/*
 * The Data frame: decoded, applied, and handed to the disk every
 * CONN_ISSUE_BYTES, not only once the socket is drained; what that run of
 * the engine found written is acknowledged at once, as a sync primary
 * holds its writers until then (frames_read() may go on reading for up to
 * CONN_READ_MS).
 */
bool records_frame_data(struct secondary *s, struct conn *c, struct wire_msg *msg)
{
	if (records_unzstd(s, c, msg) < 0)
		return true;
	records_data(s, c, msg);
	if (s->conn == c && (c->unissued += msg->payload_len) >= CONN_ISSUE_BYTES) {
		records_apply(s);
		records_send_ack(s);
	}
	return true;
}

void records_queue_request(struct secondary *s, struct conn *c, struct resync_req *req)
{
	req->lpos = s->xl->lnext;
	if (resync_target_queue(s->rt, req) < 0)
		conn_send_error(c, DMREPL__V1__ERROR__CODE__CODE_PROTOCOL,
				"too many resync requests outstanding");
}
