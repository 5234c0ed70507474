// SPDX-License-Identifier: MIT
/*
 * unit tests of the connection state machine (src/conn.c) against a fake
 * transport: the test plays the backend, posting nothing anywhere and
 * reporting completions, frames and failures when it chooses.
 */
#include <stdio.h>

#include "unit.h"

#include "rmsg_int.h"
#include "stub_tr.h"

/* ------------------------------------------------------------------ */
/* the fake transport                                                   */

#define POSTED_MAX 256

struct posted {
	struct rmsgi_op *op;
	uint8_t type, kind, rndv;
	uint16_t credits;
	uint32_t aux;
	uint64_t id;
	size_t len;
};

static struct {
	struct posted posted[POSTED_MAX]; /* accepted, not completed */
	int nposted;
	int post_ret;	    /* post() returns this ... */
	int post_ret_calls; /* ... for so many calls (0: until reset) */
	int npost, nkick, ndisconnect, nrelease;
	bool auto_down; /* disconnect completes everything at once */
} ft;

static void tr_down(struct rmsg_conn *c);

static bool fail_third; /* the third post() fails with -EIO */

static int f_post(void *tc, struct rmsgi_op *op)
{
	struct rmsg_conn *c = tc;
	struct posted *p;

	ft.npost++;
	if (fail_third && ft.npost == 3)
		return -EIO;
	/* only a local close's BYE is posted once the state has moved */
	if (!(op->kind == RMSGI_OP_CTRL && op->aux == RMSGI_CREDIT_BYE))
		assert_int_equal(c->state, RMSGI_CS_ESTABLISHED);
	assert_int_equal(op->posted, 1);
	if (ft.post_ret) {
		int ret = ft.post_ret;

		if (ft.post_ret_calls && --ft.post_ret_calls == 0)
			ft.post_ret = 0;
		return ret;
	}
	assert_true(ft.nposted < POSTED_MAX);
	p = &ft.posted[ft.nposted++];
	p->op = op;
	p->type = op->type;
	p->kind = op->kind;
	p->rndv = op->rndv;
	p->credits = op->credits;
	p->aux = op->aux;
	p->id = op->id;
	p->len = op->len;
	return 0;
}

static void f_kick(void *tc)
{
	(void)tc;
	ft.nkick++;
}

static void f_disconnect(void *tc, unsigned linger_ms)
{
	struct rmsg_conn *c = tc;

	(void)linger_ms;
	ft.ndisconnect++;
	if (ft.auto_down)
		tr_down(c);
}

static void f_rndv_release(void *tc, struct rmsgi_op *op)
{
	(void)tc;
	(void)op;
	ft.nrelease++;
}

/* the registry lists both backends; here both are fakes, one with
 * rendezvous and one without. A fake's connection state is the core's
 * connection itself. */
static const struct rmsgi_tr_conn_ops f_conn_rndv = {
	.connect = stub_connect,
	.disconnect = f_disconnect,
	.post = f_post,
	.kick = f_kick,
	.rndv_release = f_rndv_release,
};

static const struct rmsgi_tr_conn_ops f_conn = {
	.connect = stub_connect,
	.disconnect = f_disconnect,
	.post = f_post,
	.kick = f_kick,
};

const struct rmsgi_tr rmsgi_tr_rdma = {
	.name = "fake-rdma",
	.id = RMSGI_TR_RDMA,
	.caps = RMSGI_TR_CAP_RNDV,
	.ctx = &stub_ctx_ops,
	.lst = &stub_lst_ops,
	.conn = &f_conn_rndv,
};

const struct rmsgi_tr rmsgi_tr_tcp = {
	.name = "fake-tcp",
	.id = RMSGI_TR_TCP,
	.ctx = &stub_ctx_ops,
	.lst = &stub_lst_ops,
	.conn = &f_conn,
};

/* completes the @i-th posted op */
static void tr_complete(struct rmsg_conn *c, int i, int status)
{
	struct rmsgi_op *op = ft.posted[i].op;

	assert_true(i < ft.nposted);
	memmove(&ft.posted[i], &ft.posted[i + 1],
		sizeof(ft.posted[0]) * (size_t)(ft.nposted - i - 1));
	ft.nposted--;
	rmsgi_conn_op_done(c, op, status);
}

static void tr_complete_all(struct rmsg_conn *c, int status)
{
	while (ft.nposted)
		tr_complete(c, 0, status);
}

/* the backend is gone: what it still held completes first (the rule of
 * transport.h), then it says so */
static void tr_down(struct rmsg_conn *c)
{
	tr_complete_all(c, -ECANCELED);
	rmsgi_conn_ev_down(c);
}

/* ------------------------------------------------------------------ */
/* received frames                                                      */

struct tmsg {
	struct rmsg_msg m;
	bool credit; /* its buffer carries a credit */
	uint8_t data[64];
};

static int msgs_freed;

static void tmsg_free(struct rmsg_msg *m)
{
	struct tmsg *t = RMSGI_CONTAINER_OF(m, struct tmsg, m);

	msgs_freed++;
	if (t->credit)
		rmsgi_conn_credit_freed(m->conn);
	free(t);
}

static struct rmsg_msg *tmsg_new(struct rmsg_conn *c, const char *s)
{
	struct tmsg *t = calloc(1, sizeof(*t));
	size_t len = s ? strlen(s) : 0;

	assert_non_null(t);
	assert_true(len <= sizeof(t->data));
	if (len)
		memcpy(t->data, s, len);
	rmsgi_msg_init(&t->m, c, t->data, len);
	t->m.free_fn = tmsg_free;
	t->credit = true;
	return &t->m;
}

static int rx(struct rmsg_conn *c, uint8_t type, uint16_t credits, uint32_t aux,
	      uint64_t id, struct rmsg_msg *m)
{
	struct rmsgi_hdr h = {.type = type,
			      .credits = credits,
			      .aux = aux,
			      .id = id,
			      .len = m->len};

	return rmsgi_conn_rx(c, &h, m);
}

static int rx_data(struct rmsg_conn *c, const char *s, uint16_t credits)
{
	return rx(c, RMSGI_T_DATA, credits, 0, 0, tmsg_new(c, s));
}

static int rx_credit(struct rmsg_conn *c, uint16_t credits)
{
	return rx(c, RMSGI_T_CREDIT, credits, 0, 0, tmsg_new(c, NULL));
}

/* ------------------------------------------------------------------ */
/* the application                                                      */

#define LOG_MAX 512

struct event {
	char kind; /* 'S' send done, 'M' message, 'X' close, ... */
	int status;
	intptr_t arg;
};

struct t {
	struct ev_loop *loop;
	struct rmsg_ctx *ctx;
	struct rmsg_conn *c;
	struct event log[LOG_MAX];
	int nlog;
	int established, writable, closed, close_reason, msgs;
	int warnings; /* lines logged at RMSG_LOG_WARN or worse */
	char last_msg[65];
	bool hold; /* on_msg holds the message */
	struct rmsg_msg *held;
	bool close_in_msg; /* on_msg closes the connection */
};

static void logev(struct t *t, char kind, int status, intptr_t arg)
{
	assert_true(t->nlog < LOG_MAX);
	t->log[t->nlog].kind = kind;
	t->log[t->nlog].status = status;
	t->log[t->nlog].arg = arg;
	t->nlog++;
}

static void on_established(struct rmsg_conn *c, void *arg)
{
	struct t *t = arg;

	t->established++;
	logev(t, 'E', 0, 0);
}

static void on_msg(struct rmsg_conn *c, struct rmsg_msg *m, void *arg)
{
	struct t *t = arg;
	size_t n = RMSGI_MIN(rmsg_msg_len(m), sizeof(t->last_msg) - 1);

	t->msgs++;
	memcpy(t->last_msg, rmsg_msg_data(m), n);
	t->last_msg[n] = '\0';
	logev(t, 'M', 0, 0);
	if (t->hold) {
		assert_int_equal(rmsg_msg_hold(m), 0);
		assert_int_equal(rmsg_msg_hold(m), -EALREADY);
		t->held = m;
	}
	if (t->close_in_msg)
		rmsg_conn_close(c);
}

static void on_writable(struct rmsg_conn *c, void *arg)
{
	struct t *t = arg;

	t->writable++;
	logev(t, 'W', 0, 0);
}

static void on_close(struct rmsg_conn *c, int reason, void *arg)
{
	struct t *t = arg;

	t->closed++;
	t->close_reason = reason;
	logev(t, 'X', reason, 0);
	if (t->c == c && !t->hold)
		t->c = NULL; /* freed after this */
}

static const struct rmsg_conn_ops ops = {
	.on_established = on_established,
	.on_msg = on_msg,
	.on_writable = on_writable,
	.on_close = on_close,
};

static void done_cb(struct rmsg_conn *c, int status, void *arg)
{
	logev(c->arg, 'S', status, (intptr_t)arg);
}

/* how many 'S' events for @arg, and their status */
static int done_count(const struct t *t, intptr_t arg, int *status_p)
{
	int i, n = 0;

	for (i = 0; i < t->nlog; i++)
		if (t->log[i].kind == 'S' && t->log[i].arg == arg) {
			n++;
			if (status_p)
				*status_p = t->log[i].status;
		}
	return n;
}

static int count(const struct t *t, char kind)
{
	int i, n = 0;

	for (i = 0; i < t->nlog; i++)
		n += t->log[i].kind == kind;
	return n;
}

static int send_str(struct t *t, const char *s, intptr_t arg)
{
	struct iovec iov = {.iov_base = (void *)s, .iov_len = strlen(s)};

	return rmsg_send(t->c, &iov, 1, done_cb, (void *)arg);
}

static int send_len(struct t *t, size_t len, intptr_t arg)
{
	static char big[1 << 16];
	struct iovec iov = {.iov_base = big, .iov_len = len};

	assert_true(len <= sizeof(big));
	return rmsg_send(t->c, &iov, 1, done_cb, (void *)arg);
}

static void flush(struct t *t)
{
	rmsgi_ctx_flush(t->ctx);
}

/* the hello the peer answers with */
static void establish(struct t *t, uint16_t credits, uint32_t eager)
{
	struct rmsgi_hello h = {.credits = credits, .eager_size = eager};

	rmsgi_conn_ev_established(t->c, &h);
	assert_int_equal(t->established, 1);
	assert_int_equal(t->c->state, RMSGI_CS_ESTABLISHED);
}

static void log_hook(int level, const char *line, void *arg)
{
	struct t *t = arg;

	if (level <= RMSG_LOG_WARN)
		t->warnings++;
	if (getenv("RMSG_UNIT_VERBOSE"))
		fprintf(stderr, "  log: %s\n", line);
}

static struct t *new_t(const struct rmsgi_cfgv *cfg, const struct rmsgi_tr *tr)
{
	struct t *t = calloc(1, sizeof(*t));
	struct rmsg_cfg *ccfg;
	struct rmsgi_cfgv v;

	assert_non_null(t);
	t->loop = ev_loop_new(EVFLAG_AUTO);
	assert_non_null(t->loop);
	assert_int_equal(rmsg_cfg_create(&ccfg), 0);
	assert_int_equal(rmsg_cfg_set_log(ccfg, RMSG_LOG_WARN, log_hook, t), 0);
	assert_int_equal(rmsg_ctx_create(t->loop, ccfg, &t->ctx), 0);
	rmsg_cfg_destroy(ccfg);
	if (!cfg) {
		rmsgi_cfg_defaults(&v);
		cfg = &v;
	}
	assert_int_equal(rmsgi_conn_new(t->ctx, cfg, &ops, t, &t->c), 0);
	t->c->tr = tr;
	t->c->tops = tr->conn;
	t->c->tr_priv = t->c;
	return t;
}

static int setup(void **state)
{
	memset(&ft, 0, sizeof(ft));
	msgs_freed = 0;
	fail_third = false;
	*state = new_t(NULL, &rmsgi_tr_tcp);
	return 0;
}

static int teardown(void **state)
{
	struct t *t = *state;

	ft.auto_down = true;
	ft.post_ret = 0;
	/* a failed test may leave its conn halfway */
	if (t->c && t->c->state == RMSGI_CS_CLOSING && !t->c->tr_down)
		tr_down(t->c);
	if (t->held && t->c)
		rmsg_msg_release(t->held);
	assert_int_equal(rmsg_ctx_destroy(t->ctx), 0);
	ev_loop_destroy(t->loop);
	free(t);
	return 0;
}

/* a connection with its own configuration */
static struct t *replace_t(void **state, const struct rmsgi_cfgv *cfg,
			   const struct rmsgi_tr *tr)
{
	teardown(state);
	memset(&ft, 0, sizeof(ft));
	msgs_freed = 0;
	*state = new_t(cfg, tr);
	return *state;
}

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
	assert_int_equal(t->c->sendq_len, 0);
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
	assert_int_equal(t->c->sendq_len, 0);
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
	assert_int_equal(t->c->peer_eager, 4096);
	rmsgi_conn_ev_established(t->c, NULL);
	assert_int_equal(t->established, 1);
	assert_int_equal(t->c->cr.avail, 16);
}

/* ------------------------------------------------------------------ */
/* credits                                                              */

static void conn_credit__sends_stop_at_one(void **state)
{
	struct t *t = *state;
	int i;

	establish(t, 4, 8192);
	for (i = 1; i <= 10; i++)
		assert_int_equal(send_str(t, "x", i), 0);
	flush(t);
	assert_int_equal(ft.nposted, 3);
	assert_int_equal(t->c->cr.avail, 1);
	flush(t);
	assert_int_equal(ft.nposted, 3);
	/* the peer returns 2: two more go, the first returning the buffer
	 * the CREDIT frame used */
	assert_int_equal(rx_credit(t->c, 2), 0);
	flush(t);
	assert_int_equal(ft.nposted, 5);
	assert_int_equal(ft.posted[3].credits, 1);
	assert_int_equal(ft.posted[4].credits, 0);
	assert_int_equal(t->c->cr.avail, 1);
	/* a message returns 3: three more */
	assert_int_equal(rx_data(t->c, "m", 3), 0);
	assert_int_equal(t->msgs, 1);
	flush(t);
	assert_int_equal(ft.nposted, 8);
	assert_int_equal(ft.posted[5].credits, 1);
	assert_int_equal(ft.posted[6].credits, 0);
	assert_int_equal(ft.posted[7].credits, 0);
	/* order kept */
	for (i = 0; i < 8; i++)
		assert_int_equal((intptr_t)ft.posted[i].op->arg, i + 1);
	assert_int_equal(ft.npost, 8);
}

static void conn_credit__explicit_frame(void **state)
{
	struct t *t = *state;
	int i;

	establish(t, 32, 8192);
	assert_int_equal(t->c->cr.threshold, 8);
	for (i = 0; i < 7; i++)
		assert_int_equal(rx_data(t->c, "m", 0), 0);
	assert_int_equal(msgs_freed, 7);
	assert_int_equal(t->c->cr.to_return, 7);
	flush(t);
	assert_int_equal(ft.npost, 0);
	assert_int_equal(rx_data(t->c, "m", 0), 0);
	flush(t);
	assert_int_equal(ft.nposted, 1);
	assert_ptr_equal(ft.posted[0].op, &t->c->credit_op);
	assert_int_equal(ft.posted[0].type, RMSGI_T_CREDIT);
	assert_int_equal(ft.posted[0].kind, RMSGI_OP_CTRL);
	assert_int_equal(ft.posted[0].credits, 8);
	assert_int_equal(t->c->cr.to_return, 0);
	assert_int_equal(t->c->cr.avail, 31);
	/* one CREDIT frame at a time */
	for (i = 0; i < 9; i++)
		assert_int_equal(rx_data(t->c, "m", 0), 0);
	flush(t);
	assert_int_equal(ft.nposted, 1);
	tr_complete(t->c, 0, 0);
	flush(t);
	assert_int_equal(ft.nposted, 1);
	assert_int_equal(ft.posted[0].type, RMSGI_T_CREDIT);
	assert_int_equal(ft.posted[0].credits, 9);
	tr_complete(t->c, 0, 0);
	flush(t);
	assert_int_equal(ft.npost, 2);
	/* no send callback for it */
	assert_int_equal(count(t, 'S'), 0);
}

/* with a message to carry them, credits ride along */
static void conn_credit__piggyback(void **state)
{
	struct t *t = *state;
	int i;

	establish(t, 32, 8192);
	for (i = 0; i < 10; i++)
		assert_int_equal(rx_data(t->c, "m", 0), 0);
	assert_int_equal(send_str(t, "reply", 1), 0);
	flush(t);
	assert_int_equal(ft.nposted, 1);
	assert_int_equal(ft.posted[0].type, RMSGI_T_DATA);
	assert_int_equal(ft.posted[0].credits, 10);
	assert_int_equal(t->c->cr.to_return, 0);
}

/* out of message credits, the CREDIT frame takes the reserved one */
static void conn_credit__frame_uses_reserve(void **state)
{
	struct rmsgi_cfgv cfg;
	struct t *t;
	int i;

	rmsgi_cfg_defaults(&cfg);
	cfg.credits = 4; /* both sides grant 4 */
	t = replace_t(state, &cfg, &rmsgi_tr_tcp);
	establish(t, 4, 8192);
	assert_int_equal(t->c->cr.threshold, 2);
	for (i = 1; i <= 4; i++)
		assert_int_equal(send_str(t, "x", i), 0);
	flush(t);
	assert_int_equal(ft.nposted, 3);
	assert_int_equal(t->c->cr.avail, 1);
	assert_int_equal(rx_data(t->c, "m", 0), 0);
	assert_int_equal(rx_data(t->c, "m", 0), 0);
	flush(t);
	assert_int_equal(ft.nposted, 4);
	assert_int_equal(ft.posted[3].type, RMSGI_T_CREDIT);
	assert_int_equal(ft.posted[3].credits, 2);
	assert_int_equal(t->c->cr.avail, 0);
	/* the message still waits */
	assert_int_equal(done_count(t, 4, NULL), 0);
	assert_int_equal(rx_credit(t->c, 4), 0);
	flush(t);
	assert_int_equal(ft.nposted, 5);
	assert_int_equal((intptr_t)ft.posted[4].op->arg, 4);
}

static void conn_credit__returned_beyond_grant(void **state)
{
	struct t *t = *state;
	int freed;

	establish(t, 8, 8192);
	freed = msgs_freed;
	assert_int_equal(rx_credit(t->c, 1), -EPROTO);
	assert_int_equal(msgs_freed, freed + 1);
	/* a protocol error is worth a line in the log */
	assert_int_equal(t->warnings, 1);
	assert_int_equal(ft.ndisconnect, 1);
	tr_down(t->c);
	flush(t);
	assert_int_equal(t->close_reason, -EPROTO);
}

/* the peer may use every credit we granted, not one more; a message the
 * app holds keeps its credit until released */
static void conn_credit__rx_beyond_grant(void **state)
{
	struct t *t = *state;
	int i;

	establish(t, 32, 8192);
	t->hold = true;
	assert_int_equal(rx_data(t->c, "held", 0), 0);
	t->hold = false;
	for (i = 1; i < 32; i++)
		assert_int_equal(rx_data(t->c, "x", 0), 0);
	/* the 31 freed credits go back with a CREDIT frame ... */
	flush(t);
	assert_int_equal(ft.nposted, 1);
	assert_int_equal(ft.posted[0].type, RMSGI_T_CREDIT);
	assert_int_equal(ft.posted[0].credits, 31);
	/* ... so 31 more are fine; the held one's is still out */
	for (i = 0; i < 31; i++)
		assert_int_equal(rx_data(t->c, "y", 0), 0);
	assert_int_equal(t->c->state, RMSGI_CS_ESTABLISHED);
	assert_int_equal(rx_data(t->c, "one too many", 0), -EPROTO);
	assert_int_equal(t->msgs, 63);
	assert_int_equal(ft.ndisconnect, 1);
	tr_complete_all(t->c, 0);
	rmsg_msg_release(t->held);
	t->held = NULL;
	tr_down(t->c);
	flush(t);
	assert_int_equal(t->close_reason, -EPROTO);
	assert_int_equal(t->closed, 1);
}

/* a close that finds our last credit spent (on a CREDIT frame whose
 * answer is on its way) still says BYE, so that the peer reports a close,
 * not a reset */
static void conn_close__bye_without_credit(void **state)
{
	struct t *t = *state;
	int i;

	establish(t, 4, 8192);
	for (i = 1; i <= 3; i++)
		assert_int_equal(send_str(t, "x", i), 0);
	flush(t);
	/* a message never takes the last credit */
	assert_int_equal(ft.nposted, 3);
	/* the peer's frames make us owe it credits: the CREDIT frame that
	 * returns them takes our last one */
	while (t->c->cr.avail)
		assert_int_equal(rx_data(t->c, "y", 0), 0), flush(t);
	assert_int_equal(ft.posted[ft.nposted - 1].type, RMSGI_T_CREDIT);
	assert_int_equal(rmsg_conn_close(t->c), 0);
	flush(t);
	assert_int_equal(ft.posted[ft.nposted - 1].type, RMSGI_T_CREDIT);
	assert_int_equal(ft.posted[ft.nposted - 1].aux, RMSGI_CREDIT_BYE);
	tr_complete_all(t->c, 0);
	tr_down(t->c);
	flush(t);
	assert_int_equal(t->closed, 1);
	assert_int_equal(t->close_reason, 0);
}

/* an open connection whose peer used every credit we granted (32) */
static void peer_spent_grant(struct t *t)
{
	int i;

	establish(t, 32, 8192);
	for (i = 0; i < 32; i++)
		assert_int_equal(rx_data(t->c, "x", 0), 0);
}

/* the peer's BYE may be the one frame beyond its credits, once: the close
 * reads as the peer's (-ESHUTDOWN); any frame after it is refused */
static void conn_credit__bye_beyond_grant(void **state)
{
	struct t *t = *state;

	peer_spent_grant(t);
	assert_int_equal(rx(t->c, RMSGI_T_CREDIT, 0, RMSGI_CREDIT_BYE, 0,
			    tmsg_new(t->c, NULL)),
			 0);
	assert_int_equal(t->c->state, RMSGI_CS_ESTABLISHED);
	tr_complete_all(t->c, 0);
	tr_down(t->c);
	flush(t);
	assert_int_equal(t->closed, 1);
	assert_int_equal(t->close_reason, -ESHUTDOWN);
}

static void conn_credit__bye_beyond_grant_once(void **state)
{
	struct t *t = *state;

	peer_spent_grant(t);
	/* a plain CREDIT frame is no exception */
	assert_int_equal(rx_credit(t->c, 0), -EPROTO);
	tr_complete_all(t->c, 0);
	tr_down(t->c);
	flush(t);
	assert_int_equal(t->close_reason, -EPROTO);
}

static void conn_credit__nothing_after_bye(void **state)
{
	struct t *t = *state;

	peer_spent_grant(t);
	assert_int_equal(rx(t->c, RMSGI_T_CREDIT, 0, RMSGI_CREDIT_BYE, 0,
			    tmsg_new(t->c, NULL)),
			 0);
	assert_int_equal(rx(t->c, RMSGI_T_CREDIT, 0, RMSGI_CREDIT_BYE, 0,
			    tmsg_new(t->c, NULL)),
			 -EPROTO);
	tr_complete_all(t->c, 0);
	tr_down(t->c);
	flush(t);
	assert_int_equal(t->close_reason, -EPROTO);
}

/* frames that make us answer (here rendezvous requests, each acked) from
 * a peer that grants us 4 credits and never returns one: it can send
 * only what our 4 frames returned, so the answers stop at 32 + 4 x 32;
 * once it returns our credits everything drains */
static void conn_ans__bounded_by_credits(void **state)
{
	struct t *t = *state;
	int peer_avail = 32, sent = 0, i, seen = 0;
	uint64_t id = 0;

	establish(t, 4, 8192);
	/* a peer that asks whenever it has a credit to spare (it keeps
	 * the last one for a CREDIT frame, as librmsg does) */
	while (peer_avail > 1 && sent < 10000) {
		struct rmsg_msg *m = tmsg_new(t->c, "r");

		m->ready = 0;
		assert_int_equal(rx(t->c, RMSGI_T_RNDV_REQ, 0, 0, ++id, m), 0);
		rmsgi_conn_rx_ready(t->c, m, 0);
		peer_avail--;
		sent++;
		flush(t);
		for (; seen < ft.nposted; seen++)
			peer_avail += ft.posted[seen].credits;
	}
	assert_int_equal(t->c->state, RMSGI_CS_ESTABLISHED);
	assert_int_equal(t->msgs, sent);
	assert_true(sent <= 32 + 4 * 32);
	assert_true(t->c->ans_n <= (unsigned)sent);
	/* our 4 credits are spent: 3 acks and a CREDIT frame */
	assert_int_equal(ft.nposted, 4);
	/* it takes them and returns our credits: the rest drains */
	for (i = 0; i < 200 && t->c->ans_n; i++) {
		tr_complete_all(t->c, 0);
		assert_int_equal(
			rx_credit(t->c, (uint16_t)(4 - t->c->cr.avail)), 0);
		flush(t);
	}
	tr_complete_all(t->c, 0);
	flush(t);
	assert_int_equal(t->c->ans_n, 0);
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
	assert_int_equal(t->c->ans_n, 0);
	tr_down(t->c);
	flush(t);
	assert_int_equal(t->closed, 1);
	assert_int_equal(t->close_reason, 0);
}

/* a message never takes the last credit: not an RNDV_ACK either, or two
 * sides that both ran dry could not tell each other about freed buffers */
static void conn_credit__ack_keeps_reserve(void **state)
{
	struct t *t = *state;
	struct rmsg_msg *m;
	int i;

	establish(t, 4, 8192);
	for (i = 1; i <= 3; i++)
		assert_int_equal(send_str(t, "x", i), 0);
	flush(t);
	assert_int_equal(t->c->cr.avail, 1);
	m = tmsg_new(t->c, "rendezvous");
	m->ready = 0;
	assert_int_equal(rx(t->c, RMSGI_T_RNDV_REQ, 0, 0, 5, m), 0);
	rmsgi_conn_rx_ready(t->c, m, 0);
	assert_int_equal(t->msgs, 1);
	flush(t);
	assert_int_equal(t->c->cr.avail, 1);
	assert_int_equal(ft.nposted, 3);
}

/* ------------------------------------------------------------------ */
/* queue bound and transport room                                       */

static void conn_send__eagain_then_writable(void **state)
{
	struct rmsgi_cfgv cfg;
	struct t *t;
	int i;

	rmsgi_cfg_defaults(&cfg);
	cfg.send_queue = 4;
	t = replace_t(state, &cfg, &rmsgi_tr_tcp);
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
	fail_third = true;
	flush(t);
	fail_third = false;
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
		if (n == &t->c->credit_op.link)
			recycled = true;
	if (recycled) {
		/* take it back so that the teardown does not free() it */
		rmsgi_list_del(&t->c->credit_op.link);
		t->ctx->op_free_len--;
	}
	assert_false(recycled);
	assert_int_equal(t->c->state, RMSGI_CS_CLOSING);
}

/* ------------------------------------------------------------------ */
/* rendezvous                                                           */

static struct t *rndv_t(void **state)
{
	struct t *t = replace_t(state, NULL, &rmsgi_tr_rdma);

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
	assert_int_equal(t->c->sendq_len, 0);
	/* a second ACK for it is a protocol error */
	assert_int_equal(
		rx(t->c, RMSGI_T_RNDV_ACK, 0, 0, 1, tmsg_new(t->c, NULL)),
		-EPROTO);
	tr_down(t->c);
	flush(t);
	assert_int_equal(t->close_reason, -EPROTO);
	assert_int_equal(done_count(t, 2, NULL), 1);
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

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(conn_send__done_once),
		T(conn_send__bad_args),
		T(conn_send__many_iov),
		T(conn_send__queued_until_established),
		T(conn_close__queued_ops_canceled),
		T(conn_close__connecting),
		T(conn_ev_failed__reason_to_cbs),
		T(conn_ev_failed__no_reason),
		T(conn_ev_failed__after_close),
		T(conn_ev_failed__reject_pdata),
		T(conn_established__bad_hello),
		T(conn_established__small_eager),
		T(conn_ev_request__accept_reject),
		T(conn_credit__sends_stop_at_one),
		T(conn_credit__explicit_frame),
		T(conn_credit__piggyback),
		T(conn_credit__frame_uses_reserve),
		T(conn_credit__returned_beyond_grant),
		T(conn_credit__ack_keeps_reserve),
		T(conn_credit__rx_beyond_grant),
		T(conn_close__bye_without_credit),
		T(conn_credit__bye_beyond_grant),
		T(conn_credit__bye_beyond_grant_once),
		T(conn_credit__nothing_after_bye),
		T(conn_ans__bounded_by_credits),
		T(conn_close__request_during_linger),
		T(conn_send__eagain_then_writable),
		T(conn_post__eagain_requeues),
		T(conn_post__error_fails_op_and_conn),
		T(conn_post__error_kicks_batch),
		T(conn_post__credit_frame_error),
		T(conn_rndv__waits_for_ack),
		T(conn_rndv__ack_before_send_done),
		T(conn_rndv__ack_error),
		T(conn_rndv__ack_bad_status),
		T(conn_rndv__unknown_ack_closes),
		T(conn_rndv__send_fails),
		T(conn_rndv__not_without_cap),
		T(conn_rx__delivers_in_order),
		T(conn_rx__rndv_read_failed),
		T(conn_rx__bad_type),
		T(conn_rx__after_close),
		T(conn_msg__held_outlives_close),
		T(conn_msg__close_in_on_msg),
	};
#undef T

	unit_filter();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
