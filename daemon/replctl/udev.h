/* SPDX-License-Identifier: GPL-2.0-only */
/* replctl udev-below DEVNAME: DM_REPL_BELOW=<resource> for udev's rules. */
#ifndef REPLCTL_UDEV_H
#define REPLCTL_UDEV_H

#include "client.h"

int udev_below(const struct client_opts *opt, int argc, char **argv);

#endif
