// SPDX-License-Identifier: GPL-2.0-only
/* replctl status: role, peers, lag, of each resource (status.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "client.h"
#include "status.h"

/* A peer's compression and rate limit, when it has either. */
static void print_wan(struct json_object *p)
{
	struct json_object *z;
	char a[32], b[32];

	if (json_object_object_get_ex(p, "compress", &z) && strcmp(client_str(z, "algorithm"), "none")) {
		client_human_bytes(client_u64(z, "in_bytes"), a, sizeof(a));
		client_human_bytes(client_u64(z, "out_bytes"), b, sizeof(b));
		printf("    compress:%s", client_str(z, "algorithm"));
		if (json_object_get_int(json_object_object_get(z, "level")))
			printf(" level:%d", json_object_get_int(json_object_object_get(z, "level")));
		printf("%s ratio:%.2f (%s to %s) raw-payloads:%" PRIu64 " cpu:%.2fs\n",
		       json_object_get_boolean(json_object_object_get(z, "active")) ? "" :
		       " (inactive)",
		       json_object_get_double(json_object_object_get(z, "ratio")), a, b,
		       client_u64(z, "raw_payloads"),
		       json_object_get_double(json_object_object_get(z, "seconds")));
	}
	if (client_u64(p, "rate_limit_bytes")) {
		client_human_bytes(client_u64(p, "rate_limit_bytes"), a, sizeof(a));
		printf("    rate-limit:%s/s (%.1f Mbit/s)\n", a,
		       (double)client_u64(p, "rate_limit_bytes") * 8 / 1e6);
	}
}

/* The target's line: the ring, records, what went wrong locally. */
static void print_target(struct json_object *o, struct json_object *t)
{
	uint64_t size = client_u64(t, "ring_bytes"), used = client_u64(t, "ring_used_bytes");
	char a[32], b[32];

	client_human_bytes(used, a, sizeof(a));
	client_human_bytes(size, b, sizeof(b));
	printf("  device:/dev/mapper/%s mode:%s state:%s ring:%" PRIu64 "%% (%s of %s)\n",
	       client_str(o, "device"), client_str(t, "mode"), client_str(t, "state"),
	       size ? used * 100 / size : 0, a, b);
	if (!strncmp(client_str(t, "metadata"), "none", 4))
		printf("    metadata:%s\n", client_str(t, "metadata"));
	if (*client_str(t, "peer_bitmaps_error"))
		printf("    peer bitmaps: cannot be written (%s): records held in the ring\n",
		       client_str(t, "peer_bitmaps_error"));
	printf("    records:%" PRIu64 "..%" PRIu64 " acked:%" PRIu64, client_u64(t, "tail"),
	       client_u64(t, "head"), client_u64(t, "acked"));
	if (client_u64(t, "dirty_regions"))
		printf(" out-of-sync-regions:%" PRIu64, client_u64(t, "dirty_regions"));
	if (client_u64(t, "overflows") || client_u64(t, "hold_timeouts"))
		printf(" overflows:%" PRIu64 " hold-timeouts:%" PRIu64,
		       client_u64(t, "overflows"), client_u64(t, "hold_timeouts"));
	/* the local writes that failed: the target's count, when repld could read it */
	if (json_object_object_get_ex(t, "io_errors", NULL))
		printf(" io-errors:%" PRIu64, client_u64(t, "io_errors"));
	printf("\n");
}

/* A running resync's or verify's progress, on the peer's disk line. */
static void print_resync(struct json_object *t)
{
	int64_t eta = json_object_get_int64(json_object_object_get(t, "eta_s"));
	char a[32], b[32], c[32];

	client_human_bytes(client_u64(t, "done_bytes"), a, sizeof(a));
	client_human_bytes(client_u64(t, "total_bytes"), b, sizeof(b));
	client_human_bytes(client_u64(t, "rate_bytes_per_s"), c, sizeof(c));
	printf(" %s:%.1f%% (%s of %s) %s/s", client_str(t, "kind"),
	       json_object_get_double(json_object_object_get(t, "percent")), a, b, c);
	if (eta >= 0)
		printf(" eta:%" PRId64 "s", eta);
	if (client_u64(t, "pace_bytes_per_s")) {
		client_human_bytes(client_u64(t, "pace_bytes_per_s"), c, sizeof(c));
		printf(" pace:%s/s", c);
	}
}

/* One peer of the primary. */
static void print_peer(struct json_object *p)
{
	struct json_object *t;
	char a[32];

	client_human_bytes(client_u64(p, "lag_bytes"), a, sizeof(a));
	printf("  %s connection:%s mode:%s replication:%s", client_str(p, "name"),
	       client_str(p, "connection"), client_str(p, "mode"), client_str(p, "replication"));
	/* the fence-peer handler's doing, when there is any */
	if (*client_str(p, "fence") && strcmp(client_str(p, "fence"), "none"))
		printf(" fence:%s", client_str(p, "fence"));
	printf("\n");
	printf("    lag:%" PRIu64 " records (%s) sent:%" PRIu64 " received:%" PRIu64
	       " written:%" PRIu64 " durable:%" PRIu64 "\n",
	       client_u64(p, "lag_records"), a, client_u64(p, "sent"), client_u64(p, "received"),
	       client_u64(p, "written"), client_u64(p, "durable"));
	printf("    disk:%s", client_str(p, "disk"));
	if (client_u64(p, "out_of_sync_regions"))
		printf(" out-of-sync-regions:%" PRIu64, client_u64(p, "out_of_sync_regions"));
	if (json_object_object_get_ex(p, "resync", &t))
		print_resync(t);
	printf("\n");
	if (*client_str(p, "full_sync_reason") && strcmp(client_str(p, "disk"), "UpToDate"))
		printf("    full sync needed: %s\n", client_str(p, "full_sync_reason"));
	if (*client_str(p, "transport"))
		printf("    transport:%s\n", client_str(p, "transport"));
	print_wan(p);
	if (*client_str(p, "last_error") && strcmp(client_str(p, "connection"), "Connected"))
		printf("    last error: %s\n", client_str(p, "last_error"));
}

/* A secondary: its device and the primary it receives from. */
static void print_primary(struct json_object *o, struct json_object *pr)
{
	char a[32];

	client_human_bytes(client_u64(o, "device_sectors") * 512, a, sizeof(a));
	printf("  device:%s (%s)", client_str(o, "device"), a);
	/* the writes to the device that failed */
	if (json_object_object_get_ex(o, "io_errors", NULL))
		printf(" io-errors:%" PRIu64, client_u64(o, "io_errors"));
	printf("\n");
	printf("  %s connection:%s mode:%s\n", client_str(pr, "name"),
	       client_str(pr, "connection"), client_str(pr, "mode"));
	printf("    stream:%016" PRIx64 " received:%" PRIu64 " written:%" PRIu64
	       " durable:%" PRIu64 "\n", client_u64(pr, "stream_id"), client_u64(pr, "received"),
	       client_u64(pr, "written"), client_u64(pr, "durable"));
	if (*client_str(pr, "transport"))
		printf("    transport:%s\n", client_str(pr, "transport"));
	print_wan(pr);
}

/* Modelled on drbdadm status. */
void status_print(struct json_object *o)
{
	struct json_object *t, *peers, *pr;
	size_t i;

	printf("%s role:%s%s\n", client_str(o, "resource"),
	       !strcmp(client_str(o, "role"), "primary") ? "Primary" : "Secondary",
	       json_object_get_boolean(json_object_object_get(o, "draining")) ? " (stopping)" : "");
	if (!strcmp(client_str(o, "transport"), "plain-insecure"))
		printf("  transport:plain-insecure (links neither authenticated nor encrypted)\n");
	if (json_object_object_get_ex(o, "target", &t))
		print_target(o, t);
	if (json_object_object_get_ex(o, "peers", &peers))
		for (i = 0; i < json_object_array_length(peers); i++)
			print_peer(json_object_array_get_idx(peers, i));
	if (json_object_object_get_ex(o, "primary", &pr))
		print_primary(o, pr);
}

int status_cmd(const struct client_opts *opt, int argc, char **argv)
{
	const char *sock = opt->sock;
	bool json = opt->json;
	struct json_object *req = json_object_new_object(), *all = json_object_new_array();
	char **res = argv;
	int nr = argc, i, r, rc = 0;
	bool allocated = false;

	json_object_object_add(req, "cmd", json_object_new_string("status"));
	if (!nr && !sock) {
		client_all_resources(&res, &nr);
		allocated = true;
		if (!nr) {
			fprintf(stderr, "replctl: no repld is running (no control socket in %s)\n",
				client_run_dir());
			rc = -ENOENT;
		}
	}
	for (i = 0; i < nr || (sock && i == 0 && !nr); i++) {
		struct json_object *reply = NULL;
		const char *name = nr ? res[i] : "(socket)";

		r = client_call(name, sock, req, &reply);
		if (r < 0) {
			rc = r;
			continue;
		}
		if (!json_object_get_boolean(json_object_object_get(reply, "ok"))) {
			fprintf(stderr, "replctl: %s: %s\n", name, client_str(reply, "error"));
			json_object_put(reply);
			rc = -EINVAL;
			continue;
		}
		if (json)
			json_object_array_add(all, reply);
		else {
			status_print(reply);
			json_object_put(reply);
		}
	}
	if (json)
		printf("%s\n", json_object_to_json_string_ext(
			       json_object_array_length(all) == 1 && (argc == 1 || sock) ?
			       json_object_array_get_idx(all, 0) : all, JSON_C_TO_STRING_PRETTY));
	json_object_put(all);
	json_object_put(req);
	if (allocated) {
		for (i = 0; i < nr; i++)
			free(res[i]);
		free(res);
	}
	return rc;
}
