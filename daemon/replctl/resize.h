/* SPDX-License-Identifier: GPL-2.0-only */
/* replctl resize <resource> [--size SIZE] [--config FILE]: grow the repl device. */
#ifndef REPLCTL_RESIZE_H
#define REPLCTL_RESIZE_H

#include "client.h"

int resize_cmd(const struct client_opts *opt, int argc, char **argv);

#endif
