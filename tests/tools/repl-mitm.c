// SPDX-License-Identifier: GPL-2.0-only
/*
 * repl-mitm: a man in the middle for the replication link, for the tests.
 *
 *   repl-mitm LISTEN-HOST:PORT TARGET-HOST:PORT
 *
 * Forwards every connection made to LISTEN to TARGET, both ways, one
 * connection at a time.  SIGUSR1 arms a flip: the byte 1 MiB further in
 * the client's stream (what the primary sends) is sent XOR 0x01, once.
 * Prints "connection N" for each connection and "flipped byte B of
 * connection N" when it flipped one; SIGTERM ends it.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "config.h"
#include "tcp.h"

#define MITM_FLIP_AHEAD	(1U << 20)

static volatile sig_atomic_t armed, stop;

static void on_usr1(int sig)
{
	(void)sig;
	armed = 1;
}

static void on_term(int sig)
{
	(void)sig;
	stop = 1;
}

/* Copy what is there from one side to the other: 0 on EOF or error. */
static int pass(int from, int to, uint64_t *done, uint64_t flip_at, unsigned int conn)
{
	uint8_t buf[65536];
	ssize_t n = read(from, buf, sizeof(buf));
	size_t off = 0;

	if (n <= 0)
		return 0;
	if (flip_at != UINT64_MAX && flip_at >= *done && flip_at < *done + (uint64_t)n) {
		buf[flip_at - *done] ^= 0x01;
		printf("flipped byte %llu of connection %u\n", (unsigned long long)flip_at, conn);
		fflush(stdout);
	}
	*done += (uint64_t)n;
	while (off < (size_t)n) {
		ssize_t k = write(to, buf + off, (size_t)n - off);

		if (k <= 0)
			return 0;
		off += (size_t)k;
	}
	return 1;
}

int main(int argc, char **argv)
{
	struct config_addr la, ta;
	struct sigaction sa = { 0 };
	unsigned int conn = 0;
	int lfd;

	if (argc != 3 || config_addr_parse(argv[1], true, &la) < 0 ||
	    config_addr_parse(argv[2], false, &ta) < 0) {
		fprintf(stderr, "usage: repl-mitm LISTEN-HOST:PORT TARGET-HOST:PORT\n");
		return 2;
	}
	sa.sa_handler = on_usr1;
	sigaction(SIGUSR1, &sa, NULL);
	sa.sa_handler = on_term;
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	lfd = tcp_listen(&la, 8);
	if (lfd < 0) {
		fprintf(stderr, "repl-mitm: listen: %s\n", strerror(-lfd));
		return 1;
	}
	while (!stop) {
		uint64_t up = 0, down = 0, flip_at = UINT64_MAX;
		int c = accept(lfd, NULL, NULL), t;

		if (c < 0)
			continue;
		t = tcp_connect(&ta);
		if (t < 0) {
			fprintf(stderr, "repl-mitm: connect: %s\n", strerror(-t));
			close(c);
			continue;
		}
		printf("connection %u\n", ++conn);
		fflush(stdout);
		while (!stop) {
			struct pollfd p[2] = { { .fd = c, .events = POLLIN },
					       { .fd = t, .events = POLLIN } };

			if (armed && flip_at == UINT64_MAX) {
				flip_at = up + MITM_FLIP_AHEAD;
				armed = 0;
			}
			if (poll(p, 2, 200) < 0) {
				if (errno == EINTR)
					continue;
				break;
			}
			if ((p[0].revents & (POLLIN | POLLHUP | POLLERR)) &&
			    !pass(c, t, &up, flip_at, conn))
				break;
			if ((p[1].revents & (POLLIN | POLLHUP | POLLERR)) &&
			    !pass(t, c, &down, UINT64_MAX, conn))
				break;
			if (flip_at != UINT64_MAX && up > flip_at)
				flip_at = UINT64_MAX - 1;	/* done: once */
		}
		close(c);
		close(t);
	}
	close(lfd);
	return 0;
}
