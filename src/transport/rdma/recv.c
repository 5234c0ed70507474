// SPDX-License-Identifier: MIT
/*
 * recv.c - receiving (rdma.h tells the design): the CQ drain, which
 * handles receives here and hands send completions to the ring (send.c);
 * eager frames; released receive buffers reposted to the SRQ in batches,
 * or kept (and whole chunks of kept ones given back to the pool); and
 * rendezvous receives: the reads of the peer's segments, bounded by
 * the connection's share of registered memory, and the quarantine of
 * freed messages.
 */
#include <arpa/inet.h>

#include "rdma.h"

/* ------------------------------------------------------------------ */
/* receive buffers                                                      */

/* the buffer's credit goes back to its connection (or the grant shrinks
 * by it: conn.c decides) */
static void rx_credit_back(struct rxbuf *rb)
{
	struct rmsg_conn *c = rb->m.conn;

	if (c) {
		rb->m.conn = NULL;
		rmsgi_conn_credit_freed(c, rb->m.wcost);
		rmsgi_conn_put(c);
	}
}

/* rdma_ctx.rx_free, counting each chunk's buffers in it */
void rx_free_push(struct rdma_ctx *r, struct rxbuf *rb)
{
	rb->next = r->rx_free;
	r->rx_free = rb;
	if (++rb->ch->nfree == rb->ch->cnt)
		r->rx_idle++;
}

struct rxbuf *rx_free_pop(struct rdma_ctx *r)
{
	struct rxbuf *rb = r->rx_free;

	r->rx_free = rb->next;
	if (rb->ch->nfree-- == rb->ch->cnt)
		r->rx_idle--;
	rb->ch->cold = false;
	return rb;
}

#define RX_SWEEP_S 1.0

/* the idle chunks' memory but one's (the next growth takes that one)
 * goes back to the pool, which unregisters each at once
 * (rmsgi_pool_alloc_own); their descriptors wait for the next carve,
 * so that a message object stays one until its buffer went round again
 * (rmsg_msg_data.3: a second release of it is ignored).
 * From rdma_poll, outside the drain, at most once per RX_SWEEP_S: it
 * costs a deregistration per chunk */
static void rdma_rx_sweep(struct rdma_ctx *r)
{
	ev_tstamp now = ev_now(r->env->loop);
	struct rxbuf **pp = &r->rx_free;
	uint32_t i, j, dying = 0;
	bool kept = false;

	if (r->rx_idle < 2 || now < r->sweep_next)
		return;
	/* a chunk goes once idle at two looks RX_SWEEP_S apart: grants
	 * that come and go within that do not register memory again */
	r->sweep_next = now + RX_SWEEP_S;
	for (i = 0; i < r->nchunks; i++) {
		struct rx_chunk *ch = r->rx_chunks[2 * i + 1];

		if (ch->nfree != ch->cnt)
			continue;
		if (!kept) {
			kept = true;
		} else if (ch->cold) {
			ch->dying = true;
			dying++;
		} else {
			ch->cold = true;
		}
	}
	if (!dying)
		return;
	while (*pp) {
		if ((*pp)->ch->dying)
			*pp = (*pp)->next;
		else
			pp = &(*pp)->next;
	}
	for (i = j = 0; i < r->nchunks; i++) {
		struct rx_chunk *ch = r->rx_chunks[2 * i + 1];

		if (ch->dying) {
			rmsgi_pool_free(r->env->pool, r->rx_chunks[2 * i]);
			ch->dying = false;
			ch->next = r->rx_spare;
			r->rx_spare = ch;
			continue;
		}
		r->rx_chunks[2 * j] = r->rx_chunks[2 * i];
		r->rx_chunks[2 * j + 1] = ch;
		j++;
	}
	rmsgi_tr_dbg(r->env, "%u chunks of receive buffers back to the pool",
		     r->nchunks - j);
	r->nchunks = j;
	r->rx_idle -= dying;
}

/* reposts the group's released receive buffers and returns their
 * credits; those beyond its target (grants shrank, or held messages made
 * the SRQ grow) are kept unposted */
static void rxq_repost(struct rdma_ctx *r, struct rdma_rxq *q)
{
	struct ibv_recv_wr wrs[REPOST_BATCH], *bad;
	struct ibv_sge sges[REPOST_BATCH];
	struct rxbuf *done[REPOST_BATCH];
	uint32_t i, n;
	int ret;

	while (q->repost) {
		for (n = 0; n < REPOST_BATCH && q->repost;) {
			struct rxbuf *rb = q->repost;

			q->repost = rb->next;
			q->repost_n--;
			if (q->srq_posted + n + q->repost_n >=
			    q->srq_target + RX_SPARE) {
				rx_free_push(r, rb);
				rx_credit_back(rb);
				continue;
			}
			done[n] = rb;
			sges[n].addr = (uintptr_t)rb->buf;
			sges[n].length = (uint32_t)r->stride;
			sges[n].lkey = rb->lkey;
			wrs[n].wr_id = (uintptr_t)rb;
			wrs[n].sg_list = &sges[n];
			wrs[n].num_sge = 1;
			wrs[n].next = &wrs[n + 1];
			n++;
		}
		if (!n)
			continue;
		wrs[n - 1].next = NULL;
		bad = NULL;
		ret = ibv_post_srq_recv(q->srq, wrs, &bad);
		if (ret) {
			/* those before @bad were posted: they count */
			uint32_t k = bad >= wrs && bad < wrs + n
					     ? (uint32_t)(bad - wrs)
					     : 0;

			rmsgi_err(r->ctx, "SRQ repost failed: %s",
				  rmsg_strerror(rmsgi_err_verbs(ret)));
			q->srq_posted += k;
			for (i = 0; i < k; i++)
				rx_credit_back(done[i]);
			for (i = k; i < n; i++) {
				rx_free_push(r, done[i]);
				if (done[i]->m.conn)
					rmsgi_conn_put(done[i]->m.conn);
			}
			continue;
		}
		q->srq_posted += n;
		for (i = 0; i < n; i++)
			rx_credit_back(done[i]);
	}
}

/* every group's released buffers */
static void rx_repost(struct rdma_ctx *r)
{
	uint32_t i;

	for (i = 0; i < r->nq; i++)
		if (r->q[i]->repost)
			rxq_repost(r, r->q[i]);
}

/* are released buffers waiting in any group? */
static bool rx_repost_due(const struct rdma_ctx *r)
{
	uint32_t i;

	for (i = 0; i < r->nq; i++)
		if (r->q[i]->repost)
			return true;
	return false;
}

/* an eager receive is back (rmsgi_conn_rx() done with it, or its
 * free_fn): batch the repost, which returns its credit */
static void rxbuf_release(struct rmsg_msg *m)
{
	struct rxbuf *rb = RMSGI_CONTAINER_OF(m, struct rxbuf, m);
	struct rdma_rxq *q = rb->q;

	if (!q->srq) {
		/* its device was removed (dev.c): never used again */
		rx_credit_back(rb);
		return;
	}
	rb->next = q->repost;
	q->repost = rb;
	if (++q->repost_n >= REPOST_BATCH)
		rxq_repost(rb->r, q);
}

/* ------------------------------------------------------------------ */
/* rendezvous receive                                                   */

static void rndv_rx_free(struct rmsg_msg *m)
{
	struct rndv_rx *rx = RMSGI_CONTAINER_OF(m, struct rndv_rx, m);
	struct rdma_ctx *r = rx->r;
	struct rmsgi_quar_ent *e;

	if (rx->req)
		rxbuf_release(&rx->req->m);
	rx->req = NULL;
	rmsgi_pool_free(r->env->pool, rx->buf);
	rx->buf = NULL;
	/* the object waits in the quarantine: an app that releases a held
	 * message twice hits a message that is not held (msg.c), not freed
	 * memory or another message */
	rmsgi_quar_put(&r->rq, &rx->q, 1);
	while ((e = rmsgi_quar_over(&r->rq)))
		free(RMSGI_CONTAINER_OF(e, struct rndv_rx, q));
}

void rdma_rndv_quarantine_clear(struct rdma_ctx *r)
{
	struct rmsgi_quar_ent *e;

	while ((e = rmsgi_quar_drain(&r->rq)))
		free(RMSGI_CONTAINER_OF(e, struct rndv_rx, q));
}

/*
 * What one connection may read into at a time: its share of the
 * context's registered-memory budget, reg_limit / (connections + 1), so
 * that a peer announcing large messages leaves room for every other
 * connection and one more; never less than its eager buffers.
 */
static uint64_t rndv_share(const struct rdma_conn *rc)
{
	const struct rdma_ctx *r = rc->r;
	uint64_t share = r->env->cfg->reg_limit / ((uint64_t)r->nconns + 1);
	uint64_t floor = (uint64_t)r->stride * rc->granted;

	return RMSGI_MAX(share, floor);
}

/*
 * The largest message a connection may ever read: with nothing else being
 * read on it, one message up to the share of a single connection
 * (reg_limit / 2), however many others (idle ones included) are open.
 */
static uint64_t rndv_alone(const struct rdma_conn *rc)
{
	uint64_t alone = rc->r->env->cfg->reg_limit / 2;
	uint64_t floor = (uint64_t)rc->r->stride * rc->granted;

	return RMSGI_MAX(alone, floor);
}

/*
 * Gives the next pending receive its buffer: 0 when it has one, 1 when
 * it must wait for the reads before it (the share is taken), or -ENOMEM
 * when it can have none (larger than rndv_alone(), or no memory).
 */
static int rndv_rx_alloc(struct rdma_conn *rc, struct rndv_rx *rx)
{
	struct rmsg_ctx *ctx = rc->r->ctx;
	uint64_t share = rndv_share(rc), alone = rndv_alone(rc);
	uint64_t len = rx->m.len;
	int ret;

	if (len > alone) {
		rmsgi_warn(ctx,
			   "conn %u: the peer's rendezvous of %llu bytes is "
			   "larger than one connection may read of the "
			   "registered-memory budget (%llu bytes): refused",
			   rc->ci->id, (unsigned long long)len,
			   (unsigned long long)alone);
		return -ENOMEM;
	}
	/* with nothing being read, one message up to alone may start;
	 * beside others, the reads stay within the share */
	if (rc->rndv_bytes && rc->rndv_bytes + len > share)
		return 1;
	ret = rmsgi_pool_alloc(rc->r->env->pool, len, (void **)&rx->buf);
	if (ret)
		return -ENOMEM;
	rmsgi_pool_lookup(rc->r->env->pool, rx->buf, len, &rx->lkey);
	rx->m.data = rx->buf;
	rx->charged = true;
	rc->rndv_bytes += len;
	/* reading: the request's buffer (the peer's credit) goes back */
	rxbuf_release(&rx->req->m);
	rx->req = NULL;
	return 0;
}

/* posts reads for pending rendezvous receives while room lasts */
static void rc_post_reads(struct rdma_conn *rc)
{
	struct rdma_ctx *r = rc->r;
	bool any = false;

	while (rc->pending_reads && rc->state == RC_UP) {
		struct rndv_rx *rx = rc->pending_reads;
		struct rmsgi_seg *seg = &rx->segs[rx->seg_idx];
		uint64_t chunk;
		struct sq_slot *s;
		int ret;

		if (ring_used(rc) >= SQ_MAX_WR || rc->reads_out >= r->rd_atom ||
		    !ring_fits(rc, 1))
			break;
		if (!rx->buf) {
			ret = rndv_rx_alloc(rc, rx);
			if (ret > 0)
				break; /* waits for the reads before it */
			if (ret < 0) {
				/* only this message fails: the ACK tells the
				 * sender, the messages behind it go on */
				rc->pending_reads = rx->next_pending;
				if (!rc->pending_reads)
					rc->pending_tail = NULL;
				rndv_rx_done(rc, rx, ret);
				continue;
			}
		}
		/* 1 MiB reads: small frames posted behind them (credits,
		 * probe answers) wait for at most a few of them */
		chunk = RMSGI_MIN(seg->len - rx->seg_off,
				  RMSGI_MIN(r->max_msg_sz, (uint64_t)1 << 20));
		s = slot_fill(rc, SLOT_READ);
		s->rx = rx;
		s->wr.opcode = IBV_WR_RDMA_READ;
		s->wr.num_sge = 1;
		s->sge[0].addr = (uintptr_t)(rx->buf + rx->dst_off);
		s->sge[0].length = (uint32_t)chunk;
		rndv_canary_set(r, rx->buf + rx->dst_off, (uint32_t)chunk);
		s->sge[0].lkey = rx->lkey;
		s->wr.wr.rdma.remote_addr = seg->addr + rx->seg_off;
		s->wr.wr.rdma.rkey = seg->rkey;
		rx->reads_out++;
		rc->reads_out++;
		rx->dst_off += chunk;
		rx->seg_off += chunk;
		if (rx->seg_off == seg->len) {
			rx->seg_idx++;
			rx->seg_off = 0;
		}
		if (rx->seg_idx == rx->nseg) {
			rc->pending_reads = rx->next_pending;
			if (!rc->pending_reads)
				rc->pending_tail = NULL;
		}
		any = true;
	}
	/* a refused message's callbacks may have closed the connection */
	if (any && rc->state == RC_UP)
		rdma_kick(rc);
}

/*
 * A rendezvous request (in @rb) arrived: queued behind the ones before
 * it; its buffer comes when its turn and the connection's share allow
 * (rc_post_reads). The request's receive buffer is kept until then, so
 * the requests a peer can have waiting are bounded by its credits.
 * Takes @rb in every case.
 */
static int rndv_rx_start(struct rdma_conn *rc, const struct rmsgi_hdr *h,
			 struct rxbuf *rb, const uint8_t *payload, size_t plen)
{
	struct rmsg_conn *c = rc->c;
	struct rndv_rx *rx;
	uint32_t i, nseg;
	uint64_t sum = 0;

	if (plen == 0 || plen % RMSGI_SEG_SIZE || h->len <= 0)
		goto proto;
	nseg = (uint32_t)(plen / RMSGI_SEG_SIZE);
	rx = calloc(1, sizeof(*rx) + nseg * sizeof(rx->segs[0]));
	if (!rx) {
		rxbuf_release(&rb->m);
		return -ENOMEM;
	}
	for (i = 0; i < nseg; i++) {
		rmsgi_seg_decode(payload + i * RMSGI_SEG_SIZE, &rx->segs[i]);
		if (rx->segs[i].len == 0)
			break;
		sum += rx->segs[i].len;
	}
	if (i < nseg || sum != h->len) {
		free(rx);
		goto proto;
	}
	rx->r = rc->r;
	rx->nseg = nseg;
	rx->req = rb;
	rmsgi_msg_init(&rx->m, c, NULL, h->len);
	rx->m.ready = 0;
	rx->m.free_fn = rndv_rx_free;
	if (rmsgi_conn_rx(c, h, &rx->m) != RMSGI_RX_KEPT) {
		/* refused (the conn is closing): back at once */
		rndv_rx_free(&rx->m);
		return 0;
	}
	if (rc->pending_tail)
		rc->pending_tail->next_pending = rx;
	else
		rc->pending_reads = rx;
	rc->pending_tail = rx;
	rc_post_reads(rc);
	return 0;

proto:
	rxbuf_release(&rb->m);
	return -EPROTO;
}

/* ------------------------------------------------------------------ */
/* completions                                                          */

static void on_recv(struct rdma_ctx *r, struct ibv_wc *wc)
{
	struct rxbuf *rb = (struct rxbuf *)(uintptr_t)wc->wr_id;
	struct rdma_conn *rc = qpn_find(r, wc->qp_num);
	struct rmsgi_hdr h;
	int ret;

	rmsgi_tr_dbg(r->env, "recv qpn %u status %d len %u conn %u", wc->qp_num,
		     wc->status, wc->byte_len, rc ? rc->ci->id : 0);
	rb->q->srq_posted--;
	rmsgi_msg_init(&rb->m, NULL, NULL, 0);
	rb->m.free_fn = rxbuf_release;
	/* (a server's RC_CONNECTING: the app accepted it) */
	if (rc && rc->state == RC_CONNECTING && rc->is_server &&
	    wc->status == IBV_WC_SUCCESS) {
		/* the peer's first frame can beat RDMA_CM_EVENT_ESTABLISHED:
		 * the connection is up, the event will only confirm it */
		rc_timer_stop(rc);
		rdma_rc_up(rc);
		rmsgi_conn_ev_established(rc->c, NULL);
	}
	/* a local close lingers for the acknowledgements of its rendezvous
	 * sends: frames still count then (the rest is dropped by conn.c) */
	if (wc->status != IBV_WC_SUCCESS || !rc ||
	    (rc->state != RC_UP && rc->state != RC_LINGER)) {
		rxbuf_release(&rb->m);
		if (rc && wc->status != IBV_WC_SUCCESS &&
		    wc->status != IBV_WC_WR_FLUSH_ERR) {
			rmsgi_warn(r->ctx, "conn %u: receive failed: %s",
				   rc->ci->id, ibv_wc_status_str(wc->status));
			rmsgi_conn_why(rc->c, "an RDMA receive failed: %s",
				       ibv_wc_status_str(wc->status));
			rdma_rc_teardown(rc, rmsgi_err_wc(wc->status));
		}
		return;
	}
	/* the buffer carries one of this conn's credits until reposted */
	rb->m.conn = rc->c;
	rmsgi_conn_get(rc->c);
	if (wc->opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
		/* the peer's write-with-immediate: nothing is in the buffer */
		memset(&h, 0, sizeof(h));
		h.type = RMSGI_T_IMM;
		h.aux = ntohl(wc->imm_data);
		h.id = wc->byte_len;
		if (rmsgi_conn_rx(rc->c, &h, &rb->m) != RMSGI_RX_KEPT)
			rxbuf_release(&rb->m);
		return;
	}
	/* DATA fits the buffer (byte_len checks it); RNDV_REQ announces up
	 * to the configured maximum */
	ret = rmsgi_hdr_decode(rb->buf, wc->byte_len, rc->ci->cfg->max_msg_size,
			       &h);
	/* DATA, PACK and AUTH carry their payload in the buffer */
	if (ret == 0 &&
	    (h.type == RMSGI_T_DATA || h.type == RMSGI_T_PACK ||
	     h.type == RMSGI_T_AUTH) &&
	    h.len != wc->byte_len - RMSGI_HDR_SIZE)
		ret = -EPROTO;
	if (ret == 0 && !rmsgi_tr_frame_ok(RDMA_CAPS, h.type))
		ret = -EPROTO;
	if (ret == 0 && h.type != RMSGI_T_DATA && h.type != RMSGI_T_RNDV_REQ &&
	    h.type != RMSGI_T_AUTH && h.type != RMSGI_T_PACK &&
	    wc->byte_len != RMSGI_HDR_SIZE)
		ret = -EPROTO;
	/* the device never completes more than the buffer; trust nothing */
	if (ret == 0 && wc->byte_len > r->stride)
		ret = -EPROTO;
	/* an IMM frame's length is only the peer's word for what it wrote
	 * (a split write-with-immediate): one write reaches one export, so
	 * no more than the largest this peer was granted to write */
	if (ret == 0 && h.type == RMSGI_T_IMM &&
	    h.id > rmsgi_mr_conn_max_len(rc->c, RMSG_ACCESS_REMOTE_WRITE)) {
		rmsgi_warn(r->ctx,
			   "conn %u: the peer claims a write of %llu bytes, "
			   "more than any export it may write: closing",
			   rc->ci->id, (unsigned long long)h.id);
		ret = -EPROTO;
	}
	if (ret == 0 && h.type == RMSGI_T_RNDV_REQ && rc->state == RC_LINGER) {
		rxbuf_release(&rb->m); /* closing: not worth reading */
		return;
	}
	if (ret == 0 && h.type == RMSGI_T_RNDV_REQ) {
		/* the request frame is consumed here; its buffer goes back
		 * when its reads start */
		ret = rndv_rx_start(rc, &h, rb, rb->buf + RMSGI_HDR_SIZE,
				    wc->byte_len - RMSGI_HDR_SIZE);
		if (ret)
			rmsgi_conn_abort(rc->c, ret);
		return;
	}
	if (ret) {
		rxbuf_release(&rb->m);
		rmsgi_conn_abort(rc->c, ret);
		return;
	}
	rb->m.data = rb->buf + RMSGI_HDR_SIZE;
	rb->m.len = h.len;
	if (rmsgi_conn_rx(rc->c, &h, &rb->m) != RMSGI_RX_KEPT)
		rxbuf_release(&rb->m);
	/* lingering: that may have been the last acknowledgement */
	if (rc->state == RC_LINGER && rc->tail == rc->head &&
	    !rmsgi_conn_awaits_peer(rc->c))
		rdma_rc_teardown(rc, 0);
}

/* polls one group's CQ empty */
static int rxq_drain(struct rdma_ctx *r, struct rdma_rxq *q)
{
	struct ibv_wc wcs[32];
	int n, i, total = 0;

	while ((n = ibv_poll_cq(q->cq, 32, wcs)) > 0) {
		for (i = 0; i < n; i++) {
			struct ibv_wc *wc = &wcs[i];
			struct rdma_conn *rc;

			if (!(wc->wr_id & SEND_TAG)) {
				on_recv(r, wc);
				continue;
			}
			rc = qpn_find(r, wc->qp_num);
			rmsgi_tr_dbg(r->env, "send wc qpn %u slot %u status %d",
				     wc->qp_num, (uint32_t)wc->wr_id,
				     wc->status);
			if (!rc)
				continue;
			rdma_rc_retire(rc, (uint32_t)wc->wr_id,
				       rmsgi_err_wc(wc->status));
			if (wc->status != IBV_WC_SUCCESS &&
			    wc->status != IBV_WC_WR_FLUSH_ERR) {
				rmsgi_warn(r->ctx,
					   "conn %u: work completion "
					   "error: %s",
					   rc->ci->id,
					   ibv_wc_status_str(wc->status));
				/* a dead peer: the device's retries ran out */
				rmsgi_conn_why(rc->c,
					       "an RDMA send, write or read "
					       "failed: %s",
					       ibv_wc_status_str(wc->status));
				rdma_rc_teardown(rc, rmsgi_err_wc(wc->status));
			} else if ((rc->state == RC_DRAINING ||
				    rc->state == RC_LINGER) &&
				   rc->tail == rc->head) {
				rdma_rc_teardown(rc, 0);
			} else {
				if (rc->pending_reads)
					rc_post_reads(rc);
				if (rc->rma_op) {
					rdma_rc_post_rma(rc);
					rdma_kick(rc);
				}
			}
		}
		total += n;
	}
	return total;
}

int rdma_cq_drain(struct rdma_ctx *r)
{
	uint32_t i;
	int total = 0;

	/* (a group made by a callback during the drain is polled next
	 * time: nothing is posted on it yet) */
	for (i = 0; i < r->nq; i++)
		total += rxq_drain(r, r->q[i]);
	return total;
}

int rdma_poll(void *p, bool arm)
{
	struct rdma_ctx *r = p;
	int n;

	if (!r->nq)
		return 0;
	rdma_enter(r);
	/* released receive buffers go back when the CQ is found empty (off
	 * the critical path: while waiting for the peer) or by the batch
	 * (rxbuf_release) */
	/* released receive buffers go back before the loop sleeps; while
	 * it spins (busy poll), only when the CQ is found empty, off the
	 * critical path. (Reposting after the drain before sleeping too
	 * made event-mode round trips 2.4x slower on rxe, measured.) */
	if (arm && rx_repost_due(r))
		rx_repost(r);
	n = rdma_cq_drain(r);
	if (!arm && n == 0 && rx_repost_due(r))
		rx_repost(r);
	if (arm) {
		uint32_t i;

		for (i = 0; i < r->nq; i++)
			ibv_req_notify_cq(r->q[i]->cq, 0);
		n += rdma_cq_drain(r);
	}
	/* buffers kept unposted fill whole chunks: back to the pool, here
	 * where no receive buffer is in anyone's hands (a buffer is kept
	 * only inside rxq_repost, which reads it once more) */
	if (RMSGI_UNLIKELY(r->rx_idle > 1))
		rdma_rx_sweep(r);
	rdma_leave(r);
	return n;
}

void rdma_cq_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct rdma_ctx *r = w->data;
	struct ibv_cq *cq;
	void *cq_ctx;

	rdma_enter(r);
	/* each CQ's context is its group; a notified CQ is re-armed
	 * before every CQ is polled */
	while (ibv_get_cq_event(r->cch, &cq, &cq_ctx) == 0) {
		struct rdma_rxq *q = cq_ctx;

		if (++q->cq_events >= 64) {
			ibv_ack_cq_events(q->cq, q->cq_events);
			q->cq_events = 0;
		}
		ibv_req_notify_cq(q->cq, 0);
	}
	rdma_cq_drain(r);
	rdma_leave(r);
	rmsgi_ctx_flush(r->ctx);
}
