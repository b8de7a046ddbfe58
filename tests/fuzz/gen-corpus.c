// SPDX-License-Identifier: GPL-2.0-only
/*
 * Write the seed corpus of fuzz-wire: valid streams made with the encoders,
 * and malformed ones.  Each file is a control byte (see fuzz-wire.c) and
 * the bytes a peer sends.  The checked-in tests/fuzz/corpus was made with
 *
 *	gen-wire-corpus tests/fuzz/corpus
 *
 * (files found by the fuzzer may be added next to them).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire.h"
#include "wire-raw.h"

static uint8_t buf[1 << 20];
static size_t len;

static void die(const char *what)
{
	fprintf(stderr, "gen-wire-corpus: %s\n", what);
	exit(1);
}

static void start(uint8_t ctl)
{
	buf[0] = ctl;
	len = 1;
}

static void put(const void *p, size_t n)
{
	if (n > sizeof(buf) - len)
		die("stream too long");
	memcpy(buf + len, p, n);
	len += n;
}

static void enc(ssize_t n)
{
	if (n < 0)
		die("an encoder failed");
	len += (size_t)n;
}

#define ROOM	(buf + len), (sizeof(buf) - len)

static void put_be32(uint32_t v)
{
	uint8_t b[4] = { (uint8_t)(v >> 24), (uint8_t)(v >> 16),
			 (uint8_t)(v >> 8), (uint8_t)v };

	put(b, 4);
}

static void data(uint64_t seq, uint16_t op, uint16_t flags, uint64_t sector,
		 uint32_t nr)
{
	struct dm_repl_rec rec = {
		.seq = seq, .sector = sector, .nr_sectors = nr, .op = op,
		.flags = flags, .epoch = seq / 4,
		.data_len = op == DM_REPL_OP_WRITE ? nr * 512 : 0,
	};
	uint32_t i;

	enc(wire_encode_data(ROOM, &rec));
	for (i = 0; i < rec.data_len; i++)
		buf[len + i] = (uint8_t)(seq + i * 7);
	if (rec.data_len > sizeof(buf) - len)
		die("stream too long");
	len += rec.data_len;
}

static void hello(Dmrepl__V1__Role role, const char *node)
{
	Dmrepl__V1__Hello h = wire_raw_hello(WIRE_PROTOCOL_VERSION, node, "r0", role, 1 << 21);

	h.stream_id = 0x1122334455667788ULL;
	h.mode = DMREPL__V1__MODE__MODE_SEMI_SYNC;
	h.resume_seq = role == DMREPL__V1__ROLE__ROLE_SECONDARY ? 17 : 0;
	enc(wire_encode_hello(ROOM, &h));
}

/* A frame packed without validation. */
static void raw(const Dmrepl__V1__Frame *f)
{
	size_t n = wire_raw_pack(ROOM, f);

	if (!n)
		die("stream too long");
	len += n;
}

/* A Data frame packed without validation. */
static void raw_data(uint32_t op, uint64_t sector, uint32_t nr,
		     uint32_t payload_len)
{
	size_t n = wire_raw_data(ROOM, 9, op, 0, sector, nr, payload_len);

	if (!n)
		die("stream too long");
	len += n;
}

static void save(const char *dir, const char *name)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	if (!f || fwrite(buf, 1, len, f) != len || fclose(f) != 0)
		die(path);
}

int main(int argc, char **argv)
{
	const char *dir = argc > 1 ? argv[1] : ".";
	static char big[4200];
	uint8_t b[8];
	size_t i;

	/* a session from the secondary's side, then from the primary's */
	start(0x00);
	hello(DMREPL__V1__ROLE__ROLE_PRIMARY, "alpha");
	enc(wire_encode_set_mode(ROOM, DMREPL__V1__MODE__MODE_SYNC));
	data(17, DM_REPL_OP_WRITE, 0, 0, 1);
	data(18, DM_REPL_OP_WRITE, DM_REPL_F_FUA, 8, 8);
	data(19, DM_REPL_OP_FLUSH, DM_REPL_F_SYNC, 0, 0);
	data(20, DM_REPL_OP_DISCARD, 0, 64, 1024);
	data(21, DM_REPL_OP_WRITE_ZEROES, 0, 4096, 8);
	enc(wire_encode_keepalive(ROOM, 123456789));
	data(22, DM_REPL_OP_WRITE, DM_REPL_F_SYNC, 100, 3);
	save(dir, "valid-primary-session");

	start(0x0b);
	hello(DMREPL__V1__ROLE__ROLE_SECONDARY, "beta.example-2");
	enc(wire_encode_ack(ROOM, 18, 18, 17));
	enc(wire_encode_ack(ROOM, 22, 20, 20));
	enc(wire_encode_keepalive(ROOM, 1));
	enc(wire_encode_error(ROOM, DMREPL__V1__ERROR__CODE__CODE_SHUTDOWN,
			      "secondary shutting down"));
	save(dir, "valid-secondary-session");

	/* every message type, small chunks, refusing callback */
	start(0x18 | 1);
	hello(DMREPL__V1__ROLE__ROLE_PRIMARY, "a");
	data(1, DM_REPL_OP_WRITE, 0, 0, 2);
	enc(wire_encode_ack(ROOM, 1, 1, 0));
	enc(wire_encode_set_mode(ROOM, DMREPL__V1__MODE__MODE_ASYNC));
	enc(wire_encode_keepalive(ROOM, 0));
	enc(wire_encode_error(ROOM, DMREPL__V1__ERROR__CODE__CODE_BUSY,
			      "another primary is connected"));
	save(dir, "valid-all-types");

	/* resync: the primary's side, then the secondary's */
	start(0x00);
	hello(DMREPL__V1__ROLE__ROLE_PRIMARY, "alpha");
	enc(wire_encode_resync_begin(ROOM, 0, true));
	enc(wire_encode_hash_request(ROOM, 1, 128, 64, 8));
	enc(wire_encode_resync_data(ROOM, 136, 8));
	for (i = 0; i < 4096; i++)
		buf[len + i] = (uint8_t)(i * 13);
	len += 4096;
	data(5, DM_REPL_OP_WRITE, 0, 140, 2);
	enc(wire_encode_resync_flush(ROOM, 2, true, 0x0123456789abcdefULL));
	save(dir, "valid-resync-primary");

	start(0x00);
	hello(DMREPL__V1__ROLE__ROLE_SECONDARY, "beta");
	{
		static const uint8_t bits[] = { 0x81, 0, 0xff, 0x10 };
		static const uint64_t h[8] = { 1, 2, 3, 4, 5, 6, 7, UINT64_MAX };

		enc(wire_encode_peer_bitmap(ROOM, 0, 16, bits, sizeof(bits), false));
		enc(wire_encode_peer_bitmap(ROOM, 32, 16, NULL, 0, true));
		enc(wire_encode_hash_reply(ROOM, 1, h, 8));
	}
	enc(wire_encode_resync_flushed(ROOM, 2));
	save(dir, "valid-resync-secondary");

	/* a HashRequest of 300 blocks: refused */
	start(0x00);
	{
		Dmrepl__V1__Frame f = DMREPL__V1__FRAME__INIT;
		Dmrepl__V1__HashRequest hr = DMREPL__V1__HASH_REQUEST__INIT;

		hr.id = 1;
		hr.sector = 0;
		hr.nr_sectors = 2400;
		hr.block_sectors = 8;
		f.msg_case = DMREPL__V1__FRAME__MSG_HASH_REQUEST;
		f.hash_request = &hr;
		raw(&f);
	}
	save(dir, "bad-hash-request-size");

	/* payloads across the 64 KiB read buffer */
	start(0x04);
	data(1000, DM_REPL_OP_WRITE, 0, 0, 120);
	data(1001, DM_REPL_OP_WRITE, DM_REPL_F_FUA, 120, 8);
	data(1002, DM_REPL_OP_FLUSH, 0, 0, 0);
	save(dir, "valid-big-writes");

	/* zstd-encoded payloads (the decoder passes them on as they are) */
	start(0x00);
	{
		struct dm_repl_rec rec = {
			.seq = 1, .sector = 8, .nr_sectors = 8, .op = DM_REPL_OP_WRITE,
			.data_len = 4096,
		};

		enc(wire_encode_data_zstd(ROOM, &rec, 100));
		memset(buf + len, 0x5a, 100);
		len += 100;
		enc(wire_encode_resync_data_zstd(ROOM, 64, 16, 8191));
		memset(buf + len, 0x3c, 8191);
		len += 8191;
	}
	save(dir, "valid-zstd-data");

	/* unknown fields inside a message: ignored */
	start(0x02);
	{
		static const uint8_t ka[] = {
			0x2a, 0x0e,			/* Frame.keepalive */
			0x08, 0x05,			/* time_ns 5 */
			0x9a, 0x06, 0x03, 'n', 'e', 'w',/* field 99 */
			0x8d, 0x0c, 1, 2, 3, 4,		/* field 193, fixed32 */
		};
		put_be32(sizeof(ka));
		put(ka, sizeof(ka));
	}
	save(dir, "valid-unknown-fields");

	/* malformed */
	start(0x00);
	enc(wire_encode_keepalive(ROOM, 5));
	put_be32(0);
	save(dir, "bad-length-0");

	start(0x01);
	put_be32(70000);
	memset(b, 0, sizeof(b));
	put(b, sizeof(b));
	save(dir, "bad-length-70000");

	start(0x03);
	enc(wire_encode_ack(ROOM, 3, 2, 1));
	len -= 2;
	save(dir, "bad-truncated-frame");

	start(0x05);
	enc(wire_encode_data(ROOM, &(struct dm_repl_rec) {
		.op = DM_REPL_OP_WRITE, .nr_sectors = 8, .data_len = 4096 }));
	memset(buf + len, 0x33, 4000);
	len += 4000;
	save(dir, "bad-truncated-payload");

	start(0x06);
	put_be32(6);
	put("\xff\xff\xff\xff\xff\xff", 6);
	save(dir, "bad-garbage");

	start(0x07);
	put_be32(4);
	put("\x2a\x00\x1a\x00", 4);		/* keepalive and ack */
	save(dir, "bad-two-members");

	start(0x00);
	{
		static const uint8_t h[] = {
			0x0a, 0x0c,			/* Frame.hello */
			0x08, 0x01,			/* version 1 */
			0x12, 0x03, 'a', 0, 'b',	/* node "a\0b" */
			0x1a, 0x01, 'r',		/* resource */
			0x20, 0x01,			/* role */
		};
		put_be32(sizeof(h));
		put(h, sizeof(h));
	}
	save(dir, "bad-hello-nul");

	start(0x0c);
	raw_data(DM_REPL_OP_WRITE, 0, 16, 4096);
	memset(buf + len, 0x44, 4096);
	len += 4096;
	save(dir, "bad-payload-len");

	start(0x00);
	raw_data(DM_REPL_OP_GAP, 8, 8, 0);
	save(dir, "bad-gap-extent");

	start(0x00);
	raw_data(DM_REPL_OP_DISCARD, UINT64_MAX - 1, 8, 0);
	save(dir, "bad-extent-overflow");

	start(0x00);
	{
		Dmrepl__V1__Frame f = DMREPL__V1__FRAME__INIT;
		Dmrepl__V1__Error e = DMREPL__V1__ERROR__INIT;

		e.code = DMREPL__V1__ERROR__CODE__CODE_IO;
		e.reason = "\xc0\xaf bad utf-8";
		f.msg_case = DMREPL__V1__FRAME__MSG_ERROR;
		f.error = &e;
		raw(&f);
	}
	save(dir, "bad-error-utf8");

	start(0x00);
	{
		Dmrepl__V1__Frame f = DMREPL__V1__FRAME__INIT;
		Dmrepl__V1__Error e = DMREPL__V1__ERROR__INIT;

		memset(big, 'e', 300);
		e.code = DMREPL__V1__ERROR__CODE__CODE_PROTOCOL;
		e.reason = big;
		f.msg_case = DMREPL__V1__FRAME__MSG_ERROR;
		f.error = &e;
		raw(&f);
	}
	save(dir, "bad-error-long-reason");

	/* names of the maximum length, every character class */
	start(0x13);
	hello(DMREPL__V1__ROLE__ROLE_SECONDARY,
	      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._");
	enc(wire_encode_ack(ROOM, UINT64_MAX, UINT64_MAX, UINT64_MAX));
	save(dir, "valid-long-names");

	start(0x00);
	{
		Dmrepl__V1__Frame f = DMREPL__V1__FRAME__INIT;
		Dmrepl__V1__Hello h = wire_raw_hello(1, big, "r", DMREPL__V1__ROLE__ROLE_PRIMARY, 0);

		memset(big, 'x', 4000);
		f.msg_case = DMREPL__V1__FRAME__MSG_HELLO;
		f.hello = &h;
		raw(&f);
	}
	save(dir, "bad-hello-huge-node");

	start(0x00);
	put_be32(3 + 4000);
	put("\x2a\xa0\x1f", 3);			/* keepalive of 4000 bytes */
	for (i = 0; i < 2000; i++)
		put("\x78\x00", 2);		/* field 15 = 0, 2000 times */
	save(dir, "bad-arena-exhaustion");

	return 0;
}
