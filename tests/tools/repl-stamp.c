// SPDX-License-Identifier: GPL-2.0-only
/*
 * repl-stamp: a checkable write workload for crash and fault tests.
 *
 *   repl-stamp write DEV --seed S --slots N [--count C] [--first I]
 *                        [--ack-file F] [--sync-every K] [--flush-every M]
 *                        [--rate W]
 *   repl-stamp check DEV --seed S --slots N --upto K
 *   repl-stamp check-prefix DEV --seed S --slots N [--min K0]
 *   repl-stamp check-crash DEV --seed S --slots N [--min K0] [--flush-every M]
 *   repl-stamp slot --seed S --slots N --write I
 *
 * The device is divided into N slots of 4 KiB (slot s at byte s * 4096; N *
 * 4096 must not exceed its size).  Write i (1, 2, 3, ...) goes to slot
 * slot(S, N, i), a deterministic pseudo-random function, so the writes spread
 * over the whole device and touch many regions.  The block of write i is
 *
 *   bytes  0..7   magic "REPLSTMP"        bytes 24..31  slot
 *          8..15  seed                           32..39  N
 *         16..23  i                              40..47  checksum
 *         48..4095 filler: a function of (seed, i, slot) (seqgen.h)
 *
 * all little-endian u64; the checksum covers the whole block with the
 * checksum field taken as 0.
 *
 * write: writes i = I, I+1, ... (I = --first, default 1), one at a time
 * (queue depth 1) with O_DIRECT, until --count writes are done or SIGTERM /
 * SIGINT (then it finishes the write in progress).  With --ack-file, after
 * every K-th completed write (--sync-every, default 1) and at the end, the
 * file F gets the number of the last completed write ("<i>\n", written to
 * F.tmp and renamed over F): F never names a write that has not completed,
 * so it is a lower bound of what the device acknowledged.  --flush-every M:
 * fdatasync(DEV) after every M-th write (flush records for the replication).
 * --rate W: at most W writes per second.  Exit 0; 1 on an I/O error (F then
 * names the last write that completed).
 *
 * check: DEV must hold exactly the state after writes 1..K (K = --upto): each
 * slot the block of the last write <= K to it, or zeroes if there was none.
 * Prints up to 10 mismatching slots (what was expected and what was found)
 * and exits 1 on any mismatch.
 *
 * check-prefix: finds the largest K with a valid block of write K on DEV
 * (0 if there is none), prints K on stdout and checks like 'check --upto K':
 * DEV must be the state after a prefix of the write sequence.  --min K0:
 * fail also when K < K0 (every write acknowledged up to K0 must be there).
 *
 * check-crash: DEV must be a state a crash can leave behind when the writes
 * went out with many in flight, never two to the same slot at once (a
 * secondary's apply engine): every write up to K0 is there, a later write may
 * be there without an earlier one, and a flush orders.  With K the largest
 * write found and, with --flush-every M, F the last write before the flush
 * that precedes write K (the largest multiple of M below K; 0 without M),
 * every slot must hold the last write <= max(K0, F) to it (zeroes if none)
 * or a later write of the sequence to that slot.  Prints "K B X" on stdout:
 * the largest write found, B = max(K0, F) (every write up to B is there),
 * and X, how many writes after B are neither there nor overwritten by a
 * later write that is there.  A block that is neither zeroes nor a valid
 * write of this sequence to its slot fails too.
 *
 * slot: print the slot of write I.
 *
 * Reads use O_DIRECT (regular files on a file system without it are read
 * through the page cache).  Exit 0 ok, 1 check failed or error.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <linux/fs.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "seqgen.h"

#define PROG		"repl-stamp"
#include "tool.h"

#define BLOCK		4096U
#define READ_BLOCKS	256U		/* 1 MiB per read */
#define MAX_REPORT	10
#define STAMP_MAGIC	0x504d54534c504552ULL	/* "REPLSTMP" little-endian */
#define MAX_WRITE	(1ULL << 48)

enum { H_MAGIC, H_SEED, H_I, H_SLOT, H_NSLOTS, H_SUM, H_WORDS };

struct opts {
	const char *dev, *ack_file;
	uint64_t seed, slots, count, first, sync_every, flush_every, rate, upto, min, write;
	bool have_seed, have_slots, have_upto;
};

static volatile sig_atomic_t stop;

/* ---- the sequence --------------------------------------------------------- */

static uint64_t stamp_slot(uint64_t seed, uint64_t nslots, uint64_t i)
{
	return mix64(mix64(seed ^ 0x7374616d70736c74ULL) + i * 0x9e3779b97f4a7c15ULL) % nslots;
}

static uint64_t block_sum(const uint64_t *w)
{
	uint64_t h = 0x6a09e667f3bcc908ULL;

	for (unsigned int k = 0; k < BLOCK / 8; k++)
		h = mix64(h ^ (k == H_SUM ? 0 : w[k]) ^ k);
	return h;
}

/* The block of write i (which goes to slot). */
static void stamp_fill(uint64_t *w, uint64_t seed, uint64_t nslots, uint64_t i, uint64_t slot)
{
	pattern_fill(seed, i, slot * BLOCK + H_WORDS * 8, w + H_WORDS, BLOCK - H_WORDS * 8);
	w[H_MAGIC] = STAMP_MAGIC;
	w[H_SEED] = seed;
	w[H_I] = i;
	w[H_SLOT] = slot;
	w[H_NSLOTS] = nslots;
	w[H_SUM] = block_sum(w);
}

static bool block_zero(const uint64_t *w)
{
	for (unsigned int k = 0; k < BLOCK / 8; k++)
		if (w[k])
			return false;
	return true;
}

/* A valid block of this sequence in this slot: its write number, else 0. */
static uint64_t stamp_valid(const uint64_t *w, const struct opts *o, uint64_t slot)
{
	if (w[H_MAGIC] != STAMP_MAGIC || w[H_SEED] != o->seed || w[H_NSLOTS] != o->slots ||
	    w[H_SLOT] != slot || !w[H_I] || w[H_I] >= MAX_WRITE || w[H_SUM] != block_sum(w))
		return 0;
	return w[H_I];
}

/* What a block holds, for a mismatch report. */
static void block_describe(const uint64_t *w, const struct opts *o, uint64_t slot,
			   char *buf, size_t len)
{
	if (block_zero(w))
		snprintf(buf, len, "zeroes");
	else if (w[H_MAGIC] != STAMP_MAGIC)
		snprintf(buf, len, "no stamp (first word %016" PRIx64 ")", w[H_MAGIC]);
	else if (w[H_SUM] != block_sum(w))
		snprintf(buf, len, "a damaged block (checksum mismatch; header says write %" PRIu64
			 " slot %" PRIu64 ")", w[H_I], w[H_SLOT]);
	else if (w[H_SEED] != o->seed || w[H_NSLOTS] != o->slots)
		snprintf(buf, len, "write %" PRIu64 " of another sequence (seed %" PRIu64
			 ", %" PRIu64 " slots)", w[H_I], w[H_SEED], w[H_NSLOTS]);
	else if (w[H_SLOT] != slot)
		snprintf(buf, len, "write %" PRIu64 " of slot %" PRIu64, w[H_I], w[H_SLOT]);
	else
		snprintf(buf, len, "write %" PRIu64, w[H_I]);
}

/* ---- device ------------------------------------------------------------------ */

static int dev_open(const struct opts *o, int flags, uint64_t *ret_size)
{
	struct stat st;
	uint64_t size;
	int fd;

	fd = dev_open_direct(o->dev, flags, &st, &size);
	if (fd < 0)
		return -1;
	if (o->slots > size / BLOCK) {
		errmsg("%s: %" PRIu64 " slots of 4 KiB need %" PRIu64 " bytes, it has %" PRIu64,
		       o->dev, o->slots, o->slots * BLOCK, size);
		close(fd);
		return -1;
	}
	*ret_size = size;
	return fd;
}

static void *block_alloc(size_t len)
{
	void *p = NULL;

	if (posix_memalign(&p, BLOCK, len)) {
		errmsg("out of memory");
		return NULL;
	}
	return p;
}

/*
 * len bytes at *pos read into buf, or written from it, completely: NULL,
 * or why not (*pos: where it stopped).
 */
static const char *block_rw(int fd, void *buf, size_t len, uint64_t *pos, bool wr)
{
	char *p = buf, *end = p + len;

	while (p < end) {
		ssize_t r = wr ? pwrite(fd, p, (size_t)(end - p), (off_t)*pos) :
				 pread(fd, p, (size_t)(end - p), (off_t)*pos);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? strerror(errno) : wr ? "short write" : "short read";
		p += r;
		*pos += (uint64_t)r;
	}
	return NULL;
}

/* read blocks [first, first + n) completely */
static int read_blocks(int fd, const struct opts *o, void *buf, uint64_t first, uint64_t n)
{
	uint64_t pos = first * BLOCK;
	const char *why = block_rw(fd, buf, n * BLOCK, &pos, false);

	if (why) {
		errmsg("read %s at %" PRIu64 ": %s", o->dev, pos, why);
		return -1;
	}
	return 0;
}

/* The device's blocks slot by slot, read READ_BLOCKS at a time into buf. */
struct slot_reader {
	int fd;
	const struct opts *o;
	uint64_t *buf;
	uint64_t next;		/* the next slot */
	uint64_t first, n;	/* the slots in buf */
	bool failed;		/* a read failed (said) */
};

/* The block of the next slot, its number in *slot; NULL after the last or a failed read. */
static const uint64_t *slot_next(struct slot_reader *r, uint64_t *slot)
{
	if (r->next == r->o->slots)
		return NULL;
	if (r->next == r->first + r->n) {
		r->first = r->next;
		r->n = r->o->slots - r->first < READ_BLOCKS ? r->o->slots - r->first : READ_BLOCKS;
		if (read_blocks(r->fd, r->o, r->buf, r->first, r->n) < 0) {
			r->failed = true;
			return NULL;
		}
	}
	*slot = r->next++;
	return r->buf + (*slot - r->first) * (BLOCK / 8);
}

/* ---- write ------------------------------------------------------------------- */

static int ack_publish(const char *path, uint64_t i)
{
	char tmp[4096], buf[32];
	int fd, n;

	if (!path)
		return 0;
	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= sizeof(tmp)) {
		errmsg("--ack-file: path too long");
		return -1;
	}
	n = snprintf(buf, sizeof(buf), "%" PRIu64 "\n", i);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		goto fail;
	if (write(fd, buf, (size_t)n) != n) {
		close(fd);
		goto fail;
	}
	if (close(fd) < 0 || rename(tmp, path) < 0)
		goto fail;
	return 0;
fail:
	errmsg("ack file %s: %s", path, strerror(errno ? errno : EIO));
	return -1;
}

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static int write_run(const struct opts *o)
{
	struct sigaction sa = { .sa_handler = on_signal };
	uint64_t size, i = o->first, done = 0, *w;
	double t0, t;
	int fd, ret = 1;

	fd = dev_open(o, O_RDWR, &size);
	if (fd < 0)
		return 1;
	w = block_alloc(BLOCK);
	if (!w) {
		close(fd);
		return 1;
	}
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	if (ack_publish(o->ack_file, o->first - 1) < 0)
		goto out;
	t0 = now_s();
	while (!stop && (!o->count || done < o->count)) {
		uint64_t slot = stamp_slot(o->seed, o->slots, i), pos = slot * BLOCK;
		const char *why;

		if (o->rate) {
			double due = t0 + (double)done / (double)o->rate;

			t = now_s();
			if (due > t) {
				struct timespec ts = { .tv_sec = (time_t)(due - t),
						       .tv_nsec = (long)((due - t - (time_t)(due - t)) * 1e9) };

				nanosleep(&ts, NULL);
				continue;	/* re-check stop */
			}
		}
		stamp_fill(w, o->seed, o->slots, i, slot);
		why = block_rw(fd, w, BLOCK, &pos, true);
		if (why) {
			errmsg("write %" PRIu64 " (slot %" PRIu64 ") to %s: %s", i, slot, o->dev, why);
			ack_publish(o->ack_file, i - 1);
			goto out;
		}
		if (o->flush_every && i % o->flush_every == 0 && fdatasync(fd) < 0) {
			errmsg("fdatasync %s after write %" PRIu64 ": %s", o->dev, i, strerror(errno));
			ack_publish(o->ack_file, i - 1);
			goto out;
		}
		done++;
		/* only now is write i complete: publish it */
		if (o->ack_file && done % o->sync_every == 0 && ack_publish(o->ack_file, i) < 0)
			goto out;
		i++;
	}
	if (ack_publish(o->ack_file, i - 1) < 0)
		goto out;
	t = now_s() - t0;
	fprintf(stderr, PROG ": write: writes %" PRIu64 "..%" PRIu64 " (%" PRIu64 ") in %.1f s, %.0f/s%s\n",
		o->first, i - 1, done, t, t > 0 ? (double)done / t : 0.0, stop ? ", stopped by a signal" : "");
	ret = 0;
out:
	free(w);
	if (close(fd) < 0 && !ret) {
		errmsg("close %s: %s", o->dev, strerror(errno));
		ret = 1;
	}
	return ret;
}

/* ---- check ------------------------------------------------------------------- */

/* The largest write number with a valid block on the device, or -1 on error. */
static int64_t find_last(int fd, const struct opts *o)
{
	struct slot_reader rd = { .fd = fd, .o = o, .buf = block_alloc(READ_BLOCKS * BLOCK) };
	const uint64_t *w;
	uint64_t k = 0, slot;

	if (!rd.buf)
		return -1;
	while ((w = slot_next(&rd, &slot))) {
		uint64_t i = stamp_valid(w, o, slot);

		if (i > k)
			k = i;
	}
	free(rd.buf);
	return rd.failed ? -1 : (int64_t)k;
}

/* Compare the device with the state after writes 1..upto. */
static int check_state(int fd, const struct opts *o, uint64_t upto)
{
	struct slot_reader rd = { .fd = fd, .o = o, .buf = block_alloc(READ_BLOCKS * BLOCK) };
	uint64_t *last, *exp, slot, bad = 0, zero = 0, i;
	const uint64_t *w;
	int ret = 1;

	last = calloc(o->slots, sizeof(*last));
	exp = block_alloc(BLOCK);
	if (!last || !rd.buf || !exp) {
		errmsg("out of memory");
		goto out;
	}
	for (i = 1; i <= upto; i++)
		last[stamp_slot(o->seed, o->slots, i)] = i;
	memset(exp, 0, BLOCK);
	while ((w = slot_next(&rd, &slot))) {
		char found[160];

		if (last[slot])
			stamp_fill(exp, o->seed, o->slots, last[slot], slot);
		else
			zero++;
		if (memcmp(w, exp, BLOCK)) {
			if (++bad <= MAX_REPORT) {
				block_describe(w, o, slot, found, sizeof(found));
				if (last[slot])
					errmsg("slot %" PRIu64 " (offset %" PRIu64 "): expected write %"
					       PRIu64 ", found %s", slot, slot * BLOCK, last[slot], found);
				else
					errmsg("slot %" PRIu64 " (offset %" PRIu64
					       "): expected zeroes (never written), found %s",
					       slot, slot * BLOCK, found);
			}
		}
		if (last[slot])
			memset(exp, 0, BLOCK);
	}
	if (rd.failed)
		goto out;
	if (bad) {
		errmsg("%s is NOT the state after writes 1..%" PRIu64 ": %" PRIu64 " of %" PRIu64
		       " slots differ", o->dev, upto, bad, o->slots);
		goto out;
	}
	fprintf(stderr, PROG ": %s holds the state after writes 1..%" PRIu64 " (%" PRIu64
		" slots, %" PRIu64 " never written)\n", o->dev, upto, o->slots, zero);
	ret = 0;
out:
	free(last);
	free(rd.buf);
	free(exp);
	return ret;
}

static int check_run(const struct opts *o, bool prefix)
{
	uint64_t size, upto = o->upto;
	int fd, ret = 1;

	fd = dev_open(o, O_RDONLY, &size);
	if (fd < 0)
		return 1;
	if (prefix) {
		int64_t k = find_last(fd, o);

		if (k < 0)
			goto out;
		upto = (uint64_t)k;
		printf("%" PRIu64 "\n", upto);
		fprintf(stderr, PROG ": largest write on %s: %" PRIu64 "\n", o->dev, upto);
	}
	ret = check_state(fd, o, upto);
	if (!ret && prefix && upto < o->min) {
		errmsg("%s holds writes 1..%" PRIu64 " only, but writes up to %" PRIu64
		       " were acknowledged (--min)", o->dev, upto, o->min);
		ret = 1;
	}
out:
	close(fd);
	return ret;
}

/*
 * A crash state: each slot holds the last write <= bound to it, or a later
 * write to that slot (see check-crash above).
 */
static int crash_run(const struct opts *o)
{
	uint64_t *found, *last, size, s, slot, i, k = 0, f = 0, bound, bad = 0, beyond = 0,
		 missing = 0;
	struct slot_reader rd = { .o = o };
	const uint64_t *w;
	int fd, ret = 1;

	fd = dev_open(o, O_RDONLY, &size);
	if (fd < 0)
		return 1;
	found = calloc(o->slots, sizeof(*found));
	last = calloc(o->slots, sizeof(*last));
	rd.fd = fd;
	rd.buf = block_alloc(READ_BLOCKS * BLOCK);
	if (!found || !last || !rd.buf) {
		errmsg("out of memory");
		goto out;
	}
	/* what each slot holds */
	while ((w = slot_next(&rd, &slot))) {
		uint64_t j = stamp_valid(w, o, slot);
		char what[160];

		if (j && stamp_slot(o->seed, o->slots, j) != slot) {
			if (++bad <= MAX_REPORT)
				errmsg("slot %" PRIu64 " (offset %" PRIu64 "): write %" PRIu64
				       " of slot %" PRIu64 " found here", slot, slot * BLOCK, j,
				       stamp_slot(o->seed, o->slots, j));
			continue;
		}
		if (!j && !block_zero(w)) {
			if (++bad <= MAX_REPORT) {
				block_describe(w, o, slot, what, sizeof(what));
				errmsg("slot %" PRIu64 " (offset %" PRIu64 "): found %s", slot,
				       slot * BLOCK, what);
			}
			continue;
		}
		found[slot] = j;
		if (j > k)
			k = j;
	}
	if (rd.failed)
		goto out;
	/* write k came after the flush that followed write f */
	if (o->flush_every && k)
		f = (k - 1) / o->flush_every * o->flush_every;
	bound = o->min > f ? o->min : f;
	for (i = 1; i <= bound; i++)
		last[stamp_slot(o->seed, o->slots, i)] = i;
	for (s = 0; s < o->slots; s++) {
		if (found[s] > bound)
			beyond++;
		if (found[s] >= last[s])
			continue;
		if (++bad <= MAX_REPORT) {
			if (found[s])
				errmsg("slot %" PRIu64 " (offset %" PRIu64 "): expected write %" PRIu64
				       " or a later one, found the older write %" PRIu64, s, s * BLOCK,
				       last[s], found[s]);
			else
				errmsg("slot %" PRIu64 " (offset %" PRIu64 "): expected write %" PRIu64
				       " or a later one, found zeroes", s, s * BLOCK, last[s]);
		}
	}
	for (i = bound + 1; i <= k; i++)
		if (found[stamp_slot(o->seed, o->slots, i)] < i)
			missing++;
	printf("%" PRIu64 " %" PRIu64 " %" PRIu64 "\n", k, bound, missing);
	if (bad) {
		errmsg("%s is NOT a crash state holding every write up to %" PRIu64 " (--min %" PRIu64
		       "; the largest write found, %" PRIu64 ", came after the flush that followed write %"
		       PRIu64 "): %" PRIu64 " slots wrong", o->dev, bound, o->min, k, f, bad);
		goto out;
	}
	fprintf(stderr, PROG ": %s is a crash state holding every write up to %" PRIu64 " (--min %"
		PRIu64 "; the largest write found, %" PRIu64 ", came after the flush that followed write %"
		PRIu64 "); %" PRIu64 " slots hold a later write, %" PRIu64 " later writes are not there\n",
		o->dev, bound, o->min, k, f, beyond, missing);
	ret = 0;
out:
	free(found);
	free(last);
	free(rd.buf);
	close(fd);
	return ret;
}

/* ---- command line ------------------------------------------------------------ */

static const char usage[] =
	"Usage: " PROG " write DEV --seed S --slots N [--count C] [--first I]\n"
	"                  [--ack-file F] [--sync-every K] [--flush-every M] [--rate W]\n"
	"       " PROG " check DEV --seed S --slots N --upto K\n"
	"       " PROG " check-prefix DEV --seed S --slots N [--min K0]\n"
	"       " PROG " check-crash DEV --seed S --slots N [--min K0] [--flush-every M]\n"
	"       " PROG " slot --seed S --slots N --write I\n"
	"Write i (1, 2, ...) puts a stamped 4 KiB block into slot slot(S, N, i) of DEV\n"
	"(O_DIRECT, queue depth 1).  write: --count writes (default: until SIGTERM),\n"
	"the last completed write number to F every K writes (default 1) and at the end,\n"
	"fdatasync every M writes, at most W writes/s.  check: DEV holds exactly the\n"
	"state after writes 1..K.  check-prefix: prints the largest write K found on DEV\n"
	"and checks DEV holds exactly the state after writes 1..K, and K >= K0.\n"
	"check-crash: DEV is a crash state of the sequence written with many writes in\n"
	"flight: each slot the last write <= max(K0, last flush before the largest write\n"
	"found) to it, or a later one; prints that largest write, the bound, and the\n"
	"writes after the bound missing.\n"
	"Exit 0 ok, 1 mismatch or error.\n";

int main(int argc, char **argv)
{
	enum { OPT_SEED = 256, OPT_SLOTS, OPT_COUNT, OPT_FIRST, OPT_ACK, OPT_SYNC, OPT_FLUSH, OPT_RATE,
	       OPT_UPTO, OPT_MIN, OPT_WRITE };
	static const struct option opts[] = {
		{ "seed", required_argument, NULL, OPT_SEED },
		{ "slots", required_argument, NULL, OPT_SLOTS },
		{ "count", required_argument, NULL, OPT_COUNT },
		{ "first", required_argument, NULL, OPT_FIRST },
		{ "ack-file", required_argument, NULL, OPT_ACK },
		{ "sync-every", required_argument, NULL, OPT_SYNC },
		{ "flush-every", required_argument, NULL, OPT_FLUSH },
		{ "rate", required_argument, NULL, OPT_RATE },
		{ "upto", required_argument, NULL, OPT_UPTO },
		{ "min", required_argument, NULL, OPT_MIN },
		{ "write", required_argument, NULL, OPT_WRITE },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct opts o = { .first = 1, .sync_every = 1 };
	const char *cmd;
	int c;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		fputs(usage, argc < 2 ? stderr : stdout);
		return argc < 2;
	}
	cmd = argv[1];
	if (strcmp(cmd, "write") && strcmp(cmd, "check") && strcmp(cmd, "check-prefix") &&
	    strcmp(cmd, "check-crash") && strcmp(cmd, "slot")) {
		errmsg("unknown command '%s'", cmd);
		fputs(usage, stderr);
		return 1;
	}
	argc--;
	argv++;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		bool ok = true;

		switch (c) {
		case OPT_SEED:	ok = parse_u64(optarg, &o.seed); o.have_seed = true; break;
		case OPT_SLOTS:	ok = parse_u64(optarg, &o.slots) && o.slots > 0 &&
				     o.slots < (1ULL << 40); o.have_slots = true; break;
		case OPT_COUNT:	ok = parse_u64(optarg, &o.count); break;
		case OPT_FIRST:	ok = parse_u64(optarg, &o.first) && o.first > 0 &&
				     o.first < MAX_WRITE; break;
		case OPT_ACK:	o.ack_file = optarg; break;
		case OPT_SYNC:	ok = parse_u64(optarg, &o.sync_every) && o.sync_every > 0; break;
		case OPT_FLUSH:	ok = parse_u64(optarg, &o.flush_every); break;
		case OPT_RATE:	ok = parse_u64(optarg, &o.rate); break;
		case OPT_UPTO:	ok = parse_u64(optarg, &o.upto) && o.upto < MAX_WRITE;
				o.have_upto = true; break;
		case OPT_MIN:	ok = parse_u64(optarg, &o.min); break;
		case OPT_WRITE:	ok = parse_u64(optarg, &o.write) && o.write > 0; break;
		case 'h':	fputs(usage, stdout); return 0;
		default:	fputs(usage, stderr); return 1;
		}
		if (!ok) {
			errmsg("invalid value for --%s: %s", opts[c - OPT_SEED].name, optarg);
			return 1;
		}
	}
	if (!o.have_seed || !o.have_slots) {
		errmsg("%s: --seed and --slots are required", cmd);
		return 1;
	}
	if (!strcmp(cmd, "slot")) {
		if (optind != argc || !o.write) {
			errmsg("slot: --write I, no device");
			return 1;
		}
		printf("%" PRIu64 "\n", stamp_slot(o.seed, o.slots, o.write));
		return 0;
	}
	if (optind + 1 != argc) {
		errmsg("%s: one device expected", cmd);
		return 1;
	}
	o.dev = argv[optind];
	if (!strcmp(cmd, "write")) {
		if (o.count > MAX_WRITE - o.first) {
			errmsg("--count too large");
			return 1;
		}
		return write_run(&o);
	}
	if (!strcmp(cmd, "check")) {
		if (!o.have_upto) {
			errmsg("check: --upto K is required");
			return 1;
		}
		return check_run(&o, false);
	}
	if (!strcmp(cmd, "check-crash"))
		return crash_run(&o);
	return check_run(&o, true);
}
