/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * A secondary's resume point: <state-dir>/<resource>.state, one line
 *
 *   stream <ring id, hex> durable <seq> consistent <0|1> discard <0|1>
 *
 * written atomically (a new file renamed over the old one, after an
 * fdatasync, and the directory synced: fileio.h) whenever it changes:
 * every record below <seq> of that stream
 * is durable here; consistent: no resync is pending; discard: the
 * administrator gave up this copy's own changes (discard-my-data).
 */
#ifndef REPL_STATE_H
#define REPL_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct state {
	uint64_t stream_id;
	uint64_t durable;
	bool consistent;
	bool discard_my_data;
};

/*
 * <dir>/<resource>.<suffix>: this file's "state", and the other files of
 * the state directory ("gens", "role", "fence"); -ENAMETOOLONG.
 */
int state_path(const char *dir, const char *resource, const char *suffix, char *buf,
	       size_t len);
/* The state directory, made (0700) if it is not there: 0 or -errno. */
int state_dir_make(const char *dir);
/* 0; -ENOENT (no file yet), -EBADMSG (unreadable), -errno.  *ret untouched on failure. */
int state_load(const char *dir, const char *resource, struct state *ret);
int state_save(const char *dir, const char *resource, const struct state *s);

/*
 * What state_load() makes of a file's len bytes at text (not necessarily
 * NUL-terminated): 0, -EBADMSG or -ENOMEM, *ret untouched on failure.
 */
int state_parse(const char *text, size_t len, struct state *ret);
/* The line state_save() writes; -ENOBUFS when it does not fit in len. */
int state_format(const struct state *s, char *buf, size_t len);

#endif
