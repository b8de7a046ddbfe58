/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * libreplapply: the write engine of a secondary.  It takes the records a
 * primary ships (in sequence order) and applies them to the local backing
 * device (block device, LV or regular file, opened O_RDWR | O_DIRECT) with
 * many writes in flight, without ever blocking the caller's event loop.
 *
 * Rules the engine keeps:
 *
 *  1. Overlap: a WRITE, DISCARD or WRITE_ZEROES is not issued while an
 *     earlier record whose extent overlaps it (rounded out to the device's
 *     logical block size) is queued or in flight.  Records that do not
 *     overlap run in parallel, up to queue_depth operations, and complete in
 *     any order.
 *  2. Epochs: a FLUSH record is issued (as an fdatasync) only once every
 *     earlier record has completed, and no later record is issued before
 *     the flush has completed.
 *  3. FUA records are written with RWF_DSYNC (or, if the kernel refuses
 *     that, written and then covered by an fdatasync) and only then count as
 *     written.
 *  4. Checkpoints: when records are written but not durable, no fdatasync
 *     is in flight and checkpoint_ms have passed since the last one (or,
 *     with checkpoint_records or checkpoint_bytes, that many records or
 *     payload bytes completed since it was issued), an fdatasync that is
 *     not a barrier is issued.
 *
 * Progress (all cumulative, "every record below this value ..."):
 *   received  one past the last record handed over with apply_submit()
 *   written   ... has completed on the device (FLUSH and FUA: durably)
 *   durable   ... has been made durable by a completed fdatasync (or was a
 *             durable FUA write below a durable point)
 * These are the three values of the wire protocol's Ack message.
 *
 * Event loop integration:
 *
 *	apply_new(fd, dev_sectors, &cfg, &a);
 *	apply_set_seq(a, resume_seq);
 *	epoll: apply_fd(a) (EPOLLIN), the socket, ...
 *	loop:
 *		socket readable, record header read:
 *			WRITE: apply_buf_get(a, len, &buf); -EAGAIN: stop
 *			reading the socket (back-pressure) until apply_run()
 *			has reaped completions; read the payload into buf->data.
 *			Others: check apply_full(a) first, same back-pressure.
 *			apply_submit(a, &rec, buf)
 *		apply_run(a)		after submitting, and when apply_fd(a)
 *					is readable; < 0: report, disconnect
 *		apply_progress(a, &p)	send an Ack when it changed
 *		epoll_wait(..., apply_timeout_ms(a) (combined with others))
 *	shutdown: apply_drain(a, timeout_ms); apply_free(a)
 *
 * apply_submit() only queues: operations are started by apply_run().
 *
 * Threads: the engine is used from one thread.  The libaio backend runs one
 * worker thread (all signals blocked) for the synchronous operations
 * (fallocate, BLKDISCARD, BLKZEROOUT, read-modify-write of writes not
 * aligned to the logical block size), and, on regular files, for direct
 * writes that would have blocked io_submit() (they are submitted with
 * RWF_NOWAIT first: block allocation, unwritten extents and the journal
 * can stall io_submit() for tens of milliseconds).
 *
 * Errors are negative errno values; out-parameters (ret, ret_*) are left
 * untouched on failure.  Nothing here logs.
 */
#ifndef REPL_APPLY_H
#define REPL_APPLY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <linux/dm-repl.h>

#include "macro.h"


struct apply;

#define APPLY_QUEUE_DEPTH_DEFAULT	64U
#define APPLY_QUEUE_DEPTH_MAX		4096U
#define APPLY_CHECKPOINT_MS_DEFAULT	1000U
#define APPLY_MAX_BUFFER_BYTES_DEFAULT	(64ULL << 20)

struct apply_config {
	unsigned int queue_depth;	/* operations in flight, 1..APPLY_QUEUE_DEPTH_MAX */
	unsigned int checkpoint_ms;	/* periodic fdatasync; 0: as soon as possible */
	uint64_t checkpoint_records;	/* also one once this many records ... */
	uint64_t checkpoint_bytes;	/* ... or payload bytes completed since the
					 * last one; 0: no such bound */
	uint64_t max_buffer_bytes;	/* payload buffers + queued records */
	unsigned int block_size;	/* 0: ask the device; else a power of two
					 * 512..65536 used as logical block size */
};

/* Fill in the defaults (what a NULL config means). */
void apply_config_init(struct apply_config *cfg);

/* A record, as received (the fields of the wire's Data message). */
struct apply_rec {
	uint64_t seq;
	uint64_t sector;	/* 512-byte sectors */
	uint32_t nr_sectors;	/* 0 for FLUSH and GAP */
	uint16_t op;		/* DM_REPL_OP_* */
	uint16_t flags;		/* DM_REPL_F_* */
	uint64_t epoch;
};

/* A payload buffer from apply_buf_get(): data is aligned for O_DIRECT. */
struct apply_buf {
	void *data;
	size_t len;		/* bytes requested */
	size_t charge;		/* private: bytes counted against the bound */
	struct apply_buf *next;	/* private: the engine's list of spare buffers */
};

struct apply_progress {
	uint64_t received;
	uint64_t written;
	uint64_t durable;
};

struct apply_stats {
	uint64_t records;	/* records completed */
	uint64_t bytes;		/* payload bytes written */
	uint64_t writes;	/* WRITE records completed */
	uint64_t fua;		/* ... of which FUA */
	uint64_t flushes;	/* FLUSH records completed */
	uint64_t discards;	/* DISCARD records completed */
	uint64_t zeroes;	/* WRITE_ZEROES records completed */
	uint64_t checkpoints;	/* fdatasyncs not for a FLUSH record, completed */
	uint64_t io_errors;	/* backend operations that failed or wrote short */
	uint64_t queued;	/* records received and not completed */
	uint64_t buffer_bytes;	/* bytes counted against max_buffer_bytes */
	unsigned int in_flight;	/* backend operations in flight */
	unsigned int queue_depth;
	unsigned int block_size;	/* logical block size in use */
	bool fua_fallback;	/* RWF_DSYNC refused: FUA = write + fdatasync */
};

/*
 * A write engine on fd (O_RDWR or O_WRONLY, with O_DIRECT; the caller keeps
 * it open until apply_free() and closes it), a device of dev_sectors
 * 512-byte sectors.  Block devices: logical block size from BLKSSZGET, and
 * -ENOSPC if the device is smaller than dev_sectors; regular files: the
 * statx() direct I/O alignment, else 4096.  cfg NULL: defaults.
 * -EINVAL: bad config, fd not O_DIRECT/writable, not a file or block device.
 */
int apply_new(int fd, uint64_t dev_sectors, const struct apply_config *cfg,
	      struct apply **ret);

/*
 * Tear down: waits for the operations in flight to finish (io_destroy and
 * the worker thread), drops everything queued.  Call apply_drain() first to
 * finish the queue.
 */
void apply_free(struct apply *a);
void apply_freep(struct apply **ap);

/*
 * The device grew to dev_sectors (a replica extended under a resized repl
 * device): records up to it are taken.  Smaller is ignored.
 */
void apply_grow(struct apply *a, uint64_t dev_sectors);

/*
 * Set the sequence number the next record must carry (the resume point:
 * received = written = durable = seq).  -EBUSY unless idle.
 */
int apply_set_seq(struct apply *a, uint64_t seq);

/*
 * A payload buffer of len bytes (1..1 GiB).  -EAGAIN when the memory bound
 * is reached (back-pressure: stop reading the socket, call apply_run() when
 * apply_fd() is readable, retry); a single buffer is always granted when
 * nothing else is charged.  -EINVAL for a bad len, -ENOMEM.
 */
int apply_buf_get(struct apply *a, size_t len, struct apply_buf **ret);

/* Give back a buffer that will not be submitted.  NULL is ignored. */
void apply_buf_put(struct apply *a, struct apply_buf *buf);

/* Memory bound reached: do not read more records until apply_run(). */
bool apply_full(const struct apply *a);

/*
 * Queue the next record.  payload: a buffer from apply_buf_get() of at
 * least nr_sectors * 512 bytes for WRITE, NULL otherwise; the engine takes
 * it in every case, also on failure.  Nothing is started before the next
 * apply_run().
 * -EINVAL: seq is not the expected one, unknown op or flag, extent empty or
 *          beyond the device, payload missing, short or not expected, FLUSH
 *          or GAP with an extent, epoch going backwards or not advancing
 *          after a FLUSH (the caller drops the connection);
 * the sticky error, once there is one.
 * GAP records are accepted and complete without I/O; what a gap means for
 * the consistency of the replica is the caller's business.
 */
int apply_submit(struct apply *a, const struct apply_rec *rec,
		 struct apply_buf *payload);

/*
 * Reap completions, update progress, start whatever the rules allow.  Never
 * blocks.  0, or the sticky error (-EIO, -ENOSPC, ... from the device, or
 * -ENOMEM): the engine then starts nothing more; report and disconnect.
 */
int apply_run(struct apply *a);

/* Readable (EPOLLIN) when apply_run() has completions to reap. */
int apply_fd(const struct apply *a);

/*
 * How long the caller may sleep before it must call apply_run() again
 * (a checkpoint is due): milliseconds, 0, or -1 (only apply_fd() matters).
 */
int apply_timeout_ms(const struct apply *a);

/* Records queued, in flight or waiting to be made durable, or an fdatasync in flight. */
bool apply_busy(const struct apply *a);

/*
 * Blocking, for shutdown: run until everything queued has completed and an
 * fdatasync made it durable (received == written == durable).  timeout_ms
 * < 0: no limit.  0, -ETIMEDOUT, or the sticky error.
 */
int apply_drain(struct apply *a, int timeout_ms);

void apply_progress(const struct apply *a, struct apply_progress *ret);
void apply_get_stats(const struct apply *a, struct apply_stats *ret);

/* ---- I/O backends (the real one is libaio + a worker thread) ------------- */

enum apply_io_op {
	APPLY_IO_WRITE = 1,	/* len bytes from buf at offset */
	APPLY_IO_FDSYNC,	/* fdatasync of the device (offset, len 0) */
	APPLY_IO_DISCARD,	/* [offset, offset + len): contents undefined after */
	APPLY_IO_ZEROES,	/* [offset, offset + len) reads back as zeroes */
};

#define APPLY_IO_NO_SEQ		UINT64_MAX

/*
 * One backend operation.  Offsets and lengths are bytes, multiples of 512;
 * they may be unaligned to the logical block size (the backend deals with
 * it).  The engine keeps the extent of a running operation (rounded out to
 * the logical block size) free of any other operation.
 */
struct apply_io {
	/* set by the engine, read-only for the backend */
	uint8_t op;		/* enum apply_io_op */
	bool dsync;		/* durable when it completes (FUA) */
	uint64_t seq;		/* record, or APPLY_IO_NO_SEQ (checkpoint) */
	uint64_t offset;
	uint64_t len;
	void *buf;		/* WRITE */
	/* set by the backend before reap() returns the operation */
	int64_t res;		/* WRITE: len; others: 0; or -errno */
	/* backend private */
	void *be_priv;
	struct apply_io *be_next;
};

struct apply_backend;

struct apply_backend_ops {
	/*
	 * Start ios[0..n) in this order (io_submit() semantics): the number
	 * started (> 0), or -errno for ios[0] if none was.  A dsync WRITE
	 * refused with -EINVAL or -EOPNOTSUPP makes the engine fall back to
	 * plain writes and fdatasyncs.
	 */
	int (*submit)(struct apply_backend *be, struct apply_io **ios, int n);
	/* Completed operations, without blocking: up to max, their number. */
	int (*reap)(struct apply_backend *be, struct apply_io **ret, int max);
	/* Block up to timeout_ms (< 0: forever) for a completion: 1, 0, -errno. */
	int (*wait)(struct apply_backend *be, int timeout_ms);
	/* Free, after waiting for what is in flight. */
	void (*free)(struct apply_backend *be);
};

struct apply_backend {
	const struct apply_backend_ops *ops;
	int event_fd;		/* apply_fd(); drained by apply_run(); or -1 */
};

/*
 * An engine on any backend (for tests; apply_new() uses libaio).  block_size
 * is the logical block size (a power of two, 512..65536).  The engine owns
 * the backend once this succeeds (apply_free() calls be->ops->free).
 */
int apply_new_backend(struct apply_backend *be, uint64_t dev_sectors,
		      unsigned int block_size, const struct apply_config *cfg,
		      struct apply **ret);

#endif /* REPL_APPLY_H */
