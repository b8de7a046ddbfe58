// SPDX-License-Identifier: GPL-2.0-only
/*
 * Reading the primary's frames, dispatched by frame type, and the events
 * of the connection and of the write engine.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "config.h"
#include "log.h"
#include "macro.h"
#include "sock.h"
#include "secondary.h"
#include "tracemark.h"

static bool frame_hello(struct secondary *s, struct conn *c, struct wire_msg *msg)
{
	if (c->up)
		conn_send_error(c, DMREPL__V1__ERROR__CODE__CODE_PROTOCOL, "second Hello");
	else
		hello_accept(s, c, msg->frame->hello);
	return true;
}

static bool frame_set_mode(struct secondary *s, struct conn *c, struct wire_msg *msg)
{
	if (c->up) {
		c->mode = (enum peer_mode)msg->frame->set_mode->mode;
		log_info("%s: primary switched this peer to %s mode", s->resource,
			 config_mode_name(c->mode));
	}
	return true;
}

static bool frame_keepalive(struct secondary *s, struct conn *c, struct wire_msg *msg)
{
	(void)s;
	(void)c;
	(void)msg;
	return true;
}

static bool frame_error(struct secondary *s, struct conn *c, struct wire_msg *msg)
{
	(void)c;
	log_warning("%s: primary reported error %d: %s", s->resource, msg->frame->error->code,
		    msg->frame->error->reason);
	conn_close(s, NULL);
	return false;
}

struct sec_frame {
	sec_frame_fn *fn;
	/* refused with this Error before the Hello and the write engine */
	const char *early;
};

static const struct sec_frame sec_frames[] = {
	[DMREPL__V1__FRAME__MSG_HELLO] = { frame_hello, NULL },
	[DMREPL__V1__FRAME__MSG_DATA] = { records_frame_data, "Data before Hello" },
	[DMREPL__V1__FRAME__MSG_SET_MODE] = { frame_set_mode, NULL },
	[DMREPL__V1__FRAME__MSG_KEEPALIVE] = { frame_keepalive, NULL },
	[DMREPL__V1__FRAME__MSG_ERROR] = { frame_error, NULL },
	[DMREPL__V1__FRAME__MSG_RESYNC_BEGIN] = { pass_frame_begin,
						  "ResyncBegin before Hello" },
	[DMREPL__V1__FRAME__MSG_HASH_REQUEST] = { verify_frame_hash_request,
						  "resync request before Hello" },
	[DMREPL__V1__FRAME__MSG_RESYNC_FLUSH] = { pass_frame_flush,
						  "resync request before Hello" },
};

/* One frame to its handler.  False: stop reading, c is gone. */
static bool frames_dispatch(struct secondary *s, struct conn *c, struct wire_msg *msg)
{
	unsigned int t = (unsigned int)msg->frame->msg_case;
	const struct sec_frame *f = t < ARRAY_SIZE(sec_frames) ? &sec_frames[t] : NULL;

	if (!f || !f->fn) {
		conn_send_error(c, DMREPL__V1__ERROR__CODE__CODE_PROTOCOL,
				"unexpected frame from a primary");
		return true;
	}
	if (f->early && (!c->up || !s->apply)) {
		conn_send_error(c, DMREPL__V1__ERROR__CODE__CODE_PROTOCOL, f->early);
		return true;
	}
	return f->fn(s, c, msg);
}

/*
 * More bytes from the socket into the reader.  1: read some, 0: nothing
 * there (epoll says when), -1: the connection is closed.
 */
static int frames_fill(struct secondary *s, struct conn *c)
{
	int r = wire_reader_fill_fn(&c->rd, conn_readv, &c->io);

	if (r == -EAGAIN)
		return 0;
	if (r == 0) {
		conn_close(s, "closed by the primary");
		return -1;
	}
	if (r < 0) {
		conn_close(s, tls_io_error(&c->io, -r));
		return -1;
	}
	c->last_rx_ms = loop_now_ms();
	return 1;
}

/*
 * The next frame into msg: 1, or 0 when reading stops for now (time is
 * up, the engine is out of buffers, the socket is dry), -1 when the
 * connection is closed or refused.  *filled: the socket was read since
 * frames_read() began (once it runs dry, no read is tried again).
 */
static int frames_next(struct secondary *s, struct conn *c, struct wire_msg *msg, uint64_t t0,
		     bool *filled)
{
	char why[200];
	int r;

	for (;;) {
		if (loop_now_ms() - t0 >= CONN_READ_MS) {
			c->more = true;		/* before_sleep() comes back */
			return 0;
		}
		r = s->apply && apply_full(s->apply) ? -ENOBUFS : wire_reader_next(&c->rd, msg);
		if (r == -ENOBUFS && !s->apply) {
			conn_send_error(c, DMREPL__V1__ERROR__CODE__CODE_PROTOCOL,
					"Data before Hello");
			return -1;
		}
		if (r == -ENOBUFS) {
			/* out of buffers (queued records use memory too): stop
			 * reading until writes complete, and issue what was
			 * read, which holds them */
			c->paused = true;
			conn_arm(c);
			return 0;
		}
		if (r < 0) {
			snprintf(why, sizeof(why), "protocol error: %s", wire_reader_error(&c->rd));
			conn_send_error(c, DMREPL__V1__ERROR__CODE__CODE_PROTOCOL, why);
			return -1;
		}
		if (r > 0)
			return 1;
		/* the socket ran dry on the last read: epoll says when not */
		if (*filled && wire_reader_drained(&c->rd))
			return 0;
		r = frames_fill(s, c);
		if (r <= 0)
			return r;
		*filled = true;
	}
}

void frames_read(struct secondary *s)
{
	struct conn *c = s->conn;
	uint64_t t0 = loop_now_ms();
	struct wire_msg msg;
	bool filled = false;
	int r;

	c->more = false;
	while (s->conn == c && !c->paused) {
		r = frames_next(s, c, &msg, t0, &filled);
		if (r < 0)
			return;
		if (r == 0)
			break;
		if (!frames_dispatch(s, c, &msg))
			return;
	}
	records_apply(s);
	pass_run(s);
	records_send_ack(s);
}

void frames_apply_event(struct ev *ev, uint32_t events)
{
	struct secondary *s = container_of(ev, struct secondary, ev_apply);
	struct conn *c = s->conn;
	int r;

	if (!s->apply)
		return;
	r = apply_run(s->apply);
	tracemark('S', "reaped", -1);
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
		frames_read(s);
	} else {
		pass_run(s);
		records_send_ack(s);
	}
}

void frames_conn_event(struct ev *ev, uint32_t events)
{
	struct conn *c = container_of(ev, struct conn, ev);
	struct secondary *s = c->s;

	if (events & EPOLLOUT) {
		conn_flush(c);
		if (s->conn == c && c->bm_pending)
			hello_send_own_bitmap(s, c);
		if (s->conn == c)
			pass_run(s);
	}
	if (s->conn == c && (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)))
		frames_read(s);
}

/*
 * Frames the reader holds after frames_read() ran out of time, and bytes TLS
 * holds decrypted: no epoll event reports either, so read them now.
 */
bool frames_more(const struct conn *c)
{
	return c && !c->paused && !c->closing && (c->more || tls_io_pending(&c->io));
}
