// SPDX-License-Identifier: MIT
/*
 * conn_state.c - unit tests of the connection state machine (src/conn.c)
 * against the fake transport (fake_tr.h): the connection's life: sending
 * over an open connection, closing, failures reported by the backend, the
 * handshake's hellos, and received messages the app holds or closes in.
 */
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include "conn_t.h"

/* ------------------------------------------------------------------ */
/* sending                                                              */

static void conn_send__done_once(void **state)
{
	struct t *t = *state;
	int status = 1;

	establish(t, 32, 8192);
	assert_int_equal(send_str(t, "hello", 7), 0);
	/* nothing happens inside the call: the flush posts */
	assert_int_equal(ft.npost, 0);
	flush(t);
	assert_int_equal(ft.nposted, 1);
	assert_int_equal(ft.nkick, 1);
	assert_int_equal(ft.posted[0].type, RMSGI_T_DATA);
	assert_int_equal(ft.posted[0].kind, RMSGI_OP_SEND);
	assert_int_equal(ft.posted[0].len, 5);
	assert_int_equal(ft.posted[0].op->iovcnt, 1);
	assert_int_equal(done_count(t, 7, NULL), 0);
	tr_complete(t->c, 0, 0);
	/* the callback runs from the flush, not from the completion */
	assert_int_equal(done_count(t, 7, NULL), 0);
	flush(t);
	assert_int_equal(done_count(t, 7, &status), 1);
	assert_int_equal(status, 0);
	flush(t);
	flush(t);
	assert_int_equal(done_count(t, 7, NULL), 1);
	assert_int_equal(t->c->tx.sendq_len, 0);
}

static void conn_send__bad_args(void **state)
{
	struct t *t = *state;
	struct iovec iov[RMSG_IOV_MAX + 1];

	memset(iov, 0, sizeof(iov));
	assert_int_equal(rmsg_send(NULL, iov, 1, NULL, NULL), -EINVAL);
	assert_int_equal(rmsg_send(t->c, NULL, 1, NULL, NULL), -EINVAL);
	assert_int_equal(rmsg_send(t->c, iov, -1, NULL, NULL), -EINVAL);
	assert_int_equal(rmsg_send(t->c, iov, RMSG_IOV_MAX + 1, NULL, NULL),
			 -EINVAL);
	iov[0].iov_len = 1;
	assert_int_equal(rmsg_send(t->c, iov, 1, NULL, NULL), -EINVAL);
	iov[0].iov_base = iov;
	iov[0].iov_len = SIZE_MAX;
	iov[1].iov_base = iov;
	iov[1].iov_len = 2;
	assert_int_equal(rmsg_send(t->c, iov, 2, NULL, NULL), -EMSGSIZE);
	iov[0].iov_len = t->c->cfg.max_msg_size + 1;
	assert_int_equal(rmsg_send(t->c, iov, 1, NULL, NULL), -EMSGSIZE);
	assert_int_equal(t->c->tx.sendq_len, 0);
}

/* more pieces than fit inline in the op */
static void conn_send__many_iov(void **state)
{
	struct t *t = *state;
	struct iovec iov[RMSGI_OP_IOV_INLINE + 3];
	char bytes[RMSGI_OP_IOV_INLINE + 3];
	int i;

	establish(t, 32, 8192);
	for (i = 0; i < RMSGI_OP_IOV_INLINE + 3; i++) {
		iov[i].iov_base = &bytes[i];
		iov[i].iov_len = 1;
	}
	assert_int_equal(rmsg_send(t->c, iov, RMSGI_OP_IOV_INLINE + 3, done_cb,
				   (void *)1),
			 0);
	/* the caller's array may go now */
	memset(iov, 0, sizeof(iov));
	flush(t);
	assert_int_equal(ft.nposted, 1);
	assert_int_equal(ft.posted[0].op->iovcnt, RMSGI_OP_IOV_INLINE + 3);
	assert_ptr_equal(ft.posted[0].op->iov[RMSGI_OP_IOV_INLINE + 2].iov_base,
			 &bytes[RMSGI_OP_IOV_INLINE + 2]);
	assert_int_equal(ft.posted[0].len, RMSGI_OP_IOV_INLINE + 3);
	tr_complete(t->c, 0, 0);
	flush(t);
	assert_int_equal(done_count(t, 1, NULL), 1);
}

/* sends queued while connecting go once established, in order */
static void conn_send__queued_until_established(void **state)
{
	struct t *t = *state;

	assert_int_equal(send_str(t, "a", 1), 0);
	assert_int_equal(send_str(t, "b", 2), 0);
	flush(t);
	assert_int_equal(ft.npost, 0);
	establish(t, 32, 8192);
	flush(t);
	assert_int_equal(ft.nposted, 2);
	assert_int_equal((intptr_t)ft.posted[0].op->arg, 1);
	assert_int_equal((intptr_t)ft.posted[1].op->arg, 2);
	assert_int_equal(ft.nkick, 1);
}

/* ------------------------------------------------------------------ */
/* closing and failures                                                 */

static void conn_close__queued_ops_canceled(void **state)
{
	struct t *t = *state;
	int i, status;

	establish(t, 4, 8192);
	for (i = 1; i <= 6; i++)
		assert_int_equal(send_str(t, "x", i), 0);
	flush(t);
	/* 4 credits: 3 messages, the last one is kept */
	assert_int_equal(ft.nposted, 3);
	assert_int_equal(rmsg_conn_close(t->c), 0);
	assert_int_equal(ft.ndisconnect, 1);
	assert_int_equal(rmsg_send(t->c, NULL, 0, done_cb, (void *)99),
			 -ENOTCONN);
	assert_int_equal(rmsg_conn_close(t->c), 0);
	assert_int_equal(ft.ndisconnect, 1);
	flush(t);
	/* the queued ones are done, the posted ones wait for the backend */
	for (i = 4; i <= 6; i++) {
		assert_int_equal(done_count(t, i, &status), 1);
		assert_int_equal(status, -ECANCELED);
	}
	assert_int_equal(done_count(t, 1, NULL), 0);
	assert_int_equal(t->closed, 0);
	tr_complete_all(t->c, -ECANCELED);
	tr_down(t->c);
	flush(t);
	for (i = 1; i <= 6; i++) {
		assert_int_equal(done_count(t, i, &status), 1);
		assert_int_equal(status, -ECANCELED);
	}
	assert_int_equal(done_count(t, 99, NULL), 0);
	assert_int_equal(t->closed, 1);
	assert_int_equal(t->close_reason, 0);
	/* on_close is the last callback */
	assert_int_equal(t->log[t->nlog - 1].kind, 'X');
	assert_int_equal(count(t, 'X'), 1);
	assert_null(t->c);
	flush(t);
	assert_int_equal(t->closed, 1);
}

static void conn_close__connecting(void **state)
{
	struct t *t = *state;
	int status;

	assert_int_equal(send_str(t, "a", 1), 0);
	assert_int_equal(rmsg_conn_close(t->c), 0);
	tr_down(t->c);
	flush(t);
	assert_int_equal(done_count(t, 1, &status), 1);
	assert_int_equal(status, -ECANCELED);
	assert_int_equal(t->established, 0);
	assert_int_equal(t->closed, 1);
	assert_int_equal(t->close_reason, 0);
	assert_int_equal(t->log[t->nlog - 1].kind, 'X');
	assert_int_equal(ft.npost, 0);
}

static void conn_ev_failed__reason_to_cbs(void **state)
{
	struct t *t = *state;
	int i, status;

	establish(t, 4, 8192);
	for (i = 1; i <= 5; i++)
		assert_int_equal(send_str(t, "x", i), 0);
	flush(t);
	assert_int_equal(ft.nposted, 3);
	rmsgi_conn_ev_failed(t->c, -ETIMEDOUT, NULL);
	assert_int_equal(t->c->state, RMSGI_CS_CLOSING);
	/* the backend flushes what it holds, then goes down */
	tr_complete(t->c, 0, -ECANCELED);
	tr_complete(t->c, 0, -ECANCELED);
	tr_complete(t->c, 0, -EIO);
	tr_down(t->c);
	flush(t);
	for (i = 1; i <= 5; i++) {
		assert_int_equal(done_count(t, i, &status), 1);
		/* an op's own error stays its own */
		assert_int_equal(status, i == 3 ? -EIO : -ETIMEDOUT);
	}
	assert_int_equal(t->closed, 1);
	assert_int_equal(t->close_reason, -ETIMEDOUT);
	assert_int_equal(t->log[t->nlog - 1].kind, 'X');
	assert_int_equal(ft.ndisconnect, 0);
}

static void conn_ev_failed__no_reason(void **state)
{
	struct t *t = *state;

	establish(t, 32, 8192);
	rmsgi_conn_ev_failed(t->c, 0, NULL);
	rmsgi_conn_ev_failed(t->c, -EIO, NULL); /* once only */
	tr_down(t->c);
	flush(t);
	assert_int_equal(t->closed, 1);
	assert_int_equal(t->close_reason, -ECONNRESET);
}

/* a failure after a local close keeps reason 0 */
static void conn_ev_failed__after_close(void **state)
{
	struct t *t = *state;
	int status;

	establish(t, 32, 8192);
	assert_int_equal(send_str(t, "a", 1), 0);
	flush(t);
	rmsg_conn_close(t->c);
	rmsgi_conn_ev_failed(t->c, -ECONNRESET, NULL);
	tr_complete_all(t->c, -ECANCELED);
	tr_down(t->c);
	flush(t);
	assert_int_equal(done_count(t, 1, &status), 1);
	assert_int_equal(status, -ECANCELED);
	assert_int_equal(t->closed, 1);
	assert_int_equal(t->close_reason, 0);
}

/* a reject's private data reaches the app */
static void conn_ev_failed__reject_pdata(void **state)
{
	struct t *t = *state;
	struct rmsgi_hello h = {
		.status = -ECONNREFUSED, .pdata_len = 4, .pdata = "nope"};
	const void *data;
	size_t len;

	rmsgi_conn_ev_failed(t->c, -ECONNREFUSED, &h);
	assert_int_equal(rmsg_conn_peer_data(t->c, &data, &len), 0);
	assert_int_equal(len, 4);
	assert_memory_equal(data, "nope", 4);
	tr_down(t->c);
	flush(t);
	assert_int_equal(t->close_reason, -ECONNREFUSED);
	assert_int_equal(t->established, 0);
}

static void conn_established__bad_hello(void **state)
{
	struct t *t = *state;
	struct rmsgi_hello h = {.credits = 3, .eager_size = 8192};

	rmsgi_conn_ev_established(t->c, &h);
	assert_int_equal(t->established, 0);
	assert_int_equal(t->c->state, RMSGI_CS_CLOSING);
	assert_int_equal(ft.ndisconnect, 1);
	tr_down(t->c);
	flush(t);
	assert_int_equal(t->close_reason, -EPROTO);
	assert_int_equal(count(t, 'E'), 0);
}

static void conn_established__small_eager(void **state)
{
	struct t *t = *state;
	struct rmsgi_hello h = {.credits = 4, .eager_size = 63};

	rmsgi_conn_ev_established(t->c, &h);
	assert_int_equal(t->established, 0);
	tr_down(t->c);
	flush(t);
	assert_int_equal(t->close_reason, -EPROTO);
}

static int accept_ret;
static struct rmsg_conn *accepted;

static int accept_cb(struct rmsg_listener *l, struct rmsg_conn *c,
		     const void *pdata, size_t len, void *arg)
{
	accepted = c;
	assert_int_equal(len, 3);
	assert_memory_equal(pdata, "abc", 3);
	assert_int_equal(rmsg_conn_set_private_data(c, "ok", 2), 0);
	return accept_ret;
}

static void conn_ev_request__accept_reject(void **state)
{
	struct t *t = *state;
	struct rmsgi_hello h = {.credits = 16,
				.eager_size = 4096,
				.pdata_len = 3,
				.pdata = "abc"};
	struct rmsg_listener l;
	struct rmsgi_hello mine, reply;

	memset(&l, 0, sizeof(l));
	l.accept = accept_cb;
	l.ops = ops;	/* the accepted connection's callbacks */
	accept_ret = 1; /* a positive value is a refusal too */
	assert_int_equal(rmsgi_conn_ev_request(t->c, &l, &h, &reply),
			 -ECONNREFUSED);
	assert_int_equal(reply.status, -ECONNREFUSED);
	assert_ptr_equal(accepted, t->c);
	accept_ret = -EPERM;
	assert_int_equal(rmsgi_conn_ev_request(t->c, &l, &h, &reply), -EPERM);
	assert_int_equal(reply.status, -EPERM);
	/* not an errno: the peer reads a plain refusal */
	accept_ret = -100000;
	assert_int_equal(rmsgi_conn_ev_request(t->c, &l, &h, &reply),
			 -ECONNREFUSED);
	assert_int_equal(reply.status, -ECONNREFUSED);
	h.credits = 2;
	accepted = NULL;
	assert_int_equal(rmsgi_conn_ev_request(t->c, &l, &h, &reply), -EPROTO);
	assert_null(accepted);
	h.credits = 16;
	accept_ret = 0;
	assert_int_equal(rmsgi_conn_ev_request(t->c, &l, &h, &reply), 0);
	assert_int_equal(reply.status, 0);
	assert_int_equal(t->c->state, RMSGI_CS_ACCEPTING);
	/* the reply carries what the app set, only inside accept */
	assert_int_equal(reply.pdata_len, 2);
	assert_memory_equal(reply.pdata, "ok", 2);
	rmsgi_conn_hello(t->c, &mine);
	assert_int_equal(mine.pdata_len, 2);
	assert_memory_equal(mine.pdata, "ok", 2);
	assert_int_equal(rmsg_conn_set_private_data(t->c, "x", 1), -EALREADY);
	assert_int_equal(t->c->peer_credits, 16);
	assert_int_equal(t->c->tx.peer_eager, 4096);
	rmsgi_conn_ev_established(t->c, NULL);
	assert_int_equal(t->established, 1);
	assert_int_equal(t->c->cr.avail, 16);
}

/* a one-sided request that arrives while a local close lingers is not
 * answered, and does not keep on_close from running */
static void conn_close__request_during_linger(void **state)
{
	struct t *t = *state;
	struct rmsgi_rma r = {.off = 0, .token = 12345, .len = 8};
	struct rmsg_msg *m;
	struct tmsg *tm;

	establish(t, 32, 8192);
	assert_int_equal(rmsg_conn_close(t->c), 0);
	m = tmsg_new(t->c, NULL);
	tm = RMSGI_CONTAINER_OF(m, struct tmsg, m);
	rmsgi_rma_encode(&r, 1, tm->data);
	m->len = RMSGI_READ_REQ_SIZE;
	assert_int_equal(rx(t->c, RMSGI_T_READ_REQ, 0, 0, 9, m), 0);
	assert_int_equal(t->c->tx.ans_n, 0);
	tr_down(t->c);
	flush(t);
	assert_int_equal(t->closed, 1);
	assert_int_equal(t->close_reason, 0);
}

static void conn_msg__held_outlives_close(void **state)
{
	struct t *t = *state;
	struct rmsg_conn *c = t->c;
	struct rmsg_msg *m;

	establish(t, 32, 8192);
	t->hold = true;
	assert_int_equal(rx_data(c, "keep me", 0), 0);
	m = t->held;
	assert_non_null(m);
	assert_int_equal(msgs_freed, 0);
	assert_int_equal(rmsg_msg_hold(m), -EINVAL); /* not in on_msg */
	rmsg_conn_close(c);
	tr_down(c);
	flush(t);
	assert_int_equal(t->closed, 1);
	/* closed, but the held message still has its conn */
	assert_int_equal(c->state, RMSGI_CS_CLOSED);
	assert_int_equal(c->refs, 1);
	assert_int_equal(rmsg_msg_len(m), 7);
	assert_memory_equal(rmsg_msg_data(m), "keep me", 7);
	assert_int_equal(msgs_freed, 0);
	rmsg_msg_release(m);
	assert_int_equal(msgs_freed, 1);
	t->held = NULL;
	t->c = NULL;
	assert_int_equal(t->closed, 1);
}

/* closing from inside on_msg: later messages are dropped, on_close once */
static void conn_msg__close_in_on_msg(void **state)
{
	struct t *t = *state;
	struct rmsg_msg *big;

	establish(t, 32, 8192);
	big = tmsg_new(t->c, "one");
	big->ready = 0;
	assert_int_equal(rx(t->c, RMSGI_T_RNDV_REQ, 0, 0, 1, big), 0);
	assert_int_equal(rx_data(t->c, "two", 0), 0);
	assert_int_equal(rx_data(t->c, "three", 0), 0);
	t->close_in_msg = true;
	rmsgi_conn_rx_ready(t->c, big, 0);
	assert_int_equal(t->msgs, 1);
	assert_int_equal(msgs_freed, 3);
	tr_down(t->c);
	flush(t);
	assert_int_equal(t->closed, 1);
	assert_int_equal(t->close_reason, 0);
}

/* ------------------------------------------------------------------ */
/* rmsg_connect and host names                                          */

/* runs @loop without blocking until the fake's connect() ran @n times,
 * for at most 5 s */
static void run_until_connects(struct ev_loop *loop, int n)
{
	int i;

	for (i = 0; i < 500 && ft.nconnect < n; i++) {
		ev_run(loop, EVRUN_NOWAIT);
		usleep(10000);
	}
}

static uint16_t to_port(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET)
		return ntohs(((const struct sockaddr_in *)ss)->sin_port);
	assert_int_equal(ss->ss_family, AF_INET6);
	return ntohs(((const struct sockaddr_in6 *)ss)->sin6_port);
}

/* rmsg_connect.3: a numeric host reaches the backend inside the call (no
 * thread, no loop iteration); a name is resolved off the loop thread and
 * the backend gets its addresses from the loop, never inside the call;
 * sends queued meanwhile wait */
static void conn_connect__numeric_inline_name_later(void **state)
{
	struct t *t = *state, t2, t3;
	const struct sockaddr_in *sin;
	unsigned i;

	memset(&t2, 0, sizeof(t2));
	memset(&t3, 0, sizeof(t3));
	assert_int_equal(rmsg_connect(t->ctx, "tcp://127.0.0.1:7000", NULL,
				      &ops, &t2, &t2.c),
			 0);
	assert_int_equal(ft.nconnect, 1);
	assert_int_equal(ft.last_to.n, 1);
	sin = (const struct sockaddr_in *)&ft.last_to.a[0];
	assert_int_equal(sin->sin_family, AF_INET);
	assert_int_equal(ntohl(sin->sin_addr.s_addr), INADDR_LOOPBACK);
	assert_int_equal(ntohs(sin->sin_port), 7000);

	assert_int_equal(rmsg_connect(t->ctx, "tcp://localhost:7001", NULL,
				      &ops, &t3, &t3.c),
			 0);
	assert_int_equal(ft.nconnect, 1); /* not inside the call */
	t3.loop = t->loop;
	assert_int_equal(send_str(&t3, "early", 1), 0);
	flush(t);
	assert_int_equal(ft.npost, 0);
	run_until_connects(t->loop, 2);
	assert_int_equal(ft.nconnect, 2);
	assert_true(ft.last_to.n >= 1);
	for (i = 0; i < ft.last_to.n; i++)
		assert_int_equal(to_port(&ft.last_to.a[i]), 7001);
	assert_int_equal(t3.closed, 0);

	/* the fake goes down once (ft.down): once per connection here */
	ft.auto_down = true;
	assert_int_equal(rmsg_conn_close(t2.c), 0);
	ft.down = false;
	assert_int_equal(rmsg_conn_close(t3.c), 0);
	ft.down = false;
	ft.auto_down = false;
	flush(t);
	assert_int_equal(t2.closed, 1);
	assert_int_equal(t3.closed, 1);
	assert_int_equal(done_count(&t3, 1, NULL), 1);
}

/* a close while the name resolves: on_close once, from the loop, reason
 * 0; the answer that comes later connects nothing */
static void conn_connect__close_while_resolving(void **state)
{
	struct t *t = *state, t2;
	int i;

	memset(&t2, 0, sizeof(t2));
	assert_int_equal(rmsg_connect(t->ctx, "tcp://localhost:7002", NULL,
				      &ops, &t2, &t2.c),
			 0);
	assert_int_equal(rmsg_conn_close(t2.c), 0);
	assert_int_equal(t2.closed, 0); /* never inside the call */
	flush(t);
	assert_int_equal(t2.closed, 1);
	assert_int_equal(t2.close_reason, 0);
	for (i = 0; i < 30; i++) {
		ev_run(t->loop, EVRUN_NOWAIT);
		usleep(10000);
	}
	assert_int_equal(ft.nconnect, 0);
	assert_int_equal(t2.closed, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		CONN_T(conn_send__done_once),
		CONN_T(conn_send__bad_args),
		CONN_T(conn_send__many_iov),
		CONN_T(conn_send__queued_until_established),
		CONN_T(conn_close__queued_ops_canceled),
		CONN_T(conn_close__connecting),
		CONN_T(conn_ev_failed__reason_to_cbs),
		CONN_T(conn_ev_failed__no_reason),
		CONN_T(conn_ev_failed__after_close),
		CONN_T(conn_ev_failed__reject_pdata),
		CONN_T(conn_established__bad_hello),
		CONN_T(conn_established__small_eager),
		CONN_T(conn_ev_request__accept_reject),
		CONN_T(conn_close__request_during_linger),
		CONN_T(conn_msg__held_outlives_close),
		CONN_T(conn_msg__close_in_on_msg),
		CONN_T(conn_connect__numeric_inline_name_later),
		CONN_T(conn_connect__close_while_resolving),
	};

	unit_filter();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
