/* SPDX-License-Identifier: MIT */
/*
 * stub_tr.h - a backend a unit test does not drive. The registry
 * (src/transport/registry.c) lists both backends, so a test links a
 * stand-in for the one it does not cover (and a fake may borrow the
 * tables it does not need). Listening and connecting are refused; the
 * rest does nothing.
 */
#ifndef RMSG_TEST_STUB_TR_H
#define RMSG_TEST_STUB_TR_H

#include "rmsg_int.h"

static inline void stub_ctx_fini(void *tctx)
{
	(void)tctx;
}

static inline int stub_listen(struct rmsg_ctx *ctx, struct rmsg_listener *l,
			      const struct rmsgi_uri *u, uint16_t *port_p,
			      void **tl_p)
{
	(void)ctx;
	(void)l;
	(void)u;
	(void)port_p;
	(void)tl_p;
	return -ENOTSUP;
}

static inline void stub_listen_close(void *tl)
{
	(void)tl;
}

static inline int stub_connect(struct rmsg_conn *c,
			       const struct rmsgi_tr_conn_info *ci,
			       const struct rmsgi_uri *u)
{
	(void)c;
	(void)ci;
	(void)u;
	return -ENOTSUP;
}

static inline void stub_disconnect(void *tc, unsigned linger_ms)
{
	(void)tc;
	(void)linger_ms;
}

static inline int stub_post(void *tc, struct rmsgi_op *op)
{
	(void)tc;
	(void)op;
	return -ENOTSUP;
}

static const struct rmsgi_tr_ctx_ops stub_ctx_ops
	__attribute__((unused)) = {.fini = stub_ctx_fini};
static const struct rmsgi_tr_listener_ops stub_lst_ops
	__attribute__((unused)) = {.listen = stub_listen,
				   .close = stub_listen_close};
static const struct rmsgi_tr_conn_ops stub_conn_ops
	__attribute__((unused)) = {.connect = stub_connect,
				   .disconnect = stub_disconnect,
				   .post = stub_post};

#endif
