/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * What the manager asks of a role (primary/, secondary/), and what a
 * role gets from the manager.  The manager picks the role's operations
 * once, at start; it never looks inside a role, and a role never calls the
 * manager: it reads its environment and acts on the loop.
 */
#ifndef REPL_ROLE_H
#define REPL_ROLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include "config.h"
#include "manager.h"

struct loop;
struct ctl_command;
struct sockaddr_storage;
struct tls_ctx;

/* Owned by the manager, shared with the role. */
struct role_env {
	struct loop *loop;
	/* The configuration in use.  A reload the role accepted replaces it
	 * after role_ops.reload() returned: keep no pointer into it. */
	struct config *cfg;
	/* The replication links' TLS (tls.h), NULL with plain-insecure; a
	 * reload may replace it, connections keep the one they began with. */
	struct tls_ctx *tls;
	/* SIGTERM or a role switch: finish what is in flight, start nothing */
	bool draining;
};

/* How the manager starts a role. */
struct role_args {
	/* secondary: this node was the primary a moment ago */
	bool demoted;
	/* primary: use this ring and kernel stand-in instead of the repl
	 * device (tests); the role owns the ring once started */
	struct ring *ring;
	const struct manager_kernel_ops *kops;
	void *kctx;
};

struct role;

struct role_ops {
	enum repl_role role;
	/* Set up (device, ring or listener); logs.  The role keeps env. */
	int (*start)(struct role_env *env, const struct role_args *args, struct role **ret);
	/* Every tick (100 ms): reconnects, keepalives, timeouts. */
	void (*tick)(struct role *r, uint64_t now_ms);
	/* Before the loop sleeps; true: work left, poll again without sleeping. */
	bool (*before_sleep)(struct role *r);
	/* While draining: true once everything in flight is done. */
	bool (*drained)(struct role *r);
	/* SIGHUP: the new configuration, whose resource, node, role and
	 * device are the running ones.  0: accepted (the manager then makes
	 * it env->cfg); < 0: refused, logged, the running one stays. */
	int (*reload)(struct role *r, const struct config *ncfg);
	/* Its part of the status (the manager adds resource, node, role...). */
	void (*status)(struct role *r, struct json_object *o);
	/* One line for systemd's STATUS=. */
	void (*status_line)(struct role *r, char *buf, size_t len);
	/* replctl primary / secondary: may this node switch to role now? */
	int (*may_switch)(struct role *r, enum repl_role to, bool force, char *err, size_t len);
	void (*free)(struct role *r);
	/* Its control commands, ending with { NULL } (ctx: the struct role). */
	const struct ctl_command *commands;
};

/* Every role's state begins with this. */
struct role {
	const struct role_ops *ops;
	struct role_env *env;
};

extern const struct role_ops primary_role_ops;
extern const struct role_ops secondary_role_ops;

/*
 * Tests only (tests/fuzz): hand a started secondary role a connected,
 * non-blocking stream socket fd as if its listener had accepted it from
 * sa.  The connection is a candidate like any other: its Hello is checked
 * against sa.  The role owns fd from here on.
 */
void secondary_adopt_fd(struct role *r, int fd, const struct sockaddr_storage *sa);

#endif
