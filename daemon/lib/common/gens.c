// SPDX-License-Identifier: GPL-2.0-only
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "gens.h"
#include "macro.h"

uint64_t gens_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

uint64_t gens_new_id(void)
{
	uint64_t id = 0;

	while (!id) {
		if (getrandom(&id, sizeof(id), 0) != sizeof(id)) {
			struct timespec ts;

			clock_gettime(CLOCK_REALTIME, &ts);
			id = (uint64_t)ts.tv_sec * 1000000007ULL ^ (uint64_t)ts.tv_nsec;
		}
	}
	return id;
}

void gens_rotate(struct gens *g)
{
	/* the bitmap keeps counting from the oldest generation a peer may
	 * hold; the one we leave stays recognisable as history */
	if (!g->bitmap)
		g->bitmap = g->current;
	else
		g->history = g->current;
	g->current = gens_new_id();
	g->since = gens_now_ms();
}

enum gen_verdict gens_compare(const struct gens *p, const struct gens *s)
{
	if (!s->current)
		return GV_FULL;
	if (s->current == p->current)
		return GV_SAME;
	/* the peer holds a generation we moved on from */
	if (s->current == p->bitmap || s->current == p->history)
		return GV_BITMAP;
	/* the peer moved on from ours, and we did not write since */
	if (s->bitmap && s->bitmap == p->current)
		return GV_PEER_NEWER;
	/* both moved on from a common generation */
	if ((s->bitmap && (s->bitmap == p->bitmap || s->bitmap == p->history)) ||
	    (s->history && (s->history == p->bitmap || s->history == p->history)))
		return GV_SPLIT_BRAIN;
	return GV_UNRELATED;
}

const char *gens_verdict_name(enum gen_verdict v)
{
	static const char *const names[] = {
		[GV_SAME] = "same generation",
		[GV_BITMAP] = "bitmap resync",
		[GV_FULL] = "full sync",
		[GV_PEER_NEWER] = "the peer holds newer data",
		[GV_SPLIT_BRAIN] = "split brain",
		[GV_UNRELATED] = "unrelated data",
	};

	return NAME_OF(names, v);
}

int gens_parse(const char *text, size_t len, struct gens *ret)
{
	unsigned long long g[4];
	char *s;
	int n;

	/* scanning stops at a NUL as it would at any other byte out of place */
	s = strndup(text, len);
	if (!s)
		return -ENOMEM;
	n = sscanf(s, "%llx %llx %llx %llx", &g[0], &g[1], &g[2], &g[3]);
	free(s);
	if (n != 4)
		return -EBADMSG;
	*ret = (struct gens) { g[0], g[1], g[2], g[3] };
	return 0;
}
