// SPDX-License-Identifier: MIT
/*
 * listener.c - listening endpoints. An auto:// listener runs the RDMA and
 * the TCP backend on the same port; rdma:// and tcp:// run one each.
 */
#include <stdlib.h>

#include "rmsg_int.h"

int rmsg_listen(struct rmsg_ctx *ctx, const char *uri,
		const struct rmsg_cfg *cfg, const struct rmsg_conn_ops *ops,
		rmsg_accept_cb accept, void *arg, struct rmsg_listener **l_p)
{
	struct rmsg_listener *l;
	struct rmsgi_uri u;
	int ret;

	if (!ctx || !uri || !l_p)
		return -EINVAL;
	ret = rmsgi_uri_parse(uri, &u);
	if (ret)
		return ret;
	if (u.src_len)
		return -EINVAL; /* "?src=" is for connections */
	l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	l->ctx = ctx;
	l->cfg = cfg ? cfg->v : ctx->cfg;
	if (ops)
		l->ops = *ops;
	l->accept = accept;
	l->arg = arg;
	rmsgi_list_init(&l->link);

	switch (u.scheme) {
	case RMSGI_SCHEME_RDMA:
		ret = rmsgi_tr_rdma.listen(l, &u);
		if (!ret)
			l->tr[RMSGI_TR_RDMA] = &rmsgi_tr_rdma;
		break;
	case RMSGI_SCHEME_TCP:
		ret = rmsgi_tr_tcp.listen(l, &u);
		if (!ret)
			l->tr[RMSGI_TR_TCP] = &rmsgi_tr_tcp;
		break;
	case RMSGI_SCHEME_AUTO:
		/* TCP first: it settles the port that RDMA then shares */
		ret = rmsgi_tr_tcp.listen(l, &u);
		if (ret)
			break;
		l->tr[RMSGI_TR_TCP] = &rmsgi_tr_tcp;
		u.port = l->port;
		if (rmsgi_tr_rdma.listen(l, &u) == 0)
			l->tr[RMSGI_TR_RDMA] = &rmsgi_tr_rdma;
		else
			rmsgi_info(ctx,
				   "auto listener on port %u: no RDMA, "
				   "TCP only",
				   l->port);
		break;
	}
	if (ret) {
		free(l);
		return ret;
	}
	rmsgi_list_add_tail(&ctx->listeners, &l->link);
	ev_ref(ctx->loop);
	*l_p = l;
	return 0;
}

int rmsgi_listener_admit(struct rmsg_listener *l)
{
	int ret = 0;

	if (l->nconns >= l->cfg.max_conns)
		ret = -EUSERS;
	else if (l->npending >= l->cfg.max_pending)
		ret = -EAGAIN;
	if (!ret)
		return 0;
	/* a flood logs its first refusal and then every 1024th */
	if ((l->refused++ & 1023) == 0)
		rmsgi_warn(l->ctx,
			   "listener on port %u: connection refused: %u of "
			   "%u connections (rmsg_cfg_set_max_conns), %u of %u "
			   "handshakes (rmsg_cfg_set_max_pending); %llu "
			   "refused so far",
			   l->port, l->nconns, l->cfg.max_conns, l->npending,
			   l->cfg.max_pending, (unsigned long long)l->refused);
	return ret;
}

void rmsgi_listener_attach(struct rmsg_listener *l, struct rmsg_conn *c)
{
	c->lst = l;
	c->lst_pending = true;
	l->nconns++;
	l->npending++;
}

void rmsgi_listener_track(struct rmsg_conn *c, int state)
{
	struct rmsg_listener *l = c->lst;

	if (c->lst_pending && state != RMSGI_CS_CONNECTING &&
	    state != RMSGI_CS_ACCEPTING) {
		c->lst_pending = false;
		l->npending--;
	}
	if (state == RMSGI_CS_CLOSED) {
		c->lst = NULL;
		l->nconns--;
	}
}

/* the listener goes: its connections stop counting */
static void listener_detach_all(struct rmsg_listener *l)
{
	struct rmsgi_list *n, *tmp;

	rmsgi_list_for_each_safe (n, tmp, &l->ctx->conns) {
		struct rmsg_conn *c =
			rmsgi_list_entry(n, struct rmsg_conn, link);

		if (c->lst == l) {
			c->lst = NULL;
			c->lst_pending = false;
		}
	}
}

int rmsg_listener_port(const struct rmsg_listener *l, uint16_t *port_p)
{
	if (!l || !port_p)
		return -EINVAL;
	*port_p = l->port;
	return 0;
}

int rmsg_listener_close(struct rmsg_listener *l)
{
	int i;

	if (!l)
		return -EINVAL;
	for (i = 0; i < RMSGI_TR_COUNT; i++)
		if (l->tr[i])
			l->tr[i]->listen_close(l);
	listener_detach_all(l);
	rmsgi_list_del(&l->link);
	ev_unref(l->ctx->loop);
	free(l);
	return 0;
}

int rmsg_connect(struct rmsg_ctx *ctx, const char *uri,
		 const struct rmsg_cfg *cfg, const struct rmsg_conn_ops *ops,
		 void *arg, struct rmsg_conn **c_p)
{
	struct rmsg_conn *c;
	struct rmsgi_uri u;
	int ret;

	if (!ctx || !uri || !c_p)
		return -EINVAL;
	ret = rmsgi_uri_parse(uri, &u);
	if (ret)
		return ret;
	if (u.port == 0)
		return -EINVAL;
	ret = rmsgi_conn_new(ctx, cfg ? &cfg->v : &ctx->cfg, ops, arg, &c);
	if (ret)
		return ret;
	switch (u.scheme) {
	case RMSGI_SCHEME_RDMA:
		c->tr = &rmsgi_tr_rdma;
		break;
	case RMSGI_SCHEME_TCP:
		c->tr = &rmsgi_tr_tcp;
		break;
	case RMSGI_SCHEME_AUTO:
		c->tr = &rmsgi_tr_rdma;
		c->auto_fallback = true;
		c->auto_uri = u;
		break;
	}
	/* the connection's timeout counts from this call: the loop's
	 * cached time is as old as the app's work since it last woke, and
	 * a timer from it would fire that much early (errors.c over RDMA
	 * under TCG: 0.43 s of a 0.5 s bound) */
	ev_now_update(ctx->loop);
	ret = c->tr->connect(c, &u);
	if (ret && u.scheme == RMSGI_SCHEME_AUTO) {
		/* no RDMA here (no device, or no route through one): TCP.
		 * Failures after this point fall back in conn.c. */
		c->auto_fallback = false;
		c->fallback_reason = ret;
		rmsgi_info(ctx, "auto://%s:%u: %s; using TCP", u.host, u.port,
			   rmsgi_fallback_text(ret));
		c->tr = &rmsgi_tr_tcp;
		c->tr_priv = NULL;
		ret = c->tr->connect(c, &u);
	}
	if (ret) {
		rmsgi_conn_discard(c);
		return ret;
	}
	*c_p = c;
	return 0;
}
