// SPDX-License-Identifier: MIT
/*
 * early_destroy.c - a server that goes away right after it accepted.
 *
 * The client's connection is established; the server's context is
 * destroyed before it has seen its own side complete (over RDMA its
 * ESTABLISHED event is still unread; rdma_cm then tells the client
 * REJECTED). For the client that is a peer that left an established
 * connection: on_close with -ECONNRESET, not -ECONNREFUSED, which means
 * "never accepted". Both contexts run in the fd mode, so the test decides
 * which side makes progress when: no timing.
 */
#include <string.h>

#include "common.h"

static int established, closed, close_reason, accepted;

static void on_est(struct rmsg_conn *c, void *arg)
{
	(void)c;
	(void)arg;
	established++;
}

static void on_close(struct rmsg_conn *c, int reason, void *arg)
{
	(void)c;
	(void)arg;
	closed++;
	close_reason = reason;
}

static const struct rmsg_conn_ops cli_ops = {
	.on_established = on_est,
	.on_close = on_close,
};

static const struct rmsg_conn_ops srv_ops = {0};

static int on_accept(struct rmsg_listener *l, struct rmsg_conn *c,
		     const void *pdata, size_t len, void *arg)
{
	(void)l;
	(void)c;
	(void)pdata;
	(void)len;
	(void)arg;
	accepted++;
	return 0;
}

/* progress @ctx until @cond, for @secs at most (scaled) */
#define SPIN_UNTIL(ctx, cond, secs)                                           \
	do {                                                                  \
		double t_end_ = ev_time() + (secs)*t_scale();                 \
		while (!(cond)) {                                             \
			T_ASSERT(ev_time() < t_end_, "timed out: %s", #cond); \
			T_ASSERT(rmsg_ctx_progress(ctx) >= 0, "progress");    \
		}                                                             \
	} while (0)

int main(void)
{
	struct rmsg_ctx *srv, *cli;
	struct rmsg_listener *l;
	struct rmsg_conn *c;
	struct rmsg_cfg *cfg;
	char uri[128];

	t_require_transport();
	T_OK(rmsg_cfg_create(&cfg));
	T_OK(rmsg_cfg_set_keepalive_ms(cfg, 0)); /* no other way to notice */
	T_OK(rmsg_ctx_create_fd(cfg, &srv));
	T_OK(rmsg_ctx_create_fd(cfg, &cli));
	t_listen(srv, cfg, &srv_ops, on_accept, NULL, &l, uri, sizeof(uri));
	T_OK(rmsg_connect(cli, uri, cfg, &cli_ops, NULL, &c));
	/* both sides until the server has accepted ... */
	SPIN_UNTIL(cli, (rmsg_ctx_progress(srv), accepted), 20);
	/* ... then the client alone until it is up */
	SPIN_UNTIL(cli, established, 20);
	T_ASSERT(!closed, "closed before the server left");
	T_OK(rmsg_ctx_destroy(srv));
	SPIN_UNTIL(cli, closed, 30);
	T_ASSERT(closed == 1, "on_close %d times", closed);
	T_ASSERT(close_reason == -ECONNRESET,
		 "an established connection whose server left closed with %d "
		 "(%s), not -ECONNRESET",
		 close_reason, rmsg_strerror(close_reason));
	T_OK(rmsg_ctx_destroy(cli));
	rmsg_cfg_destroy(cfg);
	printf("PASS: %s: the server left after accepting: -ECONNRESET\n",
	       t_transport());
	return 0;
}
