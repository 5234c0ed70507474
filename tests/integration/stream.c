// SPDX-License-Identifier: MIT
/*
 * stream.c - both directions at once: each side sends N messages with
 * log-uniform sizes from 1 byte to 1 MiB, each split into a random iovec
 * (up to 40 pieces, beyond the 16 SGEs that go straight to the device),
 * with a window of sends in flight. The receiver regenerates the sizes
 * from the same seed and checks order, length and every byte.
 *
 * N is RMSG_TEST_MSGS, by default 100000 on TCP and 10000 on RDMA
 * (Soft-RoCE under qemu emulation moves tens of MB/s).
 */
#include <string.h>

#include "common.h"

#define WINDOW 32
#define MAX_PIECES 40

struct side {
	const char *name;
	struct rmsg_conn *c;
	uint64_t dir; /* seeds this side's outgoing stream */
	int sent, acked, recvd, inflight;
	uint64_t rx_seed; /* size generator of the incoming stream */
	uint64_t tx_seed;
	uint64_t bytes;
	int closed;
};

static struct ev_loop *loop;
static struct rmsg_listener *lis;
static struct side cli = {.name = "client", .dir = 1};
static struct side srv = {.name = "server", .dir = 2};
static int nmsgs;

/* sizes come from a per-direction generator so both ends agree */
static size_t next_size(uint64_t *state)
{
	uint64_t saved;
	size_t n;

	saved = t_rand();
	t_seed(*state);
	n = t_size_log(1, 1 << 20);
	*state = t_rand();
	t_seed(saved);
	return n;
}

static void pump(struct side *s);

static void send_done(struct rmsg_conn *c, int status, void *arg)
{
	void **blk = arg;
	struct side *s = blk[0];

	T_ASSERT(status == 0, "send status %d", status);
	free(blk);
	s->acked++;
	s->inflight--;
	pump(s);
}

/* keeps WINDOW sends in flight; closes once everything is checked */
static void pump(struct side *s)
{
	while (s->sent < nmsgs && s->inflight < WINDOW) {
		size_t len = next_size(&s->tx_seed);
		struct iovec iov[MAX_PIECES];
		void **blk = malloc(sizeof(void *) + len + 1);
		uint8_t *buf = (uint8_t *)(blk + 1);
		int n, ret;

		blk[0] = s;
		t_fill(buf, len, s->dir << 32 | (uint64_t)s->sent);
		n = t_split(buf, len, iov, MAX_PIECES);
		ret = rmsg_send(s->c, iov, n, send_done, blk);
		/* the window stays below the queue bound: no -EAGAIN */
		T_OK(ret);
		s->sent++;
		s->inflight++;
	}
	if (cli.acked == nmsgs && srv.acked == nmsgs && srv.recvd == nmsgs &&
	    cli.recvd == nmsgs && !cli.closed)
		rmsg_conn_close(cli.c);
}

static void on_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	struct side *s = arg;
	struct side *peer = s == &cli ? &srv : &cli;
	size_t want = next_size(&s->rx_seed);

	T_ASSERT(rmsg_msg_len(m) == want, "%s: message %d: len %zu want %zu",
		 s->name, s->recvd, rmsg_msg_len(m), want);
	T_ASSERT(t_check(rmsg_msg_data(m), want,
			 peer->dir << 32 | (uint64_t)s->recvd) == 0,
		 "%s: message %d: payload differs", s->name, s->recvd);
	s->recvd++;
	s->bytes += want;
	pump(&cli);
	pump(&srv);
}

static void on_est(struct rmsg_conn *c, void *arg)
{
	struct side *s = arg;

	s->c = c;
	pump(s);
}

static void on_close(struct rmsg_conn *c, int reason, void *arg)
{
	struct side *s = arg;

	s->closed++;
	if (s == &cli)
		T_ASSERT(reason == 0, "client close reason %d", reason);
	if (cli.closed && srv.closed)
		rmsg_listener_close(lis);
}

static int on_accept(struct rmsg_listener *l, struct rmsg_conn *c,
		     const void *pd, size_t pdlen, void *arg)
{
	return rmsg_conn_set_arg(c, &srv);
}

int main(void)
{
	struct rmsg_conn_ops ops = {.on_established = on_est,
				    .on_msg = on_msg,
				    .on_close = on_close};
	struct rmsg_ctx *sctx, *cctx;
	const char *env = getenv("RMSG_TEST_MSGS");
	char uri[128];
	ev_tstamp t0;

	t_require_transport();
	nmsgs = env				 ? atoi(env)
		: !strcmp(t_transport(), "rdma") ? 10000
						 : 100000;
	cli.tx_seed = srv.rx_seed = 11;
	srv.tx_seed = cli.rx_seed = 22;
	loop = ev_default_loop(0);
	T_OK(rmsg_ctx_create(loop, NULL, &sctx));
	T_OK(rmsg_ctx_create(loop, NULL, &cctx));
	t_listen(sctx, NULL, &ops, on_accept, NULL, &lis, uri, sizeof(uri));
	T_OK(rmsg_connect(cctx, uri, NULL, &ops, &cli, &cli.c));
	t_deadline(loop, 1200);
	t0 = ev_time();
	ev_run(loop, 0);
	T_ASSERT(cli.recvd == nmsgs && srv.recvd == nmsgs,
		 "received %d and %d of %d", cli.recvd, srv.recvd, nmsgs);
	T_ASSERT(cli.acked == nmsgs && srv.acked == nmsgs,
		 "send callbacks %d and %d of %d", cli.acked, srv.acked, nmsgs);
	T_ASSERT(cli.closed == 1 && srv.closed == 1, "closes %d %d", cli.closed,
		 srv.closed);
	printf("stream over %s: 2 x %d messages, %.1f MB checked in %.1f s\n",
	       t_transport(), nmsgs, (cli.bytes + srv.bytes) / 1e6,
	       ev_time() - t0);
	T_OK(rmsg_ctx_destroy(cctx));
	T_OK(rmsg_ctx_destroy(sctx));
	return 0;
}
