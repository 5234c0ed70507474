// SPDX-License-Identifier: MIT
/*
 * reject.c - a listener rejects a connection with private data: the
 * client's on_close gets -ECONNREFUSED and reads the server's reason with
 * rmsg_conn_peer_data(); the server's connection callbacks never run.
 * The client's own private data reaches the accept callback. A second
 * client is accepted and gets the server's greeting the same way.
 */
#include <string.h>

#include "common.h"

static struct rmsg_listener *lis;
static int accept_calls, srv_cbs, closes, established;

static int on_accept(struct rmsg_listener *l, struct rmsg_conn *c,
		     const void *pd, size_t pdlen, void *arg)
{
	accept_calls++;
	if (pdlen == 6 && !memcmp(pd, "let me", 6)) {
		T_OK(rmsg_conn_set_private_data(c, "welcome", 7));
		return 0;
	}
	T_ASSERT(pdlen == 5 && !memcmp(pd, "hello", 5), "client pdata");
	T_OK(rmsg_conn_set_private_data(c, "go away", 7));
	return -ECONNREFUSED;
}

static void srv_est(struct rmsg_conn *c, void *arg)
{
	srv_cbs++;
}

static void srv_close(struct rmsg_conn *c, int reason, void *arg)
{
	srv_cbs++;
}

static void cli_est(struct rmsg_conn *c, void *arg)
{
	const void *pd;
	size_t len;

	T_ASSERT(arg == (void *)2, "only the second client is accepted");
	T_OK(rmsg_conn_peer_data(c, &pd, &len));
	T_ASSERT(len == 7 && !memcmp(pd, "welcome", 7), "accept pdata");
	established++;
	rmsg_conn_close(c);
}

static void cli_close(struct rmsg_conn *c, int reason, void *arg)
{
	const void *pd;
	size_t len;

	if (arg == (void *)1) {
		T_ASSERT(reason == -ECONNREFUSED, "reason %d (%s)", reason,
			 rmsg_strerror(reason));
		T_OK(rmsg_conn_peer_data(c, &pd, &len));
		T_ASSERT(len == 7 && !memcmp(pd, "go away", 7),
			 "reject pdata of %zu bytes", len);
	}
	if (++closes == 2)
		rmsg_listener_close(lis);
}

int main(void)
{
	struct rmsg_conn_ops sops = {.on_established = srv_est,
				     .on_close = srv_close};
	struct rmsg_conn_ops cops = {.on_established = cli_est,
				     .on_close = cli_close};
	struct rmsg_ctx *sctx, *cctx;
	struct rmsg_cfg *c1, *c2;
	struct rmsg_conn *a, *b;
	struct ev_loop *loop;
	char uri[128];

	t_require_transport();
	loop = ev_default_loop(0);
	T_OK(rmsg_ctx_create(loop, NULL, &sctx));
	T_OK(rmsg_ctx_create(loop, NULL, &cctx));
	T_OK(rmsg_cfg_create(&c1));
	T_OK(rmsg_cfg_create(&c2));
	T_OK(rmsg_cfg_set_private_data(c1, "hello", 5));
	T_OK(rmsg_cfg_set_private_data(c2, "let me", 6));
	T_ASSERT(rmsg_cfg_set_private_data(
			 c1, "x", RMSG_PRIVATE_DATA_MAX + 1) == -EINVAL,
		 "oversized private data");
	t_listen(sctx, NULL, &sops, on_accept, NULL, &lis, uri, sizeof(uri));
	T_OK(rmsg_connect(cctx, uri, c1, &cops, (void *)1, &a));
	T_OK(rmsg_connect(cctx, uri, c2, &cops, (void *)2, &b));
	t_deadline(loop, 120);
	ev_run(loop, 0);
	T_ASSERT(accept_calls == 2, "accept calls %d", accept_calls);
	T_ASSERT(established == 1, "established %d", established);
	/* the accepted one: on_established and on_close on the server */
	T_ASSERT(srv_cbs == 2, "server callbacks %d", srv_cbs);
	printf("reject over %s: refused with private data, accepted with "
	       "private data\n",
	       t_transport());
	rmsg_cfg_destroy(c1);
	rmsg_cfg_destroy(c2);
	T_OK(rmsg_ctx_destroy(cctx));
	T_OK(rmsg_ctx_destroy(sctx));
	return 0;
}
