// SPDX-License-Identifier: GPL-2.0-only
/* TCP sockets of the replication links: see sock.h. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>

#include "sock.h"

/*
 * TCP options for replication sockets: no Nagle, keepalive.  The buffer
 * sizes are left to the kernel's autotuning (tcp_rmem/tcp_wmem): setting
 * SO_SNDBUF/SO_RCVBUF would switch it off and cap the window at
 * net.core.[rw]mem_max (about 208 KiB), a quarter of what a 100 Mbit,
 * 10 ms link needs once queueing adds to the round trip.
 */
int sock_tune(int fd)
{
	int one = 1;

	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one)) < 0)
		return -errno;
	return 0;
}

/* The address bytes of an IP socket address, IPv4-mapped IPv6 as IPv4. */
static const uint8_t *sock_ip(const struct sockaddr_storage *sa, size_t *len)
{
	const uint8_t *x;

	if (sa->ss_family == AF_INET) {
		*len = 4;
		return (const uint8_t *)&((const struct sockaddr_in *)sa)->sin_addr;
	}
	if (sa->ss_family != AF_INET6)
		return NULL;
	x = (const uint8_t *)&((const struct sockaddr_in6 *)sa)->sin6_addr;
	*len = 16;
	if (IN6_IS_ADDR_V4MAPPED((const struct in6_addr *)x)) {
		*len = 4;
		return x + 12;
	}
	return x;
}

bool sock_same_host(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
	size_t xl = 0, yl = 0;
	const uint8_t *x = sock_ip(a, &xl), *y = sock_ip(b, &yl);

	return x && y && xl == yl && !memcmp(x, y, xl);
}

void sock_host_text(const struct sockaddr_storage *sa, char *buf, size_t len)
{
	if (!len)
		return;
	buf[0] = '\0';
	if (sa->ss_family == AF_INET)
		inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, buf, (socklen_t)len);
	else if (sa->ss_family == AF_INET6)
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, buf,
			  (socklen_t)len);
}
