// SPDX-License-Identifier: MIT
/*
 * verbs_mock.c - libibverbs replaced at link time by a fake device.
 *
 * Non-inline verbs are defined here under their own names; the inline ones
 * reach the static functions below through mock_ctx.ops. See mock.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mock.h"

struct mock_state mock;

struct mock_mr {
	struct ibv_mr mr;
	unsigned int access;
	struct mock_mr *next;
};

struct mock_cch {
	struct ibv_comp_channel ch;
	int wfd;
};

static struct ibv_context mock_ctx;
static struct mock_qp *qps;
static struct mock_mr *mrs;
static struct mock_recv_wr srq_fifo[MOCK_SRQ_MAX];
static unsigned int srq_head, srq_n;
static struct ibv_wc cq_fifo[MOCK_CQ_MAX];
static unsigned int cq_head, cq_n;
static uint32_t next_key, next_qpn;

/* true if [addr, addr+len) lies in one registered MR with this lkey */
static bool sge_ok(uint64_t addr, uint32_t len, uint32_t lkey)
{
	const struct mock_mr *m;

	for (m = mrs; m; m = m->next)
		if (m->mr.lkey == lkey && addr >= (uintptr_t)m->mr.addr &&
		    addr + len <= (uintptr_t)m->mr.addr + m->mr.length)
			return true;
	return false;
}

void mock_push_wc(const struct ibv_wc *wc)
{
	if (cq_n == MOCK_CQ_MAX) {
		mock.n_cq_overflow++;
		return;
	}
	cq_fifo[(cq_head + cq_n++) % MOCK_CQ_MAX] = *wc;
}

unsigned int mock_cq_len(void)
{
	return cq_n;
}

static void push_send_wc(const struct mock_send_wr *w,
			 enum ibv_wc_status status)
{
	struct ibv_wc wc;

	memset(&wc, 0, sizeof(wc));
	wc.wr_id = w->wr_id;
	wc.status = status;
	wc.opcode =
		w->opcode == IBV_WR_RDMA_READ ? IBV_WC_RDMA_READ : IBV_WC_SEND;
	wc.qp_num = w->qp_num;
	mock_push_wc(&wc);
}

/* ------------------------------------------------------------------ */
/* the data path, reached through mock_ctx.ops                          */

static int m_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr,
		       struct ibv_send_wr **bad)
{
	struct mock_qp *mq = (struct mock_qp *)qp;
	int i, k;

	mock.n_post_send++;
	mock.last_chain = 0;
	for (i = 0; wr; wr = wr->next, i++) {
		struct mock_send_wr *w;
		size_t off = 0;

		if (mock.post_send_ret && i == mock.post_send_bad) {
			int ret = mock.post_send_ret;

			mock.post_send_ret = 0;
			*bad = wr;
			return ret;
		}
		if (mq->out_n == MOCK_OUT_MAX || wr->num_sge > MOCK_SGE_MAX ||
		    wr->num_sge > (int)mq->attr.cap.max_send_sge) {
			mock.n_bad_sge++;
			*bad = wr;
			return EINVAL;
		}
		w = &mq->out[(mq->out_head + mq->out_n++) % MOCK_OUT_MAX];
		memset(w, 0, offsetof(struct mock_send_wr, data));
		w->wr_id = wr->wr_id;
		w->qp_num = qp->qp_num;
		w->opcode = wr->opcode;
		w->send_flags = wr->send_flags;
		w->num_sge = wr->num_sge;
		w->remote_addr = wr->wr.rdma.remote_addr;
		w->rkey = wr->wr.rdma.rkey;
		if (wr->opcode == IBV_WR_BIND_MW) {
			w->mw = wr->bind_mw.mw;
			w->mw_rkey = wr->bind_mw.rkey;
			w->mw_mr = wr->bind_mw.bind_info.mr;
			w->mw_addr = wr->bind_mw.bind_info.addr;
			w->mw_len = wr->bind_mw.bind_info.length;
			w->mw_access = wr->bind_mw.bind_info.mw_access_flags;
			w->remote_addr = 0;
			w->rkey = 0;
		}
		for (k = 0; k < wr->num_sge; k++) {
			const struct ibv_sge *s = &wr->sg_list[k];
			size_t n;

			w->sge[k] = *s;
			w->total += s->length;
			if (!(wr->send_flags & IBV_SEND_INLINE) &&
			    !sge_ok(s->addr, s->length, s->lkey))
				mock.n_bad_sge++;
			if (wr->opcode == IBV_WR_RDMA_READ ||
			    off >= MOCK_CAPTURE)
				continue;
			n = s->length < MOCK_CAPTURE - off ? s->length
							   : MOCK_CAPTURE - off;
			memcpy(w->data + off, (const void *)(uintptr_t)s->addr,
			       n);
			off += n;
		}
		if ((wr->send_flags & IBV_SEND_INLINE) &&
		    w->total > mq->attr.cap.max_inline_data)
			mock.n_bad_inline++;
		if (mock.n_sent < MOCK_SENT_MAX)
			mock.sent[mock.n_sent] = *w;
		mock.n_sent++;
		mock.last_chain++;
	}
	return 0;
}

static int m_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr,
		       struct ibv_recv_wr **bad)
{
	*bad = wr; /* receives go to the SRQ */
	return EINVAL;
}

static int m_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr,
			   struct ibv_recv_wr **bad)
{
	int n = 0;

	mock.n_post_srq_recv++;
	if (mock.post_srq_recv_ret) {
		int ret = mock.post_srq_recv_ret;

		mock.post_srq_recv_ret = 0;
		*bad = wr;
		return ret;
	}
	for (; wr; wr = wr->next, n++) {
		struct mock_recv_wr *r;

		if (srq_n == MOCK_SRQ_MAX || wr->num_sge != 1) {
			*bad = wr;
			return ENOMEM;
		}
		if (!sge_ok(wr->sg_list[0].addr, wr->sg_list[0].length,
			    wr->sg_list[0].lkey))
			mock.n_bad_sge++;
		r = &srq_fifo[(srq_head + srq_n++) % MOCK_SRQ_MAX];
		r->wr_id = wr->wr_id;
		r->addr = wr->sg_list[0].addr;
		r->length = wr->sg_list[0].length;
		r->lkey = wr->sg_list[0].lkey;
	}
	if (mock.n_post_srq_recv <= MOCK_BATCH_MAX)
		mock.srq_batch[mock.n_post_srq_recv - 1] = n;
	return 0;
}

static int m_poll_cq(struct ibv_cq *cq, int num, struct ibv_wc *wc)
{
	int i;

	for (i = 0; i < num && cq_n; i++) {
		wc[i] = cq_fifo[cq_head];
		cq_head = (cq_head + 1) % MOCK_CQ_MAX;
		cq_n--;
	}
	return i;
}

static int m_req_notify_cq(struct ibv_cq *cq, int solicited_only)
{
	mock.n_req_notify++;
	return 0;
}

static struct ibv_mw *m_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type)
{
	struct ibv_mw *mw = calloc(1, sizeof(*mw));

	if (!mw)
		return NULL;
	mw->context = pd->context;
	mw->pd = pd;
	mw->type = type;
	mw->rkey = 0x40000000u | next_key++ << 8;
	mock.n_alloc_mw++;
	mock.live_mw++;
	return mw;
}

static int m_dealloc_mw(struct ibv_mw *mw)
{
	free(mw);
	mock.n_dealloc_mw++;
	mock.live_mw--;
	return 0;
}

/* ------------------------------------------------------------------ */
/* test control                                                         */

void mock_cm_drop(void);

void mock_reset(void)
{
	mock_cm_drop();
	memset(&mock, 0, sizeof(mock));
	mock.max_inline = 256;
	mock.max_send_sge = 32;
	mock.srq_max_wr = 16384;
	mock.max_msg_sz = 1u << 30;
	mock.min_rnr_timer = -1;
	mock.max_qp_rd_atom = 16;
	mock.flush_on_error = true;
	mock.connect_qp_state = -1;
	mock.accept_qp_state = -1;
	mock.establish_qp_state = -1;
	mock.src_port = 7471;
	/* objects left by a failed test are forgotten, not freed: the code
	 * under test may still own them */
	qps = NULL;
	mrs = NULL;
	srq_head = srq_n = 0;
	cq_head = cq_n = 0;
	next_key = 0x1000;
	next_qpn = 0x11;
	memset(&mock_ctx, 0, sizeof(mock_ctx));
	mock_ctx.ops.post_send = m_post_send;
	mock_ctx.ops.post_recv = m_post_recv;
	mock_ctx.ops.post_srq_recv = m_post_srq_recv;
	mock_ctx.ops.poll_cq = m_poll_cq;
	mock_ctx.ops.req_notify_cq = m_req_notify_cq;
	mock_ctx.ops.alloc_mw = m_alloc_mw;
	mock_ctx.ops.dealloc_mw = m_dealloc_mw;
	mock_ctx.cmd_fd = -1;
	mock_ctx.async_fd = -1;
}

bool mock_all_released(void)
{
	return !mock.live_pd && !mock.live_cq && !mock.live_srq &&
	       !mock.live_cch && !mock.live_mr && !mock.live_qp &&
	       !mock.live_mw && !mock.live_ech && !mock.live_id &&
	       !mock.live_ai && !mock.live_ev;
}

void mock_print_live(void)
{
	fprintf(stderr,
		"mock live: pd %d cq %d srq %d cch %d mr %d qp %d "
		"ech %d id %d ai %d ev %d mw %d\n",
		mock.live_pd, mock.live_cq, mock.live_srq, mock.live_cch,
		mock.live_mr, mock.live_qp, mock.live_ech, mock.live_id,
		mock.live_ai, mock.live_ev, mock.live_mw);
}

struct ibv_context *mock_verbs(void)
{
	return &mock_ctx;
}

struct mock_qp *mock_qp_by_num(uint32_t qpn)
{
	struct mock_qp *q;

	for (q = qps; q; q = q->next)
		if (q->qp.qp_num == qpn)
			return q;
	return NULL;
}

unsigned int mock_outstanding(uint32_t qpn)
{
	struct mock_qp *q = mock_qp_by_num(qpn);

	return q ? q->out_n : 0;
}

const struct mock_send_wr *mock_out_peek(uint32_t qpn, unsigned int i)
{
	struct mock_qp *q = mock_qp_by_num(qpn);

	if (!q || i >= q->out_n)
		return NULL;
	return &q->out[(q->out_head + i) % MOCK_OUT_MAX];
}

/* the bytes @w's SGEs describe now differ from those at its post */
static bool gathered_changed(const struct mock_send_wr *w)
{
	size_t off = 0;
	int k;

	for (k = 0; k < w->num_sge && off < MOCK_CAPTURE; k++) {
		size_t n = w->sge[k].length < MOCK_CAPTURE - off
				   ? w->sge[k].length
				   : MOCK_CAPTURE - off;

		if (memcmp(w->data + off,
			   (const void *)(uintptr_t)w->sge[k].addr, n))
			return true;
		off += n;
	}
	return false;
}

int mock_complete_sends(uint32_t qpn, int n, enum ibv_wc_status status)
{
	struct mock_qp *q = mock_qp_by_num(qpn);
	int k;

	if (!q)
		return -1;
	if (n < 0 || n > (int)q->out_n)
		n = (int)q->out_n;
	for (k = 0; k < n; k++) {
		struct mock_send_wr *w = &q->out[q->out_head];
		enum ibv_wc_status st = k == n - 1 ? status : IBV_WC_SUCCESS;

		q->out_head = (q->out_head + 1) % MOCK_OUT_MAX;
		q->out_n--;
		if (w->opcode != IBV_WR_RDMA_READ &&
		    w->opcode != IBV_WR_BIND_MW &&
		    !(w->send_flags & IBV_SEND_INLINE) && gathered_changed(w))
			mock.n_changed_before_read++;
		if (st == IBV_WC_SUCCESS && w->opcode == IBV_WR_RDMA_READ &&
		    mock.reads_unwritten > 0)
			mock.reads_unwritten--;
		else if (st == IBV_WC_SUCCESS && w->opcode == IBV_WR_RDMA_READ)
			memcpy((void *)(uintptr_t)w->sge[0].addr,
			       (const void *)(uintptr_t)w->remote_addr,
			       w->sge[0].length);
		if (st != IBV_WC_SUCCESS || (w->send_flags & IBV_SEND_SIGNALED))
			push_send_wc(w, st);
	}
	return n;
}

static int recv_pop(struct mock_recv_wr *r)
{
	if (!srq_n)
		return -1;
	*r = srq_fifo[srq_head];
	srq_head = (srq_head + 1) % MOCK_SRQ_MAX;
	srq_n--;
	return 0;
}

int mock_recv(uint32_t qpn, const void *frame, size_t len)
{
	struct mock_recv_wr r;
	struct ibv_wc wc;

	if (!srq_n || srq_fifo[srq_head].length < len)
		return -1;
	recv_pop(&r);
	memcpy((void *)(uintptr_t)r.addr, frame, len);
	memset(&wc, 0, sizeof(wc));
	wc.wr_id = r.wr_id;
	wc.status = IBV_WC_SUCCESS;
	wc.opcode = IBV_WC_RECV;
	wc.byte_len = (uint32_t)len;
	wc.qp_num = qpn;
	mock_push_wc(&wc);
	return 0;
}

int mock_recv_error(uint32_t qpn, enum ibv_wc_status status)
{
	struct mock_recv_wr r;
	struct ibv_wc wc;

	if (recv_pop(&r))
		return -1;
	memset(&wc, 0, sizeof(wc));
	wc.wr_id = r.wr_id;
	wc.status = status;
	wc.opcode = IBV_WC_RECV;
	wc.qp_num = qpn;
	mock_push_wc(&wc);
	return 0;
}

unsigned int mock_srq_posted(void)
{
	return srq_n;
}

const struct mock_recv_wr *mock_srq_peek(unsigned int i)
{
	if (i >= srq_n)
		return NULL;
	return &srq_fifo[(srq_head + i) % MOCK_SRQ_MAX];
}

/* used by rdmacm_mock.c */
struct mock_qp *mock_qp_new(struct ibv_pd *pd, struct ibv_qp_init_attr *qa);
void mock_qp_free(struct mock_qp *q);

struct mock_qp *mock_qp_new(struct ibv_pd *pd, struct ibv_qp_init_attr *qa)
{
	struct mock_qp *q = calloc(1, sizeof(*q));

	if (!q)
		return NULL;
	q->out = calloc(MOCK_OUT_MAX, sizeof(*q->out));
	if (!q->out) {
		free(q);
		return NULL;
	}
	q->qp.context = &mock_ctx;
	q->qp.qp_context = qa->qp_context;
	q->qp.pd = pd;
	q->qp.send_cq = qa->send_cq;
	q->qp.recv_cq = qa->recv_cq;
	q->qp.srq = qa->srq;
	q->qp.qp_num = next_qpn++;
	q->qp.state = IBV_QPS_RESET;
	q->qp.qp_type = qa->qp_type;
	q->attr = *qa;
	q->next = qps;
	qps = q;
	mock.last_qp = q;
	mock.live_qp++;
	return q;
}

void mock_qp_free(struct mock_qp *q)
{
	struct mock_qp **p;

	for (p = &qps; *p; p = &(*p)->next)
		if (*p == q) {
			*p = q->next;
			break;
		}
	if (mock.last_qp == q)
		mock.last_qp = NULL;
	free(q->out);
	free(q);
	mock.live_qp--;
}

/* ------------------------------------------------------------------ */
/* libibverbs, replaced                                                 */

int ibv_query_device(struct ibv_context *context, struct ibv_device_attr *attr)
{
	if (mock.query_device_ret)
		return mock.query_device_ret;
	memset(attr, 0, sizeof(*attr));
	attr->max_qp_wr = 16384;
	attr->max_sge = (int)mock.max_send_sge;
	attr->max_cqe = 65535;
	attr->max_mr_size = (uint64_t)1 << 40;
	attr->max_qp_rd_atom = (int)mock.max_qp_rd_atom;
	attr->max_srq_wr = (int)mock.srq_max_wr;
	attr->max_srq = (int)mock.max_srq;
	attr->max_cq = (int)mock.max_cq;
	if (mock.max_cqe)
		attr->max_cqe = (int)mock.max_cqe;
	attr->max_srq_sge = 1;
	attr->phys_port_cnt = 1;
	if (mock.mw_type2)
		attr->device_cap_flags =
			IBV_DEVICE_MEM_WINDOW | IBV_DEVICE_MEM_WINDOW_TYPE_2B;
	return 0;
}

int(ibv_query_port)(struct ibv_context *context, uint8_t port_num,
		    struct _compat_ibv_port_attr *port_attr)
{
	struct ibv_port_attr *pa = (struct ibv_port_attr *)port_attr;

	memset(pa, 0, sizeof(*pa));
	pa->state = IBV_PORT_ACTIVE;
	pa->max_msg_sz = mock.max_msg_sz;
	return 0;
}

struct ibv_pd *ibv_alloc_pd(struct ibv_context *context)
{
	struct ibv_pd *pd;

	if (mock.alloc_pd_fail) {
		errno = ENOMEM;
		return NULL;
	}
	pd = calloc(1, sizeof(*pd));
	if (!pd)
		return NULL;
	pd->context = context;
	mock.live_pd++;
	return pd;
}

int ibv_dealloc_pd(struct ibv_pd *pd)
{
	free(pd);
	mock.live_pd--;
	return 0;
}

struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *context)
{
	struct mock_cch *c;
	int fds[2];

	if (mock.create_comp_channel_fail) {
		errno = EMFILE;
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	if (pipe(fds)) {
		free(c);
		return NULL;
	}
	c->ch.context = context;
	c->ch.fd = fds[0];
	c->wfd = fds[1];
	mock.live_cch++;
	return &c->ch;
}

int ibv_destroy_comp_channel(struct ibv_comp_channel *channel)
{
	struct mock_cch *c = (struct mock_cch *)channel;

	close(c->ch.fd);
	close(c->wfd);
	free(c);
	mock.live_cch--;
	return 0;
}

struct ibv_cq *ibv_create_cq(struct ibv_context *context, int cqe,
			     void *cq_context, struct ibv_comp_channel *channel,
			     int comp_vector)
{
	struct ibv_cq *cq;

	if (mock.create_cq_fail) {
		errno = ENOMEM;
		return NULL;
	}
	cq = calloc(1, sizeof(*cq));
	if (!cq)
		return NULL;
	cq->context = context;
	cq->channel = channel;
	cq->cq_context = cq_context;
	cq->cqe = cqe;
	mock.last_cq = cq;
	mock.live_cq++;
	return cq;
}

int ibv_destroy_cq(struct ibv_cq *cq)
{
	if (mock.last_cq == cq)
		mock.last_cq = NULL;
	free(cq);
	mock.live_cq--;
	return 0;
}

struct ibv_srq *ibv_create_srq(struct ibv_pd *pd,
			       struct ibv_srq_init_attr *attr)
{
	struct ibv_srq *srq;

	if (mock.create_srq_fail) {
		errno = ENOMEM;
		return NULL;
	}
	srq = calloc(1, sizeof(*srq));
	if (!srq)
		return NULL;
	srq->context = pd->context;
	srq->srq_context = attr->srq_context;
	srq->pd = pd;
	if (attr->attr.max_wr > mock.srq_max_wr)
		attr->attr.max_wr = mock.srq_max_wr;
	mock.live_srq++;
	return srq;
}

int ibv_destroy_srq(struct ibv_srq *srq)
{
	free(srq);
	srq_head = srq_n = 0; /* posted receives go with it */
	mock.live_srq--;
	return 0;
}

static struct ibv_mr *mock_reg(struct ibv_pd *pd, void *addr, size_t len,
			       unsigned int access)
{
	struct mock_mr *m;

	mock.n_reg_mr++;
	if (mock.reg_mr_fail_at && --mock.reg_mr_fail_at == 0) {
		errno = mock.reg_mr_errno ? mock.reg_mr_errno : ENOMEM;
		return NULL;
	}
	m = calloc(1, sizeof(*m));
	if (!m)
		return NULL;
	m->mr.context = pd->context;
	m->mr.pd = pd;
	m->mr.addr = addr;
	m->mr.length = len;
	m->mr.lkey = next_key;
	m->mr.rkey = next_key | 0x80000000u;
	next_key++;
	m->access = access;
	m->next = mrs;
	mrs = m;
	if (access & IBV_ACCESS_REMOTE_READ)
		mock.n_reg_remote_read++;
	if (access & IBV_ACCESS_MW_BIND)
		mock.n_reg_mw_bind++;
	mock.live_mr++;
	return &m->mr;
}

struct ibv_mr *(ibv_reg_mr)(struct ibv_pd *pd, void *addr, size_t length,
			    int access)
{
	return mock_reg(pd, addr, length, (unsigned int)access);
}

struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length,
				uint64_t iova, unsigned int access)
{
	return mock_reg(pd, addr, length, access);
}

int ibv_dereg_mr(struct ibv_mr *mr)
{
	struct mock_mr **p;

	for (p = &mrs; *p; p = &(*p)->next)
		if (&(*p)->mr == mr) {
			*p = (*p)->next;
			break;
		}
	free(mr); /* mr is the first member of struct mock_mr */
	mock.n_dereg_mr++;
	mock.live_mr--;
	return 0;
}

int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask)
{
	struct mock_qp *q = (struct mock_qp *)qp;

	if ((attr_mask & IBV_QP_STATE) &&
	    mock.modify_fail_to == (int)attr->qp_state + 1)
		return EINVAL;
	if (attr_mask & IBV_QP_MIN_RNR_TIMER)
		mock.min_rnr_timer = attr->min_rnr_timer;
	if (attr_mask & IBV_QP_ACCESS_FLAGS) {
		mock.n_qp_access++;
		mock.qp_access = (int)attr->qp_access_flags;
		mock.qp_access_sent = mock.n_sent;
		if ((attr->qp_access_flags &
		     (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
		      IBV_ACCESS_REMOTE_ATOMIC)) &&
		    !mock.n_qp_remote++)
			mock.qp_remote_sent = mock.n_sent;
	}
	if (!(attr_mask & IBV_QP_STATE))
		return 0;
	qp->state = attr->qp_state;
	if (attr->qp_state != IBV_QPS_ERR)
		return 0;
	mock.n_modify_err++;
	if (!mock.flush_on_error)
		return 0;
	/* in the error state every outstanding WR completes, flushed */
	while (q->out_n) {
		push_send_wc(&q->out[q->out_head], IBV_WC_WR_FLUSH_ERR);
		q->out_head = (q->out_head + 1) % MOCK_OUT_MAX;
		q->out_n--;
	}
	return 0;
}

struct ibv_qp *ibv_create_qp(struct ibv_pd *pd,
			     struct ibv_qp_init_attr *qp_init_attr)
{
	struct mock_qp *q;

	if (mock.create_qp_fail > 0) {
		mock.create_qp_fail--;
		errno = EINVAL;
		return NULL;
	}
	/* like a provider: refuse what the device cannot do */
	if (qp_init_attr->cap.max_inline_data > mock.max_inline ||
	    qp_init_attr->cap.max_send_sge > mock.max_send_sge) {
		errno = EINVAL;
		return NULL;
	}
	q = mock_qp_new(pd, qp_init_attr);
	if (!q) {
		errno = ENOMEM;
		return NULL;
	}
	return &q->qp;
}

int ibv_destroy_qp(struct ibv_qp *qp)
{
	if (mock.live_mw)
		mock.n_qp_with_mw++;
	mock_qp_free((struct mock_qp *)qp);
	return 0;
}

int ibv_get_cq_event(struct ibv_comp_channel *channel, struct ibv_cq **cq,
		     void **cq_context)
{
	if (mock.cq_events <= 0 || !mock.last_cq) {
		errno = EAGAIN;
		return -1;
	}
	mock.cq_events--;
	*cq = mock.last_cq;
	*cq_context = mock.last_cq->cq_context;
	return 0;
}

void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int nevents)
{
	mock.n_cq_acked += (int)nevents;
}

const char *ibv_wc_status_str(enum ibv_wc_status status)
{
	return "mock work completion status";
}

const char *ibv_get_device_name(struct ibv_device *device)
{
	return "mock0";
}
