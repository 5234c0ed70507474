// SPDX-License-Identifier: MIT
/*
 * mr.c - memory regions, their descriptors and exports, and the budget of
 * registered bytes.
 *
 * A region is memory the app registered with rmsg_mr_reg(). A peer
 * reaches it only through an export (rmsg_mr_export): to one connection,
 * or with RMSG_EXPORT_ANY_PEER to every connected peer of the context;
 * a sub-range of the region with a subset of its rights. Each export has
 * an unguessable 64-bit token from getrandom() (there is no fallback: a
 * guessable token would be no protection) and lives in the token hash,
 * on its region's list and on its connection's list, so deregistering
 * the region or ending the connection revokes it.
 *
 * TCP: a peer's one-sided frame names a token and an offset relative to
 * the export; rmsgi_mr_target() accepts it only on the export's own
 * connection (or any, for an any-peer export), within its range and
 * rights. RDMA: the device checks. The region's registration carries no
 * remote rights; a per-connection export is a type-2 memory window bound
 * to the connection's queue pair (rdma/mem.c), an any-peer export its own
 * registration of the range with remote rights. The descriptor then
 * carries that rkey and the virtual address of the export's byte 0.
 *
 * Registrations are made through hooks a transport installs (rdma/dev.c, on
 * opening its device); before that a region only exists for TCP, and is
 * registered when the hooks arrive.
 *
 * Pinned bytes, regions included, are bounded by the context's budget,
 * which the pools of pool.c (rmsg_buf_alloc, receive and copy buffers)
 * share: when a registration does not fit, idle pool slabs go first. The
 * registration cache for memory outside them is regcache.c.
 */
#include <stdlib.h>
#include <unistd.h>
#include <sys/random.h>

#include "rmsg_int.h"
#include "pool.h"

size_t rmsgi_page_size(void)
{
	static size_t ps;

	if (!ps) {
		long v = sysconf(_SC_PAGESIZE);

		ps = v > 0 ? (size_t)v : 4096;
	}
	return ps;
}

/* ------------------------------------------------------------------ */
/* descriptors: 32 bytes, little-endian                                 */
/*   0 magic, 1 version (2), 2 access, 3 flags, 4 rkey (u32),          */
/*   8 export token (u64), 16 address (u64), 24 length (u64)           */
/* rkey and address are set with RMSGI_DESC_F_RKEY only (RDMA)         */

void rmsgi_desc_encode(const struct rmsgi_desc *d, void *buf)
{
	uint8_t *p = buf;

	p[0] = RMSGI_DESC_MAGIC;
	p[1] = RMSGI_DESC_VERSION;
	p[2] = d->access;
	p[3] = d->flags;
	rmsgi_put32(p + 4, d->rkey);
	rmsgi_put64(p + 8, d->token);
	rmsgi_put64(p + 16, d->addr);
	rmsgi_put64(p + 24, d->len);
}

int rmsgi_desc_decode(const void *buf, struct rmsgi_desc *d)
{
	const uint8_t *p = buf;

	if (!buf || p[0] != RMSGI_DESC_MAGIC || p[1] != RMSGI_DESC_VERSION)
		return -EINVAL;
	if (p[2] & ~RMSGI_ACCESS_ALL || p[3] & ~RMSGI_DESC_F_RKEY)
		return -EINVAL;
	d->access = p[2];
	d->flags = p[3];
	d->rkey = rmsgi_get32(p + 4);
	d->token = rmsgi_get64(p + 8);
	d->addr = rmsgi_get64(p + 16);
	d->len = rmsgi_get64(p + 24);
	if (d->token == 0 || d->len == 0 || d->addr + d->len < d->addr)
		return -EINVAL;
	if (!(d->flags & RMSGI_DESC_F_RKEY) && (d->rkey || d->addr))
		return -EINVAL;
	return 0;
}

int rmsgi_desc_check(const struct rmsgi_desc *d, uint64_t off, uint64_t len,
		     int access)
{
	if ((d->access & access) != access)
		return -EACCES;
	if (off > d->len || len > d->len - off)
		return -EINVAL;
	return 0;
}

/* ------------------------------------------------------------------ */
/* the table of exports, by token                                     */

static struct rmsgi_export **hash_slot(struct rmsgi_mrtab *t, uint64_t tok)
{
	return &t->hash[(tok ^ (tok >> 8) ^ (tok >> 16)) % RMSGI_MR_HASH];
}

static struct rmsgi_export *export_find(struct rmsgi_mrtab *t, uint64_t tok)
{
	struct rmsgi_export *e = *hash_slot(t, tok);

	while (e && e->token != tok)
		e = e->hnext;
	return e;
}

/* a fresh token from the kernel's random source, or why there is none */
static int random_token(struct rmsg_ctx *ctx, uint64_t *tok_p)
{
	struct rmsgi_mrtab *t = &ctx->mrt;
	uint64_t tok;

	do {
		ssize_t n = getrandom(&tok, sizeof(tok), GRND_NONBLOCK);

		if (n != (ssize_t)sizeof(tok)) {
			int err = n < 0 ? -errno : -EIO;

			rmsgi_err(ctx,
				  "export: getrandom() gave no token (%s): "
				  "exports need unguessable tokens from the "
				  "kernel's random source%s",
				  strerror(-err),
				  err == -EAGAIN ? ", which is not "
						   "initialized yet: retry"
						 : "");
			return err;
		}
	} while (tok == 0 || export_find(t, tok));
	*tok_p = tok;
	return 0;
}

void rmsgi_mr_init(struct rmsg_ctx *ctx)
{
	struct rmsgi_mrtab *t = &ctx->mrt;

	memset(t, 0, sizeof(*t));
	rmsgi_list_init(&t->regions);
	rmsgi_list_init(&t->any_peer);
	rmsgi_list_init(&t->rc);
	t->limit = ctx->cfg.reg_limit;
}

static bool budget_fits(const struct rmsgi_mrtab *t, size_t bytes)
{
	return bytes <= t->limit && t->bytes <= t->limit - bytes;
}

/* charges @bytes to the budget, or says which limit stops it; idle pool
 * slabs are given back first */
int rmsgi_budget_take(struct rmsg_ctx *ctx, size_t bytes)
{
	struct rmsgi_mrtab *t = &ctx->mrt;

	if (!budget_fits(t, bytes) &&
	    (!ctx->pool || !rmsgi_pool_reclaim(ctx->pool) ||
	     !budget_fits(t, bytes))) {
		rmsgi_err(ctx,
			  "registering %zu bytes would exceed the context's "
			  "registered-memory limit of %zu bytes (%zu in use); "
			  "raise it with rmsg_cfg_set_reg_limit()",
			  bytes, t->limit, t->bytes);
		return -ENOMEM;
	}
	t->bytes += bytes;
	ctx->st.reg_taken += bytes;
	return 0;
}

void rmsgi_budget_give(struct rmsg_ctx *ctx, size_t bytes)
{
	ctx->mrt.bytes -= bytes;
	ctx->st.reg_given += bytes;
}

/* rmsgi_budget_give() from the table (embedded in its context) */
static void budget_drop(struct rmsgi_mrtab *t, size_t bytes)
{
	rmsgi_budget_give(RMSGI_CONTAINER_OF(t, struct rmsg_ctx, mrt), bytes);
}

size_t rmsgi_page_span(const void *addr, size_t len)
{
	uintptr_t ps = rmsgi_page_size();
	uintptr_t s = (uintptr_t)addr & ~(ps - 1);
	uintptr_t e = ((uintptr_t)addr + len + ps - 1) & ~(ps - 1);

	return e - s;
}

static int mr_register(struct rmsg_ctx *ctx, struct rmsg_mr *mr)
{
	struct rmsgi_mrtab *t = &ctx->mrt;
	uint32_t rkey;

	/* local rights only: peers go through windows (rmsg_mr_export) */
	return t->ops->reg(t->priv, mr->addr, mr->len,
			   RMSGI_ACCESS_LOCAL_WRITE | RMSGI_ACCESS_MW_BIND,
			   &mr->h, &mr->lkey, &rkey);
}

/* gives back what the transport holds for @e: the peer loses access */
static void export_untransport(struct rmsgi_mrtab *t, struct rmsgi_export *e)
{
	if (e->w && t->ops)
		t->ops->unbind(t->priv, e->w);
	if (e->h && t->ops)
		t->ops->dereg(t->priv, e->h);
	e->w = NULL;
	e->h = NULL;
}

static void export_drop(struct rmsgi_mrtab *t, struct rmsgi_export *e)
{
	struct rmsgi_export **p;

	for (p = hash_slot(t, e->token); *p; p = &(*p)->hnext)
		if (*p == e) {
			*p = e->hnext;
			break;
		}
	rmsgi_list_del(&e->mlink);
	rmsgi_list_del(&e->clink);
	export_untransport(t, e);
	if (e->busy) {
		/* answers still read through it (its connection ended, their
		 * ops are being cancelled): the last one frees it */
		e->dead = true;
		return;
	}
	free(e);
}

void rmsgi_mr_set_reg(struct rmsg_ctx *ctx, const struct rmsgi_reg_ops *ops,
		      void *priv)
{
	struct rmsgi_mrtab *t = &ctx->mrt;
	struct rmsgi_list *n;

	t->ops = ops;
	t->priv = priv;
	for (n = t->regions.next; n != &t->regions; n = n->next) {
		struct rmsg_mr *mr = rmsgi_list_entry(n, struct rmsg_mr, link);

		/* a failure leaves the region usable over TCP only; the
		 * registration hook logged why */
		if (!mr->h && mr_register(ctx, mr))
			mr->h = NULL;
	}
}

void rmsgi_mr_clear_reg(struct rmsg_ctx *ctx)
{
	struct rmsgi_mrtab *t = &ctx->mrt;
	struct rmsgi_list *n;

	if (!t->ops)
		return;
	for (n = t->regions.next; n != &t->regions; n = n->next) {
		struct rmsg_mr *mr = rmsgi_list_entry(n, struct rmsg_mr, link);
		struct rmsgi_list *x;

		/* windows and registrations of exports before the region's
		 * own (a device refuses to deregister a bound region) */
		for (x = mr->exports.next; x != &mr->exports; x = x->next)
			export_untransport(
				t, rmsgi_list_entry(x, struct rmsgi_export,
						    mlink));
		if (mr->h)
			t->ops->dereg(t->priv, mr->h);
		mr->h = NULL;
		/* (busy stays: answers over TCP may still read the region
		 * when a removed device goes, transport/rdma/dev.c; the
		 * device's own operations have all completed) */
	}
	/* every operation has completed: entries left are leaks of a
	 * failed teardown; drop them with the device */
	while ((n = rmsgi_list_pop(&t->rc))) {
		struct rmsgi_rc_ent *e =
			rmsgi_list_entry(n, struct rmsgi_rc_ent, link);

		t->ops->dereg(t->priv, e->h);
		budget_drop(t, e->charged);
		free(e);
	}
	t->rc_n = 0;
	t->ops = NULL;
	t->priv = NULL;
}

static void mr_free(struct rmsg_mr *mr)
{
	struct rmsgi_mrtab *t = &mr->ctx->mrt;
	struct rmsgi_list *n;

	/* (busy only at the context's end: nothing answers from it now) */
	while ((n = mr->exports.next) != &mr->exports) {
		struct rmsgi_export *e =
			rmsgi_list_entry(n, struct rmsgi_export, mlink);

		e->busy = 0;
		export_drop(t, e);
	}
	rmsgi_list_del(&mr->link);
	if (mr->h && t->ops)
		t->ops->dereg(t->priv, mr->h);
	budget_drop(t, mr->charged);
	free(mr);
}

void rmsgi_mr_fini(struct rmsg_ctx *ctx)
{
	struct rmsgi_list *n;

	rmsgi_mr_clear_reg(ctx);
	while ((n = ctx->mrt.regions.next) != &ctx->mrt.regions)
		mr_free(rmsgi_list_entry(n, struct rmsg_mr, link));
}

int rmsgi_mr_target(struct rmsg_conn *c, uint64_t token, uint64_t off,
		    uint64_t len, int access, uint8_t **p,
		    struct rmsgi_export **e_p)
{
	struct rmsgi_export *e =
		token ? export_find(&c->ctx->mrt, token) : NULL;

	/* another connection's export answers as one that does not exist:
	 * a peer learns nothing about what others were given */
	if (!e || (e->conn && e->conn != c) || (e->access & access) != access)
		return -EACCES;
	if (off > e->len || len > e->len - off)
		return -EINVAL;
	*p = e->mr->addr + e->off + off;
	if (e_p) {
		e->busy++;
		e->mr->busy++;
		*e_p = e;
	}
	return 0;
}

void rmsgi_mr_unbusy(struct rmsg_ctx *ctx, struct rmsgi_export *e)
{
	(void)ctx;
	if (e->mr->busy)
		e->mr->busy--;
	if (--e->busy == 0 && e->dead)
		free(e);
}

void rmsgi_mr_conn_gone(struct rmsg_conn *c)
{
	struct rmsgi_list *n;

	if (!c->rma.exports.next)
		return; /* never initialized */
	if (c->state == RMSGI_CS_SUSPENDED) {
		/* only the endpoint goes: the exports stay, without their
		 * windows until the resume (rmsgi_mr_conn_rebind) */
		rmsgi_list_for_each(n, &c->rma.exports) export_untransport(
			&c->ctx->mrt,
			rmsgi_list_entry(n, struct rmsgi_export, clink));
		return;
	}
	while ((n = c->rma.exports.next) != &c->rma.exports)
		export_drop(&c->ctx->mrt,
			    rmsgi_list_entry(n, struct rmsgi_export, clink));
}

static int export_transport(struct rmsg_mr *mr, struct rmsg_conn *c,
			    struct rmsgi_export *e);

unsigned rmsgi_mr_conn_rebind(struct rmsg_conn *c,
			      void (*fn)(struct rmsg_conn *c, uint64_t token,
					 uint32_t rkey))
{
	struct rmsgi_list *n, *next;
	unsigned done = 0;
	int ret;

	if (!c->rma.exports.next)
		return 0;
	for (n = c->rma.exports.next; n != &c->rma.exports; n = next) {
		struct rmsgi_export *e =
			rmsgi_list_entry(n, struct rmsgi_export, clink);

		next = n->next;
		export_untransport(&c->ctx->mrt, e);
		ret = export_transport(e->mr, c, e);
		if (ret == 0 && e->w) {
			fn(c, e->token, e->rkey);
			done++;
			continue;
		}
		if (ret == 0)
			continue; /* no window here (TCP): the token does */
		rmsgi_warn(c->ctx,
			   "conn %u: an export of %llu bytes could not be "
			   "bound again after the resume (%s): revoked",
			   c->id, (unsigned long long)e->len, strerror(-ret));
		export_drop(&c->ctx->mrt, e);
	}
	return done;
}

/* ------------------------------------------------------------------ */
/* the API                                                              */

int rmsg_mr_reg(struct rmsg_ctx *ctx, void *addr, size_t len, int access,
		struct rmsg_mr **mr_p)
{
	struct rmsgi_mrtab *t;
	struct rmsg_mr *mr;
	int ret;

	if (!ctx || !addr || !len || !mr_p || access & ~RMSGI_ACCESS_ALL ||
	    (uintptr_t)addr + len < (uintptr_t)addr)
		return -EINVAL;
	t = &ctx->mrt;
	mr = calloc(1, sizeof(*mr));
	if (!mr)
		return -ENOMEM;
	mr->ctx = ctx;
	mr->addr = addr;
	mr->len = len;
	mr->access = access;
	rmsgi_list_init(&mr->exports);
	mr->charged = rmsgi_page_span(addr, len);
	ret = rmsgi_budget_take(ctx, mr->charged);
	if (ret)
		goto undo_mr;
	if (t->ops) {
		ret = mr_register(ctx, mr);
		if (ret)
			goto undo_budget;
	}
	rmsgi_list_add_tail(&t->regions, &mr->link);
	*mr_p = mr;
	return 0;

undo_budget:
	budget_drop(t, mr->charged);
undo_mr:
	free(mr);
	return ret;
}

/*
 * Does an operation still on a send queue of the context (not yet handed
 * to the transport) have a buffer in @mr? Over RDMA it would be posted
 * after the region went (with a registration made for it then, or none);
 * on either transport the caller learns the region is still in use.
 * Linear in the ops queued: deregistering is rare.
 */
static bool mr_queued(const struct rmsg_mr *mr)
{
	uintptr_t s = (uintptr_t)mr->addr, e = s + mr->len;
	struct rmsgi_list *n, *o;
	int i;

	for (n = mr->ctx->conns.next; n != &mr->ctx->conns; n = n->next) {
		struct rmsg_conn *c =
			rmsgi_list_entry(n, struct rmsg_conn, link);

		for (o = c->tx.sendq.next; o != &c->tx.sendq; o = o->next) {
			struct rmsgi_op *op =
				rmsgi_list_entry(o, struct rmsgi_op, link);

			for (i = 0; i < op->iovcnt; i++) {
				uintptr_t b = (uintptr_t)op->iov[i].iov_base;

				if (op->iov[i].iov_len && b < e &&
				    s < b + op->iov[i].iov_len)
					return true;
			}
		}
	}
	return false;
}

int rmsg_mr_dereg(struct rmsg_mr *mr)
{
	struct rmsgi_mrtab *t;
	struct rmsgi_list *n;

	if (!mr)
		return -EINVAL;
	if (mr->busy || mr_queued(mr))
		return -EBUSY;
	t = &mr->ctx->mrt;
	/* a window whose bind is still queued would fail the queue pair if
	 * the region went first */
	for (n = mr->exports.next; n != &mr->exports; n = n->next) {
		struct rmsgi_export *e =
			rmsgi_list_entry(n, struct rmsgi_export, mlink);

		if (e->w && t->ops && t->ops->bind_pending(t->priv, e->w))
			return -EBUSY;
	}
	mr_free(mr);
	return 0;
}

/* the transport side of an export: a window on @c's queue pair, or a
 * registration with remote rights for any peer; nothing on TCP */
static int export_transport(struct rmsg_mr *mr, struct rmsg_conn *c,
			    struct rmsgi_export *e)
{
	struct rmsgi_mrtab *t = &mr->ctx->mrt;
	uint32_t lkey, rkey;
	void *h;
	int ret;

	if (c && !(c->tr && (c->tr->caps & RMSGI_TR_CAP_RMA)))
		return 0;
	if (c && c->state == RMSGI_CS_SUSPENDED)
		return 0; /* bound at the resume (rmsgi_mr_conn_rebind) */
	if (!t->ops || !mr->h) {
		if (c) {
			rmsgi_err(mr->ctx,
				  "export: the region has no registration "
				  "with the RDMA device of conn %u",
				  c->id);
			return -EINVAL;
		}
		return 0; /* any peer: TCP only until a device opens */
	}
	if (!c)
		return t->ops->reg(t->priv, mr->addr + e->off, e->len,
				   e->access, &e->h, &lkey, &e->rkey);
	/* a sub-range gets a local-only registration of its own bytes to
	 * bind the window to: rxe (6.1) checks a type-2 window's accesses
	 * against its registration's range, not the window's (mw_probe) */
	h = mr->h;
	if (e->off || e->len != mr->len) {
		ret = t->ops->reg(t->priv, mr->addr + e->off, e->len,
				  RMSGI_ACCESS_LOCAL_WRITE |
					  RMSGI_ACCESS_MW_BIND,
				  &e->h, &lkey, &rkey);
		if (ret)
			return ret;
		h = e->h;
	}
	ret = t->ops->bind(t->priv, c->tr_priv, h, mr->addr + e->off, e->len,
			   e->access, &e->w, &e->rkey);
	if (ret && e->h) {
		t->ops->dereg(t->priv, e->h);
		e->h = NULL;
	}
	return ret;
}

int rmsg_mr_export(struct rmsg_mr *mr, struct rmsg_conn *c, uint64_t off,
		   uint64_t len, int access, void *desc)
{
	int rights = access & ~RMSG_EXPORT_ANY_PEER;
	bool any = access & RMSG_EXPORT_ANY_PEER;
	struct rmsgi_mrtab *t;
	struct rmsgi_export *e, **slot;
	struct rmsgi_desc d;
	int ret;

	if (!mr || !desc || !rights || rights & ~RMSGI_ACCESS_ALL ||
	    any != !c || off >= mr->len)
		return -EINVAL;
	if (!len)
		len = mr->len - off;
	if (len > mr->len - off)
		return -EINVAL;
	if ((mr->access & rights) != rights)
		return -EACCES;
	if (c && (c->ctx != mr->ctx || !rmsgi_conn_takes_sends(c)))
		return c->ctx != mr->ctx ? -EINVAL : -ENOTCONN;
	t = &mr->ctx->mrt;
	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	ret = random_token(mr->ctx, &e->token);
	if (ret)
		goto undo_e;
	e->mr = mr;
	e->conn = c;
	e->off = off;
	e->len = len;
	e->access = rights;
	ret = export_transport(mr, c, e);
	if (ret == -EAGAIN && c)
		c->tx.want_writable = true; /* the page promises on_writable */
	if (ret)
		goto undo_e;
	slot = hash_slot(t, e->token);
	e->hnext = *slot;
	*slot = e;
	rmsgi_list_add_tail(&mr->exports, &e->mlink);
	rmsgi_list_add_tail(c ? &c->rma.exports : &t->any_peer, &e->clink);

	memset(&d, 0, sizeof(d));
	d.access = (uint8_t)rights;
	d.token = e->token;
	d.len = len;
	if (e->w || e->h || (c && rmsgi_rekey_later(c))) {
		/* (no window yet: the peer learns the rkey at a resume over
		 * RDMA, from the REKEY frames of rekey.c, before it may use
		 * it; over TCP it names the token) */
		d.flags = RMSGI_DESC_F_RKEY;
		d.rkey = e->rkey;
		d.addr = (uintptr_t)(mr->addr + off);
	}
	rmsgi_desc_encode(&d, desc);
	return 0;

undo_e:
	free(e);
	return ret;
}

int rmsg_mr_revoke(struct rmsg_mr *mr, const void *desc)
{
	struct rmsgi_mrtab *t;
	struct rmsgi_export *e;
	struct rmsgi_desc d;

	if (!mr || rmsgi_desc_decode(desc, &d))
		return -EINVAL;
	t = &mr->ctx->mrt;
	e = export_find(t, d.token);
	if (!e || e->mr != mr)
		return -ENOENT;
	/* 0 means the peer's access has stopped: the window is gone from
	 * the device when this returns. A window whose bind has not been
	 * reaped cannot go yet (deallocating it under its bind fails the
	 * queue pair), and letting it go later left it usable until then:
	 * the export stays, and the caller tries again once the loop
	 * turned (rmsg_mr_export.3) */
	if (e->w && t->ops && t->ops->bind_pending(t->priv, e->w))
		return -EBUSY;
	/* TCP: an answer to the peer's read, queued, reads the memory when
	 * it is written: the access has not stopped until it went (else
	 * what the app writes there after the revoke would reach the peer);
	 * the peer's frames say nothing about it, the loop writes it */
	if (e->busy)
		return -EBUSY;
	export_drop(t, e);
	return 0;
}

/* the largest export the peer of @c may reach with @access: its own
 * windows and the any-peer exports. A bound on what one of its one-sided
 * operations can have touched: what was granted to this peer, not the
 * largest region of the context */
static size_t export_list_max(const struct rmsgi_list *l, int access,
			      size_t max)
{
	const struct rmsgi_list *n;

	for (n = l->next; n != l; n = n->next) {
		const struct rmsgi_export *e =
			rmsgi_list_entry(n, struct rmsgi_export, clink);

		if ((e->access & access) == access && e->len > max)
			max = e->len;
	}
	return max;
}

size_t rmsgi_mr_conn_max_len(const struct rmsg_conn *c, int access)
{
	size_t max = export_list_max(&c->ctx->mrt.any_peer, access, 0);

	if (!c->rma.exports.next)
		return max; /* never initialized: nothing of its own */
	return export_list_max(&c->rma.exports, access, max);
}
