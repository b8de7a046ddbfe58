// SPDX-License-Identifier: GPL-2.0-only
/*
 * repl-tcprr: request/response over one TCP connection, the serial limit of
 * a link for a replicated write at queue depth 1 (a write of N bytes goes
 * out, a small acknowledgment comes back, the next write starts).  Used by
 * the benchmarks as the reference for the 100 Mbit / 10 ms link: it is what
 * the link and TCP allow with no storage and no daemon in the path.
 *
 *   repl-tcprr server [--port P] [--size BYTES] [--tls SUITE]
 *	accept one connection; for every BYTES read, answer one byte; exit
 *	when the client closes
 *   repl-tcprr client [--port P] [--size BYTES] [--count N] [--warmup W] [--depth D]
 *		      [--tls SUITE]
 *	W + N requests to 127.0.0.1:P (TCP_NODELAY), up to D of them (1 by
 *	default) sent before their answer came, time the last N; prints
 *	"requests=N bytes=BYTES seconds=S MB/s=R ms=M p50_us=L p99_us=L99"
 *	(MB = 10^6 bytes, ms per request; L and L99 the median and the 99th
 *	percentile of a request's time from its first byte sent to its answer)
 *
 * With --tls both ends speak TLS 1.3 with the suite SUITE (OpenSSL's name)
 * and a pre-shared key built in (the cost of the records is measured, not
 * who holds the key): the floor of a replicated write over TLS, as repld's
 * links send it in userspace.
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

#include <openssl/ssl.h>

#include "tool.h"

#define MAX_SIZE	(64UL << 20)
#define MAX_DEPTH	256U

static SSL_SESSION *tls_psk;

struct conn {
	int fd;
	SSL *ssl;		/* NULL: plain TCP */
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: repl-tcprr server [--port P] [--size BYTES] [--tls SUITE]\n"
		"       repl-tcprr client [--port P] [--size BYTES] [--count N] [--warmup W] [--depth D]\n"
		"                         [--tls SUITE]\n"
		"defaults: port 7999, size 1048576 (1 to %lu), count 40, warmup 3, depth 1 (1 to %u)\n",
		MAX_SIZE, MAX_DEPTH);
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

static ssize_t tls_xfer(SSL *ssl, char *buf, size_t len, bool out)
{
	size_t n = 0;
	int ok = out ? SSL_write_ex(ssl, buf, len, &n) : SSL_read_ex(ssl, buf, len, &n);

	if (ok)
		return (ssize_t)n;
	if (SSL_get_error(ssl, 0) == SSL_ERROR_ZERO_RETURN)
		return 0;
	errno = EPROTO;
	return -1;
}

static int xfer(struct conn *c, char *buf, size_t len, bool out)
{
	size_t done = 0;

	while (done < len) {
		ssize_t r = c->ssl ? tls_xfer(c->ssl, buf + done, len - done, out) :
			    out ? write(c->fd, buf + done, len - done) :
				  read(c->fd, buf + done, len - done);

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

static int psk_use(SSL *ssl, const EVP_MD *md, const unsigned char **id, size_t *idlen,
		   SSL_SESSION **sess)
{
	SSL_SESSION_up_ref(tls_psk);
	*sess = tls_psk;
	*id = (const unsigned char *)"repl-tcprr";
	*idlen = strlen("repl-tcprr");
	return 1;
}

static int psk_find(SSL *ssl, const unsigned char *id, size_t idlen, SSL_SESSION **sess)
{
	SSL_SESSION_up_ref(tls_psk);
	*sess = tls_psk;
	return 1;
}

/* TLS 1.3 over c->fd with SUITE, which must hash with SHA-256 (the PSK) */
static int tls_start(struct conn *c, const char *suite, bool server)
{
	static const unsigned char key[32] = "repl-tcprr: not a secret";
	SSL_CTX *ctx = SSL_CTX_new(TLS_method());
	const SSL_CIPHER *cipher;

	if (!ctx || !SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION) ||
	    !SSL_CTX_set_ciphersuites(ctx, suite))
		goto bad;
	cipher = sk_SSL_CIPHER_value(SSL_CTX_get_ciphers(ctx), 0);
	tls_psk = SSL_SESSION_new();
	if (!cipher || !tls_psk || !SSL_SESSION_set1_master_key(tls_psk, key, sizeof(key)) ||
	    !SSL_SESSION_set_cipher(tls_psk, cipher) ||
	    !SSL_SESSION_set_protocol_version(tls_psk, TLS1_3_VERSION))
		goto bad;
	SSL_CTX_set_psk_use_session_callback(ctx, psk_use);
	SSL_CTX_set_psk_find_session_callback(ctx, psk_find);
	c->ssl = SSL_new(ctx);
	SSL_CTX_free(ctx);
	if (!c->ssl || !SSL_set_fd(c->ssl, c->fd) ||
	    (server ? SSL_accept(c->ssl) : SSL_connect(c->ssl)) != 1)
		goto bad;
	return 0;
bad:
	fprintf(stderr, "repl-tcprr: TLS with %s failed\n", suite);
	return -1;
}

static void conn_close(struct conn *c)
{
	if (c->ssl) {
		SSL_shutdown(c->ssl);
		SSL_free(c->ssl);
		c->ssl = NULL;
	}
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
}

static int nodelay(int fd)
{
	int one = 1;

	return setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static int run_server(struct sockaddr_in *sa, char *buf, size_t size, const char *tls)
{
	struct conn c = { -1, NULL };
	int one = 1, l, r;
	char ack = 'a';

	l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (l < 0 || setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(l, (struct sockaddr *)sa, sizeof(*sa)) < 0 || listen(l, 1) < 0) {
		fprintf(stderr, "repl-tcprr: listen on port %u: %s\n",
			ntohs(sa->sin_port), strerror(errno));
		return 1;
	}
	c.fd = accept4(l, NULL, NULL, SOCK_CLOEXEC);
	if (c.fd < 0 || nodelay(c.fd) < 0) {
		fprintf(stderr, "repl-tcprr: accept: %s\n", strerror(errno));
		return 1;
	}
	close(l);
	if (tls && tls_start(&c, tls, true) < 0) {
		conn_close(&c);
		return 1;
	}
	for (;;) {
		r = xfer(&c, buf, size, false);
		if (r == -EPIPE)
			break;		/* the client is done */
		if (r < 0 || (r = xfer(&c, &ack, 1, true)) < 0) {
			fprintf(stderr, "repl-tcprr: server: %s\n", strerror(-r));
			conn_close(&c);
			return 1;
		}
	}
	conn_close(&c);
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/*
 * Request i is sent once fewer than depth are unanswered; answers come in
 * order, so the oldest unanswered request is answered next.
 */
static int client_requests(struct conn *c, char *buf, size_t size, unsigned long total,
			   unsigned long depth, double *sent, double *lat)
{
	unsigned long next = 0, done = 0;
	char ack;
	int r;

	while (done < total) {
		if (next < total && next - done < depth) {
			sent[next % depth] = now_s();
			r = xfer(c, buf, size, true);
			next++;
		} else {
			r = xfer(c, &ack, 1, false);
			lat[done] = now_s() - sent[done % depth];
			done++;
		}
		if (r < 0) {
			fprintf(stderr, "repl-tcprr: request %lu: %s\n", done, strerror(-r));
			return -1;
		}
	}
	return 0;
}

static int run_client(struct sockaddr_in *sa, char *buf, size_t size, unsigned long count,
		      unsigned long warmup, unsigned long depth, const char *tls)
{
	double *sent = calloc(depth, sizeof(double)), *lat = calloc(count, sizeof(double));
	struct conn c = { -1, NULL };
	double t0, t;
	int r = 1;

	c.fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (!sent || !lat || c.fd < 0 || nodelay(c.fd) < 0 ||
	    connect(c.fd, (struct sockaddr *)sa, sizeof(*sa)) < 0) {
		fprintf(stderr, "repl-tcprr: connect to port %u: %s\n",
			ntohs(sa->sin_port), strerror(errno));
		goto out;
	}
	if (tls && tls_start(&c, tls, false) < 0)
		goto out;
	/* the warmup, then the timed requests, each at the same depth */
	if (warmup && client_requests(&c, buf, size, warmup, depth, sent, lat) < 0)
		goto out;
	t0 = now_s();
	if (client_requests(&c, buf, size, count, depth, sent, lat) < 0)
		goto out;
	t = now_s() - t0;
	qsort(lat, count, sizeof(*lat), cmp_double);
	printf("requests=%lu bytes=%zu seconds=%.3f MB/s=%.3f ms=%.3f p50_us=%.0f p99_us=%.0f\n",
	       count, size, t, (double)count * (double)size / t / 1e6, t / (double)count * 1e3,
	       lat[count / 2] * 1e6, lat[count * 99 / 100] * 1e6);
	r = 0;
out:
	conn_close(&c);
	free(sent);
	free(lat);
	return r;
}

int main(int argc, char **argv)
{
	unsigned long port = 7999, size = 1UL << 20, count = 40, warmup = 3, depth = 1;
	/* the numeric options: their bounds, where they go */
	const struct {
		const char *name;
		unsigned long min, max, *v;
	} num[] = {
		{ "port", 1, 65535, &port },
		{ "size", 1, MAX_SIZE, &size },
		{ "count", 1, 1000000, &count },
		{ "warmup", 0, 1000000, &warmup },
		{ "depth", 1, MAX_DEPTH, &depth },
	};
	static const struct option opts[] = {
		{ "port", required_argument, NULL, 0 },
		{ "size", required_argument, NULL, 1 },
		{ "count", required_argument, NULL, 2 },
		{ "warmup", required_argument, NULL, 3 },
		{ "depth", required_argument, NULL, 4 },
		{ "tls", required_argument, NULL, 't' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	struct sockaddr_in sa = { .sin_family = AF_INET };
	const char *mode, *tls = NULL;
	char *buf;
	int c, r;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (c >= 0 && c < (int)(sizeof(num) / sizeof(num[0]))) {
			if (!parse_ul(optarg, num[c].min, num[c].max, num[c].v)) {
				fprintf(stderr, "repl-tcprr: bad value for --%s: %s\n", num[c].name,
					optarg);
				return 2;
			}
		} else if (c == 't') {
			tls = optarg;
		} else if (c == 'h') {
			usage(stdout);
			return 0;
		} else {
			usage(stderr);
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
		r = run_server(&sa, buf, size, tls);
	else
		r = run_client(&sa, buf, size, count, warmup, depth, tls);
	SSL_SESSION_free(tls_psk);
	free(buf);
	return r;
}
