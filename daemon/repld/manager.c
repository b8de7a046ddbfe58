// SPDX-License-Identifier: GPL-2.0-only
/*
 * The manager: the epoll loop, signals, the periodic tick, systemd
 * notifications.  Role-specific work is in primary.c and secondary.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "dmdev.h"
#include "log.h"
#include "rsnap.h"
#include "manager-internal.h"
#include "ring.h"

#define TICK_MS 100

uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

int ep_add(struct manager *m, int fd, uint32_t events, struct ev *ev)
{
	struct epoll_event e = { .events = events, .data.ptr = ev };

	return epoll_ctl(m->epfd, EPOLL_CTL_ADD, fd, &e) < 0 ? -errno : 0;
}

int ep_mod(struct manager *m, int fd, uint32_t events, struct ev *ev)
{
	struct epoll_event e = { .events = events, .data.ptr = ev };

	return epoll_ctl(m->epfd, EPOLL_CTL_MOD, fd, &e) < 0 ? -errno : 0;
}

void ep_del(struct manager *m, int fd)
{
	epoll_ctl(m->epfd, EPOLL_CTL_DEL, fd, NULL);
}

/*
 * One event can free the object another event of the same batch points to
 * (a reload removes a peer whose socket is also ready): such events are
 * dropped here, and manager_run() skips them.
 */
void ep_forget(struct manager *m, const struct ev *ev)
{
	int i;

	for (i = 0; i < m->batch_n; i++)
		if (m->batch[i].data.ptr == ev)
			m->batch[i].data.ptr = NULL;
}

/*
 * TCP options for replication sockets: no Nagle, keepalive.  The buffer
 * sizes are left to the kernel's autotuning (tcp_rmem/tcp_wmem): setting
 * SO_SNDBUF/SO_RCVBUF would switch it off and cap the window at
 * net.core.[rw]mem_max (about 208 KiB), a quarter of what a 100 Mbit,
 * 10 ms link needs once queueing adds to the round trip.
 */
int sock_set_common(int fd)
{
	int one = 1;

	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one)) < 0)
		return -errno;
	return 0;
}

int manager_new(struct config *cfg, struct manager **ret)
{
	struct manager *m = calloc(1, sizeof(*m));

	if (!m)
		return -ENOMEM;
	m->cfg = cfg;
	m->epfd = m->sigfd = m->timerfd = m->ctl_fd = m->dev_fd = -1;
	m->rs_dev_fd = m->rs_efd = -1;
	m->last_marked_region = UINT64_MAX;
	m->ev_signal.kind = EV_SIGNAL;
	m->ev_timer.kind = EV_TIMER;
	m->ev_ring.kind = EV_RING;
	m->ev_ctl.kind = EV_CTL_LISTEN;
	m->ev_apply.kind = EV_APPLY;
	snprintf(m->dm_name, sizeof(m->dm_name), "%s", cfg->dm_name);
	*ret = m;
	return 0;
}

void manager_use_ring(struct manager *m, struct ring *r,
		      const struct manager_kernel_ops *ops, void *ctx)
{
	m->ring = r;
	m->ring_from_caller = true;
	m->kops = ops;
	m->kctx = ctx;
}

void manager_stop(struct manager *m)
{
	/* a signal the loop reads from its signalfd (tests call this from
	 * another thread of the same process) */
	kill(getpid(), SIGTERM);
	(void)m;
}

static int manager_setup_loop(struct manager *m)
{
	struct itimerspec its = {
		.it_interval = { .tv_nsec = TICK_MS * 1000000L },
		.it_value = { .tv_nsec = TICK_MS * 1000000L },
	};
	sigset_t mask;
	int r;

	m->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (m->epfd < 0)
		return log_error_errno(-errno, "epoll_create1");

	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	if (pthread_sigmask(SIG_BLOCK, &mask, NULL))
		return log_error_errno(-EINVAL, "sigprocmask");
	signal(SIGPIPE, SIG_IGN);
	m->sigfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
	if (m->sigfd < 0)
		return log_error_errno(-errno, "signalfd");
	r = ep_add(m, m->sigfd, EPOLLIN, &m->ev_signal);
	if (r < 0)
		return log_error_errno(r, "epoll add signalfd");

	m->timerfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (m->timerfd < 0)
		return log_error_errno(-errno, "timerfd_create");
	if (timerfd_settime(m->timerfd, 0, &its, NULL) < 0)
		return log_error_errno(-errno, "timerfd_settime");
	r = ep_add(m, m->timerfd, EPOLLIN, &m->ev_timer);
	if (r < 0)
		return log_error_errno(r, "epoll add timerfd");
	return 0;
}

int manager_start(struct manager *m)
{
	int r;

	m->started_ms = now_ms();
	r = manager_setup_loop(m);
	if (r < 0)
		return r;
	if (m->cfg->role == ROLE_PRIMARY)
		r = primary_start(m);
	else
		r = secondary_start(m);
	if (r < 0)
		return r;
	r = ctl_start(m);
	if (r < 0)
		return r;
	if (sd_watchdog_enabled(0, &m->watchdog_usec) <= 0)
		m->watchdog_usec = 0;
	sd_notifyf(0, "READY=1\nSTATUS=%s %s: started", config_role_name(m->cfg->role),
		   m->cfg->resource);
	log_info("%s %s: %s ready", m->cfg->resource, m->cfg->node, config_role_name(m->cfg->role));
	return 0;
}

static void manager_reload(struct manager *m)
{
	char err[512];
	struct config *n = NULL;
	int r;

	sd_notify(0, "RELOADING=1\nSTATUS=reloading configuration");
	r = config_load(m->cfg->path, &n, err, sizeof(err));
	if (r < 0) {
		log_error("reload: %s; keeping the running configuration", err);
		goto out;
	}
	if (strcmp(n->resource, m->cfg->resource) || strcmp(n->node, m->cfg->node) ||
	    n->role != m->cfg->role || strcmp(n->device, m->cfg->device)) {
		log_error("reload: resource, node, role and device cannot change on reload; keeping the running configuration");
		config_free(n);
		goto out;
	}
	if (m->cfg->role == ROLE_PRIMARY) {
		r = primary_reload(m, n);	/* takes n on success */
		if (r < 0) {
			config_free(n);
			goto out;
		}
	} else {
		/* secondary: peers (who may connect) and timeouts */
		config_free(m->cfg);
		m->cfg = n;
	}
	log_info("reload: configuration %s applied", m->cfg->path);
out:
	sd_notify(0, "READY=1");
}

static void manager_signal(struct manager *m)
{
	struct signalfd_siginfo si;

	while (read(m->sigfd, &si, sizeof(si)) == sizeof(si)) {
		switch (si.ssi_signo) {
		case SIGHUP:
			manager_reload(m);
			break;
		case SIGTERM:
		case SIGINT:
			if (m->draining) {
				log_notice("second termination signal: exiting now");
				m->stop = true;
				break;
			}
			m->draining = true;
			m->drain_deadline_ms = now_ms() + m->cfg->drain_timeout_ms;
			log_info("termination signal: draining (up to %u ms)",
				 m->cfg->drain_timeout_ms);
			sd_notify(0, "STOPPING=1\nSTATUS=draining");
			break;
		}
	}
}

static void manager_tick(struct manager *m)
{
	uint64_t expirations, now = now_ms();

	while (read(m->timerfd, &expirations, sizeof(expirations)) > 0)
		;
	if (m->cfg->role == ROLE_PRIMARY)
		primary_tick(m);
	else
		secondary_tick(m);
	if (m->watchdog_usec && now - m->last_watchdog_ms >= m->watchdog_usec / 2000) {
		sd_notify(0, "WATCHDOG=1");
		m->last_watchdog_ms = now;
	}
	if (now - m->last_status_ms >= 2000 && m->status_line[0]) {
		sd_notifyf(0, "STATUS=%s", m->status_line);
		m->last_status_ms = now;
	}
	if (m->draining) {
		bool done = m->cfg->role == ROLE_PRIMARY ? primary_drained(m) : secondary_drained(m);

		if (done) {
			log_info("drained: exiting");
			m->stop = true;
		} else if (now >= m->drain_deadline_ms) {
			log_warning("drain timeout: exiting with records not acknowledged");
			m->stop = true;
		}
	}
}

int manager_run(struct manager *m)
{
	struct epoll_event evs[64];
	int n, i;

	while (!m->stop) {
		int timeout = TICK_MS;

		if (m->cfg->role == ROLE_PRIMARY && primary_before_sleep(m))
			timeout = 0;
		n = epoll_wait(m->epfd, evs, 64, timeout);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return log_error_errno(-errno, "epoll_wait");
		}
		m->batch = evs;
		m->batch_n = n;
		for (i = 0; i < n && !m->stop; i++) {
			struct ev *ev = evs[i].data.ptr;

			if (!ev)
				continue;	/* its source is gone (ep_forget) */
			switch (ev->kind) {
			case EV_SIGNAL:
				manager_signal(m);
				break;
			case EV_TIMER:
				manager_tick(m);
				break;
			case EV_RING:
				primary_ring_event(m, evs[i].events);
				break;
			case EV_PEER:
				primary_peer_event(m, ev->ptr, evs[i].events);
				break;
			case EV_CTL_LISTEN:
				ctl_event(m);
				break;
			case EV_LISTEN:
				secondary_listen_event(m, (int)(intptr_t)ev->ptr);
				break;
			case EV_CONN:
				secondary_conn_event(m, evs[i].events);
				break;
			case EV_APPLY:
				secondary_apply_event(m);
				break;
			case EV_RESYNC:
				resync_event(m);
				break;
			}
		}
		m->batch_n = 0;
	}
	return m->exit_code;
}

void manager_set_demoted(struct manager *m)
{
	m->demoted = true;
}

struct config *manager_config(const struct manager *m)
{
	return m->cfg;
}

int manager_switch_role(const struct manager *m)
{
	return m->switch_pending ? (int)m->switch_to : 0;
}

/* replctl primary / secondary: finish what is in flight, then switch. */
int manager_request_role(struct manager *m, enum repl_role role, bool force, char *err,
			 size_t len)
{
	if (m->cfg->role == role) {
		snprintf(err, len, "%s is already %s here", m->cfg->resource, config_role_name(role));
		return -EALREADY;
	}
	if (m->draining) {
		snprintf(err, len, "%s is stopping", m->cfg->resource);
		return -EBUSY;
	}
	if (role == ROLE_PRIMARY && !m->consistent && !rsnap_active(m->cfg) && !force) {
		snprintf(err, len, "this copy is Inconsistent (a resync did not complete) and there is no resync snapshot to go back to: promoting it would expose a torn image. Let the resync finish, or use --force");
		return -EPERM;
	}
	if (role == ROLE_SECONDARY && !m->ring_from_caller) {
		struct dmdev_info info;

		if (dmdev_get(m->dm_name, &info) == 0 && info.exists && info.open_count > 0) {
			snprintf(err, len, "/dev/mapper/%s is open (%d users: mounted, or used by LVM?): stop using it first",
				 m->dm_name, info.open_count);
			return -EBUSY;
		}
	}
	m->switch_pending = true;
	m->switch_to = role;
	m->draining = true;
	m->drain_deadline_ms = now_ms() + m->cfg->drain_timeout_ms;
	log_info("%s: becoming %s: finishing what is in flight", m->cfg->resource, config_role_name(role));
	sd_notifyf(0, "STATUS=%s: becoming %s", m->cfg->resource, config_role_name(role));
	return 0;
}

void manager_free(struct manager *m)
{
	if (!m)
		return;
	ctl_stop(m);
	if (m->cfg && m->cfg->role == ROLE_PRIMARY)
		primary_free(m);
	else
		secondary_free(m);
	if (m->timerfd >= 0)
		close(m->timerfd);
	if (m->sigfd >= 0)
		close(m->sigfd);
	if (m->epfd >= 0)
		close(m->epfd);
	config_free(m->cfg);
	free(m);
}

void manager_freep(struct manager **m)
{
	manager_free(*m);
}
