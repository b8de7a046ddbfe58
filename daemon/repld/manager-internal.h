/* SPDX-License-Identifier: GPL-2.0-only */
/* repld internals shared by manager.c, primary.c, secondary.c and ctl.c */
#ifndef REPL_MANAGER_INTERNAL_H
#define REPL_MANAGER_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include <json-c/json.h>
#include <libaio.h>

#include "config.h"
#include "gens.h"
#include "manager.h"
#include "wire.h"

struct apply;
struct ring;

/* epoll user data: what became ready */
enum ev_kind {
	EV_SIGNAL = 1,
	EV_TIMER,
	EV_RING,
	EV_CTL_LISTEN,
	EV_PEER,
	EV_LISTEN,
	EV_CONN,
	EV_APPLY,
	EV_RESYNC,
};

enum rs_kind {
	RS_BITMAP,		/* the regions of the target's dirty bitmap */
	RS_FULL,		/* every region */
	RS_VERIFY,		/* compare hashes of every region, send nothing */
};

struct resync;

struct ev {
	enum ev_kind kind;
	void *ptr;
};

enum peer_conn {
	PEER_DOWN = 0,		/* not connected; reconnect at next_attempt */
	PEER_CONNECTING,	/* connect() in progress */
	PEER_HANDSHAKE,		/* Hello sent, waiting for the reply */
	PEER_UP,		/* streaming */
};

/* A frame queued for sending: a header (at most SENDQ_HDR bytes), then an
 * optional payload that points into the ring's read-only data area. */
#define SENDQ_LEN	512
#define SENDQ_HDR	96

/*
 * Ring payloads of at least this size go to the socket without a copy:
 * vmsplice() into a pipe, splice() to the socket, so the socket refers to
 * the ring's pages.  That is safe because the kernel reuses ring space
 * only after release, and release waits for the peer's durable ack, long
 * after the peer has read the bytes.  Smaller payloads are cheaper to copy.
 */
#define SPLICE_MIN_BYTES	(64U << 10)
#define SPLICE_PIPE_BYTES	(1U << 20)

struct sendq_entry {
	uint8_t hdr[SENDQ_HDR];
	uint32_t hdr_len;
	uint32_t payload_len;
	const void *payload;
	uint64_t seq;			/* record sequence, or UINT64_MAX */
	bool splice;			/* payload in the ring: may be spliced */
};

struct peer {
	struct manager *m;
	struct ev ev;
	struct config_peer cfg;
	enum peer_mode mode;		/* live; starts as configured */
	bool admin_down;		/* replctl disconnect */
	bool removed;			/* dropped from the config by a reload */
	enum peer_conn conn;
	int fd;
	bool want_out;			/* EPOLLOUT armed */
	uint64_t next_attempt_ms;
	unsigned int backoff_ms;
	uint64_t last_rx_ms;
	uint64_t last_tx_ms;
	uint64_t state_since_ms;
	struct wire_reader rd;

	/* the stream */
	uint64_t cursor;		/* next record to queue */
	uint64_t received, written, durable;	/* the peer's acks */
	bool holds_ring;		/* release waits for this peer */
	bool inconsistent;		/* its copy has a hole: needs resync */
	bool ever_connected;

	/* send queue: a ring of entries, [sq_head, sq_tail) */
	struct sendq_entry *sq;
	unsigned int sq_head, sq_tail;
	size_t sq_off;			/* bytes of sq[sq_head] already sent */
	int pipe[2];			/* for splicing ring payloads, or -1 */
	size_t pipe_len;		/* bytes in the pipe, not yet on the socket */
	bool no_splice;			/* splicing failed once: copy instead */

	uint64_t records_sent, bytes_sent, connects;
	char last_error[1024];

	/* resync (resync.c) */
	struct resync *rs;		/* the pass running, or NULL */
	bool need_full;			/* its copy is unknown: every region */
	bool rs_again;			/* start another bitmap pass after this */
	bool verify_requested;
	bool join_pending;		/* sent the JOIN_FLUSH_ID flush, no answer yet */
	uint64_t resyncs_done, last_resync_bytes;
	uint64_t verifies_done, last_verify_mismatches;
	struct gens peer_gens;		/* from its Hello */
	bool peer_bitmap_done;		/* its PeerBitmap arrived in full */
	uint64_t peer_bitmap_regions;	/* regions it marked */
	bool split_brain;		/* refused: divergent data */
};

struct conn;	/* secondary: a connection from a primary (secondary.c) */

struct manager {
	struct config *cfg;
	int epfd;
	/* the events epoll_wait() returned, while manager_run() handles them */
	struct epoll_event *batch;
	int batch_n;
	int sigfd;
	int timerfd;
	int ctl_fd;
	struct ev ev_signal, ev_timer, ev_ring, ev_ctl;
	bool stop;			/* leave the loop now */
	bool draining;			/* SIGTERM: finish what is in flight */
	bool switch_pending;		/* replctl primary/secondary: after the drain */
	enum repl_role switch_to;
	uint64_t drain_deadline_ms;
	uint64_t drain_target;		/* primary: prod at SIGTERM */
	int exit_code;
	uint64_t started_ms;
	uint64_t last_status_ms;
	uint64_t watchdog_usec;
	uint64_t last_watchdog_ms;
	char status_line[256];

	/* primary */
	struct ring *ring;
	bool ring_from_caller;
	const struct manager_kernel_ops *kops;
	void *kctx;
	char dm_name[80];
	unsigned int nr_peers;
	struct peer **peers;
	uint64_t released;		/* what we told the kernel */
	uint64_t acked;
	bool kernel_sync;		/* mode we set in the target */
	bool kernel_mode_known;
	uint32_t kernel_state;
	uint32_t kernel_state_seq;
	uint64_t gaps;
	/* generation identifiers (genstore.c) */
	struct gens gens;
	bool rotate_pending;		/* new generation at the next write */
	uint64_t rotate_mark;		/* ... a record at or after this */

	uint64_t marked_upto;		/* records below: regions marked for
					 * peers that stopped holding the ring */
	uint64_t last_marked_region;
	/* resync reads (resync.c) */
	bool rs_ctx_ok;
	io_context_t rs_ctx;
	int rs_dev_fd, rs_efd;
	struct ev ev_resync;

	/* secondary */
	int dev_fd;
	uint64_t dev_sectors;
	unsigned int nr_listen;
	int listen_fd[8];
	struct ev ev_listen[8];
	struct conn *conn;		/* the primary, when connected */
	struct apply *apply;
	struct ev ev_apply;
	uint64_t stream_id;		/* of the records applied */
	uint64_t state_durable;		/* persisted resume point */
	uint64_t last_state_write_ms;
	char primary_node[CONFIG_NAME_MAX + 1];
	uint64_t primary_connects;
	bool consistent;		/* persisted: no resync pending */
	bool demoted;			/* was the primary a moment ago: consistent */
	bool discard_my_data;		/* persisted: give up this copy's changes */
	struct sec_xlate *xl;		/* engine sequence -> stream sequence */
	struct sec_rs *rs;		/* resync requests waiting for writes */
	uint64_t rs_blocks, rs_bytes, hash_requests;
};

uint64_t now_ms(void);
int ep_add(struct manager *m, int fd, uint32_t events, struct ev *ev);
int ep_mod(struct manager *m, int fd, uint32_t events, struct ev *ev);
void ep_del(struct manager *m, int fd);
/* Before freeing the struct ev of a source: drop its events not yet handled. */
void ep_forget(struct manager *m, const struct ev *ev);
int sock_set_common(int fd);

/* primary.c */
int primary_start(struct manager *m);
void primary_stop(struct manager *m);
void primary_ring_event(struct manager *m, uint32_t events);
void primary_peer_event(struct manager *m, struct peer *p, uint32_t events);
void primary_tick(struct manager *m);
bool primary_before_sleep(struct manager *m);
bool primary_drained(struct manager *m);
void primary_status(struct manager *m, struct json_object *o);
int primary_reload(struct manager *m, struct config *ncfg);
int primary_set_mode(struct manager *m, const char *peer, const char *mode, char *err, size_t len);
int primary_connect(struct manager *m, const char *peer, bool up, char *err, size_t len);
int primary_resync(struct manager *m, const char *peer, enum rs_kind kind, char *err, size_t len);
void primary_free(struct manager *m);

/* manager.c */
int manager_request_role(struct manager *m, enum repl_role role, bool force, char *err,
			 size_t len);

/* genstore.c */
int gens_load(struct manager *m);
int gens_save(struct manager *m);

/*
 * The id of the ResyncFlush (done) that makes a peer which needs no resync
 * consistent in the primary's current generation; resync passes count
 * their flush ids up from 1.
 */
#define JOIN_FLUSH_ID	(UINT64_MAX - 1)

/* primary.c, for resync.c */
int peer_queue_frame(struct peer *p, const uint8_t *frame, size_t len);
void peer_flush(struct peer *p);
void peer_close(struct peer *p, const char *why);

/* resync.c */
int resync_open(struct manager *m);
void resync_close(struct manager *m);
int resync_start(struct peer *p, enum rs_kind kind);
void resync_stop(struct peer *p, const char *why);
void resync_pump(struct manager *m);
void resync_event(struct manager *m);
void resync_taint(struct peer *p, uint64_t sector, uint32_t nr);
void resync_hash_reply(struct peer *p, const Dmrepl__V1__HashReply *h);
void resync_flushed(struct peer *p, uint64_t id);
void resync_status(const struct peer *p, struct json_object *o);

/* secondary.c */
int secondary_start(struct manager *m);
void secondary_listen_event(struct manager *m, int idx);
void secondary_conn_event(struct manager *m, uint32_t events);
void secondary_apply_event(struct manager *m);
void secondary_tick(struct manager *m);
bool secondary_drained(struct manager *m);
void secondary_status(struct manager *m, struct json_object *o);
void secondary_free(struct manager *m);
int secondary_discard_my_data(struct manager *m, char *err, size_t len);

/* ctl.c: the control socket */
int ctl_start(struct manager *m);
void ctl_event(struct manager *m);
void ctl_stop(struct manager *m);
struct json_object *manager_status_json(struct manager *m);

#endif
