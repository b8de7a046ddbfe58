/* SPDX-License-Identifier: GPL-2.0-only */
/* The few macros every part of the daemon uses (model: systemd's macro.h). */
#ifndef REPL_MACRO_H
#define REPL_MACRO_H

#include <stddef.h>

/* Run f(&var) when var goes out of scope: _cleanup_(ring_freep) struct ring *r = NULL; */
#define _cleanup_(f) __attribute__((cleanup(f)))

/* The structure that holds member at ptr. */
#define container_of(ptr, type, member) \
	((type *)(void *)((char *)(ptr) - offsetof(type, member)))

/* Elements of an array (not of a pointer). */
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* names[v] of an array of names indexed by an enum, or "?" where it has none. */
#define NAME_OF(names, v) \
	((size_t)(v) < ARRAY_SIZE(names) && (names)[v] ? (names)[v] : "?")

#endif
