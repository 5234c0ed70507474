/* SPDX-License-Identifier: MIT */
/*
 * registry.h - how the core finds a backend and calls its optional ops.
 *
 * The registry is a table of rows keyed by URI scheme (the rows are in
 * transport/registry.c, the one file that names the backends; the
 * lookups in registry.c): a row gives the backend that serves the scheme
 * and, for auto://, the scheme whose row is tried next. A new transport
 * is one folder under transport/ plus one row. Every backend's required
 * ops are checked once, when the library is loaded.
 *
 * An op transport.h marks "May be NULL" is called only through the
 * wrappers below, so that the core never tests an op itself.
 */
#ifndef RMSG_REGISTRY_H
#define RMSG_REGISTRY_H

#include "transport/transport.h"

struct rmsgi_tr_row {
	enum rmsgi_scheme scheme;
	const struct rmsgi_tr *tr;
	/* the scheme tried when this row's backend cannot connect
	 * (auto://), or RMSGI_SCHEME_NONE */
	enum rmsgi_scheme next;
};

/* the rows, ended by one whose tr is NULL (transport/registry.c; a unit
 * test brings its own) */
extern const struct rmsgi_tr_row rmsgi_tr_rows[];

/* every registered backend by id (RMSGI_TR_*), or NULL */
const struct rmsgi_tr *rmsgi_tr_get(unsigned id);
/* the backends that serve @s, in the order a connection tries them: the
 * scheme's row, then each row's next; returns how many (0: none) */
int rmsgi_tr_for_scheme(enum rmsgi_scheme s,
			const struct rmsgi_tr *v[RMSGI_TR_COUNT]);
/* the first required op @tr lacks, as "table.op", or NULL: what the
 * registry checks for each row when the library is loaded */
const char *rmsgi_tr_missing(const struct rmsgi_tr *tr);

/* ------------------------------------------------------------------ */
/* optional ops                                                         */

static inline bool rmsgi_tr_polls(const struct rmsgi_tr *tr)
{
	return tr->ctx->poll != NULL;
}

static inline int rmsgi_tr_poll(const struct rmsgi_tr *tr, void *tctx, bool arm)
{
	return tr->ctx->poll ? tr->ctx->poll(tctx, arm) : 0;
}

static inline void rmsgi_tr_stop(const struct rmsgi_tr *tr, void *tctx)
{
	if (tr->ctx->stop)
		tr->ctx->stop(tctx);
}

/* can the backend hand group listeners' peers over (adopt, drop)? */
static inline bool rmsgi_tr_serves_group(const struct rmsgi_tr *tr)
{
	return tr->lst->adopt && tr->lst->drop;
}

/* does the backend write frames inside rmsg_send (send_direct)? */
static inline bool rmsgi_tr_has_direct(const struct rmsgi_tr_conn_ops *ops)
{
	return ops->send_direct != NULL;
}

static inline void rmsgi_tr_kick(const struct rmsgi_tr_conn_ops *ops, void *tc)
{
	if (ops->kick)
		ops->kick(tc);
}

static inline void rmsgi_tr_rndv_release(const struct rmsgi_tr_conn_ops *ops,
					 void *tc, struct rmsgi_op *op)
{
	if (ops->rndv_release)
		ops->rndv_release(tc, op);
}

/* a backend without grant backs any grant: @credits */
static inline uint32_t rmsgi_tr_grant(const struct rmsgi_tr_conn_ops *ops,
				      void *tc, uint32_t credits)
{
	return ops->grant ? ops->grant(tc, credits) : credits;
}

/* a backend without rma_open checks no one-sided access itself: 0 */
static inline int rmsgi_tr_rma_open(const struct rmsgi_tr_conn_ops *ops,
				    void *tc)
{
	return ops->rma_open ? ops->rma_open(tc) : 0;
}

#endif /* RMSG_REGISTRY_H */
