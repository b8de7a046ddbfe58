// SPDX-License-Identifier: GPL-2.0-only
/*
 * The connection to the primary at its lowest: output, errors, closing.
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
#include "sock.h"
#include "secondary.h"

void conn_arm(struct conn *c)
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
static void conn_log_refused(struct secondary *s, const char *node, const char *addr,
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
void conn_cand_unlink(struct secondary *s, const struct conn *c)
{
	for (unsigned int i = 0; i < SEC_MAX_CANDS; i++)
		if (s->cands[i] == c)
			s->cands[i] = NULL;
}

/* Close connection c: the primary's or a candidate. */
void conn_drop(struct secondary *s, struct conn *c, const char *why)
{
	if (!c)
		return;
	if (why && c->cand)
		conn_log_refused(s, c->node, c->addr, why);
	else if (why)
		log_warning("%s: primary %s (%s): connection closed: %s", s->resource,
			    c->node[0] ? c->node : "?", c->addr, why);
	if (s->conn == c)
		s->conn = NULL;
	conn_cand_unlink(s, c);
	loop_del(s->env->loop, &c->ev);
	close(c->ev.fd);
	tls_io_free(&c->io);
	wire_reader_free(&c->rd);
	if (c->pending && s->apply)
		apply_buf_put(s->apply, c->pending);
	free(c->bm);
	free(c);
}

void conn_close(struct secondary *s, const char *why)
{
	conn_drop(s, s->conn, why);
}

void conn_flush(struct conn *c)
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
uint8_t *conn_out_space(struct conn *c, size_t need)
{
	if (c->out_off) {
		memmove(c->out, c->out + c->out_off, c->out_len - c->out_off);
		c->out_len -= c->out_off;
		c->out_off = 0;
	}
	return CONN_OUT - c->out_len >= need ? c->out + c->out_len : NULL;
}

void conn_send_error(struct conn *c, Dmrepl__V1__Error__Code code, const char *reason)
{
	uint8_t *b = conn_out_space(c, 512);
	ssize_t n;

	if (c->cand)
		conn_log_refused(c->s, c->node, c->addr, reason);
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

ssize_t conn_readv(void *ctx, const struct iovec *iov, int iovcnt)
{
	return tls_io_readv(ctx, iov, iovcnt);
}
