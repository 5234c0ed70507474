// SPDX-License-Identifier: MIT
/*
 * destroy_live.c - sends queued before on_established are delivered, in
 * order; then both contexts are destroyed with connections still open
 * and sends in flight: every send callback runs exactly once (0 or
 * -ECANCELED), every on_close runs once with -ECANCELED, all before
 * rmsg_ctx_destroy() returns; destroying from a callback is refused with
 * -EBUSY. Busy-poll mode is used on the client side to cover it. The
 * server holds some of the messages it received and releases them in
 * its on_close, which runs inside rmsg_ctx_destroy(): a release there
 * is valid (it was a use after free of the transport's state). It
 * leaves the last ABANDONED of them held: rmsg_ctx_destroy.3 says they
 * become invalid, so the context frees them and their connection (a
 * leak under ASan/valgrind before).
 */
#include <string.h>

#include "common.h"

#define EARLY 10
#define LATE 200

static struct rmsg_ctx *sctx, *cctx;
static struct rmsg_conn *client;
static int cbs[EARLY + LATE], srv_recvd, closes, busy_seen;
static int cli_reason = 1, srv_reason = 1, cli_closes, srv_closes;
static uint8_t buf[20000];
#define HELD 16
#define ABANDONED 2
static struct rmsg_msg *held[HELD];
static int nheld;

static void send_done(struct rmsg_conn *c, int status, void *arg)
{
	int i = (int)(intptr_t)arg;

	T_ASSERT(status == 0 || status == -ECANCELED, "status %d", status);
	T_ASSERT(cli_closes == 0, "send %d: callback after on_close", i);
	cbs[i]++;
}

static void srv_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	if (srv_recvd % 2 && nheld < HELD) {
		rmsg_msg_hold(m);
		held[nheld++] = m;
	}
	if (srv_recvd < EARLY) {
		T_ASSERT(rmsg_msg_len(m) == (size_t)srv_recvd + 1,
			 "early message %d out of order", srv_recvd);
	}
	if (++srv_recvd == EARLY + 20) {
		/* covers: rmsg_ctx_destroy.3 EBUSY */
		T_ASSERT(rmsg_ctx_destroy(sctx) == -EBUSY,
			 "destroy inside a callback");
		busy_seen = 1;
		ev_break(EV_DEFAULT, EVBREAK_ALL);
	}
}

static void cli_est(struct rmsg_conn *c, void *arg)
{
	int i;

	for (i = 0; i < LATE; i++) {
		struct iovec iov = {buf, i % 10 ? 100 : sizeof(buf)};

		T_OK(rmsg_send(c, &iov, 1, send_done,
			       (void *)(intptr_t)(EARLY + i)));
	}
}

static void on_close(struct rmsg_conn *c, int reason, void *arg)
{
	closes++;
	if (c == client) {
		cli_closes++;
		cli_reason = reason;
	} else {
		srv_closes++;
		srv_reason = reason;
		/* inside the server's rmsg_ctx_destroy() */
		while (nheld > ABANDONED)
			rmsg_msg_release(held[--nheld]);
	}
}

int main(void)
{
	struct rmsg_conn_ops sops = {.on_msg = srv_msg, .on_close = on_close};
	struct rmsg_conn_ops cops = {.on_established = cli_est,
				     .on_close = on_close};
	struct rmsg_listener *lis;
	struct rmsg_cfg *cfg;
	struct ev_loop *loop;
	char uri[128];
	int i;

	t_require_transport();
	loop = ev_default_loop(0);
	T_OK(rmsg_cfg_create(&cfg));
	T_OK(rmsg_cfg_set_busy_poll_us(cfg, 20));
	T_OK(rmsg_ctx_create(loop, NULL, &sctx));
	T_OK(rmsg_ctx_create(loop, cfg, &cctx));
	t_listen(sctx, NULL, &sops, NULL, NULL, &lis, uri, sizeof(uri));
	T_OK(rmsg_connect(cctx, uri, NULL, &cops, NULL, &client));
	for (i = 0; i < EARLY; i++) {
		struct iovec iov = {buf, (size_t)i + 1};

		T_OK(rmsg_send(client, &iov, 1, send_done,
			       (void *)(intptr_t)i));
	}
	t_deadline(loop, 120);
	ev_run(loop, 0);
	T_ASSERT(busy_seen, "server got %d messages", srv_recvd);
	T_OK(rmsg_ctx_destroy(cctx));
	for (i = 0; i < EARLY + LATE; i++)
		T_ASSERT(cbs[i] == 1, "send %d: %d callbacks", i, cbs[i]);
	T_ASSERT(closes == 1 && cli_closes == 1, "closes %d, client's %d",
		 closes, cli_closes);
	T_ASSERT(cli_reason == -ECANCELED, "client on_close: %s",
		 rmsg_strerror(cli_reason));
	T_OK(rmsg_ctx_destroy(sctx));
	/* the server's loop did not run since: its connection was still
	 * open when its context was destroyed (rmsg_ctx_destroy.3) */
	T_ASSERT(closes == 2 && srv_closes == 1, "server conn closes %d",
		 srv_closes);
	T_ASSERT(srv_reason == -ECANCELED, "server on_close: %s",
		 rmsg_strerror(srv_reason));
	rmsg_cfg_destroy(cfg);
	printf("destroy_live over %s: %d callbacks once each, both contexts "
	       "destroyed with live connections\n",
	       t_transport(), EARLY + LATE);
	return 0;
}
