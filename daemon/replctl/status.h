/* SPDX-License-Identifier: GPL-2.0-only */
/* replctl status [<resource>...]: role, peers, lag; --json: repld's status as it is. */
#ifndef REPLCTL_STATUS_H
#define REPLCTL_STATUS_H

#include "client.h"

int status_cmd(const struct client_opts *opt, int argc, char **argv);

#endif
