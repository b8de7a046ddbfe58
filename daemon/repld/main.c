// SPDX-License-Identifier: GPL-2.0-only
/*
 * repld: the dm-repl replication daemon, one resource per process.
 *
 *   repld [-d] <resource>            reads /etc/dm-repl/<resource>.conf
 *   repld [-d] -c <file>
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "config.h"
#include "dmdev.h"
#include "genstore.h"
#include "rsnap.h"
#include "log.h"
#include "macro.h"
#include "manager.h"

#ifndef REPL_VERSION
#define REPL_VERSION "unknown"
#endif

static void usage(FILE *f)
{
	fputs("Usage: repld [options] <resource>\n"
	      "       repld [options] -c <config file>\n"
	      "Replicate the repl device of a resource to its peers (primary), or\n"
	      "receive and write its records (secondary).  See repld(8), repl.conf(5).\n"
	      "  -c, --config FILE   configuration (default /etc/dm-repl/<resource>.conf)\n"
	      "  -d, --debug         debug messages\n"
	      "  -r, --role ROLE     start as primary or secondary, whatever role this\n"
	      "                      node had (kept in <state-dir>/<resource>.role)\n"
	      "  -t, --test-config   check the configuration and exit\n"
	      "  -V, --version\n"
	      "  -h, --help\n", f);
}

/*
 * At boot the devices of the resource may come a little after repld (an LV
 * activated by LVM's udev events): wait for them, up to DEVICE_WAIT_MS,
 * rather than fail the unit's first start.  What is still missing after
 * that is reported where it is opened.
 */
#define DEVICE_WAIT_MS	60000

static void wait_devices(const struct config *c)
{
	const char *devs[] = { c->device, strcmp(c->meta_device, "-") ? c->meta_device : NULL };
	struct timespec pause = { 0, 100 * 1000 * 1000 };
	struct stat st;

	for (size_t i = 0; i < ARRAY_SIZE(devs); i++) {
		if (!devs[i] || stat(devs[i], &st) == 0 || errno != ENOENT)
			continue;
		log_notice("%s: waiting for %s (up to %d s)", c->resource, devs[i],
			   DEVICE_WAIT_MS / 1000);
		sd_notifyf(0, "STATUS=%s: waiting for %s", c->resource, devs[i]);
		for (int t = 0; t < DEVICE_WAIT_MS / 100 && stat(devs[i], &st) < 0 &&
		     errno == ENOENT; t++)
			nanosleep(&pause, NULL);
	}
}

/*
 * The role to start in: --role, else the one this node last had (its role
 * file), else repl.conf's (secondary without one).  Recorded in the role
 * file, where a switch records the next.  A primary connects to its peers:
 * each needs an address.
 */
static int start_role(struct config *c, int forced)
{
	enum repl_role kept;
	int r;

	/* a role file that names no role stops repld, unless --role says */
	r = genstore_role_load(c->state_dir, c->resource, &kept);
	if (r < 0 && r != -ENOENT && !forced)
		return r;
	if (forced) {
		c->role = (enum repl_role)forced;
		log_info("%s: starting as %s (--role)", c->resource, config_role_name(c->role));
	} else if (r == 0) {
		if (kept != c->role && c->has_role)
			log_notice("%s: starting as %s, the role this node last had; repl.conf's role = \"%s\" applies to a first start only",
				   c->resource, config_role_name(kept), config_role_name(c->role));
		c->role = kept;
	}
	for (unsigned int i = 0; c->role == ROLE_PRIMARY && i < c->nr_peers; i++)
		if (!c->peers[i].has_address)
			return log_error_errno(-EDESTADDRREQ,
					       "%s: starting as primary, but peer %s has no address in %s (host[:port])",
					       c->resource, c->peers[i].name, c->path);
	if (r == 0 && kept == c->role)
		return 0;
	return genstore_role_save(c->state_dir, c->resource, c->role);
}

/*
 * A secondary writes its device itself, never under the repl device that
 * this node's primary role left: repld stops without removing it, so that
 * a restart as primary takes it over (held by it, the metadata device is
 * busy, and the secondary could not record its state there).  Removed as a
 * demotion does when nothing has it open, which makes this node's copy the
 * consistent one it was; refused when something does.
 */
static int leftover_repl_device(const struct config *c, bool *demoted)
{
	struct dmdev_info info;
	char dev[32];
	struct stat st;
	int r;

	/* a repl device of this name over this very device (its table names
	 * it major:minor) */
	if (access("/dev/mapper/control", F_OK) < 0 || stat(c->device, &st) < 0 ||
	    !S_ISBLK(st.st_mode) || dmdev_get(c->dm_name, &info) < 0 || !info.exists ||
	    strcmp(info.target, "repl"))
		return 0;
	snprintf(dev, sizeof(dev), "%u:%u ", major(st.st_rdev), minor(st.st_rdev));
	if (strncmp(info.params, dev, strlen(dev)))
		return 0;
	if (info.open_count > 0)
		return log_error_errno(-EBUSY,
				       "%s: /dev/mapper/%s, the repl device of this node's primary role, is open (%d users: mounted, or used by LVM?): a secondary cannot write below it; stop using it, or start as primary",
				       c->resource, c->dm_name, info.open_count);
	r = dmdev_remove(c->dm_name);
	if (r < 0)
		return log_error_errno(r, "%s: removing /dev/mapper/%s, left by the primary role",
				       c->resource, c->dm_name);
	log_notice("%s: removed /dev/mapper/%s, left by this node's primary role", c->resource,
		   c->dm_name);
	*demoted = true;
	return 0;
}

static int run(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "debug", no_argument, NULL, 'd' },
		{ "role", required_argument, NULL, 'r' },
		{ "test-config", no_argument, NULL, 't' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	_cleanup_(manager_freep) struct manager *m = NULL;
	struct config *cfg = NULL;
	char path[4096], err[512];
	const char *config = NULL;
	bool debug = false, test = false;
	int c, r, forced = 0;

	while ((c = getopt_long(argc, argv, "c:dr:tVh", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			config = optarg;
			break;
		case 'd':
			debug = true;
			break;
		case 'r':
			if (!strcmp(optarg, "primary")) {
				forced = ROLE_PRIMARY;
			} else if (!strcmp(optarg, "secondary")) {
				forced = ROLE_SECONDARY;
			} else {
				fprintf(stderr, "repld: --role %s: expected primary or secondary\n",
					optarg);
				return -EINVAL;
			}
			break;
		case 't':
			test = true;
			break;
		case 'V':
			printf("repld %s\n", REPL_VERSION);
			return 0;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return -EINVAL;
		}
	}
	log_setup("repld", debug);
	if (!config) {
		if (optind + 1 != argc) {
			usage(stderr);
			return -EINVAL;
		}
		r = config_path(argv[optind], path, sizeof(path));
		if (r < 0)
			return log_error_errno(r, "resource name '%s'", argv[optind]);
		config = path;
	} else if (optind != argc) {
		usage(stderr);
		return -EINVAL;
	}
	r = config_load(config, &cfg, err, sizeof(err));
	if (r < 0) {
		log_error("%s", err);
		return r;
	}
	if (test) {
		printf("%s: resource %s, node %s, %s, %u peer(s): OK\n", config, cfg->resource,
		       cfg->node, config_role_name(cfg->role), cfg->nr_peers);
		config_free(cfg);
		return 0;
	}
	bool demoted = false;

	r = start_role(cfg, forced);
	if (r < 0) {
		config_free(cfg);
		return r;
	}
	wait_devices(cfg);
	if (cfg->role == ROLE_SECONDARY) {
		r = leftover_repl_device(cfg, &demoted);
		if (r < 0) {
			config_free(cfg);
			return r;
		}
	}
	for (;;) {
		char cpath[4096], dm_name[80];
		bool demote;
		int role;

		r = manager_new(cfg, &m);
		if (r < 0) {
			config_free(cfg);
			return log_error_errno(r, "manager");
		}
		if (demoted)
			manager_set_demoted(m);
		r = manager_start(m);
		if (r < 0)
			return r;
		r = manager_run(m);
		role = manager_switch_role(m);
		if (r < 0 || !role)
			return r;
		/* replctl primary / secondary: the same configuration, the other
		 * role; the manager's configuration (a SIGHUP may have replaced
		 * the one we passed) */
		cfg = manager_config(m);
		snprintf(cpath, sizeof(cpath), "%s", cfg->path);
		snprintf(dm_name, sizeof(dm_name), "%s", cfg->dm_name);
		demote = cfg->role == ROLE_PRIMARY;
		manager_free(m);
		m = NULL;
		if (demote) {
			r = dmdev_remove(dm_name);
			if (r < 0)
				return log_error_errno(r, "becoming secondary: removing /dev/mapper/%s",
						       dm_name);
			log_info("removed /dev/mapper/%s", dm_name);
		}
		r = config_load(cpath, &cfg, err, sizeof(err));
		if (r < 0) {
			log_error("%s", err);
			return r;
		}
		cfg->role = (enum repl_role)role;
		demoted = demote;
		r = genstore_role_save(cfg->state_dir, cfg->resource, cfg->role);
		if (r < 0)
			return r;
		if (!demote && rsnap_active(cfg)) {
			/* promoted before the resync completed: back to the
			 * image from before it */
			r = rsnap_rollback(cfg);
			if (r < 0)
				return r;
		}
		log_info("%s: switching to the %s role", cfg->resource, config_role_name(cfg->role));
	}
}

int main(int argc, char **argv)
{
	int r = run(argc, argv);

	return r < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
