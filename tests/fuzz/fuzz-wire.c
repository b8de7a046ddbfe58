// SPDX-License-Identifier: GPL-2.0-only
/*
 * Fuzz target for the wire decoder (daemon/wire.c).
 *
 * Input: one control byte, then the bytes a peer sends.  The stream goes
 * through a socketpair twice:
 *   A. whole, into a reader in buffer mode;
 *   B. in chunks whose sizes come from the control byte, into a reader in
 *      callback mode whose payload_buf refuses now and then (-ENOBUFS).
 * Both must agree exactly: the same messages, the same payloads, the same
 * final result and reason.  Every message a reader hands out must pass
 * wire_frame_check() and re-encode with wire_encode().
 *
 * Built with -fsanitize=fuzzer for libFuzzer, or with replay.c into a plain
 * program that runs the seed corpus (every compiler).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fuzz.h"
#include "wire.h"

struct run {
	/* how to feed */
	bool callback;
	uint32_t rng;
	unsigned int max_chunk;	/* 0: as much as the socket takes */
	unsigned int refuse_mask;
	/* what came out */
	uint64_t digest;
	unsigned long n_msgs;
	int rc;
	char reason[160];
	uint8_t *pbuf;
	uint32_t refuse_seq_count;
	struct wire_reader rd;	/* kept across inputs, reset for each */
};

static uint32_t xorshift(uint32_t *s)
{
	uint32_t x = *s ? *s : 0x9e3779b9U;

	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	return *s = x;
}

static void digest(uint64_t *h, const void *p, size_t len)
{
	const uint8_t *b = p;
	size_t i;

	for (i = 0; i < len; i++)
		*h = (*h ^ b[i]) * 0x100000001b3ULL;
	*h = (*h ^ len) * 0x100000001b3ULL;
}

static void *payload_cb(void *ctx, const Dmrepl__V1__Data *d)
{
	struct run *r = ctx;

	ASSERT(d->op == DM_REPL_OP_WRITE || d->op == WIRE_OP_RESYNC);
	ASSERT(d->payload_len > 0 && d->payload_len <= WIRE_MAX_PAYLOAD);
	/* the decoder's contract: raw, the whole extent; zstd, smaller than it */
	if (d->encoding == DMREPL__V1__ENCODING__ENCODING_ZSTD)
		ASSERT(d->payload_len < d->nr_sectors * 512U);
	else
		ASSERT(d->payload_len == d->nr_sectors * 512U);
	/* refuse up to three times in a row, as the control byte says */
	if (r->refuse_mask && r->refuse_seq_count < 3 &&
	    (xorshift(&r->rng) & r->refuse_mask) == 0) {
		r->refuse_seq_count++;
		return NULL;
	}
	r->refuse_seq_count = 0;
	memset(r->pbuf, 0xa5, d->payload_len);
	return r->pbuf;
}

static void on_msg(struct run *r, const struct wire_msg *m)
{
	static uint8_t enc[WIRE_MAX_MSG];
	ssize_t n;

	ASSERT(m->frame && m->type == m->frame->msg_case);
	ASSERT(wire_frame_check(m->frame, NULL, 0) == 0);
	n = wire_encode(m->frame, enc, sizeof(enc));
	ASSERT(n > (ssize_t)WIRE_HDR_SIZE);
	digest(&r->digest, enc, (size_t)n);
	if (m->type == DMREPL__V1__FRAME__MSG_DATA &&
	    m->frame->data->payload_len) {
		ASSERT(m->payload && m->payload_len ==
		       m->frame->data->payload_len);
		if (r->callback)
			ASSERT(m->payload == r->pbuf);
		digest(&r->digest, m->payload, m->payload_len);
	} else {
		ASSERT(!m->payload && !m->payload_len);
	}
	r->n_msgs++;
}

static void feed(struct run *r, const uint8_t *data, size_t size)
{
	struct wire_reader *rd = &r->rd;
	struct wire_msg msg;
	size_t off = 0, before;
	bool closed = false;
	int sv[2], f, rc = 0;

	ASSERT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) == 0);
	wire_reader_reset(rd);

	for (;;) {
		if (off < size) {
			size_t want = size - off;
			ssize_t n;

			if (r->max_chunk && want > r->max_chunk)
				want = 1 + xorshift(&r->rng) % r->max_chunk;
			n = write(sv[0], data + off, want);
			ASSERT(n > 0 || errno == EAGAIN);
			if (n > 0)
				off += (size_t)n;
		} else if (!closed) {
			close(sv[0]);
			closed = true;
		}

		for (;;) {
			f = wire_reader_fill(rd, sv[1]);
			ASSERT(f >= 0 || f == -EAGAIN || f == -ENOBUFS);
			before = wire_reader_pending(rd);
			while ((rc = wire_reader_next(rd, &msg)) == 1)
				on_msg(r, &msg);
			if (rc == -ENOBUFS) {
				if (f == -EAGAIN)
					break;
				continue;
			}
			if (rc < 0)
				goto out;
			ASSERT(rc == 0);
			ASSERT(f != -ENOBUFS || wire_reader_pending(rd) < before);
			if (f == 0)
				goto out;
			if (f == -EAGAIN)
				break;
		}
	}
out:
	r->rc = rc;
	snprintf(r->reason, sizeof(r->reason), "%s", wire_reader_error(rd));
	if (rc < 0) {
		ASSERT(r->reason[0]);
		ASSERT(rc == -EPROTO || rc == -EMSGSIZE);
		ASSERT(wire_reader_next(rd, &msg) == rc);	/* sticky */
	}
	if (!closed)
		close(sv[0]);
	close(sv[1]);
}

/*
 * The readers live as long as the process: a reader in buffer mode holds
 * more than 1 MiB, and allocating that for every input (with ASan's
 * mmap-backed large allocations) made the fuzzer ten times slower.
 */
static struct run ra, rb;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const unsigned int chunks[8] = { 1, 3, 7, 64, 500, 4100, 70000, 0 };
	static uint8_t *pbuf;
	uint8_t ctl;

	if (size < 1)
		return 0;
	ctl = data[0];
	data++;
	size--;

	if (!pbuf) {
		pbuf = aligned_alloc(4096, WIRE_MAX_PAYLOAD);
		ASSERT(pbuf);
		ra.pbuf = rb.pbuf = pbuf;
		rb.callback = true;
		ASSERT(wire_reader_init(&ra.rd, NULL, &ra) == 0);
		ASSERT(wire_reader_init(&rb.rd, payload_cb, &rb) == 0);
	}

	ra.digest = rb.digest = 0;
	ra.n_msgs = rb.n_msgs = 0;
	feed(&ra, data, size);

	rb.rng = 0x12345u + ctl;
	rb.refuse_seq_count = 0;
	rb.max_chunk = chunks[ctl & 7];
	/* at most ~64 writes per input: boundaries still fall anywhere */
	if (rb.max_chunk && rb.max_chunk < size / 32)
		rb.max_chunk = (unsigned int)(size / 32);
	rb.refuse_mask = (ctl >> 3) & 3;	/* 0: never, else 1/2 or 1/4 */
	feed(&rb, data, size);

	if (ra.rc != rb.rc || ra.n_msgs != rb.n_msgs || ra.digest != rb.digest ||
	    strcmp(ra.reason, rb.reason)) {
		fprintf(stderr, "buffer mode: %d \"%s\", %lu messages\n"
			"callback mode: %d \"%s\", %lu messages\n",
			ra.rc, ra.reason, ra.n_msgs, rb.rc, rb.reason, rb.n_msgs);
		abort();
	}
	return 0;
}
