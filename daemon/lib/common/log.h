/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * repld/replctl logging: one line per message on stderr, with an
 * sd-daemon priority prefix ("<3>") when stderr is the journal, plain
 * otherwise.  Log only at the top of a call chain, with the errno.
 */
#ifndef REPL_LOG_H
#define REPL_LOG_H

#include <errno.h>
#include <stdbool.h>
#include <syslog.h>

void log_setup(const char *ident, bool debug);
void log_msg(int prio, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* log_msg(), then return err */
int log_errno(int prio, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#define log_debug(...)		log_msg(LOG_DEBUG, 0, __VA_ARGS__)
#define log_info(...)		log_msg(LOG_INFO, 0, __VA_ARGS__)
#define log_notice(...)		log_msg(LOG_NOTICE, 0, __VA_ARGS__)
#define log_warning(...)	log_msg(LOG_WARNING, 0, __VA_ARGS__)
#define log_error(...)		log_msg(LOG_ERR, 0, __VA_ARGS__)
/* ..._errno(err, ...): err is a negative errno; returns err */
#define log_warning_errno(err, ...)	log_errno(LOG_WARNING, (err), __VA_ARGS__)
#define log_error_errno(err, ...)	log_errno(LOG_ERR, (err), __VA_ARGS__)

#endif
