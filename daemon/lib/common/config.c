// SPDX-License-Identifier: GPL-2.0-only
/*
 * repl.conf(5) with libconfig: a strict reader.  Unknown settings are
 * errors (a typo must not silently fall back to a default), every value is
 * range-checked, names are restricted to [A-Za-z0-9._-].
 */
#include <errno.h>
#include <grp.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <libconfig.h>

#include <linux/dm-repl.h>

#include "config.h"

struct cfg_ctx {
	const char *path;
	char *err;
	size_t errlen;
};

__attribute__((format(printf, 3, 4)))
static int cfg_fail(struct cfg_ctx *x, const config_setting_t *s, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (s && config_setting_source_line(s))
		snprintf(x->err, x->errlen, "%s:%u: %s", x->path,
			 config_setting_source_line(s), msg);
	else
		snprintf(x->err, x->errlen, "%s: %s", x->path, msg);
	return -EINVAL;
}

bool config_name_valid(const char *s)
{
	size_t n = strlen(s);

	if (n < 1 || n > CONFIG_NAME_MAX)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '.' || *s == '_' || *s == '-'))
			return false;
	return true;
}

const char *config_mode_name(enum peer_mode mode)
{
	switch (mode) {
	case MODE_ASYNC:
		return "async";
	case MODE_SEMI_SYNC:
		return "semi-sync";
	case MODE_SYNC:
		return "sync";
	}
	return "?";
}

int config_mode_parse(const char *s, enum peer_mode *ret)
{
	if (!strcmp(s, "async"))
		*ret = MODE_ASYNC;
	else if (!strcmp(s, "semi-sync"))
		*ret = MODE_SEMI_SYNC;
	else if (!strcmp(s, "sync"))
		*ret = MODE_SYNC;
	else
		return -EINVAL;
	return 0;
}

const char *config_compress_name(enum peer_compress c)
{
	switch (c) {
	case COMPRESS_NONE:
		return "none";
	case COMPRESS_ZSTD:
		return "zstd";
	}
	return "?";
}

int config_rate_parse(const char *s, uint64_t *ret)
{
	static const struct {
		const char *unit;
		uint64_t mul;		/* bits per second */
	} units[] = {
		{ "bit", 1 }, { "kbit", 1000 }, { "mbit", 1000000 },
		{ "gbit", 1000000000 }, { "tbit", 1000000000000 },
		{ "bps", 8 }, { "kbps", 8000 }, { "mbps", 8000000 },
		{ "gbps", 8000000000 }, { "tbps", 8000000000000 },
	};
	uint64_t v = 0;
	const char *p = s;
	size_t i;

	if (*p < '0' || *p > '9')
		return -EINVAL;
	for (; *p >= '0' && *p <= '9'; p++) {
		if (v > (UINT64_MAX - 9) / 10)
			return -ERANGE;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	for (i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcasecmp(p, units[i].unit))
			continue;
		if (v > UINT64_MAX / units[i].mul)
			return -ERANGE;
		v = v * units[i].mul / 8;
		if (v < CONFIG_RATE_MIN || v > CONFIG_RATE_MAX)
			return -ERANGE;
		*ret = v;
		return 0;
	}
	return -EINVAL;
}

const char *config_role_name(enum repl_role role)
{
	return role == ROLE_PRIMARY ? "primary" : role == ROLE_SECONDARY ? "secondary" : "?";
}

/* "host:port", "[v6]:port" or, passive only, ":port" / "port" (any address) */
int config_addr_parse(const char *text, bool passive, struct config_addr *ret)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_protocol = IPPROTO_TCP };
	struct addrinfo *res = NULL;
	char host[256], port[16];
	const char *colon;
	struct config_addr a;
	size_t hl;
	int r;

	if (strlen(text) >= sizeof(a.text))
		return -ENAMETOOLONG;
	if (text[0] == '[') {
		const char *end = strchr(text, ']');

		if (!end || end[1] != ':')
			return -EINVAL;
		hl = (size_t)(end - text - 1);
		colon = end + 1;
		memcpy(host, text + 1, hl);
	} else {
		colon = strrchr(text, ':');
		if (!colon) {
			if (!passive)
				return -EINVAL;
			colon = text - 1;	/* the whole text is the port */
			hl = 0;
		} else {
			hl = (size_t)(colon - text);
			if (hl >= sizeof(host))
				return -EINVAL;
			memcpy(host, text, hl);
		}
	}
	host[hl] = '\0';
	if (strlen(colon + 1) < 1 || strlen(colon + 1) >= sizeof(port) ||
	    strspn(colon + 1, "0123456789") != strlen(colon + 1))
		return -EINVAL;
	strcpy(port, colon + 1);
	if (atoi(port) < 1 || atoi(port) > 65535)
		return -EINVAL;
	if (!hl && !passive)
		return -EINVAL;

	hints.ai_family = AF_UNSPEC;
	hints.ai_flags = AI_NUMERICSERV | (hl ? 0 : AI_PASSIVE);
	r = getaddrinfo(hl ? host : NULL, port, &hints, &res);
	if (r)
		return r == EAI_MEMORY ? -ENOMEM : -EADDRNOTAVAIL;
	memset(&a, 0, sizeof(a));
	snprintf(a.text, sizeof(a.text), "%s", text);
	memcpy(&a.sa, res->ai_addr, res->ai_addrlen);
	a.len = res->ai_addrlen;
	freeaddrinfo(res);
	*ret = a;
	return 0;
}

static const char *const root_keys[] = {
	"resource", "node", "role", "device", "meta-device", "listen", "state-dir",
	"control-socket", "control-group", "ring-size-mb", "hold-timeout-ms", "region-kb",
	"extent-kb", "max-extents", "record-kb",
	"on-peer-loss", "keepalive-ms", "peer-timeout-ms", "reconnect-min-ms",
	"reconnect-max-ms", "checkpoint-ms", "drain-timeout-ms", "peers", "resync-checksums",
	"initial-sync", "after-split-brain", "dm-name", "resync-snapshot", "resync-rate-mb",
	"resync-min-rate-mb",
	"congestion-fill-pct", "transport", "tls-ca", "tls-cert", "tls-key", "tls-psk-file",
	"tls-ktls", "tls-ciphersuites", "fence-peer", "fence-peer-timeout-ms", NULL,
};

static const char *const peer_keys[] = {
	"name", "address", "mode", "compress", "compress-level", "rate-limit", NULL,
};

static int cfg_check_keys(struct cfg_ctx *x, const config_setting_t *group,
			  const char *const *keys, const char *where)
{
	int i, n = config_setting_length(group);

	for (i = 0; i < n; i++) {
		const config_setting_t *s = config_setting_get_elem(group, (unsigned int)i);
		const char *name = config_setting_name(s);
		const char *const *k;

		for (k = keys; *k; k++)
			if (name && !strcmp(name, *k))
				break;
		if (!*k)
			return cfg_fail(x, s, "unknown setting '%s'%s", name ? name : "?", where);
	}
	return 0;
}

static int cfg_string(struct cfg_ctx *x, const config_setting_t *group, const char *name,
		      bool required, char *buf, size_t len)
{
	const config_setting_t *s = config_setting_get_member(group, name);
	const char *v;

	if (!s) {
		if (required)
			return cfg_fail(x, group, "missing setting '%s'", name);
		return 0;
	}
	v = config_setting_get_string(s);
	if (!v)
		return cfg_fail(x, s, "%s: expected a string", name);
	if (strlen(v) >= len)
		return cfg_fail(x, s, "%s: too long", name);
	strcpy(buf, v);
	return 1;
}

static int cfg_uint(struct cfg_ctx *x, const config_setting_t *group, const char *name,
		    unsigned int min, unsigned int max, unsigned int *ret)
{
	const config_setting_t *s = config_setting_get_member(group, name);
	long long v;

	if (!s)
		return 0;
	if (config_setting_type(s) != CONFIG_TYPE_INT && config_setting_type(s) != CONFIG_TYPE_INT64)
		return cfg_fail(x, s, "%s: expected an integer", name);
	v = config_setting_get_int64(s);
	if (v < min || v > max)
		return cfg_fail(x, s, "%s: %lld is out of range %u..%u", name, v, min, max);
	*ret = (unsigned int)v;
	return 1;
}

/* cfg_uint() for a size that must also be a power of 2 */
static int cfg_uint_pow2(struct cfg_ctx *x, const config_setting_t *group, const char *name,
			 unsigned int min, unsigned int max, unsigned int *ret)
{
	int r = cfg_uint(x, group, name, min, max, ret);

	if (r > 0 && (*ret & (*ret - 1)))
		return cfg_fail(x, config_setting_get_member(group, name),
				"%s: must be a power of 2", name);
	return r;
}

/* A peer's compress, compress-level and rate-limit. */
static int cfg_peer_wan(struct cfg_ctx *x, const config_setting_t *p, struct config_peer *cp)
{
	const config_setting_t *lvl = config_setting_get_member(p, "compress-level");
	char comp[32] = "none", rate[64] = "";
	unsigned int level = CONFIG_ZSTD_LEVEL_DEFAULT;
	int r;

	r = cfg_string(x, p, "compress", false, comp, sizeof(comp));
	if (r < 0)
		return r;
	if (!strcmp(comp, "none"))
		cp->compress = COMPRESS_NONE;
	else if (!strcmp(comp, "zstd"))
		cp->compress = COMPRESS_ZSTD;
	else
		return cfg_fail(x, p, "peer '%s': compress '%s': expected none or zstd",
				cp->name, comp);
	r = cfg_uint(x, p, "compress-level", 1, CONFIG_ZSTD_LEVEL_MAX, &level);
	if (r < 0)
		return r;
	if (lvl && cp->compress == COMPRESS_NONE)
		return cfg_fail(x, lvl, "peer '%s': compress-level without compress = \"zstd\"",
				cp->name);
	cp->compress_level = (int)level;
	r = cfg_string(x, p, "rate-limit", false, rate, sizeof(rate));
	if (r < 0)
		return r;
	cp->rate_limit = 0;
	if (r > 0 && strcmp(rate, "0")) {
		r = config_rate_parse(rate, &cp->rate_limit);
		if (r == -ERANGE)
			return cfg_fail(x, p, "peer '%s': rate-limit '%s' is out of range 8kbit..400gbit",
					cp->name, rate);
		if (r < 0)
			return cfg_fail(x, p, "peer '%s': rate-limit '%s': expected a number and a unit, e.g. \"100mbit\" or \"12mbps\"",
					cp->name, rate);
	}
	return 0;
}

static int cfg_peers(struct cfg_ctx *x, const config_setting_t *root, struct config *c)
{
	const config_setting_t *list = config_setting_get_member(root, "peers");
	unsigned int i, j;
	int r;

	if (!list)
		return cfg_fail(x, root, "missing setting 'peers'");
	if (!config_setting_is_list(list) && !config_setting_is_array(list))
		return cfg_fail(x, list, "peers: expected a list ( {...}, ... )");
	c->nr_peers = (unsigned int)config_setting_length(list);
	if (c->nr_peers < 1 || c->nr_peers > CFG_MAX_PEERS)
		return cfg_fail(x, list, "peers: between 1 and %u peers", CFG_MAX_PEERS);
	c->peers = calloc(c->nr_peers, sizeof(*c->peers));
	if (!c->peers)
		return -ENOMEM;
	for (i = 0; i < c->nr_peers; i++) {
		const config_setting_t *p = config_setting_get_elem(list, i);
		struct config_peer *cp = &c->peers[i];
		char addr[256] = "", mode[32] = "async";

		if (!config_setting_is_group(p))
			return cfg_fail(x, p, "peers: each peer is a group { name = ...; }");
		r = cfg_check_keys(x, p, peer_keys, " in a peer");
		if (r < 0)
			return r;
		r = cfg_string(x, p, "name", true, cp->name, sizeof(cp->name));
		if (r < 0)
			return r;
		if (!config_name_valid(cp->name))
			return cfg_fail(x, p, "peer name '%s': 1-64 characters of A-Z a-z 0-9 . _ -",
					cp->name);
		if (!strcmp(cp->name, c->node))
			return cfg_fail(x, p, "peer '%s' has this node's name", cp->name);
		for (j = 0; j < i; j++)
			if (!strcmp(c->peers[j].name, cp->name))
				return cfg_fail(x, p, "peer '%s' listed twice", cp->name);
		r = cfg_string(x, p, "address", c->role == ROLE_PRIMARY, addr, sizeof(addr));
		if (r < 0)
			return r;
		if (r > 0) {
			/*
			 * Without a port, the default one: the address serves
			 * both ways, to connect to the peer (a primary, or a
			 * secondary promoted) and to check where it connects
			 * from (a secondary: the host only).
			 */
			char tmp[272];
			const char *v6end = addr[0] == '[' ? strchr(addr, ']') : NULL;

			if ((!v6end && !strchr(addr, ':')) || (v6end && !v6end[1]))
				snprintf(tmp, sizeof(tmp), "%s:%u", addr, CONFIG_DEFAULT_PORT);
			else
				snprintf(tmp, sizeof(tmp), "%s", addr);
			if (config_addr_parse(tmp, false, &cp->address) < 0)
				return cfg_fail(x, p, "peer '%s': bad address '%s' (host:port)",
						cp->name, addr);
			snprintf(cp->address.text, sizeof(cp->address.text), "%s", addr);
			cp->has_address = true;
		}
		r = cfg_string(x, p, "mode", false, mode, sizeof(mode));
		if (r < 0)
			return r;
		if (config_mode_parse(mode, &cp->mode) < 0)
			return cfg_fail(x, p, "peer '%s': mode '%s': expected async, semi-sync or sync",
					cp->name, mode);
		r = cfg_peer_wan(x, p, cp);
		if (r < 0)
			return r;
	}
	return 0;
}

const char *config_transport_name(enum transport t)
{
	switch (t) {
	case TRANSPORT_TLS_CERT:
		return "tls-certificate";
	case TRANSPORT_TLS_PSK:
		return "tls-psk";
	case TRANSPORT_PLAIN:
		return "plain-insecure";
	}
	return "?";
}

/*
 * transport = "tls" (the default) wants either tls-psk-file or all of
 * tls-ca, tls-cert and tls-key; "plain-insecure" wants none of them.  The
 * files themselves are read (and their permissions checked) when repld
 * sets up TLS.
 */
static int cfg_transport(struct cfg_ctx *x, const config_setting_t *root, struct config *c)
{
	static const char *const keys[] = { "tls-ca", "tls-cert", "tls-key", "tls-psk-file" };
	char *const vals[] = { c->tls_ca, c->tls_cert, c->tls_key, c->tls_psk_file };
	const config_setting_t *k = config_setting_get_member(root, "tls-ktls");
	char t[32] = "tls";
	unsigned int i, certs = 0;
	int r, suites;

	if (k && config_setting_type(k) != CONFIG_TYPE_BOOL)
		return cfg_fail(x, k, "tls-ktls: expected true or false");
	c->tls_ktls = !k || config_setting_get_bool(k);
	if ((r = cfg_string(x, root, "transport", false, t, sizeof(t))) < 0)
		return r;
	suites = cfg_string(x, root, "tls-ciphersuites", false, c->tls_ciphersuites,
			    sizeof(c->tls_ciphersuites));
	if (suites < 0)
		return suites;
	/* OpenSSL's suite names, colon separated; OpenSSL checks the names */
	if (suites > 0 && (!c->tls_ciphersuites[0] ||
		      strspn(c->tls_ciphersuites, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_:") !=
		      strlen(c->tls_ciphersuites)))
		return cfg_fail(x, config_setting_get_member(root, "tls-ciphersuites"),
				"tls-ciphersuites: expected TLS 1.3 suite names separated by ':', e.g. TLS_AES_128_GCM_SHA256:TLS_CHACHA20_POLY1305_SHA256");
	if (suites == 0)
		snprintf(c->tls_ciphersuites, sizeof(c->tls_ciphersuites), "%s",
			 CONFIG_TLS_CIPHERSUITES);
	for (i = 0; i < 4; i++) {
		if ((r = cfg_string(x, root, keys[i], false, vals[i], PATH_MAX)) < 0)
			return r;
		if (r > 0 && vals[i][0] != '/')
			return cfg_fail(x, config_setting_get_member(root, keys[i]),
					"%s: expected an absolute path", keys[i]);
		certs += i < 3 && r > 0;
	}
	if (!strcmp(t, "plain-insecure")) {
		c->transport = TRANSPORT_PLAIN;
		if (certs || c->tls_psk_file[0] || suites > 0)
			return cfg_fail(x, config_setting_get_member(root, "transport"),
					"transport = \"plain-insecure\" with tls-* settings: remove one or the other");
		return 0;
	}
	if (strcmp(t, "tls"))
		return cfg_fail(x, config_setting_get_member(root, "transport"),
				"transport '%s': expected tls or plain-insecure", t);
	if (c->tls_psk_file[0] && certs)
		return cfg_fail(x, root,
				"tls-psk-file and tls-ca/tls-cert/tls-key: choose one way to authenticate peers");
	if (c->tls_psk_file[0]) {
		c->transport = TRANSPORT_TLS_PSK;
		return 0;
	}
	if (certs == 3) {
		c->transport = TRANSPORT_TLS_CERT;
		return 0;
	}
	if (certs)
		return cfg_fail(x, root, "TLS with certificates needs all of tls-ca, tls-cert and tls-key");
	return cfg_fail(x, root,
			"no transport security: set tls-psk-file, or tls-ca, tls-cert and tls-key (TLS 1.3); for plain TCP set transport = \"plain-insecure\"");
}

/*
 * fence-peer: an absolute path to an executable regular file, checked
 * now, so that a typo shows at "repld -t" or at a reload rather than when
 * a peer is lost.  The program runs as repld's user: root.
 */
static int cfg_fence_peer(struct cfg_ctx *x, const config_setting_t *root, struct config *c)
{
	const config_setting_t *s = config_setting_get_member(root, "fence-peer");
	struct stat st;
	int r;

	c->fence_peer_timeout_ms = 60000;
	if ((r = cfg_uint(x, root, "fence-peer-timeout-ms", 100, 3600000,
			  &c->fence_peer_timeout_ms)) < 0)
		return r;
	if ((r = cfg_string(x, root, "fence-peer", false, c->fence_peer,
			    sizeof(c->fence_peer))) <= 0)
		return r;
	if (c->fence_peer[0] != '/')
		return cfg_fail(x, s, "fence-peer: expected an absolute path, not '%s'",
				c->fence_peer);
	if (stat(c->fence_peer, &st) < 0)
		return cfg_fail(x, s, "fence-peer: %s: %s", c->fence_peer, strerror(errno));
	if (!S_ISREG(st.st_mode))
		return cfg_fail(x, s, "fence-peer: %s is not a regular file", c->fence_peer);
	if (access(c->fence_peer, X_OK) < 0)
		return cfg_fail(x, s, "fence-peer: %s is not executable: %s", c->fence_peer,
				strerror(errno));
	return 0;
}

static int cfg_parse(struct cfg_ctx *x, const config_setting_t *root, struct config *c)
{
	char role[32] = "", listen[256] = "", loss[32] = "degrade", group[64] = "";
	int r;

	r = cfg_check_keys(x, root, root_keys, "");
	if (r < 0)
		return r;
	if ((r = cfg_string(x, root, "resource", true, c->resource, sizeof(c->resource))) < 0)
		return r;
	if (!config_name_valid(c->resource))
		return cfg_fail(x, root, "resource '%s': 1-64 characters of A-Z a-z 0-9 . _ -",
				c->resource);
	strcpy(c->dm_name, c->resource);
	if ((r = cfg_string(x, root, "dm-name", false, c->dm_name, sizeof(c->dm_name))) < 0)
		return r;
	if (!config_name_valid(c->dm_name) || strlen(c->dm_name) > 63)
		return cfg_fail(x, config_setting_get_member(root, "dm-name") ?
				config_setting_get_member(root, "dm-name") : root,
				"dm-name '%s': 1-63 characters of A-Z a-z 0-9 . _ - (the metadata holds the name)",
				c->dm_name);
	if ((r = cfg_string(x, root, "node", true, c->node, sizeof(c->node))) < 0)
		return r;
	if (!config_name_valid(c->node))
		return cfg_fail(x, root, "node '%s': 1-64 characters of A-Z a-z 0-9 . _ -", c->node);
	/* the role at the first start; without one, secondary */
	if ((r = cfg_string(x, root, "role", false, role, sizeof(role))) < 0)
		return r;
	c->has_role = r > 0;
	if (!c->has_role || !strcmp(role, "secondary"))
		c->role = ROLE_SECONDARY;
	else if (!strcmp(role, "primary"))
		c->role = ROLE_PRIMARY;
	else
		return cfg_fail(x, config_setting_get_member(root, "role"),
				"role '%s': expected primary or secondary", role);
	if ((r = cfg_string(x, root, "device", true, c->device, sizeof(c->device))) < 0)
		return r;
	if (c->device[0] != '/')
		return cfg_fail(x, config_setting_get_member(root, "device"),
				"device: expected an absolute path");
	strcpy(c->meta_device, "-");
	if ((r = cfg_string(x, root, "meta-device", false, c->meta_device,
			    sizeof(c->meta_device))) < 0)
		return r;
	if (strcmp(c->meta_device, "-") && c->meta_device[0] != '/')
		return cfg_fail(x, config_setting_get_member(root, "meta-device"),
				"meta-device: expected an absolute path or \"-\"");
	if ((r = cfg_string(x, root, "resync-snapshot", false, c->resync_snapshot,
			    sizeof(c->resync_snapshot))) < 0)
		return r;
	if (c->resync_snapshot[0] && c->resync_snapshot[0] != '/')
		return cfg_fail(x, config_setting_get_member(root, "resync-snapshot"),
				"resync-snapshot: expected the absolute path of a device for the snapshot's copy-on-write store");
	if ((r = cfg_string(x, root, "listen", false, listen, sizeof(listen))) < 0)
		return r;
	if (r > 0) {
		if (config_addr_parse(listen, true, &c->listen) < 0)
			return cfg_fail(x, config_setting_get_member(root, "listen"),
					"listen: bad address '%s' (host:port, [v6]:port or port)",
					listen);
	} else {
		char port[8];

		snprintf(port, sizeof(port), "%u", CONFIG_DEFAULT_PORT);
		if (config_addr_parse(port, true, &c->listen) < 0)
			return cfg_fail(x, root, "listen: no address to listen on by default (port %s)",
					port);
		c->listen_default = true;
	}
	snprintf(c->state_dir, sizeof(c->state_dir), "/var/lib/dm-repl");
	if ((r = cfg_string(x, root, "state-dir", false, c->state_dir, sizeof(c->state_dir))) < 0)
		return r;
	snprintf(c->control_socket, sizeof(c->control_socket), "/run/dm-repl/%s.sock",
		 c->resource);
	if ((r = cfg_string(x, root, "control-socket", false, c->control_socket,
			    sizeof(c->control_socket))) < 0)
		return r;
	if ((r = cfg_string(x, root, "control-group", false, group, sizeof(group))) < 0)
		return r;
	if (group[0]) {
		const struct group *g = getgrnam(group);

		if (!g)
			return cfg_fail(x, config_setting_get_member(root, "control-group"),
					"control-group: no group \"%s\" on this system", group);
		c->has_control_group = true;
		c->control_group = g->gr_gid;
	}

	c->ring_size_mb = 64;
	c->hold_timeout_ms = 5000;
	c->region_kb = 64;
	c->max_extents = DM_REPL_DEFAULT_MAX_EXTENTS;
	c->record_kb = DM_REPL_DEFAULT_RECORD_KB;
	c->keepalive_ms = 1000;
	c->resync_min_rate_mb = CONFIG_RESYNC_MIN_RATE_MB;
	c->peer_timeout_ms = 5000;
	c->reconnect_min_ms = 100;
	c->reconnect_max_ms = 5000;
	c->checkpoint_ms = 1000;
	c->drain_timeout_ms = 10000;
	c->congestion_fill_pct = 50;
	if ((r = cfg_uint(x, root, "ring-size-mb", 4, 4096, &c->ring_size_mb)) < 0 ||
	    (r = cfg_uint(x, root, "hold-timeout-ms", 1, 60000, &c->hold_timeout_ms)) < 0 ||
	    (r = cfg_uint_pow2(x, root, "region-kb", 4, 1048576, &c->region_kb)) < 0 ||
	    (r = cfg_uint(x, root, "extent-kb", 4, 1048576, &c->extent_kb)) < 0 ||
	    (r = cfg_uint(x, root, "max-extents", 1, 16777216, &c->max_extents)) < 0 ||
	    (r = cfg_uint_pow2(x, root, "record-kb", DM_REPL_MIN_RECORD_KB,
			       DM_REPL_MAX_RECORD_KB, &c->record_kb)) < 0 ||
	    (r = cfg_uint(x, root, "keepalive-ms", 50, 60000, &c->keepalive_ms)) < 0 ||
	    (r = cfg_uint(x, root, "congestion-fill-pct", 0, 99, &c->congestion_fill_pct)) < 0 ||
	    (r = cfg_uint(x, root, "peer-timeout-ms", 100, 600000, &c->peer_timeout_ms)) < 0 ||
	    (r = cfg_uint(x, root, "reconnect-min-ms", 10, 60000, &c->reconnect_min_ms)) < 0 ||
	    (r = cfg_uint(x, root, "reconnect-max-ms", 10, 600000, &c->reconnect_max_ms)) < 0 ||
	    (r = cfg_uint(x, root, "checkpoint-ms", 10, 600000, &c->checkpoint_ms)) < 0 ||
	    (r = cfg_uint(x, root, "drain-timeout-ms", 0, 600000, &c->drain_timeout_ms)) < 0 ||
	    (r = cfg_uint(x, root, "resync-rate-mb", 0, 100000, &c->resync_rate_mb)) < 0 ||
	    (r = cfg_uint(x, root, "resync-min-rate-mb", 1, 100000, &c->resync_min_rate_mb)) < 0)
		return r;
	if (!c->extent_kb)
		c->extent_kb = c->region_kb > DM_REPL_DEFAULT_EXTENT_KB ? c->region_kb :
			       DM_REPL_DEFAULT_EXTENT_KB;
	if ((c->extent_kb & (c->extent_kb - 1)) || c->extent_kb < c->region_kb ||
	    c->extent_kb / c->region_kb > DM_REPL_MAX_EXTENT_REGIONS)
		return cfg_fail(x, config_setting_get_member(root, "extent-kb"),
				"extent-kb: must be a power of 2, from region-kb to 32768 regions");
	if (c->reconnect_max_ms < c->reconnect_min_ms)
		return cfg_fail(x, root, "reconnect-max-ms is below reconnect-min-ms");
	if (c->peer_timeout_ms <= c->keepalive_ms)
		return cfg_fail(x, root, "peer-timeout-ms must exceed keepalive-ms");
	if ((r = cfg_string(x, root, "on-peer-loss", false, loss, sizeof(loss))) < 0)
		return r;
	if (!strcmp(loss, "degrade"))
		c->on_peer_loss = LOSS_DEGRADE;
	else if (!strcmp(loss, "block"))
		c->on_peer_loss = LOSS_BLOCK;
	else
		return cfg_fail(x, config_setting_get_member(root, "on-peer-loss"),
				"on-peer-loss '%s': expected degrade or block", loss);
	{
		const config_setting_t *b = config_setting_get_member(root, "resync-checksums");
		char init[16] = "full";

		if (b && config_setting_type(b) != CONFIG_TYPE_BOOL)
			return cfg_fail(x, b, "resync-checksums: expected true or false");
		c->resync_checksums = b && config_setting_get_bool(b);
		if ((r = cfg_string(x, root, "initial-sync", false, init, sizeof(init))) < 0)
			return r;
		if (!strcmp(init, "skip"))
			c->skip_initial_sync = true;
		else if (strcmp(init, "full"))
			return cfg_fail(x, config_setting_get_member(root, "initial-sync"),
					"initial-sync '%s': expected full or skip", init);
	}
	{
		char asb[32] = "disconnect";

		if ((r = cfg_string(x, root, "after-split-brain", false, asb, sizeof(asb))) < 0)
			return r;
		if (!strcmp(asb, "disconnect"))
			c->after_split_brain = ASB_DISCONNECT;
		else if (!strcmp(asb, "discard-younger-primary"))
			c->after_split_brain = ASB_DISCARD_YOUNGER;
		else if (!strcmp(asb, "discard-least-changes"))
			c->after_split_brain = ASB_DISCARD_LEAST;
		else
			return cfg_fail(x, config_setting_get_member(root, "after-split-brain"),
					"after-split-brain '%s': expected disconnect, discard-younger-primary or discard-least-changes",
					asb);
	}
	if ((r = cfg_fence_peer(x, root, c)) < 0)
		return r;
	if ((r = cfg_peers(x, root, c)) < 0)
		return r;
	return cfg_transport(x, root, c);
}

int config_load(const char *path, struct config **ret, char *err, size_t errlen)
{
	struct cfg_ctx x = { .path = path, .err = err, .errlen = errlen };
	struct config *c;
	config_t lc;
	int r;

	if (strlen(path) >= sizeof(c->path)) {
		snprintf(err, errlen, "%s: path too long", path);
		return -ENAMETOOLONG;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	strcpy(c->path, path);
	config_init(&lc);
	if (config_read_file(&lc, path) != CONFIG_TRUE) {
		if (config_error_type(&lc) == CONFIG_ERR_FILE_IO) {
			r = errno ? -errno : -EIO;
			snprintf(err, errlen, "%s: cannot read: %s", path, strerror(-r));
		} else {
			r = -EINVAL;
			snprintf(err, errlen, "%s:%d: %s", path, config_error_line(&lc),
				 config_error_text(&lc));
		}
		goto out;
	}
	r = cfg_parse(&x, config_root_setting(&lc), c);
out:
	config_destroy(&lc);
	if (r < 0) {
		config_free(c);
		return r;
	}
	*ret = c;
	return 0;
}

int config_read_device(const char *path, char *resource, size_t rlen, char *device,
		       size_t dlen)
{
	const char *res, *dev;
	config_t lc;
	int r = -EINVAL;

	config_init(&lc);
	if (config_read_file(&lc, path) == CONFIG_TRUE &&
	    config_lookup_string(&lc, "resource", &res) == CONFIG_TRUE &&
	    config_lookup_string(&lc, "device", &dev) == CONFIG_TRUE) {
		r = 0;
		if ((size_t)snprintf(resource, rlen, "%s", res) >= rlen ||
		    (size_t)snprintf(device, dlen, "%s", dev) >= dlen)
			r = -ENAMETOOLONG;
	}
	config_destroy(&lc);
	return r;
}

void config_free(struct config *c)
{
	if (!c)
		return;
	free(c->peers);
	free(c);
}

void config_freep(struct config **c)
{
	config_free(*c);
}

int config_path(const char *resource, char *buf, size_t len)
{
	if (!config_name_valid(resource))
		return -EINVAL;
	if ((size_t)snprintf(buf, len, "%s/%s.conf", CONFIG_DIR, resource) >= len)
		return -ENAMETOOLONG;
	return 0;
}

const struct config_peer *config_find_peer(const struct config *c, const char *name)
{
	unsigned int i;

	for (i = 0; i < c->nr_peers; i++)
		if (!strcmp(c->peers[i].name, name))
			return &c->peers[i];
	return NULL;
}
