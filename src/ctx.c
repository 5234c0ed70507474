// SPDX-License-Identifier: MIT
/*
 * ctx.c - the context: binds the library to one libev loop.
 *
 * Work queued by API calls (sends, completions, credit updates) is flushed
 * from an ev_prepare watcher, i.e. after the current batch of events and
 * before the loop blocks. That batches doorbells and lets one signalled
 * completion cover a burst. The watcher runs only while there is work: a
 * connection marked dirty starts it, and it stops once it found nothing
 * to do, unless a backend polls completions (then it runs every
 * iteration, to re-arm them). Internal watchers do not keep ev_run()
 * alive; each listener and connection holds a loop reference instead,
 * like a socket would.
 */
#include <stdlib.h>
#include <time.h>

#include "rmsg_int.h"
#include "pool.h"

const struct rmsgi_tr_env *rmsgi_ctx_env(struct rmsg_ctx *ctx)
{
	return &ctx->env;
}

void **rmsgi_ctx_tr_slot(struct rmsg_ctx *ctx, const struct rmsgi_tr *tr)
{
	return &ctx->tr_priv[rmsgi_tr_slot(tr)];
}

struct rmsgi_op *rmsgi_op_get(struct rmsg_ctx *ctx)
{
	struct rmsgi_list *n = rmsgi_list_pop(&ctx->op_free);
	struct rmsgi_op *op;

	if (n) {
		ctx->op_free_len--;
		op = rmsgi_list_entry(n, struct rmsgi_op, link);
	} else {
		op = malloc(sizeof(*op));
		if (!op)
			return NULL;
	}
	memset(op, 0, offsetof(struct rmsgi_op, iov_inline));
	op->cb = NULL;
	op->arg = NULL;
	op->tr_priv = NULL;
	rmsgi_list_init(&op->link);
	op->iov = op->iov_inline;
	return op;
}

void rmsgi_op_put(struct rmsg_ctx *ctx, struct rmsgi_op *op)
{
	if (op->iov != op->iov_inline)
		free(op->iov);
	op->iov = op->iov_inline;
	if (ctx->op_free_len >= 4096) {
		free(op);
		return;
	}
	rmsgi_list_add_head(&ctx->op_free, &op->link);
	ctx->op_free_len++;
}

void rmsgi_ctx_mark_dirty(struct rmsg_ctx *ctx, struct rmsg_conn *c)
{
	if (c->dirty)
		return;
	c->dirty = true;
	rmsgi_list_add_tail(&ctx->dirty, &c->dirty_link);
	if (ctx->own) {
		/* inside rmsg_ctx_progress(), which flushes after its pass,
		 * the prepare watcher is not needed */
		if (rmsgi_own_busy(ctx->own))
			return;
		rmsgi_own_dirty(ctx->own);
	}
	if (!ev_is_active(&ctx->prepare)) {
		ev_prepare_start(ctx->loop, &ctx->prepare);
		ev_unref(ctx->loop);
	}
}

/* the reaper's turn outside every backend entry point */
static void ctx_reap(struct rmsg_ctx *ctx)
{
	if (RMSGI_UNLIKELY(ctx->reaper.head != NULL) && !ctx->reaper.depth)
		rmsgi_reap_run(&ctx->reaper);
}

void rmsgi_ctx_flush(struct rmsg_ctx *ctx)
{
	struct rmsgi_list *n;

	if (ctx->flushing)
		return;
	ctx_reap(ctx);
	ctx->flushing = true;
	while ((n = rmsgi_list_pop(&ctx->dirty))) {
		struct rmsg_conn *c =
			rmsgi_list_entry(n, struct rmsg_conn, dirty_link);

		c->dirty = false;
		rmsgi_conn_get(c);
		rmsgi_conn_flush(c);
		rmsgi_conn_put(c);
	}
	ctx->flushing = false;
	/* what ended in those callbacks (its down marks it dirty again:
	 * the next prepare reports it) */
	ctx_reap(ctx);
}

static int ctx_poll(struct rmsg_ctx *ctx, bool arm)
{
	unsigned i;
	int n = 0;

	for (i = 0; i < rmsgi_tr_nslots; i++) {
		const struct rmsgi_tr *tr = rmsgi_tr_get(i);

		if (ctx->tr_priv[i])
			n += rmsgi_tr_poll(tr, ctx->tr_priv[i], arm);
	}
	return n;
}

/* a backend with completions to poll has work at every prepare */
static bool ctx_can_poll(const struct rmsg_ctx *ctx)
{
	unsigned i;

	for (i = 0; i < rmsgi_tr_nslots; i++)
		if (ctx->tr_priv[i] && rmsgi_tr_polls(rmsgi_tr_get(i)))
			return true;
	return false;
}

/* busy polling: the backends' polls, or their spins (TCP's sockets) */
static int ctx_spin(struct rmsg_ctx *ctx)
{
	unsigned i;
	int n = 0;

	for (i = 0; i < rmsgi_tr_nslots; i++)
		if (ctx->tr_priv[i])
			n += rmsgi_tr_spin(rmsgi_tr_get(i), ctx->tr_priv[i]);
	return n;
}

/* how often the busy polling reads its clock: after every 16th round
 * while each round is a completion-queue check, after every round once
 * a backend in use spins over its sockets (a round's length then grows
 * with the connections, and the budget must stay a bound) */
static unsigned ctx_spin_mask(const struct rmsg_ctx *ctx)
{
	unsigned i;

	for (i = 0; i < rmsgi_tr_nslots; i++)
		if (ctx->tr_priv[i] && rmsgi_tr_spin_costly(rmsgi_tr_get(i)))
			return 0;
	return 15;
}

/* does the context busy-poll: configured, with connections, and a
 * backend in use that can find work so */
static bool ctx_spins(const struct rmsg_ctx *ctx)
{
	unsigned i;

	if (!ctx->cfg.busy_poll_us || rmsgi_list_empty(&ctx->conns))
		return false;
	for (i = 0; i < rmsgi_tr_nslots; i++)
		if (ctx->tr_priv[i] && rmsgi_tr_spins(rmsgi_tr_get(i)))
			return true;
	return false;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * Rounds of completions one prepare runs at most. Completions beget
 * completions (a message's callback sends the next one; returned credits
 * let the peer send more), so "until the queue is empty" can last for
 * ever under steady traffic, and the loop would never get back to its
 * timers (keepalive, deadlines), its other watchers and ev_async. After
 * this many the loop turns once (without blocking: ctx->idle) and the
 * next prepare goes on.
 */
#define RMSGI_POLL_ROUNDS 16

/* the idle watcher's only job is to keep the loop from blocking */
static void ctx_idle_cb(struct ev_loop *loop, ev_idle *w, int revents)
{
	(void)revents;
	ev_idle_stop(loop, w);
}

unsigned rmsgi_ctx_work(struct rmsg_ctx *ctx, bool spin, bool arm, bool *more_p)
{
	uint64_t start, budget;
	unsigned rounds = 0, n = 0;
	int got;

	*more_p = false;
	spin = spin && ctx_spins(ctx);
	if (rmsgi_list_empty(&ctx->dirty) && !spin && !ctx_can_poll(ctx))
		return 0; /* nothing queued, nothing to poll */
	rmsgi_ctx_flush(ctx);
	if (spin) {
		unsigned spins = 0, mask = ctx_spin_mask(ctx);

		budget = (uint64_t)ctx->cfg.busy_poll_us * 1000;
		start = now_ns();
		/* the clock is read every 16th empty poll only (a tighter
		 * spin notices a completion sooner), or after every spin */
		while ((++spins & mask) || now_ns() - start < budget) {
			if ((got = ctx_spin(ctx)) > 0) {
				n += (unsigned)got;
				rmsgi_ctx_flush(ctx);
				start = now_ns();
				/* each round is a fresh burst for the
				 * direct send (send.c send_now) */
				ev_now_update(ctx->loop);
				if (++rounds == RMSGI_POLL_ROUNDS)
					break;
			}
		}
	}
	/* with @arm: closes the notify race: arm, then poll once more */
	while (rounds < RMSGI_POLL_ROUNDS && (got = ctx_poll(ctx, arm)) > 0) {
		n += (unsigned)got;
		rmsgi_ctx_flush(ctx);
		rounds++;
	}
	rmsgi_ctx_flush(ctx);
	*more_p = rounds >= RMSGI_POLL_ROUNDS;
	return n;
}

/* before the loop blocks: flush, spin if asked to, re-arm notification */
static void ctx_prepare_cb(struct ev_loop *loop, ev_prepare *w, int revents)
{
	struct rmsg_ctx *ctx = w->data;
	bool idle = rmsgi_list_empty(&ctx->dirty), more;

	(void)revents;
	/* rmsg_ctx_progress() never waits: there the caller spins, if
	 * it wants to, by calling it again */
	rmsgi_ctx_work(ctx, !ctx->own || !rmsgi_own_busy(ctx->own), true,
		       &more);
	if (more) {
		/* completions may remain, unannounced: the loop runs its
		 * other watchers and timers, does not block, and comes
		 * back here (a private loop: its fd stays readable) */
		if (ctx->own)
			rmsgi_own_wake(ctx->own);
		else
			ev_idle_start(loop, &ctx->idle);
		return;
	}
	/* nothing to do this time: sleep until a conn is marked dirty
	 * (kept on after work, so a busy loop does not toggle it) */
	if (idle && rmsgi_list_empty(&ctx->dirty) && !ctx_can_poll(ctx) &&
	    !ctx_spins(ctx)) {
		ev_ref(loop);
		ev_prepare_stop(loop, w);
	}
}

/* the pools draw on the context's registered-memory budget (mr.c) */
static int pool_take(void *priv, size_t bytes)
{
	return rmsgi_budget_take(priv, bytes);
}

static void pool_give(void *priv, size_t bytes)
{
	rmsgi_budget_give(priv, bytes);
}

static const struct rmsgi_pool_budget pool_budget = {
	.take = pool_take,
	.give = pool_give,
};

int rmsgi_ctx_new(struct ev_loop *loop, const struct rmsg_cfg *cfg,
		  struct rmsgi_ownloop *own, struct rmsgi_timers *ts,
		  struct rmsg_ctx **ctx_p)
{
	struct rmsg_ctx *ctx;
	int ret;

	ctx = calloc(1, sizeof(*ctx));
	if (!ctx)
		return -ENOMEM;
	ctx->loop = loop;
	ctx->own = own;
	ctx->env.timers = ts;
	if (cfg)
		ctx->cfg = cfg->v;
	else
		rmsgi_cfg_defaults(&ctx->cfg);
	ctx->log_max = rmsgi_log_max(&ctx->cfg);
	ctx->reaper.tail = &ctx->reaper.head;
	ctx->env.reaper = &ctx->reaper;
	ctx->env.ctx = ctx;
	ctx->env.loop = loop;
	ctx->env.cfg = &ctx->cfg;
	ctx->env.log_max = ctx->log_max;
	rmsgi_list_init(&ctx->conns);
	rmsgi_list_init(&ctx->listeners);
	rmsgi_list_init(&ctx->dirty);
	rmsgi_list_init(&ctx->held);
	rmsgi_list_init(&ctx->op_free);
	rmsgi_list_init(&ctx->pack_live);
	rmsgi_quar_init(&ctx->pack_done, RMSGI_PACK_DONE_KEEP);
	rmsgi_list_init(&ctx->resolves);
	rmsgi_list_init(&ctx->rsv_wait);
	rmsgi_mr_init(ctx);
	ret = rmsgi_pool_create(0, &ctx->pool);
	if (ret) {
		free(ctx);
		return ret;
	}
	ctx->env.pool = ctx->pool;
	rmsgi_pool_set_budget(ctx->pool, &pool_budget, ctx);
	ret = rmsgi_async_init(ctx);
	if (ret) {
		rmsgi_pool_destroy(ctx->pool);
		free(ctx);
		return ret;
	}
	ev_prepare_init(&ctx->prepare, ctx_prepare_cb);
	ctx->prepare.data = ctx;
	ev_idle_init(&ctx->idle, ctx_idle_cb);
	ev_prepare_start(loop, &ctx->prepare);
	ev_unref(loop);
	*ctx_p = ctx;
	return 0;
}

int rmsg_ctx_create(struct ev_loop *loop, const struct rmsg_cfg *cfg,
		    struct rmsg_ctx **ctx_p)
{
	if (!ctx_p)
		return -EINVAL;
	if (!loop)
		loop = EV_DEFAULT;
	if (!loop)
		return -ENOMEM;
	return rmsgi_ctx_new(loop, cfg, NULL, NULL, ctx_p);
}

/* backends tear down synchronously and report every op and conn; the
 * callbacks that follow (-ECANCELED) may release messages, which a
 * backend's stop keeps valid until its fini */
static void ctx_settle(struct rmsg_ctx *ctx)
{
	unsigned i;
	int k;

	for (k = 0; k < 8; k++) {
		/* a release in a callback may let a connection end in the
		 * next stop (a buffer held it), whose callbacks run next */
		for (i = 0; i < rmsgi_tr_nslots; i++)
			if (ctx->tr_priv[i])
				rmsgi_tr_stop(rmsgi_tr_get(i), ctx->tr_priv[i]);
		ctx_reap(ctx);
		if (rmsgi_list_empty(&ctx->dirty))
			break;
		rmsgi_ctx_flush(ctx);
	}
}

int rmsg_ctx_destroy(struct rmsg_ctx *ctx)
{
	struct rmsgi_list *n, *t;
	unsigned i;

	if (!ctx)
		return -EINVAL;
	if (ctx->in_cb)
		return -EBUSY;
	/* work submitted before the destroy runs now and may start a
	 * name's resolution; then no resolver thread may reach the context
	 * (a submit after rmsgi_async_fini() fails, and _ctx_fini() detaches
	 * every job); and from here on no connection or listener starts
	 * (rmsg_connect, rmsg_listen: -ESHUTDOWN), so the aborts below end
	 * every one, those an on_close opens again included */
	rmsgi_async_fini(ctx);
	rmsgi_resolve_ctx_fini(ctx);
	ctx->destroying = true;
	rmsgi_list_for_each_safe (n, t, &ctx->listeners) {
		struct rmsg_listener *l =
			rmsgi_list_entry(n, struct rmsg_listener, link);

		if (l->member) /* a group's stand-in: its home goes on */
			rmsgi_group_member_gone(l);
		else
			rmsg_listener_close(l);
	}
	rmsgi_list_for_each_safe (n, t, &ctx->conns)
		rmsgi_conn_abort(rmsgi_list_entry(n, struct rmsg_conn, link),
				 -ECANCELED);
	ctx_settle(ctx);
	/* held messages the app did not release in those callbacks are
	 * invalid from here on (rmsg_ctx_destroy.3): released for it, which
	 * lets their connections go */
	while ((n = rmsgi_list_pop(&ctx->held)))
		rmsg_msg_release(rmsgi_list_entry(n, struct rmsg_msg, link));
	ctx_settle(ctx);
	for (i = 0; i < rmsgi_tr_nslots; i++)
		if (ctx->tr_priv[i])
			rmsgi_tr_get(i)->ctx->fini(ctx->tr_priv[i]);
	/* fini ended what was left: nothing may outlive the context */
	ctx_reap(ctx);
	rmsgi_ctx_flush(ctx);
	rmsgi_rpc_ctx_fini(ctx);
	rmsgi_mr_fini(ctx);
	if (ev_is_active(&ctx->prepare)) {
		ev_ref(ctx->loop);
		ev_prepare_stop(ctx->loop, &ctx->prepare);
	}
	ev_idle_stop(ctx->loop, &ctx->idle);
	rmsgi_pack_fini(ctx);
	while ((n = rmsgi_list_pop(&ctx->op_free)))
		free(rmsgi_list_entry(n, struct rmsgi_op, link));
	rmsgi_pool_destroy(ctx->pool);
	rmsgi_async_free(ctx);
	free(ctx->sess_b); /* (every session ended with its connection) */
	if (ctx->own)
		rmsgi_own_destroy(ctx->own);
	free(ctx);
	return 0;
}

struct ev_loop *rmsg_ctx_loop(const struct rmsg_ctx *ctx)
{
	return ctx ? ctx->loop : NULL;
}

int rmsg_buf_alloc(struct rmsg_ctx *ctx, size_t len, void **buf_p)
{
	if (!ctx || !len || !buf_p)
		return -EINVAL;
	return rmsgi_pool_alloc(ctx->pool, len, buf_p);
}

void rmsg_buf_free(struct rmsg_ctx *ctx, void *buf)
{
	if (ctx)
		rmsgi_pool_free(ctx->pool, buf);
}
