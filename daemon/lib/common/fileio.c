// SPDX-License-Identifier: GPL-2.0-only
/* Small state files, replaced whole: see fileio.h. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <unistd.h>

#include "fileio.h"

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
	if (r < 0)
		unlink(tmp);
	return r;
}
