// SPDX-License-Identifier: MIT
/*
 * bidir.c - two peers that stream large messages at each other at once,
 * with keepalive off and the smallest TCP byte window: each side's queued
 * messages wait for bytes of the other's window, and the bytes each owes
 * the other must still go back (a CREDIT frame, as its own messages
 * cannot carry them). Every message arrives whole and in order, both
 * ways, nobody closes with an error, within the deadline; without that
 * rule both sides waited for each other for ever.
 */
#include <string.h>
#include <sys/uio.h>

#include "common.h"

#define NMSG 64
#define ML (64 * 1024)

static struct ev_loop *loop;
static uint8_t out[2][ML];
static int got[2], sent[2], failures, closes;
static struct rmsg_conn *conns[2];

static void send_done(struct rmsg_conn *c, int st, void *arg)
{
	int side = (int)(intptr_t)arg;

	(void)c;
	if (st) {
		failures++;
		fprintf(stderr, "side %d: send failed: %s\n", side,
			rmsg_strerror(st));
		return;
	}
	sent[side]++;
}

/* both sides start together, once both are up: each posts what the
 * other's window takes, and the rest waits for its bytes */
static void start(struct ev_loop *l, ev_timer *w, int revents)
{
	int side, i;

	(void)l, (void)w, (void)revents;
	for (side = 0; side < 2; side++)
		for (i = 0; i < NMSG; i++) {
			struct iovec iov = {out[side], ML};

			T_OK(rmsg_send(conns[side], &iov, 1, send_done,
				       (void *)(intptr_t)side));
		}
}

static void established(struct rmsg_conn *c, void *arg)
{
	static ev_timer go;

	conns[(int)(intptr_t)arg] = c;
	if (conns[0] && conns[1]) {
		ev_timer_init(&go, start, 0.05, 0);
		ev_timer_start(loop, &go);
	}
}

static void on_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	int side = (int)(intptr_t)arg;

	(void)c;
	T_ASSERT(rmsg_msg_len(m) == ML, "len %zu", rmsg_msg_len(m));
	/* the other side's pattern, in order */
	T_ASSERT(t_check(rmsg_msg_data(m), ML, (uint64_t)(1 - side)) == 0,
		 "side %d: message %d corrupt", side, got[side]);
	got[side]++;
}

static void on_close(struct rmsg_conn *c, int reason, void *arg)
{
	(void)c;
	closes++;
	T_ASSERT(reason == 0 || reason == -ESHUTDOWN, "side %d closed: %s",
		 (int)(intptr_t)arg, rmsg_strerror(reason));
	if (closes == 2)
		ev_break(loop, EVBREAK_ALL);
}

static void check(struct ev_loop *l, ev_timer *w, int revents)
{
	(void)revents;
	if (got[0] == NMSG && got[1] == NMSG && sent[0] == NMSG &&
	    sent[1] == NMSG) {
		ev_timer_stop(l, w);
		rmsg_conn_close(conns[1]);
	}
}

int main(void)
{
	struct rmsg_conn_ops ops = {.on_established = established,
				    .on_msg = on_msg,
				    .on_close = on_close};
	struct rmsg_ctx *ctx[2];
	struct rmsg_listener *lis;
	struct rmsg_cfg *cfg;
	struct rmsg_conn *c;
	ev_timer w;
	char uri[128];
	double t0;
	int i;

	t_require_transport();
	loop = ev_default_loop(0);
	for (i = 0; i < 2; i++)
		t_fill(out[i], ML, (uint64_t)i);
	T_OK(rmsg_cfg_create(&cfg));
	T_OK(rmsg_cfg_set_keepalive_ms(cfg, 0));
	T_OK(rmsg_cfg_set_tcp_window(cfg, 64 * 1024));
	for (i = 0; i < 2; i++)
		T_OK(rmsg_ctx_create(loop, cfg, &ctx[i]));
	t_listen(ctx[0], cfg, &ops, NULL, (void *)0, &lis, uri, sizeof(uri));
	T_OK(rmsg_connect(ctx[1], uri, cfg, &ops, (void *)1, &c));
	ev_timer_init(&w, check, 0.01, 0.01);
	ev_timer_start(loop, &w);
	t0 = ev_time();
	t_deadline(loop, 60 * t_scale());
	ev_run(loop, 0);
	T_ASSERT(failures == 0, "%d failures", failures);
	T_ASSERT(closes == 2, "closes %d", closes);
	printf("bidir over %s: %d messages of %d bytes each way at once, "
	       "keepalive off, a 64 KiB window, in %.2f s\n",
	       t_transport(), NMSG, ML, ev_time() - t0);
	rmsg_listener_close(lis);
	for (i = 0; i < 2; i++)
		T_OK(rmsg_ctx_destroy(ctx[i]));
	rmsg_cfg_destroy(cfg);
	return 0;
}
