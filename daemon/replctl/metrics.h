/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * replctl metrics [<resource>...] [--listen ADDRESS:PORT]: the status in
 * the Prometheus text format, once or served over HTTP.
 */
#ifndef REPLCTL_METRICS_H
#define REPLCTL_METRICS_H

#include "client.h"

int metrics_cmd(const struct client_opts *opt, int argc, char **argv);

#endif
