// SPDX-License-Identifier: GPL-2.0-only
/* replctl: administer dm-repl resources (replctl.c). */
#include <stdlib.h>

#include "replctl.h"

int main(int argc, char **argv)
{
	return replctl_run(argc, argv) < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
