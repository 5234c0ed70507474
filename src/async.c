// SPDX-License-Identifier: MIT
/*
 * async.c - handing work to a context's loop from other threads.
 *
 * The only thread-safe entry point of the library: rmsg_ctx_submit()
 * queues a function under a mutex and wakes the loop; the loop runs the
 * queue in submission order. Everything else about a context stays on
 * its loop thread.
 *
 * The wake-up: on the app's libev loop an ev_async; on a private loop
 * (fd mode, ownloop.c) the loop's eventfd, whose watcher drains it and
 * only then takes the queue, so a push that lands after the drain
 * leaves the descriptor readable (libev's own ev_async cannot be used
 * there: its wake-up is skipped while the loop is not blocked in libev,
 * and a private loop never is).
 *
 * Lifetime: the queue is counted. The context holds one reference and
 * each group listener it is a member of holds one (group.c), so the
 * home's thread can push to a member that is being destroyed on its own
 * thread: once rmsg_ctx_destroy() has closed the queue, a push fails
 * (-ESHUTDOWN) and touches nothing of the context. The wake-up is made
 * under the queue's mutex, so the close waits for a push in progress.
 */
#include <pthread.h>
#include <stdlib.h>

#include "rmsg_int.h"

struct rmsgi_async {
	pthread_mutex_t mu;
	unsigned refs; /* the context and each group it serves */
	bool closed;   /* the context is going: pushes fail */
	struct rmsgi_work *head, *tail;
	struct rmsg_ctx *ctx; /* read only while open */
	ev_async w;	      /* the app's libev loop */
};

/* takes the whole queue under the lock, then runs it outside */
static void async_run(struct rmsg_ctx *ctx)
{
	struct rmsgi_async *a = ctx->async;
	struct rmsgi_work *list;

	pthread_mutex_lock(&a->mu);
	list = a->head;
	a->head = a->tail = NULL;
	pthread_mutex_unlock(&a->mu);
	while (list) {
		struct rmsgi_work *wk = list;
		bool heap = wk->heap; /* the library's may free itself */

		list = wk->next;
		RMSGI_USER_CB(ctx, wk->fn(ctx, wk->arg));
		if (heap)
			free(wk);
	}
}

static void async_cb(struct ev_loop *loop, ev_async *w, int revents)
{
	struct rmsg_ctx *ctx = w->data;

	(void)loop;
	(void)revents;
	async_run(ctx);
	rmsgi_ctx_flush(ctx);
}

void rmsgi_async_poll(struct rmsg_ctx *ctx)
{
	async_run(ctx);
}

int rmsgi_async_init(struct rmsg_ctx *ctx)
{
	struct rmsgi_async *a = calloc(1, sizeof(*a));

	if (!a)
		return -ENOMEM;
	pthread_mutex_init(&a->mu, NULL);
	a->refs = 1;
	a->ctx = ctx;
	if (!ctx->own) {
		ev_async_init(&a->w, async_cb);
		a->w.data = ctx;
		ev_async_start(ctx->loop, &a->w);
		ev_unref(ctx->loop);
	}
	ctx->async = a;
	return 0;
}

struct rmsgi_async *rmsgi_async_get(struct rmsg_ctx *ctx)
{
	struct rmsgi_async *a = ctx->async;

	pthread_mutex_lock(&a->mu);
	a->refs++;
	pthread_mutex_unlock(&a->mu);
	return a;
}

void rmsgi_async_put(struct rmsgi_async *a)
{
	unsigned left;

	pthread_mutex_lock(&a->mu);
	left = --a->refs;
	pthread_mutex_unlock(&a->mu);
	if (left)
		return;
	pthread_mutex_destroy(&a->mu);
	free(a);
}

bool rmsgi_async_closed(const struct rmsg_ctx *ctx)
{
	/* the flag changes only on the loop thread, the caller's */
	return ctx->async->closed;
}

void rmsgi_async_fini(struct rmsg_ctx *ctx)
{
	struct rmsgi_async *a = ctx->async;

	if (!a)
		return;
	pthread_mutex_lock(&a->mu);
	a->closed = true;
	pthread_mutex_unlock(&a->mu);
	/* work already submitted still runs, on a live context */
	async_run(ctx);
	if (!ctx->own) {
		ev_ref(ctx->loop);
		ev_async_stop(ctx->loop, &a->w);
	}
}

void rmsgi_async_free(struct rmsg_ctx *ctx)
{
	if (!ctx->async)
		return;
	rmsgi_async_put(ctx->async);
	ctx->async = NULL;
}

int rmsgi_async_push(struct rmsgi_async *a, struct rmsgi_work *wk)
{
	wk->next = NULL;
	pthread_mutex_lock(&a->mu);
	if (a->closed) {
		pthread_mutex_unlock(&a->mu);
		return -ESHUTDOWN;
	}
	if (a->tail)
		a->tail->next = wk;
	else
		a->head = wk;
	a->tail = wk;
	if (a->ctx->own)
		rmsgi_own_wake(a->ctx->own);
	else
		ev_async_send(a->ctx->loop, &a->w);
	pthread_mutex_unlock(&a->mu);
	return 0;
}

int rmsg_ctx_submit(struct rmsg_ctx *ctx, rmsg_work_cb fn, void *arg)
{
	struct rmsgi_work *wk;
	int ret;

	if (!ctx || !fn || !ctx->async)
		return -EINVAL;
	wk = malloc(sizeof(*wk));
	if (!wk)
		return -ENOMEM;
	wk->fn = fn;
	wk->arg = arg;
	wk->heap = true;
	ret = rmsgi_async_push(ctx->async, wk);
	if (ret)
		free(wk);
	return ret;
}
