// SPDX-License-Identifier: MIT
/*
 * eager.c - two ends with different eager sizes, credits, send queues
 * and message size limits (rmsg_cfg_set_eager_size.3): messages of each
 * side's eager size - 1, eager size and + 1 (on RDMA: the last eager
 * frame and the first rendezvous of either announcement), 0 and 1 byte,
 * and the message size limit, in both directions, one at a time and in
 * bursts larger than the receiver's credits and the sender's queue, from
 * malloc'ed and from rmsg_buf_alloc() memory; every byte checked, every
 * callback once with 0. The limit + 1 is refused by rmsg_send() with
 * -EMSGSIZE; a peer that sends more than the receiver's limit (within
 * its own) is disconnected, the receiver's on_close getting -EMSGSIZE.
 * The client's context busy-polls for 200 us.
 * Each context is made with its side's cfg (over RDMA the eager size is
 * a setting of the context: its receive buffers are shared) and the
 * same cfg goes to rmsg_listen() / rmsg_connect().
 */
#include "xfer.h"

#define S_EAGER 1024
#define C_EAGER 4096
/* above both eager sizes: the limit goes by rendezvous on RDMA */
#define S_MAX 20000
#define C_MAX 30001

static struct ev_loop *loop;
static struct xfer_end srv = {.name = "server"}, cli = {.name = "client"};

/* eager + 64: past any rounding of the receive buffers, so an eager
 * frame of that size could not fit (rmsg.7: refused by the device) */
static const size_t sizes[] = {0,	    1,
			       S_EAGER - 1, S_EAGER,
			       S_EAGER + 1, S_EAGER + 64,
			       C_EAGER - 1, C_EAGER,
			       C_EAGER + 1, C_EAGER + 64,
			       S_MAX};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

static uint64_t seed = 1;

static void one_by_one(struct xfer_end *from, struct xfer_end *to,
		       enum xfer_mem mem)
{
	size_t i;

	for (i = 0; i < NSIZES; i++) {
		xfer_send_wait(loop, from, to, sizes[i], seed++, 8, mem);
		xfer_drain(loop, from, to, 30);
	}
}

/* every size @rounds times, without waiting: past credits and queue */
static void burst(struct xfer_end *from, struct xfer_end *to, int rounds,
		  enum xfer_mem mem)
{
	int r;
	size_t i;

	for (r = 0; r < rounds; r++)
		for (i = 0; i < NSIZES; i++)
			xfer_send_wait(loop, from, to, sizes[NSIZES - 1 - i],
				       seed++, 1 + r % 12, mem);
	xfer_drain(loop, from, to, 60);
}

static void many_pieces(struct xfer_end *from, struct xfer_end *to,
			size_t eager)
{
	int counts[] = {(int)(eager / 16), (int)(eager / 16) + 1, RMSG_IOV_MAX};
	size_t i;

	for (i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
		if (counts[i] > RMSG_IOV_MAX)
			continue;
		xfer_send_wait(loop, from, to, 4 * eager + 3, seed++,
			       -counts[i], i % 2 ? XFER_POOL : XFER_MALLOC);
		xfer_drain(loop, from, to, 30);
	}
}

static struct rmsg_cfg *side_cfg(size_t eager, unsigned credits, unsigned queue,
				 size_t max)
{
	struct rmsg_cfg *cfg;
	size_t got;

	T_OK(rmsg_cfg_create(&cfg));
	T_OK(rmsg_cfg_set_eager_size(cfg, eager));
	T_OK(rmsg_cfg_get_eager_size(cfg, &got));
	T_ASSERT(got == eager, "eager size %zu read back as %zu", eager, got);
	T_OK(rmsg_cfg_set_credits(cfg, credits));
	T_OK(rmsg_cfg_set_send_queue(cfg, queue));
	T_OK(rmsg_cfg_set_max_msg_size(cfg, max));
	return cfg;
}

int main(void)
{
	struct rmsg_cfg *scfg, *ccfg;
	struct rmsg_listener *l;
	uint8_t *big;
	struct iovec iov;
	int ret;

	t_require_transport();
	loop = ev_default_loop(0);
	t_deadline(loop, 300);
	scfg = side_cfg(S_EAGER, 4, 64, S_MAX);
	ccfg = side_cfg(C_EAGER, 16, 8, C_MAX);
	/* and the client's context polls (rmsg_cfg_set_busy_poll_us) */
	T_OK(rmsg_cfg_set_busy_poll_us(ccfg, 200));
	T_OK(rmsg_ctx_create(loop, scfg, &srv.ctx));
	T_OK(rmsg_ctx_create(loop, ccfg, &cli.ctx));
	xfer_pair(loop, &srv, scfg, &cli, ccfg, &l);
	rmsg_cfg_destroy(scfg);
	rmsg_cfg_destroy(ccfg);

	one_by_one(&cli, &srv, XFER_MALLOC);
	one_by_one(&srv, &cli, XFER_POOL);
	one_by_one(&cli, &srv, XFER_POOL);
	one_by_one(&srv, &cli, XFER_MALLOC);
	/* the client's queue of 8 and the server's 4 credits are passed */
	burst(&cli, &srv, 6, XFER_MALLOC);
	burst(&srv, &cli, 6, XFER_POOL);
	/* both at once */
	burst(&cli, &srv, 3, XFER_POOL);
	burst(&srv, &cli, 3, XFER_MALLOC);

	/* a rendezvous request lists one segment (16 bytes) per piece and
	 * must fit the receiver's eager buffer: as many pieces as fit, one
	 * more, and RMSG_IOV_MAX (rmsg_send.3 takes any number up to it) */
	many_pieces(&cli, &srv, S_EAGER);
	many_pieces(&srv, &cli, C_EAGER);

	/* S_MAX, the server's limit, went both ways above; one more byte
	 * is refused by the server's rmsg_send(), as is one more than the
	 * client's limit by the client's */
	big = calloc(1, C_MAX + 1);
	T_ASSERT(big, "out of memory");
	iov.iov_base = big;
	iov.iov_len = S_MAX + 1;
	ret = rmsg_send(srv.c, &iov, 1, NULL, NULL);
	/* covers: rmsg_send.3 EMSGSIZE */
	T_ASSERT(ret == -EMSGSIZE, "server: %d bytes, limit %d: %s", S_MAX + 1,
		 S_MAX, rmsg_strerror(ret));
	iov.iov_len = C_MAX + 1;
	ret = rmsg_send(cli.c, &iov, 1, NULL, NULL);
	/* covers: rmsg_send.3 EMSGSIZE */
	T_ASSERT(ret == -EMSGSIZE, "client: %d bytes, limit %d: %s", C_MAX + 1,
		 C_MAX, rmsg_strerror(ret));
	T_ASSERT(srv.received && cli.received, "nothing received");
	printf("eager: %s: %lu messages to the server, %lu to the client, "
	       "eager %d/%d, all checked\n",
	       t_transport(), srv.received, cli.received, S_EAGER, C_EAGER);

	/* within the client's limit, over the server's: the server closes
	 * with -EMSGSIZE (rmsg_cfg_set_max_msg_size.3) */
	iov.iov_len = S_MAX + 1;
	T_OK(rmsg_send(cli.c, &iov, 1, NULL, NULL));
	T_RUN_UNTIL(loop, srv.closed && cli.closed, 30);
	T_ASSERT(srv.reason == -EMSGSIZE, "server closed with %s, want %s",
		 rmsg_strerror(srv.reason), rmsg_strerror(-EMSGSIZE));
	T_ASSERT(cli.reason != 0, "client closed with 0");
	T_ASSERT(srv.want_head == srv.want_tail, "the server lost messages");
	T_OK(rmsg_listener_close(l));
	T_OK(rmsg_ctx_destroy(cli.ctx));
	T_OK(rmsg_ctx_destroy(srv.ctx));
	free(big);
	return 0;
}
