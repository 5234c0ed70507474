/* SPDX-License-Identifier: MIT */
/*
 * timer.h - the library's timers, seen by a loop that is not libev.
 *
 * Every timer of the library (keepalive, RPC deadlines, handshake, linger
 * and resolver bounds, the backends' own) is a struct rmsgi_timer: an
 * ev_timer plus what a context driven through a file descriptor
 * (ownloop.c, rmsg_ctx_create_fd(3)) needs to tell its caller when the
 * next one is due. On the application's libev loop it is a plain
 * ev_timer and costs nothing more; on a private loop the context's
 * deadlines are also kept in a heap (struct rmsgi_timers, timer.c), since
 * libev does not say when its next timer is due.
 *
 * Rules: start and stop only through these functions (never
 * ev_timer_start/stop/again on ->w), and stop a timer before freeing its
 * memory even if it fired (a one-shot that fired is no longer in the
 * heap once its callback ran, but one whose pending event is cleared
 * never runs it). Callbacks get &t->w, as with a plain ev_timer.
 */
#ifndef RMSG_TIMER_H
#define RMSG_TIMER_H

#include <stdbool.h>
#include <ev.h>

struct rmsgi_timers;

typedef void (*rmsgi_timer_cb)(struct ev_loop *loop, ev_timer *w, int revents);

struct rmsgi_timer {
	ev_timer w;		 /* first: callbacks get &t->w */
	struct rmsgi_timers *ts; /* NULL on the application's libev loop */
	rmsgi_timer_cb cb;
	double due;   /* CLOCK_MONOTONIC seconds, while in ts's heap */
	unsigned idx; /* 1 + slot in the heap; 0: not in it */
};

/* @ts: the context's heap (rmsgi_tr_env.timers), NULL for libev mode */
void rmsgi_timer_init(struct rmsgi_timer *t, struct rmsgi_timers *ts,
		      rmsgi_timer_cb cb);
/* (re)starts it: stops it first if it runs; @repeat as ev_timer's */
void rmsgi_timer_start(struct ev_loop *loop, struct rmsgi_timer *t,
		       double after, double repeat);
/* stops it and drops it from the heap; also clears a pending event */
void rmsgi_timer_stop(struct ev_loop *loop, struct rmsgi_timer *t);

static inline bool rmsgi_timer_active(const struct rmsgi_timer *t)
{
	return ev_is_active(&t->w);
}

/*
 * A watcher was started or an event fed outside the private loop's pass:
 * libev registers the one and runs the other only in a pass, so the
 * owner must run one (its descriptor is made readable). Called by every
 * ev_io start (all from a backend); no-op for NULL (the app's loop).
 */
void rmsgi_timers_touch(struct rmsgi_timers *ts);

/* the heap of a context on a private loop (ownloop.c): @sooner runs when
 * a timer started outside a pass is the earliest, @touch as above */
int rmsgi_timers_create(void (*sooner)(void *arg), void (*touch)(void *arg),
			void *arg, struct rmsgi_timers **ts_p);
void rmsgi_timers_destroy(struct rmsgi_timers *ts);
/* while set, timers are being started from inside the context's own
 * loop pass: no time update and no @sooner call is needed */
void rmsgi_timers_set_busy(struct rmsgi_timers *ts, bool busy);
/* timers that found no room in the heap (their deadlines are
 * approximated: rmsgi_timers_next) */
bool rmsgi_timers_overflow(const struct rmsgi_timers *ts);
/* whether the heap changed since the last call (which clears it) */
bool rmsgi_timers_changed(struct rmsgi_timers *ts);
/* the earliest deadline (CLOCK_MONOTONIC seconds): false if none */
bool rmsgi_timers_next(const struct rmsgi_timers *ts, double *due_p);
double rmsgi_mono_now(void);

#endif
