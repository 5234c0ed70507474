// SPDX-License-Identifier: MIT
/*
 * hold.c - a receiver that holds every message and releases them slowly.
 * The sender must see backpressure (-EAGAIN, then on_writable), and no
 * message may be lost, reordered or corrupted. On RDMA a receiver-not-
 * ready condition lasting beyond the library's RNR retries (6, ~1.5 s)
 * would surface as a failed connection, so a clean run also shows there
 * was no lasting one.
 */
#include <string.h>

#include "common.h"

#define NMSG 3000
#define HOLD_MAX NMSG

static struct ev_loop *loop;
static struct rmsg_listener *lis;
static struct rmsg_conn *client;
static struct rmsg_msg *held[HOLD_MAX];
static int nheld, recvd, released, sent, acked, eagain, writable, closes;
static int max_held;
static size_t held_bytes, max_held_bytes;
static ev_timer release_timer;
static uint8_t payload[NMSG][64];

static void send_done(struct rmsg_conn *c, int status, void *arg)
{
	T_ASSERT(status == 0, "send status %d", status);
	acked++;
}

static void send_more(void)
{
	while (sent < NMSG) {
		struct iovec iov = {payload[sent], 1 + sent % 64};
		int ret;

		t_fill(payload[sent], iov.iov_len, (uint64_t)sent);
		ret = rmsg_send(client, &iov, 1, send_done, NULL);
		if (ret == -EAGAIN) {
			eagain++;
			return; /* on_writable resumes */
		}
		T_OK(ret);
		sent++;
	}
}

static void cli_writable(struct rmsg_conn *c, void *arg)
{
	writable++;
	send_more();
}

static void cli_est(struct rmsg_conn *c, void *arg)
{
	send_more();
}

static void srv_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	size_t want = 1 + (size_t)recvd % 64;

	T_ASSERT(rmsg_msg_len(m) == want, "len %zu want %zu", rmsg_msg_len(m),
		 want);
	T_ASSERT(t_check(rmsg_msg_data(m), want, (uint64_t)recvd) == 0,
		 "message %d differs", recvd);
	recvd++;
	T_ASSERT(nheld < HOLD_MAX, "more than %d held", HOLD_MAX);
	T_OK(rmsg_msg_hold(m));
	held_bytes += rmsg_msg_len(m);
	if (held_bytes > max_held_bytes)
		max_held_bytes = held_bytes;
	T_ASSERT(rmsg_msg_hold(m) == -EALREADY, "second hold");
	held[nheld++] = m;
	if (nheld > max_held)
		max_held = nheld;
}

/* releases the oldest held message, re-checking it first */
static void release_cb(struct ev_loop *l, ev_timer *w, int revents)
{
	int i;

	if (nheld == 0) {
		if (recvd == NMSG && acked == NMSG && client)
			rmsg_conn_close(client);
		return;
	}
	T_ASSERT(t_check(rmsg_msg_data(held[0]), rmsg_msg_len(held[0]),
			 (uint64_t)released) == 0,
		 "held message %d changed", released);
	held_bytes -= rmsg_msg_len(held[0]);
	rmsg_msg_release(held[0]);
	released++;
	for (i = 1; i < nheld; i++)
		held[i - 1] = held[i];
	nheld--;
}

static void on_close(struct rmsg_conn *c, int reason, void *arg)
{
	if (c == client)
		client = NULL; /* freed once on_close returns */
	if (++closes == 2) {
		ev_timer_stop(loop, &release_timer);
		rmsg_listener_close(lis);
	}
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
	T_OK(rmsg_cfg_set_send_queue(ccfg, 64));
	T_OK(rmsg_ctx_create(loop, NULL, &sctx));
	T_OK(rmsg_ctx_create(loop, NULL, &cctx));
	t_listen(sctx, NULL, &sops, NULL, NULL, &lis, uri, sizeof(uri));
	T_OK(rmsg_connect(cctx, uri, ccfg, &cops, NULL, &client));
	ev_timer_init(&release_timer, release_cb, 0.001, 0.0005);
	ev_timer_start(loop, &release_timer);
	t_deadline(loop, 300);
	ev_run(loop, 0);
	T_ASSERT(recvd == NMSG && released == NMSG, "recvd %d released %d",
		 recvd, released);
	T_ASSERT(acked == NMSG, "acked %d", acked);
	T_ASSERT(eagain > 0 && writable > 0,
		 "no backpressure seen (eagain %d, writable %d)", eagain,
		 writable);
	/* held messages keep their receive buffers: at most the credits'
	 * worth (small messages may share a buffer, rmsg.7) */
	T_ASSERT(max_held_bytes <= 32 * 8192,
		 "%zu bytes held with 32 credits of 8192 bytes",
		 max_held_bytes);
	printf("hold over %s: %d messages, at most %d held, %d x -EAGAIN, "
	       "%d x on_writable\n",
	       t_transport(), NMSG, max_held, eagain, writable);
	rmsg_cfg_destroy(ccfg);
	T_OK(rmsg_ctx_destroy(cctx));
	T_OK(rmsg_ctx_destroy(sctx));
	return 0;
}
