// SPDX-License-Identifier: MIT
/*
 * pack.c - small messages beyond the credits. With 4 credits granted,
 * the client sends 1000 small messages back to back (as far as its send
 * queue takes them, then on on_writable): every one arrives, once, in
 * order and intact, every send callback runs once with 0, and the
 * counters show what rmsg_conn_stats(3) promises of messages that queue
 * up: they went packed, several to a frame, so that the frames that
 * carried them are far fewer than the messages.
 */
#include <string.h>

#include "common.h"

#define NMSG 1000
#define CREDITS 4
#define SQ 256

static struct ev_loop *loop;
static struct rmsg_listener *lis;
static struct rmsg_conn *client, *server;
static uint8_t payload[NMSG][64];
static int sent, acked, recvd, closes, writable;

static size_t len_of(int i)
{
	return 1 + (size_t)i % 48;
}

static void send_done(struct rmsg_conn *c, int status, void *arg)
{
	T_ASSERT(status == 0, "send %d: status %d", (int)(intptr_t)arg, status);
	T_ASSERT((intptr_t)arg == acked, "send callback %d, want %d",
		 (int)(intptr_t)arg, acked);
	acked++;
}

static void send_more(void)
{
	while (sent < NMSG) {
		struct iovec iov = {payload[sent], len_of(sent)};
		int ret;

		t_fill(payload[sent], iov.iov_len, (uint64_t)sent);
		ret = rmsg_send(client, &iov, 1, send_done,
				(void *)(intptr_t)sent);
		if (ret == -EAGAIN)
			return; /* on_writable resumes */
		T_OK(ret);
		sent++;
	}
}

static void cli_est(struct rmsg_conn *c, void *arg)
{
	send_more();
}

static void cli_writable(struct rmsg_conn *c, void *arg)
{
	writable++;
	send_more();
}

static void srv_est(struct rmsg_conn *c, void *arg)
{
	server = c;
}

static void srv_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	size_t want = len_of(recvd);

	T_ASSERT(rmsg_msg_len(m) == want, "message %d: len %zu want %zu", recvd,
		 rmsg_msg_len(m), want);
	T_ASSERT(t_check(rmsg_msg_data(m), want, (uint64_t)recvd) == 0,
		 "message %d differs (order or bytes)", recvd);
	recvd++;
}

static void on_close(struct rmsg_conn *c, int reason, void *arg)
{
	/* the client closes; the server hears it as the peer's close */
	T_ASSERT(c == client ? reason == 0 : reason == -ESHUTDOWN,
		 "closed with %d (%s)", reason, rmsg_strerror(reason));
	if (c == client)
		client = NULL;
	if (c == server)
		server = NULL;
	if (++closes == 2)
		rmsg_listener_close(lis);
}

static struct rmsg_stats stats(const struct rmsg_conn *c)
{
	struct rmsg_stats st;

	T_ASSERT(rmsg_conn_stats(c, &st, sizeof(st)) == (int)sizeof(st),
		 "stats");
	return st;
}

int main(void)
{
	struct rmsg_conn_ops sops = {.on_established = srv_est,
				     .on_msg = srv_msg,
				     .on_close = on_close};
	struct rmsg_conn_ops cops = {.on_established = cli_est,
				     .on_writable = cli_writable,
				     .on_close = on_close};
	struct rmsg_stats cs, ss;
	struct rmsg_ctx *sctx, *cctx;
	struct rmsg_cfg *scfg, *ccfg;
	uint64_t frames;
	char uri[128];

	t_require_transport();
	loop = ev_default_loop(0);
	T_OK(rmsg_cfg_create(&scfg));
	T_OK(rmsg_cfg_set_credits(scfg, CREDITS));
	T_OK(rmsg_cfg_create(&ccfg));
	T_OK(rmsg_cfg_set_credits(ccfg, CREDITS));
	T_OK(rmsg_cfg_set_send_queue(ccfg, SQ));
	T_OK(rmsg_ctx_create(loop, NULL, &sctx));
	T_OK(rmsg_ctx_create(loop, NULL, &cctx));
	t_listen(sctx, scfg, &sops, NULL, NULL, &lis, uri, sizeof(uri));
	T_OK(rmsg_connect(cctx, uri, ccfg, &cops, NULL, &client));
	t_deadline(loop, 120);
	T_RUN_UNTIL(loop, recvd == NMSG && acked == NMSG && server, 60);
	cs = stats(client);
	ss = stats(server);
	T_ASSERT(cs.msgs_sent == NMSG && ss.msgs_recv == NMSG,
		 "msgs_sent %llu msgs_recv %llu",
		 (unsigned long long)cs.msgs_sent,
		 (unsigned long long)ss.msgs_recv);
	/* what went packed on one side came packed on the other */
	T_ASSERT(cs.packs_sent == ss.packs_recv &&
			 cs.packed_sent == ss.packed_recv,
		 "packs sent %llu (%llu msgs), received %llu (%llu msgs)",
		 (unsigned long long)cs.packs_sent,
		 (unsigned long long)cs.packed_sent,
		 (unsigned long long)ss.packs_recv,
		 (unsigned long long)ss.packed_recv);
	T_ASSERT(ss.packed_recv <= ss.msgs_recv && ss.packs_recv > 0 &&
			 ss.packs_recv * 2 <= ss.packed_recv,
		 "packs_recv %llu packed_recv %llu",
		 (unsigned long long)ss.packs_recv,
		 (unsigned long long)ss.packed_recv);
	/* the frames that carried the messages (rmsg_stats) */
	frames = ss.msgs_recv - ss.packed_recv + ss.packs_recv;
	T_ASSERT(frames * 10 <= NMSG,
		 "%llu frames for %d messages with %d credits",
		 (unsigned long long)frames, NMSG, CREDITS);
	printf("pack over %s: %d messages with %d credits in %llu frames "
	       "(%llu packs of %llu messages), %d x on_writable\n",
	       t_transport(), NMSG, CREDITS, (unsigned long long)frames,
	       (unsigned long long)ss.packs_recv,
	       (unsigned long long)ss.packed_recv, writable);
	rmsg_conn_close(client);
	T_RUN_UNTIL(loop, closes == 2, 30);
	rmsg_cfg_destroy(ccfg);
	rmsg_cfg_destroy(scfg);
	T_OK(rmsg_ctx_destroy(cctx));
	T_OK(rmsg_ctx_destroy(sctx));
	return 0;
}
