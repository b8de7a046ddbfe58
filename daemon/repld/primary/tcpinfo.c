// SPDX-License-Identifier: GPL-2.0-only
/*
 * What TCP knows of a connection, from the kernel's own struct tcp_info
 * (linux/tcp.h: glibc's copy in netinet/tcp.h stops before tcpi_min_rtt,
 * and the two cannot be included together).
 */
#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <linux/tcp.h>

#include "tcpinfo.h"

int tcpinfo_min_rtt_us(int fd, uint32_t *ret_us)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);

	memset(&ti, 0, sizeof(ti));
	if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) < 0)
		return -errno;
	/* older kernels fill less; 0 and ~0U mean no sample yet */
	if (len < offsetof(struct tcp_info, tcpi_min_rtt) + sizeof(ti.tcpi_min_rtt) ||
	    !ti.tcpi_min_rtt || ti.tcpi_min_rtt == ~0U)
		return -ENODATA;
	*ret_us = ti.tcpi_min_rtt;
	return 0;
}
