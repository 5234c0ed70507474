// SPDX-License-Identifier: MIT
/*
 * rma.c - one-sided operations (rdma.h tells the design): RDMA WRITE
 * (WITH_IMM) and READ work requests straight from and into the caller's
 * iovec, split at the device's message size and SGE limits and posted
 * piece by piece while the ring has room.
 */
#include <arpa/inet.h>

#include "rdma.h"

/* ------------------------------------------------------------------ */
/* one-sided operations                                                 */

/* keys for every piece: the pools, the app's regions, or the cache */
static int rma_prepare(struct rdma_conn *rc, struct rmsgi_op *op)
{
	struct rmsg_ctx *ctx = rc->r->ctx;
	int need = op->kind == RMSGI_OP_READ ? RMSGI_ACCESS_LOCAL_WRITE : 0;
	struct rma_tx *tx;
	uint32_t rkey;
	int i, ret;

	if (!op->rma.has_rkey) {
		rmsgi_err(ctx,
			  "conn %u: the peer's descriptor has no rkey: it was "
			  "exported to a TCP connection, or to any peer before "
			  "its context opened an RDMA device",
			  rc->ci->id);
		return -EINVAL;
	}
	tx = calloc(1, sizeof(*tx) + sizeof(tx->pin[0]) * (size_t)op->iovcnt +
			       sizeof(uint32_t) * (size_t)op->iovcnt);
	if (!tx)
		return -ENOMEM;
	tx->lkey = (uint32_t *)(tx->pin + op->iovcnt);
	op->tr_priv = tx;
	for (i = 0; i < op->iovcnt; i++) {
		const struct iovec *v = &op->iov[i];

		if (!v->iov_len ||
		    rmsgi_pool_lookup(rc->r->env->pool, v->iov_base, v->iov_len,
				      &tx->lkey[i]) == 0)
			continue;
		ret = rmsgi_mr_pin(ctx, v->iov_base, v->iov_len, need,
				   &tx->pin[tx->npin], &tx->lkey[i], &rkey);
		if (ret) {
			rma_release(ctx, op);
			return ret;
		}
		tx->npin++;
	}
	tx->split =
		op->type == RMSGI_T_WRITE_IMM &&
		(op->len > rc->r->max_msg_sz || op->iovcnt > (int)rc->max_sge);
	return 0;
}

/* fills slots with the pieces of rc->rma_op while room lasts; the op
 * completes with its last slot */
void rdma_rc_post_rma(struct rdma_conn *rc)
{
	struct rdma_ctx *r = rc->r;
	struct rmsgi_op *op;

	while ((op = rc->rma_op) && rc->state == RC_UP &&
	       ring_used(rc) < SQ_DEPTH - 8 && ring_fits(rc, 1)) {
		struct rma_tx *tx = op->tr_priv;
		bool rd = op->kind == RMSGI_OP_READ;
		struct sq_slot *s;
		uint64_t bytes = 0;
		int nsge = 0;

		if (rd && rc->reads_out >= r->rd_atom)
			break;
		if (tx->split && tx->done == op->len && tx->started) {
			/* the writes went: the immediate follows in order */
			struct rmsgi_hdr h = {.type = RMSGI_T_IMM,
					      .aux = op->aux,
					      .id = op->len};
			uint8_t *hdr;

			s = slot_fill(rc, SLOT_RMA);
			hdr = ring_hdr(rc, rc->head - 1);
			rmsgi_hdr_encode(&h, hdr);
			s->wr.opcode = IBV_WR_SEND;
			s->sge[0].addr = (uintptr_t)hdr;
			s->sge[0].length = RMSGI_HDR_SIZE;
			s->sge[0].lkey = rc->hdrs_lkey;
			s->wr.num_sge = 1;
			s->op = op;
			rc->rma_op = NULL;
			break;
		}
		s = slot_fill(rc, SLOT_RMA);
		while (tx->idx < op->iovcnt && nsge < (int)rc->max_sge &&
		       bytes < r->max_msg_sz) {
			const struct iovec *v = &op->iov[tx->idx];
			uint64_t take = RMSGI_MIN(v->iov_len - tx->ioff,
						  r->max_msg_sz - bytes);

			if (!take) {
				tx->idx++;
				tx->ioff = 0;
				continue;
			}
			s->sge[nsge].addr =
				(uintptr_t)((uint8_t *)v->iov_base + tx->ioff);
			s->sge[nsge].length = (uint32_t)take;
			s->sge[nsge].lkey = tx->lkey[tx->idx];
			nsge++;
			bytes += take;
			tx->ioff += take;
			if (tx->ioff == v->iov_len) {
				tx->idx++;
				tx->ioff = 0;
			}
		}
		s->wr.num_sge = nsge;
		s->wr.wr.rdma.remote_addr = op->rma.addr + tx->done;
		s->wr.wr.rdma.rkey = op->rma.rkey;
		tx->done += bytes;
		tx->started = true;
		if (rd) {
			s->wr.opcode = IBV_WR_RDMA_READ;
			s->is_read = 1;
			rc->reads_out++;
		} else if (op->type == RMSGI_T_WRITE_IMM && !tx->split) {
			s->wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
			s->wr.imm_data = htonl(op->aux);
		} else {
			s->wr.opcode = IBV_WR_RDMA_WRITE;
		}
		if (tx->done == op->len && !tx->split) {
			s->op = op;
			rc->rma_op = NULL;
		}
	}
	if (!rc->rma_op && rc->room_wanted) {
		rc->room_wanted = false;
		rmsgi_conn_tr_room(rc->c);
	}
}

int rdma_post_rma(struct rdma_conn *rc, struct rmsgi_op *op)
{
	int ret = rma_prepare(rc, op);

	if (ret)
		return ret;
	rc->rma_op = op;
	rdma_rc_post_rma(rc);
	return 0;
}
