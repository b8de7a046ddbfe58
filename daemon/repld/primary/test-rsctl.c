// SPDX-License-Identifier: GPL-2.0-only
/*
 * The resync controller (rsctl.h) on made-up latencies: it speeds up while
 * nothing is in the way, holds back once the records wait, stays within
 * its floor and the cap, and sizes the units and the queue ahead from its
 * rate.
 */
#include <stdio.h>

#include "check.h"
#include "rsctl.h"

/* What a step's rate lets the resync start, all of which it starts. */
static void use_all(struct rsctl *c)
{
	rsctl_used(c, c->rate / 1000 * RSCTL_STEP_MS);
}

/* Steps of RSCTL_STEP_MS from *t, each with n samples of lat_us, the
 * resync using its whole rate. */
static uint64_t run(struct rsctl *c, uint64_t *t, unsigned int steps, unsigned int n,
		    uint64_t lat_us)
{
	for (unsigned int i = 0; i < steps; i++) {
		for (unsigned int k = 0; k < n; k++)
			rsctl_sample(c, *t, lat_us);
		use_all(c);
		*t += RSCTL_STEP_MS;
		rsctl_rate(c, *t);
	}
	return c->rate;
}

static void test_grow(struct rsctl *c, uint64_t *t)
{
	uint64_t r, r2;

	/* no application writes: it doubles, up to the most */
	r = run(c, t, 1, 0, 0);
	CHECK(r == 2 * RSCTL_RATE_START, "no samples: %llu", (unsigned long long)r);
	r = run(c, t, 40, 0, 0);
	CHECK(r == RSCTL_RATE_MAX, "no samples for 4 s: %llu", (unsigned long long)r);

	/* records at their base latency: it grows, by an eighth */
	rsctl_restart(c, *t);
	run(c, t, 1, 10, 1000);
	CHECK(rsctl_base_us(c) == 1000, "base %llu", (unsigned long long)rsctl_base_us(c));
	r = c->rate;
	r2 = run(c, t, 1, 10, 1000 * RSCTL_SLACK_PCT / 100 + RSCTL_SLACK_US);
	CHECK(r2 == r + r / 8, "within the slack: %llu after %llu", (unsigned long long)r2,
	      (unsigned long long)r);
}

static void test_wait(struct rsctl *c, uint64_t *t)
{
	uint64_t r, r2;

	/* the records wait: it slows down, to the floor at worst */
	r = c->rate;
	r2 = run(c, t, 1, 10, 1000 * RSCTL_SLACK_PCT / 100 + RSCTL_SLACK_US + 1);
	CHECK(r2 == r / 100 * RSCTL_DROP_PCT, "congested: %llu after %llu",
	      (unsigned long long)r2, (unsigned long long)r);
	CHECK(c->backoffs == 1 && c->last_mean_us == 1000 * RSCTL_SLACK_PCT / 100 + RSCTL_SLACK_US + 1,
	      "backoffs %llu, last %llu", (unsigned long long)c->backoffs,
	      (unsigned long long)c->last_mean_us);
	r = run(c, t, 30, 10, 5000);
	CHECK(r == 1ULL << 20, "the floor: %llu", (unsigned long long)r);
	CHECK(rsctl_unit_sectors(c) == RSCTL_UNIT_MIN >> 9, "unit at the floor: %u",
	      rsctl_unit_sectors(c));
	CHECK(rsctl_ahead_max(c) == RSCTL_AHEAD_MIN, "ahead at the floor");

	/* the mean counts: one slow record among fast ones is not a queue,
	 * unless it is very slow */
	rsctl_restart(c, *t);
	for (int k = 0; k < 9; k++)
		rsctl_sample(c, *t, 1000);
	rsctl_sample(c, *t, 4000);
	use_all(c);
	*t += RSCTL_STEP_MS;
	CHECK(rsctl_rate(c, *t) > RSCTL_RATE_START, "one slow record in ten");
	rsctl_restart(c, *t);
	for (int k = 0; k < 9; k++)
		rsctl_sample(c, *t, 1000);
	rsctl_sample(c, *t, (1000 * RSCTL_SLACK_PCT / 100 + RSCTL_SLACK_US) * RSCTL_WORST + 1);
	*t += RSCTL_STEP_MS;
	CHECK(rsctl_rate(c, *t) < RSCTL_RATE_START, "one very slow record in ten");
	rsctl_restart(c, *t);
	rsctl_sample(c, *t, 1000);
	rsctl_sample(c, *t, 9000);
	*t += RSCTL_STEP_MS;
	CHECK(rsctl_rate(c, *t) == RSCTL_RATE_START / 100 * RSCTL_DROP_PCT, "one slow record in two");
}

static void test_pending(struct rsctl *c, uint64_t *t)
{
	uint64_t r, r2;

	/*
	 * No ack in a step is not always an idle application: a record that
	 * waits (stuck behind the resync) slows it down; one that has just
	 * been queued does not stop it doubling.
	 */
	rsctl_restart(c, *t);
	run(c, t, 1, 10, 1000);
	r = c->rate;
	rsctl_pending(c, 1000 * RSCTL_SLACK_PCT / 100 + RSCTL_SLACK_US + 1);
	*t += RSCTL_STEP_MS;
	r2 = rsctl_rate(c, *t);
	CHECK(r2 == r / 100 * RSCTL_DROP_PCT, "no ack, a record waiting: %llu after %llu",
	      (unsigned long long)r2, (unsigned long long)r);
	rsctl_pending(c, 200);
	use_all(c);
	*t += RSCTL_STEP_MS;
	CHECK(rsctl_rate(c, *t) == 2 * r2, "no ack, a record just queued: %llu",
	      (unsigned long long)c->rate);
	/* with acks, a record stuck far beyond the rest counts as one slow ack */
	r = c->rate;
	for (int k = 0; k < 10; k++)
		rsctl_sample(c, *t, 1000);
	rsctl_pending(c, (1000 * RSCTL_SLACK_PCT / 100 + RSCTL_SLACK_US) * RSCTL_WORST + 1);
	*t += RSCTL_STEP_MS;
	CHECK(rsctl_rate(c, *t) == r / 100 * RSCTL_DROP_PCT, "acks, and one record stuck: %llu",
	      (unsigned long long)c->rate);
	/* the step forgets it */
	r = c->rate;
	run(c, t, 1, 10, 1000);
	CHECK(c->rate == r + r / 8, "the next step: %llu", (unsigned long long)c->rate);
}

static void test_held_back(struct rsctl *c, uint64_t *t)
{
	uint64_t r;

	/*
	 * A resync held back by something else than its rate (the link's
	 * queue, its reads) does not speed up, with or without acks; it
	 * still slows down when the records wait.
	 */
	r = c->rate;
	rsctl_used(c, r / 1000 * RSCTL_STEP_MS / 2 - 1);
	*t += RSCTL_STEP_MS;
	CHECK(rsctl_rate(c, *t) == r, "no samples, half the rate unused: %llu",
	      (unsigned long long)c->rate);
	for (int k = 0; k < 10; k++)
		rsctl_sample(c, *t, 1000);
	*t += RSCTL_STEP_MS;
	CHECK(rsctl_rate(c, *t) == r, "fast acks, the rate unused: %llu", (unsigned long long)c->rate);
	for (int k = 0; k < 10; k++)
		rsctl_sample(c, *t, 9000);
	*t += RSCTL_STEP_MS;
	CHECK(rsctl_rate(c, *t) == r / 100 * RSCTL_DROP_PCT, "slow acks, the rate unused: %llu",
	      (unsigned long long)c->rate);
}

static void test_base(struct rsctl *c, uint64_t *t)
{
	uint64_t r, r2;

	/*
	 * The base forgets what is older than RSCTL_BASE_MS, but rises by
	 * RSCTL_BASE_RISE_PCT % per half of it at most: records slowed down
	 * for a long while do not become the norm at once.
	 */
	r = rsctl_base_us(c);
	CHECK(r == 1000, "base before: %llu", (unsigned long long)r);
	for (int h = 1; h <= 8; h++) {
		*t += RSCTL_BASE_MS / 2 + 1;
		run(c, t, 1, 5, 3000);
		r2 = rsctl_base_us(c);
		/* the older half-window still has 1000 after the first */
		if (h <= 2)
			CHECK(r2 == (h == 1 ? 1000 : 1000 / 100 * RSCTL_BASE_RISE_PCT),
			      "base after %d half-windows: %llu", h, (unsigned long long)r2);
		CHECK(r2 <= 3000 && r2 >= r, "base %llu after %llu", (unsigned long long)r2,
		      (unsigned long long)r);
		r = r2;
	}
	CHECK(r == 3000, "base after eight half-windows: %llu", (unsigned long long)r);
	/* and falls at once */
	run(c, t, 1, 1, 500);
	CHECK(rsctl_base_us(c) == 500, "base down: %llu", (unsigned long long)rsctl_base_us(c));
}

static void test_cap(struct rsctl *c, uint64_t *t)
{
	uint64_t r;

	/* resync-rate-mb caps it, also when it doubles */
	rsctl_set_bounds(c, 1, 10);
	rsctl_restart(c, *t);
	CHECK(c->rate == RSCTL_RATE_START, "start under a cap of 10 MiB/s");
	r = run(c, t, 5, 0, 0);
	CHECK(r == 10ULL << 20, "capped: %llu", (unsigned long long)r);
	rsctl_set_bounds(c, 1, 4);
	CHECK(c->rate == 4ULL << 20, "a lower cap: %llu", (unsigned long long)c->rate);
	rsctl_restart(c, *t);
	CHECK(c->rate == 4ULL << 20, "restart under a cap of 4 MiB/s: %llu",
	      (unsigned long long)c->rate);
}

static void test_floor_units(struct rsctl *c, uint64_t *t)
{
	uint64_t r;

	/* units and the queue ahead: about RSCTL_AHEAD_MS of the rate */
	/* resync-min-rate-mb: never under it while the records wait, and
	 * never over the cap either */
	rsctl_set_bounds(c, 16, 0);
	CHECK(c->rate == 16ULL << 20, "raised to the floor: %llu", (unsigned long long)c->rate);
	r = run(c, t, 30, 10, 50000);
	CHECK(r == 16ULL << 20, "congested at a floor of 16 MiB/s: %llu", (unsigned long long)r);
	rsctl_set_bounds(c, 16, 4);
	CHECK(c->rate == 4ULL << 20 && c->floor == 4ULL << 20, "a floor above the cap: %llu",
	      (unsigned long long)c->rate);
	/* no records seen: nothing bounds the queue but RSCTL_AHEAD_MS */
	rsctl_init(c, *t);
	rsctl_set_bounds(c, 1, 0);
	c->rate = 100ULL << 20;
	CHECK(rsctl_unit_sectors(c) == (100ULL << 20) / 1000 * RSCTL_AHEAD_MS / 4096 * 8,
	      "unit at 100 MiB/s: %u", rsctl_unit_sectors(c));
	CHECK(rsctl_ahead_max(c) == (100ULL << 20) / 1000 * RSCTL_AHEAD_MS, "ahead at 100 MiB/s");
	/* a link with 10 ms of round trip holds 10 ms of the rate more */
	rsctl_set_rtt(c, 10000);
	CHECK(rsctl_ahead_max(c) == (100ULL << 20) / 1000 * RSCTL_AHEAD_MS +
	      (100ULL << 20) / 1000000 * 10000, "ahead at 100 MiB/s, 10 ms: %llu",
	      (unsigned long long)rsctl_ahead_max(c));
	rsctl_set_rtt(c, 0);
	c->rate = RSCTL_RATE_MAX;
	CHECK(rsctl_unit_sectors(c) == RSCTL_UNIT_MAX >> 9, "unit at most 1 MiB");

	/* records of 1 ms at least: the queue is what the rate sends in
	 * RSCTL_AHEAD_BASE_PCT % of it, the round trip's share comes on top */
	rsctl_sample(c, *t, 1000);
	c->rate = 100ULL << 20;
	CHECK(rsctl_ahead_max(c) == (100ULL << 20) / 1000000 * 1000 * RSCTL_AHEAD_BASE_PCT / 100,
	      "ahead at 100 MiB/s, records of 1 ms: %llu", (unsigned long long)rsctl_ahead_max(c));
	CHECK(rsctl_unit_sectors(c) ==
	      (100ULL << 20) / 1000000 * 1000 * RSCTL_AHEAD_BASE_PCT / 100 / 4096 * 8,
	      "unit at 100 MiB/s, records of 1 ms: %u", rsctl_unit_sectors(c));
	rsctl_set_rtt(c, 10000);
	CHECK(rsctl_ahead_max(c) == (100ULL << 20) / 1000000 * 1000 * RSCTL_AHEAD_BASE_PCT / 100 +
	      (100ULL << 20) / 1000000 * 10000, "and 10 ms of round trip: %llu",
	      (unsigned long long)rsctl_ahead_max(c));
	rsctl_set_rtt(c, 0);
	/* a slow rate: the floors */
	c->rate = 1ULL << 20;
	CHECK(rsctl_ahead_max(c) == RSCTL_AHEAD_MIN, "ahead at 1 MiB/s: %llu",
	      (unsigned long long)rsctl_ahead_max(c));
	CHECK(rsctl_unit_sectors(c) == RSCTL_UNIT_MIN >> 9, "unit at 1 MiB/s: %u",
	      rsctl_unit_sectors(c));
	/* the floor keeps the queue it needs: 5 ms of it */
	rsctl_set_bounds(c, 8, 0);
	c->rate = 8ULL << 20;
	CHECK(rsctl_ahead_max(c) == (8ULL << 20) / 1000 * RSCTL_AHEAD_MS,
	      "ahead at a floor of 8 MiB/s: %llu", (unsigned long long)rsctl_ahead_max(c));
	c->rate = 200ULL << 20;
	CHECK(rsctl_ahead_max(c) == (200ULL << 20) / 1000000 * 1000 * RSCTL_AHEAD_BASE_PCT / 100,
	      "above the floor, the base's share: %llu", (unsigned long long)rsctl_ahead_max(c));
	/* records of 100 ms (a long link): 5 ms of the rate bounds it */
	rsctl_init(c, *t);
	rsctl_sample(c, *t, 100000);
	c->rate = 100ULL << 20;
	CHECK(rsctl_ahead_max(c) == (100ULL << 20) / 1000 * RSCTL_AHEAD_MS,
	      "ahead at 100 MiB/s, records of 100 ms: %llu", (unsigned long long)rsctl_ahead_max(c));
}

int main(void)
{
	struct rsctl c;
	uint64_t t = 1000;

	rsctl_init(&c, t);
	rsctl_set_bounds(&c, 1, 0);
	CHECK(rsctl_rate(&c, t) == RSCTL_RATE_START, "start %llu", (unsigned long long)c.rate);
	CHECK(rsctl_base_us(&c) == UINT64_MAX, "a base without samples");
	test_grow(&c, &t);
	test_wait(&c, &t);
	test_pending(&c, &t);
	test_held_back(&c, &t);
	test_base(&c, &t);
	test_cap(&c, &t);
	test_floor_units(&c, &t);
	printf("rsctl: doubles while nothing waits, grows by 1/8 within the slack, drops to %u %% when records wait or one is stuck, holds when held back, floor, cap, a base that rises slowly, a queue within a share of the base: ok\n",
	       RSCTL_DROP_PCT);
	return 0;
}
