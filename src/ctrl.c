// SPDX-License-Identifier: MIT
/*
 * ctrl.c - the frames the core makes for the peer on its own: the CREDIT
 * frame (returned credits and window bytes, a resumable session's acks,
 * keepalive probes and answers, BYE), one per connection and at the head
 * of the send queue, and header-only control frames (RNDV_ACK, REKEY),
 * counted as answers (op_answer).
 */
#include "conn_int.h"

void rmsgi_conn_credit_first(struct rmsg_conn *c, uint32_t aux)
{
	c->tx.credit_op.aux = aux;
	op_state(c, &c->tx.credit_op, RMSGI_OS_QUEUED);
	rmsgi_list_add_head(&c->tx.sendq, &c->tx.credit_op.link);
}

bool rmsgi_conn_send_credit(struct rmsg_conn *c, uint32_t aux)
{
	if (credit_op_busy(c) || c->state != RMSGI_CS_ESTABLISHED)
		return false; /* a frame is on its way: that tells the peer */
	rmsgi_conn_credit_first(c, aux);
	rmsgi_ctx_mark_dirty(c->ctx, c);
	return true;
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
