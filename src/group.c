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
 * behind its mutex (closed, refs); the stand-ins are made on the home's
 * thread before any work reaches a member and freed on the member's
 * thread, by the last work the group queues there (the queue runs in
 * order, so every hand-over queued before it has run). A member cannot
 * be destroyed while the group is open (ctx->groups: -EBUSY), so the
 * home never queues work on a dead context; after the close, hand-overs
 * still queued see the group closed and refuse their peer (drop()),
 * also when they run inside the member's rmsg_ctx_destroy (async_fini).
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
	struct rmsg_ctx *ctx[RMSG_GROUP_MAX];
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
	unsigned left;

	pthread_mutex_lock(&g->mu);
	left = --g->refs;
	pthread_mutex_unlock(&g->mu);
	if (left)
		return;
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
	if (closed)
		/* the listener closed (or its home went) meanwhile */
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
	bool full;

	if (g->pick) {
		l->ctx->in_cb++;
		i = g->pick(peer, g->n, g->arg);
		l->ctx->in_cb--;
	} else {
		i = g->next++ % g->n;
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
	full = g->queued[i] >= g->l[i]->cfg.max_pending;
	pthread_mutex_unlock(&g->mu);
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
	rmsgi_async_push(g->ctx[i], &ho->w);
}

/* on the member's thread: its stand-in keeps the member's loop running,
 * as a listener keeps its own */
static void member_open(struct rmsg_ctx *ctx, void *arg)
{
	(void)arg;
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
	ev_unref(ctx->loop);
	free(l);
	group_put(g);
}

void rmsgi_group_close(struct rmsg_listener *l)
{
	struct rmsgi_group *g = l->group;
	unsigned i;

	pthread_mutex_lock(&g->mu);
	g->closed = true;
	pthread_mutex_unlock(&g->mu);
	for (i = 1; i < g->n; i++) {
		rmsgi_async_push(g->ctx[i], &g->close_w[i]);
		/* from here on the member may go (after the push: its queue
		 * is still there for it) */
		__atomic_sub_fetch(&g->ctx[i]->groups, 1, __ATOMIC_RELEASE);
	}
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
	for (i = 0; i < RMSGI_TR_COUNT; i++)
		if (l->tr[i] && (!l->tr[i]->lst->adopt || !l->tr[i]->lst->drop))
			ret = -EOPNOTSUPP;
	if (ret) {
		rmsg_listener_close(l);
		goto undo;
	}
	g->l[0] = l;
	g->ctx[0] = ctxs[0];
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
		g->ctx[i] = ctxs[i];
		g->open_w[i].fn = member_open;
		g->close_w[i].fn = member_close;
		g->close_w[i].arg = m;
		__atomic_add_fetch(&ctxs[i]->groups, 1, __ATOMIC_ACQUIRE);
		rmsgi_async_push(ctxs[i], &g->open_w[i]);
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
