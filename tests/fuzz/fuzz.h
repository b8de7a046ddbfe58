/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * What the fuzz targets share: libFuzzer's entry point, and an assertion
 * that aborts (libFuzzer then saves the input as a crash).
 */
#ifndef REPL_FUZZ_H
#define REPL_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define ASSERT(cond) do {						\
	if (!(cond)) {							\
		fprintf(stderr, "%s:%d: ASSERT(%s) failed\n",		\
			__FILE__, __LINE__, #cond);			\
		abort();						\
	}								\
} while (0)

/* A message a parser wrote: terminated within its buffer, not empty. */
#define ASSERT_MSG(buf) ASSERT((buf)[0] && memchr((buf), 0, sizeof(buf)))

#endif
