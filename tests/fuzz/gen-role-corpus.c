// SPDX-License-Identifier: GPL-2.0-only
/*
 * Write the seed corpora of fuzz-secondary (what a primary sends: its
 * Hello, records, resync blocks and requests) and fuzz-primary (what a
 * secondary sends: its Hello and bitmap, Acks, resync answers), made with
 * the encoders, valid sessions and hostile ones (after badpeer.c and
 * badsecondary.c).  The checked-in corpora were made with
 *
 *	gen-role-corpus secondary tests/fuzz/corpus-secondary
 *	gen-role-corpus primary tests/fuzz/corpus-primary
 *
 * (files found by the fuzzers may be added next to them).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zstd.h>

#include "fuzz-role.h"
#include "wire.h"
#include "wire-raw.h"

static uint8_t buf[1 << 20];
static size_t len;
static const char *dir;
static uint8_t block[WIRE_MAX_PAYLOAD];

static void die(const char *what)
{
	fprintf(stderr, "gen-role-corpus: %s\n", what);
	exit(1);
}

static void enc(ssize_t n)
{
	if (n < 0)
		die("an encoder failed");
	len += (size_t)n;
}

#define ROOM	(buf + len), (sizeof(buf) - len)

static void put(const void *p, size_t n)
{
	if (n > sizeof(buf) - len)
		die("stream too long");
	memcpy(buf + len, p, n);
	len += n;
}

static void save(const char *name)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	if (!f || fwrite(buf, 1, len, f) != len || fclose(f))
		die(path);
	len = 0;
}

/* ---- what a primary sends ---------------------------------------------------- */

static void p_hello(const char *node, const char *resource, Dmrepl__V1__Role role,
		    uint64_t sectors, Dmrepl__V1__Mode mode)
{
	Dmrepl__V1__Hello h = wire_raw_hello(WIRE_PROTOCOL_VERSION, node, resource, role,
					     sectors);

	h.stream_id = FUZZ_ID;
	h.mode = mode;
	enc(wire_encode_hello(ROOM, &h));
}

static void p_hello_ok(void)
{
	p_hello(FUZZ_PRIMARY, FUZZ_RESOURCE, DMREPL__V1__ROLE__ROLE_PRIMARY, FUZZ_DEV_SECTORS,
		DMREPL__V1__MODE__MODE_ASYNC);
}

static void p_data(uint64_t seq, uint16_t op, uint16_t flags, uint64_t sector, uint32_t nr,
		   uint64_t epoch)
{
	struct dm_repl_rec rec = {
		.seq = seq, .sector = sector, .nr_sectors = nr, .op = op, .flags = flags,
		.epoch = epoch,
		.data_len = op == DM_REPL_OP_WRITE ? nr * 512U : 0,
	};

	enc(wire_encode_data(ROOM, &rec));
	if (rec.data_len) {
		memset(block, (int)(0x40 + seq), rec.data_len);
		put(block, rec.data_len);
	}
}

static void p_resync_data(uint64_t sector, uint32_t nr)
{
	enc(wire_encode_resync_data(ROOM, sector, nr));
	memset(block, 0x77, nr * 512U);
	put(block, nr * 512U);
}

/* A WRITE (seq) or a resync block (seq UINT64_MAX) of nr sectors, its
 * payload zstd-compressed (text: it shrinks); bad: it decodes to 512 bytes
 * less than the extent. */
static void p_zdata(uint64_t seq, uint64_t sector, uint32_t nr, bool bad)
{
	static uint8_t z[WIRE_MAX_PAYLOAD];
	struct dm_repl_rec rec = {
		.seq = seq, .sector = sector, .nr_sectors = nr, .op = DM_REPL_OP_WRITE,
		.data_len = nr * 512U,
	};
	size_t raw = nr * 512U - (bad ? 512U : 0U), n;

	for (size_t i = 0; i < raw; i++)
		block[i] = (uint8_t)"dm-repl zstd "[i % 13];
	n = ZSTD_compress(z, sizeof(z), block, raw, 1);
	if (ZSTD_isError(n) || n >= nr * 512U)
		die("zstd");
	if (seq == UINT64_MAX)
		enc(wire_encode_resync_data_zstd(ROOM, sector, nr, (uint32_t)n));
	else
		enc(wire_encode_data_zstd(ROOM, &rec, (uint32_t)n));
	put(z, n);
}

static void secondary_corpus(void)
{
	uint64_t s;

	p_hello_ok();
	save("valid-hello");

	p_hello_ok();
	for (s = 0; s < 6; s++)
		p_data(s, DM_REPL_OP_WRITE, 0, s * 8, 8, 0);
	p_data(6, DM_REPL_OP_FLUSH, 0, 0, 0, 0);
	p_data(7, DM_REPL_OP_DISCARD, 0, 64, 16, 1);
	p_data(8, DM_REPL_OP_WRITE, DM_REPL_F_FUA, 2040, 8, 1);
	p_data(9, DM_REPL_OP_WRITE_ZEROES, 0, 100, 4, 1);
	enc(wire_encode_keepalive(ROOM, 12345));
	enc(wire_encode_set_mode(ROOM, DMREPL__V1__MODE__MODE_SYNC));
	p_data(10, DM_REPL_OP_WRITE, 0, 0, 16, 1);
	p_data(11, DM_REPL_OP_FLUSH, 0, 0, 0, 1);
	save("valid-session");

	/* zstd payloads: records, a resync block; then one of the wrong size */
	p_hello_ok();
	p_zdata(0, 0, 8, false);
	p_zdata(1, 64, 256, false);
	enc(wire_encode_resync_begin(ROOM, 1, false));
	p_zdata(UINT64_MAX, 1024, 2048, false);
	p_data(2, DM_REPL_OP_FLUSH, 0, 0, 0, 0);
	save("valid-zstd");
	p_hello_ok();
	p_zdata(0, 0, 8, false);
	p_zdata(1, 8, 16, true);
	save("bad-zstd-size");

	/* the stream goes on elsewhere than where this copy stopped */
	p_hello_ok();
	p_data(1000, DM_REPL_OP_WRITE, 0, 8, 8, 3);
	p_data(1001, DM_REPL_OP_GAP, 0, 0, 0, 3);
	p_data(1002, DM_REPL_OP_WRITE, 0, 16, 8, 3);
	save("valid-gap");

	/* overlapping writes, one large */
	p_hello_ok();
	p_data(0, DM_REPL_OP_WRITE, 0, 0, 128, 0);
	p_data(1, DM_REPL_OP_WRITE, 0, 8, 8, 0);
	p_data(2, DM_REPL_OP_WRITE, 0, 0, 128, 0);
	p_data(3, DM_REPL_OP_FLUSH, 0, 0, 0, 0);
	save("valid-overlap");

	/* a full resync: blocks between the records, hashes, the final flush */
	p_hello_ok();
	enc(wire_encode_resync_begin(ROOM, 1, true));
	p_data(0, DM_REPL_OP_WRITE, 0, 0, 8, 0);
	p_resync_data(0, 128);
	p_resync_data(128, 128);
	p_data(1, DM_REPL_OP_WRITE, 0, 8, 8, 0);
	enc(wire_encode_hash_request(ROOM, 2, 0, 256, 128));
	p_resync_data(1024, 128);
	enc(wire_encode_resync_flush(ROOM, 3, false, 0));
	enc(wire_encode_resync_flush(ROOM, 4, true, FUZZ_ID));
	p_data(2, DM_REPL_OP_FLUSH, 0, 0, 0, 0);
	save("valid-resync");

	/* a bitmap resync: hashes first */
	p_hello_ok();
	enc(wire_encode_resync_begin(ROOM, 1, false));
	enc(wire_encode_hash_request(ROOM, 2, 0, 2048, 256));
	enc(wire_encode_hash_request(ROOM, 3, 1024, 1024, 8));
	p_resync_data(256, 8);
	enc(wire_encode_resync_flush(ROOM, 4, true, FUZZ_ID + 1));
	save("valid-bitmap-resync");

	/* refused Hellos */
	p_hello("gamma", FUZZ_RESOURCE, DMREPL__V1__ROLE__ROLE_PRIMARY, FUZZ_DEV_SECTORS,
		DMREPL__V1__MODE__MODE_ASYNC);
	save("bad-unknown-node");
	p_hello(FUZZ_PRIMARY, "r1", DMREPL__V1__ROLE__ROLE_PRIMARY, FUZZ_DEV_SECTORS,
		DMREPL__V1__MODE__MODE_ASYNC);
	save("bad-resource");
	p_hello(FUZZ_PRIMARY, FUZZ_RESOURCE, DMREPL__V1__ROLE__ROLE_SECONDARY, FUZZ_DEV_SECTORS,
		DMREPL__V1__MODE__MODE_ASYNC);
	save("bad-role");
	p_hello(FUZZ_PRIMARY, FUZZ_RESOURCE, DMREPL__V1__ROLE__ROLE_PRIMARY,
		FUZZ_DEV_SECTORS + 1, DMREPL__V1__MODE__MODE_SYNC);
	save("bad-device-larger");

	p_data(0, DM_REPL_OP_WRITE, 0, 0, 8, 0);
	save("bad-data-before-hello");

	p_hello_ok();
	p_data(0, DM_REPL_OP_WRITE, 0, FUZZ_DEV_SECTORS - 4, 8, 0);
	save("bad-beyond-end");

	p_hello_ok();
	p_data(0, DM_REPL_OP_DISCARD, 0, FUZZ_DEV_SECTORS, 8, 0);
	save("bad-discard-beyond-end");

	p_hello_ok();
	p_resync_data(FUZZ_DEV_SECTORS - 8, 16);
	save("bad-resync-beyond-end");

	p_hello_ok();
	enc(wire_encode_hash_request(ROOM, 1, FUZZ_DEV_SECTORS - 8, 16, 8));
	save("bad-hash-beyond-end");

	p_hello_ok();
	p_data(5, DM_REPL_OP_WRITE, 0, 0, 8, 0);
	p_data(4, DM_REPL_OP_WRITE, 0, 0, 8, 0);
	save("bad-seq-backwards");

	p_hello_ok();
	p_hello_ok();
	save("bad-second-hello");

	p_hello_ok();
	enc(wire_encode_ack(ROOM, 1, 1, 1));
	save("bad-ack-from-primary");

	p_hello_ok();
	enc(wire_encode_error(ROOM, DMREPL__V1__ERROR__CODE__CODE_PROTOCOL, "go away"));
	save("valid-error");

	p_hello_ok();
	p_data(0, DM_REPL_OP_WRITE, 0, 0, 64, 0);
	len -= 1000;	/* the payload cut short */
	save("bad-truncated-payload");
}

/* ---- what a secondary sends ---------------------------------------------------- */

static void s_hello(const char *node, uint64_t sectors, uint64_t stream, uint64_t resume,
		    bool consistent, uint64_t gen, uint64_t dirty)
{
	Dmrepl__V1__Hello h = wire_raw_hello(WIRE_PROTOCOL_VERSION, node, FUZZ_RESOURCE,
					     DMREPL__V1__ROLE__ROLE_SECONDARY, sectors);

	h.stream_id = stream;
	h.resume_seq = resume;
	h.consistent = consistent;
	h.gen_current = gen;
	h.dirty_regions = dirty;
	enc(wire_encode_hello(ROOM, &h));
}

static void s_bitmap_none(void)
{
	enc(wire_encode_peer_bitmap(ROOM, 0, 16, NULL, 0, true));
}

static void primary_corpus(void)
{
	static const uint8_t bits[4] = { 0x05, 0x00, 0x80, 0x01 };
	uint64_t hash[4] = { 1, 2, 3, 4 };
	uint64_t i;

	/* a new secondary: a full sync */
	s_hello(FUZZ_SECONDARY, FUZZ_DEV_SECTORS, 0, 0, false, 0, 0);
	s_bitmap_none();
	for (i = 1; i <= FUZZ_RECS; i++)
		enc(wire_encode_ack(ROOM, i, i - 1, i / 2));
	for (i = 1; i <= 4; i++)
		enc(wire_encode_resync_flushed(ROOM, i));
	enc(wire_encode_ack(ROOM, FUZZ_RECS, FUZZ_RECS, FUZZ_RECS));
	save("valid-new-secondary");

	/* resumes the stream where it stopped: joins at once */
	s_hello(FUZZ_SECONDARY, FUZZ_DEV_SECTORS, FUZZ_ID, 2, true, FUZZ_ID, 0);
	s_bitmap_none();
	enc(wire_encode_keepalive(ROOM, 1));
	enc(wire_encode_ack(ROOM, 5, 4, 3));
	enc(wire_encode_resync_flushed(ROOM, 1));
	enc(wire_encode_ack(ROOM, FUZZ_RECS, FUZZ_RECS, FUZZ_RECS));
	save("valid-resume");

	/* consistent in our generation, from another stream: a bitmap resync */
	s_hello(FUZZ_SECONDARY, FUZZ_DEV_SECTORS * 2, 42, 7, true, FUZZ_ID, 0);
	s_bitmap_none();
	enc(wire_encode_hash_reply(ROOM, 1, hash, 4));
	enc(wire_encode_hash_reply(ROOM, 2, hash, 1));
	for (i = 1; i <= 6; i++)
		enc(wire_encode_resync_flushed(ROOM, i));
	enc(wire_encode_ack(ROOM, FUZZ_RECS, FUZZ_RECS, FUZZ_RECS));
	save("valid-bitmap-resync");

	/* it was a primary: its own bitmap, in pieces */
	s_hello(FUZZ_SECONDARY, FUZZ_DEV_SECTORS, FUZZ_ID, 0, true, FUZZ_ID, 3);
	enc(wire_encode_peer_bitmap(ROOM, 0, 16, bits, 2, false));
	enc(wire_encode_peer_bitmap(ROOM, 16, 12, bits + 2, 2, true));
	enc(wire_encode_ack(ROOM, 3, 2, 1));
	save("valid-peer-bitmap");

	/* after badsecondary.c */
	s_hello(FUZZ_SECONDARY, FUZZ_DEV_SECTORS, FUZZ_ID, 0, true, FUZZ_ID, 0);
	s_bitmap_none();
	enc(wire_encode_ack(ROOM, 1000000000, 1000000000, 1000000000));
	save("bad-forged-ack");

	s_hello(FUZZ_SECONDARY, FUZZ_DEV_SECTORS, FUZZ_ID, 0, true, FUZZ_ID, 0);
	s_bitmap_none();
	enc(wire_encode_ack(ROOM, 4, 4, 4));
	enc(wire_encode_ack(ROOM, 2, 2, 2));
	save("bad-ack-backwards");

	s_hello(FUZZ_SECONDARY, FUZZ_DEV_SECTORS, FUZZ_ID, 1000000000, true, FUZZ_ID, 0);
	s_bitmap_none();
	save("bad-resume-beyond");

	s_hello(FUZZ_SECONDARY, FUZZ_DEV_SECTORS, FUZZ_ID, 0, true, FUZZ_ID, 0);
	for (i = 0; i < 50; i++)
		enc(wire_encode_peer_bitmap(ROOM, 0, 16, bits, 4, false));
	save("bad-bitmap-flood");

	s_hello(FUZZ_SECONDARY, FUZZ_DEV_SECTORS, FUZZ_ID, 0, true, FUZZ_ID, 0);
	enc(wire_encode_peer_bitmap(ROOM, 1ULL << 40, 16, bits, 4, true));
	save("bad-bitmap-beyond");

	s_hello(FUZZ_SECONDARY, FUZZ_DEV_SECTORS, 0, 0, false, 0, 0);
	s_bitmap_none();
	for (i = 0; i < 50; i++)
		enc(wire_encode_hash_reply(ROOM, i, hash, 4));
	save("bad-hash-flood");

	s_hello(FUZZ_SECONDARY, FUZZ_DEV_SECTORS, FUZZ_ID, 0, true, FUZZ_ID, 0);
	s_bitmap_none();
	for (i = 0; i < 50; i++)
		enc(wire_encode_resync_flushed(ROOM, 100 + i));
	enc(wire_encode_ack(ROOM, 2, 2, 2));
	save("bad-flushed-flood");

	/* refused Hellos */
	s_hello("gamma", FUZZ_DEV_SECTORS, 0, 0, false, 0, 0);
	save("bad-unknown-node");
	s_hello(FUZZ_SECONDARY, FUZZ_DEV_SECTORS - 1, 0, 0, false, 0, 0);
	save("bad-device-smaller");
	s_hello(FUZZ_SECONDARY, FUZZ_DEV_SECTORS, FUZZ_ID, 0, true, FUZZ_ID + 7, 5);
	s_bitmap_none();
	save("bad-split-brain");

	enc(wire_encode_ack(ROOM, 1, 1, 1));
	save("bad-ack-before-hello");

	s_hello(FUZZ_SECONDARY, FUZZ_DEV_SECTORS, 0, 0, false, 0, 0);
	s_hello(FUZZ_SECONDARY, FUZZ_DEV_SECTORS, 0, 0, false, 0, 0);
	save("bad-second-hello");

	s_hello(FUZZ_SECONDARY, FUZZ_DEV_SECTORS, 0, 0, false, 0, 0);
	s_bitmap_none();
	p_data(0, DM_REPL_OP_WRITE, 0, 0, 8, 0);
	save("bad-data-from-secondary");

	s_hello(FUZZ_SECONDARY, FUZZ_DEV_SECTORS, 0, 0, false, 0, 0);
	enc(wire_encode_error(ROOM, DMREPL__V1__ERROR__CODE__CODE_IO, "disk on fire"));
	save("valid-error");
}

int main(int argc, char **argv)
{
	if (argc != 3 || (strcmp(argv[1], "secondary") && strcmp(argv[1], "primary"))) {
		fprintf(stderr, "usage: gen-role-corpus secondary|primary DIR\n");
		return 2;
	}
	dir = argv[2];
	if (!strcmp(argv[1], "secondary"))
		secondary_corpus();
	else
		primary_corpus();
	return 0;
}
