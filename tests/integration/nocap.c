// SPDX-License-Identifier: MIT
/*
 * nocap.c - a context takes more than 512 connections at the default
 * configuration (issue 20): over RDMA one shared receive queue of 16384
 * receives at 32 credits a connection refused the 513th ("SRQ full");
 * now connections start with few credits and the context adds receive
 * groups as they fill (rmsg(7), rdma://). NCONN (600, or
 * RMSG_TEST_NOCAP_CONNS) connections from one client context to one
 * server context, at most 64 connecting at a time, all open at once:
 * each carries one message each way, then the client closes them all.
 * Every connection comes up, every on_close runs once: 0 on the
 * client's side, -ESHUTDOWN (the peer closed) on the server's. Over TCP too (the same promise, no device limit).
 */
#include <string.h>

#include "common.h"

#define OUTSTANDING 64

struct peer {
	struct rmsg_conn *c;
	int idx, up, echoed, closed;
	uint8_t buf[64];
};

static struct rmsg_listener *lis;
static struct peer *peers;
static int nconn, started, ups, echoed, closes, srv_ups, srv_closes;
static struct rmsg_ctx *cctx;
static char uri[128];
static struct rmsg_conn_ops cops;

static void start_more(void)
{
	while (started < nconn && started - echoed < OUTSTANDING) {
		struct peer *p = &peers[started];

		p->idx = started++;
		T_OK(rmsg_connect(cctx, uri, NULL, &cops, p, &p->c));
	}
}

static void cli_est(struct rmsg_conn *c, void *arg)
{
	struct peer *p = arg;
	struct iovec iov = {p->buf, sizeof(p->buf)};

	p->up++;
	ups++;
	t_fill(p->buf, sizeof(p->buf), (uint64_t)p->idx);
	T_OK(rmsg_send(c, &iov, 1, NULL, NULL));
}

static void cli_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	struct peer *p = arg;
	int i;

	T_ASSERT(rmsg_msg_len(m) == sizeof(p->buf) &&
			 t_check(rmsg_msg_data(m), sizeof(p->buf),
				 (uint64_t)p->idx) == 0,
		 "conn %d: echo", p->idx);
	T_ASSERT(!p->echoed, "conn %d: a second echo", p->idx);
	p->echoed = 1;
	if (++echoed < nconn) {
		start_more();
		return;
	}
	/* all of them open at once: now they go */
	for (i = 0; i < nconn; i++)
		T_OK(rmsg_conn_close(peers[i].c));
}

static void cli_close(struct rmsg_conn *c, int reason, void *arg)
{
	struct peer *p = arg;

	T_ASSERT(reason == 0, "conn %d closed with %d (%s)", p->idx, reason,
		 rmsg_strerror(reason));
	T_ASSERT(!p->closed, "conn %d: on_close twice", p->idx);
	p->closed = 1;
	if (++closes == nconn && srv_closes == nconn)
		rmsg_listener_close(lis);
}

static void srv_est(struct rmsg_conn *c, void *arg)
{
	srv_ups++;
}

static void srv_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	struct iovec iov = {(void *)rmsg_msg_data(m), rmsg_msg_len(m)};

	/* copied out at once: the buffer goes back when on_msg returns */
	T_OK(rmsg_send(c, &iov, 1, NULL, NULL));
}

static void srv_close(struct rmsg_conn *c, int reason, void *arg)
{
	/* the client closed them: the peer's close */
	T_ASSERT(reason == -ESHUTDOWN, "server side closed with %d (%s)",
		 reason, rmsg_strerror(reason));
	if (++srv_closes == nconn && closes == nconn)
		rmsg_listener_close(lis);
}

int main(void)
{
	struct rmsg_conn_ops sops = {.on_established = srv_est,
				     .on_msg = srv_msg,
				     .on_close = srv_close};
	const char *env = getenv("RMSG_TEST_NOCAP_CONNS");
	struct rmsg_ctx *sctx;
	struct rmsg_cfg *scfg;
	struct ev_loop *loop;

	t_require_transport();
	nconn = env ? atoi(env) : 600;
	T_ASSERT(nconn > 0, "RMSG_TEST_NOCAP_CONNS=%s", env);
	peers = calloc((size_t)nconn, sizeof(*peers));
	T_ASSERT(peers, "calloc");
	cops.on_established = cli_est;
	cops.on_msg = cli_msg;
	cops.on_close = cli_close;
	loop = ev_default_loop(0);
	/* the listener's own bound (max_conns, 4096 by default) is not
	 * what this test is about */
	T_OK(rmsg_cfg_create(&scfg));
	T_OK(rmsg_cfg_set_max_conns(scfg, (unsigned)nconn + 16));
	T_OK(rmsg_ctx_create(loop, NULL, &sctx));
	T_OK(rmsg_ctx_create(loop, NULL, &cctx));
	t_listen(sctx, scfg, &sops, NULL, NULL, &lis, uri, sizeof(uri));
	rmsg_cfg_destroy(scfg);
	start_more();
	t_deadline(loop, 600);
	ev_run(loop, 0);
	T_ASSERT(ups == nconn, "%d of %d connections came up", ups, nconn);
	T_ASSERT(srv_ups == nconn, "server: %d of %d up", srv_ups, nconn);
	T_ASSERT(echoed == nconn, "%d of %d echoed", echoed, nconn);
	T_ASSERT(closes == nconn && srv_closes == nconn,
		 "closes: client %d server %d of %d", closes, srv_closes,
		 nconn);
	printf("nocap over %s: %d connections open at once on one context, "
	       "default configuration\n",
	       t_transport(), nconn);
	T_OK(rmsg_ctx_destroy(cctx));
	T_OK(rmsg_ctx_destroy(sctx));
	free(peers);
	return 0;
}
