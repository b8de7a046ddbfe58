// SPDX-License-Identifier: GPL-2.0-only
/* The engine's interval map: see apply-map.h. */
#include <errno.h>
#include <stdlib.h>

#include "apply-map.h"

static uint32_t apply_map_rand(struct apply_map *m)
{
	/* xorshift64 */
	m->rng ^= m->rng << 13;
	m->rng ^= m->rng >> 7;
	m->rng ^= m->rng << 17;
	return (uint32_t)(m->rng >> 32);
}

/* Make sure n segments can be had without allocating. */
static int apply_map_reserve(struct apply_map *m, unsigned int n)
{
	while (m->nr_free < n) {
		struct apply_seg *s = malloc(sizeof(*s));

		if (!s)
			return -ENOMEM;
		s->right = m->free;
		m->free = s;
		m->nr_free++;
	}
	return 0;
}

static struct apply_seg *apply_map_seg(struct apply_map *m, uint64_t start, uint64_t end,
				       void *owner)
{
	struct apply_seg *s = m->free;	/* reserved by the caller */

	m->free = s->right;
	m->nr_free--;
	*s = (struct apply_seg) {
		.start = start, .end = end, .owner = owner,
		.prio = apply_map_rand(m),
	};
	return s;
}

static void apply_map_put(struct apply_map *m, struct apply_seg *s)
{
	s->right = m->free;
	m->free = s;
	m->nr_free++;
}

/* l: segments starting below key, r: the others. */
static void apply_map_split(struct apply_seg *t, uint64_t key, struct apply_seg **l,
			    struct apply_seg **r)
{
	if (!t) {
		*l = *r = NULL;
	} else if (t->start < key) {
		apply_map_split(t->right, key, &t->right, r);
		*l = t;
	} else {
		apply_map_split(t->left, key, l, &t->left);
		*r = t;
	}
}

/* Every key of l is below every key of r. */
static struct apply_seg *apply_map_merge(struct apply_seg *l, struct apply_seg *r)
{
	if (!l)
		return r;
	if (!r)
		return l;
	if (l->prio > r->prio) {
		l->right = apply_map_merge(l->right, r);
		return l;
	}
	r->left = apply_map_merge(l, r->left);
	return r;
}

static struct apply_seg *apply_map_last(struct apply_seg *t)
{
	while (t && t->right)
		t = t->right;
	return t;
}

/*
 * Split the map into segments below start, inside [start, end) and from end
 * on, splitting segments that straddle start or end.  Needs 2 reserved
 * segments.
 */
static void apply_map_cut(struct apply_map *map, uint64_t start, uint64_t end,
			  struct apply_seg **ret_l, struct apply_seg **ret_m,
			  struct apply_seg **ret_r)
{
	struct apply_seg *l, *m, *r, *p, *q;

	apply_map_split(map->root, start, &l, &m);
	apply_map_split(m, end, &m, &r);
	map->root = NULL;

	p = apply_map_last(l);
	if (p && p->end > start) {
		/* p covers start, so nothing else starts in [start, p->end) */
		q = apply_map_seg(map, start, p->end, p->owner);
		p->end = start;
		if (q->end > end) {
			struct apply_seg *q2 = apply_map_seg(map, end, q->end, q->owner);

			q->end = end;
			r = apply_map_merge(q2, r);
		}
		m = apply_map_merge(q, m);
	}
	p = apply_map_last(m);
	if (p && p->end > end) {
		q = apply_map_seg(map, end, p->end, p->owner);
		p->end = end;
		r = apply_map_merge(q, r);
	}
	*ret_l = l;
	*ret_m = m;
	*ret_r = r;
}

static int apply_map_visit(struct apply_seg *t, int (*visit)(void *ctx, void *owner), void *ctx)
{
	int r;

	if (!t)
		return 0;
	r = apply_map_visit(t->left, visit, ctx);
	if (r < 0)
		return r;
	r = visit(ctx, t->owner);
	if (r < 0)
		return r;
	return apply_map_visit(t->right, visit, ctx);
}

static void apply_map_put_all(struct apply_map *map, struct apply_seg *t)
{
	if (!t)
		return;
	apply_map_put_all(map, t->left);
	apply_map_put_all(map, t->right);
	apply_map_put(map, t);
}

static void apply_map_free_all(struct apply_seg *t)
{
	if (!t)
		return;
	apply_map_free_all(t->left);
	apply_map_free_all(t->right);
	free(t);
}

/* Remove the segments of owner from t. */
static struct apply_seg *apply_map_remove(struct apply_map *map, struct apply_seg *t,
					  const void *owner)
{
	struct apply_seg *n;

	if (!t)
		return NULL;
	t->left = apply_map_remove(map, t->left, owner);
	t->right = apply_map_remove(map, t->right, owner);
	if (t->owner != owner)
		return t;
	n = apply_map_merge(t->left, t->right);
	apply_map_put(map, t);
	return n;
}

int apply_map_take(struct apply_map *map, uint64_t start, uint64_t end, void *owner,
		   int (*visit)(void *ctx, void *owner), void *ctx)
{
	struct apply_seg *l, *m, *r;
	int ret;

	ret = apply_map_reserve(map, 3);
	if (ret < 0)
		return ret;
	apply_map_cut(map, start, end, &l, &m, &r);
	ret = apply_map_visit(m, visit, ctx);
	if (ret < 0) {
		map->root = apply_map_merge(apply_map_merge(l, m), r);
		return ret;
	}
	apply_map_put_all(map, m);
	m = apply_map_seg(map, start, end, owner);
	map->root = apply_map_merge(apply_map_merge(l, m), r);
	return 0;
}

void apply_map_drop(struct apply_map *map, uint64_t start, uint64_t end, const void *owner)
{
	struct apply_seg *l, *m, *r;

	apply_map_split(map->root, start, &l, &m);
	apply_map_split(m, end, &m, &r);
	m = apply_map_remove(map, m, owner);
	map->root = apply_map_merge(apply_map_merge(l, m), r);
}

void apply_map_init(struct apply_map *m, uint64_t seed)
{
	*m = (struct apply_map) { .rng = seed };
}

void apply_map_fini(struct apply_map *m)
{
	struct apply_seg *s;

	apply_map_free_all(m->root);
	m->root = NULL;
	while ((s = m->free)) {
		m->free = s->right;
		free(s);
	}
	m->nr_free = 0;
}
