// SPDX-License-Identifier: GPL-2.0-only
/*
 * repl.conf's settings table (config.c), one setting a line: scope
 * (top, peer), name, type, range, default, reload (live, restart,
 * never).  test-man-settings.sh compares the names with repl.conf(5).
 */
#include <stdio.h>

#include "config.h"

static const char *type_name(enum config_type t)
{
	static const char *const names[] = {
		[CONFIG_T_UINT] = "integer", [CONFIG_T_POW2] = "power-of-2",
		[CONFIG_T_BOOL] = "boolean", [CONFIG_T_CHOICE] = "choice",
		[CONFIG_T_STRING] = "string", [CONFIG_T_LIST] = "list",
	};

	return names[t];
}

static void print_table(const char *scope, const struct config_setting *t)
{
	static const char *const reload[] = {
		[CONFIG_RELOAD_LIVE] = "live", [CONFIG_RELOAD_RESTART] = "restart",
		[CONFIG_RELOAD_NEVER] = "never",
	};

	for (; t->name; t++) {
		printf("%s\t%s\t%s\t", scope, t->name, type_name(t->type));
		if (t->type == CONFIG_T_UINT || t->type == CONFIG_T_POW2)
			printf("%u..%u\t%u", t->min, t->max, t->def);
		else if (t->type == CONFIG_T_BOOL)
			printf("-\t%s", t->def ? "true" : "false");
		else if (t->type == CONFIG_T_CHOICE)
			printf("-\t%s", t->choices[t->def]);
		else
			printf("-\t-");
		printf("\t%s\n", reload[t->reload]);
	}
}

int main(void)
{
	print_table("top", config_settings);
	print_table("peer", config_peer_settings);
	return 0;
}
