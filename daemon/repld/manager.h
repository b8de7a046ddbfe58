/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The repld manager: one resource, one role, one epoll loop.
 *
 * Primary: owns (finds or creates) the repl device, consumes its ring, keeps
 * one connection and one cursor per peer, ships every record, publishes the
 * acknowledged sequence for sync peers and releases ring space once every
 * peer that needs a record has it durably.
 *
 * Secondary: listens, accepts the configured primary, applies its records
 * to the local device (apply.c) and acknowledges them.
 */
#ifndef REPL_MANAGER_H
#define REPL_MANAGER_H

#include <stdbool.h>
#include <stddef.h>

#include "config.h"
#include "macro.h"


struct manager;
struct ring;

/*
 * The kernel side of a primary: the repl target (dm messages).  Tests run
 * the primary against a memory ring and a stand-in for these.
 */
struct manager_kernel_ops {
	int (*set_mode)(void *ctx, bool sync);		/* "mode sync|async" */
	int (*set_hold_timeout)(void *ctx, unsigned int ms);
};

/* Takes ownership of cfg. */
int manager_new(struct config *cfg, struct manager **ret);
void manager_free(struct manager *m);
void manager_freep(struct manager **m);

/*
 * Primary only, before manager_start(): use this ring and kernel stand-in
 * instead of the repl device (tests).  Takes ownership of r.
 */
void manager_use_ring(struct manager *m, struct ring *r,
		      const struct manager_kernel_ops *ops, void *ctx);

/* Set up: device, ring or listening socket, control socket.  Logs. */
int manager_start(struct manager *m);
/* Run until SIGTERM/SIGINT (drain first) or a fatal error.  Logs. */
int manager_run(struct manager *m);

/*
 * After manager_run(): the role the administrator switched to (replctl
 * primary / secondary), or 0.  The caller starts a new manager in it.
 */
int manager_switch_role(const struct manager *m);

/* The configuration in use (a reload replaces it; the manager owns it). */
struct config *manager_config(const struct manager *m);

/* Before manager_start() of a secondary that was the primary until now:
 * its copy is the consistent one. */
void manager_set_demoted(struct manager *m);
/* Ask the loop to stop (from another thread: tests). */
void manager_stop(struct manager *m);

#endif
