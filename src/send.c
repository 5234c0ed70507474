// SPDX-License-Identifier: MIT
/*
 * send.c - a connection's send side: the op queue (messages, control
 * frames, one-sided ops, answers to the peer), the credits each frame
 * takes, posting to the backend, the direct send inside rmsg_send, and
 * how ops complete or are cancelled.
 */
#include <stdlib.h>

#include "conn_int.h"
#include "stats.h"

/*
 * How an op goes, decided here once (enum rmsgi_op_proto): a message
 * larger than the peer's eager size goes by rendezvous over a backend
 * that has it; one-sided ops are native over a backend with
 * RMSGI_TR_CAP_RMA, else frames the peer answers. Ops that wait for the
 * peer's answer get their rendezvous id here.
 */
/*
 * A one-sided op over a backend without RMSGI_TR_CAP_RMA is a frame (both
 * directions of the emulation live in the core: this half, and rma.c's
 * receive half): the descriptor of the peer's memory follows the header;
 * a write's bytes follow it, a read's iovec is where READ_RESP lands.
 */
static void op_emulate(struct rmsgi_op *op)
{
	struct rmsgi_rma r = {
		.off = op->rma.off, .token = op->rma.token, .len = op->len};
	int rd = op->kind == RMSGI_OP_READ;

	rmsgi_rma_encode(&r, rd, op->pre);
	op->pre_len = rd ? RMSGI_READ_REQ_SIZE : RMSGI_RMA_SIZE;
	op->iov_local = (uint8_t)rd;
}

static inline void op_proto(struct rmsg_conn *c, struct rmsgi_op *op,
			    bool direct)
{
	enum rmsgi_op_proto p;

	switch (op->kind) {
	case RMSGI_OP_SEND:
		if (direct)
			p = RMSGI_OP_P_DIRECT;
		else if (op->len > c->tx.peer_eager &&
			 (c->tr->caps & RMSGI_TR_CAP_RNDV))
			p = RMSGI_OP_P_RNDV;
		else
			p = RMSGI_OP_P_EAGER;
		break;
	case RMSGI_OP_WRITE:
	case RMSGI_OP_READ:
		p = c->tr->caps & RMSGI_TR_CAP_RMA ? RMSGI_OP_P_RMA
						   : RMSGI_OP_P_RMA_EMU;
		break;
	case RMSGI_OP_RESP:
		p = RMSGI_OP_P_EAGER;
		break;
	default:
		p = RMSGI_OP_P_CTRL;
		break;
	}
	op->proto = (uint8_t)p;
	if (p == RMSGI_OP_P_RMA_EMU)
		op_emulate(op);
	if (p == RMSGI_OP_P_RNDV)
		op->type = RMSGI_T_RNDV_REQ;
	if (p == RMSGI_OP_P_RNDV || p == RMSGI_OP_P_RMA_EMU) {
		/* completes on the peer's answer */
		op->rndv = 1;
		op->id = ++c->tx.next_rndv_id;
	}
}

void rmsgi_conn_op_proto(struct rmsg_conn *c, struct rmsgi_op *op, bool direct)
{
	op_proto(c, op, direct);
}

/* queues @op; its protocol is chosen now on an established connection,
 * else when it becomes established (rmsgi_conn_proto_queued) */
static inline void op_queue(struct rmsg_conn *c, struct rmsgi_op *op)
{
	if (c->state == RMSGI_CS_ESTABLISHED)
		op_proto(c, op, false);
	op_state(c, op, RMSGI_OS_QUEUED);
	rmsgi_list_add_tail(&c->tx.sendq, &op->link);
	rmsgi_ctx_mark_dirty(c->ctx, c);
}

void rmsgi_conn_op_queue(struct rmsg_conn *c, struct rmsgi_op *op)
{
	op_queue(c, op);
}

void rmsgi_conn_op_unproto(struct rmsgi_op *op)
{
	if (op->kind == RMSGI_OP_PACK)
		return; /* a PACK frame goes as one over any backend */
	if (op->kind == RMSGI_OP_SEND && op->type == RMSGI_T_RNDV_REQ)
		op->type = RMSGI_T_DATA;
	op->rndv = 0;
	op->pre_len = 0;
	op->iov_local = 0;
	op->proto = RMSGI_OP_P_NONE;
}

void rmsgi_conn_proto_queued(struct rmsg_conn *c)
{
	struct rmsgi_list *n;

	for (n = c->tx.sendq.next; n != &c->tx.sendq; n = n->next) {
		struct rmsgi_op *op =
			rmsgi_list_entry(n, struct rmsgi_op, link);

		if (op->proto == RMSGI_OP_P_NONE)
			op_proto(c, op, false);
	}
}

/* a finished op goes back to the context's free list; an answer that
 * leaves the bound lets withheld credits go */
static void op_recycle(struct rmsg_conn *c, struct rmsgi_op *op)
{
	if (op->kind == RMSGI_OP_SEND || op->kind == RMSGI_OP_WRITE ||
	    op->kind == RMSGI_OP_READ)
		c->tx.sendq_len--;
	if (op->answer)
		c->tx.ans_n--;
	rmsgi_op_put(c->ctx, op);
}

/* moves an op to the done queue; its callback runs at the next flush.
 * One without a callback is recycled at once: nothing would run. */
static void op_finish(struct rmsg_conn *c, struct rmsgi_op *op, int status)
{
	if (RMSGI_UNLIKELY(op->kind == RMSGI_OP_PACK)) {
		rmsgi_pack_finish(c, op, status);
		return;
	}
	/* a resumable connection's message waits for the peer's ack */
	if (RMSGI_UNLIKELY(op->seq) && rmsgi_session_hold(c, op, status))
		return;
	op_state(c, op, RMSGI_OS_DONE);
	if (!op->cb) {
		op_recycle(c, op);
		if (c->tx.want_writable)
			rmsgi_ctx_mark_dirty(c->ctx, c);
		return;
	}
	op->status = status;
	rmsgi_list_add_tail(&c->tx.doneq, &op->link);
	rmsgi_ctx_mark_dirty(c->ctx, c);
}

void rmsgi_conn_op_finish(struct rmsg_conn *c, struct rmsgi_op *op, int status)
{
	op_finish(c, op, status);
}

/* @op leaves rndvq. The keepalive bound on the oldest (keepalive.c)
 * starts again only when the oldest goes: an answer out of order moves
 * nothing, or a peer could answer every op but the first for ever */
void rmsgi_conn_rndv_unlink(struct rmsg_conn *c, struct rmsgi_op *op)
{
	if (c->tx.rndvq.next == &op->rlink)
		rmsgi_live_wait_moved(&c->live, ev_now(c->ctx->loop));
	rmsgi_list_del(&op->rlink);
}

/* a rendezvous send (or emulated one-sided op) leaves rndvq when
 * acknowledged or failed (rmsgi_conn_rndv_unlink first); it finishes
 * once the transport has also completed the request frame (ANSWERED
 * until then) */
void rmsgi_conn_rndv_settle(struct rmsg_conn *c, struct rmsgi_op *op,
			    int status)
{
	if (c->tr_priv)
		rmsgi_tr_rndv_release(c->tops, c->tr_priv, op);
	op->status = status;
	if (op->state == RMSGI_OS_POSTED)
		op_state(c, op, RMSGI_OS_ANSWERED);
	else
		op_finish(c, op, status);
}

/* fails everything not yet handed to the transport, and rendezvous sends
 * the peer will never acknowledge now */
void rmsgi_conn_cancel_sendq(struct rmsg_conn *c, int status)
{
	struct rmsgi_list *n;

	while ((n = rmsgi_list_pop(&c->tx.sendq))) {
		struct rmsgi_op *op =
			rmsgi_list_entry(n, struct rmsgi_op, link);

		if (op == &c->tx.credit_op) {
			op_state(c, op, RMSGI_OS_DONE);
			continue;
		}
		op_finish(c, op, status);
	}
}

void rmsgi_conn_cancel_answers(struct rmsg_conn *c, int status)
{
	struct rmsgi_list *n;

	while ((n = rmsgi_list_pop(&c->tx.rndvq))) {
		struct rmsgi_op *op =
			rmsgi_list_entry(n, struct rmsgi_op, rlink);

		rmsgi_conn_rndv_settle(c, op, status);
	}
}

void rmsgi_conn_cancel_rndv(struct rmsg_conn *c, int status)
{
	rmsgi_conn_cancel_answers(c, status);
	if (c->ss)
		rmsgi_session_cancel(c, status);
}

void rmsgi_conn_cancel_queued(struct rmsg_conn *c, int status)
{
	rmsgi_conn_cancel_sendq(c, status);
	rmsgi_conn_cancel_rndv(c, status);
}

void rmsgi_conn_op_done(struct rmsg_conn *c, struct rmsgi_op *op, int status)
{
	if (op == &c->tx.credit_op) {
		op_state(c, op, RMSGI_OS_DONE);
		if (status == 0 && credit_due(c))
			rmsgi_ctx_mark_dirty(c->ctx, c);
		return;
	}
	if (RMSGI_UNLIKELY(status) && op->proto == RMSGI_OP_P_RMA &&
	    (status == -EACCES || status == -EREMOTEIO))
		c->st.refused_ours++; /* the peer's device refused it */
	if (status == -ECANCELED && c->close_reason)
		status = c->close_reason;
	/* a one-sided op in flight when a resumable connection's transport
	 * broke: it may or may not have taken effect */
	if (RMSGI_UNLIKELY(status) && c->state == RMSGI_CS_SUSPENDED &&
	    op->kind != RMSGI_OP_SEND && op->kind != RMSGI_OP_PACK)
		status = -ECONNABORTED;
	if (op->rndv) {
		if (op->state == RMSGI_OS_ANSWERED) {
			op_finish(c, op, status ? status : op->status);
			return;
		}
		op_state(c, op, RMSGI_OS_AWAIT_PEER);
		if (status) {
			rmsgi_conn_rndv_unlink(c, op);
			rmsgi_conn_rndv_settle(c, op, status);
		}
		return; /* else the peer's answer finishes it */
	}
	op_finish(c, op, status);
}

void rmsgi_conn_tr_room(struct rmsg_conn *c)
{
	/* also for an export refused for want of room (rmsg_mr_export):
	 * nothing is queued, but its on_writable is due */
	if (!rmsgi_list_empty(&c->tx.sendq) || c->tx.want_writable)
		rmsgi_ctx_mark_dirty(c->ctx, c);
}

/* the bytes of the byte window a frame takes: its payload's; AUTH
 * frames take none (the receiver does not count them: rx.c) */
static inline uint64_t op_wlen(const struct rmsgi_op *op)
{
	return op->type == RMSGI_T_AUTH ? 0 : rmsgi_op_frame_len(op);
}

/* a frame the transport did not take: its credit and bytes come back
 * (rmsgi_credit_untake) */
static void post_untake(struct rmsg_conn *c, const struct rmsgi_op *op,
			bool native, bool sure)
{
	rmsgi_credit_untake(&c->cr, op->credits, sure);
	if (!native)
		rmsgi_credit_untake_bytes(&c->cr, op_wlen(op), op->wret, sure);
}

/* does the head of the queue wait for bytes of the peer's window? */
static bool head_waits_bytes(const struct rmsg_conn *c)
{
	const struct rmsgi_op *op =
		rmsgi_list_entry(c->tx.sendq.next, struct rmsgi_op, link);

	return op->proto != RMSGI_OP_P_RMA &&
	       !rmsgi_credit_can_bytes(&c->cr, op_wlen(op));
}

/* hands queued frames to the transport as far as credits and room go */
void rmsgi_conn_post_queued(struct rmsg_conn *c)
{
	struct rmsgi_list *n;
	bool posted = false;
	int ret;

	/* a CREDIT frame only when nothing else can carry the credits: the
	 * queue is empty, or its head waits for credits or for window bytes
	 * (two sides that stream at each other each wait for the other's
	 * returned bytes, which their queued frames would carry) */
	if (c->state == RMSGI_CS_ESTABLISHED && !credit_op_busy(c) &&
	    credit_due(c) &&
	    (rmsgi_list_empty(&c->tx.sendq) ||
	     !rmsgi_credit_can_send(&c->cr, true) || head_waits_bytes(c) ||
	     c->cr.give_want)) {
		rmsgi_conn_credit_first(c, 0);
	}
	while ((c->state == RMSGI_CS_ESTABLISHED ||
		c->state == RMSGI_CS_AUTH) &&
	       (n = c->tx.sendq.next) != &c->tx.sendq) {
		struct rmsgi_op *op =
			rmsgi_list_entry(n, struct rmsgi_op, link);
		bool native = op->proto == RMSGI_OP_P_RMA;
		/* native write and read land in no receive buffer */
		bool credit = !native || op->type == RMSGI_T_WRITE_IMM;

		/* authenticating: only the AUTH frame (queued first) goes */
		if (RMSGI_UNLIKELY(c->state == RMSGI_CS_AUTH) &&
		    op->type != RMSGI_T_AUTH)
			break;
		/* resumed over RDMA: the peer's windows are new (rekey.c);
		 * while this waits for them, credits and acks still go */
		if (native && RMSGI_UNLIKELY(c->rma.rk) &&
		    rmsgi_rekey_post(c, op)) {
			if (credit_op_busy(c) || !credit_due(c))
				break;
			rmsgi_conn_credit_first(c, 0);
			continue;
		}

		/* only the CREDIT frame may take the last credit; and a
		 * frame waits for the bytes it costs of the window */
		if (credit &&
		    (!rmsgi_credit_can_send(&c->cr, op != &c->tx.credit_op) ||
		     (!native &&
		      !rmsgi_credit_can_bytes(&c->cr, op_wlen(op))))) {
			if (op != &c->tx.credit_op)
				rmsgi_stats_stall(c);
			break;
		}
		/* more messages behind a small one: one frame for them */
		if (c->tx.peer_pack && n->next != &c->tx.sendq &&
		    rmsgi_pack_want(c, op)) {
			struct rmsgi_op *pk = rmsgi_pack_build(c, op);

			if (pk)
				op = pk;
		}
		if (!native) {
			/* the peer asked for some of its grant back */
			if (RMSGI_UNLIKELY(op == &c->tx.credit_op) &&
			    (c->cr.give_want || op->aux == RMSGI_CREDIT_GIVE))
				rmsgi_conn_credit_give(c, op);
			op->credits = credit_take(c);
			op->wret = rmsgi_credit_take_bytes(&c->cr, op_wlen(op));
			if (c->ss) {
				op->acks = rmsgi_session_ack_take(c);
				op->hflags = rmsgi_session_ackreq(c, op);
			}
		} else {
			/* no header to piggyback returned credits on */
			op->credits = 0;
			op->wret = 0;
			if (credit)
				rmsgi_credit_spend(&c->cr);
		}
		rmsgi_live_tx(&c->live, ev_now(c->ctx->loop));
		rmsgi_list_del(&op->link);
		op_state(c, op, RMSGI_OS_POSTED);
		ret = c->tops->post(c->tr_priv, op);
		if (ret == 0) {
			posted = true;
			if (RMSGI_UNLIKELY(op == &c->tx.credit_op) &&
			    op->aux == RMSGI_CREDIT_GIVE)
				rmsgi_conn_credit_gave(c, op);
			c->tx.posts += op != &c->tx.credit_op;
			rmsgi_stats_posted(c, op);
			if (c->ss)
				rmsgi_session_posted(c, op);
		} else if (op->acks) {
			c->ss->rx_told -= op->acks; /* not sent after all */
			c->ss->ack_now = true;
			op->acks = 0;
		}
		if (ret == 0 && op->rndv) {
			if (rmsgi_list_empty(&c->tx.rndvq))
				rmsgi_live_wait_moved(&c->live,
						      ev_now(c->ctx->loop));
			rmsgi_list_add_tail(&c->tx.rndvq, &op->rlink);
		}
		if (ret == -EAGAIN) {
			if (credit)
				post_untake(c, op, native, true);
			op_state(c, op, RMSGI_OS_QUEUED);
			rmsgi_list_add_head(&c->tx.sendq, &op->link);
			break;
		}
		if (ret && op != &c->tx.credit_op &&
		    (ret == -ENOMEM ||
		     (native && (ret == -EINVAL || ret == -EACCES)))) {
			/* an op the backend refused, e.g. no registered
			 * memory left for its copy or its rendezvous: only
			 * it fails, the connection stays up */
			if (credit)
				post_untake(c, op, native, true);
			op_finish(c, op, ret);
			continue;
		}
		if (ret) {
			if (credit)
				post_untake(c, op, native, false);
			if (op == &c->tx.credit_op)
				op_state(c, op, RMSGI_OS_DONE);
			else
				op_finish(c, op, ret);
			/* what was accepted before the failure still goes */
			if (posted)
				rmsgi_tr_kick(c->tops, c->tr_priv);
			rmsgi_conn_abort(c, ret);
			return;
		}
	}
	if (posted)
		rmsgi_tr_kick(c->tops, c->tr_priv);
}

void rmsgi_conn_flush(struct rmsg_conn *c)
{
	struct rmsgi_list *n;

	if (c->state == RMSGI_CS_ESTABLISHED || c->state == RMSGI_CS_AUTH)
		rmsgi_conn_post_queued(c);
	/* a burst ended: the next send may go direct even at this loop time
	 * (send_now) */
	c->tx.burst = true;
	while ((n = rmsgi_list_pop(&c->tx.doneq))) {
		struct rmsgi_op *op =
			rmsgi_list_entry(n, struct rmsgi_op, link);
		rmsg_done_cb cb = op->cb;
		void *arg = op->arg;
		int status = op->status;

		op_recycle(c, op);
		if (cb) {
			RMSGI_USER_CB(c->ctx, cb(c, status, arg));
		}
	}
	if (c->tx.want_writable && c->state == RMSGI_CS_ESTABLISHED &&
	    c->tx.sendq_len <= c->cfg.send_queue / 2) {
		c->tx.want_writable = false;
		if (c->ops.on_writable) {
			RMSGI_USER_CB(c->ctx, c->ops.on_writable(c, c->arg));
		}
	}
	if (c->state == RMSGI_CS_CLOSING && c->tr_down &&
	    rmsgi_list_empty(&c->tx.doneq) && rmsgi_list_empty(&c->tx.sendq))
		rmsgi_conn_finalize(c);
}

/*
 * May a send be written inside the API call? Over TCP that writes it at
 * once, saving a loop iteration's worth of deferral for the common case
 * of one reply per event. Only the first send of a burst on an idle
 * queue, outside the context flush, with a credit to spare and no
 * rendezvous (direct_lim); later ones batch. A burst ends with the loop
 * iteration (live.last_tx: the loop time of the last post) or when the
 * flush handled the connection (tx.burst, taken by the send it lets
 * through): the clock does not move between the rounds of completions
 * one wake-up polls (ctx.c). Its callback is only queued (op_finish).
 */
static inline bool send_now(struct rmsg_conn *c, int iovcnt, size_t len,
			    ev_tstamp *now_p)
{
	bool burst;

	if (!(len < c->tx.direct_lim && iovcnt <= RMSGI_OP_IOV_INLINE &&
	      rmsgi_list_empty(&c->tx.sendq) && !c->ctx->flushing &&
	      rmsgi_credit_can_send(&c->cr, true) &&
	      rmsgi_credit_can_bytes(&c->cr, len)))
		return false;
	/* either opens the burst: the flag too, or a later loop time would
	 * let a second send through at this one */
	burst = c->tx.burst |
		rmsgi_live_tx_before(&c->live, *now_p = ev_now(c->ctx->loop));
	c->tx.burst = false;
	return burst;
}

/* an op carrying a copy of the caller's iovec array (not of the data) */
struct rmsgi_op *rmsgi_conn_op_with_iov(struct rmsg_conn *c,
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
		rmsgi_credit_untake_bytes(&c->cr, len, h->bytes, true);
		if (op)
			rmsgi_op_put(c->ctx, op);
		return -EAGAIN;
	}
	rmsgi_live_tx(&c->live, now);
	if (w > 0)
		rmsgi_stats_direct(c, len);
	if (w < 0 || (size_t)w == RMSGI_HDR_SIZE + len) {
		/* written, or the connection failed: the callback is due */
		if (op) {
			op_send_init(c, op, len, h->aux, cb, arg);
			op_proto(c, op, true);
			c->tx.sendq_len++;
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
	op_proto(c, op, true);
	op->credits = h->credits;
	op->wret = h->bytes;
	op->tr_off = (size_t)w;
	op_state(c, op, RMSGI_OS_POSTED);
	c->tx.sendq_len++;
	ret = c->tops->post(c->tr_priv, op);
	if (ret) {
		op_finish(c, op, ret);
		rmsgi_conn_abort(c, ret);
		return 0;
	}
	rmsgi_tr_kick(c->tops, c->tr_priv);
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
	h.acks = 0; /* never on a resumable connection (direct_lim 0) */
	h.credits = credit_take(c);
	h.bytes = rmsgi_credit_take_bytes(&c->cr, len);
	w = c->tops->send_direct(c->tr_priv, &h, iov, iovcnt);
	if (RMSGI_LIKELY(!op && w == (ssize_t)(RMSGI_HDR_SIZE + len))) {
		rmsgi_live_tx(&c->live, now);
		rmsgi_stats_direct(c, len);
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
	if (c->tx.sendq_len >= c->cfg.send_queue && !unbounded) {
		c->tx.want_writable = true;
		c->st.sendq_full++;
		return -EAGAIN;
	}
	if (send_now(c, iovcnt, len, &now)) {
		ret = send_direct(c, iov, iovcnt, len, aux, cb, arg, now);
		if (ret != -EAGAIN)
			return ret;
	}
	op = rmsgi_conn_op_with_iov(c, iov, iovcnt);
	if (!op)
		return -ENOMEM;
	op_send_init(c, op, len, aux, cb, arg);
	c->tx.sendq_len++;
	op_queue(c, op);
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

const struct rmsgi_op *rmsgi_conn_oldest_wait(const struct rmsg_conn *c)
{
	if (rmsgi_list_empty(&c->tx.rndvq))
		return NULL;
	return rmsgi_list_entry(c->tx.rndvq.next, struct rmsgi_op, rlink);
}
