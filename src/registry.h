/* SPDX-License-Identifier: MIT */
/*
 * registry.h - how the core finds a backend and calls its optional ops.
 *
 * The registry is a table of rows keyed by URI scheme name (the rows are
 * in transport/registry.c, the one file that names the backends; the
 * lookups in registry.c): a row gives the backend that serves the scheme
 * and, for auto://, the scheme whose row is tried next. A new transport
 * is one folder under transport/ plus one row: URI parsing finds schemes
 * in the rows, and each backend's slot (its state in a context and in a
 * listener) is assigned from them. Every backend's required ops and the
 * rows themselves are checked once, when the library is loaded; after
 * that no lookup compares strings (the URI keeps its row, a connection
 * its backend).
 *
 * An op transport.h marks "May be NULL" is called only through the
 * wrappers below, so that the core never tests an op itself.
 */
#ifndef RMSG_REGISTRY_H
#define RMSG_REGISTRY_H

#include "transport/transport.h"

/* the most backends (distinct rows' tr) there may be: each has one slot
 * in a context and in a listener; the rows are checked against it when
 * the library is loaded */
#define RMSGI_TR_MAX 4

struct rmsgi_tr_row {
	/* the URI scheme, without "://": "rdma" serves "rdma://host:port" */
	const char *scheme;
	const struct rmsgi_tr *tr;
	/* the scheme tried when this row's backend cannot connect
	 * (auto://), or NULL */
	const char *next;
};

/* the rows, ended by one whose tr is NULL (transport/registry.c; a unit
 * test brings its own) */
extern const struct rmsgi_tr_row rmsgi_tr_rows[];

/* the backends by slot (0..rmsgi_tr_nslots-1), in the order the rows
 * first name them: filled when the library is loaded, read-only after */
extern const struct rmsgi_tr *rmsgi_tr_by_slot[RMSGI_TR_MAX];
extern unsigned rmsgi_tr_nslots;

/* the backend in @slot (< rmsgi_tr_nslots) */
static inline const struct rmsgi_tr *rmsgi_tr_get(unsigned slot)
{
	return rmsgi_tr_by_slot[slot];
}

/* @tr's slot: a registered backend has one (it aborts otherwise, a build
 * mistake); a pointer scan over the few slots, for the backends' context
 * state (rmsgi_ctx_tr_slot), not per frame */
unsigned rmsgi_tr_slot(const struct rmsgi_tr *tr);
/* the row of the scheme @s, @len bytes long (not terminated), or NULL */
const struct rmsgi_tr_row *rmsgi_tr_row(const char *s, size_t len);
/* the backends that serve @r's scheme, in the order a connection tries
 * them: the row's, then each next row's; returns how many (0: @r NULL) */
int rmsgi_tr_for_scheme(const struct rmsgi_tr_row *r,
			const struct rmsgi_tr *v[RMSGI_TR_MAX]);
/* the first required op @tr lacks, as "table.op", or NULL: what the
 * registry checks for each row when the library is loaded */
const char *rmsgi_tr_missing(const struct rmsgi_tr *tr);
/* what is wrong with the rows @rows (ended by a NULL tr), or NULL; fills
 * @by_slot and *@nslots: the check run when the library is loaded */
const char *rmsgi_tr_rows_check(const struct rmsgi_tr_row *rows,
				const struct rmsgi_tr *by_slot[RMSGI_TR_MAX],
				unsigned *nslots, const char **name);

/* ------------------------------------------------------------------ */
/* optional ops                                                         */

static inline bool rmsgi_tr_polls(const struct rmsgi_tr *tr)
{
	return tr->ctx->poll != NULL;
}

/* may the context's busy polling find work in @tr (poll or spin)? */
static inline bool rmsgi_tr_spins(const struct rmsgi_tr *tr)
{
	return tr->ctx->poll != NULL || tr->ctx->spin != NULL;
}

/* is a round of @tr's busy polling a spin (system calls, as many as it
 * has connections), not a cheap poll? */
static inline bool rmsgi_tr_spin_costly(const struct rmsgi_tr *tr)
{
	return tr->ctx->poll == NULL && tr->ctx->spin != NULL;
}

/* one round of busy polling: poll (unarmed), else spin */
static inline int rmsgi_tr_spin(const struct rmsgi_tr *tr, void *tctx)
{
	if (tr->ctx->poll)
		return tr->ctx->poll(tctx, false);
	return tr->ctx->spin ? tr->ctx->spin(tctx) : 0;
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
