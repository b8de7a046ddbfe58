/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Deterministic data for the tests and test tools: a 64-bit mixer, a
 * pseudo-random sequence, and the payload
 * pattern of write i, a function of (seed, i, device offset) only, so a
 * checker can regenerate what a writer wrote.
 */
#ifndef REPL_SEQGEN_H
#define REPL_SEQGEN_H

#include <stdint.h>

/* splitmix64's finaliser */
static inline uint64_t mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* splitmix64: the next number of the sequence whose state is *s */
static inline uint64_t splitmix64(uint64_t *s)
{
	return mix64(*s += 0x9e3779b97f4a7c15ULL);
}

/* The payload word at device byte offset pos (8-aligned) of write i. */
static inline uint64_t pattern_word(uint64_t seed, uint64_t i, uint64_t pos)
{
	return mix64(seed ^ mix64((i + 1) * 0xd6e8feb86659fd93ULL ^ pos));
}

static inline void pattern_fill(uint64_t seed, uint64_t i, uint64_t off, void *buf,
				uint64_t len)
{
	uint64_t *w = buf;

	for (uint64_t k = 0; k < len / 8; k++)
		w[k] = pattern_word(seed, i, off + k * 8);
}

/* Where buf differs from write i's pattern at off: a byte offset, or -1. */
static inline int64_t pattern_check(uint64_t seed, uint64_t i, uint64_t off, const void *buf,
				    uint64_t len)
{
	const uint64_t *w = buf;

	for (uint64_t k = 0; k < len / 8; k++)
		if (w[k] != pattern_word(seed, i, off + k * 8))
			return (int64_t)(k * 8);
	return -1;
}

#endif
