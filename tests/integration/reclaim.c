// SPDX-License-Identifier: MIT
/*
 * reclaim.c - a grown grant comes back from an idle peer (issue 32;
 * src/reclaim.c). A client streams small messages until the server's
 * grant to it has grown, then goes quiet: within a few seconds the server
 * asks for what is above the start and the client gives it back (the
 * counters credits_reclaimed and credits_given agree). A second stream
 * after that grows it again, and nothing is lost or reordered in either.
 */
#include <string.h>

#include "common.h"

#define NMSG 4000

static struct ev_loop *loop;
static struct rmsg_listener *lis;
static struct rmsg_conn *client, *server;
static int recvd, sent, acked, closes, goal, established;
/* each message's bytes stay put until it is done (no copy is promised) */
static uint8_t payload[2 * NMSG][64];

static void send_done(struct rmsg_conn *c, int status, void *arg)
{
	T_ASSERT(status == 0, "send status %d", status);
	acked++;
}

static void send_more(void)
{
	while (sent < goal) {
		struct iovec iov = {payload[sent], 1 + sent % 64};
		int ret;

		t_fill(payload[sent], iov.iov_len, (uint64_t)sent);
		ret = rmsg_send(client, &iov, 1, send_done, NULL);
		if (ret == -EAGAIN)
			return; /* on_writable resumes */
		T_OK(ret);
		sent++;
	}
}

static void cli_est(struct rmsg_conn *c, void *arg)
{
	established = 1;
}

static void cli_writable(struct rmsg_conn *c, void *arg)
{
	send_more();
}

static void srv_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	size_t want = 1 + (size_t)recvd % 64;

	server = c;
	T_ASSERT(rmsg_msg_len(m) == want, "len %zu want %zu", rmsg_msg_len(m),
		 want);
	T_ASSERT(t_check(rmsg_msg_data(m), want, (uint64_t)recvd) == 0,
		 "message %d differs", recvd);
	recvd++;
}

static void on_close(struct rmsg_conn *c, int reason, void *arg)
{
	if (c == client)
		client = NULL; /* freed once on_close returns */
	if (c == server)
		server = NULL;
	if (++closes == 2)
		rmsg_listener_close(lis);
}

static struct rmsg_stats stats(struct rmsg_conn *c)
{
	struct rmsg_stats st;

	T_ASSERT(rmsg_conn_stats(c, &st, sizeof(st)) == (int)sizeof(st),
		 "stats");
	return st;
}

/* streams @n more messages, all received; then idle until the server has
 * taken back more than it had before */
static void round_trip(int n, int round)
{
	uint64_t before = server ? stats(server).credits_reclaimed : 0;
	struct rmsg_stats s, c;
	double t0;

	goal += n;
	send_more();
	T_RUN_UNTIL(loop, recvd == goal && acked == goal, 120);
	t0 = ev_time();
	T_RUN_UNTIL(loop, stats(server).credits_reclaimed > before, 20);
	s = stats(server);
	c = stats(client);
	/* what the client gave is what the server took, to the credit */
	T_ASSERT(s.credits_reclaimed == c.credits_given,
		 "server reclaimed %llu, client gave %llu",
		 (unsigned long long)s.credits_reclaimed,
		 (unsigned long long)c.credits_given);
	T_ASSERT(s.proto_errors == 0 && c.proto_errors == 0, "proto errors");
	printf("round %d over %s: %d messages, then %llu credits back after "
	       "%.1f s idle\n",
	       round, t_transport(), n,
	       (unsigned long long)(s.credits_reclaimed - before),
	       ev_time() - t0);
}

int main(void)
{
	struct rmsg_conn_ops sops = {.on_msg = srv_msg, .on_close = on_close};
	struct rmsg_conn_ops cops = {.on_established = cli_est,
				     .on_writable = cli_writable,
				     .on_close = on_close};
	struct rmsg_ctx *sctx, *cctx;
	struct rmsg_cfg *ccfg;
	char uri[128];

	t_require_transport();
	loop = ev_default_loop(0);
	T_OK(rmsg_cfg_create(&ccfg));
	T_OK(rmsg_cfg_set_send_queue(ccfg, 256));
	T_OK(rmsg_ctx_create(loop, NULL, &sctx));
	T_OK(rmsg_ctx_create(loop, NULL, &cctx));
	t_listen(sctx, NULL, &sops, NULL, NULL, &lis, uri, sizeof(uri));
	T_OK(rmsg_connect(cctx, uri, ccfg, &cops, NULL, &client));
	t_deadline(loop, 400);
	T_RUN_UNTIL(loop, established, 30);
	round_trip(NMSG, 1);
	/* grown again by a second stream, and back again */
	round_trip(NMSG, 2);
	rmsg_conn_close(client);
	ev_run(loop, 0);
	T_ASSERT(closes == 2, "closes %d", closes);
	rmsg_cfg_destroy(ccfg);
	T_OK(rmsg_ctx_destroy(cctx));
	T_OK(rmsg_ctx_destroy(sctx));
	return 0;
}
