// SPDX-License-Identifier: GPL-2.0-only
/*
 * resync-snapshot: a device-mapper snapshot of a secondary's backing device
 * while a resync makes it Inconsistent, so that a failover in the middle
 * lands on the last consistent image.
 *
 *   <dm-name>-rssnap    snapshot <device> <cow> P 8   (the image before)
 *   <dm-name>-rsorig    snapshot-origin <device>      (the secondary writes here)
 *
 * Writes through the origin copy the old blocks into the COW device first.
 * When the resync completes both go; when the node is promoted before it
 * completes, the snapshot is merged back (snapshot-merge), which restores
 * the image from before the resync.  This is what DRBD's
 * before-resync-target handler does with an LVM snapshot, without LVM.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dmdev.h"
#include "log.h"
#include "rsnap.h"

static void names(const struct config *c, char *orig, char *snap, size_t len)
{
	snprintf(orig, len, "%s-rsorig", c->dm_name);
	snprintf(snap, len, "%s-rssnap", c->dm_name);
}

bool rsnap_active(const struct config *c)
{
	struct dmdev_info info;
	char orig[96], snap[96];

	if (!c->resync_snapshot[0])
		return false;
	names(c, orig, snap, sizeof(orig));
	return dmdev_get(snap, &info) == 0 && info.exists;
}

int rsnap_origin_path(const struct config *c, char *buf, size_t len)
{
	char orig[96], snap[96];

	names(c, orig, snap, sizeof(orig));
	return snprintf(buf, len, "/dev/mapper/%s", orig) < (int)len ? 0 : -ENAMETOOLONG;
}

static int device_sectors(const char *path, uint64_t *ret)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), r;

	if (fd < 0)
		return -errno;
	r = dmdev_size_sectors(fd, ret);
	close(fd);
	return r;
}

int rsnap_create(const struct config *c)
{
	char orig[96], snap[96], params[2 * PATH_MAX + 32];
	uint64_t sectors;
	void *zero;
	int fd, r;

	names(c, orig, snap, sizeof(orig));
	r = device_sectors(c->device, &sectors);
	if (r < 0)
		return log_error_errno(r, "%s: size of %s", c->resource, c->device);
	/* a new, empty exception store: the header zeroed */
	fd = open(c->resync_snapshot, O_WRONLY | O_DIRECT | O_CLOEXEC);
	if (fd < 0)
		return log_error_errno(-errno, "%s: resync-snapshot %s", c->resource,
				       c->resync_snapshot);
	if (posix_memalign(&zero, 4096, 4096)) {
		close(fd);
		return -ENOMEM;
	}
	memset(zero, 0, 4096);
	r = pwrite(fd, zero, 4096, 0) == 4096 && fdatasync(fd) == 0 ? 0 : -errno;
	free(zero);
	close(fd);
	if (r < 0)
		return log_error_errno(r, "%s: clearing %s", c->resource, c->resync_snapshot);
	snprintf(params, sizeof(params), "%s %s P 8", c->device, c->resync_snapshot);
	r = dmdev_create_target(snap, "snapshot", sectors, params);
	if (r < 0)
		return log_error_errno(r, "%s: creating the snapshot %s (is dm-snapshot loaded? see the kernel log)",
				       c->resource, snap);
	r = dmdev_create_target(orig, "snapshot-origin", sectors, c->device);
	if (r < 0) {
		dmdev_remove(snap);
		return log_error_errno(r, "%s: creating the snapshot origin %s", c->resource, orig);
	}
	log_info("%s: snapshot /dev/mapper/%s of %s (copy-on-write store %s) keeps the consistent image during the resync",
		 c->resource, snap, c->device, c->resync_snapshot);
	return 0;
}

int rsnap_drop(const struct config *c)
{
	char orig[96], snap[96];
	int r;

	names(c, orig, snap, sizeof(orig));
	r = dmdev_remove(orig);
	if (r < 0 && r != -ENXIO)
		return log_error_errno(r, "%s: removing %s", c->resource, orig);
	r = dmdev_remove(snap);
	if (r < 0 && r != -ENXIO)
		return log_error_errno(r, "%s: removing %s", c->resource, snap);
	log_info("%s: resync complete: snapshot %s dropped", c->resource, snap);
	return 0;
}

/* Merge the snapshot back into the device: the image from before the resync. */
int rsnap_rollback(const struct config *c)
{
	char orig[96], snap[96], params[2 * PATH_MAX + 32], st[256];
	uint64_t sectors, alloc = 0, total = 0, meta = 0;
	int r, i;

	names(c, orig, snap, sizeof(orig));
	r = device_sectors(c->device, &sectors);
	if (r < 0)
		return r;
	/* nothing may write the device meanwhile: the origin goes first */
	r = dmdev_remove(orig);
	if (r < 0 && r != -ENXIO)
		return log_error_errno(r, "%s: removing %s", c->resource, orig);
	snprintf(params, sizeof(params), "%s %s P 8", c->device, c->resync_snapshot);
	r = dmdev_reload_target(snap, "snapshot-merge", sectors, params);
	if (r < 0)
		return log_error_errno(r, "%s: starting the merge of %s", c->resource, snap);
	log_warning("%s: the resync did not complete: merging snapshot %s back into %s",
		    c->resource, snap, c->device);
	/* status "<allocated>/<total> <metadata>": done when allocated == metadata */
	for (i = 0; i < 6000; i++) {
		r = dmdev_status(snap, st, sizeof(st));
		if (r < 0)
			return log_error_errno(r, "%s: status of %s", c->resource, snap);
		if (sscanf(st, "%" SCNu64 "/%" SCNu64 " %" SCNu64, &alloc, &total, &meta) == 3 &&
		    alloc == meta)
			break;
		usleep(100 * 1000);
	}
	if (alloc != meta)
		return log_error_errno(-ETIMEDOUT, "%s: the merge of %s did not finish (%s)",
				       c->resource, snap, st);
	r = dmdev_remove(snap);
	if (r < 0)
		return log_error_errno(r, "%s: removing %s", c->resource, snap);
	log_info("%s: %s holds the image from before the interrupted resync again",
		 c->resource, c->device);
	return 0;
}
