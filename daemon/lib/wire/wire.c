// SPDX-License-Identifier: GPL-2.0-only
/*
 * libreplwire: framing, validation and an incremental reader for the dm-repl
 * wire protocol.  See wire.h.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "wire.h"

/* Under AddressSanitizer, arena blocks get poisoned gaps between them. */
#if defined(__has_include)
#if __has_include(<sanitizer/asan_interface.h>)
#include <sanitizer/asan_interface.h>
#endif
#endif
#ifndef ASAN_POISON_MEMORY_REGION
#define ASAN_POISON_MEMORY_REGION(addr, size) ((void)(addr), (void)(size))
#define ASAN_UNPOISON_MEMORY_REGION(addr, size) ((void)(addr), (void)(size))
#endif
#if defined(__SANITIZE_ADDRESS__)
#define ARENA_REDZONE	16U
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ARENA_REDZONE	16U
#endif
#endif
#ifndef ARENA_REDZONE
#define ARENA_REDZONE	0U
#endif

enum {
	RD_HDR,		/* waiting for a length prefix and frame */
	RD_WANT_BUF,	/* Data decoded, asking payload_buf for a destination */
	RD_PAYLOAD,	/* callback mode: filling r->dst */
	RD_INBUF,	/* buffer mode: waiting for the payload in r->buf */
};

static void put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static uint32_t get_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

__attribute__((format(printf, 4, 5)))
static int fail(char *reason, size_t reason_len, int err, const char *fmt, ...)
{
	va_list ap;

	if (reason && reason_len) {
		va_start(ap, fmt);
		vsnprintf(reason, reason_len, fmt, ap);
		va_end(ap);
	}
	return err;
}

/* ---- validation --------------------------------------------------------- */

bool wire_name_valid(const char *s)
{
	size_t i;

	if (!s || !s[0])
		return false;
	for (i = 0; s[i]; i++) {
		char c = s[i];

		if (i >= WIRE_MAX_NAME)
			return false;
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '.' || c == '_' ||
		      c == '-'))
			return false;
	}
	return true;
}

/* Valid UTF-8 without control characters (what may end up in a log). */
static bool text_valid(const char *s, size_t len)
{
	static const uint32_t min_cp[] = { 0, 0x80, 0x800, 0x10000 };
	const uint8_t *p = (const uint8_t *)s, *end = p + len;

	while (p < end) {
		uint32_t c = *p++;
		int more, i;

		if (c < 0x20 || c == 0x7f)
			return false;
		if (c < 0x80)
			continue;
		if (c >= 0xc0 && c <= 0xdf) {
			more = 1;
			c &= 0x1f;
		} else if (c >= 0xe0 && c <= 0xef) {
			more = 2;
			c &= 0x0f;
		} else if (c >= 0xf0 && c <= 0xf7) {
			more = 3;
			c &= 0x07;
		} else {
			return false;
		}
		if (end - p < more)
			return false;
		for (i = 0; i < more; i++) {
			if ((*p & 0xc0) != 0x80)
				return false;
			c = c << 6 | (*p++ & 0x3f);
		}
		if (c < min_cp[more] || (c >= 0xd800 && c <= 0xdfff) ||
		    c > 0x10ffff)
			return false;
	}
	return true;
}

static int hello_check(const Dmrepl__V1__Hello *h, char *reason, size_t rlen)
{
	if (h->protocol_version == 0)
		return fail(reason, rlen, -EPROTO, "Hello protocol_version 0");
	if (!wire_name_valid(h->node))
		return fail(reason, rlen, -EPROTO,
			    "Hello node (%zu bytes) is not 1..%u bytes of [A-Za-z0-9._-]",
			    h->node ? strlen(h->node) : 0, WIRE_MAX_NAME);
	if (!wire_name_valid(h->resource))
		return fail(reason, rlen, -EPROTO,
			    "Hello resource (%zu bytes) is not 1..%u bytes of [A-Za-z0-9._-]",
			    h->resource ? strlen(h->resource) : 0, WIRE_MAX_NAME);
	if (h->role != DMREPL__V1__ROLE__ROLE_PRIMARY &&
	    h->role != DMREPL__V1__ROLE__ROLE_SECONDARY)
		return fail(reason, rlen, -EPROTO,
			    "Hello role %d is neither primary nor secondary",
			    (int)h->role);
	if ((int)h->mode < DMREPL__V1__MODE__MODE_ASYNC ||
	    (int)h->mode > DMREPL__V1__MODE__MODE_SYNC)
		return fail(reason, rlen, -EPROTO, "Hello mode %d unknown",
			    (int)h->mode);
	if (h->device_sectors > WIRE_MAX_DEV_SECTORS)
		return fail(reason, rlen, -EPROTO,
			    "Hello device_sectors %" PRIu64 " too large",
			    h->device_sectors);
	return 0;
}

static int data_check(const Dmrepl__V1__Data *d, char *reason, size_t rlen)
{
	if ((int)d->encoding < 0 || (int)d->encoding > DMREPL__V1__ENCODING__ENCODING_ZSTD)
		return fail(reason, rlen, -EPROTO,
			    "Data encoding %d unknown", (int)d->encoding);
	if (d->encoding != DMREPL__V1__ENCODING__ENCODING_RAW &&
	    d->op != DM_REPL_OP_WRITE && d->op != WIRE_OP_RESYNC)
		return fail(reason, rlen, -EPROTO,
			    "Data op %" PRIu32 " with an encoded payload", d->op);
	if (d->flags & ~(uint32_t)(DM_REPL_F_FUA | DM_REPL_F_SYNC))
		return fail(reason, rlen, -EPROTO,
			    "Data flags 0x%" PRIx32 " has unknown bits", d->flags);

	switch (d->op) {
	case WIRE_OP_RESYNC:
		if (d->seq || d->flags || d->epoch)
			return fail(reason, rlen, -EPROTO,
				    "Data RESYNC with seq, flags or epoch set");
		/* the extent and payload rules of a WRITE */
		__attribute__((fallthrough));
	case DM_REPL_OP_WRITE:
		if (d->nr_sectors == 0)
			return fail(reason, rlen, -EPROTO,
				    "Data WRITE of 0 sectors");
		if (d->nr_sectors > WIRE_MAX_SECTORS_PER_REC)
			return fail(reason, rlen, -EMSGSIZE,
				    "Data WRITE of %" PRIu32 " sectors exceeds %u",
				    d->nr_sectors, WIRE_MAX_SECTORS_PER_REC);
		if (d->encoding == DMREPL__V1__ENCODING__ENCODING_ZSTD) {
			/* a compressed payload is smaller, or it travels raw */
			if (d->payload_len == 0 || d->payload_len >= d->nr_sectors * 512U)
				return fail(reason, rlen, -EPROTO,
					    "Data zstd payload_len %" PRIu32 " for %" PRIu32 " sectors (1..%" PRIu32 ")",
					    d->payload_len, d->nr_sectors, d->nr_sectors * 512U - 1);
			break;
		}
		if (d->payload_len != d->nr_sectors * 512U)
			return fail(reason, rlen, -EPROTO,
				    "Data payload_len %" PRIu32 " does not match nr_sectors %" PRIu32,
				    d->payload_len, d->nr_sectors);
		break;
	case DM_REPL_OP_FLUSH:
	case DM_REPL_OP_GAP:
		/* no extent: a flush, or the mark of writes the target did not
		 * log (it keeps sequence numbers contiguous on the wire) */
		if (d->nr_sectors || d->sector || d->payload_len)
			return fail(reason, rlen, -EPROTO,
				    "Data %s with sector %" PRIu64 ", nr_sectors %" PRIu32 ", payload_len %" PRIu32 " (all must be 0)",
				    d->op == DM_REPL_OP_FLUSH ? "FLUSH" : "GAP",
				    d->sector, d->nr_sectors, d->payload_len);
		return 0;
	case DM_REPL_OP_DISCARD:
	case DM_REPL_OP_WRITE_ZEROES:
		if (d->nr_sectors == 0)
			return fail(reason, rlen, -EPROTO,
				    "Data %s of 0 sectors",
				    d->op == DM_REPL_OP_DISCARD ?
				    "DISCARD" : "WRITE_ZEROES");
		if (d->payload_len)
			return fail(reason, rlen, -EPROTO,
				    "Data %s with payload_len %" PRIu32,
				    d->op == DM_REPL_OP_DISCARD ?
				    "DISCARD" : "WRITE_ZEROES", d->payload_len);
		break;
	default:
		return fail(reason, rlen, -EPROTO, "Data op %" PRIu32 " unknown",
			    d->op);
	}

	if (d->sector > WIRE_MAX_DEV_SECTORS - d->nr_sectors)
		return fail(reason, rlen, -EPROTO,
			    "Data extent %" PRIu64 "+%" PRIu32 " overflows",
			    d->sector, d->nr_sectors);
	return 0;
}

static int ack_check(const Dmrepl__V1__Ack *a, char *reason, size_t rlen)
{
	if (a->written > a->received || a->durable > a->written)
		return fail(reason, rlen, -EPROTO,
			    "Ack received %" PRIu64 " written %" PRIu64 " durable %" PRIu64 " out of order",
			    a->received, a->written, a->durable);
	return 0;
}

static int hash_request_check(const Dmrepl__V1__HashRequest *h, char *reason, size_t rlen)
{
	uint32_t b = h->block_sectors;

	if (b < 8 || b > WIRE_MAX_SECTORS_PER_REC || (b & (b - 1)))
		return fail(reason, rlen, -EPROTO,
			    "HashRequest block_sectors %" PRIu32 " is not a power of 2 in 8..%u",
			    b, WIRE_MAX_SECTORS_PER_REC);
	if (!h->nr_sectors || h->nr_sectors % b || h->nr_sectors / b > WIRE_MAX_HASHES ||
	    h->nr_sectors > WIRE_MAX_SECTORS_PER_REC)
		return fail(reason, rlen, -EPROTO,
			    "HashRequest of %" PRIu32 " sectors is not 1..%u blocks of %" PRIu32
			    " and at most %u sectors",
			    h->nr_sectors, WIRE_MAX_HASHES, b, WIRE_MAX_SECTORS_PER_REC);
	if (h->sector > WIRE_MAX_DEV_SECTORS - h->nr_sectors)
		return fail(reason, rlen, -EPROTO,
			    "HashRequest extent %" PRIu64 "+%" PRIu32 " overflows",
			    h->sector, h->nr_sectors);
	return 0;
}

static int error_check(const Dmrepl__V1__Error *e, char *reason, size_t rlen)
{
	size_t len = e->reason ? strlen(e->reason) : 0;

	if ((int)e->code < DMREPL__V1__ERROR__CODE__CODE_UNSPECIFIED ||
	    (int)e->code > DMREPL__V1__ERROR__CODE__CODE_DIVERGED)
		return fail(reason, rlen, -EPROTO, "Error code %d unknown",
			    (int)e->code);
	if (len > WIRE_MAX_REASON)
		return fail(reason, rlen, -EPROTO,
			    "Error reason of %zu bytes exceeds %u", len,
			    WIRE_MAX_REASON);
	if (!text_valid(e->reason, len))
		return fail(reason, rlen, -EPROTO,
			    "Error reason is not printable UTF-8");
	return 0;
}

/* protobuf-c puts the oneof's messages in a union: one pointer, whichever is set */
_Static_assert(offsetof(Dmrepl__V1__Frame, hello) == offsetof(Dmrepl__V1__Frame, peer_bitmap),
	       "the Frame's messages share one pointer");

int wire_frame_check(const Dmrepl__V1__Frame *f, char *reason,
		     size_t reason_len)
{
	if (f->msg_case == DMREPL__V1__FRAME__MSG__NOT_SET)
		return fail(reason, reason_len, -EPROTO,
			    "Frame carries no message");
	if ((unsigned int)f->msg_case > DMREPL__V1__FRAME__MSG_PEER_BITMAP)
		return fail(reason, reason_len, -EPROTO,
			    "Frame message %d unknown", (int)f->msg_case);
	if (!f->hello)
		return fail(reason, reason_len, -EPROTO, "Frame message %d is NULL",
			    (int)f->msg_case);
	switch (f->msg_case) {
	case DMREPL__V1__FRAME__MSG_HELLO:
		return hello_check(f->hello, reason, reason_len);
	case DMREPL__V1__FRAME__MSG_DATA:
		return data_check(f->data, reason, reason_len);
	case DMREPL__V1__FRAME__MSG_ACK:
		return ack_check(f->ack, reason, reason_len);
	case DMREPL__V1__FRAME__MSG_SET_MODE:
		if ((int)f->set_mode->mode < DMREPL__V1__MODE__MODE_ASYNC ||
		    (int)f->set_mode->mode > DMREPL__V1__MODE__MODE_SYNC)
			return fail(reason, reason_len, -EPROTO,
				    "SetMode mode %d unknown",
				    (int)f->set_mode->mode);
		return 0;
	case DMREPL__V1__FRAME__MSG_ERROR:
		return error_check(f->error, reason, reason_len);
	case DMREPL__V1__FRAME__MSG_HASH_REQUEST:
		return hash_request_check(f->hash_request, reason, reason_len);
	case DMREPL__V1__FRAME__MSG_HASH_REPLY:
		if (!f->hash_reply->n_hash || f->hash_reply->n_hash > WIRE_MAX_HASHES)
			return fail(reason, reason_len, -EPROTO,
				    "HashReply with %zu hashes (1..%u)",
				    f->hash_reply->n_hash, WIRE_MAX_HASHES);
		return 0;
	case DMREPL__V1__FRAME__MSG_PEER_BITMAP:
		if (f->peer_bitmap->bits.len > WIRE_MAX_BITMAP ||
		    f->peer_bitmap->region_shift < 12 || f->peer_bitmap->region_shift > 30 ||
		    f->peer_bitmap->first_region > (UINT64_MAX >> 4))
			return fail(reason, reason_len, -EPROTO,
				    "PeerBitmap of %zu bytes, region shift %" PRIu32,
				    f->peer_bitmap->bits.len, f->peer_bitmap->region_shift);
		return 0;
	default:
		/* Keepalive, ResyncBegin, ResyncFlush, ResyncFlushed: any values */
		return 0;
	}
}

int wire_check_extent(const Dmrepl__V1__Data *d, uint64_t dev_sectors)
{
	if (d->op == DM_REPL_OP_FLUSH)
		return 0;
	if (d->sector > dev_sectors || d->nr_sectors > dev_sectors - d->sector)
		return -ERANGE;
	return 0;
}

/* ---- encoding ----------------------------------------------------------- */

ssize_t wire_encode(const Dmrepl__V1__Frame *f, uint8_t *buf, size_t len)
{
	size_t size;

	if (wire_frame_check(f, NULL, 0) < 0)
		return -EINVAL;
	size = dmrepl__v1__frame__get_packed_size(f);
	if (size > WIRE_MAX_FRAME)
		return -EMSGSIZE;
	if (len < WIRE_HDR_SIZE || len - WIRE_HDR_SIZE < size)
		return -ENOSPC;
	if (dmrepl__v1__frame__pack(f, buf + WIRE_HDR_SIZE) != size)
		return -EIO;	/* cannot happen */
	put_be32(buf, (uint32_t)size);
	return (ssize_t)(WIRE_HDR_SIZE + size);
}

/* msg, a message of kind c, framed and encoded (wire_encode()) */
static ssize_t wire_encode_msg(uint8_t *buf, size_t len, Dmrepl__V1__Frame__MsgCase c,
			       const void *msg)
{
	Dmrepl__V1__Frame f = DMREPL__V1__FRAME__INIT;

	f.msg_case = c;
	f.hello = (void *)msg;	/* the oneof's one pointer, whichever message it is */
	return wire_encode(&f, buf, len);
}

ssize_t wire_encode_hello(uint8_t *buf, size_t len,
			  const Dmrepl__V1__Hello *hello)
{
	return wire_encode_msg(buf, len, DMREPL__V1__FRAME__MSG_HELLO, hello);
}

ssize_t wire_encode_data_zstd(uint8_t *buf, size_t len,
			      const struct dm_repl_rec *rec, uint32_t zlen)
{
	Dmrepl__V1__Data d = DMREPL__V1__DATA__INIT;

	d.seq = rec->seq;
	d.sector = rec->sector;
	d.nr_sectors = rec->nr_sectors;
	d.op = rec->op;
	d.flags = rec->flags;
	d.epoch = rec->epoch;
	d.payload_len = zlen ? zlen : rec->data_len;
	d.encoding = zlen ? DMREPL__V1__ENCODING__ENCODING_ZSTD :
			    DMREPL__V1__ENCODING__ENCODING_RAW;
	return wire_encode_msg(buf, len, DMREPL__V1__FRAME__MSG_DATA, &d);
}

ssize_t wire_encode_data(uint8_t *buf, size_t len,
			 const struct dm_repl_rec *rec)
{
	return wire_encode_data_zstd(buf, len, rec, 0);
}

ssize_t wire_encode_ack(uint8_t *buf, size_t len, uint64_t received,
			uint64_t written, uint64_t durable)
{
	Dmrepl__V1__Ack a = DMREPL__V1__ACK__INIT;

	a.received = received;
	a.written = written;
	a.durable = durable;
	return wire_encode_msg(buf, len, DMREPL__V1__FRAME__MSG_ACK, &a);
}

ssize_t wire_encode_set_mode(uint8_t *buf, size_t len, Dmrepl__V1__Mode mode)
{
	Dmrepl__V1__SetMode m = DMREPL__V1__SET_MODE__INIT;

	m.mode = mode;
	return wire_encode_msg(buf, len, DMREPL__V1__FRAME__MSG_SET_MODE, &m);
}

ssize_t wire_encode_keepalive(uint8_t *buf, size_t len, uint64_t time_ns)
{
	Dmrepl__V1__Keepalive k = DMREPL__V1__KEEPALIVE__INIT;

	k.time_ns = time_ns;
	return wire_encode_msg(buf, len, DMREPL__V1__FRAME__MSG_KEEPALIVE, &k);
}

ssize_t wire_encode_resync_data_zstd(uint8_t *buf, size_t len, uint64_t sector,
				     uint32_t nr_sectors, uint32_t zlen)
{
	Dmrepl__V1__Data d = DMREPL__V1__DATA__INIT;

	d.sector = sector;
	d.nr_sectors = nr_sectors;
	d.op = WIRE_OP_RESYNC;
	d.payload_len = zlen ? zlen : nr_sectors * 512U;
	d.encoding = zlen ? DMREPL__V1__ENCODING__ENCODING_ZSTD :
			    DMREPL__V1__ENCODING__ENCODING_RAW;
	return wire_encode_msg(buf, len, DMREPL__V1__FRAME__MSG_DATA, &d);
}

ssize_t wire_encode_resync_data(uint8_t *buf, size_t len, uint64_t sector,
				uint32_t nr_sectors)
{
	return wire_encode_resync_data_zstd(buf, len, sector, nr_sectors, 0);
}

ssize_t wire_encode_resync_begin(uint8_t *buf, size_t len, uint64_t id, bool full)
{
	Dmrepl__V1__ResyncBegin m = DMREPL__V1__RESYNC_BEGIN__INIT;

	m.id = id;
	m.full = full;
	return wire_encode_msg(buf, len, DMREPL__V1__FRAME__MSG_RESYNC_BEGIN, &m);
}

ssize_t wire_encode_hash_request(uint8_t *buf, size_t len, uint64_t id,
				 uint64_t sector, uint32_t nr_sectors,
				 uint32_t block_sectors)
{
	Dmrepl__V1__HashRequest m = DMREPL__V1__HASH_REQUEST__INIT;

	m.id = id;
	m.sector = sector;
	m.nr_sectors = nr_sectors;
	m.block_sectors = block_sectors;
	return wire_encode_msg(buf, len, DMREPL__V1__FRAME__MSG_HASH_REQUEST, &m);
}

ssize_t wire_encode_resync_flush(uint8_t *buf, size_t len, uint64_t id, bool done,
				 uint64_t gen)
{
	Dmrepl__V1__ResyncFlush m = DMREPL__V1__RESYNC_FLUSH__INIT;

	m.id = id;
	m.done = done;
	m.gen = gen;
	return wire_encode_msg(buf, len, DMREPL__V1__FRAME__MSG_RESYNC_FLUSH, &m);
}

ssize_t wire_encode_hash_reply(uint8_t *buf, size_t len, uint64_t id,
			       const uint64_t *hash, size_t n)
{
	Dmrepl__V1__HashReply m = DMREPL__V1__HASH_REPLY__INIT;

	if (!n || n > WIRE_MAX_HASHES)
		return -EINVAL;
	m.id = id;
	m.n_hash = n;
	m.hash = (uint64_t *)hash;
	return wire_encode_msg(buf, len, DMREPL__V1__FRAME__MSG_HASH_REPLY, &m);
}

ssize_t wire_encode_peer_bitmap(uint8_t *buf, size_t len, uint64_t first_region,
				uint32_t region_shift, const uint8_t *bits, size_t nbytes, bool last)
{
	Dmrepl__V1__PeerBitmap m = DMREPL__V1__PEER_BITMAP__INIT;

	if (nbytes > WIRE_MAX_BITMAP)
		return -EINVAL;
	m.first_region = first_region;
	m.region_shift = region_shift;
	m.bits.data = (uint8_t *)bits;
	m.bits.len = nbytes;
	m.last = last;
	return wire_encode_msg(buf, len, DMREPL__V1__FRAME__MSG_PEER_BITMAP, &m);
}

ssize_t wire_encode_resync_flushed(uint8_t *buf, size_t len, uint64_t id)
{
	Dmrepl__V1__ResyncFlushed m = DMREPL__V1__RESYNC_FLUSHED__INIT;

	m.id = id;
	return wire_encode_msg(buf, len, DMREPL__V1__FRAME__MSG_RESYNC_FLUSHED, &m);
}

ssize_t wire_encode_error(uint8_t *buf, size_t len,
			  Dmrepl__V1__Error__Code code, const char *reason)
{
	Dmrepl__V1__Error e = DMREPL__V1__ERROR__INIT;
	char text[WIRE_MAX_REASON + 1];
	size_t n = reason ? strlen(reason) : 0;

	if (n > WIRE_MAX_REASON) {
		n = WIRE_MAX_REASON;
		/* don't cut a UTF-8 sequence */
		while (n > 0 && ((uint8_t)reason[n] & 0xc0) == 0x80)
			n--;
	}
	if (n)
		memcpy(text, reason, n);
	text[n] = '\0';
	if (!text_valid(text, n)) {
		size_t i;

		for (i = 0; i < n; i++)
			if ((uint8_t)text[i] < 0x20 || (uint8_t)text[i] >= 0x7f)
				text[i] = '?';
	}
	e.code = code;
	e.reason = text;
	return wire_encode_msg(buf, len, DMREPL__V1__FRAME__MSG_ERROR, &e);
}

/* ---- raw scan of a frame ------------------------------------------------ */

/*
 * protobuf-c is lenient where we want to be strict: a Frame that carries
 * several oneof members keeps the last one, and strings are handed out as C
 * strings, so an embedded NUL would silently shorten a name.  This walks
 * the wire format before unpacking: exactly one top-level field, a
 * length-delimited message 1..6, and no NUL in any string of Hello/Error.
 */

static int pb_varint(const uint8_t **pp, const uint8_t *end, uint64_t *ret)
{
	const uint8_t *p = *pp;
	uint64_t v = 0;
	unsigned int shift;

	for (shift = 0; shift < 64; shift += 7) {
		if (p == end)
			return -EPROTO;
		v |= (uint64_t)(*p & 0x7f) << shift;
		if (!(*p++ & 0x80)) {
			*pp = p;
			*ret = v;
			return 0;
		}
	}
	return -EPROTO;
}

struct pb_field {
	uint64_t number;
	unsigned int wire_type;
	const uint8_t *val;	/* wire type 2: the bytes */
	size_t len;
};

/* 1: a field, 0: end of message, -EPROTO: malformed. */
static int pb_next(const uint8_t **pp, const uint8_t *end, struct pb_field *f)
{
	uint64_t key, v;

	if (*pp == end)
		return 0;
	if (pb_varint(pp, end, &key) < 0)
		return -EPROTO;
	f->number = key >> 3;
	f->wire_type = key & 7;
	f->val = NULL;
	f->len = 0;
	if (f->number == 0 || f->number > 536870911)
		return -EPROTO;
	switch (f->wire_type) {
	case 0:
		return pb_varint(pp, end, &v) < 0 ? -EPROTO : 1;
	case 1:
	case 5:
		v = f->wire_type == 1 ? 8 : 4;
		if ((size_t)(end - *pp) < v)
			return -EPROTO;
		*pp += v;
		return 1;
	case 2:
		if (pb_varint(pp, end, &v) < 0 || v > (size_t)(end - *pp))
			return -EPROTO;
		f->val = *pp;
		f->len = v;
		*pp += v;
		return 1;
	default:
		return -EPROTO;	/* groups and reserved wire types */
	}
}

static int frame_scan(const uint8_t *p, size_t n, char *reason, size_t rlen)
{
	const uint8_t *end = p + n, *sp, *send;
	struct pb_field top, sub;
	const char *what;
	int rc;

	rc = pb_next(&p, end, &top);
	if (rc <= 0)
		return fail(reason, rlen, -EPROTO,
			    "frame is not a protobuf message");
	if (top.number < DMREPL__V1__FRAME__MSG_HELLO ||
	    top.number > DMREPL__V1__FRAME__MSG_PEER_BITMAP || top.wire_type != 2)
		return fail(reason, rlen, -EPROTO,
			    "Frame field %" PRIu64 " (wire type %u) unknown",
			    top.number, top.wire_type);
	rc = pb_next(&p, end, &sub);
	if (rc < 0)
		return fail(reason, rlen, -EPROTO,
			    "frame is not a protobuf message");
	if (rc > 0)
		return fail(reason, rlen, -EPROTO,
			    "Frame carries more than one field");

	if (top.number != DMREPL__V1__FRAME__MSG_HELLO &&
	    top.number != DMREPL__V1__FRAME__MSG_ERROR)
		return 0;
	sp = top.val;
	send = top.val + top.len;
	/* string fields: Hello.node = 2, Hello.resource = 3, Error.reason = 2 */
	while ((rc = pb_next(&sp, send, &sub)) > 0) {
		if (sub.wire_type != 2)
			continue;
		if (top.number == DMREPL__V1__FRAME__MSG_HELLO)
			what = sub.number == 2 ? "Hello node" :
			       sub.number == 3 ? "Hello resource" : NULL;
		else
			what = sub.number == 2 ? "Error reason" : NULL;
		if (what && memchr(sub.val, '\0', sub.len))
			return fail(reason, rlen, -EPROTO,
				    "%s contains a NUL byte", what);
	}
	if (rc < 0)
		return fail(reason, rlen, -EPROTO,
			    "Frame %s is not a protobuf message",
			    top.number == DMREPL__V1__FRAME__MSG_HELLO ?
			    "Hello" : "Error");
	return 0;
}

/* ---- the reader ------------------------------------------------------- */

#define ARENA_ALIGN	_Alignof(max_align_t)

static void *arena_alloc(void *data, size_t size)
{
	struct wire_reader *r = data;
	size_t need = ((size + ARENA_ALIGN - 1) & ~(ARENA_ALIGN - 1)) +
		      ARENA_REDZONE;
	void *p;

	if (size > WIRE_ARENA_SIZE || need > WIRE_ARENA_SIZE - r->arena_used) {
		r->arena_exhausted = true;
		return NULL;
	}
	p = r->arena + r->arena_used;
	r->arena_used += need;
	ASAN_UNPOISON_MEMORY_REGION(p, size);
	return p;
}

static void arena_reset(struct wire_reader *r)
{
	r->arena_used = 0;
	r->arena_exhausted = false;
	ASAN_POISON_MEMORY_REGION(r->arena, WIRE_ARENA_SIZE);
}

static void arena_free(void *data, void *p)
{
	/* everything goes at once, when the next frame is decoded */
}

int wire_reader_init(struct wire_reader *r, wire_payload_buf_fn payload_buf,
		     void *ctx)
{
	size_t size = WIRE_READ_BUF + (payload_buf ? 0 : WIRE_MAX_PAYLOAD);
	uint8_t *buf, *arena;

	buf = malloc(size);
	if (!buf)
		return -ENOMEM;
	arena = malloc(WIRE_ARENA_SIZE);
	if (!arena) {
		free(buf);
		return -ENOMEM;
	}
	*r = (struct wire_reader) {
		.buf = buf,
		.size = size,
		.state = RD_HDR,
		.payload_buf = payload_buf,
		.payload_ctx = ctx,
		.arena = arena,
		.allocator = {
			.alloc = arena_alloc,
			.free = arena_free,
			.allocator_data = r,
		},
	};
	return 0;
}

void wire_reader_reset(struct wire_reader *r)
{
	r->head = r->tail = 0;
	r->state = RD_HDR;
	r->eof = false;
	r->err = 0;
	r->frame = NULL;
	r->dst = NULL;
	r->payload_len = r->payload_done = 0;
	r->reason[0] = '\0';
}

void wire_reader_free(struct wire_reader *r)
{
	if (r->arena)
		ASAN_UNPOISON_MEMORY_REGION(r->arena, WIRE_ARENA_SIZE);
	free(r->buf);
	free(r->arena);
	r->buf = NULL;
	r->arena = NULL;
	r->frame = NULL;
	r->size = r->head = r->tail = 0;
}

const char *wire_reader_error(const struct wire_reader *r)
{
	return r->reason;
}

size_t wire_reader_pending(const struct wire_reader *r)
{
	return r->tail - r->head;
}

/* Bytes from head that must be contiguous to finish the current unit. */
static size_t reader_need(const struct wire_reader *r)
{
	size_t avail = r->tail - r->head;
	uint32_t n;

	switch (r->state) {
	case RD_HDR:
		if (avail < WIRE_HDR_SIZE)
			return WIRE_MAX_MSG;
		n = get_be32(r->buf + r->head);
		return n > WIRE_MAX_FRAME ? WIRE_MAX_MSG : WIRE_HDR_SIZE + n;
	case RD_INBUF:
		return r->payload_len;
	default:
		return WIRE_MAX_MSG;
	}
}

static void reader_compact(struct wire_reader *r)
{
	if (r->head == r->tail) {
		r->head = r->tail = 0;
		return;
	}
	if (r->head == 0)
		return;
	if (r->head + reader_need(r) > r->size || r->tail == r->size) {
		memmove(r->buf, r->buf + r->head, r->tail - r->head);
		r->tail -= r->head;
		r->head = 0;
	}
}

static ssize_t reader_readv(void *ctx, const struct iovec *iov, int iovcnt)
{
	return readv(*(const int *)ctx, iov, iovcnt);
}

int wire_reader_fill(struct wire_reader *r, int fd)
{
	return wire_reader_fill_fn(r, reader_readv, &fd);
}

int wire_reader_fill_fn(struct wire_reader *r, wire_readv_fn fn, void *ctx)
{
	size_t total = 0;
	ssize_t n;

	r->drained = false;
	if (r->eof)
		return 0;
	reader_compact(r);

	if (r->state == RD_PAYLOAD && r->payload_done < r->payload_len) {
		size_t rem = r->payload_len - r->payload_done;
		size_t ahead = r->size - r->tail;
		struct iovec iov[2];

		if (r->payload_len >= WIRE_DIRECT_MIN && ahead > WIRE_READ_AHEAD)
			ahead = WIRE_READ_AHEAD;
		iov[0] = (struct iovec) { r->dst + r->payload_done, rem };
		iov[1] = (struct iovec) { r->buf + r->tail, ahead };

		do
			n = fn(ctx, iov, r->tail < r->size ? 2 : 1);
		while (n < 0 && errno == EINTR);
		if (n < 0)
			return -errno;
		if (n == 0) {
			r->eof = true;
			return 0;
		}
		r->drained = (size_t)n < rem + iov[1].iov_len;
		if ((size_t)n <= rem) {
			r->payload_done += (uint32_t)n;
		} else {
			r->payload_done = r->payload_len;
			r->tail += (size_t)n - rem;
		}
		return (int)n;
	}

	if (r->tail == r->size)
		return -ENOBUFS;
	while (r->tail < r->size && total < INT_MAX / 2) {
		size_t want = r->size - r->tail;
		/* a stream of large payloads: the next header, not its payload */
		bool ahead = r->state == RD_HDR && r->payload_buf &&
			     r->payload_len >= WIRE_DIRECT_MIN && want > WIRE_READ_AHEAD;
		struct iovec one;

		if (ahead)
			want = WIRE_READ_AHEAD;
		one = (struct iovec) { r->buf + r->tail, want };
		n = fn(ctx, &one, 1);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (total) {
				/* EAGAIN: drained; other errors: on the next call */
				r->drained = errno == EAGAIN || errno == EWOULDBLOCK;
				break;
			}
			return -errno;
		}
		if (n == 0) {
			r->eof = true;
			break;
		}
		r->tail += (size_t)n;
		total += (size_t)n;
		if ((size_t)n < want) {
			r->drained = true;
			break;
		}
		if (ahead)
			break;		/* enough for now */
	}
	return (int)total;
}

static int reader_fail(struct wire_reader *r, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int reader_fail(struct wire_reader *r, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(r->reason, sizeof(r->reason), fmt, ap);
	va_end(ap);
	r->err = err;
	return err;
}

/* Not enough bytes: fine, unless the peer has closed the stream. */
static int reader_short(struct wire_reader *r, size_t have, size_t want)
{
	if (!r->eof)
		return 0;
	if (r->state == RD_HDR && have == 0)
		return 0;	/* clean end, on a frame boundary */
	return reader_fail(r, -EPROTO,
			   "stream ends inside a %s (%zu of %zu bytes)",
			   r->state == RD_HDR ? "frame" : "Data payload",
			   have, want);
}

static int reader_decode(struct wire_reader *r, const uint8_t *p, uint32_t n)
{
	Dmrepl__V1__Frame *f;
	int rc;

	rc = frame_scan(p, n, r->reason, sizeof(r->reason));
	if (rc < 0)
		return (r->err = rc);

	r->frame = NULL;
	arena_reset(r);
	f = dmrepl__v1__frame__unpack(&r->allocator, n, p);
	if (!f) {
		if (r->arena_exhausted)
			return reader_fail(r, -EPROTO,
					   "frame needs more than %u bytes to decode",
					   WIRE_ARENA_SIZE);
		return reader_fail(r, -EPROTO,
				   "frame does not parse as dmrepl.v1.Frame");
	}
	rc = wire_frame_check(f, r->reason, sizeof(r->reason));
	if (rc < 0)
		return (r->err = rc);
	r->frame = f;
	return 0;
}

static int reader_deliver(struct wire_reader *r, const void *payload,
			  struct wire_msg *ret)
{
	*ret = (struct wire_msg) {
		.frame = r->frame,
		.type = r->frame->msg_case,
		.payload = payload,
		.payload_len = payload ? r->payload_len : 0,
	};
	r->state = RD_HDR;
	return 1;
}

int wire_reader_next(struct wire_reader *r, struct wire_msg *ret)
{
	size_t avail, copy;
	uint32_t n;
	int rc;

	if (r->err)
		return r->err;
	r->reason[0] = '\0';

	switch (r->state) {
	case RD_HDR:
		avail = r->tail - r->head;
		if (avail < WIRE_HDR_SIZE)
			return reader_short(r, avail, WIRE_HDR_SIZE);
		n = get_be32(r->buf + r->head);
		if (n == 0)
			return reader_fail(r, -EPROTO, "frame length 0");
		if (n > WIRE_MAX_FRAME)
			return reader_fail(r, -EMSGSIZE,
					   "frame length %" PRIu32 " exceeds %u",
					   n, WIRE_MAX_FRAME);
		if (avail - WIRE_HDR_SIZE < n)
			return reader_short(r, avail, WIRE_HDR_SIZE + n);
		rc = reader_decode(r, r->buf + r->head + WIRE_HDR_SIZE, n);
		if (rc < 0)
			return rc;
		r->head += WIRE_HDR_SIZE + n;
		if (r->frame->msg_case != DMREPL__V1__FRAME__MSG_DATA ||
		    r->frame->data->payload_len == 0)
			return reader_deliver(r, NULL, ret);
		r->payload_len = r->frame->data->payload_len;
		r->payload_done = 0;
		r->dst = NULL;
		r->state = r->payload_buf ? RD_WANT_BUF : RD_INBUF;
		return wire_reader_next(r, ret);

	case RD_WANT_BUF:
		r->dst = r->payload_buf(r->payload_ctx, r->frame->data);
		if (!r->dst) {
			snprintf(r->reason, sizeof(r->reason),
				 "no buffer for a payload of %" PRIu32 " bytes",
				 r->payload_len);
			return -ENOBUFS;
		}
		copy = r->tail - r->head;
		if (copy > r->payload_len)
			copy = r->payload_len;
		memcpy(r->dst, r->buf + r->head, copy);
		r->head += copy;
		r->payload_done = (uint32_t)copy;
		r->state = RD_PAYLOAD;
		/* fall through */
	case RD_PAYLOAD:
		if (r->payload_done < r->payload_len)
			return reader_short(r, r->payload_done, r->payload_len);
		return reader_deliver(r, r->dst, ret);

	case RD_INBUF:
		avail = r->tail - r->head;
		if (avail < r->payload_len)
			return reader_short(r, avail, r->payload_len);
		r->head += r->payload_len;
		return reader_deliver(r, r->buf + r->head - r->payload_len, ret);
	}
	return reader_fail(r, -EINVAL, "reader state %d", r->state);
}

/* ---- blocking I/O ------------------------------------------------------- */

int wire_write_all(int fd, const struct iovec *iov, int iovcnt)
{
	struct iovec cur[16];
	size_t off = 0;		/* into iov[0] */
	bool sock = true;

	if (iovcnt < 0 || (iovcnt > 0 && !iov))
		return -EINVAL;

	for (;;) {
		struct msghdr mh = { .msg_iov = cur };
		ssize_t n;
		int i;

		/* skip what is done */
		while (iovcnt > 0 && off >= iov[0].iov_len) {
			off -= iov[0].iov_len;
			iov++;
			iovcnt--;
		}
		if (iovcnt == 0)
			return 0;

		for (i = 0; i < iovcnt && i < 16; i++)
			cur[i] = iov[i];
		cur[0].iov_base = (uint8_t *)cur[0].iov_base + off;
		cur[0].iov_len -= off;
		mh.msg_iovlen = (size_t)i;

		if (sock) {
			n = sendmsg(fd, &mh, MSG_NOSIGNAL);
			if (n < 0 && errno == ENOTSOCK) {
				sock = false;
				continue;
			}
		} else {
			n = writev(fd, cur, i);
		}
		if (n < 0) {
			struct pollfd pfd = { .fd = fd, .events = POLLOUT };

			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				return -errno;
			if (poll(&pfd, 1, -1) < 0 && errno != EINTR)
				return -errno;
			continue;
		}
		if (n == 0)
			return -EIO;
		off += (size_t)n;
	}
}
