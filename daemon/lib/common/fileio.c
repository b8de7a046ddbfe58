// SPDX-License-Identifier: GPL-2.0-only
/* Small state files, replaced whole: see fileio.h. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fileio.h"

int fileio_sync_dir_of(const char *path)
{
	char dir[PATH_MAX];
	const char *slash = strrchr(path, '/');
	size_t len;
	int fd, r = 0;

	if (!slash) {
		strcpy(dir, ".");
	} else {
		len = slash == path ? 1 : (size_t)(slash - path);	/* "/f": "/" */
		if (len >= sizeof(dir))
			return -ENAMETOOLONG;
		memcpy(dir, path, len);
		dir[len] = '\0';
	}
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fsync(fd) < 0)
		r = -errno;
	close(fd);
	return r;
}

int fileio_write_atomic(const char *path, const char *text)
{
	char tmp[PATH_MAX + 8];
	int n, r = 0;
	FILE *f;

	n = snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	if (n < 0 || (size_t)n >= sizeof(tmp))
		return -ENAMETOOLONG;
	f = fopen(tmp, "we");
	if (!f)
		return -errno;
	if (fputs(text, f) < 0 || fflush(f) || fdatasync(fileno(f)))
		r = -errno;
	if (fclose(f) && !r)
		r = -errno;
	if (!r && rename(tmp, path) < 0)
		r = -errno;
	if (r < 0) {
		unlink(tmp);
		return r;
	}
	/* the rename is in the directory: durable only once it is synced */
	return fileio_sync_dir_of(path);
}

int fileio_read_text(const char *path, char **ret, size_t *ret_len)
{
	size_t len = 0, cap = 0, n;
	char *buf = NULL;
	FILE *f;

	f = fopen(path, "re");
	if (!f)
		return -errno;
	do {
		if (cap - len < 2) {
			char *nb = realloc(buf, cap + 4096);

			if (!nb) {
				free(buf);
				fclose(f);
				return -ENOMEM;
			}
			buf = nb;
			cap += 4096;
		}
		n = fread(buf + len, 1, cap - len - 1, f);
		len += n;
	} while (n > 0);
	fclose(f);
	buf[len] = '\0';
	*ret = buf;
	*ret_len = len;
	return 0;
}
