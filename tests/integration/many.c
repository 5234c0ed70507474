// SPDX-License-Identifier: MIT
/*
 * many.c - 64 connections on one client context to one server context,
 * all at once: each does 20 checked round trips (sizes up to 64 KiB, so
 * rendezvous runs on many connections at the same time), then closes.
 */
#include <string.h>

#include "common.h"

#define NCONN 64
#define ROUNDS 20

struct peer {
	struct rmsg_conn *c;
	int idx, round, closed;
	uint8_t buf[65536];
};

static struct rmsg_listener *lis;
static struct peer peers[NCONN];
static int closes, srv_closes, done;

static size_t size_of(int idx, int round)
{
	return (size_t)((idx * 7919 + round * 104729) % 65536) + 1;
}

static void send_round(struct peer *p)
{
	size_t len = size_of(p->idx, p->round);
	struct iovec iov = {p->buf, len};

	t_fill(p->buf, len, (uint64_t)p->idx << 16 | (uint64_t)p->round);
	T_OK(rmsg_send(p->c, &iov, 1, NULL, NULL));
}

static void cli_est(struct rmsg_conn *c, void *arg)
{
	send_round(arg);
}

static void cli_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	struct peer *p = arg;
	size_t len = size_of(p->idx, p->round);

	T_ASSERT(rmsg_msg_len(m) == len, "conn %d round %d: len", p->idx,
		 p->round);
	T_ASSERT(t_check(rmsg_msg_data(m), len,
			 (uint64_t)p->idx << 16 | (uint64_t)p->round) == 0,
		 "conn %d round %d: payload", p->idx, p->round);
	if (++p->round == ROUNDS) {
		done++;
		rmsg_conn_close(c);
		return;
	}
	send_round(p);
}

/* echo: held across the send, released in the send callback */
static void echo_done(struct rmsg_conn *c, int status, void *arg)
{
	rmsg_msg_release(arg);
}

static void srv_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	struct iovec iov = {(void *)rmsg_msg_data(m), rmsg_msg_len(m)};

	T_OK(rmsg_msg_hold(m));
	T_OK(rmsg_send(c, &iov, 1, echo_done, m));
}

static void cli_close(struct rmsg_conn *c, int reason, void *arg)
{
	struct peer *p = arg;

	T_ASSERT(reason == 0, "conn %d closed with %d (%s)", p->idx, reason,
		 rmsg_strerror(reason));
	p->closed++;
	if (++closes == NCONN && srv_closes == NCONN)
		rmsg_listener_close(lis);
}

static void srv_close(struct rmsg_conn *c, int reason, void *arg)
{
	if (++srv_closes == NCONN && closes == NCONN)
		rmsg_listener_close(lis);
}

int main(void)
{
	struct rmsg_conn_ops sops = {.on_msg = srv_msg, .on_close = srv_close};
	struct rmsg_conn_ops cops = {.on_established = cli_est,
				     .on_msg = cli_msg,
				     .on_close = cli_close};
	struct rmsg_ctx *sctx, *cctx;
	struct ev_loop *loop;
	char uri[128];
	int i;

	t_require_transport();
	loop = ev_default_loop(0);
	T_OK(rmsg_ctx_create(loop, NULL, &sctx));
	T_OK(rmsg_ctx_create(loop, NULL, &cctx));
	t_listen(sctx, NULL, &sops, NULL, NULL, &lis, uri, sizeof(uri));
	for (i = 0; i < NCONN; i++) {
		peers[i].idx = i;
		T_OK(rmsg_connect(cctx, uri, NULL, &cops, &peers[i],
				  &peers[i].c));
	}
	t_deadline(loop, 300);
	ev_run(loop, 0);
	T_ASSERT(done == NCONN, "%d of %d connections finished", done, NCONN);
	T_ASSERT(srv_closes == NCONN, "server saw %d closes", srv_closes);
	printf("many over %s: %d connections x %d round trips on one "
	       "context\n",
	       t_transport(), NCONN, ROUNDS);
	T_OK(rmsg_ctx_destroy(cctx));
	T_OK(rmsg_ctx_destroy(sctx));
	return 0;
}
