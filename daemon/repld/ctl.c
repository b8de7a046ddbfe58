// SPDX-License-Identifier: GPL-2.0-only
/*
 * The control socket (/run/dm-repl/<resource>.sock, mode 0600): one JSON
 * request per connection, one JSON reply.
 *
 *   {"cmd":"status"}
 *   {"cmd":"set-mode","peer":"beta","mode":"sync"}
 *   {"cmd":"connect","peer":"beta"}      {"cmd":"disconnect","peer":"beta"}
 *   {"cmd":"resync","peer":"beta","full":false}   {"cmd":"verify","peer":"beta"}
 *
 * Replies: {"ok":true, ...} or {"ok":false,"error":"..."}.  A client that
 * does not send its request within a second is dropped; requests are
 * small, so the loop reads them whole.
 */
#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "log.h"
#include "manager-internal.h"

#define CTL_MAX_REQUEST 4096

static int mkdir_parent(const char *path)
{
	char dir[PATH_MAX];
	char *slash;

	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (!slash || slash == dir)
		return 0;
	*slash = '\0';
	if (mkdir(dir, 0755) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

int ctl_start(struct manager *m)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	const char *path = m->cfg->control_socket;
	int fd, r;

	if (strlen(path) >= sizeof(sa.sun_path))
		return log_error_errno(-ENAMETOOLONG, "control socket path %s", path);
	strcpy(sa.sun_path, path);
	r = mkdir_parent(path);
	if (r < 0)
		return log_error_errno(r, "directory of %s", path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return log_error_errno(-errno, "socket");
	/* a stale socket of a previous instance: is anybody answering? */
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
		close(fd);
		return log_error_errno(-EADDRINUSE, "%s: another repld serves %s",
				       m->cfg->resource, path);
	}
	unlink(path);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || chmod(path, 0600) < 0 ||
	    listen(fd, 16) < 0) {
		r = -errno;
		close(fd);
		return log_error_errno(r, "control socket %s", path);
	}
	m->ctl_fd = fd;
	return ep_add(m, fd, EPOLLIN, &m->ev_ctl);
}

void ctl_stop(struct manager *m)
{
	if (m->ctl_fd < 0)
		return;
	close(m->ctl_fd);
	m->ctl_fd = -1;
	unlink(m->cfg->control_socket);
}

struct json_object *manager_status_json(struct manager *m)
{
	struct json_object *o = json_object_new_object();

	json_object_object_add(o, "ok", json_object_new_boolean(true));
	json_object_object_add(o, "resource", json_object_new_string(m->cfg->resource));
	json_object_object_add(o, "node", json_object_new_string(m->cfg->node));
	json_object_object_add(o, "role", json_object_new_string(config_role_name(m->cfg->role)));
	json_object_object_add(o, "uptime_ms", json_object_new_uint64(now_ms() - m->started_ms));
	json_object_object_add(o, "draining", json_object_new_boolean(m->draining));
	{
		struct json_object *g = json_object_new_object();
		char b[20];

		snprintf(b, sizeof(b), "%016" PRIx64, m->gens.current);
		json_object_object_add(g, "current", json_object_new_string(b));
		snprintf(b, sizeof(b), "%016" PRIx64, m->gens.bitmap);
		json_object_object_add(g, "bitmap", json_object_new_string(b));
		snprintf(b, sizeof(b), "%016" PRIx64, m->gens.history);
		json_object_object_add(g, "history", json_object_new_string(b));
		json_object_object_add(g, "since", json_object_new_uint64(m->gens.since));
		json_object_object_add(o, "generation", g);
	}
	if (m->cfg->role == ROLE_PRIMARY)
		primary_status(m, o);
	else
		secondary_status(m, o);
	return o;
}

static struct json_object *ctl_error(const char *msg)
{
	struct json_object *o = json_object_new_object();

	json_object_object_add(o, "ok", json_object_new_boolean(false));
	json_object_object_add(o, "error", json_object_new_string(msg));
	return o;
}

static const char *ctl_str(struct json_object *req, const char *key)
{
	struct json_object *v;

	if (!json_object_object_get_ex(req, key, &v) || !json_object_is_type(v, json_type_string))
		return NULL;
	return json_object_get_string(v);
}

static struct json_object *ctl_handle(struct manager *m, struct json_object *req)
{
	const char *cmd = ctl_str(req, "cmd"), *peer = ctl_str(req, "peer");
	char err[256];
	int r;

	if (!cmd)
		return ctl_error("request without \"cmd\"");
	if (!strcmp(cmd, "status"))
		return manager_status_json(m);
	if (!strcmp(cmd, "primary") || !strcmp(cmd, "secondary")) {
		struct json_object *f;
		bool force = json_object_object_get_ex(req, "force", &f) &&
			     json_object_get_boolean(f);

		r = manager_request_role(m, !strcmp(cmd, "primary") ? ROLE_PRIMARY : ROLE_SECONDARY,
					 force, err, sizeof(err));
		if (r < 0)
			return ctl_error(err);
		return manager_status_json(m);
	}
	if (!strcmp(cmd, "discard-my-data")) {
		if (m->cfg->role != ROLE_SECONDARY)
			return ctl_error("discard-my-data is for a secondary: make this node secondary first");
		r = secondary_discard_my_data(m, err, sizeof(err));
		if (r < 0)
			return ctl_error(err);
		return manager_status_json(m);
	}
	if (!strcmp(cmd, "set-mode") || !strcmp(cmd, "connect") || !strcmp(cmd, "disconnect") ||
	    !strcmp(cmd, "resync") || !strcmp(cmd, "verify")) {
		if (m->cfg->role != ROLE_PRIMARY)
			return ctl_error("this node is a secondary: peers are managed on the primary");
		if (!peer)
			return ctl_error("missing \"peer\"");
		if (!strcmp(cmd, "set-mode")) {
			const char *mode = ctl_str(req, "mode");

			if (!mode)
				return ctl_error("missing \"mode\"");
			r = primary_set_mode(m, peer, mode, err, sizeof(err));
		} else if (!strcmp(cmd, "resync") || !strcmp(cmd, "verify")) {
			struct json_object *f;
			bool full = json_object_object_get_ex(req, "full", &f) &&
				    json_object_get_boolean(f);

			r = primary_resync(m, peer, !strcmp(cmd, "verify") ? RS_VERIFY :
					   full ? RS_FULL : RS_BITMAP, err, sizeof(err));
		} else {
			r = primary_connect(m, peer, !strcmp(cmd, "connect"), err, sizeof(err));
		}
		if (r < 0)
			return ctl_error(err);
		return manager_status_json(m);
	}
	snprintf(err, sizeof(err), "unknown command \"%s\"", cmd);
	return ctl_error(err);
}

void ctl_event(struct manager *m)
{
	char buf[CTL_MAX_REQUEST + 1];
	struct json_object *req, *reply;
	struct pollfd pfd;
	const char *out;
	size_t len = 0, olen;
	ssize_t n;
	int fd;

	fd = accept4(m->ctl_fd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0)
		return;
	pfd.fd = fd;
	pfd.events = POLLIN;
	/* small request, local client: read it with a short deadline */
	while (len < CTL_MAX_REQUEST && !memchr(buf, '\n', len)) {
		if (poll(&pfd, 1, 1000) <= 0)
			break;
		n = read(fd, buf + len, CTL_MAX_REQUEST - len);
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	buf[len] = '\0';
	req = json_tokener_parse(buf);
	if (!req || !json_object_is_type(req, json_type_object))
		reply = ctl_error("request is not a JSON object");
	else
		reply = ctl_handle(m, req);
	out = json_object_to_json_string_ext(reply, JSON_C_TO_STRING_PLAIN);
	olen = strlen(out);
	for (size_t off = 0; off < olen;) {
		n = write(fd, out + off, olen - off);
		if (n <= 0)
			break;
		off += (size_t)n;
	}
	n = write(fd, "\n", 1);
	(void)n;
	json_object_put(req);
	json_object_put(reply);
	close(fd);
}
