// SPDX-License-Identifier: GPL-2.0-only
/* The secondary's half of resync and verify: see resync-target.h. */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include <xxhash.h>

#include "resync-target.h"
#include "wire.h"

struct resync_target {
	unsigned int head, len;
	void *buf;			/* WIRE_MAX_PAYLOAD, aligned for O_DIRECT */
	struct resync_req q[RESYNC_TARGET_QUEUE];
};

int resync_target_new(struct resync_target **ret)
{
	struct resync_target *t = calloc(1, sizeof(*t));

	if (!t)
		return -ENOMEM;
	*ret = t;
	return 0;
}

void resync_target_free(struct resync_target *t)
{
	if (!t)
		return;
	free(t->buf);
	free(t);
}

void resync_target_clear(struct resync_target *t)
{
	t->len = 0;
}

int resync_target_queue(struct resync_target *t, const struct resync_req *req)
{
	if (t->len == RESYNC_TARGET_QUEUE)
		return -ENOBUFS;
	t->q[(t->head + t->len) % RESYNC_TARGET_QUEUE] = *req;
	t->len++;
	return 0;
}

const struct resync_req *resync_target_next(const struct resync_target *t, uint64_t written)
{
	const struct resync_req *q = &t->q[t->head];

	return t->len && written >= q->lpos ? q : NULL;
}

void resync_target_pop(struct resync_target *t)
{
	if (!t->len)
		return;
	t->head = (t->head + 1) % RESYNC_TARGET_QUEUE;
	t->len--;
}

int resync_target_hash(struct resync_target *t, int fd, const struct resync_req *q,
		       uint64_t *hash)
{
	size_t len = (size_t)q->nr_sectors * 512, bs = (size_t)q->block_sectors * 512, i;
	ssize_t n;

	if (!bs || len > WIRE_MAX_PAYLOAD || len % bs || len / bs > WIRE_MAX_HASHES)
		return -EINVAL;
	if (!t->buf && posix_memalign(&t->buf, 4096, WIRE_MAX_PAYLOAD)) {
		t->buf = NULL;
		return -ENOMEM;
	}
	n = pread(fd, t->buf, len, (off_t)(q->sector * 512));
	if (n != (ssize_t)len)
		return n < 0 ? -errno : -EIO;
	for (i = 0; i < len / bs; i++)
		hash[i] = XXH3_64bits((const uint8_t *)t->buf + i * bs, bs);
	return (int)(len / bs);
}
