/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The primary role's state, private to its files:
 *
 *   primary.c    the role: start and stop, the tick, the ring's and the
 *                peers' events, the frames a secondary sends
 *   stream.c     the stream: records from the ring to every peer, release
 *                and ack published to the kernel, the target's mode, the
 *                data generation, resync passes started and driven
 *   handshake.c  a secondary's Hello and bitmap: where its stream resumes
 *                and what it needs, or why it is refused
 *   admin.c      control commands, reload, status
 *   fence.c      the fence-peer handler: run when a peer in sync is lost,
 *                and again once it is UpToDate (fence.h)
 *
 * Calls go down that list, never up: primary.c -> admin.c, handshake.c ->
 * stream.c -> fence.c, peer.c, resync.c.
 */
#ifndef REPL_PRIMARY_H
#define REPL_PRIMARY_H

#include <stdbool.h>
#include <stdint.h>

#include <json-c/json.h>

#include "config.h"
#include "ctl.h"
#include "fence.h"
#include "gens.h"
#include "genstore.h"
#include "manager.h"
#include "peer.h"
#include "resync.h"
#include "role.h"
#include "rsctl.h"

struct primary;
struct ring;

/* Why the generation identifiers are to be stored (struct primary's gens_store). */
enum {
	GENS_ROTATED = 1 << 0,		/* a new generation: then the peers join it */
	GENS_UPTODATE = 1 << 1,		/* every peer in it: the bitmap's is forgotten */
};

/* A secondary as the primary sees it: its connection and its stream. */
#define STREAM_LAT_RING	1024U

struct replica {
	struct peer conn;
	struct primary *pri;
	enum peer_mode mode;		/* live; starts as configured (conn.cfg.mode) */
	bool admin_down;		/* replctl disconnect */
	bool removed;			/* dropped from the config by a reload */

	/* the stream */
	uint64_t cursor;		/* next record to queue */
	uint64_t received, written, durable;	/* the peer's acks */
	bool holds_ring;		/* release waits for this peer */
	bool inconsistent;		/* its copy has a hole: needs resync */
	bool ever_connected;
	bool behind;			/* pulled ahead: catching up by resync */
	uint64_t pulled_ahead;		/* times */
	int slot;			/* its out-of-sync bitmap (peerbits), or -1 */
	const char *full_why;		/* untracked: why a resync must be full */

	/* resync */
	struct resync *rs;		/* the pass running, or NULL */
	bool need_full;			/* its copy is unknown: every region */
	bool rs_again;			/* start another bitmap pass after this */
	bool join_pending;		/* sent the JOIN flush, no answer yet */
	uint64_t gap_scanned;		/* the ring looked at for a GAP not yet sent */
	uint64_t resyncs_done, last_resync_bytes;
	uint64_t verifies_done, last_verify_mismatches;
	uint64_t rs_gen;		/* peerbits_gen() when its pass took its regions */
	struct gens peer_gens;		/* from its Hello */
	bool peer_bitmap_done;		/* its PeerBitmap arrived in full */
	uint64_t peer_bitmap_regions;	/* regions it marked */
	uint64_t peer_bitmap_next;	/* its next piece begins here or later (its regions) */
	uint64_t peer_sectors;		/* its device's size, from its Hello */
	bool split_brain;		/* refused: divergent data */

	struct fence fence;		/* the fence-peer handler for it */

	/* the resync controller, fed by the records' latencies: when each
	 * of the last STREAM_LAT_RING records was queued */
	struct rsctl rsc;
	uint64_t rtt_read_ms;		/* when it last had TCP's min_rtt */
	struct stream_lat {
		uint64_t seq;
		uint64_t t_us;
	} lat[STREAM_LAT_RING];
};

struct primary {
	struct role role;
	struct role_env *env;
	char resource[CONFIG_NAME_MAX + 1];
	char dm_name[CONFIG_NAME_MAX + 1];
	struct ring *ring;
	bool ring_from_caller;
	const struct manager_kernel_ops *kops;
	void *kctx;
	struct ev ev_ring;
	const struct peer_ops *peer_ops;	/* of every replica's connection */
	unsigned int nr_replicas;
	struct replica **replicas;
	uint64_t released;		/* what we told the kernel */
	uint64_t acked;
	bool kernel_sync;		/* mode we set in the target */
	bool kernel_mode_known;
	uint32_t kernel_state;
	uint64_t drain_target;		/* prod when the drain began */

	/* generation identifiers */
	struct genstore gs;
	struct gens gens;
	bool pump_wanted;		/* stream_request_pump() */
	uint64_t pumped;		/* ring_prod() at the last pump */
	bool rotate_pending;		/* new generation at the next write */
	uint64_t rotate_mark;		/* ... a record at or after this */
	unsigned int gens_store;	/* GENS_*: to store, then follow up */
	bool gens_failed;		/* the last store failed: again at the tick */
	uint64_t gens_old;		/* the generation before the rotation */

	/* what waits for the peers' bitmaps to be durable (stream_meta_step) */
	uint64_t mark_pending;		/* records below: regions marked for peers
					 * that stopped holding the ring */
	uint64_t marked_upto;		/* ... and durable: they may be released */
	uint8_t *tgt_bits;		/* the target's bits taken, to clear there */
	uint64_t tgt_regions, tgt_gen;
	struct peerbits *pb;		/* each peer's out-of-sync regions */
	int pb_error;			/* the last peerbits_sync() failed: nothing
					 * is released until it works */
	uint64_t pb_error_ms;		/* ... logged then */
	struct resync_io *rs_io;	/* resync reads, opened on first use */
};

/* ---- stream.c ------------------------------------------------------------ */

/* A replica of configured peer cp (not connected), its stream at the tail. */
struct replica *stream_replica_new(struct primary *pri, const struct config_peer *cp);
void stream_replica_free(struct replica *rp);
struct replica *stream_find(struct primary *pri, const char *name);
/* Set the target's mode from the peers' modes (live, no reconnect). */
void stream_update_kernel_mode(struct primary *pri);
/* Publish release and ack to the kernel when they moved. */
void stream_update_ring(struct primary *pri);
/* Mark the regions of records [from, to) in the peer's out-of-sync bitmap. */
void stream_check_size(struct primary *pri);
void stream_mark_records(struct replica *rp, uint64_t from, uint64_t to);
/* The peers' slots after a start or a reload of the configuration. */
int stream_assign_slots(struct primary *pri);
/* The peer is in sync: its bitmap now knows everything it lacks. */
void stream_peer_in_sync(struct replica *rp);
/* Regions the peer lacks: its bitmap's, and the target's not yet moved there. */
uint64_t stream_peer_oos(struct replica *rp);
/*
 * The pump: what the ring has, queued and sent to every connected peer.
 * It runs once per turn of the loop, before it sleeps (primary.c); code
 * that wants records or resync blocks sent asks for it, and a request
 * made after this turn's pump makes the loop turn once more at once.
 */
void stream_request_pump(struct primary *pri);
void stream_pump(struct primary *pri);
/*
 * The other steps of a turn, each on its own condition, in this order: a
 * new generation at the first record without every peer (in memory), the
 * generation identifiers stored (then the joins), the bitmap bookkeeping
 * (the target's dirty bits and the released records' regions into the
 * peers' bitmaps, in memory), resyncs started and driven, the metadata
 * write (the peers' bitmaps durable, then the target's bits cleared and
 * the records released).
 */
void stream_rotate_step(struct primary *pri);
void stream_gens_step(struct primary *pri);
void stream_bits_step(struct primary *pri);
void stream_resync_pump(struct primary *pri);
void stream_meta_step(struct primary *pri);
/* The peer needs no resync: it joins our current generation. */
void stream_send_join(struct replica *rp);
/* Every peer UpToDate in our generation: forget the bitmap's generation. */
void stream_check_in_sync(struct primary *pri);
/* Stop the peer's resync pass, if any; why: it was interrupted. */
void stream_resync_stop(struct replica *rp, const char *why);
/* Start a pass of kind for the connected peer now. */
int stream_resync_start(struct replica *rp, enum rs_kind kind);
/* The peer's acks, checked; false: invalid (the caller closes). */
bool stream_ack(struct replica *rp, uint64_t received, uint64_t written, uint64_t durable);
/* A ResyncFlushed from the peer. */
void stream_resync_flushed(struct replica *rp, uint64_t id);
/* ring fill in per cent of the tighter of data and record slots */
unsigned int stream_ring_fill_pct(struct primary *pri);
/* Payload bytes of the records [from, to) in the ring. */
uint64_t stream_ring_bytes(struct primary *pri, uint64_t from, uint64_t to);
/* Store the generation identifiers. */
int stream_save_gens(struct primary *pri);

/* ---- handshake.c ----------------------------------------------------------- */

/* TCP is up: queue our Hello. */
void handshake_hello(struct replica *rp);
/* The peer's Hello: 0 (streaming), or the connection is closed. */
void handshake_reply(struct replica *rp, const Dmrepl__V1__Hello *h);
/* A piece of the peer's own bitmap. */
void handshake_bitmap(struct replica *rp, const Dmrepl__V1__PeerBitmap *b);

/* ---- admin.c ----------------------------------------------------------------- */

extern const struct ctl_command admin_commands[];
int admin_reload(struct primary *pri, const struct config *n);
void admin_status(struct primary *pri, struct json_object *o);
int admin_may_switch(struct primary *pri, enum repl_role to, bool force, char *err,
		     size_t len);

#endif
