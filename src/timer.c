// SPDX-License-Identifier: MIT
/*
 * timer.c - timers a loop other than libev can see (timer.h).
 *
 * On a private loop each running timer is also in a binary min-heap of
 * deadlines, so the context can arm its timerfd and answer
 * rmsg_ctx_timeout(3) in O(1). The heap follows libev exactly: a start
 * inserts, a stop removes, and a timer that fires is updated (repeating)
 * or removed (one-shot) by a trampoline that runs before its callback.
 * Nothing else moves an ev_timer's deadline (no ev_timer_again in the
 * library). Growing the heap can fail; a timer that finds no room is
 * counted instead, and while any is, the next deadline is at most
 * RMSGI_TIMER_OVERFLOW_S away: late by at most that, never lost.
 */
#include <limits.h>
#include <stdlib.h>
#include <time.h>

#include "timer.h"

#define RMSGI_TIMER_OVERFLOW_S 0.01
#define NOT_IN_HEAP 0u
#define OVERFLOWED UINT_MAX

struct rmsgi_timers {
	struct rmsgi_timer **a;
	unsigned n, cap;
	unsigned overflow; /* running timers that found no room */
	bool busy;
	bool changed; /* a start, stop or firing since rmsgi_timers_changed */
	void (*sooner)(void *arg); /* the earliest deadline moved earlier */
	void (*touch)(void *arg);  /* a pass must come */
	void *arg;
};

double rmsgi_mono_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void heap_set(struct rmsgi_timers *ts, unsigned i, struct rmsgi_timer *t)
{
	ts->a[i] = t;
	t->idx = i + 1;
}

static void heap_up(struct rmsgi_timers *ts, unsigned i)
{
	struct rmsgi_timer *t = ts->a[i];

	while (i) {
		unsigned p = (i - 1) / 2;

		if (ts->a[p]->due <= t->due)
			break;
		heap_set(ts, i, ts->a[p]);
		i = p;
	}
	heap_set(ts, i, t);
}

static void heap_down(struct rmsgi_timers *ts, unsigned i)
{
	struct rmsgi_timer *t = ts->a[i];

	for (;;) {
		unsigned c = 2 * i + 1;

		if (c >= ts->n)
			break;
		if (c + 1 < ts->n && ts->a[c + 1]->due < ts->a[c]->due)
			c++;
		if (t->due <= ts->a[c]->due)
			break;
		heap_set(ts, i, ts->a[c]);
		i = c;
	}
	heap_set(ts, i, t);
}

static void heap_remove(struct rmsgi_timers *ts, struct rmsgi_timer *t)
{
	unsigned i;

	ts->changed = true;
	if (t->idx == OVERFLOWED) {
		ts->overflow--;
	} else if (t->idx != NOT_IN_HEAP) {
		i = t->idx - 1;
		ts->n--;
		if (i != ts->n) {
			heap_set(ts, i, ts->a[ts->n]);
			heap_down(ts, i);
			heap_up(ts, ts->a[i]->idx - 1);
		}
	}
	t->idx = NOT_IN_HEAP;
}

static void heap_insert(struct rmsgi_timers *ts, struct rmsgi_timer *t)
{
	ts->changed = true;
	if (ts->n == ts->cap) {
		unsigned cap = ts->cap ? 2 * ts->cap : 64;
		struct rmsgi_timer **a = realloc(ts->a, cap * sizeof(*a));

		if (!a) {
			t->idx = OVERFLOWED;
			ts->overflow++;
			return;
		}
		ts->a = a;
		ts->cap = cap;
	}
	heap_set(ts, ts->n++, t);
	heap_up(ts, ts->n - 1);
}

/* on a private loop: keeps the heap in step before the callback runs */
static void timer_tramp(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct rmsgi_timer *t = (struct rmsgi_timer *)w;
	struct rmsgi_timers *ts = t->ts;

	heap_remove(ts, t);
	if (ev_is_active(w)) { /* repeating: libev rescheduled it */
		t->due = rmsgi_mono_now() + ev_timer_remaining(loop, w);
		heap_insert(ts, t);
	}
	t->cb(loop, w, revents);
}

void rmsgi_timer_init(struct rmsgi_timer *t, struct rmsgi_timers *ts,
		      rmsgi_timer_cb cb)
{
	ev_timer_init(&t->w, ts ? timer_tramp : cb, 0., 0.);
	t->ts = ts;
	t->cb = cb;
	t->due = 0;
	t->idx = NOT_IN_HEAP;
}

void rmsgi_timer_start(struct ev_loop *loop, struct rmsgi_timer *t,
		       double after, double repeat)
{
	struct rmsgi_timers *ts = t->ts;
	bool sooner;

	if (ev_is_active(&t->w))
		rmsgi_timer_stop(loop, t);
	if (!ts) {
		ev_timer_set(&t->w, after, repeat);
		ev_timer_start(loop, &t->w);
		return;
	}
	/* outside the loop's own pass its clock may be old: the
	 * deadline counts from now, like the one the heap records */
	if (!ts->busy)
		ev_now_update(loop);
	heap_remove(ts, t);
	ev_timer_set(&t->w, after, repeat);
	ev_timer_start(loop, &t->w);
	t->due = rmsgi_mono_now() + after;
	sooner = !ts->n || t->due < ts->a[0]->due;
	heap_insert(ts, t);
	if (sooner && !ts->busy && ts->sooner)
		ts->sooner(ts->arg);
}

void rmsgi_timer_stop(struct ev_loop *loop, struct rmsgi_timer *t)
{
	ev_timer_stop(loop, &t->w); /* also clears a pending event */
	if (t->ts)
		heap_remove(t->ts, t);
}

void rmsgi_timers_touch(struct rmsgi_timers *ts)
{
	if (ts && ts->touch)
		ts->touch(ts->arg);
}

int rmsgi_timers_create(void (*sooner)(void *arg), void (*touch)(void *arg),
			void *arg, struct rmsgi_timers **ts_p)
{
	struct rmsgi_timers *ts = calloc(1, sizeof(*ts));

	if (!ts)
		return -1;
	ts->sooner = sooner;
	ts->touch = touch;
	ts->arg = arg;
	*ts_p = ts;
	return 0;
}

void rmsgi_timers_destroy(struct rmsgi_timers *ts)
{
	if (!ts)
		return;
	free(ts->a);
	free(ts);
}

void rmsgi_timers_set_busy(struct rmsgi_timers *ts, bool busy)
{
	ts->busy = busy;
}

bool rmsgi_timers_overflow(const struct rmsgi_timers *ts)
{
	return ts->overflow > 0;
}

bool rmsgi_timers_changed(struct rmsgi_timers *ts)
{
	bool changed = ts->changed;

	ts->changed = false;
	return changed;
}

bool rmsgi_timers_next(const struct rmsgi_timers *ts, double *due_p)
{
	double cap = rmsgi_mono_now() + RMSGI_TIMER_OVERFLOW_S;

	if (!ts->n && !ts->overflow)
		return false;
	if (!ts->n)
		*due_p = cap;
	else if (ts->overflow && cap < ts->a[0]->due)
		*due_p = cap;
	else
		*due_p = ts->a[0]->due;
	return true;
}
