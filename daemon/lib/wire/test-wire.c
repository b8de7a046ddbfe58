// SPDX-License-Identifier: GPL-2.0-only
/*
 * libreplwire: the wire protocol codec and the incremental reader.
 *
 * 1. Round trips: streams holding every message type (and WRITEs up to
 *    1 MiB) go through a socketpair, whole, byte by byte and in random
 *    chunks, into readers in buffer mode and in callback mode (with the
 *    callback refusing at random: the -ENOBUFS retry path).  Every frame
 *    must re-encode to the bytes that were sent, every payload must arrive
 *    intact (in the callback's buffer, or in the reader's).
 * 2. Hostile input: every malformed frame the decoder must refuse, refused
 *    with the right error and reason, after the valid frames before it
 *    were delivered; the error is sticky.
 * 3. Encoders (-EINVAL, -ENOSPC, -EMSGSIZE), name and extent checks,
 *    wire_write_all() over a slow socket and a pipe.
 *
 * Usage: test-wire [seed]
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "macro.h"
#include "wire.h"

#include "check.h"
#include "seqgen.h"
#include "wire-raw.h"

static uint64_t rng_state;

static uint64_t rnd(uint64_t n)
{
	return n ? splitmix64(&rng_state) % n : 0;
}

/* ---- building streams ----------------------------------------------------- */

struct item {
	uint8_t *enc;		/* length prefix + frame, as sent */
	size_t enc_len;
	uint32_t payload_len;	/* payload bytes follow enc in the stream */
	size_t payload_off;	/* offset of the payload in the stream */
};

struct stream {
	uint8_t *buf;
	size_t len, cap;
	struct item items[4096];
	size_t n_items;
};

static void stream_put(struct stream *s, const void *p, size_t len)
{
	if (s->len + len > s->cap) {
		s->cap = (s->len + len) * 2 + 4096;
		s->buf = realloc(s->buf, s->cap);
		CHECK(s->buf, "out of memory");
	}
	memcpy(s->buf + s->len, p, len);
	s->len += len;
}

static void stream_reset(struct stream *s)
{
	size_t i;

	for (i = 0; i < s->n_items; i++)
		free(s->items[i].enc);
	s->n_items = 0;
	s->len = 0;
}

/* Append an encoded message (from a wire_encode* call) as an expected item. */
static void stream_add(struct stream *s, const uint8_t *enc, ssize_t n,
		       uint32_t payload_len, uint64_t payload_seed)
{
	struct item *it = &s->items[s->n_items++];

	CHECK(n > 0, "encoding failed: %zd (%s)", n, strerror((int)-n));
	CHECK(s->n_items <= 4096, "too many items");
	it->enc = malloc((size_t)n);
	memcpy(it->enc, enc, (size_t)n);
	it->enc_len = (size_t)n;
	it->payload_len = payload_len;
	stream_put(s, enc, (size_t)n);
	it->payload_off = s->len;
	if (payload_len) {
		uint8_t *p = malloc(payload_len);
		uint32_t i;

		for (i = 0; i < payload_len; i += 8) {
			uint64_t v = splitmix64(&payload_seed);

			memcpy(p + i, &v, payload_len - i < 8 ? payload_len - i : 8);
		}
		stream_put(s, p, payload_len);
		free(p);
	}
}

/* Raw bytes that are not an expected message (malformed tails). */
static void stream_raw(struct stream *s, const void *p, size_t len)
{
	stream_put(s, p, len);
}

static uint8_t encbuf[WIRE_MAX_MSG];

static void add_data(struct stream *s, uint64_t seq, uint16_t op,
		     uint16_t flags, uint64_t sector, uint32_t nr)
{
	struct dm_repl_rec rec = {
		.seq = seq, .sector = sector, .nr_sectors = nr, .op = op,
		.flags = flags, .epoch = seq / 7,
		.data_len = op == DM_REPL_OP_WRITE ? nr * 512 : 0,
	};

	stream_add(s, encbuf, wire_encode_data(encbuf, sizeof(encbuf), &rec),
		   rec.data_len, seq * 1000003);
}

static void add_hello(struct stream *s, Dmrepl__V1__Role role)
{
	Dmrepl__V1__Hello h = wire_raw_hello(WIRE_PROTOCOL_VERSION,
					     role == DMREPL__V1__ROLE__ROLE_PRIMARY ?
					     "node-a.example_1" : "B", "r0", role, 1ULL << 40);

	h.features = 0x5;
	h.stream_id = 0xfeedfacecafebeefULL;
	h.mode = DMREPL__V1__MODE__MODE_SYNC;
	h.resume_seq = 12345678901ULL;
	stream_add(s, encbuf, wire_encode_hello(encbuf, sizeof(encbuf), &h), 0,
		   0);
}

/* Every message type, small payloads only (for byte-by-byte feeding). */
static void stream_all_types(struct stream *s)
{
	uint64_t seq = 100;

	add_hello(s, DMREPL__V1__ROLE__ROLE_PRIMARY);
	add_hello(s, DMREPL__V1__ROLE__ROLE_SECONDARY);
	stream_add(s, encbuf, wire_encode_set_mode(encbuf, sizeof(encbuf),
		   DMREPL__V1__MODE__MODE_ASYNC), 0, 0);
	stream_add(s, encbuf, wire_encode_set_mode(encbuf, sizeof(encbuf),
		   DMREPL__V1__MODE__MODE_SEMI_SYNC), 0, 0);
	stream_add(s, encbuf, wire_encode_keepalive(encbuf, sizeof(encbuf), 0),
		   0, 0);
	stream_add(s, encbuf, wire_encode_keepalive(encbuf, sizeof(encbuf),
		   UINT64_MAX), 0, 0);
	add_data(s, seq++, DM_REPL_OP_WRITE, 0, 0, 1);
	add_data(s, seq++, DM_REPL_OP_WRITE, DM_REPL_F_FUA, 8, 8);
	add_data(s, seq++, DM_REPL_OP_FLUSH, DM_REPL_F_SYNC, 0, 0);
	add_data(s, seq++, DM_REPL_OP_DISCARD, 0, 1ULL << 33, UINT32_MAX);
	add_data(s, seq++, DM_REPL_OP_WRITE_ZEROES,
		 DM_REPL_F_FUA | DM_REPL_F_SYNC, 4096, 128);
	add_data(s, seq++, DM_REPL_OP_WRITE, DM_REPL_F_SYNC,
		 WIRE_MAX_DEV_SECTORS - 64, 64);
	stream_add(s, encbuf, wire_encode_ack(encbuf, sizeof(encbuf), seq, seq,
		   seq - 3), 0, 0);
	stream_add(s, encbuf, wire_encode_ack(encbuf, sizeof(encbuf), 0, 0, 0),
		   0, 0);
	stream_add(s, encbuf, wire_encode_error(encbuf, sizeof(encbuf),
		   DMREPL__V1__ERROR__CODE__CODE_SIZE,
		   "device sizes differ: 1024 vs 2048 sectors, d\xc3\xa9j\xc3\xa0 vu"),
		   0, 0);
	stream_add(s, encbuf, wire_encode_error(encbuf, sizeof(encbuf),
		   DMREPL__V1__ERROR__CODE__CODE_UNSPECIFIED, NULL), 0, 0);
	stream_add(s, encbuf, wire_encode_set_mode(encbuf, sizeof(encbuf),
		   DMREPL__V1__MODE__MODE_SYNC), 0, 0);
}

/* A long random record stream, with 1 MiB writes now and then. */
static void stream_random(struct stream *s, size_t n)
{
	uint64_t seq = rnd(1ULL << 40);
	size_t i;

	for (i = 0; i < n; i++, seq++) {
		uint64_t k = rnd(100);
		uint32_t nr;

		if (k < 5) {
			stream_add(s, encbuf, wire_encode_ack(encbuf,
				   sizeof(encbuf), seq, seq - 1, seq - 2), 0, 0);
		} else if (k < 8) {
			stream_add(s, encbuf, wire_encode_keepalive(encbuf,
				   sizeof(encbuf), rnd(UINT64_MAX)), 0, 0);
		} else if (k < 14) {
			add_data(s, seq, DM_REPL_OP_FLUSH,
				 (uint16_t)rnd(4), 0, 0);
		} else if (k < 20) {
			add_data(s, seq, k < 17 ? DM_REPL_OP_DISCARD :
				 DM_REPL_OP_WRITE_ZEROES, (uint16_t)rnd(4),
				 rnd(1ULL << 30), 1 + (uint32_t)rnd(1 << 20));
		} else {
			k = rnd(100);
			nr = k < 5 ? WIRE_MAX_SECTORS_PER_REC :
			     k < 20 ? 1 + (uint32_t)rnd(WIRE_MAX_SECTORS_PER_REC) :
			     1 + (uint32_t)rnd(16);
			add_data(s, seq, DM_REPL_OP_WRITE, (uint16_t)rnd(4),
				 rnd(1ULL << 30), nr);
		}
	}
}

/* ---- feeding a reader ----------------------------------------------------- */

enum pmode { PM_BUFFER, PM_CALLBACK, PM_REFUSE };
enum chunk { CH_WHOLE, CH_BYTE, CH_RANDOM, CH_SMALL };

static const char *const pmode_name[] = { "buffer", "callback", "refusing" };
static const char *const chunk_name[] = { "whole", "byte", "random", "small" };

struct sink {
	enum pmode pmode;
	const struct stream *s;
	struct wire_reader *r;
	size_t next;		/* expected item */
	uint8_t *pbuf;		/* the callback's aligned buffer */
	unsigned int refuse_left;
	uint64_t last_seq;
	unsigned long n_cb, n_enobufs, n_fill_enobufs;
	int rc;
	char reason[160];
};

static void *payload_cb(void *ctx, const Dmrepl__V1__Data *d)
{
	struct sink *k = ctx;

	k->n_cb++;
	CHECK(d->payload_len > 0 && d->payload_len <= WIRE_MAX_PAYLOAD,
	      "payload_len %" PRIu32, d->payload_len);
	CHECK(d->payload_len == d->nr_sectors * 512, "unchecked Data");
	if (k->pmode == PM_REFUSE) {
		if (d->seq != k->last_seq) {
			k->last_seq = d->seq;
			k->refuse_left = (unsigned int)rnd(4);
		}
		if (k->refuse_left) {
			k->refuse_left--;
			return NULL;
		}
	}
	memset(k->pbuf, 0xa5, d->payload_len);	/* no stale data */
	return k->pbuf;
}

static void sink_msg(struct sink *k, const struct wire_msg *m)
{
	const struct item *it;
	uint8_t re[WIRE_MAX_MSG];
	ssize_t n;

	CHECK(k->next < k->s->n_items, "message %zu beyond the %zu sent",
	      k->next, k->s->n_items);
	it = &k->s->items[k->next];
	CHECK(m->frame && m->type == m->frame->msg_case, "bad wire_msg");
	n = wire_encode(m->frame, re, sizeof(re));
	CHECK(n > 0, "message %zu does not re-encode: %zd", k->next, n);
	CHECK((size_t)n == it->enc_len && !memcmp(re, it->enc, it->enc_len),
	      "message %zu (type %d) differs after the round trip", k->next,
	      (int)m->type);
	CHECK(m->payload_len == it->payload_len, "message %zu: payload %" PRIu32
	      " bytes, want %" PRIu32, k->next, m->payload_len,
	      it->payload_len);
	if (it->payload_len) {
		CHECK(m->type == DMREPL__V1__FRAME__MSG_DATA, "payload on %d",
		      (int)m->type);
		if (k->pmode == PM_BUFFER)
			CHECK((const uint8_t *)m->payload >= k->r->buf &&
			      (const uint8_t *)m->payload + m->payload_len <=
			      k->r->buf + k->r->size,
			      "buffer-mode payload outside the reader");
		else
			CHECK(m->payload == k->pbuf,
			      "callback-mode payload not in the callback's buffer");
		CHECK(!memcmp(m->payload, k->s->buf + it->payload_off,
			      it->payload_len),
		      "message %zu: payload of %" PRIu32 " bytes damaged",
		      k->next, it->payload_len);
	} else {
		CHECK(m->payload == NULL, "payload pointer without payload");
	}
	k->next++;
}

static void set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	CHECK(fl >= 0 && fcntl(fd, F_SETFL, fl | O_NONBLOCK) == 0, "fcntl");
}

/*
 * Send the bytes of s through a socketpair into a reader; check what comes
 * out against s's items.  Returns the reader's final result: 0 for a clean
 * end of stream, else its error (reason in k->reason).
 */
/* One write of the stream from off into fd, of the size chunking ch picks:
 * the bytes written (0 when the socket is full). */
static size_t feed(int fd, const struct stream *s, size_t off, enum chunk ch)
{
	size_t want = s->len - off;
	ssize_t n;

	if (ch == CH_BYTE)
		want = 1;
	else if (ch == CH_RANDOM && want > 1)
		want = 1 + rnd(want < 70000 ? want : 70000);
	else if (ch == CH_SMALL && want > 1)
		want = 1 + rnd(want < 700 ? want : 700);
	n = write(fd, s->buf + off, want);
	CHECK(n > 0 || errno == EAGAIN, "write: %s", strerror(errno));
	return n > 0 ? (size_t)n : 0;
}

/* The reader's end: an error is sticky and has a reason; a clean end
 * leaves no bytes and stays at EOF. */
static void drive_end(struct sink *k, struct wire_reader *r, int rc, int fd)
{
	struct wire_msg msg;

	k->rc = rc;
	snprintf(k->reason, sizeof(k->reason), "%s", wire_reader_error(r));
	if (rc < 0) {
		CHECK(k->reason[0], "error %d without a reason", rc);
		CHECK_RC(wire_reader_next(r, &msg), rc);
		CHECK(!strcmp(wire_reader_error(r), k->reason),
		      "reason changed");
	} else {
		CHECK(wire_reader_pending(r) == 0, "bytes left at EOF");
		CHECK_RC(wire_reader_fill(r, fd), 0);
		CHECK_RC(wire_reader_next(r, &msg), 0);
	}
}

static int drive(struct sink *k, const struct stream *s, enum pmode pm,
		 enum chunk ch)
{
	struct wire_reader r;
	struct wire_msg msg;
	size_t off = 0, before;
	bool closed = false;
	int sv[2], f, rc;

	*k = (struct sink) { .pmode = pm, .s = s, .r = &r, .pbuf = k->pbuf };
	CHECK_RC(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	set_nonblock(sv[0]);
	set_nonblock(sv[1]);
	CHECK_RC(wire_reader_init(&r, pm == PM_BUFFER ? NULL : payload_cb, k),
		 0);
	CHECK(wire_reader_error(&r)[0] == '\0', "fresh reader has an error");

	for (;;) {
		if (off < s->len) {
			off += feed(sv[0], s, off, ch);
		} else if (!closed) {
			close(sv[0]);
			closed = true;
		}

		for (;;) {
			f = wire_reader_fill(&r, sv[1]);
			CHECK(f >= 0 || f == -EAGAIN || f == -ENOBUFS,
			      "wire_reader_fill: %d (%s)", f, strerror(-f));
			if (f == -ENOBUFS)
				k->n_fill_enobufs++;
			before = wire_reader_pending(&r);
			while ((rc = wire_reader_next(&r, &msg)) == 1)
				sink_msg(k, &msg);
			if (rc == -ENOBUFS) {
				k->n_enobufs++;
				CHECK(strstr(wire_reader_error(&r), "no buffer"),
				      "reason \"%s\"", wire_reader_error(&r));
				if (f == -EAGAIN)
					break;
				continue;
			}
			if (rc < 0)
				goto out;
			CHECK(rc == 0, "wire_reader_next: %d", rc);
			CHECK(f != -ENOBUFS || wire_reader_pending(&r) < before,
			      "reader full, yet it needs more bytes");
			if (f == 0)
				goto out;
			if (f == -EAGAIN)
				break;
		}
	}
out:
	drive_end(k, &r, rc, sv[1]);
	wire_reader_free(&r);
	wire_reader_free(&r);	/* idempotent */
	if (!closed)
		close(sv[0]);
	close(sv[1]);
	return rc;
}

static uint8_t *pbuf;

static void roundtrip(const struct stream *s, enum chunk ch)
{
	struct sink k = { .pbuf = pbuf };
	enum pmode pm;

	for (pm = PM_BUFFER; pm <= PM_REFUSE; pm++) {
		CHECK_RC(drive(&k, s, pm, ch), 0);
		CHECK(k.next == s->n_items, "%s/%s: %zu of %zu messages",
		      pmode_name[pm], chunk_name[ch], k.next, s->n_items);
		if (pm == PM_REFUSE && s->n_items > 50)
			CHECK(k.n_enobufs > 0, "the callback never refused");
		printf("  %-8s %-6s %4zu messages, %8zu bytes, %lu callbacks, %lu -ENOBUFS (%lu from fill)\n",
		       pmode_name[pm], chunk_name[ch], k.next, s->len, k.n_cb,
		       k.n_enobufs, k.n_fill_enobufs);
	}
}

static void test_roundtrip(void)
{
	static struct stream s;

	printf("round trip, every message type\n");
	stream_all_types(&s);
	roundtrip(&s, CH_WHOLE);
	roundtrip(&s, CH_BYTE);
	roundtrip(&s, CH_RANDOM);

	printf("round trip, 1 MiB WRITEs in small pieces\n");
	stream_reset(&s);
	add_data(&s, 7, DM_REPL_OP_WRITE, 0, 0, WIRE_MAX_SECTORS_PER_REC);
	add_data(&s, 8, DM_REPL_OP_WRITE, 0, 2048, WIRE_MAX_SECTORS_PER_REC);
	add_data(&s, 9, DM_REPL_OP_FLUSH, 0, 0, 0);
	roundtrip(&s, CH_SMALL);

	printf("round trip, random records\n");
	stream_reset(&s);
	stream_random(&s, 400);
	roundtrip(&s, CH_WHOLE);
	roundtrip(&s, CH_RANDOM);

	/* the payload callback refuses while the stream keeps coming: the
	 * reader buffer fills (fill: -ENOBUFS) and nothing is lost */
	printf("round trip, many payloads behind a refusing callback\n");
	stream_reset(&s);
	{
		size_t i;

		for (i = 0; i < 40; i++)
			add_data(&s, i, DM_REPL_OP_WRITE, 0, i * 64, 64);
	}
	{
		struct sink k = { .pbuf = pbuf };
		struct wire_reader r;
		struct wire_msg msg;
		int fd, rc, f;
		ssize_t n;

		k.s = &s;
		k.r = &r;
		k.pmode = PM_REFUSE;
		k.refuse_left = 1000000;
		k.last_seq = 0;
		/* a regular file: fill() always gets all it asks for */
		fd = memfd_create("test-wire", 0);
		CHECK(fd >= 0, "memfd_create: %s", strerror(errno));
		n = write(fd, s.buf, s.len);
		CHECK((size_t)n == s.len, "write %zd", n);
		CHECK_RC(lseek(fd, 0, SEEK_SET), 0);
		CHECK_RC(wire_reader_init(&r, payload_cb, &k), 0);
		/* first Data: its payload is refused */
		do {
			f = wire_reader_fill(&r, fd);
			rc = wire_reader_next(&r, &msg);
		} while (f > 0 && rc == 0);
		CHECK_RC(rc, -ENOBUFS);
		while ((f = wire_reader_fill(&r, fd)) > 0)
			CHECK_RC(wire_reader_next(&r, &msg), -ENOBUFS);
		CHECK_RC(f, -ENOBUFS);	/* buffer full */
		CHECK(wire_reader_pending(&r) == r.size, "buffer not full");
		CHECK(k.n_cb >= 2, "callback asked %lu times", k.n_cb);
		k.pmode = PM_CALLBACK;	/* buffers available again */
		for (;;) {
			while ((rc = wire_reader_next(&r, &msg)) == 1)
				sink_msg(&k, &msg);
			CHECK_RC(rc, 0);
			f = wire_reader_fill(&r, fd);
			if (f == 0)
				break;
			CHECK(f > 0, "fill %d", f);
		}
		CHECK_RC(wire_reader_next(&r, &msg), 0);
		CHECK(k.next == s.n_items, "%zu of %zu", k.next, s.n_items);
		wire_reader_free(&r);
		close(fd);
	}
	stream_reset(&s);
	free(s.buf);
	s.buf = NULL;
	s.cap = 0;
}

/* ---- malformed input ------------------------------------------------------ */

/* A frame packed without validation. */
static size_t pack_raw(uint8_t *buf, const Dmrepl__V1__Frame *f)
{
	size_t n = wire_raw_pack(buf, WIRE_MAX_MSG, f);

	CHECK(n, "raw frame too big");
	return n;
}

/* Hand-made protobuf bytes. */
struct pb {
	uint8_t b[2 * WIRE_MAX_MSG];
	size_t n;
};

static void pb_varint(struct pb *p, uint64_t v)
{
	do {
		p->b[p->n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
		v >>= 7;
	} while (v);
}

static void pb_key(struct pb *p, uint32_t field, unsigned int wt)
{
	pb_varint(p, (uint64_t)field << 3 | wt);
}

static void pb_bytes(struct pb *p, uint32_t field, const void *v, size_t len)
{
	pb_key(p, field, 2);
	pb_varint(p, len);
	memcpy(p->b + p->n, v, len);
	p->n += len;
}

/* A string of protobuf bytes, NUL bytes and all: PB_STR("a\0b") */
struct pb_str {
	const char *s;
	size_t n;
};
#define PB_STR(lit) { lit, sizeof(lit) - 1 }

/* Wrap a message body as Frame field `field`, with a length prefix. */
static size_t pb_frame(uint8_t *out, uint32_t field, const struct pb *body)
{
	struct pb f = { .n = 0 };

	pb_bytes(&f, field, body->b, body->n);
	wire_raw_be32(out, (uint32_t)f.n);
	memcpy(out + 4, f.b, f.n);
	return f.n + 4;
}

static unsigned int n_bad;

/*
 * A valid Keepalive, then `bad` (len bytes): every payload mode and chunking
 * must deliver the Keepalive, then fail with want and a reason containing
 * `reason`.
 */
static void expect_bad(const char *what, const void *bad, size_t len,
		       int want, const char *reason)
{
	static struct stream s;
	struct sink k = { .pbuf = pbuf };
	enum pmode pm;
	enum chunk ch;

	stream_reset(&s);
	stream_add(&s, encbuf, wire_encode_keepalive(encbuf, sizeof(encbuf),
		   42), 0, 0);
	stream_raw(&s, bad, len);
	for (pm = PM_BUFFER; pm <= PM_CALLBACK; pm++) {
		for (ch = CH_WHOLE; ch <= CH_RANDOM; ch++) {
			int rc = drive(&k, &s, pm, ch);

			CHECK(rc == want, "%s (%s/%s): got %d (%s) \"%s\", want %d",
			      what, pmode_name[pm], chunk_name[ch], rc,
			      strerror(rc < 0 ? -rc : 0), k.reason, want);
			CHECK(strstr(k.reason, reason),
			      "%s: reason \"%s\" lacks \"%s\"", what, k.reason,
			      reason);
			CHECK(k.next == 1, "%s: %zu messages before the error",
			      what, k.next);
		}
	}
	printf("  refused %-40s %-9s \"%s\"\n", what,
	       want == -EPROTO ? "EPROTO" : want == -EMSGSIZE ? "EMSGSIZE" :
	       "?", k.reason);
	n_bad++;
}

/* expect_bad of one frame: the length prefix, then the len bytes of msg */
static void expect_bad_msg(const char *what, const void *msg, size_t len,
			   int want, const char *reason)
{
	uint8_t b[2 * WIRE_MAX_MSG];

	wire_raw_be32(b, (uint32_t)len);
	memcpy(b + 4, msg, len);
	expect_bad(what, b, 4 + len, want, reason);
}

/* expect_bad of one frame whose Frame field `field` is the message body */
static void expect_bad_in(const char *what, uint32_t field, const struct pb *body,
			  int want, const char *reason)
{
	uint8_t b[2 * WIRE_MAX_MSG];

	expect_bad(what, b, pb_frame(b, field, body), want, reason);
}

static void bad_frame(const char *what, const Dmrepl__V1__Frame *f, int want,
		      const char *reason)
{
	uint8_t b[WIRE_MAX_MSG];

	expect_bad(what, b, pack_raw(b, f), want, reason);
}

static void bad_data(const char *what, uint32_t op, uint32_t flags,
		     uint64_t sector, uint32_t nr, uint32_t payload_len,
		     int want, const char *reason)
{
	struct dm_repl_rec rec = {
		.seq = 1, .sector = sector, .nr_sectors = nr, .op = (uint16_t)op,
		.flags = (uint16_t)flags, .data_len = payload_len,
	};
	uint8_t b[WIRE_MAX_MSG + 65536];
	size_t n = wire_raw_data(b, WIRE_MAX_MSG, 1, op, flags, sector, nr, payload_len);

	CHECK(n, "raw frame too big");
	/* whatever payload the header promises follows */
	memset(b + n, 0x5a, sizeof(b) - n);
	if (payload_len > sizeof(b) - n)
		payload_len = (uint32_t)(sizeof(b) - n);
	expect_bad(what, b, n + payload_len, want, reason);
	/* and the encoder refuses to produce it */
	if (op <= 0xffff && flags <= 0xffff)
		CHECK_RC(wire_encode_data(encbuf, sizeof(encbuf), &rec),
			 -EINVAL);
}

static Dmrepl__V1__Hello good_hello(void)
{
	return wire_raw_hello(1, "a", "r", DMREPL__V1__ROLE__ROLE_SECONDARY, 0);
}

static void bad_hello(const char *what, const Dmrepl__V1__Hello *h,
		      const char *reason)
{
	Dmrepl__V1__Frame f = DMREPL__V1__FRAME__INIT;

	f.msg_case = DMREPL__V1__FRAME__MSG_HELLO;
	f.hello = (Dmrepl__V1__Hello *)h;
	bad_frame(what, &f, -EPROTO, reason);
	CHECK_RC(wire_encode_hello(encbuf, sizeof(encbuf), h), -EINVAL);
}

static void bad_error(const char *what, int code, const char *text,
		      const char *reason)
{
	Dmrepl__V1__Frame f = DMREPL__V1__FRAME__INIT;
	Dmrepl__V1__Error e = DMREPL__V1__ERROR__INIT;

	e.code = (Dmrepl__V1__Error__Code)code;
	e.reason = (char *)text;
	f.msg_case = DMREPL__V1__FRAME__MSG_ERROR;
	f.error = &e;
	bad_frame(what, &f, -EPROTO, reason);
}

/* Inputs for the malformed frames below: a long string, a long name. */
static char malformed_big[4200], malformed_nn[4200];

/* framing */
static void malformed_framing(void)
{
	uint8_t b[2 * WIRE_MAX_MSG];
	size_t n;
	memset(b, 0, sizeof(b));
	expect_bad("length prefix 0", b, 4, -EPROTO, "frame length 0");
	wire_raw_be32(b, 70000);
	expect_bad("length prefix 70000", b, 4 + 100, -EMSGSIZE,
		   "frame length 70000 exceeds 4096");
	wire_raw_be32(b, WIRE_MAX_FRAME + 1);
	expect_bad("length prefix 4097", b, 4, -EMSGSIZE,
		   "frame length 4097 exceeds 4096");
	wire_raw_be32(b, 0xffffffff);
	expect_bad("length prefix 2^32-1", b, 4, -EMSGSIZE, "exceeds 4096");
	expect_bad("EOF inside the length prefix", b, 3, -EPROTO,
		   "stream ends inside a frame (3 of 4 bytes)");
	n = wire_encode_ack(b, sizeof(b), 3, 2, 1);
	expect_bad("EOF inside a frame", b, n - 1, -EPROTO,
		   "stream ends inside a frame");
	n = wire_encode_data(b, sizeof(b), &(struct dm_repl_rec) {
		.op = DM_REPL_OP_WRITE, .nr_sectors = 8, .data_len = 4096 });
	memset(b + n, 1, 4095);
	expect_bad("EOF inside a payload", b, n + 4095, -EPROTO,
		   "stream ends inside a Data payload (4095 of 4096 bytes)");
	expect_bad("EOF right after a Data header", b, n, -EPROTO,
		   "stream ends inside a Data payload (0 of 4096 bytes)");
}

/* not protobuf, or not our Frame */
static void malformed_not_protobuf(void)
{
	struct pb p = { .n = 0 }, body = { .n = 0 };

	expect_bad_msg("garbage protobuf", "\xff\xff\xff\xff\xff\xff", 6, -EPROTO,
		       "not a protobuf message");
	expect_bad_msg("HTTP request", "GET /", 5, -EPROTO, "not a protobuf message");
	pb_key(&p, 7, 0);
	pb_varint(&p, 1);
	expect_bad_msg("unknown Frame field 7", p.b, p.n, -EPROTO,
		       "Frame field 7 (wire type 0) unknown");
	p.n = 0;
	pb_key(&p, 2, 0);	/* data, as a varint */
	pb_varint(&p, 1);
	expect_bad_msg("Frame.data as varint", p.b, p.n, -EPROTO,
		       "Frame field 2 (wire type 0) unknown");
	p.n = 0;
	pb_bytes(&p, 5, "", 0);		/* keepalive */
	pb_bytes(&p, 3, "", 0);		/* ack */
	expect_bad_msg("two oneof members", p.b, p.n, -EPROTO, "more than one field");
	p.n = 0;
	pb_bytes(&p, 5, "", 0);
	pb_bytes(&p, 5, "", 0);
	expect_bad_msg("one member twice", p.b, p.n, -EPROTO, "more than one field");
	p.n = 0;
	pb_bytes(&p, 5, "", 0);
	pb_key(&p, 9, 0);
	pb_varint(&p, 0);
	expect_bad_msg("member plus unknown field", p.b, p.n, -EPROTO,
		       "more than one field");
	pb_bytes(&body, 1, "xx", 2);	/* Data.seq as length-delimited */
	expect_bad_in("Data.seq with the wrong wire type", 2, &body, -EPROTO,
		      "does not parse");
	body.n = 0;
	pb_key(&body, 4, 0);		/* Data.op, varint cut off */
	body.b[body.n++] = 0x80;
	expect_bad_in("truncated varint inside Data", 2, &body, -EPROTO,
		      "does not parse");
	body.n = 0;
	pb_key(&body, 2, 2);		/* Hello.node, longer than the Hello */
	pb_varint(&body, 50);
	expect_bad_in("string length beyond the Hello", 1, &body, -EPROTO,
		      "Hello is not a protobuf message");
	body.n = 0;
	pb_key(&body, 3, 3);		/* a group */
	expect_bad_in("a group inside Ack", 3, &body, -EPROTO, "does not parse");
}

/* Data headers, each refused for its reason; the encoder refuses each too. */
static void malformed_data(void)
{
	static const struct {
		const char *what;
		uint32_t op, flags;
		uint64_t sector;
		uint32_t nr, payload_len;
		int want;
		const char *reason;
	} cases[] = {
		{ "Data op 0", 0, 0, 0, 1, 512, -EPROTO, "Data op 0 unknown" },
		{ "Data GAP with an extent", DM_REPL_OP_GAP, 0, 8, 8, 0, -EPROTO,
		  "GAP with sector 8" },
		{ "Data op 6", 6, 0, 0, 1, 0, -EPROTO, "Data op 6 unknown" },
		{ "Data op 2^32-1", UINT32_MAX, 0, 0, 1, 0, -EPROTO, "unknown" },
		{ "Data unknown flag", DM_REPL_OP_WRITE, 4, 0, 1, 512, -EPROTO,
		  "Data flags 0x4 has unknown bits" },
		{ "Data flag 2^31", DM_REPL_OP_FLUSH, 1U << 31, 0, 0, 0, -EPROTO, "unknown bits" },
		{ "WRITE of 0 sectors", DM_REPL_OP_WRITE, 0, 0, 0, 0, -EPROTO,
		  "WRITE of 0 sectors" },
		{ "WRITE of 2049 sectors", DM_REPL_OP_WRITE, 0, 0, 2049, 2049 * 512, -EMSGSIZE,
		  "WRITE of 2049 sectors exceeds 2048" },
		{ "WRITE of 2^32-1 sectors", DM_REPL_OP_WRITE, 0, 0, UINT32_MAX, 512, -EMSGSIZE,
		  "exceeds 2048" },
		{ "WRITE payload_len short", DM_REPL_OP_WRITE, 0, 0, 16, 4096, -EPROTO,
		  "Data payload_len 4096 does not match nr_sectors 16" },
		{ "WRITE payload_len long", DM_REPL_OP_WRITE, 0, 0, 1, 513, -EPROTO,
		  "payload_len 513 does not match nr_sectors 1" },
		{ "WRITE payload_len 0", DM_REPL_OP_WRITE, 0, 0, 1, 0, -EPROTO,
		  "payload_len 0 does not match" },
		{ "WRITE payload_len overflowing", DM_REPL_OP_WRITE, 0, 0, 2048, UINT32_MAX, -EPROTO,
		  "does not match" },
		{ "FLUSH with sectors", DM_REPL_OP_FLUSH, 0, 0, 1, 0, -EPROTO,
		  "FLUSH with sector 0, nr_sectors 1" },
		{ "FLUSH with a sector", DM_REPL_OP_FLUSH, 0, 5, 0, 0, -EPROTO,
		  "FLUSH with sector 5" },
		{ "FLUSH with a payload", DM_REPL_OP_FLUSH, 0, 0, 0, 512, -EPROTO,
		  "payload_len 512" },
		{ "DISCARD of 0 sectors", DM_REPL_OP_DISCARD, 0, 8, 0, 0, -EPROTO,
		  "DISCARD of 0 sectors" },
		{ "DISCARD with a payload", DM_REPL_OP_DISCARD, 0, 8, 1, 512, -EPROTO,
		  "DISCARD with payload_len 512" },
		{ "WRITE_ZEROES of 0 sectors", DM_REPL_OP_WRITE_ZEROES, 0, 8, 0, 0, -EPROTO,
		  "WRITE_ZEROES of 0 sectors" },
		{ "WRITE_ZEROES with a payload", DM_REPL_OP_WRITE_ZEROES, 0, 8, 1, 512, -EPROTO,
		  "WRITE_ZEROES with payload_len 512" },
		{ "WRITE extent wraps", DM_REPL_OP_WRITE, 0, UINT64_MAX - 3, 8, 4096, -EPROTO,
		  "overflows" },
		{ "DISCARD extent wraps", DM_REPL_OP_DISCARD, 0, UINT64_MAX, UINT32_MAX, 0, -EPROTO,
		  "overflows" },
		{ "WRITE beyond 2^63 bytes", DM_REPL_OP_WRITE, 0, WIRE_MAX_DEV_SECTORS - 7, 8, 4096, -EPROTO,
		  "overflows" },
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++)
		bad_data(cases[i].what, cases[i].op, cases[i].flags, cases[i].sector, cases[i].nr,
			 cases[i].payload_len, cases[i].want, cases[i].reason);
}

/* Hello */
/* Hellos protobuf-c would not build: NUL bytes in strings, repeated fields, wide enums. */
static void malformed_hello_raw(void)
{
	static const struct {
		const char *what;
		struct pb_str first, node, res;	/* first: a node before node */
		uint64_t role;			/* 0: no role field */
		const char *reason;
	} cases[] = {
		{ "Hello node with a NUL", .node = PB_STR("ab\0cd"), .res = PB_STR("r"), .role = 1,
		  .reason = "Hello node contains a NUL byte" },
		{ "Hello resource with a NUL", .node = PB_STR("a"), .res = PB_STR("r\0"),
		  .reason = "Hello resource contains a NUL byte" },
		/* a bad first value hidden by a good second one */
		{ "Hello node twice, first with a NUL", .first = PB_STR("a\0"), .node = PB_STR("a"),
		  .res = PB_STR("r"), .role = 2, .reason = "NUL" },
		/* an enum beyond int32: protobuf truncates to 32 bits */
		{ "Hello role 2^40+3", .node = PB_STR("a"), .res = PB_STR("r"), .role = 1ULL << 40 | 3,
		  .reason = "Hello role 3" },
	};
	struct pb body;

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		body.n = 0;
		pb_key(&body, 1, 0);
		pb_varint(&body, 1);
		if (cases[i].first.s)
			pb_bytes(&body, 2, cases[i].first.s, cases[i].first.n);
		pb_bytes(&body, 2, cases[i].node.s, cases[i].node.n);
		pb_bytes(&body, 3, cases[i].res.s, cases[i].res.n);
		if (cases[i].role) {
			pb_key(&body, 4, 0);
			pb_varint(&body, cases[i].role);
		}
		expect_bad_in(cases[i].what, 1, &body, -EPROTO, cases[i].reason);
	}
}

/* Hellos that differ from a good one in one field, each refused for its reason. */
static void malformed_hello(void)
{
	enum { H_VERSION, H_NODE, H_RESOURCE, H_ROLE, H_MODE, H_SECTORS };
	static const struct {
		const char *what;
		int field;
		const char *s;		/* node, resource; NULL: n times 'n' */
		int64_t n;		/* the number set */
		const char *reason;
	} cases[] = {
		{ "Hello version 0", H_VERSION, NULL, 0, "Hello protocol_version 0" },
		{ "Hello empty node", H_NODE, "", 0, "Hello node (0 bytes)" },
		{ "Hello node of 65 bytes", H_NODE, NULL, 65, "Hello node (65 bytes)" },
		{ "Hello node with a space", H_NODE, "a b", 0, "Hello node (3 bytes)" },
		{ "Hello node not ASCII", H_NODE, "caf\xc3\xa9", 0, "Hello node" },
		{ "Hello resource with a slash", H_RESOURCE, "r/0", 0, "Hello resource (3 bytes)" },
		{ "Hello empty resource", H_RESOURCE, "", 0, "Hello resource (0 bytes)" },
		{ "Hello role unspecified", H_ROLE, NULL, DMREPL__V1__ROLE__ROLE_UNSPECIFIED,
		  "Hello role 0" },
		{ "Hello role 3", H_ROLE, NULL, 3, "Hello role 3" },
		{ "Hello role -1", H_ROLE, NULL, -1, "Hello role -1" },
		{ "Hello mode 3", H_MODE, NULL, 3, "Hello mode 3 unknown" },
		{ "Hello device_sectors 2^64-1", H_SECTORS, NULL, -1, "device_sectors" },
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		Dmrepl__V1__Hello h = good_hello();
		const char *str = cases[i].s;
		int64_t n = cases[i].n;

		if (!str && cases[i].field == H_NODE) {
			memset(malformed_big, 'n', (size_t)n);
			malformed_big[n] = '\0';
			str = malformed_big;
		}
		if (cases[i].field == H_VERSION)
			h.protocol_version = (uint32_t)n;
		else if (cases[i].field == H_NODE)
			h.node = (char *)str;
		else if (cases[i].field == H_RESOURCE)
			h.resource = (char *)str;
		else if (cases[i].field == H_ROLE)
			h.role = (Dmrepl__V1__Role)n;
		else if (cases[i].field == H_MODE)
			h.mode = (Dmrepl__V1__Mode)n;
		else
			h.device_sectors = (uint64_t)n;
		bad_hello(cases[i].what, &h, cases[i].reason);
	}
	malformed_hello_raw();
}

/* Ack, SetMode */
static void malformed_ack_setmode(void)
{
	Dmrepl__V1__Frame f = DMREPL__V1__FRAME__INIT;
	Dmrepl__V1__Ack a = DMREPL__V1__ACK__INIT;
	Dmrepl__V1__SetMode m = DMREPL__V1__SET_MODE__INIT;
	a.received = 5;
	a.written = 6;
	f.msg_case = DMREPL__V1__FRAME__MSG_ACK;
	f.ack = &a;
	bad_frame("Ack written > received", &f, -EPROTO,
		  "Ack received 5 written 6 durable 0 out of order");
	a.written = 5;
	a.durable = 6;
	bad_frame("Ack durable > written", &f, -EPROTO, "out of order");
	CHECK_RC(wire_encode_ack(encbuf, sizeof(encbuf), 1, 2, 0), -EINVAL);
	m.mode = (Dmrepl__V1__Mode)3;
	f = (Dmrepl__V1__Frame)DMREPL__V1__FRAME__INIT;
	f.msg_case = DMREPL__V1__FRAME__MSG_SET_MODE;
	f.set_mode = &m;
	bad_frame("SetMode mode 3", &f, -EPROTO, "SetMode mode 3 unknown");
	m.mode = (Dmrepl__V1__Mode)-2;
	bad_frame("SetMode mode -2", &f, -EPROTO, "SetMode mode -2 unknown");
	CHECK_RC(wire_encode_set_mode(encbuf, sizeof(encbuf),
				      (Dmrepl__V1__Mode)7), -EINVAL);
}

/* Error */
static void malformed_error(void)
{
	uint8_t b[2 * WIRE_MAX_MSG];
	size_t n;
	bad_error("Error code 9", 9, "x", "Error code 9 unknown");
	bad_error("Error code -1", -1, "", "Error code -1 unknown");
	memset(malformed_big, 'e', 257);
	malformed_big[257] = '\0';
	bad_error("Error reason of 257 bytes", 1, malformed_big,
		  "Error reason of 257 bytes exceeds 256");
	bad_error("Error reason with a newline", 1, "bad\nthings",
		  "not printable UTF-8");
	bad_error("Error reason with an escape", 1, "\x1b[2J", "printable");
	bad_error("Error reason with DEL", 1, "\x7f", "printable");
	bad_error("Error reason bad UTF-8", 1, "\xc3(", "UTF-8");
	bad_error("Error reason overlong UTF-8", 1, "\xc0\xaf", "UTF-8");
	bad_error("Error reason overlong 3-byte", 1, "\xe0\x80\xaf", "UTF-8");
	bad_error("Error reason surrogate", 1, "\xed\xa0\x80", "UTF-8");
	bad_error("Error reason beyond U+10FFFF", 1, "\xf4\x90\x80\x80",
		  "UTF-8");
	bad_error("Error reason cut UTF-8", 1, "ab\xe2\x82", "UTF-8");
	{
		struct pb body = { .n = 0 };

		pb_key(&body, 1, 0);
		pb_varint(&body, 1);
		pb_bytes(&body, 2, "oops\0", 5);
		n = pb_frame(b, 6, &body);
		expect_bad("Error reason with a NUL", b, n, -EPROTO,
			   "Error reason contains a NUL byte");
	}
}

static void malformed_decoder_memory(void)
{
	uint8_t b[2 * WIRE_MAX_MSG];
	Dmrepl__V1__Hello h;
	size_t n, i;

	/* decoder memory: huge strings within 4096 bytes decode, and are
	 * refused by validation; thousands of fields exhaust the arena */
	h = good_hello();
	memset(malformed_big, 'n', 4000);
	malformed_big[4000] = '\0';
	h.node = malformed_big;
	bad_hello("Hello node of 4000 bytes", &h, "Hello node (4000 bytes)");
	{
		struct pb body = { .n = 0 };

		pb_bytes(&body, 2, malformed_nn, 2000);
		pb_bytes(&body, 3, malformed_nn, 2000);
		n = pb_frame(b, 1, &body);
		expect_bad("Hello, two strings of 2000 bytes", b, n, -EPROTO,
			   "Hello protocol_version 0");
		body.n = 0;
		pb_key(&body, 1, 0);
		pb_varint(&body, 1);
		pb_bytes(&body, 2, malformed_nn, 4088);
		n = pb_frame(b, 1, &body);
		CHECK(n == WIRE_MAX_MSG, "%zu", n);
		expect_bad("Hello node filling the frame", b, n, -EPROTO,
			   "Hello node (4088 bytes)");
	}
	bad_error("Error reason of 4000 bytes", 1, malformed_big,
		  "Error reason of 4000 bytes exceeds 256");
	{
		struct pb body = { .n = 0 };

		while (body.n < 4000) {	/* ~2000 unknown varint fields */
			pb_key(&body, 15, 0);
			pb_varint(&body, 0);
		}
		n = pb_frame(b, 5, &body);
		expect_bad("Keepalive with 2000 unknown fields", b, n, -EPROTO,
			   "frame needs more than 8192 bytes to decode");
		body.n = 0;
		while (body.n < 4000)	/* repeated known fields */
			pb_bytes(&body, 2, "a", 1);
		n = pb_frame(b, 1, &body);
		expect_bad("Hello with node 2000 times", b, n, -EPROTO,
			   "frame needs more than 8192 bytes to decode");
		body.n = 0;
		for (i = 0; body.n < 4000; i++) {	/* unknown strings */
			pb_bytes(&body, 100 + (uint32_t)i % 50, malformed_nn, 10);
		}
		n = pb_frame(b, 3, &body);
		expect_bad("Ack with 300 unknown strings", b, n, -EPROTO,
			   "frame needs more than 8192 bytes to decode");
	}
}

static void test_malformed(void)
{
	printf("malformed input\n");
	memset(malformed_nn, 'n', sizeof(malformed_nn));
	malformed_framing();
	malformed_not_protobuf();
	malformed_data();
	malformed_hello();
	malformed_ack_setmode();
	malformed_error();
	malformed_decoder_memory();
	printf("  %u malformed streams refused\n", n_bad);
}

/* Unknown fields inside a message are ignored (proto3), within limits. */
static void test_unknown_fields(void)
{
	static struct stream s;
	struct sink k = { .pbuf = pbuf };
	struct pb body = { .n = 0 };
	uint8_t b[WIRE_MAX_MSG];
	size_t n;

	printf("unknown fields inside a message are ignored\n");
	stream_reset(&s);
	pb_key(&body, 1, 0);
	pb_varint(&body, 77);
	pb_bytes(&body, 99, "future", 6);
	pb_key(&body, 100, 5);
	memcpy(body.b + body.n, "abcd", 4);
	body.n += 4;
	n = pb_frame(b, 5, &body);
	/* protobuf-c keeps unknown fields and packs them back after the
	 * known ones: the frame re-encodes to the same bytes */
	stream_add(&s, b, (ssize_t)n, 0, 0);
	CHECK_RC(drive(&k, &s, PM_BUFFER, CH_BYTE), 0);
	CHECK(k.next == 1, "%zu messages", k.next);
	CHECK_RC(drive(&k, &s, PM_CALLBACK, CH_WHOLE), 0);
	CHECK(k.next == 1, "%zu messages", k.next);
}

/* A reader reset after an error decodes a new stream. */
static void test_reset(void)
{
	struct wire_reader r;
	struct wire_msg msg;
	uint8_t b[WIRE_MAX_MSG];
	int sv[2], mode;
	ssize_t n;

	printf("reset after an error\n");
	for (mode = 0; mode < 2; mode++) {
		CHECK_RC(wire_reader_init(&r, mode ? payload_cb : NULL, NULL), 0);
		CHECK_RC(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
		CHECK_RC(write(sv[0], "\0\0\0\0", 4), 4);
		CHECK_RC(wire_reader_fill(&r, sv[1]), 4);
		CHECK_RC(wire_reader_next(&r, &msg), -EPROTO);
		close(sv[0]);
		close(sv[1]);
		wire_reader_reset(&r);
		CHECK(wire_reader_error(&r)[0] == '\0', "reason kept");
		CHECK(wire_reader_pending(&r) == 0, "bytes kept");
		CHECK_RC(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
		n = wire_encode_keepalive(b, sizeof(b), 77);
		CHECK_RC(write(sv[0], b, (size_t)n), n);
		close(sv[0]);
		CHECK_RC(wire_reader_fill(&r, sv[1]), n);
		CHECK_RC(wire_reader_next(&r, &msg), 1);
		CHECK(msg.type == DMREPL__V1__FRAME__MSG_KEEPALIVE &&
		      msg.frame->keepalive->time_ns == 77, "keepalive");
		CHECK_RC(wire_reader_fill(&r, sv[1]), 0);
		CHECK_RC(wire_reader_next(&r, &msg), 0);
		close(sv[1]);
		wire_reader_free(&r);
	}
}

/*
 * wire_reader_drained(): set by a fill that got less than it asked for
 * (the socket had no more), clear after one that filled the buffer.
 */
static void test_drained(void)
{
	struct wire_reader r;
	struct wire_msg msg;
	uint8_t b[WIRE_MAX_MSG], *big;
	size_t sent = 0;
	int sv[2], fl;
	ssize_t n, k;

	printf("drained after a short read only\n");
	CHECK_RC(wire_reader_init(&r, payload_cb, NULL), 0);
	CHECK_RC(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	fl = fcntl(sv[1], F_GETFL);
	CHECK_RC(fcntl(sv[1], F_SETFL, fl | O_NONBLOCK), 0);
	n = wire_encode_keepalive(b, sizeof(b), 5);
	CHECK_RC(write(sv[0], b, (size_t)n), n);
	CHECK_RC(wire_reader_fill(&r, sv[1]), n);
	CHECK(wire_reader_drained(&r), "one small message: drained");
	CHECK_RC(wire_reader_next(&r, &msg), 1);
	CHECK_RC(wire_reader_next(&r, &msg), 0);
	/* more than the reader's buffer holds: the fill stops at its end */
	big = malloc(WIRE_READ_BUF + WIRE_MAX_MSG);
	CHECK(big, "malloc");
	while (sent <= WIRE_READ_BUF) {
		memcpy(big + sent, b, (size_t)n);
		sent += (size_t)n;
	}
	CHECK_RC(write(sv[0], big, sent), (ssize_t)sent);
	free(big);
	CHECK_RC(wire_reader_fill(&r, sv[1]), (int)WIRE_READ_BUF);
	CHECK(!wire_reader_drained(&r), "buffer full: not drained");
	while (wire_reader_next(&r, &msg) == 1)
		;
	k = wire_reader_fill(&r, sv[1]);
	CHECK(k > 0 && (size_t)k < WIRE_READ_BUF, "the rest: %zd bytes", k);
	CHECK(wire_reader_drained(&r), "the rest: drained");
	CHECK_RC(wire_reader_fill(&r, sv[1]), -EAGAIN);
	close(sv[0]);
	close(sv[1]);
	wire_reader_free(&r);
}

/* ---- encoders and helpers ------------------------------------------------- */

static void encoders_basic(void)
{
	Dmrepl__V1__Frame f = DMREPL__V1__FRAME__INIT;
	uint8_t b[WIRE_MAX_MSG];
	ssize_t n;

	printf("encoders\n");
	n = wire_encode_ack(b, sizeof(b), 3, 2, 1);
	CHECK(n > 4, "%zd", n);
	CHECK(b[0] == 0 && b[1] == 0 && b[2] == 0 && b[3] == n - 4,
	      "length prefix");
	CHECK_RC(wire_encode_ack(b, (size_t)n, 3, 2, 1), n);
	CHECK_RC(wire_encode_ack(b, (size_t)n - 1, 3, 2, 1), -ENOSPC);
	CHECK_RC(wire_encode_ack(b, 3, 3, 2, 1), -ENOSPC);
	CHECK_RC(wire_encode_ack(b, 0, 3, 2, 1), -ENOSPC);

	CHECK_RC(wire_encode(&f, b, sizeof(b)), -EINVAL);	/* no message */
	f.msg_case = DMREPL__V1__FRAME__MSG_DATA;
	CHECK_RC(wire_encode(&f, b, sizeof(b)), -EINVAL);	/* NULL */
	f.msg_case = (Dmrepl__V1__Frame__MsgCase)9;
	CHECK_RC(wire_encode(&f, b, sizeof(b)), -EINVAL);
	CHECK_RC(wire_encode_data(b, sizeof(b), &(struct dm_repl_rec) {
		.op = DM_REPL_OP_GAP, .nr_sectors = 8 }), -EINVAL);
	CHECK(wire_encode_data(b, sizeof(b), &(struct dm_repl_rec) {
		.op = DM_REPL_OP_GAP, .seq = 5 }) > 0, "a GAP record encodes");
}

/* a valid message that packs beyond WIRE_MAX_FRAME */
static void encoders_frame(void)
{
	Dmrepl__V1__Frame f = DMREPL__V1__FRAME__INIT;
	Dmrepl__V1__Keepalive ka = DMREPL__V1__KEEPALIVE__INIT;
	ProtobufCMessageUnknownField uf;
	Dmrepl__V1__Data d = DMREPL__V1__DATA__INIT;
	static uint8_t junk[5000];
	uint8_t b[WIRE_MAX_MSG];
	char text[400];

	uf.tag = 200;
	uf.wire_type = PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED;
	uf.len = sizeof(junk);
	uf.data = junk;
	ka.base.n_unknown_fields = 1;
	ka.base.unknown_fields = &uf;
	f.msg_case = DMREPL__V1__FRAME__MSG_KEEPALIVE;
	f.keepalive = &ka;
	CHECK_RC(wire_encode(&f, b, sizeof(b)), -EMSGSIZE);
	uf.len = 10;
	CHECK(wire_encode(&f, b, sizeof(b)) > 0, "small unknown field");

	/* the frame check on its own */
	d.op = DM_REPL_OP_WRITE;
	d.nr_sectors = 8;
	d.payload_len = 4096;
	f.msg_case = DMREPL__V1__FRAME__MSG_DATA;
	f.data = &d;
	CHECK(wire_frame_check(&f, text, sizeof(text)) == 0, "%s", text);
	d.payload_len = 512;
	CHECK_RC(wire_frame_check(&f, text, sizeof(text)), -EPROTO);
	CHECK(!strcmp(text, "Data payload_len 512 does not match nr_sectors 8"),
	      "%s", text);
	CHECK_RC(wire_frame_check(&f, NULL, 0), -EPROTO);
	CHECK_RC(wire_frame_check(&f, text, 1), -EPROTO);
	CHECK(text[0] == '\0', "reason_len 1");

	/* a zstd payload: smaller than the raw one, on WRITE and RESYNC only */
	d.encoding = DMREPL__V1__ENCODING__ENCODING_ZSTD;
	d.payload_len = 100;
	CHECK(wire_frame_check(&f, text, sizeof(text)) == 0, "%s", text);
	d.payload_len = 4095;
	CHECK(wire_frame_check(&f, text, sizeof(text)) == 0, "%s", text);
	d.payload_len = 4096;
	CHECK_RC(wire_frame_check(&f, text, sizeof(text)), -EPROTO);
	CHECK(!strcmp(text, "Data zstd payload_len 4096 for 8 sectors (1..4095)"), "%s", text);
	d.payload_len = 0;
	CHECK_RC(wire_frame_check(&f, text, sizeof(text)), -EPROTO);
	d.payload_len = 100;
	d.op = WIRE_OP_RESYNC;
	CHECK(wire_frame_check(&f, text, sizeof(text)) == 0, "%s", text);
	d.op = DM_REPL_OP_DISCARD;
	d.payload_len = 0;
	CHECK_RC(wire_frame_check(&f, text, sizeof(text)), -EPROTO);
	CHECK(!strcmp(text, "Data op 3 with an encoded payload"), "%s", text);
	d.op = DM_REPL_OP_WRITE;
	d.payload_len = 4096;
	d.encoding = (Dmrepl__V1__Encoding)2;
	CHECK_RC(wire_frame_check(&f, text, sizeof(text)), -EPROTO);
	CHECK(!strcmp(text, "Data encoding 2 unknown"), "%s", text);
	d.encoding = DMREPL__V1__ENCODING__ENCODING_RAW;
	CHECK(wire_frame_check(&f, text, sizeof(text)) == 0, "%s", text);
	CHECK(wire_encode_data_zstd(b, sizeof(b), &(struct dm_repl_rec) {
		.op = DM_REPL_OP_WRITE, .nr_sectors = 8, .data_len = 4096 }, 77) > 0,
	      "a zstd WRITE encodes");
	CHECK_RC(wire_encode_data_zstd(b, sizeof(b), &(struct dm_repl_rec) {
		.op = DM_REPL_OP_WRITE, .nr_sectors = 8, .data_len = 4096 }, 4096), -EINVAL);
	CHECK(wire_encode_resync_data_zstd(b, sizeof(b), 8, 16, 1) > 0, "a zstd RESYNC encodes");
	CHECK_RC(wire_encode_resync_data_zstd(b, sizeof(b), 8, 16, 8192), -EINVAL);
	d.payload_len = 512;
}

/* Error reasons are cut to 256 bytes, never inside a UTF-8 sequence */
static void encoders_reasons(void)
{
	uint8_t b[WIRE_MAX_MSG];
	ssize_t n;
	char text[400];
	size_t i;

	text[0] = 'a';
	for (i = 1; i + 2 < sizeof(text); i += 2)
		memcpy(text + i, "\xc3\xa9", 2);
	text[i] = '\0';
	for (i = 0; i < 2; i++) {
		struct wire_reader r;
		struct wire_msg msg;
		int sv[2];

		n = wire_encode_error(b, sizeof(b),
				      DMREPL__V1__ERROR__CODE__CODE_IO,
				      text + i);
		CHECK(n > 0, "long reason: %zd", n);
		CHECK_RC(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
		CHECK_RC(write(sv[0], b, (size_t)n), n);
		CHECK_RC(wire_reader_init(&r, NULL, NULL), 0);
		CHECK(wire_reader_fill(&r, sv[1]) == n, "fill");
		CHECK_RC(wire_reader_next(&r, &msg), 1);
		CHECK(msg.type == DMREPL__V1__FRAME__MSG_ERROR, "type");
		CHECK(msg.frame->error->code == DMREPL__V1__ERROR__CODE__CODE_IO,
		      "code");
		CHECK(strlen(msg.frame->error->reason) == (i ? 256 : 255),
		      "reason cut to %zu bytes",
		      strlen(msg.frame->error->reason));
		CHECK(!strncmp(msg.frame->error->reason, text + i,
			       strlen(msg.frame->error->reason)), "reason");
		wire_reader_free(&r);
		close(sv[0]);
		close(sv[1]);
	}

	/* unprintable reasons are made printable, bad codes refused */
	{
		struct wire_reader r;
		struct wire_msg msg;
		int sv[2];

		n = wire_encode_error(b, sizeof(b),
				      DMREPL__V1__ERROR__CODE__CODE_IO,
				      "line\none \xc3(\x7f");
		CHECK(n > 0, "unprintable reason: %zd", n);
		CHECK_RC(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
		CHECK_RC(write(sv[0], b, (size_t)n), n);
		CHECK_RC(wire_reader_init(&r, NULL, NULL), 0);
		CHECK(wire_reader_fill(&r, sv[1]) == n, "fill");
		CHECK_RC(wire_reader_next(&r, &msg), 1);
		CHECK(!strcmp(msg.frame->error->reason, "line?one ?(?"),
		      "reason \"%s\"", msg.frame->error->reason);
		wire_reader_free(&r);
		close(sv[0]);
		close(sv[1]);
	}
	CHECK_RC(wire_encode_error(b, sizeof(b), (Dmrepl__V1__Error__Code)9,
				   "x"), -EINVAL);
}

/* names */
static void encoders_names(void)
{
	Dmrepl__V1__Data d = DMREPL__V1__DATA__INIT;

	CHECK(wire_name_valid("a"), "a");
	CHECK(wire_name_valid("node-1.example_com"), "dotted");
	CHECK(wire_name_valid("0123456789012345678901234567890123456789012345678901234567890123"),
	      "64 bytes");
	CHECK(!wire_name_valid("01234567890123456789012345678901234567890123456789012345678901234"),
	      "65 bytes");
	CHECK(!wire_name_valid(""), "empty");
	CHECK(!wire_name_valid(NULL), "NULL");
	CHECK(!wire_name_valid("a:b"), "colon");
	CHECK(!wire_name_valid("\xff"), "high byte");

	/* extents */
	d = (Dmrepl__V1__Data)DMREPL__V1__DATA__INIT;
	d.op = DM_REPL_OP_WRITE;
	d.sector = 1000;
	d.nr_sectors = 24;
	CHECK_RC(wire_check_extent(&d, 1024), 0);
	CHECK_RC(wire_check_extent(&d, 1023), -ERANGE);
	CHECK_RC(wire_check_extent(&d, 0), -ERANGE);
	d.sector = 1025;
	d.nr_sectors = 0;
	CHECK_RC(wire_check_extent(&d, 1024), -ERANGE);
	d.sector = UINT64_MAX;
	d.nr_sectors = 2;
	CHECK_RC(wire_check_extent(&d, UINT64_MAX), -ERANGE);
	d.op = DM_REPL_OP_FLUSH;
	d.sector = 0;
	d.nr_sectors = 0;
	CHECK_RC(wire_check_extent(&d, 0), 0);
}

static void test_encoders(void)
{
	encoders_basic();
	encoders_frame();
	encoders_reasons();
	encoders_names();
}

/* ---- wire_write_all ------------------------------------------------------- */

struct slow_reader {
	int fd;
	size_t got;
	uint64_t sum;
};

static void *slow_read(void *arg)
{
	struct slow_reader *s = arg;
	uint8_t buf[3000];
	ssize_t n;

	while ((n = read(s->fd, buf, 1 + (size_t)(s->got % sizeof(buf)))) > 0) {
		ssize_t i;

		for (i = 0; i < n; i++)
			s->sum = s->sum * 31 + buf[i];
		s->got += (size_t)n;
		if (s->got % 7 == 0)
			usleep(100);
	}
	return NULL;
}

static void test_write_all(void)
{
	static uint8_t data[1 << 22];
	struct iovec iov[40];
	uint64_t seed = 99, sum = 0;
	size_t i, off = 0, total = 0;
	int round;

	printf("wire_write_all\n");
	for (i = 0; i < sizeof(data); i += 8) {
		uint64_t v = splitmix64(&seed);

		memcpy(data + i, &v, 8);
	}
	for (i = 0; i < 40; i++) {
		size_t len = i % 5 == 3 ? 0 : sizeof(data) / 40 - 1;

		iov[i].iov_base = data + off;
		iov[i].iov_len = len;
		off += len;
	}
	total = off;
	for (i = 0; i < total; i++)
		sum = sum * 31 + data[i];

	for (round = 0; round < 2; round++) {
		struct slow_reader sr = { 0 };
		pthread_t t;
		int fds[2];

		if (round == 0) {
			CHECK_RC(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
			set_nonblock(fds[0]);	/* EAGAIN -> poll */
		} else {
			CHECK_RC(pipe(fds), 0);	/* writev path */
			/* pipe(): fds[0] reads */
			int tmp = fds[0];

			fds[0] = fds[1];
			fds[1] = tmp;
		}
		sr.fd = fds[1];
		CHECK_RC(pthread_create(&t, NULL, slow_read, &sr), 0);
		CHECK_RC(wire_write_all(fds[0], iov, 40), 0);
		close(fds[0]);
		pthread_join(t, NULL);
		close(fds[1]);
		CHECK(sr.got == total && sr.sum == sum,
		      "%s: got %zu of %zu bytes, checksum %s",
		      round ? "pipe" : "socket", sr.got, total,
		      sr.sum == sum ? "ok" : "bad");
	}
	CHECK_RC(wire_write_all(-1, iov, 1), -EBADF);
	CHECK_RC(wire_write_all(1, iov, 0), 0);
	CHECK_RC(wire_write_all(1, NULL, 1), -EINVAL);
	{
		int fds[2];

		CHECK_RC(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
		close(fds[1]);
		/* no SIGPIPE on sockets */
		CHECK_RC(wire_write_all(fds[0], iov, 1), -EPIPE);
		close(fds[0]);
	}
}

int main(int argc, char **argv)
{
	uint64_t seed = argc > 1 ? strtoull(argv[1], NULL, 0) : 20240611;

	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("seed %" PRIu64 "\n", seed);
	rng_state = seed;
	CHECK_RC(posix_memalign((void **)&pbuf, 4096, WIRE_MAX_PAYLOAD), 0);

	test_encoders();
	test_roundtrip();
	test_unknown_fields();
	test_reset();
	test_drained();
	test_malformed();
	test_write_all();

	free(pbuf);
	printf("ok\n");
	return 0;
}
