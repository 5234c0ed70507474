// SPDX-License-Identifier: MIT
/*
 * pingpong.c - first end-to-end test: a client and a server connect and
 * exchange messages of a few sizes (eager and rendezvous); every echo is
 * checked byte for byte.
 */
#include <string.h>

#include "common.h"

#define ROUNDS 200

static struct ev_loop *loop;
static struct rmsg_listener *lis;
static struct rmsg_conn *client;
static int round_no, closes, established, send_cbs, sends;
static uint8_t *out, *in_copy;
static size_t sizes[] = {0, 1, 63, 64, 1000, 8192, 8193, 100000, 1 << 20};

static size_t cur_size(void)
{
	return sizes[round_no % (int)(sizeof(sizes) / sizeof(sizes[0]))];
}

static void send_done(struct rmsg_conn *c, int status, void *arg)
{
	T_ASSERT(status == 0, "send status %d", status);
	send_cbs++;
}

static void client_send(void)
{
	struct iovec iov = {out, cur_size()};

	t_fill(out, cur_size(), (uint64_t)round_no);
	T_OK(rmsg_send(client, &iov, 1, send_done, NULL));
	sends++;
}

static void srv_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	struct iovec iov = {(void *)rmsg_msg_data(m), rmsg_msg_len(m)};

	/* echo from a copy: the message is only valid during the callback */
	memcpy(in_copy, iov.iov_base, iov.iov_len);
	iov.iov_base = in_copy;
	T_OK(rmsg_send(c, &iov, 1, NULL, NULL));
}

static void cli_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	T_ASSERT(rmsg_msg_len(m) == cur_size(), "len %zu want %zu",
		 rmsg_msg_len(m), cur_size());
	T_ASSERT(t_check(rmsg_msg_data(m), rmsg_msg_len(m),
			 (uint64_t)round_no) == 0,
		 "payload of round %d", round_no);
	if (++round_no == ROUNDS) {
		rmsg_conn_close(c);
		return;
	}
	client_send();
}

static void on_est(struct rmsg_conn *c, void *arg)
{
	established++;
	if (c == client)
		client_send();
}

static void on_close(struct rmsg_conn *c, int reason, void *arg)
{
	closes++;
	if (c == client) {
		T_ASSERT(reason == 0, "client close reason %d", reason);
		T_ASSERT(send_cbs == sends, "%d callbacks for %d sends",
			 send_cbs, sends);
	} else {
		/* the client closed on purpose: not a reset */
		T_ASSERT(reason == -ESHUTDOWN, "server close reason %s",
			 rmsg_strerror(reason));
	}
	if (closes == 2)
		rmsg_listener_close(lis);
}

int main(void)
{
	struct rmsg_conn_ops sops = {.on_established = on_est,
				     .on_msg = srv_msg,
				     .on_close = on_close};
	struct rmsg_conn_ops cops = {.on_established = on_est,
				     .on_msg = cli_msg,
				     .on_close = on_close};
	struct rmsg_ctx *sctx, *cctx;
	char uri[128];

	t_require_transport();
	loop = ev_default_loop(0);
	out = malloc(1 << 20);
	in_copy = malloc(1 << 20);
	T_OK(rmsg_ctx_create(loop, NULL, &sctx));
	T_OK(rmsg_ctx_create(loop, NULL, &cctx));
	t_listen(sctx, NULL, &sops, NULL, NULL, &lis, uri, sizeof(uri));
	T_OK(rmsg_connect(cctx, uri, NULL, &cops, NULL, &client));
	t_deadline(loop, 120);
	ev_run(loop, 0);
	T_ASSERT(established == 2, "established %d", established);
	T_ASSERT(round_no == ROUNDS, "rounds %d", round_no);
	T_ASSERT(closes == 2, "closes %d", closes);
	printf("pingpong over %s: %d round trips checked, transport %s\n",
	       t_transport(), round_no, "ok");
	T_OK(rmsg_ctx_destroy(cctx));
	T_OK(rmsg_ctx_destroy(sctx));
	free(out);
	free(in_copy);
	return 0;
}
