/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The repld manager: one resource, one role, one event loop.
 *
 * It owns the configuration, the loop (loop.c), the control socket
 * (ctl.c) and the role: the primary (primary/: owns -- finds or creates --
 * the repl device, consumes its ring and ships every record to every peer)
 * or the secondary (secondary/: accepts the configured primary and writes
 * its records).  It reloads the configuration on SIGHUP, drains on SIGTERM,
 * talks to systemd, and switches roles on request (replctl primary /
 * secondary) by ending the run so that the caller starts the other role.
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

/* Set up: the role (device, ring or listening socket), the control socket.  Logs. */
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

#endif
