// SPDX-License-Identifier: MIT
/*
 * async.c - handing work to a context's loop from other threads.
 *
 * The only thread-safe entry point of the library: rmsg_ctx_submit()
 * queues a function under a mutex and wakes the loop with ev_async; the
 * loop runs the queue in submission order. Everything else about a
 * context stays on its loop thread.
 */
#include <pthread.h>
#include <stdlib.h>

#include "rmsg_int.h"

struct rmsgi_async {
	pthread_mutex_t mu;
	struct rmsgi_work *head, *tail;
	ev_async w;
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
		ctx->in_cb++;
		wk->fn(ctx, wk->arg);
		ctx->in_cb--;
		if (heap)
			free(wk);
	}
}

static void async_cb(struct ev_loop *loop, ev_async *w, int revents)
{
	struct rmsg_ctx *ctx = w->data;

	async_run(ctx);
	rmsgi_ctx_flush(ctx);
}

int rmsgi_async_init(struct rmsg_ctx *ctx)
{
	struct rmsgi_async *a = calloc(1, sizeof(*a));

	if (!a)
		return -ENOMEM;
	pthread_mutex_init(&a->mu, NULL);
	ev_async_init(&a->w, async_cb);
	a->w.data = ctx;
	ev_async_start(ctx->loop, &a->w);
	ev_unref(ctx->loop);
	ctx->async = a;
	return 0;
}

void rmsgi_async_fini(struct rmsg_ctx *ctx)
{
	struct rmsgi_async *a = ctx->async;

	if (!a)
		return;
	/* work already submitted still runs, on a live context */
	async_run(ctx);
	ev_ref(ctx->loop);
	ev_async_stop(ctx->loop, &a->w);
	pthread_mutex_destroy(&a->mu);
	free(a);
	ctx->async = NULL;
}

void rmsgi_async_push(struct rmsg_ctx *ctx, struct rmsgi_work *wk)
{
	struct rmsgi_async *a = ctx->async;

	wk->next = NULL;
	pthread_mutex_lock(&a->mu);
	if (a->tail)
		a->tail->next = wk;
	else
		a->head = wk;
	a->tail = wk;
	pthread_mutex_unlock(&a->mu);
	ev_async_send(ctx->loop, &a->w);
	/* a private loop never blocks in libev, so libev's own wake-up
	 * is not written: its descriptor must become readable */
	if (ctx->own)
		rmsgi_own_wake(ctx->own);
}

int rmsg_ctx_submit(struct rmsg_ctx *ctx, rmsg_work_cb fn, void *arg)
{
	struct rmsgi_work *wk;

	if (!ctx || !fn || !ctx->async)
		return -EINVAL;
	wk = malloc(sizeof(*wk));
	if (!wk)
		return -ENOMEM;
	wk->fn = fn;
	wk->arg = arg;
	wk->heap = true;
	rmsgi_async_push(ctx, wk);
	return 0;
}
