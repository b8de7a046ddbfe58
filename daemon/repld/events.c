// SPDX-License-Identifier: GPL-2.0-only
/* The events stream's state of a resource: see events.h. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "events.h"

static struct json_object *get(struct json_object *o, const char *key)
{
	struct json_object *v;

	return o && json_object_object_get_ex(o, key, &v) ? v : NULL;
}

/* Field key of the object: the status's value at from, as a string. */
static void put(struct json_object *obj, const char *key, struct json_object *from)
{
	char buf[32];
	const char *s;

	if (!from)
		return;
	switch (json_object_get_type(from)) {
	case json_type_string:
		s = json_object_get_string(from);
		break;
	case json_type_int:
		snprintf(buf, sizeof(buf), "%" PRIu64, json_object_get_uint64(from));
		s = buf;
		break;
	case json_type_double:
		snprintf(buf, sizeof(buf), "%d", (int)json_object_get_double(from));
		s = buf;
		break;
	case json_type_boolean:
		s = json_object_get_boolean(from) ? "yes" : "no";
		break;
	default:
		return;
	}
	json_object_object_add(obj, key, json_object_new_string(s));
}

static struct json_object *object(const char *kind, struct json_object *name)
{
	struct json_object *o = json_object_new_object();

	json_object_object_add(o, "object", json_object_new_string(kind));
	put(o, "name", name);
	return o;
}

/* A primary's peer: its link, its copy, and with statistics its progress. */
static struct json_object *primary_peer(struct json_object *name, struct json_object *p,
					bool statistics)
{
	struct json_object *o = object("peer", name), *rs = get(p, "resync");
	const char *repl = json_object_get_string(get(p, "replication"));

	put(o, "peer-node", get(p, "name"));
	put(o, "connection", get(p, "connection"));
	/* a few records in flight are not a state: the lag is a statistic */
	if (repl && !strcmp(repl, "Catching-up"))
		json_object_object_add(o, "replication", json_object_new_string("Established"));
	else
		put(o, "replication", get(p, "replication"));
	put(o, "peer-disk", get(p, "disk"));
	put(o, "mode", get(p, "mode"));
	if (rs)
		put(o, "resync", get(rs, "kind"));
	else
		json_object_object_add(o, "resync", json_object_new_string("none"));
	put(o, "fence", get(p, "fence"));
	if (statistics) {
		put(o, "out-of-sync", get(p, "out_of_sync_regions"));
		put(o, "lag-records", get(p, "lag_records"));
		if (rs)
			put(o, "done", get(rs, "percent"));
	}
	return o;
}

struct json_object *events_state(struct json_object *status, bool statistics)
{
	struct json_object *st = json_object_new_object(), *objs = json_object_new_array();
	struct json_object *name = get(status, "resource"), *o, *t, *peers;
	const char *role = json_object_get_string(get(status, "role"));
	bool primary = role && !strcmp(role, "primary");

	put(st, "resource", name);
	o = object("resource", name);
	json_object_object_add(o, "role", json_object_new_string(
		primary ? "Primary" : role && !strcmp(role, "secondary") ? "Secondary" : "Unknown"));
	put(o, "node", get(status, "node"));
	json_object_array_add(objs, o);

	o = object("device", name);
	if (primary) {
		t = get(status, "target");
		put(o, "minor-name", get(status, "device"));
		put(o, "mode", get(t, "mode"));
		put(o, "state", get(t, "state"));
		put(o, "size", get(t, "device_sectors"));
		if (statistics) {
			put(o, "dirty-regions", get(t, "dirty_regions"));
			put(o, "hold-timeouts", get(t, "hold_timeouts"));
		}
	} else {
		put(o, "disk", get(status, "disk"));
		put(o, "size", get(status, "device_sectors"));
	}
	json_object_array_add(objs, o);

	if (primary) {
		peers = get(status, "peers");
		for (size_t i = 0; peers && i < json_object_array_length(peers); i++)
			json_object_array_add(objs, primary_peer(name, json_object_array_get_idx(peers, i),
								 statistics));
	} else if ((t = get(status, "primary"))) {
		o = object("peer", name);
		put(o, "peer-node", get(t, "name"));
		put(o, "connection", get(t, "connection"));
		put(o, "mode", get(t, "mode"));
		json_object_array_add(objs, o);
	}
	json_object_object_add(st, "objects", objs);
	return st;
}
