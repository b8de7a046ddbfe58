/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * replctl's client of repld's control socket (ctl.h in daemon/repld), and
 * the helpers every verb shares.  Errors are negative errno; a handler
 * that returns -CLIENT_EUSAGE has its verb's synopsis printed (replctl.c).
 */
#ifndef REPLCTL_CLIENT_H
#define REPLCTL_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#define RUN_DIR "/run/dm-repl"

/* wrong arguments: replctl prints the verb's usage */
#define CLIENT_EUSAGE	4095

/* What a verb's handler gets besides its arguments. */
struct client_opts {
	const char *verb;	/* as the user typed it */
	const char *sock;	/* --socket, or NULL */
	bool json;		/* --json */
};

extern bool client_quiet;	/* no message when repld is not (yet) there */
extern bool client_force;	/* primary --force */

/* $DMREPL_RUN_DIR, or RUN_DIR: where the control sockets are */
const char *client_run_dir(void);
/* Send one request, read one JSON reply (*ret).  Clear errors when repld is absent. */
int client_call(const char *resource, const char *sock, struct json_object *req,
		struct json_object **ret);
/* client_call() without a message when repld is not there */
int client_call_quiet(const char *resource, const char *sock, struct json_object *req,
		      struct json_object **ret);
/*
 * Send req (taken), check the reply says ok, print it with --json; the
 * reply goes to *ret when ret is not NULL.
 */
int client_do(const char *res, const char *sock, struct json_object *req, bool json,
	      struct json_object **ret);
/* A request {"cmd":cmd}, for json_object_put(). */
struct json_object *client_request(const char *cmd);

/* o's member k as a string ("" if absent), as a number (0 if absent) */
const char *client_str(struct json_object *o, const char *k);
uint64_t client_u64(struct json_object *o, const char *k);
/* "1.5 GiB" */
void client_human_bytes(uint64_t b, char *buf, size_t len);
/* The resources with a control socket here, malloc()ed names. */
int client_all_resources(char ***ret, int *nr);
/* name appended to the array *v of *n names: 0, or -ENOMEM (*v and *n as they were). */
int client_names_add(char ***v, int *n, char *name);
/* "512M", "2T", "1073741824": bytes */
int client_parse_size(const char *s, uint64_t *ret);
/* The peer's entry in a status reply, or NULL. */
struct json_object *client_status_peer(struct json_object *st, const char *peer);

#endif
