// SPDX-License-Identifier: GPL-2.0-only
/*
 * The secondary: accept the configured primary, apply its records to the
 * local device with libaio (apply.c), acknowledge them.
 *
 * Resync blocks travel between the records and go through the same engine
 * (never reordered with an overlapping record), so the engine numbers
 * everything it is given with its own sequence; a small FIFO of segments
 * translates its progress back to the primary's stream sequence for the
 * Acks.  Hash requests and resync flushes wait until everything received
 * before them is written, then read / fdatasync synchronously.
 *
 * One primary at a time.  A new connection waits among a few candidates
 * (each gets peer-timeout-ms for its Hello) and replaces the current one
 * only with a Hello this node accepts: a stale connection (a primary that
 * lost power sends no FIN) goes, while bare connects, half-finished
 * handshakes and refused Hellos displace nothing.  The
 * resume point (stream id + every record below it durable) is kept in
 * <state-dir>/<resource>.state (state.c), written atomically when it
 * advances.  Resync requests wait in resync-target.c for their turn.
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
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>
#include <zstd.h>

#include "apply.h"
#include "ctl.h"
#include "dmdev.h"
#include "genstore.h"
#include "gens.h"
#include "log.h"
#include "loop.h"
#include "metadata.h"
#include "peer.h"
#include "resync-target.h"
#include "role.h"
#include "rsnap.h"
#include "sock.h"
#include "state.h"
#include "tls.h"
#include "wire.h"

#define CONN_OUT	(64 * 1024)
#define XL_MAX		65536U	/* segments of the sequence translation */
#define SEC_MAX_LISTEN	8
#define SEC_MAX_CANDS	4		/* connections waiting for their Hello */
#define SEC_REFUSED_LOG_MS 10000	/* refused connections: one log line per interval */
#define SEC_REFUSED_WHYS 8		/* and per reason, of this many recent reasons */

struct secondary;

struct conn {
	struct secondary *s;
	struct ev ev;			/* ev.fd: the socket */
	struct tls_io io;		/* io.fd: the same socket, and its TLS */
	bool up;			/* handshake done */
	bool paused;			/* not reading: the engine is out of buffers */
	bool want_out;
	bool closing;			/* Error queued: close once it is sent */
	bool cand;			/* a candidate: no Hello accepted yet */
	bool more;			/* conn_read() stopped with more to read */
	struct wire_reader rd;
	char node[CONFIG_NAME_MAX + 1];
	char addr[64];
	struct sockaddr_storage sa;	/* where it connects from */
	enum peer_mode mode;
	uint64_t last_rx_ms, last_tx_ms, since_ms;
	uint8_t out[CONN_OUT];
	size_t out_len, out_off;
	struct apply_progress acked;	/* what we last sent in an Ack */
	bool first_data;
	struct apply_buf *pending;	/* buffer of the payload being read */
	size_t unissued;		/* payload bytes read since the last issue */
	bool zseen;			/* a zstd payload came on it */
	/* this node's own bitmap after the Hello, sent as the socket drains */
	bool bm_pending;		/* its last piece not yet queued */
	uint8_t *bm;			/* NULL: no bitmap (an empty last piece) */
	uint64_t bm_bytes, bm_off, bm_regions;
	uint32_t bm_shift;
};

/*
 * conn_read() hands writes to the disk every this many payload bytes,
 * not only once the socket is drained: the disk writes the first records
 * while the rest is still being read.
 */
#define CONN_ISSUE_BYTES	(256U << 10)
/*
 * ... and returns to the loop after this long even when the socket is
 * never empty (a receiver that decrypts no faster than the primary
 * sends): completions are handled and acks go out in between.
 */
#define CONN_READ_MS		20U

/* ---- state ------------------------------------------------------------------ */

struct xl_seg {
	uint64_t lstart, wstart, n;	/* engine [lstart, +n) = stream [wstart, +n) */
};

struct sec_xlate {
	uint64_t lnext;			/* next engine sequence */
	uint64_t wnext;			/* next stream sequence expected */
	uint64_t wbase;			/* stream progress below every segment */
	bool started;			/* a record arrived on this engine */
	uint64_t epoch;			/* of the last record, for resync blocks */
	bool after_flush;
	unsigned int head, len;
	struct xl_seg seg[XL_MAX];
};

/* A listening socket. */
struct sec_listen {
	struct ev ev;
	struct secondary *s;
};

struct secondary {
	struct role role;
	struct role_env *env;
	char resource[CONFIG_NAME_MAX + 1];
	int dev_fd;
	uint64_t dev_sectors;
	unsigned int nr_listen;
	struct sec_listen listen[SEC_MAX_LISTEN];
	struct conn *conn;		/* the primary, when connected */
	struct conn *cands[SEC_MAX_CANDS];	/* new connections before their Hello */
	struct sec_refusal {
		char why[128];
		uint64_t log_ms;	/* when it was last logged */
		uint64_t quiet;		/* refusals for it not logged since */
	} refusals[SEC_REFUSED_WHYS];
	uint64_t refused;		/* connections refused before their Hello */
	struct apply *apply;
	struct ev ev_apply;
	struct genstore gs;
	struct gens gens;
	uint64_t stream_id;		/* of the records applied */
	uint64_t state_durable;		/* persisted resume point */
	uint64_t hello_resume;		/* where the stream may go on without a
					 * hole (UINT64_MAX: nowhere) */
	bool vouched;			/* the primary made this copy consistent at
					 * its stream position (a join, a resync's end) */
	uint64_t last_state_write_ms;
	uint64_t saved_checkpoints;	/* the engine's checkpoints at that write */
	/* the primary's Hello: an fdatasync at the latest every so many
	 * records or bytes, as its ring holds them until durable (0: none) */
	uint64_t durable_every_records, durable_every_bytes;
	char primary_node[CONFIG_NAME_MAX + 1];
	uint64_t primary_connects;
	bool consistent;		/* persisted: no resync pending */
	bool discard_my_data;		/* persisted: give up this copy's changes */
	struct sec_xlate *xl;		/* engine sequence -> stream sequence */
	struct resync_target *rt;	/* resync requests waiting for writes */
	uint64_t rs_blocks, rs_bytes, hash_requests;
	/* zstd payloads (Hello FEATURE_ZSTD): read into zin, decompressed
	 * into the engine's buffer; zst.in_bytes counts them decompressed */
	uint8_t *zin;
	ZSTD_DCtx *zdctx;
	struct peer_zstats zst;
};

/* ---- engine sequence <-> stream sequence ------------------------------------- */

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
static void sec_progress(struct secondary *s, struct apply_progress *p)
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

/* ---- resume state -------------------------------------------------------- */

/* Save the resume point (durable) with the flags as they are now. */
static int sec_state_save(struct secondary *s, uint64_t durable)
{
	struct state st = {
		.stream_id = s->stream_id,
		.durable = durable,
		.consistent = s->consistent,
		.discard_my_data = s->discard_my_data,
	};
	const struct config *c = s->env->cfg;
	int r = state_save(c->state_dir, s->resource, &st);

	if (r < 0)
		return r;
	s->state_durable = durable;
	s->last_state_write_ms = loop_now_ms();
	return 0;
}

static void sec_state_load(struct secondary *s)
{
	const struct config *c = s->env->cfg;
	char path[PATH_MAX];
	struct state st;
	int r;

	s->consistent = false;	/* never held a full copy */
	r = state_load(c->state_dir, s->resource, &st);
	if (r == -EBADMSG) {
		state_path(c->state_dir, s->resource, "state", path, sizeof(path));
		log_warning("%s: %s unreadable: starting without a resume point", s->resource,
			    path);
	}
	if (r < 0)
		return;
	s->stream_id = st.stream_id;
	s->state_durable = st.durable;
	s->consistent = st.consistent;
	s->discard_my_data = st.discard_my_data;
}

/* ---- connection output ------------------------------------------------------- */

static void conn_arm(struct conn *c)
{
	uint32_t ev = EPOLLRDHUP;

	if (!c->paused)
		ev |= EPOLLIN;
	if (c->want_out)
		ev |= EPOLLOUT;
	loop_mod(c->s->env->loop, &c->ev, ev);
}

/*
 * A connection refused before its Hello: logged with its address once per
 * interval and kind of reason (a loop of connects must not flood the log),
 * counted always.  Failed TLS handshakes are one kind, whatever OpenSSL
 * says went wrong.
 */
static void sec_log_refused(struct secondary *s, const char *node, const char *addr,
			    const char *why)
{
	struct sec_refusal *e = NULL;
	uint64_t now = loop_now_ms();
	const char *colon;
	unsigned int i;
	size_t kind;

	/* one kind of refusal: what comes before a colon ("TLS handshake: ...") */
	colon = strchr(why, ':');
	kind = colon ? (size_t)(colon - why) : strlen(why);
	if (kind > sizeof(e->why) - 1)
		kind = sizeof(e->why) - 1;
	s->refused++;
	for (i = 0; i < SEC_REFUSED_WHYS && !e; i++)
		if (!strncmp(why, s->refusals[i].why, kind) &&
		    (s->refusals[i].why[kind] == ':' || s->refusals[i].why[kind] == '\0'))
			e = &s->refusals[i];
	if (e && now - e->log_ms < SEC_REFUSED_LOG_MS) {
		e->quiet++;
		return;
	}
	if (!e) {
		/* a new reason takes the place of the one logged longest ago */
		e = &s->refusals[0];
		for (i = 1; i < SEC_REFUSED_WHYS; i++)
			if (s->refusals[i].log_ms < e->log_ms)
				e = &s->refusals[i];
		snprintf(e->why, sizeof(e->why), "%s", why);
		e->quiet = 0;
	}
	if (!node[0])
		node = "?";
	if (e->quiet)
		log_warning("%s: refusing primary %s (%s): %s (and %" PRIu64 " more times since it was last logged)",
			    s->resource, node, addr, why, e->quiet);
	else
		log_warning("%s: refusing primary %s (%s): %s", s->resource, node, addr, why);
	e->log_ms = now;
	e->quiet = 0;
}

/* c is no longer among the candidates (it goes, or becomes the primary's). */
static void sec_cand_unlink(struct secondary *s, const struct conn *c)
{
	for (unsigned int i = 0; i < SEC_MAX_CANDS; i++)
		if (s->cands[i] == c)
			s->cands[i] = NULL;
}

/* Close connection c: the primary's or a candidate. */
static void conn_drop(struct secondary *s, struct conn *c, const char *why)
{
	if (!c)
		return;
	if (why && c->cand)
		sec_log_refused(s, c->node, c->addr, why);
	else if (why)
		log_warning("%s: primary %s (%s): connection closed: %s", s->resource,
			    c->node[0] ? c->node : "?", c->addr, why);
	if (s->conn == c)
		s->conn = NULL;
	sec_cand_unlink(s, c);
	loop_del(s->env->loop, &c->ev);
	close(c->ev.fd);
	tls_io_free(&c->io);
	wire_reader_free(&c->rd);
	if (c->pending && s->apply)
		apply_buf_put(s->apply, c->pending);
	free(c->bm);
	free(c);
}

static void conn_close(struct secondary *s, const char *why)
{
	conn_drop(s, s->conn, why);
}

static void conn_flush(struct conn *c)
{
	ssize_t n;

	while (c->out_off < c->out_len) {
		n = tls_io_write(&c->io, c->out + c->out_off, c->out_len - c->out_off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN) {
				if (!c->want_out) {
					c->want_out = true;
					conn_arm(c);
				}
				return;
			}
			conn_drop(c->s, c, tls_io_error(&c->io, errno));
			return;
		}
		c->out_off += (size_t)n;
		c->last_tx_ms = loop_now_ms();
	}
	c->out_off = c->out_len = 0;
	if (c->closing) {
		conn_drop(c->s, c, NULL);
		return;
	}
	if (c->want_out) {
		c->want_out = false;
		conn_arm(c);
	}
}

/* Make room: slide what is unsent to the front. */
static uint8_t *conn_out_space(struct conn *c, size_t need)
{
	if (c->out_off) {
		memmove(c->out, c->out + c->out_off, c->out_len - c->out_off);
		c->out_len -= c->out_off;
		c->out_off = 0;
	}
	return CONN_OUT - c->out_len >= need ? c->out + c->out_len : NULL;
}

static void conn_send_error(struct conn *c, Dmrepl__V1__Error__Code code, const char *reason)
{
	uint8_t *b = conn_out_space(c, 512);
	ssize_t n;

	if (c->cand)
		sec_log_refused(c->s, c->node, c->addr, reason);
	else
		log_warning("%s: refusing primary %s (%s): %s", c->s->resource,
			    c->node[0] ? c->node : "?", c->addr, reason);
	if (b) {
		n = wire_encode_error(b, 512, code, reason);
		if (n > 0)
			c->out_len += (size_t)n;
	}
	c->closing = true;
	c->paused = true;
	conn_flush(c);
}

/*
 * Persist the resume point when the device made more records durable.  The
 * primary releases its ring up to what we acknowledge as durable, so we
 * acknowledge only what is also in the state file: a restart must be able
 * to resume from there.
 */
static void secondary_persist(struct secondary *s, bool force)
{
	struct apply_progress p;
	struct apply_stats st;
	int r;

	if (!s->apply)
		return;
	sec_progress(s, &p);
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
	r = sec_state_save(s, p.durable);
	if (r < 0)
		log_error_errno(r, "%s: saving the resume point", s->resource);
	else
		s->saved_checkpoints = st.checkpoints;
}

/* Acknowledge progress the primary has not heard of yet. */
static void conn_send_ack(struct secondary *s)
{
	struct conn *c = s->conn;
	struct apply_progress p;
	uint8_t *b;
	ssize_t n;

	if (!c || !c->up || !s->apply || c->closing || c->bm_pending)
		return;
	secondary_persist(s, false);
	sec_progress(s, &p);
	if (p.durable > s->state_durable)
		p.durable = s->state_durable;
	if (p.received == c->acked.received && p.written == c->acked.written &&
	    p.durable == c->acked.durable)
		return;
	/*
	 * A sync peer's primary waits for written alone: an Ack that moves
	 * only received would cost a packet here and a wake-up there for
	 * nothing.  The writes in flight carry it when they complete
	 * (secondary_apply_event), as DRBD's protocol C acks a write once.
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
}

/* ---- the engine ----------------------------------------------------------------- */

static void secondary_apply_event(struct ev *ev, uint32_t events);

static int secondary_engine_stop(struct secondary *s)
{
	struct apply_progress p;
	int r = 0;

	if (!s->apply)
		return 0;
	r = apply_drain(s->apply, (int)s->env->cfg->drain_timeout_ms);
	sec_progress(s, &p);
	if (r < 0)
		log_error_errno(r, "%s: writing the last records", s->resource);
	else if (p.durable != s->state_durable)
		sec_state_save(s, p.durable);
	loop_del(s->env->loop, &s->ev_apply);
	apply_free(s->apply);
	s->apply = NULL;
	if (s->rt)
		resync_target_clear(s->rt);	/* their connection is gone */
	return r;
}

/* A write engine on s->dev_fd whose next record is engine sequence seq. */
static int engine_new(struct secondary *s, uint64_t seq)
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
	s->ev_apply = (struct ev) { .fd = apply_fd(s->apply), .fn = secondary_apply_event };
	r = loop_add(s->env->loop, &s->ev_apply, EPOLLIN);
	if (r < 0)
		return log_error_errno(r, "epoll add engine");
	return 0;
}

static int secondary_engine_start(struct secondary *s)
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
	return engine_new(s, 0);
}

/* ---- incoming frames ------------------------------------------------------------------ */

/* The wire reader asks where a payload goes: an aligned engine buffer. */
static void *conn_payload_buf(void *ctx, const Dmrepl__V1__Data *d)
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
static int conn_unzstd(struct secondary *s, struct conn *c, struct wire_msg *msg)
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

/*
 * This node's own metadata bitmap (it was a primary: regions it wrote that
 * the peers may lack).  Returns the number of regions set; *ret gets the
 * md_info with the bitmap (free ret->bitmap) when not NULL.  The bits
 * are counted in the bitmap (the superblock has no count): it is read
 * either way.
 */
static uint64_t sec_own_bitmap(struct secondary *s, struct md_info *ret)
{
	struct md_info mi;
	char err[256];

	if (!strcmp(s->env->cfg->meta_device, "-") ||
	    md_read(s->env->cfg->meta_device, true, &mi, err, sizeof(err)) < 0)
		return 0;
	if (ret)
		*ret = mi;
	else
		free(mi.bitmap);
	return mi.set_regions;
}

/* Our own bitmap, read for the Hello's count and sent after it in pieces
 * (conn_send_own_bitmap()). */
static void conn_own_bitmap_begin(struct secondary *s, struct conn *c)
{
	struct md_info mi = { 0 };

	c->bm_regions = sec_own_bitmap(s, &mi);
	c->bm = mi.bitmap;
	c->bm_bytes = mi.bitmap ? (mi.nr_regions + 7) / 8 : 0;
	c->bm_off = 0;
	c->bm_shift = mi.region_shift ? mi.region_shift : 16;
	c->bm_pending = true;
}

static bool bytes_zero(const uint8_t *p, size_t n)
{
	size_t i;

	for (i = 0; i < n && !p[i]; i++)
		;
	return i == n;
}

/*
 * The next piece of our own bitmap into b: pieces without a bit set are
 * skipped, the last one always goes, and ends it.
 */
static ssize_t conn_own_bitmap_piece(struct secondary *s, struct conn *c, uint8_t *b,
				     size_t len)
{
	uint64_t off = c->bm_off, bytes = c->bm_bytes;
	size_t n;
	ssize_t k;

	for (;;) {
		n = bytes - off > WIRE_MAX_BITMAP ? WIRE_MAX_BITMAP : (size_t)(bytes - off);
		if (off + n >= bytes || !bytes_zero(c->bm + off, n))
			break;
		off += n;
	}
	k = wire_encode_peer_bitmap(b, len, off * 8, c->bm_shift, c->bm ? c->bm + off : NULL, n,
				    off + n >= bytes);
	if (k < 0)
		return k;
	c->bm_off = off + n;
	if (c->bm_off >= bytes) {
		c->bm_pending = false;
		free(c->bm);
		c->bm = NULL;
		if (c->bm_regions)
			log_info("%s: sent %" PRIu64 " regions of this node's own bitmap to the primary",
				 s->resource, c->bm_regions);
	}
	return k;
}

/*
 * Queue and send what the socket takes of our own bitmap; EPOLLOUT brings
 * us back for the rest.  Nothing else is sent before its last piece.
 * May close the connection: c is not to be used after it returns.
 */
static void conn_send_own_bitmap(struct secondary *s, struct conn *c)
{
	uint8_t *b;
	ssize_t k;

	while (c->bm_pending && !c->closing) {
		b = conn_out_space(c, WIRE_MAX_BITMAP + 64);
		if (!b) {
			conn_flush(c);
			if (s->conn != c || c->want_out)
				return;		/* closed, or the socket is full */
			continue;
		}
		k = conn_own_bitmap_piece(s, c, b, WIRE_MAX_BITMAP + 64);
		if (k < 0) {
			conn_close(s, "cannot encode this node's bitmap");
			return;
		}
		c->out_len += (size_t)k;
	}
	conn_flush(c);
}

/*
 * Why cfg does not let node, connecting from sa, be our primary; NULL
 * when it does.  At the Hello and again when a reload changes the peers.
 */
static const char *sec_primary_refusal(const struct config *cfg, const char *node,
				       const struct sockaddr_storage *sa)
{
	const struct config_peer *cp = config_find_peer(cfg, node);

	if (!cp)
		return "node or resource not configured here";
	if (cp->has_address && !sock_same_host(sa, &cp->address.sa))
		return "this node may not connect from that address";
	return NULL;
}

/* Why a Hello on c is refused (and the Error code), NULL if it is accepted. */
/*
 * Does the device here reach sector @end?  A replica extended while repld
 * runs (the primary grew, dm-repl(7) RESIZE) is measured again before the
 * answer is no.
 */
static bool sec_device_holds(struct secondary *s, uint64_t end)
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

static const char *sec_hello_refusal(struct secondary *s, const struct conn *c,
				     const Dmrepl__V1__Hello *h, Dmrepl__V1__Error__Code *code)
{
	const char *why;

	*code = DMREPL__V1__ERROR__CODE__CODE_UNKNOWN_PEER;
	if (h->protocol_version != WIRE_PROTOCOL_VERSION) {
		*code = DMREPL__V1__ERROR__CODE__CODE_VERSION;
		return "protocol version not supported (this node speaks 1)";
	}
	if (h->role != DMREPL__V1__ROLE__ROLE_PRIMARY || strcmp(h->resource, s->resource))
		return "node or resource not configured here";
	why = sec_primary_refusal(s->env->cfg, h->node, &c->sa);
	if (why)
		return why;
	if (!tls_io_names(&c->io, h->node))
		return "its TLS certificate does not name the node its Hello claims";
	if (!sec_device_holds(s, h->device_sectors)) {
		*code = DMREPL__V1__ERROR__CODE__CODE_SIZE;
		return "the device here is smaller than the primary's (extend it to the primary's size)";
	}
	return NULL;
}

static void conn_hello(struct secondary *s, struct conn *c, const Dmrepl__V1__Hello *h)
{
	Dmrepl__V1__Error__Code code;
	const char *why;
	uint8_t *b;
	ssize_t n;
	int r;

	snprintf(c->node, sizeof(c->node), "%s", h->node);
	why = sec_hello_refusal(s, c, h, &code);
	if (why) {
		conn_send_error(c, code, why);
		return;
	}
	/* finish what the previous connection left in the engine */
	r = secondary_engine_stop(s);
	if (r < 0) {
		conn_send_error(c, DMREPL__V1__ERROR__CODE__CODE_IO, "cannot write the device");
		return;
	}
	s->durable_every_records = h->durable_every_records;
	s->durable_every_bytes = h->durable_every_bytes;
	r = secondary_engine_start(s);
	if (r < 0) {
		conn_send_error(c, DMREPL__V1__ERROR__CODE__CODE_IO, "cannot start the write engine");
		return;
	}
	c->mode = (enum peer_mode)h->mode;
	conn_own_bitmap_begin(s, c);
	b = conn_out_space(c, 256);
	{
		Dmrepl__V1__Hello hello = DMREPL__V1__HELLO__INIT;

		hello.protocol_version = WIRE_PROTOCOL_VERSION;
		hello.node = s->env->cfg->node;
		hello.resource = s->resource;
		hello.role = DMREPL__V1__ROLE__ROLE_SECONDARY;
		hello.device_sectors = s->dev_sectors;
		hello.stream_id = s->stream_id;
		hello.resume_seq = s->stream_id ? s->state_durable : 0;
		hello.consistent = s->consistent;
		hello.gen_current = s->gens.current;
		hello.gen_bitmap = s->gens.bitmap;
		hello.gen_history = s->gens.history;
		hello.gen_since = s->gens.since;
		hello.dirty_regions = c->bm_regions;
		hello.discard_my_data = s->discard_my_data;
		hello.features = WIRE_FEATURE_ZSTD;
		n = b ? wire_encode_hello(b, 256, &hello) : -ENOSPC;
	}
	if (n < 0) {
		conn_close(s, "cannot encode Hello");
		return;
	}
	c->out_len += (size_t)n;
	if (s->stream_id != h->stream_id && s->stream_id)
		log_warning("%s: primary %s streams %016" PRIx64 ", this copy holds %016" PRIx64
			    ": the primary decides whether it is consistent", s->resource,
			    h->node, h->stream_id, s->stream_id);
	/* our Hello offered to go on from our resume point in that stream */
	s->hello_resume = s->stream_id && s->stream_id == h->stream_id ? s->state_durable :
			  UINT64_MAX;
	s->vouched = false;
	if (s->stream_id != h->stream_id)
		s->state_durable = 0;	/* a new stream: nothing of it is here yet */
	s->stream_id = h->stream_id;
	snprintf(s->primary_node, sizeof(s->primary_node), "%s", h->node);
	c->up = true;
	c->first_data = true;
	s->primary_connects++;
	log_info("%s: primary %s (%s) connected, %s mode", s->resource, h->node, c->addr,
		 config_mode_name(c->mode));
	conn_send_own_bitmap(s, c);
}

/* The copy is no longer (or again) consistent: on disk before we go on. */
static int sec_set_consistent(struct secondary *s, bool consistent)
{
	int r;

	if (s->consistent == consistent)
		return 0;
	s->consistent = consistent;
	r = sec_state_save(s, s->state_durable);
	if (r < 0)
		return log_error_errno(r, "%s: saving the consistency flag", s->resource);
	log_info("%s: this copy is %s", s->resource,
		 consistent ? "consistent (UpToDate)" : "Inconsistent until a resync completes");
	return 0;
}

static void conn_data(struct secondary *s, struct conn *c, const struct wire_msg *msg)
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
	int r;

	struct apply_buf *buf = msg->payload ? c->pending : NULL;

	c->pending = NULL;
	if (wire_check_extent(d, s->dev_sectors) < 0 &&
	    (d->sector > UINT64_MAX - d->nr_sectors ||
	     !sec_device_holds(s, d->sector + d->nr_sectors))) {
		apply_buf_put(s->apply, buf);
		conn_send_error(c, DMREPL__V1__ERROR__CODE__CODE_PROTOCOL,
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
		if (x->started && d->seq != x->wnext) {
			apply_buf_put(s->apply, buf);
			conn_send_error(c, DMREPL__V1__ERROR__CODE__CODE_PROTOCOL,
					"record out of sequence");
			return;
		}
		if (!x->started) {
			/* the primary chose where the stream resumes: what is
			 * below counts as here (it resyncs what is not) */
			x->started = true;
			x->wbase = d->seq;
			/*
			 * Anywhere else than where our Hello offered to go on,
			 * the records below are not here: a hole, until the
			 * primary's resync fills it -- on disk before any
			 * record past it is applied.
			 */
			if (d->seq != s->hello_resume && s->consistent && !s->vouched) {
				log_warning("%s: the stream goes on at record %" PRIu64
					    ", not where this copy stopped: a hole until the resync completes",
					    s->resource, d->seq);
				if (sec_set_consistent(s, false) < 0) {
					apply_buf_put(s->apply, buf);
					conn_send_error(c, DMREPL__V1__ERROR__CODE__CODE_IO,
							"cannot save the state");
					return;
				}
			}
			if (s->state_durable < d->seq && sec_state_save(s, d->seq) < 0) {
				apply_buf_put(s->apply, buf);
				conn_send_error(c, DMREPL__V1__ERROR__CODE__CODE_IO,
						"cannot save the state");
				return;
			}
		}
		if (xl_record(x, d->seq) < 0) {
			apply_buf_put(s->apply, buf);
			conn_send_error(c, DMREPL__V1__ERROR__CODE__CODE_PROTOCOL,
					"too many resync blocks between records");
			return;
		}
		x->lnext--;	/* taken below */
		x->epoch = d->epoch;
		x->after_flush = d->op == DM_REPL_OP_FLUSH;
		if (d->op == DM_REPL_OP_GAP && s->consistent) {
			log_warning("%s: the primary's ring overflowed (GAP at record %" PRIu64
				    "): this copy has a hole", s->resource, d->seq);
			if (sec_set_consistent(s, false) < 0) {
				apply_buf_put(s->apply, buf);
				conn_send_error(c, DMREPL__V1__ERROR__CODE__CODE_IO,
						"cannot save the state");
				return;
			}
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
	x->lnext++;
}

/*
 * Switch the write engine to another path to the same data (the snapshot
 * origin and back): everything received is written and flushed first, and
 * the new engine carries on with the same sequence numbers.
 */
static int sec_reopen(struct secondary *s, const char *path)
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
	loop_del(s->env->loop, &s->ev_apply);
	apply_free(s->apply);
	s->apply = NULL;
	close(s->dev_fd);
	s->dev_fd = fd;
	return engine_new(s, s->xl->lnext);
}

/*
 * The primary says this copy is complete in its generation gen: adopt it,
 * forget our own bitmap (the primary resynced those regions) and any
 * request to discard our data.
 */
static int sec_adopt(struct secondary *s, uint64_t gen)
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
	if (strcmp(s->env->cfg->meta_device, "-") && (adopted || sec_own_bitmap(s, NULL))) {
		r = md_update(s->env->cfg->meta_device, NULL, true, DM_REPL_MD_ROLE_SECONDARY,
			      s->primary_node, err, sizeof(err));
		if (r < 0)
			return log_error_errno(r, "%s: %s", s->resource, err);
	}
	s->discard_my_data = false;
	/* in stream order: consistent with every record before this point */
	s->vouched = true;
	if (rsnap_active(s->env->cfg)) {
		r = sec_reopen(s, s->env->cfg->device);
		if (r < 0 || (r = rsnap_drop(s->env->cfg)) < 0)
			return r;
	}
	if (!s->consistent)
		return sec_set_consistent(s, true);
	return sec_state_save(s, s->state_durable);
}

/* ---- resync requests ----------------------------------------------------------- */

static void sec_resync_queue(struct secondary *s, struct conn *c, struct resync_req *req)
{
	req->lpos = s->xl->lnext;
	if (resync_target_queue(s->rt, req) < 0)
		conn_send_error(c, DMREPL__V1__ERROR__CODE__CODE_PROTOCOL,
				"too many resync requests outstanding");
}

/* Answer the requests whose turn has come (everything before them written). */
static void sec_resync_run(struct secondary *s)
{
	struct conn *c = s->conn;
	const struct resync_req *q;
	struct apply_progress e;
	uint64_t hash[WIRE_MAX_HASHES];
	uint8_t *b;
	ssize_t n;
	int r;

	if (!s->rt || !s->apply || !c || !c->up || c->closing || c->bm_pending)
		return;
	for (;;) {
		apply_progress(s->apply, &e);
		q = resync_target_next(s->rt, e.written);
		if (!q)
			return;
		b = conn_out_space(c, 2400);
		if (!b)
			return;		/* after the output drained */
		if (q->flush) {
			if (fdatasync(s->dev_fd) < 0) {
				log_error_errno(-errno, "%s: flushing %s", s->resource,
						s->env->cfg->device);
				conn_send_error(c, DMREPL__V1__ERROR__CODE__CODE_IO,
						"cannot flush the device");
				return;
			}
			if (q->done && sec_adopt(s, q->gen) < 0) {
				conn_send_error(c, DMREPL__V1__ERROR__CODE__CODE_IO,
						"cannot save the state");
				return;
			}
			n = wire_encode_resync_flushed(b, 2400, q->id);
		} else {
			r = resync_target_hash(s->rt, s->dev_fd, q, hash);
			if (r == -ENOMEM) {
				conn_send_error(c, DMREPL__V1__ERROR__CODE__CODE_IO, "out of memory");
				return;
			}
			if (r < 0) {
				log_error_errno(r, "%s: reading %s for a hash", s->resource,
						s->env->cfg->device);
				conn_send_error(c, DMREPL__V1__ERROR__CODE__CODE_IO,
						"cannot read the device");
				return;
			}
			n = wire_encode_hash_reply(b, 2400, q->id, hash, (size_t)r);
			s->hash_requests++;
		}
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

/* Issue what the engine has queued, reap what completed. */
static void conn_apply(struct secondary *s)
{
	if (s->conn)
		s->conn->unissued = 0;
	if (s->apply && apply_run(s->apply) < 0 && s->conn)
		conn_send_error(s->conn, DMREPL__V1__ERROR__CODE__CODE_IO,
				"write to the device failed");
}

static ssize_t conn_readv(void *ctx, const struct iovec *iov, int iovcnt)
{
	return tls_io_readv(ctx, iov, iovcnt);
}

static void conn_read(struct secondary *s)
{
	struct conn *c = s->conn;
	uint64_t t0 = loop_now_ms();
	struct wire_msg msg;
	bool filled = false;
	int r;

	c->more = false;
	while (s->conn == c && !c->paused) {
		if (loop_now_ms() - t0 >= CONN_READ_MS) {
			c->more = true;		/* before_sleep() comes back */
			break;
		}
		if (s->apply && apply_full(s->apply)) {
			/* queued records use memory too: let writes complete */
			c->paused = true;
			conn_arm(c);
			break;
		}
		r = wire_reader_next(&c->rd, &msg);
		if (r == -ENOBUFS && !s->apply) {
			conn_send_error(c, DMREPL__V1__ERROR__CODE__CODE_PROTOCOL,
					"Data before Hello");
			return;
		}
		if (r == -ENOBUFS) {
			/* out of buffers: stop reading until writes complete, and
			 * issue what was read, which holds them */
			c->paused = true;
			conn_arm(c);
			break;
		}
		if (r < 0) {
			char why[200];

			snprintf(why, sizeof(why), "protocol error: %s", wire_reader_error(&c->rd));
			conn_send_error(c, DMREPL__V1__ERROR__CODE__CODE_PROTOCOL, why);
			return;
		}
		if (r == 0) {
			/* the socket ran dry on the last read: epoll says when not */
			if (filled && wire_reader_drained(&c->rd))
				break;
			r = wire_reader_fill_fn(&c->rd, conn_readv, &c->io);
			if (r == -EAGAIN)
				break;
			filled = true;
			if (r == 0) {
				conn_close(s, "closed by the primary");
				return;
			}
			if (r < 0) {
				conn_close(s, tls_io_error(&c->io, -r));
				return;
			}
			c->last_rx_ms = loop_now_ms();
			continue;
		}
		switch (msg.frame->msg_case) {
		case DMREPL__V1__FRAME__MSG_HELLO:
			if (c->up)
				conn_send_error(c, DMREPL__V1__ERROR__CODE__CODE_PROTOCOL,
						"second Hello");
			else
				conn_hello(s, c, msg.frame->hello);
			break;
		case DMREPL__V1__FRAME__MSG_DATA:
			if (!c->up || !s->apply)
				conn_send_error(c, DMREPL__V1__ERROR__CODE__CODE_PROTOCOL,
						"Data before Hello");
			else if (conn_unzstd(s, c, &msg) == 0)
				conn_data(s, c, &msg);
			else
				break;
			if (s->conn == c && (c->unissued += msg.payload_len) >= CONN_ISSUE_BYTES)
				conn_apply(s);
			break;
		case DMREPL__V1__FRAME__MSG_SET_MODE:
			if (c->up) {
				c->mode = (enum peer_mode)msg.frame->set_mode->mode;
				log_info("%s: primary switched this peer to %s mode",
					 s->resource, config_mode_name(c->mode));
			}
			break;
		case DMREPL__V1__FRAME__MSG_KEEPALIVE:
			break;
		case DMREPL__V1__FRAME__MSG_RESYNC_BEGIN:
			if (!c->up || !s->apply) {
				conn_send_error(c, DMREPL__V1__ERROR__CODE__CODE_PROTOCOL,
						"ResyncBegin before Hello");
				break;
			}
			log_info("%s: %s resync from %s begins", s->resource,
				 msg.frame->resync_begin->full ? "full" : "bitmap", c->node);
			if (s->consistent && s->env->cfg->resync_snapshot[0] && !rsnap_active(s->env->cfg)) {
				char orig[PATH_MAX];

				/* keep the consistent image until the resync is done */
				if (rsnap_create(s->env->cfg) < 0 ||
				    rsnap_origin_path(s->env->cfg, orig, sizeof(orig)) < 0 ||
				    sec_reopen(s, orig) < 0) {
					conn_send_error(c, DMREPL__V1__ERROR__CODE__CODE_IO,
							"cannot take the resync snapshot");
					break;
				}
			}
			if (sec_set_consistent(s, false) < 0)
				conn_send_error(c, DMREPL__V1__ERROR__CODE__CODE_IO,
						"cannot save the state");
			break;
		case DMREPL__V1__FRAME__MSG_HASH_REQUEST:
		case DMREPL__V1__FRAME__MSG_RESYNC_FLUSH:
			if (!c->up || !s->apply) {
				conn_send_error(c, DMREPL__V1__ERROR__CODE__CODE_PROTOCOL,
						"resync request before Hello");
				break;
			}
			if (msg.frame->msg_case == DMREPL__V1__FRAME__MSG_HASH_REQUEST) {
				const Dmrepl__V1__HashRequest *h = msg.frame->hash_request;

				if ((h->sector > s->dev_sectors ||
				     h->nr_sectors > s->dev_sectors - h->sector) &&
				    (h->sector > UINT64_MAX - h->nr_sectors ||
				     !sec_device_holds(s, h->sector + h->nr_sectors))) {
					conn_send_error(c, DMREPL__V1__ERROR__CODE__CODE_PROTOCOL,
							"HashRequest beyond the end of the device");
					break;
				}
				sec_resync_queue(s, c, &(struct resync_req) {
					.id = h->id, .sector = h->sector,
					.nr_sectors = h->nr_sectors,
					.block_sectors = h->block_sectors,
				});
			} else {
				sec_resync_queue(s, c, &(struct resync_req) {
					.flush = true, .id = msg.frame->resync_flush->id,
					.done = msg.frame->resync_flush->done,
					.gen = msg.frame->resync_flush->gen,
				});
			}
			break;
		case DMREPL__V1__FRAME__MSG_ERROR:
			log_warning("%s: primary reported error %d: %s", s->resource,
				    msg.frame->error->code, msg.frame->error->reason);
			conn_close(s, NULL);
			return;
		default:
			conn_send_error(c, DMREPL__V1__ERROR__CODE__CODE_PROTOCOL,
					"unexpected frame from a primary");
			break;
		}
	}
	conn_apply(s);
	sec_resync_run(s);
	conn_send_ack(s);
}

static struct secondary *secondary_of(struct role *r)
{
	return container_of(r, struct secondary, role);
}

static void secondary_conn_event(struct ev *ev, uint32_t events)
{
	struct conn *c = container_of(ev, struct conn, ev);
	struct secondary *s = c->s;

	if (events & EPOLLOUT) {
		conn_flush(c);
		if (s->conn == c && c->bm_pending)
			conn_send_own_bitmap(s, c);
		if (s->conn == c)
			sec_resync_run(s);
	}
	if (s->conn == c && (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)))
		conn_read(s);
}

/*
 * Frames the reader holds after conn_read() ran out of time, and bytes TLS
 * holds decrypted: no epoll event reports either, so read them now.
 */
static bool conn_more(const struct conn *c)
{
	return c && !c->paused && !c->closing && (c->more || tls_io_pending(&c->io));
}

static bool secondary_before_sleep(struct role *r)
{
	struct secondary *s = secondary_of(r);

	if (!conn_more(s->conn))
		return false;
	conn_read(s);
	return conn_more(s->conn);
}

static void secondary_apply_event(struct ev *ev, uint32_t events)
{
	struct secondary *s = container_of(ev, struct secondary, ev_apply);
	struct conn *c = s->conn;
	int r;

	if (!s->apply)
		return;
	r = apply_run(s->apply);
	if (r < 0) {
		log_error_errno(r, "%s: writing %s", s->resource, s->env->cfg->device);
		if (c)
			conn_send_error(c, DMREPL__V1__ERROR__CODE__CODE_IO,
					"write to the device failed");
		return;
	}
	if (c && c->paused) {
		c->paused = false;
		conn_arm(c);
		conn_read(s);
	} else {
		sec_resync_run(s);
		conn_send_ack(s);
	}
}

/*
 * A candidate's first frame must be a Hello this node accepts; only then
 * does it become the primary's connection, in place of the current one.
 */
static void cand_read(struct secondary *s, struct conn *c)
{
	Dmrepl__V1__Error__Code code;
	struct wire_msg msg;
	const char *why;
	int r;

	for (;;) {
		r = wire_reader_next(&c->rd, &msg);
		if (r == 0) {
			r = wire_reader_fill_fn(&c->rd, conn_readv, &c->io);
			if (r == -EAGAIN)
				return;
			if (r <= 0) {
				conn_drop(s, c, r ? tls_io_error(&c->io, -r) : "closed before its Hello");
				return;
			}
			c->last_rx_ms = loop_now_ms();
			continue;
		}
		if (r < 0 || msg.frame->msg_case != DMREPL__V1__FRAME__MSG_HELLO) {
			conn_send_error(c, DMREPL__V1__ERROR__CODE__CODE_PROTOCOL,
					"the first frame must be a Hello");
			return;
		}
		why = sec_hello_refusal(s, c, msg.frame->hello, &code);
		if (why) {
			snprintf(c->node, sizeof(c->node), "%s", msg.frame->hello->node);
			conn_send_error(c, code, why);
			return;
		}
		break;
	}
	sec_cand_unlink(s, c);
	if (s->conn)
		conn_close(s, "replaced by a new connection of the primary");
	c->cand = false;
	c->ev.fn = secondary_conn_event;
	s->conn = c;
	conn_hello(s, c, msg.frame->hello);
	if (s->conn == c)
		conn_read(s);	/* what followed the Hello */
}

/*
 * A candidate's TLS handshake: refused (logged once per interval), still
 * going, or done, when its Hello may come.  True once done.
 */
static bool cand_tls(struct secondary *s, struct conn *c)
{
	int r = tls_io_handshake(&c->io);

	if (r < 0) {
		conn_drop(s, c, c->io.err);
		return false;
	}
	c->want_out = r == 0 && c->io.want_write;
	conn_arm(c);
	return r > 0;
}

static void secondary_cand_event(struct ev *ev, uint32_t events)
{
	struct conn *c = container_of(ev, struct conn, ev);

	if (c->io.handshaking) {
		if (cand_tls(c->s, c))
			cand_read(c->s, c);
	} else if (events & EPOLLOUT) {
		conn_flush(c);
	} else if (!c->closing) {
		cand_read(c->s, c);
	}
}

/*
 * A new candidate takes a free slot; when there is none, the slot of the
 * oldest candidate from the same host, else the oldest one: a host that
 * keeps connecting recycles its own slots and cannot push out the
 * primary's connection before its Hello.
 */
static void sec_cand_add(struct secondary *s, struct conn *c)
{
	struct conn **slot = NULL, **same = NULL;
	unsigned int i;

	for (i = 0; i < SEC_MAX_CANDS; i++) {
		struct conn *o = s->cands[i];

		if (!o) {
			slot = &s->cands[i];
			break;
		}
		if (sock_same_host(&o->sa, &c->sa) && (!same || o->since_ms < (*same)->since_ms))
			same = &s->cands[i];
		if (!slot || o->since_ms < (*slot)->since_ms)
			slot = &s->cands[i];
	}
	if (*slot && same)
		slot = same;
	if (*slot)
		conn_drop(s, *slot, "too many connections waiting for their Hello");
	*slot = c;
}

/* A new connection on fd from sa: a candidate, until its Hello. */
static void sec_cand_new(struct secondary *s, int fd, const struct sockaddr_storage *sa)
{
	struct conn *c;

	c = calloc(1, sizeof(*c));
	if (!c || wire_reader_init(&c->rd, conn_payload_buf, c) < 0) {
		free(c);
		close(fd);
		return;
	}
	c->sa = *sa;
	sock_host_text(sa, c->addr, sizeof(c->addr));
	sock_tune(fd);
	c->s = s;
	c->cand = true;
	c->ev = (struct ev) { .fd = fd, .fn = secondary_cand_event };
	tls_io_init(&c->io, fd);
	c->last_rx_ms = c->last_tx_ms = c->since_ms = loop_now_ms();
	sec_cand_add(s, c);
	if (loop_add(s->env->loop, &c->ev, EPOLLIN | EPOLLRDHUP) < 0)
		conn_drop(s, c, "epoll");
	else if (s->env->tls && tls_io_start(&c->io, s->env->tls, true, NULL) < 0)
		conn_drop(s, c, c->io.err);
}

static void secondary_listen_event(struct ev *ev, uint32_t events)
{
	struct secondary *s = container_of(ev, struct sec_listen, ev)->s;
	struct sockaddr_storage sa;
	socklen_t len = sizeof(sa);
	int fd;

	fd = accept4(ev->fd, (struct sockaddr *)&sa, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (fd < 0)
		return;
	sec_cand_new(s, fd, &sa);
}

void secondary_adopt_fd(struct role *r, int fd, const struct sockaddr_storage *sa)
{
	sec_cand_new(secondary_of(r), fd, sa);
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
		secondary_persist(s, true);
		sec_resync_run(s);
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
		conn_send_ack(s);
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

static int secondary_listen(struct secondary *s)
{
	const struct config *cfg = s->env->cfg;
	int n, i, fd, one = 1;

	n = sd_listen_fds(1);
	if (n > 0) {
		for (i = 0; i < n && i < SEC_MAX_LISTEN; i++) {
			s->listen[i].ev.fd = SD_LISTEN_FDS_START + i;
			fcntl(s->listen[i].ev.fd, F_SETFL, O_NONBLOCK);
		}
		s->nr_listen = (unsigned int)i;
		log_info("%s: listening on %d socket(s) from systemd", s->resource, i);
		return 0;
	}
	fd = socket(cfg->listen.sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return log_error_errno(-errno, "socket");
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	/*
	 * At boot repld starts before the network is configured: bind the
	 * address anyway, connections arrive once it exists.
	 */
	if (cfg->listen.sa.ss_family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_FREEBIND, &one, sizeof(one));
	else
		setsockopt(fd, IPPROTO_IP, IP_FREEBIND, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&cfg->listen.sa, cfg->listen.len) < 0 ||
	    listen(fd, 8) < 0) {
		int r = -errno;

		close(fd);
		return log_error_errno(r, "%s: listen on %s", s->resource, cfg->listen.text);
	}
	s->listen[0].ev.fd = fd;
	s->nr_listen = 1;
	log_info("%s: listening on %s%s", s->resource, cfg->listen.text,
		 cfg->listen_default ? " (any address: no listen in repl.conf)" : "");
	return 0;
}

static void secondary_free(struct role *r)
{
	struct secondary *s = secondary_of(r);
	unsigned int i;

	conn_close(s, NULL);
	for (i = 0; i < SEC_MAX_CANDS; i++)
		conn_drop(s, s->cands[i], NULL);
	secondary_engine_stop(s);
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
	sec_state_load(s);
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
		r = sec_state_save(s, s->state_durable);
		if (r < 0)
			return log_error_errno(r, "%s: saving the state", s->resource);
	}
	r = secondary_listen(s);
	if (r < 0)
		return r;
	for (i = 0; i < s->nr_listen; i++) {
		s->listen[i].s = s;
		s->listen[i].ev.fn = secondary_listen_event;
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
		sec_progress(s, &p);
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
	why = sec_primary_refusal(n, c->node, &c->sa);
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
	r = sec_state_save(s, s->state_durable);
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

#define SECONDARY_NO_PEERS "this node is a secondary: peers are managed on the primary"

static const struct ctl_command secondary_commands[] = {
	{ .name = "discard-my-data", .fn = secondary_cmd_discard },
	{ .name = "set-mode", .refuse = SECONDARY_NO_PEERS },
	{ .name = "connect", .refuse = SECONDARY_NO_PEERS },
	{ .name = "disconnect", .refuse = SECONDARY_NO_PEERS },
	{ .name = "resync", .refuse = SECONDARY_NO_PEERS },
	{ .name = "verify", .refuse = SECONDARY_NO_PEERS },
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
