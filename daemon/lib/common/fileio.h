/* SPDX-License-Identifier: GPL-2.0-only */
/* Small state files, replaced whole. */
#ifndef REPL_FILEIO_H
#define REPL_FILEIO_H

/*
 * Replace path with text: written to <path>.tmp, made durable
 * (fdatasync), renamed over path, so a reader finds the old contents or
 * the new ones, never a mix.  0 or -errno (the temporary file removed).
 */
int fileio_write_atomic(const char *path, const char *text);

#endif
