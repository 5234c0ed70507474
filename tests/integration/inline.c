// SPDX-License-Identifier: MIT
/*
 * inline.c - every message size from 0 to SWEEP_MAX bytes, content
 * checked, both directions. Over RDMA a frame (32-byte header included)
 * up to the queue pair's inline limit is copied by the device at post
 * time: sent at once from inside rmsg_send() when nothing waits ahead of
 * it (the "direct" path, at most 4 pieces, the first send of a loop
 * iteration), and flagged inline when it is posted from the queue. The
 * library asks for 256 bytes of inline data and does not tell the
 * application what the device granted, so the sweep covers every size up
 * to well past any inline limit (providers grant a few hundred bytes),
 * through each path:
 *   1. one message at a time, sent outside any callback, 1 to 4 pieces
 *      of malloc'ed memory (the direct path up to the limit);
 *   2. the other way, from rmsg_buf_alloc() memory, up to 24 pieces
 *      (more than the send work request takes: copied);
 *   3. bursts of 32 sizes sent in one go (posted from the queue);
 *   4. a receiver with the smallest eager size, 64: there the eager size,
 *      not the inline limit, ends the direct path, and larger messages
 *      go by rendezvous on RDMA.
 * Every byte is checked on arrival, every send callback must run once
 * with 0 and never inside rmsg_send(). Over TCP the same sweep runs
 * through the TCP transport's own direct writes.
 */
#include "xfer.h"

#define SWEEP_MAX 1536
#define SMALL_EAGER 64
#define SMALL_SWEEP 400

static struct ev_loop *loop;
static struct xfer_end srv = {.name = "server"}, cli = {.name = "client"};
static uint64_t seed = 1;

static void one_at_a_time(struct xfer_end *from, struct xfer_end *to,
			  size_t max, int maxiov, enum xfer_mem mem)
{
	size_t len;

	for (len = 0; len <= max; len++) {
		unsigned long done = from->done;

		xfer_send_wait(loop, from, to, len, seed++, maxiov, mem);
		/* the completion rule: never inside the call */
		T_ASSERT(from->done == done,
			 "%s: a send callback ran inside rmsg_send()",
			 from->name);
		xfer_drain(loop, from, to, 30);
	}
}

static void bursts(struct xfer_end *from, struct xfer_end *to, size_t max,
		   enum xfer_mem mem)
{
	size_t len;

	for (len = 0; len <= max; len++) {
		xfer_send_wait(loop, from, to, len, seed++, 1 + (int)(len % 6),
			       mem);
		if (len % 32 == 31)
			xfer_drain(loop, from, to, 30);
	}
	xfer_drain(loop, from, to, 30);
}

static void run_pair(struct rmsg_cfg *scfg, size_t max, bool full)
{
	struct rmsg_listener *l;

	memset(&srv.up, 0, sizeof(srv) - offsetof(struct xfer_end, up));
	memset(&cli.up, 0, sizeof(cli) - offsetof(struct xfer_end, up));
	T_OK(rmsg_ctx_create(loop, scfg, &srv.ctx));
	T_OK(rmsg_ctx_create(loop, NULL, &cli.ctx));
	xfer_pair(loop, &srv, scfg, &cli, NULL, &l);

	one_at_a_time(&cli, &srv, max, 4, XFER_MALLOC);
	if (full) {
		one_at_a_time(&srv, &cli, max, 24, XFER_POOL);
		bursts(&cli, &srv, max, XFER_POOL);
		bursts(&srv, &cli, max, XFER_MALLOC);
	} else {
		bursts(&cli, &srv, max, XFER_MALLOC);
	}

	T_OK(rmsg_conn_close(cli.c));
	T_RUN_UNTIL(loop, srv.closed && cli.closed, 30);
	T_ASSERT(cli.reason == 0, "client closed with %s",
		 rmsg_strerror(cli.reason));
	T_ASSERT(srv.reason == -ESHUTDOWN, "server closed with %s",
		 rmsg_strerror(srv.reason));
	T_OK(rmsg_listener_close(l));
	T_OK(rmsg_ctx_destroy(cli.ctx));
	T_OK(rmsg_ctx_destroy(srv.ctx));
}

int main(void)
{
	struct rmsg_cfg *cfg;
	unsigned long to_srv, to_cli;

	t_require_transport();
	loop = ev_default_loop(0);
	t_deadline(loop, 600);

	run_pair(NULL, SWEEP_MAX, true);
	to_srv = srv.received;
	to_cli = cli.received;

	T_OK(rmsg_cfg_create(&cfg));
	T_OK(rmsg_cfg_set_eager_size(cfg, SMALL_EAGER));
	run_pair(cfg, SMALL_SWEEP, false);
	rmsg_cfg_destroy(cfg);

	printf("inline: %s: every size 0..%d, %lu messages to the server, "
	       "%lu to the client; 0..%d to a receiver with eager %d: %lu\n",
	       t_transport(), SWEEP_MAX, to_srv, to_cli, SMALL_SWEEP,
	       SMALL_EAGER, srv.received);
	return 0;
}
