// SPDX-License-Identifier: GPL-2.0-only
/*
 * Fuzz target for the parsers of repld's own state files: state_parse()
 * (daemon/repld/state.c, <resource>.state) and gens_parse()
 * (daemon/lib/common/gens.c, <resource>.gens and the target's "gens"
 * reply), and fileio_read_text() that reads the files for them.
 *
 * Input: the bytes of a file.  Both parsers must
 *   - give what the fscanf() they replaced gives on the same file (read
 *     through fmemopen(), NUL bytes and all);
 *   - read back what their writer's format makes of what they return.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fileio.h"
#include "fuzz.h"
#include "gens.h"
#include "state.h"

/* state_load() before state_parse(): fscanf() on the file */
static int state_ref(const uint8_t *data, size_t size, struct state *ret)
{
	unsigned long long id, durable;
	int consistent = 1, discard = 0, n = EOF;
	FILE *f = size ? fmemopen((void *)data, size, "r") : NULL;

	if (f) {
		n = fscanf(f, "stream %llx durable %llu consistent %d discard %d", &id, &durable,
			   &consistent, &discard);
		fclose(f);
	}
	if (n < 2)
		return -EBADMSG;
	*ret = (struct state) {
		.stream_id = id,
		.durable = durable,
		.consistent = consistent == 1,
		.discard_my_data = discard == 1,
	};
	return 0;
}

static int gens_ref(const uint8_t *data, size_t size, struct gens *ret)
{
	unsigned long long g[4];
	int n = EOF;
	FILE *f = size ? fmemopen((void *)data, size, "r") : NULL;

	if (f) {
		n = fscanf(f, "%llx %llx %llx %llx", &g[0], &g[1], &g[2], &g[3]);
		fclose(f);
	}
	if (n != 4)
		return -EBADMSG;
	*ret = (struct gens) { g[0], g[1], g[2], g[3] };
	return 0;
}

static bool state_eq(const struct state *a, const struct state *b)
{
	return a->stream_id == b->stream_id && a->durable == b->durable &&
	       a->consistent == b->consistent && a->discard_my_data == b->discard_my_data;
}

static bool gens_eq(const struct gens *a, const struct gens *b)
{
	return a->current == b->current && a->bitmap == b->bitmap &&
	       a->history == b->history && a->since == b->since;
}

static void check_state(const uint8_t *data, size_t size)
{
	struct state st, ref, back;
	char text[160];
	int r;

	memset(&st, 0x5a, sizeof(st));
	r = state_parse((const char *)data, size, &st);
	ASSERT(r == 0 || r == -EBADMSG);
	ASSERT(state_ref(data, size, &ref) == r);
	if (r < 0)
		return;
	ASSERT(state_eq(&st, &ref));
	ASSERT(state_format(&st, text, sizeof(text)) == 0);
	ASSERT(state_parse(text, strlen(text), &back) == 0 && state_eq(&st, &back));
}

static void check_gens(const uint8_t *data, size_t size)
{
	struct gens g, ref, back;
	char text[96];
	int r;

	memset(&g, 0x5a, sizeof(g));
	r = gens_parse((const char *)data, size, &g);
	ASSERT(r == 0 || r == -EBADMSG);
	ASSERT(gens_ref(data, size, &ref) == r);
	if (r < 0)
		return;
	ASSERT(gens_eq(&g, &ref));
	/* as genstore_save() writes them */
	snprintf(text, sizeof(text), "%016" PRIx64 " %016" PRIx64 " %016" PRIx64 " %016" PRIx64
		 "\n", g.current, g.bitmap, g.history, g.since);
	ASSERT(gens_parse(text, strlen(text), &back) == 0 && gens_eq(&g, &back));
}

/* The file as fileio_read_text() reads it: every byte, then a NUL. */
static void check_read(const uint8_t *data, size_t size)
{
	static int fd = -1;
	char path[64], *text;
	size_t len;

	if (fd < 0) {
		fd = memfd_create("fuzz-state", MFD_CLOEXEC);
		ASSERT(fd >= 0);
	}
	ASSERT(ftruncate(fd, 0) == 0);
	ASSERT(pwrite(fd, data, size, 0) == (ssize_t)size);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	ASSERT(fileio_read_text(path, &text, &len) == 0);
	ASSERT(len == size && !memcmp(text, data, size) && text[len] == '\0');
	free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	check_state(data, size);
	check_gens(data, size);
	check_read(data, size);
	return 0;
}
