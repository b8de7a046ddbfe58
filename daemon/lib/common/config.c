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
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <libconfig.h>

#include <linux/dm-repl.h>

#include "config.h"
#include "macro.h"

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

/* a peer's mode and compress settings: the choices, in the enums' order */
static const char *const config_mode_names[] = {
	[MODE_ASYNC] = "async",
	[MODE_SEMI_SYNC] = "semi-sync",
	[MODE_SYNC] = "sync",
	NULL,
};
static const char *const config_compress_names[] = {
	[COMPRESS_NONE] = "none",
	[COMPRESS_ZSTD] = "zstd",
	NULL,
};

const char *config_mode_name(enum peer_mode mode)
{
	return NAME_OF(config_mode_names, mode);
}

int config_mode_parse(const char *s, enum peer_mode *ret)
{
	for (size_t i = 0; config_mode_names[i]; i++)
		if (!strcmp(s, config_mode_names[i])) {
			*ret = (enum peer_mode)i;
			return 0;
		}
	return -EINVAL;
}

const char *config_compress_name(enum peer_compress c)
{
	return NAME_OF(config_compress_names, c);
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

/*
 * The settings of repl.conf(5), in the manual's order: the reader checks
 * names against these tables, gives the defaults and checks the ranges of
 * the numbers, booleans and choices from them; a reload compares through
 * them.  Strings are checked by the code that reads them (cfg_names,
 * cfg_paths, cfg_transport, cfg_fence_peer, cfg_peer_*).
 */
#define CF(f)		offsetof(struct config, f), sizeof(((struct config *)0)->f), CONFIG_CMP_BYTES
#define CT(f)		offsetof(struct config, f), sizeof(((struct config *)0)->f), CONFIG_CMP_TEXT
#define PF(f)		offsetof(struct config_peer, f), sizeof(((struct config_peer *)0)->f), CONFIG_CMP_BYTES
#define NOF		0, 0, CONFIG_CMP_NONE
#define UINT(lo, hi, d)	CONFIG_T_UINT, lo, hi, d, NULL
#define POW2(lo, hi, d)	CONFIG_T_POW2, lo, hi, d, NULL
#define BOOL(d)		CONFIG_T_BOOL, 0, 1, d, NULL
#define CHOICE(d, ...)	CONFIG_T_CHOICE, 0, 0, d, (const char *const[]){ __VA_ARGS__, NULL }
#define CHOICES(d, names) CONFIG_T_CHOICE, 0, 0, d, names
#define STR		CONFIG_T_STRING, 0, 0, 0, NULL
#define LIVE		CONFIG_RELOAD_LIVE
#define RESTART		CONFIG_RELOAD_RESTART
#define NEVER		CONFIG_RELOAD_NEVER

const struct config_setting config_settings[] = {
	{ "resource", STR, CT(resource), NEVER },
	{ "node", STR, CT(node), NEVER },
	/* repl.conf's role is the first start's only: never compared */
	{ "role", STR, NOF, LIVE },
	{ "device", STR, CT(device), NEVER },
	{ "dm-name", STR, CT(dm_name), RESTART },
	{ "meta-device", STR, CT(meta_device), RESTART },
	{ "resync-snapshot", STR, CT(resync_snapshot), LIVE },
	{ "listen", STR, CT(listen.text), RESTART },
	{ "state-dir", STR, CT(state_dir), RESTART },
	{ "control-socket", STR, CT(control_socket), RESTART },
	{ "control-group", STR, CF(control_group), RESTART },
	{ "ring-size-mb", UINT(4, 4096, 64), CF(ring_size_mb), RESTART },
	{ "hold-timeout-ms", UINT(1, 60000, 5000), CF(hold_timeout_ms), LIVE },
	{ "region-kb", POW2(4, 1048576, 64), CF(region_kb), RESTART },
	/* 0: the default, region-kb or DM_REPL_DEFAULT_EXTENT_KB */
	{ "extent-kb", UINT(4, 1048576, 0), CF(extent_kb), RESTART },
	{ "max-extents", UINT(1, 16777216, DM_REPL_DEFAULT_MAX_EXTENTS), CF(max_extents), RESTART },
	{ "record-kb", POW2(DM_REPL_MIN_RECORD_KB, DM_REPL_MAX_RECORD_KB, DM_REPL_DEFAULT_RECORD_KB),
	  CF(record_kb), RESTART },
	{ "on-peer-loss", CHOICE(LOSS_DEGRADE, "degrade", "block"), CF(on_peer_loss), LIVE },
	{ "keepalive-ms", UINT(50, 60000, 1000), CF(keepalive_ms), LIVE },
	{ "congestion-fill-pct", UINT(0, 99, 50), CF(congestion_fill_pct), LIVE },
	{ "peer-timeout-ms", UINT(100, 600000, 5000), CF(peer_timeout_ms), LIVE },
	{ "reconnect-min-ms", UINT(10, 60000, 100), CF(reconnect_min_ms), LIVE },
	{ "reconnect-max-ms", UINT(10, 600000, 5000), CF(reconnect_max_ms), LIVE },
	{ "checkpoint-ms", UINT(10, 600000, 1000), CF(checkpoint_ms), LIVE },
	{ "drain-timeout-ms", UINT(0, 600000, 10000), CF(drain_timeout_ms), LIVE },
	{ "resync-checksums", BOOL(false), CF(resync_checksums), LIVE },
	{ "resync-rate-mb", UINT(0, 100000, 0), CF(resync_rate_mb), LIVE },
	{ "resync-min-rate-mb", UINT(1, 100000, CONFIG_RESYNC_MIN_RATE_MB), CF(resync_min_rate_mb),
	  LIVE },
	{ "initial-sync", CHOICE(0, "full", "skip"), CF(skip_initial_sync), LIVE },
	{ "after-split-brain", CHOICE(ASB_DISCONNECT, "disconnect", "discard-younger-primary",
				      "discard-least-changes"), CF(after_split_brain), LIVE },
	{ "transport", STR, CF(transport), LIVE },
	{ "tls-ca", STR, CT(tls_ca), LIVE },
	{ "tls-cert", STR, CT(tls_cert), LIVE },
	{ "tls-key", STR, CT(tls_key), LIVE },
	{ "tls-psk-file", STR, CT(tls_psk_file), LIVE },
	{ "tls-ktls", BOOL(true), CF(tls_ktls), LIVE },
	{ "tls-ciphersuites", STR, CT(tls_ciphersuites), LIVE },
	{ "fence-peer", STR, CT(fence_peer), LIVE },
	{ "fence-peer-timeout-ms", UINT(100, 3600000, 60000), CF(fence_peer_timeout_ms), LIVE },
	/* peers added, removed and changed by the role's reload */
	{ "peers", CONFIG_T_LIST, 0, 0, 0, NULL, NOF, LIVE },
	{ .name = NULL },
};

/* in each group of peers; the role's reload applies them */
const struct config_setting config_peer_settings[] = {
	{ "name", STR, NOF, LIVE },
	{ "address", STR, NOF, LIVE },
	{ "mode", CHOICES(MODE_ASYNC, config_mode_names), PF(mode), LIVE },
	{ "compress", CHOICES(COMPRESS_NONE, config_compress_names), PF(compress), LIVE },
	{ "compress-level", UINT(1, CONFIG_ZSTD_LEVEL_MAX, CONFIG_ZSTD_LEVEL_DEFAULT),
	  PF(compress_level), LIVE },
	{ "rate-limit", STR, NOF, LIVE },
	{ .name = NULL },
};

#undef CF
#undef CT
#undef PF
#undef NOF
#undef UINT
#undef POW2
#undef BOOL
#undef CHOICE
#undef CHOICES
#undef STR
#undef LIVE
#undef RESTART
#undef NEVER

const struct config_setting *config_setting_find(const struct config_setting *table,
						 const char *name)
{
	for (; table->name; table++)
		if (!strcmp(table->name, name))
			return table;
	return NULL;
}

bool config_setting_changed(const struct config_setting *t, const void *a, const void *b)
{
	const char *pa = (const char *)a + t->offset, *pb = (const char *)b + t->offset;

	switch (t->cmp) {
	case CONFIG_CMP_NONE:
		return false;
	case CONFIG_CMP_TEXT:
		return strncmp(pa, pb, t->size) != 0;
	case CONFIG_CMP_BYTES:
		return memcmp(pa, pb, t->size) != 0;
	}
	return false;
}

/* "a, b or c" */
static void cfg_choices_text(const char *const *ch, char *buf, size_t len)
{
	size_t n = 0;
	unsigned int i;

	buf[0] = '\0';
	for (i = 0; ch[i]; i++)
		n += (size_t)snprintf(buf + n, n < len ? len - n : 0, "%s%s",
				      !i ? "" : ch[i + 1] ? ", " : " or ", ch[i]);
}

static void cfg_store(const struct config_setting *t, void *base, unsigned int v)
{
	char *p = (char *)base + t->offset;

	if (t->size == sizeof(bool)) {
		bool b = v != 0;

		memcpy(p, &b, sizeof(b));
	} else {
		memcpy(p, &v, sizeof(v));
	}
}

static int cfg_number(struct cfg_ctx *x, const config_setting_t *s,
		      const struct config_setting *t, const char *who, unsigned int *ret)
{
	long long v;

	if (config_setting_type(s) != CONFIG_TYPE_INT && config_setting_type(s) != CONFIG_TYPE_INT64)
		return cfg_fail(x, s, "%s%s: expected an integer in %u..%u", who, t->name, t->min,
				t->max);
	v = config_setting_get_int64(s);
	if (v < t->min || v > t->max)
		return cfg_fail(x, s, "%s%s: %lld is out of range %u..%u", who, t->name, v, t->min,
				t->max);
	if (t->type == CONFIG_T_POW2 && (v & (v - 1)))
		return cfg_fail(x, s, "%s%s: must be a power of 2 in %u..%u", who, t->name, t->min,
				t->max);
	*ret = (unsigned int)v;
	return 0;
}

static int cfg_choice(struct cfg_ctx *x, const config_setting_t *s,
		      const struct config_setting *t, const char *who, unsigned int *ret)
{
	const char *v = config_setting_get_string(s);
	char list[256];
	unsigned int i;

	cfg_choices_text(t->choices, list, sizeof(list));
	if (!v)
		return cfg_fail(x, s, "%s%s: expected a string: %s", who, t->name, list);
	for (i = 0; t->choices[i]; i++)
		if (!strcmp(v, t->choices[i])) {
			*ret = i;
			return 0;
		}
	return cfg_fail(x, s, "%s%s '%s': expected %s", who, t->name, v, list);
}

/*
 * The numbers, booleans and choices of a group into base (a struct config
 * or a struct config_peer): the table's default, or the value checked
 * against the table.  who prefixes the messages ("peer 'beta': ").
 */
static int cfg_values(struct cfg_ctx *x, const config_setting_t *group,
		      const struct config_setting *table, void *base, const char *who)
{
	const struct config_setting *t;
	int r = 0;

	for (t = table; t->name; t++) {
		const config_setting_t *s;
		unsigned int v = t->def;

		if (t->type == CONFIG_T_STRING || t->type == CONFIG_T_LIST)
			continue;
		s = config_setting_get_member(group, t->name);
		if (s && t->type == CONFIG_T_BOOL) {
			if (config_setting_type(s) != CONFIG_TYPE_BOOL)
				return cfg_fail(x, s, "%s%s: expected true or false", who, t->name);
			v = (unsigned int)config_setting_get_bool(s);
		} else if (s && t->type == CONFIG_T_CHOICE) {
			r = cfg_choice(x, s, t, who, &v);
		} else if (s) {
			r = cfg_number(x, s, t, who, &v);
		}
		if (r < 0)
			return r;
		cfg_store(t, base, v);
	}
	return 0;
}

static int cfg_check_keys(struct cfg_ctx *x, const config_setting_t *group,
			  const struct config_setting *table, const char *where)
{
	int i, n = config_setting_length(group);

	for (i = 0; i < n; i++) {
		const config_setting_t *s = config_setting_get_elem(group, (unsigned int)i);
		const char *name = config_setting_name(s);

		if (!name || !config_setting_find(table, name))
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

/* A peer's compress-level (the table read it) and rate-limit. */
static int cfg_peer_wan(struct cfg_ctx *x, const config_setting_t *p, struct config_peer *cp)
{
	const config_setting_t *lvl = config_setting_get_member(p, "compress-level");
	char rate[64] = "";
	int r;

	if (lvl && cp->compress == COMPRESS_NONE)
		return cfg_fail(x, lvl, "peer '%s': compress-level without compress = \"zstd\"",
				cp->name);
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
		char addr[256] = "", who[CONFIG_NAME_MAX + 16];

		if (!config_setting_is_group(p))
			return cfg_fail(x, p, "peers: each peer is a group { name = ...; }");
		r = cfg_check_keys(x, p, config_peer_settings, " in a peer");
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
		snprintf(who, sizeof(who), "peer '%s': ", cp->name);
		r = cfg_values(x, p, config_peer_settings, cp, who);
		if (r < 0)
			return r;
		r = cfg_peer_wan(x, p, cp);
		if (r < 0)
			return r;
	}
	return 0;
}

const char *config_transport_name(enum transport t)
{
	static const char *const names[] = {
		[TRANSPORT_TLS_CERT] = "tls-certificate",
		[TRANSPORT_TLS_PSK] = "tls-psk",
		[TRANSPORT_PLAIN] = "plain-insecure",
	};

	return NAME_OF(names, t);
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
	char t[32] = "tls";
	unsigned int i, certs = 0;
	int r, suites;

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

/* resource, dm-name, node and role */
static int cfg_names(struct cfg_ctx *x, const config_setting_t *root, struct config *c)
{
	char role[32] = "";
	int r;

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
	return 0;
}

/* device, meta-device, resync-snapshot: absolute paths ("-": no meta-device) */
static int cfg_devices(struct cfg_ctx *x, const config_setting_t *root, struct config *c)
{
	int r;

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
	return 0;
}

/* listen, state-dir, control-socket, control-group */
static int cfg_local(struct cfg_ctx *x, const config_setting_t *root, struct config *c)
{
	char listen[256] = "", group[64] = "";
	int r;

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
	return 0;
}

/* What one number says about another: extent-kb, reconnect-*, timeouts. */
static int cfg_relations(struct cfg_ctx *x, const config_setting_t *root, struct config *c)
{
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
	return 0;
}

static int cfg_parse(struct cfg_ctx *x, const config_setting_t *root, struct config *c)
{
	int r;

	if ((r = cfg_check_keys(x, root, config_settings, "")) < 0 ||
	    (r = cfg_names(x, root, c)) < 0 ||
	    (r = cfg_devices(x, root, c)) < 0 ||
	    (r = cfg_local(x, root, c)) < 0 ||
	    (r = cfg_values(x, root, config_settings, c, "")) < 0 ||
	    (r = cfg_relations(x, root, c)) < 0 ||
	    (r = cfg_fence_peer(x, root, c)) < 0 ||
	    (r = cfg_peers(x, root, c)) < 0)
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
