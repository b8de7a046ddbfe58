/* SPDX-License-Identifier: GPL-2.0-only */
/* TCP sockets of the replication links, both ends. */
#ifndef REPL_SOCK_H
#define REPL_SOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

/* No Nagle, keepalive; the buffers left to the kernel's autotuning. */
int sock_tune(int fd);
/* The same host, whatever the ports; an IPv4-mapped IPv6 address is IPv4. */
bool sock_same_host(const struct sockaddr_storage *a, const struct sockaddr_storage *b);
/* The address of sa without the port, for messages ("" if not IP). */
void sock_host_text(const struct sockaddr_storage *sa, char *buf, size_t len);

#endif
