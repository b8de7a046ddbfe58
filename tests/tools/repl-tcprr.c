// SPDX-License-Identifier: GPL-2.0-only
/*
 * repl-tcprr: request/response over one TCP connection, the serial limit of
 * a link for a replicated write at queue depth 1 (a write of N bytes goes
 * out, a small acknowledgment comes back, the next write starts).  Used by
 * the benchmarks as the reference for the 100 Mbit / 10 ms link: it is what
 * the link and TCP allow with no storage and no daemon in the path.
 *
 *   repl-tcprr server [--port P] [--size BYTES]
 *	accept one connection; for every BYTES read, answer one byte; exit
 *	when the client closes
 *   repl-tcprr client [--port P] [--size BYTES] [--count N] [--warmup W]
 *	W + N requests to 127.0.0.1:P (TCP_NODELAY), time the last N; prints
 *	"requests=N bytes=BYTES seconds=S MB/s=R ms=M" (MB = 10^6 bytes, ms
 *	per request)
 *
 * Exit status 0, 1 on an error (message on stderr), 2 on bad usage.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_SIZE	(64UL << 20)

static void usage(FILE *f)
{
	fprintf(f,
		"usage: repl-tcprr server [--port P] [--size BYTES]\n"
		"       repl-tcprr client [--port P] [--size BYTES] [--count N] [--warmup W]\n"
		"defaults: port 7999, size 1048576 (1 to %lu), count 40, warmup 3\n",
		MAX_SIZE);
}

static bool parse_ul(const char *s, unsigned long min, unsigned long max,
		     unsigned long *ret)
{
	unsigned long v;
	char *end;

	errno = 0;
	v = strtoul(s, &end, 0);
	if (errno || end == s || *end || s[0] == '-' || v < min || v > max)
		return false;
	*ret = v;
	return true;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int xfer(int fd, char *buf, size_t len, bool out)
{
	size_t done = 0;

	while (done < len) {
		ssize_t r = out ? write(fd, buf + done, len - done) :
				  read(fd, buf + done, len - done);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return -EPIPE;
		done += (size_t)r;
	}
	return 0;
}

static int nodelay(int fd)
{
	int one = 1;

	return setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static int run_server(struct sockaddr_in *sa, char *buf, size_t size)
{
	int one = 1, l, c, r;
	char ack = 'a';

	l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (l < 0 || setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(l, (struct sockaddr *)sa, sizeof(*sa)) < 0 || listen(l, 1) < 0) {
		fprintf(stderr, "repl-tcprr: listen on port %u: %s\n",
			ntohs(sa->sin_port), strerror(errno));
		return 1;
	}
	c = accept4(l, NULL, NULL, SOCK_CLOEXEC);
	if (c < 0 || nodelay(c) < 0) {
		fprintf(stderr, "repl-tcprr: accept: %s\n", strerror(errno));
		return 1;
	}
	close(l);
	for (;;) {
		r = xfer(c, buf, size, false);
		if (r == -EPIPE)
			return 0;	/* the client is done */
		if (r < 0 || (r = xfer(c, &ack, 1, true)) < 0) {
			fprintf(stderr, "repl-tcprr: server: %s\n", strerror(-r));
			return 1;
		}
	}
}

static int run_client(struct sockaddr_in *sa, char *buf, size_t size,
		      unsigned long count, unsigned long warmup)
{
	double t0 = 0, t;
	char ack;
	int s;

	s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0 || nodelay(s) < 0 ||
	    connect(s, (struct sockaddr *)sa, sizeof(*sa)) < 0) {
		fprintf(stderr, "repl-tcprr: connect to port %u: %s\n",
			ntohs(sa->sin_port), strerror(errno));
		return 1;
	}
	for (unsigned long i = 0; i < warmup + count; i++) {
		int r;

		if (i == warmup)
			t0 = now_s();
		r = xfer(s, buf, size, true);
		if (r == 0)
			r = xfer(s, &ack, 1, false);
		if (r < 0) {
			fprintf(stderr, "repl-tcprr: request %lu: %s\n", i, strerror(-r));
			return 1;
		}
	}
	t = now_s() - t0;
	close(s);
	printf("requests=%lu bytes=%zu seconds=%.3f MB/s=%.3f ms=%.3f\n", count, size,
	       t, (double)count * (double)size / t / 1e6, t / (double)count * 1e3);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "port", required_argument, NULL, 'p' },
		{ "size", required_argument, NULL, 's' },
		{ "count", required_argument, NULL, 'n' },
		{ "warmup", required_argument, NULL, 'w' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	unsigned long port = 7999, size = 1UL << 20, count = 40, warmup = 3;
	struct sockaddr_in sa = { .sin_family = AF_INET };
	const char *mode;
	char *buf;
	int c, r;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		bool ok = true;

		switch (c) {
		case 'p':
			ok = parse_ul(optarg, 1, 65535, &port);
			break;
		case 's':
			ok = parse_ul(optarg, 1, MAX_SIZE, &size);
			break;
		case 'n':
			ok = parse_ul(optarg, 1, 1000000, &count);
			break;
		case 'w':
			ok = parse_ul(optarg, 0, 1000000, &warmup);
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
		if (!ok) {
			fprintf(stderr, "repl-tcprr: bad value for --%s: %s\n",
				c == 'p' ? "port" : c == 's' ? "size" :
				c == 'n' ? "count" : "warmup", optarg);
			return 2;
		}
	}
	if (optind + 1 != argc) {
		usage(stderr);
		return 2;
	}
	mode = argv[optind];
	if (strcmp(mode, "server") && strcmp(mode, "client")) {
		fprintf(stderr, "repl-tcprr: unknown mode '%s'\n", mode);
		usage(stderr);
		return 2;
	}
	sa.sin_port = htons((uint16_t)port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	buf = malloc(size);
	if (!buf) {
		fprintf(stderr, "repl-tcprr: out of memory\n");
		return 1;
	}
	memset(buf, 0x5a, size);
	if (!strcmp(mode, "server"))
		r = run_server(&sa, buf, size);
	else
		r = run_client(&sa, buf, size, count, warmup);
	free(buf);
	return r;
}
