// SPDX-License-Identifier: GPL-2.0-only
/*
 * repl-mdversion: rewrite the format version of a dm-repl metadata
 * superblock, with a valid checksum, as an older (or a future) replctl
 * would have written it: for the tests of what the target and repld
 * refuse.  Version 1 also clears the fields version 2 added.
 *
 *   repl-mdversion <metadata device or file> <version>
 *
 * Exit status 0, 1 on an error, 2 on bad usage.
 */
#include <endian.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <linux/dm-repl.h>
#include <xxhash.h>

int main(int argc, char **argv)
{
	uint8_t b[DM_REPL_MD_SB_BYTES];
	struct dm_repl_md_sb sb;
	uint64_t c;
	char *end;
	unsigned long v;
	int fd;

	if (argc != 3 || (v = strtoul(argv[2], &end, 10), *end) || v > UINT32_MAX) {
		fprintf(stderr, "usage: repl-mdversion <metadata> <version>\n");
		return 2;
	}
	fd = open(argv[1], O_RDWR | O_SYNC);
	if (fd < 0 || pread(fd, b, sizeof(b), 0) != (ssize_t)sizeof(b)) {
		perror(argv[1]);
		return 1;
	}
	memcpy(&sb, b, sizeof(sb));
	if (le32toh(sb.magic) != DM_REPL_MD_MAGIC) {
		fprintf(stderr, "%s: no dm-repl metadata\n", argv[1]);
		return 1;
	}
	sb.version = htole32((uint32_t)v);
	if (v == 1) {
		sb.peers_offset = 0;
		sb.max_peers = 0;
	}
	sb.csum = 0;
	memcpy(b, &sb, sizeof(sb));
	c = htole64(XXH64(b, sizeof(b), 0));
	memcpy(b + offsetof(struct dm_repl_md_sb, csum), &c, sizeof(c));
	if (pwrite(fd, b, sizeof(b), 0) != (ssize_t)sizeof(b) || fsync(fd)) {
		perror(argv[1]);
		return 1;
	}
	close(fd);
	return 0;
}
