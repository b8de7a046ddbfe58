/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The control socket (/run/dm-repl/<resource>.sock, mode 0600, root only:
 * checked with SO_PEERCRED; see ctl_set_group()): one JSON
 * request per connection, one JSON reply, e.g.
 *
 *   {"cmd":"status"}
 *   {"cmd":"set-mode","peer":"beta","mode":"sync"}
 *
 * Replies: the status ({"ok":true, ...}) or {"ok":false,"error":"..."}.
 *
 * Commands come from tables (the manager's and the role's).  Clients are
 * served without blocking the loop: a client has CTL_REQUEST_MS from its
 * connect to send its whole request and CTL_REPLY_MS to take the reply,
 * else it is dropped.  At most CTL_MAX_CLIENTS at a time: beyond, the one
 * that has been sending its request the longest is dropped.
 *
 * A subscribing command ({"cmd":"events","statistics":false}) keeps its
 * client: it gets a line of the events state now and whenever it changes,
 * with no deadline; one that leaves more than CTL_MAX_PENDING bytes unread
 * is dropped.  At most CTL_MAX_SUBSCRIBERS.
 */
#ifndef REPL_CTL_H
#define REPL_CTL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <json-c/json.h>

struct loop;
struct ctl;

#define CTL_MAX_REQUEST	4096
#define CTL_MAX_CLIENTS	32
#define CTL_REQUEST_MS	1000
#define CTL_REPLY_MS	5000
/* events subscribers: at most, and what one may leave unread */
#define CTL_MAX_SUBSCRIBERS	8
#define CTL_MAX_PENDING		(256 << 10)

struct ctl_command {
	const char *name;
	/*
	 * 0: done, the reply is the status; or a negative errno and a reason
	 * in err.  NULL: the reply is the status.
	 */
	int (*fn)(void *ctx, struct json_object *req, char *err, size_t len);
	/* not for this node: the reply is this error */
	const char *refuse;
	/*
	 * The client stays: no reply, but a line whenever the events state
	 * changes (ctl_set_events()), until it closes or reads too slowly.
	 */
	bool subscribe;
};

/* The entries of a primary's and of a secondary's table for the other role's commands */
#define CTL_PRIMARY_REFUSALS \
	{ .name = "discard-my-data", \
	  .refuse = "discard-my-data is for a secondary: make this node secondary first" }
#define CTL_REFUSE_NO_PEERS	"this node is a secondary: peers are managed on the primary"
#define CTL_SECONDARY_REFUSALS \
	{ .name = "set-mode", .refuse = CTL_REFUSE_NO_PEERS }, \
	{ .name = "connect", .refuse = CTL_REFUSE_NO_PEERS }, \
	{ .name = "disconnect", .refuse = CTL_REFUSE_NO_PEERS }, \
	{ .name = "resync", .refuse = CTL_REFUSE_NO_PEERS }, \
	{ .name = "verify", .refuse = CTL_REFUSE_NO_PEERS }

/*
 * The events state as one line of JSON (events.h), malloc()ed, or NULL;
 * statistics: with the progress counters.
 */
typedef char *(*ctl_events_fn)(void *ctx, bool statistics);

/* The status every successful command replies with. */
typedef struct json_object *(*ctl_status_fn)(void *ctx);

/* What a control socket answers from: the status and the command tables. */
struct ctl_dispatch {
	ctl_status_fn status;
	void *status_ctx;
	const struct ctl_command *cmds[2];	/* ctl_set_commands() */
	void *cmds_ctx[2];
};

/*
 * The reply to one request, text as a client sent it (NUL-terminated):
 * a JSON object, for json_object_put().  readonly: from a member of the
 * control group.  No socket; nothing but d's functions touches the system
 * (tests/fuzz/fuzz-ctl.c calls it with tables of its own).
 */
struct json_object *ctl_answer(const struct ctl_dispatch *d, const char *text, bool readonly);

/* Bind and listen at path (a stale socket nobody answers is replaced). */
int ctl_new(struct loop *l, const char *path, ctl_status_fn status, void *status_ctx,
	    struct ctl **ret);
/*
 * The members of group may connect (the socket becomes 0660, that group's)
 * and run the read-only commands (status); everybody but root and this
 * daemon's user is refused by SO_PEERCRED in any case.
 */
int ctl_set_group(struct ctl *c, gid_t group);
/* Closes every client and the socket, and removes it. */
void ctl_free(struct ctl *c);

/*
 * The commands of table slot (0 or 1), ending with a { NULL } entry, and
 * the ctx their fn gets.  Slot 0 is looked up first.
 */
void ctl_set_commands(struct ctl *c, unsigned int slot, const struct ctl_command *cmds,
		      void *ctx);

/* Drop the clients past their deadline. */
void ctl_tick(struct ctl *c, uint64_t now_ms);

/* Where the subscribers' lines come from. */
void ctl_set_events(struct ctl *c, ctl_events_fn fn, void *ctx);
/*
 * Send each subscriber the events state if it changed since its last
 * line.  Unless force, at most every 10 ms (the loop calls it before it
 * sleeps, the tick with force).  Nothing to do without subscribers.
 */
void ctl_events_update(struct ctl *c, bool force);

/* A request's string argument, or NULL; a boolean one, false if absent. */
const char *ctl_arg_str(struct json_object *req, const char *key);
bool ctl_arg_bool(struct json_object *req, const char *key);

#endif
