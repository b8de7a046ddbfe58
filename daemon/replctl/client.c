// SPDX-License-Identifier: GPL-2.0-only
/* replctl's client of repld's control socket, and helpers every verb uses. */
#include <dirent.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>

#include "client.h"

const char *client_run_dir(void)
{
	const char *d = getenv("DMREPL_RUN_DIR");

	return d && *d ? d : RUN_DIR;
}

bool client_quiet;
bool client_force;

/* Connected to resource's control socket (or sock): the fd. */
static int client_connect(const char *resource, const char *sock)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char path[sizeof(sa.sun_path)];
	int fd, r;

	if (sock)
		r = snprintf(path, sizeof(path), "%s", sock);
	else
		r = snprintf(path, sizeof(path), "%s/%s.sock", client_run_dir(), resource);
	if (r < 0 || (size_t)r >= sizeof(path)) {
		fprintf(stderr, "replctl: socket path too long\n");
		return -ENAMETOOLONG;
	}
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		r = -errno;
		if (client_quiet)
			;
		else if (r == -ENOENT || r == -ECONNREFUSED)
			fprintf(stderr, "replctl: %s: repld is not running for this resource (%s: %s)\n"
				"         start it with: systemctl start repld@%s\n",
				resource, path, strerror(-r), resource);
		else
			fprintf(stderr, "replctl: %s: %s: %s\n", resource, path, strerror(-r));
		close(fd);
		return r;
	}
	return fd;
}

/* Everything repld writes until it closes, NUL-terminated, in *ret (malloc()ed). */
static int client_read_all(const char *resource, int fd, char **ret, size_t *ret_len)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	size_t len = 0, cap = 0;
	char *buf = NULL;
	ssize_t n;

	for (;;) {
		if (poll(&pfd, 1, 10000) <= 0) {
			if (!client_quiet)
				fprintf(stderr, "replctl: %s: repld did not answer\n", resource);
			free(buf);
			return -ETIMEDOUT;
		}
		if (len + 4096 > cap) {
			char *nb = realloc(buf, cap + 65536);

			if (!nb) {
				free(buf);
				return -ENOMEM;
			}
			buf = nb;
			cap += 65536;
		}
		n = read(fd, buf + len, cap - len - 1);
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	if (buf)
		buf[len] = '\0';
	*ret = buf;
	*ret_len = len;
	return 0;
}

int client_call(const char *resource, const char *sock, struct json_object *req,
		struct json_object **ret)
{
	char *buf = NULL;
	size_t len = 0;
	const char *s;
	int fd, r;

	fd = client_connect(resource, sock);
	if (fd < 0)
		return fd;
	s = json_object_to_json_string_ext(req, JSON_C_TO_STRING_PLAIN);
	if (send(fd, s, strlen(s), MSG_NOSIGNAL) < 0 || send(fd, "\n", 1, MSG_NOSIGNAL) < 0) {
		r = -errno;
		fprintf(stderr, "replctl: %s: repld closed the connection: %s (only root and the control-group of repl.conf(5) may use it)\n",
			resource, strerror(-r));
		close(fd);
		return r;
	}
	r = client_read_all(resource, fd, &buf, &len);
	close(fd);
	if (r < 0)
		return r;
	if (!buf || !len) {
		fprintf(stderr, "replctl: %s: repld closed the connection without an answer (only root and the control-group of repl.conf(5) may use it)\n",
			resource);
		free(buf);
		return -EPROTO;
	}
	*ret = json_tokener_parse(buf);
	free(buf);
	if (!*ret) {
		fprintf(stderr, "replctl: %s: unreadable answer from repld\n", resource);
		return -EPROTO;
	}
	return 0;
}

const char *client_str(struct json_object *o, const char *k)
{
	struct json_object *v;

	return json_object_object_get_ex(o, k, &v) ? json_object_get_string(v) : "";
}

uint64_t client_u64(struct json_object *o, const char *k)
{
	struct json_object *v;

	return json_object_object_get_ex(o, k, &v) ? json_object_get_uint64(v) : 0;
}

void client_human_bytes(uint64_t b, char *buf, size_t len)
{
	static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double v = (double)b;
	int u = 0;

	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", v, unit[u]);
}

int client_all_resources(char ***ret, int *nr)
{
	struct dirent *de;
	char **v = NULL;
	int n = 0;
	DIR *d = opendir(client_run_dir());

	if (!d) {
		*ret = NULL;
		*nr = 0;
		return 0;
	}
	while ((de = readdir(d))) {
		size_t l = strlen(de->d_name);
		char *name;

		if (l < 6 || strcmp(de->d_name + l - 5, ".sock"))
			continue;
		name = strndup(de->d_name, l - 5);
		if (!name)
			continue;
		if (client_names_add(&v, &n, name) < 0) {
			free(name);
			break;
		}
	}
	closedir(d);
	*ret = v;
	*nr = n;
	return 0;
}

int client_names_add(char ***v, int *n, char *name)
{
	char **nv = realloc(*v, sizeof(**v) * (size_t)(*n + 1));

	if (!nv)
		return -ENOMEM;
	nv[(*n)++] = name;
	*v = nv;
	return 0;
}

int client_do(const char *res, const char *sock, struct json_object *req, bool json,
		  struct json_object **ret)
{
	struct json_object *reply = NULL;
	int r;

	r = client_call(res, sock, req, &reply);
	json_object_put(req);
	if (r < 0)
		return r;
	if (!json_object_get_boolean(json_object_object_get(reply, "ok"))) {
		fprintf(stderr, "replctl: %s: %s\n", res, client_str(reply, "error"));
		json_object_put(reply);
		return -EINVAL;
	}
	if (json)
		printf("%s\n", json_object_to_json_string_ext(reply, JSON_C_TO_STRING_PRETTY));
	if (ret)
		*ret = reply;
	else
		json_object_put(reply);
	return 0;
}

int client_call_quiet(const char *resource, const char *sock, struct json_object *req,
			  struct json_object **ret)
{
	int r;

	client_quiet = true;
	r = client_call(resource, sock, req, ret);
	client_quiet = false;
	return r;
}

int client_parse_size(const char *s, uint64_t *ret)
{
	static const char units[] = "KMGT";
	const char *u;
	uint64_t v;
	char *end;

	errno = 0;
	if (s[0] < '0' || s[0] > '9')
		return -EINVAL;
	v = strtoull(s, &end, 10);
	if (errno)
		return -EINVAL;
	if (*end) {
		u = strchr(units, end[0]);
		if (!u || !end[0] || (end[1] && strcmp(end + 1, "iB")))
			return -EINVAL;
		for (long k = 0; k <= u - units; k++) {
			if (v > UINT64_MAX / 1024)
				return -EINVAL;
			v *= 1024;
		}
	}
	*ret = v;
	return 0;
}

struct json_object *client_status_peer(struct json_object *st, const char *peer)
{
	struct json_object *peers;
	size_t i;

	if (!json_object_object_get_ex(st, "peers", &peers))
		return NULL;
	for (i = 0; i < json_object_array_length(peers); i++) {
		struct json_object *p = json_object_array_get_idx(peers, i);

		if (!strcmp(client_str(p, "name"), peer))
			return p;
	}
	return NULL;
}

struct json_object *client_request(const char *cmd)
{
	struct json_object *req = json_object_new_object();

	json_object_object_add(req, "cmd", json_object_new_string(cmd));
	return req;
}
