// SPDX-License-Identifier: GPL-2.0-only
/*
 * Fuzz target for the primary's handling of what a secondary sends
 * (daemon/repld/peer.c: peer_read(); primary/primary.c: the frames; handshake.c:
 * its Hello and PeerBitmap; stream.c: Acks, ResyncFlushed, release; and
 * resync.c: HashReply).
 *
 * Input: the bytes a secondary sends.  For every input, a fresh primary
 * role (node alpha of resource r0, plain-insecure, one sync peer beta)
 * against a memory ring holding FUZZ_RECS records, as repl-simprimary runs
 * it, with a kernel stand-in that only records the mode; its device (for
 * resync reads) a file of FUZZ_DEV_SECTORS sectors, an empty state
 * directory.  One end of a socketpair becomes beta's connection
 * (peer_adopt_fd()), the input goes into the other end, one frame per
 * loop iteration (so that an Ack may come after the records it
 * acknowledges were sent), which is then shut down, and the loop runs
 * until the primary closes the connection (or the bounds of
 * fuzz-role.h).  What the primary sends is dropped.
 *
 * With getrandom() constant, the ring's identity and the primary's data
 * generation are both FUZZ_ID: a seed's Hello can resume the stream.
 *
 * Beyond what ASan and UBSan catch, at every loop iteration and at the
 * end: the primary never releases or acknowledges to the "kernel" a
 * record beyond what the ring produced, and never takes either back.
 */
#define FUZZ_ROLE_RUN
#include "config.h"
#include "fuzz-role.h"
#include "primary.h"
#include "ring.h"

static struct {
	struct fuzz_files files;
	bool sync;
} fz;

static int kernel_set_mode(void *ctx, bool sync)
{
	fz.sync = sync;
	return 0;
}

static int kernel_set_hold(void *ctx, unsigned int ms)
{
	return 0;
}

static const struct manager_kernel_ops kernel_ops = {
	.set_mode = kernel_set_mode,
	.set_hold_timeout = kernel_set_hold,
};

static void setup(void)
{
	fuzz_files_make(&fz.files, "fuzz-primary", "alpha");
	/* beta's address: the role's own connect() is refused, then replaced */
	fuzz_files_config(&fz.files, "resource = \"%s\";\nnode = \"%s\";\nrole = \"primary\";\n"
		"device = \"%s\";\nstate-dir = \"%s\";\n"
		"control-socket = \"%s/ctl.sock\";\ntransport = \"plain-insecure\";\n"
		"reconnect-min-ms = 60000;\nreconnect-max-ms = 60000;\n"
		"peers = ( { name = \"%s\"; address = \"127.0.0.1:1\"; mode = \"sync\"; } );\n",
		FUZZ_RESOURCE, FUZZ_PRIMARY, fz.files.dev, fz.files.state, fz.files.dir, FUZZ_SECONDARY);
}

/* FUZZ_RECS records: writes, a flush, a discard, a FUA write. */
static struct ring *new_ring(void)
{
	static uint8_t payload[4096] __attribute__((aligned(4096)));
	struct ring *ring;
	uint64_t seq;
	uint32_t i;

	ASSERT(ring_mem_new(64, 1 << 20, FUZZ_DEV_SECTORS, &ring) == 0);
	for (i = 0; i < FUZZ_RECS; i++) {
		uint16_t op = i == 5 ? DM_REPL_OP_FLUSH : i == 6 ? DM_REPL_OP_DISCARD :
			      DM_REPL_OP_WRITE;
		uint16_t flags = i == 7 ? DM_REPL_F_FUA : 0;
		uint64_t sector = (uint64_t)i * 8 % FUZZ_DEV_SECTORS;

		memset(payload, 'a' + (int)i, sizeof(payload));
		if (op == DM_REPL_OP_FLUSH)
			ASSERT(ring_mem_produce(ring, op, 0, 0, 0, NULL, 0, &seq) == 0);
		else if (op == DM_REPL_OP_DISCARD)
			ASSERT(ring_mem_produce(ring, op, 0, sector, 8, NULL, 0, &seq) == 0);
		else
			ASSERT(ring_mem_produce(ring, op, flags, sector, 8, payload,
						sizeof(payload), &seq) == 0);
		ASSERT(seq == i);
	}
	return ring;
}

static struct primary *primary_of_role(struct role *r)
{
	return container_of(r, struct primary, role);
}

static uint64_t last_release, last_ack;

/* Nothing released or acknowledged beyond what the ring holds, nor taken back. */
static void check_ring(struct role *r)
{
	struct ring_info ri;

	ring_get_info(primary_of_role(r)->ring, &ri);
	ASSERT(ri.prod_seq == FUZZ_RECS);
	ASSERT(ri.release_seq <= ri.prod_seq);
	ASSERT(ri.ack_seq <= ri.prod_seq);
	ASSERT(ri.release_seq >= last_release);
	ASSERT(ri.ack_seq >= last_ack);
	last_release = ri.release_seq;
	last_ack = ri.ack_seq;
}

static void on_iter(struct fuzz_feed *f)
{
	check_ring(f->role);
}

/* The input is all in the socket: what a tick does (pull-ahead, in-sync checks). */
static void on_shut(struct fuzz_feed *f)
{
	f->role->ops->tick(f->role, loop_now_ms());
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct role_env env = { 0 };
	struct fuzz_feed f = { .on_shut = on_shut, .on_iter = on_iter, .by_frame = true };
	struct role_args args = { .kops = &kernel_ops };
	struct primary *pri;
	struct role *r = NULL;
	int sv[2];

	if (!fz.files.cfg)
		setup();
	fuzz_clear_dir(fz.files.state, false);
	last_release = last_ack = 0;
	ASSERT(loop_new(&env.loop) == 0);
	env.cfg = fz.files.cfg;
	args.ring = new_ring();
	if (primary_role_ops.start(&env, &args, &r) < 0) {
		fprintf(stderr, "fuzz-primary: the primary role does not start (FUZZ_LOG=1 says why)\n");
		abort();
	}
	pri = primary_of_role(r);
	ASSERT(pri->nr_replicas == 1);

	ASSERT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) == 0);
	ASSERT(peer_adopt_fd(&pri->replicas[0]->conn, sv[1]) == 0);
	fuzz_feed(&f, env.loop, r, sv[0], data, size);
	check_ring(r);

	primary_role_ops.free(r);
	loop_free(env.loop);
	return 0;
}
