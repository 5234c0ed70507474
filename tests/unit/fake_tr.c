// SPDX-License-Identifier: MIT
/*
 * fake_tr.c - the fake transport (fake_tr.h). Built with cmocka for the
 * unit tests; with -DFAKE_TR_ABORT (the fuzz target) a broken contract
 * aborts instead.
 */
#include "fake_tr.h"

#ifdef FAKE_TR_ABORT
#include <stdio.h>
#include <stdlib.h>
#define FAKE_CHECK(x)                                                          \
	do {                                                                   \
		if (!(x)) {                                                    \
			fprintf(stderr, "fake_tr: %s (%s:%d)\n", #x, __FILE__, \
				__LINE__);                                     \
			abort();                                               \
		}                                                              \
	} while (0)
#else
#include "unit.h"
#define FAKE_CHECK(x) assert_true(x)
#endif

struct fake_tr_state ft;

static void f_fini(void *tctx)
{
	(void)tctx;
}

static int f_listen(struct rmsg_ctx *ctx, struct rmsg_listener *l,
		    const struct rmsgi_uri *u, uint16_t *port_p, void **tl_p)
{
	(void)ctx;
	(void)l;
	(void)u;
	(void)port_p;
	(void)tl_p;
	return -EOPNOTSUPP;
}

static void f_listen_close(void *tl)
{
	(void)tl;
}

static int f_connect(struct rmsg_conn *c, const struct rmsgi_tr_conn_info *ci,
		     const struct rmsgi_uri *u, const struct rmsgi_addrs *to)
{
	(void)ci;
	(void)u;
	ft.last_to = *to;
	ft.nconnect++;
	rmsgi_conn_set_tc(c, c);
	return 0;
}

static int f_post(void *tc, struct rmsgi_op *op)
{
	struct rmsg_conn *c = tc;
	struct fake_posted *p;

	ft.npost++;
	if (ft.fail_nth && ft.npost == ft.fail_nth)
		return -EIO;
	/* only a local close's BYE is posted once the state has moved, and
	 * the AUTH frames of authentication (AUTH state, or a refusal) */
	if (!(op->kind == RMSGI_OP_CTRL && op->aux == RMSGI_CREDIT_BYE) &&
	    op->type != RMSGI_T_AUTH)
		FAKE_CHECK(c->state == RMSGI_CS_ESTABLISHED);
	FAKE_CHECK(op->state == RMSGI_OS_POSTED);
	if (ft.post_ret) {
		int ret = ft.post_ret;

		if (ft.post_ret_calls && --ft.post_ret_calls == 0)
			ft.post_ret = 0;
		return ret;
	}
	if (ft.down)
		return -ENOTCONN;
	if (ft.room && ft.nposted >= ft.room) {
		ft.room_wanted = true;
		return -EAGAIN;
	}
	FAKE_CHECK(ft.nposted < FAKE_POSTED_MAX);
	p = &ft.posted[ft.nposted++];
	p->op = op;
	p->type = op->type;
	p->kind = op->kind;
	p->rndv = op->rndv;
	p->credits = op->credits;
	p->wret = op->wret;
	p->aux = op->aux;
	p->id = op->id;
	p->len = op->len;
	/* a small payload's bytes as posted (AUTH frames) */
	p->data_len = 0;
	if (op->iovcnt == 1 && op->iov[0].iov_len <= sizeof(p->data)) {
		p->data_len = op->iov[0].iov_len;
		memcpy(p->data, op->iov[0].iov_base, p->data_len);
	}
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

	ft.ndisconnect++;
	ft.disconnecting = true;
	ft.linger_ms = linger_ms;
	if (ft.auto_down)
		tr_down(c);
}

static void f_rndv_release(void *tc, struct rmsgi_op *op)
{
	(void)tc;
	(void)op;
	ft.nrelease++;
}

static int f_addrs(void *tc, struct sockaddr_storage *local,
		   struct sockaddr_storage *peer)
{
	(void)tc;
	FAKE_CHECK(!ft.down);
	ft.naddrs++;
	if (ft.addrs_ret)
		return ft.addrs_ret;
	*local = ft.addr_local;
	*peer = ft.addr_peer;
	return 0;
}

static uint32_t f_grant(void *tc, uint32_t credits)
{
	(void)tc;
	FAKE_CHECK(!ft.down);
	ft.ngrant++;
	ft.last_grant = credits;
	if (ft.grant_cap && credits > ft.grant_cap)
		return ft.grant_cap;
	return credits;
}

/* fake_tr_direct(): every frame goes out whole, inside the call */
static ssize_t f_send_direct(void *tc, const struct rmsgi_hdr *h,
			     const struct iovec *iov, int iovcnt)
{
	(void)tc;
	(void)iov;
	(void)iovcnt;
	FAKE_CHECK(!ft.down);
	ft.ndirect++;
	return (ssize_t)(RMSGI_HDR_SIZE + h->len);
}

static size_t f_direct_max(const void *tc)
{
	(void)tc;
	return SIZE_MAX;
}

static const struct rmsgi_tr_ctx_ops f_ctx_ops = {.fini = f_fini};
static const struct rmsgi_tr_listener_ops f_lst_ops = {
	.listen = f_listen,
	.close = f_listen_close,
};
static const struct rmsgi_tr_conn_ops f_conn_ops = {
	.connect = f_connect,
	.disconnect = f_disconnect,
	.post = f_post,
	.kick = f_kick,
	.rndv_release = f_rndv_release,
	.addrs = f_addrs,
	.grant = f_grant,
};
static const struct rmsgi_tr_conn_ops f_conn_ops_direct = {
	.connect = f_connect,
	.disconnect = f_disconnect,
	.post = f_post,
	.send_direct = f_send_direct,
	.direct_max = f_direct_max,
	.kick = f_kick,
	.rndv_release = f_rndv_release,
	.addrs = f_addrs,
	.grant = f_grant,
};

struct rmsgi_tr fake_tr = {
	.name = "fake",
	.ctx = &f_ctx_ops,
	.lst = &f_lst_ops,
	.conn = &f_conn_ops,
};

void fake_tr_reset(unsigned caps)
{
	memset(&ft, 0, sizeof(ft));
	fake_tr.caps = caps;
	fake_tr.conn = &f_conn_ops;
}

void fake_tr_direct(void)
{
	fake_tr.conn = &f_conn_ops_direct;
}

void fake_tr_attach(struct rmsg_conn *c)
{
	c->tr = &fake_tr;
	c->tops = fake_tr.conn;
	c->tr_priv = c;
}

void tr_complete(struct rmsg_conn *c, int i, int status)
{
	struct rmsgi_op *op;

	FAKE_CHECK(i >= 0 && i < ft.nposted);
	op = ft.posted[i].op;
	memmove(&ft.posted[i], &ft.posted[i + 1],
		sizeof(ft.posted[0]) * (size_t)(ft.nposted - i - 1));
	ft.nposted--;
	rmsgi_conn_op_done(c, op, status);
	if (ft.room_wanted) {
		ft.room_wanted = false;
		rmsgi_conn_tr_room(c);
	}
}

void tr_complete_all(struct rmsg_conn *c, int status)
{
	while (ft.nposted)
		tr_complete(c, 0, status);
}

void tr_down(struct rmsg_conn *c)
{
	if (ft.down)
		return;
	tr_complete_all(c, -ECANCELED);
	ft.down = true;
	rmsgi_conn_ev_down(c);
}
