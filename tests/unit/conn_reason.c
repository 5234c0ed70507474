// SPDX-License-Identifier: MIT
/*
 * conn_reason.c - unit tests of rmsg_conn_close_reason() (src/conn.c)
 * against the fake transport (fake_tr.h): NULL while open; set as the
 * connection starts to close, by the first cause given or from the
 * errno, and unchanged from then on (same text, same address) until
 * on_close; the frame a peer broke the protocol with is named.
 */
#include "conn_t.h"

/* the reason now, then checked again after on_close was due: the same
 * pointer, the same text, which contains @want */
static const char *reason_is(struct t *t, const char *want)
{
	const char *why = rmsg_conn_close_reason(t->c);

	assert_non_null(why);
	if (!strstr(why, want))
		fail_msg("reason \"%s\", expected \"%s\" in it", why, want);
	return why;
}

static void conn_close_reason__null_while_open(void **state)
{
	struct t *t = *state;

	assert_null(rmsg_conn_close_reason(NULL));
	assert_null(rmsg_conn_close_reason(t->c));
	establish(t, 32, 8192);
	assert_null(rmsg_conn_close_reason(t->c));
}

static void conn_close_reason__local_close(void **state)
{
	struct t *t = *state;
	const char *why;

	establish(t, 32, 8192);
	assert_int_equal(rmsg_conn_close(t->c), 0);
	why = reason_is(t, "closed by this side (rmsg_conn_close)");
	/* a failure of the backend while it lingers changes nothing */
	rmsgi_conn_ev_failed(t->c, -ECONNRESET, NULL);
	assert_ptr_equal(rmsg_conn_close_reason(t->c), why);
	assert_string_equal(why, "closed by this side (rmsg_conn_close)");
	tr_down(t->c);
	flush(t);
	assert_int_equal(t->closed, 1);
	assert_int_equal(t->close_reason, 0);
}

static void conn_close_reason__peer_reset_and_bye(void **state)
{
	struct t *t = *state;

	establish(t, 32, 8192);
	rmsgi_conn_ev_failed(t->c, -ECONNRESET, NULL);
	reason_is(t, "went away without a close");
	tr_down(t->c);
	flush(t);
	assert_int_equal(t->close_reason, -ECONNRESET);
}

static void conn_close_reason__peer_bye(void **state)
{
	struct t *t = *state;

	establish(t, 32, 8192);
	/* the peer's BYE, then its end */
	assert_int_equal(rx(t->c, RMSGI_T_CREDIT, 0, RMSGI_CREDIT_BYE, 0,
			    tmsg_new(t->c, NULL)),
			 0);
	rmsgi_conn_ev_failed(t->c, -ECONNRESET, NULL);
	reason_is(t, "the peer closed the connection");
	tr_down(t->c);
	flush(t);
	assert_int_equal(t->close_reason, -ESHUTDOWN);
}

/* the peer's BYE, then a send of ours its torn-down end never took
 * (RDMA: transport retry counter exceeded, -ETIMEDOUT, before the
 * disconnect event): still its close on purpose */
static void conn_close_reason__peer_bye_then_timeout(void **state)
{
	struct t *t = *state;

	establish(t, 32, 8192);
	assert_int_equal(rx(t->c, RMSGI_T_CREDIT, 0, RMSGI_CREDIT_BYE, 0,
			    tmsg_new(t->c, NULL)),
			 0);
	rmsgi_conn_why(t->c, "work completion error: transport retry counter "
			     "exceeded");
	rmsgi_conn_ev_failed(t->c, -ETIMEDOUT, NULL);
	reason_is(t, "the peer closed the connection");
	tr_down(t->c);
	flush(t);
	assert_int_equal(t->close_reason, -ESHUTDOWN);
}

/* the frame is named: a type nobody knows, and one out of place */
static void conn_close_reason__names_the_frame(void **state)
{
	struct t *t = *state;

	establish(t, 32, 8192);
	assert_int_equal(rx(t->c, 99, 0, 0, 0, tmsg_new(t->c, NULL)), -EPROTO);
	reason_is(t, "the peer sent a frame of an unknown type (99)");
	tr_down(t->c);
	flush(t);
	assert_int_equal(t->close_reason, -EPROTO);
}

static void conn_close_reason__names_rndv_ack(void **state)
{
	struct t *t = *state;

	establish(t, 32, 8192);
	/* an acknowledgement of a rendezvous we never asked for */
	assert_int_equal(
		rx(t->c, RMSGI_T_RNDV_ACK, 0, 0, 77, tmsg_new(t->c, NULL)),
		-EPROTO);
	reason_is(t, "RNDV_ACK frame for nothing we asked");
	tr_down(t->c);
	flush(t);
}

/* the first cause counts; none once closing */
static void conn_close_reason__first_wins(void **state)
{
	struct t *t = *state;
	const char *why;

	establish(t, 32, 8192);
	rmsgi_conn_why(t->c, "first %d", 1);
	rmsgi_conn_why(t->c, "second");
	rmsgi_conn_abort(t->c, -ETIMEDOUT);
	why = reason_is(t, "first 1");
	rmsgi_conn_why(t->c, "after the close");
	assert_ptr_equal(rmsg_conn_close_reason(t->c), why);
	assert_string_equal(why, "first 1");
	tr_down(t->c);
	flush(t);
	assert_int_equal(t->close_reason, -ETIMEDOUT);
}

/* without a cause: the errno's text, named by rmsg_err_name() */
static void conn_close_reason__from_errno(void **state)
{
	struct t *t = *state;

	establish(t, 32, 8192);
	rmsgi_conn_ev_failed(t->c, -EREMOTEIO, NULL);
	reason_is(t, "(EREMOTEIO)");
	tr_down(t->c);
	flush(t);
}

static void conn_close_reason__refused_connect(void **state)
{
	struct t *t = *state;
	struct rmsgi_hello h = {.status = -ECONNREFUSED};

	rmsgi_conn_ev_failed(t->c, -ECONNREFUSED, &h);
	reason_is(t, "rejected by the peer's accept callback");
	tr_down(t->c);
	flush(t);
	assert_int_equal(t->close_reason, -ECONNREFUSED);
}

/* a backend that goes down while the connection is still connecting,
 * with a reason the core already has (auto://: the fallback transport
 * could not even start, start.c): on_close gets that reason, not
 * -ECONNRESET, and the text says what failed */
static void conn_close_reason__down_keeps_known_reason(void **state)
{
	struct t *t = *state;
	struct iovec iov = {"x", 1};
	int st = 1;

	assert_int_equal(rmsg_send(t->c, &iov, 1, done_cb, (void *)1), 0);
	rmsgi_conn_why(t->c, "rdma failed (no device), and tcp could not "
			     "start: too many open files");
	t->c->close_reason = -EMFILE;
	tr_down(t->c);
	flush(t);
	assert_int_equal(t->closed, 1);
	assert_int_equal(t->close_reason, -EMFILE);
	assert_int_equal(done_count(t, 1, &st), 1);
	assert_int_equal(st, -EMFILE);
}

static void conn_close_reason__listener_limits(void **state)
{
	struct t *t = *state;
	struct rmsgi_hello h = {.status = -EUSERS};

	rmsgi_conn_ev_failed(t->c, -ECONNREFUSED, &h);
	reason_is(t, "over its limits (max_conns, max_pending)");
	tr_down(t->c);
	flush(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		CONN_T(conn_close_reason__null_while_open),
		CONN_T(conn_close_reason__local_close),
		CONN_T(conn_close_reason__peer_reset_and_bye),
		CONN_T(conn_close_reason__peer_bye),
		CONN_T(conn_close_reason__peer_bye_then_timeout),
		CONN_T(conn_close_reason__names_the_frame),
		CONN_T(conn_close_reason__names_rndv_ack),
		CONN_T(conn_close_reason__first_wins),
		CONN_T(conn_close_reason__from_errno),
		CONN_T(conn_close_reason__refused_connect),
		CONN_T(conn_close_reason__listener_limits),
		CONN_T(conn_close_reason__down_keeps_known_reason),
	};

	unit_filter();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
