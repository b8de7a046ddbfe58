// SPDX-License-Identifier: GPL-2.0-only
/* The event loop: see loop.h. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "loop.h"
#include "macro.h"

#define LOOP_BATCH	64

struct loop {
	int epfd;
	/* the events epoll_wait() returned, while loop_run() handles them */
	struct epoll_event batch[LOOP_BATCH];
	int batch_n;
	loop_prepare_fn prepare;
	void *prepare_ctx;
	bool exit;
	int exit_code;
	uint64_t wake_ms;		/* loop_wake_in() of this turn, 0: none */
	/* fds created here (timers, signals), closed by loop_free() */
	int own_fd[4];
	unsigned int nr_own;
};

uint64_t loop_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

uint64_t loop_now_ms(void)
{
	return loop_now_ns() / 1000000;
}

int loop_new(struct loop **ret)
{
	struct loop *l = calloc(1, sizeof(*l));

	if (!l)
		return -ENOMEM;
	l->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (l->epfd < 0) {
		int r = -errno;

		free(l);
		return r;
	}
	*ret = l;
	return 0;
}

void loop_free(struct loop *l)
{
	if (!l)
		return;
	while (l->nr_own)
		close(l->own_fd[--l->nr_own]);
	close(l->epfd);
	free(l);
}

int loop_add(struct loop *l, struct ev *ev, uint32_t events)
{
	struct epoll_event e = { .events = events, .data.ptr = ev };

	return epoll_ctl(l->epfd, EPOLL_CTL_ADD, ev->fd, &e) < 0 ? -errno : 0;
}

int loop_mod(struct loop *l, struct ev *ev, uint32_t events)
{
	struct epoll_event e = { .events = events, .data.ptr = ev };

	return epoll_ctl(l->epfd, EPOLL_CTL_MOD, ev->fd, &e) < 0 ? -errno : 0;
}

/*
 * One event can free the source another event of the same batch belongs
 * to (a reload removes a peer whose socket is also ready): such events are
 * dropped here, and loop_run() skips them.
 */
void loop_del(struct loop *l, struct ev *ev)
{
	int i;

	if (ev->fd >= 0)
		epoll_ctl(l->epfd, EPOLL_CTL_DEL, ev->fd, NULL);
	for (i = 0; i < l->batch_n; i++)
		if (l->batch[i].data.ptr == ev)
			l->batch[i].data.ptr = NULL;
}

static int loop_own(struct loop *l, struct ev *ev, int fd)
{
	int r;

	if (l->nr_own == ARRAY_SIZE(l->own_fd)) {
		close(fd);
		return -EMFILE;
	}
	ev->fd = fd;
	r = loop_add(l, ev, EPOLLIN);
	if (r < 0) {
		close(fd);
		ev->fd = -1;
		return r;
	}
	l->own_fd[l->nr_own++] = fd;
	return 0;
}

int loop_add_timer(struct loop *l, struct ev *ev, unsigned int period_ms)
{
	struct itimerspec its = {
		.it_interval = { .tv_sec = period_ms / 1000,
				 .tv_nsec = (long)(period_ms % 1000) * 1000000L },
	};
	int fd;

	its.it_value = its.it_interval;
	fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (timerfd_settime(fd, 0, &its, NULL) < 0) {
		int r = -errno;

		close(fd);
		return r;
	}
	return loop_own(l, ev, fd);
}

int loop_add_signals(struct loop *l, struct ev *ev, const sigset_t *mask)
{
	int fd;

	if (pthread_sigmask(SIG_BLOCK, mask, NULL))
		return -EINVAL;
	signal(SIGPIPE, SIG_IGN);
	fd = signalfd(-1, mask, SFD_NONBLOCK | SFD_CLOEXEC);
	if (fd < 0)
		return -errno;
	return loop_own(l, ev, fd);
}

int loop_read_signal(struct ev *ev)
{
	struct signalfd_siginfo si;

	if (read(ev->fd, &si, sizeof(si)) != sizeof(si))
		return 0;
	return (int)si.ssi_signo;
}

uint64_t loop_read_timer(struct ev *ev)
{
	uint64_t n = 0, x;

	while (read(ev->fd, &x, sizeof(x)) == sizeof(x))
		n += x;
	return n;
}

void loop_set_prepare(struct loop *l, loop_prepare_fn fn, void *ctx)
{
	l->prepare = fn;
	l->prepare_ctx = ctx;
}

void loop_wake_in(struct loop *l, unsigned int ms)
{
	uint64_t at = loop_now_ms() + ms;

	if (!l->wake_ms || at < l->wake_ms)
		l->wake_ms = at;
}

void loop_exit(struct loop *l, int code)
{
	l->exit = true;
	l->exit_code = code;
}

int loop_run(struct loop *l, int max_sleep_ms)
{
	int n, i;

	while (!l->exit) {
		int timeout = max_sleep_ms;

		l->wake_ms = 0;
		if (l->prepare && l->prepare(l->prepare_ctx))
			timeout = 0;
		if (l->exit)
			break;
		if (l->wake_ms && timeout) {
			uint64_t now = loop_now_ms();
			uint64_t d = l->wake_ms > now ? l->wake_ms - now : 0;

			if (timeout < 0 || d < (uint64_t)timeout)
				timeout = (int)d;
		}
		n = epoll_wait(l->epfd, l->batch, LOOP_BATCH, timeout);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		l->batch_n = n;
		for (i = 0; i < n && !l->exit; i++) {
			struct ev *ev = l->batch[i].data.ptr;

			if (ev)		/* NULL: its source is gone (loop_del) */
				ev->fn(ev, l->batch[i].events);
		}
		l->batch_n = 0;
	}
	return l->exit_code;
}
