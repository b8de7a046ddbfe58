/* SPDX-License-Identifier: GPL-2.0-only */
/* Small state files, replaced whole. */
#ifndef REPL_FILEIO_H
#define REPL_FILEIO_H

#include <stddef.h>

/*
 * Replace path with text: written to <path>.tmp, made durable
 * (fdatasync), renamed over path, and the rename made durable (fsync of
 * the directory), so a reader finds the old contents or the new ones,
 * never a mix, and after a power loss the new ones once it returned 0.
 * 0 or -errno (before the rename: the temporary file removed; after it:
 * the new contents are in place but may not survive a power loss).
 */
int fileio_write_atomic(const char *path, const char *text);

/*
 * fsync the directory that holds path (the current one for a bare name):
 * what makes a rename into it, or a file created in it, durable.  0 or
 * -errno.
 */
int fileio_sync_dir_of(const char *path);

/*
 * The whole of path in *ret, NUL-terminated (free() it), *ret_len bytes
 * before that NUL.  Read as stdio would scan it: a read error ends the text
 * where it happened.  0, or -errno when path cannot be opened (or -ENOMEM).
 */
int fileio_read_text(const char *path, char **ret, size_t *ret_len);

#endif
