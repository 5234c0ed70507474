// SPDX-License-Identifier: MIT
/*
 * rpc_unanswered.c - rmsg_ctx_destroy() frees requests never answered
 * (issue 30, case 6). rmsg_handle(3): "A request that is never answered
 * keeps memory allocated (and its connection object) until
 * rmsg_ctx_destroy() frees it with the context".
 *
 * Each cycle: a server context serves a method whose handler never
 * answers; a client makes NREQ calls to it; once the handler has seen
 * them all, the server context is destroyed, then the client's. After
 * WARMUP cycles the heap in use (mallinfo2's uordblks) is the baseline;
 * after CYCLES more it must be back within SLACK bytes. Each request
 * kept after destroy costs at least 32 bytes, so a leak of them is
 * NREQ * CYCLES * 32 = 192,000 bytes, far above the slack. Under
 * valgrind (scripts/valgrind.sh) mallinfo2 says nothing; memcheck
 * reports the same leak there as definitely lost.
 */
#include <malloc.h>
#include <string.h>

#include "common.h"

#define M_IGNORE 7
#define NREQ 200
#define WARMUP 3
#define CYCLES 30
#define SLACK (32 * 1024)

static struct ev_loop *loop;
static int seen, replies, est;

static void srv_ignore(struct rmsg_conn *c, struct rmsg_req *req,
		       struct rmsg_msg *m, void *arg)
{
	(void)c;
	(void)req; /* never answered: rmsg_ctx_destroy() frees it */
	(void)m;
	(void)arg;
	seen++;
}

static void cli_reply(struct rmsg_conn *c, int status, struct rmsg_msg *m,
		      void *arg)
{
	(void)c;
	(void)m;
	(void)arg;
	T_ASSERT(status < 0, "an ignored call was answered (%d)", status);
	replies++;
}

static void cli_est(struct rmsg_conn *c, void *arg)
{
	(void)c;
	(void)arg;
	est = 1;
}

static void cycle(void)
{
	struct rmsg_conn_ops ops = {.on_established = cli_est};
	struct rmsg_ctx *sctx, *cctx;
	struct rmsg_listener *lis;
	struct rmsg_conn *client;
	char uri[128];
	uint8_t body[64] = {0};
	struct iovec iov = {body, sizeof(body)};
	int i;

	seen = replies = est = 0;
	T_OK(rmsg_ctx_create(loop, NULL, &sctx));
	T_OK(rmsg_ctx_create(loop, NULL, &cctx));
	T_OK(rmsg_handle(sctx, M_IGNORE, srv_ignore, NULL));
	t_listen(sctx, NULL, NULL, NULL, NULL, &lis, uri, sizeof(uri));
	T_OK(rmsg_connect(cctx, uri, NULL, &ops, NULL, &client));
	T_RUN_UNTIL(loop, est, 30);
	for (i = 0; i < NREQ; i++)
		T_OK(rmsg_call(client, M_IGNORE, &iov, 1, 0, cli_reply, NULL,
			       NULL));
	T_RUN_UNTIL(loop, seen == NREQ, 30);
	T_OK(rmsg_ctx_destroy(sctx));
	/* the client's calls end with the connection */
	T_RUN_UNTIL(loop, replies == NREQ, 30);
	T_OK(rmsg_ctx_destroy(cctx));
}

int main(void)
{
	size_t base, now;
	int i;

	t_require_transport();
	loop = ev_default_loop(0);
	for (i = 0; i < WARMUP; i++)
		cycle();
	base = mallinfo2().uordblks;
	for (i = 0; i < CYCLES; i++)
		cycle();
	now = mallinfo2().uordblks;
	printf("rpc_unanswered over %s: %d cycles of %d unanswered requests;"
	       " heap in use %zu -> %zu bytes\n",
	       t_transport(), CYCLES, NREQ, base, now);
	T_ASSERT(now <= base + SLACK,
		 "heap grew by %zu bytes over %d cycles (limit %d)", now - base,
		 CYCLES, SLACK);
	return 0;
}
