// SPDX-License-Identifier: GPL-2.0-only
/* replctl metrics (metrics.h). */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <json-c/json.h>
#include <microhttpd.h>

#include "client.h"
#include "config.h"
#include "macro.h"
#include "metrics.h"

/*
 * replctl metrics: the status of every resource (or those named) in the
 * Prometheus text format, once, or served over HTTP (--listen, by
 * libmicrohttpd) for a scraper: one exporter for all resources of a node.
 * Each scrape asks each repld for its status: the values are what
 * "replctl status --json" says at that moment.
 */
struct mfam {
	const char *name, *type, *help;
};

/* The metric families, in the order they are printed. */
static const struct mfam mfams[] = {
	{ "dmrepl_up", "gauge", "1 when the resource's repld answered" },
	{ "dmrepl_role_primary", "gauge", "1 on the primary, 0 on a secondary" },
	{ "dmrepl_device_size_bytes", "gauge", "Size of the replicated device" },
	{ "dmrepl_ring_size_bytes", "gauge", "Size of the ring's data area (primary)" },
	{ "dmrepl_ring_used_bytes", "gauge", "Bytes of the ring not yet released (primary)" },
	{ "dmrepl_target_sync", "gauge", "1 while the target holds writes for sync peers" },
	{ "dmrepl_target_degraded", "gauge", "1 while the target acts async after a hold timeout" },
	{ "dmrepl_target_overflow", "gauge", "1 while the ring overflowed into the bitmap" },
	{ "dmrepl_dirty_regions", "gauge", "Regions out of sync in the target's bitmap" },
	{ "dmrepl_hold_timeouts_total", "counter", "Sync writes released by the hold timeout" },
	{ "dmrepl_overflows_total", "counter", "Times the ring overflowed" },
	{ "dmrepl_peer_connected", "gauge", "1 while the peer's connection is up" },
	{ "dmrepl_peer_up_to_date", "gauge", "1 while the peer's copy is UpToDate" },
	{ "dmrepl_peer_mode", "gauge", "1 for the peer's replication mode (label mode)" },
	{ "dmrepl_peer_out_of_sync_regions", "gauge", "Regions the peer lacks (its bitmap)" },
	{ "dmrepl_peer_lag_records", "gauge", "Records not yet received by the peer" },
	{ "dmrepl_peer_lag_bytes", "gauge", "Bytes of records not yet received by the peer" },
	{ "dmrepl_peer_sent_bytes_total", "counter", "Bytes sent to the peer" },
	{ "dmrepl_peer_sent_records_total", "counter", "Records sent to the peer" },
	{ "dmrepl_peer_acks_total", "counter", "Acknowledgments received from the peer" },
	{ "dmrepl_peer_connects_total", "counter", "Connections to the peer made" },
	{ "dmrepl_peer_resyncs_total", "counter", "Resyncs of the peer completed" },
	{ "dmrepl_peer_pulled_ahead_total", "counter", "Times the async peer was pulled ahead" },
	{ "dmrepl_peer_fenced", "gauge", "1 while the fence-peer handler has fenced the peer" },
	{ "dmrepl_fence_failures_total", "counter", "Runs of the fence-peer handler for the peer that failed" },
	{ "dmrepl_peer_compress_in_bytes_total", "counter", "Payload bytes for the peer while compression is on, before it" },
	{ "dmrepl_peer_compress_out_bytes_total", "counter", "The same payloads as sent, compressed or raw" },
	{ "dmrepl_peer_compress_seconds_total", "counter", "Time spent compressing the peer's payloads" },
	{ "dmrepl_peer_rate_limit_bytes", "gauge", "The peer's rate-limit in bytes per second (0: none)" },
	{ "dmrepl_resync_remaining_bytes", "gauge", "Bytes the running resync has left (0: none)" },
	{ "dmrepl_secondary_primary_connected", "gauge", "1 while the secondary's primary is connected" },
	{ "dmrepl_secondary_consistent", "gauge", "1 while the secondary's copy is consistent" },
	{ "dmrepl_secondary_received_records", "gauge", "Last record the secondary received" },
	{ "dmrepl_secondary_zstd_bytes_total", "counter", "Payload bytes the secondary decompressed, after it" },
	{ "dmrepl_secondary_zstd_wire_bytes_total", "counter", "The same payloads as they came, compressed" },
	{ "dmrepl_secondary_zstd_seconds_total", "counter", "Time the secondary spent decompressing" },
};

struct mout {
	char *fam[ARRAY_SIZE(mfams)];	/* the samples of each family */
	size_t len[ARRAY_SIZE(mfams)];
};

/* One sample of family f, with labels (already escaped), its value already formatted. */
static void msample_text(struct mout *o, size_t f, const char *labels, const char *v)
{
	char line[512];
	int n = snprintf(line, sizeof(line), "%s{%s} %s\n", mfams[f].name, labels, v);
	char *b;

	if (n < 0 || (size_t)n >= sizeof(line))
		return;
	b = realloc(o->fam[f], o->len[f] + (size_t)n + 1);
	if (!b)
		return;
	memcpy(b + o->len[f], line, (size_t)n + 1);
	o->fam[f] = b;
	o->len[f] += (size_t)n;
}

/* ... and with a value. */
static void msample(struct mout *o, size_t f, const char *labels, uint64_t v)
{
	char t[24];

	snprintf(t, sizeof(t), "%" PRIu64, v);
	msample_text(o, f, labels, t);
}

static void msample_seconds(struct mout *o, size_t f, const char *labels, double v)
{
	char t[48];

	snprintf(t, sizeof(t), "%.6f", v);
	msample_text(o, f, labels, t);
}

static size_t mfind(const char *name)
{
	for (size_t i = 0; i < ARRAY_SIZE(mfams); i++)
		if (!strcmp(mfams[i].name, name))
			return i;
	return 0;
}

#define M(o, name, labels, v)	msample(o, mfind(name), labels, (uint64_t)(v))
#define MS(o, name, labels, v)	msample_seconds(o, mfind(name), labels, (v))

/* A label value: names are [A-Za-z0-9._-] (config_name_valid()) */
static const char *mlabel(const char *s)
{
	return config_name_valid(s) ? s : "invalid";
}

static void metrics_resource(struct mout *o, const char *res, const char *sock)
{
	struct json_object *req = json_object_new_object(), *st = NULL, *t, *peers, *pr;
	char lr[160], lp[320];
	int r;

	json_object_object_add(req, "cmd", json_object_new_string("status"));
	client_quiet = true;
	r = client_call(res, sock, req, &st);
	json_object_put(req);
	snprintf(lr, sizeof(lr), "resource=\"%s\"", mlabel(res));
	M(o, "dmrepl_up", lr, r == 0);
	if (r < 0)
		return;
	if (!strcmp(client_str(st, "role"), "primary") && json_object_object_get_ex(st, "target", &t)) {
		M(o, "dmrepl_role_primary", lr, 1);
		M(o, "dmrepl_device_size_bytes", lr, client_u64(t, "device_sectors") * 512);
		M(o, "dmrepl_ring_size_bytes", lr, client_u64(t, "ring_bytes"));
		M(o, "dmrepl_ring_used_bytes", lr, client_u64(t, "ring_used_bytes"));
		M(o, "dmrepl_target_sync", lr, !strcmp(client_str(t, "mode"), "sync"));
		M(o, "dmrepl_target_degraded", lr, !strcmp(client_str(t, "state"), "degraded"));
		M(o, "dmrepl_target_overflow", lr, !strcmp(client_str(t, "state"), "overflow"));
		M(o, "dmrepl_dirty_regions", lr, client_u64(t, "dirty_regions"));
		M(o, "dmrepl_hold_timeouts_total", lr, client_u64(t, "hold_timeouts"));
		M(o, "dmrepl_overflows_total", lr, client_u64(t, "overflows"));
		json_object_object_get_ex(st, "peers", &peers);
		for (size_t i = 0; peers && i < json_object_array_length(peers); i++) {
			struct json_object *p = json_object_array_get_idx(peers, i), *rs, *cz;
			char lm[400];

			snprintf(lp, sizeof(lp), "%s,peer=\"%s\"", lr, mlabel(client_str(p, "name")));
			M(o, "dmrepl_peer_connected", lp, !strcmp(client_str(p, "connection"), "Connected"));
			M(o, "dmrepl_peer_up_to_date", lp, !strcmp(client_str(p, "disk"), "UpToDate"));
			snprintf(lm, sizeof(lm), "%s,mode=\"%s\"", lp, mlabel(client_str(p, "mode")));
			M(o, "dmrepl_peer_mode", lm, 1);
			M(o, "dmrepl_peer_out_of_sync_regions", lp, client_u64(p, "out_of_sync_regions"));
			M(o, "dmrepl_peer_lag_records", lp, client_u64(p, "lag_records"));
			M(o, "dmrepl_peer_lag_bytes", lp, client_u64(p, "lag_bytes"));
			M(o, "dmrepl_peer_sent_bytes_total", lp, client_u64(p, "bytes_sent"));
			M(o, "dmrepl_peer_sent_records_total", lp, client_u64(p, "records_sent"));
			M(o, "dmrepl_peer_acks_total", lp, client_u64(p, "acks_received"));
			M(o, "dmrepl_peer_connects_total", lp, client_u64(p, "connects"));
			M(o, "dmrepl_peer_resyncs_total", lp, client_u64(p, "resyncs_done"));
			M(o, "dmrepl_peer_pulled_ahead_total", lp, client_u64(p, "pulled_ahead"));
			M(o, "dmrepl_peer_fenced", lp, !strcmp(client_str(p, "fence"), "fenced"));
			M(o, "dmrepl_fence_failures_total", lp, client_u64(p, "fence_failures"));
			if (json_object_object_get_ex(p, "compress", &cz) &&
			    strcmp(client_str(cz, "algorithm"), "none")) {
				M(o, "dmrepl_peer_compress_in_bytes_total", lp, client_u64(cz, "in_bytes"));
				M(o, "dmrepl_peer_compress_out_bytes_total", lp, client_u64(cz, "out_bytes"));
				MS(o, "dmrepl_peer_compress_seconds_total", lp,
				   json_object_get_double(json_object_object_get(cz, "seconds")));
			}
			M(o, "dmrepl_peer_rate_limit_bytes", lp, client_u64(p, "rate_limit_bytes"));
			M(o, "dmrepl_resync_remaining_bytes", lp,
			  json_object_object_get_ex(p, "resync", &rs) ?
			  client_u64(rs, "total_bytes") - client_u64(rs, "done_bytes") : 0);
		}
	} else {
		M(o, "dmrepl_role_primary", lr, 0);
		M(o, "dmrepl_device_size_bytes", lr, client_u64(st, "device_sectors") * 512);
		M(o, "dmrepl_secondary_consistent", lr, !strcmp(client_str(st, "disk"), "UpToDate"));
		if (json_object_object_get_ex(st, "primary", &pr)) {
			snprintf(lp, sizeof(lp), "%s,primary=\"%s\"", lr, mlabel(client_str(pr, "name")));
			M(o, "dmrepl_secondary_primary_connected", lp,
			  !strcmp(client_str(pr, "connection"), "Connected"));
			M(o, "dmrepl_secondary_received_records", lp, client_u64(pr, "received"));
			if (json_object_object_get_ex(pr, "compress", &t)) {
				M(o, "dmrepl_secondary_zstd_bytes_total", lp, client_u64(t, "in_bytes"));
				M(o, "dmrepl_secondary_zstd_wire_bytes_total", lp, client_u64(t, "out_bytes"));
				MS(o, "dmrepl_secondary_zstd_seconds_total", lp,
				   json_object_get_double(json_object_object_get(t, "seconds")));
			}
		}
	}
	json_object_put(st);
}

/* The exposition for the resources (all running ones when none). */
static char *metrics_text(char **names, int n, const char *sock)
{
	struct mout o = { 0 };
	char **all = NULL, *text = NULL;
	size_t len = 0;
	FILE *f;
	int nall = 0;

	if (!n) {
		client_all_resources(&all, &nall);
		names = all;
		n = nall;
	}
	for (int i = 0; i < n; i++)
		metrics_resource(&o, names[i], sock);
	f = open_memstream(&text, &len);
	for (size_t i = 0; f && i < ARRAY_SIZE(mfams); i++) {
		if (!o.fam[i])
			continue;
		fprintf(f, "# HELP %s %s\n# TYPE %s %s\n%s", mfams[i].name, mfams[i].help,
			mfams[i].name, mfams[i].type, o.fam[i]);
	}
	if (f)
		fclose(f);
	for (size_t i = 0; i < ARRAY_SIZE(mfams); i++)
		free(o.fam[i]);
	for (int i = 0; i < nall; i++)
		free(all[i]);
	free(all);
	return text;
}

struct mserve {
	char **names;
	int n;
	const char *sock;
};

static enum MHD_Result metrics_http(void *cls, struct MHD_Connection *c, const char *url,
				    const char *method, const char *version,
				    const char *upload, size_t *upload_len, void **state)
{
	const struct mserve *ms = cls;
	static const char nf[] = "not found: the metrics are at /metrics\n";
	struct MHD_Response *resp;
	enum MHD_Result ret;
	unsigned int code = MHD_HTTP_OK;
	char *text = NULL;

	if (strcmp(method, "GET") && strcmp(method, "HEAD"))
		return MHD_NO;
	if (strcmp(url, "/metrics")) {
		code = MHD_HTTP_NOT_FOUND;
		resp = MHD_create_response_from_buffer(sizeof(nf) - 1, (void *)nf,
						       MHD_RESPMEM_PERSISTENT);
	} else {
		text = metrics_text(ms->names, ms->n, ms->sock);
		resp = MHD_create_response_from_buffer(text ? strlen(text) : 0, text,
						       MHD_RESPMEM_MUST_FREE);
	}
	if (!resp) {
		free(text);
		return MHD_NO;
	}
	MHD_add_response_header(resp, "Content-Type", "text/plain; version=0.0.4; charset=utf-8");
	ret = MHD_queue_response(c, code, resp);
	MHD_destroy_response(resp);
	return ret;
}

static volatile sig_atomic_t metrics_stop;

static void metrics_signal(int sig)
{
	metrics_stop = 1;
}

int metrics_cmd(const struct client_opts *opt, int argc, char **argv)
{
	const char *sock = opt->sock;
	struct mserve ms = { .sock = sock };
	struct sockaddr_storage sa;
	const char *listen_at = NULL;
	struct config_addr ca;
	struct MHD_Daemon *d;
	char **names = NULL, *text;
	int n = 0, r;

	for (int i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "--listen") && i + 1 < argc) {
			listen_at = argv[++i];
		} else if (argv[i][0] == '-') {
			free(names);
			return -CLIENT_EUSAGE;
		} else if (client_names_add(&names, &n, argv[i]) < 0) {
			free(names);
			return -ENOMEM;
		}
	}
	if (sock && n != 1) {
		fprintf(stderr, "replctl: metrics: --socket names one resource's socket\n");
		free(names);
		return -EINVAL;
	}
	if (!listen_at) {
		text = metrics_text(names, n, sock);
		if (text)
			fputs(text, stdout);
		free(text);
		free(names);
		return text ? 0 : -ENOMEM;
	}
	r = config_addr_parse(listen_at, true, &ca);
	if (r < 0) {
		fprintf(stderr, "replctl: metrics: --listen %s: expected ADDRESS:PORT, e.g. 127.0.0.1:9942\n",
			listen_at);
		free(names);
		return r;
	}
	memcpy(&sa, &ca.sa, sizeof(sa));
	ms.names = names;
	ms.n = n;
	d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG |
			     (sa.ss_family == AF_INET6 ? MHD_USE_IPv6 : 0),
			     0, NULL, NULL, metrics_http, &ms,
			     MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
			     MHD_OPTION_CONNECTION_LIMIT, 16U,
			     MHD_OPTION_CONNECTION_TIMEOUT, 10U,
			     MHD_OPTION_END);
	if (!d) {
		fprintf(stderr, "replctl: metrics: cannot listen on %s\n", listen_at);
		free(names);
		return -EADDRINUSE;
	}
	fprintf(stderr, "replctl: metrics of %s on http://%s/metrics\n",
		n ? "the resources named" : "every resource running here", listen_at);
	signal(SIGTERM, metrics_signal);
	signal(SIGINT, metrics_signal);
	while (!metrics_stop)
		pause();
	MHD_stop_daemon(d);
	free(names);
	return 0;
}
