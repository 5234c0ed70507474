// SPDX-License-Identifier: MIT
/*
 * close_inflight.c - close with sends in flight, eager and rendezvous:
 * every send callback runs exactly once (0 or -ECANCELED), no callback
 * runs inside rmsg_conn_close(), on_close runs once and last, and sends
 * after the close fail at once with -ENOTCONN (their callbacks never run).
 * Then the same from the other side: the server closes while the client
 * sends, and the client's sends that were not done fail with the reason
 * the connection failed, the -ESHUTDOWN its on_close reads (some must:
 * the server reads 50 of 400). Either way the side that did not close
 * reads -ESHUTDOWN (a close on purpose, not a reset),
 * and, after the client's close, every send that completed with 0 was
 * received. Round 2 closes 2 ms after the burst, with frames part
 * written: they still arrive whole, before the close; and the other way
 * round, a send the close cancelled never arrives (a rendezvous send the
 * peer was already reading completes on its acknowledgement).
 */
#include <string.h>

#include "common.h"

#define NSEND 400

static struct ev_loop *loop;
static struct rmsg_listener *lis;
static struct rmsg_conn *client;
static int cbs[NSEND], cb_ok, cb_err, closes, round_no, srv_msgs;
/* round 1: failed sends whose status is not the client's close reason */
static int cb_err_other, cb_err_other_status;
static int in_close, client_closed, after_close_cbs, srv_reason;
static uint8_t *buf;

static void send_done(struct rmsg_conn *c, int status, void *arg)
{
	int i = (int)(intptr_t)arg;

	T_ASSERT(!in_close, "callback ran inside rmsg_conn_close");
	T_ASSERT(!client_closed, "callback %d after on_close", i);
	T_ASSERT(i >= 0 && i < NSEND, "bad arg");
	cbs[i]++;
	if (status == 0) {
		cb_ok++;
		return;
	}
	cb_err++;
	if (round_no != 1) {
		/* this side closed: rmsg_conn_close.3 */
		T_ASSERT(status == -ECANCELED, "round %d: send %d: %s",
			 round_no, i, rmsg_strerror(status));
	} else if (status != -ESHUTDOWN) {
		/* the peer closed: a send that was not done fails with the
		 * reason the connection failed (rmsg_send.3), which on_close
		 * reports; compared there */
		cb_err_other++;
		cb_err_other_status = status;
	}
}

static void never(struct rmsg_conn *c, int status, void *arg)
{
	after_close_cbs++;
}

static void blast(struct rmsg_conn *c)
{
	int i;

	for (i = 0; i < NSEND; i++) {
		/* every 8th goes by rendezvous on RDMA */
		struct iovec iov = {buf, i % 8 ? 100 : 200000};

		T_OK(rmsg_send(c, &iov, 1, send_done, (void *)(intptr_t)i));
	}
}

static void close_later(int revents, void *arg)
{
	in_close = 1;
	T_OK(rmsg_conn_close(arg));
	in_close = 0;
}

static void cli_est(struct rmsg_conn *c, void *arg)
{
	struct iovec iov = {buf, 10};

	blast(c);
	if (round_no == 2)
		ev_once(loop, -1, 0, 0.002, close_later, c);
	if (round_no == 0) {
		/* local close right away: most sends are still queued */
		in_close = 1;
		T_OK(rmsg_conn_close(c));
		in_close = 0;
		/* covers: rmsg_send.3 ENOTCONN */
		T_ASSERT(rmsg_send(c, &iov, 1, never, NULL) == -ENOTCONN,
			 "send after close");
		T_OK(rmsg_conn_close(c)); /* harmless again */
	}
}

static void srv_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	/* round 1: the server closes in the middle of the stream */
	if (++srv_msgs == 50 && round_no == 1)
		rmsg_conn_close(c);
}

static void start_round(void);

static void on_close(struct rmsg_conn *c, int reason, void *arg)
{
	int i;

	if (c == client) {
		for (i = 0; i < NSEND; i++)
			T_ASSERT(cbs[i] == 1, "round %d: send %d: %d callbacks",
				 round_no, i, cbs[i]);
		if (round_no != 1) {
			T_ASSERT(reason == 0, "local close reason %d", reason);
		} else {
			T_ASSERT(reason == -ESHUTDOWN,
				 "server closed, client read %s",
				 rmsg_strerror(reason));
			/* sends that were not done failed with that reason */
			T_ASSERT(cb_err_other == 0,
				 "%d sends failed with %s, not the close "
				 "reason",
				 cb_err_other,
				 rmsg_strerror(cb_err_other_status));
		}
		client_closed = 1;
	} else {
		srv_reason = reason;
	}
	if (++closes % 2 == 0) {
		printf("round %d: %d sends completed, %d failed, %d received, "
		       "server close reason %d\n",
		       round_no, cb_ok, cb_err, srv_msgs, srv_reason);
		if (round_no == 0)
			T_ASSERT(cb_err > 0, "nothing was canceled");
		if (round_no != 1) {
			T_ASSERT(srv_reason == -ESHUTDOWN,
				 "client closed, server read %s",
				 rmsg_strerror(srv_reason));
			T_ASSERT(srv_msgs == cb_ok,
				 "%d sends completed, %d received", cb_ok,
				 srv_msgs);
		} else {
			T_ASSERT(srv_reason == 0, "server close reason %d",
				 srv_reason);
			/* the server read 50 of 400 and closed: the client's
			 * credits cannot cover the other 350 */
			T_ASSERT(cb_err > 0,
				 "the server's close failed no send");
		}
		if (++round_no == 3)
			rmsg_listener_close(lis);
		else
			start_round();
	}
}

static struct rmsg_ctx *cctx;
static char uri[128];

static void start_round(void)
{
	struct rmsg_conn_ops cops = {.on_established = cli_est,
				     .on_close = on_close};

	memset(cbs, 0, sizeof(cbs));
	cb_ok = cb_err = srv_msgs = cb_err_other = 0;
	client_closed = 0;
	T_OK(rmsg_connect(cctx, uri, NULL, &cops, NULL, &client));
}

int main(void)
{
	struct rmsg_conn_ops sops = {.on_msg = srv_msg, .on_close = on_close};
	struct rmsg_ctx *sctx;

	t_require_transport();
	loop = ev_default_loop(0);
	buf = calloc(1, 200000);
	T_OK(rmsg_ctx_create(loop, NULL, &sctx));
	T_OK(rmsg_ctx_create(loop, NULL, &cctx));
	t_listen(sctx, NULL, &sops, NULL, NULL, &lis, uri, sizeof(uri));
	start_round();
	t_deadline(loop, 300);
	ev_run(loop, 0);
	T_ASSERT(round_no == 3, "rounds %d", round_no);
	T_ASSERT(after_close_cbs == 0, "a failed send ran its callback");
	T_OK(rmsg_ctx_destroy(cctx));
	T_OK(rmsg_ctx_destroy(sctx));
	free(buf);
	return 0;
}
