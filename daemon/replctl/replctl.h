/* SPDX-License-Identifier: GPL-2.0-only */
/* replctl's verbs: one table, from which help, usage errors and completion come. */
#ifndef REPLCTL_REPLCTL_H
#define REPLCTL_REPLCTL_H

#include <stdbool.h>

#include "client.h"

struct replctl_verb {
	const char *name;
	const char *args;	/* synopsis of the arguments after the verb */
	const char *help;	/* one line */
	int (*fn)(const struct client_opts *opt, int argc, char **argv);
	const char *ctl;	/* the control command it sends repld (ctl-commands.h), or NULL */
	bool hidden;		/* not in help, man page or completion */
};

/* Every verb, ending with a { NULL } entry. */
extern const struct replctl_verb replctl_verbs[];

/* The verb called name, or NULL. */
const struct replctl_verb *replctl_find(const char *name);

/* The command line: 0 or a negative errno. */
int replctl_run(int argc, char **argv);

#endif
