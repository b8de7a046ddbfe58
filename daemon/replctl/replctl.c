// SPDX-License-Identifier: GPL-2.0-only
/*
 * replctl: administer dm-repl resources through repld's control socket.
 *
 * The verbs are a table (name, arguments, help, handler): "replctl help",
 * the usage errors and the shell completion (replctl complete, used by
 * packaging/bash-completion/replctl) all come from it.  The handlers are
 * in one file per group: status.c, events.c, metrics.c, admin.c (what
 * repld is asked to do), resize.c, meta.c (the metadata device), udev.c;
 * client.c talks to repld.
 */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin.h"
#include "client.h"
#include "ctl-commands.h"
#include "events.h"
#include "macro.h"
#include "meta.h"
#include "metrics.h"
#include "replctl.h"
#include "resize.h"
#include "status.h"
#include "udev.h"

static int replctl_help(const struct client_opts *opt, int argc, char **argv);
static int replctl_complete(const struct client_opts *opt, int argc, char **argv);
static int replctl_ctl_commands(const struct client_opts *opt, int argc, char **argv);

const struct replctl_verb replctl_verbs[] = {
	{ "status", "[<resource>...]", "role, peers, lag (all resources by default)",
	  status_cmd, "status", false },
	{ "events", "[<resource>...] [--now] [--statistics]",
	  "state changes as they happen (events2)", events_cmd, "events", false },
	{ "metrics", "[<resource>...] [--listen ADDRESS:PORT]",
	  "Prometheus metrics, or an exporter", metrics_cmd, NULL, false },
	{ "set-mode", "<resource> <peer> async|semi-sync|sync", "the peer's mode, live",
	  admin_peer, "set-mode", false },
	{ "connect", "<resource> <peer>", "(re)connect a peer", admin_peer, "connect", false },
	{ "disconnect", "<resource> <peer>", "stop replicating to a peer", admin_peer,
	  "disconnect", false },
	{ "resync", "<resource> <peer> [--full] [--wait]", "bitmap (or full) resync now",
	  admin_resync, "resync", false },
	{ "verify", "<resource> <peer> [--wait]", "compare by hashes, mark differences",
	  admin_resync, "verify", false },
	{ "primary", "<resource> [--force]", "promote: bring up the repl device here",
	  admin_role, "primary", false },
	{ "secondary", "<resource>", "demote: remove it, receive from a peer", admin_role,
	  "secondary", false },
	{ "resize", "<resource> [--size SIZE] [--config FILE]",
	  "grow the repl device to its device's size", resize_cmd, NULL, false },
	{ "discard-my-data", "<resource>",
	  "(secondary) give up this copy's changes after a split brain", admin_discard,
	  "discard-my-data", false },
	{ "create-md", "<resource> [--force] | --meta DEV --data DEV --resource NAME [--region-kb N] [--max-peers N] [--max-size SIZE] [--force]",
	  "write metadata to the resource's meta-device", meta_create, NULL, false },
	{ "upgrade-md", "<resource> | --meta DEV [--max-peers N]",
	  "metadata format 1 to 2, in place", meta_upgrade, NULL, false },
	{ "dump-md", "<resource> | --meta DEV", "show a metadata device", meta_dump, NULL, false },
	{ "udev-below", "DEVNAME",
	  "(udev) DM_REPL_BELOW=<resource> when DEVNAME is a resource's device here",
	  udev_below, NULL, false },
	{ "help", "", "this list", replctl_help, NULL, false },
	{ "complete", "[<verb>]", "the verbs, or a verb's options (shell completion)",
	  replctl_complete, NULL, true },
	{ "__ctl-commands", "", "the control commands the verbs send (tests)",
	  replctl_ctl_commands, NULL, true },
	{ 0 },
};

const struct replctl_verb *replctl_find(const char *name)
{
	const struct replctl_verb *v;

	for (v = replctl_verbs; v->name; v++)
		if (!strcmp(v->name, name))
			return v;
	return NULL;
}

static void replctl_usage(FILE *f)
{
	const struct replctl_verb *v;

	fputs("Usage: replctl [--json] [--socket PATH] <command> ...\n", f);
	for (v = replctl_verbs; v->name; v++) {
		int n;

		if (v->hidden)
			continue;
		n = fprintf(f, "  %s %s", v->name, v->args);
		if (n > 41)
			fprintf(f, "\n%43s%s\n", "", v->help);
		else
			fprintf(f, "%*s%s\n", 43 - n, "", v->help);
	}
	fputs("Options:\n"
	      "  -j, --json          machine-readable output\n"
	      "  -s, --socket PATH   control socket (default " RUN_DIR "/<resource>.sock)\n"
	      "See replctl(8).\n", f);
}

static int replctl_help(const struct client_opts *opt, int argc, char **argv)
{
	(void)opt;
	(void)argv;
	if (argc)
		return -CLIENT_EUSAGE;
	replctl_usage(stdout);
	return 0;
}

/* The verbs, one a line; with a verb, the options of its synopsis. */
static int replctl_complete(const struct client_opts *opt, int argc, char **argv)
{
	const struct replctl_verb *v;
	const char *p;

	(void)opt;
	if (!argc) {
		for (v = replctl_verbs; v->name; v++)
			if (!v->hidden)
				printf("%s\n", v->name);
		return 0;
	}
	v = replctl_find(argv[0]);
	if (argc != 1 || !v)
		return argc == 1 ? 0 : -CLIENT_EUSAGE;
	for (p = strstr(v->args, "--"); p; p = strstr(p + 2, "--")) {
		size_t n = strspn(p, "-abcdefghijklmnopqrstuvwxyz");
		char opt_name[64];

		snprintf(opt_name, sizeof(opt_name), "%.*s", (int)n, p);
		/* each once */
		if (strstr(v->args, opt_name) == p)
			printf("%s\n", opt_name);
	}
	return 0;
}

static int replctl_ctl_commands(const struct client_opts *opt, int argc, char **argv)
{
	const struct replctl_verb *v;

	(void)opt;
	(void)argv;
	if (argc)
		return -CLIENT_EUSAGE;
	for (v = replctl_verbs; v->name; v++)
		if (v->ctl)
			printf("%s\n", v->ctl);
	return 0;
}

/* --json and -j may also follow the verb: taken out of argv. */
static bool replctl_json_after(int *argc, char **argv, int from)
{
	bool json = false;

	for (int i = from; i < *argc; i++) {
		if (!strcmp(argv[i], "--json") || !strcmp(argv[i], "-j")) {
			json = true;
			memmove(&argv[i], &argv[i + 1], sizeof(*argv) * (size_t)(*argc - i - 1));
			(*argc)--;
			i--;
		}
	}
	return json;
}

static int replctl_verb_run(const struct replctl_verb *v, const struct client_opts *opt,
			    int argc, char **argv)
{
	int r;

	if (v->ctl && !ctl_commands_find(v->ctl)) {
		fprintf(stderr, "replctl: %s: control command '%s' unknown\n", v->name, v->ctl);
		return -EINVAL;
	}
	r = v->fn(opt, argc, argv);
	if (r == -CLIENT_EUSAGE) {
		fprintf(stderr, "replctl: usage: replctl %s%s%s\n", v->name, *v->args ? " " : "",
			v->args);
		r = -EINVAL;
	}
	return r;
}

int replctl_run(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "socket", required_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct client_opts opt = { 0 };
	const struct replctl_verb *v;
	int c;

	while ((c = getopt_long(argc, argv, "+js:h", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			opt.json = true;
			break;
		case 's':
			opt.sock = optarg;
			break;
		case 'h':
			replctl_usage(stdout);
			return 0;
		default:
			replctl_usage(stderr);
			return -EINVAL;
		}
	}
	if (optind >= argc) {
		replctl_usage(stderr);
		return -EINVAL;
	}
	opt.verb = argv[optind++];
	if (replctl_json_after(&argc, argv, optind))
		opt.json = true;
	v = replctl_find(opt.verb);
	if (!v) {
		fprintf(stderr, "replctl: unknown command '%s'\n", opt.verb);
		replctl_usage(stderr);
		return -EINVAL;
	}
	return replctl_verb_run(v, &opt, argc - optind, argv + optind);
}
