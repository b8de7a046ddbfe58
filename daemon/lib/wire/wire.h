/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * libreplwire: the dm-repl wire protocol (proto/dmrepl.proto) on a stream
 * socket.
 *
 * Framing: a 4-byte big-endian length N (1..WIRE_MAX_FRAME), N bytes of a
 * serialized dmrepl.v1.Frame, and, for a Data frame with payload_len > 0,
 * payload_len raw bytes.
 *
 * Sending: wire_encode() and the wire_encode_*() helpers write the length
 * prefix and the frame into a caller buffer of WIRE_MAX_MSG bytes; a Data
 * frame's payload is sent after it (writev, or wire_write_all()).  The
 * encoders refuse frames the decoder would refuse (-EINVAL).
 *
 * Receiving: a struct wire_reader per connection.  Everything it reads is
 * treated as hostile: frames are length-checked, scanned, unpacked into a
 * fixed arena with a bounded allocator (no malloc per frame) and validated
 * field by field before wire_reader_next() hands them out.  With a
 * non-blocking socket and level-triggered epoll:
 *
 *	on EPOLLIN:
 *		n = wire_reader_fill(&r, fd);	// -EAGAIN: nothing to read
 *		while ((k = wire_reader_next(&r, &msg)) == 1)
 *			handle(&msg);
 *		if (k == -ENOBUFS)	// callback mode: no payload buffer
 *			stop polling fd; once a buffer is free, run the
 *			wire_reader_next() loop again and poll again
 *		else if (k < 0)		// -EPROTO, -EMSGSIZE
 *			send Error(CODE_PROTOCOL, wire_reader_error(&r)), close
 *		else if (n == 0)	// k == 0: the peer closed cleanly
 *			close
 *
 * Payloads are delivered in one of two modes, chosen at wire_reader_init():
 *  - buffer mode (payload_buf == NULL): the payload stays in the reader's
 *    buffer (which then holds WIRE_MAX_PAYLOAD plus read-ahead); msg.payload
 *    points into it until the next call on the reader.
 *  - callback mode: once a Data header is validated, the reader asks
 *    payload_buf(ctx, data) for a destination of data->payload_len bytes
 *    (an O_DIRECT-aligned buffer of the caller, say), copies what it has
 *    already buffered and has wire_reader_fill() read(2) the rest straight
 *    into it.  A NULL destination makes wire_reader_next() return -ENOBUFS;
 *    calling it again later asks again, nothing is lost.
 *
 * Errors are negative errno values; out-parameters (ret) are left untouched
 * on failure.  Nothing here logs: the reader keeps a human-readable reason
 * for its last error (wire_reader_error()).
 */
#ifndef REPL_WIRE_H
#define REPL_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <linux/dm-repl.h>

#include "dmrepl.pb-c.h"

#define WIRE_PROTOCOL_VERSION	1U
/* Hello.features bits (dmrepl.proto Feature) */
#define WIRE_FEATURE_ZSTD	(1ULL << 0)
#define WIRE_HDR_SIZE		4U		/* big-endian frame length */
#define WIRE_MAX_FRAME		4096U		/* serialized Frame bytes */
#define WIRE_MAX_MSG		(WIRE_HDR_SIZE + WIRE_MAX_FRAME)
#define WIRE_MAX_SECTORS_PER_REC 2048U		/* the kernel's largest record */
#define WIRE_MAX_PAYLOAD	(WIRE_MAX_SECTORS_PER_REC * 512U) /* 1 MiB */
#define WIRE_MAX_NAME		64U		/* node, resource: [A-Za-z0-9._-] */
#define WIRE_MAX_REASON		256U		/* Error.reason bytes */
/* Sector numbers on the wire stay below this (byte offsets fit in off_t). */
#define WIRE_MAX_DEV_SECTORS	((uint64_t)INT64_MAX >> 9)
/* Decoder memory per frame; every valid frame needs far less. */
#define WIRE_ARENA_SIZE		8192U
/* Data.op of a resync block (outside the ring's DM_REPL_OP_* space) */
#define WIRE_OP_RESYNC		16U
/* HashRequest / HashReply: at most this many hashes */
#define WIRE_MAX_HASHES		256U
/* PeerBitmap: at most this many bytes of bits per frame */
#define WIRE_MAX_BITMAP		2048U
/* Read-ahead buffer of a reader (plus WIRE_MAX_PAYLOAD in buffer mode). */
#define WIRE_READ_BUF		(64U * 1024U)
/*
 * After a payload of at least WIRE_DIRECT_MIN, read only this much past
 * its end: the next frame's header, while the next large payload goes
 * straight into its own buffer instead of through the read buffer.
 */
#define WIRE_DIRECT_MIN		(64U * 1024U)
#define WIRE_READ_AHEAD		4096U

/* ---- encoding ----------------------------------------------------------- */

/*
 * Write the length prefix and f packed into buf.  Returns the number of
 * bytes written (WIRE_HDR_SIZE + packed size); -EINVAL when f is not a
 * valid frame (see wire_frame_check()), -EMSGSIZE when it packs to more
 * than WIRE_MAX_FRAME bytes, -ENOSPC when buf is too small.  A buffer of
 * WIRE_MAX_MSG bytes is always large enough.
 */
ssize_t wire_encode(const Dmrepl__V1__Frame *f, uint8_t *buf, size_t len);

/* Thin wrappers around wire_encode(), same return values. */
ssize_t wire_encode_hello(uint8_t *buf, size_t len,
			  const Dmrepl__V1__Hello *hello);
/* A ring record; rec->data_len payload bytes must follow the frame. */
ssize_t wire_encode_data(uint8_t *buf, size_t len,
			 const struct dm_repl_rec *rec);
ssize_t wire_encode_ack(uint8_t *buf, size_t len, uint64_t received,
			uint64_t written, uint64_t durable);
ssize_t wire_encode_set_mode(uint8_t *buf, size_t len, Dmrepl__V1__Mode mode);
ssize_t wire_encode_keepalive(uint8_t *buf, size_t len, uint64_t time_ns);
/* A resync block's header (payload of nr_sectors * 512 bytes follows). */
ssize_t wire_encode_resync_data(uint8_t *buf, size_t len, uint64_t sector,
				uint32_t nr_sectors);
/*
 * The same two with a zstd-compressed payload of zlen bytes (encoding
 * ENCODING_ZSTD; 1 <= zlen < the raw payload's size, or -EINVAL), or raw
 * when zlen is 0.
 */
ssize_t wire_encode_data_zstd(uint8_t *buf, size_t len,
			      const struct dm_repl_rec *rec, uint32_t zlen);
ssize_t wire_encode_resync_data_zstd(uint8_t *buf, size_t len, uint64_t sector,
				     uint32_t nr_sectors, uint32_t zlen);
ssize_t wire_encode_resync_begin(uint8_t *buf, size_t len, uint64_t id, bool full);
ssize_t wire_encode_hash_request(uint8_t *buf, size_t len, uint64_t id,
				 uint64_t sector, uint32_t nr_sectors,
				 uint32_t block_sectors);
ssize_t wire_encode_resync_flush(uint8_t *buf, size_t len, uint64_t id, bool done,
				 uint64_t gen);
ssize_t wire_encode_peer_bitmap(uint8_t *buf, size_t len, uint64_t first_region,
				uint32_t region_shift, const uint8_t *bits, size_t nbytes, bool last);
ssize_t wire_encode_hash_reply(uint8_t *buf, size_t len, uint64_t id,
			       const uint64_t *hash, size_t n);
ssize_t wire_encode_resync_flushed(uint8_t *buf, size_t len, uint64_t id);
/*
 * reason (may be NULL) is cut to WIRE_MAX_REASON bytes on a UTF-8 boundary;
 * if it is not printable UTF-8, every byte outside printable ASCII becomes
 * '?'.  -EINVAL only for a code out of range.
 */
ssize_t wire_encode_error(uint8_t *buf, size_t len,
			  Dmrepl__V1__Error__Code code, const char *reason);

/* ---- validation --------------------------------------------------------- */

/*
 * Check a frame the way the decoder does: one message set, enum values in
 * range, Data op/flags/extent/payload_len consistent, Hello names valid,
 * Ack counters ordered, Error reason short and printable.  0, -EMSGSIZE (a
 * WRITE larger than WIRE_MAX_PAYLOAD) or -EPROTO; a reason is written to
 * reason (reason_len bytes, may be 0) on failure.
 */
int wire_frame_check(const Dmrepl__V1__Frame *f, char *reason,
		     size_t reason_len);

/* A node or resource name: 1..WIRE_MAX_NAME bytes of [A-Za-z0-9._-]. */
bool wire_name_valid(const char *s);

/*
 * The extent of a (validated) Data record against a device of dev_sectors
 * sectors: 0, or -ERANGE when it does not fit.  FLUSH has no extent.
 */
int wire_check_extent(const Dmrepl__V1__Data *d, uint64_t dev_sectors);

/* ---- receiving ---------------------------------------------------------- */

/*
 * Where to put the payload of data (data->payload_len bytes, a validated
 * WRITE); NULL: not now.  data stays valid until the message is delivered.
 */
typedef void *(*wire_payload_buf_fn)(void *ctx, const Dmrepl__V1__Data *data);

struct wire_msg {
	/* The decoded, validated frame: valid until the next call on the
	 * reader (wire_reader_next/fill/free). */
	const Dmrepl__V1__Frame *frame;
	Dmrepl__V1__Frame__MsgCase type;	/* frame->msg_case */
	/* Data with payload_len > 0: the payload (in the reader's buffer, or
	 * the buffer payload_buf returned); else NULL and 0. */
	const void *payload;
	uint32_t payload_len;
};

/* Everything below is private to wire.c; don't move an initialized reader. */
struct wire_reader {
	uint8_t *buf;			/* bytes read, not yet consumed: */
	size_t size;			/* buf[head, tail) */
	size_t head, tail;
	int state;
	bool eof;
	bool drained;			/* the last fill read less than it asked */
	int err;			/* sticky error */
	wire_payload_buf_fn payload_buf;
	void *payload_ctx;
	/* the frame being delivered */
	Dmrepl__V1__Frame *frame;
	uint8_t *dst;			/* its payload (callback mode) */
	uint32_t payload_len, payload_done;
	/* decoder memory */
	uint8_t *arena;
	size_t arena_used;
	bool arena_exhausted;
	ProtobufCAllocator allocator;
	char reason[160];
};

/*
 * Set up r.  payload_buf NULL selects buffer mode (the reader allocates
 * WIRE_MAX_PAYLOAD + WIRE_READ_BUF bytes), else callback mode (WIRE_READ_BUF
 * bytes).  0 or -ENOMEM.
 */
int wire_reader_init(struct wire_reader *r, wire_payload_buf_fn payload_buf,
		     void *ctx);
/*
 * Forget everything read so far, including a sticky error, and start over
 * on a new stream; keeps the buffers and the payload mode (a reconnect).
 */
void wire_reader_reset(struct wire_reader *r);

/* Release what init allocated (not r itself); fine on a zeroed r, twice. */
void wire_reader_free(struct wire_reader *r);

/*
 * read(2) from fd as much as is available and fits: into the reader's
 * buffer, and, in callback mode while a payload is incomplete, straight
 * into the payload's destination.  Returns the number of bytes read (> 0),
 * 0 at end of file, -EAGAIN when nothing is available, -ENOBUFS when the
 * reader's buffer is full (call wire_reader_next() first), or -errno.
 */
int wire_reader_fill(struct wire_reader *r, int fd);
/*
 * The same through a readv(2)-like function (a TLS session, say): a count,
 * 0 at end of file, or -1 with errno.
 */
typedef ssize_t (*wire_readv_fn)(void *ctx, const struct iovec *iov, int iovcnt);
int wire_reader_fill_fn(struct wire_reader *r, wire_readv_fn fn, void *ctx);

/*
 * The last wire_reader_fill() got fewer bytes than it asked for: fd had no
 * more at that moment, and another read now would most likely return
 * -EAGAIN.  A level-triggered poll on fd reports anything that arrives
 * after it, so a caller that waits for that does not need the extra read.
 */
static inline bool wire_reader_drained(const struct wire_reader *r)
{
	return r->drained;
}

/*
 * The next complete message: 1 and *ret filled in; 0 when more bytes are
 * needed (after end of file: the stream ended on a frame boundary);
 * -ENOBUFS when payload_buf returned NULL (try again later); or a
 * protocol error, after which the reader is dead and keeps returning it:
 * -EMSGSIZE (frame length or WRITE size beyond the limits), -EPROTO
 * (anything else malformed, or the stream ending inside a frame).
 */
int wire_reader_next(struct wire_reader *r, struct wire_msg *ret);

/* Why the last call failed ("" if it did not), e.g. for an Error frame. */
const char *wire_reader_error(const struct wire_reader *r);

/* Bytes buffered but not consumed yet (tests; "is the peer mid-frame"). */
size_t wire_reader_pending(const struct wire_reader *r);

/* ---- blocking I/O --------------------------------------------------------- */

/*
 * Write every byte of iov to fd: retries on EINTR and partial writes, waits
 * with poll() on EAGAIN, does not raise SIGPIPE on sockets.  0 or -errno
 * (some bytes may have been written).
 */
int wire_write_all(int fd, const struct iovec *iov, int iovcnt);

#endif /* REPL_WIRE_H */
