// SPDX-License-Identifier: MIT
/*
 * regcache.c - keys for local memory that one-sided operations and
 * rendezvous sends use (rmsgi_mr_pin/unpin).
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
 * Pinned bytes count against the context's budget (mr.c).
 */
#include <stdlib.h>

#include "rmsg_int.h"

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
	uintptr_t a = (uintptr_t)addr, ps = rmsgi_page_size(), s, e;
	struct rmsgi_rc_ent *ent;
	struct rmsgi_list *n;
	bool peer = need & (RMSG_ACCESS_REMOTE_READ | RMSGI_ACCESS_MW_BIND);
	struct rmsg_mr *mr;
	int ret;

	pin->mr = NULL;
	pin->ent = NULL;
	pin->h = NULL;
	if (!t->ops || !len || a + len < a)
		return -EINVAL;

	/* the app's regions are local-only for this purpose: a rendezvous
	 * must not expose a region beyond what was exported */
	if (!peer && (mr = mr_covering(t, a, len))) {
		mr->busy++;
		pin->mr = mr;
		*lkey_p = mr->lkey;
		*rkey_p = 0;
		return 0;
	}
	/* pages for local use; exact bytes for what a peer may read */
	s = peer ? a : a & ~(ps - 1);
	e = peer ? a + len : (a + len + ps - 1) & ~(ps - 1);
	for (n = t->rc.next; n != &t->rc; n = n->next) {
		ent = rmsgi_list_entry(n, struct rmsgi_rc_ent, link);
		/* a window's registration bounds what its peer reaches
		 * (rxe checks the MR's range): shared only when exact */
		if (ent->access == need && ent->start <= s && e <= ent->end &&
		    (!(need & RMSGI_ACCESS_MW_BIND) ||
		     (ent->start == s && ent->end == e)))
			goto hit;
	}
	ent = calloc(1, sizeof(*ent));
	if (!ent)
		return -ENOMEM;
	ent->start = s;
	ent->end = e;
	ent->access = need;
	ent->charged = rmsgi_page_span((void *)s, e - s);
	ret = rmsgi_budget_take(ctx, ent->charged);
	if (ret) {
		free(ent);
		return ret;
	}
	ret = t->ops->reg(t->priv, (void *)s, e - s, need, &ent->h, &ent->lkey,
			  &ent->rkey);
	if (ret) {
		rmsgi_budget_give(ctx, ent->charged);
		free(ent);
		return ret;
	}
	rmsgi_list_add_head(&t->rc, &ent->link);
	t->rc_n++;
hit:
	ent->refs++;
	pin->ent = ent;
	pin->h = ent->h;
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
	rmsgi_budget_give(ctx, ent->charged);
	free(ent);
}
