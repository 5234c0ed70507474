// SPDX-License-Identifier: MIT
/*
 * pack.c - packing, both directions: small messages queued behind one
 * another sent as one PACK frame (proto.h), and a received PACK frame
 * unpacked into messages of their own. send.c asks rmsgi_pack_want()
 * (conn_int.h) on its posting path and hands over; rx.c hands PACK
 * frames here.
 */
#include <stdlib.h>
#include <string.h>

#include "conn_int.h"

/* ------------------------------------------------------------------ */
/* sending                                                              */

/*
 * Packing (PACK frames, proto.h). When the op at the head of the send
 * queue is a plain eager message and more of them follow it (they queued
 * up behind the credits, or several sends came in one loop iteration),
 * as many consecutive ones as fit the peer's eager size go in one frame:
 * one credit, one receive buffer at the peer. The PACK op carries them
 * on its rlink (it waits for no answer) in order and owns the frame's
 * buffer, from the context's pool (registered memory over RDMA, so the
 * backend sends it as it is); each message's callback runs when the
 * frame completes, with its status. A lone message goes as before.
 */
/* the op at @first and those after it packed into a PACK op that takes
 * their place at the head of the send queue; NULL (nothing changed) if
 * fewer than two fit or no memory */
struct rmsgi_op *rmsgi_pack_build(struct rmsg_conn *c, struct rmsgi_op *first)
{
	/* no more than the byte window lets go now (credit.h) */
	size_t lim =
		RMSGI_MIN(RMSGI_MIN((size_t)c->tx.peer_eager, RMSGI_PACK_MAX),
			  rmsgi_credit_room(&c->cr));
	size_t total = 0, sz;
	struct rmsgi_list *n;
	struct rmsgi_op *pk, *op;
	uint32_t cnt = 0, i;
	uint8_t *p;
	void *buf;
	int k;

	for (n = &first->link; n != &c->tx.sendq; n = n->next) {
		op = rmsgi_list_entry(n, struct rmsgi_op, link);
		if (!rmsgi_pack_want(c, op))
			break;
		sz = RMSGI_PACK_ENT(op->len);
		if (total + sz > lim || cnt == RMSGI_PACK_MAX_ENT)
			break;
		total += sz;
		cnt++;
	}
	if (cnt < 2)
		return NULL;
	pk = rmsgi_op_get(c->ctx);
	if (!pk)
		return NULL;
	if (rmsgi_pool_alloc(c->ctx->pool, total, &buf)) {
		rmsgi_op_put(c->ctx, pk);
		return NULL;
	}
	pk->kind = RMSGI_OP_PACK;
	pk->type = RMSGI_T_PACK;
	pk->proto = RMSGI_OP_P_EAGER;
	pk->aux = cnt;
	pk->len = total;
	pk->iov[0].iov_base = buf;
	pk->iov[0].iov_len = total;
	pk->iovcnt = 1;
	pk->arg = buf;
	rmsgi_list_init(&pk->rlink);
	p = buf;
	for (i = 0; i < cnt; i++) {
		op = rmsgi_list_entry(rmsgi_list_pop(&c->tx.sendq),
				      struct rmsgi_op, link);
		p = rmsgi_pack_ent_encode(p, (uint32_t)op->len);
		for (k = 0; k < op->iovcnt; k++) {
			if (op->iov[k].iov_len)
				memcpy(p, op->iov[k].iov_base,
				       op->iov[k].iov_len);
			p += op->iov[k].iov_len;
		}
		sz = RMSGI_PACK_ENT(op->len) - RMSGI_PACK_ENT_SIZE - op->len;
		memset(p, 0, sz);
		p += sz;
		rmsgi_list_add_tail(&pk->rlink, &op->link);
	}
	op_state(c, pk, RMSGI_OS_QUEUED);
	rmsgi_list_add_head(&c->tx.sendq, &pk->link);
	return pk;
}

/* the PACK frame completed (or failed, or was cancelled): so does each
 * message in it, in order, with @status; the frame's buffer goes */
void rmsgi_pack_finish(struct rmsg_conn *c, struct rmsgi_op *pk, int status)
{
	struct rmsgi_list *n;

	op_state(c, pk, RMSGI_OS_DONE);
	while ((n = rmsgi_list_pop(&pk->rlink)))
		rmsgi_conn_op_finish(
			c, rmsgi_list_entry(n, struct rmsgi_op, link), status);
	rmsgi_pool_free(c->ctx->pool, pk->arg);
	pk->arg = NULL;
	rmsgi_op_put(c->ctx, pk);
}

/* ------------------------------------------------------------------ */
/* receiving                                                            */

/*
 * A PACK frame (proto.h): checked whole first, then each message in it is
 * a struct rmsg_msg of its own, a view into the frame's buffer, delivered
 * in order like a plain message (held and released one by one). The
 * frame's buffer, and with it the credit, goes back when the last of them
 * is freed: the frame holds one reference per message and one for the
 * duration of this call.
 */
struct rmsgi_pack {
	struct rmsgi_list link;	 /* the context's pack_live, then pack_done */
	struct rmsgi_quar_ent q; /* done: the context's pack_done */
	struct rmsg_msg *frame;
	uint32_t refs;
	uint32_t n; /* messages */
	struct rmsg_msg msgs[];
};

void rmsgi_pack_fini(struct rmsg_ctx *ctx)
{
	struct rmsgi_quar_ent *e;
	struct rmsgi_list *n;

	while ((n = rmsgi_list_pop(&ctx->pack_live)))
		free(rmsgi_list_entry(n, struct rmsgi_pack, link));
	while ((e = rmsgi_quar_drain(&ctx->pack_done)))
		free(RMSGI_CONTAINER_OF(e, struct rmsgi_pack, q));
}

void rmsgi_pack_stale(struct rmsg_conn *c)
{
	struct rmsgi_list *n;

	rmsgi_list_for_each(n, &c->ctx->pack_live)
	{
		struct rmsgi_pack *pk =
			rmsgi_list_entry(n, struct rmsgi_pack, link);

		if (pk->frame->conn == c)
			pk->frame->wcost = RMSGI_WCOST_STALE;
	}
}

static void pack_unref(struct rmsgi_pack *pk)
{
	struct rmsg_msg *f = pk->frame;
	struct rmsg_ctx *ctx = f->conn->ctx;
	struct rmsgi_quar_ent *e;

	if (--pk->refs)
		return;
	/* its message objects stay readable a while (quar.h) */
	rmsgi_list_del(&pk->link);
	rmsgi_quar_put(&ctx->pack_done, &pk->q, pk->n);
	while ((e = rmsgi_quar_over(&ctx->pack_done)))
		free(RMSGI_CONTAINER_OF(e, struct rmsgi_pack, q));
	rmsgi_msg_free(f);
}

static void pack_msg_free(struct rmsg_msg *m)
{
	pack_unref(m->tr_priv);
}

int rmsgi_pack_rx(struct rmsg_conn *c, const struct rmsgi_hdr *h,
		  struct rmsg_msg *f)
{
	const uint8_t *p = f->data;
	struct rmsgi_pack *pk;
	uint32_t i, n = h->aux;
	int ret = -EPROTO;

	if (f->len != h->len || h->len > c->cfg.eager_size ||
	    rmsgi_pack_check(p, f->len, n, c->cfg.max_msg_size)) {
		rmsgi_warn(c->ctx,
			   "conn %u: the peer sent a malformed PACK "
			   "frame: closing",
			   c->id);
		rmsgi_conn_why(c, "the peer sent a malformed PACK frame");
		goto fail;
	}
	ret = -ENOMEM;
	pk = malloc(sizeof(*pk) + (size_t)n * sizeof(pk->msgs[0]));
	if (!pk)
		goto fail;
	pk->frame = f;
	pk->refs = n + 1;
	pk->n = n;
	rmsgi_list_add_tail(&c->ctx->pack_live, &pk->link);
	c->st.packs_recv++;
	c->st.packed_recv += n;
	c->st.msgs_recv += n;
	if (RMSGI_UNLIKELY(c->ss) && c->ss->rx_unready)
		c->ss->rx_behind += n; /* not had in order yet (rx.c) */
	rmsgi_conn_get(c);
	for (i = 0; i < n; i++) {
		struct rmsg_msg *m = &pk->msgs[i];
		uint32_t len = rmsgi_get32(p);

		rmsgi_msg_init(m, c, p + RMSGI_PACK_ENT_SIZE, len);
		m->type = RMSGI_T_DATA;
		m->aux = 0;
		m->id = 0;
		m->free_fn = pack_msg_free;
		m->tr_priv = pk;
		c->st.bytes_recv += len;
		rmsgi_list_add_tail(&c->rxq, &m->link);
		p += RMSGI_PACK_ENT(len);
	}
	rmsgi_conn_deliver(c);
	pack_unref(pk);
	rmsgi_conn_put(c);
	return 0;
fail:
	rmsgi_msg_free(f);
	rmsgi_conn_abort(c, ret);
	return ret;
}
