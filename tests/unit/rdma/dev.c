// SPDX-License-Identifier: MIT
/*
 * unit tests of the device and its receive groups
 * (src/transport/rdma/dev.c): SRQs and CQs added as connections need them,
 * grants within the SRQ.
 */
#include "harness.h"

/* realloc() calls made by the core and the backend (this program is
 * linked with --wrap=realloc) fail while this is above 0 */
static int fail_reallocs;

void *__real_realloc(void *p, size_t n);
void *__wrap_realloc(void *p, size_t n);
void *__wrap_realloc(void *p, size_t n)
{
	if (fail_reallocs > 0) {
		fail_reallocs--;
		return NULL;
	}
	return __real_realloc(p, n);
}

/* receive groups: no fixed connection cap (issue 20)                   */

/* opens a client connection up to its QP (the route resolved) */
static struct rmsg_conn *open_qp(struct rt *t)
{
	struct rmsg_conn *c;

	assert_int_equal(rmsg_connect(t->ctx, URI, t->cfg, &ops, t, &c), 0);
	cm_event(t, mock.last_id, RDMA_CM_EVENT_ADDR_RESOLVED, 0, NULL, 0);
	cm_event(t, mock.last_id, RDMA_CM_EVENT_ROUTE_RESOLVED, 0, NULL, 0);
	return c;
}

/* a device whose SRQ holds 256 receives: one SRQ at the old fixed 32
 * credits took (256 - 32 spare) / 32 = 7 connections. Now each takes the
 * initial credits on a receive group (a CQ and an SRQ) with room, a new
 * group when none has, as many as the device allows (max_srq 2 here);
 * beyond, the connection fails with -ENOBUFS and the log says why */
static void rxq__groups_until_device_limit(void **state)
{
	struct rt *t = *state;
	static struct rmsg_conn *c[512];
	int n = 0, i, warnings;

	mock.srq_max_wr = 256;
	mock.max_srq = 2;
	rt_ctx(t);
	for (;;) {
		assert_true(n < 512);
		warnings = t->warnings;
		c[n] = open_qp(t);
		if (t->closed)
			break;
		assert_int_equal(mock.live_qp, n + 1);
		n++;
	}
	/* far more than 7, on both groups the device allows */
	assert_true(n > 2 * 7);
	assert_int_equal(mock.live_srq, 2);
	assert_int_equal(mock.live_cq, 2);
	/* the one beyond: a clear error, no QP left behind */
	assert_int_equal(t->closed, 1);
	assert_int_equal(t->close_reason, -ENOBUFS);
	assert_true(t->warnings > warnings);
	assert_int_equal(mock.live_qp, n);
	/* every receive the groups hold is backed: at least the credits */
	assert_true(mock_srq_posted() >= (unsigned)n * 4);
	/* one goes: its room is taken again */
	assert_int_equal(rmsg_conn_close(c[0]), 0);
	pump(t);
	c[0] = open_qp(t);
	assert_int_equal(t->closed, 2);
	assert_int_equal(mock.live_qp, n);
	for (i = 0; i < n; i++)
		assert_int_equal(rmsg_conn_close(c[i]), 0);
	pump(t);
	assert_int_equal(mock.live_qp, 0);
}

/* a group's CQ holds every completion its QPs and SRQ can make at once
 * (a QP's whole send queue flushes when it fails): a device with small
 * CQs gets more groups, not an overrun */
static void rxq__cq_sized_for_qps(void **state)
{
	struct rt *t = *state;
	static struct rmsg_conn *c[64];
	int i;

	mock.srq_max_wr = 256;
	/* room for the SRQ and two send queues of 128 */
	mock.max_cqe = 256 + 2 * 128;
	rt_ctx(t);
	for (i = 0; i < 6; i++) {
		c[i] = open_qp(t);
		assert_int_equal(t->closed, 0);
	}
	assert_int_equal(mock.live_cq, 3);
	assert_int_equal(mock.live_srq, 3);
	for (i = 0; i < 6; i++)
		assert_int_equal(rmsg_conn_close(c[i]), 0);
	pump(t);
	assert_int_equal(mock.live_qp, 0);
}

/* the peer sends one message, returning the buffers our frames took,
 * and our sends complete */
static void peer_one(struct rt *t, int *back)
{
	peer_frame(t, RMSGI_T_DATA, (uint16_t)(mock.n_sent - *back), 0, 0, 1,
		   "z", 1);
	*back = mock.n_sent;
	pump(t);
	mock_complete_sends(t->qpn, -1, IBV_WC_SUCCESS);
	pump(t);
}

/* the grant grows on the connection's SRQ as far as its room goes */
static void rxq__grant_grows_within_srq(void **state)
{
	struct rt *t = *state;
	unsigned int posted;
	int i;

	int back = 0;

	mock.srq_max_wr = 52; /* 32 spare, so 20 for grants */
	peer_hello_flags = RMSGI_HELLO_F_GROW;
	connect_peer(t, 32, 8192);
	posted = mock_srq_posted();
	assert_true(posted >= 4 + 32);
	assert_true(posted <= 52);
	/* the peer (whose hello takes a growing grant) uses what it has,
	 * again and again, returning the buffers our frames took */
	for (i = 0; i < 20; i++) {
		while (t->c->cr.peer_avail >= 2) {
			peer_frame(t, RMSGI_T_DATA,
				   (uint16_t)(mock.n_sent - back), 0, 0, 1, "z",
				   1);
			back = mock.n_sent;
			pump(t);
		}
		pump(t);
		mock_complete_sends(t->qpn, -1, IBV_WC_SUCCESS);
		pump(t);
	}
	/* it grew (4, 8, 16, then 32 wanted), as far as the SRQ backs it
	 * and no further: 20 */
	assert_int_equal(t->c->cr.grant, 20);
	assert_true(mock_srq_posted() <= 52);
	assert_int_equal(t->closed, 0);
	/* then one message at a time: the grant shrinks back to the start
	 * and the SRQ with it (buffers beyond its target are not
	 * reposted): 4 credits and the 32 spare */
	for (i = 0; i < 200; i++)
		peer_one(t, &back);
	assert_int_equal(t->c->cr.grant, 4);
	assert_int_equal(mock_srq_posted(), 4 + 32);
	assert_int_equal(t->closed, 0);
}

/* the peer uses what it has, returning the buffers our frames took,
 * until the grant is @want or @rounds rounds went */
static void peer_busy(struct rt *t, int *back, uint32_t want, int rounds)
{
	int i;

	for (i = 0; i < rounds && t->c->cr.grant < want; i++) {
		t->nlog = 0; /* (the messages' events are not looked at) */
		while (t->c->cr.peer_avail >= 2) {
			peer_frame(t, RMSGI_T_DATA,
				   (uint16_t)(mock.n_sent - *back), 0, 0, 1,
				   "z", 1);
			*back = mock.n_sent;
			pump(t);
		}
		pump(t);
		mock_complete_sends(t->qpn, -1, IBV_WC_SUCCESS);
		pump(t);
	}
}

/* a grant that grew to 512 and was given back by the idle peer (core:
 * reclaim.c): the SRQ keeps what is posted, but the buffers beyond its
 * target are kept as they come back, and chunks of them wholly kept go
 * back to the pool, which gives their registration back to the budget;
 * one chunk stays for the next growth */
static void rxq__reclaimed_buffers_go_back(void **state)
{
	struct rt *t = *state;
	struct rmsg_stats st0, st1;
	struct rmsg_msg *held;
	unsigned posted;
	int back = 0, i;
	uint64_t n;

	mock.srq_max_wr = 4096;
	assert_int_equal(rmsg_cfg_set_credits(t->cfg, 512), 0);
	rt_debug_log(t);
	peer_hello_flags = RMSGI_HELLO_F_GROW;
	connect_peer(t, 32, 8192);
	peer_busy(t, &back, 512, 40);
	assert_int_equal(t->c->cr.grant, 512);
	posted = mock_srq_posted();
	assert_true(posted >= 512 + 32);
	memset(&st0, 0, sizeof(st0));
	assert_true(rmsg_ctx_stats(t->ctx, &st0, sizeof(st0)) > 0);
	/* idle: it gives back what it holds beyond its frame's and four */
	n = (uint64_t)t->c->cr.peer_avail - 5;
	peer_frame(t, RMSGI_T_CREDIT, (uint16_t)(mock.n_sent - back),
		   RMSGI_CREDIT_GIVE, n, 0, NULL, 0);
	back = mock.n_sent;
	pump(t);
	assert_true(t->c->cr.grant < 40);
	assert_int_equal(mock_srq_posted(), posted - 1);
	assert_int_equal(t->chunks_back, 0);
	/* a message held and released: its buffer is kept too (and its
	 * chunk's memory may go), yet a second release of it is still
	 * ignored (rmsg_msg_data.3), not a use of freed memory */
	t->hold = true;
	peer_one(t, &back);
	t->hold = false;
	held = t->held[1];
	assert_non_null(held);
	rmsg_msg_release(held);
	/* then one frame at a time: what the SRQ holds beyond the target
	 * is used up and kept */
	for (i = 0; i < 700 && mock_srq_posted() > t->c->cr.grant + 32; i++) {
		t->nlog = 0;
		peer_one(t, &back);
	}
	pump(t);
	assert_int_equal(mock_srq_posted(), t->c->cr.grant + 32);
	/* a chunk goes once idle at two looks a second apart (one look
	 * was in the loop above; the chunks that were idle then go at the
	 * next, those idle later at the one after) */
	assert_int_equal(t->chunks_back, 0);
	for (i = 0; i < 2; i++) {
		run_for(t, 1.1);
		pump(t);
	}
	assert_true(t->chunks_back > 0);
	rmsg_msg_release(held);
	memset(&st1, 0, sizeof(st1));
	assert_true(rmsg_ctx_stats(t->ctx, &st1, sizeof(st1)) > 0);
	/* 512 - 36 buffers of 8256 bytes, less the chunk kept (127) */
	assert_true(st1.reg_given - st0.reg_given >= (uint64_t)2 << 20);
	assert_int_equal(t->closed, 0);
	/* busy again: it grows again, from the kept chunk and new ones */
	peer_busy(t, &back, 512, 40);
	assert_int_equal(t->c->cr.grant, 512);
	assert_true(mock_srq_posted() >= 512 + 32);
	assert_int_equal(t->closed, 0);
}

/* the device removed (DEVICE_REMOVAL): the connection ends with
 * -ENODEV, no connection starts on the device, and once the connection
 * is down the context lets go of everything it held there (rxe cannot
 * finish a removal before) and has librdmacm read its list; a later
 * connection opens a device again, the pool registered on it */
static void dev__removed_let_go(void **state)
{
	struct rt *t = *state;
	struct rmsg_conn *c2;
	int i;

	connect_peer(t, 16, 4096);
	assert_int_equal(mock.live_pd, 1);
	assert_int_equal(mock.live_cch, 1);
	assert_true(mock.live_cq >= 1 && mock.live_srq >= 1 &&
		    mock.live_mr >= 1);
	cm_event(t, t->id, RDMA_CM_EVENT_DEVICE_REMOVAL, 0, NULL, 0);
	assert_int_equal(rmsg_connect(t->ctx, URI, t->cfg, &ops, t, &c2),
			 -ENODEV);
	for (i = 0; i < 100 && mock.live_pd; i++) {
		pump(t);
		ev_run(t->loop, EVRUN_NOWAIT);
	}
	assert_int_equal(t->closed, 1);
	assert_int_equal(t->close_reason, -ENODEV);
	assert_int_equal(mock.live_qp, 0);
	assert_int_equal(mock.live_pd, 0);
	assert_int_equal(mock.live_cq, 0);
	assert_int_equal(mock.live_srq, 0);
	assert_int_equal(mock.live_cch, 0);
	assert_int_equal(mock.live_mr, 0);
	assert_int_equal(mock.get_devices, 1);
	assert_true(t->warnings >= 2); /* removed, let go */
	/* the next connection opens the device (mock: the same) again */
	c2 = open_qp(t);
	assert_non_null(c2);
	assert_int_equal(mock.live_pd, 1);
	assert_true(mock.live_mr >= 1 && mock.live_srq >= 1);
	assert_int_equal(rmsg_conn_close(c2), 0);
	pump(t);
}

/* the device removed with no memory left to keep its receive groups:
 * their buffers leak (the log says so), but their SRQs and CQs still go
 * with the device, and a message the app held across the removal is
 * released without a repost to the removed device's SRQ */
static void dev__removed_no_memory(void **state)
{
	struct rt *t = *state;
	struct rmsg_msg *held;
	unsigned posted;
	int back = 0, i, warnings;

	connect_peer(t, 16, 4096);
	t->hold = true;
	peer_one(t, &back);
	t->hold = false;
	held = t->held[1];
	assert_non_null(held);
	cm_event(t, t->id, RDMA_CM_EVENT_DEVICE_REMOVAL, 0, NULL, 0);
	warnings = t->warnings;
	fail_reallocs = 1;
	for (i = 0; i < 100 && mock.live_pd; i++) {
		pump(t);
		ev_run(t->loop, EVRUN_NOWAIT);
	}
	assert_int_equal(fail_reallocs, 0);
	assert_true(t->warnings > warnings); /* "no memory to keep ..." */
	assert_int_equal(t->closed, 1);
	assert_int_equal(mock.live_pd, 0);
	assert_int_equal(mock.live_srq, 0);
	assert_int_equal(mock.live_cq, 0);
	posted = mock_srq_posted();
	rmsg_msg_release(held);
	pump(t);
	assert_int_equal(mock_srq_posted(), posted);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(rxq__groups_until_device_limit),
		T(rxq__cq_sized_for_qps),
		T(rxq__grant_grows_within_srq),
		T(rxq__reclaimed_buffers_go_back),
		T(dev__removed_let_go),
		T(dev__removed_no_memory),
	};

	unit_filter();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
