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
#include "tracemark.h"

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

struct options {
	const char *config;		/* -c, else NULL */
	bool debug, test;
	int forced;			/* --role, else 0 */
};

/* The command line's options: 1 to go on, 0 to exit (--version, --help), or -EINVAL. */
static int parse_options(int argc, char **argv, struct options *o)
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
	int c;

	while ((c = getopt_long(argc, argv, "c:dr:tVh", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			o->config = optarg;
			break;
		case 'd':
			o->debug = true;
			break;
		case 'r':
			if (!strcmp(optarg, "primary")) {
				o->forced = ROLE_PRIMARY;
			} else if (!strcmp(optarg, "secondary")) {
				o->forced = ROLE_SECONDARY;
			} else {
				fprintf(stderr, "repld: --role %s: expected primary or secondary\n",
					optarg);
				return -EINVAL;
			}
			break;
		case 't':
			o->test = true;
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
	return 1;
}

/*
 * The configuration file: -c's, else the resource's, the one argument
 * left (its path formatted into path).
 */
static int config_file(int argc, char **argv, struct options *o, char *path, size_t size)
{
	int r;

	if (!o->config) {
		if (optind + 1 != argc) {
			usage(stderr);
			return -EINVAL;
		}
		r = config_path(argv[optind], path, size);
		if (r < 0)
			return log_error_errno(r, "resource name '%s'", argv[optind]);
		o->config = path;
	} else if (optind != argc) {
		usage(stderr);
		return -EINVAL;
	}
	return 0;
}

/*
 * Load the configuration and prepare the first start: 1 with *ret_cfg
 * and *ret_demoted to run, 0 when done (--test-config), or a negative
 * errno.
 */
static int first_start(const struct options *o, struct config **ret_cfg, bool *ret_demoted)
{
	struct config *cfg = NULL;
	char err[512];
	bool demoted = false;
	int r;

	r = config_load(o->config, &cfg, err, sizeof(err));
	if (r < 0) {
		log_error("%s", err);
		return r;
	}
	if (o->test) {
		printf("%s: resource %s, node %s, %s, %u peer(s): OK\n", o->config, cfg->resource,
		       cfg->node, config_role_name(cfg->role), cfg->nr_peers);
		config_free(cfg);
		return 0;
	}
	r = start_role(cfg, o->forced);
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
	*ret_cfg = cfg;
	*ret_demoted = demoted;
	return 1;
}

/* What a role switch takes over from the manager that stopped. */
struct role_switch {
	int role;			/* the role asked for, 0: none */
	char cpath[4096];		/* its configuration file */
	char dm_name[80];
	bool demote;			/* from primary to secondary */
};

/*
 * Run a manager over cfg (its own from here on) until it stops: its
 * result, with sw->role set when replctl asked for a role switch.
 */
static int role_run(struct config *cfg, bool demoted, struct role_switch *sw)
{
	_cleanup_(manager_freep) struct manager *m = NULL;
	int r;

	sw->role = 0;
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
	sw->role = manager_switch_role(m);
	if (r < 0 || !sw->role)
		return r;
	/* replctl primary / secondary: the same configuration, the other
	 * role; the manager's configuration (a SIGHUP may have replaced
	 * the one we passed) */
	cfg = manager_config(m);
	snprintf(sw->cpath, sizeof(sw->cpath), "%s", cfg->path);
	snprintf(sw->dm_name, sizeof(sw->dm_name), "%s", cfg->dm_name);
	sw->demote = cfg->role == ROLE_PRIMARY;
	return r;
}

/*
 * Leave the old role (a primary's repl device goes) and load the
 * configuration for the new one into *ret_cfg.
 */
static int role_switch(const struct role_switch *sw, struct config **ret_cfg)
{
	struct config *cfg;
	char err[512];
	int r;

	if (sw->demote) {
		r = dmdev_remove(sw->dm_name);
		if (r < 0)
			return log_error_errno(r, "becoming secondary: removing /dev/mapper/%s",
					       sw->dm_name);
		log_info("removed /dev/mapper/%s", sw->dm_name);
	}
	r = config_load(sw->cpath, &cfg, err, sizeof(err));
	if (r < 0) {
		log_error("%s", err);
		return r;
	}
	cfg->role = (enum repl_role)sw->role;
	r = genstore_role_save(cfg->state_dir, cfg->resource, cfg->role);
	if (r < 0)
		return r;
	if (!sw->demote && rsnap_active(cfg)) {
		/* promoted before the resync completed: back to the
		 * image from before it */
		r = rsnap_rollback(cfg);
		if (r < 0)
			return r;
	}
	log_info("%s: switching to the %s role", cfg->resource, config_role_name(cfg->role));
	*ret_cfg = cfg;
	return 0;
}

static int run(int argc, char **argv)
{
	struct options o = { 0 };
	struct role_switch sw;
	struct config *cfg = NULL;
	char path[4096];
	bool demoted = false;
	int r;

	r = parse_options(argc, argv, &o);
	if (r <= 0)
		return r;
	log_setup("repld", o.debug);
	tracemark_init();
	r = config_file(argc, argv, &o, path, sizeof(path));
	if (r < 0)
		return r;
	r = first_start(&o, &cfg, &demoted);
	if (r <= 0)
		return r;
	for (;;) {
		r = role_run(cfg, demoted, &sw);
		if (r < 0 || !sw.role)
			return r;
		r = role_switch(&sw, &cfg);
		if (r < 0)
			return r;
		demoted = sw.demote;
	}
}

int main(int argc, char **argv)
{
	int r = run(argc, argv);

	return r < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
