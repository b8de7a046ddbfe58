// SPDX-License-Identifier: GPL-2.0
/*
 * dm-repl: device-mapper target "repl".
 *
 * Reads pass through to the data device.  Every write (and every flush,
 * discard and write-zeroes) is logged into a ring shared with the
 * replication daemon (dm-repl-ring.c) and then written locally.  In async
 * mode a write completes when its local write completes; in sync mode only
 * once the daemon has also acknowledged its record.  The local write and
 * the shipping overlap: the record is published before the bio is
 * submitted.
 */
#include <linux/module.h>
#include <linux/init.h>
#include <linux/bio.h>
#include <linux/blkdev.h>
#include <linux/log2.h>
#include <linux/slab.h>

#include "dm-repl-core.h"
#include "dm-repl-trace.h"

#define REPL_DEFAULT_RING_MB		64U
#define REPL_MIN_RING_MB		4U
#define REPL_MAX_RING_MB		4096U
#define REPL_DEFAULT_HOLD_MS		5000U
#define REPL_MAX_HOLD_MS		60000U
#define REPL_DEFAULT_REGION_KB		64U
#define REPL_MIN_REGION_KB		4U
#define REPL_MAX_REGION_KB		BIT(20)
#define REPL_MAX_MAX_EXTENTS		BIT(24)

/*
 * The module's work queues, used by every ring (and its metadata device):
 * repl_wq for events, hold timeouts and metadata rounds; repl_copy_wq for
 * the payload copies.
 */
static struct workqueue_struct *repl_wq;
static struct workqueue_struct *repl_copy_wq;

static const char *repl_mode_name(enum repl_mode mode)
{
	return mode == REPL_MODE_SYNC ? "sync" : "async";
}

/* One of two words: @no (false) or @yes (true). */
static int repl_parse_choice(const char *arg, const char *no, const char *yes, bool *ret)
{
	if (arg && !strcmp(arg, no))
		*ret = false;
	else if (arg && !strcmp(arg, yes))
		*ret = true;
	else
		return -EINVAL;
	return 0;
}

static int repl_parse_mode(const char *arg, enum repl_mode *mode)
{
	bool sync;

	if (repl_parse_choice(arg, "async", "sync", &sync))
		return -EINVAL;
	*mode = sync ? REPL_MODE_SYNC : REPL_MODE_ASYNC;
	return 0;
}

/*
 * The features, in the order STATUSTYPE_TABLE and STATUSTYPE_IMA print
 * them: name, bounds and error texts, whether a power of 2, where the
 * value lives, its default (0 for extent_kb, whose default depends on
 * region_kb: repl_feature_default()).
 */
static const struct repl_feature {
	const char *name;
	struct dm_arg arg;
	char *dup_error;
	bool pow2;
	size_t offset;		/* of the value in struct repl_c */
	unsigned int def;
} repl_features[] = {
#define REPL_FEATURE(f, lo, hi, range, p2, d)				\
	{ #f, { lo, hi, "Invalid " #f " (" range ")" },			\
	  "Feature " #f " duplicated", p2, offsetof(struct repl_c, f), d }
	REPL_FEATURE(ring_size_mb, REPL_MIN_RING_MB, REPL_MAX_RING_MB, "4..4096",
		     false, REPL_DEFAULT_RING_MB),
	REPL_FEATURE(hold_timeout_ms, 1, REPL_MAX_HOLD_MS, "1..60000",
		     false, REPL_DEFAULT_HOLD_MS),
	REPL_FEATURE(region_kb, REPL_MIN_REGION_KB, REPL_MAX_REGION_KB,
		     "power of 2, 4..1048576", true, REPL_DEFAULT_REGION_KB),
	REPL_FEATURE(extent_kb, REPL_MIN_REGION_KB, REPL_MAX_REGION_KB,
		     "power of 2, 4..1048576", true, 0),
	REPL_FEATURE(max_extents, 1, REPL_MAX_MAX_EXTENTS, "1..16777216",
		     false, DM_REPL_DEFAULT_MAX_EXTENTS),
	REPL_FEATURE(record_kb, DM_REPL_MIN_RECORD_KB, DM_REPL_MAX_RECORD_KB,
		     "power of 2, 4..1024", true, DM_REPL_DEFAULT_RECORD_KB),
#undef REPL_FEATURE
};

static unsigned int *repl_feature_val(struct repl_c *rc,
				      const struct repl_feature *f)
{
	return (unsigned int *)((char *)rc + f->offset);
}

/* The default of a feature, given the other features' values. */
static unsigned int repl_feature_default(const struct repl_c *rc,
					 const struct repl_feature *f)
{
	if (f->offset == offsetof(struct repl_c, extent_kb))
		return max(DM_REPL_DEFAULT_EXTENT_KB, rc->region_kb);
	return f->def;
}

/*
 * The values of the features now, in @val[ARRAY_SIZE(repl_features)],
 * each read once (hold_timeout_ms changes with a message), for the status
 * line.
 */
static void repl_feature_values(struct repl_c *rc, unsigned int *val)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(repl_features); i++)
		val[i] = READ_ONCE(*repl_feature_val(rc, &repl_features[i]));
}

static int repl_parse_features(struct dm_arg_set *as, struct repl_c *rc,
			       struct dm_target *ti)
{
	/* the numeric features and on_io_error, a name and a value each */
	static const struct dm_arg _args[] = {
		{0, 2 * (ARRAY_SIZE(repl_features) + 1),
		 "Invalid number of feature args"},
	};
	bool seen[ARRAY_SIZE(repl_features)] = { false }, seen_io = false;
	const struct repl_feature *f;
	unsigned int argc, *val;
	const char *name;
	size_t i;
	int r;

	if (!as->argc)
		goto check;
	r = dm_read_arg_group(_args, as, &argc, &ti->error);
	if (r)
		return r;

	while (argc) {
		name = dm_shift_arg(as);
		argc--;
		if (!argc) {
			ti->error = "Feature requires a value";
			return -EINVAL;
		}
		argc--;
		/* on_io_error <pass|stop>: what writes do after a local write failed */
		if (!strcasecmp(name, "on_io_error")) {
			if (seen_io) {
				ti->error = "Feature on_io_error duplicated";
				return -EINVAL;
			}
			seen_io = true;
			if (repl_parse_choice(dm_shift_arg(as), "pass", "stop",
					      &rc->io_error_stop)) {
				ti->error = "Invalid on_io_error (pass or stop)";
				return -EINVAL;
			}
			continue;
		}
		for (i = 0; i < ARRAY_SIZE(repl_features); i++)
			if (!strcasecmp(name, repl_features[i].name))
				break;
		if (i == ARRAY_SIZE(repl_features)) {
			ti->error = "Unrecognised feature requested";
			return -EINVAL;
		}
		f = &repl_features[i];
		if (seen[i]) {
			ti->error = f->dup_error;
			return -EINVAL;
		}
		seen[i] = true;
		val = repl_feature_val(rc, f);
		r = dm_read_arg(&f->arg, as, val, &ti->error);
		if (r)
			return r;
		if (f->pow2 && !is_power_of_2(*val)) {
			ti->error = f->arg.error;
			return -EINVAL;
		}
	}
check:
	if (!rc->extent_kb)		/* not given */
		rc->extent_kb = max(DM_REPL_DEFAULT_EXTENT_KB, rc->region_kb);
	if (rc->extent_kb < rc->region_kb) {
		ti->error = "extent_kb is smaller than region_kb";
		return -EINVAL;
	}
	if (rc->extent_kb / rc->region_kb > DM_REPL_MAX_EXTENT_REGIONS) {
		ti->error = "extent_kb is more than 32768 regions";
		return -EINVAL;
	}
	return 0;
}

static void repl_free(struct dm_target *ti, struct repl_c *rc)
{
	/* a longer table that never resumed: the ring never grew */
	repl_ring_grow_free(rc->grow);
	/* the ring stops using the metadata device before we close it */
	if (rc->ring)
		repl_ring_put(rc->ring, rc);
	if (rc->meta_dev)
		dm_put_device(ti, rc->meta_dev);
	if (rc->dev)
		dm_put_device(ti, rc->dev);
	kfree(rc);
}

/*
 * Construct a replicated mapping:
 *
 *   repl <data_dev> <meta_dev|-> <mode> [<#feature_args> [<arg>]*]
 *
 * data_dev:       the device holding the data, mapped from its sector 0
 * meta_dev:       metadata device holding the persistent bitmap (written by
 *                 "replctl create-md"), or "-" for none: then the bitmap
 *                 lives in memory and an unclean shutdown needs a full
 *                 resync
 * mode:           "sync" (a write completes once its record is also
 *                 acknowledged by the daemon) or "async"
 * #feature_args:  number of feature argument words that follow
 * features:
 *   ring_size_mb <4..4096>        data area of the ring (default 64)
 *   hold_timeout_ms <1..60000>    how long a sync write waits for its ack,
 *                                 and a writer for ring space (default 5000)
 *   region_kb <4..1048576>        dirty-bitmap region, a power of 2
 *                                 (default 64)
 *   extent_kb <4..1048576>        write-intent extent, a power of 2, from
 *                                 region_kb to 32768 regions (default
 *                                 4096, or region_kb if larger): the first
 *                                 write to an extent marks all its regions
 *                                 on the metadata device at once
 *   max_extents <1..16777216>     at most this many extents active; a
 *                                 write beyond marks its regions one by
 *                                 one (default 1237, as DRBD's al-extents)
 *   record_kb <4..1024>           largest payload of one record, a power
 *                                 of 2; a longer write is logged as several
 *                                 records, split at record_kb boundaries,
 *                                 and written locally in one piece
 *                                 (default 256); may change on reload
 *   on_io_error <pass|stop>       after a local write failed (its regions
 *                                 are marked out of sync either way):
 *                                 pass (default) goes on writing; stop
 *                                 fails every later write with EIO at once,
 *                                 logging nothing and leaving the data
 *                                 device alone, until the table is
 *                                 reloaded
 *
 * Example: 0 2097152 repl /dev/vg/data - sync 4 ring_size_mb 128 hold_timeout_ms 2000
 *
 * dmsetup table re-emits a line of this form with the devices as
 * major:minor, the current mode and hold_timeout_ms (both change with a
 * message), and only the features that differ from their default (none:
 * no feature group); the example above comes back as
 * "254:3 - sync 4 ring_size_mb 128 hold_timeout_ms 2000".
 */
static int repl_ctr(struct dm_target *ti, unsigned int argc, char **argv)
{
	struct dm_arg_set as = { .argc = argc, .argv = argv };
	struct repl_ring_geometry geo;
	struct repl_c *rc;
	const char *arg;
	size_t i;
	int r;

	if (argc < 3) {
		ti->error = "Need <data_dev> <meta_dev|-> <sync|async> [<#features> <arg>...]";
		return -EINVAL;
	}
	rc = kzalloc(sizeof(*rc), GFP_KERNEL);
	if (!rc) {
		ti->error = "Cannot allocate context";
		return -ENOMEM;
	}
	rc->ti = ti;
	/* extent_kb stays 0 (not given) until the features are parsed */
	for (i = 0; i < ARRAY_SIZE(repl_features); i++)
		*repl_feature_val(rc, &repl_features[i]) = repl_features[i].def;
	INIT_LIST_HEAD(&rc->ring_node);

	r = dm_get_device(ti, dm_shift_arg(&as), dm_table_get_mode(ti->table),
			  &rc->dev);
	if (r) {
		ti->error = "Data device lookup failed";
		goto bad;
	}
	arg = dm_shift_arg(&as);
	if (strcmp(arg, "-")) {
		r = dm_get_device(ti, arg, dm_table_get_mode(ti->table), &rc->meta_dev);
		if (r) {
			ti->error = "Metadata device lookup failed";
			goto bad;
		}
		if (rc->meta_dev->bdev == rc->dev->bdev) {
			ti->error = "Metadata device is the data device";
			r = -EINVAL;
			goto bad;
		}
	}
	r = repl_parse_mode(dm_shift_arg(&as), &rc->mode);
	if (r) {
		ti->error = "Invalid mode (sync or async)";
		goto bad;
	}
	r = repl_parse_features(&as, rc, ti);
	if (r)
		goto bad;
	if (as.argc) {
		ti->error = "Too many arguments";
		r = -EINVAL;
		goto bad;
	}

	geo.data_size = (u64)rc->ring_size_mb << 20;
	geo.dev_sectors = ti->len;
	geo.region_shift = ilog2(rc->region_kb) + 10;
	geo.extent_shift = ilog2(rc->extent_kb) + 10;
	geo.max_extents = rc->max_extents;
	geo.meta_dev = rc->meta_dev;
	geo.wq = repl_wq;
	geo.copy_wq = repl_copy_wq;
	/* dm_device_name() is the kernel's "dm-N"; the resource is the dm name. */
	if (dm_copy_name_and_uuid(dm_table_get_md(ti->table), geo.name, NULL)) {
		ti->error = "Cannot read the mapped device's name";
		r = -ENXIO;
		goto bad;
	}
	r = repl_ring_get(disk_devt(dm_disk(dm_table_get_md(ti->table))),
			  &geo, rc, &rc->ring, &ti->error);
	if (r)
		goto bad;
	/* longer than the device is now (the ring refuses shorter): grown at resume */
	if (ti->len > rc->ring->dev_sectors) {
		rc->grow = repl_ring_grow_prepare(rc->ring, ti->len, &ti->error);
		if (IS_ERR(rc->grow)) {
			r = PTR_ERR(rc->grow);
			rc->grow = NULL;
			goto bad;
		}
	}

	/*
	 * The ring cuts a write into records; dm splits reads and writes only
	 * at 1 MiB (not discards and write-zeroes: see REPL_MAX_IO_SECTORS).
	 */
	r = dm_set_target_max_io_len(ti, REPL_MAX_IO_SECTORS);
	if (r) {
		ti->error = "Cannot set max_io_len";
		goto bad;
	}
	ti->num_flush_bios = 1;
	ti->num_discard_bios = 1;
	ti->num_write_zeroes_bios = 1;
	ti->per_io_data_size = sizeof(struct repl_bio);
	/* The payload copied into the ring must be what reaches the disk. */
	ti->needs_stable_writes = true;
	ti->private = rc;
	return 0;
bad:
	repl_free(ti, rc);
	return r;
}

static void repl_dtr(struct dm_target *ti)
{
	repl_free(ti, ti->private);
}

static int repl_map(struct dm_target *ti, struct bio *bio)
{
	struct repl_c *rc = ti->private;
	struct repl_bio *pb = dm_per_bio_data(bio, sizeof(*pb));
	u16 op, flags = 0;

	pb->flags = 0;
	pb->sector = 0;
	pb->nr_sectors = 0;
	pb->mode = &rc->mode;
	INIT_LIST_HEAD(&pb->held);
	bio_set_dev(bio, rc->dev->bdev);
	if (bio_sectors(bio))
		bio->bi_iter.bi_sector = dm_target_offset(ti, bio->bi_iter.bi_sector);
	if (!op_is_write(bio_op(bio)))
		return DM_MAPIO_REMAPPED;
	/*
	 * on_io_error stop, after a failed local write: the data device and
	 * the peers keep what they have, the last consistent state.
	 */
	if (READ_ONCE(rc->io_stopped))
		return DM_MAPIO_KILL;

	switch (bio_op(bio)) {
	case REQ_OP_WRITE:
		if (bio_sectors(bio))
			op = DM_REPL_OP_WRITE;
		else if (bio->bi_opf & REQ_PREFLUSH)
			op = DM_REPL_OP_FLUSH;
		else
			return DM_MAPIO_REMAPPED;
		if (bio->bi_opf & REQ_FUA)
			flags |= DM_REPL_F_FUA;
		break;
	case REQ_OP_DISCARD:
		op = DM_REPL_OP_DISCARD;
		break;
	case REQ_OP_WRITE_ZEROES:
		op = DM_REPL_OP_WRITE_ZEROES;
		break;
	default:
		/* Nothing else is enabled on this target (secure erase, zones). */
		return DM_MAPIO_KILL;
	}
	if (READ_ONCE(rc->mode) == REPL_MODE_SYNC)
		flags |= DM_REPL_F_SYNC;

	pb->sector = bio_sectors(bio) ? bio->bi_iter.bi_sector : 0;
	pb->nr_sectors = bio_sectors(bio);
	trace_repl_map(op, pb->sector, pb->nr_sectors);
	pb->mapped = jiffies;
	pb->hold_jiffies = msecs_to_jiffies(READ_ONCE(rc->hold_timeout_ms));
	return repl_ring_log(rc->ring, bio, pb, op, flags,
			     READ_ONCE(rc->hold_timeout_ms), rc->record_kb);
}

static int repl_end_io(struct dm_target *ti, struct bio *bio,
		       blk_status_t *error)
{
	struct repl_c *rc = ti->private;
	struct repl_bio *pb = dm_per_bio_data(bio, sizeof(*pb));

	/* A released bio comes back here from bio_endio(): let it go. */
	if (pb->flags & RB_RELEASED)
		return DM_ENDIO_DONE;
	if (*error && op_is_write(bio_op(bio))) {
		if (rc->io_error_stop)
			WRITE_ONCE(rc->io_stopped, true);
		/* not logged: an unlogged write's regions are marked already */
		if (!(pb->flags & RB_LOGGED))
			repl_ring_io_error(rc->ring, pb->sector, pb->nr_sectors,
					   false);
	}
	if (!(pb->flags & RB_LOGGED))
		return DM_ENDIO_DONE;
	return repl_ring_end_io(rc->ring, pb, *error);
}

static const char *repl_state_name(u32 state)
{
	if (state & DM_REPL_STATE_OVERFLOW)
		return "overflow";
	if (state & DM_REPL_STATE_DEGRADED)
		return "degraded";
	return "ok";
}

/*
 * Status (INFO), one line, fields in this order:
 *   <mode> <state> <head_seq> <tail_seq> <acked_seq>
 *   <ring_used_bytes>/<ring_bytes> <records_used>/<records>
 *   <bytes_logged> <out_of_sync_bytes> <consumer> <held>
 *   <overflows> <hold_timeouts> <meta> <intent_regions> <active_extents>
 *   <io_errors> <space_waits>
 * state: ok | degraded (sync write not acknowledged in time; acting async
 * until caught up) | overflow (ring full: writes go to the dirty bitmap).
 * meta: none (no metadata device) | ok | failed (metadata writes failed:
 * the bitmap is no longer persistent).  io_errors: local writes that
 * failed.  space_waits: writes that waited for ring space (back-pressure
 * from a consumer that fell behind).  New fields go at the end, so that
 * parsers keep working.
 */
static void repl_status(struct dm_target *ti, status_type_t type,
			unsigned int status_flags, char *result,
			unsigned int maxlen)
{
	struct repl_c *rc = ti->private;
	unsigned int val[ARRAY_SIZE(repl_features)];
	struct repl_ring_stats st;
	unsigned int sz = 0, n;
	u64 oos;
	size_t i;

	switch (type) {
	case STATUSTYPE_INFO:
		repl_ring_stats(rc->ring, &st);
		oos = min_t(u64, st.dirty_regions * st.region_bytes,
			    (u64)ti->len << SECTOR_SHIFT);
		DMEMIT("%s %s %llu %llu %llu %llu/%llu %llu/%u %llu %llu %u %u %llu %llu %s %llu",
		       repl_mode_name(READ_ONCE(rc->mode)),
		       repl_state_name(st.state),
		       st.prod_seq, st.released, st.acked,
		       st.data_used, st.data_size, st.recs_used, st.nr_recs,
		       st.bytes_logged, oos, st.consumer ? 1 : 0, st.nr_held,
		       st.overflows, st.hold_timeouts,
		       st.meta < 0 ? "none" : st.meta ? "failed" : "ok",
		       st.intent_regions);
		DMEMIT(" %llu %llu %llu", st.active_extents, st.io_errors,
		       st.space_waits);
		break;
	case STATUSTYPE_TABLE:
		/*
		 * What the constructor accepts, with only the features whose
		 * value is not their default (as dm-flakey and dm-crypt do),
		 * and no feature group when every one is.
		 */
		DMEMIT("%s %s %s", rc->dev->name,
		       rc->meta_dev ? rc->meta_dev->name : "-",
		       repl_mode_name(READ_ONCE(rc->mode)));
		repl_feature_values(rc, val);
		for (i = 0, n = 0; i < ARRAY_SIZE(repl_features); i++)
			if (val[i] != repl_feature_default(rc, &repl_features[i]))
				n += 2;
		if (rc->io_error_stop)
			n += 2;
		if (n)
			DMEMIT(" %u", n);
		for (i = 0; i < ARRAY_SIZE(repl_features); i++)
			if (val[i] != repl_feature_default(rc, &repl_features[i]))
				DMEMIT(" %s %u", repl_features[i].name, val[i]);
		if (rc->io_error_stop)
			DMEMIT(" on_io_error stop");
		break;
	case STATUSTYPE_IMA:
		/* Everything the table says, defaults included. */
		DMEMIT_TARGET_NAME_VERSION(ti->type);
		DMEMIT(",data_device_name=%s,metadata_device_name=%s,mode=%s",
		       rc->dev->name, rc->meta_dev ? rc->meta_dev->name : "-",
		       repl_mode_name(READ_ONCE(rc->mode)));
		repl_feature_values(rc, val);
		for (i = 0; i < ARRAY_SIZE(repl_features); i++)
			DMEMIT(",%s=%u", repl_features[i].name, val[i]);
		DMEMIT(",on_io_error=%s;", rc->io_error_stop ? "stop" : "pass");
		break;
	}
}

/*
 * Messages:
 *   mode sync|async          switch live; leaving sync completes held writes
 *   hold_timeout_ms <N>      change the hold timeout (1..60000)
 *   gens                     reply with the four generation identifiers of
 *                            the metadata superblock, 16-digit hex each
 *                            (ENODEV without a metadata device)
 *   set_gens <g0> <g1> <g2> <g3>
 *                            set them (hex) and write the superblock before
 *                            returning (ENODEV without a metadata device,
 *                            EIO after a metadata write error)
 */
static int repl_message(struct dm_target *ti, unsigned int argc, char **argv,
			char *result, unsigned int maxlen)
{
	struct repl_c *rc = ti->private;
	enum repl_mode mode;
	unsigned int ms;
	char dummy;

	if (argc == 2 && !strcasecmp(argv[0], "mode")) {
		if (repl_parse_mode(argv[1], &mode)) {
			DMWARN("invalid mode \"%s\" (sync or async)", argv[1]);
			return -EINVAL;
		}
		repl_ring_set_mode(rc->ring, &rc->mode, mode);
		return 0;
	}
	if (argc == 2 && !strcasecmp(argv[0], "hold_timeout_ms")) {
		if (sscanf(argv[1], "%u%c", &ms, &dummy) != 1 || !ms ||
		    ms > REPL_MAX_HOLD_MS) {
			DMWARN("invalid hold_timeout_ms \"%s\" (1..60000)", argv[1]);
			return -EINVAL;
		}
		WRITE_ONCE(rc->hold_timeout_ms, ms);
		return 0;
	}
	if (argc == 1 && !strcasecmp(argv[0], "gens")) {
		u64 g[4];
		int r = repl_meta_get_gens(rc->ring->meta, g);

		if (r) {
			DMWARN("gens: no metadata device");
			return r;
		}
		scnprintf(result, maxlen, "%016llx %016llx %016llx %016llx",
			  g[0], g[1], g[2], g[3]);
		return 1;
	}
	if (argc == 5 && !strcasecmp(argv[0], "set_gens")) {
		u64 g[4];
		int i;

		for (i = 0; i < 4; i++) {
			if (kstrtou64(argv[i + 1], 16, &g[i])) {
				DMWARN("set_gens: \"%s\" is not a 64-bit hex number", argv[i + 1]);
				return -EINVAL;
			}
		}
		return repl_meta_set_gens(rc->ring->meta, g);
	}
	DMWARN("unrecognised message \"%s\"", argc ? argv[0] : "");
	return -EINVAL;
}

static int repl_preresume(struct dm_target *ti)
{
	struct repl_c *rc = ti->private;

	/* a longer table: the ring grows while nothing is in flight */
	if (rc->grow) {
		repl_ring_grow_commit(rc->ring, rc->grow);
		rc->grow = NULL;
	}
	/* the superblock says "in use" before the first write */
	return repl_ring_activate(rc->ring);
}

static void repl_postsuspend(struct dm_target *ti)
{
	struct repl_c *rc = ti->private;

	/* nothing in flight: the bitmap is written, the device clean */
	repl_ring_quiesce(rc->ring);
}

static void repl_resume(struct dm_target *ti)
{
	struct repl_c *rc = ti->private;

	/* The live table's mode is the ring's mode. */
	repl_ring_set_mode(rc->ring, &rc->mode, READ_ONCE(rc->mode));
}

static int repl_iterate_devices(struct dm_target *ti,
				iterate_devices_callout_fn fn, void *data)
{
	struct repl_c *rc = ti->private;

	return fn(ti, rc->dev, 0, ti->len, data);
}

static struct target_type repl_target = {
	.name = "repl",
	.version = {1, 6, 0},
	.features = DM_TARGET_SINGLETON,
	.module = THIS_MODULE,
	.ctr = repl_ctr,
	.dtr = repl_dtr,
	.map = repl_map,
	.end_io = repl_end_io,
	.status = repl_status,
	.message = repl_message,
	.preresume = repl_preresume,
	.postsuspend = repl_postsuspend,
	.resume = repl_resume,
	.iterate_devices = repl_iterate_devices,
};

static int __init dm_repl_init(void)
{
	int r;

	repl_wq = alloc_workqueue("dm-repl", WQ_MEM_RECLAIM, 0);
	if (!repl_wq)
		return -ENOMEM;
	/*
	 * Per CPU, so that a copy runs where repl_copy_cpu() sends it; CPU
	 * intensive, so that long copies do not hold back the other work
	 * items of that CPU.
	 */
	repl_copy_wq = alloc_workqueue("dm-repl-copy",
				       WQ_CPU_INTENSIVE | WQ_MEM_RECLAIM, 0);
	if (!repl_copy_wq) {
		r = -ENOMEM;
		goto bad_copy_wq;
	}
	r = repl_dev_register();
	if (r)
		goto bad_dev;
	r = dm_register_target(&repl_target);
	if (r < 0) {
		DMERR("register failed %d", r);
		goto bad_target;
	}
	return 0;
bad_target:
	repl_dev_unregister();
bad_dev:
	destroy_workqueue(repl_copy_wq);
bad_copy_wq:
	destroy_workqueue(repl_wq);
	return r;
}

/*
 * No ring is left: every repl device is gone (dm holds a module reference
 * per target), and so is every file of /dev/dm-repl and every mapping of
 * a ring (the misc device holds one per open file).
 */
static void __exit dm_repl_exit(void)
{
	dm_unregister_target(&repl_target);
	repl_dev_unregister();
	destroy_workqueue(repl_copy_wq);
	destroy_workqueue(repl_wq);
}

module_init(dm_repl_init);
module_exit(dm_repl_exit);

MODULE_DESCRIPTION(DM_NAME " target logging writes for block-level replication");
MODULE_AUTHOR("dm-repl developers");
MODULE_LICENSE("GPL");
