// SPDX-License-Identifier: MIT
/*
 * rx.c - a connection's receive side: the frames a backend hands up
 * (rmsgi_conn_rx), checked against the peer's credits, delivered to the
 * app in order (held messages keep their credit until released), control
 * frames and the peer's acknowledgements of our rendezvous sends.
 */
#include <stdlib.h>

#include "conn_int.h"

/* drops messages that can no longer be delivered */
void rmsgi_conn_drop_rx(struct rmsg_conn *c)
{
	struct rmsgi_list *n, *t;

	rmsgi_list_for_each_safe (n, t, &c->rxq) {
		struct rmsg_msg *m = rmsgi_list_entry(n, struct rmsg_msg, link);

		if (!m->ready)
			continue; /* the transport still owns it */
		rmsgi_list_del(&m->link);
		rmsgi_msg_free(m);
	}
}

/* a buffer can take a frame again: its credit goes back, and the
 * @wcost bytes of the byte window it took (inline for rmsgi_conn_rx's
 * common case) */
static inline __attribute__((always_inline)) void
conn_credit_freed(struct rmsg_conn *c, uint32_t wcost)
{
	rmsgi_credit_freed_bytes(&c->cr, wcost);
	if (RMSGI_UNLIKELY(!rmsgi_credit_freed(&c->cr))) {
		/* the grant shrank by this buffer instead; its bytes of
		 * the window still go back */
		rmsgi_conn_grant(c, c->cr.grant);
		if (!wcost)
			return;
	}
	if (c->state == RMSGI_CS_ESTABLISHED && credit_due(c))
		rmsgi_ctx_mark_dirty(c->ctx, c);
}

void rmsgi_conn_credit_freed(struct rmsg_conn *c, uint32_t wcost)
{
	/* a buffer of a transport that is gone (a resumed session's) */
	if (RMSGI_UNLIKELY(wcost == RMSGI_WCOST_STALE))
		return;
	conn_credit_freed(c, wcost);
}

/*
 * The peer counts on us having its messages in order up to our count
 * (session.c). A message still being read by rendezvous will not be
 * read now: it and every message behind it are given up and uncounted,
 * so the count says where the peer's replay starts. (A write's immediate
 * behind them stays: it is no message and is not sent again.)
 */
static void rx_cut(struct rmsg_conn *c)
{
	struct rmsgi_list *n, *next;
	bool cut = false;

	for (n = c->rxq.next; n != &c->rxq; n = next) {
		struct rmsg_msg *m = rmsgi_list_entry(n, struct rmsg_msg, link);

		next = n->next;
		if (m->type == RMSGI_T_IMM || (!cut && m->ready))
			continue;
		cut = true;
		rmsgi_list_del(&m->link);
		rmsgi_list_init(&m->link);
		if (!m->ready) {
			m->cut = 1; /* rmsgi_conn_rx_ready frees it */
			continue;
		}
		c->st.msgs_recv--;
		c->st.bytes_recv -= m->len;
		if (m->type == RMSGI_T_RNDV_REQ)
			c->st.rndv_recv--;
		rmsgi_msg_free(m);
	}
	if (c->ss) {
		c->ss->rx_unready = 0;
		c->ss->rx_behind = 0;
	}
}

/* a rendezvous message left the unread (rmsgi_conn_rx_ready): the
 * messages counted behind it up to the next unread one are had in order
 * now (rmsgi_session_rx) */
static void rx_unread_done(struct rmsg_conn *c)
{
	struct rmsgi_session *ss = c->ss;
	struct rmsgi_list *n;
	uint64_t behind = 0;
	bool gap = false;

	ss->rx_unready--;
	if (!ss->rx_unready) {
		ss->rx_behind = 0;
		return;
	}
	rmsgi_list_for_each(n, &c->rxq)
	{
		const struct rmsg_msg *m =
			rmsgi_list_entry(n, struct rmsg_msg, link);

		if (!m->ready)
			gap = true;
		else if (gap && (m->type == RMSGI_T_DATA ||
				 m->type == RMSGI_T_RNDV_REQ))
			behind++;
	}
	ss->rx_behind = behind;
}

void rmsgi_conn_rx_stale(struct rmsg_conn *c)
{
	struct rmsgi_list *n;

	/* first: what the cut frees returns no credit to the next one */
	rmsgi_list_for_each(n, &c->rxq)
		rmsgi_list_entry(n, struct rmsg_msg, link)
			->wcost = RMSGI_WCOST_STALE;
	rx_cut(c);
	rmsgi_list_for_each(n, &c->ctx->held)
	{
		struct rmsg_msg *m = rmsgi_list_entry(n, struct rmsg_msg, link);

		if (m->conn == c)
			m->wcost = RMSGI_WCOST_STALE;
	}
	rmsgi_pack_stale(c);
	rmsgi_rpc_stale(c);
}

/* after on_msg: frees the message unless the app holds it */
static inline void msg_after_cb(struct rmsg_msg *m)
{
	if (!m->held)
		rmsgi_msg_free(m);
}

/* hands a message to on_msg, then frees it unless the app holds it */
static inline void call_on_msg(struct rmsg_conn *c, struct rmsg_msg *m)
{
	m->in_deliver = 1;
	RMSGI_USER_CB(c->ctx, c->ops.on_msg(c, m, c->arg));
	m->in_deliver = 0;
	msg_after_cb(m);
}

/* messages go to the app: also while suspended (it has them; the
 * peer's count of them is in our next hello) */
static inline bool rx_open(const struct rmsg_conn *c)
{
	return c->state == RMSGI_CS_ESTABLISHED ||
	       c->state == RMSGI_CS_SUSPENDED;
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
			c->st.imm_recv++;
			if (rx_open(c) && c->ops.on_imm) {
				RMSGI_USER_CB(c->ctx,
					      c->ops.on_imm(c, m->aux, m->len,
							    c->arg));
			}
			rmsgi_msg_free(m);
			continue;
		}
		if (m->aux && rx_open(c)) {
			/* RPC requests and replies go to rpc.c */
			int ret = rmsgi_rpc_rx(c, m);

			msg_after_cb(m);
			if (ret) {
				rmsgi_conn_abort(c, ret);
				return;
			}
			continue;
		}
		if (!rx_open(c) || !c->ops.on_msg) {
			rmsgi_msg_free(m);
			continue;
		}
		call_on_msg(c, m);
	}
}

void rmsgi_conn_deliver(struct rmsg_conn *c)
{
	deliver_rx(c);
}

struct rmsgi_op *rmsgi_conn_rndv_find(struct rmsg_conn *c, uint64_t id)
{
	struct rmsgi_list *n;

	for (n = c->tx.rndvq.next; n != &c->tx.rndvq; n = n->next) {
		struct rmsgi_op *op =
			rmsgi_list_entry(n, struct rmsgi_op, rlink);

		if (op->id == id)
			return op;
	}
	return NULL;
}

/* queues a message-like object for in-order delivery */
void rmsgi_conn_rx_enqueue(struct rmsg_conn *c, struct rmsg_msg *m)
{
	rmsgi_conn_get(c);
	rmsgi_list_add_tail(&c->rxq, &m->link);
	deliver_rx(c);
	rmsgi_conn_put(c);
}

/* every frame but an in-order plain message (rmsgi_conn_rx) */
static int rx_other(struct rmsg_conn *c, const struct rmsgi_hdr *h,
		    struct rmsg_msg *m)
{
	struct rmsgi_op *op;

	switch (h->type) {
	case RMSGI_T_DATA:
		c->st.msgs_recv++;
		c->st.bytes_recv += m->len;
		/* behind a rendezvous being read: not had in order yet */
		if (RMSGI_UNLIKELY(c->ss) && c->ss->rx_unready)
			c->ss->rx_behind++;
		/* fall through */
	case RMSGI_T_RNDV_REQ: /* counted once its data is read */
		if (h->type == RMSGI_T_RNDV_REQ && c->ss)
			c->ss->rx_unready++;
		m->type = h->type;
		m->aux = h->aux;
		m->id = h->id;
		rmsgi_conn_rx_enqueue(c, m);
		return 0;
	case RMSGI_T_PACK:
		return rmsgi_pack_rx(c, h, m);
	case RMSGI_T_AUTH: /* after the handshake: refused there */
		return rmsgi_conn_auth_rx(c, h, m);
	case RMSGI_T_CREDIT:
		rmsgi_msg_free(m);
		if (h->aux == RMSGI_CREDIT_PROBE)
			rmsgi_keepalive_answer(c);
		else if (h->aux == RMSGI_CREDIT_BYE) {
			c->peer_bye = true; /* its end follows */
			if (c->ss)
				rmsgi_session_bye(c);
		}
		c->rcl.credit_frames++;
		if (h->aux == RMSGI_CREDIT_TAKE)
			rmsgi_reclaim_asked(c, h->id);
		else if (h->aux == RMSGI_CREDIT_GIVE &&
			 rmsgi_reclaim_given(c, h->id)) {
			rmsgi_conn_abort(c, -EPROTO);
			return -EPROTO;
		}
		return 0;
	case RMSGI_T_IMM:
		/* RDMA: a write-with-immediate landed (native, or the end of
		 * a split one); id is its length */
		m->type = RMSGI_T_IMM;
		m->aux = h->aux;
		m->len = (size_t)h->id;
		m->id = 0;
		rmsgi_conn_rx_enqueue(c, m);
		return 0;
	case RMSGI_T_WRITE:
	case RMSGI_T_WRITE_IMM:
		return rmsgi_conn_rma_rx_write(c, h, m);
	case RMSGI_T_READ_REQ:
		return rmsgi_conn_rma_rx_read(c, h, m);
	case RMSGI_T_READ_RESP:
		return rmsgi_conn_rma_rx_read_resp(c, h, m);
	case RMSGI_T_REKEY:
		rmsgi_msg_free(m);
		return rmsgi_rekey_rx(c, h);
	case RMSGI_T_RNDV_ACK:
		rmsgi_msg_free(m);
		op = rmsgi_conn_rndv_find(c, h->id);
		if (!op || op->kind == RMSGI_OP_READ) {
			rmsgi_conn_why(c, "the peer sent a RNDV_ACK frame for "
					  "nothing we asked");
			rmsgi_conn_abort(c, -EPROTO);
			return -EPROTO;
		}
		if (h->aux > 4095) {
			rmsgi_conn_why(c,
				       "the peer sent a RNDV_ACK frame "
				       "with the status %u (not an errno)",
				       h->aux);
			rmsgi_conn_abort(c, -EPROTO);
			return -EPROTO;
		}
		if (h->aux && op->kind == RMSGI_OP_WRITE)
			c->st.refused_ours++;
		rmsgi_conn_rndv_unlink(c, op);
		rmsgi_conn_rndv_settle(c, op, -(int)h->aux);
		return 0;
	default:
		rmsgi_msg_free(m);
		if (h->type >= RMSGI_T_MAX_)
			rmsgi_conn_why(c,
				       "the peer sent a frame of an unknown "
				       "type (%u)",
				       h->type);
		else
			rmsgi_conn_why(c,
				       "the peer sent a %s frame, not allowed "
				       "here",
				       rmsgi_frame_name(h->type));
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

/* the end of every path but the common one: @m went back inside
 * (rmsgi_msg_free: RMSGI_MSG_DONE), or the core keeps it */
static int rx_settle(struct rmsg_conn *c, struct rmsg_msg *m, int ret)
{
	if (m->in_rx == RMSGI_MSG_DONE) {
		if (!c->cr.late)
			conn_credit_freed(c, m->wcost);
		return ret; /* RMSGI_RX_DONE (0) or the error */
	}
	/* queued or held: its free_fn runs later, once */
	m->in_rx = 0;
	return RMSGI_RX_KEPT;
}

/* a frame beyond the peer's byte window (rmsgi_conn_rx): refused */
static int __attribute__((noinline, cold))
rx_beyond_window(struct rmsg_conn *c, const struct rmsgi_hdr *h,
		 struct rmsg_msg *m)
{
	m->in_rx = RMSGI_MSG_IN_RX;
	rmsgi_msg_free(m);
	rmsgi_warn(c->ctx,
		   "conn %u: the peer sent a frame of %llu bytes beyond the "
		   "byte window of %u it was granted (%u left)",
		   c->id, (unsigned long long)h->len, c->cr.win_in,
		   c->cr.wpeer_avail);
	rmsgi_conn_why(c,
		       "the peer sent a %s frame of %llu bytes beyond the "
		       "byte window of %u it was granted",
		       rmsgi_frame_name(h->type), (unsigned long long)h->len,
		       c->cr.win_in);
	rmsgi_conn_abort(c, -EPROTO);
	return rx_settle(c, m, -EPROTO);
}

/* the peer acknowledged messages it cannot have (rmsgi_session_acked
 * said why): refused */
static int __attribute__((noinline, cold))
rx_bad_acks(struct rmsg_conn *c, struct rmsg_msg *m)
{
	m->in_rx = RMSGI_MSG_IN_RX;
	rmsgi_msg_free(m);
	rmsgi_conn_abort(c, -EPROTO);
	return rx_settle(c, m, -EPROTO);
}

/* the peer returned more credits or window bytes than it holds of ours
 * (rmsgi_conn_rx): refused */
static int __attribute__((noinline, cold))
rx_returned_beyond(struct rmsg_conn *c, const struct rmsgi_hdr *h,
		   struct rmsg_msg *m)
{
	m->in_rx = RMSGI_MSG_IN_RX;
	rmsgi_msg_free(m);
	rmsgi_conn_why(c,
		       "the peer's %s frame returned more credits or bytes "
		       "than it holds of ours",
		       rmsgi_frame_name(h->type));
	rmsgi_conn_abort(c, -EPROTO);
	return rx_settle(c, m, -EPROTO);
}

int rmsgi_conn_rx(struct rmsg_conn *c, const struct rmsgi_hdr *h,
		  struct rmsg_msg *m)
{
	uint32_t grow;
	int64_t cost;
	int ret;

	/* @m comes with in_rx 0 (rmsgi_msg_init). Every path but the
	 * common one marks it first: until this call returns, the core's
	 * rmsgi_msg_free() then only records that it is done with it. */
	/* nothing of an unauthenticated peer goes further (auth.c); an
	 * AUTH frame afterwards ends in rx_other() */
	if (RMSGI_UNLIKELY(c->auth_wait)) {
		m->in_rx = RMSGI_MSG_IN_RX;
		return rx_settle(c, m, rmsgi_conn_auth_rx(c, h, m));
	}
	/* any frame shows the peer alive and used one of its credits; one
	 * beyond them (held messages count until released) is refused */
	rmsgi_live_rx(&c->live, ev_now(c->ctx->loop));
	if (RMSGI_UNLIKELY(rmsgi_credit_arrived(&c->cr)) &&
	    !bye_beyond_grant(c, h)) {
		m->in_rx = RMSGI_MSG_IN_RX;
		rmsgi_msg_free(m);
		rmsgi_warn(c->ctx,
			   "conn %u: the peer sent a frame beyond the %u "
			   "credits it was granted",
			   c->id, c->cr.grant);
		rmsgi_conn_why(c,
			       "the peer sent a %s frame beyond the %u "
			       "credits it was granted",
			       rmsgi_frame_name(h->type), c->cr.grant);
		rmsgi_conn_abort(c, -EPROTO);
		return rx_settle(c, m, -EPROTO);
	}
	/* and its bytes: a frame that costs more than the peer has left
	 * of the byte window is refused (credit.h) */
	cost = RMSGI_LIKELY(h->type != RMSGI_T_AUTH)
		       ? rmsgi_credit_arrived_bytes(&c->cr, h->len)
		       : 0; /* AUTH frames take none (auth.c) */
	if (RMSGI_UNLIKELY(cost < 0))
		return rx_beyond_window(c, h, m);
	m->wcost = (uint32_t)cost;
	/* the peer is down to its last credit: it may use more */
	grow = rmsgi_credit_grow_want(&c->cr);
	if (RMSGI_UNLIKELY(grow))
		rmsgi_conn_grant(c, grow);
	if (h->credits | h->bytes) {
		/* credits and bytes of our window back; more than the peer
		 * holds, or bytes from a peer without a window: refused */
		ret = rmsgi_credit_returned(&c->cr, h->credits,
					    c->peer_credits) |
		      rmsgi_credit_returned_bytes(&c->cr, h->bytes);
		if (RMSGI_UNLIKELY(ret))
			return rx_returned_beyond(c, h, m);
		if (!rmsgi_list_empty(&c->tx.sendq))
			rmsgi_ctx_mark_dirty(c->ctx, c);
	}
	/* messages of ours the peer has (a resumable session) */
	if (RMSGI_UNLIKELY(h->acks | h->flags) &&
	    rmsgi_session_acked(c, h->acks, h->flags))
		return rx_bad_acks(c, m);
	if (RMSGI_UNLIKELY(h->type != RMSGI_T_DATA || h->aux || !m->ready ||
			   !rmsgi_list_empty(&c->rxq) ||
			   c->state != RMSGI_CS_ESTABLISHED ||
			   !c->ops.on_msg)) {
		m->in_rx = RMSGI_MSG_IN_RX;
		return rx_settle(c, m, rx_other(c, h, m));
	}
	/* in order with nothing ahead: what deliver_rx() would do, without
	 * the queue, and without the marking (nothing else frees it) */
	c->st.msgs_recv++;
	c->st.bytes_recv += m->len;
	m->type = RMSGI_T_DATA;
	m->aux = 0;
	m->id = h->id;
	rmsgi_conn_get(c);
	m->in_deliver = 1;
	RMSGI_USER_CB(c->ctx, c->ops.on_msg(c, m, c->arg));
	m->in_deliver = 0;
	if (RMSGI_LIKELY(!m->held)) {
		/* back to the backend, with its credit unless the backend
		 * must repost it first */
		if (RMSGI_LIKELY(!c->cr.late))
			conn_credit_freed(c, m->wcost);
		ret = RMSGI_RX_DONE;
	} else {
		ret = RMSGI_RX_KEPT; /* the app's: free_fn on release */
	}
	rmsgi_conn_put(c);
	return ret;
}

void rmsgi_conn_rx_ready(struct rmsg_conn *c, struct rmsg_msg *m, int status)
{
	m->ready = 1;
	if (RMSGI_UNLIKELY(m->cut)) {
		/* given up at a suspend (rx_cut): what waited behind it
		 * and was kept (a write's immediate) goes on */
		rmsgi_msg_free(m);
		rmsgi_conn_get(c);
		deliver_rx(c);
		rmsgi_conn_put(c);
		return;
	}
	if (c->state >= RMSGI_CS_CLOSING) {
		rmsgi_list_del(&m->link);
		rmsgi_msg_free(m);
		return;
	}
	if (RMSGI_UNLIKELY(status) && status != -ENOMEM && c->ss &&
	    c->state == RMSGI_CS_ESTABLISHED) {
		/* a read that failed on the path (its retries ran out before
		 * the keepalive saw it): a resumable connection suspends, and
		 * the cut gives this message up (the peer sends it again) */
		m->ready = 0;
		rmsgi_conn_lost(c, status);
		if (m->cut) {
			rmsgi_msg_free(m);
			return;
		}
		m->ready = 1;
		rmsgi_list_del(&m->link); /* not resumable after all */
		rmsgi_msg_free(m);
		return;
	}
	if (c->ss)
		rx_unread_done(c);
	if (rmsgi_conn_send_ctrl(c, RMSGI_T_RNDV_ACK,
				 status ? (uint32_t)-status : 0, m->id) == 0) {
		/* the ACK goes out before on_msg can close the connection */
		rmsgi_conn_post_queued(c);
	} else {
		rmsgi_list_del(&m->link);
		rmsgi_msg_free(m);
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
		rmsgi_msg_free(m);
		/* the peer numbered it: it is had (refused), in order */
		if (c->ss)
			c->ss->rx_refused++;
	} else if (status) {
		rmsgi_list_del(&m->link);
		rmsgi_msg_free(m);
		rmsgi_conn_abort(c, status);
		return;
	} else {
		c->st.msgs_recv++;
		c->st.rndv_recv++;
		c->st.bytes_recv += m->len;
		if (c->ss)
			c->ss->ack_now = true; /* one CREDIT per large one */
	}
	rmsgi_conn_get(c);
	deliver_rx(c);
	rmsgi_conn_put(c);
}
