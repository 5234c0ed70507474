// SPDX-License-Identifier: MIT
/*
 * teardown.c - the end of a connection (rdma.h tells the design): a
 * local close that lingers for its posted work and the peer's answers, the
 * drain of a failed one until every posted slot has retired, and the
 * timer that bounds both (and the connect). A torn-down connection goes
 * to the context's reaper, which frees it outside any dispatch that may
 * still hold it (transport.h: end of life).
 */
#include "rdma.h"

/* ------------------------------------------------------------------ */
/* teardown                                                             */

static void rc_reaped(struct rmsgi_reap *x)
{
	free(RMSGI_CONTAINER_OF(x, struct rdma_conn, reap));
}

/* fails the connection (reason < 0) or continues a drain (reason 0); the
 * endpoint goes once every posted slot has retired */
void rdma_rc_teardown(struct rdma_conn *rc, int reason)
{
	struct rdma_ctx *r = rc->r;
	struct rmsg_conn *c = rc->c;

	if (rc->buried)
		return;
	if (reason && !rc->silent)
		rmsgi_conn_ev_failed(c, reason, NULL);
	/* a close the core lets linger (the app's) waits for its posted
	 * work, and for the peer's acknowledgements of rendezvous sends it
	 * may be reading; a failure goes to the drain */
	if (!reason && rc->state == RC_UP &&
	    (rc->tail != rc->head || rmsgi_conn_awaits_peer(c)) &&
	    rc->linger_ms) {
		rc->state = RC_LINGER;
		rdma_rc_timer(rc, rc->linger_ms);
		return;
	}
	if (rc->state == RC_LINGER && !reason &&
	    (rc->tail != rc->head || rmsgi_conn_awaits_peer(c)) && rc->timer_on)
		return; /* still lingering */
	if (rc->state != RC_DRAINING && rc->state != RC_DEAD) {
		struct ibv_qp_attr qattr = {.qp_state = IBV_QPS_ERR};

		if (rc->state == RC_UP || rc->state == RC_CONNECTING ||
		    rc->state == RC_LINGER)
			rdma_disconnect(rc->id);
		rc->state = RC_DRAINING;
		if (rc->qp)
			ibv_modify_qp(rc->qp, &qattr, IBV_QP_STATE);
		/* slots filled but never posted will not complete */
		while (rc->unposted != rc->head) {
			struct sq_slot *s = ring_slot(rc, --rc->head);

			if (s->copybuf)
				rmsgi_pool_free(r->env->pool, s->copybuf);
			if (s->kind == SLOT_BIND)
				mw_bind_retired(s->mw);
			if (s->op && s->kind == SLOT_RMA)
				rma_release(r->ctx, s->op);
			if (s->op)
				rmsgi_conn_op_done(c, s->op, -ECANCELED);
			if (s->kind == SLOT_READ) {
				struct rndv_rx *rx = s->rx;

				rc->reads_out--;
				rx->status = -ECANCELED; /* never read */
				/* all its reads issued, none posted: no
				 * completion will finish it; back on
				 * pending_reads, which ends it below */
				if (--rx->reads_out == 0 &&
				    rx->seg_idx == rx->nseg) {
					rx->next_pending = rc->pending_reads;
					rc->pending_reads = rx;
					if (!rc->pending_tail)
						rc->pending_tail = rx;
				}
			}
			if (s->is_read)
				rc->reads_out--;
		}
		rdma_rc_timer(rc, TEARDOWN_MS);
	} else if (rc->state == RC_DEAD) {
		/* a rejected request: nothing was posted */
		rc->tail = rc->head;
	}
	if (rc->tail != rc->head)
		return; /* flush completions still to come */

	rc_timer_stop(rc);
	if (rc->rma_op) {
		/* posted in part: its last piece never will be */
		struct rmsgi_op *op = rc->rma_op;

		rc->rma_op = NULL;
		rma_release(r->ctx, op);
		rmsgi_conn_op_done(c, op, -ECANCELED);
	}
	while (rc->pending_reads) {
		struct rndv_rx *rx = rc->pending_reads;

		rc->pending_reads = rx->next_pending;
		if (rx->reads_out == 0) {
			rndv_rx_done(rc, rx, -ECANCELED);
		} else {
			/* the rest is never read: the last completion ends
			 * it with an error, whatever its own status */
			rx->seg_idx = rx->nseg;
			rx->status = -ECANCELED;
		}
	}
	rc->pending_tail = NULL;
	/*
	 * Every memory window bound on the QP goes before it: destroying a
	 * QP with type-2 windows still bound blocked for ~51 s on rxe (6.1).
	 * The exports end with the connection (a suspended one's stay,
	 * without windows, until the resume binds them again: rekey.c);
	 * rendezvous windows keep only their pins until their ops are
	 * released.
	 */
	rmsgi_mr_conn_gone(c);
	while (!rmsgi_list_empty(&rc->mws)) {
		struct rdma_mw *w =
			rmsgi_list_entry(rc->mws.next, struct rdma_mw, link);

		rmsgi_list_del(&w->link);
		ibv_dealloc_mw(w->mw);
		w->mw = NULL;
	}
	if (rc->qp) {
		qpn_del(r, rc);
		ibv_destroy_qp(rc->qp);
		rc->qp = NULL;
	}
	if (rc->id)
		rdma_destroy_id(rc->id);
	rc->id = NULL;
	rdma_ring_free(rc);
	if (rc->q) {
		rc->q->srq_target -= rc->granted;
		rc->granted = 0;
		rdma_rxq_put(rc->q);
		rc->q = NULL;
	}
	r->nconns--;
	rc->state = RC_DEAD;
	rc->buried = true;
	rmsgi_reap(r->env->reaper, &rc->reap, rc_reaped);
	if (rc->silent) {
		/* never reached the app: no callbacks, just free */
		rmsgi_conn_discard(c);
		return;
	}
	rmsgi_conn_ev_down(c);
}

void rdma_rc_timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct rdma_conn *rc = w->data;
	struct rdma_ctx *r = rc->r;

	rc->timer_on = false;
	ev_ref(loop);
	rdma_enter(r);
	if (rc->state == RC_LINGER) {
		rmsgi_warn(rc->r->ctx,
			   "conn %u: %u work requests still "
			   "posted after %u ms: closing anyway",
			   rc->ci->id, rc->head - rc->tail, rc->linger_ms);
		rdma_rc_teardown(rc, 0);
	} else if (rc->state == RC_DRAINING) {
		/* the device never flushed: retire by force, QP first */
		rmsgi_warn(rc->r->ctx,
			   "conn %u: %u work requests never "
			   "flushed; destroying the QP",
			   rc->ci->id, rc->head - rc->tail);
		if (rc->qp) {
			qpn_del(rc->r, rc);
			ibv_destroy_qp(rc->qp);
			rc->qp = NULL;
		}
		rc->unposted = rc->head;
		while (rc->tail != rc->head)
			rdma_rc_retire(rc, rc->tail, -ECANCELED);
		rdma_rc_teardown(rc, 0);
	} else if (rc->state != RC_UP) {
		rdma_rc_teardown(rc, -ETIMEDOUT);
	}
	rdma_leave(r);
	rmsgi_ctx_flush(r->ctx);
}

void rdma_disconnect_op(void *p, unsigned linger_ms)
{
	struct rdma_conn *rc = p;

	rc->linger_ms = linger_ms;
	rdma_rc_teardown(rc, 0);
}
