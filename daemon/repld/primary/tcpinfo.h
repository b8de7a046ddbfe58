/* SPDX-License-Identifier: GPL-2.0-only */
/* What TCP knows of a connection (TCP_INFO). Errors are negative errno. */
#ifndef REPL_TCPINFO_H
#define REPL_TCPINFO_H

#include <stdint.h>

/* The least round trip TCP has measured on fd, in microseconds; -ENODATA: none yet. */
int tcpinfo_min_rtt_us(int fd, uint32_t *ret_us);

#endif
