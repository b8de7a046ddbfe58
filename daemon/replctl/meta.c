// SPDX-License-Identifier: GPL-2.0-only
/* replctl create-md, upgrade-md, dump-md (meta.h). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>

#include "bitmap.h"
#include "client.h"
#include "config.h"
#include "dmdev.h"
#include "metadata.h"
#include "meta.h"

/* create-md / dump-md arguments: a resource's configuration, or options */
struct md_args {
	const char *meta, *data, *resource;
	unsigned int region_kb;
	unsigned int max_peers;
	uint64_t max_bytes;		/* --max-size, 0: not given */
	bool force;
	struct config *cfg;
};

static int md_args_parse(int argc, char **argv, struct md_args *a)
{
	char path[4096], err[512];
	int i, r;

	bool region_given = false;

	a->region_kb = 64;
	for (i = 0; i < argc; i++) {
		const char *o = argv[i];

		if (!strcmp(o, "--force"))
			a->force = true;
		else if (i + 1 < argc && !strcmp(o, "--meta"))
			a->meta = argv[++i];
		else if (i + 1 < argc && !strcmp(o, "--data"))
			a->data = argv[++i];
		else if (i + 1 < argc && !strcmp(o, "--resource"))
			a->resource = argv[++i];
		else if (i + 1 < argc && !strcmp(o, "--region-kb")) {
			a->region_kb = (unsigned int)strtoul(argv[++i], NULL, 10);
			region_given = true;
		} else if (i + 1 < argc && !strcmp(o, "--max-size")) {
			r = client_parse_size(argv[++i], &a->max_bytes);
			if (r < 0 || !a->max_bytes) {
				fprintf(stderr, "replctl: --max-size %s: a size in bytes, with K, M, G or T for KiB, MiB, GiB or TiB\n",
					argv[i]);
				return -EINVAL;
			}
		} else if (i + 1 < argc && !strcmp(o, "--max-peers")) {
			char *end;
			unsigned long v = strtoul(argv[++i], &end, 10);

			if (*end || !v || v > DM_REPL_MD_MAX_PEERS) {
				fprintf(stderr, "replctl: --max-peers %s: a number from 1 to %u\n",
					argv[i], DM_REPL_MD_MAX_PEERS);
				return -EINVAL;
			}
			a->max_peers = (unsigned int)v;
		}
		else if (o[0] != '-' && !a->cfg) {
			r = config_path(o, path, sizeof(path));
			if (r < 0) {
				fprintf(stderr, "replctl: resource name '%s'\n", o);
				return r;
			}
			r = config_load(path, &a->cfg, err, sizeof(err));
			if (r < 0) {
				fprintf(stderr, "replctl: %s\n", err);
				return r;
			}
		} else {
			fprintf(stderr, "replctl: unexpected argument '%s'\n", o);
			return -EINVAL;
		}
	}
	if (a->cfg) {
		if (!strcmp(a->cfg->meta_device, "-")) {
			fprintf(stderr, "replctl: resource %s has no meta-device in %s\n",
				a->cfg->resource, a->cfg->path);
			return -EINVAL;
		}
		a->meta = a->meta ? a->meta : a->cfg->meta_device;
		a->data = a->data ? a->data : a->cfg->device;
		/* the metadata names the repl device (dm-name, by default the resource) */
		a->resource = a->resource ? a->resource : a->cfg->dm_name;
		if (!region_given)
			a->region_kb = a->cfg->region_kb;
	}
	return 0;
}

int meta_create(const struct client_opts *opt, int argc, char **argv)
{
	(void)opt;
	struct md_args a = { 0 };
	uint64_t sectors, max;
	char err[512];
	int fd, r;

	r = md_args_parse(argc, argv, &a);
	if (r < 0)
		goto out;
	if (!a.meta || !a.data || !a.resource) {
		fprintf(stderr, "replctl: create-md needs a resource, or --meta, --data and --resource\n");
		r = -EINVAL;
		goto out;
	}
	fd = open(a.data, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || dmdev_size_sectors(fd, &sectors) < 0) {
		r = -errno;
		fprintf(stderr, "replctl: %s: %s\n", a.data, strerror(errno));
		if (fd >= 0)
			close(fd);
		goto out;
	}
	close(fd);
	if (!a.max_peers && a.cfg)
		a.max_peers = a.cfg->nr_peers > DM_REPL_MD_DEFAULT_PEERS ? a.cfg->nr_peers :
			      DM_REPL_MD_DEFAULT_PEERS;
	if (a.max_bytes) {
		max = a.max_bytes >> 9;
		if (max < sectors) {
			fprintf(stderr, "replctl: create-md: --max-size %" PRIu64 " bytes is smaller than %s (%" PRIu64 " bytes)\n",
				a.max_bytes, a.data, sectors << 9);
			r = -EINVAL;
			goto out;
		}
	} else {
		/* room to grow 4 times, or what the metadata device holds */
		uint64_t meta_sectors = 0;

		fd = open(a.meta, O_RDONLY | O_CLOEXEC);
		if (fd >= 0) {
			dmdev_size_sectors(fd, &meta_sectors);
			close(fd);
		}
		max = md_max_sectors(meta_sectors << 9, a.region_kb, a.max_peers);
		if (max > 4 * sectors)
			max = 4 * sectors;
	}
	r = md_create(a.meta, a.resource, sectors, max, a.region_kb, a.max_peers, a.force, err,
		      sizeof(err));
	if (r < 0) {
		fprintf(stderr, "replctl: create-md: %s\n", err);
		goto out;
	}
	printf("%s: metadata for resource %s (%" PRIu64 " sectors of %s, room for %" PRIu64
	       " sectors, %u KiB regions, %u peer slots)\n",
	       a.meta, a.resource, sectors, a.data, max > sectors ? max : sectors, a.region_kb,
	       a.max_peers ? a.max_peers : DM_REPL_MD_DEFAULT_PEERS);
out:
	config_free(a.cfg);
	return r;
}

int meta_upgrade(const struct client_opts *opt, int argc, char **argv)
{
	(void)opt;
	struct md_args a = { 0 };
	char err[512];
	int r;

	r = md_args_parse(argc, argv, &a);
	if (r < 0)
		goto out;
	if (!a.meta) {
		fprintf(stderr, "replctl: upgrade-md needs a resource or --meta DEV\n");
		r = -EINVAL;
		goto out;
	}
	if (!a.max_peers && a.cfg)
		a.max_peers = a.cfg->nr_peers > DM_REPL_MD_DEFAULT_PEERS ? a.cfg->nr_peers :
			      DM_REPL_MD_DEFAULT_PEERS;
	r = md_upgrade(a.meta, a.max_peers, err, sizeof(err));
	if (r < 0) {
		fprintf(stderr, "replctl: upgrade-md: %s\n", err);
		goto out;
	}
	printf("%s: metadata upgraded to format version %u, %u peer slots\n", a.meta,
	       DM_REPL_MD_VERSION, a.max_peers ? a.max_peers : DM_REPL_MD_DEFAULT_PEERS);
out:
	config_free(a.cfg);
	return r;
}

/* The peer slots: name, tracked, regions set; NULL json prints them. */
static void dump_slots(const char *meta, const struct md_info *mi, struct json_object *arr)
{
	struct md_peers p;
	uint8_t *b = NULL;
	int fd, r;

	r = md_peers_open(meta, &fd);
	if (r < 0)
		return;
	if (md_peers_read(fd, mi, &p) < 0 || posix_memalign((void **)&b, 4096, mi->bitmap_bytes)) {
		printf("  peer area: unreadable\n");
		close(fd);
		return;
	}
	if (!arr)
		printf("  peer slots:%u%s\n", mi->max_peers,
		       p.flags & DM_REPL_MD_PEERS_FRESH ? " (fresh)" : "");
	for (unsigned int i = 0; i < mi->max_peers; i++) {
		uint64_t n = 0;

		if (!(p.slot[i].flags & DM_REPL_MD_SLOT_USED))
			continue;
		if (md_slot_read(fd, mi, i, b) == 0)
			for (uint64_t k = 0; k < mi->nr_regions; k++)
				n += (b[k / 8] >> (k % 8)) & 1;
		if (arr) {
			struct json_object *o = json_object_new_object();

			json_object_object_add(o, "slot", json_object_new_int((int)i));
			json_object_object_add(o, "peer", json_object_new_string(p.slot[i].name));
			json_object_object_add(o, "tracked", json_object_new_boolean(
				p.slot[i].flags & DM_REPL_MD_SLOT_TRACKED));
			json_object_object_add(o, "set_regions", json_object_new_uint64(n));
			json_object_array_add(arr, o);
		} else {
			printf("  slot %u: peer:%s %s set:%" PRIu64 "\n", i, p.slot[i].name,
			       p.slot[i].flags & DM_REPL_MD_SLOT_TRACKED ? "tracked" :
			       "untracked (full sync)", n);
		}
	}
	free(b);
	close(fd);
}

/* The set regions as [first, last] runs. */
static struct json_object *dump_runs(const struct md_info *mi)
{
	struct json_object *runs = json_object_new_array();
	uint64_t i, first = 0;
	bool in = false;

	for (i = 0; i <= mi->nr_regions; i++) {
		bool set = i < mi->nr_regions && bitmap_test(mi->bitmap, i);

		if (set && !in)
			first = i;
		if (!set && in) {
			struct json_object *run = json_object_new_array();

			json_object_array_add(run, json_object_new_uint64(first));
			json_object_array_add(run, json_object_new_uint64(i - 1));
			json_object_array_add(runs, run);
		}
		in = set;
	}
	return runs;
}

/* The superblock's identity: uuid, generations. */
static void dump_ids(const struct md_info *mi, struct json_object *o)
{
	struct json_object *ga = json_object_new_array();
	char u[40], g[20];

	for (int k = 0; k < 16; k++)
		snprintf(u + 2 * k, 3, "%02x", mi->uuid[k]);
	json_object_object_add(o, "uuid", json_object_new_string(u));
	for (int k = 0; k < 4; k++) {
		snprintf(g, sizeof(g), "%016" PRIx64, mi->gen[k]);
		json_object_array_add(ga, json_object_new_string(g));
	}
	json_object_object_add(o, "gens", ga);
}

static void dump_json(const char *meta, const struct md_info *mi)
{
	struct json_object *o = json_object_new_object(), *slots = json_object_new_array();

	json_object_object_add(o, "resource", json_object_new_string(mi->resource));
	json_object_object_add(o, "version", json_object_new_int((int)mi->version));
	dump_ids(mi, o);
	json_object_object_add(o, "bitmap_offset", json_object_new_uint64(mi->bitmap_offset));
	json_object_object_add(o, "clean", json_object_new_boolean(mi->flags & DM_REPL_MD_CLEAN));
	json_object_object_add(o, "role", json_object_new_string(md_role_name(mi->role)));
	json_object_object_add(o, "events", json_object_new_uint64(mi->events));
	json_object_object_add(o, "dev_sectors", json_object_new_uint64(mi->dev_sectors));
	json_object_object_add(o, "region_bytes", json_object_new_uint64(1ULL << mi->region_shift));
	json_object_object_add(o, "regions", json_object_new_uint64(mi->nr_regions));
	json_object_object_add(o, "set_regions", json_object_new_uint64(mi->set_regions));
	json_object_object_add(o, "set", dump_runs(mi));
	json_object_object_add(o, "max_sectors", json_object_new_uint64(mi->max_sectors));
	json_object_object_add(o, "max_peers", json_object_new_uint64(mi->max_peers));
	json_object_object_add(o, "peers_offset", json_object_new_uint64(mi->peers_offset));
	dump_slots(meta, mi, slots);
	json_object_object_add(o, "peers", slots);
	printf("%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
	json_object_put(o);
}

static void dump_text(const char *meta, const struct md_info *mi)
{
	printf("resource:%s %s role:%s events:%" PRIu64 " sectors:%" PRIu64 " region:%llu KiB regions:%" PRIu64 " set:%" PRIu64 "\n",
	       mi->resource, mi->flags & DM_REPL_MD_CLEAN ? "clean" : "in-use",
	       md_role_name(mi->role), mi->events,
	       mi->dev_sectors, (1ULL << mi->region_shift) >> 10, mi->nr_regions,
	       mi->set_regions);
	printf("  version:%u generation:%016" PRIx64 " bitmap-generation:%016" PRIx64
	       " history:%016" PRIx64 "\n", mi->version, mi->gen[0], mi->gen[1], mi->gen[2]);
	printf("  room for:%" PRIu64 " sectors\n", mi->max_sectors);
	dump_slots(meta, mi, NULL);
}

int meta_dump(const struct client_opts *opt, int argc, char **argv)
{
	struct md_args a = { 0 };
	struct md_info mi;
	char err[512];
	int r;

	r = md_args_parse(argc, argv, &a);
	if (r < 0 || !a.meta) {
		if (!r)
			fprintf(stderr, "replctl: dump-md needs a resource or --meta DEV\n");
		config_free(a.cfg);
		return r < 0 ? r : -EINVAL;
	}
	r = md_read(a.meta, true, &mi, err, sizeof(err));
	if (r < 0) {
		fprintf(stderr, "replctl: %s\n", err);
		config_free(a.cfg);
		return r;
	}
	if (opt->json)
		dump_json(a.meta, &mi);
	else
		dump_text(a.meta, &mi);
	free(mi.bitmap);
	config_free(a.cfg);
	return 0;
}
