// SPDX-License-Identifier: GPL-2.0-only
/*
 * libreplapply: the write engine of a secondary.  See apply.h for the rules
 * and the API.
 *
 * Records live in one FIFO in sequence order (a->head .. a->tail) from
 * apply_submit() until they are completed and every earlier record is too
 * ("retired"); the head of the FIFO is therefore the "written" value.
 *
 *   HELD      queued behind an admitted FLUSH that has not completed
 *   BLOCKED   admitted, waiting for earlier overlapping records
 *   READY     admitted, nothing earlier overlaps: in the ready queue
 *   BARRIER   an admitted FLUSH, waiting to be the FIFO head
 *   INFLIGHT  handed to the backend
 *   SYNCWAIT  FUA write without RWF_DSYNC: written, waiting for an fdatasync
 *   DONE      completed (waiting for earlier records to retire)
 *
 * Overlaps: an interval map (apply-map.c) records, for every sector, the
 * last admitted record whose extent (rounded out to the logical block size)
 * covers it and that has not completed.  Admitting a record cuts its extent out of the map: every
 * distinct owner found there gets an edge to it (nr_deps++), and the extent
 * then belongs to the new record.  Completing a record removes its segments
 * and decrements its dependents.  Depending only on the last owner of each
 * sector is enough: that owner was itself blocked by every earlier owner
 * of the sector, so when it completes they all have.
 *
 * Epochs: a FLUSH is admitted like any record but stops admission (it is
 * the barrier); it is issued once it is the FIFO head (every earlier record
 * completed), and admission resumes when it completes.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "apply-internal.h"

/* Memory charged for each queued record, against max_buffer_bytes. */
#define APPLY_REQ_CHARGE	256U
/* Largest payload buffer. */
#define APPLY_BUF_MAX		(1ULL << 30)
/*
 * Payload buffers of 4 KiB to 4 MiB are sized to a power of 2 and kept
 * for the next record of their size (up to a quarter of max_buffer_bytes
 * in all) instead of going back to malloc.  glibc hands memory of 64 KiB
 * and more back to the kernel on free (mmap threshold, heap trim), and a
 * new buffer then takes a page fault per page while the socket is read
 * into it, a few hundred microseconds per 256 KiB record in a guest.
 * Below that, a block-aligned posix_memalign() and its free() cost a
 * stream of 4 KiB records about a tenth of the secondary's CPU (perf,
 * repl-simprimary on the host).
 */
#define APPLY_SPARE_MIN_SHIFT	12
#define APPLY_SPARE_MAX_SHIFT	22
#define APPLY_SPARE_CLASSES	(APPLY_SPARE_MAX_SHIFT - APPLY_SPARE_MIN_SHIFT + 1)

enum apply_req_state {
	APPLY_REQ_HELD,
	APPLY_REQ_BLOCKED,
	APPLY_REQ_READY,
	APPLY_REQ_BARRIER,
	APPLY_REQ_INFLIGHT,
	APPLY_REQ_SYNCWAIT,
	APPLY_REQ_DONE,
};

struct apply_req;

struct apply_edge {
	struct apply_req *to;
	struct apply_edge *next;
};

struct apply_req {
	struct apply_rec rec;
	uint64_t start, end;		/* conflict extent, sectors, block-aligned */
	struct apply_buf *buf;
	struct apply_req *next;		/* FIFO */
	struct apply_req *link;		/* ready queue, fua_wait or sync.covered */
	struct apply_edge *dependents;	/* later records waiting for this one */
	uint64_t mark;			/* last admission that counted it */
	uint32_t nr_deps;		/* earlier records this one waits for */
	uint8_t state;			/* enum apply_req_state */
	bool self_durable;		/* durable on its own (FLUSH, FUA, GAP) */
	bool linked;			/* owns segments in the map */
	struct apply_io io;
};

/* The one fdatasync in flight that is not a FLUSH record. */
struct apply_sync {
	struct apply_io io;
	bool busy;
	uint64_t upto;			/* records below were written at issue */
	struct apply_req *covered;	/* SYNCWAIT records it makes durable */
};

struct apply {
	struct apply_backend *be;
	uint64_t dev_sectors;
	unsigned int block_size;
	uint32_t block_sectors;
	unsigned int depth;
	uint64_t checkpoint_ns;
	uint64_t checkpoint_records;	/* 0: no bound */
	uint64_t checkpoint_bytes;	/* 0: no bound */
	uint64_t max_charge;
	int error;			/* sticky */

	uint64_t received;
	uint64_t durable;
	uint64_t epoch;
	bool epoch_known;
	bool after_flush;		/* the last record was a FLUSH */

	struct apply_req *head, *tail;	/* every record not retired */
	struct apply_req *admit;	/* first record not admitted */
	struct apply_req *barrier;	/* admitted FLUSH, not completed */
	struct apply_req *ready_head, *ready_tail;
	struct apply_req *fua_wait;	/* SYNCWAIT records not covered yet */

	struct apply_map map;		/* the extents of records not completed */
	struct apply_edge *edge_free;
	uint64_t mark;

	struct apply_sync sync;
	bool sync_now;			/* apply_drain(): do not wait for the timer */
	bool no_dsync;			/* RWF_DSYNC refused */
	uint64_t last_sync_ns;
	uint64_t synced_seq;		/* records below were written at the last fdatasync */
	uint64_t synced_bytes;		/* stats.bytes then */
	unsigned int in_flight;
	uint64_t charge;
	struct apply_buf *spare[APPLY_SPARE_CLASSES];	/* by size class */
	uint64_t spare_bytes;

	struct apply_io **batch;	/* depth */
	struct apply_io **reaped;	/* depth */

	struct apply_stats stats;
};

static uint64_t apply_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void apply_set_error(struct apply *a, int error)
{
	if (!a->error)
		a->error = error;
}

static uint64_t apply_written(const struct apply *a)
{
	return a->head ? a->head->rec.seq : a->received;
}

struct apply_link {
	struct apply *a;
	struct apply_req *req;
};

/* An owner of the extent a record is admitted to: it waits for that one. */
static int apply_req_depend(void *ctx, void *owner)
{
	struct apply_link *l = ctx;
	struct apply *a = l->a;
	struct apply_req *req = l->req, *o = owner;
	struct apply_edge *e;

	if (o->mark == a->mark)
		return 0;	/* seen in this admission already */
	o->mark = a->mark;
	e = a->edge_free;
	if (e)
		a->edge_free = e->next;
	else if (!(e = malloc(sizeof(*e))))
		return -ENOMEM;
	e->to = req;
	e->next = o->dependents;
	o->dependents = e;
	req->nr_deps++;
	return 0;
}

/* Admission of an extent record: find what it waits for, take its extent. */
static int apply_req_link(struct apply *a, struct apply_req *req)
{
	struct apply_link l = { a, req };
	int ret;

	a->mark++;
	ret = apply_map_take(&a->map, req->start, req->end, req, apply_req_depend, &l);
	if (ret < 0)
		return ret;
	req->linked = true;
	return 0;
}

static void apply_ready_push(struct apply *a, struct apply_req *req)
{
	req->state = APPLY_REQ_READY;
	req->link = NULL;
	if (a->ready_tail)
		a->ready_tail->link = req;
	else
		a->ready_head = req;
	a->ready_tail = req;
}

/* The extent of req is free again: drop its segments, wake dependents. */
static void apply_req_unlink(struct apply *a, struct apply_req *req)
{
	struct apply_edge *e;

	if (!req->linked)
		return;
	req->linked = false;
	apply_map_drop(&a->map, req->start, req->end, req);

	while ((e = req->dependents)) {
		struct apply_req *to = e->to;

		req->dependents = e->next;
		e->next = a->edge_free;
		a->edge_free = e;
		if (--to->nr_deps == 0 && to->state == APPLY_REQ_BLOCKED)
			apply_ready_push(a, to);
	}
}

/* ---- record life cycle --------------------------------------------------- */

static void apply_req_free(struct apply *a, struct apply_req *req)
{
	struct apply_edge *e;

	apply_buf_put(a, req->buf);
	while ((e = req->dependents)) {
		req->dependents = e->next;
		free(e);
	}
	a->charge -= APPLY_REQ_CHARGE;
	free(req);
}

/* Pop completed records from the FIFO head: this is what moves "written". */
static void apply_retire(struct apply *a)
{
	struct apply_req *req;

	while ((req = a->head) && req->state == APPLY_REQ_DONE) {
		/* durable on its own, with everything below durable */
		if (req->self_durable && a->durable == req->rec.seq)
			a->durable = req->rec.seq + 1;
		a->head = req->next;
		if (!a->head)
			a->tail = NULL;
		apply_req_free(a, req);
	}
}

static void apply_req_done(struct apply *a, struct apply_req *req)
{
	req->state = APPLY_REQ_DONE;
	apply_req_unlink(a, req);	/* FUA fallback: unlinked already */
	apply_buf_put(a, req->buf);
	req->buf = NULL;
	a->stats.records++;
	switch (req->rec.op) {
	case DM_REPL_OP_WRITE:
		a->stats.writes++;
		a->stats.bytes += (uint64_t)req->rec.nr_sectors << 9;
		if (req->rec.flags & DM_REPL_F_FUA)
			a->stats.fua++;
		break;
	case DM_REPL_OP_FLUSH:
		a->stats.flushes++;
		break;
	case DM_REPL_OP_DISCARD:
		a->stats.discards++;
		break;
	case DM_REPL_OP_WRITE_ZEROES:
		a->stats.zeroes++;
		break;
	}
}

/* Admit held records, up to and including the next FLUSH. */
static void apply_admit(struct apply *a)
{
	while (a->admit && !a->barrier && !a->error) {
		struct apply_req *req = a->admit;
		int r;

		a->admit = req->next;
		switch (req->rec.op) {
		case DM_REPL_OP_FLUSH:
			req->state = APPLY_REQ_BARRIER;
			a->barrier = req;
			break;
		case DM_REPL_OP_GAP:
			req->self_durable = true;
			apply_req_done(a, req);
			break;
		default:
			r = apply_req_link(a, req);
			if (r < 0) {
				apply_set_error(a, r);
				return;
			}
			if (req->nr_deps)
				req->state = APPLY_REQ_BLOCKED;
			else
				apply_ready_push(a, req);
			break;
		}
	}
	apply_retire(a);
}

/* ---- issuing ----------------------------------------------------------- */

/* A checkpoint would be useful now (the timer aside). */
static bool apply_sync_wanted(const struct apply *a)
{
	if (a->sync.busy || a->error)
		return false;
	/* a FLUSH record's fdatasync in flight does the job */
	if (a->barrier && a->barrier->state == APPLY_REQ_INFLIGHT)
		return false;
	return a->fua_wait || apply_written(a) > a->durable;
}

/* The last fdatasync is checkpoint_records records or checkpoint_bytes behind. */
static bool apply_sync_bound(const struct apply *a)
{
	uint64_t written = apply_written(a);

	if (a->checkpoint_records && written > a->synced_seq &&
	    written - a->synced_seq >= a->checkpoint_records)
		return true;
	return a->checkpoint_bytes &&
	       a->stats.bytes - a->synced_bytes >= a->checkpoint_bytes;
}

static bool apply_sync_due(const struct apply *a, uint64_t now)
{
	return a->fua_wait || a->sync_now ||
	       now - a->last_sync_ns >= a->checkpoint_ns || apply_sync_bound(a);
}

static void apply_sync_mark(struct apply *a, uint64_t upto, uint64_t now)
{
	a->last_sync_ns = now;
	a->synced_seq = upto;
	a->synced_bytes = a->stats.bytes;
}

static void apply_req_prep(struct apply *a, struct apply_req *req)
{
	struct apply_io *io = &req->io;
	bool fua = req->rec.flags & DM_REPL_F_FUA;

	*io = (struct apply_io) {
		.seq = req->rec.seq,
		.offset = req->rec.sector << 9,
		.len = (uint64_t)req->rec.nr_sectors << 9,
		.dsync = fua,
	};
	switch (req->rec.op) {
	case DM_REPL_OP_WRITE:
		io->op = APPLY_IO_WRITE;
		io->buf = req->buf->data;
		io->dsync = fua && !a->no_dsync;
		break;
	case DM_REPL_OP_DISCARD:
		io->op = APPLY_IO_DISCARD;
		break;
	case DM_REPL_OP_WRITE_ZEROES:
		io->op = APPLY_IO_ZEROES;
		break;
	case DM_REPL_OP_FLUSH:
		io->op = APPLY_IO_FDSYNC;
		io->offset = io->len = 0;
		io->dsync = false;
		break;
	}
	req->state = APPLY_REQ_INFLIGHT;
}

/* Lowest record not written (SYNCWAIT counts as written: a sync covers it). */
static uint64_t apply_sync_upto(const struct apply *a)
{
	const struct apply_req *req = a->head;

	while (req && (req->state == APPLY_REQ_DONE ||
		       req->state == APPLY_REQ_SYNCWAIT))
		req = req->next;
	return req ? req->rec.seq : a->received;
}

static void apply_batch_submit(struct apply *a, int n)
{
	int done = 0;

	while (done < n) {
		struct apply_io *io;
		int r = a->be->ops->submit(a->be, a->batch + done, n - done);

		if (r > 0) {
			a->in_flight += (unsigned int)r;
			done += r;
			continue;
		}
		if (r == 0)
			r = -EAGAIN;
		io = a->batch[done];
		if (io->op == APPLY_IO_WRITE && io->dsync &&
		    (r == -EINVAL || r == -EOPNOTSUPP)) {
			/* no RWF_DSYNC: FUA becomes write + fdatasync */
			a->no_dsync = true;
			a->stats.fua_fallback = true;
			for (int i = done; i < n; i++)
				if (a->batch[i]->op == APPLY_IO_WRITE)
					a->batch[i]->dsync = false;
			continue;
		}
		/* the rest stays unstarted: nothing is issued any more */
		apply_set_error(a, r);
		return;
	}
}

static void apply_issue(struct apply *a)
{
	unsigned int room;
	uint64_t now;
	int n = 0;

	if (a->error || a->in_flight >= a->depth)
		return;
	room = a->depth - a->in_flight;
	now = apply_now_ns();

	/* the barrier, once every earlier record has completed */
	if (a->barrier && a->barrier->state == APPLY_REQ_BARRIER &&
	    a->head == a->barrier) {
		apply_req_prep(a, a->barrier);
		a->batch[n++] = &a->barrier->io;
		apply_sync_mark(a, a->barrier->rec.seq, now);
	}
	/* a checkpoint, not a barrier (not needed if the barrier just went) */
	if ((unsigned int)n < room && apply_sync_wanted(a) &&
	    apply_sync_due(a, now)) {
		a->sync.io = (struct apply_io) {
			.op = APPLY_IO_FDSYNC, .seq = APPLY_IO_NO_SEQ,
		};
		a->sync.busy = true;
		a->sync.upto = apply_sync_upto(a);
		a->sync.covered = a->fua_wait;
		a->fua_wait = NULL;
		a->batch[n++] = &a->sync.io;
		apply_sync_mark(a, a->sync.upto, now);
	}
	while ((unsigned int)n < room && a->ready_head) {
		struct apply_req *req = a->ready_head;

		a->ready_head = req->link;
		if (!a->ready_head)
			a->ready_tail = NULL;
		apply_req_prep(a, req);
		a->batch[n++] = &req->io;
	}
	if (n)
		apply_batch_submit(a, n);
}

/* ---- completions --------------------------------------------------------- */

static void apply_sync_complete(struct apply *a, struct apply_io *io)
{
	struct apply_req *req;
	uint64_t written;

	a->sync.busy = false;
	if (io->res < 0) {
		a->stats.io_errors++;
		apply_set_error(a, (int)io->res);
		return;
	}
	while ((req = a->sync.covered)) {
		a->sync.covered = req->link;
		req->self_durable = true;
		apply_req_done(a, req);
	}
	apply_retire(a);
	written = apply_written(a);
	if (a->sync.upto > a->durable)
		a->durable = a->sync.upto < written ? a->sync.upto : written;
	a->stats.checkpoints++;
}

static void apply_io_complete(struct apply *a, struct apply_io *io)
{
	struct apply_req *req;

	a->in_flight--;
	if (io == &a->sync.io) {
		apply_sync_complete(a, io);
		return;
	}
	req = container_of(io, struct apply_req, io);
	if (io->res < 0) {
		/* the record stays incomplete: "written" never passes it */
		a->stats.io_errors++;
		apply_set_error(a, (int)io->res);
		return;
	}
	if (io->op == APPLY_IO_WRITE && (uint64_t)io->res != io->len) {
		a->stats.io_errors++;
		apply_set_error(a, -EIO);
		return;
	}

	switch (req->rec.op) {
	case DM_REPL_OP_FLUSH:
		/* everything before it completed before it was issued */
		req->self_durable = true;
		apply_req_done(a, req);
		a->barrier = NULL;
		if (a->durable < req->rec.seq + 1)
			a->durable = req->rec.seq + 1;
		break;
	default:
		if ((req->rec.flags & DM_REPL_F_FUA) && !io->dsync) {
			/* on the device, not durable: free the extent, wait for a sync */
			apply_req_unlink(a, req);
			apply_buf_put(a, req->buf);
			req->buf = NULL;
			req->state = APPLY_REQ_SYNCWAIT;
			req->link = a->fua_wait;
			a->fua_wait = req;
			break;
		}
		req->self_durable = io->dsync;
		apply_req_done(a, req);
		break;
	}
}

static void apply_reap(struct apply *a)
{
	for (;;) {
		int n = a->be->ops->reap(a->be, a->reaped, (int)a->depth);

		if (n < 0) {
			apply_set_error(a, n);
			return;
		}
		for (int i = 0; i < n; i++)
			apply_io_complete(a, a->reaped[i]);
		if (n < (int)a->depth)
			break;
	}
	apply_retire(a);
}

/* ---- public API ------------------------------------------------------------ */

void apply_config_init(struct apply_config *cfg)
{
	*cfg = (struct apply_config) {
		.queue_depth = APPLY_QUEUE_DEPTH_DEFAULT,
		.checkpoint_ms = APPLY_CHECKPOINT_MS_DEFAULT,
		.max_buffer_bytes = APPLY_MAX_BUFFER_BYTES_DEFAULT,
	};
}

static int apply_config_check(const struct apply_config *cfg)
{
	if (cfg->queue_depth < 1 || cfg->queue_depth > APPLY_QUEUE_DEPTH_MAX)
		return -EINVAL;
	if (cfg->max_buffer_bytes == 0)
		return -EINVAL;
	if (cfg->block_size &&
	    (!apply_is_pow2(cfg->block_size) ||
	     cfg->block_size < APPLY_BLOCK_MIN ||
	     cfg->block_size > APPLY_BLOCK_MAX))
		return -EINVAL;
	return 0;
}

/* The configuration to use: cfg, or the defaults when NULL; checked. */
static int apply_config_use(const struct apply_config *cfg, struct apply_config *ret)
{
	if (cfg)
		*ret = *cfg;
	else
		apply_config_init(ret);
	return apply_config_check(ret);
}

int apply_new_backend(struct apply_backend *be, uint64_t dev_sectors,
		      unsigned int block_size, const struct apply_config *cfg,
		      struct apply **ret)
{
	struct apply_config c;
	struct apply *a;
	int r;

	r = apply_config_use(cfg, &c);
	if (r < 0)
		return r;
	if (!be || !be->ops || !be->ops->submit || !be->ops->reap ||
	    !be->ops->wait || !be->ops->free)
		return -EINVAL;
	if (!apply_is_pow2(block_size) || block_size < APPLY_BLOCK_MIN ||
	    block_size > APPLY_BLOCK_MAX)
		return -EINVAL;
	if (dev_sectors == 0 || dev_sectors > (UINT64_MAX >> 10))
		return -EINVAL;

	a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	a->batch = calloc(c.queue_depth, sizeof(*a->batch));
	a->reaped = calloc(c.queue_depth, sizeof(*a->reaped));
	if (!a->batch || !a->reaped) {
		free(a->batch);
		free(a->reaped);
		free(a);
		return -ENOMEM;
	}
	a->be = be;
	a->dev_sectors = dev_sectors;
	a->block_size = block_size;
	a->block_sectors = block_size >> 9;
	a->depth = c.queue_depth;
	a->checkpoint_ns = (uint64_t)c.checkpoint_ms * 1000000ULL;
	a->checkpoint_records = c.checkpoint_records;
	a->checkpoint_bytes = c.checkpoint_bytes;
	a->max_charge = c.max_buffer_bytes;
	apply_map_init(&a->map, 0x9e3779b97f4a7c15ULL ^ (uintptr_t)a);
	a->last_sync_ns = apply_now_ns();
	*ret = a;
	return 0;
}

void apply_free(struct apply *a)
{
	struct apply_req *req;
	struct apply_edge *e;
	int i;

	if (!a)
		return;
	/* first: nothing may be in flight when buffers go away */
	a->be->ops->free(a->be);
	while ((req = a->head)) {
		a->head = req->next;
		apply_req_free(a, req);
	}
	apply_map_fini(&a->map);
	while ((e = a->edge_free)) {
		a->edge_free = e->next;
		free(e);
	}
	for (i = 0; i < APPLY_SPARE_CLASSES; i++) {
		struct apply_buf *buf;

		while ((buf = a->spare[i])) {
			a->spare[i] = buf->next;
			free(buf->data);
			free(buf);
		}
	}
	free(a->batch);
	free(a->reaped);
	free(a);
}

void apply_freep(struct apply **ap)
{
	apply_free(*ap);
	*ap = NULL;
}

void apply_grow(struct apply *a, uint64_t dev_sectors)
{
	/* checked by apply_submit(), in the caller's thread */
	if (dev_sectors > a->dev_sectors && dev_sectors <= (UINT64_MAX >> 10))
		a->dev_sectors = dev_sectors;
}

int apply_set_seq(struct apply *a, uint64_t seq)
{
	if (apply_busy(a))
		return -EBUSY;
	if (seq == UINT64_MAX)
		return -EINVAL;
	a->received = seq;
	a->durable = seq;
	a->synced_seq = seq;
	a->synced_bytes = a->stats.bytes;
	a->epoch_known = false;
	a->after_flush = false;
	return 0;
}

/* The spare list for a buffer of charge bytes, or -1: not kept. */
static int apply_spare_class(size_t charge)
{
	int shift = APPLY_SPARE_MIN_SHIFT;

	if (charge < (1U << APPLY_SPARE_MIN_SHIFT) || charge > (1U << APPLY_SPARE_MAX_SHIFT))
		return -1;
	while (((size_t)1 << shift) < charge)
		shift++;
	return shift - APPLY_SPARE_MIN_SHIFT;
}

int apply_buf_get(struct apply *a, size_t len, struct apply_buf **ret)
{
	struct apply_buf *buf;
	size_t charge;
	void *data;
	int k;

	if (len == 0 || len > APPLY_BUF_MAX)
		return -EINVAL;
	charge = (len + 511) & ~(size_t)511;
	k = apply_spare_class(charge);
	if (k >= 0)
		charge = (size_t)1 << (k + APPLY_SPARE_MIN_SHIFT);
	if (a->charge && a->charge + charge > a->max_charge)
		return -EAGAIN;
	if (k >= 0 && a->spare[k]) {
		buf = a->spare[k];
		a->spare[k] = buf->next;
		a->spare_bytes -= charge;
		buf->len = len;
		buf->next = NULL;
	} else {
		buf = malloc(sizeof(*buf));
		if (!buf)
			return -ENOMEM;
		if (posix_memalign(&data, a->block_size, charge)) {
			free(buf);
			return -ENOMEM;
		}
		*buf = (struct apply_buf) { .data = data, .len = len, .charge = charge };
	}
	a->charge += charge;
	*ret = buf;
	return 0;
}

void apply_buf_put(struct apply *a, struct apply_buf *buf)
{
	int k;

	if (!buf)
		return;
	a->charge -= buf->charge;
	k = apply_spare_class(buf->charge);
	if (k >= 0 && a->spare_bytes + buf->charge <= a->max_charge / 4) {
		buf->next = a->spare[k];
		a->spare[k] = buf;
		a->spare_bytes += buf->charge;
		return;
	}
	free(buf->data);
	free(buf);
}

bool apply_full(const struct apply *a)
{
	return a->charge >= a->max_charge;
}

static int apply_rec_check(const struct apply *a, const struct apply_rec *rec,
			   const struct apply_buf *payload)
{
	if (rec->seq != a->received || rec->seq == UINT64_MAX)
		return -EINVAL;
	if (rec->flags & ~(DM_REPL_F_FUA | DM_REPL_F_SYNC))
		return -EINVAL;
	if (a->epoch_known &&
	    (rec->epoch < a->epoch || (a->after_flush && rec->epoch == a->epoch)))
		return -EINVAL;

	switch (rec->op) {
	case DM_REPL_OP_WRITE:
		if (!payload ||
		    payload->len < (uint64_t)rec->nr_sectors << 9)
			return -EINVAL;
		break;
	case DM_REPL_OP_DISCARD:
	case DM_REPL_OP_WRITE_ZEROES:
		if (payload)
			return -EINVAL;
		break;
	case DM_REPL_OP_FLUSH:
	case DM_REPL_OP_GAP:
		if (payload || rec->sector || rec->nr_sectors)
			return -EINVAL;
		return 0;
	default:
		return -EINVAL;
	}
	if (rec->nr_sectors == 0 || rec->nr_sectors > a->dev_sectors ||
	    rec->sector > a->dev_sectors - rec->nr_sectors)
		return -EINVAL;
	return 0;
}

int apply_submit(struct apply *a, const struct apply_rec *rec,
		 struct apply_buf *payload)
{
	struct apply_req *req;
	int r;

	r = a->error;
	if (r < 0)
		goto put_payload;
	r = apply_rec_check(a, rec, payload);
	if (r < 0)
		goto put_payload;
	req = calloc(1, sizeof(*req));
	if (!req) {
		r = -ENOMEM;
		goto put_payload;
	}
	req->rec = *rec;
	req->buf = payload;
	req->state = APPLY_REQ_HELD;
	if (rec->nr_sectors) {
		uint64_t mask = a->block_sectors - 1;

		req->start = rec->sector & ~mask;
		req->end = (rec->sector + rec->nr_sectors + mask) & ~mask;
	}
	a->charge += APPLY_REQ_CHARGE;
	if (a->tail)
		a->tail->next = req;
	else
		a->head = req;
	a->tail = req;
	if (!a->admit)
		a->admit = req;
	a->received = rec->seq + 1;
	a->epoch = rec->epoch;
	a->epoch_known = true;
	a->after_flush = rec->op == DM_REPL_OP_FLUSH;

	apply_admit(a);
	return a->error;

put_payload:
	apply_buf_put(a, payload);
	return r;
}

int apply_run(struct apply *a)
{
	uint64_t v;

	/* not a semaphore: one read takes the whole count */
	if (a->be->event_fd >= 0 && read(a->be->event_fd, &v, sizeof(v)) < 0)
		v = 0;	/* EAGAIN: nothing completed since the last call */
	apply_reap(a);
	apply_admit(a);
	apply_issue(a);
	return a->error;
}

int apply_fd(const struct apply *a)
{
	return a->be->event_fd;
}

int apply_timeout_ms(const struct apply *a)
{
	uint64_t now, due;

	if (!apply_sync_wanted(a) || a->in_flight >= a->depth)
		return -1;
	now = apply_now_ns();
	if (apply_sync_due(a, now))
		return 0;
	due = a->last_sync_ns + a->checkpoint_ns;
	if ((due - now) / 1000000ULL >= INT_MAX)
		return INT_MAX;
	return (int)((due - now + 999999ULL) / 1000000ULL);
}

bool apply_busy(const struct apply *a)
{
	return a->head || a->in_flight;
}

int apply_drain(struct apply *a, int timeout_ms)
{
	uint64_t deadline = 0;
	int r;

	if (timeout_ms >= 0)
		deadline = apply_now_ns() + (uint64_t)timeout_ms * 1000000ULL;
	a->sync_now = true;
	for (;;) {
		int wait_ms = -1;

		r = apply_run(a);
		if (r < 0)
			break;
		if (!apply_busy(a) && a->durable == a->received)
			break;
		if (timeout_ms >= 0) {
			uint64_t now = apply_now_ns();

			if (now >= deadline) {
				r = -ETIMEDOUT;
				break;
			}
			wait_ms = (int)((deadline - now + 999999ULL) / 1000000ULL);
		}
		r = a->be->ops->wait(a->be, wait_ms);
		if (r < 0 && r != -EINTR)
			break;
	}
	a->sync_now = false;
	return r;
}

void apply_progress(const struct apply *a, struct apply_progress *ret)
{
	*ret = (struct apply_progress) {
		.received = a->received,
		.written = apply_written(a),
		.durable = a->durable,
	};
}

void apply_get_stats(const struct apply *a, struct apply_stats *ret)
{
	*ret = a->stats;
	ret->queued = a->received - apply_written(a);
	ret->buffer_bytes = a->charge;
	ret->in_flight = a->in_flight;
	ret->queue_depth = a->depth;
	ret->block_size = a->block_size;
	ret->fua_fallback = a->no_dsync;
}

int apply_new(int fd, uint64_t dev_sectors, const struct apply_config *cfg,
	      struct apply **ret)
{
	struct apply_backend *be = NULL;
	struct apply_config c;
	unsigned int bs;
	bool blkdev;
	int r;

	r = apply_config_use(cfg, &c);
	if (r < 0)
		return r;
	if (dev_sectors == 0 || dev_sectors > (UINT64_MAX >> 10))
		return -EINVAL;
	r = apply_aio_geometry(fd, dev_sectors, &blkdev, &bs);
	if (r < 0)
		return r;
	/* a configured block size can only make things coarser */
	if (c.block_size > bs)
		bs = c.block_size;

	r = apply_aio_new(fd, blkdev, bs, c.queue_depth, &be);
	if (r < 0)
		return r;
	r = apply_new_backend(be, dev_sectors, bs, &c, ret);
	if (r < 0)
		be->ops->free(be);
	return r;
}
