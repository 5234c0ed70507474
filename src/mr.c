// SPDX-License-Identifier: MIT
/*
 * mr.c - memory regions, their descriptors, and the registration cache.
 *
 * A region is memory the app registered with rmsg_mr_reg(). It gets a
 * random 32-bit id, unique among the context's live regions; the exported
 * descriptor names it by that id (TCP) and by its rkey (RDMA). A TCP peer's
 * access is looked up by id, so a descriptor of a deregistered region finds
 * nothing (and a forged one is as likely to hit as guessing 32 random bits
 * plus the bounds); on RDMA the device checks the rkey.
 *
 * Registrations are made through hooks a transport installs (rdma.c, on
 * opening its device); before that a region only exists for TCP, and is
 * registered when the hooks arrive.
 *
 * The registration cache: local memory passed to rmsg_send (rendezvous),
 * rmsg_write and rmsg_read needs keys on RDMA. Memory inside a region of
 * the app, or the pools, has them. Other memory gets a page-granular
 * registration (exact bytes when the peer may read it) that operations on
 * the same pages share while any of them is in flight, and that goes when
 * the last one completes. Idle registrations are deliberately not kept:
 * without a kernel notifier (ODP, or hooks on munmap/madvise/brk as UCX
 * and libfabric install) a freed and reused buffer cannot be told from the
 * same buffer, and sending from a stale registration would send old pages.
 * Pinned bytes, regions included, are bounded by the context's budget,
 * which the pools of pool.c (rmsg_buf_alloc, receive and copy buffers)
 * share: when a registration does not fit, idle pool slabs go first.
 */
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <sys/random.h>

#include "rmsg_int.h"
#include "pool.h"

static size_t page_size(void)
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
/*   0 magic, 1 version, 2 access, 3 flags, 4 region id (u32),          */
/*   8 rkey (u32), 12 reserved (0), 16 address (u64), 24 length (u64)   */

void rmsgi_desc_encode(const struct rmsgi_desc *d, void *buf)
{
	uint8_t *p = buf;

	p[0] = RMSGI_DESC_MAGIC;
	p[1] = RMSGI_DESC_VERSION;
	p[2] = d->access;
	p[3] = d->flags;
	rmsgi_put32(p + 4, d->rid);
	rmsgi_put32(p + 8, d->rkey);
	rmsgi_put32(p + 12, 0);
	rmsgi_put64(p + 16, d->addr);
	rmsgi_put64(p + 24, d->len);
}

int rmsgi_desc_decode(const void *buf, struct rmsgi_desc *d)
{
	const uint8_t *p = buf;

	if (!buf || p[0] != RMSGI_DESC_MAGIC || p[1] != RMSGI_DESC_VERSION)
		return -EINVAL;
	if (p[2] & ~RMSGI_ACCESS_ALL || p[3] & ~RMSGI_DESC_F_RKEY ||
	    rmsgi_get32(p + 12) != 0)
		return -EINVAL;
	d->access = p[2];
	d->flags = p[3];
	d->rid = rmsgi_get32(p + 4);
	d->rkey = rmsgi_get32(p + 8);
	d->addr = rmsgi_get64(p + 16);
	d->len = rmsgi_get64(p + 24);
	if (d->rid == 0 || d->len == 0 || d->addr + d->len < d->addr)
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
/* the table of live regions                                            */

static struct rmsg_mr **hash_slot(struct rmsgi_mrtab *t, uint32_t id)
{
	return &t->hash[(id ^ (id >> 8) ^ (id >> 16)) % RMSGI_MR_HASH];
}

static struct rmsg_mr *mr_find(struct rmsgi_mrtab *t, uint32_t id)
{
	struct rmsg_mr *mr = *hash_slot(t, id);

	while (mr && mr->id != id)
		mr = mr->hnext;
	return mr;
}

static uint32_t random_id(struct rmsgi_mrtab *t)
{
	static uint64_t fallback;
	uint32_t id;

	do {
		if (getrandom(&id, sizeof(id), GRND_NONBLOCK) !=
		    (ssize_t)sizeof(id)) {
			/* no entropy yet: ids stay unique, just guessable */
			fallback = fallback * 6364136223846793005ull +
				   (uint64_t)time(NULL) +
				   1442695040888963407ull;
			id = (uint32_t)(fallback >> 32);
		}
	} while (id == 0 || mr_find(t, id));
	return id;
}

void rmsgi_mr_init(struct rmsg_ctx *ctx)
{
	struct rmsgi_mrtab *t = &ctx->mrt;

	memset(t, 0, sizeof(*t));
	rmsgi_list_init(&t->regions);
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
	return 0;
}

void rmsgi_budget_give(struct rmsg_ctx *ctx, size_t bytes)
{
	ctx->mrt.bytes -= bytes;
}

static size_t page_span(const void *addr, size_t len)
{
	uintptr_t ps = page_size();
	uintptr_t s = (uintptr_t)addr & ~(ps - 1);
	uintptr_t e = ((uintptr_t)addr + len + ps - 1) & ~(ps - 1);

	return e - s;
}

static int mr_register(struct rmsg_ctx *ctx, struct rmsg_mr *mr)
{
	struct rmsgi_mrtab *t = &ctx->mrt;

	return t->ops->reg(t->priv, mr->addr, mr->len,
			   mr->access | RMSGI_ACCESS_LOCAL_WRITE, &mr->h,
			   &mr->lkey, &mr->rkey);
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

		if (mr->h)
			t->ops->dereg(t->priv, mr->h);
		mr->h = NULL;
		mr->busy = 0;
	}
	/* every operation has completed: entries left are leaks of a
	 * failed teardown; drop them with the device */
	while ((n = rmsgi_list_pop(&t->rc))) {
		struct rmsgi_rc_ent *e =
			rmsgi_list_entry(n, struct rmsgi_rc_ent, link);

		t->ops->dereg(t->priv, e->h);
		t->bytes -= e->charged;
		free(e);
	}
	t->rc_n = 0;
	t->ops = NULL;
	t->priv = NULL;
}

static void mr_free(struct rmsg_mr *mr)
{
	struct rmsgi_mrtab *t = &mr->ctx->mrt;
	struct rmsg_mr **p;

	for (p = hash_slot(t, mr->id); *p; p = &(*p)->hnext)
		if (*p == mr) {
			*p = mr->hnext;
			break;
		}
	rmsgi_list_del(&mr->link);
	if (mr->h && t->ops)
		t->ops->dereg(t->priv, mr->h);
	t->bytes -= mr->charged;
	free(mr);
}

void rmsgi_mr_fini(struct rmsg_ctx *ctx)
{
	struct rmsgi_list *n;

	rmsgi_mr_clear_reg(ctx);
	while ((n = ctx->mrt.regions.next) != &ctx->mrt.regions)
		mr_free(rmsgi_list_entry(n, struct rmsg_mr, link));
}

int rmsgi_mr_target(struct rmsg_ctx *ctx, uint32_t rid, uint64_t off,
		    uint64_t len, int access, uint8_t **p,
		    struct rmsg_mr **mr_p)
{
	struct rmsg_mr *mr = rid ? mr_find(&ctx->mrt, rid) : NULL;

	if (!mr || (mr->access & access) != access)
		return -EACCES;
	if (off > mr->len || len > mr->len - off)
		return -EINVAL;
	*p = mr->addr + off;
	if (mr_p) {
		mr->busy++;
		*mr_p = mr;
	}
	return 0;
}

void rmsgi_mr_unbusy(struct rmsg_ctx *ctx, struct rmsg_mr *mr)
{
	(void)ctx;
	if (mr->busy)
		mr->busy--;
}

/* a region of the app that holds [addr, addr+len) and has keys */
static struct rmsg_mr *mr_covering(struct rmsgi_mrtab *t, uintptr_t a,
				   size_t len)
{
	struct rmsgi_list *n;

	for (n = t->regions.next; n != &t->regions; n = n->next) {
		struct rmsg_mr *mr = rmsgi_list_entry(n, struct rmsg_mr, link);
		uintptr_t s = (uintptr_t)mr->addr;

		if (mr->h && a >= s && a - s <= mr->len &&
		    len <= mr->len - (a - s))
			return mr;
	}
	return NULL;
}

int rmsgi_mr_pin(struct rmsg_ctx *ctx, const void *addr, size_t len, int need,
		 struct rmsgi_pin *pin, uint32_t *lkey_p, uint32_t *rkey_p)
{
	struct rmsgi_mrtab *t = &ctx->mrt;
	uintptr_t a = (uintptr_t)addr, ps = page_size(), s, e;
	struct rmsgi_rc_ent *ent;
	struct rmsgi_list *n;
	struct rmsg_mr *mr;
	int ret;

	pin->mr = NULL;
	pin->ent = NULL;
	if (!t->ops || !len || a + len < a)
		return -EINVAL;
	/* the app's regions are local-only for this purpose: a rendezvous
	 * must not expose a region beyond the rights it was exported with */
	if (!(need & RMSG_ACCESS_REMOTE_READ) &&
	    (mr = mr_covering(t, a, len))) {
		mr->busy++;
		pin->mr = mr;
		*lkey_p = mr->lkey;
		*rkey_p = mr->rkey;
		return 0;
	}
	/* pages for local use; exact bytes for what a peer may read */
	s = need & RMSG_ACCESS_REMOTE_READ ? a : a & ~(ps - 1);
	e = need & RMSG_ACCESS_REMOTE_READ ? a + len
					   : (a + len + ps - 1) & ~(ps - 1);
	for (n = t->rc.next; n != &t->rc; n = n->next) {
		ent = rmsgi_list_entry(n, struct rmsgi_rc_ent, link);
		if (ent->access == need && ent->start <= s && e <= ent->end)
			goto hit;
	}
	ent = calloc(1, sizeof(*ent));
	if (!ent)
		return -ENOMEM;
	ent->start = s;
	ent->end = e;
	ent->access = need;
	ent->charged = page_span((void *)s, e - s);
	ret = rmsgi_budget_take(ctx, ent->charged);
	if (ret) {
		free(ent);
		return ret;
	}
	ret = t->ops->reg(t->priv, (void *)s, e - s, need, &ent->h, &ent->lkey,
			  &ent->rkey);
	if (ret) {
		t->bytes -= ent->charged;
		free(ent);
		return ret;
	}
	rmsgi_list_add_head(&t->rc, &ent->link);
	t->rc_n++;
hit:
	ent->refs++;
	pin->ent = ent;
	*lkey_p = ent->lkey;
	*rkey_p = ent->rkey;
	return 0;
}

void rmsgi_mr_unpin(struct rmsg_ctx *ctx, struct rmsgi_pin *pin)
{
	struct rmsgi_mrtab *t = &ctx->mrt;
	struct rmsgi_rc_ent *ent = pin->ent;

	if (pin->mr && pin->mr->busy)
		pin->mr->busy--;
	pin->mr = NULL;
	pin->ent = NULL;
	if (!ent || --ent->refs)
		return;
	/* never kept idle: the memory may be freed once its last
	 * operation completed (see the top of this file) */
	rmsgi_list_del(&ent->link);
	t->rc_n--;
	if (t->ops)
		t->ops->dereg(t->priv, ent->h);
	t->bytes -= ent->charged;
	free(ent);
}

/* ------------------------------------------------------------------ */
/* the API                                                              */

int rmsg_mr_reg(struct rmsg_ctx *ctx, void *addr, size_t len, int access,
		struct rmsg_mr **mr_p)
{
	struct rmsgi_mrtab *t;
	struct rmsg_mr *mr, **slot;
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
	mr->charged = page_span(addr, len);
	ret = rmsgi_budget_take(ctx, mr->charged);
	if (ret)
		goto undo_mr;
	if (t->ops) {
		ret = mr_register(ctx, mr);
		if (ret)
			goto undo_budget;
	}
	mr->id = random_id(t);
	slot = hash_slot(t, mr->id);
	mr->hnext = *slot;
	*slot = mr;
	rmsgi_list_add_tail(&t->regions, &mr->link);
	*mr_p = mr;
	return 0;

undo_budget:
	t->bytes -= mr->charged;
undo_mr:
	free(mr);
	return ret;
}

int rmsg_mr_dereg(struct rmsg_mr *mr)
{
	if (!mr)
		return -EINVAL;
	if (mr->busy)
		return -EBUSY;
	mr_free(mr);
	return 0;
}

int rmsg_mr_export(const struct rmsg_mr *mr, void *desc)
{
	struct rmsgi_desc d;

	if (!mr || !desc)
		return -EINVAL;
	memset(&d, 0, sizeof(d));
	d.access = (uint8_t)mr->access;
	d.flags = mr->h ? RMSGI_DESC_F_RKEY : 0;
	d.rid = mr->id;
	d.rkey = mr->h ? mr->rkey : 0;
	d.addr = (uintptr_t)mr->addr;
	d.len = mr->len;
	rmsgi_desc_encode(&d, desc);
	return 0;
}

/* the largest region of the context that grants @access: a bound on what
 * one peer's one-sided operation can have touched */
size_t rmsgi_mr_max_len(const struct rmsg_ctx *ctx, int access)
{
	const struct rmsgi_list *n;
	size_t max = 0;

	for (n = ctx->mrt.regions.next; n != &ctx->mrt.regions; n = n->next) {
		const struct rmsg_mr *mr =
			rmsgi_list_entry(n, struct rmsg_mr, link);

		if ((mr->access & access) == access && mr->len > max)
			max = mr->len;
	}
	return max;
}
