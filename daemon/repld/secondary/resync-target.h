/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The secondary's half of resync and verify (the primary's is resync.c):
 * the primary's HashRequests and ResyncFlushes wait here until everything
 * received before them is written, then the secondary answers them in
 * order -- hashes of its blocks (read synchronously), or an fdatasync and
 * ResyncFlushed (done: the copy is consistent in the primary's generation).
 */
#ifndef REPL_RESYNC_TARGET_H
#define REPL_RESYNC_TARGET_H

#include <stdbool.h>
#include <stdint.h>

#define RESYNC_TARGET_QUEUE	1024U	/* requests waiting at most */

struct resync_req {
	bool flush;			/* ResyncFlush, else HashRequest */
	bool done;			/* ResyncFlush: the pass is complete */
	uint64_t id, sector, gen;
	uint32_t nr_sectors, block_sectors;
	uint64_t lpos;			/* engine sequences below this first */
};

struct resync_target;

int resync_target_new(struct resync_target **ret);
void resync_target_free(struct resync_target *t);
/* The connection is gone: forget what waits. */
void resync_target_clear(struct resync_target *t);
/* -ENOBUFS when RESYNC_TARGET_QUEUE requests wait already. */
int resync_target_queue(struct resync_target *t, const struct resync_req *req);
/* The next request whose turn has come (written: the engine's), or NULL. */
const struct resync_req *resync_target_next(const struct resync_target *t, uint64_t written);
void resync_target_pop(struct resync_target *t);
/*
 * The hashes (xxh3) of the request's blocks, read from fd into hash
 * (room for WIRE_MAX_HASHES): their number, or -errno.
 */
int resync_target_hash(struct resync_target *t, int fd, const struct resync_req *q,
		       uint64_t *hash);

#endif
