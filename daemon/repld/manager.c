// SPDX-License-Identifier: GPL-2.0-only
/*
 * The manager: signals, the periodic tick, systemd notifications, the
 * configuration and its reload, the common control commands, and the role
 * (primary/ or secondary/), chosen once through its struct role_ops.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <systemd/sd-daemon.h>

#include "ctl.h"
#include "events.h"
#include "log.h"
#include "loop.h"
#include "manager.h"
#include "ring.h"
#include "role.h"
#include "tls.h"

#define TICK_MS 100

struct manager {
	struct role_env env;
	const struct role_ops *ops;
	struct role_args args;
	struct role *role;
	struct ctl *ctl;
	struct ev ev_signal, ev_timer;
	uint64_t started_ms;
	uint64_t drain_deadline_ms;
	bool switch_pending;		/* replctl primary/secondary: after the drain */
	enum repl_role switch_to;
	uint64_t watchdog_usec;
	uint64_t last_watchdog_ms;
	uint64_t last_status_ms;
};

int manager_new(struct config *cfg, struct manager **ret)
{
	struct manager *m = calloc(1, sizeof(*m));
	int r;

	if (!m)
		return -ENOMEM;
	r = loop_new(&m->env.loop);
	if (r < 0) {
		free(m);
		return r;
	}
	m->env.cfg = cfg;
	m->ops = cfg->role == ROLE_PRIMARY ? &primary_role_ops : &secondary_role_ops;
	*ret = m;
	return 0;
}

void manager_use_ring(struct manager *m, struct ring *r,
		      const struct manager_kernel_ops *ops, void *ctx)
{
	m->args.ring = r;
	m->args.kops = ops;
	m->args.kctx = ctx;
}

void manager_set_demoted(struct manager *m)
{
	m->args.demoted = true;
}

struct config *manager_config(const struct manager *m)
{
	return m->env.cfg;
}

int manager_switch_role(const struct manager *m)
{
	return m->switch_pending ? (int)m->switch_to : 0;
}

/* ---- status and the common commands ------------------------------------------ */

static struct json_object *manager_status(void *ctx)
{
	struct manager *m = ctx;
	const struct config *c = m->env.cfg;
	struct json_object *o = json_object_new_object();

	json_object_object_add(o, "ok", json_object_new_boolean(true));
	json_object_object_add(o, "resource", json_object_new_string(c->resource));
	json_object_object_add(o, "node", json_object_new_string(c->node));
	json_object_object_add(o, "role", json_object_new_string(config_role_name(c->role)));
	json_object_object_add(o, "uptime_ms",
			       json_object_new_uint64(loop_now_ms() - m->started_ms));
	json_object_object_add(o, "draining", json_object_new_boolean(m->env.draining));
	json_object_object_add(o, "transport",
			       json_object_new_string(config_transport_name(c->transport)));
	m->ops->status(m->role, o);
	return o;
}

/* A line of the events stream (replctl events): events.h. */
static char *manager_events(void *ctx, bool statistics)
{
	struct json_object *st = manager_status(ctx), *ev = events_state(st, statistics);
	char *line = strdup(json_object_to_json_string_ext(ev, JSON_C_TO_STRING_PLAIN));

	json_object_put(ev);
	json_object_put(st);
	return line;
}

static void manager_drain(struct manager *m)
{
	m->env.draining = true;
	m->drain_deadline_ms = loop_now_ms() + m->env.cfg->drain_timeout_ms;
}

/* replctl primary / secondary: finish what is in flight, then switch. */
static int manager_cmd_role(void *ctx, struct json_object *req, char *err, size_t len)
{
	struct manager *m = ctx;
	const struct config *c = m->env.cfg;
	enum repl_role to = !strcmp(ctl_arg_str(req, "cmd"), "primary") ? ROLE_PRIMARY :
									 ROLE_SECONDARY;
	int r;

	if (c->role == to) {
		snprintf(err, len, "%s is already %s here", c->resource, config_role_name(to));
		return -EALREADY;
	}
	if (m->env.draining) {
		snprintf(err, len, "%s is stopping", c->resource);
		return -EBUSY;
	}
	/* a primary connects to every peer: each needs an address */
	for (unsigned int i = 0; to == ROLE_PRIMARY && i < c->nr_peers; i++) {
		if (!c->peers[i].has_address) {
			snprintf(err, len, "peer %s has no address in %s: a primary connects to its peers; give it one (host[:port])",
				 c->peers[i].name, c->path);
			return -EDESTADDRREQ;
		}
	}
	r = m->ops->may_switch(m->role, to, ctl_arg_bool(req, "force"), err, len);
	if (r < 0)
		return r;
	m->switch_pending = true;
	m->switch_to = to;
	manager_drain(m);
	log_info("%s: becoming %s: finishing what is in flight", c->resource,
		 config_role_name(to));
	sd_notifyf(0, "STATUS=%s: becoming %s", c->resource, config_role_name(to));
	return 0;
}

static const struct ctl_command manager_commands[] = {
	{ .name = "status" },
	{ .name = "events", .subscribe = true },
	{ .name = "primary", .fn = manager_cmd_role },
	{ .name = "secondary", .fn = manager_cmd_role },
	{ .name = NULL },
};

/* ---- signals, tick ------------------------------------------------------------- */

static void manager_warn_transport(const struct config *c)
{
	if (c->transport == TRANSPORT_PLAIN)
		log_warning("%s: transport = \"plain-insecure\": the replication links are neither authenticated nor encrypted; anyone who reaches them can read and write this resource's data",
			    c->resource);
}

/*
 * Through repl.conf's table: a setting that cannot change on a reload
 * (resource, node, device) refuses it; one read only at the start is
 * named, for a restart to apply.  -EINVAL when refused.
 */
static int manager_reload_check(const struct config *c, const struct config *n)
{
	const struct config_setting *t;
	int r = 0;

	for (t = config_settings; t->name; t++)
		if (t->reload == CONFIG_RELOAD_NEVER && config_setting_changed(t, c, n)) {
			log_error("reload: %s cannot change on reload (restart repld with the new configuration); keeping the running configuration",
				  t->name);
			r = -EINVAL;
		}
	if (r < 0)
		return r;
	for (t = config_settings; t->name; t++)
		if (t->reload == CONFIG_RELOAD_RESTART && config_setting_changed(t, c, n))
			log_warning("reload: %s changed: restart repld to apply it", t->name);
	return 0;
}

static void manager_reload(struct manager *m)
{
	struct config *c = m->env.cfg, *n = NULL;
	struct tls_ctx *tls = NULL;
	char err[512];
	int r;

	sd_notify(0, "RELOADING=1\nSTATUS=reloading configuration");
	r = config_load(c->path, &n, err, sizeof(err));
	if (r < 0) {
		log_error("reload: %s; keeping the running configuration", err);
		goto out;
	}
	/* the role is runtime state: repl.conf's gives only the first */
	n->role = c->role;
	if (manager_reload_check(c, n) < 0) {
		config_free(n);
		goto out;
	}
	r = tls_ctx_new(n, &tls, err, sizeof(err));
	if (r < 0) {
		log_error("reload: %s; keeping the running configuration", err);
		config_free(n);
		goto out;
	}
	r = m->ops->reload(m->role, n);
	if (r < 0) {
		tls_ctx_free(tls);
		config_free(n);
		goto out;
	}
	manager_warn_transport(n);
	m->env.cfg = n;
	config_free(c);
	/* sessions hold a reference to the context they began with */
	tls_ctx_free(m->env.tls);
	m->env.tls = tls;
	log_info("reload: configuration %s applied", n->path);
out:
	sd_notify(0, "READY=1");
}

static void manager_signal(struct ev *ev, uint32_t events)
{
	struct manager *m = container_of(ev, struct manager, ev_signal);
	int sig;

	while ((sig = loop_read_signal(ev))) {
		switch (sig) {
		case SIGHUP:
			manager_reload(m);
			break;
		case SIGTERM:
		case SIGINT:
			if (m->env.draining) {
				log_notice("second termination signal: exiting now");
				loop_exit(m->env.loop, 0);
				break;
			}
			manager_drain(m);
			log_info("termination signal: draining (up to %u ms)",
				 m->env.cfg->drain_timeout_ms);
			sd_notify(0, "STOPPING=1\nSTATUS=draining");
			break;
		}
	}
}

static void manager_tick(struct ev *ev, uint32_t events)
{
	struct manager *m = container_of(ev, struct manager, ev_timer);
	uint64_t now = loop_now_ms();

	loop_read_timer(ev);
	m->ops->tick(m->role, now);
	ctl_tick(m->ctl, now);
	ctl_events_update(m->ctl, true);
	if (m->watchdog_usec && now - m->last_watchdog_ms >= m->watchdog_usec / 2000) {
		sd_notify(0, "WATCHDOG=1");
		m->last_watchdog_ms = now;
	}
	if (now - m->last_status_ms >= 2000) {
		char line[256] = "";

		m->ops->status_line(m->role, line, sizeof(line));
		if (line[0])
			sd_notifyf(0, "STATUS=%s", line);
		m->last_status_ms = now;
	}
	if (m->env.draining) {
		if (m->ops->drained(m->role)) {
			log_info("drained: exiting");
			loop_exit(m->env.loop, 0);
		} else if (now >= m->drain_deadline_ms) {
			log_warning("drain timeout: exiting with records not acknowledged");
			loop_exit(m->env.loop, 0);
		}
	}
}

static bool manager_prepare(void *ctx)
{
	struct manager *m = ctx;
	bool again = m->ops->before_sleep && m->ops->before_sleep(m->role);

	/* what changed in this turn of the loop, to the events clients */
	ctl_events_update(m->ctl, false);
	return again;
}

int manager_start(struct manager *m)
{
	const struct config *c = m->env.cfg;
	struct role_args args;
	sigset_t mask;
	int r;

	m->started_ms = loop_now_ms();
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	m->ev_signal.fn = manager_signal;
	r = loop_add_signals(m->env.loop, &m->ev_signal, &mask);
	if (r < 0)
		return log_error_errno(r, "signalfd");
	m->ev_timer.fn = manager_tick;
	r = loop_add_timer(m->env.loop, &m->ev_timer, TICK_MS);
	if (r < 0)
		return log_error_errno(r, "timerfd");
	{
		char err[512];

		r = tls_ctx_new(c, &m->env.tls, err, sizeof(err));
		if (r < 0) {
			log_error("%s: %s", c->resource, err);
			return r;
		}
		manager_warn_transport(c);
	}
	/* the role owns the ring from here on, whether it starts or not */
	args = m->args;
	m->args.ring = NULL;
	r = m->ops->start(&m->env, &args, &m->role);
	if (r < 0)
		return r;
	r = ctl_new(m->env.loop, c->control_socket, manager_status, m, &m->ctl);
	if (r == -EADDRINUSE)
		return log_error_errno(r, "%s: another repld serves %s", c->resource,
				       c->control_socket);
	if (r < 0)
		return log_error_errno(r, "control socket %s", c->control_socket);
	if (c->has_control_group) {
		r = ctl_set_group(m->ctl, c->control_group);
		if (r < 0)
			return log_error_errno(r, "control socket %s: control-group",
					       c->control_socket);
	}
	ctl_set_commands(m->ctl, 0, manager_commands, m);
	ctl_set_events(m->ctl, manager_events, m);
	ctl_set_commands(m->ctl, 1, m->ops->commands, m->role);
	loop_set_prepare(m->env.loop, manager_prepare, m);
	if (sd_watchdog_enabled(0, &m->watchdog_usec) <= 0)
		m->watchdog_usec = 0;
	sd_notifyf(0, "READY=1\nSTATUS=%s %s: started", config_role_name(c->role), c->resource);
	log_info("%s %s: %s ready", c->resource, c->node, config_role_name(c->role));
	return 0;
}

int manager_run(struct manager *m)
{
	int r = loop_run(m->env.loop, TICK_MS);

	if (r < 0 && r != -ENODEV)
		log_error_errno(r, "event loop");
	return r;
}

void manager_free(struct manager *m)
{
	if (!m)
		return;
	ctl_free(m->ctl);
	if (m->role)
		m->ops->free(m->role);
	else if (m->args.ring)
		ring_free(m->args.ring);	/* never handed over */
	loop_free(m->env.loop);
	tls_ctx_free(m->env.tls);
	config_free(m->env.cfg);
	free(m);
}

void manager_freep(struct manager **m)
{
	manager_free(*m);
}
