/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * What the test tools share: errmsg() ("PROG: message" on stderr, after
 * flushing stdout; the includer defines PROG), dev_open_direct() (a block
 * device or regular file to test on, with O_DIRECT), parse_u64() (a whole
 * unsigned number, 0x and 0 prefixes allowed, no sign) and the monotonic
 * clock in seconds and milliseconds.
 */
#ifndef REPL_TEST_TOOL_H
#define REPL_TEST_TOOL_H

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifdef PROG
static inline void __attribute__((format(printf, 1, 2))) errmsg(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fputs(PROG ": ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/*
 * path opened with flags | O_DIRECT: a block device, or a regular file
 * (without O_DIRECT on a file system that has none, as tmpfs).  The
 * descriptor, its stat in *st and its size in bytes in *size; -1 after a
 * message.
 */
static inline int dev_open_direct(const char *path, int flags, struct stat *st,
				  uint64_t *size)
{
	int fd;

	flags |= O_DIRECT;
	fd = open(path, flags | O_CLOEXEC);
	if (fd < 0 && errno == EINVAL) {
		/* tmpfs has no O_DIRECT: fine for a regular file (checked below) */
		flags &= ~O_DIRECT;
		fd = open(path, flags | O_CLOEXEC);
	}
	if (fd < 0) {
		errmsg("open %s: %s", path, strerror(errno));
		return -1;
	}
	if (fstat(fd, st) < 0) {
		errmsg("stat %s: %s", path, strerror(errno));
		goto fail;
	}
	if (S_ISBLK(st->st_mode)) {
		if (!(flags & O_DIRECT)) {
			errmsg("open %s: O_DIRECT refused", path);
			goto fail;
		}
		if (ioctl(fd, BLKGETSIZE64, size) < 0) {
			errmsg("%s: BLKGETSIZE64: %s", path, strerror(errno));
			goto fail;
		}
	} else if (S_ISREG(st->st_mode)) {
		*size = (uint64_t)st->st_size;
	} else {
		errmsg("%s: not a block device or regular file", path);
		goto fail;
	}
	return fd;
fail:
	close(fd);
	return -1;
}
#endif

static inline bool parse_u64(const char *s, uint64_t *ret)
{
	unsigned long long v;
	char *end;

	if (!s || !*s || *s == '-')
		return false;
	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || *end)
		return false;
	*ret = v;
	return true;
}

static inline double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static inline uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

#endif
