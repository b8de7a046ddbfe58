// SPDX-License-Identifier: GPL-2.0-only
/*
 * repl-simprimary: repld's primary role against a userspace stand-in for
 * the kernel, so the daemon can be tested on any host.
 *
 *   repl-simprimary -c <primary.conf> --dev <file> --seed S --count N
 *       [--max-kb K] [--region-mb R] [--flush-every M] [--fua-every M]
 *       [--discard-every M] [--ring-records N] [--check PEER=FILE]...
 *       [--rate-ms M] [--hold-ms M] [--gap-at I [--unlogged N]] [--finish-ms M]
 *       [--bs-kb K] [--qd N] [--bench]
 *
 * It runs repld's manager in this process with a memory ring
 * (libreplring's producer side, the same layout and rules as the kernel),
 * and a producer thread that plays the repl target: operation i (a write
 * of pseudo-random extent and content, a flush, a FUA write, a discard) is
 * applied to <file> (the "primary's device") and logged into the ring.
 * Like the target, when the manager put it in sync mode, the producer
 * waits for each record's acknowledgment (up to --hold-ms, then it counts
 * a hold timeout in the ring's header, reports the state degraded there
 * and goes on without waiting until the acknowledgments have caught up).
 * With --check PEER=FILE, at the moment a record is acknowledged the
 * producer reads FILE (that sync peer's device) and checks the write is
 * there: a sync acknowledgment must never precede the peer's write.
 *
 * --unlogged N: the N operations before the GAP are applied to <file> but
 * not logged, and their regions are marked dirty, as the target does while
 * its ring is full (a resync must bring them to the peers).  When all is
 * logged the finisher also waits until the dirty bitmap is empty again.
 *
 * --gap-at I logs a GAP record before operation I (1-based), as the
 * target does after an overflow.
 *
 * For the benchmarks: --bs-kb K makes every write K KiB; --qd N (without
 * --check) lets up to N sync writes wait for their acknowledgment at once,
 * as N bios in flight do in the target.  The summary then says how many
 * writes per second were acknowledged.  --bench keeps the producer's own
 * work out of that rate: every write's payload is generated once, and
 * the local write is left out (the target's runs beside the ring, not
 * before it); the primary's file then does not hold what was written.
 *
 * When all operations are logged, it waits until every peer acknowledged
 * everything (or 60 s), stops the manager, prints a summary and exits
 * 0 (clean), 1 (a check failed), 2 (setup error).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <json-c/json.h>

#include "config.h"
#include "log.h"
#include "manager.h"
#include "ring.h"
#include "seqgen.h"

#define BLOCK 4096U
#define MAX_CHECKS 8

struct check {
	char peer[CONFIG_NAME_MAX + 1];
	int fd;
};

struct sim {
	struct ring *ring;
	int dev_fd;
	uint64_t seed, count, max_kb, region, flush_every, fua_every, discard_every;
	uint64_t gap_at;		/* log a GAP before operation gap_at - 1 */
	uint64_t unlogged;		/* ... and do not log the unlogged before it */
	unsigned int rate_ms, hold_ms;
	unsigned int finish_ms;		/* wait for the peers after the last op */
	unsigned int compressible;	/* percent of each 4 KiB block that is text */
	unsigned int linger_ms;		/* in sync: stay this long (status readable) */
	uint64_t *lat_us;		/* each sync wait's latency, acked_waits of them */
	uint64_t bs_kb;			/* --bs-kb: every write this size; 0: random */
	bool bench;			/* --bench: one payload, no local write */
	uint64_t qd;			/* --qd: sync writes waiting at once */
	uint64_t *t_log;		/* ... when each of them was logged, in us */
	uint64_t lat_next;		/* the next record whose latency is noted */
	uint64_t t_first, t_end;	/* the first write logged, the last acknowledged (us) */
	struct check checks[MAX_CHECKS];
	unsigned int nr_checks;
	atomic_bool sync;		/* the "target's" mode, set by the manager */
	pthread_mutex_t state_lock;	/* the ring's state word: both threads set it */
	uint32_t state;			/* ... DM_REPL_STATE_* */
	atomic_uint mode_changes;
	atomic_bool done;
	atomic_bool stopped;		/* the manager returned */
	atomic_bool failed;
	uint64_t hold_timeouts, acked_waits, checked;
	uint64_t space_timeouts;	/* ring full for longer than hold-ms */
	uint64_t last_seq;
	char sock[PATH_MAX];		/* repld's control socket */
	/* like the target: after a hold timeout, stop waiting until the
	 * acknowledgments have caught up with where we stopped */
	bool degraded;
	uint64_t degraded_seq;
};

/* The state the target reports in the ring header: set bits, then clear bits. */
static int sim_state(struct sim *s, uint32_t set, uint32_t clear)
{
	int r = 0;

	pthread_mutex_lock(&s->state_lock);
	if (((s->state | set) & ~clear) != s->state) {
		s->state = (s->state | set) & ~clear;
		r = ring_mem_set_state(s->ring, s->state);
	}
	pthread_mutex_unlock(&s->state_lock);
	return r;
}

static int sim_set_mode(void *ctx, bool sync)
{
	struct sim *s = ctx;

	atomic_store(&s->sync, sync);
	atomic_fetch_add(&s->mode_changes, 1);
	/* like the target: async is neither sync nor degraded */
	return sync ? sim_state(s, DM_REPL_STATE_SYNC, 0) :
		      sim_state(s, 0, DM_REPL_STATE_SYNC | DM_REPL_STATE_DEGRADED);
}

/* like the target's hold_timeout_ms message; said on stdout for the tests */
static int sim_set_hold(void *ctx, unsigned int ms)
{
	(void)ctx;
	printf("repl-simprimary: hold timeout set to %u ms\n", ms);
	fflush(stdout);
	return 0;
}

static const struct manager_kernel_ops sim_ops = {
	.set_mode = sim_set_mode,
	.set_hold_timeout = sim_set_hold,
};

static bool every(uint64_t m, uint64_t i)
{
	return m && (i + 1) % m == 0;
}

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Produce one record, waiting for ring space like the target does. */
static int sim_log(struct sim *s, uint16_t op, uint16_t flags, uint64_t sector,
		   uint32_t nr, const void *payload, uint32_t len, uint64_t *seq)
{
	uint64_t t0 = 0;
	int r;

	for (;;) {
		r = ring_mem_produce(s->ring, op, flags, sector, nr, payload, len, seq);
		if (r != -EAGAIN)
			return r;
		/* the target would have overflowed by now */
		if (!t0)
			t0 = mono_ms();
		else if (t0 != UINT64_MAX && mono_ms() - t0 > s->hold_ms) {
			s->space_timeouts++;
			t0 = UINT64_MAX;
		}
		if (atomic_load(&s->done))
			return -ECANCELED;	/* the manager is gone */
		r = ring_mem_wait_kick(s->ring, 1000);
		if (r < 0 && r != -EINVAL)
			return r;
	}
}

/* Sync mode: wait for the acknowledgment of seq, then check the sync peers. */
static uint64_t mono_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000ULL + (uint64_t)ts.tv_nsec / 1000U;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* The sync waits' latencies: p50, p99, max in microseconds. */
static void sim_print_latency(struct sim *s)
{
	uint64_t n = s->acked_waits < s->count ? s->acked_waits : s->count;

	if (!s->lat_us || !n)
		return;
	qsort(s->lat_us, n, sizeof(*s->lat_us), cmp_u64);
	printf("repl-simprimary: sync latency p50 %" PRIu64 " us, p99 %" PRIu64 " us, max %" PRIu64
	       " us over %" PRIu64 " writes\n", s->lat_us[n / 2], s->lat_us[n * 99 / 100],
	       s->lat_us[n - 1], n);
}

static void sim_wait_ack(struct sim *s, uint64_t seq, uint64_t off, const void *payload,
			 uint32_t len)
{
	uint64_t deadline = mono_ms() + s->hold_ms, t0 = mono_us();
	unsigned int i;
	void *back;

	if (s->degraded) {
		ring_mem_wait_kick(s->ring, 0);
		if (ring_mem_acked(s->ring) >= s->degraded_seq && seq - ring_mem_acked(s->ring) <= 64) {
			s->degraded = false;
			sim_state(s, 0, DM_REPL_STATE_DEGRADED);
		} else {
			return;
		}
	}
	while (ring_mem_acked(s->ring) <= seq) {
		if (!atomic_load(&s->sync) || atomic_load(&s->done))
			return;
		if (mono_ms() >= deadline) {
			/* it counts among the latencies, as long as it waited */
			if (s->lat_us && s->acked_waits < s->count)
				s->lat_us[s->acked_waits] = mono_us() - t0;
			s->acked_waits++;
			s->hold_timeouts++;
			s->degraded = true;
			s->degraded_seq = seq + 1;
			ring_mem_count_hold_timeout(s->ring);
			sim_state(s, DM_REPL_STATE_DEGRADED, 0);
			return;
		}
		ring_mem_wait_kick(s->ring, 50);
	}
	if (s->lat_us && s->acked_waits < s->count)
		s->lat_us[s->acked_waits] = mono_us() - t0;
	s->acked_waits++;
	if (!payload || !s->nr_checks)
		return;
	if (posix_memalign(&back, BLOCK, len))
		return;
	for (i = 0; i < s->nr_checks; i++) {
		ssize_t n = pread(s->checks[i].fd, back, len, (off_t)off);

		if (n != (ssize_t)len || memcmp(back, payload, len)) {
			fprintf(stderr, "repl-simprimary: FAIL: record %" PRIu64 " acknowledged before peer %s had written it (offset %" PRIu64 ", %u bytes)\n",
				seq, s->checks[i].peer, off, len);
			atomic_store(&s->failed, true);
		}
	}
	s->checked++;
	free(back);
}

/*
 * --qd N: record seq was just logged; wait (as the target holds the bios)
 * until at most N - 1 records wait for their acknowledgment, or with
 * drain until none does, noting the latency of each record acknowledged
 * meanwhile, from when it was logged to when its ack was seen.  A wait
 * longer than the hold timeout is counted, and ends the wait.
 */
static void sim_window(struct sim *s, uint64_t seq, bool drain)
{
	uint64_t deadline = mono_ms() + s->hold_ms, acked, now;

	if (s->lat_next == UINT64_MAX)
		s->lat_next = seq;
	if (!drain)
		s->t_log[seq % s->qd] = mono_us();
	for (;;) {
		acked = ring_mem_acked(s->ring);
		now = mono_us();
		for (; s->lat_next < acked && s->lat_next <= seq; s->lat_next++) {
			if (s->acked_waits < s->count)
				s->lat_us[s->acked_waits] = now - s->t_log[s->lat_next % s->qd];
			s->acked_waits++;
		}
		if (drain ? acked > seq : seq + 1 - acked < s->qd)
			return;
		if (!atomic_load(&s->sync) || atomic_load(&s->done))
			return;
		if (mono_ms() >= deadline) {
			s->hold_timeouts++;
			return;
		}
		ring_mem_wait_kick(s->ring, 50);
	}
}

/*
 * --compressible PCT: the first PCT% of every 4 KiB block of a payload
 * becomes text (write i's number over and over), which zstd shrinks; the
 * rest stays pseudo-random, which it cannot.
 */
static void sim_compressible(const struct sim *s, uint64_t i, uint8_t *buf, uint64_t len)
{
	size_t text = (size_t)s->compressible * 4096 / 100;
	char word[32];
	int n = snprintf(word, sizeof(word), "write %" PRIu64 " ", i);

	for (uint64_t b = 0; b + 4096 <= len && text; b += 4096)
		for (size_t k = 0; k < text; k++)
			buf[b + k] = (uint8_t)word[k % (size_t)n];
}

static void *sim_producer(void *arg)
{
	struct sim *s = arg;
	uint64_t blocks = s->region / BLOCK, i, seq = 0;
	void *buf;

	if (posix_memalign(&buf, BLOCK, s->max_kb * 1024)) {
		atomic_store(&s->failed, true);
		return NULL;
	}
	for (i = 0; i < s->count && !atomic_load(&s->failed); i++) {
		uint64_t a = mix64(s->seed * 0x9e3779b97f4a7c15ULL + 2 * i + 1);
		uint64_t b = mix64(s->seed * 0x9e3779b97f4a7c15ULL + 2 * i + 2);
		uint64_t nblk = s->bs_kb ? s->bs_kb * 1024 / BLOCK : 1 + a % (s->max_kb * 1024 / BLOCK);
		uint64_t off;
		uint16_t op = DM_REPL_OP_WRITE, flags = 0;
		uint32_t len;
		int r;

		if (nblk > blocks)
			nblk = blocks;
		off = (b % (blocks - nblk + 1)) * BLOCK;
		len = (uint32_t)(nblk * BLOCK);
		if (s->gap_at && i + 1 == s->gap_at) {
			/* the target overflowed here: a GAP record */
			r = sim_log(s, DM_REPL_OP_GAP, 0, 0, 0, NULL, 0, &seq);
			if (r < 0)
				goto io_error;
		}
		if (s->unlogged && i + 1 < s->gap_at && i + 1 + s->unlogged >= s->gap_at) {
			/* the target's ring is full: the device only, and the bitmap */
			pattern_fill(s->seed, i, off, buf, len);
			if (pwrite(s->dev_fd, buf, len, (off_t)off) != (ssize_t)len)
				goto io_error;
			r = ring_mem_mark_dirty(s->ring, off >> 9, len >> 9);
			if (r < 0)
				goto io_error;
			continue;
		}
		if (every(s->flush_every, i)) {
			if (fdatasync(s->dev_fd) < 0)
				goto io_error;
			op = DM_REPL_OP_FLUSH;
			len = 0;
			r = sim_log(s, op, 0, 0, 0, NULL, 0, &seq);
		} else if (every(s->discard_every, i)) {
			/* the primary's device reads zeroes after a discard here,
			 * and so must the secondary's for the files to compare */
			if (fallocate(s->dev_fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
				      (off_t)off, len) < 0)
				goto io_error;
			op = DM_REPL_OP_DISCARD;
			r = sim_log(s, op, 0, off >> 9, len >> 9, NULL, 0, &seq);
			len = 0;
		} else {
			if (every(s->fua_every, i))
				flags |= DM_REPL_F_FUA;
			if (!s->bench || !i) {
				pattern_fill(s->seed, i, off, buf, len);
				sim_compressible(s, i, buf, len);
			}
			if (!s->bench && pwrite(s->dev_fd, buf, len, (off_t)off) != (ssize_t)len)
				goto io_error;
			r = sim_log(s, op, flags, off >> 9, len >> 9, buf, len, &seq);
		}
		if (r < 0) {
			fprintf(stderr, "repl-simprimary: produce: %s\n", strerror(-r));
			atomic_store(&s->failed, true);
			break;
		}
		s->last_seq = seq;
		if (!s->t_first)
			s->t_first = mono_us();
		if (atomic_load(&s->sync) && s->qd > 1)
			sim_window(s, seq, false);
		else if (atomic_load(&s->sync))
			sim_wait_ack(s, seq, off, op == DM_REPL_OP_WRITE ? buf : NULL, len);
		if (s->rate_ms)
			usleep(s->rate_ms * 1000);
	}
	if (s->qd > 1 && atomic_load(&s->sync) && s->count)
		sim_window(s, s->last_seq, true);
	s->t_end = mono_us();
	free(buf);
	atomic_store(&s->done, true);
	return NULL;

io_error:
	fprintf(stderr, "repl-simprimary: primary device: %s\n", strerror(errno));
	atomic_store(&s->failed, true);
	free(buf);
	atomic_store(&s->done, true);
	return NULL;
}

/*
 * repld's own view, through its control socket: every peer UpToDate and
 * no resync running (the target's bitmap alone does not say it: repld
 * moves it into each peer's bitmap).
 */
static bool sim_peers_in_sync(const char *sock)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	static const char req[] = "{\"cmd\":\"status\"}\n";
	struct json_object *o = NULL, *peers;
	char buf[65536];
	size_t len = 0;
	bool ok = false;
	ssize_t n;
	int fd;

	if (strlen(sock) >= sizeof(sa.sun_path))
		return false;
	strcpy(sa.sun_path, sock);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return false;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    write(fd, req, sizeof(req) - 1) != (ssize_t)(sizeof(req) - 1))
		goto out;
	/* bounded: a manager that stops meanwhile may never answer */
	while (len < sizeof(buf) - 1 && poll(&(struct pollfd){ .fd = fd, .events = POLLIN }, 1,
					     1000) > 0 &&
	       (n = read(fd, buf + len, sizeof(buf) - 1 - len)) > 0)
		len += (size_t)n;
	buf[len] = 0;
	o = json_tokener_parse(buf);
	if (!o || !json_object_object_get_ex(o, "peers", &peers))
		goto out;
	ok = true;
	for (size_t i = 0; i < json_object_array_length(peers); i++) {
		struct json_object *p = json_object_array_get_idx(peers, i), *d;

		ok &= json_object_object_get_ex(p, "disk", &d) &&
		      !strcmp(json_object_get_string(d), "UpToDate") &&
		      !json_object_object_get_ex(p, "resync", NULL);
	}
out:
	json_object_put(o);
	close(fd);
	return ok;
}

/* After the last record: wait until the peers have everything, then stop. */
static void *sim_finisher(void *arg)
{
	struct sim *s = arg;
	uint64_t deadline;
	struct ring_info ri;

	while (!atomic_load(&s->done))
		usleep(20000);
	deadline = mono_ms() + s->finish_ms;
	for (;;) {
		ring_get_info(s->ring, &ri);
		/* the manager released everything: every peer has it durably */
		if ((ri.release_seq == ri.prod_seq && !ri.dirty_regions &&
		     sim_peers_in_sync(s->sock)) || atomic_load(&s->failed))
			break;
		if (atomic_load(&s->stopped))
			return NULL;	/* stopped from outside (SIGTERM) */
		if (mono_ms() > deadline) {
			fprintf(stderr, "repl-simprimary: peers not in sync %u ms after the last operation (released %" PRIu64 " of %" PRIu64 ")\n",
				s->finish_ms, ri.release_seq, ri.prod_seq);
			atomic_store(&s->failed, true);
			break;
		}
		usleep(20000);
	}
	if (!atomic_load(&s->failed) && s->linger_ms) {
		/* the peers are in sync: a test reads the status now */
		uint64_t until = mono_ms() + s->linger_ms;

		printf("repl-simprimary: in sync, lingering %u ms\n", s->linger_ms);
		fflush(stdout);
		/* a SIGTERM ends it early */
		while (mono_ms() < until && !atomic_load(&s->stopped))
			usleep(20000);
	}
	kill(getpid(), SIGTERM);
	return NULL;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "dev", required_argument, NULL, 'D' },
		{ "seed", required_argument, NULL, 's' },
		{ "count", required_argument, NULL, 'n' },
		{ "max-kb", required_argument, NULL, 'k' },
		{ "region-mb", required_argument, NULL, 'R' },
		{ "flush-every", required_argument, NULL, 'F' },
		{ "fua-every", required_argument, NULL, 'U' },
		{ "discard-every", required_argument, NULL, 'X' },
		{ "ring-records", required_argument, NULL, 'N' },
		{ "check", required_argument, NULL, 'C' },
		{ "rate-ms", required_argument, NULL, 'r' },
		{ "hold-ms", required_argument, NULL, 'H' },
		{ "gap-at", required_argument, NULL, 'G' },
		{ "unlogged", required_argument, NULL, 'L' },
		{ "finish-ms", required_argument, NULL, 'W' },
		{ "compressible", required_argument, NULL, 'Z' },
		{ "linger-ms", required_argument, NULL, 'I' },
		{ "bs-kb", required_argument, NULL, 'B' },
		{ "qd", required_argument, NULL, 'Q' },
		{ "bench", no_argument, NULL, 'b' },
		{ 0 },
	};
	struct sim s = { .seed = 1, .count = 1000, .max_kb = 64, .region = 64ULL << 20,
			 .hold_ms = 5000, .finish_ms = 60000,
			 .state_lock = PTHREAD_MUTEX_INITIALIZER };
	const char *cfgpath = NULL, *dev = NULL;
	_cleanup_(manager_freep) struct manager *m = NULL;
	struct config *cfg = NULL;
	pthread_t prod, fin;
	uint64_t ring_records = 0, dev_size;
	char err[512];
	sigset_t mask;
	int c, r;

	while ((c = getopt_long(argc, argv, "c:", opts, NULL)) != -1) {
		switch (c) {
		case 'c': cfgpath = optarg; break;
		case 'D': dev = optarg; break;
		case 's': s.seed = strtoull(optarg, NULL, 0); break;
		case 'n': s.count = strtoull(optarg, NULL, 0); break;
		case 'k': s.max_kb = strtoull(optarg, NULL, 0); break;
		case 'R': s.region = strtoull(optarg, NULL, 0) << 20; break;
		case 'F': s.flush_every = strtoull(optarg, NULL, 0); break;
		case 'U': s.fua_every = strtoull(optarg, NULL, 0); break;
		case 'X': s.discard_every = strtoull(optarg, NULL, 0); break;
		case 'N': ring_records = strtoull(optarg, NULL, 0); break;
		case 'r': s.rate_ms = (unsigned int)strtoul(optarg, NULL, 0); break;
		case 'H': s.hold_ms = (unsigned int)strtoul(optarg, NULL, 0); break;
		case 'G': s.gap_at = strtoull(optarg, NULL, 0); break;
		case 'W': s.finish_ms = (unsigned int)strtoul(optarg, NULL, 0); break;
		case 'Z': s.compressible = (unsigned int)strtoul(optarg, NULL, 0); break;
		case 'I': s.linger_ms = (unsigned int)strtoul(optarg, NULL, 0); break;
		case 'L': s.unlogged = strtoull(optarg, NULL, 0); break;
		case 'B': s.bs_kb = strtoull(optarg, NULL, 0); break;
		case 'Q': s.qd = strtoull(optarg, NULL, 0); break;
		case 'b': s.bench = true; break;
		case 'C': {
			const char *eq = strchr(optarg, '=');

			if (!eq || s.nr_checks == MAX_CHECKS || eq - optarg > CONFIG_NAME_MAX) {
				fprintf(stderr, "repl-simprimary: --check PEER=FILE\n");
				return 2;
			}
			memcpy(s.checks[s.nr_checks].peer, optarg, (size_t)(eq - optarg));
			s.checks[s.nr_checks].fd = open(eq + 1, O_RDONLY | O_CLOEXEC);
			if (s.checks[s.nr_checks].fd < 0) {
				fprintf(stderr, "repl-simprimary: %s: %s\n", eq + 1, strerror(errno));
				return 2;
			}
			s.nr_checks++;
			break;
		}
		default:
			return 2;
		}
	}
	if (s.bs_kb)
		s.max_kb = s.bs_kb;
	if (!cfgpath || !dev || !s.max_kb || s.max_kb > 1024 || s.max_kb % 4 || s.qd > 1024 ||
	    (s.qd > 1 && s.nr_checks) || (s.bench && (!s.bs_kb || s.nr_checks))) {
		fprintf(stderr, "repl-simprimary: -c and --dev are required; --max-kb and --bs-kb 4..1024, a multiple of 4; --qd up to 1024, not with --check; --bench with --bs-kb, not with --check\n");
		return 2;
	}
	log_setup("repld(sim)", getenv("SIM_DEBUG") != NULL);
	r = config_load(cfgpath, &cfg, err, sizeof(err));
	if (r < 0) {
		fprintf(stderr, "repl-simprimary: %s\n", err);
		return 2;
	}
	s.dev_fd = open(dev, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (s.dev_fd < 0) {
		fprintf(stderr, "repl-simprimary: %s: %s\n", dev, strerror(errno));
		return 2;
	}
	dev_size = s.region;
	if (ftruncate(s.dev_fd, (off_t)dev_size) < 0)
		return 2;
	if (!ring_records)
		ring_records = cfg->ring_size_mb * 256ULL;	/* one slot per 4 KiB */
	r = ring_mem_new((uint32_t)ring_records, (uint64_t)cfg->ring_size_mb << 20,
			 dev_size >> 9, &s.ring);
	if (r < 0) {
		fprintf(stderr, "repl-simprimary: memory ring: %s\n", strerror(-r));
		return 2;
	}
	r = manager_new(cfg, &m);
	if (r < 0)
		return 2;
	manager_use_ring(m, s.ring, &sim_ops, &s);
	snprintf(s.sock, sizeof(s.sock), "%s", manager_config(m)->control_socket);
	r = manager_start(m);
	if (r < 0)
		return 2;
	/* the threads must not take the signals the manager reads */
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &mask, NULL);
	s.lat_us = calloc(s.count ? s.count : 1, sizeof(*s.lat_us));
	s.t_log = calloc(s.qd ? s.qd : 1, sizeof(*s.t_log));
	s.lat_next = UINT64_MAX;
	if (!s.lat_us || !s.t_log)
		return 2;
	if (pthread_create(&prod, NULL, sim_producer, &s) ||
	    pthread_create(&fin, NULL, sim_finisher, &s))
		return 2;
	r = manager_run(m);
	atomic_store(&s.stopped, true);
	atomic_store(&s.failed, atomic_load(&s.failed) || r < 0);
	atomic_store(&s.done, true);
	pthread_join(prod, NULL);
	pthread_join(fin, NULL);
	sim_print_latency(&s);
	if (s.t_end > s.t_first && s.acked_waits)
		printf("repl-simprimary: %" PRIu64 " sync writes of %" PRIu64 " KiB at queue depth %" PRIu64
		       " in %.3f s: %.0f writes/s, %.1f MB/s\n", s.acked_waits, s.bs_kb ? s.bs_kb : s.max_kb,
		       s.qd ? s.qd : 1, (double)(s.t_end - s.t_first) / 1e6,
		       (double)s.acked_waits * 1e6 / (double)(s.t_end - s.t_first),
		       (double)s.acked_waits * (double)(s.bs_kb * 1024) / (double)(s.t_end - s.t_first));
	printf("repl-simprimary: %" PRIu64 " operations, last record %" PRIu64
	       ", sync waits %" PRIu64 ", checked %" PRIu64 ", hold timeouts %" PRIu64
	       ", ring full too long %" PRIu64 ", mode changes %u: %s\n", s.count, s.last_seq,
	       s.acked_waits, s.checked, s.hold_timeouts, s.space_timeouts,
	       atomic_load(&s.mode_changes),
	       atomic_load(&s.failed) ? "FAILED" : "ok");
	free(s.lat_us);
	free(s.t_log);
	return atomic_load(&s.failed) ? 1 : 0;
}
