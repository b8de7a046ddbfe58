// SPDX-License-Identifier: GPL-2.0-only
/*
 * libreplapply's libaio backend: O_DIRECT writes and fdatasyncs through one
 * libaio context, completions on an eventfd; a worker thread for what libaio
 * cannot do without blocking (discard, write-zeroes, read-modify-write of
 * writes not aligned to the logical block size, and on regular files the
 * direct writes RWF_NOWAIT refused).  The engine (apply.c) sees it only
 * through struct apply_backend_ops.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <libaio.h>
#include <linux/fs.h>

#include "apply-internal.h"

#define APPLY_BOUNCE_BYTES	(1U << 20)

struct apply_aio {
	struct apply_backend be;
	int fd;
	bool blkdev;
	unsigned int block_size;
	unsigned int depth;
	io_context_t ctx;
	bool ctx_set;
	struct iocb *iocbs;		/* depth */
	struct iocb **iocb_free;	/* depth */
	unsigned int nr_iocb_free;
	struct iocb **vec;		/* depth */
	struct io_event *events;	/* depth */
	unsigned int aio_in_flight;
	bool fsync_in_worker;		/* IOCB_CMD_FDSYNC refused */
	bool nowait;			/* files: RWF_NOWAIT, blocking ones to the worker */
	uint64_t nr_punted;		/* writes that would have blocked */

	/* the worker thread: everything below lock is shared with it */
	pthread_t thread;
	bool thread_started;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct apply_io *work_head, *work_tail;
	struct apply_io *done_head, *done_tail;
	bool stop;

	/* worker only */
	void *bounce;			/* APPLY_BOUNCE_BYTES, block-aligned */
	bool discard_noop;		/* discard unsupported: nothing to do */
	bool zeroes_write;		/* zeroing unsupported: write zeroes */
};

static void apply_io_append(struct apply_io **head, struct apply_io **tail,
			    struct apply_io *io)
{
	io->be_next = NULL;
	if (*tail)
		(*tail)->be_next = io;
	else
		*head = io;
	*tail = io;
}

static bool apply_aio_takes(const struct apply_aio *x, const struct apply_io *io)
{
	uint64_t mask = x->block_size - 1;

	switch (io->op) {
	case APPLY_IO_WRITE:
		return !((io->offset | io->len | (uintptr_t)io->buf) & mask);
	case APPLY_IO_FDSYNC:
		return !x->fsync_in_worker;
	default:
		return false;
	}
}

static void apply_aio_prep(struct apply_aio *x, struct apply_io *io,
			   struct iocb *cb)
{
	if (io->op == APPLY_IO_WRITE) {
		io_prep_pwrite(cb, x->fd, io->buf, io->len, (long long)io->offset);
		if (io->dsync)
			cb->aio_rw_flags |= RWF_DSYNC;
		if (x->nowait)
			cb->aio_rw_flags |= RWF_NOWAIT;
	} else {
		io_prep_fdsync(cb, x->fd);
	}
	/* io_prep_* wiped the iocb */
	cb->data = io;
	io_set_eventfd(cb, x->be.event_fd);
	io->be_priv = cb;
}

static int apply_aio_submit(struct apply_backend *be, struct apply_io **ios,
			    int n)
{
	struct apply_aio *x = container_of(be, struct apply_aio, be);
	int i = 0;

	while (i < n) {
		int k = 0, r;

		while (i + k < n && apply_aio_takes(x, ios[i + k])) {
			struct iocb *cb = x->iocb_free[--x->nr_iocb_free];

			apply_aio_prep(x, ios[i + k], cb);
			x->vec[k++] = cb;
		}
		if (k) {
			r = io_submit(x->ctx, k, x->vec);
			if (r <= 0) {
				while (k)
					x->iocb_free[x->nr_iocb_free++] = x->vec[--k];
				if (r == -EINVAL && ios[i]->op == APPLY_IO_FDSYNC &&
				    !x->fsync_in_worker) {
					/* no aio fsync for this file: the worker does it */
					x->fsync_in_worker = true;
					continue;
				}
				if ((r == -EINVAL || r == -EOPNOTSUPP) && x->nowait &&
				    ios[i]->op == APPLY_IO_WRITE) {
					/* no RWF_NOWAIT here: writes may block io_submit() */
					x->nowait = false;
					continue;
				}
				if (r == 0)
					r = -EAGAIN;
				return i ? i : r;
			}
			for (int j = r; j < k; j++)
				x->iocb_free[x->nr_iocb_free++] = x->vec[j];
			x->aio_in_flight += (unsigned int)r;
			i += r;
			if (r < k)
				return i;	/* the caller learns why from the next call */
			continue;
		}
		pthread_mutex_lock(&x->lock);
		while (i < n && !apply_aio_takes(x, ios[i]))
			apply_io_append(&x->work_head, &x->work_tail, ios[i++]);
		pthread_cond_signal(&x->cond);
		pthread_mutex_unlock(&x->lock);
	}
	return n;
}

static int apply_aio_reap(struct apply_backend *be, struct apply_io **ret,
			  int max)
{
	struct apply_aio *x = container_of(be, struct apply_aio, be);
	int n = 0;

	pthread_mutex_lock(&x->lock);
	while (n < max && x->done_head) {
		ret[n++] = x->done_head;
		x->done_head = x->done_head->be_next;
	}
	if (!x->done_head)
		x->done_tail = NULL;
	pthread_mutex_unlock(&x->lock);

	if (n < max && x->aio_in_flight) {
		struct timespec ts = { 0, 0 };
		int r = io_getevents(x->ctx, 0, max - n, x->events, &ts);

		if (r < 0 && r != -EINTR)
			return n ? n : r;
		for (int j = 0; j < r; j++) {
			struct apply_io *io = x->events[j].data;
			struct iocb *cb = io->be_priv;
			long res = (long)x->events[j].res;
			bool punt = res == -EAGAIN && (cb->aio_rw_flags & RWF_NOWAIT);

			/* a short write: the worker writes it all again */
			if (io->op == APPLY_IO_WRITE && res >= 0 && (uint64_t)res < io->len)
				punt = true;
			x->iocb_free[x->nr_iocb_free++] = cb;
			x->aio_in_flight--;
			if (punt) {
				/* it would have blocked (or was cut short): the worker does it */
				x->nr_punted++;
				pthread_mutex_lock(&x->lock);
				apply_io_append(&x->work_head, &x->work_tail, io);
				pthread_cond_signal(&x->cond);
				pthread_mutex_unlock(&x->lock);
				continue;
			}
			io->res = (long)x->events[j].res;
			ret[n++] = io;
		}
	}
	return n;
}

static int apply_aio_wait(struct apply_backend *be, int timeout_ms)
{
	struct pollfd p = { .fd = be->event_fd, .events = POLLIN };
	int r = poll(&p, 1, timeout_ms);

	return r < 0 ? -errno : r;
}

static int apply_pread_full(int fd, void *buf, size_t len, uint64_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t r = pread(fd, (char *)buf + done, len - done,
				  (off_t)(off + done));

		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (r == 0) {
			/* beyond the end of a file: zeroes */
			memset((char *)buf + done, 0, len - done);
			break;
		}
		done += (size_t)r;
	}
	return 0;
}

static int apply_pwrite_full(int fd, const void *buf, size_t len, uint64_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t r = pwrite(fd, (const char *)buf + done, len - done,
				   (off_t)(off + done));

		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (r == 0)
			return -EIO;
		done += (size_t)r;
	}
	return 0;
}

/*
 * Write len bytes from src (NULL: zeroes) at off through the bounce buffer,
 * with read-modify-write of partial blocks.  The engine keeps the extent,
 * rounded out to whole blocks, free of other operations.
 */
static int apply_aio_span(struct apply_aio *x, uint64_t off, uint64_t len,
			  const uint8_t *src)
{
	uint64_t bs = x->block_size;
	uint8_t *b = x->bounce;
	int r;

	while (len) {
		uint64_t head = off % bs, n, wlen, woff;

		if (head || len < bs) {
			woff = off - head;
			wlen = bs;
			n = bs - head < len ? bs - head : len;
			r = apply_pread_full(x->fd, b, bs, woff);
			if (r < 0)
				return r;
			if (src)
				memcpy(b + head, src, n);
			else
				memset(b + head, 0, n);
		} else {
			woff = off;
			n = len - len % bs;
			if (n > APPLY_BOUNCE_BYTES)
				n = APPLY_BOUNCE_BYTES;
			wlen = n;
			if (src)
				memcpy(b, src, n);
			else
				memset(b, 0, n);
		}
		r = apply_pwrite_full(x->fd, b, wlen, woff);
		if (r < 0)
			return r;
		off += n;
		len -= n;
		if (src)
			src += n;
	}
	return 0;
}

static bool apply_unsupported(int r)
{
	return r == -EOPNOTSUPP || r == -ENOTTY || r == -ENOSYS;
}

static int apply_aio_discard(struct apply_aio *x, const struct apply_io *io)
{
	int r;

	if (x->discard_noop)
		return 0;
	if (x->blkdev) {
		uint64_t bs = x->block_size;
		uint64_t start = (io->offset + bs - 1) / bs * bs;
		uint64_t end = (io->offset + io->len) / bs * bs;
		uint64_t range[2] = { start, end - start };

		/* only whole blocks: a discard guarantees nothing anyway */
		if (end <= start)
			return 0;
		r = ioctl(x->fd, BLKDISCARD, range);
	} else {
		r = fallocate(x->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
			      (off_t)io->offset, (off_t)io->len);
	}
	if (r == 0)
		return 0;
	r = -errno;
	if (apply_unsupported(r)) {
		x->discard_noop = true;
		return 0;
	}
	return r;
}

static int apply_aio_zeroes(struct apply_aio *x, const struct apply_io *io)
{
	int r = 0;

	if (!x->zeroes_write) {
		uint64_t mask = x->block_size - 1;

		if (x->blkdev && ((io->offset | io->len) & mask))
			return apply_aio_span(x, io->offset, io->len, NULL);
		if (x->blkdev) {
			uint64_t range[2] = { io->offset, io->len };

			r = ioctl(x->fd, BLKZEROOUT, range);
		} else {
			r = fallocate(x->fd, FALLOC_FL_ZERO_RANGE,
				      (off_t)io->offset, (off_t)io->len);
		}
		if (r == 0)
			return 0;
		r = -errno;
		if (!apply_unsupported(r))
			return r;
		x->zeroes_write = true;
	}
	return apply_aio_span(x, io->offset, io->len, NULL);
}

static int64_t apply_aio_work(struct apply_aio *x, struct apply_io *io)
{
	int64_t res = 0;
	int r = 0;

	switch (io->op) {
	case APPLY_IO_WRITE:
		if (!((io->offset | io->len | (uintptr_t)io->buf) & (x->block_size - 1)))
			r = apply_pwrite_full(x->fd, io->buf, io->len, io->offset);
		else
			r = apply_aio_span(x, io->offset, io->len, io->buf);
		res = (int64_t)io->len;
		break;
	case APPLY_IO_FDSYNC:
		r = fdatasync(x->fd) < 0 ? -errno : 0;
		break;
	case APPLY_IO_DISCARD:
		r = apply_aio_discard(x, io);
		break;
	case APPLY_IO_ZEROES:
		r = apply_aio_zeroes(x, io);
		break;
	default:
		r = -EINVAL;
		break;
	}
	if (r == 0 && io->dsync && io->op != APPLY_IO_FDSYNC)
		r = fdatasync(x->fd) < 0 ? -errno : 0;
	return r < 0 ? r : res;
}

static void *apply_aio_worker(void *arg)
{
	struct apply_aio *x = arg;
	static const uint64_t one = 1;

	pthread_mutex_lock(&x->lock);
	for (;;) {
		struct apply_io *io;

		while (!x->work_head && !x->stop)
			pthread_cond_wait(&x->cond, &x->lock);
		if (x->stop)
			break;
		io = x->work_head;
		x->work_head = io->be_next;
		if (!x->work_head)
			x->work_tail = NULL;
		pthread_mutex_unlock(&x->lock);

		io->res = apply_aio_work(x, io);

		pthread_mutex_lock(&x->lock);
		apply_io_append(&x->done_head, &x->done_tail, io);
		pthread_mutex_unlock(&x->lock);
		/* EAGAIN only if the counter would overflow: readable anyway */
		if (write(x->be.event_fd, &one, sizeof(one)) < 0) {
		}
		pthread_mutex_lock(&x->lock);
	}
	pthread_mutex_unlock(&x->lock);
	return NULL;
}

static void apply_aio_free(struct apply_backend *be)
{
	struct apply_aio *x = container_of(be, struct apply_aio, be);

	if (x->thread_started) {
		pthread_mutex_lock(&x->lock);
		x->stop = true;
		pthread_cond_signal(&x->cond);
		pthread_mutex_unlock(&x->lock);
		pthread_join(x->thread, NULL);
	}
	/* io_destroy() waits for every iocb in flight */
	if (x->ctx_set)
		io_destroy(x->ctx);
	if (x->be.event_fd >= 0)
		close(x->be.event_fd);
	pthread_cond_destroy(&x->cond);
	pthread_mutex_destroy(&x->lock);
	free(x->bounce);
	free(x->iocbs);
	free(x->iocb_free);
	free(x->vec);
	free(x->events);
	free(x);
}

static const struct apply_backend_ops apply_aio_ops = {
	.submit = apply_aio_submit,
	.reap = apply_aio_reap,
	.wait = apply_aio_wait,
	.free = apply_aio_free,
};

int apply_aio_new(int fd, bool blkdev, unsigned int block_size, unsigned int depth,
		  struct apply_backend **ret)
{
	sigset_t all, old;
	struct apply_aio *x;
	int r;

	x = calloc(1, sizeof(*x));
	if (!x)
		return -ENOMEM;
	x->be.ops = &apply_aio_ops;
	x->be.event_fd = -1;
	x->fd = fd;
	x->blkdev = blkdev;
	/*
	 * On a file system, io_submit() of a direct write can block for long
	 * (block allocation, unwritten extents, the journal): ask for
	 * -EAGAIN instead and let the worker do those.  Block devices only
	 * block on request allocation, briefly.
	 */
	x->nowait = !blkdev;
	x->block_size = block_size;
	x->depth = depth;
	pthread_mutex_init(&x->lock, NULL);
	pthread_cond_init(&x->cond, NULL);

	r = -ENOMEM;
	x->iocbs = calloc(depth, sizeof(*x->iocbs));
	x->iocb_free = calloc(depth, sizeof(*x->iocb_free));
	x->vec = calloc(depth, sizeof(*x->vec));
	x->events = calloc(depth, sizeof(*x->events));
	if (!x->iocbs || !x->iocb_free || !x->vec || !x->events)
		goto free_aio;
	for (unsigned int i = 0; i < depth; i++)
		x->iocb_free[i] = &x->iocbs[i];
	x->nr_iocb_free = depth;
	if (posix_memalign(&x->bounce, block_size, APPLY_BOUNCE_BYTES)) {
		x->bounce = NULL;
		goto free_aio;
	}

	x->be.event_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (x->be.event_fd < 0) {
		r = -errno;
		goto free_aio;
	}
	memset(&x->ctx, 0, sizeof(x->ctx));	/* io_setup() wants it zeroed */
	r = io_setup((int)depth, &x->ctx);
	if (r < 0)
		goto free_aio;
	x->ctx_set = true;

	/* the worker takes no signals: the daemon handles them elsewhere */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	r = -pthread_create(&x->thread, NULL, apply_aio_worker, x);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r < 0)
		goto free_aio;
	x->thread_started = true;
	*ret = &x->be;
	return 0;

free_aio:
	apply_aio_free(&x->be);
	return r;
}

/* The logical block size to use for fd, and whether it is a block device. */
int apply_aio_geometry(int fd, uint64_t dev_sectors, bool *ret_blkdev,
		       unsigned int *ret_block_size)
{
	unsigned int bs = 4096;
	struct stat st;
	int flags;

	if (fstat(fd, &st) < 0)
		return -errno;
	flags = fcntl(fd, F_GETFL);
	if (flags < 0)
		return -errno;
	if (!(flags & O_DIRECT) || (flags & O_ACCMODE) == O_RDONLY)
		return -EINVAL;

	if (S_ISBLK(st.st_mode)) {
		uint64_t bytes;
		int lbs;

		if (ioctl(fd, BLKSSZGET, &lbs) < 0)
			return -errno;
		if (ioctl(fd, BLKGETSIZE64, &bytes) < 0)
			return -errno;
		if (bytes >> 9 < dev_sectors)
			return -ENOSPC;
		if (lbs < 512 || !apply_is_pow2((uint64_t)lbs))
			return -EINVAL;
		bs = (unsigned int)lbs;
	} else if (S_ISREG(st.st_mode)) {
#ifdef STATX_DIOALIGN
		struct statx stx;

		if (statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &stx) == 0 &&
		    (stx.stx_mask & STATX_DIOALIGN) && stx.stx_dio_offset_align) {
			bs = stx.stx_dio_offset_align;
			if (stx.stx_dio_mem_align > bs)
				bs = stx.stx_dio_mem_align;
			if (bs < 512)
				bs = 512;
		}
#endif
	} else {
		return -EINVAL;
	}
	if (!apply_is_pow2(bs) || bs > APPLY_BLOCK_MAX)
		return -EINVAL;
	*ret_blkdev = S_ISBLK(st.st_mode);
	*ret_block_size = bs;
	return 0;
}

