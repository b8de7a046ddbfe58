// SPDX-License-Identifier: GPL-2.0-only
/* The control socket's commands: ctl-commands.h. */
#include <string.h>

#include "ctl-commands.h"

const struct ctl_commands_info ctl_commands_list[] = {
	{ .name = "status", .readonly = true },
	{ .name = "events", .readonly = true },
	{ .name = "primary" },
	{ .name = "secondary" },
	{ .name = "set-mode", .peer = true },
	{ .name = "connect", .peer = true },
	{ .name = "disconnect", .peer = true },
	{ .name = "resync", .peer = true },
	{ .name = "verify", .peer = true },
	{ .name = "discard-my-data" },
	{ .name = NULL },
};

const struct ctl_commands_info *ctl_commands_find(const char *name)
{
	const struct ctl_commands_info *k;

	for (k = ctl_commands_list; k->name; k++)
		if (!strcmp(k->name, name))
			return k;
	return NULL;
}
