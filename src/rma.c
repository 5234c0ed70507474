// SPDX-License-Identifier: MIT
/*
 * rma.c - one-sided operations: rmsg_write, rmsg_write_imm and rmsg_read
 * (queued on the send queue, in order with messages), and, for backends
 * without native one-sided ops (TCP), the receiving half of their
 * emulation: the peer's WRITE, WRITE_IMM and READ_REQ frames, checked
 * against what was exported to the connection, and the READ_RESP to ours.
 */
#include "conn_int.h"

/*
 * TCP: a refused one-sided access of the peer. Logged at most once a
 * second per connection (a hostile peer could otherwise fill the log),
 * and after RMSGI_REFUSALS_MAX the connection ends: tokens are 64 random
 * bits, but nothing is gained by letting a peer keep guessing. Only
 * guesses count: a token among the last RMSGI_REFUSED_RECENT distinct
 * ones refused on the connection is no new guess (a peer with many
 * writes in flight to an export just revoked names that token in each),
 * and every access accepted takes one off the count (refusals spread
 * over a long life are races, not a search). Returns true when the
 * connection was aborted.
 */
static bool refused(struct rmsg_conn *c, const char *what, uint64_t len,
		    uint64_t off, uint64_t token, int st)
{
	ev_tstamp now = ev_now(c->ctx->loop);
	bool known = false;
	unsigned i;

	for (i = 0; i < RMSGI_REFUSED_RECENT; i++)
		if (c->rma.refused_tok[i] == token && c->rma.refusals)
			known = true;
	if (!known) {
		c->rma.refusals++;
		c->rma.refused_tok[c->rma.refused_next] = token;
		c->rma.refused_next =
			(c->rma.refused_next + 1) % RMSGI_REFUSED_RECENT;
	}
	if (now - c->rma.refusal_logged >= 1.0 ||
	    (!known && c->rma.refusals == 1)) {
		rmsgi_warn(c->ctx,
			   "conn %u: refused the peer's %s of %llu bytes at "
			   "offset %llu of export %016llx: %s (refusal %u of "
			   "%u; %u more not logged)",
			   c->id, what, (unsigned long long)len,
			   (unsigned long long)off, (unsigned long long)token,
			   rmsg_strerror(st), c->rma.refusals,
			   RMSGI_REFUSALS_MAX, c->rma.refusals_unlogged);
		c->rma.refusal_logged = now;
		c->rma.refusals_unlogged = 0;
	} else {
		c->rma.refusals_unlogged++;
	}
	if (c->rma.refusals < RMSGI_REFUSALS_MAX)
		return false;
	rmsgi_warn(c->ctx,
		   "conn %u: %u refused one-sided accesses: closing the "
		   "connection",
		   c->id, c->rma.refusals);
	rmsgi_conn_why(c, "the peer made %u refused one-sided accesses",
		       c->rma.refusals);
	rmsgi_conn_abort(c, -EACCES);
	return true;
}

/* TCP: an access of the peer was accepted: one refusal is forgiven */
static void accepted(struct rmsg_conn *c)
{
	if (c->rma.refusals)
		c->rma.refusals--;
}

/* TCP: a peer's WRITE or WRITE_IMM; checked against what was exported
 * to this connection, never touching memory outside it, then
 * acknowledged with the status */
int rmsgi_conn_rma_rx_write(struct rmsg_conn *c, const struct rmsgi_hdr *h,
			    struct rmsg_msg *m)
{
	struct rmsgi_rma r;
	uint64_t dlen;
	uint8_t *dst = NULL;
	int st;

	if (c->state != RMSGI_CS_ESTABLISHED) {
		/* closing: nothing is answered (the peer learns the close) */
		rmsgi_msg_free(m);
		return 0;
	}
	if (rmsgi_rma_decode(m->data, m->len, 0, &r)) {
		rmsgi_msg_free(m);
		rmsgi_conn_why(c, "the peer sent a malformed %s frame",
			       rmsgi_frame_name(h->type));
		rmsgi_conn_abort(c, -EPROTO);
		return -EPROTO;
	}
	dlen = m->len - RMSGI_RMA_SIZE;
	st = rmsgi_mr_target(c, r.token, r.off, dlen, RMSG_ACCESS_REMOTE_WRITE,
			     &dst, NULL);
	if (st) {
		c->st.refused_peer++;
	} else {
		c->st.writes_served++;
		accepted(c);
	}
	if (st && refused(c, "write", dlen, r.off, r.token, st)) {
		rmsgi_msg_free(m);
		return -EACCES;
	}
	if (!st && dlen)
		memcpy(dst, m->data + RMSGI_RMA_SIZE, dlen);
	if (rmsgi_conn_send_ctrl(c, RMSGI_T_RNDV_ACK, (uint32_t)-st, h->id)) {
		rmsgi_msg_free(m);
		rmsgi_conn_abort(c, -ENOMEM);
		return -ENOMEM;
	}
	if (st || h->type == RMSGI_T_WRITE) {
		rmsgi_msg_free(m);
		return 0;
	}
	m->type = RMSGI_T_IMM;
	m->aux = h->aux;
	m->id = 0;
	m->len = dlen;
	rmsgi_conn_rx_enqueue(c, m);
	return 0;
}

static void resp_done(struct rmsg_conn *c, int status, void *arg)
{
	(void)status;
	rmsgi_mr_unbusy(c->ctx, arg); /* the export */
}

/* TCP: a peer's READ_REQ; answered straight from the region, which stays
 * busy (rmsg_mr_dereg says -EBUSY) until the answer is written: what the
 * peer can make us hold is an op per answer, not a copy of the bytes */
int rmsgi_conn_rma_rx_read(struct rmsg_conn *c, const struct rmsgi_hdr *h,
			   struct rmsg_msg *m)
{
	struct rmsgi_rma r;
	struct rmsgi_op *op;
	struct rmsgi_export *exp = NULL;
	uint8_t *src = NULL;
	int st;

	st = rmsgi_rma_decode(m->data, m->len, 1, &r);
	rmsgi_msg_free(m);
	if (st) {
		rmsgi_conn_why(c, "the peer sent a malformed READ_REQ frame");
		rmsgi_conn_abort(c, -EPROTO);
		return -EPROTO;
	}
	if (c->state != RMSGI_CS_ESTABLISHED)
		return 0; /* closing: nothing is answered */
	if (r.len > c->cfg.max_msg_size)
		st = -EMSGSIZE;
	else
		st = rmsgi_mr_target(c, r.token, r.off, r.len,
				     RMSG_ACCESS_REMOTE_READ, &src, &exp);
	if (st) {
		c->st.refused_peer++;
	} else {
		c->st.reads_served++;
		accepted(c);
	}
	if (st && st != -EMSGSIZE &&
	    refused(c, "read", r.len, r.off, r.token, st))
		return -EACCES;
	op = rmsgi_op_get(c->ctx);
	if (!op) {
		if (exp)
			rmsgi_mr_unbusy(c->ctx, exp);
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
		op->arg = exp;
	}
	op_answer(c, op);
	rmsgi_conn_op_queue(c, op);
	return 0;
}

/* TCP: the answer to one of our reads: the bytes go into its iovec */
int rmsgi_conn_rma_rx_read_resp(struct rmsg_conn *c, const struct rmsgi_hdr *h,
				struct rmsg_msg *m)
{
	struct rmsgi_op *op = rmsgi_conn_rndv_find(c, h->id);
	const uint8_t *p = m->data;
	int i;

	if (!op || op->kind != RMSGI_OP_READ || h->aux > 4095 ||
	    (!h->aux && h->len != op->len)) {
		rmsgi_msg_free(m);
		rmsgi_conn_why(c, "the peer sent a READ_RESP frame for no "
				  "read of ours, of the wrong length, or "
				  "with a status that is not an errno");
		rmsgi_conn_abort(c, -EPROTO);
		return -EPROTO;
	}
	if (h->aux)
		c->st.refused_ours++;
	for (i = 0; !h->aux && i < op->iovcnt; i++) {
		memcpy(op->iov[i].iov_base, p, op->iov[i].iov_len);
		p += op->iov[i].iov_len;
	}
	rmsgi_msg_free(m);
	rmsgi_conn_rndv_unlink(c, op);
	rmsgi_conn_rndv_settle(c, op, -(int)h->aux);
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
	if (c->tx.sendq_len >= c->cfg.send_queue) {
		c->tx.want_writable = true;
		c->st.sendq_full++;
		return -EAGAIN;
	}
	op = rmsgi_conn_op_with_iov(c, iov, iovcnt);
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
	c->tx.sendq_len++;
	rmsgi_conn_op_queue(c, op);
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
