// SPDX-License-Identifier: GPL-2.0-only
/*
 * The listening sockets and the candidates: connections before their
 * Hello.
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
		why = hello_refusal(s, c, msg.frame->hello, &code);
		if (why) {
			snprintf(c->node, sizeof(c->node), "%s", msg.frame->hello->node);
			conn_send_error(c, code, why);
			return;
		}
		break;
	}
	conn_cand_unlink(s, c);
	if (s->conn)
		conn_close(s, "replaced by a new connection of the primary");
	c->cand = false;
	c->ev.fn = frames_conn_event;
	s->conn = c;
	hello_accept(s, c, msg.frame->hello);
	if (s->conn == c)
		frames_read(s);	/* what followed the Hello */
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

static void cand_event(struct ev *ev, uint32_t events)
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
static void cand_add(struct secondary *s, struct conn *c)
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
void listen_new_conn(struct secondary *s, int fd, const struct sockaddr_storage *sa)
{
	struct conn *c;

	c = calloc(1, sizeof(*c));
	if (!c || wire_reader_init(&c->rd, records_payload_buf, c) < 0) {
		free(c);
		close(fd);
		return;
	}
	c->sa = *sa;
	sock_host_text(sa, c->addr, sizeof(c->addr));
	sock_tune(fd);
	c->s = s;
	c->cand = true;
	c->ev = (struct ev) { .fd = fd, .fn = cand_event };
	tls_io_init(&c->io, fd);
	c->last_rx_ms = c->last_tx_ms = c->since_ms = loop_now_ms();
	cand_add(s, c);
	if (loop_add(s->env->loop, &c->ev, EPOLLIN | EPOLLRDHUP) < 0)
		conn_drop(s, c, "epoll");
	else if (s->env->tls && tls_io_start(&c->io, s->env->tls, true, NULL) < 0)
		conn_drop(s, c, c->io.err);
}

void listen_event(struct ev *ev, uint32_t events)
{
	struct secondary *s = container_of(ev, struct sec_listen, ev)->s;
	struct sockaddr_storage sa;
	socklen_t len = sizeof(sa);
	int fd;

	fd = accept4(ev->fd, (struct sockaddr *)&sa, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (fd < 0)
		return;
	listen_new_conn(s, fd, &sa);
}

int listen_open(struct secondary *s)
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
