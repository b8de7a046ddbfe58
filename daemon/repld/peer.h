/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * A primary's connection to one secondary: connect with backoff, the
 * send queue, splicing of ring payloads, the incremental reader, keepalives
 * and timeouts.  Replication (primary/primary.c, primary/stream.c) and
 * resync (primary/resync.c) queue their frames here alike.
 *
 * The owner embeds a struct peer and is told what happens through struct
 * peer_ops: the connection is up (TCP, and TLS when the resource has it:
 * send the Hello), a frame arrived, an event was handled (queue what can
 * go now), the connection is gone.  It decides when a handshake is done
 * (peer_set_up()).
 */
#ifndef REPL_PEER_H
#define REPL_PEER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "loop.h"
#include "tls.h"
#include "wire.h"

enum peer_state {
	PEER_DOWN = 0,		/* not connected; reconnect at next_attempt_ms */
	PEER_CONNECTING,	/* connect() in progress */
	PEER_HANDSHAKE,		/* connected, the handshake not done */
	PEER_UP,		/* streaming */
};

/* A frame queued for sending: a header (at most PEER_HDR bytes), then an
 * optional payload that the queue only points to. */
#define PEER_QUEUE_LEN	512
#define PEER_HDR	96

/*
 * Ring payloads of at least this size go to the socket without a copy:
 * vmsplice() into a pipe, splice() to the socket, so the socket refers to
 * the ring's pages.  That is safe because the kernel reuses ring space
 * only after release, and release waits for the peer's durable ack, long
 * after the peer has read the bytes.  Smaller payloads are cheaper to copy.
 */
#define PEER_SPLICE_MIN		(64U << 10)
#define PEER_SPLICE_PIPE	(1U << 20)

/*
 * Compression (repl.conf(5) compress): payloads of at least PEER_ZSTD_MIN
 * bytes are compressed into the peer's arena, a byte ring of PEER_ZBUF
 * bytes whose space an entry holds until it has left the queue.  A payload
 * that does not shrink by 1/64 travels raw, and the next ones are not
 * tried (1, 2, 4 ... PEER_ZSTD_SKIP_MAX of them): incompressible data
 * costs little CPU.
 */
#define PEER_ZSTD_MIN		4096U
#define PEER_ZBUF		(8U << 20)
#define PEER_ZSTD_SKIP_MAX	64U

struct peer_entry {
	uint8_t hdr[PEER_HDR];
	uint32_t hdr_len;
	uint32_t payload_len;
	const void *payload;
	uint64_t seq;			/* record sequence, or UINT64_MAX */
	uint64_t zend;			/* compressed: the arena's head after it; else 0 */
	bool splice;			/* payload may be spliced */
};

/* What compression did on one peer's link (or a secondary's). */
struct peer_zstats {
	uint64_t in_bytes;		/* payload bytes, before */
	uint64_t out_bytes;		/* the same payloads on the wire */
	uint64_t raw_payloads;		/* sent raw: they did not shrink */
	uint64_t ns;			/* time spent compressing (decompressing) */
};

struct peer;

struct peer_ops {
	/* TCP, and its TLS handshake, are done (state PEER_HANDSHAKE): queue
	 * the Hello. */
	void (*connected)(struct peer *p);
	/* A frame arrived; the owner may close the connection in it. */
	void (*frame)(struct peer *p, const struct wire_msg *msg);
	/* An event was handled and the connection is open: queue more. */
	void (*pump)(struct peer *p);
	/* The connection is gone (state PEER_DOWN now, was before); why
	 * NULL: closed on request. */
	void (*closed)(struct peer *p, enum peer_state was, const char *why);
};

struct peer {
	struct loop *loop;
	const struct peer_ops *ops;
	struct ev ev;
	char resource[CONFIG_NAME_MAX + 1];	/* for messages */
	struct config_peer cfg;		/* name, address */
	enum peer_state state;
	struct tls_io io;		/* the socket (io.fd == ev.fd) and its TLS */
	struct tls_ctx *const *tls;	/* the resource's TLS, NULL: plain TCP */
	bool want_out;			/* EPOLLOUT armed: the socket is full */
	uint64_t next_attempt_ms;
	unsigned int backoff_ms, backoff_min_ms, backoff_max_ms;
	uint64_t last_rx_ms, last_tx_ms, state_since_ms;
	struct wire_reader rd;

	/* send queue: a ring of entries, [head, tail) */
	struct peer_entry *q;
	uint64_t head, tail;
	size_t off;			/* bytes of q[head] already sent */
	int pipe[2];			/* for splicing payloads, or -1 */
	size_t pipe_len;		/* bytes in the pipe, not yet on the socket */
	bool no_splice;			/* splicing failed once: copy instead */

	uint64_t records_sent, bytes_sent, connects;
	uint64_t acks_received;		/* Ack frames from the peer */
	uint64_t queued_bytes;		/* headers and payloads in the queue */
	char last_error[1024];

	/* compression: level 0 off; zstd_peer: its Hello accepts zstd */
	int zlevel;
	bool zstd_peer;
	void *zcctx;			/* ZSTD_CCtx, made at the first use */
	uint8_t *zbuf;			/* the arena, PEER_ZBUF bytes */
	uint64_t zhead, ztail;		/* its bytes in use: [ztail, zhead) */
	uint64_t zpending;		/* zhead before the payload not yet queued */
	bool zheld;			/* peer_compress() gave out arena space */
	unsigned int zskip, zskip_next;
	struct peer_zstats zst;
	/* bytes per second at most (SO_MAX_PACING_RATE); 0: no limit */
	uint64_t rate_limit;
};

int peer_init(struct peer *p, struct loop *l, const struct peer_ops *ops, const char *resource,
	      const struct config_peer *cfg, unsigned int backoff_min_ms,
	      unsigned int backoff_max_ms);
/* Close the socket without calling back; free the buffers. */
void peer_fini(struct peer *p);

/* Start connecting now (state PEER_CONNECTING, or PEER_DOWN on failure). */
void peer_connect(struct peer *p);
/*
 * Tests only (tests/fuzz): use fd, a connected non-blocking stream socket,
 * as the connection, as if connect() had just completed (state
 * PEER_HANDSHAKE, ops->connected called), on a peer not yet up: a
 * connection attempt there was is dropped without calling back.  Plain
 * TCP only: -EOPNOTSUPP with TLS.  The peer owns fd from here on, also on
 * failure.
 */
int peer_adopt_fd(struct peer *p, int fd);
/* Close, call ops->closed, and retry after the backoff. */
void peer_close(struct peer *p, const char *why);
/* The same, with a reset: nothing still in the socket is sent. */
void peer_abort(struct peer *p, const char *why);
/* The handshake is done: streaming, the backoff starts over. */
void peer_set_up(struct peer *p);
/* Secure the connections with *tls (a reload may replace it); NULL: plain TCP. */
static inline void peer_set_tls(struct peer *p, struct tls_ctx *const *tls)
{
	p->tls = tls;
}
/* Best effort, now, bypassing the queue: an Error before a close. */
void peer_send_now(struct peer *p, const void *buf, size_t len);
/* Connect again at once next time (a changed address, an admin request). */
void peer_reset_backoff(struct peer *p);
/* The bounds of the reconnect backoff (a reload). */
void peer_set_backoff(struct peer *p, unsigned int min_ms, unsigned int max_ms);

/* Compress payloads with zstd at this level (0: no more) from now on,
 * when the peer accepts it (zstd_peer). */
void peer_set_compress(struct peer *p, int level);
/* At most this many bytes per second on the link, from now on; 0: no limit. */
void peer_set_rate_limit(struct peer *p, uint64_t bytes_per_s);
/* Compression is configured and the peer accepts it. */
static inline bool peer_compressing(const struct peer *p)
{
	return p->zlevel > 0 && p->zstd_peer;
}
/*
 * Compress a payload for the next peer_queue_payload() (which must follow
 * before any other call on p, and must be given *out and the returned
 * length).  Returns the compressed length, or 0 to send it raw (not
 * compressing, too small, incompressible, or the arena full and not
 * may_wait), or -ENOBUFS when the arena is full and may_wait (try again
 * once the queue has drained).
 */
ssize_t peer_compress(struct peer *p, const void *payload, uint32_t len, bool may_wait,
		      const void **out);

struct json_object;
/*
 * Compression's figures for status: algorithm ("none", "zstd"), level,
 * active (both ends use it now), bytes before and on the wire, their
 * ratio, payloads sent raw, seconds spent.
 */
struct json_object *peer_zstats_json(const char *algorithm, int level, bool active,
				     const struct peer_zstats *z);

/* Queue a frame of len bytes (copied): -ENOBUFS when the queue is full. */
int peer_queue_frame(struct peer *p, const uint8_t *frame, size_t len);
/*
 * Queue a frame (copied) and a payload it points to, which must stay
 * valid until it is sent; seq: the record's sequence or UINT64_MAX; splice:
 * the payload is in the ring and may be spliced.  -ENOBUFS when full.
 */
int peer_queue_payload(struct peer *p, const uint8_t *frame, size_t len, const void *payload,
		       uint32_t payload_len, uint64_t seq, bool splice);
/* Entries queued and not sent. */
static inline unsigned int peer_queued(const struct peer *p)
{
	return (unsigned int)(p->tail - p->head);
}
/* Entries queued so far, ever; an entry is sent once peer_sent_upto() passes it. */
static inline uint64_t peer_queue_mark(const struct peer *p)
{
	return p->tail;
}
static inline uint64_t peer_sent_upto(const struct peer *p)
{
	return p->head;
}

/*
 * Bytes the next frame queued would wait behind: the queue's, the pipe's
 * and those the socket holds, sent or not, that the peer's TCP has not
 * acknowledged (what the link's queues hold counts).
 */
uint64_t peer_ahead_bytes(const struct peer *p);

/* Send what the socket takes; EPOLLOUT when it is full. */
void peer_flush(struct peer *p);
/* Reconnects, handshake deadline, peer-timeout, keepalives. */
void peer_tick(struct peer *p, uint64_t now, bool may_connect, unsigned int timeout_ms,
	       unsigned int keepalive_ms);

/* "Connecting", "Handshake", "Connected": the words of drbdadm status. */
const char *peer_state_name(enum peer_state s);

#endif
