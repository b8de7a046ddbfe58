/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Region bitmaps as the target and the metadata device keep them: bit r is
 * bit r % 8 of byte r / 8.
 */
#ifndef REPL_BITMAP_H
#define REPL_BITMAP_H

#include <stdbool.h>
#include <stdint.h>

static inline bool bitmap_test(const uint8_t *b, uint64_t r)
{
	return b[r >> 3] & (1U << (r & 7));
}

/* The next run of set bits at or after *r below n: its start; *r goes past it. */
static inline uint64_t bitmap_next_run(const uint8_t *b, uint64_t n, uint64_t *r)
{
	uint64_t start;

	while (*r < n && !bitmap_test(b, *r))
		(*r)++;
	start = *r;
	while (*r < n && bitmap_test(b, *r))
		(*r)++;
	return start;
}

/* The bits set below n (padding beyond n does not count). */
static inline uint64_t bitmap_count(const uint8_t *b, uint64_t n)
{
	uint64_t c = 0, i;

	for (i = 0; i < n / 8; i++)
		c += (uint64_t)__builtin_popcount(b[i]);
	for (i = n & ~7ULL; i < n; i++)
		c += bitmap_test(b, i);
	return c;
}

#endif
