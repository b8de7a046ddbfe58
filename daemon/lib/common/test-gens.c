// SPDX-License-Identifier: GPL-2.0-only
/*
 * Generation identifiers: the verdict when a primary meets a secondary, in
 * the situations a cluster goes through (in sync, a peer left and the
 * primary wrote, failover, split brain, unrelated data).
 */
#include <stdio.h>
#include <stdlib.h>

#include "gens.h"

static int failures;

static void expect(const char *what, const struct gens *p, const struct gens *s,
		   enum gen_verdict want)
{
	enum gen_verdict v = gens_compare(p, s);

	if (v != want) {
		printf("FAIL %s: %s, want %s\n", what, gens_verdict_name(v), gens_verdict_name(want));
		failures++;
	} else {
		printf("ok %s: %s\n", what, gens_verdict_name(v));
	}
}

int main(void)
{
	struct gens a = { 0 }, b = { 0 }, a0, b0, c;

	/* a new primary, a new secondary */
	a.current = gens_new_id();
	expect("new secondary", &a, &b, GV_FULL);
	/* the full sync ends: b adopts a's generation */
	b.current = a.current;
	expect("in sync", &a, &b, GV_SAME);

	/* b goes away, a writes: a moves on, its bitmap counts from b's gen */
	a0 = a;
	gens_rotate(&a);
	if (a.current == a0.current || a.bitmap != a0.current || !a.since) {
		printf("FAIL rotate: current %llx bitmap %llx\n", (unsigned long long)a.current,
		       (unsigned long long)a.bitmap);
		failures++;
	}
	expect("peer behind", &a, &b, GV_BITMAP);
	/* a writes again without b (another peer came and went) */
	gens_rotate(&a);
	if (a.bitmap != a0.current || !a.history) {
		printf("FAIL second rotate keeps the bitmap's generation\n");
		failures++;
	}
	expect("peer behind two rotations", &a, &b, GV_BITMAP);
	/* a peer that held the intermediate generation */
	c = (struct gens){ .current = a.history };
	expect("peer at the intermediate generation", &a, &c, GV_BITMAP);

	/* failover: back in sync, then a dies; b is promoted and writes */
	a = a0;
	b = (struct gens){ .current = a.current };
	b0 = b;
	gens_rotate(&b);
	/* a comes back as the primary without having written: b is newer */
	expect("failover, old primary did not write", &a, &b, GV_PEER_NEWER);
	/* the new primary b meets the old one as its secondary */
	expect("failover, old primary rejoins", &b, &a, GV_BITMAP);

	/* split brain: a wrote too */
	gens_rotate(&a);
	expect("split brain (a primary)", &a, &b, GV_SPLIT_BRAIN);
	expect("split brain (b primary)", &b, &a, GV_SPLIT_BRAIN);
	(void)b0;

	/* someone else's disk */
	c = (struct gens){ .current = gens_new_id(), .bitmap = gens_new_id() };
	expect("unrelated", &a, &c, GV_UNRELATED);

	printf("%s\n", failures ? "FAILED" : "all ok");
	return failures ? EXIT_FAILURE : EXIT_SUCCESS;
}
