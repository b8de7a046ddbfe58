/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The events stream (replctl events, modelled on drbdsetup events2): what
 * a resource's status says of its objects, reduced to the fields an
 * administrator or a cluster manager follows, as flat string maps:
 *
 *   {"resource":"r0","objects":[
 *     {"object":"resource","name":"r0","role":"Primary"},
 *     {"object":"device","name":"r0","mode":"sync","state":"ok",...},
 *     {"object":"peer","name":"r0","peer-node":"beta","connection":"Connected",...,
 *      "fence":"none"}]}
 *
 * repld sends a subscriber one such line whenever it changes (ctl.c);
 * replctl turns successive lines into exists, create, change (old->new)
 * and destroy lines.  With statistics, progress counters too (resync done,
 * out of sync, lag), which change more often.
 */
#ifndef REPL_EVENTS_H
#define REPL_EVENTS_H

#include <stdbool.h>

#include <json-c/json.h>

/* The state of the objects of a status reply (manager_status()). */
struct json_object *events_state(struct json_object *status, bool statistics);

#endif
