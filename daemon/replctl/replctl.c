// SPDX-License-Identifier: GPL-2.0-only
/*
 * replctl: administer dm-repl resources through repld's control socket.
 *
 *   replctl status [<resource>...] [--json]
 *   replctl set-mode <resource> <peer> async|semi-sync|sync
 *   replctl connect|disconnect <resource> <peer>
 */
#include <dirent.h>
#include <fcntl.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>
#include <microhttpd.h>

#include "bitmap.h"
#include "config.h"
#include "dmdev.h"
#include "macro.h"
#include "metadata.h"

#define RUN_DIR "/run/dm-repl"

static const char *run_dir(void)
{
	const char *d = getenv("DMREPL_RUN_DIR");

	return d && *d ? d : RUN_DIR;
}

static void usage(FILE *f)
{
	fputs("Usage: replctl [--json] [--socket PATH] <command> ...\n"
	      "  status [<resource>...]                 role, peers, lag (all resources by default)\n"
	      "  events [<resource>...] [--now] [--statistics]\n"
	      "                                         state changes as they happen (events2)\n"
	      "  metrics [<resource>...] [--listen ADDRESS:PORT]\n"
	      "                                         Prometheus metrics, or an exporter\n"
	      "  set-mode <resource> <peer> <mode>      async, semi-sync or sync, live\n"
	      "  connect <resource> <peer>              (re)connect a peer\n"
	      "  disconnect <resource> <peer>           stop replicating to a peer\n"
	      "  resync <resource> <peer> [--full] [--wait]  bitmap (or full) resync now\n"
	      "  verify <resource> <peer> [--wait]      compare by hashes, mark differences\n"
	      "  primary <resource> [--force]           promote: bring up the repl device here\n"
	      "  secondary <resource>                   demote: remove it, receive from a peer\n"
	      "  resize <resource> [--size SIZE] [--config FILE]\n"
	      "                                         grow the repl device to its device's size\n"
	      "  discard-my-data <resource>             (secondary) give up this copy's changes\n"
	      "                                         after a split brain\n"
	      "  create-md <resource> [--force]         write metadata to the resource's meta-device\n"
	      "  create-md --meta DEV --data DEV --resource NAME [--region-kb N] [--max-peers N]\n"
	      "            [--max-size SIZE] [--force]   (also with a resource)\n"
	      "  upgrade-md <resource> | --meta DEV [--max-peers N]   metadata format 1 to 2, in place\n"
	      "  dump-md <resource> | --meta DEV        show a metadata device\n"
	      "  udev-below DEVNAME                     (udev) DM_REPL_BELOW=<resource> when\n"
	      "                                         DEVNAME is a resource's device here\n"
	      "Options:\n"
	      "  -j, --json          machine-readable output\n"
	      "  -s, --socket PATH   control socket (default " RUN_DIR "/<resource>.sock)\n"
	      "See replctl(8).\n", f);
}

/* Send one request, read one JSON reply.  Clear errors when repld is absent. */
static bool ctl_quiet;	/* no message when repld is not (yet) there */
static bool ctl_force;	/* primary --force */

static int ctl_call(const char *resource, const char *sock, struct json_object *req,
		    struct json_object **ret)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char path[sizeof(sa.sun_path)], *buf = NULL;
	size_t len = 0, cap = 0;
	const char *s;
	struct pollfd pfd;
	ssize_t n;
	int fd, r;

	if (sock)
		r = snprintf(path, sizeof(path), "%s", sock);
	else
		r = snprintf(path, sizeof(path), "%s/%s.sock", run_dir(), resource);
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
		if (ctl_quiet)
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
	s = json_object_to_json_string_ext(req, JSON_C_TO_STRING_PLAIN);
	if (send(fd, s, strlen(s), MSG_NOSIGNAL) < 0 || send(fd, "\n", 1, MSG_NOSIGNAL) < 0) {
		r = -errno;
		fprintf(stderr, "replctl: %s: repld closed the connection: %s (only root and the control-group of repl.conf(5) may use it)\n",
			resource, strerror(-r));
		close(fd);
		return r;
	}
	pfd.fd = fd;
	pfd.events = POLLIN;
	for (;;) {
		if (poll(&pfd, 1, 10000) <= 0) {
			if (!ctl_quiet)
				fprintf(stderr, "replctl: %s: repld did not answer\n", resource);
			close(fd);
			free(buf);
			return -ETIMEDOUT;
		}
		if (len + 4096 > cap) {
			char *nb = realloc(buf, cap + 65536);

			if (!nb) {
				close(fd);
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
	close(fd);
	if (!buf || !len) {
		fprintf(stderr, "replctl: %s: repld closed the connection without an answer (only root and the control-group of repl.conf(5) may use it)\n",
			resource);
		free(buf);
		return -EPROTO;
	}
	buf[len] = '\0';
	*ret = json_tokener_parse(buf);
	free(buf);
	if (!*ret) {
		fprintf(stderr, "replctl: %s: unreadable answer from repld\n", resource);
		return -EPROTO;
	}
	return 0;
}

static const char *jstr(struct json_object *o, const char *k)
{
	struct json_object *v;

	return json_object_object_get_ex(o, k, &v) ? json_object_get_string(v) : "";
}

static uint64_t ju64(struct json_object *o, const char *k)
{
	struct json_object *v;

	return json_object_object_get_ex(o, k, &v) ? json_object_get_uint64(v) : 0;
}

static void human_bytes(uint64_t b, char *buf, size_t len)
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

/* Modelled on drbdadm status. */
/* A peer's compression and rate limit, when it has either. */
static void print_wan(struct json_object *p)
{
	struct json_object *z;
	char a[32], b[32];

	if (json_object_object_get_ex(p, "compress", &z) && strcmp(jstr(z, "algorithm"), "none")) {
		human_bytes(ju64(z, "in_bytes"), a, sizeof(a));
		human_bytes(ju64(z, "out_bytes"), b, sizeof(b));
		printf("    compress:%s", jstr(z, "algorithm"));
		if (json_object_get_int(json_object_object_get(z, "level")))
			printf(" level:%d", json_object_get_int(json_object_object_get(z, "level")));
		printf("%s ratio:%.2f (%s to %s) raw-payloads:%" PRIu64 " cpu:%.2fs\n",
		       json_object_get_boolean(json_object_object_get(z, "active")) ? "" :
		       " (inactive)",
		       json_object_get_double(json_object_object_get(z, "ratio")), a, b,
		       ju64(z, "raw_payloads"),
		       json_object_get_double(json_object_object_get(z, "seconds")));
	}
	if (ju64(p, "rate_limit_bytes")) {
		human_bytes(ju64(p, "rate_limit_bytes"), a, sizeof(a));
		printf("    rate-limit:%s/s (%.1f Mbit/s)\n", a,
		       (double)ju64(p, "rate_limit_bytes") * 8 / 1e6);
	}
}

static void print_status(struct json_object *o)
{
	struct json_object *t, *peers, *pr;
	char a[32], b[32];
	size_t i;

	printf("%s role:%s%s\n", jstr(o, "resource"),
	       !strcmp(jstr(o, "role"), "primary") ? "Primary" : "Secondary",
	       json_object_get_boolean(json_object_object_get(o, "draining")) ? " (stopping)" : "");
	if (!strcmp(jstr(o, "transport"), "plain-insecure"))
		printf("  transport:plain-insecure (links neither authenticated nor encrypted)\n");
	if (json_object_object_get_ex(o, "target", &t)) {
		uint64_t size = ju64(t, "ring_bytes"), used = ju64(t, "ring_used_bytes");

		human_bytes(used, a, sizeof(a));
		human_bytes(size, b, sizeof(b));
		printf("  device:/dev/mapper/%s mode:%s state:%s ring:%" PRIu64 "%% (%s of %s)\n",
		       jstr(o, "device"), jstr(t, "mode"), jstr(t, "state"),
		       size ? used * 100 / size : 0, a, b);
		if (!strncmp(jstr(t, "metadata"), "none", 4))
			printf("    metadata:%s\n", jstr(t, "metadata"));
		if (*jstr(t, "peer_bitmaps_error"))
			printf("    peer bitmaps: cannot be written (%s): records held in the ring\n",
			       jstr(t, "peer_bitmaps_error"));
		printf("    records:%" PRIu64 "..%" PRIu64 " acked:%" PRIu64, ju64(t, "tail"),
		       ju64(t, "head"), ju64(t, "acked"));
		if (ju64(t, "dirty_regions"))
			printf(" out-of-sync-regions:%" PRIu64, ju64(t, "dirty_regions"));
		if (ju64(t, "overflows") || ju64(t, "hold_timeouts"))
			printf(" overflows:%" PRIu64 " hold-timeouts:%" PRIu64,
			       ju64(t, "overflows"), ju64(t, "hold_timeouts"));
		printf("\n");
	}
	if (json_object_object_get_ex(o, "peers", &peers)) {
		for (i = 0; i < json_object_array_length(peers); i++) {
			struct json_object *p = json_object_array_get_idx(peers, i);

			human_bytes(ju64(p, "lag_bytes"), a, sizeof(a));
			printf("  %s connection:%s mode:%s replication:%s", jstr(p, "name"),
			       jstr(p, "connection"), jstr(p, "mode"), jstr(p, "replication"));
			/* the fence-peer handler's doing, when there is any */
			if (*jstr(p, "fence") && strcmp(jstr(p, "fence"), "none"))
				printf(" fence:%s", jstr(p, "fence"));
			printf("\n");
			printf("    lag:%" PRIu64 " records (%s) sent:%" PRIu64 " received:%" PRIu64
			       " written:%" PRIu64 " durable:%" PRIu64 "\n",
			       ju64(p, "lag_records"), a, ju64(p, "sent"), ju64(p, "received"),
			       ju64(p, "written"), ju64(p, "durable"));
			printf("    disk:%s", jstr(p, "disk"));
			if (ju64(p, "out_of_sync_regions"))
				printf(" out-of-sync-regions:%" PRIu64, ju64(p, "out_of_sync_regions"));
			if (json_object_object_get_ex(p, "resync", &t)) {
				char c[32];
				int64_t eta = json_object_get_int64(json_object_object_get(t, "eta_s"));

				human_bytes(ju64(t, "done_bytes"), a, sizeof(a));
				human_bytes(ju64(t, "total_bytes"), b, sizeof(b));
				human_bytes(ju64(t, "rate_bytes_per_s"), c, sizeof(c));
				printf(" %s:%.1f%% (%s of %s) %s/s", jstr(t, "kind"),
				       json_object_get_double(json_object_object_get(t, "percent")),
				       a, b, c);
				if (eta >= 0)
					printf(" eta:%" PRId64 "s", eta);
				if (ju64(t, "pace_bytes_per_s")) {
					human_bytes(ju64(t, "pace_bytes_per_s"), c, sizeof(c));
					printf(" pace:%s/s", c);
				}
			}
			printf("\n");
			if (*jstr(p, "full_sync_reason") && strcmp(jstr(p, "disk"), "UpToDate"))
				printf("    full sync needed: %s\n", jstr(p, "full_sync_reason"));
			if (*jstr(p, "transport"))
				printf("    transport:%s\n", jstr(p, "transport"));
			print_wan(p);
			if (*jstr(p, "last_error") && strcmp(jstr(p, "connection"), "Connected"))
				printf("    last error: %s\n", jstr(p, "last_error"));
		}
	}
	if (json_object_object_get_ex(o, "primary", &pr)) {
		human_bytes(ju64(o, "device_sectors") * 512, a, sizeof(a));
		printf("  device:%s (%s)\n", jstr(o, "device"), a);
		printf("  %s connection:%s mode:%s\n", jstr(pr, "name"), jstr(pr, "connection"),
		       jstr(pr, "mode"));
		printf("    stream:%016" PRIx64 " received:%" PRIu64 " written:%" PRIu64
		       " durable:%" PRIu64 "\n", ju64(pr, "stream_id"), ju64(pr, "received"),
		       ju64(pr, "written"), ju64(pr, "durable"));
		if (*jstr(pr, "transport"))
			printf("    transport:%s\n", jstr(pr, "transport"));
		print_wan(pr);
	}
}

static int all_resources(char ***ret, int *nr)
{
	struct dirent *de;
	char **v = NULL;
	int n = 0;
	DIR *d = opendir(run_dir());

	if (!d) {
		*ret = NULL;
		*nr = 0;
		return 0;
	}
	while ((de = readdir(d))) {
		size_t l = strlen(de->d_name);
		char **nv;

		if (l < 6 || strcmp(de->d_name + l - 5, ".sock"))
			continue;
		nv = realloc(v, sizeof(*v) * (size_t)(n + 1));
		if (!nv)
			break;
		v = nv;
		v[n] = strndup(de->d_name, l - 5);
		if (v[n])
			n++;
	}
	closedir(d);
	*ret = v;
	*nr = n;
	return 0;
}

static int cmd_status(int argc, char **argv, bool json, const char *sock)
{
	struct json_object *req = json_object_new_object(), *all = json_object_new_array();
	char **res = argv;
	int nr = argc, i, r, rc = 0;
	bool allocated = false;

	json_object_object_add(req, "cmd", json_object_new_string("status"));
	if (!nr && !sock) {
		all_resources(&res, &nr);
		allocated = true;
		if (!nr) {
			fprintf(stderr, "replctl: no repld is running (no control socket in %s)\n",
				run_dir());
			rc = -ENOENT;
		}
	}
	for (i = 0; i < nr || (sock && i == 0 && !nr); i++) {
		struct json_object *reply = NULL;
		const char *name = nr ? res[i] : "(socket)";

		r = ctl_call(name, sock, req, &reply);
		if (r < 0) {
			rc = r;
			continue;
		}
		if (!json_object_get_boolean(json_object_object_get(reply, "ok"))) {
			fprintf(stderr, "replctl: %s: %s\n", name, jstr(reply, "error"));
			json_object_put(reply);
			rc = -EINVAL;
			continue;
		}
		if (json)
			json_object_array_add(all, reply);
		else {
			print_status(reply);
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

/*
 * Send req (taken), check the reply says ok, print it with --json; the
 * reply goes to *ret when ret is not NULL.
 */
static int ctl_do(const char *res, const char *sock, struct json_object *req, bool json,
		  struct json_object **ret)
{
	struct json_object *reply = NULL;
	int r;

	r = ctl_call(res, sock, req, &reply);
	json_object_put(req);
	if (r < 0)
		return r;
	if (!json_object_get_boolean(json_object_object_get(reply, "ok"))) {
		fprintf(stderr, "replctl: %s: %s\n", res, jstr(reply, "error"));
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

static int cmd_peer(const char *cmd, int argc, char **argv, bool json, const char *sock)
{
	struct json_object *req;
	bool set_mode = !strcmp(cmd, "set-mode");
	enum peer_mode mode;

	if (argc != (set_mode ? 3 : 2)) {
		fprintf(stderr, "replctl: usage: replctl %s <resource> <peer>%s\n", cmd,
			set_mode ? " async|semi-sync|sync" : "");
		return -EINVAL;
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
	return ctl_do(argv[0], sock, req, json, NULL);
}

static int ctl_call_quiet(const char *resource, const char *sock, struct json_object *req,
			  struct json_object **ret)
{
	int r;

	ctl_quiet = true;
	r = ctl_call(resource, sock, req, ret);
	ctl_quiet = false;
	return r;
}

/* After primary / secondary: until repld runs in the new role (60 s). */
static int wait_role(const char *res, const char *sock, const char *role)
{
	int i;

	for (i = 0; i < 600; i++) {
		struct json_object *req = json_object_new_object(), *reply = NULL;
		int r;

		json_object_object_add(req, "cmd", json_object_new_string("status"));
		r = ctl_call_quiet(res, sock, req, &reply);
		json_object_put(req);
		if (r == 0) {
			bool done = !strcmp(jstr(reply, "role"), role);

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

/* "512M", "2T", "1073741824": bytes */
static int parse_size(const char *s, uint64_t *ret)
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
			fprintf(stderr, "replctl: events %s: %s\n", src->resource, jstr(st, "error"));
			json_object_put(st);
			return false;
		}
		ev_state(src, st);
		json_object_put(st);
	}
	return src->len < sizeof(src->buf) - 1;
}

static int cmd_events(int argc, char **argv, bool json, const char *sock)
{
	bool now = false, statistics = false, all_dumped = false;
	char **names = NULL, req[128];
	struct ev_src *src;
	int n = 0, i, r = 0;

	ev_json = json;
	for (i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "--now")) {
			now = true;
		} else if (!strcmp(argv[i], "--statistics")) {
			statistics = true;
		} else if (argv[i][0] == '-') {
			fprintf(stderr, "replctl: usage: replctl events [<resource>...] [--now] [--statistics] [--json]\n");
			return -EINVAL;
		} else {
			char **nv = realloc(names, sizeof(*names) * (size_t)(n + 1));

			if (!nv)
				return -ENOMEM;
			names = nv;
			names[n++] = strdup(argv[i]);
		}
	}
	if (!n)
		all_resources(&names, &n);
	if (!n) {
		fprintf(stderr, "replctl: events: no repld runs here (no socket in %s)\n", run_dir());
		free(names);
		return -ENOENT;
	}
	if (sock && n != 1) {
		fprintf(stderr, "replctl: events: --socket names one resource's socket\n");
		return -EINVAL;
	}
	snprintf(req, sizeof(req), "{\"cmd\":\"events\",\"statistics\":%s}\n",
		 statistics ? "true" : "false");
	src = calloc((size_t)n, sizeof(*src));
	if (!src)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		src[i].resource = names[i];
		src[i].fd = -1;
		if (sock)
			snprintf(src[i].path, sizeof(src[i].path), "%s", sock);
		else
			snprintf(src[i].path, sizeof(src[i].path), "%s/%s.sock", run_dir(), names[i]);
		if (ev_connect(&src[i], req) < 0) {
			fprintf(stderr, "replctl: events %s: repld is not running for this resource (%s)\n",
				names[i], src[i].path);
			src[i].failed = now;
			src[i].retry_ms = ev_now_ms() + 500;
		}
	}
	signal(SIGPIPE, SIG_DFL);
	for (;;) {
		struct pollfd pfd[64];
		int np = 0, timeout = 500;

		if (!all_dumped) {
			bool done = true;

			for (i = 0; i < n; i++)
				done &= src[i].dumped || src[i].failed || (!now && src[i].fd < 0);
			if (done) {
				printf(json ? "{\"event\":\"exists\",\"object\":\"-\"}\n" : "exists -\n");
				fflush(stdout);
				all_dumped = true;
				if (now)
					break;
			}
		}
		for (i = 0; i < n && np < 64; i++) {
			if (src[i].fd < 0) {
				if (!now && ev_now_ms() >= src[i].retry_ms &&
				    ev_connect(&src[i], req) < 0)
					src[i].retry_ms = ev_now_ms() + 500;
				if (src[i].fd < 0)
					continue;
			}
			pfd[np].fd = src[i].fd;
			pfd[np].events = POLLIN;
			pfd[np].revents = 0;
			np++;
		}
		if (now && !np)
			break;
		if (poll(pfd, (nfds_t)np, timeout) < 0 && errno != EINTR) {
			r = -errno;
			break;
		}
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
	ctl_quiet = true;
	r = ctl_call(res, sock, req, &st);
	json_object_put(req);
	snprintf(lr, sizeof(lr), "resource=\"%s\"", mlabel(res));
	M(o, "dmrepl_up", lr, r == 0);
	if (r < 0)
		return;
	if (!strcmp(jstr(st, "role"), "primary") && json_object_object_get_ex(st, "target", &t)) {
		M(o, "dmrepl_role_primary", lr, 1);
		M(o, "dmrepl_device_size_bytes", lr, ju64(t, "device_sectors") * 512);
		M(o, "dmrepl_ring_size_bytes", lr, ju64(t, "ring_bytes"));
		M(o, "dmrepl_ring_used_bytes", lr, ju64(t, "ring_used_bytes"));
		M(o, "dmrepl_target_sync", lr, !strcmp(jstr(t, "mode"), "sync"));
		M(o, "dmrepl_target_degraded", lr, !strcmp(jstr(t, "state"), "degraded"));
		M(o, "dmrepl_target_overflow", lr, !strcmp(jstr(t, "state"), "overflow"));
		M(o, "dmrepl_dirty_regions", lr, ju64(t, "dirty_regions"));
		M(o, "dmrepl_hold_timeouts_total", lr, ju64(t, "hold_timeouts"));
		M(o, "dmrepl_overflows_total", lr, ju64(t, "overflows"));
		json_object_object_get_ex(st, "peers", &peers);
		for (size_t i = 0; peers && i < json_object_array_length(peers); i++) {
			struct json_object *p = json_object_array_get_idx(peers, i), *rs, *cz;
			char lm[400];

			snprintf(lp, sizeof(lp), "%s,peer=\"%s\"", lr, mlabel(jstr(p, "name")));
			M(o, "dmrepl_peer_connected", lp, !strcmp(jstr(p, "connection"), "Connected"));
			M(o, "dmrepl_peer_up_to_date", lp, !strcmp(jstr(p, "disk"), "UpToDate"));
			snprintf(lm, sizeof(lm), "%s,mode=\"%s\"", lp, mlabel(jstr(p, "mode")));
			M(o, "dmrepl_peer_mode", lm, 1);
			M(o, "dmrepl_peer_out_of_sync_regions", lp, ju64(p, "out_of_sync_regions"));
			M(o, "dmrepl_peer_lag_records", lp, ju64(p, "lag_records"));
			M(o, "dmrepl_peer_lag_bytes", lp, ju64(p, "lag_bytes"));
			M(o, "dmrepl_peer_sent_bytes_total", lp, ju64(p, "bytes_sent"));
			M(o, "dmrepl_peer_sent_records_total", lp, ju64(p, "records_sent"));
			M(o, "dmrepl_peer_acks_total", lp, ju64(p, "acks_received"));
			M(o, "dmrepl_peer_connects_total", lp, ju64(p, "connects"));
			M(o, "dmrepl_peer_resyncs_total", lp, ju64(p, "resyncs_done"));
			M(o, "dmrepl_peer_pulled_ahead_total", lp, ju64(p, "pulled_ahead"));
			M(o, "dmrepl_peer_fenced", lp, !strcmp(jstr(p, "fence"), "fenced"));
			M(o, "dmrepl_fence_failures_total", lp, ju64(p, "fence_failures"));
			if (json_object_object_get_ex(p, "compress", &cz) &&
			    strcmp(jstr(cz, "algorithm"), "none")) {
				M(o, "dmrepl_peer_compress_in_bytes_total", lp, ju64(cz, "in_bytes"));
				M(o, "dmrepl_peer_compress_out_bytes_total", lp, ju64(cz, "out_bytes"));
				MS(o, "dmrepl_peer_compress_seconds_total", lp,
				   json_object_get_double(json_object_object_get(cz, "seconds")));
			}
			M(o, "dmrepl_peer_rate_limit_bytes", lp, ju64(p, "rate_limit_bytes"));
			M(o, "dmrepl_resync_remaining_bytes", lp,
			  json_object_object_get_ex(p, "resync", &rs) ?
			  ju64(rs, "total_bytes") - ju64(rs, "done_bytes") : 0);
		}
	} else {
		M(o, "dmrepl_role_primary", lr, 0);
		M(o, "dmrepl_device_size_bytes", lr, ju64(st, "device_sectors") * 512);
		M(o, "dmrepl_secondary_consistent", lr, !strcmp(jstr(st, "disk"), "UpToDate"));
		if (json_object_object_get_ex(st, "primary", &pr)) {
			snprintf(lp, sizeof(lp), "%s,primary=\"%s\"", lr, mlabel(jstr(pr, "name")));
			M(o, "dmrepl_secondary_primary_connected", lp,
			  !strcmp(jstr(pr, "connection"), "Connected"));
			M(o, "dmrepl_secondary_received_records", lp, ju64(pr, "received"));
			if (json_object_object_get_ex(pr, "compress", &t)) {
				M(o, "dmrepl_secondary_zstd_bytes_total", lp, ju64(t, "in_bytes"));
				M(o, "dmrepl_secondary_zstd_wire_bytes_total", lp, ju64(t, "out_bytes"));
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
		all_resources(&all, &nall);
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

static int cmd_metrics(int argc, char **argv, const char *sock)
{
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
			fprintf(stderr, "replctl: usage: replctl metrics [<resource>...] [--listen ADDRESS:PORT]\n");
			free(names);
			return -EINVAL;
		} else {
			char **nv = realloc(names, sizeof(*names) * (size_t)(n + 1));

			if (!nv) {
				free(names);
				return -ENOMEM;
			}
			names = nv;
			names[n++] = argv[i];
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

/*
 * Grow the repl device to its backing device's size (or --size): a reload
 * of its table with the new length, the rest unchanged.  The target grows
 * at the resume, and repld follows; the grown part is out of sync until a
 * resync has sent it to the peers, whose devices must have grown first.
 */
static int cmd_resize(int argc, char **argv, const char *sock)
{
	char path[PATH_MAX], err[512];
	const char *file = NULL;
	uint64_t want = 0, had;
	struct dmdev_info info;
	struct config *c = NULL;
	int fd, r, i;

	for (i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--size")) {
			r = parse_size(argv[i + 1], &want);
			if (r < 0 || !want || want % 512) {
				fprintf(stderr, "replctl: --size %s: a size in bytes, a multiple of 512, with K, M, G or T for KiB, MiB, GiB or TiB\n",
					argv[i + 1]);
				return -EINVAL;
			}
			want >>= 9;
		} else if (!strcmp(argv[i], "--config")) {
			file = argv[i + 1];
		} else {
			break;
		}
	}
	if (argc < 1 || i != argc) {
		fprintf(stderr, "replctl: usage: replctl resize <resource> [--size SIZE] [--config FILE]\n");
		return -EINVAL;
	}
	snprintf(err, sizeof(err), "resource name '%s'", argv[0]);
	r = file ? (snprintf(path, sizeof(path), "%s", file) < (int)sizeof(path) ? 0 : -ENAMETOOLONG) :
		   config_path(argv[0], path, sizeof(path));
	if (r == 0)
		r = config_load(path, &c, err, sizeof(err));
	if (r < 0) {
		fprintf(stderr, "replctl: resize: %s\n", err);
		return r;
	}
	if (strcmp(c->resource, argv[0])) {
		fprintf(stderr, "replctl: resize: %s is the configuration of %s, not %s\n", path,
			c->resource, argv[0]);
		r = -EINVAL;
		goto out;
	}
	r = dmdev_get(c->dm_name, &info);
	if (r == 0 && (!info.exists || strcmp(info.target, "repl"))) {
		fprintf(stderr, "replctl: resize: no repl device /dev/mapper/%s here: resize on the primary\n",
			c->dm_name);
		r = -ENODEV;
	}
	if (r < 0)
		goto out;
	if (!want) {
		fd = open(c->device, O_RDONLY | O_CLOEXEC);
		r = fd < 0 ? -errno : dmdev_size_sectors(fd, &want);
		if (fd >= 0)
			close(fd);
		if (r < 0) {
			fprintf(stderr, "replctl: resize: size of %s: %s\n", c->device, strerror(-r));
			goto out;
		}
	}
	had = info.sectors;
	if (want < had) {
		fprintf(stderr, "replctl: resize: %s has %" PRIu64 " sectors, %" PRIu64 " is smaller: a repl device does not shrink (what a filesystem or a peer holds there would be cut off)\n",
			c->dm_name, had, want);
		r = -EINVAL;
		goto out;
	}
	if (want == had) {
		printf("%s: already %" PRIu64 " sectors, the size of %s: extend that first (lvextend)\n",
		       c->dm_name, had, c->device);
		r = 0;
		goto out;
	}
	if (strcmp(c->meta_device, "-")) {
		struct md_info mi;

		r = md_read(c->meta_device, false, &mi, err, sizeof(err));
		if (r < 0) {
			fprintf(stderr, "replctl: resize: %s\n", err);
			goto out;
		}
		if (want > mi.max_sectors) {
			fprintf(stderr, "replctl: resize: %s has room for a device of %" PRIu64 " sectors, not %" PRIu64 " (replctl create-md --max-size, on a larger metadata device)\n",
				c->meta_device, mi.max_sectors, want);
			r = -ENOSPC;
			goto out;
		}
	}
	/* the same table, longer: it grows at the resume */
	r = dmdev_reload_target(c->dm_name, "repl", want, info.params);
	if (r < 0) {
		fprintf(stderr, "replctl: resize: reloading %s with %" PRIu64 " sectors: %s (the kernel log says why)\n",
			c->dm_name, want, strerror(-r));
		goto out;
	}
	printf("%s: grown from %" PRIu64 " to %" PRIu64 " sectors\n", c->dm_name, had, want);
	/* repld follows the device: wait until it says so */
	for (i = 0; i < 100; i++) {
		struct json_object *req = json_object_new_object(), *reply = NULL, *t;
		bool done = false;

		json_object_object_add(req, "cmd", json_object_new_string("status"));
		r = ctl_call_quiet(c->resource, sock, req, &reply);
		json_object_put(req);
		if (r < 0)
			break;
		if (json_object_object_get_ex(reply, "target", &t) &&
		    json_object_object_get_ex(t, "device_sectors", &t))
			done = (uint64_t)json_object_get_uint64(t) == want;
		json_object_put(reply);
		if (done) {
			printf("%s: repld replicates %" PRIu64 " sectors; the new part goes to the peers by resync (replctl status)\n",
			       c->resource, want);
			break;
		}
		usleep(100 * 1000);
	}
	if (i == 100) {
		fprintf(stderr, "replctl: resize: repld did not take the new size within 10 s (see its log)\n");
		r = -ETIMEDOUT;
	} else {
		r = 0;
	}
out:
	config_free(c);
	return r;
}

/* A command on a resource without further arguments. */
static int cmd_simple(const char *cmd, int argc, char **argv, bool json, const char *sock)
{
	struct json_object *req;

	if (argc != 1) {
		fprintf(stderr, "replctl: usage: replctl %s <resource>\n", cmd);
		return -EINVAL;
	}
	req = json_object_new_object();
	json_object_object_add(req, "cmd", json_object_new_string(cmd));
	if (ctl_force)
		json_object_object_add(req, "force", json_object_new_boolean(true));
	return ctl_do(argv[0], sock, req, json, NULL);
}

/* The peer's entry in a status reply, or NULL. */
static struct json_object *status_peer(struct json_object *st, const char *peer)
{
	struct json_object *peers;
	size_t i;

	if (!json_object_object_get_ex(st, "peers", &peers))
		return NULL;
	for (i = 0; i < json_object_array_length(peers); i++) {
		struct json_object *p = json_object_array_get_idx(peers, i);

		if (!strcmp(jstr(p, "name"), peer))
			return p;
	}
	return NULL;
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
		rc = ctl_call(res, sock, req, &reply);
		json_object_put(req);
		if (rc < 0)
			return rc;
		p = status_peer(reply, peer);
		if (!p || strcmp(jstr(p, "connection"), "Connected")) {
			fprintf(stderr, "%sreplctl: %s: peer %s disconnected\n", tty ? "\n" : "",
				res, peer);
			json_object_put(reply);
			return -ENOTCONN;
		}
		if (!json_object_object_get_ex(p, "resync", &r)) {
			uint64_t n = ju64(p, verify ? "verifies_done" : "resyncs_done");

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
				       ju64(p, "last_verify_mismatches"),
				       ju64(p, "last_verify_mismatches") ? " (a resync follows)" : "");
			else
				printf("%s: peer %s: resync done, disk:%s\n", res, peer,
				       jstr(p, "disk"));
			json_object_put(reply);
			return 0;
		}
		{
			double pct = json_object_get_double(json_object_object_get(r, "percent"));
			int64_t eta = json_object_get_int64(json_object_object_get(r, "eta_s"));
			char a[32], b[32], c[32], bar[41];
			int i, fill = (int)(pct * 40 / 100);

			human_bytes(ju64(r, "done_bytes"), a, sizeof(a));
			human_bytes(ju64(r, "total_bytes"), b, sizeof(b));
			human_bytes(ju64(r, "rate_bytes_per_s"), c, sizeof(c));
			for (i = 0; i < 40; i++)
				bar[i] = i < fill ? '#' : '.';
			bar[40] = '\0';
			if (tty)
				fprintf(stderr, "\r%s %s [%s] %5.1f%% %s/%s %s/s eta %" PRId64 "s   ",
					peer, jstr(r, "kind"), bar, pct, a, b, c, eta < 0 ? 0 : eta);
			else if (t - last_line >= 5000 || !t) {
				fprintf(stderr, "%s %s %.1f%% %s of %s, %s/s, eta %" PRId64 " s\n", peer,
					jstr(r, "kind"), pct, a, b, c, eta < 0 ? 0 : eta);
				last_line = t;
			}
		}
		json_object_put(reply);
		usleep(500 * 1000);
	}
}

static int cmd_resync(const char *cmd, int argc, char **argv, bool json, const char *sock)
{
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
		fprintf(stderr, "replctl: usage: replctl %s <resource> <peer>%s [--wait]\n", cmd,
			verify ? "" : " [--full]");
		return -EINVAL;
	}
	req = json_object_new_object();
	json_object_object_add(req, "cmd", json_object_new_string(cmd));
	json_object_object_add(req, "peer", json_object_new_string(pos[1]));
	json_object_object_add(req, "full", json_object_new_boolean(full));
	r = ctl_do(pos[0], sock, req, json && !wait, &reply);
	if (r < 0)
		return r;
	p = status_peer(reply, pos[1]);
	before = p ? ju64(p, verify ? "verifies_done" : "resyncs_done") : 0;
	json_object_put(reply);
	return wait ? wait_resync(pos[0], pos[1], sock, verify, before) : 0;
}

/* create-md / dump-md arguments: a resource's configuration, or options */
struct md_args {
	const char *meta, *data, *resource;
	unsigned int region_kb;
	unsigned int max_peers;
	uint64_t max_bytes;		/* --max-size, 0: not given */
	bool force;
	struct config *cfg;
};

static int md_args_parse(int argc, char **argv, struct md_args *a)
{
	char path[4096], err[512];
	int i, r;

	bool region_given = false;

	a->region_kb = 64;
	for (i = 0; i < argc; i++) {
		const char *o = argv[i];

		if (!strcmp(o, "--force"))
			a->force = true;
		else if (i + 1 < argc && !strcmp(o, "--meta"))
			a->meta = argv[++i];
		else if (i + 1 < argc && !strcmp(o, "--data"))
			a->data = argv[++i];
		else if (i + 1 < argc && !strcmp(o, "--resource"))
			a->resource = argv[++i];
		else if (i + 1 < argc && !strcmp(o, "--region-kb")) {
			a->region_kb = (unsigned int)strtoul(argv[++i], NULL, 10);
			region_given = true;
		} else if (i + 1 < argc && !strcmp(o, "--max-size")) {
			r = parse_size(argv[++i], &a->max_bytes);
			if (r < 0 || !a->max_bytes) {
				fprintf(stderr, "replctl: --max-size %s: a size in bytes, with K, M, G or T for KiB, MiB, GiB or TiB\n",
					argv[i]);
				return -EINVAL;
			}
		} else if (i + 1 < argc && !strcmp(o, "--max-peers")) {
			char *end;
			unsigned long v = strtoul(argv[++i], &end, 10);

			if (*end || !v || v > DM_REPL_MD_MAX_PEERS) {
				fprintf(stderr, "replctl: --max-peers %s: a number from 1 to %u\n",
					argv[i], DM_REPL_MD_MAX_PEERS);
				return -EINVAL;
			}
			a->max_peers = (unsigned int)v;
		}
		else if (o[0] != '-' && !a->cfg) {
			r = config_path(o, path, sizeof(path));
			if (r < 0) {
				fprintf(stderr, "replctl: resource name '%s'\n", o);
				return r;
			}
			r = config_load(path, &a->cfg, err, sizeof(err));
			if (r < 0) {
				fprintf(stderr, "replctl: %s\n", err);
				return r;
			}
		} else {
			fprintf(stderr, "replctl: unexpected argument '%s'\n", o);
			return -EINVAL;
		}
	}
	if (a->cfg) {
		if (!strcmp(a->cfg->meta_device, "-")) {
			fprintf(stderr, "replctl: resource %s has no meta-device in %s\n",
				a->cfg->resource, a->cfg->path);
			return -EINVAL;
		}
		a->meta = a->meta ? a->meta : a->cfg->meta_device;
		a->data = a->data ? a->data : a->cfg->device;
		/* the metadata names the repl device (dm-name, by default the resource) */
		a->resource = a->resource ? a->resource : a->cfg->dm_name;
		if (!region_given)
			a->region_kb = a->cfg->region_kb;
	}
	return 0;
}

static int cmd_create_md(int argc, char **argv)
{
	struct md_args a = { 0 };
	uint64_t sectors, max;
	char err[512];
	int fd, r;

	r = md_args_parse(argc, argv, &a);
	if (r < 0)
		goto out;
	if (!a.meta || !a.data || !a.resource) {
		fprintf(stderr, "replctl: create-md needs a resource, or --meta, --data and --resource\n");
		r = -EINVAL;
		goto out;
	}
	fd = open(a.data, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || dmdev_size_sectors(fd, &sectors) < 0) {
		r = -errno;
		fprintf(stderr, "replctl: %s: %s\n", a.data, strerror(errno));
		if (fd >= 0)
			close(fd);
		goto out;
	}
	close(fd);
	if (!a.max_peers && a.cfg)
		a.max_peers = a.cfg->nr_peers > DM_REPL_MD_DEFAULT_PEERS ? a.cfg->nr_peers :
			      DM_REPL_MD_DEFAULT_PEERS;
	if (a.max_bytes) {
		max = a.max_bytes >> 9;
		if (max < sectors) {
			fprintf(stderr, "replctl: create-md: --max-size %" PRIu64 " bytes is smaller than %s (%" PRIu64 " bytes)\n",
				a.max_bytes, a.data, sectors << 9);
			r = -EINVAL;
			goto out;
		}
	} else {
		/* room to grow 4 times, or what the metadata device holds */
		uint64_t meta_sectors = 0;

		fd = open(a.meta, O_RDONLY | O_CLOEXEC);
		if (fd >= 0) {
			dmdev_size_sectors(fd, &meta_sectors);
			close(fd);
		}
		max = md_max_sectors(meta_sectors << 9, a.region_kb, a.max_peers);
		if (max > 4 * sectors)
			max = 4 * sectors;
	}
	r = md_create(a.meta, a.resource, sectors, max, a.region_kb, a.max_peers, a.force, err,
		      sizeof(err));
	if (r < 0) {
		fprintf(stderr, "replctl: create-md: %s\n", err);
		goto out;
	}
	printf("%s: metadata for resource %s (%" PRIu64 " sectors of %s, room for %" PRIu64
	       " sectors, %u KiB regions, %u peer slots)\n",
	       a.meta, a.resource, sectors, a.data, max > sectors ? max : sectors, a.region_kb,
	       a.max_peers ? a.max_peers : DM_REPL_MD_DEFAULT_PEERS);
out:
	config_free(a.cfg);
	return r;
}

static int cmd_upgrade_md(int argc, char **argv)
{
	struct md_args a = { 0 };
	char err[512];
	int r;

	r = md_args_parse(argc, argv, &a);
	if (r < 0)
		goto out;
	if (!a.meta) {
		fprintf(stderr, "replctl: upgrade-md needs a resource or --meta DEV\n");
		r = -EINVAL;
		goto out;
	}
	if (!a.max_peers && a.cfg)
		a.max_peers = a.cfg->nr_peers > DM_REPL_MD_DEFAULT_PEERS ? a.cfg->nr_peers :
			      DM_REPL_MD_DEFAULT_PEERS;
	r = md_upgrade(a.meta, a.max_peers, err, sizeof(err));
	if (r < 0) {
		fprintf(stderr, "replctl: upgrade-md: %s\n", err);
		goto out;
	}
	printf("%s: metadata upgraded to format version %u, %u peer slots\n", a.meta,
	       DM_REPL_MD_VERSION, a.max_peers ? a.max_peers : DM_REPL_MD_DEFAULT_PEERS);
out:
	config_free(a.cfg);
	return r;
}

/* The peer slots: name, tracked, regions set; NULL json prints them. */
static void dump_slots(const char *meta, const struct md_info *mi, struct json_object *arr)
{
	struct md_peers p;
	uint8_t *b = NULL;
	int fd, r;

	r = md_peers_open(meta, &fd);
	if (r < 0)
		return;
	if (md_peers_read(fd, mi, &p) < 0 || posix_memalign((void **)&b, 4096, mi->bitmap_bytes)) {
		printf("  peer area: unreadable\n");
		close(fd);
		return;
	}
	if (!arr)
		printf("  peer slots:%u%s\n", mi->max_peers,
		       p.flags & DM_REPL_MD_PEERS_FRESH ? " (fresh)" : "");
	for (unsigned int i = 0; i < mi->max_peers; i++) {
		uint64_t n = 0;

		if (!(p.slot[i].flags & DM_REPL_MD_SLOT_USED))
			continue;
		if (md_slot_read(fd, mi, i, b) == 0)
			for (uint64_t k = 0; k < mi->nr_regions; k++)
				n += (b[k / 8] >> (k % 8)) & 1;
		if (arr) {
			struct json_object *o = json_object_new_object();

			json_object_object_add(o, "slot", json_object_new_int((int)i));
			json_object_object_add(o, "peer", json_object_new_string(p.slot[i].name));
			json_object_object_add(o, "tracked", json_object_new_boolean(
				p.slot[i].flags & DM_REPL_MD_SLOT_TRACKED));
			json_object_object_add(o, "set_regions", json_object_new_uint64(n));
			json_object_array_add(arr, o);
		} else {
			printf("  slot %u: peer:%s %s set:%" PRIu64 "\n", i, p.slot[i].name,
			       p.slot[i].flags & DM_REPL_MD_SLOT_TRACKED ? "tracked" :
			       "untracked (full sync)", n);
		}
	}
	free(b);
	close(fd);
}

static int cmd_dump_md(int argc, char **argv, bool json)
{
	struct md_args a = { 0 };
	struct md_info mi;
	char err[512];
	uint64_t i, first = 0;
	bool in = false;
	int r;

	r = md_args_parse(argc, argv, &a);
	if (r < 0 || !a.meta) {
		if (!r)
			fprintf(stderr, "replctl: dump-md needs a resource or --meta DEV\n");
		config_free(a.cfg);
		return r < 0 ? r : -EINVAL;
	}
	r = md_read(a.meta, true, &mi, err, sizeof(err));
	if (r < 0) {
		fprintf(stderr, "replctl: %s\n", err);
		config_free(a.cfg);
		return r;
	}
	if (json) {
		struct json_object *o = json_object_new_object(), *runs = json_object_new_array();

		json_object_object_add(o, "resource", json_object_new_string(mi.resource));
		json_object_object_add(o, "version", json_object_new_int((int)mi.version));
		{
			char u[40], g[20];
			struct json_object *ga = json_object_new_array();

			for (int k = 0; k < 16; k++)
				snprintf(u + 2 * k, 3, "%02x", mi.uuid[k]);
			json_object_object_add(o, "uuid", json_object_new_string(u));
			for (int k = 0; k < 4; k++) {
				snprintf(g, sizeof(g), "%016" PRIx64, mi.gen[k]);
				json_object_array_add(ga, json_object_new_string(g));
			}
			json_object_object_add(o, "gens", ga);
			json_object_object_add(o, "bitmap_offset",
					       json_object_new_uint64(mi.bitmap_offset));
		}
		json_object_object_add(o, "clean", json_object_new_boolean(mi.flags & DM_REPL_MD_CLEAN));
		json_object_object_add(o, "role", json_object_new_string(md_role_name(mi.role)));
		json_object_object_add(o, "events", json_object_new_uint64(mi.events));
		json_object_object_add(o, "dev_sectors", json_object_new_uint64(mi.dev_sectors));
		json_object_object_add(o, "region_bytes", json_object_new_uint64(1ULL << mi.region_shift));
		json_object_object_add(o, "regions", json_object_new_uint64(mi.nr_regions));
		json_object_object_add(o, "set_regions", json_object_new_uint64(mi.set_regions));
		for (i = 0; i <= mi.nr_regions; i++) {
			bool set = i < mi.nr_regions && bitmap_test(mi.bitmap, i);

			if (set && !in)
				first = i;
			if (!set && in) {
				struct json_object *run = json_object_new_array();

				json_object_array_add(run, json_object_new_uint64(first));
				json_object_array_add(run, json_object_new_uint64(i - 1));
				json_object_array_add(runs, run);
			}
			in = set;
		}
		json_object_object_add(o, "set", runs);
		json_object_object_add(o, "max_sectors", json_object_new_uint64(mi.max_sectors));
		json_object_object_add(o, "max_peers", json_object_new_uint64(mi.max_peers));
		json_object_object_add(o, "peers_offset", json_object_new_uint64(mi.peers_offset));
		{
			struct json_object *slots = json_object_new_array();

			dump_slots(a.meta, &mi, slots);
			json_object_object_add(o, "peers", slots);
		}
		printf("%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
		json_object_put(o);
	} else {
		printf("resource:%s %s role:%s events:%" PRIu64 " sectors:%" PRIu64 " region:%llu KiB regions:%" PRIu64 " set:%" PRIu64 "\n",
		       mi.resource, mi.flags & DM_REPL_MD_CLEAN ? "clean" : "in-use",
		       md_role_name(mi.role), mi.events,
		       mi.dev_sectors, (1ULL << mi.region_shift) >> 10, mi.nr_regions,
		       mi.set_regions);
		printf("  version:%u generation:%016" PRIx64 " bitmap-generation:%016" PRIx64
		       " history:%016" PRIx64 "\n", mi.version, mi.gen[0], mi.gen[1], mi.gen[2]);
		printf("  room for:%" PRIu64 " sectors\n", mi.max_sectors);
		dump_slots(a.meta, &mi, NULL);
	}
	free(mi.bitmap);
	config_free(a.cfg);
	return 0;
}

/*
 * For udev (68-dm-repl-below.rules): is the device of this event the one
 * below a repl device on this node (repl.conf's "device", the primary's
 * backing device or a secondary's replica)?  Prints DM_REPL_BELOW=<resource>
 * if so, nothing otherwise; always succeeds.  During a device's first
 * event its symlinks do not exist yet: the names udev gave it so far come
 * in $DEVLINKS, its numbers in $MAJOR and $MINOR.
 */
static bool udev_names_dev(const char *devname, const char *device)
{
	const char *links = getenv("DEVLINKS"), *p;
	const char *maj = getenv("MAJOR"), *min = getenv("MINOR");
	size_t n = strlen(device);
	struct stat st;

	if (!strcmp(device, devname))
		return true;
	for (p = links; p && *p; p += strcspn(p, " ")) {
		p += strspn(p, " ");
		if (!strncmp(p, device, n) && (p[n] == ' ' || !p[n]))
			return true;
	}
	return maj && min && !stat(device, &st) && S_ISBLK(st.st_mode) &&
	       major(st.st_rdev) == strtoul(maj, NULL, 10) &&
	       minor(st.st_rdev) == strtoul(min, NULL, 10);
}

static int cmd_udev_below(int argc, char **argv)
{
	char path[PATH_MAX], resource[CONFIG_NAME_MAX + 1], device[PATH_MAX];
	struct dirent *de;
	DIR *d;

	if (argc != 1 || argv[0][0] != '/') {
		fprintf(stderr, "Usage: replctl udev-below DEVNAME\n");
		return -EINVAL;
	}
	d = opendir(CONFIG_DIR);
	if (!d)
		return 0;
	while ((de = readdir(d))) {
		size_t n = strlen(de->d_name);

		if (n < 6 || strcmp(de->d_name + n - 5, ".conf") ||
		    (size_t)snprintf(path, sizeof(path), "%s/%s", CONFIG_DIR, de->d_name) >=
		    sizeof(path) ||
		    config_read_device(path, resource, sizeof(resource), device, sizeof(device)) < 0 ||
		    !config_name_valid(resource))
			continue;
		if (udev_names_dev(argv[0], device)) {
			printf("DM_REPL_BELOW=%s\n", resource);
			break;
		}
	}
	closedir(d);
	return 0;
}

static int run(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "socket", required_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	const char *sock = NULL, *cmd;
	bool json = false;
	int c;

	while ((c = getopt_long(argc, argv, "+js:h", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			json = true;
			break;
		case 's':
			sock = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return -EINVAL;
		}
	}
	if (optind >= argc) {
		usage(stderr);
		return -EINVAL;
	}
	cmd = argv[optind++];
	/* options may also follow the command */
	for (int i = optind; i < argc; i++) {
		if (!strcmp(argv[i], "--json") || !strcmp(argv[i], "-j")) {
			json = true;
			memmove(&argv[i], &argv[i + 1], sizeof(*argv) * (size_t)(argc - i - 1));
			argc--;
			i--;
		}
	}
	if (!strcmp(cmd, "status"))
		return cmd_status(argc - optind, argv + optind, json, sock);
	if (!strcmp(cmd, "events"))
		return cmd_events(argc - optind, argv + optind, json, sock);
	if (!strcmp(cmd, "metrics"))
		return cmd_metrics(argc - optind, argv + optind, sock);
	if (!strcmp(cmd, "set-mode") || !strcmp(cmd, "connect") || !strcmp(cmd, "disconnect"))
		return cmd_peer(cmd, argc - optind, argv + optind, json, sock);
	if (!strcmp(cmd, "resync") || !strcmp(cmd, "verify"))
		return cmd_resync(cmd, argc - optind, argv + optind, json, sock);
	if (!strcmp(cmd, "discard-my-data"))
		return cmd_simple(cmd, argc - optind, argv + optind, json, sock);
	if (!strcmp(cmd, "primary") || !strcmp(cmd, "secondary")) {
		bool force = false;
		int r, n = argc - optind;

		if (n == 2 && !strcmp(argv[optind + 1], "--force") && !strcmp(cmd, "primary")) {
			force = true;
			n = 1;
		}
		ctl_force = force;
		r = cmd_simple(cmd, n, argv + optind, false, sock);
		if (r < 0)
			return r;
		return wait_role(argv[optind], sock, cmd);
	}
	if (!strcmp(cmd, "resize"))
		return cmd_resize(argc - optind, argv + optind, sock);
	if (!strcmp(cmd, "create-md"))
		return cmd_create_md(argc - optind, argv + optind);
	if (!strcmp(cmd, "upgrade-md"))
		return cmd_upgrade_md(argc - optind, argv + optind);
	if (!strcmp(cmd, "dump-md"))
		return cmd_dump_md(argc - optind, argv + optind, json);
	if (!strcmp(cmd, "udev-below"))
		return cmd_udev_below(argc - optind, argv + optind);
	fprintf(stderr, "replctl: unknown command '%s'\n", cmd);
	usage(stderr);
	return -EINVAL;
}

int main(int argc, char **argv)
{
	return run(argc, argv) < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
