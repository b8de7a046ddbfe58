// SPDX-License-Identifier: GPL-2.0-only
/* The primary's out-of-sync bitmap of each peer: see peerbits.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bitmap.h"
#include "gens.h"
#include "metadata.h"
#include "peerbits.h"

#define PB_PAGE	DM_REPL_MD_BITMAP_ALIGN

struct pb_slot {
	uint8_t *map;			/* bitmap_bytes, 4096-aligned; NULL: not used */
	uint8_t *page_dirty;		/* one byte per page: changed, not written */
	uint64_t count;
	uint64_t gen;
};

struct peerbits {
	int fd;				/* the metadata device, -1: memory only */
	struct md_info mi;
	struct md_peers table;
	bool table_dirty;
	bool pages_dirty;		/* some slot has a page_dirty byte set */
	uint64_t nr_regions, bytes, pages;
	unsigned int nr_slots;
	struct pb_slot slot[DM_REPL_MD_MAX_PEERS];
};

static int pb_slot_alloc(struct peerbits *pb, unsigned int i)
{
	struct pb_slot *s = &pb->slot[i];

	if (s->map)
		return 0;
	if (posix_memalign((void **)&s->map, PB_PAGE, pb->bytes))
		return -ENOMEM;
	s->page_dirty = calloc(pb->pages, 1);
	if (!s->page_dirty) {
		free(s->map);
		s->map = NULL;
		return -ENOMEM;
	}
	memset(s->map, 0, pb->bytes);
	s->count = 0;
	return 0;
}

static void pb_slot_drop(struct peerbits *pb, unsigned int i)
{
	struct pb_slot *s = &pb->slot[i];

	free(s->map);
	free(s->page_dirty);
	*s = (struct pb_slot) { .gen = s->gen + 1 };
}

static int pb_load_slot(struct peerbits *pb, unsigned int i)
{
	struct pb_slot *s = &pb->slot[i];
	int r = pb_slot_alloc(pb, i);

	if (r < 0 || pb->fd < 0)
		return r;
	r = md_slot_read(pb->fd, &pb->mi, i, s->map);
	if (r < 0)
		return r;
	/* padding bits beyond the device do not count */
	s->count = bitmap_count(s->map, pb->nr_regions);
	return 0;
}

int peerbits_open(const char *meta_path, uint64_t nr_regions, struct peerbits **ret,
		  char *err, size_t errlen)
{
	struct peerbits *pb = calloc(1, sizeof(*pb));
	unsigned int i;
	int r;

	if (!pb)
		return -ENOMEM;
	pb->fd = -1;
	pb->nr_regions = nr_regions;
	if (strcmp(meta_path, "-")) {
		r = md_read(meta_path, false, &pb->mi, err, errlen);
		if (r < 0)
			goto fail;
		if (pb->mi.nr_regions != nr_regions) {
			snprintf(err, errlen, "%s: describes %llu regions, the device has %llu",
				 meta_path, (unsigned long long)pb->mi.nr_regions,
				 (unsigned long long)nr_regions);
			r = -EINVAL;
			goto fail;
		}
		r = md_peers_open(meta_path, &pb->fd);
		if (r == 0)
			r = md_peers_read(pb->fd, &pb->mi, &pb->table);
		if (r < 0) {
			snprintf(err, errlen, "%s: cannot read the peer area: %s", meta_path,
				 r == -EBADMSG ? "corrupt" : strerror(-r));
			goto fail;
		}
		pb->bytes = pb->mi.bitmap_bytes;
		pb->nr_slots = pb->mi.max_peers;
	} else {
		pb->bytes = ((nr_regions + 7) / 8 + PB_PAGE - 1) / PB_PAGE * PB_PAGE;
		pb->nr_slots = DM_REPL_MD_MAX_PEERS;
		/* nothing is known about any peer yet */
		pb->table.max_peers = pb->nr_slots;
	}
	pb->pages = pb->bytes / PB_PAGE;
	for (i = 0; i < pb->nr_slots; i++) {
		if (!(pb->table.slot[i].flags & DM_REPL_MD_SLOT_USED))
			continue;
		r = pb_load_slot(pb, i);
		if (r < 0) {
			snprintf(err, errlen, "%s: cannot read peer slot %u: %s", meta_path, i,
				 strerror(-r));
			goto fail;
		}
	}
	*ret = pb;
	return 0;
fail:
	peerbits_free(pb);
	return r;
}

int peerbits_grow(struct peerbits *pb, uint64_t nr_regions)
{
	uint64_t bytes = ((nr_regions + 7) / 8 + PB_PAGE - 1) / PB_PAGE * PB_PAGE;

	if (nr_regions <= pb->nr_regions)
		return 0;
	if (bytes > pb->bytes && pb->fd >= 0)
		return -ENOSPC;
	if (bytes > pb->bytes) {
		/* memory only: each used slot's bitmap, larger */
		for (unsigned int i = 0; i < pb->nr_slots; i++) {
			struct pb_slot *s = &pb->slot[i];
			uint8_t *map, *dirty;

			if (!s->map)
				continue;
			if (posix_memalign((void **)&map, PB_PAGE, bytes))
				return -ENOMEM;
			dirty = calloc(bytes / PB_PAGE, 1);
			if (!dirty) {
				free(map);
				return -ENOMEM;
			}
			memcpy(map, s->map, pb->bytes);
			memset(map + pb->bytes, 0, bytes - pb->bytes);
			memcpy(dirty, s->page_dirty, pb->pages);
			free(s->map);
			free(s->page_dirty);
			s->map = map;
			s->page_dirty = dirty;
		}
		pb->bytes = bytes;
		pb->pages = bytes / PB_PAGE;
	}
	pb->nr_regions = nr_regions;
	return 0;
}

uint64_t peerbits_regions(const struct peerbits *pb)
{
	return pb->nr_regions;
}

void peerbits_free(struct peerbits *pb)
{
	if (!pb)
		return;
	for (unsigned int i = 0; i < DM_REPL_MD_MAX_PEERS; i++)
		pb_slot_drop(pb, i);
	if (pb->fd >= 0)
		close(pb->fd);
	free(pb);
}

bool peerbits_persistent(const struct peerbits *pb)
{
	return pb->fd >= 0;
}

int peerbits_slot(const struct peerbits *pb, const char *name)
{
	for (unsigned int i = 0; i < pb->nr_slots; i++)
		if ((pb->table.slot[i].flags & DM_REPL_MD_SLOT_USED) &&
		    !strcmp(pb->table.slot[i].name, name))
			return (int)i;
	return -ENOENT;
}

int peerbits_assign(struct peerbits *pb, const char *const *names, unsigned int n)
{
	struct md_peers *t = &pb->table;
	bool fresh = t->flags & DM_REPL_MD_PEERS_FRESH;
	unsigned int i, k, missing = 0;
	int r;

	for (i = 0; i < pb->nr_slots; i++) {
		bool listed = false;

		if (!(t->slot[i].flags & DM_REPL_MD_SLOT_USED))
			continue;
		for (k = 0; k < n; k++)
			listed |= !strcmp(t->slot[i].name, names[k]);
		if (listed)
			continue;
		t->slot[i] = (struct md_slot) { 0 };
		pb_slot_drop(pb, i);
		pb->table_dirty = true;
	}
	for (k = 0; k < n; k++) {
		if (peerbits_slot(pb, names[k]) >= 0)
			continue;
		for (i = 0; i < pb->nr_slots && (t->slot[i].flags & DM_REPL_MD_SLOT_USED); i++)
			;
		if (i == pb->nr_slots || strlen(names[k]) >= DM_REPL_MD_NAME_MAX) {
			missing++;
			continue;
		}
		r = pb_slot_alloc(pb, i);
		if (r < 0)
			return r;
		snprintf(t->slot[i].name, sizeof(t->slot[i].name), "%s", names[k]);
		/* fresh metadata: nothing was written without these peers yet */
		t->slot[i].flags = DM_REPL_MD_SLOT_USED | (fresh ? DM_REPL_MD_SLOT_TRACKED : 0);
		t->slot[i].since_ms = gens_now_ms();
		/* a slot's old bits on disk belonged to another peer */
		memset(pb->slot[i].page_dirty, 1, pb->pages);
		pb->pages_dirty = true;
		pb->table_dirty = true;
	}
	if (fresh) {
		t->flags &= ~DM_REPL_MD_PEERS_FRESH;
		pb->table_dirty = true;
	}
	r = peerbits_sync(pb);
	return r < 0 ? r : (int)missing;
}

bool peerbits_tracked(const struct peerbits *pb, int slot)
{
	return slot >= 0 && (pb->table.slot[slot].flags & DM_REPL_MD_SLOT_TRACKED);
}

int peerbits_set_tracked(struct peerbits *pb, int slot)
{
	if (slot < 0 || peerbits_tracked(pb, slot))
		return 0;
	pb->table.slot[slot].flags |= DM_REPL_MD_SLOT_TRACKED;
	pb->table_dirty = true;
	return peerbits_sync(pb);
}

/* Set (or clear) bits [first, end) of one slot, noting the pages changed. */
static void pb_change(struct peerbits *pb, unsigned int i, uint64_t first, uint64_t end, bool set)
{
	struct pb_slot *s = &pb->slot[i];

	if (!s->map)
		return;
	if (end > pb->nr_regions)
		end = pb->nr_regions;
	for (uint64_t r = first; r < end; r++) {
		uint8_t bit = (uint8_t)(1U << (r & 7));
		uint8_t *b = &s->map[r >> 3];

		if (!!(*b & bit) == set)
			continue;
		*b ^= bit;
		s->count += set ? 1 : (uint64_t)-1;
		s->page_dirty[(r >> 3) / PB_PAGE] = 1;
		pb->pages_dirty = true;
	}
	if (set)
		s->gen++;
}

void peerbits_mark(struct peerbits *pb, int slot, uint64_t first, uint64_t count)
{
	if (slot >= 0) {
		pb_change(pb, (unsigned int)slot, first, first + count, true);
		return;
	}
	for (unsigned int i = 0; i < pb->nr_slots; i++)
		pb_change(pb, i, first, first + count, true);
}

void peerbits_clear(struct peerbits *pb, int slot, uint64_t first, uint64_t count)
{
	if (slot >= 0)
		pb_change(pb, (unsigned int)slot, first, first + count, false);
}

int peerbits_sync(struct peerbits *pb)
{
	bool wrote = false;
	int r;

	if (pb->fd < 0) {
		for (unsigned int i = 0; i < pb->nr_slots; i++)
			if (pb->slot[i].page_dirty)
				memset(pb->slot[i].page_dirty, 0, pb->pages);
		pb->table_dirty = pb->pages_dirty = false;
		return 0;
	}
	for (unsigned int i = 0; i < pb->nr_slots; i++) {
		struct pb_slot *s = &pb->slot[i];
		uint64_t p = 0, q;

		while (s->map && p < pb->pages) {
			if (!s->page_dirty[p]) {
				p++;
				continue;
			}
			for (q = p; q < pb->pages && s->page_dirty[q]; q++)
				;
			r = md_slot_write(pb->fd, &pb->mi, i, s->map, p, q - p);
			if (r < 0)
				return r;	/* the pages stay dirty: written next time */
			memset(s->page_dirty + p, 0, q - p);
			wrote = true;
			p = q;
		}
	}
	/* the bitmaps before the table that says whose they are */
	if (wrote && fdatasync(pb->fd) < 0)
		return -errno;
	pb->pages_dirty = false;
	if (pb->table_dirty) {
		r = md_peers_write(pb->fd, &pb->mi, &pb->table);
		if (r < 0)
			return r;
		if (fdatasync(pb->fd) < 0)
			return -errno;
		pb->table_dirty = false;
	}
	return 0;
}

bool peerbits_dirty(const struct peerbits *pb)
{
	return pb->pages_dirty || pb->table_dirty;
}

uint64_t peerbits_count(const struct peerbits *pb, int slot)
{
	return slot >= 0 ? pb->slot[slot].count : 0;
}

uint64_t peerbits_gen(const struct peerbits *pb, int slot)
{
	return slot >= 0 ? pb->slot[slot].gen : 0;
}

int peerbits_copy(const struct peerbits *pb, int slot, uint8_t **ret)
{
	size_t n = (size_t)((pb->nr_regions + 7) / 8);
	uint8_t *b = calloc(n ? n : 1, 1);

	if (!b)
		return -ENOMEM;
	if (slot >= 0 && pb->slot[slot].map)
		memcpy(b, pb->slot[slot].map, n);
	*ret = b;
	return 0;
}
