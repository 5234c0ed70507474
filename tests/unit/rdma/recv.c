// SPDX-License-Identifier: MIT
/*
 * unit tests of completions and receives (src/transport/rdma/recv.c):
 * eager receives, reposting, frames a peer may not send, rendezvous reads
 * and how they share the device, what a peer's credits bound.
 */
#include "harness.h"

/* receiving                                                            */

static void recv__data_delivered(void **state)
{
	struct rt *t = *state;
	unsigned int posted;

	connect_peer(t, 32, 8192);
	posted = mock_srq_posted();
	peer_data(t, "hello", 0);
	assert_int_equal(mock_srq_posted(), posted - 1);
	pump(t);
	assert_int_equal(t->msgs, 1);
	assert_int_equal(t->last_len, 5);
	assert_memory_equal(t->last_msg, "hello", 5);
	/* the buffer went back once on_msg returned */
	assert_int_equal(mock_srq_posted(), posted);
}

/* released buffers all go back to the SRQ (today 16 at a time within a
 * drain, the rest at the next poll), and their credits go back to the
 * peer: with no message to carry them, in CREDIT frames of at least a
 * quarter of the grant (rmsg_cfg_set_credits.3; the default grant is
 * 32), none lost, and no quarter left behind once the loop is idle */
static void recv__repost_in_batches(void **state)
{
	struct rt *t = *state;
	struct rmsgi_hdr h;
	unsigned int posted, returned = 0;
	int i;

	/* a fixed grant of 32 (the grant that grows: grow__ tests) */
	assert_int_equal(rmsg_cfg_set_credits_initial(t->cfg, 32), 0);
	connect_peer(t, 32, 8192);
	posted = mock_srq_posted();
	for (i = 0; i < 20; i++)
		peer_data(t, "m", 0);
	for (i = 0; i < 5; i++) { /* a few loop iterations */
		rt_poll(t->ctx);
		rmsgi_ctx_flush(t->ctx);
		mock_complete_sends(t->qpn, -1, IBV_WC_SUCCESS);
	}
	assert_int_equal(t->msgs, 20);
	assert_int_equal(mock_srq_posted(), posted);
	assert_true(mock.n_sent >= 1);
	for (i = 0; i < mock.n_sent; i++) {
		sent_hdr(&mock.sent[i], &h);
		assert_int_equal(h.type, RMSGI_T_CREDIT);
		assert_true(h.credits >= 32 / 4);
		returned += h.credits;
	}
	assert_int_equal(returned + t->c->cr.to_return, 20);
	assert_true(t->c->cr.to_return < 32 / 4);
	assert_int_equal(mock.n_bad_sge, 0);
}

static void recv__credits_enable_sends(void **state)
{
	struct rt *t = *state;
	int i;

	connect_peer(t, 4, 8192);
	for (i = 0; i < 5; i++)
		assert_int_equal(send_str(t, "x", i), 0);
	rmsgi_ctx_flush(t->ctx);
	assert_int_equal(mock.n_sent, 3);
	peer_data(t, "credits", 2);
	pump(t);
	assert_int_equal(mock.n_sent, 5);
}

static void recv__bad_frames(void **state)
{
	static const char *const names[] = {
		"bad magic",
		"DATA length mismatch",
		"HELLO on RDMA",
		"CREDIT with payload",
		"credits beyond grant",
		"RNDV_REQ without segments",
		"RNDV_REQ odd segment bytes",
		"RNDV_REQ empty segment",
		"RNDV_REQ sum mismatch",
		"RNDV_REQ above max_msg_size",
		"short frame",
	};
	size_t i;

	teardown(state);
	for (i = 0; i < UNIT_ARRAY_SIZE(names); i++) {
		struct rt *t = rt_new();
		struct rmsgi_seg segs[2] = {{0x1000, 100, 1}, {0x2000, 0, 1}};
		uint8_t f[64];
		int expect = -EPROTO;

		assert_int_equal(rmsg_cfg_set_max_msg_size(t->cfg, 1 << 20), 0);
		connect_peer(t, 32, 8192);
		switch (i) {
		case 0:
			memset(f, 0, sizeof(f));
			assert_int_equal(mock_recv(t->qpn, f, 40), 0);
			break;
		case 1:
			peer_frame(t, RMSGI_T_DATA, 0, 0, 0, 10, "abc", 3);
			break;
		case 2:
			peer_frame(t, RMSGI_T_HELLO, 0, 0, 0, 16, f, 16);
			break;
		case 3:
			peer_frame(t, RMSGI_T_CREDIT, 1, 0, 0, 0, "x", 1);
			break;
		case 4:
			peer_frame(t, RMSGI_T_CREDIT, 33, 0, 0, 0, NULL, 0);
			break;
		case 5:
			peer_rndv(t, 1, 100, segs, 0);
			break;
		case 6:
			peer_frame(t, RMSGI_T_RNDV_REQ, 0, 0, 1, 100, f, 8);
			break;
		case 7:
			peer_rndv(t, 1, 100, segs, 2);
			break;
		case 8:
			peer_rndv(t, 1, 101, segs, 1);
			break;
		case 9:
			segs[0].len = (1 << 20) + 1;
			peer_rndv(t, 1, (1 << 20) + 1, segs, 1);
			expect = -EMSGSIZE;
			break;
		default:
			assert_int_equal(mock_recv(t->qpn, "\xa7\x01", 2), 0);
			break;
		}
		pump(t);
		if (t->closed != 1 || t->close_reason != expect || t->msgs != 0)
			fail_msg("%s: closed %d reason %d msgs %d", names[i],
				 t->closed, t->close_reason, t->msgs);
		/* no read was started from a bad request */
		assert_int_equal(mock.n_sent, 0);
		assert_true(rt_free(t));
	}
	*state = rt_new();
}

static void recv__wc_error(void **state)
{
	struct rt *t = *state;

	connect_peer(t, 32, 8192);
	/* a flushed receive alone says nothing */
	assert_int_equal(mock_recv_error(t->qpn, IBV_WC_WR_FLUSH_ERR), 0);
	pump(t);
	assert_int_equal(t->closed, 0);
	assert_int_equal(mock_recv_error(t->qpn, IBV_WC_LOC_LEN_ERR), 0);
	pump(t);
	assert_int_equal(t->closed, 1);
	assert_int_equal(t->close_reason, -EPROTO);
}

/* rendezvous receive                                                   */

static uint8_t *pattern(size_t len, unsigned int seed)
{
	uint8_t *p = malloc(len);
	size_t i;

	assert_non_null(p);
	for (i = 0; i < len; i++)
		p[i] = (uint8_t)(i * 31 + seed);
	return p;
}

/* the receiver reads the payload, acknowledges, then delivers */
static void rndv_rx__reads_and_acks(void **state)
{
	struct rt *t = *state;
	uint8_t *src = pattern(20000, 1);
	struct rmsgi_seg seg = {(uintptr_t)src, 20000, 0x4242};
	const struct mock_send_wr *w;
	struct rmsgi_hdr h;

	connect_peer(t, 32, 8192);
	peer_rndv(t, 99, 20000, &seg, 1);
	pump(t);
	assert_int_equal(mock.n_sent, 1);
	w = &mock.sent[0];
	assert_int_equal(w->opcode, IBV_WR_RDMA_READ);
	assert_true(w->send_flags & IBV_SEND_SIGNALED);
	assert_int_equal(w->remote_addr, (uintptr_t)src);
	assert_int_equal(w->rkey, 0x4242);
	assert_int_equal(w->sge[0].length, 20000);
	assert_int_equal(mock.n_bad_sge, 0);
	/* the request's buffer went back at once */
	assert_int_equal(t->msgs, 0);
	mock_complete_sends(t->qpn, -1, IBV_WC_SUCCESS);
	pump(t);
	assert_int_equal(t->msgs, 1);
	assert_int_equal(t->last_len, 20000);
	assert_memory_equal(t->last_msg, src, 20000);
	/* the ACK was handed to the device before on_msg ran */
	assert_int_equal(t->sent_at_msg, 2);
	sent_hdr(&mock.sent[1], &h);
	assert_int_equal(h.type, RMSGI_T_RNDV_ACK);
	assert_int_equal(h.id, 99);
	assert_int_equal(h.aux, 0);
	free(src);
}

/* a read the device completed without writing (rxe did, under load):
 * the canary over the destination's ends is still there, so the read
 * fails with -EIO and the connection ends with it; no message of stale
 * bytes is delivered */
static void rndv_rx__unwritten_read_fails(void **state)
{
	struct rt *t = *state;
	uint8_t *src = pattern(20000, 3);
	struct rmsgi_seg seg = {(uintptr_t)src, 20000, 0x4242};

	connect_peer(t, 32, 8192);
	peer_rndv(t, 99, 20000, &seg, 1);
	pump(t);
	assert_int_equal(mock.n_sent, 1);
	mock.reads_unwritten = 1;
	mock_complete_sends(t->qpn, -1, IBV_WC_SUCCESS);
	pump(t);
	assert_int_equal(t->msgs, 0);
	/* what the close posted (the ACK saying so) completes */
	mock_complete_sends(t->qpn, -1, IBV_WC_SUCCESS);
	pump(t);
	assert_int_equal(t->msgs, 0);
	assert_int_equal(t->closed, 1);
	assert_int_equal(t->close_reason, -EIO);
	free(src);
}

/* a held rendezvous message released twice: the second call finds it not
 * held, and does not release the next message (which may reuse nothing
 * of it while it waits in the quarantine) */
static void rndv_rx__second_release(void **state)
{
	struct rt *t = *state;
	uint8_t *src = pattern(20000, 2);
	struct rmsgi_seg seg = {(uintptr_t)src, 20000, 0x4242};
	struct rmsg_msg *first;

	connect_peer(t, 32, 8192);
	t->hold = true;
	peer_rndv(t, 1, 20000, &seg, 1);
	pump(t);
	mock_complete_sends(t->qpn, -1, IBV_WC_SUCCESS);
	pump(t);
	assert_int_equal(t->msgs, 1);
	first = t->held[1];
	rmsg_msg_release(first);
	peer_rndv(t, 2, 20000, &seg, 1);
	pump(t);
	mock_complete_sends(t->qpn, -1, IBV_WC_SUCCESS);
	pump(t);
	assert_int_equal(t->msgs, 2);
	assert_ptr_not_equal(t->held[1], first);
	rmsg_msg_release(first); /* the misuse */
	assert_int_equal(t->held[1]->held, 1);
	assert_memory_equal(rmsg_msg_data(t->held[1]), src, 20000);
	rmsg_msg_release(t->held[1]);
	t->hold = false;
	free(src);
}

/* reads are cut at the port's message size and spread over segments */
static void rndv_rx__split_reads(void **state)
{
	struct rt *t = *state;
	uint8_t *a = pattern(7000, 2), *b = pattern(5000, 3);
	struct rmsgi_seg segs[2] = {{(uintptr_t)a, 7000, 1},
				    {(uintptr_t)b, 5000, 2}};
	static const uint32_t lens[] = {4096, 2904, 4096, 904};
	int i;

	mock.max_msg_sz = 4096;
	connect_peer(t, 32, 8192);
	peer_rndv(t, 5, 12000, segs, 2);
	pump(t);
	assert_int_equal(mock.n_sent, 4);
	for (i = 0; i < 4; i++) {
		assert_int_equal(mock.sent[i].opcode, IBV_WR_RDMA_READ);
		assert_int_equal(mock.sent[i].sge[0].length, lens[i]);
	}
	assert_int_equal(mock.sent[1].remote_addr, (uintptr_t)a + 4096);
	assert_int_equal(mock.sent[2].remote_addr, (uintptr_t)b);
	assert_int_equal(mock.sent[2].rkey, 2);
	assert_int_equal(mock.sent[3].sge[0].addr,
			 mock.sent[0].sge[0].addr + 11096);
	mock_complete_sends(t->qpn, -1, IBV_WC_SUCCESS);
	pump(t);
	assert_int_equal(t->msgs, 1);
	assert_memory_equal(t->last_msg, a, 7000);
	assert_memory_equal(t->last_msg + 7000, b, 5000);
	free(a);
	free(b);
}

/* no more reads in flight than the device's rd_atom */
/* the read's completion delivers the message, and the RNDV_ACK's post
 * sends everything queued behind it at once: 40 sends that grow the send
 * ring from inside the retirement of the read (the slot being retired
 * moves; ASan's run of this test caught a read of it after the move) */
static void rndv_rx__done_posts_and_grows(void **state)
{
	struct rt *t = *state;
	uint8_t *src = pattern(20000, 5);
	struct rmsgi_seg seg = {(uintptr_t)src, 20000, 9};
	int i;

	connect_peer(t, 64, 8192);
	peer_rndv(t, 7, 20000, &seg, 1);
	pump(t);
	assert_int_equal(mock.n_sent, 1); /* the read */
	for (i = 0; i < 40; i++)
		assert_int_equal(send_str(t, "behind", 100 + i), 0);
	mock_complete_sends(t->qpn, -1, IBV_WC_SUCCESS);
	rt_poll(t->ctx);
	assert_int_equal(t->msgs, 1);
	assert_memory_equal(t->last_msg, src, 20000);
	for (i = 0; i < 20 && count(t, 'S') < 40; i++) {
		mock_complete_sends(t->qpn, -1, IBV_WC_SUCCESS);
		pump(t);
	}
	assert_int_equal(count(t, 'S'), 40);
	for (i = 0; i < 40; i++)
		assert_int_equal(done_count(t, 100 + i, NULL), 1);
	/* reads still within the device's limit afterwards */
	peer_rndv(t, 8, 20000, &seg, 1);
	pump(t);
	assert_true(mock_outstanding(t->qpn) >= 1);
	mock_complete_sends(t->qpn, -1, IBV_WC_SUCCESS);
	pump(t);
	assert_int_equal(t->msgs, 2);
	assert_int_equal(mock.n_changed_before_read, 0);
	free(src);
}

static void rndv_rx__reads_within_rd_atom(void **state)
{
	struct rt *t = *state;
	uint8_t *src = pattern(10000, 4);
	struct rmsgi_seg seg = {(uintptr_t)src, 10000, 7};
	int i;

	mock.max_msg_sz = 1000;
	mock.max_qp_rd_atom = 2;
	connect_peer(t, 32, 8192);
	peer_rndv(t, 6, 10000, &seg, 1);
	pump(t);
	assert_int_equal(mock_outstanding(t->qpn), 2);
	for (i = 0; i < 20 && !t->msgs; i++) {
		assert_true(mock_outstanding(t->qpn) <= 2);
		mock_complete_sends(t->qpn, 1, IBV_WC_SUCCESS);
		pump(t);
	}
	assert_int_equal(t->msgs, 1);
	assert_memory_equal(t->last_msg, src, 10000);
	free(src);
}

/* a failed read: nothing delivered, the sender hears the errno */
static void rndv_rx__read_error(void **state)
{
	struct rt *t = *state;
	uint8_t *src = pattern(20000, 5);
	struct rmsgi_seg seg = {(uintptr_t)src, 20000, 7};
	struct rmsgi_hdr h;

	connect_peer(t, 32, 8192);
	peer_rndv(t, 8, 20000, &seg, 1);
	pump(t);
	mock_complete_sends(t->qpn, -1, IBV_WC_REM_ACCESS_ERR);
	pump(t);
	assert_int_equal(t->msgs, 0);
	assert_int_equal(t->closed, 1);
	assert_int_equal(t->close_reason, -EACCES);
	assert_int_equal(mock.n_sent, 2);
	sent_hdr(&mock.sent[1], &h);
	assert_int_equal(h.type, RMSGI_T_RNDV_ACK);
	assert_int_equal(h.id, 8);
	assert_int_equal(h.aux, EACCES);
	free(src);
}

/* no memory for the payload (the context's budget is used up): no read,
 * the sender hears -ENOMEM in the ACK, the connection stays up and takes
 * the next messages, and a rendezvous goes through once memory is back */
static void rndv_rx__no_memory_refused(void **state)
{
	struct rt *t = *state;
	uint8_t *src = pattern(20000, 9);
	struct rmsgi_seg seg = {(uintptr_t)src, 20000, 7};
	static void *bufs[256];
	struct rmsgi_hdr h;
	int n = 0, i, warnings;

	assert_int_equal(rmsg_cfg_set_reg_limit(t->cfg, 8 << 20), 0);
	assert_int_equal(rmsg_cfg_set_credits_initial(t->cfg, 32), 0);
	connect_peer(t, 32, 8192);
	while (rmsg_buf_alloc(t->ctx, 65536, &bufs[n]) == 0)
		assert_true(++n < 256);
	warnings = t->warnings;
	peer_rndv(t, 11, 20000, &seg, 1);
	pump(t);
	assert_int_equal(t->closed, 0);
	assert_int_equal(t->msgs, 0);
	assert_int_equal(mock.n_sent, 1); /* the ACK, no read */
	sent_hdr(&mock.sent[0], &h);
	assert_int_equal(h.type, RMSGI_T_RNDV_ACK);
	assert_int_equal(h.id, 11);
	assert_int_equal(h.aux, ENOMEM);
	assert_true(t->warnings > warnings);
	peer_data(t, "next", 0);
	pump(t);
	assert_int_equal(t->msgs, 1);
	assert_int_equal(t->last_len, 4);
	assert_memory_equal(t->last_msg, "next", 4);
	for (i = 0; i < n; i++)
		rmsg_buf_free(t->ctx, bufs[i]);
	peer_rndv(t, 12, 20000, &seg, 1);
	pump(t);
	assert_int_equal(mock.sent[1].opcode, IBV_WR_RDMA_READ);
	mock_complete_sends(t->qpn, -1, IBV_WC_SUCCESS);
	pump(t);
	assert_int_equal(t->msgs, 2);
	assert_memory_equal(t->last_msg, src, 20000);
	sent_hdr(&mock.sent[2], &h);
	assert_int_equal(h.type, RMSGI_T_RNDV_ACK);
	assert_int_equal(h.id, 12);
	assert_int_equal(h.aux, 0);
	assert_int_equal(t->closed, 0);
	free(src);
}

static void rndv_rx__close_in_on_msg(void **state)
{
	struct rt *t = *state;
	uint8_t *src = pattern(9000, 6);
	struct rmsgi_seg seg = {(uintptr_t)src, 9000, 7};

	connect_peer(t, 32, 8192);
	t->close_in_msg = true;
	peer_rndv(t, 1, 9000, &seg, 1);
	pump(t);
	mock_complete_sends(t->qpn, -1, IBV_WC_SUCCESS);
	pump(t);
	assert_int_equal(t->msgs, 1);
	/* the ACK still goes out; the close waits for it */
	assert_int_equal(t->closed, 0);
	mock_complete_sends(t->qpn, -1, IBV_WC_SUCCESS);
	pump(t);
	assert_int_equal(t->closed, 1);
	assert_int_equal(t->close_reason, 0);
	free(src);
}

/* a read fails while no credit is left for the ACK: the connection must
 * be torn down once */
static void rndv_rx__read_error_without_credit(void **state)
{
	struct rt *t = *state;
	struct rmsgi_seg seg = {0, 9000, 7};
	uint8_t *src;
	void *a, *b;
	src = pattern(9000, 7);
	seg.addr = (uintptr_t)src;
	assert_int_equal(rmsg_cfg_set_credits(t->cfg, 4), 0);
	connect_peer(t, 4, 8192);
	/* three messages and a CREDIT frame use the peer's four credits */
	assert_int_equal(send_str(t, "1", 1), 0);
	assert_int_equal(send_str(t, "2", 2), 0);
	assert_int_equal(send_str(t, "3", 3), 0);
	rmsgi_ctx_flush(t->ctx);
	mock_complete_sends(t->qpn, -1, IBV_WC_SUCCESS);
	peer_data(t, "m", 0);
	peer_data(t, "m", 0);
	pump(t);
	pump(t);
	assert_int_equal(t->c->cr.avail, 0);
	mock_complete_sends(t->qpn, -1, IBV_WC_SUCCESS);
	pump(t);
	peer_rndv(t, 9, 9000, &seg, 1);
	pump(t);
	alarm(10); /* a cycle in the reaper loops forever */
	mock_complete_sends(t->qpn, -1, IBV_WC_REM_ACCESS_ERR);
	pump(t);
	assert_int_equal(t->closed, 1);
	assert_int_equal(t->close_reason, -EACCES);
	/* the header slots went back to the pool once, not twice */
	assert_int_equal(rmsg_buf_alloc(t->ctx, 128 * 64, &a), 0);
	assert_int_equal(rmsg_buf_alloc(t->ctx, 128 * 64, &b), 0);
	assert_ptr_not_equal(a, b);
	rmsg_buf_free(t->ctx, a);
	rmsg_buf_free(t->ctx, b);
	pump(t);
	alarm(0);
	free(src);
}

/* a peer gets only what it was given (issue 14)                        */

/* frames beyond the credits granted and returned: -EPROTO at the first
 * one, before it reaches the app (the SRQ it drains is everyone's) */
static void bound__over_credit_closes(void **state)
{
	struct rt *t = *state;
	int i, warnings;

	/* a fixed grant of 32 (the grant that grows: grow__ tests) */
	assert_int_equal(rmsg_cfg_set_credits_initial(t->cfg, 32), 0);
	connect_peer(t, 32, 8192);
	/* the RNR timer the peer's resends wait: 245.76 ms (x 6 retries
	 * ~1.5 s, to outlast a flooding peer), not 655 ms */
	assert_int_equal(mock.min_rnr_timer, 29);
	warnings = t->warnings;
	/* the 32 granted, then one more, none returned in between */
	for (i = 0; i < 33; i++)
		peer_data(t, "x", 0);
	pump(t);
	assert_int_equal(t->msgs, 32);
	assert_int_equal(t->closed, 1);
	assert_int_equal(t->close_reason, -EPROTO);
	assert_true(t->warnings > warnings);
}

/* credits returned to the peer raise what it may send: a long exchange
 * within them never trips the check */
static void bound__within_credits_stays_up(void **state)
{
	struct rt *t = *state;
	int i, round;

	/* a fixed grant of 32 (the grant that grows: grow__ tests) */
	assert_int_equal(rmsg_cfg_set_credits_initial(t->cfg, 32), 0);
	connect_peer(t, 32, 8192);
	for (round = 0; round < 20; round++) {
		for (i = 0; i < 24; i++)
			peer_data(t, "y", 0);
		pump(t);
		mock_complete_sends(t->qpn, -1, IBV_WC_SUCCESS);
		pump(t);
	}
	assert_int_equal(t->msgs, 20 * 24);
	assert_int_equal(t->closed, 0);
}

/* the device refuses the whole chain holding a rendezvous receive's only
 * read: the read was issued (the receive left the pending list) but never
 * posted, so no completion ends it; the teardown must (it leaked, with its
 * pool buffer: seen by check-valgrind and check-sanitize) */
static void send__post_send_failure_rndv_read(void **state)
{
	struct rt *t = *state;
	const size_t len = 64 << 10;
	uint8_t *a = pattern(len, 31);
	struct rmsgi_seg seg = {(uintptr_t)a, (uint32_t)len, 1};
	uint8_t p[RMSGI_SEG_SIZE];

	connect_peer(t, 32, 8192);
	rmsgi_seg_encode(&seg, p);
	mock.post_send_ret = ENOMEM;
	peer_frame(t, RMSGI_T_RNDV_REQ, 0, 0, 1, len, p, RMSGI_SEG_SIZE);
	pump(t);
	assert_int_equal(mock.n_sent, 0);
	assert_int_equal(t->msgs, 0);
	assert_int_equal(t->closed, 1);
	assert_int_equal(t->close_reason, -ENOMEM);
	assert_int_equal(mock.live_qp, 0);
	free(a);
}

/* a connection reads at most its share of the budget at a time: the
 * second request waits for the first one's reads, in order; with nothing
 * being read, one message up to a single connection's share (reg_limit /
 * 2) starts however many idle connections are open (@idle); one larger
 * than that fails alone with -ENOMEM */
static void rndv_share_run(struct rt *t, int idle)
{
	const size_t mib = (size_t)1 << 20, len = 5 * mib;
	uint8_t *a = pattern(len, 21), *b = pattern(len, 22);
	uint8_t *c = pattern(9 * mib, 23);
	struct rmsgi_seg sa[5], sb[5], sc[9];
	struct rmsg_conn *ic[4];
	struct rmsgi_hdr h;
	int i, reads;

	/* one connection: a share of 16 MiB / 2; with 3 idle ones,
	 * 16 MiB / 5, under 5 MiB */
	assert_int_equal(rmsg_cfg_set_reg_limit(t->cfg, 16 * mib), 0);
	assert_int_equal(rmsg_cfg_set_max_msg_size(t->cfg, 64 * mib), 0);
	/* a fixed grant: no CREDIT frame for a growing one among the sends */
	assert_int_equal(rmsg_cfg_set_credits_initial(t->cfg, 32), 0);
	for (i = 0; i < 9; i++) {
		if (i < 5) {
			sa[i] = (struct rmsgi_seg){(uintptr_t)a + i * mib,
						   (uint32_t)mib, 1};
			sb[i] = (struct rmsgi_seg){(uintptr_t)b + i * mib,
						   (uint32_t)mib, 2};
		}
		sc[i] = (struct rmsgi_seg){(uintptr_t)c + i * mib,
					   (uint32_t)mib, 3};
	}
	connect_peer(t, 32, 8192);
	for (i = 0; i < idle; i++)
		assert_int_equal(
			rmsg_connect(t->ctx, URI, t->cfg, &ops, t, &ic[i]), 0);
	{
		uint8_t p[RMSGI_SEG_SIZE * 9];

		for (i = 0; i < 5; i++)
			rmsgi_seg_encode(&sa[i], p + i * RMSGI_SEG_SIZE);
		peer_frame(t, RMSGI_T_RNDV_REQ, 0, 0, 1, len, p,
			   5 * RMSGI_SEG_SIZE);
		for (i = 0; i < 5; i++)
			rmsgi_seg_encode(&sb[i], p + i * RMSGI_SEG_SIZE);
		peer_frame(t, RMSGI_T_RNDV_REQ, 0, 0, 2, len, p,
			   5 * RMSGI_SEG_SIZE);
		for (i = 0; i < 9; i++)
			rmsgi_seg_encode(&sc[i], p + i * RMSGI_SEG_SIZE);
		peer_frame(t, RMSGI_T_RNDV_REQ, 0, 0, 3, 9 * mib, p,
			   9 * RMSGI_SEG_SIZE);
	}
	pump(t);
	/* the first one's reads only: 5 MiB + 5 MiB is over the share */
	assert_int_equal(mock.n_sent, 5);
	for (i = 0; i < 5; i++) {
		assert_int_equal(mock.sent[i].opcode, IBV_WR_RDMA_READ);
		assert_int_equal(mock.sent[i].rkey, 1);
	}
	mock_complete_sends(t->qpn, -1, IBV_WC_SUCCESS);
	pump(t);
	assert_int_equal(t->msgs, 1);
	assert_memory_equal(t->last_msg, a, len);
	/* the first ACK, then the second one's reads */
	sent_hdr(&mock.sent[5], &h);
	assert_int_equal(h.type, RMSGI_T_RNDV_ACK);
	assert_int_equal(h.id, 1);
	assert_int_equal(h.aux, 0);
	reads = 0;
	for (i = 6; i < mock.n_sent; i++)
		if (mock.sent[i].opcode == IBV_WR_RDMA_READ) {
			assert_int_equal(mock.sent[i].rkey, 2);
			reads++;
		}
	assert_int_equal(reads, 5);
	mock_complete_sends(t->qpn, -1, IBV_WC_SUCCESS);
	pump(t);
	assert_int_equal(t->msgs, 2);
	assert_memory_equal(t->last_msg, b, len);
	/* 9 MiB: larger than reg_limit / 2, refused without a read (once
	 * the reads before it were posted) */
	reads = 0;
	for (i = 0; i < mock.n_sent; i++) {
		assert_true(mock.sent[i].opcode != IBV_WR_RDMA_READ ||
			    mock.sent[i].rkey != 3);
		if (mock.sent[i].opcode != IBV_WR_SEND)
			continue;
		sent_hdr(&mock.sent[i], &h);
		if (h.type == RMSGI_T_RNDV_ACK && h.id == 3) {
			assert_int_equal(h.aux, ENOMEM);
			reads++;
		}
	}
	assert_int_equal(reads, 1);
	assert_int_equal(t->closed, 0);
	for (i = 0; i < idle; i++)
		assert_int_equal(rmsg_conn_close(ic[i]), 0);
	free(a);
	free(b);
	free(c);
}

static void bound__rndv_share(void **state)
{
	rndv_share_run(*state, 0);
}

/* idle connections do not lower the largest message accepted (a 5 MiB
 * message over a share of 16 MiB / 5 was refused for good) */
static void bound__rndv_share_idle_conns(void **state)
{
	rndv_share_run(*state, 3);
}

/* a rendezvous piece over 4 GiB goes as several segments, each within
 * the wire's u32 (it was cut to its low 32 bits) */
static void bound__rndv_segments_over_4gib(void **state)
{
	struct rt *t = *state;
	const size_t len = ((size_t)5 << 30) + 12345;
	const struct mock_send_wr *w;
	struct rmsgi_seg seg;
	struct rmsgi_hdr h;
	uint64_t sum = 0;
	uint8_t *big;
	int i;

	/* address space only: nothing is touched but the first bytes */
	big = mmap(NULL, len, PROT_READ,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (big == MAP_FAILED)
		skip();
	assert_int_equal(rmsg_cfg_set_max_msg_size(t->cfg, (size_t)8 << 30), 0);
	assert_int_equal(rmsg_cfg_set_reg_limit(t->cfg, (size_t)8 << 30), 0);
	connect_peer(t, 32, 8192);
	assert_int_equal(send_buf(t, big, len, 1), 0);
	rmsgi_ctx_flush(t->ctx);
	w = &mock.sent[0];
	sent_hdr(w, &h);
	assert_int_equal(h.type, RMSGI_T_RNDV_REQ);
	assert_int_equal(h.len, len);
	assert_int_equal(w->total, RMSGI_HDR_SIZE + 3 * RMSGI_SEG_SIZE);
	for (i = 0; i < 3; i++) {
		rmsgi_seg_decode(w->data + RMSGI_HDR_SIZE + i * RMSGI_SEG_SIZE,
				 &seg);
		assert_int_equal(seg.addr, (uintptr_t)big + sum);
		assert_true(seg.len > 0 && seg.len <= (1u << 31));
		sum += seg.len;
	}
	assert_int_equal(sum, len);
	assert_int_equal(rmsg_conn_close(t->c), 0);
	munmap(big, len);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(send__post_send_failure_rndv_read),
		T(recv__data_delivered),
		T(recv__repost_in_batches),
		T(recv__credits_enable_sends),
		T(recv__bad_frames),
		T(recv__wc_error),
		T(rndv_rx__reads_and_acks),
		T(rndv_rx__unwritten_read_fails),
		T(rndv_rx__second_release),
		T(rndv_rx__split_reads),
		T(rndv_rx__done_posts_and_grows),
		T(rndv_rx__reads_within_rd_atom),
		T(rndv_rx__read_error),
		T(rndv_rx__no_memory_refused),
		T(rndv_rx__close_in_on_msg),
		T(rndv_rx__read_error_without_credit),
		T(bound__over_credit_closes),
		T(bound__within_credits_stays_up),
		T(bound__rndv_share),
		T(bound__rndv_share_idle_conns),
		T(bound__rndv_segments_over_4gib),
	};

	unit_filter();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
