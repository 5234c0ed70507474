// SPDX-License-Identifier: MIT
/*
 * conn_rndv.c - unit tests of the connection state machine (src/conn.c)
 * against the fake transport (fake_tr.h): rendezvous (a backend with
 * RMSGI_TR_CAP_RNDV) and the receive path: acknowledgements, in-order
 * delivery behind a payload still being read, illegal and late frames.
 */
#include "conn_t.h"
#include "conn_int.h"

/* ------------------------------------------------------------------ */
/* rendezvous                                                           */

static struct t *rndv_t(void **state)
{
	struct t *t = replace_t(state, NULL, RMSGI_TR_CAP_RNDV);

	establish(t, 32, 64);
	return t;
}

static void conn_rndv__waits_for_ack(void **state)
{
	struct t *t = rndv_t(state);
	int status = 1;

	assert_int_equal(send_len(t, 64, 1), 0); /* eager */
	assert_int_equal(send_len(t, 65, 2), 0);
	flush(t);
	assert_int_equal(ft.nposted, 2);
	assert_int_equal(ft.posted[0].type, RMSGI_T_DATA);
	assert_int_equal(ft.posted[0].rndv, 0);
	assert_int_equal(ft.posted[1].type, RMSGI_T_RNDV_REQ);
	assert_int_equal(ft.posted[1].rndv, 1);
	assert_int_equal(ft.posted[1].len, 65);
	assert_true(ft.posted[1].id != 0);
	tr_complete_all(t->c, 0);
	flush(t);
	assert_int_equal(done_count(t, 1, NULL), 1);
	assert_int_equal(done_count(t, 2, NULL), 0);
	assert_int_equal(
		rx(t->c, RMSGI_T_RNDV_ACK, 0, 0, 1, tmsg_new(t->c, NULL)), 0);
	assert_int_equal(ft.nrelease, 1);
	flush(t);
	assert_int_equal(done_count(t, 2, &status), 1);
	assert_int_equal(status, 0);
	assert_int_equal(t->c->tx.sendq_len, 0);
	/* a second ACK for it is a protocol error */
	assert_int_equal(
		rx(t->c, RMSGI_T_RNDV_ACK, 0, 0, 1, tmsg_new(t->c, NULL)),
		-EPROTO);
	tr_down(t->c);
	flush(t);
	assert_int_equal(t->close_reason, -EPROTO);
	assert_int_equal(done_count(t, 2, NULL), 1);
}

/* a message queued before the connection is established goes by what
 * is known once it is: eager up to the peer's eager size, rendezvous
 * beyond (decided at establishment, not when queued, when the peer's
 * eager size was not known yet) */
static void conn_rndv__queued_before_established(void **state)
{
	struct t *t = replace_t(state, NULL, RMSGI_TR_CAP_RNDV);

	assert_int_equal(send_len(t, 64, 1), 0);
	assert_int_equal(send_len(t, 65, 2), 0);
	flush(t);
	assert_int_equal(ft.npost, 0);
	establish(t, 32, 64);
	flush(t);
	assert_int_equal(ft.nposted, 2);
	assert_int_equal(ft.posted[0].type, RMSGI_T_DATA);
	assert_int_equal(ft.posted[0].rndv, 0);
	assert_int_equal(ft.posted[0].len, 64);
	assert_int_equal(ft.posted[1].type, RMSGI_T_RNDV_REQ);
	assert_int_equal(ft.posted[1].rndv, 1);
	assert_int_equal(ft.posted[1].len, 65);
	assert_true(ft.posted[1].id != 0);
}

static void conn_rndv__ack_before_send_done(void **state)
{
	struct t *t = rndv_t(state);
	int status = 1;

	assert_int_equal(send_len(t, 1000, 1), 0);
	flush(t);
	assert_int_equal(rx(t->c, RMSGI_T_RNDV_ACK, 0, 0, ft.posted[0].id,
			    tmsg_new(t->c, NULL)),
			 0);
	flush(t);
	assert_int_equal(done_count(t, 1, NULL), 0);
	tr_complete(t->c, 0, 0);
	flush(t);
	assert_int_equal(done_count(t, 1, &status), 1);
	assert_int_equal(status, 0);
	flush(t);
	assert_int_equal(done_count(t, 1, NULL), 1);
	assert_int_equal(ft.nrelease, 1);
}

/* the receiver's read failed: its errno comes back in aux */
static void conn_rndv__ack_error(void **state)
{
	struct t *t = rndv_t(state);
	int status;

	assert_int_equal(send_len(t, 1000, 1), 0);
	flush(t);
	tr_complete(t->c, 0, 0);
	assert_int_equal(
		rx(t->c, RMSGI_T_RNDV_ACK, 0, EACCES, 1, tmsg_new(t->c, NULL)),
		0);
	flush(t);
	assert_int_equal(done_count(t, 1, &status), 1);
	assert_int_equal(status, -EACCES);
	assert_int_equal(t->c->state, RMSGI_CS_ESTABLISHED);
}

static void conn_rndv__ack_bad_status(void **state)
{
	struct t *t = rndv_t(state);
	int status;

	assert_int_equal(send_len(t, 1000, 1), 0);
	flush(t);
	tr_complete(t->c, 0, 0);
	assert_int_equal(
		rx(t->c, RMSGI_T_RNDV_ACK, 0, 4096, 1, tmsg_new(t->c, NULL)),
		-EPROTO);
	tr_down(t->c);
	flush(t);
	assert_int_equal(done_count(t, 1, &status), 1);
	assert_int_equal(status, -EPROTO);
	assert_int_equal(t->close_reason, -EPROTO);
}

static void conn_rndv__unknown_ack_closes(void **state)
{
	struct t *t = rndv_t(state);
	int status;

	assert_int_equal(send_len(t, 1000, 1), 0);
	flush(t);
	assert_int_equal(
		rx(t->c, RMSGI_T_RNDV_ACK, 0, 0, 12345, tmsg_new(t->c, NULL)),
		-EPROTO);
	assert_int_equal(ft.ndisconnect, 1);
	assert_int_equal(t->c->state, RMSGI_CS_CLOSING);
	/* the rendezvous in flight fails once, with the reason */
	tr_complete_all(t->c, -ECANCELED);
	tr_down(t->c);
	flush(t);
	assert_int_equal(done_count(t, 1, &status), 1);
	assert_int_equal(status, -EPROTO);
	assert_int_equal(t->close_reason, -EPROTO);
	assert_int_equal(count(t, 'X'), 1);
	assert_int_equal(t->log[t->nlog - 1].kind, 'X');
}

/* the request frame itself failed: done with that error, once */
static void conn_rndv__send_fails(void **state)
{
	struct t *t = rndv_t(state);
	int status;

	assert_int_equal(send_len(t, 1000, 1), 0);
	flush(t);
	tr_complete(t->c, 0, -EREMOTEIO);
	assert_int_equal(ft.nrelease, 1);
	rmsgi_conn_ev_failed(t->c, -EREMOTEIO, NULL);
	tr_down(t->c);
	flush(t);
	assert_int_equal(done_count(t, 1, &status), 1);
	assert_int_equal(status, -EREMOTEIO);
	assert_int_equal(ft.nrelease, 1);
}

/* a backend without rendezvous sends everything eagerly */
static void conn_rndv__not_without_cap(void **state)
{
	struct t *t = *state;

	establish(t, 32, 64);
	assert_int_equal(send_len(t, 1000, 1), 0);
	flush(t);
	assert_int_equal(ft.posted[0].type, RMSGI_T_DATA);
	assert_int_equal(ft.posted[0].rndv, 0);
}

/* ------------------------------------------------------------------ */
/* receiving                                                            */

static void conn_rx__delivers_in_order(void **state)
{
	struct t *t = *state;
	struct rmsg_msg *big;

	establish(t, 32, 8192);
	big = tmsg_new(t->c, "first");
	big->ready = 0;
	assert_int_equal(rx(t->c, RMSGI_T_RNDV_REQ, 0, 0, 77, big), 0);
	assert_int_equal(rx_data(t->c, "second", 0), 0);
	/* the second waits for the first's payload */
	assert_int_equal(t->msgs, 0);
	rmsgi_conn_rx_ready(t->c, big, 0);
	assert_int_equal(t->msgs, 2);
	assert_string_equal(t->last_msg, "second");
	/* and the sender hears that its payload arrived */
	flush(t);
	assert_int_equal(ft.nposted, 1);
	assert_int_equal(ft.posted[0].type, RMSGI_T_RNDV_ACK);
	assert_int_equal(ft.posted[0].id, 77);
	assert_int_equal(ft.posted[0].aux, 0);
	tr_complete(t->c, 0, 0);
	flush(t);
	assert_int_equal(count(t, 'S'), 0);
	assert_int_equal(msgs_freed, 2);
}

static void conn_rx__rndv_read_failed(void **state)
{
	struct t *t = *state;
	struct rmsg_msg *big;

	establish(t, 32, 8192);
	big = tmsg_new(t->c, "first");
	big->ready = 0;
	assert_int_equal(rx(t->c, RMSGI_T_RNDV_REQ, 0, 0, 77, big), 0);
	rmsgi_conn_rx_ready(t->c, big, -EACCES);
	assert_int_equal(t->msgs, 0);
	assert_int_equal(msgs_freed, 1);
	assert_int_equal(ft.ndisconnect, 1);
	tr_down(t->c);
	flush(t);
	assert_int_equal(t->close_reason, -EACCES);
}

static void conn_rx__bad_type(void **state)
{
	struct t *t = *state;

	establish(t, 32, 8192);
	assert_int_equal(rx(t->c, RMSGI_T_HELLO, 0, 0, 0, tmsg_new(t->c, NULL)),
			 -EPROTO);
	assert_int_equal(msgs_freed, 1);
	tr_down(t->c);
	flush(t);
	assert_int_equal(t->close_reason, -EPROTO);
}

/* frames arriving after a close are dropped, their buffers returned */
static void conn_rx__after_close(void **state)
{
	struct t *t = *state;
	struct rmsg_msg *big;

	establish(t, 32, 8192);
	big = tmsg_new(t->c, "big");
	big->ready = 0;
	assert_int_equal(rx(t->c, RMSGI_T_RNDV_REQ, 0, 0, 1, big), 0);
	assert_int_equal(rx_data(t->c, "queued", 0), 0);
	rmsg_conn_close(t->c);
	/* the ready one is dropped, the one being read stays the
	 * backend's */
	assert_int_equal(msgs_freed, 1);
	assert_int_equal(rx_data(t->c, "late", 0), 0);
	rmsgi_conn_rx_ready(t->c, big, -ECANCELED);
	assert_int_equal(msgs_freed, 2);
	tr_down(t->c);
	assert_int_equal(msgs_freed, 3);
	flush(t);
	assert_int_equal(t->msgs, 0);
	assert_int_equal(t->closed, 1);
}

/* a suspend (rmsgi_conn_rx_stale) gives up a message still being read
 * and the one behind it, uncounted: the peer's replay starts there
 * (session.c counts on in-order messages); the read's end frees it,
 * neither is delivered, no RNDV_ACK goes; a write's immediate behind
 * them stays */
static void conn_rx__cut_at_suspend(void **state)
{
	struct t *t = *state;
	struct rmsg_msg *big, *imm;
	uint64_t before;

	establish(t, 32, 8192);
	assert_int_equal(rx_data(t->c, "delivered", 0), 0);
	assert_int_equal(t->msgs, 1);
	before = t->c->st.msgs_recv;
	big = tmsg_new(t->c, "big");
	big->ready = 0;
	assert_int_equal(rx(t->c, RMSGI_T_RNDV_REQ, 0, 0, 77, big), 0);
	assert_int_equal(rx_data(t->c, "behind", 0), 0);
	imm = tmsg_new(t->c, NULL);
	assert_int_equal(rx(t->c, RMSGI_T_IMM, 0, 5, 0, imm), 0);
	assert_int_equal(t->c->st.msgs_recv, before + 1);
	rmsgi_conn_rx_stale(t->c);
	assert_int_equal(t->c->st.msgs_recv, before);
	assert_int_equal(msgs_freed, 2); /* "delivered", "behind" */
	/* the immediate waits for the read given up */
	assert_ptr_equal(t->c->rxq.next, &imm->link);
	assert_int_equal(t->c->st.imm_recv, 0);
	rmsgi_conn_rx_ready(t->c, big, 0);
	/* the immediate behind it went on */
	assert_true(rmsgi_list_empty(&t->c->rxq));
	assert_int_equal(msgs_freed, 4);
	assert_int_equal(t->msgs, 1);
	assert_int_equal(t->c->st.msgs_recv, before);
	assert_int_equal(t->c->st.imm_recv, 1);
	flush(t);
	assert_int_equal(ft.nposted, 0);
}

/* a resumable session acknowledges only what it has in order: not a
 * message counted behind a rendezvous still being read (the peer would
 * take it as had, and a cut at a break would lose it); once the read is
 * done both are acknowledged, and one refused for want of memory counts
 * as had (the peer numbered it) */
static void conn_rx__acks_stop_at_unread(void **state)
{
	struct t *t = *state;
	struct rmsg_msg *big;

	establish(t, 32, 8192);
	assert_non_null(rmsgi_session_new(t->c));
	rmsgi_session_on(t->c);
	big = tmsg_new(t->c, "big");
	big->ready = 0;
	assert_int_equal(rx(t->c, RMSGI_T_RNDV_REQ, 0, 0, 77, big), 0);
	assert_int_equal(rx_data(t->c, "behind", 0), 0);
	assert_int_equal(t->c->st.msgs_recv, 1);
	assert_int_equal(rmsgi_session_rx(t->c), 0);
	assert_int_equal(send_str(t, "x", 1), 0);
	flush(t);
	assert_int_equal(ft.posted[ft.nposted - 1].op->acks, 0);
	/* the cut at a suspend leaves nothing counted that the peer was
	 * told of */
	rmsgi_conn_rx_ready(t->c, big, 0);
	assert_int_equal(rmsgi_session_rx(t->c), 2);
	assert_int_equal(t->msgs, 2);
	big = tmsg_new(t->c, "big2");
	big->ready = 0;
	assert_int_equal(rx(t->c, RMSGI_T_RNDV_REQ, 0, 0, 78, big), 0);
	assert_int_equal(rx_data(t->c, "behind2", 0), 0);
	assert_int_equal(rmsgi_session_rx(t->c), 2);
	rmsgi_conn_rx_ready(t->c, big, -ENOMEM);
	assert_int_equal(rmsgi_session_rx(t->c), 4);
	assert_int_equal(t->msgs, 3);
}

/* a resumable session's message that its transport fails (RDMA fails
 * its frames before it reports the path's failure) is kept to go again,
 * its callback not run; a failure that is no path's still fails it */
static void conn_rx__failed_frame_kept(void **state)
{
	struct t *t = *state;
	int st;

	establish(t, 32, 8192);
	assert_non_null(rmsgi_session_new(t->c));
	rmsgi_session_on(t->c);
	assert_int_equal(send_str(t, "kept", 1), 0);
	assert_int_equal(send_str(t, "failed", 2), 0);
	flush(t);
	assert_int_equal(ft.nposted, 2);
	tr_complete(t->c, 0, -ETIMEDOUT);
	flush(t);
	assert_int_equal(done_count(t, 1, &st), 0);
	assert_int_equal(rmsgi_list_empty(&t->c->ss->unacked), 0);
	tr_complete(t->c, 0, -EINVAL);
	flush(t);
	assert_int_equal(done_count(t, 2, &st), 1);
	assert_int_equal(st, -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		CONN_T(conn_rndv__waits_for_ack),
		CONN_T(conn_rndv__queued_before_established),
		CONN_T(conn_rndv__ack_before_send_done),
		CONN_T(conn_rndv__ack_error),
		CONN_T(conn_rndv__ack_bad_status),
		CONN_T(conn_rndv__unknown_ack_closes),
		CONN_T(conn_rndv__send_fails),
		CONN_T(conn_rndv__not_without_cap),
		CONN_T(conn_rx__delivers_in_order),
		CONN_T(conn_rx__rndv_read_failed),
		CONN_T(conn_rx__bad_type),
		CONN_T(conn_rx__after_close),
		CONN_T(conn_rx__cut_at_suspend),
		CONN_T(conn_rx__acks_stop_at_unread),
		CONN_T(conn_rx__failed_frame_kept),
	};

	unit_filter();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
