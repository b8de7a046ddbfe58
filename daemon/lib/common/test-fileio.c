// SPDX-License-Identifier: GPL-2.0-only
/*
 * fileio_write_atomic(): the new contents are durable (fdatasync of the
 * temporary file) before the rename, and the rename itself is durable
 * (fsync of the directory) before it returns; a failure of either is
 * returned.
 *
 * Linked with -Wl,--wrap=rename,--wrap=fsync,--wrap=fdatasync: every call
 * the library makes is recorded, with what the descriptor is (the
 * directory, checked by its inode, or another file), then passed on.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "fileio.h"

enum call { C_RENAME, C_SYNC_FILE, C_SYNC_DIR };

static const char *const call_names[] = { "rename", "sync(file)", "sync(directory)" };

static enum call trace[64];
static unsigned int nr_trace;
static struct stat dir_st;		/* the directory the files are in */
static int fail_dir_sync;		/* errno for an fsync of the directory */

int __real_rename(const char *from, const char *to);
int __real_fsync(int fd);
int __real_fdatasync(int fd);
int __wrap_rename(const char *from, const char *to);
int __wrap_fsync(int fd);
int __wrap_fdatasync(int fd);

static void record(enum call c)
{
	CHECK(nr_trace < sizeof(trace) / sizeof(trace[0]), "too many calls");
	trace[nr_trace++] = c;
}

static bool is_dir(int fd)
{
	struct stat st;

	return !fstat(fd, &st) && st.st_dev == dir_st.st_dev && st.st_ino == dir_st.st_ino;
}

static int sync_call(int fd, int (*real)(int))
{
	bool dir = is_dir(fd);

	record(dir ? C_SYNC_DIR : C_SYNC_FILE);
	if (dir && fail_dir_sync) {
		errno = fail_dir_sync;
		return -1;
	}
	return real(fd);
}

int __wrap_rename(const char *from, const char *to)
{
	int r = __real_rename(from, to);

	if (!r)
		record(C_RENAME);
	return r;
}

int __wrap_fsync(int fd)
{
	return sync_call(fd, __real_fsync);
}

int __wrap_fdatasync(int fd)
{
	return sync_call(fd, __real_fdatasync);
}

static void print_trace(void)
{
	unsigned int i;

	fprintf(stderr, "calls:");
	for (i = 0; i < nr_trace; i++)
		fprintf(stderr, " %s", call_names[trace[i]]);
	fprintf(stderr, "%s\n", nr_trace ? "" : " none");
}

/* index of the first call c at or after from, or -1 */
static int find(enum call c, unsigned int from)
{
	unsigned int i;

	for (i = from; i < nr_trace; i++)
		if (trace[i] == c)
			return (int)i;
	return -1;
}

static void check_contents(const char *path, const char *want)
{
	char buf[256] = { 0 };
	FILE *f = fopen(path, "re");

	CHECK(f, "%s: %s", path, strerror(errno));
	CHECK(fread(buf, 1, sizeof(buf) - 1, f) == strlen(want), "%s: short", path);
	fclose(f);
	CHECK(!strcmp(buf, want), "%s holds '%s', want '%s'", path, buf, want);
}

/* One save: the file is synced, then renamed, then the directory synced. */
static void check_save(const char *path, const char *text)
{
	int rn, dir;

	nr_trace = 0;
	CHECK_RC(fileio_write_atomic(path, text), 0);
	print_trace();
	rn = find(C_RENAME, 0);
	CHECK(rn >= 0, "%s: no rename", path);
	CHECK(find(C_SYNC_FILE, 0) >= 0 && find(C_SYNC_FILE, 0) < rn,
	      "%s: the new file was not synced before the rename", path);
	dir = find(C_SYNC_DIR, (unsigned int)rn + 1);
	CHECK(dir >= 0, "%s: the directory was not synced after the rename: a power loss may bring back the old file or none",
	      path);
	check_contents(path, text);
}

int main(void)
{
	char dir[] = "/tmp/test-fileio-XXXXXX", path[PATH_MAX], tmp[PATH_MAX + 8];
	struct stat st;

	CHECK(mkdtemp(dir), "mkdtemp: %s", strerror(errno));
	CHECK(!stat(dir, &dir_st), "stat %s: %s", dir, strerror(errno));
	snprintf(path, sizeof(path), "%s/r0.state", dir);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);

	/* a new file, then a replacement */
	check_save(path, "first\n");
	check_save(path, "second\n");
	printf("ok: the file is synced before the rename, the directory after it\n");

	/* a bare name: the directory is the current one */
	CHECK(!chdir(dir), "chdir: %s", strerror(errno));
	check_save("r1.state", "third\n");
	printf("ok: a name without a directory syncs the current directory\n");

	/* the directory cannot be synced: the caller hears of it */
	fail_dir_sync = EIO;
	nr_trace = 0;
	CHECK_RC(fileio_write_atomic(path, "fourth\n"), -EIO);
	print_trace();
	fail_dir_sync = 0;
	CHECK(stat(tmp, &st) < 0 && errno == ENOENT, "%s left behind", tmp);
	printf("ok: a failed fsync of the directory is returned\n");

	unlink(path);
	unlink("r1.state");
	CHECK(!chdir("/"), "chdir: %s", strerror(errno));
	CHECK(!rmdir(dir), "rmdir %s: %s", dir, strerror(errno));
	return 0;
}
