// SPDX-License-Identifier: GPL-2.0-only
/*
 * A primary's connection to one secondary: see peer.h.
 *
 * Sending: the queue holds frame headers and pointers to their payloads.
 * peer_flush() hands the socket as much as it takes with writev() (up to
 * 64 entries per call, which copies the payloads into the socket once), or,
 * for a payload of PEER_SPLICE_MIN bytes or more, writes the header into a
 * pipe, vmsplice()s the payload after it and splice()s the pipe to the
 * socket, so that the socket refers to the payload's pages.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <json-c/json.h>
#include <zstd.h>

#include "log.h"
#include "macro.h"
#include "peer.h"
#include "sock.h"
#include "tracemark.h"

#define PEER_IOV	(2 * 64)
/*
 * peer_flush() returns to the loop after this long even when the socket
 * is never full (a sender that encrypts no faster than its peer reads):
 * the acks that came in meanwhile are read, the timers run.
 */
#define PEER_FLUSH_MS	20U

const char *peer_state_name(enum peer_state s)
{
	static const char *const names[] = {
		[PEER_DOWN] = "Connecting",	/* drbdadm's word for "trying" */
		[PEER_CONNECTING] = "Connecting",
		[PEER_HANDSHAKE] = "Handshake",
		[PEER_UP] = "Connected",
	};

	return NAME_OF(names, s);
}

static struct peer_entry *peer_entry(struct peer *p, uint64_t i)
{
	return &p->q[i % PEER_QUEUE_LEN];
}

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

static void peer_arm(struct peer *p, bool out)
{
	if (p->ev.fd < 0 || out == p->want_out)
		return;
	p->want_out = out;
	loop_mod(p->loop, &p->ev, EPOLLIN | EPOLLRDHUP | (out ? EPOLLOUT : 0));
}

/* Forget what is queued, and the arena space it holds. */
static void peer_queue_drop(struct peer *p)
{
	p->head = p->tail;
	p->off = 0;
	p->queued_bytes = 0;
	p->ztail = p->zhead;
	p->zheld = false;
}

/*
 * The socket is paced to the rate limit (TCP's own pacing, or fq's), and
 * holds at most PEER_RATE_QUEUE_MS of it not yet sent: the rest waits in
 * the queue, not seconds of it in the socket ahead of every new write.
 */
#define PEER_RATE_QUEUE_MS	20U
#define PEER_RATE_QUEUE_MIN	(128U << 10)

static void peer_apply_rate(struct peer *p)
{
	unsigned long rate = p->rate_limit ? (unsigned long)p->rate_limit : ~0UL;
	uint64_t q = p->rate_limit * PEER_RATE_QUEUE_MS / 1000;
	int lowat = p->rate_limit ? (int)(q < PEER_RATE_QUEUE_MIN ? PEER_RATE_QUEUE_MIN :
					  q > INT_MAX ? INT_MAX : q) : INT_MAX;

	if (p->ev.fd < 0)
		return;
	if (setsockopt(p->ev.fd, SOL_SOCKET, SO_MAX_PACING_RATE, &rate, sizeof(rate)) < 0 ||
	    setsockopt(p->ev.fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &lowat, sizeof(lowat)) < 0)
		log_warning("%s: peer %s: cannot pace the connection to rate-limit: %s",
			    p->resource, p->cfg.name, strerror(errno));
}

void peer_set_rate_limit(struct peer *p, uint64_t bytes_per_s)
{
	if (p->rate_limit == bytes_per_s)
		return;
	p->rate_limit = bytes_per_s;
	peer_apply_rate(p);
}

void peer_set_compress(struct peer *p, int level)
{
	p->zlevel = level;
	p->zskip = 0;
	p->zskip_next = 1;
}

ssize_t peer_compress(struct peer *p, const void *payload, uint32_t len, bool may_wait,
		      const void **out)
{
	size_t pos, skip = 0, cap, z;
	uint64_t t0;

	p->zheld = false;
	if (!peer_compressing(p))
		return 0;
	p->zst.in_bytes += len;
	if (len < PEER_ZSTD_MIN || p->zskip) {
		if (p->zskip)
			p->zskip--;
		p->zst.out_bytes += len;
		return 0;
	}
	if (!p->zbuf) {
		p->zbuf = malloc(PEER_ZBUF);
		p->zcctx = ZSTD_createCCtx();
		if (!p->zbuf || !p->zcctx ||
		    ZSTD_isError(ZSTD_CCtx_setParameter(p->zcctx, ZSTD_c_compressionLevel,
							 p->zlevel))) {
			log_error("%s: peer %s: no memory for compression: sending raw",
				  p->resource, p->cfg.name);
			free(p->zbuf);
			ZSTD_freeCCtx(p->zcctx);
			p->zbuf = NULL;
			p->zcctx = NULL;
			p->zlevel = 0;
			p->zst.out_bytes += len;
			return 0;
		}
	}
	/* worth it only when it shrinks by 1/64: at most this much */
	cap = len - len / 64;
	pos = p->zhead % PEER_ZBUF;
	if (pos + cap > PEER_ZBUF)
		skip = PEER_ZBUF - pos;		/* contiguous: from the start */
	if (p->zhead - p->ztail + skip + cap > PEER_ZBUF) {
		if (!may_wait) {
			p->zst.out_bytes += len;
			return 0;
		}
		p->zst.in_bytes -= len;
		return -ENOBUFS;
	}
	ZSTD_CCtx_setParameter(p->zcctx, ZSTD_c_compressionLevel, p->zlevel);
	t0 = loop_now_ns();
	z = ZSTD_compress2(p->zcctx, p->zbuf + (pos + skip) % PEER_ZBUF, cap, payload, len);
	p->zst.ns += loop_now_ns() - t0;
	if (ZSTD_isError(z) || z == 0 || z >= cap) {
		/* incompressible: raw, and the next few are not tried */
		p->zst.raw_payloads++;
		p->zst.out_bytes += len;
		p->zskip = p->zskip_next;
		p->zskip_next = p->zskip_next * 2 > PEER_ZSTD_SKIP_MAX ? PEER_ZSTD_SKIP_MAX :
									 p->zskip_next * 2;
		return 0;
	}
	p->zskip_next = 1;
	p->zst.out_bytes += z;
	*out = p->zbuf + (pos + skip) % PEER_ZBUF;
	p->zpending = p->zhead;
	p->zhead += skip + z;
	p->zheld = true;
	return (ssize_t)z;
}

struct json_object *peer_zstats_json(const char *algorithm, int level, bool active,
				     const struct peer_zstats *z)
{
	struct json_object *o = json_object_new_object();

	json_object_object_add(o, "algorithm", json_object_new_string(algorithm));
	json_object_object_add(o, "level", json_object_new_int(level));
	json_object_object_add(o, "active", json_object_new_boolean(active));
	json_object_object_add(o, "in_bytes", json_object_new_uint64(z->in_bytes));
	json_object_object_add(o, "out_bytes", json_object_new_uint64(z->out_bytes));
	json_object_object_add(o, "ratio", json_object_new_double(
		z->out_bytes ? (double)z->in_bytes / (double)z->out_bytes : 1.0));
	json_object_object_add(o, "raw_payloads", json_object_new_uint64(z->raw_payloads));
	json_object_object_add(o, "seconds", json_object_new_double((double)z->ns / 1e9));
	return o;
}

void peer_abort(struct peer *p, const char *why)
{
	struct linger l = { .l_onoff = 1, .l_linger = 0 };

	/* a reset: nothing queued in the socket is sent after the close */
	if (p->ev.fd >= 0)
		(void)setsockopt(p->ev.fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
	peer_close(p, why);
}

void peer_close(struct peer *p, const char *why)
{
	enum peer_state was = p->state;
	uint64_t now = loop_now_ms();
	char reason[sizeof(p->last_error)];

	/* why may be the TLS session's message, which goes with it */
	if (why) {
		snprintf(reason, sizeof(reason), "%s", why);
		why = reason;
	}

	if (p->ev.fd >= 0) {
		loop_del(p->loop, &p->ev);
		close(p->ev.fd);
		p->ev.fd = -1;
	}
	tls_io_free(&p->io);
	tls_io_init(&p->io, -1);
	peer_pipe_close(p);
	if (was != PEER_DOWN && why)
		log_warning("%s: peer %s: connection lost: %s", p->resource, p->cfg.name, why);
	if (why)
		snprintf(p->last_error, sizeof(p->last_error), "%s", why);
	p->state = PEER_DOWN;
	p->state_since_ms = now;
	p->want_out = false;
	/* what is queued goes with the connection */
	peer_queue_drop(p);
	p->zstd_peer = false;
	/* a fresh reader for the next connection */
	wire_reader_reset(&p->rd);
	p->next_attempt_ms = now + p->backoff_ms;
	p->backoff_ms = p->backoff_ms * 2 > p->backoff_max_ms ? p->backoff_max_ms :
								p->backoff_ms * 2;
	p->ops->closed(p, was, why);
}

void peer_set_up(struct peer *p)
{
	p->state = PEER_UP;
	p->state_since_ms = loop_now_ms();
	p->backoff_ms = p->backoff_min_ms;
	p->last_error[0] = '\0';
}

void peer_reset_backoff(struct peer *p)
{
	p->next_attempt_ms = 0;
	p->backoff_ms = p->backoff_min_ms;
}

void peer_set_backoff(struct peer *p, unsigned int min_ms, unsigned int max_ms)
{
	p->backoff_min_ms = min_ms;
	p->backoff_max_ms = max_ms;
}

int peer_queue_payload(struct peer *p, const uint8_t *frame, size_t len, const void *payload,
		       uint32_t payload_len, uint64_t seq, bool splice)
{
	struct peer_entry *e;
	bool z = p->zheld;

	p->zheld = false;
	if (peer_queued(p) >= PEER_QUEUE_LEN || len > PEER_HDR) {
		if (z)
			p->zhead = p->zpending;		/* the arena space goes back */
		return -ENOBUFS;
	}
	e = peer_entry(p, p->tail);
	memcpy(e->hdr, frame, len);
	e->hdr_len = (uint32_t)len;
	e->payload = payload;
	e->payload_len = payload ? payload_len : 0;
	e->seq = seq;
	e->zend = z ? p->zhead : 0;
	/* the arena is reused once the entry has left the queue: copied */
	e->splice = splice && !z && payload_len >= PEER_SPLICE_MIN && !p->no_splice &&
		    !tls_io_copy_only(&p->io);
	p->queued_bytes += e->hdr_len + e->payload_len;
	p->tail++;
	return 0;
}

int peer_queue_frame(struct peer *p, const uint8_t *frame, size_t len)
{
	return peer_queue_payload(p, frame, len, NULL, 0, UINT64_MAX, false);
}

/* Account @sent bytes that left the queue (to the socket or the pipe). */
static void peer_sent(struct peer *p, size_t sent)
{
	p->off += sent;
	while (p->head != p->tail) {
		struct peer_entry *e = peer_entry(p, p->head);
		size_t total = e->hdr_len + e->payload_len;

		if (p->off < total)
			break;
		p->off -= total;
		if (e->seq != UINT64_MAX) {
			p->records_sent++;
			tracemark('P', "sent", e->seq);
		}
		if (e->zend)
			p->ztail = e->zend;
		p->queued_bytes -= total;
		p->head++;
	}
}

uint64_t peer_ahead_bytes(const struct peer *p)
{
	int unacked = 0;

	/* SIOCOUTQ: unsent, and sent but not yet acknowledged by the peer's
	 * TCP -- what sits in the link's queues counts */
	if (p->ev.fd >= 0 && ioctl(p->ev.fd, SIOCOUTQ, &unacked) < 0)
		unacked = 0;
	return p->queued_bytes - p->off + p->pipe_len + (uint64_t)(unacked > 0 ? unacked : 0);
}

/* Splicing does not work here: say so once, copy from now on. */
static void peer_stop_splicing(struct peer *p, const char *what)
{
	log_warning("%s: peer %s: %s: %s; sending ring payloads by copy",
		    p->resource, p->cfg.name, what, strerror(errno));
	p->no_splice = true;
	for (uint64_t i = p->head; i != p->tail; i++)
		peer_entry(p, i)->splice = false;
}

/*
 * Move the rest of the head entry (a large payload) into the pipe: the
 * header by copy, the payload by vmsplice(), which hands the socket
 * references to its pages.  Returns bytes moved, 0 when the pipe is full,
 * -1 when splicing failed (the entry is then sent by copy).
 */
static ssize_t peer_fill_pipe(struct peer *p)
{
	struct peer_entry *e = peer_entry(p, p->head);
	size_t off = p->off;
	struct iovec iov;
	ssize_t n;

	if (p->pipe[0] < 0) {
		if (pipe2(p->pipe, O_NONBLOCK | O_CLOEXEC) < 0) {
			p->pipe[0] = p->pipe[1] = -1;
			peer_stop_splicing(p, "pipe2");
			return -1;
		}
		/* best effort: a bigger pipe means fewer splice() calls */
		(void)fcntl(p->pipe[1], F_SETPIPE_SZ, (int)PEER_SPLICE_PIPE);
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
		peer_close(p, tls_io_error(&p->io, errno));
	return false;
}

/* @sent bytes reached the socket. */
static void peer_on_wire(struct peer *p, ssize_t sent)
{
	p->bytes_sent += (uint64_t)sent;
	p->last_tx_ms = loop_now_ms();
}

void peer_flush(struct peer *p)
{
	uint64_t t0 = loop_now_ms();
	struct iovec iov[PEER_IOV];
	bool pipe_full = false;
	unsigned int n;
	uint64_t i;
	ssize_t sent;

	while (p->ev.fd >= 0 && (p->pipe_len || p->head != p->tail)) {
		size_t off = p->off;

		if (loop_now_ms() - t0 >= PEER_FLUSH_MS) {
			/* the socket still takes more: EPOLLOUT brings us back
			 * once the loop has read what came in */
			peer_arm(p, true);
			return;
		}

		if (p->head != p->tail && peer_entry(p, p->head)->splice && !pipe_full) {
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
			sent = splice(p->pipe[0], NULL, p->ev.fd, NULL, p->pipe_len,
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
		for (i = p->head; i != p->tail && n + 2 <= PEER_IOV; i++) {
			struct peer_entry *e = peer_entry(p, i);

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
		sent = tls_io_writev(&p->io, iov, (int)n);
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

void peer_send_now(struct peer *p, const void *buf, size_t len)
{
	if (p->ev.fd < 0 || p->io.handshaking || tls_io_write(&p->io, buf, len) < 0)
		log_debug("%s: peer %s: cannot send the Error", p->resource, p->cfg.name);
}

static ssize_t peer_readv(void *ctx, const struct iovec *iov, int iovcnt)
{
	return tls_io_readv(ctx, iov, iovcnt);
}

static void peer_read(struct peer *p)
{
	struct wire_msg msg;
	int r;

	r = wire_reader_fill_fn(&p->rd, peer_readv, &p->io);
	if (r == 0) {
		peer_close(p, "closed by peer");
		return;
	}
	if (r < 0 && r != -EAGAIN) {
		peer_close(p, tls_io_error(&p->io, -r));
		return;
	}
	p->last_rx_ms = loop_now_ms();
	while (p->ev.fd >= 0 && (r = wire_reader_next(&p->rd, &msg)) > 0)
		p->ops->frame(p, &msg);
	if (r == -ENOBUFS && p->ev.fd >= 0)
		peer_close(p, "Data frame from a secondary");
	else if (r < 0 && p->ev.fd >= 0)
		peer_close(p, wire_reader_error(&p->rd));
}

/*
 * One step of the TLS handshake; once it is done, the owner's handshake
 * begins.  False while it is not done (or failed: the connection is gone).
 */
static bool peer_tls_step(struct peer *p)
{
	char why[sizeof(p->cfg.address.text) + sizeof(p->io.err) + 8];
	int r = tls_io_handshake(&p->io);

	if (r == 0) {
		peer_arm(p, p->io.want_write);
		return false;
	}
	if (r < 0) {
		snprintf(why, sizeof(why), "%s: %s", p->cfg.address.text, p->io.err);
		peer_close(p, why);
		return false;
	}
	tls_io_describe(&p->io, why, sizeof(why));
	log_info("%s: peer %s: %s", p->resource, p->cfg.name, why);
	peer_arm(p, false);
	p->ops->connected(p);
	return p->ev.fd >= 0;
}

static void peer_event(struct ev *ev, uint32_t events)
{
	struct peer *p = container_of(ev, struct peer, ev);

	if (p->io.handshaking) {
		if (!peer_tls_step(p))
			return;
		events |= EPOLLOUT;	/* the Hello is queued */
	} else if (p->state == PEER_CONNECTING &&
		   (events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
		int err = 0;
		socklen_t len = sizeof(err);

		getsockopt(ev->fd, SOL_SOCKET, SO_ERROR, &err, &len);
		if (err) {
			char why[320];

			snprintf(why, sizeof(why), "connect %s: %s", p->cfg.address.text,
				 strerror(err));
			peer_close(p, why);
			return;
		}
		p->state = PEER_HANDSHAKE;
		p->state_since_ms = loop_now_ms();
		if (p->tls && *p->tls) {
			if (tls_io_start(&p->io, *p->tls, false, p->cfg.name) < 0) {
				peer_close(p, p->io.err);
				return;
			}
			if (!peer_tls_step(p))
				return;
			events |= EPOLLOUT;
		} else {
			p->ops->connected(p);
		}
	}
	if (p->ev.fd >= 0 && (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)))
		peer_read(p);
	/* what TLS decrypted beyond the reader's room: no event reports it */
	while (p->ev.fd >= 0 && tls_io_pending(&p->io))
		peer_read(p);
	/* peer_flush() disarms EPOLLOUT once the queue is empty */
	if (p->ev.fd >= 0 && (events & EPOLLOUT))
		peer_flush(p);
	if (p->ev.fd >= 0)
		p->ops->pump(p);
}

void peer_connect(struct peer *p)
{
	uint64_t now = loop_now_ms();
	int fd, r;

	fd = socket(p->cfg.address.sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		peer_close(p, "socket() failed");
		return;
	}
	sock_tune(fd);
	p->ev.fd = fd;
	if (p->rate_limit)
		peer_apply_rate(p);
	tls_io_init(&p->io, fd);
	p->connects++;
	r = connect(fd, (struct sockaddr *)&p->cfg.address.sa, p->cfg.address.len);
	if (r < 0 && errno != EINPROGRESS) {
		char why[320];

		snprintf(why, sizeof(why), "connect %s: %s", p->cfg.address.text, strerror(errno));
		close(fd);
		p->ev.fd = -1;
		peer_close(p, why);
		return;
	}
	p->state = PEER_CONNECTING;
	p->state_since_ms = now;
	p->last_rx_ms = now;
	p->want_out = true;
	r = loop_add(p->loop, &p->ev, EPOLLIN | EPOLLOUT | EPOLLRDHUP);
	if (r < 0)
		peer_close(p, "epoll");
}

int peer_adopt_fd(struct peer *p, int fd)
{
	uint64_t now = loop_now_ms();
	int r;

	if (p->tls && *p->tls) {
		close(fd);
		return -EOPNOTSUPP;
	}
	/* whatever connection attempt there was goes, without a call back */
	if (p->ev.fd >= 0) {
		loop_del(p->loop, &p->ev);
		close(p->ev.fd);
	}
	tls_io_free(&p->io);
	peer_pipe_close(p);
	wire_reader_reset(&p->rd);
	peer_queue_drop(p);
	p->zstd_peer = false;
	p->ev.fd = fd;
	if (p->rate_limit)
		peer_apply_rate(p);
	tls_io_init(&p->io, fd);
	p->connects++;
	p->state = PEER_HANDSHAKE;
	p->state_since_ms = now;
	p->last_rx_ms = now;
	p->want_out = false;
	r = loop_add(p->loop, &p->ev, EPOLLIN | EPOLLRDHUP);
	if (r < 0) {
		peer_close(p, "epoll");
		return r;
	}
	/* as peer_event() once a connect() completed */
	p->ops->connected(p);
	if (p->ev.fd >= 0)
		peer_flush(p);
	if (p->ev.fd >= 0)
		p->ops->pump(p);
	return 0;
}

void peer_tick(struct peer *p, uint64_t now, bool may_connect, unsigned int timeout_ms,
	       unsigned int keepalive_ms)
{
	switch (p->state) {
	case PEER_DOWN:
		if (may_connect && now >= p->next_attempt_ms)
			peer_connect(p);
		break;
	case PEER_CONNECTING:
	case PEER_HANDSHAKE:
		if (now - p->state_since_ms > timeout_ms)
			peer_close(p, "handshake timed out");
		break;
	case PEER_UP:
		if (now - p->last_rx_ms > timeout_ms) {
			peer_close(p, "no answer within peer-timeout-ms");
			break;
		}
		if (now - p->last_tx_ms >= keepalive_ms && p->head == p->tail) {
			uint8_t buf[32];
			ssize_t k = wire_encode_keepalive(buf, sizeof(buf), now);

			if (k > 0 && peer_queue_frame(p, buf, (size_t)k) == 0)
				peer_flush(p);
		}
		break;
	}
}

int peer_init(struct peer *p, struct loop *l, const struct peer_ops *ops, const char *resource,
	      const struct config_peer *cfg, unsigned int backoff_min_ms,
	      unsigned int backoff_max_ms)
{
	memset(p, 0, sizeof(*p));
	p->q = calloc(PEER_QUEUE_LEN, sizeof(*p->q));
	if (!p->q || wire_reader_init(&p->rd, peer_no_payload, NULL) < 0) {
		free(p->q);
		p->q = NULL;
		return -ENOMEM;
	}
	p->loop = l;
	p->ops = ops;
	snprintf(p->resource, sizeof(p->resource), "%s", resource);
	p->cfg = *cfg;
	p->ev = (struct ev) { .fd = -1, .fn = peer_event };
	tls_io_init(&p->io, -1);
	p->pipe[0] = p->pipe[1] = -1;
	p->backoff_min_ms = backoff_min_ms;
	p->backoff_max_ms = backoff_max_ms;
	p->backoff_ms = backoff_min_ms;
	p->state_since_ms = loop_now_ms();
	p->zskip_next = 1;
	return 0;
}

void peer_fini(struct peer *p)
{
	loop_del(p->loop, &p->ev);	/* also its events of this batch */
	if (p->ev.fd >= 0)
		close(p->ev.fd);
	p->ev.fd = -1;
	tls_io_free(&p->io);
	peer_pipe_close(p);
	wire_reader_free(&p->rd);
	free(p->q);
	p->q = NULL;
	free(p->zbuf);
	p->zbuf = NULL;
	ZSTD_freeCCtx(p->zcctx);
	p->zcctx = NULL;
}
