// SPDX-License-Identifier: MIT
/*
 * loop_uv - librmsg driven by a libuv loop.
 *
 *   loop_uv [URI]
 *
 * Runs an echo server and its client in one process, each on a context
 * from rmsg_ctx_create_fd(), makes calls and sends messages, checks the
 * echoes and exits 0 when all of them came back and both ends closed
 * (loop_app.h). URI is where the server listens, port 0 for any free
 * port: tcp://127.0.0.1:0 by default, rdma://ADDR:0 over RDMA.
 *
 * Each context gets a uv_poll_t on rmsg_ctx_fd(), which calls
 * rmsg_ctx_progress() when the descriptor is readable, and a uv_timer_t
 * set from rmsg_ctx_timeout() after each progress. The descriptor alone
 * would do (it also becomes readable when a timer of the context is
 * due); the timer shows how a loop that prefers its own timers does it.
 */
#include <stdio.h>
#include <uv.h>
#include <rmsg.h>

#include "loop_app.h"

struct driver {
	struct rmsg_ctx *ctx;
	struct app *app;
	uv_poll_t poll;
	uv_timer_t timer;
};

static void progress(struct driver *d);

static void on_readable(uv_poll_t *h, int status, int events)
{
	progress(h->data);
}

static void on_timer(uv_timer_t *h)
{
	progress(h->data);
}

static void closed(uv_handle_t *h)
{
	/* the handles live in main()'s drivers: nothing to free */
}

/* run what is ready, re-arm the timer, and stop once the app is done */
static void progress(struct driver *d)
{
	int ms;

	rmsg_ctx_progress(d->ctx); /* the callbacks run in here */
	if (d->app->done) {
		/* uv_run() returns once every handle is closed */
		uv_stop(d->poll.loop);
		return;
	}
	if (rmsg_ctx_timeout(d->ctx, &ms) == 0 && ms >= 0)
		uv_timer_start(&d->timer, on_timer, (uint64_t)ms, 0);
	else
		uv_timer_stop(&d->timer);
}

static int drive(uv_loop_t *loop, struct driver *d, struct rmsg_ctx *ctx,
		 struct app *a)
{
	int ret;

	d->ctx = ctx;
	d->app = a;
	ret = uv_poll_init(loop, &d->poll, rmsg_ctx_fd(ctx));
	if (ret)
		return ret;
	d->poll.data = d;
	uv_timer_init(loop, &d->timer);
	d->timer.data = d;
	/* a first progress at once; from then on, the timer is re-armed */
	uv_timer_start(&d->timer, on_timer, 0, 0);
	return uv_poll_start(&d->poll, UV_READABLE, on_readable);
}

int main(int argc, char **argv)
{
	const char *uri = argc > 1 ? argv[1] : "tcp://127.0.0.1:0";
	uv_loop_t *loop = uv_default_loop();
	struct driver d[2];
	struct app a;
	int i, ret;

	if (app_start(&a, "loop_uv", uri))
		return 1;
	ret = drive(loop, &d[0], a.server, &a);
	if (!ret)
		ret = drive(loop, &d[1], a.client, &a);
	if (ret) {
		fprintf(stderr, "loop_uv: %s\n", uv_strerror(ret));
		return 1;
	}

	uv_run(loop, UV_RUN_DEFAULT);

	/* close the handles, and let the loop finish closing them, before
	 * the descriptors close with their contexts */
	for (i = 0; i < 2; i++) {
		uv_close((uv_handle_t *)&d[i].poll, closed);
		uv_close((uv_handle_t *)&d[i].timer, closed);
	}
	uv_run(loop, UV_RUN_DEFAULT);
	uv_loop_close(loop);
	return app_end(&a);
}
