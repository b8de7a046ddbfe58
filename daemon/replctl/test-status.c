// SPDX-License-Identifier: GPL-2.0-only
/*
 * replctl status for a human, from repld's JSON: the local I/O error count
 * (on a primary the target's io_errors, which repld reads from its status
 * line; on a secondary its own failed writes) is printed with its value,
 * and only when repld has it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>

#include "check.h"
#include "dmdev.h"
#include "status.h"

/* What status_print() writes for this JSON. */
static char *printed(const char *text)
{
	struct json_object *o = json_tokener_parse(text);
	static char buf[8192];
	FILE *f = tmpfile();
	int saved = dup(STDOUT_FILENO);
	size_t n;

	CHECK(o && f && saved >= 0, "setup");
	fflush(stdout);
	dup2(fileno(f), STDOUT_FILENO);
	status_print(o);
	fflush(stdout);
	dup2(saved, STDOUT_FILENO);
	close(saved);
	rewind(f);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	json_object_put(o);
	return buf;
}

#define SECONDARY(extra) \
	"{\"ok\":true,\"resource\":\"r0\",\"role\":\"secondary\",\"device\":\"/dev/vdb\"," \
	"\"device_sectors\":2048" extra ",\"primary\":{\"name\":\"alpha\"}}"
#define PRIMARY(extra) \
	"{\"ok\":true,\"resource\":\"r0\",\"role\":\"primary\",\"device\":\"r0\"," \
	"\"target\":{\"mode\":\"async\",\"state\":\"ok\",\"head\":5,\"tail\":5,\"acked\":5" extra "}}"

int main(void)
{
	uint64_t n = 0;
	char *s;

	s = printed(PRIMARY(",\"io_errors\":3"));
	CHECK(strstr(s, " io-errors:3\n"), "io_errors 3 not printed:\n%s", s);
	s = printed(PRIMARY(",\"io_errors\":0"));
	CHECK(strstr(s, " io-errors:0\n"), "io_errors 0 not printed:\n%s", s);
	s = printed(PRIMARY(""));
	CHECK(!strstr(s, "io-errors"), "io-errors without io_errors:\n%s", s);
	/* a secondary's own failed writes, on its device line */
	s = printed(SECONDARY(",\"io_errors\":2"));
	CHECK(strstr(s, "  device:/dev/vdb (1.0 MiB) io-errors:2\n"),
	      "the secondary's io_errors 2 not printed:\n%s", s);
	s = printed(SECONDARY(""));
	CHECK(!strstr(s, "io-errors"), "io-errors without io_errors:\n%s", s);

	/* the target's INFO status line (dm-repl-target.c): io_errors is the 17th field */
	CHECK_RC(dmdev_repl_io_errors("async ok 10 9 9 4096/1048576 1/256 4096 0 1 0 0 0 ok 0 1 7 0",
				      &n), 0);
	CHECK(n == 7, "io_errors %llu, want 7", (unsigned long long)n);
	CHECK_RC(dmdev_repl_io_errors("async ok 10 9 9 4096/1048576 1/256 4096 0 1 0 0 0 ok 0 1 12",
				      &n), 0);
	CHECK(n == 12, "io_errors %llu, want 12", (unsigned long long)n);
	CHECK_RC(dmdev_repl_io_errors("async ok 10 9 9 4096/1048576 1/256 4096 0 1 0 0 0 ok 0 1",
				      &n), -EINVAL);
	CHECK_RC(dmdev_repl_io_errors("", &n), -EINVAL);
	printf("status: io-errors printed from io_errors; the target's field parsed\n");
	return EXIT_SUCCESS;
}
