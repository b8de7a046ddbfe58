/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Trace marks, for the benchmarks: with REPLD_TRACE_MARKS=1 in its
 * environment, repld writes one line for each step of a record into the
 * kernel's trace buffer (tracefs' trace_marker), beside the module's
 * tracepoints and on their clock, so that tests/bench/syncstages.py can
 * follow a write from its bio to its completion.  The lines: "repld P
 * wake", "repld P read SEQ", "repld P sent SEQ", "repld P ack WRITTEN" on
 * the primary; "repld S recv SEQ", "repld S reaped" (the write engine ran: it
 * issued what was queued and reaped what completed), "repld S acksent
 * WRITTEN" on a secondary (SEQ: the record's, WRITTEN: the
 * acknowledgment's cumulative written count).  Without it: one test of
 * an integer per step.
 */
#ifndef REPL_TRACEMARK_H
#define REPL_TRACEMARK_H

#include <stdint.h>

extern int tracemark_fd;

/* Open the trace marker if REPLD_TRACE_MARKS=1 (a failure is logged, not fatal). */
void tracemark_init(void);
void tracemark_write(char role, const char *step, int64_t n);

/* n < 0: none */
#define tracemark(role, step, n)                                   \
	do {                                                       \
		if (tracemark_fd >= 0)                             \
			tracemark_write(role, step, (int64_t)(n)); \
	} while (0)

#endif
