// SPDX-License-Identifier: GPL-2.0-only
/*
 * Unit test of the configuration's peer addresses (config.c): without a
 * port an address means CONFIG_DEFAULT_PORT on either role, so that a
 * secondary promoted by "replctl primary" connects where its primary's
 * node listens (before, a secondary read "192.0.2.1" as port 1); a port
 * given stays; IPv6 in brackets too.  Without role and listen, a node is
 * a secondary at its first start (repld keeps the role from then on) and
 * listens on any address at CONFIG_DEFAULT_PORT: the README's primary,
 * which names neither, can be demoted.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "config.h"

static char dir[] = "/tmp/test-config-XXXXXX";

/* The configuration of text (written to a file in dir), loaded. */
static struct config *load(const char *text)
{
	char path[4096], err[512];
	struct config *c = NULL;
	FILE *f;

	snprintf(path, sizeof(path), "%s/r0.conf", dir);
	f = fopen(path, "w");
	CHECK(f, "fopen");
	fputs(text, f);
	fclose(f);
	CHECK_RC(config_load(path, &c, err, sizeof(err)), 0);
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
	{
		char path[4096];

		snprintf(path, sizeof(path), "%s/r0.conf", dir);
		unlink(path);
		rmdir(dir);
	}
	printf("config: peer addresses without a port mean %u, on either role; without role and listen, secondary listening on %u: ok\n",
	       CONFIG_DEFAULT_PORT, CONFIG_DEFAULT_PORT);
	return 0;
}
