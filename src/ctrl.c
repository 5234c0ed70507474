// SPDX-License-Identifier: MIT
/*
 * ctrl.c - the frames the core makes for the peer on its own: the CREDIT
 * frame (returned credits and window bytes, a resumable session's acks,
 * keepalive probes and answers, BYE, credits asked and given back:
 * reclaim.c), one per connection and at the head
 * of the send queue, and header-only control frames (RNDV_ACK, REKEY),
 * counted as answers (op_answer).
 */
#include "conn_int.h"

void rmsgi_conn_credit_first(struct rmsg_conn *c, uint32_t aux)
{
	c->tx.credit_op.aux = aux;
	c->tx.credit_op.id = 0;
	op_state(c, &c->tx.credit_op, RMSGI_OS_QUEUED);
	rmsgi_list_add_head(&c->tx.sendq, &c->tx.credit_op.link);
}

bool rmsgi_conn_send_credit_id(struct rmsg_conn *c, uint32_t aux, uint64_t id)
{
	if (credit_op_busy(c) || c->state != RMSGI_CS_ESTABLISHED)
		return false; /* a frame is on its way: that tells the peer */
	rmsgi_conn_credit_first(c, aux);
	c->tx.credit_op.id = id;
	rmsgi_ctx_mark_dirty(c->ctx, c);
	return true;
}

bool rmsgi_conn_send_credit(struct rmsg_conn *c, uint32_t aux)
{
	return rmsgi_conn_send_credit_id(c, aux, 0);
}

void rmsgi_conn_credit_give(struct rmsg_conn *c, struct rmsgi_op *op)
{
	if (op->aux != 0 && op->aux != RMSGI_CREDIT_GIVE)
		return; /* a probe or a request: the next frame gives */
	op->aux = RMSGI_CREDIT_GIVE;
	/* messages wait behind it: a burst starts, it needs them */
	if (op->link.next != &c->tx.sendq || c->tx.sendq.next != &op->link)
		op->id = 0;
	else
		op->id = rmsgi_credit_give_count(&c->cr);
}

void rmsgi_conn_credit_gave(struct rmsg_conn *c, const struct rmsgi_op *op)
{
	rmsgi_credit_gave(&c->cr, (uint32_t)op->id);
	c->st.credits_given += op->id;
	if (op->id)
		rmsgi_dbg(c->ctx, "conn %u: %llu credits given back, %u kept",
			  c->id, (unsigned long long)op->id, c->cr.avail);
}

/* queues a header-only control frame */
int rmsgi_conn_send_ctrl(struct rmsg_conn *c, uint8_t type, uint32_t aux,
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
	rmsgi_conn_op_queue(c, op);
	return 0;
}

int rmsgi_conn_send_ctrl_first(struct rmsg_conn *c, uint8_t type, uint32_t aux,
			       uint64_t id, struct rmsgi_list **after)
{
	int ret = rmsgi_conn_send_ctrl(c, type, aux, id);
	struct rmsgi_list *n;

	if (ret)
		return ret;
	n = c->tx.sendq.prev; /* the op just queued */
	rmsgi_list_del(n);
	rmsgi_list_add_head(*after, n); /* after @after */
	*after = n;
	return 0;
}
