/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The resync controller of one peer: how fast a resync may go so that the
 * application's records to that peer keep the latency they have without
 * it, while the resync uses what the link leaves (in the spirit of DRBD's
 * c-plan-ahead and c-fill-target, driven by what the records see).
 *
 * Its input is the latency of the peer's records, queued to acknowledged
 * (written for a sync peer, received otherwise), sampled as the acks come.
 * Its base is the least latency seen in the last RSCTL_BASE_MS, but it
 * rises by RSCTL_BASE_RISE_PCT % at most per half of that: a resync that
 * slows every record down for a while must not make that the new normal.
 * Every RSCTL_STEP_MS it looks at the step's samples:
 *  - none, and no record waiting longer than the slack below (no
 *    application writes to protect): the rate doubles;
 *  - none, but a record has waited beyond the slack (rsctl_pending():
 *    stuck behind the resync, so no ack came): as a slow step;
 *  - their mean within RSCTL_SLACK_PCT % of the base plus RSCTL_SLACK_US
 *    (what a record may wait behind resync data; a slow mean is a queue)
 *    and none beyond RSCTL_WORST times that (a single slow record is
 *    noise, a very slow one is not): the link has room, the rate grows
 *    by an eighth (at least RSCTL_GROW);
 *  - else the resync is in the records' way: the rate drops to
 *    RSCTL_DROP_PCT %.
 * It grows only when the resync used at least half of what the step's rate
 * let it start (rsctl_used()): a resync held back by the link's queue or
 * by its reads says nothing of a faster rate.
 * The rate stays within a floor (resync-min-rate-mb: a resync always ends,
 * as with DRBD's c-min-rate) and the cap (resync-rate-mb), the floor
 * never above the cap.  From the rate follow how much the resync may have
 * queued ahead of the next record, in the link's queues included, and how
 * large its units are: a queue of RSCTL_AHEAD_MS of the rate, but at most
 * what the rate sends in RSCTL_AHEAD_BASE_PCT % of the base (on a slow
 * link 5 ms of resync data is several records' worth of waiting) and no
 * less than RSCTL_AHEAD_MS of the floor (or the floor would not hold), plus
 * what the link's least round trip holds at that rate (rsctl_set_rtt():
 * on its way, not queued); units are the queue's size, within
 * RSCTL_UNIT_MIN and RSCTL_UNIT_MAX.
 */
#ifndef REPL_RSCTL_H
#define REPL_RSCTL_H

#include <stdbool.h>
#include <stdint.h>

#define RSCTL_STEP_MS		100U
#define RSCTL_BASE_MS		10000U
#define RSCTL_BASE_RISE_PCT	125U
#define RSCTL_SLACK_PCT		125U
#define RSCTL_SLACK_US		1000U
#define RSCTL_WORST		4U
#define RSCTL_DROP_PCT		70U
#define RSCTL_RATE_START	(8ULL << 20)
#define RSCTL_RATE_MAX		(16ULL << 30)
#define RSCTL_GROW		(1ULL << 20)
#define RSCTL_AHEAD_MS		5U
#define RSCTL_AHEAD_BASE_PCT	40U
#define RSCTL_AHEAD_MIN		(16ULL << 10)		/* bytes */
#define RSCTL_UNIT_MIN		(16U << 10)
#define RSCTL_UNIT_MAX		(1U << 20)

struct rsctl {
	uint64_t rate;			/* bytes per second the resync may use now */
	uint64_t cap;			/* resync-rate-mb in bytes/s, 0: none */
	uint64_t floor;			/* resync-min-rate-mb in bytes/s, at most cap */
	uint64_t base_us[2];		/* least latency, this and the last half-window */
	uint64_t base_since_ms;		/* when base_us[0]'s half-window began */
	uint64_t step_ms;		/* when this step began */
	uint64_t step_sum_us;		/* its samples' sum */
	uint64_t step_max_us;		/* and the worst */
	unsigned int step_samples;
	uint64_t step_pending_us;	/* the oldest unacknowledged record's wait, at most */
	uint64_t step_used;		/* bytes the resync started in this step */
	uint64_t rtt_us;		/* the link's least round trip, 0: unknown */
	uint64_t last_mean_us;		/* the mean of the last step that had samples */
	uint64_t backoffs;		/* steps that slowed the resync */
};

void rsctl_init(struct rsctl *c, uint64_t now_ms);
/* A pass starts: from RSCTL_RATE_START again (the base stays). */
void rsctl_restart(struct rsctl *c, uint64_t now_ms);
/* resync-min-rate-mb (at least 1) and resync-rate-mb (0: no cap) */
void rsctl_set_bounds(struct rsctl *c, unsigned int min_mb, unsigned int cap_mb);
/* A record's latency, queued to acknowledged. */
void rsctl_sample(struct rsctl *c, uint64_t now_ms, uint64_t latency_us);
/*
 * How long the oldest record not yet acknowledged has waited (0: none is
 * waiting), as often as the pace is asked for.
 */
void rsctl_pending(struct rsctl *c, uint64_t age_us);
/* Bytes of resync units started, as they start. */
void rsctl_used(struct rsctl *c, uint64_t bytes);
/* The link's least round trip (TCP's min_rtt), 0: unknown. */
void rsctl_set_rtt(struct rsctl *c, uint64_t rtt_us);
/* The rate for now: steps the controller when a step is over. */
uint64_t rsctl_rate(struct rsctl *c, uint64_t now_ms);
/* The least latency of the last RSCTL_BASE_MS (UINT64_MAX: no sample). */
uint64_t rsctl_base_us(const struct rsctl *c);
/* Bytes the resync may have ahead of the next record, the link's queues included. */
uint64_t rsctl_ahead_max(const struct rsctl *c);
/* The largest resync unit now, in sectors (a multiple of 8). */
uint32_t rsctl_unit_sectors(const struct rsctl *c);

#endif
