/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Where a node keeps its generation identifiers (gens.h): in the metadata
 * superblock when there is a metadata device -- through the target while
 * the primary's repl device holds it ("gens" / "set_gens" messages),
 * directly otherwise --, else in <state-dir>/<resource>.gens.
 */
#ifndef REPL_GENSTORE_H
#define REPL_GENSTORE_H

#include <json-c/json.h>

#include "config.h"
#include "gens.h"

struct genstore {
	char resource[CONFIG_NAME_MAX + 1];
	/* the repl device that holds the metadata device (the primary's own),
	 * or "": read and write the metadata device directly */
	char dm_name[CONFIG_NAME_MAX + 1];
	char meta_device[PATH_MAX];	/* "-": none */
	char state_dir[PATH_MAX];
	enum repl_role role;		/* recorded in the superblock */
};

/* Copies the strings: a reload may free the configuration. */
void genstore_init(struct genstore *gs, const char *resource, const char *dm_name,
		   const char *meta_device, const char *state_dir, enum repl_role role);
/* Read them (all zero when nothing is stored yet).  Logs on failure. */
int genstore_load(const struct genstore *gs, struct gens *ret);
/* Store them durably.  Logs on failure. */
int genstore_save(const struct genstore *gs, const struct gens *g);

/*
 * The role this node runs in is runtime state, kept beside the generations
 * in <state-dir>/<resource>.role ("primary" or "secondary"): chosen by
 * replctl primary / secondary (or a cluster manager through them), it
 * survives a restart and a reboot; repl.conf's role only gives the first.
 * Load: 0 and *ret, -ENOENT when none is kept yet, -EUCLEAN (logged) for a
 * file that names no role.  Save: durably, logs on failure.
 */
int genstore_role_load(const char *state_dir, const char *resource, enum repl_role *ret);
int genstore_role_save(const char *state_dir, const char *resource, enum repl_role role);

/* The generation as status shows it: {"current":"<hex>", ...}. */
struct json_object *genstore_json(const struct gens *g);

#endif
