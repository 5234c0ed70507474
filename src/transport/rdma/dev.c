// SPDX-License-Identifier: MIT
/*
 * dev.c - the context and its device (rdma.h tells the design): the
 * rdma_cm event channel, made on first use; on the first device seen one
 * PD and one completion channel; receive groups (a CQ and an SRQ each,
 * made as connections need them), whose receive buffers are carved from
 * the registered pool as peers are granted credits; a device that is
 * removed, let go of; and the context's end.
 */
#include <fcntl.h>
#include <stdio.h>
#include <sys/random.h>

#include "rdma.h"

static void lost_cb(struct ev_loop *loop, ev_timer *w, int revents);
static void relisten_cb(struct ev_loop *loop, ev_timer *w, int revents);

/* ------------------------------------------------------------------ */
/* device, SRQ                                                          */

/* receive buffers carved at a time, from a slab of their own (so that a
 * chunk whose buffers are all kept goes back: rdma_rx_sweep): at least
 * 64, as many as fill the power-of-two size that 64 would take (64 x
 * 8256 bytes would take 1 MiB and leave 47% of it unused) */
static uint32_t rx_chunk_count(const struct rdma_ctx *r)
{
	size_t want = 64 * r->stride, cls = 64;

	if (want > ((size_t)2 << 20)) /* beyond the classes: exact */
		return 64;
	while (cls < want)
		cls <<= 1;
	return (uint32_t)(cls / r->stride);
}

/* a chunk's descriptor: one whose memory went (rx_spare), cleared, or
 * a new one */
static struct rx_chunk *rx_chunk_new(struct rdma_ctx *r, uint32_t cnt)
{
	size_t sz = sizeof(struct rx_chunk) + cnt * sizeof(struct rxbuf);
	struct rx_chunk *ch;

	while ((ch = r->rx_spare)) {
		r->rx_spare = ch->next;
		if (ch->cnt == cnt) {
			memset(ch, 0, sz);
			return ch;
		}
		free(ch);
	}
	return calloc(1, sz);
}

/* adds buffers to the group's SRQ until it holds its target */
int rdma_srq_fill(struct rdma_ctx *r, struct rdma_rxq *q)
{
	struct ibv_recv_wr wrs[REPOST_BATCH], *bad;
	struct ibv_sge sges[REPOST_BATCH];
	uint32_t i, n;
	int ret;

	uint32_t target = q->srq_target + RX_SPARE;

	/* buffers waiting for their batched repost count as posted */
	while (q->srq_posted + q->repost_n < target) {
		if (!r->rx_free) {
			uint32_t cnt = rx_chunk_count(r), k;
			struct rx_chunk *ch;
			uint8_t *mem;
			void **chunks;

			ret = rmsgi_pool_alloc_own(
				r->env->pool, cnt * r->stride, (void **)&mem);
			if (ret)
				return ret;
			ch = rx_chunk_new(r, cnt);
			chunks = realloc(r->rx_chunks,
					 (r->nchunks + 2) * sizeof(void *) * 2);
			if (!ch || !chunks) {
				free(ch);
				if (chunks)
					r->rx_chunks = chunks;
				rmsgi_pool_free(r->env->pool, mem);
				return -ENOMEM;
			}
			ch->cnt = cnt;
			r->rx_chunks = chunks;
			r->rx_chunks[2 * r->nchunks] = mem;
			r->rx_chunks[2 * r->nchunks + 1] = ch;
			r->nchunks++;
			for (k = 0; k < cnt; k++) {
				struct rxbuf *rb = &ch->rbs[k];

				rb->r = r;
				rb->ch = ch;
				rb->buf = mem + k * r->stride;
				rmsgi_pool_lookup(r->env->pool, rb->buf,
						  r->stride, &rb->lkey);
				rx_free_push(r, rb);
			}
		}
		n = RMSGI_MIN(target - q->srq_posted - q->repost_n,
			      REPOST_BATCH);
		for (i = 0; i < n && r->rx_free; i++) {
			struct rxbuf *rb = rx_free_pop(r);

			rb->q = q;
			sges[i].addr = (uintptr_t)rb->buf;
			sges[i].length = (uint32_t)r->stride;
			sges[i].lkey = rb->lkey;
			wrs[i].wr_id = (uintptr_t)rb;
			wrs[i].sg_list = &sges[i];
			wrs[i].num_sge = 1;
			wrs[i].next = i + 1 < n ? &wrs[i + 1] : NULL;
		}
		wrs[i - 1].next = NULL;
		bad = NULL;
		ret = ibv_post_srq_recv(q->srq, wrs, &bad);
		if (ret) {
			/* those before @bad were posted; the others are
			 * kept again */
			n = bad >= wrs && bad < wrs + i ? (uint32_t)(bad - wrs)
							: 0;
			q->srq_posted += n;
			while (n < i)
				rx_free_push(r,
					     (struct rxbuf *)(uintptr_t)wrs[n++]
						     .wr_id);
			return rmsgi_err_verbs(ret);
		}
		q->srq_posted += i;
	}
	return 0;
}

uint32_t rdma_grant_op(void *p, uint32_t credits)
{
	struct rdma_conn *rc = p;
	struct rdma_rxq *q = rc->q;
	uint32_t more, room;

	if (rc->state == RC_DEAD || rc->buried || !q)
		return credits < rc->granted ? credits : rc->granted;
	if (credits <= rc->granted) {
		/* the peer can no longer use them: the SRQ target drops,
		 * and the buffers go unposted as they come back (recv.c) */
		q->srq_target -= rc->granted - credits;
		rc->granted = credits;
		return credits;
	}
	room = q->srq_target + RX_SPARE < q->srq_max
		       ? q->srq_max - RX_SPARE - q->srq_target
		       : 0;
	more = RMSGI_MIN(credits - rc->granted, room);
	if (!more)
		return rc->granted;
	q->srq_target += more;
	rc->granted += more;
	if (rdma_srq_fill(rc->r, q)) {
		/* out of registered memory: what was posted stays as
		 * spare, the grant does not grow */
		q->srq_target -= more;
		rc->granted -= more;
	}
	return rc->granted;
}

/* ------------------------------------------------------------------ */
/* receive groups                                                       */

static bool rxq_room(const struct rdma_rxq *q, uint32_t credits)
{
	return q->srq_target + credits + RX_SPARE <= q->srq_max &&
	       q->cq_used + SQ_DEPTH <= q->cqe;
}

static void rxq_free(struct rdma_rxq *q)
{
	if (q->cq_events)
		ibv_ack_cq_events(q->cq, q->cq_events);
	if (q->srq)
		ibv_destroy_srq(q->srq);
	if (q->cq)
		ibv_destroy_cq(q->cq);
	free(q);
}

static int rxq_new(struct rdma_ctx *r, struct rdma_rxq **q_p)
{
	struct ibv_srq_init_attr sattr;
	struct rdma_rxq *q, **qs;
	int ret;

	qs = realloc(r->q, (r->nq + 1) * sizeof(*qs));
	if (!qs)
		return -ENOMEM;
	r->q = qs;
	q = calloc(1, sizeof(*q));
	if (!q)
		return -ENOMEM;
	q->cq = ibv_create_cq(r->verbs, (int)r->q_cqe, q, r->cch, 0);
	if (!q->cq) {
		ret = errno ? -errno : -ENOMEM;
		free(q);
		return ret;
	}
	/* what the provider made (at least what was asked) */
	q->cqe = r->q_cqe;
	memset(&sattr, 0, sizeof(sattr));
	sattr.attr.max_wr = r->q_srq_wr;
	sattr.attr.max_sge = 1;
	q->srq = ibv_create_srq(r->pd, &sattr);
	if (!q->srq) {
		ret = errno ? -errno : -ENOMEM;
		rxq_free(q);
		return ret;
	}
	q->srq_max = RMSGI_MIN(sattr.attr.max_wr, r->q_srq_wr);
	q->cq_used = q->srq_max;
	ret = rmsgi_err_verbs(ibv_req_notify_cq(q->cq, 0));
	if (ret) {
		rxq_free(q);
		return ret;
	}
	r->q[r->nq++] = q;
	rmsgi_tr_dbg(r->env, "receive group %u: CQ %u entries, SRQ %u receives",
		     r->nq, q->cqe, q->srq_max);
	*q_p = q;
	return 0;
}

int rdma_rxq_get(struct rdma_ctx *r, uint32_t credits, struct rdma_rxq **q_p)
{
	struct rdma_rxq *q = NULL;
	uint32_t i;
	int ret;

	/* the newest first: the older ones fill up in order */
	for (i = r->nq; i-- > 0;)
		if (rxq_room(r->q[i], credits)) {
			q = r->q[i];
			break;
		}
	if (!q) {
		if (r->nq >= r->q_max) {
			if (!r->q_full_said)
				rmsgi_err(r->ctx,
					  "RDMA receive groups full: %u groups "
					  "(a CQ and an SRQ each, %u "
					  "connections at most per group), the "
					  "device allows %u (max_cq, max_srq; "
					  "see rmsg-doctor)",
					  r->nq, RXQ_CONNS, r->q_max);
			r->q_full_said = true;
			return -ENOBUFS;
		}
		ret = rxq_new(r, &q);
		if (ret)
			return ret;
		if (!rxq_room(q, credits)) {
			rmsgi_err(r->ctx,
				  "RDMA receive group too small for %u "
				  "credits: SRQ %u receives, CQ %u entries",
				  credits, q->srq_max, q->cqe);
			return -ENOBUFS;
		}
	}
	q->nconns++;
	q->cq_used += SQ_DEPTH;
	*q_p = q;
	return 0;
}

void rdma_rxq_put(struct rdma_rxq *q)
{
	q->nconns--;
	q->cq_used -= SQ_DEPTH;
}

int rdma_dev_open(struct rdma_ctx *r, struct ibv_context *verbs)
{
	struct ibv_device_attr attr;
	struct ibv_port_attr pattr;
	struct rdma_rxq *q;
	int ret;

	if (r->lost)
		return -ENODEV; /* the removed device is still being let go */
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
	/* not guessable, so a peer does not send it by chance */
	if (getrandom(&r->canary, sizeof(r->canary), 0) !=
	    (ssize_t)sizeof(r->canary))
		r->canary = 0x9e3779b97f4a7c15ull ^ (uint64_t)(uintptr_t)r;
	r->mw_ok = attr.device_cap_flags & (IBV_DEVICE_MEM_WINDOW_TYPE_2A |
					    IBV_DEVICE_MEM_WINDOW_TYPE_2B);
	if (r->rd_atom == 0)
		r->rd_atom = 1;
	/* a receive group: an SRQ of RXQ_SRQ_WR (or what the device
	 * allows) and a CQ for it and RXQ_CONNS QPs (or as many as the
	 * device's CQ size leaves room for) */
	r->q_srq_wr = RMSGI_MIN((uint32_t)attr.max_srq_wr, RXQ_SRQ_WR);
	r->q_cqe = RMSGI_MIN((uint32_t)attr.max_cqe,
			     r->q_srq_wr + RXQ_CONNS * SQ_DEPTH);
	if (r->q_cqe < r->q_srq_wr + SQ_DEPTH)
		r->q_srq_wr = r->q_cqe > 2 * SQ_DEPTH ? r->q_cqe - SQ_DEPTH
						      : r->q_cqe / 2;
	/* (a device that reports no limit: ibv_create_cq/srq tell) */
	r->q_max = UINT32_MAX;
	if (attr.max_cq > 0)
		r->q_max = (uint32_t)attr.max_cq;
	if (attr.max_srq > 0 && (uint32_t)attr.max_srq < r->q_max)
		r->q_max = (uint32_t)attr.max_srq;
	r->pd = ibv_alloc_pd(verbs);
	if (!r->pd)
		return -ENOMEM;
	r->cch = ibv_create_comp_channel(verbs);
	if (!r->cch) {
		ret = -errno;
		goto undo_pd;
	}
	fcntl(r->cch->fd, F_SETFL, fcntl(r->cch->fd, F_GETFL) | O_NONBLOCK);
	r->pd->context = verbs;
	r->verbs = verbs;
	/* the first receive group now: a device without one is no use */
	ret = rxq_new(r, &q);
	if (ret)
		goto undo_cch;
	ret = rmsgi_pool_set_reg(r->env->pool, &rdma_pool_reg_ops, r);
	if (ret)
		goto undo_q;
	rmsgi_mr_set_reg(r->ctx, &rdma_mr_reg_ops, r);
	ev_io_init(&r->cq_io, rdma_cq_cb, r->cch->fd, EV_READ);
	r->cq_io.data = r;
	ev_io_start(r->env->loop, &r->cq_io);
	ev_unref(r->env->loop);
	rmsgi_timers_touch(r->env->timers);
	rmsgi_info(r->ctx,
		   "RDMA device %s: max_msg_sz %llu, rd_atom %u, type-2 "
		   "memory windows %s; receive groups of %u connections "
		   "(SRQ %u, CQ %u), %u at most",
		   ibv_get_device_name(verbs->device),
		   (unsigned long long)r->max_msg_sz, r->rd_atom,
		   r->mw_ok ? "yes" : "no (per-connection export refused)",
		   (r->q_cqe - r->q_srq_wr) / SQ_DEPTH, r->q_srq_wr, r->q_cqe,
		   r->q_max);
	return 0;

undo_q:
	rxq_free(q);
	free(r->q);
	r->q = NULL;
	r->nq = 0;
undo_cch:
	r->verbs = NULL;
	ibv_destroy_comp_channel(r->cch);
	r->cch = NULL;
undo_pd:
	ibv_dealloc_pd(r->pd);
	r->pd = NULL;
	return ret;
}

int rdma_ctx_get(struct rmsg_ctx *ctx, struct rdma_ctx **r_p)
{
	void **slot = rmsgi_ctx_tr_slot(ctx, &rmsgi_tr_rdma);
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
	rmsgi_quar_init(&r->rq, RNDV_QUARANTINE);
	rmsgi_list_init(&r->listeners);
	rmsgi_timer_init(&r->lost_t, r->env->timers, lost_cb);
	r->lost_t.w.data = r;
	rmsgi_timer_init(&r->relisten_t, r->env->timers, relisten_cb);
	r->relisten_t.w.data = r;
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
/* a device removed                                                     */

static void dev_release(struct rdma_ctx *r);
static void rdma_repost_drop(struct rdma_ctx *r);

static void lost_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct rdma_ctx *r = w->data;

	(void)revents;
	/* each connection's end is bounded (TEARDOWN_MS) */
	if (r->nconns) {
		rmsgi_timer_start(loop, &r->lost_t, 0.01, 0);
		return;
	}
	dev_release(r);
}

void rdma_dev_lost(struct rdma_ctx *r)
{
	struct rmsgi_list *n;

	if (r->lost || !r->verbs)
		return;
	r->lost = true;
	rmsgi_warn(r->ctx,
		   "RDMA device %s removed: its connections end (resumable "
		   "ones suspend), its listeners stop taking RDMA "
		   "connections, and the context lets go of it once they "
		   "are down",
		   ibv_get_device_name(r->verbs->device));
	for (n = r->listeners.next; n != &r->listeners; n = n->next) {
		struct rdma_listener *rl =
			rmsgi_list_entry(n, struct rdma_listener, link);

		/* (it listens again once a device serves its address) */
		if (rl->id && rl->id->verbs == r->verbs) {
			rdma_destroy_id(rl->id);
			rl->id = NULL;
		}
	}
	rmsgi_timer_start(r->env->loop, &r->lost_t, 0, 0);
}

/* grows *@v (@n entries) by @k */
static int grow(void ***v, uint32_t n, uint32_t k)
{
	void **p = realloc(*v, (n + k) * sizeof(void *));

	if (!p)
		return -ENOMEM;
	*v = p;
	return 0;
}

/* everything on the removed device goes; its receive groups and buffers
 * stay (without CQ and SRQ) for the messages the app still holds */
static void dev_release(struct rdma_ctx *r)
{
	char name[IBV_SYSFS_NAME_MAX];
	struct ibv_context **l;
	uint32_t i;
	bool keep;
	int n;

	snprintf(name, sizeof(name), "%s",
		 ibv_get_device_name(r->verbs->device));
	rdma_repost_drop(r);
	ev_ref(r->env->loop);
	ev_io_stop(r->env->loop, &r->cq_io);
	keep = !grow((void ***)&r->q_dead, r->nq_dead, r->nq) &&
	       !grow(&r->dead_chunks, 2 * r->ndead, 2 * r->nchunks);
	if (!keep)
		/* (without room to keep them, they leak: memory, not the
		 * device; their queues still go, so that a held message's
		 * release finds no SRQ and never reposts to the old device) */
		rmsgi_err(r->ctx, "no memory to keep %s's buffers", name);
	for (i = 0; i < r->nq; i++) {
		struct rdma_rxq *q = r->q[i];

		if (q->cq_events)
			ibv_ack_cq_events(q->cq, q->cq_events);
		q->cq_events = 0;
		ibv_destroy_srq(q->srq);
		ibv_destroy_cq(q->cq);
		q->srq = NULL;
		q->cq = NULL;
		if (keep)
			r->q_dead[r->nq_dead++] = q;
	}
	free(r->q);
	r->q = NULL;
	r->nq = 0;
	if (keep) {
		for (i = 0; i < 2 * r->nchunks; i++)
			r->dead_chunks[2 * r->ndead + i] = r->rx_chunks[i];
		r->ndead += r->nchunks;
	}
	free(r->rx_chunks);
	r->rx_chunks = NULL;
	r->nchunks = 0;
	r->rx_free = NULL;
	r->rx_idle = 0;
	/* registrations (the pool's, the app's regions, windows) go, and
	 * come back on the next device (rdma_dev_open) */
	rmsgi_pool_clear_reg(r->env->pool);
	rmsgi_mr_clear_reg(r->ctx);
	ibv_destroy_comp_channel(r->cch);
	r->cch = NULL;
	ibv_dealloc_pd(r->pd);
	r->pd = NULL;
	r->verbs = NULL;
	r->lost = false;
	/* librdmacm keeps a device open until it reads its list again */
	l = rdma_get_devices(&n);
	if (l)
		rdma_free_devices(l);
	rmsgi_warn(r->ctx,
		   "RDMA device %s let go: the next RDMA connection opens "
		   "the device that serves it",
		   name);
	relisten_cb(r->env->loop, &r->relisten_t.w, 0);
}

/* listeners whose device went listen again on their address once a
 * device serves it (a second after each try that found none) */
static void relisten_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct rdma_ctx *r = w->data;
	struct rmsgi_list *n;
	bool left = false;

	(void)revents;
	for (n = r->listeners.next; n != &r->listeners; n = n->next) {
		struct rdma_listener *rl =
			rmsgi_list_entry(n, struct rdma_listener, link);

		if (rl->id)
			continue;
		if (rdma_rl_listen(rl, (struct sockaddr *)&rl->addr)) {
			left = true;
			continue;
		}
		rmsgi_warn(r->ctx,
			   "an rdma listener (port %u) takes connections "
			   "again",
			   ntohs(rdma_get_src_port(rl->id)));
	}
	if (left)
		rmsgi_timer_start(loop, &r->relisten_t, 1.0, 0);
}

/* ------------------------------------------------------------------ */
/* the context's end                                                    */

/* buffers released since the last batch hold their connections until
 * reposted, and the shared receive queue goes: let the connections go
 * (their end then runs in the core's next flush) */
static void rdma_repost_drop(struct rdma_ctx *r)
{
	uint32_t i;

	for (i = 0; i < r->nq; i++) {
		struct rdma_rxq *q = r->q[i];

		while (q->repost) {
			struct rxbuf *rb = q->repost;

			q->repost = rb->next;
			q->repost_n--;
			if (rb->m.conn) {
				rmsgi_conn_put(rb->m.conn);
				rb->m.conn = NULL;
			}
		}
	}
}

/* ends the connections; the receive queues and buffers stay for the
 * releases the core's callbacks make next (rdma_ctx_fini frees them);
 * run until the core has nothing more to flush */
void rdma_ctx_stop(void *p)
{
	struct rdma_ctx *r = p;
	uint32_t i;
	int spins;

	/* conns were told to close: give the device a moment to flush */
	for (spins = 0; r->nconns && spins < 100000; spins++)
		if (r->nq)
			rdma_cq_drain(r);
	for (i = 0; i < QPN_BUCKETS; i++) {
		while (r->qpn_hash[i]) {
			struct rdma_conn *rc = r->qpn_hash[i];

			qpn_del(r, rc);
			ibv_destroy_qp(rc->qp);
			rc->qp = NULL;
			rc->unposted = rc->head;
			while (rc->tail != rc->head)
				rdma_rc_retire(rc, rc->tail, -ECANCELED);
			rdma_rc_teardown(rc, 0);
		}
	}
	rdma_repost_drop(r);
}

void rdma_ctx_fini(void *p)
{
	struct rdma_ctx *r = p;
	struct ev_loop *loop = r->env->loop;
	uint32_t i;

	rdma_ctx_stop(r); /* it drops the repost batches too */
	rmsgi_timer_stop(loop, &r->lost_t);
	rmsgi_timer_stop(loop, &r->relisten_t);
	for (i = 0; i < r->nq_dead; i++)
		rxq_free(r->q_dead[i]);
	free(r->q_dead);
	for (i = 0; i < r->ndead; i++) {
		rmsgi_pool_free(r->env->pool, r->dead_chunks[2 * i]);
		free(r->dead_chunks[2 * i + 1]);
	}
	free(r->dead_chunks);
	if (r->verbs) {
		ev_ref(loop);
		ev_io_stop(loop, &r->cq_io);
		for (i = 0; i < r->nq; i++)
			rxq_free(r->q[i]);
		ibv_destroy_comp_channel(r->cch);
	}
	free(r->q);
	r->q = NULL;
	r->nq = 0;
	for (i = 0; i < r->nchunks; i++) {
		rmsgi_pool_free(r->env->pool, r->rx_chunks[2 * i]);
		free(r->rx_chunks[2 * i + 1]);
	}
	free(r->rx_chunks);
	while (r->rx_spare) {
		struct rx_chunk *ch = r->rx_spare;

		r->rx_spare = ch->next;
		free(ch);
	}
	rmsgi_pool_clear_reg(r->env->pool);
	rmsgi_mr_clear_reg(r->ctx);
	if (r->pd)
		ibv_dealloc_pd(r->pd);
	ev_ref(loop);
	ev_io_stop(loop, &r->cm_io);
	rdma_destroy_event_channel(r->ech);
	rdma_rndv_quarantine_clear(r);
	*rmsgi_ctx_tr_slot(r->ctx, &rmsgi_tr_rdma) = NULL;
	free(r);
}
