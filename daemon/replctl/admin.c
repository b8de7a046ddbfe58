// SPDX-License-Identifier: GPL-2.0-only
/* replctl's verbs that ask repld to do something (admin.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>

#include "admin.h"
#include "client.h"
#include "config.h"

int admin_peer(const struct client_opts *opt, int argc, char **argv)
{
	const char *cmd = opt->verb, *sock = opt->sock;
	bool json = opt->json;
	struct json_object *req;
	bool set_mode = !strcmp(cmd, "set-mode");
	enum peer_mode mode;

	if (argc != (set_mode ? 3 : 2)) {
		return -CLIENT_EUSAGE;
	}
	if (set_mode && config_mode_parse(argv[2], &mode) < 0) {
		fprintf(stderr, "replctl: mode '%s': expected async, semi-sync or sync\n", argv[2]);
		return -EINVAL;
	}
	req = json_object_new_object();
	json_object_object_add(req, "cmd", json_object_new_string(cmd));
	json_object_object_add(req, "peer", json_object_new_string(argv[1]));
	if (set_mode)
		json_object_object_add(req, "mode", json_object_new_string(argv[2]));
	return client_do(argv[0], sock, req, json, NULL);
}

/* After primary / secondary: until repld runs in the new role (60 s). */
static int wait_role(const char *res, const char *sock, const char *role)
{
	int i;

	for (i = 0; i < 600; i++) {
		struct json_object *req = json_object_new_object(), *reply = NULL;
		int r;

		json_object_object_add(req, "cmd", json_object_new_string("status"));
		r = client_call_quiet(res, sock, req, &reply);
		json_object_put(req);
		if (r == 0) {
			bool done = !strcmp(client_str(reply, "role"), role);

			json_object_put(reply);
			if (done) {
				printf("%s: %s\n", res, role);
				return 0;
			}
		}
		usleep(100 * 1000);
	}
	fprintf(stderr, "replctl: %s: repld did not become %s in 60 s (see its log)\n", res, role);
	return -ETIMEDOUT;
}

/* A command on a resource without further arguments. */
static int admin_simple(const char *cmd, int argc, char **argv, bool json, const char *sock)
{
	struct json_object *req;

	if (argc != 1) {
		return -CLIENT_EUSAGE;
	}
	req = json_object_new_object();
	json_object_object_add(req, "cmd", json_object_new_string(cmd));
	if (client_force)
		json_object_object_add(req, "force", json_object_new_boolean(true));
	return client_do(argv[0], sock, req, json, NULL);
}

/*
 * Follow a resync or verify until it ends: a progress bar on a terminal,
 * a line every 5 s otherwise.  Fails when the peer disconnects or the
 * pass stops before its end.
 */
static int wait_resync(const char *res, const char *peer, const char *sock, bool verify,
		       uint64_t done_before)
{
	bool tty = isatty(STDERR_FILENO);
	uint64_t last_line = 0, t = 0;

	for (;; t += 500) {
		struct json_object *req = json_object_new_object(), *reply = NULL, *p, *r;
		int rc;

		json_object_object_add(req, "cmd", json_object_new_string("status"));
		rc = client_call(res, sock, req, &reply);
		json_object_put(req);
		if (rc < 0)
			return rc;
		p = client_status_peer(reply, peer);
		if (!p || strcmp(client_str(p, "connection"), "Connected")) {
			fprintf(stderr, "%sreplctl: %s: peer %s disconnected\n", tty ? "\n" : "",
				res, peer);
			json_object_put(reply);
			return -ENOTCONN;
		}
		if (!json_object_object_get_ex(p, "resync", &r)) {
			uint64_t n = client_u64(p, verify ? "verifies_done" : "resyncs_done");

			if (tty)
				fputs("\n", stderr);
			if (n <= done_before) {
				fprintf(stderr, "replctl: %s: peer %s: the %s stopped before its end (see repld's log)\n",
					res, peer, verify ? "verify" : "resync");
				json_object_put(reply);
				return -EIO;
			}
			if (verify)
				printf("%s: peer %s: verify done, %" PRIu64 " regions differ%s\n", res, peer,
				       client_u64(p, "last_verify_mismatches"),
				       client_u64(p, "last_verify_mismatches") ? " (a resync follows)" : "");
			else
				printf("%s: peer %s: resync done, disk:%s\n", res, peer,
				       client_str(p, "disk"));
			json_object_put(reply);
			return 0;
		}
		{
			double pct = json_object_get_double(json_object_object_get(r, "percent"));
			int64_t eta = json_object_get_int64(json_object_object_get(r, "eta_s"));
			char a[32], b[32], c[32], bar[41];
			int i, fill = (int)(pct * 40 / 100);

			client_human_bytes(client_u64(r, "done_bytes"), a, sizeof(a));
			client_human_bytes(client_u64(r, "total_bytes"), b, sizeof(b));
			client_human_bytes(client_u64(r, "rate_bytes_per_s"), c, sizeof(c));
			for (i = 0; i < 40; i++)
				bar[i] = i < fill ? '#' : '.';
			bar[40] = '\0';
			if (tty)
				fprintf(stderr, "\r%s %s [%s] %5.1f%% %s/%s %s/s eta %" PRId64 "s   ",
					peer, client_str(r, "kind"), bar, pct, a, b, c, eta < 0 ? 0 : eta);
			else if (t - last_line >= 5000 || !t) {
				fprintf(stderr, "%s %s %.1f%% %s of %s, %s/s, eta %" PRId64 " s\n", peer,
					client_str(r, "kind"), pct, a, b, c, eta < 0 ? 0 : eta);
				last_line = t;
			}
		}
		json_object_put(reply);
		usleep(500 * 1000);
	}
}

int admin_resync(const struct client_opts *opt, int argc, char **argv)
{
	const char *cmd = opt->verb, *sock = opt->sock;
	bool json = opt->json;
	struct json_object *req, *reply = NULL, *p;
	bool verify = !strcmp(cmd, "verify"), full = false, wait = false;
	const char *pos[2];
	int i, n = 0, r;
	uint64_t before;

	for (i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "--full") && !verify)
			full = true;
		else if (!strcmp(argv[i], "--wait"))
			wait = true;
		else if (argv[i][0] != '-' && n < 2)
			pos[n++] = argv[i];
		else
			n = 3;
	}
	if (n != 2) {
		return -CLIENT_EUSAGE;
	}
	req = json_object_new_object();
	json_object_object_add(req, "cmd", json_object_new_string(cmd));
	json_object_object_add(req, "peer", json_object_new_string(pos[1]));
	json_object_object_add(req, "full", json_object_new_boolean(full));
	r = client_do(pos[0], sock, req, json && !wait, &reply);
	if (r < 0)
		return r;
	p = client_status_peer(reply, pos[1]);
	before = p ? client_u64(p, verify ? "verifies_done" : "resyncs_done") : 0;
	json_object_put(reply);
	return wait ? wait_resync(pos[0], pos[1], sock, verify, before) : 0;
}

int admin_discard(const struct client_opts *opt, int argc, char **argv)
{
	return admin_simple(opt->verb, argc, argv, opt->json, opt->sock);
}

/* primary [--force], secondary: ask, then wait until repld runs so */
int admin_role(const struct client_opts *opt, int argc, char **argv)
{
	int r;

	client_force = false;
	if (argc == 2 && !strcmp(argv[1], "--force") && !strcmp(opt->verb, "primary")) {
		client_force = true;
		argc = 1;
	}
	r = admin_simple(opt->verb, argc, argv, false, opt->sock);
	if (r < 0)
		return r;
	return wait_role(argv[0], opt->sock, opt->verb);
}
