/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The primary's resync and verify passes, one per peer at a time (the
 * secondary's half is resync-target.c).
 *
 * A pass walks a set of regions (a copy of the target's dirty bitmap, or
 * every region for a full sync or a verify), reads them from the local
 * device with libaio (struct resync_io, shared by the passes of every
 * peer) and queues resync blocks, hash requests and resync flushes on the
 * peer's connection.  The owner drives it: resync_step() whenever
 * something may have moved, and the peer's answers (resync_flushed(),
 * resync_hash_reply()); it decides what a result means for the peer.
 */
#ifndef REPL_RESYNC_H
#define REPL_RESYNC_H

#include <stdbool.h>
#include <stdint.h>

#include <json-c/json.h>

#include "wire.h"

struct loop;
struct peer;
struct ring;

enum rs_kind {
	RS_BITMAP,		/* the regions the peer lacks (its owner's bitmap) */
	RS_FULL,		/* every region */
	RS_VERIFY,		/* compare hashes of every region, send nothing */
};

/* What a step or an answer ended in, besides 0 (running) and -errno. */
#define RESYNC_DONE	1	/* resync or full sync complete: the copy is in sync */
#define RESYNC_VERIFIED	2	/* verify complete (resync_mismatches() regions differ) */

/*
 * The id of the ResyncFlush (done) that makes a peer which needs no resync
 * consistent in the primary's current generation (the primary sends it
 * outside any pass); passes count their flush ids up from 1.
 */
#define RESYNC_JOIN_FLUSH_ID	(UINT64_MAX - 1)

/* The reads of every pass: one libaio context on the local device. */
struct resync_io;

/* completed(ctx) after reads completed: drive the passes. */
int resync_io_new(struct loop *l, const char *device, void (*completed)(void *ctx), void *ctx,
		  struct resync_io **ret);
void resync_io_free(struct resync_io *io);

struct resync;

/* What the owner of a pass does with its results. */
struct resync_owner_ops {
	/*
	 * Regions [first, first + count) of the pass are durable on the peer:
	 * the owner clears them.  0, or -EAGAIN when some were marked since
	 * the pass took its regions (they stay; another pass follows).
	 */
	int (*clean)(void *ctx, uint64_t first, uint64_t count);
	/* A verify found region r different on the peer. */
	void (*differs)(void *ctx, uint64_t r);
};

/*
 * A pass of kind over ring's device to the peer on conn (up).  regions:
 * for RS_BITMAP, the regions to do (LE bit order, one bit per region of
 * the ring's device), which the pass takes and frees; NULL for the
 * others.  A resync or full sync queues its ResyncBegin.  checksums:
 * hashes first, payload only where they differ (always for a verify).
 * resource: for messages.
 */
int resync_new(struct resync_io *io, struct ring *ring, struct peer *conn, const char *resource,
	       enum rs_kind kind, bool checksums, uint8_t *regions,
	       const struct resync_owner_ops *ops, void *ctx, struct resync **ret);
/* Wait for its reads in flight, then forget it; why: it was interrupted. */
void resync_free(struct resync *rs, const char *why);

/* How fast a pass may go (rsctl.h); 0: no bound of that kind. */
struct resync_pace {
	uint64_t rate;			/* bytes per second */
	uint64_t ahead_max;		/* bytes queued or unsent ahead of the next record */
	uint32_t unit_sectors;		/* a unit's size at most (a multiple of 8) */
	uint64_t started;		/* out: bytes of the units this step started */
};
/*
 * Drive the pass as far as it goes now: stream_pos is the peer's stream
 * position (the next record queued to it), pace how fast it may go, gen
 * the current data generation (for ResyncFlush).  0 running,
 * RESYNC_VERIFIED, or -errno (resync_why() says why; free it).
 */
int resync_step(struct resync *rs, uint64_t stream_pos, struct resync_pace *pace,
		uint64_t gen);
/*
 * The peer made everything up to flush id durable: the regions done are
 * handed to the owner's clean().  0, RESYNC_DONE, or -EPROTO (not an id
 * of this pass).
 */
int resync_flushed(struct resync *rs, uint64_t id);
/* The peer's hashes: 0, or -EPROTO and *why. */
int resync_hash_reply(struct resync *rs, const Dmrepl__V1__HashReply *h, const char **why);
/* A record overlapping [sector, +nr) is being queued to the peer. */
void resync_taint(struct resync *rs, uint64_t sector, uint32_t nr);

const char *resync_why(const struct resync *rs);
/*
 * Regions were marked for the peer since the pass took its own: another
 * pass must follow, and this one's last ResyncFlush does not tell the peer
 * its copy is complete.
 */
void resync_mark_again(struct resync *rs);
/* Regions were marked during the pass (they stay): another pass must follow. */
bool resync_again(const struct resync *rs);
uint64_t resync_sent_bytes(const struct resync *rs);
/* The generation the pass's last ResyncFlush told the peer it belongs to. */
uint64_t resync_flush_gen(const struct resync *rs);
uint64_t resync_mismatches(const struct resync *rs);
/* Its progress as status shows it, under "resync". */
void resync_status(const struct resync *rs, struct json_object *o);

#endif
