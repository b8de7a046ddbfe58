// SPDX-License-Identifier: GPL-2.0-only
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"

static const char *log_ident = "repld";
static bool log_debug_on;
static bool log_journal;

void log_setup(const char *ident, bool debug)
{
	const char *js = getenv("JOURNAL_STREAM");
	struct stat st;

	log_ident = ident;
	log_debug_on = debug;
	/* JOURNAL_STREAM=dev:ino of stderr when systemd connected it to the journal */
	if (js && fstat(STDERR_FILENO, &st) == 0) {
		unsigned long long dev, ino;

		if (sscanf(js, "%llu:%llu", &dev, &ino) == 2 &&
		    dev == (unsigned long long)st.st_dev && ino == (unsigned long long)st.st_ino)
			log_journal = true;
	}
}

__attribute__((format(printf, 3, 0)))
static void log_vmsg(int prio, int err, const char *fmt, va_list ap)
{
	char buf[1024];
	int n;

	if (prio == LOG_DEBUG && !log_debug_on)
		return;
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	if (n < 0)
		return;
	if (log_journal)
		fprintf(stderr, "<%d>", prio);
	if (err)
		fprintf(stderr, "%s: %s: %s\n", log_ident, buf, strerror(err < 0 ? -err : err));
	else
		fprintf(stderr, "%s: %s\n", log_ident, buf);
}

void log_msg(int prio, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vmsg(prio, err, fmt, ap);
	va_end(ap);
}

int log_errno(int prio, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vmsg(prio, err, fmt, ap);
	va_end(ap);
	return err;
}
