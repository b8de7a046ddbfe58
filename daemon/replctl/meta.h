/* SPDX-License-Identifier: GPL-2.0-only */
/* replctl create-md, upgrade-md, dump-md: a resource's metadata device. */
#ifndef REPLCTL_META_H
#define REPLCTL_META_H

#include "client.h"

int meta_create(const struct client_opts *opt, int argc, char **argv);
int meta_upgrade(const struct client_opts *opt, int argc, char **argv);
int meta_dump(const struct client_opts *opt, int argc, char **argv);

#endif
