// SPDX-License-Identifier: GPL-2.0-only
/*
 * replctl resize (resize.h): grow the repl device to its backing device's
 * size (or --size): a reload of its table with the new length, the rest
 * unchanged.  The target grows at the resume, and repld follows; the grown
 * part is out of sync until a resync has sent it to the peers, whose
 * devices must have grown first.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>

#include "client.h"
#include "config.h"
#include "dmdev.h"
#include "metadata.h"
#include "resize.h"

/* <resource> [--size SIZE] [--config FILE]: want in sectors, 0 if not given */
static int resize_args(int argc, char **argv, uint64_t *want, const char **file)
{
	int i, r;

	for (i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--size")) {
			r = client_parse_size(argv[i + 1], want);
			if (r < 0 || !*want || *want % 512) {
				fprintf(stderr, "replctl: --size %s: a size in bytes, a multiple of 512, with K, M, G or T for KiB, MiB, GiB or TiB\n",
					argv[i + 1]);
				return -EINVAL;
			}
			*want >>= 9;
		} else if (!strcmp(argv[i], "--config")) {
			*file = argv[i + 1];
		} else {
			break;
		}
	}
	return argc < 1 || i != argc ? -CLIENT_EUSAGE : 0;
}

/* The resource's configuration (repl.conf, or file), which must be the resource's. */
static int resize_config(const char *resource, const char *file, struct config **ret)
{
	char path[PATH_MAX], err[512];
	int r;

	snprintf(err, sizeof(err), "resource name '%s'", resource);
	r = file ? (snprintf(path, sizeof(path), "%s", file) < (int)sizeof(path) ? 0 : -ENAMETOOLONG) :
		   config_path(resource, path, sizeof(path));
	if (r == 0)
		r = config_load(path, ret, err, sizeof(err));
	if (r < 0) {
		fprintf(stderr, "replctl: resize: %s\n", err);
		return r;
	}
	if (strcmp((*ret)->resource, resource)) {
		fprintf(stderr, "replctl: resize: %s is the configuration of %s, not %s\n", path,
			(*ret)->resource, resource);
		config_free(*ret);
		*ret = NULL;
		return -EINVAL;
	}
	return 0;
}

/* Whether the device may grow from had to want sectors: 1 yes, 0 nothing to do. */
static int resize_check(const struct config *c, uint64_t had, uint64_t want)
{
	char err[512];
	struct md_info mi;
	int r;

	if (want < had) {
		fprintf(stderr, "replctl: resize: %s has %" PRIu64 " sectors, %" PRIu64 " is smaller: a repl device does not shrink (what a filesystem or a peer holds there would be cut off)\n",
			c->dm_name, had, want);
		return -EINVAL;
	}
	if (want == had) {
		printf("%s: already %" PRIu64 " sectors, the size of %s: extend that first (lvextend)\n",
		       c->dm_name, had, c->device);
		return 0;
	}
	if (!strcmp(c->meta_device, "-"))
		return 1;
	r = md_read(c->meta_device, false, &mi, err, sizeof(err));
	if (r < 0) {
		fprintf(stderr, "replctl: resize: %s\n", err);
		return r;
	}
	if (want > mi.max_sectors) {
		fprintf(stderr, "replctl: resize: %s has room for a device of %" PRIu64 " sectors, not %" PRIu64 " (replctl create-md --max-size, on a larger metadata device)\n",
			c->meta_device, mi.max_sectors, want);
		return -ENOSPC;
	}
	return 1;
}

/* repld follows the device: wait until it says so (10 s). */
static int resize_wait(const char *resource, const char *sock, uint64_t want)
{
	int i, r;

	for (i = 0; i < 100; i++) {
		struct json_object *req = client_request("status"), *reply = NULL, *t;
		bool done = false;

		r = client_call_quiet(resource, sock, req, &reply);
		json_object_put(req);
		if (r < 0)
			return 0;
		if (json_object_object_get_ex(reply, "target", &t) &&
		    json_object_object_get_ex(t, "device_sectors", &t))
			done = (uint64_t)json_object_get_uint64(t) == want;
		json_object_put(reply);
		if (done) {
			printf("%s: repld replicates %" PRIu64 " sectors; the new part goes to the peers by resync (replctl status)\n",
			       resource, want);
			return 0;
		}
		usleep(100 * 1000);
	}
	fprintf(stderr, "replctl: resize: repld did not take the new size within 10 s (see its log)\n");
	return -ETIMEDOUT;
}

int resize_cmd(const struct client_opts *opt, int argc, char **argv)
{
	const char *file = NULL;
	struct dmdev_info info;
	struct config *c = NULL;
	uint64_t want = 0;
	int fd, r;

	r = resize_args(argc, argv, &want, &file);
	if (r == 0)
		r = resize_config(argv[0], file, &c);
	if (r < 0)
		return r;
	r = dmdev_get(c->dm_name, &info);
	if (r == 0 && (!info.exists || strcmp(info.target, "repl"))) {
		fprintf(stderr, "replctl: resize: no repl device /dev/mapper/%s here: resize on the primary\n",
			c->dm_name);
		r = -ENODEV;
	}
	if (r == 0 && !want) {
		fd = open(c->device, O_RDONLY | O_CLOEXEC);
		r = fd < 0 ? -errno : dmdev_size_sectors(fd, &want);
		if (fd >= 0)
			close(fd);
		if (r < 0)
			fprintf(stderr, "replctl: resize: size of %s: %s\n", c->device, strerror(-r));
	}
	if (r == 0)
		r = resize_check(c, info.sectors, want);
	if (r <= 0)
		goto out;
	/* the same table, longer: it grows at the resume */
	r = dmdev_reload_target(c->dm_name, "repl", want, info.params);
	if (r < 0) {
		fprintf(stderr, "replctl: resize: reloading %s with %" PRIu64 " sectors: %s (the kernel log says why)\n",
			c->dm_name, want, strerror(-r));
		goto out;
	}
	printf("%s: grown from %" PRIu64 " to %" PRIu64 " sectors\n", c->dm_name, info.sectors, want);
	r = resize_wait(c->resource, opt->sock, want);
out:
	config_free(c);
	return r;
}
