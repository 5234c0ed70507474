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
	if (mw && (ring_used(rc) + (uint32_t)pieces + 1 > SQ_DEPTH - 8 ||
		   !ring_fits(rc, (uint32_t)pieces + 1)))
		/* an empty ring that could not grow (no memory for it):
		 * no completion will bring room, so this message fails */
		return ring_used(rc) ? -EAGAIN : -ENOMEM;
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
		ring_slot(rc, i)->mw->pending = false;
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
	if (ring_used(rc) >= SQ_DEPTH - 8 || rc->rma_op || !ring_fits(rc, 1)) {
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
	hdr = ring_hdr(rc, rc->head - 1);
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

	if (RMSGI_UNLIKELY(
		    !rc || rc->state != RC_UP || total > rc->max_inline ||
		    iovcnt + 1 > (int)rc->max_sge ||
		    ring_used(rc) >= SQ_DEPTH - 8 || ring_used(rc) >= rc->cap ||
		    rc->rma_op || rc->unposted != rc->head))
		return 0;
	s = slot_fill(rc, SLOT_SEND);
	hdr = ring_hdr(rc, rc->head - 1);
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

/* frees the old header slots no posted work reads any more (they are
 * in growth order, so their bounds rise) */
static void ring_old_retire(struct rdma_conn *rc)
{
	uint8_t k = 0, n;

	while (k < rc->nold && (int32_t)(rc->tail - rc->hdrs_old_until[k]) >= 0)
		rmsgi_pool_free(rc->r->env->pool, rc->hdrs_old[k++]);
	if (!k)
		return;
	for (n = 0; k < rc->nold; n++, k++) {
		rc->hdrs_old[n] = rc->hdrs_old[k];
		rc->hdrs_old_until[n] = rc->hdrs_old_until[k];
	}
	rc->nold = n;
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
		if (ring_slot(rc, end)->kind == SLOT_BIND && end != rc->tail)
			break;
	if (end == rc->unposted)
		return; /* a bind waits for the queue to empty */
	for (i = rc->unposted; i != end; i++) {
		struct sq_slot *s = ring_slot(rc, i);

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
		struct sq_slot *s = ring_slot(rc, rc->tail);
		int st = rc->tail == upto ? status : 0;

		rc->tail++;
		if (s->copybuf) {
			rmsgi_pool_free(rc->r->env->pool, s->copybuf);
			s->copybuf = NULL;
		}
		/* nothing of @s is read after the up-calls below: they may
		 * post (and so grow the ring, freeing this slot's storage)
		 * or end the connection */
		if (s->is_read)
			rc->reads_out--;
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
	}
	if (RMSGI_UNLIKELY(rc->nold))
		ring_old_retire(rc);
	/* a bind held by rdma_kick() goes once the queue is empty */
	if (!status && rc->tail == rc->unposted && rc->unposted != rc->head)
		rdma_kick(rc);
	if (rc->room_wanted && ring_used(rc) < SQ_DEPTH / 2) {
		rc->room_wanted = false;
		rmsgi_conn_tr_room(c);
	}
}

/* ------------------------------------------------------------------ */
/* the ring's storage: grows with use, shrinks when idle               */

static int ring_alloc(struct rdma_conn *rc, uint32_t cap,
		      struct sq_slot **ring_p, uint8_t **hdrs_p,
		      uint32_t *lkey_p)
{
	struct rmsgi_pool *pool = rc->r->env->pool;
	struct sq_slot *ring = calloc(cap, sizeof(*ring));
	int ret;

	if (!ring)
		return -ENOMEM;
	ret = rmsgi_pool_alloc(pool, (size_t)cap * 64, (void **)hdrs_p);
	if (ret) {
		free(ring);
		return ret;
	}
	rmsgi_pool_lookup(pool, *hdrs_p, (size_t)cap * 64, lkey_p);
	*ring_p = ring;
	return 0;
}

static void ring_timer_start(struct rdma_conn *rc)
{
	struct ev_loop *loop = rc->r->env->loop;

	rmsgi_timer_start(loop, &rc->ring_timer, RING_IDLE_MS / 1000.0, 0);
	ev_unref(loop);
	rc->ring_timer_on = true;
}

/* @ncap slots: the filled ones move over (indices are kept); the header
 * slots of posted work stay where the device may read them until that
 * work retires (hdrs_old), those of unposted slots move too */
static int ring_move(struct rdma_conn *rc, uint32_t ncap)
{
	struct sq_slot *ring;
	uint8_t *hdrs;
	uint32_t lkey, i;
	bool read = false;
	int ret;

	if (rc->nold == RING_GROWTHS)
		return -EAGAIN; /* not reached: see hdrs_old */
	ret = ring_alloc(rc, ncap, &ring, &hdrs, &lkey);
	if (ret)
		return ret;
	for (i = rc->tail; i != rc->head; i++) {
		struct sq_slot *s = &ring[i & (ncap - 1)];
		uint8_t *old = ring_hdr(rc, i), *h;
		bool hdr;

		*s = *ring_slot(rc, i);
		s->wr.sg_list = s->sge;
		hdr = s->wr.num_sge && s->sge[0].addr == (uintptr_t)old;
		if (!hdr)
			continue;
		if ((int32_t)(i - rc->unposted) < 0) {
			read = true; /* posted: the device may read it */
			continue;
		}
		h = hdrs + (size_t)(i & (ncap - 1)) * 64;
		memcpy(h, old, 64);
		s->sge[0].addr = (uintptr_t)h;
		s->sge[0].lkey = lkey;
	}
	if (read) {
		rc->hdrs_old[rc->nold] = rc->hdrs;
		rc->hdrs_old_until[rc->nold++] = rc->unposted;
	} else {
		rmsgi_pool_free(rc->r->env->pool, rc->hdrs);
	}
	free(rc->ring);
	rmsgi_tr_dbg(rc->r->env, "conn %u: send ring %u -> %u slots",
		     rc->ci->id, rc->cap, ncap);
	rc->ring = ring;
	rc->hdrs = hdrs;
	rc->hdrs_lkey = lkey;
	rc->cap = ncap;
	return 0;
}

int rdma_ring_grow(struct rdma_conn *rc, uint32_t want)
{
	uint32_t ncap = rc->cap;
	int ret;

	/* the callers keep within the QP's depth */
	if (want > SQ_DEPTH)
		return -EAGAIN;
	while (ncap < want)
		ncap *= 2;
	ret = ring_move(rc, ncap);
	if (!ret && !rc->ring_timer_on)
		ring_timer_start(rc);
	return ret;
}

/* a grown ring that needed no more than half of its slots since the
 * last check, and is empty now, halves */
static void ring_timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct rdma_conn *rc = w->data;
	bool busy = rc->ring_busy;

	(void)revents;
	rc->ring_timer_on = false;
	ev_ref(loop);
	if (rc->state != RC_UP || rc->cap <= RING_MIN)
		return;
	rdma_enter(rc->r);
	rc->ring_busy = false;
	if (!busy && rc->head == rc->tail && !rc->nold)
		ring_move(rc, rc->cap / 2);
	if (rc->cap > RING_MIN)
		ring_timer_start(rc);
	rdma_leave(rc->r);
}

int rdma_ring_init(struct rdma_conn *rc)
{
	rmsgi_timer_init(&rc->ring_timer, rc->r->env->timers, ring_timer_cb);
	rc->ring_timer.w.data = rc;
	rc->cap = RING_MIN;
	return ring_alloc(rc, RING_MIN, &rc->ring, &rc->hdrs, &rc->hdrs_lkey);
}

void rdma_ring_free(struct rdma_conn *rc)
{
	struct rmsgi_pool *pool = rc->r->env->pool;

	if (rc->ring_timer_on) {
		ev_ref(rc->r->env->loop);
		rmsgi_timer_stop(rc->r->env->loop, &rc->ring_timer);
		rc->ring_timer_on = false;
	}
	if (rc->hdrs)
		rmsgi_pool_free(pool, rc->hdrs);
	while (rc->nold)
		rmsgi_pool_free(pool, rc->hdrs_old[--rc->nold]);
	free(rc->ring);
	rc->ring = NULL;
	rc->hdrs = NULL;
}
