// SPDX-License-Identifier: GPL-2.0-only
/* Trace marks for the benchmarks: see tracemark.h. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "tracemark.h"

int tracemark_fd = -1;

void tracemark_init(void)
{
	static const char *const paths[] = {
		"/sys/kernel/tracing/trace_marker",
		"/sys/kernel/debug/tracing/trace_marker",
	};
	const char *v = getenv("REPLD_TRACE_MARKS");

	if (!v || strcmp(v, "1"))
		return;
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]) && tracemark_fd < 0; i++)
		tracemark_fd = open(paths[i], O_WRONLY | O_CLOEXEC);
	if (tracemark_fd < 0)
		log_warning("REPLD_TRACE_MARKS=1, but no trace_marker to write to: %s",
			    strerror(errno));
}

void tracemark_write(char role, const char *step, int64_t n)
{
	char line[64];
	int len = n < 0 ? snprintf(line, sizeof(line), "repld %c %s\n", role, step) :
			  snprintf(line, sizeof(line), "repld %c %s %" PRId64 "\n", role, step, n);

	/* a mark that cannot be written is a mark the benchmark misses */
	if (len > 0 && write(tracemark_fd, line, (size_t)len) < 0)
		return;
}
