// SPDX-License-Identifier: MIT
/*
 * unit tests of registration hooks and memory windows
 * (src/transport/rdma/mem.c): windows bound on the QP, devices without
 * type-2 windows, registration failures of a send.
 */
#include "harness.h"

/* rmsg_mr_export over RDMA: the region carries no remote rights; each
 * export is a window bound (fenced) on the connection's QP, over a
 * registration of just its bytes for a sub-range; revoked before its bind
 * completed it stays, -EBUSY (a later dealloc would leave the window
 * usable after revoke returned 0: issue 30), and goes at once when
 * revoked after; the connection's end takes the windows before the QP */
static void export__window_on_qp(void **state)
{
	struct rt *t = *state;
	uint8_t *buf = calloc(1, 4096);
	uint8_t d1[RMSG_MR_DESC_SIZE], d2[RMSG_MR_DESC_SIZE];
	const int W = RMSG_ACCESS_REMOTE_WRITE, R = RMSG_ACCESS_REMOTE_READ;
	const struct mock_send_wr *b;
	struct rmsgi_desc d;
	struct rmsg_mr *mr;
	int regs;

	assert_non_null(buf);
	mock.mw_type2 = true;
	connect_peer(t, 32, 8192);
	regs = mock.n_reg_mw_bind;
	assert_int_equal(rmsg_mr_reg(t->ctx, buf, 4096, W | R, &mr), 0);
	assert_int_equal(mock.n_reg_mw_bind, regs + 1);
	assert_int_equal(mock.n_reg_remote_read, 0);
	/* the whole region, write only */
	assert_int_equal(rmsg_mr_export(mr, t->c, 0, 0, W, d1), 0);
	assert_int_equal(mock.n_sent, 1); /* posted before the call returns */
	b = &mock.sent[0];
	assert_int_equal(b->opcode, IBV_WR_BIND_MW);
	assert_true(b->send_flags & IBV_SEND_FENCE);
	assert_int_equal(b->mw_access, IBV_ACCESS_REMOTE_WRITE);
	assert_int_equal(b->mw_addr, (uintptr_t)buf);
	assert_int_equal(b->mw_len, 4096);
	assert_true(b->mw_mr->addr == buf && b->mw_mr->length == 4096);
	assert_int_equal(rmsgi_desc_decode(d1, &d), 0);
	assert_int_equal(d.flags, RMSGI_DESC_F_RKEY);
	assert_int_equal(d.rkey, b->mw_rkey);
	assert_int_equal(d.addr, (uintptr_t)buf);
	/* a read-only sub-range: its own registration under the window;
	 * its bind waits until the send queue is empty (rdma_kick: rxe
	 * executes a bind again when a SEND before it is retransmitted) */
	assert_int_equal(rmsg_mr_export(mr, t->c, 100, 50, R, d2), 0);
	assert_int_equal(mock.n_sent, 1);
	assert_int_equal(rmsgi_desc_decode(d2, &d), 0);
	assert_int_equal(d.addr, (uintptr_t)buf + 100);
	assert_int_equal(d.len, 50);
	/* revoked and the region deregistered while the binds are queued:
	 * both refuse and change nothing */
	assert_int_equal(rmsg_mr_revoke(mr, d1), -EBUSY);
	assert_int_equal(mock.n_dealloc_mw, 0);
	assert_int_equal(rmsg_mr_dereg(mr), -EBUSY);
	mock_complete_sends(t->qpn, -1, IBV_WC_SUCCESS);
	pump(t);
	assert_int_equal(mock.n_dealloc_mw, 0);
	/* the bind retired: the window goes before revoke returns */
	assert_int_equal(rmsg_mr_revoke(mr, d1), 0);
	assert_int_equal(mock.n_dealloc_mw, 1);
	/* the first bind retired: the held one went */
	assert_int_equal(mock.n_sent, 2);
	b = &mock.sent[1];
	assert_int_equal(b->opcode, IBV_WR_BIND_MW);
	assert_int_equal(b->mw_access, IBV_ACCESS_REMOTE_READ);
	assert_true(b->mw_mr->addr == buf + 100 && b->mw_mr->length == 50);
	assert_int_equal(b->mw_addr, (uintptr_t)buf + 100);
	assert_int_equal(d.rkey, b->mw_rkey);
	/* the connection ends with an export alive: its window goes before
	 * the QP does */
	cm_event(t, t->id, RDMA_CM_EVENT_DISCONNECTED, 0, NULL, 0);
	pump(t);
	assert_int_equal(t->closed, 1);
	assert_int_equal(mock.n_dealloc_mw, 2);
	assert_int_equal(mock.n_qp_with_mw, 0);
	assert_int_equal(rmsg_mr_revoke(mr, d2), -ENOENT);
	assert_int_equal(rmsg_mr_dereg(mr), 0);
	free(buf);
}

/* exports to one connection beyond the ring's first 16 slots: the ring
 * grows (send.c) while a send is on the device and the binds are held
 * behind it, so none is refused (at a resume every export is bound again
 * this way: rmsg_cfg_set_resume_ms.3), and the send's header stays as
 * posted until it completes */
static void export__many_grow_the_ring(void **state)
{
	struct rt *t = *state;
	uint8_t *buf = calloc(1, 4096), *pbuf;
	uint8_t d[RMSG_MR_DESC_SIZE];
	struct rmsg_mr *mr;
	int i, n = 100, binds = 0;

	assert_non_null(buf);
	mock.mw_type2 = true;
	connect_peer(t, 32, 8192);
	assert_int_equal(rmsg_buf_alloc(t->ctx, 1000, (void **)&pbuf), 0);
	memset(pbuf, 'p', 1000);
	assert_int_equal(send_buf(t, pbuf, 1000, 1), 0);
	rmsgi_ctx_flush(t->ctx);
	assert_int_equal(mock.n_sent, 1);
	assert_int_equal(
		rmsg_mr_reg(t->ctx, buf, 4096, RMSG_ACCESS_REMOTE_READ, &mr),
		0);
	for (i = 0; i < n; i++)
		assert_int_equal(rmsg_mr_export(mr, t->c, (uint64_t)i * 8, 8,
						RMSG_ACCESS_REMOTE_READ, d),
				 0);
	assert_int_equal(mock.n_sent, 1); /* held behind the send */
	for (i = 0; i < 2 * n && mock.n_sent < n + 1; i++) {
		mock_complete_sends(t->qpn, -1, IBV_WC_SUCCESS);
		pump(t);
	}
	assert_int_equal(mock.n_sent, n + 1);
	for (i = 1; i <= n; i++) {
		binds += mock.sent[i].opcode == IBV_WR_BIND_MW;
		assert_int_equal(mock.sent[i].mw_addr,
				 (uintptr_t)buf + (i - 1) * 8);
	}
	assert_int_equal(binds, n);
	assert_int_equal(done_count(t, 1, NULL), 1);
	assert_int_equal(mock.n_changed_before_read, 0);
	assert_int_equal(mock.n_bad_sge, 0);
	cm_event(t, t->id, RDMA_CM_EVENT_DISCONNECTED, 0, NULL, 0);
	pump(t);
	assert_int_equal(t->closed, 1);
	assert_int_equal(mock.n_qp_with_mw, 0);
	assert_int_equal(rmsg_mr_dereg(mr), 0);
	rmsg_buf_free(t->ctx, pbuf);
	free(buf);
}

/* a device without type-2 windows refuses per-connection export and
 * says so; the any-peer export registers the range with remote rights */
static void export__no_type2_windows(void **state)
{
	struct rt *t = *state;
	uint8_t *buf = calloc(1, 4096), desc[RMSG_MR_DESC_SIZE];
	struct rmsgi_desc d;
	struct rmsg_mr *mr;
	int warnings, reads;

	assert_non_null(buf);
	connect_peer(t, 32, 8192);
	assert_int_equal(
		rmsg_mr_reg(t->ctx, buf, 4096, RMSG_ACCESS_REMOTE_READ, &mr),
		0);
	warnings = t->warnings;
	assert_int_equal(
		rmsg_mr_export(mr, t->c, 0, 0, RMSG_ACCESS_REMOTE_READ, desc),
		-EOPNOTSUPP);
	assert_true(t->warnings > warnings); /* logged, naming the way out */
	assert_non_null(strstr(rmsg_strerror(-EOPNOTSUPP), "memory windows"));
	assert_int_equal(mock.n_alloc_mw, 0);
	reads = mock.n_reg_remote_read;
	assert_int_equal(
		rmsg_mr_export(mr, NULL, 0, 0,
			       RMSG_ACCESS_REMOTE_READ | RMSG_EXPORT_ANY_PEER,
			       desc),
		0);
	assert_int_equal(mock.n_reg_remote_read, reads + 1);
	assert_int_equal(rmsgi_desc_decode(desc, &d), 0);
	assert_int_equal(d.flags, RMSGI_DESC_F_RKEY);
	assert_int_equal(rmsg_mr_dereg(mr), 0);
	free(buf);
}

/* pinning the payload fails: that send fails with -ENOMEM, the
 * connection stays up and the next send goes */
static void send__rendezvous_reg_failure(void **state)
{
	static const int errnos[] = {ENOMEM, EPERM, EFAULT};
	size_t i;

	teardown(state);
	for (i = 0; i < UNIT_ARRAY_SIZE(errnos); i++) {
		struct rt *t = rt_new();
		static uint8_t big[20000];
		int status = 0;
		void *frame;

		connect_peer(t, 32, 8192);
		/* the pool class of the request frame has its slab: the next
		 * registration is the payload's */
		assert_int_equal(rmsg_buf_alloc(t->ctx, 48, &frame), 0);
		rmsg_buf_free(t->ctx, frame);
		mock.reg_mr_fail_at = 1;
		mock.reg_mr_errno = errnos[i];
		assert_int_equal(send_buf(t, big, sizeof(big), 1), 0);
		pump(t);
		assert_int_equal(done_count(t, 1, &status), 1);
		assert_int_equal(status, -ENOMEM);
		assert_int_equal(t->closed, 0);
		assert_int_equal(mock.n_sent, 0);
		assert_int_equal(mock.n_reg_remote_read, 0);
		assert_int_equal(send_buf(t, big, sizeof(big), 2), 0);
		pump(t);
		assert_int_equal(mock.n_sent, 1);
		assert_int_equal(mock.n_reg_remote_read, 1);
		assert_int_equal(t->closed, 0);
		assert_true(rt_free(t));
	}
	*state = rt_new();
}

/* the copy of unregistered memory needs a new slab that cannot be
 * registered: that send fails, the connection stays up */
static void send__copy_reg_failure(void **state)
{
	struct rt *t = *state;
	static uint8_t msg[3000]; /* a pool class not used yet */
	int status = 0;

	connect_peer(t, 32, 8192);
	mock.reg_mr_fail_at = 1;
	assert_int_equal(send_buf(t, msg, sizeof(msg), 1), 0);
	pump(t);
	assert_int_equal(done_count(t, 1, &status), 1);
	assert_int_equal(status, -ENOMEM);
	assert_int_equal(t->closed, 0);
	assert_int_equal(mock.n_sent, 0);
	assert_int_equal(send_buf(t, msg, sizeof(msg), 2), 0);
	pump(t);
	assert_int_equal(mock.n_sent, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(export__window_on_qp),     T(export__many_grow_the_ring),
		T(export__no_type2_windows), T(send__rendezvous_reg_failure),
		T(send__copy_reg_failure),
	};

	unit_filter();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
