// SPDX-License-Identifier: GPL-2.0-only
/*
 * repl-badsecondary: a hostile secondary, for testing how a primary treats
 * what a secondary sends (repl-badpeer is the other direction).
 *
 *   repl-badsecondary <host:port> <case> [--node N] [--timeout S]
 *
 * Listens on host:port, takes one connection from the primary, reads its
 * Hello and answers with one of its own (node N, default gamma, a device as
 * large as the primary's), then misbehaves:
 *
 *   forged-ack     once a record arrived: an Ack for a billion more records
 *                  than were sent
 *   ack-backwards  once two records arrived: an Ack for them, then one for less
 *   resume-beyond  the Hello claims the primary's stream, consistent, with
 *                  everything durable up to a billion records past its head
 *   bitmap-flood   the same PeerBitmap piece, without end
 *   bitmap-beyond  a PeerBitmap piece far beyond the device
 *   hash-flood     HashReply frames nobody asked for, without end
 *   flushed-flood  ResyncFlushed frames for resync rounds that never were,
 *                  then an honest Ack
 *
 * and reports the primary's reaction on stdout, one line: "closed" (the
 * primary dropped the connection), "error <code> <reason>", "first-seq <N>"
 * (resume-beyond: where the primary's records began, or "resync" when it
 * started a resync instead) or "silent" (nothing happened within the
 * timeout, default 10 s).  Exit 0 when the primary refused (closed,
 * error, or resume-beyond without a resume past its head), 1 when it
 * accepted, 2 on a usage or setup error.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "tcp.h"
#include "wire.h"
#include "wire-raw.h"

#include "tool.h"

#define FAR	1000000000ULL

static const char *node = "gamma";
static int timeout_s = 10;
static uint8_t payload[WIRE_MAX_PAYLOAD];

static void *payload_buf(void *ctx, const Dmrepl__V1__Data *d)
{
	return payload;
}

static int listen_on(const char *hostport)
{
	struct config_addr a;
	int r = config_addr_parse(hostport, false, &a);

	return r < 0 ? r : tcp_listen(&a, 4);
}

static int send_buf(int fd, const uint8_t *b, ssize_t n)
{
	struct iovec iov = { .iov_base = (void *)b, .iov_len = (size_t)n };

	return n > 0 ? wire_write_all(fd, &iov, 1) : -EMSGSIZE;
}

struct peer {
	int fd;
	struct wire_reader rd;
	uint64_t records, last_seq, first_seq;
	bool got_data, resync;
	uint64_t stream_id, sectors, gen;
};

/*
 * Read what is there (wait up to ms for it): 1 on progress, 0 nothing, -1
 * the primary closed or sent an Error (printed).
 */
static int pump(struct peer *p, int ms)
{
	struct pollfd pfd = { .fd = p->fd, .events = POLLIN };
	struct wire_msg msg;
	int r, k;

	if (poll(&pfd, 1, ms) <= 0)
		return 0;
	r = wire_reader_fill(&p->rd, p->fd);
	while ((k = wire_reader_next(&p->rd, &msg)) == 1) {
		switch (msg.type) {
		case DMREPL__V1__FRAME__MSG_ERROR:
			printf("error %d %s\n", msg.frame->error->code, msg.frame->error->reason);
			return -1;
		case DMREPL__V1__FRAME__MSG_HELLO:
			p->stream_id = msg.frame->hello->stream_id;
			p->sectors = msg.frame->hello->device_sectors;
			p->gen = msg.frame->hello->gen_current;
			break;
		case DMREPL__V1__FRAME__MSG_DATA:
			if (!p->got_data)
				p->first_seq = msg.frame->data->seq;
			p->got_data = true;
			p->last_seq = msg.frame->data->seq;
			p->records++;
			break;
		case DMREPL__V1__FRAME__MSG_RESYNC_BEGIN:
			p->resync = true;
			break;
		default:
			break;
		}
	}
	if (r == 0 || (r < 0 && r != -EAGAIN) || k < 0) {
		printf("closed\n");
		return -1;
	}
	return 1;
}

/* Keep reading until the primary reacts; -1 when it did (closed or Error). */
static int wait_verdict(struct peer *p, int ms)
{
	uint64_t end = now_ms() + (uint64_t)ms;

	while (now_ms() < end)
		if (pump(p, 100) < 0)
			return -1;
	return 0;
}

static int send_hello(struct peer *p, bool claim, uint64_t resume)
{
	Dmrepl__V1__Hello h = wire_raw_hello(1, node, "r0", DMREPL__V1__ROLE__ROLE_SECONDARY,
					     p->sectors);
	uint8_t b[1024];

	if (claim) {
		h.stream_id = p->stream_id;
		h.resume_seq = resume;
		h.consistent = true;
		h.gen_current = p->gen;
	}
	return send_buf(p->fd, b, wire_encode_hello(b, sizeof(b), &h));
}

static int send_ack(struct peer *p, uint64_t received, uint64_t written, uint64_t durable)
{
	uint8_t b[64];

	return send_buf(p->fd, b, wire_encode_ack(b, sizeof(b), received, written, durable));
}

/* Until at least n records arrived; -1 if the primary reacted first. */
static int wait_records(struct peer *p, uint64_t n)
{
	uint64_t end = now_ms() + (uint64_t)timeout_s * 1000;

	while (p->records < n && now_ms() < end)
		if (pump(p, 100) < 0)
			return -1;
	return p->records >= n ? 0 : 1;
}

/* Send frames of b until the primary reacts or the timeout. */
static int flood(struct peer *p, const uint8_t *b, ssize_t n)
{
	uint64_t end = now_ms() + (uint64_t)timeout_s * 1000;

	while (now_ms() < end) {
		for (int i = 0; i < 64; i++)
			if (send_buf(p->fd, b, n) < 0) {
				printf("closed\n");
				return 0;
			}
		if (pump(p, 0) < 0)
			return 0;
	}
	printf("silent\n");
	return 1;
}

static int run(struct peer *p, const char *c)
{
	uint8_t b[WIRE_MAX_MSG];
	int r;

	if (!strcmp(c, "resume-beyond")) {
		if (send_hello(p, true, p->last_seq + FAR) < 0)
			return 2;
		/* where does the stream begin? (or a resync, or a refusal) */
		for (uint64_t end = now_ms() + (uint64_t)timeout_s * 1000;
		     !p->got_data && !p->resync && now_ms() < end;)
			if (pump(p, 100) < 0)
				return 0;
		if (p->resync) {
			printf("resync\n");
			return 0;
		}
		if (!p->got_data) {
			printf("silent\n");
			return 1;
		}
		printf("first-seq %llu\n", (unsigned long long)p->first_seq);
		return p->first_seq >= FAR ? 1 : 0;
	}
	if (send_hello(p, false, 0) < 0)
		return 2;
	if (!strcmp(c, "forged-ack")) {
		if ((r = wait_records(p, 1)))
			return r < 0 ? 0 : (printf("silent\n"), 1);
		send_ack(p, p->last_seq + 1 + FAR, 0, 0);
	} else if (!strcmp(c, "ack-backwards")) {
		if ((r = wait_records(p, 2)))
			return r < 0 ? 0 : (printf("silent\n"), 1);
		send_ack(p, p->first_seq + 2, p->first_seq + 2, p->first_seq + 2);
		send_ack(p, p->first_seq + 1, p->first_seq + 1, p->first_seq + 1);
	} else if (!strcmp(c, "bitmap-flood") || !strcmp(c, "bitmap-beyond")) {
		uint8_t bits[512];

		memset(bits, 0xff, sizeof(bits));
		return flood(p, b, wire_encode_peer_bitmap(b, sizeof(b),
							   c[7] == 'f' ? 0 : FAR * 1000, 16, bits,
							   sizeof(bits), false));
	} else if (!strcmp(c, "hash-flood")) {
		uint64_t h[16] = { 0 };

		return flood(p, b, wire_encode_hash_reply(b, sizeof(b), 12345, h, 16));
	} else if (!strcmp(c, "flushed-flood")) {
		for (uint64_t id = 1; id <= 1000; id++)
			if (send_buf(p->fd, b, wire_encode_resync_flushed(b, sizeof(b), FAR + id)) < 0) {
				printf("closed\n");
				return 0;
			}
		/* an honest Ack after them: a primary that is still up takes it */
		if ((r = wait_records(p, 1)))
			return r < 0 ? 0 : (printf("silent\n"), 1);
		send_ack(p, p->last_seq + 1, p->last_seq + 1, 0);
		if (wait_verdict(p, 2000) < 0)
			return 0;
		printf("alive %llu\n", (unsigned long long)p->records);
		return 1;
	} else {
		fprintf(stderr, "repl-badsecondary: unknown case %s\n", c);
		return 2;
	}
	if (wait_verdict(p, timeout_s * 1000) < 0)
		return 0;
	printf("silent\n");
	return 1;
}

int main(int argc, char **argv)
{
	struct peer p = { 0 };
	struct pollfd pfd;
	int lfd, r;

	if (argc < 3) {
		fprintf(stderr, "usage: repl-badsecondary <host:port> <case> [--node N] [--timeout S]\n");
		return 2;
	}
	for (int i = 3; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--node"))
			node = argv[i + 1];
		else if (!strcmp(argv[i], "--timeout"))
			timeout_s = atoi(argv[i + 1]);
	}
	signal(SIGPIPE, SIG_IGN);
	lfd = listen_on(argv[1]);
	if (lfd < 0) {
		fprintf(stderr, "repl-badsecondary: listen %s: %s\n", argv[1], strerror(-lfd));
		return 2;
	}
	pfd = (struct pollfd) { .fd = lfd, .events = POLLIN };
	if (poll(&pfd, 1, timeout_s * 1000) <= 0) {
		printf("no connection\n");
		return 2;
	}
	p.fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	close(lfd);
	if (p.fd < 0 || wire_reader_init(&p.rd, payload_buf, NULL) < 0)
		return 2;
	/* the primary's Hello comes first */
	for (uint64_t end = now_ms() + (uint64_t)timeout_s * 1000; !p.sectors;) {
		if (now_ms() >= end || pump(&p, 100) < 0) {
			printf("no Hello\n");
			return 2;
		}
	}
	r = run(&p, argv[2]);
	fflush(stdout);
	wire_reader_free(&p.rd);
	close(p.fd);
	return r;
}
