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
 * One primary at a time; a new connection from the configured primary
 * replaces a stale one (a primary that lost power sends no FIN).  The
 * resume point (stream id + every record below it durable) is kept in
 * <state-dir>/<resource>.state, written atomically when it advances.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>
#include <xxhash.h>

#include "apply.h"
#include "dmdev.h"
#include "log.h"
#include "manager-internal.h"
#include "metadata.h"
#include "rsnap.h"

#define CONN_OUT	(64 * 1024)
#define XL_MAX		65536U	/* segments of the sequence translation */
#define RS_QUEUE	1024U	/* resync requests waiting for writes */

struct conn {
	struct manager *m;
	struct ev ev;
	int fd;
	bool up;			/* handshake done */
	bool paused;			/* not reading: the engine is out of buffers */
	bool want_out;
	bool closing;			/* Error queued: close once it is sent */
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
};

/*
 * conn_read() hands writes to the disk every this many payload bytes,
 * not only once the socket is drained: the disk writes the first records
 * while the rest is still being read.
 */
#define CONN_ISSUE_BYTES	(256U << 10)

/* ---- resume state -------------------------------------------------------- */

static int state_path(struct manager *m, char *buf, size_t len)
{
	int n = snprintf(buf, len, "%s/%s.state", m->cfg->state_dir, m->cfg->resource);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

static void state_load(struct manager *m)
{
	char path[PATH_MAX];
	unsigned long long id, durable;
	int consistent = 1, n;
	FILE *f;

	m->consistent = false;	/* never held a full copy */
	if (state_path(m, path, sizeof(path)) < 0)
		return;
	f = fopen(path, "re");
	if (!f)
		return;
	int discard = 0;

	n = fscanf(f, "stream %llx durable %llu consistent %d discard %d", &id, &durable,
		   &consistent, &discard);
	if (n >= 2) {
		m->stream_id = id;
		m->state_durable = durable;
		m->consistent = consistent == 1;
		m->discard_my_data = discard == 1;
	} else {
		log_warning("%s: %s unreadable: starting without a resume point", m->cfg->resource,
			    path);
	}
	fclose(f);
}

static int state_save(struct manager *m, uint64_t durable)
{
	char path[PATH_MAX], tmp[PATH_MAX + 8];
	FILE *f;
	int r = 0;

	if (state_path(m, path, sizeof(path)) < 0)
		return -ENAMETOOLONG;
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "we");
	if (!f)
		return -errno;
	fprintf(f, "stream %016" PRIx64 " durable %" PRIu64 " consistent %d discard %d\n",
		m->stream_id, durable, m->consistent ? 1 : 0, m->discard_my_data ? 1 : 0);
	if (fflush(f) || fdatasync(fileno(f)))
		r = -errno;
	if (fclose(f) && !r)
		r = -errno;
	if (!r && rename(tmp, path) < 0)
		r = -errno;
	if (r < 0) {
		unlink(tmp);
		return r;
	}
	m->state_durable = durable;
	m->last_state_write_ms = now_ms();
	return 0;
}

/* ---- engine sequence <-> stream sequence --------------------------------------- */

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

struct rs_req {
	bool flush;			/* ResyncFlush, else HashRequest */
	bool done;
	uint64_t id, sector, gen;
	uint32_t nr_sectors, block_sectors;
	uint64_t lpos;			/* engine sequences below this first */
};

struct sec_rs {
	unsigned int head, len;
	void *buf;			/* WIRE_MAX_PAYLOAD, aligned for O_DIRECT */
	struct rs_req q[RS_QUEUE];
};

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
static void sec_progress(struct manager *m, struct apply_progress *p)
{
	struct apply_progress e;
	struct sec_xlate *x = m->xl;

	apply_progress(m->apply, &e);
	if (!x->started) {
		p->received = p->written = p->durable = x->wbase;
		return;
	}
	p->received = x->wnext;
	p->written = xl_wire(x, e.written);
	p->durable = xl_wire(x, e.durable);
	xl_trim(x, e.durable);
}

/* ---- connection output ------------------------------------------------------- */

static void conn_arm(struct conn *c)
{
	uint32_t ev = EPOLLRDHUP;

	if (!c->paused)
		ev |= EPOLLIN;
	if (c->want_out)
		ev |= EPOLLOUT;
	ep_mod(c->m, c->fd, ev, &c->ev);
}

static void conn_close(struct manager *m, const char *why)
{
	struct conn *c = m->conn;

	if (!c)
		return;
	if (why)
		log_warning("%s: primary %s (%s): connection closed: %s", m->cfg->resource,
			    c->node[0] ? c->node : "?", c->addr, why);
	ep_del(m, c->fd);
	ep_forget(m, &c->ev);
	close(c->fd);
	wire_reader_free(&c->rd);
	if (c->pending && m->apply)
		apply_buf_put(m->apply, c->pending);
	free(c);
	m->conn = NULL;
}

static void conn_flush(struct conn *c)
{
	ssize_t n;

	while (c->out_off < c->out_len) {
		n = write(c->fd, c->out + c->out_off, c->out_len - c->out_off);
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
			conn_close(c->m, strerror(errno));
			return;
		}
		c->out_off += (size_t)n;
		c->last_tx_ms = now_ms();
	}
	c->out_off = c->out_len = 0;
	if (c->closing) {
		conn_close(c->m, NULL);
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

	log_warning("%s: refusing primary %s (%s): %s", c->m->cfg->resource,
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
static void secondary_persist(struct manager *m, bool force)
{
	struct apply_progress p;
	int r;

	if (!m->apply)
		return;
	sec_progress(m, &p);
	if (p.durable <= m->state_durable)
		return;
	if (!force && now_ms() - m->last_state_write_ms < 100)
		return;
	r = state_save(m, p.durable);
	if (r < 0)
		log_error_errno(r, "%s: saving the resume point", m->cfg->resource);
}

/* Acknowledge progress the primary has not heard of yet. */
static void conn_send_ack(struct manager *m)
{
	struct conn *c = m->conn;
	struct apply_progress p;
	uint8_t *b;
	ssize_t n;

	if (!c || !c->up || !m->apply || c->closing)
		return;
	secondary_persist(m, false);
	sec_progress(m, &p);
	if (p.durable > m->state_durable)
		p.durable = m->state_durable;
	if (p.received == c->acked.received && p.written == c->acked.written &&
	    p.durable == c->acked.durable)
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

static int secondary_engine_stop(struct manager *m)
{
	struct apply_progress p;
	int r = 0;

	if (!m->apply)
		return 0;
	r = apply_drain(m->apply, (int)m->cfg->drain_timeout_ms);
	sec_progress(m, &p);
	if (r < 0)
		log_error_errno(r, "%s: writing the last records", m->cfg->resource);
	else if (p.durable != m->state_durable)
		state_save(m, p.durable);
	ep_del(m, apply_fd(m->apply));
	apply_free(m->apply);
	m->apply = NULL;
	if (m->rs)
		m->rs->len = 0;		/* their connection is gone */
	return r;
}

/* A write engine on m->dev_fd whose next record is engine sequence seq. */
static int engine_new(struct manager *m, uint64_t seq)
{
	struct apply_config cfg;
	int r;

	apply_config_init(&cfg);
	cfg.checkpoint_ms = m->cfg->checkpoint_ms;
	r = apply_new(m->dev_fd, m->dev_sectors, &cfg, &m->apply);
	if (r < 0)
		return log_error_errno(r, "%s: write engine", m->cfg->resource);
	r = apply_set_seq(m->apply, seq);
	if (r < 0)
		return log_error_errno(r, "%s: write engine", m->cfg->resource);
	r = ep_add(m, apply_fd(m->apply), EPOLLIN, &m->ev_apply);
	if (r < 0)
		return log_error_errno(r, "epoll add engine");
	return 0;
}

static int secondary_engine_start(struct manager *m)
{
	if (!m->xl)
		m->xl = malloc(sizeof(*m->xl));
	if (!m->rs)
		m->rs = calloc(1, sizeof(*m->rs));
	if (!m->xl || !m->rs)
		return log_error_errno(-ENOMEM, "%s: write engine", m->cfg->resource);
	m->xl->lnext = m->xl->wnext = m->xl->wbase = 0;
	m->xl->head = m->xl->len = 0;
	m->xl->started = false;
	m->xl->epoch = 0;
	m->xl->after_flush = false;
	m->rs->len = 0;
	return engine_new(m, 0);
}

/* ---- incoming frames ------------------------------------------------------------------ */

/* The wire reader asks where a payload goes: an aligned engine buffer. */
static void *conn_payload_buf(void *ctx, const Dmrepl__V1__Data *d)
{
	struct manager *m = ctx;
	struct conn *c = m->conn;

	if (!c || !m->apply)
		return NULL;
	if (!c->pending && apply_buf_get(m->apply, d->payload_len, &c->pending) < 0)
		return NULL;
	return c->pending->data;
}

/* Same host (the port does not matter); IPv4-mapped IPv6 counts as IPv4. */
static bool same_host(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
	const uint8_t *x = NULL, *y = NULL;
	size_t xl = 0, yl = 0;

	if (a->ss_family == AF_INET) {
		x = (const uint8_t *)&((const struct sockaddr_in *)a)->sin_addr;
		xl = 4;
	} else if (a->ss_family == AF_INET6) {
		x = (const uint8_t *)&((const struct sockaddr_in6 *)a)->sin6_addr;
		xl = 16;
		if (IN6_IS_ADDR_V4MAPPED((const struct in6_addr *)x)) {
			x += 12;
			xl = 4;
		}
	}
	if (b->ss_family == AF_INET) {
		y = (const uint8_t *)&((const struct sockaddr_in *)b)->sin_addr;
		yl = 4;
	} else if (b->ss_family == AF_INET6) {
		y = (const uint8_t *)&((const struct sockaddr_in6 *)b)->sin6_addr;
		yl = 16;
		if (IN6_IS_ADDR_V4MAPPED((const struct in6_addr *)y)) {
			y += 12;
			yl = 4;
		}
	}
	return x && y && xl == yl && !memcmp(x, y, xl);
}

/*
 * This node's own metadata bitmap (it was a primary: regions it wrote that
 * the peers may lack).  Returns the number of regions set; *ret gets the
 * md_info with the bitmap (free ret->bitmap) when not NULL.
 */
static uint64_t sec_own_bitmap(struct manager *m, struct md_info *ret)
{
	struct md_info mi;
	char err[256];

	if (!strcmp(m->cfg->meta_device, "-") ||
	    md_read(m->cfg->meta_device, ret != NULL, &mi, err, sizeof(err)) < 0)
		return 0;
	if (ret)
		*ret = mi;
	return mi.set_regions;
}

/* After our Hello: our own bitmap in pieces, always ending with "last". */
static int conn_send_own_bitmap(struct manager *m, struct conn *c)
{
	struct md_info mi = { 0 };
	uint64_t bytes, off = 0;
	int r = 0;

	sec_own_bitmap(m, &mi);
	bytes = mi.bitmap ? (mi.nr_regions + 7) / 8 : 0;
	do {
		size_t n = bytes - off > WIRE_MAX_BITMAP ? WIRE_MAX_BITMAP : (size_t)(bytes - off);
		uint8_t *b;
		ssize_t k;

		/* skip pieces without a bit set, but always send the last */
		if (n && off + n < bytes) {
			size_t i;

			for (i = 0; i < n && !mi.bitmap[off + i]; i++)
				;
			if (i == n) {
				off += n;
				continue;
			}
		}
		b = conn_out_space(c, WIRE_MAX_BITMAP + 64);
		if (!b) {
			conn_flush(c);
			b = conn_out_space(c, WIRE_MAX_BITMAP + 64);
		}
		if (!b) {
			r = -ENOBUFS;
			break;
		}
		k = wire_encode_peer_bitmap(b, WIRE_MAX_BITMAP + 64, off * 8, mi.region_shift ? mi.region_shift : 16,
					    mi.bitmap ? mi.bitmap + off : NULL, n, off + n >= bytes);
		if (k < 0) {
			r = (int)k;
			break;
		}
		c->out_len += (size_t)k;
		off += n;
	} while (off < bytes);
	free(mi.bitmap);
	if (!r && mi.set_regions)
		log_info("%s: sent %" PRIu64 " regions of this node's own bitmap to the primary",
			 m->cfg->resource, mi.set_regions);
	return r;
}

static void conn_hello(struct manager *m, struct conn *c, const Dmrepl__V1__Hello *h)
{
	const struct config_peer *cp;
	uint8_t *b;
	ssize_t n;
	int r;

	if (h->protocol_version != WIRE_PROTOCOL_VERSION) {
		conn_send_error(c, DMREPL__V1__ERROR__CODE__CODE_VERSION,
				"protocol version not supported (this node speaks 1)");
		return;
	}
	snprintf(c->node, sizeof(c->node), "%s", h->node);
	cp = config_find_peer(m->cfg, h->node);
	if (!cp || h->role != DMREPL__V1__ROLE__ROLE_PRIMARY ||
	    strcmp(h->resource, m->cfg->resource)) {
		conn_send_error(c, DMREPL__V1__ERROR__CODE__CODE_UNKNOWN_PEER,
				"node or resource not configured here");
		return;
	}
	if (cp->has_address && !same_host(&c->sa, &cp->address.sa)) {
		conn_send_error(c, DMREPL__V1__ERROR__CODE__CODE_UNKNOWN_PEER,
				"this node may not connect from that address");
		return;
	}
	if (h->device_sectors > m->dev_sectors) {
		conn_send_error(c, DMREPL__V1__ERROR__CODE__CODE_SIZE,
				"the device here is smaller than the primary's");
		return;
	}
	/* finish what the previous connection left in the engine */
	r = secondary_engine_stop(m);
	if (r < 0) {
		conn_send_error(c, DMREPL__V1__ERROR__CODE__CODE_IO, "cannot write the device");
		return;
	}
	r = secondary_engine_start(m);
	if (r < 0) {
		conn_send_error(c, DMREPL__V1__ERROR__CODE__CODE_IO, "cannot start the write engine");
		return;
	}
	c->mode = (enum peer_mode)h->mode;
	b = conn_out_space(c, 256);
	{
		Dmrepl__V1__Hello hello = DMREPL__V1__HELLO__INIT;

		hello.protocol_version = WIRE_PROTOCOL_VERSION;
		hello.node = m->cfg->node;
		hello.resource = m->cfg->resource;
		hello.role = DMREPL__V1__ROLE__ROLE_SECONDARY;
		hello.device_sectors = m->dev_sectors;
		hello.stream_id = m->stream_id;
		hello.resume_seq = m->stream_id ? m->state_durable : 0;
		hello.consistent = m->consistent;
		hello.gen_current = m->gens.current;
		hello.gen_bitmap = m->gens.bitmap;
		hello.gen_history = m->gens.history;
		hello.gen_since = m->gens.since;
		hello.dirty_regions = sec_own_bitmap(m, NULL);
		hello.discard_my_data = m->discard_my_data;
		n = b ? wire_encode_hello(b, 256, &hello) : -ENOSPC;
	}
	if (n < 0) {
		conn_close(m, "cannot encode Hello");
		return;
	}
	c->out_len += (size_t)n;
	if (m->stream_id != h->stream_id && m->stream_id)
		log_warning("%s: primary %s streams %016" PRIx64 ", this copy holds %016" PRIx64
			    ": the primary decides whether it is consistent", m->cfg->resource,
			    h->node, h->stream_id, m->stream_id);
	if (m->stream_id != h->stream_id)
		m->state_durable = 0;	/* a new stream: nothing of it is here yet */
	m->stream_id = h->stream_id;
	snprintf(m->primary_node, sizeof(m->primary_node), "%s", h->node);
	c->up = true;
	c->first_data = true;
	if (conn_send_own_bitmap(m, c) < 0) {
		conn_close(m, "cannot send this node's bitmap");
		return;
	}
	m->primary_connects++;
	log_info("%s: primary %s (%s) connected, %s mode", m->cfg->resource, h->node, c->addr,
		 config_mode_name(c->mode));
	conn_flush(c);
}

/* The copy is no longer (or again) consistent: on disk before we go on. */
static int sec_set_consistent(struct manager *m, bool consistent)
{
	int r;

	if (m->consistent == consistent)
		return 0;
	m->consistent = consistent;
	r = state_save(m, m->state_durable);
	if (r < 0)
		return log_error_errno(r, "%s: saving the consistency flag", m->cfg->resource);
	log_info("%s: this copy is %s", m->cfg->resource,
		 consistent ? "consistent (UpToDate)" : "Inconsistent until a resync completes");
	return 0;
}

static void conn_data(struct manager *m, struct conn *c, const struct wire_msg *msg)
{
	const Dmrepl__V1__Data *d = msg->frame->data;
	struct sec_xlate *x = m->xl;
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
	if (wire_check_extent(d, m->dev_sectors) < 0) {
		apply_buf_put(m->apply, buf);
		conn_send_error(c, DMREPL__V1__ERROR__CODE__CODE_PROTOCOL,
				"record beyond the end of the device");
		return;
	}
	if (resync) {
		/* between the records, in their epoch */
		rec.epoch = x->epoch + (x->after_flush ? 1 : 0);
		x->epoch = rec.epoch;
		x->after_flush = false;
		m->rs_blocks++;
		m->rs_bytes += d->payload_len;
	} else {
		if (x->started && d->seq != x->wnext) {
			apply_buf_put(m->apply, buf);
			conn_send_error(c, DMREPL__V1__ERROR__CODE__CODE_PROTOCOL,
					"record out of sequence");
			return;
		}
		if (!x->started) {
			/* the primary chose where the stream resumes: what is
			 * below counts as here (it resyncs what is not) */
			x->started = true;
			x->wbase = d->seq;
			if (m->state_durable < d->seq && state_save(m, d->seq) < 0) {
				apply_buf_put(m->apply, buf);
				conn_send_error(c, DMREPL__V1__ERROR__CODE__CODE_IO,
						"cannot save the state");
				return;
			}
		}
		if (xl_record(x, d->seq) < 0) {
			apply_buf_put(m->apply, buf);
			conn_send_error(c, DMREPL__V1__ERROR__CODE__CODE_PROTOCOL,
					"too many resync blocks between records");
			return;
		}
		x->lnext--;	/* taken below */
		x->epoch = d->epoch;
		x->after_flush = d->op == DM_REPL_OP_FLUSH;
		if (d->op == DM_REPL_OP_GAP && m->consistent) {
			log_warning("%s: the primary's ring overflowed (GAP at record %" PRIu64
				    "): this copy has a hole", m->cfg->resource, d->seq);
			if (sec_set_consistent(m, false) < 0) {
				apply_buf_put(m->apply, buf);
				conn_send_error(c, DMREPL__V1__ERROR__CODE__CODE_IO,
						"cannot save the state");
				return;
			}
		}
	}
	/* the engine takes the buffer, whatever it answers */
	r = apply_submit(m->apply, &rec, buf);
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
static int sec_reopen(struct manager *m, const char *path)
{
	int fd, r;

	r = apply_drain(m->apply, (int)m->cfg->drain_timeout_ms);
	if (r < 0)
		return log_error_errno(r, "%s: writing what was received", m->cfg->resource);
	if (fdatasync(m->dev_fd) < 0)
		return log_error_errno(-errno, "%s: flushing %s", m->cfg->resource, m->cfg->device);
	fd = open(path, O_RDWR | O_DIRECT | O_CLOEXEC);
	if (fd < 0)
		return log_error_errno(-errno, "%s: open %s", m->cfg->resource, path);
	ep_del(m, apply_fd(m->apply));
	apply_free(m->apply);
	m->apply = NULL;
	close(m->dev_fd);
	m->dev_fd = fd;
	return engine_new(m, m->xl->lnext);
}

/*
 * The primary says this copy is complete in its generation gen: adopt it,
 * forget our own bitmap (the primary resynced those regions) and any
 * request to discard our data.
 */
static int sec_adopt(struct manager *m, uint64_t gen)
{
	char err[256];
	int r;

	if (gen && (gen != m->gens.current || m->gens.bitmap || m->gens.history)) {
		m->gens = (struct gens) { .current = gen, .since = gens_now_ms() };
		r = gens_save(m);
		if (r < 0)
			return r;
		log_info("%s: this copy now belongs to data generation %016" PRIx64,
			 m->cfg->resource, gen);
	}
	if (strcmp(m->cfg->meta_device, "-") && sec_own_bitmap(m, NULL)) {
		r = md_update(m->cfg->meta_device, NULL, true, DM_REPL_MD_ROLE_SECONDARY, err,
			      sizeof(err));
		if (r < 0)
			return log_error_errno(r, "%s: %s", m->cfg->resource, err);
	}
	m->discard_my_data = false;
	if (rsnap_active(m->cfg)) {
		r = sec_reopen(m, m->cfg->device);
		if (r < 0 || (r = rsnap_drop(m->cfg)) < 0)
			return r;
	}
	if (!m->consistent)
		return sec_set_consistent(m, true);
	return state_save(m, m->state_durable);
}

/* ---- resync requests ----------------------------------------------------------- */

static void rs_queue(struct manager *m, struct conn *c, const struct rs_req *req)
{
	struct sec_rs *rs = m->rs;

	if (rs->len == RS_QUEUE) {
		conn_send_error(c, DMREPL__V1__ERROR__CODE__CODE_PROTOCOL,
				"too many resync requests outstanding");
		return;
	}
	rs->q[(rs->head + rs->len) % RS_QUEUE] = *req;
	rs->q[(rs->head + rs->len) % RS_QUEUE].lpos = m->xl->lnext;
	rs->len++;
}

/* Answer the requests whose turn has come (everything before them written). */
static void rs_run(struct manager *m)
{
	struct sec_rs *rs = m->rs;
	struct conn *c = m->conn;
	struct apply_progress e;
	uint64_t hash[WIRE_MAX_HASHES];
	uint8_t *b;
	ssize_t n;
	int r;

	if (!rs || !m->apply || !c || !c->up || c->closing)
		return;
	while (rs->len) {
		struct rs_req *q = &rs->q[rs->head];

		apply_progress(m->apply, &e);
		if (e.written < q->lpos)
			return;
		b = conn_out_space(c, 2400);
		if (!b)
			return;		/* after the output drained */
		if (q->flush) {
			if (fdatasync(m->dev_fd) < 0) {
				log_error_errno(-errno, "%s: flushing %s", m->cfg->resource,
						m->cfg->device);
				conn_send_error(c, DMREPL__V1__ERROR__CODE__CODE_IO,
						"cannot flush the device");
				return;
			}
			if (q->done && sec_adopt(m, q->gen) < 0) {
				conn_send_error(c, DMREPL__V1__ERROR__CODE__CODE_IO,
						"cannot save the state");
				return;
			}
			n = wire_encode_resync_flushed(b, 2400, q->id);
		} else {
			size_t len = (size_t)q->nr_sectors * 512, bs = (size_t)q->block_sectors * 512;
			size_t i;

			if (!rs->buf && posix_memalign(&rs->buf, 4096, WIRE_MAX_PAYLOAD)) {
				rs->buf = NULL;
				conn_send_error(c, DMREPL__V1__ERROR__CODE__CODE_IO, "out of memory");
				return;
			}
			r = (int)pread(m->dev_fd, rs->buf, len, (off_t)(q->sector * 512));
			if (r != (int)len) {
				log_error_errno(r < 0 ? -errno : -EIO, "%s: reading %s for a hash",
						m->cfg->resource, m->cfg->device);
				conn_send_error(c, DMREPL__V1__ERROR__CODE__CODE_IO,
						"cannot read the device");
				return;
			}
			for (i = 0; i < len / bs; i++)
				hash[i] = XXH3_64bits((const uint8_t *)rs->buf + i * bs, bs);
			n = wire_encode_hash_reply(b, 2400, q->id, hash, len / bs);
			m->hash_requests++;
		}
		if (n < 0) {
			conn_close(m, "cannot encode a resync reply");
			return;
		}
		c->out_len += (size_t)n;
		rs->head = (rs->head + 1) % RS_QUEUE;
		rs->len--;
		conn_flush(c);
		if (m->conn != c)
			return;
	}
}

/* Issue what the engine has queued, reap what completed. */
static void conn_apply(struct manager *m)
{
	if (m->conn)
		m->conn->unissued = 0;
	if (m->apply && apply_run(m->apply) < 0 && m->conn)
		conn_send_error(m->conn, DMREPL__V1__ERROR__CODE__CODE_IO,
				"write to the device failed");
}

static void conn_read(struct manager *m)
{
	struct conn *c = m->conn;
	struct wire_msg msg;
	bool filled = false;
	int r;

	while (m->conn == c && !c->paused) {
		if (m->apply && apply_full(m->apply)) {
			/* queued records use memory too: let writes complete */
			c->paused = true;
			conn_arm(c);
			break;
		}
		r = wire_reader_next(&c->rd, &msg);
		if (r == -ENOBUFS && !m->apply) {
			conn_send_error(c, DMREPL__V1__ERROR__CODE__CODE_PROTOCOL,
					"Data before Hello");
			return;
		}
		if (r == -ENOBUFS) {
			/* out of buffers: stop reading until writes complete */
			c->paused = true;
			conn_arm(c);
			return;
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
			r = wire_reader_fill(&c->rd, c->fd);
			if (r == -EAGAIN)
				break;
			filled = true;
			if (r == 0) {
				conn_close(m, "closed by the primary");
				return;
			}
			if (r < 0) {
				conn_close(m, strerror(-r));
				return;
			}
			c->last_rx_ms = now_ms();
			continue;
		}
		switch (msg.frame->msg_case) {
		case DMREPL__V1__FRAME__MSG_HELLO:
			if (c->up)
				conn_send_error(c, DMREPL__V1__ERROR__CODE__CODE_PROTOCOL,
						"second Hello");
			else
				conn_hello(m, c, msg.frame->hello);
			break;
		case DMREPL__V1__FRAME__MSG_DATA:
			if (!c->up || !m->apply)
				conn_send_error(c, DMREPL__V1__ERROR__CODE__CODE_PROTOCOL,
						"Data before Hello");
			else
				conn_data(m, c, &msg);
			if (m->conn == c && (c->unissued += msg.payload_len) >= CONN_ISSUE_BYTES)
				conn_apply(m);
			break;
		case DMREPL__V1__FRAME__MSG_SET_MODE:
			if (c->up) {
				c->mode = (enum peer_mode)msg.frame->set_mode->mode;
				log_info("%s: primary switched this peer to %s mode",
					 m->cfg->resource, config_mode_name(c->mode));
			}
			break;
		case DMREPL__V1__FRAME__MSG_KEEPALIVE:
			break;
		case DMREPL__V1__FRAME__MSG_RESYNC_BEGIN:
			if (!c->up || !m->apply) {
				conn_send_error(c, DMREPL__V1__ERROR__CODE__CODE_PROTOCOL,
						"ResyncBegin before Hello");
				break;
			}
			log_info("%s: %s resync from %s begins", m->cfg->resource,
				 msg.frame->resync_begin->full ? "full" : "bitmap", c->node);
			if (m->consistent && m->cfg->resync_snapshot[0] && !rsnap_active(m->cfg)) {
				char orig[PATH_MAX];

				/* keep the consistent image until the resync is done */
				if (rsnap_create(m->cfg) < 0 ||
				    rsnap_origin_path(m->cfg, orig, sizeof(orig)) < 0 ||
				    sec_reopen(m, orig) < 0) {
					conn_send_error(c, DMREPL__V1__ERROR__CODE__CODE_IO,
							"cannot take the resync snapshot");
					break;
				}
			}
			if (sec_set_consistent(m, false) < 0)
				conn_send_error(c, DMREPL__V1__ERROR__CODE__CODE_IO,
						"cannot save the state");
			break;
		case DMREPL__V1__FRAME__MSG_HASH_REQUEST:
		case DMREPL__V1__FRAME__MSG_RESYNC_FLUSH:
			if (!c->up || !m->apply) {
				conn_send_error(c, DMREPL__V1__ERROR__CODE__CODE_PROTOCOL,
						"resync request before Hello");
				break;
			}
			if (msg.frame->msg_case == DMREPL__V1__FRAME__MSG_HASH_REQUEST) {
				const Dmrepl__V1__HashRequest *h = msg.frame->hash_request;

				if (h->sector > m->dev_sectors ||
				    h->nr_sectors > m->dev_sectors - h->sector) {
					conn_send_error(c, DMREPL__V1__ERROR__CODE__CODE_PROTOCOL,
							"HashRequest beyond the end of the device");
					break;
				}
				rs_queue(m, c, &(struct rs_req) {
					.id = h->id, .sector = h->sector,
					.nr_sectors = h->nr_sectors,
					.block_sectors = h->block_sectors,
				});
			} else {
				rs_queue(m, c, &(struct rs_req) {
					.flush = true, .id = msg.frame->resync_flush->id,
					.done = msg.frame->resync_flush->done,
					.gen = msg.frame->resync_flush->gen,
				});
			}
			break;
		case DMREPL__V1__FRAME__MSG_ERROR:
			log_warning("%s: primary reported error %d: %s", m->cfg->resource,
				    msg.frame->error->code, msg.frame->error->reason);
			conn_close(m, NULL);
			return;
		default:
			conn_send_error(c, DMREPL__V1__ERROR__CODE__CODE_PROTOCOL,
					"unexpected frame from a primary");
			break;
		}
	}
	conn_apply(m);
	rs_run(m);
	conn_send_ack(m);
}

void secondary_conn_event(struct manager *m, uint32_t events)
{
	struct conn *c = m->conn;

	if (!c)
		return;
	if (events & EPOLLOUT) {
		conn_flush(c);
		if (m->conn == c)
			rs_run(m);
	}
	if (m->conn == c && (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)))
		conn_read(m);
}

void secondary_apply_event(struct manager *m)
{
	struct conn *c = m->conn;
	int r;

	if (!m->apply)
		return;
	r = apply_run(m->apply);
	if (r < 0) {
		log_error_errno(r, "%s: writing %s", m->cfg->resource, m->cfg->device);
		if (c)
			conn_send_error(c, DMREPL__V1__ERROR__CODE__CODE_IO,
					"write to the device failed");
		return;
	}
	if (c && c->paused) {
		c->paused = false;
		conn_arm(c);
		conn_read(m);
	} else {
		rs_run(m);
		conn_send_ack(m);
	}
}

void secondary_listen_event(struct manager *m, int idx)
{
	struct sockaddr_storage sa;
	socklen_t len = sizeof(sa);
	struct conn *c;
	int fd;

	fd = accept4(m->listen_fd[idx], (struct sockaddr *)&sa, &len,
		     SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (fd < 0)
		return;
	c = calloc(1, sizeof(*c));
	if (!c || wire_reader_init(&c->rd, conn_payload_buf, m) < 0) {
		free(c);
		close(fd);
		return;
	}
	c->sa = sa;
	if (sa.ss_family == AF_INET)
		inet_ntop(AF_INET, &((struct sockaddr_in *)&sa)->sin_addr, c->addr, sizeof(c->addr));
	else if (sa.ss_family == AF_INET6)
		inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&sa)->sin6_addr, c->addr,
			  sizeof(c->addr));
	sock_set_common(fd);
	/* a new connection replaces the old one (the primary reconnected) */
	if (m->conn)
		conn_close(m, "replaced by a new connection");
	c->m = m;
	c->fd = fd;
	c->ev.kind = EV_CONN;
	c->last_rx_ms = c->last_tx_ms = c->since_ms = now_ms();
	m->conn = c;
	if (ep_add(m, fd, EPOLLIN | EPOLLRDHUP, &c->ev) < 0)
		conn_close(m, "epoll");
}

void secondary_tick(struct manager *m)
{
	struct conn *c = m->conn;
	uint64_t now = now_ms();

	if (m->apply) {
		int r = apply_run(m->apply);

		if (r < 0 && c)
			conn_send_error(c, DMREPL__V1__ERROR__CODE__CODE_IO,
					"write to the device failed");
		secondary_persist(m, true);
		rs_run(m);
	}
	c = m->conn;
	if (c) {
		if (!c->up && now - c->since_ms > m->cfg->peer_timeout_ms) {
			conn_close(m, "no Hello in time");
		} else if (c->up && now - c->last_rx_ms > m->cfg->peer_timeout_ms) {
			conn_close(m, "no frame from the primary within peer-timeout-ms");
		} else if (c->up && now - c->last_tx_ms >= m->cfg->keepalive_ms &&
			   c->out_len == c->out_off) {
			uint8_t *b = conn_out_space(c, 32);
			ssize_t n = b ? wire_encode_keepalive(b, 32, now) : -ENOSPC;

			if (n > 0) {
				c->out_len += (size_t)n;
				conn_flush(c);
			}
		}
		conn_send_ack(m);
	}
	snprintf(m->status_line, sizeof(m->status_line), "secondary %s: primary %s", m->cfg->resource,
		 m->conn && m->conn->up ? m->primary_node : "not connected");
}

bool secondary_drained(struct manager *m)
{
	return !m->apply || !apply_busy(m->apply);
}

static int secondary_listen(struct manager *m)
{
	int n, i, fd, one = 1;

	n = sd_listen_fds(1);
	if (n > 0) {
		for (i = 0; i < n && i < 8; i++) {
			m->listen_fd[i] = SD_LISTEN_FDS_START + i;
			fcntl(m->listen_fd[i], F_SETFL, O_NONBLOCK);
		}
		m->nr_listen = (unsigned int)i;
		log_info("%s: listening on %d socket(s) from systemd", m->cfg->resource, i);
		return 0;
	}
	if (!m->cfg->has_listen)
		return log_error_errno(-EINVAL, "%s: a secondary needs 'listen' in %s (or socket activation)",
				       m->cfg->resource, m->cfg->path);
	fd = socket(m->cfg->listen.sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return log_error_errno(-errno, "socket");
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&m->cfg->listen.sa, m->cfg->listen.len) < 0 ||
	    listen(fd, 8) < 0) {
		int r = -errno;

		close(fd);
		return log_error_errno(r, "%s: listen on %s", m->cfg->resource,
				       m->cfg->listen.text);
	}
	m->listen_fd[0] = fd;
	m->nr_listen = 1;
	log_info("%s: listening on %s", m->cfg->resource, m->cfg->listen.text);
	return 0;
}

int secondary_start(struct manager *m)
{
	unsigned int i;
	int r;

	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s", m->cfg->device);
	if (rsnap_active(m->cfg)) {
		/* a resync was interrupted: keep the snapshot, write through
		 * its origin until a resync completes */
		r = rsnap_origin_path(m->cfg, path, sizeof(path));
		if (r < 0)
			return r;
		log_warning("%s: the resync snapshot is still there (an interrupted resync): writing through %s",
			    m->cfg->resource, path);
	}
	m->dev_fd = open(path, O_RDWR | O_DIRECT | O_CLOEXEC);
	if (m->dev_fd < 0)
		return log_error_errno(-errno, "%s: open %s with O_DIRECT", m->cfg->resource,
				       path);
	r = dmdev_size_sectors(m->dev_fd, &m->dev_sectors);
	if (r < 0)
		return log_error_errno(r, "%s: size of %s", m->cfg->resource, m->cfg->device);
	if (mkdir(m->cfg->state_dir, 0700) < 0 && errno != EEXIST)
		return log_error_errno(-errno, "%s: state directory %s", m->cfg->resource,
				       m->cfg->state_dir);
	state_load(m);
	r = gens_load(m);
	if (r < 0)
		return r;
	if (m->demoted) {
		/* the primary until now: its copy is the consistent one; its
		 * own bitmap goes to the next primary */
		m->consistent = true;
		m->discard_my_data = false;
		r = state_save(m, m->state_durable);
		if (r < 0)
			return log_error_errno(r, "%s: saving the state", m->cfg->resource);
	}
	r = secondary_listen(m);
	if (r < 0)
		return r;
	for (i = 0; i < m->nr_listen; i++) {
		m->ev_listen[i].kind = EV_LISTEN;
		m->ev_listen[i].ptr = (void *)(intptr_t)i;
		r = ep_add(m, m->listen_fd[i], EPOLLIN, &m->ev_listen[i]);
		if (r < 0)
			return log_error_errno(r, "epoll add listen");
	}
	log_info("%s: %s, %" PRIu64 " sectors; resume point: %s %" PRIu64, m->cfg->resource,
		 m->cfg->device, m->dev_sectors, m->stream_id ? "record" : "none",
		 m->state_durable);
	return 0;
}

void secondary_status(struct manager *m, struct json_object *o)
{
	struct json_object *po = json_object_new_object();
	struct apply_progress p = { 0 };

	if (m->apply)
		sec_progress(m, &p);
	json_object_object_add(o, "device", json_object_new_string(m->cfg->device));
	json_object_object_add(o, "disk", json_object_new_string(m->consistent ? "UpToDate" :
								     "Inconsistent"));
	json_object_object_add(o, "discard_my_data", json_object_new_boolean(m->discard_my_data));
	json_object_object_add(o, "resync_snapshot", json_object_new_boolean(rsnap_active(m->cfg)));
	json_object_object_add(o, "resync_blocks", json_object_new_uint64(m->rs_blocks));
	json_object_object_add(o, "resync_bytes", json_object_new_uint64(m->rs_bytes));
	json_object_object_add(o, "hash_requests", json_object_new_uint64(m->hash_requests));
	json_object_object_add(o, "device_sectors", json_object_new_uint64(m->dev_sectors));
	json_object_object_add(po, "name", json_object_new_string(m->primary_node[0] ?
								   m->primary_node : "-"));
	json_object_object_add(po, "connection", json_object_new_string(
		m->conn && m->conn->up ? "Connected" : "Connecting"));
	json_object_object_add(po, "mode", json_object_new_string(
		m->conn ? config_mode_name(m->conn->mode) : "-"));
	json_object_object_add(po, "stream_id", json_object_new_uint64(m->stream_id));
	json_object_object_add(po, "received", json_object_new_uint64(p.received));
	json_object_object_add(po, "written", json_object_new_uint64(p.written));
	json_object_object_add(po, "durable", json_object_new_uint64(
		m->apply ? p.durable : m->state_durable));
	json_object_object_add(po, "connects", json_object_new_uint64(m->primary_connects));
	json_object_object_add(o, "primary", po);
}

/*
 * replctl discard-my-data: the next handshake tells the primary that this
 * copy's own changes may go (split brain resolved in the primary's favour).
 */
int secondary_discard_my_data(struct manager *m, char *err, size_t len)
{
	int r;

	m->discard_my_data = true;
	r = state_save(m, m->state_durable);
	if (r < 0) {
		snprintf(err, len, "cannot save the state: %s", strerror(-r));
		return r;
	}
	log_warning("%s: this copy's changes will be discarded at the next connection",
		    m->cfg->resource);
	if (m->conn)
		conn_close(m, "discard-my-data: reconnect with the new state");
	return 0;
}

void secondary_free(struct manager *m)
{
	unsigned int i;

	conn_close(m, NULL);
	secondary_engine_stop(m);
	for (i = 0; i < m->nr_listen; i++)
		close(m->listen_fd[i]);
	m->nr_listen = 0;
	if (m->dev_fd >= 0)
		close(m->dev_fd);
	m->dev_fd = -1;
	if (m->rs)
		free(m->rs->buf);
	free(m->rs);
	m->rs = NULL;
	free(m->xl);
	m->xl = NULL;
}
