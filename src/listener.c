// SPDX-License-Identifier: MIT
/*
 * listener.c - listening endpoints. An auto:// listener runs the shm, the
 * RDMA and the TCP backend on the same port (rdma+tcp:// the last two);
 * shm://, rdma:// and tcp:// run one each.
 */
#include <stdlib.h>

#include "rmsg_int.h"

/* closes what listener_start() started of @l */
static void listener_stop(struct rmsg_listener *l)
{
	unsigned i;

	for (i = 0; i < RMSGI_TR_MAX; i++) {
		if (l->tr[i] && l->tr_priv[i])
			l->tr[i]->lst->close(l->tr_priv[i]);
		l->tr[i] = NULL;
		l->tr_priv[i] = NULL;
	}
}

/* every backend that serves the scheme listens on the same port; for
 * auto:// all but the last (TCP) are optional, unless another endpoint
 * holds the port there (-EADDRINUSE: a peer on this host would reach it
 * instead of us; with port 0 the whole start is tried again) */
static int listener_start_once(struct rmsg_listener *l, struct rmsgi_uri *u)
{
	const struct rmsgi_tr *v[RMSGI_TR_MAX];
	int n = rmsgi_tr_for_scheme(u->row, v);
	int i, ret = -EINVAL;

	/* the last first (auto://: TCP), which settles the port that the
	 * others then share */
	for (i = n - 1; i >= 0; i--) {
		const struct rmsgi_tr *tr = v[i];
		void *tl = NULL;
		uint16_t port = 0;

		ret = tr->lst->listen(l->ctx, l, u, &port, &tl);
		if (ret == 0) {
			unsigned s = rmsgi_tr_slot(tr);

			l->tr[s] = tr;
			l->tr_priv[s] = tl;
			l->port = port;
			u->port = port;
		} else if (n > 1 && i < n - 1 && ret != -EADDRINUSE) {
			rmsgi_info(l->ctx,
				   "%s listener on port %u: no %s (%s); the "
				   "others serve it",
				   u->row->scheme, l->port, tr->name,
				   rmsg_strerror(ret));
			ret = 0;
		} else {
			listener_stop(l);
			return ret;
		}
	}
	return ret;
}

static int listener_start(struct rmsg_listener *l, struct rmsgi_uri *u)
{
	bool any = u->port == 0;
	int tries = 0, ret;

	do {
		if (any)
			u->port = 0;
		ret = listener_start_once(l, u);
	} while (ret == -EADDRINUSE && any && ++tries < 8);
	return ret;
}

int rmsg_listen(struct rmsg_ctx *ctx, const char *uri,
		const struct rmsg_cfg *cfg, const struct rmsg_conn_ops *ops,
		rmsg_accept_cb accept, void *arg, struct rmsg_listener **l_p)
{
	struct rmsg_listener *l;
	struct rmsgi_uri u;
	int ret;

	if (!ctx || !uri || !l_p)
		return -EINVAL;
	if (ctx->destroying)
		return -ESHUTDOWN; /* from a callback inside rmsg_ctx_destroy */
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

	ret = listener_start(l, &u);
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

	/* suspended connections leave room for their resume requests, which
	 * handshakes (bounded by max_pending) do not take: a new
	 * connection keeps to max_conns at its hello (conn.c) */
	if (l->nconns - l->nsuspended - (l->nsuspended ? l->npending : 0) >=
	    l->cfg.max_conns)
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

int rmsgi_tr_incoming(struct rmsg_listener *l, const struct rmsgi_tr *tr,
		      void *tc, struct rmsg_conn **c_p,
		      const struct rmsgi_tr_conn_info **ci_p,
		      struct rmsgi_hello *refusal)
{
	struct rmsg_conn *c;
	int ret;

	memset(refusal, 0, sizeof(*refusal));
	ret = rmsgi_listener_admit(l);
	if (ret) {
		/* over the listener's limits: the peer logs why */
		l->ctx->st.conns_refused++;
		refusal->status = -EUSERS;
		return ret;
	}
	/* no callbacks until the app's accept (rmsgi_conn_ev_request) */
	ret = rmsgi_conn_new(l->ctx, &l->cfg, NULL, l->arg, &c);
	if (ret) {
		l->ctx->st.conns_refused++;
		refusal->status = (int16_t)ret;
		return ret;
	}
	rmsgi_listener_attach(l, c);
	c->is_server = true;
	c->ti.is_server = true;
	rmsgi_conn_set_tr(c, tr);
	c->tr_priv = tc;
	*c_p = c;
	*ci_p = &c->ti;
	return 0;
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

	/* authenticating counts as a handshake: unauthenticated peers hold
	 * no more than max_pending */
	if (c->lst_pending && state != RMSGI_CS_CONNECTING &&
	    state != RMSGI_CS_ACCEPTING && state != RMSGI_CS_AUTH) {
		c->lst_pending = false;
		l->npending--;
	}
	if (c->lst_suspended != (state == RMSGI_CS_SUSPENDED)) {
		c->lst_suspended = !c->lst_suspended;
		if (c->lst_suspended)
			l->nsuspended++;
		else
			l->nsuspended--;
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
			c->lst_suspended = false;
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

/* (transport.h) the accepted ones end with on_close, whatever fails */
bool rmsgi_conn_app_accepted(const struct rmsg_conn *c)
{
	return c->app_accepted;
}

int rmsg_listener_close(struct rmsg_listener *l)
{
	unsigned i;

	if (!l || l->member) /* a group's stand-in (accept's @l) */
		return -EINVAL;
	if (l->in_pick)
		return -EBUSY; /* its backend's accept loop runs on it */
	for (i = 0; i < rmsgi_tr_nslots; i++)
		if (l->tr[i] && l->tr_priv[i])
			l->tr[i]->lst->close(l->tr_priv[i]);
	listener_detach_all(l);
	if (l->group)
		rmsgi_group_close(l);
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
	if (ctx->destroying)
		return -ESHUTDOWN; /* from a callback inside rmsg_ctx_destroy */
	ret = rmsgi_uri_parse(uri, &u);
	if (ret)
		return ret;
	if (u.port == 0)
		return -EINVAL;
	ret = rmsgi_conn_new(ctx, cfg ? &cfg->v : &ctx->cfg, ops, arg, &c);
	if (ret)
		return ret;
	/* the connection's timeout counts from this call: the loop's
	 * cached time is as old as the app's work since it last woke, and
	 * a timer from it would fire that much early (errors.c over RDMA
	 * under TCG: 0.43 s of a 0.5 s bound) */
	ev_now_update(ctx->loop);
	ret = rmsgi_conn_start(c, &u);
	if (ret) {
		rmsgi_conn_discard(c);
		return ret;
	}
	ctx->st.conns_opened++;
	rmsgi_conn_event(c, "dialed", "uri=%s", uri);
	*c_p = c;
	return 0;
}
