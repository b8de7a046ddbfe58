/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * replctl's verbs that ask repld to do something: set-mode, connect,
 * disconnect <resource> <peer>; resync, verify <resource> <peer> [--wait];
 * primary [--force], secondary, discard-my-data <resource>.
 */
#ifndef REPLCTL_ADMIN_H
#define REPLCTL_ADMIN_H

#include "client.h"

int admin_peer(const struct client_opts *opt, int argc, char **argv);
int admin_resync(const struct client_opts *opt, int argc, char **argv);
int admin_discard(const struct client_opts *opt, int argc, char **argv);
int admin_role(const struct client_opts *opt, int argc, char **argv);

#endif
