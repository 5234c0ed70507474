// SPDX-License-Identifier: MIT
/*
 * conn_post.c - unit tests of the connection state machine (src/conn.c)
 * against the fake transport (fake_tr.h): the send queue's bound and the
 * backend's room: -EAGAIN from rmsg_send() and from post(), on_writable,
 * and a post() that fails.
 */
#include <unistd.h>

#include "conn_t.h"

/* ------------------------------------------------------------------ */
/* queue bound and transport room                                       */

static void conn_send__eagain_then_writable(void **state)
{
	struct rmsgi_cfgv cfg;
	struct t *t;
	int i;

	rmsgi_cfg_defaults(&cfg);
	cfg.send_queue = 4;
	t = replace_t(state, &cfg, 0);
	establish(t, 64, 8192);
	for (i = 1; i <= 4; i++)
		assert_int_equal(send_str(t, "x", i), 0);
	assert_int_equal(send_str(t, "x", 5), -EAGAIN);
	flush(t);
	assert_int_equal(ft.nposted, 4);
	tr_complete(t->c, 0, 0);
	flush(t);
	assert_int_equal(t->writable, 0);
	assert_int_equal(send_str(t, "x", 6), 0);
	assert_int_equal(send_str(t, "x", 7), -EAGAIN);
	flush(t);
	tr_complete(t->c, 0, 0);
	flush(t);
	assert_int_equal(t->writable, 0);
	tr_complete(t->c, 0, 0);
	flush(t);
	/* half empty: tell the app once */
	assert_int_equal(t->writable, 1);
	tr_complete(t->c, 0, 0);
	flush(t);
	assert_int_equal(t->writable, 1);
	tr_complete_all(t->c, 0);
	flush(t);
	assert_int_equal(t->writable, 1);
	/* the refused sends never get a callback */
	assert_int_equal(done_count(t, 5, NULL), 0);
	assert_int_equal(done_count(t, 7, NULL), 0);
	assert_int_equal(count(t, 'S'), 5);
	for (i = 1; i <= 4; i++)
		assert_int_equal(send_str(t, "x", 10 + i), 0);
}

static void conn_post__eagain_requeues(void **state)
{
	struct t *t = *state;
	int i;

	establish(t, 32, 8192);
	for (i = 1; i <= 3; i++)
		assert_int_equal(send_str(t, "x", i), 0);
	ft.post_ret = -EAGAIN;
	flush(t);
	assert_int_equal(ft.npost, 1);
	assert_int_equal(ft.nposted, 0);
	assert_int_equal(ft.nkick, 0);
	assert_int_equal(t->c->cr.avail, 32);
	ft.post_ret = 0;
	flush(t);
	/* not before the backend says there is room */
	assert_int_equal(ft.npost, 1);
	rmsgi_conn_tr_room(t->c);
	flush(t);
	assert_int_equal(ft.nposted, 3);
	for (i = 0; i < 3; i++)
		assert_int_equal((intptr_t)ft.posted[i].op->arg, i + 1);
	assert_int_equal(count(t, 'S'), 0);
}

static void conn_post__error_fails_op_and_conn(void **state)
{
	struct t *t = *state;
	int status;

	establish(t, 32, 8192);
	assert_int_equal(send_str(t, "a", 1), 0);
	assert_int_equal(send_str(t, "b", 2), 0);
	assert_int_equal(send_str(t, "c", 3), 0);
	flush(t);
	assert_int_equal(ft.nposted, 3);
	assert_int_equal(send_str(t, "d", 4), 0);
	assert_int_equal(send_str(t, "e", 5), 0);
	ft.post_ret = -EIO;
	ft.post_ret_calls = 1;
	flush(t);
	assert_int_equal(ft.ndisconnect, 1);
	assert_int_equal(t->c->state, RMSGI_CS_CLOSING);
	tr_complete_all(t->c, -ECANCELED);
	tr_down(t->c);
	flush(t);
	assert_int_equal(done_count(t, 4, &status), 1);
	assert_int_equal(status, -EIO);
	assert_int_equal(done_count(t, 5, &status), 1);
	assert_int_equal(status, -EIO);
	assert_int_equal(done_count(t, 1, &status), 1);
	assert_int_equal(status, -EIO);
	assert_int_equal(t->close_reason, -EIO);
	assert_int_equal(count(t, 'S'), 5);
	assert_int_equal(t->log[t->nlog - 1].kind, 'X');
}

/* ops the backend accepted before a post failed are still rung in */
static void conn_post__error_kicks_batch(void **state)
{
	struct t *t = *state;
	int status;

	establish(t, 32, 8192);
	assert_int_equal(send_str(t, "a", 1), 0);
	assert_int_equal(send_str(t, "b", 2), 0);
	assert_int_equal(send_str(t, "c", 3), 0);
	/* the first two go, the third fails */
	ft.fail_nth = 3;
	flush(t);
	ft.fail_nth = 0;
	assert_int_equal(ft.nposted, 2);
	assert_int_equal(ft.nkick, 1);
	tr_complete_all(t->c, 0);
	tr_down(t->c);
	flush(t);
	assert_int_equal(done_count(t, 1, &status), 1);
	assert_int_equal(status, 0);
	assert_int_equal(done_count(t, 3, &status), 1);
	assert_int_equal(status, -EIO);
	assert_int_equal(t->close_reason, -EIO);
}

/* the CREDIT frame is part of the conn: a failed post must not hand it to
 * the op allocator */
static void conn_post__credit_frame_error(void **state)
{
	struct t *t = *state;
	struct rmsgi_list *n;
	bool recycled = false;
	int i;

	establish(t, 32, 8192);
	for (i = 0; i < 8; i++)
		assert_int_equal(rx_data(t->c, "m", 0), 0);
	ft.post_ret = -EIO;
	ft.post_ret_calls = 1;
	flush(t);
	for (n = t->ctx->op_free.next; n != &t->ctx->op_free; n = n->next)
		if (n == &t->c->tx.credit_op.link)
			recycled = true;
	if (recycled) {
		/* take it back so that the teardown does not free() it */
		rmsgi_list_del(&t->c->tx.credit_op.link);
		t->ctx->op_free_len--;
	}
	assert_false(recycled);
	assert_int_equal(t->c->state, RMSGI_CS_CLOSING);
}

/* ------------------------------------------------------------------ */
/* the direct path (send.c send_now)                                    */

/* the first send of a burst is written inside the call, a second in the
 * same burst waits in the queue (batched), and a flush ends the burst
 * even where the loop clock did not move: the rounds of completions one
 * wake-up polls (issue 32; the loop never runs in this test, so
 * ev_now() stays where it is throughout) */
static void conn_send__direct_once_per_burst(void **state)
{
	struct t *t = *state;

	fake_tr_direct();
	fake_tr_attach(t->c);
	establish(t, 32, 8192);
	assert_int_equal(send_str(t, "a", 1), 0);
	assert_int_equal(ft.ndirect, 1);
	assert_int_equal(ft.nposted, 0);
	assert_int_equal(send_str(t, "b", 2), 0);
	assert_int_equal(ft.ndirect, 1); /* queued behind the first */
	flush(t);
	assert_int_equal(ft.nposted, 1);
	assert_int_equal(done_count(t, 1, NULL), 1);
	tr_complete_all(t->c, 0);
	flush(t);
	/* a new burst at the same loop time: direct again */
	assert_int_equal(send_str(t, "c", 3), 0);
	assert_int_equal(ft.ndirect, 2);
	assert_int_equal(ft.nposted, 0);
	/* but not while something is queued */
	assert_int_equal(send_str(t, "d", 4), 0);
	flush(t);
	assert_int_equal(send_str(t, "e", 5), 0);
	assert_int_equal(ft.ndirect, 3);
	flush(t);
	assert_int_equal(done_count(t, 3, NULL), 1);
	assert_int_equal(done_count(t, 5, NULL), 1);
	/* a flush, then a later loop time: still one burst, one direct
	 * send (the fd-mode destroy test over rdma found a second) */
	tr_complete_all(t->c, 0);
	flush(t);
	{
		ev_tstamp was = ev_now(t->loop);

		while (ev_now(t->loop) == was) {
			usleep(1000);
			ev_now_update(t->loop);
		}
	}
	assert_int_equal(send_str(t, "f", 6), 0);
	assert_int_equal(ft.ndirect, 4);
	assert_int_equal(send_str(t, "g", 7), 0);
	assert_int_equal(ft.ndirect, 4); /* queued behind the first */
	flush(t);
	assert_int_equal(ft.nposted, 1);
	tr_complete_all(t->c, 0);
	flush(t);
	assert_int_equal(done_count(t, 6, NULL), 1);
	assert_int_equal(done_count(t, 7, NULL), 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		CONN_T(conn_send__eagain_then_writable),
		CONN_T(conn_post__eagain_requeues),
		CONN_T(conn_post__error_fails_op_and_conn),
		CONN_T(conn_post__error_kicks_batch),
		CONN_T(conn_post__credit_frame_error),
		CONN_T(conn_send__direct_once_per_burst),
	};

	unit_filter();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
