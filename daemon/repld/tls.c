// SPDX-License-Identifier: GPL-2.0-only
/* TLS 1.3 on the replication links: see tls.h. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "tls.h"

/* Userspace sending: pieces smaller than a record are joined first. */
#define TLS_STAGE	(16U << 10)
#define TLS_PSK_MIN	32U		/* bytes of key at least (256 bits) */
#define TLS_PSK_MAX	64U

struct tls_ctx {
	SSL_CTX *ctx;
	enum transport mode;
	SSL_SESSION *psk;		/* the pre-shared key, as a session */
	char identity[CONFIG_NAME_MAX + 16];	/* "dm-repl:<resource>" */
};

/* The first error OpenSSL queued, as text. */
static void tls_ossl_error(char *buf, size_t len)
{
	unsigned long e = ERR_peek_last_error();
	const char *why = e ? ERR_reason_error_string(e) : NULL;

	snprintf(buf, len, "%s", why ? why : "unknown TLS error");
	ERR_clear_error();
}

/*
 * A secret (the private key, the PSK) must be readable by its owner only,
 * and that owner root or the user repld runs as.
 */
static int tls_check_secret(const char *what, const char *path, char *err, size_t len)
{
	struct stat st;

	if (stat(path, &st) < 0) {
		int r = -errno;

		snprintf(err, len, "%s %s: %s", what, path, strerror(errno));
		return r;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(err, len, "%s %s: not a regular file", what, path);
		return -EINVAL;
	}
	if (st.st_mode & 077) {
		snprintf(err, len, "%s %s: mode %04o lets other users read the secret; refusing it (chmod 600 %s)",
			 what, path, (unsigned int)(st.st_mode & 07777), path);
		return -EPERM;
	}
	if (st.st_uid != 0 && st.st_uid != geteuid()) {
		snprintf(err, len, "%s %s: owned by uid %u, neither root nor the user repld runs as; refusing it",
			 what, path, (unsigned int)st.st_uid);
		return -EPERM;
	}
	return 0;
}

/* The key of tls-psk-file: hex digits (openssl rand -hex 32), whitespace around. */
static int tls_read_psk(const char *path, unsigned char *key, size_t *keylen, char *err,
			size_t len)
{
	char text[4 * TLS_PSK_MAX + 2];
	unsigned char *bin;
	long n = 0;
	ssize_t k;
	size_t a, b;
	int fd, r;

	r = tls_check_secret("tls-psk-file", path, err, len);
	if (r < 0)
		return r;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		r = -errno;
		snprintf(err, len, "tls-psk-file %s: %s", path, strerror(errno));
		return r;
	}
	k = read(fd, text, sizeof(text) - 1);
	close(fd);
	if (k < 0) {
		snprintf(err, len, "tls-psk-file %s: %s", path, strerror(errno));
		return -EIO;
	}
	if ((size_t)k == sizeof(text) - 1) {
		OPENSSL_cleanse(text, sizeof(text));
		snprintf(err, len, "tls-psk-file %s: longer than a key of %u bytes in hex", path,
			 TLS_PSK_MAX);
		return -EINVAL;
	}
	text[k] = '\0';
	for (a = 0; text[a] == ' ' || text[a] == '\t' || text[a] == '\n' || text[a] == '\r'; a++)
		;
	for (b = (size_t)k; b > a && strchr(" \t\r\n", text[b - 1]); b--)
		;
	text[b] = '\0';
	bin = b > a ? OPENSSL_hexstr2buf(text + a, &n) : NULL;
	ERR_clear_error();
	if (!bin || n < (long)TLS_PSK_MIN || n > (long)TLS_PSK_MAX) {
		OPENSSL_clear_free(bin, bin ? (size_t)n : 0);
		OPENSSL_cleanse(text, sizeof(text));
		snprintf(err, len, "tls-psk-file %s: expected %u to %u bytes as hex digits (e.g. made with: openssl rand -hex 32)",
			 path, TLS_PSK_MIN, TLS_PSK_MAX);
		return -EINVAL;
	}
	memcpy(key, bin, (size_t)n);
	*keylen = (size_t)n;
	OPENSSL_clear_free(bin, (size_t)n);
	OPENSSL_cleanse(text, sizeof(text));
	return 0;
}

static struct tls_ctx *tls_ctx_of(SSL *ssl)
{
	return SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl));
}

/*
 * The key as a session for one handshake, made now.  OpenSSL gives every
 * session a lifetime (304 s from its time) and checks it at each use, and
 * a client takes the session it offered for its connection's own: the one
 * session of the context, handed to every handshake, stopped working 5
 * minutes after repld started.  NULL when out of memory.
 */
static SSL_SESSION *tls_psk_session(const struct tls_ctx *t)
{
	SSL_SESSION *s = SSL_SESSION_dup(t->psk);

	if (s && !SSL_SESSION_set_time(s, (long)time(NULL))) {
		SSL_SESSION_free(s);
		s = NULL;
	}
	return s;
}

/* Client: offer the resource's PSK under the resource's identity. */
static int tls_psk_use(SSL *ssl, const EVP_MD *md, const unsigned char **id, size_t *idlen,
		       SSL_SESSION **sess)
{
	struct tls_ctx *t = tls_ctx_of(ssl);
	const SSL_CIPHER *c = SSL_SESSION_get0_cipher(t->psk);

	if (md && EVP_MD_get_type(md) != EVP_MD_get_type(SSL_CIPHER_get_handshake_digest(c))) {
		*sess = NULL;
		return 1;
	}
	*sess = tls_psk_session(t);
	if (!*sess)
		return 0;
	*id = (const unsigned char *)t->identity;
	*idlen = strlen(t->identity);
	return 1;
}

/* Server: only this resource's identity; the binder then proves the key. */
static int tls_psk_find(SSL *ssl, const unsigned char *id, size_t idlen, SSL_SESSION **sess)
{
	struct tls_ctx *t = tls_ctx_of(ssl);
	struct tls_io *io = SSL_get_app_data(ssl);

	*sess = NULL;
	if (idlen != strlen(t->identity) || memcmp(id, t->identity, idlen)) {
		char shown[CONFIG_NAME_MAX + 16];
		size_t i, n = idlen < sizeof(shown) - 1 ? idlen : sizeof(shown) - 1;

		for (i = 0; i < n; i++)
			shown[i] = id[i] >= 0x20 && id[i] < 0x7f ? (char)id[i] : '?';
		shown[n] = '\0';
		if (io)
			snprintf(io->err, sizeof(io->err),
				 "PSK identity \"%s\" is not this resource's (\"%s\"): a peer of another resource, or another key",
				 shown, t->identity);
		return 1;
	}
	*sess = tls_psk_session(t);
	return *sess ? 1 : 0;
}

/*
 * OpenSSL skips the names it does not know as long as one is known: each
 * configured name must be among the context's suites, or a typo would
 * quietly change what is offered.  Writes a message only on failure.
 */
static int tls_check_suites(SSL_CTX *ctx, const char *list, char *err, size_t len)
{
	STACK_OF(SSL_CIPHER) *sk = SSL_CTX_get_ciphers(ctx);
	const char *p = list;

	while (*p) {
		size_t n = strcspn(p, ":");
		bool found = false;
		int i;

		for (i = 0; i < sk_SSL_CIPHER_num(sk) && !found; i++) {
			const char *name = SSL_CIPHER_get_name(sk_SSL_CIPHER_value(sk, i));

			found = strlen(name) == n && !memcmp(name, p, n);
		}
		if (n && !found) {
			snprintf(err, len, "tls-ciphersuites: %.*s is not a TLS 1.3 suite OpenSSL knows",
				 (int)n, p);
			return -EINVAL;
		}
		p += n + (p[n] == ':');
	}
	return 0;
}

/*
 * A TLS 1.3 PSK is bound to a hash: the session carries the first
 * configured suite that hashes with SHA-256, which both nodes then offer.
 */
static const SSL_CIPHER *tls_psk_cipher(SSL_CTX *ctx)
{
	STACK_OF(SSL_CIPHER) *sk = SSL_CTX_get_ciphers(ctx);
	int i;

	for (i = 0; i < sk_SSL_CIPHER_num(sk); i++) {
		const SSL_CIPHER *c = sk_SSL_CIPHER_value(sk, i);

		/* TLS 1.3 suites are 0x13XX */
		if ((SSL_CIPHER_get_protocol_id(c) >> 8) == 0x13 &&
		    EVP_MD_get_type(SSL_CIPHER_get_handshake_digest(c)) == NID_sha256)
			return c;
	}
	return NULL;
}

static int tls_ctx_psk(struct tls_ctx *t, const struct config *c, char *err, size_t len)
{
	unsigned char key[TLS_PSK_MAX];
	const SSL_CIPHER *cipher = tls_psk_cipher(t->ctx);
	size_t keylen = 0;
	int r;

	if (!cipher) {
		snprintf(err, len,
			 "tls-ciphersuites \"%s\": a pre-shared key needs a SHA-256 suite (TLS_AES_128_GCM_SHA256 or TLS_CHACHA20_POLY1305_SHA256)",
			 c->tls_ciphersuites);
		return -EINVAL;
	}
	r = tls_read_psk(c->tls_psk_file, key, &keylen, err, len);
	if (r < 0)
		return r;
	t->psk = SSL_SESSION_new();
	if (!t->psk || !SSL_SESSION_set1_master_key(t->psk, key, keylen) ||
	    !SSL_SESSION_set_cipher(t->psk, cipher) ||
	    !SSL_SESSION_set_protocol_version(t->psk, TLS1_3_VERSION)) {
		OPENSSL_cleanse(key, sizeof(key));
		tls_ossl_error(err, len);
		return -EINVAL;
	}
	OPENSSL_cleanse(key, sizeof(key));
	snprintf(t->identity, sizeof(t->identity), "dm-repl:%s", c->resource);
	SSL_CTX_set_psk_use_session_callback(t->ctx, tls_psk_use);
	SSL_CTX_set_psk_find_session_callback(t->ctx, tls_psk_find);
	SSL_CTX_set_verify(t->ctx, SSL_VERIFY_NONE, NULL);
	return 0;
}

static int tls_ctx_certs(struct tls_ctx *t, const struct config *c, char *err, size_t len)
{
	char why[200];
	int r;

	r = tls_check_secret("tls-key", c->tls_key, err, len);
	if (r < 0)
		return r;
	if (SSL_CTX_load_verify_locations(t->ctx, c->tls_ca, NULL) != 1) {
		tls_ossl_error(why, sizeof(why));
		snprintf(err, len, "tls-ca %s: %s", c->tls_ca, why);
		return -EINVAL;
	}
	if (SSL_CTX_use_certificate_chain_file(t->ctx, c->tls_cert) != 1) {
		tls_ossl_error(why, sizeof(why));
		snprintf(err, len, "tls-cert %s: %s", c->tls_cert, why);
		return -EINVAL;
	}
	if (SSL_CTX_use_PrivateKey_file(t->ctx, c->tls_key, SSL_FILETYPE_PEM) != 1) {
		tls_ossl_error(why, sizeof(why));
		snprintf(err, len, "tls-key %s: %s", c->tls_key, why);
		return -EINVAL;
	}
	if (SSL_CTX_check_private_key(t->ctx) != 1) {
		tls_ossl_error(why, sizeof(why));
		snprintf(err, len, "tls-key %s does not belong to tls-cert %s: %s", c->tls_key,
			 c->tls_cert, why);
		return -EINVAL;
	}
	SSL_CTX_set_verify(t->ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
	return 0;
}

void tls_ctx_free(struct tls_ctx *t)
{
	if (!t)
		return;
	SSL_SESSION_free(t->psk);
	SSL_CTX_free(t->ctx);
	free(t);
}

int tls_ctx_new(const struct config *c, struct tls_ctx **ret, char *err, size_t len)
{
	struct tls_ctx *t;
	int r;

	*ret = NULL;
	if (c->transport == TRANSPORT_PLAIN)
		return 0;
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->mode = c->transport;
	t->ctx = SSL_CTX_new(TLS_method());
	if (!t->ctx || !SSL_CTX_set_min_proto_version(t->ctx, TLS1_3_VERSION)) {
		tls_ossl_error(err, len);
		tls_ctx_free(t);
		return -ENOMEM;
	}
	/* a list of unknown names fails, known ones beside them are taken */
	r = SSL_CTX_set_ciphersuites(t->ctx, c->tls_ciphersuites) ? 0 : -EINVAL;
	if (!r)
		r = tls_check_suites(t->ctx, c->tls_ciphersuites, err, len);
	else if (!tls_check_suites(t->ctx, c->tls_ciphersuites, err, len))
		snprintf(err, len, "tls-ciphersuites \"%s\": not TLS 1.3 suites",
			 c->tls_ciphersuites);
	if (r < 0) {
		tls_ctx_free(t);
		return r;
	}
	/*
	 * kTLS where the kernel has it; no tickets and no session cache:
	 * each connection authenticates in full, and nothing but application
	 * data follows the handshake.
	 */
	SSL_CTX_set_options(t->ctx, (c->tls_ktls ? SSL_OP_ENABLE_KTLS : 0) |
			    SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_NO_TICKET);
	SSL_CTX_set_num_tickets(t->ctx, 0);
	SSL_CTX_set_session_cache_mode(t->ctx, SSL_SESS_CACHE_OFF);
	SSL_CTX_set_mode(t->ctx, SSL_MODE_ENABLE_PARTIAL_WRITE |
			 SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	SSL_CTX_set_app_data(t->ctx, t);
	r = t->mode == TRANSPORT_TLS_PSK ? tls_ctx_psk(t, c, err, len) :
					   tls_ctx_certs(t, c, err, len);
	if (r < 0) {
		tls_ctx_free(t);
		return r;
	}
	*ret = t;
	return 0;
}

void tls_io_init(struct tls_io *io, int fd)
{
	memset(io, 0, sizeof(*io));
	io->fd = fd;
}

int tls_io_start(struct tls_io *io, struct tls_ctx *t, bool server, const char *peer_node)
{
	io->err[0] = '\0';
	io->ssl = SSL_new(t->ctx);
	if (!io->ssl || SSL_set_fd(io->ssl, io->fd) != 1) {
		tls_ossl_error(io->err, sizeof(io->err));
		SSL_free(io->ssl);
		io->ssl = NULL;
		return -ENOMEM;
	}
	SSL_set_app_data(io->ssl, io);
	if (server) {
		SSL_set_accept_state(io->ssl);
	} else {
		SSL_set_connect_state(io->ssl);
		if (t->mode == TRANSPORT_TLS_CERT) {
			SSL_set_hostflags(io->ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
			if (SSL_set1_host(io->ssl, peer_node) != 1) {
				tls_ossl_error(io->err, sizeof(io->err));
				return -EINVAL;
			}
		}
	}
	io->handshaking = true;
	return 0;
}

/*
 * A TLS call returned r: errno and the return value of a system call.
 * The reason of a failure goes to io->err (a callback may have put a
 * better one there already).
 */
static ssize_t tls_io_fail(struct tls_io *io, int r, const char *what)
{
	int e = SSL_get_error(io->ssl, r);
	long v;

	switch (e) {
	case SSL_ERROR_WANT_READ:
	case SSL_ERROR_WANT_WRITE:
		io->want_write = e == SSL_ERROR_WANT_WRITE;
		errno = EAGAIN;
		return -1;
	case SSL_ERROR_ZERO_RETURN:
		errno = EPIPE;
		return 0;
	case SSL_ERROR_SYSCALL:
		if (!errno)
			errno = ECONNRESET;
		ERR_clear_error();
		return -1;
	default:
		break;
	}
	if (!io->err[0]) {
		char why[200];

		/* a certificate that failed verification during the handshake */
		v = io->handshaking && tls_ctx_of(io->ssl)->mode == TRANSPORT_TLS_CERT ?
		    SSL_get_verify_result(io->ssl) : X509_V_OK;
		if (v != X509_V_OK)
			snprintf(why, sizeof(why), "certificate refused: %s",
				 X509_verify_cert_error_string(v));
		else
			tls_ossl_error(why, sizeof(why));
		snprintf(io->err, sizeof(io->err), "TLS %s: %s%s", what, why,
			 strstr(why, "binder does not verify") ?
			 ": the primary has another pre-shared key" : "");
	}
	ERR_clear_error();
	errno = EPROTO;
	return -1;
}

int tls_io_handshake(struct tls_io *io)
{
	int r;

	ERR_clear_error();
	errno = 0;
	r = SSL_do_handshake(io->ssl);
	if (r == 1) {
		io->handshaking = false;
		io->want_write = false;
		io->ktls_tx = BIO_get_ktls_send(SSL_get_wbio(io->ssl));
		io->ktls_rx = BIO_get_ktls_recv(SSL_get_rbio(io->ssl));
		if (!io->ktls_tx && !io->stage) {
			io->stage = malloc(TLS_STAGE);
			if (!io->stage) {
				snprintf(io->err, sizeof(io->err), "out of memory");
				errno = ENOMEM;
				return -1;
			}
		}
		return 1;
	}
	if (tls_io_fail(io, r, "handshake") < 0 && errno == EAGAIN)
		return 0;
	if (!io->err[0])
		snprintf(io->err, sizeof(io->err), "TLS handshake: %s",
			 errno == EPIPE ? "the peer closed the connection" : strerror(errno));
	return -1;
}

void tls_io_free(struct tls_io *io)
{
	SSL_free(io->ssl);
	io->ssl = NULL;
	free(io->stage);
	io->stage = NULL;
	io->handshaking = io->want_write = io->ktls_tx = io->ktls_rx = false;
	io->rx_errno = 0;
}

ssize_t tls_io_readv(struct tls_io *io, const struct iovec *iov, int iovcnt)
{
	size_t total = 0;

	if (!io->ssl || io->ktls_rx)
		return readv(io->fd, iov, iovcnt);
	if (io->rx_errno) {
		/* the end behind the last bytes: OpenSSL would not say it twice */
		errno = io->rx_errno > 0 ? io->rx_errno : 0;
		return io->rx_errno > 0 ? -1 : 0;
	}
	for (int i = 0; i < iovcnt; i++) {
		size_t off = 0;

		while (off < iov[i].iov_len) {
			size_t want = iov[i].iov_len - off;
			int r;

			ERR_clear_error();
			errno = 0;
			r = SSL_read(io->ssl, (uint8_t *)iov[i].iov_base + off,
				     want > INT_MAX ? INT_MAX : (int)want);
			if (r > 0) {
				off += (size_t)r;
				continue;
			}
			if (!total && !off)
				return tls_io_fail(io, r, "receive");
			if (tls_io_fail(io, r, "receive") == 0)
				io->rx_errno = -1;	/* the peer closed */
			else if (errno != EAGAIN)
				io->rx_errno = errno;
			return (ssize_t)(total + off);
		}
		total += off;
	}
	return (ssize_t)total;
}

ssize_t tls_io_writev(struct tls_io *io, const struct iovec *iov, int iovcnt)
{
	const void *buf;
	size_t len = 0;
	int r;

	if (!io->ssl || io->ktls_tx)
		return writev(io->fd, iov, iovcnt);
	/*
	 * After EAGAIN the caller offers the same bytes again, at least as
	 * many, as SSL_write() wants: it has one record of them in hand.
	 */
	if (iovcnt > 0 && iov[0].iov_len >= TLS_STAGE) {
		buf = iov[0].iov_base;
		len = iov[0].iov_len;
	} else {
		for (int i = 0; i < iovcnt && len < TLS_STAGE; i++) {
			size_t k = iov[i].iov_len < TLS_STAGE - len ? iov[i].iov_len :
								      TLS_STAGE - len;

			memcpy(io->stage + len, iov[i].iov_base, k);
			len += k;
		}
		buf = io->stage;
	}
	if (!len)
		return 0;
	ERR_clear_error();
	errno = 0;
	r = SSL_write(io->ssl, buf, len > INT_MAX ? INT_MAX : (int)len);
	if (r > 0)
		return r;
	r = (int)tls_io_fail(io, r, "send");
	if (r == 0) {
		errno = EPIPE;
		r = -1;
	}
	return r;
}

ssize_t tls_io_write(struct tls_io *io, const void *buf, size_t len)
{
	struct iovec iov = { (void *)buf, len };

	return tls_io_writev(io, &iov, 1);
}

bool tls_io_pending(const struct tls_io *io)
{
	return io->ssl && !io->handshaking && !io->ktls_rx && SSL_pending(io->ssl) > 0;
}

bool tls_io_names(const struct tls_io *io, const char *node)
{
	X509 *x;

	if (!io->ssl || tls_ctx_of(io->ssl)->mode != TRANSPORT_TLS_CERT)
		return true;
	x = SSL_get0_peer_certificate(io->ssl);
	return x && X509_check_host(x, node, 0, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS, NULL) == 1;
}

void tls_io_describe(const struct tls_io *io, char *buf, size_t len)
{
	if (!io->ssl) {
		snprintf(buf, len, "plain-insecure");
		return;
	}
	if (io->handshaking) {
		snprintf(buf, len, "TLS handshake");
		return;
	}
	snprintf(buf, len, "%s %s %s, %s send, %s receive", SSL_get_version(io->ssl),
		 SSL_CIPHER_get_name(SSL_get_current_cipher(io->ssl)),
		 tls_ctx_of(io->ssl)->mode == TRANSPORT_TLS_PSK ? "psk" : "certificate",
		 io->ktls_tx ? "kTLS" : "userspace", io->ktls_rx ? "kTLS" : "userspace");
}

const char *tls_io_error(const struct tls_io *io, int err)
{
	if (err == EPROTO && io->err[0])
		return io->err;
	return strerror(err);
}
