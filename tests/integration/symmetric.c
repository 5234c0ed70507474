// SPDX-License-Identifier: MIT
/*
 * symmetric.c - two well-behaved peers that ask each other for more than
 * their credits at once: each side reads NREADS x 64 KiB of the other's
 * exported region (over TCP each read is a request the peer answers)
 * and makes NCALLS RPC calls to the other (each reply is an answer),
 * with 4 credits and a short keepalive. Answers must keep flowing while
 * both sides are at their bound of queued answers (issue 14: a peer that
 * asks more than it lets us answer is held at its reserve, two honest
 * ones must not wait for each other): every read and call completes
 * with 0, nobody closes, within the deadline.
 */
#include <string.h>
#include <sys/uio.h>

#include "common.h"

#define NREADS 200
#define NCALLS 200
#define RL (64 * 1024)

static struct ev_loop *loop;
static uint8_t reg[2][RL], dst[2][4][RL];
static struct rmsg_mr *mr[2];
static int reads_ok[2], calls_ok[2], failures, closes;
static struct rmsg_conn *conns[2];

static void read_done(struct rmsg_conn *c, int st, void *arg)
{
	int side = (int)(intptr_t)arg;

	if (st) {
		failures++;
		fprintf(stderr, "side %d: read failed: %s\n", side,
			rmsg_strerror(st));
		return;
	}
	reads_ok[side]++;
}

static void call_done(struct rmsg_conn *c, int st, struct rmsg_msg *r,
		      void *arg)
{
	int side = (int)(intptr_t)arg;

	if (st) {
		failures++;
		fprintf(stderr, "side %d: call failed: %s\n", side,
			rmsg_strerror(st));
		return;
	}
	calls_ok[side]++;
}

static void handler(struct rmsg_conn *c, struct rmsg_req *req,
		    struct rmsg_msg *m, void *arg)
{
	struct iovec iov = {(void *)rmsg_msg_data(m), rmsg_msg_len(m)};

	T_OK(rmsg_reply(req, &iov, 1));
}

static void established(struct rmsg_conn *c, void *arg)
{
	int side = (int)(intptr_t)arg;
	static uint8_t desc[2][RMSG_MR_DESC_SIZE]; /* sent from here */
	struct iovec iov = {desc[side], RMSG_MR_DESC_SIZE};

	conns[side] = c;
	T_OK(rmsg_mr_export(mr[side], c, 0, 0, RMSG_ACCESS_REMOTE_READ,
			    desc[side]));
	T_OK(rmsg_send(c, &iov, 1, NULL, NULL));
}

static void on_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	int side = (int)(intptr_t)arg, i;
	static uint8_t peer_desc[2][RMSG_MR_DESC_SIZE];
	static char ping[16] = "ping"; /* calls copy nothing: static */
	struct iovec civ = {ping, sizeof(ping)};

	T_ASSERT(rmsg_msg_len(m) == RMSG_MR_DESC_SIZE, "len %zu",
		 rmsg_msg_len(m));
	memcpy(peer_desc[side], rmsg_msg_data(m), RMSG_MR_DESC_SIZE);
	for (i = 0; i < NREADS; i++) {
		struct iovec iov = {dst[side][i % 4], RL};

		T_OK(rmsg_read(c, &iov, 1, peer_desc[side], 0, read_done, arg));
	}
	for (i = 0; i < NCALLS; i++)
		T_OK(rmsg_call(c, 7, &civ, 1, 0, call_done, arg, NULL));
}

static void on_close(struct rmsg_conn *c, int reason, void *arg)
{
	closes++;
	T_ASSERT(reason == 0 || reason == -ESHUTDOWN, "side %d closed: %s",
		 (int)(intptr_t)arg, rmsg_strerror(reason));
	if (closes == 2)
		ev_break(loop, EVBREAK_ALL);
}

static void check(struct ev_loop *l, ev_timer *w, int revents)
{
	if (reads_ok[0] + reads_ok[1] + calls_ok[0] + calls_ok[1] ==
	    2 * (NREADS + NCALLS)) {
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
	T_OK(rmsg_cfg_create(&cfg));
	T_OK(rmsg_cfg_set_credits(cfg, 4));
	T_OK(rmsg_cfg_set_send_queue(cfg, 4096));
	T_OK(rmsg_cfg_set_keepalive_ms(cfg, 300));
	for (i = 0; i < 2; i++) {
		T_OK(rmsg_ctx_create(loop, cfg, &ctx[i]));
		T_OK(rmsg_mr_reg(ctx[i], reg[i], RL, RMSG_ACCESS_REMOTE_READ,
				 &mr[i]));
		T_OK(rmsg_handle(ctx[i], 7, handler, NULL));
	}
	t_listen(ctx[0], cfg, &ops, NULL, (void *)0, &lis, uri, sizeof(uri));
	T_OK(rmsg_connect(ctx[1], uri, cfg, &ops, (void *)1, &c));
	ev_timer_init(&w, check, 0.01, 0.01);
	ev_timer_start(loop, &w);
	t0 = ev_time();
	t_deadline(loop, 60);
	ev_run(loop, 0);
	T_ASSERT(failures == 0, "%d failures", failures);
	T_ASSERT(closes == 2, "closes %d", closes);
	printf("symmetric over %s: %d reads and %d calls each way with 4 "
	       "credits, all answered, in %.2f s\n",
	       t_transport(), NREADS, NCALLS, ev_time() - t0);
	rmsg_listener_close(lis);
	for (i = 0; i < 2; i++) {
		T_OK(rmsg_mr_dereg(mr[i]));
		T_OK(rmsg_ctx_destroy(ctx[i]));
	}
	rmsg_cfg_destroy(cfg);
	return 0;
}
