/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The secondary role's own state, shared by its files.  Each file calls
 * only the files above it in this list, never one below:
 *
 *   copy.c       this node's copy: the resume state, its own bitmap
 *   conn.c       the connection to the primary: output, errors, closing
 *   records.c    the records: the write engine and the Acks
 *   verify.c     hash requests (checksum resync and verify)
 *   pass.c       a resync pass this node is the target of
 *   hello.c      the Hello both ways and this node's own bitmap after it
 *   frames.c     reading frames, dispatched by frame type; the events
 *   listen.c     the listening sockets and the candidates before a Hello
 *   secondary.c  the role's operations: start, tick, status, reload,
 *                promotion checks, commands
 *
 * Nothing outside this folder includes it: the manager sees struct
 * role_ops alone (role.h).
 */
#ifndef REPL_SECONDARY_H
#define REPL_SECONDARY_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <zstd.h>

#include "apply.h"
#include "genstore.h"
#include "gens.h"
#include "loop.h"
#include "macro.h"
#include "metadata.h"
#include "peer.h"
#include "resync-target.h"
#include "role.h"
#include "tls.h"
#include "wire.h"

#define CONN_OUT	(64 * 1024)
#define XL_MAX		65536U	/* segments of the sequence translation */
#define SEC_MAX_LISTEN	8
#define SEC_MAX_CANDS	4		/* connections waiting for their Hello */
#define SEC_REFUSED_LOG_MS 10000	/* refused connections: one log line per interval */
#define SEC_REFUSED_WHYS 8		/* and per reason, of this many recent reasons */
#define SEC_REPLY_MAX	2400		/* room for a resync reply */
/* a reply refused the primary: the Error is queued and the connection
 * may be gone (no encoder returns it) */
#define SEC_REFUSED	(-ECONNABORTED)

struct secondary;

struct conn {
	struct secondary *s;
	struct ev ev;			/* ev.fd: the socket */
	struct tls_io io;		/* io.fd: the same socket, and its TLS */
	bool up;			/* handshake done */
	bool paused;			/* not reading: the engine is out of buffers */
	bool want_out;
	bool closing;			/* Error queued: close once it is sent */
	bool cand;			/* a candidate: no Hello accepted yet */
	bool more;			/* conn_read() stopped with more to read */
	struct wire_reader rd;
	char node[CONFIG_NAME_MAX + 1];
	char addr[64];
	struct sockaddr_storage sa;	/* where it connects from */
	enum peer_mode mode;
	uint64_t last_rx_ms, last_tx_ms, since_ms;
	uint8_t out[CONN_OUT];
	size_t out_len, out_off;
	struct apply_progress acked;	/* what we last sent in an Ack */
	bool first_data;
	struct apply_buf *pending;	/* buffer of the payload being read */
	size_t unissued;		/* payload bytes read since the last issue */
	bool zseen;			/* a zstd payload came on it */
	/* this node's own bitmap after the Hello, sent as the socket drains */
	bool bm_pending;		/* its last piece not yet queued */
	uint8_t *bm;			/* NULL: no bitmap (an empty last piece) */
	uint64_t bm_bytes, bm_off, bm_regions;
	uint32_t bm_shift;
};

/*
 * conn_read() hands writes to the disk every this many payload bytes,
 * not only once the socket is drained: the disk writes the first records
 * while the rest is still being read.
 */
#define CONN_ISSUE_BYTES	(256U << 10)
/*
 * ... and returns to the loop after this long even when the socket is
 * never empty (a receiver that decrypts no faster than the primary
 * sends): completions are handled and acks go out in between.
 */
#define CONN_READ_MS		20U

/* ---- state ------------------------------------------------------------------ */

struct xl_seg {
	uint64_t lstart, wstart, n;	/* engine [lstart, +n) = stream [wstart, +n) */
};

struct sec_xlate {
	uint64_t lnext;			/* next engine sequence */
	uint64_t wnext;			/* next stream sequence expected */
	uint64_t wbase;			/* stream progress below every segment */
	bool started;			/* a record arrived on this engine */
	uint64_t epoch;			/* of the last record, for resync blocks */
	bool after_flush;
	unsigned int head, len;
	struct xl_seg seg[XL_MAX];
};

/* A listening socket. */
struct sec_listen {
	struct ev ev;
	struct secondary *s;
};

struct secondary {
	struct role role;
	struct role_env *env;
	char resource[CONFIG_NAME_MAX + 1];
	int dev_fd;
	uint64_t dev_sectors;
	unsigned int nr_listen;
	struct sec_listen listen[SEC_MAX_LISTEN];
	struct conn *conn;		/* the primary, when connected */
	struct conn *cands[SEC_MAX_CANDS];	/* new connections before their Hello */
	struct sec_refusal {
		char why[128];
		uint64_t log_ms;	/* when it was last logged */
		uint64_t quiet;		/* refusals for it not logged since */
	} refusals[SEC_REFUSED_WHYS];
	uint64_t refused;		/* connections refused before their Hello */
	struct apply *apply;
	struct ev ev_apply;
	struct genstore gs;
	struct gens gens;
	uint64_t stream_id;		/* of the records applied */
	uint64_t state_durable;		/* persisted resume point */
	uint64_t hello_resume;		/* where the stream may go on without a
					 * hole (UINT64_MAX: nowhere) */
	bool vouched;			/* the primary made this copy consistent at
					 * its stream position (a join, a resync's end) */
	uint64_t last_state_write_ms;
	uint64_t saved_checkpoints;	/* the engine's checkpoints at that write */
	/* the primary's Hello: an fdatasync at the latest every so many
	 * records or bytes, as its ring holds them until durable (0: none) */
	uint64_t durable_every_records, durable_every_bytes;
	char primary_node[CONFIG_NAME_MAX + 1];
	uint64_t primary_connects;
	bool consistent;		/* persisted: no resync pending */
	bool discard_my_data;		/* persisted: give up this copy's changes */
	struct sec_xlate *xl;		/* engine sequence -> stream sequence */
	struct resync_target *rt;	/* resync requests waiting for writes */
	uint64_t rs_blocks, rs_bytes, hash_requests;
	uint64_t io_errors;		/* failed writes of the engines already freed */
	/* zstd payloads (Hello FEATURE_ZSTD): read into zin, decompressed
	 * into the engine's buffer; zst.in_bytes counts them decompressed */
	uint8_t *zin;
	ZSTD_DCtx *zdctx;
	struct peer_zstats zst;
};


static inline struct secondary *secondary_of(struct role *r)
{
	return container_of(r, struct secondary, role);
}

/*
 * A frame's handler (frames.c dispatches by frame type).  True: go on
 * reading; false: the connection is gone, stop at once.
 */
typedef bool sec_frame_fn(struct secondary *s, struct conn *c, struct wire_msg *msg);

/* copy.c */
int copy_save(struct secondary *s, uint64_t durable);
void copy_load(struct secondary *s);
int copy_set_consistent(struct secondary *s, bool consistent);
uint64_t copy_own_bitmap(struct secondary *s, struct md_info *ret);

/* conn.c */
void conn_arm(struct conn *c);
void conn_cand_unlink(struct secondary *s, const struct conn *c);
void conn_drop(struct secondary *s, struct conn *c, const char *why);
void conn_close(struct secondary *s, const char *why);
void conn_flush(struct conn *c);
uint8_t *conn_out_space(struct conn *c, size_t need);
void conn_send_error(struct conn *c, Dmrepl__V1__Error__Code code, const char *reason);
ssize_t conn_readv(void *ctx, const struct iovec *iov, int iovcnt);

/* records.c */
bool records_device_holds(struct secondary *s, uint64_t end);
void records_progress(struct secondary *s, struct apply_progress *p);
uint64_t records_io_errors(const struct secondary *s);
void records_engine_free(struct secondary *s);
void records_persist(struct secondary *s, bool force);
void records_send_ack(struct secondary *s);
int records_engine_stop(struct secondary *s);
int records_engine_new(struct secondary *s, uint64_t seq);
int records_engine_start(struct secondary *s);
void *records_payload_buf(void *ctx, const Dmrepl__V1__Data *d);
void records_apply(struct secondary *s);
sec_frame_fn records_frame_data;
void records_queue_request(struct secondary *s, struct conn *c, struct resync_req *req);

/* verify.c */
ssize_t verify_reply_hash(struct secondary *s, struct conn *c, const struct resync_req *q,
			  uint8_t *b, size_t len);
sec_frame_fn verify_frame_hash_request;

/* pass.c */
void pass_run(struct secondary *s);
sec_frame_fn pass_frame_begin;
sec_frame_fn pass_frame_flush;

/* hello.c */
void hello_send_own_bitmap(struct secondary *s, struct conn *c);
const char *hello_primary_refusal(const struct config *cfg, const char *node,
				  const struct sockaddr_storage *sa);
const char *hello_refusal(struct secondary *s, const struct conn *c,
			  const Dmrepl__V1__Hello *h, Dmrepl__V1__Error__Code *code);
void hello_accept(struct secondary *s, struct conn *c, const Dmrepl__V1__Hello *h);

/* frames.c */
void frames_read(struct secondary *s);
void frames_apply_event(struct ev *ev, uint32_t events);
void frames_conn_event(struct ev *ev, uint32_t events);
bool frames_more(const struct conn *c);

/* listen.c */
void listen_new_conn(struct secondary *s, int fd, const struct sockaddr_storage *sa);
void listen_event(struct ev *ev, uint32_t events);
int listen_open(struct secondary *s);


#endif
