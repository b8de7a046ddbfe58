/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * What fuzz-secondary and fuzz-primary share: one of repld's roles run
 * in this process on its own event loop, its peer's connection one end of
 * a socketpair, the other end fed the input.
 *
 * The first part (names, sizes, the fixed identities) is also what
 * gen-role-corpus writes its seeds for.  The rest, with FUZZ_ROLE_RUN
 * defined:
 *
 *  - link-time wrappers (-Wl,--wrap=...): repld's log lines go nowhere
 *    (FUZZ_LOG=1 in the environment prints them), getrandom() gives every
 *    call the same bytes, so that the memory ring's identity and a new
 *    data generation are FUZZ_ID in every run (the seeds can name them);
 *  - a scratch directory with O_DIRECT (the secondary's write engine
 *    needs it): /dev/shm when it has it, else $TMPDIR or /tmp;
 *  - fuzz_feed(): the loop run, bounded, while the input goes into the
 *    socket as fast as it takes it (or one frame per loop iteration),
 *    then a half close; what repld writes back is read and dropped.  It ends when repld closes its end, after
 *    FUZZ_MAX_ITER loop iterations or FUZZ_MAX_MS milliseconds.
 */
#ifndef REPL_FUZZ_ROLE_H
#define REPL_FUZZ_ROLE_H

#include <stdint.h>

#define FUZZ_RESOURCE	"r0"
#define FUZZ_PRIMARY	"alpha"
#define FUZZ_SECONDARY	"beta"
/* getrandom() under the wrapper: every 8 bytes read as this */
#define FUZZ_ID		0x5eed0123456789abULL
/* the secondary's device, the primary's device and ring */
#define FUZZ_DEV_SECTORS 2048U
/* records in the primary's ring before the input: FUZZ_RECS of them,
 * sequences 0 .. FUZZ_RECS - 1 */
#define FUZZ_RECS	8U

#ifdef FUZZ_ROLE_RUN

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libaio.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "fuzz.h"
#include "loop.h"
#include "macro.h"
#include "role.h"

#define FUZZ_MAX_ITER	4000U
#define FUZZ_MAX_MS	500U

void __wrap_log_msg(int prio, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
int __wrap_log_errno(int prio, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
ssize_t __wrap_getrandom(void *buf, size_t len, unsigned int flags);

static bool fuzz_log_on(void)
{
	static int on = -1;

	if (on < 0)
		on = getenv("FUZZ_LOG") != NULL;
	return on;
}

void __wrap_log_msg(int prio, int err, const char *fmt, ...)
{
	va_list ap;

	if (!fuzz_log_on())
		return;
	va_start(ap, fmt);
	fprintf(stderr, "<%d> ", prio);
	vfprintf(stderr, fmt, ap);
	if (err)
		fprintf(stderr, ": %s", strerror(-err));
	fputc('\n', stderr);
	va_end(ap);
}

int __wrap_log_errno(int prio, int err, const char *fmt, ...)
{
	va_list ap;

	if (fuzz_log_on()) {
		va_start(ap, fmt);
		fprintf(stderr, "<%d> ", prio);
		vfprintf(stderr, fmt, ap);
		fprintf(stderr, ": %s\n", strerror(-err));
		va_end(ap);
	}
	return err;
}

ssize_t __wrap_getrandom(void *buf, size_t len, unsigned int flags)
{
	uint64_t id = FUZZ_ID;
	uint8_t *b = buf;

	(void)flags;
	for (size_t i = 0; i < len; i++)
		b[i] = ((const uint8_t *)&id)[i % sizeof(id)];
	return (ssize_t)len;
}

int __real_io_setup(int maxevents, io_context_t *ctxp);
int __real_io_destroy(io_context_t ctx);
int __real_io_submit(io_context_t ctx, long nr, struct iocb *ios[]);
int __real_io_getevents(io_context_t ctx, long min_nr, long nr, struct io_event *events,
			struct timespec *timeout);
int __wrap_io_setup(int maxevents, io_context_t *ctxp);
int __wrap_io_destroy(io_context_t ctx);
int __wrap_io_submit(io_context_t ctx, long nr, struct iocb *ios[]);
int __wrap_io_getevents(io_context_t ctx, long min_nr, long nr, struct io_event *events,
			struct timespec *timeout);

/* the context in use (one at a time) and its iocbs in flight; the one kept */
static struct {
	io_context_t used, kept;
	int used_n, kept_n;
	long inflight;
} aio;

int __wrap_io_setup(int maxevents, io_context_t *ctxp)
{
	int r;

	ASSERT(!aio.used);
	if (aio.kept && aio.kept_n == maxevents) {
		*ctxp = aio.kept;
		aio.kept = NULL;
	} else {
		r = __real_io_setup(maxevents, ctxp);
		if (r < 0)
			return r;
	}
	aio.used = *ctxp;
	aio.used_n = maxevents;
	aio.inflight = 0;
	return 0;
}

int __wrap_io_destroy(io_context_t ctx)
{
	ASSERT(ctx == aio.used);
	aio.used = NULL;
	if (aio.inflight || aio.kept)
		return __real_io_destroy(ctx);
	aio.kept = ctx;
	aio.kept_n = aio.used_n;
	return 0;
}

int __wrap_io_submit(io_context_t ctx, long nr, struct iocb *ios[])
{
	int r = __real_io_submit(ctx, nr, ios);

	if (r > 0)
		aio.inflight += r;
	return r;
}

int __wrap_io_getevents(io_context_t ctx, long min_nr, long nr, struct io_event *events,
			struct timespec *timeout)
{
	int r = __real_io_getevents(ctx, min_nr, nr, events, timeout);

	if (r > 0)
		aio.inflight -= r;
	return r;
}

static void fuzz_aio_cleanup(void)
{
	if (aio.kept)
		__real_io_destroy(aio.kept);
	aio.kept = NULL;
}

static bool fuzz_odirect_ok(const char *dir)
{
	char path[4096];
	int fd;

	snprintf(path, sizeof(path), "%s/odirect-probe", dir);
	fd = open(path, O_RDWR | O_CREAT | O_DIRECT | O_CLOEXEC, 0600);
	if (fd >= 0)
		close(fd);
	unlink(path);
	return fd >= 0;
}

/* A scratch directory (removed at exit by fuzz_files_cleanup()) into dir. */
static void fuzz_scratch(char *dir, size_t len, const char *name)
{
	const char *bases[] = { "/dev/shm", getenv("TMPDIR"), "/tmp", "." };

	signal(SIGPIPE, SIG_IGN);	/* as repld's loop_add_signals() does */
	for (size_t i = 0; i < ARRAY_SIZE(bases); i++) {
		if (!bases[i])
			continue;
		snprintf(dir, len, "%s/%s.XXXXXX", bases[i], name);
		if (!mkdtemp(dir))
			continue;
		if (fuzz_odirect_ok(dir))
			return;
		rmdir(dir);
	}
	fprintf(stderr, "%s: no directory with O_DIRECT for the scratch files\n", name);
	abort();
}

/* Remove the files in dir (one level), or dir itself too. */
static void fuzz_clear_dir(const char *dir, bool self)
{
	DIR *d = opendir(dir);
	struct dirent *de;

	if (!d)
		return;
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			unlinkat(dirfd(d), de->d_name, 0);
	closedir(d);
	if (self)
		rmdir(dir);
}

/* A role fuzzer's files: a scratch directory, the paths in it, the configuration. */
struct fuzz_files {
	const char *name;		/* the fuzzer's, for its messages */
	char dir[512];
	char dev[600], state[600], conf[600];
	struct config *cfg;		/* fuzz_files_config() */
};

/* the files fuzz_files_cleanup() removes at exit */
static struct fuzz_files *fuzz_files_made;

static void fuzz_files_cleanup(void)
{
	struct fuzz_files *f = fuzz_files_made;

	fuzz_aio_cleanup();
	config_free(f->cfg);
	fuzz_clear_dir(f->state, true);
	fuzz_clear_dir(f->dir, true);
}

/*
 * The scratch directory for name, and in it node's zeroed device of
 * FUZZ_DEV_SECTORS (NODE.img), its state directory and configuration
 * (NODE.conf) paths; all removed at exit.
 */
static void fuzz_files_make(struct fuzz_files *f, const char *name, const char *node)
{
	int fd;

	f->name = name;
	fuzz_scratch(f->dir, sizeof(f->dir), name);
	snprintf(f->dev, sizeof(f->dev), "%s/%s.img", f->dir, node);
	snprintf(f->state, sizeof(f->state), "%s/state", f->dir);
	snprintf(f->conf, sizeof(f->conf), "%s/%s.conf", f->dir, node);
	fd = open(f->dev, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	ASSERT(fd >= 0);
	ASSERT(ftruncate(fd, (off_t)FUZZ_DEV_SECTORS * 512) == 0);
	close(fd);
	fuzz_files_made = f;
	atexit(fuzz_files_cleanup);
}

/*
 * The configuration fmt says written to f->conf and loaded as f->cfg (the
 * one before freed); a message and abort() when it does not load.
 */
static void __attribute__((format(printf, 2, 3)))
fuzz_files_config(struct fuzz_files *f, const char *fmt, ...)
{
	char err[512];
	va_list ap;
	FILE *c;

	config_free(f->cfg);
	f->cfg = NULL;
	c = fopen(f->conf, "w");
	ASSERT(c);
	va_start(ap, fmt);
	vfprintf(c, fmt, ap);
	va_end(ap);
	ASSERT(fclose(c) == 0);
	if (config_load(f->conf, &f->cfg, err, sizeof(err)) < 0) {
		fprintf(stderr, "%s: %s\n", f->name, err);
		abort();
	}
}

struct fuzz_feed {
	struct ev ev;			/* our end of the socketpair */
	struct loop *loop;
	struct role *role;
	const uint8_t *data;
	size_t size, off;
	/* one frame (by its length prefix) per loop iteration: what repld
	 * sends in between may be what the next frame answers */
	bool by_frame;
	size_t frame_end;
	bool shut;			/* all written, our side shut down */
	bool eof;			/* repld closed its end */
	unsigned int iters;
	uint64_t deadline_ms;
	uint64_t bytes_back;		/* what repld wrote */
	/* called when the input is all in the socket, and before each sleep */
	void (*on_shut)(struct fuzz_feed *f);
	void (*on_iter)(struct fuzz_feed *f);
};

static void fuzz_feed_event(struct ev *ev, uint32_t events)
{
	struct fuzz_feed *f = container_of(ev, struct fuzz_feed, ev);
	static uint8_t buf[256 << 10];
	ssize_t n;

	if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
		for (;;) {
			n = read(ev->fd, buf, sizeof(buf));
			if (n > 0) {
				f->bytes_back += (uint64_t)n;
				continue;
			}
			if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
				f->eof = true;
				loop_exit(f->loop, 0);
				return;
			}
			if (errno == EAGAIN)
				break;
		}
	}
	if (!f->shut && (events & EPOLLOUT)) {
		size_t end = f->size;

		if (f->by_frame) {
			/* up to the end of the frame whose length prefix is at
			 * frame_end, or of the one being written */
			if (f->off == f->frame_end && f->size - f->off >= 4) {
				const uint8_t *h = f->data + f->off;
				uint32_t flen = (uint32_t)h[0] << 24 | (uint32_t)h[1] << 16 |
						(uint32_t)h[2] << 8 | h[3];

				f->frame_end = f->off + 4 + (flen < f->size - f->off - 4 ? flen :
							      f->size - f->off - 4);
			} else if (f->off == f->frame_end) {
				f->frame_end = f->size;
			}
			end = f->frame_end;
		}
		while (f->off < end) {
			n = send(ev->fd, f->data + f->off, end - f->off, MSG_NOSIGNAL);
			if (n < 0)
				break;
			f->off += (size_t)n;
		}
		if (f->off == f->size || (f->off < end && errno != EAGAIN && errno != EINTR)) {
			shutdown(ev->fd, SHUT_WR);
			f->shut = true;
			loop_mod(f->loop, ev, EPOLLIN | EPOLLRDHUP);
			if (f->on_shut)
				f->on_shut(f);
		}
	}
}

static bool fuzz_feed_prepare(void *ctx)
{
	struct fuzz_feed *f = ctx;
	bool again = false;

	if (++f->iters > FUZZ_MAX_ITER || loop_now_ms() > f->deadline_ms) {
		loop_exit(f->loop, 0);
		return false;
	}
	if (f->on_iter)
		f->on_iter(f);
	if (f->role->ops->before_sleep)
		again = f->role->ops->before_sleep(f->role);
	return again;
}

/*
 * Feed data to the role through fd (our end; repld has the other) on
 * loop l until repld closes its end or the bounds.  Closes fd.
 */
static void fuzz_feed(struct fuzz_feed *f, struct loop *l, struct role *r, int fd,
		      const uint8_t *data, size_t size)
{
	f->ev = (struct ev) { .fd = fd, .fn = fuzz_feed_event };
	f->loop = l;
	f->role = r;
	f->data = data;
	f->size = size;
	f->deadline_ms = loop_now_ms() + FUZZ_MAX_MS;
	ASSERT(loop_add(l, &f->ev, EPOLLIN | EPOLLOUT | EPOLLRDHUP) == 0);
	loop_set_prepare(l, fuzz_feed_prepare, f);
	ASSERT(loop_run(l, 5) == 0);
	loop_set_prepare(l, NULL, NULL);
	loop_del(l, &f->ev);
	close(fd);
}

#endif /* FUZZ_ROLE_RUN */
#endif
