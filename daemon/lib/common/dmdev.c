// SPDX-License-Identifier: GPL-2.0-only
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>

#include <libdevmapper.h>

#include "dmdev.h"

int dmdev_repl_params(const struct dmdev_table *t, char *buf, size_t len)
{
	int n = snprintf(buf, len,
			 "%s %s %s 12 ring_size_mb %u hold_timeout_ms %u region_kb %u extent_kb %u max_extents %u record_kb %u",
			 t->data_dev, t->meta_dev ? t->meta_dev : "-", t->mode, t->ring_size_mb,
			 t->hold_timeout_ms, t->region_kb, t->extent_kb, t->max_extents,
			 t->record_kb);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

static struct dm_task *dmdev_task(int type, const char *name)
{
	struct dm_task *dmt = dm_task_create(type);

	if (!dmt)
		return NULL;
	if (name && !dm_task_set_name(dmt, name)) {
		dm_task_destroy(dmt);
		return NULL;
	}
	return dmt;
}

int dmdev_get(const char *name, struct dmdev_info *ret)
{
	struct dmdev_info info = { 0 };
	struct dm_info di;
	struct dm_task *dmt;
	uint64_t start, length;
	char *type = NULL, *params = NULL;
	int r = 0;

	/* INFO first: it answers "does not exist" without failing */
	dmt = dmdev_task(DM_DEVICE_INFO, name);
	if (!dmt)
		return -ENOMEM;
	if (!dm_task_run(dmt) || !dm_task_get_info(dmt, &di)) {
		dm_task_destroy(dmt);
		return -EIO;
	}
	dm_task_destroy(dmt);
	if (!di.exists) {
		*ret = info;
		return 0;
	}
	dmt = dmdev_task(DM_DEVICE_TABLE, name);
	if (!dmt)
		return -ENOMEM;
	dm_task_no_flush(dmt);
	if (!dm_task_run(dmt) || !dm_task_get_info(dmt, &di) || !di.exists) {
		r = -ENXIO;	/* removed meanwhile */
		goto out;
	}
	info.exists = true;
	info.major = di.major;
	info.minor = di.minor;
	info.open_count = di.open_count;
	dm_get_next_target(dmt, NULL, &start, &length, &type, &params);
	info.sectors = length;
	snprintf(info.target, sizeof(info.target), "%s", type ? type : "");
	snprintf(info.params, sizeof(info.params), "%s", params ? params : "");
	*ret = info;
out:
	dm_task_destroy(dmt);
	return r;
}

/* Run a task that changes devices, waiting for udev to settle them. */
static int dmdev_run_udev(struct dm_task *dmt)
{
	uint32_t cookie = 0;
	int r;

	if (!dm_task_set_cookie(dmt, &cookie, 0))
		return -EINVAL;
	if (dm_task_run(dmt))
		r = 0;
	else
		r = dm_task_get_errno(dmt) ? -dm_task_get_errno(dmt) : -EIO;
	dm_udev_wait(cookie);
	return r;
}

/* A device with one target over [0, sectors); uuid may be NULL. */
static int dmdev_create_one(const char *name, const char *uuid, const char *target,
			    uint64_t sectors, const char *params)
{
	struct dm_task *dmt = dmdev_task(DM_DEVICE_CREATE, name);
	int r = -EINVAL;

	if (!dmt)
		return -ENOMEM;
	if ((!uuid || dm_task_set_uuid(dmt, uuid)) &&
	    dm_task_add_target(dmt, 0, sectors, target, params))
		r = dmdev_run_udev(dmt);
	dm_task_destroy(dmt);
	return r;
}

int dmdev_create(const char *name, const char *uuid, const struct dmdev_table *t)
{
	char params[512];
	int r;

	r = dmdev_repl_params(t, params, sizeof(params));
	if (r < 0)
		return r;
	return dmdev_create_one(name, uuid, "repl", t->sectors, params);
}

int dmdev_create_target(const char *name, const char *target, uint64_t sectors,
			const char *params)
{
	return dmdev_create_one(name, NULL, target, sectors, params);
}

/* Load a new table (one target) into a live device and resume it. */
int dmdev_reload_target(const char *name, const char *target, uint64_t sectors,
			const char *params)
{
	struct dm_task *dmt;
	int r;

	dmt = dmdev_task(DM_DEVICE_RELOAD, name);
	if (!dmt)
		return -ENOMEM;
	if (!dm_task_add_target(dmt, 0, sectors, target, params) || !dm_task_run(dmt)) {
		r = dm_task_get_errno(dmt) ? -dm_task_get_errno(dmt) : -EIO;
		dm_task_destroy(dmt);
		return r;
	}
	dm_task_destroy(dmt);
	dmt = dmdev_task(DM_DEVICE_RESUME, name);
	if (!dmt)
		return -ENOMEM;
	r = dmdev_run_udev(dmt);
	dm_task_destroy(dmt);
	return r;
}

int dmdev_remove(const char *name)
{
	struct dm_task *dmt = dmdev_task(DM_DEVICE_REMOVE, name);
	int r;

	if (!dmt)
		return -ENOMEM;
	r = dmdev_run_udev(dmt);
	dm_task_destroy(dmt);
	return r;
}

int dmdev_message(const char *name, const char *msg, char *reply, size_t len)
{
	struct dm_task *dmt;
	const char *resp;
	int r = -EINVAL;

	dmt = dmdev_task(DM_DEVICE_TARGET_MSG, name);
	if (!dmt)
		return -ENOMEM;
	if (!dm_task_set_sector(dmt, 0) || !dm_task_set_message(dmt, msg))
		goto out;
	if (!dm_task_run(dmt)) {
		r = dm_task_get_errno(dmt) ? -dm_task_get_errno(dmt) : -EIO;
		goto out;
	}
	r = 0;
	if (reply && len) {
		resp = dm_task_get_message_response(dmt);
		snprintf(reply, len, "%s", resp ? resp : "");
	}
out:
	dm_task_destroy(dmt);
	return r;
}

int dmdev_status(const char *name, char *buf, size_t len)
{
	struct dm_task *dmt;
	struct dm_info di;
	uint64_t start, length;
	char *type = NULL, *params = NULL;
	int r = -EIO;

	dmt = dmdev_task(DM_DEVICE_STATUS, name);
	if (!dmt)
		return -ENOMEM;
	dm_task_no_flush(dmt);
	if (!dm_task_run(dmt) || !dm_task_get_info(dmt, &di))
		goto out;
	if (!di.exists) {
		r = -ENXIO;
		goto out;
	}
	dm_get_next_target(dmt, NULL, &start, &length, &type, &params);
	snprintf(buf, len, "%s", params ? params : "");
	r = 0;
out:
	dm_task_destroy(dmt);
	return r;
}

int dmdev_size_sectors(int fd, uint64_t *ret)
{
	struct stat st;
	uint64_t bytes;

	if (fstat(fd, &st) < 0)
		return -errno;
	if (S_ISBLK(st.st_mode)) {
		if (ioctl(fd, BLKGETSIZE64, &bytes) < 0)
			return -errno;
	} else if (S_ISREG(st.st_mode)) {
		bytes = (uint64_t)st.st_size;
	} else {
		return -ENOTBLK;
	}
	*ret = bytes >> 9;
	return 0;
}

int dmdev_repl_io_errors(const char *status, uint64_t *ret)
{
	const char *p = status;
	unsigned long long v;
	char *end;
	int i;

	for (i = 0; i < 16; i++) {
		p += strspn(p, " ");
		p += strcspn(p, " ");
	}
	p += strspn(p, " ");
	if (*p < '0' || *p > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(p, &end, 10);
	if (errno || (*end && *end != ' '))
		return -EINVAL;
	*ret = v;
	return 0;
}
