// SPDX-License-Identifier: GPL-2.0-only
/* The resync controller: see rsctl.h. */
#include <string.h>

#include "rsctl.h"

void rsctl_init(struct rsctl *c, uint64_t now_ms)
{
	memset(c, 0, sizeof(*c));
	c->rate = RSCTL_RATE_START;
	c->floor = 1ULL << 20;
	c->base_us[0] = c->base_us[1] = UINT64_MAX;
	c->base_since_ms = now_ms;
	c->step_ms = now_ms;
}

/* A new step: what the last one saw goes. */
static void rsctl_step_clear(struct rsctl *c)
{
	c->step_sum_us = 0;
	c->step_max_us = 0;
	c->step_samples = 0;
	c->step_pending_us = 0;
	c->step_used = 0;
}

void rsctl_restart(struct rsctl *c, uint64_t now_ms)
{
	c->rate = c->cap && c->cap < RSCTL_RATE_START ? c->cap : RSCTL_RATE_START;
	if (c->rate < c->floor)
		c->rate = c->floor;
	c->step_ms = now_ms;
	rsctl_step_clear(c);
}

void rsctl_set_bounds(struct rsctl *c, unsigned int min_mb, unsigned int cap_mb)
{
	c->cap = (uint64_t)cap_mb << 20;
	c->floor = (uint64_t)(min_mb ? min_mb : 1) << 20;
	if (c->cap && c->floor > c->cap)
		c->floor = c->cap;
	if (c->cap && c->rate > c->cap)
		c->rate = c->cap;
	if (c->rate < c->floor)
		c->rate = c->floor;
}

uint64_t rsctl_base_us(const struct rsctl *c)
{
	return c->base_us[0] < c->base_us[1] ? c->base_us[0] : c->base_us[1];
}

static void rsctl_base_roll(struct rsctl *c, uint64_t now_ms)
{
	uint64_t old = rsctl_base_us(c);

	if (now_ms - c->base_since_ms < RSCTL_BASE_MS / 2)
		return;
	/* a half-window passed: the older one goes, and the base rises
	 * by RSCTL_BASE_RISE_PCT % at most */
	c->base_us[1] = c->base_us[0];
	if (old != UINT64_MAX && c->base_us[1] > old / 100 * RSCTL_BASE_RISE_PCT)
		c->base_us[1] = old / 100 * RSCTL_BASE_RISE_PCT;
	c->base_us[0] = UINT64_MAX;
	c->base_since_ms = now_ms;
}

void rsctl_sample(struct rsctl *c, uint64_t now_ms, uint64_t latency_us)
{
	rsctl_base_roll(c, now_ms);
	if (latency_us < c->base_us[0])
		c->base_us[0] = latency_us;
	c->step_sum_us += latency_us;
	if (latency_us > c->step_max_us)
		c->step_max_us = latency_us;
	c->step_samples++;
}

static void rsctl_step(struct rsctl *c)
{
	uint64_t base = rsctl_base_us(c), max = c->cap ? c->cap : RSCTL_RATE_MAX;
	/* the resync was held back by something else than its rate */
	bool held = c->step_used < c->rate / 1000 * RSCTL_STEP_MS / 2;
	/* no base yet: nothing to judge a wait by */
	uint64_t thr = base == UINT64_MAX ? UINT64_MAX / RSCTL_WORST :
		       base * RSCTL_SLACK_PCT / 100 + RSCTL_SLACK_US;

	if (!c->step_samples && c->step_pending_us <= thr) {
		if (!held)
			c->rate = c->rate > max / 2 ? max : c->rate * 2;
	} else if (c->step_samples && c->step_sum_us / c->step_samples <= thr &&
		   c->step_max_us <= thr * RSCTL_WORST && c->step_pending_us <= thr * RSCTL_WORST) {
		uint64_t g = c->rate / 8 > RSCTL_GROW ? c->rate / 8 : RSCTL_GROW;

		if (!held)
			c->rate = c->rate > max - g ? max : c->rate + g;
	} else {
		c->rate = c->rate / 100 * RSCTL_DROP_PCT;
		c->backoffs++;
	}
	if (c->rate < c->floor)
		c->rate = c->floor;
	if (c->step_samples)
		c->last_mean_us = c->step_sum_us / c->step_samples;
	rsctl_step_clear(c);
}

void rsctl_used(struct rsctl *c, uint64_t bytes)
{
	c->step_used += bytes;
}

void rsctl_set_rtt(struct rsctl *c, uint64_t rtt_us)
{
	c->rtt_us = rtt_us;
}

void rsctl_pending(struct rsctl *c, uint64_t age_us)
{
	if (age_us > c->step_pending_us)
		c->step_pending_us = age_us;
}

uint64_t rsctl_rate(struct rsctl *c, uint64_t now_ms)
{
	rsctl_base_roll(c, now_ms);
	if (now_ms - c->step_ms >= RSCTL_STEP_MS) {
		rsctl_step(c);
		c->step_ms = now_ms;
	}
	return c->rate;
}

/*
 * The queue part of what may be ahead of a record: RSCTL_AHEAD_MS of the
 * rate, but no more than the resync sends in RSCTL_AHEAD_BASE_PCT % of
 * the records' least latency, so that on a slow link a record does not
 * wait behind a queue longer than a share of its own latency; never less
 * than RSCTL_AHEAD_MS of the floor, which a resync keeps whatever the
 * records see (a smaller queue would hold it below).
 */
static uint64_t rsctl_queue_bytes(const struct rsctl *c)
{
	uint64_t q = c->rate / 1000 * RSCTL_AHEAD_MS, base = rsctl_base_us(c), b;
	uint64_t f = c->floor / 1000 * RSCTL_AHEAD_MS;

	if (base == UINT64_MAX)
		return q;		/* no records to judge by */
	b = c->rate / 1000000 * base * RSCTL_AHEAD_BASE_PCT / 100;
	if (b < f)
		b = f;
	return q < b ? q : b;
}

uint64_t rsctl_ahead_max(const struct rsctl *c)
{
	/* rtt_us: TCP's, below a second; what the link's round trip holds
	 * at the rate is on its way, not a queue */
	uint64_t a = rsctl_queue_bytes(c) + c->rate / 1000000 * c->rtt_us;

	return a > RSCTL_AHEAD_MIN ? a : RSCTL_AHEAD_MIN;
}

uint32_t rsctl_unit_sectors(const struct rsctl *c)
{
	uint64_t b = rsctl_queue_bytes(c);

	if (b < RSCTL_UNIT_MIN)
		b = RSCTL_UNIT_MIN;
	if (b > RSCTL_UNIT_MAX)
		b = RSCTL_UNIT_MAX;
	return (uint32_t)(b >> 12) * 8;
}
