// SPDX-License-Identifier: GPL-2.0-only
/*
 * libreplapply, the secondary's write engine.
 *
 * test-apply fake [records [seed]]
 *   A fake backend completes operations in random order after random
 *   delays (and sometimes accepts only part of a batch, or refuses
 *   RWF_DSYNC), and records a trace of submissions, completions and the
 *   progress values the engine reported.  Random record streams over a
 *   small device (overlaps everywhere, FLUSH every ~50, FUA every ~30
 *   writes, discards, write-zeroes, gaps) are applied, then the trace is
 *   checked:
 *     (a) no record was issued while an earlier overlapping record was
 *         queued or in flight;
 *     (b) no record was issued while an earlier FLUSH was incomplete;
 *     (c) a FLUSH was issued only after every earlier record completed;
 *     (d) received/written/durable never go backwards; written never passes
 *         an incomplete record, FUA and FLUSH records only once durable;
 *         durable never passes a record no completed fdatasync covered
 *         (or that was not a completed RWF_DSYNC write);
 *     (e) never more than queue_depth operations in flight;
 *   and the device image the fake wrote (in completion order, last write
 *   wins) must equal the serial replay of the records.  Also: argument
 *   checks, back-pressure, sticky errors.
 *
 * test-apply aio DIR [records [seed]]
 *   The real backend (libaio + worker thread) on a file in DIR (exit 77 if
 *   the file system has no O_DIRECT): random records with payloads, the file
 *   must equal the serial replay, progress must reach received == written
 *   == durable after apply_drain(); and a periodic checkpoint must make
 *   writes durable without any FLUSH record.  DIR may also be a scratch
 *   block device (/dev/...: its first 8 MiB are overwritten), for manual
 *   runs on loop devices with 512 or 4096-byte sectors.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "apply.h"

#include "check.h"
#include "seqgen.h"


static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size);

	CHECK(p, "out of memory");
	return p;
}

/* ---- record streams ------------------------------------------------------ */

struct gen {
	uint64_t rng;
	uint64_t dev_sectors;
	uint32_t max_sectors;	/* writes: 1..max_sectors */
	uint32_t align;		/* extents are multiples of this (sectors) */
	uint64_t epoch;
};

static void gen_rec(struct gen *g, uint64_t seq, struct apply_rec *r)
{
	uint64_t a = splitmix64(&g->rng), b = splitmix64(&g->rng);
	unsigned int kind = (unsigned int)(a % 1000);
	uint32_t max = g->max_sectors / g->align, nr;

	*r = (struct apply_rec) {
		.seq = seq, .epoch = g->epoch, .op = DM_REPL_OP_WRITE,
	};
	if (kind < 20) {
		r->op = DM_REPL_OP_FLUSH;
		g->epoch++;	/* this FLUSH closes epoch r->epoch */
		return;
	}
	if (kind < 22) {
		r->op = DM_REPL_OP_GAP;
		return;
	}
	if (kind < 62)
		r->op = DM_REPL_OP_DISCARD;
	else if (kind < 102)
		r->op = DM_REPL_OP_WRITE_ZEROES;
	if (r->op != DM_REPL_OP_WRITE)
		max *= 4;	/* bigger extents: more overlaps */
	nr = 1 + (uint32_t)((a >> 16) % max);
	if ((uint64_t)nr * g->align > g->dev_sectors)
		nr = (uint32_t)(g->dev_sectors / g->align);
	r->nr_sectors = nr * g->align;
	r->sector = b % (g->dev_sectors / g->align - nr + 1) * g->align;
	if (r->op == DM_REPL_OP_WRITE && (a >> 40) % 30 == 0)
		r->flags |= DM_REPL_F_FUA;
	else if (r->op != DM_REPL_OP_WRITE && (a >> 40) % 50 == 0)
		r->flags |= DM_REPL_F_FUA;
	if ((a >> 50) % 7 == 0)
		r->flags |= DM_REPL_F_SYNC;
}

/* Apply one record to an in-memory device, the serial way. */
static void replay_rec(uint8_t *img, const struct apply_rec *r)
{
	uint64_t off = r->sector << 9, len = (uint64_t)r->nr_sectors << 9;

	switch (r->op) {
	case DM_REPL_OP_WRITE:
		pattern_fill(0, r->seq, 0, img + off, len);
		break;
	case DM_REPL_OP_DISCARD:	/* the backends here zero on discard */
	case DM_REPL_OP_WRITE_ZEROES:
		memset(img + off, 0, len);
		break;
	}
}

static bool rec_has_extent(const struct apply_rec *r)
{
	return r->op == DM_REPL_OP_WRITE || r->op == DM_REPL_OP_DISCARD ||
	       r->op == DM_REPL_OP_WRITE_ZEROES;
}

/* ---- the fake backend ------------------------------------------------------ */

enum { EV_SUBMIT = 1, EV_COMPLETE, EV_PROGRESS };

struct ev {
	uint8_t kind;
	uint8_t op;
	bool dsync;
	uint64_t sid;		/* SUBMIT/COMPLETE: submission id */
	uint64_t seq;		/* SUBMIT: record or APPLY_IO_NO_SEQ */
	uint64_t offset, len;
	int64_t res;		/* COMPLETE */
	struct apply_progress p;	/* PROGRESS */
};

struct fake_op {
	struct apply_io *io;
	uint64_t deadline;
	uint64_t sid;
};

struct fake {
	struct apply_backend be;
	uint64_t rng;
	uint64_t tick;
	uint64_t next_sid;
	struct fake_op *inflight;
	size_t nr_inflight, cap;
	struct apply_io **done;
	size_t nr_done;
	uint8_t *image;
	uint64_t dev_bytes;
	unsigned int max_delay;	/* ticks */
	bool reject_dsync;	/* refuse dsync writes, like an old kernel */
	bool partial;		/* sometimes start only part of a batch */
	uint64_t fail_seq;	/* complete this record with -EIO */
	/* the records, to check the image at every FLUSH */
	const struct apply_rec *recs;
	uint64_t base;
	size_t nr_recs;
	uint8_t *serial;	/* serial replay up to serial_next */
	size_t serial_next;
	uint64_t image_checks;
	char image_error[256];	/* first mismatch: reported after the trace */
	struct ev *trace;
	size_t nr_trace, trace_cap;
};

static void fake_trace(struct fake *f, const struct ev *e)
{
	if (f->nr_trace == f->trace_cap) {
		f->trace_cap = f->trace_cap ? f->trace_cap * 2 : 4096;
		f->trace = realloc(f->trace, f->trace_cap * sizeof(*f->trace));
		CHECK(f->trace, "out of memory");
	}
	f->trace[f->nr_trace++] = *e;
}

static int fake_submit(struct apply_backend *be, struct apply_io **ios, int n)
{
	struct fake *f = (struct fake *)be;
	int take = n;

	CHECK(n > 0, "empty submit");
	if (f->partial && splitmix64(&f->rng) % 4 == 0)
		take = 1 + (int)(splitmix64(&f->rng) % (uint64_t)n);
	for (int i = 0; i < take; i++) {
		struct apply_io *io = ios[i];
		struct fake_op *o;

		if (f->reject_dsync && io->op == APPLY_IO_WRITE && io->dsync)
			return i ? i : -EINVAL;
		CHECK(io->op >= APPLY_IO_WRITE && io->op <= APPLY_IO_ZEROES,
		      "bad op %u", io->op);
		CHECK(io->op == APPLY_IO_FDSYNC ||
		      (io->len && io->offset + io->len <= f->dev_bytes &&
		       !(io->offset % 512) && !(io->len % 512)),
		      "bad extent %" PRIu64 "+%" PRIu64, io->offset, io->len);
		CHECK(io->op != APPLY_IO_WRITE || pattern_check(0, io->seq, 0, io->buf, io->len) < 0,
		      "seq %" PRIu64 ": wrong payload submitted", io->seq);
		if (f->nr_inflight == f->cap) {
			f->cap = f->cap ? f->cap * 2 : 64;
			f->inflight = realloc(f->inflight, f->cap * sizeof(*o));
			f->done = realloc(f->done, f->cap * sizeof(*f->done));
			CHECK(f->inflight && f->done, "out of memory");
		}
		o = &f->inflight[f->nr_inflight++];
		o->io = io;
		o->sid = f->next_sid++;
		o->deadline = f->tick + splitmix64(&f->rng) % (f->max_delay + 1);
		fake_trace(f, &(struct ev) {
			.kind = EV_SUBMIT, .op = io->op, .dsync = io->dsync,
			.sid = o->sid, .seq = io->seq, .offset = io->offset,
			.len = io->len,
		});
	}
	return take;
}

/*
 * A FLUSH record completes: nothing after it was issued, everything before
 * it completed, so the image must be the serial replay of the records
 * before it.  Compare what changed since the last FLUSH.
 */
static void fake_check_image(struct fake *f, uint64_t flush_seq)
{
	size_t end = (size_t)(flush_seq - f->base), from = f->serial_next;

	for (size_t i = from; i < end; i++)
		replay_rec(f->serial, &f->recs[i]);
	for (size_t i = from; i < end; i++) {
		const struct apply_rec *r = &f->recs[i];
		uint64_t off = r->sector << 9;

		if (rec_has_extent(r) && !f->image_error[0] &&
		    memcmp(f->image + off, f->serial + off, (size_t)r->nr_sectors << 9))
			snprintf(f->image_error, sizeof(f->image_error),
				 "at FLUSH %" PRIu64 ": extent of %" PRIu64
				 " differs from the serial replay", flush_seq, r->seq);
	}
	f->serial_next = end + 1;
	f->image_checks++;
}

/* Complete inflight[i]: do what it says to the image, as a device would. */
static void fake_complete(struct fake *f, size_t i)
{
	struct fake_op o = f->inflight[i];
	struct apply_io *io = o.io;

	f->inflight[i] = f->inflight[--f->nr_inflight];
	io->res = 0;
	switch (io->op) {
	case APPLY_IO_WRITE:
		CHECK(pattern_check(0, io->seq, 0, io->buf, io->len) < 0,
		      "seq %" PRIu64 ": payload changed in flight", io->seq);
		memcpy(f->image + io->offset, io->buf, io->len);
		io->res = (int64_t)io->len;
		break;
	case APPLY_IO_DISCARD:
	case APPLY_IO_ZEROES:
		memset(f->image + io->offset, 0, io->len);
		break;
	}
	if (io->seq == f->fail_seq)
		io->res = -EIO;
	if (io->op == APPLY_IO_FDSYNC && io->seq != APPLY_IO_NO_SEQ && f->recs &&
	    io->res == 0)
		fake_check_image(f, io->seq);
	f->done[f->nr_done++] = io;
	fake_trace(f, &(struct ev) {
		.kind = EV_COMPLETE, .sid = o.sid, .res = io->res,
	});
}

/* One tick: complete, in random order, what is due. */
static void fake_step(struct fake *f)
{
	f->tick++;
	for (size_t n = f->nr_inflight; n > 0; n--) {
		size_t i = splitmix64(&f->rng) % f->nr_inflight;

		if (f->inflight[i].deadline <= f->tick)
			fake_complete(f, i);
		if (!f->nr_inflight)
			break;
	}
}

static int fake_reap(struct apply_backend *be, struct apply_io **ret, int max)
{
	struct fake *f = (struct fake *)be;
	int n = 0;

	while (n < max && f->nr_done)
		ret[n++] = f->done[--f->nr_done];
	return n;
}

static int fake_wait(struct apply_backend *be, int timeout_ms)
{
	struct fake *f = (struct fake *)be;

	if (f->nr_done)
		return 1;
	while (f->nr_inflight && !f->nr_done)
		fake_step(f);
	return f->nr_done ? 1 : 0;
}

static void fake_free(struct apply_backend *be)
{
	struct fake *f = (struct fake *)be;

	free(f->inflight);
	free(f->done);
	/* the image and the trace belong to the test */
}

static const struct apply_backend_ops fake_ops = {
	.submit = fake_submit,
	.reap = fake_reap,
	.wait = fake_wait,
	.free = fake_free,
};

static void fake_progress(struct fake *f, const struct apply *a)
{
	struct ev e = { .kind = EV_PROGRESS };

	apply_progress(a, &e.p);
	fake_trace(f, &e);
}

/* ---- the trace checker ------------------------------------------------------- */

struct rstate {
	bool submitted;
	bool complete;		/* data on the device (FLUSH: fdatasync done) */
	bool dsync;		/* completed as a durable write */
	uint64_t cc;		/* completion count at completion */
};

struct sub {			/* per submission id */
	uint64_t seq;
	uint64_t cc;		/* fdatasync: completion count at submission */
	uint8_t op;
	bool dsync;
	bool open;
};

static bool rec_durable(const struct apply_rec *r, const struct rstate *s,
			uint64_t durable_cc)
{
	if (r->op == DM_REPL_OP_GAP)
		return true;
	if (!s->complete)
		return false;
	if (r->op == DM_REPL_OP_FLUSH || s->dsync)
		return true;
	return s->cc <= durable_cc;
}

static bool rec_written(const struct apply_rec *r, const struct rstate *s,
			uint64_t durable_cc)
{
	if (r->op == DM_REPL_OP_GAP)
		return true;
	if (r->op == DM_REPL_OP_FLUSH || (r->flags & DM_REPL_F_FUA))
		return rec_durable(r, s, durable_cc);
	return s->complete;
}

struct check_stats {
	uint64_t max_in_flight;
	uint64_t syncs;		/* fdatasyncs not for a FLUSH record */
	uint64_t dsync_writes;
	uint64_t blocked_checks;	/* submissions checked against overlaps */
};

/* The checker's state while it replays one trace. */
struct tcheck {
	const struct apply_rec *recs;
	size_t nr;
	uint64_t base;
	unsigned int depth;
	const struct fake *f;
	struct check_stats *cs;
	struct rstate *st;
	struct sub *subs;
	uint32_t *cnt, *ptr, *list;	/* per sector: the records on it (CSR) */
	uint64_t *prev_flush;
	uint64_t cc, durable_cc, in_flight, lowest;
	struct apply_progress last;
};

/* per sector: the records touching it, in order (CSR); each record's FLUSH before it */
static void tcheck_index(struct tcheck *t, uint64_t dev_sectors)
{
	const struct apply_rec *recs = t->recs;
	size_t total = 0;

	t->cnt = xcalloc(dev_sectors + 1, sizeof(*t->cnt));
	for (size_t i = 0; i < t->nr; i++)
		if (rec_has_extent(&recs[i]))
			for (uint64_t s = recs[i].sector;
			     s < recs[i].sector + recs[i].nr_sectors; s++)
				t->cnt[s + 1]++, total++;
	for (uint64_t s = 0; s < dev_sectors; s++)
		t->cnt[s + 1] += t->cnt[s];
	t->list = xcalloc(total, sizeof(*t->list));
	t->ptr = xcalloc(dev_sectors, sizeof(*t->ptr));
	for (uint64_t s = 0; s < dev_sectors; s++)
		t->ptr[s] = t->cnt[s];
	for (size_t i = 0; i < t->nr; i++)
		if (rec_has_extent(&recs[i]))
			for (uint64_t s = recs[i].sector;
			     s < recs[i].sector + recs[i].nr_sectors; s++)
				t->list[t->ptr[s]++] = (uint32_t)i;
	for (uint64_t s = 0; s < dev_sectors; s++)
		t->ptr[s] = t->cnt[s];
	t->prev_flush = xcalloc(t->nr, sizeof(*t->prev_flush));
	for (size_t i = 0, pf = SIZE_MAX; i < t->nr; i++) {
		t->prev_flush[i] = pf;
		if (recs[i].op == DM_REPL_OP_FLUSH)
			pf = i;
	}
}

/* The submission of record i: in its op, and after what it must follow. */
static void tcheck_submit_rec(struct tcheck *t, const struct ev *e, size_t i)
{
	const struct apply_rec *r = &t->recs[i];
	uint64_t base = t->base;

	switch (r->op) {
	case DM_REPL_OP_FLUSH:
		CHECK(e->op == APPLY_IO_FDSYNC, "FLUSH as op %u", e->op);
		/* (c) every earlier record completed */
		while (t->lowest < t->nr && (t->st[t->lowest].complete ||
					     t->recs[t->lowest].op == DM_REPL_OP_GAP))
			t->lowest++;
		CHECK(t->lowest == i, "FLUSH %" PRIu64 " issued before %" PRIu64
		      " completed", e->seq, base + t->lowest);
		break;
	case DM_REPL_OP_WRITE:
	case DM_REPL_OP_DISCARD:
	case DM_REPL_OP_WRITE_ZEROES:
		CHECK(e->op == (r->op == DM_REPL_OP_WRITE ? APPLY_IO_WRITE :
				r->op == DM_REPL_OP_DISCARD ? APPLY_IO_DISCARD :
				APPLY_IO_ZEROES), "seq %" PRIu64 " op %u", e->seq, e->op);
		CHECK(e->offset == r->sector << 9 &&
		      e->len == (uint64_t)r->nr_sectors << 9,
		      "seq %" PRIu64 " extent", e->seq);
		CHECK(e->dsync == ((r->flags & DM_REPL_F_FUA) &&
				   !(t->f->reject_dsync && r->op == DM_REPL_OP_WRITE)),
		      "seq %" PRIu64 " dsync %d", e->seq, e->dsync);
		/* (a) no earlier record on any of its sectors incomplete */
		for (uint64_t s = r->sector; s < r->sector + r->nr_sectors; s++) {
			while (t->ptr[s] < t->cnt[s + 1] && t->st[t->list[t->ptr[s]]].complete)
				t->ptr[s]++;
			CHECK(t->ptr[s] < t->cnt[s + 1] && t->list[t->ptr[s]] == i,
			      "seq %" PRIu64 " issued while %" PRIu64
			      " (overlapping, earlier) was incomplete",
			      e->seq, base + t->list[t->ptr[s]]);
		}
		t->cs->blocked_checks++;
		break;
	default:
		CHECK(0, "seq %" PRIu64 ": op %u submitted", e->seq, r->op);
	}
	/* (b) the FLUSH before it completed */
	if (t->prev_flush[i] != SIZE_MAX)
		CHECK(t->st[t->prev_flush[i]].complete, "seq %" PRIu64
		      " issued before FLUSH %" PRIu64 " completed",
		      e->seq, base + t->prev_flush[i]);
}

static void tcheck_submit(struct tcheck *t, const struct ev *e)
{
	struct sub *sb = &t->subs[e->sid];
	size_t i;

	*sb = (struct sub) {
		.seq = e->seq, .op = e->op, .dsync = e->dsync,
		.open = true, .cc = t->cc,
	};
	/* (e) */
	CHECK(++t->in_flight <= t->depth, "%" PRIu64 " in flight, depth %u",
	      t->in_flight, t->depth);
	if (t->in_flight > t->cs->max_in_flight)
		t->cs->max_in_flight = t->in_flight;
	if (e->seq == APPLY_IO_NO_SEQ) {
		CHECK(e->op == APPLY_IO_FDSYNC, "op %u without a record", e->op);
		t->cs->syncs++;
		return;
	}
	CHECK(e->seq >= t->base && e->seq < t->base + t->nr, "seq %" PRIu64, e->seq);
	i = (size_t)(e->seq - t->base);
	CHECK(!t->st[i].submitted, "seq %" PRIu64 " submitted twice", e->seq);
	t->st[i].submitted = true;
	if (t->f->reject_dsync)
		CHECK(!e->dsync || e->op != APPLY_IO_WRITE, "dsync write accepted");
	tcheck_submit_rec(t, e, i);
}

static void tcheck_complete(struct tcheck *t, const struct ev *e)
{
	struct sub *sb = &t->subs[e->sid];
	size_t i;

	CHECK(sb->open, "sid %" PRIu64 " completed twice", e->sid);
	sb->open = false;
	t->in_flight--;
	t->cc++;
	if (e->res < 0)
		return;
	if (sb->op == APPLY_IO_FDSYNC && sb->cc > t->durable_cc)
		t->durable_cc = sb->cc;
	if (sb->seq == APPLY_IO_NO_SEQ)
		return;
	i = (size_t)(sb->seq - t->base);
	t->st[i].complete = true;
	t->st[i].dsync = sb->dsync;
	t->st[i].cc = t->cc;
	if (sb->dsync)
		t->cs->dsync_writes++;
}

static void tcheck_progress(struct tcheck *t, const struct apply_progress *p)
{
	const struct apply_rec *recs = t->recs;
	uint64_t base = t->base;

	/* (d) */
	CHECK(p->received >= t->last.received && p->written >= t->last.written &&
	      p->durable >= t->last.durable, "progress went backwards");
	CHECK(p->durable <= p->written && p->written <= p->received &&
	      p->received <= base + t->nr, "progress %" PRIu64 "/%" PRIu64
	      "/%" PRIu64, p->received, p->written, p->durable);
	for (uint64_t s = t->last.written; s < p->written; s++)
		CHECK(rec_written(&recs[s - base], &t->st[s - base], t->durable_cc),
		      "written %" PRIu64 " passes %" PRIu64 " (op %u flags %#x)",
		      p->written, s, recs[s - base].op, recs[s - base].flags);
	for (uint64_t s = t->last.durable; s < p->durable; s++)
		CHECK(rec_durable(&recs[s - base], &t->st[s - base], t->durable_cc),
		      "durable %" PRIu64 " passes %" PRIu64 " (op %u flags %#x)",
		      p->durable, s, recs[s - base].op, recs[s - base].flags);
	t->last = *p;
}

static void check_trace(const struct apply_rec *recs, size_t nr, uint64_t base,
			uint64_t dev_sectors, unsigned int depth,
			const struct fake *f, struct check_stats *cs)
{
	struct tcheck t = {
		.recs = recs, .nr = nr, .base = base, .depth = depth, .f = f, .cs = cs,
		.st = xcalloc(nr, sizeof(*t.st)),
		.subs = xcalloc(f->next_sid, sizeof(*t.subs)),
		.last = { base, base, base },
	};

	tcheck_index(&t, dev_sectors);
	memset(cs, 0, sizeof(*cs));
	for (size_t i = 0; i < f->nr_trace; i++) {
		const struct ev *e = &f->trace[i];

		if (e->kind == EV_SUBMIT)
			tcheck_submit(&t, e);
		else if (e->kind == EV_COMPLETE)
			tcheck_complete(&t, e);
		else
			tcheck_progress(&t, &e->p);
	}
	CHECK(t.in_flight == 0, "%" PRIu64 " still in flight", t.in_flight);
	free(t.st);
	free(t.subs);
	free(t.cnt);
	free(t.ptr);
	free(t.list);
	free(t.prev_flush);
}

/* ---- fake runs ------------------------------------------------------------- */

struct fake_run {
	const char *name;
	size_t records;
	uint64_t seed;
	uint64_t dev_sectors;
	uint32_t max_sectors;
	unsigned int block_size;
	struct apply_config cfg;
	unsigned int max_delay;
	bool reject_dsync;
	bool partial;
};

static struct fake *fake_new(uint64_t seed, uint64_t dev_sectors)
{
	struct fake *f = xcalloc(1, sizeof(*f));

	f->be.ops = &fake_ops;
	f->be.event_fd = -1;
	f->rng = seed;
	f->dev_bytes = dev_sectors << 9;
	f->image = xcalloc(1, f->dev_bytes);
	f->max_delay = 8;
	f->fail_seq = APPLY_IO_NO_SEQ - 1;
	return f;
}

static void fake_destroy(struct fake *f)
{
	free(f->serial);
	free(f->image);
	free(f->trace);
	free(f);
}

/* The end of a test: the engine drains, then it and its backend go. */
static void fake_done(struct apply *a, struct fake *f)
{
	CHECK_RC(apply_drain(a, 1000), 0);
	apply_free(a);
	fake_destroy(f);
}

/*
 * Up to burst records from next on into the engine, as repld hands them
 * over: a stop where it pushes back (counted in *eagain).  Returns the
 * next record to submit.
 */
static size_t feed_burst(struct apply *a, const struct apply_rec *recs, size_t next,
			 size_t nr, unsigned int burst, uint64_t *eagain)
{
	while (next < nr && burst--) {
		const struct apply_rec *r = &recs[next];
		struct apply_buf *buf = NULL;

		if (r->op == DM_REPL_OP_WRITE) {
			int rc = apply_buf_get(a, (size_t)r->nr_sectors << 9, &buf);

			if (rc == -EAGAIN) {
				(*eagain)++;
				break;
			}
			CHECK_RC(rc, 0);
			pattern_fill(0, r->seq, 0, buf->data, buf->len);
		} else if (apply_full(a)) {
			(*eagain)++;
			break;
		}
		CHECK_RC(apply_submit(a, r, buf), 0);
		next++;
	}
	return next;
}

static void run_fake(const struct fake_run *fr)
{
	struct gen g = {
		.rng = fr->seed, .dev_sectors = fr->dev_sectors,
		.max_sectors = fr->max_sectors, .align = 1,
	};
	struct apply_rec *recs = xcalloc(fr->records, sizeof(*recs));
	uint8_t *serial = xcalloc(1, fr->dev_sectors << 9);
	struct fake *f = fake_new(fr->seed ^ 0x5a5a, fr->dev_sectors);
	uint64_t base = 1000 + fr->seed % 1000, t0 = now_ns();
	struct apply *a = NULL;
	struct apply_progress p;
	struct apply_stats stats;
	struct check_stats cs;
	uint64_t eagain = 0, rng = fr->seed * 3;
	size_t next = 0;

	f->max_delay = fr->max_delay;
	f->reject_dsync = fr->reject_dsync;
	f->partial = fr->partial;
	for (size_t i = 0; i < fr->records; i++) {
		gen_rec(&g, base + i, &recs[i]);
		replay_rec(serial, &recs[i]);
	}
	f->recs = recs;
	f->base = base;
	f->nr_recs = fr->records;
	f->serial = xcalloc(1, fr->dev_sectors << 9);

	CHECK_RC(apply_new_backend(&f->be, fr->dev_sectors, fr->block_size,
				   &fr->cfg, &a), 0);
	CHECK_RC(apply_set_seq(a, base), 0);

	while (next < fr->records || apply_busy(a)) {
		unsigned int burst = (unsigned int)(splitmix64(&rng) % 16);

		next = feed_burst(a, recs, next, fr->records, burst, &eagain);
		fake_progress(f, a);
		CHECK_RC(apply_run(a), 0);
		fake_progress(f, a);
		/* the engine must never wait for nothing */
		CHECK(!apply_busy(a) || f->nr_inflight || f->nr_done,
		      "stalled at record %zu", next);
		fake_step(f);
		CHECK_RC(apply_run(a), 0);
		fake_progress(f, a);
	}
	CHECK_RC(apply_drain(a, 10000), 0);
	fake_progress(f, a);
	apply_progress(a, &p);
	CHECK(p.received == base + fr->records && p.written == p.received &&
	      p.durable == p.received, "after drain: %" PRIu64 "/%" PRIu64 "/%" PRIu64,
	      p.received, p.written, p.durable);
	apply_get_stats(a, &stats);
	CHECK(stats.records == fr->records, "records %" PRIu64, stats.records);
	CHECK(stats.in_flight == 0 && stats.queued == 0 && stats.buffer_bytes == 0,
	      "left over: %u in flight, %" PRIu64 " queued, %" PRIu64 " bytes",
	      stats.in_flight, stats.queued, stats.buffer_bytes);
	CHECK(stats.fua_fallback == fr->reject_dsync, "fua_fallback %d",
	      stats.fua_fallback);

	check_trace(recs, fr->records, base, fr->dev_sectors,
		    fr->cfg.queue_depth, f, &cs);
	CHECK(!f->image_error[0], "%s: %s", fr->name, f->image_error);
	CHECK(cs.max_in_flight > 1 || fr->cfg.queue_depth == 1,
	      "never more than one operation in flight");
	for (uint64_t off = 0; off < fr->dev_sectors << 9; off += 512)
		CHECK(!memcmp(f->image + off, serial + off, 512),
		      "%s: device differs from the serial replay at sector %" PRIu64,
		      fr->name, off >> 9);

	printf("fake %-16s %zu records: %zu events, max in flight %" PRIu64
	       ", %" PRIu64 " checkpoints, %" PRIu64 " flushes, %" PRIu64
	       " dsync writes, %" PRIu64 " image checks, %" PRIu64
	       " back-pressure stops, %.2f s\n",
	       fr->name, fr->records, f->nr_trace, cs.max_in_flight, cs.syncs,
	       stats.flushes, cs.dsync_writes, f->image_checks, eagain,
	       (double)(now_ns() - t0) / 1e9);
	apply_free(a);
	fake_destroy(f);
	free(recs);
	free(serial);
}

/* ---- fake: argument checks, back-pressure, errors --------------------------- */

/* A record apply_submit() must refuse; payload: sectors of payload or 0. */
static void check_bad(struct apply *a, struct apply_rec r, uint32_t payload)
{
	struct apply_buf *buf = NULL;

	if (payload)
		CHECK_RC(apply_buf_get(a, (size_t)payload * 512, &buf), 0);
	CHECK_RC(apply_submit(a, &r, buf), -EINVAL);
}

static void test_args(void)
{
	struct apply *a = (struct apply *)&a;	/* must stay untouched */
	struct fake *f = fake_new(1, 1024);
	struct apply_config cfg;
	struct apply_buf *buf = (struct apply_buf *)&buf;
	struct apply_stats stats;
	struct apply_rec r;

	apply_config_init(&cfg);
	CHECK(cfg.queue_depth == 64 && cfg.checkpoint_ms == 1000 &&
	      cfg.max_buffer_bytes == 64ULL << 20, "defaults");
	cfg.queue_depth = 0;
	CHECK_RC(apply_new_backend(&f->be, 1024, 512, &cfg, &a), -EINVAL);
	apply_config_init(&cfg);
	cfg.block_size = 1000;
	CHECK_RC(apply_new_backend(&f->be, 1024, 512, &cfg, &a), -EINVAL);
	CHECK_RC(apply_new_backend(&f->be, 1024, 768, NULL, &a), -EINVAL);
	CHECK_RC(apply_new_backend(&f->be, 0, 512, NULL, &a), -EINVAL);
	CHECK_RC(apply_new(-1, 1024, NULL, &a), -EBADF);
	CHECK_RC(apply_new(STDIN_FILENO, 0, NULL, &a), -EINVAL);
	CHECK(a == (struct apply *)&a, "ret written on failure");

	CHECK_RC(apply_new_backend(&f->be, 1024, 512, NULL, &a), 0);
	CHECK(apply_fd(a) == -1 && apply_timeout_ms(a) == -1 && !apply_busy(a),
	      "idle engine");
	CHECK_RC(apply_buf_get(a, 0, &buf), -EINVAL);
	CHECK(buf == (struct apply_buf *)&buf, "ret written on failure");

	/* each bad record is refused, and its payload taken */
#define R(...) ((struct apply_rec) { __VA_ARGS__ })
	check_bad(a, R(.seq = 1, .op = DM_REPL_OP_WRITE, .nr_sectors = 1), 1);
	check_bad(a, R(.op = DM_REPL_OP_WRITE, .sector = 1024, .nr_sectors = 1), 1);
	check_bad(a, R(.op = DM_REPL_OP_WRITE, .sector = 1023, .nr_sectors = 2), 2);
	check_bad(a, R(.op = DM_REPL_OP_WRITE, .sector = UINT64_MAX, .nr_sectors = 1), 1);
	check_bad(a, R(.op = DM_REPL_OP_WRITE, .nr_sectors = UINT32_MAX), 1);
	check_bad(a, R(.op = DM_REPL_OP_WRITE), 1);				/* empty */
	check_bad(a, R(.op = DM_REPL_OP_WRITE, .nr_sectors = 2), 1);	/* short */
	check_bad(a, R(.op = DM_REPL_OP_WRITE, .nr_sectors = 1), 0);	/* no payload */
	check_bad(a, R(.op = DM_REPL_OP_WRITE, .nr_sectors = 1, .flags = 0x80), 1);
	check_bad(a, R(.op = 0, .nr_sectors = 1), 0);
	check_bad(a, R(.op = 99, .nr_sectors = 1), 0);
	check_bad(a, R(.op = DM_REPL_OP_FLUSH), 1);		/* payload */
	check_bad(a, R(.op = DM_REPL_OP_FLUSH, .nr_sectors = 1), 0);
	check_bad(a, R(.op = DM_REPL_OP_GAP, .sector = 5), 0);
	check_bad(a, R(.op = DM_REPL_OP_DISCARD, .nr_sectors = 1), 1);
	check_bad(a, R(.op = DM_REPL_OP_DISCARD), 0);
	check_bad(a, R(.op = DM_REPL_OP_WRITE_ZEROES, .sector = 1020, .nr_sectors = 8), 0);
#undef R
	apply_get_stats(a, &stats);
	CHECK(stats.buffer_bytes == 0, "refused payloads kept: %" PRIu64,
	      stats.buffer_bytes);
	CHECK(!apply_busy(a), "refused records queued");

	/* epochs: never backwards, always forward after a FLUSH */
	CHECK_RC(apply_set_seq(a, 10), 0);
	r = (struct apply_rec) { .seq = 10, .op = DM_REPL_OP_DISCARD,
				 .nr_sectors = 8, .epoch = 5 };
	CHECK_RC(apply_submit(a, &r, NULL), 0);
	CHECK_RC(apply_set_seq(a, 10), -EBUSY);
	r = (struct apply_rec) { .seq = 11, .op = DM_REPL_OP_DISCARD,
				 .nr_sectors = 8, .epoch = 4 };
	CHECK_RC(apply_submit(a, &r, NULL), -EINVAL);
	r = (struct apply_rec) { .seq = 11, .op = DM_REPL_OP_FLUSH, .epoch = 5 };
	CHECK_RC(apply_submit(a, &r, NULL), 0);
	r = (struct apply_rec) { .seq = 12, .op = DM_REPL_OP_DISCARD,
				 .nr_sectors = 8, .epoch = 5 };
	CHECK_RC(apply_submit(a, &r, NULL), -EINVAL);
	r.epoch = 6;
	CHECK_RC(apply_submit(a, &r, NULL), 0);
	fake_done(a, f);
	printf("args ok\n");
}

static void test_backpressure(void)
{
	struct fake *f = fake_new(2, 1024);
	struct apply_config cfg;
	struct apply_buf *bufs[5], *big;
	struct apply_progress p;
	struct apply *a;

	apply_config_init(&cfg);
	cfg.max_buffer_bytes = 16384;
	CHECK_RC(apply_new_backend(&f->be, 1024, 512, &cfg, &a), 0);

	/* a single buffer above the bound is granted when nothing else is */
	CHECK_RC(apply_buf_get(a, 65536, &big), 0);
	CHECK_RC(apply_buf_get(a, 512, &bufs[0]), -EAGAIN);
	CHECK(apply_full(a), "not full");
	apply_buf_put(a, big);
	CHECK(!apply_full(a), "full after put");

	for (int i = 0; i < 4; i++) {
		CHECK_RC(apply_buf_get(a, 4096, &bufs[i]), 0);
		CHECK(((uintptr_t)bufs[i]->data & 511) == 0, "unaligned buffer");
	}
	CHECK_RC(apply_buf_get(a, 4096, &bufs[4]), -EAGAIN);
	CHECK(apply_full(a), "not full");
	for (int i = 0; i < 4; i++) {
		struct apply_rec r = {
			.seq = (uint64_t)i, .op = DM_REPL_OP_WRITE,
			.sector = (uint64_t)i * 8, .nr_sectors = 8,
		};

		pattern_fill(0, (uint64_t)i, 0, bufs[i]->data, 4096);
		CHECK_RC(apply_submit(a, &r, bufs[i]), 0);
	}
	CHECK_RC(apply_buf_get(a, 4096, &bufs[4]), -EAGAIN);
	CHECK_RC(apply_run(a), 0);
	CHECK(f->nr_inflight == 4, "%zu in flight", f->nr_inflight);
	CHECK_RC(apply_buf_get(a, 4096, &bufs[4]), -EAGAIN);
	/* completions give the memory back */
	while (f->nr_inflight)
		fake_step(f);
	CHECK_RC(apply_run(a), 0);
	CHECK(!apply_full(a), "still full");
	CHECK_RC(apply_buf_get(a, 4096, &bufs[4]), 0);
	apply_buf_put(a, bufs[4]);
	apply_progress(a, &p);
	CHECK(p.received == 4 && p.written == 4, "progress %" PRIu64 "/%" PRIu64,
	      p.received, p.written);
	fake_done(a, f);
	printf("back-pressure ok\n");
}

/* Payload buffers are kept and handed out again, within a bound. */
static void test_spare(void)
{
	struct fake *f = fake_new(2, 8192);
	struct apply_config cfg;
	struct apply_buf *b1, *b2, *mb[3];
	struct apply *a;
	void *p1, *mp[3];

	apply_config_init(&cfg);
	cfg.max_buffer_bytes = 12 << 20;	/* spares: up to 3 MiB */
	CHECK_RC(apply_new_backend(&f->be, 8192, 512, &cfg, &a), 0);

	/* 200 KiB takes a 256 KiB buffer, given again after its write */
	CHECK_RC(apply_buf_get(a, 200 << 10, &b1), 0);
	p1 = b1->data;
	pattern_fill(0, 0, 0, b1->data, 200 << 10);
	{
		struct apply_rec r = {
			.seq = 0, .op = DM_REPL_OP_WRITE, .sector = 0, .nr_sectors = 400,
		};

		CHECK_RC(apply_submit(a, &r, b1), 0);
	}
	CHECK_RC(apply_run(a), 0);
	while (f->nr_inflight)
		fake_step(f);
	CHECK_RC(apply_run(a), 0);
	/* kept as it was (free() would have put its list pointers there) */
	CHECK_RC(apply_buf_get(a, 256 << 10, &b2), 0);
	CHECK(b2->data == p1 && b2->len == 256 << 10 && pattern_check(0, 0, 0, b2->data, 200 << 10) < 0,
	      "256 KiB buffer not reused");
	memset(b2->data, 0x5a, 64);
	apply_buf_put(a, b2);
	CHECK_RC(apply_buf_get(a, 129 << 10, &b2), 0);
	CHECK(b2->data == p1 && ((unsigned char *)b2->data)[0] == 0x5a &&
	      ((unsigned char *)b2->data)[63] == 0x5a,
	      "a 129 KiB record does not get the spare 256 KiB buffer");
	apply_buf_put(a, b2);

	/* three 1 MiB buffers back: two fit the bound, all three come from it */
	for (int i = 0; i < 3; i++) {
		CHECK_RC(apply_buf_get(a, 1 << 20, &mb[i]), 0);
		mp[i] = mb[i]->data;
		memset(mp[i], 0xa0 + i, 64);
	}
	CHECK(mp[0] != mp[1] && mp[1] != mp[2], "same buffer twice");
	for (int i = 0; i < 3; i++)
		apply_buf_put(a, mb[i]);
	CHECK_RC(apply_buf_get(a, 1 << 20, &b1), 0);
	CHECK_RC(apply_buf_get(a, 1 << 20, &b2), 0);
	CHECK((b1->data == mp[0] && b2->data == mp[1]) || (b1->data == mp[1] && b2->data == mp[0]),
	      "1 MiB spares not reused");
	CHECK(((unsigned char *)b1->data)[0] + ((unsigned char *)b2->data)[0] == 0xa0 + 0xa1 &&
	      ((unsigned char *)b1->data)[8] + ((unsigned char *)b2->data)[8] == 0xa0 + 0xa1,
	      "1 MiB spares changed");
	apply_buf_put(a, b1);
	apply_buf_put(a, b2);

	/* a 4 KiB record's buffer too, as it was */
	CHECK_RC(apply_buf_get(a, 4096, &b1), 0);
	p1 = b1->data;
	memset(p1, 0x3c, 4096);
	apply_buf_put(a, b1);
	CHECK_RC(apply_buf_get(a, 4096, &b1), 0);
	CHECK(b1->data == p1 && ((unsigned char *)b1->data)[0] == 0x3c &&
	      ((unsigned char *)b1->data)[8] == 0x3c && ((unsigned char *)b1->data)[4095] == 0x3c,
	      "4 KiB spare not reused");
	CHECK(((uintptr_t)b1->data & 511) == 0, "unaligned 4 KiB spare");
	apply_buf_put(a, b1);
	CHECK(!apply_full(a), "spare buffers counted as used");
	fake_done(a, f);
	printf("spare buffers ok\n");
}

static void test_error(void)
{
	struct fake *f = fake_new(3, 1024);
	struct apply_progress p;
	struct apply_stats st;
	struct apply_buf *buf;
	struct apply_rec r;
	struct apply *a;

	f->fail_seq = 5;
	CHECK_RC(apply_new_backend(&f->be, 1024, 512, NULL, &a), 0);
	for (uint64_t s = 0; s < 10; s++) {
		r = (struct apply_rec) {
			.seq = s, .op = DM_REPL_OP_WRITE, .sector = s * 8,
			.nr_sectors = 8,
		};
		CHECK_RC(apply_buf_get(a, 4096, &buf), 0);
		pattern_fill(0, s, 0, buf->data, 4096);
		CHECK_RC(apply_submit(a, &r, buf), 0);
	}
	CHECK_RC(apply_run(a), 0);
	while (f->nr_inflight)
		fake_step(f);
	CHECK_RC(apply_run(a), -EIO);
	CHECK_RC(apply_run(a), -EIO);
	apply_get_stats(a, &st);
	CHECK(st.io_errors == 1, "io_errors %" PRIu64 ", want 1", st.io_errors);
	apply_progress(a, &p);
	CHECK(p.written == 5 && p.durable <= 5, "written %" PRIu64 " durable %" PRIu64,
	      p.written, p.durable);
	r = (struct apply_rec) { .seq = 10, .op = DM_REPL_OP_FLUSH };
	CHECK_RC(apply_submit(a, &r, NULL), -EIO);
	CHECK_RC(apply_drain(a, 1000), -EIO);
	apply_free(a);
	fake_destroy(f);
	printf("errors ok\n");
}

/* Writes n records of 4 KiB from *seq on, and runs the engine until idle. */
static void write_idle(struct fake *f, struct apply *a, uint64_t *seq, unsigned int n)
{
	for (unsigned int i = 0; i < n; i++, (*seq)++) {
		struct apply_rec r = {
			.seq = *seq, .op = DM_REPL_OP_WRITE, .sector = (*seq * 8) % 1024,
			.nr_sectors = 8,
		};
		struct apply_buf *buf;

		CHECK_RC(apply_buf_get(a, 4096, &buf), 0);
		pattern_fill(0, *seq, 0, buf->data, 4096);
		CHECK_RC(apply_submit(a, &r, buf), 0);
	}
	for (;;) {
		CHECK_RC(apply_run(a), 0);
		if (!f->nr_inflight && !f->nr_done)
			break;
		fake_step(f);
	}
}

/*
 * With checkpoint_records or checkpoint_bytes, the records are made
 * durable once that many are written, long before checkpoint_ms (what a
 * primary with a small ring asks of its peers); without, only the timer.
 */
static void test_checkpoint_bound(void)
{
	for (int kind = 0; kind < 3; kind++) {
		struct fake *f = fake_new(4, 1024);
		struct apply_config cfg;
		struct apply_progress p;
		struct apply_stats st;
		struct apply *a;
		uint64_t seq = 0;

		apply_config_init(&cfg);
		cfg.checkpoint_ms = 600000;
		if (kind == 1)
			cfg.checkpoint_records = 8;
		else if (kind == 2)
			cfg.checkpoint_bytes = 8 * 4096;
		CHECK_RC(apply_new_backend(&f->be, 1024, 512, &cfg, &a), 0);
		for (int round = 0; round < 3; round++) {
			/* under the bound: written, not durable, the timer far away */
			write_idle(f, a, &seq, 7);
			apply_progress(a, &p);
			CHECK(p.written == seq && p.durable == (kind ? seq - 7 : 0),
			      "kind %d round %d: written %" PRIu64 " durable %" PRIu64,
			      kind, round, p.written, p.durable);
			CHECK(apply_timeout_ms(a) > 1000, "kind %d: timeout %d ms", kind,
			      apply_timeout_ms(a));
			/* at the bound: durable at once */
			write_idle(f, a, &seq, 1);
			apply_progress(a, &p);
			CHECK(p.durable == (kind ? seq : 0),
			      "kind %d round %d: written %" PRIu64 " durable %" PRIu64,
			      kind, round, p.written, p.durable);
		}
		apply_get_stats(a, &st);
		CHECK(st.checkpoints == (kind ? 3 : 0), "kind %d: %" PRIu64 " checkpoints",
		      kind, st.checkpoints);
		fake_done(a, f);
	}
	printf("checkpoint bounds ok\n");
}

static int main_fake(size_t records, uint64_t seed)
{
	static const struct {
		const char *name;
		unsigned int depth, checkpoint_ms, block_size, max_delay;
		uint64_t max_buffer;
		bool reject_dsync, partial;
		unsigned int records_div;
	} runs[] = {
		{ "depth64",	  64, 1000,  512,  8, 256 << 10, false, true,  1 },
		{ "depth32-ckpt0", 32,    0,  512, 20, 256 << 10, false, false, 1 },
		{ "bigwindow",	  64, 1000,  512, 30,   4 << 20, false, false, 1 },
		{ "no-dsync",	  64,    0,  512,  8, 256 << 10, true,  true,  1 },
		{ "block4k",	  64, 1000, 4096,  8, 256 << 10, false, false, 1 },
		{ "depth1",	   1, 1000,  512,  2, 256 << 10, false, false, 10 },
	};

	test_args();
	test_backpressure();
	test_spare();
	test_error();
	test_checkpoint_bound();
	for (size_t i = 0; i < ARRAY_SIZE(runs); i++) {
		struct fake_run fr = {
			.name = runs[i].name,
			.records = records / runs[i].records_div,
			.seed = seed + i,
			.dev_sectors = 2048,
			.max_sectors = 16,
			.block_size = runs[i].block_size,
			.cfg = {
				.queue_depth = runs[i].depth,
				.checkpoint_ms = runs[i].checkpoint_ms,
				.max_buffer_bytes = runs[i].max_buffer,
			},
			.max_delay = runs[i].max_delay,
			.reject_dsync = runs[i].reject_dsync,
			.partial = runs[i].partial,
		};

		run_fake(&fr);
	}
	return 0;
}

/* ---- the real backend ------------------------------------------------------- */

struct aio_file {
	int fd;
	bool blkdev;	/* discards leave partial blocks alone */
};

/*
 * A file in dir opened O_DIRECT (and unlinked at once, so that a failing
 * test leaves nothing behind), or exit 77 if the file system cannot.
 */
static void aio_file_open(const char *dir, uint64_t bytes, struct aio_file *af)
{
	char path[4096];
	int fd;

	if (!strncmp(dir, "/dev/", 5)) {
		/* a scratch block device: zero what the test uses */
		void *zero;

		af->fd = open(dir, O_RDWR | O_DIRECT | O_CLOEXEC);
		CHECK(af->fd >= 0, "open %s: %s", dir, strerror(errno));
		af->blkdev = true;
		CHECK(posix_memalign(&zero, 4096, bytes) == 0, "out of memory");
		memset(zero, 0, bytes);
		CHECK(pwrite(af->fd, zero, bytes, 0) == (ssize_t)bytes, "zero %s: %s",
		      dir, strerror(errno));
		free(zero);
		return;
	}

	snprintf(path, sizeof(path), "%s/test-apply.XXXXXX", dir);
	fd = mkstemp(path);
	CHECK(fd >= 0, "mkstemp %s: %s", path, strerror(errno));
	close(fd);
	af->fd = open(path, O_RDWR | O_DIRECT | O_CLOEXEC);
	if (af->fd < 0 && errno == EINVAL) {
		printf("SKIP: no O_DIRECT in %s\n", dir);
		unlink(path);
		exit(77);
	}
	CHECK(af->fd >= 0, "open %s: %s", path, strerror(errno));
	unlink(path);
	/* allocated, as a backing file should be (discards punch holes) */
	if (fallocate(af->fd, 0, 0, (off_t)bytes) < 0)
		CHECK(ftruncate(af->fd, (off_t)bytes) == 0, "ftruncate: %s",
		      strerror(errno));
}

static void aio_file_close(struct aio_file *af)
{
	close(af->fd);
}

/*
 * Read the file back (O_DIRECT too) and compare with the serial replay.
 * Sectors whose last record was a DISCARD are undefined on block devices
 * (partial blocks are not discarded); files punch holes, they read zeroes.
 */
static void aio_file_compare(const struct aio_file *af, const uint8_t *want,
			     const struct apply_rec *recs, size_t nr,
			     uint64_t bytes)
{
	uint8_t *undef = xcalloc(bytes >> 9, 1);

	struct stat st;
	void *got;

	CHECK(posix_memalign(&got, 4096, bytes) == 0, "out of memory");
	CHECK(fstat(af->fd, &st) == 0 &&
	      (S_ISBLK(st.st_mode) || (uint64_t)st.st_size == bytes),
	      "file size %jd", (intmax_t)st.st_size);
	CHECK(pread(af->fd, got, bytes, 0) == (ssize_t)bytes, "pread: %s",
	      strerror(errno));
	for (size_t i = 0; af->blkdev && i < nr; i++)
		if (rec_has_extent(&recs[i]))
			memset(undef + recs[i].sector,
			       recs[i].op == DM_REPL_OP_DISCARD, recs[i].nr_sectors);
	for (uint64_t off = 0; off < bytes; off += 512)
		CHECK(undef[off >> 9] || !memcmp((uint8_t *)got + off, want + off, 512),
		      "file differs from the serial replay at sector %" PRIu64, off >> 9);
	free(got);
	free(undef);
}

/* Wait on apply_fd() like an event loop would. */
static void aio_wait(struct apply *a, int timeout_ms)
{
	struct pollfd pfd = { .fd = apply_fd(a), .events = POLLIN };

	if (timeout_ms < 0 || timeout_ms > 1000)
		timeout_ms = 1000;
	CHECK(poll(&pfd, 1, timeout_ms) >= 0 || errno == EINTR, "poll: %s",
	      strerror(errno));
}

/*
 * Submit up to 64 of recs[*next..records), the WRITEs with their patterns;
 * true when the engine pushed back (no buffer, or full) before the 64th.
 */
static bool aio_submit_burst(struct apply *a, const struct apply_rec *recs, size_t records,
			     size_t *next)
{
	for (int burst = 0; *next < records && burst < 64; burst++) {
		const struct apply_rec *r = &recs[*next];
		struct apply_buf *buf = NULL;

		if (r->op == DM_REPL_OP_WRITE) {
			int rc = apply_buf_get(a, (size_t)r->nr_sectors << 9, &buf);

			if (rc == -EAGAIN)
				return true;
			CHECK_RC(rc, 0);
			pattern_fill(0, r->seq, 0, buf->data, buf->len);
		} else if (apply_full(a)) {
			return true;
		}
		CHECK_RC(apply_submit(a, r, buf), 0);
		(*next)++;
	}
	return false;
}

static void run_aio(const char *dir, const char *name, size_t records,
		    uint64_t seed, unsigned int block_size, uint32_t align)
{
	const uint64_t dev_sectors = 16384;	/* 8 MiB */
	struct gen g = {
		.rng = seed, .dev_sectors = dev_sectors, .max_sectors = 32,
		.align = align,
	};
	struct apply_rec *recs = xcalloc(records, sizeof(*recs));
	uint8_t *serial = xcalloc(1, dev_sectors << 9);
	uint64_t base = 77, eagain = 0, t0 = now_ns(), deadline;
	struct apply_progress p, last = { base, base, base };
	struct apply_config cfg;
	struct apply_stats stats;
	struct aio_file af;
	struct apply *a;
	size_t next = 0;

	for (size_t i = 0; i < records; i++) {
		gen_rec(&g, base + i, &recs[i]);
		replay_rec(serial, &recs[i]);
	}
	aio_file_open(dir, dev_sectors << 9, &af);
	apply_config_init(&cfg);
	cfg.max_buffer_bytes = 1 << 20;
	cfg.block_size = block_size;
	CHECK_RC(apply_new(af.fd, dev_sectors, &cfg, &a), 0);
	CHECK_RC(apply_set_seq(a, base), 0);

	deadline = now_ns() + 120 * 1000000000ULL;
	while (next < records || apply_busy(a)) {
		bool blocked;
		int timeout;

		blocked = aio_submit_burst(a, recs, records, &next);
		eagain += blocked;
		CHECK_RC(apply_run(a), 0);
		apply_progress(a, &p);
		CHECK(p.received >= last.received && p.written >= last.written &&
		      p.durable >= last.durable && p.durable <= p.written &&
		      p.written <= p.received, "progress");
		last = p;
		if (next == records && !apply_busy(a))
			break;	/* the drain does the rest */
		timeout = apply_timeout_ms(a);
		if (next < records && !blocked)
			timeout = 0;
		aio_wait(a, timeout);
		CHECK(now_ns() < deadline, "%s: stuck at record %zu", name, next);
	}
	CHECK_RC(apply_drain(a, 60000), 0);
	apply_progress(a, &p);
	CHECK(p.received == base + records && p.written == p.received &&
	      p.durable == p.received, "after drain: %" PRIu64 "/%" PRIu64 "/%" PRIu64,
	      p.received, p.written, p.durable);
	apply_get_stats(a, &stats);
	CHECK(stats.records == records && stats.queued == 0 && stats.in_flight == 0 &&
	      stats.buffer_bytes == 0, "stats");
	aio_file_compare(&af, serial, recs, records, dev_sectors << 9);
	printf("aio %-10s %zu records, block size %u: %" PRIu64 " flushes, %"
	       PRIu64 " checkpoints, %" PRIu64 " fua%s, %" PRIu64
	       " back-pressure stops, %.2f s\n", name, records, stats.block_size,
	       stats.flushes, stats.checkpoints, stats.fua,
	       stats.fua_fallback ? " (fallback)" : "", eagain,
	       (double)(now_ns() - t0) / 1e9);
	apply_free(a);
	aio_file_close(&af);
	free(recs);
	free(serial);
}

/* Writes only, no FLUSH: a checkpoint must make them durable. */
static void run_aio_checkpoint(const char *dir)
{
	const uint64_t dev_sectors = 2048;
	uint8_t *serial = xcalloc(1, dev_sectors << 9);
	struct apply_config cfg;
	struct apply_progress p;
	struct apply_stats stats;
	struct aio_file af;
	struct apply *a;
	uint64_t deadline, t0 = now_ns();
	int max_timeout = -1;

	aio_file_open(dir, dev_sectors << 9, &af);
	apply_config_init(&cfg);
	cfg.checkpoint_ms = 200;
	CHECK_RC(apply_new(af.fd, dev_sectors, &cfg, &a), 0);
	for (uint64_t s = 0; s < 100; s++) {
		struct apply_rec r = {
			.seq = s, .op = DM_REPL_OP_WRITE, .sector = (s * 8) % dev_sectors,
			.nr_sectors = 8,
		};
		struct apply_buf *buf;

		CHECK_RC(apply_buf_get(a, 4096, &buf), 0);
		pattern_fill(0, s, 0, buf->data, 4096);
		replay_rec(serial, &r);
		CHECK_RC(apply_submit(a, &r, buf), 0);
	}
	deadline = now_ns() + 10 * 1000000000ULL;
	for (;;) {
		int timeout;

		CHECK_RC(apply_run(a), 0);
		apply_progress(a, &p);
		if (p.durable == 100 && !apply_busy(a))
			break;
		timeout = apply_timeout_ms(a);
		if (timeout > max_timeout)
			max_timeout = timeout;
		aio_wait(a, timeout);
		CHECK(now_ns() < deadline, "no checkpoint: %" PRIu64 "/%" PRIu64
		      "/%" PRIu64, p.received, p.written, p.durable);
	}
	apply_get_stats(a, &stats);
	CHECK(stats.checkpoints >= 1 && stats.flushes == 0, "checkpoints %" PRIu64,
	      stats.checkpoints);
	CHECK(apply_timeout_ms(a) == -1, "timeout %d when idle and durable",
	      apply_timeout_ms(a));
	aio_file_compare(&af, serial, NULL, 0, dev_sectors << 9);
	printf("aio checkpoint: durable %" PRIu64 " after %" PRIu64
	       " checkpoints, longest sleep asked %d ms, %.2f s\n", p.durable,
	       stats.checkpoints, max_timeout, (double)(now_ns() - t0) / 1e9);
	apply_free(a);
	aio_file_close(&af);
	free(serial);
}

static int main_aio(const char *dir, size_t records, uint64_t seed)
{
	run_aio_checkpoint(dir);
	/* aligned records: the libaio path */
	run_aio(dir, "aligned", records, seed, 0, 8);
	/* 512-byte records on 4 KiB blocks: read-modify-write in the worker */
	run_aio(dir, "rmw", records / 2, seed + 1, 4096, 1);
	return 0;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "fake";
	uint64_t seed;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!strcmp(mode, "fake")) {
		size_t records = argc > 2 ? strtoull(argv[2], NULL, 0) : 100000;

		seed = argc > 3 ? strtoull(argv[3], NULL, 0) : 42;
		printf("seed %" PRIu64 "\n", seed);
		return main_fake(records, seed);
	}
	if (!strcmp(mode, "aio") && argc > 2) {
		size_t records = argc > 3 ? strtoull(argv[3], NULL, 0) : 20000;

		seed = argc > 4 ? strtoull(argv[4], NULL, 0) : 42;
		printf("seed %" PRIu64 "\n", seed);
		return main_aio(argv[2], records, seed);
	}
	fprintf(stderr, "usage: %s fake [records [seed]] | aio DIR [records [seed]]\n",
		argv[0]);
	return 2;
}
