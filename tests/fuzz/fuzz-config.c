// SPDX-License-Identifier: GPL-2.0-only
/*
 * Fuzz target for the configuration parser (daemon/lib/common/config.c,
 * repl.conf(5) through libconfig), by its path API: the input is written
 * to a memfd and config_load() reads /proc/self/fd/<n>.
 *
 * Kept to itself: an input with an @include directive is skipped (it
 * would read other files), getaddrinfo() resolves numeric hosts only and
 * getgrnam() knows two groups, "repl" and "disk" (both wrapped at link
 * time: -Wl,--wrap).
 *
 * A configuration config_load() accepts must hold what repl.conf(5)
 * promises: valid names, absolute paths, 1 to CFG_MAX_PEERS peers of
 * unique names other than the node's, a primary's peers with addresses,
 * fence-peer-timeout-ms in its range.
 */
#include <errno.h>
#include <grp.h>
#include <netdb.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "config.h"
#include "fuzz.h"

int __real_getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
		       struct addrinfo **res);
int __wrap_getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
		       struct addrinfo **res);
struct group *__wrap_getgrnam(const char *name);

int __wrap_getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
		       struct addrinfo **res)
{
	struct addrinfo h = *hints;

	h.ai_flags |= AI_NUMERICHOST;	/* no DNS */
	return __real_getaddrinfo(node, service, &h, res);
}

struct group *__wrap_getgrnam(const char *name)
{
	static char gr_name[16];
	static struct group g;

	if (strcmp(name, "repl") && strcmp(name, "disk"))
		return NULL;
	snprintf(gr_name, sizeof(gr_name), "%s", name);
	g = (struct group) { .gr_name = gr_name, .gr_gid = name[0] == 'r' ? 990 : 6 };
	return &g;
}

static bool terminated(const char *s, size_t len)
{
	return memchr(s, 0, len) != NULL;
}

static void check_config(const struct config *c, const char *path)
{
	ASSERT(!strcmp(c->path, path));
	ASSERT(terminated(c->resource, sizeof(c->resource)) && config_name_valid(c->resource));
	ASSERT(terminated(c->dm_name, sizeof(c->dm_name)) && config_name_valid(c->dm_name) &&
	       strlen(c->dm_name) <= 63);
	ASSERT(terminated(c->node, sizeof(c->node)) && config_name_valid(c->node));
	ASSERT(c->role == ROLE_PRIMARY || c->role == ROLE_SECONDARY);
	ASSERT(terminated(c->device, sizeof(c->device)) && c->device[0] == '/');
	ASSERT(terminated(c->meta_device, sizeof(c->meta_device)) &&
	       (!strcmp(c->meta_device, "-") || c->meta_device[0] == '/'));
	ASSERT(terminated(c->resync_snapshot, sizeof(c->resync_snapshot)) &&
	       (!c->resync_snapshot[0] || c->resync_snapshot[0] == '/'));
	ASSERT(terminated(c->state_dir, sizeof(c->state_dir)));
	ASSERT(terminated(c->control_socket, sizeof(c->control_socket)));
	ASSERT(terminated(c->tls_ciphersuites, sizeof(c->tls_ciphersuites)) &&
	       c->tls_ciphersuites[0]);
	ASSERT(c->listen.len > 0 && c->listen.len <= sizeof(c->listen.sa) &&
	       terminated(c->listen.text, sizeof(c->listen.text)));
	ASSERT(c->has_role || c->role == ROLE_SECONDARY);
	ASSERT(terminated(c->fence_peer, sizeof(c->fence_peer)) &&
	       (!c->fence_peer[0] || c->fence_peer[0] == '/'));
	ASSERT(c->fence_peer_timeout_ms >= 100 && c->fence_peer_timeout_ms <= 3600000);
	ASSERT(c->nr_peers >= 1 && c->nr_peers <= CFG_MAX_PEERS && c->peers);
	for (unsigned int i = 0; i < c->nr_peers; i++) {
		const struct config_peer *p = &c->peers[i];

		ASSERT(terminated(p->name, sizeof(p->name)) && config_name_valid(p->name));
		ASSERT(strcmp(p->name, c->node));
		ASSERT(config_find_peer(c, p->name) == p);
		ASSERT(p->has_address || c->role == ROLE_SECONDARY);
		ASSERT(!p->has_address || (p->address.len > 0 &&
					   p->address.len <= sizeof(p->address.sa) &&
					   terminated(p->address.text, sizeof(p->address.text))));
		ASSERT(p->mode == MODE_ASYNC || p->mode == MODE_SEMI_SYNC || p->mode == MODE_SYNC);
		ASSERT(config_mode_name(p->mode));
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int fd = -1;
	static char path[64];
	struct config *c = NULL;
	char err[512];
	int r;

	if (memmem(data, size, "@include", 8))
		return 0;
	if (fd < 0) {
		fd = memfd_create("fuzz-config", MFD_CLOEXEC);
		ASSERT(fd >= 0);
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	}
	ASSERT(ftruncate(fd, 0) == 0);
	ASSERT(pwrite(fd, data, size, 0) == (ssize_t)size);

	memset(err, 0, sizeof(err));
	r = config_load(path, &c, err, sizeof(err));
	if (r == 0) {
		ASSERT(c);
		check_config(c, path);
		config_free(c);
	} else {
		ASSERT(r == -EINVAL || r == -ENOMEM);
		if (r == -EINVAL)
			ASSERT_MSG(err);
	}
	return 0;
}
