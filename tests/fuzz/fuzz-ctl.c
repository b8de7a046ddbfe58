// SPDX-License-Identifier: GPL-2.0-only
/*
 * Fuzz target for the control socket's request handling
 * (daemon/repld/ctl.c: ctl_answer()): the JSON parse, the lookup in the
 * command tables, the refusals and the read-only check.
 *
 * Input: the bytes a client sends, at most CTL_MAX_REQUEST of them, as the
 * socket takes them.  Each input is answered four times: as root and as a
 * member of the control group, by a primary's tables and by a
 * secondary's.  The tables are repld's (manager.c, primary/admin.c,
 * secondary/secondary.c): the same names and refusals, and handlers that
 * read the arguments the real ones read and then stop, touching nothing.
 *
 * Every reply must be an object with a boolean "ok", a non-empty "error"
 * when it is false, and survive a round trip through its text; a member of
 * the control group gets nothing but an error or the status of "status".
 */
#include <errno.h>
#include <string.h>

#include "config.h"
#include "ctl.h"
#include "fuzz.h"

struct stub {
	const char *cmd;	/* of the request being answered */
	unsigned int calls;
};

static struct stub stub;

/* What every handler sees: the request's "cmd", a string. */
static const char *stub_cmd(struct json_object *req)
{
	const char *cmd = ctl_arg_str(req, "cmd");

	ASSERT(cmd && json_object_is_type(req, json_type_object));
	stub.cmd = cmd;
	stub.calls++;
	return cmd;
}

/* admin_peer(): the peer a command names, "beta" the only one */
static int stub_peer(struct json_object *req, char *err, size_t len)
{
	const char *name = ctl_arg_str(req, "peer");

	if (!name) {
		snprintf(err, len, "missing \"peer\"");
		return -ENOENT;
	}
	if (strcmp(name, "beta")) {
		snprintf(err, len, "no peer '%s' in resource r0", name);
		return -ENOENT;
	}
	return 0;
}

static int stub_set_mode(void *ctx, struct json_object *req, char *err, size_t len)
{
	const char *mode = ctl_arg_str(req, "mode");
	enum peer_mode pm;
	int r;

	ASSERT(!strcmp(stub_cmd(req), "set-mode"));
	if (ctl_arg_str(req, "peer") && !mode) {
		snprintf(err, len, "missing \"mode\"");
		return -EINVAL;
	}
	r = stub_peer(req, err, len);
	if (r < 0)
		return r;
	if (config_mode_parse(mode, &pm) < 0) {
		snprintf(err, len, "mode '%s': expected async, semi-sync or sync", mode);
		return -EINVAL;
	}
	return 0;
}

static int stub_connect(void *ctx, struct json_object *req, char *err, size_t len)
{
	const char *cmd = stub_cmd(req);

	ASSERT(!strcmp(cmd, "connect") || !strcmp(cmd, "disconnect"));
	return stub_peer(req, err, len);
}

static int stub_resync(void *ctx, struct json_object *req, char *err, size_t len)
{
	const char *cmd = stub_cmd(req);
	bool full = ctl_arg_bool(req, "full");

	ASSERT(!strcmp(cmd, "resync") || !strcmp(cmd, "verify"));
	if (full && !strcmp(cmd, "verify")) {
		snprintf(err, len, "peer beta: not connected");
		return -ENOTCONN;
	}
	return stub_peer(req, err, len);
}

static int stub_role(void *ctx, struct json_object *req, char *err, size_t len)
{
	const char *cmd = stub_cmd(req);

	ASSERT(!strcmp(cmd, "primary") || !strcmp(cmd, "secondary"));
	if (!ctl_arg_bool(req, "force")) {
		snprintf(err, len, "r0 is already %s here", cmd);
		return -EALREADY;
	}
	return 0;
}

static int stub_discard(void *ctx, struct json_object *req, char *err, size_t len)
{
	ASSERT(!strcmp(stub_cmd(req), "discard-my-data"));
	return 0;	/* an empty err: the reply says "failed" when it is not */
}

static struct json_object *stub_status(void *ctx)
{
	struct json_object *o = json_object_new_object();

	json_object_object_add(o, "ok", json_object_new_boolean(true));
	json_object_object_add(o, "resource", json_object_new_string("r0"));
	return o;
}

static const struct ctl_command manager_commands[] = {
	{ .name = "status" },
	{ .name = "primary", .fn = stub_role },
	{ .name = "secondary", .fn = stub_role },
	{ .name = NULL },
};

static const struct ctl_command primary_commands[] = {
	{ .name = "set-mode", .fn = stub_set_mode },
	{ .name = "connect", .fn = stub_connect },
	{ .name = "disconnect", .fn = stub_connect },
	{ .name = "resync", .fn = stub_resync },
	{ .name = "verify", .fn = stub_resync },
	CTL_PRIMARY_REFUSALS,
	{ .name = NULL },
};

static const struct ctl_command secondary_commands[] = {
	{ .name = "discard-my-data", .fn = stub_discard },
	CTL_SECONDARY_REFUSALS,
	{ .name = NULL },
};

static void answer(const struct ctl_dispatch *d, const char *text, bool readonly)
{
	struct json_object *reply, *ok, *error, *back;
	const char *s;

	stub.calls = 0;
	reply = ctl_answer(d, text, readonly);
	ASSERT(reply && json_object_is_type(reply, json_type_object));
	ASSERT(json_object_object_get_ex(reply, "ok", &ok) &&
	       json_object_is_type(ok, json_type_boolean));
	ASSERT(stub.calls <= 1);
	if (json_object_get_boolean(ok)) {
		/* the status: "status", or a handler that succeeded */
		ASSERT(!json_object_object_get_ex(reply, "error", &error));
		if (readonly)
			ASSERT(stub.calls == 0);
	} else {
		ASSERT(json_object_object_get_ex(reply, "error", &error) &&
		       json_object_is_type(error, json_type_string) &&
		       json_object_get_string_len(error) > 0);
	}
	s = json_object_to_json_string_ext(reply, JSON_C_TO_STRING_PLAIN);
	ASSERT(s && !strchr(s, '\n'));	/* the reply is one line */
	back = json_tokener_parse(s);
	ASSERT(back && json_object_equal(reply, back));
	json_object_put(back);
	json_object_put(reply);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char text[CTL_MAX_REQUEST + 1];
	struct ctl_dispatch d = {
		.status = stub_status,
		.cmds = { manager_commands, primary_commands },
	};

	if (size > CTL_MAX_REQUEST)
		size = CTL_MAX_REQUEST;
	memcpy(text, data, size);
	text[size] = '\0';
	answer(&d, text, false);
	answer(&d, text, true);
	d.cmds[1] = secondary_commands;
	answer(&d, text, false);
	answer(&d, text, true);
	return 0;
}
