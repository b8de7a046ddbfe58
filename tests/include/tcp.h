/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * TCP sockets for the test programs that stand in for a peer or sit
 * between two: connected to, or listening at, an address that
 * config_addr_parse() read.
 */
#ifndef REPL_TEST_TCP_H
#define REPL_TEST_TCP_H

#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>

#include "config.h"

/* A socket connected to a: the socket or -errno. */
static inline int tcp_connect(const struct config_addr *a)
{
	int fd = socket(a->sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0), r;

	if (fd < 0)
		return -errno;
	if (connect(fd, (const struct sockaddr *)&a->sa, a->len) < 0) {
		r = -errno;
		close(fd);
		return r;
	}
	return fd;
}

/* A socket listening at a (SO_REUSEADDR): the socket or -errno. */
static inline int tcp_listen(const struct config_addr *a, int backlog)
{
	int fd = socket(a->sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1, r;

	if (fd < 0)
		return -errno;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(fd, (const struct sockaddr *)&a->sa, a->len) < 0 || listen(fd, backlog) < 0) {
		r = -errno;
		close(fd);
		return r;
	}
	return fd;
}

#endif
