// SPDX-License-Identifier: MIT
/*
 * dev.c - the context and its device (rdma.h tells the design): the
 * rdma_cm event channel, made on first use; on the first device seen one
 * PD, one completion channel, one CQ and one SRQ, whose receive buffers
 * are carved from the registered pool as peers are granted credits; and
 * the context's end.
 */
#include <fcntl.h>

#include "rdma.h"

/* ------------------------------------------------------------------ */
/* device, SRQ                                                          */

/* adds buffers to the SRQ until it holds the target */
int rdma_srq_fill(struct rdma_ctx *r)
{
	struct ibv_recv_wr wrs[REPOST_BATCH], *bad;
	struct ibv_sge sges[REPOST_BATCH];
	uint32_t i, n;
	int ret;

	uint32_t target = r->srq_target + RX_SPARE;

	/* buffers waiting for their batched repost count as posted */
	while (r->srq_posted + r->repost_n < target) {
		if (!r->rx_free) {
			uint32_t cnt = 64, k;
			struct rxbuf *rbs;
			uint8_t *mem;
			void **chunks;

			ret = rmsgi_pool_alloc(r->env->pool, cnt * r->stride,
					       (void **)&mem);
			if (ret)
				return ret;
			rbs = calloc(cnt, sizeof(*rbs));
			chunks = realloc(r->rx_chunks,
					 (r->nchunks + 2) * sizeof(void *) * 2);
			if (!rbs || !chunks) {
				free(rbs);
				if (chunks)
					r->rx_chunks = chunks;
				rmsgi_pool_free(r->env->pool, mem);
				return -ENOMEM;
			}
			r->rx_chunks = chunks;
			r->rx_chunks[2 * r->nchunks] = mem;
			r->rx_chunks[2 * r->nchunks + 1] = rbs;
			r->nchunks++;
			for (k = 0; k < cnt; k++) {
				rbs[k].r = r;
				rbs[k].buf = mem + k * r->stride;
				rmsgi_pool_lookup(r->env->pool, rbs[k].buf,
						  r->stride, &rbs[k].lkey);
				rbs[k].next = r->rx_free;
				r->rx_free = &rbs[k];
			}
		}
		n = RMSGI_MIN(target - r->srq_posted - r->repost_n,
			      REPOST_BATCH);
		for (i = 0; i < n && r->rx_free; i++) {
			struct rxbuf *rb = r->rx_free;

			r->rx_free = rb->next;
			sges[i].addr = (uintptr_t)rb->buf;
			sges[i].length = (uint32_t)r->stride;
			sges[i].lkey = rb->lkey;
			wrs[i].wr_id = (uintptr_t)rb;
			wrs[i].sg_list = &sges[i];
			wrs[i].num_sge = 1;
			wrs[i].next = i + 1 < n ? &wrs[i + 1] : NULL;
		}
		wrs[i - 1].next = NULL;
		ret = ibv_post_srq_recv(r->srq, wrs, &bad);
		if (ret)
			return rmsgi_err_verbs(ret);
		r->srq_posted += i;
	}
	return 0;
}

uint32_t rdma_grant_op(void *p, uint32_t credits)
{
	struct rdma_conn *rc = p;
	struct rdma_ctx *r = rc->r;
	uint32_t more, room;

	if (rc->state == RC_DEAD || rc->buried)
		return credits < rc->granted ? credits : rc->granted;
	if (credits <= rc->granted) {
		/* the peer can no longer use them: the SRQ target drops,
		 * and the buffers go unposted as they come back (recv.c) */
		r->srq_target -= rc->granted - credits;
		rc->granted = credits;
		return credits;
	}
	room = r->srq_target + RX_SPARE < r->srq_max
		       ? r->srq_max - RX_SPARE - r->srq_target
		       : 0;
	more = RMSGI_MIN(credits - rc->granted, room);
	if (!more)
		return rc->granted;
	r->srq_target += more;
	rc->granted += more;
	if (rdma_srq_fill(r)) {
		/* out of registered memory: what was posted stays as
		 * spare, the grant does not grow */
		r->srq_target -= more;
		rc->granted -= more;
	}
	return rc->granted;
}

int rdma_dev_open(struct rdma_ctx *r, struct ibv_context *verbs)
{
	struct ibv_device_attr attr;
	struct ibv_port_attr pattr;
	struct ibv_srq_init_attr sattr;
	int ret, cqe;

	if (r->verbs) {
		if (r->verbs == verbs)
			return 0;
		rmsgi_err(r->ctx,
			  "a context uses one RDMA device; %s is a "
			  "second one",
			  ibv_get_device_name(verbs->device));
		return -ENODEV;
	}
	ret = ibv_query_device(verbs, &attr);
	if (ret)
		return rmsgi_err_verbs(ret);
	r->max_msg_sz = 1u << 30;
	if (ibv_query_port(verbs, 1, &pattr) == 0 && pattr.max_msg_sz)
		r->max_msg_sz = pattr.max_msg_sz;
	/* work requests are split at this size: their lengths stay well
	 * inside an SGE's u32 */
	if (r->max_msg_sz > SEG_MAX)
		r->max_msg_sz = SEG_MAX;
	r->rd_atom = (uint32_t)RMSGI_MIN(attr.max_qp_rd_atom, RD_ATOM_MAX);
	r->mw_ok = attr.device_cap_flags & (IBV_DEVICE_MEM_WINDOW_TYPE_2A |
					    IBV_DEVICE_MEM_WINDOW_TYPE_2B);
	if (r->rd_atom == 0)
		r->rd_atom = 1;
	r->pd = ibv_alloc_pd(verbs);
	if (!r->pd)
		return -ENOMEM;
	r->cch = ibv_create_comp_channel(verbs);
	if (!r->cch) {
		ret = -errno;
		goto undo_pd;
	}
	fcntl(r->cch->fd, F_SETFL, fcntl(r->cch->fd, F_GETFL) | O_NONBLOCK);
	cqe = RMSGI_MIN(attr.max_cqe, 32767);
	r->cq = ibv_create_cq(verbs, cqe, r, r->cch, 0);
	if (!r->cq) {
		ret = errno ? -errno : -ENOMEM;
		goto undo_cch;
	}
	memset(&sattr, 0, sizeof(sattr));
	r->srq_max = (uint32_t)RMSGI_MIN(attr.max_srq_wr, 16384);
	sattr.attr.max_wr = r->srq_max;
	sattr.attr.max_sge = 1;
	r->srq = ibv_create_srq(r->pd, &sattr);
	if (!r->srq) {
		ret = errno ? -errno : -ENOMEM;
		goto undo_cq;
	}
	r->srq_max = sattr.attr.max_wr;
	r->pd->context = verbs;
	ret = rmsgi_pool_set_reg(r->env->pool, &rdma_pool_reg_ops, r);
	if (ret)
		goto undo_srq;
	ret = rmsgi_err_verbs(ibv_req_notify_cq(r->cq, 0));
	if (ret)
		goto undo_reg;
	r->verbs = verbs;
	rmsgi_mr_set_reg(r->ctx, &rdma_mr_reg_ops, r);
	ev_io_init(&r->cq_io, rdma_cq_cb, r->cch->fd, EV_READ);
	r->cq_io.data = r;
	ev_io_start(r->env->loop, &r->cq_io);
	ev_unref(r->env->loop);
	rmsgi_timers_touch(r->env->timers);
	rmsgi_info(r->ctx,
		   "RDMA device %s: max_msg_sz %llu, rd_atom %u, type-2 "
		   "memory windows %s",
		   ibv_get_device_name(verbs->device),
		   (unsigned long long)r->max_msg_sz, r->rd_atom,
		   r->mw_ok ? "yes" : "no (per-connection export refused)");
	return 0;

undo_reg:
	rmsgi_pool_clear_reg(r->env->pool);
undo_srq:
	ibv_destroy_srq(r->srq);
	r->srq = NULL;
undo_cq:
	ibv_destroy_cq(r->cq);
	r->cq = NULL;
undo_cch:
	ibv_destroy_comp_channel(r->cch);
	r->cch = NULL;
undo_pd:
	ibv_dealloc_pd(r->pd);
	r->pd = NULL;
	return ret;
}

int rdma_ctx_get(struct rmsg_ctx *ctx, struct rdma_ctx **r_p)
{
	void **slot = rmsgi_ctx_tr_slot(ctx, RMSGI_TR_RDMA);
	struct rdma_ctx *r = *slot;

	if (r) {
		*r_p = r;
		return 0;
	}
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->ctx = ctx;
	r->env = rmsgi_ctx_env(ctx);
	rmsgi_list_init(&r->rq);
	rmsgi_list_init(&r->listeners);
	r->ech = rdma_create_event_channel();
	if (!r->ech) {
		int err = errno ? -errno : -ENODEV;

		free(r);
		/* no /dev/infiniband/rdma_cm: this host has no RDMA stack */
		return err == -ENOENT || err == -ENXIO ? -ENODEV : err;
	}
	fcntl(r->ech->fd, F_SETFL, fcntl(r->ech->fd, F_GETFL) | O_NONBLOCK);
	r->eager = r->env->cfg->eager_size;
	r->stride = RMSGI_ALIGN(RMSGI_HDR_SIZE + r->eager, 64);
	ev_io_init(&r->cm_io, rdma_cm_cb, r->ech->fd, EV_READ);
	r->cm_io.data = r;
	ev_io_start(r->env->loop, &r->cm_io);
	ev_unref(r->env->loop);
	rmsgi_timers_touch(r->env->timers);
	*slot = r;
	*r_p = r;
	return 0;
}

/* ------------------------------------------------------------------ */
/* the context's end                                                    */

void rdma_ctx_fini(void *p)
{
	struct rdma_ctx *r = p;
	struct ev_loop *loop = r->env->loop;
	uint32_t i;
	int spins;

	/* conns were told to close: give the device a moment to flush */
	for (spins = 0; r->nconns && spins < 100000; spins++)
		if (r->cq)
			rdma_cq_drain(r);
	for (i = 0; i < QPN_BUCKETS; i++) {
		while (r->qpn_hash[i]) {
			struct rdma_conn *rc = r->qpn_hash[i];

			qpn_del(r, rc);
			rdma_destroy_qp(rc->id);
			rc->qp = NULL;
			rc->unposted = rc->head;
			while (rc->tail != rc->head)
				rdma_rc_retire(rc, rc->tail, -ECANCELED);
			rdma_rc_teardown(rc, 0);
		}
	}
	/* buffers released since the last batch hold their connections
	 * until reposted, and the shared receive queue goes now: let the
	 * connections go (the last drain above may have left some) */
	while (r->repost) {
		struct rxbuf *rb = r->repost;

		r->repost = rb->next;
		r->repost_n--;
		if (rb->m.conn) {
			rmsgi_conn_put(rb->m.conn);
			rb->m.conn = NULL;
		}
	}
	if (r->verbs) {
		ev_ref(loop);
		ev_io_stop(loop, &r->cq_io);
		if (r->cq_events)
			ibv_ack_cq_events(r->cq, r->cq_events);
		ibv_destroy_srq(r->srq);
		ibv_destroy_cq(r->cq);
		ibv_destroy_comp_channel(r->cch);
	}
	bury(r);
	for (i = 0; i < r->nchunks; i++) {
		rmsgi_pool_free(r->env->pool, r->rx_chunks[2 * i]);
		free(r->rx_chunks[2 * i + 1]);
	}
	free(r->rx_chunks);
	rmsgi_pool_clear_reg(r->env->pool);
	rmsgi_mr_clear_reg(r->ctx);
	if (r->pd)
		ibv_dealloc_pd(r->pd);
	ev_ref(loop);
	ev_io_stop(loop, &r->cm_io);
	rdma_destroy_event_channel(r->ech);
	rdma_rndv_quarantine_clear(r);
	*rmsgi_ctx_tr_slot(r->ctx, RMSGI_TR_RDMA) = NULL;
	free(r);
}
