// SPDX-License-Identifier: MIT
/*
 * big.c - 64 MiB messages, both ways, from 3 pieces each: larger than
 * rxe's 8 MiB per-operation limit, so the rendezvous read is split. The
 * echo is checked byte for byte. RMSG_TEST_BIG_COUNT sets the number of
 * round trips (default 2).
 */
#include <string.h>

#include "common.h"

#define BIG ((size_t)64 << 20)

static struct rmsg_listener *lis;
static uint8_t *out;
static int rounds, want_rounds, closes;

static void cli_send(struct rmsg_conn *c)
{
	struct iovec iov[3] = {
		{out, 1000},
		{out + 1000, BIG / 2},
		{out + 1000 + BIG / 2, BIG - 1000 - BIG / 2},
	};

	t_fill(out, BIG, (uint64_t)rounds + 1);
	T_OK(rmsg_send(c, iov, 3, NULL, NULL));
}

static void cli_est(struct rmsg_conn *c, void *arg)
{
	cli_send(c);
}

static void cli_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	T_ASSERT(rmsg_msg_len(m) == BIG, "len %zu", rmsg_msg_len(m));
	T_ASSERT(t_check(rmsg_msg_data(m), BIG, (uint64_t)rounds + 1) == 0,
		 "round %d payload", rounds);
	if (++rounds == want_rounds)
		rmsg_conn_close(c);
	else
		cli_send(c);
}

static void echo_done(struct rmsg_conn *c, int status, void *arg)
{
	T_ASSERT(status == 0, "echo status %d", status);
	rmsg_msg_release(arg);
}

static void srv_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	struct iovec iov = {(void *)rmsg_msg_data(m), rmsg_msg_len(m)};

	T_OK(rmsg_msg_hold(m));
	T_OK(rmsg_send(c, &iov, 1, echo_done, m));
}

static void on_close(struct rmsg_conn *c, int reason, void *arg)
{
	if (++closes == 2)
		rmsg_listener_close(lis);
}

int main(void)
{
	struct rmsg_conn_ops sops = {.on_msg = srv_msg, .on_close = on_close};
	struct rmsg_conn_ops cops = {.on_established = cli_est,
				     .on_msg = cli_msg,
				     .on_close = on_close};
	const char *env = getenv("RMSG_TEST_BIG_COUNT");
	struct rmsg_ctx *sctx, *cctx;
	struct rmsg_conn *c;
	struct ev_loop *loop;
	char uri[128];
	ev_tstamp t0;

	t_require_transport();
	want_rounds = env ? atoi(env) : 2;
	loop = ev_default_loop(0);
	out = malloc(BIG);
	T_OK(rmsg_ctx_create(loop, NULL, &sctx));
	T_OK(rmsg_ctx_create(loop, NULL, &cctx));
	t_listen(sctx, NULL, &sops, NULL, NULL, &lis, uri, sizeof(uri));
	T_OK(rmsg_connect(cctx, uri, NULL, &cops, NULL, &c));
	t_deadline(loop, 600);
	t0 = ev_time();
	ev_run(loop, 0);
	T_ASSERT(rounds == want_rounds, "rounds %d", rounds);
	printf("big over %s: %d round trips of 64 MiB in %.1f s\n",
	       t_transport(), rounds, ev_time() - t0);
	T_OK(rmsg_ctx_destroy(cctx));
	T_OK(rmsg_ctx_destroy(sctx));
	free(out);
	return 0;
}
