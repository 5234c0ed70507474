// SPDX-License-Identifier: MIT
/*
 * ownloop.c - a context on a private loop, driven by any event loop
 * through one file descriptor (rmsg_ctx_create_fd(3)), and the progress
 * call of both modes (rmsg_ctx_progress(3)).
 *
 * The context owns a libev loop with the epoll backend; the descriptor
 * it hands out is that loop's epoll fd, so whatever libev watches makes
 * it readable: sockets, the RDMA completion channel and rdma_cm's
 * channel. What libev keeps outside its epoll set gets a descriptor in
 * it too:
 *  - timers: libev does not say when its next timer is due, so the
 *    library's timers also sit in a heap (timer.c) and a timerfd is armed
 *    to the earliest deadline;
 *  - work queued outside the loop's pass (a send made from the caller's
 *    loop, a flush bound reached, rmsg_ctx_submit() from any thread): an
 *    eventfd is written ("kicked"). ev_async is not enough: libev writes
 *    its own wake-up pipe only while it blocks in epoll_wait, which a
 *    private loop never does; outside a pass it only sets a flag.
 * rmsg_ctx_progress() runs one non-blocking pass (ev_run EVRUN_NOWAIT:
 * the prepare watcher flushes and polls completions, then ready
 * descriptors, due timers and their callbacks), flushes what the
 * callbacks queued, and re-arms the timerfd. The epoll set is
 * level-triggered: whatever is left keeps the descriptor readable.
 */
#include <stdint.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "rmsg_int.h"

struct rmsgi_ownloop {
	struct rmsg_ctx *ctx;
	struct ev_loop *loop;
	struct rmsgi_timers *ts;
	int epfd;    /* the loop's epoll fd: rmsg_ctx_fd() */
	int kick_fd; /* eventfd: work is queued */
	int tfd;     /* timerfd: the earliest deadline */
	ev_io kick_w, tfd_w;
	bool kicked;	 /* written and not read yet (loop thread) */
	bool busy;	 /* inside rmsg_ctx_progress() */
	bool touched;	 /* a watcher started in this pass (own_touch) */
	double armed;	 /* deadline in the timerfd; 0: none */
	bool expired;	 /* the timerfd fired: arm it again */
	unsigned events; /* watchers run in this pass */
};

static void own_arm(struct rmsgi_ownloop *own)
{
	struct itimerspec its = {{0, 0}, {0, 0}};
	double due;

	/* the common case: no timer started, stopped or fired */
	if (!rmsgi_timers_changed(own->ts) && !own->expired &&
	    !rmsgi_timers_overflow(own->ts))
		return;
	own->expired = false;
	if (!rmsgi_timers_next(own->ts, &due)) {
		if (own->armed == 0)
			return;
		own->armed = 0;
	} else {
		if (due == own->armed)
			return;
		own->armed = due;
		if (due < 1e-9)
			due = 1e-9; /* zero would disarm it */
		its.it_value.tv_sec = (time_t)due;
		its.it_value.tv_nsec =
			(long)((due - (double)its.it_value.tv_sec) * 1e9);
		if (its.it_value.tv_nsec >= 1000000000L)
			its.it_value.tv_nsec = 999999999L;
		if (!its.it_value.tv_sec && !its.it_value.tv_nsec)
			its.it_value.tv_nsec = 1;
	}
	/* cannot fail with a valid fd and value */
	(void)timerfd_settime(own->tfd, TFD_TIMER_ABSTIME, &its, NULL);
}

/* a timer was started outside a pass, earlier than the armed one */
static void own_sooner(void *arg)
{
	own_arm(arg);
}

/* a watcher was started outside a pass (rmsgi_timers_touch) */
static void own_touch(void *arg)
{
	struct rmsgi_ownloop *own = arg;

	if (own->busy)
		own->touched = true;
	else
		rmsgi_own_dirty(own);
}

static void drain(int fd)
{
	uint64_t v;

	while (read(fd, &v, sizeof(v)) == (ssize_t)sizeof(v))
		;
}

static void kick_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct rmsgi_ownloop *own = w->data;

	(void)loop;
	(void)revents;
	drain(own->kick_fd);
	own->kicked = false;
	/* after the drain: a push from now on writes the eventfd again */
	if (own->ctx && own->ctx->async)
		rmsgi_async_poll(own->ctx);
}

static void tfd_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct rmsgi_ownloop *own = w->data;

	(void)loop;
	(void)revents;
	drain(own->tfd);
	/* expired: arm again even for the same deadline (libev fires a
	 * timer only once its time is strictly past) */
	own->armed = 0;
	own->expired = true;
}

bool rmsgi_own_busy(const struct rmsgi_ownloop *own)
{
	return own->busy;
}

void rmsgi_own_wake(struct rmsgi_ownloop *own)
{
	uint64_t one = 1;

	/* an eventfd write fails only when the counter would overflow,
	 * and then it is readable anyway */
	(void)!write(own->kick_fd, &one, sizeof(one));
}

void rmsgi_own_dirty(struct rmsgi_ownloop *own)
{
	if (own->busy || own->kicked)
		return;
	own->kicked = true;
	rmsgi_own_wake(own);
}

/* counts what a pass handles: every pending watcher but the prepare */
static void own_invoke(struct ev_loop *loop)
{
	struct rmsgi_ownloop *own = ev_userdata(loop);
	unsigned n = ev_pending_count(loop);

	if (n && ev_is_pending(&own->ctx->prepare))
		n--;
	own->events += n;
	ev_invoke_pending(loop);
}

/* ev_loop_new() failed: out of descriptors, or of memory */
static int loop_err(void)
{
	return errno == EMFILE || errno == ENFILE ? -EMFILE : -ENOMEM;
}

/* libev gives no call for a loop's epoll fd; an ev_embed watcher set on
 * the loop learns it (ev.h: ev_embed.io watches the embedded loop's
 * backend fd), on a throwaway loop that is never run */
static int own_backend_fd(struct ev_loop *loop)
{
	struct ev_loop *tmp;
	ev_embed e;
	int fd;

	if (!(ev_embeddable_backends() & EVBACKEND_EPOLL))
		return -EOPNOTSUPP;
	tmp = ev_loop_new(EVFLAG_NOENV | EVFLAG_NOSIGMASK);
	if (!tmp)
		return loop_err();
	ev_embed_init(&e, NULL, loop);
	ev_embed_start(tmp, &e);
	fd = e.io.fd;
	ev_embed_stop(tmp, &e);
	ev_loop_destroy(tmp);
	return fd >= 0 ? fd : -EOPNOTSUPP;
}

static void own_io_close(struct rmsgi_ownloop *own, ev_io *w, int fd)
{
	if (ev_is_active(w)) {
		ev_ref(own->loop); /* it was unref'ed when started */
		ev_io_stop(own->loop, w);
	}
	if (fd >= 0)
		close(fd);
}

static void own_free(struct rmsgi_ownloop *own)
{
	own_io_close(own, &own->kick_w, own->kick_fd);
	own_io_close(own, &own->tfd_w, own->tfd);
	rmsgi_timers_destroy(own->ts);
	if (own->loop)
		ev_loop_destroy(own->loop);
	free(own);
}

void rmsgi_own_destroy(struct rmsgi_ownloop *own)
{
	own_free(own);
}

static int own_new(struct rmsgi_ownloop **own_p)
{
	struct rmsgi_ownloop *own = calloc(1, sizeof(*own));
	int ret;

	if (!own)
		return -ENOMEM;
	own->kick_fd = own->tfd = -1;
	if (!(ev_supported_backends() & EVBACKEND_EPOLL)) {
		ret = -EOPNOTSUPP;
		goto fail;
	}
	own->loop =
		ev_loop_new(EVBACKEND_EPOLL | EVFLAG_NOENV | EVFLAG_NOSIGMASK);
	if (!own->loop) {
		ret = loop_err();
		goto fail;
	}
	ret = own_backend_fd(own->loop);
	if (ret < 0)
		goto fail;
	own->epfd = ret;
	if (rmsgi_timers_create(own_sooner, own_touch, own, &own->ts)) {
		ret = -ENOMEM;
		goto fail;
	}
	own->kick_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (own->kick_fd < 0) {
		ret = loop_err();
		goto fail;
	}
	own->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (own->tfd < 0) {
		ret = loop_err();
		goto fail;
	}
	/* internal watchers do not keep an ev_run() of the loop alive */
	ev_io_init(&own->kick_w, kick_cb, own->kick_fd, EV_READ);
	own->kick_w.data = own;
	ev_io_start(own->loop, &own->kick_w);
	ev_unref(own->loop);
	ev_io_init(&own->tfd_w, tfd_cb, own->tfd, EV_READ);
	own->tfd_w.data = own;
	ev_io_start(own->loop, &own->tfd_w);
	ev_unref(own->loop);
	ev_set_userdata(own->loop, own);
	ev_set_invoke_pending_cb(own->loop, own_invoke);
	/* libev puts started watchers into its epoll set in its next pass
	 * only: one now, so the eventfd and the timerfd are in it */
	ev_run(own->loop, EVRUN_NOWAIT);
	*own_p = own;
	return 0;
fail:
	own_free(own);
	return ret;
}

int rmsg_ctx_create_fd(const struct rmsg_cfg *cfg, struct rmsg_ctx **ctx_p)
{
	struct rmsgi_ownloop *own = NULL;
	int ret;

	if (!ctx_p)
		return -EINVAL;
	ret = own_new(&own);
	if (ret)
		return ret;
	ret = rmsgi_ctx_new(own->loop, cfg, own, own->ts, &own->ctx);
	if (ret) {
		own_free(own);
		return ret;
	}
	*ctx_p = own->ctx;
	return 0;
}

int rmsg_ctx_fd(const struct rmsg_ctx *ctx)
{
	if (!ctx)
		return -EINVAL;
	if (!ctx->own)
		return -EOPNOTSUPP;
	return ctx->own->epfd;
}

int rmsg_ctx_timeout(const struct rmsg_ctx *ctx, int *ms_p)
{
	struct rmsgi_ownloop *own;
	double due, left;

	if (!ctx || !ms_p)
		return -EINVAL;
	own = ctx->own;
	if (!own)
		return -EOPNOTSUPP;
	if (own->kicked || !rmsgi_list_empty(&ctx->dirty)) {
		*ms_p = 0;
		return 0;
	}
	if (!rmsgi_timers_next(own->ts, &due)) {
		*ms_p = -1;
		return 0;
	}
	left = (due - rmsgi_mono_now()) * 1000.0;
	if (left <= 0)
		*ms_p = 0;
	else if (left >= (double)INT32_MAX)
		*ms_p = INT32_MAX;
	else
		*ms_p = (int)left + ((double)(int)left < left);
	return 0;
}

int rmsg_ctx_progress(struct rmsg_ctx *ctx)
{
	struct rmsgi_ownloop *own;
	unsigned n;
	bool more;
	int i;

	if (!ctx)
		return -EINVAL;
	if (ctx->in_cb || ctx->flushing)
		return -EBUSY;
	own = ctx->own;
	if (!own) {
		/* the app's loop: what its prepare watcher would do,
		 * without spinning and without arming notification */
		n = rmsgi_ctx_work(ctx, false, false, &more);
		return (int)RMSGI_MIN(n, (unsigned)INT32_MAX);
	}
	if (own->busy)
		return -EBUSY;
	own->busy = true;
	rmsgi_timers_set_busy(own->ts, true);
	own->events = 0;
	own->touched = false;
	ev_run(own->loop, EVRUN_NOWAIT);
	/* what the callbacks queued goes now, not on the next call */
	n = rmsgi_ctx_work(ctx, false, true, &more);
	/* a watcher started in this pass is in the epoll set only after
	 * the next one: run it now (a new connection's socket, a write
	 * that must wait) */
	for (i = 0; i < 2 && own->touched && !more; i++) {
		own->touched = false;
		ev_run(own->loop, EVRUN_NOWAIT);
		n += rmsgi_ctx_work(ctx, false, true, &more);
	}
	n += own->events;
	rmsgi_timers_set_busy(own->ts, false);
	own->busy = false;
	if (more || own->touched || !rmsgi_list_empty(&ctx->dirty))
		rmsgi_own_dirty(own);
	own_arm(own);
	return (int)RMSGI_MIN(n, (unsigned)INT32_MAX);
}
