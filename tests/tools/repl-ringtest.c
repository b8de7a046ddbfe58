// SPDX-License-Identifier: GPL-2.0-only
/*
 * repl-ringtest: test tool for the dm-repl ring, run by the VM tests
 * against the real module (and on the host against files for write and
 * pattern-check).
 *
 *   repl-ringtest dump <dm-device> [options]
 *   repl-ringtest write <block-device> --seed S --count N [options]
 *   repl-ringtest pattern-check <block-device> --seed S --count N [options]
 *   repl-ringtest dirty <dm-device>
 *   repl-ringtest regions <dm-device> mark|clear <first> <count> [<gen>]
 *
 * dump: attach to the ring of <dm-device> (a /dev/dm-N or /dev/mapper/X
 * path) and print one line per record on stdout, flushed per line:
 *
 *   seq=<n> op=<write|flush|discard|zeroes|gap> sector=<s> sectors=<n>
 *       flags=<fua,sync or -> epoch=<e> len=<bytes> xxh=<16 hex digits|->
 *
 *   (one line; fields separated by one space, always in this order: with
 *   awk, $1 seq, $2 op, $3 sector, $4 sectors, $5 flags, $6 epoch, $7 len,
 *   $8 xxh.)  xxh is XXH64 (seed 0) of the payload, "-" for records without
 *   payload.  Unknown flag bits print as 0x<hex> in the list, an unknown op
 *   as op=op<n> (and fail the run).
 *   With --status, a last line "status key=value..." follows the records:
 *   state=<ok or sync,degraded,overflow,dirty> state_seq= prod= read=
 *   release= ack= epoch= dirty_regions= overflows= hold_timeouts=
 *   (filter records with grep '^seq=').  stderr gets a summary line:
 *   "repl-ringtest: dump: records=N bytes=B wakeups=W sleeps=S kicks=K
 *   first=F next=X released=R acked=A".
 *
 *   Records are released and acknowledged as they are consumed, in batches
 *   of at most 64 and always before waiting, unless --no-release/--no-ack;
 *   --ack-delay-ms D acknowledges a record D ms after it was read;
 *   --ack-after-file PATH acknowledges nothing until PATH exists;
 *   --ack-interval-ms P acknowledges at most one record every P ms (a slow
 *   peer that keeps making progress).
 *   The dump checks sequence contiguity (the library does) and the epoch
 *   rule (a FLUSH carries the open epoch, later records the next one); a
 *   GAP record fails the run unless --gap-ok.
 *
 *   Exit: 0 when --count records were read (and, if acks are enabled,
 *   acknowledged), or at the idle timeout without --count; 2 on idle timeout
 *   (--timeout-ms, default 10000: no new record for that long) before
 *   --count records; 1 on error (attach failed, bad record, epoch rule,
 *   unexpected GAP).  --exit-after N exits 0 right after printing record N,
 *   without releasing or acknowledging what was read since the last update
 *   (a killed consumer); the summary says how far it had released.
 *
 * write: deterministic serial I/O, one operation at a time (each completes
 * before the next is issued), with O_DIRECT, 4 KiB aligned offsets and
 * lengths.  Operation i (0-based) is
 *   a flush   if --flush-every M and (i+1) % M == 0   (fdatasync)
 *   a discard if --discard-every M and (i+1) % M == 0 (BLKDISCARD)
 *   zeroes    if --zeroes-every M and (i+1) % M == 0  (BLKZEROOUT)
 *   a FUA write if --fua-every M and (i+1) % M == 0   (O_DIRECT|O_DSYNC fd)
 *   a write   otherwise                               (pwrite)
 * checked in that order; its extent (1 to --max-kb/4 blocks inside the
 * first --region-mb MiB) and its payload derive from (seed, i) only.  For
 * every record the operation should produce, write prints
 *
 *   op=<write|flush|discard|zeroes> sector=<s> sectors=<n> len=<bytes>
 *       xxh=<hex|-> fua=<0|1>
 *
 *   (one line), i.e. the dump line without seq, flags and epoch: compare
 *   dump's "$2 $3 $4 $7 $8" with write's "$1 $2 $3 $4 $5"; fua=1 goes with
 *   "fua" in dump's flags.  To predict the records, write emulates the block
 *   layer of Linux 6.1 with the limits in /sys/dev/block/M:m/queue of the
 *   device: a write is cut into records at record_kb boundaries (--split-kb,
 *   default the target's default) and split at max_sectors_kb; discards and
 *   write-zeroes at the device's discard/write-zeroes limits; BLKZEROOUT without write-zeroes
 *   support becomes zero-filled writes of at most 1 MiB; without a volatile
 *   write cache (write_cache "write through") the block layer drops flushes
 *   and FUA, so a flush prints nothing and fua is 0; with one, a FUA write
 *   is followed by the flush of O_DSYNC's fdatasync.
 *   Regular files work too (no splitting; discard/zeroes via fallocate).
 *
 * pattern-check: replay the same sequence in memory and check that the
 * device holds its final state (what a replica must contain).  Blocks never
 * written, and discarded blocks, are not checked unless --initial-zero /
 * --discard-zero say they must read as zeroes.  Exit 1 at the first
 * mismatching block, with its offset; 0 when everything matches.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include <xxhash.h>

#include "seqgen.h"

#include "ring.h"

#define PROG		"repl-ringtest"
#include "tool.h"

#define EXIT_ERROR	1
#define EXIT_TIMEOUT	2

#define BLOCK		4096U
#define DUMP_BATCH	64	/* release/ack at least every that many records */
#define DEFAULT_SPLIT_KB DM_REPL_DEFAULT_RECORD_KB	/* dm-repl's default record_kb */

static bool parse_int(const char *s, int *ret)
{
	uint64_t v;

	if (!parse_u64(s, &v) || v > INT_MAX)
		return false;
	*ret = (int)v;
	return true;
}

/* ======================================================================
 * dump
 */

struct dump_opts {
	const char *dev;
	uint64_t count;
	int timeout_ms;
	bool no_release;
	bool no_ack;
	int ack_delay_ms;
	int ack_interval_ms;
	const char *ack_file;
	uint64_t exit_after;
	const char *payload_dir;
	bool gap_ok;
	bool status;
	bool no_hash;
};

/* Records read but not yet acknowledged because of --ack-delay-ms. */
struct ack_fifo {
	struct ack_entry {
		uint64_t end;		/* records below end ... */
		uint64_t due_ms;	/* ... may be acked from then on */
	} *e;
	size_t head, len, cap;
};

static int ack_fifo_push(struct ack_fifo *f, uint64_t end, uint64_t due_ms)
{
	if (f->len == f->cap) {
		size_t cap = f->cap ? f->cap * 2 : 64;
		struct ack_entry *e = malloc(cap * sizeof(*e));

		if (!e)
			return -ENOMEM;
		for (size_t i = 0; i < f->len; i++)
			e[i] = f->e[(f->head + i) % f->cap];
		free(f->e);
		f->e = e;
		f->head = 0;
		f->cap = cap;
	}
	f->e[(f->head + f->len) % f->cap] = (struct ack_entry) { end, due_ms };
	f->len++;
	return 0;
}

static const char *op_name(uint16_t op)
{
	switch (op) {
	case DM_REPL_OP_WRITE:		return "write";
	case DM_REPL_OP_FLUSH:		return "flush";
	case DM_REPL_OP_DISCARD:	return "discard";
	case DM_REPL_OP_WRITE_ZEROES:	return "zeroes";
	case DM_REPL_OP_GAP:		return "gap";
	default:			return NULL;
	}
}

static void flags_str(uint16_t flags, char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = '\0';
	if (flags & DM_REPL_F_FUA)
		n += (size_t)snprintf(buf + n, len - n, "%sfua", n ? "," : "");
	if (flags & DM_REPL_F_SYNC)
		n += (size_t)snprintf(buf + n, len - n, "%ssync", n ? "," : "");
	flags &= (uint16_t)~(DM_REPL_F_FUA | DM_REPL_F_SYNC);
	if (flags)
		n += (size_t)snprintf(buf + n, len - n, "%s0x%x", n ? "," : "", flags);
	if (!n)
		snprintf(buf, len, "-");
}

static void state_str(uint32_t state, char *buf, size_t len)
{
	static const char *const names[] = { "sync", "degraded", "overflow", "dirty" };
	size_t n = 0;

	buf[0] = '\0';
	for (unsigned int i = 0; i < 4; i++)
		if (state & (1U << i))
			n += (size_t)snprintf(buf + n, len - n, "%s%s", n ? "," : "", names[i]);
	if (state >> 4)
		n += (size_t)snprintf(buf + n, len - n, "%s0x%x", n ? "," : "", state >> 4);
	if (!n)
		snprintf(buf, len, "ok");
}

static int payload_save(const char *dir, uint64_t seq, const void *p, uint32_t len)
{
	char path[PATH_MAX];
	ssize_t n;
	int fd, err = 0;

	snprintf(path, sizeof(path), "%s/%" PRIu64, dir, seq);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	n = write(fd, p, len);
	if (n < 0)
		err = -errno;
	else if ((uint32_t)n != len)
		err = -EIO;
	if (close(fd) < 0 && !err)
		err = -errno;
	return err;
}

struct dump_state {
	struct ring *r;
	const struct dump_opts *o;
	uint64_t first, seq;		/* first record, next to read */
	uint64_t released, acked;	/* what we published */
	uint64_t nread, bytes;
	uint64_t epoch;
	bool have_epoch;
	bool ack_file_seen;
	uint64_t next_ack_ms;		/* --ack-interval-ms: next ack then */
	bool failed;			/* a bad record was seen */
	struct ack_fifo fifo;
};

/* How far may we acknowledge now?  *ret_next_ms: when that may grow. */
static uint64_t dump_ack_target(struct dump_state *d, uint64_t now, int *ret_next_ms)
{
	uint64_t target = d->seq;

	*ret_next_ms = -1;
	if (d->o->no_ack)
		return d->acked;
	if (d->o->ack_file && !d->ack_file_seen) {
		if (access(d->o->ack_file, F_OK) < 0) {
			*ret_next_ms = d->seq > d->acked ? 50 : -1;
			return d->acked;
		}
		d->ack_file_seen = true;
	}
	if (d->o->ack_delay_ms) {
		target = d->acked;
		while (d->fifo.len) {
			struct ack_entry *e = &d->fifo.e[d->fifo.head];

			if (e->due_ms > now) {
				*ret_next_ms = (int)(e->due_ms - now);
				break;
			}
			target = e->end;
			d->fifo.head = (d->fifo.head + 1) % d->fifo.cap;
			d->fifo.len--;
		}
	}
	/* A previous consumer may have acknowledged what it did not release. */
	if (target < d->acked)
		target = d->acked;
	if (d->o->ack_interval_ms && target > d->acked) {
		if (now < d->next_ack_ms) {
			*ret_next_ms = (int)(d->next_ack_ms - now);
			return d->acked;
		}
		target = d->acked + 1;
		d->next_ack_ms = now + (uint64_t)d->o->ack_interval_ms;
		*ret_next_ms = d->o->ack_interval_ms;
	}
	return target;
}

static int dump_update(struct dump_state *d, int *ret_next_ms)
{
	uint64_t release = d->o->no_release ? d->released : d->seq;
	uint64_t ack = dump_ack_target(d, now_ms(), ret_next_ms);
	int err;

	err = ring_update(d->r, release, ack);
	if (err < 0) {
		errmsg("dump: update release=%" PRIu64 " ack=%" PRIu64 ": %s",
		      release, ack, strerror(-err));
		return err;
	}
	d->released = release;
	d->acked = ack;
	return 0;
}

/* Read, check and print one record. */
static int dump_record(struct dump_state *d)
{
	const struct dm_repl_rec *rec = ring_rec(d->r, d->seq);
	struct dm_repl_rec c;
	const void *p;
	uint32_t len;
	char flags[64], xxh[20] = "-", opbuf[16];
	const char *name;
	int err;

	if (!rec) {
		errmsg("dump: record %" PRIu64 " missing (prod %" PRIu64 ")",
		      d->seq, ring_prod(d->r));
		return -EPROTO;
	}
	err = ring_payload(d->r, rec, &p, &len);
	if (err < 0) {
		errmsg("dump: record %" PRIu64 ": bad payload reference: %s",
		      d->seq, strerror(-err));
		return err;
	}
	memcpy(&c, rec, sizeof(c));
	if (len && !d->o->no_hash)
		snprintf(xxh, sizeof(xxh), "%016llx",
			 (unsigned long long)XXH64(p, len, 0));
	flags_str(c.flags, flags, sizeof(flags));
	name = op_name(c.op);
	if (!name) {
		snprintf(opbuf, sizeof(opbuf), "op%u", c.op);
		name = opbuf;
	}
	printf("seq=%llu op=%s sector=%llu sectors=%u flags=%s epoch=%llu len=%u xxh=%s\n",
	       (unsigned long long)c.seq, name, (unsigned long long)c.sector,
	       c.nr_sectors, flags, (unsigned long long)c.epoch, len, xxh);
	fflush(stdout);

	if (!op_name(c.op)) {
		errmsg("dump: record %" PRIu64 ": unknown op %u", d->seq, c.op);
		d->failed = true;
	}
	if (c.op == DM_REPL_OP_GAP && !d->o->gap_ok) {
		errmsg("dump: record %" PRIu64 ": unexpected GAP (writes were not logged; use --gap-ok)",
		      d->seq);
		d->failed = true;
	}
	if (d->have_epoch && c.epoch != d->epoch) {
		errmsg("dump: record %" PRIu64 ": epoch %llu, expected %" PRIu64,
		      d->seq, (unsigned long long)c.epoch, d->epoch);
		d->failed = true;
	}
	d->epoch = c.epoch + (c.op == DM_REPL_OP_FLUSH);
	d->have_epoch = true;

	if (d->o->payload_dir && len) {
		err = payload_save(d->o->payload_dir, d->seq, p, len);
		if (err < 0) {
			errmsg("dump: save payload of %" PRIu64 " in %s: %s",
			      d->seq, d->o->payload_dir, strerror(-err));
			return err;
		}
	}
	d->seq++;
	d->nread++;
	d->bytes += len;
	ring_mark_read(d->r, d->seq);
	return 0;
}

static void dump_summary(const struct dump_state *d)
{
	struct ring_info info;

	ring_get_info(d->r, &info);
	if (d->o->status) {
		char st[64];

		state_str(info.state, st, sizeof(st));
		printf("status state=%s state_seq=%u prod=%" PRIu64 " read=%" PRIu64
		       " release=%" PRIu64 " ack=%" PRIu64 " epoch=%" PRIu64
		       " dirty_regions=%" PRIu64 " overflows=%" PRIu64
		       " hold_timeouts=%" PRIu64 "\n",
		       st, info.state_seq, info.prod_seq, info.read_seq,
		       info.release_seq, info.ack_seq, info.epoch,
		       info.dirty_regions, info.overflows, info.hold_timeouts);
		fflush(stdout);
	}
	fprintf(stderr, PROG ": dump: records=%" PRIu64 " bytes=%" PRIu64
		" wakeups=%" PRIu64 " sleeps=%" PRIu64 " kicks=%" PRIu64
		" first=%" PRIu64 " next=%" PRIu64 " released=%" PRIu64
		" acked=%" PRIu64 "\n", d->nread, d->bytes, info.nr_wakeups,
		info.nr_sleeps, info.nr_kicks, d->first, d->seq, d->released,
		d->acked);
}

static int dump_run(const struct dump_opts *o)
{
	_cleanup_(ring_freep) struct ring *r = NULL;
	struct dump_state d = { .o = o };
	struct ring_info info;
	struct stat st;
	uint64_t last_progress;
	int err, ret = EXIT_ERROR;

	if (stat(o->dev, &st) < 0) {
		errmsg("%s: %s", o->dev, strerror(errno));
		return EXIT_ERROR;
	}
	if (!S_ISBLK(st.st_mode)) {
		errmsg("%s: not a block device", o->dev);
		return EXIT_ERROR;
	}
	err = ring_attach(NULL, st.st_rdev, &r);
	if (err == -ENOENT && access(RING_CTL_PATH, F_OK) < 0) {
		errmsg("attach %s: %s: %s (dm-repl not loaded?)", o->dev,
		       RING_CTL_PATH, strerror(-err));
		return EXIT_ERROR;
	}
	if (err < 0) {
		errmsg("attach %s: %s", o->dev, strerror(-err));
		return EXIT_ERROR;
	}
	ring_get_info(r, &info);
	d.r = r;
	d.first = d.seq = d.released = info.release_seq;
	d.acked = info.ack_seq;
	last_progress = now_ms();

	for (;;) {
		uint64_t prod = ring_prod(r), now;
		bool done, progress = false;
		int next_ms, wait_ms;

		while (d.seq < prod && !(o->count && d.nread >= o->count)) {
			err = dump_record(&d);
			if (err < 0)
				goto out;
			progress = true;
			if (o->exit_after && d.nread >= o->exit_after) {
				/* A killed consumer: no update for what we read. */
				ret = d.failed ? EXIT_ERROR : 0;
				goto out;
			}
			if (d.seq - d.released >= DUMP_BATCH ||
			    d.seq - d.acked >= DUMP_BATCH) {
				if (dump_update(&d, &next_ms) < 0)
					goto out;
			}
		}
		now = now_ms();
		if (progress) {
			last_progress = now;
			if (o->ack_delay_ms &&
			    ack_fifo_push(&d.fifo, d.seq, now + (uint64_t)o->ack_delay_ms) < 0) {
				errmsg("dump: %s", strerror(ENOMEM));
				goto out;
			}
		}
		/* Everything consumed is released/acked before waiting. */
		if (dump_update(&d, &next_ms) < 0)
			goto out;

		done = o->count && d.nread >= o->count;
		if (done && (o->no_ack || d.acked == d.seq)) {
			ret = d.failed ? EXIT_ERROR : 0;
			goto out;
		}
		if (now - last_progress >= (uint64_t)o->timeout_ms) {
			if (done)
				errmsg("dump: timed out after %d ms waiting to acknowledge (acked %"
				      PRIu64 " of %" PRIu64 ")", o->timeout_ms, d.acked, d.seq);
			else if (o->count)
				errmsg("dump: timed out after %d ms without a record: %" PRIu64
				      " of %" PRIu64 " records", o->timeout_ms, d.nread, o->count);
			ret = d.failed ? EXIT_ERROR : (o->count ? EXIT_TIMEOUT : 0);
			goto out;
		}
		wait_ms = (int)((uint64_t)o->timeout_ms - (now - last_progress));
		if (next_ms >= 0 && next_ms < wait_ms)
			wait_ms = next_ms;
		if (done) {
			/* Only waiting for acks to become due: sleep, do not read. */
			struct timespec ts = {
				.tv_sec = wait_ms / 1000,
				.tv_nsec = (long)(wait_ms % 1000) * 1000000,
			};

			nanosleep(&ts, NULL);
			continue;
		}
		err = ring_wait(r, wait_ms);
		if (err < 0 && err != -EINTR) {
			errmsg("dump: wait: %s", strerror(-err));
			goto out;
		}
	}
out:
	dump_summary(&d);
	free(d.fifo.e);
	return ret;
}

static const char dump_usage[] =
	"Usage: " PROG " dump <dm-device> [options]\n"
	"  --count N            stop after N records (exit 2 on timeout before)\n"
	"  --timeout-ms T       give up after T ms without a record (10000)\n"
	"  --no-release         never release records\n"
	"  --no-ack             never acknowledge records\n"
	"  --ack-delay-ms D     acknowledge a record D ms after reading it\n"
	"  --ack-after-file P   acknowledge nothing until file P exists\n"
	"  --ack-interval-ms P  acknowledge at most one record every P ms\n"
	"  --exit-after N       exit right after reading N records, without\n"
	"                       releasing/acking them (a killed consumer)\n"
	"  --payload-dir DIR    write each payload to DIR/<seq>\n"
	"  --gap-ok             a GAP record is not an error\n"
	"  --status             print a status line from the header at exit\n"
	"  --no-hash            do not read payloads (xxh=-): a drain for benchmarks\n";

static int cmd_dump(int argc, char **argv)
{
	enum { O_COUNT = 256, O_TIMEOUT, O_NO_RELEASE, O_NO_ACK, O_ACK_DELAY,
	       O_ACK_FILE, O_EXIT_AFTER, O_PAYLOAD_DIR, O_GAP_OK, O_STATUS,
	       O_NO_HASH, O_ACK_INTERVAL };
	static const struct option opts[] = {
		{ "count", required_argument, NULL, O_COUNT },
		{ "timeout-ms", required_argument, NULL, O_TIMEOUT },
		{ "no-release", no_argument, NULL, O_NO_RELEASE },
		{ "no-ack", no_argument, NULL, O_NO_ACK },
		{ "ack-delay-ms", required_argument, NULL, O_ACK_DELAY },
		{ "ack-after-file", required_argument, NULL, O_ACK_FILE },
		{ "exit-after", required_argument, NULL, O_EXIT_AFTER },
		{ "payload-dir", required_argument, NULL, O_PAYLOAD_DIR },
		{ "gap-ok", no_argument, NULL, O_GAP_OK },
		{ "status", no_argument, NULL, O_STATUS },
		{ "no-hash", no_argument, NULL, O_NO_HASH },
		{ "ack-interval-ms", required_argument, NULL, O_ACK_INTERVAL },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct dump_opts o = { .timeout_ms = 10000 };
	int c;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		bool ok = true;

		switch (c) {
		case O_COUNT:		ok = parse_u64(optarg, &o.count); break;
		case O_TIMEOUT:		ok = parse_int(optarg, &o.timeout_ms); break;
		case O_NO_RELEASE:	o.no_release = true; break;
		case O_NO_ACK:		o.no_ack = true; break;
		case O_ACK_DELAY:	ok = parse_int(optarg, &o.ack_delay_ms); break;
		case O_ACK_FILE:	o.ack_file = optarg; break;
		case O_EXIT_AFTER:	ok = parse_u64(optarg, &o.exit_after); break;
		case O_PAYLOAD_DIR:	o.payload_dir = optarg; break;
		case O_GAP_OK:		o.gap_ok = true; break;
		case O_STATUS:		o.status = true; break;
		case O_NO_HASH:		o.no_hash = true; break;
		case O_ACK_INTERVAL:	ok = parse_int(optarg, &o.ack_interval_ms); break;
		case 'h':		fputs(dump_usage, stdout); return 0;
		default:		fputs(dump_usage, stderr); return EXIT_ERROR;
		}
		if (!ok) {
			errmsg("dump: invalid number for --%s: %s",
			      opts[c - O_COUNT].name, optarg);
			return EXIT_ERROR;
		}
	}
	if (optind + 1 != argc) {
		fputs(dump_usage, stderr);
		return EXIT_ERROR;
	}
	o.dev = argv[optind];
	return dump_run(&o);
}

/* ======================================================================
 * write and pattern-check: the deterministic operation sequence
 */

enum op_kind { K_WRITE, K_FUA, K_FLUSH, K_DISCARD, K_ZEROES };

struct seq_opts {
	const char *dev;
	uint64_t seed;
	uint64_t count;
	uint64_t max_kb;
	uint64_t flush_every, fua_every, discard_every, zeroes_every;
	uint64_t region_mb;
	uint64_t split_kb;
	bool initial_zero;
	bool discard_zero;
	bool have_seed, have_count;
};

struct gen_op {
	enum op_kind kind;
	uint64_t off;		/* bytes */
	uint64_t len;		/* bytes, 0 for a flush */
};

static bool every(uint64_t m, uint64_t i)
{
	return m && (i + 1) % m == 0;
}

/* Operation i of the sequence: a function of (seed, i) and the options. */
static void gen_op(const struct seq_opts *o, uint64_t region, uint64_t i,
		   struct gen_op *ret)
{
	uint64_t a = mix64(o->seed * 0x9e3779b97f4a7c15ULL + 2 * i + 1);
	uint64_t b = mix64(o->seed * 0x9e3779b97f4a7c15ULL + 2 * i + 2);
	uint64_t blocks = region / BLOCK, nblk;

	if (every(o->flush_every, i)) {
		*ret = (struct gen_op) { .kind = K_FLUSH };
		return;
	}
	if (every(o->discard_every, i))
		ret->kind = K_DISCARD;
	else if (every(o->zeroes_every, i))
		ret->kind = K_ZEROES;
	else if (every(o->fua_every, i))
		ret->kind = K_FUA;
	else
		ret->kind = K_WRITE;
	nblk = 1 + a % (o->max_kb * 1024 / BLOCK);
	if (nblk > blocks)
		nblk = blocks;
	ret->off = (b % (blocks - nblk + 1)) * BLOCK;
	ret->len = nblk * BLOCK;
}

/* Device limits that decide how operations become records. */
struct dev_info {
	bool blk;
	bool wc;			/* volatile write cache: flush/FUA kept */
	uint64_t size;
	uint64_t max_io;		/* bytes: min(max_sectors, split) per write piece */
	uint64_t split;			/* bytes: the table's record_kb */
	uint64_t discard_max;		/* bytes, 0: no discard */
	uint64_t discard_gran;		/* bytes */
	uint64_t wz_max;		/* bytes, 0: no write-zeroes */
};

static bool sysfs_read(dev_t dev, const char *attr, char *buf, size_t len)
{
	char path[128];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/sys/dev/block/%u:%u/queue/%s",
		 major(dev), minor(dev), attr);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	return true;
}

static uint64_t sysfs_u64(dev_t dev, const char *attr, uint64_t dflt)
{
	char buf[64];
	uint64_t v;

	if (!sysfs_read(dev, attr, buf, sizeof(buf)) || !parse_u64(buf, &v))
		return dflt;
	return v;
}

static int dev_open(const struct seq_opts *o, int flags, struct dev_info *ret)
{
	struct dev_info di = { .wc = true };
	struct stat st;
	char buf[64];
	int fd;

	fd = dev_open_direct(o->dev, flags, &st, &di.size);
	if (fd < 0)
		return -1;
	di.split = o->split_kb * 1024;
	if (S_ISBLK(st.st_mode)) {
		di.blk = true;
		if (sysfs_read(st.st_rdev, "write_cache", buf, sizeof(buf)))
			di.wc = strcmp(buf, "write through") != 0;
		di.max_io = sysfs_u64(st.st_rdev, "max_sectors_kb", 0) * 1024;
		di.discard_max = sysfs_u64(st.st_rdev, "discard_max_bytes", 0);
		di.discard_gran = sysfs_u64(st.st_rdev, "discard_granularity", 512);
		di.wz_max = sysfs_u64(st.st_rdev, "write_zeroes_max_bytes", 0);
	}
	*ret = di;
	return fd;
}

static uint64_t seq_region(const struct seq_opts *o, const struct dev_info *di)
{
	uint64_t region = di->size;

	if (o->region_mb && (o->region_mb << 20) < region)
		region = o->region_mb << 20;
	return region / BLOCK * BLOCK;
}

static void print_rec(const char *op, uint64_t off, uint64_t len,
		      const void *payload, bool fua)
{
	char xxh[20] = "-";

	if (payload && len)
		snprintf(xxh, sizeof(xxh), "%016llx",
			 (unsigned long long)XXH64(payload, len, 0));
	printf("op=%s sector=%" PRIu64 " sectors=%" PRIu64 " len=%" PRIu64
	       " xxh=%s fua=%d\n", op, off >> 9, len >> 9,
	       payload ? len : 0, xxh, fua);
}

/* Write records as dm-repl cuts them: record_kb, and dm core's max_sectors. */
static void print_write(const struct dev_info *di, uint64_t off, uint64_t len,
			const uint8_t *payload, bool fua)
{
	while (len) {
		uint64_t piece = len;

		if (di->blk && di->split && piece > di->split - off % di->split)
			piece = di->split - off % di->split;
		if (di->blk && di->max_io && piece > di->max_io)
			piece = di->max_io;
		print_rec("write", off, piece, payload, fua);
		off += piece;
		len -= piece;
		payload += piece;
	}
}

/* Discard pieces: blkdev_issue_discard(), then bio_split_discard(). */
static void print_discard(const struct dev_info *di, uint64_t off, uint64_t len)
{
	uint64_t gran = di->discard_gran > 512 ? di->discard_gran >> 9 : 1;
	uint64_t maxd = (di->discard_max >> 9 < UINT_MAX >> 9 ?
			 di->discard_max >> 9 : UINT_MAX >> 9);
	uint64_t sector = off >> 9, nr = len >> 9;

	maxd -= maxd % gran;
	if (!di->blk || !maxd) {
		print_rec("discard", off, len, NULL, false);
		return;
	}
	while (nr) {
		uint64_t aligned = (sector + gran - 1) / gran * gran;
		uint64_t c1 = aligned != sector ? aligned - sector :
			      ((uint64_t)UINT_MAX / (gran << 9) * (gran << 9)) >> 9;

		if (c1 > nr)
			c1 = nr;
		nr -= c1;
		while (c1) {
			uint64_t piece = c1;

			if (piece > maxd) {
				uint64_t tmp = (sector + maxd) % gran;

				piece = maxd > tmp ? maxd - tmp : maxd;
			}
			print_rec("discard", sector << 9, piece << 9, NULL, false);
			sector += piece;
			c1 -= piece;
		}
	}
}

/* BLKZEROOUT: write-zeroes pieces, or zero-filled writes of <= 1 MiB. */
static void print_zeroes(const struct dev_info *di, uint64_t off, uint64_t len,
			 const uint8_t *zeroes)
{
	uint64_t chunk = di->blk ? (di->wz_max ? di->wz_max : 1U << 20) : len;

	while (len) {
		uint64_t piece = len < chunk ? len : chunk;

		if (!di->blk || di->wz_max)
			print_rec("zeroes", off, piece, NULL, false);
		else
			print_write(di, off, piece, zeroes, false);
		off += piece;
		len -= piece;
	}
}

static bool write_all(int fd, const void *buf, uint64_t len, uint64_t off)
{
	ssize_t n = pwrite(fd, buf, len, (off_t)off);

	if (n < 0)
		return false;
	if ((uint64_t)n != len) {
		errno = EIO;
		return false;
	}
	return true;
}

static int write_run(const struct seq_opts *o)
{
	struct dev_info di;
	uint64_t region, range[2];
	uint8_t *buf = NULL, *zeroes = NULL;
	int fd, fua_fd = -1, ret = EXIT_ERROR;

	fd = dev_open(o, O_RDWR, &di);
	if (fd < 0)
		return EXIT_ERROR;
	region = seq_region(o, &di);
	if (region < BLOCK) {
		errmsg("%s: region too small (%" PRIu64 " bytes)", o->dev, region);
		goto out;
	}
	if (o->fua_every) {
		fua_fd = open(o->dev, O_RDWR | O_DSYNC | O_CLOEXEC |
			      (di.blk ? O_DIRECT : 0));
		if (fua_fd < 0) {
			errmsg("open %s (O_DSYNC): %s", o->dev, strerror(errno));
			goto out;
		}
	}
	buf = aligned_alloc(BLOCK, o->max_kb * 1024);
	zeroes = calloc(1, o->max_kb * 1024);
	if (!buf || !zeroes) {
		errmsg("%s", strerror(ENOMEM));
		goto out;
	}

	for (uint64_t i = 0; i < o->count; i++) {
		struct gen_op op;

		gen_op(o, region, i, &op);
		range[0] = op.off;
		range[1] = op.len;
		switch (op.kind) {
		case K_WRITE:
		case K_FUA:
			pattern_fill(o->seed, i, op.off, buf, op.len);
			if (!write_all(op.kind == K_FUA ? fua_fd : fd, buf, op.len, op.off)) {
				errmsg("write %s at %" PRIu64 " (op %" PRIu64 "): %s",
				      o->dev, op.off, i, strerror(errno));
				goto out;
			}
			print_write(&di, op.off, op.len, buf, op.kind == K_FUA && di.wc);
			/* O_DSYNC: generic_write_sync() flushes the device */
			if (op.kind == K_FUA && di.blk && di.wc)
				print_rec("flush", 0, 0, NULL, false);
			break;
		case K_FLUSH:
			if (fdatasync(fd) < 0) {
				errmsg("fdatasync %s (op %" PRIu64 "): %s", o->dev, i,
				      strerror(errno));
				goto out;
			}
			if (di.wc)
				print_rec("flush", 0, 0, NULL, false);
			break;
		case K_DISCARD:
			if (di.blk ? ioctl(fd, BLKDISCARD, range) < 0 :
			    fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
				      (off_t)op.off, (off_t)op.len) < 0) {
				errmsg("discard %s at %" PRIu64 "+%" PRIu64 " (op %" PRIu64 "): %s",
				      o->dev, op.off, op.len, i, strerror(errno));
				goto out;
			}
			print_discard(&di, op.off, op.len);
			break;
		case K_ZEROES:
			if (di.blk ? ioctl(fd, BLKZEROOUT, range) < 0 :
			    fallocate(fd, FALLOC_FL_ZERO_RANGE, (off_t)op.off,
				      (off_t)op.len) < 0) {
				errmsg("zeroout %s at %" PRIu64 "+%" PRIu64 " (op %" PRIu64 "): %s",
				      o->dev, op.off, op.len, i, strerror(errno));
				goto out;
			}
			print_zeroes(&di, op.off, op.len, zeroes);
			break;
		}
		fflush(stdout);
	}
	ret = 0;
out:
	free(buf);
	free(zeroes);
	if (fua_fd >= 0)
		close(fua_fd);
	close(fd);
	return ret;
}

/* What the final content of a block must be. */
#define BS_NONE		0	/* never written */
#define BS_WRITE	1
#define BS_ZERO		2
#define BS_DISCARD	3
#define BS_KIND(v)	((v) & 3)
#define BS_OP(v)	(((v) >> 2) - 1)

static const char *const bs_names[] = { "none", "write", "zeroes", "discard" };

static int check_run(const struct seq_opts *o)
{
	struct dev_info di;
	uint64_t region, blocks, chunk = 1U << 20, checked = 0, skipped = 0;
	uint64_t *state = NULL, *expect = NULL;
	uint8_t *buf = NULL;
	int fd, ret = EXIT_ERROR;

	fd = dev_open(o, O_RDONLY, &di);
	if (fd < 0)
		return EXIT_ERROR;
	region = seq_region(o, &di);
	if (region < BLOCK) {
		errmsg("%s: region too small (%" PRIu64 " bytes)", o->dev, region);
		goto out;
	}
	blocks = region / BLOCK;
	state = calloc(blocks, sizeof(*state));
	buf = aligned_alloc(BLOCK, chunk);
	expect = malloc(BLOCK);
	if (!state || !buf || !expect) {
		errmsg("%s", strerror(ENOMEM));
		goto out;
	}

	for (uint64_t i = 0; i < o->count; i++) {
		struct gen_op op;
		uint64_t v;

		gen_op(o, region, i, &op);
		switch (op.kind) {
		case K_FLUSH:	continue;
		case K_WRITE:
		case K_FUA:	v = BS_WRITE; break;
		case K_ZEROES:	v = BS_ZERO; break;
		case K_DISCARD:	v = BS_DISCARD; break;
		default:	continue;
		}
		v |= (i + 1) << 2;
		for (uint64_t b = op.off / BLOCK; b < (op.off + op.len) / BLOCK; b++)
			state[b] = v;
	}

	for (uint64_t off = 0; off < region; off += chunk) {
		uint64_t n = region - off < chunk ? region - off : chunk;
		ssize_t got = pread(fd, buf, n, (off_t)off);

		if (got < 0 || (uint64_t)got != n) {
			errmsg("read %s at %" PRIu64 ": %s", o->dev, off,
			      got < 0 ? strerror(errno) : "short read");
			goto out;
		}
		for (uint64_t k = 0; k < n; k += BLOCK) {
			uint64_t pos = off + k, v = state[pos / BLOCK];
			const uint8_t *got_b = buf + k;
			unsigned int kind = BS_KIND(v);

			if ((kind == BS_NONE && !o->initial_zero) ||
			    (kind == BS_DISCARD && !o->discard_zero)) {
				skipped++;
				continue;
			}
			if (kind == BS_WRITE)
				pattern_fill(o->seed, BS_OP(v), pos, expect, BLOCK);
			else
				memset(expect, 0, BLOCK);
			if (memcmp(got_b, expect, BLOCK)) {
				unsigned int at = 0;

				while (got_b[at] == ((uint8_t *)expect)[at])
					at++;
				if (kind == BS_NONE)
					errmsg("pattern-check: mismatch at offset %" PRIu64
					      " (sector %" PRIu64 "), byte +%u: block never written, expected zeroes",
					      pos, pos >> 9, at);
				else
					errmsg("pattern-check: mismatch at offset %" PRIu64
					      " (sector %" PRIu64 "), byte +%u: block last changed by op %"
					      PRIu64 " (%s)", pos, pos >> 9, at, BS_OP(v),
					      bs_names[kind]);
				goto out;
			}
			checked++;
		}
	}
	fprintf(stderr, PROG ": pattern-check: %s: %" PRIu64 " blocks match, %"
		PRIu64 " not checked\n", o->dev, checked, skipped);
	ret = 0;
out:
	free(state);
	free(buf);
	free(expect);
	close(fd);
	return ret;
}

static const char seq_usage[] =
	"Usage: " PROG " write|pattern-check <device> --seed S --count N [options]\n"
	"  --seed S             sequence seed (required)\n"
	"  --count N            number of operations (required)\n"
	"  --max-kb K           largest write/discard/zeroes, multiple of 4, <= 1024 (64)\n"
	"  --flush-every M      every M-th operation is a flush (fdatasync)\n"
	"  --fua-every M        every M-th operation is a FUA write (O_DSYNC)\n"
	"  --discard-every M    every M-th operation is a discard (BLKDISCARD)\n"
	"  --zeroes-every M     every M-th operation is a write-zeroes (BLKZEROOUT)\n"
	"  --region-mb R        use only the first R MiB of the device\n"
	"  --split-kb K         the table's record_kb, for predicting records (256; 0: none)\n"
	"pattern-check only:\n"
	"  --initial-zero       blocks never written must read as zeroes\n"
	"  --discard-zero       discarded blocks must read as zeroes\n";

static int cmd_seq(int argc, char **argv, bool check)
{
	enum { O_SEED = 256, O_COUNT, O_MAX_KB, O_FLUSH, O_FUA, O_DISCARD,
	       O_ZEROES, O_REGION, O_SPLIT, O_INITIAL_ZERO, O_DISCARD_ZERO };
	static const struct option opts[] = {
		{ "seed", required_argument, NULL, O_SEED },
		{ "count", required_argument, NULL, O_COUNT },
		{ "max-kb", required_argument, NULL, O_MAX_KB },
		{ "flush-every", required_argument, NULL, O_FLUSH },
		{ "fua-every", required_argument, NULL, O_FUA },
		{ "discard-every", required_argument, NULL, O_DISCARD },
		{ "zeroes-every", required_argument, NULL, O_ZEROES },
		{ "region-mb", required_argument, NULL, O_REGION },
		{ "split-kb", required_argument, NULL, O_SPLIT },
		{ "initial-zero", no_argument, NULL, O_INITIAL_ZERO },
		{ "discard-zero", no_argument, NULL, O_DISCARD_ZERO },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct seq_opts o = { .max_kb = 64, .split_kb = DEFAULT_SPLIT_KB };
	int c;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		bool ok = true;

		switch (c) {
		case O_SEED:	ok = parse_u64(optarg, &o.seed); o.have_seed = true; break;
		case O_COUNT:	ok = parse_u64(optarg, &o.count); o.have_count = true; break;
		case O_MAX_KB:	ok = parse_u64(optarg, &o.max_kb); break;
		case O_FLUSH:	ok = parse_u64(optarg, &o.flush_every); break;
		case O_FUA:	ok = parse_u64(optarg, &o.fua_every); break;
		case O_DISCARD:	ok = parse_u64(optarg, &o.discard_every); break;
		case O_ZEROES:	ok = parse_u64(optarg, &o.zeroes_every); break;
		case O_REGION:	ok = parse_u64(optarg, &o.region_mb) && o.region_mb < (1ULL << 40); break;
		case O_SPLIT:	ok = parse_u64(optarg, &o.split_kb) && o.split_kb % 4 == 0 &&
				     o.split_kb < (1ULL << 30); break;
		case O_INITIAL_ZERO: o.initial_zero = true; break;
		case O_DISCARD_ZERO: o.discard_zero = true; break;
		case 'h':	fputs(seq_usage, stdout); return 0;
		default:	fputs(seq_usage, stderr); return EXIT_ERROR;
		}
		if (!ok) {
			errmsg("invalid value for --%s: %s", opts[c - O_SEED].name, optarg);
			return EXIT_ERROR;
		}
	}
	if (optind + 1 != argc || !o.have_seed || !o.have_count) {
		fputs(seq_usage, stderr);
		return EXIT_ERROR;
	}
	if (!o.max_kb || o.max_kb % 4 || o.max_kb > 1024) {
		errmsg("--max-kb must be a multiple of 4 between 4 and 1024");
		return EXIT_ERROR;
	}
	o.dev = argv[optind];
	return check ? check_run(&o) : write_run(&o);
}

/*
 * dirty <dm-device>: attach, print the dirty bitmap as
 *   regions=<n> region_bytes=<b> dirty=<d>
 * followed by one line "range <first> <last>" (region indices, inclusive)
 * per run of dirty regions; detach without touching the ring.
 */
static int cmd_dirty(int argc, char **argv)
{
	_cleanup_(ring_freep) struct ring *r = NULL;
	uint8_t *map = NULL;
	struct dm_repl_dirty d;
	struct stat st;
	uint64_t i, first = 0;
	bool in = false;
	int err;

	if (argc != 2 || !strcmp(argv[1], "--help")) {
		fputs("Usage: " PROG " dirty <dm-device>\n", argc == 2 ? stdout : stderr);
		return argc == 2 ? 0 : EXIT_ERROR;
	}
	if (stat(argv[1], &st) < 0 || !S_ISBLK(st.st_mode)) {
		errmsg("%s: not a block device", argv[1]);
		return EXIT_ERROR;
	}
	err = ring_attach(NULL, st.st_rdev, &r);
	if (err >= 0)
		err = ring_get_dirty(r, NULL, 0, &d);
	if (err >= 0) {
		map = calloc(1, (d.nr_regions + 7) / 8);
		err = map ? ring_get_dirty(r, map, (d.nr_regions + 7) / 8, &d) : -ENOMEM;
	}
	if (err < 0) {
		errmsg("dirty %s: %s", argv[1], strerror(-err));
		free(map);
		return EXIT_ERROR;
	}
	printf("regions=%llu region_bytes=%llu dirty=%llu\n",
	       (unsigned long long)d.nr_regions, (unsigned long long)d.region_bytes,
	       (unsigned long long)d.dirty_regions);
	for (i = 0; i <= d.nr_regions; i++) {
		bool set = i < d.nr_regions && (map[i / 8] >> (i % 8)) & 1;

		if (set && !in)
			first = i;
		else if (!set && in)
			printf("range %" PRIu64 " %" PRIu64 "\n", first, i - 1);
		in = set;
	}
	free(map);
	return 0;
}

/*
 * regions <dm-device> mark|clear <first> <count> [<gen>]: attach and mark
 * regions [first, first + count) dirty (DM_REPL_IOC_MARK_DIRTY), or clear
 * them (DM_REPL_IOC_CLEAR_DIRTY with generation <gen>, by default that of
 * a GET_DIRTY taken just before); print
 *   regions: <mark|clear> <first>+<count>: ok dirty=<d> gen=<g>
 * (the counts after it) and detach without touching the ring.  Exit 0, 3
 * when the clear was refused with EAGAIN (a region was marked since that
 * generation), 1 on other errors.
 */
static int cmd_regions(int argc, char **argv)
{
	_cleanup_(ring_freep) struct ring *r = NULL;
	struct dm_repl_dirty d;
	uint64_t first, count, gen = 0;
	struct stat st;
	bool clear;
	int err;

	clear = argc >= 3 && !strcmp(argv[2], "clear");
	if ((argc != 5 && !(clear && argc == 6)) ||
	    (strcmp(argv[2], "mark") && !clear) ||
	    !parse_u64(argv[3], &first) || !parse_u64(argv[4], &count) ||
	    (argc == 6 && !parse_u64(argv[5], &gen))) {
		fputs("Usage: " PROG " regions <dm-device> mark|clear <first> <count> [<gen>]\n",
		      stderr);
		return EXIT_ERROR;
	}
	if (stat(argv[1], &st) < 0 || !S_ISBLK(st.st_mode)) {
		errmsg("%s: not a block device", argv[1]);
		return EXIT_ERROR;
	}
	err = ring_attach(NULL, st.st_rdev, &r);
	if (err >= 0 && clear && argc == 5) {
		err = ring_get_dirty(r, NULL, 0, &d);
		gen = d.dirty_gen;
	}
	if (err >= 0)
		err = clear ? ring_clear_dirty(r, first, count, gen) :
			      ring_mark_dirty(r, first, count);
	if (err >= 0)
		err = ring_get_dirty(r, NULL, 0, &d);
	if (err == -EAGAIN) {
		errmsg("regions %s: clear %" PRIu64 "+%" PRIu64 ": %s", argv[1], first, count,
		       strerror(-err));
		return 3;
	}
	if (err < 0) {
		errmsg("regions %s: %s %" PRIu64 "+%" PRIu64 ": %s", argv[1], argv[2], first,
		       count, strerror(-err));
		return EXIT_ERROR;
	}
	printf("regions: %s %" PRIu64 "+%" PRIu64 ": ok dirty=%llu gen=%llu\n", argv[2], first,
	       count, (unsigned long long)d.dirty_regions, (unsigned long long)d.dirty_gen);
	return 0;
}

static const char usage[] =
	"Usage: " PROG " <command> [options]\n"
	"  dump <dm-device>         print the records of a repl device's ring\n"
	"  dirty <dm-device>        print the dirty bitmap of a repl device\n"
	"  regions <dm-device> mark|clear <first> <count> [<gen>]\n"
	"                           mark regions dirty, or clear them\n"
	"  write <device>           deterministic serial I/O, print expected records\n"
	"  pattern-check <device>   check the device holds the final state of 'write'\n"
	"'" PROG " <command> --help' for the options.  Exit 0 ok, 1 error,\n"
	"2 timeout (dump).\n";

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 2) {
		fputs(usage, stderr);
		return EXIT_ERROR;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		fputs(usage, stdout);
		return 0;
	}
	if (!strcmp(argv[1], "dump"))
		return cmd_dump(argc - 1, argv + 1);
	if (!strcmp(argv[1], "write"))
		return cmd_seq(argc - 1, argv + 1, false);
	if (!strcmp(argv[1], "pattern-check"))
		return cmd_seq(argc - 1, argv + 1, true);
	if (!strcmp(argv[1], "dirty"))
		return cmd_dirty(argc - 1, argv + 1);
	if (!strcmp(argv[1], "regions"))
		return cmd_regions(argc - 1, argv + 1);
	errmsg("unknown command '%s'", argv[1]);
	fputs(usage, stderr);
	return EXIT_ERROR;
}
