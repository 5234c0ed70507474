// SPDX-License-Identifier: MIT
/*
 * conn_stats.c - unit tests of the counters (struct rmsg_stats,
 * rmsg_conn_stats(3), rmsg_ctx_stats(3)) against the fake transport
 * (fake_tr.h): each counter moves by exactly the events the test makes,
 * as rmsg_conn_stats.3 defines them; the size rule of the call; a
 * context's sums over live and closed connections.
 */
#include "conn_t.h"

static struct rmsg_stats cst(struct t *t)
{
	struct rmsg_stats st;

	assert_int_equal(rmsg_conn_stats(t->c, &st, sizeof(st)), sizeof(st));
	return st;
}

static struct rmsg_stats xst(struct t *t)
{
	struct rmsg_stats st;

	assert_int_equal(rmsg_ctx_stats(t->ctx, &st, sizeof(st)), sizeof(st));
	return st;
}

/* the size rule: min(size, ours) bytes filled, the rest untouched */
static void conn_stats__size(void **state)
{
	struct t *t = *state;
	struct {
		struct rmsg_stats st;
		uint8_t more[16];
	} big;
	uint8_t small[16];

	establish(t, 32, 8192);
	assert_int_equal(send_str(t, "abc", 1), 0);
	flush(t);
	/* covers: rmsg_conn_stats.3 EINVAL */
	assert_int_equal(rmsg_conn_stats(NULL, &big.st, sizeof(big.st)),
			 -EINVAL);
	/* covers: rmsg_conn_stats.3 EINVAL */
	assert_int_equal(rmsg_conn_stats(t->c, NULL, sizeof(big.st)), -EINVAL);
	/* covers: rmsg_conn_stats.3 EINVAL */
	assert_int_equal(rmsg_conn_stats(t->c, &big.st, sizeof(uint64_t) - 1),
			 -EINVAL);
	/* covers: rmsg_conn_stats.3 EINVAL */
	assert_int_equal(rmsg_ctx_stats(NULL, &big.st, sizeof(big.st)),
			 -EINVAL);
	/* covers: rmsg_conn_stats.3 EINVAL */
	assert_int_equal(rmsg_ctx_stats(t->ctx, &big.st, 0), -EINVAL);
	/* an older caller's struct of one member and a half: 12 bytes */
	memset(small, 0xa5, sizeof(small));
	assert_int_equal(rmsg_conn_stats(t->c, (struct rmsg_stats *)small, 12),
			 12);
	memset(&big, 0, sizeof(big));
	assert_int_equal(rmsg_conn_stats(t->c, &big.st, sizeof(big.st)),
			 sizeof(big.st));
	assert_memory_equal(small, &big.st, 12);
	assert_int_equal(small[12], 0xa5);
	assert_int_equal(small[15], 0xa5);
	assert_int_equal(rmsg_conn_stats(t->c, &big.st, sizeof(uint64_t)),
			 sizeof(uint64_t));
	/* a newer caller's larger struct: ours filled, the rest untouched */
	memset(&big, 0xa5, sizeof(big));
	assert_int_equal(rmsg_conn_stats(t->c, &big.st, sizeof(big)),
			 sizeof(big.st));
	assert_int_equal(big.st.msgs_sent, 1);
	assert_int_equal(big.st.bytes_sent, 3);
	assert_int_equal(big.more[0], 0xa5);
	assert_int_equal(big.more[15], 0xa5);
	assert_int_equal(rmsg_ctx_stats(t->ctx, &big.st, sizeof(big)),
			 sizeof(big.st));
	assert_int_equal(big.st.msgs_sent, 1);
	assert_int_equal(big.more[0], 0xa5);
}

/* eager and rendezvous sends, counted once when handed to the transport
 * (a post refused for want of room is not a send) */
static void conn_stats__sent(void **state)
{
	struct t *t = replace_t(state, NULL, RMSGI_TR_CAP_RNDV);
	struct rmsg_stats st;

	establish(t, 32, 64);
	assert_int_equal(send_len(t, 64, 1), 0); /* eager: the peer's size */
	assert_int_equal(send_len(t, 65, 2), 0); /* rendezvous */
	assert_int_equal(send_len(t, 0, 3), 0);	 /* empty: a message too */
	st = cst(t);
	assert_int_equal(st.msgs_sent, 0); /* queued, not yet handed over */
	ft.post_ret = -EAGAIN;
	ft.post_ret_calls = 1;
	flush(t);
	assert_int_equal(cst(t).msgs_sent, 0);
	rmsgi_conn_tr_room(t->c);
	flush(t);
	assert_int_equal(ft.nposted, 3);
	st = cst(t);
	assert_int_equal(st.msgs_sent, 3);
	assert_int_equal(st.eager_sent, 2);
	assert_int_equal(st.rndv_sent, 1);
	assert_int_equal(st.bytes_sent, 64 + 65);
	assert_int_equal(st.msgs_recv, 0);
	assert_int_equal(st.credit_stalls, 0);
	assert_int_equal(st.sendq_full, 0);
}

/* eager messages when their frame arrives, rendezvous ones once read;
 * one refused for want of memory is not received */
static void conn_stats__received(void **state)
{
	struct t *t = *state;
	struct rmsg_msg *big, *big2;
	struct rmsg_stats st;

	establish(t, 32, 8192);
	assert_int_equal(rx_data(t->c, "ab", 0), 0);
	assert_int_equal(rx_data(t->c, "cde", 0), 0);
	big = tmsg_new(t->c, "0123456789");
	big->ready = 0;
	assert_int_equal(rx(t->c, RMSGI_T_RNDV_REQ, 0, 0, 77, big), 0);
	assert_int_equal(rx_data(t->c, "f", 0), 0); /* queued behind */
	st = cst(t);
	assert_int_equal(st.msgs_recv, 3);
	assert_int_equal(st.rndv_recv, 0);
	rmsgi_conn_rx_ready(t->c, big, 0);
	big2 = tmsg_new(t->c, "zz");
	big2->ready = 0;
	assert_int_equal(rx(t->c, RMSGI_T_RNDV_REQ, 0, 0, 78, big2), 0);
	rmsgi_conn_rx_ready(t->c, big2, -ENOMEM);
	assert_int_equal(t->msgs, 4);
	st = cst(t);
	assert_int_equal(st.msgs_recv, 4);
	assert_int_equal(st.eager_recv, 3);
	assert_int_equal(st.rndv_recv, 1);
	assert_int_equal(st.bytes_recv, 2 + 3 + 1 + 10);
	assert_int_equal(st.msgs_sent, 0); /* the ACKs are not messages */
}

/* every message that waits for a credit counts once, however often the
 * queue stops on it */
static void conn_stats__credit_stalls(void **state)
{
	struct t *t = *state;
	int i, posted;

	establish(t, 4, 8192);
	for (i = 1; i <= 10; i++)
		assert_int_equal(send_str(t, "x", i), 0);
	flush(t);
	posted = ft.nposted;
	assert_true(posted > 0 && posted < 10);
	assert_int_equal(cst(t).credit_stalls, 10 - posted);
	flush(t);
	assert_int_equal(cst(t).credit_stalls, 10 - posted);
	/* credits come back a few at a time: no op counts twice */
	while (ft.nposted < 10) {
		int before = ft.nposted;

		assert_int_equal(rx_credit(t->c, 1), 0);
		flush(t);
		assert_true(ft.nposted > before);
		/* a message sent while others wait for credits waits too */
		if (ft.nposted == 6)
			assert_int_equal(send_str(t, "y", 11), 0);
		if (ft.nposted >= 10)
			break;
	}
	assert_int_equal(cst(t).credit_stalls, 10 - posted + 1);
	while (ft.nposted < 11) {
		assert_int_equal(rx_credit(t->c, 1), 0);
		flush(t);
	}
	assert_int_equal(cst(t).credit_stalls, 10 - posted + 1);
	assert_int_equal(cst(t).msgs_sent, 11);
}

/* each -EAGAIN of a full send queue counts, of sends and one-sided ops */
static void conn_stats__sendq_full(void **state)
{
	struct rmsgi_cfgv cfg;
	struct t *t;
	struct rmsgi_desc d = {.access = RMSG_ACCESS_REMOTE_WRITE |
					 RMSG_ACCESS_REMOTE_READ,
			       .token = 5,
			       .len = 4096};
	uint8_t desc[RMSG_MR_DESC_SIZE];
	char buf[8] = "12345678";
	struct iovec iov = {buf, sizeof(buf)};

	rmsgi_cfg_defaults(&cfg);
	cfg.send_queue = 2;
	t = replace_t(state, &cfg, 0);
	rmsgi_desc_encode(&d, desc);
	establish(t, 32, 8192);
	assert_int_equal(send_str(t, "a", 1), 0);
	assert_int_equal(send_str(t, "b", 2), 0);
	assert_int_equal(send_str(t, "c", 3), -EAGAIN);
	assert_int_equal(send_str(t, "c", 3), -EAGAIN);
	assert_int_equal(rmsg_write(t->c, &iov, 1, desc, 0, done_cb, NULL),
			 -EAGAIN);
	assert_int_equal(rmsg_read(t->c, &iov, 1, desc, 0, done_cb, NULL),
			 -EAGAIN);
	assert_int_equal(cst(t).sendq_full, 4);
	flush(t);
	tr_complete_all(t->c, 0);
	flush(t);
	assert_int_equal(send_str(t, "c", 3), 0);
	assert_int_equal(cst(t).sendq_full, 4);
}

/* one-sided ops by kind, emulated in frames (no RMSGI_TR_CAP_RMA): the
 * peer's error answers count as refused; the peer's writes served and
 * refused, and writes with immediate received */
static void conn_stats__onesided(void **state)
{
	struct t *t = *state;
	struct rmsgi_desc d = {.access = RMSG_ACCESS_REMOTE_WRITE |
					 RMSG_ACCESS_REMOTE_READ,
			       .token = 5,
			       .len = 4096};
	uint8_t desc[RMSG_MR_DESC_SIZE];
	char buf[8] = "12345678";
	struct iovec iov = {buf, sizeof(buf)};
	struct rmsgi_rma r = {.off = 0, .token = 99};
	struct rmsg_msg *m;
	struct rmsg_stats st;
	uint8_t frame[RMSGI_RMA_SIZE + 4];
	uint64_t id[4];
	int i;

	rmsgi_desc_encode(&d, desc);
	establish(t, 32, 8192);
	assert_int_equal(rmsg_write(t->c, &iov, 1, desc, 0, done_cb, (void *)1),
			 0);
	assert_int_equal(
		rmsg_write_imm(t->c, &iov, 1, desc, 0, 7, done_cb, (void *)2),
		0);
	assert_int_equal(
		rmsg_write_imm(t->c, &iov, 1, desc, 0, 8, done_cb, (void *)3),
		0);
	assert_int_equal(rmsg_read(t->c, &iov, 1, desc, 0, done_cb, (void *)4),
			 0);
	flush(t);
	assert_int_equal(ft.nposted, 4);
	st = cst(t);
	assert_int_equal(st.writes, 1);
	assert_int_equal(st.writes_imm, 2);
	assert_int_equal(st.reads, 1);
	assert_int_equal(st.msgs_sent, 0);
	for (i = 0; i < 4; i++)
		id[i] = ft.posted[i].id;
	tr_complete_all(t->c, 0);
	/* the write is refused, the first write_imm done, the read refused */
	assert_int_equal(rx(t->c, RMSGI_T_RNDV_ACK, 0, EACCES, id[0],
			    tmsg_new(t->c, NULL)),
			 0);
	assert_int_equal(
		rx(t->c, RMSGI_T_RNDV_ACK, 0, 0, id[1], tmsg_new(t->c, NULL)),
		0);
	assert_int_equal(rx(t->c, RMSGI_T_READ_RESP, 0, EACCES, id[3],
			    tmsg_new(t->c, NULL)),
			 0);
	st = cst(t);
	assert_int_equal(st.refused_ours, 2);
	assert_int_equal(st.refused_peer, 0);
	/* the peer writes with an unknown token: refused, answered */
	rmsgi_rma_encode(&r, 0, frame);
	memcpy(frame + RMSGI_RMA_SIZE, "abcd", 4);
	m = tmsg_new(t->c, NULL);
	memcpy(((struct tmsg *)m)->data, frame, sizeof(frame));
	m->len = sizeof(frame);
	assert_int_equal(rx(t->c, RMSGI_T_WRITE_IMM, 0, 9, 1, m), 0);
	st = cst(t);
	assert_int_equal(st.refused_peer, 1);
	assert_int_equal(st.writes_served, 0);
	assert_int_equal(st.imm_recv, 0); /* refused: no immediate */
	assert_int_equal(st.refused_ours, 2);
	/* a write with immediate that landed (as RDMA reports it) */
	assert_int_equal(rx(t->c, RMSGI_T_IMM, 0, 11, 4, tmsg_new(t->c, NULL)),
			 0);
	assert_int_equal(cst(t).imm_recv, 1);
	assert_int_equal(cst(t).msgs_recv, 0);
}

/* a READ_RESP whose status is not an errno (aux above 4095, here one
 * that -(int) would overflow: fuzz_conn found it) ends the connection
 * with -EPROTO; the read fails once with that reason */
static void conn_stats__read_resp_bad_status(void **state)
{
	struct t *t = *state;
	struct rmsgi_desc d = {
		.access = RMSG_ACCESS_REMOTE_READ, .token = 5, .len = 4096};
	uint8_t desc[RMSG_MR_DESC_SIZE];
	char buf[8];
	struct iovec iov = {buf, sizeof(buf)};
	uint32_t bad[] = {4096, 0x80000000u};
	unsigned i;
	int status;

	for (i = 0; i < 2; i++) {
		if (i)
			t = replace_t(state, NULL, 0);
		rmsgi_desc_encode(&d, desc);
		establish(t, 32, 8192);
		assert_int_equal(
			rmsg_read(t->c, &iov, 1, desc, 0, done_cb, (void *)4),
			0);
		flush(t);
		assert_int_equal(ft.nposted, 1);
		tr_complete_all(t->c, 0);
		assert_int_equal(rx(t->c, RMSGI_T_READ_RESP, 0, bad[i],
				    ft.posted[0].id, tmsg_new(t->c, NULL)),
				 -EPROTO);
		assert_int_equal(cst(t).proto_errors, 1);
		assert_int_equal(cst(t).refused_ours, 0);
		tr_down(t->c);
		flush(t);
		assert_int_equal(done_count(t, 4, &status), 1);
		assert_int_equal(status, -EPROTO);
		assert_int_equal(t->close_reason, -EPROTO);
	}
}

/* a malformed frame ends the connection with -EPROTO: one protocol
 * error, in the connection's counters and then in the context's, which
 * keep the closed connection's sums */
static void conn_stats__proto_error_and_ctx(void **state)
{
	struct t *t = *state;
	struct rmsg_stats st;

	establish(t, 32, 8192);
	assert_int_equal(send_str(t, "abcd", 1), 0);
	flush(t);
	assert_int_equal(rx_data(t->c, "xy", 0), 0);
	st = xst(t); /* a live connection is in the sums */
	assert_int_equal(st.msgs_sent, 1);
	assert_int_equal(st.msgs_recv, 1);
	assert_int_equal(st.proto_errors, 0);
	assert_int_equal(st.conns_closed, 0);
	assert_int_equal(rx(t->c, 200, 0, 0, 0, tmsg_new(t->c, NULL)), -EPROTO);
	assert_int_equal(cst(t).proto_errors, 1);
	assert_int_equal(xst(t).proto_errors, 1);
	/* a second bad frame on the closing connection is no new error */
	rmsgi_conn_abort(t->c, -EPROTO);
	assert_int_equal(cst(t).proto_errors, 1);
	tr_down(t->c);
	flush(t);
	assert_int_equal(t->close_reason, -EPROTO);
	assert_null(t->c); /* freed: only the context has its counters */
	st = xst(t);
	assert_int_equal(st.proto_errors, 1);
	assert_int_equal(st.msgs_sent, 1);
	assert_int_equal(st.bytes_sent, 4);
	assert_int_equal(st.msgs_recv, 1);
	assert_int_equal(st.bytes_recv, 2);
	assert_int_equal(st.conns_closed, 1);
	assert_int_equal(st.conns_opened, 0); /* made without rmsg_connect */
}

/* a backend that reports -EPROTO (a frame it could not parse) counts the
 * same; another failure does not */
static void conn_stats__proto_error_from_backend(void **state)
{
	struct t *t = *state;

	establish(t, 32, 8192);
	rmsgi_conn_ev_failed(t->c, -EPROTO, NULL);
	assert_int_equal(cst(t).proto_errors, 1);
	tr_down(t->c);
	flush(t);
	assert_int_equal(xst(t).proto_errors, 1);
	t = replace_t(state, NULL, 0);
	establish(t, 32, 8192);
	rmsgi_conn_ev_failed(t->c, -ECONNRESET, NULL);
	assert_int_equal(cst(t).proto_errors, 0);
	tr_down(t->c);
	flush(t);
	assert_int_equal(xst(t).proto_errors, 0);
	assert_int_equal(xst(t).conns_closed, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		CONN_T(conn_stats__size),
		CONN_T(conn_stats__sent),
		CONN_T(conn_stats__received),
		CONN_T(conn_stats__credit_stalls),
		CONN_T(conn_stats__sendq_full),
		CONN_T(conn_stats__onesided),
		CONN_T(conn_stats__read_resp_bad_status),
		CONN_T(conn_stats__proto_error_and_ctx),
		CONN_T(conn_stats__proto_error_from_backend),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
