// SPDX-License-Identifier: MIT
/*
 * conn.c - the connection object and THE connection state machine.
 *
 * Transport-free: backends report events, this file decides.
 *
 *  state         event                      action -> next state
 *  ------------  -------------------------  ---------------------------------
 *  CONNECTING    tr established (hello ok)  on_established   -> ESTABLISHED
 *  CONNECTING    tr failed (reject, ...)    fail queued ops  -> CLOSING
 *  (server)      tr request                 app accept cb:
 *                                           accept           -> ACCEPTING
 *                                           reject: never seen again
 *  ACCEPTING     tr established             on_established   -> ESTABLISHED
 *  ACCEPTING     tr failed                  fail queued ops  -> CLOSING
 *  ESTABLISHED   frame received             on_msg / credits / acks
 *  ESTABLISHED   bad frame                  abort(-EPROTO)   -> CLOSING
 *  ESTABLISHED   tr failed (peer gone)      fail queued ops  -> CLOSING
 *  any open      rmsg_conn_close()          cancel, tr disconnect -> CLOSING
 *  CLOSING       tr down (all ops done)     on_close(reason) -> CLOSED
 *  CLOSED        last reference dropped     free
 *
 * One-sided operations (rmsg_write_imm, rmsg_write, rmsg_read) are ops on
 * the same send queue as messages, so order and the queue bound hold for
 * them too. A write-with-immediate takes a credit (it consumes a receive
 * at the peer); on a transport with native one-sided ops (RDMA) writes
 * and reads take none. Without it (TCP) they are frames the peer checks
 * against its regions and acknowledges, and the op completes on that
 * answer, like a rendezvous send (rndvq).
 *
 * A failure after a local close keeps reason 0. Callbacks of completed ops
 * run from the context flush (never inside the API call that queued them),
 * and always before on_close.
 */
#include <stdlib.h>

#include "rmsg_int.h"
#include "pool.h"

/* every state change goes through here: the direct-send limit follows */
static void set_state(struct rmsg_conn *c, enum rmsgi_conn_state s)
{
	size_t max;

	c->state = s;
	c->direct_lim = 0;
	if (c->lst)
		rmsgi_listener_track(c, s);
	if (s != RMSGI_CS_ESTABLISHED || !c->tops->send_direct)
		return;
	max = c->tops->direct_max(c->tr_priv);
	/* a rendezvous is never sent directly */
	if (c->tr->caps & RMSGI_TR_CAP_RNDV)
		max = RMSGI_MIN(max, (size_t)c->peer_eager);
	c->direct_lim = max == SIZE_MAX ? SIZE_MAX : max + 1;
}

/*
 * Credits go back to the peer as buffers free up. Withholding them while
 * our answers to it wait (tried: keep the peer at its last credit once
 * answers reach a bound) deadlocked two honest peers that both asked
 * more of each other than their credits, each waiting for credits the
 * other held back. What bounds the answers a peer can make us queue is
 * that it can only send what we returned, in frames we could post (see
 * "What a peer may make us hold" in rmsg_int.h).
 */

/* takes a credit for a frame and what it returns to the peer, which we
 * count at once: the peer can never have more than we think */
static inline uint16_t credit_take(struct rmsg_conn *c)
{
	return rmsgi_credit_take(&c->cr);
}

/* should a CREDIT frame go out? (rmsgi_credit_want_update) */
static inline bool credit_due(const struct rmsg_conn *c)
{
	return rmsgi_credit_want_update(&c->cr);
}

int rmsgi_conn_new(struct rmsg_ctx *ctx, const struct rmsgi_cfgv *cfg,
		   const struct rmsg_conn_ops *ops, void *arg,
		   struct rmsg_conn **c_p)
{
	struct rmsg_conn *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	c->ctx = ctx;
	c->cfg = *cfg;
	if (ops)
		c->ops = *ops;
	c->arg = arg;
	c->refs = 1;
	c->id = ++ctx->next_conn_id;
	c->ti.ctx = ctx;
	c->ti.cfg = &c->cfg;
	c->ti.id = c->id;
	set_state(c, RMSGI_CS_CONNECTING);
	rmsgi_list_init(&c->sendq);
	rmsgi_list_init(&c->rndvq);
	rmsgi_list_init(&c->rxq);
	rmsgi_list_init(&c->exports);
	rmsgi_list_init(&c->doneq);
	rmsgi_list_init(&c->dirty_link);
	rmsgi_list_add_tail(&ctx->conns, &c->link);
	c->credit_op.kind = RMSGI_OP_CTRL;
	c->credit_op.type = RMSGI_T_CREDIT;
	c->credit_op.iov = c->credit_op.iov_inline;
	/* what we grant; frames can beat the established event (RDMA) */
	rmsgi_credit_grant(&c->cr, cfg->credits);
	ev_ref(ctx->loop);
	*c_p = c;
	return 0;
}

/* undoes rmsgi_conn_new() for a connection the app never saw: no
 * callbacks, nothing posted */
void rmsgi_conn_discard(struct rmsg_conn *c)
{
	c->tr = NULL;
	c->tops = NULL;
	c->tr_priv = NULL;
	set_state(c, RMSGI_CS_CLOSED);
	rmsgi_list_del(&c->link);
	ev_unref(c->ctx->loop);
	rmsgi_conn_put(c);
}

void rmsgi_conn_get(struct rmsg_conn *c)
{
	c->refs++;
}

/* the last reference went: the object goes (kept out of the inline
 * fast path of rmsgi_conn_put) */
static void __attribute__((noinline)) conn_free(struct rmsg_conn *c)
{
	if (c->dirty)
		rmsgi_list_del(&c->dirty_link);
	rmsgi_mr_conn_gone(c); /* finalize() did, unless it never ran */
	rmsgi_rpc_conn_free(c);
	free(c);
}

void rmsgi_conn_put(struct rmsg_conn *c)
{
	if (--c->refs > 0)
		return;
	conn_free(c);
}

void rmsgi_conn_hello(const struct rmsg_conn *c, struct rmsgi_hello *h)
{
	memset(h, 0, sizeof(*h));
	h->credits = (uint16_t)c->cfg.credits;
	h->eager_size = (uint32_t)c->cfg.eager_size;
	h->conn_id = c->id;
	if (c->is_server) {
		h->pdata_len = c->my_pdata_len;
		memcpy(h->pdata, c->my_pdata, c->my_pdata_len);
	} else {
		h->pdata_len = c->cfg.pdata_len;
		memcpy(h->pdata, c->cfg.pdata, c->cfg.pdata_len);
	}
}

static void set_peer(struct rmsg_conn *c, const struct rmsgi_hello *h)
{
	c->peer_pdata_len = h->pdata_len;
	memcpy(c->peer_pdata, h->pdata, h->pdata_len);
	c->peer_credits = h->credits;
	c->peer_eager = h->eager_size;
	rmsgi_credit_init(&c->cr, h->credits, c->cfg.credits);
}

void rmsgi_conn_refusal(const struct rmsg_conn *c, int err,
			struct rmsgi_hello *reply)
{
	rmsgi_conn_hello(c, reply);
	/* the app's odd values (not an errno) read as a plain refusal */
	reply->status = (int16_t)(err < 0 && err > -4096 ? err : -ECONNREFUSED);
}

int rmsgi_conn_ev_request(struct rmsg_conn *c, struct rmsg_listener *l,
			  const struct rmsgi_hello *h,
			  struct rmsgi_hello *reply)
{
	int ret = 0;

	/* from here on the app may see the connection */
	c->ops = l->ops;
	c->is_server = true;
	set_peer(c, h);
	if (h->credits < 4 || h->eager_size < 64)
		ret = -EPROTO;
	if (ret == 0 && l->accept) {
		c->in_accept = true;
		c->ctx->in_cb++;
		ret = l->accept(l, c, h->pdata, h->pdata_len, l->arg);
		c->ctx->in_cb--;
		c->in_accept = false;
		if (ret > 0)
			ret = -ECONNREFUSED;
	}
	if (ret) {
		memset(&c->ops, 0, sizeof(c->ops));
		rmsgi_conn_refusal(c, ret, reply);
		return reply->status;
	}
	set_state(c, RMSGI_CS_ACCEPTING);
	c->app_accepted = true;
	rmsgi_conn_hello(c, reply);
	return 0;
}

void rmsgi_conn_set_tc(struct rmsg_conn *c, void *tc)
{
	c->tr_priv = tc;
}

void rmsgi_conn_ev_established(struct rmsg_conn *c, const struct rmsgi_hello *h)
{
	if (c->state != RMSGI_CS_CONNECTING && c->state != RMSGI_CS_ACCEPTING)
		return;
	if (h) {
		if (h->credits < 4 || h->eager_size < 64) {
			rmsgi_conn_abort(c, -EPROTO);
			return;
		}
		set_peer(c, h);
	}
	set_state(c, RMSGI_CS_ESTABLISHED);
	c->was_established = true;
	rmsgi_keepalive_start(c);
	rmsgi_conn_get(c);
	if (c->ops.on_established) {
		c->ctx->in_cb++;
		c->ops.on_established(c, c->arg);
		c->ctx->in_cb--;
	}
	rmsgi_ctx_mark_dirty(c->ctx, c);
	rmsgi_conn_put(c);
}

/* a finished op goes back to the context's free list; an answer that
 * leaves the bound lets withheld credits go */
static void op_recycle(struct rmsg_conn *c, struct rmsgi_op *op)
{
	if (op->kind == RMSGI_OP_SEND || op->kind == RMSGI_OP_WRITE ||
	    op->kind == RMSGI_OP_READ)
		c->sendq_len--;
	if (op->answer)
		c->ans_n--;
	rmsgi_op_put(c->ctx, op);
}

/* an op generated for the peer: counted until recycled */
static inline void op_answer(struct rmsg_conn *c, struct rmsgi_op *op)
{
	op->answer = 1;
	c->ans_n++;
}

/* moves an op to the done queue; its callback runs at the next flush.
 * One without a callback is recycled at once: nothing would run. */
static void op_finish(struct rmsg_conn *c, struct rmsgi_op *op, int status)
{
	if (!op->cb) {
		op_recycle(c, op);
		if (c->want_writable)
			rmsgi_ctx_mark_dirty(c->ctx, c);
		return;
	}
	op->status = status;
	rmsgi_list_add_tail(&c->doneq, &op->link);
	rmsgi_ctx_mark_dirty(c->ctx, c);
}

/* a rendezvous send leaves rndvq when acknowledged or failed; it finishes
 * once the transport has also completed the request frame */
static void rndv_settle(struct rmsg_conn *c, struct rmsgi_op *op, int status)
{
	c->rndv_mark = ev_now(c->ctx->loop);
	if (c->tr_priv && c->tops->rndv_release)
		c->tops->rndv_release(c->tr_priv, op);
	op->status = status;
	op->acked = 1;
	if (!op->posted)
		op_finish(c, op, status);
}

/* fails everything not yet handed to the transport, and rendezvous sends
 * the peer will never acknowledge now */
static void cancel_sendq(struct rmsg_conn *c, int status)
{
	struct rmsgi_list *n;

	while ((n = rmsgi_list_pop(&c->sendq))) {
		struct rmsgi_op *op =
			rmsgi_list_entry(n, struct rmsgi_op, link);

		if (op == &c->credit_op) {
			c->credit_op_busy = false;
			continue;
		}
		op_finish(c, op, status);
	}
}

static void cancel_rndv(struct rmsg_conn *c, int status)
{
	struct rmsgi_list *n;

	while ((n = rmsgi_list_pop(&c->rndvq))) {
		struct rmsgi_op *op =
			rmsgi_list_entry(n, struct rmsgi_op, rlink);

		rndv_settle(c, op, status);
	}
}

static void cancel_queued(struct rmsg_conn *c, int status)
{
	cancel_sendq(c, status);
	cancel_rndv(c, status);
}

/* drops messages that can no longer be delivered */
static void drop_rx(struct rmsg_conn *c)
{
	struct rmsgi_list *n, *t;

	rmsgi_list_for_each_safe (n, t, &c->rxq) {
		struct rmsg_msg *m = rmsgi_list_entry(n, struct rmsg_msg, link);

		if (!m->ready)
			continue; /* the transport still owns it */
		rmsgi_list_del(&m->link);
		m->free_fn(m);
	}
}

/* why the peer's end went: a reset after its BYE was a close on purpose */
static int peer_reason(const struct rmsg_conn *c, int reason)
{
	if (!reason || reason == -ECONNRESET)
		return c->peer_bye ? -ESHUTDOWN : -ECONNRESET;
	return reason;
}

/*
 * The last frame of a local close, behind the work already posted (what
 * was only queued is cancelled): a CREDIT frame marked BYE, so that the
 * peer reports -ESHUTDOWN, not -ECONNRESET. It goes even when our last
 * credit was just spent on a CREDIT frame whose answer is still on its
 * way (two sides that returned credits to each other a moment before
 * the close): the peer takes this one frame beyond the grant
 * (rmsgi_conn_rx; the receive buffer is one of its spares). Without it
 * an honest close read as a reset whenever the timing was unlucky.
 */
static void send_bye(struct rmsg_conn *c)
{
	struct rmsgi_op *op;

	if (!c->tr_priv)
		return;
	op = rmsgi_op_get(c->ctx);
	if (!op)
		return;
	op->kind = RMSGI_OP_CTRL;
	op->type = RMSGI_T_CREDIT;
	op->aux = RMSGI_CREDIT_BYE;
	op->credits = rmsgi_credit_take_beyond(&c->cr);
	op->posted = 1;
	if (c->tops->post(c->tr_priv, op)) {
		op->posted = 0;
		rmsgi_op_put(c->ctx, op);
		return;
	}
	if (c->tops->kick)
		c->tops->kick(c->tr_priv);
}

void rmsgi_conn_ev_failed(struct rmsg_conn *c, int reason,
			  const struct rmsgi_hello *h)
{
	if (c->state >= RMSGI_CS_CLOSING)
		return;
	if (c->auto_fallback && c->state == RMSGI_CS_CONNECTING && !h) {
		/* auto://: RDMA could not connect (an app's reject, which
		 * carries a hello, is final); TCP once the backend is down */
		c->fallback_pending = true;
		c->fallback_reason = reason ? reason : -ECONNRESET;
		return;
	}
	if (h) {
		c->peer_pdata_len = h->pdata_len;
		memcpy(c->peer_pdata, h->pdata, h->pdata_len);
		/* a listener over its limits, not the app, said no */
		if (h->status == -EUSERS)
			rmsgi_warn(c->ctx, "conn %u: refused: %s", c->id,
				   rmsg_strerror(-EUSERS));
	}
	c->close_reason = peer_reason(c, reason);
	set_state(c, RMSGI_CS_CLOSING);
	cancel_queued(c, c->close_reason);
	drop_rx(c);
}

bool rmsgi_conn_awaits_peer(const struct rmsg_conn *c)
{
	return !rmsgi_list_empty(&c->rndvq);
}

static int conn_start_tr(struct rmsg_conn *c, const struct rmsgi_tr *tr,
			 const struct rmsgi_uri *u)
{
	int ret;

	c->tr = tr;
	c->tops = tr->conn;
	c->tr_priv = NULL;
	ret = tr->conn->connect(c, &c->ti, u);
	if (ret)
		c->tr_priv = NULL; /* nothing started */
	return ret;
}

int rmsgi_conn_start(struct rmsg_conn *c, const struct rmsgi_uri *u)
{
	const struct rmsgi_tr *v[RMSGI_TR_COUNT];
	int n = rmsgi_tr_for_scheme(u->scheme, v);
	int ret;

	if (n < 1)
		return -EINVAL;
	if (n > 1) {
		/* auto://: the first that connects; a failure after the
		 * start falls back in rmsgi_conn_ev_failed/ev_down */
		c->auto_fallback = true;
		c->auto_uri = *u;
	}
	ret = conn_start_tr(c, v[0], u);
	if (ret && n > 1) {
		/* no RDMA here (no device, or no route through one) */
		c->auto_fallback = false;
		c->fallback_reason = ret;
		rmsgi_info(c->ctx, "auto://%s:%u: %s; using %s", u->host,
			   u->port, rmsgi_fallback_text(ret), v[1]->name);
		ret = conn_start_tr(c, v[1], u);
	}
	return ret;
}

void rmsgi_conn_ev_down(struct rmsg_conn *c)
{
	if (c->fallback_pending) {
		int ret;

		c->fallback_pending = false;
		c->auto_fallback = false;
		rmsgi_info(c->ctx, "conn %u: RDMA failed (%s); using TCP",
			   c->id, rmsgi_fallback_text(c->fallback_reason));
		c->tr_priv = NULL;
		ret = conn_start_tr(c, rmsgi_tr_get(RMSGI_TR_TCP),
				    &c->auto_uri);
		if (ret == 0)
			return;
		c->close_reason = ret;
	}
	c->tr_priv = NULL;
	c->tr_down = true;
	/* nobody will acknowledge these now, and nothing queued can go
	 * (answers to frames that arrived during a local close's linger) */
	cancel_rndv(c, c->close_reason ? c->close_reason : -ECANCELED);
	cancel_sendq(c, c->close_reason ? c->close_reason : -ECANCELED);
	if (c->state < RMSGI_CS_CLOSING) {
		/* a backend that went down without saying why */
		c->close_reason = peer_reason(c, 0);
		set_state(c, RMSGI_CS_CLOSING);
		cancel_queued(c, c->close_reason);
	}
	drop_rx(c);
	rmsgi_ctx_mark_dirty(c->ctx, c);
}

void rmsgi_conn_abort(struct rmsg_conn *c, int reason)
{
	if (c->state >= RMSGI_CS_CLOSING)
		return;
	rmsgi_log(c->ctx, reason == -ECANCELED ? RMSG_LOG_DEBUG : RMSG_LOG_WARN,
		  "conn %u: closing: %s", c->id, rmsg_strerror(reason));
	c->close_reason = reason;
	set_state(c, RMSGI_CS_CLOSING);
	cancel_queued(c, reason);
	drop_rx(c);
	/* a failure does not linger */
	if (c->tr_priv)
		c->tops->disconnect(c->tr_priv, 0);
	else if (!c->tr)
		rmsgi_conn_ev_down(c);
}

int rmsg_conn_close(struct rmsg_conn *c)
{
	if (!c)
		return -EINVAL;
	if (c->in_accept)
		return -EBUSY; /* reject by returning an error instead */
	if (c->state >= RMSGI_CS_CLOSING)
		return 0;
	c->close_reason = 0;
	set_state(c, RMSGI_CS_CLOSING);
	/* what the peer was already asked to read (rendezvous) or answer
	 * (emulated one-sided ops) stays: the transport lingers for its
	 * acknowledgements; the rest fails with -ECANCELED when it is
	 * down (rmsgi_conn_ev_down) */
	cancel_sendq(c, -ECANCELED);
	drop_rx(c);
	if (c->was_established)
		send_bye(c);
	/* the app's close lingers (the backend decides nothing of it) */
	if (c->tr_priv)
		c->tops->disconnect(c->tr_priv, RMSGI_LINGER_MS);
	else if (!c->tr)
		rmsgi_conn_ev_down(c);
	return 0;
}

void rmsgi_conn_op_done(struct rmsg_conn *c, struct rmsgi_op *op, int status)
{
	if (op == &c->credit_op) {
		c->credit_op_busy = false;
		if (status == 0 && credit_due(c))
			rmsgi_ctx_mark_dirty(c->ctx, c);
		return;
	}
	if (status == -ECANCELED && c->close_reason)
		status = c->close_reason;
	op->posted = 0;
	if (op->rndv) {
		if (op->acked) {
			op_finish(c, op, status ? status : op->status);
		} else if (status) {
			rmsgi_list_del(&op->rlink);
			rndv_settle(c, op, status);
		}
		return; /* else the peer's RNDV_ACK finishes it */
	}
	op_finish(c, op, status);
}

void rmsgi_conn_tr_room(struct rmsg_conn *c)
{
	/* also for an export refused for want of room (rmsg_mr_export):
	 * nothing is queued, but its on_writable is due */
	if (!rmsgi_list_empty(&c->sendq) || c->want_writable)
		rmsgi_ctx_mark_dirty(c->ctx, c);
}

/* inline for conn.c's own per-message use (msg_after_cb) */
static inline __attribute__((always_inline)) void
conn_credit_freed(struct rmsg_conn *c)
{
	rmsgi_credit_freed(&c->cr);
	if (c->state == RMSGI_CS_ESTABLISHED && credit_due(c))
		rmsgi_ctx_mark_dirty(c->ctx, c);
}

void rmsgi_conn_credit_freed(struct rmsg_conn *c)
{
	conn_credit_freed(c);
}

void rmsgi_conn_heard(struct rmsg_conn *c)
{
	c->last_rx = ev_now(c->ctx->loop);
}

void rmsgi_conn_rx_progress(struct rmsg_conn *c, size_t got)
{
	if (got < c->ka_mark)
		c->ka_mark = 0; /* a new frame */
	if (got - c->ka_mark < RMSGI_KA_PROGRESS)
		return;
	c->ka_mark = got;
	c->last_rx = ev_now(c->ctx->loop);
}

bool rmsgi_conn_is_established(const struct rmsg_conn *c)
{
	return c->state == RMSGI_CS_ESTABLISHED;
}

void rmsgi_conn_send_credit(struct rmsg_conn *c, uint32_t aux)
{
	if (c->credit_op_busy || c->state != RMSGI_CS_ESTABLISHED)
		return; /* a frame is on its way: that tells the peer */
	c->credit_op_busy = true;
	c->credit_op.aux = aux;
	rmsgi_list_add_head(&c->sendq, &c->credit_op.link);
	rmsgi_ctx_mark_dirty(c->ctx, c);
}

void rmsgi_conn_ka_begin(struct rmsg_conn *c, ev_tstamp now)
{
	c->last_rx = c->last_tx = now;
}

void rmsgi_conn_ka_stalled(struct rmsg_conn *c, ev_tstamp now)
{
	c->last_rx = now;
	c->rndv_mark = now;
}

const struct rmsgi_op *rmsgi_conn_oldest_wait(const struct rmsg_conn *c,
					      ev_tstamp *since)
{
	if (rmsgi_list_empty(&c->rndvq))
		return NULL;
	*since = c->rndv_mark;
	return rmsgi_list_entry(c->rndvq.next, struct rmsgi_op, rlink);
}

ev_tstamp rmsgi_conn_rx_idle(struct rmsg_conn *c, ev_tstamp now)
{
	/* a peer that keeps us from returning credits (it returns none of
	 * ours) is silent by its own doing: that counts */
	if (rmsgi_credit_peer_held(&c->cr))
		c->last_rx = now;
	return now - c->last_rx;
}

ev_tstamp rmsgi_conn_tx_idle(const struct rmsg_conn *c, ev_tstamp now)
{
	return now - c->last_tx;
}

/* after on_msg: frees the message unless the app holds it; a lent one
 * goes back to its transport when rmsgi_conn_rx() returns */
static inline void msg_after_cb(struct rmsg_conn *c, struct rmsg_msg *m)
{
	if (m->held)
		return;
	if (m->lent) {
		m->lent = 0;
		conn_credit_freed(c);
		return;
	}
	m->free_fn(m);
}

/* hands a message to on_msg, then frees it unless the app holds it */
static inline void call_on_msg(struct rmsg_conn *c, struct rmsg_msg *m)
{
	m->in_cb = 1;
	c->ctx->in_cb++;
	c->ops.on_msg(c, m, c->arg);
	c->ctx->in_cb--;
	m->in_cb = 0;
	msg_after_cb(c, m);
}

/* delivers received messages in order, stopping at an unfinished one */
static void deliver_rx(struct rmsg_conn *c)
{
	struct rmsgi_list *n;

	while ((n = c->rxq.next) != &c->rxq) {
		struct rmsg_msg *m = rmsgi_list_entry(n, struct rmsg_msg, link);

		if (!m->ready)
			break;
		rmsgi_list_del(&m->link);
		if (m->type == RMSGI_T_IMM) {
			/* a write-with-immediate landed: in order with the
			 * messages around it */
			if (c->state == RMSGI_CS_ESTABLISHED && c->ops.on_imm) {
				c->ctx->in_cb++;
				c->ops.on_imm(c, m->aux, m->len, c->arg);
				c->ctx->in_cb--;
			}
			m->free_fn(m);
			continue;
		}
		if (m->aux && c->state == RMSGI_CS_ESTABLISHED) {
			/* RPC requests and replies go to rpc.c */
			int ret = rmsgi_rpc_rx(c, m);

			msg_after_cb(c, m);
			if (ret) {
				rmsgi_conn_abort(c, ret);
				return;
			}
			continue;
		}
		if (c->state != RMSGI_CS_ESTABLISHED || !c->ops.on_msg) {
			m->free_fn(m);
			continue;
		}
		call_on_msg(c, m);
	}
}

static struct rmsgi_op *rndv_find(struct rmsg_conn *c, uint64_t id)
{
	struct rmsgi_list *n;

	for (n = c->rndvq.next; n != &c->rndvq; n = n->next) {
		struct rmsgi_op *op =
			rmsgi_list_entry(n, struct rmsgi_op, rlink);

		if (op->id == id)
			return op;
	}
	return NULL;
}

static int send_ctrl(struct rmsg_conn *c, uint8_t type, uint32_t aux,
		     uint64_t id);

/* queues a message-like object for in-order delivery */
static void rx_enqueue(struct rmsg_conn *c, struct rmsg_msg *m)
{
	rmsgi_conn_get(c);
	rmsgi_list_add_tail(&c->rxq, &m->link);
	deliver_rx(c);
	rmsgi_conn_put(c);
}

/*
 * TCP: a refused one-sided access of the peer. Logged at most once a
 * second per connection (a hostile peer could otherwise fill the log),
 * and after RMSGI_REFUSALS_MAX the connection ends: tokens are 64 random
 * bits, but nothing is gained by letting a peer keep guessing. Returns
 * true when the connection was aborted.
 */
static bool refused(struct rmsg_conn *c, const char *what, uint64_t len,
		    uint64_t off, uint64_t token, int st)
{
	ev_tstamp now = ev_now(c->ctx->loop);

	c->refusals++;
	if (now - c->refusal_logged >= 1.0 || c->refusals == 1) {
		rmsgi_warn(c->ctx,
			   "conn %u: refused the peer's %s of %llu bytes at "
			   "offset %llu of export %016llx: %s (refusal %u of "
			   "%u; %u more not logged)",
			   c->id, what, (unsigned long long)len,
			   (unsigned long long)off, (unsigned long long)token,
			   rmsg_strerror(st), c->refusals, RMSGI_REFUSALS_MAX,
			   c->refusals_unlogged);
		c->refusal_logged = now;
		c->refusals_unlogged = 0;
	} else {
		c->refusals_unlogged++;
	}
	if (c->refusals < RMSGI_REFUSALS_MAX)
		return false;
	rmsgi_warn(c->ctx,
		   "conn %u: %u refused one-sided accesses: closing the "
		   "connection",
		   c->id, c->refusals);
	rmsgi_conn_abort(c, -EACCES);
	return true;
}

/* TCP: a peer's WRITE or WRITE_IMM; checked against what was exported
 * to this connection, never touching memory outside it, then
 * acknowledged with the status */
static int rma_rx_write(struct rmsg_conn *c, const struct rmsgi_hdr *h,
			struct rmsg_msg *m)
{
	struct rmsgi_rma r;
	uint64_t dlen;
	uint8_t *dst = NULL;
	int st;

	if (c->state != RMSGI_CS_ESTABLISHED) {
		/* closing: nothing is answered (the peer learns the close) */
		m->free_fn(m);
		return 0;
	}
	if (rmsgi_rma_decode(m->data, m->len, 0, &r)) {
		m->free_fn(m);
		rmsgi_conn_abort(c, -EPROTO);
		return -EPROTO;
	}
	dlen = m->len - RMSGI_RMA_SIZE;
	st = rmsgi_mr_target(c, r.token, r.off, dlen, RMSG_ACCESS_REMOTE_WRITE,
			     &dst, NULL);
	if (st && refused(c, "write", dlen, r.off, r.token, st)) {
		m->free_fn(m);
		return -EACCES;
	}
	if (!st && dlen)
		memcpy(dst, m->data + RMSGI_RMA_SIZE, dlen);
	if (send_ctrl(c, RMSGI_T_RNDV_ACK, (uint32_t)-st, h->id)) {
		m->free_fn(m);
		rmsgi_conn_abort(c, -ENOMEM);
		return -ENOMEM;
	}
	if (st || h->type == RMSGI_T_WRITE) {
		m->free_fn(m);
		return 0;
	}
	m->type = RMSGI_T_IMM;
	m->aux = h->aux;
	m->id = 0;
	m->len = dlen;
	rx_enqueue(c, m);
	return 0;
}

static void resp_done(struct rmsg_conn *c, int status, void *arg)
{
	(void)status;
	rmsgi_mr_unbusy(c->ctx, arg);
}

/* TCP: a peer's READ_REQ; answered straight from the region, which stays
 * busy (rmsg_mr_dereg says -EBUSY) until the answer is written: what the
 * peer can make us hold is an op per answer, not a copy of the bytes */
static int rma_rx_read(struct rmsg_conn *c, const struct rmsgi_hdr *h,
		       struct rmsg_msg *m)
{
	struct rmsgi_rma r;
	struct rmsgi_op *op;
	struct rmsg_mr *mr = NULL;
	uint8_t *src = NULL;
	int st;

	st = rmsgi_rma_decode(m->data, m->len, 1, &r);
	m->free_fn(m);
	if (st) {
		rmsgi_conn_abort(c, -EPROTO);
		return -EPROTO;
	}
	if (c->state != RMSGI_CS_ESTABLISHED)
		return 0; /* closing: nothing is answered */
	if (r.len > c->cfg.max_msg_size)
		st = -EMSGSIZE;
	else
		st = rmsgi_mr_target(c, r.token, r.off, r.len,
				     RMSG_ACCESS_REMOTE_READ, &src, &mr);
	if (st && st != -EMSGSIZE &&
	    refused(c, "read", r.len, r.off, r.token, st))
		return -EACCES;
	op = rmsgi_op_get(c->ctx);
	if (!op) {
		if (mr)
			rmsgi_mr_unbusy(c->ctx, mr);
		rmsgi_conn_abort(c, -ENOMEM);
		return -ENOMEM;
	}
	op->kind = RMSGI_OP_RESP;
	op->type = RMSGI_T_READ_RESP;
	op->aux = (uint32_t)-st;
	op->id = h->id;
	op->len = st ? 0 : r.len;
	op->iov[0].iov_base = src;
	op->iov[0].iov_len = op->len;
	op->iovcnt = op->len ? 1 : 0;
	if (!st) {
		op->cb = resp_done;
		op->arg = mr;
	}
	op_answer(c, op);
	rmsgi_list_add_tail(&c->sendq, &op->link);
	rmsgi_ctx_mark_dirty(c->ctx, c);
	return 0;
}

/* TCP: the answer to one of our reads: the bytes go into its iovec */
static int rma_rx_read_resp(struct rmsg_conn *c, const struct rmsgi_hdr *h,
			    struct rmsg_msg *m)
{
	struct rmsgi_op *op = rndv_find(c, h->id);
	const uint8_t *p = m->data;
	int i;

	if (!op || op->kind != RMSGI_OP_READ ||
	    (!h->aux && h->len != op->len)) {
		m->free_fn(m);
		rmsgi_conn_abort(c, -EPROTO);
		return -EPROTO;
	}
	for (i = 0; !h->aux && i < op->iovcnt; i++) {
		memcpy(op->iov[i].iov_base, p, op->iov[i].iov_len);
		p += op->iov[i].iov_len;
	}
	m->free_fn(m);
	rmsgi_list_del(&op->rlink);
	rndv_settle(c, op, -(int)h->aux);
	return 0;
}

/* every frame but an in-order plain message (rmsgi_conn_rx) */
static int rx_other(struct rmsg_conn *c, const struct rmsgi_hdr *h,
		    struct rmsg_msg *m)
{
	struct rmsgi_op *op;

	switch (h->type) {
	case RMSGI_T_DATA:
	case RMSGI_T_RNDV_REQ:
		m->type = h->type;
		m->aux = h->aux;
		m->id = h->id;
		rx_enqueue(c, m);
		return 0;
	case RMSGI_T_CREDIT:
		m->free_fn(m);
		if (h->aux == RMSGI_CREDIT_PROBE)
			rmsgi_keepalive_answer(c);
		else if (h->aux == RMSGI_CREDIT_BYE)
			c->peer_bye = true; /* its end follows */
		return 0;
	case RMSGI_T_IMM:
		/* RDMA: a write-with-immediate landed (native, or the end of
		 * a split one); id is its length */
		m->type = RMSGI_T_IMM;
		m->aux = h->aux;
		m->len = (size_t)h->id;
		m->id = 0;
		rx_enqueue(c, m);
		return 0;
	case RMSGI_T_WRITE:
	case RMSGI_T_WRITE_IMM:
		return rma_rx_write(c, h, m);
	case RMSGI_T_READ_REQ:
		return rma_rx_read(c, h, m);
	case RMSGI_T_READ_RESP:
		return rma_rx_read_resp(c, h, m);
	case RMSGI_T_RNDV_ACK:
		m->free_fn(m);
		op = rndv_find(c, h->id);
		if (!op || op->kind == RMSGI_OP_READ) {
			rmsgi_conn_abort(c, -EPROTO);
			return -EPROTO;
		}
		if (h->aux > 4095) {
			rmsgi_conn_abort(c, -EPROTO);
			return -EPROTO;
		}
		rmsgi_list_del(&op->rlink);
		rndv_settle(c, op, -(int)h->aux);
		return 0;
	default:
		m->free_fn(m);
		rmsgi_conn_abort(c, -EPROTO);
		return -EPROTO;
	}
}

/* a peer's BYE may come one frame beyond its credits (send_bye), once:
 * it is its last frame, and any frame after it is beyond them again */
static bool bye_beyond_grant(const struct rmsg_conn *c,
			     const struct rmsgi_hdr *h)
{
	return rmsgi_credit_bye_beyond(&c->cr) && !c->peer_bye &&
	       h->type == RMSGI_T_CREDIT && h->aux == RMSGI_CREDIT_BYE;
}

int rmsgi_conn_rx(struct rmsg_conn *c, const struct rmsgi_hdr *h,
		  struct rmsg_msg *m)
{
	int ret;

	/* any frame shows the peer alive and used one of its credits; one
	 * beyond them (held messages count until released) is refused */
	c->last_rx = ev_now(c->ctx->loop);
	if (RMSGI_UNLIKELY(rmsgi_credit_arrived(&c->cr)) &&
	    !bye_beyond_grant(c, h)) {
		m->free_fn(m);
		rmsgi_warn(c->ctx,
			   "conn %u: the peer sent a frame beyond the %u "
			   "credits it was granted",
			   c->id, c->cfg.credits);
		rmsgi_conn_abort(c, -EPROTO);
		return -EPROTO;
	}
	if (h->credits) {
		ret = rmsgi_credit_returned(&c->cr, h->credits,
					    c->peer_credits);
		if (RMSGI_UNLIKELY(ret)) {
			m->free_fn(m);
			rmsgi_conn_abort(c, ret);
			return ret;
		}
		if (!rmsgi_list_empty(&c->sendq))
			rmsgi_ctx_mark_dirty(c->ctx, c);
	}
	if (RMSGI_UNLIKELY(h->type != RMSGI_T_DATA || h->aux || !m->ready ||
			   !rmsgi_list_empty(&c->rxq) ||
			   c->state != RMSGI_CS_ESTABLISHED || !c->ops.on_msg))
		return rx_other(c, h, m);
	/* in order with nothing ahead: what deliver_rx() would do, without
	 * the queue */
	m->type = RMSGI_T_DATA;
	m->aux = 0;
	m->id = h->id;
	rmsgi_conn_get(c);
	call_on_msg(c, m);
	rmsgi_conn_put(c);
	return 0;
}

/* queues a header-only control frame */
static int send_ctrl(struct rmsg_conn *c, uint8_t type, uint32_t aux,
		     uint64_t id)
{
	struct rmsgi_op *op = rmsgi_op_get(c->ctx);

	if (!op)
		return -ENOMEM;
	op->kind = RMSGI_OP_CTRL;
	op->type = type;
	op->aux = aux;
	op->id = id;
	op_answer(c, op);
	rmsgi_list_add_tail(&c->sendq, &op->link);
	rmsgi_ctx_mark_dirty(c->ctx, c);
	return 0;
}

static void post_queued(struct rmsg_conn *c);

void rmsgi_conn_rx_ready(struct rmsg_conn *c, struct rmsg_msg *m, int status)
{
	m->ready = 1;
	if (c->state >= RMSGI_CS_CLOSING) {
		rmsgi_list_del(&m->link);
		m->free_fn(m);
		return;
	}
	if (send_ctrl(c, RMSGI_T_RNDV_ACK, status ? (uint32_t)-status : 0,
		      m->id) == 0) {
		/* the ACK goes out before on_msg can close the connection */
		post_queued(c);
	} else {
		rmsgi_list_del(&m->link);
		m->free_fn(m);
		rmsgi_conn_abort(c, -ENOMEM);
		return;
	}
	if (status == -ENOMEM) {
		/* no memory for the payload: the ACK fails the peer's send
		 * with -ENOMEM, and the messages behind it go on */
		rmsgi_warn(c->ctx,
			   "conn %u: no memory for an incoming message of "
			   "%zu bytes: refused, the sender's send fails with "
			   "-ENOMEM (see rmsg_cfg_set_reg_limit())",
			   c->id, m->len);
		rmsgi_list_del(&m->link);
		m->free_fn(m);
	} else if (status) {
		rmsgi_list_del(&m->link);
		m->free_fn(m);
		rmsgi_conn_abort(c, status);
		return;
	}
	rmsgi_conn_get(c);
	deliver_rx(c);
	rmsgi_conn_put(c);
}

static void finalize(struct rmsg_conn *c)
{
	set_state(c, RMSGI_CS_CLOSED);
	rmsgi_list_del(&c->link);
	rmsgi_keepalive_stop(c);
	/* what was exported to this connection ends with it */
	rmsgi_mr_conn_gone(c);
	/* calls still waiting end before on_close, which is last */
	rmsgi_rpc_conn_closed(c,
			      c->close_reason ? c->close_reason : -ECANCELED);
	/* a client always learns how its connect ended; on the accepting
	 * side, so does an app that accepted (it may hold state for it) */
	if (c->ops.on_close &&
	    (c->was_established || !c->is_server || c->app_accepted)) {
		c->ctx->in_cb++;
		c->ops.on_close(c, c->close_reason, c->arg);
		c->ctx->in_cb--;
	}
	ev_unref(c->ctx->loop);
	rmsgi_conn_put(c);
}

/* hands queued frames to the transport as far as credits and room go */
static void post_queued(struct rmsg_conn *c)
{
	struct rmsgi_list *n;
	bool posted = false;
	int ret;

	/* a CREDIT frame only when nothing else can carry the credits */
	if (!c->credit_op_busy && credit_due(c) &&
	    (rmsgi_list_empty(&c->sendq) ||
	     !rmsgi_credit_can_send(&c->cr, true))) {
		c->credit_op_busy = true;
		c->credit_op.aux = 0;
		rmsgi_list_add_head(&c->sendq, &c->credit_op.link);
	}
	while (c->state == RMSGI_CS_ESTABLISHED &&
	       (n = c->sendq.next) != &c->sendq) {
		struct rmsgi_op *op =
			rmsgi_list_entry(n, struct rmsgi_op, link);
		bool rma =
			op->kind == RMSGI_OP_WRITE || op->kind == RMSGI_OP_READ;
		bool native = rma && (c->tr->caps & RMSGI_TR_CAP_RMA);
		/* native write and read land in no receive buffer */
		bool credit = !native || op->type == RMSGI_T_WRITE_IMM;

		/* only the CREDIT frame may take the last credit */
		if (credit &&
		    !rmsgi_credit_can_send(&c->cr, op != &c->credit_op))
			break;
		if (rma && !native && !op->rndv) {
			/* emulated: completes on the peer's answer */
			op->rndv = 1;
			op->id = ++c->next_rndv_id;
		}
		if (op->kind == RMSGI_OP_SEND && op->len > c->peer_eager &&
		    (c->tr->caps & RMSGI_TR_CAP_RNDV) && !op->rndv) {
			op->rndv = 1;
			op->type = RMSGI_T_RNDV_REQ;
			op->id = ++c->next_rndv_id;
		}
		if (!native) {
			op->credits = credit_take(c);
		} else {
			/* no header to piggyback returned credits on */
			op->credits = 0;
			if (credit)
				rmsgi_credit_spend(&c->cr);
		}
		c->last_tx = ev_now(c->ctx->loop);
		rmsgi_list_del(&op->link);
		op->posted = 1;
		ret = c->tops->post(c->tr_priv, op);
		if (ret == 0)
			posted = true;
		if (ret == 0 && op->rndv) {
			if (rmsgi_list_empty(&c->rndvq))
				c->rndv_mark = ev_now(c->ctx->loop);
			rmsgi_list_add_tail(&c->rndvq, &op->rlink);
		}
		if (ret == -EAGAIN) {
			if (credit)
				rmsgi_credit_untake(&c->cr, op->credits, true);
			op->posted = 0;
			rmsgi_list_add_head(&c->sendq, &op->link);
			break;
		}
		if (ret && op != &c->credit_op &&
		    (ret == -ENOMEM ||
		     (native && (ret == -EINVAL || ret == -EACCES)))) {
			/* an op the backend refused, e.g. no registered
			 * memory left for its copy or its rendezvous: only
			 * it fails, the connection stays up */
			if (credit)
				rmsgi_credit_untake(&c->cr, op->credits, true);
			op->posted = 0;
			op->rndv = 0;
			op_finish(c, op, ret);
			continue;
		}
		if (ret) {
			if (credit)
				rmsgi_credit_untake(&c->cr, op->credits, false);
			op->posted = 0;
			op->rndv = 0;
			if (op == &c->credit_op)
				c->credit_op_busy = false;
			else
				op_finish(c, op, ret);
			/* what was accepted before the failure still goes */
			if (posted && c->tops->kick)
				c->tops->kick(c->tr_priv);
			rmsgi_conn_abort(c, ret);
			return;
		}
	}
	if (posted && c->tops->kick)
		c->tops->kick(c->tr_priv);
}

void rmsgi_conn_flush(struct rmsg_conn *c)
{
	struct rmsgi_list *n;

	if (c->state == RMSGI_CS_ESTABLISHED)
		post_queued(c);
	while ((n = rmsgi_list_pop(&c->doneq))) {
		struct rmsgi_op *op =
			rmsgi_list_entry(n, struct rmsgi_op, link);
		rmsg_done_cb cb = op->cb;
		void *arg = op->arg;
		int status = op->status;

		op_recycle(c, op);
		if (cb) {
			c->ctx->in_cb++;
			cb(c, status, arg);
			c->ctx->in_cb--;
		}
	}
	if (c->want_writable && c->state == RMSGI_CS_ESTABLISHED &&
	    c->sendq_len <= c->cfg.send_queue / 2) {
		c->want_writable = false;
		if (c->ops.on_writable) {
			c->ctx->in_cb++;
			c->ops.on_writable(c, c->arg);
			c->ctx->in_cb--;
		}
	}
	if (c->state == RMSGI_CS_CLOSING && c->tr_down &&
	    rmsgi_list_empty(&c->doneq) && rmsgi_list_empty(&c->sendq))
		finalize(c);
}

/*
 * May a send be written inside the API call? Over TCP that writes it at
 * once, saving a loop iteration's worth of deferral for the common case
 * of one reply per event. Only the first send of a loop iteration
 * (last_tx is the loop time of the last post) on an idle queue, outside
 * the context flush, with a credit to spare and no rendezvous
 * (direct_lim): later ones batch as before. Its callback is still only
 * queued (op_finish), so none runs inside the call.
 */
static inline bool send_now(const struct rmsg_conn *c, int iovcnt, size_t len,
			    ev_tstamp *now_p)
{
	return len < c->direct_lim && iovcnt <= RMSGI_OP_IOV_INLINE &&
	       rmsgi_list_empty(&c->sendq) && !c->ctx->flushing &&
	       rmsgi_credit_can_send(&c->cr, true) &&
	       c->last_tx != (*now_p = ev_now(c->ctx->loop));
}

/* an op carrying a copy of the caller's iovec array (not of the data) */
static struct rmsgi_op *op_with_iov(struct rmsg_conn *c,
				    const struct iovec *iov, int iovcnt)
{
	struct rmsgi_op *op = rmsgi_op_get(c->ctx);

	if (!op)
		return NULL;
	if (iovcnt > RMSGI_OP_IOV_INLINE) {
		op->iov = malloc(sizeof(*iov) * (size_t)iovcnt);
		if (!op->iov) {
			op->iov = op->iov_inline;
			rmsgi_op_put(c->ctx, op);
			return NULL;
		}
	}
	if (iovcnt)
		memcpy(op->iov, iov, sizeof(*iov) * (size_t)iovcnt);
	op->iovcnt = iovcnt;
	return op;
}

/* the checks every queued operation starts with; writes the total */
static inline int check_iov(const struct rmsg_conn *c, const struct iovec *iov,
			    int iovcnt, size_t *len_p)
{
	size_t len = 0;
	int i;

	if (!c || iovcnt < 0 || iovcnt > RMSG_IOV_MAX || (iovcnt && !iov))
		return -EINVAL;
	if (c->state >= RMSGI_CS_CLOSING)
		return -ENOTCONN;
	if (iovcnt == 1) {
		/* the common case: one piece cannot overflow */
		len = iov[0].iov_len;
		if (len && !iov[0].iov_base)
			return -EINVAL;
		iovcnt = 0;
	}
	for (i = 0; i < iovcnt; i++) {
		if (iov[i].iov_len && !iov[i].iov_base)
			return -EINVAL;
		len += iov[i].iov_len;
		if (len < iov[i].iov_len)
			return -EMSGSIZE;
	}
	if (len > c->cfg.max_msg_size)
		return -EMSGSIZE;
	*len_p = len;
	return 0;
}

static void op_send_init(struct rmsg_conn *c, struct rmsgi_op *op, size_t len,
			 uint32_t aux, rmsg_done_cb cb, void *arg)
{
	if (aux == RMSGI_AUX_RPC_REP)
		op_answer(c, op);
	op->kind = RMSGI_OP_SEND;
	op->type = RMSGI_T_DATA;
	op->aux = aux;
	op->len = len;
	op->cb = cb;
	op->arg = arg;
}

/* the rest of a direct send (below) that did not simply go out whole:
 * @w is what the transport's send_direct() returned for @h */
static int send_direct_end(struct rmsg_conn *c, const struct iovec *iov,
			   int iovcnt, const struct rmsgi_hdr *h, ssize_t w,
			   struct rmsgi_op *op, rmsg_done_cb cb, void *arg,
			   ev_tstamp now)
{
	size_t len = (size_t)h->len;
	int ret;

	if (w == 0) {
		/* nothing written: the credit goes back */
		rmsgi_credit_untake(&c->cr, h->credits, true);
		if (op)
			rmsgi_op_put(c->ctx, op);
		return -EAGAIN;
	}
	c->last_tx = now;
	if (w < 0 || (size_t)w == RMSGI_HDR_SIZE + len) {
		/* written, or the connection failed: the callback is due */
		if (op) {
			op_send_init(c, op, len, h->aux, cb, arg);
			c->sendq_len++;
			op_finish(c, op, w < 0 ? (int)w : 0);
		}
		return 0;
	}
	/* the rest goes as a posted op, first in the transport's queue */
	if (!op) {
		op = rmsgi_op_get(c->ctx);
		if (!op) {
			rmsgi_conn_abort(c, -ENOMEM);
			return -ENOMEM;
		}
	}
	memcpy(op->iov, iov, sizeof(*iov) * (size_t)iovcnt);
	op->iovcnt = iovcnt;
	op_send_init(c, op, len, h->aux, cb, arg);
	op->credits = h->credits;
	op->tr_off = (size_t)w;
	op->posted = 1;
	c->sendq_len++;
	ret = c->tops->post(c->tr_priv, op);
	if (ret) {
		op->posted = 0;
		op_finish(c, op, ret);
		rmsgi_conn_abort(c, ret);
		return 0;
	}
	if (c->tops->kick)
		c->tops->kick(c->tr_priv);
	return 0;
}

/*
 * The direct send: the frame goes to the transport without the send
 * queue, and without an op unless something must outlive the call: the
 * callback (taken first, so a written frame can always report), or the
 * rest of a partly written frame. Returns 0 (sent, or its callback will
 * tell the connection's failure), -EAGAIN (nothing written: queue it as
 * usual) or -ENOMEM.
 */
static inline __attribute__((always_inline)) int
send_direct(struct rmsg_conn *c, const struct iovec *iov, int iovcnt,
	    size_t len, uint32_t aux, rmsg_done_cb cb, void *arg, ev_tstamp now)
{
	struct rmsgi_op *op = NULL;
	struct rmsgi_hdr h;
	ssize_t w;

	if (cb) {
		op = rmsgi_op_get(c->ctx);
		if (!op)
			return -ENOMEM;
	}
	h.type = RMSGI_T_DATA;
	h.flags = 0;
	h.aux = aux;
	h.len = len;
	h.id = 0;
	h.credits = credit_take(c);
	w = c->tops->send_direct(c->tr_priv, &h, iov, iovcnt);
	if (RMSGI_LIKELY(!op && w == (ssize_t)(RMSGI_HDR_SIZE + len))) {
		c->last_tx = now;
		return 0;
	}
	return send_direct_end(c, iov, iovcnt, &h, w, op, cb, arg, now);
}

/* rmsg_send and rmsgi_conn_send, inline in both (aux and the bound are
 * constants in rmsg_send) */
static inline __attribute__((always_inline)) int
conn_send(struct rmsg_conn *c, const struct iovec *iov, int iovcnt,
	  uint32_t aux, bool unbounded, rmsg_done_cb cb, void *arg)
{
	struct rmsgi_op *op;
	ev_tstamp now = 0;
	size_t len;
	int ret;

	ret = check_iov(c, iov, iovcnt, &len);
	if (ret)
		return ret;
	if (c->sendq_len >= c->cfg.send_queue && !unbounded) {
		c->want_writable = true;
		return -EAGAIN;
	}
	if (send_now(c, iovcnt, len, &now)) {
		ret = send_direct(c, iov, iovcnt, len, aux, cb, arg, now);
		if (ret != -EAGAIN)
			return ret;
	}
	op = op_with_iov(c, iov, iovcnt);
	if (!op)
		return -ENOMEM;
	op_send_init(c, op, len, aux, cb, arg);
	c->sendq_len++;
	rmsgi_list_add_tail(&c->sendq, &op->link);
	rmsgi_ctx_mark_dirty(c->ctx, c);
	return 0;
}

int rmsgi_conn_send(struct rmsg_conn *c, const struct iovec *iov, int iovcnt,
		    uint32_t aux, bool unbounded, rmsg_done_cb cb, void *arg)
{
	return conn_send(c, iov, iovcnt, aux, unbounded, cb, arg);
}

int rmsg_send(struct rmsg_conn *c, const struct iovec *iov, int iovcnt,
	      rmsg_done_cb cb, void *arg)
{
	return conn_send(c, iov, iovcnt, 0, false, cb, arg);
}

const char *rmsgi_fallback_text(int reason)
{
	switch (reason) {
	case -ENODEV:
	case -ENOENT:
	case -ENXIO:
		return "no RDMA device";
	case -EADDRNOTAVAIL:
		return "no RDMA device serves this address";
	case -EHOSTUNREACH:
	case -ENETUNREACH:
		return "route to host not resolved over RDMA";
	case -ECONNREFUSED:
		return "peer has no RDMA listener";
	case -ETIMEDOUT:
		return "RDMA connection setup timed out";
	default:
		return "RDMA connection setup failed";
	}
}

const char *rmsg_conn_fallback_reason(const struct rmsg_conn *c)
{
	if (!c || !c->fallback_reason || c->auto_fallback)
		return NULL;
	return rmsgi_fallback_text(c->fallback_reason);
}

const char *rmsg_conn_transport(const struct rmsg_conn *c)
{
	if (!c || !c->tr)
		return "none";
	return c->tr->name;
}

struct rmsg_ctx *rmsg_conn_ctx(const struct rmsg_conn *c)
{
	return c ? c->ctx : NULL;
}

int rmsg_conn_set_arg(struct rmsg_conn *c, void *arg)
{
	if (!c)
		return -EINVAL;
	c->arg = arg;
	return 0;
}

int rmsg_conn_set_private_data(struct rmsg_conn *c, const void *data,
			       size_t len)
{
	if (!c || len > RMSG_PRIVATE_DATA_MAX || (len && !data))
		return -EINVAL;
	if (!c->in_accept)
		return -EALREADY;
	if (len)
		memcpy(c->my_pdata, data, len);
	c->my_pdata_len = (uint8_t)len;
	return 0;
}

int rmsg_conn_peer_data(const struct rmsg_conn *c, const void **data_p,
			size_t *len_p)
{
	if (!c || !data_p || !len_p)
		return -EINVAL;
	*data_p = c->peer_pdata;
	*len_p = c->peer_pdata_len;
	return 0;
}

/* queues a one-sided op after the checks the descriptor allows */
static int rma_queue(struct rmsg_conn *c, uint8_t kind, uint8_t type,
		     const struct iovec *iov, int iovcnt, const void *desc,
		     uint64_t off, uint32_t imm, rmsg_done_cb cb, void *arg)
{
	struct rmsgi_desc d;
	struct rmsgi_op *op;
	size_t len;
	int ret;

	if (!desc)
		return -EINVAL;
	ret = check_iov(c, iov, iovcnt, &len);
	if (ret)
		return ret;
	ret = rmsgi_desc_decode(desc, &d);
	if (ret)
		return ret;
	ret = rmsgi_desc_check(&d, off, len,
			       kind == RMSGI_OP_READ
				       ? RMSG_ACCESS_REMOTE_READ
				       : RMSG_ACCESS_REMOTE_WRITE);
	if (ret)
		return ret;
	if (c->sendq_len >= c->cfg.send_queue) {
		c->want_writable = true;
		return -EAGAIN;
	}
	op = op_with_iov(c, iov, iovcnt);
	if (!op)
		return -ENOMEM;
	op->kind = kind;
	op->type = type;
	op->aux = imm;
	op->len = len;
	op->rma.addr = d.addr + off;
	op->rma.off = off;
	op->rma.rkey = d.rkey;
	op->rma.token = d.token;
	op->rma.has_rkey = d.flags & RMSGI_DESC_F_RKEY;
	op->cb = cb;
	op->arg = arg;
	c->sendq_len++;
	rmsgi_list_add_tail(&c->sendq, &op->link);
	rmsgi_ctx_mark_dirty(c->ctx, c);
	return 0;
}

int rmsg_write_imm(struct rmsg_conn *c, const struct iovec *iov, int iovcnt,
		   const void *remote_desc, uint64_t remote_off, uint32_t imm,
		   rmsg_done_cb cb, void *arg)
{
	return rma_queue(c, RMSGI_OP_WRITE, RMSGI_T_WRITE_IMM, iov, iovcnt,
			 remote_desc, remote_off, imm, cb, arg);
}

int rmsg_write(struct rmsg_conn *c, const struct iovec *iov, int iovcnt,
	       const void *remote_desc, uint64_t remote_off, rmsg_done_cb cb,
	       void *arg)
{
	return rma_queue(c, RMSGI_OP_WRITE, RMSGI_T_WRITE, iov, iovcnt,
			 remote_desc, remote_off, 0, cb, arg);
}

int rmsg_read(struct rmsg_conn *c, const struct iovec *iov, int iovcnt,
	      const void *remote_desc, uint64_t remote_off, rmsg_done_cb cb,
	      void *arg)
{
	return rma_queue(c, RMSGI_OP_READ, RMSGI_T_READ_REQ, iov, iovcnt,
			 remote_desc, remote_off, 0, cb, arg);
}

/* ------------------------------------------------------------------ */
/* what every backend shares: frame legality and headers                */

bool rmsgi_tr_frame_ok(unsigned caps, uint8_t type)
{
	switch (type) {
	case RMSGI_T_DATA:
	case RMSGI_T_CREDIT:
	case RMSGI_T_RNDV_ACK:
		return true;
	case RMSGI_T_RNDV_REQ:
		return caps & RMSGI_TR_CAP_RNDV;
	case RMSGI_T_IMM: /* the immediate of a native split write */
		return caps & RMSGI_TR_CAP_RMA;
	case RMSGI_T_WRITE:
	case RMSGI_T_WRITE_IMM:
	case RMSGI_T_READ_REQ:
	case RMSGI_T_READ_RESP:
		/* one-sided ops emulated in frames */
		return !(caps & RMSGI_TR_CAP_RMA);
	default: /* the handshake's, and unknown types */
		return false;
	}
}

void rmsgi_op_hdr(const struct rmsgi_op *op, struct rmsgi_hdr *h)
{
	h->type = op->type;
	h->flags = 0;
	h->credits = op->credits;
	h->aux = op->aux;
	h->len = op->len;
	h->id = op->id;
	if (op->kind == RMSGI_OP_WRITE || op->kind == RMSGI_OP_READ)
		/* emulated: the descriptor, and a write's bytes */
		h->len = op->kind == RMSGI_OP_READ ? RMSGI_READ_REQ_SIZE
						   : RMSGI_RMA_SIZE + op->len;
}
