// SPDX-License-Identifier: MIT
/*
 * qp.c - a connection's queue pair (rdma.h tells the design): made by
 * the library on a receive group's CQ and SRQ, not by rdma_cm, and moved
 * through INIT, RTR and RTS by the library with rdma_cm's attributes, so
 * that a connection that must prove a pre-shared key holds no remote
 * rights at any moment before the proof; the rights granted after it;
 * the RNR timer once the connection is up.
 */
#include "rdma.h"

/*
 * Moves the connection's QP to @st with the attributes rdma_cm keeps for
 * it (port, path, PSNs, the ACK timeout set on the id), as rdma_cm would
 * for a QP of its own, with one difference: a connection that must prove
 * a pre-shared key gets no remote access in any step; only
 * rdma_rma_open_op() grants it, once the proof is complete.
 * @p: the server's own read depths (rdma_accept's), NULL for the
 * client, which takes the ones the server answered.
 */
static int rc_qp_move(struct rdma_conn *rc, enum ibv_qp_state st,
		      const struct rdma_conn_param *p)
{
	struct ibv_qp_attr a;
	int mask = 0, ret;

	memset(&a, 0, sizeof(a));
	a.qp_state = st;
	if (rdma_init_qp_attr(rc->id, &a, &mask))
		return rmsgi_err_cm(-1);
	/* bits 21-23 are no verbs attributes but kernel-internal ones,
	 * which librdmacm masks off too (on InfiniBand ports) */
	mask &= ~0xe00000;
	if ((mask & IBV_QP_ACCESS_FLAGS) && rc->ci->cfg->psk_len)
		a.qp_access_flags = 0;
	if (p && st == IBV_QPS_RTR)
		a.max_dest_rd_atomic = p->responder_resources;
	if (p && st == IBV_QPS_RTS)
		a.max_rd_atomic = p->initiator_depth;
	ret = ibv_modify_qp(rc->qp, &a, mask);
	return ret ? rmsgi_err_verbs(ret) : 0;
}

/* INIT again (rdma_cm's attributes are complete only now), RTR, RTS:
 * the server's before rdma_accept(), the client's on the server's
 * answer (RDMA_CM_EVENT_CONNECT_RESPONSE), before rdma_establish() */
int rdma_qp_ready(struct rdma_conn *rc, const struct rdma_conn_param *p)
{
	int ret = rc_qp_move(rc, IBV_QPS_INIT, NULL);

	if (ret == 0)
		ret = rc_qp_move(rc, IBV_QPS_RTR, p);
	if (ret == 0)
		ret = rc_qp_move(rc, IBV_QPS_RTS, p);
	return ret;
}

/* QP on a receive group's CQ and SRQ, header slots, and this peer's
 * buffers: the few credits a connection starts with (the core grows
 * them with use: rdma_grant_op) */
int rdma_qp_setup(struct rdma_conn *rc)
{
	struct rdma_ctx *r = rc->r;
	uint32_t start = rmsgi_credits_start(rc->ci->cfg);
	struct ibv_qp_init_attr qa;
	uint8_t timeout = ACK_TIMEOUT;
	int ret;

	ret = rdma_dev_open(r, rc->id->verbs);
	if (ret)
		return ret;
	ret = rdma_rxq_get(r, start, &rc->q);
	if (ret)
		return ret;
	memset(&qa, 0, sizeof(qa));
	qa.qp_context = rc;
	qa.send_cq = rc->q->cq;
	qa.recv_cq = rc->q->cq;
	qa.srq = rc->q->srq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = SQ_MAX_WR;
	qa.cap.max_send_sge = MAX_SGE + 1;
	qa.cap.max_inline_data = 256;
	/* our own QP, not rdma_create_qp's: rdma_cm then never moves it
	 * (rc_qp_move) */
	rc->qp = ibv_create_qp(r->pd, &qa);
	if (!rc->qp) {
		/* providers differ in inline and SGE limits: ask for less */
		qa.cap.max_inline_data = 0;
		qa.cap.max_send_sge = 4;
		rc->qp = ibv_create_qp(r->pd, &qa);
	}
	if (!rc->qp)
		return rmsgi_err_verbs(errno ? errno : ENOMEM);
	rc->qpn = rc->qp->qp_num;
	rc->max_inline = qa.cap.max_inline_data;
	rc->max_sge = RMSGI_MIN(qa.cap.max_send_sge, MAX_SGE + 1);
	qpn_add(r, rc);
	rdma_set_option(rc->id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT,
			&timeout, sizeof(timeout));
	ret = rc_qp_move(rc, IBV_QPS_INIT, NULL);
	if (ret)
		return ret;
	ret = rdma_ring_init(rc);
	if (ret)
		return ret;
	rc->granted = start;
	rc->q->srq_target += rc->granted;
	return rdma_srq_fill(r, rc->q);
}

/*
 * The connection is up: the QP is in RTS. Its RNR timer is what the
 * peer waits before resending into an SRQ found empty; rdma_cm leaves it
 * at 655 ms. Best effort: a device that refuses keeps the default.
 */
void rdma_rc_up(struct rdma_conn *rc)
{
	struct ibv_qp_attr qattr = {.min_rnr_timer = MIN_RNR_TIMER};

	rc->state = RC_UP;
	if (rc->qp && ibv_modify_qp(rc->qp, &qattr, IBV_QP_MIN_RNR_TIMER))
		rmsgi_tr_dbg(rc->r->env, "conn %u: RNR timer not set",
			     rc->ci->id);
}

/*
 * The peer's one-sided operations reach this side's memory only through
 * keys the device checks: windows on this QP, and any-peer exports'
 * registrations, valid on every QP of the protection domain. The QP's
 * own remote rights come first (the responder checks them before any
 * key). rdma_cm would grant remote write and read in the INIT step it
 * repeats inside rdma_accept() and on the connect response, before the
 * connection could take them away: so the QP is not rdma_cm's
 * (rdma_qp_setup), and a connection that must prove a pre-shared key
 * moves through INIT, RTR and RTS without them (rc_qp_move). Here,
 * rdma_rma_open_op() grants them once the proof is complete: no export,
 * any-peer ones included, is reachable before, at no moment. A device
 * that refuses: the exports stay closed to the peer, and the connection
 * fails.
 */
int rdma_rma_open_op(void *tc)
{
	struct rdma_conn *rc = tc;
	struct ibv_qp_attr a;
	int ret;

	if (rc->rma_open)
		return 0;
	if (!rc->qp)
		return -ENOTCONN;
	memset(&a, 0, sizeof(a));
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	ret = ibv_modify_qp(rc->qp, &a, IBV_QP_ACCESS_FLAGS);
	if (ret) {
		ret = rmsgi_err_verbs(ret);
		rmsgi_err(rc->r->ctx,
			  "conn %u: the device refused to grant the queue "
			  "pair's remote access (%s): the exports stay closed "
			  "to the peer",
			  rc->ci->id, rmsg_strerror(ret));
		return ret;
	}
	rc->rma_open = true;
	return 0;
}
