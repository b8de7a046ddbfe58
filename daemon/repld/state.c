// SPDX-License-Identifier: GPL-2.0-only
/* A secondary's resume point: see state.h. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>

#include "fileio.h"
#include "state.h"

int state_path(const char *dir, const char *resource, char *buf, size_t len)
{
	int n = snprintf(buf, len, "%s/%s.state", dir, resource);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int state_load(const char *dir, const char *resource, struct state *ret)
{
	char path[PATH_MAX];
	unsigned long long id, durable;
	int consistent = 1, discard = 0, n, r;
	FILE *f;

	r = state_path(dir, resource, path, sizeof(path));
	if (r < 0)
		return r;
	f = fopen(path, "re");
	if (!f)
		return -errno;
	n = fscanf(f, "stream %llx durable %llu consistent %d discard %d", &id, &durable,
		   &consistent, &discard);
	fclose(f);
	if (n < 2)
		return -EBADMSG;
	*ret = (struct state) {
		.stream_id = id,
		.durable = durable,
		.consistent = consistent == 1,
		.discard_my_data = discard == 1,
	};
	return 0;
}

int state_save(const char *dir, const char *resource, const struct state *s)
{
	char path[PATH_MAX], text[160];
	int r;

	r = state_path(dir, resource, path, sizeof(path));
	if (r < 0)
		return r;
	snprintf(text, sizeof(text), "stream %016" PRIx64 " durable %" PRIu64
		 " consistent %d discard %d\n", s->stream_id, s->durable,
		 s->consistent ? 1 : 0, s->discard_my_data ? 1 : 0);
	return fileio_write_atomic(path, text);
}
