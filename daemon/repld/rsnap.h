/* SPDX-License-Identifier: GPL-2.0-only */
/* resync-snapshot: keep a secondary's consistent image during a resync. */
#ifndef REPL_RSNAP_H
#define REPL_RSNAP_H

#include <stdbool.h>
#include <stddef.h>

#include "config.h"

/* The snapshot of the last resync exists (a resync is running, or was
 * interrupted). */
bool rsnap_active(const struct config *c);
/* /dev/mapper/<dm-name>-rsorig: where the secondary writes meanwhile */
int rsnap_origin_path(const struct config *c, char *buf, size_t len);
/* Take the snapshot: before the first resync write. */
int rsnap_create(const struct config *c);
/* The resync is complete: drop it. */
int rsnap_drop(const struct config *c);
/* Promotion before the resync completed: merge it back (blocks until done). */
int rsnap_rollback(const struct config *c);

#endif
