// SPDX-License-Identifier: MIT
/* unit tests of memory regions, descriptors and the registration cache
 * (src/mr.c), with a fake transport registration */
#include "unit.h"

#include "rmsg_int.h"

#define PG 4096

static struct {
	int regs, deregs, live, fail;
	int last_access;
	void *last_addr;
	size_t last_len;
} fk;

static int fake_reg(void *priv, void *addr, size_t len, int access, void **h_p,
		    uint32_t *lkey_p, uint32_t *rkey_p)
{
	(void)priv;
	fk.regs++;
	if (fk.fail)
		return -ENOMEM;
	fk.live++;
	fk.last_access = access;
	fk.last_addr = addr;
	fk.last_len = len;
	*h_p = malloc(1);
	*lkey_p = (uint32_t)fk.regs;
	*rkey_p = 0x1000u + (uint32_t)fk.regs;
	return 0;
}

static void fake_dereg(void *priv, void *h)
{
	(void)priv;
	fk.deregs++;
	fk.live--;
	free(h);
}

static struct {
	int binds, unbinds, pending, fail;
} fw;

static int fake_bind(void *priv, void *tc, void *h, void *addr, size_t len,
		     int access, void **w_p, uint32_t *rkey_p)
{
	(void)priv;
	(void)tc;
	(void)h;
	(void)addr;
	(void)len;
	(void)access;
	if (fw.fail)
		return fw.fail;
	fw.binds++;
	*w_p = malloc(1);
	*rkey_p = 0x2000u + (uint32_t)fw.binds;
	return 0;
}

static void fake_unbind(void *priv, void *w)
{
	(void)priv;
	fw.unbinds++;
	free(w);
}

static bool fake_bind_pending(void *priv, void *w)
{
	(void)priv;
	(void)w;
	return fw.pending;
}

static const struct rmsgi_reg_ops fake_ops = {fake_reg, fake_dereg, fake_bind,
					      fake_unbind, fake_bind_pending};

/* rekey.c's: these connections are not resumable (no session), so
 * none is bound again later */
bool rmsgi_rekey_later(const struct rmsg_conn *c)
{
	(void)c;
	return false;
}

/* a connection as far as mr.c looks at it */
static struct rmsg_conn *conn_new(struct rmsg_ctx *ctx,
				  const struct rmsgi_tr *tr)
{
	struct rmsg_conn *c = calloc(1, sizeof(*c));

	assert_non_null(c);
	c->ctx = ctx;
	c->tr = tr;
	c->state = RMSGI_CS_ESTABLISHED;
	rmsgi_list_init(&c->rma.exports);
	return c;
}

static const struct rmsgi_tr tr_tcp = {.name = "tcp"};
static const struct rmsgi_tr tr_rdma = {
	.name = "rdma", .caps = RMSGI_TR_CAP_RNDV | RMSGI_TR_CAP_RMA};

static struct rmsg_ctx *ctx_new(size_t limit)
{
	struct rmsg_ctx *ctx = calloc(1, sizeof(*ctx));

	assert_non_null(ctx);
	rmsgi_cfg_defaults(&ctx->cfg);
	ctx->cfg.log_level = -1; /* quiet */
	if (limit)
		ctx->cfg.reg_limit = limit;
	rmsgi_list_init(&ctx->conns); /* dereg looks at their send queues */
	rmsgi_mr_init(ctx);
	memset(&fk, 0, sizeof(fk));
	memset(&fw, 0, sizeof(fw));
	return ctx;
}

static void ctx_free(struct rmsg_ctx *ctx)
{
	rmsgi_mr_fini(ctx);
	assert_int_equal(ctx->mrt.bytes, 0);
	free(ctx);
}

static void *page_buf(size_t pages)
{
	void *p = NULL;

	assert_int_equal(posix_memalign(&p, PG, pages * PG), 0);
	return p;
}

/* ------------------------------------------------------------------ */
/* descriptors                                                          */

static void desc_encode__roundtrip(void **state)
{
	struct rmsgi_desc d = {.access = RMSG_ACCESS_REMOTE_READ,
			       .flags = RMSGI_DESC_F_RKEY,
			       .token = 0x0123456789abcdefull,
			       .rkey = 0x12345678,
			       .addr = 0x7f0011223344ull,
			       .len = 1ull << 33},
			  e;
	uint8_t buf[RMSG_MR_DESC_SIZE];

	(void)state;
	rmsgi_desc_encode(&d, buf);
	assert_int_equal(buf[0], RMSGI_DESC_MAGIC);
	assert_int_equal(buf[1], RMSGI_DESC_VERSION);
	assert_int_equal(buf[4], 0x78); /* little-endian */
	assert_int_equal(buf[8], 0xef);
	assert_int_equal(rmsgi_desc_decode(buf, &e), 0);
	assert_int_equal(e.access, d.access);
	assert_int_equal(e.flags, d.flags);
	assert_int_equal(e.token, d.token);
	assert_int_equal(e.rkey, d.rkey);
	assert_int_equal(e.addr, d.addr);
	assert_int_equal(e.len, d.len);
}

static void desc_decode__malformed(void **state)
{
	struct rmsgi_desc d = {.access = RMSG_ACCESS_REMOTE_WRITE,
			       .flags = RMSGI_DESC_F_RKEY,
			       .token = 7,
			       .addr = 4096,
			       .len = 100},
			  e;
	uint8_t good[RMSG_MR_DESC_SIZE], buf[RMSG_MR_DESC_SIZE];
	static const struct {
		int off;
		uint8_t val;
	} bad[] = {
		{0, 0xa7}, /* magic */
		{1, 1},	   /* version 1: region ids, before exports */
		{2, 4},	   /* unknown access bit */
		{3, 2},	   /* unknown flag */
		{3, 0},	   /* an address without the rkey flag */
	};
	size_t i;

	(void)state;
	rmsgi_desc_encode(&d, good);
	assert_int_equal(rmsgi_desc_decode(good, &e), 0);
	assert_int_equal(rmsgi_desc_decode(NULL, &e), -EINVAL);
	for (i = 0; i < UNIT_ARRAY_SIZE(bad); i++) {
		memcpy(buf, good, sizeof(buf));
		buf[bad[i].off] = bad[i].val;
		assert_int_equal(rmsgi_desc_decode(buf, &e), -EINVAL);
	}
	/* token 0, length 0, a range that wraps */
	d.token = 0;
	rmsgi_desc_encode(&d, buf);
	assert_int_equal(rmsgi_desc_decode(buf, &e), -EINVAL);
	d.token = 7;
	d.len = 0;
	rmsgi_desc_encode(&d, buf);
	assert_int_equal(rmsgi_desc_decode(buf, &e), -EINVAL);
	d.len = 100;
	d.addr = UINT64_MAX - 10;
	rmsgi_desc_encode(&d, buf);
	assert_int_equal(rmsgi_desc_decode(buf, &e), -EINVAL);
}

static void desc_check__bounds_and_rights(void **state)
{
	struct rmsgi_desc d = {
		.access = RMSG_ACCESS_REMOTE_WRITE, .token = 1, .len = 1000};

	(void)state;
	assert_int_equal(rmsgi_desc_check(&d, 0, 1000, 1), 0);
	assert_int_equal(rmsgi_desc_check(&d, 999, 1, 1), 0);
	assert_int_equal(rmsgi_desc_check(&d, 1000, 0, 1), 0);
	assert_int_equal(rmsgi_desc_check(&d, 1000, 1, 1), -EINVAL);
	assert_int_equal(rmsgi_desc_check(&d, 1001, 0, 1), -EINVAL);
	assert_int_equal(rmsgi_desc_check(&d, 1, 1000, 1), -EINVAL);
	assert_int_equal(rmsgi_desc_check(&d, UINT64_MAX, 2, 1), -EINVAL);
	assert_int_equal(rmsgi_desc_check(&d, 2, UINT64_MAX, 1), -EINVAL);
	assert_int_equal(rmsgi_desc_check(&d, 0, 1, RMSG_ACCESS_REMOTE_READ),
			 -EACCES);
	d.access = RMSG_ACCESS_REMOTE_READ;
	assert_int_equal(rmsgi_desc_check(&d, 0, 1, RMSG_ACCESS_REMOTE_WRITE),
			 -EACCES);
}

/* ------------------------------------------------------------------ */
/* regions                                                              */

static void mr_reg__args(void **state)
{
	struct rmsg_ctx *ctx = ctx_new(0);
	struct rmsg_mr *mr;
	char buf[64];

	(void)state;
	assert_int_equal(rmsg_mr_reg(NULL, buf, 64, 0, &mr), -EINVAL);
	assert_int_equal(rmsg_mr_reg(ctx, NULL, 64, 0, &mr), -EINVAL);
	assert_int_equal(rmsg_mr_reg(ctx, buf, 0, 0, &mr), -EINVAL);
	assert_int_equal(rmsg_mr_reg(ctx, buf, 64, 4, &mr), -EINVAL);
	assert_int_equal(rmsg_mr_reg(ctx, buf, 64, 0, NULL), -EINVAL);
	assert_int_equal(
		rmsg_mr_reg(ctx, (void *)(UINTPTR_MAX - 8), 64, 0, &mr),
		-EINVAL);
	assert_int_equal(rmsg_mr_dereg(NULL), -EINVAL);
	assert_int_equal(
		rmsg_mr_export(NULL, NULL, 0, 0,
			       RMSG_ACCESS_REMOTE_WRITE | RMSG_EXPORT_ANY_PEER,
			       buf),
		-EINVAL);
	assert_int_equal(rmsg_mr_revoke(NULL, buf), -EINVAL);
	ctx_free(ctx);
}

/* page-rounded bytes count; over the limit is -ENOMEM */
static void mr_reg__budget(void **state)
{
	struct rmsg_ctx *ctx = ctx_new(4 * PG);
	uint8_t *p = page_buf(8);
	struct rmsg_mr *a, *b, *c;

	(void)state;
	assert_int_equal(rmsg_mr_reg(ctx, p + 10, 10, 0, &a), 0);
	assert_int_equal(ctx->mrt.bytes, PG);
	/* straddles a page boundary: two pages */
	assert_int_equal(rmsg_mr_reg(ctx, p + PG - 1, 2, 0, &b), 0);
	assert_int_equal(ctx->mrt.bytes, 3 * PG);
	assert_int_equal(rmsg_mr_reg(ctx, p, 2 * PG, 0, &c), -ENOMEM);
	assert_int_equal(rmsg_mr_dereg(b), 0);
	assert_int_equal(rmsg_mr_reg(ctx, p, 2 * PG, 0, &c), 0);
	assert_int_equal(ctx->mrt.bytes, 3 * PG);
	assert_int_equal(rmsg_mr_dereg(a), 0);
	assert_int_equal(rmsg_mr_dereg(c), 0);
	assert_int_equal(ctx->mrt.bytes, 0);
	ctx_free(ctx);
	free(p);
}

/* a region made before the transport is registered when it comes, with
 * local rights only; an any-peer export carries an rkey only then */
static void mr_reg__lazy_registration(void **state)
{
	struct rmsg_ctx *ctx = ctx_new(0);
	uint8_t *p = page_buf(1);
	uint8_t desc[RMSG_MR_DESC_SIZE];
	const int any = RMSG_ACCESS_REMOTE_WRITE | RMSG_EXPORT_ANY_PEER;
	struct rmsgi_desc d;
	struct rmsg_mr *mr;

	(void)state;
	assert_int_equal(
		rmsg_mr_reg(ctx, p, 100, RMSG_ACCESS_REMOTE_WRITE, &mr), 0);
	assert_int_equal(fk.regs, 0);
	assert_int_equal(rmsg_mr_export(mr, NULL, 0, 0, any, desc), 0);
	assert_int_equal(rmsgi_desc_decode(desc, &d), 0);
	assert_int_equal(d.flags, 0);
	assert_int_equal(d.addr, 0); /* TCP needs no address */
	assert_int_equal(d.len, 100);
	rmsgi_mr_set_reg(ctx, &fake_ops, NULL);
	assert_int_equal(fk.regs, 1);
	assert_int_equal(fk.last_access,
			 RMSGI_ACCESS_LOCAL_WRITE | RMSGI_ACCESS_MW_BIND);
	/* any peer on RDMA: a registration of the range with its rights */
	assert_int_equal(rmsg_mr_export(mr, NULL, 10, 20, any, desc), 0);
	assert_int_equal(fk.regs, 2);
	assert_int_equal(fk.last_access, RMSG_ACCESS_REMOTE_WRITE);
	assert_ptr_equal(fk.last_addr, p + 10);
	assert_int_equal(fk.last_len, 20);
	assert_int_equal(rmsgi_desc_decode(desc, &d), 0);
	assert_int_equal(d.flags, RMSGI_DESC_F_RKEY);
	assert_int_equal(d.rkey, 0x1002);
	assert_int_equal(d.addr, (uintptr_t)p + 10);
	assert_int_equal(rmsg_mr_revoke(mr, desc), 0);
	assert_int_equal(fk.live, 1);
	assert_int_equal(rmsg_mr_revoke(mr, desc), -ENOENT);
	/* a registration failure is -ENOMEM and leaves nothing behind */
	fk.fail = 1;
	assert_int_equal(rmsg_mr_reg(ctx, p, 100, 0, &mr), -ENOMEM);
	assert_int_equal(ctx->mrt.bytes, PG);
	fk.fail = 0;
	ctx_free(ctx);
	assert_int_equal(fk.live, 0);
	free(p);
}

/* what rmsg_mr_export() takes */
static void mr_export__args(void **state)
{
	struct rmsg_ctx *ctx = ctx_new(0), *other = ctx_new(0);
	struct rmsg_conn *c = conn_new(ctx, &tr_tcp);
	struct rmsg_conn *oc = conn_new(other, &tr_tcp);
	uint8_t *p = page_buf(1), desc[RMSG_MR_DESC_SIZE];
	const int W = RMSG_ACCESS_REMOTE_WRITE, R = RMSG_ACCESS_REMOTE_READ;
	struct rmsg_mr *mr;

	(void)state;
	assert_int_equal(rmsg_mr_reg(ctx, p, 100, W, &mr), 0);
	assert_int_equal(rmsg_mr_export(mr, c, 0, 0, W, NULL), -EINVAL);
	assert_int_equal(rmsg_mr_export(mr, c, 0, 0, 0, desc), -EINVAL);
	assert_int_equal(rmsg_mr_export(mr, c, 0, 0, 4, desc), -EINVAL);
	/* a connection and the any-peer flag, or neither */
	assert_int_equal(rmsg_mr_export(mr, NULL, 0, 0, W, desc), -EINVAL);
	assert_int_equal(
		rmsg_mr_export(mr, c, 0, 0, W | RMSG_EXPORT_ANY_PEER, desc),
		-EINVAL);
	/* the range and the rights stay within the region's */
	assert_int_equal(rmsg_mr_export(mr, c, 100, 0, W, desc), -EINVAL);
	assert_int_equal(rmsg_mr_export(mr, c, 50, 51, W, desc), -EINVAL);
	assert_int_equal(rmsg_mr_export(mr, c, UINT64_MAX, 2, W, desc),
			 -EINVAL);
	assert_int_equal(rmsg_mr_export(mr, c, 0, 0, R, desc), -EACCES);
	assert_int_equal(rmsg_mr_export(mr, c, 0, 0, W | R, desc), -EACCES);
	/* another context's connection; one not established */
	assert_int_equal(rmsg_mr_export(mr, oc, 0, 0, W, desc), -EINVAL);
	c->state = RMSGI_CS_CLOSING;
	assert_int_equal(rmsg_mr_export(mr, c, 0, 0, W, desc), -ENOTCONN);
	c->state = RMSGI_CS_ESTABLISHED;
	assert_int_equal(rmsg_mr_export(mr, c, 50, 50, W, desc), 0);
	assert_int_equal(rmsg_mr_dereg(mr), 0);
	assert_true(rmsgi_list_empty(&c->rma.exports));
	rmsgi_mr_conn_gone(c);
	free(c);
	free(oc);
	ctx_free(ctx);
	ctx_free(other);
	free(p);
}

/* the owner's checks of a peer's access (TCP): its own connection's
 * exports only, within their range and rights, until revoked */
static void mr_target__checks(void **state)
{
	struct rmsg_ctx *ctx = ctx_new(0);
	struct rmsg_conn *a = conn_new(ctx, &tr_tcp),
			 *b = conn_new(ctx, &tr_tcp);
	uint8_t *p = page_buf(1), *t = NULL;
	uint8_t dw[RMSG_MR_DESC_SIZE], dr[RMSG_MR_DESC_SIZE];
	uint8_t dany[RMSG_MR_DESC_SIZE];
	const int W = RMSG_ACCESS_REMOTE_WRITE, R = RMSG_ACCESS_REMOTE_READ;
	struct rmsgi_desc d, e, f;
	struct rmsg_mr *mr;

	(void)state;
	assert_int_equal(rmsg_mr_reg(ctx, p, 1000, W | R, &mr), 0);
	/* write to [100, 200) for a; read of all for a; any peer reads
	 * [900, 1000) */
	assert_int_equal(rmsg_mr_export(mr, a, 100, 100, W, dw), 0);
	assert_int_equal(rmsg_mr_export(mr, a, 0, 0, R, dr), 0);
	assert_int_equal(rmsg_mr_export(mr, NULL, 900, 0,
					R | RMSG_EXPORT_ANY_PEER, dany),
			 0);
	assert_int_equal(rmsgi_desc_decode(dw, &d), 0);
	assert_int_equal(rmsgi_desc_decode(dr, &e), 0);
	assert_int_equal(rmsgi_desc_decode(dany, &f), 0);
	assert_int_equal(d.len, 100);
	assert_int_equal(d.access, W);
	assert_int_equal(d.addr, 0);
	assert_int_equal(f.len, 100);
	assert_true(d.token != e.token && e.token != f.token);
	/* offsets count from the export's start */
	assert_int_equal(rmsgi_mr_target(a, d.token, 10, 90, W, &t, NULL), 0);
	assert_ptr_equal(t, p + 110);
	assert_int_equal(rmsgi_mr_target(a, d.token, 10, 91, W, &t, NULL),
			 -EINVAL);
	assert_int_equal(
		rmsgi_mr_target(a, d.token, UINT64_MAX, 2, W, &t, NULL),
		-EINVAL);
	assert_int_equal(rmsgi_mr_target(a, d.token, 0, 1, R, &t, NULL),
			 -EACCES);
	assert_int_equal(rmsgi_mr_target(a, e.token, 0, 1000, R, &t, NULL), 0);
	assert_int_equal(rmsgi_mr_target(a, e.token, 0, 1, W, &t, NULL),
			 -EACCES);
	/* another connection of the same context: as if it did not exist */
	assert_int_equal(rmsgi_mr_target(b, d.token, 10, 1, W, &t, NULL),
			 -EACCES);
	assert_int_equal(rmsgi_mr_target(b, e.token, 0, 1, R, &t, NULL),
			 -EACCES);
	/* the any-peer export works on both */
	assert_int_equal(rmsgi_mr_target(b, f.token, 99, 1, R, &t, NULL), 0);
	assert_ptr_equal(t, p + 999);
	assert_int_equal(rmsgi_mr_target(a, f.token, 0, 1, R, &t, NULL), 0);
	/* forged: token 0, a neighbour of a real one */
	assert_int_equal(rmsgi_mr_target(a, 0, 0, 1, W, &t, NULL), -EACCES);
	assert_int_equal(rmsgi_mr_target(a, d.token ^ 1, 0, 1, W, &t, NULL),
			 -EACCES);
	/* revoked */
	assert_int_equal(rmsg_mr_revoke(mr, dw), 0);
	assert_int_equal(rmsgi_mr_target(a, d.token, 0, 1, W, &t, NULL),
			 -EACCES);
	assert_int_equal(rmsg_mr_revoke(mr, dw), -ENOENT);
	/* a's end revokes what it was given; any-peer stays */
	rmsgi_mr_conn_gone(a);
	assert_int_equal(rmsgi_mr_target(a, e.token, 0, 1, R, &t, NULL),
			 -EACCES);
	assert_int_equal(rmsgi_mr_target(b, f.token, 0, 1, R, &t, NULL), 0);
	/* deregistration revokes the rest */
	assert_int_equal(rmsg_mr_export(mr, b, 0, 0, W, dw), 0);
	assert_int_equal(rmsgi_desc_decode(dw, &d), 0);
	assert_int_equal(rmsg_mr_dereg(mr), 0);
	assert_int_equal(rmsgi_mr_target(b, d.token, 0, 1, W, &t, NULL),
			 -EACCES);
	assert_int_equal(rmsgi_mr_target(b, f.token, 0, 1, R, &t, NULL),
			 -EACCES);
	assert_true(rmsgi_list_empty(&b->rma.exports));
	free(a);
	free(b);
	ctx_free(ctx);
	free(p);
}

/* RDMA: a per-connection export is a window bound on the connection, and
 * goes with the export, the connection or the region */
static void mr_export__rdma_window(void **state)
{
	struct rmsg_ctx *ctx = ctx_new(0);
	struct rmsg_conn *c = conn_new(ctx, &tr_rdma);
	uint8_t *p = page_buf(1), desc[RMSG_MR_DESC_SIZE];
	const int W = RMSG_ACCESS_REMOTE_WRITE;
	struct rmsgi_desc d;
	struct rmsg_mr *mr;

	(void)state;
	assert_int_equal(rmsg_mr_reg(ctx, p, 1000, W, &mr), 0);
	/* no device yet: nothing to bind to */
	assert_int_equal(rmsg_mr_export(mr, c, 0, 0, W, desc), -EINVAL);
	rmsgi_mr_set_reg(ctx, &fake_ops, NULL);
	assert_int_equal(rmsg_mr_export(mr, c, 200, 100, W, desc), 0);
	assert_int_equal(fw.binds, 1);
	/* a sub-range's window sits on a registration of just its bytes */
	assert_int_equal(fk.last_access,
			 RMSGI_ACCESS_LOCAL_WRITE | RMSGI_ACCESS_MW_BIND);
	assert_ptr_equal(fk.last_addr, p + 200);
	assert_int_equal(fk.last_len, 100);
	assert_int_equal(fk.live, 2);
	assert_int_equal(rmsgi_desc_decode(desc, &d), 0);
	assert_int_equal(d.flags, RMSGI_DESC_F_RKEY);
	assert_int_equal(d.rkey, 0x2001);
	assert_int_equal(d.addr, (uintptr_t)p + 200);
	assert_int_equal(rmsg_mr_revoke(mr, desc), 0);
	assert_int_equal(fw.unbinds, 1);
	assert_int_equal(fk.live, 1);
	/* a device without windows says so */
	fw.fail = -EOPNOTSUPP;
	assert_int_equal(rmsg_mr_export(mr, c, 0, 0, W, desc), -EOPNOTSUPP);
	fw.fail = 0;
	/* the connection ends: its windows go */
	assert_int_equal(rmsg_mr_export(mr, c, 0, 0, W, desc), 0);
	rmsgi_mr_conn_gone(c);
	assert_int_equal(fw.unbinds, 2);
	/* a bind still queued keeps the region (its MR) from going */
	assert_int_equal(rmsg_mr_export(mr, c, 0, 0, W, desc), 0);
	fw.pending = 1;
	assert_int_equal(rmsg_mr_dereg(mr), -EBUSY);
	fw.pending = 0;
	assert_int_equal(rmsg_mr_dereg(mr), 0);
	assert_int_equal(fw.unbinds, 3);
	assert_int_equal(fk.live, 0);
	free(c);
	ctx_free(ctx);
	free(p);
}

/* ------------------------------------------------------------------ */
/* the registration cache                                               */

static void mr_pin__shared_while_in_use(void **state)
{
	struct rmsg_ctx *ctx = ctx_new(0);
	uint8_t *p = page_buf(4);
	struct rmsgi_pin a, b, c;
	uint32_t lk, rk, lk2;

	(void)state;
	/* no transport: nothing to pin */
	assert_int_equal(rmsgi_mr_pin(ctx, p, 10, 0, &a, &lk, &rk), -EINVAL);
	rmsgi_mr_set_reg(ctx, &fake_ops, NULL);
	assert_int_equal(rmsgi_mr_pin(ctx, p + 100, 10, 0, &a, &lk, &rk), 0);
	/* page-granular */
	assert_ptr_equal(fk.last_addr, p);
	assert_int_equal(fk.last_len, PG);
	assert_int_equal(ctx->mrt.bytes, PG);
	/* the same page again: shared, no new registration */
	assert_int_equal(rmsgi_mr_pin(ctx, p + 2000, 100, 0, &b, &lk2, &rk), 0);
	assert_int_equal(fk.regs, 1);
	assert_int_equal(lk2, lk);
	/* a device-written piece needs its own (different access) */
	assert_int_equal(rmsgi_mr_pin(ctx, p + 2000, 100,
				      RMSGI_ACCESS_LOCAL_WRITE, &c, &lk2, &rk),
			 0);
	assert_int_equal(fk.regs, 2);
	rmsgi_mr_unpin(ctx, &a);
	assert_int_equal(fk.deregs, 0);
	rmsgi_mr_unpin(ctx, &b);
	/* never kept idle: a freed and reused buffer cannot be sent from a
	 * stale registration */
	assert_int_equal(fk.deregs, 1);
	rmsgi_mr_unpin(ctx, &c);
	assert_int_equal(fk.deregs, 2);
	assert_int_equal(ctx->mrt.bytes, 0);
	assert_int_equal(ctx->mrt.rc_n, 0);
	ctx_free(ctx);
	free(p);
}

/* what a peer reads is registered byte-exact, never a whole page */
static void mr_pin__remote_read_exact(void **state)
{
	struct rmsg_ctx *ctx = ctx_new(0);
	uint8_t *p = page_buf(2);
	struct rmsgi_pin a;
	uint32_t lk, rk;

	(void)state;
	rmsgi_mr_set_reg(ctx, &fake_ops, NULL);
	assert_int_equal(rmsgi_mr_pin(ctx, p + 5, 3000, RMSG_ACCESS_REMOTE_READ,
				      &a, &lk, &rk),
			 0);
	assert_ptr_equal(fk.last_addr, p + 5);
	assert_int_equal(fk.last_len, 3000);
	assert_int_equal(fk.last_access, RMSG_ACCESS_REMOTE_READ);
	rmsgi_mr_unpin(ctx, &a);
	ctx_free(ctx);
	free(p);
}

/* a rendezvous piece under a memory window: exact bytes, never inside an
 * app's region, and a registration shared only for the same bytes (the
 * window's peer reaches its whole registration on rxe) */
static void mr_pin__window_exact_only(void **state)
{
	struct rmsg_ctx *ctx = ctx_new(0);
	uint8_t *p = page_buf(2);
	struct rmsgi_pin a, b, c;
	struct rmsg_mr *mr;
	uint32_t lk, rk;

	(void)state;
	rmsgi_mr_set_reg(ctx, &fake_ops, NULL);
	assert_int_equal(rmsg_mr_reg(ctx, p, 2 * PG, 0, &mr), 0);
	assert_int_equal(fk.regs, 1);
	assert_int_equal(rmsgi_mr_pin(ctx, p + 5, 3000, RMSGI_ACCESS_MW_BIND,
				      &a, &lk, &rk),
			 0);
	assert_null(a.mr); /* not the region's registration */
	assert_int_equal(fk.regs, 2);
	assert_ptr_equal(fk.last_addr, p + 5);
	assert_int_equal(fk.last_len, 3000);
	assert_int_equal(fk.last_access, RMSGI_ACCESS_MW_BIND);
	/* inside a's bytes, but not the same bytes: its own */
	assert_int_equal(rmsgi_mr_pin(ctx, p + 10, 100, RMSGI_ACCESS_MW_BIND,
				      &b, &lk, &rk),
			 0);
	assert_int_equal(fk.regs, 3);
	assert_ptr_not_equal(a.ent, b.ent);
	/* the same bytes: shared */
	assert_int_equal(rmsgi_mr_pin(ctx, p + 5, 3000, RMSGI_ACCESS_MW_BIND,
				      &c, &lk, &rk),
			 0);
	assert_int_equal(fk.regs, 3);
	assert_ptr_equal(a.ent, c.ent);
	rmsgi_mr_unpin(ctx, &a);
	rmsgi_mr_unpin(ctx, &b);
	rmsgi_mr_unpin(ctx, &c);
	assert_int_equal(rmsg_mr_dereg(mr), 0);
	ctx_free(ctx);
	free(p);
}

/* memory inside an app's region uses it, and holds it: -EBUSY */
static void mr_pin__region_busy(void **state)
{
	struct rmsg_ctx *ctx = ctx_new(0);
	uint8_t *p = page_buf(4);
	struct rmsgi_pin a, b;
	struct rmsg_mr *mr;
	uint32_t lk, rk;

	(void)state;
	rmsgi_mr_set_reg(ctx, &fake_ops, NULL);
	assert_int_equal(rmsg_mr_reg(ctx, p, 4 * PG, 0, &mr), 0);
	assert_int_equal(rmsgi_mr_pin(ctx, p + PG, PG, 0, &a, &lk, &rk), 0);
	assert_ptr_equal(a.mr, mr);
	assert_int_equal(lk, mr->lkey);
	assert_int_equal(fk.regs, 1);
	/* a rendezvous read of it gets its own registration */
	assert_int_equal(
		rmsgi_mr_pin(ctx, p, 10, RMSG_ACCESS_REMOTE_READ, &b, &lk, &rk),
		0);
	assert_null(b.mr);
	assert_int_equal(fk.regs, 2);
	rmsgi_mr_unpin(ctx, &b);
	assert_int_equal(rmsg_mr_dereg(mr), -EBUSY);
	rmsgi_mr_unpin(ctx, &a);
	assert_int_equal(rmsg_mr_dereg(mr), 0);
	assert_int_equal(fk.live, 0);
	ctx_free(ctx);
	free(p);
}

/* pinned bytes of the cache count against the budget */
static void mr_pin__budget_and_failure(void **state)
{
	struct rmsg_ctx *ctx = ctx_new(2 * PG);
	uint8_t *p = page_buf(4);
	struct rmsgi_pin a, b;
	uint32_t lk, rk;

	(void)state;
	rmsgi_mr_set_reg(ctx, &fake_ops, NULL);
	assert_int_equal(rmsgi_mr_pin(ctx, p, 2 * PG, 0, &a, &lk, &rk), 0);
	assert_int_equal(rmsgi_mr_pin(ctx, p + 2 * PG, 1, 0, &b, &lk, &rk),
			 -ENOMEM);
	assert_int_equal(fk.regs, 1);
	rmsgi_mr_unpin(ctx, &a);
	fk.fail = 1;
	assert_int_equal(rmsgi_mr_pin(ctx, p, 1, 0, &b, &lk, &rk), -ENOMEM);
	assert_int_equal(ctx->mrt.bytes, 0);
	assert_int_equal(ctx->mrt.rc_n, 0);
	fk.fail = 0;
	ctx_free(ctx);
	free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(desc_encode__roundtrip),
		cmocka_unit_test(desc_decode__malformed),
		cmocka_unit_test(desc_check__bounds_and_rights),
		cmocka_unit_test(mr_reg__args),
		cmocka_unit_test(mr_reg__budget),
		cmocka_unit_test(mr_reg__lazy_registration),
		cmocka_unit_test(mr_export__args),
		cmocka_unit_test(mr_target__checks),
		cmocka_unit_test(mr_export__rdma_window),
		cmocka_unit_test(mr_pin__shared_while_in_use),
		cmocka_unit_test(mr_pin__remote_read_exact),
		cmocka_unit_test(mr_pin__window_exact_only),
		cmocka_unit_test(mr_pin__region_busy),
		cmocka_unit_test(mr_pin__budget_and_failure),
	};

	unit_filter();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
