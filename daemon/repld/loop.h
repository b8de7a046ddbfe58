/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The event loop of one repld: epoll, a periodic timer, signals.
 *
 * Every event source is a struct ev embedded in its owner: the fd to watch
 * and the function to call with the epoll events.  The owner finds itself
 * with container_of():
 *
 *	struct thing { struct ev ev; ... };
 *	static void thing_event(struct ev *ev, uint32_t events)
 *	{
 *		struct thing *t = container_of(ev, struct thing, ev);
 *		...
 *	}
 *	t->ev = (struct ev) { .fd = fd, .fn = thing_event };
 *	loop_add(l, &t->ev, EPOLLIN);
 *
 * The loop knows nothing of what the events mean.  Before it sleeps it calls
 * the prepare function, which may ask it not to sleep (work is left).  A
 * callback may remove and free any source, its own or another one whose
 * events are in the same batch: loop_del() drops those events.
 *
 * One thread; nothing here is thread-safe.  Errors are negative errno.
 */
#ifndef REPL_LOOP_H
#define REPL_LOOP_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

struct ev;
typedef void (*ev_fn)(struct ev *ev, uint32_t events);

struct ev {
	int fd;
	ev_fn fn;
};

struct loop;

int loop_new(struct loop **ret);
/* Closes the timers' and signals' fds; the other fds are their owners'. */
void loop_free(struct loop *l);

/* Watch ev->fd for events (EPOLLIN, EPOLLOUT, ...), level-triggered. */
int loop_add(struct loop *l, struct ev *ev, uint32_t events);
int loop_mod(struct loop *l, struct ev *ev, uint32_t events);
/* Stop watching; events of ev not yet handled in this batch are dropped. */
void loop_del(struct loop *l, struct ev *ev);

/* ev->fn every period_ms from now on (a timerfd; ev->fd is set here). */
int loop_add_timer(struct loop *l, struct ev *ev, unsigned int period_ms);
/*
 * Block the signals of mask in this thread (and those it creates after),
 * and deliver them through ev (a signalfd; ev->fd is set here): ev->fn
 * reads them with loop_read_signal().  SIGPIPE is ignored.
 */
int loop_add_signals(struct loop *l, struct ev *ev, const sigset_t *mask);
/* The next pending signal of a signal source: its number, or 0. */
int loop_read_signal(struct ev *ev);
/* Drain a timer source; the number of periods elapsed. */
uint64_t loop_read_timer(struct ev *ev);

/*
 * Called before every sleep; returns true to poll without sleeping (it left
 * work it wants to be called back for soon).
 */
typedef bool (*loop_prepare_fn)(void *ctx);
void loop_set_prepare(struct loop *l, loop_prepare_fn fn, void *ctx);

/*
 * Dispatch events until loop_exit().  Returns the code given to loop_exit(),
 * or a negative errno when epoll fails.
 */
int loop_run(struct loop *l, int max_sleep_ms);
/*
 * Sleep at most ms from now in the coming turn of the loop (from the prepare
 * function or a callback; the earliest request of a turn counts, and each
 * turn starts without one).
 */
void loop_wake_in(struct loop *l, unsigned int ms);
void loop_exit(struct loop *l, int code);

/* CLOCK_MONOTONIC in milliseconds, and in nanoseconds. */
uint64_t loop_now_ms(void);
uint64_t loop_now_ns(void);

#endif
