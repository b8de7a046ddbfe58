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

/* Steps of RSCTL_STEP_MS from *t, each with n samples of lat_us. */
static uint64_t run(struct rsctl *c, uint64_t *t, unsigned int steps, unsigned int n,
		    uint64_t lat_us)
{
	for (unsigned int i = 0; i < steps; i++) {
		for (unsigned int k = 0; k < n; k++)
			rsctl_sample(c, *t, lat_us);
		*t += RSCTL_STEP_MS;
		rsctl_rate(c, *t);
	}
	return c->rate;
}

int main(void)
{
	struct rsctl c;
	uint64_t t = 1000, r, r2;

	rsctl_init(&c, t);
	rsctl_set_bounds(&c, 1, 0);
	CHECK(rsctl_rate(&c, t) == RSCTL_RATE_START, "start %llu", (unsigned long long)c.rate);
	CHECK(rsctl_base_us(&c) == UINT64_MAX, "a base without samples");

	/* no application writes: it doubles, up to the most */
	r = run(&c, &t, 1, 0, 0);
	CHECK(r == 2 * RSCTL_RATE_START, "no samples: %llu", (unsigned long long)r);
	r = run(&c, &t, 40, 0, 0);
	CHECK(r == RSCTL_RATE_MAX, "no samples for 4 s: %llu", (unsigned long long)r);

	/* records at their base latency: it grows, by an eighth */
	rsctl_restart(&c, t);
	run(&c, &t, 1, 10, 1000);
	CHECK(rsctl_base_us(&c) == 1000, "base %llu", (unsigned long long)rsctl_base_us(&c));
	r = c.rate;
	r2 = run(&c, &t, 1, 10, 1000 * RSCTL_SLACK_PCT / 100 + RSCTL_SLACK_US);
	CHECK(r2 == r + r / 8, "within the slack: %llu after %llu", (unsigned long long)r2,
	      (unsigned long long)r);

	/* the records wait: it slows down, to the floor at worst */
	r = c.rate;
	r2 = run(&c, &t, 1, 10, 1000 * RSCTL_SLACK_PCT / 100 + RSCTL_SLACK_US + 1);
	CHECK(r2 == r / 100 * RSCTL_DROP_PCT, "congested: %llu after %llu",
	      (unsigned long long)r2, (unsigned long long)r);
	CHECK(c.backoffs == 1 && c.last_mean_us == 1000 * RSCTL_SLACK_PCT / 100 + RSCTL_SLACK_US + 1,
	      "backoffs %llu, last %llu", (unsigned long long)c.backoffs,
	      (unsigned long long)c.last_mean_us);
	r = run(&c, &t, 30, 10, 5000);
	CHECK(r == 1ULL << 20, "the floor: %llu", (unsigned long long)r);
	CHECK(rsctl_unit_sectors(&c) == RSCTL_UNIT_MIN >> 9, "unit at the floor: %u",
	      rsctl_unit_sectors(&c));
	CHECK(rsctl_ahead_max(&c) == RSCTL_AHEAD_MIN, "ahead at the floor");

	/* the mean counts: one slow record among fast ones is not a queue,
	 * unless it is very slow */
	rsctl_restart(&c, t);
	for (int k = 0; k < 9; k++)
		rsctl_sample(&c, t, 1000);
	rsctl_sample(&c, t, 4000);
	t += RSCTL_STEP_MS;
	CHECK(rsctl_rate(&c, t) > RSCTL_RATE_START, "one slow record in ten");
	rsctl_restart(&c, t);
	for (int k = 0; k < 9; k++)
		rsctl_sample(&c, t, 1000);
	rsctl_sample(&c, t, (1000 * RSCTL_SLACK_PCT / 100 + RSCTL_SLACK_US) * RSCTL_WORST + 1);
	t += RSCTL_STEP_MS;
	CHECK(rsctl_rate(&c, t) < RSCTL_RATE_START, "one very slow record in ten");
	rsctl_restart(&c, t);
	rsctl_sample(&c, t, 1000);
	rsctl_sample(&c, t, 9000);
	t += RSCTL_STEP_MS;
	CHECK(rsctl_rate(&c, t) == RSCTL_RATE_START / 100 * RSCTL_DROP_PCT, "one slow record in two");

	/* the base forgets what is older than RSCTL_BASE_MS */
	t += RSCTL_BASE_MS + 1;
	run(&c, &t, 1, 5, 3000);
	t += RSCTL_BASE_MS / 2 + 1;
	run(&c, &t, 1, 5, 3000);
	CHECK(rsctl_base_us(&c) == 3000, "base after the window: %llu",
	      (unsigned long long)rsctl_base_us(&c));

	/* resync-rate-mb caps it, also when it doubles */
	rsctl_set_bounds(&c, 1, 10);
	rsctl_restart(&c, t);
	CHECK(c.rate == RSCTL_RATE_START, "start under a cap of 10 MiB/s");
	r = run(&c, &t, 5, 0, 0);
	CHECK(r == 10ULL << 20, "capped: %llu", (unsigned long long)r);
	rsctl_set_bounds(&c, 1, 4);
	CHECK(c.rate == 4ULL << 20, "a lower cap: %llu", (unsigned long long)c.rate);
	rsctl_restart(&c, t);
	CHECK(c.rate == 4ULL << 20, "restart under a cap of 4 MiB/s: %llu",
	      (unsigned long long)c.rate);

	/* units and the queue ahead: about RSCTL_AHEAD_MS of the rate */
	/* resync-min-rate-mb: never under it while the records wait, and
	 * never over the cap either */
	rsctl_set_bounds(&c, 16, 0);
	CHECK(c.rate == 16ULL << 20, "raised to the floor: %llu", (unsigned long long)c.rate);
	r = run(&c, &t, 30, 10, 50000);
	CHECK(r == 16ULL << 20, "congested at a floor of 16 MiB/s: %llu", (unsigned long long)r);
	rsctl_set_bounds(&c, 16, 4);
	CHECK(c.rate == 4ULL << 20 && c.floor == 4ULL << 20, "a floor above the cap: %llu",
	      (unsigned long long)c.rate);
	rsctl_set_bounds(&c, 1, 0);
	c.rate = 100ULL << 20;
	CHECK(rsctl_unit_sectors(&c) == (100ULL << 20) / 1000 * RSCTL_AHEAD_MS / 4096 * 8,
	      "unit at 100 MiB/s: %u", rsctl_unit_sectors(&c));
	CHECK(rsctl_ahead_max(&c) == (100ULL << 20) / 1000 * RSCTL_AHEAD_MS, "ahead at 100 MiB/s");
	c.rate = RSCTL_RATE_MAX;
	CHECK(rsctl_unit_sectors(&c) == RSCTL_UNIT_MAX >> 9, "unit at most 1 MiB");
	printf("rsctl: doubles while nothing waits, grows by 1/8 within the slack, drops to %u %% when records wait, floor, cap, window: ok\n",
	       RSCTL_DROP_PCT);
	return 0;
}
