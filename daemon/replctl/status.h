/* SPDX-License-Identifier: GPL-2.0-only */
/* replctl status [<resource>...]: role, peers, lag; --json: repld's status as it is. */
#ifndef REPLCTL_STATUS_H
#define REPLCTL_STATUS_H

#include "client.h"

#include <json-c/json.h>

/* One resource's status (repld's reply) for a human. */
void status_print(struct json_object *o);

int status_cmd(const struct client_opts *opt, int argc, char **argv);

#endif
