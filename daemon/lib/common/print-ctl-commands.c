// SPDX-License-Identifier: GPL-2.0-only
/* The control commands of ctl-commands.c, one a line (test-ctl-commands.sh). */
#include <stdio.h>
#include <stdlib.h>

#include "ctl-commands.h"

int main(void)
{
	const struct ctl_commands_info *k;

	for (k = ctl_commands_list; k->name; k++)
		printf("%s\n", k->name);
	return EXIT_SUCCESS;
}
