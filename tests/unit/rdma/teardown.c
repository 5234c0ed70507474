// SPDX-License-Identifier: MIT
/*
 * unit tests of linger, drain and teardown
 * (src/transport/rdma/teardown.c): local and peer closes, the context
 * destroyed with live connections.
 */
#include "harness.h"

/* closing                                                              */

/* a local close lets what the device holds arrive before it goes */
static void close__lingers_for_posted_sends(void **state)
{
	struct rt *t = *state;
	int status;

	connect_peer(t, 32, 8192);
	assert_int_equal(send_str(t, "a", 1), 0);
	assert_int_equal(send_str(t, "b", 2), 0);
	rmsgi_ctx_flush(t->ctx);
	assert_int_equal(rmsg_conn_close(t->c), 0);
	assert_int_equal(mock.n_disconnect, 0);
	assert_int_equal(mock.n_modify_err, 0);
	pump(t);
	assert_int_equal(t->closed, 0);
	mock_complete_sends(t->qpn, -1, IBV_WC_SUCCESS);
	pump(t);
	assert_int_equal(done_count(t, 1, &status), 1);
	assert_int_equal(status, 0);
	assert_int_equal(done_count(t, 2, &status), 1);
	assert_int_equal(status, 0);
	assert_int_equal(mock.n_disconnect, 1);
	assert_int_equal(t->closed, 1);
	assert_int_equal(t->close_reason, 0);
	assert_int_equal(mock.live_qp, 0);
	assert_int_equal(mock.n_id_with_qp, 0);
}

/* the peer's BYE sits unpolled in the CQ when its disconnect arrives
 * (two channels, no order between them): it is still seen, and the close
 * reads -ESHUTDOWN; the messages before it are delivered first */
static void close__peer_bye(void **state)
{
	struct rt *t = *state;

	connect_peer(t, 32, 8192);
	peer_data(t, "last words", 0);
	peer_frame(t, RMSGI_T_CREDIT, 0, RMSGI_CREDIT_BYE, 0, 0, NULL, 0);
	cm_event(t, t->id, RDMA_CM_EVENT_DISCONNECTED, 0, NULL, 0);
	pump(t);
	assert_int_equal(t->msgs, 1);
	assert_int_equal(t->closed, 1);
	assert_int_equal(t->close_reason, -ESHUTDOWN);
}

/* an idle close sends its BYE (a CREDIT frame marked so the peer
 * reports -ESHUTDOWN) and disconnects once the device completed it */
static void close__idle(void **state)
{
	struct rt *t = *state;
	struct rmsgi_hdr h;
	unsigned int posted;

	connect_peer(t, 32, 8192);
	posted = mock_srq_posted();
	assert_int_equal(rmsg_conn_close(t->c), 0);
	assert_int_equal(mock.n_sent, 1);
	sent_hdr(&mock.sent[0], &h);
	assert_int_equal(h.type, RMSGI_T_CREDIT);
	assert_int_equal(h.aux, RMSGI_CREDIT_BYE);
	assert_int_equal(mock.n_disconnect, 0);
	assert_int_equal(mock_complete_sends(t->qpn, -1, IBV_WC_SUCCESS), 1);
	pump(t);
	assert_int_equal(mock.n_disconnect, 1);
	assert_int_equal(t->closed, 1);
	assert_int_equal(t->close_reason, 0);
	assert_int_equal(mock.live_qp, 0);
	assert_int_equal(mock.live_id, 0);
	/* receives stay with the shared SRQ */
	assert_int_equal(mock_srq_posted(), posted);
}

/* a post that fails mid-batch (no memory for its rendezvous) must not
 * strand the ones before it; only it fails */
static void close__post_error_mid_batch(void **state)
{
	struct rt *t = *state;
	static uint8_t big[20000];
	void *frame;
	int status;

	connect_peer(t, 32, 8192);
	assert_int_equal(rmsg_buf_alloc(t->ctx, 48, &frame), 0);
	rmsg_buf_free(t->ctx, frame);
	assert_int_equal(send_str(t, "a", 1), 0);
	assert_int_equal(send_str(t, "b", 2), 0);
	assert_int_equal(send_buf(t, big, sizeof(big), 3), 0);
	mock.reg_mr_fail_at = 1;
	rmsgi_ctx_flush(t->ctx);
	/* the two accepted sends were handed to the device */
	assert_int_equal(mock.n_sent, 2);
	mock_complete_sends(t->qpn, -1, IBV_WC_SUCCESS);
	pump(t);
	assert_int_equal(done_count(t, 3, &status), 1);
	assert_int_equal(status, -ENOMEM);
	assert_int_equal(done_count(t, 1, NULL), 1);
	assert_int_equal(done_count(t, 2, NULL), 1);
	assert_int_equal(t->closed, 0);
}

/* destroying the context completes everything, once */
static void ctx_destroy__live_conn(void **state)
{
	struct rt *t = *state;
	int i, status;

	connect_peer(t, 32, 8192);
	for (i = 0; i < 3; i++)
		assert_int_equal(send_str(t, "x", i), 0);
	rmsgi_ctx_flush(t->ctx);
	peer_data(t, "unread", 0);
	assert_int_equal(rmsg_ctx_destroy(t->ctx), 0);
	t->ctx = NULL;
	for (i = 0; i < 3; i++)
		assert_int_equal(done_count(t, i, &status), 1);
	assert_int_equal(t->closed, 1);
	assert_int_equal(t->close_reason, -ECANCELED);
	assert_int_equal(t->log[t->nlog - 1].kind, 'X');
	assert_int_equal(mock.live_mr, 0);
}

/* a message the app was done with waits for its receive buffer's batched
 * repost, holding its connection; destroying the context drops those
 * holds with the shared receive queue, so the connection goes too
 * (LeakSanitizer in scripts/sanitize.sh and valgrind see it otherwise;
 * found by the RDMA suite under ASan, close_inflight) */
static void ctx_destroy__released_buffers_let_conn_go(void **state)
{
	struct rt *t = *state;

	connect_peer(t, 32, 8192);
	assert_int_equal(send_str(t, "x", 1), 0);
	rmsgi_ctx_flush(t->ctx);
	/* a local close lingers for the posted send; the peer's frame
	 * arrives meanwhile, and is taken from the CQ during the destroy */
	assert_int_equal(rmsg_conn_close(t->c), 0);
	peer_data(t, "late", 0);
	assert_int_equal(rmsg_ctx_destroy(t->ctx), 0);
	t->ctx = NULL;
	assert_int_equal(t->closed, 1);
}

/* sends the device never completed did not succeed */
static void ctx_destroy__unfinished_sends_canceled(void **state)
{
	struct rt *t = *state;
	int i, status;

	connect_peer(t, 32, 8192);
	for (i = 0; i < 3; i++)
		assert_int_equal(send_str(t, "x", i), 0);
	rmsgi_ctx_flush(t->ctx);
	assert_int_equal(rmsg_ctx_destroy(t->ctx), 0);
	t->ctx = NULL;
	for (i = 0; i < 3; i++) {
		assert_int_equal(done_count(t, i, &status), 1);
		assert_int_equal(status, -ECANCELED);
	}
}

/* the device never flushes after the QP went to error: the teardown
 * timer retires what is left, as failed */
static void close__device_never_flushes(void **state)
{
	struct rt *t = *state;
	int i, status;

	connect_peer(t, 32, 8192);
	mock.flush_on_error = false;
	assert_int_equal(send_str(t, "a", 1), 0);
	assert_int_equal(send_str(t, "b", 2), 0);
	rmsgi_ctx_flush(t->ctx);
	cm_event(t, t->id, RDMA_CM_EVENT_DISCONNECTED, 0, NULL, 0);
	assert_int_equal(mock.n_modify_err, 1);
	for (i = 0; i < 1000 && !t->closed; i++)
		ev_run(t->loop, EVRUN_ONCE); /* 2 s */
	assert_int_equal(t->closed, 1);
	for (i = 1; i <= 2; i++) {
		assert_int_equal(done_count(t, i, &status), 1);
		assert_int_equal(status, -ECONNRESET);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(close__lingers_for_posted_sends),
		T(close__idle),
		T(close__peer_bye),
		T(close__post_error_mid_batch),
		T(ctx_destroy__live_conn),
		T(ctx_destroy__released_buffers_let_conn_go),
		T(ctx_destroy__unfinished_sends_canceled),
		T(close__device_never_flushes),
	};

	unit_filter();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
