// SPDX-License-Identifier: MIT
/*
 * rekey.c - one-sided access across a resume (session.c).
 *
 * Over RDMA a per-connection export is a type-2 memory window bound on
 * the connection's QP (mr.c); a resume brings a new QP, and the windows
 * went with the old one (a suspended connection keeps its exports,
 * without windows), while the peer's descriptors still carry the old
 * rkeys.
 *
 * Exporter: resumed over a backend with native one-sided ops, it binds
 * every export to the connection again on the new QP (mr.c's
 * rmsgi_mr_conn_rebind; one that cannot be bound is revoked, logged) and
 * sends a REKEY frame for each (id = the token, aux = the new rkey),
 * then one with id 0 (aux = how many came before it) that ends the list.
 * The binds are posted before the frames, so a peer that has the new
 * rkey finds the window bound.
 *
 * Importer: from the resume until the end frame its native one-sided
 * ops wait in the send queue (with what is queued behind them); then an
 * op whose descriptor names a token of the list goes with the new rkey.
 * A descriptor made after the resume carries its own rkey and is not in
 * the list. The list is the connection's, replaced at every resume, and
 * bounded: RMSGI_REKEY_MAX entries (16 bytes each). A REKEY frame outside
 * a resume, beyond the bound, or an end frame whose count is not what
 * came breaks the protocol (-EPROTO), and so does a list that has not
 * ended within the setup timeout (rmsg_cfg_set_timeout_ms) of the
 * resume: the ops held for it would wait for ever.
 *
 * Over TCP nothing of this runs: one-sided ops name the token, which a
 * resume does not change.
 */
#include <stdlib.h>
#include <sys/random.h>

#include "conn_int.h"
#include "mem.h"

#define RMSGI_REKEY_MAX 65536u

struct rk_ent {
	uint64_t token; /* 0: free */
	uint32_t rkey;
};

struct rmsgi_rekey {
	/* importer: the peer's list must end within the setup timeout of
	 * the resume, or the held ops would wait for ever */
	struct rmsgi_timer hold_t;
	bool hold;	       /* resumed, the peer's end frame not yet here */
	uint32_t got;	       /* REKEY frames since the resume */
	uint32_t n;	       /* entries */
	uint32_t cap;	       /* slots: 0 or a power of two */
	uint64_t seed;	       /* the slots' hash key: random */
	int err;	       /* exporter: a REKEY frame could not be queued */
	struct rmsgi_list *at; /* exporter: the last queued, ahead of all */
	struct rk_ent *e;
};

static uint32_t rk_slot(const struct rmsgi_rekey *rk, uint64_t token,
			uint32_t cap)
{
	/* the peer chooses the tokens it names: keyed with a seed it does
	 * not know, or it could make every entry collide and each insert
	 * walk the whole table (65536^2 probes) */
	uint64_t h = (token ^ rk->seed) * 0x9e3779b97f4a7c15ull;

	return (uint32_t)(h >> 32) & (cap - 1);
}

static int rk_grow(struct rmsgi_rekey *rk)
{
	uint32_t cap = rk->cap ? rk->cap * 2 : 16, i, j;
	struct rk_ent *e = calloc(cap, sizeof(*e));

	if (!e)
		return -ENOMEM;
	for (i = 0; i < rk->cap; i++) {
		if (!rk->e[i].token)
			continue;
		for (j = rk_slot(rk, rk->e[i].token, cap); e[j].token;
		     j = (j + 1) & (cap - 1))
			;
		e[j] = rk->e[i];
	}
	free(rk->e);
	rk->e = e;
	rk->cap = cap;
	return 0;
}

static int rk_put(struct rmsgi_rekey *rk, uint64_t token, uint32_t rkey)
{
	uint32_t j;
	int ret;

	if (rk->n * 2 >= rk->cap) {
		ret = rk_grow(rk);
		if (ret)
			return ret;
	}
	for (j = rk_slot(rk, token, rk->cap); rk->e[j].token;
	     j = (j + 1) & (rk->cap - 1)) {
		if (rk->e[j].token == token) {
			rk->e[j].rkey = rkey; /* named again: the last wins */
			return 0;
		}
	}
	rk->e[j].token = token;
	rk->e[j].rkey = rkey;
	rk->n++;
	return 0;
}

static const struct rk_ent *rk_find(const struct rmsgi_rekey *rk,
				    uint64_t token)
{
	uint32_t j;

	if (!rk->n)
		return NULL;
	for (j = rk_slot(rk, token, rk->cap); rk->e[j].token;
	     j = (j + 1) & (rk->cap - 1)) {
		if (rk->e[j].token == token)
			return &rk->e[j];
	}
	return NULL;
}

/* ------------------------------------------------------------------ */
/* exporter                                                             */

bool rmsgi_rekey_later(const struct rmsg_conn *c)
{
	unsigned i;

	/* suspended from a backend with native one-sided ops, or resumable
	 * on one without them in a context that has one: auto:// moves
	 * back to RDMA (start.c) */
	if (!c->ss || !c->ss->on || !c->tr)
		return false;
	/* a client moves only over auto:// (a server's session may resume
	 * through any of the context's listeners) */
	if (!c->is_server && !c->fb)
		return false;
	if (c->tr->caps & RMSGI_TR_CAP_RMA)
		return c->state == RMSGI_CS_SUSPENDED;
	for (i = 0; i < rmsgi_tr_nslots; i++)
		if (c->ctx->tr_priv[i] &&
		    (rmsgi_tr_get(i)->caps & RMSGI_TR_CAP_RMA))
			return true;
	return false;
}

static void rekey_tell(struct rmsg_conn *c, uint64_t token, uint32_t rkey)
{
	struct rmsgi_rekey *rk = c->rma.rk;

	if (!rk->err &&
	    rmsgi_conn_send_ctrl_first(c, RMSGI_T_REKEY, rkey, token, &rk->at))
		rk->err = -ENOMEM;
}

static void hold_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct rmsg_conn *c = w->data;

	(void)loop;
	(void)revents;
	if (!c->rma.rk || !c->rma.rk->hold || c->state != RMSGI_CS_ESTABLISHED)
		return;
	rmsgi_conn_why(c,
		       "the peer did not end its list of new rkeys within "
		       "%u ms of the resume (%u received)",
		       c->cfg.timeout_ms, c->rma.rk->got);
	rmsgi_conn_get(c);
	rmsgi_conn_abort(c, -EPROTO);
	rmsgi_ctx_flush(c->ctx);
	rmsgi_conn_put(c);
}

void rmsgi_rekey_resume(struct rmsg_conn *c)
{
	struct rmsgi_rekey *rk = c->rma.rk;
	unsigned told;

	if (rk) {
		/* the last resume's list means nothing now */
		rmsgi_timer_stop(c->ctx->loop, &rk->hold_t);
		free(rk->e);
		memset(rk, 0, sizeof(*rk));
	}
	if (!(c->tr->caps & RMSGI_TR_CAP_RMA)) {
		/* the exports keep no windows: tokens do */
		rmsgi_mr_conn_rebind(c, rekey_tell);
		return;
	}
	if (!rk) {
		rk = calloc(1, sizeof(*rk));
		if (!rk) {
			rmsgi_conn_abort(c, -ENOMEM);
			return;
		}
		c->rma.rk = rk;
	}
	rk->hold = true;
	rmsgi_timer_init(&rk->hold_t, c->ctx->env.timers, hold_cb);
	rk->hold_t.w.data = c;
	rmsgi_timer_start(c->ctx->loop, &rk->hold_t, c->cfg.timeout_ms / 1000.0,
			  0);
	if (getrandom(&rk->seed, sizeof(rk->seed), 0) != sizeof(rk->seed))
		rk->seed = (uint64_t)(uintptr_t)rk ^
			   (uint64_t)(ev_now(c->ctx->loop) * 1e9);
	/* the list goes ahead of everything queued: both sides may hold a
	 * one-sided op at the head of their queues until it arrives */
	rk->at = &c->tx.sendq;
	/* the resume proved the session (under the pre-shared key, if
	 * any): the new QP takes the peer's one-sided ops, as after AUTH */
	rk->err = rmsgi_tr_rma_open(c->tops, c->tr_priv);
	told = rk->err ? 0 : rmsgi_mr_conn_rebind(c, rekey_tell);
	if (!rk->err)
		rk->err = rmsgi_conn_send_ctrl_first(c, RMSGI_T_REKEY, told, 0,
						     &rk->at);
	if (rk->err)
		rmsgi_conn_abort(c, rk->err);
}

/* ------------------------------------------------------------------ */
/* importer                                                             */

int rmsgi_rekey_rx(struct rmsg_conn *c, const struct rmsgi_hdr *h)
{
	struct rmsgi_rekey *rk = c->rma.rk;
	int ret;

	if (!rk || !rk->hold) {
		rmsgi_conn_why(c, "the peer sent a REKEY frame outside a "
				  "resume");
		ret = -EPROTO;
	} else if (h->id == 0 && h->aux != rk->got) {
		rmsgi_conn_why(c,
			       "the peer ended its REKEY list at %u entries, "
			       "after %u",
			       h->aux, rk->got);
		ret = -EPROTO;
	} else if (h->id == 0) {
		rk->hold = false; /* the held ops go */
		rmsgi_timer_stop(c->ctx->loop, &rk->hold_t);
		rmsgi_ctx_mark_dirty(c->ctx, c);
		return 0;
	} else if (rk->got >= RMSGI_REKEY_MAX) {
		rmsgi_conn_why(c,
			       "the peer sent more than %u REKEY frames "
			       "after a resume",
			       RMSGI_REKEY_MAX);
		ret = -EPROTO;
	} else {
		rk->got++;
		ret = rk_put(rk, h->id, h->aux);
		if (ret == 0)
			return 0;
	}
	rmsgi_conn_abort(c, ret);
	return ret;
}

bool rmsgi_rekey_post(struct rmsg_conn *c, struct rmsgi_op *op)
{
	const struct rmsgi_rekey *rk = c->rma.rk;
	const struct rk_ent *e;

	if (rk->hold)
		return true;
	e = rk_find(rk, op->rma.token);
	if (e)
		op->rma.rkey = e->rkey;
	return false;
}

void rmsgi_rekey_free(struct rmsg_conn *c)
{
	if (!c->rma.rk)
		return;
	if (c->rma.rk->hold)
		rmsgi_timer_stop(c->ctx->loop, &c->rma.rk->hold_t);
	free(c->rma.rk->e);
	free(c->rma.rk);
	c->rma.rk = NULL;
}
