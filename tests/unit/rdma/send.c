// SPDX-License-Identifier: MIT
/*
 * unit tests of the send ring (src/transport/rdma/send.c): selective
 * signalling, inline, zero-copy and copied sends, rendezvous requests,
 * direct sends, post and completion failures.
 */
#include "harness.h"

/* sending                                                              */

/* a burst goes out in batches (rmsg.7: fewer doorbells than sends), in
 * order; every send completes once, in order, although the device reports
 * only signalled WRs: the last WR of each flush is signalled (or its
 * callback would wait for a later send that may never come), and no run
 * of unsignalled WRs is as long as the send queue (they free their slots
 * only with a later signalled one, so the queue would fill for good).
 * Today: one doorbell per flush, every 16th and the last WR signalled. */
static void send__selective_signaling(void **state)
{
	struct rt *t = *state;
	unsigned int depth;
	int i, last_sig;

	connect_peer(t, 64, 8192);
	depth = mock.last_qp->attr.cap.max_send_wr;
	for (i = 0; i < 20; i++)
		assert_int_equal(send_str(t, "burst", i), 0);
	rmsgi_ctx_flush(t->ctx);
	assert_int_equal(mock.n_sent, 20);
	assert_true(mock.n_post_send < 20);
	/* the first flush alone retires all of its sends */
	assert_int_equal(mock_complete_sends(t->qpn, -1, IBV_WC_SUCCESS), 20);
	pump(t);
	assert_int_equal(count(t, 'S'), 20);
	/* and the next one, after the count of unsignalled WRs went on */
	for (i = 20; i < 25; i++)
		assert_int_equal(send_str(t, "more", i), 0);
	rmsgi_ctx_flush(t->ctx);
	assert_int_equal(mock.n_sent, 25);
	assert_int_equal(mock_complete_sends(t->qpn, -1, IBV_WC_SUCCESS), 5);
	pump(t);
	assert_int_equal(count(t, 'S'), 25);
	for (i = 0; i < 25; i++) {
		assert_int_equal(t->log[1 + i].kind, 'S');
		assert_int_equal(t->log[1 + i].arg, i);
		assert_int_equal(t->log[1 + i].status, 0);
	}
	for (i = 0, last_sig = -1; i < 25; i++)
		if (mock.sent[i].send_flags & IBV_SEND_SIGNALED) {
			assert_true((unsigned int)(i - last_sig) <= depth);
			last_sig = i;
		}
	assert_int_equal(last_sig, 24);
	assert_int_equal(mock.n_bad_sge, 0);
	assert_int_equal(mock.n_cq_overflow, 0);
}

/* small sends go inline where the device allows (DESIGN.md): header and
 * payload in one WR, the bytes right (today gathered from two SGEs, the
 * header's and the caller's) */
static void send__inline_small(void **state)
{
	struct rt *t = *state;
	char msg[100];
	const struct mock_send_wr *w;
	struct rmsgi_hdr h;

	memset(msg, 'i', sizeof(msg));
	connect_peer(t, 32, 8192);
	assert_int_equal(send_buf(t, msg, sizeof(msg), 1), 0);
	rmsgi_ctx_flush(t->ctx);
	w = &mock.sent[0];
	assert_int_equal(w->opcode, IBV_WR_SEND);
	assert_true(w->send_flags & IBV_SEND_INLINE);
	assert_true(w->num_sge <= (int)mock.last_qp->attr.cap.max_send_sge);
	assert_int_equal(w->total, RMSGI_HDR_SIZE + sizeof(msg));
	sent_hdr(w, &h);
	assert_int_equal(h.type, RMSGI_T_DATA);
	assert_int_equal(h.len, sizeof(msg));
	assert_memory_equal(w->data + RMSGI_HDR_SIZE, msg, sizeof(msg));
	assert_int_equal(mock.n_bad_inline, 0);
}

/* registered memory from the pool is sent in place (rmsg_send.3: without
 * a copy): an SGE covers the caller's buffer itself */
static void send__zero_copy_pool_memory(void **state)
{
	struct rt *t = *state;
	const struct mock_send_wr *w;
	uint8_t *buf;
	int i;

	connect_peer(t, 32, 8192);
	assert_int_equal(rmsg_buf_alloc(t->ctx, 1000, (void **)&buf), 0);
	memset(buf, 'z', 1000);
	assert_int_equal(send_buf(t, buf, 1000, 1), 0);
	rmsgi_ctx_flush(t->ctx);
	w = &mock.sent[0];
	assert_int_equal(w->send_flags & IBV_SEND_INLINE, 0);
	for (i = 0; i < w->num_sge; i++)
		if (w->sge[i].addr == (uintptr_t)buf)
			break;
	assert_true(i < w->num_sge);
	assert_int_equal(w->sge[i].length, 1000);
	assert_int_equal(w->total, RMSGI_HDR_SIZE + 1000);
	/* with the key of the slab the buffer lies in */
	assert_int_equal(mock.n_bad_sge, 0);
	mock_complete_sends(t->qpn, -1, IBV_WC_SUCCESS);
	pump(t);
	assert_int_equal(done_count(t, 1, NULL), 1);
	rmsg_buf_free(t->ctx, buf);
}

/* other memory: copied into registered memory (rmsg_send.3 allows it;
 * today one copy, header and payload in one SGE), at post time, so the
 * caller's buffer is not in the WR and the bytes sent are right */
static void send__copy_foreign_memory(void **state)
{
	struct rt *t = *state;
	const struct mock_send_wr *w;
	uint8_t *buf = malloc(1000);
	struct rmsgi_hdr h;
	size_t i;

	assert_non_null(buf);
	for (i = 0; i < 1000; i++)
		buf[i] = (uint8_t)i;
	connect_peer(t, 32, 8192);
	assert_int_equal(send_buf(t, buf, 1000, 1), 0);
	rmsgi_ctx_flush(t->ctx);
	/* the copy is taken at post time */
	memset(buf, 0, 1000);
	w = &mock.sent[0];
	assert_int_equal(w->send_flags & IBV_SEND_INLINE, 0);
	assert_int_equal(w->total, RMSGI_HDR_SIZE + 1000);
	for (i = 0; i < (size_t)w->num_sge; i++)
		assert_true(w->sge[i].addr + w->sge[i].length <=
				    (uintptr_t)buf ||
			    w->sge[i].addr >= (uintptr_t)buf + 1000);
	assert_int_equal(mock.n_bad_sge, 0);
	sent_hdr(w, &h);
	assert_int_equal(h.len, 1000);
	for (i = 0; i < MOCK_CAPTURE - RMSGI_HDR_SIZE; i++)
		assert_int_equal(w->data[RMSGI_HDR_SIZE + i], (uint8_t)i);
	free(buf);
	mock_complete_sends(t->qpn, -1, IBV_WC_SUCCESS);
	pump(t);
	assert_int_equal(done_count(t, 1, NULL), 1);
}

/* more pieces than the QP has SGEs for: still one message, within the
 * QP's SGE limit (today: one copy), the bytes in order */
static void send__many_iov_copies(void **state)
{
	struct rt *t = *state;
	struct iovec iov[20];
	const struct mock_send_wr *w;
	uint8_t *buf;
	int i;

	connect_peer(t, 32, 8192);
	assert_int_equal(rmsg_buf_alloc(t->ctx, 20 * 64, (void **)&buf), 0);
	for (i = 0; i < 20; i++) {
		memset(buf + i * 64, 'a' + i, 64);
		iov[i].iov_base = buf + i * 64;
		iov[i].iov_len = 64;
	}
	assert_int_equal(rmsg_send(t->c, iov, 20, done_cb, (void *)1), 0);
	rmsgi_ctx_flush(t->ctx);
	assert_int_equal(mock.n_sent, 1);
	w = &mock.sent[0];
	assert_true(w->num_sge <= (int)mock.last_qp->attr.cap.max_send_sge);
	assert_int_equal(w->total, RMSGI_HDR_SIZE + 20 * 64);
	assert_int_equal(w->data[RMSGI_HDR_SIZE], 'a');
	assert_int_equal(w->data[RMSGI_HDR_SIZE + 64 * 7], 'h');
	assert_int_equal(mock.n_bad_sge, 0);
	rmsg_buf_free(t->ctx, buf);
}

/* the device limits the send queue: no more WRs outstanding than the QP
 * was created with, the rest waits for room and goes as sends complete;
 * every send completes once. (Today 8 of the 128 slots stay for reads
 * of the other direction: 120 go at first.) */
static void send__ring_full_waits_for_room(void **state)
{
	struct rt *t = *state;
	unsigned int depth;
	int i, n;

	connect_peer(t, 1000, 8192);
	depth = mock.last_qp->attr.cap.max_send_wr;
	n = (int)depth + 72;
	assert_true(n < 900); /* the logs hold it */
	for (i = 0; i < n; i++)
		assert_int_equal(send_str(t, "r", i), 0);
	rmsgi_ctx_flush(t->ctx);
	assert_true(mock.n_sent > 0);
	assert_true(mock.n_sent < n);
	assert_true(mock_outstanding(t->qpn) <= depth);
	for (i = 0; i < 100 && count(t, 'S') < n; i++) {
		mock_complete_sends(t->qpn, 16, IBV_WC_SUCCESS);
		pump(t);
		assert_true(mock_outstanding(t->qpn) <= depth);
	}
	assert_int_equal(mock.n_sent, n);
	assert_int_equal(count(t, 'S'), n);
	for (i = 0; i < n; i++)
		assert_int_equal(done_count(t, i, NULL), 1);
}

/* the ring's storage starts small and doubles with use (rdma.h
 * RING_MIN): slots filled before a growth keep their order and their
 * headers, and posted work keeps reading the header slots it was given
 * until it completes (the mock compares the bytes of every send at its
 * completion with those at its post); a ring idle for RING_IDLE_MS, with
 * no more than half of it used, halves back to RING_MIN */
static void send__ring_grows_and_shrinks(void **state)
{
	struct rt *t = *state;
	uint8_t *buf;
	int i, n2, n = 90;

	rt_debug_log(t);
	/* the mock's peer answers no keepalive */
	assert_int_equal(rmsg_cfg_set_keepalive_ms(t->cfg, 0), 0);
	connect_peer(t, 1000, 8192);
	assert_int_equal(rmsg_buf_alloc(t->ctx, 1000, (void **)&buf), 0);
	memset(buf, 'g', 1000);
	/* 10 posted and not completed, then 80 more: the ring grows while
	 * the first ones are on the device */
	for (i = 0; i < 10; i++)
		assert_int_equal(send_buf(t, buf, 1000, i), 0);
	rmsgi_ctx_flush(t->ctx);
	assert_int_equal(mock.n_sent, 10);
	assert_int_equal(t->ring_moves, 0);
	for (; i < n; i++)
		assert_int_equal(send_buf(t, buf, 1000, i), 0);
	rmsgi_ctx_flush(t->ctx);
	assert_true(t->ring_moves >= 1);
	assert_true(mock.n_sent > 10);
	for (i = 0; i < 100 && count(t, 'S') < n; i++) {
		mock_complete_sends(t->qpn, 8, IBV_WC_SUCCESS);
		pump(t);
	}
	assert_int_equal(mock.n_sent, n);
	assert_int_equal(count(t, 'S'), n);
	for (i = 0; i < n; i++) {
		struct rmsgi_hdr h;

		assert_int_equal(t->log[1 + i].arg, i);
		assert_int_equal(t->log[1 + i].status, 0);
		sent_hdr(&mock.sent[i], &h);
		assert_int_equal(h.len, 1000);
	}
	assert_int_equal(mock.n_changed_before_read, 0);
	assert_int_equal(mock.n_bad_sge, 0);
	/* idle: it halves back to 16, a check a second (the first check
	 * finds it was busy); 64 or 128 slots needs 2 or 3 moves */
	i = t->ring_moves;
	assert_true(strstr(t->ring_last, "-> 64 slots") ||
		    strstr(t->ring_last, "-> 128 slots"));
	for (n2 = 0; n2 < 16 && !strstr(t->ring_last, "32 -> 16 slots"); n2++)
		run_for(t, 0.5); /* a loaded machine may run the checks late */
	assert_true(t->ring_moves == i + 2 || t->ring_moves == i + 3);
	assert_non_null(strstr(t->ring_last, "32 -> 16 slots"));
	/* and it grows again */
	for (i = 0; i < 40; i++)
		assert_int_equal(send_buf(t, buf, 1000, n + i), 0);
	rmsgi_ctx_flush(t->ctx);
	mock_complete_sends(t->qpn, -1, IBV_WC_SUCCESS);
	pump(t);
	assert_int_equal(count(t, 'S'), n + 40);
	assert_non_null(strstr(t->ring_last, "-> 64 slots"));
	assert_int_equal(mock.n_changed_before_read, 0);
	rmsg_buf_free(t->ctx, buf);
}

/* a rendezvous message of 20 pieces needs 21 slots of an empty ring of
 * 16; when the ring cannot grow (no memory registered for its header
 * slots) the message fails with -ENOMEM: no completion would ever bring
 * the room it waited for (it stalled for good before) */
static void send__ring_growth_fails(void **state)
{
	struct rt *t = *state;
	struct iovec iov[20];
	uint8_t *big = malloc(20 * 9000);
	int i, status = 1;

	assert_non_null(big);
	mock.mw_type2 = true;
	connect_peer(t, 32, 8192);
	for (i = 0; i < 20; i++) {
		iov[i].iov_base = big + i * 9000;
		iov[i].iov_len = 9000;
	}
	mock.reg_mr_fail_at = 2; /* the frame's buffer, then the growth */
	assert_int_equal(rmsg_send(t->c, iov, 20, done_cb, (void *)7), 0);
	for (i = 0; i < 5 && !done_count(t, 7, NULL); i++) {
		rmsgi_ctx_flush(t->ctx);
		mock_complete_sends(t->qpn, -1, IBV_WC_SUCCESS);
		pump(t);
	}
	assert_int_equal(done_count(t, 7, &status), 1);
	assert_int_equal(status, -ENOMEM);
	/* the connection goes on */
	assert_int_equal(t->closed, 0);
	assert_int_equal(send_str(t, "after", 8), 0);
	rmsgi_ctx_flush(t->ctx);
	mock_complete_sends(t->qpn, -1, IBV_WC_SUCCESS);
	pump(t);
	assert_int_equal(done_count(t, 8, &status), 1);
	assert_int_equal(status, 0);
	free(big);
}

/* rendezvous send                                                      */

static void send__rendezvous(void **state)
{
	struct rt *t = *state;
	uint8_t *big = malloc(20000);
	const struct mock_send_wr *w;
	struct rmsgi_hdr h;
	struct rmsgi_seg seg;
	int dereg, status = 1;

	assert_non_null(big);
	connect_peer(t, 32, 8192);
	assert_int_equal(send_buf(t, big, 20000, 1), 0);
	rmsgi_ctx_flush(t->ctx);
	assert_int_equal(mock.n_reg_remote_read, 1);
	w = &mock.sent[0];
	assert_int_equal(w->opcode, IBV_WR_SEND);
	assert_int_equal(w->total, RMSGI_HDR_SIZE + RMSGI_SEG_SIZE);
	sent_hdr(w, &h);
	assert_int_equal(h.type, RMSGI_T_RNDV_REQ);
	assert_int_equal(h.len, 20000);
	rmsgi_seg_decode(w->data + RMSGI_HDR_SIZE, &seg);
	assert_int_equal(seg.addr, (uintptr_t)big);
	assert_int_equal(seg.len, 20000);
	assert_true(seg.rkey & 0x80000000u); /* the mock's rkeys */
	/* the request went, the payload is still the peer's to read */
	mock_complete_sends(t->qpn, -1, IBV_WC_SUCCESS);
	pump(t);
	assert_int_equal(done_count(t, 1, NULL), 0);
	dereg = mock.n_dereg_mr;
	peer_frame(t, RMSGI_T_RNDV_ACK, 0, 0, h.id, 0, NULL, 0);
	pump(t);
	assert_int_equal(done_count(t, 1, &status), 1);
	assert_int_equal(status, 0);
	assert_int_equal(mock.n_dereg_mr, dereg + 1);
	free(big);
}

/* with type-2 windows the payload is pinned without remote rights and
 * a window for remote read, bound (fenced) on this QP before the
 * request, is all the peer gets; it goes on the acknowledgement */
static void send__rendezvous_window(void **state)
{
	struct rt *t = *state;
	uint8_t *big = malloc(20000);
	const struct mock_send_wr *b, *w;
	struct rmsgi_hdr h;
	struct rmsgi_seg seg;
	int status = 1;

	assert_non_null(big);
	mock.mw_type2 = true;
	connect_peer(t, 32, 8192);
	assert_int_equal(send_buf(t, big, 20000, 1), 0);
	rmsgi_ctx_flush(t->ctx);
	assert_int_equal(mock.n_reg_remote_read, 0);
	assert_int_equal(mock.n_alloc_mw, 1);
	assert_int_equal(mock.n_sent, 2);
	b = &mock.sent[0];
	w = &mock.sent[1];
	assert_int_equal(b->opcode, IBV_WR_BIND_MW);
	assert_true(b->send_flags & IBV_SEND_FENCE);
	assert_int_equal(b->mw_access, IBV_ACCESS_REMOTE_READ);
	assert_int_equal(b->mw_addr, (uintptr_t)big);
	assert_int_equal(b->mw_len, 20000);
	assert_true(b->mw_mr->addr == big && b->mw_mr->length == 20000);
	assert_int_not_equal(b->mw_rkey, b->mw->rkey); /* a fresh key */
	assert_int_equal(w->opcode, IBV_WR_SEND);
	sent_hdr(w, &h);
	assert_int_equal(h.type, RMSGI_T_RNDV_REQ);
	rmsgi_seg_decode(w->data + RMSGI_HDR_SIZE, &seg);
	assert_int_equal(seg.addr, (uintptr_t)big);
	assert_int_equal(seg.rkey, b->mw_rkey);
	mock_complete_sends(t->qpn, -1, IBV_WC_SUCCESS);
	pump(t);
	assert_int_equal(mock.n_dealloc_mw, 0);
	peer_frame(t, RMSGI_T_RNDV_ACK, 0, 0, h.id, 0, NULL, 0);
	pump(t);
	assert_int_equal(done_count(t, 1, &status), 1);
	assert_int_equal(status, 0);
	assert_int_equal(mock.n_dealloc_mw, 1);
	free(big);
}

/* a window's bind goes only onto an empty send queue: rxe (6.1) executes
 * a bind again when a SEND posted before it is retransmitted, and the
 * second bind of a type-2 window fails (IBV_WC_MW_BIND_ERR), taking the
 * connection down. The bind and the request behind it wait for the
 * SEND's completion; the order on the wire is kept. */
static void send__rendezvous_bind_waits_for_empty_queue(void **state)
{
	struct rt *t = *state;
	uint8_t *big = malloc(20000);
	struct rmsgi_hdr h;
	uint64_t req_id;
	int status = 1;

	assert_non_null(big);
	mock.mw_type2 = true;
	connect_peer(t, 32, 8192);
	assert_int_equal(send_str(t, "first", 1), 0);
	rmsgi_ctx_flush(t->ctx);
	assert_int_equal(mock.n_sent, 1);
	assert_int_equal(send_buf(t, big, 20000, 2), 0);
	assert_int_equal(send_str(t, "after", 3), 0);
	rmsgi_ctx_flush(t->ctx);
	/* the window exists, its bind and what follows are held */
	assert_int_equal(mock.n_alloc_mw, 1);
	assert_int_equal(mock.n_sent, 1);
	mock_complete_sends(t->qpn, -1, IBV_WC_SUCCESS);
	pump(t);
	assert_int_equal(done_count(t, 1, &status), 1);
	assert_int_equal(status, 0);
	/* the queue emptied: bind, request and the next message, in order */
	assert_int_equal(mock.n_sent, 4);
	assert_int_equal(mock.sent[1].opcode, IBV_WR_BIND_MW);
	sent_hdr(&mock.sent[2], &h);
	assert_int_equal(h.type, RMSGI_T_RNDV_REQ);
	req_id = h.id;
	sent_hdr(&mock.sent[3], &h);
	assert_int_equal(h.type, RMSGI_T_DATA);
	/* a bind with nothing unretired before it goes at once */
	mock_complete_sends(t->qpn, -1, IBV_WC_SUCCESS);
	pump(t);
	peer_frame(t, RMSGI_T_RNDV_ACK, 0, 0, req_id, 0, NULL, 0);
	pump(t);
	assert_int_equal(done_count(t, 2, &status), 1);
	assert_int_equal(status, 0);
	assert_int_equal(send_buf(t, big, 20000, 4), 0);
	rmsgi_ctx_flush(t->ctx);
	assert_int_equal(mock.n_sent, 6);
	assert_int_equal(mock.sent[4].opcode, IBV_WR_BIND_MW);
	free(big);
}

/* the first send of a loop iteration on an idle connection (today posted
 * inside rmsg_send() itself, inline and signalled, and the next ones of
 * the iteration at the flush): its callback never runs inside rmsg_send()
 * (the completion rule), the three go out in order, each callback once */
static void send__direct_first_of_iteration(void **state)
{
	struct rt *t = *state;
	struct rmsgi_hdr h;
	int i, status;

	connect_peer(t, 32, 8192);
	ev_sleep(0.002);
	ev_now_update(t->loop);
	assert_int_equal(send_str(t, "direct", 0), 0);
	assert_int_equal(count(t, 'S'), 0); /* never inside rmsg_send */
	assert_int_equal(send_str(t, "queued", 1), 0);
	assert_int_equal(send_str(t, "queued", 2), 0);
	assert_int_equal(count(t, 'S'), 0);
	rmsgi_ctx_flush(t->ctx);
	assert_int_equal(mock.n_sent, 3);
	for (i = 0; i < 3; i++) {
		sent_hdr(&mock.sent[i], &h);
		assert_int_equal(h.type, RMSGI_T_DATA);
		assert_int_equal(h.len, 6);
		assert_memory_equal(mock.sent[i].data + RMSGI_HDR_SIZE,
				    i ? "queued" : "direct", 6);
	}
	assert_int_equal(mock_complete_sends(t->qpn, -1, IBV_WC_SUCCESS), 3);
	pump(t);
	assert_int_equal(count(t, 'S'), 3);
	for (i = 0; i < 3; i++) {
		assert_int_equal(done_count(t, i, &status), 1);
		assert_int_equal(status, 0);
	}
	assert_int_equal(mock.n_bad_sge, 0);
}

/* a direct post the device refuses is not reported inside rmsg_send():
 * the send takes the queue and fails from the loop like any other */
static void send__direct_post_failure(void **state)
{
	struct rt *t = *state;
	int status;

	connect_peer(t, 32, 8192);
	ev_sleep(0.002);
	ev_now_update(t->loop);
	mock.post_send_ret = ENOMEM;
	assert_int_equal(send_str(t, "x", 0), 0);
	assert_int_equal(t->closed, 0);
	assert_int_equal(count(t, 'S'), 0);
	mock.post_send_ret = ENOMEM;
	pump(t);
	assert_int_equal(done_count(t, 0, &status), 1);
	assert_int_equal(status, -ENOMEM);
	assert_int_equal(t->closed, 1);
	assert_int_equal(t->close_reason, -ENOMEM);
}

/* post and completion failures                                         */

static void send__post_send_failure(void **state)
{
	struct rt *t = *state;
	int i, status;

	connect_peer(t, 32, 8192);
	mock.post_send_ret = ENOMEM;
	for (i = 0; i < 3; i++)
		assert_int_equal(send_str(t, "x", i), 0);
	pump(t);
	for (i = 0; i < 3; i++) {
		assert_int_equal(done_count(t, i, &status), 1);
		assert_int_equal(status, -ENOMEM);
	}
	assert_int_equal(t->closed, 1);
	assert_int_equal(t->close_reason, -ENOMEM);
	assert_int_equal(t->log[t->nlog - 1].kind, 'X');
	assert_int_equal(mock.n_modify_err, 1);
	assert_int_equal(mock.live_qp, 0);
}

/* the device took the first two of a chain: those flush, the rest never
 * went; all fail with the post's error, once */
static void send__post_send_partial_failure(void **state)
{
	struct rt *t = *state;
	int i, status;

	connect_peer(t, 32, 8192);
	mock.post_send_ret = EAGAIN;
	mock.post_send_bad = 2;
	for (i = 0; i < 5; i++)
		assert_int_equal(send_str(t, "x", i), 0);
	rmsgi_ctx_flush(t->ctx);
	assert_int_equal(mock.n_sent, 2);
	pump(t);
	for (i = 0; i < 5; i++) {
		assert_int_equal(done_count(t, i, &status), 1);
		assert_int_equal(status, -EAGAIN);
	}
	assert_int_equal(t->closed, 1);
	assert_int_equal(t->close_reason, -EAGAIN);
	assert_int_equal(count(t, 'X'), 1);
}

/* every error status of a send completion reaches the op and on_close as
 * the errno rmsgi_err_wc() documents */
static void send__wc_error_statuses(void **state)
{
	int s;

	teardown(state);
	for (s = IBV_WC_LOC_LEN_ERR; s <= IBV_WC_TM_RNDV_INCOMPLETE; s++) {
		struct rt *t;
		int status = 0, expect = rmsgi_err_wc(s);

		if (s == IBV_WC_WR_FLUSH_ERR)
			continue;
		t = rt_new();
		connect_peer(t, 32, 8192);
		assert_int_equal(send_str(t, "x", 1), 0);
		rmsgi_ctx_flush(t->ctx);
		mock_complete_sends(t->qpn, -1, (enum ibv_wc_status)s);
		pump(t);
		assert_true(expect < 0 && expect != -ECANCELED);
		if (done_count(t, 1, &status) != 1 || status != expect ||
		    t->closed != 1 || t->close_reason != expect)
			fail_msg("status %d: done %d/%d, close %d/%d", s,
				 done_count(t, 1, NULL), status, t->closed,
				 t->close_reason);
		assert_true(rt_free(t));
	}
	*state = rt_new();
}

/* spot checks of the documented mapping, end to end */
static void send__wc_error_documented(void **state)
{
	static const struct {
		enum ibv_wc_status st;
		int err;
	} cases[] = {
		{IBV_WC_RETRY_EXC_ERR, -ETIMEDOUT},
		{IBV_WC_REM_ACCESS_ERR, -EACCES},
		{IBV_WC_RNR_RETRY_EXC_ERR, -ENOBUFS},
		{IBV_WC_REM_ABORT_ERR, -ECONNRESET},
		{IBV_WC_REM_OP_ERR, -EREMOTEIO},
		{IBV_WC_LOC_LEN_ERR, -EPROTO},
		{IBV_WC_FATAL_ERR, -EIO},
	};
	size_t i;

	teardown(state);
	for (i = 0; i < UNIT_ARRAY_SIZE(cases); i++) {
		struct rt *t = rt_new();
		int status = 0;

		connect_peer(t, 32, 8192);
		assert_int_equal(send_str(t, "x", 1), 0);
		rmsgi_ctx_flush(t->ctx);
		mock_complete_sends(t->qpn, -1, cases[i].st);
		pump(t);
		assert_int_equal(done_count(t, 1, &status), 1);
		assert_int_equal(status, cases[i].err);
		assert_int_equal(t->close_reason, cases[i].err);
		assert_true(rt_free(t));
	}
	*state = rt_new();
}

/* an error on a signalled WR: the unsignalled ones before it were done
 * (completions are in order), the later doorbells flush */
static void send__wc_error_and_flush(void **state)
{
	struct rt *t = *state;
	int status;

	connect_peer(t, 32, 8192);
	assert_int_equal(send_str(t, "a", 1), 0);
	assert_int_equal(send_str(t, "b", 2), 0);
	assert_int_equal(send_str(t, "c", 3), 0);
	rmsgi_ctx_flush(t->ctx);
	/* d is posted by the next flush, a doorbell of its own (a send
	 * right after a flush would go direct: inline, reported at once) */
	t->c->tx.burst = false;
	assert_int_equal(send_str(t, "d", 4), 0);
	rmsgi_ctx_flush(t->ctx);
	assert_int_equal(mock.n_sent, 4);
	mock_complete_sends(t->qpn, 3, IBV_WC_RETRY_EXC_ERR);
	pump(t);
	assert_int_equal(done_count(t, 1, &status), 1);
	assert_int_equal(status, 0);
	assert_int_equal(done_count(t, 2, &status), 1);
	assert_int_equal(status, 0);
	assert_int_equal(done_count(t, 3, &status), 1);
	assert_int_equal(status, -ETIMEDOUT);
	assert_int_equal(done_count(t, 4, &status), 1);
	assert_int_equal(status, -ETIMEDOUT);
	assert_int_equal(t->close_reason, -ETIMEDOUT);
	assert_int_equal(t->log[t->nlog - 1].kind, 'X');
}

static void established__disconnected(void **state)
{
	struct rt *t = *state;
	int status;

	connect_peer(t, 32, 8192);
	assert_int_equal(send_str(t, "a", 1), 0);
	rmsgi_ctx_flush(t->ctx);
	cm_event(t, t->id, RDMA_CM_EVENT_DISCONNECTED, 0, NULL, 0);
	pump(t);
	assert_int_equal(done_count(t, 1, &status), 1);
	assert_int_equal(status, -ECONNRESET);
	assert_int_equal(t->closed, 1);
	assert_int_equal(t->close_reason, -ECONNRESET);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(send__selective_signaling),
		T(send__inline_small),
		T(send__zero_copy_pool_memory),
		T(send__copy_foreign_memory),
		T(send__many_iov_copies),
		T(send__ring_full_waits_for_room),
		T(send__ring_grows_and_shrinks),
		T(send__ring_growth_fails),
		T(send__rendezvous),
		T(send__rendezvous_window),
		T(send__rendezvous_bind_waits_for_empty_queue),
		T(send__direct_first_of_iteration),
		T(send__direct_post_failure),
		T(send__post_send_failure),
		T(send__post_send_partial_failure),
		T(send__wc_error_statuses),
		T(send__wc_error_documented),
		T(send__wc_error_and_flush),
		T(established__disconnected),
	};

	unit_filter();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
