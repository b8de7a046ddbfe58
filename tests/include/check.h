/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The unit tests' assertions: CHECK(cond, fmt, ...) prints where and why and
 * exits 1; CHECK_RC(expr, want) checks a return value (ints, ssize_t and
 * negative errno alike) and prints its strerror.
 */
#ifndef REPL_TEST_CHECK_H
#define REPL_TEST_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond, ...) do {						\
	if (!(cond)) {							\
		fprintf(stderr, "%s:%d: CHECK(%s) failed: ",		\
			__FILE__, __LINE__, #cond);			\
		fprintf(stderr, __VA_ARGS__);				\
		fputc('\n', stderr);					\
		exit(1);						\
	}								\
} while (0)

#define CHECK_RC(expr, want) do {					\
	long long rc_ = (expr);						\
	CHECK(rc_ == (long long)(want), "%s = %lld (%s), want %lld",	\
	      #expr, rc_, strerror(rc_ < 0 ? (int)-rc_ : 0),		\
	      (long long)(want));					\
} while (0)

#endif
