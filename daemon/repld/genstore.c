// SPDX-License-Identifier: GPL-2.0-only
/*
 * Where a node keeps its generation identifiers: in the metadata
 * superblock when there is a metadata device (through the target while it
 * holds the device -- "gens" / "set_gens" messages --, directly otherwise),
 * else in <state-dir>/<resource>.gens.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dmdev.h"
#include "log.h"
#include "manager-internal.h"
#include "metadata.h"

static bool has_meta(const struct manager *m)
{
	return strcmp(m->cfg->meta_device, "-") != 0;
}

/* The target holds the metadata device: the primary's own repl device. */
static bool via_target(const struct manager *m)
{
	return has_meta(m) && m->ring && !m->ring_from_caller;
}

static int file_path(const struct manager *m, char *buf, size_t len)
{
	int n = snprintf(buf, len, "%s/%s.gens", m->cfg->state_dir, m->cfg->resource);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int gens_load(struct manager *m)
{
	unsigned long long g[4] = { 0 };
	char err[256], path[PATH_MAX];
	struct md_info mi;
	int r;

	if (via_target(m)) {
		char reply[128];

		r = dmdev_message(m->dm_name, "gens", reply, sizeof(reply));
		if (r < 0)
			return log_error_errno(r, "%s: reading the generation identifiers from the target",
					       m->cfg->resource);
		if (sscanf(reply, "%llx %llx %llx %llx", &g[0], &g[1], &g[2], &g[3]) != 4)
			return log_error_errno(-EPROTO, "%s: the target answered '%s' to gens",
					       m->cfg->resource, reply);
	} else if (has_meta(m)) {
		r = md_read(m->cfg->meta_device, false, &mi, err, sizeof(err));
		if (r < 0)
			return log_error_errno(r, "%s: %s", m->cfg->resource, err);
		for (int i = 0; i < 4; i++)
			g[i] = mi.gen[i];
		if (m->cfg->role == ROLE_SECONDARY && mi.role != DM_REPL_MD_ROLE_SECONDARY) {
			if (mi.role == DM_REPL_MD_ROLE_PRIMARY && !(mi.flags & DM_REPL_MD_CLEAN))
				log_warning("%s: this node was primary and went down without a clean shutdown",
					    m->cfg->resource);
			/* the metadata records what this node is now */
			r = md_update(m->cfg->meta_device, NULL, false, DM_REPL_MD_ROLE_SECONDARY,
				      err, sizeof(err));
			if (r < 0)
				log_warning("%s: cannot record the secondary role: %s",
					    m->cfg->resource, err);
		}
	} else {
		FILE *f;

		r = file_path(m, path, sizeof(path));
		if (r < 0)
			return r;
		f = fopen(path, "re");
		if (f) {
			if (fscanf(f, "%llx %llx %llx %llx", &g[0], &g[1], &g[2], &g[3]) != 4) {
				log_warning("%s: %s unreadable: no generation identifiers",
					    m->cfg->resource, path);
				memset(g, 0, sizeof(g));
			}
			fclose(f);
		}
	}
	m->gens = (struct gens) { g[0], g[1], g[2], g[3] };
	return 0;
}

int gens_save(struct manager *m)
{
	const struct gens *g = &m->gens;
	char err[256], path[PATH_MAX], tmp[PATH_MAX + 8], msg[128];
	uint64_t v[4] = { g->current, g->bitmap, g->history, g->since };
	int r = 0;

	if (via_target(m)) {
		snprintf(msg, sizeof(msg), "set_gens %016" PRIx64 " %016" PRIx64 " %016" PRIx64
			 " %016" PRIx64, v[0], v[1], v[2], v[3]);
		r = dmdev_message(m->dm_name, msg, NULL, 0);
	} else if (has_meta(m)) {
		r = md_update(m->cfg->meta_device, v, false,
			      m->cfg->role == ROLE_PRIMARY ? DM_REPL_MD_ROLE_PRIMARY :
							     DM_REPL_MD_ROLE_SECONDARY,
			      err, sizeof(err));
		if (r < 0)
			log_error("%s: %s", m->cfg->resource, err);
	} else {
		FILE *f;

		r = file_path(m, path, sizeof(path));
		if (r < 0)
			return r;
		if (mkdir(m->cfg->state_dir, 0700) < 0 && errno != EEXIST)
			return log_error_errno(-errno, "%s: state directory %s", m->cfg->resource,
					       m->cfg->state_dir);
		snprintf(tmp, sizeof(tmp), "%s.tmp", path);
		f = fopen(tmp, "we");
		if (!f)
			return log_error_errno(-errno, "%s: %s", m->cfg->resource, tmp);
		fprintf(f, "%016" PRIx64 " %016" PRIx64 " %016" PRIx64 " %016" PRIx64 "\n",
			v[0], v[1], v[2], v[3]);
		if (fflush(f) || fdatasync(fileno(f)))
			r = -errno;
		if (fclose(f) && !r)
			r = -errno;
		if (!r && rename(tmp, path) < 0)
			r = -errno;
	}
	if (r < 0)
		return log_error_errno(r, "%s: saving the generation identifiers", m->cfg->resource);
	return 0;
}
