// SPDX-License-Identifier: GPL-2.0-only
/*
 * Fuzz target for the secondary's message handling (daemon/repld/
 * secondary/: the candidate connection and its Hello, then the primary's
 * connection: Data and resync blocks into the write engine, hash requests,
 * resync flushes, the Acks it sends back).
 *
 * Input: the bytes a primary sends.  For every input, a fresh secondary
 * role (node beta of resource r0, plain-insecure, its configured primary
 * alpha at 127.0.0.1) on a device file of FUZZ_DEV_SECTORS sectors and an
 * empty state directory, on its own event loop; one end of a socketpair
 * is handed to it as a connection accepted from 127.0.0.1, the input goes
 * into the other end, which is then shut down, and the loop runs until
 * the secondary closes the connection (or the bounds of fuzz-role.h).
 * What the secondary writes back is read and dropped.
 *
 * Beyond what ASan and UBSan catch: the device file never grows (nothing
 * is written beyond the device's end), and the role starts and stops
 * cleanly every time.
 */
#include <arpa/inet.h>
#include <netinet/in.h>

#define FUZZ_ROLE_RUN
#include "config.h"
#include "fuzz-role.h"

static struct {
	struct fuzz_files files;
	uint16_t port;
} fz;

/* A loopback port free now, for the listener the role insists on. */
static uint16_t free_port(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	ASSERT(fd >= 0);
	ASSERT(bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	ASSERT(getsockname(fd, (struct sockaddr *)&sa, &len) == 0);
	close(fd);
	return ntohs(sa.sin_port);
}

static void load_config(void)
{
	fz.port = free_port();
	fuzz_files_config(&fz.files, "resource = \"%s\";\nnode = \"%s\";\nrole = \"secondary\";\n"
		"device = \"%s\";\nlisten = \"127.0.0.1:%u\";\nstate-dir = \"%s\";\n"
		"control-socket = \"%s/ctl.sock\";\ntransport = \"plain-insecure\";\n"
		"drain-timeout-ms = 2000;\n"
		"peers = ( { name = \"%s\"; address = \"127.0.0.1\"; } );\n",
		FUZZ_RESOURCE, FUZZ_SECONDARY, fz.files.dev, fz.port, fz.files.state, fz.files.dir, FUZZ_PRIMARY);
}

static void setup(void)
{
	fuzz_files_make(&fz.files, "fuzz-secondary", "beta");
	load_config();
}

/* The input is all in the socket: what a tick does (Acks, the resume point). */
static void on_shut(struct fuzz_feed *f)
{
	f->role->ops->tick(f->role, loop_now_ms());
}

/* Start the role, with another port if its own was taken meanwhile. */
static struct role *start(struct role_env *env)
{
	struct role_args args = { 0 };
	struct role *r = NULL;

	for (int tries = 0; tries < 3; tries++) {
		env->cfg = fz.files.cfg;
		if (secondary_role_ops.start(env, &args, &r) == 0)
			return r;
		if (r)
			secondary_role_ops.free(r);
		r = NULL;
		load_config();
	}
	fprintf(stderr, "fuzz-secondary: the secondary role does not start (FUZZ_LOG=1 says why)\n");
	abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sockaddr_in *sin;
	struct sockaddr_storage sa = { 0 };
	struct role_env env = { 0 };
	struct fuzz_feed f = { .on_shut = on_shut };
	struct role *r;
	struct stat st;
	int sv[2];

	if (!fz.files.cfg)
		setup();
	fuzz_clear_dir(fz.files.state, false);
	ASSERT(loop_new(&env.loop) == 0);
	r = start(&env);

	sin = (struct sockaddr_in *)&sa;
	sin->sin_family = AF_INET;
	sin->sin_port = htons(40000);
	sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ASSERT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) == 0);
	secondary_adopt_fd(r, sv[1], &sa);
	fuzz_feed(&f, env.loop, r, sv[0], data, size);

	secondary_role_ops.free(r);
	loop_free(env.loop);
	/* nothing beyond the device's end */
	ASSERT(stat(fz.files.dev, &st) == 0);
	ASSERT(st.st_size == (off_t)FUZZ_DEV_SECTORS * 512);
	return 0;
}
