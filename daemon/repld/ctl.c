// SPDX-License-Identifier: GPL-2.0-only
/*
 * The control socket: see ctl.h.  Every client is an event source of its
 * own; its request is read and its reply written as the socket allows, so
 * a client that sends one byte a second, or never reads its reply, costs
 * the loop nothing but a wake-up now and then, and is dropped at its
 * deadline.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "ctl-commands.h"
#include "ctl.h"
#include "log.h"
#include "loop.h"
#include "macro.h"

struct ctl_client {
	struct ev ev;
	struct ctl *ctl;
	struct ctl_client *next;
	uint64_t deadline_ms;
	bool replying;
	bool readonly;			/* a member of the control group, not root */
	bool subscriber;		/* events: stays, gets the state's changes */
	bool statistics;		/* a subscriber that wants the counters too */
	char *last;			/* the last state line it was sent */
	size_t len;			/* request bytes in buf */
	char *out;			/* the reply, while replying */
	size_t out_len, out_off;
	char buf[CTL_MAX_REQUEST + 1];
};

struct ctl {
	struct loop *loop;
	struct ev ev;			/* the listening socket */
	char path[108];
	struct ctl_dispatch d;
	struct ctl_client *clients;
	unsigned int nr_clients;
	bool has_group;
	gid_t group;			/* its members may run the read-only commands */
	ctl_events_fn events;
	void *events_ctx;
	unsigned int nr_subscribers;
	uint64_t events_ms;		/* the last update */
};

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

const char *ctl_arg_str(struct json_object *req, const char *key)
{
	struct json_object *v;

	if (!json_object_object_get_ex(req, key, &v) || !json_object_is_type(v, json_type_string))
		return NULL;
	return json_object_get_string(v);
}

bool ctl_arg_bool(struct json_object *req, const char *key)
{
	struct json_object *v;

	return json_object_object_get_ex(req, key, &v) && json_object_get_boolean(v);
}

static struct json_object *ctl_error(const char *msg)
{
	struct json_object *o = json_object_new_object();

	json_object_object_add(o, "ok", json_object_new_boolean(false));
	json_object_object_add(o, "error", json_object_new_string(msg));
	return o;
}

static const struct ctl_command *ctl_find(const struct ctl_dispatch *d, const char *name,
					   void **ret_ctx)
{
	for (unsigned int t = 0; t < ARRAY_SIZE(d->cmds); t++) {
		const struct ctl_command *k;

		for (k = d->cmds[t]; k && k->name; k++) {
			if (!strcmp(k->name, name)) {
				*ret_ctx = d->cmds_ctx[t];
				return k;
			}
		}
	}
	return NULL;
}

/* What members of the control group may run: ctl-commands.c says. */
static bool ctl_cmd_readonly(const char *name)
{
	const struct ctl_commands_info *k = ctl_commands_find(name);

	return k && k->readonly;
}

static struct json_object *ctl_handle(const struct ctl_dispatch *d, struct json_object *req,
				      bool readonly)
{
	const char *name = ctl_arg_str(req, "cmd");
	const struct ctl_command *k;
	char err[512];
	void *ctx;

	if (!name)
		return ctl_error("request without \"cmd\"");
	k = ctl_find(d, name, &ctx);
	if (!k) {
		snprintf(err, sizeof(err), "unknown command \"%s\"", name);
		return ctl_error(err);
	}
	if (k->refuse)
		return ctl_error(k->refuse);
	if (readonly && !ctl_cmd_readonly(name)) {
		snprintf(err, sizeof(err),
			 "permission denied: \"%s\" is for root; the control group may run status and events",
			 name);
		return ctl_error(err);
	}
	err[0] = '\0';
	if (k->fn && k->fn(ctx, req, err, sizeof(err)) < 0)
		return ctl_error(err[0] ? err : "failed");
	return d->status(d->status_ctx);
}

struct json_object *ctl_answer(const struct ctl_dispatch *d, const char *text, bool readonly)
{
	struct json_object *req, *reply;

	req = json_tokener_parse(text);
	if (!req || !json_object_is_type(req, json_type_object))
		reply = ctl_error("request is not a JSON object");
	else
		reply = ctl_handle(d, req, readonly);
	json_object_put(req);
	return reply;
}

static void client_free(struct ctl_client *k)
{
	struct ctl *c = k->ctl;
	struct ctl_client **pp;

	for (pp = &c->clients; *pp; pp = &(*pp)->next) {
		if (*pp == k) {
			*pp = k->next;
			break;
		}
	}
	c->nr_clients--;
	c->nr_subscribers -= k->subscriber;
	loop_del(c->loop, &k->ev);
	close(k->ev.fd);
	free(k->out);
	free(k->last);
	free(k);
}

/*
 * Send what the socket takes of the client's pending output: 1 all sent, 0
 * the rest waits for EPOLLOUT, -1 the client is gone.
 */
static int client_send(struct ctl_client *k)
{
	while (k->out_off < k->out_len) {
		ssize_t n = send(k->ev.fd, k->out + k->out_off, k->out_len - k->out_off,
				 MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return 0;
		if (n <= 0)
			return -1;
		k->out_off += (size_t)n;
	}
	return 1;
}

/*
 * A subscriber's pending lines: send what the socket takes, then wait for
 * EPOLLOUT or for the client's end.  -1 when it has gone (freed).
 */
static int subscriber_flush(struct ctl_client *k)
{
	if (client_send(k) < 0) {
		client_free(k);
		return -1;
	}
	if (loop_mod(k->ctl->loop, &k->ev,
		     EPOLLIN | (k->out_off < k->out_len ? EPOLLOUT : 0)) < 0) {
		client_free(k);
		return -1;
	}
	return 0;
}

/* Queue line (and a newline) for a subscriber; one too far behind goes. */
static int subscriber_send(struct ctl_client *k, const char *line)
{
	size_t n = strlen(line), left = k->out_len - k->out_off;
	char *out;

	if (left + n + 1 > CTL_MAX_PENDING) {
		log_notice("control socket: an events client left %zu bytes unread: dropped", left);
		client_free(k);
		return -1;
	}
	out = malloc(left + n + 1);
	if (!out) {
		client_free(k);
		return -1;
	}
	if (left)	/* k->out is NULL before the first line */
		memcpy(out, k->out + k->out_off, left);
	memcpy(out + left, line, n);
	out[left + n] = '\n';
	free(k->out);
	k->out = out;
	k->out_off = 0;
	k->out_len = left + n + 1;
	return subscriber_flush(k);
}

/* One subscriber's update: the state line if it changed. */
static int subscriber_update(struct ctl_client *k, char **lines)
{
	char *line = lines[k->statistics];

	if (!line)
		line = lines[k->statistics] = k->ctl->events(k->ctl->events_ctx, k->statistics);
	if (!line || (k->last && !strcmp(k->last, line)))
		return 0;
	free(k->last);
	k->last = strdup(line);
	return subscriber_send(k, line);
}

void ctl_events_update(struct ctl *c, bool force)
{
	struct ctl_client *k, *next;
	char *lines[2] = { NULL, NULL };
	uint64_t now;

	if (!c || !c->nr_subscribers || !c->events)
		return;
	now = loop_now_ms();
	if (!force && now - c->events_ms < 10)
		return;
	c->events_ms = now;
	for (k = c->clients; k; k = next) {
		next = k->next;
		if (k->subscriber)
			subscriber_update(k, lines);
	}
	free(lines[0]);
	free(lines[1]);
}

void ctl_set_events(struct ctl *c, ctl_events_fn fn, void *ctx)
{
	c->events = fn;
	c->events_ctx = ctx;
}

/*
 * The request is a subscribing command: the client stays, with no
 * deadline, and gets the state now.  False when it is not one (or not
 * allowed, or too many): then it is answered as any request.
 */
static bool client_subscribe(struct ctl_client *k)
{
	struct ctl *c = k->ctl;
	struct json_object *req = json_tokener_parse(k->buf);
	const struct ctl_command *cmd = NULL;
	const char *name;
	char *lines[2] = { NULL, NULL };
	void *ctx;

	if (req && json_object_is_type(req, json_type_object) &&
	    (name = ctl_arg_str(req, "cmd")))
		cmd = ctl_find(&c->d, name, &ctx);
	if (!cmd || !cmd->subscribe || cmd->refuse || !c->events ||
	    c->nr_subscribers >= CTL_MAX_SUBSCRIBERS) {
		json_object_put(req);
		return false;
	}
	k->statistics = ctl_arg_bool(req, "statistics");
	json_object_put(req);
	k->subscriber = true;
	k->replying = true;		/* never evicted as a slow sender */
	k->deadline_ms = UINT64_MAX;
	c->nr_subscribers++;
	if (subscriber_update(k, lines) == 0 && !k->last)
		client_free(k);		/* no state to give */
	free(lines[0]);
	free(lines[1]);
	return true;
}

/* Write what the socket takes; the client goes once the reply is out. */
static void client_write(struct ctl_client *k)
{
	if (client_send(k) == 0)
		return;		/* EPOLLOUT */
	client_free(k);
}

/* The request is complete: answer it. */
static void client_reply(struct ctl_client *k)
{
	struct json_object *reply;
	const char *s;
	size_t n;

	k->buf[k->len] = '\0';
	if (client_subscribe(k))
		return;
	reply = ctl_answer(&k->ctl->d, k->buf, k->readonly);
	s = json_object_to_json_string_ext(reply, JSON_C_TO_STRING_PLAIN);
	n = strlen(s);
	k->out = malloc(n + 1);
	if (k->out) {
		memcpy(k->out, s, n);
		k->out[n] = '\n';
		k->out_len = n + 1;
	}
	json_object_put(reply);
	if (!k->out) {
		client_free(k);
		return;
	}
	k->replying = true;
	k->deadline_ms = loop_now_ms() + CTL_REPLY_MS;
	if (loop_mod(k->ctl->loop, &k->ev, EPOLLOUT) < 0) {
		client_free(k);
		return;
	}
	client_write(k);
}

static void client_event(struct ev *ev, uint32_t events)
{
	struct ctl_client *k = container_of(ev, struct ctl_client, ev);
	ssize_t n;

	if (k->subscriber) {
		char drop[256];

		/* it has nothing more to say: anything but EAGAIN is its end */
		if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
			do {
				n = recv(ev->fd, drop, sizeof(drop), MSG_DONTWAIT);
			} while (n > 0 || (n < 0 && errno == EINTR));
			if (n == 0 || (n < 0 && errno != EAGAIN)) {
				client_free(k);
				return;
			}
		}
		if (events & EPOLLOUT)
			subscriber_flush(k);
		return;
	}
	if (k->replying) {
		client_write(k);
		return;
	}
	for (;;) {
		n = recv(ev->fd, k->buf + k->len, CTL_MAX_REQUEST - k->len, MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;		/* more later, within the deadline */
		if (n < 0) {
			client_free(k);
			return;
		}
		/* a line, the end of the stream, or the most we take */
		if (n == 0 || memchr(k->buf + k->len, '\n', (size_t)n) ||
		    k->len + (size_t)n == CTL_MAX_REQUEST) {
			k->len += (size_t)n;
			client_reply(k);
			return;
		}
		k->len += (size_t)n;
	}
}

/*
 * Room for one more client: the one that has been sending its request the
 * longest goes (a flood of idle connections cannot lock replctl out).
 * -EBUSY when every client is taking its reply.
 */
static int ctl_evict(struct ctl *c)
{
	struct ctl_client *k, *oldest = NULL;

	for (k = c->clients; k; k = k->next)
		if (!k->replying && (!oldest || k->deadline_ms < oldest->deadline_ms))
			oldest = k;
	if (!oldest)
		return -EBUSY;
	log_debug("control socket: %u clients: dropping the oldest one still sending",
		  c->nr_clients);
	client_free(oldest);
	return 0;
}

/*
 * Who is at the other end (SO_PEERCRED, SO_PEERGROUPS): 0 root or this
 * daemon's user, 1 a member of the control group, -EPERM anybody else.
 */
static int ctl_peer_access(const struct ctl *c, int fd)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);
	gid_t groups[256];

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
		return -errno;
	if (cred.uid == 0 || cred.uid == geteuid())
		return 0;
	if (!c->has_group)
		return -EPERM;
	if (cred.gid == c->group)
		return 1;
	len = sizeof(groups);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len) < 0)
		return -EPERM;
	for (size_t i = 0; i < len / sizeof(groups[0]); i++)
		if (groups[i] == c->group)
			return 1;
	return -EPERM;
}

static void ctl_accept(struct ev *ev, uint32_t events)
{
	struct ctl *c = container_of(ev, struct ctl, ev);
	struct ctl_client *k;
	int fd, access;

	while ((fd = accept4(ev->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
		access = ctl_peer_access(c, fd);
		if (access < 0) {
			log_debug("control socket: a client that is neither root nor in the control group: closed");
			close(fd);
			continue;
		}
		if (c->nr_clients >= CTL_MAX_CLIENTS && ctl_evict(c) < 0) {
			close(fd);
			continue;
		}
		k = calloc(1, sizeof(*k));
		if (!k) {
			close(fd);
			continue;
		}
		k->ctl = c;
		k->readonly = access == 1;
		k->ev = (struct ev) { .fd = fd, .fn = client_event };
		k->deadline_ms = loop_now_ms() + CTL_REQUEST_MS;
		if (loop_add(c->loop, &k->ev, EPOLLIN) < 0) {
			close(fd);
			free(k);
			continue;
		}
		k->next = c->clients;
		c->clients = k;
		c->nr_clients++;
	}
}

void ctl_tick(struct ctl *c, uint64_t now_ms)
{
	struct ctl_client *k, *next;

	for (k = c->clients; k; k = next) {
		next = k->next;
		if (now_ms >= k->deadline_ms) {
			log_debug("control socket: a client %s too slowly: dropped",
				  k->replying ? "took its reply" : "sent its request");
			client_free(k);
		}
	}
}

void ctl_set_commands(struct ctl *c, unsigned int slot, const struct ctl_command *cmds,
		      void *ctx)
{
	if (slot >= ARRAY_SIZE(c->d.cmds))
		return;
	c->d.cmds[slot] = cmds;
	c->d.cmds_ctx[slot] = ctx;
}

int ctl_new(struct loop *l, const char *path, ctl_status_fn status, void *status_ctx,
	    struct ctl **ret)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct ctl *c;
	int fd, r;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	r = mkdir_parent(path);
	if (r < 0)
		return r;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		r = -errno;
		free(c);
		return r;
	}
	/* a stale socket of a previous instance: is anybody answering? */
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
		close(fd);
		free(c);
		return -EADDRINUSE;
	}
	unlink(path);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || chmod(path, 0600) < 0 ||
	    listen(fd, 16) < 0) {
		r = -errno;
		close(fd);
		free(c);
		return r;
	}
	c->loop = l;
	snprintf(c->path, sizeof(c->path), "%s", path);
	c->d.status = status;
	c->d.status_ctx = status_ctx;
	c->ev = (struct ev) { .fd = fd, .fn = ctl_accept };
	r = loop_add(l, &c->ev, EPOLLIN);
	if (r < 0) {
		close(fd);
		unlink(path);
		free(c);
		return r;
	}
	*ret = c;
	return 0;
}

int ctl_set_group(struct ctl *c, gid_t group)
{
	if (chown(c->path, (uid_t)-1, group) < 0 || chmod(c->path, 0660) < 0)
		return -errno;
	c->has_group = true;
	c->group = group;
	return 0;
}

void ctl_free(struct ctl *c)
{
	if (!c)
		return;
	while (c->clients)
		client_free(c->clients);
	loop_del(c->loop, &c->ev);
	close(c->ev.fd);
	unlink(c->path);
	free(c);
}
