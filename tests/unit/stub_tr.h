/* SPDX-License-Identifier: MIT */
/*
 * stub_tr.h - entry points of a transport a unit test does not drive:
 * ctx.c and listener.c reference both backends, so a test links a stand-in
 * for the one it does not cover (and a fake may borrow the ones it does
 * not need). Listening and connecting are refused; the rest does nothing.
 */
#ifndef RMSG_TEST_STUB_TR_H
#define RMSG_TEST_STUB_TR_H

#include "rmsg_int.h"

static inline void stub_ctx_fini(struct rmsg_ctx *ctx)
{
	(void)ctx;
}

static inline int stub_listen(struct rmsg_listener *l,
			      const struct rmsgi_uri *u)
{
	(void)l;
	(void)u;
	return -ENOTSUP;
}

static inline void stub_listen_close(struct rmsg_listener *l)
{
	(void)l;
}

static inline int stub_connect(struct rmsg_conn *c, const struct rmsgi_uri *u)
{
	(void)c;
	(void)u;
	return -ENOTSUP;
}

static inline void stub_disconnect(struct rmsg_conn *c)
{
	(void)c;
}

static inline int stub_post(struct rmsg_conn *c, struct rmsgi_op *op)
{
	(void)c;
	(void)op;
	return -ENOTSUP;
}

#endif
