// SPDX-License-Identifier: MIT
/*
 * fairness.c - traffic that never stops does not starve the loop.
 *
 * Two connections of one context keep WINDOW messages in flight for ever:
 * the server echoes each one from on_msg, the client sends the next from
 * on_msg. Every completion makes another, so a context that handled
 * completions "until none are left" before giving the loop back would
 * never let libev run a timer again (over RDMA the completion queue is
 * never empty; rmsg.7 "The event loop"). The test's timer must fire while
 * the traffic runs; it stops the traffic and closes. An alarm turns a
 * starved loop into a failure instead of a hang.
 */
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

#define WINDOW 8

static struct ev_loop *loop;
static struct rmsg_conn *cli;
static char buf[64];
static unsigned long rts, rts_at_timer;
static int stop, fired, closed, srv_closed;

static void starved(int sig)
{
	static const char m[] = "FAIL fairness: the loop never ran the "
				"test's timer (starved by the traffic)\n";

	(void)sig;
	(void)!write(2, m, sizeof(m) - 1);
	_exit(1);
}

static void send_one(struct rmsg_conn *c)
{
	struct iovec iov = {.iov_base = buf, .iov_len = sizeof(buf)};
	int ret = rmsg_send(c, &iov, 1, NULL, NULL);

	T_ASSERT(ret == 0, "rmsg_send: %s", rmsg_strerror(ret));
}

static void srv_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	(void)m;
	(void)arg;
	send_one(c);
}

static void srv_close(struct rmsg_conn *c, int reason, void *arg)
{
	(void)c;
	(void)reason;
	(void)arg;
	srv_closed = 1;
}

static void cli_est(struct rmsg_conn *c, void *arg)
{
	int i;

	(void)arg;
	for (i = 0; i < WINDOW; i++)
		send_one(c);
}

static void cli_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	(void)m;
	(void)arg;
	rts++;
	if (!stop)
		send_one(c);
}

static void cli_close(struct rmsg_conn *c, int reason, void *arg)
{
	(void)c;
	(void)arg;
	T_ASSERT(reason == 0, "client on_close %d (%s)", reason,
		 rmsg_strerror(reason));
	closed = 1;
}

static void timer_cb(struct ev_loop *l, ev_timer *w, int revents)
{
	(void)l;
	(void)w;
	(void)revents;
	/* the traffic was running when the timer came: it did not wait
	 * for the traffic to end */
	fired = 1;
	rts_at_timer = rts;
	stop = 1;
	rmsg_conn_close(cli);
}

static void ticker_cb(struct ev_loop *l, ev_timer *w, int revents)
{
	(void)revents;
	/* start the clock only once the traffic runs */
	if (rts < 100)
		return;
	ev_timer_stop(l, w);
	{
		static ev_timer t;

		ev_timer_init(&t, timer_cb, 0.05, 0);
		ev_timer_start(l, &t);
	}
}

int main(void)
{
	struct rmsg_conn_ops sops = {.on_msg = srv_msg, .on_close = srv_close};
	struct rmsg_conn_ops cops = {.on_established = cli_est,
				     .on_msg = cli_msg,
				     .on_close = cli_close};
	struct rmsg_listener *l;
	struct rmsg_ctx *ctx;
	ev_timer ticker;
	char uri[128];

	t_require_transport();
	loop = ev_default_loop(0);
	signal(SIGALRM, starved);
	alarm((unsigned)(60 * t_scale()) + 1);
	T_OK(rmsg_ctx_create(loop, NULL, &ctx));
	t_listen(ctx, NULL, &sops, NULL, NULL, &l, uri, sizeof(uri));
	T_OK(rmsg_connect(ctx, uri, NULL, &cops, NULL, &cli));
	ev_timer_init(&ticker, ticker_cb, 0.01, 0.01);
	ev_timer_start(loop, &ticker);
	T_RUN_UNTIL(loop, closed && srv_closed, 60);
	alarm(0);
	T_ASSERT(fired, "the timer did not fire");
	T_ASSERT(rts_at_timer >= 100, "round trips when the timer fired: %lu",
		 rts_at_timer);
	T_OK(rmsg_listener_close(l));
	T_OK(rmsg_ctx_destroy(ctx));
	printf("fairness: %s: %lu round trips (window %d) before the timer "
	       "ran; it ran while the traffic went on\n",
	       t_transport(), rts_at_timer, WINDOW);
	return 0;
}
