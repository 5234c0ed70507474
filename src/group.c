// SPDX-License-Identifier: MIT
/*
 * group.c - one address served by several contexts (rmsg_listen_group).
 *
 * The listener lives on its home, ctxs[0]: its backends listen there and
 * report each new peer detached from the home (rmsgi_tr_handoff(): a
 * socket, a cm id off the home's event channel). The core picks a
 * context (round-robin or the app's pick callback) and the peer travels
 * to it through that context's cross-thread queue (async.c), inside a
 * hand-over the core allocated before it left: the backend's adopt()
 * makes the connection there, against the member's stand-in listener
 * (its limits, its counts, the app's accept and ops), and every callback
 * of the connection then runs on that context's thread.
 *
 * Threads and lifetimes. What a member's thread reads of the group is
 * behind its mutex (closed, gone, refs); the stand-ins are made on the
 * home's thread before any work reaches a member. The group holds a
 * reference to each member's queue (async.c), so the home can push to a
 * member whose thread is destroying it: once the member's destroy has
 * closed its queue the push fails, and the peer is refused. A member
 * may be destroyed at any time on its own thread, before or while the
 * home closes the listener: its destroy runs what was queued before
 * (hand-overs refuse their peer), then retires its stand-in itself
 * (rmsgi_group_member_gone) and marks itself gone, so round-robin
 * skips it. Otherwise the stand-in is freed on the member's thread by
 * the last work the group queues there at the close (the queue runs in
 * order, so every hand-over queued before it has run); after the close,
 * hand-overs still queued see the group closed and refuse their peer.
 * The group itself goes with its last user: the listener, a stand-in,
 * a hand-over in flight.
 */
#include <pthread.h>
#include <stdlib.h>

#include "rmsg_int.h"

struct rmsgi_group {
	pthread_mutex_t mu;
	unsigned refs;
	bool closed;
	unsigned n;
	unsigned next; /* round-robin, home thread */
	rmsg_pick_cb pick;
	void *arg;
	/* each member's queue (a reference), and whether its context
	 * is gone (behind mu) */
	struct rmsgi_async *q[RMSG_GROUP_MAX];
	bool gone[RMSG_GROUP_MAX];
	/* [0] the listener, [i] member i's stand-in */
	struct rmsg_listener *l[RMSG_GROUP_MAX];
	/* per member: the work that opens and the one that closes its
	 * stand-in (a loop reference), queued at listen and at close */
	struct rmsgi_work open_w[RMSG_GROUP_MAX];
	struct rmsgi_work close_w[RMSG_GROUP_MAX];
	/* hand-overs queued to each member and not yet run (behind mu):
	 * at most its stand-in's max_pending, so a connect flood cannot
	 * queue without bound while a member's thread is busy */
	unsigned queued[RMSG_GROUP_MAX];
};

/* one peer on its way to a member */
struct handover {
	struct rmsgi_work w;
	struct rmsgi_group *g;
	unsigned idx;
	const struct rmsgi_tr *tr;
	void *h;
};

static void group_put(struct rmsgi_group *g)
{
	unsigned left, i;

	pthread_mutex_lock(&g->mu);
	left = --g->refs;
	pthread_mutex_unlock(&g->mu);
	if (left)
		return;
	for (i = 1; i < g->n; i++)
		rmsgi_async_put(g->q[i]);
	pthread_mutex_destroy(&g->mu);
	free(g);
}

bool rmsgi_tr_group(const struct rmsg_listener *l)
{
	return l->group != NULL;
}

static void refuse(const struct rmsgi_tr *tr, void *h, int err)
{
	struct rmsgi_hello r;

	memset(&r, 0, sizeof(r));
	r.status = (int16_t)err;
	tr->lst->drop(h, &r);
}

/* on the member's thread */
static void handover_run(struct rmsg_ctx *ctx, void *arg)
{
	struct handover *ho = arg;
	struct rmsgi_group *g = ho->g;
	bool closed;

	pthread_mutex_lock(&g->mu);
	closed = g->closed;
	g->queued[ho->idx]--;
	pthread_mutex_unlock(&g->mu);
	if (closed || rmsgi_async_closed(ctx))
		/* the listener closed (or its home went) meanwhile, or
		 * this member's destroy runs its queue */
		refuse(ho->tr, ho->h, -ECONNABORTED);
	else
		ho->tr->lst->adopt(ctx, g->l[ho->idx], ho->h);
	free(ho);
	group_put(g);
}

void rmsgi_tr_handoff(struct rmsg_listener *l, const struct rmsgi_tr *tr,
		      const struct sockaddr *peer, void *h)
{
	struct rmsgi_group *g = l->group;
	struct handover *ho;
	unsigned i;
	bool full, gone;

	if (g->pick) {
		l->in_pick = true;
		RMSGI_USER_CB(l->ctx, i = g->pick(peer, g->n, g->arg));
		l->in_pick = false;
	} else {
		unsigned tries = g->n;

		/* members whose contexts are gone are skipped */
		pthread_mutex_lock(&g->mu);
		do
			i = g->next++ % g->n;
		while (g->gone[i] && --tries);
		pthread_mutex_unlock(&g->mu);
	}
	if (i >= g->n) {
		l->ctx->st.conns_refused++;
		rmsgi_err(l->ctx,
			  "group listener on port %u: the pick callback "
			  "chose context %u of %u: connection refused",
			  l->port, i, g->n);
		refuse(tr, h, -ECONNREFUSED);
		return;
	}
	if (i == 0) {
		tr->lst->adopt(l->ctx, l, h);
		return;
	}
	pthread_mutex_lock(&g->mu);
	gone = g->gone[i];
	/* the stand-ins are copies of this listener (member_open), and a
	 * gone member's is freed: its bound is read here */
	full = g->queued[i] >= l->cfg.max_pending;
	pthread_mutex_unlock(&g->mu);
	if (gone)
		goto gone;
	if (full) {
		/* the member has not taken the ones queued before: refused
		 * as its own max_pending would (rmsg_listen_group(3)) */
		l->ctx->st.conns_refused++;
		rmsgi_dbg(l->ctx,
			  "group listener on port %u: context %u has %u "
			  "connections queued (max_pending): refused",
			  l->port, i, g->queued[i]);
		refuse(tr, h, -EAGAIN);
		return;
	}
	ho = malloc(sizeof(*ho));
	if (!ho) {
		l->ctx->st.conns_refused++;
		refuse(tr, h, -ENOMEM);
		return;
	}
	ho->w.fn = handover_run;
	ho->w.arg = ho;
	ho->w.heap = false;
	ho->g = g;
	ho->idx = i;
	ho->tr = tr;
	ho->h = h;
	pthread_mutex_lock(&g->mu);
	g->refs++;
	g->queued[i]++;
	pthread_mutex_unlock(&g->mu);
	if (!rmsgi_async_push(g->q[i], &ho->w))
		return;
	/* the member's destroy closed its queue meanwhile */
	pthread_mutex_lock(&g->mu);
	g->queued[i]--;
	g->gone[i] = true;
	pthread_mutex_unlock(&g->mu);
	free(ho);
	group_put(g);
gone:
	l->ctx->st.conns_refused++;
	rmsgi_dbg(l->ctx,
		  "group listener on port %u: context %u was destroyed: "
		  "refused",
		  l->port, i);
	refuse(tr, h, -ECONNREFUSED);
}

/* on the member's thread: its stand-in keeps the member's loop running,
 * as a listener keeps its own */
static void member_open(struct rmsg_ctx *ctx, void *arg)
{
	struct rmsg_listener *l = arg;

	/* on the member's list: its destroy finds it (member_gone) */
	rmsgi_list_add_tail(&ctx->listeners, &l->link);
	ev_ref(ctx->loop);
}

/* the connections the stand-in @l counted stop counting */
static void detach_all(struct rmsg_listener *l)
{
	struct rmsgi_list *n;

	for (n = l->ctx->conns.next; n != &l->ctx->conns; n = n->next) {
		struct rmsg_conn *c =
			rmsgi_list_entry(n, struct rmsg_conn, link);

		if (c->lst == l) {
			c->lst = NULL;
			c->lst_pending = false;
		}
	}
}

/* on the member's thread, after every hand-over queued before */
static void member_close(struct rmsg_ctx *ctx, void *arg)
{
	struct rmsg_listener *l = arg;
	struct rmsgi_group *g = l->group;

	detach_all(l);
	rmsgi_list_del(&l->link);
	ev_unref(ctx->loop);
	free(l);
	group_put(g);
}

/* on the member's thread, in its destroy, after its queue closed and
 * ran: the close's member_close never came, and never will */
void rmsgi_group_member_gone(struct rmsg_listener *l)
{
	struct rmsgi_group *g = l->group;
	unsigned i;

	pthread_mutex_lock(&g->mu);
	for (i = 1; i < g->n; i++)
		if (g->l[i] == l)
			g->gone[i] = true;
	pthread_mutex_unlock(&g->mu);
	member_close(l->ctx, l);
}

void rmsgi_group_close(struct rmsg_listener *l)
{
	struct rmsgi_group *g = l->group;
	unsigned i;

	pthread_mutex_lock(&g->mu);
	g->closed = true;
	pthread_mutex_unlock(&g->mu);
	for (i = 1; i < g->n; i++)
		/* fails when the member's destroy closed its queue: that
		 * destroy retires the stand-in (rmsgi_group_member_gone) */
		(void)rmsgi_async_push(g->q[i], &g->close_w[i]);
	l->group = NULL;
	group_put(g);
}

int rmsg_listen_group(struct rmsg_ctx *const *ctxs, unsigned n, const char *uri,
		      const struct rmsg_cfg *cfg,
		      const struct rmsg_conn_ops *ops, rmsg_accept_cb accept,
		      rmsg_pick_cb pick, void *arg, struct rmsg_listener **l_p)
{
	struct rmsgi_group *g;
	struct rmsg_listener *l;
	unsigned i, j;
	int ret;

	if (!ctxs || n < 1 || n > RMSG_GROUP_MAX || !uri || !l_p)
		return -EINVAL;
	for (i = 0; i < n; i++) {
		if (!ctxs[i] || !ctxs[i]->async || ctxs[i]->destroying)
			return -EINVAL;
		for (j = 0; j < i; j++)
			if (ctxs[j] == ctxs[i])
				return -EINVAL;
	}
	g = calloc(1, sizeof(*g));
	if (!g)
		return -ENOMEM;
	pthread_mutex_init(&g->mu, NULL);
	g->n = n;
	g->pick = pick;
	g->arg = arg;
	for (i = 1; i < n; i++) {
		g->l[i] = calloc(1, sizeof(*g->l[i]));
		if (!g->l[i]) {
			ret = -ENOMEM;
			goto undo;
		}
	}
	ret = rmsg_listen(ctxs[0], uri, cfg, ops, accept, arg, &l);
	if (ret)
		goto undo;
	for (i = 0; i < rmsgi_tr_nslots; i++)
		if (l->tr[i] && !rmsgi_tr_serves_group(l->tr[i]))
			ret = -EOPNOTSUPP;
	if (ret) {
		rmsg_listener_close(l);
		goto undo;
	}
	g->l[0] = l;
	g->refs = n; /* the listener and each stand-in */
	l->group = g;
	for (i = 1; i < n; i++) {
		struct rmsg_listener *m = g->l[i];

		*m = *l;
		rmsgi_list_init(&m->link);
		m->ctx = ctxs[i];
		m->member = true;
		memset(m->tr, 0, sizeof(m->tr));
		memset(m->tr_priv, 0, sizeof(m->tr_priv));
		g->open_w[i].fn = member_open;
		g->open_w[i].arg = m;
		g->close_w[i].fn = member_close;
		g->close_w[i].arg = m;
		g->q[i] = rmsgi_async_get(ctxs[i]);
		/* cannot fail: the caller's member contexts are alive */
		(void)rmsgi_async_push(g->q[i], &g->open_w[i]);
	}
	*l_p = l;
	return 0;

undo:
	for (i = 1; i < n; i++)
		free(g->l[i]);
	pthread_mutex_destroy(&g->mu);
	free(g);
	return ret;
}
