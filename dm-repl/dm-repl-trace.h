/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Tracepoints of a write's way through the target, for the benchmarks
 * (tests/bench/bench-syncpath.sh): its bio mapped, its records reserved
 * and published to the consumer, the consumer's acknowledgment read, the
 * bio completed.  repld marks its own steps in the same trace buffer
 * (trace_marker), so that one clock orders them all.
 */
#undef TRACE_SYSTEM
#define TRACE_SYSTEM dm_repl

#if !defined(_DM_REPL_TRACE_H) || defined(TRACE_HEADER_MULTI_READ)
#define _DM_REPL_TRACE_H

#include <linux/tracepoint.h>

/* A write (or flush, discard) bio entered the target. */
TRACE_EVENT(repl_map,
	TP_PROTO(u16 op, sector_t sector, unsigned int nr_sectors),
	TP_ARGS(op, sector, nr_sectors),
	TP_STRUCT__entry(
		__field(u16, op)
		__field(sector_t, sector)
		__field(unsigned int, nr_sectors)
	),
	TP_fast_assign(
		__entry->op = op;
		__entry->sector = sector;
		__entry->nr_sectors = nr_sectors;
	),
	TP_printk("op=%u sector=%llu nr=%u", __entry->op,
		  (unsigned long long)__entry->sector, __entry->nr_sectors)
);

/* Its records [seq, seq + nr) were reserved in the ring. */
TRACE_EVENT(repl_logged,
	TP_PROTO(u64 seq, u32 nr, sector_t sector),
	TP_ARGS(seq, nr, sector),
	TP_STRUCT__entry(
		__field(u64, seq)
		__field(u32, nr)
		__field(sector_t, sector)
	),
	TP_fast_assign(
		__entry->seq = seq;
		__entry->nr = nr;
		__entry->sector = sector;
	),
	TP_printk("seq=%llu nr=%u sector=%llu", __entry->seq, __entry->nr,
		  (unsigned long long)__entry->sector)
);

/* The records below @prod are published; @woke: the consumer was woken. */
TRACE_EVENT(repl_publish,
	TP_PROTO(u64 prod, bool woke),
	TP_ARGS(prod, woke),
	TP_STRUCT__entry(
		__field(u64, prod)
		__field(bool, woke)
	),
	TP_fast_assign(
		__entry->prod = prod;
		__entry->woke = woke;
	),
	TP_printk("prod=%llu woke=%d", __entry->prod, __entry->woke)
);

/* The consumer acknowledged the records below @ack. */
TRACE_EVENT(repl_ack,
	TP_PROTO(u64 ack),
	TP_ARGS(ack),
	TP_STRUCT__entry(
		__field(u64, ack)
	),
	TP_fast_assign(
		__entry->ack = ack;
	),
	TP_printk("ack=%llu", __entry->ack)
);

/* The write of records [seq, seq + nr) completes to the upper layer. */
TRACE_EVENT(repl_complete,
	TP_PROTO(u64 seq, u32 nr),
	TP_ARGS(seq, nr),
	TP_STRUCT__entry(
		__field(u64, seq)
		__field(u32, nr)
	),
	TP_fast_assign(
		__entry->seq = seq;
		__entry->nr = nr;
	),
	TP_printk("seq=%llu nr=%u", __entry->seq, __entry->nr)
);

#endif /* _DM_REPL_TRACE_H */

/* define_trace.h finds this file beside the sources (Kbuild: -I$(src)) */
#undef TRACE_INCLUDE_PATH
#define TRACE_INCLUDE_PATH .
#undef TRACE_INCLUDE_FILE
#define TRACE_INCLUDE_FILE dm-repl-trace
#include <trace/define_trace.h>
