// SPDX-License-Identifier: GPL-2.0-only
/* A secondary's resume point: see state.h. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fileio.h"
#include "state.h"

int state_path(const char *dir, const char *resource, const char *suffix, char *buf,
	       size_t len)
{
	int n = snprintf(buf, len, "%s/%s.%s", dir, resource, suffix);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int state_dir_make(const char *dir)
{
	return mkdir(dir, 0700) < 0 && errno != EEXIST ? -errno : 0;
}

int state_parse(const char *text, size_t len, struct state *ret)
{
	unsigned long long id, durable;
	int consistent = 1, discard = 0, n;
	char *s;

	/* scanning stops at a NUL as it would at any other byte out of place */
	s = strndup(text, len);
	if (!s)
		return -ENOMEM;
	n = sscanf(s, "stream %llx durable %llu consistent %d discard %d", &id, &durable,
		   &consistent, &discard);
	free(s);
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

int state_load(const char *dir, const char *resource, struct state *ret)
{
	char path[PATH_MAX], *text;
	size_t len;
	int r;

	r = state_path(dir, resource, "state", path, sizeof(path));
	if (r < 0)
		return r;
	r = fileio_read_text(path, &text, &len);
	if (r < 0)
		return r;
	r = state_parse(text, len, ret);
	free(text);
	return r;
}

int state_format(const struct state *s, char *buf, size_t len)
{
	int n = snprintf(buf, len, "stream %016" PRIx64 " durable %" PRIu64
			 " consistent %d discard %d\n", s->stream_id, s->durable,
			 s->consistent ? 1 : 0, s->discard_my_data ? 1 : 0);

	return n < 0 || (size_t)n >= len ? -ENOBUFS : 0;
}

int state_save(const char *dir, const char *resource, const struct state *s)
{
	char path[PATH_MAX], text[160];
	int r;

	r = state_path(dir, resource, "state", path, sizeof(path));
	if (r < 0)
		return r;
	r = state_format(s, text, sizeof(text));
	if (r < 0)
		return r;
	return fileio_write_atomic(path, text);
}
