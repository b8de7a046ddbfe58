// SPDX-License-Identifier: GPL-2.0-only
/*
 * Unit test of the configuration's peer addresses (config.c): without a
 * port an address means CONFIG_DEFAULT_PORT on either role, so that a
 * secondary promoted by "replctl primary" connects where its primary's
 * node listens (before, a secondary read "192.0.2.1" as port 1); a port
 * given stays; IPv6 in brackets too.  Without role and listen, a node is
 * a secondary at its first start (repld keeps the role from then on) and
 * listens on any address at CONFIG_DEFAULT_PORT: the README's primary,
 * which names neither, can be demoted.  fence-peer must name an
 * executable regular file by its absolute path, or the file is refused
 * with a message that names the setting; fence-peer-timeout-ms has a
 * default and a range.  Through the settings table: every number is
 * refused just outside either bound and when it is not an integer,
 * booleans and choices for a wrong value or type, each message naming the
 * setting, the line and the range; without a setting its default; a value
 * changed is read into its field and is the only change a reload sees.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "config.h"

#include <linux/dm-repl.h>

static char dir[] = "/tmp/test-config-XXXXXX";

/* Write text to <dir>/name, with mode. */
static void write_file(const char *name, const char *text, mode_t mode)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	CHECK(f, "fopen %s", path);
	fputs(text, f);
	fclose(f);
	CHECK_RC(chmod(path, mode), 0);
}

/* Load the configuration of text (written to a file in dir): 0 or -errno, the reason in err. */
static int try_load(const char *text, struct config **c, char *err, size_t len)
{
	char path[4096];

	write_file("r0.conf", text, 0644);
	snprintf(path, sizeof(path), "%s/r0.conf", dir);
	return config_load(path, c, err, len);
}

/* The configuration of text, loaded. */
static struct config *load(const char *text)
{
	struct config *c = NULL;
	char err[512];
	int r = try_load(text, &c, err, sizeof(err));

	CHECK(r == 0, "%s", err);
	return c;
}

static unsigned int port(const struct config_addr *a)
{
	if (a->sa.ss_family == AF_INET6)
		return ntohs(((const struct sockaddr_in6 *)&a->sa)->sin6_port);
	return ntohs(((const struct sockaddr_in *)&a->sa)->sin_port);
}

/* The port of peer 0 of a configuration of role with that address. */
static unsigned int port_of(const char *role, const char *address)
{
	char text[512];
	struct config *c;
	unsigned int p;

	snprintf(text, sizeof(text),
		 "resource = \"r0\";\nnode = \"beta\";\nrole = \"%s\";\ndevice = \"/dev/null\";\n"
		 "listen = \"127.0.0.1:7789\";\ntransport = \"plain-insecure\";\n"
		 "peers = ( { name = \"alpha\"; address = \"%s\"; } );\n", role, address);
	c = load(text);
	CHECK(c->peers[0].has_address, "%s %s: no address", role, address);
	p = port(&c->peers[0].address);
	CHECK(!strcmp(c->peers[0].address.text, address), "text '%s'", c->peers[0].address.text);
	config_free(c);
	return p;
}

/* role and listen left out: secondary at first start, any address, 7789 */
static void defaults(void)
{
	struct config *c = load("resource = \"r0\";\nnode = \"alpha\";\ndevice = \"/dev/null\";\n"
				"transport = \"plain-insecure\";\n"
				"peers = ( { name = \"beta\"; address = \"192.0.2.2\"; } );\n");

	CHECK(!c->has_role && c->role == ROLE_SECONDARY, "role %d, has_role %d", c->role,
	      c->has_role);
	CHECK(c->listen_default, "listen not the default one");
	CHECK(port(&c->listen) == CONFIG_DEFAULT_PORT, "default listen port %u", port(&c->listen));
	config_free(c);
}

#define PRIMARY	"resource = \"r0\";\nnode = \"alpha\";\nrole = \"primary\";\n" \
		"device = \"/dev/null\";\ntransport = \"plain-insecure\";\n" \
		"peers = ( { name = \"beta\"; address = \"192.0.2.2\"; } );\n"

/* A primary's configuration with fence-peer = path (and more settings) is refused for why. */
static void fence_refused(const char *path, const char *more, const char *why)
{
	char text[8192], err[512] = "";
	struct config *c = NULL;

	snprintf(text, sizeof(text), PRIMARY "fence-peer = \"%s\";\n%s", path, more);
	CHECK_RC(try_load(text, &c, err, sizeof(err)), -EINVAL);
	CHECK(!c, "a configuration returned on failure");
	CHECK(strstr(err, why), "fence-peer = \"%s\": '%s', want '%s'", path, err, why);
}

/* fence-peer: an executable regular file, by its absolute path */
static void fence_peer(void)
{
	char exe[4096], plain[4096], text[8192];
	struct config *c;

	write_file("fence.sh", "#!/bin/sh\nexit 0\n", 0755);
	write_file("plain.sh", "#!/bin/sh\nexit 0\n", 0644);
	snprintf(exe, sizeof(exe), "%s/fence.sh", dir);
	snprintf(plain, sizeof(plain), "%s/plain.sh", dir);

	c = load(PRIMARY);
	CHECK(!c->fence_peer[0], "fence-peer '%s' without the setting", c->fence_peer);
	CHECK(c->fence_peer_timeout_ms == 60000, "default timeout %u", c->fence_peer_timeout_ms);
	config_free(c);

	snprintf(text, sizeof(text), PRIMARY "fence-peer = \"%s\";\nfence-peer-timeout-ms = 2500;\n",
		 exe);
	c = load(text);
	CHECK(!strcmp(c->fence_peer, exe), "fence-peer '%s'", c->fence_peer);
	CHECK(c->fence_peer_timeout_ms == 2500, "timeout %u", c->fence_peer_timeout_ms);
	config_free(c);

	fence_refused("fence.sh", "", "fence-peer: expected an absolute path");
	fence_refused("", "", "fence-peer: expected an absolute path");
	fence_refused(plain, "", "fence-peer: ");
	fence_refused(plain, "", "is not executable");
	fence_refused(dir, "", "is not a regular file");
	fence_refused("/nonexistent/fence", "", "fence-peer: /nonexistent/fence: No such file");
	fence_refused(exe, "fence-peer-timeout-ms = 99;\n", "fence-peer-timeout-ms: 99 is out of range");
	fence_refused(exe, "fence-peer-timeout-ms = 3600001;\n", "out of range 100..3600000");
	unlink(exe);
	unlink(plain);
}

/* A primary whose peer beta has the settings peer (inside its group). */
static int peer_try(const char *peer, struct config **c, char *err, size_t len)
{
	char text[8192];

	snprintf(text, sizeof(text),
		 "resource = \"r0\";\nnode = \"alpha\";\nrole = \"primary\";\n"
		 "device = \"/dev/null\";\ntransport = \"plain-insecure\";\n"
		 "peers = ( { name = \"beta\"; address = \"192.0.2.2\"; %s } );\n", peer);
	return try_load(text, c, err, len);
}

static void peer_refused(const char *peer, const char *why)
{
	struct config *c = NULL;
	char err[512] = "";

	CHECK_RC(peer_try(peer, &c, err, sizeof(err)), -EINVAL);
	CHECK(!c, "a configuration returned on failure");
	CHECK(strstr(err, why), "'%s': '%s', want '%s'", peer, err, why);
}

static void rate_is(const char *text, uint64_t want)
{
	uint64_t v = 0;
	int r = config_rate_parse(text, &v);

	CHECK(r == 0 && v == want, "rate '%s': %d, %llu, want %llu", text, r,
	      (unsigned long long)v, (unsigned long long)want);
}

/* compress, compress-level, rate-limit */
static void peer_wan(void)
{
	struct config *c = NULL;
	char err[512];
	uint64_t v;

	CHECK_RC(peer_try("", &c, err, sizeof(err)), 0);
	CHECK(c->resync_min_rate_mb == CONFIG_RESYNC_MIN_RATE_MB, "resync-min-rate-mb %u",
	      c->resync_min_rate_mb);
	CHECK(c->peers[0].compress == COMPRESS_NONE && c->peers[0].rate_limit == 0,
	      "defaults: compress %d, rate %llu", c->peers[0].compress,
	      (unsigned long long)c->peers[0].rate_limit);
	config_free(c);
	CHECK_RC(peer_try("compress = \"zstd\"; rate-limit = \"100mbit\";", &c, err,
			  sizeof(err)), 0);
	CHECK(c->peers[0].compress == COMPRESS_ZSTD &&
	      c->peers[0].compress_level == CONFIG_ZSTD_LEVEL_DEFAULT,
	      "zstd: %d level %d", c->peers[0].compress, c->peers[0].compress_level);
	CHECK(c->peers[0].rate_limit == 12500000, "100mbit: %llu",
	      (unsigned long long)c->peers[0].rate_limit);
	config_free(c);
	CHECK_RC(peer_try("compress = \"zstd\"; compress-level = 19; rate-limit = \"0\";", &c,
			  err, sizeof(err)), 0);
	CHECK(c->peers[0].compress_level == 19 && !c->peers[0].rate_limit, "level 19, rate 0");
	config_free(c);

	peer_refused("compress = \"lz4\";", "compress 'lz4': expected none or zstd");
	peer_refused("compress = \"zstd\"; compress-level = 20;", "compress-level: 20 is out of range 1..19");
	peer_refused("compress = \"zstd\"; compress-level = 0;", "out of range 1..19");
	peer_refused("compress-level = 3;", "compress-level without compress = \"zstd\"");
	peer_refused("rate-limit = \"100\";", "rate-limit '100': expected a number and a unit");
	peer_refused("rate-limit = \"fast\";", "expected a number and a unit");
	peer_refused("rate-limit = \"-5mbit\";", "expected a number and a unit");
	peer_refused("rate-limit = \"1.5mbit\";", "expected a number and a unit");
	peer_refused("rate-limit = 100;", "rate-limit: expected a string");
	peer_refused("rate-limit = \"1bit\";", "out of range 8kbit..400gbit");
	peer_refused("rate-limit = \"401gbit\";", "out of range");
	peer_refused("rate-limit = \"99999999999999999999999tbit\";", "out of range");

	rate_is("8kbit", 1000);
	rate_is("1mbit", 125000);
	rate_is("1MBit", 125000);
	rate_is("12mbps", 12000000);
	rate_is("10gbit", 1250000000);
	rate_is("1000bps", 1000);
	rate_is("50gbps", 50000000000ULL);
	CHECK_RC(config_rate_parse("51gbps", &v), -ERANGE);
	CHECK_RC(config_rate_parse("10 mbit", &v), -EINVAL);
	CHECK_RC(config_rate_parse("", &v), -EINVAL);
	CHECK_RC(config_rate_parse("mbit", &v), -EINVAL);
	CHECK_RC(config_rate_parse("18446744073709551615tbps", &v), -ERANGE);
	CHECK_RC(config_rate_parse("184467440737095516150bit", &v), -ERANGE);
}

/* The value of setting t in base (a struct config or config_peer), as stored. */
static unsigned int field(const struct config_setting *t, const void *base)
{
	const char *p = (const char *)base + t->offset;
	unsigned int v = 0;
	bool b;

	if (t->size == sizeof(bool)) {
		memcpy(&b, p, sizeof(b));
		return b;
	}
	memcpy(&v, p, sizeof(v));
	return v;
}

/* PRIMARY with one more line (line 7) at the top, or in beta's group */
static int table_try(bool peer, const char *line, struct config **c, char *err, size_t len)
{
	char text[8192];

	if (peer)
		return peer_try(line, c, err, len);
	snprintf(text, sizeof(text), PRIMARY "%s\n", line);
	return try_load(text, c, err, len);
}

/* line is refused with a message that has want and, at the top, line 7 */
static void table_refused(bool peer, const char *line, const char *want)
{
	struct config *c = NULL;
	char err[512] = "", at[64];

	CHECK_RC(table_try(peer, line, &c, err, sizeof(err)), -EINVAL);
	CHECK(!c, "a configuration returned on failure");
	CHECK(strstr(err, want), "'%s': '%s', want '%s'", line, err, want);
	snprintf(at, sizeof(at), "r0.conf:%d: ", peer ? 6 : 7);
	CHECK(strstr(err, at), "'%s': '%s' without the line (%s)", line, err, at);
}

/*
 * Every number of the tables refused just outside either bound, and
 * when it is not an integer; booleans and choices refused for a wrong
 * value and a wrong type; the messages name the setting and the range
 * or the choices.
 */
static void table_ranges(bool peer, const struct config_setting *table)
{
	const char *pre = peer ? "compress = \"zstd\"; " : "";
	const struct config_setting *t;
	char line[512], want[256];

	for (t = table; t->name; t++) {
		if (t->type == CONFIG_T_UINT || t->type == CONFIG_T_POW2) {
			snprintf(want, sizeof(want), "%s: %u is out of range %u..%u", t->name,
				 t->max + 1, t->min, t->max);
			snprintf(line, sizeof(line), "%s%s = %u;", pre, t->name, t->max + 1);
			table_refused(peer, line, want);
			if (t->min > 0) {
				snprintf(want, sizeof(want), "%s: %u is out of range %u..%u",
					 t->name, t->min - 1, t->min, t->max);
				snprintf(line, sizeof(line), "%s%s = %u;", pre, t->name, t->min - 1);
				table_refused(peer, line, want);
			}
			snprintf(want, sizeof(want), "%s: expected an integer in %u..%u", t->name,
				 t->min, t->max);
			snprintf(line, sizeof(line), "%s%s = \"%u\";", pre, t->name, t->def);
			table_refused(peer, line, want);
			if (t->type == CONFIG_T_POW2) {
				snprintf(want, sizeof(want), "%s: must be a power of 2", t->name);
				snprintf(line, sizeof(line), "%s%s = %u;", pre, t->name, t->min + 1);
				table_refused(peer, line, want);
			}
		} else if (t->type == CONFIG_T_BOOL) {
			snprintf(want, sizeof(want), "%s: expected true or false", t->name);
			snprintf(line, sizeof(line), "%s = 1;", t->name);
			table_refused(peer, line, want);
		} else if (t->type == CONFIG_T_CHOICE) {
			snprintf(want, sizeof(want), "%s 'bogus': expected %s", t->name,
				 t->choices[0]);
			snprintf(line, sizeof(line), "%s = \"bogus\";", t->name);
			table_refused(peer, line, want);
			snprintf(want, sizeof(want), "%s: expected a string: %s", t->name,
				 t->choices[0]);
			snprintf(line, sizeof(line), "%s = 1;", t->name);
			table_refused(peer, line, want);
		}
	}
}

/* Without the settings, the table's defaults. */
static void table_defaults(void)
{
	const struct config_setting *t;
	struct config *c = load(PRIMARY);

	for (t = config_settings; t->name; t++) {
		if (t->type == CONFIG_T_STRING || t->type == CONFIG_T_LIST)
			continue;
		if (!strcmp(t->name, "extent-kb"))	/* 0: derived from region-kb */
			CHECK(c->extent_kb == DM_REPL_DEFAULT_EXTENT_KB, "extent-kb %u",
			      c->extent_kb);
		else
			CHECK(field(t, c) == t->def, "%s: %u, default %u", t->name, field(t, c),
			      t->def);
	}
	for (t = config_peer_settings; t->name; t++)
		if (t->type != CONFIG_T_STRING)
			CHECK(field(t, &c->peers[0]) == t->def, "peer %s: %u, default %u",
			      t->name, field(t, &c->peers[0]), t->def);
	CHECK(c->hold_timeout_ms == 5000 && c->ring_size_mb == 64 && c->on_peer_loss == LOSS_DEGRADE &&
	      c->tls_ktls && !c->resync_checksums && !c->skip_initial_sync,
	      "the documented defaults");
	config_free(c);
}

/* Another valid value for t than its default: one that no other check refuses. */
static void table_other(const struct config_setting *t, char *buf, size_t len)
{
	unsigned int v = t->def;

	if (t->type == CONFIG_T_BOOL)
		snprintf(buf, len, "%s = %s;", t->name, v ? "false" : "true");
	else if (t->type == CONFIG_T_CHOICE)
		snprintf(buf, len, "%s = \"%s\";", t->name,
			 t->choices[v + 1] ? t->choices[v + 1] : t->choices[0]);
	else if (!strcmp(t->name, "extent-kb"))
		snprintf(buf, len, "%s = %u;", t->name, 2 * DM_REPL_DEFAULT_EXTENT_KB);
	else if (t->type == CONFIG_T_POW2)
		snprintf(buf, len, "%s = %u;", t->name, v * 2 <= t->max ? v * 2 : v / 2);
	else
		snprintf(buf, len, "%s = %u;", t->name, v + 1 <= t->max ? v + 1 : v - 1);
}

/*
 * Each setting of the tables set to another value: the value is read
 * into the table's field, and a reload's comparison finds that setting
 * changed and no other one.
 */
static void table_changes(bool peer, const struct config_setting *table)
{
	const char *pre = peer ? "compress = \"zstd\"; " : "";
	const struct config_setting *t, *u;
	struct config *a = NULL, *b = NULL;
	char line[512], other[256], err[512];

	CHECK_RC(table_try(peer, pre, &a, err, sizeof(err)), 0);
	for (t = table; t->name; t++) {
		const void *fa = peer ? (const void *)&a->peers[0] : a, *fb;

		if (t->type == CONFIG_T_STRING || t->type == CONFIG_T_LIST)
			continue;
		table_other(t, other, sizeof(other));
		/* the peer's base has compress = "zstd": none is the change */
		if (peer && !strcmp(t->name, "compress"))
			snprintf(line, sizeof(line), "compress = \"none\";");
		else
			snprintf(line, sizeof(line), "%s%s", pre, other);
		CHECK(table_try(peer, line, &b, err, sizeof(err)) == 0, "'%s': %s", line, err);
		fb = peer ? (const void *)&b->peers[0] : b;
		for (u = table; u->name; u++)
			CHECK(config_setting_changed(u, fa, fb) == (u == t),
			      "'%s': %s changed %d", line, u->name, config_setting_changed(u, fa, fb));
		config_free(b);
		b = NULL;
	}
	config_free(a);
}

int main(void)
{
	CHECK(mkdtemp(dir), "mkdtemp");
	CHECK(port_of("secondary", "192.0.2.1") == CONFIG_DEFAULT_PORT, "secondary, no port: %u",
	      port_of("secondary", "192.0.2.1"));
	CHECK(port_of("primary", "192.0.2.2") == CONFIG_DEFAULT_PORT, "primary, no port");
	CHECK(port_of("secondary", "192.0.2.1:7790") == 7790, "secondary, port 7790");
	CHECK(port_of("primary", "192.0.2.2:7791") == 7791, "primary, port 7791");
	CHECK(port_of("primary", "[2001:db8::1]") == CONFIG_DEFAULT_PORT, "IPv6, no port");
	CHECK(port_of("primary", "[2001:db8::1]:7792") == 7792, "IPv6, port 7792");
	defaults();
	fence_peer();
	peer_wan();
	table_ranges(false, config_settings);
	table_ranges(true, config_peer_settings);
	table_defaults();
	table_changes(false, config_settings);
	table_changes(true, config_peer_settings);
	{
		char path[4096];

		snprintf(path, sizeof(path), "%s/r0.conf", dir);
		unlink(path);
		rmdir(dir);
	}
	printf("config: peer addresses without a port mean %u, on either role; without role and listen, secondary listening on %u; fence-peer an executable file by its absolute path; compress and rate-limit per peer; every setting of the table at its default, refused outside its range and for a wrong type, compared alone by a reload: ok\n",
	       CONFIG_DEFAULT_PORT, CONFIG_DEFAULT_PORT);
	return 0;
}
