/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * TLS 1.3 on the replication links (OpenSSL), both ends.
 *
 * A resource has one struct tls_ctx, built from its configuration: mutual
 * authentication with X.509 certificates (tls-ca, tls-cert, tls-key; the
 * peer's certificate must name the peer's node), or with the resource's
 * external pre-shared key (tls-psk-file; the PSK identity names the
 * resource).  transport = "plain-insecure" has no context at all.
 *
 * Every connection has a struct tls_io, also a plain one: the socket, and
 * the TLS session when there is one.  Once the handshake is done, sending
 * goes through the kernel (kTLS, SSL_OP_ENABLE_KTLS) where it can: the
 * socket then takes plain writev() and splice() and the kernel encrypts,
 * so ring payloads still go to the socket without a copy.  Where the
 * kernel has no TLS, or for receiving where OpenSSL cannot hand it over,
 * OpenSSL does the records in userspace.  No session tickets, so every
 * connection, a reconnect too, is a full handshake with authentication.
 *
 * The readv/writev calls behave like the system calls: a count, or -1 with
 * errno (EAGAIN: wait for the socket; EPROTO: TLS refused or broken, the
 * reason in tls_io_error()); 0 from readv: the peer closed.
 */
#ifndef REPL_TLS_H
#define REPL_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "config.h"

struct tls_ctx;
typedef struct ssl_st SSL;

struct tls_io {
	int fd;
	SSL *ssl;			/* NULL: plain TCP */
	bool handshaking;		/* the TLS handshake is not done yet */
	bool want_write;		/* it waits for the socket to take data */
	bool ktls_tx, ktls_rx;		/* the kernel does the records */
	int rx_errno;			/* receiving failed after data it returned
					 * (-1: the peer closed) */
	uint8_t *stage;			/* userspace sending: small pieces joined */
	char err[256];			/* why the last call failed */
};

/*
 * The context of a configuration: *ret NULL for plain-insecure.  Reads the
 * files; refuses a key file others may read, with the reason in err.
 */
int tls_ctx_new(const struct config *c, struct tls_ctx **ret, char *err, size_t len);
void tls_ctx_free(struct tls_ctx *t);

/* A plain connection on fd (tls_io_start() may follow). */
void tls_io_init(struct tls_io *io, int fd);
/*
 * Begin TLS on io (t non-NULL): as the client (server false), whose peer's
 * certificate must name peer_node, or as the server.  The handshake is
 * then driven by tls_io_handshake() on every socket event.
 */
int tls_io_start(struct tls_io *io, struct tls_ctx *t, bool server, const char *peer_node);
/* 1: done; 0: in progress (wait for EPOLLIN, or EPOLLOUT if want_write); -1 failed */
int tls_io_handshake(struct tls_io *io);
/* The session goes (the socket is its owner's). */
void tls_io_free(struct tls_io *io);

ssize_t tls_io_readv(struct tls_io *io, const struct iovec *iov, int iovcnt);
ssize_t tls_io_writev(struct tls_io *io, const struct iovec *iov, int iovcnt);
ssize_t tls_io_write(struct tls_io *io, const void *buf, size_t len);
/* Received bytes TLS holds that the socket no longer shows: read again. */
bool tls_io_pending(const struct tls_io *io);
/* The socket cannot take spliced pages: TLS records are built in userspace. */
static inline bool tls_io_copy_only(const struct tls_io *io)
{
	return io->ssl && !io->ktls_tx;
}
/* Certificates: does the peer's certificate name node?  (PSK, plain: true) */
bool tls_io_names(const struct tls_io *io, const char *node);
/* "TLSv1.3 TLS_AES_128_GCM_SHA256 psk, kTLS send, userspace receive" */
void tls_io_describe(const struct tls_io *io, char *buf, size_t len);
/* The reason of the last failure; errno's text if TLS gave none. */
const char *tls_io_error(const struct tls_io *io, int err);

#endif
