// SPDX-License-Identifier: GPL-2.0-only
/*
 * Run files through a libFuzzer target without libFuzzer: every regular
 * file named on the command line, or found in a directory named there.
 * For compilers without -fsanitize=fuzzer, and to replay a corpus in
 * every build (plain, sanitized) as a unit test.
 *
 * Usage: replay-wire <file|dir>...
 */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
	uint8_t *buf = NULL;
	size_t len = 0, cap = 0, n;
	FILE *f = fopen(path, "rb");

	if (!f) {
		fprintf(stderr, "%s: %s\n", path, strerror(errno));
		return -1;
	}
	do {
		if (len == cap) {
			uint8_t *nb;

			cap = cap ? cap * 2 : 65536;
			nb = realloc(buf, cap);
			if (!nb) {
				fclose(f);
				free(buf);
				return -1;
			}
			buf = nb;
		}
		n = fread(buf + len, 1, cap - len, f);
		len += n;
	} while (n > 0);
	if (ferror(f)) {
		fprintf(stderr, "%s: read error\n", path);
		fclose(f);
		free(buf);
		return -1;
	}
	fclose(f);
	LLVMFuzzerTestOneInput(buf, len);
	free(buf);
	return 0;
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv)
{
	unsigned long files = 0;
	int i;

	for (i = 1; i < argc; i++) {
		struct stat st;
		struct dirent *de;
		char **names = NULL;
		size_t n = 0, j;
		DIR *d;

		if (stat(argv[i], &st) < 0) {
			fprintf(stderr, "%s: %s\n", argv[i], strerror(errno));
			return 1;
		}
		if (!S_ISDIR(st.st_mode)) {
			if (run_file(argv[i]) < 0)
				return 1;
			files++;
			continue;
		}
		d = opendir(argv[i]);
		if (!d) {
			fprintf(stderr, "%s: %s\n", argv[i], strerror(errno));
			return 1;
		}
		while ((de = readdir(d))) {
			char **nn;

			if (de->d_name[0] == '.')
				continue;
			nn = realloc(names, (n + 1) * sizeof(*names));
			if (!nn)
				return 1;
			names = nn;
			if (asprintf(&names[n], "%s/%s", argv[i], de->d_name) < 0)
				return 1;
			n++;
		}
		closedir(d);
		qsort(names, n, sizeof(*names), name_cmp);
		for (j = 0; j < n; j++) {
			if (stat(names[j], &st) == 0 && S_ISREG(st.st_mode)) {
				if (run_file(names[j]) < 0)
					return 1;
				files++;
			}
			free(names[j]);
		}
		free(names);
	}
	if (files == 0) {
		fprintf(stderr, "no input files\n");
		return 1;
	}
	printf("%lu inputs ran\n", files);
	return 0;
}
