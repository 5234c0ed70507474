// SPDX-License-Identifier: MIT
/*
 * revoke_inflight.c - (TCP) revoking an export while the peer has many
 * writes to it in flight does not end the connection; a peer that keeps
 * naming tokens never exported still does (issue 30, case 6).
 *
 * rmsg_mr_export(3): a refused access is answered -EACCES; the library
 * ends a connection after 8 refused guesses, where naming a token
 * refused recently again is no new guess and each accepted access takes
 * one off the count.
 *
 * 1. The server exports a region to its connection; the client writes
 *    once (accepted).
 * 2. The client posts NW writes to the export; before the server has
 *    read any of them it revokes the export (the race a user meets:
 *    writes in flight when revoke returns). Every write completes with
 *    -EACCES, both sides stay up, and a message still gets through.
 * 3. The client then writes with forged tokens, each different, one at
 *    a time: within 8 of them the server ends the connection with
 *    -EACCES.
 * Over RDMA the device refuses instead (the queue pair ends): exit 77.
 */
#include <string.h>
#include <sys/uio.h>

#include "../integration/common.h"

#define NW 64
#define REFUSALS 8 /* rmsg_mr_export.3 */
#define LEN 4096

static struct ev_loop *loop;
static struct rmsg_conn *srv, *cli;
static int srv_est_n, cli_est_n, srv_closed, cli_closed, srv_reason;
static int got_msg, done, st[NW];
static uint8_t region[LEN], wbuf[16];

static void srv_est(struct rmsg_conn *c, void *arg)
{
	(void)arg;
	srv = c;
	srv_est_n = 1;
}

static void srv_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	(void)c;
	(void)m;
	(void)arg;
	got_msg++;
}

static void srv_close(struct rmsg_conn *c, int reason, void *arg)
{
	(void)c;
	(void)arg;
	srv_closed = 1;
	srv_reason = reason;
}

static void cli_est(struct rmsg_conn *c, void *arg)
{
	(void)c;
	(void)arg;
	cli_est_n = 1;
}

static void cli_close(struct rmsg_conn *c, int reason, void *arg)
{
	(void)c;
	(void)reason;
	(void)arg;
	cli_closed = 1;
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
				     .on_close = srv_close};
	struct rmsg_conn_ops cops = {.on_established = cli_est,
				     .on_close = cli_close};
	struct iovec iov = {wbuf, sizeof(wbuf)};
	uint8_t desc[RMSG_MR_DESC_SIZE], forged[RMSG_MR_DESC_SIZE];
	struct rmsg_ctx *sctx, *cctx;
	struct rmsg_listener *lis;
	struct rmsg_mr *mr;
	char uri[128];
	int i, one;

	t_require_transport();
	if (strcmp(t_transport(), "tcp")) {
		printf("revoke_inflight: TCP only (RDMA: the device "
		       "refuses)\n");
		return 77;
	}
	loop = ev_default_loop(0);
	t_deadline(loop, 120);
	T_OK(rmsg_ctx_create(loop, NULL, &sctx));
	T_OK(rmsg_ctx_create(loop, NULL, &cctx));
	T_OK(rmsg_mr_reg(sctx, region, LEN, RMSG_ACCESS_REMOTE_WRITE, &mr));
	t_listen(sctx, NULL, &sops, NULL, NULL, &lis, uri, sizeof(uri));
	T_OK(rmsg_connect(cctx, uri, NULL, &cops, NULL, &cli));
	T_RUN_UNTIL(loop, srv_est_n && cli_est_n, 30);

	/* 1: exported to this connection, and it works */
	T_OK(rmsg_mr_export(mr, srv, 0, LEN, RMSG_ACCESS_REMOTE_WRITE, desc));
	one = 1;
	done = 0;
	T_OK(rmsg_write(cli, &iov, 1, desc, 0, op_done, &one));
	T_RUN_UNTIL(loop, done == 1, 30);
	T_OK(one);

	/* 2: NW writes in flight, then the revoke */
	done = 0;
	for (i = 0; i < NW; i++) {
		st[i] = 1;
		T_OK(rmsg_write(cli, &iov, 1, desc, (uint64_t)i * 16, op_done,
				&st[i]));
	}
	T_OK(rmsg_mr_revoke(mr, desc));
	T_RUN_UNTIL(loop, done == NW || srv_closed || cli_closed, 60);
	T_ASSERT(!srv_closed && !cli_closed,
		 "revoke with %d writes in flight ended the connection "
		 "(server: %s) after %d of them",
		 NW, rmsg_strerror(srv_reason), done);
	for (i = 0; i < NW; i++)
		T_ASSERT(st[i] == -EACCES, "write %d: %d", i, st[i]);
	T_OK(rmsg_send(cli, &iov, 1, NULL, NULL));
	T_RUN_UNTIL(loop, got_msg == 1 || srv_closed, 30);
	T_ASSERT(got_msg == 1 && !srv_closed, "no message after the revoke");
	printf("revoke_inflight: %d writes in flight at the revoke: all "
	       "-EACCES, connection up\n",
	       NW);

	/* 3: distinct forged tokens: the connection ends */
	for (i = 0; i < REFUSALS && !srv_closed; i++) {
		memcpy(forged, desc, sizeof(forged));
		forged[12] ^= (uint8_t)(0x3c + i); /* the token */
		one = 1;
		done = 0;
		T_OK(rmsg_write(cli, &iov, 1, forged, 0, op_done, &one));
		T_RUN_UNTIL(loop, done == 1 || srv_closed, 30);
	}
	T_RUN_UNTIL(loop, srv_closed, 30);
	T_ASSERT(srv_reason == -EACCES, "server closed with %s",
		 rmsg_strerror(srv_reason));
	printf("revoke_inflight: forged tokens: connection ended after %d "
	       "(%s)\n",
	       i, rmsg_strerror(srv_reason));
	T_RUN_UNTIL(loop, cli_closed, 30);
	T_OK(rmsg_ctx_destroy(cctx));
	T_OK(rmsg_mr_dereg(mr));
	T_OK(rmsg_ctx_destroy(sctx));
	return 0;
}
