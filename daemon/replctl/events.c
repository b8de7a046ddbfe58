// SPDX-License-Identifier: GPL-2.0-only
/* replctl events (events.h). */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "client.h"
#include "events.h"
#include "macro.h"

/*
 * replctl events: the events state of each resource's repld (events.h in
 * daemon/repld), one JSON line whenever it changes, printed as what
 * changed, modelled on drbdsetup events2:
 *
 *   exists resource name:r0 role:Primary node:alpha
 *   exists peer name:r0 peer-node:beta connection:Connected ...
 *   exists -
 *   change peer name:r0 peer-node:beta connection:Connected->Connecting
 *
 * A repld that goes away destroys its objects; it is connected to again
 * every 500 ms and its objects come back with create.
 */
struct ev_src {
	char *resource;
	char path[108];
	int fd;
	bool dumped;			/* its first state was printed */
	bool failed;			/* --now: could not connect */
	struct json_object *objs;	/* the last state's objects, or NULL */
	char buf[1 << 16];
	size_t len;
	uint64_t retry_ms;
};

static bool ev_json;

static uint64_t ev_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* The keys that name an object, printed first and never as changes. */
static bool ev_key(const char *k)
{
	return !strcmp(k, "object") || !strcmp(k, "name") || !strcmp(k, "peer-node");
}

static const char *ev_str(struct json_object *o, const char *k)
{
	struct json_object *v;

	return json_object_object_get_ex(o, k, &v) ? json_object_get_string(v) : NULL;
}

static bool ev_same_object(struct json_object *a, struct json_object *b)
{
	const char *keys[] = { "object", "name", "peer-node" };

	for (size_t i = 0; i < ARRAY_SIZE(keys); i++) {
		const char *x = ev_str(a, keys[i]), *y = ev_str(b, keys[i]);

		if ((x == NULL) != (y == NULL) || (x && strcmp(x, y)))
			return false;
	}
	return true;
}

/* Every field of a has the same value in b. */
static bool ev_equal(struct json_object *a, struct json_object *b)
{
	for (struct json_object_iterator it = json_object_iter_begin(a),
	     end = json_object_iter_end(a); !json_object_iter_equal(&it, &end);
	     json_object_iter_next(&it)) {
		const char *was = ev_str(b, json_object_iter_peek_name(&it));

		if (!was || strcmp(was, json_object_get_string(json_object_iter_peek_value(&it))))
			return false;
	}
	return true;
}

static struct json_object *ev_find(struct json_object *objs, struct json_object *o)
{
	for (size_t i = 0; objs && i < json_object_array_length(objs); i++)
		if (ev_same_object(json_object_array_get_idx(objs, i), o))
			return json_object_array_get_idx(objs, i);
	return NULL;
}

/* Print one event of object o; for a change, only the fields that differ from old. */
static void ev_print(const char *event, struct json_object *o, struct json_object *old)
{
	struct json_object *j = ev_json ? json_object_new_object() : NULL;

	if (j) {
		json_object_object_add(j, "event", json_object_new_string(event));
	} else {
		printf("%s %s", event, ev_str(o, "object"));
	}
	for (struct json_object_iterator it = json_object_iter_begin(o),
	     end = json_object_iter_end(o); !json_object_iter_equal(&it, &end);
	     json_object_iter_next(&it)) {
		const char *k = json_object_iter_peek_name(&it);
		const char *now = json_object_get_string(json_object_iter_peek_value(&it));
		const char *was = old ? ev_str(old, k) : NULL;

		if (!ev_key(k) && old && was && !strcmp(was, now))
			continue;
		if (j && !ev_key(k) && old) {
			struct json_object *c = json_object_new_object();

			json_object_object_add(c, "old", was ? json_object_new_string(was) : NULL);
			json_object_object_add(c, "new", json_object_new_string(now));
			json_object_object_add(j, k, c);
		} else if (j) {
			json_object_object_add(j, k, json_object_new_string(now));
		} else if (strcmp(k, "object")) {
			if (!ev_key(k) && old)
				printf(" %s:%s->%s", k, was ? was : "", now);
			else
				printf(" %s:%s", k, now);
		}
	}
	if (j) {
		printf("%s\n", json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN));
		json_object_put(j);
	} else {
		printf("\n");
	}
}

/* A new state of src: what was created, changed and destroyed since the last. */
static void ev_state(struct ev_src *src, struct json_object *st)
{
	struct json_object *objs, *o, *old;
	const char *first = src->dumped ? "create" : "exists";

	if (!json_object_object_get_ex(st, "objects", &objs) ||
	    !json_object_is_type(objs, json_type_array))
		return;
	for (size_t i = 0; i < json_object_array_length(objs); i++) {
		o = json_object_array_get_idx(objs, i);
		old = ev_find(src->objs, o);
		if (!old) {
			ev_print(first, o, NULL);
			continue;
		}
		if (!ev_equal(o, old))
			ev_print("change", o, old);
	}
	for (size_t i = 0; src->objs && i < json_object_array_length(src->objs); i++) {
		o = json_object_array_get_idx(src->objs, i);
		if (!ev_find(objs, o))
			ev_print("destroy", o, NULL);
	}
	json_object_put(src->objs);
	src->objs = json_object_get(objs);
	src->dumped = true;
	fflush(stdout);
}

/* repld went away: its objects go. */
static void ev_lost(struct ev_src *src)
{
	if (src->fd >= 0)
		close(src->fd);
	src->fd = -1;
	src->len = 0;
	for (size_t i = 0; src->objs && i < json_object_array_length(src->objs); i++)
		ev_print("destroy", json_object_array_get_idx(src->objs, i), NULL);
	fflush(stdout);
	json_object_put(src->objs);
	src->objs = NULL;
	src->retry_ms = ev_now_ms() + 500;
}

static int ev_connect(struct ev_src *src, const char *req)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd;

	strcpy(sa.sun_path, src->path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    send(fd, req, strlen(req), MSG_NOSIGNAL) < 0) {
		int r = -errno;

		close(fd);
		return r;
	}
	src->fd = fd;
	return 0;
}

/* Lines from src; false once it closed (or said an error). */
static bool ev_read(struct ev_src *src)
{
	ssize_t n = recv(src->fd, src->buf + src->len, sizeof(src->buf) - 1 - src->len, 0);
	char *nl;

	if (n <= 0)
		return false;
	src->len += (size_t)n;
	src->buf[src->len] = '\0';
	while ((nl = strchr(src->buf, '\n'))) {
		struct json_object *st, *okv;

		size_t used = (size_t)(nl + 1 - src->buf);

		*nl = '\0';
		st = json_tokener_parse(src->buf);
		memmove(src->buf, nl + 1, src->len - used + 1);
		src->len -= used;
		if (!st)
			continue;
		if (json_object_object_get_ex(st, "ok", &okv) && !json_object_get_boolean(okv)) {
			fprintf(stderr, "replctl: events %s: %s\n", src->resource, client_str(st, "error"));
			json_object_put(st);
			return false;
		}
		ev_state(src, st);
		json_object_put(st);
	}
	return src->len < sizeof(src->buf) - 1;
}

/* The resources named (or all with a socket here), malloc()ed; --now, --statistics. */
static int ev_args(int argc, char **argv, char ***ret, int *ret_n, bool *now, bool *statistics)
{
	char **names = NULL;
	int n = 0, i;

	for (i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "--now")) {
			*now = true;
		} else if (!strcmp(argv[i], "--statistics")) {
			*statistics = true;
		} else if (argv[i][0] == '-') {
			free(names);
			return -CLIENT_EUSAGE;
		} else if (client_names_add(&names, &n, strdup(argv[i])) < 0) {
			free(names);
			return -ENOMEM;
		}
	}
	if (!n)
		client_all_resources(&names, &n);
	if (!n) {
		fprintf(stderr, "replctl: events: no repld runs here (no socket in %s)\n", client_run_dir());
		free(names);
		return -ENOENT;
	}
	*ret = names;
	*ret_n = n;
	return 0;
}

/* A source per resource, connected (or to be connected again). */
static struct ev_src *ev_sources(char **names, int n, const char *sock, const char *req, bool now)
{
	struct ev_src *src = calloc((size_t)n, sizeof(*src));
	int i;

	if (!src)
		return NULL;
	for (i = 0; i < n; i++) {
		src[i].resource = names[i];
		src[i].fd = -1;
		if (sock)
			snprintf(src[i].path, sizeof(src[i].path), "%s", sock);
		else
			snprintf(src[i].path, sizeof(src[i].path), "%s/%s.sock", client_run_dir(), names[i]);
		if (ev_connect(&src[i], req) < 0) {
			fprintf(stderr, "replctl: events %s: repld is not running for this resource (%s)\n",
				names[i], src[i].path);
			src[i].failed = now;
			src[i].retry_ms = ev_now_ms() + 500;
		}
	}
	return src;
}

/* "exists -" once every source printed its state: true when that is the end (--now). */
static bool ev_dumped(struct ev_src *src, int n, bool now, bool *all_dumped)
{
	bool done = true;
	int i;

	if (*all_dumped)
		return false;
	for (i = 0; i < n; i++)
		done &= src[i].dumped || src[i].failed || (!now && src[i].fd < 0);
	if (!done)
		return false;
	printf(ev_json ? "{\"event\":\"exists\",\"object\":\"-\"}\n" : "exists -\n");
	fflush(stdout);
	*all_dumped = true;
	return now;
}

/* The sources' fds to poll, connecting again those due. */
static int ev_pollfds(struct ev_src *src, int n, const char *req, bool now, struct pollfd *pfd,
		      int max)
{
	int np = 0, i;

	for (i = 0; i < n && np < max; i++) {
		if (src[i].fd < 0) {
			if (!now && ev_now_ms() >= src[i].retry_ms && ev_connect(&src[i], req) < 0)
				src[i].retry_ms = ev_now_ms() + 500;
			if (src[i].fd < 0)
				continue;
		}
		pfd[np].fd = src[i].fd;
		pfd[np].events = POLLIN;
		pfd[np].revents = 0;
		np++;
	}
	return np;
}

/* Read what the sources polled have; those that went away are lost (or done, --now). */
static void ev_input(struct ev_src *src, int n, const struct pollfd *pfd, int np, bool now)
{
	int i;

	for (int k = 0; k < np; k++) {
		if (!pfd[k].revents)
			continue;
		for (i = 0; i < n && src[i].fd != pfd[k].fd; i++)
			;
		if (i < n && !ev_read(&src[i])) {
			if (now) {
				src[i].failed = true;
				close(src[i].fd);
				src[i].fd = -1;
			} else {
				ev_lost(&src[i]);
			}
		}
	}
}

int events_cmd(const struct client_opts *opt, int argc, char **argv)
{
	bool now = false, statistics = false, all_dumped = false;
	char **names = NULL, req[128];
	struct ev_src *src;
	int n = 0, i, r;

	ev_json = opt->json;
	r = ev_args(argc, argv, &names, &n, &now, &statistics);
	if (r < 0)
		return r;
	if (opt->sock && n != 1) {
		fprintf(stderr, "replctl: events: --socket names one resource's socket\n");
		return -EINVAL;
	}
	snprintf(req, sizeof(req), "{\"cmd\":\"events\",\"statistics\":%s}\n",
		 statistics ? "true" : "false");
	src = ev_sources(names, n, opt->sock, req, now);
	if (!src)
		return -ENOMEM;
	signal(SIGPIPE, SIG_DFL);
	for (;;) {
		struct pollfd pfd[64];
		int np;

		if (ev_dumped(src, n, now, &all_dumped))
			break;
		np = ev_pollfds(src, n, req, now, pfd, 64);
		if (now && !np)
			break;
		if (poll(pfd, (nfds_t)np, 500) < 0 && errno != EINTR) {
			r = -errno;
			break;
		}
		ev_input(src, n, pfd, np, now);
	}
	for (i = 0; i < n; i++) {
		if (src[i].fd >= 0)
			close(src[i].fd);
		json_object_put(src[i].objs);
		free(src[i].resource);
	}
	free(src);
	free(names);
	return r;
}
