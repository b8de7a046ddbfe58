// SPDX-License-Identifier: GPL-2.0-only
/* Where a node keeps its generation identifiers: see genstore.h. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dmdev.h"
#include "fileio.h"
#include "genstore.h"
#include "log.h"
#include "metadata.h"
#include "state.h"

void genstore_init(struct genstore *gs, const char *resource, const char *dm_name,
		   const char *meta_device, const char *state_dir, enum repl_role role)
{
	snprintf(gs->resource, sizeof(gs->resource), "%s", resource);
	snprintf(gs->dm_name, sizeof(gs->dm_name), "%s", dm_name ? dm_name : "");
	snprintf(gs->meta_device, sizeof(gs->meta_device), "%s", meta_device);
	snprintf(gs->state_dir, sizeof(gs->state_dir), "%s", state_dir);
	gs->role = role;
}

static bool has_meta(const struct genstore *gs)
{
	return strcmp(gs->meta_device, "-") != 0;
}

/* The target holds the metadata device: the primary's own repl device. */
static bool via_target(const struct genstore *gs)
{
	return has_meta(gs) && gs->dm_name[0];
}

static int dir_make(const char *state_dir, const char *resource)
{
	int r = state_dir_make(state_dir);

	return r < 0 ? log_error_errno(r, "%s: state directory %s", resource, state_dir) : 0;
}

static int file_path(const struct genstore *gs, char *buf, size_t len)
{
	return state_path(gs->state_dir, gs->resource, "gens", buf, len);
}

int genstore_load(const struct genstore *gs, struct gens *ret)
{
	struct gens g = { 0 };
	char err[256], path[PATH_MAX];
	struct md_info mi;
	int r;

	if (via_target(gs)) {
		char reply[128];

		r = dmdev_message(gs->dm_name, "gens", reply, sizeof(reply));
		if (r < 0)
			return log_error_errno(r, "%s: reading the generation identifiers from the target",
					       gs->resource);
		r = gens_parse(reply, strlen(reply), &g);
		if (r == -ENOMEM)
			return log_error_errno(r, "%s: reading the generation identifiers",
					       gs->resource);
		if (r < 0)
			return log_error_errno(-EPROTO, "%s: the target answered '%s' to gens",
					       gs->resource, reply);
	} else if (has_meta(gs)) {
		r = md_read(gs->meta_device, false, &mi, err, sizeof(err));
		if (r < 0)
			return log_error_errno(r, "%s: %s", gs->resource, err);
		g = (struct gens) { mi.gen[0], mi.gen[1], mi.gen[2], mi.gen[3] };
		if (gs->role == ROLE_SECONDARY && mi.role != DM_REPL_MD_ROLE_SECONDARY) {
			if (mi.role == DM_REPL_MD_ROLE_PRIMARY && !(mi.flags & DM_REPL_MD_CLEAN))
				log_warning("%s: this node was primary and went down without a clean shutdown",
					    gs->resource);
			/* the metadata records what this node is now */
			r = md_update(gs->meta_device, NULL, false, DM_REPL_MD_ROLE_SECONDARY,
				      NULL, err, sizeof(err));
			if (r < 0)
				log_warning("%s: cannot record the secondary role: %s",
					    gs->resource, err);
		}
	} else {
		char *text;
		size_t len;

		r = file_path(gs, path, sizeof(path));
		if (r < 0)
			return r;
		if (fileio_read_text(path, &text, &len) == 0) {
			if (gens_parse(text, len, &g) < 0)
				log_warning("%s: %s unreadable: no generation identifiers",
					    gs->resource, path);
			free(text);
		}
	}
	*ret = g;
	return 0;
}

int genstore_save(const struct genstore *gs, const struct gens *g)
{
	char err[256], path[PATH_MAX], msg[128];
	uint64_t v[4] = { g->current, g->bitmap, g->history, g->since };
	int r = 0;

	if (via_target(gs)) {
		snprintf(msg, sizeof(msg), "set_gens %016" PRIx64 " %016" PRIx64 " %016" PRIx64
			 " %016" PRIx64, v[0], v[1], v[2], v[3]);
		r = dmdev_message(gs->dm_name, msg, NULL, 0);
	} else if (has_meta(gs)) {
		r = md_update(gs->meta_device, v, false,
			      gs->role == ROLE_PRIMARY ? DM_REPL_MD_ROLE_PRIMARY :
							     DM_REPL_MD_ROLE_SECONDARY,
			      NULL, err, sizeof(err));
		if (r < 0)
			log_error("%s: %s", gs->resource, err);
	} else {
		char text[96];

		r = file_path(gs, path, sizeof(path));
		if (r < 0)
			return r;
		r = dir_make(gs->state_dir, gs->resource);
		if (r < 0)
			return r;
		snprintf(text, sizeof(text), "%016" PRIx64 " %016" PRIx64 " %016" PRIx64
			 " %016" PRIx64 "\n", v[0], v[1], v[2], v[3]);
		r = fileio_write_atomic(path, text);
	}
	if (r < 0)
		return log_error_errno(r, "%s: saving the generation identifiers", gs->resource);
	return 0;
}

struct json_object *genstore_json(const struct gens *g)
{
	struct json_object *o = json_object_new_object();
	char b[20];

	snprintf(b, sizeof(b), "%016" PRIx64, g->current);
	json_object_object_add(o, "current", json_object_new_string(b));
	snprintf(b, sizeof(b), "%016" PRIx64, g->bitmap);
	json_object_object_add(o, "bitmap", json_object_new_string(b));
	snprintf(b, sizeof(b), "%016" PRIx64, g->history);
	json_object_object_add(o, "history", json_object_new_string(b));
	json_object_object_add(o, "since", json_object_new_uint64(g->since));
	return o;
}

int genstore_role_load(const char *state_dir, const char *resource, enum repl_role *ret)
{
	char path[PATH_MAX], *text = NULL;
	size_t len;
	int r;

	r = state_path(state_dir, resource, "role", path, sizeof(path));
	if (r < 0)
		return log_error_errno(r, "%s: role file in %s", resource, state_dir);
	r = fileio_read_text(path, &text, &len);
	if (r == -ENOENT)
		return r;
	if (r < 0)
		return log_error_errno(r, "%s: reading %s", resource, path);
	len = strcspn(text, "\n");
	if (len == strlen("primary") && !strncmp(text, "primary", len))
		*ret = ROLE_PRIMARY;
	else if (len == strlen("secondary") && !strncmp(text, "secondary", len))
		*ret = ROLE_SECONDARY;
	else
		r = -EUCLEAN;
	free(text);
	if (r < 0)
		log_error("%s: %s names no role (primary or secondary): remove it to start in repl.conf's role, or start with --role",
			  resource, path);
	return r;
}

int genstore_role_save(const char *state_dir, const char *resource, enum repl_role role)
{
	char path[PATH_MAX], text[16];
	int r;

	r = state_path(state_dir, resource, "role", path, sizeof(path));
	if (r < 0)
		return log_error_errno(r, "%s: role file in %s", resource, state_dir);
	r = dir_make(state_dir, resource);
	if (r < 0)
		return r;
	snprintf(text, sizeof(text), "%s\n", config_role_name(role));
	r = fileio_write_atomic(path, text);
	if (r < 0)
		return log_error_errno(r, "%s: recording the %s role in %s", resource,
				       config_role_name(role), path);
	return 0;
}
