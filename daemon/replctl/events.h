/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * replctl events [<resource>...] [--now] [--statistics]: the state of each
 * resource's repld, then what changes, as it happens (drbdsetup events2).
 */
#ifndef REPLCTL_EVENTS_H
#define REPLCTL_EVENTS_H

#include "client.h"

int events_cmd(const struct client_opts *opt, int argc, char **argv);

#endif
