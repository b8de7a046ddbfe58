// SPDX-License-Identifier: GPL-2.0-only
/*
 * repl-badpeer: a hostile or broken primary, for the secondary's tests.
 *
 *   repl-badpeer <host:port> <case> [--node N] [--resource R] [--sectors S]
 *
 * Cases: oversized, zero-length, garbage, version, unknown-node,
 * wrong-resource, wrong-role, too-big-device, data-before-hello,
 * payload-mismatch, beyond-device, zstd-garbage (a zstd payload that is
 * none), zstd-long and zstd-short (valid zstd frames that decode to more
 * or less than the record's extent), bad-op, truncated, second-hello,
 * backwards-seq, hello-only (a valid Hello: refused only for who sends
 * it), hole (a valid Hello and a record at 1000 of a stream the secondary
 * does not hold: accepted, the copy must mark itself Inconsistent), write
 * (a valid Hello, 4 KiB of 0xa5 at sector 8 and a flush: what an impostor
 * without the key would write).  The cases after the handshake first send a
 * valid Hello as
 * --node (default alpha) for --resource (default r0).  Prints what the
 * secondary answered: "error <code> <reason>", "closed", or "silent" (no
 * answer within 5 s); exit 0 when the secondary refused (error or closed),
 * 1 when it accepted or said nothing, 2 on a local error.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <zstd.h>

#include "config.h"
#include "tcp.h"
#include "wire.h"
#include "wire-raw.h"

static const char *node = "alpha", *resource = "r0";
static uint64_t sectors = 131072;

static int dial(const char *hostport)
{
	struct config_addr a;
	int r = config_addr_parse(hostport, false, &a);

	return r < 0 ? r : tcp_connect(&a);
}

static int send_raw(int fd, const void *buf, size_t len)
{
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };

	return wire_write_all(fd, &iov, 1);
}

/* A frame packed by hand: the encoder refuses invalid frames. */
static int send_frame_unchecked(int fd, const Dmrepl__V1__Frame *f)
{
	uint8_t buf[WIRE_MAX_MSG + 64];
	size_t n = wire_raw_pack(buf, sizeof(buf), f);

	return n ? send_raw(fd, buf, n) : -EMSGSIZE;
}

static int send_hello(int fd, uint32_t version, const char *n, const char *res,
		      Dmrepl__V1__Role role, uint64_t sec)
{
	Dmrepl__V1__Frame f = DMREPL__V1__FRAME__INIT;
	Dmrepl__V1__Hello h = wire_raw_hello(version, n, res, role, sec);

	h.stream_id = 0x5ca1ab1e;
	f.msg_case = DMREPL__V1__FRAME__MSG_HELLO;
	f.hello = &h;
	return send_frame_unchecked(fd, &f);
}

static int send_data(int fd, uint64_t seq, uint32_t op, uint64_t sector, uint32_t nr,
		     uint32_t payload_len, size_t payload_bytes)
{
	static uint8_t zero[1 << 20];
	uint8_t buf[WIRE_MAX_MSG];
	size_t n = wire_raw_data(buf, sizeof(buf), seq, op, 0, sector, nr, payload_len);
	int r;

	if (!n)
		return -EMSGSIZE;
	memset(zero, 0xa5, payload_bytes);
	r = send_raw(fd, buf, n);
	if (!r && payload_bytes)
		r = send_raw(fd, zero, payload_bytes);
	return r;
}

/* A WRITE of nr sectors at sector whose payload is len bytes "in zstd". */
static int send_zdata(int fd, uint64_t sector, uint32_t nr, const void *payload, size_t len)
{
	Dmrepl__V1__Frame f = DMREPL__V1__FRAME__INIT;
	Dmrepl__V1__Data d = DMREPL__V1__DATA__INIT;
	uint8_t buf[WIRE_MAX_MSG];
	size_t n;
	int r;

	d.op = DM_REPL_OP_WRITE;
	d.sector = sector;
	d.nr_sectors = nr;
	d.payload_len = (uint32_t)len;
	d.encoding = DMREPL__V1__ENCODING__ENCODING_ZSTD;
	f.msg_case = DMREPL__V1__FRAME__MSG_DATA;
	f.data = &d;
	n = wire_raw_pack(buf, sizeof(buf), &f);
	if (!n)
		return -EMSGSIZE;
	r = send_raw(fd, buf, n);
	return r ? r : send_raw(fd, payload, len);
}

/* A zstd frame of raw bytes of 0xa5: a valid one, of the wrong size. */
static int send_zstd_of(int fd, uint32_t nr, size_t raw)
{
	static uint8_t in[1 << 16], out[1 << 16];
	size_t z;

	memset(in, 0xa5, raw);
	z = ZSTD_compress(out, sizeof(out), in, raw, 1);
	if (ZSTD_isError(z))
		return -EINVAL;
	return send_zdata(fd, 8, nr, out, z);
}

/* Wait for the secondary's verdict, skipping its Hello and keepalives. */
static int verdict(int fd)
{
	struct wire_reader rd;
	struct wire_msg msg;
	struct pollfd p = { .fd = fd, .events = POLLIN };
	int r, k;

	if (wire_reader_init(&rd, NULL, NULL) < 0)
		return 2;
	for (;;) {
		if (poll(&p, 1, 5000) <= 0) {
			printf("silent\n");
			wire_reader_free(&rd);
			return 1;
		}
		r = wire_reader_fill(&rd, fd);
		while ((k = wire_reader_next(&rd, &msg)) == 1) {
			if (msg.type == DMREPL__V1__FRAME__MSG_ERROR) {
				printf("error %d %s\n", msg.frame->error->code,
				       msg.frame->error->reason);
				wire_reader_free(&rd);
				return 0;
			}
		}
		if (r == 0 || (r < 0 && r != -EAGAIN) || k < 0) {
			printf("closed\n");
			wire_reader_free(&rd);
			return 0;
		}
	}
}

int main(int argc, char **argv)
{
	const Dmrepl__V1__Role primary = DMREPL__V1__ROLE__ROLE_PRIMARY;
	const char *c;
	int fd, i, r = 0;

	if (argc < 3) {
		fprintf(stderr, "usage: repl-badpeer <host:port> <case> [--node N] [--resource R] [--sectors S]\n");
		return 2;
	}
	for (i = 3; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--node"))
			node = argv[i + 1];
		else if (!strcmp(argv[i], "--resource"))
			resource = argv[i + 1];
		else if (!strcmp(argv[i], "--sectors"))
			sectors = strtoull(argv[i + 1], NULL, 0);
	}
	fd = dial(argv[1]);
	if (fd < 0) {
		fprintf(stderr, "repl-badpeer: connect %s: %s\n", argv[1], strerror(-fd));
		return 2;
	}
	c = argv[2];
	if (!strcmp(c, "oversized")) {
		uint8_t b[4] = { 0x00, 0x01, 0x86, 0xa0 };	/* 100000 */

		r = send_raw(fd, b, 4);
	} else if (!strcmp(c, "zero-length")) {
		uint8_t b[4] = { 0, 0, 0, 0 };

		r = send_raw(fd, b, 4);
	} else if (!strcmp(c, "garbage")) {
		uint8_t b[68] = { 0, 0, 0, 64 };

		for (i = 4; i < 68; i++)
			b[i] = (uint8_t)(i * 37 + 11);
		r = send_raw(fd, b, sizeof(b));
	} else if (!strcmp(c, "version")) {
		r = send_hello(fd, 99, node, resource, primary, sectors);
	} else if (!strcmp(c, "unknown-node")) {
		r = send_hello(fd, 1, "mallory", resource, primary, sectors);
	} else if (!strcmp(c, "wrong-resource")) {
		r = send_hello(fd, 1, node, "other", primary, sectors);
	} else if (!strcmp(c, "wrong-role")) {
		r = send_hello(fd, 1, node, resource, DMREPL__V1__ROLE__ROLE_SECONDARY, sectors);
	} else if (!strcmp(c, "too-big-device")) {
		r = send_hello(fd, 1, node, resource, primary, sectors * 1024);
	} else if (!strcmp(c, "data-before-hello")) {
		r = send_data(fd, 0, DM_REPL_OP_WRITE, 0, 8, 4096, 4096);
	} else {
		/* cases after a valid handshake */
		r = send_hello(fd, 1, node, resource, primary, sectors);
		if (!r && !strcmp(c, "payload-mismatch"))
			r = send_data(fd, 0, DM_REPL_OP_WRITE, 0, 8, 100, 100);
		else if (!r && !strcmp(c, "beyond-device"))
			r = send_data(fd, 0, DM_REPL_OP_WRITE, sectors * 4, 8, 4096, 4096);
		else if (!r && !strcmp(c, "zstd-garbage")) {
			static uint8_t junk[100];

			memset(junk, 0xa5, sizeof(junk));
			r = send_zdata(fd, 8, 8, junk, sizeof(junk));
		} else if (!r && !strcmp(c, "zstd-long"))
			r = send_zstd_of(fd, 8, 8192);	/* 8 sectors: 4096 bytes */
		else if (!r && !strcmp(c, "zstd-short"))
			r = send_zstd_of(fd, 8, 2048);
		else if (!r && !strcmp(c, "bad-op"))
			r = send_data(fd, 0, 77, 0, 8, 0, 0);
		else if (!r && !strcmp(c, "truncated")) {
			uint8_t b[6] = { 0, 0, 0, 40, 0x12, 0x05 };

			r = send_raw(fd, b, sizeof(b));
			shutdown(fd, SHUT_WR);
		} else if (!r && !strcmp(c, "write")) {
			/* an impostor's write: 4 KiB of 0xa5 at sector 8, flushed */
			r = send_data(fd, 0, DM_REPL_OP_WRITE, 8, 8, 4096, 4096);
			if (!r)
				r = send_data(fd, 1, DM_REPL_OP_FLUSH, 0, 0, 0, 0);
		} else if (!r && !strcmp(c, "hello-only")) {
			/* nothing more: refused only for who sends it */
		} else if (!r && !strcmp(c, "second-hello"))
			r = send_hello(fd, 1, node, resource, primary, sectors);
		else if (!r && !strcmp(c, "hole")) {
			/* a primary whose stream goes on past a hole, then dies
			 * before any resync: a valid flush at record 1000 */
			r = send_data(fd, 1000, DM_REPL_OP_FLUSH, 0, 0, 0, 0);
			if (!r)
				sleep(1);
		} else if (!r && !strcmp(c, "backwards-seq")) {
			r = send_data(fd, 10, DM_REPL_OP_FLUSH, 0, 0, 0, 0);
			if (!r)
				r = send_data(fd, 5, DM_REPL_OP_FLUSH, 0, 0, 0, 0);
		} else if (!r) {
			fprintf(stderr, "repl-badpeer: unknown case %s\n", c);
			return 2;
		}
	}
	if (r < 0) {
		/* the secondary may close before we are done: that is a refusal */
		printf("closed\n");
		return 0;
	}
	r = verdict(fd);
	close(fd);
	return r;
}
