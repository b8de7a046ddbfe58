/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The fence-peer handler of a primary (repl.conf(5) fence-peer, repld(8)
 * FENCING), modelled on DRBD's fence-peer / unfence-peer handlers: when
 * the connection to a peer whose copy was in sync breaks, that copy is out
 * of date from the next write on, and a cluster manager must not promote
 * it.  repld runs "<fence-peer> fence" (the cluster's script forbids the
 * promotion), and "<fence-peer> unfence" once the peer is UpToDate again.
 *
 * Per peer, the state of its fencing and what its copy calls for (fenced
 * or not).  One handler at a time per peer: when what the copy calls for
 * changed while one ran, the other action follows once it ends.  The
 * handler is a child process watched through a pidfd in the loop, never
 * waited for; one still running after fence-peer-timeout-ms is killed with
 * its process group and counts as failed, like one that exits non-zero.
 * Without fence-peer nothing happens: the state stays none.
 *
 * The peers whose copy calls for a fence are kept in
 * <state-dir>/<resource>.fence, so that a primary restarted (or promoted
 * again) unfences a peer it had fenced once the peer is UpToDate.
 */
#ifndef REPL_FENCE_H
#define REPL_FENCE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "loop.h"

enum fence_state {
	FENCE_NONE = 0,		/* not fenced (or no handler) */
	FENCE_FENCING,		/* "fence" running */
	FENCE_FENCED,		/* "fence" exited 0 */
	FENCE_UNFENCING,	/* "unfence" running */
	FENCE_FAILED,		/* the last action failed */
};

struct fence {
	enum fence_state state;
	bool want;			/* the copy is out of date: fenced */
	pid_t pid;			/* the handler running, or 0 */
	struct ev ev;			/* its pidfd */
	uint64_t deadline_ms;		/* then it is killed */
	bool killed;			/* ... it was */
	/* the target when the fence began: a hold timeout since means
	 * writes completed without the peer before it was fenced */
	uint64_t hold_timeouts, prod;
	bool warned;			/* ... logged */
	/* UpToDate again: unfenced once it has written the ring's head of
	 * then (mark - 1); 0: not UpToDate */
	uint64_t mark;
	uint64_t failures;
};

struct primary;
struct replica;

void fence_init(struct fence *f);
/* The primary's peers are there: those it had fenced, as it left them. */
void fence_load(struct primary *pri);
/*
 * The peer's connection, up and streaming, broke while its copy was in
 * sync (or the administrator took it down): fence it.
 */
void fence_peer_lost(struct replica *rp);
/*
 * Every tick: unfence the peers UpToDate again, kill the handlers past
 * their timeout, warn of a hold timeout while a fence runs.
 */
void fence_tick(struct primary *pri, uint64_t now);
/* The peer goes (a reload, repld stops): a handler still running is left
 * to finish, one that exited is reaped. */
void fence_fini(struct replica *rp);

/* "none", "fencing", "fenced", "unfencing", "failed" */
const char *fence_state_name(enum fence_state s);

#endif
