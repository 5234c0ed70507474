// SPDX-License-Identifier: MIT
/*
 * send.c - the send ring (rdma.h tells the design): what post() puts in
 * a connection's slots (an eager frame, zero-copy or through a copy
 * buffer; a rendezvous request after the binds of the windows it lists),
 * send_direct(), kick(), which posts the new slots as one chain, and the
 * retirement of slots when a signalled completion arrives.
 */
#include "rdma.h"

/* ------------------------------------------------------------------ */
/* rendezvous send                                                      */

/* segments a rendezvous request lists for @op */
static size_t rndv_nseg(const struct rmsgi_op *op)
{
	size_t n = 0;
	int i;

	for (i = 0; i < op->iovcnt; i++)
		n += (op->iov[i].iov_len + SEG_MAX - 1) / SEG_MAX;
	return n;
}

/* the peer may read each non-empty piece: a window bound on this QP
 * over a local-only pin (or, without windows, a pin with remote read);
 * the bind slots go before the frame's, so RC orders them first */
static int rndv_prepare(struct rdma_conn *rc, struct rmsgi_op *op,
			uint8_t *frame, size_t *flen_p)
{
	struct rmsg_ctx *ctx = rc->r->ctx;
	const struct iovec *iov = op->iov;
	int i, pieces = 0, iovcnt = op->iovcnt;
	size_t off = RMSGI_HDR_SIZE;
	struct rndv_tx *tx;
	struct iovec one;
	void *copy = NULL;
	bool mw, gather;

	/* the request lists a segment per piece and goes into one of the
	 * peer's eager buffers: pieces too many for it (5 for an eager
	 * size of 64) are gathered into one copy, as rmsg_send(3) takes
	 * any number of pieces up to RMSG_IOV_MAX */
	gather = rndv_nseg(op) * RMSGI_SEG_SIZE > rc->peer_eager;
	for (i = 0; i < op->iovcnt; i++)
		pieces += op->iov[i].iov_len != 0;
	if (gather)
		pieces = 1;
	mw = rc->r->mw_ok && pieces <= RNDV_MW_MAX;
	if (mw && ring_used(rc) + (uint32_t)pieces + 1 > SQ_DEPTH - 8)
		return -EAGAIN;
	if (gather) {
		copy = malloc(op->len);
		if (!copy)
			return -ENOMEM;
		for (i = 0; i < op->iovcnt; i++) {
			if (op->iov[i].iov_len)
				memcpy((uint8_t *)copy + off - RMSGI_HDR_SIZE,
				       op->iov[i].iov_base, op->iov[i].iov_len);
			off += op->iov[i].iov_len;
		}
		off = RMSGI_HDR_SIZE;
		one.iov_base = copy;
		one.iov_len = op->len;
		iov = &one;
		iovcnt = 1;
	}
	tx = calloc(1, sizeof(*tx) + sizeof(tx->w[0]) * (size_t)pieces);
	if (!tx) {
		free(copy);
		return -ENOMEM;
	}
	op->tr_priv = tx;
	for (i = 0; i < iovcnt; i++) {
		void *base = iov[i].iov_base;
		size_t len = iov[i].iov_len;
		struct rmsgi_seg seg;
		struct rdma_mw *w;
		uint32_t lkey, rkey;
		uint64_t done;
		int ret;

		if (!len)
			continue;
		w = calloc(1, sizeof(*w));
		if (!w) {
			free(copy);
			return -ENOMEM;
		}
		w->ctx = ctx;
		/* the copy goes with the window over it (rdma_mw_free) */
		w->copy = copy;
		copy = NULL;
		tx->w[tx->n++] = w;
		ret = rmsgi_mr_pin(ctx, base, len,
				   mw ? RMSGI_ACCESS_MW_BIND
				      : RMSG_ACCESS_REMOTE_READ,
				   &w->pin, &lkey, &rkey);
		if (ret)
			return ret;
		w->pinned = true;
		if (mw) {
			ret = rdma_mw_bind_slot(rc, w, w->pin.h, base, len,
						RMSG_ACCESS_REMOTE_READ, &rkey);
			if (ret)
				return ret;
		}
		/* a segment's length is u32 on the wire: a larger piece
		 * goes as several (rndv_nseg counted them), all under the
		 * piece's one key */
		for (done = 0; done < len; done += seg.len) {
			seg.addr = (uintptr_t)base + done;
			seg.len = (uint32_t)RMSGI_MIN(len - done, SEG_MAX);
			seg.rkey = rkey;
			rmsgi_seg_encode(&seg, frame + off);
			off += RMSGI_SEG_SIZE;
		}
	}
	*flen_p = off;
	return 0;
}

void rdma_rndv_release(void *p, struct rmsgi_op *op)
{
	struct rndv_tx *tx = op->tr_priv;
	int i;

	(void)p;
	if (!tx)
		return;
	for (i = 0; i < tx->n; i++)
		mw_release(tx->w[i]);
	free(tx);
	op->tr_priv = NULL;
}

/* a rendezvous request: the windows' binds, then the frame listing them */
static int rdma_post_rndv(struct rdma_conn *rc, struct rmsgi_op *op,
			  const struct rmsgi_hdr *h)
{
	size_t need = RMSGI_HDR_SIZE + rndv_nseg(op) * RMSGI_SEG_SIZE;
	uint32_t head0 = rc->head, lkey = 0, i;
	struct sq_slot *s;
	void *buf = NULL;
	size_t flen;
	int ret;

	ret = rmsgi_pool_alloc(rc->r->env->pool, need, &buf);
	if (ret)
		return ret;
	ret = rndv_prepare(rc, op, buf, &flen);
	if (!ret && flen - RMSGI_HDR_SIZE > rc->peer_eager)
		ret = -EMSGSIZE;
	if (ret)
		goto undo;
	rmsgi_hdr_encode(h, buf);
	rmsgi_pool_lookup(rc->r->env->pool, buf, flen, &lkey);
	s = slot_fill(rc, SLOT_SEND);
	s->op = op;
	s->copybuf = buf;
	s->wr.opcode = IBV_WR_SEND;
	s->sge[0].addr = (uintptr_t)buf;
	s->sge[0].length = (uint32_t)flen;
	s->sge[0].lkey = lkey;
	s->wr.num_sge = 1;
	if (flen <= rc->max_inline)
		s->wr.send_flags |= IBV_SEND_INLINE;
	return 0;

undo:
	if (ret == -EAGAIN)
		rc->room_wanted = true;
	/* bind slots filled so far were never posted: drop them */
	for (i = head0; i != rc->head; i++)
		rc->ring[i % SQ_DEPTH].mw->pending = false;
	rc->head = head0;
	rdma_rndv_release(rc, op);
	rmsgi_pool_free(rc->r->env->pool, buf);
	return ret;
}

/* ------------------------------------------------------------------ */
/* posting                                                              */

int rdma_post(void *p, struct rmsgi_op *op)
{
	struct rdma_conn *rc = p;
	struct rdma_ctx *r = rc->r;
	struct rmsgi_hdr h;
	struct sq_slot *s;
	uint8_t *hdr;
	size_t total, flen;
	uint32_t lkey = 0;
	int i, ret, nsge;
	bool zc = true;

	if (rc->state != RC_UP)
		return -ENOTCONN;
	/* keep room for rendezvous reads of the other direction; and
	 * nothing overtakes a one-sided op still being posted */
	if (ring_used(rc) >= SQ_DEPTH - 8 || rc->rma_op) {
		rc->room_wanted = true;
		return -EAGAIN;
	}
	if (op->kind == RMSGI_OP_WRITE || op->kind == RMSGI_OP_READ)
		return rdma_post_rma(rc, op);
	rmsgi_op_hdr(op, &h);
	if (op->rndv)
		return rdma_post_rndv(rc, op, &h);
	s = slot_fill(rc, SLOT_SEND);
	s->op = op;
	hdr = rc->hdrs + (size_t)(rc->head - 1) % SQ_DEPTH * 64;
	s->wr.opcode = IBV_WR_SEND;

	rmsgi_hdr_encode(&h, hdr);
	total = RMSGI_HDR_SIZE + op->len;
	s->sge[0].addr = (uintptr_t)hdr;
	s->sge[0].length = RMSGI_HDR_SIZE;
	s->sge[0].lkey = rc->hdrs_lkey;
	nsge = 1;
	if (op->iovcnt + 1 > (int)rc->max_sge)
		zc = false;
	for (i = 0; zc && i < op->iovcnt; i++) {
		if (!op->iov[i].iov_len)
			continue;
		s->sge[nsge].addr = (uintptr_t)op->iov[i].iov_base;
		s->sge[nsge].length = (uint32_t)op->iov[i].iov_len;
		/* inline sends copy at post time; keys do not matter */
		if (total > rc->max_inline &&
		    rmsgi_pool_lookup(r->env->pool, op->iov[i].iov_base,
				      op->iov[i].iov_len, &lkey))
			zc = false;
		s->sge[nsge].lkey = lkey;
		nsge++;
	}
	if (zc) {
		s->wr.num_sge = nsge;
		if (total <= rc->max_inline)
			s->wr.send_flags |= IBV_SEND_INLINE;
		return 0;
	}
	/* unregistered memory: one copy into a registered buffer */
	ret = rmsgi_pool_alloc(r->env->pool, total, &s->copybuf);
	if (ret)
		goto undo;
	memcpy(s->copybuf, hdr, RMSGI_HDR_SIZE);
	flen = RMSGI_HDR_SIZE;
	for (i = 0; i < op->iovcnt; i++) {
		memcpy((uint8_t *)s->copybuf + flen, op->iov[i].iov_base,
		       op->iov[i].iov_len);
		flen += op->iov[i].iov_len;
	}
	rmsgi_pool_lookup(r->env->pool, s->copybuf, total, &lkey);
	s->sge[0].addr = (uintptr_t)s->copybuf;
	s->sge[0].length = (uint32_t)total;
	s->sge[0].lkey = lkey;
	s->wr.num_sge = 1;
	return 0;

undo:
	rmsgi_pool_free(r->env->pool, s->copybuf);
	rc->head--;
	return ret;
}

/*
 * send_direct (transport.h): a frame small enough to go inline is posted
 * now, as a work request of its own, when nothing waits to be posted
 * ahead of it. The device copies inline data at post time, so nothing of
 * the caller's is kept: no op, and the memory is free at once. Anything
 * else returns 0 and takes the queue. A failed post also returns 0: the
 * queued path fails it again from the loop, where teardown may run.
 */
/* what goes inline, header included */
size_t rdma_direct_max(const void *p)
{
	const struct rdma_conn *rc = p;

	return rc && rc->max_inline > RMSGI_HDR_SIZE
		       ? rc->max_inline - RMSGI_HDR_SIZE
		       : 0;
}

ssize_t rdma_send_direct(void *p, const struct rmsgi_hdr *h,
			 const struct iovec *iov, int iovcnt)
{
	struct rdma_conn *rc = p;
	size_t total = RMSGI_HDR_SIZE + h->len;
	struct ibv_send_wr *bad;
	struct sq_slot *s;
	uint8_t *hdr;
	int i, nsge = 1;

	if (RMSGI_UNLIKELY(!rc || rc->state != RC_UP ||
			   total > rc->max_inline ||
			   iovcnt + 1 > (int)rc->max_sge ||
			   ring_used(rc) >= SQ_DEPTH - 8 || rc->rma_op ||
			   rc->unposted != rc->head))
		return 0;
	s = slot_fill(rc, SLOT_SEND);
	hdr = rc->hdrs + (size_t)(rc->head - 1) % SQ_DEPTH * 64;
	rmsgi_hdr_encode(h, hdr);
	s->sge[0].addr = (uintptr_t)hdr;
	s->sge[0].length = RMSGI_HDR_SIZE;
	s->sge[0].lkey = rc->hdrs_lkey;
	for (i = 0; i < iovcnt; i++) {
		if (!iov[i].iov_len)
			continue;
		s->sge[nsge].addr = (uintptr_t)iov[i].iov_base;
		s->sge[nsge].length = (uint32_t)iov[i].iov_len;
		s->sge[nsge].lkey = 0; /* inline: keys do not matter */
		nsge++;
	}
	s->wr.opcode = IBV_WR_SEND;
	s->wr.num_sge = nsge;
	/* the last of its burst: signalled, as rdma_kick() does */
	s->wr.send_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED;
	s->wr.next = NULL;
	s->signaled = 1;
	rc->since_sig = 0;
	if (RMSGI_UNLIKELY(ibv_post_send(rc->qp, &s->wr, &bad))) {
		rc->head--;
		return 0;
	}
	rc->unposted = rc->head;
	return (ssize_t)total;
}

/*
 * Posts the filled slots as one chain, up to the first window bind that
 * has work before it not yet retired: a bind is posted only onto an
 * empty queue. rxe (6.1) fences a bind only behind reads and atomics,
 * and when a SEND before an executed bind is retransmitted it executes
 * the bind again, which fails for a type-2 window already bound
 * (IBV_WC_MW_BIND_ERR: the connection went down with -EACCES, seen in
 * tests/integration/many under load). The last slot of every chain is
 * signalled, so the work before a held bind retires, and
 * rdma_rc_retire() kicks again.
 */
void rdma_kick(void *p)
{
	struct rdma_conn *rc = p;
	struct ibv_send_wr *first = NULL, *prev = NULL, *bad;
	uint32_t i, end;
	int ret;

	/* LINGER: what was filled before the close (a held bind and what
	 * follows it) still goes */
	if ((rc->state != RC_UP && rc->state != RC_LINGER) ||
	    rc->unposted == rc->head)
		return;
	for (end = rc->unposted; end != rc->head; end++)
		if (rc->ring[end % SQ_DEPTH].kind == SLOT_BIND &&
		    end != rc->tail)
			break;
	if (end == rc->unposted)
		return; /* a bind waits for the queue to empty */
	for (i = rc->unposted; i != end; i++) {
		struct sq_slot *s = &rc->ring[i % SQ_DEPTH];

		if (++rc->since_sig >= SIG_EVERY || i + 1 == end ||
		    s->kind == SLOT_READ || s->is_read) {
			s->wr.send_flags |= IBV_SEND_SIGNALED;
			s->signaled = 1;
			rc->since_sig = 0;
		}
		s->wr.next = NULL;
		if (prev)
			prev->next = &s->wr;
		else
			first = &s->wr;
		prev = &s->wr;
	}
	rmsgi_tr_dbg(rc->r->env, "conn %u: post slots %u..%u", rc->ci->id,
		     rc->unposted, rc->head - 1);
	ret = ibv_post_send(rc->qp, first, &bad);
	if (ret) {
		ret = rmsgi_err_verbs(ret);
		rmsgi_err(rc->r->ctx, "ibv_post_send: %s", rmsg_strerror(ret));
		/* slots from bad on were not posted: teardown retires them */
		rc->unposted = (uint32_t)(bad->wr_id & ~SEND_TAG);
		rdma_rc_teardown(rc, ret);
		return;
	}
	rc->unposted = end;
}

/* ------------------------------------------------------------------ */
/* completions                                                          */

/* retires slots up to and including @upto; @status applies to @upto */
void rdma_rc_retire(struct rdma_conn *rc, uint32_t upto, int status)
{
	struct rmsg_conn *c = rc->c;

	while ((int32_t)(upto - rc->tail) >= 0 && rc->tail != rc->head) {
		struct sq_slot *s = &rc->ring[rc->tail % SQ_DEPTH];
		int st = rc->tail == upto ? status : 0;

		rc->tail++;
		if (s->copybuf) {
			rmsgi_pool_free(rc->r->env->pool, s->copybuf);
			s->copybuf = NULL;
		}
		if (s->kind == SLOT_READ) {
			struct rndv_rx *rx = s->rx;

			rc->reads_out--;
			if (!st && RMSGI_UNLIKELY(rndv_unwritten(
					   rc->r, (uint8_t *)s->sge[0].addr,
					   s->sge[0].length))) {
				rmsgi_warn(
					rc->r->ctx,
					"conn %u: the device completed a read "
					"of %u bytes without writing them: "
					"the queue pair is not trusted",
					rc->ci->id, s->sge[0].length);
				rmsgi_conn_why(rc->c,
					       "the RDMA device completed a "
					       "read without its data");
				st = -EIO;
			}
			if (st && !rx->status)
				rx->status = st;
			if (--rx->reads_out == 0 && rx->seg_idx == rx->nseg)
				rndv_rx_done(rc, rx, rx->status);
		} else if (s->kind == SLOT_BIND) {
			if (st)
				rmsgi_warn(rc->r->ctx,
					   "conn %u: binding a memory window "
					   "failed: %s",
					   rc->ci->id, rmsg_strerror(st));
			mw_bind_retired(s->mw);
		} else if (s->op) {
			if (s->kind == SLOT_RMA)
				rma_release(rc->r->ctx, s->op);
			rmsgi_conn_op_done(c, s->op, st);
		}
		if (s->is_read)
			rc->reads_out--;
	}
	/* a bind held by rdma_kick() goes once the queue is empty */
	if (!status && rc->tail == rc->unposted && rc->unposted != rc->head)
		rdma_kick(rc);
	if (rc->room_wanted && ring_used(rc) < SQ_DEPTH / 2) {
		rc->room_wanted = false;
		rmsgi_conn_tr_room(c);
	}
}
