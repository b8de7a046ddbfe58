/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The control socket's commands ({"cmd":"<name>",...}, ctl.h in
 * daemon/repld), the one list repld's command tables and replctl's verbs
 * are checked against (tests: test-ctl-commands.sh).  What the two sides
 * share about each: its arguments and whether a member of the control
 * group may run it.
 */
#ifndef REPL_CTL_COMMANDS_H
#define REPL_CTL_COMMANDS_H

#include <stdbool.h>
#include <stddef.h>

struct ctl_commands_info {
	const char *name;
	bool peer;		/* takes {"peer":"<name>"} */
	bool readonly;		/* for the members of the control group too */
};

/* Every command, ending with a { NULL } entry. */
extern const struct ctl_commands_info ctl_commands_list[];

/* The command called name, or NULL. */
const struct ctl_commands_info *ctl_commands_find(const char *name);

#endif
