// SPDX-License-Identifier: GPL-2.0-only
/*
 * This node's copy: the resume state saved across restarts (the stream
 * position it holds durable, consistent or not) and its own bitmap.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "config.h"
#include "ctl.h"
#include "dmdev.h"
#include "log.h"
#include "rsnap.h"
#include "sock.h"
#include "state.h"
#include "secondary.h"

/* Save the resume point (durable) with the flags as they are now. */
int copy_save(struct secondary *s, uint64_t durable)
{
	struct state st = {
		.stream_id = s->stream_id,
		.durable = durable,
		.consistent = s->consistent,
		.discard_my_data = s->discard_my_data,
	};
	const struct config *c = s->env->cfg;
	int r = state_save(c->state_dir, s->resource, &st);

	if (r < 0)
		return r;
	s->state_durable = durable;
	s->last_state_write_ms = loop_now_ms();
	return 0;
}

void copy_load(struct secondary *s)
{
	const struct config *c = s->env->cfg;
	char path[PATH_MAX];
	struct state st;
	int r;

	s->consistent = false;	/* never held a full copy */
	r = state_load(c->state_dir, s->resource, &st);
	if (r == -EBADMSG) {
		state_path(c->state_dir, s->resource, "state", path, sizeof(path));
		log_warning("%s: %s unreadable: starting without a resume point", s->resource,
			    path);
	}
	if (r < 0)
		return;
	s->stream_id = st.stream_id;
	s->state_durable = st.durable;
	s->consistent = st.consistent;
	s->discard_my_data = st.discard_my_data;
}

/* The copy is no longer (or again) consistent: on disk before we go on. */
int copy_set_consistent(struct secondary *s, bool consistent)
{
	int r;

	if (s->consistent == consistent)
		return 0;
	s->consistent = consistent;
	r = copy_save(s, s->state_durable);
	if (r < 0)
		return log_error_errno(r, "%s: saving the consistency flag", s->resource);
	log_info("%s: this copy is %s", s->resource,
		 consistent ? "consistent (UpToDate)" : "Inconsistent until a resync completes");
	return 0;
}

/*
 * This node's own metadata bitmap (it was a primary: regions it wrote that
 * the peers may lack).  Returns the number of regions set; *ret gets the
 * md_info with the bitmap (free ret->bitmap) when not NULL.  The bits
 * are counted in the bitmap (the superblock has no count): it is read
 * either way.
 */
uint64_t copy_own_bitmap(struct secondary *s, struct md_info *ret)
{
	struct md_info mi;
	char err[256];

	if (!strcmp(s->env->cfg->meta_device, "-") ||
	    md_read(s->env->cfg->meta_device, true, &mi, err, sizeof(err)) < 0)
		return 0;
	if (ret)
		*ret = mi;
	else
		free(mi.bitmap);
	return mi.set_regions;
}
