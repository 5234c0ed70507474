// SPDX-License-Identifier: MIT
/*
 * dereg_queued.c - rmsg_mr_dereg() while operations whose buffers lie in
 * the region are still queued (issue 30, case 6). rmsg_mr_reg(3): it
 * fails with -EBUSY and changes nothing while operations of this
 * process with a buffer in the region are still queued on a connection
 * (not yet handed to the transport), on either transport; once their
 * callbacks ran it succeeds.
 *
 * 1. Before the connection is established: a message sent from the
 *    client's region is queued; dereg says -EBUSY.
 * 2. Established: NW writes from the region and NR reads into it are
 *    posted at once (more than the credits: most of them wait on the
 *    send queue); dereg says -EBUSY before the loop turns. Every
 *    operation then completes with 0, the bytes read back are those
 *    written, and dereg succeeds.
 */
#include <string.h>
#include <sys/uio.h>

#include "common.h"

#define NW 256
#define NR 64
#define PIECE 256
#define LLEN (NW * PIECE + NR * PIECE)

static struct ev_loop *loop;
static struct rmsg_conn *srv, *cli;
static struct rmsg_mr *smr;
static uint8_t desc[RMSG_MR_DESC_SIZE];
static int srv_est_n, cli_est_n, got, closed, done, st[NW + NR];
static uint8_t remote[NW * PIECE];
static uint8_t *local;

static void srv_est(struct rmsg_conn *c, void *arg)
{
	(void)arg;
	srv = c;
	T_OK(rmsg_mr_export(smr, c, 0, sizeof(remote),
			    RMSG_ACCESS_REMOTE_WRITE | RMSG_ACCESS_REMOTE_READ,
			    desc));
	srv_est_n = 1;
}

static void srv_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	(void)c;
	(void)m;
	(void)arg;
	got++;
}

static void any_close(struct rmsg_conn *c, int reason, void *arg)
{
	(void)c;
	(void)arg;
	fprintf(stderr, "closed: %s\n", rmsg_strerror(reason));
	closed++;
}

static void cli_est(struct rmsg_conn *c, void *arg)
{
	(void)c;
	(void)arg;
	cli_est_n = 1;
}

static void op_done(struct rmsg_conn *c, int status, void *arg)
{
	(void)c;
	*(int *)arg = status;
	done++;
}

int main(void)
{
	struct rmsg_conn_ops sops = {.on_established = srv_est,
				     .on_msg = srv_msg,
				     .on_close = any_close};
	struct rmsg_conn_ops cops = {.on_established = cli_est,
				     .on_close = any_close};
	struct rmsg_ctx *sctx, *cctx;
	struct rmsg_listener *lis;
	struct rmsg_mr *lmr;
	struct rmsg_cfg *cfg;
	char uri[128];
	int i, ret;

	t_require_transport();
	loop = ev_default_loop(0);
	t_deadline(loop, 300);
	local = aligned_alloc(4096, LLEN);
	T_ASSERT(local, "no memory");
	T_OK(rmsg_ctx_create(loop, NULL, &sctx));
	T_OK(rmsg_ctx_create(loop, NULL, &cctx));
	T_OK(rmsg_mr_reg(sctx, remote, sizeof(remote),
			 RMSG_ACCESS_REMOTE_WRITE | RMSG_ACCESS_REMOTE_READ,
			 &smr));
	T_OK(rmsg_mr_reg(cctx, local, LLEN, 0, &lmr));
	T_OK(rmsg_cfg_create(&cfg));
	T_OK(rmsg_cfg_set_send_queue(cfg, 2 * (NW + NR)));
	t_listen(sctx, NULL, &sops, NULL, NULL, &lis, uri, sizeof(uri));

	/* 1: queued before the connection is up */
	t_fill(local, PIECE, 1);
	{
		struct iovec iov = {local, PIECE};

		T_OK(rmsg_connect(cctx, uri, cfg, &cops, NULL, &cli));
		T_OK(rmsg_send(cli, &iov, 1, op_done, &st[0]));
	}
	ret = rmsg_mr_dereg(lmr);
	T_ASSERT(ret == -EBUSY,
		 "dereg with a send queued from the region: %d, want -EBUSY",
		 ret);
	T_RUN_UNTIL(loop, srv_est_n && cli_est_n && got == 1 && done == 1, 60);
	T_OK(st[0]);

	/* 2: writes from the region and reads into it, queued */
	done = 0;
	for (i = 0; i < NW; i++) {
		struct iovec iov = {local + (size_t)i * PIECE, PIECE};

		t_fill(iov.iov_base, PIECE, 100 + (uint64_t)i);
		st[i] = 1;
		T_OK(rmsg_write(cli, &iov, 1, desc, (uint64_t)i * PIECE,
				op_done, &st[i]));
	}
	for (i = 0; i < NR; i++) {
		struct iovec iov = {local + (size_t)(NW + i) * PIECE, PIECE};

		memset(iov.iov_base, 0, PIECE);
		st[NW + i] = 1;
		/* in order after the writes: reads back write i */
		T_OK(rmsg_read(cli, &iov, 1, desc, (uint64_t)i * PIECE, op_done,
			       &st[NW + i]));
	}
	ret = rmsg_mr_dereg(lmr);
	T_ASSERT(ret == -EBUSY,
		 "dereg with %d operations queued on the region: %d, "
		 "want -EBUSY",
		 NW + NR, ret);
	T_RUN_UNTIL(loop, done == NW + NR || closed, 120);
	T_ASSERT(!closed, "a connection closed");
	for (i = 0; i < NW + NR; i++)
		T_ASSERT(st[i] == 0, "op %d: %d", i, st[i]);
	for (i = 0; i < NR; i++)
		T_ASSERT(!t_check(local + (size_t)(NW + i) * PIECE, PIECE,
				  100 + (uint64_t)i),
			 "read %d: wrong bytes", i);
	T_OK(rmsg_mr_dereg(lmr));
	printf("dereg_queued over %s: -EBUSY with a send queued before "
	       "the connection and with %d ops queued; 0 once they "
	       "completed\n",
	       t_transport(), NW + NR);
	rmsg_cfg_destroy(cfg);
	T_OK(rmsg_ctx_destroy(cctx));
	T_OK(rmsg_mr_dereg(smr));
	T_OK(rmsg_ctx_destroy(sctx));
	free(local);
	return 0;
}
