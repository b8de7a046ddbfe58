// SPDX-License-Identifier: GPL-2.0-only
/* replctl udev-below (udev.h). */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "client.h"
#include "config.h"
#include "udev.h"

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

int udev_below(const struct client_opts *opt, int argc, char **argv)
{
	(void)opt;
	char path[PATH_MAX], resource[CONFIG_NAME_MAX + 1], device[PATH_MAX];
	struct dirent *de;
	DIR *d;

	if (argc != 1 || argv[0][0] != '/') {
		return -CLIENT_EUSAGE;
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
