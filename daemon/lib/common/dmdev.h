/* SPDX-License-Identifier: GPL-2.0-only */
/* The repl device through libdevmapper (udev cookies for create/remove). */
#ifndef REPL_DMDEV_H
#define REPL_DMDEV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct dmdev_info {
	bool exists;
	uint32_t major, minor;
	uint64_t sectors;
	char target[32];		/* target type of the (single) target */
	char params[512];		/* its table parameters */
	int open_count;
};

struct dmdev_table {
	const char *data_dev;
	const char *meta_dev;		/* NULL or "-": none */
	uint64_t sectors;
	const char *mode;		/* "sync" or "async" */
	unsigned int ring_size_mb;
	unsigned int hold_timeout_ms;
	unsigned int region_kb;
	unsigned int extent_kb;
	unsigned int max_extents;
	unsigned int record_kb;
};

/* The "repl" line for a table: "<data_dev> <meta_dev|-> <mode> 12 ring_size_mb ..." */
int dmdev_repl_params(const struct dmdev_table *t, char *buf, size_t len);
int dmdev_get(const char *name, struct dmdev_info *ret);
int dmdev_create(const char *name, const char *uuid, const struct dmdev_table *t);
int dmdev_remove(const char *name);
/* Generic: create a device of one target, or load one into a live device
 * and resume it. */
int dmdev_create_target(const char *name, const char *target, uint64_t sectors,
			const char *params);
int dmdev_reload_target(const char *name, const char *target, uint64_t sectors,
			const char *params);
int dmdev_message(const char *name, const char *msg, char *reply, size_t len);
/* INFO status parameters of the target, read without flushing */
int dmdev_status(const char *name, char *buf, size_t len);
/*
 * The local writes that failed (<io_errors>, the 17th field of the repl
 * target's INFO status: dm-repl-target.c), from a status line; -EINVAL if
 * it has no such field.
 */
int dmdev_repl_io_errors(const char *status, uint64_t *ret);
/* Size of a block device or regular file in 512-byte sectors */
int dmdev_size_sectors(int fd, uint64_t *ret);

#endif
