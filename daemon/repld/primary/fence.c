// SPDX-License-Identifier: GPL-2.0-only
/*
 * The fence-peer handler: when it runs, how, and what its end means; the
 * peers fenced, kept across restarts.  See fence.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/pidfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fileio.h"
#include "log.h"
#include "loop.h"
#include "macro.h"
#include "peerbits.h"
#include "primary.h"
#include "ring.h"
#include "state.h"

extern char **environ;

const char *fence_state_name(enum fence_state s)
{
	static const char *const names[] = {
		[FENCE_NONE] = "none",
		[FENCE_FENCING] = "fencing",
		[FENCE_FENCED] = "fenced",
		[FENCE_UNFENCING] = "unfencing",
		[FENCE_FAILED] = "failed",
	};

	return NAME_OF(names, s);
}

void fence_init(struct fence *f)
{
	*f = (struct fence) { .ev.fd = -1 };
}

/* <state-dir>/<resource>.fence: the peers whose copy calls for a fence */
static int fence_path(const struct primary *pri, char *buf, size_t len)
{
	return state_path(pri->env->cfg->state_dir, pri->resource, "fence", buf, len);
}

/*
 * Record which peers are fenced (or being fenced, or failed to be): one
 * name a line.  A restart remembers them, and unfences them once they are
 * UpToDate, rather than leave the cluster's fence in place for ever.
 */
static void fence_save(struct primary *pri)
{
	char path[PATH_MAX], text[CFG_MAX_PEERS * (CONFIG_NAME_MAX + 1) + 1] = "";
	size_t n = 0;
	int r;

	for (unsigned int i = 0; i < pri->nr_replicas && n < sizeof(text); i++)
		if (pri->replicas[i]->fence.want)
			n += (size_t)snprintf(text + n, sizeof(text) - n, "%s\n",
					      pri->replicas[i]->conn.cfg.name);
	r = fence_path(pri, path, sizeof(path));
	if (r == 0)
		r = state_dir_make(pri->env->cfg->state_dir);
	if (r == 0)
		r = fileio_write_atomic(path, text);
	if (r < 0)
		log_warning_errno(r, "%s: cannot record the fenced peers in %s/%s.fence: a restart of repld forgets them",
				  pri->resource, pri->env->cfg->state_dir, pri->resource);
}

void fence_load(struct primary *pri)
{
	char path[PATH_MAX], *text = NULL, *line, *save = NULL;
	size_t len;
	int r;

	r = fence_path(pri, path, sizeof(path));
	if (r == 0)
		r = fileio_read_text(path, &text, &len);
	if (r == -ENOENT)
		return;
	if (r < 0) {
		log_warning_errno(r, "%s: cannot read which peers were fenced (%s)", pri->resource,
				  path);
		return;
	}
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		for (unsigned int i = 0; i < pri->nr_replicas; i++) {
			struct replica *rp = pri->replicas[i];

			if (rp->removed || strcmp(rp->conn.cfg.name, line))
				continue;
			rp->fence.want = true;
			rp->fence.state = FENCE_FENCED;
			log_notice("%s: peer %s: fenced before repld started: unfenced once it is UpToDate",
				   pri->resource, line);
		}
	}
	free(text);
}

/* The variables the handler gets about the peer; repld's own of these names are dropped. */
static const char *const fence_vars[] = {
	"DMREPL_RESOURCE=", "DMREPL_NODE=", "DMREPL_PEER=", "DMREPL_PEER_ADDRESS=",
};

static bool fence_is_var(const char *s)
{
	for (size_t j = 0; j < ARRAY_SIZE(fence_vars); j++)
		if (!strncmp(s, fence_vars[j], strlen(fence_vars[j])))
			return true;
	return false;
}

/* The handler's environment: repld's, and what it is about. */
static char **fence_env(const struct replica *rp)
{
	const struct primary *pri = rp->pri;
	const char *val[] = { pri->resource, pri->env->cfg->node, rp->conn.cfg.name,
			      rp->conn.cfg.address.text };
	char *mine[ARRAY_SIZE(fence_vars)] = { NULL };
	size_t n = 0, k = 0, i;
	char **env = NULL;

	for (i = 0; i < ARRAY_SIZE(fence_vars); i++) {
		size_t len = strlen(fence_vars[i]) + strlen(val[i]) + 1;

		mine[i] = malloc(len);
		if (!mine[i])
			goto free_mine;
		snprintf(mine[i], len, "%s%s", fence_vars[i], val[i]);
	}
	while (environ && environ[n])
		n++;
	env = calloc(n + ARRAY_SIZE(fence_vars) + 1, sizeof(*env));
	if (!env)
		goto free_mine;
	for (i = 0; i < n; i++)
		if (!fence_is_var(environ[i]))
			env[k++] = environ[i];
	for (i = 0; i < ARRAY_SIZE(fence_vars); i++)
		env[k++] = mine[i];
	return env;

free_mine:
	for (i = 0; i < ARRAY_SIZE(fence_vars); i++)
		free(mine[i]);
	return NULL;
}

/* What fence_env() allocated: its own variables, and the array. */
static void fence_env_free(char **env)
{
	if (!env)
		return;
	for (size_t i = 0; env[i]; i++)
		if (fence_is_var(env[i]))
			free(env[i]);
	free(env);
}

/*
 * Start "<path> <action>" in a process group of its own (the timeout kills
 * the group), with default signal handling (repld blocks some and ignores
 * SIGPIPE), stdin from /dev/null, no fd of repld's but stdout and stderr.
 * Its pid and a pidfd for it, or a negative errno.
 */
static int fence_spawn(const char *path, const char *action, char **env, pid_t *ret_pid,
		       int *ret_fd)
{
	char *argv[] = { (char *)path, (char *)action, NULL };
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	sigset_t none, all;
	pid_t pid;
	int r, fd;

	sigemptyset(&none);
	sigfillset(&all);
	r = posix_spawnattr_init(&at);
	if (r)
		return -r;
	r = posix_spawn_file_actions_init(&fa);
	if (r) {
		posix_spawnattr_destroy(&at);
		return -r;
	}
	r = posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
					  POSIX_SPAWN_SETSIGDEF);
	if (!r)
		r = posix_spawnattr_setpgroup(&at, 0);
	if (!r)
		r = posix_spawnattr_setsigmask(&at, &none);
	if (!r)
		r = posix_spawnattr_setsigdefault(&at, &all);
	if (!r)
		r = posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
	if (!r)
		r = posix_spawn_file_actions_addclosefrom_np(&fa, STDERR_FILENO + 1);
	if (!r)
		r = posix_spawn(&pid, path, &fa, &at, argv, env);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);
	if (r)
		return -r;
	/* our child, not reaped: its pid cannot be reused meanwhile */
	fd = pidfd_open(pid, 0);
	if (fd < 0) {
		r = -errno;
		kill(-pid, SIGKILL);
		waitpid(pid, NULL, 0);
		return r;
	}
	*ret_pid = pid;
	*ret_fd = fd;
	return 0;
}

static void fence_event(struct ev *ev, uint32_t events);

/* Run the action fence (true) or unfence (false) for the peer now. */
static void fence_run(struct replica *rp, bool fence)
{
	struct primary *pri = rp->pri;
	const struct config *c = pri->env->cfg;
	struct fence *f = &rp->fence;
	const char *action = fence ? "fence" : "unfence";
	char **env;
	int r, fd = -1;

	if (!c->fence_peer[0]) {
		/* a reload took the handler away */
		if (!fence && f->state != FENCE_NONE)
			log_warning("%s: peer %s: UpToDate again, but fence-peer is no longer configured: its fencing is left as it is",
				    pri->resource, rp->conn.cfg.name);
		f->state = FENCE_NONE;
		return;
	}
	f->state = fence ? FENCE_FENCING : FENCE_UNFENCING;
	f->killed = false;
	env = fence_env(rp);
	r = env ? fence_spawn(c->fence_peer, action, env, &f->pid, &fd) : -ENOMEM;
	fence_env_free(env);
	if (r == 0) {
		f->ev = (struct ev) { .fd = fd, .fn = fence_event };
		r = loop_add(pri->env->loop, &f->ev, EPOLLIN);
		if (r < 0) {
			kill(-f->pid, SIGKILL);
			waitpid(f->pid, NULL, 0);
			close(fd);
			f->ev.fd = -1;
			f->pid = 0;
		}
	}
	if (r < 0) {
		log_error_errno(r, "%s: peer %s: cannot run the fence-peer handler %s %s",
				pri->resource, rp->conn.cfg.name, c->fence_peer, action);
		f->state = FENCE_FAILED;
		f->failures++;
		return;
	}
	f->deadline_ms = loop_now_ms() + c->fence_peer_timeout_ms;
	if (fence) {
		struct ring_info ri;

		ring_get_info(pri->ring, &ri);
		f->hold_timeouts = ri.hold_timeouts;
		f->prod = ri.prod_seq;
		f->warned = false;
	}
	log_info("%s: peer %s: running the fence-peer handler: %s %s (pid %d)", pri->resource,
		 rp->conn.cfg.name, c->fence_peer, action, (int)f->pid);
}

/*
 * While "fence" runs for a sync or semi-sync peer, the target released
 * writes by its hold timeout (or took writes while degraded): they
 * completed without the peer, whose copy a cluster manager could still
 * promote.  Logged once per fence.
 */
static void fence_check_hold(struct replica *rp)
{
	struct primary *pri = rp->pri;
	struct fence *f = &rp->fence;
	struct ring_info ri;

	/* writes never wait for an async peer: no fence comes before them */
	if (f->state != FENCE_FENCING || f->warned || rp->mode == MODE_ASYNC)
		return;
	ring_get_info(pri->ring, &ri);
	if (ri.hold_timeouts == f->hold_timeouts &&
	    (!(ri.state & DM_REPL_STATE_DEGRADED) || ri.prod_seq == f->prod))
		return;
	f->warned = true;
	log_warning("%s: peer %s: writes completed without %s before it was fenced: the target's hold timeout passed while the fence-peer handler ran (it must finish within hold-timeout-ms)",
		    pri->resource, rp->conn.cfg.name, rp->conn.cfg.name);
}

/* How the handler ended, as words; true: exit status 0. */
static bool fence_describe(const struct fence *f, const siginfo_t *si, unsigned int timeout_ms,
			   char *buf, size_t len)
{
	if (si->si_code == CLD_EXITED) {
		snprintf(buf, len, "exit status %d", si->si_status);
		return si->si_status == 0;
	}
	if (f->killed)
		snprintf(buf, len, "still running after %u ms: killed", timeout_ms);
	else
		snprintf(buf, len, "killed by signal %d (%s)", si->si_status,
			 strsignal(si->si_status));
	return false;
}

/* The handler's pidfd is readable: it ended. */
static void fence_event(struct ev *ev, uint32_t events)
{
	struct replica *rp = container_of(ev, struct replica, fence.ev);
	struct primary *pri = rp->pri;
	const struct config *c = pri->env->cfg;
	struct fence *f = &rp->fence;
	bool fencing = f->state == FENCE_FENCING, ok;
	siginfo_t si = { 0 };
	char how[128];

	if (waitid((idtype_t)P_PIDFD, (id_t)ev->fd, &si, WEXITED | WNOHANG) < 0) {
		if (errno == EAGAIN || errno == EINTR)
			return;
		/* not ours to wait for any more: count it failed */
		snprintf(how, sizeof(how), "cannot wait for it: %s", strerror(errno));
		si.si_pid = f->pid;
		ok = false;
	} else if (!si.si_pid) {
		return;		/* not yet */
	} else {
		ok = fence_describe(f, &si, c->fence_peer_timeout_ms, how, sizeof(how));
	}
	loop_del(pri->env->loop, ev);
	close(ev->fd);
	ev->fd = -1;
	f->pid = 0;
	if (fencing)
		fence_check_hold(rp);
	if (ok) {
		f->state = fencing ? FENCE_FENCED : FENCE_NONE;
		log_notice("%s: peer %s: %s", pri->resource, rp->conn.cfg.name,
			   fencing ? "fenced" : "unfenced");
	} else {
		f->state = FENCE_FAILED;
		f->failures++;
		log_error("%s: peer %s: the fence-peer handler failed to %s it: %s %s: %s",
			  pri->resource, rp->conn.cfg.name, fencing ? "fence" : "unfence",
			  c->fence_peer, fencing ? "fence" : "unfence", how);
	}
	/* what the copy calls for changed while it ran */
	if (f->want != fencing)
		fence_run(rp, f->want);
}

void fence_peer_lost(struct replica *rp)
{
	struct fence *f = &rp->fence;

	if (!rp->pri->env->cfg->fence_peer[0])
		return;
	f->mark = 0;
	if (!f->want) {
		f->want = true;
		fence_save(rp->pri);
	}
	/* one that runs now: the fence follows it, if it was an unfence */
	if (f->pid || f->state == FENCE_FENCED)
		return;
	fence_run(rp, true);
}

/* UpToDate, as status says it, and connected (a peer without a slot counts nothing). */
static bool fence_up_to_date(const struct replica *rp)
{
	struct ring_info ri;

	if (rp->conn.state != PEER_UP || rp->admin_down || rp->removed || rp->inconsistent ||
	    rp->join_pending || !rp->peer_bitmap_done)
		return false;
	ring_get_info(rp->pri->ring, &ri);
	return !peerbits_count(rp->pri->pb, rp->slot) && !ri.dirty_regions;
}

void fence_tick(struct primary *pri, uint64_t now)
{
	for (unsigned int i = 0; i < pri->nr_replicas; i++) {
		struct replica *rp = pri->replicas[i];
		struct fence *f = &rp->fence;

		if (f->pid && !f->killed && now >= f->deadline_ms) {
			/* the group: what the handler started goes too */
			kill(-f->pid, SIGKILL);
			pidfd_send_signal(f->ev.fd, SIGKILL, NULL, 0);
			f->killed = true;
		}
		fence_check_hold(rp);
		if (!f->want)
			continue;
		/*
		 * UpToDate again: once it has written what the ring held then,
		 * it has caught up, and the cluster may promote it again.
		 */
		if (!fence_up_to_date(rp)) {
			f->mark = 0;
			continue;
		}
		if (!f->mark)
			f->mark = ring_prod(pri->ring) + 1;
		if (rp->written + 1 < f->mark)
			continue;
		f->want = false;
		f->mark = 0;
		fence_save(pri);
		if (!f->pid)
			fence_run(rp, false);
	}
}

void fence_fini(struct replica *rp)
{
	struct fence *f = &rp->fence;
	siginfo_t si = { 0 };

	if (!f->pid)
		return;
	loop_del(rp->pri->env->loop, &f->ev);
	if (waitid((idtype_t)P_PIDFD, (id_t)f->ev.fd, &si, WEXITED | WNOHANG) == 0 && si.si_pid) {
		char how[128];

		fence_describe(f, &si, rp->pri->env->cfg->fence_peer_timeout_ms, how, sizeof(how));
		log_info("%s: peer %s: the fence-peer handler (pid %d) ended: %s",
			 rp->pri->resource, rp->conn.cfg.name, (int)f->pid, how);
	} else {
		/* the cluster's business: not waited for */
		log_warning("%s: peer %s: the fence-peer handler (pid %d) is still running: left to finish",
			    rp->pri->resource, rp->conn.cfg.name, (int)f->pid);
	}
	close(f->ev.fd);
	f->ev.fd = -1;
	f->pid = 0;
}
