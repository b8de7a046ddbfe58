/* SPDX-License-Identifier: GPL-2.0-only */
/* libreplapply internals shared by the engine (apply.c), its interval map
 * (apply-map.c) and its libaio backend (apply-aio.c). */
#ifndef REPL_APPLY_INTERNAL_H
#define REPL_APPLY_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "apply.h"
#include "apply-map.h"

#define APPLY_BLOCK_MIN		512U
#define APPLY_BLOCK_MAX		65536U

static inline bool apply_is_pow2(uint64_t v)
{
	return v && !(v & (v - 1));
}

/* ---- apply-aio.c ---------------------------------------------------------- */

/* The logical block size to use for fd, and whether it is a block device. */
int apply_aio_geometry(int fd, uint64_t dev_sectors, bool *ret_blkdev,
		       unsigned int *ret_block_size);
/* The libaio backend on fd with depth operations in flight. */
int apply_aio_new(int fd, bool blkdev, unsigned int block_size, unsigned int depth,
		  struct apply_backend **ret);

#endif
